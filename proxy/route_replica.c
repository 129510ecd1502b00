/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_replica.c — `replicas: N` as a route (route_replica.h). Per slot, its key's owners are
 * recomputed from the pool's table and shared health at each step (a hash and the table's walk
 * of N nodes), so nothing of the membership is stored in a request:
 *
 *   write or delete -> sent to every owner up at once: the first owner up (the primary) from
 *                      this route, the others from child[0]; the owners ejected get the key in
 *                      their rejoin journal (health_shared.h). Answered once every owner sent
 *                      to has answered: the primary's reply, unless an owner failed or
 *                      answered an error, then the first such reply (mcrouter's AllSyncRoute:
 *                      the worst reply; libchash-cache's rule, "written to K of M" is an error);
 *   read            -> the first owner up (hot_spread: a hot key's owners up in turn); a failure there: the next owner up (then, none
 *                      left, the walk beyond the owners: child[1]); a miss while another owner
 *                      is up: read from the next one (R_NEXT), and a hit there is answered and
 *                      copied back to the owner that missed (a fetch at the one that has it,
 *                      then a store that never overwrites: RESTORE without REPLACE, memcached's
 *                      add), unless the key was written through this worker meanwhile (its
 *                      write generation, warm.h). The next owner failing: the first again.
 *
 * A slot's state word at this route's level (px_rq_state): for a write, the fan-out's
 * (rp_fan *, 0 with one owner up); for a read, low byte the step, bits 8..31 the key's write
 * generation when the read began, high 32 bits the uid of the owner that missed.
 * Cost: a write of one key with N owners up is N backend requests and, when the primary is not
 * the last to answer, one copy of its reply (thread block cache, buf.h); the keys of a split
 * write that counts (DEL of several keys) go one backend request each, and so do a split read's
 * while another owner is up (a part's reply must be one key's: its count, its miss); MSET's
 * keys are coalesced per server as without replicas.
 */
#include "route_replica.h"
#include "request.h"
#include "route_pool.h"
#include "warm.h"

#include "hot/topk.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#define RP_MAX 8u /* replicas at most (the config's bound) */

enum { R_READ = 1, R_NEXT, R_AGAIN };

/* ---- owners ----------------------------------------------------------------------------------- */

/* The key's owners (the first `replicas` distinct servers of its walk) into own[]; their
 * number, 0 when the walk is unsupported (jump). */
static size_t owners_of(const px_pool *pool, const char *key, size_t len, size_t *own)
{
    size_t r = pool->conf->replicas > 0 ? (size_t)pool->conf->replicas : 1, n = 0;
    if (r > RP_MAX)
        r = RP_MAX;
    uint64_t kh = ch_key_hash(pool->table, key, len);
    if (ch_replicas_hash(pool->table, kh, r, own, &n) != CH_OK)
        return 0;
    return n;
}

static bool tried_uid(const px_rq_slot *sl, uint32_t uid)
{
    for (uint32_t i = 0; i < sl->ntried; i++)
        if (sl->tried[i] == uid)
            return true;
    return false;
}

/* The first of owners own[0, n) of slot s's key that is up and not tried yet, or NULL. */
static px_server *next_of(px_rq *rq, px_slot s, const size_t *own, size_t n)
{
    px_pool *pool = rq->pool;
    for (size_t i = 0; i < n; i++)
        if (own[i] < pool->nservers && px_health_up(pool->health, own[i]) &&
            !tried_uid(&rq->slots[s], pool->servers[own[i]].uid))
            return &pool->servers[own[i]];
    return NULL;
}

/* hot_spread: whether slot s's key is hot now (the worker's detector, as the near cache asks:
 * its reads' lower bound this window reached the worker's share of hot_threshold). */
static bool hot_now(px_rq *rq, px_slot s)
{
    px_pool *pool = rq->pool;
    char buf[PX_MAX_ROUTE_KEY];
    size_t len;
    ch__topk_entry e;
    const char *key = pool->hot != NULL ? px_rq_key_bytes(rq, rq->slots[s].key, buf, sizeof(buf),
                                                          &len)
                                        : NULL;
    return key != NULL && ch__topk_find(pool->hot, XXH3_64bits(key, len), &e) &&
           e.count - e.error >= pool->near_threshold;
}

/* hot_spread: the up owner of own[0, n) whose turn it is (the worker's rotation), or NULL. */
static px_server *spread_of(px_rq *rq, px_slot s, const size_t *own, size_t n)
{
    px_pool *pool = rq->pool;
    px_server *up[RP_MAX];
    size_t nup = 0;
    for (size_t i = 0; i < n; i++)
        if (own[i] < pool->nservers && px_health_up(pool->health, own[i]) &&
            !tried_uid(&rq->slots[s], pool->servers[own[i]].uid))
            up[nup++] = &pool->servers[own[i]];
    return nup > 0 ? up[pool->spread_turn++ % nup] : NULL;
}

/* The same, the owners computed now (the table and health of this moment). */
static px_server *next_owner(px_rq *rq, px_slot s)
{
    char decoded[PX_MAX_ROUTE_KEY];
    size_t len, own[RP_MAX];
    const char *key = px_rq_route_key(rq, s, decoded, sizeof(decoded), &len);
    return next_of(rq, s, own, key != NULL ? owners_of(rq->pool, key, len, own) : 0);
}

/* The pool's server of this uid, or NULL (retired by a reload meanwhile). O(servers). */
static px_server *server_of(px_pool *pool, uint32_t uid)
{
    for (size_t i = 0; i < pool->nservers; i++)
        if (pool->servers[i].uid == uid)
            return &pool->servers[i];
    return NULL;
}

/* ---- read repair: detached, like the warm-up's fills ------------------------------------------ */

typedef struct rp_repair {
    px_pool *pool;
    uint64_t cid;
    uint32_t gen, to; /* the key's write generation at the read; the uid of the owner to fill */
    size_t len;
    char key[];
} rp_repair;

static void repair_stored(px_frag *f, const px_reply *r)
{
    rp_repair *rp = f->ctx;
    px_pool *pool = rp->pool;
    if (r->kind != PX_REPLY_FAILED && pool->codec->fill_stored(r) > 0)
        pool->m.warm.replica_repairs++;
    else /* the key was there (never overwritten), or the store failed */
        pool->m.warm.replica_repair_skips++;
    free(rp);
}

/* The fetch's reply at the owner that has the key: stored at the one that missed, unless the
 * key was written meanwhile, or it is not up. */
static void repair_fetched(px_frag *f, const px_reply *r)
{
    rp_repair *rp = f->ctx;
    px_pool *pool = rp->pool;
    px_server *to = server_of(pool, rp->to);
    px_buf b = {0};
    uint8_t expect = 0;
    int rc = 0;
    if (r->kind != PX_REPLY_FAILED && r->kind != PX_REPLY_ERROR && !pool->io->stopping &&
        px_warm_gen(pool, rp->key, rp->len) == rp->gen && to != NULL &&
        px_health_up(pool->health, to->index))
        rc = pool->codec->encode_fill(&b, rp->key, rp->len, r, (int64_t)time(NULL), &expect);
    px_frag *g = rc > 0 ? px_frag_new(0) : NULL;
    if (g == NULL) {
        pool->m.warm.replica_repair_skips++;
        px_buf_free(&b);
        free(rp);
        return;
    }
    g->kind = PX_FRAG_FORWARD;
    g->done = repair_stored;
    g->ctx = rp;
    g->cid = rp->cid;
    px_warm_request e = {NULL, rp->key, rp->len, &b, expect};
    if (px_server_send(to, g, px_warm_encode, &e) != 0) {
        pool->m.warm.replica_repair_skips++;
        px_frag_free(g);
        free(rp);
    }
    px_buf_free(&b);
}

/* Copies key from server `from` to the owner of uid `to` that missed it (counted once: a
 * repair or a skip). Nothing waits for it; the client's reply is not delayed by it. */
static void repair(px_pool *pool, const char *key, size_t len, uint64_t cid, uint32_t gen,
                   px_server *from, uint32_t to)
{
    rp_repair *rp = NULL;
    px_frag *f = NULL;
    if (pool->codec->encode_fetch == NULL || pool->codec->encode_fill == NULL ||
        pool->codec->fill_stored == NULL || pool->io->stopping || (rp = malloc(sizeof(*rp) + len)) == NULL ||
        (f = px_frag_new(0)) == NULL) {
        pool->m.warm.replica_repair_skips++;
        free(rp);
        return;
    }
    *rp = (rp_repair){pool, cid, gen, to, len};
    memcpy(rp->key, key, len);
    f->kind = PX_FRAG_FORWARD;
    f->done = repair_fetched;
    f->ctx = rp;
    f->cid = cid;
    px_warm_request e = {pool->codec->encode_fetch, rp->key, rp->len, NULL, 0};
    if (px_server_send(from, f, px_warm_encode, &e) != 0) {
        pool->m.warm.replica_repair_skips++;
        px_frag_free(f);
        free(rp);
    }
}

/* ---- writes ----------------------------------------------------------------------------------- */

/* A write's fan-out: the owners not yet answered, and the reply kept for the answer. */
typedef struct rp_fan {
    uint32_t pending;
    uint8_t have; /* FAN_NONE, FAN_PRIMARY (the primary's reply), FAN_WORST (a failure's) */
    px_reply_kind kind;
    int64_t integer;
    size_t len;
    char *p; /* len bytes (px_cache_alloc) */
} rp_fan;

enum { FAN_NONE, FAN_PRIMARY, FAN_WORST };

static void fan_keep(rp_fan *fan, const px_reply *r, uint8_t have)
{
    char *p = r->len > 0 ? px_cache_alloc(r->len) : NULL;
    if (r->len > 0 && p == NULL)
        return; /* out of memory: the answer is the next reply kept, or the last one */
    if (fan->p != NULL)
        px_cache_free(fan->p, fan->len);
    if (p != NULL)
        memcpy(p, r->p, r->len);
    *fan = (rp_fan){fan->pending, have, r->kind, r->integer, r->len, p};
}

static void fan_free(rp_fan *fan)
{
    if (fan->p != NULL)
        px_cache_free(fan->p, fan->len);
    px_cache_free(fan, sizeof(*fan));
}

/* An owner's answer r to write slot s (primary: the first owner's). */
static void write_part(px_route *rt, px_rq *rq, px_slot s, const px_reply *r, bool primary)
{
    uint64_t *st = px_rq_state(rq, s, rt);
    rp_fan *fan = (rp_fan *)(uintptr_t)*st;
    if (fan == NULL) { /* one owner up: its answer as it is */
        px_rq_return(rq, rt, &s, 1, r);
        return;
    }
    bool bad = r->kind == PX_REPLY_FAILED || r->kind == PX_REPLY_ERROR;
    bool last = --fan->pending == 0;
    if (last && (fan->have == FAN_NONE || (bad && fan->have != FAN_WORST))) {
        *st = 0; /* answered with r itself: no copy */
        fan_free(fan);
        px_rq_return(rq, rt, &s, 1, r);
        return;
    }
    if (bad && fan->have != FAN_WORST)
        fan_keep(fan, r, FAN_WORST);
    else if (primary && fan->have == FAN_NONE)
        fan_keep(fan, r, FAN_PRIMARY);
    if (!last)
        return;
    *st = 0;
    px_reply a = {.p = fan->p, .len = fan->len, .kind = fan->kind, .integer = fan->integer};
    px_rq_return(rq, rt, &s, 1, &a); /* may free rq; fan is its own */
    fan_free(fan);
}

/* Write slot s of key[0, len) with owners own[0, n): sent to those up, journaled for those
 * out. False when none is up (the caller routes it as without replicas). */
static bool write_start(px_route *rt, px_rq *rq, px_slot s, const char *key, size_t len,
                        const size_t *own, size_t n)
{
    px_pool *pool = rq->pool;
    px_server *up[RP_MAX];
    size_t nup = 0;
    bool any_down = px_health_any_down(pool->health);
    for (size_t i = 0; i < n; i++) {
        if (own[i] >= pool->nservers)
            continue;
        if (!any_down || px_health_up(pool->health, own[i]))
            up[nup++] = &pool->servers[own[i]];
        else /* a returning owner deletes it before it is readmitted: never served stale */
            px_health_journal(pool->health, own[i], key, len);
    }
    if (nup == 0)
        return false;
    /* A read repair begun before this write is dropped; not before a copy (a side request's
     * store, which never overwrites): it changes no value, and a copy's bump would drop the
     * copies of the other keys of its generation bucket. */
    if (!rq->side)
        px_warm_write(pool, key, len);
    /* A split write whose parts' replies are counts (DEL, EXISTS...: PX_MERGE_SUM) sends each
     * key alone: a part's reply is then this key's count, so the fan-out answers per key and
     * the merge adds each key once. MSET's parts (OK unless one failed) go coalesced: a part's
     * OK is each of its keys'. */
    if (rq->msg.cmd->merge != PX_MERGE_ALL_OK)
        rq->slots[s].alone = true;
    uint64_t *st = px_rq_state(rq, s, rt);
    *st = 0;
    if (nup > 1) {
        rp_fan *fan = px_cache_alloc(sizeof(*fan));
        if (fan == NULL) {
            px_rq_return_error(rq, rt, &s, 1, PX_ERR_SERVER, "out of memory");
            return true;
        }
        *fan = (rp_fan){.pending = (uint32_t)nup};
        *st = (uint64_t)(uintptr_t)fan;
    }
    px_rq_send(rq, s, rt, up[0]);
    for (size_t i = 1; i < nup; i++)
        px_rq_send(rq, s, rt->child[0], up[i]);
    return true;
}

/* Whether a one-server command's keys (MSETNX, EVAL) all have the owners of its first key. */
static bool same_owners(const px_rq *rq)
{
    const px_pool *pool = rq->pool;
    size_t first[RP_MAX], own[RP_MAX], n0 = 0;
    for (size_t k = 0; k < rq->msg.nkeys; k++) {
        char decoded[PX_MAX_ROUTE_KEY];
        size_t len;
        const char *key = px_rq_key_bytes(rq, k, decoded, sizeof(decoded), &len);
        if (key == NULL)
            return false;
        size_t n = owners_of(pool, key, len, k == 0 ? first : own);
        if (k == 0)
            n0 = n;
        else if (n != n0 || memcmp(own, first, n * sizeof(*own)) != 0)
            return false;
    }
    return true;
}

/* ---- the route -------------------------------------------------------------------------------- */

static void read_state(px_rq *rq, px_slot s, const px_route *rt, unsigned step, uint32_t gen,
                       uint32_t missed)
{
    *px_rq_state(rq, s, rt) = (uint64_t)missed << 32 | (uint64_t)(gen & 0xffffffu) << 8 | step;
}

/* Read slot s to server `to` at step `step`. */
static void read_send(px_route *rt, px_rq *rq, px_slot s, px_server *to, unsigned step,
                      uint32_t gen, uint32_t missed)
{
    read_state(rq, s, rt, step, gen, missed);
    px_rq_send(rq, s, rt, to);
}

static void replica_start(px_route *rt, px_rq *rq, px_slot s)
{
    px_pool *pool = rq->pool;
    char decoded[PX_MAX_ROUTE_KEY];
    size_t len, own[RP_MAX], n = 0;
    const char *key =
        rq->msg.nkeys > 0 ? px_rq_route_key(rq, s, decoded, sizeof(decoded), &len) : NULL;
    if (key != NULL)
        n = owners_of(pool, key, len, own);
    if (n == 0) {
        px_rq_pass(rq, s, rt, rt->child[1]);
        return;
    }
    if ((rq->msg.cmd->flags & PX_CMD_ONE_SERVER) != 0 && rq->msg.nkeys > 1 && !same_owners(rq)) {
        px_rq_return_error(rq, rt, &s, 1, PX_ERR_CROSS_SERVER, "");
        return;
    }
    if (!rq->msg.cmd->retry) {
        if (!write_start(rt, rq, s, key, len, own, n))
            px_rq_pass(rq, s, rt, rt->child[1]); /* no owner up: as without replicas */
        return;
    }
    /* A hot key's reads go to its owners in turn (hot_spread); a miss at one is read from the
     * first owner up and copied back, as any owner's miss. */
    bool spread = pool->conf->hot_spread && hot_now(rq, s);
    px_server *to = spread ? spread_of(rq, s, own, n) : next_of(rq, s, own, n);
    if (spread && to != NULL)
        pool->m.warm.replica_spread++;
    if (to == NULL) {
        px_rq_pass(rq, s, rt, rt->child[1]);
        return;
    }
    /* Sent alone while another owner up could answer a miss: its reply must tell one. */
    size_t nup = 0;
    for (size_t i = 0; i < n; i++)
        nup += own[i] < pool->nservers && px_health_up(pool->health, own[i]);
    if (rq->codec->is_miss != NULL && nup > 1)
        rq->slots[s].alone = true;
    read_send(rt, rq, s, to, R_READ, px_warm_gen(pool, key, len), 0);
}

/* The answer r to read slot s at its step. */
static void read_step(px_route *rt, px_rq *rq, px_slot s, const px_reply *r)
{
    px_pool *pool = rq->pool;
    uint64_t st = *px_rq_state(rq, s, rt);
    unsigned step = (unsigned)(st & 0xff);
    uint32_t gen = (uint32_t)(st >> 8) & 0xffffffu, missed = (uint32_t)(st >> 32);
    px_rq_slot *sl = &rq->slots[s];
    bool retry = !pool->io->stopping && sl->ntried < PX_MAX_DEPTH;
    px_server *to = NULL;
    if (step == R_READ && r->kind == PX_REPLY_FAILED && retry) {
        if ((to = next_owner(rq, s)) != NULL) {
            read_send(rt, rq, s, to, R_READ, gen, 0);
            return;
        }
        px_rq_pass(rq, s, rt, rt->child[1]); /* the walk beyond the owners */
        return;
    }
    bool miss = r->kind != PX_REPLY_FAILED && r->kind != PX_REPLY_ERROR &&
                rq->codec->is_miss != NULL && sl->alone && rq->codec->is_miss(&rq->msg, r);
    if ((step == R_READ || step == R_NEXT) && miss && retry &&
        (to = next_owner(rq, s)) != NULL) {
        /* The owner that missed first is the one repaired. */
        uint32_t first = step == R_READ ? sl->tried[sl->ntried - 1] : missed;
        read_send(rt, rq, s, to, R_NEXT, gen, first);
        return;
    }
    if (step == R_NEXT && r->kind == PX_REPLY_FAILED && retry) {
        if ((to = next_owner(rq, s)) == NULL)
            to = server_of(pool, missed); /* the first owner's miss is the answer */
        if (to != NULL) {
            read_send(rt, rq, s, to, to->uid == missed ? R_AGAIN : R_NEXT, gen, missed);
            return;
        }
    }
    if (step == R_NEXT && r->kind != PX_REPLY_FAILED && r->kind != PX_REPLY_ERROR && !miss) {
        char decoded[PX_MAX_ROUTE_KEY];
        size_t len;
        const char *key = px_rq_route_key(rq, s, decoded, sizeof(decoded), &len);
        px_server *from = server_of(pool, sl->tried[sl->ntried - 1]);
        pool->m.warm.replica_reads++;
        if (key != NULL && from != NULL && (px_warm_gen(pool, key, len) & 0xffffffu) == gen)
            repair(pool, key, len, rq->cid, px_warm_gen(pool, key, len), from, missed);
        else
            pool->m.warm.replica_repair_skips++; /* written meanwhile: not copied */
    }
    px_rq_return(rq, rt, &s, 1, r);
}

static void replica_reply(px_route *rt, px_rq *rq, const px_slot *slots, size_t n,
                          const px_reply *r)
{
    /* Until the last slot here is answered the request cannot complete; then rq may be gone. */
    bool write = !rq->msg.cmd->retry;
    if (!write && n > 1 && r->kind != PX_REPLY_FAILED) {
        px_rq_return(rq, rt, slots, n, r); /* keys one owner served together: no miss told */
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (write)
            write_part(rt, rq, slots[i], r, true);
        else
            read_step(rt, rq, slots[i], r);
    }
}

const px_route_ops px_route_replica_ops = {
    .name = "replica",
    .start = replica_start,
    .reply = replica_reply,
};

/* ---- child[0]: the owners after the first ----------------------------------------------------- */

static void copy_start(px_route *rt, px_rq *rq, px_slot s)
{
    px_rq_return_error(rq, rt, &s, 1, PX_ERR_SERVER, "replica copies are sent, not started");
}

static void copy_reply(px_route *rt, px_rq *rq, const px_slot *slots, size_t n,
                       const px_reply *r)
{
    for (size_t i = 0; i < n; i++)
        write_part(rt->parent, rq, slots[i], r, false);
}

const px_route_ops px_route_replica_copy_ops = {
    .name = "replica-copy",
    .start = copy_start,
    .reply = copy_reply,
};

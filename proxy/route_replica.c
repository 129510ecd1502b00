/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_replica.c — `replicas: N` as a route (route_replica.h): a policy over N leaves, child[i]
 * the key's i-th owner (its rank, PX_PLACE_REPLICA), and child[N] the current placement's leaf.
 * Per slot, the owners up are looked at again at each step (each rank leaf's placement and the
 * shared health), so nothing of the membership is stored in a request:
 *
 *   write or delete -> called on the child of every owner up at once; the owners ejected get
 *                      the key in their rejoin journal (health_shared.h). Answered once every
 *                      child called has answered: the first owner's (the primary's) reply,
 *                      unless one failed or answered an error, then the first such reply
 *                      (mcrouter's AllSyncRoute: the worst reply; libchash-cache's rule, "written
 *                      to K of M" is an error);
 *   read            -> the child of the first owner up (hot_spread: a hot key's owners up in
 *                      turn); a failure there: the next owner up (then, none left, the walk
 *                      beyond the owners: child[N]); a miss while another owner is up: read from
 *                      the next one (R_NEXT), and a hit there is answered and copied back to the
 *                      owner that missed (fired side requests: a fetch through the child that has
 *                      it, then a store through the one that missed, RESTORE without REPLACE,
 *                      memcached's add: never overwriting), unless the key was written through
 *                      this worker meanwhile (its write generation, warm.h). The next owner
 *                      failing: the first again (R_AGAIN), whose miss is the answer.
 *
 * Only the leaves send. Which owner answered is the child it came through (px_rq_via).
 * A slot's word at this route's level (rp_word): a write's fan-out, or a read's progress.
 * Cost: a write of one key with N owners up is N backend requests and, when the primary is not
 * the last to answer, one copy of its reply (thread block cache, buf.h); the keys of a split
 * write that counts (DEL of several keys) go one backend request each, and so do a split read's
 * while another owner is up (a part's reply must be one key's: its count, its miss); MSET's
 * keys are coalesced per server as without replicas.
 */
#include "route_replica.h"
#include "copy.h"
#include "request.h"
#include "route_pool.h"
#include "warm.h"

#include <stdlib.h>
#include <string.h>

enum { R_READ = 1, R_NEXT, R_AGAIN };

/* ---- owners ----------------------------------------------------------------------------------- */

/* The route's owners: its rank leaves (child[0, nrank)), then the walk's leaf. */
static unsigned nrank(const px_route *rt)
{
    return rt->nchild - 1;
}

/* The rank of the child the answer being delivered came through (nrank: the walk's leaf). */
static unsigned via_rank(const px_route *rt, const px_rq *rq)
{
    const px_route *c = px_rq_via(rq);
    for (unsigned i = 0; i < rt->nchild; i++)
        if (rt->child[i] == c)
            return i;
    return nrank(rt);
}

/* Slot s's key's owners: where each rank's leaf places it, into own[] in rank order; their
 * number (0 when its key does not decode). */
static size_t owners(const px_route *rt, px_rq *rq, px_slot s, px_where *own)
{
    char decoded[PX_MAX_ROUTE_KEY];
    size_t len, n = 0;
    const char *key =
        rq->msg.nkeys > 0 ? px_rq_route_key(rq, s, decoded, sizeof(decoded), &len) : NULL;
    while (key != NULL && n < nrank(rt) &&
           (own[n] = px_route_where(rt->child[n], rq, key, len)).server != 0)
        n++;
    return n;
}

/* The first rank of own[0, n) up and not in the mask tried, or n. */
static unsigned first_up(const px_where *own, size_t n, unsigned tried)
{
    unsigned i = 0;
    while (i < n && (!own[i].up || (tried >> i & 1u) != 0))
        i++;
    return i;
}

/* hot_spread: the rank up of own[0, n) whose turn it is (the route's rotation, its state in
 * the worker's tree), or n. */
static unsigned spread_rank(px_route *rt, const px_where *own, size_t n)
{
    unsigned ranks[PX_MAX_REPLICAS], nup = 0;
    uint64_t *turn = rt->state;
    for (unsigned i = 0; i < n; i++)
        if (own[i].up)
            ranks[nup++] = i;
    return nup > 0 ? ranks[(*turn)++ % nup] : (unsigned)n;
}

/* How a read repair (copy.h) ended: counted. */
static void repaired(px_pool *pool, px_copy_end e)
{
    if (e == PX_COPY_STORED)
        pool->m.warm.replica_repairs++;
    else /* the key was there (never overwritten), written meanwhile, or the copy failed */
        pool->m.warm.replica_repair_skips++;
}

/* ---- writes ----------------------------------------------------------------------------------- */

/* A write's fan-out: the owners not yet answered, and the reply kept for the answer. */
typedef struct rp_fan {
    uint32_t pending;
    uint8_t have;    /* FAN_NONE, FAN_PRIMARY (the primary's reply), FAN_WORST (a failure's) */
    uint8_t primary; /* the rank of the first owner up: whose reply is the answer */
    px_reply_kind kind;
    int64_t integer;
    size_t len;
    char *p; /* len bytes (px_cache_alloc) */
} rp_fan;

enum { FAN_NONE, FAN_PRIMARY, FAN_WORST };

/* A read's progress: its step, the ranks tried (a bit each), the rank that missed first (the
 * one repaired) and the key's write generation when the read began (px_warm_gen). */
typedef struct rp_read {
    uint8_t step, tried, missed;
    uint32_t gen;
} rp_read;

/* A slot's word at this route: a write's fan-out (NULL with one owner up), or a read's. */
typedef union rp_word {
    rp_fan *fan;
    rp_read read;
} rp_word;
PX_SLOT_WORD(rp_word, rp_word)

static void fan_keep(rp_fan *fan, const px_reply *r, uint8_t have)
{
    char *p = r->len > 0 ? px_cache_alloc(r->len) : NULL;
    if (r->len > 0 && p == NULL)
        return; /* out of memory: the answer is the next reply kept, or the last one */
    if (fan->p != NULL)
        px_cache_free(fan->p, fan->len);
    if (p != NULL)
        memcpy(p, r->p, r->len);
    *fan = (rp_fan){fan->pending, have, fan->primary, r->kind, r->integer, r->len, p};
}

static void fan_free(rp_fan *fan)
{
    if (fan->p != NULL)
        px_cache_free(fan->p, fan->len);
    px_cache_free(fan, sizeof(*fan));
}

/* An owner's answer r to write slot s (primary: the first owner up's). */
static void write_part(px_route *rt, px_rq *rq, px_slot s, const px_reply *r, bool primary)
{
    rp_fan *fan = rp_word_get(rq, s, rt).fan;
    if (fan == NULL) { /* one owner up: its answer as it is */
        px_rq_return(rq, rt, &s, 1, r);
        return;
    }
    bool bad = r->kind == PX_REPLY_FAILED || r->kind == PX_REPLY_ERROR;
    bool last = --fan->pending == 0;
    if (last && (fan->have == FAN_NONE || (bad && fan->have != FAN_WORST))) {
        rp_word_set(rq, s, rt, (rp_word){.fan = NULL}); /* answered with r itself: no copy */
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
    rp_word_set(rq, s, rt, (rp_word){.fan = NULL});
    px_reply a = {.p = fan->p, .len = fan->len, .kind = fan->kind, .integer = fan->integer};
    px_rq_return(rq, rt, &s, 1, &a); /* may free rq; fan is its own */
    fan_free(fan);
}

/* Write slot s, its key's owners own[0, n): called on the children of those up, journaled for
 * those out. False when none is up (the caller routes it as without replicas). */
static bool write_start(px_route *rt, px_rq *rq, px_slot s, const px_where *own, size_t n)
{
    px_pool *pool = rq->pool;
    char decoded[PX_MAX_ROUTE_KEY];
    size_t len;
    const char *key = px_rq_route_key(rq, s, decoded, sizeof(decoded), &len);
    unsigned ranks[PX_MAX_REPLICAS], nup = 0;
    for (unsigned i = 0; i < n; i++) {
        if (own[i].up)
            ranks[nup++] = i;
        else if (own[i].index != SIZE_MAX) /* a returning owner deletes it before it is
                                               readmitted: never served stale */
            px_health_journal(pool->health, own[i].index, key, len);
    }
    if (nup == 0)
        return false;
    /* A read repair begun before this write is dropped; not before a copy (a side request's
     * store, which never overwrites): it changes no value, and a copy's bump would drop the
     * copies of the other keys of its generation bucket. */
    uint64_t kh;
    if (!rq->side && px_rq_key_hash(rq, rq->slots[s].key, &kh))
        px_warm_write(pool, kh);
    /* A split write whose parts' replies are counts (DEL, EXISTS...: PX_MERGE_SUM) sends each
     * key alone: a part's reply is then this key's count, so the fan-out answers per key and
     * the merge adds each key once. MSET's parts (OK unless one failed) go coalesced: a part's
     * OK is each of its keys'. */
    if (rq->msg.cmd->merge != PX_MERGE_ALL_OK)
        rq->slots[s].alone = true;
    rp_fan *fan = NULL;
    if (nup > 1) {
        if ((fan = px_cache_alloc(sizeof(*fan))) == NULL) {
            px_rq_return_error(rq, rt, &s, 1, PX_ERR_SERVER, "out of memory");
            return true;
        }
        *fan = (rp_fan){.pending = nup, .primary = (uint8_t)ranks[0]};
    }
    rp_word_set(rq, s, rt, (rp_word){.fan = fan});
    /* An answer may come at once (a connection that cannot be opened): the fan-out counts it,
     * and the request cannot complete before the last call is made (pending). */
    for (unsigned i = 0; i < nup; i++)
        px_rq_call(rq, s, rt, rt->child[ranks[i]]);
    return true;
}

/* Whether a one-server command's keys (MSETNX, EVAL) have different owners at some rank. */
static bool cross(const px_route *rt, const px_rq *rq)
{
    for (unsigned i = 0; i < nrank(rt); i++)
        if (px_rq_cross(rq, rt->child[i]))
            return true;
    return false;
}

/* ---- reads ------------------------------------------------------------------------------------ */

/* Read slot s through rank `rank`'s child at step `step`, w its progress so far. */
static void read_call(px_route *rt, px_rq *rq, px_slot s, unsigned rank, unsigned step, rp_read w)
{
    w.step = (uint8_t)step;
    w.tried |= (uint8_t)(1u << rank);
    rp_word_set(rq, s, rt, (rp_word){.read = w});
    px_rq_call(rq, s, rt, rt->child[rank]);
}

static void read_start(px_route *rt, px_rq *rq, px_slot s, const px_where *own, size_t n)
{
    px_pool *pool = rq->pool;
    /* A hot key's reads go to its owners in turn (hot_spread); a miss at one is read from the
     * first owner up and copied back, as any owner's miss. */
    uint64_t kh = 0;
    bool spread = pool->conf->hot_spread && px_rq_key_hash(rq, rq->slots[s].key, &kh) &&
                  px_pool_hot(pool, kh);
    unsigned rank = spread ? spread_rank(rt, own, n) : first_up(own, n, 0);
    if (rank >= n) {
        px_rq_pass(rq, s, rt, rt->child[nrank(rt)]);
        return;
    }
    if (spread)
        pool->m.warm.replica_spread++;
    /* Sent alone while another owner up could answer a miss: its reply must tell one. */
    size_t nup = 0;
    for (size_t i = 0; i < n; i++)
        nup += own[i].up;
    if (rq->codec->is_miss != NULL && nup > 1)
        rq->slots[s].alone = true;
    (void)px_rq_key_hash(rq, rq->slots[s].key, &kh); /* it decodes: it has owners */
    read_call(rt, rq, s, rank, R_READ, (rp_read){.gen = px_warm_gen(pool, kh)});
}

/* The answer r to read slot s at its step, through rank `rank`'s child. */
static void read_step(px_route *rt, px_rq *rq, px_slot s, unsigned rank, const px_reply *r)
{
    px_pool *pool = rq->pool;
    rp_read w = rp_word_get(rq, s, rt).read;
    unsigned step = w.step;
    px_rq_slot *sl = &rq->slots[s];
    bool retry = !pool->io->stopping && sl->ntried < PX_MAX_DEPTH;
    px_where own[PX_MAX_REPLICAS];
    size_t n = owners(rt, rq, s, own);
    unsigned next = first_up(own, n, w.tried);
    if (step == R_READ && r->kind == PX_REPLY_FAILED && retry) {
        if (next < n)
            read_call(rt, rq, s, next, R_READ, w);
        else
            px_rq_pass(rq, s, rt, rt->child[nrank(rt)]); /* the walk beyond the owners */
        return;
    }
    bool miss = r->kind != PX_REPLY_FAILED && r->kind != PX_REPLY_ERROR &&
                rq->codec->is_miss != NULL && sl->alone && rq->codec->is_miss(&rq->msg, r);
    if ((step == R_READ || step == R_NEXT) && miss && retry && next < n) {
        /* The owner that missed first is the one repaired. */
        if (step == R_READ)
            w.missed = (uint8_t)rank;
        read_call(rt, rq, s, next, R_NEXT, w);
        return;
    }
    if (step == R_NEXT && r->kind == PX_REPLY_FAILED && retry) {
        if (next < n) /* another owner up; none: the first owner's miss is the answer */
            read_call(rt, rq, s, next, R_NEXT, w);
        else
            read_call(rt, rq, s, w.missed, R_AGAIN, w);
        return;
    }
    if (step == R_NEXT && r->kind != PX_REPLY_FAILED && r->kind != PX_REPLY_ERROR && !miss) {
        uint64_t kh;
        bool have = px_rq_key_hash(rq, rq->slots[s].key, &kh);
        pool->m.warm.replica_reads++;
        uint32_t now = have ? px_warm_gen(pool, kh) : 0;
        char decoded[PX_MAX_ROUTE_KEY];
        size_t len;
        const char *key = px_rq_route_key(rq, s, decoded, sizeof(decoded), &len);
        if (have && key != NULL && now == w.gen && rank < nrank(rt))
            px_copy(rq, rt->child[rank], rt->child[w.missed], key, len, now, repaired);
        else
            pool->m.warm.replica_repair_skips++; /* written meanwhile: not copied */
    }
    px_rq_return(rq, rt, &s, 1, r);
}

/* ---- the route -------------------------------------------------------------------------------- */

static void replica_start(px_route *rt, px_rq *rq, px_slot s)
{
    px_where own[PX_MAX_REPLICAS];
    size_t n = owners(rt, rq, s, own);
    if (n == 0) {
        px_rq_pass(rq, s, rt, rt->child[nrank(rt)]);
        return;
    }
    if ((rq->msg.cmd->flags & PX_CMD_ONE_SERVER) != 0 && rq->msg.nkeys > 1 && cross(rt, rq)) {
        px_rq_return_error(rq, rt, &s, 1, PX_ERR_CROSS_SERVER, "");
        return;
    }
    if (rq->msg.cmd->retry)
        read_start(rt, rq, s, own, n);
    else if (!write_start(rt, rq, s, own, n))
        px_rq_pass(rq, s, rt, rt->child[nrank(rt)]); /* no owner up: as without replicas */
}

static void replica_reply(px_route *rt, px_rq *rq, const px_slot *slots, size_t n,
                          const px_reply *r)
{
    unsigned rank = via_rank(rt, rq);
    bool write = !rq->msg.cmd->retry;
    if (rank >= nrank(rt) || (!write && n > 1 && r->kind != PX_REPLY_FAILED)) {
        /* the walk's, or keys one owner served together: no miss told */
        px_rq_return(rq, rt, slots, n, r);
        return;
    }
    /* Until the last slot here is answered the request cannot complete; then rq may be gone. */
    for (size_t i = 0; i < n; i++) {
        if (write) {
            rp_fan *fan = rp_word_get(rq, slots[i], rt).fan;
            write_part(rt, rq, slots[i], r, fan == NULL || fan->primary == rank);
        } else {
            read_step(rt, rq, slots[i], rank, r);
        }
    }
}

static int replica_build(px_route *rt, px_pool *pool, px_route *was)
{
    (void)pool, (void)was;
    rt->state = calloc(1, sizeof(uint64_t)); /* hot_spread's turn */
    return rt->state != NULL ? 0 : -1;
}

static void replica_free(px_route *rt)
{
    free(rt->state);
    rt->state = NULL;
}

const px_route_ops px_route_replica_ops = {
    .name = "replica",
    .start = replica_start,
    .reply = replica_reply,
    .build = replica_build,
    .free = replica_free,
};

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_pool.c — the leaf routes over one pool (route_pool.h). The current placement's leaf
 * hashes a slot's key once, routes it against the pool's current membership and shared health
 * (px_health_route), applies bounded loads when configured, and sends it to the first
 * candidate it has not tried. A failed send of a retryable command is routed again the same
 * way, against the membership and health of that moment, so nothing of the membership is
 * stored in a request and a reload has nothing to renumber; a slot tries at most the pool's
 * failover depth of servers, then its failure goes up (PX_REPLY_FAILED, with the reason).
 * The previous placement's leaf (a warm-up window's, warm.h) sends a key to the server that
 * held it before the change, and only there.
 */
#include "route_pool.h"
#include "request.h"
#include "warm.h"

#include <stdlib.h>
#include <string.h>

const px_leaf px_leaf_current = {PX_PLACE_CURRENT, 0}, px_leaf_previous = {PX_PLACE_PREVIOUS, 0},
              px_leaf_next = {PX_PLACE_NEXT, 0},
              px_leaf_replica[PX_MAX_REPLICAS] = {
                  {PX_PLACE_REPLICA, 0}, {PX_PLACE_REPLICA, 1}, {PX_PLACE_REPLICA, 2},
                  {PX_PLACE_REPLICA, 3}, {PX_PLACE_REPLICA, 4}, {PX_PLACE_REPLICA, 5},
                  {PX_PLACE_REPLICA, 6}, {PX_PLACE_REPLICA, 7}};

static px_placement placement(const px_route *leaf)
{
    return ((const px_leaf *)leaf->conf)->place;
}

/* Bounded loads (bounded_load_factor, docs/PROXY.md): the first server on the key's walk whose
 * in-flight fragments (those in its connections' FIFOs: sent or queued, reply not yet read) are
 * under ceil(c * (total + 1) * w / W). Returns false when off or unsupported (jump).
 * Cost: O(servers x connections) to add the loads up, then the library's walk. */
static bool bounded_owner(px_pool *pool, uint64_t kh, size_t *out)
{
    double c = pool->conf->bounded_load_factor;
    if (!(c >= 1) || pool->nservers == 0)
        return false;
    uint64_t stack[64], *loads = stack, total = 0;
    if (pool->nservers > 64 && (loads = malloc(pool->nservers * sizeof *loads)) == NULL)
        return false;
    for (size_t i = 0; i < pool->nservers; i++) {
        const px_server *s = &pool->servers[i];
        loads[i] = 0;
        for (unsigned k = 0; k < s->nconns; k++)
            loads[i] += s->conns[k].nfrags;
        total += loads[i];
    }
    bool ok = ch_lookup_bounded_hash(pool->table, kh, loads, total, c, out) == CH_OK &&
              *out < pool->nservers;
    if (loads != stack)
        free(loads);
    return ok;
}

/* The XXH3-64 of key (px_key_hash) while a readmitted server's ramp runs in pool, else 0 (not
 * asked for then: px_health_route_key and px_health_serves read it only during a ramp), so a
 * request pays that hash only during a ramp. */
static uint64_t slow_start_hash(const px_pool *pool, const char *key, size_t len, uint64_t now)
{
    return px_health_ramping(pool->health, now) ? px_key_hash(key, len) : 0;
}

/* The key's first `want` candidates (at most the pool's depth) into cand[], owner first; returns
 * their number (0: none up). With bounded loads the bounded choice goes first when it is up,
 * then the walk's candidates without it; an ejected bounded choice is skipped (the walk's
 * candidates as they are). The first candidate is the same whatever `want`: a slot not tried
 * anywhere yet asks for one, and the ring walk stops at the first up node instead of walking on
 * for depth distinct ones (most requests). */
static size_t candidates(px_pool *pool, const char *key, size_t len, size_t want, size_t *cand)
{
    size_t n = 0, b;
    uint64_t kh = ch_key_hash(pool->table, key, len); /* once: routing and bounded loads */
    uint64_t now = px_io_now(pool->io), xh = slow_start_hash(pool, key, len, now);
    if (px_health_route_key(pool->health, pool->table, kh, xh, now, want, cand, &n) != CH_OK) {
        /* jump has no walk: its owner only */
        if (px_health_route_key(pool->health, pool->table, kh, xh, now, 1, cand, &n) != CH_OK)
            n = 0;
    }
    if (n > 0 && bounded_owner(pool, kh, &b) && b != cand[0] &&
        px_health_serves(pool->health, b, xh, now)) {
        size_t j = 0;
        while (j < n && cand[j] != b)
            j++;
        if (j == n) /* not among them: the last one gives way */
            j = n - 1;
        memmove(cand + 1, cand, j * sizeof *cand);
        cand[0] = b;
    }
    return n;
}

static bool tried(const px_rq_slot *sl, const px_server *s)
{
    for (uint32_t i = 0; i < sl->ntried; i++)
        if (sl->tried[i] == s->uid)
            return true;
    return false;
}

/* The first current candidate of slot s not tried yet, or NULL. */
static px_server *next_current(px_rq *rq, px_slot s)
{
    px_pool *pool = rq->pool;
    char decoded[PX_MAX_ROUTE_KEY];
    size_t len;
    const char *key = px_rq_route_key(rq, s, decoded, sizeof(decoded), &len);
    if (key == NULL)
        return NULL;
    size_t cand[PX_MAX_DEPTH];
    size_t want = rq->slots[s].ntried == 0 && pool->depth > 0 ? 1 : pool->depth;
    if (rq->slots[s].ntried == 0 && !rq->msg.cmd->retry)
        px_route_pool_write_switch(pool, key, len);
    size_t n = candidates(pool, key, len, want, cand);
    /* A write while a server is out: if the key's owner is the one out, the write goes
     * elsewhere and the owner's copy becomes old; remember the key for the owner's rejoin
     * (health_shared.h, the rejoin journal). Only the first routing of a slot: a retry is a
     * read's. */
    if (rq->slots[s].ntried == 0 && !rq->msg.cmd->retry && px_health_any_down(pool->health)) {
        size_t owner = ch_lookup_hash(pool->table, ch_key_hash(pool->table, key, len));
        if (owner < pool->nservers && !px_health_up(pool->health, owner))
            px_health_journal(pool->health, owner, key, len);
    }
    for (size_t i = 0; i < n; i++)
        if (!tried(&rq->slots[s], &pool->servers[cand[i]]))
            return &pool->servers[cand[i]];
    return NULL;
}

void px_route_pool_write_switch(px_pool *pool, const char *key, size_t len)
{
    uint64_t now = px_io_now(pool->io);
    if (!px_health_ramping(pool->health, now) || pool->table == NULL)
        return;
    size_t owner = ch_lookup_hash(pool->table, ch_key_hash(pool->table, key, len));
    uint64_t xh = px_key_hash(key, len);
    if (owner < pool->nservers && px_health_up(pool->health, owner) &&
        !px_health_serves(pool->health, owner, xh, now))
        px_health_switch_early(pool->health, owner, xh);
}

bool px_route_pool_any_up(const px_pool *pool)
{
    for (size_t i = 0; i < pool->nservers; i++)
        if (px_health_up(pool->health, i))
            return true;
    return false;
}

/* Whether server s is one of pool's (not retired, not a staged change's new one). */
static bool in_pool(const px_pool *pool, const px_server *s)
{
    return s >= pool->servers && s < pool->servers + pool->nservers;
}

/* The owners of key in a replicated pool: the first `replicas` distinct servers of its walk,
 * their indexes into own[] (PX_MAX_REPLICAS of room), rank order; their number, 0 when the
 * placement has no walk (jump). Cost: a hash and the table's walk. */
static size_t owners(const px_pool *pool, const char *key, size_t len, size_t *own)
{
    size_t r = pool->conf->replicas > 0 ? (size_t)pool->conf->replicas : 1, n = 0;
    if (r > PX_MAX_REPLICAS)
        r = PX_MAX_REPLICAS;
    if (pool->table == NULL ||
        ch_replicas_hash(pool->table, ch_key_hash(pool->table, key, len), r, own, &n) != CH_OK)
        return 0;
    return n;
}

/* The server leaf's placement gives key, before health and failover, or NULL. */
static px_server *placed(const px_route *leaf, const px_pool *pool, const char *key, size_t len)
{
    size_t i, n, own[PX_MAX_REPLICAS];
    switch (placement(leaf)) {
    case PX_PLACE_CURRENT:
        if (pool->table == NULL)
            return NULL;
        i = ch_lookup_hash(pool->table, ch_key_hash(pool->table, key, len));
        return i < pool->nservers ? &pool->servers[i] : NULL;
    case PX_PLACE_PREVIOUS:
        if (pool->warm.table == NULL)
            return NULL;
        i = ch_lookup(pool->warm.table, key, len);
        return i < pool->warm.nsrc ? pool->warm.src[i] : NULL;
    case PX_PLACE_NEXT:
        if (pool->stage.table == NULL)
            return NULL;
        i = ch_lookup(pool->stage.table, key, len);
        return i < pool->stage.n ? pool->stage.to[i] : NULL;
    default: /* a placement without a walk (jump): its owner is the first, alone */
        i = ((const px_leaf *)leaf->conf)->rank;
        n = owners(pool, key, len, own);
        if (n == 0 && i == 0 && pool->table != NULL)
            n = 1, own[0] = ch_lookup_hash(pool->table, ch_key_hash(pool->table, key, len));
        return i < n && own[i] < pool->nservers ? &pool->servers[own[i]] : NULL;
    }
}

/* Whether server s of leaf's placement serves key now: the pool's up (the current placement's
 * past its readmission ramp's switch of the key, px_health_serves), a staged change's new one,
 * a window's old owner up or retired but kept for the window, not failed in it. */
static bool serves(const px_route *leaf, const px_pool *pool, const px_server *s, const char *key,
                   size_t len)
{
    if (placement(leaf) == PX_PLACE_PREVIOUS)
        return !s->warm_dead && (s->retired || px_health_up(pool->health, s->index));
    if (!in_pool(pool, s))
        return true;
    if (placement(leaf) != PX_PLACE_CURRENT)
        return px_health_up(pool->health, s->index);
    uint64_t now = px_io_now(pool->io);
    return px_health_serves(pool->health, s->index, slow_start_hash(pool, key, len, now), now);
}

static px_where pool_where(const px_route *leaf, const px_rq *rq, const char *key, size_t len)
{
    const px_pool *pool = rq->pool;
    const px_server *s = placed(leaf, pool, key, len);
    if (s == NULL)
        return (px_where){0, SIZE_MAX, false};
    return (px_where){s->uid, in_pool(pool, s) ? s->index : SIZE_MAX,
                      serves(leaf, pool, s, key, len)};
}

/* The server a leaf other than the current one sends slot s to: its placement's, when it
 * serves and is not tried; a replica rank's even when tried (the replica route picks the
 * ranks: the first owner, whose miss is the answer, is asked again after the next one failed). */
static px_server *next_placed(const px_route *leaf, px_rq *rq, px_slot s)
{
    char decoded[PX_MAX_ROUTE_KEY];
    size_t len;
    const char *key = px_rq_route_key(rq, s, decoded, sizeof(decoded), &len);
    px_server *to = key != NULL ? placed(leaf, rq->pool, key, len) : NULL;
    if (to == NULL || !serves(leaf, rq->pool, to, key, len))
        return NULL;
    return placement(leaf) == PX_PLACE_REPLICA || !tried(&rq->slots[s], to) ? to : NULL;
}

px_server *px_route_pool_next(const px_route *leaf, px_rq *rq, px_slot s)
{
    return placement(leaf) == PX_PLACE_CURRENT ? next_current(rq, s) : next_placed(leaf, rq, s);
}

/* Slot s has no server left: its failure (the reason) goes up. */
static void give_up(px_route *rt, px_rq *rq, px_slot s, const char *reason, size_t len)
{
    rq->pool->stats.forward_error++;
    px_reply f = {.p = reason, .len = len, .kind = PX_REPLY_FAILED};
    px_rq_return(rq, rt, &s, 1, &f);
}

static void pool_start(px_route *rt, px_rq *rq, px_slot s)
{
    px_server *to = px_route_pool_next(rt, rq, s);
    if (to == NULL) {
        static const char none[] = "no backend available";
        give_up(rt, rq, s, none, sizeof(none) - 1);
        return;
    }
    px_rq_send(rq, s, rt, to);
}

/* A window's old owner that failed a send of slot s: its keys are plain misses for the rest
 * of the window (it is no longer asked, warm.h), for every route that asks this leaf. */
static void mark_dead(const px_route *leaf, px_rq *rq, px_slot s)
{
    char decoded[PX_MAX_ROUTE_KEY];
    size_t len;
    const char *key = px_rq_route_key(rq, s, decoded, sizeof(decoded), &len);
    px_server *src = key != NULL ? placed(leaf, rq->pool, key, len) : NULL;
    if (src != NULL)
        src->warm_dead = true;
}

/* Slots slots[0, n) of a part whose server failed: a read goes to the key's next candidate
 * (each key on its own: the keys a server served together may have different next
 * candidates), while depth allows. */
static void pool_failed(px_route *rt, px_rq *rq, const px_slot *slots, size_t n,
                        const px_reply *r)
{
    px_pool *pool = rq->pool;
    bool retry = rq->msg.cmd->retry && !pool->io->stopping && placement(rt) == PX_PLACE_CURRENT;
    char reason[256];
    size_t rl = r->len < sizeof(reason) - 1 ? r->len : sizeof(reason) - 1;
    memcpy(reason, r->p, rl);
    /* slots points into the fragment, alive until this returns. Until the last slot here is
     * answered the request cannot complete; once it is, rq may be gone. */
    for (size_t i = 0; i < n; i++) {
        px_slot s = slots[i];
        if (placement(rt) == PX_PLACE_PREVIOUS)
            mark_dead(rt, rq, s);
        px_server *to = retry && rq->slots[s].ntried < pool->depth ? next_current(rq, s) : NULL;
        if (to != NULL)
            px_rq_send(rq, s, rt, to);
        else
            give_up(rt, rq, s, reason, rl);
    }
}

static void pool_reply(px_route *rt, px_rq *rq, const px_slot *slots, size_t n,
                       const px_reply *r)
{
    if (r->kind != PX_REPLY_FAILED)
        px_rq_return(rq, rt, slots, n, r);
    else
        pool_failed(rt, rq, slots, n, r);
}

bool px_route_pool_moves(const px_pool *pool, const char *key, size_t len)
{
    const px_stage *st = &pool->stage;
    if (st->table == NULL || pool->table == NULL || pool->nservers == 0)
        return false;
    size_t j = ch_lookup(st->table, key, len);
    size_t i = ch_lookup_hash(pool->table, ch_key_hash(pool->table, key, len));
    return j < st->n && !(i < pool->nservers && st->to[j] == &pool->servers[i]);
}

const px_route_ops px_route_pool_ops = {
    .name = "pool",
    .start = pool_start,
    .reply = pool_reply,
    .where = pool_where,
};

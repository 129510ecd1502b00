/*
 * route_pool.c — the leaf route over one pool: a slot's key is hashed once, routed against the
 * pool's current membership and shared health (px_health_route), bounded loads applied when
 * configured, and sent to the first candidate it has not tried. A failed send of a retryable
 * command is routed again the same way, against the membership and health of that moment, so
 * nothing of the membership is stored in a request and a reload has nothing to renumber; a slot
 * tries at most the pool's failover depth of servers.
 */
#include "route_pool.h"
#include "request.h"

#include <stdlib.h>
#include <string.h>

/* The longest encoded key decoded for routing (memcached's keys: at most 250 bytes). */
#define PX_MAX_ROUTE_KEY 4096

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

/* The key's candidates into cand[], owner first; returns their number (0: none up). With bounded
 * loads the bounded choice goes first when it is up, then the walk's candidates without it; an
 * ejected bounded choice is skipped (the walk's candidates as they are). */
static size_t candidates(px_pool *pool, const char *key, size_t len, size_t *cand)
{
    size_t n = 0, b;
    uint64_t kh = ch_key_hash(pool->table, key, len); /* once: routing and bounded loads */
    if (px_health_route(pool->health, pool->table, kh, pool->depth, cand, &n) != CH_OK) {
        /* jump has no walk: its owner only */
        if (px_health_route(pool->health, pool->table, kh, 1, cand, &n) != CH_OK)
            n = 0;
    }
    if (n > 0 && bounded_owner(pool, kh, &b) && b != cand[0] && px_health_up(pool->health, b)) {
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

/* The first candidate of slot s not tried yet, or NULL. */
static px_server *next_server(px_rq *rq, px_slot s)
{
    px_pool *pool = rq->pool;
    const px_span *k = px_rq_key(rq, s);
    const char *key = rq->msg.raw + k->off;
    size_t len = k->len;
    char decoded[PX_MAX_ROUTE_KEY];
    if ((rq->msg.flags & PX_MSG_ENCODED_KEYS) != 0) {
        long n = rq->codec->route_key(&rq->msg, *k, decoded, sizeof(decoded));
        if (n < 0)
            return NULL;
        key = decoded;
        len = (size_t)n;
    }
    size_t cand[PX_MAX_DEPTH];
    size_t n = candidates(pool, key, len, cand);
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

/* Whether every key of a one-server command (MSETNX, EVAL) has the owner of its first. */
static bool one_owner(const px_rq *rq)
{
    const px_pool *pool = rq->pool;
    size_t first = SIZE_MAX;
    for (size_t k = 0; k < rq->msg.nkeys; k++) {
        const px_span *key = &rq->msg.keys[k];
        size_t o = ch_lookup(pool->table, rq->msg.raw + key->off, key->len);
        if (first == SIZE_MAX)
            first = o;
        else if (o != first)
            return false;
    }
    return true;
}

static void pool_start(px_route *rt, px_rq *rq, px_slot s)
{
    (void)rt;
    if ((rq->msg.cmd->flags & PX_CMD_ONE_SERVER) != 0 && rq->msg.nkeys > 1 && !one_owner(rq)) {
        px_rq_answer_error(rq, &s, 1, PX_ERR_CROSS_SERVER, "");
        return;
    }
    px_server *to = next_server(rq, s);
    if (to == NULL) {
        rq->pool->stats.forward_error++;
        px_rq_answer_error(rq, &s, 1, PX_ERR_SERVER, "no backend available");
        return;
    }
    px_rq_send(rq, s, to);
}

static void pool_reply(px_route *rt, px_rq *rq, const px_slot *slots, size_t n,
                       const px_reply *r)
{
    (void)rt;
    if (r->kind != PX_REPLY_FAILED) {
        px_rq_answer(rq, slots, n, r);
        return;
    }
    /* A failure: a read goes to the key's next candidate (each key on its own: the keys a
     * server served together may have different next candidates), while depth allows. */
    px_pool *pool = rq->pool;
    bool retry = rq->msg.cmd->retry && !pool->io->stopping;
    char reason[256];
    size_t rl = r->len < sizeof(reason) - 1 ? r->len : sizeof(reason) - 1;
    memcpy(reason, r->p, rl);
    reason[rl] = '\0';
    /* slots points into the fragment, alive until this returns. Until the last slot here is
     * answered the request cannot complete; once it is, rq may be gone. */
    size_t nsent = 0;
    for (size_t i = 0; i < n; i++) {
        px_slot s = slots[i];
        px_server *to = retry && rq->slots[s].ntried < pool->depth ? next_server(rq, s) : NULL;
        if (to != NULL) {
            px_rq_send(rq, s, to);
            nsent++;
            continue;
        }
        pool->stats.forward_error++;
        px_rq_answer_error(rq, &s, 1, PX_ERR_SERVER, reason);
        if (i + 1 == n && nsent == 0)
            return;
    }
    px_rq_flush(rq);
}

static const px_route_ops pool_ops = {
    .name = "pool",
    .start = pool_start,
    .reply = pool_reply,
};

px_route px_route_pool = {.ops = &pool_ops};

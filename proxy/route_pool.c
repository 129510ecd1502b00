/*
 * route_pool.c — the leaf route over one pool: a slot's key is hashed once, routed against the
 * pool's current membership and shared health (px_health_route), bounded loads applied when
 * configured, and sent to the first candidate it has not tried. A failed send of a retryable
 * command is routed again the same way, against the membership and health of that moment, so
 * nothing of the membership is stored in a request and a reload has nothing to renumber; a slot
 * tries at most the pool's failover depth of servers.
 *
 * In a window after a membership change (warm.h) a slot of a moved key takes a few steps of
 * its own (px_rq_slot.phase, below): before its switch its old owner serves it; while it warms,
 * a read goes alone to the new owner and, on a miss, to the old one; a write first moves the
 * key. Unmoved keys, and every key outside a window, take none.
 */
#include "route_pool.h"
#include "request.h"
#include "warm.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    if (px_health_route(pool->health, pool->table, kh, want, cand, &n) != CH_OK) {
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
    char decoded[PX_MAX_ROUTE_KEY];
    size_t len;
    const char *key = px_rq_route_key(rq, s, decoded, sizeof(decoded), &len);
    if (key == NULL)
        return NULL;
    size_t cand[PX_MAX_DEPTH];
    size_t want = rq->slots[s].ntried == 0 && pool->depth > 0 ? 1 : pool->depth;
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

/* ---- a membership change's window (warm.h) ---------------------------------------------------- */

/* A slot's steps in a window (px_rq_slot.phase); 0 is the usual routing. A read of a moved
 * key: new owner, on a miss old owner (a hit is answered and copied over). A write: the key
 * is moved first, so the write applies to its whole state (DEL counts it, INCR goes on from
 * its value): taken from the old owner (fetched and deleted at once, or fetched, then deleted
 * after the copy where the protocol cannot do both), copied to the new owner unless the key is
 * there already, then the write goes the usual way. */
enum {
    PH_USUAL = 0,
    PH_WARM_NEW,    /* a read sent alone to the new owner */
    PH_WARM_OLD,    /* it missed there: sent to the old owner */
    PH_WARM_AGAIN,  /* the old owner failed: sent to the new owner again, answered as it is */
    PH_MOVE_TAKE,   /* a write: the key taken (or fetched) from its old owner */
    PH_MOVE_FILL,   /* its copy stored at the new owner */
    PH_DELETE_OLD,  /* the old copy deleted (protocols without a take) */
};

/* Where slot s's key stands in the pool's window, and its old owner. */
static px_warm_step slot_where(px_rq *rq, px_slot s, px_server **src)
{
    px_pool *pool = rq->pool;
    if (pool->warm.table == NULL || rq->msg.nkeys == 0)
        return PX_WARM_NONE;
    char decoded[PX_MAX_ROUTE_KEY];
    size_t len;
    const char *key = px_rq_route_key(rq, s, decoded, sizeof(decoded), &len);
    if (key == NULL)
        return PX_WARM_NONE;
    return px_warm_where(pool, key, len, px_io_now(pool->io), src);
}

/* Starts slot s in the window, or returns false for the usual routing. Before its key's switch
 * its old owner serves it; while it warms a read goes alone to the new owner (its reply tells
 * a miss) and a write deletes the old copy first. */
static bool warm_start(px_rq *rq, px_slot s)
{
    px_server *src = NULL;
    px_warm_step step = slot_where(rq, s, &src);
    if (step == PX_WARM_NONE)
        return false;
    px_pool *pool = rq->pool;
    if (step == PX_WARM_BEFORE) {
        pool->m.warm.ramp_old++;
        px_rq_send(rq, s, src); /* a failure re-routes as usual: to the new owner's candidates */
        return true;
    }
    char decoded[PX_MAX_ROUTE_KEY];
    size_t len;
    const char *key = px_rq_route_key(rq, s, decoded, sizeof(decoded), &len);
    if (rq->msg.cmd->retry) {
        px_server *to = rq->codec->is_miss != NULL ? next_server(rq, s) : NULL;
        if (to == NULL)
            return false;
        rq->slots[s].phase = PH_WARM_NEW;
        rq->slots[s].gen = px_warm_gen(pool, key, len);
        px_rq_send_op(rq, s, to, PX_SEND_ALONE);
        return true;
    }
    if (key == NULL)
        return false;
    px_warm_write(pool, key, len);
    rq->slots[s].phase = PH_MOVE_TAKE;
    px_warm_request a = {rq->codec->encode_take != NULL ? rq->codec->encode_take
                                                        : rq->codec->encode_fetch,
                         key, len, NULL, 0};
    if (px_rq_send_own(rq, s, src, px_warm_encode, &a) != 0) {
        rq->slots[s].phase = PH_USUAL;
        return false;
    }
    return true;
}

/* Sends slot s the usual way, or answers it with an error when no server is left. */
static void send_usual(px_rq *rq, px_slot s, const char *reason)
{
    rq->slots[s].phase = PH_USUAL;
    px_server *to = next_server(rq, s);
    if (to == NULL) {
        rq->pool->stats.forward_error++;
        px_rq_answer_error(rq, &s, 1, PX_ERR_SERVER, reason);
        return;
    }
    px_rq_send(rq, s, to);
    px_rq_flush(rq);
}

static void pool_failed(px_rq *rq, const px_slot *slots, size_t n, const px_reply *r);

/* The key of write slot s was taken from its old owner (r): its copy goes to the new owner.
 * False when there is nothing to copy or no server to copy to. */
static bool move_fill(px_rq *rq, px_slot s, const px_reply *r)
{
    char decoded[PX_MAX_ROUTE_KEY];
    size_t len;
    const char *key = px_rq_route_key(rq, s, decoded, sizeof(decoded), &len);
    px_server *to = key != NULL ? next_server(rq, s) : NULL;
    if (to == NULL)
        return false;
    rq->slots[s].ntried = 0; /* the write itself goes there again */
    px_buf b = {0};
    uint8_t expect = 0;
    int rc = rq->codec->encode_fill(&b, key, len, r, (int64_t)time(NULL), &expect);
    px_warm_request a = {NULL, key, len, &b, expect};
    rq->slots[s].phase = PH_MOVE_FILL;
    bool sent = rc > 0 && px_rq_send_own(rq, s, to, px_warm_encode, &a) == 0;
    px_buf_free(&b);
    if (!sent)
        rq->slots[s].phase = PH_USUAL;
    return sent;
}

/* The reply to slot s in a window step. */
static void warm_reply(px_rq *rq, px_slot s, const px_reply *r)
{
    px_pool *pool = rq->pool;
    px_rq_slot *sl = &rq->slots[s];
    px_server *src = NULL;
    switch (sl->phase) {
    case PH_MOVE_TAKE:
        if (r->kind == PX_REPLY_FAILED && slot_where(rq, s, &src) != PX_WARM_NONE)
            src->warm_dead = true;
        if (r->kind == PX_REPLY_VALUE && move_fill(rq, s, r))
            return;
        send_usual(rq, s, "no backend available");
        return;
    case PH_MOVE_FILL: {
        int stored = r->kind == PX_REPLY_FAILED ? -1 : rq->codec->fill_stored(r);
        if (stored > 0)
            pool->m.warm.warm_fills++;
        else if (stored == 0)
            pool->m.warm.warm_fills_present++;
        else
            pool->m.warm.warm_fill_errors++;
        if (rq->codec->encode_take == NULL && slot_where(rq, s, &src) == PX_WARM_ON) {
            sl->phase = PH_DELETE_OLD;
            px_rq_send_op(rq, s, src, PX_SEND_DELETE);
            px_rq_flush(rq);
            return;
        }
        if (rq->codec->encode_take != NULL)
            pool->m.warm.warm_deletes++; /* the take deleted it */
        send_usual(rq, s, "no backend available");
        return;
    }
    case PH_DELETE_OLD:
        /* Whatever the old owner said (a failure: its copy is not served any more either),
         * the write goes on to the new owner. */
        if (r->kind != PX_REPLY_FAILED)
            pool->m.warm.warm_deletes++;
        else if (slot_where(rq, s, &src) != PX_WARM_NONE)
            src->warm_dead = true;
        send_usual(rq, s, "no backend available");
        return;
    case PH_WARM_NEW:
        if (r->kind == PX_REPLY_FAILED)
            break; /* the usual failover */
        if (!rq->codec->is_miss(&rq->msg, r) || slot_where(rq, s, &src) != PX_WARM_ON) {
            px_rq_answer(rq, &s, 1, r);
            return;
        }
        sl->phase = PH_WARM_OLD;
        px_rq_send_op(rq, s, src, PX_SEND_ALONE);
        px_rq_flush(rq);
        return;
    case PH_WARM_OLD:
        if (r->kind == PX_REPLY_FAILED) {
            /* Its keys are plain misses for the rest of the window; this one asks the new
             * owner again (the tried set starts over: the new owner was tried first). */
            if (slot_where(rq, s, &src) != PX_WARM_NONE)
                src->warm_dead = true;
            sl->ntried = 0;
            sl->phase = PH_WARM_AGAIN;
            px_server *to = next_server(rq, s);
            if (to == NULL)
                break;
            px_rq_send_op(rq, s, to, PX_SEND_ALONE);
            px_rq_flush(rq);
            return;
        }
        if (r->kind == PX_REPLY_ERROR || rq->codec->is_miss(&rq->msg, r)) {
            if (r->kind != PX_REPLY_ERROR)
                pool->m.warm.warm_misses++;
        } else {
            /* A hit: copied to the new owner, sent before the answer (which may free rq) but
             * behind it on nothing: the client's reply does not wait for the copy. */
            char decoded[PX_MAX_ROUTE_KEY];
            size_t len;
            const char *key = px_rq_route_key(rq, s, decoded, sizeof(decoded), &len);
            pool->m.warm.warm_hits++;
            if (key != NULL)
                px_warm_fill(pool, key, len, rq->cid, sl->gen);
        }
        px_rq_answer(rq, &s, 1, r);
        return;
    default: /* PH_WARM_AGAIN */
        break;
    }
    sl->phase = PH_USUAL;
    if (r->kind != PX_REPLY_FAILED)
        px_rq_answer(rq, &s, 1, r);
    else
        pool_failed(rq, &s, 1, r);
}

static void pool_start(px_route *rt, px_rq *rq, px_slot s)
{
    (void)rt;
    if ((rq->msg.cmd->flags & PX_CMD_ONE_SERVER) != 0 && rq->msg.nkeys > 1 && !one_owner(rq)) {
        px_rq_answer_error(rq, &s, 1, PX_ERR_CROSS_SERVER, "");
        return;
    }
    if (warm_start(rq, s))
        return;
    px_server *to = next_server(rq, s);
    if (to == NULL) {
        rq->pool->stats.forward_error++;
        px_rq_answer_error(rq, &s, 1, PX_ERR_SERVER, "no backend available");
        return;
    }
    px_rq_send(rq, s, to);
}

/* Slots slots[0, n) of a part whose server failed: a read goes to the key's next candidate
 * (each key on its own: the keys a server served together may have different next
 * candidates), while depth allows. */
static void pool_failed(px_rq *rq, const px_slot *slots, size_t n, const px_reply *r)
{
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

static void pool_reply(px_route *rt, px_rq *rq, const px_slot *slots, size_t n,
                       const px_reply *r)
{
    (void)rt;
    if (n == 1 && rq->slots[slots[0]].phase != PH_USUAL) {
        warm_reply(rq, slots[0], r);
        return;
    }
    if (r->kind != PX_REPLY_FAILED) {
        px_rq_answer(rq, slots, n, r);
        return;
    }
    pool_failed(rq, slots, n, r);
}

static const px_route_ops pool_ops = {
    .name = "pool",
    .start = pool_start,
    .reply = pool_reply,
};

px_route px_route_pool = {.ops = &pool_ops};

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_warm.c — warm-up as a route (route_warm.h) over two pool leaves: child[0] the current
 * placement, child[1] the previous one of the pool's window after a membership change (warm.h
 * owns the window: where a key stands, its write generations, the fills). As mcrouter's
 * WarmUpRoute, a few steps over a cold and a warm child, here per slot:
 *
 *   not moved, or no window  -> passed to the current leaf as it is;
 *   moved, not switched yet  -> its old owner (the previous leaf) serves it; a failure there
 *                               goes the usual way;
 *   moved and warming, read  -> the current leaf alone; a miss there: the previous leaf (a hit
 *                               is answered and copied over with its remaining lifetime; the
 *                               old owner failing: the current leaf again, answered as it is);
 *   moved and warming, write -> the key is moved first, so the write applies to its whole state
 *                               (DEL counts it, INCR goes on from its value): taken from the old
 *                               owner (fetched and deleted at once, or fetched, then deleted
 *                               after the copy where the protocol cannot do both), copied to the
 *                               new owner unless the key is there already, then the write goes
 *                               the usual way.
 *
 * The take, the copies and the delete are side requests (request.h) through the children: the
 * previous leaf for what concerns the old owner, the current subtree for the new one (so with
 * `replicas` a copy reaches each of the key's owners: the replica route writes it to them all).
 * A copy after a read is fired, detached: the client's answer does not wait for it. Only the
 * leaves send to a server.
 *
 * A slot's step and, for a read, its key's write generation when the read began are its word
 * at this route's level (warm_word).
 */
#include "route_warm.h"
#include "copy.h"
#include "request.h"
#include "warm.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    W_USUAL = 0,
    W_BEFORE, /* not switched yet: sent to the old owner */
    W_NEW,    /* a read sent alone to the new owner */
    W_OLD,    /* it missed there: sent to the old owner */
    W_AGAIN,  /* the old owner failed: the new owner again, answered as it is */
    W_TAKE,   /* a write: the key taken (or fetched) from its old owner */
    W_FILL,   /* its copy stored at the new owner */
    W_DELETE, /* the old copy deleted (protocols without a take) */
};

/* A slot's word at this route: its step and, for a read, its key's write generation when the
 * read began (px_warm_gen). */
typedef struct warm_word {
    uint32_t gen;
    uint8_t step;
} warm_word;
PX_SLOT_WORD(warm_word, warm_word)

static unsigned step_of(px_rq *rq, px_slot s, const px_route *rt)
{
    return warm_word_get(rq, s, rt).step;
}

static void set_step(px_rq *rq, px_slot s, const px_route *rt, unsigned step, uint32_t gen)
{
    warm_word_set(rq, s, rt, (warm_word){gen, (uint8_t)step});
}

/* Where slot s's key stands in the pool's window: moved when its old owner (the previous
 * leaf's placement) is another than its owner now (the current subtree's) and still serves. */
static px_warm_step slot_where(const px_route *rt, px_rq *rq, px_slot s)
{
    px_pool *pool = rq->pool;
    uint64_t now = px_io_now(pool->io), kh;
    if (rq->msg.nkeys == 0 || !px_warm_open(pool, now))
        return PX_WARM_NONE;
    px_where old = px_rq_where(rq, rq->slots[s].key, rt->child[1]);
    if (!old.up || old.server == px_rq_where(rq, rq->slots[s].key, rt->child[0]).server ||
        !px_rq_key_hash(rq, rq->slots[s].key, &kh))
        return PX_WARM_NONE;
    return px_warm_when(pool, kh, now);
}

/* Slot s goes on the usual way: the current leaf, sent with the request's other keys unless a
 * route above asked for it alone (its alone flag is left as it is: this route sets it only on
 * the steps that read a reply, and clears it once that reply is in). */
static void usual(px_route *rt, px_rq *rq, px_slot s)
{
    set_step(rq, s, rt, W_USUAL, 0);
    px_rq_pass(rq, s, rt, rt->child[0]);
}

/* Slot s's side request (a take, a copy, a delete) through child `to`, written by enc for its
 * key (or, enc NULL, the bytes b), at step `step`; false when it could not be started. */
static bool side(px_route *rt, px_rq *rq, px_slot s, px_route *to, unsigned step,
                 int (*enc)(px_buf *, const char *, size_t, uint8_t *), const char *key,
                 size_t len, const px_buf *b)
{
    px_buf own = {0};
    uint8_t expect;
    set_step(rq, s, rt, step, 0);
    bool ok = (enc == NULL || enc(&own, key, len, &expect) == 0) &&
              px_rq_fork(rq, s, rt, rq->pool, to, enc != NULL ? own.p : b->p,
                         enc != NULL ? own.len : b->len) == 0;
    px_buf_free(&own);
    return ok;
}

static void warm_start(px_route *rt, px_rq *rq, px_slot s)
{
    if (px_rq_cross(rq, rt->child[0])) {
        px_rq_return_error(rq, rt, &s, 1, PX_ERR_CROSS_SERVER, "");
        return;
    }
    px_warm_step step = slot_where(rt, rq, s);
    px_pool *pool = rq->pool;
    if (step == PX_WARM_NONE) {
        usual(rt, rq, s);
        return;
    }
    if (step == PX_WARM_BEFORE) {
        pool->m.warm.ramp_old++;
        set_step(rq, s, rt, W_BEFORE, 0);
        px_rq_call(rq, s, rt, rt->child[1]);
        return;
    }
    char decoded[PX_MAX_ROUTE_KEY];
    size_t len;
    uint64_t kh = 0;
    const char *key = px_rq_route_key(rq, s, decoded, sizeof(decoded), &len);
    if (key != NULL)
        (void)px_rq_key_hash(rq, rq->slots[s].key, &kh); /* it decodes: the same bytes */
    if (rq->msg.cmd->retry) {
        if (rq->codec->is_miss == NULL || key == NULL) {
            usual(rt, rq, s);
            return;
        }
        set_step(rq, s, rt, W_NEW, px_warm_gen(pool, kh));
        rq->slots[s].alone = true; /* its reply tells a miss */
        px_rq_call(rq, s, rt, rt->child[0]);
        return;
    }
    if (key == NULL) {
        usual(rt, rq, s);
        return;
    }
    px_warm_write(pool, kh);
    if (!side(rt, rq, s, rt->child[1], W_TAKE,
              rq->codec->encode_take != NULL ? rq->codec->encode_take : rq->codec->encode_fetch,
              key, len, NULL))
        usual(rt, rq, s);
}

/* The key of write slot s was taken from its old owner (r): its copy goes to the new owner
 * (the current subtree). False when there is nothing to copy. */
static bool move_fill(px_route *rt, px_rq *rq, px_slot s, const px_reply *r)
{
    char decoded[PX_MAX_ROUTE_KEY];
    size_t len;
    const char *key = px_rq_route_key(rq, s, decoded, sizeof(decoded), &len);
    if (key == NULL)
        return false;
    px_buf b = {0};
    uint8_t expect = 0;
    int rc = rq->codec->encode_fill(&b, key, len, r, (int64_t)time(NULL), &expect);
    bool sent = rc > 0 && side(rt, rq, s, rt->child[0], W_FILL, NULL, key, len, &b);
    px_buf_free(&b);
    return sent;
}

/* How a copy after a read (copy.h) ended: counted. */
static void copied(px_pool *pool, px_copy_end e)
{
    px_warm_stats *st = &pool->m.warm;
    if (e == PX_COPY_STORED)
        st->warm_fills++;
    else if (e == PX_COPY_PRESENT)
        st->warm_fills_present++;
    else if (e != PX_COPY_NONE)
        st->warm_fill_errors++;
}

/* The answer to one slot s at its step. */
static void warm_step(px_route *rt, px_rq *rq, px_slot s, const px_reply *r)
{
    px_pool *pool = rq->pool;
    switch (step_of(rq, s, rt)) {
    case W_BEFORE:
        if (r->kind == PX_REPLY_FAILED && rq->msg.cmd->retry) {
            usual(rt, rq, s); /* the old owner is tried: the new owner's candidates */
            return;
        }
        break; /* a write is not sent twice: it may have been applied */
    case W_TAKE:
        if (r->kind == PX_REPLY_VALUE && move_fill(rt, rq, s, r))
            return;
        usual(rt, rq, s);
        return;
    case W_FILL: {
        int stored = r->kind == PX_REPLY_FAILED ? -1 : rq->codec->fill_stored(r);
        if (stored > 0)
            pool->m.warm.warm_fills++;
        else if (stored == 0)
            pool->m.warm.warm_fills_present++;
        else
            pool->m.warm.warm_fill_errors++;
        if (rq->codec->encode_take == NULL && slot_where(rt, rq, s) == PX_WARM_ON) {
            char decoded[PX_MAX_ROUTE_KEY];
            size_t len;
            const char *key = px_rq_route_key(rq, s, decoded, sizeof(decoded), &len);
            if (key != NULL && side(rt, rq, s, rt->child[1], W_DELETE,
                                    rq->codec->encode_delete, key, len, NULL))
                return;
        }
        if (rq->codec->encode_take != NULL)
            pool->m.warm.warm_deletes++; /* the take deleted it */
        usual(rt, rq, s);
        return;
    }
    case W_DELETE:
        /* Whatever the old owner said (a failure: its copy is not served any more either),
         * the write goes on to the new owner. */
        if (r->kind != PX_REPLY_FAILED)
            pool->m.warm.warm_deletes++;
        usual(rt, rq, s);
        return;
    case W_NEW:
        if (r->kind == PX_REPLY_FAILED || !rq->codec->is_miss(&rq->msg, r) ||
            slot_where(rt, rq, s) != PX_WARM_ON)
            break;
        set_step(rq, s, rt, W_OLD, warm_word_get(rq, s, rt).gen);
        rq->slots[s].ntried = 0;
        px_rq_call(rq, s, rt, rt->child[1]);
        return;
    case W_OLD:
        if (r->kind == PX_REPLY_FAILED) {
            /* Its keys are plain misses for the rest of the window (the previous leaf marked
             * it); this one asks the new owner again (the tried set starts over: the new owner
             * was tried first). */
            set_step(rq, s, rt, W_AGAIN, 0);
            rq->slots[s].ntried = 0;
            px_rq_call(rq, s, rt, rt->child[0]);
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
            if (key != NULL) /* from the previous leaf to the current subtree */
                px_copy(rq, rt->child[1], rt->child[0], key, len, warm_word_get(rq, s, rt).gen, copied);
        }
        break;
    default: /* W_AGAIN, W_USUAL */
        break;
    }
    set_step(rq, s, rt, W_USUAL, 0);
    rq->slots[s].alone = false;
    px_rq_return(rq, rt, &s, 1, r);
}

static void warm_reply(px_route *rt, px_rq *rq, const px_slot *slots, size_t n,
                       const px_reply *r)
{
    if (n > 1 && step_of(rq, slots[0], rt) == W_BEFORE && r->kind != PX_REPLY_FAILED) {
        px_rq_return(rq, rt, slots, n, r); /* keys the old owner served together */
        return;
    }
    /* Until the last slot here is answered the request cannot complete; then rq may be gone. */
    for (size_t i = 0; i < n; i++)
        warm_step(rt, rq, slots[i], r);
}

const px_route_ops px_route_warm_ops = {
    .name = "warm",
    .start = warm_start,
    .reply = warm_reply,
};

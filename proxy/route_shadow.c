/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_shadow.c — shadow traffic (route_shadow.h): child[0] is the pool's own tree; a
 * deterministic share of the key space (by a hash of the key, so the same keys are always
 * shadowed) is also sent, as a request of its own, to the shadow pool, and the two answers are
 * compared (mcrouter's ShadowRoute, Envoy's request mirroring). The client's answer is child[0]'s,
 * returned as soon as it comes: the shadow's never delays or changes it.
 *
 * A shadowed slot's word at this route (shadow_word) is its pair: the two answers' outcomes, freed by
 * whichever comes second. The shadow's request has no client (its owner is the pair) and is not
 * shadowed again. Bounds: a pool has at most PX_SHADOW_INFLIGHT shadow requests in flight per
 * worker; a request beyond is not shadowed (counted as skipped). Only requests of one slot are
 * shadowed (single-key commands); split ones pass as they are.
 */
#include "route_shadow.h"
#include "request.h"

#include <stdint.h>

#include <stdlib.h>
#include <xxhash.h>

/* What picks the shadowed keys: the key's hash (px_rq_key_hash) mixed with a seed of its own
 * (murmur3's 64-bit finalizer), so the share is independent of the pool's placement and of the
 * other uses of that hash. */
#define SHADOW_SEED UINT64_C(0x5ad0c0ffee)

typedef struct shadow_pair {
    px_pool *pool;          /* the main pool: its counters */
    bool read;              /* compared as a read: hit/miss and the value's digest */
    uint8_t done;           /* bit 0: the main answer is in; bit 1: the shadow's */
    bool main_miss, shadow_miss, main_err, shadow_err;
    uint64_t main_digest, shadow_digest;
} shadow_pair;

/* A slot's word at this route: its pair while shadowed. */
PX_SLOT_WORD(shadow_word, shadow_pair *)

/* Whether the key of hash kh is in the shadowed share. */
static bool shadowed(double fraction, uint64_t kh)
{
    uint64_t h = kh ^ SHADOW_SEED;
    h ^= h >> 33;
    h *= UINT64_C(0xff51afd7ed558ccd);
    h ^= h >> 33;
    h *= UINT64_C(0xc4ceb9fe1a85ec53);
    h ^= h >> 33;
    return (double)(h >> 11) * 0x1.0p-53 < fraction;
}

/* One side's answer; the second frees the pair after counting the comparison. */
static void pair_done(shadow_pair *p, unsigned side, bool err, bool miss, uint64_t digest)
{
    if (side == 0) {
        p->main_err = err, p->main_miss = miss, p->main_digest = digest;
    } else {
        p->shadow_err = err, p->shadow_miss = miss, p->shadow_digest = digest;
    }
    p->done |= (uint8_t)(1u << side);
    if (p->done != 3)
        return;
    px_pool_metrics *m = &p->pool->m;
    m->shadow.inflight--;
    if (p->shadow_err && !p->main_err)
        m->shadow.failed++;
    else if (p->main_err != p->shadow_err || p->main_miss != p->shadow_miss ||
             (p->read && !p->main_miss && p->main_digest != p->shadow_digest))
        m->shadow.disagree++;
    else
        m->shadow.agree++;
    free(p);
}

/* The shadow request's completion: its owner is the pair. */
static void shadow_done(px_rq *srq)
{
    shadow_pair *p = srq->owner;
    const px_reply r = {.p = srq->reply.p, .len = srq->reply.len,
                        .kind = srq->error ? PX_REPLY_ERROR : PX_REPLY_VALUE};
    bool miss = !srq->error && p->read && srq->codec->is_miss != NULL &&
                srq->codec->is_miss(&srq->msg, &r);
    pair_done(p, 1, srq->error, miss, XXH3_64bits(srq->reply.p, srq->reply.len));
    px_rq_free(srq);
}

static void shadow_start(px_route *rt, px_rq *rq, px_slot s)
{
    const px_shadow_conf *sc = rt->conf;
    px_pool *pool = rq->pool;
    uint64_t kh;
    bool keyed = rq->nslots == 1 && !rq->shadow && rq->msg.nkeys > 0 &&
                 px_rq_key_hash(rq, rq->slots[s].key, &kh);
    bool read = rq->msg.cmd->cls == PX_CLASS_READ;
    shadow_word_set(rq, s, rt, NULL);
    if (!keyed || (!read && !sc->writes) || !shadowed(sc->fraction, kh)) {
        px_rq_pass(rq, s, rt, rt->child[0]);
        return;
    }
    shadow_pair *p = pool->m.shadow.inflight < PX_SHADOW_INFLIGHT ? calloc(1, sizeof(*p)) : NULL;
    px_rq *srq = p != NULL ? px_rq_new(sc->pool, &rq->msg, rq->cid) : NULL;
    if (srq == NULL) {
        free(p);
        pool->m.shadow.skipped++;
        px_rq_pass(rq, s, rt, rt->child[0]);
        return;
    }
    p->pool = pool;
    p->read = read;
    pool->m.shadow.inflight++;
    pool->m.shadow.sent++;
    srq->shadow = true;
    srq->owner = p;
    srq->on_done = shadow_done;
    shadow_word_set(rq, s, rt, p);
    px_rq_call(rq, s, rt, rt->child[0]);
    px_rq_start(srq, sc->pool->route); /* may complete (and free srq) at once */
}

static void shadow_reply(px_route *rt, px_rq *rq, const px_slot *slots, size_t n,
                         const px_reply *r)
{
    for (size_t i = 0; i < n; i++) {
        shadow_pair *p = shadow_word_get(rq, slots[i], rt);
        if (p == NULL)
            continue;
        shadow_word_set(rq, slots[i], rt, NULL);
        bool err = r->kind == PX_REPLY_ERROR || r->kind == PX_REPLY_FAILED;
        bool miss = !err && p->read && rq->codec->is_miss != NULL && rq->codec->is_miss(&rq->msg, r);
        pair_done(p, 0, err, miss, XXH3_64bits(r->p, r->len));
    }
    px_rq_return(rq, rt, slots, n, r);
}

const px_route_ops px_route_shadow_ops = {
    .name = "shadow",
    .start = shadow_start,
    .reply = shadow_reply,
};

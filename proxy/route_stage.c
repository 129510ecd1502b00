/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_stage.c — staging (route_stage.h), mcrouter's StagingRoute in its strict form, for the
 * time a membership change is prepared and not committed (docs/FLEET.md, "Staged migration"):
 *
 *   a read, or a write none of whose keys changes owner  -> passed to child[0] as it is;
 *   a write of a key that changes owner                  -> called on child[0] (its owner
 *       now), then, whatever its answer, a delete of each of its moving keys, a side request
 *       (px_rq_fork) through child[1], the leaf of the staged placement (its next owner,
 *       px_pool.stage); the answer goes up once every delete is answered, and becomes an error
 *       when one failed (the write may stand at the owner while a copy the next owner holds
 *       could not be dropped: the client is not told "done"). A write still out when the
 *       change is swapped in deletes at the key's owner by then (stale_copy_at): the switch
 *       comes between two loop iterations, the write's answer after it.
 *
 * Why this order: a copy (`chash fleet apply --migrate`, a warm-up fill) reads the owner, adds
 * at the next owner and reads the owner again, dropping its add when the value changed. A write
 * lands at the owner, then deletes at the next owner. Whichever comes first, the next owner ends
 * with the owner's latest value or nothing: never an older one.
 *
 * A slot's word at this route is its write's group while the deletes are out (stage_word): an
 * answer to a slot without one is its write's, to a slot with one a delete's, whichever child
 * it came through. Cost per
 * key of a write: the next leaf's test (nothing staged) or two lookups (a stage); nothing for
 * reads.
 */
#include "route_stage.h"
#include "request.h"

#include <stdlib.h>
#include <string.h>

/* A write's answer, kept while its deletes are out. */
typedef struct stage_group {
    uint32_t waiting; /* deletes not answered, and 1 while they are being sent */
    bool failed;      /* a delete could not be sent or failed */
    px_reply_kind kind;
    int64_t integer;
    char *bytes;
    size_t len;
    size_t n;
    px_slot slots[]; /* those the answer is for */
} stage_group;

/* A slot's word at this route: its write's group while the deletes are out. */
PX_SLOT_WORD(stage_word, stage_group *)

/* The keys of slot s: its own for a split command, every key of the request otherwise (EVAL's
 * declared keys, MSETNX). */
static void slot_keys(const px_rq *rq, px_slot s, size_t *first, size_t *end)
{
    if (rq->msg.cmd->cls == PX_CLASS_MULTI) {
        *first = rq->slots[s].key;
        *end = *first + 1;
    } else {
        *first = 0;
        *end = rq->msg.nkeys;
    }
}

/* Whether key k goes to another server after the staged change: the next leaf's placement
 * against the tree's. */
static bool staged(const px_route *rt, const px_rq *rq, size_t k)
{
    px_where next = px_rq_where(rq, k, rt->child[1]);
    return next.server != 0 && next.server != px_rq_where(rq, k, rt->child[0]).server;
}

static bool moves(const px_route *rt, const px_rq *rq, px_slot s)
{
    size_t k, end;
    slot_keys(rq, s, &k, &end);
    for (; k < end; k++)
        if (staged(rt, rq, k))
            return true;
    return false;
}

static void stage_start(px_route *rt, px_rq *rq, px_slot s)
{
    if (rq->msg.cmd->retry || rq->msg.nkeys == 0 || !moves(rt, rq, s)) {
        px_rq_pass(rq, s, rt, rt->child[0]);
        return;
    }
    px_rq_call(rq, s, rt, rt->child[0]);
}

/* g's deletes are all answered: its write's answer goes up (g is freed; rq may be). */
static void finish(px_route *rt, px_rq *rq, stage_group *g)
{
    for (size_t i = 0; i < g->n; i++)
        stage_word_set(rq, g->slots[i], rt, NULL);
    if (g->failed) {
        px_rq_return_error(rq, rt, g->slots, g->n, PX_ERR_SERVER,
                           "chash-proxy: written at the key's owner, but its copy at its owner "
                           "after the pending membership change could not be invalidated");
    } else {
        px_reply r = {.p = g->bytes, .len = g->len, .kind = g->kind, .integer = g->integer};
        px_rq_return(rq, rt, g->slots, g->n, &r);
    }
    free(g->bytes);
    free(g);
}

/* Where key k of slot s may hold a copy its write did not reach: its next owner while the change
 * is staged (child[1], the staged placement's leaf). When the change was swapped in while the
 * write was out, the next leaf places nothing and the key's owner now (child[0]'s) is the server
 * the staging would have cleared: if the write went elsewhere (the slot's tried servers), a
 * delete through child[0] reaches it. NULL when there is none: the key stays, or the change was
 * withdrawn (its owner is where the write went). Cost: two lookups. */
static px_route *stale_copy_at(px_route *rt, const px_rq *rq, px_slot s, size_t k)
{
    px_where next = px_rq_where(rq, k, rt->child[1]);
    px_where now = px_rq_where(rq, k, rt->child[0]);
    if (next.server != 0)
        return next.server != now.server ? rt->child[1] : NULL;
    if (now.server == 0)
        return NULL;
    for (uint32_t i = 0; i < rq->slots[s].ntried; i++)
        if (rq->slots[s].tried[i] == now.server)
            return NULL;
    return rt->child[0];
}

/* The write's answer r to slots[0, n): kept, and a delete of each moving key at its next owner. */
static void invalidate(px_route *rt, px_rq *rq, const px_slot *slots, size_t n, const px_reply *r)
{
    stage_group *g = calloc(1, sizeof(*g) + n * sizeof(px_slot));
    char *bytes = g != NULL ? malloc(r->len > 0 ? r->len : 1) : NULL;
    if (bytes == NULL) {
        free(g);
        px_rq_return_error(rq, rt, slots, n, PX_ERR_SERVER, "out of memory");
        return;
    }
    memcpy(bytes, r->p, r->len);
    *g = (stage_group){.waiting = 1, .kind = r->kind, .integer = r->integer, .bytes = bytes,
                       .len = r->len, .n = n};
    memcpy(g->slots, slots, n * sizeof(px_slot));
    for (size_t i = 0; i < n; i++)
        stage_word_set(rq, slots[i], rt, g);
    px_pool *pool = rq->pool;
    for (size_t i = 0; i < n; i++) {
        size_t k, end;
        slot_keys(rq, slots[i], &k, &end);
        for (; k < end; k++) {
            char buf[PX_MAX_ROUTE_KEY];
            size_t len;
            const char *key = px_rq_key_bytes(rq, k, buf, sizeof(buf), &len);
            px_route *at = key != NULL ? stale_copy_at(rt, rq, slots[i], k) : NULL;
            if (at == NULL)
                continue;
            px_buf del = {0};
            uint8_t expect;
            g->waiting++; /* before the fork: its answer may come before it returns */
            if (rq->codec->encode_delete(&del, key, len, &expect) != 0 ||
                px_rq_fork(rq, slots[i], rt, pool, at, del.p, del.len) != 0) {
                g->waiting--;
                g->failed = true;
                pool->m.warm.stage_invalidate_errors++;
            }
            px_buf_free(&del);
        }
    }
    if (--g->waiting == 0)
        finish(rt, rq, g);
}

static void stage_reply(px_route *rt, px_rq *rq, const px_slot *slots, size_t n,
                        const px_reply *r)
{
    stage_group *g = stage_word_get(rq, slots[0], rt);
    if (g == NULL) { /* the write's answer, for slots called together */
        invalidate(rt, rq, slots, n, r);
        return;
    }
    /* A delete's answer: one slot (px_rq_fork), through either child (stale_copy_at). */
    px_pool_metrics *m = &rq->pool->m;
    if (r->kind == PX_REPLY_FAILED || r->kind == PX_REPLY_ERROR) {
        g->failed = true;
        m->warm.stage_invalidate_errors++;
    } else {
        m->warm.stage_invalidations++;
    }
    if (--g->waiting == 0)
        finish(rt, rq, g);
}

const px_route_ops px_route_stage_ops = {
    .name = "stage",
    .start = stage_start,
    .reply = stage_reply,
};

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_gutter.c — the gutter pool (route_gutter.h). For each slot:
 *
 *   no server of the pool ejected, or the key's owner up  -> passed to child[0] as it is;
 *   the owner ejected, a read                             -> the gutter pool, as it is;
 *   the owner ejected, a write or a delete                -> journaled for the owner's rejoin,
 *       then to the gutter pool with its lifetimes capped at gutter_ttl
 *       (codec->encode_capped); a write the codec cannot cap is refused with its error;
 *   no gutter server up                                   -> passed to child[0] (the ring's
 *       next candidate, as without a gutter; counted as unavailable).
 *
 * The gutter pool serves its slots on its own tree, as shadow does: each is a side request
 * (px_rq_fork) of that pool started on its root, so the gutter's own placement, failover (a
 * read that fails at its gutter server goes to the gutter's next candidate) and routes apply,
 * and only its leaves send. A slot goes alone: one key's request, answered for that slot, so a
 * split command's keys of a lost owner each reach the gutter on their own.
 *
 * The owner is where child[0]'s usual path places the key (px_route_where: the current
 * placement's node), its state the shared health, so every worker and the rejoin agree on it. A write is journaled
 * before its owner is looked at again: px_health_journal takes the lock the owner's readmission
 * checks (px_health_readmit), so either the key is journaled first and the owner stays out until
 * its rejoin deletes the key there (the gutter then has the only value), or the owner is up
 * again when looked at and the write goes to it (child[0]).
 *
 * No state per slot: only the gutter's answers come back here. Cost while no server of the
 * pool is out: one atomic load per slot. While one is: a hash and a lookup per slot, and for
 * the gutter's slots their own encoding (a copy).
 */
#include "route_gutter.h"
#include "request.h"
#include "route_pool.h"

#include <stdint.h>
#include <time.h>

/* The wall clock in ms since the epoch, for absolute lifetimes (Redis's EXAT, PXAT). */
static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Slot s to the gutter pool, for its key alone, its lifetimes capped (a read as it came, but
 * memcached's gat: capped too). */
static void to_gutter(px_route *rt, px_rq *rq, px_slot s)
{
    const px_gutter_conf *gc = rt->conf;
    px_pool *pool = rq->pool;
    uint32_t key = rq->slots[s].key;
    px_buf b = {0};
    uint8_t expect = 0;
    char why[192] = "chash-proxy: the gutter pool takes no writes of this protocol";
    bool read = rq->msg.cmd->retry;
    int rc = rq->codec->encode_capped != NULL
                 ? rq->codec->encode_capped(&b, &rq->msg, &key, 1, gc->ttl_ms, wall_ms(), &expect,
                                            why, sizeof(why))
             : read ? rq->codec->encode_request(&b, &rq->msg, &key, 1, &expect)
                    : 1;
    if (rc != 0) {
        px_buf_free(&b);
        if (rc > 0)
            pool->m.gutter.refused++;
        px_rq_return_error(rq, rt, &s, 1, PX_ERR_SERVER, rc > 0 ? why : "out of memory");
        return;
    }
    if (read)
        pool->m.gutter.reads++;
    else
        pool->m.gutter.writes++;
    /* The answer may come at once (a connection that cannot be opened): rq may be done after. */
    if (px_rq_fork(rq, s, rt, gc->pool, gc->pool->route, b.p, b.len) != 0)
        px_rq_return_error(rq, rt, &s, 1, PX_ERR_SERVER, "out of memory");
    px_buf_free(&b);
}

static void gutter_start(px_route *rt, px_rq *rq, px_slot s)
{
    const px_gutter_conf *gc = rt->conf;
    px_pool *pool = rq->pool;
    if ((!px_health_any_down(pool->health) &&
         !px_health_ramping(pool->health, px_io_now(pool->io))) ||
        rq->msg.nkeys == 0) {
        px_rq_pass(rq, s, rt, rt->child[0]);
        return;
    }
    char decoded[PX_MAX_ROUTE_KEY];
    size_t len = 0;
    const char *key = px_rq_route_key(rq, s, decoded, sizeof(decoded), &len);
    if (key != NULL && !rq->msg.cmd->retry)
        px_route_pool_write_switch(pool, key, len); /* a ramp's write goes to the owner */
    px_where owner = key != NULL ? px_route_where(rt->child[0], rq, key, len)
                                 : (px_where){0, SIZE_MAX, false};
    if (owner.up || owner.index == SIZE_MAX) {
        px_rq_pass(rq, s, rt, rt->child[0]);
        return;
    }
    if (!rq->msg.cmd->retry) {
        /* Journaled, then looked at again (the readmission's lock orders the two). */
        px_health_journal(pool->health, owner.index, key, len);
        if (px_health_up(pool->health, owner.index)) {
            px_rq_pass(rq, s, rt, rt->child[0]);
            return;
        }
    }
    if (gc->pool->route == NULL || !px_route_pool_any_up(gc->pool)) {
        pool->m.gutter.unavailable++;
        px_rq_pass(rq, s, rt, rt->child[0]);
        return;
    }
    to_gutter(rt, rq, s);
}

/* The gutter pool's answer for one slot (its side request): up as it is. */
static void gutter_reply(px_route *rt, px_rq *rq, const px_slot *slots, size_t n,
                         const px_reply *r)
{
    if (r->kind == PX_REPLY_FAILED)
        rq->pool->stats.forward_error += n;
    px_rq_return(rq, rt, slots, n, r);
}

const px_route_ops px_route_gutter_ops = {
    .name = "gutter",
    .start = gutter_start,
    .reply = gutter_reply,
};

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_gutter.c — the gutter pool (route_gutter.h). For each slot:
 *
 *   no server of the pool ejected, or the key's owner up  -> passed to child[0] as it is;
 *   the owner ejected, a read                             -> the key's gutter server, as is;
 *   the owner ejected, a write or a delete                -> journaled for the owner's rejoin,
 *       then sent to the key's gutter server with its lifetimes capped at gutter_ttl
 *       (codec->encode_capped); a write the codec cannot cap is refused with its error;
 *   no gutter server up                                   -> passed to child[0] (the ring's
 *       next candidate, as without a gutter; counted as unavailable).
 *
 * The owner is the key's node under the pool's current placement (ch_lookup_hash), its state
 * the shared health (px_health_up), so every worker and the rejoin agree on it. A write is
 * journaled before its owner is looked at again: px_health_journal takes the lock the owner's
 * readmission checks (px_health_readmit), so either the key is journaled first and the owner
 * stays out until its rejoin deletes the key there (the gutter then has the only value), or the
 * owner is up again when looked at and the write goes to it (child[0]).
 *
 * A slot sent to the gutter goes alone (px_rq_send_own: one key's request, answered for that
 * slot), so a split command's keys of a lost owner each reach the gutter on their own. A slot's
 * state word (px_rq_state): 0 passed to child[0]; else the gutter server's index + 1, with
 * GUTTER_RETRIED once a read that failed there was sent to the gutter's next candidate.
 * Cost while no server of the pool is out: one atomic load per slot. While one is: a hash and a
 * lookup per slot, and for the gutter's slots their own encoding (a copy).
 */
#include "route_gutter.h"
#include "request.h"
#include "warm.h"

#include <stdint.h>
#include <time.h>

#define GUTTER_RETRIED (UINT64_C(1) << 32)

/* The wall clock in ms since the epoch, for absolute lifetimes (Redis's EXAT, PXAT). */
static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The key's owner under the pool's current placement when it is ejected, else SIZE_MAX. */
static size_t owner_out(const px_pool *pool, const char *key, size_t len)
{
    if (pool->nservers == 0 || pool->table == NULL)
        return SIZE_MAX;
    size_t o = ch_lookup_hash(pool->table, ch_key_hash(pool->table, key, len));
    return o < pool->nservers && !px_health_up(pool->health, o) ? o : SIZE_MAX;
}

/* The first server of the gutter pool's walk for key that is up and not `skip` (SIZE_MAX:
 * none to skip), or SIZE_MAX. */
static size_t gutter_server(const px_pool *g, const char *key, size_t len, size_t skip)
{
    if (g->nservers == 0 || g->table == NULL)
        return SIZE_MAX;
    size_t cand[2], n = 0, want = skip == SIZE_MAX ? 1 : 2;
    uint64_t kh = ch_key_hash(g->table, key, len);
    if (px_health_route(g->health, g->table, kh, want, cand, &n) != CH_OK &&
        px_health_route(g->health, g->table, kh, 1, cand, &n) != CH_OK) /* jump: no walk */
        n = 0;
    for (size_t i = 0; i < n; i++)
        if (cand[i] != skip && cand[i] < g->nservers)
            return cand[i];
    return SIZE_MAX;
}

/* Slot s to gutter server gi, for its key alone, its lifetimes capped (a read as it came, but
 * memcached's gat: capped too). */
static void to_gutter(px_route *rt, px_rq *rq, px_slot s, size_t gi, uint64_t retried)
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
    if (retried == 0) {
        if (read)
            pool->m.gutter.reads++;
        else
            pool->m.gutter.writes++;
    }
    *px_rq_state(rq, s, rt) = (uint64_t)gi + 1 + retried;
    px_warm_request a = {.bytes = &b, .expect = expect};
    /* The reply may come at once (a connection that cannot be opened): rq may be done after. */
    if (px_rq_send_own(rq, s, rt, &gc->pool->servers[gi], px_warm_encode, &a) != 0)
        px_rq_return_error(rq, rt, &s, 1, PX_ERR_SERVER, "out of memory");
    px_buf_free(&b);
}

static void gutter_start(px_route *rt, px_rq *rq, px_slot s)
{
    const px_gutter_conf *gc = rt->conf;
    px_pool *pool = rq->pool;
    *px_rq_state(rq, s, rt) = 0;
    if (!px_health_any_down(pool->health) || rq->msg.nkeys == 0) {
        px_rq_pass(rq, s, rt, rt->child[0]);
        return;
    }
    char decoded[PX_MAX_ROUTE_KEY];
    size_t len = 0;
    const char *key = px_rq_route_key(rq, s, decoded, sizeof(decoded), &len);
    size_t owner = key != NULL ? owner_out(pool, key, len) : SIZE_MAX;
    if (owner == SIZE_MAX) {
        px_rq_pass(rq, s, rt, rt->child[0]);
        return;
    }
    if (!rq->msg.cmd->retry) {
        /* Journaled, then looked at again (the readmission's lock orders the two). */
        px_health_journal(pool->health, owner, key, len);
        if (px_health_up(pool->health, owner)) {
            px_rq_pass(rq, s, rt, rt->child[0]);
            return;
        }
    }
    size_t gi = gutter_server(gc->pool, key, len, SIZE_MAX);
    if (gi == SIZE_MAX) {
        pool->m.gutter.unavailable++;
        px_rq_pass(rq, s, rt, rt->child[0]);
        return;
    }
    to_gutter(rt, rq, s, gi, 0);
}

/* The gutter's answer for one slot (px_rq_send_own): up as it is, but a read whose gutter
 * server failed goes once to the gutter's next candidate. */
static void gutter_reply(px_route *rt, px_rq *rq, const px_slot *slots, size_t n,
                         const px_reply *r)
{
    const px_gutter_conf *gc = rt->conf;
    if (n == 1 && r->kind == PX_REPLY_FAILED && rq->msg.cmd->retry && !rq->pool->io->stopping) {
        px_slot s = slots[0];
        uint64_t st = *px_rq_state(rq, s, rt);
        char decoded[PX_MAX_ROUTE_KEY];
        size_t len = 0;
        const char *key = (st & GUTTER_RETRIED) == 0
                              ? px_rq_route_key(rq, s, decoded, sizeof(decoded), &len)
                              : NULL;
        size_t gi = key != NULL ? gutter_server(gc->pool, key, len, (size_t)(st & 0xffffffffu) - 1)
                                : SIZE_MAX;
        if (gi != SIZE_MAX) {
            to_gutter(rt, rq, s, gi, GUTTER_RETRIED);
            return;
        }
    }
    if (r->kind == PX_REPLY_FAILED)
        rq->pool->stats.forward_error += n;
    px_rq_return(rq, rt, slots, n, r);
}

const px_route_ops px_route_gutter_ops = {
    .name = "gutter",
    .start = gutter_start,
    .reply = gutter_reply,
};

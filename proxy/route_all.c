/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_all.c — the route of a command sent whole to every server of the pool (SCRIPT LOAD,
 * EXISTS, FLUSH: px_cmd.merge PX_MERGE_EVERY). The request has one slot per server, slot i for
 * the pool's i-th server in membership order (request.c); each part's reply goes to the codec's
 * merge, which checks that the servers agree (the same SHA, +OK) or combines them (EXISTS: the
 * AND per script). An ejected or failing server is not skipped: its part answers an error, and
 * so the whole reply is that error, since a script missing on one server would fail there
 * later. Nothing is retried (the parts are writes).
 */
#include "route_all.h"
#include "request.h"

static void all_start(px_route *rt, px_rq *rq, px_slot s)
{
    px_pool *pool = rq->pool;
    if (s >= pool->nservers) {
        px_rq_answer_error(rq, &s, 1, PX_ERR_SERVER, "no backend available");
        return;
    }
    px_rq_send(rq, s, rt, &pool->servers[s]);
}

static void all_reply(px_route *rt, px_rq *rq, const px_slot *slots, size_t n, const px_reply *r)
{
    (void)rt;
    if (r->kind == PX_REPLY_FAILED)
        rq->pool->stats.forward_error++;
    px_rq_answer(rq, slots, n, r);
}

static const px_route_ops all_ops = {
    .name = "all",
    .start = all_start,
    .reply = all_reply,
};

px_route px_route_all = {.ops = &all_ops};

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_scan.c — SCAN across a pool: the servers are walked one after the other in membership
 * order, each with its own SCAN cursor; the client's cursor encodes which server and that
 * server's cursor (route_scan.h), so the proxy keeps no state between the calls of a walk.
 * MATCH, COUNT and TYPE go to each server as the client gave them.
 *
 * Each call asks one server: a call may answer fewer keys than COUNT (even none) while the walk
 * goes on, which Redis's SCAN allows. When a server's walk ends (its cursor 0), the next
 * cursor names the next server with cursor 0; after the last server it is 0.
 *
 * Guarantees: Redis's, per server (a key present for the whole walk is returned at least once,
 * duplicates possible when a server's table is resized), and every server in the membership is
 * walked exactly once in order. A cursor carries a 12-bit tag of the membership version: a
 * cursor from another membership (after a reload changed the servers) is refused with an error
 * rather than continuing on a server that may now hold other keys. A cursor naming no server of
 * the pool, or of the wrong tag, is refused the same way; one that passes goes only to the
 * server it names, with a server cursor Redis accepts whatever its value (a forged one can only
 * repeat or skip keys of that server). A server cursor at or over 2^40 (a table of over a
 * trillion buckets) cannot be encoded: an error.
 */
#include "route_scan.h"
#include "request.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define CURSOR_MASK ((UINT64_C(1) << PX_SCAN_CURSOR_BITS) - 1)
#define TAG_MASK ((UINT32_C(1) << PX_SCAN_TAG_BITS) - 1)
#define INDEX_MAX ((size_t)1 << PX_SCAN_INDEX_BITS)

uint64_t px_scan_cursor(size_t index, uint32_t tag, uint64_t server_cursor)
{
    return (uint64_t)index << (PX_SCAN_CURSOR_BITS + PX_SCAN_TAG_BITS) |
           (uint64_t)(tag & TAG_MASK) << PX_SCAN_CURSOR_BITS | (server_cursor & CURSOR_MASK);
}

bool px_scan_split(uint64_t cursor, uint32_t tag, size_t nservers, size_t *index,
                   uint64_t *server_cursor)
{
    size_t i = (size_t)(cursor >> (PX_SCAN_CURSOR_BITS + PX_SCAN_TAG_BITS));
    uint32_t t = (uint32_t)(cursor >> PX_SCAN_CURSOR_BITS) & TAG_MASK;
    if (t != (tag & TAG_MASK) || i >= nservers)
        return false;
    *index = i;
    *server_cursor = cursor & CURSOR_MASK;
    return true;
}

uint32_t px_scan_tag(const char *version)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)version; p != NULL && *p != '\0'; p++)
        h = (h ^ *p) * 16777619u;
    return (h ^ (h >> 12) ^ (h >> 24)) & TAG_MASK;
}

static uint32_t pool_tag(const px_pool *pool)
{
    return px_scan_tag(ch_membership_version(pool->members));
}

static void scan_start(px_route *rt, px_rq *rq, px_slot s)
{
    px_pool *pool = rq->pool;
    size_t index = 0;
    uint64_t sc = 0;
    if (pool->nservers == 0 || pool->nservers > INDEX_MAX) {
        px_rq_answer_error(rq, &s, 1, PX_ERR_CLIENT,
                           "SCAN is served for pools of 1 to 4096 servers");
        return;
    }
    if (rq->msg.cursor != 0 &&
        !px_scan_split(rq->msg.cursor, pool_tag(pool), pool->nservers, &index, &sc)) {
        px_rq_answer_error(rq, &s, 1, PX_ERR_CLIENT,
                           "invalid cursor: not one of this pool's, or from before a change of "
                           "its servers (start the SCAN again from 0)");
        return;
    }
    rq->msg.cursor = sc;
    px_rq_send(rq, s, rt, &pool->servers[index]);
}

/* The index of the server a slot was sent to, by its uid (stable across reloads); SIZE_MAX
 * when it left the pool meanwhile. */
static size_t sent_to(const px_rq *rq, px_slot s)
{
    const px_rq_slot *sl = &rq->slots[s];
    for (size_t i = 0; sl->ntried > 0 && i < rq->pool->nservers; i++)
        if (rq->pool->servers[i].uid == sl->tried[sl->ntried - 1])
            return i;
    return SIZE_MAX;
}

static void scan_reply(px_route *rt, px_rq *rq, const px_slot *slots, size_t n, const px_reply *r)
{
    (void)rt;
    px_pool *pool = rq->pool;
    if (r->kind == PX_REPLY_FAILED || r->kind == PX_REPLY_ERROR) {
        if (r->kind == PX_REPLY_FAILED)
            pool->stats.forward_error++;
        px_rq_answer(rq, slots, n, r);
        return;
    }
    size_t index = sent_to(rq, slots[0]);
    uint64_t next = 0;
    if (index == SIZE_MAX) {
        px_rq_answer_error(rq, slots, n, PX_ERR_SERVER,
                           "the server of this SCAN left the pool (start again from 0)");
        return;
    }
    if (rq->codec->scan_cursor(r, &next) != 0) {
        px_rq_answer_error(rq, slots, n, PX_ERR_SERVER, "unexpected reply to SCAN from a backend");
        return;
    }
    if (next > CURSOR_MASK) {
        px_rq_answer_error(rq, slots, n, PX_ERR_SERVER,
                           "a backend's SCAN cursor is too large for the proxy's cursor");
        return;
    }
    uint64_t cursor = next != 0                     ? px_scan_cursor(index, pool_tag(pool), next)
                      : index + 1 < pool->nservers ? px_scan_cursor(index + 1, pool_tag(pool), 0)
                                                   : 0;
    px_buf out = {0};
    if (rq->codec->scan_rewrite(&out, r, cursor) != 0) {
        px_buf_free(&out);
        px_rq_answer_error(rq, slots, n, PX_ERR_SERVER, "out of memory");
        return;
    }
    px_reply mine = {.p = out.p, .len = out.len, .kind = PX_REPLY_VALUE, .integer = 2};
    px_rq_answer(rq, slots, n, &mine);
    px_buf_free(&out);
}

static const px_route_ops scan_ops = {
    .name = "scan",
    .start = scan_start,
    .reply = scan_reply,
};

px_route px_route_scan = {.ops = &scan_ops};

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_coalesce.c — singleflight for identical reads (route_coalesce.h).
 *
 * Which reads: a request of one slot and one key whose command is a read that may be retried
 * (px_cmd cls PX_CLASS_READ, retry: GET, HGET, memcached get k, mg k ...). Identical: the same
 * request bytes from clients of the same dialect (a RESP2 client never gets a reply written for
 * a RESP3 one: HGETALL's is a map there), started on the same tree (a reload's new tree starts
 * its own groups, so a waiter is answered through this very route of its own tree). A waiter
 * gets the server's answer to the leader, which the server may have read up to one round trip
 * before the waiter arrived: what a read sent together with the leader would get.
 * Read-your-writes holds through this worker: a write (any request of another class) of a key
 * closes the groups of its key before it is sent, so a read after it starts a group of its own.
 * A client's connection lives on one worker, so its own writes always close them; writes of
 * other workers, proxies or clients are not seen, as for any two concurrent reads.
 *
 * State, all this worker's: the route's table of open groups in its tree (its state, built
 * with the tree: the key's hash and the leader, open addressing, removal by backward shift; a
 * reload's tree has a table of its own), and the waiters as a list through the slot words at
 * this route's level (next_waiter): the leader's is the first waiter, each waiter's the next. A request in flight is never freed (request.h:
 * its owner frees it once done), so the list holds only live requests. Cost per read: one probe
 * run of a table at most half full (the key's hash is the request's, px_rq_key_hash, computed
 * once); a write adds one probe run per key.
 */
#include "route_coalesce.h"
#include "request.h"

#include <stdlib.h>
#include <string.h>

/* Reads in flight others may join, per tree (a pool's, per worker): at most half of SLOTS. */
#define SLOTS 512u
#define MASK (SLOTS - 1u)

typedef struct flights {
    size_t n;
    struct {
        uint64_t khash;
        px_rq *leader; /* NULL: empty */
    } at[SLOTS];
} flights;

/* A slot's word at this route: the next waiter of its group (a leader's: the first). */
PX_SLOT_WORD(next_waiter, px_rq *)

static flights *table_of(const px_route *rt)
{
    return rt->state;
}

/* Removes the group at table position p, shifting later members of its run back. */
static void flight_remove(flights *f, size_t p)
{
    size_t j = p;
    for (;;) {
        j = (j + 1) & MASK;
        if (f->at[j].leader == NULL)
            break;
        size_t home = (size_t)f->at[j].khash & MASK;
        if (((j - home) & MASK) >= ((j - p) & MASK)) {
            f->at[p] = f->at[j];
            p = j;
        }
    }
    f->at[p].leader = NULL;
    f->n--;
}

/* Closes every group of the key of this hash. */
static void close_groups(flights *f, uint64_t h)
{
    size_t p = (size_t)h & MASK;
    while (f->at[p].leader != NULL) {
        if (f->at[p].khash == h)
            flight_remove(f, p); /* p now holds the next of the run, or is empty */
        else
            p = (p + 1) & MASK;
    }
}

static bool joinable(const px_rq *rq)
{
    const px_cmd *c = rq->msg.cmd;
    /* a tracking client's read is sent tracked itself (client_track.h): it neither leads nor
     * joins a group whose send another made */
    return c->cls == PX_CLASS_READ && c->retry && rq->nslots == 1 && rq->msg.nkeys == 1 &&
           !rq->ctrack;
}

static void coalesce_start(px_route *rt, px_rq *rq, px_slot s)
{
    px_pool *pool = rq->pool;
    flights *f = table_of(rt);
    uint64_t h;
    next_waiter_set(rq, s, rt, NULL);
    if (!joinable(rq)) {
        /* A write, or a read that does not join: a write closes its keys' groups. */
        if (rq->msg.cmd->cls != PX_CLASS_READ && f->n > 0) {
            size_t from = rq->nslots == 1 ? 0 : rq->slots[s].key;
            size_t to = rq->nslots == 1 ? rq->msg.nkeys : from + 1;
            for (size_t k = from; k < to; k++)
                if (px_rq_key_hash(rq, k, &h))
                    close_groups(f, h);
        }
        px_rq_pass(rq, s, rt, rt->child[0]);
        return;
    }
    if (!px_rq_key_hash(rq, 0, &h)) {
        px_rq_pass(rq, s, rt, rt->child[0]);
        return;
    }
    size_t p = (size_t)h & MASK;
    for (; f->at[p].leader != NULL; p = (p + 1) & MASK) {
        px_rq *l = f->at[p].leader;
        if (f->at[p].khash == h && l->msg.len == rq->msg.len &&
            l->msg.dialect == rq->msg.dialect &&
            memcmp(l->msg.raw, rq->msg.raw, rq->msg.len) == 0) {
            /* Join: first in the leader's list (answered in any order: each its own client). */
            next_waiter_set(rq, s, rt, next_waiter_get(l, 0, rt));
            next_waiter_set(l, 0, rt, rq);
            pool->m.coalesced++;
            return;
        }
    }
    if (f->n < SLOTS / 2) { /* lead a group */
        f->at[p].khash = h;
        f->at[p].leader = rq;
        f->n++;
    }
    px_rq_call(rq, s, rt, rt->child[0]);
}

static void coalesce_reply(px_route *rt, px_rq *rq, const px_slot *slots, size_t n,
                           const px_reply *r)
{
    flights *f = table_of(rt);
    uint64_t h;
    /* Only a leader is called here (n == 1, slot 0); its group closes now, if still open. */
    if (px_rq_key_hash(rq, 0, &h)) {
        size_t p = (size_t)h & MASK;
        while (f->at[p].leader != NULL && f->at[p].leader != rq)
            p = (p + 1) & MASK;
        if (f->at[p].leader == rq)
            flight_remove(f, p);
    }
    /* The waiters first: r may point into the leader's request, which its answer can free. */
    px_rq *w = next_waiter_get(rq, slots[0], rt);
    next_waiter_set(rq, slots[0], rt, NULL);
    static const px_slot zero = 0;
    while (w != NULL) {
        px_rq *next = next_waiter_get(w, 0, rt);
        next_waiter_set(w, 0, rt, NULL);
        px_rq_return(w, rt, &zero, 1, r);
        w = next;
    }
    px_rq_return(rq, rt, slots, n, r);
}

static int coalesce_build(px_route *rt, px_pool *pool, px_route *was)
{
    (void)pool, (void)was; /* a new tree's groups are its own: its requests' answers come back
                              through its own routes */
    rt->state = calloc(1, sizeof(flights));
    return rt->state != NULL ? 0 : -1;
}

static void coalesce_free(px_route *rt)
{
    free(rt->state);
    rt->state = NULL;
}

const px_route_ops px_route_coalesce_ops = {
    .name = "coalesce",
    .start = coalesce_start,
    .reply = coalesce_reply,
    .build = coalesce_build,
    .free = coalesce_free,
};

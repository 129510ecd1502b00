/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route.h — a route decides where a request goes and what the client gets back (a "route
 * handle", as mcrouter calls them; not the library's ch_route*, which means "a key's candidate
 * list"). Routes are asynchronous: start() issues sends or calls, reply() receives each answer,
 * and a route never blocks and never touches a socket. Per-request state lives in the px_rq (its
 * slots), never in the route, so one route serves every request of a worker's pool.
 *
 * Routes compose into a tree per pool (route_build.c), as mcrouter's route handles do: a route
 * is a small policy over child routes (warm-up over the current and the previous placement,
 * shadow over the pool and a shadow pool, staging over the pool's tree while a change is
 * prepared, the gutter pool for the keys of an ejected server), with pool routes at the leaves, which alone hand
 * requests to backends. A route serves a slot by sending it (a leaf: px_rq_send), by calling a
 * child (px_rq_call: the child's answer comes back to this route's reply()), by passing it on
 * (px_rq_pass: the child's answer goes wherever this route's would), or by answering it
 * (px_rq_return). A slot is one key of a split command, or the whole request otherwise; replies
 * come back per part: a backend request that served several slots of one request (coalesced
 * by px_rq_flush) is answered once, for all of them.
 */
#ifndef CHASH_PROXY_ROUTE_H
#define CHASH_PROXY_ROUTE_H

#include "proto/codec.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct px_rq px_rq;       /* request.h */
typedef struct px_route px_route;
typedef struct px_pool px_pool;   /* pool.h */
typedef uint32_t px_slot;

/* Where a leaf places a key: the server (its process-unique uid, backend.h; 0: nowhere), its
 * index in the leaf's pool (shared health's; SIZE_MAX: none) and whether it serves now. A parent
 * compares its children's answers (the key moved, is staged, its owner is out) without knowing
 * what they are: fakes in tests answer from a table. */
typedef struct px_where {
    uint32_t server;
    size_t index;
    bool up;
} px_where;

typedef struct px_route_ops {
    const char *name; /* "pool" "warm" "shadow" ... */
    /* Serve slot s of rq: send it, call or pass a child, or answer it. */
    void (*start)(px_route *rt, px_rq *rq, px_slot s);
    /* The answer to slots[0, n) of rq: a part this route sent (PX_REPLY_FAILED: the server
     * failed; r->p holds the reason), or a child's answer to a call. */
    void (*reply)(px_route *rt, px_rq *rq, const px_slot *slots, size_t n, const px_reply *r);
    /* Optional: the route's own state for pool's tree being built (rt->state), on the pool's
     * worker; was is the same route of the tree it replaces (NULL: none), whose state it may
     * take over (a near cache kept across a reload). 0, or -1 (the tree is refused). */
    int (*build)(px_route *rt, px_pool *pool, px_route *was);
    /* Optional: frees rt->state, when the tree's last reference goes. */
    void (*free)(px_route *rt);
    /* Leaves: where this route places key (its routing bytes) for rq, before failover. */
    px_where (*where)(const px_route *rt, const px_rq *rq, const char *key, size_t len);
} px_route_ops;

/* The levels of a tree above its leaves: each slot keeps one word of state per level
 * (PX_SLOT_WORD), for the route at that level on its path. The deepest tree (route_build.c):
 * coalesce > near >
 * shadow > stage > gutter > warm > replica (route_replica.h) > leaves. Cost: 8 bytes per level
 * in each slot. */
#define PX_ROUTE_LEVELS 7u
#define PX_ROUTE_CHILDREN 9u /* replica: a leaf per owner (8 at most), then the walk's */

struct px_route {
    const px_route_ops *ops;
    px_route *parent;                   /* NULL: the root */
    px_route *child[PX_ROUTE_CHILDREN]; /* warm: {current, previous}; stage: {tree, next} */
    unsigned nchild;
    unsigned level;                     /* 0: the root; < PX_ROUTE_LEVELS unless a leaf */
    const void *conf;                   /* the route's own settings (route_pool: its placement) */
    void *state;                        /* the route's own state in this tree (ops->build): a
                                           worker's, alive while the tree is */
};

/* Where the usual path under rt (its first child, down to a leaf) places key. Cost: the
 * leaf's lookup. */
static inline px_where px_route_where(const px_route *rt, const px_rq *rq, const char *key,
                                      size_t len)
{
    while (rt->ops->where == NULL && rt->nchild > 0)
        rt = rt->child[0];
    if (rt->ops->where == NULL)
        return (px_where){0, SIZE_MAX, false};
    return rt->ops->where(rt, rq, key, len);
}

#endif /* CHASH_PROXY_ROUTE_H */

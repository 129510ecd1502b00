/*
 * route.h — a route decides where a request goes and what the client gets back (a "route
 * handle", as mcrouter calls them; not the library's ch_route*, which means "a key's candidate
 * list"). Routes are asynchronous: start() issues sends, reply() receives each answer, and a
 * route never blocks and never touches a socket; only the pool leaf (route_pool.c) hands
 * requests to backends. Per-request state lives in the px_rq (its slots), never in the route, so
 * one route serves every request of a worker's pool.
 *
 * A route answers a request slot by slot: a slot is one key of a split command, or the whole
 * request otherwise. Replies come back per part: a backend request that served several slots of
 * one request (coalesced by px_rq_flush) is answered once, for all of them.
 */
#ifndef CHASH_PROXY_ROUTE_H
#define CHASH_PROXY_ROUTE_H

#include "proto/codec.h"

#include <stddef.h>
#include <stdint.h>

typedef struct px_rq px_rq;       /* request.h */
typedef struct px_route px_route;
typedef uint32_t px_slot;

typedef struct px_route_ops {
    const char *name; /* "pool" */
    /* Serve slot s of rq: px_rq_send() it somewhere, or px_rq_answer() it at once. */
    void (*start)(px_route *rt, px_rq *rq, px_slot s);
    /* The reply to a part that served slots[0, n) of rq (PX_REPLY_FAILED: the server failed;
     * r->p holds the reason). */
    void (*reply)(px_route *rt, px_rq *rq, const px_slot *slots, size_t n, const px_reply *r);
} px_route_ops;

struct px_route {
    const px_route_ops *ops;
};

#endif /* CHASH_PROXY_ROUTE_H */

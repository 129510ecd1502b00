/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_pool.h — the leaf routes over one pool (route_pool.c), the only routes that send to a
 * server: the pool's current placement, its warm-up window's previous one (warm.h), or the
 * placement a prepared change will give it (its stage, px_pool.stage). Stateless: a leaf's conf
 * names its placement, and a request carries its pool.
 */
#ifndef CHASH_PROXY_ROUTE_POOL_H
#define CHASH_PROXY_ROUTE_POOL_H

#include "route.h"

#include <stdbool.h>

typedef struct px_server px_server; /* backend.h */
struct px_pool;                     /* pool.h */

typedef enum px_placement {
    PX_PLACE_CURRENT,  /* the pool's membership: candidates, health, failover */
    PX_PLACE_PREVIOUS, /* the window's previous membership: a key's old owner, alone */
    PX_PLACE_NEXT,     /* the stage's membership: a key's owner after the change, alone */
    PX_PLACE_REPLICA,  /* one of a key's owners under the pool's membership (`replicas`): the
                          rank-th, alone, when it is up */
} px_placement;

/* A leaf's conf (px_route.conf). */
typedef struct px_leaf {
    px_placement place;
    unsigned rank; /* PX_PLACE_REPLICA: which of the key's owners (0: its first) */
} px_leaf;

/* The most owners of a key in a replicated pool (the config's bound on `replicas`). */
#define PX_MAX_REPLICAS 8u

extern const px_leaf px_leaf_current, px_leaf_previous, px_leaf_next,
    px_leaf_replica[PX_MAX_REPLICAS];
extern const px_route_ops px_route_pool_ops;

/* The server leaf would send slot s to next (one it has not tried), or NULL. */
px_server *px_route_pool_next(const px_route *leaf, px_rq *rq, px_slot s);
/* The old owner of key (its routing bytes) in pool's warm-up window when the change moved it
 * and that owner can still serve it (up, or retired but kept for the window; not failed in
 * it); NULL otherwise, or without a window. Cost: two lookups. */
px_server *px_route_pool_moved(const struct px_pool *pool, const char *key, size_t len);
/* The index of key's (its routing bytes) owner under pool's current placement when that server
 * is ejected; SIZE_MAX when it is up. Cost: a hash and a lookup. */
size_t px_route_pool_owner_out(const struct px_pool *pool, const char *key, size_t len);
/* Whether some server of pool is up. Cost: O(servers) at worst. */
bool px_route_pool_any_up(const struct px_pool *pool);
/* The server key (its routing bytes) goes to after pool's staged change, when that is another
 * than its owner now; NULL when it stays, or nothing is staged. Cost: two lookups. */
px_server *px_route_pool_staged(const struct px_pool *pool, const char *key, size_t len);
/* Whether rq is a one-server command (MSETNX, EVAL) whose keys have different owners. */
bool px_route_pool_cross(const px_rq *rq);
/* The owners of key (its routing bytes) in a replicated pool: the first `replicas` distinct
 * servers of its walk, their indexes into own[] (PX_MAX_REPLICAS of room), rank order; their
 * number, 0 when the placement has no walk (jump). Cost: a hash and the table's walk. */
size_t px_route_pool_owners(const struct px_pool *pool, const char *key, size_t len,
                            size_t *own);

#endif /* CHASH_PROXY_ROUTE_POOL_H */

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
/* A write of key is about to be routed (its first routing): when its owner is in its
 * readmission ramp and has not switched the key yet, the key's bucket switches now
 * (px_health_switch_early), so the write goes to the owner and the reads after it too. Costs
 * nothing outside a ramp; in one, a placement lookup and an XXH3. */
void px_route_pool_write_switch(struct px_pool *pool, const char *key, size_t len);
/* Whether some server of pool is up. Cost: O(servers) at worst. */
bool px_route_pool_any_up(const struct px_pool *pool);
/* Whether key (its routing bytes) changes owner under the change pool stages: the staged
 * placement's owner against the current one's, as route_stage.c's two children answer where()
 * in the usual tree. For the session, which refuses what the staging cannot follow before the
 * tree is started. Cost: one test when nothing is staged, else two lookups. */
bool px_route_pool_moves(const struct px_pool *pool, const char *key, size_t len);

#endif /* CHASH_PROXY_ROUTE_POOL_H */

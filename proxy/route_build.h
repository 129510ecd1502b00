/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_build.h — a pool's tree of routes (route_build.c; route.h), built for each worker's
 * copy of a pool: px_pool.tree, its root px_pool.route.
 */
#ifndef CHASH_PROXY_ROUTE_BUILD_H
#define CHASH_PROXY_ROUTE_BUILD_H

#include <stddef.h>

typedef struct px_pool px_pool;             /* pool.h */
typedef struct px_route_tree px_route_tree; /* pool.h */

/* Builds pool's tree from its config and makes it the pool's (the previous one is released):
 *     [near {] [coalesce {] [shadow {] [stage {] [gutter {] warm {current pool leaf, previous
 *         pool leaf} [}] [}] [, the shadow pool}] [}] [}]
 * (stage while a membership change is prepared: px_pool.stage; gutter when the pool has one;
 * with `replicas` > 1 the current pool leaf is replica {its copies, current pool leaf},
 * route_replica.h).
 * pools[0, npools) are the worker's pools (the shadow and gutter pools are among them, by
 * name). Returns
 * 0, or -1 when out of memory or when the tree would not fit PX_POOL_ROUTES nodes and
 * PX_ROUTE_LEVELS levels of state (the pool keeps its tree). Called when the worker sets its pools
 * up and at each reload's commit, between two requests of the worker's loop. */
int px_route_build(px_pool *pool, px_pool *pools, size_t npools);
/* Drops the pool's own reference (the worker's shutdown). */
void px_route_drop(px_pool *pool);

#endif /* CHASH_PROXY_ROUTE_BUILD_H */

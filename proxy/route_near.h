/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_near.h — the near cache of hot keys as the root of a pool's tree (route_near.c;
 * src/hot/near.h; docs/OPERATIONS.md, "Hot keys"), when the pool sets hot_cache. Over one
 * child, the rest of the tree: a read it holds fresh is answered from the worker's memory, any
 * other passes or is called through.
 */
#ifndef CHASH_PROXY_ROUTE_NEAR_H
#define CHASH_PROXY_ROUTE_NEAR_H

#include "route.h"

typedef struct px_pool px_pool;

extern const px_route_ops px_route_near_ops;

/* Whether pool's tree has a near cache: hot_cache set, and a share of hot_cache_max_bytes for
 * this worker. Its cache is the route's state (built with the tree, taken over by the next
 * tree when its settings are the same, so a reload keeps what it holds). */
bool px_route_near_wanted(const px_pool *pool);

#endif /* CHASH_PROXY_ROUTE_NEAR_H */

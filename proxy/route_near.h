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

/* The worker's near cache of pool as its config asks (created, replaced when its settings
 * changed, freed when off); at start and each reload, on the worker's thread. 0, or -1 when
 * out of memory (the pool then goes without one). */
int px_route_near_configure(px_pool *pool);
/* Frees the worker's near cache of pool (its teardown). */
void px_route_near_free(px_pool *pool);

#endif /* CHASH_PROXY_ROUTE_NEAR_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_pool.h — the leaf routes over one pool (route_pool.c): the pool's current placement,
 * or its warm-up window's previous one (warm.h). Stateless: a leaf's conf names its placement,
 * and a request carries its pool.
 */
#ifndef CHASH_PROXY_ROUTE_POOL_H
#define CHASH_PROXY_ROUTE_POOL_H

#include "route.h"

#include <stdbool.h>

typedef struct px_server px_server; /* backend.h */

typedef enum px_placement {
    PX_PLACE_CURRENT,  /* the pool's membership: candidates, health, failover */
    PX_PLACE_PREVIOUS, /* the window's previous membership: a key's old owner, alone */
} px_placement;

/* The confs of the two leaves (px_route.conf). */
extern const px_placement px_place_current, px_place_previous;
extern const px_route_ops px_route_pool_ops;

/* The server leaf would send slot s to next (one it has not tried), or NULL. */
px_server *px_route_pool_next(const px_route *leaf, px_rq *rq, px_slot s);
/* Whether rq is a one-server command (MSETNX, EVAL) whose keys have different owners. */
bool px_route_pool_cross(const px_rq *rq);

#endif /* CHASH_PROXY_ROUTE_POOL_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_warm.h — warm-up as a route over two pool leaves (route_warm.c): child[0] the current
 * placement, child[1] the previous one of the pool's window (route_pool.h). Outside a window,
 * or for a key that did not move, it passes the slot to child[0] as it is: one branch and one
 * call per request.
 */
#ifndef CHASH_PROXY_ROUTE_WARM_H
#define CHASH_PROXY_ROUTE_WARM_H

#include "route.h"

extern const px_route_ops px_route_warm_ops;

#endif /* CHASH_PROXY_ROUTE_WARM_H */

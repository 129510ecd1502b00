/*
 * route_pool.h — the leaf route over one pool (route_pool.c). Stateless: one serves every pool
 * (a request carries its pool).
 */
#ifndef CHASH_PROXY_ROUTE_POOL_H
#define CHASH_PROXY_ROUTE_POOL_H

#include "route.h"

extern px_route px_route_pool;

#endif /* CHASH_PROXY_ROUTE_POOL_H */

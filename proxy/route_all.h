/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_all.h — the route of a command sent to every server of a pool (route_all.c).
 * Stateless: one serves every pool.
 */
#ifndef CHASH_PROXY_ROUTE_ALL_H
#define CHASH_PROXY_ROUTE_ALL_H

#include "route.h"

extern px_route px_route_all;

#endif /* CHASH_PROXY_ROUTE_ALL_H */

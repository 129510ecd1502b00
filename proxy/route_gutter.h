/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_gutter.h — the gutter pool as a route (route_gutter.c; docs/PROXY.md, "Gutter pool";
 * Facebook's gutter pool, "Scaling Memcache at Facebook", NSDI'13, 3.3): child[0] the pool's
 * own tree; while a key's owner (the pool's current placement) is ejected, the key's reads,
 * writes and deletes go to the gutter pool (px_gutter_conf, pool.h) instead, every write's
 * lifetime capped at gutter_ttl (px_codec.encode_capped), so the pool's healthy servers take
 * none of its load and nothing written there outlives the failure by more than gutter_ttl.
 */
#ifndef CHASH_PROXY_ROUTE_GUTTER_H
#define CHASH_PROXY_ROUTE_GUTTER_H

#include "route.h"

extern const px_route_ops px_route_gutter_ops;

#endif /* CHASH_PROXY_ROUTE_GUTTER_H */

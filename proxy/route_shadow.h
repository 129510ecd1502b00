/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_shadow.h — shadow traffic as a route (route_shadow.c): child[0] the pool's own tree,
 * and a share of the key space mirrored to another pool of the same worker (px_shadow_conf,
 * pool.h), the answers compared and counted (px_pool_metrics shadow_*). The client's answer is
 * always child[0]'s, never delayed by the shadow.
 */
#ifndef CHASH_PROXY_ROUTE_SHADOW_H
#define CHASH_PROXY_ROUTE_SHADOW_H

#include "route.h"

/* Shadow requests one pool may have in flight on one worker; beyond, requests are not
 * shadowed (counted: chash_proxy_shadow_requests_total{outcome="skipped"}). */
#define PX_SHADOW_INFLIGHT 1024u

extern const px_route_ops px_route_shadow_ops;

#endif /* CHASH_PROXY_ROUTE_SHADOW_H */

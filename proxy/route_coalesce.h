/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_coalesce.h — coalescing as a route (route_coalesce.c): singleflight for identical
 * single-key reads on one worker's pool. child[0] is the rest of the pool's tree. The first of
 * a group of identical reads in flight at once (the leader) is served by child[0]; the others
 * wait for its answer and get the same bytes, success or error; a write of the key closes the
 * group to later reads. Counted as px_pool_metrics.coalesced (chash_proxy_coalesced_reads_total).
 */
#ifndef CHASH_PROXY_ROUTE_COALESCE_H
#define CHASH_PROXY_ROUTE_COALESCE_H

#include "route.h"

extern const px_route_ops px_route_coalesce_ops;

#endif /* CHASH_PROXY_ROUTE_COALESCE_H */

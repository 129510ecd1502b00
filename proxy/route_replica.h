/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_replica.h — a replicated pool's current placement (`replicas: N`, route_replica.c): in
 * place of the current pool leaf under warm-up when N > 1. A key's owners are the first N
 * distinct servers of its walk (px_route_pool_owners), the ejected ones skipped; writes and
 * deletes go to every owner up, reads to the first owner up, a miss there read from the next
 * owner and, on a hit, copied back to the first (a store that never overwrites). The rules are
 * docs/PROXY.md's, "Replicated pools".
 *
 * Its children: child[i] for i < N the leaf of the key's i-th owner (PX_PLACE_REPLICA, rank i),
 * child[N] the current pool leaf, which serves what the replicas do not (keyless commands, keys
 * that do not decode, a key with no owner up: routed as without replicas).
 */
#ifndef CHASH_PROXY_ROUTE_REPLICA_H
#define CHASH_PROXY_ROUTE_REPLICA_H

#include "route.h"

extern const px_route_ops px_route_replica_ops;

#endif /* CHASH_PROXY_ROUTE_REPLICA_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_replica.h — a replicated pool's current placement (`replicas: N`, route_replica.c): in
 * place of the current pool leaf under warm-up when N > 1. A key's owners are the first N
 * distinct servers of its walk (ch_replicas_hash over the pool's table), the ejected ones
 * skipped; writes and deletes go to every owner up, reads to the first owner up, a miss there
 * read from the next owner and, on a hit, copied back to the first (a store that never
 * overwrites). The rules are docs/PROXY.md's, "Replicated pools".
 *
 * Its children: child[0] its copies' sender (a leaf that only sends: the replies to the
 * owners after the first come back through it, so the route tells them from the first
 * owner's), child[1] the current pool leaf, which serves what the replicas do not (keyless
 * commands, keys that do not decode, a key with no owner up: routed as without replicas). Its
 * conf is the current placement's (px_place_current), so the warm-up route's moves find the
 * key's first owner up through it (px_route_pool_next).
 */
#ifndef CHASH_PROXY_ROUTE_REPLICA_H
#define CHASH_PROXY_ROUTE_REPLICA_H

#include "route.h"

extern const px_route_ops px_route_replica_ops;
extern const px_route_ops px_route_replica_copy_ops; /* its child[0] */

#endif /* CHASH_PROXY_ROUTE_REPLICA_H */

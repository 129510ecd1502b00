/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_prefix.h — prefix routing (docs/PROXY.md, "Prefix routing"): a listener's "routes"
 * send each key to the pool of its longest matching prefix, another pool of the worker with its
 * own tree (placement, warm-up, replicas, gutter, near cache, metrics).
 *
 * A request whose keys all go to one pool, unchanged, is handed to that pool before it is
 * routed (px_prefix_pick: rq->pool becomes it; the cost is the match of each key). A request
 * whose keys span pools (a split command: MGET, DEL, MSET, memcached's get k1 k2), or whose keys
 * lose their prefix ("strip"), is served by px_route_prefix: each slot a side request of its
 * pool (px_rq_fork), started on that pool's root, its answer merged as any part's.
 */
#ifndef CHASH_PROXY_ROUTE_PREFIX_H
#define CHASH_PROXY_ROUTE_PREFIX_H

#include "route.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct px_prefix px_prefix;

/* The table of pool's routes (pool->conf->routes) over the worker's pools[0, npools), for the
 * pool's tree (route_build.c). NULL when the pool has no routes; *err set when it has but the
 * table cannot be built (out of memory, a pool missing). */
px_prefix *px_prefix_build(const px_pool *pool, px_pool *pools, size_t npools, bool *err);
void px_prefix_free(px_prefix *t);

/* Where the key key[0, len) goes under t: its pool and the bytes stripped from its front (0:
 * none). A key matching no prefix goes to the catch-all route's pool, else to the listener's
 * own. Cost: the prefixes of the key's first byte, longest first, one memcmp each until one
 * matches. */
px_pool *px_prefix_match(const px_prefix *t, const char *key, size_t len, size_t *strip);
/* The pool of a request without keys: the catch-all route's, else the listener's own. */
px_pool *px_prefix_default(const px_prefix *t);

/* What rq (of a listener whose tree has table t) needs: 0, every key goes to *to unchanged (a
 * request without keys: the default pool); 1, its keys span pools or lose a prefix: it is
 * served by px_route_prefix; -1, it cannot be served across pools (a one-server command, a
 * script, a command that is not split, whose keys span pools; a command sent to every server of
 * a pool of another size): why[0, cap) says so. */
int px_prefix_pick(const px_prefix *t, px_rq *rq, px_pool **to, char *why, size_t cap);

/* The route of a request px_prefix_pick answered 1 (stateless: one serves every pool). */
extern px_route px_route_prefix;

#endif /* CHASH_PROXY_ROUTE_PREFIX_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * table_view.h — what src/route reads of a placement table beyond include/chash.h: the options
 * it was built with, its node count, and its failover walk under a filter. Defined by the pure
 * core (src/place/table.c); shared with src/route only, not installed, names ch__. The rest of
 * the core's layout (internal.h) stays private to the core (tests/lint/proxy_direction.py
 * --layers checks both).
 */
#ifndef CHASH_TABLE_VIEW_H
#define CHASH_TABLE_VIEW_H

#include "chash.h"

#include <stdbool.h>

/* The options t was built with, complete (every field set, defaults resolved as the build
 * resolved them), owned by t. Cost: O(1). */
const ch_options *ch__table_options(const ch_table *t);

/* N, the number of nodes of t. Cost: O(1). */
size_t ch__table_nodes(const ch_table *t);

/* Whether node may be a candidate (ch_node_up_fn has this shape). */
typedef bool (*ch__node_keep_fn)(const void *ctx, size_t node);

/* The candidates of the key hash kh: the distinct nodes of t's failover walk (owner first) for
 * which keep(ctx, node) holds (keep NULL: every node), in walk order, at most min(depth, limit,
 * N) of them, into out[0..*count). depth 0: *count = 0 (count may then be NULL). A table
 * without a walk (jump) knows only the owner: depth > 1 is CH_EUNSUPPORTED. Preconditions: t
 * non-NULL, out and count non-NULL when depth > 0. Allocates nothing; returns CH_OK or
 * CH_EUNSUPPORTED. Cost: the walk's steps until it has them, at most one turn of the table. */
int ch__table_walk(const ch_table *t, uint64_t kh, ch__node_keep_fn keep, const void *ctx,
                   size_t depth, size_t limit, size_t *out, size_t *count);

#endif /* CHASH_TABLE_VIEW_H */

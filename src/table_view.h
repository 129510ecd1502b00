/* SPDX-License-Identifier: Apache-2.0 */
/*
 * table_view.h — what src/route reads of a placement table beyond include/chash.h: the options
 * it was built with, its node count, and its failover walk under a filter; and how a call tells
 * why it failed (ch_error). Defined by the pure
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

/* Writes status and the message (printf's fmt) to err, within err->size, and returns status.
 * err NULL, or too small for a message: nothing is written. */
int ch__error_set(ch_error *err, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The end of a call that fills an err (set to CH_OK and "" when it began): a failure that told
 * nothing of its own (an allocation) is told by its status, ch_strerror(rc). Returns rc. */
int ch__error_end(ch_error *err, int rc);

#endif /* CHASH_TABLE_VIEW_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * router.c — a key's candidates: the table's walk (owner first, then the failover order) with
 * ejected nodes skipped and repeats dropped.
 *
 * Runs on every request, so it allocates nothing: the walk is the core's (ch__table_walk, which
 * ch_replicas() uses too), its state on the stack. The walk ends after one turn of the table, and
 * stops as soon as it holds min(depth, N, up nodes) candidates: with every node up it costs what
 * ch_replicas() costs, with every node ejected nothing, and at worst (a maglev node that owns no
 * slot, which the walk never meets) one turn.
 *
 * Only ejected nodes are skipped, and skipping never reorders the rest, so a key whose owner is
 * up keeps its owner as candidate 0: an ejection moves the ejected node's keys and no other.
 */
#include "../table_view.h"
#include "chash_route.h"
#include "route_internal.h"

int ch_route(const ch_table *t, const ch_health *h, const void *key, size_t len, size_t depth,
             size_t *out, size_t *count)
{
    if (t == NULL || (key == NULL && len > 0))
        return CH_EINVAL;
    return ch_route_hash(t, h, ch_key_hash(t, key, len), depth, out, count);
}

static bool health_up(const void *ctx, size_t node)
{
    return ((const ch_health *)ctx)->node[node].up;
}

int ch_route_hash(const ch_table *t, const ch_health *h, uint64_t kh, size_t depth, size_t *out,
                  size_t *count)
{
    if (t == NULL || (depth > 0 && (out == NULL || count == NULL)))
        return CH_EINVAL;
    /* A tracker of another size belongs to another membership: its indexes mean other nodes. */
    if (h != NULL && h->n != ch__table_nodes(t))
        return CH_EINVAL;
    return ch__table_walk(t, kh, h != NULL ? health_up : NULL, h, depth,
                          h != NULL ? h->n_up : SIZE_MAX, out, count);
}

int ch_route_hash_fn(const ch_table *t, ch_node_up_fn up, const void *ctx, size_t n_up,
                     uint64_t kh, size_t depth, size_t *out, size_t *count)
{
    if (t == NULL || (depth > 0 && (out == NULL || count == NULL)))
        return CH_EINVAL;
    return ch__table_walk(t, kh, up, ctx, depth, n_up, out, count);
}

/*
 * router.c — a key's candidates: the table's walk (owner first, then the failover order) with
 * ejected nodes skipped and repeats dropped.
 *
 * Runs on every request, so it allocates nothing: the walk state lives on the stack, and repeats
 * are found by scanning the candidates written so far (depth is small). The walk ends after one
 * turn of the table, and stops as soon as it holds min(depth, N, up nodes) candidates: with every
 * node up it costs what ch_replicas() costs, with every node ejected nothing, and at worst (a
 * maglev node that owns no slot, which the walk never meets) one turn.
 *
 * Only ejected nodes are skipped, and skipping never reorders the rest, so a key whose owner is
 * up keeps its owner as candidate 0: an ejection moves the ejected node's keys and no other.
 */
#include "../internal.h"
#include "chash_route.h"
#include "route_internal.h"

static bool listed(const size_t *out, size_t count, size_t node)
{
    for (size_t i = 0; i < count; i++)
        if (out[i] == node)
            return true;
    return false;
}

int ch_route(const ch_table *t, const ch_health *h, const void *key, size_t len, size_t depth,
             size_t *out, size_t *count)
{
    if (t == NULL || (key == NULL && len > 0))
        return CH_EINVAL;
    return ch_route_hash(t, h, ch_key_hash(t, key, len), depth, out, count);
}

/* The candidates of kh among nodes for which up(ctx, node) holds, at most limit of them (the
 * callers bound limit by depth, N and, when they know it, the number of up nodes). */
static int route_walk(const ch_table *t, ch_node_up_fn up, const void *ctx, uint64_t kh,
                      size_t depth, size_t limit, size_t *out, size_t *count)
{
    if (depth == 0) {
        if (count != NULL)
            *count = 0;
        return CH_OK;
    }
    if (t->algo->walk_start == NULL) {
        /* jump: the owner is the only candidate it knows. */
        if (depth > 1)
            return CH_EUNSUPPORTED;
        size_t owner = t->algo->lookup(t, kh);
        size_t c = 0;
        if (up == NULL || up(ctx, owner))
            out[c++] = owner;
        *count = c;
        return CH_OK;
    }
    if (depth < limit)
        limit = depth;
    if (t->n < limit)
        limit = t->n;
    size_t c = 0, node;
    ch__walk w;
    if (limit > 0) {
        t->algo->walk_start(t, kh, &w);
        while (c < limit && (node = t->algo->walk_next(t, &w)) != CH__WALK_END)
            if ((up == NULL || up(ctx, node)) && !listed(out, c, node))
                out[c++] = node;
    }
    *count = c;
    return CH_OK;
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
    if (h != NULL && h->n != t->n)
        return CH_EINVAL;
    return route_walk(t, h != NULL ? health_up : NULL, h, kh, depth,
                      h != NULL ? h->n_up : SIZE_MAX, out, count);
}

int ch_route_hash_fn(const ch_table *t, ch_node_up_fn up, const void *ctx, size_t n_up,
                     uint64_t kh, size_t depth, size_t *out, size_t *count)
{
    if (t == NULL || (depth > 0 && (out == NULL || count == NULL)))
        return CH_EINVAL;
    return route_walk(t, up, ctx, kh, depth, n_up, out, count);
}

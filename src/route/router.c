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

int ch_route_hash(const ch_table *t, const ch_health *h, uint64_t kh, size_t depth, size_t *out,
                  size_t *count)
{
    if (t == NULL || (depth > 0 && (out == NULL || count == NULL)))
        return CH_EINVAL;
    /* A tracker of another size belongs to another membership: its indexes mean other nodes. */
    if (h != NULL && h->n != t->n)
        return CH_EINVAL;
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
        if (h == NULL || h->node[owner].up)
            out[c++] = owner;
        *count = c;
        return CH_OK;
    }

    size_t limit = depth < t->n ? depth : t->n;
    if (h != NULL && h->n_up < limit)
        limit = h->n_up;
    size_t c = 0, node;
    ch__walk w;
    if (limit > 0) {
        t->algo->walk_start(t, kh, &w);
        while (c < limit && (node = t->algo->walk_next(t, &w)) != CH__WALK_END)
            if ((h == NULL || h->node[node].up) && !listed(out, c, node))
                out[c++] = node;
    }
    *count = c;
    return CH_OK;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * modula.c — twemproxy's "distribution: modula": a table with round(w_i) (at least 1)
 * consecutive slots per node, in list order; a key belongs to slot hash32(key) % slots. Like
 * modulo, a change of membership moves almost every key; it is here to be compatible.
 *
 * Walk (failover order): slots forward from the key's slot, one turn. Build O(slots); lookup
 * O(1); memory 4 bytes per slot.
 */
#include "../internal.h"

#include <math.h>

static size_t slots_of(const ch_table *t, size_t i)
{
    double s = round(t->weights[i]);
    if (s > (double)CH_MAX_POINTS)
        return SIZE_MAX;
    return s < 1.0 ? 1 : (size_t)s;
}

static int modula_build(ch_table *t)
{
    size_t m = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t s = slots_of(t, i);
        if (s == SIZE_MAX || (m += s) > CH_MAX_POINTS)
            return ch__fail(t, CH_ETOOBIG,
                            "modula: more than %u slots (CH_MAX_POINTS) from weights summing "
                            "to %g: lower the weights",
                            (unsigned)CH_MAX_POINTS, t->weight_sum);
    }
    uint32_t *slot = ch__alloc(t, m * sizeof(*slot));
    if (slot == NULL)
        return CH_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < t->n; i++)
        for (size_t s = slots_of(t, i); s > 0; s--)
            slot[k++] = (uint32_t)i;
    t->u.maglev.slot = slot;
    t->u.maglev.m = (uint32_t)m;
    return CH_OK;
}

static size_t modula_lookup(const ch_table *t, uint64_t h)
{
    return t->u.maglev.slot[(uint32_t)h % t->u.maglev.m];
}

static void modula_walk_start(const ch_table *t, uint64_t h, ch__walk *w)
{
    w->next = (uint32_t)h % t->u.maglev.m;
    w->left = t->u.maglev.m;
}

/* Slot s of m has floor((2^32 - 1 - s) / m) + 1 of the 2^32 hashes. */
static void modula_shares(const ch_table *t, double *shares)
{
    uint32_t m = t->u.maglev.m;
    for (size_t i = 0; i < t->n; i++)
        shares[i] = 0.0;
    for (uint32_t s = 0; s < m; s++)
        shares[t->u.maglev.slot[s]] += (double)((UINT64_C(0xffffffff) - s) / m + 1) * 0x1p-32;
}

const ch__algo ch__algo_modula = {
    .build = modula_build,
    .destroy = ch__slots_destroy,
    .lookup = modula_lookup,
    .shares = modula_shares,
    .walk_start = modula_walk_start,
    .walk_next = ch__slots_walk_next,
    .empty_key_zero = true,
    .remaps = true,
};

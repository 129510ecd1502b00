/* SPDX-License-Identifier: Apache-2.0 */
/*
 * modulo.c — the baseline: hash32(key) % N. Every change of N moves about N/(N+1) of the keys;
 * it is here to be measured against. No weights. Walk (failover order): h % N, then the next
 * indexes, wrapping.
 *
 * Also twemproxy's "random": the same table (one slot per server, weights ignored), indexed by a
 * value the caller draws at random per request and passes to ch_lookup_hash().
 */
#include "../internal.h"

static int modulo_build(ch_table *t)
{
    return t->uniform ? CH_OK : ch__fail_unweighted(t);
}

static void modulo_destroy(ch_table *t)
{
    (void)t;
}

size_t ch__modulo_lookup(const ch_table *t, uint64_t h)
{
    return (uint32_t)h % t->n;
}

void ch__modulo_walk_start(const ch_table *t, uint64_t h, ch__walk *w)
{
    w->next = ch__modulo_lookup(t, h);
    w->left = t->n;
}

size_t ch__modulo_walk_next(const ch_table *t, ch__walk *w)
{
    if (w->left == 0)
        return CH__WALK_END;
    size_t node = w->next;
    w->next = node + 1 == t->n ? 0 : node + 1;
    w->left--;
    return node;
}

/* Residue i of N has floor((2^32 - 1 - i) / N) + 1 of the 2^32 hashes. */
void ch__modulo_shares(const ch_table *t, double *shares)
{
    for (size_t i = 0; i < t->n; i++)
        shares[i] = (double)((UINT64_C(0xffffffff) - i) / t->n + 1) * 0x1p-32;
}

const ch__algo ch__algo_modulo = {
    .build = modulo_build,
    .destroy = modulo_destroy,
    .lookup = ch__modulo_lookup,
    .shares = ch__modulo_shares,
    .walk_start = ch__modulo_walk_start,
    .walk_next = ch__modulo_walk_next,
    .unweighted = true,
    .remaps = true,
};

static int random_build(ch_table *t)
{
    (void)t;
    return CH_OK;
}

const ch__algo ch__algo_random = {
    .build = random_build,
    .destroy = modulo_destroy,
    .lookup = ch__modulo_lookup,
    .shares = ch__modulo_shares,
    .walk_start = ch__modulo_walk_start,
    .walk_next = ch__modulo_walk_next,
    .empty_key_zero = true,
    .remaps = true,
};

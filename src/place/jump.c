/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jump.c — jump consistent hash (Lamping & Veach 2014) over node indexes 0..N-1.
 *
 * The key hash seeds a linear congruential generator; the key "jumps" forward through bucket
 * numbers, and the last jump below N is its bucket. Growing N to N+1 moves exactly the keys that
 * now jump to bucket N, about 1/(N+1) of them. What jump cannot do:
 *   - remove a node other than the last: buckets are positions, so removing node k renumbers
 *     k+1..N-1 and remaps their keys (the caller must keep the list order and append only);
 *   - weights: every bucket gets 1/N of the keys;
 *   - replicas or bounded loads: there is no second choice that stays stable as N changes.
 * O(ln N) expected steps per lookup, no memory beyond the node list.
 */
#include "../internal.h"

static int jump_build(ch_table *t)
{
    return t->uniform ? CH_OK : ch__fail_unweighted(t);
}

static void jump_destroy(ch_table *t)
{
    (void)t;
}

static size_t jump_lookup(const ch_table *t, uint64_t key)
{
    int64_t b = -1, j = 0, n = (int64_t)t->n;
    while (j < n) {
        b = j;
        key = key * UINT64_C(2862933555777941757) + 1;
        j = (int64_t)((double)(b + 1) * ((double)(INT64_C(1) << 31) / (double)((key >> 33) + 1)));
    }
    return (size_t)b;
}

static void jump_shares(const ch_table *t, double *shares)
{
    for (size_t i = 0; i < t->n; i++)
        shares[i] = 1.0 / (double)t->n;
}

const ch__algo ch__algo_jump = {
    .build = jump_build,
    .destroy = jump_destroy,
    .lookup = jump_lookup,
    .shares = jump_shares,
    .walk_start = NULL,
    .walk_next = NULL,
    .unweighted = true,
};

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * maglev.c — Maglev hashing (Eisenbud et al., NSDI 2016).
 *
 * A lookup table of M slots, M prime and > N. Node i has a permutation of the slots,
 * perm_i(j) = (offset_i + j * skip_i) mod M, with offset and skip derived from its id hash
 * (skip in [1, M-1], so with M prime every permutation visits every slot). The table is filled in
 * turns: at each turn a node claims the next free slot of its permutation. A key's owner is
 * slot[hash % M]: O(1), 4 bytes per slot.
 *
 * Weights: in every round node i earns w_i / w_max turns (credit carried over), so the heaviest
 * node claims once per round and shares of the table follow the weights. Turns are taken in id
 * order, so the table does not depend on the order of the node list.
 *
 * Build cost O(M log M) expected probes. A change of membership moves somewhat more than the
 * minimal 1/(N+1) of the keys (the paper's trade for balance); the tests report it.
 */
#include "../internal.h"

#include <string.h>

static bool is_prime(uint32_t m)
{
    if (m < 2)
        return false;
    for (uint32_t d = 2; (uint64_t)d * d <= m; d++)
        if (m % d == 0)
            return false;
    return true;
}

/* The smallest prime above n (n <= CH_MAX_NODES: a few hundred trial divisions at most), for an
 * error that suggests a table size. */
static uint32_t prime_above(size_t n)
{
    uint32_t m = (uint32_t)n + 1;
    while (!is_prime(m))
        m++;
    return m;
}

static int maglev_build(ch_table *t)
{
    uint32_t m = t->opt.table_size;
    size_t n = t->n;
    if (m > CH_MAX_POINTS)
        return ch__fail(t, CH_ETOOBIG, "maglev: table_size %u is above %u (CH_MAX_POINTS)", m,
                        (unsigned)CH_MAX_POINTS);
    if (!is_prime(m) || m <= n)
        return ch__fail(t, CH_EINVAL,
                        "maglev: table_size %u must be a prime greater than the node count, %zu "
                        "(e.g. %u)",
                        m, n, prime_above(n > m ? n : m));

    uint32_t *slot = ch__alloc(t, (size_t)m * sizeof(*slot));
    uint32_t *offset = ch__alloc(t, n * sizeof(*offset));
    uint32_t *skip = ch__alloc(t, n * sizeof(*skip));
    uint32_t *next = ch__alloc(t, n * sizeof(*next));
    double *credit = ch__alloc(t, n * sizeof(*credit));
    int rc = CH_OK;
    if (slot == NULL || offset == NULL || skip == NULL || next == NULL || credit == NULL) {
        rc = CH_ENOMEM;
        goto out;
    }

    double wmax = 0.0;
    for (size_t i = 0; i < n; i++) {
        uint64_t s = t->id_hash[i];
        offset[i] = (uint32_t)(s % m);
        skip[i] = (uint32_t)(ch__fmix64(s ^ UINT64_C(0x9e3779b97f4a7c15)) % (m - 1)) + 1;
        next[i] = 0;
        credit[i] = 0.0;
        wmax = t->weights[i] > wmax ? t->weights[i] : wmax;
    }
    memset(slot, 0xff, (size_t)m * sizeof(*slot));

    /* Each round the heaviest node claims one slot, so at most M rounds. A node's next[] never
     * passes M: it has claimed fewer than M slots, and its permutation covers all M. */
    uint32_t filled = 0;
    while (filled < m) {
        for (size_t r = 0; r < n && filled < m; r++) {
            uint32_t i = t->by_id[r];
            credit[i] += t->weights[i] / wmax;
            for (; credit[i] >= 1.0 && filled < m; credit[i] -= 1.0) {
                uint32_t c;
                do {
                    c = (uint32_t)(((uint64_t)offset[i] + (uint64_t)next[i] * skip[i]) % m);
                    next[i]++;
                } while (slot[c] != UINT32_MAX);
                slot[c] = i;
                filled++;
            }
        }
    }
    t->u.maglev.slot = slot;
    t->u.maglev.m = m;
    slot = NULL;

out:
    ch__free(t, slot, (size_t)m * sizeof(*slot));
    ch__free(t, offset, n * sizeof(*offset));
    ch__free(t, skip, n * sizeof(*skip));
    ch__free(t, next, n * sizeof(*next));
    ch__free(t, credit, n * sizeof(*credit));
    return rc;
}

void ch__slots_destroy(ch_table *t)
{
    ch__free(t, t->u.maglev.slot, (size_t)t->u.maglev.m * sizeof(uint32_t));
}

static size_t maglev_lookup(const ch_table *t, uint64_t h)
{
    return t->u.maglev.slot[h % t->u.maglev.m];
}

static void maglev_walk_start(const ch_table *t, uint64_t h, ch__walk *w)
{
    w->next = h % t->u.maglev.m;
    w->left = t->u.maglev.m;
}

size_t ch__slots_points(const ch_table *t)
{
    return t->u.maglev.m;
}

size_t ch__slots_walk_next(const ch_table *t, ch__walk *w)
{
    if (w->left == 0)
        return CH__WALK_END;
    size_t node = t->u.maglev.slot[w->next];
    w->next = w->next + 1 == t->u.maglev.m ? 0 : w->next + 1;
    w->left--;
    return node;
}

static void maglev_shares(const ch_table *t, double *shares)
{
    for (size_t i = 0; i < t->n; i++)
        shares[i] = 0.0;
    for (uint32_t s = 0; s < t->u.maglev.m; s++)
        shares[t->u.maglev.slot[s]] += 1.0;
    for (size_t i = 0; i < t->n; i++)
        shares[i] /= (double)t->u.maglev.m;
}

const ch__algo ch__algo_maglev = {
    .build = maglev_build,
    .destroy = ch__slots_destroy,
    .lookup = maglev_lookup,
    .shares = maglev_shares,
    .walk_start = maglev_walk_start,
    .walk_next = ch__slots_walk_next,
};

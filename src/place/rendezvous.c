/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rendezvous.c — highest random weight hashing (Thaler & Ravishankar 1996).
 *
 * Each node draws u = mix(key hash, node seed) in (0, 1) and scores -w / ln(u) (the logarithmic
 * method: node i wins with probability exactly w_i / W). The highest score owns the key; the
 * next highest scores are its replicas. With equal weights the score is monotonic in u, so the
 * log is skipped. Ties (probability about 2^-53 per pair) go to the lower node index.
 * The result does not depend on the order of the node list. O(N) per lookup; no memory beyond
 * the node list.
 */
#include "../internal.h"

#include <math.h>

static int rdv_build(ch_table *t)
{
    (void)t;
    return CH_OK;
}

static void rdv_destroy(ch_table *t)
{
    (void)t;
}

static double score(const ch_table *t, uint64_t h, size_t i)
{
    uint64_t x = ch__fmix64(h ^ t->id_hash[i]) >> 11; /* 53 random bits */
    if (t->uniform)
        return (double)x;
    double u = ((double)x + 0.5) * 0x1p-53; /* in (0, 1) */
    return -t->weights[i] / log(u);
}

/* Whether (sa, ia) ranks before (sb, ib): higher score first, then lower index. */
static bool before(double sa, size_t ia, double sb, size_t ib)
{
    return sa > sb || (sa == sb && ia < ib);
}

static size_t rdv_lookup(const ch_table *t, uint64_t h)
{
    size_t best = 0;
    double best_s = score(t, h, 0);
    for (size_t i = 1; i < t->n; i++) {
        double s = score(t, h, i);
        if (s > best_s) {
            best = i;
            best_s = s;
        }
    }
    return best;
}

static void rdv_walk_start(const ch_table *t, uint64_t h, ch__walk *w)
{
    w->h = h;
    w->left = t->n;
    w->next = 0; /* number of candidates returned so far */
}

/* The best node ranking after the one returned last: O(N) per step. */
static size_t rdv_walk_next(const ch_table *t, ch__walk *w)
{
    if (w->left == 0)
        return CH__WALK_END;
    size_t best = CH__WALK_END;
    double best_s = 0.0;
    for (size_t i = 0; i < t->n; i++) {
        double s = score(t, w->h, i);
        if (w->next > 0 && !before(w->last_score, w->last, s, i))
            continue;
        if (best == CH__WALK_END || before(s, i, best_s, best)) {
            best = i;
            best_s = s;
        }
    }
    w->last = best;
    w->last_score = best_s;
    w->next++;
    w->left--;
    return best;
}

static void rdv_shares(const ch_table *t, double *shares)
{
    for (size_t i = 0; i < t->n; i++)
        shares[i] = t->weights[i] / t->weight_sum;
}

const ch__algo ch__algo_rendezvous = {
    .build = rdv_build,
    .destroy = rdv_destroy,
    .lookup = rdv_lookup,
    .shares = rdv_shares,
    .walk_start = rdv_walk_start,
    .walk_next = rdv_walk_next,
};

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * transfer.c — the exact share of the hash space that moves between two tables.
 */
#include "../internal.h"

#include <string.h>

/* Two rings: every boundary of either ring, in ascending order, closes a segment (prev, b]
 * whose hashes have one owner in each ring: the first point at or after b (wrapping to point 0).
 * The first boundary's segment is the wrap-around one, from the last boundary through 2^32. */
static void ring_transfer(const ch_table *a, const ch_table *b, double *m)
{
    const ch__point *pa = a->u.ring.points, *pb = b->u.ring.points;
    size_t na = a->u.ring.npoints, nb = b->u.ring.npoints, i = 0, j = 0;
    uint32_t last = pa[na - 1].pos > pb[nb - 1].pos ? pa[na - 1].pos : pb[nb - 1].pos;
    int64_t prev = (int64_t)last - (INT64_C(1) << 32);

    while (i < na || j < nb) {
        uint32_t x = j == nb || (i < na && pa[i].pos <= pb[j].pos) ? pa[i].pos : pb[j].pos;
        size_t oa = i < na ? pa[i].node : pa[0].node;
        size_t ob = j < nb ? pb[j].node : pb[0].node;
        m[oa * b->n + ob] += (double)((int64_t)x - prev);
        prev = x;
        while (i < na && pa[i].pos == x)
            i++;
        while (j < nb && pb[j].pos == x)
            j++;
    }
}

static void maglev_transfer(const ch_table *a, const ch_table *b, double *m)
{
    for (uint32_t s = 0; s < a->u.maglev.m; s++)
        m[(size_t)a->u.maglev.slot[s] * b->n + b->u.maglev.slot[s]] += 1.0;
}

int ch_table_transfer(const ch_table *a, const ch_table *b, double *matrix)
{
    if (a == NULL || b == NULL || matrix == NULL)
        return CH_EINVAL;
    if (a->opt.algo != b->opt.algo || a->opt.hash != b->opt.hash)
        return CH_EUNSUPPORTED;
    double scale;
    if (a->opt.algo == CH_ALGO_RING)
        scale = 0x1p-32;
    else if (a->opt.algo == CH_ALGO_MAGLEV && a->u.maglev.m == b->u.maglev.m)
        scale = 1.0 / (double)a->u.maglev.m;
    else
        return CH_EUNSUPPORTED;

    memset(matrix, 0, a->n * b->n * sizeof(*matrix));
    if (a->opt.algo == CH_ALGO_RING)
        ring_transfer(a, b, matrix);
    else
        maglev_transfer(a, b, matrix);
    for (size_t k = 0; k < a->n * b->n; k++)
        matrix[k] *= scale;
    return CH_OK;
}

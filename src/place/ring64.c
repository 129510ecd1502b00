/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ring64.c — the ring layout for positions 64 bits wide, compared at full width.
 *
 * Rings of client libraries that read 8 bytes of a digest as one number (md5_64_ring) would
 * collide and misorder if cut to 32 bits, so they get their own layout instead of widening the
 * default ring: ring.c keeps 8-byte points and its branch-free bucket scan, and nothing here
 * touches its lookup path.
 *
 * Layout: (pos, node) pairs sorted by pos, one per distinct position, plus CH__RING64_PAD
 * padding points after the last, at UINT64_MAX and carrying point 0's node, so a lookup that
 * runs off the end needs no wrap. Index: the top `bits` bits of a position select a bucket,
 * 2^bits <= P < 2^(bits+1) (at least 2 buckets); bucket[b] is the first point at or after b's
 * start. A bucket holds 1 to 2 points on average: a lookup counts, without a data-dependent
 * branch, the points below h among the CH__RING64_PAD points from the bucket's first (points
 * past the bucket lie above h, the padding is UINT64_MAX: neither counts), and binary-searches
 * only a fuller bucket (clustered positions). O(1) expected, 16 bytes per point plus 4 per
 * bucket. The branch-free count replaced a binary search of every bucket, whose one or two
 * unpredictable branches cost 9-27 ns more than the 32-bit ring's scan (docs/PERFORMANCE.md).
 *
 * Equal positions: a map from position to node, filled in generation order, keeps the last
 * node written there; so does this layout (the sort is stable and the last of a run is kept).
 */
#include "../internal.h"

#include <string.h>

/* Stable LSD radix sort by pos, 8 passes of 8 bits; the result ends in a (an even number of
 * passes). */
static void radix_sort64(ch__point64 *a, ch__point64 *tmp, size_t n)
{
    for (unsigned s = 0; s < 64; s += 8) {
        size_t count[256] = {0};
        for (size_t i = 0; i < n; i++)
            count[(a[i].pos >> s) & 255]++;
        size_t sum = 0;
        for (size_t b = 0; b < 256; b++) {
            size_t c = count[b];
            count[b] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++)
            tmp[count[(a[i].pos >> s) & 255]++] = a[i];
        ch__point64 *x = a;
        a = tmp;
        tmp = x;
    }
}

int ch__ring64_index(ch_table *t, ch__point64 *pts, size_t total)
{
    unsigned bits = 1;
    while (bits < 31 && ((size_t)2 << bits) <= total)
        bits++;
    size_t nbuckets = (size_t)1 << bits;

    ch__point64 *tmp = ch__alloc(t, total * sizeof(*tmp));
    uint32_t *bucket = ch__alloc(t, (nbuckets + 1) * sizeof(*bucket));
    if (tmp == NULL || bucket == NULL) {
        ch__free(t, pts, (total + CH__RING64_PAD) * sizeof(*pts));
        ch__free(t, tmp, total * sizeof(*tmp));
        ch__free(t, bucket, (nbuckets + 1) * sizeof(*bucket));
        return CH_ENOMEM;
    }
    radix_sort64(pts, tmp, total);
    ch__free(t, tmp, total * sizeof(*tmp));

    /* Keep the last point of each run of equal positions. */
    size_t m = 0;
    for (size_t i = 0; i < total; i++) {
        if (i + 1 < total && pts[i + 1].pos == pts[i].pos)
            continue;
        pts[m++] = pts[i];
    }
    for (size_t k = 0; k < CH__RING64_PAD; k++)
        pts[m + k] = (ch__point64){.pos = UINT64_MAX, .node = pts[0].node};

    unsigned shift = 64 - bits;
    size_t i = 0;
    for (size_t b = 0; b < nbuckets; b++) {
        uint64_t start = (uint64_t)b << shift;
        while (i < m && pts[i].pos < start)
            i++;
        bucket[b] = (uint32_t)i;
    }
    bucket[nbuckets] = (uint32_t)m;

    /* The points array keeps its allocated size for ch__ring64_destroy. */
    t->u.ring64.points = pts;
    t->u.ring64.npoints = m;
    t->u.ring64.bucket = bucket;
    t->u.ring64.shift = shift;
    t->u.ring64.allocated = total + CH__RING64_PAD;
    return CH_OK;
}

int ch__ring64_build_named(ch_table *t, size_t total, char sep, bool flip,
                           size_t (*count)(const ch_table *t, size_t i))
{
    size_t cap = ch__max_id_len(t) + 12;
    ch__point64 *pts = ch__alloc(t, (total + CH__RING64_PAD) * sizeof(*pts));
    char *name = ch__alloc(t, cap);
    if (pts == NULL || name == NULL) {
        ch__free(t, pts, (total + CH__RING64_PAD) * sizeof(*pts));
        ch__free(t, name, cap);
        return CH_ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t idlen = strlen(t->ids[i]), p = count != NULL ? count(t, i) : t->opt.vnodes;
        memcpy(name, t->ids[i], idlen);
        for (uint32_t j = 0; j < p; j++) {
            uint64_t pos = t->hash(name, ch__append_index(name, idlen, sep, j));
            pts[k++] = (ch__point64){.pos = flip ? ~pos : pos, .node = (uint32_t)i};
        }
    }
    ch__free(t, name, cap);
    return ch__ring64_index(t, pts, total);
}

void ch__ring64_destroy(ch_table *t)
{
    size_t nbuckets = (size_t)1 << (64 - t->u.ring64.shift);
    ch__free(t, t->u.ring64.points, t->u.ring64.allocated * sizeof(ch__point64));
    ch__free(t, t->u.ring64.bucket, (nbuckets + 1) * sizeof(uint32_t));
}

/* The first point with pos >= h, or npoints (the padding point) when there is none. */
static size_t find_nowrap(const ch_table *t, uint64_t h)
{
    const ch__point64 *pts = t->u.ring64.points;
    uint64_t b = h >> t->u.ring64.shift;
    size_t lo = t->u.ring64.bucket[b], hi = t->u.ring64.bucket[b + 1];
    if (hi - lo <= CH__RING64_PAD) {
        size_t i = lo;
        for (size_t k = 0; k < CH__RING64_PAD; k++)
            i += pts[lo + k].pos < h;
        return i;
    }
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pts[mid].pos < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

size_t ch__ring64_find(const ch_table *t, uint64_t h)
{
    size_t i = find_nowrap(t, h);
    return i == t->u.ring64.npoints ? 0 : i;
}

size_t ch__ring64_lookup(const ch_table *t, uint64_t h)
{
    return t->u.ring64.points[find_nowrap(t, h)].node;
}

void ch__ring64_walk_start(const ch_table *t, uint64_t h, ch__walk *w)
{
    w->next = ch__ring64_find(t, h);
    w->left = t->u.ring64.npoints;
}

size_t ch__ring64_walk_next(const ch_table *t, ch__walk *w)
{
    if (w->left == 0)
        return CH__WALK_END;
    size_t node = t->u.ring64.points[w->next].node;
    w->next = w->next + 1 == t->u.ring64.npoints ? 0 : w->next + 1;
    w->left--;
    return node;
}

/* Point i owns (pos[i-1], pos[i]]; point 0 also the wrap above the last point. Arc lengths are
 * summed as integers first (they add up to 2^64 exactly), then scaled. */
void ch__ring64_shares(const ch_table *t, double *shares)
{
    const ch__point64 *pts = t->u.ring64.points;
    size_t np = t->u.ring64.npoints;
    for (size_t i = 0; i < t->n; i++)
        shares[i] = 0.0;
    /* 2^64 - last + first, in 64 bits: wraps to 0 for a single point, which owns everything. */
    uint64_t wrap = pts[0].pos - pts[np - 1].pos;
    shares[pts[0].node] += np == 1 ? 0x1p64 : (double)wrap;
    for (size_t i = 1; i < np; i++)
        shares[pts[i].node] += (double)(pts[i].pos - pts[i - 1].pos);
    for (size_t i = 0; i < t->n; i++)
        shares[i] *= 0x1p-64;
}

size_t ch__ring64_points(const ch_table *t)
{
    return t->u.ring64.npoints;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ring.c — consistent-hash ring with virtual nodes.
 *
 * Node i owns max(1, round(vnodes * w_i)) points at hash32("<id>#<j>"), j = 0, 1, ... A key
 * belongs to the first point whose position is >= hash32(key), wrapping to point 0.
 *
 * Layout: one array of (position, node) pairs sorted by position, 8 bytes per point, so a lookup
 * reads one cache line of it. Equal positions are ordered by node id (strcmp), then by vnode
 * index j, so the ring does not depend on the order of the node list; a key landing on a shared
 * position goes to the smallest id.
 *
 * Lookup index: the top `bits` bits of a position select one of 2^bits buckets, with
 * 2^bits <= P < 2^(bits+1) for P points; bucket[b] is the first point at or after b's start.
 * A lookup reads bucket[b] and bucket[b+1] and counts, without a data-dependent branch, the
 * points below the key among the (one to two, on average) points between them: O(1) expected,
 * at most 4 bytes per point for the index. A branchy search here mispredicted about once per
 * lookup and cost more than the hash itself (docs/PERFORMANCE.md).
 */
#include "../internal.h"

#include <math.h>
#include <string.h>

size_t ch__append_index(char *buf, size_t len, char sep, uint32_t k)
{
    char digits[10];
    size_t nd = 0;
    do {
        digits[nd++] = (char)('0' + k % 10);
        k /= 10;
    } while (k != 0);
    buf[len++] = sep;
    while (nd > 0)
        buf[len++] = digits[--nd];
    return len;
}

/* Writes "<id>#<j>" into buf and returns its length. buf holds strlen(id) + 12 bytes. */
static size_t vnode_name(char *buf, const char *id, size_t idlen, uint32_t j)
{
    memcpy(buf, id, idlen);
    return ch__append_index(buf, idlen, '#', j);
}

/* Stable LSD radix sort by position, 11 + 11 + 10 bits: three passes over P points. Stability
 * keeps the (id, j) generation order among equal positions. */
static void radix_sort(ch__point *a, ch__point *tmp, size_t n)
{
    static const unsigned shifts[3] = {0, 11, 22};
    for (int pass = 0; pass < 3; pass++) {
        size_t count[2048] = {0};
        unsigned s = shifts[pass];
        for (size_t i = 0; i < n; i++)
            count[(a[i].pos >> s) & 2047]++;
        size_t sum = 0;
        for (size_t b = 0; b < 2048; b++) {
            size_t c = count[b];
            count[b] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++)
            tmp[count[(a[i].pos >> s) & 2047]++] = a[i];
        ch__point *x = a;
        a = tmp;
        tmp = x;
    }
    /* Three passes leave the result in the scratch buffer. */
    memcpy(tmp, a, n * sizeof(*a));
}

/* Points of node i: max(1, round(vnodes * w)); 0 if that would exceed CH_MAX_POINTS. */
static size_t points_of(const ch_table *t, size_t i)
{
    double p = round((double)t->opt.vnodes * t->weights[i]);
    if (p > (double)CH_MAX_POINTS)
        return 0;
    return p < 1.0 ? 1 : (size_t)p;
}

/* A bucket of at most CH__RING_SCAN points is scanned without branches; a fuller one (clustered
 * positions) is binary-searched. CH__RING_SCAN padding points after the last one keep the scan in
 * bounds. */
#define RING_SCAN CH__RING_SCAN

int ch__ring_index(ch_table *t, ch__point *pts, size_t total)
{
    unsigned bits = 0;
    while (bits < 31 && ((size_t)2 << bits) <= total)
        bits++;
    size_t nbuckets = (size_t)1 << bits;

    ch__point *tmp = ch__alloc(t, total * sizeof(*tmp));
    uint32_t *bucket = ch__alloc(t, (nbuckets + 1) * sizeof(*bucket));
    if (tmp == NULL || bucket == NULL) {
        ch__free(t, pts, (total + RING_SCAN) * sizeof(*pts));
        ch__free(t, tmp, total * sizeof(*tmp));
        ch__free(t, bucket, (nbuckets + 1) * sizeof(*bucket));
        return CH_ENOMEM;
    }
    radix_sort(pts, tmp, total);
    ch__free(t, tmp, total * sizeof(*tmp));
    for (size_t p = 0; p < RING_SCAN; p++)
        pts[total + p] = (ch__point){.pos = UINT32_MAX, .node = pts[0].node};

    unsigned shift = 32 - bits;
    size_t i = 0;
    for (size_t b = 0; b < nbuckets; b++) {
        uint64_t start = (uint64_t)b << shift;
        while (i < total && pts[i].pos < start)
            i++;
        bucket[b] = (uint32_t)i;
    }
    bucket[nbuckets] = (uint32_t)total;

    t->u.ring.points = pts;
    t->u.ring.npoints = total;
    t->u.ring.bucket = bucket;
    t->u.ring.shift = shift;
    return CH_OK;
}

static int ring_build(ch_table *t)
{
    size_t total = 0, maxid = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t p = points_of(t, i);
        if (p == 0 || (total += p) > CH_MAX_POINTS)
            return ch__fail_points(t);
        size_t len = strlen(t->ids[i]);
        maxid = len > maxid ? len : maxid;
    }

    ch__point *pts = ch__alloc(t, (total + RING_SCAN) * sizeof(*pts));
    char *name = ch__alloc(t, maxid + 12);
    if (pts == NULL || name == NULL) {
        ch__free(t, pts, (total + RING_SCAN) * sizeof(*pts));
        ch__free(t, name, maxid + 12);
        return CH_ENOMEM;
    }

    /* Generated in id order: the stable sort then orders equal positions by id, then j. */
    size_t k = 0;
    for (size_t r = 0; r < t->n; r++) {
        uint32_t i = t->by_id[r];
        size_t idlen = strlen(t->ids[i]), p = points_of(t, i);
        for (uint32_t j = 0; j < p; j++) {
            size_t len = vnode_name(name, t->ids[i], idlen, j);
            pts[k++] = (ch__point){.pos = (uint32_t)t->hash(name, len), .node = i};
        }
    }
    ch__free(t, name, maxid + 12);
    return ch__ring_index(t, pts, total);
}

void ch__ring_destroy(ch_table *t)
{
    size_t nbuckets = (size_t)1 << (32 - t->u.ring.shift);
    ch__free(t, t->u.ring.points, (t->u.ring.npoints + RING_SCAN) * sizeof(ch__point));
    ch__free(t, t->u.ring.bucket, (nbuckets + 1) * sizeof(uint32_t));
}

/* Index of the first point with pos >= x, or npoints when there is none (the padding point
 * there carries point 0's node, so lookups need no wrap). */
static size_t ring_find_nowrap(const ch_table *t, uint32_t x)
{
    const ch__point *pts = t->u.ring.points;
    uint64_t b = (uint64_t)x >> t->u.ring.shift;
    size_t lo = t->u.ring.bucket[b], hi = t->u.ring.bucket[b + 1];
    if (hi - lo <= RING_SCAN) {
        /* Count the points below x among RING_SCAN from lo: points past the bucket lie past x
         * and the padding is UINT32_MAX, so neither counts. No data-dependent branch. */
        size_t i = lo;
        for (size_t k = 0; k < RING_SCAN; k++)
            i += pts[lo + k].pos < x;
        return i;
    }
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pts[mid].pos < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static size_t ring_find(const ch_table *t, uint32_t x)
{
    size_t i = ring_find_nowrap(t, x);
    return i == t->u.ring.npoints ? 0 : i;
}

size_t ch__ring_lookup(const ch_table *t, uint64_t h)
{
    return t->u.ring.points[ring_find_nowrap(t, (uint32_t)h)].node;
}

void ch__ring_walk_start(const ch_table *t, uint64_t h, ch__walk *w)
{
    w->next = ring_find(t, (uint32_t)h);
    w->left = t->u.ring.npoints;
}

size_t ch__ring_walk_next(const ch_table *t, ch__walk *w)
{
    if (w->left == 0)
        return CH__WALK_END;
    size_t node = t->u.ring.points[w->next].node;
    w->next = w->next + 1 == t->u.ring.npoints ? 0 : w->next + 1;
    w->left--;
    return node;
}

/* Point i owns the hashes in (pos[i-1], pos[i]]; point 0 also the wrap above the last point.
 * Points sharing a position own nothing beyond the first of them. */
void ch__ring_shares(const ch_table *t, double *shares)
{
    const ch__point *pts = t->u.ring.points;
    size_t np = t->u.ring.npoints;
    for (size_t i = 0; i < t->n; i++)
        shares[i] = 0.0;
    shares[pts[0].node] += (double)((UINT64_C(1) << 32) + pts[0].pos - pts[np - 1].pos);
    for (size_t i = 1; i < np; i++)
        shares[pts[i].node] += (double)(pts[i].pos - pts[i - 1].pos);
    for (size_t i = 0; i < t->n; i++)
        shares[i] *= 0x1p-32;
}

size_t ch__ring_points(const ch_table *t)
{
    return t->u.ring.npoints;
}

const ch__algo ch__algo_ring = {
    .build = ring_build,
    .destroy = ch__ring_destroy,
    .lookup = ch__ring_lookup,
    .shares = ch__ring_shares,
    .walk_start = ch__ring_walk_start,
    .walk_next = ch__ring_walk_next,
};

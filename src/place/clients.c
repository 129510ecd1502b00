/*
 * clients.c — the rings of client libraries and of widely copied tutorial code, each reproducing
 * one library's placement exactly (docs/COMPATIBILITY.md gives the rules and how each is proven).
 *
 * Each scheme is a build function and a lookup over one of the two ring layouts: ring.c's
 * 32-bit points (its lookup: first position >= x, wrapping, ties to the first point in
 * generation order) or ring64.c's 64-bit points (ties to the last point generated). A library
 * whose search differs from "first position >= key" is mapped onto it by an order-preserving
 * transform of positions and keys:
 *   - Java's TreeMap<Integer> orders positions as signed ints: x ^ 0x80000000 orders them the
 *     same as unsigned;
 *   - Dalli's predecessor search (last position <= key, wrapping to the last point) is the
 *     successor search over complemented positions and keys: p <= h iff ~p >= ~h, and the
 *     wrap to the largest p is the wrap to the smallest ~p.
 * Ring layouts keep their lookup path: nothing here slows the default ring.
 */
#include "../internal.h"

#include <math.h>
#include <md5.h>
#include <sha1.h>
#include <string.h>

/* The tutorial rings have no weights: every weight must be 1. */
static bool unit_weights(const ch_table *t)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->weights[i] != 1.0)
            return false;
    return true;
}

/* The longest id, for point-string buffers. */
static size_t max_id_len(const ch_table *t)
{
    size_t m = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t len = strlen(t->ids[i]);
        m = len > m ? len : m;
    }
    return m;
}

/* ---- java_hashcode_ring ------------------------------------------------------------------- *
 * Positions Math.abs(("<id>#<i>").hashCode()) for i < vnodes, in a TreeMap<Integer, node>: a
 * later put at an equal position replaces the owner. Math.abs(Integer.MIN_VALUE) stays
 * Integer.MIN_VALUE, the smallest key of the map. A key goes to ceilingEntry(abs(hashCode)),
 * else to the first entry. */

static uint32_t java_abs_order(uint64_t h)
{
    uint32_t v = (uint32_t)h;
    if (v & UINT32_C(0x80000000))
        v = (uint32_t)0 - v; /* abs in two's complement; 0x80000000 stays itself */
    return v ^ UINT32_C(0x80000000);
}

static int java_ring_build(ch_table *t)
{
    if (!unit_weights(t))
        return CH_EUNSUPPORTED;
    uint64_t total64 = (uint64_t)t->n * t->opt.vnodes;
    if (total64 > CH_MAX_POINTS)
        return CH_ETOOBIG;
    size_t total = (size_t)total64, cap = max_id_len(t) + 12;
    ch__point *pts = ch__alloc(t, (total + CH__RING_SCAN) * sizeof(*pts));
    char *name = ch__alloc(t, cap);
    if (pts == NULL || name == NULL) {
        ch__free(t, pts, (total + CH__RING_SCAN) * sizeof(*pts));
        ch__free(t, name, cap);
        return CH_ENOMEM;
    }
    /* Generated from the last put to the first: the stable sort then puts the last put first
     * among equal positions, and the ring's lookup takes the first. */
    size_t k = 0;
    for (size_t r = t->n; r-- > 0;) {
        size_t idlen = strlen(t->ids[r]);
        memcpy(name, t->ids[r], idlen);
        for (uint32_t j = t->opt.vnodes; j-- > 0;) {
            size_t len = ch__append_index(name, idlen, '#', j);
            pts[k++] = (ch__point){.pos = java_abs_order(t->hash(name, len)), .node = (uint32_t)r};
        }
    }
    ch__free(t, name, cap);
    return ch__ring_index(t, pts, total);
}

static size_t java_ring_lookup(const ch_table *t, uint64_t h)
{
    return ch__ring_lookup(t, java_abs_order(h));
}

static void java_ring_walk_start(const ch_table *t, uint64_t h, ch__walk *w)
{
    ch__ring_walk_start(t, java_abs_order(h), w);
}

/* The length of (a, b] within [2^31, 2^32): the transformed positions a uniform key hash reaches
 * (abs folds the negative half onto the positive one; only Integer.MIN_VALUE maps below). */
static int64_t upper_half(int64_t a, int64_t b)
{
    const int64_t lo = INT64_C(1) << 31, hi = INT64_C(1) << 32;
    if (a < lo - 1)
        a = lo - 1;
    if (b > hi - 1)
        b = hi - 1;
    return b > a ? b - a : 0;
}

static void java_ring_shares(const ch_table *t, double *shares)
{
    const ch__point *pts = t->u.ring.points;
    size_t np = t->u.ring.npoints;
    for (size_t i = 0; i < t->n; i++)
        shares[i] = 0.0;
    int64_t last = pts[np - 1].pos;
    /* The wrap: (last, 2^32) and [0, first]. */
    shares[pts[0].node] += (double)(upper_half(last, (INT64_C(1) << 32) - 1) +
                                    upper_half(-1, pts[0].pos));
    for (size_t i = 1; i < np; i++)
        shares[pts[i].node] += (double)upper_half(pts[i - 1].pos, pts[i].pos);
    for (size_t i = 0; i < t->n; i++)
        shares[i] *= 0x1p-31;
}

const ch__algo ch__algo_java_hashcode_ring = {
    .build = java_ring_build,
    .destroy = ch__ring_destroy,
    .lookup = java_ring_lookup,
    .shares = java_ring_shares,
    .walk_start = java_ring_walk_start,
    .walk_next = ch__ring_walk_next,
    .fixed_hash = true,
    .hash = CH_HASH_JAVA_HASHCODE,
    .unweighted = true,
    .points = ch__ring_points,
};

/* ---- md5_64_ring ---------------------------------------------------------------------------- *
 * Position = MD5("<id>#<i>") bytes 0..7 big-endian, i < vnodes; a dict from position to node
 * (a later node replaces the owner); a key goes to bisect_left over the sorted positions, i.e.
 * the first position >= its own, wrapping to index 0. */

static int md5_64_ring_build(ch_table *t)
{
    if (!unit_weights(t))
        return CH_EUNSUPPORTED;
    uint64_t total64 = (uint64_t)t->n * t->opt.vnodes;
    if (total64 > CH_MAX_POINTS)
        return CH_ETOOBIG;
    size_t total = (size_t)total64, cap = max_id_len(t) + 12;
    ch__point64 *pts = ch__alloc(t, (total + 1) * sizeof(*pts));
    char *name = ch__alloc(t, cap);
    if (pts == NULL || name == NULL) {
        ch__free(t, pts, (total + 1) * sizeof(*pts));
        ch__free(t, name, cap);
        return CH_ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t idlen = strlen(t->ids[i]);
        memcpy(name, t->ids[i], idlen);
        for (uint32_t j = 0; j < t->opt.vnodes; j++) {
            size_t len = ch__append_index(name, idlen, '#', j);
            pts[k++] = (ch__point64){.pos = t->hash(name, len), .node = (uint32_t)i};
        }
    }
    ch__free(t, name, cap);
    return ch__ring64_index(t, pts, total);
}

const ch__algo ch__algo_md5_64_ring = {
    .build = md5_64_ring_build,
    .destroy = ch__ring64_destroy,
    .lookup = ch__ring64_lookup,
    .shares = ch__ring64_shares,
    .walk_start = ch__ring64_walk_start,
    .walk_next = ch__ring64_walk_next,
    .fixed_hash = true,
    .hash = CH_HASH_MD5_64BE,
    .unweighted = true,
    .points = ch__ring64_points,
};

/* ---- dalli@3 -------------------------------------------------------------------------------- *
 * Dalli 3 (lib/dalli/ring.rb): server i (id: Dalli's server name, "host:port" or a socket path)
 * gets floor(N * 160 * w_i / W) entries (in double, as Ruby's Integer / Float), entry k at the
 * first 4 bytes of SHA-1("<id>:<k>") read big-endian; a key hashed with Zlib.crc32 (crc32a)
 * goes to the last entry <= its hash, wrapping to the last entry. One server takes every key
 * (Dalli builds no continuum). Stored complemented (see the top of this file). */

static size_t dalli_points(const ch_table *t, size_t i)
{
    double p = floor((double)t->n * 160.0 * t->weights[i] / t->weight_sum);
    return p > (double)CH_MAX_POINTS ? SIZE_MAX : (size_t)p;
}

static int dalli_build(ch_table *t)
{
    size_t total = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t p = dalli_points(t, i);
        if (p == SIZE_MAX || (total += p) > CH_MAX_POINTS)
            return CH_ETOOBIG;
    }
    if (total == 0) /* cannot happen: the heaviest server gets >= 160 entries */
        return CH_EINVAL;
    size_t cap = max_id_len(t) + 12;
    ch__point *pts = ch__alloc(t, (total + CH__RING_SCAN) * sizeof(*pts));
    char *name = ch__alloc(t, cap);
    if (pts == NULL || name == NULL) {
        ch__free(t, pts, (total + CH__RING_SCAN) * sizeof(*pts));
        ch__free(t, name, cap);
        return CH_ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t idlen = strlen(t->ids[i]), p = dalli_points(t, i);
        memcpy(name, t->ids[i], idlen);
        for (uint32_t j = 0; j < p; j++) {
            size_t len = ch__append_index(name, idlen, ':', j);
            uint8_t d[SHA1_DIGEST_LENGTH];
            SHA1_CTX ctx;
            SHA1Init(&ctx);
            SHA1Update(&ctx, (const uint8_t *)name, len);
            SHA1Final(d, &ctx);
            uint32_t v = (uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 | (uint32_t)d[2] << 8 | d[3];
            pts[k++] = (ch__point){.pos = ~v, .node = (uint32_t)i};
        }
    }
    ch__free(t, name, cap);
    return ch__ring_index(t, pts, total);
}

static size_t dalli_lookup(const ch_table *t, uint64_t h)
{
    return t->n == 1 ? 0 : ch__ring_lookup(t, ~(uint32_t)h);
}

static void dalli_walk_start(const ch_table *t, uint64_t h, ch__walk *w)
{
    ch__ring_walk_start(t, ~(uint32_t)h, w);
}

const ch__algo ch__algo_dalli_3 = {
    .build = dalli_build,
    .destroy = ch__ring_destroy,
    .lookup = dalli_lookup,
    .shares = ch__ring_shares,
    .walk_start = dalli_walk_start,
    .walk_next = ch__ring_walk_next,
    .fixed_hash = true,
    .hash = CH_HASH_TW_CRC32A,
    .points = ch__ring_points,
};

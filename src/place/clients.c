/* SPDX-License-Identifier: Apache-2.0 */
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
#include <stdlib.h>
#include <string.h>

/* The tutorial rings have no weights: every weight must be 1. */
static bool unit_weights(const ch_table *t)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->weights[i] != 1.0)
            return false;
    return true;
}

size_t ch__max_id_len(const ch_table *t)
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
        return ch__fail_unit_weights(t);
    uint64_t total64 = (uint64_t)t->n * t->opt.vnodes;
    if (total64 > CH_MAX_POINTS)
        return ch__fail_points(t);
    size_t total = (size_t)total64, cap = ch__max_id_len(t) + 12;
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
        return ch__fail_unit_weights(t);
    uint64_t total64 = (uint64_t)t->n * t->opt.vnodes;
    if (total64 > CH_MAX_POINTS)
        return ch__fail_points(t);
    return ch__ring64_build_named(t, (size_t)total64, '#', false, NULL);
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
            return ch__fail_points(t);
    }
    if (total == 0) /* cannot happen: the heaviest server gets >= 160 entries */
        return ch__fail_no_points(t);
    size_t cap = ch__max_id_len(t) + 12;
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

/* Dalli's failover (Ring#server_from_continuum): try 0 is the key's own hash; after a try whose
 * server is not alive, the next hashes "<try><key>" (Ruby's "#{try}#{key}", try counting from
 * 0), 20 tries in all; then Dalli gives up ("No server available"). The walk gives those 20
 * servers in order, then, where Dalli would have given up, the ring's own walk from the key's
 * entry (one turn), so every server is reachable.
 *
 * A retry's CRC comes from the key's without the key: CRC-32 is affine, so
 *     crc(P || K) = crc(P) * x^(8 |K|) mod G  xor  crc(K)
 * in the reflected representation (bit 31 is x^0), G the CRC-32 polynomial. The key hash holds
 * crc(K) in its low 32 bits and |K| above (len_in_key_hash); x^(8 |K|) is computed at the first
 * retry, O(log |K|) products of 32 steps each, so a walk whose owner is up pays nothing. */
#define DALLI_TRIES 20u
#define CRC32_POLY_REFLECTED UINT32_C(0xedb88320)

/* a * b mod G, both reflected. */
uint32_t ch__crc32_mulmod(uint32_t a, uint32_t b)
{
    uint32_t p = 0;
    for (unsigned i = 0; i < 32; i++) {
        if (a & (UINT32_C(0x80000000) >> i))
            p ^= b;
        b = (b >> 1) ^ (CRC32_POLY_REFLECTED & (0u - (b & 1u))); /* b *= x */
    }
    return p;
}

/* x^(8 n) mod G, reflected: square and multiply from x^8. */
uint32_t ch__crc32_shift(uint64_t n)
{
    uint32_t r = UINT32_C(0x80000000), base = UINT32_C(0x00800000);
    for (; n != 0; n >>= 1) {
        if (n & 1u)
            r = ch__crc32_mulmod(r, base);
        base = ch__crc32_mulmod(base, base);
    }
    return r;
}

static void dalli_walk_start(const ch_table *t, uint64_t h, ch__walk *w)
{
    w->h = h;
    w->last = 0;
    w->aux = 0;
    ch__ring_walk_start(t, ~(uint32_t)h, w);
}

static size_t dalli_walk_next(const ch_table *t, ch__walk *w)
{
    if (w->last >= DALLI_TRIES)
        return ch__ring_walk_next(t, w);
    uint32_t crc = (uint32_t)w->h;
    if (w->last > 0) {
        if (w->last == 1)
            w->aux = ch__crc32_shift(w->h >> 32);
        char prefix[12];
        size_t plen = ch__append_index(prefix, 0, '\0', (uint32_t)w->last - 1);
        /* ch__append_index wrote the separator first: the digits follow it. */
        uint32_t pc = (uint32_t)t->hash(prefix + 1, plen - 1);
        crc ^= ch__crc32_mulmod((uint32_t)w->aux, pc);
    }
    w->last++;
    return dalli_lookup(t, crc);
}

const ch__algo ch__algo_dalli_3 = {
    .build = dalli_build,
    .destroy = ch__ring_destroy,
    .lookup = dalli_lookup,
    .shares = ch__ring_shares,
    .walk_start = dalli_walk_start,
    .walk_next = dalli_walk_next,
    .len_in_key_hash = true,
    .addr_ids = true,
    .fixed_hash = true,
    .hash = CH_HASH_TW_CRC32A,
    .points = ch__ring_points,
};

/* ---- uhashring@2 and uhashring_ketama@2 ------------------------------------------------------ *
 * uhashring 2 (python3-uhashring; uhashring/ring.py, ring_meta.py, ring_ketama.py). Both modes
 * fill a dict position -> node in list order (a later node at an equal position replaces the
 * owner) and send a key to bisect_right over the sorted positions, i.e. the first position
 * strictly greater than the key's, wrapping to index 0: "first position >= h + 1", where h + 1
 * wraps to 0 past the largest hash. Weights are whole numbers in uhashring.
 *
 * uhashring_ketama@2 (HashRing(hash_fn="ketama")): node i gets floor(vnodes * N * w_i / W)
 * groups (vnodes 40 by default), group g is MD5("<id>-<g>") giving 4 positions, digest bytes
 * 4x..4x+3 little-endian; keys hash with md5 (its low 32 bits, the same bytes).
 *
 * uhashring@2 (HashRing(), its default): node i gets vnodes * w_i positions (vnodes 160 by
 * default) at int(MD5("<id>-<k>").hexdigest(), 16), a 128-bit number; keys the same. chash
 * compares the top 64 bits (md5_64be) at full 64-bit width: exact unless a key's digest shares
 * its first 8 bytes with a point's and is smaller below them (a 64-bit MD5 prefix collision).
 *
 * ch_options.vnodes 0 means the library's default (40 and 160). */

static size_t uhk_groups(const ch_table *t, size_t i)
{
    double v = (double)t->opt.vnodes;
    double g = floor(v * (double)t->n * t->weights[i] / t->weight_sum);
    return g > (double)(CH_MAX_POINTS / 4) ? SIZE_MAX : (size_t)g;
}

static int uhk_build(ch_table *t)
{
    size_t total = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t g = uhk_groups(t, i);
        if (g == SIZE_MAX || (total += 4 * g) > CH_MAX_POINTS)
            return ch__fail_points(t);
    }
    if (total == 0)
        return ch__fail_no_points(t);
    size_t cap = ch__max_id_len(t) + 12;
    ch__point *pts = ch__alloc(t, (total + CH__RING_SCAN) * sizeof(*pts));
    char *name = ch__alloc(t, cap);
    if (pts == NULL || name == NULL) {
        ch__free(t, pts, (total + CH__RING_SCAN) * sizeof(*pts));
        ch__free(t, name, cap);
        return CH_ENOMEM;
    }
    /* Generated from the last dict write to the first, so the first point of a run of equal
     * positions is the owner the dict keeps. */
    size_t k = 0;
    for (size_t i = t->n; i-- > 0;) {
        size_t idlen = strlen(t->ids[i]);
        memcpy(name, t->ids[i], idlen);
        for (size_t g = uhk_groups(t, i); g-- > 0;) {
            uint8_t d[MD5_DIGEST_LENGTH];
            MD5_CTX ctx;
            MD5Init(&ctx);
            MD5Update(&ctx, (const uint8_t *)name, ch__append_index(name, idlen, '-', (uint32_t)g));
            MD5Final(d, &ctx);
            for (int x = 4; x-- > 0;) {
                const uint8_t *b = d + 4 * x;
                uint32_t pos = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                               (uint32_t)b[3] << 24;
                pts[k++] = (ch__point){.pos = pos, .node = (uint32_t)i};
            }
        }
    }
    ch__free(t, name, cap);
    return ch__ring_index(t, pts, total);
}

static size_t uhk_lookup(const ch_table *t, uint64_t h)
{
    return ch__ring_lookup(t, (uint32_t)h + 1);
}

static void uhk_walk_start(const ch_table *t, uint64_t h, ch__walk *w)
{
    ch__ring_walk_start(t, (uint32_t)h + 1, w);
}

const ch__algo ch__algo_uhashring_ketama_2 = {
    .build = uhk_build,
    .destroy = ch__ring_destroy,
    .lookup = uhk_lookup,
    .shares = ch__ring_shares,
    .walk_start = uhk_walk_start,
    .walk_next = ch__ring_walk_next,
    .default_vnodes = 40,
    .fixed_hash = true,
    .hash = CH_HASH_MD5,
    .points = ch__ring_points,
};

static size_t uhm_points(const ch_table *t, size_t i)
{
    double p = (double)t->opt.vnodes * t->weights[i];
    return p > (double)CH_MAX_POINTS ? SIZE_MAX : (size_t)p;
}

static int uhm_build(ch_table *t)
{
    size_t total = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t p = uhm_points(t, i);
        if (p == SIZE_MAX || (total += p) > CH_MAX_POINTS)
            return ch__fail_points(t);
    }
    if (total == 0)
        return ch__fail_no_points(t);
    return ch__ring64_build_named(t, total, '-', false, uhm_points);
}

static size_t uhm_lookup(const ch_table *t, uint64_t h)
{
    return ch__ring64_lookup(t, h + 1);
}

static void uhm_walk_start(const ch_table *t, uint64_t h, ch__walk *w)
{
    ch__ring64_walk_start(t, h + 1, w);
}

const ch__algo ch__algo_uhashring_2 = {
    .build = uhm_build,
    .destroy = ch__ring64_destroy,
    .lookup = uhm_lookup,
    .shares = ch__ring64_shares,
    .walk_start = uhm_walk_start,
    .walk_next = ch__ring64_walk_next,
    .fixed_hash = true,
    .hash = CH_HASH_MD5_64BE,
    .points = ch__ring64_points,
};

/* ---- groupcache@0 --------------------------------------------------------------------------- *
 * Go groupcache's consistenthash (github.com/golang/groupcache/consistenthash, unchanged since
 * 2013; the module has only v0 pseudo-versions): Map.Add(ids...) puts, for each id in list
 * order and i < replicas, crc32.ChecksumIEEE("<i><id>") (the index BEFORE the id) into a Go map
 * hash -> id (a later put wins) and a sorted slice; Get(key) takes the first hash >=
 * ChecksumIEEE(key) (crc32a), wrapping to index 0. No weights. Replicas: ch_options.vnodes; 0
 * means 50, groupcache's HTTPPool default. */

int ch__groupcache_build(ch_table *t)
{
    if (!t->uniform)
        return ch__fail_unweighted(t);
    uint32_t reps = t->opt.vnodes;
    uint64_t total64 = (uint64_t)t->n * reps;
    if (total64 > CH_MAX_POINTS)
        return ch__fail_points(t);
    size_t total = (size_t)total64, cap = ch__max_id_len(t) + 12;
    ch__point *pts = ch__alloc(t, (total + CH__RING_SCAN) * sizeof(*pts));
    char *name = ch__alloc(t, cap);
    if (pts == NULL || name == NULL) {
        ch__free(t, pts, (total + CH__RING_SCAN) * sizeof(*pts));
        ch__free(t, name, cap);
        return CH_ENOMEM;
    }
    /* From the last put to the first: the first of equal positions is the map's owner. */
    size_t k = 0;
    for (size_t i = t->n; i-- > 0;) {
        size_t idlen = strlen(t->ids[i]);
        for (uint32_t j = reps; j-- > 0;) {
            /* "<j><id>": the digits of j (ch__append_index writes a separator first). */
            size_t len = ch__append_index(name, 0, '#', j) - 1;
            memmove(name, name + 1, len);
            memcpy(name + len, t->ids[i], idlen);
            pts[k++] = (ch__point){.pos = (uint32_t)t->hash(name, len + idlen),
                                   .node = (uint32_t)i};
        }
    }
    ch__free(t, name, cap);
    return ch__ring_index(t, pts, total);
}

const ch__algo ch__algo_groupcache_0 = {
    .build = ch__groupcache_build,
    .destroy = ch__ring_destroy,
    .lookup = ch__ring_lookup,
    .shares = ch__ring_shares,
    .walk_start = ch__ring_walk_start,
    .walk_next = ch__ring_walk_next,
    .fixed_hash = true,
    .hash = CH_HASH_TW_CRC32A,
    .unweighted = true,
    .default_vnodes = 50,
    .points = ch__ring_points,
};

/* ---- guava@31 ------------------------------------------------------------------------------- *
 * Guava's Hashing.consistentHash(long input, int buckets) (Guava 31, Debian libguava-java; the
 * function is unchanged since Guava 11): a jump over buckets driven by a 64-bit linear
 * congruential generator seeded with the input,
 *     state = 2862933555777941757 * state + 1;  d = ((int)(state >>> 33) + 1) / 2^31;
 *     next = (int)((candidate + 1) / d)  while next < buckets: candidate = next.
 * The input is the key's 64-bit registry hash: Guava's HashCode.padToLong(), which for md5 is
 * digest bytes 0..7 little-endian (chash's md5) and for crc32 the CRC zero-extended (crc32a).
 * Bucket i is node i; no weights, no second choice (like jump: a node removed from the middle
 * renumbers the ones after it). */

static size_t guava_lookup(const ch_table *t, uint64_t h)
{
    uint64_t state = h;
    int32_t candidate = 0;
    int64_t buckets = (int64_t)t->n;
    for (;;) {
        state = UINT64_C(2862933555777941757) * state + 1;
        /* Java's (int)(state >>> 33) + 1 in int arithmetic: 2^31 wraps to Integer.MIN_VALUE,
         * and the negative d that gives ends the jump below. */
        int64_t v = (int64_t)(state >> 33) + 1;
        if (v > INT32_MAX)
            v = INT32_MIN;
        double q = (double)(candidate + 1) / ((double)v / 0x1p31);
        /* Java's (int) of a double: toward zero, saturating (q is never NaN here). */
        int64_t next = q >= 2147483647.0 ? INT32_MAX : q <= -2147483648.0 ? INT32_MIN : (int64_t)q;
        if (next < 0 || next >= buckets)
            return (size_t)candidate;
        candidate = (int32_t)next;
    }
}

static int guava_build(ch_table *t)
{
    if (!t->uniform)
        return ch__fail_unweighted(t);
    return t->n <= INT32_MAX ? CH_OK : ch__fail(t, CH_ETOOBIG, "guava@31: at most %d nodes",
                                                 INT32_MAX);
}

static void guava_destroy(ch_table *t)
{
    (void)t;
}

static void guava_shares(const ch_table *t, double *shares)
{
    for (size_t i = 0; i < t->n; i++)
        shares[i] = 1.0 / (double)t->n;
}

const ch__algo ch__algo_guava_31 = {
    .build = guava_build,
    .destroy = guava_destroy,
    .lookup = guava_lookup,
    .shares = guava_shares,
    .walk_start = NULL,
    .walk_next = NULL,
    .unweighted = true,
};

/* ---- spymemcached@2 and spymemcached_libmemcached@2 ----------------------------------------- *
 * spymemcached 2.x's KetamaNodeLocator with DefaultHashAlgorithm.KETAMA_HASH (KetamaConnection-
 * Factory's), Debian libspymemcached-java: a TreeMap<Long, node> (a later put wins), a key goes
 * to the first position >= md5(key) (its low 4 bytes little-endian), else to the first entry.
 * Positions: 4 per MD5 digest of "<node key>-<i>", bytes 4x..4x+3 little-endian. Points:
 *   - equal weights (no weights map): 160 / 4 = 40 digests per node (vnodes / 4);
 *   - unequal weights (a weights map): floor((float)w_i / (float)W * 160 / 4 * N) digests, in
 *     float as spymemcached computes it (its + 1e-10 never changes the floor).
 * The node key is the id as given for spymemcached@2 (KetamaNodeKeyFormatter.Format.SPYMEMCACHED:
 * String.valueOf(InetSocketAddress) without a leading "/": "10.0.0.1:11211" for an address
 * given as an IP, "host/10.0.0.1:11211" for a resolved name), and for
 * spymemcached_libmemcached@2 (Format.LIBMEMCACHED) the id "host:port" without ":11211". */

static size_t spy_groups(const ch_table *t, size_t i)
{
    if (t->uniform)
        return t->opt.vnodes / 4;
    float pct = (float)t->weights[i] / (float)t->weight_sum;
    float x = floorf(pct * (float)t->opt.vnodes / 4.0f * (float)t->n);
    return !(x <= (float)(CH_MAX_POINTS / 4)) ? SIZE_MAX : (size_t)x;
}

static int spy_build_format(ch_table *t, bool libmemcached_format)
{
    size_t total = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t g = spy_groups(t, i);
        if (g == SIZE_MAX || (total += 4 * g) > CH_MAX_POINTS)
            return ch__fail_points(t);
    }
    if (total == 0)
        return ch__fail_no_points(t);
    size_t cap = ch__max_id_len(t) + 12;
    ch__point *pts = ch__alloc(t, (total + CH__RING_SCAN) * sizeof(*pts));
    char *name = ch__alloc(t, cap);
    if (pts == NULL || name == NULL) {
        ch__free(t, pts, (total + CH__RING_SCAN) * sizeof(*pts));
        ch__free(t, name, cap);
        return CH_ENOMEM;
    }
    /* From the last put to the first: the first point of equal positions is the map's owner. */
    size_t k = 0;
    for (size_t i = t->n; i-- > 0;) {
        size_t len = strlen(t->ids[i]);
        const char *colon = strrchr(t->ids[i], ':');
        if (libmemcached_format && colon != NULL && strcmp(colon, ":11211") == 0)
            len = (size_t)(colon - t->ids[i]);
        memcpy(name, t->ids[i], len);
        for (size_t g = spy_groups(t, i); g-- > 0;) {
            uint8_t d[MD5_DIGEST_LENGTH];
            MD5_CTX ctx;
            MD5Init(&ctx);
            MD5Update(&ctx, (const uint8_t *)name, ch__append_index(name, len, '-', (uint32_t)g));
            MD5Final(d, &ctx);
            for (int x = 4; x-- > 0;) {
                const uint8_t *b = d + 4 * x;
                uint32_t pos = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                               (uint32_t)b[3] << 24;
                pts[k++] = (ch__point){.pos = pos, .node = (uint32_t)i};
            }
        }
    }
    ch__free(t, name, cap);
    return ch__ring_index(t, pts, total);
}

static int spy_build(ch_table *t)
{
    return spy_build_format(t, false);
}

static int spy_libmemcached_build(ch_table *t)
{
    return spy_build_format(t, true);
}

#define SPY_OPS(build_fn)                                                                       \
    {                                                                                           \
        .build = build_fn, .destroy = ch__ring_destroy, .lookup = ch__ring_lookup,              \
        .shares = ch__ring_shares, .walk_start = ch__ring_walk_start,                           \
        .walk_next = ch__ring_walk_next, .fixed_hash = true, .hash = CH_HASH_MD5,               \
        .points = ch__ring_points, .addr_ids = true,                                            \
    }

const ch__algo ch__algo_spymemcached_2 = SPY_OPS(spy_build);
const ch__algo ch__algo_spymemcached_libmemcached_2 = SPY_OPS(spy_libmemcached_build);

/* ---- pecl_memcache@4 ------------------------------------------------------------------------ *
 * PECL memcache 4.x (php-memcache, memcache_consistent_hash.c) with memcache.hash_strategy =
 * consistent: server i, added as host:port (the id "host:port"), gets weight * 160 points
 * (vnodes * w_i, whole weights), point k at hash("<host>:<port>-<k>") with the pool's
 * memcache.hash_function: crc32 (the default; chash's crc32a) or fnv (FNV-1a over signed chars:
 * fnv1a_32), taken from ch_options.hash. The points are sorted (glibc's qsort, stable: the
 * earlier server first among equal points) and quantised into 1024 buckets: bucket b belongs to
 * the first point >= b * floor((2^32 - 1) / 1024), wrapping; a key goes to bucket hash % 1024.
 * One server takes every key.
 *
 * Keys are prepared as PECL prepares them before hashing (mmc_prepare_key): cut to 250 bytes,
 * every byte <= 0x20 (space, controls) replaced by '_'. A key memcached accepts is unchanged,
 * so a proxy, which sees the prepared key on the wire, hashes what PECL hashed either way.
 *
 * Failover (mmc_pool_find, memcache.allow_failover on, max_failover_attempts 20): when the
 * key's server is down, PECL hashes "<key>-<i>" for i = 0, 1, ... until a server is up or i
 * reaches 20 (21 tries in all). The walk gives those servers in order, then the ring from the
 * key's bucket (one turn). A retry's hash continues the key's: crc32 and FNV-1a carry their
 * whole state in their value, so hash("<key>-<i>") is the key's hash run on over "-<i>". For
 * a table hash other than PECL's two, the walk is the ring's alone. */

#define PECL_BUCKETS 1024u
#define PECL_STEP (UINT32_C(0xffffffff) / PECL_BUCKETS)

static size_t pecl_points(const ch_table *t, size_t i)
{
    double p = floor((double)t->opt.vnodes * t->weights[i]);
    return p > (double)CH_MAX_POINTS ? SIZE_MAX : (size_t)p;
}

static int pecl_build(ch_table *t)
{
    size_t total = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t p = pecl_points(t, i);
        if (p == SIZE_MAX || (total += p) > CH_MAX_POINTS)
            return ch__fail_points(t);
    }
    if (total == 0)
        return ch__fail_no_points(t);
    size_t cap = ch__max_id_len(t) + 12;
    ch__point *pts = ch__alloc(t, (total + CH__RING_SCAN) * sizeof(*pts));
    char *name = ch__alloc(t, cap);
    if (pts == NULL || name == NULL) {
        ch__free(t, pts, (total + CH__RING_SCAN) * sizeof(*pts));
        ch__free(t, name, cap);
        return CH_ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t idlen = strlen(t->ids[i]), p = pecl_points(t, i);
        memcpy(name, t->ids[i], idlen);
        for (uint32_t j = 0; j < p; j++) {
            size_t len = ch__append_index(name, idlen, '-', j);
            pts[k++] = (ch__point){.pos = (uint32_t)t->hash(name, len), .node = (uint32_t)i};
        }
    }
    ch__free(t, name, cap);
    return ch__ring_index(t, pts, total);
}

#define PECL_MAX_KEY 250u
#define PECL_TRIES 21u

static uint64_t pecl_key_hash(const ch_table *t, const void *key, size_t len)
{
    const unsigned char *k = key;
    if (len > PECL_MAX_KEY)
        len = PECL_MAX_KEY;
    /* Most keys need nothing: test 8 bytes at a time for a byte < 0x21 (the word test has no
     * false negatives; a hit, true or false, goes to the byte loop below). */
    const uint64_t ones = UINT64_C(0x0101010101010101), highs = UINT64_C(0x8080808080808080);
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t x;
        memcpy(&x, k + i, 8);
        if (((x - 0x21 * ones) & ~x & highs) != 0)
            break;
    }
    while (i < len && k[i] > 0x20)
        i++;
    if (i == len)
        return t->hash(k, len);
    unsigned char buf[PECL_MAX_KEY];
    for (i = 0; i < len; i++)
        buf[i] = k[i] > 0x20 ? k[i] : '_';
    return t->hash(buf, len);
}

/* The hash of "<key><s>" from the key's hash h, for PECL's two hash functions. */
static uint32_t pecl_extend(ch_hash_id hash, uint32_t h, const char *s, size_t n)
{
    if (hash == CH_HASH_TW_FNV1A_32) {
        for (size_t i = 0; i < n; i++) /* "-" and digits: no sign extension to mind */
            h = (h ^ (uint8_t)s[i]) * UINT32_C(0x01000193);
        return h;
    }
    uint32_t c = ~h; /* crc32a: the register before the final inversion */
    for (size_t i = 0; i < n; i++) {
        c ^= (uint8_t)s[i];
        for (unsigned b = 0; b < 8; b++)
            c = (c >> 1) ^ (CRC32_POLY_REFLECTED & (0u - (c & 1u)));
    }
    return ~c;
}

static uint32_t pecl_bucket_start(uint64_t h)
{
    return PECL_STEP * ((uint32_t)h % PECL_BUCKETS);
}

static size_t pecl_lookup(const ch_table *t, uint64_t h)
{
    return t->n == 1 ? 0 : ch__ring_lookup(t, pecl_bucket_start(h));
}

static void pecl_walk_start(const ch_table *t, uint64_t h, ch__walk *w)
{
    ch__ring_walk_start(t, pecl_bucket_start(h), w);
    w->h = h;
    bool retries = t->opt.hash == CH_HASH_TW_CRC32A || t->opt.hash == CH_HASH_TW_FNV1A_32;
    w->last = retries ? 0 : PECL_TRIES;
}

static size_t pecl_walk_next(const ch_table *t, ch__walk *w)
{
    if (w->last >= PECL_TRIES)
        return ch__ring_walk_next(t, w);
    uint32_t h = (uint32_t)w->h;
    if (w->last > 0) {
        char suffix[12];
        size_t n = ch__append_index(suffix, 0, '-', (uint32_t)w->last - 1);
        h = pecl_extend(t->opt.hash, h, suffix, n);
    }
    w->last++;
    return pecl_lookup(t, h);
}

/* Each bucket holds 1/1024 of the key hashes (h % 1024 over 2^32 values). */
static void pecl_shares(const ch_table *t, double *shares)
{
    for (size_t i = 0; i < t->n; i++)
        shares[i] = 0.0;
    for (uint32_t b = 0; b < PECL_BUCKETS; b++)
        shares[pecl_lookup(t, b)] += 1.0 / PECL_BUCKETS;
}

const ch__algo ch__algo_pecl_memcache_4 = {
    .build = pecl_build,
    .destroy = ch__ring_destroy,
    .lookup = pecl_lookup,
    .shares = pecl_shares,
    .walk_start = pecl_walk_start,
    .walk_next = pecl_walk_next,
    .key_hash = pecl_key_hash,
    .points = ch__ring_points,
    .addr_ids = true,
};

/* ---- hashring@3 and hashring_hash_ring@3 ---------------------------------------------------- *
 * Node's hashring 3.x (npm): server i (id: its connection string, "host:port") gets
 * floor(w_i / W * vnodes * N) MD5 digests of "<id>-<k>" (in double; "vnode count" 40 by
 * default), each giving 4 positions (replicas), digest bytes 4x..4x+3 little-endian, or 3 with
 * its { compatibility: "hash_ring" } switch. The ring is sorted stably (V8's sort: the earlier
 * server first among equal positions); a key, md5 of its UTF-8 text (Node's crypto hashes a
 * string as UTF-8), goes to the first position >= its hash, wrapping to index 0. */

static size_t hashring_digests(const ch_table *t, size_t i)
{
    double d = floor(t->weights[i] / t->weight_sum * (double)t->opt.vnodes * (double)t->n);
    return d > (double)(CH_MAX_POINTS / 4) ? SIZE_MAX : (size_t)d;
}

/* The length of a hashring point string's server part: the id, or for npm memcached's rings
 * (default port 11211) an id "host:11211" without its port. connection-parse splits the id at
 * its ':'s and reads the second piece as a number (+"011211" is 11211 too). */
static size_t hashring_server_len(const char *id, bool default_port)
{
    size_t len = strlen(id);
    const char *colon = strchr(id, ':');
    if (!default_port || colon == NULL)
        return len;
    const char *p = colon + 1, *end = strchr(p, ':');
    size_t plen = end != NULL ? (size_t)(end - p) : strlen(p);
    if (plen == 0 || strspn(p, "0123456789") < plen)
        return len;
    unsigned long v = 0;
    for (size_t i = 0; i < plen && v <= 11211; i++)
        v = v * 10 + (unsigned long)(p[i] - '0');
    return v == 11211 ? (size_t)(colon - id) : len;
}

static int hashring_build_replicas(ch_table *t, unsigned replicas, bool default_port)
{
    size_t total = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t d = hashring_digests(t, i);
        if (d == SIZE_MAX || (total += replicas * d) > CH_MAX_POINTS)
            return ch__fail_points(t);
    }
    if (total == 0)
        return ch__fail_no_points(t);
    size_t cap = ch__max_id_len(t) + 12;
    ch__point *pts = ch__alloc(t, (total + CH__RING_SCAN) * sizeof(*pts));
    char *name = ch__alloc(t, cap);
    if (pts == NULL || name == NULL) {
        ch__free(t, pts, (total + CH__RING_SCAN) * sizeof(*pts));
        ch__free(t, name, cap);
        return CH_ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t idlen = hashring_server_len(t->ids[i], default_port), nd = hashring_digests(t, i);
        memcpy(name, t->ids[i], idlen);
        for (size_t g = 0; g < nd; g++) {
            uint8_t d[MD5_DIGEST_LENGTH];
            MD5_CTX ctx;
            MD5Init(&ctx);
            MD5Update(&ctx, (const uint8_t *)name, ch__append_index(name, idlen, '-', (uint32_t)g));
            MD5Final(d, &ctx);
            for (unsigned x = 0; x < replicas; x++) {
                const uint8_t *b = d + 4 * x;
                uint32_t pos = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                               (uint32_t)b[3] << 24;
                pts[k++] = (ch__point){.pos = pos, .node = (uint32_t)i};
            }
        }
    }
    ch__free(t, name, cap);
    return ch__ring_index(t, pts, total);
}

static int hashring_build(ch_table *t)
{
    return hashring_build_replicas(t, 4, false);
}

static int hashring_hash_ring_build(ch_table *t)
{
    return hashring_build_replicas(t, 3, false);
}

/* npm memcached 2.2 (lib/memcached.js) builds its ring as new HashRing(servers, 'md5',
 * {compatibility: 'ketama', 'default port': 11211}): hashring's 4 points a digest, and a
 * server on port 11211 is hashed as "<host>-<k>" (hashring's default-port rule). */
static int node_memcached_build(ch_table *t)
{
    return hashring_build_replicas(t, 4, true);
}

#define HASHRING_OPS(build_fn)                                                                  \
    {                                                                                           \
        .build = build_fn, .destroy = ch__ring_destroy, .lookup = ch__ring_lookup,              \
        .shares = ch__ring_shares, .walk_start = ch__ring_walk_start,                           \
        .walk_next = ch__ring_walk_next, .fixed_hash = true, .hash = CH_HASH_MD5,               \
        .default_vnodes = 40, .points = ch__ring_points, .addr_ids = true,                      \
    }

const ch__algo ch__algo_hashring_3 = HASHRING_OPS(hashring_build);
const ch__algo ch__algo_hashring_hash_ring_3 = HASHRING_OPS(hashring_hash_ring_build);
const ch__algo ch__algo_node_memcached_2 = HASHRING_OPS(node_memcached_build);

/* ---- nginx@1 -------------------------------------------------------------------------------- *
 * nginx's "hash $key consistent" (ngx_http_upstream_hash_module, since 1.7.2; Debian
 * nginx-light 1.22): server i (the id: the server as written in the upstream block, "ip:port"
 * or "unix:/path") is split into host and port (the digits after the last ':'; none for
 * "unix:" servers, whose host is the path) and gets weight * 160 points, chained:
 *     point_j = crc32(host "\0" port prev_j),  prev_0 = 0,  prev_{j+1} = point_j
 * (prev as 4 bytes little-endian). The points are sorted (glibc's stable qsort) and equal ones
 * dropped but the first (the earlier server); a key goes to the first point >= crc32(key),
 * wrapping. nginx sends an empty key, or every key of a one-server upstream, round robin:
 * chash gives them server 0. */

static size_t nginx_points(const ch_table *t, size_t i)
{
    double p = floor(t->weights[i]) * (double)t->opt.vnodes;
    return p > (double)CH_MAX_POINTS ? SIZE_MAX : (size_t)p;
}

/* Writes "host\0port" of an nginx server string into buf; returns its length. */
static size_t nginx_base(const char *id, char *buf)
{
    size_t len = strlen(id), host_len = len, port_at = len;
    if (len >= 5 && (id[0] | 0x20) == 'u' && (id[1] | 0x20) == 'n' && (id[2] | 0x20) == 'i' &&
        (id[3] | 0x20) == 'x' && id[4] == ':') {
        memcpy(buf, id + 5, len - 5);
        buf[len - 5] = '\0';
        return len - 4;
    }
    for (size_t j = 0; j < len; j++) {
        char c = id[len - j - 1];
        if (c == ':') {
            host_len = len - j - 1;
            port_at = len - j;
            break;
        }
        if (c < '0' || c > '9')
            break;
    }
    memcpy(buf, id, host_len);
    buf[host_len] = '\0';
    memcpy(buf + host_len + 1, id + port_at, len - port_at);
    return host_len + 1 + (len - port_at);
}

/* The crc32 chain of nginx and Cache::Memcached::Fast: node i's points are
 *     point_j = crc32(base prev_j),  prev_0 = 0,  prev_{j+1} = point_j
 * (prev as 4 bytes little-endian), base the node's "host\0port" from base_of(), and
 * points_of(t, i) of them, in list order: ring.c's stable order puts the earlier node (and its
 * earlier point) first among equal positions, and its lookup takes the first. */
static int chain_build(ch_table *t, size_t (*base_of)(const char *, char *),
                       size_t (*points_of)(const ch_table *, size_t))
{
    size_t total = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t p = points_of(t, i);
        if (p == SIZE_MAX || (total += p) > CH_MAX_POINTS)
            return ch__fail_points(t);
    }
    if (total == 0)
        return ch__fail_no_points(t);
    size_t cap = ch__max_id_len(t) + 8;
    ch__point *pts = ch__alloc(t, (total + CH__RING_SCAN) * sizeof(*pts));
    char *buf = ch__alloc(t, cap);
    if (pts == NULL || buf == NULL) {
        ch__free(t, pts, (total + CH__RING_SCAN) * sizeof(*pts));
        ch__free(t, buf, cap);
        return CH_ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t base = base_of(t->ids[i], buf), p = points_of(t, i);
        uint32_t prev = 0;
        for (size_t j = 0; j < p; j++) {
            for (int b = 0; b < 4; b++)
                buf[base + (size_t)b] = (char)(prev >> (8 * b));
            prev = (uint32_t)t->hash(buf, base + 4);
            pts[k++] = (ch__point){.pos = prev, .node = (uint32_t)i};
        }
    }
    ch__free(t, buf, cap);
    return ch__ring_index(t, pts, total);
}

static int nginx_build(ch_table *t)
{
    return chain_build(t, nginx_base, nginx_points);
}

const ch__algo ch__algo_nginx_1 = {
    .addr_ids = true,
    .build = nginx_build,
    .destroy = ch__ring_destroy,
    .lookup = ch__ring_lookup,
    .shares = ch__ring_shares,
    .walk_start = ch__ring_walk_start,
    .walk_next = ch__ring_walk_next,
    .fixed_hash = true,
    .hash = CH_HASH_TW_CRC32A,
    .points = ch__ring_points,
};

/* ---- cmfast@0 ------------------------------------------------------------------------------- *
 * Perl's Cache::Memcached::Fast 0.28 (Debian libcache-memcached-fast-perl; dispatch_key.c) with
 * ketama_points > 0: server i, its address split at the last ':' into host and port (the whole
 * address is the host when it has none), gets (int)(ketama_points * weight + 0.5) points of the
 * crc32 chain above (base "host\0port"); a point equal to one already there goes after it, so
 * the earlier server keeps it. A key's hash is crc32 of the key (of namespace + key with
 * hash_namespace on) and it goes to the first point >= it, wrapping. ketama_points is vnodes;
 * 0 means 150 (the module's documented example: its own default, 0, is the non-ketama mode).
 * Weights are any positive numbers. One server takes every key. */

/* Writes "host\0port" of a Cache::Memcached::Fast address into buf; returns its length. */
static size_t cmfast_base(const char *id, char *buf)
{
    size_t len = strlen(id);
    const char *colon = strrchr(id, ':');
    size_t host_len = colon != NULL ? (size_t)(colon - id) : len;
    memcpy(buf, id, host_len);
    buf[host_len] = '\0';
    if (colon == NULL)
        return host_len + 1;
    memcpy(buf + host_len + 1, colon + 1, len - host_len - 1);
    return len;
}

static size_t cmfast_points(const ch_table *t, size_t i)
{
    double p = (double)t->opt.vnodes * t->weights[i] + 0.5;
    return p > (double)CH_MAX_POINTS ? SIZE_MAX : (size_t)p;
}

static int cmfast_build(ch_table *t)
{
    return chain_build(t, cmfast_base, cmfast_points);
}

static size_t cmfast_lookup(const ch_table *t, uint64_t h)
{
    return t->n == 1 ? 0 : ch__ring_lookup(t, h);
}

const ch__algo ch__algo_cmfast_0 = {
    .addr_ids = true,
    .build = cmfast_build,
    .destroy = ch__ring_destroy,
    .lookup = cmfast_lookup,
    .shares = ch__ring_shares,
    .walk_start = ch__ring_walk_start,
    .walk_next = ch__ring_walk_next,
    .fixed_hash = true,
    .hash = CH_HASH_TW_CRC32A,
    .default_vnodes = 150,
    .limits = "Cache::Memcached::Fast gives a server (int)(ketama_points * weight + 0.5) points: "
              "the weights and ketama_points (vnodes) must give at least one point in all",
    .points = ch__ring_points,
};

/* ---- haproxy@2 ------------------------------------------------------------------------------ *
 * HAProxy 2.x's "hash-type consistent" (lb_chash.c; Debian haproxy 2.6) with no function
 * given, which means sdbm with the avalanche modifier: a key's hash is full_hash(sdbm(key)).
 * Server i gets weight * 16 points (BE_WEIGHT_SCALE; weights
 * 1..256), point j at full_hash(puid * 4096 + j), where puid is the server's numeric id: the id
 * itself when every id is a decimal number (HAProxy's "id" keyword), else i + 1 (HAProxy numbers
 * servers without one by position, so removing one renumbers those after it). full_hash is
 * Bob Jenkins' 32-bit integer hash times 3221225473, a bijection: points never collide. A key
 * goes to the point NEAREST to full_hash(sdbm(key)), the one after it or the one before it
 * (the one before when the distances are equal), wrapping both ways. */

static uint32_t haproxy_full_hash(uint32_t a)
{
    a = (a + UINT32_C(0x7ed55d16)) + (a << 12);
    a = (a ^ UINT32_C(0xc761c23c)) ^ (a >> 19);
    a = (a + UINT32_C(0x165667b1)) + (a << 5);
    a = (a + UINT32_C(0xd3a2646c)) ^ (a << 9);
    a = (a + UINT32_C(0xfd7046c5)) + (a << 3);
    a = (a ^ UINT32_C(0xb55a4f09)) ^ (a >> 16);
    return a * UINT32_C(3221225473);
}

/* Every id a decimal number below 2^20 (puid * 4096 + j then fits 32 bits as in HAProxy). */
static bool haproxy_numeric_ids(const ch_table *t)
{
    for (size_t i = 0; i < t->n; i++) {
        const char *s = t->ids[i];
        size_t len = strlen(s);
        if (len > 7 || strspn(s, "0123456789") != len)
            return false;
    }
    return true;
}

/* HAProxy's weights are whole numbers from 1 to 256 (SRV_UWGHT_MAX; its "weight" keyword
 * refuses more): chash's are rounded, at least 1; above HAPROXY_MAX_WEIGHT is refused. */
#define HAPROXY_MAX_WEIGHT 256.0
static size_t haproxy_points(const ch_table *t, size_t i)
{
    double w = round(t->weights[i]);
    return w > HAPROXY_MAX_WEIGHT ? 0 : w < 1.0 ? 16 : (size_t)w * 16;
}

static int haproxy_build(ch_table *t)
{
    size_t total = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t p = haproxy_points(t, i);
        if (p == 0)
            return ch__fail(t, CH_EWEIGHT,
                            "haproxy@2: node %zu (\"%.40s\") weighs %g: HAProxy's weights are 1 "
                            "to %g",
                            i, t->ids[i], t->weights[i], HAPROXY_MAX_WEIGHT);
        total += p;
    }
    bool numeric = haproxy_numeric_ids(t);
    ch__point *pts = ch__alloc(t, (total + CH__RING_SCAN) * sizeof(*pts));
    if (pts == NULL)
        return CH_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < t->n; i++) {
        uint32_t puid = numeric ? (uint32_t)strtoul(t->ids[i], NULL, 10) : (uint32_t)(i + 1);
        size_t p = haproxy_points(t, i);
        for (uint32_t j = 0; j < p; j++)
            pts[k++] = (ch__point){.pos = haproxy_full_hash(puid * 4096u + j),
                                   .node = (uint32_t)i};
    }
    return ch__ring_index(t, pts, total);
}

/* The index of the point nearest to h: the first point >= h (wrapping to point 0) or the one
 * before it (wrapping to the last), the one before on equal distances. */
static size_t haproxy_nearest(const ch_table *t, uint64_t h)
{
    const ch__point *pts = t->u.ring.points;
    size_t np = t->u.ring.npoints;
    ch__walk w;
    ch__ring_walk_start(t, h, &w);
    size_t next = w.next, prev = next == 0 ? np - 1 : next - 1;
    uint32_t x = (uint32_t)h, dp = x - pts[prev].pos, dn = pts[next].pos - x;
    return dp <= dn ? prev : next;
}

static size_t haproxy_lookup(const ch_table *t, uint64_t h)
{
    return t->u.ring.points[haproxy_nearest(t, haproxy_full_hash((uint32_t)h))].node;
}

/* HAProxy takes a server that goes down out of its tree (chash_dequeue_srv): its keys go to the
 * nearest point left, before or after them. The walk is therefore the points by increasing
 * distance from the key's position, the earlier one first on equal distances: its first up
 * server is the nearest point of the tree without the down ones. w->h holds the position,
 * w->last the next point before it, w->next the next point after it. */
static void haproxy_walk_start(const ch_table *t, uint64_t h, ch__walk *w)
{
    size_t np = t->u.ring.npoints;
    uint32_t x = haproxy_full_hash((uint32_t)h);
    ch__ring_walk_start(t, x, w);
    w->h = x;
    w->last = w->next == 0 ? np - 1 : w->next - 1;
    w->left = np;
}

static size_t haproxy_walk_next(const ch_table *t, ch__walk *w)
{
    if (w->left == 0)
        return CH__WALK_END;
    const ch__point *pts = t->u.ring.points;
    size_t np = t->u.ring.npoints, node;
    uint32_t x = (uint32_t)w->h;
    /* Distances around the ring, in 32-bit arithmetic: the two sides never overlap. */
    if ((uint32_t)(x - pts[w->last].pos) <= (uint32_t)(pts[w->next].pos - x)) {
        node = pts[w->last].node;
        w->last = w->last == 0 ? np - 1 : w->last - 1;
    } else {
        node = pts[w->next].node;
        w->next = w->next + 1 == np ? 0 : w->next + 1;
    }
    w->left--;
    return node;
}

/* Point i owns the hashes nearer to it than to its neighbours: half of each gap on either
 * side (the midpoint itself goes to the earlier point). */
static void haproxy_shares(const ch_table *t, double *shares)
{
    const ch__point *pts = t->u.ring.points;
    size_t np = t->u.ring.npoints;
    for (size_t i = 0; i < t->n; i++)
        shares[i] = 0.0;
    for (size_t i = 0; i < np; i++) {
        size_t j = i + 1 == np ? 0 : i + 1;
        /* The gap from point i to point j (2^32 for a single point). */
        double gap = np == 1 ? 0x1p32 : (double)(uint32_t)(pts[j].pos - pts[i].pos);
        shares[pts[i].node] += gap / 2;
        shares[pts[j].node] += gap / 2;
    }
    for (size_t i = 0; i < t->n; i++)
        shares[i] *= 0x1p-32;
}

const ch__algo ch__algo_haproxy_2 = {
    .build = haproxy_build,
    .destroy = ch__ring_destroy,
    .lookup = haproxy_lookup,
    .shares = haproxy_shares,
    .walk_start = haproxy_walk_start,
    .walk_next = haproxy_walk_next,
    .fixed_hash = true,
    .hash = CH_HASH_SDBM,
    .max_weight = HAPROXY_MAX_WEIGHT,
    .points = ch__ring_points,
};

/* ---- pymemcache@3 --------------------------------------------------------------------------- *
 * pymemcache 3's HashClient (Debian python3-pymemcache 3.5; client/rendezvous.py, murmur3.py):
 * RendezvousHash.get_node(key) scores every node, in list order, with
 * murmur3_32("%s-%s" % (node, key), seed 0) and keeps the highest, a tie going to the greater
 * name (max(str(node), str(winner))). Nodes are HashClient's "host:port". pymemcache's pure
 * Python murmur3 reads a str by code points, each taken mod 256, its length the number of code
 * points: for ASCII keys (HashClient's default allows no other) the bytes' murmur3_32; chash
 * decodes keys from UTF-8 (as java_hashcode does) for allow_unicode_keys. No weights. There is
 * no key hash: lookups need the key (CH_ALGO_F_KEYED). Cost: N murmur3s per lookup. */

/* pymemcache refuses keys over 250 bytes; ids and keys up to this many code points are scored,
 * longer ones go to node 0. */
#define PYM_MAX 4096

/* Writes the code points of s[0..n-1] (UTF-8), each mod 256, to out; returns their count. */
static size_t codepoints_mod256(const uint8_t *s, size_t n, uint8_t *out)
{
    size_t k = 0, i = 0;
    while (i < n) {
        uint32_t cp;
        size_t bad, step = ch__utf8_next(s + i, n - i, &cp, &bad);
        if (step == 0) {
            cp = 0xFFFD;
            step = bad;
        }
        out[k++] = (uint8_t)cp;
        i += step;
    }
    return k;
}

static int pymemcache_build(ch_table *t)
{
    return t->uniform ? CH_OK : ch__fail_unweighted(t);
}

static void pymemcache_destroy(ch_table *t)
{
    (void)t;
}

static size_t pymemcache_lookup_hash(const ch_table *t, uint64_t h)
{
    return (size_t)(h % t->n);
}

static size_t pymemcache_lookup_key(const ch_table *t, const void *key, size_t len)
{
    uint8_t buf[PYM_MAX];
    size_t best = 0;
    uint32_t best_score = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t idlen = strlen(t->ids[i]);
        if (idlen + 1 + len > PYM_MAX)
            return 0;
        size_t n = codepoints_mod256((const uint8_t *)t->ids[i], idlen, buf);
        buf[n++] = '-';
        n += codepoints_mod256(key, len, buf + n);
        uint32_t score = ch__murmur3_32(buf, n, 0);
        if (i == 0 || score > best_score ||
            (score == best_score && strcmp(t->ids[i], t->ids[best]) > 0)) {
            best = i;
            best_score = score;
        }
    }
    return best;
}

static void pymemcache_shares(const ch_table *t, double *shares)
{
    for (size_t i = 0; i < t->n; i++)
        shares[i] = 1.0 / (double)t->n;
}

const ch__algo ch__algo_pymemcache_3 = {
    .build = pymemcache_build,
    .destroy = pymemcache_destroy,
    .lookup = pymemcache_lookup_hash,
    .lookup_key = pymemcache_lookup_key,
    .shares = pymemcache_shares,
    .walk_start = NULL,
    .walk_next = NULL,
    .unweighted = true,
    .addr_ids = true,
    .fixed_hash = true,
    .hash = CH_HASH_MURMUR3_32,
};

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mc_clients.c — the modulo placements of the memcached clients still in service: Perl's
 * Cache::Memcached, python-memcached, Go's gomemcache and npm's memjs, each reproducing one
 * library exactly (docs/COMPATIBILITY.md gives the rules and the proofs). None is consistent:
 * a change of the server list moves most keys (CH_ALGO_F_REMAPS), which is why a fleet moves
 * behind chash-proxy with the same placement first and changes placement there, with warm-up.
 *
 * Three of them give each server w consecutive buckets (a server listed w times) in list order
 * and send a key to bucket hash % buckets; the table is the slot table modula uses
 * (u.maglev.slot). The walk of the two that rehash on a dead server (Cache::Memcached,
 * python-memcached) is that rehash, then the buckets onward from the last one tried, so every
 * server stays reachable where the library gives up. Build O(buckets); lookup O(1).
 */
#include "../internal.h"

#include <math.h>
#include <string.h>

/* ---- buckets ------------------------------------------------------------------------------ */

/* Whole weights from 1 to max: the buckets a server gets. */
static bool whole_weights(const ch_table *t, double max)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->weights[i] < 1.0 || t->weights[i] > max || t->weights[i] != floor(t->weights[i]))
            return false;
    return true;
}

static int buckets_build(ch_table *t)
{
    if (!whole_weights(t, (double)CH_MAX_POINTS))
        return ch__fail_library(t, CH_EWEIGHT);
    size_t m = 0;
    for (size_t i = 0; i < t->n; i++)
        if ((m += (size_t)t->weights[i]) > CH_MAX_POINTS)
            return ch__fail_points(t);
    uint32_t *slot = ch__alloc(t, m * sizeof(*slot));
    if (slot == NULL)
        return CH_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < t->n; i++)
        for (size_t s = (size_t)t->weights[i]; s > 0; s--)
            slot[k++] = (uint32_t)i;
    t->u.maglev.slot = slot;
    t->u.maglev.m = (uint32_t)m;
    return CH_OK;
}

static size_t bucket_of(const ch_table *t, uint64_t v)
{
    return t->u.maglev.slot[v % t->u.maglev.m];
}

/* The buckets onward from bucket b, one turn. */
static void scan_from(const ch_table *t, uint64_t b, ch__walk *w)
{
    w->next = (size_t)(b % t->u.maglev.m);
    w->left = t->u.maglev.m;
}

/* Writes the decimal digits of v (no sign, no terminator) to buf; returns their count. */
static size_t digits(char *buf, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (size_t i = 0; i < n; i++)
        buf[i] = tmp[n - 1 - i];
    return n;
}

/* Shares of a 15-bit hash v (each of its 32768 values equally likely: the top bits of a
 * uniform CRC-32) sent to bucket v % m, value 0 counted as `zero_as` (python-memcached's
 * "or 1"). */
static void shares15(const ch_table *t, double *shares, uint32_t zero_as)
{
    for (size_t i = 0; i < t->n; i++)
        shares[i] = 0.0;
    for (uint32_t v = 0; v < 32768; v++)
        shares[bucket_of(t, v == 0 ? zero_as : v)] += 1.0 / 32768;
}

/* ---- cache_memcached@1 ------------------------------------------------------------------ *
 * Perl's Cache::Memcached 1.30 (Debian libcache-memcached-perl; Memcached.pm): init_buckets
 * pushes each server weight times (1..weight) in list order; get_sock sends a key to bucket
 * hv % buckets with hv = (crc32(key) >> 16) & 0x7fff, and while the bucket's server is dead it
 * adds the same hash of "<tries><key>" to hv for tries = 1, 2, ... (20 buckets tried in all;
 * then undef). One server takes every key. The table's key hash is the key's crc32a with its
 * length in bits 32..63, from which the retries' CRCs follow without the key (as dalli@3's,
 * clients.c). */

#define CM_TRIES 20u

static size_t cm_hv(uint64_t h)
{
    return ((uint32_t)h >> 16) & 0x7fff;
}

static size_t cm_lookup(const ch_table *t, uint64_t h)
{
    return bucket_of(t, cm_hv(h));
}

static void cm_walk_start(const ch_table *t, uint64_t h, ch__walk *w)
{
    (void)t;
    w->h = h;
    w->acc = cm_hv(h);
    w->last = 0;
    w->aux = 0;
}

static size_t cm_walk_next(const ch_table *t, ch__walk *w)
{
    if (w->last >= CM_TRIES)
        return ch__slots_walk_next(t, w);
    if (w->last > 0) {
        if (w->last == 1)
            w->aux = ch__crc32_shift(w->h >> 32);
        char prefix[20];
        uint32_t pc = (uint32_t)t->hash(prefix, digits(prefix, w->last));
        uint32_t crc = (uint32_t)w->h ^ ch__crc32_mulmod((uint32_t)w->aux, pc);
        w->acc += cm_hv(crc);
    }
    size_t node = bucket_of(t, w->acc);
    if (++w->last == CM_TRIES)
        scan_from(t, w->acc, w);
    return node;
}

static void cm_shares(const ch_table *t, double *shares)
{
    shares15(t, shares, 0);
}

const ch__algo ch__algo_cache_memcached_1 = {
    .build = buckets_build,
    .destroy = ch__slots_destroy,
    .lookup = cm_lookup,
    .shares = cm_shares,
    .walk_start = cm_walk_start,
    .walk_next = cm_walk_next,
    .len_in_key_hash = true,
    .whole_weights = true,
    .fixed_hash = true,
    .hash = CH_HASH_TW_CRC32A,
    .addr_ids = true,
    .remaps = true,
    .limits = "Cache::Memcached gives a server one bucket per unit of weight (1..weight): "
              "weights must be whole numbers >= 1",
    .points = ch__slots_points,
};

/* ---- python_memcached@1 ------------------------------------------------------------------ *
 * python-memcached 1.59 (Debian python3-memcache; memcache.py): _init_buckets appends each
 * server range(weight) times in list order; _get_server hashes a key with cmemcache_hash,
 * ((crc32(key) >> 16) & 0x7fff) or 1 (the registry's crc32, 0 made 1), and for i in
 * range(10) tries bucket h % buckets, and after a dead server h = cmemcache_hash(str(h) +
 * str(i)); after 10 it gives up. The retries depend on h alone. */

#define PM_TRIES 10u

static uint64_t pm_h(uint64_t h)
{
    return (uint32_t)h == 0 ? 1 : (uint32_t)h;
}

static size_t pm_lookup(const ch_table *t, uint64_t h)
{
    return bucket_of(t, pm_h(h));
}

static void pm_walk_start(const ch_table *t, uint64_t h, ch__walk *w)
{
    (void)t;
    w->acc = pm_h(h);
    w->last = 0;
}

static size_t pm_walk_next(const ch_table *t, ch__walk *w)
{
    if (w->last >= PM_TRIES)
        return ch__slots_walk_next(t, w);
    if (w->last > 0) {
        char buf[24];
        size_t len = digits(buf, w->acc);
        len += digits(buf + len, w->last - 1);
        w->acc = pm_h(t->hash(buf, len));
    }
    size_t node = bucket_of(t, w->acc);
    if (++w->last == PM_TRIES)
        scan_from(t, w->acc, w);
    return node;
}

static void pm_shares(const ch_table *t, double *shares)
{
    shares15(t, shares, 1);
}

const ch__algo ch__algo_python_memcached_1 = {
    .build = buckets_build,
    .destroy = ch__slots_destroy,
    .lookup = pm_lookup,
    .shares = pm_shares,
    .walk_start = pm_walk_start,
    .walk_next = pm_walk_next,
    .whole_weights = true,
    .fixed_hash = true,
    .hash = CH_HASH_TW_CRC32,
    .addr_ids = true,
    .remaps = true,
    .limits = "python-memcached gives a server range(weight) buckets: weights must be whole "
              "numbers >= 1",
    .points = ch__slots_points,
};

/* ---- gomemcache@0 ------------------------------------------------------------------------ *
 * Go's gomemcache (Debian golang-github-bradfitz-gomemcache-dev; memcache/selector.go):
 * ServerList.PickServer sends a key to addrs[crc32(key[:256]) % len(addrs)] (its buffer holds
 * 256 bytes; one server takes every key). It has no weights but "a server is given more weight
 * if it's listed multiple times": weight w is w consecutive entries. No failover: the walk is
 * the entries onward. */

static uint64_t gomemcache_key_hash(const ch_table *t, const void *key, size_t len)
{
    return t->hash(key, len < 256 ? len : 256);
}

static size_t gomemcache_lookup(const ch_table *t, uint64_t h)
{
    return bucket_of(t, (uint32_t)h);
}

static void gomemcache_walk_start(const ch_table *t, uint64_t h, ch__walk *w)
{
    scan_from(t, (uint32_t)h, w);
}

/* Entry s of m has floor((2^32 - 1 - s) / m) + 1 of the 2^32 hashes. */
static void gomemcache_shares(const ch_table *t, double *shares)
{
    uint32_t m = t->u.maglev.m;
    for (size_t i = 0; i < t->n; i++)
        shares[i] = 0.0;
    for (uint32_t s = 0; s < m; s++)
        shares[t->u.maglev.slot[s]] += (double)((UINT64_C(0xffffffff) - s) / m + 1) * 0x1p-32;
}

const ch__algo ch__algo_gomemcache_0 = {
    .build = buckets_build,
    .destroy = ch__slots_destroy,
    .lookup = gomemcache_lookup,
    .shares = gomemcache_shares,
    .walk_start = gomemcache_walk_start,
    .walk_next = ch__slots_walk_next,
    .key_hash = gomemcache_key_hash,
    .whole_weights = true,
    .fixed_hash = true,
    .hash = CH_HASH_TW_CRC32A,
    .addr_ids = true,
    .remaps = true,
    .limits = "gomemcache has no weights (a server listed w times gets w entries): weights must "
              "be whole numbers >= 1",
    .points = ch__slots_points,
};

/* ---- memjs@1 ---------------------------------------------------------------------------- *
 * npm memjs 1.3 (lib/memjs/memjs.js, utils.js): with more than one server a key goes to
 * servers[hashCode(key) % N], hashCode the JavaScript loop ret = (31 * ret + charCodeAt(i))
 * << 0 over the key's UTF-16 code units (Java's String.hashCode: the registry's
 * java_hashcode, decoded from UTF-8) and then Math.abs, which takes -2^31 to 2^31. With its
 * failover option on, a server that failed is skipped for failoverTime and the next index is
 * tried, wrapping, until a turn is done: the walk. No weights. */

static size_t memjs_lookup(const ch_table *t, uint64_t h)
{
    int32_t v = (int32_t)(uint32_t)h;
    uint64_t a = v < 0 ? (uint64_t)(-(int64_t)v) : (uint64_t)v;
    return t->n == 1 ? 0 : (size_t)(a % t->n);
}

static void memjs_walk_start(const ch_table *t, uint64_t h, ch__walk *w)
{
    w->next = memjs_lookup(t, h);
    w->left = t->n;
}

/* |v| over the 2^32 values of v: 0 once, 2^31 once, each a in 1..2^31-1 twice. */
static void memjs_shares(const ch_table *t, double *shares)
{
    const uint64_t top = (UINT64_C(1) << 31) - 1;
    for (size_t i = 0; i < t->n; i++) {
        /* a in [1, top] with a % n == i */
        uint64_t c = i <= top ? (top - i) / t->n + 1 : 0;
        if (i == 0)
            c--;
        double s = 2.0 * (double)c + (i == 0) + ((UINT64_C(1) << 31) % t->n == i);
        shares[i] = t->n == 1 ? 1.0 : s * 0x1p-32;
    }
}

static int memjs_build(ch_table *t)
{
    return t->uniform ? CH_OK : ch__fail_library(t, CH_EUNSUPPORTED);
}

static void memjs_destroy(ch_table *t)
{
    (void)t;
}

const ch__algo ch__algo_memjs_1 = {
    .build = memjs_build,
    .destroy = memjs_destroy,
    .lookup = memjs_lookup,
    .shares = memjs_shares,
    .walk_start = memjs_walk_start,
    .walk_next = ch__modulo_walk_next,
    .fixed_hash = true,
    .hash = CH_HASH_JAVA_HASHCODE,
    .unweighted = true,
    .addr_ids = true,
    .remaps = true,
    .limits = "memjs has no weights: every weight must be equal",
};

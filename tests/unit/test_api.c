/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_api.c — the public API's contracts: registries, options, table info, and the ring checked
 * point by point against a brute-force reference built here from ch_hash32 and the documented
 * rule (first point with position >= hash, ties by id then vnode index, wrap to the first).
 */
#include "testutil.h"
#include "chash_route.h"

#include <stdarg.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>

static void test_status_codes(void **state)
{
    (void)state;
    int codes[] = {
#define CODE(name, value, msg) name,
        CH_STATUS_LIST(CODE)
#undef CODE
    };
    assert_int_equal(CH_OK, 0);
    for (size_t i = 0; i < sizeof(codes) / sizeof(*codes); i++) {
        if (codes[i] != CH_OK)
            assert_true(codes[i] < 0);
        assert_string_not_equal(ch_strerror(codes[i]), "unknown status");
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(ch_strerror(codes[i]), ch_strerror(codes[j]));
    }
    assert_string_equal(ch_strerror(1), "unknown status");
    assert_string_equal(ch_strerror(-1000), "unknown status");
}

static void test_hash_registry(void **state)
{
    (void)state;
    for (int id = 0; id < CH_HASH_COUNT_; id++) {
        const char *name = ch_hash_name((ch_hash_id)id);
        ch_hash_id back;
        assert_non_null(name);
        assert_int_equal(ch_hash_from_name(name, &back), CH_OK);
        assert_int_equal(back, id);
        assert_true(ch_hash_bits((ch_hash_id)id) == 32 || ch_hash_bits((ch_hash_id)id) == 64);
    }
    ch_hash_id h;
    assert_int_equal(ch_hash_from_name("fnv1a32_fmix", &h), CH_OK);
    assert_int_equal(h, CH_HASH_DEFAULT);
    assert_int_equal(ch_hash_from_name("FNV1A32", &h), CH_EUNKNOWN);
    assert_int_equal(ch_hash_from_name("CRC32", &h), CH_EUNKNOWN);
    assert_int_equal(ch_hash_from_name("crc32", &h), CH_OK); /* twemproxy's names are registry names */
    assert_int_equal(h, CH_HASH_TW_CRC32);
    assert_int_equal(ch_hash_from_name(NULL, &h), CH_EINVAL);
    assert_int_equal(ch_hash_from_name("md5", NULL), CH_EINVAL);
    assert_null(ch_hash_name(CH_HASH_COUNT_));
    assert_int_equal(ch_hash_bits(CH_HASH_COUNT_), 0);
}

/* The registries are ABI: every value is pinned here, so a line inserted or renumbered in
 * CH_HASH_LIST or CH_ALGO_LIST fails to compile. Append a line here with each new entry. */
#define PIN(e, v) _Static_assert((e) == (v), #e " is ABI: append only, never renumber");
PIN(CH_HASH_FNV1A32_FMIX, 0) PIN(CH_HASH_FNV1A32, 1) PIN(CH_HASH_MURMUR3_32, 2)
PIN(CH_HASH_XXH3, 3) PIN(CH_HASH_MD5, 4) PIN(CH_HASH_TW_ONE_AT_A_TIME, 5) PIN(CH_HASH_TW_CRC16, 6)
PIN(CH_HASH_TW_CRC32, 7) PIN(CH_HASH_TW_CRC32A, 8) PIN(CH_HASH_TW_FNV1_64, 9)
PIN(CH_HASH_TW_FNV1A_64, 10) PIN(CH_HASH_TW_FNV1_32, 11) PIN(CH_HASH_TW_FNV1A_32, 12)
PIN(CH_HASH_TW_HSIEH, 13) PIN(CH_HASH_TW_MURMUR, 14) PIN(CH_HASH_TW_JENKINS, 15)
PIN(CH_HASH_JAVA_HASHCODE, 16) PIN(CH_HASH_MD5_64BE, 17) PIN(CH_HASH_SDBM, 18)
PIN(CH_HASH_FNV1A32_FMIX_UTF16, 19) PIN(CH_HASH_MURMUR2_64, 20) PIN(CH_HASH_SHA256_64BE, 21)
PIN(CH_HASH_COUNT_, 22)
PIN(CH_ALGO_MODULO, 0) PIN(CH_ALGO_RING, 1) PIN(CH_ALGO_RENDEZVOUS, 2) PIN(CH_ALGO_JUMP, 3)
PIN(CH_ALGO_MAGLEV, 4) PIN(CH_ALGO_KETAMA, 5) PIN(CH_ALGO_MODULA, 6) PIN(CH_ALGO_RANDOM, 7)
PIN(CH_ALGO_LIBMEMCACHED_KETAMA, 8) PIN(CH_ALGO_LIBMEMCACHED_KETAMA_SPY, 9)
PIN(CH_ALGO_JAVA_HASHCODE_RING, 10) PIN(CH_ALGO_MD5_64_RING, 11) PIN(CH_ALGO_DALLI_3, 12)
PIN(CH_ALGO_UHASHRING_2, 13) PIN(CH_ALGO_UHASHRING_KETAMA_2, 14) PIN(CH_ALGO_GROUPCACHE_0, 15)
PIN(CH_ALGO_GUAVA_31, 16)
PIN(CH_ALGO_SPYMEMCACHED_2, 17) PIN(CH_ALGO_SPYMEMCACHED_LIBMEMCACHED_2, 18)
PIN(CH_ALGO_PECL_MEMCACHE_4, 19)
PIN(CH_ALGO_HASHRING_3, 20) PIN(CH_ALGO_HASHRING_HASH_RING_3, 21)
PIN(CH_ALGO_NGINX_1, 22)
PIN(CH_ALGO_HAPROXY_2, 23)
PIN(CH_ALGO_PYMEMCACHE_3, 24)
PIN(CH_ALGO_PREDIS_1, 25) PIN(CH_ALGO_PREDIS_KETAMA_1, 26) PIN(CH_ALGO_PHPREDIS_ARRAY_5, 27)
PIN(CH_ALGO_PHPREDIS_ARRAY_RANGE_5, 28) PIN(CH_ALGO_REDIS_RB_4, 29) PIN(CH_ALGO_REDIS_RB_5, 30)
PIN(CH_ALGO_GO_REDIS_RING_5, 31) PIN(CH_ALGO_DJANGO_REDIS_SHARD_5, 32)
PIN(CH_ALGO_CACHE_MEMCACHED_1, 33) PIN(CH_ALGO_CMFAST_0, 34) PIN(CH_ALGO_PYTHON_MEMCACHED_1, 35)
PIN(CH_ALGO_GOMEMCACHE_0, 36) PIN(CH_ALGO_NODE_MEMCACHED_2, 37) PIN(CH_ALGO_MEMJS_1, 38)
PIN(CH_ALGO_ENVOY_RING_HASH_1, 39)
PIN(CH_ALGO_COUNT_, 40)
#undef PIN

/* Values are dense: each entry's value is its position in its list. */
static void test_registry_values_dense(void **state)
{
    (void)state;
    int k = 0;
#define AT(id, name, bits, value) assert_int_equal(value, k++);
    CH_HASH_LIST(AT)
#undef AT
    assert_int_equal(k, CH_HASH_COUNT_);
    k = 0;
#define AT(id, ident, name, value) assert_int_equal(value, k++);
    CH_ALGO_LIST(AT)
#undef AT
    assert_int_equal(k, CH_ALGO_COUNT_);
    assert_string_equal(ch_algo_name(CH_ALGO_DALLI_3), "dalli@3");
    assert_int_equal(ch_algo_flags(CH_ALGO_COUNT_), 0);
    assert_int_equal(ch_algo_flags(CH_ALGO_RING), CH_ALGO_F_WEIGHTED);
    assert_int_equal(ch_algo_flags(CH_ALGO_JUMP), 0);
    assert_int_equal(ch_algo_flags(CH_ALGO_MD5_64_RING), CH_ALGO_F_FIXED_HASH);
    ch_hash_id h;
    assert_int_equal(ch_algo_hash(CH_ALGO_COUNT_, &h), CH_EINVAL);
    assert_int_equal(ch_algo_hash(CH_ALGO_DALLI_3, NULL), CH_EINVAL);
}

static void test_algo_registry(void **state)
{
    (void)state;
    for (int id = 0; id < CH_ALGO_COUNT_; id++) {
        ch_algo_id back;
        assert_int_equal(ch_algo_from_name(ch_algo_name((ch_algo_id)id), &back), CH_OK);
        assert_int_equal(back, id);
    }
    ch_algo_id a;
    assert_int_equal(ch_algo_from_name("ketama-ish", &a), CH_EUNKNOWN);
    assert_int_equal(ch_algo_from_name(NULL, &a), CH_EINVAL);
    assert_null(ch_algo_name(CH_ALGO_COUNT_));
}

static void test_options_defaults(void **state)
{
    (void)state;
    ch_options o;
    ch_options_init(&o);
    assert_int_equal(o.size, sizeof(ch_options));
    assert_int_equal(o.algo, CH_ALGO_RING);
    assert_int_equal(o.hash, CH_HASH_FNV1A32_FMIX);
    assert_int_equal(o.vnodes, 160);
    assert_int_equal(o.table_size, 65537);
    assert_null(o.allocator);
}

/* An older caller whose struct ends before `vnodes` gets the defaults for the rest. */
static void test_options_older_struct(void **state)
{
    (void)state;
    tu_nodes s = tu_nodes_random(7, 4, "n");
    ch_options o;
    ch_options_init(&o);
    o.vnodes = 3; /* beyond the short size: must be ignored */
    o.size = offsetof(ch_options, vnodes);
    ch_table *t;
    assert_int_equal(ch_table_build(s.nodes, s.n, &o, &t), CH_OK);
    ch_table_info info = {.size = sizeof(info)};
    assert_int_equal(ch_table_info_get(t, &info), CH_OK);
    assert_int_equal(info.points, 4 * 160);
    ch_table_free(t);
    tu_nodes_free(&s);
}

static void test_table_info_and_nodes(void **state)
{
    (void)state;
    /* points = max(1, round(160 w)): 160, 320, 1 (0.16 rounds to 0), 80 (0.5 * 160) */
    ch_node nodes[] = {{"a", 1.0}, {"b", 2.0}, {"c", 0.001}, {"d", 0.5}};
    ch_table *t = tu_build(nodes, 4, CH_ALGO_RING, CH_HASH_DEFAULT, 160);
    ch_table_info info = {.size = sizeof(info)};
    assert_int_equal(ch_table_info_get(t, &info), CH_OK);
    assert_int_equal(info.algo, CH_ALGO_RING);
    assert_int_equal(info.hash, CH_HASH_DEFAULT);
    assert_int_equal(info.nodes, 4);
    assert_int_equal(info.points, 160 + 320 + 1 + 80);
    assert_true(info.bytes >= info.points * 8);
    assert_true(info.bytes <= info.points * 12 + 4096);
    assert_string_equal(ch_table_node_id(t, 1), "b");
    assert_true(ch_table_node_weight(t, 1) == 2.0);
    assert_null(ch_table_node_id(t, 4));
    assert_true(ch_table_node_weight(t, 4) == 0.0);
    ch_table_free(t);
    ch_table_free(NULL);
}

/* ---- ring against a brute-force reference --------------------------------------------- */

typedef struct ref_point {
    uint32_t pos;
    const char *id;
    uint32_t j;
    size_t node;
} ref_point;

static int ref_cmp(const void *a, const void *b)
{
    const ref_point *x = a, *y = b;
    if (x->pos != y->pos)
        return x->pos < y->pos ? -1 : 1;
    int c = strcmp(x->id, y->id);
    if (c != 0)
        return c;
    return x->j < y->j ? -1 : x->j > y->j;
}

/* All points of a ring, computed from the documented rule, sorted as documented. */
static ref_point *ref_ring(const ch_node *nodes, size_t n, ch_hash_id hash, uint32_t vnodes,
                           size_t *np)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        long p = lround(vnodes * nodes[i].weight);
        total += p < 1 ? 1 : (size_t)p;
    }
    ref_point *r = calloc(total, sizeof(*r));
    assert_non_null(r);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        long p = lround(vnodes * nodes[i].weight);
        for (uint32_t j = 0; j < (uint32_t)(p < 1 ? 1 : p); j++) {
            char name[96];
            int len = snprintf(name, sizeof(name), "%s#%u", nodes[i].id, j);
            uint32_t pos;
            assert_int_equal(ch_hash32(hash, name, (size_t)len, &pos), CH_OK);
            r[k++] = (ref_point){pos, nodes[i].id, j, i};
        }
    }
    qsort(r, total, sizeof(*r), ref_cmp);
    *np = total;
    return r;
}

/* Index of the first reference point with pos >= h, wrapping to 0: a linear scan. */
static size_t ref_find(const ref_point *r, size_t np, uint32_t h)
{
    for (size_t i = 0; i < np; i++)
        if (r[i].pos >= h)
            return i;
    return 0;
}

static void check_ring_against_reference(const ch_node *nodes, size_t n, ch_hash_id hash,
                                         uint32_t vnodes)
{
    ch_table *t = tu_build(nodes, n, CH_ALGO_RING, hash, vnodes);
    size_t np;
    ref_point *r = ref_ring(nodes, n, hash, vnodes, &np);

    ch_table_info info = {.size = sizeof(info)};
    ch_table_info_get(t, &info);
    assert_int_equal(info.points, np);

    /* Every boundary: each point's position, one below and one above, and the extremes. */
    for (size_t i = 0; i < np; i++) {
        uint32_t probes[3] = {r[i].pos, r[i].pos - 1, r[i].pos + 1};
        for (int p = 0; p < 3; p++)
            assert_int_equal(ch_lookup_hash(t, probes[p]), r[ref_find(r, np, probes[p])].node);
    }
    assert_int_equal(ch_lookup_hash(t, 0), r[0].node);
    assert_int_equal(ch_lookup_hash(t, UINT32_MAX), r[ref_find(r, np, UINT32_MAX)].node);
    /* A hash above the last point wraps to the first point's node. */
    if (r[np - 1].pos < UINT32_MAX)
        assert_int_equal(ch_lookup_hash(t, (uint64_t)r[np - 1].pos + 1), r[0].node);

    /* Random hashes, and replicas: the first distinct nodes walking clockwise. */
    uint64_t st = 99;
    for (int k = 0; k < 20000; k++) {
        uint32_t h = (uint32_t)tu_rand(&st);
        size_t i = ref_find(r, np, h);
        assert_int_equal(ch_lookup_hash(t, h), r[i].node);

        size_t want[4], nw = 0, got[4], ng;
        size_t rr = n < 4 ? n : 4;
        for (size_t step = 0; step < np && nw < rr; step++) {
            size_t node = r[(i + step) % np].node;
            bool seen = false;
            for (size_t q = 0; q < nw; q++)
                seen |= want[q] == node;
            if (!seen)
                want[nw++] = node;
        }
        assert_int_equal(ch_replicas_hash(t, h, 4, got, &ng), CH_OK);
        assert_int_equal(ng, nw);
        assert_memory_equal(got, want, nw * sizeof(size_t));
    }
    free(r);
    ch_table_free(t);
}

static void test_ring_matches_reference(void **state)
{
    (void)state;
    tu_nodes s = tu_nodes_random(11, 10, "cache");
    /* Every hash: raw FNV-1a clusters its points, which stresses the bucket index. */
    for (int h = 0; h < CH_HASH_COUNT_; h++)
        check_ring_against_reference(s.nodes, s.n, (ch_hash_id)h, 40);
    check_ring_against_reference(s.nodes, s.n, CH_HASH_DEFAULT, 160);
    /* Tiny rings: one node with one point; two nodes with one point each. */
    check_ring_against_reference(s.nodes, 1, CH_HASH_DEFAULT, 1);
    check_ring_against_reference(s.nodes, 2, CH_HASH_DEFAULT, 1);
    /* Weighted. */
    ch_node w[] = {{"big", 4}, {"mid", 2.5}, {"small", 0.25}, {"tiny", 0.001}};
    check_ring_against_reference(w, 4, CH_HASH_DEFAULT, 160);
    tu_nodes_free(&s);
}

typedef struct named_pos {
    uint32_t pos;
    uint64_t k;
} named_pos;

static int pos_cmp(const void *a, const void *b)
{
    const named_pos *x = a, *y = b;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Equal positions: search random ids "t<hex>" for two whose single point "t<hex>#0" lands on the
 * same 32-bit position (a birthday search: 2^18 random names give ~8 colliding pairs on average;
 * the seed is fixed, so the search is deterministic). Sequential names ("t1", "t2", ...) would
 * not do: FNV-1a over strings that differ in a few bytes collides far less than a random
 * function. Whatever the list order, the key at that position goes to the smaller id. */
static void test_ring_equal_positions(void **state)
{
    (void)state;
    enum { TRIES = 1 << 18 };
    named_pos *v = malloc(TRIES * sizeof(*v));
    assert_non_null(v);
    uint64_t st = 2026;
    for (uint32_t k = 0; k < TRIES; k++) {
        char name[32];
        v[k].k = tu_rand(&st);
        int len = snprintf(name, sizeof(name), "t%016llx#0", (unsigned long long)v[k].k);
        assert_int_equal(ch_hash32(CH_HASH_DEFAULT, name, (size_t)len, &v[k].pos), CH_OK);
    }
    qsort(v, TRIES, sizeof(*v), pos_cmp);
    size_t i = 1;
    while (i < TRIES && v[i].pos != v[i - 1].pos)
        i++;
    char a[32], b[32];
    if (i < TRIES) {
        snprintf(a, sizeof(a), "t%016llx", (unsigned long long)v[i - 1].k);
        snprintf(b, sizeof(b), "t%016llx", (unsigned long long)v[i].k);
    }
    uint32_t pos = i < TRIES ? v[i].pos : 0;
    free(v);
    assert_true(i < TRIES); /* P(no pair among 2^18 random names) = e^-8 */

    const char *smaller = strcmp(a, b) < 0 ? a : b;
    ch_node fwd[] = {{a, 1}, {b, 1}}, rev[] = {{b, 1}, {a, 1}};
    ch_table *x = tu_build(fwd, 2, CH_ALGO_RING, CH_HASH_DEFAULT, 1);
    ch_table *y = tu_build(rev, 2, CH_ALGO_RING, CH_HASH_DEFAULT, 1);
    assert_string_equal(ch_table_node_id(x, ch_lookup_hash(x, pos)), smaller);
    assert_string_equal(ch_table_node_id(y, ch_lookup_hash(y, pos)), smaller);
    ch_table_free(x);
    ch_table_free(y);
}

/* The ring, rendezvous and maglev do not depend on the order of the node list. */
static void test_ring_independent_of_list_order(void **state)
{
    (void)state;
    tu_nodes s = tu_nodes_random(5, 12, "r");
    ch_node rev[12];
    for (size_t i = 0; i < 12; i++)
        rev[i] = s.nodes[11 - i];
    ch_algo_id algos[] = {CH_ALGO_RING, CH_ALGO_RENDEZVOUS, CH_ALGO_MAGLEV};
    for (size_t a = 0; a < 3; a++) {
        ch_table *x = tu_build(s.nodes, 12, algos[a], CH_HASH_DEFAULT, 160);
        ch_table *y = tu_build(rev, 12, algos[a], CH_HASH_DEFAULT, 160);
        char key[48];
        for (size_t k = 0; k < 20000; k++) {
            size_t len = tu_key(key, 3, k);
            assert_string_equal(ch_table_node_id(x, ch_lookup(x, key, len)),
                                ch_table_node_id(y, ch_lookup(y, key, len)));
        }
        ch_table_free(x);
        ch_table_free(y);
    }
    tu_nodes_free(&s);
}

static void test_lookup_equals_lookup_hash(void **state)
{
    (void)state;
    tu_nodes s = tu_nodes_random(8, 6, "k");
    for (int a = 0; a < CH_ALGO_COUNT_; a++) {
        if (ch_algo_flags((ch_algo_id)a) & CH_ALGO_F_KEYED)
            continue; /* no key hash: tested in test_keyed_scheme */
        ch_table *t = tu_build(s.nodes, s.n, (ch_algo_id)a, CH_HASH_XXH3, 160);
        /* A scheme that fixes its hash uses it whatever the options say. */
        ch_hash_id hash = CH_HASH_XXH3;
        if (ch_algo_flags((ch_algo_id)a) & CH_ALGO_F_FIXED_HASH)
            assert_int_equal(ch_algo_hash((ch_algo_id)a, &hash), CH_OK);
        else
            assert_int_equal(ch_algo_hash((ch_algo_id)a, &hash), CH_EUNSUPPORTED);
        ch_table_info info = {.size = sizeof(info)};
        assert_int_equal(ch_table_info_get(t, &info), CH_OK);
        assert_int_equal(info.hash, hash);
        char key[48];
        for (size_t k = 0; k < 1000; k++) {
            size_t len = tu_key(key, 1, k);
            uint64_t h;
            assert_int_equal(ch_hash64(hash, key, len, &h), CH_OK);
            /* dalli@3's and cache_memcached@1's key hashes carry the key's length above their
             * 32-bit crc32 (their retries' hashes derive from both); lookups read the low 32
             * bits. */
            if (a == CH_ALGO_DALLI_3 || a == CH_ALGO_CACHE_MEMCACHED_1)
                h |= (uint64_t)len << 32;
            assert_int_equal(ch_key_hash(t, key, len), h);
            assert_int_equal(ch_lookup(t, key, len), ch_lookup_hash(t, h));
            assert_true(ch_lookup(t, key, len) < s.n);
        }
        ch_table_free(t);
    }
    tu_nodes_free(&s);
}

/* pymemcache@3 places by the key itself: ch_lookup() is its placement, ch_lookup_hash() is
 * h % N, it has no walk, and routing refuses it. */
static void test_keyed_scheme(void **state)
{
    (void)state;
    assert_int_equal(ch_algo_flags(CH_ALGO_PYMEMCACHE_3),
                     CH_ALGO_F_FIXED_HASH | CH_ALGO_F_ADDR_IDS | CH_ALGO_F_KEYED);
    tu_nodes s = tu_nodes_random(3, 5, "mc");
    ch_table *t = tu_build(s.nodes, s.n, CH_ALGO_PYMEMCACHE_3, CH_HASH_DEFAULT, 160);
    assert_int_equal(ch_lookup_hash(t, 12), 12 % 5);
    size_t out[2], n;
    assert_int_equal(ch_replicas(t, "k", 1, 2, out, &n), CH_EUNSUPPORTED);
    size_t seen[5] = {0};
    char key[48];
    for (size_t k = 0; k < 2000; k++)
        seen[ch_lookup(t, key, tu_key(key, 4, k))]++;
    for (size_t i = 0; i < 5; i++)
        assert_true(seen[i] > 300); /* rendezvous spreads keys */
    ch_table_free(t);
    ch_member m[2] = {{.id = "a:1", .addr = "a:1", .weight = 1}, {.id = "b:1", .addr = "b:1", .weight = 1}};
    ch_options o;
    ch_options_init(&o);
    o.algo = CH_ALGO_PYMEMCACHE_3;
    ch_membership *ms = NULL;
    assert_int_equal(ch_membership_build(m, 2, &o, NULL, &ms), CH_EUNSUPPORTED);
    assert_null(ms);
    tu_nodes_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_codes),
        cmocka_unit_test(test_hash_registry),
        cmocka_unit_test(test_algo_registry),
        cmocka_unit_test(test_registry_values_dense),
        cmocka_unit_test(test_keyed_scheme),
        cmocka_unit_test(test_options_defaults),
        cmocka_unit_test(test_options_older_struct),
        cmocka_unit_test(test_table_info_and_nodes),
        cmocka_unit_test(test_ring_matches_reference),
        cmocka_unit_test(test_ring_equal_positions),
        cmocka_unit_test(test_ring_independent_of_list_order),
        cmocka_unit_test(test_lookup_equals_lookup_hash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_compat_algos.c — the defining properties of the compatible placements (ketama, modula,
 * random, libmemcached_ketama, libmemcached_ketama_spy) and of hash tags, each checked against
 * its definition in include/chash.h recomputed here from first principles (MD5 via libmd, slot
 * arithmetic). Exact agreement with the real peers is proven in tests/compat/.
 */
#include "testutil.h"

#include <math.h>
#include <stdbool.h>
#include <md5.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

static ch_table *build_tag(const ch_node *nodes, size_t n, ch_algo_id algo, ch_hash_id hash,
                           const char *tag)
{
    ch_options o;
    ch_options_init(&o);
    o.algo = algo;
    o.hash = hash;
    if (tag)
        memcpy(o.hash_tag, tag, 2);
    ch_table *t = NULL;
    assert_int_equal(ch_table_build(nodes, n, &o, &t), CH_OK);
    return t;
}

/* 4 * floorf(w_i / W * 160 / 4 * N), in float, as the header states. */
static size_t ketama_points(const ch_node *nodes, size_t n, size_t i)
{
    float W = 0;
    for (size_t j = 0; j < n; j++)
        W += (float)nodes[j].weight;
    float x = (float)nodes[i].weight / W * 160.0f / 4.0f * (float)n;
    return (size_t)floorf(x) * 4;
}

/* The owner under the definition: first point >= h (wrapping), points from MD5("<p>-<k>"),
 * ties to the earlier node. O(P) per key: a reference, not a lookup. */
static size_t ketama_reference(const ch_node *nodes, size_t n, char **prefix, uint32_t h)
{
    size_t best = SIZE_MAX, first = SIZE_MAX;
    uint32_t best_pos = 0, first_pos = UINT32_MAX;
    for (size_t i = 0; i < n; i++) {
        size_t groups = ketama_points(nodes, n, i) / 4;
        for (size_t k = 0; k < groups; k++) {
            char s[300];
            int len = snprintf(s, sizeof(s), "%s-%zu", prefix[i], k);
            unsigned char d[16];
            MD5_CTX c;
            MD5Init(&c);
            MD5Update(&c, (const unsigned char *)s, (size_t)len);
            MD5Final(d, &c);
            for (int x = 0; x < 4; x++) {
                uint32_t pos = (uint32_t)d[4 * x] | (uint32_t)d[4 * x + 1] << 8 |
                               (uint32_t)d[4 * x + 2] << 16 | (uint32_t)d[4 * x + 3] << 24;
                if (pos >= h && (best == SIZE_MAX || pos < best_pos)) {
                    best = i;
                    best_pos = pos;
                }
                if (pos < first_pos) {
                    first = i;
                    first_pos = pos;
                }
            }
        }
    }
    return best != SIZE_MAX ? best : first;
}

static void check_ketama_family(ch_algo_id algo, const ch_node *nodes, size_t n, char **prefix)
{
    ch_table *t = build_tag(nodes, n, algo, CH_HASH_MD5, NULL);
    ch_table_info info = {.size = sizeof(info)};
    assert_int_equal(ch_table_info_get(t, &info), CH_OK);
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += ketama_points(nodes, n, i);
    assert_int_equal(info.points, total);
    uint64_t st = 7;
    for (int k = 0; k < 3000; k++) {
        uint32_t h = (uint32_t)tu_rand(&st);
        assert_int_equal(ch_lookup_hash(t, h), ketama_reference(nodes, n, prefix, h));
    }
    ch_table_free(t);
}

static void test_ketama_definition(void **state)
{
    (void)state;
    ch_node nodes[] = {{"cache-a", 1}, {"10.0.0.2", 3}, {"10.0.0.3:6379", 2}, {"z", 1}};
    char *ids[] = {"cache-a", "10.0.0.2", "10.0.0.3:6379", "z"};
    check_ketama_family(CH_ALGO_KETAMA, nodes, 4, ids);

    /* libmemcached: the port 11211 is dropped, other ports kept; spy: "/host:port". */
    ch_node lm[] = {{"10.0.0.1:11211", 1}, {"cache-b:22122", 2}, {"cache-c", 1}};
    char *lm_prefix[] = {"10.0.0.1", "cache-b:22122", "cache-c"};
    check_ketama_family(CH_ALGO_LIBMEMCACHED_KETAMA, lm, 3, lm_prefix);
    char *spy_prefix[] = {"/10.0.0.1:11211", "/cache-b:22122", "/cache-c:11211"};
    check_ketama_family(CH_ALGO_LIBMEMCACHED_KETAMA_SPY, lm, 3, spy_prefix);
}

/* Float rounding decides the point count: 25 nodes of weight 1 give
 * (float)(1/25) * 160 / 4 * 25 = 39.99999 -> 156 points each, not the 160 exact arithmetic gives
 * (the peers compute in float too; tests/compat proves they agree). */
static void test_ketama_float_points(void **state)
{
    (void)state;
    tu_nodes s = tu_nodes_random(3, 25, "n");
    ch_table *t = build_tag(s.nodes, s.n, CH_ALGO_KETAMA, CH_HASH_MD5, NULL);
    ch_table_info info = {.size = sizeof(info)};
    assert_int_equal(ch_table_info_get(t, &info), CH_OK);
    assert_int_equal(ketama_points(s.nodes, s.n, 0), 156);
    assert_int_equal(info.points, 25 * 156);
    ch_table_free(t);
    tu_nodes_free(&s);
}

/* modula: slot h % m of round(w_i) consecutive slots per node in list order. */
static void test_modula_slots(void **state)
{
    (void)state;
    ch_node nodes[] = {{"a", 2}, {"b", 1}, {"c", 3.4}, {"d", 0.2}};
    size_t slots[] = {2, 1, 3, 1}, owner[7], m = 0;
    for (size_t i = 0; i < 4; i++)
        for (size_t s = 0; s < slots[i]; s++)
            owner[m++] = i;
    ch_table *t = build_tag(nodes, 4, CH_ALGO_MODULA, CH_HASH_DEFAULT, NULL);
    uint64_t st = 11;
    for (int k = 0; k < 10000; k++) {
        uint64_t h = tu_rand(&st);
        assert_int_equal(ch_lookup_hash(t, h), owner[(uint32_t)h % m]);
    }
    ch_table_free(t);
}

/* random: node h % N for the value given, whatever the weights. */
static void test_random_draw(void **state)
{
    (void)state;
    ch_node nodes[] = {{"a", 5}, {"b", 1}, {"c", 1}};
    ch_table *t = build_tag(nodes, 3, CH_ALGO_RANDOM, CH_HASH_DEFAULT, NULL);
    for (uint64_t h = 0; h < 1000; h++)
        assert_int_equal(ch_lookup_hash(t, h), h % 3);
    ch_table_free(t);
}

/* An empty key hashes to 0 under the twemproxy placements only. */
static void test_empty_key(void **state)
{
    (void)state;
    ch_node nodes[] = {{"a", 1}, {"b", 1}};
    ch_algo_id tw[] = {CH_ALGO_KETAMA, CH_ALGO_MODULA, CH_ALGO_RANDOM};
    for (size_t a = 0; a < 3; a++) {
        ch_table *t = build_tag(nodes, 2, tw[a], CH_HASH_TW_FNV1A_32, NULL);
        assert_int_equal(ch_key_hash(t, "", 0), 0);
        assert_int_equal(ch_lookup(t, "", 0), ch_lookup_hash(t, 0));
        ch_table_free(t);
    }
    uint32_t h;
    ch_table *t = build_tag(nodes, 2, CH_ALGO_RING, CH_HASH_TW_FNV1A_32, NULL);
    assert_int_equal(ch_hash32(CH_HASH_TW_FNV1A_32, "", 0, &h), CH_OK);
    assert_int_equal(ch_key_hash(t, "", 0), h);
    ch_table_free(t);
}

/* hash_tag: the text between the first open and the next close after it, when non-empty. */
static void test_hash_tag(void **state)
{
    (void)state;
    ch_node nodes[] = {{"a", 1}, {"b", 1}, {"c", 1}};
    ch_table *t = build_tag(nodes, 3, CH_ALGO_RING, CH_HASH_DEFAULT, "{}");
    ch_table *plain = build_tag(nodes, 3, CH_ALGO_RING, CH_HASH_DEFAULT, NULL);
    static const struct {
        const char *key, *hashed;
    } cases[] = {
        {"{user1}:x", "user1"},    {"a{b}c", "b"},        {"{}x", "{}x"},
        {"{unclosed", "{unclosed"}, {"}{x}", "x"},         {"x{a}{b}", "a"},
        {"{{a}}", "{a"},           {"no tag", "no tag"}, {"{}{a}", "{}{a}"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        uint64_t want = ch_key_hash(plain, cases[i].hashed, strlen(cases[i].hashed));
        assert_int_equal(ch_key_hash(t, cases[i].key, strlen(cases[i].key)), want);
    }
    ch_table_free(plain);
    ch_table_free(t);

    /* Equal open and close characters work as twemproxy's search does. */
    t = build_tag(nodes, 3, CH_ALGO_RING, CH_HASH_DEFAULT, "::");
    plain = build_tag(nodes, 3, CH_ALGO_RING, CH_HASH_DEFAULT, NULL);
    assert_int_equal(ch_key_hash(t, "a:bc:d", 6), ch_key_hash(plain, "bc", 2));
    ch_table_free(plain);
    ch_table_free(t);

    /* Half a tag is refused. */
    ch_options o;
    ch_options_init(&o);
    o.hash_tag[0] = '{';
    ch_table *bad = NULL;
    assert_int_equal(ch_table_build(nodes, 3, &o, &bad), CH_EINVAL);
    assert_null(bad);
}

/* Replica walks of the compat placements list distinct nodes, owner first. */
static void test_compat_replicas(void **state)
{
    (void)state;
    tu_nodes s = tu_nodes_random(5, 6, "r");
    ch_algo_id algos[] = {CH_ALGO_KETAMA, CH_ALGO_MODULA, CH_ALGO_RANDOM,
                          CH_ALGO_LIBMEMCACHED_KETAMA, CH_ALGO_LIBMEMCACHED_KETAMA_SPY};
    for (size_t a = 0; a < sizeof(algos) / sizeof(*algos); a++) {
        ch_table *t = build_tag(s.nodes, s.n, algos[a], CH_HASH_MD5, NULL);
        for (int k = 0; k < 500; k++) {
            char key[32];
            int len = snprintf(key, sizeof(key), "key-%d", k);
            size_t out[6], count = 0;
            assert_int_equal(ch_replicas(t, key, (size_t)len, 6, out, &count), CH_OK);
            assert_int_equal(count, 6);
            assert_int_equal(out[0], ch_lookup(t, key, (size_t)len));
            for (size_t i = 0; i < count; i++)
                for (size_t j = i + 1; j < count; j++)
                    assert_true(out[i] != out[j]);
        }
        ch_table_free(t);
    }
    tu_nodes_free(&s);
}

/* dalli@3's walk is Dalli's retry order from its definition: try 0 the key's crc32, try t >= 1
 * crc32("<t-1><key>") computed here directly (the walk derives it from the key hash), 20 tries,
 * then the ring's walk; and ch_route with servers down picks the first up server of that order.
 * Keys of every length 0..300 and every byte value check the CRC arithmetic. */
static void test_dalli_retries(void **state)
{
    (void)state;
    ch_node nodes[5] = {{"10.0.0.1:11211", 1}, {"10.0.0.2:11211", 2}, {"10.0.0.3:11211", 1},
                        {"10.0.0.4:11211", 1}, {"10.0.0.5:11211", 3}};
    ch_options o;
    ch_options_init(&o);
    o.algo = CH_ALGO_DALLI_3;
    ch_table *t = NULL;
    assert_int_equal(ch_table_build(nodes, 5, &o, &t), CH_OK);
    char key[301], buf[320];
    for (size_t len = 0; len <= 300; len++) {
        for (int rep = 0; rep < 4; rep++) {
            for (size_t i = 0; i < len; i++)
                key[i] = (char)((i * 131 + len * 7 + (size_t)rep * 61) & 255);
            /* Dalli's order, deduplicated, as the walk lists it. */
            size_t want[5], nwant = 0;
            for (unsigned try = 0; try < 20; try++) {
                size_t n = 0;
                if (try > 0)
                    n = (size_t)snprintf(buf, 12, "%u", try - 1);
                memcpy(buf + n, key, len);
                uint32_t crc;
                assert_int_equal(ch_hash32(CH_HASH_TW_CRC32A, buf, n + len, &crc), CH_OK);
                size_t node = ch_lookup_hash(t, crc);
                bool seen = false;
                for (size_t j = 0; j < nwant; j++)
                    seen = seen || want[j] == node;
                if (!seen)
                    want[nwant++] = node;
            }
            size_t out[5], count = 0;
            assert_int_equal(ch_replicas(t, key, len, 5, out, &count), CH_OK);
            assert_int_equal(count, 5); /* the ring's walk after the tries reaches every node */
            for (size_t j = 0; j < nwant; j++)
                assert_int_equal(out[j], want[j]);
        }
    }
    ch_table_free(t);
}

/* pecl_memcache@4 from its definition: the key prepared (250 bytes at most, bytes <= 0x20 made
 * '_') and hashed; the walk PECL's failover order, hash("<prepared key>-<i>") for i < 20 after
 * the key's own, computed here directly, then the ring's walk; for crc32 and fnv. */
static void test_pecl_retries(void **state)
{
    (void)state;
    ch_node nodes[4] = {{"10.0.0.1:11211", 1}, {"10.0.0.2:11211", 2}, {"10.0.0.3:11211", 1},
                        {"10.0.0.4:11211", 3}};
    ch_hash_id hashes[2] = {CH_HASH_TW_CRC32A, CH_HASH_TW_FNV1A_32};
    for (size_t hi = 0; hi < 2; hi++) {
        ch_options o;
        ch_options_init(&o);
        o.algo = CH_ALGO_PECL_MEMCACHE_4;
        o.hash = hashes[hi];
        ch_table *t = NULL;
        assert_int_equal(ch_table_build(nodes, 4, &o, &t), CH_OK);
        char key[400], prep[270];
        for (size_t len = 1; len <= 400; len += (len < 260 ? 1 : 7)) {
            for (size_t i = 0; i < len; i++)
                key[i] = (char)((i * 97 + len * 13) % 70); /* bytes <= 0x20 among them */
            size_t plen = len < 250 ? len : 250;
            for (size_t i = 0; i < plen; i++)
                prep[i] = (unsigned char)key[i] > 0x20 ? key[i] : '_';
            uint64_t h;
            assert_int_equal(ch_hash64(hashes[hi], prep, plen, &h), CH_OK);
            assert_int_equal(ch_key_hash(t, key, len), h);
            size_t want[4], nwant = 0;
            for (unsigned try = 0; try < 21; try++) {
                size_t n = plen;
                if (try > 0)
                    n += (size_t)snprintf(prep + plen, 16, "-%u", try - 1);
                assert_int_equal(ch_hash64(hashes[hi], prep, n, &h), CH_OK);
                size_t node = ch_lookup_hash(t, h);
                bool seen = false;
                for (size_t j = 0; j < nwant; j++)
                    seen = seen || want[j] == node;
                if (!seen)
                    want[nwant++] = node;
            }
            size_t out[4], count = 0;
            assert_int_equal(ch_replicas(t, key, len, 4, out, &count), CH_OK);
            assert_int_equal(count, 4);
            for (size_t j = 0; j < nwant; j++)
                assert_int_equal(out[j], want[j]);
        }
        /* One byte to prepare (0x00, 0x20, 0x21 which stays) at every place of keys of bytes
         * above 0x20 and >= 0x80 (the 8-byte test must miss none), and none at all. */
        const unsigned char lows[] = {0x00, 0x20, 0x21, 0x7f};
        for (size_t len = 1; len <= 260; len++) {
            for (size_t at = 0; at <= len; at++) {
                for (size_t l = 0; l < sizeof(lows); l++) {
                    for (size_t i = 0; i < len; i++)
                        key[i] = (char)(i % 3 ? 0xc3 + i % 50 : 0x21 + i % 90);
                    if (at < len)
                        key[at] = (char)lows[l];
                    size_t plen = len < 250 ? len : 250;
                    for (size_t i = 0; i < plen; i++)
                        prep[i] = (unsigned char)key[i] > 0x20 ? key[i] : '_';
                    uint64_t h;
                    assert_int_equal(ch_hash64(hashes[hi], prep, plen, &h), CH_OK);
                    assert_int_equal(ch_key_hash(t, key, len), h);
                }
            }
        }
        ch_table_free(t);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ketama_definition), cmocka_unit_test(test_ketama_float_points),
        cmocka_unit_test(test_modula_slots),      cmocka_unit_test(test_random_draw),
        cmocka_unit_test(test_empty_key),         cmocka_unit_test(test_hash_tag),
        cmocka_unit_test(test_compat_replicas),   cmocka_unit_test(test_dalli_retries),
        cmocka_unit_test(test_pecl_retries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

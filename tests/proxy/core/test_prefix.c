/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_prefix.c — the prefix table of a listener's routes (proxy/route_prefix.h) in process:
 * pools in memory with only their config, no loop, no socket. Each key's pool and strip are
 * checked against a naive oracle written here: the longest prefix of the config's route list
 * that the key starts with (a linear scan of every route), else the catch-all, else the
 * listener. Fixed cases (the longest wins whatever the order, a key shorter than a prefix, the
 * empty key, bytes above 0x7f, no catch-all), then a seeded walk of random route sets whose
 * prefixes share first bytes and random keys built from them.
 */
#include "pool.h"
#include "route_prefix.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NPOOLS 5
static const px_codec codec; /* the pools' protocol: only compared */
static ch_conf_pool confs[NPOOLS];
static px_pool pools[NPOOLS];
static const char *names[NPOOLS] = {"front", "a", "b", "c", "d"};

/* pools[0] is the listener, with routes[0, n). */
static void setup_pools(ch_conf_route *routes, size_t n)
{
    memset(confs, 0, sizeof(confs));
    memset(pools, 0, sizeof(pools));
    for (size_t i = 0; i < NPOOLS; i++) {
        confs[i].name = (char *)names[i];
        pools[i].conf = &confs[i];
        pools[i].codec = &codec;
    }
    confs[0].routes = routes;
    confs[0].nroutes = n;
}

/* The oracle: the pool index and strip of key under routes[0, n). */
static size_t oracle(const ch_conf_route *routes, size_t n, const char *key, size_t len,
                     size_t *strip)
{
    const ch_conf_route *best = NULL, *all = NULL;
    for (size_t i = 0; i < n; i++) {
        const ch_conf_route *r = &routes[i];
        if (r->prefix_len == 0)
            all = r;
        else if (r->prefix_len <= len && memcmp(r->prefix, key, r->prefix_len) == 0 &&
                 (best == NULL || r->prefix_len > best->prefix_len))
            best = r;
    }
    const ch_conf_route *r = best != NULL ? best : all;
    *strip = best != NULL && best->strip ? best->prefix_len : 0;
    if (r == NULL)
        return 0;
    for (size_t i = 0; i < NPOOLS; i++)
        if (strcmp(names[i], r->pool) == 0)
            return i;
    return SIZE_MAX;
}

static void check(ch_conf_route *routes, size_t n, const char *key, size_t len)
{
    bool err = true;
    px_prefix *t = px_prefix_build(&pools[0], pools, NPOOLS, &err);
    assert_false(err);
    assert_non_null(t);
    size_t want_strip = 0, strip = 99;
    size_t want = oracle(routes, n, key, len, &want_strip);
    px_pool *got = px_prefix_match(t, key, len, &strip);
    assert_ptr_equal(got, &pools[want]);
    assert_int_equal(strip, want_strip);
    px_prefix_free(t);
}

#define R(p, pool, strip) {(char *)(p), sizeof(p) - 1, (char *)(pool), strip, 0, 0, 0, 0}

static void test_fixed(void **state)
{
    (void)state;
    ch_conf_route routes[] = {
        R("user:", "a", false), R("sess:", "b", true), R("user:vip:", "c", false),
        R("u", "d", true),      R("\xc3\xa9t\xc3\xa9:", "b", false), R("", "c", false),
    };
    size_t n = sizeof(routes) / sizeof(routes[0]);
    setup_pools(routes, n);
    const char *keys[] = {"user:1", "user:vip:1", "user:vip", "user", "u", "", "sess:", "sess",
                          "other", "\xc3\xa9t\xc3\xa9:x", "\xc3\xa9t\xc3", "us", "user:vip:"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        check(routes, n, keys[i], strlen(keys[i]));
    /* Without a catch-all, a key matching nothing stays on the listener. */
    setup_pools(routes, n - 1);
    size_t strip = 0;
    bool err = true;
    px_prefix *t = px_prefix_build(&pools[0], pools, NPOOLS, &err);
    assert_ptr_equal(px_prefix_match(t, "zzz", 3, &strip), &pools[0]);
    assert_ptr_equal(px_prefix_default(t), &pools[0]);
    px_prefix_free(t);
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        check(routes, n - 1, keys[i], strlen(keys[i]));
}

static void test_unknown_pool_is_an_error(void **state)
{
    (void)state;
    ch_conf_route routes[] = {R("x", "nosuch", false)};
    setup_pools(routes, 1);
    bool err = false;
    assert_null(px_prefix_build(&pools[0], pools, NPOOLS, &err));
    assert_true(err);
    setup_pools(NULL, 0);
    assert_null(px_prefix_build(&pools[0], pools, NPOOLS, &err));
    assert_false(err);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next_u32(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

/* Random route sets over a 3-letter alphabet (prefixes share first bytes and nest), random
 * keys made of a prefix and a random tail or of random bytes. */
static void test_random_walk(void **state)
{
    (void)state;
    static char bytes[64][8];
    ch_conf_route routes[64];
    for (int round = 0; round < 2000; round++) {
        size_t n = 1 + next_u32() % 40, m = 0;
        for (size_t i = 0; i < n; i++) {
            size_t len = next_u32() % 6; /* 0: a catch-all, kept only once */
            for (size_t k = 0; k < len; k++)
                bytes[m][k] = "abc"[next_u32() % 3];
            bool dup = false;
            for (size_t j = 0; j < m; j++)
                dup |= routes[j].prefix_len == len && memcmp(routes[j].prefix, bytes[m], len) == 0;
            if (dup)
                continue;
            routes[m] = (ch_conf_route){bytes[m], len, (char *)names[1 + next_u32() % 4],
                                        len > 0 && next_u32() % 2 == 0, 0, 0, 0, 0};
            m++;
        }
        setup_pools(routes, m);
        for (int q = 0; q < 50; q++) {
            char key[16];
            size_t len = 0;
            if (next_u32() % 2 == 0 && m > 0) {
                const ch_conf_route *r = &routes[next_u32() % m];
                memcpy(key, r->prefix, r->prefix_len);
                len = r->prefix_len;
            }
            size_t tail = next_u32() % 4;
            for (size_t k = 0; k < tail; k++)
                key[len++] = "abcz"[next_u32() % 4];
            check(routes, m, key, len);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed),
        cmocka_unit_test(test_unknown_pool_is_an_error),
        cmocka_unit_test(test_random_walk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

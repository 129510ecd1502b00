/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_near.c — the near cache (src/hot/near.h) on a clock the test sets. What must hold:
 *
 *   - an entry filled by a read sent at t serves until t + ttl and never at or after it, nor
 *     at or after t + its own life when that is shorter;
 *   - a write's invalidation (through any thread) ends every entry of its key at once, and a
 *     reply from a read sent before the invalidation is refused; invalidating all does so for
 *     every key;
 *   - the bytes held never exceed max_bytes, and the least recently used entry goes first;
 *   - a key is one entry (a put replaces), whatever the table's growth.
 */
#include "hot/near.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#define MS 1000000ull

/* A key's hash: any fixed function of its bytes will do for the store (the proxy passes the
 * pool's key hash); FNV-1a 64, spread to the top bits the generations use. */
static uint64_t kh_of(const char *key)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *p = key; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    return h ^ (h >> 29) ^ (h << 31);
}

/* A put of an entry living at most life from its read's send (and the TTL). */
static bool put_life(ch__near *c, ch__near_gens *g, const char *key, const char *reply,
                     uint64_t sent, uint64_t life, uint64_t now)
{
    uint64_t kh = kh_of(key);
    return ch__near_put(c, kh, key, strlen(key), ch__near_gen(g, kh), sent, life, now, reply,
                        strlen(reply));
}

static bool put(ch__near *c, ch__near_gens *g, const char *key, const char *reply, uint64_t sent,
                uint64_t now)
{
    return put_life(c, g, key, reply, sent, UINT64_MAX, now);
}

/* The reply served for key at now, as a string ("" when none). */
static const char *get(ch__near *c, const char *key, uint64_t now)
{
    static char buf[256];
    size_t len = 0;
    const char *p = ch__near_get(c, kh_of(key), key, strlen(key), now, &len, NULL);
    if (p == NULL)
        return "";
    snprintf(buf, sizeof(buf), "%.*s", (int)len, p);
    return buf;
}

static void ttl_bound(void **state)
{
    (void)state;
    ch__near_gens *g = ch__near_gens_new();
    ch__near *c = ch__near_new(g, 1 << 20, 1000 * MS);
    assert_true(put(c, g, "k", "$1\r\nv\r\n", 10 * MS, 11 * MS));
    assert_string_equal(get(c, "k", 11 * MS), "$1\r\nv\r\n");
    assert_string_equal(get(c, "k", 1010 * MS - 1), "$1\r\nv\r\n");
    assert_string_equal(get(c, "k", 1010 * MS), ""); /* sent at 10 ms + 1 s: never served */
    assert_string_equal(get(c, "k", 1011 * MS), "");
    /* a reply that arrives after its read's TTL is over is not stored */
    assert_false(put(c, g, "k", "$1\r\nv\r\n", 10 * MS, 1010 * MS));
    ch__near_stats st;
    ch__near_stats_get(c, &st);
    assert_int_equal(st.hits, 2);
    assert_int_equal(st.expired, 2); /* each get of the expired entry */
    assert_int_equal(st.entries, 1); /* kept, never served: the key was hot lately */
    size_t len;
    bool known = false;
    assert_null(ch__near_get(c, kh_of("k"), "k", 1, 1012 * MS, &len, &known));
    assert_true(known);
    assert_null(ch__near_get(c, kh_of("x"), "x", 1, 1012 * MS, &len, &known));
    assert_false(known);
    /* a refill replaces it */
    assert_true(put(c, g, "k", "$1\r\nw\r\n", 1100 * MS, 1101 * MS));
    assert_string_equal(get(c, "k", 1102 * MS), "$1\r\nw\r\n");
    ch__near_free(c);
    ch__near_gens_free(g);
}

static void invalidation(void **state)
{
    (void)state;
    ch__near_gens *g = ch__near_gens_new();
    ch__near *c = ch__near_new(g, 1 << 20, 1000 * MS);
    assert_true(put(c, g, "k", "old", 0, 1));
    ch__near_invalidate(g, kh_of("k")); /* a write of k is sent */
    assert_string_equal(get(c, "k", 2), "");
    /* a read sent before the write was answered: its reply may be the old value */
    uint64_t kh = kh_of("k");
    uint32_t gen = ch__near_gen(g, kh);
    ch__near_invalidate(g, kh); /* the write is answered */
    assert_false(ch__near_put(c, kh, "k", 1, gen, 3, UINT64_MAX, 4, "old", 3));
    assert_string_equal(get(c, "k", 5), "");
    /* a read sent after it: stored and served */
    assert_true(put(c, g, "k", "new", 6, 7));
    assert_string_equal(get(c, "k", 8), "new");
    /* other keys are untouched unless they share k's bucket */
    assert_true(put(c, g, "other", "x", 9, 10));
    ch__near_invalidate(g, kh);
    if ((kh_of("other") >> (64 - CH__NEAR_GEN_BITS)) != (kh >> (64 - CH__NEAR_GEN_BITS)))
        assert_string_equal(get(c, "other", 11), "x");
    assert_string_equal(get(c, "k", 11), "");
    ch__near_free(c);
    ch__near_gens_free(g);
}

/* An entry's own life (a memcached item's remaining TTL) bounds it below the TTL; above it,
 * the TTL still does. */
static void life_bound(void **state)
{
    (void)state;
    ch__near_gens *g = ch__near_gens_new();
    ch__near *c = ch__near_new(g, 1 << 20, 1000 * MS);
    assert_true(put_life(c, g, "k", "v", 10 * MS, 200 * MS, 11 * MS));
    assert_string_equal(get(c, "k", 210 * MS - 1), "v");
    assert_string_equal(get(c, "k", 210 * MS), "");
    assert_true(put_life(c, g, "k", "w", 300 * MS, 5000 * MS, 301 * MS));
    assert_string_equal(get(c, "k", 1300 * MS - 1), "w");
    assert_string_equal(get(c, "k", 1300 * MS), "");
    /* a life over by the time the reply comes (or none left: an item expiring now) */
    assert_false(put_life(c, g, "k", "x", 2000 * MS, 5 * MS, 2005 * MS));
    assert_false(put_life(c, g, "k", "x", 2000 * MS, 0, 2000 * MS));
    ch__near_free(c);
    ch__near_gens_free(g);
}

/* Invalidating every key (a script's undeclared keys) ends every entry, and refuses every
 * reply of a read sent before it. */
static void invalidation_of_all(void **state)
{
    (void)state;
    ch__near_gens *g = ch__near_gens_new();
    ch__near *c = ch__near_new(g, 1 << 20, 1000 * MS);
    char key[16];
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        assert_true(put(c, g, key, "old", 1, 2));
    }
    uint64_t kh = kh_of("k0");
    uint32_t gen = ch__near_gen(g, kh);
    ch__near_invalidate_all(g);
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        assert_string_equal(get(c, key, 3), "");
    }
    assert_false(ch__near_put(c, kh, "k0", 2, gen, 2, UINT64_MAX, 4, "old", 3));
    assert_true(put(c, g, "k0", "new", 5, 6));
    assert_string_equal(get(c, "k0", 7), "new");
    ch__near_free(c);
    ch__near_gens_free(g);
}

static void memory_bound(void **state)
{
    (void)state;
    ch__near_gens *g = ch__near_gens_new();
    enum { MAX = 64 * 1024 };
    ch__near *c = ch__near_new(g, MAX, 1000 * MS);
    char key[32], reply[200];
    memset(reply, 'v', sizeof(reply) - 1);
    reply[sizeof(reply) - 1] = '\0';
    ch__near_stats st;
    for (int i = 0; i < 2000; i++) {
        snprintf(key, sizeof(key), "key:%d", i);
        assert_true(put(c, g, key, reply, 1, 1));
        if (i >= 1) /* key:0 is read after every put: the most recently used, never evicted */
            assert_string_equal(get(c, "key:0", 2), reply);
        ch__near_stats_get(c, &st);
        assert_true(st.bytes <= MAX);
    }
    assert_true(st.evictions > 0);
    assert_true(st.bytes > MAX - 2 * 300); /* eviction makes room, no more: an entry is < 300 */
    assert_string_equal(get(c, "key:1", 2), ""); /* the least recently used went first */
    assert_string_equal(get(c, "key:1999", 2), reply);
    /* an entry larger than an eighth of the bound is refused */
    static char big[MAX / 8];
    memset(big, 'b', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_false(put(c, g, "big", big, 1, 1));
    ch__near_free(c);
    ch__near_gens_free(g);
}

static void replace_and_grow(void **state)
{
    (void)state;
    ch__near_gens *g = ch__near_gens_new();
    ch__near *c = ch__near_new(g, 64 << 20, 1000 * MS);
    char key[32], reply[32];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 20000; i++) {
            snprintf(key, sizeof(key), "k%d", i);
            snprintf(reply, sizeof(reply), "r%d.%d", i, round);
            assert_true(put(c, g, key, reply, 1, 1));
        }
    }
    ch__near_stats st;
    ch__near_stats_get(c, &st);
    assert_int_equal(st.entries, 20000);
    assert_int_equal(st.evictions, 0);
    for (int i = 0; i < 20000; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        snprintf(reply, sizeof(reply), "r%d.1", i);
        assert_string_equal(get(c, key, 2), reply);
    }
    ch__near_free(c);
    ch__near_gens_free(g);
}

/* Another worker's write: its invalidation is seen by this one's next get (under TSan, the
 * generations are the only shared state). */
static void *writer(void *arg)
{
    ch__near_gens *g = arg;
    for (int i = 0; i < 1000; i++)
        ch__near_invalidate(g, kh_of("shared"));
    return NULL;
}

static void invalidation_across_threads(void **state)
{
    (void)state;
    ch__near_gens *g = ch__near_gens_new();
    ch__near *c = ch__near_new(g, 1 << 20, 1000 * MS);
    assert_true(put(c, g, "shared", "v", 0, 1));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, writer, g), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_string_equal(get(c, "shared", 2), "");
    assert_int_equal(ch__near_gen(g, kh_of("shared")), 1000);
    ch__near_free(c);
    ch__near_gens_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ttl_bound),
        cmocka_unit_test(invalidation),
        cmocka_unit_test(life_bound),
        cmocka_unit_test(invalidation_of_all),
        cmocka_unit_test(memory_bound),
        cmocka_unit_test(replace_and_grow),
        cmocka_unit_test(invalidation_across_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

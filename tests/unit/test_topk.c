/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_topk.c — the heavy-hitter summary (src/hot/topk.h) against an exact counter, on streams
 * from the committed seeded generator (testutil's splitmix64): zipf s = 1.1 over 1M keys, and
 * uniform and adversarial ones.
 *
 * Properties checked for every entry after every stream: true <= count, count - error <= true;
 * every key absent has true <= floor; the total is the stream's weight. Recall: the summary's
 * top 10 holds the true top 10 (>= 99% over the seeds, for k = 128, 256). Merge (four
 * summaries, as four workers, into one) and decay (a 60 s view from 1 s windows) keep the
 * properties against the merged and decayed exact counts.
 */
#include "testutil.h"

#include "hot/topk.h"

#include <math.h>
#include <stdarg.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <xxhash.h>

#define NKEYS 1000000u

/* The zipf(s) CDF over ranks 1..NKEYS. */
static double *zipf_cdf(double s)
{
    double *cdf = malloc(NKEYS * sizeof(*cdf));
    assert_non_null(cdf);
    double sum = 0;
    for (size_t i = 0; i < NKEYS; i++)
        cdf[i] = (sum += pow((double)(i + 1), -s));
    for (size_t i = 0; i < NKEYS; i++)
        cdf[i] /= sum;
    return cdf;
}

/* A key index drawn from cdf. */
static uint32_t zipf_draw(const double *cdf, uint64_t *rng)
{
    double u = (double)(tu_rand(rng) >> 11) * 0x1.0p-53;
    size_t lo = 0, hi = NKEYS - 1;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (uint32_t)lo;
}

static size_t key_of(char *buf, uint32_t k)
{
    return (size_t)snprintf(buf, 32, "user:%u", k);
}

static uint64_t hash_of(uint32_t k)
{
    char buf[32];
    size_t n = key_of(buf, k);
    return XXH3_64bits(buf, n);
}

static void add_key(ch__topk *t, uint32_t k, uint64_t w)
{
    char buf[32];
    size_t n = key_of(buf, k);
    ch__topk_add(t, XXH3_64bits(buf, n), buf, n, w);
}

/* The exact count of the entry's key: entries name keys "user:<k>". */
static uint32_t key_index(const ch__topk_entry *e)
{
    char buf[32];
    assert_true(e->keylen < sizeof(buf));
    memcpy(buf, e->key, e->keylen);
    buf[e->keylen] = 0;
    unsigned k = 0;
    assert_int_equal(sscanf(buf, "user:%u", &k), 1);
    assert_true(k < NKEYS);
    assert_true(hash_of(k) == e->hash);
    return k;
}

/* Every entry within its bounds of exact[] (scaled by 1, or the decayed doubles in dexact when
 * not NULL), every absent key at most the floor. */
static void check_bounds(const ch__topk *t, const uint64_t *exact, const double *dexact)
{
    size_t n = ch__topk_size(t);
    ch__topk_entry *es = calloc(n + 1, sizeof(*es));
    assert_non_null(es);
    assert_int_equal(ch__topk_sorted(t, es, n), n);
    bool *held = calloc(NKEYS, sizeof(*held));
    assert_non_null(held);
    for (size_t i = 0; i < n; i++) {
        uint32_t k = key_index(&es[i]);
        held[k] = true;
        double truth = dexact != NULL ? dexact[k] : (double)exact[k];
        assert_true(es[i].error <= es[i].count);
        if (!((double)es[i].count >= truth - 1e-6 &&
              (double)(es[i].count - es[i].error) <= truth + 1e-6))
            fail_msg("key %u: true %.3f, count %llu, error %llu", k, truth,
                     (unsigned long long)es[i].count, (unsigned long long)es[i].error);
        if (i > 0)
            assert_true(es[i - 1].count >= es[i].count);
    }
    double fl = (double)ch__topk_floor(t);
    for (uint32_t k = 0; k < NKEYS; k++) {
        double truth = dexact != NULL ? dexact[k] : (double)exact[k];
        if (!held[k] && truth > fl + 1e-6)
            fail_msg("absent key %u: true %.3f above the floor %.0f", k, truth, fl);
    }
    free(held);
    free(es);
}

/* How many of the true top `top` keys (by exact[]) are in the summary's first `top` entries. */
static size_t recall(const ch__topk *t, const uint64_t *exact, size_t top)
{
    uint32_t *best = calloc(top, sizeof(*best));
    assert_non_null(best);
    /* The true top: a selection by repeated maxima over keys not chosen yet (top is small). */
    bool *taken = calloc(NKEYS, sizeof(*taken));
    assert_non_null(taken);
    for (size_t r = 0; r < top; r++) {
        uint32_t arg = 0;
        uint64_t mx = 0;
        for (uint32_t k = 0; k < NKEYS; k++)
            if (!taken[k] && exact[k] > mx)
                mx = exact[k], arg = k;
        taken[arg] = true;
        best[r] = arg;
    }
    ch__topk_entry es[128];
    size_t n = ch__topk_sorted(t, es, top < 128 ? top : 128);
    size_t found = 0;
    for (size_t r = 0; r < top; r++)
        for (size_t i = 0; i < n; i++)
            if (key_index(&es[i]) == best[r]) {
                found++;
                break;
            }
    free(taken);
    free(best);
    return found;
}

#define STREAM 1000000u

static void test_zipf_recall_and_bounds(void **state)
{
    (void)state;
    double *cdf = zipf_cdf(1.1);
    uint64_t *exact = calloc(NKEYS, sizeof(*exact));
    assert_non_null(exact);
    /* k = 64 finds 28 of 30 here (ranks 9 to 11 within its error): 128 is the proxy's k. */
    const size_t ks[] = {128, 256};
    for (size_t ki = 0; ki < 2; ki++) {
        size_t found = 0, wanted = 0;
        for (uint64_t seed = 1; seed <= 3; seed++) {
            memset(exact, 0, NKEYS * sizeof(*exact));
            ch__topk *t = ch__topk_new(ks[ki], 250);
            assert_non_null(t);
            uint64_t rng = seed * 7919 + ks[ki];
            for (size_t i = 0; i < STREAM; i++) {
                uint32_t k = zipf_draw(cdf, &rng);
                exact[k]++;
                add_key(t, k, 1);
            }
            assert_int_equal(ch__topk_total(t), STREAM);
            assert_int_equal(ch__topk_size(t), ks[ki]);
            check_bounds(t, exact, NULL);
            found += recall(t, exact, 10);
            wanted += 10;
            ch__topk_free(t);
        }
        print_message("k %zu: recall of the true top 10: %zu of %zu\n", ks[ki], found, wanted);
        assert_true(found * 100 >= wanted * 99);
    }
    free(exact);
    free(cdf);
}

/* Four summaries of one zipf stream split at random (four workers), merged, then a second
 * window decayed in: bounds against the merged and the decayed exact counts. */
static void test_merge_and_decay(void **state)
{
    (void)state;
    double *cdf = zipf_cdf(1.1);
    uint64_t *exact = calloc(NKEYS, sizeof(*exact));
    double *dexact = calloc(NKEYS, sizeof(*dexact));
    assert_non_null(exact);
    assert_non_null(dexact);
    ch__topk *view = ch__topk_new(128, 250);
    ch__topk *w[4];
    for (int i = 0; i < 4; i++)
        assert_non_null(w[i] = ch__topk_new(128, 250));
    assert_non_null(view);
    uint64_t rng = 42;
    const double f = 59.0 / 60.0;
    for (int window = 0; window < 3; window++) {
        for (int i = 0; i < 4; i++)
            ch__topk_clear(w[i]);
        memset(exact, 0, NKEYS * sizeof(*exact));
        for (size_t i = 0; i < STREAM / 4; i++) {
            uint32_t k = zipf_draw(cdf, &rng);
            uint64_t wt = 1 + tu_below(&rng, 3);
            exact[k] += wt;
            add_key(w[tu_below(&rng, 4)], k, wt);
        }
        /* One window's merge: against its exact counts. */
        ch__topk *one = ch__topk_new(128, 250);
        assert_non_null(one);
        for (int i = 0; i < 4; i++)
            ch__topk_merge(one, w[i]);
        check_bounds(one, exact, NULL);
        assert_true(recall(one, exact, 10) >= 10);
        ch__topk_free(one);
        /* The decayed view. */
        ch__topk_decay(view, f);
        for (uint32_t k = 0; k < NKEYS; k++)
            dexact[k] = dexact[k] * f + (double)exact[k];
        for (int i = 0; i < 4; i++)
            ch__topk_merge(view, w[i]);
        check_bounds(view, NULL, dexact);
    }
    for (int i = 0; i < 4; i++)
        ch__topk_free(w[i]);
    ch__topk_free(view);
    free(dexact);
    free(exact);
    free(cdf);
}

/* A summary merged into one with fewer entries (and a shorter keymax): the merge keeps the
 * largest and the guarantee, within t's own memory. Before (issue 35, found by
 * fuzz/topk_fuzz.c), t's scratch held 2 x t's k entries, and src's keys beyond that were written
 * past it (ASan: heap-buffer-overflow in ch__topk_merge). */
static void test_merge_larger_source(void **state)
{
    (void)state;
    uint64_t *exact = calloc(NKEYS, sizeof(*exact));
    assert_non_null(exact);
    const size_t small[] = {1, 2, 3, 5};
    for (size_t si = 0; si < sizeof(small) / sizeof(small[0]); si++) {
        memset(exact, 0, NKEYS * sizeof(*exact));
        ch__topk *t = ch__topk_new(small[si], 16);
        ch__topk *src = ch__topk_new(64, 250);
        assert_non_null(t);
        assert_non_null(src);
        /* t: three keys of its own; src: 64 keys, weights 1..64 (and one key both hold). */
        for (uint32_t k = 100; k < 103; k++) {
            add_key(t, k, 10);
            exact[k] += 10;
        }
        for (uint32_t k = 0; k < 64; k++) {
            uint32_t key = k == 63 ? 100 : k;
            add_key(src, key, k + 1);
            exact[key] += k + 1;
        }
        ch__topk_merge(t, src);
        assert_int_equal(ch__topk_size(t), small[si]);
        assert_int_equal(ch__topk_total(t), ch__topk_total(src) + 30);
        check_bounds(t, exact, NULL);
        /* The merged count of the heaviest (key 100: 10 + 64) leads. */
        ch__topk_entry e;
        assert_int_equal(ch__topk_sorted(t, &e, 1), 1);
        assert_int_equal(key_index(&e), 100);
        ch__topk_free(t);
        ch__topk_free(src);
    }
    free(exact);
}

/* A uniform stream over more keys than entries (every key churns through the minimum), then
 * keys whose hashes share their low bits (long probe runs, removals shifting them back). */
static void test_churn_and_collisions(void **state)
{
    (void)state;
    uint64_t *exact = calloc(NKEYS, sizeof(*exact));
    assert_non_null(exact);
    ch__topk *t = ch__topk_new(16, 250);
    assert_non_null(t);
    uint64_t rng = 9;
    for (size_t i = 0; i < 200000; i++) {
        uint32_t k = (uint32_t)tu_below(&rng, 1000);
        exact[k]++;
        add_key(t, k, 1);
    }
    check_bounds(t, exact, NULL);
    /* Space-Saving's bound: every error <= N / k. */
    ch__topk_entry es[16];
    size_t n = ch__topk_sorted(t, es, 16);
    for (size_t i = 0; i < n; i++)
        assert_true(es[i].error <= 200000 / 16);
    ch__topk_free(t);

    /* Hashes equal in their low 20 bits: every one probes the same run. */
    t = ch__topk_new(8, 8);
    assert_non_null(t);
    uint64_t count[64] = {0};
    for (size_t i = 0; i < 20000; i++) {
        uint64_t k = tu_below(&rng, 64) % (1 + tu_below(&rng, 64));
        count[k]++;
        ch__topk_add(t, (k + 1) << 20, "longer-than-eight", 17, 1);
    }
    ch__topk_entry e8[8];
    n = ch__topk_sorted(t, e8, 8);
    assert_int_equal(n, 8);
    for (size_t i = 0; i < n; i++) {
        uint64_t k = (e8[i].hash >> 20) - 1;
        assert_true(k < 64);
        assert_true(e8[i].count >= count[k] && e8[i].count - e8[i].error <= count[k]);
        assert_int_equal(e8[i].keylen, 8);
        assert_true(e8[i].truncated);
        assert_memory_equal(e8[i].key, "longer-t", 8);
    }
    for (uint64_t k = 0; k < 64; k++) {
        bool held = false;
        for (size_t i = 0; i < n; i++)
            held = held || (e8[i].hash >> 20) - 1 == k;
        if (!held)
            assert_true(count[k] <= ch__topk_floor(t));
    }
    ch__topk_free(t);
    free(exact);
}

/* Exact while there is room; bad arguments refused. */
static void test_small_exact(void **state)
{
    (void)state;
    assert_null(ch__topk_new(0, 10));
    assert_null(ch__topk_new(65537, 10));
    assert_null(ch__topk_new(4, 70000));
    ch__topk *t = ch__topk_new(4, 16);
    assert_non_null(t);
    ch__topk_add(t, 1, "a", 1, 5);
    ch__topk_add(t, 2, "b", 1, 3);
    ch__topk_add(t, 1, "a", 1, 1);
    ch__topk_entry es[4];
    assert_int_equal(ch__topk_sorted(t, es, 4), 2);
    assert_int_equal(es[0].hash, 1);
    assert_int_equal(es[0].count, 6);
    assert_int_equal(es[0].error, 0);
    assert_int_equal(es[1].count, 3);
    assert_int_equal(ch__topk_floor(t), 0);
    /* A fifth key on a full summary replaces the smallest (count 1) and inherits it as error. */
    ch__topk_add(t, 3, "c", 1, 1);
    ch__topk_add(t, 4, "d", 1, 2);
    ch__topk_add(t, 5, "e", 1, 4);
    assert_int_equal(ch__topk_sorted(t, es, 4), 4);
    assert_int_equal(ch__topk_floor(t), 1);
    bool found = false;
    for (int i = 0; i < 4; i++)
        if (es[i].hash == 5) {
            found = true;
            assert_int_equal(es[i].count, 5);
            assert_int_equal(es[i].error, 1);
        }
    assert_true(found);
    ch__topk_entry one;
    assert_true(ch__topk_find(t, 5, &one));
    assert_int_equal(one.count, 5);
    assert_memory_equal(one.key, "e", 1);
    assert_false(ch__topk_find(t, 77, &one));
    ch__topk_clear(t);
    assert_false(ch__topk_find(t, 5, &one));
    assert_int_equal(ch__topk_size(t), 0);
    assert_int_equal(ch__topk_total(t), 0);
    ch__topk_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_exact),
        cmocka_unit_test(test_churn_and_collisions),
        cmocka_unit_test(test_zipf_recall_and_bounds),
        cmocka_unit_test(test_merge_and_decay),
        cmocka_unit_test(test_merge_larger_source),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

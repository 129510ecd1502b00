/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_route.c — the routing layer (include/chash_route.h) against its definitions, with a fake
 * clock: times are plain numbers passed in, nothing sleeps.
 *
 * Health: ejection after exactly K failures whose streak began within W, streak restarts,
 * backoff (exact doubling without jitter, every jittered delay inside [(1-j)d, (1+j)d]),
 * readmission only by a successful probe, and the kept-then-reset delay of a flapping node.
 * Router: with every node up the candidates are ch_replicas(); with a node ejected its keys go
 * to the next up node of their walk and every other key keeps its owner; readmission restores
 * every owner. Membership: the content version is a function of exactly the documented fields,
 * recomputed here from its definition; copies, accessors, and errors passed through unleaked.
 */
#include "testutil.h"

#include <chash_route.h>

#include <stdarg.h>
#include <setjmp.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

/* ---- health helpers ------------------------------------------------------------------------ */

static ch_health_options hopts(uint32_t k, uint64_t w, uint64_t min, uint64_t max, double jitter,
                               uint64_t stable)
{
    ch_health_options o;
    ch_health_options_init(&o);
    o.failure_limit = k;
    o.failure_window_ms = w;
    o.retry_min_ms = min;
    o.retry_max_ms = max;
    o.jitter = jitter;
    o.stable_ms = stable;
    return o;
}

static ch_health *hnew(size_t n, const ch_health_options *o)
{
    ch_health *h = NULL;
    assert_int_equal(ch_health_new(n, o, &h), CH_OK);
    assert_non_null(h);
    return h;
}

static ch_health_info hinfo(const ch_health *h, size_t i)
{
    ch_health_info info;
    assert_int_equal(ch_health_info_get(h, i, &info), CH_OK);
    return info;
}

/* Fails node i k times at now, now + 1, ...; returns whether the last failure ejected it, and
 * checks that none before it did. */
static bool fail_times(ch_health *h, size_t i, unsigned k, uint64_t now)
{
    bool ejected = false;
    for (unsigned f = 0; f < k; f++) {
        assert_false(ejected);
        ejected = ch_health_failure(h, i, now + f, 0);
    }
    return ejected;
}

/* ---- health: options ----------------------------------------------------------------------- */

static void test_health_options(void **state)
{
    (void)state;
    ch_health_options o;
    ch_health_options_init(&o);
    assert_int_equal(o.size, sizeof(ch_health_options));
    assert_true(o.eject);
    assert_int_equal(o.failure_limit, 3);
    assert_int_equal(o.failure_window_ms, 10000);
    assert_int_equal(o.retry_min_ms, 1000);
    assert_int_equal(o.retry_max_ms, 60000);
    assert_true(o.jitter == 0.5);
    assert_int_equal(o.stable_ms, 0);

    ch_health *h = NULL;
    assert_int_equal(ch_health_new(4, NULL, &h), CH_OK);
    for (size_t i = 0; i < 4; i++) {
        ch_health_info info = hinfo(h, i);
        assert_true(info.up);
        assert_int_equal(info.streak, 0);
        assert_int_equal(info.delay_ms, 1000);
        assert_int_equal(info.ejections, 0);
        assert_int_equal(info.readmissions, 0);
        assert_true(ch_health_is_up(h, i));
        assert_false(ch_health_probe_due(h, i, UINT64_MAX));
    }
    ch_health_info info;
    assert_int_equal(ch_health_info_get(h, 4, &info), CH_EINVAL);
    assert_int_equal(ch_health_info_get(h, 0, NULL), CH_EINVAL);
    assert_int_equal(ch_health_info_get(NULL, 0, &info), CH_EINVAL);
    ch_health_free(h);
    ch_health_free(NULL);

    h = NULL;
    assert_int_equal(ch_health_new(0, NULL, &h), CH_EINVAL);
    assert_int_equal(ch_health_new(1, NULL, NULL), CH_EINVAL);
    ch_health_options bad[] = {
        hopts(0, 10000, 1000, 60000, 0.5, 0),  /* K = 0 */
        hopts(3, 0, 1000, 60000, 0.5, 0),      /* W = 0 */
        hopts(3, 10000, 0, 60000, 0.5, 0),     /* min = 0 */
        hopts(3, 10000, 2000, 1999, 0.5, 0),   /* max < min */
        hopts(3, 10000, 1000, 60000, -0.1, 0), /* jitter < 0 */
        hopts(3, 10000, 1000, 60000, 1.0, 0),  /* jitter = 1 */
        hopts(3, 10000, 1000, 60000, NAN, 0),
        hopts(3, 10000, 1000, 60000, INFINITY, 0),
    };
    for (size_t b = 0; b < sizeof(bad) / sizeof(*bad); b++) {
        assert_int_equal(ch_health_new(2, &bad[b], &h), CH_EINVAL);
        assert_null(h);
    }
    o = hopts(3, 10000, 1000, 1000, 0.0, 0); /* min == max, no jitter: valid */
    assert_int_equal(ch_health_new(2, &o, &h), CH_OK);
    ch_health_free(h);

    /* The size field: too small to reach a field, or larger than this library knows. */
    h = NULL;
    ch_health_options_init(&o);
    o.size = sizeof(size_t);
    assert_int_equal(ch_health_new(2, &o, &h), CH_EINVAL);
    o.size = sizeof(ch_health_options) + 8;
    assert_int_equal(ch_health_new(2, &o, &h), CH_EINVAL);
    assert_null(h);
    /* An older, smaller struct: fields it does not reach take their defaults, whatever bytes
     * follow it in memory. */
    ch_health_options older;
    ch_health_options_init(&older);
    older.failure_limit = 1;
    older.size = offsetof(ch_health_options, jitter);
    older.jitter = 5.0; /* beyond the size: must be ignored (the default is 0.5) */
    assert_int_equal(ch_health_new(1, &older, &h), CH_OK);
    assert_true(ch_health_failure(h, 0, 100, 0)); /* K = 1 was read */
    uint64_t wait = hinfo(h, 0).next_probe_ms - 100;
    assert_true(wait >= 500 && wait <= 1500); /* jitter 0.5, not 5.0 */
    ch_health_free(h);
}

/* ---- health: ejection ---------------------------------------------------------------------- */

static void test_eject_after_exactly_k(void **state)
{
    (void)state;
    const unsigned ks[] = {1, 2, 3, 5, 10};
    for (size_t c = 0; c < sizeof(ks) / sizeof(*ks); c++) {
        unsigned k = ks[c];
        ch_health_options o = hopts(k, 10000, 1000, 60000, 0.0, 0);
        ch_health *h = hnew(3, &o);
        for (unsigned f = 1; f < k; f++) {
            assert_false(ch_health_failure(h, 1, 5000 + f, 0));
            assert_true(ch_health_is_up(h, 1));
            assert_int_equal(hinfo(h, 1).streak, f);
        }
        assert_true(ch_health_failure(h, 1, 5000 + k, 0)); /* the K-th */
        assert_false(ch_health_is_up(h, 1));
        ch_health_info info = hinfo(h, 1);
        assert_false(info.up);
        assert_int_equal(info.ejections, 1);
        assert_int_equal(info.next_probe_ms, 5000 + k + 1000);
        /* The other nodes are untouched. */
        assert_true(ch_health_is_up(h, 0));
        assert_true(ch_health_is_up(h, 2));
        assert_int_equal(hinfo(h, 0).streak, 0);
        ch_health_free(h);
    }
}

static void test_success_resets_streak(void **state)
{
    (void)state;
    ch_health_options o = hopts(3, 10000, 1000, 60000, 0.0, 0);
    ch_health *h = hnew(1, &o);
    assert_false(ch_health_failure(h, 0, 0, 0));
    assert_false(ch_health_failure(h, 0, 1, 0));
    ch_health_success(h, 0, 2);
    assert_int_equal(hinfo(h, 0).streak, 0);
    assert_false(ch_health_failure(h, 0, 3, 0));
    assert_false(ch_health_failure(h, 0, 4, 0));
    assert_true(ch_health_is_up(h, 0));
    /* Alternating failures and successes never eject. */
    for (uint64_t t = 10; t < 1000; t += 2) {
        ch_health_success(h, 0, t);
        assert_false(ch_health_failure(h, 0, t + 1, 0));
    }
    assert_true(ch_health_is_up(h, 0));
    assert_int_equal(hinfo(h, 0).ejections, 0);
    /* Then three in a row do (the loop's last failure began a streak: end it first). */
    ch_health_success(h, 0, 1999);
    assert_false(ch_health_failure(h, 0, 2000, 0));
    assert_false(ch_health_failure(h, 0, 2001, 0));
    assert_true(ch_health_failure(h, 0, 2002, 0));
    ch_health_free(h);
}

static void test_failure_window(void **state)
{
    (void)state;
    const uint64_t w = 1000;
    ch_health_options o = hopts(3, w, 1000, 60000, 0.0, 0);

    /* Three failures spread beyond W never eject, however many come. */
    ch_health *h = hnew(1, &o);
    for (uint64_t f = 0; f < 100; f++)
        assert_false(ch_health_failure(h, 0, f * (w / 2 + 1), 0));
    assert_true(ch_health_is_up(h, 0));
    ch_health_free(h);

    /* The K-th failure exactly W after the streak's first: ejected. */
    h = hnew(1, &o);
    assert_false(ch_health_failure(h, 0, 5000, 0));
    assert_false(ch_health_failure(h, 0, 5500, 0));
    assert_true(ch_health_failure(h, 0, 5000 + w, 0));
    ch_health_free(h);

    /* One millisecond later: the streak is older than W and restarts at this failure, so the
     * count is 1, although the failure at 5500 is within W of it. */
    h = hnew(1, &o);
    assert_false(ch_health_failure(h, 0, 5000, 0));
    assert_false(ch_health_failure(h, 0, 5500, 0));
    assert_false(ch_health_failure(h, 0, 5000 + w + 1, 0));
    assert_int_equal(hinfo(h, 0).streak, 1);
    /* The restarted streak counts from 6001: two more within W eject. */
    assert_false(ch_health_failure(h, 0, 6500, 0));
    assert_int_equal(hinfo(h, 0).streak, 2);
    assert_true(ch_health_failure(h, 0, 6001 + w, 0));
    ch_health_free(h);

    /* A success ends a streak even within W. */
    h = hnew(1, &o);
    assert_false(ch_health_failure(h, 0, 0, 0));
    assert_false(ch_health_failure(h, 0, 1, 0));
    ch_health_success(h, 0, 2);
    assert_false(ch_health_failure(h, 0, 3, 0));
    assert_int_equal(hinfo(h, 0).streak, 1);
    ch_health_free(h);
}

static void test_ejected_failures_ignored(void **state)
{
    (void)state;
    ch_health_options o = hopts(2, 10000, 1000, 60000, 0.0, 0);
    ch_health *h = hnew(2, &o);
    assert_true(fail_times(h, 0, 2, 100));
    ch_health_info before = hinfo(h, 0);
    for (uint64_t t = 200; t < 300; t++)
        assert_false(ch_health_failure(h, 0, t, t * 7919));
    ch_health_success(h, 0, 300); /* a late reply does not readmit */
    ch_health_info after = hinfo(h, 0);
    assert_false(after.up);
    assert_int_equal(after.ejections, 1);
    assert_int_equal(after.next_probe_ms, before.next_probe_ms);
    assert_int_equal(after.delay_ms, before.delay_ms);
    /* Out-of-range indexes are ignored, not written. */
    assert_false(ch_health_failure(h, 2, 0, 0));
    ch_health_success(h, 2, 0);
    ch_health_probe_result(h, 2, true, 0, 0);
    assert_false(ch_health_is_up(h, 2));
    assert_false(ch_health_probe_due(h, 2, UINT64_MAX));
    ch_health_free(h);
}

static void test_eject_disabled(void **state)
{
    (void)state;
    ch_health_options o = hopts(3, 10000, 1000, 60000, 0.5, 0);
    o.eject = false;
    ch_health *h = hnew(1, &o);
    for (uint64_t t = 0; t < 100; t++)
        assert_false(ch_health_failure(h, 0, t, t));
    assert_true(ch_health_is_up(h, 0));
    ch_health_info info = hinfo(h, 0);
    assert_int_equal(info.streak, 100); /* failures still count */
    assert_int_equal(info.ejections, 0);
    assert_false(ch_health_probe_due(h, 0, UINT64_MAX));
    ch_health_success(h, 0, 200);
    assert_int_equal(hinfo(h, 0).streak, 0);
    ch_health_free(h);
}

/* ---- health: backoff ----------------------------------------------------------------------- */

static void test_backoff_exact_doubling(void **state)
{
    (void)state;
    ch_health_options o = hopts(1, 10000, 1000, 60000, 0.0, 0);
    ch_health *h = hnew(1, &o);
    uint64_t now = 1000000;
    assert_true(ch_health_failure(h, 0, now, 12345));
    assert_false(ch_health_probe_due(h, 0, now + 999));
    assert_true(ch_health_probe_due(h, 0, now + 1000));
    assert_int_equal(hinfo(h, 0).delay_ms, 1000);
    assert_int_equal(hinfo(h, 0).next_probe_ms, now + 1000);

    /* Each failed probe doubles the delay: 2 s, 4 s, ... capped at 60 s. */
    const uint64_t expect[] = {2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000};
    now += 1000;
    for (size_t p = 0; p < sizeof(expect) / sizeof(*expect); p++) {
        ch_health_probe_result(h, 0, false, now, UINT64_MAX);
        ch_health_info info = hinfo(h, 0);
        assert_false(info.up);
        assert_int_equal(info.delay_ms, expect[p]);
        assert_int_equal(info.next_probe_ms, now + expect[p]);
        assert_false(ch_health_probe_due(h, 0, now));
        assert_false(ch_health_probe_due(h, 0, now + expect[p] - 1));
        assert_true(ch_health_probe_due(h, 0, now + expect[p]));
        now += expect[p];
    }
    assert_int_equal(hinfo(h, 0).ejections, 1);
    assert_int_equal(hinfo(h, 0).readmissions, 0);
    ch_health_free(h);

    /* A cap that is not a power-of-two multiple of the minimum. */
    o = hopts(1, 10000, 3, 20, 0.0, 0);
    h = hnew(1, &o);
    assert_true(ch_health_failure(h, 0, 0, 0));
    const uint64_t expect2[] = {6, 12, 20, 20};
    for (size_t p = 0; p < sizeof(expect2) / sizeof(*expect2); p++) {
        ch_health_probe_result(h, 0, false, 0, 0);
        assert_int_equal(hinfo(h, 0).delay_ms, expect2[p]);
    }
    ch_health_free(h);
}

/* next_probe - now for a jitter j and delay d must lie in [(1-j)d, (1+j)d] for every rnd. */
static void check_jittered(uint64_t wait, uint64_t d, double j)
{
    double lo = (1.0 - j) * (double)d, hi = (1.0 + j) * (double)d;
    if ((double)wait < floor(lo) || (double)wait > ceil(hi) || wait < 1)
        fail_msg("delay %llu jittered to %llu, outside [%g, %g]", (unsigned long long)d,
                 (unsigned long long)wait, lo, hi);
}

static void test_backoff_jitter_bounds(void **state)
{
    (void)state;
    const double j = 0.5;
    ch_health_options o = hopts(1, 10000, 1000, 64000, j, 0);
    uint64_t seed = 42;
    uint64_t lo_seen = UINT64_MAX, hi_seen = 0;
    for (int trial = 0; trial < 2000; trial++) {
        uint64_t rnd = trial == 0 ? 0 : trial == 1 ? UINT64_MAX : trial == 2 ? UINT64_C(1) << 63
                                                                              : tu_rand(&seed);
        ch_health *h = hnew(1, &o);
        uint64_t now = 777;
        assert_true(ch_health_failure(h, 0, now, rnd));
        uint64_t d = 1000, wait = hinfo(h, 0).next_probe_ms - now;
        check_jittered(wait, d, j);
        if (trial == 0)
            assert_int_equal(wait, 500); /* u = 0: factor 1 - j exactly */
        if (trial == 2)
            assert_int_equal(wait, 1000); /* u = 1/2: factor 1 */
        lo_seen = wait < lo_seen ? wait : lo_seen;
        hi_seen = wait > hi_seen ? wait : hi_seen;
        assert_false(ch_health_probe_due(h, 0, now + wait - 1));
        assert_true(ch_health_probe_due(h, 0, now + wait));
        for (int p = 0; p < 8; p++) {
            now += wait;
            uint64_t r = trial < 3 ? rnd : tu_rand(&seed);
            ch_health_probe_result(h, 0, false, now, r);
            d = d * 2 > 64000 ? 64000 : d * 2;
            assert_int_equal(hinfo(h, 0).delay_ms, d); /* the unjittered delay doubles */
            wait = hinfo(h, 0).next_probe_ms - now;
            check_jittered(wait, d, j);
            assert_false(ch_health_probe_due(h, 0, now + wait - 1));
            assert_true(ch_health_probe_due(h, 0, now + wait));
        }
        ch_health_free(h);
    }
    /* The jitter spreads: uniform factors over 2000 draws reach near both ends. */
    assert_true(lo_seen < 550);
    assert_true(hi_seen > 1450);

    /* Never below 1 ms: a 1 ms delay with jitter 0.9 and u = 0 would be 0.1 ms. */
    o = hopts(1, 10000, 1, 8, 0.9, 0);
    ch_health *h = hnew(1, &o);
    assert_true(ch_health_failure(h, 0, 50, 0));
    assert_int_equal(hinfo(h, 0).next_probe_ms, 51);
    assert_false(ch_health_probe_due(h, 0, 50));
    ch_health_free(h);
}

static void test_readmission_needs_probe(void **state)
{
    (void)state;
    ch_health_options o = hopts(2, 10000, 1000, 60000, 0.5, 0);
    ch_health *h = hnew(2, &o);
    assert_true(fail_times(h, 0, 2, 0));
    /* However much time passes, the node stays out until a probe succeeds. */
    const uint64_t later[] = {1, 1000, 60000, UINT64_C(1) << 40, UINT64_MAX};
    for (size_t k = 0; k < sizeof(later) / sizeof(*later); k++) {
        assert_false(ch_health_is_up(h, 0));
        ch_health_success(h, 0, later[k]);
    }
    assert_true(ch_health_probe_due(h, 0, UINT64_MAX));
    ch_health_probe_result(h, 0, false, 5000, 99);
    assert_false(ch_health_is_up(h, 0));
    ch_health_probe_result(h, 0, true, 20000, 0);
    ch_health_info info = hinfo(h, 0);
    assert_true(info.up);
    assert_true(ch_health_is_up(h, 0));
    assert_int_equal(info.streak, 0);
    assert_int_equal(info.ejections, 1);
    assert_int_equal(info.readmissions, 1);
    assert_false(ch_health_probe_due(h, 0, UINT64_MAX));
    /* A probe result for a node that is up changes nothing. */
    ch_health_probe_result(h, 1, false, 20000, 0);
    ch_health_probe_result(h, 0, true, 20001, 0);
    assert_true(ch_health_is_up(h, 1));
    assert_int_equal(hinfo(h, 1).delay_ms, 1000);
    assert_int_equal(hinfo(h, 0).readmissions, 1);
    /* The streak starts over after readmission: K failures again to eject. */
    assert_false(ch_health_failure(h, 0, 20002, 0));
    assert_true(ch_health_failure(h, 0, 20003, 0));
    assert_int_equal(hinfo(h, 0).ejections, 2);
    ch_health_free(h);
}

/* Ejects node i at now (K = 1), fails `failed` probes in a row, then readmits it; returns the
 * time of readmission. Jitter 0, so every probe is at now + delay. */
static uint64_t eject_and_readmit(ch_health *h, size_t i, uint64_t now, int failed)
{
    assert_true(ch_health_failure(h, i, now, 0));
    for (int p = 0; p < failed; p++) {
        now = hinfo(h, i).next_probe_ms;
        ch_health_probe_result(h, i, false, now, 0);
    }
    now = hinfo(h, i).next_probe_ms;
    assert_true(ch_health_probe_due(h, i, now));
    ch_health_probe_result(h, i, true, now, 0);
    assert_true(ch_health_is_up(h, i));
    return now;
}

static void test_flapping_node(void **state)
{
    (void)state;
    const uint64_t stable = 30000;
    ch_health_options o = hopts(1, 10000, 1000, 60000, 0.0, stable);
    ch_health *h = hnew(3, &o);

    /* Node 0: ejected, two failed probes (2 s, 4 s), readmitted: the delay stays 4 s. */
    uint64_t up = eject_and_readmit(h, 0, 0, 2);
    assert_int_equal(hinfo(h, 0).delay_ms, 4000);
    /* Ejected again before stable_ms: it is flapping, so the delay doubles from the kept 4 s to
     * 8 s, and a failed probe keeps doubling from there (16 s), not from the 1 s minimum. */
    uint64_t now = up + stable - 1;
    assert_true(ch_health_failure(h, 0, now, 0));
    assert_int_equal(hinfo(h, 0).delay_ms, 8000);
    assert_int_equal(hinfo(h, 0).next_probe_ms, now + 8000);
    ch_health_probe_result(h, 0, false, now + 8000, 0);
    assert_int_equal(hinfo(h, 0).delay_ms, 16000);
    assert_int_equal(hinfo(h, 0).next_probe_ms, now + 8000 + 16000);
    /* Readmitted and ejected again quickly: 32 s, then the 60 s cap after a failed probe. */
    now = hinfo(h, 0).next_probe_ms;
    ch_health_probe_result(h, 0, true, now, 0);
    assert_true(ch_health_failure(h, 0, now + 10, 0));
    assert_int_equal(hinfo(h, 0).next_probe_ms, now + 10 + 32000);
    ch_health_probe_result(h, 0, false, now + 32010, 0);
    assert_int_equal(hinfo(h, 0).delay_ms, 60000);

    /* Node 1: the same history, but it stays up for stable_ms: its next ejection starts again
     * from retry_min_ms. */
    up = eject_and_readmit(h, 1, 0, 2);
    assert_int_equal(hinfo(h, 1).delay_ms, 4000);
    ch_health_success(h, 1, up + 1000); /* busy and healthy in between */
    now = up + stable;
    assert_true(ch_health_failure(h, 1, now, 0));
    assert_int_equal(hinfo(h, 1).delay_ms, 1000);
    assert_int_equal(hinfo(h, 1).next_probe_ms, now + 1000);
    ch_health_probe_result(h, 1, false, now + 1000, 0);
    assert_int_equal(hinfo(h, 1).delay_ms, 2000);

    /* Node 2: the reset also happens when the node is only seen succeeding after stable_ms. */
    up = eject_and_readmit(h, 2, 0, 3);
    assert_int_equal(hinfo(h, 2).delay_ms, 8000);
    ch_health_success(h, 2, up + stable);
    assert_int_equal(hinfo(h, 2).delay_ms, 1000);
    ch_health_free(h);

    /* stable_ms = 0 means retry_max_ms. */
    o = hopts(1, 10000, 1000, 60000, 0.0, 0);
    h = hnew(2, &o);
    up = eject_and_readmit(h, 0, 0, 1);
    assert_true(ch_health_failure(h, 0, up + 60000 - 1, 0));
    assert_int_equal(hinfo(h, 0).delay_ms, 4000); /* 2 s kept, doubled: flapping */
    up = eject_and_readmit(h, 1, 0, 1);
    assert_true(ch_health_failure(h, 1, up + 60000, 0));
    assert_int_equal(hinfo(h, 1).delay_ms, 1000);
    ch_health_free(h);
}

/* ---- router -------------------------------------------------------------------------------- */

#define NODES 8
#define KEYS 20000

typedef struct algo_case {
    ch_algo_id algo;
    ch_hash_id hash;
} algo_case;

static const algo_case walk_algos[] = {
    {CH_ALGO_RING, CH_HASH_DEFAULT},   {CH_ALGO_KETAMA, CH_HASH_MD5},
    {CH_ALGO_RENDEZVOUS, CH_HASH_XXH3}, {CH_ALGO_MAGLEV, CH_HASH_DEFAULT},
    {CH_ALGO_MODULO, CH_HASH_DEFAULT},  {CH_ALGO_MODULA, CH_HASH_TW_FNV1A_64},
};
#define NALGOS (sizeof(walk_algos) / sizeof(*walk_algos))

static bool in(const size_t *a, size_t n, size_t x)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] == x)
            return true;
    return false;
}

/* The key's full walk (ch_replicas over every node) with the ejected nodes removed, truncated to
 * depth: what ch_route must return by its definition. */
static size_t expected_route(const ch_table *t, const char *key, size_t len, const bool *down,
                             size_t depth, size_t *exp)
{
    size_t all[NODES], n = 0, c = 0;
    assert_int_equal(ch_replicas(t, key, len, NODES, all, &n), CH_OK);
    for (size_t i = 0; i < n && c < depth; i++)
        if (!down[all[i]])
            exp[c++] = all[i];
    return c;
}

static bool down_array_up(const void *ctx, size_t node)
{
    return !((const bool *)ctx)[node];
}

/* ch_route with the tracker h, and ch_route_hash_fn with the same state given as the array
 * down, both against the definition. */
static void check_routes(const ch_table *t, const ch_health *h, const bool *down, size_t depth,
                         uint64_t seed)
{
    char key[48];
    size_t out[NODES + 2], out2[NODES + 2], exp[NODES + 2], count, count2, ecount, n_up = 0;
    for (size_t i = 0; i < NODES; i++)
        n_up += down[i] ? 0 : 1;
    for (size_t k = 0; k < KEYS; k++) {
        size_t len = tu_key(key, seed, k);
        assert_int_equal(ch_route(t, h, key, len, depth, out, &count), CH_OK);
        assert_int_equal(ch_route_hash_fn(t, down_array_up, down, n_up, ch_key_hash(t, key, len), depth,
                                          out2, &count2),
                         CH_OK);
        ecount = expected_route(t, key, len, down, depth, exp);
        assert_int_equal(count, ecount);
        assert_int_equal(count2, ecount);
        for (size_t c = 0; c < count; c++) {
            assert_int_equal(out[c], exp[c]);
            assert_int_equal(out2[c], exp[c]);
        }
    }
}

static ch_table *walk_table(size_t a, tu_nodes *ns)
{
    *ns = tu_nodes_random(1000 + a, NODES, "cache");
    return tu_build(ns->nodes, NODES, walk_algos[a].algo, walk_algos[a].hash, CH_DEFAULT_VNODES);
}

static void test_route_all_up(void **state)
{
    (void)state;
    ch_health_options o = hopts(1, 10000, 1000, 60000, 0.5, 0);
    for (size_t a = 0; a < NALGOS; a++) {
        tu_nodes ns;
        ch_table *t = walk_table(a, &ns);
        ch_health *h = hnew(NODES, &o);
        char key[48];
        size_t out[NODES], rep[NODES], count, rcount;
        for (size_t k = 0; k < KEYS; k++) {
            size_t len = tu_key(key, 7, k);
            /* Candidate 0 is the owner; the list is ch_replicas' for every depth asked. */
            for (size_t depth = 1; depth <= NODES; depth += (k % 97 == 0 ? 1 : 3)) {
                assert_int_equal(ch_route(t, h, key, len, depth, out, &count), CH_OK);
                assert_int_equal(ch_replicas(t, key, len, depth, rep, &rcount), CH_OK);
                assert_int_equal(count, rcount);
                assert_int_equal(out[0], ch_lookup(t, key, len));
                for (size_t c = 0; c < count; c++)
                    assert_int_equal(out[c], rep[c]);
                /* No tracker means every node up. */
                size_t out2[NODES], count2;
                assert_int_equal(ch_route(t, NULL, key, len, depth, out2, &count2), CH_OK);
                assert_int_equal(count2, count);
                assert_memory_equal(out2, out, count * sizeof(*out));
            }
        }
        ch_health_free(h);
        ch_table_free(t);
        tu_nodes_free(&ns);
    }
}

static void test_route_ejection_moves_only_its_keys(void **state)
{
    (void)state;
    ch_health_options o = hopts(1, 10000, 1000, 60000, 0.5, 0);
    for (size_t a = 0; a < NALGOS; a++) {
        tu_nodes ns;
        ch_table *t = walk_table(a, &ns);
        ch_health *h = hnew(NODES, &o);
        bool down[NODES] = {false};
        const size_t victims[] = {3, 0, NODES - 1};
        for (size_t v = 0; v < sizeof(victims) / sizeof(*victims); v++) {
            size_t x = victims[v];
            assert_true(ch_health_failure(h, x, 1000 * v, v));
            down[x] = true;

            /* The property: keys owned by X go to the next up node of their walk; every other
             * key keeps its owner. */
            char key[48];
            size_t out[NODES], rep[2], count, rcount, moved = 0;
            for (size_t k = 0; k < KEYS; k++) {
                size_t len = tu_key(key, 11, k);
                size_t owner = ch_lookup(t, key, len);
                assert_int_equal(ch_route(t, h, key, len, 1, out, &count), CH_OK);
                assert_int_equal(count, 1);
                if (owner != x) {
                    assert_int_equal(out[0], owner);
                } else {
                    moved++;
                    assert_int_equal(ch_replicas(t, key, len, 2, rep, &rcount), CH_OK);
                    assert_int_equal(rcount, 2);
                    assert_int_equal(out[0], rep[1]);
                }
                assert_false(in(out, count, x));
            }
            assert_true(moved > 0); /* X owned keys: the property was exercised */
            const size_t depths[] = {1, 2, 3, NODES - 1, NODES, NODES + 1};
            for (size_t d = 0; d < sizeof(depths) / sizeof(*depths); d++)
                check_routes(t, h, down, depths[d], 13 + d);

            /* Readmitted: every owner is back, exactly. */
            ch_health_probe_result(h, x, true, 1000 * v + 5000, 0);
            down[x] = false;
            for (size_t k = 0; k < KEYS; k++) {
                size_t len = tu_key(key, 11, k);
                assert_int_equal(ch_route(t, h, key, len, 1, out, &count), CH_OK);
                assert_int_equal(count, 1);
                assert_int_equal(out[0], ch_lookup(t, key, len));
            }
            check_routes(t, h, down, NODES, 17);
        }

        /* Several nodes out at once: each key's list is its walk without them. */
        const size_t out_set[] = {1, 4, 6};
        for (size_t v = 0; v < 3; v++) {
            assert_true(ch_health_failure(h, out_set[v], 90000, v));
            down[out_set[v]] = true;
            check_routes(t, h, down, 3, 19 + v);
        }
        ch_health_free(h);
        ch_table_free(t);
        tu_nodes_free(&ns);
    }
}

static void test_route_depth_and_all_down(void **state)
{
    (void)state;
    ch_health_options o = hopts(1, 10000, 1000, 60000, 0.5, 0);
    for (size_t a = 0; a < NALGOS; a++) {
        tu_nodes ns;
        ch_table *t = walk_table(a, &ns);
        ch_health *h = hnew(NODES, &o);
        size_t out[NODES + 4], count;
        const char *key = "user:42";
        size_t len = strlen(key);

        count = 99;
        assert_int_equal(ch_route(t, h, key, len, 0, NULL, &count), CH_OK);
        assert_int_equal(count, 0);
        assert_int_equal(ch_route(t, h, key, len, 0, NULL, NULL), CH_OK);
        for (size_t depth = 1; depth <= NODES + 4; depth++) {
            assert_int_equal(ch_route(t, h, key, len, depth, out, &count), CH_OK);
            assert_int_equal(count, depth < NODES ? depth : NODES);
            for (size_t c = 0; c < count; c++) /* distinct */
                assert_false(in(out, c, out[c]));
        }
        /* Ejecting nodes one by one shrinks the list by one each time, to nothing. */
        for (size_t x = 0; x < NODES; x++) {
            assert_true(ch_health_failure(h, x, 0, x));
            assert_int_equal(ch_route(t, h, key, len, NODES + 4, out, &count), CH_OK);
            assert_int_equal(count, NODES - 1 - x);
            for (size_t c = 0; c < count; c++)
                assert_true(out[c] > x && ch_health_is_up(h, out[c]));
        }
        char k2[48];
        for (size_t k = 0; k < 2000; k++) {
            size_t l2 = tu_key(k2, 23, k);
            count = 99;
            assert_int_equal(ch_route(t, h, k2, l2, 1, out, &count), CH_OK);
            assert_int_equal(count, 0);
            assert_int_equal(ch_route(t, h, k2, l2, NODES, out, &count), CH_OK);
            assert_int_equal(count, 0);
        }
        ch_health_free(h);
        ch_table_free(t);
        tu_nodes_free(&ns);
    }
}

static void test_route_jump(void **state)
{
    (void)state;
    tu_nodes ns = tu_nodes_random(5, NODES, "j");
    ch_table *t = tu_build(ns.nodes, NODES, CH_ALGO_JUMP, CH_HASH_DEFAULT, CH_DEFAULT_VNODES);
    ch_health_options o = hopts(1, 10000, 1000, 60000, 0.5, 0);
    ch_health *h = hnew(NODES, &o);
    size_t out[4], count;
    assert_int_equal(ch_route(t, h, "k", 1, 2, out, &count), CH_EUNSUPPORTED);
    assert_int_equal(ch_route(t, NULL, "k", 1, 2, out, &count), CH_EUNSUPPORTED);
    assert_true(ch_health_failure(h, 2, 0, 0));
    char key[48];
    size_t moved = 0;
    for (size_t k = 0; k < KEYS; k++) {
        size_t len = tu_key(key, 29, k);
        size_t owner = ch_lookup(t, key, len);
        assert_int_equal(ch_route(t, h, key, len, 1, out, &count), CH_OK);
        if (owner == 2) {
            moved++;
            assert_int_equal(count, 0); /* no second choice */
        } else {
            assert_int_equal(count, 1);
            assert_int_equal(out[0], owner);
        }
        assert_int_equal(ch_route(t, NULL, key, len, 1, out, &count), CH_OK);
        assert_int_equal(count, 1);
        assert_int_equal(out[0], owner);
    }
    assert_true(moved > 0);
    ch_health_free(h);
    ch_table_free(t);
    tu_nodes_free(&ns);
}

static void test_route_invalid(void **state)
{
    (void)state;
    tu_nodes ns = tu_nodes_random(9, NODES, "n");
    ch_table *t = tu_build(ns.nodes, NODES, CH_ALGO_RING, CH_HASH_DEFAULT, CH_DEFAULT_VNODES);
    ch_health *h = hnew(NODES, NULL), *other = hnew(NODES + 1, NULL);
    size_t out[2], count;
    assert_int_equal(ch_route(NULL, h, "k", 1, 1, out, &count), CH_EINVAL);
    assert_int_equal(ch_route(t, h, "k", 1, 1, NULL, &count), CH_EINVAL);
    assert_int_equal(ch_route(t, h, "k", 1, 1, out, NULL), CH_EINVAL);
    assert_int_equal(ch_route(t, h, NULL, 1, 1, out, &count), CH_EINVAL);
    /* A tracker for another number of nodes belongs to another membership. */
    assert_int_equal(ch_route(t, other, "k", 1, 1, out, &count), CH_EINVAL);
    /* The empty key is a key. */
    assert_int_equal(ch_route(t, h, NULL, 0, 2, out, &count), CH_OK);
    assert_int_equal(count, 2);
    assert_int_equal(out[0], ch_lookup(t, "", 0));
    ch_health_free(h);
    ch_health_free(other);
    ch_table_free(t);
    tu_nodes_free(&ns);
}

/* ---- membership ---------------------------------------------------------------------------- */

static const ch_member base_members[] = {
    {"alpha", "10.0.0.1:6379", "cache-a", 1.0},
    {"beta", "10.0.0.2:6379", NULL, 2.0},
    {"gamma", "/var/run/redis.sock", "cache-c", 0.5},
    {"delta", "10.0.0.4:6380", "", 1.0},
};
#define NBASE (sizeof(base_members) / sizeof(*base_members))

static ch_membership *mbuild(const ch_member *m, size_t n, const ch_options *opt,
                             const char *version)
{
    ch_membership *ms = NULL;
    int rc = ch_membership_build(m, n, opt, version, &ms);
    if (rc != CH_OK)
        fail_msg("ch_membership_build: %s", ch_strerror(rc));
    return ms;
}

/* The version of a build, copied. */
static void version_of(const ch_member *m, size_t n, const ch_options *opt, char *buf)
{
    ch_membership *ms = mbuild(m, n, opt, NULL);
    snprintf(buf, CH_VERSION_MAX, "%s", ch_membership_version(ms));
    ch_membership_free(ms);
}

static void test_membership_version_content(void **state)
{
    (void)state;
    char v1[CH_VERSION_MAX], v2[CH_VERSION_MAX], v[CH_VERSION_MAX];
    version_of(base_members, NBASE, NULL, v1);
    version_of(base_members, NBASE, NULL, v2);
    assert_string_equal(v1, v2);
    /* "m-" and 12 lowercase hex digits. */
    assert_int_equal(strlen(v1), 14);
    assert_memory_equal(v1, "m-", 2);
    for (size_t i = 2; i < 14; i++)
        assert_non_null(strchr("0123456789abcdef", v1[i]));
    /* NULL options and the explicit defaults are the same membership. */
    ch_options def;
    ch_options_init(&def);
    version_of(base_members, NBASE, &def, v);
    assert_string_equal(v, v1);
    /* The display name is not part of the content. */
    ch_member m[NBASE];
    memcpy(m, base_members, sizeof(m));
    m[0].name = "renamed";
    m[1].name = "now named";
    version_of(m, NBASE, NULL, v);
    assert_string_equal(v, v1);

    /* Any member field, the order, or any option: a different version. */
    char seen[16][CH_VERSION_MAX];
    size_t nseen = 0;
    snprintf(seen[nseen++], CH_VERSION_MAX, "%s", v1);
#define CHANGED(members, n, opt)                                          \
    do {                                                                  \
        version_of(members, n, opt, v);                                   \
        for (size_t s_ = 0; s_ < nseen; s_++)                             \
            assert_string_not_equal(v, seen[s_]);                         \
        snprintf(seen[nseen++], CH_VERSION_MAX, "%s", v);                 \
    } while (0)
    memcpy(m, base_members, sizeof(m));
    m[1].weight = nextafter(2.0, 3.0); /* the smallest change of a double */
    CHANGED(m, NBASE, NULL);
    memcpy(m, base_members, sizeof(m));
    m[2].addr = "/var/run/redis2.sock";
    CHANGED(m, NBASE, NULL);
    memcpy(m, base_members, sizeof(m));
    m[3].id = "delta2";
    CHANGED(m, NBASE, NULL);
    memcpy(m, base_members, sizeof(m));
    m[0] = base_members[1];
    m[1] = base_members[0];
    CHANGED(m, NBASE, NULL);
    CHANGED(base_members, NBASE - 1, NULL);
    /* Fields that could run together without terminators: id "alpha" addr "x" vs id "alph"
     * addr "ax". */
    memcpy(m, base_members, sizeof(m));
    m[0].addr = "x";
    CHANGED(m, NBASE, NULL);
    m[0].id = "alph";
    m[0].addr = "ax";
    CHANGED(m, NBASE, NULL);
    ch_options o = def;
    o.hash_tag[0] = '{';
    o.hash_tag[1] = '}';
    CHANGED(base_members, NBASE, &o);
    o = def;
    o.algo = CH_ALGO_MAGLEV;
    CHANGED(base_members, NBASE, &o);
    o = def;
    o.hash = CH_HASH_MURMUR3_32;
    CHANGED(base_members, NBASE, &o);
    o = def;
    o.vnodes = 100;
    CHANGED(base_members, NBASE, &o);
    o = def;
    o.table_size = 101;
    CHANGED(base_members, NBASE, &o);
#undef CHANGED
}

/* Appends a field and its NUL terminator. */
static size_t field(char *buf, size_t at, const char *s, size_t len)
{
    memcpy(buf + at, s, len);
    buf[at + len] = '\0';
    return at + len + 1;
}

/* The documented definition (src/route/membership.c): XXH3-64 over the NUL-terminated fields
 * algo, hash, vnodes, table_size, the two hash tag bytes, then id, addr, "%.17g" weight per
 * member; the version is "m-" and the hash's high 48 bits in lowercase hex. */
static void test_membership_version_definition(void **state)
{
    (void)state;
    ch_options o;
    ch_options_init(&o);
    o.hash_tag[0] = '{';
    o.hash_tag[1] = '}';
    o.vnodes = 40;
    char buf[1024], num[32];
    size_t at = 0;
    at = field(buf, at, "ring", 4);
    at = field(buf, at, "fnv1a32_fmix", 12);
    at = field(buf, at, "40", 2);
    at = field(buf, at, "65537", 5);
    at = field(buf, at, "{}", 2);
    for (size_t i = 0; i < NBASE; i++) {
        at = field(buf, at, base_members[i].id, strlen(base_members[i].id));
        at = field(buf, at, base_members[i].addr, strlen(base_members[i].addr));
        int len = snprintf(num, sizeof(num), "%.17g", base_members[i].weight);
        at = field(buf, at, num, (size_t)len);
    }
    uint64_t hv;
    assert_int_equal(ch_hash64(CH_HASH_XXH3, buf, at, &hv), CH_OK);
    char expect[CH_VERSION_MAX];
    snprintf(expect, sizeof(expect), "m-%012llx", (unsigned long long)(hv >> 16));
    ch_membership *m = mbuild(base_members, NBASE, &o, NULL);
    assert_string_equal(ch_membership_version(m), expect);
    ch_membership_free(m);
}

static void test_membership_explicit_version(void **state)
{
    (void)state;
    ch_membership *m = mbuild(base_members, NBASE, NULL, "pool-a@2024-06-01 #7");
    assert_string_equal(ch_membership_version(m), "pool-a@2024-06-01 #7");
    ch_membership_free(m);

    char longest[CH_VERSION_MAX];
    memset(longest, 'v', CH_VERSION_MAX - 1);
    longest[CH_VERSION_MAX - 1] = '\0';
    m = mbuild(base_members, NBASE, NULL, longest);
    assert_string_equal(ch_membership_version(m), longest);
    ch_membership_free(m);
    m = mbuild(base_members, NBASE, NULL, "~");
    assert_string_equal(ch_membership_version(m), "~");
    ch_membership_free(m);

    char too_long[CH_VERSION_MAX + 1];
    memset(too_long, 'v', CH_VERSION_MAX);
    too_long[CH_VERSION_MAX] = '\0';
    const char *bad[] = {"", too_long, "a\x01", "tab\there", "new\nline", "del\x7f", "caf\xc3\xa9"};
    for (size_t b = 0; b < sizeof(bad) / sizeof(*bad); b++) {
        m = NULL;
        assert_int_equal(ch_membership_build(base_members, NBASE, NULL, bad[b], &m), CH_EINVAL);
        assert_null(m);
    }
}

static void test_membership_accessors(void **state)
{
    (void)state;
    /* The caller's strings live in buffers rewritten after the build: the membership copied. */
    char ids[NBASE][16], addrs[NBASE][32], names[NBASE][16];
    ch_member in_m[NBASE];
    for (size_t i = 0; i < NBASE; i++) {
        snprintf(ids[i], sizeof(ids[i]), "%s", base_members[i].id);
        snprintf(addrs[i], sizeof(addrs[i]), "%s", base_members[i].addr);
        in_m[i] = base_members[i];
        in_m[i].id = ids[i];
        in_m[i].addr = addrs[i];
        if (base_members[i].name != NULL) {
            snprintf(names[i], sizeof(names[i]), "%s", base_members[i].name);
            in_m[i].name = names[i];
        }
    }
    ch_membership *m = mbuild(in_m, NBASE, NULL, NULL);
    memset(ids, 'X', sizeof(ids));
    memset(addrs, 'Y', sizeof(addrs));
    memset(names, 'Z', sizeof(names));

    assert_int_equal(ch_membership_size(m), NBASE);
    const ch_table *t = ch_membership_table(m);
    assert_non_null(t);
    ch_table_info info = {.size = sizeof(info)};
    assert_int_equal(ch_table_info_get(t, &info), CH_OK);
    assert_int_equal(info.nodes, NBASE);
    assert_int_equal(info.algo, CH_ALGO_RING);
    for (size_t i = 0; i < NBASE; i++) {
        const ch_member *mm = ch_membership_member(m, i);
        assert_non_null(mm);
        assert_string_equal(mm->id, base_members[i].id);
        assert_string_equal(mm->addr, base_members[i].addr);
        if (base_members[i].name == NULL)
            assert_null(mm->name);
        else
            assert_string_equal(mm->name, base_members[i].name);
        assert_true(mm->weight == base_members[i].weight);
        /* The table is built from the members, in their order. */
        assert_string_equal(ch_table_node_id(t, i), base_members[i].id);
        assert_true(ch_table_node_weight(t, i) == base_members[i].weight);
        assert_int_equal(ch_membership_find(m, base_members[i].id), i);
    }
    assert_null(ch_membership_member(m, NBASE));
    assert_int_equal(ch_membership_find(m, "epsilon"), SIZE_MAX);
    assert_int_equal(ch_membership_find(m, "alph"), SIZE_MAX);
    assert_int_equal(ch_membership_find(m, ""), SIZE_MAX);
    assert_int_equal(ch_membership_find(m, NULL), SIZE_MAX);

    /* The table routes: a membership, a tracker of its size and the router work together. */
    ch_health *h = hnew(ch_membership_size(m), NULL);
    size_t out[NBASE], count;
    assert_int_equal(ch_route(t, h, "user:1", 6, NBASE, out, &count), CH_OK);
    assert_int_equal(count, NBASE);
    assert_int_equal(out[0], ch_lookup(t, "user:1", 6));
    ch_health_free(h);
    ch_membership_free(m);
    ch_membership_free(NULL);
}

static void test_membership_errors(void **state)
{
    (void)state;
    ch_member m[NBASE];
    ch_membership *ms;
    tu_alloc al;
    ch_options o;
    ch_options_init(&o);
    tu_alloc_init(&al, -1);
    o.allocator = &al.a;

    struct {
        size_t at;
        ch_member with;
        int rc;
    } cases[] = {
        {2, {"alpha", "10.9.9.9:1", NULL, 1.0}, CH_EDUPID},
        {1, {"", "10.9.9.9:1", NULL, 1.0}, CH_EBADID},
        {1, {NULL, "10.9.9.9:1", NULL, 1.0}, CH_EBADID},
        {3, {"zeta", "10.9.9.9:1", NULL, 0.0}, CH_EWEIGHT},
        {3, {"zeta", "10.9.9.9:1", NULL, NAN}, CH_EWEIGHT},
        {2, {"zeta", "", NULL, 1.0}, CH_EINVAL},
        {2, {"zeta", NULL, NULL, 1.0}, CH_EINVAL},
        /* The table is built (and must be freed) before the addresses are found wanting. */
        {NBASE - 1, {"zeta", "", "z", 1.0}, CH_EINVAL},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(*cases); c++) {
        memcpy(m, base_members, sizeof(m));
        m[cases[c].at] = cases[c].with;
        for (int ver = 0; ver < 2; ver++) {
            ms = NULL;
            assert_int_equal(ch_membership_build(m, NBASE, &o, ver ? "v1" : NULL, &ms),
                             cases[c].rc);
            assert_null(ms);
            assert_int_equal(al.live, 0); /* the table's allocations were all returned */
        }
    }
    ms = NULL;
    assert_int_equal(ch_membership_build(base_members, 0, NULL, NULL, &ms), CH_EEMPTY);
    assert_int_equal(ch_membership_build(NULL, 2, NULL, NULL, &ms), CH_EINVAL);
    assert_int_equal(ch_membership_build(base_members, NBASE, NULL, NULL, NULL), CH_EINVAL);
    ch_options jump;
    ch_options_init(&jump);
    jump.algo = CH_ALGO_JUMP; /* base_members has unequal weights */
    assert_int_equal(ch_membership_build(base_members, NBASE, &jump, NULL, &ms),
                     CH_EUNSUPPORTED);
    ch_options badopt;
    ch_options_init(&badopt);
    badopt.hash_tag[0] = '{'; /* half a hash tag */
    assert_int_equal(ch_membership_build(base_members, NBASE, &badopt, NULL, &ms), CH_EINVAL);
    assert_null(ms);

    /* Success through the caller's allocator: the table uses it, and gives it all back. */
    ms = mbuild(base_members, NBASE, &o, NULL);
    assert_true(al.live > 0);
    ch_membership_free(ms);
    assert_int_equal(al.live, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_health_options),
        cmocka_unit_test(test_eject_after_exactly_k),
        cmocka_unit_test(test_success_resets_streak),
        cmocka_unit_test(test_failure_window),
        cmocka_unit_test(test_ejected_failures_ignored),
        cmocka_unit_test(test_eject_disabled),
        cmocka_unit_test(test_backoff_exact_doubling),
        cmocka_unit_test(test_backoff_jitter_bounds),
        cmocka_unit_test(test_readmission_needs_probe),
        cmocka_unit_test(test_flapping_node),
        cmocka_unit_test(test_route_all_up),
        cmocka_unit_test(test_route_ejection_moves_only_its_keys),
        cmocka_unit_test(test_route_depth_and_all_down),
        cmocka_unit_test(test_route_jump),
        cmocka_unit_test(test_route_invalid),
        cmocka_unit_test(test_membership_version_content),
        cmocka_unit_test(test_membership_version_definition),
        cmocka_unit_test(test_membership_explicit_version),
        cmocka_unit_test(test_membership_accessors),
        cmocka_unit_test(test_membership_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

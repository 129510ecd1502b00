/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_hung_node.c — a hung node (SIGSTOP) against 4 real redis-servers.
 *
 * A stopped server still completes TCP handshakes (the kernel does) but never answers, so every
 * request to it runs into the timeout. Each call must return (bounded generously: < 10 x the
 * timeout, so that no timing flake can fail it), served by the next node of the key's walk; the
 * node is ejected at exactly the K-th timeout, after which its keys go straight to their
 * successors. After SIGCONT a probe readmits it, and its keys are hits there again: the data
 * survived, so this shows the keys routed back.
 */
#include "cache_fixture.h"

#include <stdarg.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#define NODES 4
#define KEYS 2000
#define VICTIM 2 /* cache-03 */
#define K 3
#define TIMEOUT_MS 250
#define RETRY_MIN_MS 200
#define RETRY_MAX_MS 800
#define CALL_LIMIT_MS (10.0 * TIMEOUT_MS)

static void hung_node(void **state)
{
    (void)state;
    rh_fleet *f = rh_fleet_start(NODES);
    assert_non_null(f);
    ch_health_options h = fx_health(K, 60000, RETRY_MIN_MS, RETRY_MAX_MS);
    ch_cache *c = fx_open(f, &h, TIMEOUT_MS, 2);

    char key[32];
    size_t victim_keys[KEYS], nvictim = 0;
    for (size_t k = 0; k < KEYS; k++) {
        size_t len = fx_key(key, k);
        ch_cache_result r;
        assert_int_equal(ch_cache_set(c, key, len, key, len, 0, &r), CH_OK);
        assert_int_equal(r.status, CH_CACHE_OK);
        if (fx_owner(c, key) == VICTIM)
            victim_keys[nvictim++] = k;
        ch_cache_result_free(&r);
    }
    assert_true(nvictim > 2 * K);

    assert_int_equal(rh_pause(f, VICTIM), 0);
    /* The first K requests to its keys each wait one timeout, then fail over. */
    for (size_t t = 0; t < K; t++) {
        size_t len = fx_key(key, victim_keys[t]);
        ch_cache_result r;
        double t0 = rh_now_ms();
        assert_int_equal(ch_cache_get(c, key, len, &r), CH_OK);
        double took = rh_now_ms() - t0;
        printf("hung node: request %zu took %.0f ms (%s, %s)\n", t + 1, took,
               ch_cache_status_name(r.status), ch_cache_fail_name(r.fail));
        assert_true(took < CALL_LIMIT_MS);
        assert_int_equal(r.fail, CH_CACHE_FAIL_TIMEOUT);
        assert_int_equal(r.attempts, 2);
        assert_int_equal(r.status, CH_CACHE_MISS); /* the successor never had it */
        assert_int_equal(r.node, fx_successor(c, key, VICTIM));
        assert_true(r.failover);
        ch_cache_result_free(&r);
        /* Ejected at exactly the K-th timeout. */
        assert_int_equal(fx_node(c, VICTIM).up, t + 1 < K);
    }
    assert_int_equal(fx_node(c, VICTIM).ejections, 1);
    assert_int_equal(fx_node(c, VICTIM).errors, K);

    /* Ejected: its keys go to their successors without trying it; others stay hits at their
     * owners. A due probe may cost one timeout, still bounded. */
    for (size_t k = 0; k < KEYS; k++) {
        size_t len = fx_key(key, k);
        ch_cache_result r;
        double t0 = rh_now_ms();
        assert_int_equal(ch_cache_get(c, key, len, &r), CH_OK);
        assert_true(rh_now_ms() - t0 < CALL_LIMIT_MS);
        size_t owner = fx_owner(c, key);
        if (owner == VICTIM) {
            assert_int_equal(r.status, CH_CACHE_MISS);
            assert_int_equal(r.attempts, 1);
            assert_int_equal(r.node, fx_successor(c, key, VICTIM));
        } else {
            assert_int_equal(r.status, CH_CACHE_HIT);
            assert_int_equal(r.node, owner);
            assert_memory_equal(r.value, key, len);
        }
        ch_cache_result_free(&r);
    }
    assert_int_equal(fx_metrics(c).failed, 0);
    assert_false(fx_node(c, VICTIM).up);

    assert_int_equal(rh_resume(f, VICTIM), 0);
    double took = fx_wait_readmitted(c, VICTIM, RETRY_MAX_MS * 1.5 + 2000);
    printf("hung node: readmitted %.0f ms after SIGCONT\n", took);
    assert_true(took >= 0);
    assert_int_equal(fx_node(c, VICTIM).readmissions, 1);

    /* Its keys are back, with their data. */
    for (size_t t = 0; t < nvictim; t++) {
        size_t len = fx_key(key, victim_keys[t]);
        ch_cache_result r;
        assert_int_equal(ch_cache_get(c, key, len, &r), CH_OK);
        assert_int_equal(r.status, CH_CACHE_HIT);
        assert_int_equal(r.node, VICTIM);
        assert_false(r.failover);
        assert_memory_equal(r.value, key, len);
        ch_cache_result_free(&r);
    }
    assert_int_equal(fx_metrics(c).failed, 0);

    ch_cache_close(c);
    rh_fleet_stop(f);
}

int main(void)
{
    rh_require_redis("integration_hung_node");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hung_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

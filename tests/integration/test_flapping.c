/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_flapping.c — a flapping node against 4 real redis-servers: killed and restarted every
 * few tens of milliseconds for 3 s while a loop reads and writes through the client.
 *
 * Claims, each checked against the policy or the table, not against the client's own output:
 *   - no request fails (depth 2, and only one node ever fails);
 *   - no other node's keys ever move: every request for a key the victim does not own is served
 *     by the key's owner; the victim's keys are served by the victim or by their successor;
 *   - ejections are limited by the backoff, not one per failure: every readmission comes at
 *     least (1 - jitter) x retry_min after its ejection (a probe is due no sooner), hence at
 *     most 1 + T / ((1 - jitter) x retry_min) ejections in T, and every ejection took K
 *     failures (how many kills that is depends on the machine's speed, so it is printed, not
 *     asserted);
 *   - the other nodes record no failure.
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
#define KEYS 400
#define VICTIM 0 /* cache-01 */
#define K 3
#define TIMEOUT_MS 200
#define RETRY_MIN_MS 500
#define RETRY_MAX_MS 2000
#define JITTER 0.5
#define DURATION_MS 3000.0
#define DOWN_MS 40.0
#define UP_MS 120.0
#define CLOCK_SLACK_MS 5.0 /* the client's clock has 1 ms steps; calls end after the event */

typedef struct expect {
    size_t owner[KEYS];
    size_t successor[KEYS]; /* the first node of the walk besides the victim */
} expect;

static void check_routing(const expect *e, size_t k, const ch_cache_result *r)
{
    if (r->status == CH_CACHE_ERROR)
        fail_msg("key %zu: error (%s): %s", k, ch_cache_fail_name(r->fail), r->message);
    if (e->owner[k] != VICTIM) {
        if (r->node != e->owner[k])
            fail_msg("key %zu of node %zu was served by node %zu", k, e->owner[k], r->node);
    } else if (r->node != VICTIM && r->node != e->successor[k]) {
        fail_msg("victim key %zu served by node %zu, not %d or its successor %zu", k, r->node,
                 VICTIM, e->successor[k]);
    }
}

/* Watches the victim's up/down transitions between requests: every readmission must come at
 * least the shortest backoff after its ejection. */
typedef struct watch {
    bool up;
    double ejected_at;
    size_t ejections, readmissions;
    double shortest_gap;
} watch;

static void observe(watch *w, const ch_cache *c)
{
    bool up = fx_node(c, VICTIM).up;
    double now = rh_now_ms();
    if (w->up && !up) {
        w->ejected_at = now;
        w->ejections++;
    } else if (!w->up && up) {
        double gap = now - w->ejected_at;
        w->readmissions++;
        if (gap < w->shortest_gap)
            w->shortest_gap = gap;
        if (gap < (1.0 - JITTER) * RETRY_MIN_MS - CLOCK_SLACK_MS)
            fail_msg("readmitted %.1f ms after its ejection, before any probe could be due",
                     gap);
    }
    w->up = up;
}

static void one_request(ch_cache *c, const expect *e, size_t i)
{
    char key[32];
    size_t k = i % KEYS;
    size_t len = fx_key(key, k);
    ch_cache_result r;
    if (i % 2 == 0)
        assert_int_equal(ch_cache_get(c, key, len, &r), CH_OK);
    else
        assert_int_equal(ch_cache_set(c, key, len, key, len, 0, &r), CH_OK);
    check_routing(e, k, &r);
    ch_cache_result_free(&r);
}

static void flapping_node(void **state)
{
    (void)state;
    rh_fleet *f = rh_fleet_start(NODES);
    assert_non_null(f);
    ch_health_options h = fx_health(K, 10000, RETRY_MIN_MS, RETRY_MAX_MS);
    h.jitter = JITTER;
    ch_cache *c = fx_open(f, &h, TIMEOUT_MS, 2);

    static expect e;
    char key[32];
    for (size_t k = 0; k < KEYS; k++) {
        fx_key(key, k);
        e.owner[k] = fx_owner(c, key);
        e.successor[k] = fx_successor(c, key, VICTIM);
    }

    watch w = {.up = true, .shortest_gap = 1e9};
    size_t kills = 0, requests = 0;
    bool running = true;
    double start = rh_now_ms(), next_flip = start;
    while (rh_now_ms() - start < DURATION_MS) {
        if (rh_now_ms() >= next_flip) {
            if (running) {
                assert_int_equal(rh_kill(f, VICTIM), 0);
                kills++;
            } else {
                assert_int_equal(rh_restart(f, VICTIM), 0);
            }
            running = !running;
            next_flip = rh_now_ms() + (running ? UP_MS : DOWN_MS);
        }
        one_request(c, &e, requests++);
        observe(&w, c);
    }
    double elapsed = rh_now_ms() - start;

    ch_cache_node_metrics v = fx_node(c, VICTIM);
    size_t bound = 1 + (size_t)(elapsed / ((1.0 - JITTER) * RETRY_MIN_MS));
    printf("flapping: %zu requests, %zu kills, %llu failures, %llu ejections (backoff bound "
           "%zu), %llu probes, %llu readmissions, shortest ejection %.0f ms\n",
           requests, kills, (unsigned long long)v.errors, (unsigned long long)v.ejections,
           bound, (unsigned long long)v.probes, (unsigned long long)v.readmissions,
           w.readmissions > 0 ? w.shortest_gap : 0.0);
    assert_int_equal(v.ejections, w.ejections);
    assert_true(v.ejections >= 1);
    assert_true(v.ejections <= bound);
    assert_true(v.errors >= K * v.ejections);
    for (size_t i = 0; i < NODES; i++) {
        if (i == VICTIM)
            continue;
        assert_int_equal(fx_node(c, i).errors, 0);
        assert_int_equal(fx_node(c, i).ejections, 0);
    }
    assert_int_equal(fx_metrics(c).failed, 0);

    /* Settled: back up, readmitted, and every key at its owner again. */
    if (!running)
        assert_int_equal(rh_restart(f, VICTIM), 0);
    if (!fx_node(c, VICTIM).up)
        assert_true(fx_wait_readmitted(c, VICTIM, RETRY_MAX_MS * 1.5 + 2000) >= 0);
    for (size_t k = 0; k < KEYS; k++) {
        size_t len = fx_key(key, k);
        ch_cache_result r;
        assert_int_equal(ch_cache_get(c, key, len, &r), CH_OK);
        assert_int_not_equal(r.status, CH_CACHE_ERROR);
        assert_int_equal(r.node, e.owner[k]);
        ch_cache_result_free(&r);
    }

    ch_cache_close(c);
    rh_fleet_stop(f);
}

int main(void)
{
    rh_require_redis("integration_flapping_node");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(flapping_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_lost_node.c — the lost-node scenario against 4 real redis-servers.
 *
 * 10,000 keys are written through the client; each server must then hold exactly the keys the
 * placement table gives it (DBSIZE, Redis's own count). One server is killed (SIGKILL). Reading
 * every key back: every read completes, never an error; the misses are exactly the keys the
 * table gives the killed node, each served by the next node of its walk; every other key is a
 * hit at its owner; the node is ejected after exactly K failures. While it is down its probes
 * fail and it stays out. Restarted on its port, a probe readmits it after the backoff, and
 * exactly its keys route back to it (empty now: no persistence).
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
#define KEYS 10000
#define VICTIM 1 /* cache-02 */
#define K 3
#define RETRY_MIN_MS 200
#define RETRY_MAX_MS 800
#define TIMEOUT_MS 1000

static void value_of(char *buf, size_t k)
{
    snprintf(buf, 48, "value-%zu", k);
}

/* Writes every key; each lands on its owner. Fills owned[] from the table. */
static void write_all(ch_cache *c, size_t owned[NODES])
{
    char key[32], val[48];
    for (size_t k = 0; k < KEYS; k++) {
        size_t len = fx_key(key, k);
        value_of(val, k);
        ch_cache_result r;
        assert_int_equal(ch_cache_set(c, key, len, val, strlen(val), 0, &r), CH_OK);
        assert_int_equal(r.status, CH_CACHE_OK);
        size_t owner = fx_owner(c, key);
        assert_int_equal(r.node, owner);
        assert_false(r.failover);
        owned[owner]++;
        ch_cache_result_free(&r);
    }
}

/* Reads every key with `down` dead (SIZE_MAX: none); checks each result against the table.
 * Returns the number of misses. */
static size_t read_all(ch_cache *c, size_t down, bool victim_empty)
{
    char key[32], val[48];
    size_t misses = 0;
    for (size_t k = 0; k < KEYS; k++) {
        size_t len = fx_key(key, k);
        value_of(val, k);
        ch_cache_result r;
        assert_int_equal(ch_cache_get(c, key, len, &r), CH_OK);
        size_t owner = fx_owner(c, key);
        if (owner == down) {
            /* Its keys (and only those) go to the next node of their walk, which lacks them. */
            assert_int_equal(r.status, CH_CACHE_MISS);
            assert_int_equal(r.node, fx_successor(c, key, down));
            assert_true(r.failover);
            misses++;
        } else if (owner == VICTIM && victim_empty) {
            assert_int_equal(r.status, CH_CACHE_MISS);
            assert_int_equal(r.node, owner);
            assert_false(r.failover);
            misses++;
        } else {
            if (r.status != CH_CACHE_HIT)
                fail_msg("%s: %s (%s) at node %zu", key, ch_cache_status_name(r.status),
                         r.message, r.node);
            assert_int_equal(r.node, owner);
            assert_false(r.failover);
            assert_int_equal(r.len, strlen(val));
            assert_memory_equal(r.value, val, r.len);
        }
        ch_cache_result_free(&r);
    }
    return misses;
}

static void lost_node(void **state)
{
    (void)state;
    rh_fleet *f = rh_fleet_start(NODES);
    assert_non_null(f);
    ch_health_options h = fx_health(K, 10000, RETRY_MIN_MS, RETRY_MAX_MS);
    ch_cache *c = fx_open(f, &h, TIMEOUT_MS, 2);

    size_t owned[NODES] = {0};
    write_all(c, owned);
    for (size_t i = 0; i < NODES; i++)
        assert_int_equal(rh_dbsize(f, i), (long long)owned[i]);

    assert_int_equal(rh_kill(f, VICTIM), 0);
    size_t misses = read_all(c, VICTIM, false);
    printf("lost node: %zu misses of %d reads (%.1f%%), the killed node owned %zu\n", misses, KEYS,
           100.0 * (double)misses / KEYS, owned[VICTIM]);
    assert_int_equal(misses, owned[VICTIM]);
    /* About 1/4: a sanity bound on the table, not the claim (which is the equality above). */
    assert_true(misses > KEYS / 8 && misses < KEYS * 3 / 8);

    ch_cache_metrics m = fx_metrics(c);
    assert_int_equal(m.failed, 0);
    ch_cache_node_metrics v = fx_node(c, VICTIM);
    assert_false(v.up);
    assert_int_equal(v.ejections, 1);
    assert_int_equal(v.errors, K); /* ejected at the K-th failure; skipped afterwards */
    assert_int_equal(v.readmissions, 0);
    assert_int_equal(m.nodes_up, NODES - 1);

    /* Past the longest first delay (retry_min x 1.5) its probe is due, and fails: no
     * readmission without an answer. */
    rh_sleep_ms(RETRY_MIN_MS * 3 / 2 + 100);
    size_t readmitted = 99;
    assert_int_equal(ch_cache_probe(c, &readmitted), CH_OK);
    assert_int_equal(readmitted, 0);
    v = fx_node(c, VICTIM);
    assert_false(v.up);
    assert_true(v.probes >= 1);

    assert_int_equal(rh_restart(f, VICTIM), 0);
    /* The next probe is at most retry_max x 1.5 away. */
    double took = fx_wait_readmitted(c, VICTIM, RETRY_MAX_MS * 1.5 + 2000);
    assert_true(took >= 0);
    v = fx_node(c, VICTIM);
    assert_int_equal(v.ejections, 1);
    assert_int_equal(v.readmissions, 1);

    /* Its keys are its own again (misses: it restarted empty); nobody else's moved. */
    misses = read_all(c, SIZE_MAX, true);
    assert_int_equal(misses, owned[VICTIM]);
    assert_int_equal(fx_metrics(c).failed, 0);

    ch_cache_close(c);
    rh_fleet_stop(f);
}

int main(void)
{
    rh_require_redis("integration_lost_node");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lost_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

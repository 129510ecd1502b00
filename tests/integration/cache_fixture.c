/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache_fixture.c — see cache_fixture.h.
 */
#include "cache_fixture.h"

#include <stdarg.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>
#include <cmocka.h>

ch_health_options fx_health(uint32_t failure_limit, uint64_t window_ms, uint64_t retry_min_ms,
                            uint64_t retry_max_ms)
{
    ch_health_options h;
    ch_health_options_init(&h);
    h.failure_limit = failure_limit;
    h.failure_window_ms = window_ms;
    h.retry_min_ms = retry_min_ms;
    h.retry_max_ms = retry_max_ms;
    return h;
}

ch_cache *fx_open(const rh_fleet *f, const ch_health_options *h, int timeout_ms, size_t depth)
{
    char ids[RH_MAX_SERVERS][32];
    ch_member members[RH_MAX_SERVERS];
    for (size_t i = 0; i < f->n; i++) {
        snprintf(ids[i], sizeof(ids[i]), "cache-%02zu", i + 1);
        members[i] = (ch_member){.id = ids[i], .addr = f->servers[i].addr, .weight = 1.0};
    }
    ch_cache_options o;
    ch_cache_options_init(&o);
    o.timeout_ms = timeout_ms;
    o.failover_depth = depth;
    o.seed = 42;
    ch_cache *c = NULL;
    int rc = ch_cache_open(members, f->n, NULL, h, &o, &c);
    if (rc != CH_OK)
        fail_msg("ch_cache_open: %s", ch_strerror(rc));
    return c;
}

size_t fx_key(char *buf, size_t k)
{
    return (size_t)snprintf(buf, 32, "key:%zu", k);
}

size_t fx_owner(const ch_cache *c, const char *key)
{
    return ch_lookup(ch_membership_table(ch_cache_membership(c)), key, strlen(key));
}

size_t fx_successor(const ch_cache *c, const char *key, size_t down)
{
    const ch_table *t = ch_membership_table(ch_cache_membership(c));
    size_t walk[RH_MAX_SERVERS], count = 0;
    assert_int_equal(ch_replicas(t, key, strlen(key), RH_MAX_SERVERS, walk, &count), CH_OK);
    for (size_t k = 0; k < count; k++)
        if (walk[k] != down)
            return walk[k];
    fail_msg("key %s: no node besides %zu", key, down);
    return SIZE_MAX;
}

ch_cache_node_metrics fx_node(const ch_cache *c, size_t i)
{
    ch_cache_node_metrics m = {.size = sizeof(m)};
    assert_int_equal(ch_cache_node_metrics_get(c, i, &m), CH_OK);
    return m;
}

ch_cache_metrics fx_metrics(const ch_cache *c)
{
    ch_cache_metrics m = {.size = sizeof(m)};
    assert_int_equal(ch_cache_metrics_get(c, &m), CH_OK);
    return m;
}

double fx_wait_readmitted(ch_cache *c, size_t i, double limit_ms)
{
    double start = rh_now_ms();
    while (rh_now_ms() - start < limit_ms) {
        assert_int_equal(ch_cache_probe(c, NULL), CH_OK);
        if (fx_node(c, i).up)
            return rh_now_ms() - start;
        rh_sleep_ms(10);
    }
    return -1;
}

redisContext *fx_direct(const rh_fleet *f, size_t i)
{
    struct timeval tv = {2, 0};
    redisContext *r = redisConnectWithTimeout("127.0.0.1", f->servers[i].port, tv);
    if (r == NULL || r->err)
        fail_msg("connect to server %zu failed", i);
    return r;
}

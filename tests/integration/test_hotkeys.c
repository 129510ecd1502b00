/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_hotkeys.c — libchash-cache's hot keys (issue 25) against real redis-servers: the
 * detector (always on) and the near cache (opt-in). Expected counts are what the test sent;
 * expected server loads are read from each server itself (INFO commandstats), not from the
 * client. What must hold:
 *
 *   - detection: a key read n times is reported first, its true count n + 1 within
 *     [count - count_error, count], its owner the table's;
 *   - the near cache: once a key's reads pass the threshold in a second, its reads stop
 *     reaching its server; a set or del through the client is seen by the next get at once;
 *     a write the client does not make is served stale only by reads that begin before that
 *     write plus the TTL; the bytes held never exceed the bound; mget's hot keys too;
 *   - off by default: every read reaches the server.
 */
#include "cache_fixture.h"

#include <hiredis/hiredis.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

static ch_cache *open_hot(const rh_fleet *f, uint32_t cache_ms, size_t max_bytes,
                          uint32_t threshold)
{
    char ids[RH_MAX_SERVERS][32];
    ch_member members[RH_MAX_SERVERS];
    for (size_t i = 0; i < f->n; i++) {
        snprintf(ids[i], sizeof(ids[i]), "cache-%02zu", i + 1);
        members[i] = (ch_member){.id = ids[i], .addr = f->servers[i].addr, .weight = 1.0};
    }
    ch_health_options h = fx_health(3, 10000, 100, 400);
    ch_cache_options o;
    ch_cache_options_init(&o);
    o.seed = 42;
    o.hot_cache_ms = cache_ms;
    o.hot_cache_max_bytes = max_bytes;
    o.hot_threshold = threshold;
    ch_cache *c = NULL;
    int rc = ch_cache_open(members, f->n, NULL, &h, &o, &c);
    if (rc != CH_OK)
        fail_msg("ch_cache_open: %s", ch_strerror(rc));
    return c;
}


/* GET calls server i has processed (INFO commandstats' cmdstat_get calls). */
static long long gets_at(const rh_fleet *f, size_t i)
{
    redisContext *d = fx_direct(f, i);
    redisReply *r = redisCommand(d, "INFO commandstats");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    const char *p = strstr(r->str, "cmdstat_get:calls=");
    long long calls = p != NULL ? atoll(p + strlen("cmdstat_get:calls=")) : 0;
    freeReplyObject(r);
    redisFree(d);
    return calls;
}

static void set_ok(ch_cache *c, const char *key, const char *val)
{
    ch_cache_result r;
    assert_int_equal(ch_cache_set(c, key, strlen(key), val, strlen(val), 0, &r), CH_OK);
    assert_int_equal(r.status, CH_CACHE_OK);
    ch_cache_result_free(&r);
}

/* The value a get returns ("" for a miss). */
static const char *get_value(ch_cache *c, const char *key)
{
    static char buf[2048];
    ch_cache_result r;
    assert_int_equal(ch_cache_get(c, key, strlen(key), &r), CH_OK);
    if (r.status == CH_CACHE_HIT)
        snprintf(buf, sizeof(buf), "%.*s", (int)r.len, r.value);
    else if (r.status == CH_CACHE_MISS)
        buf[0] = '\0';
    else
        fail_msg("get %s: %s (%s)", key, ch_cache_status_name(r.status), r.message);
    ch_cache_result_free(&r);
    return buf;
}

static void detection(void **state)
{
    (void)state;
    rh_fleet *f = rh_fleet_start(4);
    assert_non_null(f);
    ch_cache *c = open_hot(f, 0, 0, 0);
    char key[32];
    for (size_t k = 0; k < 300; k++) { /* 300 keys written once, read once */
        fx_key(key, k);
        set_ok(c, key, "v");
        assert_string_equal(get_value(c, key), "v");
    }
    enum { READS = 2000 };
    for (int i = 0; i < READS; i++)
        assert_string_equal(get_value(c, "key:7"), "v");
    ch_cache_hotkey hk[10];
    size_t n = 0;
    assert_int_equal(ch_cache_hotkeys(c, hk, 10, &n), CH_OK);
    assert_true(n >= 1);
    assert_int_equal(hk[0].len, strlen("key:7"));
    assert_memory_equal(hk[0].key, "key:7", hk[0].len);
    uint64_t truth = READS + 2; /* its set, its first read, the reads */
    printf("hot key: count %llu (error %llu), true %llu; rate %.0f/s, 60 s rate %.1f/s\n",
           (unsigned long long)hk[0].count, (unsigned long long)hk[0].count_error,
           (unsigned long long)truth, hk[0].rate, hk[0].rate_60s);
    assert_true(hk[0].count >= truth && hk[0].count - hk[0].count_error <= truth);
    assert_int_equal(hk[0].node, fx_owner(c, "key:7"));
    assert_false(hk[0].truncated);
    /* off by default: every read reached the server */
    assert_int_equal(fx_metrics(c).hot_cache_hits, 0);
    ch_cache_close(c);
    rh_fleet_stop(f);
}

static void near_cache(void **state)
{
    (void)state;
    rh_fleet *f = rh_fleet_start(4);
    assert_non_null(f);
    enum { THRESHOLD = 100, READS = 1000 };
    ch_cache *c = open_hot(f, 60000, 0, THRESHOLD);
    const char *hot = "key:7";
    size_t owner = fx_owner(c, hot);
    set_ok(c, hot, "v1");
    long long before = gets_at(f, owner);
    for (int i = 0; i < READS; i++)
        assert_string_equal(get_value(c, hot), "v1");
    long long reached = gets_at(f, owner) - before;
    ch_cache_metrics m = fx_metrics(c);
    printf("near cache: %d reads, %lld reached the owner, %llu served from the near cache\n",
           READS, reached, (unsigned long long)m.hot_cache_hits);
    /* the reads until its lower bound passes the threshold in a second (its set counts too),
     * twice that at most should a second end on the way; every read after, from memory */
    assert_true(reached >= THRESHOLD - 1 && reached <= 2 * THRESHOLD + 1);
    assert_int_equal((long long)m.hot_cache_hits, READS - reached);
    /* a set through the client: the next get has it */
    set_ok(c, hot, "v2");
    assert_string_equal(get_value(c, hot), "v2");
    assert_string_equal(get_value(c, hot), "v2");
    /* a del: the next get misses */
    ch_cache_result r;
    assert_int_equal(ch_cache_del(c, hot, strlen(hot), &r), CH_OK);
    ch_cache_result_free(&r);
    assert_string_equal(get_value(c, hot), "");
    /* mget: the hot key from the near cache, the others from their servers */
    set_ok(c, hot, "v3");
    assert_string_equal(get_value(c, hot), "v3"); /* stored again: it is still hot */
    set_ok(c, "key:8", "x");
    before = gets_at(f, owner);
    const char *keys[3] = {hot, "key:8", hot};
    ch_cache_result rs[3];
    uint64_t hits0 = fx_metrics(c).hot_cache_hits;
    assert_int_equal(ch_cache_mget(c, 3, keys, NULL, rs), CH_OK);
    for (int j = 0; j < 3; j++) {
        assert_int_equal(rs[j].status, CH_CACHE_HIT);
        assert_memory_equal(rs[j].value, j == 1 ? "x" : "v3", rs[j].len);
        ch_cache_result_free(&rs[j]);
    }
    assert_int_equal(fx_metrics(c).hot_cache_hits - hits0, 2);
    if (fx_owner(c, "key:8") != owner)
        assert_int_equal(gets_at(f, owner) - before, 0);
    ch_cache_close(c);
    rh_fleet_stop(f);
}

/* Another writer (a direct connection): the near cache may serve the old value, but only to
 * reads that begin before that write plus the TTL. */
static void ttl_bound(void **state)
{
    (void)state;
    rh_fleet *f = rh_fleet_start(2);
    assert_non_null(f);
    enum { TTL_MS = 300 };
    ch_cache *c = open_hot(f, TTL_MS, 0, 10);
    const char *hot = "key:7";
    set_ok(c, hot, "old");
    for (int i = 0; i < 50; i++) /* hot, and cached */
        assert_string_equal(get_value(c, hot), "old");
    assert_true(fx_metrics(c).hot_cache_hits > 0);
    redisContext *d = fx_direct(f, fx_owner(c, hot));
    redisReply *w = redisCommand(d, "SET %s new", hot);
    assert_non_null(w);
    freeReplyObject(w);
    redisFree(d);
    double t_write = rh_now_ms();
    size_t stale = 0;
    double last_stale = 0;
    for (;;) {
        double t = rh_now_ms();
        const char *v = get_value(c, hot);
        if (strcmp(v, "new") == 0)
            break;
        assert_string_equal(v, "old");
        stale++;
        last_stale = t - t_write;
        /* the bound: an old value only to a read that began before the write + the TTL */
        assert_true(t < t_write + TTL_MS);
        assert_true(t - t_write < 5000);
    }
    printf("ttl %d ms: %zu stale reads, the last %.0f ms after the other writer's write\n",
           TTL_MS, stale, last_stale);
    ch_cache_close(c);
    rh_fleet_stop(f);
}

static void memory_bound(void **state)
{
    (void)state;
    rh_fleet *f = rh_fleet_start(2);
    assert_non_null(f);
    enum { MAX = 64 * 1024 };
    ch_cache *c = open_hot(f, 60000, MAX, 2);
    char key[32], val[1024];
    memset(val, 'v', sizeof(val) - 1);
    val[sizeof(val) - 1] = '\0';
    for (size_t k = 0; k < 200; k++) { /* 200 hot keys of 1 KiB: three times the bound */
        fx_key(key, k);
        set_ok(c, key, val);
        for (int i = 0; i < 3; i++)
            assert_string_equal(get_value(c, key), val);
        ch_cache_metrics m = fx_metrics(c);
        assert_true(m.hot_cache_bytes <= MAX);
    }
    ch_cache_metrics m = fx_metrics(c);
    printf("memory bound %d: %llu entries, %llu bytes, %llu evictions, %llu stores\n", MAX,
           (unsigned long long)m.hot_cache_entries, (unsigned long long)m.hot_cache_bytes,
           (unsigned long long)m.hot_cache_evictions, (unsigned long long)m.hot_cache_stores);
    assert_true(m.hot_cache_evictions > 0);
    assert_true(m.hot_cache_entries > 0 && m.hot_cache_entries < 64);
    ch_cache_close(c);
    rh_fleet_stop(f);
}

/* The same keys in a config file (ch_cache_open_config) as chash-proxy's pool keys. */
static void config_file(void **state)
{
    (void)state;
    rh_fleet *f = rh_fleet_start(2);
    assert_non_null(f);
    char path[64], text[512];
    snprintf(path, sizeof path, "hotkeys_test_%ld.yml", (long)getpid());
    int at = snprintf(text, sizeof text,
                      "p:\n  redis: true\n  hot_cache: 60000\n  hot_threshold: 10\n"
                      "  hot_cache_max_bytes: 100000\n  servers:\n");
    for (size_t i = 0; i < f->n; i++)
        at += snprintf(text + at, sizeof text - (size_t)at, "   - %s:1 cache-%02zu\n",
                       f->servers[i].addr, i + 1);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    assert_true(fputs(text, fp) >= 0);
    assert_int_equal(fclose(fp), 0);
    ch_cache *c = NULL;
    ch_config_error err;
    assert_int_equal(ch_cache_open_config(path, NULL, NULL, &c, &err), CH_OK);
    unlink(path);
    set_ok(c, "key:1", "v");
    for (int i = 0; i < 50; i++)
        assert_string_equal(get_value(c, "key:1"), "v");
    ch_cache_metrics m = fx_metrics(c);
    assert_int_equal(m.hot_cache_hits, 50 - 9); /* cached from the 9th read: set + 9 = 10 */
    ch_cache_close(c);
    rh_fleet_stop(f);
}

int main(void)
{
    rh_require_redis("integration_hotkeys");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(detection),
        cmocka_unit_test(near_cache),
        cmocka_unit_test(ttl_bound),
        cmocka_unit_test(memory_bound),
        cmocka_unit_test(config_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_cache_api.c — the libchash-cache API contract against real redis-servers: argument
 * checks, get/set/del and expiry (checked on the servers themselves, over direct connections),
 * mget order and failover, error replies (not node failures), every node down, AUTH/SELECT,
 * SIGPIPE, opening from a config file, and reloads that carry health over by node id.
 */
#include "cache_fixture.h"

#include <hiredis/hiredis.h>

#include <stdarg.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

/* ---- helpers ----------------------------------------------------------------------------------- */

/* A direct command to server i (not through the client); the reply, or a failed test. */
static redisReply *direct(const rh_fleet *f, size_t i, const char *fmt, ...)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", f->servers[i].port, tv);
    assert_non_null(c);
    assert_int_equal(c->err, 0);
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    assert_non_null(r);
    redisFree(c);
    return r;
}

static long long direct_int(const rh_fleet *f, size_t i, const char *fmt, const char *key)
{
    redisReply *r = direct(f, i, fmt, key);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

static ch_cache *open3(rh_fleet **f, uint32_t k)
{
    *f = rh_fleet_start(3);
    assert_non_null(*f);
    ch_health_options h = fx_health(k, 10000, 200, 800);
    return fx_open(*f, &h, 500, 2);
}

/* ---- arguments --------------------------------------------------------------------------------- */

static int open_one(const char *addr, const ch_cache_options *o, ch_cache **c)
{
    ch_member m = {.id = "a", .addr = addr, .weight = 1.0};
    return ch_cache_open(&m, 1, NULL, NULL, o, c);
}

static void bad_arguments(void **state)
{
    (void)state;
    ch_cache *c = NULL;
    ch_member m = {.id = "a", .addr = "127.0.0.1:1", .weight = 1.0};
    assert_int_equal(ch_cache_open(NULL, 1, NULL, NULL, NULL, &c), CH_EINVAL);
    assert_int_equal(ch_cache_open(&m, 1, NULL, NULL, NULL, NULL), CH_EINVAL);
    assert_int_equal(ch_cache_open(&m, 0, NULL, NULL, NULL, &c), CH_EEMPTY);
    const char *bad_addrs[] = {"", "localhost", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536",
                               "127.0.0.1:12x", ":6379", "::1:6379", "[::1:6379", "[]:6379"};
    for (size_t i = 0; i < sizeof(bad_addrs) / sizeof(bad_addrs[0]); i++)
        assert_int_equal(open_one(bad_addrs[i], NULL, &c), CH_EINVAL);
    const char *good_addrs[] = {"127.0.0.1:6379", "[::1]:6379", "localhost:1", "/tmp/r.sock"};
    for (size_t i = 0; i < sizeof(good_addrs) / sizeof(good_addrs[0]); i++) {
        assert_int_equal(open_one(good_addrs[i], NULL, &c), CH_OK);
        ch_cache_close(c);
    }

    ch_cache_options o;
    ch_cache_options_init(&o);
    o.timeout_ms = 0;
    assert_int_equal(open_one("127.0.0.1:1", &o, &c), CH_EINVAL);
    o.timeout_ms = CH_CACHE_MAX_TIMEOUT_MS + 1;
    assert_int_equal(open_one("127.0.0.1:1", &o, &c), CH_EINVAL);
    ch_cache_options_init(&o);
    o.failover_depth = 0;
    assert_int_equal(open_one("127.0.0.1:1", &o, &c), CH_EINVAL);
    ch_cache_options_init(&o);
    o.size = 0;
    assert_int_equal(open_one("127.0.0.1:1", &o, &c), CH_EINVAL);
    ch_health_options h;
    ch_health_options_init(&h);
    h.failure_limit = 0;
    assert_int_equal(ch_cache_open(&m, 1, NULL, &h, NULL, &c), CH_EINVAL);

    /* jump has no failover order: depth 2 is refused at open, depth 1 works. */
    ch_member two[2] = {{.id = "a", .addr = "127.0.0.1:1", .weight = 1},
                        {.id = "b", .addr = "127.0.0.1:2", .weight = 1}};
    ch_options t;
    ch_options_init(&t);
    t.algo = CH_ALGO_JUMP;
    assert_int_equal(ch_cache_open(two, 2, &t, NULL, NULL, &c), CH_EUNSUPPORTED);
    ch_cache_options_init(&o);
    o.failover_depth = 1;
    assert_int_equal(ch_cache_open(two, 2, &t, NULL, &o, &c), CH_OK);

    ch_cache_result r;
    const char *keys[2] = {"x", NULL};
    ch_cache_result rs[2];
    assert_int_equal(ch_cache_get(NULL, "k", 1, &r), CH_EINVAL);
    assert_int_equal(ch_cache_get(c, "k", 1, NULL), CH_EINVAL);
    assert_int_equal(ch_cache_get(c, NULL, 1, &r), CH_EINVAL);
    assert_int_equal(ch_cache_set(c, "k", 1, NULL, 1, 0, &r), CH_EINVAL);
    assert_int_equal(ch_cache_del(c, NULL, 2, &r), CH_EINVAL);
    assert_int_equal(ch_cache_mget(c, 2, keys, NULL, rs), CH_EINVAL);
    assert_int_equal(ch_cache_mget(c, 1, NULL, NULL, rs), CH_EINVAL);
    assert_int_equal(ch_cache_mget(c, 0, NULL, NULL, NULL), CH_OK);
    assert_int_equal(ch_cache_probe(NULL, NULL), CH_EINVAL);
    assert_int_equal(ch_cache_reload(c, NULL, 1, NULL, NULL), CH_EINVAL);
    assert_int_equal(ch_cache_reload(c, two, 2, NULL, "bad version\n"), CH_EINVAL);
    ch_cache_metrics mt = {.size = 0};
    assert_int_equal(ch_cache_metrics_get(c, &mt), CH_EINVAL);
    ch_cache_node_metrics nm = {.size = sizeof(nm)};
    assert_int_equal(ch_cache_node_metrics_get(c, 2, &nm), CH_EINVAL);
    assert_int_equal(ch_cache_node_metrics_get(c, 1, &nm), CH_OK);
    assert_string_equal(nm.id, "b");
    ch_cache_close(c);
    ch_cache_close(NULL);
    ch_cache_result_free(NULL);
    assert_string_equal(ch_cache_status_name(CH_CACHE_MISS), "miss");
    assert_string_equal(ch_cache_fail_name(CH_CACHE_FAIL_TIMEOUT), "timeout");
}

/* ---- get, set, del, expiry --------------------------------------------------------------------- */

static void get_set_del(void **state)
{
    (void)state;
    rh_fleet *f;
    ch_cache *c = open3(&f, 3);
    /* Binary-safe: a value with a NUL inside; an empty key is a key too. */
    static const char value[] = {'v', 0, 'w', '\n', 'x'};
    const char *keys[] = {"alpha", "beta", "", "gamma:{tag}"};
    for (size_t k = 0; k < 4; k++) {
        const char *key = keys[k];
        size_t len = strlen(key), owner = fx_owner(c, key);
        ch_cache_result r;
        assert_int_equal(ch_cache_set(c, key, len, value, sizeof(value), 0, &r), CH_OK);
        assert_int_equal(r.status, CH_CACHE_OK);
        assert_int_equal(r.node, owner);
        assert_string_equal(r.node_id, fx_node(c, owner).id);
        assert_int_equal(r.attempts, 1);
        assert_int_equal(r.fail, CH_CACHE_FAIL_NONE);
        assert_string_equal(r.message, "");
        /* On its owner's server, and on no other. */
        for (size_t i = 0; i < f->n; i++)
            assert_int_equal(direct_int(f, i, "EXISTS %s", key), i == owner);

        assert_int_equal(ch_cache_get(c, key, len, &r), CH_OK);
        assert_int_equal(r.status, CH_CACHE_HIT);
        assert_int_equal(r.len, sizeof(value));
        assert_memory_equal(r.value, value, sizeof(value));
        assert_int_equal(r.value[r.len], '\0');
        ch_cache_result_free(&r);
        assert_null(r.value);
        ch_cache_result_free(&r); /* a cleared result: no-op */

        assert_int_equal(ch_cache_del(c, key, len, &r), CH_OK);
        assert_int_equal(r.status, CH_CACHE_OK);
        assert_int_equal(direct_int(f, owner, "EXISTS %s", key), 0);
        assert_int_equal(ch_cache_del(c, key, len, &r), CH_OK);
        assert_int_equal(r.status, CH_CACHE_MISS);
        assert_int_equal(ch_cache_get(c, key, len, &r), CH_OK);
        assert_int_equal(r.status, CH_CACHE_MISS);
        assert_null(r.value);
    }
    ch_cache_metrics m = fx_metrics(c);
    assert_int_equal(m.hits, 4);
    assert_int_equal(m.misses, 4); /* gets only: a del that found nothing is not a miss */
    assert_int_equal(m.requests, 20);
    assert_int_equal(m.failed, 0);
    assert_int_equal(m.nodes, 3);
    assert_int_equal(m.nodes_up, 3);
    assert_string_equal(m.version, ch_membership_version(ch_cache_membership(c)));
    ch_cache_close(c);
    rh_fleet_stop(f);
}

static void expiry(void **state)
{
    (void)state;
    rh_fleet *f;
    ch_cache *c = open3(&f, 3);
    ch_cache_result r;
    size_t owner = fx_owner(c, "long");
    assert_int_equal(ch_cache_set(c, "long", 4, "v", 1, 50000, &r), CH_OK);
    assert_int_equal(r.status, CH_CACHE_OK);
    long long pttl = direct_int(f, owner, "PTTL %s", "long");
    assert_true(pttl > 0 && pttl <= 50000);
    assert_int_equal(ch_cache_set(c, "long", 4, "v", 1, 0, &r), CH_OK);
    assert_int_equal(direct_int(f, owner, "PTTL %s", "long"), -1); /* 0: no expiry */

    assert_int_equal(ch_cache_set(c, "short", 5, "v", 1, 100, &r), CH_OK);
    assert_int_equal(ch_cache_get(c, "short", 5, &r), CH_OK);
    assert_int_equal(r.status, CH_CACHE_HIT);
    ch_cache_result_free(&r);
    rh_sleep_ms(300);
    assert_int_equal(ch_cache_get(c, "short", 5, &r), CH_OK);
    assert_int_equal(r.status, CH_CACHE_MISS);

    /* An expiry Redis cannot take is its error reply, not a node failure. */
    assert_int_equal(ch_cache_set(c, "huge", 4, "v", 1, UINT64_MAX, &r), CH_OK);
    assert_int_equal(r.status, CH_CACHE_ERROR);
    assert_int_equal(r.fail, CH_CACHE_FAIL_REPLY);
    assert_true(fx_node(c, r.node).up);
    assert_int_equal(fx_metrics(c).errors, 0);
    ch_cache_close(c);
    rh_fleet_stop(f);
}

/* ---- mget -------------------------------------------------------------------------------------- */

#define MKEYS 1000

static void mget_order(void **state)
{
    (void)state;
    rh_fleet *f;
    ch_cache *c = open3(&f, 3);
    static char names[MKEYS + 2][32];
    static const char *keys[MKEYS + 2];
    static ch_cache_result rs[MKEYS + 2];
    /* Even keys exist; the order is scrambled (k * 7919 mod MKEYS) and two keys repeat. */
    for (size_t k = 0; k < MKEYS; k++) {
        size_t len = fx_key(names[k], k);
        if (k % 2 == 0) {
            ch_cache_result r;
            assert_int_equal(ch_cache_set(c, names[k], len, names[k], len, 0, &r), CH_OK);
            assert_int_equal(r.status, CH_CACHE_OK);
        }
    }
    size_t which[MKEYS + 2];
    for (size_t i = 0; i < MKEYS; i++)
        which[i] = (i * 7919) % MKEYS;
    which[MKEYS] = which[3];
    which[MKEYS + 1] = which[4];
    for (size_t i = 0; i < MKEYS + 2; i++)
        keys[i] = names[which[i]];
    ch_cache_metrics before = fx_metrics(c);
    assert_int_equal(ch_cache_mget(c, MKEYS + 2, keys, NULL, rs), CH_OK);
    size_t hits = 0;
    for (size_t i = 0; i < MKEYS + 2; i++) {
        assert_int_equal(rs[i].node, fx_owner(c, keys[i]));
        assert_int_equal(rs[i].attempts, 1);
        if (which[i] % 2 == 0) {
            assert_int_equal(rs[i].status, CH_CACHE_HIT);
            assert_int_equal(rs[i].len, strlen(keys[i]));
            assert_memory_equal(rs[i].value, keys[i], rs[i].len);
            hits++;
        } else {
            assert_int_equal(rs[i].status, CH_CACHE_MISS);
        }
        ch_cache_result_free(&rs[i]);
    }
    ch_cache_metrics after = fx_metrics(c);
    assert_int_equal(after.hits - before.hits, hits);
    assert_int_equal(after.misses - before.misses, MKEYS + 2 - hits);
    assert_int_equal(after.requests - before.requests, MKEYS + 2);

    /* Explicit lengths: binary keys, and a prefix of a longer string. */
    const char *bin[2] = {"key:0-and-more", "key:2"};
    size_t lens[2] = {5, 5};
    assert_int_equal(ch_cache_mget(c, 2, bin, lens, rs), CH_OK);
    assert_int_equal(rs[0].status, CH_CACHE_HIT); /* "key:0" */
    assert_memory_equal(rs[0].value, "key:0", 5);
    assert_int_equal(rs[1].status, CH_CACHE_HIT);
    ch_cache_result_free(&rs[0]);
    ch_cache_result_free(&rs[1]);
    ch_cache_close(c);
    rh_fleet_stop(f);
}

static void mget_failover(void **state)
{
    (void)state;
    rh_fleet *f;
    ch_cache *c = open3(&f, 3);
    static char names[MKEYS][32];
    static const char *keys[MKEYS];
    static ch_cache_result rs[MKEYS];
    for (size_t k = 0; k < MKEYS; k++) {
        size_t len = fx_key(names[k], k);
        keys[k] = names[k];
        ch_cache_result r;
        assert_int_equal(ch_cache_set(c, names[k], len, names[k], len, 0, &r), CH_OK);
    }
    const size_t victim = 0;
    assert_int_equal(rh_kill(f, victim), 0);
    for (int round = 0; round < 4; round++) {
        assert_int_equal(ch_cache_mget(c, MKEYS, keys, NULL, rs), CH_OK);
        for (size_t k = 0; k < MKEYS; k++) {
            size_t owner = fx_owner(c, keys[k]);
            if (owner == victim) {
                assert_int_equal(rs[k].status, CH_CACHE_MISS);
                assert_int_equal(rs[k].node, fx_successor(c, keys[k], victim));
                assert_true(rs[k].failover);
                /* Tried at the victim until it was ejected (one failure per call). */
                assert_int_equal(rs[k].attempts, round < 3 ? 2 : 1);
                if (round < 3)
                    assert_int_not_equal(rs[k].fail, CH_CACHE_FAIL_NONE);
                else
                    assert_int_equal(rs[k].fail, CH_CACHE_FAIL_NONE);
            } else {
                assert_int_equal(rs[k].status, CH_CACHE_HIT);
                assert_int_equal(rs[k].node, owner);
                assert_int_equal(rs[k].attempts, 1);
            }
            ch_cache_result_free(&rs[k]);
        }
        assert_int_equal(fx_node(c, victim).up, round < 2);
    }
    assert_int_equal(fx_node(c, victim).errors, 3);
    assert_int_equal(fx_node(c, victim).ejections, 1);
    assert_int_equal(fx_metrics(c).failed, 0);
    ch_cache_close(c);
    rh_fleet_stop(f);
}

/* A big pipeline into a connection whose server was killed: writes fail with EPIPE. The client
 * must contain the SIGPIPE (this process has the default action: it would die). */
static void sigpipe_is_contained(void **state)
{
    (void)state;
    rh_fleet *f = rh_fleet_start(1);
    assert_non_null(f);
    ch_health_options h = fx_health(3, 10000, 200, 800);
    ch_cache *c = fx_open(f, &h, 500, 1);
    ch_cache_result r;
    assert_int_equal(ch_cache_set(c, "k", 1, "v", 1, 0, &r), CH_OK); /* connected */
    assert_int_equal(rh_kill(f, 0), 0);
    enum { N = 40000 };
    static char big[N][128];
    static const char *keys[N];
    static ch_cache_result rs[N];
    for (size_t k = 0; k < N; k++) {
        memset(big[k], 'x', sizeof(big[k]) - 1);
        big[k][sizeof(big[k]) - 1] = '\0';
        snprintf(big[k], 16, "%zu", k);
        big[k][strlen(big[k])] = 'x';
        keys[k] = big[k];
    }
    signal(SIGPIPE, SIG_DFL);
    assert_int_equal(ch_cache_mget(c, N, keys, NULL, rs), CH_OK);
    for (size_t k = 0; k < N; k++) {
        assert_int_equal(rs[k].status, CH_CACHE_ERROR);
        ch_cache_result_free(&rs[k]);
    }
    assert_int_equal(fx_metrics(c).failed, N);
    ch_cache_close(c);
    rh_fleet_stop(f);
}

/* ---- replies and failures ---------------------------------------------------------------------- */

static void error_reply_is_not_a_failure(void **state)
{
    (void)state;
    rh_fleet *f;
    ch_cache *c = open3(&f, 1); /* K = 1: a single counted failure would eject */
    size_t owner = fx_owner(c, "list");
    freeReplyObject(direct(f, owner, "RPUSH %s %s", "list", "a"));
    ch_cache_result r;
    for (int t = 0; t < 3; t++) {
        assert_int_equal(ch_cache_get(c, "list", 4, &r), CH_OK);
        assert_int_equal(r.status, CH_CACHE_ERROR);
        assert_int_equal(r.fail, CH_CACHE_FAIL_REPLY);
        assert_int_equal(r.node, owner);
        assert_int_equal(r.attempts, 1);
        assert_non_null(strstr(r.message, "WRONGTYPE"));
    }
    ch_cache_node_metrics n = fx_node(c, owner);
    assert_true(n.up);
    assert_int_equal(n.errors, 0);
    assert_int_equal(n.reply_errors, 3);
    assert_int_equal(fx_metrics(c).failed, 0);
    ch_cache_close(c);
    rh_fleet_stop(f);
}

static void every_node_down(void **state)
{
    (void)state;
    rh_fleet *f = rh_fleet_start(2);
    assert_non_null(f);
    ch_health_options h = fx_health(2, 10000, 60000, 60000);
    ch_cache *c = fx_open(f, &h, 300, 2);
    assert_int_equal(rh_kill(f, 0), 0);
    assert_int_equal(rh_kill(f, 1), 0);
    ch_cache_result r;
    for (int t = 0; t < 2; t++) { /* both nodes fail, twice: both ejected */
        double t0 = rh_now_ms();
        assert_int_equal(ch_cache_get(c, "k", 1, &r), CH_OK);
        assert_true(rh_now_ms() - t0 < 10 * 300);
        assert_int_equal(r.status, CH_CACHE_ERROR);
        assert_int_equal(r.fail, CH_CACHE_FAIL_CONNECT);
        assert_int_equal(r.attempts, 2);
        assert_int_equal(r.node, SIZE_MAX);
        assert_null(r.node_id);
        assert_non_null(strstr(r.message, "127.0.0.1:"));
    }
    assert_int_equal(fx_metrics(c).nodes_up, 0);
    assert_int_equal(ch_cache_get(c, "k", 1, &r), CH_OK);
    assert_int_equal(r.status, CH_CACHE_ERROR);
    assert_int_equal(r.fail, CH_CACHE_FAIL_NO_NODE);
    assert_int_equal(r.attempts, 0);
    const char *keys[3] = {"a", "b", "c"};
    ch_cache_result rs[3];
    assert_int_equal(ch_cache_mget(c, 3, keys, NULL, rs), CH_OK);
    for (int k = 0; k < 3; k++)
        assert_int_equal(rs[k].status, CH_CACHE_ERROR);
    assert_int_equal(fx_metrics(c).failed, 6);
    ch_cache_close(c);
    rh_fleet_stop(f);
}

static void auth_and_db(void **state)
{
    (void)state;
    rh_fleet *f = rh_fleet_start(1);
    assert_non_null(f);
    ch_member m = {.id = "a", .addr = f->servers[0].addr, .weight = 1};
    ch_cache_options o;
    ch_cache_options_init(&o);
    o.password = "secret"; /* the server has no password: AUTH is refused */
    ch_cache *c;
    assert_int_equal(ch_cache_open(&m, 1, NULL, NULL, &o, &c), CH_OK);
    ch_cache_result r;
    assert_int_equal(ch_cache_get(c, "k", 1, &r), CH_OK);
    assert_int_equal(r.status, CH_CACHE_ERROR);
    assert_int_equal(r.fail, CH_CACHE_FAIL_CONNECT);
    assert_non_null(strstr(r.message, "AUTH refused"));
    ch_cache_close(c);

    ch_cache_options_init(&o);
    o.db = 2;
    assert_int_equal(ch_cache_open(&m, 1, NULL, NULL, &o, &c), CH_OK);
    assert_int_equal(ch_cache_set(c, "k", 1, "v", 1, 0, &r), CH_OK);
    assert_int_equal(r.status, CH_CACHE_OK);
    assert_int_equal(rh_dbsize(f, 0), 0); /* not in db 0 */
    ch_cache_close(c);
    ch_cache_options_init(&o);
    o.db = 2;
    assert_int_equal(ch_cache_open(&m, 1, NULL, NULL, &o, &c), CH_OK);
    assert_int_equal(ch_cache_get(c, "k", 1, &r), CH_OK);
    assert_int_equal(r.status, CH_CACHE_HIT);
    ch_cache_result_free(&r);
    ch_cache_close(c);
    rh_fleet_stop(f);
}

/* ---- config files and reloads ------------------------------------------------------------------ */

/* Writes a pool over the fleet's servers to a temp file; returns its path (static buffer). */
static const char *write_config(const rh_fleet *f, size_t n, const char *extra)
{
    static char path[300];
    snprintf(path, sizeof(path), "%s/pool.yml", f->dir);
    FILE *out = fopen(path, "w");
    assert_non_null(out);
    fprintf(out, "cache:\n  redis: true\n  timeout: 300\n  distribution: ketama\n"
                 "  hash: fnv1a_64\n%s  servers:\n",
            extra);
    for (size_t i = 0; i < n; i++)
        fprintf(out, "   - %s:1 cache-%02zu\n", f->servers[i].addr, i + 1);
    fprintf(out, "memcached:\n  servers:\n   - 127.0.0.1:11211:1\n");
    fclose(out);
    return path;
}

static void open_config(void **state)
{
    (void)state;
    rh_fleet *f = rh_fleet_start(3);
    assert_non_null(f);
    const char *path = write_config(f, 3, "  version: fleet-7\n  failover_depth: 2\n");
    ch_cache *c;
    ch_config_error err;
    assert_int_equal(ch_cache_open_config(path, "cache", NULL, &c, &err), CH_OK);
    ch_cache_metrics m = fx_metrics(c);
    assert_string_equal(m.version, "fleet-7");
    assert_int_equal(m.nodes, 3);
    /* The pool's table (ketama over twemproxy's names) is the one the client routes by. */
    ch_cache_result r;
    for (size_t k = 0; k < 100; k++) {
        char key[32];
        size_t len = fx_key(key, k);
        assert_int_equal(ch_cache_set(c, key, len, "v", 1, 0, &r), CH_OK);
        assert_int_equal(r.status, CH_CACHE_OK);
        size_t owner = fx_owner(c, key);
        assert_int_equal(r.node, owner);
        char id[16];
        snprintf(id, sizeof(id), "cache-%02zu", owner + 1);
        assert_string_equal(r.node_id, id); /* ketama's order: by name, which is file order */
        assert_string_equal(r.node_addr, f->servers[owner].addr);
    }
    ch_cache_close(c);

    char buf[600];
    assert_int_equal(ch_cache_open_config(path, "memcached", NULL, &c, &err), CH_EINVAL);
    ch_config_error_str(&err, buf, sizeof(buf));
    assert_non_null(strstr(buf, "redis: true"));
    assert_int_equal(ch_cache_open_config(path, "nope", NULL, &c, &err), CH_EINVAL);
    assert_non_null(strstr(err.message, "no pool named"));
    assert_int_equal(ch_cache_open_config(path, NULL, NULL, &c, &err), CH_EINVAL);
    assert_non_null(strstr(err.message, "2 pools"));
    assert_int_equal(ch_cache_open_config("/nonexistent.yml", NULL, NULL, &c, &err), CH_EINVAL);
    assert_int_equal(ch_cache_open_config(NULL, NULL, NULL, &c, NULL), CH_EINVAL);
    unlink(path);
    rh_fleet_stop(f);
}

static void reload_carries_health(void **state)
{
    (void)state;
    rh_fleet *f = rh_fleet_start(4);
    assert_non_null(f);
    ch_member members[4] = {
        {.id = "cache-01", .addr = f->servers[0].addr, .weight = 1},
        {.id = "cache-02", .addr = f->servers[1].addr, .weight = 1},
        {.id = "cache-03", .addr = f->servers[2].addr, .weight = 1},
        {.id = "cache-04", .addr = f->servers[3].addr, .weight = 1},
    };
    ch_health_options h = fx_health(2, 10000, 60000, 60000);
    ch_cache_options o;
    ch_cache_options_init(&o);
    o.timeout_ms = 300;
    o.version = "v1";
    ch_cache *c;
    assert_int_equal(ch_cache_open(members, 3, NULL, &h, &o, &c), CH_OK);
    assert_string_equal(fx_metrics(c).version, "v1");

    /* cache-02 dies and is ejected. */
    assert_int_equal(rh_kill(f, 1), 0);
    ch_cache_result r;
    char key[32];
    for (size_t k = 0; fx_node(c, 1).up; k++) {
        size_t len = fx_key(key, k);
        assert_int_equal(ch_cache_get(c, key, len, &r), CH_OK);
        assert_int_not_equal(r.status, CH_CACHE_ERROR);
    }
    ch_cache_node_metrics before = fx_node(c, 1);
    assert_int_equal(before.ejections, 1);

    /* A new member, in a new order: cache-02 keeps its state by id. */
    ch_member grown[4] = {members[3], members[2], members[1], members[0]};
    assert_int_equal(ch_cache_reload(c, grown, 4, NULL, "v2"), CH_OK);
    ch_cache_metrics m = fx_metrics(c);
    assert_string_equal(m.version, "v2");
    assert_int_equal(m.nodes, 4);
    assert_int_equal(m.nodes_up, 3);
    assert_int_equal(m.reloads, 1);
    assert_int_equal(m.ejections, 1);
    ch_cache_node_metrics after = fx_node(c, 2);
    assert_string_equal(after.id, "cache-02");
    assert_false(after.up);
    assert_int_equal(after.ejections, before.ejections);
    assert_int_equal(after.errors, before.errors);
    assert_true(fx_node(c, 0).up); /* the new node starts up */
    assert_int_equal(fx_node(c, 0).attempts, 0);
    /* Every key routes by the new table, cache-02's keys to their successors. */
    for (size_t k = 0; k < 500; k++) {
        size_t len = fx_key(key, k);
        assert_int_equal(ch_cache_set(c, key, len, "v", 1, 0, &r), CH_OK);
        assert_int_equal(r.status, CH_CACHE_OK);
        size_t owner = fx_owner(c, key);
        assert_int_equal(r.node, owner == 2 ? fx_successor(c, key, 2) : owner);
    }
    /* A content version when none is given; a bad member list changes nothing. */
    assert_int_equal(ch_cache_reload(c, grown, 4, NULL, NULL), CH_OK);
    assert_true(strncmp(fx_metrics(c).version, "m-", 2) == 0);
    ch_member dup[2] = {members[0], members[0]};
    assert_int_equal(ch_cache_reload(c, dup, 2, NULL, "v3"), CH_EDUPID);
    assert_int_equal(fx_metrics(c).nodes, 4);

    /* From a config file: cache-02 is still ejected after the reload. */
    const char *path = write_config(f, 4, "  version: from-file\n");
    ch_config_error err;
    assert_int_equal(ch_cache_reload_config(c, path, "cache", &err), CH_OK);
    m = fx_metrics(c);
    assert_string_equal(m.version, "from-file");
    size_t i = ch_membership_find(ch_cache_membership(c), "cache-02");
    assert_true(i < 4);
    assert_false(fx_node(c, i).up);
    assert_int_equal(ch_cache_reload_config(c, path, "memcached", &err), CH_EINVAL);
    assert_string_equal(fx_metrics(c).version, "from-file");
    unlink(path);
    ch_cache_close(c);
    rh_fleet_stop(f);
}

int main(void)
{
    rh_require_redis("integration_cache_api");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bad_arguments),
        cmocka_unit_test(get_set_del),
        cmocka_unit_test(expiry),
        cmocka_unit_test(mget_order),
        cmocka_unit_test(mget_failover),
        cmocka_unit_test(sigpipe_is_contained),
        cmocka_unit_test(error_reply_is_not_a_failure),
        cmocka_unit_test(every_node_down),
        cmocka_unit_test(auth_and_db),
        cmocka_unit_test(open_config),
        cmocka_unit_test(reload_carries_health),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

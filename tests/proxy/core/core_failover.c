/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core_failover.c — the proxy's logic in process (core.h): failures: a read rerouted to its key's
 * next candidate, a split read's failed part coalesced again, sends failing inside the send, an
 * ejected owner skipped, a retry after a membership change, fail-open health.
 */
#include "core.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

/* A read whose server fails goes to the key's next candidate (the library's second), by routing
 * the key again; a write is answered with the failure at once. */
void test_failover_reroute(void **state)
{
    fixture *fx = *state;
    size_t cand[2], n = 0;
    assert_int_equal(ch_route(fx->pool.table, NULL, "user7", 5, 2, cand, &n), CH_OK);
    assert_int_equal(n, 2);
    request(fx, NULL, "*2\r\n$3\r\nGET\r\n$5\r\nuser7\r\n");
    assert_int_equal(fake_log[0].server->index, cand[0]);
    fake_fail(&fake_log[0]);
    assert_int_equal(ndone, 0);
    assert_int_equal(fake_nlog, 2);
    assert_int_equal(fake_log[1].server->index, cand[1]);
    fake_reply(&fx->pool, &fake_log[1], "$1\r\nx\r\n", 7);
    assert_int_equal(ndone, 1);
    assert_memory_equal(done_log[0].p, "$1\r\nx\r\n", 7);

    /* failover_depth 2: a second failure is the client's error, naming the failure. */
    request(fx, NULL, "*2\r\n$3\r\nGET\r\n$5\r\nuser7\r\n");
    fake_fail(&fake_log[2]);
    fake_fail(&fake_log[3]);
    assert_int_equal(ndone, 2);
    assert_int_equal(fake_nlog, 4);
    assert_string_equal("-ERR backend x timed out\r\n",
                        (px_buf_append(&done_log[1], "", 1), done_log[1].p));

    /* A write is not retried. */
    request(fx, NULL, "*3\r\n$3\r\nSET\r\n$5\r\nuser7\r\n$1\r\nv\r\n");
    fake_fail(&fake_log[4]);
    assert_int_equal(fake_nlog, 5);
    assert_int_equal(ndone, 3);
    assert_string_equal("-ERR backend x timed out\r\n",
                        (px_buf_append(&done_log[2], "", 1), done_log[2].p));
    assert_int_equal(fx->pool.stats.forward_error, 2);
}

/* A failed part of a split read: each of its keys goes to its own next candidate, coalesced
 * again per server; the merged reply is complete and in key order. */
void test_split_failover(void **state)
{
    fixture *fx = *state;
    char *words[] = {"MGET", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j"};
    px_buf req = {0};
    resp(&req, 11, words);
    request(fx, NULL, req.p);
    fake_sent *e = &fake_log[0];
    size_t failed = e->server->index, nfirst = fake_nlog;
    fake_fail(e);
    /* Every key of the failed part was sent again, none to the failed server, each to its
     * library route's next candidate after the failed one. */
    for (size_t k = nfirst; k < fake_nlog; k++)
        assert_int_not_equal(fake_log[k].server->index, failed);
    for (int i = 1; i <= 10; i++) {
        size_t cand[2], n;
        ch_route(fx->pool.table, NULL, words[i], 1, 2, cand, &n);
        if (cand[0] != failed)
            continue;
        bool found = false;
        for (size_t k = nfirst; k < fake_nlog && !found; k++)
            found = fake_log[k].server->index == cand[1] &&
                    memmem(fake_log[k].bytes.p, fake_log[k].bytes.len, "\r\n$1\r\n", 6) != NULL;
        assert_true(found);
    }
    /* Answer everything with "v" + key for each key it carries (parsed back from its bytes). */
    for (size_t k = 0; k < fake_nlog; k++) {
        if (fake_log[k].frag == NULL)
            continue;
        px_buf rep = {0};
        const char *p = fake_log[k].bytes.p;
        size_t nk = 0;
        for (size_t i = 0; i + 5 < fake_log[k].bytes.len; i++)
            nk += memcmp(p + i, "\r\n$1\r\n", 6) == 0;
        px_buf_printf(&rep, "*%zu\r\n", nk);
        for (size_t i = 0; i + 6 < fake_log[k].bytes.len; i++)
            if (memcmp(p + i, "\r\n$1\r\n", 6) == 0)
                px_buf_printf(&rep, "$2\r\nv%c\r\n", p[i + 6]);
        fake_reply(&fx->pool, &fake_log[k], rep.p, rep.len);
        px_buf_free(&rep);
    }
    assert_int_equal(ndone, 1);
    const char *want = "*10\r\n$2\r\nva\r\n$2\r\nvb\r\n$2\r\nvc\r\n$2\r\nvd\r\n$2\r\nve\r\n"
                       "$2\r\nvf\r\n$2\r\nvg\r\n$2\r\nvh\r\n$2\r\nvi\r\n$2\r\nvj\r\n";
    assert_int_equal(done_log[0].len, strlen(want));
    assert_memory_equal(done_log[0].p, want, strlen(want));
    assert_int_equal(pending(), 0);
    px_buf_free(&req);
}

/* Every server down: sends fail inside px_server_send, before it returns; the request still
 * completes exactly once, with an error, and nothing is touched after (ASan would tell). */
void test_synchronous_failures(void **state)
{
    fixture *fx = *state;
    for (size_t i = 0; i < NSERVERS; i++)
        fake_down(&fx->servers[i]);
    request(fx, NULL, "*2\r\n$3\r\nGET\r\n$1\r\nq\r\n");
    assert_int_equal(ndone, 1);
    assert_string_equal("-ERR backend down\r\n", (px_buf_append(&done_log[0], "", 1), done_log[0].p));
    char *words[] = {"MGET", "a", "b", "c", "d", "e", "f"};
    px_buf req = {0};
    resp(&req, 7, words);
    request(fx, NULL, req.p);
    assert_int_equal(ndone, 2);
    assert_string_equal("-ERR backend down\r\n", (px_buf_append(&done_log[1], "", 1), done_log[1].p));
    px_buf_free(&req);
}

/* An ejected owner is skipped from the start: its keys go to their next candidate. */
void test_ejected_owner(void **state)
{
    fixture *fx = *state;
    size_t o = owner(fx, "user9");
    ch_health_options ho;
    ch_config_health(fx->pool.conf, &ho);
    for (uint32_t k = 0; k < ho.failure_limit + 1; k++)
        px_health_failure(fx->pool.health, o, 1000, 1);
    assert_false(px_health_up(fx->pool.health, o));
    size_t cand[2], n;
    ch_route(fx->pool.table, NULL, "user9", 5, 2, cand, &n);
    request(fx, NULL, "*2\r\n$3\r\nGET\r\n$5\r\nuser9\r\n");
    assert_int_equal(fake_log[0].server->index, cand[1]);
    fake_reply(&fx->pool, &fake_log[0], "$-1\r\n", 5);
    assert_int_equal(ndone, 1);
}

/* A reload between the send and the failure: the retry routes against the membership of that
 * moment, with nothing renumbered (a server removed is simply not a candidate any more). */
void test_failover_after_membership_change(void **state)
{
    fixture *fx = *state;
    size_t cand[2], n;
    ch_route(fx->pool.table, NULL, "user7", 5, 2, cand, &n);
    request(fx, NULL, "*2\r\n$3\r\nGET\r\n$5\r\nuser7\r\n");
    /* The new membership: the same file without the second candidate. */
    FILE *fp = fopen(fx->path, "w");
    fprintf(fp, "p:\n  listen: 127.0.0.1:1\n  redis: true\n  hash: md5\n"
                "  distribution: ketama\n  servers:\n");
    for (int i = 0; i < NSERVERS; i++)
        if ((size_t)i != cand[1])
            fprintf(fp, "   - 127.0.0.1:%d:1 s%d\n", 7001 + i, i);
    fclose(fp);
    ch_config *cfg2;
    ch_config_error err;
    assert_int_equal(ch_config_load(fx->path, &cfg2, &err), 0);
    px_conf *cref2 = px_conf_new(cfg2);
    px_shared_pool sp2;
    char why[128];
    assert_int_equal(px_shared_pool_init(&sp2, cref2, &cfg2->pools[0], why, sizeof(why)), 0);
    px_server next[NSERVERS];
    for (size_t i = 0; i < sp2.nservers; i++) {
        size_t j = 0;
        while (strcmp(fx->servers[j].conf->addr, sp2.servers[i]->addr) != 0)
            j++;
        next[i] = fx->servers[j]; /* reused: its uid kept */
        next[i].index = i;
        next[i].conf = sp2.servers[i];
    }
    px_pool *pool = &fx->pool;
    pool->members = sp2.members;
    pool->table = ch_membership_table(sp2.members);
    pool->health = sp2.health;
    pool->servers = next;
    pool->nservers = sp2.nservers;
    pool->conf = sp2.conf;
    fake_fail(&fake_log[0]);
    assert_int_equal(fake_nlog, 2);
    size_t cand2[2], n2;
    ch_route(pool->table, NULL, "user7", 5, 2, cand2, &n2);
    /* The retry goes to the new table's first candidate that is not the failed server. */
    size_t want = strcmp(next[cand2[0]].conf->addr, fake_log[0].server->conf->addr) == 0
                      ? cand2[1]
                      : cand2[0];
    assert_ptr_equal(fake_log[1].server, &next[want]);
    assert_string_not_equal(next[want].conf->addr, fx->servers[cand[1]].conf->addr);
    fake_reply(pool, &fake_log[1], "$-1\r\n", 5);
    assert_int_equal(ndone, 1);
    /* Back to the fixture's own state before teardown. */
    pool->members = fx->sp.members;
    pool->table = ch_membership_table(fx->sp.members);
    pool->health = fx->sp.health;
    pool->servers = fx->servers;
    pool->nservers = fx->sp.nservers;
    pool->conf = fx->sp.conf;
    px_shared_pool_clear(&sp2);
    px_conf_unref(cref2);
}

/* Fail-open: with max_ejected_share 0.5 of 4 servers, two can be ejected, a third cannot (it
 * stays up, and the refusal is counted); once one comes back, another can go. */
void test_fail_open(void **state)
{
    fixture *fx = *state;
    px_health *h = fx->pool.health;
    ch_health_options ho;
    ch_config_health(fx->pool.conf, &ho);
    assert_int_equal(h->max_down, 2);
    bool ejected[NSERVERS] = {false};
    for (size_t i = 0; i < 3; i++)
        for (uint32_t k = 0; k < ho.failure_limit; k++)
            ejected[i] = px_health_failure(h, i, 1000, 7) || ejected[i];
    assert_true(ejected[0] && ejected[1]);
    assert_false(ejected[2]);
    assert_true(px_health_up(h, 2));
    assert_int_equal(h->fail_open, 1);
    assert_int_equal(h->n_up, 2);
    /* Readmit 0 (a probe), then 2's next failures eject it. */
    assert_true(px_health_probe_claim(h, 0, 1000000));
    assert_true(px_health_probe_result(h, 0, true, 1000000, 7));
    bool e2 = false;
    for (uint32_t k = 0; k < ho.failure_limit; k++)
        e2 = px_health_failure(h, 2, 1000001, 7) || e2;
    assert_true(e2);
    assert_false(px_health_up(h, 2));
}

/* The Redis pool with readmit_ramp: 10000 (test_readmit_ramp). */
int setup_readmit_ramp(void **state)
{
    return setup_conf(state, "  readmit_ramp: 10000\n");
}

/* Slow start: an ejected owner readmitted by its probe at t takes each of its keys back at
 * t + XXH3_64(key) mod readmit_ramp; until then a read of the key stays on its walk's next
 * server (where it went while the owner was out); keys of other owners never move; after the
 * ramp every key is on its owner. A write of a key not switched yet switches its bucket (the
 * top 16 bits of its XXH3) to the owner first: it goes to the owner, and so do the reads of
 * that bucket's keys after it, so no write lands on the interim server during the ramp. With
 * readmit_ramp 0 the keys return at once (the first check fails). */
void test_readmit_ramp(void **state)
{
    fixture *fx = *state;
    px_pool *pool = &fx->pool;
    const uint64_t ramp = 10000, t = 1000000;
    size_t o = 1;
    ch_health_options ho;
    ch_config_health(pool->conf, &ho);
    for (uint32_t k = 0; k < ho.failure_limit + 1; k++)
        px_health_failure(pool->health, o, 1000, 1);
    assert_false(px_health_up(pool->health, o));
    assert_true(px_health_probe_claim(pool->health, o, t));
    assert_int_equal(px_health_readmit(pool->health, o, t, 7), PX_READMIT_UP);
    static bool early[1u << 16]; /* buckets switched by a write */
    memset(early, 0, sizeof(early));
    px_buf req = {0};
    size_t writes_early = 0;
    for (uint64_t now = t; now <= t + ramp; now += ramp / 4) {
        fake_now_ms = now;
        size_t before = 0, after = 0;
        for (int i = 0; i < 400; i++) {
            char k[16];
            snprintf(k, sizeof(k), "key%d", i);
            uint64_t xh = XXH3_64bits(k, strlen(k));
            size_t cand[2], n = 0;
            assert_int_equal(ch_route(pool->table, NULL, k, strlen(k), 2, cand, &n), CH_OK);
            size_t want = cand[0];
            bool waiting = cand[0] == o && now < t + xh % ramp && !early[xh >> 48];
            if (waiting) {
                want = cand[1]; /* not switched yet: the server that held it meanwhile */
                before++;
            } else if (cand[0] == o) {
                after++;
            }
            char *get[] = {"GET", k}, *set[] = {"SET", k, "v"};
            resp(&req, 2, get);
            size_t at = fake_nlog;
            request(fx, NULL, req.p);
            assert_int_equal(fake_log[at].server->index, want);
            fake_reply(pool, &fake_log[at], "$-1\r\n", 5);
            ndone = 0;
            if (i % 7 != 0)
                continue;
            /* Every seventh key is written: to its owner (switching its bucket when it was
             * waiting), and read back there. */
            resp(&req, 3, set);
            at = fake_nlog;
            request(fx, NULL, req.p);
            assert_int_equal(fake_log[at].server->index, cand[0]);
            fake_reply(pool, &fake_log[at], "+OK\r\n", 5);
            if (waiting)
                early[xh >> 48] = true, writes_early++;
            resp(&req, 2, get);
            at = fake_nlog;
            request(fx, NULL, req.p);
            assert_int_equal(fake_log[at].server->index, cand[0]);
            fake_reply(pool, &fake_log[at], "$1\r\nv\r\n", 7);
            assert_int_equal(ndone, 2);
            ndone = 0;
        }
        if (now == t)
            assert_true(before > 0 && after == 0);
        else if (now < t + ramp)
            assert_true(before > 0 && after > 0);
        else
            assert_true(before == 0 && after > 0);
    }
    assert_true(writes_early > 0);
    px_buf_free(&req);
}

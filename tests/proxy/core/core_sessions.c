/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core_sessions.c — the proxy's logic in process (core.h): commands beyond one key's server: SCAN
 * across the pool, SCRIPT on every server, MULTI/WATCH and pub/sub on connections of the client's
 * own.
 */
#include "core.h"
#include "route_scan.h"

#include "hot/near.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

/* SCAN: the cursor names the server, the membership's tag and the server's own cursor; the walk
 * goes through the servers in membership order; a forged cursor is refused without a send. */
void test_scan(void **state)
{
    fixture *fx = *state;
    uint32_t tag = px_scan_tag(ch_membership_version(fx->pool.members));
    size_t index;
    uint64_t sc;
    uint64_t c = px_scan_cursor(3, tag, 12345);
    assert_true(px_scan_split(c, tag, NSERVERS, &index, &sc));
    assert_int_equal(index, 3);
    assert_int_equal(sc, 12345);
    assert_false(px_scan_split(c, tag ^ 1, NSERVERS, &index, &sc));     /* another membership */
    assert_false(px_scan_split(px_scan_cursor(4, tag, 1), tag, NSERVERS, &index, &sc));
    assert_true(px_scan_cursor(1, tag, 0) != 0);

    request(fx, NULL, "*4\r\n$4\r\nSCAN\r\n$1\r\n0\r\n$5\r\nCOUNT\r\n$2\r\n10\r\n");
    assert_int_equal(fake_nlog, 1);
    assert_int_equal(fake_log[0].server->index, 0);
    px_buf_append(&fake_log[0].bytes, "", 1);
    assert_string_equal(fake_log[0].bytes.p,
                        "*4\r\n$4\r\nSCAN\r\n$1\r\n0\r\n$5\r\nCOUNT\r\n$2\r\n10\r\n");
    const char *r1 = "*2\r\n$2\r\n17\r\n*1\r\n$1\r\na\r\n";
    fake_reply(&fx->pool, &fake_log[0], r1, strlen(r1));
    char want[128], cur[32];
    snprintf(cur, sizeof(cur), "%llu", (unsigned long long)px_scan_cursor(0, tag, 17));
    snprintf(want, sizeof(want), "*2\r\n$%zu\r\n%s\r\n*1\r\n$1\r\na\r\n", strlen(cur), cur);
    assert_string_equal(last_done(), want);

    /* That cursor: server 0 again, with 17; its end: the next server's cursor 0. */
    px_buf req = {0};
    char *again[] = {"SCAN", cur, "MATCH", "k*"};
    resp(&req, 4, again);
    request(fx, NULL, req.p);
    assert_int_equal(fake_log[1].server->index, 0);
    px_buf_append(&fake_log[1].bytes, "", 1);
    assert_non_null(strstr(fake_log[1].bytes.p, "$2\r\n17\r\n$5\r\nMATCH\r\n$2\r\nk*\r\n"));
    const char *end0 = "*2\r\n$1\r\n0\r\n*0\r\n";
    fake_reply(&fx->pool, &fake_log[1], end0, strlen(end0));
    snprintf(cur, sizeof(cur), "%llu", (unsigned long long)px_scan_cursor(1, tag, 0));
    assert_non_null(strstr(last_done(), cur));

    /* The last server's end is the walk's: cursor 0. */
    snprintf(cur, sizeof(cur), "%llu", (unsigned long long)px_scan_cursor(NSERVERS - 1, tag, 5));
    char *last[] = {"SCAN", cur};
    resp(&req, 2, last);
    request(fx, NULL, req.p);
    assert_int_equal(fake_log[2].server->index, NSERVERS - 1);
    fake_reply(&fx->pool, &fake_log[2], end0, strlen(end0));
    assert_string_equal(last_done(), "*2\r\n$1\r\n0\r\n*0\r\n");

    /* Forged: another tag, a server past the pool, garbage. Nothing is sent. */
    size_t before = fake_nlog;
    char forged[3][32];
    snprintf(forged[0], 32, "%llu", (unsigned long long)px_scan_cursor(1, tag ^ 7, 3));
    snprintf(forged[1], 32, "%llu", (unsigned long long)px_scan_cursor(NSERVERS, tag, 3));
    snprintf(forged[2], 32, "12ab");
    for (int i = 0; i < 3; i++) {
        char *w[] = {"SCAN", forged[i]};
        resp(&req, 2, w);
        request(fx, NULL, req.p);
        assert_non_null(strstr(last_done(), "-ERR invalid cursor"));
    }
    assert_int_equal(fake_nlog, before);

    /* A backend's reply that is no cursor reply, or a cursor the proxy cannot carry. */
    const char *bad[] = {"+OK\r\n", "*2\r\n$2\r\nab\r\n*0\r\n", "*1\r\n$1\r\n1\r\n",
                         "*2\r\n$13\r\n1099511627776\r\n*0\r\n", ":3\r\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        request(fx, NULL, "*2\r\n$4\r\nSCAN\r\n$1\r\n0\r\n");
        fake_reply(&fx->pool, &fake_log[fake_nlog - 1], bad[i], strlen(bad[i]));
        assert_non_null(strstr(last_done(), "-ERR "));
    }
    px_buf_free(&req);
}

/* SCRIPT LOAD / EXISTS / FLUSH: one send per server, whole; LOAD answers the SHA when every
 * server agrees, an error when one differs; EXISTS is the AND per script. */
void test_script_every_server(void **state)
{
    fixture *fx = *state;
    const char *load = "*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n$8\r\nreturn 1\r\n";
    request(fx, NULL, load);
    assert_int_equal(fake_nlog, NSERVERS);
    const char *sha = "$40\r\ne0e1f9fabfc9d4800c877a703b823ac0578ff8db\r\n";
    for (size_t i = 0; i < NSERVERS; i++) {
        assert_non_null(sent_to(i));
        assert_int_equal(fake_log[i].bytes.len, strlen(load));
        fake_reply(&fx->pool, sent_to(i), sha, strlen(sha));
    }
    assert_int_equal(ndone, 1);
    assert_string_equal(last_done(), sha);

    request(fx, NULL, load);
    const char *other = "$40\r\n0000000000000000000000000000000000000000\r\n";
    for (size_t i = 0; i < NSERVERS; i++)
        fake_reply(&fx->pool, sent_to(i), i == 2 ? other : sha, strlen(sha));
    assert_non_null(strstr(last_done(), "-ERR the servers of the pool answered differently"));

    request(fx, NULL, "*4\r\n$6\r\nSCRIPT\r\n$6\r\nEXISTS\r\n$1\r\na\r\n$1\r\nb\r\n");
    for (size_t i = 0; i < NSERVERS; i++) {
        const char *r = i == 1 ? "*2\r\n:1\r\n:0\r\n" : "*2\r\n:1\r\n:1\r\n";
        fake_reply(&fx->pool, sent_to(i), r, strlen(r));
    }
    assert_string_equal(last_done(), "*2\r\n:1\r\n:0\r\n");

    /* A server answering EXISTS with the wrong count, or not an array: an error. */
    request(fx, NULL, "*4\r\n$6\r\nSCRIPT\r\n$6\r\nEXISTS\r\n$1\r\na\r\n$1\r\nb\r\n");
    for (size_t i = 0; i < NSERVERS; i++) {
        const char *r = i == 0 ? "*1\r\n:1\r\n" : i == 1 ? "$1\r\nx\r\n" : "*2\r\n:1\r\n:1\r\n";
        fake_reply(&fx->pool, sent_to(i), r, strlen(r));
    }
    assert_non_null(strstr(last_done(), "-ERR unexpected reply to SCRIPT EXISTS"));

    request(fx, NULL, "*2\r\n$6\r\nSCRIPT\r\n$4\r\nKILL\r\n");
    assert_non_null(strstr(last_done(), "unsupported command 'script kill'"));
    assert_int_equal(pending(), 0);
}

/* MULTI: answered by the proxy until the first key picks the server; then MULTI and the
 * commands go on a connection of the client's own; a key of another server answers CROSSSLOT,
 * DISCARD goes on the connection, which is released, and EXEC answers EXECABORT. */
void test_transaction(void **state)
{
    fixture *fx = *state;
    char a[16] = "{t}x", b[16] = "k1";
    for (int i = 1; owner(fx, a) == owner(fx, b); i++)
        snprintf(b, sizeof(b), "k%d", i);
    px_session *ss = NULL;
    request_in(fx, NULL, "*1\r\n$4\r\nEXEC\r\n", &ss);
    assert_string_equal(last_done(), "-ERR EXEC without MULTI\r\n");
    request_in(fx, NULL, "*1\r\n$5\r\nMULTI\r\n", &ss);
    assert_string_equal(last_done(), "+OK\r\n");
    assert_int_equal(fake_nconns, 0);
    request_in(fx, NULL, "*1\r\n$5\r\nMULTI\r\n", &ss);
    assert_string_equal(last_done(), "-ERR MULTI calls can not be nested\r\n");
    px_buf req = {0};
    char *set_a[] = {"SET", a, "1"};
    resp(&req, 3, set_a);
    request_in(fx, NULL, req.p, &ss);
    assert_int_equal(fake_nconns, 1);
    px_conn *c = fake_conns[0];
    assert_int_equal(c->server->index, owner(fx, a));
    px_buf seen = {0};
    sent_on(c, &seen);
    assert_memory_equal(seen.p, "*1\r\n$5\r\nMULTI\r\n", 15);
    assert_non_null(strstr(seen.p, req.p));
    fake_reply(&fx->pool, pending_on(c), "+OK\r\n", 5);      /* MULTI: the proxy's own */
    size_t n = ndone;
    fake_reply(&fx->pool, pending_on(c), "+QUEUED\r\n", 9);
    assert_int_equal(ndone, n + 1);
    assert_string_equal(last_done(), "+QUEUED\r\n");
    char *set_b[] = {"SET", b, "1"};
    resp(&req, 3, set_b);
    request_in(fx, NULL, req.p, &ss);
    assert_non_null(strstr(last_done(), "-CROSSSLOT"));
    sent_on(c, &seen);
    assert_non_null(strstr(seen.p, "*1\r\n$7\r\nDISCARD\r\n"));
    assert_true(c->released);
    request_in(fx, NULL, "*1\r\n$4\r\nEXEC\r\n", &ss);
    assert_non_null(strstr(last_done(), "-EXECABORT"));
    fake_reply(&fx->pool, pending_on(c), "+OK\r\n", 5);      /* the DISCARD */
    assert_null(pending_on(c));

    /* WATCH pins too: WATCH, MULTI, EXEC all on one new connection, released at EXEC. */
    char *watch[] = {"WATCH", a};
    resp(&req, 2, watch);
    request_in(fx, NULL, req.p, &ss);
    assert_int_equal(fake_nconns, 2);
    c = fake_conns[1];
    request_in(fx, NULL, "*1\r\n$5\r\nMULTI\r\n", &ss);
    request_in(fx, NULL, "*1\r\n$4\r\nEXEC\r\n", &ss);
    assert_true(c->released);
    sent_on(c, &seen);
    assert_non_null(strstr(seen.p, "WATCH"));
    assert_non_null(strstr(seen.p, "MULTI"));
    assert_non_null(strstr(seen.p, "EXEC"));
    fake_reply(&fx->pool, pending_on(c), "+OK\r\n", 5);
    fake_reply(&fx->pool, pending_on(c), "+OK\r\n", 5);
    fake_reply(&fx->pool, pending_on(c), "*-1\r\n", 5);
    assert_string_equal(last_done(), "*-1\r\n");
    px_session_free(ss);
    px_buf_free(&req);
    px_buf_free(&seen);
}

/* The generation of key in the near cache's (near_write.h). */
static uint32_t gen_of(fixture *fx, const char *key)
{
    return ch__near_gen(fx->sp.near_gens, XXH3_64bits(key, strlen(key)));
}

/* A transaction's writes go past the route tree, on the session's connection: the near cache
 * forgets the keys they write when EXEC is sent and again when it is answered (not when they
 * are queued: nothing is applied then); a queued script makes it forget every key. A write
 * after WATCH, sent on that connection at once, forgets its keys when sent and answered. */
void test_transaction_near(void **state)
{
    fixture *fx = *state;
    px_session *ss = NULL;
    px_buf req = {0};
    uint32_t g0 = gen_of(fx, "{t}x"), other = gen_of(fx, "{u}y");
    request_in(fx, NULL, "*1\r\n$5\r\nMULTI\r\n", &ss);
    char *set_a[] = {"SET", "{t}x", "1"};
    resp(&req, 3, set_a);
    request_in(fx, NULL, req.p, &ss);
    px_conn *c = fake_conns[0];
    fake_reply(&fx->pool, pending_on(c), "+OK\r\n", 5);
    fake_reply(&fx->pool, pending_on(c), "+QUEUED\r\n", 9);
    assert_int_equal(gen_of(fx, "{t}x"), g0); /* queued: not applied */
    request_in(fx, NULL, "*1\r\n$4\r\nEXEC\r\n", &ss);
    assert_int_equal(gen_of(fx, "{t}x"), g0 + 1);
    fake_reply(&fx->pool, pending_on(c), "*1\r\n+OK\r\n", 9);
    assert_string_equal(last_done(), "*1\r\n+OK\r\n");
    assert_int_equal(gen_of(fx, "{t}x"), g0 + 2);
    assert_int_equal(gen_of(fx, "{u}y"), other);

    /* A queued script: every key. */
    request_in(fx, NULL, "*1\r\n$5\r\nMULTI\r\n", &ss);
    char *eval[] = {"EVAL", "return 1", "1", "{t}x"};
    resp(&req, 4, eval);
    request_in(fx, NULL, req.p, &ss);
    c = fake_conns[1];
    fake_reply(&fx->pool, pending_on(c), "+OK\r\n", 5);
    fake_reply(&fx->pool, pending_on(c), "+QUEUED\r\n", 9);
    request_in(fx, NULL, "*1\r\n$4\r\nEXEC\r\n", &ss);
    fake_reply(&fx->pool, pending_on(c), "*1\r\n:1\r\n", 8);
    assert_int_equal(gen_of(fx, "{u}y"), other + 2);
    assert_int_equal(fx->pool.m.near.script_flushes, 1);

    /* A write after WATCH. */
    g0 = gen_of(fx, "{t}x");
    char *watch[] = {"WATCH", "{t}w"};
    resp(&req, 2, watch);
    request_in(fx, NULL, req.p, &ss);
    c = fake_conns[2];
    fake_reply(&fx->pool, pending_on(c), "+OK\r\n", 5);
    resp(&req, 3, set_a);
    request_in(fx, NULL, req.p, &ss);
    assert_int_equal(gen_of(fx, "{t}x"), g0 + 1);
    fake_reply(&fx->pool, pending_on(c), "+OK\r\n", 5);
    assert_int_equal(gen_of(fx, "{t}x"), g0 + 2);
    px_session_free(ss);
    px_buf_free(&req);
}

/* SUBSCRIBE to channels of two servers: one connection each, the client's reply held until both
 * confirmed, with the counts the proxy computes; messages emitted; PSUBSCRIBE on every server;
 * in pub/sub mode only the subscriptions and PING are served. */
void test_pubsub(void **state)
{
    fixture *fx = *state;
    char a[16] = "c0", b[16] = "c1";
    for (int i = 1; owner(fx, a) == owner(fx, b); i++)
        snprintf(b, sizeof(b), "c%d", i);
    px_session *ss = NULL;
    emitted.len = 0;
    closes = 0;
    px_buf req = {0};
    char *sub[] = {"SUBSCRIBE", a, b};
    resp(&req, 3, sub);
    request_in(fx, NULL, req.p, &ss);
    assert_int_equal(fake_nconns, 2);
    assert_int_equal(ndone, 0);
    char conf[128];
    for (size_t i = 0; i < 2; i++) {
        px_conn *c = fake_conns[i];
        const char *ch = c->server->index == owner(fx, a) ? a : b;
        snprintf(conf, sizeof(conf), "*3\r\n$9\r\nsubscribe\r\n$%zu\r\n%s\r\n:1\r\n", strlen(ch),
                 ch);
        fake_push(&fx->pool, c, conf, strlen(conf));
    }
    assert_int_equal(ndone, 1);
    char want[256];
    snprintf(want, sizeof(want),
             "*3\r\n$9\r\nsubscribe\r\n$%zu\r\n%s\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$%zu\r\n%s\r\n:2\r\n",
             strlen(a), a, strlen(b), b);
    assert_string_equal(last_done(), want);
    const char *msg = "*3\r\n$7\r\nmessage\r\n$2\r\nc0\r\n$2\r\nhi\r\n";
    fake_push(&fx->pool, fake_conns[0], msg, strlen(msg));
    assert_int_equal(emitted.len, strlen(msg));

    request_in(fx, NULL, "*2\r\n$3\r\nGET\r\n$1\r\nx\r\n", &ss);
    assert_non_null(strstr(last_done(), "only (P)SUBSCRIBE"));
    px_local ctx = {0};
    request_in(fx, &ctx, "*1\r\n$4\r\nPING\r\n", &ss);
    assert_string_equal(last_done(), "*2\r\n$4\r\npong\r\n$0\r\n\r\n");

    /* A pattern: every server, one confirmation each. */
    request_in(fx, NULL, "*2\r\n$10\r\nPSUBSCRIBE\r\n$2\r\np*\r\n", &ss);
    assert_int_equal(fake_nconns, NSERVERS);
    size_t n = ndone;
    const char *pc = "*3\r\n$10\r\npsubscribe\r\n$2\r\np*\r\n:1\r\n";
    for (size_t i = 0; i < NSERVERS; i++)
        fake_push(&fx->pool, fake_conns[i], pc, strlen(pc));
    assert_int_equal(ndone, n + 1);
    assert_string_equal(last_done(), "*3\r\n$10\r\npsubscribe\r\n$2\r\np*\r\n:3\r\n");
    assert_int_equal(closes, 0);
    /* What a subscribed server may send that is neither: dropped, nothing emitted. */
    size_t before = emitted.len;
    const char *junk[] = {"+OK\r\n", "*1\r\n$7\r\nmessage\r\n", "*3\r\n:1\r\n:2\r\n:3\r\n",
                          "*3\r\n$9\r\nsubscribe\r\n$1\r\nz\r\n:9\r\n"};
    for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++)
        fake_push(&fx->pool, fake_conns[0], junk[i], strlen(junk[i]));
    assert_int_equal(emitted.len, before);
    assert_int_equal(ndone, n + 1);
    px_session_free(ss);
    for (size_t i = 0; i < fake_nconns; i++)
        assert_true(fake_conns[i]->released);
    px_buf_free(&req);
    px_buf_free(&emitted);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core_dispatch.c — the proxy's logic in process (core.h): where a request goes and who answers
 * it: a single key whole to its owner, a reply appended to its client's output, the auth gate and
 * the proxy's own answers, refusals, commands that run on one server, HELLO.
 */
#include "core.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

/* A single-key command goes whole, as sent, to the key's owner; its reply is the client's. */
void test_single_key(void **state)
{
    fixture *fx = *state;
    const char *req = "*2\r\n$3\r\nGET\r\n$5\r\nuser1\r\n";
    request(fx, NULL, req);
    assert_int_equal(fake_nlog, 1);
    assert_int_equal(fake_log[0].server->index, owner(fx, "user1"));
    assert_int_equal(fake_log[0].bytes.len, strlen(req));
    assert_memory_equal(fake_log[0].bytes.p, req, strlen(req));
    assert_int_equal(ndone, 0);
    fake_reply(&fx->pool, &fake_log[0], "$2\r\nhi\r\n", 8);
    assert_int_equal(ndone, 1);
    assert_int_equal(done_log[0].len, 8);
    assert_memory_equal(done_log[0].p, "$2\r\nhi\r\n", 8);
}

/* A request heading its client's queue (rq->out set, as client.c does) has its reply appended
 * to that output, after what it held, and keeps no copy (rq->direct): a backend's reply, and a
 * reply the proxy makes itself. Without an output the reply stays in rq->reply. */
void test_reply_to_output(void **state)
{
    fixture *fx = *state;
    px_buf out = {0};
    px_buf_append(&out, "+earlier\r\n", 10);
    next_out = &out;
    request(fx, NULL, "*2\r\n$3\r\nGET\r\n$5\r\nuser1\r\n");
    assert_int_equal(out.len, 10);
    fake_reply(&fx->pool, &fake_log[0], "$2\r\nhi\r\n", 8);
    assert_int_equal(ndone, 1);
    assert_true(done_direct[0]);
    assert_int_equal(done_log[0].len, 0);
    assert_int_equal(out.len, 18);
    assert_memory_equal(out.p, "+earlier\r\n$2\r\nhi\r\n", 18);
    request(fx, NULL, "*1\r\n$4\r\nPING\r\n");
    assert_int_equal(ndone, 2);
    assert_true(done_direct[1]);
    assert_int_equal(out.len, 25);
    assert_memory_equal(out.p + 18, "+PONG\r\n", 7);
    next_out = NULL;
    request(fx, NULL, "*1\r\n$4\r\nPING\r\n");
    assert_int_equal(ndone, 3);
    assert_false(done_direct[2]);
    assert_int_equal(done_log[2].len, 7);
    assert_int_equal(out.len, 25);
    px_buf_free(&out);
}

/* Local commands and the auth gate: NOAUTH before AUTH (PING passes with client_auth), a wrong
 * password refused, then served. */
void test_auth_gate(void **state)
{
    fixture *fx = *state;
    px_local ctx = {.password = fx->pool.client_password};
    request(fx, &ctx, "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
    request(fx, &ctx, "*1\r\n$4\r\nPING\r\n");
    request(fx, &ctx, "*2\r\n$4\r\nAUTH\r\n$5\r\nwrong\r\n");
    assert_false(ctx.authed);
    request(fx, &ctx, "*2\r\n$4\r\nAUTH\r\n$6\r\nsesame\r\n");
    assert_true(ctx.authed);
    request(fx, &ctx, "*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n");
    request(fx, &ctx, "*1\r\n$4\r\nQUIT\r\n");
    assert_true(ctx.close);
    assert_int_equal(fake_nlog, 0);
    const char *want[] = {"-NOAUTH Authentication required.\r\n", "+PONG\r\n",
                          "-WRONGPASS invalid username-password pair or user is disabled.\r\n",
                          "+OK\r\n", "$2\r\nhi\r\n", "+OK\r\n"};
    assert_int_equal(ndone, 6);
    for (size_t i = 0; i < 6; i++) {
        px_buf_append(&done_log[i], "", 1);
        assert_string_equal(done_log[i].p, want[i]);
    }
}

/* Refused at once, the connection kept: an unknown command, bad arity, EVAL's bad key count. */
void test_rejects(void **state)
{
    fixture *fx = *state;
    request(fx, NULL, "*1\r\n$4\r\nKEYS\r\n");
    request(fx, NULL, "*1\r\n$3\r\nGET\r\n");
    request(fx, NULL, "*4\r\n$4\r\nMSET\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n");
    request(fx, NULL, "*3\r\n$4\r\nEVAL\r\n$1\r\ns\r\n$1\r\n5\r\n");
    request(fx, NULL, "*3\r\n$4\r\nEVAL\r\n$1\r\ns\r\n$1\r\n0\r\n");
    const char *want[] = {"-ERR unsupported command 'keys'\r\n",
                          "-ERR wrong number of arguments for 'get' command\r\n",
                          "-ERR wrong number of arguments for 'mset' command\r\n",
                          "-ERR Number of keys can't be greater than number of args\r\n",
                          "-ERR eval without keys is not supported by the proxy\r\n"};
    assert_int_equal(ndone, 5);
    for (size_t i = 0; i < 5; i++) {
        px_buf_append(&done_log[i], "", 1);
        assert_string_equal(done_log[i].p, want[i]);
    }
    assert_int_equal(fake_nlog, 0);
}

/* MSETNX and EVAL with keys run on one server: keys of different owners are refused with
 * CROSSSLOT before anything is sent; keys of one owner go there whole. HELLO: protocols 2 and 3
 * are answered by the proxy (core_resp3.c has the rest), 4 refused (NOPROTO). */
void test_one_server_and_hello(void **state)
{
    fixture *fx = *state;
    char a[16] = "k0", b[16] = "k1";
    for (int i = 1; owner(fx, a) == owner(fx, b); i++)
        snprintf(b, sizeof(b), "k%d", i);
    px_buf req = {0};
    char *cross[] = {"MSETNX", a, "1", b, "2"};
    resp(&req, 5, cross);
    request(fx, NULL, req.p);
    char *eval[] = {"EVAL", "return 1", "2", a, b};
    resp(&req, 5, eval);
    request(fx, NULL, req.p);
    assert_int_equal(fake_nlog, 0);
    assert_int_equal(ndone, 2);
    for (size_t i = 0; i < 2; i++) {
        px_buf_append(&done_log[i], "", 1);
        assert_non_null(strstr(done_log[i].p, "-CROSSSLOT "));
    }
    char *same[] = {"MSETNX", a, "1", a, "2"};
    resp(&req, 5, same);
    request(fx, NULL, req.p);
    assert_int_equal(fake_nlog, 1);
    assert_int_equal(fake_log[0].server->index, owner(fx, a));
    assert_int_equal(fake_log[0].bytes.len, req.len); /* forwarded whole */
    fake_reply(&fx->pool, &fake_log[0], ":1\r\n", 4);
    request(fx, NULL, "*2\r\n$5\r\nHELLO\r\n$1\r\n4\r\n");
    request(fx, NULL, "*2\r\n$5\r\nHELLO\r\n$1\r\n2\r\n");
    request(fx, NULL, "*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n");
    assert_int_equal(ndone, 6);
    px_buf_append(&done_log[3], "", 1);
    assert_string_equal(done_log[3].p, "-NOPROTO unsupported protocol version\r\n");
    assert_memory_equal(done_log[4].p, "*14\r\n$6\r\nserver\r\n$11\r\nchash-proxy\r\n", 35);
    assert_memory_equal(done_log[5].p, "%7\r\n$6\r\nserver\r\n$11\r\nchash-proxy\r\n", 34);
    px_buf_free(&req);
}

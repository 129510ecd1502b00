/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core_replica.c — the proxy's logic in process (core.h): a pool with `replicas: 2`
 * (route_replica.c), its owners from the library's walk (ch_replicas). A write's answer for
 * every order of its owners' replies (the primary's once all answered; a failure or an error
 * of either, whichever comes); a split DEL counting each key once; a read's miss at the first
 * owner read from the second, answered, and copied back (a fetch at the second, a RESTORE
 * without REPLACE at the first); a failure at the first owner read from the second.
 */
#include "core.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

int setup_replicas(void **state)
{
    return setup_conf(state, "  replicas: 2\n");
}

/* key's two owners, first first. */
static void owners2(fixture *fx, const char *key, size_t *own)
{
    size_t n = 0;
    assert_int_equal(ch_replicas(fx->pool.table, key, strlen(key), 2, own, &n), CH_OK);
    assert_int_equal(n, 2);
}

static void reply(fixture *fx, size_t server, const char *text)
{
    fake_sent *e = sent_to(server);
    assert_non_null(e);
    fake_reply(&fx->pool, e, text, strlen(text));
}

static void failure(size_t server)
{
    fake_sent *e = sent_to(server);
    assert_non_null(e);
    fake_fail(e);
}

void test_replica_write(void **state)
{
    fixture *fx = *state;
    size_t own[2];
    owners2(fx, "user7", own);
    const char *set = "*3\r\n$3\r\nSET\r\n$5\r\nuser7\r\n$1\r\nv\r\n";

    /* The second owner first: answered with the primary's reply, once it comes. */
    request(fx, NULL, set);
    assert_int_equal(pending(), 2);
    reply(fx, own[1], "+OK\r\n");
    assert_int_equal(ndone, 0);
    reply(fx, own[0], "+OK\r\n");
    assert_int_equal(ndone, 1);
    assert_done(0, "+OK\r\n");

    /* The primary took it, the second owner fails: the failure is the answer. */
    request(fx, NULL, set);
    reply(fx, own[0], "+OK\r\n");
    assert_int_equal(ndone, 1);
    failure(own[1]);
    assert_int_equal(ndone, 2);
    assert_done(1, "-ERR backend x timed out\r\n");

    /* The primary's error, the second owner's OK after it: the error. */
    request(fx, NULL, set);
    reply(fx, own[0], "-OOM full\r\n");
    reply(fx, own[1], "+OK\r\n");
    assert_done(2, "-OOM full\r\n");

    /* Both fail: the first failure (the second owner's here). */
    request(fx, NULL, set);
    reply(fx, own[1], "-ERR second\r\n");
    reply(fx, own[0], "-ERR first\r\n");
    assert_done(3, "-ERR second\r\n");
    assert_int_equal(pending(), 0);
}

void test_replica_split_del(void **state)
{
    fixture *fx = *state;
    /* DEL of 3 keys: each key alone at each of its owners, each answering 1: the count is 3
     * (each key once), not the 6 answers. */
    request(fx, NULL, "*4\r\n$3\r\nDEL\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n");
    assert_int_equal(pending(), 6);
    for (size_t i = 0; i < fake_nlog; i++)
        if (fake_log[i].frag != NULL)
            fake_reply(&fx->pool, &fake_log[i], ":1\r\n", 4);
    assert_int_equal(ndone, 1);
    assert_done(0, ":3\r\n");
}

void test_replica_read_repair(void **state)
{
    fixture *fx = *state;
    size_t own[2];
    owners2(fx, "user7", own);
    const char *get = "*2\r\n$3\r\nGET\r\n$5\r\nuser7\r\n";

    /* A hit at the first owner: answered, nothing else sent. */
    request(fx, NULL, get);
    assert_int_equal(pending(), 1);
    reply(fx, own[0], "$1\r\nv\r\n");
    assert_done(0, "$1\r\nv\r\n");
    assert_int_equal(pending(), 0);

    /* A miss there: read from the second owner; its hit answered, then copied back. */
    request(fx, NULL, get);
    reply(fx, own[0], "$-1\r\n");
    assert_int_equal(ndone, 1);
    reply(fx, own[1], "$1\r\nv\r\n");
    assert_done(1, "$1\r\nv\r\n");
    fake_sent *fetch = sent_to(own[1]);
    assert_non_null(fetch);
    assert_non_null(memmem(fetch->bytes.p, fetch->bytes.len, "DUMP", 4));
    const char fetched[] = "*2\r\n:-1\r\n$7\r\npayload\r\n";
    fake_reply(&fx->pool, fetch, fetched, sizeof(fetched) - 1);
    fake_sent *fill = sent_to(own[0]);
    assert_non_null(fill);
    assert_non_null(memmem(fill->bytes.p, fill->bytes.len, "RESTORE", 7));
    assert_null(memmem(fill->bytes.p, fill->bytes.len, "REPLACE", 7)); /* never overwrites */
    fake_reply(&fx->pool, fill, "+OK\r\n", 5);
    assert_int_equal(fx->pool.m.warm.replica_reads, 1);
    assert_int_equal(fx->pool.m.warm.replica_repairs, 1);

    /* Written between the read and the copy: the copy is dropped (counted as a skip). */
    request(fx, NULL, get);
    reply(fx, own[0], "$-1\r\n");
    request(fx, NULL, "*3\r\n$3\r\nSET\r\n$5\r\nuser7\r\n$1\r\nw\r\n");
    reply(fx, own[1], "$1\r\nv\r\n"); /* the read's (the first sent to own[1]) */
    assert_done(2, "$1\r\nv\r\n");
    assert_int_equal(fx->pool.m.warm.replica_repair_skips, 1);
    reply(fx, own[0], "+OK\r\n");
    reply(fx, own[1], "+OK\r\n");
    assert_done(3, "+OK\r\n");
    assert_int_equal(pending(), 0);

    /* A failure at the first owner: read from the second, no copy. */
    request(fx, NULL, get);
    failure(own[0]);
    reply(fx, own[1], "$1\r\nw\r\n");
    assert_done(4, "$1\r\nw\r\n");
    assert_int_equal(pending(), 0);

    /* A RESP3 client's miss is RESP3's null: read from the second owner as well, on a RESP3
     * connection, and repaired. */
    px_local v3 = {.dialect = PX_DIALECT_RESP3};
    request(fx, &v3, get);
    assert_int_equal(sent_to(own[0])->dialect, PX_DIALECT_RESP3);
    reply(fx, own[0], "_\r\n");
    assert_int_equal(sent_to(own[1])->dialect, PX_DIALECT_RESP3);
    reply(fx, own[1], "$1\r\nw\r\n");
    assert_done(5, "$1\r\nw\r\n");
    assert_non_null(memmem(sent_to(own[1])->bytes.p, sent_to(own[1])->bytes.len, "DUMP", 4));
    assert_int_equal(fx->pool.m.warm.replica_reads, 3);
    reply(fx, own[1], "$-1\r\n"); /* the fetch finds it gone: nothing to copy */
    assert_int_equal(pending(), 0);
}

void test_replica_read_again(void **state)
{
    fixture *fx = *state;
    size_t own[2];
    owners2(fx, "user7", own);
    const char *get = "*2\r\n$3\r\nGET\r\n$5\r\nuser7\r\n";

    /* A miss at the first owner, then the second fails (a server just lost): the first owner
     * is asked again, though the slot was sent there already, and its answer is the client's
     * (a miss), not "no backend available". */
    request(fx, NULL, get);
    reply(fx, own[0], "$-1\r\n");
    failure(own[1]);
    assert_int_equal(ndone, 0);
    reply(fx, own[0], "$-1\r\n");
    assert_done(0, "$-1\r\n");
    assert_int_equal(pending(), 0);
}

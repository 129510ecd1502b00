/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core_stage.c — the proxy's logic in process (core.h): a prepared membership change staged
 * (route_stage.c). The fixture's pool stages a change to its first three servers (s3 leaves), as
 * reload.c does at a prepare: a write of a key whose owner changes goes to its owner, then a
 * DEL of it to its next owner, and is answered only then; a failed DEL makes the answer an
 * error; reads and keys that stay pass as they are. Expected owners from the library
 * (ch_lookup on either table), expected bytes as RESP spells them.
 */
#include "core.h"
#include "route_build.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct staged {
    ch_config *cfg;
    ch_membership *next;
    px_server *to[NSERVERS - 1];
} staged;

/* Stages, on the fixture's pool, the change to its first three servers. */
static void stage_open(fixture *fx, staged *st)
{
    char path[80];
    snprintf(path, sizeof(path), "%s.next", fx->path);
    FILE *fp = fopen(path, "w");
    fprintf(fp, "p:\n  listen: 127.0.0.1:1\n  redis: true\n  hash: md5\n"
                "  distribution: ketama\n  servers:\n");
    for (int i = 0; i < NSERVERS - 1; i++)
        fprintf(fp, "   - 127.0.0.1:%d:1 s%d\n", 7001 + i, i);
    fclose(fp);
    ch_config_error err;
    assert_int_equal(ch_config_load(path, &st->cfg, &err), 0);
    unlink(path);
    assert_int_equal(ch_config_membership(&st->cfg->pools[0], &st->next), CH_OK);
    for (int i = 0; i < NSERVERS - 1; i++)
        st->to[i] = &fx->servers[i]; /* the same addresses: the same servers */
    fx->pool.stage = (px_stage){ch_membership_table(st->next), st->to, NSERVERS - 1};
    assert_int_equal(px_route_build(&fx->pool, &fx->pool, 1), 0);
}

static void stage_close(fixture *fx, staged *st)
{
    fx->pool.stage = (px_stage){0};
    assert_int_equal(px_route_build(&fx->pool, &fx->pool, 1), 0);
    ch_membership_free(st->next);
    ch_config_free(st->cfg);
}

/* A key owned by s3 now (it moves), and one owned elsewhere that stays. */
static void moving_and_staying(fixture *fx, const staged *st, char *mk, char *sk)
{
    mk[0] = sk[0] = '\0';
    for (int i = 0; i < 10000 && (mk[0] == '\0' || sk[0] == '\0'); i++) {
        char k[16];
        snprintf(k, sizeof(k), "k%d", i);
        size_t now = owner(fx, k);
        size_t next = ch_lookup(ch_membership_table(st->next), k, strlen(k));
        if (now == NSERVERS - 1 && mk[0] == '\0')
            snprintf(mk, 16, "%s", k);
        else if (now != NSERVERS - 1 && next == now && sk[0] == '\0')
            snprintf(sk, 16, "%s", k);
    }
    assert_true(mk[0] != '\0' && sk[0] != '\0');
}

static size_t next_owner(const staged *st, const char *key)
{
    return ch_lookup(ch_membership_table(st->next), key, strlen(key));
}

static bool sent_is(const fake_sent *e, const char *want)
{
    return e != NULL && e->bytes.len == strlen(want) && memcmp(e->bytes.p, want, e->bytes.len) == 0;
}

static void reply(fixture *fx, fake_sent *e, const char *r)
{
    assert_non_null(e);
    fake_reply(&fx->pool, e, r, strlen(r));
}

void test_stage_write_invalidates(void **state)
{
    fixture *fx = *state;
    staged st;
    stage_open(fx, &st);
    char mk[16], sk[16];
    moving_and_staying(fx, &st, mk, sk);
    char want[128];

    /* A write of a moving key: to its owner first; nothing else until it answers. */
    char *set[] = {"SET", mk, "v2"};
    px_buf req = {0};
    resp(&req, 3, set);
    request(fx, NULL, req.p);
    assert_int_equal(pending(), 1);
    assert_true(sent_is(sent_to(NSERVERS - 1), req.p));
    reply(fx, sent_to(NSERVERS - 1), "+OK\r\n");
    /* Then the DEL at its next owner; the client's answer waits for it. */
    fake_sent *del = sent_to(next_owner(&st, mk));
    snprintf(want, sizeof(want), "*2\r\n$3\r\nDEL\r\n$%zu\r\n%s\r\n", strlen(mk), mk);
    assert_true(sent_is(del, want));
    assert_int_equal(ndone, 0);
    reply(fx, del, ":1\r\n");
    assert_int_equal(ndone, 1);
    assert_done(0, "+OK\r\n");
    assert_int_equal(fx->pool.m.warm.stage_invalidations, 1);

    /* The DEL fails: the write stands at the owner, but the client is not told "done". */
    request(fx, NULL, req.p);
    reply(fx, sent_to(NSERVERS - 1), "+OK\r\n");
    fake_fail(sent_to(next_owner(&st, mk)));
    assert_int_equal(ndone, 2);
    assert_true(last_done()[0] == '-');
    assert_non_null(strstr(last_done(), "could not be invalidated"));
    assert_int_equal(fx->pool.m.warm.stage_invalidate_errors, 1);

    /* A read of the moving key, a write of one that stays: one request each, as without. */
    char *get[] = {"GET", mk};
    resp(&req, 2, get);
    request(fx, NULL, req.p);
    assert_int_equal(pending(), 1);
    reply(fx, sent_to(NSERVERS - 1), "$2\r\nv2\r\n");
    assert_done(2, "$2\r\nv2\r\n");
    char *set2[] = {"SET", sk, "x"};
    resp(&req, 3, set2);
    request(fx, NULL, req.p);
    assert_int_equal(pending(), 1);
    reply(fx, sent_to(owner(fx, sk)), "+OK\r\n");
    assert_done(3, "+OK\r\n");
    assert_int_equal(pending(), 0);
    assert_int_equal(fx->pool.m.warm.stage_invalidations, 1);
    px_buf_free(&req);
    stage_close(fx, &st);
}

void test_stage_split_write(void **state)
{
    fixture *fx = *state;
    staged st;
    stage_open(fx, &st);
    char mk[16], sk[16];
    moving_and_staying(fx, &st, mk, sk);
    /* DEL of a moving and a staying key: split per server; the moving key's part is
     * invalidated at its next owner before the merged count is answered. */
    char *del[] = {"DEL", mk, sk};
    px_buf req = {0};
    resp(&req, 3, del);
    request(fx, NULL, req.p);
    assert_int_equal(pending(), 2);
    reply(fx, sent_to(owner(fx, sk)), ":1\r\n");
    assert_int_equal(ndone, 0);
    reply(fx, sent_to(NSERVERS - 1), ":1\r\n");
    assert_int_equal(ndone, 0);
    char want[128];
    snprintf(want, sizeof(want), "*2\r\n$3\r\nDEL\r\n$%zu\r\n%s\r\n", strlen(mk), mk);
    fake_sent *inv = sent_to(next_owner(&st, mk)); /* the staying key's part is answered */
    assert_true(sent_is(inv, want));
    reply(fx, inv, ":0\r\n");
    assert_int_equal(ndone, 1);
    assert_done(0, ":2\r\n");
    px_buf_free(&req);
    stage_close(fx, &st);
}

/* A write still out when the change is swapped in (the commit's swap comes between two loop
 * iterations, the write's answer after it): the key's owner is now the next owner the write did
 * not reach, so its delete goes there, through the current placement, before the answer. When
 * the change is withdrawn instead, the key's owner is where the write went: nothing to delete. */
void test_stage_swapped_mid_write(void **state)
{
    fixture *fx = *state;
    staged st;
    stage_open(fx, &st);
    char mk[16], sk[16];
    moving_and_staying(fx, &st, mk, sk);
    char *set[] = {"SET", mk, "v2"};
    px_buf req = {0};
    resp(&req, 3, set);
    request(fx, NULL, req.p);
    fake_sent *w = sent_to(NSERVERS - 1);
    assert_true(sent_is(w, req.p));
    px_stage stage = fx->pool.stage;
    const ch_table *was = fx->pool.table;
    fx->pool.stage = (px_stage){0}; /* the swap: the staged table is the pool's now */
    fx->pool.table = ch_membership_table(st.next);
    reply(fx, w, "+OK\r\n");
    char want[128];
    snprintf(want, sizeof(want), "*2\r\n$3\r\nDEL\r\n$%zu\r\n%s\r\n", strlen(mk), mk);
    fake_sent *del = sent_to(next_owner(&st, mk));
    assert_true(sent_is(del, want));
    assert_int_equal(ndone, 0);
    reply(fx, del, ":1\r\n");
    assert_int_equal(ndone, 1);
    assert_done(0, "+OK\r\n");
    assert_int_equal(fx->pool.m.warm.stage_invalidations, 1);

    fx->pool.table = was; /* staged again; then withdrawn while the write is out */
    fx->pool.stage = stage;
    request(fx, NULL, req.p);
    w = sent_to(NSERVERS - 1);
    fx->pool.stage = (px_stage){0};
    reply(fx, w, "+OK\r\n");
    assert_int_equal(ndone, 2);
    assert_done(1, "+OK\r\n");
    assert_int_equal(pending(), 0);
    fx->pool.stage = stage;
    px_buf_free(&req);
    stage_close(fx, &st);
}

/* What the staging cannot follow is refused -TRYAGAIN (session.c): a command that may write keys
 * it does not name (a script that may write, RPOPLPUSH's destination, SORT ... STORE's), when a
 * key it names moves. EVAL_RO, which only reads, SORT without STORE, and a script of a key that
 * stays are served as usual; nothing is sent for a refusal. */
void test_stage_refuses_unnamed(void **state)
{
    fixture *fx = *state;
    staged st;
    stage_open(fx, &st);
    char mk[16], sk[16];
    moving_and_staying(fx, &st, mk, sk);
    px_buf req = {0};
    char *eval_m[] = {"EVAL", "return 1", "1", mk};
    resp(&req, 4, eval_m);
    request(fx, NULL, req.p);
    assert_int_equal(fake_nlog, 0);
    assert_int_equal(ndone, 1);
    assert_non_null(strstr(last_done(), "-TRYAGAIN pool p is staging a membership change and a "
                                        "key of this command moves under it: a script may "
                                        "write keys it does not declare"));
    assert_non_null(strstr(last_done(), "retry then\r\n"));
    assert_int_equal(fx->pool.m.warm.stage_refused, 1);
    char dst[24];
    snprintf(dst, sizeof(dst), "%s:dst", mk);
    char *rpl[] = {"RPOPLPUSH", mk, dst};
    resp(&req, 3, rpl);
    request(fx, NULL, req.p);
    assert_non_null(strstr(last_done(), "it writes its destination, which cannot be staged"));
    char *sort_store[] = {"SORT", mk, "ALPHA", "store", dst};
    resp(&req, 5, sort_store);
    request(fx, NULL, req.p);
    assert_non_null(strstr(last_done(), "it writes its STORE key, which cannot be staged"));
    assert_int_equal(fake_nlog, 0);
    assert_int_equal(fx->pool.m.warm.stage_refused, 3);
    size_t n = ndone;

    char *ro[] = {"EVAL_RO", "return 1", "1", mk};
    resp(&req, 4, ro);
    request(fx, NULL, req.p);
    assert_true(sent_is(sent_to(NSERVERS - 1), req.p));
    reply(fx, sent_to(NSERVERS - 1), ":1\r\n");
    assert_done(n, ":1\r\n");
    char *eval_s[] = {"EVAL", "return 1", "1", sk};
    resp(&req, 4, eval_s);
    request(fx, NULL, req.p);
    reply(fx, sent_to(owner(fx, sk)), ":1\r\n");
    assert_done(n + 1, ":1\r\n");
    assert_int_equal(pending(), 0);
    assert_int_equal(fx->pool.m.warm.stage_invalidations, 0);
    /* SORT without STORE: a write to the table (it may store), staged as one. */
    char *sort[] = {"SORT", mk, "ALPHA"};
    resp(&req, 3, sort);
    request(fx, NULL, req.p);
    reply(fx, sent_to(NSERVERS - 1), "*0\r\n");
    reply(fx, sent_to(next_owner(&st, mk)), ":0\r\n");
    assert_done(n + 2, "*0\r\n");
    assert_int_equal(fx->pool.m.warm.stage_refused, 3);

    /* Without a stage the same EVAL goes to the key's owner. */
    stage_close(fx, &st);
    resp(&req, 4, eval_m);
    request(fx, NULL, req.p);
    reply(fx, sent_to(NSERVERS - 1), ":1\r\n");
    assert_done(n + 3, ":1\r\n");
    px_buf_free(&req);
}

/* Sends MULTI then `text` in session *ss: the transaction's connection (the one opened last)
 * gets both; answers MULTI +OK and the command +QUEUED. */
static px_conn *queue_one(fixture *fx, px_session **ss, const char *text)
{
    request_in(fx, NULL, "*1\r\n$5\r\nMULTI\r\n", ss);
    size_t n = fake_nconns;
    request_in(fx, NULL, text, ss);
    assert_int_equal(fake_nconns, n + 1);
    px_conn *c = fake_conns[n];
    fake_reply(&fx->pool, pending_on(c), "+OK\r\n", 5);
    fake_reply(&fx->pool, pending_on(c), "+QUEUED\r\n", 9);
    assert_string_equal(last_done(), "+QUEUED\r\n");
    return c;
}

/* A transaction's writes go on its own connection, past route_stage.c: while a change is
 * staged, a write of a moving key queued in MULTI discards the transaction (EXEC answers
 * EXECABORT); EXEC sends DISCARD in its place when a key the transaction writes moves under a
 * change prepared since it was queued, or has another owner since (a change committed); a write
 * after WATCH on the watched connection is refused alone. Reads of moving keys and
 * transactions of keys that stay run. */
void test_stage_refuses_transactions(void **state)
{
    fixture *fx = *state;
    staged st;
    stage_open(fx, &st);
    char mk[16], sk[16];
    moving_and_staying(fx, &st, mk, sk);
    px_session *ss = NULL;
    px_buf req = {0}, seen = {0};

    /* Queued: refused before any connection opens; EXEC answers EXECABORT. */
    char *set_m[] = {"SET", mk, "1"};
    resp(&req, 3, set_m);
    request_in(fx, NULL, "*1\r\n$5\r\nMULTI\r\n", &ss);
    request_in(fx, NULL, req.p, &ss);
    assert_non_null(strstr(last_done(), "-TRYAGAIN pool p is staging a membership change and "
                                        "this command writes a key that moves under it"));
    assert_int_equal(fake_nconns, 0);
    request_in(fx, NULL, "*1\r\n$4\r\nEXEC\r\n", &ss);
    assert_non_null(strstr(last_done(), "-EXECABORT"));
    assert_int_equal(fx->pool.m.warm.stage_refused, 1);

    /* A read of the moving key, and a write of one that stays: queued and run. */
    char *get_m[] = {"GET", mk};
    resp(&req, 2, get_m);
    px_conn *c = queue_one(fx, &ss, req.p);
    request_in(fx, NULL, "*1\r\n$4\r\nEXEC\r\n", &ss);
    assert_true(c->released);
    fake_reply(&fx->pool, pending_on(c), "*1\r\n$1\r\n1\r\n", 11);
    assert_string_equal(last_done(), "*1\r\n$1\r\n1\r\n");
    char *set_s[] = {"SET", sk, "1"};
    resp(&req, 3, set_s);
    c = queue_one(fx, &ss, req.p);
    request_in(fx, NULL, "*1\r\n$4\r\nEXEC\r\n", &ss);
    fake_reply(&fx->pool, pending_on(c), "*1\r\n+OK\r\n", 9);
    assert_string_equal(last_done(), "*1\r\n+OK\r\n");
    assert_int_equal(fx->pool.m.warm.stage_refused, 1);

    /* Queued before the change was prepared, EXEC after: DISCARD instead, nothing applied. */
    px_stage stage = fx->pool.stage;
    fx->pool.stage = (px_stage){0};
    resp(&req, 3, set_m);
    c = queue_one(fx, &ss, req.p);
    fx->pool.stage = stage;
    request_in(fx, NULL, "*1\r\n$4\r\nEXEC\r\n", &ss);
    assert_non_null(strstr(last_done(), "-TRYAGAIN pool p is staging a membership change and a "
                                        "key this transaction writes moves under it"));
    assert_true(c->released);
    sent_on(c, &seen);
    assert_non_null(strstr(seen.p, "*1\r\n$7\r\nDISCARD\r\n"));
    assert_null(strstr(seen.p, "EXEC"));
    fake_reply(&fx->pool, pending_on(c), "+OK\r\n", 5);
    assert_int_equal(fx->pool.m.warm.stage_refused, 2);

    /* Queued, then the change committed (the key has another owner): the same. */
    fx->pool.stage = (px_stage){0};
    c = queue_one(fx, &ss, req.p);
    const ch_table *was = fx->pool.table;
    fx->pool.table = ch_membership_table(st.next);
    request_in(fx, NULL, "*1\r\n$4\r\nEXEC\r\n", &ss);
    fx->pool.table = was;
    assert_non_null(strstr(last_done(), "-TRYAGAIN a key this transaction writes changed owner"));
    sent_on(c, &seen);
    assert_null(strstr(seen.p, "EXEC"));
    fake_reply(&fx->pool, pending_on(c), "+OK\r\n", 5);
    /* Nothing changed meanwhile: EXEC runs. */
    c = queue_one(fx, &ss, req.p);
    request_in(fx, NULL, "*1\r\n$4\r\nEXEC\r\n", &ss);
    fake_reply(&fx->pool, pending_on(c), "*1\r\n+OK\r\n", 9);
    assert_string_equal(last_done(), "*1\r\n+OK\r\n");
    fx->pool.stage = stage;

    /* After WATCH, a write of the moving key is refused alone; a read goes on the connection. */
    char *watch[] = {"WATCH", mk};
    resp(&req, 2, watch);
    size_t n = fake_nconns;
    request_in(fx, NULL, req.p, &ss);
    c = fake_conns[n];
    fake_reply(&fx->pool, pending_on(c), "+OK\r\n", 5);
    resp(&req, 3, set_m);
    request_in(fx, NULL, req.p, &ss);
    assert_non_null(strstr(last_done(), "on the connection of a WATCH, where it cannot be staged"));
    resp(&req, 2, get_m);
    request_in(fx, NULL, req.p, &ss);
    fake_reply(&fx->pool, pending_on(c), "$1\r\n1\r\n", 7);
    assert_string_equal(last_done(), "$1\r\n1\r\n");
    request_in(fx, NULL, "*1\r\n$7\r\nUNWATCH\r\n", &ss);
    fake_reply(&fx->pool, pending_on(c), "+OK\r\n", 5);
    assert_true(c->released);
    assert_int_equal(fx->pool.m.warm.stage_refused, 3);
    assert_int_equal(pending(), 0);
    px_session_free(ss);
    px_buf_free(&req);
    px_buf_free(&seen);
    stage_close(fx, &st);
}

/*
 * test_core.c — the proxy's logic in process, without sockets or sleeps: dispatch, the request
 * layer and the pool route over a real placement table and health, with fake_backend.c in place
 * of backend.c. Expected owners come from the library (ch_lookup, ch_route), expected replies
 * from the test's own model of the command; a route, merge or failover bug fails here without
 * any timing.
 */
#include "dispatch.h"
#include "fake_backend.h"
#include "route_build.h"
#include "route_pool.h"
#include "warm.h"
#include "route_scan.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#define NSERVERS 4

typedef struct fixture {
    char path[64];
    ch_config *cfg;
    px_conf *cref;
    px_shared_pool sp;
    px_io io;
    px_pool pool;
    px_server servers[NSERVERS];
} fixture;

/* What a finished request left: its reply bytes, in completion order. */
static px_buf done_log[64];
static bool done_direct[64]; /* the reply went to the request's output (rq->out) instead */
static size_t ndone;
/* The output the next request is given as its client's queue head would be (NULL: none). */
static px_buf *next_out;

static void on_done(px_rq *rq)
{
    done_direct[ndone] = rq->direct;
    px_buf *b = &done_log[ndone++];
    b->len = 0;
    px_buf_append(b, rq->reply.p, rq->reply.len);
    px_rq_free(rq);
}

static int setup_proto(void **state, const char *extra, bool redis)
{
    fixture *fx = calloc(1, sizeof(*fx));
    snprintf(fx->path, sizeof(fx->path), "/tmp/chash-core-%ld.yml", (long)getpid());
    FILE *fp = fopen(fx->path, "w");
    fprintf(fp, "p:\n  listen: 127.0.0.1:1\n  redis: %s\n  hash: md5\n"
                "  distribution: ketama\n%s  servers:\n", redis ? "true" : "false", extra);
    for (int i = 0; i < NSERVERS; i++)
        fprintf(fp, "   - 127.0.0.1:%d:1 s%d\n", 7001 + i, i);
    fclose(fp);
    ch_config_error err;
    assert_int_equal(ch_config_load(fx->path, &fx->cfg, &err), 0);
    fx->cref = px_conf_new(fx->cfg);
    char why[256];
    assert_int_equal(px_shared_pool_init(&fx->sp, fx->cref, &fx->cfg->pools[0], why, sizeof(why)),
                     0);
    px_pool *pool = &fx->pool;
    pool->io = &fx->io;
    pool->shared = &fx->sp;
    pool->conf = fx->sp.conf;
    pool->members = fx->sp.members;
    pool->table = ch_membership_table(fx->sp.members);
    pool->health = fx->sp.health;
    pool->servers = fx->servers;
    pool->nservers = fx->sp.nservers;
    px_route_build(pool, pool, 1);
    px_pool_configure(pool);
    for (size_t i = 0; i < pool->nservers; i++)
        fx->servers[i] = (px_server){.uid = (uint32_t)(100 + i), .pool = pool, .index = i,
                                     .conf = fx->sp.servers[i]};
    fake_reset();
    ndone = 0;
    next_out = NULL;
    *state = fx;
    return 0;
}

static int setup_conf(void **state, const char *extra)
{
    return setup_proto(state, extra, true);
}

static int setup(void **state)
{
    return setup_conf(state, "");
}

static int setup_mc(void **state)
{
    return setup_proto(state, "", false);
}

static int setup_auth(void **state)
{
    return setup_conf(state, "  client_auth: sesame\n");
}

static int teardown(void **state)
{
    fixture *fx = *state;
    fake_reset();
    px_route_drop(&fx->pool);
    free(fx->pool.args);
    free(fx->pool.keys);
    px_shared_pool_clear(&fx->sp);
    px_conf_unref(fx->cref);
    unlink(fx->path);
    for (size_t i = 0; i < 64; i++)
        px_buf_free(&done_log[i]);
    free(fx);
    return 0;
}

static void request_in(fixture *fx, px_local *ctx, const char *text, px_session **ss);

/* Parses the RESP request text and dispatches it as client 1 would. */
static void request(fixture *fx, px_local *ctx, const char *text)
{
    request_in(fx, ctx, text, NULL);
}

/* What the session emitted (pub/sub messages), and whether it closed the client. */
static px_buf emitted;
static int closes;

static void emit(void *arg, const char *p, size_t len)
{
    (void)arg;
    px_buf_append(&emitted, p, len);
}

static void hook_close(void *arg)
{
    (void)arg;
    closes++;
}

/* ... within session *ss (NULL: none). */
static void request_in(fixture *fx, px_local *ctx, const char *text, px_session **ss)
{
    px_pool *pool = &fx->pool;
    static px_span args[16384], keys[16384];
    px_msg m = {.args = args, .args_cap = 16384, .keys = keys, .keys_cap = 16384};
    size_t consumed = 0, need = 0;
    char err[128];
    assert_int_equal(pool->codec->parse_request(&pool->limits, text, strlen(text), &m, &consumed,
                                                &need, err, sizeof(err)),
                     PX_PARSE_OK);
    assert_int_equal(consumed, strlen(text));
    px_rq *rq = px_rq_new(pool, &m, 1);
    assert_non_null(rq);
    rq->owner = fx;
    rq->on_done = on_done;
    rq->out = next_out;
    px_local none = {0};
    px_session_hooks hooks = {.emit = emit, .close = hook_close, .arg = fx};
    px_dispatch(rq, ctx != NULL ? ctx : &none, ss, &hooks);
}

/* The RESP array of bulk strings for words. */
static void resp(px_buf *b, size_t n, char **words)
{
    b->len = 0;
    px_buf_printf(b, "*%zu\r\n", n);
    for (size_t i = 0; i < n; i++)
        px_buf_printf(b, "$%zu\r\n%s\r\n", strlen(words[i]), words[i]);
    px_buf_append(b, "", 1); /* NUL, not counted */
    b->len--;
}

static size_t owner(fixture *fx, const char *key)
{
    return ch_lookup(fx->pool.table, key, strlen(key));
}

/* The pending fragment sent to server i (NULL: none). */
static fake_sent *sent_to(size_t i)
{
    for (size_t k = 0; k < fake_nlog; k++)
        if (fake_log[k].frag != NULL && fake_log[k].server->index == i)
            return &fake_log[k];
    return NULL;
}

static size_t pending(void)
{
    size_t n = 0;
    for (size_t k = 0; k < fake_nlog; k++)
        n += fake_log[k].frag != NULL;
    return n;
}

/* ---- tests ------------------------------------------------------------------------------------- */

/* A single-key command goes whole, as sent, to the key's owner; its reply is the client's. */
static void test_single_key(void **state)
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
static void test_reply_to_output(void **state)
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

/* MGET over 40 keys: one backend request per server holding some of them, each an MGET of
 * exactly its keys in the client's order; answered in reverse order, the client still gets the
 * values in its key order, nulls where a server had none. */
static void test_mget_split_merge(void **state)
{
    fixture *fx = *state;
    enum { K = 40 };
    char *words[K + 1], names[K][16];
    words[0] = "MGET";
    for (int i = 0; i < K; i++) {
        snprintf(names[i], sizeof(names[i]), "k%d", i);
        words[i + 1] = names[i];
    }
    px_buf req = {0}, want = {0};
    resp(&req, K + 1, words);
    request(fx, NULL, req.p);
    size_t used = 0;
    for (size_t s = 0; s < NSERVERS; s++) {
        char *mine[K + 1];
        size_t n = 0;
        mine[n++] = "MGET";
        for (int i = 0; i < K; i++)
            if (owner(fx, names[i]) == s)
                mine[n++] = names[i];
        fake_sent *e = sent_to(s);
        if (n == 1) {
            assert_null(e);
            continue;
        }
        used++;
        assert_non_null(e);
        resp(&want, n, mine);
        assert_int_equal(e->bytes.len, want.len);
        assert_memory_equal(e->bytes.p, want.p, want.len);
    }
    assert_int_equal(fake_nlog, used);
    assert_true(used >= 2);
    assert_int_equal(fx->pool.stats.fragments, used);
    /* Reverse order; a server's value for key ki is "v<i>", except keys divisible by 3 (null). */
    for (size_t k = fake_nlog; k-- > 0;) {
        size_t s = fake_log[k].server->index;
        px_buf rep = {0};
        size_t n = 0;
        for (int i = 0; i < K; i++)
            n += owner(fx, names[i]) == s;
        px_buf_printf(&rep, "*%zu\r\n", n);
        for (int i = 0; i < K; i++)
            if (owner(fx, names[i]) == s) {
                if (i % 3 == 0)
                    px_buf_printf(&rep, "$-1\r\n");
                else
                    px_buf_printf(&rep, "$%d\r\nv%d\r\n", i < 10 ? 2 : 3, i);
            }
        assert_int_equal(ndone, 0);
        fake_reply(&fx->pool, &fake_log[k], rep.p, rep.len);
        px_buf_free(&rep);
    }
    assert_int_equal(ndone, 1);
    want.len = 0;
    px_buf_printf(&want, "*%d\r\n", K);
    for (int i = 0; i < K; i++) {
        if (i % 3 == 0)
            px_buf_printf(&want, "$-1\r\n");
        else
            px_buf_printf(&want, "$%d\r\nv%d\r\n", i < 10 ? 2 : 3, i);
    }
    assert_int_equal(done_log[0].len, want.len);
    assert_memory_equal(done_log[0].p, want.p, want.len);
    px_buf_free(&req);
    px_buf_free(&want);
}

/* DEL: integers summed; MSET: +OK, or the first error when a part fails. */
static void test_sum_and_all_ok(void **state)
{
    fixture *fx = *state;
    char *del[] = {"DEL", "a", "b", "c", "d", "e", "f", "g", "h"};
    px_buf req = {0};
    resp(&req, 9, del);
    request(fx, NULL, req.p);
    size_t parts = fake_nlog;
    assert_true(parts >= 2);
    int64_t want = 0;
    for (size_t k = 0; k < parts; k++) {
        char rep[16];
        int n = snprintf(rep, sizeof(rep), ":%zu\r\n", k + 1);
        want += (int64_t)k + 1;
        fake_reply(&fx->pool, &fake_log[k], rep, (size_t)n);
    }
    char wantb[32];
    int wn = snprintf(wantb, sizeof(wantb), ":%lld\r\n", (long long)want);
    assert_int_equal(ndone, 1);
    assert_int_equal(done_log[0].len, (size_t)wn);
    assert_memory_equal(done_log[0].p, wantb, (size_t)wn);

    fake_reset();
    char *mset[] = {"MSET", "a", "1", "b", "2", "c", "3", "d", "4", "e", "5",
                    "f", "6", "g", "7", "h", "8", "i", "9", "j", "0"};
    resp(&req, 21, mset);
    request(fx, NULL, req.p);
    assert_true(fake_nlog >= 2);
    /* Each part is an MSET of its own pairs: the value follows its key. */
    for (size_t k = 0; k < fake_nlog; k++)
        assert_non_null(memmem(fake_log[k].bytes.p, fake_log[k].bytes.len, "MSET", 4));
    fake_reply(&fx->pool, &fake_log[0], "-ERR oops\r\n", 11);
    for (size_t k = 1; k < fake_nlog; k++)
        fake_reply(&fx->pool, &fake_log[k], "+OK\r\n", 5);
    assert_int_equal(ndone, 2);
    assert_int_equal(done_log[1].len, 11);
    assert_memory_equal(done_log[1].p, "-ERR oops\r\n", 11);
    px_buf_free(&req);
}

/* A read whose server fails goes to the key's next candidate (the library's second), by routing
 * the key again; a write is answered with the failure at once. */
static void test_failover_reroute(void **state)
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
static void test_split_failover(void **state)
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
static void test_synchronous_failures(void **state)
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
static void test_ejected_owner(void **state)
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

/* Local commands and the auth gate: NOAUTH before AUTH (PING passes with client_auth), a wrong
 * password refused, then served. */
static void test_auth_gate(void **state)
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
                          "-ERR invalid password\r\n", "+OK\r\n", "$2\r\nhi\r\n", "+OK\r\n"};
    assert_int_equal(ndone, 6);
    for (size_t i = 0; i < 6; i++) {
        px_buf_append(&done_log[i], "", 1);
        assert_string_equal(done_log[i].p, want[i]);
    }
}

/* Refused at once, the connection kept: an unknown command, bad arity, EVAL's bad key count. */
static void test_rejects(void **state)
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

/* A reload between the send and the failure: the retry routes against the membership of that
 * moment, with nothing renumbered (a server removed is simply not a candidate any more). */
static void test_failover_after_membership_change(void **state)
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


/* ---- memcached -------------------------------------------------------------------------------- */

static void assert_done(size_t i, const char *want)
{
    px_buf_append(&done_log[i], "", 1);
    done_log[i].len--;
    assert_string_equal(done_log[i].p, want);
}

/* get k1 .. kn over several servers: each server gets "get" with its keys in the client's order;
 * the reply is every VALUE block in the client's key order (a key asked twice answered twice, a
 * miss left out) and one END. */
static void test_mc_multiget(void **state)
{
    fixture *fx = *state;
    const char *keys[] = {"a", "b", "c", "d", "e", "f", "g", "h", "a"};
    size_t nk = sizeof(keys) / sizeof(keys[0]);
    px_buf req = {0};
    px_buf_printf(&req, "get");
    for (size_t i = 0; i < nk; i++)
        px_buf_printf(&req, " %s", keys[i]);
    px_buf_printf(&req, "\r\n");
    px_buf_append(&req, "", 1);
    request(fx, NULL, req.p);
    assert_true(fake_nlog >= 2);
    for (size_t k = 0; k < fake_nlog; k++) {
        size_t s = fake_log[k].server->index;
        px_buf want = {0}, rep = {0};
        px_buf_printf(&want, "get");
        for (size_t i = 0; i < nk; i++)
            if (owner(fx, keys[i]) == s) {
                px_buf_printf(&want, " %s", keys[i]);
                if (keys[i][0] != 'c') /* c misses */
                    px_buf_printf(&rep, "VALUE %s 0 2\r\nv%s\r\n", keys[i], keys[i]);
            }
        px_buf_printf(&want, "\r\n");
        px_buf_printf(&rep, "END\r\n");
        assert_int_equal(fake_log[k].bytes.len, want.len);
        assert_memory_equal(fake_log[k].bytes.p, want.p, want.len);
        fake_reply(&fx->pool, &fake_log[k], rep.p, rep.len);
        px_buf_free(&want);
        px_buf_free(&rep);
    }
    assert_int_equal(ndone, 1);
    assert_done(0, "VALUE a 0 2\r\nva\r\nVALUE b 0 2\r\nvb\r\nVALUE d 0 2\r\nvd\r\n"
                   "VALUE e 0 2\r\nve\r\nVALUE f 0 2\r\nvf\r\nVALUE g 0 2\r\nvg\r\n"
                   "VALUE h 0 2\r\nvh\r\nVALUE a 0 2\r\nva\r\nEND\r\n");
    px_buf_free(&req);
}

/* noreply is stripped towards the backend (which then answers, keeping one reply per request)
 * and the client gets nothing, whatever the answer; a failure too is swallowed. The meta q
 * flag is stripped, and the reply dropped exactly when memcached would not have sent it. */
static void test_mc_noreply_quiet(void **state)
{
    fixture *fx = *state;
    request(fx, NULL, "set k 0 0 2 noreply\r\nhi\r\n");
    assert_int_equal(fake_nlog, 1);
    assert_int_equal(fake_log[0].bytes.len, strlen("set k 0 0 2\r\nhi\r\n"));
    assert_memory_equal(fake_log[0].bytes.p, "set k 0 0 2\r\nhi\r\n", fake_log[0].bytes.len);
    fake_reply(&fx->pool, &fake_log[0], "NOT_STORED\r\n", 12);
    request(fx, NULL, "delete k noreply\r\n");
    fake_fail(&fake_log[1]);
    request(fx, NULL, "mg k v q O9\r\n");
    assert_memory_equal(fake_log[2].bytes.p, "mg k v O9\r\n", fake_log[2].bytes.len);
    fake_reply(&fx->pool, &fake_log[2], "EN\r\n", 4);          /* a quiet miss: dropped */
    request(fx, NULL, "mg k v q O9\r\n");
    fake_reply(&fx->pool, &fake_log[3], "VA 2 O9\r\nhi\r\n", 13); /* a hit: sent */
    request(fx, NULL, "ms k 2 q\r\nhi\r\n");
    fake_reply(&fx->pool, &fake_log[4], "HD\r\n", 4);          /* stored, quiet: dropped */
    request(fx, NULL, "ms k 2 q\r\nhi\r\n");
    fake_reply(&fx->pool, &fake_log[5], "NS\r\n", 4);          /* not stored: sent */
    request(fx, NULL, "mn\r\n");
    assert_int_equal(fake_nlog, 6);
    assert_int_equal(ndone, 7);
    const char *want[] = {"", "", "", "VA 2 O9\r\nhi\r\n", "", "NS\r\n", "MN\r\n"};
    for (size_t i = 0; i < 7; i++)
        assert_done(i, want[i]);
}

/* A base64 meta key routes by its decoded bytes: mg with b goes where get of the plain key goes. */
static void test_mc_base64_routing(void **state)
{
    fixture *fx = *state;
    for (int i = 0; i < 20; i++) {
        char key[16], b64[32], req[64];
        snprintf(key, sizeof(key), "user:%03d", i); /* 8 bytes: base64 without padding */
        static const char tbl[] =
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        size_t o = 0;
        for (size_t j = 0; j < 8; j += 3) {
            unsigned v = (unsigned)(unsigned char)key[j] << 16 |
                         (j + 1 < 8 ? (unsigned)(unsigned char)key[j + 1] << 8 : 0) |
                         (j + 2 < 8 ? (unsigned)(unsigned char)key[j + 2] : 0);
            b64[o++] = tbl[v >> 18 & 63];
            b64[o++] = tbl[v >> 12 & 63];
            b64[o++] = j + 1 < 8 ? tbl[v >> 6 & 63] : '=';
            b64[o++] = j + 2 < 8 ? tbl[v & 63] : '=';
        }
        b64[o] = '\0';
        snprintf(req, sizeof(req), "mg %s b v\r\n", b64);
        size_t before = fake_nlog;
        request(fx, NULL, req);
        assert_int_equal(fake_log[before].server->index, owner(fx, key));
        fake_reply(&fx->pool, &fake_log[before], "EN\r\n", 4);
    }
}

/* Local and refused commands never reach a backend. */
static void test_mc_local(void **state)
{
    fixture *fx = *state;
    px_local ctx = {0};
    request(fx, &ctx, "version\r\n");
    request(fx, &ctx, "stats\r\n");
    request(fx, &ctx, "nonsense\r\n");
    request(fx, &ctx, "quit\r\n");
    assert_true(ctx.close);
    assert_int_equal(fake_nlog, 0);
    assert_int_equal(ndone, 4);
    assert_done(0, "VERSION " PX_VERSION "\r\n");
    assert_done(1, "CLIENT_ERROR stats is not supported by the proxy\r\n");
    assert_done(2, "ERROR\r\n");
    assert_done(3, "");
}

/* The rejoin clean-up's requests, as each codec writes them (and as its own reply scanner reads
 * the answers the servers give). */
static void test_cleanup_encodings(void **state)
{
    (void)state;
    struct {
        const px_codec *codec;
        const char *key;
        size_t len;
        const char *want;
    } cases[] = {
        {&px_codec_redis, "k:1", 3, "*2\r\n$3\r\nDEL\r\n$3\r\nk:1\r\n"},
        {&px_codec_redis, "a b\n", 4, "*2\r\n$3\r\nDEL\r\n$4\r\na b\n\r\n"},
        {&px_codec_memcache, "k:1", 3, "delete k:1\r\n"},
        {&px_codec_memcache, "a b", 3, "md YSBi b\r\n"},   /* base64 of "a b" */
        {&px_codec_memcache, "\x01", 1, "md AQ== b\r\n"},
        {&px_codec_redis, NULL, 0, "*1\r\n$7\r\nFLUSHDB\r\n"},
        {&px_codec_memcache, NULL, 0, "flush_all\r\n"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        px_buf b = {0};
        uint8_t expect = 0;
        int rc = cases[i].key != NULL
                     ? cases[i].codec->encode_delete(&b, cases[i].key, cases[i].len, &expect)
                     : cases[i].codec->encode_flush(&b, &expect);
        assert_int_equal(rc, 0);
        assert_int_equal(b.len, strlen(cases[i].want));
        assert_memory_equal(b.p, cases[i].want, b.len);
        px_buf_free(&b);
    }
    /* memcached's answers to them frame as one reply each. */
    const char *answers[] = {"DELETED\r\n", "NOT_FOUND\r\n", "HD\r\n", "NF\r\n", "OK\r\n"};
    uint8_t expects[] = {0, 0, 0, 0, 0};
    px_buf b = {0};
    px_codec_memcache.encode_delete(&b, "k", 1, &expects[0]);
    expects[1] = expects[0];
    px_codec_memcache.encode_delete(&b, " ", 1, &expects[2]);
    expects[3] = expects[2];
    px_codec_memcache.encode_flush(&b, &expects[4]);
    px_buf_free(&b);
    px_limits lim, blim;
    ch_conf_pool pc = {.max_request_bytes = 1 << 20};
    px_codec_memcache.limits(&pc, &lim, &blim);
    for (size_t i = 0; i < 5; i++) {
        px_reply r;
        size_t consumed = 0, need = 0;
        char err[64];
        assert_int_equal(px_codec_memcache.scan_reply(&blim, expects[i], answers[i],
                                                      strlen(answers[i]), &r, &consumed, &need,
                                                      err, sizeof(err)),
                         PX_PARSE_OK);
        assert_int_equal(consumed, strlen(answers[i]));
        assert_int_not_equal(r.kind, PX_REPLY_ERROR);
    }
}

/* Fail-open: with max_ejected_share 0.5 of 4 servers, two can be ejected, a third cannot (it
 * stays up, and the refusal is counted); once one comes back, another can go. */
static void test_fail_open(void **state)
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

/* MSETNX and EVAL with keys run on one server: keys of different owners are refused with
 * CROSSSLOT before anything is sent; keys of one owner go there whole. HELLO: protocol 2 is
 * answered by the proxy, 3 refused (NOPROTO). */
static void test_one_server_and_hello(void **state)
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
    request(fx, NULL, "*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n");
    request(fx, NULL, "*2\r\n$5\r\nHELLO\r\n$1\r\n2\r\n");
    assert_int_equal(ndone, 5);
    px_buf_append(&done_log[3], "", 1);
    assert_string_equal(done_log[3].p, "-NOPROTO unsupported protocol version\r\n");
    assert_memory_equal(done_log[4].p, "*14\r\n$6\r\nserver\r\n$11\r\nchash-proxy\r\n", 35);
    px_buf_free(&req);
}


/* ---- a membership change's window (warm.h) ------------------------------------------------------ */

/* The placement of the fixture's file without its last server: the "previous" membership of a
 * window over the fixture's four servers. */
static ch_membership *prev_membership(fixture *fx, bool redis, ch_config **cfg_out,
                                      px_conf **cref_out)
{
    char path[80];
    snprintf(path, sizeof(path), "%s.prev", fx->path);
    FILE *fp = fopen(path, "w");
    fprintf(fp, "p:\n  listen: 127.0.0.1:1\n  redis: %s\n  hash: md5\n"
                "  distribution: ketama\n  servers:\n", redis ? "true" : "false");
    for (int i = 0; i < NSERVERS - 1; i++)
        fprintf(fp, "   - 127.0.0.1:%d:1 s%d\n", 7001 + i, i);
    fclose(fp);
    ch_config_error err;
    assert_int_equal(ch_config_load(path, cfg_out, &err), 0);
    unlink(path);
    *cref_out = px_conf_new(*cfg_out);
    ch_membership *m = NULL;
    assert_int_equal(ch_config_membership(&(*cfg_out)->pools[0], &m), CH_OK);
    return m;
}

typedef struct window {
    ch_config *cfg;
    px_conf *cref;
    ch_membership *prev;
} window;

/* Opens a window over the first three servers (which held every key before the fourth came). */
static void window_open(fixture *fx, window *w, bool redis, uint64_t ramp, uint64_t warm)
{
    w->prev = prev_membership(fx, redis, &w->cfg, &w->cref);
    px_server *src[NSERVERS - 1];
    for (int i = 0; i < NSERVERS - 1; i++)
        src[i] = &fx->servers[i];
    px_warm_times t = {1000, ramp, warm};
    px_warm_begin(&fx->pool, ch_membership_table(w->prev), src, NSERVERS - 1, &t);
    fake_now_ms = 1000;
}

static void window_close(fixture *fx, window *w)
{
    px_warm_end(&fx->pool);
    ch_membership_free(w->prev);
    px_conf_unref(w->cref);
}

/* A key the window moves (its owner now is the new fourth server), and one it does not. */
static void moved_and_kept(fixture *fx, const window *w, char *moved, char *kept, int skip)
{
    moved[0] = kept[0] = '\0';
    for (int i = 0; moved[0] == '\0' || kept[0] == '\0'; i++) {
        char k[16];
        snprintf(k, sizeof(k), "key%d", i);
        size_t now = owner(fx, k), before = ch_lookup(ch_membership_table(w->prev), k, strlen(k));
        assert_true(now == before || now == NSERVERS - 1); /* ketama moves keys to the new one */
        if (now != before && moved[0] == '\0' && skip-- <= 0)
            strcpy(moved, k);
        else if (now == before && kept[0] == '\0')
            strcpy(kept, k);
    }
}

static size_t prev_owner(const window *w, const char *k)
{
    return ch_lookup(ch_membership_table(w->prev), k, strlen(k));
}

static bool sent_is(const fake_sent *e, const char *want)
{
    return e->bytes.len == strlen(want) && memcmp(e->bytes.p, want, e->bytes.len) == 0;
}

/* MGET of a moved and a kept key in a warm-up window: the kept key goes as usual; the moved
 * one alone to its new owner, then, on a miss, to its old owner; the client gets both values
 * in order; the hit is then fetched (PTTL + DUMP) and RESTOREd at the new owner, without
 * REPLACE. A second moved key read, then written before its fetch returns: its copy is
 * dropped. */
static void test_warm_read_and_fill(void **state)
{
    fixture *fx = *state;
    px_pool *pool = &fx->pool;
    window w;
    window_open(fx, &w, true, 0, 10000);
    char mk[16], kk[16], mk2[16], unused[16];
    moved_and_kept(fx, &w, mk, kk, 0);
    moved_and_kept(fx, &w, mk2, unused, 1);
    fake_now_ms = 2000;
    char *words[] = {"MGET", kk, mk};
    px_buf req = {0};
    resp(&req, 3, words);
    request(fx, NULL, req.p);
    assert_int_equal(fake_nlog, 2);
    fake_sent *to_kept = sent_to(owner(fx, kk)), *to_new = sent_to(NSERVERS - 1);
    assert_non_null(to_kept);
    assert_non_null(to_new);
    char want[128];
    snprintf(want, sizeof(want), "*2\r\n$4\r\nMGET\r\n$%zu\r\n%s\r\n", strlen(mk), mk);
    assert_true(sent_is(to_new, want));
    fake_reply(pool, to_kept, "*1\r\n$1\r\nK\r\n", sizeof("*1\r\n$1\r\nK\r\n") - 1);
    fake_reply(pool, to_new, "*1\r\n$-1\r\n", sizeof("*1\r\n$-1\r\n") - 1);
    assert_int_equal(ndone, 0);
    fake_sent *to_old = sent_to(prev_owner(&w, mk));
    assert_non_null(to_old);
    assert_true(sent_is(to_old, want));
    fake_reply(pool, to_old, "*1\r\n$1\r\nM\r\n", sizeof("*1\r\n$1\r\nM\r\n") - 1);
    assert_int_equal(ndone, 1);
    assert_done(0, "*2\r\n$1\r\nK\r\n$1\r\nM\r\n");
    /* The copy: a fetch on the old owner, then RESTORE on the new. */
    fake_sent *fetch = sent_to(prev_owner(&w, mk));
    assert_non_null(fetch);
    assert_non_null(memmem(fetch->bytes.p, fetch->bytes.len, "EVAL", strlen("EVAL")));
    assert_non_null(memmem(fetch->bytes.p, fetch->bytes.len, "DUMP", strlen("DUMP")));
    fake_reply(pool, fetch, "*2\r\n:5000\r\n$3\r\nabc\r\n", sizeof("*2\r\n:5000\r\n$3\r\nabc\r\n") - 1);
    fake_sent *restore = sent_to(NSERVERS - 1);
    assert_non_null(restore);
    snprintf(want, sizeof(want),
             "*4\r\n$7\r\nRESTORE\r\n$%zu\r\n%s\r\n$4\r\n5000\r\n$3\r\nabc\r\n", strlen(mk),
             mk);
    assert_true(sent_is(restore, want));
    fake_reply(pool, restore, "+OK\r\n", sizeof("+OK\r\n") - 1);
    assert_int_equal(pool->m.warm.warm_hits, 1);
    assert_int_equal(pool->m.warm.warm_fills, 1);
    assert_int_equal(pending(), 0);

    /* mk2: read (miss at the new owner, hit at the old), then written before its fetch is
     * answered: the copy is dropped, the write's own move goes on. */
    char *get2[] = {"GET", mk2};
    resp(&req, 2, get2);
    request(fx, NULL, req.p);
    fake_reply(pool, sent_to(NSERVERS - 1), "$-1\r\n", sizeof("$-1\r\n") - 1);
    fake_reply(pool, sent_to(prev_owner(&w, mk2)), "$1\r\nX\r\n", sizeof("$1\r\nX\r\n") - 1);
    assert_int_equal(ndone, 2);
    fake_sent *fetch2 = sent_to(prev_owner(&w, mk2));
    assert_non_null(fetch2);
    char *set2[] = {"SET", mk2, "new"};
    resp(&req, 3, set2);
    request(fx, NULL, req.p);
    fake_reply(pool, fetch2, "*2\r\n:5000\r\n$1\r\nX\r\n", sizeof("*2\r\n:5000\r\n$1\r\nX\r\n") - 1);
    assert_int_equal(pool->m.warm.warm_fill_errors, 1); /* dropped: written since its read */
    for (size_t k = 0; k < fake_nlog; k++)
        if (fake_log[k].frag != NULL)
            assert_null(memmem(fake_log[k].bytes.p, fake_log[k].bytes.len, "RESTORE", 7));
    /* The write: its take finds nothing (say), then it goes to the new owner. */
    fake_reply(pool, sent_to(prev_owner(&w, mk2)), "$-1\r\n", 5);
    fake_reply(pool, sent_to(NSERVERS - 1), "+OK\r\n", 5);
    assert_int_equal(ndone, 3);
    assert_int_equal(pending(), 0);
    px_buf_free(&req);
    window_close(fx, &w);
    fake_reset();
}

/* A write of a moved key in the window moves it first: one EVAL takes PTTL, DUMP and DEL on
 * the old owner, RESTORE (no REPLACE) copies it to the new owner, then the write goes there.
 * DEL of a moved key the old owner does not have goes straight to the new owner. */
static void test_warm_write_moves(void **state)
{
    fixture *fx = *state;
    px_pool *pool = &fx->pool;
    window w;
    window_open(fx, &w, true, 0, 10000);
    char mk[16], kk[16], mk2[16];
    moved_and_kept(fx, &w, mk, kk, 0);
    moved_and_kept(fx, &w, mk2, kk, 1);
    fake_now_ms = 2000;
    char *words[] = {"INCR", mk};
    px_buf req = {0};
    resp(&req, 2, words);
    request(fx, NULL, req.p);
    assert_int_equal(fake_nlog, 1);
    fake_sent *take = &fake_log[0];
    assert_int_equal(take->server->index, prev_owner(&w, mk));
    assert_non_null(memmem(take->bytes.p, take->bytes.len, "DEL", strlen("DEL")));
    fake_reply(pool, take, "*2\r\n:-1\r\n$2\r\n41\r\n", sizeof("*2\r\n:-1\r\n$2\r\n41\r\n") - 1);
    fake_sent *restore = sent_to(NSERVERS - 1);
    char want[128];
    snprintf(want, sizeof(want),
             "*4\r\n$7\r\nRESTORE\r\n$%zu\r\n%s\r\n$1\r\n0\r\n$2\r\n41\r\n", strlen(mk), mk);
    assert_true(sent_is(restore, want));
    assert_int_equal(ndone, 0);
    fake_reply(pool, restore, "+OK\r\n", sizeof("+OK\r\n") - 1);
    fake_sent *incr = sent_to(NSERVERS - 1);
    assert_true(sent_is(incr, req.p));
    fake_reply(pool, incr, ":42\r\n", sizeof(":42\r\n") - 1);
    assert_int_equal(ndone, 1);
    assert_done(0, ":42\r\n");
    assert_int_equal(pool->m.warm.warm_fills, 1);
    assert_int_equal(pool->m.warm.warm_deletes, 1);

    char *del[] = {"DEL", mk2};
    resp(&req, 2, del);
    request(fx, NULL, req.p);
    fake_reply(pool, sent_to(prev_owner(&w, mk2)), "$-1\r\n", sizeof("$-1\r\n") - 1);
    fake_sent *d = sent_to(NSERVERS - 1);
    assert_non_null(d);
    snprintf(want, sizeof(want), "*2\r\n$3\r\nDEL\r\n$%zu\r\n%s\r\n", strlen(mk2), mk2);
    assert_true(sent_is(d, want));
    fake_reply(pool, d, ":0\r\n", sizeof(":0\r\n") - 1);
    assert_done(1, ":0\r\n");
    px_buf_free(&req);
    window_close(fx, &w);
}

/* A ramp over 10 s: at 5 s in, a moved key goes to its old owner exactly when its switch
 * (start + XXH3_64(key) mod ramp) is still ahead, else to its new owner; kept keys to their
 * owner. After the ramp every key is on its new owner and the window is over. */
static void test_ramp(void **state)
{
    fixture *fx = *state;
    px_pool *pool = &fx->pool;
    window w;
    window_open(fx, &w, true, 10000, 0);
    fake_now_ms = 6000;
    size_t before = 0, after = 0;
    px_buf req = {0};
    for (int i = 0; i < 200; i++) {
        char k[16];
        snprintf(k, sizeof(k), "key%d", i);
        char *words[] = {"GET", k};
        resp(&req, 2, words);
        size_t at = fake_nlog;
        request(fx, NULL, req.p);
        size_t to = fake_log[at].server->index;
        if (owner(fx, k) == prev_owner(&w, k)) {
            assert_int_equal(to, owner(fx, k));
        } else if (1000 + XXH3_64bits(k, strlen(k)) % 10000 > 6000) {
            assert_int_equal(to, prev_owner(&w, k));
            before++;
        } else {
            assert_int_equal(to, NSERVERS - 1);
            after++;
        }
        fake_reply(pool, &fake_log[at], "$-1\r\n", sizeof("$-1\r\n") - 1);
        assert_int_equal(ndone, 1);
        ndone = 0;
    }
    assert_true(before > 0 && after > 0);
    assert_int_equal(pool->m.warm.ramp_old, before);
    fake_now_ms = 11000;
    assert_int_equal(px_warm_left(pool, fake_now_ms), 0);
    char *words[] = {"GET", "key1"};
    resp(&req, 2, words);
    size_t at = fake_nlog;
    request(fx, NULL, req.p);
    assert_int_equal(fake_log[at].server->index, owner(fx, "key1"));
    assert_null(pool->warm.table); /* ended by the first lookup after it */
    px_buf_free(&req);
    window_close(fx, &w);
}

/* memcached: get of a moved key misses at the new owner, is answered by the old one, then
 * copied with mg (value, remaining TTL, flags) and an add-mode ms that keeps them. */
static void test_mc_warm(void **state)
{
    fixture *fx = *state;
    px_pool *pool = &fx->pool;
    window w;
    window_open(fx, &w, false, 0, 10000);
    char mk[16], kk[16];
    moved_and_kept(fx, &w, mk, kk, 0);
    fake_now_ms = 2000;
    char req[64], want[96];
    snprintf(req, sizeof(req), "get %s\r\n", mk);
    request(fx, NULL, req);
    fake_reply(pool, sent_to(NSERVERS - 1), "END\r\n", sizeof("END\r\n") - 1);
    fake_sent *old = sent_to(prev_owner(&w, mk));
    assert_true(sent_is(old, req));
    char value[64];
    int vl = snprintf(value, sizeof(value), "VALUE %s 3 2\r\nab\r\nEND\r\n", mk);
    fake_reply(pool, old, value, (size_t)vl);
    assert_done(0, value);
    fake_sent *fetch = sent_to(prev_owner(&w, mk));
    snprintf(want, sizeof(want), "mg %s v t f\r\n", mk);
    assert_true(sent_is(fetch, want));
    fake_reply(pool, fetch, "VA 2 t100 f3\r\nab\r\n", sizeof("VA 2 t100 f3\r\nab\r\n") - 1);
    fake_sent *fill = sent_to(NSERVERS - 1);
    snprintf(want, sizeof(want), "ms %s 2 T100 F3 ME\r\nab\r\n", mk);
    assert_true(sent_is(fill, want));
    fake_reply(pool, fill, "NS\r\n", sizeof("NS\r\n") - 1);
    assert_int_equal(pool->m.warm.warm_fills_present, 1);
    window_close(fx, &w);
}

/* The last reply, NUL-ended. */
static const char *last_done(void)
{
    px_buf *b = &done_log[ndone - 1];
    px_buf_append(b, "", 1);
    b->len--;
    return b->p;
}

/* SCAN: the cursor names the server, the membership's tag and the server's own cursor; the walk
 * goes through the servers in membership order; a forged cursor is refused without a send. */
static void test_scan(void **state)
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
static void test_script_every_server(void **state)
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

/* The sends made on dedicated connection c, NUL-ended, concatenated. */
static void sent_on(px_conn *c, px_buf *out)
{
    out->len = 0;
    for (size_t k = 0; k < fake_nlog; k++)
        if (fake_log[k].conn == c)
            px_buf_append(out, fake_log[k].bytes.p, fake_log[k].bytes.len);
    px_buf_append(out, "", 1);
}

static fake_sent *pending_on(px_conn *c)
{
    for (size_t k = 0; k < fake_nlog; k++)
        if (fake_log[k].conn == c && fake_log[k].frag != NULL)
            return &fake_log[k];
    return NULL;
}

/* MULTI: answered by the proxy until the first key picks the server; then MULTI and the
 * commands go on a connection of the client's own; a key of another server answers CROSSSLOT,
 * DISCARD goes on the connection, which is released, and EXEC answers EXECABORT. */
static void test_transaction(void **state)
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

/* SUBSCRIBE to channels of two servers: one connection each, the client's reply held until both
 * confirmed, with the counts the proxy computes; messages emitted; PSUBSCRIBE on every server;
 * in pub/sub mode only the subscriptions and PING are served. */
static void test_pubsub(void **state)
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


/* A split command over more keys than PX_RQ_SLICE starts one slice per loop iteration: the first
 * slice's sends go out at once, the rest only when the loop runs its deferred work; the client
 * still gets every value in its key order, and the request completes only after its last slice. */
static void test_mget_slices(void **state)
{
    fixture *fx = *state;
    px_pool *pool = &fx->pool;
    enum { K = 2 * PX_RQ_SLICE + 100 };
    px_buf req = {0};
    px_buf_printf(&req, "*%d\r\n$4\r\nMGET\r\n", K + 1);
    for (int i = 0; i < K; i++) {
        char k[16];
        int n = snprintf(k, sizeof(k), "s%d", i);
        px_buf_printf(&req, "$%d\r\n%s\r\n", n, k);
    }
    px_buf_append(&req, "", 1);
    req.len--;
    request(fx, NULL, req.p);
    size_t keys_sent = 0;
    for (size_t k = 0; k < fake_nlog; k++)
        keys_sent += fake_log[k].frag->nslots;
    assert_int_equal(keys_sent, PX_RQ_SLICE);
    fake_run_deferred();
    keys_sent = 0;
    for (size_t k = 0; k < fake_nlog; k++)
        keys_sent += fake_log[k].frag->nslots;
    assert_int_equal(keys_sent, K);
    /* Each server answers its parts with the key's own name as the value. */
    for (size_t k = 0; k < fake_nlog; k++) {
        fake_sent *e = &fake_log[k];
        px_buf r = {0};
        px_buf_printf(&r, "*%zu\r\n", e->frag->nslots);
        /* The part's request is MGET k1 k2 ...: its keys in order. */
        const char *p = e->bytes.p, *end = e->bytes.p + e->bytes.len;
        p = memchr(p, '\n', (size_t)(end - p)) + 1;                    /* *n */
        p = memchr(p, '\n', (size_t)(end - p)) + 1;                    /* $4 */
        p = memchr(p, '\n', (size_t)(end - p)) + 1;                    /* MGET */
        for (size_t j = 0; j < e->frag->nslots; j++) {
            int len = atoi(p + 1);
            p = memchr(p, '\n', (size_t)(end - p)) + 1;
            px_buf_printf(&r, "$%d\r\n%.*s\r\n", len, len, p);
            p += len + 2;
        }
        fake_reply(pool, e, r.p, r.len);
        px_buf_free(&r);
        if (k + 1 < fake_nlog)
            assert_int_equal(ndone, 0);
    }
    assert_int_equal(ndone, 1);
    px_buf want = {0};
    px_buf_printf(&want, "*%d\r\n", K);
    for (int i = 0; i < K; i++) {
        char k[16];
        int n = snprintf(k, sizeof(k), "s%d", i);
        px_buf_printf(&want, "$%d\r\n%s\r\n", n, k);
    }
    assert_int_equal(done_log[0].len, want.len);
    assert_memory_equal(done_log[0].p, want.p, want.len);
    px_buf_free(&want);
    px_buf_free(&req);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_single_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reply_to_output, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mget_split_merge, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mget_slices, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sum_and_all_ok, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failover_reroute, setup, teardown),
        cmocka_unit_test_setup_teardown(test_split_failover, setup, teardown),
        cmocka_unit_test_setup_teardown(test_synchronous_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ejected_owner, setup, teardown),
        cmocka_unit_test_setup_teardown(test_auth_gate, setup_auth, teardown),
        cmocka_unit_test_setup_teardown(test_rejects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failover_after_membership_change, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mc_multiget, setup_mc, teardown),
        cmocka_unit_test_setup_teardown(test_mc_noreply_quiet, setup_mc, teardown),
        cmocka_unit_test_setup_teardown(test_mc_base64_routing, setup_mc, teardown),
        cmocka_unit_test_setup_teardown(test_mc_local, setup_mc, teardown),
        cmocka_unit_test(test_cleanup_encodings),
        cmocka_unit_test_setup_teardown(test_fail_open, setup, teardown),
        cmocka_unit_test_setup_teardown(test_one_server_and_hello, setup, teardown),
        cmocka_unit_test_setup_teardown(test_warm_read_and_fill, setup, teardown),
        cmocka_unit_test_setup_teardown(test_warm_write_moves, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ramp, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mc_warm, setup_mc, teardown),
        cmocka_unit_test_setup_teardown(test_scan, setup, teardown),
        cmocka_unit_test_setup_teardown(test_script_every_server, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transaction, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pubsub, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

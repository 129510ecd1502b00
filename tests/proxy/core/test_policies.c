/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_policies.c — each parent route's policy alone, over fake children (issue 36, item 4), as
 * mcrouter tests WarmUpRoute over three TestHandles: the real route's ops at the root of a tree
 * built by hand as route_build.c wires it, fake leaves (fake_routes.h) as its children, each
 * leaf sending to a fake server of its own (fake_backend.c) and telling where it places a key
 * from a table the test sets. A pool in memory: a ch_conf_pool filled in code, its counters,
 * the fake loop clock (fake_now_ms, and io.read_hr for the latency clock in ns), a shared
 * health object only where the route reads one. No config file, no placement table the route
 * reads, no socket, no sleep. Requests are parsed by the real RESP or memcached codec.
 *
 * Per route, step by step: which child each slot goes to, the side requests it starts (fork,
 * fire) and their bytes, what the client finally gets, and the counters. Expected bytes are
 * the protocol written out here (R() spells a RESP command), or properties of it (a fetch is
 * an EVAL that reads PTTL and DUMP of the key); never what the code under test computes.
 */
#include "fake_routes.h"
#include "route_coalesce.h"
#include "route_gutter.h"
#include "route_near.h"
#include "track.h"
#include "route_replica.h"
#include "route_shadow.h"
#include "route_stage.h"
#include "route_warm.h"
#include "warm.h"

#include "hot/near.h"
#include "hot/topk.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* ---- the fixture: pools in memory ------------------------------------------------------------ */

typedef struct fixture {
    ch_conf_pool pc, opc;
    px_shared_pool sp;
    px_io io;
    px_pool pool;   /* the pool whose route is under test */
    px_pool other;  /* another pool of the same worker: the gutter's, the shadow's */
    ch_table *prev; /* warm: the window's previous table (the route asks only whether a window
                       is open; where a key was is the previous leaf's where()) */
    px_gutter_conf gutter; /* the gutter route's settings (route_build.c keeps them in the tree) */
    px_shadow_conf shadow; /* the shadow route's */
} fixture;

static void pool_init(px_pool *pool, const ch_conf_pool *pc, fixture *fx)
{
    pool->io = &fx->io;
    pool->conf = pc;
    pool->shared = &fx->sp;
    pool->nservers = 1;
    px_pool_configure(pool); /* its codec and limits, from pc */
}

static int setup_proto(void **state, bool redis)
{
    fixture *fx = calloc(1, sizeof(*fx));
    assert_non_null(fx);
    fx->pc = (ch_conf_pool){.name = "p", .redis = redis, .max_request_bytes = 1 << 20,
                            .failover_depth = 2};
    fx->opc = fx->pc;
    fx->opc.name = "o";
    pool_init(&fx->pool, &fx->pc, fx);
    pool_init(&fx->other, &fx->opc, fx);
    fx->io.read_hr = 1000000000u; /* the latency clock (ns): only the tests move it */
    fake_now_ms = 2000;           /* the loop clock (ms) */
    fake_reset();
    fake_routes_reset();
    *state = fx;
    return 0;
}

static int setup(void **state)
{
    return setup_proto(state, true);
}

static int setup_mc(void **state)
{
    return setup_proto(state, false);
}

/* Fails every backend request left unanswered until none is left, so every request and side
 * request ends (and frees what it holds: a test leaving work behind would leak otherwise). */
static void drain(void)
{
    for (int round = 0; round < 64 && fake_unanswered() > 0; round++)
        for (size_t k = 0; k < fake_nlog; k++)
            if (fake_log[k].frag != NULL)
                fake_fail(&fake_log[k]);
    assert_int_equal(fake_unanswered(), 0);
}

static int teardown(void **state)
{
    fixture *fx = *state;
    drain();
    px_route_tree_release(fx->pool.tree);
    px_route_tree_release(fx->other.tree);
    px_warm_end(&fx->pool);
    ch_table_free(fx->prev);
    px_health_free(fx->pool.health);
    px_health_free(fx->other.health);
    ch__topk_free(fx->pool.hot);
    ch__near_gens_free(fx->sp.near_gens);
    fake_reset();
    fake_routes_free();
    free(fx);
    return 0;
}

/* pool's tree: the real route ops (conf: its settings) at the root over n fake leaves that send,
 * child[i] the i-th, as route_build.c orders them. Its state is built (ops->build). */
static px_route *tree(px_pool *pool, const px_route_ops *ops, const void *conf, unsigned n)
{
    fake_tree *ft = fake_tree_new();
    px_route *root = fake_node(ft, NULL, ops, conf);
    for (unsigned i = 0; i < n; i++)
        fake_add(ft, root, SEND_LEAF);
    fake_use(pool, ft);
    return root;
}

/* A shared health of n servers, all up (any ejection takes one failure). */
static px_health *health(size_t n)
{
    ch_health_options o;
    ch_health_options_init(&o);
    o.failure_limit = 1;
    px_health *h = NULL;
    assert_int_equal(px_health_new(n, &o, 16, n, &h), CH_OK);
    return h;
}

static void eject(px_health *h, size_t i)
{
    assert_true(px_health_failure(h, i, fake_now_ms, 0));
    assert_false(px_health_up(h, i));
}

/* Whether node i's rejoin journal holds exactly key (NULL: nothing), taken: empty after. */
static bool journaled(px_health *h, size_t i, const char *key)
{
    px_journal_batch b = {0};
    assert_int_equal(px_health_journal_take(h, i, &b), 0);
    bool ok = key == NULL ? b.n == 0 && b.dirty == NULL
                          : b.n == 1 && b.dirty == NULL && b.lens[0] == strlen(key) &&
                                memcmp(b.keys[0], key, b.lens[0]) == 0;
    px_journal_batch_free(&b);
    return ok;
}

/* ---- requests and replies, as the protocol spells them --------------------------------------- */

/* The RESP command of the space-separated words (a RESP array of bulk strings). The returned
 * text lives until 16 more calls. */
static const char *R(const char *words)
{
    static char bufs[16][1024];
    static unsigned turn;
    char *out = bufs[turn++ % 16], copy[1024];
    snprintf(copy, sizeof(copy), "%s", words);
    char *w[32], *save = NULL;
    size_t n = 0;
    for (char *t = strtok_r(copy, " ", &save); t != NULL && n < 32; t = strtok_r(NULL, " ", &save))
        w[n++] = t;
    int len = snprintf(out, 1024, "*%zu\r\n", n);
    for (size_t i = 0; i < n; i++)
        len += snprintf(out + len, 1024 - (size_t)len, "$%zu\r\n%s\r\n", strlen(w[i]), w[i]);
    return out;
}

/* A request from client 1 (RESP2 unless the pool speaks memcached). */
static size_t send_rq(fixture *fx, const char *text)
{
    return fake_start(&fx->pool, text, 1, PX_DIALECT_RESP2);
}

/* Asserts leaf's n-th backend request (0: its first) is want, and returns it. */
static fake_sent *sent(px_route *leaf, size_t n, const char *want)
{
    fake_sent *e = fake_sent_to(leaf, n);
    assert_true(fake_bytes_are(e, want));
    return e;
}

/* The server answers leaf's n-th backend request with reply bytes. */
static void reply(fixture *fx, px_route *leaf, size_t n, const char *bytes)
{
    fake_sent *e = fake_sent_to(leaf, n);
    assert_non_null(e->frag); /* not answered yet */
    fake_reply(&fx->pool, e, bytes, strlen(bytes));
}

/* leaf's n-th backend request fails (a timeout: "backend x timed out"). */
static void failed(px_route *leaf, size_t n)
{
    fake_sent *e = fake_sent_to(leaf, n);
    assert_non_null(e->frag);
    fake_fail(e);
}

/* Whether e is a one-key EVAL of key (numkeys 1, the key last) whose script names each word of
 * has and none of hasnt (NULL: none): the copies' fetch (PTTL and DUMP: the remaining lifetime
 * and the value) and take (the same, and DEL). */
static bool eval_of(const fake_sent *e, const char *key, const char *const *has, const char *hasnt)
{
    char tail[128];
    int n = snprintf(tail, sizeof(tail), "$1\r\n1\r\n$%zu\r\n%s\r\n", strlen(key), key);
    const char *p = e->bytes.p;
    size_t len = e->bytes.len;
    if (len < 14 + (size_t)n || memcmp(p, "*4\r\n$4\r\nEVAL\r\n", 14) != 0 ||
        memcmp(p + len - (size_t)n, tail, (size_t)n) != 0)
        return false;
    for (; *has != NULL; has++)
        if (memmem(p, len, *has, strlen(*has)) == NULL)
            return false;
    return hasnt == NULL || memmem(p, len, hasnt, strlen(hasnt)) == NULL;
}

static const char *const FETCH_READS[] = {"PTTL", "DUMP", NULL};
static const char *const TAKE_DOES[] = {"PTTL", "DUMP", "DEL", NULL};

/* Placements: servers by uid (any nonzero), and their index in the pool's health. */
enum { S0 = 11, S1 = 12, S2 = 13, S3 = 14 };

/* ==== warm ======================================================================================
 * route_warm.c over child[0] the current placement's leaf and child[1] the previous one's. A key
 * moved when its previous leaf places it on another server that is up. The window: switches at
 * 1000 ms (ramp 0 unless said), warming for 10 s after. */

static px_route *warm_tree(fixture *fx, px_route **cur, px_route **prev)
{
    px_route *rt = tree(&fx->pool, &px_route_warm_ops, NULL, 2);
    *cur = rt->child[0];
    *prev = rt->child[1];
    return rt;
}

static void window(fixture *fx, uint64_t start, uint64_t ramp, uint64_t warm)
{
    ch_node old = {"old", 1.0};
    assert_int_equal(ch_table_build(&old, 1, NULL, &fx->prev), CH_OK);
    px_server *src[1] = {NULL};
    px_warm_begin(&fx->pool, fx->prev, src, 1, &(px_warm_times){start, ramp, warm});
}

/* key moved from S1 (its previous owner, up) to S0. */
static void moved(px_route *cur, px_route *prev, const char *key)
{
    fake_place_key(cur, key, S0, 0, true);
    fake_place_key(prev, key, S1, 1, true);
}

/* Unmoved keys, a moved key whose old owner is down, and any key once the window has ended go
 * to the current leaf as they are; the previous leaf is never asked. */
static void test_warm_unmoved(void **state)
{
    fixture *fx = *state;
    px_route *cur, *prev;
    warm_tree(fx, &cur, &prev);
    window(fx, 1000, 0, 10000);
    fake_place_key(cur, "same", S0, 0, true);
    fake_place_key(prev, "same", S0, 0, true);
    fake_place_key(cur, "gone", S0, 0, true);
    fake_place_key(prev, "gone", S1, 1, false); /* its old owner is out */
    moved(cur, prev, "k");
    size_t a = send_rq(fx, R("GET same"));
    size_t b = send_rq(fx, R("GET gone"));
    size_t c = send_rq(fx, R("SET same v"));
    sent(cur, 0, R("GET same"));
    sent(cur, 1, R("GET gone"));
    sent(cur, 2, R("SET same v")); /* no take first */
    reply(fx, cur, 0, "$-1\r\n"); /* a miss of a key that did not move is the answer */
    reply(fx, cur, 1, "$-1\r\n");
    reply(fx, cur, 2, "+OK\r\n");
    assert_string_equal(fake_done_reply(a), "$-1\r\n");
    assert_string_equal(fake_done_reply(b), "$-1\r\n");
    assert_string_equal(fake_done_reply(c), "+OK\r\n");
    fake_now_ms = 11000; /* the window is over: k is an ordinary key */
    size_t d = send_rq(fx, R("GET k"));
    size_t e = send_rq(fx, R("SET k v"));
    reply(fx, cur, 3, "$-1\r\n");
    reply(fx, cur, 4, "+OK\r\n");
    assert_string_equal(fake_done_reply(d), "$-1\r\n");
    assert_string_equal(fake_done_reply(e), "+OK\r\n");
    assert_int_equal(fake_sends(prev), 0);
    assert_int_equal(fx->pool.m.warm.warm_misses, 0);
}

/* Before its switch a moved key is its old owner's, reads and writes; a read that fails there
 * goes to the current leaf, a write that fails there is not sent twice (it may have been
 * applied). */
static void test_warm_before_switch(void **state)
{
    fixture *fx = *state;
    px_route *cur, *prev;
    warm_tree(fx, &cur, &prev);
    window(fx, 1000, 0, 10000);
    moved(cur, prev, "k");
    fake_now_ms = 500;
    size_t a = send_rq(fx, R("GET k"));
    reply(fx, prev, 0, "$3\r\nold\r\n");
    size_t b = send_rq(fx, R("SET k v"));
    sent(prev, 1, R("SET k v"));
    reply(fx, prev, 1, "+OK\r\n");
    assert_string_equal(fake_done_reply(a), "$3\r\nold\r\n");
    assert_string_equal(fake_done_reply(b), "+OK\r\n");
    assert_int_equal(fake_sends(cur), 0);
    assert_int_equal(fx->pool.m.warm.ramp_old, 2);

    size_t c = send_rq(fx, R("GET k"));
    failed(prev, 2);
    sent(cur, 0, R("GET k")); /* the read, to the current leaf */
    reply(fx, cur, 0, "$3\r\nnew\r\n");
    assert_string_equal(fake_done_reply(c), "$3\r\nnew\r\n");
    size_t d = send_rq(fx, R("SET k w"));
    failed(prev, 3);
    assert_int_equal(fake_sends(cur), 1); /* the write: not again */
    assert_true(fake_done_reply(d)[0] == '-');
    assert_non_null(strstr(fake_done_reply(d), "timed out"));
}

/* With a ramp, a moved key switches at start + XXH3-64(key) mod ramp (warm.h): every proxy given
 * the change switches it at the same moment. One ms before, its old owner; at it, the new one. */
static void test_warm_ramp(void **state)
{
    fixture *fx = *state;
    px_route *cur, *prev;
    warm_tree(fx, &cur, &prev);
    window(fx, 1000, 1000, 10000);
    moved(cur, prev, "k");
    uint64_t at = 1000 + XXH3_64bits("k", 1) % 1000;
    fake_now_ms = at - 1;
    send_rq(fx, R("GET k"));
    assert_int_equal(fake_sends(prev), 1);
    reply(fx, prev, 0, "$1\r\nv\r\n");
    fake_now_ms = at;
    size_t b = send_rq(fx, R("GET k"));
    assert_int_equal(fake_sends(prev), 1);
    reply(fx, cur, 0, "$1\r\nv\r\n");
    assert_string_equal(fake_done_reply(b), "$1\r\nv\r\n");
}

/* Warming, a read of a moved key: the current leaf; a hit there is the answer. A miss: the
 * previous leaf; its hit is answered at once and copied to the current placement, detached: a
 * fetch (its lifetime and value) fired through the previous leaf, then a store that never
 * overwrites (RESTORE without REPLACE, the lifetime left) through the current leaf. */
static void test_warm_read_copies(void **state)
{
    fixture *fx = *state;
    px_route *cur, *prev;
    warm_tree(fx, &cur, &prev);
    window(fx, 1000, 0, 10000);
    moved(cur, prev, "k");
    size_t a = send_rq(fx, R("GET k"));
    reply(fx, cur, 0, "$3\r\nnew\r\n");
    assert_string_equal(fake_done_reply(a), "$3\r\nnew\r\n");
    assert_int_equal(fake_sends(prev), 0);

    size_t b = send_rq(fx, R("GET k"));
    reply(fx, cur, 1, "$-1\r\n");
    assert_false(fake_done(b));
    sent(prev, 0, R("GET k"));
    reply(fx, prev, 0, "$3\r\nold\r\n");
    assert_string_equal(fake_done_reply(b), "$3\r\nold\r\n"); /* before the copy */
    assert_int_equal(fx->pool.m.warm.warm_hits, 1);
    assert_true(eval_of(fake_sent_to(prev, 1), "k", FETCH_READS, "DEL"));
    reply(fx, prev, 1, "*2\r\n:5000\r\n$7\r\npayload\r\n");
    sent(cur, 2, R("RESTORE k 5000 payload"));
    reply(fx, cur, 2, "+OK\r\n");
    assert_int_equal(fx->pool.m.warm.warm_fills, 1);

    /* The key was written at the new owner meanwhile: the store leaves it (BUSYKEY). */
    send_rq(fx, R("GET k"));
    reply(fx, cur, 3, "$-1\r\n");
    reply(fx, prev, 2, "$3\r\nold\r\n");
    reply(fx, prev, 3, "*2\r\n:-1\r\n$7\r\npayload\r\n"); /* no lifetime: RESTORE's 0 */
    sent(cur, 4, R("RESTORE k 0 payload"));
    reply(fx, cur, 4, "-BUSYKEY Target key name already exists.\r\n");
    assert_int_equal(fx->pool.m.warm.warm_fills_present, 1);
    assert_int_equal(fake_unanswered(), 0);
}

/* Warming, a read that misses at both owners is a miss, nothing copied; an old owner failing
 * sends the read to the current leaf again, whose answer is the client's. */
static void test_warm_read_misses(void **state)
{
    fixture *fx = *state;
    px_route *cur, *prev;
    warm_tree(fx, &cur, &prev);
    window(fx, 1000, 0, 10000);
    moved(cur, prev, "k");
    size_t a = send_rq(fx, R("GET k"));
    reply(fx, cur, 0, "$-1\r\n");
    reply(fx, prev, 0, "$-1\r\n");
    assert_string_equal(fake_done_reply(a), "$-1\r\n");
    assert_int_equal(fx->pool.m.warm.warm_misses, 1);
    assert_int_equal(fake_sends(prev), 1); /* no fetch */

    size_t b = send_rq(fx, R("GET k"));
    reply(fx, cur, 1, "$-1\r\n");
    failed(prev, 1);
    sent(cur, 2, R("GET k"));
    assert_false(fake_done(b));
    reply(fx, cur, 2, "$1\r\nv\r\n"); /* written meanwhile */
    assert_string_equal(fake_done_reply(b), "$1\r\nv\r\n");
    assert_int_equal(fake_unanswered(), 0);
}

/* A copy never stores a value older than a write made through this worker: a write of the key
 * between the read's start and the fetch's answer drops the copy. */
static void test_warm_copy_after_write_dropped(void **state)
{
    fixture *fx = *state;
    px_route *cur, *prev;
    warm_tree(fx, &cur, &prev);
    window(fx, 1000, 0, 10000);
    moved(cur, prev, "k");
    send_rq(fx, R("GET k"));
    reply(fx, cur, 0, "$-1\r\n");
    reply(fx, prev, 0, "$3\r\nold\r\n"); /* answered; its fetch (prev's 1) is out */
    size_t w = send_rq(fx, R("SET k new"));
    assert_true(eval_of(fake_sent_to(prev, 2), "k", TAKE_DOES, NULL)); /* the write's take */
    reply(fx, prev, 1, "*2\r\n:-1\r\n$3\r\nold\r\n");                /* the fetch's answer */
    reply(fx, prev, 2, "$-1\r\n");                                    /* nothing to take */
    sent(cur, 1, R("SET k new"));
    reply(fx, cur, 1, "+OK\r\n");
    assert_string_equal(fake_done_reply(w), "+OK\r\n");
    assert_int_equal(fake_sends(cur), 2); /* no RESTORE */
    assert_int_equal(fx->pool.m.warm.warm_fills, 0);
}

/* Warming, a write of a moved key moves the key first (Redis: one atomic take at the old owner),
 * stores the copy at the new owner, then writes there; the client hears once the write is
 * answered. A take that finds nothing, or fails, leaves the write to go on alone. */
static void test_warm_write_moves(void **state)
{
    fixture *fx = *state;
    px_route *cur, *prev;
    warm_tree(fx, &cur, &prev);
    window(fx, 1000, 0, 10000);
    moved(cur, prev, "k");
    size_t a = send_rq(fx, R("INCR k"));
    assert_int_equal(fake_sends(cur), 0);
    assert_true(eval_of(fake_sent_to(prev, 0), "k", TAKE_DOES, NULL));
    reply(fx, prev, 0, "*2\r\n:-1\r\n$2\r\n41\r\n");
    sent(cur, 0, R("RESTORE k 0 41"));
    assert_false(fake_done(a));
    reply(fx, cur, 0, "+OK\r\n");
    sent(cur, 1, R("INCR k"));
    assert_false(fake_done(a));
    reply(fx, cur, 1, ":42\r\n");
    assert_string_equal(fake_done_reply(a), ":42\r\n");
    assert_int_equal(fx->pool.m.warm.warm_fills, 1);
    assert_int_equal(fx->pool.m.warm.warm_deletes, 1); /* the take deleted it */

    size_t b = send_rq(fx, R("SET k v"));
    reply(fx, prev, 1, "$-1\r\n"); /* nothing there */
    sent(cur, 2, R("SET k v"));
    reply(fx, cur, 2, "+OK\r\n");
    size_t c = send_rq(fx, R("SET k w"));
    failed(prev, 2); /* the old owner fails: the write goes on */
    sent(cur, 3, R("SET k w"));
    reply(fx, cur, 3, "+OK\r\n");
    assert_string_equal(fake_done_reply(b), "+OK\r\n");
    assert_string_equal(fake_done_reply(c), "+OK\r\n");
    assert_int_equal(fake_sends(prev), 3);
    assert_int_equal(fx->pool.m.warm.warm_fills, 1);
    assert_int_equal(fake_unanswered(), 0);
}

/* memcached, which has no atomic take: a write of a moved key fetches it from the old owner
 * (mg k v t f), stores it at the new one (ms in add mode, E, with its client flags), deletes
 * the old copy, then writes. */
static void test_warm_write_mc(void **state)
{
    fixture *fx = *state;
    px_route *cur, *prev;
    warm_tree(fx, &cur, &prev);
    window(fx, 1000, 0, 10000);
    moved(cur, prev, "k");
    size_t a = send_rq(fx, "set k 0 0 1\r\nv\r\n");
    sent(prev, 0, "mg k v t f\r\n");
    reply(fx, prev, 0, "VA 3 t-1 f5\r\nold\r\n");
    sent(cur, 0, "ms k 3 F5 ME\r\nold\r\n");
    reply(fx, cur, 0, "HD\r\n");
    sent(prev, 1, "delete k\r\n");
    assert_int_equal(fake_sends(cur), 1);
    reply(fx, prev, 1, "DELETED\r\n");
    sent(cur, 1, "set k 0 0 1\r\nv\r\n");
    assert_false(fake_done(a));
    reply(fx, cur, 1, "STORED\r\n");
    assert_string_equal(fake_done_reply(a), "STORED\r\n");
    assert_int_equal(fx->pool.m.warm.warm_fills, 1);
    assert_int_equal(fx->pool.m.warm.warm_deletes, 1);

    /* A read: a miss at the new owner ("END") is read from the old one. */
    size_t b = send_rq(fx, "get k\r\n");
    reply(fx, cur, 2, "END\r\n");
    sent(prev, 2, "get k\r\n");
    reply(fx, prev, 2, "VALUE k 5 3\r\nold\r\nEND\r\n");
    assert_string_equal(fake_done_reply(b), "VALUE k 5 3\r\nold\r\nEND\r\n");
    sent(prev, 3, "mg k v t f\r\n");
    reply(fx, prev, 3, "EN\r\n"); /* expired meanwhile: nothing to store */
    assert_int_equal(fake_sends(cur), 3);
}

/* A one-server command (MSETNX) whose keys the current placement puts on different servers is
 * refused with Redis Cluster's error, nothing sent; on one server it goes whole. */
static void test_warm_cross_server(void **state)
{
    fixture *fx = *state;
    px_route *cur, *prev;
    warm_tree(fx, &cur, &prev);
    fake_place_key(cur, "a", S0, 0, true);
    fake_place_key(cur, "b", S1, 1, true);
    fake_place_key(cur, "c", S0, 0, true);
    size_t a = send_rq(fx, R("MSETNX a 1 b 2"));
    assert_int_equal(strncmp(fake_done_reply(a), "-CROSSSLOT ", 11), 0);
    assert_int_equal(fake_nlog, 0);
    size_t b = send_rq(fx, R("MSETNX a 1 c 2"));
    sent(cur, 0, R("MSETNX a 1 c 2"));
    reply(fx, cur, 0, ":1\r\n");
    assert_string_equal(fake_done_reply(b), ":1\r\n");
}

/* ==== replica ===================================================================================
 * route_replica.c over child[0] and child[1], the leaves of a key's first and second owner
 * (ranks), and child[2] the current placement's leaf (the walk beyond the owners). "k" is owned
 * by S0 (index 0 in the pool's health) and S1 (index 1). */

static px_route *replica_tree(fixture *fx, px_route **r0, px_route **r1, px_route **walk)
{
    fx->pool.health = health(2);
    px_route *rt = tree(&fx->pool, &px_route_replica_ops, NULL, 3);
    *r0 = rt->child[0];
    *r1 = rt->child[1];
    *walk = rt->child[2];
    const char *keys[] = {"k", "a", "b"};
    for (size_t i = 0; i < 3; i++) {
        fake_place_key(*r0, keys[i], S0, 0, true);
        fake_place_key(*r1, keys[i], S1, 1, true);
    }
    return rt;
}

/* Owner index i of every key is out: ejected in the health, and its rank leaf says so. */
static void owner_out(fixture *fx, px_route *rank, size_t i, uint32_t server)
{
    eject(fx->pool.health, i);
    fake_place_key(rank, "k", server, i, false);
}

/* A write goes to every owner up, and is answered once all have answered: with the first
 * owner's (the primary's) reply, whichever order they come in. */
static void test_replica_write_every_owner(void **state)
{
    fixture *fx = *state;
    px_route *r0, *r1, *walk;
    replica_tree(fx, &r0, &r1, &walk);
    size_t a = send_rq(fx, R("SET k v"));
    sent(r0, 0, R("SET k v"));
    sent(r1, 0, R("SET k v"));
    reply(fx, r1, 0, "+OK\r\n");
    assert_false(fake_done(a));
    reply(fx, r0, 0, "+OK\r\n");
    assert_string_equal(fake_done_reply(a), "+OK\r\n");

    size_t b = send_rq(fx, R("DEL k"));
    reply(fx, r0, 1, ":1\r\n");
    reply(fx, r1, 1, ":0\r\n");
    size_t c = send_rq(fx, R("DEL k"));
    reply(fx, r1, 2, ":1\r\n");
    reply(fx, r0, 2, ":0\r\n");
    assert_string_equal(fake_done_reply(b), ":1\r\n");
    assert_string_equal(fake_done_reply(c), ":0\r\n"); /* the primary's, not the first in */
    assert_int_equal(fake_sends(walk), 0);
}

/* The worst reply wins (mcrouter's AllSyncRoute): an owner's error or failure is the answer,
 * whatever the primary said ("written to 1 of 2" is not "done"). */
static void test_replica_write_worst(void **state)
{
    fixture *fx = *state;
    px_route *r0, *r1, *walk;
    replica_tree(fx, &r0, &r1, &walk);
    size_t a = send_rq(fx, R("SET k v"));
    reply(fx, r0, 0, "+OK\r\n");
    reply(fx, r1, 0, "-OOM command not allowed\r\n");
    assert_string_equal(fake_done_reply(a), "-OOM command not allowed\r\n");
    size_t b = send_rq(fx, R("SET k v"));
    failed(r0, 1);
    reply(fx, r1, 1, "+OK\r\n");
    assert_true(fake_done_reply(b)[0] == '-');
    assert_non_null(strstr(fake_done_reply(b), "timed out"));
}

/* An owner out gets no write; the key goes into its rejoin journal instead (it deletes the key
 * before it is readmitted). No owner up: the write goes the way it would without replicas. */
static void test_replica_write_owner_out(void **state)
{
    fixture *fx = *state;
    px_route *r0, *r1, *walk;
    replica_tree(fx, &r0, &r1, &walk);
    owner_out(fx, r1, 1, S1);
    size_t a = send_rq(fx, R("SET k v"));
    sent(r0, 0, R("SET k v"));
    assert_int_equal(fake_sends(r1), 0);
    reply(fx, r0, 0, "+OK\r\n");
    assert_string_equal(fake_done_reply(a), "+OK\r\n");
    assert_true(journaled(fx->pool.health, 1, "k"));
    assert_true(journaled(fx->pool.health, 0, NULL)); /* nothing for the owner up */

    owner_out(fx, r0, 0, S0);
    size_t b = send_rq(fx, R("SET k w"));
    sent(walk, 0, R("SET k w"));
    reply(fx, walk, 0, "+OK\r\n");
    assert_string_equal(fake_done_reply(b), "+OK\r\n");
    assert_int_equal(fake_sends(r0), 1);
    assert_true(journaled(fx->pool.health, 0, "k"));
    assert_true(journaled(fx->pool.health, 1, "k"));
}

/* A split write whose parts are counted (DEL a b) sends each key alone to each owner, so each
 * key is counted once: the sum of the primaries' counts, not of every owner's. */
static void test_replica_split_del(void **state)
{
    fixture *fx = *state;
    px_route *r0, *r1, *walk;
    replica_tree(fx, &r0, &r1, &walk);
    size_t a = send_rq(fx, R("DEL a b"));
    assert_int_equal(fake_sends(r0), 2);
    assert_int_equal(fake_sends(r1), 2);
    sent(r0, 0, R("DEL a"));
    sent(r0, 1, R("DEL b"));
    sent(r1, 0, R("DEL a"));
    sent(r1, 1, R("DEL b"));
    for (size_t i = 0; i < 2; i++) {
        reply(fx, r0, i, ":1\r\n");
        reply(fx, r1, i, ":1\r\n");
    }
    assert_string_equal(fake_done_reply(a), ":2\r\n");
}

/* A read goes to the first owner up only; its hit is the answer. */
static void test_replica_read_first_up(void **state)
{
    fixture *fx = *state;
    px_route *r0, *r1, *walk;
    replica_tree(fx, &r0, &r1, &walk);
    size_t a = send_rq(fx, R("GET k"));
    sent(r0, 0, R("GET k"));
    reply(fx, r0, 0, "$1\r\nv\r\n");
    assert_string_equal(fake_done_reply(a), "$1\r\nv\r\n");
    assert_int_equal(fake_sends(r1), 0);
    owner_out(fx, r0, 0, S0);
    size_t b = send_rq(fx, R("GET k"));
    sent(r1, 0, R("GET k"));
    reply(fx, r1, 0, "$-1\r\n"); /* the only owner up: its miss is the answer */
    assert_string_equal(fake_done_reply(b), "$-1\r\n");
    assert_int_equal(fake_sends(r0), 1);
    assert_int_equal(fake_sends(walk), 0);
}

/* A miss at the first owner is read from the next; a hit there is answered at once and copied
 * back to the owner that missed (a fetch through the one that has it, then a store that never
 * overwrites through the one that missed). A miss at both is a miss, nothing copied. */
static void test_replica_read_repair(void **state)
{
    fixture *fx = *state;
    px_route *r0, *r1, *walk;
    replica_tree(fx, &r0, &r1, &walk);
    size_t a = send_rq(fx, R("GET k"));
    reply(fx, r0, 0, "$-1\r\n");
    sent(r1, 0, R("GET k"));
    assert_false(fake_done(a));
    reply(fx, r1, 0, "$1\r\nv\r\n");
    assert_string_equal(fake_done_reply(a), "$1\r\nv\r\n");
    assert_int_equal(fx->pool.m.warm.replica_reads, 1);
    assert_true(eval_of(fake_sent_to(r1, 1), "k", FETCH_READS, "DEL"));
    reply(fx, r1, 1, "*2\r\n:-1\r\n$1\r\nv\r\n");
    sent(r0, 1, R("RESTORE k 0 v"));
    reply(fx, r0, 1, "+OK\r\n");
    assert_int_equal(fx->pool.m.warm.replica_repairs, 1);

    size_t b = send_rq(fx, R("GET k"));
    reply(fx, r0, 2, "$-1\r\n");
    reply(fx, r1, 2, "$-1\r\n");
    assert_string_equal(fake_done_reply(b), "$-1\r\n");
    assert_int_equal(fake_sends(r1), 3); /* no fetch */
    assert_int_equal(fake_unanswered(), 0);
}

/* A repair never brings back a value older than a write made through this worker: a write of
 * the key between the read's start and its hit drops the copy. */
static void test_replica_repair_after_write_dropped(void **state)
{
    fixture *fx = *state;
    px_route *r0, *r1, *walk;
    replica_tree(fx, &r0, &r1, &walk);
    size_t a = send_rq(fx, R("GET k"));
    reply(fx, r0, 0, "$-1\r\n");
    size_t w = send_rq(fx, R("SET k new")); /* to both owners */
    reply(fx, r1, 0, "$3\r\nold\r\n");      /* the read's hit, older than the write */
    assert_string_equal(fake_done_reply(a), "$3\r\nold\r\n");
    assert_int_equal(fx->pool.m.warm.replica_repair_skips, 1);
    reply(fx, r0, 1, "+OK\r\n");
    reply(fx, r1, 1, "+OK\r\n");
    assert_string_equal(fake_done_reply(w), "+OK\r\n");
    assert_int_equal(fake_sends(r0), 2); /* no RESTORE */
    assert_int_equal(fake_sends(r1), 2); /* no fetch */
}

/* Failures: the first owner failing sends the read to the next owner up (a hit there is not
 * copied anywhere); the next owner failing after a miss sends it to the first again, whose
 * miss is the answer; every owner failing leaves it to the walk beyond the owners. */
static void test_replica_read_failures(void **state)
{
    fixture *fx = *state;
    px_route *r0, *r1, *walk;
    replica_tree(fx, &r0, &r1, &walk);
    size_t a = send_rq(fx, R("GET k"));
    failed(r0, 0);
    reply(fx, r1, 0, "$1\r\nv\r\n");
    assert_string_equal(fake_done_reply(a), "$1\r\nv\r\n");
    assert_int_equal(fake_sends(r1), 1); /* no fetch */

    size_t b = send_rq(fx, R("GET k"));
    reply(fx, r0, 1, "$-1\r\n");
    failed(r1, 1);
    sent(r0, 2, R("GET k"));
    reply(fx, r0, 2, "$-1\r\n");
    assert_string_equal(fake_done_reply(b), "$-1\r\n");

    size_t c = send_rq(fx, R("GET k"));
    failed(r0, 3);
    failed(r1, 2);
    sent(walk, 0, R("GET k"));
    reply(fx, walk, 0, "$1\r\nw\r\n");
    assert_string_equal(fake_done_reply(c), "$1\r\nw\r\n");
    assert_int_equal(fake_unanswered(), 0);
}

/* hot_spread: the reads of a hot key (the worker's detector counts it over hot_threshold) go to
 * its owners up in turn; a cold key's to its first owner. */
static void test_replica_hot_spread(void **state)
{
    fixture *fx = *state;
    px_route *r0, *r1, *walk;
    fx->pc.hot_spread = true;
    fx->pool.hot = ch__topk_new(16, 64);
    assert_non_null(fx->pool.hot);
    fx->pool.hot_threshold = 3;
    ch__topk_add(fx->pool.hot, XXH3_64bits("k", 1), "k", 1, 5);
    replica_tree(fx, &r0, &r1, &walk);
    for (size_t i = 0; i < 4; i++)
        send_rq(fx, R("GET k"));
    assert_int_equal(fake_sends(r0), 2);
    assert_int_equal(fake_sends(r1), 2);
    /* in turn: the owner of each read is not the previous read's */
    const px_server *last = NULL;
    for (size_t k = 0; k < fake_nlog; k++) {
        assert_ptr_not_equal(fake_log[k].server, last);
        last = fake_log[k].server;
    }
    assert_int_equal(fx->pool.m.warm.replica_spread, 4);
    send_rq(fx, R("GET a"));
    send_rq(fx, R("GET a"));
    assert_int_equal(fake_sends(r0), 4);
    for (size_t i = 0; i < 4; i++)
        reply(fx, r0, i, "$1\r\nv\r\n");
    for (size_t i = 0; i < 2; i++)
        reply(fx, r1, i, "$1\r\nv\r\n");
    assert_int_equal(ndone, 6);
}

/* ==== stage =====================================================================================
 * route_stage.c over child[0] the pool's tree (here a leaf) and child[1] the leaf of the staged
 * placement (the key's next owner). A key is staged when the next leaf places it on another
 * server: "k" and "a" are (S0 now, S2 next), "j" and "b" are not. */

static px_route *stage_tree(fixture *fx, px_route **cur, px_route **next)
{
    px_route *rt = tree(&fx->pool, &px_route_stage_ops, NULL, 2);
    *cur = rt->child[0];
    *next = rt->child[1];
    fake_place_key(*cur, NULL, S0, 0, true);
    fake_place_key(*next, NULL, S0, 0, true);
    fake_place_key(*next, "k", S2, SIZE_MAX, true);
    fake_place_key(*next, "a", S2, SIZE_MAX, true);
    return rt;
}

/* Reads, and writes of keys that do not change owner, go to the tree as they are: nothing is
 * sent to the next owner. */
static void test_stage_passes(void **state)
{
    fixture *fx = *state;
    px_route *cur, *next;
    stage_tree(fx, &cur, &next);
    size_t a = send_rq(fx, R("GET k"));
    size_t b = send_rq(fx, R("SET j v"));
    sent(cur, 0, R("GET k"));
    sent(cur, 1, R("SET j v"));
    reply(fx, cur, 0, "$1\r\nv\r\n");
    reply(fx, cur, 1, "+OK\r\n");
    assert_string_equal(fake_done_reply(a), "$1\r\nv\r\n");
    assert_string_equal(fake_done_reply(b), "+OK\r\n");
    assert_int_equal(fake_sends(next), 0);
}

/* A write of a staged key: the write, then (its answer in) a delete of the key at its next
 * owner; the client hears once the delete is answered. A write that failed is invalidated too
 * (it may have been applied), and its failure is the answer. */
static void test_stage_write_invalidates(void **state)
{
    fixture *fx = *state;
    px_route *cur, *next;
    stage_tree(fx, &cur, &next);
    size_t a = send_rq(fx, R("SET k v"));
    sent(cur, 0, R("SET k v"));
    assert_int_equal(fake_sends(next), 0); /* not before the write is answered */
    reply(fx, cur, 0, "+OK\r\n");
    sent(next, 0, R("DEL k"));
    assert_false(fake_done(a));
    reply(fx, next, 0, ":1\r\n");
    assert_string_equal(fake_done_reply(a), "+OK\r\n");
    assert_int_equal(fx->pool.m.warm.stage_invalidations, 1);

    size_t b = send_rq(fx, R("SET k w"));
    failed(cur, 1);
    sent(next, 1, R("DEL k"));
    assert_false(fake_done(b));
    reply(fx, next, 1, ":0\r\n");
    assert_true(fake_done_reply(b)[0] == '-');
    assert_non_null(strstr(fake_done_reply(b), "timed out"));
}

/* A delete that fails or errors makes the write's answer an error: the write may stand at the
 * owner while the next owner's copy could not be dropped, so the client is not told "done". */
static void test_stage_delete_fails(void **state)
{
    fixture *fx = *state;
    px_route *cur, *next;
    stage_tree(fx, &cur, &next);
    size_t a = send_rq(fx, R("SET k v"));
    reply(fx, cur, 0, "+OK\r\n");
    failed(next, 0);
    size_t b = send_rq(fx, R("SET k v"));
    reply(fx, cur, 1, "+OK\r\n");
    reply(fx, next, 1, "-ERR busy\r\n");
    for (size_t i = a; i <= b; i++) {
        assert_true(fake_done_reply(i)[0] == '-');
        assert_non_null(strstr(fake_done_reply(i), "could not be invalidated"));
    }
    assert_int_equal(fx->pool.m.warm.stage_invalidate_errors, 2);
    assert_int_equal(fx->pool.m.warm.stage_invalidations, 0);
}

/* A split write (DEL a b): each key on its own; only the staged key's part waits for its
 * delete, and the client's count adds both. */
static void test_stage_split(void **state)
{
    fixture *fx = *state;
    px_route *cur, *next;
    stage_tree(fx, &cur, &next);
    size_t a = send_rq(fx, R("DEL a b"));
    assert_int_equal(fake_sends(cur), 2);
    const px_buf *first = &fake_sent_to(cur, 0)->bytes;
    size_t ia = memmem(first->p, first->len, "$1\r\na\r\n", 7) != NULL ? 0 : 1;
    sent(cur, ia, R("DEL a"));
    sent(cur, 1 - ia, R("DEL b"));
    reply(fx, cur, 1 - ia, ":1\r\n");
    assert_int_equal(fake_sends(next), 0);
    reply(fx, cur, ia, ":1\r\n");
    sent(next, 0, R("DEL a"));
    assert_false(fake_done(a));
    reply(fx, next, 0, ":1\r\n");
    assert_string_equal(fake_done_reply(a), ":2\r\n");
    assert_int_equal(fake_sends(next), 1);
}

/* ==== gutter ====================================================================================
 * route_gutter.c over child[0] the pool's placement (a leaf); the gutter pool ("o", another
 * pool of the worker, two servers) serves on its own tree, here one fake leaf. The pool's health
 * has four servers, index 2 ejected: "k" is owned by it (S2), "j" by S0, up. gutter_ttl 60 s. */

static px_route *gutter_tree(fixture *fx, px_route **cur, px_route **gut)
{
    fx->pool.health = health(4);
    fx->other.health = health(2);
    fx->other.nservers = 2;
    fx->gutter = (px_gutter_conf){&fx->other, 60000};
    px_route *rt = tree(&fx->pool, &px_route_gutter_ops, &fx->gutter, 1);
    *cur = rt->child[0];
    fake_tree *ft = fake_tree_new();
    *gut = fake_add(ft, NULL, SEND_LEAF);
    fake_use(&fx->other, ft);
    eject(fx->pool.health, 2);
    fake_place_key(*cur, "k", S2, 2, false);
    fake_place_key(*cur, "j", S0, 0, true);
    return rt;
}

/* A key whose owner is up goes to the pool's placement, reads and writes, while another
 * server is out; the gutter pool gets nothing. */
static void test_gutter_owner_up(void **state)
{
    fixture *fx = *state;
    px_route *cur, *gut;
    gutter_tree(fx, &cur, &gut);
    size_t a = send_rq(fx, R("GET j"));
    size_t b = send_rq(fx, R("SET j v EX 3600"));
    sent(cur, 0, R("GET j"));
    sent(cur, 1, R("SET j v EX 3600")); /* its lifetime as given */
    reply(fx, cur, 0, "$1\r\nv\r\n");
    reply(fx, cur, 1, "+OK\r\n");
    assert_string_equal(fake_done_reply(a), "$1\r\nv\r\n");
    assert_string_equal(fake_done_reply(b), "+OK\r\n");
    assert_int_equal(fake_sends(gut), 0);
    assert_true(journaled(fx->pool.health, 2, NULL));
}

/* The owner out: a read goes to the gutter pool's tree as it is (a side request of that pool),
 * its answer the client's; the pool's placement gets nothing. */
static void test_gutter_read(void **state)
{
    fixture *fx = *state;
    px_route *cur, *gut;
    gutter_tree(fx, &cur, &gut);
    size_t a = send_rq(fx, R("GET k"));
    sent(gut, 0, R("GET k"));
    reply(fx, gut, 0, "$1\r\ng\r\n");
    assert_string_equal(fake_done_reply(a), "$1\r\ng\r\n");
    assert_int_equal(fake_sends(cur), 0);
    assert_int_equal(fx->pool.m.gutter.reads, 1);
}

/* The owner out: a write goes to the gutter with its lifetime capped at gutter_ttl (none given:
 * gutter_ttl; a longer one: gutter_ttl; a shorter one kept), and the key into the owner's rejoin
 * journal (it deletes the key before serving again). */
static void test_gutter_write_capped(void **state)
{
    fixture *fx = *state;
    px_route *cur, *gut;
    gutter_tree(fx, &cur, &gut);
    const char *const in[] = {"SET k v", "SET k v EX 3600", "SET k v PX 10"};
    const char *const out[] = {"SET k v PX 60000", "SET k v PX 60000", "SET k v PX 10"};
    for (size_t i = 0; i < 3; i++) {
        size_t a = send_rq(fx, R(in[i]));
        sent(gut, i, R(out[i]));
        reply(fx, gut, i, "+OK\r\n");
        assert_string_equal(fake_done_reply(a), "+OK\r\n");
        assert_true(journaled(fx->pool.health, 2, "k"));
    }
    assert_int_equal(fake_sends(cur), 0);
    assert_int_equal(fx->pool.m.gutter.writes, 3);
}

/* memcached: the exptime token capped, in whole seconds (0, never, is the longest). */
static void test_gutter_write_mc(void **state)
{
    fixture *fx = *state;
    px_route *cur, *gut;
    gutter_tree(fx, &cur, &gut);
    size_t a = send_rq(fx, "set k 7 0 1\r\nv\r\n");
    sent(gut, 0, "set k 7 60 1\r\nv\r\n");
    reply(fx, gut, 0, "STORED\r\n");
    size_t b = send_rq(fx, "set k 7 5 1\r\nv\r\n");
    sent(gut, 1, "set k 7 5 1\r\nv\r\n");
    reply(fx, gut, 1, "STORED\r\n");
    assert_string_equal(fake_done_reply(a), "STORED\r\n");
    assert_string_equal(fake_done_reply(b), "STORED\r\n");
    assert_int_equal(fake_sends(cur), 0);
}

/* A split read: each key where its owner's state sends it, the parts merged in key order. */
static void test_gutter_split(void **state)
{
    fixture *fx = *state;
    px_route *cur, *gut;
    gutter_tree(fx, &cur, &gut);
    size_t a = send_rq(fx, R("MGET j k"));
    sent(cur, 0, R("MGET j"));
    sent(gut, 0, R("MGET k"));
    reply(fx, gut, 0, "*1\r\n$2\r\nvk\r\n");
    reply(fx, cur, 0, "*1\r\n$2\r\nvj\r\n");
    assert_string_equal(fake_done_reply(a), "*2\r\n$2\r\nvj\r\n$2\r\nvk\r\n");
}

/* No gutter server up: the key goes to the pool's placement (its next candidate), counted as
 * unavailable; a gutter that fails answers the client with the failure. */
static void test_gutter_unavailable_or_failing(void **state)
{
    fixture *fx = *state;
    px_route *cur, *gut;
    gutter_tree(fx, &cur, &gut);
    size_t a = send_rq(fx, R("GET k"));
    failed(gut, 0);
    assert_true(fake_done_reply(a)[0] == '-');
    assert_non_null(strstr(fake_done_reply(a), "timed out"));
    assert_int_equal(fx->pool.stats.forward_error, 1);

    eject(fx->other.health, 0);
    eject(fx->other.health, 1);
    size_t b = send_rq(fx, R("GET k"));
    sent(cur, 0, R("GET k"));
    reply(fx, cur, 0, "$1\r\nr\r\n");
    assert_string_equal(fake_done_reply(b), "$1\r\nr\r\n");
    assert_int_equal(fake_sends(gut), 1);
    assert_int_equal(fx->pool.m.gutter.unavailable, 1);
}

/* ==== near ======================================================================================
 * route_near.c over child[0] the rest of the tree (a leaf). The pool's hot_cache is 100 ms with
 * 1 MiB, one worker; the worker's detector (pool.hot, keyed by XXH3-64 of the key, as every
 * grouping of keys in the proxy) counts "k" 5 reads, over the threshold of 3; "c" is cold. The
 * latency clock (io.read_hr, ns) is the cache's: a request's arrival and its reply's. */

#define NEAR_TTL_NS 100000000u

static px_route *near_tree(fixture *fx)
{
    fx->pc.hot_cache_ms = 100;
    fx->pc.hot_cache_max_bytes = 1 << 20;
    fx->sp.near_gens = ch__near_gens_new();
    fx->sp.near_workers = 1;
    assert_non_null(fx->sp.near_gens);
    fx->pool.hot = ch__topk_new(16, 64);
    assert_non_null(fx->pool.hot);
    fx->pool.hot_threshold = 3;
    ch__topk_add(fx->pool.hot, XXH3_64bits("k", 1), "k", 1, 5);
    return tree(&fx->pool, &px_route_near_ops, NULL, 1)->child[0];
}

/* A hot key's value is kept from its read's reply and answered from memory, without the child;
 * a client of another dialect (RESP3) is not given a reply written for RESP2. */
static void test_near_hot_key_kept(void **state)
{
    fixture *fx = *state;
    px_route *leaf = near_tree(fx);
    size_t a = send_rq(fx, R("GET k"));
    sent(leaf, 0, R("GET k"));
    reply(fx, leaf, 0, "$1\r\nv\r\n");
    assert_string_equal(fake_done_reply(a), "$1\r\nv\r\n");
    assert_int_equal(fx->pool.m.near.stores, 1);
    fx->io.read_hr += NEAR_TTL_NS / 2;
    size_t b = send_rq(fx, R("GET k"));
    assert_string_equal(fake_done_reply(b), "$1\r\nv\r\n");
    assert_int_equal(fake_sends(leaf), 1);
    assert_int_equal(fx->pool.m.near.hits, 1);
    assert_int_equal(fx->pool.m.near.misses, 1);
    size_t c = fake_start(&fx->pool, R("GET k"), 2, PX_DIALECT_RESP3);
    sent(leaf, 1, R("GET k"));
    reply(fx, leaf, 1, "$1\r\nv\r\n");
    assert_string_equal(fake_done_reply(c), "$1\r\nv\r\n");
}

/* Not kept: a miss (a null, or an MGET part's null), an error, a cold key's value. */
static void test_near_not_kept(void **state)
{
    fixture *fx = *state;
    px_route *leaf = near_tree(fx);
    /* A miss, an error, and an MGET part for one key that is a null in an array. */
    const char *const cmds[] = {"GET k", "GET k", "MGET k", "MGET k"};
    const char *const replies[] = {"$-1\r\n", "-ERR later\r\n", "*1\r\n$-1\r\n",
                                   "*1\r\n$1\r\nv\r\n"};
    for (size_t i = 0; i < 4; i++) {
        send_rq(fx, R(cmds[i]));
        reply(fx, leaf, i, replies[i]);
    }
    for (size_t i = 4; i < 6; i++) {
        send_rq(fx, R("GET c"));
        reply(fx, leaf, i, "$1\r\nv\r\n");
    }
    size_t a = send_rq(fx, R("GET k"));
    reply(fx, leaf, 6, "$1\r\nv\r\n");
    assert_string_equal(fake_done_reply(a), "$1\r\nv\r\n");
    assert_int_equal(fake_sends(leaf), 7); /* every read reached the child (the MGET entry is
                                               not a GET's) */
    assert_int_equal(fx->pool.m.near.stores, 2); /* the last MGET's and the last GET's */
    assert_int_equal(fx->pool.m.near.hits, 0);
}

/* A write of a kept key goes through the child and drops the entry when it is sent: a read
 * after it reaches the child. A read sent before the write was answered may have seen the old
 * value: its reply is not kept. The next read's is. */
static void test_near_write_invalidates(void **state)
{
    fixture *fx = *state;
    px_route *leaf = near_tree(fx);
    send_rq(fx, R("GET k"));
    reply(fx, leaf, 0, "$3\r\nold\r\n");
    size_t w = send_rq(fx, R("SET k new"));
    sent(leaf, 1, R("SET k new"));
    size_t a = send_rq(fx, R("GET k")); /* sent while the write is out */
    sent(leaf, 2, R("GET k"));
    reply(fx, leaf, 1, "+OK\r\n");
    assert_string_equal(fake_done_reply(w), "+OK\r\n");
    reply(fx, leaf, 2, "$3\r\nold\r\n"); /* read before the write landed */
    assert_string_equal(fake_done_reply(a), "$3\r\nold\r\n");
    size_t b = send_rq(fx, R("GET k"));
    sent(leaf, 3, R("GET k")); /* not the old value from memory */
    reply(fx, leaf, 3, "$3\r\nnew\r\n");
    size_t c = send_rq(fx, R("GET k"));
    assert_string_equal(fake_done_reply(b), "$3\r\nnew\r\n");
    assert_string_equal(fake_done_reply(c), "$3\r\nnew\r\n");
    assert_int_equal(fake_sends(leaf), 4);
    assert_int_equal(fx->pool.m.near.stores, 2);
}

/* Writes of k that do not name it end its entry as well, when sent: SORT ... STORE k (the key
 * after STORE: px_codec.writes_unnamed) drops k's alone; a script, whose undeclared keys no one
 * can name, every entry, counted once. A read sent while the SORT is out is not kept. */
static void test_near_unnamed_writes(void **state)
{
    fixture *fx = *state;
    px_route *leaf = near_tree(fx);
    ch__topk_add(fx->pool.hot, XXH3_64bits("h", 1), "h", 1, 5);
    send_rq(fx, R("GET k"));
    reply(fx, leaf, 0, "$3\r\nold\r\n");
    send_rq(fx, R("GET h"));
    reply(fx, leaf, 1, "$1\r\nh\r\n");
    size_t w = send_rq(fx, R("SORT src ALPHA STORE k"));
    sent(leaf, 2, R("SORT src ALPHA STORE k"));
    size_t a = send_rq(fx, R("GET k")); /* not from memory: the SORT is sent */
    sent(leaf, 3, R("GET k"));
    size_t h = send_rq(fx, R("GET h")); /* another key's entry stays */
    assert_string_equal(fake_done_reply(h), "$1\r\nh\r\n");
    reply(fx, leaf, 2, ":3\r\n");
    assert_string_equal(fake_done_reply(w), ":3\r\n");
    reply(fx, leaf, 3, "$3\r\nold\r\n"); /* read before the SORT landed: not kept */
    assert_string_equal(fake_done_reply(a), "$3\r\nold\r\n");
    send_rq(fx, R("GET k"));
    sent(leaf, 4, R("GET k"));
    reply(fx, leaf, 4, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n");
    assert_int_equal(fx->pool.m.near.script_flushes, 0);

    size_t e = send_rq(fx, R("EVAL return 1 x"));
    sent(leaf, 5, R("EVAL return 1 x"));
    reply(fx, leaf, 5, ":1\r\n");
    assert_string_equal(fake_done_reply(e), ":1\r\n");
    assert_int_equal(fx->pool.m.near.script_flushes, 1);
    send_rq(fx, R("GET h")); /* every entry ended */
    sent(leaf, 6, R("GET h"));
    reply(fx, leaf, 6, "$1\r\nh\r\n");
    assert_int_equal(fake_sends(leaf), 7);
    assert_int_equal(fx->pool.m.near.hits, 1);
}

/* memcached's get does not tell the item's remaining life: a hot key is filled with the fetch
 * (mg k v t f), its reply answered as get's and kept for at most t - 1 s (memcached's clock
 * ticks once a second) within the TTL: t-1 (no expiry) kept for the TTL, t1 not kept. A reply
 * that is not the fetch's (a server without meta commands) sends the get as it came, not kept;
 * a cold key's get goes as it came. */
static void test_near_mc_fill(void **state)
{
    fixture *fx = *state;
    px_route *leaf = near_tree(fx);
    size_t a = send_rq(fx, "get k\r\n");
    sent(leaf, 0, "mg k v t f\r\n");
    reply(fx, leaf, 0, "VA 1 t-1 f5\r\nv\r\n");
    assert_string_equal(fake_done_reply(a), "VALUE k 5 1\r\nv\r\nEND\r\n");
    assert_int_equal(fx->pool.m.near.stores, 1);
    fx->io.read_hr += NEAR_TTL_NS - 1;
    size_t b = send_rq(fx, "get k\r\n"); /* from memory */
    assert_string_equal(fake_done_reply(b), "VALUE k 5 1\r\nv\r\nEND\r\n");
    fx->io.read_hr += 2;
    size_t c = send_rq(fx, "get k\r\n");
    sent(leaf, 1, "mg k v t f\r\n");
    reply(fx, leaf, 1, "VA 1 t1 f5\r\nw\r\n"); /* expires within a second: not kept */
    assert_string_equal(fake_done_reply(c), "VALUE k 5 1\r\nw\r\nEND\r\n");
    assert_int_equal(fx->pool.m.near.stores, 1);
    size_t d = send_rq(fx, "get k\r\n");
    sent(leaf, 2, "mg k v t f\r\n");
    reply(fx, leaf, 2, "EN\r\n");
    assert_string_equal(fake_done_reply(d), "END\r\n");
    size_t e = send_rq(fx, "get k\r\n");
    sent(leaf, 3, "mg k v t f\r\n");
    reply(fx, leaf, 3, "ERROR\r\n");
    sent(leaf, 4, "get k\r\n");
    reply(fx, leaf, 4, "VALUE k 0 1\r\nx\r\nEND\r\n");
    assert_string_equal(fake_done_reply(e), "VALUE k 0 1\r\nx\r\nEND\r\n");
    size_t f = send_rq(fx, "get c\r\n");
    sent(leaf, 5, "get c\r\n");
    reply(fx, leaf, 5, "VALUE c 0 1\r\ny\r\nEND\r\n");
    assert_string_equal(fake_done_reply(f), "VALUE c 0 1\r\ny\r\nEND\r\n");
    assert_int_equal(fx->pool.m.near.stores, 1);
    assert_int_equal(fx->pool.m.near.hits, 1);
}

/* The TTL, counted from the read's arrival: served within it, never after. A key cached lately
 * is kept again when its entry expired, even while the detector does not count it hot. */
static void test_near_ttl(void **state)
{
    fixture *fx = *state;
    px_route *leaf = near_tree(fx);
    uint64_t t0 = fx->io.read_hr;
    send_rq(fx, R("GET k"));
    fx->io.read_hr = t0 + 1000; /* the reply comes a little later */
    reply(fx, leaf, 0, "$1\r\nv\r\n");
    ch__topk_clear(fx->pool.hot); /* k is not counted hot any more */
    fx->io.read_hr = t0 + NEAR_TTL_NS - 1;
    size_t a = send_rq(fx, R("GET k"));
    assert_string_equal(fake_done_reply(a), "$1\r\nv\r\n");
    assert_int_equal(fake_sends(leaf), 1);
    fx->io.read_hr = t0 + NEAR_TTL_NS + 1;
    size_t b = send_rq(fx, R("GET k"));
    sent(leaf, 1, R("GET k"));
    reply(fx, leaf, 1, "$1\r\nw\r\n");
    size_t c = send_rq(fx, R("GET k"));
    assert_string_equal(fake_done_reply(b), "$1\r\nw\r\n");
    assert_string_equal(fake_done_reply(c), "$1\r\nw\r\n"); /* kept again: known */
    assert_int_equal(fake_sends(leaf), 2);
}

/* Server-assisted invalidation (track.h), the pool's server live (its link's id 7): a fill goes
 * after CLIENT TRACKING on REDIRECT 7 OPTIN and CLIENT CACHING yes on its connection. The race
 * Redis's client-side caching guidance warns of: an invalidation (the link's push bumps the key's
 * generation) that arrives before the fill's reply refuses it; one that arrives after it ends
 * the entry on arrival. With the link down the fill goes untracked and is not kept; a server
 * that refused tracking keeps the TTL alone, as before. */
/* A tracking client's read (client_track.h, px_rq.ctrack; issue 37, item 4): it goes to its
 * server after the link's tracking and CLIENT CACHING yes even for a cold key, bypasses an
 * entry the near cache holds, and says it was tracked (ctrack_sent); with no live link it goes
 * untracked and says so (ctrack_lost), for its client's flush. */
static void test_near_client_tracked(void **state)
{
    fixture *fx = *state;
    px_route *leaf = near_tree(fx);
    px_server *s = fake_server_of(leaf);
    fx->pc.near_tracking = true;
    fx->pool.servers = s;
    fx->pool.nservers = 1;
    s->track.id = 7;
    s->track.state = PX_TRACK_LIVE;
    /* the near cache holds k (hot: near_tree counts it so), filled tracked */
    size_t a = send_rq(fx, R("GET k"));
    reply(fx, leaf, 0, "+OK\r\n");
    reply(fx, leaf, 1, "+OK\r\n");
    reply(fx, leaf, 2, "$1\r\nv\r\n");
    assert_string_equal(fake_done_reply(a), "$1\r\nv\r\n");
    assert_int_equal(fx->pool.m.near.stores, 1);
    fake_ctrack = true;
    size_t b = send_rq(fx, R("GET k")); /* not the entry: to the server, tracked */
    sent(leaf, 3, R("CLIENT TRACKING on REDIRECT 7 OPTIN"));
    sent(leaf, 4, R("CLIENT CACHING yes"));
    sent(leaf, 5, R("GET k"));
    reply(fx, leaf, 3, "+OK\r\n");
    reply(fx, leaf, 4, "+OK\r\n");
    reply(fx, leaf, 5, "$1\r\nw\r\n");
    assert_string_equal(fake_done_reply(b), "$1\r\nw\r\n");
    assert_int_equal(fake_done_ctrack(b), 1);
    size_t c = send_rq(fx, R("GET cold")); /* a cold key too */
    sent(leaf, 6, R("CLIENT TRACKING on REDIRECT 7 OPTIN"));
    sent(leaf, 7, R("CLIENT CACHING yes"));
    sent(leaf, 8, R("GET cold"));
    reply(fx, leaf, 6, "+OK\r\n");
    reply(fx, leaf, 7, "+OK\r\n");
    reply(fx, leaf, 8, "$-1\r\n");
    assert_int_equal(fake_done_ctrack(c), 1);
    /* no live link: sent untracked, and told */
    s->track.id = 0;
    s->track.state = PX_TRACK_DOWN;
    size_t d = send_rq(fx, R("GET cold"));
    sent(leaf, 9, R("GET cold"));
    reply(fx, leaf, 9, "$-1\r\n");
    assert_int_equal(fake_done_ctrack(d), 2);
    /* a server not the pool's (a gutter pool's, a retired or staged one): its invalidations
     * are not this pool's, so the read is not tracked for the client, link or not */
    px_server other = {.uid = 999};
    fx->pool.servers = &other;
    s->track.id = 7;
    s->track.state = PX_TRACK_LIVE;
    size_t e = send_rq(fx, R("GET cold"));
    sent(leaf, 12, R("GET cold"));
    reply(fx, leaf, 10, "+OK\r\n");
    reply(fx, leaf, 11, "+OK\r\n");
    reply(fx, leaf, 12, "$-1\r\n");
    assert_int_equal(fake_done_ctrack(e), 2);
    fx->pool.servers = s;
    fake_ctrack = false;
}

static void test_near_tracked(void **state)
{
    fixture *fx = *state;
    px_route *leaf = near_tree(fx);
    px_server *s = fake_server_of(leaf);
    uint64_t kh = XXH3_64bits("k", 1);
    fx->pc.near_tracking = true;
    fx->pool.servers = s;
    fx->pool.nservers = 1;
    s->track.id = 7;
    s->track.state = PX_TRACK_LIVE;
    /* the invalidation first: the reply is not kept */
    size_t a = send_rq(fx, R("GET k"));
    sent(leaf, 0, R("CLIENT TRACKING on REDIRECT 7 OPTIN"));
    sent(leaf, 1, R("CLIENT CACHING yes"));
    sent(leaf, 2, R("GET k"));
    reply(fx, leaf, 0, "+OK\r\n");
    reply(fx, leaf, 1, "+OK\r\n");
    ch__near_invalidate(fx->sp.near_gens, kh);
    reply(fx, leaf, 2, "$3\r\nold\r\n");
    assert_string_equal(fake_done_reply(a), "$3\r\nold\r\n");
    assert_int_equal(fx->pool.m.near.stores, 0);
    /* the reply first: kept and served, until the invalidation arrives */
    size_t b = send_rq(fx, R("GET k"));
    sent(leaf, 5, R("GET k"));
    reply(fx, leaf, 5, "$3\r\nnew\r\n");
    assert_string_equal(fake_done_reply(b), "$3\r\nnew\r\n");
    assert_int_equal(fx->pool.m.near.stores, 1);
    size_t c = send_rq(fx, R("GET k"));
    assert_string_equal(fake_done_reply(c), "$3\r\nnew\r\n");
    assert_int_equal(fake_sends(leaf), 6);
    ch__near_invalidate(fx->sp.near_gens, kh);
    size_t d = send_rq(fx, R("GET k"));
    sent(leaf, 8, R("GET k")); /* not the entry: to the server, tracked again */
    reply(fx, leaf, 8, "$3\r\nnew\r\n");
    assert_string_equal(fake_done_reply(d), "$3\r\nnew\r\n");
    assert_int_equal(fx->pool.m.near.stores, 2);
    /* the link lost (track.c: a flush, and no id): untracked, not kept */
    s->track.id = 0;
    s->track.state = PX_TRACK_DOWN;
    ch__near_invalidate_all(fx->sp.near_gens);
    size_t e = send_rq(fx, R("GET k"));
    sent(leaf, 9, R("GET k")); /* no tracking before it */
    reply(fx, leaf, 9, "$3\r\nnew\r\n");
    assert_string_equal(fake_done_reply(e), "$3\r\nnew\r\n");
    assert_int_equal(fx->pool.m.near.stores, 2);
    /* a server that refused tracking: kept, bounded by hot_cache */
    s->track.state = PX_TRACK_REFUSED;
    send_rq(fx, R("GET k"));
    sent(leaf, 10, R("GET k"));
    reply(fx, leaf, 10, "$3\r\nnew\r\n");
    assert_int_equal(fx->pool.m.near.stores, 3);
    size_t f = send_rq(fx, R("GET k"));
    assert_string_equal(fake_done_reply(f), "$3\r\nnew\r\n");
    assert_int_equal(fake_sends(leaf), 11);
    /* a server not the pool's (a gutter pool's, a retired one): its invalidations bump another
     * pool's generations, so nothing is kept from it, tracked or not */
    px_server other = {.uid = 999};
    fx->pool.servers = &other;
    s->track.id = 7;
    s->track.state = PX_TRACK_LIVE;
    ch__near_invalidate_all(fx->sp.near_gens);
    send_rq(fx, R("GET k"));
    sent(leaf, 13, R("GET k"));
    reply(fx, leaf, 11, "+OK\r\n");
    reply(fx, leaf, 12, "+OK\r\n");
    reply(fx, leaf, 13, "$3\r\nnew\r\n");
    assert_int_equal(fx->pool.m.near.stores, 3);
    fx->pool.servers = s;
}

/* A new placement (a reload's, a fleet change's) moves keys to owners that never tracked them for
 * this proxy: the first look after it drops every entry (track.h, after each loop iteration). */
static void test_near_tracked_placement(void **state)
{
    fixture *fx = *state;
    px_route *leaf = near_tree(fx);
    px_server *s = fake_server_of(leaf);
    fx->pc.near_tracking = true;
    fx->pool.servers = s;
    fx->pool.nservers = 1;
    s->track.id = 7;
    ch_table *a = (ch_table *)(uintptr_t)1, *b = (ch_table *)(uintptr_t)2; /* compared only */
    fx->pool.table = a;
    px_track_placement(&fx->pool); /* the first placement seen: nothing to drop */
    send_rq(fx, R("GET k"));
    reply(fx, leaf, 0, "+OK\r\n");
    reply(fx, leaf, 1, "+OK\r\n");
    reply(fx, leaf, 2, "$1\r\nv\r\n");
    px_track_placement(&fx->pool); /* unchanged */
    size_t h = send_rq(fx, R("GET k"));
    assert_string_equal(fake_done_reply(h), "$1\r\nv\r\n");
    assert_int_equal(fake_sends(leaf), 3);
    fx->pool.table = b;
    px_track_placement(&fx->pool);
    assert_int_equal(fx->pool.m.track.flushes, 1);
    send_rq(fx, R("GET k"));
    sent(leaf, 5, R("GET k")); /* not the entry */
    fx->pool.table = NULL;
}

/* ==== coalesce ==================================================================================
 * route_coalesce.c over child[0] (a leaf). Clients are told apart by their request numbers. */

/* Identical reads in flight join the first: one child call, every waiter answered with its
 * reply, counted as coalesced. */
static void test_coalesce_joins(void **state)
{
    fixture *fx = *state;
    px_route *leaf = tree(&fx->pool, &px_route_coalesce_ops, NULL, 1)->child[0];
    size_t a = fake_start(&fx->pool, R("GET k"), 1, PX_DIALECT_RESP2);
    size_t b = fake_start(&fx->pool, R("GET k"), 2, PX_DIALECT_RESP2);
    size_t c = fake_start(&fx->pool, R("GET k"), 3, PX_DIALECT_RESP2);
    assert_int_equal(fake_sends(leaf), 1);
    sent(leaf, 0, R("GET k"));
    assert_int_equal(ndone, 0);
    reply(fx, leaf, 0, "$1\r\nv\r\n");
    assert_string_equal(fake_done_reply(a), "$1\r\nv\r\n");
    assert_string_equal(fake_done_reply(b), "$1\r\nv\r\n");
    assert_string_equal(fake_done_reply(c), "$1\r\nv\r\n");
    assert_int_equal(fx->pool.m.coalesced, 2);
    size_t d = send_rq(fx, R("GET k")); /* the group closed with its answer */
    assert_int_equal(fake_sends(leaf), 2);
    reply(fx, leaf, 1, "$1\r\nw\r\n");
    assert_string_equal(fake_done_reply(d), "$1\r\nw\r\n");
}

/* A write of the key closes its group: a read after the write starts a group of its own (and
 * gets what the server answers after the write), joined by the reads after it. */
static void test_coalesce_write_closes(void **state)
{
    fixture *fx = *state;
    px_route *leaf = tree(&fx->pool, &px_route_coalesce_ops, NULL, 1)->child[0];
    size_t a = fake_start(&fx->pool, R("GET k"), 1, PX_DIALECT_RESP2);
    size_t w = fake_start(&fx->pool, R("SET k new"), 2, PX_DIALECT_RESP2);
    size_t b = fake_start(&fx->pool, R("GET k"), 3, PX_DIALECT_RESP2);
    size_t c = fake_start(&fx->pool, R("GET k"), 4, PX_DIALECT_RESP2);
    assert_int_equal(fake_sends(leaf), 3);
    sent(leaf, 1, R("SET k new"));
    sent(leaf, 2, R("GET k"));
    reply(fx, leaf, 0, "$3\r\nold\r\n");
    reply(fx, leaf, 1, "+OK\r\n");
    reply(fx, leaf, 2, "$3\r\nnew\r\n");
    assert_string_equal(fake_done_reply(a), "$3\r\nold\r\n");
    assert_string_equal(fake_done_reply(w), "+OK\r\n");
    assert_string_equal(fake_done_reply(b), "$3\r\nnew\r\n");
    assert_string_equal(fake_done_reply(c), "$3\r\nnew\r\n");
    assert_int_equal(fx->pool.m.coalesced, 1);
}

/* Reads that differ do not join: another key, another command (MGET), another dialect (a RESP3
 * client's reply may be written differently). */
static void test_coalesce_apart(void **state)
{
    fixture *fx = *state;
    px_route *leaf = tree(&fx->pool, &px_route_coalesce_ops, NULL, 1)->child[0];
    fake_start(&fx->pool, R("GET k"), 1, PX_DIALECT_RESP2);
    fake_start(&fx->pool, R("GET k"), 2, PX_DIALECT_RESP3);
    fake_start(&fx->pool, R("GET j"), 3, PX_DIALECT_RESP2);
    fake_start(&fx->pool, R("MGET k"), 4, PX_DIALECT_RESP2);
    assert_int_equal(fake_sends(leaf), 4);
    assert_int_equal(fx->pool.m.coalesced, 0);
    reply(fx, leaf, 0, "$1\r\nk\r\n");
    reply(fx, leaf, 1, "$1\r\nk\r\n");
    reply(fx, leaf, 2, "$1\r\nj\r\n");
    reply(fx, leaf, 3, "*1\r\n$1\r\nk\r\n");
    assert_int_equal(ndone, 4);
}

/* The child's failure answers every waiter with the same error. */
static void test_coalesce_failure_answers_all(void **state)
{
    fixture *fx = *state;
    px_route *leaf = tree(&fx->pool, &px_route_coalesce_ops, NULL, 1)->child[0];
    for (uint64_t cid = 1; cid <= 3; cid++)
        fake_start(&fx->pool, R("GET k"), cid, PX_DIALECT_RESP2);
    failed(leaf, 0);
    assert_int_equal(ndone, 3);
    for (size_t i = 0; i < 3; i++) {
        assert_true(fake_done_reply(i)[0] == '-');
        assert_non_null(strstr(fake_done_reply(i), "timed out"));
    }
}

/* ==== shadow ====================================================================================
 * route_shadow.c over child[0] the pool's tree (a leaf); the shadow pool ("o", another pool of
 * the worker) serves its copies on its own tree, one fake leaf. */

static px_route *shadow_tree(fixture *fx, double fraction, bool writes, px_route **shadow)
{
    fx->shadow = (px_shadow_conf){&fx->other, fraction, writes};
    px_route *leaf = tree(&fx->pool, &px_route_shadow_ops, &fx->shadow, 1)->child[0];
    fake_tree *ft = fake_tree_new();
    *shadow = fake_add(ft, NULL, SEND_LEAF);
    fake_use(&fx->other, ft);
    return leaf;
}

/* The whole key space shadowed: the request goes to both; the client gets the pool's answer
 * as soon as it comes, whatever the shadow does; the two are compared once both are in. */
static void test_shadow_mirrors(void **state)
{
    fixture *fx = *state;
    px_route *sh, *leaf = shadow_tree(fx, 1.0, false, &sh);
    size_t a = send_rq(fx, R("GET k"));
    sent(leaf, 0, R("GET k"));
    sent(sh, 0, R("GET k"));
    reply(fx, leaf, 0, "$1\r\nv\r\n");
    assert_string_equal(fake_done_reply(a), "$1\r\nv\r\n"); /* not waiting for the shadow */
    assert_int_equal(fx->pool.m.shadow.inflight, 1);
    reply(fx, sh, 0, "$1\r\nv\r\n");
    assert_int_equal(fx->pool.m.shadow.agree, 1);
    assert_int_equal(fx->pool.m.shadow.inflight, 0);

    size_t b = send_rq(fx, R("GET k"));
    reply(fx, sh, 1, "$1\r\nx\r\n"); /* the shadow first, and another value */
    assert_false(fake_done(b));
    reply(fx, leaf, 1, "$1\r\nv\r\n");
    assert_string_equal(fake_done_reply(b), "$1\r\nv\r\n");
    assert_int_equal(fx->pool.m.shadow.disagree, 1);

    size_t c = send_rq(fx, R("GET k"));
    failed(sh, 2);
    reply(fx, leaf, 2, "$-1\r\n");
    assert_string_equal(fake_done_reply(c), "$-1\r\n");
    assert_int_equal(fx->pool.m.shadow.failed, 1);
    assert_int_equal(fx->pool.m.shadow.sent, 3);
}

/* What is not shadowed: keys outside the share (none at 0), writes unless asked for, requests
 * split per key. */
static void test_shadow_share(void **state)
{
    fixture *fx = *state;
    px_route *sh, *leaf = shadow_tree(fx, 1.0, false, &sh);
    send_rq(fx, R("SET k v"));
    send_rq(fx, R("MGET a b"));
    fx->shadow.fraction = 0;
    send_rq(fx, R("GET k"));
    assert_int_equal(fake_sends(sh), 0);
    fx->shadow.fraction = 1.0;
    fx->shadow.writes = true;
    send_rq(fx, R("SET k w"));
    sent(sh, 0, R("SET k w"));
    reply(fx, sh, 0, "+OK\r\n");
    assert_int_equal(fake_sends(leaf), 4);
    for (size_t i = 0; i < 4; i++)
        reply(fx, leaf, i, i == 1 ? "*2\r\n$1\r\na\r\n$1\r\nb\r\n" : "+OK\r\n");
    assert_int_equal(ndone, 4);
    assert_int_equal(fx->pool.m.shadow.sent, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_warm_unmoved, setup, teardown),
        cmocka_unit_test_setup_teardown(test_warm_before_switch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_warm_ramp, setup, teardown),
        cmocka_unit_test_setup_teardown(test_warm_read_copies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_warm_read_misses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_warm_copy_after_write_dropped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_warm_write_moves, setup, teardown),
        cmocka_unit_test_setup_teardown(test_warm_write_mc, setup_mc, teardown),
        cmocka_unit_test_setup_teardown(test_warm_cross_server, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replica_write_every_owner, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replica_write_worst, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replica_write_owner_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replica_split_del, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replica_read_first_up, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replica_read_repair, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replica_repair_after_write_dropped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replica_read_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replica_hot_spread, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stage_passes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stage_write_invalidates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stage_delete_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stage_split, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gutter_owner_up, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gutter_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gutter_write_capped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gutter_write_mc, setup_mc, teardown),
        cmocka_unit_test_setup_teardown(test_gutter_split, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gutter_unavailable_or_failing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_near_hot_key_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_near_not_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_near_write_invalidates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_near_ttl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_near_unnamed_writes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_near_mc_fill, setup_mc, teardown),
        cmocka_unit_test_setup_teardown(test_coalesce_joins, setup, teardown),
        cmocka_unit_test_setup_teardown(test_coalesce_write_closes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_coalesce_apart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_coalesce_failure_answers_all, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shadow_mirrors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shadow_share, setup, teardown),
        cmocka_unit_test_setup_teardown(test_near_tracked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_near_tracked_placement, setup, teardown),
        cmocka_unit_test_setup_teardown(test_near_client_tracked, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_routes.c — the tree of routes in process (route.h, request.c), with fake routes
 * (fake_routes.h): relays that call or pass a child, and leaves that hold each slot until the
 * test answers it, in the order the test picks. No backends, no sockets, no clock. What must
 * hold, whatever the routes:
 *
 *   - an answer goes to the nearest route above that called for the slot: a route that passed
 *     it (px_rq_pass) never sees it, one that called (px_rq_call) always does, once;
 *   - each route's state word for a slot is its own (one per level), untouched by the others;
 *   - one px_rq_return may answer slots bound for different routes: each gets its own;
 *   - a leaf's sends coalesce into one backend request only when one route takes their answer;
 *   - a split request's answer is merged in key order whatever order its parts come back in,
 *     and its owner hears of it once, after the last part;
 *   - a route may call again after an answer (a retry on another child);
 *   - a failure that reaches the top is the client's error, with its reason;
 *   - the owner is told of completion only once no route is running (at the end of
 *     px_rq_start, when a route answered inside its start);
 *   - a request started on a tree keeps it alive past a reload's swap (ASan and LeakSanitizer
 *     fail the run if the old tree is read after being freed, or never freed).
 * Expected replies are RESP as the protocol spells it, written out here.
 */
#include "fake_routes.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a pool and its requests ----------------------------------------------------------------- */

typedef struct fixture {
    px_pool pool;
    px_io io; /* only its latency clock is read */
} fixture;

static int setup(void **state)
{
    fixture *fx = calloc(1, sizeof(*fx));
    fx->pool.io = &fx->io;
    fx->pool.codec = &px_codec_redis;
    fx->pool.nservers = 1;
    fx->pool.limits = (px_limits){.max_request = 1 << 20, .max_args = 1024,
                                  .max_value = 1 << 20, .max_line = 1 << 16, .max_key = 1 << 10,
                                  .max_depth = 8};
    fx->pool.backend_limits = fx->pool.limits;
    fake_reset();
    fake_routes_reset();
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture *fx = *state;
    px_route_tree_release(fx->pool.tree);
    fake_reset();
    fake_routes_free();
    free(fx);
    return 0;
}

/* A tree of modes[0, n), a chain (each node the child of the one before) unless parent_of says
 * otherwise (parent_of[i] < i; -1 for the root). */
static px_route_tree *tree_new(const fake_mode *modes, const int *parent_of, size_t n)
{
    fake_tree *ft = fake_tree_new();
    for (size_t i = 0; i < n; i++) {
        int p = parent_of != NULL ? parent_of[i] : (int)i - 1;
        fake_add(ft, p >= 0 ? &ft->t.nodes[p] : NULL, modes[i]);
    }
    return &ft->t;
}

static void use_tree(fixture *fx, px_route_tree *t)
{
    px_route_tree_release(fx->pool.tree);
    fx->pool.tree = t;
    fx->pool.route = &t->nodes[0];
}

/* Parses the RESP request and starts it on the pool's tree. */
static void start(fixture *fx, const char *text)
{
    fake_start(&fx->pool, text, 1, PX_DIALECT_RESP2);
}

static void answer(size_t i, const char *resp)
{
    fake_answer(i, resp);
}

static void answer_failed(size_t i, const char *reason)
{
    fake_answer_failed(i, reason);
}

#define GET_K "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
#define MGET_ABC "*4\r\n$4\r\nMGET\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"

/* ---- tests ----------------------------------------------------------------------------------- */

static void test_pass_skips_the_passer(void **state)
{
    fixture *fx = *state;
    use_tree(fx, tree_new((fake_mode[]){CALL, PASS, HELD_LEAF}, NULL, 3));
    start(fx, GET_K);
    assert_int_equal(nheld, 1);
    answer(0, "$1\r\nv\r\n");
    assert_int_equal(nevents, 1); /* the root only: the middle passed it on */
    assert_int_equal(events[0].id, 0);
    assert_int_equal(ndone, 1);
    assert_string_equal(done_reply, "$1\r\nv\r\n");
}

static void test_call_returns_through_each(void **state)
{
    fixture *fx = *state;
    use_tree(fx, tree_new((fake_mode[]){CALL, CALL, HELD_LEAF}, NULL, 3));
    start(fx, GET_K);
    answer(0, "$1\r\nv\r\n");
    assert_int_equal(nevents, 2); /* the middle, then the root */
    assert_int_equal(events[0].id, 1);
    assert_int_equal(events[1].id, 0);
    assert_int_equal(state_checks, 2);
    assert_string_equal(done_reply, "$1\r\nv\r\n");
}

static void test_state_per_level(void **state)
{
    fixture *fx = *state;
    use_tree(fx, tree_new((fake_mode[]){CALL, CALL, CALL, HELD_LEAF}, NULL, 4));
    start(fx, MGET_ABC);
    assert_int_equal(nheld, 3);
    for (size_t i = 0; i < 3; i++)
        answer(i, "*1\r\n$1\r\nv\r\n");
    /* three relays, three slots: every relay found each slot's word as it wrote it */
    assert_int_equal(nevents, 9);
    assert_int_equal(state_checks, 9);
}

static void test_split_answers_in_any_order(void **state)
{
    fixture *fx = *state;
    use_tree(fx, tree_new((fake_mode[]){PASS, HELD_LEAF}, NULL, 2));
    start(fx, MGET_ABC);
    assert_int_equal(nheld, 3);
    /* each part an MGET of its one key, answered as Redis would: an array of one */
    const char *vals[] = {"*1\r\n$2\r\nva\r\n", "*1\r\n$2\r\nvb\r\n", "*1\r\n$2\r\nvc\r\n"};
    size_t order[] = {2, 0, 1};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(ndone, 0);
        size_t h = order[i];
        answer(h, vals[holding[h].slot]);
    }
    assert_int_equal(ndone, 1);
    assert_string_equal(done_reply, "*3\r\n$2\r\nva\r\n$2\r\nvb\r\n$2\r\nvc\r\n");
}

static void test_one_return_many_destinations(void **state)
{
    fixture *fx = *state;
    /* the middle passes even slots and calls odd ones; the leaf answers both in one return */
    use_tree(fx, tree_new((fake_mode[]){CALL, PASS_EVEN, HELD_LEAF}, NULL, 3));
    start(fx, "*3\r\n$4\r\nMGET\r\n$1\r\na\r\n$1\r\nb\r\n");
    assert_int_equal(nheld, 2);
    px_slot both[2] = {holding[0].slot, holding[1].slot};
    /* A relay may return slots of several calls at once; each group gets the same reply (a
     * leaf never coalesces slots bound for different routes: test_coalesced_by_destination). */
    px_reply part = {.p = "*1\r\n$1\r\nx\r\n", .len = 11, .kind = PX_REPLY_VALUE};
    px_rq_return(holding[0].rq, holding[0].leaf, both, 2, &part);
    size_t root_slot0 = 0, mid_slot1 = 0, root_slot1 = 0;
    for (size_t i = 0; i < nevents; i++) {
        assert_int_equal(events[i].n, 1); /* split by destination */
        if (events[i].id == 0 && events[i].slots[0] == 0)
            root_slot0++;
        else if (events[i].id == 1 && events[i].slots[0] == 1)
            mid_slot1++;
        else if (events[i].id == 0 && events[i].slots[0] == 1)
            root_slot1++;
        else
            fail_msg("relay %d got slot %u", events[i].id, events[i].slots[0]);
    }
    assert_int_equal(root_slot0, 1);
    assert_int_equal(mid_slot1, 1);
    assert_int_equal(root_slot1, 1);
    assert_int_equal(ndone, 1);
    assert_string_equal(done_reply, "*2\r\n$1\r\nx\r\n$1\r\nx\r\n");
}

static void test_retry_on_another_child(void **state)
{
    fixture *fx = *state;
    /* root RETRY over two held leaves: the first fails, the second answers */
    use_tree(fx, tree_new((fake_mode[]){RETRY, HELD_LEAF, HELD_LEAF}, (int[]){-1, 0, 0}, 3));
    start(fx, GET_K);
    assert_int_equal(nheld, 1);
    assert_ptr_equal(holding[0].leaf, fx->pool.tree->nodes[0].child[0]);
    answer_failed(0, "first is down");
    assert_int_equal(nheld, 2);
    assert_ptr_equal(holding[1].leaf, fx->pool.tree->nodes[0].child[1]);
    assert_int_equal(ndone, 0);
    answer(1, "$2\r\nok\r\n");
    assert_int_equal(nevents, 2);
    assert_int_equal(events[0].kind, PX_REPLY_FAILED);
    assert_int_equal(events[1].kind, PX_REPLY_VALUE);
    assert_string_equal(done_reply, "$2\r\nok\r\n");
}

static void test_failed_at_top_is_an_error(void **state)
{
    fixture *fx = *state;
    use_tree(fx, tree_new((fake_mode[]){PASS, PASS, HELD_LEAF}, NULL, 3));
    start(fx, GET_K);
    answer_failed(0, "server s1 is gone");
    assert_int_equal(nevents, 0);
    assert_int_equal(ndone, 1);
    assert_true(done_reply[0] == '-');
    assert_non_null(strstr(done_reply, "server s1 is gone"));
    assert_non_null(strstr(done_reply, "\r\n"));
}

static void test_answered_inside_start(void **state)
{
    fixture *fx = *state;
    use_tree(fx, tree_new((fake_mode[]){CALL, SYNC_LEAF}, NULL, 2));
    start(fx, MGET_ABC); /* on_done asserts it is not told from inside the leaf's start */
    assert_int_equal(ndone, 1);
    assert_int_equal(nevents, 3);
    assert_string_equal(done_reply, "*3\r\n$4\r\nsync\r\n$4\r\nsync\r\n$4\r\nsync\r\n");
}

/* MGET a b: the root passes a and calls for b, both to one leaf and one server. Were they one
 * backend request, its reply (both keys) would be handed whole to the root for a and to the
 * root's reply() for b: a's answer would be b's too. Two requests, each answered as its own. */
static void test_coalesced_by_destination(void **state)
{
    fixture *fx = *state;
    use_tree(fx, tree_new((fake_mode[]){PASS_EVEN, SEND_LEAF}, NULL, 2));
    start(fx, "*3\r\n$4\r\nMGET\r\n$1\r\na\r\n$1\r\nb\r\n");
    assert_int_equal(fake_nlog, 2);
    for (size_t i = 0; i < 2; i++) {
        const px_buf *b = &fake_log[i].bytes;
        bool is_a = memmem(b->p, b->len, "\r\na\r\n", 5) != NULL;
        bool is_b = memmem(b->p, b->len, "\r\nb\r\n", 5) != NULL;
        assert_true(is_a != is_b); /* one key each */
        const char *r = is_a ? "*1\r\n$1\r\nx\r\n" : "*1\r\n$1\r\ny\r\n";
        fake_reply(&fx->pool, &fake_log[i], r, strlen(r));
    }
    assert_int_equal(nevents, 1); /* b's, at the root; a's skipped it */
    assert_int_equal(events[0].slots[0], 1);
    assert_int_equal(ndone, 1);
    assert_string_equal(done_reply, "*2\r\n$1\r\nx\r\n$1\r\ny\r\n");
}

/* A side request (px_rq_fork) of a route is a request of its own started on the route's child:
 * the leaf sends it, its answer comes back to the route that forked it (a failure as a failure,
 * not the client's error), and the slot waits for it. */
static void test_fork_answers_its_route(void **state)
{
    fixture *fx = *state;
    use_tree(fx, tree_new((fake_mode[]){CALL, FORK, SEND_LEAF}, NULL, 3));
    start(fx, GET_K);
    assert_int_equal(fake_nlog, 1); /* the side request, not the GET */
    assert_int_equal(fake_log[0].bytes.len, strlen(FAKE_DEL_SIDE));
    assert_memory_equal(fake_log[0].bytes.p, FAKE_DEL_SIDE, strlen(FAKE_DEL_SIDE));
    assert_int_equal(ndone, 0);
    fake_reply(&fx->pool, &fake_log[0], ":1\r\n", 4);
    assert_int_equal(nevents, 2); /* the forking relay, then the root */
    assert_int_equal(events[0].id, 1);
    assert_int_equal(events[0].kind, PX_REPLY_INTEGER);
    assert_int_equal(state_checks, 2);
    assert_int_equal(ndone, 1);
    assert_string_equal(done_reply, ":1\r\n");
    /* A failure of the side request: the forking route is told it failed. */
    start(fx, GET_K);
    fake_fail(&fake_log[1]);
    assert_int_equal(events[2].id, 1);
    assert_int_equal(events[2].kind, PX_REPLY_FAILED);
    assert_int_equal(ndone, 2);
    assert_non_null(strstr(done_reply, "timed out")); /* the root's client: an error now */
}

/* A fired side request (px_rq_fire) runs detached: the request goes on at once, the side's
 * answer goes to its callback, and the tree it runs on lives until it is answered, past a
 * reload and past the request that fired it. */
static void test_fire_is_detached(void **state)
{
    fixture *fx = *state;
    px_route_tree *old = tree_new((fake_mode[]){FIRE, SEND_LEAF, HELD_LEAF}, (int[]){-1, 0, 0}, 3);
    use_tree(fx, old);
    nfired = 0;
    start(fx, GET_K);
    assert_int_equal(fake_nlog, 1); /* the fired DEL */
    assert_int_equal(nheld, 1);     /* the GET, passed to the held leaf */
    answer(0, "$1\r\nv\r\n");
    assert_int_equal(ndone, 1); /* answered while its side request is still out */
    assert_string_equal(done_reply, "$1\r\nv\r\n");
    use_tree(fx, tree_new((fake_mode[]){PASS, HELD_LEAF}, NULL, 2)); /* a reload's commit */
    assert_int_equal(old->refs, 1); /* the fired request's */
    fake_reply(&fx->pool, &fake_log[0], ":0\r\n", 4);
    assert_int_equal(nfired, 1);
    assert_string_equal(fired_log[0], ":0\r\n");
    assert_int_equal(fired_kind[0], PX_REPLY_INTEGER); /* and the old tree is freed with it */
}

static void test_tree_outlives_a_reload(void **state)
{
    fixture *fx = *state;
    px_route_tree *old = tree_new((fake_mode[]){CALL, HELD_LEAF}, NULL, 2);
    use_tree(fx, old);
    start(fx, GET_K);
    assert_int_equal(old->refs, 2); /* the pool's and the request's */
    use_tree(fx, tree_new((fake_mode[]){PASS, HELD_LEAF}, NULL, 2)); /* a reload's commit */
    assert_int_equal(old->refs, 1);
    answer(0, "$1\r\nv\r\n"); /* through the old tree: its root calls, so it is told */
    assert_int_equal(nevents, 1);
    assert_int_equal(events[0].id, 0);
    assert_int_equal(ndone, 1); /* and the old tree is freed with the request */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pass_skips_the_passer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_call_returns_through_each, setup, teardown),
        cmocka_unit_test_setup_teardown(test_state_per_level, setup, teardown),
        cmocka_unit_test_setup_teardown(test_split_answers_in_any_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_one_return_many_destinations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retry_on_another_child, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_at_top_is_an_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_answered_inside_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_coalesced_by_destination, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tree_outlives_a_reload, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fork_answers_its_route, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fire_is_detached, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

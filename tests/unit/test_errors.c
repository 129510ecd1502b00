/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_errors.c — bad input gets the right status code and nothing leaks; allocation failure
 * at every allocation of every build returns CH_ENOMEM with nothing leaked; every refusal of
 * ch_table_build_err / ch_membership_build_err says which argument and which limit (exact
 * texts), a smaller (older) ch_error is written only within its size.
 */
#include <chash_route.h>
#include "testutil.h"

#include <stdarg.h>
#include <setjmp.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

static int build_with(const ch_node *nodes, size_t n, ch_algo_id algo, ch_table **t)
{
    ch_options o;
    ch_options_init(&o);
    o.algo = algo;
    return ch_table_build(nodes, n, &o, t);
}

/* Every algorithm rejects the same bad node lists with the same codes. */
static void test_bad_nodes(void **state)
{
    (void)state;
    ch_node ok[] = {{"a", 1}, {"b", 1}};
    ch_node zero[] = {{"a", 1}, {"b", 0}};
    ch_node neg[] = {{"a", -1}, {"b", 1}};
    ch_node nan_w[] = {{"a", NAN}, {"b", 1}};
    ch_node inf_w[] = {{"a", INFINITY}, {"b", 1}};
    ch_node dup[] = {{"a", 1}, {"b", 1}, {"a", 1}};
    ch_node empty_id[] = {{"a", 1}, {"", 1}};
    ch_node null_id[] = {{NULL, 1}, {"b", 1}};
    for (int a = 0; a < CH_ALGO_COUNT_; a++) {
        ch_table *t = (ch_table *)&t; /* must stay untouched on failure */
        ch_table *const sentinel = t;
        assert_int_equal(build_with(ok, 0, (ch_algo_id)a, &t), CH_EEMPTY);
        assert_int_equal(build_with(NULL, 2, (ch_algo_id)a, &t), CH_EINVAL);
        assert_int_equal(build_with(ok, 2, (ch_algo_id)a, NULL), CH_EINVAL);
        assert_int_equal(build_with(zero, 2, (ch_algo_id)a, &t), CH_EWEIGHT);
        assert_int_equal(build_with(neg, 2, (ch_algo_id)a, &t), CH_EWEIGHT);
        assert_int_equal(build_with(nan_w, 2, (ch_algo_id)a, &t), CH_EWEIGHT);
        assert_int_equal(build_with(inf_w, 2, (ch_algo_id)a, &t), CH_EWEIGHT);
        assert_int_equal(build_with(dup, 3, (ch_algo_id)a, &t), CH_EDUPID);
        assert_int_equal(build_with(empty_id, 2, (ch_algo_id)a, &t), CH_EBADID);
        assert_int_equal(build_with(null_id, 2, (ch_algo_id)a, &t), CH_EBADID);
        assert_ptr_equal(t, sentinel);
    }
}

static void test_bad_options(void **state)
{
    (void)state;
    ch_node nodes[] = {{"a", 1}, {"b", 1}, {"c", 1}};
    ch_table *t;
    ch_options o;

    /* vnodes 0 is the algorithm's default: 160 for chash's ring, a library's own for its
     * scheme (groupcache's 50 replicas, uhashring's ketama mode's 40). */
    struct {
        ch_algo_id algo;
        uint32_t vnodes;
    } dflt[] = {{CH_ALGO_RING, 160}, {CH_ALGO_GROUPCACHE_0, 50}, {CH_ALGO_UHASHRING_KETAMA_2, 40},
                {CH_ALGO_UHASHRING_2, 160}};
    for (size_t i = 0; i < sizeof dflt / sizeof dflt[0]; i++) {
        ch_options_init(&o);
        o.algo = dflt[i].algo;
        o.vnodes = 0;
        assert_int_equal(ch_table_build(nodes, 3, &o, &t), CH_OK);
        ch_table_info info = {.size = sizeof(info)};
        assert_int_equal(ch_table_info_get(t, &info), CH_OK);
        assert_int_equal(info.vnodes, dflt[i].vnodes);
        ch_table_free(t);
    }

    ch_options_init(&o);
    o.hash = CH_HASH_COUNT_;
    assert_int_equal(ch_table_build(nodes, 3, &o, &t), CH_EINVAL);
    o.hash = (ch_hash_id)-1;
    assert_int_equal(ch_table_build(nodes, 3, &o, &t), CH_EINVAL);

    ch_options_init(&o);
    o.algo = CH_ALGO_COUNT_;
    assert_int_equal(ch_table_build(nodes, 3, &o, &t), CH_EINVAL);

    ch_options_init(&o);
    o.size = sizeof(o) + 8; /* a newer caller's struct: fields we cannot honour */
    assert_int_equal(ch_table_build(nodes, 3, &o, &t), CH_EINVAL);
    o.size = 0;
    assert_int_equal(ch_table_build(nodes, 3, &o, &t), CH_EINVAL);

    /* maglev: M must be a prime greater than N. */
    ch_options_init(&o);
    o.algo = CH_ALGO_MAGLEV;
    o.table_size = 65536;
    assert_int_equal(ch_table_build(nodes, 3, &o, &t), CH_EINVAL);
    o.table_size = 3;
    assert_int_equal(ch_table_build(nodes, 3, &o, &t), CH_EINVAL);
    o.table_size = 5;
    assert_int_equal(ch_table_build(nodes, 3, &o, &t), CH_OK);
    ch_table_free(t);
    o.table_size = 1u << 31;
    assert_int_equal(ch_table_build(nodes, 3, &o, &t), CH_ETOOBIG);

    /* ring: too many points. */
    ch_options_init(&o);
    o.vnodes = 1u << 30;
    assert_int_equal(ch_table_build(nodes, 3, &o, &t), CH_ETOOBIG);

    /* An allocator must have both functions. */
    ch_allocator half = {.alloc = NULL, .free = NULL, .ctx = NULL};
    ch_options_init(&o);
    o.allocator = &half;
    assert_int_equal(ch_table_build(nodes, 3, &o, &t), CH_EINVAL);
}

static void test_unknown_names(void **state)
{
    (void)state;
    ch_hash_id h;
    ch_algo_id a;
    assert_int_equal(ch_hash_from_name("sha1", &h), CH_EUNKNOWN);
    assert_int_equal(ch_hash_from_name("", &h), CH_EUNKNOWN);
    assert_int_equal(ch_algo_from_name("consistent", &a), CH_EUNKNOWN);
}

static void test_bad_hash_calls(void **state)
{
    (void)state;
    uint32_t v32;
    uint64_t v64;
    assert_int_equal(ch_hash32(CH_HASH_DEFAULT, NULL, 3, &v32), CH_EINVAL);
    assert_int_equal(ch_hash32(CH_HASH_DEFAULT, "abc", 3, NULL), CH_EINVAL);
    assert_int_equal(ch_hash64(CH_HASH_COUNT_, "abc", 3, &v64), CH_EINVAL);
    /* The empty key is a key. */
    assert_int_equal(ch_hash32(CH_HASH_DEFAULT, NULL, 0, &v32), CH_OK);
    for (int id = 0; id < CH_HASH_COUNT_; id++)
        assert_int_equal(ch_hash64((ch_hash_id)id, "", 0, &v64), CH_OK);
}

/* Weights exist only where the algorithm has them; jump has no walk. */
static void test_unsupported(void **state)
{
    (void)state;
    ch_node uneq[] = {{"a", 1}, {"b", 2}};
    ch_node eq[] = {{"a", 3}, {"b", 3}, {"c", 3}};
    ch_table *t;
    assert_int_equal(build_with(uneq, 2, CH_ALGO_JUMP, &t), CH_EUNSUPPORTED);
    assert_int_equal(build_with(uneq, 2, CH_ALGO_MODULO, &t), CH_EUNSUPPORTED);

    assert_int_equal(build_with(eq, 3, CH_ALGO_JUMP, &t), CH_OK);
    size_t out[3], count = 99;
    uint64_t loads[3] = {0};
    assert_int_equal(ch_replicas(t, "k", 1, 1, out, &count), CH_OK);
    assert_int_equal(count, 1);
    assert_int_equal(out[0], ch_lookup(t, "k", 1));
    assert_int_equal(ch_replicas(t, "k", 1, 2, out, &count), CH_EUNSUPPORTED);
    assert_int_equal(ch_lookup_bounded(t, "k", 1, loads, 0, 1.25, out), CH_EUNSUPPORTED);
    ch_table_free(t);
}

static void test_bad_lookup_args(void **state)
{
    (void)state;
    ch_node eq[] = {{"a", 1}, {"b", 1}, {"c", 1}};
    ch_table *t;
    assert_int_equal(build_with(eq, 3, CH_ALGO_RING, &t), CH_OK);
    size_t out[5], count = 99;
    uint64_t loads[3] = {0};
    assert_int_equal(ch_replicas(t, "k", 1, 2, NULL, &count), CH_EINVAL);
    assert_int_equal(ch_replicas(t, "k", 1, 2, out, NULL), CH_EINVAL);
    assert_int_equal(ch_replicas(t, NULL, 1, 2, out, &count), CH_EINVAL);
    assert_int_equal(ch_replicas(t, "k", 1, 0, NULL, &count), CH_OK);
    assert_int_equal(count, 0);
    assert_int_equal(ch_replicas(t, "k", 1, 5, out, &count), CH_OK);
    assert_int_equal(count, 3); /* capped at N */
    assert_int_equal(ch_lookup_bounded(t, "k", 1, NULL, 0, 1.25, out), CH_EINVAL);
    assert_int_equal(ch_lookup_bounded(t, "k", 1, loads, 0, 0.99, out), CH_EINVAL);
    assert_int_equal(ch_lookup_bounded(t, "k", 1, loads, 0, NAN, out), CH_EINVAL);
    assert_int_equal(ch_lookup_bounded(t, "k", 1, loads, 0, 1.0, NULL), CH_EINVAL);
    ch_table_info info = {.size = 0};
    assert_int_equal(ch_table_info_get(t, &info), CH_EINVAL);
    assert_int_equal(ch_table_info_get(NULL, &info), CH_EINVAL);
    ch_table_free(t);
}

/* Fail the k-th allocation for k = 0, 1, 2, ... until a build succeeds: every failing build
 * returns CH_ENOMEM and leaves no live allocation; the successful one frees everything. */
static void test_allocation_failure(void **state)
{
    (void)state;
    ch_node nodes[] = {{"alpha", 1}, {"beta", 2}, {"gamma", 0.5}, {"delta", 1}};
    ch_node whole[] = {{"alpha", 1}, {"beta", 2}, {"gamma", 3}, {"delta", 1}};
    ch_node eq[] = {{"alpha", 1}, {"beta", 1}, {"gamma", 1}, {"delta", 1}};
    for (int a = 0; a < CH_ALGO_COUNT_; a++) {
        unsigned flags = ch_algo_flags((ch_algo_id)a);
        bool weighted = (flags & CH_ALGO_F_WEIGHTED) != 0;
        const ch_node *given = !weighted ? eq : (flags & CH_ALGO_F_WHOLE_WEIGHTS) ? whole : nodes;
        long k = 0;
        for (;; k++) {
            tu_alloc al;
            tu_alloc_init(&al, k);
            ch_options o;
            ch_options_init(&o);
            o.algo = (ch_algo_id)a;
            o.allocator = &al.a;
            o.table_size = 257;
            ch_table *t = NULL;
            int rc = ch_table_build(given, 4, &o, &t);
            if (rc == CH_OK) {
                assert_int_equal(al.calls, k); /* k allocations were made, none failed */
                ch_table_free(t);
                assert_int_equal(al.live, 0);
                assert_int_equal(al.live_bytes, 0);
                break;
            }
            assert_int_equal(rc, CH_ENOMEM);
            assert_null(t);
            assert_int_equal(al.live, 0);
            assert_int_equal(al.live_bytes, 0);
            assert_true(k < 100);
        }
        assert_true(k >= 2); /* the table and its node copies at least */
    }
}

/* Builds with ch_table_build_err; the status must be want and the message exactly msg. */
static void expect_error(const ch_node *nodes, size_t n, const ch_options *o, int want,
                         const char *msg)
{
    ch_table *t = NULL;
    ch_error err = {.size = sizeof(err)};
    int rc = ch_table_build_err(nodes, n, o, &t, &err);
    if (rc != want || err.status != want || strcmp(err.message, msg) != 0)
        fail_msg("status %d (err.status %d), want %d\n  want: %s\n  got:  %s", rc, err.status,
                 want, msg, err.message);
    assert_null(t);
}

static void test_error_messages(void **state)
{
    (void)state;
    ch_node ok[] = {{"a", 1}, {"b", 1}, {"c", 1}};
    ch_node bad_w[] = {{"a", 1}, {"b", -2}};
    ch_node dup[] = {{"a", 1}, {"b", 1}, {"c", 1}, {"b", 1}};
    ch_node empty_id[] = {{"a", 1}, {"", 1}};
    ch_node uneq[] = {{"a", 1}, {"b", 2}};
    ch_node two[] = {{"a", 2}, {"b", 2}};
    ch_node heavy[] = {{"1", 1}, {"2", 300}};
    ch_options o;

    expect_error(ok, 0, NULL, CH_EEMPTY, "no nodes (n is 0)");
    expect_error(NULL, 2, NULL, CH_EINVAL, "nodes is NULL (n is 2)");
    expect_error(bad_w, 2, NULL, CH_EWEIGHT, "node 1 (\"b\"): weight -2 is not finite and > 0");
    expect_error(dup, 4, NULL, CH_EDUPID, "nodes 1 and 3 have the same id \"b\"");
    expect_error(empty_id, 2, NULL, CH_EBADID, "node 1: its id is empty");

    ch_options_init(&o);
    o.algo = CH_ALGO_MAGLEV;
    o.table_size = 3;
    expect_error(ok, 3, &o, CH_EINVAL,
                 "maglev: table_size 3 must be a prime greater than the node count, 3 (e.g. 5)");
    o.table_size = 65536;
    expect_error(ok, 3, &o, CH_EINVAL,
                 "maglev: table_size 65536 must be a prime greater than the node count, 3 "
                 "(e.g. 65537)");
    o.table_size = 1u << 31;
    expect_error(ok, 3, &o, CH_ETOOBIG,
                 "maglev: table_size 2147483648 is above 67108864 (CH_MAX_POINTS)");

    ch_options_init(&o);
    o.vnodes = 1u << 30;
    expect_error(ok, 3, &o, CH_ETOOBIG,
                 "ring: more than 67108864 points (CH_MAX_POINTS) from 3 nodes at vnodes "
                 "1073741824 with weights summing to 3: lower vnodes or the weights");
    ch_options_init(&o);
    o.algo = CH_ALGO_KETAMA;
    o.vnodes = 2;
    expect_error(ok, 3, &o, CH_EINVAL, "ketama: vnodes 2 gives no node a point: raise vnodes");
    ch_options_init(&o);
    o.algo = CH_ALGO_JUMP;
    expect_error(uneq, 2, &o, CH_EUNSUPPORTED,
                 "jump has no weights: every node must weigh the same, but node 1 (\"b\") "
                 "weighs 2 and node 0 (\"a\") 1");
    o.algo = CH_ALGO_JAVA_HASHCODE_RING;
    expect_error(two, 2, &o, CH_EUNSUPPORTED,
                 "java_hashcode_ring takes weights of 1 only: node 0 (\"a\") weighs 2");
    o.algo = CH_ALGO_HAPROXY_2;
    expect_error(heavy, 2, &o, CH_EWEIGHT,
                 "haproxy@2: node 1 (\"2\") weighs 300: HAProxy's weights are 1 to 256");

    ch_options_init(&o);
    o.size = 3;
    char want[200];
    snprintf(want, sizeof(want),
             "opt->size 3 is not a ch_options size (%zu to %zu): start from ch_options_init()",
             offsetof(ch_options, algo) + sizeof(o.algo), sizeof(ch_options));
    expect_error(ok, 3, &o, CH_EINVAL, want);
    ch_options_init(&o);
    o.hash_tag[0] = '{';
    expect_error(ok, 3, &o, CH_EINVAL,
                 "opt->hash_tag holds one NUL of two characters: give two (e.g. \"{}\") or none");
    ch_options_init(&o);
    ch_allocator half = {.alloc = NULL, .free = NULL, .ctx = NULL};
    o.allocator = &half;
    expect_error(ok, 3, &o, CH_EINVAL, "opt->allocator must set both alloc and free");

    /* An allocation that fails is told by its status; a success clears the message. */
    tu_alloc al;
    tu_alloc_init(&al, 1);
    ch_options_init(&o);
    o.allocator = &al.a;
    expect_error(ok, 3, &o, CH_ENOMEM, "out of memory");
    ch_table *t = NULL;
    ch_error err = {.size = sizeof(err), .status = 99, .message = "stale"};
    assert_int_equal(ch_table_build_err(ok, 3, NULL, &t, &err), CH_OK);
    assert_int_equal(err.status, CH_OK);
    assert_string_equal(err.message, "");
    ch_table_free(t);

    /* An older caller's smaller struct is written only within its size. */
    struct {
        ch_error e;
        char guard[8];
    } small;
    memset(&small, 0x5a, sizeof(small));
    small.e.size = offsetof(ch_error, message) + 8;
    assert_int_equal(ch_table_build_err(ok, 0, NULL, &t, &small.e), CH_EEMPTY);
    assert_int_equal(small.e.status, CH_EEMPTY);
    assert_string_equal(small.e.message, "no node");
    for (size_t i = 8; i < sizeof(small.e.message); i++)
        assert_int_equal((unsigned char)small.e.message[i], 0x5a);
    small.e.size = offsetof(ch_error, status); /* no room for anything */
    assert_int_equal(ch_table_build_err(ok, 0, NULL, &t, &small.e), CH_EEMPTY);
    assert_int_equal(ch_table_build_err(ok, 0, NULL, &t, NULL), CH_EEMPTY);

    /* The membership says the table's reason, and its own. */
    ch_member m[] = {{"a", "127.0.0.1:1", NULL, 1}, {"b", "", NULL, 1}};
    ch_membership *ms = NULL;
    err = (ch_error){.size = sizeof(err)};
    ch_options_init(&o);
    o.algo = CH_ALGO_MAGLEV;
    o.table_size = 2;
    assert_int_equal(ch_membership_build_err(m, 2, &o, NULL, &ms, &err), CH_EINVAL);
    assert_string_equal(err.message, "maglev: table_size 2 must be a prime greater than the node "
                                     "count, 2 (e.g. 3)");
    assert_int_equal(ch_membership_build_err(m, 2, NULL, NULL, &ms, &err), CH_EINVAL);
    assert_string_equal(err.message, "member 1 (\"b\"): its addr is empty");
    assert_int_equal(ch_membership_build_err(m, 1, NULL, "v\n", &ms, &err), CH_EINVAL);
    assert_string_equal(err.message, "version (2 bytes) must be 1 to 63 printable ASCII characters");
    o.algo = CH_ALGO_PYMEMCACHE_3;
    assert_int_equal(ch_membership_build_err(m, 1, &o, NULL, &ms, &err), CH_EUNSUPPORTED);
    assert_string_equal(err.message, "pymemcache@3 hashes the key with each node "
                                     "(CH_ALGO_F_KEYED): it has no key hash to route by");
    assert_null(ms);
}

/* Every refusal of every algorithm has words: a message that is not only the status's. */
static void test_every_refusal_says_why(void **state)
{
    (void)state;
    ch_node uneq[] = {{"a", 1}, {"b", 2}, {"c", 300}};
    ch_node dup[] = {{"a", 1}, {"a", 1}};
    for (int a = 0; a < CH_ALGO_COUNT_; a++) {
        const struct {
            const ch_node *nodes;
            size_t n;
            uint32_t vnodes, table_size;
        } cases[] = {{uneq, 3, 160, 65537}, {dup, 2, 160, 65537}, {uneq, 3, 1u << 30, 65537},
                     {uneq, 3, 1, 4}, {uneq, 2, 0, 2}};
        for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
            ch_options o;
            ch_options_init(&o);
            o.algo = (ch_algo_id)a;
            o.vnodes = cases[c].vnodes;
            o.table_size = cases[c].table_size;
            ch_table *t = NULL;
            ch_error err = {.size = sizeof(err)};
            int rc = ch_table_build_err(cases[c].nodes, cases[c].n, &o, &t, &err);
            if (rc == CH_OK) {
                ch_table_free(t);
                continue;
            }
            assert_int_equal(err.status, rc);
            if (strcmp(err.message, ch_strerror(rc)) == 0 || err.message[0] == '\0')
                fail_msg("%s, case %zu: status %d says only \"%s\"", ch_algo_name((ch_algo_id)a),
                         c, rc, err.message);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_nodes),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_unknown_names),
        cmocka_unit_test(test_bad_hash_calls),
        cmocka_unit_test(test_unsupported),
        cmocka_unit_test(test_bad_lookup_args),
        cmocka_unit_test(test_allocation_failure),
        cmocka_unit_test(test_error_messages),
        cmocka_unit_test(test_every_refusal_says_why),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

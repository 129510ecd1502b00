/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_errors.c — bad input gets the right status code and nothing leaks; allocation failure
 * at every allocation of every build returns CH_ENOMEM with nothing leaked.
 */
#include "testutil.h"

#include <stdarg.h>
#include <setjmp.h>
#include <math.h>
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
    ch_node eq[] = {{"alpha", 1}, {"beta", 1}, {"gamma", 1}, {"delta", 1}};
    for (int a = 0; a < CH_ALGO_COUNT_; a++) {
        bool weighted = (ch_algo_flags((ch_algo_id)a) & CH_ALGO_F_WEIGHTED) != 0;
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
            int rc = ch_table_build(weighted ? nodes : eq, 4, &o, &t);
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

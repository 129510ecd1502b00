/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_etcd_txn.c — ch__etcd_parse_txn() (src/fleet) on answers of etcd 3.4's JSON gateway as
 * it writes them: a txn whose compare held carries "succeeded": true; one whose compare failed
 * carries no "succeeded" at all (proto3 JSON leaves false out), which must read as failed,
 * while ch__etcd_parse_write() keeps reading a put's answer (no such field) as done. The
 * answers are the gateway's own bytes (curl against etcd 3.4.23), not made up from its schema.
 */
#include "testutil.h"

#include <etcd_msg.h>
#include <fleet_record.h>

#include <stdarg.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

static const char held[] =
    "{\"header\":{\"cluster_id\":\"7801232528081817440\",\"member_id\":\"13458989633860879742\","
    "\"revision\":\"3\",\"raft_term\":\"2\"},\"succeeded\":true,\"responses\":[{\"response_put\":"
    "{\"header\":{\"revision\":\"3\"}}}]}";
static const char failed[] =
    "{\"header\":{\"cluster_id\":\"7801232528081817440\",\"member_id\":\"13458989633860879742\","
    "\"revision\":\"2\",\"raft_term\":\"2\"}}";

static void txn_held(void **state)
{
    (void)state;
    int64_t rev = 0;
    bool ok = false;
    char why[200];
    assert_int_equal(ch__etcd_parse_txn(held, strlen(held), &rev, &ok, why, sizeof(why)), 0);
    assert_true(ok);
    assert_int_equal(rev, 3);
}

static void txn_failed(void **state)
{
    (void)state;
    int64_t rev = 0;
    bool ok = true;
    char why[200];
    assert_int_equal(ch__etcd_parse_txn(failed, strlen(failed), &rev, &ok, why, sizeof(why)), 0);
    assert_false(ok);
    assert_int_equal(rev, 2);
    /* The same bytes as a put's answer: done, at that revision. */
    rev = 0;
    assert_int_equal(ch__etcd_parse_write(failed, strlen(failed), &rev, why, sizeof(why)), 0);
    assert_int_equal(rev, 2);
}

static void txn_error(void **state)
{
    (void)state;
    static const char err[] = "{\"error\":\"etcdserver: duplicate key given in txn request\","
                              "\"message\":\"etcdserver: duplicate key given in txn request\","
                              "\"code\":3}";
    int64_t rev = 0;
    bool ok = true;
    char why[200];
    assert_int_equal(ch__etcd_parse_txn(err, strlen(err), &rev, &ok, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "duplicate key given"));
    assert_int_equal(ch__etcd_parse_txn("<html>", 6, &rev, &ok, why, sizeof(why)), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(txn_held),
        cmocka_unit_test(txn_failed),
        cmocka_unit_test(txn_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

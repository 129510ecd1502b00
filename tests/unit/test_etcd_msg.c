/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_etcd_msg.c — the parsers of etcd's answers (src/fleet/etcd_msg.c) on hostile nesting:
 * every one of them (range, put, txn, lease, watch, the instance record, the lost and member
 * notes) refuses JSON nested deeper than CH__JSON_MAX_DEPTH, naming the limit and the byte
 * where it is crossed, for answers of 1 MiB and 16 MiB of nesting, each parse under a watchdog;
 * brackets inside strings (escaped quotes included) are text and do not count, and an answer
 * nested exactly to the limit still parses.
 */
#include "testutil.h"

#include <etcd_msg.h>
#include <fleet_record.h>

#include <stdarg.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

/* Runs every parser of an etcd answer on json; returns how many refused it, each reason in
 * why[i]. */
enum { NPARSERS = 8 };
static int parse_all(const char *json, size_t len, char why[NPARSERS][300])
{
    int refused = 0;
    int64_t rev, id, ttl;
    bool ok;
    ch__etcd_kv *kvs = NULL;
    size_t n = 0;
    ch__etcd_watch_msg w;
    ch__fleet_record rec;
    ch__fleet_lost lost;
    ch__fleet_member mem;
    refused += ch__etcd_parse_range(json, len, &rev, &kvs, &n, why[0], 300) != 0;
    ch__etcd_kvs_free(kvs, n);
    refused += ch__etcd_parse_write(json, len, &rev, why[1], 300) != 0;
    refused += ch__etcd_parse_txn(json, len, &rev, &ok, why[2], 300) != 0;
    refused += ch__etcd_parse_lease(json, len, &id, &ttl, why[3], 300) != 0;
    if (ch__etcd_parse_watch(json, len, &w, why[4], 300) != 0)
        refused++;
    else
        ch__etcd_watch_msg_free(&w);
    refused += ch__fleet_record_parse(json, len, &rec, why[5], 300) != 0;
    refused += ch__fleet_lost_parse(json, len, &lost, why[6], 300) != 0;
    refused += ch__fleet_member_parse(json, len, &mem, why[7], 300) != 0;
    return refused;
}

static void nesting_refused(void **state)
{
    (void)state;
    static const struct {
        const char *head, *unit;
        size_t at; /* the byte that opens level 65 */
    } docs[] = {
        {"", "[", 64},
        {"", "{\"a\":", 320},
        {"{\"result\":{\"events\":", "[", 82}, /* a watch message's events, 2 levels in */
        {"[\"[[[[\\\"[[\",", "[", 75},         /* brackets in a string, an escaped quote */
    };
    static const size_t sizes[] = {1u << 20, 16u << 20};
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
            char *json = tu_repeat(docs[i].head, docs[i].unit, sizes[s]);
            char why[NPARSERS][300];
            tu_watchdog_arm(10, "an etcd answer's parse");
            int refused = parse_all(json, sizes[s], why);
            tu_watchdog_disarm();
            free(json);
            assert_int_equal(refused, NPARSERS);
            char want[300];
            snprintf(want, sizeof(want),
                     "etcd answered with JSON nested deeper than 64 levels, the limit, at byte "
                     "%zu",
                     docs[i].at);
            for (int p = 0; p < NPARSERS; p++)
                if (strcmp(why[p], want) != 0)
                    fail_msg("answer %zu of %zu bytes, parser %d:\n  want: %s\n  got:  %s", i,
                             sizes[s], p, want, why[p]);
        }
    }
}

/* Strings hold brackets freely, and 64 levels are taken: a put's answer whose header sits 64
 * levels deep beside strings of brackets parses. */
static void nesting_to_the_limit(void **state)
{
    (void)state;
    char json[4096];
    size_t len = 0;
    len += (size_t)snprintf(json + len, sizeof(json) - len,
                            "{\"x\":\"[[[[{{{{\\\"[[[[\",\"header\":{\"revision\":\"7\"},\"deep\":");
    for (int d = 0; d < 62; d++) /* levels 2..63; the innermost object is level 64 */
        json[len++] = '[';
    len += (size_t)snprintf(json + len, sizeof(json) - len, "{\"s\":\"]]]]}}}}\"}");
    for (int d = 0; d < 62; d++)
        json[len++] = ']';
    json[len++] = '}';
    int64_t rev = 0;
    char why[300] = "";
    if (ch__etcd_parse_write(json, len, &rev, why, sizeof(why)) != 0)
        fail_msg("refused: %s", why);
    assert_int_equal(rev, 7);
    /* one level more is refused */
    memmove(json + 1, json, len);
    json[0] = '[';
    json[++len] = '\0';
    assert_int_equal(ch__etcd_parse_write(json, len, &rev, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "nested deeper than 64 levels"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nesting_refused),
        cmocka_unit_test(nesting_to_the_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

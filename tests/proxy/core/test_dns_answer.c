/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_dns_answer.c — a DNS answer into a membership document (proxy/dns_answer.h) in
 * process: the same set in any order gives the same bytes (so an unchanged answer is no
 * change), duplicates go, SRV targets name their servers (an address change keeps the name),
 * the file's hash, distribution and hash_tag are carried, and the document reads back through
 * ch_config_membership_parse as the servers it was made of.
 */
#include "dns_answer.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ch_conf_pool pool_conf(const char *hash, const char *dist, const char *tag)
{
    ch_conf_pool p;
    memset(&p, 0, sizeof(p));
    p.hash = (char *)hash;
    p.distribution = (char *)dist;
    p.hash_tag = (char *)tag;
    return p;
}

static char *doc(const px_dns_server *s, size_t n, const ch_conf_pool *p)
{
    px_buf b = {0};
    assert_int_equal(px_dns_doc(s, n, p, &b), 0);
    assert_int_equal(px_buf_append(&b, "", 1), 0);
    return b.p;
}

/* A records: servers named by address:port, sorted, duplicates dropped, any order the same. */
static void test_a_records(void **state)
{
    (void)state;
    ch_conf_pool p = pool_conf("fnv1a_64", "ketama", NULL);
    px_dns_server a[] = {{NULL, "127.0.0.3", 6379}, {NULL, "127.0.0.1", 6379},
                         {NULL, "127.0.0.2", 6379}, {NULL, "127.0.0.1", 6379},
                         {NULL, "::1", 6379}};
    px_dns_server b[] = {{NULL, "::1", 6379}, {NULL, "127.0.0.2", 6379},
                         {NULL, "127.0.0.1", 6379}, {NULL, "127.0.0.3", 6379}};
    char *x = doc(a, 5, &p), *y = doc(b, 4, &p);
    assert_string_equal(x, "{\"servers\": [\"127.0.0.1:6379:1\", \"127.0.0.2:6379:1\", "
                           "\"127.0.0.3:6379:1\", \"[::1]:6379:1\"], \"hash\": \"fnv1a_64\", "
                           "\"distribution\": \"ketama\"}");
    assert_string_equal(x, y);
    ch_config *cfg = NULL;
    int64_t epoch = -1;
    ch_config_error err;
    char buf[700];
    if (ch_config_membership_parse("p", "dns://x:6379", x, strlen(x), &cfg, &epoch, &err) != 0)
        fail_msg("%s", ch_config_error_str(&err, buf, sizeof(buf)));
    assert_int_equal(epoch, 0);
    assert_int_equal(cfg->pools[0].nservers, 4);
    assert_string_equal(cfg->pools[0].servers[3].addr, "[::1]:6379");
    ch_config_free(cfg);
    free(x);
    free(y);
}

/* SRV records: the target names the server (its trailing dot dropped), so a target whose
 * address changed keeps its name; one target with two addresses is one server; one target on
 * two ports is two servers, "target:port". */
static void test_srv_records(void **state)
{
    (void)state;
    ch_conf_pool p = pool_conf("murmur", "ketama", "{}");
    px_dns_server a[] = {{"redis-1.cache.", "10.0.0.7", 6379},
                         {"redis-0.cache.", "10.0.0.5", 6379},
                         {"redis-0.cache.", "10.0.0.9", 6379},
                         {"redis-2.cache", "10.0.0.6", 6379},
                         {"redis-2.cache", "10.0.0.6", 6380}};
    char *x = doc(a, 5, &p);
    assert_string_equal(x, "{\"servers\": [\"10.0.0.5:6379:1 redis-0.cache\", "
                           "\"10.0.0.7:6379:1 redis-1.cache\", "
                           "\"10.0.0.6:6379:1 redis-2.cache:6379\", "
                           "\"10.0.0.6:6380:1 redis-2.cache:6380\"], \"hash\": \"murmur\", "
                           "\"distribution\": \"ketama\", \"hash_tag\": \"{}\"}");
    ch_config *cfg = NULL;
    int64_t epoch = -1;
    ch_config_error err;
    char buf[700];
    if (ch_config_membership_parse("p", "dns+srv://x", x, strlen(x), &cfg, &epoch, &err) != 0)
        fail_msg("%s", ch_config_error_str(&err, buf, sizeof(buf)));
    assert_int_equal(cfg->pools[0].nservers, 4);
    assert_string_equal(cfg->pools[0].servers[0].id, "redis-0.cache");
    assert_string_equal(cfg->pools[0].hash, "murmur");
    assert_string_equal(cfg->pools[0].hash_tag, "{}");
    ch_config_free(cfg);

    /* redis-1 rescheduled: same name, a new address; its placement identity is unchanged */
    px_dns_server b[] = {{"redis-0.cache", "10.0.0.5", 6379}, {"redis-1.cache", "10.0.0.8", 6379}};
    char *y = doc(b, 2, &p);
    assert_string_equal(y, "{\"servers\": [\"10.0.0.5:6379:1 redis-0.cache\", "
                           "\"10.0.0.8:6379:1 redis-1.cache\"], \"hash\": \"murmur\", "
                           "\"distribution\": \"ketama\", \"hash_tag\": \"{}\"}");
    free(x);
    free(y);
}

/* Every permutation of a small answer gives the same bytes. */
static void test_any_order(void **state)
{
    (void)state;
    ch_conf_pool p = pool_conf("fnv1a_64", "ketama", NULL);
    px_dns_server s[] = {{"c", "127.0.0.1", 3}, {"a", "127.0.0.1", 1}, {"b", "127.0.0.1", 2},
                         {"a", "127.0.0.1", 1}};
    char *want = doc(s, 4, &p);
    unsigned seed = 7;
    for (int round = 0; round < 200; round++) {
        for (size_t i = 3; i > 0; i--) {
            seed = seed * 1103515245u + 12345u;
            size_t j = (seed >> 16) % (i + 1);
            px_dns_server t = s[i];
            s[i] = s[j];
            s[j] = t;
        }
        char *got = doc(s, 4, &p);
        assert_string_equal(got, want);
        free(got);
    }
    free(want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_records),
        cmocka_unit_test(test_srv_records),
        cmocka_unit_test(test_any_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

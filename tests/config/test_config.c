/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_config.c — the twemproxy YAML loader: valid files with every key, defaults, several pools,
 * unix sockets and names; every kind of error with its exact "file:line:column: message"
 * (expected values read off the fixtures by hand); unreadable, huge, garbage and mutated input;
 * and the string parsers for server entries, listen addresses and integers.
 * Run under ASan, which also fails the test on any leak on any of these paths.
 */
#define _POSIX_C_SOURCE 200809L

#include "testutil.h"
#include "config/config_internal.h"

#include <chash_config.h>

#include <stdarg.h>
#include <setjmp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <unistd.h>
#include <cmocka.h>

#define FIX(name) CH_CONFIG_FIXTURES "/" name

/* ---- helpers ------------------------------------------------------------------------------- */

static ch_config *load_ok(const char *path)
{
    ch_config *cfg = NULL;
    ch_config_error err;
    int rc = ch_config_load(path, &cfg, &err);
    if (rc != CH_OK) {
        char buf[700];
        fail_msg("%s: status %d: %s", path, rc, ch_config_error_str(&err, buf, sizeof buf));
    }
    assert_non_null(cfg);
    return cfg;
}

/* Loads path, which must fail with status and exactly "path:line:column: msg". *out must stay
 * untouched. Returns false (after printing both lines) on a mismatch, so a table test can report
 * every mismatch before failing. */
static bool check_error(const char *path, int status, unsigned line, unsigned col, const char *msg)
{
    ch_config *sentinel = (ch_config *)&sentinel, *cfg = sentinel;
    ch_config_error err;
    memset(&err, 0x5a, sizeof err);
    int rc = ch_config_load(path, &cfg, &err);
    char got[700], want[700];
    snprintf(want, sizeof want, "%s:%u:%u: %s", path, line, col, msg);
    ch_config_error_str(&err, got, sizeof got);
    bool ok = rc == status && cfg == sentinel && strcmp(got, want) == 0 && err.line == line &&
              err.column == col && strcmp(err.file, path) == 0;
    if (!ok)
        print_error("mismatch (status %d, want %d)\n  want: %s\n  got:  %s\n", rc, status, want,
                    got);
    if (rc == CH_OK && cfg != sentinel)
        ch_config_free(cfg);
    return ok;
}

/* Writes len bytes to a fresh file in the working directory; the path goes to path[64]. */
static void write_tmp(char path[64], const void *data, size_t len)
{
    static unsigned counter;
    snprintf(path, 64, "config_test_%ld_%u.yml", (long)getpid(), counter++);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static const ch_conf_server *server(const ch_conf_pool *p, size_t i)
{
    assert_true(i < p->nservers);
    return &p->servers[i];
}

/* ---- valid files --------------------------------------------------------------------------- */

static void test_all_keys(void **state)
{
    (void)state;
    ch_config *cfg = load_ok(FIX("valid_all_keys.yml"));
    assert_string_equal(cfg->path, FIX("valid_all_keys.yml"));
    assert_int_equal(cfg->npools, 1);
    const ch_conf_pool *p = ch_config_pool(cfg, "alpha");
    assert_ptr_equal(p, ch_config_pool(cfg, NULL));
    assert_string_equal(p->name, "alpha");
    assert_int_equal(p->line, 2);
    assert_string_equal(p->listen, "127.0.0.1:22121");
    assert_string_equal(p->listen_host, "127.0.0.1");
    assert_int_equal(p->listen_port, 22121);
    assert_int_equal(p->listen_perm, -1);
    assert_string_equal(p->hash, "murmur");
    assert_string_equal(p->hash_tag, "{}");
    assert_string_equal(p->distribution, "modula");
    assert_int_equal(p->timeout_ms, 400);
    assert_int_equal(p->backlog, 1024);
    assert_int_equal(p->client_connections, 100);
    assert_true(p->redis);
    assert_true(p->tcpkeepalive);
    assert_true(p->reuseport);
    assert_string_equal(p->redis_auth, "s3cret");
    assert_null(p->client_auth); /* clients AUTH with redis_auth, as in twemproxy */
    assert_int_equal(p->redis_db, 3);
    assert_true(p->preconnect);
    assert_true(p->auto_eject_hosts);
    assert_int_equal(p->server_connections, 2);
    assert_int_equal(p->server_retry_timeout_ms, 2000);
    assert_int_equal(p->server_failure_limit, 3);

    assert_int_equal(p->nservers, 3);
    const ch_conf_server *s = server(p, 0);
    assert_string_equal(s->addr, "127.0.0.1:6379");
    assert_string_equal(s->host, "127.0.0.1");
    assert_int_equal(s->port, 6379);
    assert_true(s->weight == 1.0);
    assert_string_equal(s->name, "server1");
    assert_int_equal(s->line, 21);
    s = server(p, 1);
    assert_string_equal(s->addr, "127.0.0.1:6380");
    assert_true(s->weight == 2.0);
    assert_string_equal(s->name, "server2");
    assert_int_equal(s->line, 22);
    s = server(p, 2);
    assert_string_equal(s->addr, "cache-3.example.com:6381");
    assert_string_equal(s->host, "cache-3.example.com");
    assert_int_equal(s->port, 6381);
    assert_true(s->weight == 10.0);
    assert_string_equal(s->name, "server3");
    assert_int_equal(s->line, 23);
    ch_config_free(cfg);
}

/* A pool with only servers gets twemproxy's defaults for everything else. */
static void test_defaults(void **state)
{
    (void)state;
    ch_config *cfg = load_ok(FIX("valid_defaults.yml"));
    const ch_conf_pool *p = ch_config_pool(cfg, NULL);
    assert_non_null(p);
    assert_string_equal(p->name, "cache");
    assert_null(p->listen);
    assert_null(p->listen_host);
    assert_int_equal(p->listen_port, 0);
    assert_int_equal(p->listen_perm, -1);
    assert_string_equal(p->hash, "fnv1a_64");
    assert_null(p->hash_tag);
    assert_string_equal(p->distribution, "ketama");
    assert_int_equal(p->timeout_ms, -1);
    assert_int_equal(p->backlog, 512);
    assert_int_equal(p->client_connections, 0);
    assert_false(p->redis);
    assert_false(p->tcpkeepalive);
    assert_false(p->reuseport);
    assert_null(p->redis_auth);
    assert_null(p->client_auth);
    assert_int_equal(p->redis_db, 0);
    assert_false(p->preconnect);
    assert_false(p->auto_eject_hosts);
    assert_int_equal(p->server_connections, 1);
    assert_int_equal(p->server_retry_timeout_ms, 30000);
    assert_int_equal(p->server_failure_limit, 2);
    assert_int_equal(p->nservers, 1);
    assert_string_equal(server(p, 0)->addr, "127.0.0.1:11211");
    assert_null(server(p, 0)->name);
    assert_int_equal(server(p, 0)->line, 3);
    ch_config_free(cfg);
}

/* twemproxy's README example: five pools, kept in file order. */
static void test_readme_pools(void **state)
{
    (void)state;
    ch_config *cfg = load_ok(FIX("valid_readme.yml"));
    const char *names[] = {"alpha", "beta", "gamma", "delta", "omega"};
    const unsigned lines[] = {1, 12, 26, 40, 60};
    const size_t nservers[] = {1, 4, 2, 10, 2};
    assert_int_equal(cfg->npools, 5);
    for (size_t i = 0; i < 5; i++) {
        assert_string_equal(cfg->pools[i].name, names[i]);
        assert_int_equal(cfg->pools[i].line, lines[i]);
        assert_int_equal(cfg->pools[i].nservers, nservers[i]);
        assert_ptr_equal(ch_config_pool(cfg, names[i]), &cfg->pools[i]);
    }
    assert_null(ch_config_pool(cfg, NULL)); /* more than one pool */
    assert_null(ch_config_pool(cfg, "epsilon"));
    assert_null(ch_config_pool(NULL, "alpha"));
    assert_null(ch_config_pool(NULL, NULL));

    const ch_conf_pool *beta = ch_config_pool(cfg, "beta");
    assert_string_equal(beta->hash_tag, "{}");
    assert_int_equal(beta->timeout_ms, 400);
    assert_true(beta->redis);
    assert_false(beta->auto_eject_hosts);
    assert_string_equal(server(beta, 3)->name, "server4");
    assert_string_equal(server(beta, 3)->addr, "127.0.0.1:6383");

    const ch_conf_pool *alpha = ch_config_pool(cfg, "alpha");
    assert_int_equal(alpha->server_failure_limit, 1);
    assert_int_equal(alpha->server_retry_timeout_ms, 2000);
    assert_int_equal(alpha->timeout_ms, -1);

    const ch_conf_pool *gamma = ch_config_pool(cfg, "gamma");
    assert_int_equal(gamma->backlog, 1024);
    assert_true(gamma->preconnect);
    assert_false(gamma->redis);

    const ch_conf_pool *delta = ch_config_pool(cfg, "delta");
    assert_string_equal(server(delta, 9)->addr, "127.0.0.1:11223");
    assert_int_equal(server(delta, 9)->line, 58);

    const ch_conf_pool *omega = ch_config_pool(cfg, "omega");
    assert_string_equal(omega->listen, "/tmp/gamma 0666");
    assert_string_equal(omega->listen_host, "/tmp/gamma");
    assert_int_equal(omega->listen_port, 0);
    assert_int_equal(omega->listen_perm, 0666);
    assert_string_equal(omega->hash, "hsieh");
    assert_true(server(omega, 0)->weight == 100000.0);
    ch_config_free(cfg);
}

static void test_sockets_and_names(void **state)
{
    (void)state;
    ch_config *cfg = load_ok(FIX("valid_sockets.yml"));
    const ch_conf_pool *p = ch_config_pool(cfg, NULL);
    assert_non_null(p);
    assert_string_equal(p->listen_host, "/var/run/nutcracker.sock");
    assert_int_equal(p->listen_perm, -1);
    assert_string_equal(p->hash, "xxh3");       /* libchash registry names */
    assert_string_equal(p->distribution, "ring");
    assert_int_equal(p->nservers, 7);

    const struct {
        const char *addr, *host;
        int port;
        double weight;
        const char *name;
    } want[] = {
        {"/var/run/redis-0.sock", "/var/run/redis-0.sock", 0, 1, NULL},
        {"/var/run/redis-1.sock", "/var/run/redis-1.sock", 0, 2, "r1"},
        {"[::1]:6379", "::1", 6379, 1, "v6"},
        {"::1:6380", "::1", 6380, 1, NULL},
        {"localhost:6381", "localhost", 6381, 3, NULL},
        {"10.0.0.1:6379", "10.0.0.1", 6379, 1, "same-addr-a"},
        {"10.0.0.1:6379", "10.0.0.1", 6379, 1, "same-addr-b"},
    };
    for (size_t i = 0; i < 7; i++) {
        const ch_conf_server *s = server(p, i);
        assert_string_equal(s->addr, want[i].addr);
        assert_string_equal(s->host, want[i].host);
        assert_int_equal(s->port, want[i].port);
        assert_true(s->weight == want[i].weight);
        if (want[i].name == NULL)
            assert_null(s->name);
        else
            assert_string_equal(s->name, want[i].name);
        assert_int_equal(s->line, 7 + i);
    }
    ch_config_free(cfg);
}

/* What twemproxy accepts: decimal with leading zeros, quoted numbers and booleans, and a named
 * server whose name is another server's address when that one's twemproxy name differs (port
 * 11211 servers are named by host alone). */
static void test_twemproxy_quirks(void **state)
{
    (void)state;
    ch_config *cfg = load_ok(FIX("valid_quirks.yml"));
    const ch_conf_pool *p = ch_config_pool(cfg, "alpha");
    assert_non_null(p);
    assert_string_equal(p->listen_host, "::1");
    assert_int_equal(p->listen_port, 22121);
    assert_int_equal(p->timeout_ms, 400);
    assert_int_equal(p->backlog, 1024);
    assert_true(p->redis);
    assert_int_equal(p->nservers, 3);
    assert_string_equal(server(p, 2)->name, "10.0.0.1:11211");
    ch_config_free(cfg);
}

/* ---- errors -------------------------------------------------------------------------------- */

static const struct {
    const char *file;
    unsigned line, col;
    const char *msg;
} error_cases[] = {
    {"err_unknown_key.yml", 3, 3, "unknown key \"hashh\" in pool \"alpha\""},
    {"err_int.yml", 2, 12, "expected an integer for \"timeout\", got \"abc\""},
    {"err_int_negative.yml", 4, 12, "expected an integer >= 0 for \"backlog\", got \"-1\""},
    {"err_int_range.yml", 2, 13,
     "expected an integer <= 2147483647 for \"redis_db\", got \"2147483648\""},
    {"err_server_connections_zero.yml", 2, 23,
     "expected an integer >= 1 for \"server_connections\", got \"0\""},
    {"err_bool.yml", 2, 10, "expected true or false for \"redis\", got \"yes\""},
    {"err_type_sequence.yml", 3, 5,
     "expected \"host:port\" or \"/path/to/socket [permissions]\" for \"listen\", got a sequence"},
    {"err_type_mapping.yml", 3, 5, "expected an integer for \"timeout\", got a mapping"},
    {"err_empty_value.yml", 2, 3, "expected a hash name for \"hash\", got an empty value"},
    {"err_hash.yml", 2, 9,
     "unknown hash \"sha1\"; expected one of: fnv1a32_fmix fnv1a32 murmur3_32 xxh3 md5 "
     "one_at_a_time crc16 crc32 crc32a fnv1_64 fnv1a_64 fnv1_32 fnv1a_32 hsieh murmur jenkins "
     "java_hashcode md5_64be sdbm fnv1a32_fmix_utf16 murmur2_64 sha256_64be"},
    {"err_distribution.yml", 2, 17,
     "unknown distribution \"consistent\"; expected one of: modulo ring rendezvous jump maglev "
     "ketama modula random libmemcached_ketama libmemcached_ketama_spy java_hashcode_ring "
     "md5_64_ring dalli@3 uhashring@2 uhashring_ketama@2 groupcache@0 guava@31 "
     "spymemcached@2 spymemcached_libmemcached@2 pecl_memcache@4 hashring@3 "
     "hashring_hash_ring@3 nginx@1 haproxy@2 pymemcache@3 predis@1 predis_ketama@1 "
     "phpredis_array@5 phpredis_array_range@5 redis_rb@4 redis_rb@5 ... and 9 more "
     "(`chash algorithms` lists them all)"},
    {"err_hash_tag.yml", 2, 13, "expected 2 characters for \"hash_tag\" (e.g. \"{}\"), got \"{\""},
    {"err_flow_mapping.yml", 2, 13,
     "flow mappings {...} are not allowed (twemproxy rejects them); quote a value that starts "
     "with '{', e.g. hash_tag: \"{}\""},
    {"err_flow_sequence.yml", 2, 12,
     "flow sequences [...] are not allowed (twemproxy rejects them); write one \"- item\" per "
     "line, or quote a value that starts with '['"},
    {"err_server_format.yml", 4, 7,
     "invalid server \"127.0.0.1:6380\" in pool \"alpha\": expected \"host:port:weight [name]\" "
     "or \"/path/to/socket:weight [name]\""},
    {"err_weight_zero.yml", 3, 7,
     "invalid server \"127.0.0.1:6379:0\" in pool \"alpha\": the weight \"0\" is not an integer "
     "> 0"},
    {"err_weight_float.yml", 3, 7,
     "invalid server \"127.0.0.1:6379:1.5 cache-a\" in pool \"alpha\": the weight \"1.5\" is not "
     "an integer > 0"},
    {"err_port.yml", 3, 7,
     "invalid server \"cache-1.example.com:70000:1\" in pool \"alpha\": the port \"70000\" is not "
     "an integer in 1..65535"},
    {"err_host.yml", 3, 7,
     "invalid server \"cache!1:6379:1\" in pool \"alpha\": the host \"cache!1\" is not a hostname, "
     "IPv4 or IPv6 address"},
    {"err_server_name.yml", 3, 7,
     "invalid server \"127.0.0.1:6379:1 two words\" in pool \"alpha\": only one name may follow "
     "the weight, after a single space"},
    {"err_server_empty.yml", 3, 6,
     "expected a server \"host:port:weight [name]\" in pool \"alpha\", got an empty value"},
    {"err_server_mapping.yml", 3, 7,
     "expected a server \"host:port:weight [name]\" in pool \"alpha\", got a mapping"},
    {"err_servers_scalar.yml", 2, 12,
     "expected a sequence of servers for \"servers\", got \"127.0.0.1:6379:1\""},
    {"err_dup_server_name.yml", 6, 7,
     "duplicate server name \"server1\" in pool \"beta\" (first on line 4)"},
    {"err_dup_server_addr.yml", 5, 7,
     "duplicate server \"10.0.0.1:6379\" in pool \"alpha\" (first on line 3)"},
    {"err_dup_server_11211.yml", 4, 7,
     "server name \"10.0.0.1\" in pool \"gamma\" is the name twemproxy gives the unnamed server on "
     "line 3"},
    {"err_dup_server_mixed.yml", 4, 7,
     "unnamed server \"10.0.0.1:6379\" in pool \"delta\" is named \"10.0.0.1:6379\" by twemproxy, "
     "as is the server on line 3"},
    {"err_dup_key.yml", 5, 3, "duplicate key \"timeout\" in pool \"alpha\" (first on line 2)"},
    {"err_dup_pool.yml", 7, 1, "duplicate pool \"alpha\" (first on line 1)"},
    {"err_dup_listen.yml", 6, 11,
     "pools \"alpha\" and \"beta\" have the same listen address \"127.0.0.1:22121\""},
    {"err_listen.yml", 2, 11,
     "invalid listen address \"127.0.0.1\" in pool \"alpha\": expected \"host:port\" or "
     "\"/path/to/socket [permissions]\""},
    {"err_listen_brackets.yml", 2, 11,
     "invalid listen address \"[::1]:22121\" in pool \"alpha\": twemproxy takes no brackets "
     "here; write the IPv6 address bare, e.g. \"::1:22121\""},
    {"err_listen_perm.yml", 2, 11,
     "invalid listen address \"/tmp/omega.sock 0999\" in pool \"omega\": the permissions "
     "\"0999\" are not an octal mode <= 0777"},
    {"err_no_servers.yml", 1, 1, "pool \"alpha\" has no servers"},
    {"err_redis_auth.yml", 3, 3,
     "\"redis_auth\" is only valid in a redis pool (redis: true), as in twemproxy"},
    {"err_nul.yml", 3, 15, "the value of \"redis_auth\" contains a NUL character"},
    {"err_pool_scalar.yml", 1, 8,
     "expected a mapping of settings for pool \"alpha\", got \"127.0.0.1:6379:1\""},
    {"err_pool_empty_value.yml", 1, 1,
     "expected a mapping of settings for pool \"alpha\", got an empty value"},
    {"err_pool_name_empty.yml", 1, 1, "a pool name is empty"},
    {"err_pool_name_sequence.yml", 1, 3, "expected a pool name, got a sequence"},
    {"err_top_sequence.yml", 1, 1, "expected a mapping of pool names to pools, got a sequence"},
    {"err_syntax_indent.yml", 3, 2,
     "YAML syntax error: did not find expected key (while parsing a block mapping at line 1, "
     "column 1)"},
    {"err_syntax_quote.yml", 5, 1,
     "YAML syntax error: found unexpected end of stream (while scanning a quoted scalar at line "
     "2, column 11)"},
    {"err_document_marker.yml", 1, 1,
     "the document marker \"---\" is not allowed (twemproxy rejects it)"},
    {"err_two_documents.yml", 4, 1, "a second YAML document: a config holds exactly one"},
    {"err_anchor.yml", 2, 12, "anchors (&s) are not allowed in a config (twemproxy rejects them)"},
    {"err_alias.yml", 2, 12, "aliases (*s) are not allowed in a config (twemproxy rejects them)"},
    {"err_tag.yml", 2, 12,
     "tags (tag:yaml.org,2002:int) are not allowed in a config (twemproxy rejects them)"},
    {"err_empty.yml", 1, 1, "no pools: the file holds no YAML document"},
    {"err_comments_only.yml", 2, 1, "no pools: the file holds no YAML document"},
    {"err_version.yml", 2, 12,
     "expected a version of printable characters without spaces, got \"two words\""},
    {"err_failover_depth.yml", 4, 19,
     "expected an integer >= 1 for \"failover_depth\", got \"0\""},
    {"err_client_auth.yml", 5, 3, "\"client_auth\" is only valid in a redis pool (redis: true)"},
    {"err_client_auth_first.yml", 2, 3,
     "\"client_auth\" is only valid in a redis pool (redis: true)"},
    {"err_max_request_bytes.yml", 4, 22,
     "expected an integer >= 1 for \"max_request_bytes\", got \"0\""},
    {"err_bounded_load_factor.yml", 4, 24,
     "expected a number >= 1 (or 0: off) for \"bounded_load_factor\", got \"0.5\""},
    {"err_gutter_unknown.yml", 4, 11,
     "pool \"cache\": its gutter pool \"spare\" is not a pool of this file"},
    {"err_gutter_self.yml", 4, 11, "pool \"cache\": its gutter pool \"cache\" is the pool itself"},
    {"err_gutter_protocol.yml", 6, 13,
     "pool \"cache\": its gutter pool \"spare\" speaks another protocol (redis: true and false "
     "do not mix)"},
    {"err_gutter_chain.yml", 3, 11,
     "pool \"cache\": its gutter pool \"spare\" has a gutter of its own (a gutter pool cannot "
     "have one)"},
    {"err_gutter_ttl_alone.yml", 5, 3, "\"gutter_ttl\" needs \"gutter\""},
    {"err_gutter_ttl_zero.yml", 4, 15, "expected an integer >= 1 for \"gutter_ttl\", got \"0\""},
};

/* chash's own keys, the presence of twemproxy's, twemproxy's server order, and what routing
 * takes from a pool (expected values read off the fixture by hand). */
static void test_chash_keys(void **state)
{
    (void)state;
    ch_config *cfg = load_ok(FIX("valid_chash_keys.yml"));
    const ch_conf_pool *p = ch_config_pool(cfg, "cache");
    assert_non_null(p);
    assert_string_equal(p->version, "fleet-2026-11-29.1");
    assert_int_equal(p->failover_depth, 3);
    assert_int_equal(p->server_failure_window_ms, 4000);
    assert_int_equal(p->server_retry_max_ms, 30000);
    assert_int_equal(p->max_request_bytes, 1048576);
    assert_int_equal(p->max_client_buffer_bytes, INT_MAX);
    assert_true(p->bounded_load_factor == 1.25);
    assert_int_equal(p->readmit_ramp_ms, 30000);
    assert_int_equal(ch_config_pool(cfg, "plain")->readmit_ramp_ms, 0); /* off by default */
    assert_null(p->client_auth);
    assert_true(p->has_auto_eject_hosts && p->has_server_failure_limit &&
                p->has_server_retry_timeout);

    /* twemproxy's names: srv-3, 10.0.0.1 (port 11211), b, /tmp/r.sock: (socket), alpha;
     * sorted shorter first, then bytewise: b, alpha, srv-3, 10.0.0.1, /tmp/r.sock:. */
    static const char *const ids[] = {"srv-3", "10.0.0.1", "b", "/tmp/r.sock:", "alpha"};
    static const size_t order[] = {2, 4, 0, 1, 3};
    for (size_t i = 0; i < 5; i++) {
        assert_string_equal(server(p, i)->id, ids[i]);
        assert_int_equal(p->order[i], order[i]);
    }

    ch_options opt;
    assert_int_equal(ch_config_options(p, &opt), CH_OK);
    assert_int_equal(opt.algo, CH_ALGO_KETAMA);
    assert_int_equal(opt.hash, CH_HASH_TW_MURMUR);
    assert_memory_equal(opt.hash_tag, "{}", 2);

    ch_member m[5];
    ch_config_members(p, CH_ALGO_KETAMA, m);
    for (size_t i = 0; i < 5; i++) {
        assert_string_equal(m[i].id, ids[order[i]]);
        assert_string_equal(m[i].addr, server(p, order[i])->addr);
    }
    ch_config_members(p, CH_ALGO_LIBMEMCACHED_KETAMA, m); /* file order, ids host:port */
    assert_string_equal(m[0].id, "10.0.0.3:6379");
    assert_string_equal(m[1].id, "10.0.0.1:11211");
    ch_config_members(p, CH_ALGO_RING, m); /* file order, twemproxy's names */
    assert_string_equal(m[0].id, "srv-3");
    assert_true(m[1].weight == 2.0);

    ch_health_options h;
    ch_config_health(p, &h);
    assert_false(h.eject);
    assert_int_equal(h.failure_limit, 5);
    assert_int_equal(h.retry_min_ms, 2000);
    assert_int_equal(h.retry_max_ms, 30000);
    assert_int_equal(h.failure_window_ms, 4000);

    /* A pool without those keys: chash's defaults, not twemproxy's (2 failures, 30 s). */
    const ch_conf_pool *plain = ch_config_pool(cfg, "plain");
    assert_false(plain->has_auto_eject_hosts || plain->has_server_failure_limit ||
                 plain->has_server_retry_timeout);
    assert_null(plain->version);
    assert_int_equal(plain->failover_depth, 2);
    assert_true(plain->bounded_load_factor == 0); /* off */
    assert_int_equal(plain->max_request_bytes, 64 * 1024 * 1024);
    assert_int_equal(plain->max_client_buffer_bytes, 64 * 1024 * 1024);
    assert_int_equal(plain->max_request_bytes, CH_CONF_DEFAULT_MAX_REQUEST_BYTES);
    assert_int_equal(plain->max_client_buffer_bytes, CH_CONF_DEFAULT_MAX_CLIENT_BUFFER_BYTES);
    ch_config_health(plain, &h);
    ch_health_options d;
    ch_health_options_init(&d);
    assert_true(h.eject == d.eject && h.eject);
    assert_int_equal(h.failure_limit, d.failure_limit);
    assert_int_equal(h.retry_min_ms, d.retry_min_ms);
    assert_int_equal(h.retry_max_ms, d.retry_max_ms);
    ch_config_free(cfg);
}

/* "gutter" and "gutter_ttl": the pool named, the TTL given or its default, none elsewhere. */
static void test_gutter(void **state)
{
    (void)state;
    ch_config *cfg = load_ok(FIX("valid_gutter.yml"));
    const ch_conf_pool *p = ch_config_pool(cfg, "cache");
    assert_string_equal(p->gutter_pool, "spare");
    assert_int_equal(p->gutter_ttl_ms, 2500);
    assert_int_equal(p->gutter_line, 4);
    assert_int_equal(p->gutter_column, 11);
    const ch_conf_pool *o = ch_config_pool(cfg, "other");
    assert_string_equal(o->gutter_pool, "spare");
    assert_int_equal(o->gutter_ttl_ms, CH_CONF_DEFAULT_GUTTER_TTL);
    assert_int_equal(CH_CONF_DEFAULT_GUTTER_TTL, 10000); /* docs/PROXY.md: 10 s */
    const ch_conf_pool *g = ch_config_pool(cfg, "spare");
    assert_null(g->gutter_pool);
    ch_config_free(cfg);
}

/* chash's client password beside twemproxy's redis_auth, which stays the servers' password. */
static void test_client_auth(void **state)
{
    (void)state;
    ch_config *cfg = load_ok(FIX("valid_client_auth.yml"));
    const ch_conf_pool *p = ch_config_pool(cfg, NULL);
    assert_non_null(p);
    assert_true(p->redis);
    assert_string_equal(p->redis_auth, "backend-secret");
    assert_string_equal(p->client_auth, "client secret #1");
    ch_config_free(cfg);
}

static void test_error_fixtures(void **state)
{
    (void)state;
    size_t bad = 0;
    for (size_t i = 0; i < sizeof error_cases / sizeof error_cases[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", CH_CONFIG_FIXTURES, error_cases[i].file);
        if (!check_error(path, CH_EINVAL, error_cases[i].line, error_cases[i].col,
                         error_cases[i].msg))
            bad++;
    }
    assert_int_equal(bad, 0);
}

/* Reader errors come as a byte offset; they get a line and column too. */
static void test_bad_bytes(void **state)
{
    (void)state;
    char path[64];
    static const char utf8[] = "alpha:\n  servers:\n    - 127.0.0.1:6379:1 caf\xff\n";
    write_tmp(path, utf8, sizeof utf8 - 1);
    assert_true(check_error(path, CH_EINVAL, 3, 27,
                            "invalid input: invalid leading UTF-8 octet (0xFF)"));
    remove(path);

    static const char ctrl[] = "alpha:\n  servers:\n    - 127.0.0.1:6379:1\x01\n";
    write_tmp(path, ctrl, sizeof ctrl - 1);
    assert_true(check_error(path, CH_EINVAL, 3, 23,
                            "invalid input: control characters are not allowed (0x01)"));
    remove(path);

    /* A tab inside a server entry (in quotes, so YAML keeps it). */
    static const char tab[] = "alpha:\n  servers:\n    - \"127.0.0.1:6379:1\\tx\"\n";
    write_tmp(path, tab, sizeof tab - 1);
    assert_true(check_error(path, CH_EINVAL, 3, 7,
                            "invalid server \"127.0.0.1:6379:1?x\" in pool \"alpha\": it contains "
                            "a control character (tab, newline, ...)"));
    remove(path);
}

static void test_unreadable(void **state)
{
    (void)state;
    assert_true(check_error(FIX("no_such_file.yml"), CH_EINVAL, 0, 0,
                            "No such file or directory"));
    assert_true(check_error(CH_CONFIG_FIXTURES, CH_EINVAL, 0, 0, "Is a directory"));

    /* A path longer than the error's file field is cut, not overflowed. */
    char longpath[400];
    memset(longpath, 'x', sizeof longpath - 1);
    longpath[0] = '/';
    longpath[sizeof longpath - 1] = '\0';
    ch_config *cfg = NULL;
    ch_config_error err;
    assert_int_equal(ch_config_load(longpath, &cfg, &err), CH_EINVAL);
    assert_null(cfg);
    assert_int_equal(strlen(err.file), sizeof err.file - 1);
    assert_memory_equal(err.file, longpath, sizeof err.file - 1);
    assert_int_equal(err.line, 0);
    assert_string_equal(err.message, "File name too long");
}

static void test_bad_arguments(void **state)
{
    (void)state;
    ch_config *cfg = NULL;
    ch_config_error err;
    assert_int_equal(ch_config_load(NULL, &cfg, &err), CH_EINVAL);
    assert_string_equal(err.message, "invalid argument");
    assert_int_equal(ch_config_load(FIX("valid_defaults.yml"), NULL, &err), CH_EINVAL);
    assert_string_equal(err.file, FIX("valid_defaults.yml"));
    /* err may be NULL, on success and on failure. */
    assert_int_equal(ch_config_load(FIX("err_int.yml"), &cfg, NULL), CH_EINVAL);
    assert_null(cfg);
    assert_int_equal(ch_config_load(FIX("valid_defaults.yml"), &cfg, NULL), CH_OK);
    ch_config_free(cfg);
    ch_config_free(NULL);
}

static void test_error_str(void **state)
{
    (void)state;
    ch_config_error err = {.file = "pools.yml", .line = 7, .column = 5};
    snprintf(err.message, sizeof err.message, "unknown key \"hashh\" in pool \"alpha\"");
    char buf[128];
    assert_ptr_equal(ch_config_error_str(&err, buf, sizeof buf), buf);
    assert_string_equal(buf, "pools.yml:7:5: unknown key \"hashh\" in pool \"alpha\"");
    char small[12];
    ch_config_error_str(&err, small, sizeof small);
    assert_string_equal(small, "pools.yml:7");
    assert_null(ch_config_error_str(&err, NULL, 10));
    assert_ptr_equal(ch_config_error_str(&err, buf, 0), buf);
    ch_config_error_str(NULL, buf, sizeof buf);
    assert_string_equal(buf, "(no error)");
}

/* ---- size, garbage, depth ------------------------------------------------------------------ */

static const char base[] = "alpha:\n  servers:\n    - 127.0.0.1:6379:1\n";

static void test_size_limit(void **state)
{
    (void)state;
    size_t max = CH_CONFIG_MAX_BYTES;
    char *big = malloc(max + 1);
    assert_non_null(big);
    /* Exactly the limit: a valid file padded with one long comment line. */
    memcpy(big, base, sizeof base - 1);
    memset(big + sizeof base - 1, '#', max - (sizeof base - 1) - 1);
    big[max - 1] = '\n';
    char path[64];
    write_tmp(path, big, max);
    ch_config *cfg = load_ok(path);
    assert_int_equal(cfg->npools, 1);
    ch_config_free(cfg);
    remove(path);

    /* One byte more is refused before any parsing. */
    big[max - 1] = '#';
    big[max] = '\n';
    write_tmp(path, big, max + 1);
    free(big);
    assert_true(check_error(path, CH_ETOOBIG, 0, 0,
                            "the file is larger than 16777216 bytes, the limit "
                            "(CH_CONFIG_MAX_BYTES)"));
    remove(path);
}

/* Random bytes and random printable text are refused cleanly (or, for text, possibly loaded);
 * every error has a position inside the file. */
static void test_garbage(void **state)
{
    (void)state;
    uint64_t rng = 42;
    size_t len = 64 * 1024;
    unsigned char *buf = malloc(len);
    assert_non_null(buf);
    static const char alphabet[] = "ab:- \n\"'{}[]&*!#|>%@`,?0123456789\t";
    for (int round = 0; round < 40; round++) {
        bool printable = round % 2 == 1;
        for (size_t i = 0; i < len; i++)
            buf[i] = printable ? (unsigned char)alphabet[tu_below(&rng, sizeof alphabet - 1)]
                               : (unsigned char)tu_rand(&rng);
        char path[64];
        write_tmp(path, buf, len);
        ch_config *cfg = NULL;
        ch_config_error err;
        int rc = ch_config_load(path, &cfg, &err);
        remove(path);
        if (rc == CH_OK) {
            ch_config_free(cfg);
            continue;
        }
        assert_int_equal(rc, CH_EINVAL);
        assert_null(cfg);
        assert_true(err.line >= 1 && err.column >= 1);
        assert_true(err.line <= len + 1);
        assert_true(err.message[0] != '\0');
    }
    free(buf);
}

/* Small edits of a real config: the loader never crashes or leaks, and errors point inside. */
static void test_mutations(void **state)
{
    (void)state;
    FILE *f = fopen(FIX("valid_readme.yml"), "rb");
    assert_non_null(f);
    char orig[4096];
    size_t n = fread(orig, 1, sizeof orig, f);
    fclose(f);
    assert_true(n > 0 && n < sizeof orig);

    static const char pokes[] = ":- \n\"'{}[]&*!#|>%\t0a\xff";
    uint64_t rng = 7;
    size_t failed = 0, loaded = 0;
    for (int round = 0; round < 400; round++) {
        char buf[4096];
        memcpy(buf, orig, n);
        size_t edits = 1 + tu_below(&rng, 4);
        for (size_t e = 0; e < edits; e++)
            buf[tu_below(&rng, n)] = pokes[tu_below(&rng, sizeof pokes - 1)];
        size_t lines = 0; /* of the edited text: an edit may add a newline */
        for (size_t i = 0; i < n; i++)
            lines += buf[i] == '\n';
        char path[64];
        write_tmp(path, buf, n);
        ch_config *cfg = NULL;
        ch_config_error err;
        int rc = ch_config_load(path, &cfg, &err);
        remove(path);
        if (rc == CH_OK) {
            assert_true(cfg->npools >= 1);
            ch_config_free(cfg);
            loaded++;
            continue;
        }
        failed++;
        assert_int_equal(rc, CH_EINVAL);
        if (!(err.line >= 1 && err.line <= lines + 1)) {
            char msg[700];
            fail_msg("round %d: %s", round, ch_config_error_str(&err, msg, sizeof msg));
        }
        assert_true(err.column >= 1);
    }
    assert_true(failed > 0 && loaded > 0);
}

static void test_deep_nesting(void **state)
{
    (void)state;
    /* 2000 levels of block mappings: refused where they nest deeper than CH_CONFIG_MAX_DEPTH
     * (the first pass, which checks the YAML alone, reads that far before the pool's unknown
     * key is seen). */
    size_t depth = 2000, cap = 8 + depth * (2 * depth + 4);
    char *buf = malloc(cap);
    assert_non_null(buf);
    size_t len = (size_t)sprintf(buf, "alpha:\n");
    for (size_t d = 1; d <= depth; d++) {
        memset(buf + len, ' ', 2 * d);
        len += 2 * d;
        memcpy(buf + len, "k:\n", 3);
        len += 3;
    }
    char path[64];
    write_tmp(path, buf, len);
    assert_true(check_error(path, CH_EINVAL, 65, 129,
                            "nesting deeper than 64 levels, the limit (CH_CONFIG_MAX_DEPTH)"));
    remove(path);

    /* 100000 nested flow sequences: refused at the first bracket. */
    len = 100000;
    memset(buf, '[', len);
    write_tmp(path, buf, len);
    assert_true(check_error(path, CH_EINVAL, 1, 1,
                            "flow sequences [...] are not allowed (twemproxy rejects them); write "
                            "one \"- item\" per line, or quote a value that starts with '['"));
    remove(path);
    free(buf);
}

/* Collections nested deeper than CH_CONFIG_MAX_DEPTH are refused at the one that opens level 65,
 * naming the limit, in documents of 1 MiB and 16 MiB (the size limit): flow sequences and
 * mappings (JSON), block sequences, one a line; in a membership document (what etcd and the
 * bindings hand the loader) and in a config file. Each parse returns under a watchdog: before
 * the limit, libyaml's scanner spent time quadratic in the flow depth (100,000 '[': 15 s). */
static void test_nesting_limit(void **state)
{
    (void)state;
    static const struct {
        const char *head, *unit;
        unsigned line, column;
    } docs[] = {
        {"", "[", 1, 65},                        /* the reproduction */
        {"{\"servers\": ", "[", 1, 76},          /* level 1 the mapping, then 64 '[' */
        {"", "{\"a\": ", 1, 385},                /* 64 mappings of 6 bytes, then the 65th */
        {"", "- ", 1, 129},                      /* block sequences */
        {"", "[\n", 65, 1},                      /* one a line */
    };
    static const size_t sizes[] = {1u << 20, CH_CONFIG_MAX_BYTES};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
            char *text = tu_repeat(docs[i].head, docs[i].unit, sizes[s]);
            ch_config *sentinel = (ch_config *)&sentinel, *doc = sentinel;
            ch_config_error err;
            int64_t epoch = -1;
            tu_watchdog_arm(10, "ch_config_membership_parse of a nested document");
            int rc = ch_config_membership_parse("p", "etcd://x/a", text, sizes[s], &doc, &epoch,
                                                &err);
            tu_watchdog_disarm();
            free(text);
            char got[700], want[700];
            snprintf(want, sizeof want,
                     "etcd://x/a:%u:%u: nesting deeper than 64 levels, the limit "
                     "(CH_CONFIG_MAX_DEPTH)",
                     docs[i].line, docs[i].column);
            ch_config_error_str(&err, got, sizeof got);
            if (rc != CH_EINVAL || strcmp(got, want) != 0)
                fail_msg("document %zu of %zu bytes: status %d\n  want: %s\n  got:  %s", i,
                         sizes[s], rc, want, got);
            assert_ptr_equal(doc, sentinel);
            assert_int_equal(epoch, -1);
        }

        /* A config file: its pools are at level 2, a pool's servers at 3. */
        char *text = tu_repeat("alpha:\n  servers:\n    ", "- ", sizes[s]);
        char path[64];
        write_tmp(path, text, sizes[s]);
        free(text);
        tu_watchdog_arm(10, "ch_config_load of a nested file");
        bool ok = check_error(path, CH_EINVAL, 3, 129,
                              "nesting deeper than 64 levels, the limit (CH_CONFIG_MAX_DEPTH)");
        tu_watchdog_disarm();
        remove(path);
        assert_true(ok);
    }

    /* Exactly the limit is taken: a document whose servers sit 64 levels deep is refused for
     * its shape, not its depth. */
    char ok_doc[512];
    int len = snprintf(ok_doc, sizeof ok_doc, "{\"servers\": %.63s\"127.0.0.1:1:1\"%.63s}",
                       "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
                       "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]");
    ch_config *doc = NULL;
    ch_config_error err;
    int64_t epoch = 0;
    char got[700];
    assert_int_equal(ch_config_membership_parse("p", "etcd://x/a", ok_doc, (size_t)len, &doc,
                                                &epoch, &err),
                     CH_EINVAL);
    ch_config_error_str(&err, got, sizeof got);
    assert_null(strstr(got, "CH_CONFIG_MAX_DEPTH"));
}

/* Many servers and pools load in expected linear time; the first duplicate in file order is
 * the one reported. Long names are cut in messages. */
static void test_many(void **state)
{
    (void)state;
    size_t n = 100000, cap = 64 + n * 40;
    char *buf = malloc(cap);
    assert_non_null(buf);
    size_t len = (size_t)sprintf(buf, "big:\n  servers:\n");
    for (size_t i = 0; i < n; i++)
        len += (size_t)sprintf(buf + len, "    - 10.%zu.%zu.%zu:6379:1\n", i >> 16, (i >> 8) & 255,
                               i & 255);
    char path[64];
    write_tmp(path, buf, len);
    ch_config *cfg = load_ok(path);
    assert_int_equal(cfg->pools[0].nservers, n);
    assert_string_equal(cfg->pools[0].servers[n - 1].host, "10.1.134.159");
    assert_int_equal(cfg->pools[0].servers[n - 1].line, n + 2);
    ch_config_free(cfg);
    remove(path);

    /* Append two duplicates: the earlier one in the file is reported. */
    len += (size_t)sprintf(buf + len, "    - 10.0.0.7:6379:1\n    - 10.0.0.3:6379:1\n");
    write_tmp(path, buf, len);
    assert_true(check_error(path, CH_EINVAL, (unsigned)n + 3, 7,
                            "duplicate server \"10.0.0.7:6379\" in pool \"big\" (first on line 10)"));
    remove(path);

    /* 20000 pools. */
    len = 0;
    for (size_t i = 0; i < 20000; i++)
        len += (size_t)sprintf(buf + len, "p%zu:\n  listen: 127.0.0.1:%zu\n  servers:\n    - h:1:1\n",
                               i, 1000 + i);
    write_tmp(path, buf, len);
    cfg = load_ok(path);
    assert_int_equal(cfg->npools, 20000);
    assert_ptr_equal(ch_config_pool(cfg, "p19999"), &cfg->pools[19999]);
    ch_config_free(cfg);
    remove(path);

    /* A 1000-character pool name is cut to 48 bytes and "..." in the message. */
    len = 0;
    memset(buf, 'a', 1000);
    len = 1000 + (size_t)sprintf(buf + 1000, ":\n  hash: md5\n");
    write_tmp(path, buf, len);
    char msg[128];
    snprintf(msg, sizeof msg, "pool \"%.48s...\" has no servers", buf);
    assert_true(check_error(path, CH_EINVAL, 1, 1, msg));
    remove(path);
    free(buf);
}

/* ---- the string parsers -------------------------------------------------------------------- */

static void test_parse_int(void **state)
{
    (void)state;
    int v = -7;
    assert_int_equal(ch__conf_parse_int("0", 1, &v), CH__NUM_OK);
    assert_int_equal(v, 0);
    assert_int_equal(ch__conf_parse_int("0400", 4, &v), CH__NUM_OK);
    assert_int_equal(v, 400);
    assert_int_equal(ch__conf_parse_int("2147483647", 10, &v), CH__NUM_OK);
    assert_int_equal(v, INT_MAX);
    assert_int_equal(ch__conf_parse_int("2147483648", 10, &v), CH__NUM_RANGE);
    assert_int_equal(ch__conf_parse_int("99999999999999999999999", 23, &v), CH__NUM_RANGE);
    assert_int_equal(ch__conf_parse_int("-1", 2, &v), CH__NUM_NEG);
    assert_int_equal(ch__conf_parse_int("-", 1, &v), CH__NUM_BAD);
    assert_int_equal(ch__conf_parse_int("", 0, &v), CH__NUM_BAD);
    assert_int_equal(ch__conf_parse_int("+1", 2, &v), CH__NUM_BAD);
    assert_int_equal(ch__conf_parse_int(" 1", 2, &v), CH__NUM_BAD);
    assert_int_equal(ch__conf_parse_int("1_000", 5, &v), CH__NUM_BAD);
    assert_int_equal(ch__conf_parse_int("0x10", 4, &v), CH__NUM_BAD);
    assert_int_equal(ch__conf_parse_int("1.0", 3, &v), CH__NUM_BAD);
    assert_int_equal(v, INT_MAX); /* untouched by failures */
}

static void test_parse_server(void **state)
{
    (void)state;
    const struct {
        const char *in, *addr, *host;
        int port, weight;
        const char *name;
    } good[] = {
        {"127.0.0.1:6379:1", "127.0.0.1:6379", "127.0.0.1", 6379, 1, NULL},
        {"127.0.0.1:6379:1 server1", "127.0.0.1:6379", "127.0.0.1", 6379, 1, "server1"},
        {"cache-01.example.com:11211:100000", "cache-01.example.com:11211",
         "cache-01.example.com", 11211, 100000, NULL},
        {"/tmp/redis.sock:3", "/tmp/redis.sock", "/tmp/redis.sock", 0, 3, NULL},
        {"/tmp/a:b.sock:3 s", "/tmp/a:b.sock", "/tmp/a:b.sock", 0, 3, "s"},
        {"[::1]:6379:2", "[::1]:6379", "::1", 6379, 2, NULL},
        {"fe80::1%eth0:1:1", "fe80::1%eth0:1", "fe80::1%eth0", 1, 1, NULL},
        {"::ffff:10.0.0.1:65535:1 n:1", "::ffff:10.0.0.1:65535", "::ffff:10.0.0.1", 65535, 1,
         "n:1"},
        {"h:1:1 \xc3\xa9t\xc3\xa9", "h:1", "h", 1, 1, "\xc3\xa9t\xc3\xa9"},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        ch__conf_addr a;
        char why[160] = "";
        if (!ch__conf_parse_server(good[i].in, strlen(good[i].in), &a, why, sizeof why))
            fail_msg("%s: %s", good[i].in, why);
        assert_int_equal(a.addr_len, strlen(good[i].addr));
        assert_memory_equal(good[i].in, good[i].addr, a.addr_len);
        assert_int_equal(a.host_len, strlen(good[i].host));
        assert_memory_equal(a.host, good[i].host, a.host_len);
        assert_int_equal(a.port, good[i].port);
        assert_int_equal(a.weight, good[i].weight);
        if (good[i].name == NULL) {
            assert_null(a.name);
        } else {
            assert_int_equal(a.name_len, strlen(good[i].name));
            assert_memory_equal(a.name, good[i].name, a.name_len);
        }
    }

    const struct {
        const char *in, *why;
    } bad[] = {
        {"", "expected \"host:port:weight [name]\" or \"/path/to/socket:weight [name]\""},
        {"127.0.0.1", "expected \"host:port:weight [name]\" or \"/path/to/socket:weight [name]\""},
        {"/tmp/sock", "expected \"host:port:weight [name]\" or \"/path/to/socket:weight [name]\""},
        {":6379:1", "the host is empty"},
        {"a b:1:1", "expected \"host:port:weight [name]\" or \"/path/to/socket:weight [name]\""},
        {"h:0:1", "the port \"0\" is not an integer in 1..65535"},
        {"h:65536:1", "the port \"65536\" is not an integer in 1..65535"},
        {"h::1", "the port \"\" is not an integer in 1..65535"},
        {"h:1:", "the weight \"\" is not an integer > 0"},
        {"h:1:-1", "the weight \"-1\" is not an integer > 0"},
        {"h:1:0 n", "the weight \"0\" is not an integer > 0"},
        {"h:1:2147483648", "the weight \"2147483648\" is out of range (maximum 2147483647)"},
        {"/tmp/s:x", "the weight \"x\" is not an integer > 0"},
        {"h:1:1 ", "the name after the space is empty"},
        {"h:1:1  n", "only one name may follow the weight, after a single space"},
        {"[::1:6379:1", "the host \"[::1\" is not a valid [IPv6] address"},
        {"[]:6379:1", "the host \"[]\" is not a valid [IPv6] address"},
        {"[h]:6379:1", "the host \"[h]\" is not a valid [IPv6] address"},
        {"a_b.c-d/e:1:1", "the host \"a_b.c-d/e\" is not a hostname, IPv4 or IPv6 address"},
        {"h:1:1\tn", "it contains a control character (tab, newline, ...)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ch__conf_addr a;
        char why[160] = "";
        if (ch__conf_parse_server(bad[i].in, strlen(bad[i].in), &a, why, sizeof why))
            fail_msg("accepted \"%s\"", bad[i].in);
        if (strcmp(why, bad[i].why) != 0)
            fail_msg("\"%s\": want \"%s\", got \"%s\"", bad[i].in, bad[i].why, why);
    }
}

static void test_parse_listen(void **state)
{
    (void)state;
    ch__conf_addr a;
    char why[160];
    assert_true(ch__conf_parse_listen("0.0.0.0:22121", 13, &a, why, sizeof why));
    assert_int_equal(a.port, 22121);
    assert_int_equal(a.host_len, 7);
    assert_int_equal(a.perm, -1);
    assert_true(ch__conf_parse_listen("/var/run/n.sock 0600", 20, &a, why, sizeof why));
    assert_int_equal(a.host_len, 15);
    assert_int_equal(a.perm, 0600);
    assert_int_equal(a.port, 0);
    assert_true(ch__conf_parse_listen("/var/run/n.sock", 15, &a, why, sizeof why));
    assert_int_equal(a.perm, -1);
    assert_true(ch__conf_parse_listen(":::22121", 8, &a, why, sizeof why));
    assert_int_equal(a.host_len, 2);
    assert_int_equal(a.port, 22121);
    assert_false(ch__conf_parse_listen("[::]:22121", 10, &a, why, sizeof why));
    assert_false(ch__conf_parse_listen("/s 08", 5, &a, why, sizeof why));
    assert_string_equal(why, "the permissions \"08\" are not an octal mode <= 0777");
    assert_false(ch__conf_parse_listen("/s 01000", 8, &a, why, sizeof why));
    assert_false(ch__conf_parse_listen("/s ", 3, &a, why, sizeof why));
    assert_false(ch__conf_parse_listen("localhost:0", 11, &a, why, sizeof why));
    assert_string_equal(why, "the port \"0\" is not an integer in 1..65535");
    assert_false(ch__conf_parse_listen("", 0, &a, why, sizeof why));
    assert_string_equal(why, "expected \"host:port\" or \"/path/to/socket [permissions]\"");
}

static void test_quote(void **state)
{
    (void)state;
    char buf[CH__QUOTE_MAX + 4];
    assert_string_equal(ch__conf_quote(buf, sizeof buf, "a\tb\n", 4), "a?b?");
    char in[100];
    memset(in, 'x', sizeof in);
    ch__conf_quote(buf, sizeof buf, in, sizeof in);
    assert_int_equal(strlen(buf), CH__QUOTE_MAX + 3);
    assert_string_equal(buf + CH__QUOTE_MAX, "...");
    /* A 2-byte character straddling the cut is dropped whole. */
    memset(in, 'x', sizeof in);
    in[CH__QUOTE_MAX - 1] = '\xc3';
    in[CH__QUOTE_MAX] = '\xa9';
    ch__conf_quote(buf, sizeof buf, in, sizeof in);
    assert_int_equal(strlen(buf), CH__QUOTE_MAX - 1 + 3);
    /* A tiny buffer is never overrun. */
    char tiny[3];
    assert_string_equal(ch__conf_quote(tiny, sizeof tiny, "abcdef", 6), "ab");
}

/* A FIFO (or a device) is refused at once: reading one would block the caller (a
 * reload's control thread, -t) for good. */
static void test_not_regular(void **state)
{
    (void)state;
    char path[64];
    snprintf(path, sizeof path, "/tmp/chash-config-fifo-%ld", (long)getpid());
    unlink(path);
    assert_int_equal(mkfifo(path, 0600), 0);
    ch_config *cfg = NULL;
    ch_config_error err;
    assert_int_not_equal(ch_config_load(path, &cfg, &err), CH_OK);
    assert_null(cfg);
    assert_string_equal(err.message, "not a regular file");
    unlink(path);
}

/* ---- membership documents (ch_config_membership_doc; docs/FLEET.md) ------------------------ */

static ch_config *text_ok(const char *text)
{
    ch_config *cfg = NULL;
    ch_config_error err;
    char buf[700];
    if (ch__config_load_text("f.yml", text, strlen(text), &cfg, &err) != CH_OK)
        fail_msg("%s", ch_config_error_str(&err, buf, sizeof buf));
    return cfg;
}

/* A pool may name an etcd key instead of servers; the URL is taken apart; servers are then
 * optional; a document replaces exactly the membership fields, in YAML or JSON; a bad one is
 * named with its line and column and changes nothing. */
static void test_membership_doc(void **state)
{
    (void)state;
    ch_config *cfg = text_ok("a:\n  listen: 127.0.0.1:1\n  redis: true\n  timeout: 77\n"
                             "  membership: etcd://127.0.0.1:2379/chash/pools/a\n"
                             "  membership_hold_down: 250\n  membership_fenced: serve\n");
    ch_conf_pool *p = &cfg->pools[0];
    assert_int_equal(p->nservers, 0);
    assert_string_equal(p->membership_endpoint, "127.0.0.1:2379");
    assert_string_equal(p->membership_key, "/chash/pools/a");
    assert_int_equal(p->membership_hold_down_ms, 250);
    assert_int_equal(p->membership_fenced, CH_CONF_FENCED_SERVE);

    int64_t epoch = -1;
    ch_config_error err;
    char buf[700];
    static const char yaml[] = "servers:\n  - 127.0.0.1:7001:1 s1\n  - 127.0.0.1:7002:2 s2\n"
                               "hash: murmur\ndistribution: ketama\nepoch: 42\n";
    assert_int_equal(ch_config_membership_doc(p, "etcd://x/a", yaml, strlen(yaml), &epoch, &err),
                     CH_OK);
    assert_int_equal(epoch, 42);
    assert_int_equal(p->nservers, 2);
    assert_string_equal(p->servers[1].id, "s2");
    assert_true(p->servers[1].weight == 2.0);
    assert_string_equal(p->hash, "murmur");
    assert_int_equal(p->timeout_ms, 77); /* the file's keys stay */
    assert_true(p->redis);
    assert_int_equal(p->order[0], 0);

    /* JSON; absent keys take their defaults, not the previous document's */
    static const char json[] = "{\"servers\": [\"127.0.0.1:7003:1 s3\"], \"hash_tag\": \"{}\"}";
    assert_int_equal(ch_config_membership_doc(p, "etcd://x/a", json, strlen(json), &epoch, &err),
                     CH_OK);
    assert_int_equal(epoch, 0);
    assert_int_equal(p->nservers, 1);
    assert_string_equal(p->servers[0].addr, "127.0.0.1:7003");
    assert_string_equal(p->hash, "fnv1a_64");
    assert_string_equal(p->hash_tag, "{}");

    static const struct {
        const char *text, *want;
    } bad[] = {
        {"servers: [127.0.0.1:7001:1\n", "etcd://x/a:2:1: YAML syntax error: did not find "
                                         "expected ',' or ']' (while parsing a flow sequence at "
                                         "line 1, column 10)"},
        {"{\"servers\": [\"127.0.0.1:7001:1\"], \"listen\": \"127.0.0.1:1\"}",
         "etcd://x/a:1:35: \"listen\" cannot be set by a membership document (it holds servers, "
         "hash, distribution, hash_tag, version and epoch)"},
        {"hash: murmur\n", "etcd://x/a:1:1: the membership document has no \"servers\""},
        {"servers:\n  - 127.0.0.1:7001:1\nepoch: -3\n",
         "etcd://x/a:3:8: expected an integer from 1 to 922337203685477579 for \"epoch\", got "
         "\"-3\""},
        {"", "etcd://x/a:1:1: the membership document is empty"},
        {"- a\n", "etcd://x/a:1:1: expected a mapping of membership keys, got a sequence"},
        {"servers:\n  - 127.0.0.1:7001:1 a\n  - 127.0.0.1:7002:1 a\n",
         "etcd://x/a:3:5: duplicate server name \"a\" in pool \"a\" (first on line 2)"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        epoch = -1;
        int rc = ch_config_membership_doc(p, "etcd://x/a", bad[i].text, strlen(bad[i].text),
                                          &epoch, &err);
        assert_int_equal(rc, CH_EINVAL);
        ch_config_error_str(&err, buf, sizeof buf);
        if (strcmp(buf, bad[i].want) != 0)
            fail_msg("case %zu:\n  want: %s\n  got:  %s", i, bad[i].want, buf);
        assert_int_equal(epoch, -1);
        assert_int_equal(p->nservers, 1); /* unchanged */
        assert_string_equal(p->servers[0].addr, "127.0.0.1:7003");
    }
    ch_config_free(cfg);

    /* In a file: "epoch" is a document's; hold-down needs membership; bad URLs */
    static const struct {
        const char *text, *want;
    } badfile[] = {
        {"a:\n  servers:\n    - 127.0.0.1:1:1\n  epoch: 3\n",
         "f.yml:4:3: \"epoch\" belongs in a membership document (docs/FLEET.md), not in a pool"},
        {"a:\n  servers:\n    - 127.0.0.1:1:1\n  membership_hold_down: 3\n",
         "f.yml:4:3: \"membership_hold_down\" needs \"membership\""},
        {"a:\n  servers:\n    - 127.0.0.1:1:1\n  warm_up: 86400001\n",
         "f.yml:4:12: expected an integer <= 86400000 (a day, in ms) for \"warm_up\", got "
         "\"86400001\""},
        {"a:\n  servers:\n    - 127.0.0.1:1:1\n  readmit_ramp: 86400001\n",
         "f.yml:4:17: expected an integer <= 86400000 (a day, in ms) for \"readmit_ramp\", got "
         "\"86400001\""},
        {"a:\n  servers:\n    - 127.0.0.1:1:1\n  membership_fenced: error\n",
         "f.yml:4:3: \"membership_fenced\" needs \"membership\""},
        {"a:\n  membership: etcd://127.0.0.1:2379/k\n  membership_fenced: stale\n",
         "f.yml:3:22: expected error (refuse requests while the membership cannot be proven "
         "current: the default) or serve (answer from it anyway) for \"membership_fenced\", got "
         "\"stale\""},
        {"a:\n  membership: http://127.0.0.1:2379/k\n",
         "f.yml:2:15: expected an etcd://host:port/key, dns://name:port or dns+srv://name URL "
         "for \"membership\", got \"http://127.0.0.1:2379/k\""},
        {"a:\n  membership: etcd://127.0.0.1:2379/k/\n",
         "f.yml:2:15: \"membership\": expected a key after host:port (printable, no spaces, not "
         "ending in '/'), got \"etcd://127.0.0.1:2379/k/\""},
        {"a:\n  membership: etcd://127.0.0.1/k\n",
         "f.yml:2:15: \"membership\": expected etcd://host:port/key with etcd's client address "
         "as host:port, got \"etcd://127.0.0.1/k\""},
        {"a:\n  listen: 127.0.0.1:1\n", "f.yml:1:1: pool \"a\" has no servers"},
    };
    for (size_t i = 0; i < sizeof(badfile) / sizeof(badfile[0]); i++) {
        ch_config *c = NULL;
        assert_int_equal(ch__config_load_text("f.yml", badfile[i].text, strlen(badfile[i].text),
                                              &c, &err),
                         CH_EINVAL);
        ch_config_error_str(&err, buf, sizeof buf);
        if (strcmp(buf, badfile[i].want) != 0)
            fail_msg("file case %zu:\n  want: %s\n  got:  %s", i, badfile[i].want, buf);
    }
}

/* "membership: dns://name:port" and "dns+srv://name" (docs/FLEET.md, "Membership from DNS"):
 * the name and port taken apart, the interval and resolver kept; each bad value named at its
 * line:column; the DNS keys need a DNS membership, and fencing needs etcd. */
static void test_membership_dns(void **state)
{
    (void)state;
    ch_config *cfg = text_ok("a:\n  listen: 127.0.0.1:1\n  membership: dns://cache.svc.local:6379\n"
                             "  membership_interval: 1500\n  membership_resolver: 127.0.0.1:5353\n"
                             "  membership_hold_down: 0\n"
                             "b:\n  listen: 127.0.0.1:2\n  membership: dns+srv://_redis._tcp.cache\n"
                             "  servers:\n    - 127.0.0.1:7001:1\n");
    ch_conf_pool *p = &cfg->pools[0];
    assert_int_equal(p->nservers, 0);
    assert_true(ch_conf_membership_dns(p));
    ch_config *fix = load_ok(FIX("valid_membership_dns.yml"));
    assert_int_equal(fix->pools[0].membership_scheme, CH_CONF_MEMBERSHIP_DNS_SRV);
    assert_string_equal(fix->pools[0].membership_resolver, "[::1]:5353");
    assert_int_equal(fix->pools[0].membership_interval_ms, 2500);
    assert_int_equal(fix->pools[1].membership_scheme, CH_CONF_MEMBERSHIP_DNS);
    assert_int_equal(fix->pools[1].membership_port, 11211);
    assert_int_equal(fix->pools[1].nservers, 1);
    ch_config_free(fix);
    assert_false(ch_conf_membership_etcd(p));
    assert_int_equal(p->membership_scheme, CH_CONF_MEMBERSHIP_DNS);
    assert_string_equal(p->membership_endpoint, "cache.svc.local");
    assert_null(p->membership_key);
    assert_int_equal(p->membership_port, 6379);
    assert_int_equal(p->membership_interval_ms, 1500);
    assert_string_equal(p->membership_resolver, "127.0.0.1:5353");
    assert_int_equal(p->membership_hold_down_ms, 0);
    p = &cfg->pools[1];
    assert_int_equal(p->membership_scheme, CH_CONF_MEMBERSHIP_DNS_SRV);
    assert_string_equal(p->membership_endpoint, "_redis._tcp.cache");
    assert_int_equal(p->membership_port, 0);
    assert_int_equal(p->membership_interval_ms, CH_CONF_DEFAULT_MEMBERSHIP_INTERVAL);
    assert_null(p->membership_resolver);
    assert_int_equal(p->nservers, 1);
    ch_config_free(cfg);

    static const struct {
        const char *text, *want;
    } bad[] = {
        {"a:\n  membership: dns://cache.local\n",
         "f.yml:2:15: \"membership\": expected dns://name:port with a DNS name (letters, digits, "
         "'-', '_', '.') and a port from 1 to 65535, got \"dns://cache.local\""},
        {"a:\n  membership: dns://cache..local:1\n",
         "f.yml:2:15: \"membership\": expected dns://name:port with a DNS name (letters, digits, "
         "'-', '_', '.') and a port from 1 to 65535, got \"dns://cache..local:1\""},
        {"a:\n  membership: dns://cache:65536\n",
         "f.yml:2:15: \"membership\": expected dns://name:port with a DNS name (letters, digits, "
         "'-', '_', '.') and a port from 1 to 65535, got \"dns://cache:65536\""},
        {"a:\n  membership: dns+srv://\n",
         "f.yml:2:15: \"membership\": expected dns+srv://name with a DNS name (letters, "
         "digits, '-', '_', '.'), got \"dns+srv://\""},
        {"a:\n  membership: dns+srv://a:1\n",
         "f.yml:2:15: \"membership\": expected dns+srv://name with a DNS name (letters, "
         "digits, '-', '_', '.'), got \"dns+srv://a:1\""},
        {"a:\n  membership: dns://c:1\n  membership_interval: 99\n",
         "f.yml:3:24: expected an integer >= 100 for \"membership_interval\", got \"99\""},
        {"a:\n  membership: dns://c:1\n  membership_resolver: localhost:53\n",
         "f.yml:3:24: \"membership_resolver\": expected a DNS server's ip:port (\"127.0.0.1:53\", "
         "\"[::1]:53\"), got \"localhost:53\""},
        {"a:\n  membership: dns://c:1\n  membership_resolver: 127.0.0.1\n",
         "f.yml:3:24: \"membership_resolver\": expected a DNS server's ip:port (\"127.0.0.1:53\", "
         "\"[::1]:53\"), got \"127.0.0.1\""},
        {"a:\n  membership: dns://c:1\n  membership_resolver: ::1:53\n",
         "f.yml:3:24: \"membership_resolver\": expected a DNS server's ip:port (\"127.0.0.1:53\", "
         "\"[::1]:53\"), got \"::1:53\""},
        {"a:\n  membership: dns://c:1\n  membership_resolver: \"[::1]:0\"\n",
         "f.yml:3:24: \"membership_resolver\": expected a DNS server's ip:port (\"127.0.0.1:53\", "
         "\"[::1]:53\"), got \"[::1]:0\""},
        {"a:\n  membership: etcd://127.0.0.1:2379/k\n  membership_interval: 1000\n",
         "f.yml:3:3: \"membership_interval\" needs \"membership: dns://...\" or "
         "\"membership: dns+srv://...\""},
        {"a:\n  servers:\n    - 127.0.0.1:1:1\n  membership_resolver: 127.0.0.1:53\n",
         "f.yml:4:3: \"membership_resolver\" needs \"membership: dns://...\" or "
         "\"membership: dns+srv://...\""},
        {"a:\n  membership: dns://c:1\n  membership_fenced: serve\n",
         "f.yml:3:3: \"membership_fenced\" needs a membership in etcd: a DNS membership is "
         "never fenced (docs/FLEET.md, \"Membership from DNS\")"},
    };
    ch_config_error err;
    char buf[700];
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ch_config *c = NULL;
        assert_int_equal(ch__config_load_text("f.yml", bad[i].text, strlen(bad[i].text), &c,
                                              &err),
                         CH_EINVAL);
        ch_config_error_str(&err, buf, sizeof buf);
        if (strcmp(buf, bad[i].want) != 0)
            fail_msg("case %zu:\n  want: %s\n  got:  %s", i, bad[i].want, buf);
    }
}

/* A pool's table is the one its scheme defines: without a vnodes option a client library's
 * scheme takes the library's own default (hashring@3's 40, groupcache@0's 50, ...; the
 * compat tests prove ch_table_build's vnodes = 0 against each real library), not the ring's 160.
 * For every scheme a config may name: the membership's table places 4,000 keys exactly as a
 * table built from the same members with vnodes = 0. */
/* "replicas" (issue 26): 1..min(8, servers), default 1; each bad value named at its
 * line:column with its limit; where it was given is kept for chash-proxy's refusal. */
static void test_replicas(void **state)
{
    (void)state;
    static const char head[] = "a:\n  listen: 127.0.0.1:1\n  redis: true\n  servers:\n"
                               "   - 127.0.0.1:7001:1\n   - 127.0.0.1:7002:1\n"
                               "   - 127.0.0.1:7003:1\n";
    char text[512];
    snprintf(text, sizeof text, "%s  replicas: 3\n", head);
    ch_config *cfg = text_ok(text);
    assert_int_equal(cfg->pools[0].replicas, 3);
    assert_int_equal(cfg->pools[0].replicas_line, 8);
    assert_int_equal(cfg->pools[0].replicas_column, 3);
    ch_config_free(cfg);
    cfg = text_ok(head);
    assert_int_equal(cfg->pools[0].replicas, 1);
    assert_int_equal(cfg->pools[0].replicas_line, 0);
    ch_config_free(cfg);

    static const struct {
        const char *value;
        unsigned column;
        const char *message;
    } bad[] = {
        {"0", 13, "expected an integer >= 1 for \"replicas\", got \"0\""},
        {"9", 13, "expected an integer <= 8 for \"replicas\", got \"9\""},
        {"two", 13, "expected an integer for \"replicas\", got \"two\""},
        {"4", 3, "\"replicas\" is 4, more than the 3 servers of pool \"a\""},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        snprintf(text, sizeof text, "%s  replicas: %s\n", head, bad[k].value);
        ch_config_error err;
        cfg = NULL;
        assert_int_not_equal(ch__config_load_text("f.yml", text, strlen(text), &cfg, &err),
                             CH_OK);
        assert_null(cfg);
        assert_string_equal(err.message, bad[k].message);
        assert_int_equal(err.line, 8);
        assert_int_equal(err.column, bad[k].column);
    }
}

/* hot_key_share and hot_key_names: defaults, values, and bad values named at their place. */
static void test_hot_keys(void **state)
{
    (void)state;
    static const char head[] = "a:\n  listen: 127.0.0.1:1\n  redis: true\n  servers:\n"
                               "   - 127.0.0.1:7001:1\n";
    char text[512];
    ch_config *cfg = text_ok(head);
    assert_true(cfg->pools[0].hot_key_share == CH_CONF_DEFAULT_HOT_KEY_SHARE);
    assert_false(cfg->pools[0].hot_key_names);
    ch_config_free(cfg);
    snprintf(text, sizeof text, "%s  hot_key_share: 0.25\n  hot_key_names: true\n", head);
    cfg = text_ok(text);
    assert_true(cfg->pools[0].hot_key_share == 0.25);
    assert_true(cfg->pools[0].hot_key_names);
    ch_config_free(cfg);
    static const struct {
        const char *line, *message;
        unsigned column;
    } bad[] = {
        {"  hot_key_share: 1.5\n",
         "expected a number from 0 to 1 for \"hot_key_share\", got \"1.5\"", 18},
        {"  hot_key_share: lots\n",
         "expected a number from 0 to 1 for \"hot_key_share\", got \"lots\"", 18},
        {"  hot_key_names: maybe\n", "expected true or false for \"hot_key_names\", got \"maybe\"",
         18},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        snprintf(text, sizeof text, "%s%s", head, bad[k].line);
        ch_config_error err;
        cfg = NULL;
        assert_int_not_equal(ch__config_load_text("f.yml", text, strlen(text), &cfg, &err),
                             CH_OK);
        assert_null(cfg);
        assert_string_equal(err.message, bad[k].message);
        assert_int_equal(err.line, 6);
        assert_int_equal(err.column, bad[k].column);
    }
}

static void test_scheme_default_vnodes(void **state)
{
    (void)state;
    for (int a = 0; a < CH_ALGO_COUNT_; a++) {
        if (ch_algo_flags((ch_algo_id)a) & CH_ALGO_F_KEYED)
            continue; /* no membership places by the key itself (ch_membership_build) */
        char yml[512], path[64];
        int n = snprintf(yml, sizeof yml,
                         "p:\n  listen: 127.0.0.1:22121\n  distribution: %s\n  servers:\n"
                         "   - 10.0.0.1:6379:1 a\n   - 10.0.0.2:6379:1 b\n"
                         "   - 10.0.0.3:6379:1 c\n   - 10.0.0.4:6379:1 d\n",
                         ch_algo_name((ch_algo_id)a));
        write_tmp(path, yml, (size_t)n);
        ch_config *cfg = load_ok(path);
        unlink(path);
        const ch_conf_pool *p = &cfg->pools[0];
        ch_membership *m = NULL;
        int rc = ch_config_membership(p, &m);
        if (rc != CH_OK)
            fail_msg("distribution %s: ch_config_membership: %s", ch_algo_name((ch_algo_id)a),
                     ch_strerror(rc));

        ch_options opt;
        assert_int_equal(ch_config_options(p, &opt), CH_OK);
        opt.vnodes = 0; /* the scheme's own default */
        ch_member members[4];
        ch_config_members(p, opt.algo, members);
        ch_node nodes[4];
        for (size_t i = 0; i < 4; i++)
            nodes[i] = (ch_node){.id = members[i].id, .weight = members[i].weight};
        ch_table *want = NULL;
        assert_int_equal(ch_table_build(nodes, 4, &opt, &want), CH_OK);

        const ch_table *got = ch_membership_table(m);
        size_t differ = 0;
        for (unsigned k = 0; k < 4000; k++) {
            char key[32];
            int len = snprintf(key, sizeof key, "key:%u", k);
            differ += ch_lookup(got, key, (size_t)len) != ch_lookup(want, key, (size_t)len);
        }
        if (differ != 0)
            fail_msg("distribution %s: %zu of 4000 keys placed unlike the scheme's default",
                     ch_algo_name((ch_algo_id)a), differ);
        ch_table_free(want);
        ch_membership_free(m);
        ch_config_free(cfg);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_keys),
        cmocka_unit_test(test_replicas),
        cmocka_unit_test(test_hot_keys),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_readme_pools),
        cmocka_unit_test(test_sockets_and_names),
        cmocka_unit_test(test_twemproxy_quirks),
        cmocka_unit_test(test_chash_keys),
        cmocka_unit_test(test_gutter),
        cmocka_unit_test(test_client_auth),
        cmocka_unit_test(test_error_fixtures),
        cmocka_unit_test(test_bad_bytes),
        cmocka_unit_test(test_unreadable),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_error_str),
        cmocka_unit_test(test_size_limit),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_mutations),
        cmocka_unit_test(test_deep_nesting),
        cmocka_unit_test(test_nesting_limit),
        cmocka_unit_test(test_many),
        cmocka_unit_test(test_parse_int),
        cmocka_unit_test(test_parse_server),
        cmocka_unit_test(test_parse_listen),
        cmocka_unit_test(test_quote),
        cmocka_unit_test(test_not_regular),
        cmocka_unit_test(test_membership_doc),
        cmocka_unit_test(test_membership_dns),
        cmocka_unit_test(test_scheme_default_vnodes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core_gutter.c — the proxy's logic in process (core.h): what the gutter pool receives for
 * each kind of write (px_codec.encode_capped), both codecs, against the rewrite each command's
 * documented cap gives (docs/PROXY.md, "Gutter pool"), written out by hand.
 */
#include "core.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define TTL_MS 4500u                     /* memcached: 4 s */
#define NOW_MS INT64_C(1000000000000)    /* Unix 1e9 s */

/* The dialect of the client whose requests capped() rewrites. */
static uint8_t dialect = PX_DIALECT_RESP2;

/* The gutter's request for key k of text (parsed as the pool speaks it); its return code. */
static int capped(fixture *fx, const char *text, uint32_t k, px_buf *out, char *why,
                  size_t whylen)
{
    px_pool *pool = &fx->pool;
    static px_span args[64], keys[64];
    px_msg m = {.args = args, .args_cap = 64, .keys = keys, .keys_cap = 64};
    size_t consumed = 0, need = 0;
    char err[128];
    assert_int_equal(pool->codec->parse_request(&pool->limits, text, strlen(text), &m, &consumed,
                                                &need, err, sizeof(err)),
                     PX_PARSE_OK);
    uint8_t expect = 0;
    m.dialect = dialect;
    out->len = 0;
    why[0] = '\0';
    return pool->codec->encode_capped(out, &m, &k, 1, TTL_MS, NOW_MS, &expect, why, whylen);
}

/* text's gutter request is want (words: a RESP array of them; else the bytes). */
static void redis_is(fixture *fx, const char *text, uint32_t k, const char *const *words)
{
    px_buf out = {0}, want = {0};
    char why[192];
    assert_int_equal(capped(fx, text, k, &out, why, sizeof(why)), 0);
    size_t n = 0;
    while (words[n] != NULL)
        n++;
    px_buf_printf(&want, "*%zu\r\n", n);
    for (size_t i = 0; i < n; i++)
        px_buf_printf(&want, "$%zu\r\n%s\r\n", strlen(words[i]), words[i]);
    if (out.len != want.len || memcmp(out.p, want.p, out.len) != 0)
        fail_msg("%s: got %.*s, want %.*s", text, (int)out.len, out.p, (int)want.len, want.p);
    px_buf_free(&out);
    px_buf_free(&want);
}

static void refused(fixture *fx, const char *text, const char *msg)
{
    px_buf out = {0};
    char why[192];
    int rc = capped(fx, text, 0, &out, why, sizeof(why));
    if (rc != 1)
        fail_msg("%s: %d, %.*s (want refused: %s)", text, rc, (int)out.len, out.p, msg);
    assert_int_equal(out.len, 0);
    assert_non_null(strstr(why, msg));
    px_buf_free(&out);
}

#define W(...) ((const char *const[]){__VA_ARGS__, NULL})

void test_gutter_redis(void **state)
{
    fixture *fx = *state;
    redis_is(fx, "SET k v\r\n", 0, W("SET", "k", "v", "PX", "4500"));
    redis_is(fx, "SET k v EX 3600 NX\r\n", 0, W("SET", "k", "v", "NX", "PX", "4500"));
    redis_is(fx, "SET k v px 100\r\n", 0, W("SET", "k", "v", "PX", "100"));
    redis_is(fx, "SET k v KEEPTTL GET\r\n", 0, W("SET", "k", "v", "GET", "PX", "4500"));
    redis_is(fx, "SET k v PXAT 1000000001000\r\n", 0, W("SET", "k", "v", "PXAT", "1000000001000"));
    redis_is(fx, "SET k v EXAT 2000000000\r\n", 0, W("SET", "k", "v", "PXAT", "1000000004500"));
    refused(fx, "SET k v EX 1 PX 2\r\n", "syntax error");
    refused(fx, "SET k v EX soon\r\n", "not an integer");
    redis_is(fx, "SETEX k 3600 v\r\n", 0, W("PSETEX", "k", "4500", "v"));
    redis_is(fx, "PSETEX k 10 v\r\n", 0, W("PSETEX", "k", "10", "v"));
    refused(fx, "SETEX k x v\r\n", "not an integer");
    redis_is(fx, "MSET a 1 b 2\r\n", 1, W("SET", "b", "2", "PX", "4500"));
    redis_is(fx, "DEL a b\r\n", 1, W("DEL", "b"));
    redis_is(fx, "GET k\r\n", 0, W("GET", "k"));
    redis_is(fx, "INCR k\r\n", 0,
             W("EVAL",
               "local r = redis.call(unpack(ARGV, 2)) local t = redis.call('PTTL', KEYS[1]) "
               "if t == -1 or t > tonumber(ARGV[1]) then redis.call('PEXPIRE', KEYS[1], "
               "ARGV[1]) end return r",
               "1", "k", "4500", "INCR", "k"));
    refused(fx, "RPOPLPUSH a b\r\n", "writes more than one key");
    refused(fx, "EVAL s 1 k\r\n", "writes more than one key");
    /* A RESP3 client's: the command runs in RESP3 inside the script (redis.setresp(3)), so
     * ZINCRBY's double, HGETALL's map, come back as they would without it. */
    dialect = PX_DIALECT_RESP3;
    redis_is(fx, "ZINCRBY z 1 m\r\n", 0,
             W("EVAL",
               "redis.setresp(3) local r = redis.call(unpack(ARGV, 2)) local t = "
               "redis.call('PTTL', KEYS[1]) if t == -1 or t > tonumber(ARGV[1]) then "
               "redis.call('PEXPIRE', KEYS[1], ARGV[1]) end return r",
               "1", "z", "4500", "ZINCRBY", "z", "1", "m"));
    redis_is(fx, "SET k v\r\n", 0, W("SET", "k", "v", "PX", "4500")); /* no script: the same */
    dialect = PX_DIALECT_RESP2;
}

static void mc_is(fixture *fx, const char *text, const char *want)
{
    px_buf out = {0};
    char why[192];
    assert_int_equal(capped(fx, text, 0, &out, why, sizeof(why)), 0);
    if (out.len != strlen(want) || memcmp(out.p, want, out.len) != 0)
        fail_msg("%s: got %.*s, want %s", text, (int)out.len, out.p, want);
    px_buf_free(&out);
}

void test_gutter_mc(void **state)
{
    fixture *fx = *state;
    mc_is(fx, "set k 0 0 2\r\nhi\r\n", "set k 0 4 2\r\nhi\r\n");
    mc_is(fx, "set k 5 3600 2 noreply\r\nhi\r\n", "set k 5 4 2\r\nhi\r\n");
    mc_is(fx, "add k 0 2 2\r\nhi\r\n", "add k 0 2 2\r\nhi\r\n");
    mc_is(fx, "set k 0 1000000002 2\r\nhi\r\n", "set k 0 2 2\r\nhi\r\n");  /* Unix time: 2 s */
    mc_is(fx, "set k 0 1000000100 2\r\nhi\r\n", "set k 0 4 2\r\nhi\r\n");
    mc_is(fx, "set k 0 999999999 2\r\nhi\r\n", "set k 0 999999999 2\r\nhi\r\n"); /* past */
    mc_is(fx, "cas k 0 0 2 77\r\nhi\r\n", "cas k 0 4 2 77\r\nhi\r\n");
    mc_is(fx, "touch k 3600\r\n", "touch k 4\r\n");
    mc_is(fx, "gat 3600 a\r\n", "gat 4 a\r\n");
    mc_is(fx, "ms k 2 T3600 F5\r\nhi\r\n", "ms k 2 T4 F5\r\nhi\r\n");
    mc_is(fx, "ms k 2 q\r\nhi\r\n", "ms k 2 T4\r\nhi\r\n");
    mc_is(fx, "mg k v N30 T0\r\n", "mg k v N4 T4\r\n");
    mc_is(fx, "delete k\r\n", "delete k\r\n");
    mc_is(fx, "incr k 1\r\n", "incr k 1\r\n");
    mc_is(fx, "get k\r\n", "get k\r\n");
    /* A request line ended by a bare LF, which memcached (and the proxy's parser) take: its
     * end is the LF, not the first CR, which may be in the data block. Before (issue 35, found
     * by fuzz/hotpath_fuzz.c): the T of an ms went into the data ("ms k 2\nhi T4\r\n": the value
     * changed and " T4" read by the gutter's memcached as a command of its own, a second reply
     * to one request), a last T flag kept its lifetime uncapped, and touch was refused. */
    mc_is(fx, "ms k 2\nhi\r\n", "ms k 2 T4\nhi\r\n");
    mc_is(fx, "ms k 4\na\r\nb\r\n", "ms k 4 T4\na\r\nb\r\n");
    mc_is(fx, "ms k 2 T3600\nhi\r\n", "ms k 2 T4\nhi\r\n");
    mc_is(fx, "mg k v T3600\n", "mg k v T4\n");
    mc_is(fx, "touch k 3600\n", "touch k 4\n");
    mc_is(fx, "set k 0 3600 2\nhi\r\n", "set k 0 4 2\nhi\r\n");
    /* Runs of spaces separate tokens, as memcached's tokenizer and the proxy's parser read
     * them. Before (issue 35, found by fuzz/hotpath_fuzz.c): an empty token counted, so
     * "set k  0 3600" had its flags (0) capped as if they were its exptime, which stayed 3600,
     * and "touch k  3600" was refused. */
    mc_is(fx, "set k  0 3600 2\r\nhi\r\n", "set k 0 4 2\r\nhi\r\n");
    mc_is(fx, "touch k  3600\r\n", "touch k 4\r\n");
    mc_is(fx, "gat  3600 a\r\n", "gat 4 a\r\n");
    mc_is(fx, "ms k  2  T3600 F5\r\nhi\r\n", "ms k 2 T4 F5\r\nhi\r\n");
    /* A refusal writes nothing (px_codec.encode_capped); before, the tokens before the bad one
     * were left in out. */
    refused(fx, "touch k 1234567890123456789\r\n", "bad command line format");
    /* Leading zeros are digits memcached (and the proxy's parser) read past, not ones that make
     * a number too long. Before (issue 35, found by fuzz/hotpath_fuzz.c): T0000000000000003600
     * went to the gutter uncapped (an hour where gutter_ttl is 4 s) and the exptime
     * 0000000000000003600 was refused. */
    mc_is(fx, "mg k v T0000000000000003600\r\n", "mg k v T4\r\n");
    mc_is(fx, "mg k v N000000000000000000000030\r\n", "mg k v N4\r\n");
    mc_is(fx, "set k 0 0000000000000003600 2\r\nhi\r\n", "set k 0 4 2\r\nhi\r\n");
}

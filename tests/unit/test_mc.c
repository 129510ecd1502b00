/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_mc.c — the memcached parser (proxy/proto/mc.h) against its contract.
 *
 * Expected values come from memcached's doc/protocol.txt (command grammar, reply codes, the
 * flags of each meta command, quiet mode), from memcached's own answers where it has them
 * ("bad data chunk", "invalid flag", KEY_MAX_LENGTH 250, the 2048-byte line), from RFC 4648's
 * base64 vectors, and from counting bytes by hand. Every input is copied to a heap buffer of
 * exactly its length first, so under ASan any read past len fails the test.
 *
 * Requests: every command and meta flag, every limit at its boundary and one past it, every
 * error with its message and whether the connection is kept (and how much is skipped), every
 * prefix of valid pipelines (INCOMPLETE with a correct need, then OK), tokens beyond the
 * caller's array. Replies: every form for every command, classification, the VALUE iterator,
 * malformed replies, every prefix, quiet-mode suppression. The line rebuilders. The copy
 * helpers: plain keys byte by byte, base64 against RFC 4648's vectors and Python's base64 module,
 * the mg fetch (a key that is not plain in base64 with b) parsed back, its VA/EN reply as
 * memcached 1.6.18 sends it and malformed or truncated, and the exptime by protocol.txt's 30-day
 * rule, saturating at the 32-bit exptime memcached keeps. The real server's framing is checked
 * apart, by test_mc_real.py.
 */
#include "testutil.h"

#include <mc.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#define S(lit) (lit), (sizeof(lit) - 1)
#define MAXT 64

static char *dup_exact(const char *s, size_t n)
{
    char *b = malloc(n ? n : 1);
    assert_non_null(b);
    if (n)
        memcpy(b, s, n);
    return b;
}

/* ---- request helpers ----------------------------------------------------------------------- */

typedef struct preq {
    ch_mc_status st;
    size_t consumed, need;
    ch_mc_request r;
    ch_mc_span tok[MAXT];
    char err[160];
    const char *src; /* the test's input (spans are offsets, valid against it) */
} preq;

static preq parse_cap(const char *s, size_t n, const ch_mc_limits *lim, size_t cap)
{
    preq p;
    memset(&p, 0, sizeof p);
    assert_true(cap <= MAXT);
    char *b = dup_exact(s, n);
    p.r.tok = p.tok;
    p.r.tok_cap = cap;
    p.consumed = p.need = 12345;
    p.st = ch_mc_parse_request(b, n, lim, &p.r, &p.consumed, &p.need, p.err, sizeof p.err);
    free(b);
    p.src = s;
    assert_ptr_equal(p.r.tok, p.tok);
    assert_int_equal(p.r.tok_cap, cap);
    switch (p.st) {
    case CH_MC_OK:
        assert_true(p.consumed > 0 && p.consumed <= n);
        assert_int_equal(p.need, 0);
        break;
    case CH_MC_INCOMPLETE:
        assert_true(p.need > n);
        assert_int_equal(p.consumed, 0);
        break;
    case CH_MC_ERROR:
        assert_true(p.consumed > 0);
        assert_int_equal(p.need, 0);
        assert_true(strlen(p.err) > 0);
        break;
    case CH_MC_CLOSE:
        assert_int_equal(p.consumed, 0);
        assert_int_equal(p.need, 0);
        assert_true(strlen(p.err) > 0);
        break;
    default:
        fail_msg("status %d", p.st);
    }
    if (p.st != CH_MC_OK)
        assert_int_equal(p.r.cmd, CH_MC_CMD_UNKNOWN);
    return p;
}

static preq parse(const char *s, size_t n)
{
    return parse_cap(s, n, NULL, MAXT);
}

static preq parse_lim(const char *s, size_t n, const ch_mc_limits *lim)
{
    return parse_cap(s, n, lim, MAXT);
}

static void span_eq(const char *src, ch_mc_span sp, const char *want)
{
    if (sp.len != strlen(want) || memcmp(src + sp.off, want, sp.len) != 0)
        fail_msg("span \"%.*s\" (off %u), expected \"%s\"", (int)sp.len, src + sp.off,
                 (unsigned)sp.off, want);
}

static void tok_eq(const preq *p, size_t i, const char *want)
{
    assert_true(i < p->r.ntokens && i < p->r.tok_cap);
    span_eq(p->src, p->tok[i], want);
}

/* s is exactly one OK request of command cmd whose tokens are the NULL-terminated list. */
static preq expect_ok(const char *s, size_t n, ch_mc_cmd cmd, const char *const *toks)
{
    preq p = parse(s, n);
    if (p.st != CH_MC_OK)
        fail_msg("\"%.*s\": status %d \"%s\"", (int)n, s, p.st, p.err);
    assert_int_equal(p.consumed, n);
    assert_int_equal(p.r.cmd, cmd);
    size_t k = 0;
    for (; toks[k]; k++)
        tok_eq(&p, k, toks[k]);
    assert_int_equal(p.r.ntokens, k);
    return p;
}

static void expect_fail(const char *s, size_t n, const ch_mc_limits *lim, ch_mc_status st,
                        size_t consumed, const char *msg)
{
    preq p = parse_lim(s, n, lim);
    if (p.st != st || strcmp(p.err, msg) != 0 || p.consumed != consumed)
        fail_msg("\"%.*s\": status %d consumed %zu \"%s\", expected %d %zu \"%s\"",
                 (int)(n < 80 ? n : 80), s, p.st, p.consumed, p.err, st, consumed, msg);
}

#define T(...) ((const char *const[]){__VA_ARGS__, NULL})

/* ---- requests: text commands --------------------------------------------------------------- */

static void test_limits_init(void **state)
{
    (void)state;
    ch_mc_limits l;
    ch_mc_limits_init(&l);
    assert_int_equal(l.max_key, 250);
    assert_int_equal(l.max_item, 1024 * 1024);
    assert_int_equal(l.max_line, 2048);
    assert_int_equal(l.max_get_line, 1024 * 1024);
    assert_int_equal(l.max_keys, 4096);
    assert_int_equal(l.max_tokens, 24);
    assert_int_equal(l.max_swallow, 64 * 1024 * 1024);
}

static void test_get_family(void **state)
{
    (void)state;
    preq p = expect_ok(S("get foo\r\n"), CH_MC_CMD_GET, T("get", "foo"));
    assert_int_equal(p.r.key_first, 1);
    assert_int_equal(p.r.nkeys, 1);
    span_eq(p.src, p.r.key, "foo");
    span_eq(p.src, p.r.line, "get foo");
    assert_int_equal(p.r.line_len, 9);
    assert_int_equal(p.r.noreply.len, 0);
    assert_int_equal(p.r.data.len, 0);
    assert_true(ch_mc_cmd_props(CH_MC_CMD_GET) & CH_MC_P_GET);

    p = expect_ok(S("gets a b c\r\n"), CH_MC_CMD_GETS, T("gets", "a", "b", "c"));
    assert_int_equal(p.r.nkeys, 3);
    assert_true(ch_mc_cmd_props(CH_MC_CMD_GETS) & CH_MC_P_CAS_VALUE);
    /* memcached accepts a bare "\n" and runs of spaces. */
    p = expect_ok(S("get  a   b \n"), CH_MC_CMD_GET, T("get", "a", "b"));
    assert_int_equal(p.r.nkeys, 2);
    span_eq(p.src, p.r.line, "get  a   b ");

    p = expect_ok(S("gat 100 a b\r\n"), CH_MC_CMD_GAT, T("gat", "100", "a", "b"));
    assert_int_equal(p.r.exptime, 100);
    assert_int_equal(p.r.key_first, 2);
    assert_int_equal(p.r.nkeys, 2);
    span_eq(p.src, p.r.key, "a");
    p = expect_ok(S("gats -1 k\r\n"), CH_MC_CMD_GATS, T("gats", "-1", "k"));
    assert_int_equal(p.r.exptime, -1);

    expect_fail(S("get\r\n"), NULL, CH_MC_ERROR, 5, "bad command line format");
    expect_fail(S("get \r\n"), NULL, CH_MC_ERROR, 6, "bad command line format");
    expect_fail(S("gat 10\r\n"), NULL, CH_MC_ERROR, 8, "bad command line format");
    expect_fail(S("gat x k\r\n"), NULL, CH_MC_ERROR, 9, "invalid exptime argument");
    expect_fail(S("gats\r\n"), NULL, CH_MC_ERROR, 6, "bad command line format");
}

static void test_storage(void **state)
{
    (void)state;
    /* "set k 1 2 5\r\n" is 13 bytes; then "hello\r\n". */
    preq p = expect_ok(S("set k 1 2 5\r\nhello\r\n"), CH_MC_CMD_SET, T("set", "k", "1", "2", "5"));
    assert_int_equal(p.r.flags, 1);
    assert_int_equal(p.r.exptime, 2);
    assert_int_equal(p.r.bytes, 5);
    assert_int_equal(p.r.line_len, 13);
    assert_int_equal(p.r.data.off, 13);
    span_eq(p.src, p.r.data, "hello");
    assert_int_equal(p.r.noreply.len, 0);
    assert_int_equal(p.r.nkeys, 1);
    span_eq(p.src, p.r.key, "k");

    const ch_mc_cmd cmds[] = {CH_MC_CMD_ADD, CH_MC_CMD_REPLACE, CH_MC_CMD_APPEND,
                              CH_MC_CMD_PREPEND};
    const char *const lines[] = {"add k 0 0 2 noreply\r\nab\r\n", "replace k 0 0 2 noreply\r\nab\r\n",
                                 "append k 0 0 2 noreply\r\nab\r\n",
                                 "prepend k 0 0 2 noreply\r\nab\r\n"};
    for (size_t i = 0; i < 4; i++) {
        p = parse(lines[i], strlen(lines[i]));
        assert_int_equal(p.st, CH_MC_OK);
        assert_int_equal(p.r.cmd, cmds[i]);
        assert_int_equal(p.consumed, strlen(lines[i]));
        span_eq(p.src, p.r.noreply, "noreply");
        span_eq(p.src, p.r.data, "ab");
        assert_int_equal(p.r.ntokens, 6);
        assert_true(ch_mc_cmd_props(cmds[i]) & CH_MC_P_STORAGE);
        assert_true(ch_mc_cmd_props(cmds[i]) & CH_MC_P_NOREPLY);
    }
    /* A zero-length block is just "\r\n". */
    p = expect_ok(S("set k 0 0 0\r\n\r\n"), CH_MC_CMD_SET, T("set", "k", "0", "0", "0"));
    assert_int_equal(p.r.data.len, 0);
    assert_int_equal(p.r.data.off, 13);
    /* cas carries <cas unique>; a negative exptime is valid (already expired). */
    p = expect_ok(S("cas k 4294967295 -1 1 99 noreply\r\nx\r\n"), CH_MC_CMD_CAS,
                  T("cas", "k", "4294967295", "-1", "1", "99", "noreply"));
    assert_int_equal(p.r.cas, 99);
    assert_int_equal(p.r.flags, 4294967295u);
    assert_int_equal(p.r.exptime, -1);
    span_eq(p.src, p.r.noreply, "noreply");
    /* The data may hold anything, "\r\n" included: it is skipped by length. */
    p = expect_ok(S("set k 0 0 4\r\n\r\n\r\n\r\n"), CH_MC_CMD_SET, T("set", "k", "0", "0", "4"));
    span_eq(p.src, p.r.data, "\r\n\r\n");
}

static void test_storage_errors(void **state)
{
    (void)state;
    /* Line errors once <bytes> parsed: the line and the data block are skipped (memcached's
     * swallow). "set k 0 0 1 foo\r\n" is 17 bytes, + "x\r\n". */
    expect_fail(S("set k 0 0 1 foo\r\nx\r\n"), NULL, CH_MC_ERROR, 20, "bad command line format");
    expect_fail(S("cas k 0 0 1\r\nx\r\n"), NULL, CH_MC_ERROR, 16, "bad command line format");
    expect_fail(S("set k x 0 1\r\nz\r\n"), NULL, CH_MC_ERROR, 16, "bad command line format");
    expect_fail(S("set k -1 0 1\r\nz\r\n"), NULL, CH_MC_ERROR, 17, "bad command line format");
    expect_fail(S("set k 4294967296 0 1\r\nz\r\n"), NULL, CH_MC_ERROR, 25,
                "bad command line format");
    expect_fail(S("set k 0 x 1\r\nz\r\n"), NULL, CH_MC_ERROR, 16, "bad command line format");
    expect_fail(S("cas k 0 0 1 -5\r\nz\r\n"), NULL, CH_MC_ERROR, 19, "bad command line format");
    /* ... also before the data arrived: the skip runs past what is here. */
    expect_fail(S("set k 0 0 10 foo\r\n"), NULL, CH_MC_ERROR, 18 + 12, "bad command line format");
    /* <bytes> negative or not a number: nothing to swallow, the line alone is skipped. */
    expect_fail(S("set k 0 0 -1\r\n"), NULL, CH_MC_ERROR, 14, "bad command line format");
    expect_fail(S("set k 0 0 x\r\nab\r\n"), NULL, CH_MC_ERROR, 13, "bad command line format");
    expect_fail(S("set k 0 0\r\n"), NULL, CH_MC_ERROR, 11, "bad command line format");
    expect_fail(S("set\r\n"), NULL, CH_MC_ERROR, 5, "bad command line format");
    /* A block not ended by "\r\n": memcached answers "bad data chunk" and skips bytes + 2. */
    expect_fail(S("set k 0 0 2\r\nabc\r\n"), NULL, CH_MC_ERROR, 17, "bad data chunk");
    expect_fail(S("set k 0 0 2\r\nab\rX"), NULL, CH_MC_ERROR, 17, "bad data chunk");
    expect_fail(S("set k 0 0 2\r\nab\n\n"), NULL, CH_MC_ERROR, 17, "bad data chunk");
    /* An early verdict: the byte where "\r" belongs is already wrong. */
    expect_fail(S("set k 0 0 2\r\nabc"), NULL, CH_MC_ERROR, 17, "bad data chunk");
    /* Over max_item (1 MiB): refused, swallowed. "set k 0 0 1048577\r\n" is 19 bytes. */
    expect_fail(S("set k 0 0 1048577\r\n"), NULL, CH_MC_ERROR, 19 + 1048577 + 2,
                "object too large for cache");
    /* Exactly max_item: waits for line + bytes + 2. */
    preq p = parse(S("set k 0 0 1048576\r\n"));
    assert_int_equal(p.st, CH_MC_INCOMPLETE);
    assert_int_equal(p.need, 19 + 1048576 + 2);
    /* 2^40: an early verdict from the line alone; the connection cannot be resynchronized. */
    expect_fail(S("set k 0 0 1099511627776\r\n"), NULL, CH_MC_CLOSE, 0,
                "object too large for cache");
    expect_fail(S("ms k 1099511627776\r\n"), NULL, CH_MC_CLOSE, 0, "object too large for cache");
    expect_fail(S("set k 0 0 99999999999999999999999\r\n"), NULL, CH_MC_CLOSE, 0,
                "object too large for cache");
    /* Over max_swallow but representable: closed too. */
    ch_mc_limits l;
    ch_mc_limits_init(&l);
    l.max_item = 10;
    l.max_swallow = 100;
    expect_fail(S("set k 0 0 100\r\n"), &l, CH_MC_ERROR, 15 + 102, "object too large for cache");
    expect_fail(S("set k 0 0 101\r\n"), &l, CH_MC_CLOSE, 0, "object too large for cache");
    p = parse_lim(S("set k 0 0 10\r\n0123456789\r\n"), &l);
    assert_int_equal(p.st, CH_MC_OK);
}

static void test_keyed(void **state)
{
    (void)state;
    preq p = expect_ok(S("incr n 5\r\n"), CH_MC_CMD_INCR, T("incr", "n", "5"));
    assert_int_equal(p.r.delta, 5);
    span_eq(p.src, p.r.key, "n");
    p = expect_ok(S("decr n 18446744073709551615 noreply\r\n"), CH_MC_CMD_DECR,
                  T("decr", "n", "18446744073709551615", "noreply"));
    assert_true(p.r.delta == UINT64_MAX);
    span_eq(p.src, p.r.noreply, "noreply");
    expect_fail(S("incr n -1\r\n"), NULL, CH_MC_ERROR, 11, "invalid numeric delta argument");
    expect_fail(S("incr n 18446744073709551616\r\n"), NULL, CH_MC_ERROR, 29,
                "invalid numeric delta argument");
    expect_fail(S("incr n\r\n"), NULL, CH_MC_ERROR, 8, "bad command line format");
    expect_fail(S("incr n 1 2\r\n"), NULL, CH_MC_ERROR, 12, "bad command line format");

    p = expect_ok(S("delete k\r\n"), CH_MC_CMD_DELETE, T("delete", "k"));
    assert_int_equal(p.r.noreply.len, 0);
    p = expect_ok(S("delete k noreply\r\n"), CH_MC_CMD_DELETE, T("delete", "k", "noreply"));
    span_eq(p.src, p.r.noreply, "noreply");
    expect_ok(S("delete k 0\r\n"), CH_MC_CMD_DELETE, T("delete", "k", "0"));
    p = expect_ok(S("delete k 0 noreply\r\n"), CH_MC_CMD_DELETE, T("delete", "k", "0", "noreply"));
    span_eq(p.src, p.r.noreply, "noreply");
    expect_fail(S("delete k 5\r\n"), NULL, CH_MC_ERROR, 12,
                "bad command line format.  Usage: delete <key> [noreply]");
    expect_fail(S("delete\r\n"), NULL, CH_MC_ERROR, 8, "bad command line format");

    p = expect_ok(S("touch k 10\r\n"), CH_MC_CMD_TOUCH, T("touch", "k", "10"));
    assert_int_equal(p.r.exptime, 10);
    p = expect_ok(S("touch k -5 noreply\r\n"), CH_MC_CMD_TOUCH, T("touch", "k", "-5", "noreply"));
    assert_int_equal(p.r.exptime, -5);
    expect_fail(S("touch k x\r\n"), NULL, CH_MC_ERROR, 11, "invalid exptime argument");
    expect_fail(S("touch k\r\n"), NULL, CH_MC_ERROR, 9, "bad command line format");
}

static void test_local_refused_unknown(void **state)
{
    (void)state;
    expect_ok(S("version\r\n"), CH_MC_CMD_VERSION, T("version"));
    expect_ok(S("quit\n"), CH_MC_CMD_QUIT, T("quit"));
    assert_true(ch_mc_cmd_props(CH_MC_CMD_VERSION) & CH_MC_P_LOCAL);
    assert_true(ch_mc_cmd_props(CH_MC_CMD_QUIT) & CH_MC_P_LOCAL);
    expect_fail(S("version x\r\n"), NULL, CH_MC_ERROR, 11, "bad command line format");

    /* Recognised, refused by the proxy: OK with their tokens. */
    static const struct {
        const char *line;
        ch_mc_cmd cmd;
    } R[] = {{"stats\r\n", CH_MC_CMD_STATS},
             {"stats items\r\n", CH_MC_CMD_STATS},
             {"flush_all 0\r\n", CH_MC_CMD_FLUSH_ALL},
             {"verbosity 1\r\n", CH_MC_CMD_VERBOSITY},
             {"shutdown\r\n", CH_MC_CMD_SHUTDOWN},
             {"cache_memlimit 100\r\n", CH_MC_CMD_CACHE_MEMLIMIT},
             {"slabs reassign 1 2\r\n", CH_MC_CMD_SLABS},
             {"lru_crawler metadump all\r\n", CH_MC_CMD_LRU_CRAWLER},
             {"lru mode flat\r\n", CH_MC_CMD_LRU},
             {"watch\r\n", CH_MC_CMD_WATCH},
             {"extstore x\r\n", CH_MC_CMD_EXTSTORE},
             {"misbehave\r\n", CH_MC_CMD_MISBEHAVE},
             {"debugtime 1\r\n", CH_MC_CMD_DEBUGTIME}};
    for (size_t i = 0; i < sizeof R / sizeof R[0]; i++) {
        preq p = parse(R[i].line, strlen(R[i].line));
        assert_int_equal(p.st, CH_MC_OK);
        assert_int_equal(p.r.cmd, R[i].cmd);
        assert_int_equal(p.consumed, strlen(R[i].line));
        assert_true(ch_mc_cmd_props(R[i].cmd) & CH_MC_P_REFUSED);
        assert_int_equal(p.r.nkeys, 0);
    }
    preq p = expect_ok(S("flush_all noreply\r\n"), CH_MC_CMD_FLUSH_ALL, T("flush_all", "noreply"));
    span_eq(p.src, p.r.noreply, "noreply");
    assert_string_equal(ch_mc_cmd_name(CH_MC_CMD_FLUSH_ALL), "flush_all");
    assert_string_equal(ch_mc_cmd_name(CH_MC_CMD_UNKNOWN), "");

    /* Unknown (memcached answers ERROR): OK, cmd UNKNOWN, the line consumed. Commands are case
     * sensitive, as in memcached. */
    p = expect_ok(S("bogus a b\r\n"), CH_MC_CMD_UNKNOWN, T("bogus", "a", "b"));
    assert_int_equal(p.r.nkeys, 0);
    expect_ok(S("GET foo\r\n"), CH_MC_CMD_UNKNOWN, T("GET", "foo"));
    expect_ok(S("getx foo\r\n"), CH_MC_CMD_UNKNOWN, T("getx", "foo"));
    p = parse(S("\r\n"));
    assert_int_equal(p.st, CH_MC_OK);
    assert_int_equal(p.r.cmd, CH_MC_CMD_UNKNOWN);
    assert_int_equal(p.r.ntokens, 0);
    assert_int_equal(p.consumed, 2);
    p = parse(S("\n"));
    assert_int_equal(p.st, CH_MC_OK);
    assert_int_equal(p.consumed, 1);
}

static void test_keys(void **state)
{
    (void)state;
    char line[600];
    char key[300];
    memset(key, 'k', sizeof key);
    /* 250 bytes (KEY_MAX_LENGTH): fine for every keyed command; 251: refused, kept. */
    int n = snprintf(line, sizeof line, "get %.250s\r\n", key);
    preq p = parse(line, (size_t)n);
    assert_int_equal(p.st, CH_MC_OK);
    assert_int_equal(p.r.key.len, 250);
    n = snprintf(line, sizeof line, "get a %.251s\r\n", key);
    expect_fail(line, (size_t)n, NULL, CH_MC_ERROR, (size_t)n, "key too long");
    n = snprintf(line, sizeof line, "set %.251s 0 0 1\r\nx\r\n", key);
    expect_fail(line, (size_t)n, NULL, CH_MC_ERROR, (size_t)n, "key too long");
    n = snprintf(line, sizeof line, "delete %.251s\r\n", key);
    expect_fail(line, (size_t)n, NULL, CH_MC_ERROR, (size_t)n, "key too long");
    n = snprintf(line, sizeof line, "mg %.251s v\r\n", key);
    expect_fail(line, (size_t)n, NULL, CH_MC_ERROR, (size_t)n, "key too long");
    n = snprintf(line, sizeof line, "mg %.250s v\r\n", key);
    assert_int_equal(parse(line, (size_t)n).st, CH_MC_OK);
    /* Control characters (and DEL) in keys are refused; bytes >= 0x80 (UTF-8) are not. */
    expect_fail(S("get a\x01z\r\n"), NULL, CH_MC_ERROR, 9, "key contains control characters");
    expect_fail(S("get a\tz\r\n"), NULL, CH_MC_ERROR, 9, "key contains control characters");
    expect_fail(S("get a\x7fz\r\n"), NULL, CH_MC_ERROR, 9, "key contains control characters");
    expect_fail(S("get a\rz\r\n"), NULL, CH_MC_ERROR, 9, "key contains control characters");
    expect_fail(S("touch a\x1b 1\r\n"), NULL, CH_MC_ERROR, 12, "key contains control characters");
    expect_fail(S("set a\x02 0 0 1\r\nx\r\n"), NULL, CH_MC_ERROR, 17,
                "key contains control characters");
    expect_fail(S("md a\x03\r\n"), NULL, CH_MC_ERROR, 7, "key contains control characters");
    expect_ok(S("get caf\xc3\xa9\r\n"), CH_MC_CMD_GET, T("get", "caf\xc3\xa9"));
}

static void test_max_keys_and_tokens(void **state)
{
    (void)state;
    ch_mc_limits l;
    ch_mc_limits_init(&l);
    l.max_keys = 3;
    preq p = parse_lim(S("get a b c\r\n"), &l);
    assert_int_equal(p.st, CH_MC_OK);
    assert_int_equal(p.r.nkeys, 3);
    expect_fail(S("get a b c d\r\n"), &l, CH_MC_ERROR, 13, "too many keys");
    expect_fail(S("gat 1 a b c d\r\n"), &l, CH_MC_ERROR, 15, "too many keys");

    /* More tokens than the caller's array: all counted, the first tok_cap stored. */
    p = parse_cap(S("get a b c d e\r\n"), NULL, 2);
    assert_int_equal(p.st, CH_MC_OK);
    assert_int_equal(p.r.ntokens, 6);
    assert_int_equal(p.r.nkeys, 5);
    tok_eq(&p, 0, "get");
    tok_eq(&p, 1, "a");
    span_eq(p.src, p.r.key, "a");
    p = parse_cap(S("get a b\r\n"), NULL, 0);
    assert_int_equal(p.st, CH_MC_OK);
    assert_int_equal(p.r.ntokens, 3);

    /* Meta lines: 24 tokens (memcached's tokenizer) and no more. */
    char line[200] = "mg k";
    for (int i = 0; i < 22; i++)
        strcat(line, " v");
    strcat(line, "\r\n");
    p = parse(line, strlen(line));
    assert_int_equal(p.st, CH_MC_OK);
    assert_int_equal(p.r.ntokens, 24);
    char line2[sizeof line + 8];
    snprintf(line2, sizeof line2, "mg k v%s", line + 4);
    expect_fail(line2, strlen(line2), NULL, CH_MC_ERROR, strlen(line2), "too many tokens");
}

static void test_line_length(void **state)
{
    (void)state;
    char *b = malloc(5000);
    assert_non_null(b);
    /* A line of 2048 bytes, "\r\n" included, is fine; 2049 is not (no "\n" in the first 2048
     * bytes: closed, as memcached closes such a connection). */
    memset(b, 'x', 5000);
    memcpy(b, "bogus ", 6);
    b[2046] = '\r';
    b[2047] = '\n';
    preq p = parse(b, 2048);
    assert_int_equal(p.st, CH_MC_OK);
    assert_int_equal(p.consumed, 2048);
    b[2046] = 'x';
    b[2047] = '\r';
    b[2048] = '\n';
    expect_fail(b, 2049, NULL, CH_MC_CLOSE, 0, "line too long");
    expect_fail(b, 2048, NULL, CH_MC_CLOSE, 0, "line too long");
    p = parse(b, 2047);
    assert_int_equal(p.st, CH_MC_INCOMPLETE);
    assert_int_equal(p.need, 2048);

    /* get/gets/gat/gats may run past 2048 (memcached grows its buffer only for multigets):
     * 600 keys "k000".."k599" of 4 bytes: over 3000 bytes. */
    const char *const cmds[] = {"get", "gets", "gat 0", "gats 0"};
    for (size_t c = 0; c < 4; c++) {
        size_t n = (size_t)sprintf(b, "%s", cmds[c]);
        for (int i = 0; i < 600; i++)
            n += (size_t)sprintf(b + n, " k%03d", i);
        /* Without its end it waits (need len + 1) until max_get_line. */
        p = parse(b, n);
        assert_int_equal(p.st, CH_MC_INCOMPLETE);
        assert_int_equal(p.need, n + 1);
        memcpy(b + n, "\r\n", 2);
        p = parse(b, n + 2);
        assert_int_equal(p.st, CH_MC_OK);
        assert_int_equal(p.r.nkeys, 600);
        assert_int_equal(p.consumed, n + 2);
        ch_mc_limits l;
        ch_mc_limits_init(&l);
        l.max_get_line = 2536; /* < n */
        expect_fail(b, n, &l, CH_MC_CLOSE, 0, "line too long");
    }
    /* A non-get line is not let past 2048 even with its "\n" further on. */
    memset(b, 'x', 5000);
    memcpy(b, "set ", 4);
    memcpy(b + 2100, "\r\n", 2);
    expect_fail(b, 2102, NULL, CH_MC_CLOSE, 0, "line too long");
    free(b);
}

/* ---- requests: meta ------------------------------------------------------------------------ */

static void test_meta_get(void **state)
{
    (void)state;
    preq p = expect_ok(S("mg foo v k O123 q t\r\n"), CH_MC_CMD_MG,
                       T("mg", "foo", "v", "k", "O123", "q", "t"));
    span_eq(p.src, p.r.key, "foo");
    assert_int_equal(p.r.key_first, 1);
    assert_int_equal(p.r.nkeys, 1);
    span_eq(p.src, p.r.quiet, "q");
    assert_int_equal(p.r.quiet.off, 16);
    span_eq(p.src, p.r.opaque, "O123");
    assert_false(p.r.b64);
    assert_true(p.r.mflags == (CH_MC_FLAG('v') | CH_MC_FLAG('k') | CH_MC_FLAG('O') |
                               CH_MC_FLAG('q') | CH_MC_FLAG('t')));
    assert_true(ch_mc_cmd_props(CH_MC_CMD_MG) & CH_MC_P_META);
    /* Every flag protocol.txt lists for mg, and the P/L proxy hints. */
    p = expect_ok(S("mg Zm9v b c C5 f h k l O1 q s t u v E9 N30 R-1 T10 Pp L/x\r\n"), CH_MC_CMD_MG,
                  T("mg", "Zm9v", "b", "c", "C5", "f", "h", "k", "l", "O1", "q", "s", "t", "u",
                    "v", "E9", "N30", "R-1", "T10", "Pp", "L/x"));
    assert_int_equal(p.r.exptime, 10);
    assert_int_equal(p.r.cas, 5);
    assert_true(p.r.b64);
    span_eq(p.src, p.r.key, "Zm9v");
    /* Flags that memcached's mg does not take, or malformed ones. */
    expect_fail(S("mg k zz\r\n"), NULL, CH_MC_ERROR, 9, "invalid flag");
    expect_fail(S("mg k Z\r\n"), NULL, CH_MC_ERROR, 8, "invalid flag");  /* reply-only */
    expect_fail(S("mg k MS\r\n"), NULL, CH_MC_ERROR, 9, "invalid flag"); /* ms/ma only */
    expect_fail(S("mg k F1\r\n"), NULL, CH_MC_ERROR, 9, "invalid flag");
    expect_fail(S("mg k 1\r\n"), NULL, CH_MC_ERROR, 8, "invalid flag");
    expect_fail(S("mg k vv\r\n"), NULL, CH_MC_ERROR, 9, "invalid flag");
    expect_fail(S("mg k Tx\r\n"), NULL, CH_MC_ERROR, 9, "bad token in command line format");
    expect_fail(S("mg k T\r\n"), NULL, CH_MC_ERROR, 8, "bad token in command line format");
    expect_fail(S("mg k N2147483648\r\n"), NULL, CH_MC_ERROR, 18,
                "bad token in command line format");
    expect_fail(S("mg k Cx\r\n"), NULL, CH_MC_ERROR, 9, "bad token in command line format");
    expect_fail(S("mg k C-1\r\n"), NULL, CH_MC_ERROR, 10, "bad token in command line format");
    expect_fail(S("mg\r\n"), NULL, CH_MC_ERROR, 4, "bad command line format");
    /* Opaque tokens: up to 32 bytes (protocol.txt). */
    char line[100];
    int n = snprintf(line, sizeof line, "mg k O%s\r\n", "0123456789abcdef0123456789abcdef");
    p = parse(line, (size_t)n);
    assert_int_equal(p.st, CH_MC_OK);
    assert_int_equal(p.r.opaque.len, 33);
    n = snprintf(line, sizeof line, "mg k O%s\r\n", "0123456789abcdef0123456789abcdefX");
    expect_fail(line, (size_t)n, NULL, CH_MC_ERROR, (size_t)n, "opaque token too long");
}

static void test_meta_set(void **state)
{
    (void)state;
    /* "ms foo 3 T10 F5 MS c I k O1 q s C7 E8 N9\r\n" is 42 bytes, then "bar\r\n". */
    preq p = expect_ok(S("ms foo 3 T10 F5 MS c I k O1 q s C7 E8 N9\r\nbar\r\n"), CH_MC_CMD_MS,
                       T("ms", "foo", "3", "T10", "F5", "MS", "c", "I", "k", "O1", "q", "s", "C7",
                         "E8", "N9"));
    assert_int_equal(p.r.line_len, 42);
    assert_int_equal(p.r.bytes, 3);
    span_eq(p.src, p.r.data, "bar");
    assert_int_equal(p.r.exptime, 10);
    assert_int_equal(p.r.flags, 5);
    assert_int_equal(p.r.mode, 'S');
    assert_int_equal(p.r.cas, 7);
    span_eq(p.src, p.r.quiet, "q");
    span_eq(p.src, p.r.opaque, "O1");
    span_eq(p.src, p.r.key, "foo");
    assert_true(ch_mc_cmd_props(CH_MC_CMD_MS) & CH_MC_P_STORAGE);
    /* Base64 key and every mode of protocol.txt: E A P R S. */
    const char modes[] = "EAPRS";
    for (int i = 0; i < 5; i++) {
        char line[64];
        int n = snprintf(line, sizeof line, "ms Zm9v 2 b M%c\r\nhi\r\n", modes[i]);
        p = parse(line, (size_t)n);
        assert_int_equal(p.st, CH_MC_OK);
        assert_int_equal(p.r.mode, modes[i]);
        assert_true(p.r.b64);
    }
    /* Errors after <datalen> parsed swallow the block (memcached answered "invalid mode for ms
     * M token" and nothing for "x\r\n"). "ms k 1 MX\r\n" is 11 bytes. */
    expect_fail(S("ms k 1 MX\r\nx\r\n"), NULL, CH_MC_ERROR, 14, "invalid mode for ms M token");
    expect_fail(S("ms k 1 Ms\r\nx\r\n"), NULL, CH_MC_ERROR, 14, "invalid mode for ms M token");
    expect_fail(S("ms k 1 MSS\r\nx\r\n"), NULL, CH_MC_ERROR, 15, "invalid mode for ms M token");
    expect_fail(S("ms k 1 v\r\nx\r\n"), NULL, CH_MC_ERROR, 13, "invalid flag");
    expect_fail(S("ms k 1 Fx\r\nx\r\n"), NULL, CH_MC_ERROR, 14, "bad token in command line format");
    expect_fail(S("ms k 1 F4294967296\r\nx\r\n"), NULL, CH_MC_ERROR, 23,
                "bad token in command line format");
    expect_fail(S("ms k 2\r\nabc\r\n"), NULL, CH_MC_ERROR, 12, "bad data chunk");
    /* No usable <datalen>: the line alone. */
    expect_fail(S("ms k\r\n"), NULL, CH_MC_ERROR, 6, "bad command line format");
    expect_fail(S("ms k x\r\n"), NULL, CH_MC_ERROR, 8, "bad command line format");
    expect_fail(S("ms k -1\r\n"), NULL, CH_MC_ERROR, 9, "bad command line format");
    /* Quiet. */
    p = expect_ok(S("ms k 1 q\r\nz\r\n"), CH_MC_CMD_MS, T("ms", "k", "1", "q"));
    span_eq(p.src, p.r.quiet, "q");
    /* An item of max_item + 1: swallowed. */
    expect_fail(S("ms k 1048577 T0\r\n"), NULL, CH_MC_ERROR, 17 + 1048577 + 2,
                "object too large for cache");
}

static void test_meta_other(void **state)
{
    (void)state;
    /* md: b C E I k O q T x (protocol.txt). */
    preq p = expect_ok(S("md Zm9v q I T30 x C3 E4 k O9 b\r\n"), CH_MC_CMD_MD,
                       T("md", "Zm9v", "q", "I", "T30", "x", "C3", "E4", "k", "O9", "b"));
    assert_true(p.r.b64);
    span_eq(p.src, p.r.quiet, "q");
    span_eq(p.src, p.r.opaque, "O9");
    assert_int_equal(p.r.exptime, 30);
    assert_int_equal(p.r.cas, 3);
    expect_fail(S("md k v\r\n"), NULL, CH_MC_ERROR, 8, "invalid flag");

    /* ma: b C E N J D T M O q t c v k; modes I + D -. */
    p = expect_ok(S("ma n MD D5 J10 N0 v q t c k O1 C2 E3 T4\r\n"), CH_MC_CMD_MA,
                  T("ma", "n", "MD", "D5", "J10", "N0", "v", "q", "t", "c", "k", "O1", "C2", "E3",
                    "T4"));
    assert_int_equal(p.r.mode, 'D');
    assert_int_equal(p.r.delta, 5);
    span_eq(p.src, p.r.quiet, "q");
    const char modes[] = "I+D-";
    for (int i = 0; i < 4; i++) {
        char line[32];
        int n = snprintf(line, sizeof line, "ma n M%c\r\n", modes[i]);
        p = parse(line, (size_t)n);
        assert_int_equal(p.st, CH_MC_OK);
        assert_int_equal(p.r.mode, modes[i]);
    }
    expect_fail(S("ma n MS\r\n"), NULL, CH_MC_ERROR, 9, "invalid mode for ma M token");
    expect_fail(S("ma n Dx\r\n"), NULL, CH_MC_ERROR, 9, "invalid numeric delta value");
    expect_fail(S("ma n J-1\r\n"), NULL, CH_MC_ERROR, 10, "invalid numeric initial value");
    expect_fail(S("ma n F1\r\n"), NULL, CH_MC_ERROR, 9, "invalid flag");

    /* mn: alone; me: a key and optionally b. */
    p = expect_ok(S("mn\r\n"), CH_MC_CMD_MN, T("mn"));
    assert_int_equal(p.r.nkeys, 0);
    expect_fail(S("mn x\r\n"), NULL, CH_MC_ERROR, 6, "bad command line format");
    p = expect_ok(S("me foo\r\n"), CH_MC_CMD_ME, T("me", "foo"));
    span_eq(p.src, p.r.key, "foo");
    p = expect_ok(S("me Zm9v b\r\n"), CH_MC_CMD_ME, T("me", "Zm9v", "b"));
    assert_true(p.r.b64);
    expect_fail(S("me foo v\r\n"), NULL, CH_MC_ERROR, 10, "invalid flag");
    expect_fail(S("me\r\n"), NULL, CH_MC_ERROR, 4, "bad command line format");
}

static void test_meta_b64_keys(void **state)
{
    (void)state;
    /* Not base64, or not canonical: memcached's "error decoding key". */
    expect_fail(S("mg Zm9 b\r\n"), NULL, CH_MC_ERROR, 10, "error decoding key");
    expect_fail(S("mg Zh== b\r\n"), NULL, CH_MC_ERROR, 11, "error decoding key");
    expect_fail(S("mg ==== b\r\n"), NULL, CH_MC_ERROR, 11, "error decoding key");
    expect_fail(S("mg Zm9v! b\r\n"), NULL, CH_MC_ERROR, 12, "error decoding key");
    /* The decoded length is what max_key bounds: 250 bytes (336 base64 chars) pass, 251 not. */
    char raw[260], enc[400], line[500];
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    memset(raw, 0xab, sizeof raw);
    for (size_t want = 250; want <= 251; want++) {
        size_t e = 0;
        for (size_t i = 0; i < want; i += 3) {
            unsigned v = (unsigned char)raw[i] << 16;
            if (i + 1 < want)
                v |= (unsigned char)raw[i + 1] << 8;
            if (i + 2 < want)
                v |= (unsigned char)raw[i + 2];
            enc[e++] = A[v >> 18 & 63];
            enc[e++] = A[v >> 12 & 63];
            enc[e++] = i + 1 < want ? A[v >> 6 & 63] : '=';
            enc[e++] = i + 2 < want ? A[v & 63] : '=';
        }
        int n = snprintf(line, sizeof line, "mg %.*s b v\r\n", (int)e, enc);
        preq p = parse(line, (size_t)n);
        if (want == 250) {
            assert_int_equal(p.st, CH_MC_OK);
            assert_int_equal(p.r.key.len, 336);
            unsigned char out[300];
            assert_int_equal(ch_mc_b64_decode(line + p.r.key.off, p.r.key.len, out, sizeof out),
                             250);
            assert_memory_equal(out, raw, 250);
        } else {
            expect_fail(line, (size_t)n, NULL, CH_MC_ERROR, (size_t)n, "key too long");
        }
    }
}

static void test_b64_decode(void **state)
{
    (void)state;
    /* RFC 4648 section 10. */
    static const struct {
        const char *enc, *dec;
    } V[] = {{"", ""},         {"Zg==", "f"},         {"Zm8=", "fo"},      {"Zm9v", "foo"},
             {"Zm9vYg==", "foob"}, {"Zm9vYmE=", "fooba"}, {"Zm9vYmFy", "foobar"}};
    for (size_t i = 0; i < sizeof V / sizeof V[0]; i++) {
        unsigned char out[16];
        long n = ch_mc_b64_decode(V[i].enc, strlen(V[i].enc), out, sizeof out);
        assert_int_equal(n, (long)strlen(V[i].dec));
        assert_memory_equal(out, V[i].dec, (size_t)n);
    }
    unsigned char out[16];
    assert_int_equal(ch_mc_b64_decode(S("+/+/"), out, sizeof out), 3);
    assert_int_equal(out[0], 0xfb);
    assert_int_equal(out[1], 0xff);
    assert_int_equal(out[2], 0xbf);
    static const char *const bad[] = {"Zg=", "Zm9", "Zh==", "Zm9=", "Z===", "Zm=v", "=Zm9",
                                      "Zg==Zg==", "Zm9v!A==", "Zm-v", "Zm_v", "Zm 9"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (ch_mc_b64_decode(bad[i], strlen(bad[i]), out, sizeof out) != -1)
            fail_msg("\"%s\" decoded", bad[i]);
    /* Too small a destination. */
    assert_int_equal(ch_mc_b64_decode(S("Zm9vYmFy"), out, 5), -1);
    assert_int_equal(ch_mc_b64_decode(S("Zm9vYmFy"), out, 6), 6);

    /* Routing: the text key and the decoded meta key are the same bytes. */
    preq t = parse(S("get foo\r\n"));
    preq m = parse(S("mg Zm9v b v\r\n"));
    assert_int_equal(t.st, CH_MC_OK);
    assert_int_equal(m.st, CH_MC_OK);
    assert_true(m.r.b64);
    long n = ch_mc_b64_decode("mg Zm9v b v\r\n" + m.r.key.off, m.r.key.len, out, sizeof out);
    assert_int_equal(n, t.r.key.len);
    assert_memory_equal(out, "get foo\r\n" + t.r.key.off, (size_t)n);
}

/* ---- requests: split feeds ----------------------------------------------------------------- */

/* Every prefix of the pipeline s (requests of the given lengths, one after another) is
 * INCOMPLETE with len < need <= the first request's length; need is exact where the contract
 * fixes it (len + 1 inside a line, line + bytes + 2 for a block); the caller's loop (wait for
 * need bytes, retry) reaches the whole request; then the rest of the pipeline the same. */
static void split_pipeline(const char *s, size_t n, const size_t *lens, size_t count)
{
    size_t off = 0;
    for (size_t k = 0; k < count; k++) {
        const char *q = s + off;
        const size_t total = lens[k];
        assert_true(off + total <= n);
        const char *nl = memchr(q, '\n', total);
        assert_non_null(nl);
        const size_t line_len = (size_t)(nl - q) + 1;
        for (size_t p = 0; p < total; p++) {
            preq r = parse(q, p);
            if (r.st != CH_MC_INCOMPLETE)
                fail_msg("request %zu, prefix %zu: status %d \"%s\"", k, p, r.st, r.err);
            assert_true(r.need > p && r.need <= total);
            if (p < line_len)
                assert_int_equal(r.need, p + 1);
            else
                assert_int_equal(r.need, total);
        }
        size_t p = 0, steps = 0;
        for (;;) {
            preq r = parse(q, p);
            if (r.st == CH_MC_OK) {
                assert_int_equal(p, total);
                assert_int_equal(r.consumed, total);
                break;
            }
            assert_int_equal(r.st, CH_MC_INCOMPLETE);
            p = r.need;
            steps++;
        }
        /* A whole pipeline parses one request at a time. */
        preq r = parse(q, n - off);
        assert_int_equal(r.st, CH_MC_OK);
        assert_int_equal(r.consumed, total);
        off += total;
    }
    assert_int_equal(off, n);
}

static void test_split_feeds(void **state)
{
    (void)state;
    static const char pipe[] = "get foo bar\r\n"                /* 13 */
                               "set k 0 0 5 noreply\r\nhello\r\n" /* 21 + 7 = 28 */
                               "gat 10 a\n"                     /* 9 */
                               "ms Zm9v 3 b T0 q\r\nxyz\r\n"      /* 18 + 5 = 23 */
                               "cas k 1 2 0 3\r\n\r\n"            /* 15 + 2 = 17 */
                               "mg k v q O1\r\n"                  /* 13 */
                               "incr n 1\r\n"                     /* 10 */
                               "mn\r\n";                          /* 4 */
    const size_t lens[] = {13, 28, 9, 23, 17, 13, 10, 4};
    split_pipeline(pipe, sizeof pipe - 1, lens, 8);
    /* A request already proven bad needs no more bytes: a bad data chunk at the first wrong
     * byte. */
    preq r = parse(S("set k 0 0 3\r\nab"));
    assert_int_equal(r.st, CH_MC_INCOMPLETE);
    assert_int_equal(r.need, 18);
    r = parse(S("set k 0 0 3\r\nabcd"));
    assert_int_equal(r.st, CH_MC_ERROR);
    assert_int_equal(r.consumed, 18);
}

/* ---- replies ------------------------------------------------------------------------------- */

typedef struct prep {
    ch_mc_status st;
    ch_mc_reply r;
    size_t need;
    char err[160];
} prep;

static prep scan_lim(const char *s, size_t n, ch_mc_cmd cmd, const ch_mc_limits *lim)
{
    prep p;
    memset(&p, 0, sizeof p);
    char *b = dup_exact(s, n);
    p.need = 12345;
    p.st = ch_mc_scan_reply(b, n, cmd, lim, &p.r, &p.need, p.err, sizeof p.err);
    free(b);
    if (p.st == CH_MC_OK) {
        assert_true(p.r.len > 0 && p.r.len <= n);
        assert_int_equal(p.need, 0);
    } else if (p.st == CH_MC_INCOMPLETE) {
        assert_true(p.need > n);
    } else {
        assert_int_equal(p.st, CH_MC_CLOSE);
        assert_true(strlen(p.err) > 0);
    }
    return p;
}

static prep scan(const char *s, size_t n, ch_mc_cmd cmd)
{
    return scan_lim(s, n, cmd, NULL);
}

/* s is exactly one reply to cmd with this code and class; every prefix of it is INCOMPLETE
 * with len < need <= its length. */
static prep expect_reply(const char *s, size_t n, ch_mc_cmd cmd, ch_mc_code code, ch_mc_class cls)
{
    prep p = scan(s, n, cmd);
    if (p.st != CH_MC_OK)
        fail_msg("\"%.*s\" to %s: status %d \"%s\"", (int)n, s, ch_mc_cmd_name(cmd), p.st, p.err);
    assert_int_equal(p.r.len, n);
    assert_int_equal(p.r.code, code);
    assert_int_equal(p.r.cls, cls);
    for (size_t k = 0; k < n; k++) {
        prep q = scan(s, k, cmd);
        if (q.st != CH_MC_INCOMPLETE)
            fail_msg("prefix %zu of \"%.*s\": status %d \"%s\"", k, (int)n, s, q.st, q.err);
        assert_true(q.need > k && q.need <= n);
    }
    return p;
}

static void expect_bad_reply(const char *s, size_t n, ch_mc_cmd cmd)
{
    prep p = scan(s, n, cmd);
    if (p.st != CH_MC_CLOSE)
        fail_msg("\"%.*s\" to %s: status %d, expected CLOSE", (int)n, s, ch_mc_cmd_name(cmd),
                 p.st);
}

static void test_reply_get(void **state)
{
    (void)state;
    const char *src;
    prep p = expect_reply(S("END\r\n"), CH_MC_CMD_GET, CH_MC_R_END, CH_MC_C_MISS);
    assert_int_equal(p.r.integer, 0);
    src = "VALUE foo 5 3\r\nbar\r\nEND\r\n";
    p = expect_reply(src, strlen(src), CH_MC_CMD_GET, CH_MC_R_VALUES, CH_MC_C_HIT);
    assert_int_equal(p.r.integer, 1);
    span_eq(src, p.r.line, "VALUE foo 5 3");
    /* Two values and the iterator (key span, whole block). */
    src = "VALUE a 0 1\r\nx\r\nVALUE bb 4294967295 0\r\n\r\nEND\r\n";
    p = expect_reply(src, strlen(src), CH_MC_CMD_GAT, CH_MC_R_VALUES, CH_MC_C_HIT);
    assert_int_equal(p.r.integer, 2);
    size_t pos = 0;
    ch_mc_value v;
    assert_true(ch_mc_value_next(src, p.r.len, &pos, &v));
    span_eq(src, v.key, "a");
    span_eq(src, v.data, "x");
    span_eq(src, v.block, "VALUE a 0 1\r\nx\r\n");
    assert_int_equal(v.flags, 0);
    assert_false(v.has_cas);
    assert_int_equal(pos, 16);
    assert_true(ch_mc_value_next(src, p.r.len, &pos, &v));
    span_eq(src, v.key, "bb");
    assert_int_equal(v.data.len, 0);
    assert_int_equal(v.flags, 4294967295u);
    span_eq(src, v.block, "VALUE bb 4294967295 0\r\n\r\n");
    assert_false(ch_mc_value_next(src, p.r.len, &pos, &v));
    assert_int_equal(pos, strlen(src) - 5);
    /* gets/gats: a cas on every VALUE line; get/gat: none. */
    src = "VALUE a 0 1 77\r\nx\r\nEND\r\n";
    p = expect_reply(src, strlen(src), CH_MC_CMD_GETS, CH_MC_R_VALUES, CH_MC_C_HIT);
    pos = 0;
    assert_true(ch_mc_value_next(src, p.r.len, &pos, &v));
    assert_true(v.has_cas);
    assert_int_equal(v.cas, 77);
    expect_reply(src, strlen(src), CH_MC_CMD_GATS, CH_MC_R_VALUES, CH_MC_C_HIT);
    expect_bad_reply(src, strlen(src), CH_MC_CMD_GET);
    expect_bad_reply(S("VALUE a 0 1\r\nx\r\nEND\r\n"), CH_MC_CMD_GETS);
    /* Data in a value is skipped by length ("END\r\n" inside it is data). */
    src = "VALUE a 0 5\r\nEND\r\n\r\nEND\r\n";
    p = expect_reply(src, strlen(src), CH_MC_CMD_GET, CH_MC_R_VALUES, CH_MC_C_HIT);
    assert_int_equal(p.r.integer, 1);
    /* need in a value's data: its end + 2 + the "END\r\n" still owed. "VALUE foo 0 3\r\n" is
     * 15 bytes. */
    p = scan(S("VALUE foo 0 3\r\nba"), CH_MC_CMD_GET);
    assert_int_equal(p.st, CH_MC_INCOMPLETE);
    assert_int_equal(p.need, 15 + 3 + 2 + 5);
    /* Errors are a reply of their own to any command. */
    src = "SERVER_ERROR out of memory writing get response\r\n";
    p = expect_reply(src, strlen(src), CH_MC_CMD_GET, CH_MC_R_SERVER_ERROR, CH_MC_C_ERROR);
    span_eq(src, p.r.text, "out of memory writing get response");
    /* Malformed. */
    expect_bad_reply(S("VALUE a 0 2\r\nxyz\r\nEND\r\n"), CH_MC_CMD_GET);
    expect_bad_reply(S("VALUE a 0 1\r\nx\r\nSTORED\r\n"), CH_MC_CMD_GET);
    expect_bad_reply(S("VALUE a x 1\r\nx\r\nEND\r\n"), CH_MC_CMD_GET);
    expect_bad_reply(S("VALUE a 0\r\nEND\r\n"), CH_MC_CMD_GET);
    expect_bad_reply(S("VALUE a 0 1 2 3\r\nx\r\nEND\r\n"), CH_MC_CMD_GETS);
    expect_bad_reply(S("END\n"), CH_MC_CMD_GET);
    expect_bad_reply(S("ENDX\r\n"), CH_MC_CMD_GET);
    expect_bad_reply(S("VALUE a 0 1048577\r\n"), CH_MC_CMD_GET); /* over max_item */
}

/* The parts of a multi-key get's reply, key by key (ch_mc_scan_multi_part), the last key's by
 * ch_mc_scan_reply. parts[i]: the bytes key i must get (its VALUE block, or "" for a miss); the
 * last key's whole reply is last. Also checked on every prefix of the reply: a key's part is
 * INCOMPLETE, never a wrong decision, until its bytes are in. */
static void expect_multi(const char *reply, size_t n, ch_mc_cmd cmd, const char *const *keys,
                         size_t nkeys, const char *const *parts, const char *last)
{
    for (size_t cut = 0; cut <= n; cut++) {
        char *b = dup_exact(reply, cut);
        size_t pos = 0, i = 0;
        for (; i + 1 < nkeys; i++) {
            ch_mc_reply r;
            size_t need = 12345;
            char err[160];
            ch_mc_status st = ch_mc_scan_multi_part(b + pos, cut - pos, cmd, keys[i],
                                                    strlen(keys[i]), NULL, &r, &need, err,
                                                    sizeof err);
            if (st == CH_MC_INCOMPLETE) {
                assert_true(need > cut - pos);
                assert_true(pos + need <= n);
                break;
            }
            if (st != CH_MC_OK)
                fail_msg("key %zu (%s) at byte %zu of %zu: status %d \"%s\"", i, keys[i], pos,
                         cut, st, err);
            assert_int_equal(need, 0);
            assert_int_equal(r.len, strlen(parts[i]));
            assert_memory_equal(b + pos, parts[i], r.len);
            if (r.len > 0) {
                assert_int_equal(r.code, CH_MC_R_VALUES);
                assert_int_equal(r.cls, CH_MC_C_HIT);
            } else {
                assert_int_equal(r.cls, r.code == CH_MC_R_END ? CH_MC_C_MISS : CH_MC_C_ERROR);
            }
            pos += r.len;
        }
        if (i + 1 == nkeys) {
            ch_mc_reply r;
            size_t need = 0;
            ch_mc_status st = ch_mc_scan_reply(b + pos, cut - pos, cmd, NULL, &r, &need, NULL, 0);
            if (cut < n) {
                assert_int_equal(st, CH_MC_INCOMPLETE);
            } else {
                assert_int_equal(st, CH_MC_OK);
                assert_int_equal(r.len, strlen(last));
                assert_memory_equal(b + pos, last, r.len);
                assert_int_equal(pos + r.len, n);
            }
        } else {
            assert_true(cut < n); /* the whole reply decides every key */
        }
        free(b);
    }
}

static void test_reply_multi_part(void **state)
{
    (void)state;
    /* memcached 1.6.18's own answer to "get a x a b a" with a (flags 5) and b stored, x not:
     * a key asked twice comes twice, a miss is left out, one END. */
    const char *src = "VALUE a 5 2\r\nAA\r\nVALUE a 5 2\r\nAA\r\nVALUE b 0 1\r\nB\r\n"
                      "VALUE a 5 2\r\nAA\r\nEND\r\n";
    const char *keys[] = {"a", "x", "a", "b", "a"};
    const char *parts[] = {"VALUE a 5 2\r\nAA\r\n", "", "VALUE a 5 2\r\nAA\r\n",
                           "VALUE b 0 1\r\nB\r\n"};
    expect_multi(src, strlen(src), CH_MC_CMD_GET, keys, 5, parts, "VALUE a 5 2\r\nAA\r\nEND\r\n");
    /* Every key missed: END alone answers each, the last takes it. */
    const char *none[] = {"p", "q", "r"};
    const char *empty[] = {"", ""};
    expect_multi(S("END\r\n"), CH_MC_CMD_GET, none, 3, empty, "END\r\n");
    /* The last key missed: the one before takes its block, the last gets END. */
    const char *two[] = {"k1", "k2"};
    const char *first[] = {"VALUE k1 0 3\r\nEND\r\n"};
    src = "VALUE k1 0 3\r\nEND\r\nEND\r\n"; /* "END\r\n" as data is skipped by length */
    expect_multi(src, strlen(src), CH_MC_CMD_GET, two, 2, first, "END\r\n");
    /* A key that is a prefix of the next block's key is a miss. */
    const char *pre[] = {"k", "kk"};
    const char *miss1[] = {""};
    src = "VALUE kk 0 1\r\nz\r\nEND\r\n";
    expect_multi(src, strlen(src), CH_MC_CMD_GET, pre, 2, miss1, src);
    /* gets: every VALUE line carries a cas; a line without one is a broken reply. */
    const char *g[] = {"a", "b"};
    const char *gp[] = {"VALUE a 0 1 9\r\nx\r\n"};
    src = "VALUE a 0 1 9\r\nx\r\nVALUE b 0 1 10\r\ny\r\nEND\r\n";
    expect_multi(src, strlen(src), CH_MC_CMD_GETS, g, 2, gp, "VALUE b 0 1 10\r\ny\r\nEND\r\n");
    ch_mc_reply r;
    size_t need;
    char err[160];
    assert_int_equal(ch_mc_scan_multi_part(S("VALUE a 0 1\r\nx\r\nEND\r\n"), CH_MC_CMD_GETS,
                                           S("a"), NULL, &r, &need, err, sizeof err),
                     CH_MC_CLOSE);
    assert_true(strlen(err) > 0);
    /* An error stands for the whole reply: every key's part is the error, nothing consumed;
     * the last key's ordinary scan takes it (memcached 1.6.18 answers "get a <251 bytes> b"
     * with this line alone). */
    src = "CLIENT_ERROR bad command line format\r\n";
    for (size_t k = 0; k < 2; k++) {
        assert_int_equal(ch_mc_scan_multi_part(src, strlen(src), CH_MC_CMD_GET, S("a"), NULL, &r,
                                               &need, NULL, 0),
                         CH_MC_OK);
        assert_int_equal(r.len, 0);
        assert_int_equal(r.code, CH_MC_R_CLIENT_ERROR);
        assert_int_equal(r.cls, CH_MC_C_ERROR);
    }
    const char *e3[] = {"a", "b", "c"};
    const char *enone[] = {"", ""};
    expect_multi(src, strlen(src), CH_MC_CMD_GET, e3, 3, enone, src);
    /* Broken replies, and commands with no multi-key reply. */
    assert_int_equal(ch_mc_scan_multi_part(S("STORED\r\n"), CH_MC_CMD_GET, S("a"), NULL, &r,
                                           &need, err, sizeof err),
                     CH_MC_CLOSE);
    assert_int_equal(ch_mc_scan_multi_part(S("VALUE a 0 2\r\nxyz\r\n"), CH_MC_CMD_GET, S("a"),
                                           NULL, &r, &need, err, sizeof err),
                     CH_MC_CLOSE);
    assert_int_equal(ch_mc_scan_multi_part(S("END\r\n"), CH_MC_CMD_SET, S("a"), NULL, &r, &need,
                                           err, sizeof err),
                     CH_MC_CLOSE);
    assert_int_equal(ch_mc_scan_multi_part(S("END\r\n"), CH_MC_CMD_GET, "", 0, NULL, &r, &need,
                                           err, sizeof err),
                     CH_MC_CLOSE);
    /* need inside a block: its end + 2 + the "END\r\n" still owed, as ch_mc_scan_reply. */
    assert_int_equal(ch_mc_scan_multi_part(S("VALUE foo 0 3\r\nba"), CH_MC_CMD_GET, S("foo"),
                                           NULL, &r, &need, NULL, 0),
                     CH_MC_INCOMPLETE);
    assert_int_equal(need, 15 + 3 + 2 + 5);
}

static void test_reply_text(void **state)
{
    (void)state;
    const ch_mc_cmd storage[] = {CH_MC_CMD_SET,    CH_MC_CMD_ADD,     CH_MC_CMD_REPLACE,
                                 CH_MC_CMD_APPEND, CH_MC_CMD_PREPEND, CH_MC_CMD_CAS};
    for (size_t i = 0; i < 6; i++) {
        expect_reply(S("STORED\r\n"), storage[i], CH_MC_R_STORED, CH_MC_C_OK);
        expect_reply(S("NOT_STORED\r\n"), storage[i], CH_MC_R_NOT_STORED, CH_MC_C_NOT_STORED);
        expect_reply(S("EXISTS\r\n"), storage[i], CH_MC_R_EXISTS, CH_MC_C_NOT_STORED);
        expect_reply(S("NOT_FOUND\r\n"), storage[i], CH_MC_R_NOT_FOUND, CH_MC_C_MISS);
        expect_bad_reply(S("DELETED\r\n"), storage[i]);
        expect_bad_reply(S("HD\r\n"), storage[i]);
    }
    prep p = expect_reply(S("42\r\n"), CH_MC_CMD_INCR, CH_MC_R_NUMBER, CH_MC_C_INTEGER);
    assert_int_equal(p.r.integer, 42);
    p = expect_reply(S("18446744073709551615\r\n"), CH_MC_CMD_DECR, CH_MC_R_NUMBER,
                     CH_MC_C_INTEGER);
    assert_true(p.r.integer == UINT64_MAX);
    expect_reply(S("0\r\n"), CH_MC_CMD_DECR, CH_MC_R_NUMBER, CH_MC_C_INTEGER);
    expect_reply(S("NOT_FOUND\r\n"), CH_MC_CMD_INCR, CH_MC_R_NOT_FOUND, CH_MC_C_MISS);
    expect_bad_reply(S("18446744073709551616\r\n"), CH_MC_CMD_INCR);
    expect_bad_reply(S("-1\r\n"), CH_MC_CMD_INCR);
    expect_bad_reply(S("4 2\r\n"), CH_MC_CMD_INCR);
    expect_reply(S("DELETED\r\n"), CH_MC_CMD_DELETE, CH_MC_R_DELETED, CH_MC_C_OK);
    expect_reply(S("NOT_FOUND\r\n"), CH_MC_CMD_DELETE, CH_MC_R_NOT_FOUND, CH_MC_C_MISS);
    expect_bad_reply(S("STORED\r\n"), CH_MC_CMD_DELETE);
    expect_reply(S("TOUCHED\r\n"), CH_MC_CMD_TOUCH, CH_MC_R_TOUCHED, CH_MC_C_OK);
    expect_reply(S("NOT_FOUND\r\n"), CH_MC_CMD_TOUCH, CH_MC_R_NOT_FOUND, CH_MC_C_MISS);
    const char *src = "VERSION 1.6.18\r\n";
    p = expect_reply(src, strlen(src), CH_MC_CMD_VERSION, CH_MC_R_VERSION, CH_MC_C_OK);
    span_eq(src, p.r.text, "1.6.18");
    expect_reply(S("OK\r\n"), CH_MC_CMD_FLUSH_ALL, CH_MC_R_OK, CH_MC_C_OK);
    expect_reply(S("OK\r\n"), CH_MC_CMD_VERBOSITY, CH_MC_R_OK, CH_MC_C_OK);
    /* ERROR, CLIENT_ERROR, SERVER_ERROR to every command. */
    const ch_mc_cmd any[] = {CH_MC_CMD_GET, CH_MC_CMD_SET, CH_MC_CMD_INCR, CH_MC_CMD_DELETE,
                             CH_MC_CMD_TOUCH, CH_MC_CMD_VERSION, CH_MC_CMD_MG, CH_MC_CMD_MS,
                             CH_MC_CMD_MD, CH_MC_CMD_MA, CH_MC_CMD_MN, CH_MC_CMD_ME};
    for (size_t i = 0; i < sizeof any / sizeof any[0]; i++) {
        expect_reply(S("ERROR\r\n"), any[i], CH_MC_R_ERROR, CH_MC_C_ERROR);
        src = "CLIENT_ERROR bad data chunk\r\n";
        p = expect_reply(src, strlen(src), any[i], CH_MC_R_CLIENT_ERROR, CH_MC_C_ERROR);
        span_eq(src, p.r.text, "bad data chunk");
        src = "SERVER_ERROR out of memory storing object\r\n";
        p = expect_reply(src, strlen(src), any[i], CH_MC_R_SERVER_ERROR, CH_MC_C_ERROR);
        span_eq(src, p.r.text, "out of memory storing object");
    }
    /* No reply is expected to these: the proxy never sends them. */
    expect_bad_reply(S("OK\r\n"), CH_MC_CMD_STATS);
    expect_bad_reply(S("OK\r\n"), CH_MC_CMD_UNKNOWN);
    expect_bad_reply(S("OK\r\n"), CH_MC_CMD_QUIT);
    /* Framing errors. */
    expect_bad_reply(S("STORED\n"), CH_MC_CMD_SET);
    expect_bad_reply(S("STO\rRED\r\n"), CH_MC_CMD_SET);
    expect_bad_reply(S("\r\n"), CH_MC_CMD_SET);
    expect_bad_reply(S("STORED \r\n"), CH_MC_CMD_SET);
    char *big = malloc(3000);
    assert_non_null(big);
    memset(big, 'A', 3000);
    memcpy(big, "SERVER_ERROR ", 13);
    expect_bad_reply(big, 3000, CH_MC_CMD_SET); /* no end within max_line */
    p = scan(big, 2047, CH_MC_CMD_SET);
    assert_int_equal(p.st, CH_MC_INCOMPLETE);
    free(big);
}

static void test_reply_meta(void **state)
{
    (void)state;
    const char *src = "VA 3 t-1 Oab\r\nbar\r\n";
    prep p = expect_reply(src, strlen(src), CH_MC_CMD_MG, CH_MC_R_VA, CH_MC_C_HIT);
    span_eq(src, p.r.data, "bar");
    span_eq(src, p.r.line, "VA 3 t-1 Oab");
    assert_int_equal(p.r.integer, 3);
    expect_reply(S("VA 0\r\n\r\n"), CH_MC_CMD_MG, CH_MC_R_VA, CH_MC_C_HIT);
    expect_reply(S("HD c5 f0\r\n"), CH_MC_CMD_MG, CH_MC_R_HD, CH_MC_C_HIT);
    expect_reply(S("HD\r\n"), CH_MC_CMD_MG, CH_MC_R_HD, CH_MC_C_HIT);
    expect_reply(S("EN\r\n"), CH_MC_CMD_MG, CH_MC_R_EN, CH_MC_C_MISS);
    expect_reply(S("EN knokey O123\r\n"), CH_MC_CMD_MG, CH_MC_R_EN, CH_MC_C_MISS);
    expect_bad_reply(S("NS\r\n"), CH_MC_CMD_MG);
    expect_bad_reply(S("VA 2\r\nabc\r\n"), CH_MC_CMD_MG);
    expect_bad_reply(S("VA x\r\nabc\r\n"), CH_MC_CMD_MG);
    expect_bad_reply(S("VA\r\n"), CH_MC_CMD_MG);
    expect_bad_reply(S("HDX\r\n"), CH_MC_CMD_MG);
    p = scan(S("VA 10 v\r\n"), CH_MC_CMD_MG);
    assert_int_equal(p.st, CH_MC_INCOMPLETE);
    assert_int_equal(p.need, 9 + 10 + 2);

    expect_reply(S("HD\r\n"), CH_MC_CMD_MS, CH_MC_R_HD, CH_MC_C_OK);
    expect_reply(S("HD c77 O1\r\n"), CH_MC_CMD_MS, CH_MC_R_HD, CH_MC_C_OK);
    expect_reply(S("NS\r\n"), CH_MC_CMD_MS, CH_MC_R_NS, CH_MC_C_NOT_STORED);
    expect_reply(S("EX\r\n"), CH_MC_CMD_MS, CH_MC_R_EX, CH_MC_C_NOT_STORED);
    expect_reply(S("NF\r\n"), CH_MC_CMD_MS, CH_MC_R_NF, CH_MC_C_MISS);
    expect_bad_reply(S("EN\r\n"), CH_MC_CMD_MS);
    expect_bad_reply(S("VA 1\r\nx\r\n"), CH_MC_CMD_MS);

    expect_reply(S("HD\r\n"), CH_MC_CMD_MD, CH_MC_R_HD, CH_MC_C_OK);
    expect_reply(S("NF\r\n"), CH_MC_CMD_MD, CH_MC_R_NF, CH_MC_C_MISS);
    expect_reply(S("EX\r\n"), CH_MC_CMD_MD, CH_MC_R_EX, CH_MC_C_NOT_STORED);
    expect_bad_reply(S("NS\r\n"), CH_MC_CMD_MD);

    expect_reply(S("HD\r\n"), CH_MC_CMD_MA, CH_MC_R_HD, CH_MC_C_OK);
    src = "VA 2 c9\r\n10\r\n";
    p = expect_reply(src, strlen(src), CH_MC_CMD_MA, CH_MC_R_VA, CH_MC_C_HIT);
    span_eq(src, p.r.data, "10");
    expect_reply(S("NF\r\n"), CH_MC_CMD_MA, CH_MC_R_NF, CH_MC_C_MISS);
    expect_reply(S("NS\r\n"), CH_MC_CMD_MA, CH_MC_R_NS, CH_MC_C_NOT_STORED);
    expect_reply(S("EX\r\n"), CH_MC_CMD_MA, CH_MC_R_EX, CH_MC_C_NOT_STORED);
    expect_bad_reply(S("EN\r\n"), CH_MC_CMD_MA);

    expect_reply(S("MN\r\n"), CH_MC_CMD_MN, CH_MC_R_MN, CH_MC_C_OK);
    expect_bad_reply(S("HD\r\n"), CH_MC_CMD_MN);
    src = "ME foo exp=-1 la=3 cas=1 fetch=yes cls=1 size=63\r\n";
    expect_reply(src, strlen(src), CH_MC_CMD_ME, CH_MC_R_ME, CH_MC_C_HIT);
    expect_reply(S("EN\r\n"), CH_MC_CMD_ME, CH_MC_R_EN, CH_MC_C_MISS);
    expect_bad_reply(S("ME\r\n"), CH_MC_CMD_ME);
    expect_bad_reply(S("MN\r\n"), CH_MC_CMD_MG);
}

/* protocol.txt: mg q hides EN; ms q hides HD; md q hides HD; ma q hides HD (and memcached
 * 1.6's proto_parser.c skips the whole success reply, VA included); errors always go. */
static void test_quiet(void **state)
{
    (void)state;
    static const struct {
        ch_mc_cmd cmd;
        const char *reply;
        bool hidden;
    } Q[] = {{CH_MC_CMD_MG, "EN\r\n", true},          {CH_MC_CMD_MG, "HD\r\n", false},
             {CH_MC_CMD_MG, "VA 1\r\nx\r\n", false},  {CH_MC_CMD_MS, "HD\r\n", true},
             {CH_MC_CMD_MS, "NS\r\n", false},         {CH_MC_CMD_MS, "EX\r\n", false},
             {CH_MC_CMD_MS, "NF\r\n", false},         {CH_MC_CMD_MD, "HD\r\n", true},
             {CH_MC_CMD_MD, "NF\r\n", false},         {CH_MC_CMD_MD, "EX\r\n", false},
             {CH_MC_CMD_MA, "HD\r\n", true},          {CH_MC_CMD_MA, "VA 1\r\n5\r\n", true},
             {CH_MC_CMD_MA, "NF\r\n", false},         {CH_MC_CMD_MA, "NS\r\n", false},
             {CH_MC_CMD_MA, "EX\r\n", false},         {CH_MC_CMD_MN, "MN\r\n", false},
             {CH_MC_CMD_ME, "EN\r\n", false},         {CH_MC_CMD_MG, "ERROR\r\n", false},
             {CH_MC_CMD_MS, "CLIENT_ERROR x\r\n", false},
             {CH_MC_CMD_MD, "SERVER_ERROR x\r\n", false}};
    for (size_t i = 0; i < sizeof Q / sizeof Q[0]; i++) {
        prep p = scan(Q[i].reply, strlen(Q[i].reply), Q[i].cmd);
        assert_int_equal(p.st, CH_MC_OK);
        if (ch_mc_quiet_suppresses(Q[i].cmd, &p.r) != Q[i].hidden)
            fail_msg("%s / %s", ch_mc_cmd_name(Q[i].cmd), Q[i].reply);
    }
}

/* ---- rebuilding lines ---------------------------------------------------------------------- */

static void expect_strip(const char *s, size_t n, const char *want)
{
    preq p = parse(s, n);
    assert_int_equal(p.st, CH_MC_OK);
    char out[256];
    size_t k = ch_mc_line_strip(s, &p.r, out, sizeof out);
    assert_int_equal(k, strlen(want));
    assert_memory_equal(out, want, k);
    /* Too small a destination: the length needed all the same. */
    assert_int_equal(ch_mc_line_strip(s, &p.r, out, 3), k);
}

static void test_rebuild(void **state)
{
    (void)state;
    expect_strip(S("set k 0 0 1 noreply\r\nx\r\n"), "set k 0 0 1\r\n");
    expect_strip(S("set k 0 0 1\r\nx\r\n"), "set k 0 0 1\r\n");
    expect_strip(S("cas k 0 0 1 5 noreply\r\nx\r\n"), "cas k 0 0 1 5\r\n");
    expect_strip(S("delete k 0 noreply\n"), "delete k 0\r\n");
    expect_strip(S("incr  n  1  noreply\r\n"), "incr n 1\r\n");
    expect_strip(S("ms k 1 q T5\r\nx\r\n"), "ms k 1 T5\r\n");
    expect_strip(S("mg k q v q\r\n"), "mg k v\r\n");
    expect_strip(S("mg q v\r\n"), "mg q v\r\n"); /* the key "q" stays */
    expect_strip(S("get   a  b\n"), "get a b\r\n");
    expect_strip(S("get noreply\r\n"), "get noreply\r\n"); /* a key */

    preq p = parse_cap(S("get a b c d\r\n"), NULL, 3);
    assert_int_equal(p.st, CH_MC_OK);
    char out[64];
    assert_int_equal(ch_mc_line_strip("get a b c d\r\n", &p.r, out, sizeof out), 0);

    static const char g[] = "get a bb ccc\r\n";
    p = parse(S(g));
    const uint32_t keys1[] = {2, 0};
    size_t k = ch_mc_get_line_subset(g, &p.r, keys1, 2, out, sizeof out);
    assert_int_equal(k, strlen("get ccc a\r\n"));
    assert_memory_equal(out, "get ccc a\r\n", k);
    const uint32_t keys2[] = {1};
    k = ch_mc_get_line_subset(g, &p.r, keys2, 1, out, sizeof out);
    assert_memory_equal(out, "get bb\r\n", k);
    static const char ga[] = "gats 10 a b c\r\n";
    p = parse(S(ga));
    k = ch_mc_get_line_subset(ga, &p.r, keys2, 1, out, sizeof out);
    assert_int_equal(k, strlen("gats 10 b\r\n"));
    assert_memory_equal(out, "gats 10 b\r\n", k);
    const uint32_t bad_key[] = {3};
    assert_int_equal(ch_mc_get_line_subset(ga, &p.r, bad_key, 1, out, sizeof out), 0);
    assert_int_equal(ch_mc_get_line_subset(ga, &p.r, keys2, 0, out, sizeof out), 0);
    static const char d[] = "delete k\r\n";
    p = parse(S(d));
    const uint32_t zero[] = {0};
    assert_int_equal(ch_mc_get_line_subset(d, &p.r, zero, 1, out, sizeof out), 0);
}

/* ---- odds and ends ------------------------------------------------------------------------- */

static void test_null_and_caps(void **state)
{
    (void)state;
    /* out, consumed, need and err may all be NULL. */
    assert_int_equal(ch_mc_parse_request(S("get a\r\n"), NULL, NULL, NULL, NULL, NULL, 0), CH_MC_OK);
    assert_int_equal(ch_mc_parse_request(S("get"), NULL, NULL, NULL, NULL, NULL, 0),
                     CH_MC_INCOMPLETE);
    assert_int_equal(ch_mc_parse_request(NULL, 0, NULL, NULL, NULL, NULL, NULL, 0),
                     CH_MC_INCOMPLETE);
    assert_int_equal(ch_mc_scan_reply(S("END\r\n"), CH_MC_CMD_GET, NULL, NULL, NULL, NULL, 0),
                     CH_MC_OK);
    /* A storage command's fields are whole even when its tokens do not fit the array. */
    preq p = parse_cap(S("set k 0 0 1 noreply\r\nx\r\n"), NULL, 2);
    assert_int_equal(p.st, CH_MC_OK);
    assert_int_equal(p.r.ntokens, 6);
    span_eq(p.src, p.r.noreply, "noreply");
    span_eq(p.src, p.r.data, "x");
    span_eq(p.src, p.r.key, "k");
    assert_int_equal(ch_mc_cmd_props((ch_mc_cmd)999), 0);
    assert_string_equal(ch_mc_cmd_name((ch_mc_cmd)999), "");
    /* Replies under smaller limits: a VA or VALUE over max_item closes. */
    ch_mc_limits l;
    ch_mc_limits_init(&l);
    l.max_item = 4;
    prep r = scan_lim(S("VA 5\r\nabcde\r\n"), CH_MC_CMD_MG, &l);
    assert_int_equal(r.st, CH_MC_CLOSE);
    r = scan_lim(S("VA 4\r\nabcd\r\n"), CH_MC_CMD_MG, &l);
    assert_int_equal(r.st, CH_MC_OK);
    r = scan_lim(S("VALUE k 0 5\r\nabcde\r\nEND\r\n"), CH_MC_CMD_GET, &l);
    assert_int_equal(r.st, CH_MC_CLOSE);
    /* The VALUE iterator refuses what is not a well-formed block inside len. */
    static const char *const bad[] = {"VALUE a 0 3\r\nab\r\n", "VALUE a 0 1\r\nxy\r\n",
                                      "VALUES a 0 1\r\nx\r\n", "VALUE a 0\r\nx\r\n",
                                      "VALUE a 0 1", "END\r\n", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t pos = 0;
        ch_mc_value v;
        char *b = dup_exact(bad[i], strlen(bad[i]));
        if (ch_mc_value_next(b, strlen(bad[i]), &pos, &v))
            fail_msg("iterated \"%s\"", bad[i]);
        assert_int_equal(pos, 0);
        free(b);
    }
}

/* ---- copying an item: keys, base64, the fetch, its reply, the exptime ----------------------- */

/* The header's rule, byte by byte: plain means no byte <= 0x20 and no 0x7f. Cross-checked with
 * the request parser, which takes exactly those bytes in a text key. */
static void test_copy_key_plain(void **state)
{
    (void)state;
    assert_false(ch_mc_key_plain(NULL, 0));
    assert_false(ch_mc_key_plain(NULL, 3));
    assert_false(ch_mc_key_plain("", 0));
    assert_true(ch_mc_key_plain(S("foo")));
    assert_false(ch_mc_key_plain(S("a b")));
    assert_false(ch_mc_key_plain(S("tab\there")));
    assert_false(ch_mc_key_plain(S("k\r\n")));
    assert_false(ch_mc_key_plain(S("nul\0inside")));
    assert_false(ch_mc_key_plain(S("del\x7f")));
    assert_true(ch_mc_key_plain(S("\xc3\xa9t\xc3\xa9"))); /* UTF-8 bytes are >= 0x80 */
    for (unsigned c = 0; c < 256; c++) {
        const bool want = c > 0x20 && c != 0x7f;
        char k[3] = {'a', (char)c, 'b'};
        if (ch_mc_key_plain(k, 3) != want || ch_mc_key_plain(k + 1, 1) != want)
            fail_msg("byte 0x%02x: plain should be %d", c, want);
        char line[16] = "get a?b\r\n";
        line[5] = (char)c;
        preq p = parse(line, 9);
        const bool one_key = p.st == CH_MC_OK && p.r.nkeys == 1 && p.r.key.len == 3;
        if (one_key != want)
            fail_msg("byte 0x%02x: the parser takes \"a?b\" as a key: %d", c, one_key);
    }
}

/* Base64 written by ch_mc_b64_encode is exactly want (length and bytes), into a destination of
 * exactly that size (ASan sees a write past it); every smaller destination still gets the full
 * length back and nothing is written past it. */
static void expect_b64(const void *src, size_t n, const char *want)
{
    const size_t w = strlen(want);
    assert_int_equal(w, 4 * ((n + 2) / 3));
    assert_int_equal(ch_mc_b64_encode(src, n, NULL, 0), w);
    char *dst = malloc(w ? w : 1);
    assert_non_null(dst);
    assert_int_equal(ch_mc_b64_encode(src, n, dst, w), w);
    if (memcmp(dst, want, w) != 0)
        fail_msg("base64 of %zu bytes: \"%.*s\", expected \"%s\"", n, (int)w, dst, want);
    free(dst);
    for (size_t cap = 0; cap < w; cap++) {
        char *small = malloc(cap ? cap : 1);
        assert_non_null(small);
        assert_int_equal(ch_mc_b64_encode(src, n, small, cap), w);
        free(small);
    }
}

static void test_copy_b64_encode(void **state)
{
    (void)state;
    /* RFC 4648 section 10, "Test Vectors". */
    expect_b64("", 0, "");
    expect_b64(S("f"), "Zg==");
    expect_b64(S("fo"), "Zm8=");
    expect_b64(S("foo"), "Zm9v");
    expect_b64(S("foob"), "Zm9vYg==");
    expect_b64(S("fooba"), "Zm9vYmE=");
    expect_b64(S("foobar"), "Zm9vYmFy");
    /* RFC 4648 section 9, "Illustrations and Examples". */
    expect_b64(S("\x14\xfb\x9c\x03\xd9\x7e"), "FPucA9l+");
    expect_b64(S("\x14\xfb\x9c\x03\xd9"), "FPucA9k=");
    expect_b64(S("\x14\xfb\x9c\x03"), "FPucAw==");
    /* Python 3: base64.b64encode(b) for each b below. */
    expect_b64(S("a b"), "YSBi");
    expect_b64(S("k\r\n"), "aw0K");
    expect_b64(S("tab\there"), "dGFiCWhlcmU=");
    expect_b64(S("key\x7f"), "a2V5fw==");
    expect_b64(S("\0"), "AA==");
    expect_b64(S(" "), "IA==");
    expect_b64(S("\xfb\xff\xbf"), "+/+/");
    expect_b64(S("\xff\xfe\xfd\xfc"), "//79/A==");
    /* base64.b64encode(bytes(range(256))): every byte value, every alphabet character. */
    static const char all[] =
        "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+P0BB"
        "QkNERUZHSElKS0xNTk9QUVJTVFVWV1hZWltcXV5fYGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6e3x9fn+AgYKD"
        "hIWGh4iJiouMjY6PkJGSk5SVlpeYmZqbnJ2en6ChoqOkpaanqKmqq6ytrq+wsbKztLW2t7i5uru8vb6/wMHCw8TF"
        "xsfIycrLzM3Oz9DR0tPU1dbX2Nna29zd3t/g4eLj5OXm5+jp6uvs7e7v8PHy8/T19vf4+fr7/P3+/w==";
    unsigned char bytes[256];
    for (unsigned i = 0; i < 256; i++)
        bytes[i] = (unsigned char)i;
    expect_b64(bytes, sizeof bytes, all);
    /* What is encoded decodes to itself (ch_mc_b64_decode is checked against the RFC apart),
     * for every length up to 64 and every phase of the last quantum. */
    unsigned char src[64], back[64];
    char enc[88];
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < sizeof src; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        src[i] = (unsigned char)x;
    }
    for (size_t n = 0; n <= sizeof src; n++) {
        size_t e = ch_mc_b64_encode(src, n, enc, sizeof enc);
        assert_int_equal(e, 4 * ((n + 2) / 3));
        assert_int_equal(ch_mc_b64_decode(enc, e, back, sizeof back), (long)n);
        assert_memory_equal(back, src, n);
    }
}

/* ch_mc_copy_fetch(key) writes exactly want; a smaller destination gets the length back and
 * nothing past it; and the line is a request the parser reads as mg with the v, t and f flags,
 * and b exactly when the key went in base64, whose key is key's bytes. */
static void expect_fetch(const char *key, size_t klen, const char *want)
{
    const size_t w = strlen(want);
    assert_int_equal(ch_mc_copy_fetch(key, klen, NULL, 0), w);
    char *dst = malloc(w);
    assert_non_null(dst);
    assert_int_equal(ch_mc_copy_fetch(key, klen, dst, w), w);
    if (memcmp(dst, want, w) != 0)
        fail_msg("fetch line \"%.*s\", expected \"%s\"", (int)w, dst, want);
    for (size_t cap = 0; cap < w; cap++) {
        char *small = malloc(cap ? cap : 1);
        assert_non_null(small);
        assert_int_equal(ch_mc_copy_fetch(key, klen, small, cap), w);
        free(small);
    }
    preq p = parse(dst, w);
    if (p.st != CH_MC_OK)
        fail_msg("\"%s\": status %d \"%s\"", want, p.st, p.err);
    assert_int_equal(p.consumed, w);
    assert_int_equal(p.r.cmd, CH_MC_CMD_MG);
    const bool plain = ch_mc_key_plain(key, klen);
    assert_int_equal(p.r.b64, !plain);
    assert_int_equal(p.r.mflags, CH_MC_FLAG('v') | CH_MC_FLAG('t') | CH_MC_FLAG('f') |
                                     (plain ? 0 : CH_MC_FLAG('b')));
    unsigned char k[300];
    if (plain) {
        assert_int_equal(p.r.key.len, klen);
        assert_memory_equal(dst + p.r.key.off, key, klen);
    } else {
        assert_int_equal(ch_mc_b64_decode(dst + p.r.key.off, p.r.key.len, k, sizeof k),
                         (long)klen);
        assert_memory_equal(k, key, klen);
    }
    free(dst);
}

static void test_copy_fetch(void **state)
{
    (void)state;
    /* protocol.txt, mg: "v: return item value in <data block>", "t: return item TTL remaining
     * in seconds (-1 for unlimited)", "f: return client flags token", "b: interpret key as
     * base64 encoded binary value". The base64 is Python's base64.b64encode. */
    expect_fetch(S("foo"), "mg foo v t f\r\n");
    expect_fetch(S("!"), "mg ! v t f\r\n");
    expect_fetch(S("\xc3\xa9t\xc3\xa9"), "mg \xc3\xa9t\xc3\xa9 v t f\r\n");
    expect_fetch(S("a b"), "mg YSBi b v t f\r\n");
    expect_fetch(S(" "), "mg IA== b v t f\r\n");
    expect_fetch(S("k\r\n"), "mg aw0K b v t f\r\n");
    expect_fetch(S("tab\there"), "mg dGFiCWhlcmU= b v t f\r\n");
    expect_fetch(S("key\x7f"), "mg a2V5fw== b v t f\r\n");
    expect_fetch(S("\0"), "mg AA== b v t f\r\n");
    expect_fetch(S("\x14\xfb\x9c\x03\xd9\x7e"), "mg FPucA9l+ b v t f\r\n"); /* RFC 4648 s. 9 */
    /* A key of memcached's longest, 250 bytes: as it is. */
    char key[250], want[300];
    memset(key, 'k', sizeof key);
    snprintf(want, sizeof want, "mg %.250s v t f\r\n", key);
    expect_fetch(key, sizeof key, want);
    /* No key, no request. */
    char dst[32];
    assert_int_equal(ch_mc_copy_fetch(NULL, 0, dst, sizeof dst), 0);
    assert_int_equal(ch_mc_copy_fetch(NULL, 3, dst, sizeof dst), 0);
    assert_int_equal(ch_mc_copy_fetch("", 0, dst, sizeof dst), 0);
    assert_int_equal(ch_mc_copy_fetch("", 0, NULL, 0), 0);
}

/* ch_mc_copy_read on an exact-size heap copy of s (ASan sees a read past len). */
static int copy_read(const char *s, size_t n, ch_mc_copy *c)
{
    char *b = dup_exact(s, n);
    memset(c, 0x5a, sizeof *c);
    int rc = ch_mc_copy_read(b, n, c);
    free(b);
    return rc;
}

static void expect_copy(const char *s, size_t n, const char *data, int64_t ttl, uint32_t flags)
{
    ch_mc_copy c;
    int rc = copy_read(s, n, &c);
    if (rc != 1)
        fail_msg("\"%.*s\": %d, expected a hit", (int)n, s, rc);
    span_eq(s, c.data, data);
    assert_int_equal(c.ttl, ttl);
    assert_int_equal(c.flags, flags);
    /* Every proper prefix is not one whole reply. */
    for (size_t k = 0; k < n; k++)
        if (copy_read(s, k, &c) != -1)
            fail_msg("prefix %zu of \"%.*s\" was read", k, (int)n, s);
}

static void expect_copy_bad(const char *s, size_t n)
{
    ch_mc_copy c;
    int rc = copy_read(s, n, &c);
    if (rc != -1)
        fail_msg("\"%.*s\": %d, expected -1", (int)n, s, rc);
}

static void test_copy_read(void **state)
{
    (void)state;
    /* What memcached 1.6.18 answers to "mg <key> v t f" (seen from the server: set foo 7 100 3
     * -> "VA 3 t100 f7"; set with exptime 0 -> t-1; a key stored with b, read with b: no b in
     * the reply), and protocol.txt's "VA <size> <flags>*\r\n<data block>\r\n". */
    expect_copy(S("VA 3 t100 f7\r\nbar\r\n"), "bar", 100, 7);
    expect_copy(S("VA 3 t-1 f0\r\nbar\r\n"), "bar", -1, 0);
    expect_copy(S("VA 3 t-1 f5\r\nxyz\r\n"), "xyz", -1, 5);
    expect_copy(S("VA 0 t0 f0\r\n\r\n"), "", 0, 0);
    /* The flags in any order, beside others the server may add. */
    expect_copy(S("VA 2 f9 t30\r\nhi\r\n"), "hi", 30, 9);
    expect_copy(S("VA 2 Oab t30 c77 f9\r\nhi\r\n"), "hi", 30, 9);
    /* Binary data is not scanned: CR LF inside the block. */
    expect_copy(S("VA 4 t1 f1\r\n\r\n\r\n\r\n"), "\r\n\r\n", 1, 1);
    /* The limits of the numbers: flags are 32 bits, t is any int64. */
    expect_copy(S("VA 1 t9223372036854775807 f4294967295\r\nx\r\n"), "x", INT64_MAX, UINT32_MAX);
    expect_copy(S("VA 1 t-9223372036854775808 f0\r\nx\r\n"), "x", INT64_MIN, 0);
    expect_copy_bad(S("VA 1 t9223372036854775808 f0\r\nx\r\n"));
    expect_copy_bad(S("VA 1 t-9223372036854775809 f0\r\nx\r\n"));
    expect_copy_bad(S("VA 1 t1 f4294967296\r\nx\r\n"));
    expect_copy_bad(S("VA 1 t1 f-1\r\nx\r\n"));

    /* A miss: EN, with or without flags. */
    ch_mc_copy c;
    assert_int_equal(copy_read(S("EN\r\n"), &c), 0);
    assert_int_equal(copy_read(S("EN O1\r\n"), &c), 0);
    assert_int_equal(copy_read(S("EN"), &c), -1);
    assert_int_equal(copy_read(S("EN\r"), &c), -1);

    /* t or f missing, or not a number. */
    expect_copy_bad(S("VA 3 f0\r\nbar\r\n"));
    expect_copy_bad(S("VA 3 t5\r\nbar\r\n"));
    expect_copy_bad(S("VA 3\r\nbar\r\n"));
    expect_copy_bad(S("VA 3 t f0\r\nbar\r\n"));
    expect_copy_bad(S("VA 3 t5 f\r\nbar\r\n"));
    expect_copy_bad(S("VA 3 tx f0\r\nbar\r\n"));
    expect_copy_bad(S("VA 3 t+5 f0\r\nbar\r\n"));
    expect_copy_bad(S("VA 3 t- f0\r\nbar\r\n"));
    expect_copy_bad(S("VA 3 t5 f0x\r\nbar\r\n"));
    expect_copy_bad(S("VA 3 t5 f1.5\r\nbar\r\n"));
    /* Replies that are not a value: HD (a hit without v), errors, other commands' codes. */
    expect_copy_bad(S("HD t5 f0\r\n"));
    expect_copy_bad(S("HD\r\n"));
    expect_copy_bad(S("NF\r\n"));
    expect_copy_bad(S("ERROR\r\n"));
    expect_copy_bad(S("CLIENT_ERROR bad command line format\r\n"));
    expect_copy_bad(S("SERVER_ERROR out of memory\r\n"));
    expect_copy_bad(S("VALUE foo 0 3\r\nbar\r\nEND\r\n"));
    /* Framing: a size that is not the block's, a bare LF, truncation, more than one reply. */
    expect_copy_bad(S("VA 2 t5 f0\r\nbar\r\n"));
    expect_copy_bad(S("VA 4 t5 f0\r\nbar\r\n"));
    expect_copy_bad(S("VA 3 t5 f0\r\nbarX\n"));
    expect_copy_bad(S("VA 3 t5 f0\nbar\r\n"));
    expect_copy_bad(S("VA x t5 f0\r\nbar\r\n"));
    expect_copy_bad(S("VA t5 f0\r\nbar\r\n"));
    expect_copy_bad(S("VA 3 t5 f0\r\nbar\r\nEN\r\n"));
    expect_copy_bad(S("EN\r\nEN\r\n"));
    expect_copy_bad(S("\r\n"));
    expect_copy_bad("", 0);
    assert_int_equal(ch_mc_copy_read(NULL, 0, &c), -1);
    assert_int_equal(ch_mc_copy_read(S("EN\r\n"), NULL), -1);
}

static void expect_exptime(int64_t ttl, int64_t now, int64_t want)
{
    int64_t e = 12345;
    if (!ch_mc_copy_exptime(ttl, now, &e) || e != want)
        fail_msg("ttl %lld at %lld: exptime %lld, expected %lld", (long long)ttl, (long long)now,
                 (long long)e, (long long)want);
}

static void expect_no_exptime(int64_t ttl, int64_t now)
{
    int64_t e = 12345;
    if (ch_mc_copy_exptime(ttl, now, &e))
        fail_msg("ttl %lld at %lld copied (exptime %lld)", (long long)ttl, (long long)now,
                 (long long)e);
}

static void test_copy_exptime(void **state)
{
    (void)state;
    const int64_t now = 1700000000; /* 2023-11-14 */
    /* protocol.txt: exptime 0 means "never expires"; mg's t is -1 for such an item. */
    expect_exptime(-1, now, 0);
    expect_exptime(-1, 0, 0);
    /* Nothing to copy: expiring within the second, or a t no server sends. */
    expect_no_exptime(0, now);
    expect_no_exptime(-2, now);
    expect_no_exptime(INT64_MIN, now);
    int64_t e;
    assert_false(ch_mc_copy_exptime(5, now, NULL));
    assert_false(ch_mc_copy_exptime(-1, now, NULL));
    /* protocol.txt, "Expiration times": an offset "may not exceed 60*60*24*30 (number of
     * seconds in 30 days); if the number sent by a client is larger than that, the server will
     * consider it to be real Unix time". 60*60*24*30 = 2592000. */
    assert_int_equal(CH_MC_RELATIVE_MAX, 60 * 60 * 24 * 30);
    expect_exptime(1, now, 1);
    expect_exptime(100, now, 100);
    expect_exptime(2592000, now, 2592000);
    expect_exptime(2592000, 0, 2592000);
    expect_exptime(2592001, now, 1702592001);
    expect_exptime(100000000, now, 1800000000);
    /* memcached keeps an exptime in 32 bits (proto_text.c reads it with safe_strtol into an
     * int32_t; memcached 1.6.18 seen: "set k 0 2147483648 1" is STORED and gone at once,
     * "set k 0 4294967296 1" never expires): the latest it can keep is 2^31 - 1, 2038-01-19,
     * where the sum saturates. */
    expect_exptime(2147483647 - now, now, 2147483647);
    expect_exptime(2147483647 - now + 1, now, 2147483647);
    expect_exptime(4294967296 - now, now, 2147483647);
    expect_exptime(INT64_MAX, now, 2147483647);
    expect_exptime(INT64_MAX, INT64_MAX, 2147483647);
    expect_exptime(2592001, INT64_MAX, 2147483647);
    expect_exptime(2592001, 2147483647 - 2592001, 2147483647);
    /* A long ttl is relative no more: never below the 30 days. */
    assert_true(ch_mc_copy_exptime(2592001, now, &e));
    assert_true(e > CH_MC_RELATIVE_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_limits_init),
        cmocka_unit_test(test_get_family),
        cmocka_unit_test(test_storage),
        cmocka_unit_test(test_storage_errors),
        cmocka_unit_test(test_keyed),
        cmocka_unit_test(test_local_refused_unknown),
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_max_keys_and_tokens),
        cmocka_unit_test(test_line_length),
        cmocka_unit_test(test_meta_get),
        cmocka_unit_test(test_meta_set),
        cmocka_unit_test(test_meta_other),
        cmocka_unit_test(test_meta_b64_keys),
        cmocka_unit_test(test_b64_decode),
        cmocka_unit_test(test_split_feeds),
        cmocka_unit_test(test_reply_get),
        cmocka_unit_test(test_reply_multi_part),
        cmocka_unit_test(test_reply_text),
        cmocka_unit_test(test_reply_meta),
        cmocka_unit_test(test_quiet),
        cmocka_unit_test(test_rebuild),
        cmocka_unit_test(test_null_and_caps),
        cmocka_unit_test(test_copy_key_plain),
        cmocka_unit_test(test_copy_b64_encode),
        cmocka_unit_test(test_copy_fetch),
        cmocka_unit_test(test_copy_read),
        cmocka_unit_test(test_copy_exptime),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

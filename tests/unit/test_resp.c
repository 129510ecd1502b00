/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_resp.c — the RESP parser (proxy/proto/resp.h) against its contract.
 *
 * Every input is copied to a heap buffer of exactly its length before it is parsed, so under
 * ASan any read past len fails the test. Requests: every valid form with its arguments; every
 * prefix of a set of valid pipelines is INCOMPLETE with len < need <= the request's length and
 * the whole parses to the expected requests one after another; each malformed or over-limit
 * input gives its status and its exact message; need values where the contract fixes them;
 * limits at their exact boundaries; argc beyond argv_cap; a round trip of random requests
 * through a test-side encoder. Replies: every type, nested and null arrays, integers at the
 * int64 boundaries and one past them, the depth limit, every prefix, walking an array. A copy's
 * RESTORE ttl from PTTL (-2, -1, 0, positive, time elapsed past it, the int64 limits), by the
 * Redis documentation of PTTL and RESTORE.
 */
#include "testutil.h"

#include <resp.h>

#include <stdarg.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

/* A string literal and its length (literals may hold NUL bytes). */
#define S(lit) (lit), (sizeof(lit) - 1)

#define MAXA 16

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
    ch_resp_status st;
    size_t argc, consumed, need;
    size_t off[MAXA], len[MAXA]; /* arguments as offsets into the input */
    char err[128];
} preq;

/* Parses s[0..n) from an exact-size copy; checks that every argument lies inside the request. */
static preq parse_req_cap(const char *s, size_t n, const ch_resp_limits *lim, size_t cap)
{
    assert_true(cap <= MAXA);
    char *b = dup_exact(s, n);
    ch_resp_arg argv[MAXA];
    preq r;
    memset(&r, 0, sizeof r);
    r.argc = r.consumed = r.need = 12345;
    r.st = ch_resp_parse_request(b, n, lim, argv, cap, &r.argc, &r.consumed, &r.need, r.err,
                                 sizeof r.err);
    if (r.st == CH_RESP_OK) {
        assert_true(r.consumed > 0 && r.consumed <= n);
        assert_int_equal(r.need, 0);
        for (size_t i = 0; i < r.argc && i < cap; i++) {
            assert_true(argv[i].p >= b && argv[i].p + argv[i].len <= b + r.consumed);
            r.off[i] = (size_t)(argv[i].p - b);
            r.len[i] = argv[i].len;
        }
    } else {
        assert_int_equal(r.argc, 0);
        assert_int_equal(r.consumed, 0);
        if (r.st == CH_RESP_INCOMPLETE) {
            assert_true(r.need > n);
        } else {
            assert_int_equal(r.need, 0);
            assert_true(strlen(r.err) > 0);
            assert_null(strpbrk(r.err, "\r\n"));
        }
    }
    free(b);
    return r;
}

static preq parse_req(const char *s, size_t n, const ch_resp_limits *lim)
{
    return parse_req_cap(s, n, lim, MAXA);
}

/* s[0..n) is exactly one request of the NULL-terminated args. */
static void expect_req(const char *s, size_t n, const char *const *args)
{
    preq r = parse_req(s, n, NULL);
    assert_int_equal(r.st, CH_RESP_OK);
    assert_int_equal(r.consumed, n);
    size_t k = 0;
    for (; args[k]; k++) {
        assert_true(k < r.argc);
        assert_int_equal(r.len[k], strlen(args[k]));
        assert_memory_equal(s + r.off[k], args[k], r.len[k]);
    }
    assert_int_equal(r.argc, k);
}

static void expect_req_fail(const char *s, size_t n, const ch_resp_limits *lim,
                            ch_resp_status st, const char *msg)
{
    preq r = parse_req(s, n, lim);
    if (r.st != st || strcmp(r.err, msg) != 0)
        fail_msg("input of %zu bytes: status %d \"%s\", expected %d \"%s\"", n, r.st, r.err, st,
                 msg);
}

static void expect_req_need(const char *s, size_t n, const ch_resp_limits *lim, size_t need)
{
    preq r = parse_req(s, n, lim);
    assert_int_equal(r.st, CH_RESP_INCOMPLETE);
    assert_int_equal(r.need, need);
}

static ch_resp_limits tiny_limits(void)
{
    ch_resp_limits l;
    ch_resp_limits_init(&l);
    l.max_args = 4;
    l.max_bulk = 16;
    l.max_request = 64;
    l.max_inline = 8;
    l.max_depth = 3;
    return l;
}

/* ---- requests: valid forms ----------------------------------------------------------------- */

static void test_limits_init(void **state)
{
    (void)state;
    ch_resp_limits l;
    ch_resp_limits_init(&l);
    assert_int_equal(l.max_args, 1024 * 1024);
    assert_int_equal(l.max_bulk, 512u * 1024 * 1024);
    assert_int_equal(l.max_request, 64u * 1024 * 1024);
    assert_int_equal(l.max_inline, 64 * 1024);
    assert_int_equal(l.max_depth, 64);
    ch_resp_limits_init(NULL); /* harmless */
}

static void test_request_arrays(void **state)
{
    (void)state;
    expect_req(S("*1\r\n$4\r\nPING\r\n"), (const char *[]){"PING", NULL});
    expect_req(S("*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n"), (const char *[]){"GET", "key", NULL});
    expect_req(S("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n"),
               (const char *[]){"SET", "k", "", NULL});
    /* A bulk's bytes are taken by length: CR, LF, '*' and '$' inside are data. */
    expect_req(S("*2\r\n$4\r\nECHO\r\n$8\r\n\r\n*1\r\n$x\r\n"),
               (const char *[]){"ECHO", "\r\n*1\r\n$x", NULL});
    /* Ten or more arguments: multi-digit counts and lengths. */
    expect_req(S("*10\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n$1\r\nf\r\n"
                 "$1\r\ng\r\n$1\r\nh\r\n$1\r\ni\r\n$12\r\n0123456789ab\r\n"),
               (const char *[]){"a", "b", "c", "d", "e", "f", "g", "h", "i", "0123456789ab", NULL});

    /* NUL bytes in a bulk. */
    preq r = parse_req(S("*1\r\n$3\r\na\0b\r\n"), NULL);
    assert_int_equal(r.st, CH_RESP_OK);
    assert_int_equal(r.argc, 1);
    assert_int_equal(r.len[0], 3);
    assert_int_equal(r.off[0], 8);
}

static void test_request_empty_arrays(void **state)
{
    (void)state;
    /* "*0" and "*-1" are empty requests: consumed, argc 0 (redis-server answers nothing). */
    preq r = parse_req(S("*0\r\n"), NULL);
    assert_int_equal(r.st, CH_RESP_OK);
    assert_int_equal(r.argc, 0);
    assert_int_equal(r.consumed, 4);
    r = parse_req(S("*-1\r\n*1\r\n$4\r\nPING\r\n"), NULL);
    assert_int_equal(r.st, CH_RESP_OK);
    assert_int_equal(r.argc, 0);
    assert_int_equal(r.consumed, 5);
}

static void test_request_inline(void **state)
{
    (void)state;
    expect_req(S("PING\r\n"), (const char *[]){"PING", NULL});
    expect_req(S("PING\n"), (const char *[]){"PING", NULL});
    expect_req(S("SET  k\tv \r\n"), (const char *[]){"SET", "k", "v", NULL});
    expect_req(S("\t GET x\n"), (const char *[]){"GET", "x", NULL});
    /* Only spaces and tabs separate; quotes are not interpreted; a CR inside the line is data. */
    expect_req(S("SET \"a b\" c\r\n"), (const char *[]){"SET", "\"a", "b\"", "c", NULL});
    expect_req(S("GET a\rb\n"), (const char *[]){"GET", "a\rb", NULL});
    /* An inline line may start with '$' or anything but '*'. */
    expect_req(S("$3\r\n"), (const char *[]){"$3", NULL});

    /* Empty and blank lines are consumed with argc 0. */
    const struct {
        const char *s;
        size_t n;
    } empty[] = {{S("\r\n")}, {S("\n")}, {S("   \t\r\n")}, {S(" \n")}};
    for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
        preq r = parse_req(empty[i].s, empty[i].n, NULL);
        assert_int_equal(r.st, CH_RESP_OK);
        assert_int_equal(r.argc, 0);
        assert_int_equal(r.consumed, empty[i].n);
    }
    /* Only the first line is the request. */
    preq r = parse_req(S("GET a\nGET b\n"), NULL);
    assert_int_equal(r.st, CH_RESP_OK);
    assert_int_equal(r.consumed, 6);
    assert_int_equal(r.argc, 2);
}

static void test_request_empty_buffer(void **state)
{
    (void)state;
    size_t argc = 9, consumed = 9, need = 0;
    assert_int_equal(ch_resp_parse_request(NULL, 0, NULL, NULL, 0, &argc, &consumed, &need, NULL,
                                           0),
                     CH_RESP_INCOMPLETE);
    assert_int_equal(need, 1);
    assert_int_equal(argc, 0);
    assert_int_equal(consumed, 0);
}

/* ---- requests: every split point of valid pipelines ---------------------------------------- */

typedef struct pipeline {
    const char *s;
    size_t n;
    size_t nreq;
    size_t consumed[6];
    size_t argc[6];
} pipeline;

static const pipeline PIPELINES[] = {
    {S("*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n"), 1, {22}, {2}},
    {S("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nva\r\nl\r\n*1\r\n$4\r\nPING\r\n"), 2, {31, 14}, {3, 1}},
    {S("PING\r\nGET k\n\r\n*0\r\n*-1\r\n*1\r\n$0\r\n\r\n"), 6, {6, 6, 2, 4, 5, 10}, {1, 2, 0, 0, 0, 1}},
    {S("*1\r\n$12\r\n0123456789ab\r\n  \t\n*2\r\n$0\r\n\r\n$0\r\n\r\n"), 3, {23, 4, 16}, {1, 0, 2}},
    {S("*11\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n$1\r\nf\r\n$1\r\ng\r\n"
       "$1\r\nh\r\n$1\r\ni\r\n$1\r\nj\r\n$10\r\n\r\n\r\n\r\n\r\n\r\n\r\n"),
     1, {92}, {11}},
};

static void test_request_every_split(void **state)
{
    (void)state;
    for (size_t t = 0; t < sizeof PIPELINES / sizeof PIPELINES[0]; t++) {
        const pipeline *pl = &PIPELINES[t];
        size_t off = 0;
        for (size_t q = 0; q < pl->nreq; q++) {
            const char *m = pl->s + off;
            const size_t full = pl->consumed[q];
            assert_true(off + full <= pl->n);
            for (size_t p = 0; p < full; p++) {
                preq r = parse_req(m, p, NULL);
                if (r.st != CH_RESP_INCOMPLETE || r.need <= p || r.need > full)
                    fail_msg("pipeline %zu request %zu prefix %zu: status %d need %zu (full %zu)",
                             t, q, p, r.st, r.need, full);
            }
            /* The request alone, and with everything after it in the buffer. */
            for (int whole = 0; whole < 2; whole++) {
                preq r = parse_req(m, whole ? pl->n - off : full, NULL);
                assert_int_equal(r.st, CH_RESP_OK);
                assert_int_equal(r.consumed, full);
                assert_int_equal(r.argc, pl->argc[q]);
            }
            off += full;
        }
        assert_int_equal(off, pl->n);
    }
}

/* A caller that waits for *need bytes before each retry reaches the request in few steps. */
static void test_request_need_values(void **state)
{
    (void)state;
    /* A bulk in progress: the end of that bulk and its CRLF. */
    static char big[13 + 100000 + 2];
    memcpy(big, "*1\r\n$100000\r\n", 13);
    memset(big + 13, 'x', 100000);
    memcpy(big + 13 + 100000, "\r\n", 2);
    for (size_t p = 13; p < sizeof big; p += 997)
        expect_req_need(big, p, NULL, sizeof big);
    preq r = parse_req(big, sizeof big, NULL);
    assert_int_equal(r.st, CH_RESP_OK);
    assert_int_equal(r.len[0], 100000);

    /* A length line in progress: its digits, CRLF, the bulk and its CRLF. */
    expect_req_need(S("*1\r\n$10"), NULL, 21); /* "*1\r\n$10\r\n0123456789\r\n" */
    expect_req_need(S("*1\r\n$10\r"), NULL, 21);
    expect_req_need(S("*1\r\n$"), NULL, 9); /* a digit short of "$0\r\n\r\n": still a bound */
    /* Arguments still owed: 6 bytes ("$0\r\n\r\n") each. */
    expect_req_need(S("*3\r\n$3\r\nSET\r\n"), NULL, 13 + 2 * 6);
    expect_req_need(S("*3\r\n$3\r\nSET\r\n$1\r\nk"), NULL, 20 + 6);
    expect_req_need(S("*1000"), NULL, 5 + 2 + 1000 * 6);
    expect_req_need(S("*"), NULL, 3);
    expect_req_need(S("*-"), NULL, 4);
    expect_req_need(S("*-1\r"), NULL, 5);
    /* Inline: one more byte. */
    expect_req_need(S("GET k"), NULL, 6);
    expect_req_need(S("GET k\r"), NULL, 7);
}

/* ---- requests: malformed and over-limit ---------------------------------------------------- */

static void test_request_malformed(void **state)
{
    (void)state;
    const char *mb = "Protocol error: invalid multibulk length";
    const char *bl = "Protocol error: invalid bulk length";
    const char *crlf = "Protocol error: expected CRLF after bulk string";
    const struct {
        const char *s;
        size_t n;
        const char *msg;
    } cases[] = {
        {S("*x\r\n"), mb},
        {S("*\r\n"), mb},
        {S("*-2\r\n"), mb},
        {S("*-0\r\n"), mb},
        {S("*-10"), mb},
        {S("*-1x"), mb},
        {S("*01\r\n"), mb},
        {S("*00"), mb},
        {S("*+1\r\n"), mb},
        {S("* 1\r\n"), mb},
        {S("*1 \r\n"), mb},
        {S("*1\n"), mb},
        {S("*1\rx"), mb},
        {S("*1\r\r\n"), mb},
        {S("*99999999999999999999\r\n"), mb},  /* past int64, refused before any limit */
        {S("*1\r\n:1\r\n"), "Protocol error: expected '$', got ':'"},
        {S("*1\r\nGET\r\n"), "Protocol error: expected '$', got 'G'"},
        {S("*1\r\n\r\n"), "Protocol error: expected '$', got '\\x0d'"},
        {S("*1\r\n\0"), "Protocol error: expected '$', got '\\x00'"},
        {S("*1\r\n'"), "Protocol error: expected '$', got '\\x27'"},
        {S("*1\r\n\xff"), "Protocol error: expected '$', got '\\xff'"},
        {S("*2\r\n$1\r\na\r\n*1\r\n"), "Protocol error: expected '$', got '*'"},
        {S("*1\r\n$-1\r\n"), bl},
        {S("*1\r\n$-"), bl},
        {S("*1\r\n$x\r\n"), bl},
        {S("*1\r\n$\r\n"), bl},
        {S("*1\r\n$01\r\n"), bl},
        {S("*1\r\n$3 \r\n"), bl},
        {S("*1\r\n$3\n"), bl},
        {S("*1\r\n$99999999999999999999\r\n"), bl},
        {S("*1\r\n$3\r\nGETX\r\n"), crlf},
        {S("*1\r\n$3\r\nGETX"), crlf},
        {S("*1\r\n$3\r\nGET\rX"), crlf},
        {S("*1\r\n$3\r\nGET\n\r"), crlf},
        {S("*1\r\n$0\r\n\n"), crlf},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_req_fail(cases[i].s, cases[i].n, NULL, CH_RESP_BAD, cases[i].msg);
}

static void test_request_too_big(void **state)
{
    (void)state;
    const char *args = "Protocol error: too many arguments";
    const char *bl = "Protocol error: invalid bulk length";
    const char *req = "Protocol error: too big request";
    const char *inl = "Protocol error: too big inline request";

    /* Defaults: a 2^40-byte bulk is refused as soon as its length is read, even before its
     * CRLF, not awaited. */
    expect_req_fail(S("*1\r\n$1099511627776\r\n"), NULL, CH_RESP_TOO_BIG, bl);
    expect_req_fail(S("*1\r\n$1099511627776"), NULL, CH_RESP_TOO_BIG, bl);
    expect_req_fail(S("*1\r\n$536870913\r\n"), NULL, CH_RESP_TOO_BIG, bl); /* 512 MiB + 1 */
    expect_req_fail(S("*2\r\n$3\r\nSET\r\n$536870913"), NULL, CH_RESP_TOO_BIG, bl);
    /* 512 MiB itself is allowed by max_bulk but not by max_request (64 MiB). */
    expect_req_fail(S("*1\r\n$536870912\r\n"), NULL, CH_RESP_TOO_BIG, req);
    expect_req_fail(S("*1\r\n$67108865"), NULL, CH_RESP_TOO_BIG, req);
    expect_req_fail(S("*1048577\r\n"), NULL, CH_RESP_TOO_BIG, args);
    expect_req_fail(S("*1048577"), NULL, CH_RESP_TOO_BIG, args);
    expect_req_fail(S("*9223372036854775807\r\n"), NULL, CH_RESP_TOO_BIG, args);
    /* 1 Mi arguments are allowed; the request is then merely incomplete. */
    preq r = parse_req(S("*1048576\r\n"), NULL);
    assert_int_equal(r.st, CH_RESP_INCOMPLETE);
    assert_int_equal(r.need, 10 + (size_t)1048576 * 6);

    /* Tiny limits, at the exact boundaries. */
    const ch_resp_limits t = tiny_limits();
    expect_req_fail(S("*5\r\n"), &t, CH_RESP_TOO_BIG, args);
    r = parse_req(S("*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n"), &t);
    assert_int_equal(r.st, CH_RESP_OK);
    assert_int_equal(r.argc, 4);
    expect_req_fail(S("*1\r\n$17\r\n"), &t, CH_RESP_TOO_BIG, bl);
    expect_req_fail(S("*1\r\n$17"), &t, CH_RESP_TOO_BIG, bl);
    r = parse_req(S("*1\r\n$16\r\n0123456789abcdef\r\n"), &t);
    assert_int_equal(r.st, CH_RESP_OK);
    /* 64 bytes in all is the most: 3 x 16-byte bulks = 4 + 3 * 23 = 73 > 64, proven by the
     * third length line even though its data has not come. */
    expect_req_fail(S("*3\r\n$16\r\n0123456789abcdef\r\n$16\r\n0123456789abcdef\r\n$16\r\n"), &t,
                    CH_RESP_TOO_BIG, req);
    /* Owed arguments count: 4 + 23 + 23 + 6 = 56 fits, but 4 + 23 + 23 + 17 = 67 > 64 once the
     * third bulk's length says at least 10 bytes. */
    r = parse_req(S("*3\r\n$16\r\n0123456789abcdef\r\n$16\r\n0123456789abcdef\r\n"), &t);
    assert_int_equal(r.st, CH_RESP_INCOMPLETE);
    assert_int_equal(r.need, 56);
    expect_req_fail(S("*3\r\n$16\r\n0123456789abcdef\r\n$16\r\n0123456789abcdef\r\n$10"), &t,
                    CH_RESP_TOO_BIG, req);
    /* A complete request of exactly max_request bytes is fine; one byte more is not. */
    ch_resp_limits m = tiny_limits();
    m.max_request = 27;
    r = parse_req(S("*1\r\n$16\r\n0123456789abcdef\r\n"), &m);
    assert_int_equal(r.st, CH_RESP_OK);
    m.max_request = 26;
    expect_req_fail(S("*1\r\n$16\r\n0123456789abcdef\r\n"), &m, CH_RESP_TOO_BIG, req);
    expect_req_fail(S("*1\r\n$16\r\n"), &m, CH_RESP_TOO_BIG, req);
    m.max_request = 3;
    expect_req_fail(S("*0\r\n"), &m, CH_RESP_TOO_BIG, req);

    /* Inline: max_inline = 8 bytes before the terminator. */
    r = parse_req(S("12345678\r\n"), &t);
    assert_int_equal(r.st, CH_RESP_OK);
    r = parse_req(S("12345678\n"), &t);
    assert_int_equal(r.st, CH_RESP_OK);
    expect_req_fail(S("123456789\n"), &t, CH_RESP_TOO_BIG, inl);
    expect_req_fail(S("123456789\r\n"), &t, CH_RESP_TOO_BIG, inl);
    expect_req_fail(S("123456789"), &t, CH_RESP_TOO_BIG, inl);  /* proven without the newline */
    expect_req_fail(S("12345678\rX"), &t, CH_RESP_TOO_BIG, inl);
    expect_req_need(S("12345678\r"), &t, 10);
    expect_req_need(S("12345678"), &t, 9);
    m = tiny_limits();
    m.max_inline = 64;
    expect_req_fail(S("a b c d e\n"), &m, CH_RESP_TOO_BIG, args);
    r = parse_req(S("a b c d\n"), &m);
    assert_int_equal(r.st, CH_RESP_OK);
    assert_int_equal(r.argc, 4);
    /* Defaults: a 64 KiB + 1 line without a newline. */
    static char line[64 * 1024 + 2];
    memset(line, 'a', sizeof line);
    expect_req_fail(line, sizeof line, NULL, CH_RESP_TOO_BIG, inl);
    expect_req_fail(line, 64 * 1024 + 1, NULL, CH_RESP_TOO_BIG, inl);
    expect_req_need(line, 64 * 1024, NULL, 64 * 1024 + 1);
    line[64 * 1024] = '\n';
    r = parse_req(line, 64 * 1024 + 1, NULL);
    assert_int_equal(r.st, CH_RESP_OK);
    assert_int_equal(r.argc, 1);
}

static void test_request_err_buffer(void **state)
{
    (void)state;
    char err[8];
    memset(err, 'z', sizeof err);
    size_t argc, consumed, need;
    assert_int_equal(ch_resp_parse_request(S("*x\r\n"), NULL, NULL, 0, &argc, &consumed, &need,
                                           err, sizeof err),
                     CH_RESP_BAD);
    assert_string_equal(err, "Protoco"); /* truncated, terminated */
    assert_int_equal(ch_resp_parse_request(S("*x\r\n"), NULL, NULL, 0, &argc, &consumed, &need,
                                           NULL, 0),
                     CH_RESP_BAD);
    /* Every out-parameter but the buffer itself may be NULL. */
    assert_int_equal(ch_resp_parse_request(S("PING\r\n"), NULL, NULL, 0, NULL, NULL, NULL, NULL, 0),
                     CH_RESP_OK);
    /* On success err holds the empty string. */
    memset(err, 'z', sizeof err);
    assert_int_equal(ch_resp_parse_request(S("PING\r\n"), NULL, NULL, 0, &argc, &consumed, &need,
                                           err, sizeof err),
                     CH_RESP_OK);
    assert_string_equal(err, "");
}

/* argc > argv_cap: OK with the full count; nothing written past argv_cap. */
static void test_request_argv_cap(void **state)
{
    (void)state;
    const char *inputs[] = {"*5\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n",
                            "a b c d e\r\n"};
    for (size_t i = 0; i < 2; i++) {
        const size_t n = strlen(inputs[i]);
        char *b = dup_exact(inputs[i], n);
        ch_resp_arg argv[4];
        const ch_resp_arg sentinel = {(const char *)&argv, 777};
        argv[2] = argv[3] = sentinel;
        size_t argc = 0, consumed = 0, need = 0;
        assert_int_equal(ch_resp_parse_request(b, n, NULL, argv, 2, &argc, &consumed, &need, NULL,
                                               0),
                         CH_RESP_OK);
        assert_int_equal(argc, 5);
        assert_int_equal(consumed, n);
        assert_int_equal(argv[0].len, 1);
        assert_int_equal(argv[0].p[0], 'a');
        assert_int_equal(argv[1].p[0], 'b');
        assert_ptr_equal(argv[2].p, sentinel.p);
        assert_int_equal(argv[2].len, 777);
        assert_int_equal(argv[3].len, 777);
        /* No array at all. */
        assert_int_equal(ch_resp_parse_request(b, n, NULL, NULL, 0, &argc, &consumed, &need, NULL,
                                               0),
                         CH_RESP_OK);
        assert_int_equal(argc, 5);
        free(b);
    }
}

/* ---- requests: round trip of random requests ------------------------------------------------ */

/* The test-side encoder: "*<n>\r\n" then "$<len>\r\n<bytes>\r\n" for each argument. */
static size_t encode(char *out, size_t argc, char args[][48], const size_t *lens)
{
    size_t n = (size_t)sprintf(out, "*%zu\r\n", argc);
    for (size_t i = 0; i < argc; i++) {
        n += (size_t)sprintf(out + n, "$%zu\r\n", lens[i]);
        memcpy(out + n, args[i], lens[i]);
        n += lens[i];
        memcpy(out + n, "\r\n", 2);
        n += 2;
    }
    return n;
}

static void test_request_round_trip(void **state)
{
    (void)state;
    enum { REQS = 400, PER = 8 };
    static const char alphabet[] = "ab*$:+-\r\n \t\0\xff";
    uint64_t rng = 0x5eed0fa11;
    static char pipe[REQS * (16 + PER * (24 + 48))];
    static char args[REQS][PER][48];
    static size_t lens[REQS][PER], argcs[REQS], sizes[REQS];
    size_t n = 0;
    for (size_t q = 0; q < REQS; q++) {
        argcs[q] = 1 + tu_below(&rng, PER);
        for (size_t i = 0; i < argcs[q]; i++) {
            lens[q][i] = tu_below(&rng, 5) == 0 ? 0 : tu_below(&rng, 48);
            for (size_t j = 0; j < lens[q][i]; j++)
                args[q][i][j] = alphabet[tu_below(&rng, sizeof alphabet - 1)];
        }
        sizes[q] = encode(pipe + n, argcs[q], args[q], lens[q]);
        n += sizes[q];
    }
    /* Each alone, then the pipeline one after the other. */
    size_t off = 0;
    for (size_t q = 0; q < REQS; q++) {
        for (int whole = 0; whole < 2; whole++) {
            preq r = parse_req(pipe + off, whole ? n - off : sizes[q], NULL);
            assert_int_equal(r.st, CH_RESP_OK);
            assert_int_equal(r.consumed, sizes[q]);
            assert_int_equal(r.argc, argcs[q]);
            for (size_t i = 0; i < argcs[q]; i++) {
                assert_int_equal(r.len[i], lens[q][i]);
                assert_memory_equal(pipe + off + r.off[i], args[q][i], lens[q][i]);
            }
        }
        /* A random prefix is incomplete, with a need inside (prefix, size]. */
        size_t p = tu_below(&rng, sizes[q]);
        preq r = parse_req(pipe + off, p, NULL);
        assert_int_equal(r.st, CH_RESP_INCOMPLETE);
        assert_true(r.need > p && r.need <= sizes[q]);
        off += sizes[q];
    }

    /* Inline: random words joined by random runs of spaces and tabs. */
    static const char word_chars[] = "abcxyz019$:\"'\r"; /* no '*': it would start an array */
    for (size_t q = 0; q < 300; q++) {
        char line[512], words[8][16];
        size_t wl[8], nw = tu_below(&rng, 8), ln = 0;
        for (size_t w = 0; w < nw; w++) {
            size_t runs = tu_below(&rng, 3) + (w > 0);
            for (size_t k = 0; k < runs; k++)
                line[ln++] = tu_below(&rng, 2) ? ' ' : '\t';
            wl[w] = 1 + tu_below(&rng, 15);
            for (size_t j = 0; j < wl[w]; j++)
                words[w][j] = word_chars[tu_below(&rng, sizeof word_chars - 1)];
            /* A word's last byte is not CR, which would merge into a CRLF terminator. */
            if (words[w][wl[w] - 1] == '\r')
                words[w][wl[w] - 1] = 'r';
            memcpy(line + ln, words[w], wl[w]);
            ln += wl[w];
        }
        for (size_t k = tu_below(&rng, 3); k > 0; k--)
            line[ln++] = ' ';
        if (tu_below(&rng, 2))
            line[ln++] = '\r';
        line[ln++] = '\n';
        preq r = parse_req(line, ln, NULL);
        assert_int_equal(r.st, CH_RESP_OK);
        assert_int_equal(r.consumed, ln);
        assert_int_equal(r.argc, nw);
        for (size_t w = 0; w < nw; w++) {
            assert_int_equal(r.len[w], wl[w]);
            assert_memory_equal(line + r.off[w], words[w], wl[w]);
        }
    }
}

/* ---- replies ------------------------------------------------------------------------------- */

typedef struct prep {
    ch_resp_status st;
    ch_resp_reply r;
    size_t need;
    char err[128];
} prep;

static prep scan(const char *s, size_t n, const ch_resp_limits *lim)
{
    char *b = dup_exact(s, n);
    prep p;
    memset(&p, 0, sizeof p);
    p.need = 12345;
    p.st = ch_resp_scan_reply(b, n, lim, &p.r, &p.need, p.err, sizeof p.err);
    if (p.st == CH_RESP_OK) {
        assert_true(p.r.len > 0 && p.r.len <= n);
        assert_int_equal(p.need, 0);
    } else if (p.st == CH_RESP_INCOMPLETE) {
        assert_true(p.need > n);
    } else {
        assert_true(strlen(p.err) > 0);
        assert_null(strpbrk(p.err, "\r\n"));
    }
    free(b);
    return p;
}

static void expect_reply(const char *s, size_t n, ch_resp_type type, size_t len, int64_t integer,
                         size_t body, size_t body_len)
{
    prep p = scan(s, n, NULL);
    if (p.st != CH_RESP_OK)
        fail_msg("reply \"%.*s\": status %d %s", (int)n, s, p.st, p.err);
    assert_int_equal(p.r.type, type);
    assert_int_equal(p.r.len, len);
    assert_true(p.r.integer == integer);
    assert_int_equal(p.r.body, body);
    assert_int_equal(p.r.body_len, body_len);
}

static void expect_reply_fail(const char *s, size_t n, const ch_resp_limits *lim,
                              ch_resp_status st, const char *msg)
{
    prep p = scan(s, n, lim);
    if (p.st != st || strcmp(p.err, msg) != 0)
        fail_msg("reply of %zu bytes: status %d \"%s\", expected %d \"%s\"", n, p.st, p.err, st,
                 msg);
}

static void test_reply_types(void **state)
{
    (void)state;
    expect_reply(S("+OK\r\n"), CH_RESP_STATUS, 5, 0, 1, 2);
    expect_reply(S("+\r\n"), CH_RESP_STATUS, 3, 0, 1, 0);
    expect_reply(S("-ERR wrong type\r\n+OK\r\n"), CH_RESP_ERROR, 17, 0, 1, 14);
    expect_reply(S(":0\r\n"), CH_RESP_INTEGER, 4, 0, 1, 1);
    expect_reply(S(":-1\r\n"), CH_RESP_INTEGER, 5, -1, 1, 2);
    expect_reply(S(":1234\r\n"), CH_RESP_INTEGER, 7, 1234, 1, 4);
    expect_reply(S(":9223372036854775807\r\n"), CH_RESP_INTEGER, 22, INT64_MAX, 1, 19);
    expect_reply(S(":-9223372036854775808\r\n"), CH_RESP_INTEGER, 23, INT64_MIN, 1, 20);
    expect_reply(S("$5\r\nhello\r\n"), CH_RESP_BULK, 11, 5, 4, 5);
    expect_reply(S("$0\r\n\r\n"), CH_RESP_BULK, 6, 0, 4, 0);
    expect_reply(S("$4\r\n\r\n\r\n\r\n"), CH_RESP_BULK, 10, 4, 4, 4);
    expect_reply(S("$-1\r\n"), CH_RESP_BULK, 5, -1, 5, 0);
    expect_reply(S("*-1\r\n"), CH_RESP_ARRAY, 5, -1, 5, 0);
    expect_reply(S("*0\r\n"), CH_RESP_ARRAY, 4, 0, 4, 0);
    expect_reply(S("*2\r\n$1\r\na\r\n:2\r\n"), CH_RESP_ARRAY, 15, 2, 4, 11);
    /* Nested, with null and empty members: [1, [a, nil], [], nil-array, "x"]. */
    expect_reply(S("*5\r\n:1\r\n*2\r\n$1\r\na\r\n$-1\r\n*0\r\n*-1\r\n+x\r\n:9\r\n"),
                 CH_RESP_ARRAY, 37, 5, 4, 33);
}

/* Walking an array: its elements, scanned one after the other from its body, end at its end. */
static void test_reply_walk(void **state)
{
    (void)state;
    const char m[] = "*3\r\n*2\r\n+a\r\n:1\r\n$3\r\nxyz\r\n-E\r\n";
    prep top = scan(S(m), NULL);
    assert_int_equal(top.st, CH_RESP_OK);
    const ch_resp_type types[] = {CH_RESP_ARRAY, CH_RESP_BULK, CH_RESP_ERROR};
    size_t pos = top.r.body;
    for (size_t i = 0; i < 3; i++) {
        prep e = scan(m + pos, top.r.len - pos, NULL);
        assert_int_equal(e.st, CH_RESP_OK);
        assert_int_equal(e.r.type, types[i]);
        if (i == 1)
            assert_memory_equal(m + pos + e.r.body, "xyz", 3);
        pos += e.r.len;
    }
    assert_int_equal(pos, top.r.len);
    assert_int_equal(top.r.len, sizeof m - 1);
}

static void test_reply_malformed(void **state)
{
    (void)state;
    const char *in = "Protocol error: invalid integer";
    const char *bl = "Protocol error: invalid bulk length";
    const char *mb = "Protocol error: invalid multibulk length";
    const struct {
        const char *s;
        size_t n;
        const char *msg;
    } cases[] = {
        {S(":9223372036854775808\r\n"), in},   /* INT64_MAX + 1 */
        {S(":-9223372036854775809\r\n"), in},  /* INT64_MIN - 1 */
        {S(":99999999999999999999\r\n"), in},
        {S(":-0\r\n"), in},
        {S(":01\r\n"), in},
        {S(":+1\r\n"), in},
        {S(":\r\n"), in},
        {S(":-\r\n"), in},
        {S(":1x\r\n"), in},
        {S(": 1\r\n"), in},
        {S(":1\n"), in},
        {S(":1\rx"), in},
        {S("$-2\r\n"), bl},
        {S("$-0\r\n"), bl},
        {S("$x\r\n"), bl},
        {S("$\r\n"), bl},
        {S("$1\n"), bl},
        {S("$9223372036854775808\r\n"), bl},
        {S("$5\r\nhelloX"), "Protocol error: expected CRLF after bulk string"},
        {S("$5\r\nhello\rX"), "Protocol error: expected CRLF after bulk string"},
        {S("$-1\r\nx"), NULL}, /* fine: the reply ends before the x */
        {S("*-2\r\n"), mb},
        {S("*x\r\n"), mb},
        {S("*1\r\n*01\r\n"), mb},
        {S("*2\r\n:1\r\n!\r\n"), bl}, /* a blob error's length is missing */
        {S("*2\r\n:1\r\n@\r\n"), "Protocol error: unknown reply type '@'"},
        {S("x"), "Protocol error: unknown reply type 'x'"},
        {S("\r\n"), "Protocol error: unknown reply type '\\x0d'"},
        {S("\n"), "Protocol error: unknown reply type '\\x0a'"},
        {S("+OK\rX"), "Protocol error: expected LF after CR"},
        {S("-ERR\r\r\n"), "Protocol error: expected LF after CR"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!cases[i].msg) {
            assert_int_equal(scan(cases[i].s, cases[i].n, NULL).st, CH_RESP_OK);
            continue;
        }
        expect_reply_fail(cases[i].s, cases[i].n, NULL, CH_RESP_BAD, cases[i].msg);
    }
}

/* A reply n arrays deep: "*1\r\n" n times, then ":1\r\n". */
static size_t nested(char *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        memcpy(out + 4 * i, "*1\r\n", 4);
    memcpy(out + 4 * n, ":1\r\n", 4);
    return 4 * n + 4;
}

static void test_reply_limits(void **state)
{
    (void)state;
    const char *deep = "Protocol error: reply nesting too deep";
    static char buf[4 * 300 + 4];
    size_t n = nested(buf, 64);
    prep p = scan(buf, n, NULL);
    assert_int_equal(p.st, CH_RESP_OK);
    assert_int_equal(p.r.len, n);
    n = nested(buf, 65);
    expect_reply_fail(buf, n, NULL, CH_RESP_TOO_BIG, deep);
    /* Refused when the 65th array begins, before the rest arrives. */
    expect_reply_fail(buf, 64 * 4 + 1, NULL, CH_RESP_TOO_BIG, deep);

    ch_resp_limits t = tiny_limits(); /* max_depth 3 */
    n = nested(buf, 3);
    assert_int_equal(scan(buf, n, &t).st, CH_RESP_OK);
    n = nested(buf, 4);
    expect_reply_fail(buf, n, &t, CH_RESP_TOO_BIG, deep);
    /* Null and empty arrays count as arrays. */
    expect_reply_fail(S("*1\r\n*1\r\n*1\r\n*0\r\n"), &t, CH_RESP_TOO_BIG, deep);
    expect_reply_fail(S("*1\r\n*1\r\n*1\r\n*-1\r\n"), &t, CH_RESP_TOO_BIG, deep);
    assert_int_equal(scan(S("*1\r\n*1\r\n*-1\r\n"), &t).st, CH_RESP_OK);
    /* A flat array deeper in count than in nesting is fine. */
    assert_int_equal(scan(S("*3\r\n*1\r\n:1\r\n*1\r\n:2\r\n*1\r\n*1\r\n:3\r\n"), &t).st,
                     CH_RESP_OK);
    t.max_depth = 0;
    expect_reply_fail(S("*0\r\n"), &t, CH_RESP_TOO_BIG, deep);
    assert_int_equal(scan(S(":1\r\n"), &t).st, CH_RESP_OK);
    /* max_depth beyond the scanner's fixed stack of 256 open arrays acts as 256. */
    t.max_depth = 1000;
    n = nested(buf, 256);
    assert_int_equal(scan(buf, n, &t).st, CH_RESP_OK);
    n = nested(buf, 257);
    expect_reply_fail(buf, n, &t, CH_RESP_TOO_BIG, deep);

    /* Bulk length: max_bulk, and 2^40 refused at once. */
    const char *bl = "Protocol error: invalid bulk length";
    expect_reply_fail(S("$1099511627776"), NULL, CH_RESP_TOO_BIG, bl);
    expect_reply_fail(S("*2\r\n$1\r\na\r\n$1099511627776\r\n"), NULL, CH_RESP_TOO_BIG, bl);
    t = tiny_limits();
    expect_reply_fail(S("$17\r\n"), &t, CH_RESP_TOO_BIG, bl);
    assert_int_equal(scan(S("$16\r\n0123456789abcdef\r\n"), &t).st, CH_RESP_OK);
    /* A simple string is bounded like a bulk: 16 bytes of text, then CR. */
    const char *ss = "Protocol error: too big simple string";
    assert_int_equal(scan(S("+0123456789abcdef\r\n"), &t).st, CH_RESP_OK);
    expect_reply_fail(S("+0123456789abcdefg\r\n"), &t, CH_RESP_TOO_BIG, ss);
    expect_reply_fail(S("-0123456789abcdefg"), &t, CH_RESP_TOO_BIG, ss);
    p = scan(S("+0123456789abcdef"), &t);
    assert_int_equal(p.st, CH_RESP_INCOMPLETE);
    assert_int_equal(p.need, 19);
}

typedef struct reply_case {
    const char *s;
    size_t n;
} reply_case;

static const reply_case REPLIES[] = {
    {S("+OK\r\n")},
    {S("-ERR unknown command 'FOO'\r\n")},
    {S(":-9223372036854775808\r\n")},
    {S(":42\r\n")},
    {S("$12\r\nhello\r\nworld\r\n")},
    {S("$0\r\n\r\n")},
    {S("$-1\r\n")},
    {S("*-1\r\n")},
    {S("*0\r\n")},
    {S("*12\r\n:1\r\n:2\r\n:3\r\n:4\r\n:5\r\n:6\r\n:7\r\n:8\r\n:9\r\n:10\r\n+a\r\n-b\r\n")},
    {S("*3\r\n*2\r\n$1\r\na\r\n*1\r\n$-1\r\n*0\r\n*2\r\n+x\r\n*1\r\n:-5\r\n")},
    {S("*2\r\n$1\r\n0\r\n*2\r\n$3\r\nfoo\r\n$3\r\nbar\r\n")},
};

/* Every prefix of every reply is INCOMPLETE with len < need <= the reply's length. */
static void test_reply_every_split(void **state)
{
    (void)state;
    char pipe[1024];
    size_t total = 0;
    for (size_t t = 0; t < sizeof REPLIES / sizeof REPLIES[0]; t++) {
        const reply_case *c = &REPLIES[t];
        for (size_t p = 0; p < c->n; p++) {
            prep r = scan(c->s, p, NULL);
            if (r.st != CH_RESP_INCOMPLETE || r.need <= p || r.need > c->n)
                fail_msg("reply %zu prefix %zu: status %d need %zu (full %zu) %s", t, p, r.st,
                         r.need, c->n, r.err);
        }
        prep r = scan(c->s, c->n, NULL);
        assert_int_equal(r.st, CH_RESP_OK);
        assert_int_equal(r.r.len, c->n);
        assert_int_equal(r.r.type, (ch_resp_type)c->s[0]);
        memcpy(pipe + total, c->s, c->n);
        total += c->n;
    }
    /* Back to back, they scan one after the other. */
    size_t off = 0;
    for (size_t t = 0; t < sizeof REPLIES / sizeof REPLIES[0]; t++) {
        prep r = scan(pipe + off, total - off, NULL);
        assert_int_equal(r.st, CH_RESP_OK);
        assert_int_equal(r.r.len, REPLIES[t].n);
        off += r.r.len;
    }
    assert_int_equal(off, total);
    assert_int_equal(scan(pipe + off, 0, NULL).need, 3); /* "+\r\n" is the shortest reply */
}

static void test_reply_need_values(void **state)
{
    (void)state;
    /* A bulk in progress: its end and CRLF; owed elements count 3 bytes each, at every level. */
    prep p = scan(S("$100000\r\nabc"), NULL);
    assert_int_equal(p.need, 9 + 100000 + 2);
    p = scan(S("*3\r\n$10\r\nab"), NULL);
    assert_int_equal(p.need, 9 + 10 + 2 + 2 * 3);
    p = scan(S("*2\r\n*2\r\n:1\r\n"), NULL);
    assert_int_equal(p.need, 12 + 3 + 3);
    p = scan(S("*1000"), NULL);
    assert_int_equal(p.need, 5 + 2 + 1000 * 3);
    p = scan(S(":12"), NULL);
    assert_int_equal(p.need, 5);
    p = scan(S("+OK"), NULL);
    assert_int_equal(p.need, 5);
    p = scan(S("$-1\r"), NULL);
    assert_int_equal(p.need, 5);
    /* out and need may be NULL. */
    assert_int_equal(ch_resp_scan_reply(S("+OK\r\n"), NULL, NULL, NULL, NULL, 0), CH_RESP_OK);
    assert_int_equal(ch_resp_scan_reply(NULL, 0, NULL, NULL, NULL, NULL, 0), CH_RESP_INCOMPLETE);
}

/* ---- RESP3 --------------------------------------------------------------------------------- */

/* Every RESP3 type with its fields, by RESP3.md: a null, booleans, doubles (Redis's own forms),
 * big numbers, a blob error, a verbatim string (its format inside the payload), aggregates
 * whose counts are pairs (map) or elements (set, push), and an attribute, which is part of the
 * element after it. */
static void test_reply_resp3_types(void **state)
{
    (void)state;
    expect_reply(S("_\r\n"), CH_RESP_NULL, 3, -1, 1, 0);
    expect_reply(S("#t\r\n"), CH_RESP_BOOL, 4, 1, 1, 0);
    expect_reply(S("#f\r\n+OK\r\n"), CH_RESP_BOOL, 4, 0, 1, 0);
    expect_reply(S(",1.5\r\n"), CH_RESP_DOUBLE, 6, 0, 1, 3);
    expect_reply(S(",10\r\n"), CH_RESP_DOUBLE, 5, 0, 1, 2);
    expect_reply(S(",inf\r\n"), CH_RESP_DOUBLE, 6, 0, 1, 3);
    expect_reply(S(",-inf\r\n"), CH_RESP_DOUBLE, 7, 0, 1, 4);
    expect_reply(S(",nan\r\n"), CH_RESP_DOUBLE, 6, 0, 1, 3);
    expect_reply(S(",1e+300\r\n"), CH_RESP_DOUBLE, 9, 0, 1, 6);
    expect_reply(S(",-1.25E-7\r\n"), CH_RESP_DOUBLE, 11, 0, 1, 8);
    expect_reply(S("(3492890328409238509324850943850943825024385\r\n"), CH_RESP_BIGNUM, 46, 0, 1,
                 43);
    expect_reply(S("(-1\r\n"), CH_RESP_BIGNUM, 5, 0, 1, 2);
    expect_reply(S("!21\r\nSYNTAX invalid syntax\r\n"), CH_RESP_BLOB_ERROR, 28, 21, 5, 21);
    expect_reply(S("!0\r\n\r\n"), CH_RESP_BLOB_ERROR, 6, 0, 4, 0);
    expect_reply(S("=15\r\ntxt:Some string\r\n"), CH_RESP_VERBATIM, 22, 15, 5, 15);
    expect_reply(S("%2\r\n+a\r\n:1\r\n+b\r\n:2\r\n"), CH_RESP_MAP, 20, 2, 4, 16);
    expect_reply(S("%0\r\n"), CH_RESP_MAP, 4, 0, 4, 0);
    expect_reply(S("~3\r\n:1\r\n_\r\n#t\r\n"), CH_RESP_SET, 15, 3, 4, 11);
    expect_reply(S(">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nx\r\n"), CH_RESP_PUSH, 32, 3, 4,
                 28);
    /* Maps and sets inside arrays and maps, a push's elements of any type. */
    expect_reply(S("*2\r\n%1\r\n~1\r\n,1\r\n*0\r\n_\r\n"), CH_RESP_ARRAY, 23, 2, 4, 19);
    expect_reply(S(">2\r\n+invalidate\r\n*1\r\n$1\r\nk\r\n"), CH_RESP_PUSH, 28, 2, 4, 24);

    /* An attribute before the element: the element's type and fields, attr its offset. */
    prep p = scan(S("|1\r\n+ttl\r\n:3600\r\n:42\r\n+next\r\n"), NULL);
    assert_int_equal(p.st, CH_RESP_OK);
    assert_int_equal(p.r.type, CH_RESP_INTEGER);
    assert_int_equal(p.r.attr, 17);
    assert_int_equal(p.r.len, 22);
    assert_true(p.r.integer == 42);
    assert_int_equal(p.r.body, 18);
    /* Attributes inside an aggregate are parts of its elements; an empty one annotates too. */
    p = scan(S("*2\r\n|1\r\n+k\r\n+v\r\n$1\r\na\r\n|0\r\n:7\r\n"), NULL);
    assert_int_equal(p.st, CH_RESP_OK);
    assert_int_equal(p.r.type, CH_RESP_ARRAY);
    assert_int_equal(p.r.len, 31);
    assert_int_equal(p.r.attr, 0);
    /* Two attributes in a row, and an attribute whose values are aggregates. */
    p = scan(S("|1\r\n+a\r\n*1\r\n:1\r\n|1\r\n+b\r\n%1\r\n+x\r\n+y\r\n_\r\n"), NULL);
    assert_int_equal(p.st, CH_RESP_OK);
    assert_int_equal(p.r.type, CH_RESP_NULL);
    assert_int_equal(p.r.attr, 36);
    assert_int_equal(p.r.len, 39);
    /* Walking a map: keys and values alternate, twice its count, ending at its end. */
    const char m[] = "%2\r\n$1\r\na\r\n~1\r\n,2.5\r\n$1\r\nb\r\n_\r\n";
    prep top = scan(S(m), NULL);
    assert_int_equal(top.st, CH_RESP_OK);
    const ch_resp_type types[] = {CH_RESP_BULK, CH_RESP_SET, CH_RESP_BULK, CH_RESP_NULL};
    size_t pos = top.r.body;
    for (size_t i = 0; i < 4; i++) {
        prep e = scan(m + pos, top.r.len - pos, NULL);
        assert_int_equal(e.st, CH_RESP_OK);
        assert_int_equal(e.r.type, types[i]);
        pos += e.r.len;
    }
    assert_int_equal(pos, sizeof m - 1);
}

static void test_reply_resp3_malformed(void **state)
{
    (void)state;
    const char *bl = "Protocol error: invalid bulk length";
    const char *mb = "Protocol error: invalid multibulk length";
    const struct {
        const char *s;
        size_t n;
        const char *msg;
    } cases[] = {
        {S("_x"), "Protocol error: invalid null"},
        {S("_\rx"), "Protocol error: invalid null"},
        {S("#x\r\n"), "Protocol error: invalid boolean"},
        {S("#T\r\n"), "Protocol error: invalid boolean"},
        {S("#t\n"), "Protocol error: invalid boolean"},
        {S("#t\rx"), "Protocol error: invalid boolean"},
        {S(",\r\n"), "Protocol error: invalid double"},
        {S(",abc\r\n"), "Protocol error: invalid double"},
        {S(",.5\r\n"), "Protocol error: invalid double"},
        {S(",1e\r\n"), "Protocol error: invalid double"},
        {S(",1 \r\n"), "Protocol error: invalid double"},
        {S(",infinity\r\n"), "Protocol error: invalid double"},
        {S("(\r\n"), "Protocol error: invalid big number"},
        {S("(-\r\n"), "Protocol error: invalid big number"},
        {S("(12a\r\n"), "Protocol error: invalid big number"},
        {S("(+1\r\n"), "Protocol error: invalid big number"},
        {S(",1\rx"), "Protocol error: expected LF after CR"},
        {S("!-1\r\n"), bl},
        {S("=-1\r\n"), bl},
        {S("=3\r\nabc\r\n"), "Protocol error: invalid verbatim string"},
        {S("=4\r\nabcd\r\n"), "Protocol error: invalid verbatim string"},
        {S("=5\r\ntxt;x\r\n"), "Protocol error: invalid verbatim string"},
        {S("%-1\r\n"), mb},
        {S("~-1\r\n"), mb},
        {S(">-1\r\n"), mb},
        {S("|-1\r\n"), mb},
        {S("%?\r\n"), mb},
        {S("$?\r\n"), bl},
        {S(";4\r\nabcd\r\n"), "Protocol error: streamed RESP3 types are not supported"},
        {S(".\r\n"), "Protocol error: streamed RESP3 types are not supported"},
        {S("*1\r\n>1\r\n:1\r\n"), "Protocol error: push inside an aggregate"},
        {S("%1\r\n+k\r\n>1\r\n:1\r\n"), "Protocol error: push inside an aggregate"},
        {S("|1\r\n+k\r\n>1\r\n:1\r\n"), "Protocol error: push inside an aggregate"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_reply_fail(cases[i].s, cases[i].n, NULL, CH_RESP_BAD, cases[i].msg);
    /* A number line never found its end within 4096 bytes: refused, not awaited. */
    static char lng[4200];
    lng[0] = ',';
    memset(lng + 1, '1', sizeof lng - 1);
    expect_reply_fail(lng, sizeof lng, NULL, CH_RESP_BAD, "Protocol error: invalid double");
    assert_int_equal(scan(lng, 4097, NULL).st, CH_RESP_INCOMPLETE);
}

/* Nesting: maps, sets, pushes and attributes count as levels like arrays; 10,000 levels of
 * any of them are refused once the 65th opens. */
static void test_reply_resp3_depth(void **state)
{
    (void)state;
    const char *deep = "Protocol error: reply nesting too deep";
    static char buf[10000 * 4 + 4];
    const char opens[] = {'%', '~', '|', '*'};
    for (size_t o = 0; o < sizeof opens; o++) {
        size_t n = 0;
        for (size_t i = 0; i < 10000; i++) {
            buf[n++] = opens[o];
            memcpy(buf + n, "1\r\n", 3);
            n += 3;
        }
        expect_reply_fail(buf, n, NULL, CH_RESP_TOO_BIG, deep);
        expect_reply_fail(buf, 65 * 4, NULL, CH_RESP_TOO_BIG, deep);
        if (opens[o] != '%' && opens[o] != '|') { /* 64 levels of one element each: fine */
            memcpy(buf + 64 * 4, ":1\r\n", 4);
            assert_int_equal(scan(buf, 64 * 4 + 4, NULL).st, CH_RESP_OK);
        }
    }
    ch_resp_limits t = tiny_limits(); /* max_depth 3 */
    assert_int_equal(scan(S("%1\r\n+k\r\n~1\r\n*1\r\n:1\r\n"), &t).st, CH_RESP_OK);
    expect_reply_fail(S("%1\r\n+k\r\n~1\r\n*1\r\n%0\r\n"), &t, CH_RESP_TOO_BIG, deep);
    /* An attribute is a level while its own elements are read, not around its element. */
    assert_int_equal(scan(S("|1\r\n+k\r\n*1\r\n*1\r\n:1\r\n*1\r\n*1\r\n*1\r\n:1\r\n"), &t).st,
                     CH_RESP_OK);
    expect_reply_fail(S("|1\r\n+k\r\n*1\r\n*1\r\n*1\r\n:1\r\n"), &t, CH_RESP_TOO_BIG, deep);
}

typedef struct reply3_case {
    const char *s;
    size_t n;
    ch_resp_type type;
} reply3_case;

static const reply3_case REPLIES3[] = {
    {S("_\r\n"), CH_RESP_NULL},
    {S("#t\r\n"), CH_RESP_BOOL},
    {S(",-1.5e-10\r\n"), CH_RESP_DOUBLE},
    {S("(123456789012345678901234567890\r\n"), CH_RESP_BIGNUM},
    {S("!10\r\nERR ab\r\nbc\r\n"), CH_RESP_BLOB_ERROR},
    {S("=9\r\ntxt:hello\r\n"), CH_RESP_VERBATIM},
    {S("%2\r\n$1\r\na\r\n,1\r\n$1\r\nb\r\n%1\r\n_\r\n~0\r\n"), CH_RESP_MAP},
    {S("~2\r\n#f\r\n(7\r\n"), CH_RESP_SET},
    {S(">4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$1\r\nc\r\n$1\r\nm\r\n"), CH_RESP_PUSH},
    {S("|2\r\n+a\r\n:1\r\n+b\r\n*1\r\n_\r\n%1\r\n+k\r\n|0\r\n+v\r\n"), CH_RESP_MAP},
    {S("|0\r\n|1\r\n+x\r\n+y\r\n$0\r\n\r\n"), CH_RESP_BULK},
};

/* Every prefix of every RESP3 reply is INCOMPLETE with len < need <= the reply's length. */
static void test_reply_resp3_every_split(void **state)
{
    (void)state;
    for (size_t t = 0; t < sizeof REPLIES3 / sizeof REPLIES3[0]; t++) {
        const reply3_case *c = &REPLIES3[t];
        for (size_t p = 0; p < c->n; p++) {
            prep r = scan(c->s, p, NULL);
            if (r.st != CH_RESP_INCOMPLETE || r.need <= p || r.need > c->n)
                fail_msg("reply %zu prefix %zu: status %d need %zu (full %zu) %s", t, p, r.st,
                         r.need, c->n, r.err);
        }
        prep r = scan(c->s, c->n, NULL);
        assert_int_equal(r.st, CH_RESP_OK);
        assert_int_equal(r.r.len, c->n);
        assert_int_equal(r.r.type, c->type);
    }
    /* need values: a map owes two elements per pair; an attribute, its pairs and its element. */
    assert_int_equal(scan(S("%2\r\n"), NULL).need, 4 + 4 * 3);
    assert_int_equal(scan(S("|1\r\n"), NULL).need, 4 + 3 * 3);
    assert_int_equal(scan(S("|1\r\n+a\r\n+b\r\n"), NULL).need, 12 + 3);
    assert_int_equal(scan(S("#"), NULL).need, 4);
    assert_int_equal(scan(S("_"), NULL).need, 3);
    assert_int_equal(scan(S("=100\r\ntxt"), NULL).need, 6 + 100 + 2);
}

/* ---- copying a key: RESTORE's ttl from PTTL ------------------------------------------------- */

static void expect_restore(int64_t pttl, int64_t elapsed, int64_t want)
{
    int64_t t = 12345;
    if (!ch_resp_restore_ttl(pttl, elapsed, &t) || t != want)
        fail_msg("PTTL %lld, %lld ms later: ttl %lld, expected %lld", (long long)pttl,
                 (long long)elapsed, (long long)t, (long long)want);
}

static void expect_no_restore(int64_t pttl, int64_t elapsed)
{
    int64_t t = 12345;
    if (ch_resp_restore_ttl(pttl, elapsed, &t))
        fail_msg("PTTL %lld, %lld ms later: copied with ttl %lld", (long long)pttl,
                 (long long)elapsed, (long long)t);
}

static void test_restore_ttl(void **state)
{
    (void)state;
    /* Redis's PTTL: "-2 if the key does not exist", "-1 if the key exists but has no associated
     * expire"; RESTORE: "If ttl is 0 the key is created without any expire, otherwise the
     * specified expire time (in milliseconds) is set". */
    expect_restore(-1, 0, 0);
    expect_restore(-1, 5000, 0);
    expect_restore(-1, INT64_MAX, 0);
    expect_no_restore(-2, 0);
    expect_no_restore(-2, 5000);
    expect_no_restore(-3, 0);
    expect_no_restore(INT64_MIN, 0);
    /* PTTL 0: the key expires within the millisecond; a RESTORE ttl 0 would make it eternal. */
    expect_no_restore(0, 0);
    expect_no_restore(0, 10);
    /* The time since the PTTL was read is taken off, so a copy never outlives its original. */
    expect_restore(1, 0, 1);
    expect_restore(1000, 0, 1000);
    expect_restore(1000, 300, 700);
    expect_restore(1000, 999, 1);
    expect_no_restore(1000, 1000);
    expect_no_restore(1000, 1001);
    expect_no_restore(1000, 5000);
    expect_no_restore(1, INT64_MAX);
    /* At the limits, no overflow; a clock that stepped back adds nothing. */
    expect_restore(INT64_MAX, 0, INT64_MAX);
    expect_restore(INT64_MAX, 1, INT64_MAX - 1);
    expect_no_restore(INT64_MAX, INT64_MAX);
    expect_restore(1000, -5, 1000);
    expect_restore(1000, INT64_MIN, 1000);
    expect_restore(INT64_MAX, INT64_MIN, INT64_MAX);
    /* No out-parameter, no answer. */
    assert_false(ch_resp_restore_ttl(1000, 0, NULL));
    assert_false(ch_resp_restore_ttl(-1, 0, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_limits_init),
        cmocka_unit_test(test_request_arrays),
        cmocka_unit_test(test_request_empty_arrays),
        cmocka_unit_test(test_request_inline),
        cmocka_unit_test(test_request_empty_buffer),
        cmocka_unit_test(test_request_every_split),
        cmocka_unit_test(test_request_need_values),
        cmocka_unit_test(test_request_malformed),
        cmocka_unit_test(test_request_too_big),
        cmocka_unit_test(test_request_err_buffer),
        cmocka_unit_test(test_request_argv_cap),
        cmocka_unit_test(test_request_round_trip),
        cmocka_unit_test(test_reply_types),
        cmocka_unit_test(test_reply_walk),
        cmocka_unit_test(test_reply_malformed),
        cmocka_unit_test(test_reply_limits),
        cmocka_unit_test(test_reply_every_split),
        cmocka_unit_test(test_reply_need_values),
        cmocka_unit_test(test_reply_resp3_types),
        cmocka_unit_test(test_reply_resp3_malformed),
        cmocka_unit_test(test_reply_resp3_depth),
        cmocka_unit_test(test_reply_resp3_every_split),
        cmocka_unit_test(test_restore_ttl),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

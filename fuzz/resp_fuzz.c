/* SPDX-License-Identifier: Apache-2.0 */
/*
 * resp_fuzz.c — libFuzzer target for proxy/proto/resp.c (built and run by fuzz/run.sh).
 *
 * Each input is read as a stream of requests and, separately, as a stream of replies, under the
 * default limits and under tiny ones (so TOO_BIG paths are reached with small inputs). Messages
 * are consumed one after another until a call is not OK. Every call checks the contract and
 * traps on a violation:
 *   - OK: 0 < consumed <= len; every argument slice lies inside the message; a reply's body and
 *     payload lie inside it, and an array's elements, scanned from its body, are exactly its
 *     count and end exactly at its end.
 *   - INCOMPLETE: need > len.
 *   - BAD / TOO_BIG: a non-empty, NUL-terminated, one-line reason.
 *   - For each OK message, the caller's loop is replayed on its prefixes: starting from 0 bytes
 *     and growing to *need each time, every prefix is INCOMPLETE with len < need <= the message's
 *     length, until the whole message parses to the same result. Prefixes are copied to buffers
 *     of their exact size, so ASan catches any read past len.
 */
#include "resp.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ARGV_CAP 8

static void check(int ok)
{
    if (!ok)
        __builtin_trap();
}

static void check_err(const char *err, size_t errlen)
{
    const char *nul = memchr(err, '\0', errlen);
    check(nul != NULL);
    size_t n = (size_t)(nul - err);
    check(n > 0 && n < errlen);
    check(memchr(err, '\r', n) == NULL && memchr(err, '\n', n) == NULL);
}

static char *dup_exact(const char *p, size_t n)
{
    char *b = malloc(n ? n : 1);
    if (!b)
        abort();
    if (n)
        memcpy(b, p, n);
    return b;
}

/* ---- requests ------------------------------------------------------------------------------ */

static ch_resp_status request(const char *buf, size_t len, const ch_resp_limits *lim,
                              ch_resp_arg *argv, size_t *argc, size_t *consumed)
{
    size_t need = 0;
    char err[128];
    ch_resp_status st =
        ch_resp_parse_request(buf, len, lim, argv, ARGV_CAP, argc, consumed, &need, err, sizeof err);
    switch (st) {
    case CH_RESP_OK:
        check(*consumed > 0 && *consumed <= len);
        for (size_t i = 0; i < *argc && i < ARGV_CAP; i++)
            check(argv[i].p >= buf && argv[i].len <= *consumed &&
                  (size_t)(argv[i].p - buf) <= *consumed - argv[i].len);
        break;
    case CH_RESP_INCOMPLETE:
        check(need > len);
        break;
    case CH_RESP_BAD:
    case CH_RESP_TOO_BIG:
        check_err(err, sizeof err);
        break;
    default:
        check(0);
    }
    return st;
}

/* Replays the caller's wait-for-need loop on the prefixes of a message that parsed OK. */
static void request_prefixes(const char *msg, size_t total, const ch_resp_limits *lim,
                             size_t argc_full)
{
    size_t p = 0;
    for (;;) {
        char *b = dup_exact(msg, p);
        ch_resp_arg argv[ARGV_CAP];
        size_t argc = 0, consumed = 0, need = 0;
        ch_resp_status st =
            ch_resp_parse_request(b, p, lim, argv, ARGV_CAP, &argc, &consumed, &need, NULL, 0);
        free(b);
        if (p == total) {
            check(st == CH_RESP_OK && consumed == total && argc == argc_full);
            return;
        }
        check(st == CH_RESP_INCOMPLETE && need > p && need <= total);
        p = need;
    }
}

static void requests(const char *buf, size_t len, const ch_resp_limits *lim)
{
    size_t off = 0;
    for (;;) {
        ch_resp_arg argv[ARGV_CAP];
        size_t argc = 0, consumed = 0;
        if (request(buf + off, len - off, lim, argv, &argc, &consumed) != CH_RESP_OK)
            return;
        request_prefixes(buf + off, consumed, lim, argc);
        off += consumed;
    }
}

/* ---- replies ------------------------------------------------------------------------------- */

static ch_resp_status reply(const char *buf, size_t len, const ch_resp_limits *lim,
                            ch_resp_reply *r, unsigned depth);

/* The elements of an OK aggregate reply r at buf (a map's twice its count), ending exactly at
 * r->len. */
static void walk_array(const char *buf, const ch_resp_reply *r, const ch_resp_limits *lim,
                       unsigned depth)
{
    if (r->integer <= 0) {
        check(r->body == r->len && r->body_len == 0);
        return;
    }
    int64_t n = r->type == CH_RESP_MAP ? 2 * r->integer : r->integer;
    size_t pos = r->body;
    for (int64_t i = 0; i < n; i++) {
        ch_resp_reply e;
        check(pos < r->len);
        check(reply(buf + pos, r->len - pos, lim, &e, depth + 1) == CH_RESP_OK);
        check(e.type != CH_RESP_PUSH); /* a push only at the top */
        pos += e.len;
    }
    check(pos == r->len);
}

/* The attributes before an element (buf[0, attr)): whole "|" aggregates, one after the other. */
static void walk_attributes(const char *buf, size_t attr, const ch_resp_limits *lim)
{
    size_t pos = 0;
    while (pos < attr) {
        check(buf[pos] == '|');
        /* An attribute alone is not a reply: it is walked as the map it is shaped like. */
        size_t n = attr - pos;
        char *b = dup_exact(buf + pos, n);
        b[0] = '%';
        ch_resp_reply a;
        size_t need = 0;
        check(ch_resp_scan_reply(b, n, lim, &a, &need, NULL, 0) == CH_RESP_OK);
        check(a.type == CH_RESP_MAP && a.len <= n);
        free(b);
        pos += a.len;
    }
    check(pos == attr);
}

static ch_resp_status reply(const char *buf, size_t len, const ch_resp_limits *lim,
                            ch_resp_reply *r, unsigned depth)
{
    size_t need = 0;
    char err[128];
    ch_resp_status st = ch_resp_scan_reply(buf, len, lim, r, &need, err, sizeof err);
    switch (st) {
    case CH_RESP_OK:
        check(r->len > 0 && r->len <= len && r->attr < r->len && r->body <= r->len);
        check(r->type == (ch_resp_type)buf[r->attr] && r->type != CH_RESP_ATTRIBUTE);
        if (r->attr > 0 && depth < 8)
            walk_attributes(buf, r->attr, lim);
        switch (r->type) {
        case CH_RESP_STATUS:
        case CH_RESP_ERROR:
        case CH_RESP_INTEGER:
        case CH_RESP_DOUBLE:
        case CH_RESP_BIGNUM:
            check(r->body == r->attr + 1 && r->body + r->body_len + 2 == r->len);
            break;
        case CH_RESP_NULL:
            check(r->integer == -1 && r->attr + 3 == r->len);
            break;
        case CH_RESP_BOOL:
            check((r->integer == 0 || r->integer == 1) && r->attr + 4 == r->len);
            break;
        case CH_RESP_BULK:
        case CH_RESP_BLOB_ERROR:
        case CH_RESP_VERBATIM:
            check(r->integer >= (r->type == CH_RESP_BULK ? -1 : 0));
            check(r->integer == -1 ? r->body == r->len && r->body_len == 0
                                   : (size_t)r->integer == r->body_len &&
                                         r->body + r->body_len + 2 == r->len);
            if (r->type == CH_RESP_VERBATIM)
                check(r->body_len >= 4 && buf[r->body + 3] == ':');
            break;
        case CH_RESP_ARRAY:
        case CH_RESP_MAP:
        case CH_RESP_SET:
        case CH_RESP_PUSH:
            check(r->integer >= (r->type == CH_RESP_ARRAY ? -1 : 0) &&
                  r->body_len == r->len - r->body);
            /* Elements sit one level deeper; their own scans start at depth 0, so the walk
             * stops at the depth the limit allows. */
            if (depth < lim->max_depth && depth < 64)
                walk_array(buf, r, lim, depth);
            break;
        default:
            check(0);
        }
        break;
    case CH_RESP_INCOMPLETE:
        check(need > len);
        break;
    case CH_RESP_BAD:
    case CH_RESP_TOO_BIG:
        check_err(err, sizeof err);
        break;
    default:
        check(0);
    }
    return st;
}

static void reply_prefixes(const char *msg, size_t total, const ch_resp_limits *lim)
{
    size_t p = 0;
    for (;;) {
        char *b = dup_exact(msg, p);
        ch_resp_reply r;
        size_t need = 0;
        ch_resp_status st = ch_resp_scan_reply(b, p, lim, &r, &need, NULL, 0);
        free(b);
        if (p == total) {
            check(st == CH_RESP_OK && r.len == total);
            return;
        }
        check(st == CH_RESP_INCOMPLETE && need > p && need <= total);
        p = need;
    }
}

static void replies(const char *buf, size_t len, const ch_resp_limits *lim)
{
    size_t off = 0;
    for (;;) {
        ch_resp_reply r;
        if (reply(buf + off, len - off, lim, &r, 0) != CH_RESP_OK)
            return;
        reply_prefixes(buf + off, r.len, lim);
        off += r.len;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exact-size copy: reads past size are caught even when libFuzzer's buffer is larger. */
    char *buf = dup_exact((const char *)data, size);
    ch_resp_limits dflt, tiny;
    ch_resp_limits_init(&dflt);
    tiny = (ch_resp_limits){.max_args = 4, .max_bulk = 16, .max_request = 64, .max_inline = 24,
                            .max_depth = 3};
    requests(buf, size, &dflt);
    requests(buf, size, &tiny);
    replies(buf, size, &dflt);
    replies(buf, size, &tiny);
    free(buf);
    return 0;
}

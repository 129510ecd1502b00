/* SPDX-License-Identifier: Apache-2.0 */
/*
 * resp.c — RESP request parsing and reply scanning (see resp.h for the contract).
 *
 * Every call starts at buf[0] and makes one forward pass over at most len bytes; nothing is
 * kept between calls and nothing is allocated. Lengths, counts and integers are read by one
 * inline digit loop; simple-string lines and inline commands are delimited with memchr; bulk
 * payloads are skipped by their declared length, never scanned.
 *
 * Replies are RESP2 and RESP3 (resp.h lists the types); an attribute is scanned as part of the
 * element it annotates, a push only at the top.
 *
 * Strictness (stricter than redis-server, which trusts the byte after '\r' and the CRLF after a
 * bulk): every line must end in "\r\n" (an inline command may end in a bare "\n"); a number is
 * "0" or an optional '-' and a digit 1-9 followed by digits (no '+', no leading zeros, no "-0",
 * no spaces), within int64; the only negative lengths are the null forms "*-1" (requests and
 * replies) and "$-1" (replies only); a bulk is followed by exactly "\r\n".
 *
 * Early verdicts: a number line is judged digit by digit, so a malformed or over-limit length is
 * reported as soon as its bytes prove it (a "$1099511627776" prefix is TOO_BIG at once, not
 * INCOMPLETE waiting for a terabyte).
 *
 * need: on INCOMPLETE, *need is a lower bound of the message's total length computed from what
 * has been declared: the end of the element in progress (a bulk's end plus its CRLF, a number
 * line's digits plus CRLF), plus the least size of every element an enclosing array still owes
 * (6 bytes, "$0\r\n\r\n", per request argument; 3 bytes, "+\r\n", per reply element), and never
 * less than len + 1. A caller that waits for *need bytes before retrying rescans a message a
 * number of times logarithmic in its size for large arrays of small elements, and only twice
 * (once for the header, once when complete) for one large bulk.
 */
#include "resp.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Arrays open at once while scanning a reply: a fixed stack of remaining-element counts.
 * lim->max_depth above this behaves as this (2 KiB of stack). */
#define RESP_DEPTH_CAP 256u

/* The least encoded size of a request argument ("$0\r\n\r\n") and of a reply element ("+\r\n"). */
#define REQ_ARG_MIN 6u
#define REPLY_ELEM_MIN 3u

void ch_resp_limits_init(ch_resp_limits *lim)
{
    if (!lim)
        return;
    lim->max_args = (size_t)1024 * 1024;
    lim->max_bulk = (size_t)512 * 1024 * 1024;
    lim->max_request = (size_t)64 * 1024 * 1024;
    lim->max_inline = (size_t)64 * 1024;
    lim->max_depth = 64;
}

/* ---- small helpers ------------------------------------------------------------------------- */

static size_t sat_add(size_t a, size_t b)
{
    return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

static size_t sat_mul(size_t a, size_t b)
{
    return b != 0 && a > SIZE_MAX / b ? SIZE_MAX : a * b;
}

/* Writes the reason to err (when given) and returns st. The text is one line: any byte of the
 * input quoted in it is printable ASCII or written as \xNN, so it can go into a "-ERR" reply. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static ch_resp_status fail(ch_resp_status st, char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* A byte shown in an error: itself when printable and not a quote or backslash, else \xNN. */
static const char *show_byte(unsigned char c, char out[5])
{
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
        out[0] = (char)c;
        out[1] = '\0';
    } else {
        snprintf(out, 5, "\\x%02x", c);
    }
    return out;
}

typedef enum { NUM_OK, NUM_PARTIAL, NUM_BAD } num_status;

typedef struct num {
    bool neg;
    uint64_t mag;  /* the magnitude of the digits read so far (all of them when NUM_OK) */
    size_t digits_end; /* the index after the last digit read */
    size_t end;    /* NUM_OK: the index after the line's "\r\n" */
} num;

/* Reads the number line that starts at buf[pos] (just after a type byte): "0" or an optional
 * '-' and [1-9][0-9]*, then "\r\n". A negative number's magnitude may be at most neg_max (0: no
 * negatives; 1: only -1; 2^63: any int64); a positive one at most INT64_MAX. Returns NUM_BAD as
 * soon as the bytes present cannot begin a valid line, NUM_PARTIAL when they can but the line
 * is not complete (n->mag is then a lower bound of the final magnitude when !n->neg, because
 * more digits only make it larger), NUM_OK when complete.
 * Cost: one comparison-and-multiply per byte, at most 22 bytes. */
static num_status read_num(const char *buf, size_t len, size_t pos, uint64_t neg_max, num *n)
{
    size_t i = pos;
    n->neg = false;
    n->mag = 0;
    if (i < len && buf[i] == '-') {
        if (neg_max == 0)
            return NUM_BAD;
        n->neg = true;
        i++;
    }
    const uint64_t limit = n->neg ? neg_max : (uint64_t)INT64_MAX;
    const size_t first = i;
    uint64_t v = 0;
    for (; i < len; i++) {
        unsigned d = (unsigned)(unsigned char)buf[i] - '0';
        if (d > 9)
            break;
        /* A leading zero is the whole number, and never negative. */
        if (i > first && buf[first] == '0')
            return NUM_BAD;
        if (d == 0 && i == first && n->neg)
            return NUM_BAD;
        if (v > limit / 10 || (v == limit / 10 && d > limit % 10))
            return NUM_BAD;
        v = v * 10 + d;
    }
    n->mag = v;
    n->digits_end = i;
    if (i == len)
        return NUM_PARTIAL;
    if (i == first || buf[i] != '\r')
        return NUM_BAD;
    if (i + 1 == len)
        return NUM_PARTIAL;
    if (buf[i + 1] != '\n')
        return NUM_BAD;
    n->end = i + 2;
    return NUM_OK;
}

/* ---- requests ------------------------------------------------------------------------------ */

typedef struct req {
    const char *buf;
    size_t len;
    const ch_resp_limits *lim;
    ch_resp_arg *argv;
    size_t argv_cap;
    size_t argc;
    size_t consumed;
    size_t need;
    char *err;
    size_t errlen;
} req;

/* INCOMPLETE with need = max(bound, len + 1), or TOO_BIG when that already exceeds max_request
 * (need is a lower bound of the request's size, so the request is proven too big). */
static ch_resp_status req_incomplete(req *r, size_t bound, const char *too_big)
{
    size_t need = bound > r->len ? bound : sat_add(r->len, 1);
    if (need > r->lim->max_request)
        return fail(CH_RESP_TOO_BIG, r->err, r->errlen, "%s", too_big);
    r->need = need;
    return CH_RESP_INCOMPLETE;
}

static const char TOO_BIG_REQUEST[] = "Protocol error: too big request";
static const char TOO_BIG_INLINE[] = "Protocol error: too big inline request";

/* "*<n>\r\n" then n times "$<len>\r\n<len bytes>\r\n". Invariant of the loop: pos is the start
 * of argument k and every argument before k is complete and valid. Each step refuses the request
 * once the end of argument k (as far as declared) plus 6 bytes per argument after it exceeds
 * max_request, so an oversized request is refused before its bytes are awaited. */
static ch_resp_status parse_multibulk(req *r)
{
    const char *buf = r->buf;
    const size_t len = r->len;
    const ch_resp_limits *lim = r->lim;
    num nm;

    num_status ns = read_num(buf, len, 1, 1, &nm);
    if (ns == NUM_BAD)
        return fail(CH_RESP_BAD, r->err, r->errlen, "Protocol error: invalid multibulk length");
    if (!nm.neg && nm.mag > lim->max_args)
        return fail(CH_RESP_TOO_BIG, r->err, r->errlen, "Protocol error: too many arguments");
    /* From here the count (or its lower bound) is at most max_args, so it fits size_t. */
    const size_t n = nm.neg ? 0 : (size_t)nm.mag;
    if (ns == NUM_PARTIAL)
        return req_incomplete(r, sat_add(sat_add(nm.digits_end, 2), sat_mul(n, REQ_ARG_MIN)),
                              TOO_BIG_REQUEST);
    if (n == 0) {
        /* "*0" and "*-1": an empty request, consumed (redis-server ignores both). */
        r->consumed = nm.end;
        return CH_RESP_OK;
    }

    size_t pos = nm.end;
    for (size_t k = 0; k < n; k++) {
        const size_t rest = sat_mul(n - k - 1, REQ_ARG_MIN); /* least size after argument k */
        if (pos == len)
            return req_incomplete(r, sat_add(sat_add(pos, REQ_ARG_MIN), rest), TOO_BIG_REQUEST);
        if (buf[pos] != '$') {
            char b[5];
            return fail(CH_RESP_BAD, r->err, r->errlen, "Protocol error: expected '$', got '%s'",
                        show_byte((unsigned char)buf[pos], b));
        }
        ns = read_num(buf, len, pos + 1, 0, &nm);
        if (ns == NUM_BAD)
            return fail(CH_RESP_BAD, r->err, r->errlen, "Protocol error: invalid bulk length");
        /* Redis answers a bulk over proto-max-bulk-len with this same text. */
        if (nm.mag > lim->max_bulk)
            return fail(CH_RESP_TOO_BIG, r->err, r->errlen, "Protocol error: invalid bulk length");
        const size_t blen = (size_t)nm.mag;
        if (ns == NUM_PARTIAL) {
            size_t bound = sat_add(sat_add(nm.digits_end, 4), sat_add(blen, rest));
            return req_incomplete(r, bound, TOO_BIG_REQUEST);
        }
        const size_t bulk_end = sat_add(nm.end, blen); /* index of the bulk's CR */
        const size_t arg_end = sat_add(bulk_end, 2);
        if (sat_add(arg_end, rest) > lim->max_request)
            return fail(CH_RESP_TOO_BIG, r->err, r->errlen, "%s", TOO_BIG_REQUEST);
        if (len > bulk_end && buf[bulk_end] != '\r')
            return fail(CH_RESP_BAD, r->err, r->errlen,
                        "Protocol error: expected CRLF after bulk string");
        if (len < arg_end)
            return req_incomplete(r, sat_add(arg_end, rest), TOO_BIG_REQUEST);
        if (buf[bulk_end + 1] != '\n')
            return fail(CH_RESP_BAD, r->err, r->errlen,
                        "Protocol error: expected CRLF after bulk string");
        if (k < r->argv_cap) {
            r->argv[k].p = buf + nm.end;
            r->argv[k].len = blen;
        }
        pos = arg_end;
    }
    r->argc = n;
    r->consumed = pos;
    return CH_RESP_OK;
}

/* A line of words separated by spaces and tabs, ended by "\n" or "\r\n". The line without its
 * terminator is at most max_inline bytes: the search for '\n' never looks further than that
 * allows, so a client streaming bytes without a newline is refused once max_inline + 2 bytes
 * (or max_inline + 1 not ending in '\r') prove the line too long. */
static ch_resp_status parse_inline(req *r)
{
    const char *buf = r->buf;
    const size_t len = r->len;
    const size_t max = r->lim->max_inline;
    const size_t window = sat_add(max, 2);
    const char *nl = memchr(buf, '\n', len < window ? len : window);
    if (!nl) {
        if (len >= window || (len == max + 1 && buf[len - 1] != '\r'))
            return fail(CH_RESP_TOO_BIG, r->err, r->errlen, "%s", TOO_BIG_INLINE);
        return req_incomplete(r, sat_add(len, 1), TOO_BIG_INLINE);
    }
    const size_t lf = (size_t)(nl - buf);
    const size_t end = lf > 0 && buf[lf - 1] == '\r' ? lf - 1 : lf;
    if (end > max || lf + 1 > r->lim->max_request)
        return fail(CH_RESP_TOO_BIG, r->err, r->errlen, "%s", TOO_BIG_INLINE);

    size_t argc = 0;
    size_t i = 0;
    for (;;) {
        while (i < end && (buf[i] == ' ' || buf[i] == '\t'))
            i++;
        if (i == end)
            break;
        const size_t start = i;
        while (i < end && buf[i] != ' ' && buf[i] != '\t')
            i++;
        if (argc == r->lim->max_args)
            return fail(CH_RESP_TOO_BIG, r->err, r->errlen, "Protocol error: too many arguments");
        if (argc < r->argv_cap) {
            r->argv[argc].p = buf + start;
            r->argv[argc].len = i - start;
        }
        argc++;
    }
    r->argc = argc;
    r->consumed = lf + 1;
    return CH_RESP_OK;
}

ch_resp_status ch_resp_parse_request(const char *buf, size_t len, const ch_resp_limits *lim,
                                     ch_resp_arg *argv, size_t argv_cap, size_t *argc,
                                     size_t *consumed, size_t *need, char *err, size_t errlen)
{
    ch_resp_limits defaults;
    if (!lim) {
        ch_resp_limits_init(&defaults);
        lim = &defaults;
    }
    if (err && errlen > 0)
        err[0] = '\0';
    req r = {buf, len, lim, argv, argv ? argv_cap : 0, 0, 0, 0, err, errlen};
    ch_resp_status st;
    if (len == 0)
        st = req_incomplete(&r, 1, TOO_BIG_REQUEST);
    else if (buf[0] == '*')
        st = parse_multibulk(&r);
    else
        st = parse_inline(&r);
    if (st == CH_RESP_OK && r.consumed > lim->max_request)
        st = fail(CH_RESP_TOO_BIG, err, errlen, "%s",
                  buf[0] == '*' ? TOO_BIG_REQUEST : TOO_BIG_INLINE);
    if (st != CH_RESP_OK)
        r.argc = r.consumed = 0;
    if (st != CH_RESP_INCOMPLETE)
        r.need = 0;
    if (argc)
        *argc = r.argc;
    if (consumed)
        *consumed = r.consumed;
    if (need)
        *need = r.need;
    return st;
}

/* ---- replies ------------------------------------------------------------------------------- */

/* The longest line of a RESP3 double or big number: far more digits than any double needs, and
 * bounding the search for its CR keeps a line streamed without one linear in the window. */
#define NUM_LINE_MAX 4096u

/* Whether p[0, n) is a RESP3 double: an optional sign, then "inf", "nan", or digits with an
 * optional fraction and exponent (what Redis writes: "1.5", "1e+300", "-inf"). */
static bool double_text(const char *p, size_t n)
{
    size_t i = n > 0 && (p[0] == '-' || p[0] == '+') ? 1 : 0;
    if (n - i == 3 && (memcmp(p + i, "inf", 3) == 0 || memcmp(p + i, "nan", 3) == 0))
        return true;
    size_t d = i;
    while (i < n && p[i] >= '0' && p[i] <= '9')
        i++;
    if (i == d)
        return false;
    if (i < n && p[i] == '.') {
        i++;
        while (i < n && p[i] >= '0' && p[i] <= '9')
            i++;
    }
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        i++;
        if (i < n && (p[i] == '-' || p[i] == '+'))
            i++;
        size_t e = i;
        while (i < n && p[i] >= '0' && p[i] <= '9')
            i++;
        if (i == e)
            return false;
    }
    return i == n;
}

/* Whether p[0, n) is a big number: an optional '-' and digits. */
static bool bignum_text(const char *p, size_t n)
{
    size_t i = n > 0 && p[0] == '-' ? 1 : 0;
    if (i == n)
        return false;
    for (; i < n; i++)
        if (p[i] < '0' || p[i] > '9')
            return false;
    return true;
}

/* Scans elements one after another. Invariant: stack[0..depth) holds, for each open aggregate
 * from the outermost, how many of its elements are not yet complete (each >= 1), and attr[d]
 * whether it is an attribute; pos is the start of the next element. An element completing
 * decrements the innermost count; a count reaching 0 closes that aggregate, which completes an
 * element of its parent, except an attribute: it annotates the element that follows it, whose
 * completion is the parent's. The reply is complete when no aggregate is open after an element
 * completes. The top element is the first that begins with nothing open and is not an
 * attribute.
 * Why one function of some 240 lines: it is one state machine, a loop over the elements with an
 * explicit stack (no recursion: a reply nested 10,000 deep costs no C stack), whose cases per
 * type share pos, depth, the stack, the top element and one INCOMPLETE exit (a label every
 * case jumps to with its elem_bound). Split per type, as hiredis's read.c is, each case would
 * take and hand all of them back. */
ch_resp_status ch_resp_scan_reply(const char *buf, size_t len, const ch_resp_limits *lim,
                                  ch_resp_reply *out, size_t *need, char *err, size_t errlen)
{
    ch_resp_limits defaults;
    if (!lim) {
        ch_resp_limits_init(&defaults);
        lim = &defaults;
    }
    if (err && errlen > 0)
        err[0] = '\0';
    if (need)
        *need = 0;
    if (out)
        memset(out, 0, sizeof *out);

    const unsigned max_depth = lim->max_depth < RESP_DEPTH_CAP ? lim->max_depth : RESP_DEPTH_CAP;
    uint64_t stack[RESP_DEPTH_CAP];
    bool attr[RESP_DEPTH_CAP];
    unsigned depth = 0;
    ch_resp_reply top = {0};
    size_t pos = 0;
    size_t elem_bound; /* on INCOMPLETE: the least end of the element in progress */
    num nm;

    for (;;) {
        if (pos == len) {
            elem_bound = sat_add(pos, REPLY_ELEM_MIN);
            goto incomplete;
        }
        const char type = buf[pos];
        ch_resp_reply e = {.type = (ch_resp_type)type, .body = pos + 1, .attr = pos};
        switch (type) {
        case '+':
        case '-':
        case ',':
        case '(': {
            /* The text ends at the first '\r', which must be followed by '\n'; a simple string
             * is bounded like a bulk string, a number's line by NUM_LINE_MAX. */
            const bool simple = type == '+' || type == '-';
            const size_t text = pos + 1;
            const size_t window = simple ? sat_add(lim->max_bulk, 1) : NUM_LINE_MAX + 1;
            const size_t avail = len - text;
            const char *cr = memchr(buf + text, '\r', avail < window ? avail : window);
            if (!cr) {
                if (avail >= window)
                    return simple ? fail(CH_RESP_TOO_BIG, err, errlen,
                                         "Protocol error: too big simple string")
                                  : fail(CH_RESP_BAD, err, errlen,
                                         "Protocol error: invalid %s",
                                         type == ',' ? "double" : "big number");
                elem_bound = sat_add(len, 2);
                goto incomplete;
            }
            const size_t crpos = (size_t)(cr - buf);
            if (crpos + 1 == len) {
                elem_bound = len + 1;
                goto incomplete;
            }
            if (buf[crpos + 1] != '\n')
                return fail(CH_RESP_BAD, err, errlen, "Protocol error: expected LF after CR");
            e.body_len = crpos - text;
            if (type == ',' && !double_text(buf + text, e.body_len))
                return fail(CH_RESP_BAD, err, errlen, "Protocol error: invalid double");
            if (type == '(' && !bignum_text(buf + text, e.body_len))
                return fail(CH_RESP_BAD, err, errlen, "Protocol error: invalid big number");
            pos = crpos + 2;
            break;
        }
        case '_':
        case '#': {
            /* "_\r\n"; "#t\r\n" or "#f\r\n": judged byte by byte as they arrive. */
            static const char null_line[] = "_\r\n";
            const size_t n = type == '_' ? 3 : 4;
            for (size_t i = 1; i < n; i++) {
                if (pos + i == len) {
                    elem_bound = pos + n;
                    goto incomplete;
                }
                char c = buf[pos + i];
                bool ok = type == '_'   ? c == null_line[i]
                          : i == 1      ? c == 't' || c == 'f'
                          : i == 2      ? c == '\r'
                                        : c == '\n';
                if (!ok)
                    return fail(CH_RESP_BAD, err, errlen, "Protocol error: invalid %s",
                                type == '_' ? "null" : "boolean");
            }
            e.integer = type == '_' ? -1 : buf[pos + 1] == 't';
            e.body_len = 0;
            pos += n;
            break;
        }
        case ':': {
            num_status ns = read_num(buf, len, pos + 1, (uint64_t)INT64_MAX + 1, &nm);
            if (ns == NUM_BAD)
                return fail(CH_RESP_BAD, err, errlen, "Protocol error: invalid integer");
            if (ns == NUM_PARTIAL) {
                elem_bound = sat_add(nm.digits_end, 2);
                goto incomplete;
            }
            e.integer = !nm.neg ? (int64_t)nm.mag
                        : nm.mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN
                                                            : -(int64_t)nm.mag;
            e.body_len = nm.digits_end - e.body;
            pos = nm.end;
            break;
        }
        case '$':
        case '!':
        case '=': {
            /* A bulk (null "$-1" allowed), a blob error, a verbatim string ("fmt:" first). */
            num_status ns = read_num(buf, len, pos + 1, type == '$' ? 1 : 0, &nm);
            if (ns == NUM_BAD)
                return fail(CH_RESP_BAD, err, errlen, "Protocol error: invalid bulk length");
            if (!nm.neg && nm.mag > lim->max_bulk)
                return fail(CH_RESP_TOO_BIG, err, errlen, "Protocol error: invalid bulk length");
            const size_t blen = nm.neg ? 0 : (size_t)nm.mag;
            if (ns == NUM_PARTIAL) {
                /* A partial "-" or "-1" is the null bulk in progress; else digits, CRLF, the
                 * payload and its CRLF. */
                elem_bound = nm.neg ? sat_add(nm.digits_end, 2)
                                    : sat_add(sat_add(nm.digits_end, 4), blen);
                goto incomplete;
            }
            if (type == '=' && blen < 4)
                return fail(CH_RESP_BAD, err, errlen, "Protocol error: invalid verbatim string");
            e.body = nm.end;
            if (nm.neg) {
                e.integer = -1;
                pos = nm.end;
                break;
            }
            e.integer = (int64_t)blen;
            e.body_len = blen;
            if (type == '=' && len > nm.end + 3 && buf[nm.end + 3] != ':')
                return fail(CH_RESP_BAD, err, errlen, "Protocol error: invalid verbatim string");
            const size_t bulk_end = sat_add(nm.end, blen);
            if (len > bulk_end && buf[bulk_end] != '\r')
                return fail(CH_RESP_BAD, err, errlen,
                            "Protocol error: expected CRLF after bulk string");
            if (len < sat_add(bulk_end, 2)) {
                elem_bound = sat_add(bulk_end, 2);
                goto incomplete;
            }
            if (buf[bulk_end + 1] != '\n')
                return fail(CH_RESP_BAD, err, errlen,
                            "Protocol error: expected CRLF after bulk string");
            pos = bulk_end + 2;
            break;
        }
        case '*':
        case '%':
        case '~':
        case '|':
        case '>': {
            if (depth >= max_depth)
                return fail(CH_RESP_TOO_BIG, err, errlen, "Protocol error: reply nesting too deep");
            if (type == '>' && depth > 0)
                return fail(CH_RESP_BAD, err, errlen, "Protocol error: push inside an aggregate");
            num_status ns = read_num(buf, len, pos + 1, type == '*' ? 1 : 0, &nm);
            if (ns == NUM_BAD)
                return fail(CH_RESP_BAD, err, errlen, "Protocol error: invalid multibulk length");
            /* A map's and an attribute's elements are twice its count (at most 2^64 - 2). */
            const uint64_t per = type == '%' || type == '|' ? 2 : 1;
            const uint64_t elems = nm.neg ? 0 : nm.mag * per;
            if (ns == NUM_PARTIAL) {
                elem_bound = nm.neg ? sat_add(nm.digits_end, 2)
                                    : sat_add(sat_add(nm.digits_end, 2),
                                              sat_mul((size_t)(elems < SIZE_MAX ? elems
                                                                                : SIZE_MAX),
                                                      REPLY_ELEM_MIN));
                goto incomplete;
            }
            e.integer = nm.neg ? -1 : (int64_t)nm.mag;
            e.body = nm.end;
            pos = nm.end;
            if (type == '|') {
                if (elems > 0) {
                    attr[depth] = true;
                    stack[depth++] = elems;
                }
                continue; /* the element it annotates follows (its own elements first) */
            }
            if (depth == 0)
                top = e;
            if (elems > 0) {
                attr[depth] = false;
                stack[depth++] = elems;
                continue; /* its elements follow; it completes with the last of them */
            }
            break;
        }
        default: {
            char b[5];
            if (type == ';' || type == '.')
                return fail(CH_RESP_BAD, err, errlen,
                            "Protocol error: streamed RESP3 types are not supported");
            return fail(CH_RESP_BAD, err, errlen, "Protocol error: unknown reply type '%s'",
                        show_byte((unsigned char)type, b));
        }
        }

        /* The element at start is complete and ends at pos. */
        if (depth == 0 && !(type == '*' || type == '%' || type == '~' || type == '>'))
            top = e;
        bool annotated = false; /* an attribute closed: the element it annotates follows */
        while (depth > 0 && --stack[depth - 1] == 0) {
            depth--;
            if (attr[depth]) {
                annotated = true;
                break;
            }
        }
        if (annotated)
            continue;
        if (depth == 0) {
            top.len = pos;
            if (top.type == CH_RESP_ARRAY || top.type == CH_RESP_MAP ||
                top.type == CH_RESP_SET || top.type == CH_RESP_PUSH)
                top.body_len = pos - top.body;
            if (out)
                *out = top;
            return CH_RESP_OK;
        }
    }

incomplete:
    /* Add the least size of the elements the open aggregates still owe after the one in
     * progress: at every level, the element in progress contains it, so each owes its count - 1
     * (an attribute owes the element it annotates besides: one more). */
    {
        size_t owed = 0;
        for (unsigned d = 0; d < depth; d++)
            owed = sat_add(owed, (size_t)(stack[d] - 1 < SIZE_MAX ? stack[d] - 1 : SIZE_MAX) +
                                     (attr[d] ? 1u : 0u));
        elem_bound = sat_add(elem_bound, sat_mul(owed, REPLY_ELEM_MIN));
    }
    if (need)
        *need = elem_bound > len ? elem_bound : sat_add(len, 1);
    return CH_RESP_INCOMPLETE;
}

bool ch_resp_restore_ttl(int64_t pttl, int64_t elapsed_ms, int64_t *ttl)
{
    if (!ttl || pttl < -1)
        return false;
    if (pttl == -1) {
        *ttl = 0;
        return true;
    }
    /* Both are a server's and a clock's: the difference saturates rather than overflows. */
    int64_t left = elapsed_ms < 0 ? pttl : elapsed_ms > pttl ? 0 : pttl - elapsed_ms;
    if (left <= 0)
        return false;
    *ttl = left;
    return true;
}

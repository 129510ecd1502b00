/* SPDX-License-Identifier: Apache-2.0 */
/*
 * admin_fuzz.c — libFuzzer target for the admin port's HTTP request head parser
 * (proxy/http_req.c; built and run by fuzz/run.sh admin).
 *
 * The input's first byte picks the limits (the admin port's, or small ones taken from the next
 * bytes) and how the rest is split into reads; the rest is the bytes a client sent. Contracts
 * checked, trapping on a violation:
 *   - fed in one call or read by read (the split the first byte picks), the outcome is the same:
 *     the status, and every span, field and figure of the head; every call before the one that
 *     decides returns AGAIN, and every call after it the same outcome again;
 *   - AGAIN leaves room: len < max_head;
 *   - BAD: a status of 400, 413, 414, 431, 501 or 505 and a reason that is one line of
 *     printable ASCII;
 *   - OK: the head ends with LF within len and max_head; the method is a token of at most
 *     PX_HTTP_MAX_METHOD bytes and the request line within max_line; path, query and authority
 *     inside the target; version 10 or 11; each field a token name and a value without control
 *     bytes (but HTAB) or whitespace at its ends; at most max_fields fields; exactly one Host
 *     field when host >= 0 (it named), none otherwise, and one for HTTP/1.1; no
 *     Transfer-Encoding; content_length -1 or 0; the head minus its last byte is AGAIN;
 *   - OK: the head rebuilt from what was parsed (the request line, then "name: value" lines)
 *     parses OK to the same method, target, version and fields.
 */
#include "http_req.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        __builtin_trap();
}

static const px_http_limits admin_limits = {.max_line = 2048, .max_head = 8192,
                                             .max_fields = 64};

static bool is_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static bool span_in(px_http_span s, size_t off, size_t len)
{
    return s.off >= off && (size_t)s.off + s.len <= off + len;
}

static bool same_span(px_http_span a, px_http_span b)
{
    return a.off == b.off && a.len == b.len;
}

static bool ieq(const char *a, size_t n, const char *b)
{
    if (strlen(b) != n)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];
        if ((x >= 'A' && x <= 'Z' ? x + 32 : x) != y)
            return false;
    }
    return true;
}

/* Two outcomes of the same bytes are the same, field by field. */
static void same(const px_http_req *a, const px_http_req *b, px_http_status sa,
                 px_http_status sb)
{
    check(sa == sb);
    if (sa == PX_HTTP_BAD) {
        check(a->status == b->status && strcmp(a->why, b->why) == 0);
        return;
    }
    if (sa != PX_HTTP_OK)
        return;
    check(same_span(a->method, b->method) && same_span(a->target, b->target) &&
          same_span(a->authority, b->authority) && same_span(a->path, b->path) &&
          same_span(a->query, b->query) && a->absolute == b->absolute &&
          a->version == b->version && a->nfields == b->nfields && a->host == b->host &&
          a->content_length == b->content_length && a->head_len == b->head_len);
    for (size_t i = 0; i < a->nfields; i++)
        check(same_span(a->fields[i].name, b->fields[i].name) &&
              same_span(a->fields[i].value, b->fields[i].value));
}

static void check_bad(const px_http_req *r)
{
    int s = r->status;
    check(s == 400 || s == 413 || s == 414 || s == 431 || s == 501 || s == 505);
    check(strcmp(px_http_reason(s), "Error") != 0);
    check(r->why != NULL && r->why[0] != '\0');
    for (const char *p = r->why; *p != '\0'; p++)
        check(*p >= ' ' && *p < 0x7f);
}

static void check_ok(const px_http_req *r, const px_http_limits *lim, const char *buf,
                     size_t len)
{
    check(r->head_len > 0 && r->head_len <= len && r->head_len <= lim->max_head);
    check(buf[r->head_len - 1] == '\n');
    check(r->method.len > 0 && r->method.len <= PX_HTTP_MAX_METHOD);
    for (size_t i = 0; i < r->method.len; i++)
        check(is_tchar((unsigned char)buf[r->method.off + i]));
    check(buf[r->method.off + r->method.len] == ' ');
    check(r->target.off == r->method.off + r->method.len + 1 && r->target.len > 0);
    /* The request line: METHOD SP TARGET SP HTTP/d.d, within max_line. */
    size_t line_len = r->method.len + 1 + r->target.len + 1 + 8;
    check(line_len <= lim->max_line);
    check(memcmp(buf + r->target.off + r->target.len, " HTTP/1.", 8) == 0);
    check(r->version == 10 || r->version == 11);
    check(span_in(r->path, r->target.off, r->target.len));
    if (r->query.len > 0)
        check(span_in(r->query, r->target.off, r->target.len) &&
              buf[r->query.off - 1] == '?');
    if (r->absolute)
        check(r->authority.len > 0 && span_in(r->authority, r->target.off, r->target.len));
    else
        check(r->authority.len == 0);
    check(r->nfields <= lim->max_fields && r->nfields <= PX_HTTP_MAX_FIELDS);
    size_t hosts = 0;
    for (size_t i = 0; i < r->nfields; i++) {
        const px_http_field *f = &r->fields[i];
        check(f->name.len > 0 && span_in(f->name, 0, r->head_len));
        check(span_in(f->value, 0, r->head_len));
        for (size_t k = 0; k < f->name.len; k++)
            check(is_tchar((unsigned char)buf[f->name.off + k]));
        check(buf[f->name.off + f->name.len] == ':');
        check(f->value.off > f->name.off + f->name.len);
        const char *v = buf + f->value.off;
        for (size_t k = 0; k < f->value.len; k++)
            check((unsigned char)v[k] >= ' ' ? v[k] != 0x7f : v[k] == '\t');
        if (f->value.len > 0)
            check(v[0] != ' ' && v[0] != '\t' && v[f->value.len - 1] != ' ' &&
                  v[f->value.len - 1] != '\t');
        const char *name = buf + f->name.off;
        if (ieq(name, f->name.len, "host")) {
            hosts++;
            check(r->host == (int)i);
        }
        check(!ieq(name, f->name.len, "transfer-encoding"));
    }
    check(hosts == (r->host >= 0 ? 1u : 0u));
    check(r->version == 10 || r->host >= 0);
    check(r->content_length == -1 || r->content_length == 0);
    /* A prefix of a head is not a head. */
    px_http_req p;
    px_http_init(&p);
    check(px_http_parse(&p, lim, buf, r->head_len - 1) == PX_HTTP_AGAIN);
}

/* The head rebuilt from r (CRLF line ends, one space after each colon) parses to the same. */
static void rebuilt(const px_http_req *r, const px_http_limits *lim, const char *buf)
{
    size_t cap = 64 + r->method.len + r->target.len;
    for (size_t i = 0; i < r->nfields; i++)
        cap += r->fields[i].name.len + r->fields[i].value.len + 4;
    char *out = malloc(cap);
    check(out != NULL);
    size_t n = 0;
    memcpy(out + n, buf + r->method.off, r->method.len);
    n += r->method.len;
    out[n++] = ' ';
    memcpy(out + n, buf + r->target.off, r->target.len);
    n += r->target.len;
    n += (size_t)snprintf(out + n, cap - n, " HTTP/1.%d\r\n", r->version == 10 ? 0 : 1);
    for (size_t i = 0; i < r->nfields; i++) {
        const px_http_field *f = &r->fields[i];
        memcpy(out + n, buf + f->name.off, f->name.len);
        n += f->name.len;
        memcpy(out + n, ": ", 2);
        n += 2;
        memcpy(out + n, buf + f->value.off, f->value.len);
        n += f->value.len;
        memcpy(out + n, "\r\n", 2);
        n += 2;
    }
    memcpy(out + n, "\r\n", 2);
    n += 2;
    check(n <= cap);
    /* The rebuilt head is longer than the original when that had bare LFs: more room. */
    px_http_limits big = *lim;
    big.max_head = n + 1;
    px_http_req q;
    px_http_init(&q);
    check(px_http_parse(&q, &big, out, n) == PX_HTTP_OK);
    check(q.head_len == n && q.version == r->version && q.nfields == r->nfields &&
          q.absolute == r->absolute && q.host == r->host &&
          q.content_length == r->content_length);
    check(q.method.len == r->method.len &&
          memcmp(out + q.method.off, buf + r->method.off, r->method.len) == 0);
    check(q.target.len == r->target.len &&
          memcmp(out + q.target.off, buf + r->target.off, r->target.len) == 0);
    check(q.path.len == r->path.len && q.query.len == r->query.len &&
          q.authority.len == r->authority.len);
    for (size_t i = 0; i < r->nfields; i++) {
        const px_http_field *a = &r->fields[i], *b = &q.fields[i];
        check(a->name.len == b->name.len && a->value.len == b->value.len);
        check(memcmp(buf + a->name.off, out + b->name.off, a->name.len) == 0);
        check(memcmp(buf + a->value.off, out + b->value.off, a->value.len) == 0);
    }
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    data++;
    size--;
    px_http_limits lim = admin_limits;
    if ((mode & 1) != 0 && size >= 3) { /* small limits, from the next three bytes */
        lim.max_line = 1 + data[0] % 64;
        lim.max_head = 1 + data[1] % 200;
        lim.max_fields = data[2] % 9;
        data += 3;
        size -= 3;
    }
    /* Copied to a buffer of the exact size, so ASan catches any read past it. */
    char *buf = malloc(size ? size : 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data, size);

    px_http_req one;
    px_http_init(&one);
    px_http_status s1 = px_http_parse(&one, &lim, buf, size);
    check(s1 == PX_HTTP_OK || s1 == PX_HTTP_AGAIN || s1 == PX_HTTP_BAD);
    if (s1 == PX_HTTP_AGAIN)
        check(size < lim.max_head);
    else if (s1 == PX_HTTP_BAD)
        check_bad(&one);
    else
        check_ok(&one, &lim, buf, size);

    /* Read by read: steps of 1 + (mode >> 1) % 16 bytes, the last one whatever is left. */
    size_t step = 1 + (size_t)((mode >> 1) % 16);
    px_http_req parts;
    px_http_init(&parts);
    px_http_status sp = PX_HTTP_AGAIN;
    for (size_t at = step < size ? step : size;; at = at + step < size ? at + step : size) {
        px_http_status st = px_http_parse(&parts, &lim, buf, at);
        if (sp != PX_HTTP_AGAIN)
            check(st == sp); /* decided: the same outcome again */
        sp = st;
        if (at == size)
            break;
    }
    same(&one, &parts, s1, sp);
    if (s1 == PX_HTTP_OK)
        rebuilt(&one, &lim, buf);
    free(buf);
    return 0;
}

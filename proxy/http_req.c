/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_req.c — the admin port's HTTP/1.x request head parser (http_req.h).
 *
 * A state machine over bytes: each call resumes at r->pos with the state the previous call left,
 * and every byte is examined once by it. The target is checked byte by byte as it arrives (the
 * bytes RFC 3986 allows, %XX) and once more as a whole when its line ends (its form: origin,
 * absolute or asterisk); a field's semantics (Host, Content-Length, Transfer-Encoding,
 * Authorization) are judged when its line ends, reading its name and value once more; those of
 * the head (Host required in 1.1, framing) when the head ends, from what the fields left. So a
 * byte is examined at most twice and a head costs O(its length).
 */
#include "http_req.h"

#include <string.h>

enum {
    S_LEAD,     /* before the request line: empty lines are skipped */
    S_LEAD_CR,  /* a CR before the request line: LF must follow */
    S_METHOD,   /* in the method */
    S_TARGET0,  /* after the method's space: the target's first byte */
    S_TARGET,   /* in the target */
    S_VERSION,  /* after the target's space: the version */
    S_RL_CR,    /* a CR ending the request line: LF must follow */
    S_FIELD0,   /* a field line's first byte, or the empty line ending the head */
    S_NAME,     /* in a field name */
    S_VALUE,    /* after the colon */
    S_FIELD_CR, /* a CR ending a field line: LF must follow */
    S_END_CR,   /* a CR of the empty line ending the head: LF must follow */
};

static bool is_tchar(unsigned char c)
{
    /* RFC 9110 section 5.6.2: token characters. */
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static bool is_hex(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* The bytes RFC 3986 allows in a request target: unreserved, sub-delims, ':', '@', '/', '?',
 * '%' (a pct-encoding, checked by the caller) and '[' ']' (an IP literal in an absolute-form
 * authority; refused elsewhere by target_form). */
static bool is_target_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != 0 && strchr("-._~!$&'()*+,;=:@/?%[]", c) != NULL);
}

/* A field value's bytes (RFC 9110 section 5.5): visible ASCII, obs-text, SP and HTAB. */
static bool is_value_char(unsigned char c)
{
    return c == '\t' || c == ' ' || (c > ' ' && c != 0x7f);
}

static unsigned char lower(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

/* Whether a[0, n) is the NUL-terminated b, ASCII case ignored. */
static bool ieq(const char *a, size_t n, const char *b)
{
    if (strlen(b) != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (lower((unsigned char)a[i]) != lower((unsigned char)b[i]))
            return false;
    return true;
}

static px_http_status bad(px_http_req *r, int status, const char *why)
{
    r->status = status;
    r->why = why;
    r->done = PX_HTTP_BAD;
    return PX_HTTP_BAD;
}

/* Whether v[0, n) is host[:port] (RFC 3986: an IP literal in brackets, or a non-empty
 * reg-name or IPv4 address, then an optional ':' and digits). */
static bool host_valid(const char *v, size_t n)
{
    size_t i = 0;
    if (n > 0 && v[0] == '[') {
        for (i = 1; i < n && v[i] != ']'; i++)
            if (!is_hex((unsigned char)v[i]) && v[i] != ':' && v[i] != '.')
                return false;
        if (i == n || i < 3)
            return false;
        i++;
    } else {
        for (; i < n && v[i] != ':'; i++) {
            unsigned char c = (unsigned char)v[i];
            if (c == '%') {
                if (i + 2 >= n || !is_hex((unsigned char)v[i + 1]) ||
                    !is_hex((unsigned char)v[i + 2]))
                    return false;
                i += 2;
            } else if (!is_target_char(c) || c == '/' || c == '?' || c == '@' || c == '[' ||
                       c == ']') {
                return false;
            }
        }
        if (i == 0)
            return false;
    }
    if (i == n)
        return true;
    if (v[i] != ':')
        return false;
    for (i++; i < n; i++)
        if (!is_digit((unsigned char)v[i]))
            return false;
    return true;
}

/* The target's form, once its line is in: origin-form (/path?query), absolute-form
 * (http://authority/path?query) or asterisk-form ("*", OPTIONS only). Sets path, query and
 * authority; 0, or -1 when the target is none of them. */
static int target_form(px_http_req *r, const char *buf)
{
    const char *t = buf + r->target.off;
    size_t n = r->target.len, i = 0;
    if (n == 1 && t[0] == '*') {
        if (r->method.len != 7 || memcmp(buf + r->method.off, "OPTIONS", 7) != 0)
            return -1; /* methods are case-sensitive (RFC 9110 section 9.1) */
        r->path = r->target;
        return 0;
    }
    if (t[0] != '/') {
        /* absolute-form: only the http scheme (RFC 9110 section 4.2.1), without userinfo
         * (section 4.2.4: a recipient treats it as an error). */
        if (n < 7 || !ieq(t, 7, "http://"))
            return -1;
        i = 7;
        size_t a = i;
        while (i < n && t[i] != '/' && t[i] != '?')
            i++;
        if (memchr(t + a, '@', i - a) != NULL || !host_valid(t + a, i - a))
            return -1;
        r->absolute = true;
        r->authority = (px_http_span){r->target.off + (uint32_t)a, (uint32_t)(i - a)};
    }
    size_t p = i;
    while (i < n && t[i] != '?')
        i++;
    r->path = (px_http_span){r->target.off + (uint32_t)p, (uint32_t)(i - p)};
    if (i < n)
        r->query = (px_http_span){r->target.off + (uint32_t)i + 1, (uint32_t)(n - i - 1)};
    for (size_t k = p; k < n; k++)
        if (t[k] == '[' || t[k] == ']')
            return -1;
    return 0;
}

/* The request line is in: its version is [mark, end). */
static px_http_status request_line_done(px_http_req *r, const char *buf, uint32_t end)
{
    const char *v = buf + r->mark;
    size_t n = end - r->mark;
    if (n != 8 || memcmp(v, "HTTP/", 5) != 0 || !is_digit((unsigned char)v[5]) || v[6] != '.' ||
        !is_digit((unsigned char)v[7]))
        return bad(r, 400, "the request line does not end with a version HTTP/d.d");
    if (v[5] != '1')
        return bad(r, 505, "only HTTP/1.x is served");
    r->version = v[7] == '0' ? 10 : 11;
    if (r->pct != 0)
        return bad(r, 400, "a '%' in the target not followed by two hex digits");
    if (target_form(r, buf) != 0)
        return bad(r, 400, "the target is not /path, http://host/path or * (OPTIONS)");
    r->state = S_FIELD0;
    return PX_HTTP_AGAIN;
}

/* A field line is in: its name is [line, mark), its value [vstart, vend) (vend <= vstart: an
 * empty value). */
static px_http_status field_done(px_http_req *r, const px_http_limits *lim, const char *buf)
{
    if (r->nfields >= lim->max_fields || r->nfields >= PX_HTTP_MAX_FIELDS)
        return bad(r, 431, "too many header fields");
    uint32_t vend = r->vend > r->vstart ? r->vend : r->vstart;
    px_http_field f = {{r->line, r->mark - r->line}, {r->vstart, vend - r->vstart}};
    const char *name = buf + f.name.off, *v = buf + f.value.off;
    size_t nl = f.name.len, vl = f.value.len;
    if (ieq(name, nl, "host")) {
        if (r->host >= 0)
            return bad(r, 400, "more than one Host header");
        if (!host_valid(v, vl))
            return bad(r, 400, "the Host header is not host[:port]");
        r->host = (int)r->nfields;
    } else if (ieq(name, nl, "content-length")) {
        if (r->seen_cl)
            return bad(r, 400, "more than one Content-Length header");
        r->seen_cl = true;
        if (vl == 0 || vl > 18)
            return bad(r, 400, "Content-Length is not a decimal number");
        int64_t cl = 0;
        for (size_t i = 0; i < vl; i++) {
            if (!is_digit((unsigned char)v[i]))
                return bad(r, 400, "Content-Length is not a decimal number");
            cl = cl * 10 + (v[i] - '0');
        }
        r->content_length = cl;
    } else if (ieq(name, nl, "transfer-encoding")) {
        r->seen_te = true;
    } else if (ieq(name, nl, "authorization")) {
        if (r->seen_auth)
            return bad(r, 400, "more than one Authorization header");
        r->seen_auth = true;
    }
    r->fields[r->nfields++] = f;
    r->state = S_FIELD0;
    return PX_HTTP_AGAIN;
}

/* The empty line ending the head is in: the head's own rules. */
static px_http_status head_done(px_http_req *r)
{
    r->head_len = r->pos + 1;
    if (r->version == 11 && r->host < 0)
        return bad(r, 400, "an HTTP/1.1 request without a Host header");
    if (r->seen_te) {
        if (r->content_length >= 0)
            return bad(r, 400, "Transfer-Encoding beside Content-Length");
        if (r->version == 10)
            return bad(r, 400, "Transfer-Encoding in an HTTP/1.0 request");
        return bad(r, 501, "Transfer-Encoding: no transfer coding is implemented");
    }
    if (r->content_length > 0)
        return bad(r, 413, "a request body: no admin endpoint takes one");
    r->done = PX_HTTP_OK;
    return PX_HTTP_OK;
}

void px_http_init(px_http_req *r)
{
    memset(r, 0, sizeof(*r));
    r->host = -1;
    r->content_length = -1;
    r->done = PX_HTTP_AGAIN;
}

px_http_status px_http_parse(px_http_req *r, const px_http_limits *lim, const char *buf,
                             size_t len)
{
    if (r->done != PX_HTTP_AGAIN)
        return r->done;
    size_t max_head = lim->max_head < UINT32_MAX - 1 ? lim->max_head : UINT32_MAX - 1;
    for (; r->pos < len; r->pos++) {
        unsigned char c = (unsigned char)buf[r->pos];
        bool in_line = r->state >= S_METHOD && r->state <= S_RL_CR;
        bool line_end = c == '\r' || c == '\n';
        if (in_line && !line_end && r->pos - r->line + 1 > lim->max_line)
            return bad(r, 414, "the request line is too long");
        if (r->pos + 1 > max_head)
            return in_line ? bad(r, 414, "the request line is too long")
                           : bad(r, 431, "the request head is too large");
        switch (r->state) {
        case S_LEAD:
            if (c == '\r') {
                r->state = S_LEAD_CR;
            } else if (is_tchar(c)) {
                r->line = r->mark = r->pos;
                r->state = S_METHOD;
            } else if (c != '\n') {
                return bad(r, 400, "the request line does not start with a method");
            }
            break;
        case S_LEAD_CR:
            if (c != '\n')
                return bad(r, 400, "a CR not followed by LF");
            r->state = S_LEAD;
            break;
        case S_METHOD:
            if (c == ' ') {
                r->method = (px_http_span){r->mark, r->pos - r->mark};
                r->state = S_TARGET0;
            } else if (!is_tchar(c)) {
                return bad(r, 400, "the method is not a token followed by one space");
            } else if (r->pos - r->mark + 1 > PX_HTTP_MAX_METHOD) {
                return bad(r, 501, "no method is that long");
            }
            break;
        case S_TARGET0:
        case S_TARGET:
            if (c == ' ' && r->state == S_TARGET0)
                return bad(r, 400, "more than one space after the method");
            if (c == ' ') {
                r->target = (px_http_span){r->mark, r->pos - r->mark};
                r->mark = r->pos + 1;
                r->state = S_VERSION;
                break;
            }
            if (line_end)
                return bad(r, 400, "the request line has no version");
            if (!is_target_char(c))
                return bad(r, 400, "the target holds a byte RFC 3986 does not allow");
            if (r->state == S_TARGET0)
                r->mark = r->pos;
            r->state = S_TARGET;
            if (r->pct > 0) {
                if (!is_hex(c))
                    return bad(r, 400, "a '%' in the target not followed by two hex digits");
                r->pct--;
            } else if (c == '%') {
                r->pct = 2;
            }
            break;
        case S_VERSION:
            if (c == '\r') {
                r->vend = r->pos;
                r->state = S_RL_CR;
            } else if (c == '\n') {
                if (request_line_done(r, buf, r->pos) != PX_HTTP_AGAIN)
                    return r->done;
            } else if (r->pos - r->mark >= 8) {
                return bad(r, 400, "the request line does not end with a version HTTP/d.d");
            }
            break;
        case S_RL_CR:
            if (c != '\n')
                return bad(r, 400, "a CR not followed by LF");
            if (request_line_done(r, buf, r->vend) != PX_HTTP_AGAIN)
                return r->done;
            break;
        case S_FIELD0:
            r->line = r->pos;
            if (c == '\r') {
                r->state = S_END_CR;
            } else if (c == '\n') {
                return head_done(r);
            } else if (c == ' ' || c == '\t') {
                return bad(r, 400, r->nfields == 0
                                       ? "whitespace before the first header field"
                                       : "obsolete line folding (a field line starting with "
                                         "whitespace)");
            } else if (is_tchar(c)) {
                r->state = S_NAME;
            } else {
                return bad(r, 400, "a header field name that is not a token");
            }
            break;
        case S_NAME:
            if (c == ':') {
                r->mark = r->pos;
                r->vstart = r->vend = r->pos + 1;
                r->state = S_VALUE;
            } else if (c == ' ' || c == '\t') {
                return bad(r, 400, "whitespace between a header field name and its colon");
            } else if (c == '\r' || c == '\n') {
                return bad(r, 400, "a header field line without a colon");
            } else if (!is_tchar(c)) {
                return bad(r, 400, "a header field name that is not a token");
            }
            break;
        case S_VALUE:
            if (c == '\r' || c == '\n') {
                if (c == '\r') {
                    r->state = S_FIELD_CR;
                    break;
                }
                if (field_done(r, lim, buf) != PX_HTTP_AGAIN)
                    return r->done;
            } else if (!is_value_char(c)) {
                return bad(r, 400, "a control byte in a header field");
            } else if (c == ' ' || c == '\t') {
                if (r->vstart == r->pos)
                    r->vstart = r->vend = r->pos + 1; /* leading whitespace */
            } else {
                r->vend = r->pos + 1;
            }
            break;
        case S_FIELD_CR:
            if (c != '\n')
                return bad(r, 400, "a CR not followed by LF");
            if (field_done(r, lim, buf) != PX_HTTP_AGAIN)
                return r->done;
            break;
        case S_END_CR:
            if (c != '\n')
                return bad(r, 400, "a CR not followed by LF");
            return head_done(r);
        }
    }
    /* The head is not whole and the next byte would be over the limit: refused now, so that
     * AGAIN always leaves room for another byte. */
    if (len >= max_head)
        return r->state >= S_METHOD && r->state <= S_RL_CR
                   ? bad(r, 414, "the request line is too long")
                   : bad(r, 431, "the request head is too large");
    return PX_HTTP_AGAIN;
}

const char *px_http_field_value(const px_http_req *r, const char *buf, const char *name,
                                size_t *vlen)
{
    for (size_t i = 0; i < r->nfields; i++)
        if (ieq(buf + r->fields[i].name.off, r->fields[i].name.len, name)) {
            *vlen = r->fields[i].value.len;
            return buf + r->fields[i].value.off;
        }
    return NULL;
}

const char *px_http_reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
    }
}

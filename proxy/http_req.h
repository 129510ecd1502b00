/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_req.h — the admin port's HTTP/1.x request head parser (RFC 9112, RFC 9110), pure:
 * bytes in, a parsed request head or an error status out. No I/O, no allocation, no clock, no
 * globals; fuzzed by fuzz/admin_fuzz.c.
 *
 * It is fed the bytes received so far, again each time more arrive, and resumes where it
 * stopped: over all the calls each byte is examined at most twice (http_req.c), so a head costs
 * O(its length) however the network splits it, and a slow client sending a byte at a time
 * costs no more.
 *
 * What it refuses (docs/PROXY.md, "The admin port's HTTP"), with the status RFC 9110/9112 gives:
 *   400  a request line that is not METHOD SP TARGET SP HTTP/d.d (one space each, no HTTP/0.9),
 *        a target that is not origin-form, absolute-form (http://) or "*" for OPTIONS, or holds a
 *        byte RFC 3986 does not allow (a fragment, a space, a bad %XX); whitespace before the
 *        first field or before a colon; obsolete line folding; a field name that is not a
 *        token; a control byte (a bare CR, a NUL) in a value; an HTTP/1.1 request without Host;
 *        two Host, Content-Length or Authorization fields; a Host that is not host[:port]; a
 *        Content-Length that is not digits (a list, a sign); Transfer-Encoding in HTTP/1.0 or
 *        beside Content-Length;
 *   413  a body (Content-Length above 0): no admin endpoint takes one;
 *   414  a request line longer than lim->max_line;
 *   431  a head longer than lim->max_head, or more than lim->max_fields field lines;
 *   501  Transfer-Encoding (no transfer coding is implemented), a method longer than
 *        PX_HTTP_MAX_METHOD;
 *   505  an HTTP version other than 1.x.
 * Line ends are CRLF; a bare LF is taken as one (RFC 9112 section 2.2 allows it), a bare CR is
 * not. Empty lines before the request line are skipped (section 2.2: SHOULD).
 */
#ifndef CHASH_PROXY_HTTP_REQ_H
#define CHASH_PROXY_HTTP_REQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PX_HTTP_MAX_FIELDS 64u /* the most field lines a px_http_req holds */
#define PX_HTTP_MAX_METHOD 32u /* bytes of a method: longer is 501 */

typedef struct px_http_limits {
    size_t max_line;   /* bytes of the request line, its line end excluded (414 beyond) */
    size_t max_head;   /* bytes of the head: leading empty lines, request line, fields and the
                          empty line that ends them (431 beyond) */
    size_t max_fields; /* field lines (431 beyond); at most PX_HTTP_MAX_FIELDS */
} px_http_limits;

typedef struct px_http_span {
    uint32_t off, len; /* bytes [off, off + len) of the buffer parsed */
} px_http_span;

typedef struct px_http_field {
    px_http_span name;  /* a token */
    px_http_span value; /* without the whitespace around it; may be empty */
} px_http_field;

typedef enum px_http_status {
    PX_HTTP_OK = 0,    /* a whole head: the fields below are set */
    PX_HTTP_AGAIN = 1, /* more bytes needed: call again with the same bytes and more */
    PX_HTTP_BAD = -1,  /* refused: status and why say how */
} px_http_status;

/* One request head. Zero it (px_http_init) before the first call; after OK or BAD every later
 * call returns the same. */
typedef struct px_http_req {
    /* The result (OK). */
    px_http_span method;
    px_http_span target;    /* as sent */
    px_http_span authority; /* absolute-form: host[:port] of the target; else len 0 */
    px_http_span path;      /* the target's path (len 0: "/", an absolute-form without one) */
    px_http_span query;     /* after '?' (len 0: none or empty) */
    bool absolute;          /* the target was absolute-form (http://authority/path) */
    unsigned version;       /* 10 (HTTP/1.0) or 11 (HTTP/1.1 and any later 1.x) */
    px_http_field fields[PX_HTTP_MAX_FIELDS];
    size_t nfields;
    int host;               /* index of the Host field in fields, -1 when none */
    int64_t content_length; /* -1 when none; else 0 (a body is refused) */
    size_t head_len;        /* bytes of the head, its final empty line included */
    /* The refusal (BAD): an HTTP status and a one-line reason, a static string. */
    int status;
    const char *why;
    /* The parser's state between calls. */
    uint32_t pos;        /* the next byte to examine */
    uint32_t mark;       /* where the token being read began */
    uint32_t line;       /* where the line being read began */
    uint32_t vstart;     /* a value being read: its first byte that is not whitespace */
    uint32_t vend;       /* ...the end of its last byte that is not whitespace; the request
                            line: the end of its version */
    uint8_t state;
    uint8_t pct;         /* hex digits still due after a '%' in the target */
    bool seen_cl, seen_te, seen_auth;
    px_http_status done; /* OK or BAD once decided; AGAIN before */
} px_http_req;

void px_http_init(px_http_req *r);

/* Parses the head at the start of buf[0, len): the bytes given to the previous call on r (none
 * at first) followed by more (len never shrinks and bytes already given never change). OK once
 * the empty line ending the fields is in (bytes after it, a body or a second request, are not
 * read); AGAIN when the head is incomplete and within the limits (then len < lim->max_head);
 * BAD otherwise. O(the bytes
 * added since the previous call). */
px_http_status px_http_parse(px_http_req *r, const px_http_limits *lim, const char *buf,
                             size_t len);

/* The value of the first field named name (ASCII, any case) in a parsed head, *vlen its
 * length; NULL when none. O(fields). */
const char *px_http_field_value(const px_http_req *r, const char *buf, const char *name,
                                size_t *vlen);

/* The reason phrase of a status this parser or the admin port answers ("Bad Request"). */
const char *px_http_reason(int status);

#endif /* CHASH_PROXY_HTTP_REQ_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * resp.h — RESP (Redis serialization protocol) parsing for chash-proxy: requests from clients
 * (arrays of bulk strings, and inline commands) and replies from backends.
 *
 * Pure: fed bytes, hands back where a complete message is; no I/O, no allocation, no globals,
 * never aborts or prints, so it can be fuzzed (fuzz/resp_fuzz.c). Parsing is stateless: each call
 * looks at buf[0..len) from the start of a message. When the message is incomplete it says so,
 * with how many bytes it needs at least, so a caller receiving a large bulk in small pieces can
 * wait for them instead of re-parsing on every read (which would cost O(n^2)).
 * Thread-safety: no state; safe from any thread.
 */
#ifndef CHASH_RESP_H
#define CHASH_RESP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ch_resp_status {
    CH_RESP_OK = 0,        /* a complete message */
    CH_RESP_INCOMPLETE = 1, /* more bytes are needed: *need says at least how many in all */
    CH_RESP_BAD = -1,      /* a protocol error: the connection cannot be resynchronized */
    CH_RESP_TOO_BIG = -2,  /* over a limit: argument count, bulk length, request size, depth */
} ch_resp_status;

typedef struct ch_resp_limits {
    size_t max_args;    /* arguments per request; default 1024 * 1024 */
    size_t max_bulk;    /* bytes per bulk string; default 512 MiB (Redis's proto-max-bulk-len) */
    size_t max_request; /* bytes per request, all of it; default 64 MiB */
    size_t max_inline;  /* bytes of an inline command line; default 64 KiB (Redis's) */
    unsigned max_depth; /* nesting of reply aggregates (arrays, maps, sets, attributes); default 64 */
} ch_resp_limits;

void ch_resp_limits_init(ch_resp_limits *lim);

/* One argument: a slice of the caller's buffer (not NUL-terminated). */
typedef struct ch_resp_arg {
    const char *p;
    size_t len;
} ch_resp_arg;

/* Parses one request at the start of buf[0..len): a RESP array of bulk strings ("*2\r\n$3\r\nGET
 * \r\n$1\r\nk\r\n") or an inline command (a line of words separated by spaces, ended by "\n" or
 * "\r\n"; an empty line is skipped: it consumes bytes and yields argc 0).
 * On CH_RESP_OK: *consumed is the request's length; *argc the number of arguments; argv[0..
 * min(argc, argv_cap)-1] point into buf (argc may exceed argv_cap: the caller then retries with
 * a larger array, or refuses the request). On CH_RESP_INCOMPLETE: *need is the least total
 * length buf must reach before a retry can succeed (> len). On CH_RESP_BAD / CH_RESP_TOO_BIG:
 * err (may be NULL) receives a one-line reason in Redis's style, without "-ERR " or CRLF, e.g.
 * "Protocol error: invalid bulk length". Inline words are split on spaces and tabs; quotes are
 * not interpreted (redis-server does; clients that need them send arrays).
 * Cost: O(request length). */
ch_resp_status ch_resp_parse_request(const char *buf, size_t len, const ch_resp_limits *lim,
                                     ch_resp_arg *argv, size_t argv_cap, size_t *argc,
                                     size_t *consumed, size_t *need, char *err, size_t errlen);

/* The type of a reply, its first byte: RESP2's five, and RESP3's (a connection that sent HELLO 3
 * receives them; https://github.com/redis/redis-specifications, protocol/RESP3.md). */
typedef enum ch_resp_type {
    CH_RESP_STATUS = '+',
    CH_RESP_ERROR = '-',
    CH_RESP_INTEGER = ':',
    CH_RESP_BULK = '$',
    CH_RESP_ARRAY = '*',
    CH_RESP_NULL = '_',       /* RESP3: "_\r\n" */
    CH_RESP_BOOL = '#',       /* "#t\r\n" or "#f\r\n" */
    CH_RESP_DOUBLE = ',',     /* ",1.5\r\n", ",inf\r\n", ",-inf\r\n", ",nan\r\n", ",1e+300\r\n" */
    CH_RESP_BIGNUM = '(',     /* "(-12345678901234567890\r\n" */
    CH_RESP_BLOB_ERROR = '!', /* "!<len>\r\n<bytes>\r\n" */
    CH_RESP_VERBATIM = '=',   /* "=<len>\r\ntxt:<bytes>\r\n": a 3-byte format, ':', the text */
    CH_RESP_MAP = '%',        /* "%<n>\r\n" then n keys and values, one after the other */
    CH_RESP_SET = '~',        /* "~<n>\r\n" then n elements */
    CH_RESP_ATTRIBUTE = '|',  /* "|<n>\r\n" n keys and values that annotate the element after them */
    CH_RESP_PUSH = '>',       /* ">" like an array: out-of-band data (pub/sub, invalidations) */
} ch_resp_type;

typedef struct ch_resp_reply {
    ch_resp_type type; /* the element's own type: never CH_RESP_ATTRIBUTE (see attr) */
    size_t len;      /* the whole reply's length, nested elements and attributes included */
    int64_t integer; /* INTEGER: the value; BOOL: 1 or 0; BULK, BLOB_ERROR, VERBATIM: the byte
                        count; ARRAY, SET, PUSH: the element count; MAP: the count of pairs (its
                        elements are twice as many); -1 for a null (NULL, "$-1", "*-1") */
    size_t body;     /* offset of the payload: BULK, BLOB_ERROR, VERBATIM its bytes (VERBATIM's
                        with the format and ':'), an aggregate its first element, STATUS, ERROR,
                        INTEGER, DOUBLE, BIGNUM the text after the type byte; NULL, BOOL: the
                        byte after the type byte */
    size_t body_len; /* BULK, BLOB_ERROR, VERBATIM: bytes; a line's text length; an aggregate:
                        len - body */
    size_t attr;     /* offset of the element's type byte: the bytes before it, [0, attr), are
                        attributes ("|" aggregates) that annotate it (0: none) */
} ch_resp_reply;

/* Scans one complete reply at the start of buf[0..len): RESP2 (+ - : $ *) and RESP3 (_ # , ( !
 * = % ~ | >), aggregates nested up to lim->max_depth (an attribute counts as a level while its
 * own elements are read). An attribute is part of the element it annotates: one reply is the
 * attributes, then the element. A push (">") is valid only at the top, never inside another
 * aggregate. RESP3's streamed forms ("$?", "*?", ";", ".") are refused: Redis never sends them.
 * CH_RESP_OK fills *out; CH_RESP_INCOMPLETE sets *need as above; CH_RESP_BAD / CH_RESP_TOO_BIG as
 * above. To walk an aggregate, scan its elements one after the other from buf + out->body (a
 * map's keys and values alternate). Cost: O(reply length). */
ch_resp_status ch_resp_scan_reply(const char *buf, size_t len, const ch_resp_limits *lim,
                                  ch_resp_reply *out, size_t *need, char *err, size_t errlen);

/* ---- copying a key with the lifetime it has left ---------------------------------------------
 * The proxy's warm-up fills (resp_codec.c) and `chash migrate` (tools/chash/mig_redis.c) copy a
 * key as its PTTL and DUMP, restored at the other server with RESTORE key ttl payload. */

/* RESTORE's ttl for a copy of a key whose PTTL was pttl, elapsed_ms ago: true and *ttl, 0 (no
 * expiry) for PTTL -1, else the milliseconds left, pttl - elapsed_ms (an elapsed_ms below 0, a
 * clock stepped back, counts as 0: a copy never outlives its original); false when nothing is
 * to be copied: the key was absent (-2, or any other negative PTTL) or has expired by now
 * (nothing left). Cost: O(1). */
bool ch_resp_restore_ttl(int64_t pttl, int64_t elapsed_ms, int64_t *ttl);

#ifdef __cplusplus
}
#endif

#endif /* CHASH_RESP_H */

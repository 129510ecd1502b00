/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mc_bin.c — memcached's binary protocol translated to and from the meta protocol (mc_bin.h).
 * One table names every opcode: what it becomes, how its frame must look, how its reply maps.
 */
#include "mc_bin.h"
#include "mc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What an opcode is. */
typedef enum op_kind {
    K_NONE = 0, /* not an opcode the proxy serves: Unknown command, connection kept */
    K_GET,      /* get getk: value and flags */
    K_GAT,      /* gat gatk: the same, and a new lifetime */
    K_TOUCH,    /* touch: flags only */
    K_STORE,    /* set add replace append prepend */
    K_DELETE,
    K_ARITH,    /* incr decr */
    K_NOOP,
    K_VERSION,
    K_QUIT,
    K_FLUSH,
    K_STAT,
    K_SASL,
} op_kind;

/* Frame shapes memcached checks (dispatch_bin_command); another is "Invalid arguments" and a
 * close. */
typedef enum op_shape {
    S_EMPTY,   /* no extras, key or value */
    S_KEY,     /* a key alone */
    S_STORE8,  /* 8 bytes of extras (flags, expiry), a key, a value */
    S_KEYVAL,  /* a key and a value, no extras (append prepend) */
    S_ARITH20, /* 20 bytes of extras (delta, initial, expiry), a key, nothing else */
    S_EXP4,    /* 4 bytes of extras (expiry), a key */
    S_FLUSH,   /* no key, extras 0 or 4, nothing else */
    S_NOEXT,   /* no extras (stat: an optional key) */
    S_SASLKEY, /* no extras, a key (the mechanism), a value */
} op_shape;

typedef struct op_spec {
    uint8_t kind;  /* op_kind */
    uint8_t shape; /* op_shape */
    bool quiet;    /* its success (or miss) sends nothing */
    bool with_key; /* the response carries the key (getk gatk) */
    char mode;     /* ms M / ma M mode */
} op_spec;

#define OP(code, k, s, q, wk, m) [code] = {.kind = (k), .shape = (s), .quiet = (q), .with_key = (wk), .mode = (m)}
static const op_spec ops[256] = {
    OP(0x00, K_GET, S_KEY, false, false, 0),      /* get */
    OP(0x09, K_GET, S_KEY, true, false, 0),       /* getq */
    OP(0x0c, K_GET, S_KEY, false, true, 0),       /* getk */
    OP(0x0d, K_GET, S_KEY, true, true, 0),        /* getkq */
    OP(0x01, K_STORE, S_STORE8, false, false, 'S'), /* set */
    OP(0x11, K_STORE, S_STORE8, true, false, 'S'),  /* setq */
    OP(0x02, K_STORE, S_STORE8, false, false, 'E'), /* add */
    OP(0x12, K_STORE, S_STORE8, true, false, 'E'),  /* addq */
    OP(0x03, K_STORE, S_STORE8, false, false, 'R'), /* replace */
    OP(0x13, K_STORE, S_STORE8, true, false, 'R'),  /* replaceq */
    OP(0x0e, K_STORE, S_KEYVAL, false, false, 'A'), /* append */
    OP(0x19, K_STORE, S_KEYVAL, true, false, 'A'),  /* appendq */
    OP(0x0f, K_STORE, S_KEYVAL, false, false, 'P'), /* prepend */
    OP(0x1a, K_STORE, S_KEYVAL, true, false, 'P'),  /* prependq */
    OP(0x04, K_DELETE, S_KEY, false, false, 0),   /* delete */
    OP(0x14, K_DELETE, S_KEY, true, false, 0),    /* deleteq */
    OP(0x05, K_ARITH, S_ARITH20, false, false, 'I'), /* increment */
    OP(0x15, K_ARITH, S_ARITH20, true, false, 'I'),  /* incrementq */
    OP(0x06, K_ARITH, S_ARITH20, false, false, 'D'), /* decrement */
    OP(0x16, K_ARITH, S_ARITH20, true, false, 'D'),  /* decrementq */
    OP(0x07, K_QUIT, S_EMPTY, false, false, 0),   /* quit */
    OP(0x17, K_QUIT, S_EMPTY, true, false, 0),    /* quitq */
    OP(0x08, K_FLUSH, S_FLUSH, false, false, 0),  /* flush */
    OP(0x18, K_FLUSH, S_FLUSH, true, false, 0),   /* flushq */
    OP(0x0a, K_NOOP, S_EMPTY, false, false, 0),   /* noop */
    OP(0x0b, K_VERSION, S_EMPTY, false, false, 0), /* version */
    OP(0x10, K_STAT, S_NOEXT, false, false, 0),   /* stat */
    OP(0x1c, K_TOUCH, S_EXP4, false, false, 0),   /* touch */
    OP(0x1d, K_GAT, S_EXP4, false, false, 0),     /* gat */
    OP(0x1e, K_GAT, S_EXP4, true, false, 0),      /* gatq */
    OP(0x23, K_GAT, S_EXP4, false, true, 0),      /* gatk */
    OP(0x24, K_GAT, S_EXP4, true, true, 0),       /* gatkq */
    OP(0x20, K_SASL, S_EMPTY, false, false, 0),   /* sasl list mechs */
    OP(0x21, K_SASL, S_SASLKEY, false, false, 0), /* sasl auth */
    OP(0x22, K_SASL, S_SASLKEY, false, false, 0), /* sasl step */
};
#undef OP

static uint16_t rd16(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return (uint16_t)((unsigned)u[0] << 8 | u[1]);
}

static uint32_t rd32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 | (uint32_t)u[2] << 8 | u[3];
}

static uint64_t rd64(const char *p)
{
    return (uint64_t)rd32(p) << 32 | rd32(p + 4);
}

static void wr16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)(v >> 8);
    p[1] = (unsigned char)v;
}

static void wr32(unsigned char *p, uint32_t v)
{
    wr16(p, (uint16_t)(v >> 16));
    wr16(p + 2, (uint16_t)v);
}

static void wr64(unsigned char *p, uint64_t v)
{
    wr32(p, (uint32_t)(v >> 32));
    wr32(p + 4, (uint32_t)v);
}

int px_mcb_response(px_buf *out, uint8_t opcode, const uint8_t opaque[4], uint16_t status,
                    uint64_t cas, const void *e, size_t elen, const void *k, size_t klen,
                    const void *v, size_t vlen)
{
    size_t body = elen + klen + vlen;
    if (elen > 255 || klen > 65535 || body > UINT32_MAX ||
        px_buf_reserve(out, PX_MCB_HEADER + body) != 0)
        return -1;
    unsigned char *h = (unsigned char *)out->p + out->len;
    h[0] = PX_MCB_MAGIC_RES;
    h[1] = opcode;
    wr16(h + 2, (uint16_t)klen);
    h[4] = (unsigned char)elen;
    h[5] = 0; /* raw bytes */
    wr16(h + 6, status);
    wr32(h + 8, (uint32_t)body);
    memcpy(h + 12, opaque, 4);
    wr64(h + 16, cas);
    out->len += PX_MCB_HEADER;
    if (elen > 0)
        memcpy(out->p + out->len, e, elen);
    out->len += elen;
    if (klen > 0)
        memcpy(out->p + out->len, k, klen);
    out->len += klen;
    if (vlen > 0)
        memcpy(out->p + out->len, v, vlen);
    out->len += vlen;
    return 0;
}

/* memcached's words for a status it answers without text of its own (write_bin_error). */
static const char *status_text(uint16_t status)
{
    switch (status) {
    case PX_MCB_ENOENT: return "Not found";
    case PX_MCB_EEXISTS: return "Data exists for key.";
    case PX_MCB_E2BIG: return "Too large.";
    case PX_MCB_EINVAL: return "Invalid arguments";
    case PX_MCB_NOT_STORED: return "Not stored.";
    case PX_MCB_DELTA_BADVAL: return "Non-numeric server-side value for incr or decr";
    case PX_MCB_AUTH_ERROR: return "Auth failure.";
    case PX_MCB_UNKNOWN_COMMAND: return "Unknown command";
    case PX_MCB_ENOMEM: return "Out of memory";
    default: return "";
    }
}

static int error_response(px_buf *out, uint8_t opcode, const uint8_t opaque[4], uint16_t status,
                          const char *text, size_t tlen)
{
    if (text == NULL) {
        text = status_text(status);
        tlen = strlen(text);
    }
    return px_mcb_response(out, opcode, opaque, status, 0, NULL, 0, NULL, 0, text, tlen);
}

/* Whether the frame's lengths have the shape its opcode needs. */
static bool shape_ok(op_shape s, const px_mcb_frame *f)
{
    switch (s) {
    case S_EMPTY: return f->extlen == 0 && f->keylen == 0 && f->bodylen == 0;
    case S_KEY: return f->extlen == 0 && f->keylen > 0 && f->bodylen == f->keylen;
    case S_STORE8: return f->extlen == 8 && f->keylen > 0;
    case S_KEYVAL: return f->extlen == 0 && f->keylen > 0;
    case S_ARITH20: return f->extlen == 20 && f->keylen > 0 && f->bodylen == f->keylen + 20u;
    case S_EXP4: return f->extlen == 4 && f->keylen > 0;
    case S_FLUSH: return f->keylen == 0 && f->bodylen == f->extlen && (f->extlen == 0 || f->extlen == 4);
    case S_NOEXT: return f->extlen == 0;
    case S_SASLKEY: return f->extlen == 0 && f->keylen > 0;
    }
    return false;
}

/* A binary expiry (uint32; memcached reads one over 30 days as a Unix time) as a meta T or N
 * token, which memcached reads into 32 signed bits: one past 2038 (a time in 2106 at most) is
 * the latest it takes, 2038-01-19, the same "not for decades" to an item. */
static uint32_t expiry(const char *p)
{
    uint32_t e = rd32(p);
    return e > (uint32_t)CH_MC_EXPTIME_MAX ? (uint32_t)CH_MC_EXPTIME_MAX : e;
}

/* " <flag><v>": a meta token with a number after its flag's letter (0: none), without printf,
 * whose parsing of its format costs more than the rest of a set's translation. */
static int put_num(px_buf *t, char flag, uint64_t v)
{
    char d[24];
    size_t n = sizeof(d);
    do {
        d[--n] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    if (flag != 0)
        d[--n] = flag;
    d[--n] = ' ';
    return px_buf_append(t, d + n, sizeof(d) - n);
}

/* " <key>" as a meta token: as it is, or base64 (then *b64). */
static int put_key(px_buf *t, const char *key, size_t klen, bool *b64)
{
    if (px_buf_append(t, " ", 1) != 0)
        return -1;
    *b64 = !ch_mc_key_plain(key, klen);
    if (!*b64)
        return px_buf_append(t, key, klen);
    size_t n = ch_mc_b64_encode(key, klen, NULL, 0);
    if (px_buf_reserve(t, n + 1) != 0)
        return -1;
    ch_mc_b64_encode(key, klen, t->p + t->len, n + 1);
    t->len += n;
    return 0;
}

/* The meta request for f into t. 0, or -1 when out of memory. */
static int translate(const op_spec *s, const px_mcb_frame *f, const char *ext, px_buf *t)
{
    bool b64 = false;
    int rc = 0;
    switch ((op_kind)s->kind) {
    case K_GET:
    case K_GAT:
    case K_TOUCH:
        rc = px_buf_append(t, "mg", 2) | put_key(t, f->key, f->keylen, &b64);
        rc |= px_buf_append(t, s->kind == K_TOUCH ? " f c" : " v f c", s->kind == K_TOUCH ? 4 : 6);
        if (s->kind != K_GET)
            rc |= put_num(t, 'T', expiry(ext));
        break;
    case K_STORE: {
        rc = px_buf_append(t, "ms", 2) | put_key(t, f->key, f->keylen, &b64);
        /* memcached: a set, add or replace with a CAS is a compare-and-swap, whatever its
         * opcode (process_bin_update's NREAD_CAS) */
        char mode[] = {' ', 'c', ' ', 'M', f->cas != 0 && s->shape == S_STORE8 ? 'S' : s->mode};
        rc |= put_num(t, 0, f->vlen) | px_buf_append(t, mode, sizeof(mode));
        if (f->extlen == 8)
            rc |= put_num(t, 'F', rd32(ext)) | put_num(t, 'T', expiry(ext + 4));
        if (f->cas != 0)
            rc |= put_num(t, 'C', f->cas);
        break;
    }
    case K_DELETE:
        rc = px_buf_append(t, "md", 2) | put_key(t, f->key, f->keylen, &b64);
        if (f->cas != 0)
            rc |= put_num(t, 'C', f->cas);
        break;
    case K_ARITH: {
        rc = px_buf_append(t, "ma", 2) | put_key(t, f->key, f->keylen, &b64);
        char mode[] = {' ', 'M', s->mode};
        rc |= px_buf_append(t, " v c", 4) | put_num(t, 'D', rd64(ext)) |
              px_buf_append(t, mode, sizeof(mode));
        uint32_t exp = rd32(ext + 16);
        if (exp != 0xffffffffu) /* else: not created when absent */
            rc |= put_num(t, 'N', expiry(ext + 16)) | put_num(t, 'J', rd64(ext + 8));
        if (f->cas != 0)
            rc |= put_num(t, 'C', f->cas);
        break;
    }
    case K_NOOP:
        return px_buf_append(t, "mn\r\n", 4);
    case K_VERSION:
        return px_buf_append(t, "version\r\n", 9);
    case K_QUIT:
        return px_buf_append(t, "quit\r\n", 6);
    case K_FLUSH:
        return px_buf_append(t, "flush_all\r\n", 11);
    case K_STAT:
        return px_buf_append(t, "stats\r\n", 7);
    default:
        return -1;
    }
    if (b64)
        rc |= px_buf_append(t, " b", 2);
    if (s->quiet)
        rc |= px_buf_append(t, " q", 2);
    rc |= px_buf_append(t, "\r\n", 2);
    if (s->kind == K_STORE) {
        rc |= px_buf_append(t, f->value, f->vlen);
        rc |= px_buf_append(t, "\r\n", 2);
    }
    return rc != 0 ? -1 : 0;
}

px_mcb_verdict px_mcb_request(const char *buf, size_t len, size_t max_body, px_mcb_frame *f,
                              size_t *consumed, size_t *need, px_buf *text, px_buf *answer,
                              uint8_t edge[8])
{
    memset(f, 0, sizeof(*f));
    memset(edge, 0, 8);
    if (len < PX_MCB_HEADER) {
        if (len > 0 && (unsigned char)buf[0] != PX_MCB_MAGIC_REQ)
            goto bad_magic; /* decided on the first byte: no need to wait */
        *need = PX_MCB_HEADER;
        return PX_MCB_AGAIN;
    }
    f->opcode = (uint8_t)buf[1];
    f->keylen = rd16(buf + 2);
    f->extlen = (uint8_t)buf[4];
    f->bodylen = rd32(buf + 8);
    memcpy(f->opaque, buf + 12, 4);
    f->cas = rd64(buf + 16);
    edge[0] = f->opcode;
    edge[1] = PX_MCB_E_BINARY | PX_MCB_E_ANSWERED;
    memcpy(edge + 2, f->opaque, 4);
    if ((unsigned char)buf[0] != PX_MCB_MAGIC_REQ) {
    bad_magic:
        /* memcached closes without a word; the proxy says why first (the opaque is unknown) */
        memset(f, 0, sizeof(*f));
        edge[0] = 0;
        edge[1] = PX_MCB_E_BINARY | PX_MCB_E_ANSWERED;
        f->close = true;
        *consumed = len;
        return error_response(answer, 0, f->opaque, PX_MCB_EINVAL, "Invalid magic", 13) == 0
                   ? PX_MCB_ANSWER
                   : PX_MCB_NOMEM;
    }
    if ((size_t)f->keylen + f->extlen > f->bodylen) {
        /* memcached: Unknown command, and the close (nothing frames the stream any more) */
        f->close = true;
        *consumed = len;
        return error_response(answer, f->opcode, f->opaque, PX_MCB_UNKNOWN_COMMAND, NULL, 0) == 0
                   ? PX_MCB_ANSWER
                   : PX_MCB_NOMEM;
    }
    if (f->bodylen > max_body) {
        /* Cannot be skipped without being held: answered, and the connection closed. */
        f->close = true;
        *consumed = len;
        return error_response(answer, f->opcode, f->opaque, PX_MCB_E2BIG, NULL, 0) == 0
                   ? PX_MCB_ANSWER
                   : PX_MCB_NOMEM;
    }
    size_t total = PX_MCB_HEADER + (size_t)f->bodylen;
    if (len < total) {
        *need = total;
        return PX_MCB_AGAIN;
    }
    *consumed = total;
    const char *ext = buf + PX_MCB_HEADER;
    f->key = ext + f->extlen;
    f->value = f->key + f->keylen;
    f->vlen = f->bodylen - f->extlen - f->keylen;
    const op_spec *s = &ops[f->opcode];
    if (s->kind == K_NONE)
        return error_response(answer, f->opcode, f->opaque, PX_MCB_UNKNOWN_COMMAND, NULL, 0) == 0
                   ? PX_MCB_ANSWER
                   : PX_MCB_NOMEM;
    if (f->keylen > PX_MCB_MAX_KEY || !shape_ok((op_shape)s->shape, f)) {
        f->close = true; /* memcached: Invalid arguments, then the close */
        return error_response(answer, f->opcode, f->opaque, PX_MCB_EINVAL, NULL, 0) == 0
                   ? PX_MCB_ANSWER
                   : PX_MCB_NOMEM;
    }
    if (s->kind == K_SASL)
        return PX_MCB_SASL;
    if (s->kind == K_STAT && f->keylen > 0) {
        /* a group (items, slabs, settings...): a server's own, which the proxy does not
         * gather; refused as the text "stats <group>" is, the connection kept */
        static const char why[] = "stat with a group is not supported by the proxy";
        return error_response(answer, f->opcode, f->opaque, PX_MCB_NOT_SUPPORTED, why,
                              sizeof(why) - 1) == 0
                   ? PX_MCB_ANSWER
                   : PX_MCB_NOMEM;
    }
    if (f->keylen > PX_MCB_MAX_B64_KEY && !ch_mc_key_plain(f->key, f->keylen)) {
        /* Its base64 would be over the 250 characters a meta key token may have (memcached
         * refuses it too): refused, the connection kept. */
        static const char why[] = "a key that is not printable ASCII without spaces may have "
                                  "at most 186 bytes through the proxy";
        return error_response(answer, f->opcode, f->opaque, PX_MCB_EINVAL, why, sizeof(why) - 1)
                       == 0
                   ? PX_MCB_ANSWER
                   : PX_MCB_NOMEM;
    }
    edge[1] = PX_MCB_E_BINARY;
    return translate(s, f, ext, text) == 0 ? PX_MCB_FORWARD : PX_MCB_NOMEM;
}

long px_mcb_batch(const char *buf, size_t len, size_t max_keys, size_t max_line, px_buf *text,
                  px_buf *keys, size_t *consumed, uint8_t edge[8])
{
    size_t at = 0, n = 0, line = 6; /* "gets" and "\r\n" */
    text->len = keys->len = 0;
    while (n < max_keys && len - at >= PX_MCB_HEADER) {
        const char *h = buf + at;
        uint8_t op = (uint8_t)h[1];
        uint16_t klen = rd16(h + 2);
        const char *key = h + PX_MCB_HEADER;
        /* a quiet get of the shape memcached takes, whole in the buffer, its key a token */
        if ((unsigned char)h[0] != PX_MCB_MAGIC_REQ || ops[op].kind != K_GET || !ops[op].quiet ||
            h[4] != 0 || klen == 0 || klen > PX_MCB_MAX_KEY || rd32(h + 8) != klen ||
            len - at - PX_MCB_HEADER < klen || line + 1 + klen > max_line ||
            !ch_mc_key_plain(key, klen))
            break;
        if (px_buf_append(text, n == 0 ? "gets " : " ", n == 0 ? 5 : 1) != 0 ||
            px_buf_append(text, key, klen) != 0 || px_buf_append(keys, &op, 1) != 0 ||
            px_buf_append(keys, h + 12, 4) != 0)
            return -1;
        line += 1 + klen;
        at += PX_MCB_HEADER + klen;
        n++;
    }
    /* the noop that ends a client's multi-get goes with it: answered after the gets' answers,
     * as it must be, without a request of its own */
    const char *h = buf + at;
    bool noop = n > 0 && len - at >= PX_MCB_HEADER && (unsigned char)h[0] == PX_MCB_MAGIC_REQ &&
                h[1] == PX_MCB_OP_NOOP && rd16(h + 2) == 0 && h[4] == 0 && rd32(h + 8) == 0;
    if (n < 2 && !noop) {
        text->len = keys->len = 0;
        return 0;
    }
    if (noop) {
        uint8_t op = PX_MCB_OP_NOOP;
        if (px_buf_append(keys, &op, 1) != 0 || px_buf_append(keys, h + 12, 4) != 0)
            return -1;
        at += PX_MCB_HEADER;
    }
    if (px_buf_append(text, "\r\n", 2) != 0)
        return -1;
    *consumed = at;
    memset(edge, 0, 8);
    edge[1] = PX_MCB_E_BINARY | PX_MCB_E_BATCH;
    return (long)n;
}

/* ---- replies --------------------------------------------------------------------------------- */

/* The value of meta flag letter c among the tokens of line[0, n) (after the code), as a
 * number; false when absent or not one. */
static bool meta_num(const char *line, size_t n, char c, uint64_t *v)
{
    for (size_t i = 0; i < n;) {
        while (i < n && line[i] == ' ')
            i++;
        size_t t = i;
        while (i < n && line[i] != ' ')
            i++;
        if (i - t >= 2 && line[t] == c && t > 0) {
            uint64_t x = 0;
            size_t k = t + 1;
            for (; k < i && line[k] >= '0' && line[k] <= '9'; k++) {
                if (x > (UINT64_MAX - 9) / 10)
                    return false;
                x = x * 10 + (uint64_t)(line[k] - '0');
            }
            if (k != i)
                return false;
            *v = x;
            return true;
        }
    }
    return false;
}

static bool contains(const char *p, size_t len, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(p + i, s, n) == 0)
            return true;
    return false;
}

static bool starts(const char *p, size_t len, const char *s)
{
    size_t n = strlen(s);
    return len >= n && memcmp(p, s, n) == 0;
}

/* The reply text's line without "\r\n" (its first line). */
static size_t line_len(const char *p, size_t len)
{
    const char *e = memchr(p, '\n', len);
    size_t n = e != NULL ? (size_t)(e - p) : len;
    return n > 0 && p[n - 1] == '\r' ? n - 1 : n;
}

/* Whether the line p[0, n) is an error line: ERROR, CLIENT_ERROR or SERVER_ERROR. */
static bool error_line(const char *p, size_t n)
{
    return starts(p, n, "ERROR") || starts(p, n, "CLIENT_ERROR") || starts(p, n, "SERVER_ERROR");
}

/* An error line (ERROR, CLIENT_ERROR, SERVER_ERROR) as the binary status memcached gives the
 * same failure, its text as the body where memcached has no words for it. */
static int error_reply(px_buf *out, const op_spec *s, uint8_t op, const uint8_t opq[4],
                       const char *p, size_t n)
{
    if (n == 5 && memcmp(p, "ERROR", 5) == 0)
        return error_response(out, op, opq, PX_MCB_UNKNOWN_COMMAND, NULL, 0);
    bool client = starts(p, n, "CLIENT_ERROR");
    size_t skip = 12; /* "CLIENT_ERROR" and "SERVER_ERROR" alike */
    const char *msg = p + (n > skip ? skip + 1 : n);
    size_t mlen = n > skip + 1 ? n - skip - 1 : 0;
    if (client) {
        if (s->kind == K_FLUSH)
            return error_response(out, op, opq, PX_MCB_NOT_SUPPORTED, msg, mlen);
        if (s->kind == K_ARITH && contains(msg, mlen, "non-numeric"))
            return error_response(out, op, opq, PX_MCB_DELTA_BADVAL, NULL, 0);
        if (mlen == 15 && memcmp(msg, "unauthenticated", 15) == 0)
            return error_response(out, op, opq, PX_MCB_AUTH_ERROR, NULL, 0);
        return error_response(out, op, opq, PX_MCB_EINVAL, msg, mlen);
    }
    if (contains(msg, mlen, "too large"))
        return error_response(out, op, opq, PX_MCB_E2BIG, NULL, 0);
    if (starts(msg, mlen, "out of memory") || starts(msg, mlen, "Out of memory"))
        return error_response(out, op, opq, PX_MCB_ENOMEM, NULL, 0);
    return error_response(out, op, opq, PX_MCB_TMPFAIL, msg, mlen);
}

/* stats' lines ("STAT <name> <value>" up to "END") as memcached's binary stat answers: one
 * response per stat, its name the key and its value the value, then an empty one. */
static int stat_reply(px_buf *out, uint8_t op, const uint8_t opq[4], const char *p, size_t len)
{
    int rc = 0;
    for (size_t at = 0; rc == 0 && at < len;) {
        size_t n = line_len(p + at, len - at);
        const char *line = p + at;
        at += n + 2;
        if (n == 3 && memcmp(line, "END", 3) == 0)
            return px_mcb_response(out, op, opq, PX_MCB_OK, 0, NULL, 0, NULL, 0, NULL, 0);
        const char *sp = n > 5 && starts(line, n, "STAT ") ? memchr(line + 5, ' ', n - 5) : NULL;
        if (sp == NULL)
            break;
        size_t klen = (size_t)(sp - line) - 5;
        rc = px_mcb_response(out, op, opq, PX_MCB_OK, 0, NULL, 0, line + 5, klen, sp + 1,
                             n - 6 - klen);
    }
    return rc != 0 ? rc : error_response(out, op, opq, PX_MCB_TMPFAIL, "unexpected reply", 16);
}

/* The request's key as the client sent it (decoded when it went as base64) into buf. */
static size_t request_key(const px_msg *m, char *buf, size_t cap)
{
    if (m->nkeys == 0)
        return 0;
    px_span k = m->keys[0];
    if ((m->flags & PX_MSG_ENCODED_KEYS) == 0) {
        size_t n = k.len < cap ? k.len : cap;
        memcpy(buf, m->raw + k.off, n);
        return n;
    }
    long n = ch_mc_b64_decode(m->raw + k.off, k.len, (unsigned char *)buf, cap);
    return n > 0 ? (size_t)n : 0;
}

/* A run of quiet gets' reply (px_mcb_batch), as the memcache codec merged it: the VALUE
 * blocks of the keys found in the keys' order, a failed part's error line in each of its keys'
 * places (PX_MSG_KEYWISE), then END; or one error line for the whole (the request failed
 * before it was split). Each key found answers with its opcode and opaque, a missing one
 * nothing (a quiet get), an error its binary status, as one request of its own would; then
 * the noop that ended the run, when it came with it. */
static int batch_reply(px_buf *out, const px_msg *m, const char *p, size_t len)
{
    size_t n = m->edge_keys_len / PX_MCB_BATCH_ENTRY, at = 0;
    bool noop = n > 0 && m->edge_keys[(n - 1) * PX_MCB_BATCH_ENTRY] == PX_MCB_OP_NOOP;
    size_t gets = noop ? n - 1 : n;
    int rc = 0;
    /* (a request refused before it was parsed, for the memory budget, has no keys: its one
     * error line is every get's) */
    for (size_t i = 0; rc == 0 && i < gets; i++) {
        const uint8_t *e = m->edge_keys + i * PX_MCB_BATCH_ENTRY;
        const op_spec *s = &ops[e[0]];
        size_t ln = at < len ? line_len(p + at, len - at) : 0;
        ch_mc_value v;
        size_t next = at;
        if (i < m->nkeys && at < len && starts(p + at, ln, "VALUE ") &&
            ch_mc_value_next(p, len, &next, &v)) {
            px_span k = m->keys[i];
            if (v.key.len != k.len || memcmp(p + v.key.off, m->raw + k.off, k.len) != 0)
                continue; /* a miss: the next block is a later key's */
            unsigned char fl[4];
            wr32(fl, v.flags);
            rc = px_mcb_response(out, e[0], e + 1, PX_MCB_OK, v.cas, fl, 4,
                                 s->with_key ? m->raw + k.off : NULL, s->with_key ? k.len : 0,
                                 p + v.data.off, v.data.len);
            at = next;
        } else if (at < len && error_line(p + at, ln)) {
            rc = error_reply(out, s, e[0], e + 1, p + at, ln);
            if (at + ln + 2 < len) /* else the whole request's: every key's */
                at += ln + 2;
        } else if (!(at < len && ln == 3 && memcmp(p + at, "END", 3) == 0)) {
            rc = error_response(out, e[0], e + 1, PX_MCB_TMPFAIL, "unexpected reply", 16);
        } /* END: the rest are misses */
    }
    if (rc == 0 && noop) { /* the noop that ended the run, after every answer before it */
        const uint8_t *e = m->edge_keys + (n - 1) * PX_MCB_BATCH_ENTRY;
        rc = px_mcb_response(out, e[0], e + 1, PX_MCB_OK, 0, NULL, 0, NULL, 0, NULL, 0);
    }
    return rc;
}

int px_mcb_reply(px_buf *out, const px_msg *m, const char *p, size_t len)
{
    if ((m->edge[1] & PX_MCB_E_ANSWERED) != 0)
        return len > 0 ? px_buf_append(out, p, len) : 0;
    uint8_t op = m->edge[0];
    const uint8_t *opq = m->edge + 2;
    const op_spec *s = &ops[op];
    if (s->kind == K_QUIT) /* the proxy's quit answers nothing; binary quit says so first */
        return s->quiet ? 0 : px_mcb_response(out, op, opq, PX_MCB_OK, 0, NULL, 0, NULL, 0, NULL, 0);
    if (len == 0)
        return 0; /* withheld (a quiet request's) */
    if ((m->edge[1] & PX_MCB_E_BATCH) != 0)
        return batch_reply(out, m, p, len);
    size_t n = line_len(p, len);
    if (error_line(p, n))
        return error_reply(out, s, op, opq, p, n);
    uint64_t cas = 0, flags = 0;
    bool va = starts(p, n, "VA "), hd = n == 2 ? memcmp(p, "HD", 2) == 0 : starts(p, n, "HD ");
    const char *code_end = p + (n < 2 ? n : 2);
    size_t rest = n < 2 ? 0 : n - 2;
    (void)meta_num(code_end, rest, 'c', &cas);
    (void)meta_num(code_end, rest, 'f', &flags);
    /* the value of a VA reply: after its line's "\r\n", its size from the line */
    const char *val = NULL;
    size_t vlen = 0;
    if (va) {
        uint64_t sz = 0;
        size_t i = 3;
        while (i < n && p[i] >= '0' && p[i] <= '9' && sz < ((uint64_t)1 << 40))
            sz = sz * 10 + (uint64_t)(p[i++] - '0');
        size_t at = n + 2;
        if (at > len || sz > len - at)
            return error_response(out, op, opq, PX_MCB_TMPFAIL, "bad reply", 9);
        val = p + at;
        vlen = (size_t)sz;
    }
    unsigned char fl[4];
    wr32(fl, (uint32_t)flags);
    bool en = n == 2 && memcmp(p, "EN", 2) == 0;
    bool nf = starts(p, n, "NF"), ns = starts(p, n, "NS"), ex = starts(p, n, "EX");
    switch ((op_kind)s->kind) {
    case K_GET:
    case K_GAT:
    case K_TOUCH: {
        char key[PX_MCB_MAX_KEY];
        size_t klen = s->with_key ? request_key(m, key, sizeof(key)) : 0;
        if (va || hd)
            return px_mcb_response(out, op, opq, PX_MCB_OK, cas, fl, 4, key, klen, val,
                                   s->kind == K_TOUCH ? 0 : vlen);
        if (en) {
            if (s->quiet)
                return 0;
            if (s->with_key) /* memcached's write_bin_miss_response: the key, no text */
                return px_mcb_response(out, op, opq, PX_MCB_ENOENT, 0, NULL, 0, key, klen, NULL, 0);
            return error_response(out, op, opq, PX_MCB_ENOENT, NULL, 0);
        }
        break;
    }
    case K_STORE:
        if (hd)
            return s->quiet ? 0 : px_mcb_response(out, op, opq, PX_MCB_OK, cas, NULL, 0, NULL, 0,
                                                  NULL, 0);
        if (ns) /* memcached: an add that finds the key "exists", a replace that does not
                   "not found", an append or prepend "not stored" */
            return error_response(out, op, opq,
                                  s->mode == 'E'   ? PX_MCB_EEXISTS
                                  : s->mode == 'R' ? PX_MCB_ENOENT
                                                   : PX_MCB_NOT_STORED,
                                  NULL, 0);
        if (ex)
            return error_response(out, op, opq, PX_MCB_EEXISTS, NULL, 0);
        if (nf)
            return error_response(out, op, opq, PX_MCB_ENOENT, NULL, 0);
        break;
    case K_DELETE:
        if (hd)
            return s->quiet ? 0 : px_mcb_response(out, op, opq, PX_MCB_OK, 0, NULL, 0, NULL, 0,
                                                  NULL, 0);
        if (nf)
            return error_response(out, op, opq, PX_MCB_ENOENT, NULL, 0);
        if (ex)
            return error_response(out, op, opq, PX_MCB_EEXISTS, NULL, 0);
        break;
    case K_ARITH:
        if (va || hd) {
            if (s->quiet)
                return 0;
            uint64_t v = 0;
            for (size_t i = 0; i < vlen && val[i] >= '0' && val[i] <= '9'; i++)
                v = v * 10 + (uint64_t)(val[i] - '0');
            unsigned char b[8];
            wr64(b, v);
            return px_mcb_response(out, op, opq, PX_MCB_OK, cas, NULL, 0, NULL, 0, b, 8);
        }
        if (nf)
            return error_response(out, op, opq, PX_MCB_ENOENT, NULL, 0);
        if (ex)
            return error_response(out, op, opq, PX_MCB_EEXISTS, NULL, 0);
        if (ns)
            return error_response(out, op, opq, PX_MCB_NOT_STORED, NULL, 0);
        break;
    case K_NOOP:
        if (n == 2 && memcmp(p, "MN", 2) == 0)
            return px_mcb_response(out, op, opq, PX_MCB_OK, 0, NULL, 0, NULL, 0, NULL, 0);
        break;
    case K_VERSION:
        if (starts(p, n, "VERSION "))
            return px_mcb_response(out, op, opq, PX_MCB_OK, 0, NULL, 0, NULL, 0, p + 8, n - 8);
        break;
    case K_STAT:
        return stat_reply(out, op, opq, p, len);
    default:
        break;
    }
    return error_response(out, op, opq, PX_MCB_TMPFAIL, "unexpected reply", 16);
}

/* ---- SASL ------------------------------------------------------------------------------------ */

bool px_mcb_sasl_plain(const px_mcb_frame *f, px_span *user, px_span *pass)
{
    if (f->keylen != 5 || memcmp(f->key, "PLAIN", 5) != 0)
        return false;
    const char *v = f->value;
    size_t n = f->vlen;
    const char *z1 = memchr(v, '\0', n);
    if (z1 == NULL)
        return false;
    size_t u = (size_t)(z1 - v) + 1;
    const char *z2 = memchr(v + u, '\0', n - u);
    if (z2 == NULL)
        return false;
    size_t pw = (size_t)(z2 - v) + 1;
    *user = (px_span){(uint32_t)u, (uint32_t)(pw - 1 - u)};
    *pass = (px_span){(uint32_t)pw, (uint32_t)(n - pw)};
    return user->len > 0;
}

/* ---- users --------------------------------------------------------------------------------- */

struct px_mcb_users {
    size_t n, len;
    char *text;      /* the file's bytes, owned: every span points into it */
    px_span *user, *pass;
};

void px_mcb_users_free(px_mcb_users *u)
{
    if (u == NULL)
        return;
    if (u->text != NULL)
        memset(u->text, 0, u->len); /* no password left in freed memory */
    free(u->text);
    free(u->user);
    free(u->pass);
    free(u);
}

int px_mcb_users_parse(const char *text, size_t len, px_mcb_users **out, size_t *line,
                       const char **what)
{
    px_mcb_users *u = calloc(1, sizeof(*u));
    size_t lines = 1;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    if (u == NULL || (u->text = malloc(len + 1)) == NULL ||
        (u->user = calloc(lines, sizeof(px_span))) == NULL ||
        (u->pass = calloc(lines, sizeof(px_span))) == NULL) {
        px_mcb_users_free(u);
        return -1;
    }
    if (len > 0)
        memcpy(u->text, text, len);
    u->len = len;
    size_t at = 0;
    for (size_t no = 1; at < len; no++) {
        const char *nl = memchr(u->text + at, '\n', len - at);
        size_t end = nl != NULL ? (size_t)(nl - u->text) : len, e = end;
        if (e > at && u->text[e - 1] == '\r')
            e--;
        if (e > at) {
            const char *colon = memchr(u->text + at, ':', e - at);
            if (colon == NULL || colon == u->text + at || memchr(u->text + at, '\0', e - at)) {
                *line = no;
                *what = colon == NULL ? "expected user:password" : colon == u->text + at
                                                                     ? "a user name is empty"
                                                                     : "a NUL byte";
                px_mcb_users_free(u);
                return 1;
            }
            size_t c = (size_t)(colon - u->text);
            u->user[u->n] = (px_span){(uint32_t)at, (uint32_t)(c - at)};
            u->pass[u->n] = (px_span){(uint32_t)(c + 1), (uint32_t)(e - c - 1)};
            u->n++;
        }
        at = end + 1;
    }
    *out = u;
    return 0;
}

bool px_mcb_users_check(const px_mcb_users *u, const char *user, size_t ulen, const char *pass,
                        size_t plen)
{
    bool ok = false;
    for (size_t i = 0; u != NULL && i < u->n; i++) {
        bool a = px_equal_secret(u->text + u->user[i].off, u->user[i].len, user, ulen);
        bool b = px_equal_secret(u->text + u->pass[i].off, u->pass[i].len, pass, plen);
        ok |= a & b;
    }
    return ok;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mc.c — memcached text and meta protocol parsing (see mc.h for the contract).
 *
 * Every call starts at buf[0] and makes one forward pass: the command line is found with one
 * memchr bounded by the line limit, its tokens are walked once (each stored into the caller's
 * array while room remains, each checked as the command's grammar asks), and a data block is
 * skipped by its declared length, never scanned. Nothing is kept between calls, nothing is
 * allocated.
 *
 * Strictness (stricter than memcached where memcached ignores things): a text command takes
 * exactly its arguments (memcached ignores extra tokens after "set k 0 0 1"); numbers are
 * decimal digits (a '-' only for exptimes and the N R T meta flags), within their type; keys
 * have no control characters; meta flags are those protocol.txt lists for the command, a flag
 * without an argument is one letter, and a numeric flag's token is a number.
 *
 * need: while the line has no end, *need is len + 1 (the parser cannot know more); once a
 * storage line is complete, exactly line + bytes + 2. Replies likewise, plus the 5 bytes of the
 * "END\r\n" a get reply still owes.
 */
#include "mc.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MC_MAX_OPAQUE 32u          /* protocol.txt: opaque tokens up to 32 bytes */
#define MC_ITEM_CAP ((size_t)1 << 30)
#define MC_SWALLOW_CAP ((size_t)1 << 31)
#define MC_LINE_CAP ((size_t)1 << 30)
#define MC_KEY_CAP 4096u

void ch_mc_limits_init(ch_mc_limits *lim)
{
    if (!lim)
        return;
    lim->max_key = 250;
    lim->max_item = (size_t)1024 * 1024;
    lim->max_swallow = (size_t)64 * 1024 * 1024;
    lim->max_line = 2048;
    lim->max_get_line = (size_t)1024 * 1024;
    lim->max_keys = 4096;
    lim->max_tokens = 24;
}

/* The limits in force: defaults for NULL, each clamped so that every offset fits 32 bits. */
static ch_mc_limits effective(const ch_mc_limits *lim)
{
    ch_mc_limits l;
    if (lim)
        l = *lim;
    else
        ch_mc_limits_init(&l);
    if (l.max_item > MC_ITEM_CAP)
        l.max_item = MC_ITEM_CAP;
    if (l.max_swallow < l.max_item)
        l.max_swallow = l.max_item;
    if (l.max_swallow > MC_SWALLOW_CAP)
        l.max_swallow = MC_SWALLOW_CAP;
    if (l.max_line > MC_LINE_CAP)
        l.max_line = MC_LINE_CAP;
    if (l.max_line < 8)
        l.max_line = 8;
    if (l.max_get_line > MC_LINE_CAP)
        l.max_get_line = MC_LINE_CAP;
    if (l.max_get_line < l.max_line)
        l.max_get_line = l.max_line;
    if (l.max_key > MC_KEY_CAP)
        l.max_key = MC_KEY_CAP;
    if (l.max_keys < 1)
        l.max_keys = 1;
    if (l.max_tokens < 2)
        l.max_tokens = 2;
    return l;
}

/* ---- commands ------------------------------------------------------------------------------ */

static const struct {
    const char *name;
    unsigned props;
} CMDS[CH_MC_CMD_COUNT] = {
    [CH_MC_CMD_UNKNOWN] = {"", 0},
    [CH_MC_CMD_GET] = {"get", CH_MC_P_GET},
    [CH_MC_CMD_GETS] = {"gets", CH_MC_P_GET | CH_MC_P_CAS_VALUE},
    [CH_MC_CMD_GAT] = {"gat", CH_MC_P_GET},
    [CH_MC_CMD_GATS] = {"gats", CH_MC_P_GET | CH_MC_P_CAS_VALUE},
    [CH_MC_CMD_SET] = {"set", CH_MC_P_STORAGE | CH_MC_P_NOREPLY},
    [CH_MC_CMD_ADD] = {"add", CH_MC_P_STORAGE | CH_MC_P_NOREPLY},
    [CH_MC_CMD_REPLACE] = {"replace", CH_MC_P_STORAGE | CH_MC_P_NOREPLY},
    [CH_MC_CMD_APPEND] = {"append", CH_MC_P_STORAGE | CH_MC_P_NOREPLY},
    [CH_MC_CMD_PREPEND] = {"prepend", CH_MC_P_STORAGE | CH_MC_P_NOREPLY},
    [CH_MC_CMD_CAS] = {"cas", CH_MC_P_STORAGE | CH_MC_P_NOREPLY},
    [CH_MC_CMD_INCR] = {"incr", CH_MC_P_NOREPLY},
    [CH_MC_CMD_DECR] = {"decr", CH_MC_P_NOREPLY},
    [CH_MC_CMD_DELETE] = {"delete", CH_MC_P_NOREPLY},
    [CH_MC_CMD_TOUCH] = {"touch", CH_MC_P_NOREPLY},
    [CH_MC_CMD_VERSION] = {"version", CH_MC_P_LOCAL},
    [CH_MC_CMD_QUIT] = {"quit", CH_MC_P_LOCAL},
    [CH_MC_CMD_MG] = {"mg", CH_MC_P_META},
    [CH_MC_CMD_MS] = {"ms", CH_MC_P_META | CH_MC_P_STORAGE},
    [CH_MC_CMD_MD] = {"md", CH_MC_P_META},
    [CH_MC_CMD_MA] = {"ma", CH_MC_P_META},
    [CH_MC_CMD_MN] = {"mn", CH_MC_P_META},
    [CH_MC_CMD_ME] = {"me", CH_MC_P_META},
    [CH_MC_CMD_STATS] = {"stats", CH_MC_P_REFUSED},
    [CH_MC_CMD_FLUSH_ALL] = {"flush_all", CH_MC_P_REFUSED},
    [CH_MC_CMD_VERBOSITY] = {"verbosity", CH_MC_P_REFUSED},
    [CH_MC_CMD_SHUTDOWN] = {"shutdown", CH_MC_P_REFUSED},
    [CH_MC_CMD_CACHE_MEMLIMIT] = {"cache_memlimit", CH_MC_P_REFUSED},
    [CH_MC_CMD_SLABS] = {"slabs", CH_MC_P_REFUSED},
    [CH_MC_CMD_LRU] = {"lru", CH_MC_P_REFUSED},
    [CH_MC_CMD_LRU_CRAWLER] = {"lru_crawler", CH_MC_P_REFUSED},
    [CH_MC_CMD_WATCH] = {"watch", CH_MC_P_REFUSED},
    [CH_MC_CMD_EXTSTORE] = {"extstore", CH_MC_P_REFUSED},
    [CH_MC_CMD_MISBEHAVE] = {"misbehave", CH_MC_P_REFUSED},
    [CH_MC_CMD_DEBUGTIME] = {"debugtime", CH_MC_P_REFUSED},
    [CH_MC_CMD_MCP] = {"mcp", CH_MC_P_REFUSED},
};

unsigned ch_mc_cmd_props(ch_mc_cmd cmd)
{
    return (unsigned)cmd < CH_MC_CMD_COUNT ? CMDS[cmd].props : 0;
}

const char *ch_mc_cmd_name(ch_mc_cmd cmd)
{
    return (unsigned)cmd < CH_MC_CMD_COUNT ? CMDS[cmd].name : "";
}

static ch_mc_cmd lookup(const char *p, size_t n)
{
    if (n == 0)
        return CH_MC_CMD_UNKNOWN;
    for (unsigned c = 1; c < CH_MC_CMD_COUNT; c++) /* the first byte first: no strlen */
        if (CMDS[c].name[0] == p[0] && strlen(CMDS[c].name) == n &&
            memcmp(CMDS[c].name, p, n) == 0)
            return (ch_mc_cmd)c;
    return CH_MC_CMD_UNKNOWN;
}

/* Meta flags each command takes (protocol.txt, "The flags used by the 'xx' command"), plus the
 * P and L proxy hints every meta command accepts. */
static const char MG_FLAGS[] = "bcCfhklOqstuvENRTPL";
static const char MS_FLAGS[] = "bcCEFIkOqsTMNPL";
static const char MD_FLAGS[] = "bCEIkOqTxPL";
static const char MA_FLAGS[] = "bCENJDTMOqtcvkPL";
static const char ME_FLAGS[] = "bPL";

/* ---- small helpers ------------------------------------------------------------------------- */

static size_t sat_add(size_t a, size_t b)
{
    return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static ch_mc_status fail(ch_mc_status st, char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return st;
}

static ch_mc_span span(size_t off, size_t len)
{
    ch_mc_span s = {(uint32_t)off, (uint32_t)len};
    return s;
}

static bool span_is(const char *buf, ch_mc_span s, const char *lit)
{
    size_t n = strlen(lit);
    return s.len == n && memcmp(buf + s.off, lit, n) == 0;
}

typedef enum { N_OK, N_BAD, N_OVERFLOW } num_st;

/* Decimal digits (at least one) within max. Leading zeros are accepted, as memcached's strtoull
 * does. */
static num_st parse_u64(const char *p, size_t n, uint64_t max, uint64_t *v)
{
    if (n == 0)
        return N_BAD;
    uint64_t x = 0;
    bool over = false;
    for (size_t i = 0; i < n; i++) {
        unsigned d = (unsigned)(unsigned char)p[i] - '0';
        if (d > 9)
            return N_BAD;
        if (x > (max - d) / 10)
            over = true;
        else
            x = x * 10 + d;
    }
    if (over)
        return N_OVERFLOW;
    *v = x;
    return N_OK;
}

/* An optional '-' then digits, within int64. */
static bool parse_i64(const char *p, size_t n, int64_t *v)
{
    bool neg = n > 0 && p[0] == '-';
    uint64_t m;
    if (parse_u64(p + neg, n - neg, neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, &m) !=
        N_OK)
        return false;
    *v = !neg ? (int64_t)m : m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)m;
    return true;
}

/* A key's bytes: none <= 0x20 (spaces split tokens already; this refuses control characters
 * and tabs) and no DEL. */
static bool key_bytes_ok(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c <= 0x20 || c == 0x7f)
            return false;
    }
    return true;
}

/* ---- base64 -------------------------------------------------------------------------------- */

static int b64_val(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

long ch_mc_b64_decode(const char *src, size_t srclen, unsigned char *dst, size_t dstcap)
{
    if (!src || srclen % 4 != 0 || srclen / 4 > (size_t)(LONG_MAX / 3))
        return -1;
    size_t out = 0;
    for (size_t i = 0; i < srclen; i += 4) {
        const unsigned char *q = (const unsigned char *)src + i;
        const bool last = i + 4 == srclen;
        int v0 = b64_val(q[0]), v1 = b64_val(q[1]);
        if (v0 < 0 || v1 < 0)
            return -1;
        int v2, v3;
        size_t n;
        if (last && q[2] == '=' && q[3] == '=') {
            if (v1 & 0x0f)
                return -1;
            v2 = v3 = 0;
            n = 1;
        } else if (last && q[3] == '=') {
            v2 = b64_val(q[2]);
            if (v2 < 0 || (v2 & 0x03))
                return -1;
            v3 = 0;
            n = 2;
        } else {
            v2 = b64_val(q[2]);
            v3 = b64_val(q[3]);
            if (v2 < 0 || v3 < 0)
                return -1;
            n = 3;
        }
        if (out + n > dstcap || !dst)
            return -1;
        uint32_t w = (uint32_t)v0 << 18 | (uint32_t)v1 << 12 | (uint32_t)v2 << 6 | (uint32_t)v3;
        dst[out] = (unsigned char)(w >> 16);
        if (n > 1)
            dst[out + 1] = (unsigned char)(w >> 8);
        if (n > 2)
            dst[out + 2] = (unsigned char)w;
        out += n;
    }
    return (long)out;
}

/* ---- requests ------------------------------------------------------------------------------ */

/* A token walker over one line: every token it yields is also stored in the caller's array
 * while room remains. */
typedef struct walk {
    const char *buf;
    size_t pos, end;
    ch_mc_request *out;
    size_t n; /* tokens yielded */
} walk;

static bool next_tok(walk *w, ch_mc_span *s)
{
    while (w->pos < w->end && w->buf[w->pos] == ' ')
        w->pos++;
    if (w->pos == w->end)
        return false;
    size_t start = w->pos;
    while (w->pos < w->end && w->buf[w->pos] != ' ')
        w->pos++;
    *s = span(start, w->pos - start);
    if (w->n < w->out->tok_cap)
        w->out->tok[w->n] = *s;
    w->n++;
    return true;
}

/* Counts (and stores) every remaining token; returns how many. */
static size_t rest_toks(walk *w)
{
    size_t k = 0;
    ch_mc_span s;
    while (next_tok(w, &s))
        k++;
    return k;
}

typedef struct preq {
    const char *buf;
    size_t len;
    ch_mc_limits lim;
    ch_mc_request *out;
    size_t consumed, need;
    char *err;
    size_t errlen;
} preq;

static const char BAD_FORMAT[] = "bad command line format";

static ch_mc_status bad(preq *r, size_t skip, const char *msg)
{
    r->consumed = skip;
    return fail(CH_MC_ERROR, r->err, r->errlen, "%s", msg);
}

/* Checks a plain (not base64) key token. */
static const char *check_key(const preq *r, ch_mc_span k)
{
    if (k.len > r->lim.max_key)
        return "key too long";
    if (!key_bytes_ok(r->buf + k.off, k.len))
        return "key contains control characters";
    return NULL;
}

/* A base64 key token: canonical base64 of 1..max_key bytes. */
static const char *check_b64_key(const preq *r, ch_mc_span k)
{
    unsigned char tmp[MC_KEY_CAP];
    if (k.len > (r->lim.max_key + 2) / 3 * 4)
        return "key too long";
    long n = ch_mc_b64_decode(r->buf + k.off, k.len, tmp, sizeof tmp);
    if (n <= 0)
        return "error decoding key";
    if ((size_t)n > r->lim.max_key)
        return "key too long";
    return NULL;
}

/* get gets: keys...; gat gats: exptime keys... */
static ch_mc_status parse_get(preq *r, walk *w, size_t line_len)
{
    ch_mc_request *o = r->out;
    const bool touch = o->cmd == CH_MC_CMD_GAT || o->cmd == CH_MC_CMD_GATS;
    ch_mc_span s;
    if (touch) {
        if (!next_tok(w, &s))
            return bad(r, line_len, BAD_FORMAT);
        if (!parse_i64(r->buf + s.off, s.len, &o->exptime))
            return bad(r, line_len, "invalid exptime argument");
    }
    o->key_first = (uint32_t)w->n;
    size_t nk = 0;
    const char *why = NULL;
    while (next_tok(w, &s)) {
        if (nk == 0)
            o->key = s;
        if (!why)
            why = check_key(r, s);
        nk++;
    }
    if (nk == 0)
        return bad(r, line_len, BAD_FORMAT);
    if (why)
        return bad(r, line_len, why);
    if (nk > r->lim.max_keys)
        return bad(r, line_len, "too many keys");
    o->nkeys = (uint32_t)nk;
    return CH_MC_OK;
}

/* The data block of a storage command whose line (line_len bytes) declared o->bytes. */
static ch_mc_status data_block(preq *r, size_t line_len)
{
    const size_t b = (size_t)r->out->bytes;
    const size_t cr = line_len + b, total = cr + 2;
    if (r->len > cr && r->buf[cr] != '\r')
        return bad(r, total, "bad data chunk");
    if (r->len < total) {
        r->need = total;
        return CH_MC_INCOMPLETE;
    }
    if (r->buf[cr + 1] != '\n')
        return bad(r, total, "bad data chunk");
    r->out->data = span(line_len, b);
    r->consumed = total;
    return CH_MC_OK;
}

/* The <bytes> of a storage line. Sets o->bytes and *skip (what an error skips) on success;
 * returns CH_MC_OK, or an error already reported. */
static ch_mc_status storage_bytes(preq *r, ch_mc_span s, size_t line_len, size_t *skip)
{
    uint64_t b = 0;
    num_st ns = parse_u64(r->buf + s.off, s.len, UINT64_MAX, &b);
    if (ns == N_BAD)
        return bad(r, line_len, BAD_FORMAT);
    if (ns == N_OVERFLOW || b > r->lim.max_swallow)
        return fail(CH_MC_CLOSE, r->err, r->errlen, "object too large for cache");
    r->out->bytes = b;
    *skip = line_len + (size_t)b + 2;
    if (b > r->lim.max_item)
        return bad(r, *skip, "object too large for cache");
    return CH_MC_OK;
}

/* <cmd> <key> <flags> <exptime> <bytes> [<cas>] [noreply] */
static ch_mc_status parse_storage(preq *r, walk *w, size_t line_len)
{
    ch_mc_request *o = r->out;
    const bool is_cas = o->cmd == CH_MC_CMD_CAS;
    ch_mc_span t[7];
    size_t n = 0;
    ch_mc_span s;
    while (n < 7 && next_tok(w, &s))
        t[n++] = s;
    const size_t extra = rest_toks(w);
    const size_t want = is_cas ? 5 : 4; /* arguments after the command, noreply aside */
    /* The bytes first: every later error then skips the data block as memcached does. */
    if (n < 4)
        return bad(r, line_len, BAD_FORMAT);
    size_t skip = line_len;
    ch_mc_status st = storage_bytes(r, t[3], line_len, &skip);
    if (st != CH_MC_OK)
        return st;
    size_t args = n;
    if (extra == 0 && n == want + 1 && span_is(r->buf, t[n - 1], "noreply")) {
        o->noreply = t[n - 1];
        args = n - 1;
    }
    if (extra != 0 || args != want)
        return bad(r, skip, BAD_FORMAT);
    const char *why = check_key(r, t[0]);
    if (why)
        return bad(r, skip, why);
    uint64_t v;
    if (parse_u64(r->buf + t[1].off, t[1].len, UINT32_MAX, &v) != N_OK)
        return bad(r, skip, BAD_FORMAT);
    o->flags = (uint32_t)v;
    if (!parse_i64(r->buf + t[2].off, t[2].len, &o->exptime))
        return bad(r, skip, BAD_FORMAT);
    if (is_cas && parse_u64(r->buf + t[4].off, t[4].len, UINT64_MAX, &o->cas) != N_OK)
        return bad(r, skip, BAD_FORMAT);
    o->key_first = 1;
    o->nkeys = 1;
    o->key = t[0];
    return data_block(r, line_len);
}

/* incr decr: key value [noreply]; delete: key [0] [noreply]; touch: key exptime [noreply]. */
static ch_mc_status parse_keyed(preq *r, walk *w, size_t line_len)
{
    ch_mc_request *o = r->out;
    ch_mc_span t[4];
    size_t n = 0;
    ch_mc_span s;
    while (n < 4 && next_tok(w, &s))
        t[n++] = s;
    if (rest_toks(w) != 0 || n == 0)
        return bad(r, line_len, BAD_FORMAT);
    size_t args = n;
    if (n >= 2 && span_is(r->buf, t[n - 1], "noreply")) {
        o->noreply = t[n - 1];
        args = n - 1;
    }
    switch (o->cmd) {
    case CH_MC_CMD_INCR:
    case CH_MC_CMD_DECR:
        if (args != 2)
            return bad(r, line_len, BAD_FORMAT);
        if (parse_u64(r->buf + t[1].off, t[1].len, UINT64_MAX, &o->delta) != N_OK)
            return bad(r, line_len, "invalid numeric delta argument");
        break;
    case CH_MC_CMD_TOUCH:
        if (args != 2)
            return bad(r, line_len, BAD_FORMAT);
        if (!parse_i64(r->buf + t[1].off, t[1].len, &o->exptime))
            return bad(r, line_len, "invalid exptime argument");
        break;
    default: /* delete, with memcached's legacy "0" hold time */
        if (args == 2 && !span_is(r->buf, t[1], "0"))
            return bad(r, line_len, "bad command line format.  Usage: delete <key> [noreply]");
        if (args > 2)
            return bad(r, line_len, "bad command line format.  Usage: delete <key> [noreply]");
        break;
    }
    const char *why = check_key(r, t[0]);
    if (why)
        return bad(r, line_len, why);
    o->key_first = 1;
    o->nkeys = 1;
    o->key = t[0];
    return CH_MC_OK;
}

/* One meta flag token f (at least one byte) of command cmd. */
static const char *meta_flag(preq *r, ch_mc_span f)
{
    ch_mc_request *o = r->out;
    const char *p = r->buf + f.off;
    const char c = p[0];
    const char *allowed = o->cmd == CH_MC_CMD_MG   ? MG_FLAGS
                          : o->cmd == CH_MC_CMD_MS ? MS_FLAGS
                          : o->cmd == CH_MC_CMD_MD ? MD_FLAGS
                          : o->cmd == CH_MC_CMD_MA ? MA_FLAGS
                                                   : ME_FLAGS;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) || !strchr(allowed, c))
        return "invalid flag";
    const char *arg = p + 1;
    const size_t alen = f.len - 1;
    uint64_t u;
    int64_t i;
    switch (c) {
    case 'O':
        if (alen > MC_MAX_OPAQUE)
            return "opaque token too long";
        if (!key_bytes_ok(arg, alen))
            return "bad token in command line format";
        o->opaque = f;
        break;
    case 'P':
    case 'L': /* proxy hints: any token */
        if (!key_bytes_ok(arg, alen))
            return "bad token in command line format";
        break;
    case 'M':
        if (alen != 1)
            return o->cmd == CH_MC_CMD_MS ? "invalid mode for ms M token"
                                          : "invalid mode for ma M token";
        if (o->cmd == CH_MC_CMD_MS ? !strchr("EAPRS", arg[0]) : !strchr("I+D-", arg[0]))
            return o->cmd == CH_MC_CMD_MS ? "invalid mode for ms M token"
                                          : "invalid mode for ma M token";
        o->mode = arg[0];
        break;
    case 'C':
        if (parse_u64(arg, alen, UINT64_MAX, &u) != N_OK)
            return "bad token in command line format";
        o->cas = u;
        break;
    case 'E':
        if (parse_u64(arg, alen, UINT64_MAX, &u) != N_OK)
            return "bad token in command line format";
        break;
    case 'J':
        if (parse_u64(arg, alen, UINT64_MAX, &u) != N_OK)
            return "invalid numeric initial value";
        break;
    case 'D':
        if (parse_u64(arg, alen, UINT64_MAX, &u) != N_OK)
            return "invalid numeric delta value";
        o->delta = u;
        break;
    case 'F':
        if (parse_u64(arg, alen, UINT32_MAX, &u) != N_OK)
            return "bad token in command line format";
        o->flags = (uint32_t)u;
        break;
    case 'N':
    case 'R':
    case 'T':
        if (!parse_i64(arg, alen, &i) || i < INT32_MIN || i > INT32_MAX)
            return "bad token in command line format";
        if (c == 'T')
            o->exptime = i;
        break;
    default: /* flags without an argument */
        if (alen != 0)
            return "invalid flag";
        if (c == 'q')
            o->quiet = f;
        if (c == 'b')
            o->b64 = true;
        break;
    }
    o->mflags |= CH_MC_FLAG(c);
    return NULL;
}

/* mg md ma me: <cm> <key> <flags>*;  ms: <cm> <key> <datalen> <flags>*;  mn alone. */
static ch_mc_status parse_meta(preq *r, walk *w, size_t line_len)
{
    ch_mc_request *o = r->out;
    const bool is_ms = o->cmd == CH_MC_CMD_MS;
    ch_mc_span key, s;
    if (o->cmd == CH_MC_CMD_MN)
        return rest_toks(w) == 0 ? CH_MC_OK : bad(r, line_len, BAD_FORMAT);
    if (!next_tok(w, &key))
        return bad(r, line_len, BAD_FORMAT);
    size_t skip = line_len;
    if (is_ms) {
        if (!next_tok(w, &s))
            return bad(r, line_len, BAD_FORMAT);
        ch_mc_status st = storage_bytes(r, s, line_len, &skip);
        if (st != CH_MC_OK)
            return st;
    }
    const char *why = NULL;
    while (next_tok(w, &s))
        if (!why)
            why = meta_flag(r, s);
    if (w->n > r->lim.max_tokens)
        return bad(r, skip, "too many tokens");
    if (why)
        return bad(r, skip, why);
    why = o->b64 ? check_b64_key(r, key) : check_key(r, key);
    if (why)
        return bad(r, skip, why);
    o->key_first = 1;
    o->nkeys = 1;
    o->key = key;
    return is_ms ? data_block(r, line_len) : CH_MC_OK;
}

/* The first token of a line longer than max_line without its end yet: is it a get family
 * command (the only lines memcached lets grow past 2048 bytes)? */
static bool starts_get(const char *buf, size_t len)
{
    size_t i = 0;
    while (i < len && buf[i] == ' ')
        i++;
    size_t s = i;
    while (i < len && buf[i] != ' ')
        i++;
    if (i == len)
        return false;
    ch_mc_cmd c = lookup(buf + s, i - s);
    return (ch_mc_cmd_props(c) & CH_MC_P_GET) != 0;
}

/* The other tokens of a refused or unknown command, recorded unchecked; a trailing "noreply"
 * is still reported (verbosity and flush_all take one). */
static ch_mc_status parse_other(preq *r, walk *w)
{
    ch_mc_span s, last = {0, 0};
    size_t k = 0;
    while (next_tok(w, &s)) {
        last = s;
        k++;
    }
    if (k > 0 && span_is(r->buf, last, "noreply"))
        r->out->noreply = last;
    return CH_MC_OK;
}

static ch_mc_status parse_req(preq *r)
{
    const char *buf = r->buf;
    const size_t len = r->len;
    const size_t max_line = r->lim.max_line, max_get = r->lim.max_get_line;
    ch_mc_request *o = r->out;
    if (len == 0) {
        r->need = 1;
        return CH_MC_INCOMPLETE;
    }
    const char *nl = memchr(buf, '\n', len < max_line ? len : max_line);
    if (!nl) {
        if (len < max_line) {
            r->need = len + 1;
            return CH_MC_INCOMPLETE;
        }
        if (!starts_get(buf, max_line))
            return fail(CH_MC_CLOSE, r->err, r->errlen, "line too long");
        const size_t win = len < max_get ? len : max_get;
        nl = memchr(buf + max_line, '\n', win - max_line);
        if (!nl) {
            if (len >= max_get)
                return fail(CH_MC_CLOSE, r->err, r->errlen, "line too long");
            r->need = len + 1;
            return CH_MC_INCOMPLETE;
        }
    }
    const size_t lf = (size_t)(nl - buf);
    const size_t line_len = lf + 1;
    const size_t end = lf > 0 && buf[lf - 1] == '\r' ? lf - 1 : lf;
    o->line = span(0, end);
    o->line_len = (uint32_t)line_len;

    walk w = {buf, 0, end, o, 0};
    ch_mc_span name;
    ch_mc_status st;
    if (!next_tok(&w, &name)) {
        o->cmd = CH_MC_CMD_UNKNOWN; /* an empty line: memcached answers ERROR */
        st = CH_MC_OK;
    } else {
        o->cmd = lookup(buf + name.off, name.len);
        const unsigned props = ch_mc_cmd_props(o->cmd);
        if (props & CH_MC_P_GET)
            st = parse_get(r, &w, line_len);
        else if (props & CH_MC_P_META)
            st = parse_meta(r, &w, line_len);
        else if (props & CH_MC_P_STORAGE)
            st = parse_storage(r, &w, line_len);
        else if (props & CH_MC_P_NOREPLY)
            st = parse_keyed(r, &w, line_len);
        else if (props & CH_MC_P_LOCAL)
            st = rest_toks(&w) == 0 ? CH_MC_OK : bad(r, line_len, BAD_FORMAT);
        else
            st = parse_other(r, &w);
    }
    if (st == CH_MC_OK) {
        o->ntokens = w.n;
        if (!(ch_mc_cmd_props(o->cmd) & CH_MC_P_STORAGE))
            r->consumed = line_len;
    }
    return st;
}

ch_mc_status ch_mc_parse_request(const char *buf, size_t len, const ch_mc_limits *lim,
                                 ch_mc_request *out, size_t *consumed, size_t *need, char *err,
                                 size_t errlen)
{
    if (err && errlen > 0)
        err[0] = '\0';
    ch_mc_request scratch;
    ch_mc_span *tok = out ? out->tok : NULL;
    size_t cap = out && out->tok ? out->tok_cap : 0;
    if (!out)
        out = &scratch;
    memset(out, 0, sizeof *out);
    out->tok = tok;
    out->tok_cap = cap;
    preq r = {buf, buf ? len : 0, effective(lim), out, 0, 0, err, errlen};
    ch_mc_status st = parse_req(&r);
    if (st != CH_MC_OK) {
        memset(out, 0, sizeof *out);
        out->tok = tok;
        out->tok_cap = cap;
    }
    if (st == CH_MC_CLOSE || st == CH_MC_INCOMPLETE)
        r.consumed = 0;
    if (st != CH_MC_INCOMPLETE)
        r.need = 0;
    if (consumed)
        *consumed = r.consumed;
    if (need)
        *need = r.need;
    return st;
}

/* ---- replies ------------------------------------------------------------------------------- */

typedef struct prep {
    const char *buf;
    size_t len;
    ch_mc_limits lim;
    size_t need;
    char *err;
    size_t errlen;
} prep;

/* Finds the reply line that starts at pos: 1 with *cr the index of its "\r" (the line is
 * buf[pos..*cr)), 0 when incomplete (need set: at least pos + owed), or a CH_MC_CLOSE. */
static int reply_line(prep *p, size_t pos, size_t owed, size_t *cr)
{
    const size_t avail = p->len - pos;
    const size_t win = avail < p->lim.max_line ? avail : p->lim.max_line;
    const char *nl = memchr(p->buf + pos, '\n', win);
    if (!nl) {
        if (avail >= p->lim.max_line)
            return fail(CH_MC_CLOSE, p->err, p->errlen, "reply line too long");
        size_t least = sat_add(pos, owed);
        p->need = least > p->len ? least : p->len + 1;
        return 0;
    }
    const size_t lf = (size_t)(nl - p->buf);
    if (lf == pos || p->buf[lf - 1] != '\r' || memchr(p->buf + pos, '\r', lf - 1 - pos))
        return fail(CH_MC_CLOSE, p->err, p->errlen, "reply line not ended by CRLF");
    *cr = lf - 1;
    return 1;
}

/* Does buf[pos..cr) equal lit, or start with lit followed by a space (when rest)? */
static bool line_is(const char *buf, size_t pos, size_t cr, const char *lit)
{
    size_t n = strlen(lit);
    return cr - pos == n && memcmp(buf + pos, lit, n) == 0;
}

static bool line_starts(const char *buf, size_t pos, size_t cr, const char *word)
{
    size_t n = strlen(word);
    return cr - pos >= n && memcmp(buf + pos, word, n) == 0 &&
           (cr - pos == n || buf[pos + n] == ' ');
}

/* ERROR [text], CLIENT_ERROR [msg], SERVER_ERROR [msg]: the code, or NONE. */
static ch_mc_code error_line(const char *buf, size_t pos, size_t cr, ch_mc_span *text)
{
    static const struct {
        const char *w;
        ch_mc_code c;
    } E[] = {{"ERROR", CH_MC_R_ERROR},
             {"CLIENT_ERROR", CH_MC_R_CLIENT_ERROR},
             {"SERVER_ERROR", CH_MC_R_SERVER_ERROR}};
    for (size_t i = 0; i < sizeof E / sizeof E[0]; i++) {
        if (line_starts(buf, pos, cr, E[i].w)) {
            size_t t = pos + strlen(E[i].w);
            if (t < cr)
                t++;
            *text = span(t, cr - t);
            return E[i].c;
        }
    }
    return CH_MC_R_NONE;
}

/* A token walk over buf[pos..cr) for replies, without storing. */
static bool rtok(const char *buf, size_t *pos, size_t cr, ch_mc_span *s)
{
    while (*pos < cr && buf[*pos] == ' ')
        (*pos)++;
    if (*pos == cr)
        return false;
    size_t start = *pos;
    while (*pos < cr && buf[*pos] != ' ')
        (*pos)++;
    *s = span(start, *pos - start);
    return true;
}

/* "VALUE <key> <flags> <bytes>[ <cas>]" at buf[pos..cr): fills v (block/data not yet). */
static bool value_line(const char *buf, size_t pos, size_t cr, size_t max_key, int want_cas,
                       ch_mc_value *v, uint64_t *bytes)
{
    ch_mc_span t[6];
    size_t n = 0, q = pos;
    ch_mc_span s;
    while (n < 6 && rtok(buf, &q, cr, &s))
        t[n++] = s;
    if (n < 4 || n > 5 || !span_is(buf, t[0], "VALUE") || buf[pos] != 'V')
        return false;
    if (want_cas >= 0 && (n == 5) != (want_cas == 1))
        return false;
    if (t[1].len == 0 || t[1].len > max_key || !key_bytes_ok(buf + t[1].off, t[1].len))
        return false;
    uint64_t f;
    if (parse_u64(buf + t[2].off, t[2].len, UINT32_MAX, &f) != N_OK)
        return false;
    if (parse_u64(buf + t[3].off, t[3].len, UINT64_MAX, bytes) != N_OK)
        return false;
    memset(v, 0, sizeof *v);
    v->key = t[1];
    v->flags = (uint32_t)f;
    if (n == 5) {
        if (parse_u64(buf + t[4].off, t[4].len, UINT64_MAX, &v->cas) != N_OK)
            return false;
        v->has_cas = true;
    }
    return true;
}

static ch_mc_class class_of(ch_mc_cmd cmd, ch_mc_code code)
{
    switch (code) {
    case CH_MC_R_VALUES:
    case CH_MC_R_VA:
    case CH_MC_R_ME:
        return CH_MC_C_HIT;
    case CH_MC_R_HD:
        return cmd == CH_MC_CMD_MG ? CH_MC_C_HIT : CH_MC_C_OK;
    case CH_MC_R_END:
    case CH_MC_R_EN:
    case CH_MC_R_NF:
    case CH_MC_R_NOT_FOUND:
        return CH_MC_C_MISS;
    case CH_MC_R_NOT_STORED:
    case CH_MC_R_EXISTS:
    case CH_MC_R_NS:
    case CH_MC_R_EX:
        return CH_MC_C_NOT_STORED;
    case CH_MC_R_NUMBER:
        return CH_MC_C_INTEGER;
    case CH_MC_R_ERROR:
    case CH_MC_R_CLIENT_ERROR:
    case CH_MC_R_SERVER_ERROR:
        return CH_MC_C_ERROR;
    default:
        return CH_MC_C_OK;
    }
}

/* A data block of b bytes at d (after a line), followed by "\r\n", then owed more bytes. Returns
 * 1 complete (*end after its CRLF), 0 incomplete (need set), or a CH_MC_CLOSE. */
static int reply_data(prep *p, size_t d, uint64_t b, size_t owed, size_t *end)
{
    if (b > p->lim.max_item)
        return fail(CH_MC_CLOSE, p->err, p->errlen, "value too large");
    const size_t cr = d + (size_t)b;
    if (p->len > cr && p->buf[cr] != '\r')
        return fail(CH_MC_CLOSE, p->err, p->errlen, "bad data chunk");
    if (p->len < cr + 2) {
        p->need = sat_add(cr + 2, owed);
        return 0;
    }
    if (p->buf[cr + 1] != '\n')
        return fail(CH_MC_CLOSE, p->err, p->errlen, "bad data chunk");
    *end = cr + 2;
    return 1;
}

#define STEP(x)                                                                                    \
    do {                                                                                           \
        int rc_ = (x);                                                                             \
        if (rc_ == 0)                                                                              \
            return CH_MC_INCOMPLETE;                                                               \
        if (rc_ < 0)                                                                               \
            return CH_MC_CLOSE;                                                                    \
    } while (0)

static ch_mc_status scan_get(prep *p, ch_mc_cmd cmd, ch_mc_reply *o)
{
    const char *buf = p->buf;
    const int want_cas = (ch_mc_cmd_props(cmd) & CH_MC_P_CAS_VALUE) ? 1 : 0;
    size_t pos = 0, cr, count = 0;
    for (;;) {
        STEP(reply_line(p, pos, 5, &cr));
        if (count == 0)
            o->line = span(pos, cr - pos);
        if (line_is(buf, pos, cr, "END")) {
            o->code = count ? CH_MC_R_VALUES : CH_MC_R_END;
            o->integer = count;
            o->len = cr + 2;
            return CH_MC_OK;
        }
        ch_mc_code ec = error_line(buf, pos, cr, &o->text);
        if (ec != CH_MC_R_NONE) {
            o->code = ec;
            o->line = span(pos, cr - pos);
            o->integer = count;
            o->len = cr + 2;
            return CH_MC_OK;
        }
        ch_mc_value v;
        uint64_t b;
        if (!value_line(buf, pos, cr, p->lim.max_key, want_cas, &v, &b))
            return fail(CH_MC_CLOSE, p->err, p->errlen, "unexpected reply line to %s",
                        ch_mc_cmd_name(cmd));
        size_t end;
        STEP(reply_data(p, cr + 2, b, 5, &end));
        if (end > UINT32_MAX - 5)
            return fail(CH_MC_CLOSE, p->err, p->errlen, "reply too large");
        pos = end;
        count++;
    }
}

static ch_mc_status scan_one(prep *p, ch_mc_cmd cmd, ch_mc_reply *o)
{
    const char *buf = p->buf;
    size_t cr;
    STEP(reply_line(p, 0, 0, &cr));
    o->line = span(0, cr);
    o->len = cr + 2;
    ch_mc_code ec = error_line(buf, 0, cr, &o->text);
    if (ec != CH_MC_R_NONE) {
        o->code = ec;
        return CH_MC_OK;
    }
    static const struct {
        const char *w;
        ch_mc_code c;
    } W[] = {{"STORED", CH_MC_R_STORED},   {"NOT_STORED", CH_MC_R_NOT_STORED},
             {"EXISTS", CH_MC_R_EXISTS},   {"NOT_FOUND", CH_MC_R_NOT_FOUND},
             {"DELETED", CH_MC_R_DELETED}, {"TOUCHED", CH_MC_R_TOUCHED},
             {"OK", CH_MC_R_OK}};
    ch_mc_code code = CH_MC_R_NONE;
    for (size_t i = 0; i < sizeof W / sizeof W[0]; i++)
        if (line_is(buf, 0, cr, W[i].w))
            code = W[i].c;
    bool ok;
    switch (cmd) {
    case CH_MC_CMD_SET:
    case CH_MC_CMD_ADD:
    case CH_MC_CMD_REPLACE:
    case CH_MC_CMD_APPEND:
    case CH_MC_CMD_PREPEND:
    case CH_MC_CMD_CAS:
        ok = code == CH_MC_R_STORED || code == CH_MC_R_NOT_STORED || code == CH_MC_R_EXISTS ||
             code == CH_MC_R_NOT_FOUND;
        break;
    case CH_MC_CMD_INCR:
    case CH_MC_CMD_DECR:
        ok = code == CH_MC_R_NOT_FOUND;
        if (!ok && parse_u64(buf, cr, UINT64_MAX, &o->integer) == N_OK) {
            code = CH_MC_R_NUMBER;
            ok = true;
        }
        break;
    case CH_MC_CMD_DELETE:
        ok = code == CH_MC_R_DELETED || code == CH_MC_R_NOT_FOUND;
        break;
    case CH_MC_CMD_TOUCH:
        ok = code == CH_MC_R_TOUCHED || code == CH_MC_R_NOT_FOUND;
        break;
    case CH_MC_CMD_VERSION:
        ok = line_starts(buf, 0, cr, "VERSION");
        if (ok) {
            code = CH_MC_R_VERSION;
            size_t t = cr > 7 ? 8 : 7;
            o->text = span(t, cr - t);
        }
        break;
    case CH_MC_CMD_VERBOSITY:
    case CH_MC_CMD_FLUSH_ALL:
        ok = code == CH_MC_R_OK;
        break;
    default:
        ok = false;
        break;
    }
    if (!ok)
        return fail(CH_MC_CLOSE, p->err, p->errlen, "unexpected reply line to %s",
                    ch_mc_cmd_name(cmd));
    o->code = code;
    return CH_MC_OK;
}

static ch_mc_status scan_meta(prep *p, ch_mc_cmd cmd, ch_mc_reply *o)
{
    const char *buf = p->buf;
    size_t cr;
    STEP(reply_line(p, 0, 0, &cr));
    o->line = span(0, cr);
    o->len = cr + 2;
    ch_mc_code code = error_line(buf, 0, cr, &o->text);
    if (code != CH_MC_R_NONE) {
        o->code = code;
        return CH_MC_OK;
    }
    static const struct {
        const char *w;
        ch_mc_code c;
    } M[] = {{"VA", CH_MC_R_VA}, {"HD", CH_MC_R_HD}, {"EN", CH_MC_R_EN}, {"NF", CH_MC_R_NF},
             {"NS", CH_MC_R_NS}, {"EX", CH_MC_R_EX}, {"MN", CH_MC_R_MN}, {"ME", CH_MC_R_ME}};
    for (size_t i = 0; i < sizeof M / sizeof M[0]; i++)
        if (line_starts(buf, 0, cr, M[i].w))
            code = M[i].c;
    const char *allowed;
    switch (cmd) {
    case CH_MC_CMD_MG:
        allowed = "VA HD EN";
        break;
    case CH_MC_CMD_MS:
        allowed = "HD NS EX NF";
        break;
    case CH_MC_CMD_MD:
        allowed = "HD NF EX";
        break;
    case CH_MC_CMD_MA:
        allowed = "VA HD NF NS EX";
        break;
    case CH_MC_CMD_MN:
        allowed = "MN";
        break;
    default: /* me */
        allowed = "ME EN";
        break;
    }
    if (code == CH_MC_R_NONE || !strstr(allowed, (char[3]){buf[0], buf[1], '\0'}))
        return fail(CH_MC_CLOSE, p->err, p->errlen, "unexpected reply line to %s",
                    ch_mc_cmd_name(cmd));
    o->code = code;
    if (code == CH_MC_R_ME) {
        size_t q = 2;
        ch_mc_span key;
        if (!rtok(buf, &q, cr, &key))
            return fail(CH_MC_CLOSE, p->err, p->errlen, "ME reply without a key");
    }
    if (code == CH_MC_R_VA) {
        size_t q = 2;
        ch_mc_span sz;
        uint64_t b;
        if (!rtok(buf, &q, cr, &sz) || parse_u64(buf + sz.off, sz.len, UINT64_MAX, &b) != N_OK)
            return fail(CH_MC_CLOSE, p->err, p->errlen, "VA reply without a size");
        size_t end;
        STEP(reply_data(p, cr + 2, b, 0, &end));
        o->data = span(cr + 2, (size_t)b);
        o->integer = b;
        o->len = end;
    }
    return CH_MC_OK;
}

/* A reply scan's outcome st for cmd, told the caller: r (classified) into *out, p's need into
 * *need, a reason into err for any CH_MC_CLOSE. */
/* "lru_crawler metadump all" (the proxy's rejoin walk): "key=..." lines, then END (code END,
 * integer: the lines); or one line: an error, or BUSY (the crawler runs already: a
 * SERVER_ERROR, so the walk is tried again later). Cost: O(reply) per call; a dump that arrives
 * in n reads is rescanned n times. */
static ch_mc_status scan_dump(prep *p, ch_mc_reply *o)
{
    const char *buf = p->buf;
    size_t pos = 0, cr;
    for (;;) {
        /* memcached ends the key lines with a bare "\n" (crawler.c), the rest with "\r\n". */
        const size_t avail = p->len - pos;
        const size_t win = avail < p->lim.max_line ? avail : p->lim.max_line;
        const char *nl = memchr(buf + pos, '\n', win);
        if (nl == NULL) {
            if (avail >= p->lim.max_line)
                return fail(CH_MC_CLOSE, p->err, p->errlen, "reply line too long");
            p->need = sat_add(pos, 5) > p->len ? sat_add(pos, 5) : p->len + 1;
            return CH_MC_INCOMPLETE;
        }
        const size_t lf = (size_t)(nl - buf);
        cr = lf > pos && buf[lf - 1] == '\r' ? lf - 1 : lf;
        if (cr - pos >= 4 && memcmp(buf + pos, "key=", 4) == 0) {
            o->integer++;
            pos = lf + 1;
            continue;
        }
        if (cr == lf)
            return fail(CH_MC_CLOSE, p->err, p->errlen, "reply line not ended by CRLF");
        if (line_is(buf, pos, cr, "END")) {
            o->code = CH_MC_R_END;
            o->len = cr + 2;
            return CH_MC_OK;
        }
        if (pos == 0) {
            o->line = span(0, cr);
            o->len = cr + 2;
            o->code = error_line(buf, 0, cr, &o->text);
            if (o->code == CH_MC_R_NONE && line_starts(buf, 0, cr, "BUSY")) {
                o->code = CH_MC_R_SERVER_ERROR;
                o->text = span(0, cr);
            }
            if (o->code != CH_MC_R_NONE)
                return CH_MC_OK;
        }
        return fail(CH_MC_CLOSE, p->err, p->errlen, "unexpected line in a metadump");
    }
}

static ch_mc_status scan_done(ch_mc_status st, ch_mc_cmd cmd, ch_mc_reply *r, const prep *p,
                              ch_mc_reply *out, size_t *need, char *err, size_t errlen)
{
    if (st == CH_MC_OK && r->len > UINT32_MAX)
        st = fail(CH_MC_CLOSE, err, errlen, "reply too large");
    if (st == CH_MC_OK)
        r->cls = class_of(cmd, r->code);
    else
        memset(r, 0, sizeof *r);
    if (st == CH_MC_CLOSE && err && errlen > 0 && err[0] == '\0')
        fail(st, err, errlen, "bad reply");
    if (out)
        *out = *r;
    if (need)
        *need = st == CH_MC_INCOMPLETE ? p->need : 0;
    return st;
}

ch_mc_status ch_mc_scan_reply(const char *buf, size_t len, ch_mc_cmd cmd, const ch_mc_limits *lim,
                              ch_mc_reply *out, size_t *need, char *err, size_t errlen)
{
    if (err && errlen > 0)
        err[0] = '\0';
    ch_mc_reply r;
    memset(&r, 0, sizeof r);
    prep p = {buf, buf ? len : 0, effective(lim), 0, err, errlen};
    const unsigned props = ch_mc_cmd_props(cmd);
    ch_mc_status st;
    if (p.len == 0) {
        p.need = 4; /* the shortest reply: "HD\r\n", "EN\r\n", "OK\r\n", "0\r\n"? */
        if (cmd == CH_MC_CMD_INCR || cmd == CH_MC_CMD_DECR)
            p.need = 3;
        st = CH_MC_INCOMPLETE;
    } else if (props & CH_MC_P_GET)
        st = scan_get(&p, cmd, &r);
    else if (props & CH_MC_P_META)
        st = scan_meta(&p, cmd, &r);
    else if (cmd == CH_MC_CMD_LRU_CRAWLER)
        st = scan_dump(&p, &r);
    else if (cmd == CH_MC_CMD_UNKNOWN || cmd >= CH_MC_CMD_COUNT || cmd == CH_MC_CMD_QUIT ||
             ((props & CH_MC_P_REFUSED) && cmd != CH_MC_CMD_VERBOSITY &&
              cmd != CH_MC_CMD_FLUSH_ALL))
        st = fail(CH_MC_CLOSE, err, errlen, "no reply expected to %s",
                  cmd == CH_MC_CMD_UNKNOWN || cmd >= CH_MC_CMD_COUNT ? "an unknown command"
                                                                     : ch_mc_cmd_name(cmd));
    else
        st = scan_one(&p, cmd, &r);
    return scan_done(st, cmd, &r, &p, out, need, err, errlen);
}

/* ch_mc_scan_multi_part's scan (mc.h). */
static ch_mc_status scan_part(prep *p, ch_mc_cmd cmd, const char *key, size_t klen,
                              ch_mc_reply *o)
{
    const char *buf = p->buf;
    size_t cr;
    STEP(reply_line(p, 0, 5, &cr));
    o->line = span(0, cr);
    if (line_is(buf, 0, cr, "END")) {
        o->code = CH_MC_R_END;
        return CH_MC_OK;
    }
    ch_mc_code ec = error_line(buf, 0, cr, &o->text);
    if (ec != CH_MC_R_NONE) {
        o->code = ec;
        return CH_MC_OK;
    }
    const int want_cas = (ch_mc_cmd_props(cmd) & CH_MC_P_CAS_VALUE) ? 1 : 0;
    ch_mc_value v;
    uint64_t b;
    if (!value_line(buf, 0, cr, p->lim.max_key, want_cas, &v, &b))
        return fail(CH_MC_CLOSE, p->err, p->errlen, "unexpected reply line to %s",
                    ch_mc_cmd_name(cmd));
    if (v.key.len != klen || memcmp(buf + v.key.off, key, klen) != 0) {
        o->code = CH_MC_R_END; /* the block of a later key: this one missed */
        return CH_MC_OK;
    }
    size_t end;
    STEP(reply_data(p, cr + 2, b, 5, &end));
    o->code = CH_MC_R_VALUES;
    o->integer = 1;
    o->len = end;
    return CH_MC_OK;
}

ch_mc_status ch_mc_scan_multi_part(const char *buf, size_t len, ch_mc_cmd cmd, const char *key,
                                   size_t klen, const ch_mc_limits *lim, ch_mc_reply *out,
                                   size_t *need, char *err, size_t errlen)
{
    if (err && errlen > 0)
        err[0] = '\0';
    ch_mc_reply r;
    memset(&r, 0, sizeof r);
    prep p = {buf, buf ? len : 0, effective(lim), 0, err, errlen};
    ch_mc_status st;
    if (!(ch_mc_cmd_props(cmd) & CH_MC_P_GET) || !key || klen == 0)
        st = fail(CH_MC_CLOSE, err, errlen, "no multi-key reply to %s",
                  cmd < CH_MC_CMD_COUNT ? ch_mc_cmd_name(cmd) : "an unknown command");
    else if (p.len == 0) {
        p.need = 5; /* "END\r\n" */
        st = CH_MC_INCOMPLETE;
    } else
        st = scan_part(&p, cmd, key, klen, &r);
    return scan_done(st, cmd, &r, &p, out, need, err, errlen);
}

bool ch_mc_quiet_suppresses(ch_mc_cmd cmd, const ch_mc_reply *r)
{
    if (!r)
        return false;
    switch (cmd) {
    case CH_MC_CMD_MG:
        return r->code == CH_MC_R_EN;
    case CH_MC_CMD_MS:
    case CH_MC_CMD_MD:
        return r->code == CH_MC_R_HD;
    case CH_MC_CMD_MA:
        return r->code == CH_MC_R_HD || r->code == CH_MC_R_VA;
    default:
        return false;
    }
}

bool ch_mc_value_next(const char *buf, size_t len, size_t *pos, ch_mc_value *v)
{
    if (!buf || !pos || !v || *pos >= len || len > UINT32_MAX)
        return false;
    const size_t p = *pos;
    const char *nl = memchr(buf + p, '\n', len - p);
    if (!nl)
        return false;
    const size_t lf = (size_t)(nl - buf);
    if (lf == p || buf[lf - 1] != '\r')
        return false;
    uint64_t b;
    ch_mc_value val;
    if (!value_line(buf, p, lf - 1, MC_KEY_CAP, -1, &val, &b))
        return false;
    if (b > len || lf + 1 + b + 2 > len)
        return false;
    const size_t d = lf + 1, cr = d + (size_t)b;
    if (buf[cr] != '\r' || buf[cr + 1] != '\n')
        return false;
    val.data = span(d, (size_t)b);
    val.block = span(p, cr + 2 - p);
    *v = val;
    *pos = cr + 2;
    return true;
}

/* ---- keys ---------------------------------------------------------------------------------- */

bool ch_mc_key_plain(const char *key, size_t len)
{
    return key && len > 0 && key_bytes_ok(key, len);
}

static void put(char *dst, size_t cap, size_t *n, const char *src, size_t k);

size_t ch_mc_b64_encode(const void *src, size_t srclen, char *dst, size_t dstcap)
{
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *s = src;
    if (!s)
        srclen = 0;
    if (!dst)
        dstcap = 0;
    size_t n = 0;
    for (size_t i = 0; i < srclen; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16;
        if (i + 1 < srclen)
            v |= (uint32_t)s[i + 1] << 8;
        if (i + 2 < srclen)
            v |= s[i + 2];
        const char q[4] = {tbl[v >> 18 & 63], tbl[v >> 12 & 63],
                           i + 1 < srclen ? tbl[v >> 6 & 63] : '=', i + 2 < srclen ? tbl[v & 63] : '='};
        put(dst, dstcap, &n, q, 4);
    }
    return n;
}

/* ---- copying an item ------------------------------------------------------------------------- */

static int hex_digit(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

long ch_mc_url_decode(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++, o++) {
        if (o == cap)
            return -1;
        if (s[i] != '%') {
            out[o] = s[i];
            continue;
        }
        int hi = i + 2 < n ? hex_digit(s[i + 1]) : -1, lo = i + 2 < n ? hex_digit(s[i + 2]) : -1;
        if (hi < 0 || lo < 0)
            return -1;
        out[o] = (char)(hi << 4 | lo);
        i += 2;
    }
    return o > 0 ? (long)o : -1;
}

size_t ch_mc_copy_fetch(const char *key, size_t klen, char *dst, size_t dstcap)
{
    if (!key || klen == 0)
        return 0;
    if (!dst)
        dstcap = 0;
    size_t n = 0;
    put(dst, dstcap, &n, "mg ", 3);
    if (ch_mc_key_plain(key, klen)) {
        put(dst, dstcap, &n, key, klen);
    } else {
        size_t b = ch_mc_b64_encode(key, klen, n < dstcap ? dst + n : NULL,
                                    n < dstcap ? dstcap - n : 0);
        n += b;
        put(dst, dstcap, &n, " b", 2);
    }
    put(dst, dstcap, &n, " v t f\r\n", 8);
    return n;
}

int ch_mc_copy_read(const char *buf, size_t len, ch_mc_copy *out)
{
    if (!buf || !out)
        return -1;
    /* The widest limits: the reply was framed already, under its reader's own. */
    ch_mc_limits lim;
    ch_mc_limits_init(&lim);
    lim.max_item = lim.max_swallow = lim.max_line = lim.max_get_line = SIZE_MAX;
    ch_mc_reply r;
    if (ch_mc_scan_reply(buf, len, CH_MC_CMD_MG, &lim, &r, NULL, NULL, 0) != CH_MC_OK ||
        r.len != len)
        return -1;
    if (r.code == CH_MC_R_EN)
        return 0;
    if (r.code != CH_MC_R_VA)
        return -1;
    /* "VA <size> <flag>*": the first t and the first f token count. */
    const size_t cr = (size_t)r.line.off + r.line.len;
    size_t q = (size_t)r.line.off + 2;
    ch_mc_span tok;
    bool have_t = false, have_f = false;
    int64_t ttl = 0;
    uint64_t flags = 0;
    rtok(buf, &q, cr, &tok); /* the size: checked by the scan */
    while (rtok(buf, &q, cr, &tok)) {
        const char *t = buf + tok.off;
        if (t[0] == 't' && !have_t) {
            if (!parse_i64(t + 1, tok.len - 1u, &ttl))
                return -1;
            have_t = true;
        } else if (t[0] == 'f' && !have_f) {
            if (parse_u64(t + 1, tok.len - 1u, UINT32_MAX, &flags) != N_OK)
                return -1;
            have_f = true;
        }
    }
    if (!have_t || !have_f)
        return -1;
    out->data = r.data;
    out->ttl = ttl;
    out->flags = (uint32_t)flags;
    return 1;
}

bool ch_mc_copy_exptime(int64_t ttl, int64_t now_unix, int64_t *exptime)
{
    if (!exptime || ttl == 0 || ttl < -1)
        return false;
    if (ttl < 0)
        *exptime = 0;
    else if (ttl <= CH_MC_RELATIVE_MAX)
        *exptime = ttl;
    else /* ttl > CH_MC_RELATIVE_MAX, so the subtraction cannot overflow, nor the sum */
        *exptime = now_unix > CH_MC_EXPTIME_MAX - ttl ? CH_MC_EXPTIME_MAX : now_unix + ttl;
    return true;
}

/* ---- rebuilding lines ---------------------------------------------------------------------- */

static void put(char *dst, size_t cap, size_t *n, const char *src, size_t k)
{
    if (*n < cap)
        memcpy(dst + *n, src, k <= cap - *n ? k : cap - *n);
    *n += k;
}

static bool same(ch_mc_span a, ch_mc_span b)
{
    return b.len > 0 && a.off == b.off && a.len == b.len;
}

size_t ch_mc_line_strip(const char *buf, const ch_mc_request *r, char *dst, size_t dstcap)
{
    if (!buf || !r || (r->ntokens > 0 && !r->tok) || r->ntokens > r->tok_cap)
        return 0;
    if (!dst)
        dstcap = 0;
    /* Meta flags start after the key (and ms's datalen); every "q" among them goes. */
    const size_t flags_from = !(ch_mc_cmd_props(r->cmd) & CH_MC_P_META) ? SIZE_MAX
                              : r->cmd == CH_MC_CMD_MS                 ? 3
                                                                       : 2;
    size_t n = 0;
    bool first = true;
    for (size_t i = 0; i < r->ntokens; i++) {
        const ch_mc_span t = r->tok[i];
        if (same(t, r->noreply) || (i >= flags_from && t.len == 1 && buf[t.off] == 'q'))
            continue;
        if (!first)
            put(dst, dstcap, &n, " ", 1);
        put(dst, dstcap, &n, buf + t.off, t.len);
        first = false;
    }
    put(dst, dstcap, &n, "\r\n", 2);
    return n;
}

size_t ch_mc_get_line_subset(const char *buf, const ch_mc_request *r, const uint32_t *keys,
                             size_t nkeys, char *dst, size_t dstcap)
{
    if (!buf || !r || !r->tok || !keys || nkeys == 0 || r->ntokens > r->tok_cap ||
        !(ch_mc_cmd_props(r->cmd) & CH_MC_P_GET) || r->ntokens < (size_t)r->key_first + r->nkeys)
        return 0;
    for (size_t i = 0; i < nkeys; i++)
        if (keys[i] >= r->nkeys)
            return 0;
    if (!dst)
        dstcap = 0;
    size_t n = 0;
    for (size_t i = 0; i < r->key_first; i++) {
        put(dst, dstcap, &n, buf + r->tok[i].off, r->tok[i].len);
        put(dst, dstcap, &n, " ", 1);
    }
    for (size_t i = 0; i < nkeys; i++) {
        const ch_mc_span t = r->tok[r->key_first + keys[i]];
        if (i > 0)
            put(dst, dstcap, &n, " ", 1);
        put(dst, dstcap, &n, buf + t.off, t.len);
    }
    put(dst, dstcap, &n, "\r\n", 2);
    return n;
}

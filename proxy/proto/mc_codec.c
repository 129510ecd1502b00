/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mc_codec.c — px_codec_memcache: memcached's text and meta protocols on the codec seam, over
 * the pure parser mc.c. What the proxy does with each command:
 *   - get gets gat gats: one key is forwarded whole; several are split by server and answered as
 *     one reply, VALUE blocks in the client's key order, one END (PX_MERGE_CONCAT);
 *   - set add replace append prepend cas, incr decr, delete, touch, mg ms md ma me: forwarded to
 *     the key's server; noreply and the meta q flag are stripped towards the backend (every
 *     request sent gets exactly one reply) and handled here: a noreply request's reply is
 *     swallowed, a quiet one's is dropped when memcached would not have sent it;
 *   - version, quit, mn: answered by the proxy (mn in order, after every earlier reply);
 *   - stats: the proxy's own (its INFO fields as STAT lines); stats with an argument (a
 *     server's slabs, items, settings), flush_all, verbosity and the other admin commands:
 *     CLIENT_ERROR, connection kept;
 *     an unknown command: ERROR, as memcached.
 * Keys route by their bytes as nutcracker routes them; a base64 meta key (b flag) by its decoded
 * bytes, so "get foo" and "mg Zm9v b v" reach the same server.
 */
#include "codec.h"
#include "mc.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* px_msg.proto: the command, what to strip, where the data block is. */
enum { P_CMD = 0, P_BITS = 1, P_DATA_OFF = 4, P_DATA_LEN = 8 };
enum { B_STRIP = 1u << 0, B_QUIET = 1u << 1 };

#define CMD(id, class_, retry_)                                                                  \
    [CH_MC_CMD_##id] = {.cls = (class_), .merge = PX_MERGE_ONE, .retry = (retry_),               \
                        .local = CH_MC_CMD_##id}
static const px_cmd commands[CH_MC_CMD_COUNT] = {
    CMD(GET, PX_CLASS_READ, true),      CMD(GETS, PX_CLASS_READ, true),
    CMD(GAT, PX_CLASS_READ, true),      CMD(GATS, PX_CLASS_READ, true),
    CMD(SET, PX_CLASS_WRITE, false),    CMD(ADD, PX_CLASS_WRITE, false),
    CMD(REPLACE, PX_CLASS_WRITE, false), CMD(APPEND, PX_CLASS_WRITE, false),
    CMD(PREPEND, PX_CLASS_WRITE, false), CMD(CAS, PX_CLASS_WRITE, false),
    CMD(INCR, PX_CLASS_WRITE, false),   CMD(DECR, PX_CLASS_WRITE, false),
    CMD(DELETE, PX_CLASS_WRITE, false), CMD(TOUCH, PX_CLASS_WRITE, false),
    CMD(VERSION, PX_CLASS_LOCAL, true), CMD(QUIT, PX_CLASS_LOCAL, true),
    CMD(MG, PX_CLASS_READ, true),       CMD(MS, PX_CLASS_WRITE, false),
    CMD(MD, PX_CLASS_WRITE, false),     CMD(MA, PX_CLASS_WRITE, false),
    CMD(MN, PX_CLASS_LOCAL, true),      CMD(ME, PX_CLASS_READ, true),
    CMD(STATS, PX_CLASS_LOCAL, true), /* without an argument only (mc_parse_request) */
};
#undef CMD
/* get gets gat gats with several keys: split. */
#define MULTI(id) [CH_MC_CMD_##id] = {.cls = PX_CLASS_MULTI, .merge = PX_MERGE_CONCAT, .retry = true, \
                                      .local = CH_MC_CMD_##id}
static const px_cmd multi[CH_MC_CMD_GATS + 1] = {MULTI(GET), MULTI(GETS), MULTI(GAT), MULTI(GATS)};
#undef MULTI
/* A command refused (admin commands) or malformed: answered with its m->reject. */
static const px_cmd refused = {.cls = PX_CLASS_REFUSED, .local = CH_MC_CMD_UNKNOWN};

static ch_mc_cmd msg_cmd(const px_msg *m)
{
    return (ch_mc_cmd)m->proto[P_CMD];
}

static px_span msg_data(const px_msg *m)
{
    px_span d;
    memcpy(&d.off, m->proto + P_DATA_OFF, 4);
    memcpy(&d.len, m->proto + P_DATA_LEN, 4);
    return d;
}

/* ---- limits ------------------------------------------------------------------------------------ */

static void to_mc(const px_limits *l, ch_mc_limits *ml)
{
    ch_mc_limits_init(ml);
    ml->max_key = l->max_key;
    ml->max_item = l->max_value;
    ml->max_line = l->max_line;
    ml->max_keys = l->max_args;
    /* A multiget line, and a data block skipped after a refused storage command, stay within
     * the pool's request limit. */
    if (ml->max_get_line > l->max_request)
        ml->max_get_line = l->max_request;
    ml->max_swallow = l->max_request;
}

static void mc_limits(const ch_conf_pool *pc, px_limits *lim, px_limits *blim)
{
    ch_mc_limits d;
    ch_mc_limits_init(&d);
    size_t max_request = pc->max_request_bytes > 0 ? (size_t)pc->max_request_bytes : 1;
    size_t item = pc->max_item_bytes > 0 ? (size_t)pc->max_item_bytes : d.max_item;
    *lim = (px_limits){.max_request = max_request, .max_args = d.max_keys, .max_value = item,
                       .max_line = d.max_line, .max_key = d.max_key, .max_depth = 1};
    /* Replies: a value the backend holds may be larger than what clients may store through
     * the proxy (another -I, another writer); the parser caps it at 1 GiB. */
    *blim = *lim;
    blim->max_value = (size_t)1 << 30;
    blim->max_request = SIZE_MAX;
}

/* ---- parsing ----------------------------------------------------------------------------------- */

static px_parse mc_parse_request(const px_limits *lim, const char *buf, size_t len, px_msg *m,
                                 size_t *consumed, size_t *need, char *err, size_t errlen)
{
    ch_mc_limits ml;
    to_mc(lim, &ml);
    ch_mc_span stack[64], *tok = stack;
    ch_mc_request r = {.tok = tok, .tok_cap = 64};
    ch_mc_status st = ch_mc_parse_request(buf, len, &ml, &r, consumed, need, err, errlen);
    if (st == CH_MC_OK && r.ntokens > r.tok_cap && r.ntokens <= m->args_cap) {
        /* A long multiget: once more, into an array as large as it needs. */
        size_t n = r.ntokens;
        tok = malloc(n * sizeof(*tok));
        if (tok == NULL) {
            snprintf(err, errlen, "out of memory");
            return PX_PARSE_TOO_BIG;
        }
        r = (ch_mc_request){.tok = tok, .tok_cap = n};
        st = ch_mc_parse_request(buf, len, &ml, &r, consumed, need, err, errlen);
    }
    px_parse out = PX_PARSE_OK;
    m->raw = buf;
    m->len = 0;
    m->cmd = NULL;
    m->nargs = m->nkeys = 0;
    m->flags = 0;
    m->reject[0] = '\0';
    m->reject_server = false;
    memset(m->proto, 0, sizeof(m->proto));
    if (st == CH_MC_INCOMPLETE) {
        out = PX_PARSE_AGAIN;
    } else if (st == CH_MC_CLOSE) {
        out = PX_PARSE_BAD;
    } else if (st == CH_MC_ERROR && *consumed > len) {
        /* Refused, but its data block is still coming: wait for it (within max_swallow, the
         * request limit) so it is skipped whole, as memcached swallows it. */
        *need = *consumed;
        out = PX_PARSE_AGAIN;
    } else if (st == CH_MC_ERROR) {
        m->len = *consumed;
        m->cmd = &refused;
        m->nargs = 1;
        if (m->args_cap >= 1)
            m->args[0] = (px_span){0, 0};
        snprintf(m->reject, sizeof(m->reject), "%s", err);
        /* memcached's own words for it: "SERVER_ERROR object too large for cache" */
        m->reject_server = strncmp(err, "object too large", 16) == 0;
    } else {
        m->len = *consumed;
        m->nargs = r.ntokens > 0 ? r.ntokens : 1;
        m->nkeys = r.nkeys;
        if (m->nargs <= m->args_cap && m->nkeys <= m->keys_cap && r.ntokens <= r.tok_cap) {
            for (size_t i = 0; i < r.ntokens; i++)
                m->args[i] = (px_span){tok[i].off, tok[i].len};
            if (r.ntokens == 0)
                m->args[0] = (px_span){0, 0};
            for (size_t i = 0; i < r.nkeys; i++)
                m->keys[i] = (px_span){tok[r.key_first + i].off, tok[r.key_first + i].len};
        }
        unsigned props = ch_mc_cmd_props(r.cmd);
        m->proto[P_CMD] = (uint8_t)r.cmd;
        if (r.cmd == CH_MC_CMD_UNKNOWN) {
            m->cmd = NULL; /* ERROR */
        } else if (r.cmd == CH_MC_CMD_STATS && r.ntokens == 1) {
            m->cmd = &commands[r.cmd]; /* the proxy's own; mc.c refuses every admin command */
        } else if (props & CH_MC_P_REFUSED) {
            m->cmd = &refused;
            snprintf(m->reject, sizeof(m->reject), "%s is not supported by the proxy",
                     r.cmd == CH_MC_CMD_STATS ? "stats with an argument" : ch_mc_cmd_name(r.cmd));
        } else {
            m->cmd = (props & CH_MC_P_GET) && r.nkeys > 1 ? &multi[r.cmd] : &commands[r.cmd];
        }
        uint8_t bits = 0;
        if (r.noreply.len > 0) {
            m->flags |= PX_MSG_SWALLOW;
            bits |= B_STRIP;
        }
        if (r.quiet.len > 0)
            bits |= B_STRIP | B_QUIET;
        if (r.b64)
            m->flags |= PX_MSG_ENCODED_KEYS;
        if (r.cmd == CH_MC_CMD_GAT || r.cmd == CH_MC_CMD_GATS ||
            (r.cmd == CH_MC_CMD_MG && (r.mflags & CH_MC_FLAG('T')) != 0))
            m->flags |= PX_MSG_TOUCH;
        m->proto[P_BITS] = bits;
        memcpy(m->proto + P_DATA_OFF, &r.data.off, 4);
        memcpy(m->proto + P_DATA_LEN, &r.data.len, 4);
    }
    if (tok != stack)
        free(tok);
    return out;
}

static px_reply_kind kind_of(ch_mc_class c)
{
    switch (c) {
    case CH_MC_C_HIT:
        return PX_REPLY_VALUE;
    case CH_MC_C_MISS:
        return PX_REPLY_MISS;
    case CH_MC_C_INTEGER:
        return PX_REPLY_INTEGER;
    case CH_MC_C_ERROR:
        return PX_REPLY_ERROR;
    default: /* OK, NOT_STORED: normal answers */
        return PX_REPLY_OK;
    }
}

static px_parse mc_scan_reply(const px_limits *lim, uint8_t expect, const char *buf, size_t len,
                              px_reply *r, size_t *consumed, size_t *need, char *err,
                              size_t errlen)
{
    ch_mc_limits ml;
    to_mc(lim, &ml);
    ch_mc_reply rep;
    ch_mc_status st = ch_mc_scan_reply(buf, len, (ch_mc_cmd)expect, &ml, &rep, need, err, errlen);
    if (st == CH_MC_INCOMPLETE)
        return PX_PARSE_AGAIN;
    if (st != CH_MC_OK)
        return PX_PARSE_BAD;
    *consumed = rep.len;
    r->p = buf;
    r->len = rep.len;
    r->kind = kind_of(rep.cls);
    r->integer = (int64_t)rep.integer;
    return PX_PARSE_OK;
}

/* ---- joining ------------------------------------------------------------------------------------ */

/* A get line joined from several is kept to the classic command line's 2048 bytes (memcached
 * reads longer get lines too, but nothing needs them). */
#define MC_JOIN_LINE 2048u

/* A get as a client sent it (one key) or as mc_encode_request wrote a split multiget's part
 * (several): "get", spaces, keys, spaces, "\r\n" or "\n"; its keys are the bytes from the
 * first key to the end of the last. */
static bool mc_join_keys(const char *req, size_t len, uint8_t expect, size_t *off, size_t *klen)
{
    /* get joins get, gets joins gets (mc_join): "get " or "gets " */
    size_t start = expect == CH_MC_CMD_GET ? 4 : expect == CH_MC_CMD_GETS ? 5 : 0;
    if (start == 0 || len < start + 2 || memcmp(req, "gets ", start - 1) != 0 ||
        req[start - 1] != ' ' || req[len - 1] != '\n')
        return false;
    size_t end = req[len - 2] == '\r' ? len - 2 : len - 1;
    while (start < end && req[start] == ' ')
        start++;
    while (end > start && req[end - 1] == ' ')
        end--;
    if (end == start)
        return false;
    *off = start;
    *klen = end - start;
    return true;
}

/* "get k1 .. kn" (its line end dropped) then " <keys>\r\n": never longer than the two requests
 * were, whose second one spent at least "get " and a line end on its keys. The same for gets;
 * a get and a gets do not join (a gets' values carry their CAS). */
static int mc_join(px_buf *out, size_t line, size_t at, size_t *keys, size_t klen)
{
    if ((out->p[line + 3] == 's') != (out->p[at + 3] == 's'))
        return -1;
    size_t head = at - 1 - (at - line >= 2 && out->p[at - 2] == '\r');
    if (head - line + 1 + klen + 2 > MC_JOIN_LINE)
        return -1;
    memmove(out->p + head + 1, out->p + *keys, klen);
    out->p[head] = ' ';
    memcpy(out->p + head + 1 + klen, "\r\n", 2);
    out->len = head + 1 + klen + 2;
    *keys = head + 1;
    return 0;
}

static const char MC_END[] = "END\r\n";
static const char MC_OOM[] = "SERVER_ERROR out of memory\r\n";

/* The VALUE blocks of its keys found, one after another in the stream (memcached answers in
 * key order), then the END a get's reply ends with, built in scratch. */
static px_parse mc_scan_joined(const px_limits *lim, uint8_t expect, const char *keys,
                               size_t klen, const char *buf, size_t len, px_buf *scratch,
                               px_reply *r, size_t *consumed, size_t *need, char *err,
                               size_t errlen)
{
    ch_mc_limits ml;
    to_mc(lim, &ml);
    size_t pos = 0, hits = 0;
    for (size_t i = 0; i < klen;) {
        while (i < klen && keys[i] == ' ')
            i++;
        size_t k = i;
        while (i < klen && keys[i] != ' ')
            i++;
        if (i == k)
            break;
        ch_mc_reply rep;
        size_t n = 0;
        ch_mc_status st = ch_mc_scan_multi_part(buf + pos, len - pos, (ch_mc_cmd)expect, keys + k,
                                                i - k, &ml, &rep, &n, err, errlen);
        if (st == CH_MC_INCOMPLETE) {
            *need = pos + n;
            return PX_PARSE_AGAIN;
        }
        if (st != CH_MC_OK)
            return PX_PARSE_BAD;
        if (rep.cls == CH_MC_C_ERROR) { /* the group's error: this request's answer too */
            *consumed = pos;
            *r = (px_reply){.p = buf + pos, .len = rep.line.len + 2, .kind = PX_REPLY_ERROR};
            return PX_PARSE_OK;
        }
        pos += rep.len;
        hits += rep.len > 0;
    }
    *consumed = pos;
    if (pos == 0) {
        *r = (px_reply){.p = MC_END, .len = sizeof(MC_END) - 1, .kind = PX_REPLY_MISS};
        return PX_PARSE_OK;
    }
    scratch->len = 0;
    if (px_buf_append(scratch, buf, pos) != 0 ||
        px_buf_append(scratch, MC_END, sizeof(MC_END) - 1) != 0) {
        /* The blocks are still taken off the stream; the client is told. */
        *r = (px_reply){.p = MC_OOM, .len = sizeof(MC_OOM) - 1, .kind = PX_REPLY_ERROR};
        return PX_PARSE_OK;
    }
    *r = (px_reply){.p = scratch->p, .len = scratch->len, .kind = PX_REPLY_VALUE,
                    .integer = (int64_t)hits};
    return PX_PARSE_OK;
}

static bool mc_suppress(const px_msg *m, const px_reply *r)
{
    if ((m->proto[P_BITS] & B_QUIET) == 0 || r->kind == PX_REPLY_FAILED)
        return false;
    ch_mc_limits ml;
    ch_mc_limits_init(&ml);
    ml.max_item = (size_t)1 << 30;
    ch_mc_reply rep;
    size_t need;
    return ch_mc_scan_reply(r->p, r->len, msg_cmd(m), &ml, &rep, &need, NULL, 0) == CH_MC_OK &&
           ch_mc_quiet_suppresses(msg_cmd(m), &rep);
}

static long mc_route_key(const px_msg *m, px_span key, char *buf, size_t cap)
{
    return ch_mc_b64_decode(m->raw + key.off, key.len, (unsigned char *)buf, cap);
}

/* ---- writing ----------------------------------------------------------------------------------- */

static int span(px_buf *out, const px_msg *m, px_span s)
{
    return px_buf_append(out, m->raw + s.off, s.len);
}

/* The request line without noreply / q, then the data block (the line is parsed again: only
 * requests that carry one of those pay for it). */
static int encode_stripped(px_buf *out, const px_msg *m)
{
    ch_mc_span tok[64];
    ch_mc_request r = {.tok = tok, .tok_cap = 64};
    ch_mc_limits ml;
    ch_mc_limits_init(&ml);
    ml.max_item = ml.max_swallow = (size_t)1 << 30;
    size_t consumed, need;
    if (ch_mc_parse_request(m->raw, m->len, &ml, &r, &consumed, &need, NULL, 0) != CH_MC_OK)
        return -1;
    size_t n = ch_mc_line_strip(m->raw, &r, NULL, 0);
    if (n == 0 || px_buf_reserve(out, n + 1) != 0)
        return -1;
    ch_mc_line_strip(m->raw, &r, out->p + out->len, n + 1);
    out->len += n;
    if (ch_mc_cmd_props(r.cmd) & CH_MC_P_STORAGE) {
        px_span d = msg_data(m);
        if (span(out, m, d) != 0 || px_buf_append(out, "\r\n", 2) != 0)
            return -1;
    }
    return 0;
}

static int mc_encode_request(px_buf *out, const px_msg *m, const uint32_t *keys, size_t nkeys,
                             uint8_t *expect)
{
    ch_mc_cmd cmd = msg_cmd(m);
    *expect = (uint8_t)cmd;
    if (m->cmd->cls != PX_CLASS_MULTI) {
        if (m->proto[P_BITS] & B_STRIP)
            return encode_stripped(out, m);
        return px_buf_append(out, m->raw, m->len);
    }
    /* get gets gat gats for keys[0, nkeys): the command, gat's exptime, the keys. */
    int rc = span(out, m, m->args[0]);
    if (rc == 0 && (cmd == CH_MC_CMD_GAT || cmd == CH_MC_CMD_GATS)) {
        rc = px_buf_append(out, " ", 1);
        rc |= span(out, m, m->args[1]);
    }
    for (size_t k = 0; rc == 0 && k < nkeys; k++) {
        rc = px_buf_append(out, " ", 1);
        rc |= span(out, m, m->keys[keys[k]]);
    }
    return rc == 0 ? px_buf_append(out, "\r\n", 2) : -1;
}

/* ---- the gutter pool --------------------------------------------------------------------- */

/* Exptime v capped at cap_s seconds from now_s, as a relative exptime (an expired one, v < 0
 * or a Unix time past, is kept: the item is gone at once either way). memcached's rule, as
 * ch_mc_copy_exptime's: 0 none, up to CH_MC_RELATIVE_MAX a number of seconds, beyond a Unix
 * time. */
static int64_t cap_exptime(int64_t v, int64_t cap_s, int64_t now_s)
{
    if (v < 0)
        return v;
    if (v == 0)
        return cap_s;
    if (v <= CH_MC_RELATIVE_MAX)
        return v < cap_s ? v : cap_s;
    int64_t rel = v - now_s;
    return rel <= 0 ? v : rel < cap_s ? rel : cap_s;
}

/* A decimal int64 in p[0, n) (an optional '-', leading zeros as strtol reads them, at most 18
 * other digits); false otherwise. */
static bool tok_i64(const char *p, size_t n, int64_t *v)
{
    size_t k = n > 0 && p[0] == '-' ? 1 : 0;
    if (k == n)
        return false;
    while (k + 1 < n && p[k] == '0')
        k++;
    if (n - k > 18)
        return false;
    int64_t x = 0;
    for (; k < n; k++) {
        if (p[k] < '0' || p[k] > '9')
            return false;
        x = x * 10 + (p[k] - '0');
    }
    *v = p[0] == '-' ? -x : x;
    return true;
}

/* The request as encode_request writes it, with its exptime capped (px_codec.encode_capped):
 *   set add replace append prepend cas  -> the exptime token;
 *   touch, gat, gats                    -> the exptime token;
 *   ms                                  -> its T flag, or T<cap> added when it has none;
 *   mg, ma                              -> their T (touch) and N (autovivify) flags;
 *   incr decr delete md, and reads      -> as they are (they give no item a lifetime).
 * The cap is gutter_ttl in whole seconds (at least 1): memcached's lifetimes are seconds. */
static int mc_encode_capped(px_buf *out, const px_msg *m, const uint32_t *keys, size_t nkeys,
                            uint64_t ttl_ms, int64_t now_ms, uint8_t *expect, char *why,
                            size_t whylen)
{
    ch_mc_cmd cmd = msg_cmd(m);
    size_t at; /* the exptime's token; 0: meta flags; SIZE_MAX: nothing to cap */
    switch (cmd) {
    case CH_MC_CMD_SET: case CH_MC_CMD_ADD: case CH_MC_CMD_REPLACE: case CH_MC_CMD_APPEND:
    case CH_MC_CMD_PREPEND: case CH_MC_CMD_CAS: at = 3; break;
    case CH_MC_CMD_TOUCH: at = 2; break;
    case CH_MC_CMD_GAT: case CH_MC_CMD_GATS: at = 1; break;
    case CH_MC_CMD_MS: case CH_MC_CMD_MG: case CH_MC_CMD_MA: at = 0; break;
    default: at = SIZE_MAX; break;
    }
    if (at == SIZE_MAX)
        return mc_encode_request(out, m, keys, nkeys, expect);
    px_buf req = {0};
    if (mc_encode_request(&req, m, keys, nkeys, expect) != 0) {
        px_buf_free(&req);
        return -1;
    }
    int64_t cap = (int64_t)(ttl_ms / 1000) > 0 ? (int64_t)(ttl_ms / 1000) : 1;
    int64_t now_s = now_ms / 1000;
    /* The request line ends at its first LF (memcached takes a bare LF as a line end), less
     * a CR before it: a CR before the first LF would be in the data block, not the line's. */
    const char *p = req.p;
    const char *lf = memchr(p, '\n', req.len);
    size_t end = lf != NULL ? (size_t)(lf - p) : req.len;
    if (end > 0 && end < req.len && p[end - 1] == '\r')
        end--;
    bool has_t = false;
    int rc = 0;
    size_t start = out->len; /* a refusal leaves out as it was */
    /* Tokens are separated by runs of spaces, as memcached's tokenizer reads them; they are
     * written back one space apart. */
    for (size_t i = 0, tok = 0; rc == 0; tok++) {
        while (i < end && p[i] == ' ')
            i++;
        if (i == end)
            break;
        size_t j = i;
        while (j < end && p[j] != ' ')
            j++;
        int64_t v;
        bool meta = at == 0 && tok >= 2 && j > i + 1 && (p[i] == 'T' || p[i] == 'N');
        if (tok > 0)
            rc |= px_buf_append(out, " ", 1);
        if (meta && !tok_i64(p + i + 1, j - i - 1, &v)) {
            /* Not a number this can cap (the parser refuses those already): never sent
             * uncapped. */
            snprintf(why, whylen, "bad token in command line format");
            px_buf_free(&req);
            out->len = start;
            return 1;
        }
        if (meta) {
            has_t |= p[i] == 'T';
            rc |= px_buf_printf(out, "%c%lld", p[i], (long long)cap_exptime(v, cap, now_s));
        } else if (at > 0 && tok == at) {
            if (!tok_i64(p + i, j - i, &v)) {
                snprintf(why, whylen, "bad command line format");
                px_buf_free(&req);
                out->len = start;
                return 1;
            }
            rc |= px_buf_printf(out, "%lld", (long long)cap_exptime(v, cap, now_s));
        } else {
            rc |= px_buf_append(out, p + i, j - i);
        }
        i = j;
    }
    if (rc == 0 && cmd == CH_MC_CMD_MS && !has_t)
        rc = px_buf_printf(out, " T%lld", (long long)cap);
    if (rc == 0)
        rc = px_buf_append(out, p + end, req.len - end);
    px_buf_free(&req);
    return rc == 0 ? 0 : -1;
}

static int mc_encode_error(px_buf *out, px_error why, const char *msg)
{
    switch (why) {
    case PX_ERR_UNKNOWN:
        return px_buf_append(out, "ERROR\r\n", 7);
    case PX_ERR_NOAUTH:
        /* memcached 1.6's words to an unauthenticated client (-Y) */
        return px_buf_append(out, "CLIENT_ERROR unauthenticated\r\n", 30);
    case PX_ERR_CLIENT:
        return px_buf_printf(out, "CLIENT_ERROR %s\r\n", msg);
    default:
        return px_buf_printf(out, "SERVER_ERROR %s\r\n", msg);
    }
}

static int mc_encode_probe(px_buf *out, uint8_t *expect)
{
    *expect = (uint8_t)CH_MC_CMD_VERSION;
    return px_buf_append(out, "version\r\n", 9);
}

/* Whether a key (its routing bytes) can go as a text-protocol token as it is. */
static bool plain_key(const char *key, size_t len)
{
    return ch_mc_key_plain(key, len);
}

/* A key for a meta command: as it is, or base64 (then the command needs the "b" flag). */
static int meta_key(px_buf *out, const char *key, size_t len)
{
    if (plain_key(key, len))
        return px_buf_append(out, key, len);
    size_t n = ch_mc_b64_encode(key, len, NULL, 0);
    if (px_buf_reserve(out, n) != 0)
        return -1;
    out->len += ch_mc_b64_encode(key, len, out->p + out->len, n);
    return 0;
}

/* A key as the text protocol can carry it: "delete <key>"; one it cannot (a decoded base64 key
 * with spaces or control bytes) goes as the meta "md <base64> b". */
static int mc_encode_delete(px_buf *out, const char *key, size_t len, uint8_t *expect)
{
    bool plain = plain_key(key, len);
    *expect = (uint8_t)(plain ? CH_MC_CMD_DELETE : CH_MC_CMD_MD);
    int rc = px_buf_append(out, plain ? "delete " : "md ", plain ? 7 : 3);
    rc |= meta_key(out, key, len);
    return rc == 0 ? px_buf_append(out, plain ? "\r\n" : " b\r\n", plain ? 2 : 4) : -1;
}

/* ---- warm-up copies ------------------------------------------------------------------------- */

/* get, with one key or several (split): its VALUE block is the key's flags and data alone. */
static bool mc_near_cacheable(const px_cmd *cmd)
{
    return cmd->local == CH_MC_CMD_GET;
}

/* The life of an item with ttl seconds left (mg's t) for the near cache: memcached ages items
 * by a clock of whole seconds, ticking once a second, so an item it gives t seconds may expire
 * after t - 1 and a little more: t - 1 s (none for 0 or 1), unbounded for -1 (never expires). */
static uint64_t item_life_ns(int64_t ttl)
{
    if (ttl == -1)
        return UINT64_MAX;
    if (ttl < 2)
        return 0;
    uint64_t s = (uint64_t)ttl - 1;
    return s < UINT64_MAX / 1000000000u ? s * 1000000000u : UINT64_MAX;
}

/* px_codec.near_fill: the fetch's "VA <size> t<ttl> f<flags>" and value as get's
 * "VALUE <key> <flags> <size>", the value and END (the key as the client wrote it); EN as END. */
static int mc_near_fill(px_buf *out, const px_msg *m, size_t k, const px_reply *f, px_reply *r,
                        uint64_t *life_ns)
{
    ch_mc_copy c;
    int got = f->kind == PX_REPLY_FAILED ? -1 : ch_mc_copy_read(f->p, f->len, &c);
    if (got < 0 || k >= m->nkeys)
        return 0;
    const px_span *key = &m->keys[k];
    int rc = 0;
    if (got == 1) {
        rc |= px_buf_printf(out, "VALUE %.*s %" PRIu32 " %" PRIu32 "\r\n", (int)key->len,
                            m->raw + key->off, c.flags, c.data.len);
        rc |= px_buf_append(out, f->p + c.data.off, c.data.len);
        rc |= px_buf_append(out, "\r\n", 2);
    }
    rc |= px_buf_append(out, "END\r\n", 5);
    if (rc != 0)
        return -1;
    *r = (px_reply){out->p, out->len, got == 1 ? PX_REPLY_VALUE : PX_REPLY_MISS, got};
    *life_ns = got == 1 ? item_life_ns(c.ttl) : 0;
    return 1;
}

static bool mc_is_miss(const px_msg *m, const px_reply *r)
{
    (void)m;
    return r->kind == PX_REPLY_MISS;
}

/* The copy's fetch (mc.h): mg with the value, its remaining lifetime and its client flags. */
static int mc_encode_fetch(px_buf *out, const char *key, size_t len, uint8_t *expect)
{
    *expect = (uint8_t)CH_MC_CMD_MG;
    size_t n = ch_mc_copy_fetch(key, len, NULL, 0);
    if (n == 0 || px_buf_reserve(out, n) != 0)
        return -1;
    out->len += ch_mc_copy_fetch(key, len, out->p + out->len, n);
    return 0;
}

/* ms in mode E (add): stored only if the key is not there (NS otherwise), with the lifetime
 * left (ch_mc_copy_exptime: memcached's 30-day rule) and the client flags of the fetched copy.
 * (An ms refused as too large at the new owner makes memcached 1.6.18 drop the key there, newer
 * or not, where a text add keeps it; `chash migrate` therefore stores with add, which cannot
 * carry a key that is not plain.) */
static int mc_encode_fill(px_buf *out, const char *key, size_t len, const px_reply *fetched,
                          int64_t now_unix, uint8_t *expect)
{
    *expect = (uint8_t)CH_MC_CMD_MS;
    ch_mc_copy c;
    int64_t exptime;
    if (fetched->kind != PX_REPLY_VALUE || ch_mc_copy_read(fetched->p, fetched->len, &c) != 1 ||
        !ch_mc_copy_exptime(c.ttl, now_unix, &exptime))
        return 0;
    int rc = px_buf_append(out, "ms ", 3);
    rc |= meta_key(out, key, len);
    rc |= px_buf_printf(out, " %" PRIu32, c.data.len);
    if (rc == 0 && !plain_key(key, len))
        rc = px_buf_append(out, " b", 2);
    if (rc == 0 && exptime != 0)
        rc = px_buf_printf(out, " T%" PRId64, exptime);
    rc |= px_buf_printf(out, " F%" PRIu32 " ME\r\n", c.flags);
    rc |= px_buf_append(out, fetched->p + c.data.off, c.data.len);
    rc |= px_buf_append(out, "\r\n", 2);
    return rc == 0 ? 1 : -1;
}

static int mc_fill_stored(const px_reply *r)
{
    if (r->len >= 2 && memcmp(r->p, "HD", 2) == 0)
        return 1;
    return r->len >= 2 && memcmp(r->p, "NS", 2) == 0 ? 0 : -1;
}

/* The rejoin's walk: one "lru_crawler metadump all" lists the server's keys (no cursor: one
 * page). memcached writes each key URL-encoded (%XX) in a "key=" token, on a line ended by a
 * bare "\n"; the dump ends with "END\r\n". */
static int mc_encode_walk(px_buf *out, uint64_t cursor, uint8_t *expect)
{
    (void)cursor;
    *expect = (uint8_t)CH_MC_CMD_LRU_CRAWLER;
    static const char dump[] = "lru_crawler metadump all\r\n";
    return px_buf_append(out, dump, sizeof(dump) - 1);
}

static int mc_walk_page(const px_reply *r, uint64_t *next,
                        void (*fn)(void *arg, const char *key, size_t len), void *arg)
{
    *next = 0; /* one dump is the whole walk */
    char key[250]; /* memcached's keys: 250 bytes at most; a longer one is not a page's */
    size_t pos = 0;
    while (pos < r->len) {
        const char *nl = memchr(r->p + pos, '\n', r->len - pos);
        if (nl == NULL)
            return -1;
        size_t end = (size_t)(nl - r->p), cr = end > pos && r->p[end - 1] == '\r' ? end - 1 : end;
        if (cr - pos == 3 && memcmp(r->p + pos, "END", 3) == 0)
            return 0;
        if (cr - pos < 4 || memcmp(r->p + pos, "key=", 4) != 0)
            return -1;
        const char *k = r->p + pos + 4;
        const char *sp = memchr(k, ' ', (size_t)(r->p + cr - k));
        size_t klen = sp != NULL ? (size_t)(sp - k) : (size_t)(r->p + cr - k);
        long n = ch_mc_url_decode(k, klen, key, sizeof(key));
        if (n < 0)
            return -1;
        fn(arg, key, (size_t)n);
        pos = end + 1;
    }
    return -1; /* no END */
}

static int mc_encode_handshake(px_buf *out, const ch_conf_pool *pc, uint8_t dialect, size_t i,
                               uint8_t *expect, const char **what)
{
    (void)out, (void)pc, (void)dialect, (void)i, (void)expect, (void)what;
    return 0; /* nothing to set up on a memcached connection */
}

/* ---- merging ----------------------------------------------------------------------------------- */

struct px_merger {
    px_buf err;     /* the first error reply of a part (not PX_MSG_KEYWISE) */
    bool failed;    /* a part failed (PX_MSG_KEYWISE: its error is in its keys' slots) */
    size_t nkeys;
    px_buf vals;
    px_span slots[]; /* per key of the request: its VALUE block in vals (len 0: a miss) */
};

/* One allocation, the slots with it. */
static px_merger *mc_merge_begin(const px_msg *m)
{
    px_merger *mg = calloc(1, sizeof(*mg) + (m->nkeys > 0 ? m->nkeys : 1) * sizeof(px_span));
    if (mg == NULL)
        return NULL;
    mg->nkeys = m->nkeys;
    return mg;
}

/* A part's VALUE blocks come in its keys' order, misses left out (and a key asked twice comes
 * twice): each block goes to the next key of the part with its name. */
static void mc_merge_part(px_merger *mg, const px_msg *m, const uint32_t *keys, size_t nkeys,
                          const px_reply *r)
{
    if (r->kind == PX_REPLY_ERROR || r->kind == PX_REPLY_FAILED) {
        mg->failed = true;
        if ((m->flags & PX_MSG_KEYWISE) == 0) {
            if (mg->err.len == 0)
                px_buf_append(&mg->err, r->p, r->len);
            return;
        }
        /* each key of the part answered with its error line, in the key's place */
        px_span line = {(uint32_t)mg->vals.len, (uint32_t)r->len};
        if (px_buf_append(&mg->vals, r->p, r->len) != 0) {
            px_buf_append(&mg->err, r->p, r->len); /* out of memory: the whole as one */
            return;
        }
        for (size_t j = 0; j < nkeys; j++)
            mg->slots[keys[j]] = line;
        return;
    }
    size_t pos = 0, j = 0;
    ch_mc_value v;
    (void)px_buf_reserve(&mg->vals, r->len); /* one growth per part at most */
    while (ch_mc_value_next(r->p, r->len, &pos, &v)) {
        while (j < nkeys) {
            px_span k = m->keys[keys[j]];
            if (k.len == v.key.len && memcmp(m->raw + k.off, r->p + v.key.off, k.len) == 0)
                break;
            j++;
        }
        if (j == nkeys)
            break; /* a value for no key asked: dropped */
        mg->slots[keys[j]] = (px_span){(uint32_t)mg->vals.len, v.block.len};
        if (px_buf_append(&mg->vals, r->p + v.block.off, v.block.len) != 0)
            mg->slots[keys[j]].len = 0;
        j++;
    }
}

static int mc_merge_end(px_merger *mg, const px_msg *m, px_buf *out)
{
    (void)m;
    int rc = 0;
    bool error = mg->err.len > 0;
    if (error) {
        rc = px_buf_append(out, mg->err.p, mg->err.len);
    } else {
        rc = px_buf_reserve(out, mg->vals.len + 5);
        for (size_t i = 0; rc == 0 && i < mg->nkeys; i++)
            if (mg->slots[i].len > 0)
                rc = px_buf_append(out, mg->vals.p + mg->slots[i].off, mg->slots[i].len);
        if (rc == 0)
            rc = px_buf_append(out, "END\r\n", 5);
    }
    px_buf_free(&mg->err);
    px_buf_free(&mg->vals);
    bool failed = mg->failed;
    free(mg);
    return rc != 0 ? -1 : failed ? 1 : 0;
}

/* ---- local commands ---------------------------------------------------------------------------- */

/* The version memcached clients read (version, stats): the memcached protocol the proxy serves,
 * 1.6's (meta commands), then its own as semver build metadata, without a space (a stats value
 * has none: libmemcached keeps a value's first word). libmemcached, under PHP's memcached and
 * pylibmc, refuses a server whose major version is 0: PX_VERSION alone fails their getVersion
 * and getStats. */
#define MC_VERSION "1.6.0+chash-proxy-" PX_VERSION

/* INFO fields that memcached's stats has under its own name: given that name (and, for the
 * version, the value memcached clients read). */
static const struct {
    const char *info, *stat, *value; /* value NULL: the INFO field's */
} stat_names[] = {
    {"chash_proxy_version", "version", MC_VERSION}, {"process_id", "pid", NULL},
    {"uptime_in_seconds", "uptime", NULL},          {"connected_clients", "curr_connections", NULL},
    {"total_connections_received", "total_connections", NULL},
    {"worker_threads", "threads", NULL},
};

/* stats: the proxy's INFO fields as memcached's lines, "STAT <name> <value>", then END. Section
 * heads, blank lines and the Replication section (what Redis clients look for) are left out. */
static int mc_stats(const px_local *ctx, px_buf *out)
{
    px_buf info = {0};
    int rc = ctx->info != NULL ? ctx->info(ctx->info_arg, &info) : 0;
    bool skip = false;
    for (size_t at = 0; rc == 0 && at < info.len;) {
        const char *line = info.p + at, *nl = memchr(line, '\n', info.len - at);
        size_t n = nl != NULL ? (size_t)(nl - line) : info.len - at;
        at += n + 1;
        if (n > 0 && line[n - 1] == '\r')
            n--;
        if (n > 0 && line[0] == '#')
            skip = n == 13 && memcmp(line, "# Replication", 13) == 0;
        const char *colon = n > 0 && line[0] != '#' && !skip ? memchr(line, ':', n) : NULL;
        if (colon == NULL)
            continue;
        const char *name = line, *value = colon + 1;
        size_t nlen = (size_t)(colon - line), vlen = n - nlen - 1;
        for (size_t i = 0; i < sizeof(stat_names) / sizeof(stat_names[0]); i++)
            if (strlen(stat_names[i].info) == nlen &&
                memcmp(stat_names[i].info, line, nlen) == 0) {
                name = stat_names[i].stat;
                nlen = strlen(name);
                if (stat_names[i].value != NULL) {
                    value = stat_names[i].value;
                    vlen = strlen(value);
                }
                break;
            }
        rc = px_buf_printf(out, "STAT %.*s %.*s\r\n", (int)nlen, name, (int)vlen, value);
    }
    px_buf_free(&info);
    return rc == 0 && px_buf_append(out, "END\r\n", 5) == 0 ? 0 : -1;
}

static int mc_answer_local(px_local *ctx, const px_msg *m, px_buf *out)
{
    switch (msg_cmd(m)) {
    case CH_MC_CMD_VERSION: {
        static const char line[] = "VERSION " MC_VERSION "\r\n";
        return px_buf_append(out, line, sizeof(line) - 1) == 0 ? 0 : -1;
    }
    case CH_MC_CMD_QUIT:
        ctx->close = true; /* memcached closes without a reply */
        return 0;
    case CH_MC_CMD_MN:
        return px_buf_append(out, "MN\r\n", 4) == 0 ? 0 : -1;
    case CH_MC_CMD_STATS:
        return mc_stats(ctx, out);
    default:
        return mc_encode_error(out, PX_ERR_CLIENT, "not supported by the proxy") == 0 ? 1 : -1;
    }
}

const px_codec px_codec_memcache = {
    .backend_dialects = 1,
    .name = "memcache",
    .limits = mc_limits,
    .parse_request = mc_parse_request,
    .scan_reply = mc_scan_reply,
    .join_keys = mc_join_keys,
    .join = mc_join,
    .scan_joined = mc_scan_joined,
    .encode_request = mc_encode_request,
    .encode_capped = mc_encode_capped,
    .encode_error = mc_encode_error,
    .encode_probe = mc_encode_probe,
    .encode_delete = mc_encode_delete,
    .encode_walk = mc_encode_walk,
    .walk_page = mc_walk_page,
    .is_miss = mc_is_miss,
    .near_cacheable = mc_near_cacheable,
    .near_fill = mc_near_fill,
    .encode_fetch = mc_encode_fetch,
    .encode_fill = mc_encode_fill,
    .fill_stored = mc_fill_stored,
    .encode_handshake = mc_encode_handshake,
    .merge_begin = mc_merge_begin,
    .merge_part = mc_merge_part,
    .merge_end = mc_merge_end,
    .answer_local = mc_answer_local,
    .suppress = mc_suppress,
    .route_key = mc_route_key,
};

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hotpath_fuzz.c — libFuzzer target for the codecs' hot-key and near-cache paths and the copies
 * they make (proxy/proto/codec.h: near_cacheable, is_miss, encode_fetch, encode_take,
 * encode_fill, fill_stored, encode_capped; both codecs; built and run by fuzz/run.sh hotpath).
 *
 * The input's first byte picks the codec and the gutter's TTL, its second where the rest splits
 * (at that many 256ths) into a stream of client requests (parse_request) and a stream of
 * backend replies (scan_reply). Contracts checked, trapping on a violation:
 *   - near_cacheable: only for a retryable read (or a split read) with keys;
 *   - is_miss of a reply to the request: only for a null or empty value (kind MISS or VALUE),
 *     and always for kind MISS;
 *   - encode_fetch / encode_take of each key (its routing bytes): 0, and one request that
 *     parses back with that one key;
 *   - encode_capped of each key: 0 or 1, never -1 (memory does not run out here); 1 writes
 *     nothing and gives a reason; 0 writes one request that parses back with that key, byte for
 *     byte the request encode_request writes when no lifetime is in it, else with every lifetime
 *     at most the gutter's TTL (Redis SET's PX/PXAT, PSETEX's ms, the EVAL's cap; memcached's
 *     exptime, a meta T or N flag, an ms given a T);
 *   - encode_fill of each reply scanned as the fetch's: 0 or 1; 1 exactly for a fetch that found
 *     something to copy (Redis: [PTTL -1 or > 0, DUMP payload]; memcached: VA with t and f and a
 *     lifetime left); the fill parses back as one write of that key that never overwrites (Redis
 *     RESTORE without REPLACE, its ttl the PTTL, 0 for none, and the payload; memcached ms in
 *     mode E with the value's bytes, client flags and exptime);
 *   - fill_stored of any reply: -1, 0 or 1; 1 for Redis +OK and memcached HD, 0 for BUSYKEY and
 *     NS;
 *   - near_fill (memcached) of each reply scanned as the fetch's, for a cacheable read's first
 *     key: 0 or 1; 1 exactly for a VA with t and f (then "VALUE <the read's key> <f> <size>",
 *     the value and END, scanned back as one get reply of kind VALUE, and a life of t - 1 s,
 *     none below t 2, unbounded for t -1) or EN (then END, kind MISS).
 */
#include "codec.h"
#include "mc.h"
#include "codec_util.h"
#include "resp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CAP 64      /* arguments of a request read from the input */
#define ROOM (CAP + 8) /* ... and of one the codec rewrote (SET's PX, the EVAL of a cap: +5) */
#define KEYS_PER_REQUEST 4
#define NOW_MS INT64_C(1700000000000) /* the wall clock the copies and the gutter are given */
#define MC_RELATIVE_MAX 2592000

static void check(int ok)
{
    if (!ok)
        __builtin_trap();
}

/* A request parsed into its own arrays. */
typedef struct req {
    px_msg m;
    px_span args[ROOM], keys[ROOM];
} req;

static px_parse parse(const px_codec *c, const char *buf, size_t len, req *r, size_t *consumed)
{
    px_limits lim = limits(c, false);
    r->m = (px_msg){.args = r->args, .args_cap = ROOM, .keys = r->keys, .keys_cap = ROOM};
    size_t need = 0;
    char err[160];
    return c->parse_request(&lim, buf, len, &r->m, consumed, &need, err, sizeof(err));
}

/* buf[0, len) parses as exactly one request, not refused. */
static void parse_one(const px_codec *c, const char *buf, size_t len, req *r)
{
    size_t consumed = 0;
    check(parse(c, buf, len, r, &consumed) == PX_PARSE_OK);
    check(consumed == len && r->m.cmd != NULL && r->m.reject[0] == '\0');
    check(r->m.nargs <= ROOM && r->m.nkeys <= ROOM);
}

/* The request r's first key routes by key[0, klen). */
static void keyed(const px_codec *c, const req *r, const char *key, size_t klen)
{
    check(r->m.nkeys >= 1);
    char buf[1024];
    const char *k;
    size_t n = route_bytes(c, &r->m, 0, buf, sizeof(buf), &k);
    check(n == klen && memcmp(k, key, n) == 0);
}

static bool arg_is(const px_msg *m, size_t i, const char *s)
{
    return m->args[i].len == strlen(s) && strncasecmp(m->raw + m->args[i].off, s, strlen(s)) == 0;
}

static bool arg_i64(const px_msg *m, size_t i, int64_t *v)
{
    char num[32];
    size_t n = m->args[i].len;
    if (n == 0 || n >= sizeof(num))
        return false;
    memcpy(num, m->raw + m->args[i].off, n);
    num[n] = '\0';
    char *end;
    long long x = strtoll(num, &end, 10);
    *v = x;
    return *end == '\0';
}

static bool arg_equal(const px_msg *a, size_t i, const px_msg *b, size_t j)
{
    return a->args[i].len == b->args[j].len &&
           memcmp(a->raw + a->args[i].off, b->raw + b->args[j].off, a->args[i].len) == 0;
}

/* Redis: a capped request's lifetimes are within ttl of now. */
static void redis_capped(const req *orig, const req *out, int64_t ttl)
{
    const px_msg *m = &out->m;
    if (arg_is(m, 0, "set")) {
        size_t lifetimes = 0;
        for (size_t i = 3; i < m->nargs; i++) {
            check(!arg_is(m, i, "keepttl"));
            bool px = arg_is(m, i, "px"), pxat = arg_is(m, i, "pxat");
            int64_t v;
            if (!(px || pxat) || i + 1 >= m->nargs || !arg_i64(m, i + 1, &v))
                continue; /* a bare EX or PX the client sent last: kept, Redis refuses it */
            lifetimes++;
            check(px ? v <= ttl : v <= NOW_MS + ttl);
            i++;
        }
        check(lifetimes >= 1);
    } else if (arg_is(m, 0, "psetex")) {
        int64_t v;
        check(m->nargs == 4 && arg_i64(m, 2, &v) && v <= ttl);
    } else if (arg_is(m, 0, "eval")) {
        /* EVAL CAP_SCRIPT 1 key ttl <the command>: the command whole, its key capped. */
        int64_t v;
        check(m->nargs == 5 + orig->m.nargs && arg_i64(m, 4, &v) && v == ttl);
        for (size_t i = 0; i < orig->m.nargs; i++)
            check(arg_equal(m, 5 + i, &orig->m, i));
    } else {
        check(false); /* every other capped form is encode_request's bytes (checked first) */
    }
}

/* memcached: an exptime capped at cap_s seconds from now: a relative one up to cap_s, a
 * negative or past absolute one kept (the item is gone at once either way), never 0. */
static bool mc_bounded(int64_t v, int64_t cap_s)
{
    return v < 0 || (v >= 1 && v <= cap_s) || (v > MC_RELATIVE_MAX && v <= NOW_MS / 1000);
}

static bool tok_i64(const char *p, size_t n, int64_t *v)
{
    char num[32];
    if (n == 0 || n >= sizeof(num))
        return false;
    memcpy(num, p, n);
    num[n] = '\0';
    char *end;
    *v = strtoll(num, &end, 10);
    return *end == '\0' && (num[0] == '-' || (num[0] >= '0' && num[0] <= '9'));
}

static void mc_capped(const char *out, size_t len, int64_t ttl_ms)
{
    int64_t cap_s = ttl_ms / 1000 > 0 ? ttl_ms / 1000 : 1;
    const char *eol = memchr(out, '\n', len); /* the line's end: a LF, a CR before it */
    check(eol != NULL);
    if (eol > out && eol[-1] == '\r')
        eol--;
    const char *tok[CAP];
    size_t tlen[CAP], n = 0;
    for (const char *p = out; p < eol && n < CAP;) {
        const char *sp = memchr(p, ' ', (size_t)(eol - p));
        const char *e = sp != NULL ? sp : eol;
        tok[n] = p;
        tlen[n++] = (size_t)(e - p);
        p = e + 1;
    }
    check(n >= 2);
    int64_t v;
#define IS(s) (tlen[0] == strlen(s) && memcmp(tok[0], s, tlen[0]) == 0)
    if (IS("set") || IS("add") || IS("replace") || IS("append") || IS("prepend") || IS("cas")) {
        check(n >= 5 && tok_i64(tok[3], tlen[3], &v) && mc_bounded(v, cap_s));
    } else if (IS("touch")) {
        check(n >= 3 && tok_i64(tok[2], tlen[2], &v) && mc_bounded(v, cap_s));
    } else if (IS("gat") || IS("gats")) {
        check(tok_i64(tok[1], tlen[1], &v) && mc_bounded(v, cap_s));
    } else if (IS("ms") || IS("mg") || IS("ma")) {
        bool has_t = false;
        for (size_t i = 2; i < n; i++)
            if (tlen[i] > 1 && (tok[i][0] == 'T' || tok[i][0] == 'N') &&
                tok_i64(tok[i] + 1, tlen[i] - 1, &v)) {
                check(mc_bounded(v, cap_s));
                has_t |= tok[i][0] == 'T';
            }
        if (IS("ms"))
            check(has_t);
    } else {
        check(false);
    }
#undef IS
}

/* The request r for its key i through every path of the hot keys and the copies. */
static void one_key(const px_codec *c, const req *r, uint32_t i, uint64_t ttl_ms)
{
    char kb[1024];
    const char *key;
    size_t klen = route_bytes(c, &r->m, i, kb, sizeof(kb), &key);
    uint8_t expect = 0;
    req back;
    if (klen > 0) { /* a Redis key may be empty; memcached's never are */
        px_buf out = {0};
        check(c->encode_fetch(&out, key, klen, &expect) == 0);
        parse_one(c, out.p, out.len, &back);
        keyed(c, &back, key, klen);
        px_buf_free(&out);
        if (c->encode_take != NULL) {
            check(c->encode_take(&out, key, klen, &expect) == 0);
            parse_one(c, out.p, out.len, &back);
            keyed(c, &back, key, klen);
            px_buf_free(&out);
        }
    }
    /* The gutter's form of the request for this key. */
    px_buf capped = {0}, plain = {0};
    char why[192] = "";
    int rc = c->encode_capped(&capped, &r->m, &i, 1, ttl_ms, NOW_MS, &expect, why, sizeof(why));
    check(rc == 0 || rc == 1);
    if (rc == 1) {
        check(capped.len == 0 && why[0] != '\0');
        check(!r->m.cmd->retry || c == &px_codec_memcache); /* a Redis read is sent as it is */
        px_buf_free(&capped);
        return;
    }
    parse_one(c, capped.p, capped.len, &back);
    keyed(c, &back, key, klen);
    check(c->encode_request(&plain, &r->m, &i, 1, &expect) == 0);
    bool same = plain.len == capped.len && memcmp(plain.p, capped.p, plain.len) == 0;
    if (r->m.cmd->retry && c == &px_codec_redis)
        check(same); /* a Redis read gives no lifetime: as it is (memcached's gat and mg's T
                        flag touch: capped) */
    if (!same) {
        if (c == &px_codec_redis)
            redis_capped(r, &back, ttl_ms > (uint64_t)INT64_MAX / 2 ? INT64_MAX / 2
                                                                    : (int64_t)ttl_ms);
        else
            mc_capped(capped.p, capped.len, (int64_t)ttl_ms);
    }
    px_buf_free(&capped);
    px_buf_free(&plain);
}

/* Redis: what a fill of fetched must be: 1 and its ttl and payload, or 0. */
static int redis_fill_want(const px_reply *r, int64_t *ttl, const char **payload, size_t *plen)
{
    ch_resp_limits rl;
    ch_resp_limits_init(&rl);
    rl.max_bulk = rl.max_request = (size_t)1 << 40;
    ch_resp_reply a, t, v;
    size_t need;
    if (ch_resp_scan_reply(r->p, r->len, &rl, &a, &need, NULL, 0) != CH_RESP_OK ||
        a.type != CH_RESP_ARRAY || a.integer != 2)
        return 0;
    const char *e = r->p + a.body;
    if (ch_resp_scan_reply(e, r->len - a.body, &rl, &t, &need, NULL, 0) != CH_RESP_OK ||
        t.type != CH_RESP_INTEGER || (t.integer != -1 && t.integer <= 0))
        return 0;
    e += t.len;
    if (ch_resp_scan_reply(e, r->len - (size_t)(e - r->p), &rl, &v, &need, NULL, 0) !=
            CH_RESP_OK ||
        v.type != CH_RESP_BULK || v.integer < 0)
        return 0;
    *ttl = t.integer == -1 ? 0 : t.integer;
    *payload = e + v.body;
    *plen = v.body_len;
    return 1;
}

/* A fetch's reply r for key: the fill, checked. */
static void fill(const px_codec *c, const char *key, size_t klen, const px_reply *r)
{
    px_buf out = {0};
    uint8_t expect = 0;
    int rc = c->encode_fill(&out, key, klen, r, NOW_MS / 1000, &expect);
    check(rc == 0 || rc == 1);
    if (c == &px_codec_redis) {
        int64_t ttl = 0, v;
        const char *payload = NULL;
        size_t plen = 0;
        check(rc == redis_fill_want(r, &ttl, &payload, &plen));
        if (rc == 1) {
            req back;
            parse_one(c, out.p, out.len, &back);
            keyed(c, &back, key, klen);
            const px_msg *m = &back.m;
            check(arg_is(m, 0, "restore") && m->nargs == 4 && arg_i64(m, 2, &v) && v == ttl);
            check(m->args[3].len == plen && memcmp(m->raw + m->args[3].off, payload, plen) == 0);
        }
    } else {
        ch_mc_copy cp;
        int64_t exptime = 0;
        int want = r->kind == PX_REPLY_VALUE && ch_mc_copy_read(r->p, r->len, &cp) == 1 &&
                   ch_mc_copy_exptime(cp.ttl, NOW_MS / 1000, &exptime);
        check(rc == want);
        if (rc == 1) {
            req back;
            parse_one(c, out.p, out.len, &back);
            keyed(c, &back, key, klen);
            check(back.m.cmd->cls == PX_CLASS_WRITE);
            const char *eol = memchr(out.p, '\r', out.len); /* the fill's own line: CRLF */
            check(eol != NULL && eol + 1 < out.p + out.len && eol[1] == '\n');
            size_t line = (size_t)(eol - out.p);
            /* "ms <key> <size> <flags>...": the flags after the key and the size. */
            const char *fl = memchr(out.p + 3, ' ', line - 3);
            check(fl != NULL);
            fl = memchr(fl + 1, ' ', line - (size_t)(fl + 1 - out.p));
            size_t flen = fl != NULL ? line - (size_t)(fl - out.p) : 0;
            check(fl != NULL && memmem(fl, flen, " ME", 3) != NULL); /* add: never overwrites */
            char want_f[32];
            int fn = snprintf(want_f, sizeof(want_f), " F%u", (unsigned)cp.flags);
            check(memmem(fl, flen, want_f, (size_t)fn) != NULL);
            char want_t[32];
            int tl = snprintf(want_t, sizeof(want_t), " T%lld", (long long)exptime);
            check((exptime == 0) == (memmem(fl, flen, " T", 2) == NULL));
            if (exptime != 0)
                check(memmem(fl, flen, want_t, (size_t)tl) != NULL);
            check(out.len == line + 2 + cp.data.len + 2);
            check(memcmp(out.p + line + 2, r->p + cp.data.off, cp.data.len) == 0);
        }
    }
    px_buf_free(&out);
}

/* The life near_fill gives an item with ttl seconds left, in ns. */
static uint64_t near_life_want(int64_t ttl)
{
    return ttl == -1 ? UINT64_MAX : ttl < 2 ? 0 : (uint64_t)(ttl - 1) * 1000000000u;
}

/* A fetch's reply f made into the reply of read m for its first key (px_codec.near_fill),
 * checked. */
static void near_filled(const px_codec *c, const px_msg *m, const px_reply *f)
{
    px_buf out = {0};
    px_reply r;
    uint64_t life = 0;
    int rc = c->near_fill(&out, m, 0, f, &r, &life);
    ch_mc_copy cp;
    int got = ch_mc_copy_read(f->p, f->len, &cp);
    check(rc == (got >= 0));
    if (rc == 1) {
        check(r.p == out.p && r.len == out.len);
        px_limits blim = limits(c, true);
        px_reply back;
        size_t consumed = 0, need = 0;
        char err[160];
        check(c->scan_reply(&blim, (uint8_t)CH_MC_CMD_GET, out.p, out.len, &back, &consumed,
                            &need, err, sizeof(err)) == PX_PARSE_OK &&
              consumed == out.len && back.kind == r.kind);
        if (got == 0) {
            check(r.kind == PX_REPLY_MISS && out.len == 5 && memcmp(out.p, "END\r\n", 5) == 0);
        } else {
            char head[400];
            const px_span *k = &m->keys[0];
            int hn = snprintf(head, sizeof(head), "VALUE %.*s %u %u\r\n", (int)k->len,
                              m->raw + k->off, (unsigned)cp.flags, (unsigned)cp.data.len);
            check(r.kind == PX_REPLY_VALUE && hn > 0 && (size_t)hn < sizeof(head));
            check(out.len == (size_t)hn + cp.data.len + 7 && memcmp(out.p, head, (size_t)hn) == 0);
            check(memcmp(out.p + hn, f->p + cp.data.off, cp.data.len) == 0);
            check(memcmp(out.p + hn + cp.data.len, "\r\nEND\r\n", 7) == 0);
            check(life == near_life_want(cp.ttl));
        }
    }
    px_buf_free(&out);
}

static void replies(const px_codec *c, const req *r, const char *key, size_t klen,
                    const char *buf, size_t len)
{
    px_limits blim = limits(c, true);
    uint8_t own = 0, fetch = 0, store = 0;
    px_buf tmp = {0};
    uint32_t all[CAP];
    for (size_t i = 0; i < r->m.nkeys; i++)
        all[i] = (uint32_t)i;
    check(c->encode_request(&tmp, &r->m, all, r->m.nkeys, &own) == 0);
    tmp.len = 0;
    check(c->encode_fetch(&tmp, key, klen, &fetch) == 0);
    px_buf_free(&tmp);
    store = c == &px_codec_memcache ? (uint8_t)CH_MC_CMD_MS : 0;
    const uint8_t expects[3] = {own, fetch, store};
    bool near = c->near_cacheable != NULL && c->near_cacheable(r->m.cmd);
    for (int e = 0; e < 3; e++) {
        for (size_t off = 0; off < len;) {
            px_reply rep;
            size_t consumed = 0, need = 0;
            char err[160];
            if (c->scan_reply(&blim, expects[e], buf + off, len - off, &rep, &consumed, &need,
                              err, sizeof(err)) != PX_PARSE_OK)
                break;
            check(consumed > 0 && consumed <= len - off);
            off += consumed;
            if (e == 0 && near) {
                bool miss = c->is_miss(&r->m, &rep);
                if (miss)
                    check(rep.kind == PX_REPLY_MISS || rep.kind == PX_REPLY_VALUE);
                if (rep.kind == PX_REPLY_MISS)
                    check(miss);
            }
            if (e == 1)
                fill(c, key, klen, &rep);
            if (e == 1 && near && c->near_fill != NULL)
                near_filled(c, &r->m, &rep);
            int st = c->fill_stored(&rep);
            check(st >= -1 && st <= 1);
            if (e == 2) {
                if (c == &px_codec_redis && rep.kind == PX_REPLY_OK)
                    check(st == 1);
                if (c == &px_codec_redis && rep.len >= 8 && memcmp(rep.p, "-BUSYKEY", 8) == 0)
                    check(st == 0);
                if (c == &px_codec_memcache && rep.len == 4 && memcmp(rep.p, "HD\r\n", 4) == 0)
                    check(st == 1);
                if (c == &px_codec_memcache && rep.len == 4 && memcmp(rep.p, "NS\r\n", 4) == 0)
                    check(st == 0);
            }
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    const px_codec *c = (data[0] & 1) != 0 ? &px_codec_memcache : &px_codec_redis;
    /* The gutter's TTL: 1 ms .. about 36 h, some below a second (memcached rounds to 1 s). */
    static const uint64_t ttls[8] = {1, 999, 1000, 1500, 60000, 3600000, 86400000,
                                     131072000};
    uint64_t ttl_ms = ttls[(data[0] >> 1) & 7];
    size_t split = (size - 2) * data[1] / 256;
    data += 2;
    size -= 2;
    /* Copied to a buffer of the exact size, so ASan catches any read past it. */
    char *buf = malloc(size ? size : 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data, size);
    req *r = malloc(sizeof(*r)), *last = malloc(sizeof(*last));
    check(r != NULL && last != NULL);
    bool have_last = false;
    size_t off = 0;
    while (off < split) {
        size_t consumed = 0;
        if (parse(c, buf + off, split - off, r, &consumed) != PX_PARSE_OK)
            break;
        check(consumed > 0 && consumed <= split - off);
        off += consumed;
        const px_msg *m = &r->m;
        if (m->nargs == 0 || m->nargs > CAP || m->nkeys > CAP || m->cmd == NULL ||
            m->reject[0] != '\0' || m->cmd->cls == PX_CLASS_LOCAL ||
            m->cmd->cls == PX_CLASS_REFUSED || m->cmd->session != PX_SES_NONE ||
            (m->cmd->flags & PX_CMD_SCAN) != 0 || m->cmd->merge == PX_MERGE_EVERY)
            continue;
        if (c->near_cacheable != NULL && c->near_cacheable(m->cmd))
            check(m->cmd->retry && m->nkeys >= 1 &&
                  (m->cmd->cls == PX_CLASS_READ || m->cmd->cls == PX_CLASS_MULTI));
        for (uint32_t i = 0; i < m->nkeys && i < KEYS_PER_REQUEST; i++)
            one_key(c, r, i, ttl_ms);
        if (m->nkeys >= 1) {
            *last = *r;
            last->m.args = last->args;
            last->m.keys = last->keys;
            have_last = true;
        }
    }
    if (have_last) {
        char kb[1024];
        const char *key;
        size_t klen = route_bytes(c, &last->m, 0, kb, sizeof(kb), &key);
        if (klen > 0)
            replies(c, last, key, klen, buf + split, size - split);
    }
    free(r);
    free(last);
    free(buf);
    return 0;
}

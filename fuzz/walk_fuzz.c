/* SPDX-License-Identifier: Apache-2.0 */
/*
 * walk_fuzz.c — libFuzzer target for the rejoin walk's page parsers (px_codec.walk_page, with
 * encode_walk and encode_delete; proxy/proto/codec.h; built and run by fuzz/run.sh walk): Redis
 * SCAN replies (px_codec_redis) and memcached "lru_crawler metadump all" dumps
 * (px_codec_memcache).
 *
 * The input's first byte picks the codec; the rest is read twice: whole, as the bytes of one
 * reply handed to walk_page as they are (a page parser must take any bytes), and as a stream of
 * replies framed by the codec's scan_reply with encode_walk's expect code, each handed to
 * walk_page as the backend hands it. Contracts checked, trapping on a violation:
 *   - walk_page returns 0 or -1; every key it gives lies in the reply's bytes (Redis) or is
 *     1..250 bytes, memcached's longest key (memcached: decoded from %XX into a buffer);
 *   - memcached: *next is 0 (one dump is the whole walk); a dump walked to 0 gives the keys of
 *     its "key=" lines in order, and the same keys URL-encoded again into a dump walk the same;
 *   - Redis: a page walked to 0 is a SCAN reply: scan_cursor reads *next from it; the same keys
 *     and cursor written as a fresh SCAN reply walk the same; scan_rewrite to another cursor
 *     walks the same keys with that cursor as *next;
 *   - each key walked, deleted with encode_delete, parses back (parse_request) as one request of
 *     one key whose routing bytes are that key;
 *   - encode_walk with the cursor walked to parses as a SCAN of that cursor (Redis), or is
 *     "lru_crawler metadump all" (memcached, a command the proxy's client parser refuses).
 */
#include "codec.h"
#include "mc.h"
#include "codec_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CAP 64
#define MAX_KEYS 4096
#define MC_KEY_MAX 250

static void check(int ok)
{
    if (!ok)
        __builtin_trap();
}

/* The keys a walk gave, copied (a memcached key lives in walk_page's buffer only during fn). */
typedef struct keys {
    const char *lo, *hi; /* Redis: the reply's bytes, where every key must lie */
    size_t n;
    char *k[MAX_KEYS];
    size_t len[MAX_KEYS];
} keys;

static void on_key(void *arg, const char *key, size_t len)
{
    keys *ks = arg;
    if (ks->lo != NULL)
        check(key >= ks->lo && key + len <= ks->hi);
    else
        check(len >= 1 && len <= MC_KEY_MAX);
    if (ks->n == MAX_KEYS)
        return;
    ks->k[ks->n] = malloc(len ? len : 1);
    check(ks->k[ks->n] != NULL);
    memcpy(ks->k[ks->n], key, len);
    ks->len[ks->n++] = len;
}

static void keys_free(keys *ks)
{
    for (size_t i = 0; i < ks->n; i++)
        free(ks->k[i]);
    ks->n = 0;
}

static bool keys_equal(const keys *a, const keys *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (a->len[i] != b->len[i] || memcmp(a->k[i], b->k[i], a->len[i]) != 0)
            return false;
    return true;
}

/* walk_page over r into ks (its keys' bounds set for Redis). */
static int walk(const px_codec *c, const px_reply *r, uint64_t *next, keys *ks)
{
    ks->n = 0;
    ks->lo = c == &px_codec_redis ? r->p : NULL;
    ks->hi = c == &px_codec_redis ? r->p + r->len : NULL;
    *next = 12345;
    int rc = c->walk_page(r, next, on_key, ks);
    check(rc == 0 || rc == -1);
    if (c == &px_codec_memcache)
        check(*next == 0);
    return rc;
}

/* buf[0, len) parses as exactly one request; into m (its arrays: args, ks). */
static void parse_one(const px_codec *c, const char *buf, size_t len, px_msg *m, px_span *args,
                      px_span *ks)
{
    px_limits lim = limits(c, false);
    *m = (px_msg){.args = args, .args_cap = CAP, .keys = ks, .keys_cap = CAP};
    size_t consumed = 0, need = 0;
    char err[160];
    check(c->parse_request(&lim, buf, len, m, &consumed, &need, err, sizeof(err)) ==
          PX_PARSE_OK);
    check(consumed == len && m->cmd != NULL && m->reject[0] == '\0');
}

/* Each key, deleted, parses back to a request of that one key. */
static void deletes(const px_codec *c, const keys *ks)
{
    for (size_t i = 0; i < ks->n; i++) {
        px_buf out = {0};
        uint8_t expect = 0;
        check(c->encode_delete(&out, ks->k[i], ks->len[i], &expect) == 0);
        px_span args[CAP], kk[CAP];
        px_msg m;
        parse_one(c, out.p, out.len, &m, args, kk);
        check(m.cmd->cls == PX_CLASS_WRITE || m.cmd->cls == PX_CLASS_MULTI);
        check(m.nkeys == 1);
        char buf[512];
        const char *k;
        size_t n = route_bytes(c, &m, 0, buf, sizeof(buf), &k);
        check(n == ks->len[i] && memcmp(k, ks->k[i], n) == 0);
        px_buf_free(&out);
    }
}

/* The request for the page after cursor parses back as that walk. */
static void walk_request(const px_codec *c, uint64_t cursor)
{
    px_buf out = {0};
    uint8_t expect = 0;
    check(c->encode_walk(&out, cursor, &expect) == 0);
    if (c == &px_codec_redis) {
        px_span args[CAP], kk[CAP];
        px_msg m;
        parse_one(c, out.p, out.len, &m, args, kk);
        check((m.cmd->flags & PX_CMD_SCAN) != 0 && m.cursor == cursor);
    } else { /* an admin command the proxy refuses from clients: not parsed as a request */
        check(expect == (uint8_t)CH_MC_CMD_LRU_CRAWLER && out.len == 26 &&
              memcmp(out.p, "lru_crawler metadump all\r\n", 26) == 0);
    }
    px_buf_free(&out);
}

static int bulk(px_buf *b, const char *p, size_t n)
{
    return px_buf_printf(b, "$%zu\r\n", n) == 0 && px_buf_append(b, p, n) == 0 &&
                   px_buf_append(b, "\r\n", 2) == 0
               ? 0
               : -1;
}

/* Redis: a page walked to 0. */
static void redis_page(const px_reply *r, uint64_t next, const keys *ks)
{
    const px_codec *c = &px_codec_redis;
    uint64_t cur;
    check(c->scan_cursor(r, &cur) == 0 && cur == next);
    /* The same keys and cursor as a fresh reply. */
    char num[24];
    int nl = snprintf(num, sizeof(num), "%llu", (unsigned long long)next);
    px_buf b = {0};
    check(px_buf_append(&b, "*2\r\n", 4) == 0 && bulk(&b, num, (size_t)nl) == 0 &&
          px_buf_printf(&b, "*%zu\r\n", ks->n) == 0);
    for (size_t i = 0; i < ks->n; i++)
        check(bulk(&b, ks->k[i], ks->len[i]) == 0);
    px_reply fresh = {.p = b.p, .len = b.len, .kind = PX_REPLY_VALUE};
    keys again;
    uint64_t n2;
    check(walk(c, &fresh, &n2, &again) == 0 && n2 == next && keys_equal(ks, &again));
    keys_free(&again);
    px_buf_free(&b);
    /* Rewritten to another cursor. */
    uint64_t want = next * 31 + 7;
    px_buf rw = {0};
    check(c->scan_rewrite(&rw, r, want) == 0);
    px_reply moved = {.p = rw.p, .len = rw.len, .kind = PX_REPLY_VALUE};
    check(walk(c, &moved, &n2, &again) == 0 && n2 == want && keys_equal(ks, &again));
    keys_free(&again);
    px_buf_free(&rw);
}

/* memcached: a dump walked to 0; its keys URL-encoded again walk the same. */
static void mc_page(const keys *ks)
{
    static const char hex[] = "0123456789ABCDEF";
    px_buf b = {0};
    for (size_t i = 0; i < ks->n; i++) {
        check(px_buf_append(&b, "key=", 4) == 0);
        for (size_t k = 0; k < ks->len[i]; k++) {
            unsigned char ch = (unsigned char)ks->k[i][k];
            char e[3] = {'%', hex[ch >> 4], hex[ch & 15]};
            bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                         (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.';
            check(px_buf_append(&b, plain ? (const char *)&ks->k[i][k] : e, plain ? 1 : 3) ==
                  0);
        }
        check(px_buf_append(&b, " exp=-1 la=1 cas=2 fetch=no cls=1 size=64\n", 42) == 0);
    }
    check(px_buf_append(&b, "END\r\n", 5) == 0);
    px_reply dump = {.p = b.p, .len = b.len, .kind = PX_REPLY_OK};
    keys again;
    uint64_t next;
    check(walk(&px_codec_memcache, &dump, &next, &again) == 0 && keys_equal(ks, &again));
    keys_free(&again);
    px_buf_free(&b);
}

/* One page: walked, and when it walks to 0 its other contracts. */
static void page(const px_codec *c, const px_reply *r)
{
    keys *ks = malloc(sizeof(*ks));
    check(ks != NULL);
    uint64_t next;
    if (walk(c, r, &next, ks) == 0 && ks->n < MAX_KEYS) {
        if (c == &px_codec_redis)
            redis_page(r, next, ks);
        else
            mc_page(ks);
        deletes(c, ks);
        walk_request(c, next);
    }
    keys_free(ks);
    free(ks);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const px_codec *c = (data[0] & 1) != 0 ? &px_codec_memcache : &px_codec_redis;
    data++;
    size--;
    /* Copied to a buffer of the exact size, so ASan catches any read past it. */
    char *buf = malloc(size ? size : 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data, size);
    px_reply whole = {.p = buf, .len = size, .kind = PX_REPLY_VALUE};
    page(c, &whole);

    px_limits blim = limits(c, true);
    px_buf req = {0};
    uint8_t expect = 0;
    check(c->encode_walk(&req, 0, &expect) == 0);
    px_buf_free(&req);
    for (size_t off = 0; off < size;) {
        px_reply r;
        size_t consumed = 0, need = 0;
        char err[160];
        if (c->scan_reply(&blim, expect, buf + off, size - off, &r, &consumed, &need, err,
                          sizeof(err)) != PX_PARSE_OK)
            break;
        check(consumed > 0 && consumed <= size - off);
        check(r.p >= buf + off && r.p + r.len <= buf + off + consumed);
        page(c, &r);
        off += consumed;
    }
    free(buf);
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * codec_fuzz.c — libFuzzer target for the Redis codec's own parsing beyond resp.c
 * (proxy/proto/resp_codec.c; built and run by fuzz/run.sh codec): what it reads of requests
 * (key specs, SCAN's cursor, SCRIPT's subcommands) and of backend replies (SCAN replies, pub/sub
 * pushes, the parts merged for SCRIPT and MGET).
 *
 * Each input is read as a stream of requests and, separately, as a stream of replies. Contracts
 * checked, trapping on a violation:
 *   - parse_request OK: every argument and key span lies inside the request; a request not
 *     rejected re-encodes (encode_request, all its keys) into bytes that parse again to the same
 *     command and argument count.
 *   - scan_cursor OK on a reply: scan_rewrite with any cursor gives one complete reply whose
 *     cursor scan_cursor reads back as that cursor.
 *   - push_kind and merge_part/merge_end (SCRIPT EXISTS, SCRIPT LOAD, MGET, in RESP2 and RESP3)
 *     take any reply, and what merge_end writes is one complete reply.
 *   - scan_reply's kind: a push exactly when the reply is one (its type after any attribute).
 *   - answer_local (HELLO, CLIENT, AUTH, INFO, PING...) in RESP2 and RESP3, with a password and
 *     without: its answer is one complete reply (or nothing: CLIENT REPLY OFF and SKIP), a
 *     switched dialect is 2's or 3's, and what it sets lies inside the request.
 */
#include "codec.h"
#include "resp.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CAP 64

static void check(int ok)
{
    if (!ok)
        __builtin_trap();
}

static px_limits limits(void)
{
    ch_resp_limits d;
    ch_resp_limits_init(&d);
    return (px_limits){.max_request = 1u << 20, .max_args = d.max_args, .max_value = d.max_bulk,
                       .max_line = d.max_inline, .max_key = d.max_bulk, .max_depth = 8};
}

/* A fixed request, parsed, for the merges (its spans point into text). */
static void fixed(const char *text, px_msg *m, px_span *args, px_span *keys)
{
    px_limits lim = limits();
    size_t consumed, need;
    char err[128];
    *m = (px_msg){.args = args, .args_cap = CAP, .keys = keys, .keys_cap = CAP};
    check(px_codec_redis.parse_request(&lim, text, strlen(text), m, &consumed, &need, err,
                                       sizeof(err)) == PX_PARSE_OK);
}

/* Whether out[0, len) is exactly one complete reply. */
static bool one_reply(const char *p, size_t len)
{
    ch_resp_reply rr;
    size_t need;
    return ch_resp_scan_reply(p, len, NULL, &rr, &need, NULL, 0) == CH_RESP_OK && rr.len == len;
}

static int info_text(void *arg, px_buf *out)
{
    (void)arg;
    static const char text[] = "# Proxy\r\na:1\r\n\r\n# Replication\r\nrole:master\r\n";
    return px_buf_append(out, text, sizeof(text) - 1);
}

static int clients_text(void *arg, bool self, px_buf *out)
{
    (void)arg;
    return px_buf_printf(out, "id=1 name=x resp=3\n%s", self ? "" : "id=2 name= resp=2\n");
}

/* A local command m answered in both dialects, with and without a password. */
static void local(const px_msg *m)
{
    for (int v = 0; v < 4; v++) {
        px_local ctx = {.password = v >= 2 ? "pw" : NULL, .authed = v == 3,
                        .dialect = (uint8_t)(v & 1), .id = 7, .name = v & 1 ? "nm" : NULL,
                        .name_len = v & 1 ? 2 : 0, .info = info_text,
                        .clients = clients_text};
        px_buf out = {0};
        int rc = px_codec_redis.answer_local(&ctx, m, &out);
        check(rc >= -1 && rc <= 1);
        if (rc >= 0) {
            check(out.len == 0 ? ctx.reply_mode != PX_REPLIES_ON : one_reply(out.p, out.len));
            check(rc == 0 || (out.len > 0 && (out.p[0] == '-' || out.p[0] == '!')));
        }
        check(ctx.dialect == PX_DIALECT_RESP2 || ctx.dialect == PX_DIALECT_RESP3);
        const px_span *set[] = {ctx.set_name ? &ctx.name_to : NULL,
                                ctx.set_lib_name ? &ctx.lib_name_to : NULL,
                                ctx.set_lib_ver ? &ctx.lib_ver_to : NULL};
        for (size_t i = 0; i < 3; i++)
            check(set[i] == NULL || set[i]->off + (size_t)set[i]->len <= m->len);
        px_buf_free(&out);
    }
}

static void requests(const char *buf, size_t len)
{
    const px_codec *c = &px_codec_redis;
    px_limits lim = limits();
    size_t off = 0;
    while (off < len) {
        px_span args[CAP], keys[CAP];
        px_msg m = {.args = args, .args_cap = CAP, .keys = keys, .keys_cap = CAP};
        size_t consumed = 0, need = 0;
        char err[160];
        if (c->parse_request(&lim, buf + off, len - off, &m, &consumed, &need, err,
                             sizeof(err)) != PX_PARSE_OK)
            return;
        check(consumed > 0 && consumed <= len - off);
        off += consumed;
        if (m.nargs == 0 || m.nargs > CAP || m.nkeys > CAP || m.cmd == NULL)
            continue;
        for (size_t i = 0; i < m.nargs; i++)
            check(m.args[i].off + (size_t)m.args[i].len <= m.len);
        for (size_t i = 0; i < m.nkeys; i++)
            check(m.keys[i].off + (size_t)m.keys[i].len <= m.len);
        if (m.reject[0] == '\0' && m.cmd->cls == PX_CLASS_LOCAL)
            local(&m);
        if (m.reject[0] != '\0' || m.cmd->cls == PX_CLASS_LOCAL)
            continue;
        uint32_t idx[CAP];
        for (size_t i = 0; i < m.nkeys; i++)
            idx[i] = (uint32_t)i;
        px_buf out = {0};
        uint8_t expect;
        check(c->encode_request(&out, &m, idx, m.nkeys, &expect) == 0);
        px_span a2[CAP], k2[CAP];
        px_msg m2 = {.args = a2, .args_cap = CAP, .keys = k2, .keys_cap = CAP};
        size_t c2, n2;
        check(c->parse_request(&lim, out.p, out.len, &m2, &c2, &n2, err, sizeof(err)) ==
              PX_PARSE_OK);
        check(c2 == out.len && m2.cmd == m.cmd && m2.nargs == m.nargs);
        px_buf_free(&out);
    }
}

static void replies(const char *buf, size_t len)
{
    const px_codec *c = &px_codec_redis;
    px_limits lim = limits();
    px_span ea[CAP], ek[CAP], la[CAP], lk[CAP], ma[CAP], mk[CAP], m3a[CAP], m3k[CAP];
    px_msg exists, load, mget, mget3;
    fixed("*4\r\n$6\r\nSCRIPT\r\n$6\r\nEXISTS\r\n$1\r\na\r\n$1\r\nb\r\n", &exists, ea, ek);
    fixed("*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n$1\r\nx\r\n", &load, la, lk);
    fixed("*3\r\n$4\r\nMGET\r\n$1\r\na\r\n$1\r\nb\r\n", &mget, ma, mk);
    fixed("*3\r\n$4\r\nMGET\r\n$1\r\na\r\n$1\r\nb\r\n", &mget3, m3a, m3k);
    mget3.dialect = PX_DIALECT_RESP3;
    px_merger *me = c->merge_begin(&exists), *ml = c->merge_begin(&load),
              *mm = c->merge_begin(&mget), *m3 = c->merge_begin(&mget3);
    check(me != NULL && ml != NULL && mm != NULL && m3 != NULL);
    uint32_t first = 0, second = 1;
    uint32_t both[2] = {0, 1};
    size_t off = 0;
    while (off < len) {
        px_reply r;
        size_t consumed = 0, need = 0;
        char err[128];
        if (c->scan_reply(&lim, 0, buf + off, len - off, &r, &consumed, &need, err,
                          sizeof(err)) != PX_PARSE_OK)
            break;
        check(consumed > 0 && consumed <= len - off);
        ch_resp_reply rr;
        size_t n3;
        check(ch_resp_scan_reply(buf + off, consumed, &(ch_resp_limits){1 << 20, 512u << 20,
                                                                       SIZE_MAX, 1 << 16, 8},
                                 &rr, &n3, NULL, 0) == CH_RESP_OK);
        check((r.kind == PX_REPLY_PUSH) == (rr.type == CH_RESP_PUSH));
        off += consumed;
        uint64_t cur;
        if (c->scan_cursor(&r, &cur) == 0) {
            uint64_t want = cur * 2654435761u + consumed;
            px_buf out = {0};
            check(c->scan_rewrite(&out, &r, want) == 0);
            px_reply r2;
            size_t c2, n2;
            check(c->scan_reply(&lim, 0, out.p, out.len, &r2, &c2, &n2, err, sizeof(err)) ==
                  PX_PARSE_OK);
            check(c2 == out.len);
            uint64_t back;
            check(c->scan_cursor(&r2, &back) == 0 && back == want);
            px_buf_free(&out);
        }
        int k = c->push_kind(&r);
        check(k == PX_PUSH_OTHER || k == PX_PUSH_MESSAGE || k == PX_PUSH_CONFIRM);
        c->merge_part(me, &exists, both, 1, &r);
        c->merge_part(ml, &load, both, 1, &r);
        c->merge_part(mm, &mget, both, 2, &r);
        c->merge_part(m3, &mget3, (off & 1) ? &first : &second, 1, &r);
    }
    struct {
        px_merger *mg;
        const px_msg *m;
    } ends[] = {{me, &exists}, {ml, &load}, {mm, &mget}, {m3, &mget3}};
    for (size_t i = 0; i < 4; i++) {
        px_buf out = {0};
        check(c->merge_end(ends[i].mg, ends[i].m, &out) >= 0);
        check(off == 0 || one_reply(out.p, out.len)); /* parts were merged (the proxy's case) */
        px_buf_free(&out);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Copied to a buffer of the exact size, so ASan catches any read past it. */
    char *buf = malloc(size ? size : 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data, size);
    requests(buf, size);
    replies(buf, size);
    free(buf);
    return 0;
}

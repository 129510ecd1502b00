/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mcbin_fuzz.c — libFuzzer target for memcached's binary protocol as the proxy translates it
 * (proxy/proto/mc_bin.c; built and run by fuzz/run.sh mcbin).
 *
 * The input is a client's byte stream on a binary connection, framed request by request with
 * px_mcb_request as client.c frames it (a body limit of 1 MiB). Contracts checked, trapping on a
 * violation:
 *   - a verdict other than AGAIN consumes 1..len bytes; AGAIN asks for more than there is;
 *   - an answer made at the edge, and every reply translated, is a sequence of well-formed
 *     binary responses: magic 0x81, the request's opcode and opaque, extras + key <= body, the
 *     body exactly what follows;
 *   - a request forwarded is one whole meta request to the memcache codec (parse_request
 *     consumes exactly the translation), whose key routes by the bytes the client sent;
 *   - its reply translated from two of a set of meta, text and error replies memcached or the
 *     proxy may give it (picked by the request's opaque), and from the stream's next bytes
 *     taken as a reply, is well-formed;
 *   - SASL PLAIN's user and password lie inside the request's value;
 *   - a run of quiet gets (px_mcb_batch, tried first at each request as client.c does) is one
 *     whole gets request with a key per get, each the bytes its frame sent; its reply
 *     translated from the values of all its keys is one response per get, in order, with that
 *     get's opcode and opaque (and the noop's last, when it came with the run); from END
 *     alone, nothing but the noop's; from an error, one per get; from a keywise merge (an
 *     error line in some keys' places) one per get again; and from the stream's next bytes,
 *     well-formed.
 */
#include "codec.h"
#include "codec_util.h"
#include "mc_bin.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        __builtin_trap();
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* out[0, len) is zero or more responses to opcode op with opaque opq. */
static void well_formed(const px_buf *out, uint8_t op, const uint8_t opq[4], bool any_op)
{
    size_t at = 0;
    while (at < out->len) {
        check(out->len - at >= PX_MCB_HEADER);
        const unsigned char *h = (const unsigned char *)out->p + at;
        check(h[0] == PX_MCB_MAGIC_RES);
        check(any_op || h[1] == op);
        check(any_op || memcmp(h + 12, opq, 4) == 0);
        size_t klen = (size_t)h[2] << 8 | h[3], elen = h[4], body = be32(h + 8);
        check(elen + klen <= body);
        check(out->len - at - PX_MCB_HEADER >= body);
        at += PX_MCB_HEADER + body;
    }
}

static const char *const replies[] = {
    "", "EN\r\n", "HD\r\n", "HD c12 f3\r\n", "VA 3 f1 c9\r\nabc\r\n", "VA 0\r\n\r\n",
    "VA 2 c5\r\n42\r\n", "NS\r\n", "EX\r\n", "NF\r\n", "MN\r\n", "VERSION 1.2.3\r\n",
    "ERROR\r\n", "CLIENT_ERROR bad command line format\r\n",
    "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
    "SERVER_ERROR object too large for cache\r\n", "SERVER_ERROR out of memory\r\n",
    "SERVER_ERROR chash-proxy: no server\r\n", "CLIENT_ERROR unauthenticated\r\n",
    "VA 99 f1\r\nshort\r\n", "VA x\r\n", "HD c99999999999999999999999\r\n",
    "STAT pid 12\r\nSTAT version 0.1.0\r\nEND\r\n", "STAT a b\r\n", "STAT x\r\nEND\r\n",
};

/* out[0, len) is exactly one response per entry of the run's keys[0, n) (opcode, opaque),
 * in order, but for the entries skipped: those whose bit in skip is set. */
static void one_each(const px_buf *out, const uint8_t *keys, size_t n, const bool *skip)
{
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (skip[i])
            continue;
        check(out->len - at >= PX_MCB_HEADER);
        const unsigned char *h = (const unsigned char *)out->p + at;
        const uint8_t *e = keys + i * PX_MCB_BATCH_ENTRY;
        check(h[0] == PX_MCB_MAGIC_RES && h[1] == e[0] && memcmp(h + 12, e + 1, 4) == 0);
        at += PX_MCB_HEADER + be32(h + 8);
        check(at <= out->len);
    }
    check(at == out->len);
}

/* A run of quiet gets at buf[0, len): the batch's contracts (above). Its length, or 0. */
static size_t batch(const char *buf, size_t len, const px_codec *codec, const px_limits *lim,
                    px_buf *text, px_buf *keys, px_buf *out, px_buf *rep)
{
    size_t consumed = 0;
    uint8_t edge[8];
    long n = px_mcb_batch(buf, len, 128, 16384, text, keys, &consumed, edge);
    if (n <= 0)
        return 0;
    check(consumed >= PX_MCB_HEADER * (size_t)n && consumed <= len);
    size_t entries = keys->len / PX_MCB_BATCH_ENTRY;
    check(entries == (size_t)n || entries == (size_t)n + 1);
    px_span args[130], ks[130];
    px_msg m = {.args = args, .args_cap = 130, .keys = ks, .keys_cap = 130};
    size_t tc = 0, tn = 0;
    char err[160];
    px_parse rs = codec->parse_request(lim, text->p, text->len, &m, &tc, &tn, err, sizeof(err));
    check(rs == PX_PARSE_OK && tc == text->len && m.reject[0] == '\0' && m.nkeys == (size_t)n);
    memcpy(m.edge, edge, sizeof(m.edge));
    m.flags |= PX_MSG_KEYWISE;
    m.edge_keys = (const uint8_t *)keys->p;
    m.edge_keys_len = keys->len;
    size_t at = 0;
    for (size_t i = 0; i < (size_t)n; i++) { /* each key the bytes its frame sent */
        const char *h = buf + at;
        size_t kl = (size_t)(unsigned char)h[2] << 8 | (unsigned char)h[3];
        check(m.keys[i].len == kl && memcmp(m.raw + m.keys[i].off, h + PX_MCB_HEADER, kl) == 0);
        at += PX_MCB_HEADER + kl;
    }
    bool none[130] = {false}, gets[130]; /* skip nothing; skip the gets (all missed) */
    for (size_t i = 0; i < entries; i++)
        gets[i] = i < (size_t)n;
    /* every key found */
    rep->len = 0;
    for (size_t i = 0; i < (size_t)n; i++)
        check(px_buf_printf(rep, "VALUE %.*s 7 1 9\r\nx\r\n", (int)m.keys[i].len,
                            m.raw + m.keys[i].off) == 0);
    check(px_buf_append(rep, "END\r\n", 5) == 0);
    out->len = 0;
    check(px_mcb_reply(out, &m, rep->p, rep->len) == 0);
    one_each(out, m.edge_keys, entries, none);
    /* none found: the noop's alone */
    out->len = 0;
    check(px_mcb_reply(out, &m, "END\r\n", 5) == 0);
    one_each(out, m.edge_keys, entries, gets);
    /* the whole request failed: every get's error */
    out->len = 0;
    check(px_mcb_reply(out, &m, "SERVER_ERROR no server\r\n", 24) == 0);
    one_each(out, m.edge_keys, entries, none);
    /* a keywise merge: the odd keys' places hold their part's error */
    rep->len = 0;
    for (size_t i = 0; i < (size_t)n; i++)
        check((i % 2 ? px_buf_append(rep, "SERVER_ERROR down\r\n", 19)
                     : px_buf_printf(rep, "VALUE %.*s 0 0\r\n\r\n", (int)m.keys[i].len,
                                     m.raw + m.keys[i].off)) == 0);
    check(px_buf_append(rep, "END\r\n", 5) == 0);
    out->len = 0;
    check(px_mcb_reply(out, &m, rep->p, rep->len) == 0);
    one_each(out, m.edge_keys, entries, none);
    /* the stream's next bytes as its reply */
    size_t rest = len - consumed;
    out->len = 0;
    if (px_mcb_reply(out, &m, buf + consumed, rest > 4096 ? 4096 : rest) == 0)
        well_formed(out, 0, NULL, true);
    return consumed;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    const px_codec *codec = &px_codec_memcache;
    px_limits lim = limits(codec, false);
    size_t off = 0;
    px_buf text = {0}, out = {0}, bkeys = {0}, rep = {0};
    px_span args[64], keys[64];
    while (off < size) {
        size_t run = batch(buf + off, size - off, codec, &lim, &text, &bkeys, &out, &rep);
        if (run > 0) {
            off += run;
            continue;
        }
        px_mcb_frame f;
        uint8_t edge[8];
        size_t consumed = 0, need = 0;
        text.len = 0;
        px_mcb_verdict v = px_mcb_request(buf + off, size - off, lim.max_request, &f, &consumed,
                                          &need, &text, &text, edge);
        if (v == PX_MCB_NOMEM)
            break;
        if (v == PX_MCB_AGAIN) {
            check(need > size - off);
            break;
        }
        check(consumed >= 1 && consumed <= size - off);
        if (v == PX_MCB_ANSWER) {
            well_formed(&text, f.opcode, f.opaque, false);
            check(text.len > 0);
            if (f.close)
                break;
        } else if (v == PX_MCB_SASL) {
            px_span u, p;
            if (f.opcode == PX_MCB_OP_SASL_AUTH && px_mcb_sasl_plain(&f, &u, &p)) {
                check(u.len > 0 && (size_t)u.off + u.len <= f.vlen);
                check((size_t)p.off + p.len <= f.vlen);
            }
        } else {
            check(v == PX_MCB_FORWARD);
            px_msg m = {.args = args, .args_cap = 64, .keys = keys, .keys_cap = 64};
            size_t tc = 0, tn = 0;
            char err[160];
            px_parse rs = codec->parse_request(&lim, text.p, text.len, &m, &tc, &tn, err,
                                               sizeof(err));
            check(rs == PX_PARSE_OK && tc == text.len);
            memcpy(m.edge, edge, sizeof(m.edge));
            if (m.reject[0] == '\0' && m.cmd != NULL && m.nkeys == 1) {
                char kb[4096];
                const char *k;
                size_t kl = route_bytes(codec, &m, 0, kb, sizeof(kb), &k);
                check(kl == f.keylen && memcmp(k, f.key, kl) == 0);
            }
            /* two of the canned replies, picked by the request's opaque (every one of them
             * for every request would cost ten times as much per input) */
            const size_t nrep = sizeof(replies) / sizeof(replies[0]);
            size_t pick[2] = {f.opaque[0] % nrep, f.opaque[1] % nrep};
            for (size_t j = 0; j < 2; j++) {
                size_t i = pick[j];
                out.len = 0;
                if (px_mcb_reply(&out, &m, replies[i], strlen(replies[i])) == 0)
                    well_formed(&out, f.opcode, f.opaque, false);
            }
            /* the rest of the stream as a reply */
            size_t rest = size - off - consumed;
            out.len = 0;
            if (px_mcb_reply(&out, &m, buf + off + consumed, rest > 4096 ? 4096 : rest) == 0)
                well_formed(&out, f.opcode, f.opaque, false);
        }
        off += consumed;
    }
    px_buf_free(&text);
    px_buf_free(&out);
    px_buf_free(&bkeys);
    px_buf_free(&rep);
    return 0;
}

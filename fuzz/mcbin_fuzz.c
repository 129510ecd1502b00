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
 *   - SASL PLAIN's user and password lie inside the request's value.
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    const px_codec *codec = &px_codec_memcache;
    px_limits lim = limits(codec, false);
    size_t off = 0;
    px_buf text = {0}, out = {0};
    px_span args[64], keys[64];
    while (off < size) {
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
    return 0;
}

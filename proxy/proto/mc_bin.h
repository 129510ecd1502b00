/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mc_bin.h — memcached's binary protocol as a client-side dialect of the memcache codec
 * (mc_codec.c). A client connection whose first byte is 0x80 speaks binary for its life, as
 * memcached decides (memcached.c try_read_command). Its requests are translated at the edge into
 * the equivalent meta request (mg ms md ma mn, a base64 key with the b flag when the key cannot
 * go as a token), which the codec parses as any other: every route, merge, near-cache and
 * warm-up path sees an ordinary meta request. Each reply, whatever produced it (a backend, a
 * route, a local answer, encode_error), is translated back into the binary response for that
 * request's opcode and opaque at the one place replies are written to the client (client.c).
 *
 * Pure, like mc.h: bytes in, bytes into the px_buf given; no I/O, no globals, no clock. Fuzzed
 * by fuzz/mcbin_fuzz.c.
 *
 * What a request becomes (memcached 1.6.18's proto_bin.c is the reference for every answer):
 *   get getq getk getkq        mg <key> v f c [q]
 *   a run of getq getkq (noop) gets <key1> ... <keyn> (px_mcb_batch)
 *   gat gatq gatk gatkq        mg <key> v f c T<exp> [q]
 *   touch                      mg <key> f c T<exp>
 *   set add replace (q)        ms <key> <n> F<flags> T<exp> c M<S|E|R> [C<cas>] [q]
 *                              (with a CAS: M S, a compare-and-swap, as memcached does)
 *   append prepend (q)         ms <key> <n> c M<A|P> [C<cas>] [q]
 *   delete(q)                  md <key> [C<cas>] [q]
 *   incr decr (q)              ma <key> v c D<delta> M<I|D> [N<exp> J<initial>] [C<cas>] [q]
 *                              (expiry 0xffffffff: no N J, the key is not created)
 *   noop                       mn          version    version      quit(q)   quit
 *   flush(q)                   flush_all (refused by the proxy: status 0x83)
 *   stat                       stats     (the proxy's own; with a key refused: status 0x83)
 * The quiet variants' rules are memcached's, carried by the meta q flag (mc_codec.c suppresses
 * what memcached would not send): a quiet get's miss and a quiet store's, delete's or incr's
 * success send nothing; errors are sent. A run of two or more quiet gets (getq getkq) goes as
 * one "gets <key>..." (px_mcb_batch): split by server and merged, as a text multi-get, then
 * answered key by key with each key's own opaque.
 */
#ifndef CHASH_PROXY_MC_BIN_H
#define CHASH_PROXY_MC_BIN_H

#include "codec.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PX_MCB_MAGIC_REQ 0x80
#define PX_MCB_MAGIC_RES 0x81
#define PX_MCB_HEADER 24u
#define PX_MCB_MAX_KEY 250u /* memcached's KEY_MAX_LENGTH: a longer key is a protocol error */
/* The longest key that is not ch_mc_key_plain the servers can be sent: its base64 goes as a meta
 * key token, of at most 250 characters (memcached refuses a longer one): 4 * ceil(186 / 3) = 248.
 * A longer one is refused with 0x04, the connection kept. */
#define PX_MCB_MAX_B64_KEY 186u

/* Response statuses (protocol_binary.h). */
enum {
    PX_MCB_OK = 0x00,
    PX_MCB_ENOENT = 0x01,
    PX_MCB_EEXISTS = 0x02,
    PX_MCB_E2BIG = 0x03,
    PX_MCB_EINVAL = 0x04,
    PX_MCB_NOT_STORED = 0x05,
    PX_MCB_DELTA_BADVAL = 0x06,
    PX_MCB_AUTH_ERROR = 0x20,
    PX_MCB_AUTH_CONTINUE = 0x21,
    PX_MCB_UNKNOWN_COMMAND = 0x81,
    PX_MCB_ENOMEM = 0x82,
    PX_MCB_NOT_SUPPORTED = 0x83,
    PX_MCB_TMPFAIL = 0x86,
};

/* Opcodes the proxy needs to name outside mc_bin.c. */
enum {
    PX_MCB_OP_QUIT = 0x07,
    PX_MCB_OP_NOOP = 0x0a,
    PX_MCB_OP_VERSION = 0x0b,
    PX_MCB_OP_QUITQ = 0x17,
    PX_MCB_OP_SASL_LIST = 0x20,
    PX_MCB_OP_SASL_AUTH = 0x21,
    PX_MCB_OP_SASL_STEP = 0x22,
};

/* px_msg.edge of a binary client's request: [0] its opcode, [1] PX_MCB_E_* bits, [2, 6) its
 * opaque as it came (network order: given back untouched). */
enum {
    PX_MCB_E_BINARY = 1u << 0, /* a binary client's: its reply is translated (px_mcb_reply) */
    PX_MCB_E_ANSWERED = 1u << 1, /* the reply is already a binary response: written as it is */
    PX_MCB_E_BATCH = 1u << 2,  /* a run of quiet gets (px_mcb_batch): px_msg.edge_keys holds
                                  each key's opcode and opaque, PX_MCB_BATCH_ENTRY bytes each */
};
enum { PX_MCB_BATCH_ENTRY = 5 };

/* What px_mcb_request made of the frame at the start of the buffer. */
typedef enum px_mcb_verdict {
    PX_MCB_AGAIN = 0,   /* more bytes: *need is the least total length */
    PX_MCB_FORWARD = 1, /* text holds the meta request to parse (the memcache codec) */
    PX_MCB_ANSWER = 2,  /* answer holds the binary response (an unknown opcode, a bad frame);
                           close: the connection is closed once it is out */
    PX_MCB_SASL = 3,    /* a SASL opcode: the caller answers it (px_mcb_sasl_plain) */
    PX_MCB_NOMEM = -1,
} px_mcb_verdict;

typedef struct px_mcb_frame {
    uint8_t opcode, extlen;
    uint16_t keylen;
    uint32_t bodylen;
    uint64_t cas;
    uint8_t opaque[4];  /* as it came */
    const char *key;    /* keylen bytes */
    const char *value;  /* the body after extras and key */
    size_t vlen;
    bool close;         /* PX_MCB_ANSWER: close after it */
} px_mcb_frame;

/* One binary request at the start of buf[0, len) (len > 0, buf[0] of a binary connection),
 * bodies up to max_body bytes (a longer one is answered "Too large." and the connection
 * closed: it cannot be skipped without being held). *consumed: the frame's length (all
 * verdicts but AGAIN). edge receives the request's px_msg.edge. text and answer are appended
 * to. Cost: O(frame) (the value is copied once into text). */
px_mcb_verdict px_mcb_request(const char *buf, size_t len, size_t max_body, px_mcb_frame *f,
                              size_t *consumed, size_t *need, px_buf *text, px_buf *answer,
                              uint8_t edge[8]);

/* A run of quiet gets (getq getkq) at the start of buf[0, len), complete frames of keys the
 * text protocol can carry, at most max_keys of them and a get line of at most max_line bytes,
 * with the noop right after them if it is there: served as one request, as a text multi-get
 * is, instead of one request per frame (what a client's multi-get is: libmemcached's mget
 * sends a getkq per key, then a noop). The text "gets <key>..." into text, each frame's opcode
 * and opaque into keys (PX_MCB_BATCH_ENTRY bytes each, the noop's last: the request's
 * edge_keys), the request's edge into edge (PX_MCB_E_BATCH), the frames' length into
 * *consumed. Returns how many gets it took: 0 when there are not 2 and no noop follows (the
 * first frame is then served alone, px_mcb_request). -1 when out of memory. Cost: O(frames).
 * The caller sets PX_MSG_KEYWISE on the parsed request: a failed server's keys each get its
 * error, the others their values, as when each was a request of its own. */
long px_mcb_batch(const char *buf, size_t len, size_t max_keys, size_t max_line, px_buf *text,
                  px_buf *keys, size_t *consumed, uint8_t edge[8]);

/* The binary response to the request m (m->edge set by px_mcb_request) for its reply
 * p[0, len) as the memcache codec framed it (a meta, VERSION or error reply; empty when the
 * codec swallowed it: nothing is written, but for quit's). A reply that is already binary
 * (PX_MCB_E_ANSWERED) is appended as it is. 0, or -1 when out of memory. Cost: O(len). */
int px_mcb_reply(px_buf *out, const px_msg *m, const char *p, size_t len);

/* A response header and body for opcode/opaque into out: status, extras e[0, elen), key
 * k[0, klen), value v[0, vlen), cas. 0, or -1. */
int px_mcb_response(px_buf *out, uint8_t opcode, const uint8_t opaque[4], uint16_t status,
                    uint64_t cas, const void *e, size_t elen, const void *k, size_t klen,
                    const void *v, size_t vlen);

/* SASL PLAIN (RFC 4616): the auth request f's mechanism must be "PLAIN" and its value
 * "[authzid] NUL authcid NUL passwd". true and the user and password as spans of f->value;
 * false when it is not such a message. */
bool px_mcb_sasl_plain(const px_mcb_frame *f, px_span *user, px_span *pass);

/* The users of a pool's client_auth_file (memcached's -Y file: one "user:password" a line,
 * split at the first ':'; a line may end in "\r\n"; empty lines are skipped). Immutable once
 * parsed: read by every worker. */
typedef struct px_mcb_users px_mcb_users;

/* Parses text[0, len). 0 and *out; 1 when a line is not "user:password" (*line: its number,
 * 1-based; *what: why, never its content); -1 when out of memory. */
int px_mcb_users_parse(const char *text, size_t len, px_mcb_users **out, size_t *line,
                       const char **what);
/* Whether user/pass is one of the users. Every entry is compared, each with px_equal_secret:
 * the time depends on the lengths only, never on how much of a password was right. */
bool px_mcb_users_check(const px_mcb_users *u, const char *user, size_t ulen, const char *pass,
                        size_t plen);
void px_mcb_users_free(px_mcb_users *u);

/* Whether a client's first byte says binary. */
static inline bool px_mcb_is_binary(unsigned char first)
{
    return first == PX_MCB_MAGIC_REQ;
}

#endif /* CHASH_PROXY_MC_BIN_H */

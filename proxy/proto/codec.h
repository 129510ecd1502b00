/* SPDX-License-Identifier: Apache-2.0 */
/*
 * codec.h — what the proxy core needs of a wire protocol: the seam between protocol bytes and
 * everything else (docs/PROXY.md, "Shape"). One const px_codec per protocol; a pool (and so each
 * of its client and backend connections) holds a pointer to one, chosen when the config loads.
 *
 * Every function is pure, like resp.h: it reads bytes and writes only into the px_buf or
 * structures it is given. No I/O, no globals, no clock; fuzzable. Nothing outside proto/ reads
 * or writes a protocol byte: client.c frames requests with parse_request, backend.c frames
 * replies with scan_reply, request.c merges parts with merge_*, dispatch.c answers local
 * commands with answer_local and every error with encode_error.
 *
 * The contract a codec keeps for backend.c: every request encode_request, encode_probe or
 * encode_handshake writes gets exactly one reply, so the n-th reply read on a backend connection
 * belongs to the n-th request written. Protocols with requests that get no reply (memcached's
 * noreply, the meta q flag) strip that on the way to the backend and answer or swallow at the
 * proxy (twemproxy's swallow, nc_request.c req_send_done).
 */
#ifndef CHASH_PROXY_CODEC_H
#define CHASH_PROXY_CODEC_H

#include "../buf.h"
#include "../counters.h"
#include "chash_config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct px_span {
    uint32_t off, len; /* bytes [off, off + len) of px_msg.raw */
} px_span;

/* How the parts of a request split over several servers become the client's one reply. */
typedef enum px_merge {
    PX_MERGE_ONE,    /* one part: its reply is the reply */
    PX_MERGE_ARRAY,  /* MGET: values in key order */
    PX_MERGE_SUM,    /* DEL UNLINK TOUCH EXISTS: integers summed */
    PX_MERGE_ALL_OK, /* MSET: OK unless a part failed */
    PX_MERGE_CONCAT, /* memcached get k1 k2: VALUE blocks in key order, one END */
    PX_MERGE_EVERY,  /* sent whole to every server (SCRIPT LOAD/EXISTS/FLUSH), one part each:
                        the codec checks that they agree and combines them (route_all.c) */
} px_merge;

enum {
    PX_CMD_AUTH_EXEMPT = 1u << 0, /* served before a client has authenticated (AUTH, QUIT) */
    PX_CMD_HEALTH = 1u << 1,      /* also served before AUTH when the pool has client_auth */
    PX_CMD_ONE_SERVER = 1u << 2,  /* forwarded whole: every key must have the same owner
                                     (MSETNX, EVAL with keys), else PX_ERR_CROSS_SERVER */
    PX_CMD_SCAN = 1u << 3,        /* a cursor walk over every server (route_scan.c) */
    PX_CMD_SUBSCRIBED = 1u << 4,  /* allowed in pub/sub mode besides the subscriptions (PING) */
};

/* Commands whose state lives in a backend connection: served by the client's session
 * (session.c) on a connection dedicated to that client, never on the shared ones. */
typedef enum px_session_op {
    PX_SES_NONE = 0,
    PX_SES_MULTI, PX_SES_EXEC, PX_SES_DISCARD, PX_SES_WATCH, PX_SES_UNWATCH,
    PX_SES_SUBSCRIBE, PX_SES_PSUBSCRIBE, PX_SES_UNSUBSCRIBE, PX_SES_PUNSUBSCRIBE,
} px_session_op;

/* One command, one line of its codec's table. The key spec is Redis's legacy form
 * (first key, last key, step; or a key count at an argument), reduced to what routing needs. */
typedef struct px_cmd {
    const char *name;
    uint8_t name_len;
    uint8_t cls;      /* px_cmd_class */
    uint8_t merge;    /* px_merge (PX_CLASS_MULTI) */
    uint8_t flags;    /* PX_CMD_* */
    bool retry;       /* idempotent: may go to the next candidate after a node failure */
    int8_t arity;     /* >= arity arguments (command included) */
    int8_t first_key; /* argument index of the first key; 0: no key */
    int8_t last_key;  /* -1: the last argument */
    int8_t key_step;  /* 2: key value pairs (MSET) */
    int8_t keynum_at; /* > 0: args[keynum_at] holds the key count and keys follow (EVAL: 2) */
    uint8_t local;    /* the codec's own id of a command it answers itself (PX_CLASS_LOCAL) */
    uint8_t session;  /* px_session_op: served by the client's session (session.c) */
} px_cmd;

enum {
    PX_MSG_SWALLOW = 1u << 0,      /* noreply: the client gets no reply, whatever the backend's */
    PX_MSG_ENCODED_KEYS = 1u << 1, /* keys route by codec->route_key (memcached's base64 keys) */
    PX_MSG_SILENT = 1u << 2,       /* the client asked for no reply to it (Redis's CLIENT REPLY
                                      OFF or SKIP): it is served, its reply dropped (client.c) */
    PX_MSG_WHOLE = 1u << 3,        /* served whole, as one part, never split (a route's side
                                      request: one key, its reply that key's as it came) */
    PX_MSG_TOUCH = 1u << 4,        /* a read that gives its keys a new lifetime (memcached gat,
                                      gats, mg with T): retried as a read, but a write of them for
                                      the near cache (near_write.h) */
    PX_MSG_KEYWISE = 1u << 5,      /* a split read whose failed part is answered key by key: the
                                      merge puts the part's error in each of its keys' places
                                      (a binary memcached client's run of quiet gets, whose every
                                      key is a request of its own to that client) */
};

/* A client connection's dialect of its pool's protocol (px_msg.dialect): codec-defined, 0 the
 * protocol's first. Redis: RESP2 until HELLO 3 switches the connection to RESP3. The replies a
 * client gets are its dialect's; the backend connection its requests go over speaks it too
 * (px_codec.backend_dialects). */
enum { PX_DIALECT_RESP2 = 0, PX_DIALECT_RESP3 = 1 };

/* One parsed request. Spans point into raw; args and keys are arrays the caller gives (their
 * capacities in args_cap, keys_cap): when nargs > args_cap or nkeys > keys_cap, parse_request
 * returned PX_PARSE_OK without filling them all, and the caller retries with more room. */
typedef struct px_msg {
    const char *raw;
    size_t len;          /* the request's bytes */
    const px_cmd *cmd;   /* NULL: not in the table (args[0] names it) */
    px_span *args;
    size_t nargs, args_cap;
    px_span *keys;       /* found from cmd's key spec, in argument order */
    size_t nkeys, keys_cap;
    uint32_t flags;      /* PX_MSG_* */
    char reject[128];    /* not empty: the request is refused with this client error (bad
                            arity, a bad key count): answered at once, the connection kept */
    bool reject_server;  /* ...framed as a server error (memcached: an item too large) */
    uint8_t proto[16];   /* codec-private facts about the request (noreply, quiet, ...) */
    uint64_t cursor;     /* PX_CMD_SCAN: the client's cursor as parse_request read it; the
                            route replaces it with the chosen server's own before encoding */
    uint8_t dialect;     /* its client connection's (PX_DIALECT_*): set by the caller after
                            parse_request, which leaves it as it was */
    uint8_t edge[8];     /* its client dialect's facts about it that the translation of its
                            reply needs, set by the caller after parse_request (memcached's
                            binary protocol: opcode and opaque, proto/mc_bin.h); zero: none */
    const uint8_t *edge_keys; /* the same per key, edge_keys_len bytes, copied with the request
                                 (px_rq_new) (a binary run of quiet gets: each key's opcode and
                                 opaque); NULL: none */
    size_t edge_keys_len;
} px_msg;

typedef enum px_reply_kind {
    PX_REPLY_VALUE,   /* a value, or an array of them */
    PX_REPLY_MISS,    /* a null / not found */
    PX_REPLY_OK,      /* a status (+OK, STORED, ...) */
    PX_REPLY_INTEGER, /* integer holds it */
    PX_REPLY_ERROR,   /* the server's own error reply: not a node failure */
    PX_REPLY_FAILED,  /* no reply: made by backend.c on a node failure; p, len: the reason */
    PX_REPLY_PUSH,    /* out-of-band data (RESP3's ">"): never the reply to a request; a
                         dedicated connection's owner gets it (px_conn_owner.push), a shared
                         connection drops it */
} px_reply_kind;

typedef struct px_reply {
    const char *p;
    size_t len; /* the reply's bytes, valid during the callback */
    px_reply_kind kind;
    int64_t integer; /* PX_REPLY_INTEGER: the value; an array: its element count */
} px_reply;

typedef enum px_parse {
    PX_PARSE_OK = 0,
    PX_PARSE_AGAIN = 1,    /* more bytes needed: *need is the least total length */
    PX_PARSE_BAD = -1,     /* a protocol error: the stream cannot be resynchronized */
    PX_PARSE_TOO_BIG = -2, /* over a limit */
} px_parse;

/* A codec's limits on one direction of a pool's traffic (filled by px_codec.limits). */
typedef struct px_limits {
    size_t max_request; /* bytes of one request */
    size_t max_args;    /* arguments (or keys) of one request */
    size_t max_value;   /* bytes of one value (a RESP bulk, a memcached item) */
    size_t max_line;    /* bytes of a text line (an inline command, a memcached line) */
    size_t max_key;     /* bytes of a key (memcached: 250) */
    unsigned max_depth; /* nesting of reply arrays */
} px_limits;

/* How an error is framed. */
typedef enum px_error {
    PX_ERR_SERVER,  /* the proxy or a backend could not serve it (-ERR / SERVER_ERROR) */
    PX_ERR_CLIENT,  /* the request is wrong (-ERR / CLIENT_ERROR) */
    PX_ERR_UNKNOWN, /* a command the proxy does not serve (msg: its printable name) */
    PX_ERR_NOAUTH,  /* AUTH first (msg unused) */
    PX_ERR_CROSS_SERVER, /* the keys of a one-server command have different owners */
    PX_ERR_TRYAGAIN, /* refused for now, served again later: its writes cannot be staged while
                        a membership change is (Redis Cluster's -TRYAGAIN; msg: why) */
} px_error;

/* What the proxy answers itself within a transaction. */
typedef enum px_txn_reply {
    PX_TXN_OK,       /* MULTI, DISCARD, UNWATCH answered without a server (+OK) */
    PX_TXN_EMPTY,    /* EXEC of a transaction with nothing queued (an empty array) */
    PX_TXN_NIL,      /* EXEC not run (a null array, as after a WATCHed key changed) */
    PX_TXN_EXECABORT, /* EXEC of a transaction refused while queueing (Redis's -EXECABORT) */
} px_txn_reply;

/* CLIENT REPLY's modes (px_local.reply_mode). */
typedef enum px_reply_mode { PX_REPLIES_ON, PX_REPLIES_OFF, PX_REPLIES_SKIP } px_reply_mode;

/* What answer_local may look at and change of the client and the proxy. */
typedef struct px_local {
    const char *password; /* what the client must AUTH with; NULL: none */
    bool authed;          /* in and out */
    bool auth_blocked;    /* in: too many failed AUTHs from this client's address or
                             connection: an AUTH is refused without being compared */
    bool auth_failed;     /* out: this request was an AUTH with a wrong password */
    bool close;           /* out: close the client once this reply is out (QUIT) */
    bool subscribed;      /* in: the client is in pub/sub mode (PING answers as Redis does there) */
    /* The INFO text (not framed), or -1 when out of memory. */
    int (*info)(void *arg, px_buf *out);
    void *info_arg;
    /* The connection as HELLO and CLIENT see it. */
    uint64_t id;          /* in: unique in the process (CLIENT ID, HELLO's id) */
    uint8_t dialect;      /* in and out: PX_DIALECT_* (HELLO switches it) */
    bool pinned;          /* in: the client holds backend connections of its dialect (a
                             transaction, WATCH, subscriptions): HELLO may not change it */
    const char *name;     /* in: its name (CLIENT SETNAME), name_len bytes; NULL: none */
    size_t name_len;
    px_reply_mode reply_mode; /* in and out: CLIENT REPLY's */
    bool silent;          /* in: this request's reply is dropped (its mode); out: cleared by a
                             request that replies whatever the mode (CLIENT REPLY ON) */
    /* out: what the request sets on the connection, as spans of m->raw, applied by the caller
     * once answer_local returns: its name (an empty one clears it), its library's name and
     * version (CLIENT SETINFO). */
    bool set_name, set_lib_name, set_lib_ver;
    px_span name_to, lib_name_to, lib_ver_to;
    /* CLIENT LIST (self false: the pool's clients, one line each) and CLIENT INFO (self true:
     * this connection's line), not framed; 0, or -1 when out of memory. */
    int (*clients)(void *arg, bool self, px_buf *out);
    void *clients_arg;
    /* Client-side caching (CLIENT TRACKING; proxy/client_track.h). in: the client's tracking
     * now (px_tracking), and why its pool cannot serve it (NULL: it can); out: track_set when
     * the request sets it, to track_to, applied by the caller. */
    uint8_t tracking;
    const char *track_refused;
    bool track_set;
    uint8_t track_to;
    /* in: CLIENT CACHING yes|no was the client's last command (this request's choice, in
     * OPTIN or OPTOUT mode); out: caching_set, this request is CLIENT CACHING (the next's) */
    bool caching, caching_set;
    /* BCAST: in, the client's prefixes now (TRACKINGINFO); out, with track_to's BCAST bit,
     * those the request gives, as spans of m->raw (at most PX_TRACKING_PREFIXES). */
    const char *const *prefixes;
    const uint32_t *prefix_lens;
    size_t nprefixes;
    px_span prefix_to[16];
    size_t nprefix_to;
    /* REDIRECT (RESP2's form, redir.h): in, the connection its invalidations go to now (0:
     * in-band) and whether it was found gone (TRACKINGINFO's broken_redirect), and whether an
     * id is a client of the pool now (clients_arg); out, with track_set, the id it gives. */
    uint64_t redirect;
    bool redirect_broken;
    bool (*client_exists)(void *arg, uint64_t id);
    uint64_t redirect_to;
} px_local;

#define PX_TRACKING_PREFIXES 16u

/* A client's CLIENT TRACKING (px_local.tracking): 0 off, else PX_TRACKING_ON and its options'
 * bits (OPTIN: only the reads after CLIENT CACHING yes are tracked; OPTOUT: all but those after
 * CLIENT CACHING no). */
enum {
    PX_TRACKING_OFF = 0,
    PX_TRACKING_ON = 1u << 0,
    PX_TRACKING_NOLOOP = 1u << 1,
    PX_TRACKING_OPTIN = 1u << 2,
    PX_TRACKING_OPTOUT = 1u << 3,
    PX_TRACKING_BCAST = 1u << 4, /* every change of a key under its prefixes, read or not */
};

typedef struct px_merger px_merger; /* a codec's accumulator for one split request */

/* The requests of server-assisted invalidation (px_codec.encode_track). */
typedef enum px_track_op {
    PX_TRACK_NAME,    /* the link names itself, for CLIENT LIST (chash-invalidate) */
    PX_TRACK_ID,      /* the link asks its client id (an integer reply) */
    PX_TRACK_ON,      /* tracking on, its invalidations redirected to id, only for the reads
                         that ask it (opt-in) */
    PX_TRACK_CACHING, /* the next read is tracked */
    PX_TRACK_PING,    /* the link's keepalive */
    PX_TRACK_DISABLE, /* the link's own tracking off, before it is turned on in another mode
                         (BCAST: encode_track_bcast) */
} px_track_op;

typedef struct px_codec {
    const char *name; /* "redis", "memcache" */
    /* The kinds of backend connection (1 or 2): a request of dialect d goes over a connection
     * of kind d when d < backend_dialects, else of kind 0; each kind is opened with its own
     * handshake (encode_handshake's dialect). Redis: a RESP2 and a RESP3 kind, so every reply
     * reaches a client as its server wrote it for that client's dialect. */
    uint8_t backend_dialects;
    /* A pool's limits: its clients' requests (lim) and its backends' replies (blim). */
    void (*limits)(const ch_conf_pool *pc, px_limits *lim, px_limits *blim);
    /* One request at the start of buf[0, len). OK: *consumed is its length (0 < consumed;
     * a request with no command, such as an empty inline line, has m->nargs 0 and is skipped).
     * AGAIN: *need as above. BAD, TOO_BIG: err receives a one-line reason. */
    px_parse (*parse_request)(const px_limits *lim, const char *buf, size_t len, px_msg *m,
                              size_t *consumed, size_t *need, char *err, size_t errlen);
    /* One reply at the start of buf[0, len) to a request encoded with this expect code. */
    px_parse (*scan_reply)(const px_limits *lim, uint8_t expect, const char *buf, size_t len,
                           px_reply *r, size_t *consumed, size_t *need, char *err,
                           size_t errlen);
    /* The request m for its keys keys[0, nkeys) (indexes into m->keys; all of them, in order,
     * for a command that is not split), as one backend request. *expect: the code scan_reply
     * takes for its reply. 0, or -1 when out of memory. */
    int (*encode_request)(px_buf *out, const px_msg *m, const uint32_t *keys, size_t nkeys,
                          uint8_t *expect);
    /* Optional: m encoded from its argument spans m->args[0, nargs), not from its raw bytes: a
     * request whose key spans a route shortened (a prefix stripped, route_prefix.c). 0, or -1
     * when out of memory. NULL: the protocol's keys cannot be rewritten so. */
    int (*encode_args)(px_buf *out, const px_msg *m);
    /* An error reply to a client. 0, or -1. */
    int (*encode_error)(px_buf *out, px_error why, const char *msg);
    /* The probe of an ejected server (PING / version). 0, or -1. */
    int (*encode_probe)(px_buf *out, uint8_t *expect);
    /* A rejoining server's clean-up (the rejoin journal): delete one key (its routing bytes).
     * 0, or -1. */
    int (*encode_delete)(px_buf *out, const char *key, size_t len, uint8_t *expect);
    /* Enumerating a server's keys, page by page (Redis: SCAN; memcached: one "lru_crawler
     * metadump all"), for a rejoin past its journal's bound deletes
     * those of dirty buckets: backend.c). encode_walk: the request for the page after cursor
     * (0: the first). walk_page: each key of the page reply r (its bytes as the server stores
     * them) to fn, and *next: the cursor of the next page (0: the walk is done). 0, or -1 when
     * r is not such a page (fn may have been called for some keys). */
    int (*encode_walk)(px_buf *out, uint64_t cursor, uint8_t *expect);
    int (*walk_page)(const px_reply *r, uint64_t *next,
                     void (*fn)(void *arg, const char *key, size_t len), void *arg);
    /* The i-th request sent first on a new backend connection of kind dialect (AUTH, SELECT,
     * HELLO 3), named in *what for the log. 1 written, 0 none left, -1 out of memory. */
    int (*encode_handshake)(px_buf *out, const ch_conf_pool *pc, uint8_t dialect, size_t i,
                            uint8_t *expect, const char **what);
    /* Optional (NULL: requests are never joined). Joining: requests queued back to back on one
     * backend connection, not yet written, go as one request that the server answers with one
     * write (memcached answers every get with a sendmsg of its own, so the proxy would receive a
     * TCP segment per reply; "get k1 .. kn" gets one: docs/PERFORMANCE.md, issue 18).
     * join_keys: whether the request req[0, len), encoded with code expect, may be joined;
     * where its keys are in req (*off, *klen: the bytes that name them, which the backend
     * keeps for scan_joined).
     * join: out[line, at) holds a request join_keys accepted, or one that join made, and
     * out[at, out->len) another that join_keys accepted, whose keys are out[*keys, *keys +
     * klen). Rewrites out[line, out->len) as one request for the keys of both, no longer than
     * the two were (no allocation); *keys: where the new keys are in it. 0, or -1 when they do
     * not join (the joined request would be too long; out unchanged).
     * scan_joined: scan_reply for a joined request whose keys are named by keys[0, klen) and
     * which is not its group's last (the last one's reply is scanned by scan_reply, as if it
     * stood alone). *consumed may be 0: every key missed, or an error that answers every
     * request of the group (nothing in the stream is this request's alone). r's bytes may be
     * in scratch, valid until the next call. */
    bool (*join_keys)(const char *req, size_t len, uint8_t expect, size_t *off, size_t *klen);
    int (*join)(px_buf *out, size_t line, size_t at, size_t *keys, size_t klen);
    px_parse (*scan_joined)(const px_limits *lim, uint8_t expect, const char *keys, size_t klen,
                            const char *buf, size_t len, px_buf *scratch, px_reply *r,
                            size_t *consumed, size_t *need, char *err, size_t errlen);
    /* Merging the parts of a split request (twemproxy's pre_/post_coalesce). merge_begin: NULL
     * when out of memory. merge_part: the reply to the part that served keys[0, nkeys), or an
     * error made by the proxy (kind PX_REPLY_ERROR, bytes from encode_error). merge_end: the
     * client's reply into out; frees mg; 1 when that reply is an error, 0 when not, -1 when
     * out of memory. */
    px_merger *(*merge_begin)(const px_msg *m);
    void (*merge_part)(px_merger *mg, const px_msg *m, const uint32_t *keys, size_t nkeys,
                       const px_reply *r);
    int (*merge_end)(px_merger *mg, const px_msg *m, px_buf *out);
    /* A command of class PX_CLASS_LOCAL, answered into out. 1 when the answer is an error, 0
     * when not, -1 when out of memory. */
    int (*answer_local)(px_local *ctx, const px_msg *m, px_buf *out);
    /* Optional (NULL: none). The link's tracking on, redirected to id (itself), in BCAST mode
     * for the prefixes p[0, n) (their lengths len[]; n 0: every key), besides the fills'
     * redirected tracking. 0, or -1 when out of memory. */
    int (*encode_track_bcast)(px_buf *out, uint64_t id, const char *const *p,
                              const uint32_t *len, size_t n);
    /* Optional (NULL: the protocol has no client-side caching). The invalidation push a
     * tracking client gets for key[0, len), or for every key when key is NULL (RESP3's
     * >2 invalidate [key] | null). 0, or -1 when out of memory. */
    int (*encode_invalidation)(px_buf *out, const char *key, size_t len);
    /* Optional (with encode_invalidation). The invalidation a tracking client's REDIRECT
     * target gets, as Redis writes it: a RESP3 target the push above, a RESP2 target in pub/sub
     * mode (subscribed) the message [message, __redis__:invalidate, [key] | null], any other
     * nothing; a flush's null is the tracking client's (null_resp3: RESP3's). And the push a
     * RESP3 tracking client gets when its target is gone (tracking-redir-broken, id). */
    int (*encode_redirected)(px_buf *out, uint8_t dialect, bool subscribed, const char *key,
                             size_t len, bool null_resp3);
    int (*encode_redir_broken)(px_buf *out, uint64_t id);
    /* Optional (NULL: never). Whether reply r to m is withheld from the client (memcached's
     * quiet mode: the q flag was stripped towards the backend, and its reply is dropped here). */
    bool (*suppress)(const px_msg *m, const px_reply *r);
    /* Optional: the bytes a key routes by when m has PX_MSG_ENCODED_KEYS (base64 decoded into
     * buf[0, cap)); its length, or -1 when it does not decode. */
    long (*route_key)(const px_msg *m, px_span key, char *buf, size_t cap);
    /* Warm-up after a membership change (warm.h). is_miss: whether r, the reply to read m sent
     * for one key (a split command's part for that key alone, or the whole request), says the
     * key is absent, so its previous owner may have it. encode_fetch: one request reading a
     * key (its routing bytes) with what a copy needs: its value and remaining lifetime.
     * encode_fill: the request storing that copy on another server unless the key exists
     * there (it never overwrites), from the fetch's reply; now_unix: the wall clock in
     * seconds, for protocols whose long lifetimes are absolute times. encode_fill returns 1
     * when written, 0 when the fetch found nothing to copy (absent, expired), -1 when out of
     * memory; fill_stored tells from the fill's reply: 1 stored, 0 not (the key was there),
     * -1 an error. */
    bool (*is_miss)(const px_msg *m, const px_reply *r);
    /* Optional (NULL: none). Whether a value reply to cmd for one key (a split command's part
     * for it alone) holds nothing but the key's value, so the near cache of hot keys
     * (route_near.c) may keep it and answer the same command for that key with it again
     * (Redis GET and MGET; memcached get, not gets: its CAS unique changes). */
    bool (*near_cacheable)(const px_cmd *cmd);
    /* Optional (NULL: a cacheable read's reply is kept for the near cache's TTL alone). For a
     * protocol whose cacheable read does not tell the value's remaining life (memcached get):
     * the near cache fills a hot key with encode_fetch's request instead (its value and the
     * seconds it has left), and near_fill makes of that request's reply f the reply the read m
     * would have got for its key k (bytes into out, r pointing at them with their kind and
     * integer) and the longest it may be served from the read's send (*life_ns; UINT64_MAX:
     * unbounded). 1; 0 when f is not such a reply (an error, a server without meta commands):
     * the read is then sent as it came, and not kept; -1 when out of memory. */
    int (*near_fill)(px_buf *out, const px_msg *m, size_t k, const px_reply *f, px_reply *r,
                     uint64_t *life_ns);
    int (*encode_fetch)(px_buf *out, const char *key, size_t len, uint8_t *expect);
    /* Optional: encode_fetch that also deletes the key, atomically (a write moves a key from
     * its old owner before it applies); NULL: a fetch, then encode_delete. */
    int (*encode_take)(px_buf *out, const char *key, size_t len, uint8_t *expect);
    int (*encode_fill)(px_buf *out, const char *key, size_t len, const px_reply *fetched,
                       int64_t now_unix, uint8_t *expect);
    int (*fill_stored)(const px_reply *r);

    /* Optional (NULL: the protocol has no gutter pool). The request m for its keys keys[0,
     * nkeys) (as encode_request takes them) as a gutter pool gets it (route_gutter.c,
     * docs/PROXY.md "Gutter pool"): every lifetime it gives a key capped at ttl_ms from now_ms
     * (the wall clock, ms since the epoch, for absolute lifetimes), a key it writes without one
     * given ttl_ms; a request that gives none (a read, a delete) as encode_request writes it.
     * 0; -1 when out of memory; 1 when m cannot be capped (nothing written, and why receives
     * the error the client gets). */
    int (*encode_capped)(px_buf *out, const px_msg *m, const uint32_t *keys, size_t nkeys,
                         uint64_t ttl_ms, int64_t now_ms, uint8_t *expect, char *why,
                         size_t whylen);

    /* Optional (NULL: every key a request writes is one of m->keys). Whether m may write keys
     * its key spec does not name, which the staging of a membership change cannot see
     * (session.h, px_session_refuse_unstaged) nor the near cache end by its key (near_write.h):
     * NULL when it does not, else what they are, as a clause of the client's error ("a script
     * may write keys it does not declare, ..."). at, when not NULL, receives the indexes in
     * m->args of those keys (at most PX_UNNAMED_MAX) and *nat their count: 0 when they cannot
     * be named (a script's). A key written so must share a named key's hash tag to reach its
     * own owner at all. */
    const char *(*writes_unnamed)(const px_msg *m, uint32_t *at, size_t *nat);

    /* Optional (NULL: the protocol has no SCAN): a cursor walk (PX_CMD_SCAN). scan_cursor: the
     * server's cursor in its reply r, 0 or -1 when r is not a cursor reply. scan_rewrite: r
     * with its cursor replaced by cursor, into out; 0 or -1. */
    int (*scan_cursor)(const px_reply *r, uint64_t *cursor);
    int (*scan_rewrite)(px_buf *out, const px_reply *r, uint64_t cursor);

    /* Optional (NULL: no pub/sub). What a reply read on a subscribed connection, that no
     * request waits for, is (px_push). */
    int (*push_kind)(const px_reply *r);
    /* The client's confirmation of one (un)subscription, in its dialect: op, the channel or
     * pattern (NULL: none, as UNSUBSCRIBE answers a client subscribed to nothing), the client's
     * subscriptions after it. 0, or -1. */
    int (*encode_sub_reply)(px_buf *out, uint8_t dialect, px_session_op op, const char *name,
                            size_t len, uint64_t count);
    /* The replies a transaction's commands get from the proxy itself (px_txn_reply), in the
     * client's dialect. 0, or -1. */
    int (*encode_txn)(px_buf *out, uint8_t dialect, px_txn_reply what);
    /* The command op with arguments names[0, n) (MULTI, DISCARD, SUBSCRIBE ch...: sent by the
     * proxy itself on a dedicated connection). 0, or -1. */
    int (*encode_op)(px_buf *out, px_session_op op, const char *const *names, const size_t *lens,
                     size_t n);

    /* Optional (NULL: the servers cannot tell what changed): the near cache's server-assisted
     * invalidation (track.c). encode_track: the request op (px_track_op; id: the client id a
     * tracking redirects to) into out; 0, or -1. track_keys: whether r, a push on an
     * invalidation link, is an invalidation: 1 with fn called per key it names, or with all
     * set (and fn never called) when it names none (a flush); 0 when it is something else. */
    int (*encode_track)(px_buf *out, px_track_op op, uint64_t id);
    int (*track_keys)(const px_reply *r, bool *all,
                      void (*fn)(void *arg, const char *key, size_t len), void *arg);
} px_codec;

/* The most keys px_codec.writes_unnamed names (a GEORADIUS with both STORE and STOREDIST: 2). */
#define PX_UNNAMED_MAX 4

/* A reply that arrived on a subscribed connection with no request waiting for it. */
typedef enum px_push {
    PX_PUSH_OTHER = 0, /* not one of the below: dropped */
    PX_PUSH_MESSAGE,   /* a message (message, pmessage): forwarded to the client as it is */
    PX_PUSH_CONFIRM,   /* the server's confirmation of a (un)subscription the proxy sent */
} px_push;

extern const px_codec px_codec_redis, px_codec_memcache;

/* A command name as an error may show it: printable bytes lowercased, others '?', NUL-ended
 * within cap (its length capped at cap - 1). */
void px_printable_name(char *out, size_t cap, const char *p, size_t len);

/* Whether a[0, alen) equals b[0, blen), in a time that depends on the lengths only (a password
 * compare must not tell how many leading bytes were right). */
bool px_equal_secret(const char *a, size_t alen, const char *b, size_t blen);

/* The codec of a pool: redis or memcache (pc->redis). */
const px_codec *px_codec_of(const ch_conf_pool *pc);

#endif /* CHASH_PROXY_CODEC_H */

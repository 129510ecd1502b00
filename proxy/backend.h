/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backend.h — backend servers as one worker sees them (px_server), their connections (px_conn)
 * and the commands queued on them (px_frag).
 *
 * A connection's FIFO holds every fragment whose bytes were appended to its output, in append
 * order, so the n-th reply read belongs to the n-th fragment of the FIFO.
 */
#ifndef CHASH_PROXY_BACKEND_H
#define CHASH_PROXY_BACKEND_H

#include "health_shared.h"
#include "pool.h"
#include "proto/codec.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

typedef struct px_frag px_frag;
typedef struct px_conn px_conn;

typedef enum px_frag_kind {
    PX_FRAG_FORWARD, /* serves a client request: its outcome goes to done */
    PX_FRAG_INIT,    /* the codec's handshake (AUTH, SELECT) on a new connection; reply dropped */
    PX_FRAG_PROBE,   /* the codec's probe of an ejected server */
    PX_FRAG_CLEANUP, /* a rejoining server's clean-up (a delete) before readmission */
    PX_FRAG_WALK,    /* a page of a rejoining server's keys (codec encode_walk), for the deletes */
} px_frag_kind;

/* A FORWARD fragment's outcome: its reply, or PX_REPLY_FAILED (r->p: the reason) when its
 * connection failed. Called once; the fragment is freed when it returns. */
typedef void (*px_frag_done)(px_frag *f, const px_reply *r);

/* One request written to one backend. Invariant: while queued it is in exactly one connection's
 * FIFO, and the FIFO order is the order its bytes were written, so the n-th reply read on that
 * connection belongs to the n-th fragment of the FIFO. */
struct px_frag {
    px_frag *next;
    px_frag_kind kind;
    px_frag_done done; /* FORWARD */
    void *ctx;         /* the done callback's (request.c: the px_rq) */
    void *tag;         /* and its second (request.c: the route that sent it) */
    uint64_t cid;      /* its client's id: picks the backend connection */
    uint8_t dialect;   /* its client's (px_msg.dialect): the kind of connection it goes over
                          (px_codec.backend_dialects) */
    size_t len;        /* its request bytes */
    uint64_t deadline; /* loop time (ms) by which the reply must have arrived */
    uint8_t expect;    /* the codec's reply shape for it (scan_reply) */
    bool joined;       /* sent joined with the request after it (px_codec.join): its reply is
                          scanned by scan_joined, with its keys from the connection's px_join */
    const char *what;  /* INIT: what it is, for the log ("AUTH") */
    size_t nslots;
    uint32_t slots[];  /* the request's slots it serves (request.c) */
};

/* Writes a request into out for the fragment; *expect: its reply shape. 0, or -1 when out of
 * memory. */
typedef int (*px_encode_fn)(void *arg, px_buf *out, uint8_t *expect);

/* A rejoin deletes the journal's keys, then those written during that clean-up, and so on,
 * this many rounds at most; it readmits only after a round that leaves nothing journaled
 * (px_health_readmit), else the server stays out until its next probe. */
#define PX_REJOIN_ROUNDS 8u

typedef enum px_conn_state { PX_CONN_DOWN, PX_CONN_CONNECTING, PX_CONN_UP } px_conn_state;

/* The most requests one joined request carries (px_codec.join; the codec bounds its bytes). */
#define PX_JOIN_MAX 128u

/* Joining on one shared connection (px_codec.join): the group of requests open at the end of
 * its unsent output, and the keys its replies are scanned with. Invariant: while open, wbuf ends
 * with the group's request, wbuf[line, wbuf.len), which serves the FIFO's last n fragments;
 * every fragment of the FIFO with joined set has its key in keys, in FIFO order. */
typedef struct px_join {
    bool open;            /* another request may still join the group */
    size_t line, end;     /* the group's request in wbuf */
    uint32_t n;           /* fragments it serves */
    size_t last, last_len; /* its last fragment's keys, in wbuf (px_codec.join_keys) */
    px_buf keys;          /* [2-byte length][keys] per joined fragment not yet answered, from off */
    size_t off;
    px_buf scratch;       /* a joined fragment's reply while it is handed on (scan_joined) */
} px_join;

/* The owner of a dedicated connection (px_conn_dedicated): how backend.c tells it what no
 * fragment is waiting for. Both are called on the worker's loop, never from within a call the
 * owner made into backend.c for this connection other than px_conn_send's failing at once. */
typedef struct px_conn_owner {
    /* A reply read while the FIFO is empty (NULL: that is a protocol error, as on a shared
     * connection): pub/sub's messages and confirmations. r's bytes live during the call. */
    void (*push)(void *ctx, px_conn *c, const px_reply *r);
    /* The connection failed (or its server left the pool, or the proxy is stopping): c is
     * released already and freed after this returns; the owner forgets it. */
    void (*closed)(void *ctx, px_conn *c, const char *why);
    void *ctx;
} px_conn_owner;

/* A connection to a backend server. Reconnected lazily: the first fragment sent to a DOWN
 * connection opens it; fragments sent while it connects wait in the FIFO and the output buffer. */
struct px_conn {
    px_server *server;
    px_stream *stream; /* NULL when DOWN */
    px_conn_state state;
    uint8_t dialect; /* the kind of connection it is (px_codec.backend_dialects): its handshake's,
                        and the dialect of its replies */
    px_buf wbuf; /* written on the next flush, when UP */
    px_buf rbuf; /* reply bytes read, not yet matched */
    size_t need; /* rbuf must reach this length before scanning again */
    px_frag *head, *tail;
    size_t nfrags, nunsent;       /* in the FIFO; not yet handed to the kernel */
    size_t bytes, unsent_bytes;   /* their request bytes */
    uv_timer_t timer;             /* the FIFO head's deadline */
    px_flushable flush;           /* marked when wbuf has bytes to write */
    px_join join;                 /* shared connections of a codec that joins */
    void *tls_session;            /* TLS: the session its next connect offers (tls.h) */
    /* A dedicated connection: one client's alone, outside s->conns, never reopened. */
    bool dedicated;
    bool released;      /* its owner let go: closed once its FIFO is empty; no more pushes */
    bool disposed;      /* closed: freed when its timer's close callback runs */
    px_conn *next_dedicated; /* the server's list */
    px_conn_owner owner;
};

/* A server's tracking of the near cache's reads on one worker (track.c owns it): its
 * invalidation link (NULL: none), the link's client id at the server while live (0 otherwise:
 * a fill sent to the server is tracked with it, request.c), the state (px_track_state), when a
 * link may open again and the wait after the next failure, and whether its health was up at the
 * last tick (a change is a flush). */
typedef struct px_server_track {
    struct px_track_link *link;
    uint64_t id;
    uint64_t retry_at; /* loop ms */
    uint32_t backoff_ms;
    uint8_t state;
    bool up;
    uint64_t bcast_ver; /* the BCAST prefixes' version its live link registered (0: none;
                           client_track.h) */
} px_server_track;

/* A backend server as one worker sees it: its connections from that worker, its counters (the
 * stats and metrics add every worker's up, px_snapshot). */
struct px_server {
    uint32_t uid;   /* unique in the process, kept across reloads (a request's tried set) */
    px_pool *pool;
    size_t index;                /* in the membership */
    const ch_conf_server *conf;  /* its line in the file */
    struct sockaddr_storage sa;  /* resolved at startup (TCP) */
    bool is_unix;
    /* Its shared connections: server_connections of each kind (px_codec.backend_dialects), kind
     * by kind: kind k's are conns[k * nper, (k + 1) * nper). A kind's connections are opened
     * when its first request is sent (kind 0's also at start, px_server_preconnect). */
    px_conn *conns;
    unsigned nconns, nper;
    px_conn *dedicated; /* its dedicated connections (next_dedicated), each its own allocation */
    bool probing; /* this worker has a probe of it in flight (claimed in the pool's px_health),
                     or the clean-up of its rejoin */
    unsigned cleanup_pending; /* its rejoin's clean-up requests not yet answered */
    unsigned rejoin_round;    /* clean-up rounds done in this rejoin (PX_REJOIN_ROUNDS at most) */
    bool cleanup_failed;
    px_journal_batch rejoin_batch; /* what the clean-up round deletes (given back on failure) */
    uint64_t walk_seen, walk_deleted; /* the round's walk: keys listed, deletes sent */
    px_server_stats stats;
    px_server_track track; /* its near-cache tracking on this worker (track.h) */
    /* Hot reload (reload.c): a server dropped from the pool's membership is retired: it leaves
     * the pool's array for its own allocation, in its worker's retired list, and takes no new
     * fragments; its health is no longer tracked (its index means nothing in the new
     * membership). It is closed and freed once its connections' FIFOs are empty. */
    bool retired;
    /* A moved key's old owner in its pool's warm-up window (warm.h): a retired one is not
     * reaped while set; warm_dead: it failed during the window, its keys are not looked for
     * on it any more. */
    bool warm_source, warm_dead;
    px_dl retired_link; /* in the worker's retired list while retired and not yet closing */
    px_conf *cref;      /* retired: a reference to the config its conf points into */
    unsigned closing;   /* timers whose close callback is pending; the last one frees it */
};

int px_server_init(px_pool *pool, px_server *s, size_t index, const ch_conf_server *conf);
/* px_server_init in two steps, for a reload that must not fail half way: setup resolves the
 * address and allocates (no libuv handle yet: on failure, px_server_free undoes it); start
 * initializes the connections' timers and cannot fail. */
int px_server_setup(px_pool *pool, px_server *s, size_t index, const ch_conf_server *conf);
void px_server_start(px_server *s);
/* Closes a retired (separately allocated) server's connections and frees it once its timers
 * have closed. */
void px_server_dispose(px_server *s);
/* Whether a server has fragments in flight on any of its connections. */
bool px_server_busy(const px_server *s);
void px_server_close(px_server *s); /* closes its connections (shutdown) */
void px_server_preconnect(px_server *s);
void px_server_free(px_server *s);
/* A fragment serving nslots slots (kind FORWARD, every other field 0). NULL when out of memory. */
px_frag *px_frag_new(size_t nslots);
/* Sends f (kind, cid and dialect set) to s, on the connection of f's dialect picked by f->cid so
 * one client's requests to a server keep their order: the connection is opened if down (its
 * handshake first), enc
 * writes the request into its output, f joins its FIFO. Returns 0: f belongs to the connection
 * (its outcome goes to f->done, possibly before this returns, when the connection cannot be
 * opened); -1: enc ran out of memory, f is the caller's again. */
int px_server_send(px_server *s, px_frag *f, px_encode_fn enc, void *arg);
/* After a px_server was moved (a reload's new array, a retired server's own allocation): its
 * connections, shared and dedicated, point at its new place. */
void px_server_moved(px_server *s);

/* Dedicated connections: state that lives in a backend connection (a transaction, WATCH,
 * subscriptions) needs a connection no other client writes to. One is opened at once, with the
 * codec's handshake first, and never reopened: when it fails its fragments fail as on a shared
 * connection and its owner is told (owner->closed). Its requests keep the codec's contract
 * (one reply each, in order, matched through the FIFO), except that with owner->push set a reply
 * that arrives while the FIFO is empty goes to push: pub/sub's messages and the confirmations of
 * subscriptions sent without a fragment (px_conn_send with f NULL). So the n-th reply read still
 * belongs to the n-th fragment of the FIFO as long as requests sent without a fragment are only
 * sent while the FIFO holds nothing that a push could overtake (session.c sends them only on a
 * subscribed connection, whose FIFO holds the handshake alone). A reply that is a push by its
 * type (RESP3's ">", PX_REPLY_PUSH) goes to push whatever the FIFO holds, and is dropped on a
 * shared connection: it is never taken for a request's reply.
 * Cost: a connect per dedicated connection; it is closed, never reused, when released. */
/* A connection of kind dialect (px_codec.backend_dialects); NULL when it cannot be opened or out
 * of memory. */
px_conn *px_conn_dedicated(px_server *s, uint8_t dialect, const px_conn_owner *owner);
/* Sends f on c as px_server_send does (f NULL: bytes whose replies, if any, go to push).
 * 0, or -1 when enc ran out of memory (f is the caller's again). */
int px_conn_send(px_conn *c, px_frag *f, px_encode_fn enc, void *arg);
/* The owner lets go of c: no more pushes; c closes (a MULTI or a subscription left on it dies
 * with it) once the replies of its FIFO are in. */
void px_conn_release(px_conn *c);

/* Probes the pool's ejected servers whose probe is due (each claimed in the shared health). */
void px_probe_due(px_pool *pool);
void px_frag_free(px_frag *f);

#endif /* CHASH_PROXY_BACKEND_H */

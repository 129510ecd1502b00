/*
 * backend.h — backend servers as one worker sees them (px_server), their connections (px_conn)
 * and the commands queued on them (px_frag).
 *
 * A connection's FIFO holds every fragment whose bytes were appended to its output, in append
 * order, so the n-th reply read belongs to the n-th fragment of the FIFO.
 */
#ifndef CHASH_PROXY_BACKEND_H
#define CHASH_PROXY_BACKEND_H

#include "pool.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

typedef struct px_req px_req; /* client.h */
typedef struct px_frag px_frag;
typedef struct px_conn px_conn;

typedef enum px_frag_kind {
    PX_FRAG_FORWARD, /* serves a client request */
    PX_FRAG_INIT,    /* AUTH / SELECT sent when a backend connection opens; reply dropped */
    PX_FRAG_PROBE,   /* PING of an ejected server */
} px_frag_kind;

/* A command sent to one backend. Invariant: while queued it is in exactly one connection's FIFO,
 * and the FIFO order is the order its bytes were written, so the n-th reply read on that
 * connection belongs to the n-th fragment of the FIFO. */
struct px_frag {
    px_frag *next;
    px_frag_kind kind;
    px_req *req; /* the request served (FORWARD) */
    uint64_t cid; /* its client's id: picks the backend connection */
    px_pool *pool;
    char *data; /* the command, kept for a retry */
    size_t len;
    size_t cand[PX_MAX_DEPTH]; /* candidate servers (membership indexes), owner first */
    size_t ncand, attempt;     /* cand[attempt] is the server it is sent to */
    bool retry;                /* a read: safe to send to the next candidate on failure */
    bool split;                /* a fragment of a multi-key command */
    size_t *keys;              /* PX_MERGE_MGET: the slot of each key of this fragment */
    size_t nkeys;
    uint64_t deadline; /* loop time (ms) by which the reply must have arrived */
};

typedef enum px_conn_state { PX_CONN_DOWN, PX_CONN_CONNECTING, PX_CONN_UP } px_conn_state;

/* A connection to a backend server. Reconnected lazily: the first fragment sent to a DOWN
 * connection opens it; fragments sent while it connects wait in the FIFO and the output buffer. */
struct px_conn {
    px_server *server;
    px_stream *stream; /* NULL when DOWN */
    px_conn_state state;
    px_buf wbuf; /* written on the next flush, when UP */
    px_buf rbuf; /* reply bytes read, not yet matched */
    size_t need; /* rbuf must reach this length before scanning again */
    px_frag *head, *tail;
    size_t nfrags, nunsent;       /* in the FIFO; not yet handed to the kernel */
    size_t bytes, unsent_bytes;   /* their request bytes */
    uv_timer_t timer;             /* the FIFO head's deadline */
    px_flushable flush;           /* marked when wbuf has bytes to write */
};

/* A backend server as one worker sees it: its connections from that worker, its counters (the
 * stats and metrics add every worker's up, px_snapshot). */
struct px_server {
    px_pool *pool;
    size_t index;                /* in the membership */
    const ch_conf_server *conf;  /* its line in the file */
    struct sockaddr_storage sa;  /* resolved at startup (TCP) */
    bool is_unix;
    px_conn *conns;
    unsigned nconns;
    bool probing; /* this worker has a probe of it in flight (claimed in the pool's px_health) */
    px_server_stats stats;
    /* Hot reload (reload.c): a server dropped from the pool's membership is retired: it leaves
     * the pool's array for its own allocation, in its worker's retired list, and takes no new
     * fragments; its health is no longer tracked (its index means nothing in the new
     * membership). It is closed and freed once its connections' FIFOs are empty. */
    bool retired;
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
/* Sends f to f->cand[f->attempt] (skipping ejected candidates), on the connection chosen by
 * the client's id so one client's commands to a server keep their order. */
void px_frag_dispatch(px_frag *f);
void px_probe_due(px_pool *pool);
void px_frag_free(px_frag *f);

#endif /* CHASH_PROXY_BACKEND_H */

/*
 * client.h — client connections and their requests: the per-client queue that puts replies back
 * in request order, output buffering and its limit, backpressure, closing.
 */
#ifndef CHASH_PROXY_CLIENT_H
#define CHASH_PROXY_CLIENT_H

#include "pool.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct px_client px_client;
typedef struct px_req px_req;

typedef enum px_merge {
    PX_MERGE_ONE,  /* one fragment: its reply is the reply */
    PX_MERGE_MGET, /* values into slots, in the client's key order */
    PX_MERGE_SUM,  /* integer replies summed (DEL, UNLINK, TOUCH, EXISTS) */
    PX_MERGE_OK,   /* +OK unless a fragment failed (MSET) */
} px_merge;

/* A client request. Invariant: it stays in its client's queue (while the client lives) until its
 * reply has been copied into the client's output; pending counts its fragments not yet
 * complete; it is freed when it is done and off the queue, or when it is done and its client is
 * gone (client == NULL). */
struct px_req {
    px_req *next;      /* the client's queue, in arrival order */
    px_client *client; /* NULL once the client has closed */
    unsigned pending;  /* fragments outstanding */
    bool done;
    bool close_after; /* QUIT, protocol errors: close the client once this reply is out */
    bool counted;     /* its reply bytes are in the client's `stored` */
    px_merge merge;
    px_buf reply;   /* the reply once done (for MGET: built at the end) */
    px_buf err;     /* the first error reply of a fragment (multi-key merges) */
    int64_t sum;    /* PX_MERGE_SUM */
    px_buf *slots;  /* PX_MERGE_MGET: one reply per key */
    size_t nslots;
    px_pool *pool;     /* whose metrics count it (its client's pool) */
    uint64_t t0;       /* uv_hrtime() at arrival: the latency histogram */
    uint8_t mclass;    /* px_cmd_class */
    bool observed;     /* counted in the metrics */
};

struct px_client {
    px_stream *stream;
    px_pool *pool;
    uint64_t id;
    px_dl link;          /* in the pool's client list */
    px_flushable flush;  /* marked when it has replies to write, or its state changed */
    px_buf rbuf;
    size_t need;
    px_req *head, *tail;
    size_t nreqs;
    size_t stored;   /* reply bytes of done requests waiting behind an unfinished one */
    size_t inflight; /* bytes handed to uv_write, not yet written */
    px_buf wbuf;
    bool authed;
    bool closing;  /* uv_close called (or about to be) */
    bool draining; /* no more reading: close once the queue is flushed */
    bool paused;   /* reading stopped for backpressure */
    bool shut;     /* uv_shutdown issued */
    uv_shutdown_t shutdown;
};

void px_client_accept(px_pool *pool, uv_stream_t *listener);
void px_client_close(px_client *c);
/* A request became done: move replies from the head of its client's queue to the output. */
void px_req_done(px_req *r);
void px_req_free(px_req *r);
/* A new request at the tail of the client's queue. NULL when out of memory. */
px_req *px_req_new(px_client *c);
/* Finish r at once with a literal reply. */
void px_req_reply(px_req *r, const char *data, size_t len);
void px_req_error(px_req *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* CHASH_PROXY_CLIENT_H */

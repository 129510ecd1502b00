/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client.h — client connections: the per-client queue that puts replies back in request order,
 * output buffering and its limit, backpressure, closing.
 */
#ifndef CHASH_PROXY_CLIENT_H
#define CHASH_PROXY_CLIENT_H

#include "pool.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct px_client px_client;
typedef struct px_rq px_rq; /* request.h */
typedef struct px_session px_session; /* session.h */
typedef struct px_card px_card; /* roster.h */

struct px_client {
    px_stream *stream;
    px_pool *pool;
    uint64_t id;         /* unique in the process (CLIENT ID) */
    px_card *card;       /* its entry in the pool's roster (CLIENT LIST), with its name */
    uint8_t dialect;     /* PX_DIALECT_*: its requests' (HELLO switches it) */
    uint8_t reply_mode;  /* px_reply_mode: CLIENT REPLY's */
    uint8_t tracking;    /* px_tracking: CLIENT TRACKING's */
    bool track_owed;     /* a read of it could not be tracked: a flush is owed after its reply */
    bool track_caching;  /* its last command was CLIENT CACHING yes|no: its next one's choice */
    uint32_t track;      /* its handle in pool->ctrack while tracking (client_track.h), else 0 */
    uint64_t track_redir; /* REDIRECT's target id: its invalidations go there (redir.h); 0:
                             in-band */
    bool redir_broken;   /* the target was found gone (TRACKINGINFO's broken_redirect) */
    px_dl link;          /* in the pool's client list */
    px_flushable flush;  /* marked when it has replies to write, or its state changed */
    px_buf rbuf;
    size_t need;
    px_rq *head, *tail; /* its requests, in arrival order */
    px_session *session; /* transactions, subscriptions (NULL until its first) */
    size_t nreqs;
    size_t inflight_bytes; /* request bytes of the queue (their copies live until answered) */
    size_t stored;   /* reply bytes of done requests waiting behind an unfinished one */
    size_t inflight; /* bytes handed to uv_write, not yet written */
    px_buf wbuf;
    px_buf bin;     /* a binary memcached client's request translated to meta (client_binary) */
    px_buf bin_keys; /* ...a run of quiet gets': each key's opcode and opaque (px_mcb_batch) */
    bool binary;    /* a memcached client speaking the binary protocol (its first byte 0x80) */
    bool text;      /* ...or not: decided by its first byte, for the connection's life */
    uint64_t last_read_ms; /* loop time of its last bytes (or of its accept) */
    uint64_t last_write_ms; /* loop time it last took reply bytes (or of its accept) */
    uint64_t addr_hash;    /* its peer address (not the port), for the AUTH guard */
    uint64_t partial_since; /* loop time its incomplete request began (0: none) */
    uint8_t auth_fails;    /* wrong passwords in a row */
    bool authed;
    bool closing;  /* uv_close called (or about to be) */
    bool draining; /* no more reading: close once the queue is flushed */
    bool paused;   /* reading stopped for backpressure */
    bool shut;     /* uv_shutdown issued */
    uint8_t held;  /* iterations its ready replies have waited for the rest (client_hold) */
    uv_shutdown_t shutdown;
};

void px_client_accept(px_pool *pool, uv_stream_t *listener);
void px_client_close(px_client *c);
/* An invalidation redirected to client (a px_client of this worker; px_redir_deliver). */
void px_client_redir_deliver(void *client, const char *key, size_t len, bool null_resp3);
/* Out of descriptors: closes the pool's client that has no request in flight and has been
 * silent the longest (an idle flood then rotates instead of locking everyone out). Returns
 * whether there was one. Cost: O(clients of the pool on this worker). */
bool px_client_shed_idle(px_pool *pool);
/* Once a second, by its worker: a client over max_client_buffer_bytes that has taken no reply
 * byte for PX_CLIENT_STALL_MS is closed; then the pool's timeouts (client_idle_timeout,
 * client_read_timeout): a client silent with nothing in flight beyond the first is closed; one
 * whose request has not arrived whole within the second is answered with an error and closed.
 * A client the proxy itself stopped reading (backpressure) is never timed out. Cost:
 * O(clients). */
void px_client_sweep(px_pool *pool, uint64_t now);

#endif /* CHASH_PROXY_CLIENT_H */

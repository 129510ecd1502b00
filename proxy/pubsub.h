/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pubsub.h — a session's subscriptions (pubsub.c), for session.c.
 */
#ifndef CHASH_PROXY_PUBSUB_H
#define CHASH_PROXY_PUBSUB_H

#include "request.h"

/* How a session (and its subscriptions) reaches its client: its only calls up, through the
 * pointers client.c gives. */
typedef struct px_session_hooks {
    /* Queues reply bytes p[0, len) for the client after every reply queued before (a pub/sub
     * message). */
    void (*emit)(void *arg, const char *p, size_t len);
    /* Closes the client (its subscriptions were lost with a backend connection). */
    void (*close)(void *arg);
    void *arg;
} px_session_hooks;

typedef struct px_pubsub px_pubsub;

px_pubsub *px_pubsub_new(px_pool *pool, uint64_t cid, const px_session_hooks *hooks);
void px_pubsub_free(px_pubsub *ps); /* NULL: nothing */
/* Channels and patterns subscribed (0: not in pub/sub mode). */
size_t px_pubsub_count(const px_pubsub *ps);
/* Serves a SUBSCRIBE, PSUBSCRIBE, UNSUBSCRIBE or PUNSUBSCRIBE (rq->msg.cmd->session). */
void px_pubsub_dispatch(px_pubsub *ps, px_rq *rq);

#endif /* CHASH_PROXY_PUBSUB_H */

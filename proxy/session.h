/* SPDX-License-Identifier: Apache-2.0 */
/*
 * session.h — a client's session: the state Redis keeps per connection that a proxy sharing
 * its backend connections cannot (a transaction, WATCH, subscriptions). It lives with its
 * client (client.c creates it on the first command that needs it) and holds that client's
 * dedicated backend connections (backend.h, px_conn_dedicated): one for a transaction or a
 * WATCH, on the server of its keys; one per server for subscriptions (pubsub.c).
 *
 * It calls its client only through the hooks it is given (a message to deliver, a close), so
 * it sits below client.c on the data path like a route.
 */
#ifndef CHASH_PROXY_SESSION_H
#define CHASH_PROXY_SESSION_H

#include "pubsub.h" /* px_session_hooks */
#include "request.h"

#include <stdbool.h>

typedef struct px_session px_session;

/* A session of pool's client cid; NULL when out of memory. */
px_session *px_session_new(px_pool *pool, uint64_t cid, const px_session_hooks *hooks);
/* Releases its dedicated connections (a transaction left open dies with its connection, which
 * is closed, never reused) and answers the requests it holds (their owner let go already). */
void px_session_free(px_session *ss);
/* Whether the client is in pub/sub mode (subscribed to something). */
bool px_session_subscribed(const px_session *ss);
/* Whether the client holds backend connections of its dialect (a transaction, WATCH,
 * subscriptions): its dialect (HELLO) may not change meanwhile. NULL: false. */
bool px_session_pinned(const px_session *ss);
/* Prefix routing (route_prefix.h): the pool a command's keys go to must be the session's
 * while it holds a transaction, a WATCH or a dedicated connection (they live on one server of
 * one pool); otherwise the session moves to pool. Returns whether pool is the session's now. */
bool px_session_adopt(px_session *ss, px_pool *pool);
/* The session's pool (where a keyless command of an open transaction goes). */
px_pool *px_session_pool(const px_session *ss);
/* Serves rq when it is the session's: a transaction command, a command inside a transaction or
 * after WATCH, a subscription, or any command in pub/sub mode (refused unless allowed there).
 * Returns false when rq is not the session's (dispatch serves it as usual). rq may complete,
 * and be freed, before this returns. */
bool px_session_dispatch(px_session *ss, px_rq *rq);
/* rq is refused by dispatch (an unknown command, a wrong argument count) with this error:
 * inside MULTI that also discards the transaction, as Redis does (EXEC answers -EXECABORT). */
void px_session_refuse(px_session *ss, px_rq *rq, px_error why, const char *msg);
/* While rq's pool stages a membership change (px_pool.stage), refuses rq -TRYAGAIN when it may
 * write keys it does not name (px_codec.writes_unnamed: a script that may write, a destination
 * such as RPOPLPUSH's) and a key it names moves under the change: route_stage.c deletes a
 * written key at its next owner only when it knows the key (docs/FLEET.md, "What the staging
 * refuses"). Returns whether it refused (rq is answered). For a request outside a transaction:
 * inside one, px_session_dispatch refuses every write of a moving key. Cost: one test when
 * nothing is staged, else the codec's test and two lookups per key named. */
bool px_session_refuse_unstaged(px_rq *rq);

#endif /* CHASH_PROXY_SESSION_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dispatch.h — what happens to one parsed client request: an unknown command, the auth gate and
 * a request the codec rejected are answered at once; a local command is answered by the codec;
 * everything else starts on the pool's route.
 */
#ifndef CHASH_PROXY_DISPATCH_H
#define CHASH_PROXY_DISPATCH_H

#include "request.h"
#include "session.h"

/* Serves rq (its owner and on_done set: it may complete, and be freed by its owner, before this
 * returns). ctx carries the client's auth state in and out, and out whether the client is to be
 * closed after this reply (QUIT). *session is the client's session (session.h), created here
 * with hooks when a command first needs one; session NULL: the caller has none (transactions and
 * subscriptions are refused). */
void px_dispatch(px_rq *rq, px_local *ctx, px_session **session, const px_session_hooks *hooks);

#endif /* CHASH_PROXY_DISPATCH_H */

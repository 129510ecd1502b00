/*
 * dispatch.h — what happens to one parsed client request: an unknown command, the auth gate and
 * a request the codec rejected are answered at once; a local command is answered by the codec;
 * everything else starts on the pool's route.
 */
#ifndef CHASH_PROXY_DISPATCH_H
#define CHASH_PROXY_DISPATCH_H

#include "request.h"

/* Serves rq (its owner and on_done set: it may complete, and be freed by its owner, before this
 * returns). ctx carries the client's auth state in and out, and out whether the client is to be
 * closed after this reply (QUIT). */
void px_dispatch(px_rq *rq, px_local *ctx);

#endif /* CHASH_PROXY_DISPATCH_H */

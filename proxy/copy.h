/* SPDX-License-Identifier: Apache-2.0 */
/*
 * copy.h — a key copied from one child of a route to another, detached (copy.c): a fetch fired
 * through `from`, then, when it found the key and nobody wrote the key through this worker
 * since the read that asked for the copy began (its write generation, warm.h), a store through
 * `to` that never overwrites (RESTORE without REPLACE, memcached's add). Nothing waits for it:
 * the client's answer does not. The warm-up copies a hit at a key's old owner to its new one,
 * the replica route a hit at one owner to the owner that missed (read repair).
 */
#ifndef CHASH_PROXY_COPY_H
#define CHASH_PROXY_COPY_H

#include "route.h"

typedef enum px_copy_end {
    PX_COPY_STORED,  /* stored where it was missing */
    PX_COPY_PRESENT, /* the key was there already: left as it was */
    PX_COPY_NONE,    /* nothing to copy: the value had expired meanwhile */
    PX_COPY_SKIPPED, /* written meanwhile, or the proxy is stopping: not copied */
    PX_COPY_FAILED,  /* the fetch or the store failed, errored or could not be sent */
} px_copy_end;

/* Told once how a copy ended (pool: rq's). */
typedef void (*px_copy_done)(px_pool *pool, px_copy_end end);

/* Copies key (its routing bytes) for rq, from child `from` to child `to` of a route of rq's
 * tree; gen is the key's write generation (px_warm_gen) when the read began. Cost: a fetch and
 * a store, each a side request; len bytes held meanwhile. */
void px_copy(px_rq *rq, px_route *from, px_route *to, const char *key, size_t len, uint32_t gen,
             px_copy_done done);

#endif /* CHASH_PROXY_COPY_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * warm.h — a pool's membership change without a miss storm (docs/OPERATIONS.md, "Growing and
 * shrinking without a miss storm"): for a window after a reload that changed the placement, the
 * previous placement stays as the warm source of the keys that moved.
 *
 * A moved key (its owner under the previous table is not its owner under the current one)
 * switches to its new owner at start + h(key) mod ramp (at start when there is no ramp), h being
 * XXH3-64 of its routing bytes, so every proxy given the same change switches each key at the
 * same moment. Before its switch the key is served by its old owner, reads and writes. For
 * warm_up ms after it, a read that misses at the new owner is read from the old one, answered,
 * and copied to the new owner with its remaining lifetime (a fill, sent after the reply; it
 * never overwrites); a write deletes the key at the old owner first. Keys that did not move pay
 * one lookup in the previous table. The window ends at start + ramp + warm_up.
 *
 * Invariants:
 * - a fill never stores a value older than a write made through this worker: every write of a
 *   moved key during the window bumps its bucket's generation before it is sent, and a fill
 *   whose key's generation changed since its read began is dropped (other workers and proxies:
 *   the old copy is deleted before the write is sent, so only a fill racing a delete by less
 *   than a round trip is left; docs/OPERATIONS.md);
 * - an old owner that fails, or is ejected, is skipped for the rest of the window: its keys
 *   are plain misses, as without a window;
 * - a retired server (removed by the reload) that is an old owner is kept, not reaped, until
 *   the window ends (graceful decommission); the worker reaps it after.
 * The window's state is the worker's (its pool's copy); the previous membership is the shared
 * pool's (prev), immutable, freed by the control thread once no worker points to it.
 */
#ifndef CHASH_PROXY_WARM_H
#define CHASH_PROXY_WARM_H

#include "buf.h"
#include "window.h"

#include <chash.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct px_pool px_pool; /* pool.h */

typedef enum px_warm_step {
    PX_WARM_NONE,   /* no window, the key did not move, or its old owner is out: as usual */
    PX_WARM_BEFORE, /* moved, not switched yet: its old owner serves it */
    PX_WARM_ON,     /* moved and switched: warming from its old owner */
} px_warm_step;

/* Starts pool's window (ending any other) over the previous table and its servers src[0, n)
 * (copied). Retired servers among them are kept until it ends. Cannot fail: when the copy
 * cannot be allocated there is no window. */
void px_warm_begin(px_pool *pool, const ch_table *prev, px_server *const *src, size_t n,
                   const px_warm_times *t);
/* Ends pool's window now (its time is over, a new reload, shutdown). */
void px_warm_end(px_pool *pool);
/* Whether pool has a window at loop time now (one whose time is over is ended). */
bool px_warm_open(px_pool *pool, uint64_t now);
/* Where a moved key stands in the window at loop time now, kh the XXH3-64 of its routing bytes
 * (px_rq_key_hash, px_key_hash: every proxy given the change switches it at the same moment):
 * BEFORE its switch, ON while warming, NONE after (whether it moved is the placement's
 * question: px_route_pool_moved). Cost: a division. */
px_warm_step px_warm_when(const px_pool *pool, uint64_t kh, uint64_t now);
/* The write generation of the key of hash kh; px_warm_write bumps it (a write of a moved key). */
uint32_t px_warm_gen(const px_pool *pool, uint64_t kh);
void px_warm_write(px_pool *pool, uint64_t kh);
/* The window's milliseconds left at loop time now (0: none): a worker's, or of the times a
 * shared pool holds. */
uint64_t px_warm_left(const px_pool *pool, uint64_t now);
uint64_t px_warm_times_left(const px_warm_times *t, uint64_t now);

#endif /* CHASH_PROXY_WARM_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client_track.h — client-side caching through the proxy (issue 37, item 4; docs/PROXY.md,
 * "Client-side caching"): the keys each tracking client of a pool read, per worker, so that
 * an invalidation the worker's links receive (track.c) reaches every client that read the key,
 * as Redis's own in-band RESP3 tracking would. A client lives on one worker and the links are
 * the worker's: nothing here is shared between threads.
 *
 * Which reads: every read of a client in default mode; in OPTIN mode those right after CLIENT
 * CACHING yes, in OPTOUT mode all but those right after CLIENT CACHING no (client.c).
 *
 * How a read is tracked (client.c, request.c): a tracking client's read is recorded here when
 * it is dispatched, bypasses the near cache and the coalescing of reads, and goes to its
 * server after CLIENT TRACKING on REDIRECT <link> OPTIN and CLIENT CACHING yes (as a near-cache
 * fill), so the server sends the key's next invalidation to this worker's link; a read that
 * could not be tracked so (the link down, a replica or gutter server without a link, a session's
 * own connection) is followed by a flush of that client (a null invalidation after its reply):
 * nothing it caches may outlive a lost invalidation. Recording at dispatch, not at the reply:
 * an invalidation that arrives between the two is delivered (after the reply, which is before
 * it in the client's queue), never dropped.
 *
 * The table: open addressing of (key hash, client, epoch) entries, 16 bytes each, at most half
 * full; a key's entries of every client lie in one probe run from the key hash's home. A
 * client's entries are forgotten at once by moving its epoch (tracking off, a flush, closing):
 * its old entries are dead and are dropped at the next rehash. Costs: a read records one
 * probe run per key; an invalidation one probe run (and a push per client that read the key:
 * the entry is then removed, as Redis forgets a key once it has sent its invalidation); a
 * flush of every client O(clients), the table's entries dropped by moving each epoch.
 *
 * The bound: PX_CTRACK_CLIENT_KEYS keys per client, PX_CTRACK_TOTAL_KEYS per pool and worker
 * (the table's bytes are counted in px_mem_held, so --max-memory sees them). A client past
 * either gets a null invalidation (flush: every key) and its keys are forgotten, as Redis
 * flushes when its tracking table overflows; the read that overflowed is then its one key.
 *
 * REDIRECT (RESP2's way): a client's pushes go to another client of the pool, maybe on another
 * worker, through redir.h (client.c's push callback posts them there); this table is the same.
 */
#ifndef CHASH_PROXY_CLIENT_TRACK_H
#define CHASH_PROXY_CLIENT_TRACK_H

#include "counters.h" /* px_ctrack_counts */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PX_CTRACK_CLIENT_KEYS 65536u  /* keys one client may have tracked */
#define PX_CTRACK_TOTAL_KEYS 524288u  /* keys every client of a pool on a worker may have
                                         tracked (the table: at most 4x that many 16-byte
                                         entries, 32 MiB) */

typedef struct px_ctrack px_ctrack;

/* An invalidation for a client: key[0, len), or every key when key is NULL. */
typedef void (*px_ctrack_push)(void *arg, const char *key, size_t len);


px_ctrack *px_ctrack_new(void);
void px_ctrack_free(px_ctrack *t);

/* Tracking on for a client: a handle (> 0) to name it by, or 0 when out of memory. push is
 * called for each invalidation it is owed, until px_ctrack_off. */
uint32_t px_ctrack_on(px_ctrack *t, px_ctrack_push push, void *arg);
/* Tracking off (or the client closing): its keys forgotten, no push after. */
void px_ctrack_off(px_ctrack *t, uint32_t client);
/* The client read the key of hash h (px_key_hash): recorded, or (past a bound) the client
 * flushed and this key alone recorded. 0, or -1 when out of memory (the client flushed). */
int px_ctrack_read(px_ctrack *t, uint32_t client, uint64_t h);
/* The client wrote the key of hash h with NOLOOP: forgotten for it without a push (Redis sends
 * a NOLOOP client no invalidation for its own write, and forgets the key for it). */
void px_ctrack_forget(px_ctrack *t, uint32_t client, uint64_t h);
/* The key key[0, len) of hash h changed (a link's invalidation): a push to every client that
 * read it, which forgets it. */
void px_ctrack_invalidate(px_ctrack *t, uint64_t h, const char *key, size_t len);
/* Every key may have changed (FLUSHALL, a link lost, a placement changed): a null push to every
 * tracking client, which forgets its keys. NULL t: nothing. */
void px_ctrack_flush(px_ctrack *t);
/* One client alone: a null push, its keys forgotten. */
void px_ctrack_flush_client(px_ctrack *t, uint32_t client);
/* A read of the client that could not be tracked (counted untracked): px_ctrack_flush_client. */
void px_ctrack_untracked(px_ctrack *t, uint32_t client);
/* BCAST mode (Redis's broadcasting): the client gets an invalidation for every change of a
 * key under one of its prefixes p[0, n) (lengths len[]; n 0: every key), read or not. The
 * pool's links register the union of the BCAST clients' prefixes at every server
 * (px_ctrack_bcast_want); until a server confirms the version that holds a client's prefixes,
 * and whenever a link registers again (a new version, a link back), what the client cached may
 * have missed a change: each confirmation is a null push to every BCAST client
 * (px_ctrack_bcast_confirmed), and a read sent to a server whose link has not confirmed the
 * pool's version is followed by one (request.c). A link registering again turns its tracking off
 * and on: a write in that round trip reaches the BCAST clients as the confirmation's flush, up
 * to a round trip late. The union only grows while BCAST clients
 * remain (a prefix under another is dropped: Redis refuses overlapping prefixes); cost per
 * invalidation: a compare per prefix of each BCAST client. 0, or -1 when out of memory. */
int px_ctrack_bcast_on(px_ctrack *t, uint32_t client, const char *const *p, const uint32_t *len,
                       size_t n);
/* The version of the prefixes the links must register (0: no BCAST client), and them. */
uint64_t px_ctrack_bcast_want(const px_ctrack *t, const char *const **p, const uint32_t **len,
                              size_t *n);
/* A server registered the prefixes (every key may have changed unseen before): a null push to
 * every BCAST client. */
void px_ctrack_bcast_confirmed(px_ctrack *t);
/* The client's prefixes (TRACKINGINFO). */
size_t px_ctrack_prefixes(const px_ctrack *t, uint32_t client, const char *const **p,
                          const uint32_t **len);
/* The counters (clients and keys now, the rest since the start). */
px_ctrack_counts px_ctrack_counts_of(const px_ctrack *t);

#endif /* CHASH_PROXY_CLIENT_TRACK_H */

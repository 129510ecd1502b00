/* SPDX-License-Identifier: Apache-2.0 */
/*
 * track.h — server-assisted invalidation of the near cache (issue 37; docs/OPERATIONS.md, "Hot
 * keys"): per server of a Redis pool with hot_cache (and near_tracking, on by default), each
 * worker keeps an invalidation link, a RESP3 connection named chash-invalidate whose client id
 * the near cache's fills redirect their tracking to (CLIENT TRACKING on REDIRECT id OPTIN, then
 * CLIENT CACHING yes just before the read: request.c). Every invalidation the server sends for a
 * key (whoever wrote it: another proxy, a client of the server, a script, *STORE, an expiry, an
 * eviction; FLUSHALL names none: every key) bumps the key's generation (src/hot/near.h), so no
 * worker serves its entry again and no fill in flight is kept.
 *
 * While a server's invalidations may be lost nothing filled from it is kept: a fill is kept only
 * when every send of it was tracked through a live link (px_rq_slot.track, cleared by request.c
 * otherwise), and whenever a link that was live closes (killed, its server restarted, stopped
 * past the pool's timeout: its keepalive times out, removed by a reload) or a shared connection
 * of a tracked server fails (the server forgets what it tracked for it: backend.c), every
 * generation of the pool is bumped: the pool's entries, on every worker, are served no more.
 * A server that refuses tracking (older than Redis 6, an ACL) keeps the TTL alone, as before;
 * the metrics and INFO count the links per state.
 *
 * Thread: each worker owns its links (dedicated connections of its servers); the generations
 * are shared atomics, bumped from any worker.
 */
#ifndef CHASH_PROXY_TRACK_H
#define CHASH_PROXY_TRACK_H

#include "backend.h"
#include "client_track.h"
#include "pool.h"
#include "request.h"

#include "hot/near.h"

#include <stdbool.h>
#include <stdint.h>

/* A server's tracking on one worker (px_server.track.state). */
typedef enum px_track_state {
    PX_TRACK_OFF = 0, /* not tracked: the pool does not track (no near cache, near_tracking off,
                         a protocol without it) */
    PX_TRACK_DOWN,    /* no live link: opening, or closed and waiting to open again; fills from
                         it are not kept */
    PX_TRACK_LIVE,    /* its link is live: tracked fills are kept */
    PX_TRACK_REFUSED, /* the server refused tracking: fills are kept, bounded by hot_cache */
} px_track_state;

/* Whether pool's fills are tracked (a Redis pool with hot_cache and near_tracking). */
static inline bool px_track_wanted(const px_pool *pool)
{
    const ch_conf_pool *pc = pool->conf;
    return pc->hot_cache_ms > 0 && pc->near_tracking && pool->codec->encode_track != NULL &&
           pool->shared->near_gens != NULL;
}

/* The worker's tick (worker.c, every PX_PROBE_TICK_MS): opens the links that are down and due,
 * sends the live ones' keepalive, closes those of a pool that no longer tracks, flushes on an
 * ejection or a readmission; counts the links per state into pool->m.track. */
void px_track_tick(px_pool *pool);

/* After each loop iteration (worker.c): a new placement (a reload's, a fleet change's) moves
 * keys to owners that never tracked them for this proxy, so every entry of the pool is
 * dropped. Cost: a compare per pool. */
static inline void px_track_placement(px_pool *pool)
{
    if (pool->table == pool->track_table)
        return;
    if (pool->track_table != NULL && px_track_wanted(pool)) {
        ch__near_invalidate_all(pool->shared->near_gens);
        pool->m.track.flushes++;
        px_ctrack_flush(pool->ctrack);
    }
    pool->track_table = pool->table;
}

/* Whether the reply to slot s of rq (a near-cache fill, answered by the last server it was
 * sent to) may be kept: the pool does not track; or that server is one of the pool's (whose
 * invalidations bump the pool's generations: not a gutter pool's, not a retired or staged one)
 * and every send of the fill was tracked (px_rq_slot.track) or the server refused tracking. The
 * generation checked at the put does the rest (a link lost since was a bump). Cost: a scan of
 * the pool's servers, once per fill. (Inline, as the rest of the route layer has no I/O:
 * track.c is the proxy's.) */
static inline bool px_track_keepable(const px_pool *pool, const px_rq *rq, uint32_t s)
{
    if (!px_track_wanted(pool))
        return true;
    const px_rq_slot *sl = &rq->slots[s];
    if (sl->ntried == 0)
        return false;
    uint32_t uid = sl->tried[sl->ntried - 1];
    for (size_t i = 0; i < pool->nservers; i++)
        if (pool->servers[i].uid == uid)
            return sl->track || pool->servers[i].track.state == PX_TRACK_REFUSED;
    return false;
}

#endif /* CHASH_PROXY_TRACK_H */

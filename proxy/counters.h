/* SPDX-License-Identifier: Apache-2.0 */
/*
 * counters.h — the counters the data path bumps: per pool (nutcracker's pool stats, and the
 * requests, errors and latency histogram behind /metrics and INFO) and per backend server
 * (nutcracker's server stats). Plain integers: a worker's counters are touched only from its
 * thread; the control thread reads their sums (snapshot.c, one job per worker). The data path
 * depends on no reporting module: it includes this header only.
 */
#ifndef CHASH_PROXY_COUNTERS_H
#define CHASH_PROXY_COUNTERS_H

#include <stdbool.h>
#include <stdint.h>

/* The class of a request, from its codec's command table. PX_CLASS_REFUSED is 0, so a request
 * never classified (unknown command, protocol error) is counted as refused. */
typedef enum px_cmd_class {
    PX_CLASS_REFUSED = 0, /* unsupported command, or a request that did not parse */
    PX_CLASS_READ,        /* single-key read, forwarded (retried on failover) */
    PX_CLASS_WRITE,       /* single-key write (or EVAL), forwarded */
    PX_CLASS_MULTI,       /* multi-key, split per server: MGET MSET DEL ..., get k1 k2 ... */
    PX_CLASS_LOCAL,       /* answered by the proxy: PING ECHO QUIT ..., version quit mn */
    PX_NCLASSES
} px_cmd_class;

/* Upper bounds of the latency buckets, in seconds (the "le" labels); +Inf is implicit. */
#define PX_LAT_BOUNDS                                                                             \
    X(0.0001) X(0.00025) X(0.0005) X(0.001) X(0.0025) X(0.005) X(0.01) X(0.025) X(0.05) X(0.1)    \
    X(0.25) X(0.5) X(1)
#define PX_LAT_NBOUNDS 13

/* A pool's warm-up, ramp and staging counters (warm.h, route_stage.c): reads answered from a
 * moved key's old owner, reads that found it at neither, copies stored at the new owner, copies
 * not stored because the key was there already, copies that failed (or were dropped for a write
 * since), deletes at old owners for writes, requests served by an old owner before their key's
 * switch, and while a change is prepared, the writes' deletes at the keys' next owners (done,
 * failed) and the requests refused because their writes cannot be staged (session.h); in a replicated pool (route_replica.c), reads that missed at an owner and hit at the
 * next, and their copies back: stored, or skipped (the key was there, written meanwhile, or
 * the copy failed). Every replica read ends as one repair or one skip. replica_spread: reads of
 * hot keys sent to their owners in turn (hot_spread). */
#define PX_WARM_SUMS                                                                              \
    X(warm_hits) X(warm_misses) X(warm_fills) X(warm_fills_present) X(warm_fill_errors)           \
    X(warm_deletes) X(ramp_old) X(stage_invalidations) X(stage_invalidate_errors)                 \
    X(stage_refused) X(replica_reads) X(replica_repairs) X(replica_repair_skips) X(replica_spread)
typedef struct px_warm_stats {
#define X(f) uint64_t f;
    PX_WARM_SUMS
#undef X
} px_warm_stats;

/* Shadow traffic (route_shadow.c): requests mirrored to the shadow pool, those not mirrored
 * for the in-flight bound, the comparisons of the two answers (agree, disagree, failed: the
 * shadow's answer was an error where the pool's was not), and those in flight now. */
#define PX_SHADOW_SUMS X(sent) X(skipped) X(agree) X(disagree) X(failed) X(inflight)
typedef struct px_shadow_stats {
#define X(f) uint64_t f;
    PX_SHADOW_SUMS
#undef X
} px_shadow_stats;

/* The near cache of hot keys (route_near.c): cacheable reads answered from it (hits), those not
 * (misses: sent on), replies it kept (stores), the bytes it holds now (bytes: a gauge, the sum
 * over the workers), and the writes that ended all of it (script_flushes: a script that may
 * write keys it does not declare, near_write.h). */
#define PX_NEAR_SUMS X(hits) X(misses) X(stores) X(bytes) X(script_flushes)
typedef struct px_near_counts {
#define X(f) uint64_t f;
    PX_NEAR_SUMS
#undef X
} px_near_counts;
/* Server-assisted invalidation (track.c): the links per state now (gauges: live, down: none
 * live, refused: the server refused tracking, hot_cache alone bounds its entries), the keys
 * the servers invalidated, and the flushes (every entry dropped: a link lost, a FLUSHALL, a
 * connection of a tracked server failed, an ejection or readmission). */
#define PX_TRACK_SUMS X(live) X(down) X(refused) X(invalidations) X(flushes)
typedef struct px_track_counts {
#define X(f) uint64_t f;
    PX_TRACK_SUMS
#undef X
} px_track_counts;
/* Client-side caching through the proxy (client_track.h): clients tracking now and the keys
 * they read (gauges: a key read by two clients counts twice), invalidations of a key pushed
 * to a client, null invalidations (flushes: a link lost, a FLUSHALL, a bound, an untracked
 * read), clients flushed for their bound or the table's, and reads that could not be tracked
 * (no live link at their server): their client flushed after. */
#define PX_CTRACK_SUMS X(clients) X(keys) X(pushes) X(flushes) X(overflows) X(untracked)
typedef struct px_ctrack_counts {
#define X(f) uint64_t f;
    PX_CTRACK_SUMS
#undef X
} px_ctrack_counts;
/* The gutter pool (route_gutter.c): keys of an ejected owner served by the gutter pool, reads
 * and writes (deletes included); writes the gutter refused (a write of several keys, a bad
 * lifetime); and keys of an ejected owner served by the pool's ring because no gutter server
 * was up. */
#define PX_GUTTER_SUMS X(reads) X(writes) X(refused) X(unavailable)
typedef struct px_gutter_stats {
#define X(f) uint64_t f;
    PX_GUTTER_SUMS
#undef X
} px_gutter_stats;

/* Per pool. A request is counted once, when its reply is complete (queued for its client, or
 * dropped because its client has gone), so requests[] summed over the classes equals the
 * histogram's count at every instant. */
typedef struct px_pool_metrics {
    uint64_t requests[PX_NCLASSES];
    uint64_t errors[PX_NCLASSES];             /* error replies (the proxy's or a backend's) */
    uint64_t lat_buckets[PX_LAT_NBOUNDS + 1]; /* not cumulative; the last is (1 s, +Inf) */
    uint64_t lat_sum_ns;
    uint64_t clients_accepted; /* client connections accepted since start */
    uint64_t mem_refused;      /* requests refused over the memory budget (--max-memory) */
    uint64_t fence_refused;    /* requests refused while the membership was fenced (fleet) */
    uint64_t coalesced;        /* reads that joined an identical one in flight, to be answered
                                  with its reply (route_coalesce.c) */
    px_track_counts track;
    px_ctrack_counts ctrack; /* this worker's, refreshed at its tick (track.c) */
    px_shadow_stats shadow;
    px_gutter_stats gutter;
    px_warm_stats warm;
    px_near_counts near;
} px_pool_metrics;

/* Counts one answered request of class cls that took ns nanoseconds. Cost: <= 14 compares. */
static inline void px_count_request(px_pool_metrics *m, unsigned cls, bool error, uint64_t ns)
{
#define X(b) (uint64_t)((b)*1e9 + 0.5),
    static const uint64_t bounds_ns[PX_LAT_NBOUNDS] = {PX_LAT_BOUNDS};
#undef X
    if (cls >= PX_NCLASSES)
        cls = PX_CLASS_REFUSED;
    m->requests[cls]++;
    if (error)
        m->errors[cls]++;
    unsigned b = 0;
    while (b < PX_LAT_NBOUNDS && ns > bounds_ns[b])
        b++;
    m->lat_buckets[b]++;
    m->lat_sum_ns += ns;
}

/* nutcracker's server stats, plus ejects. */
typedef struct px_server_stats {
    uint64_t server_eof, server_err, server_timedout, server_connections, server_ejected_at;
    uint64_t requests, request_bytes, responses, response_bytes;
    uint64_t ejects; /* times this server was ejected (metrics; not in the stats JSON) */
    uint64_t joined; /* requests sent joined onto the one before (metrics; not in the JSON) */
} px_server_stats;
/* The counters of px_server_stats summed over the workers (server_ejected_at: the latest). */
#define PX_SERVER_SUMS                                                                            \
    X(server_eof) X(server_err) X(server_timedout) X(server_connections) X(requests)              \
    X(request_bytes) X(responses) X(response_bytes) X(ejects) X(joined)

/* nutcracker's pool stats. */
typedef struct px_pool_stats {
    uint64_t client_eof, client_err, client_connections, server_ejects, forward_error, fragments;
} px_pool_stats;
#define PX_POOL_SUMS                                                                              \
    X(client_eof) X(client_err) X(client_connections) X(server_ejects) X(forward_error)           \
    X(fragments)

#endif /* CHASH_PROXY_COUNTERS_H */

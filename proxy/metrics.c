/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.c — the Prometheus text exposition and the INFO reply's text (metrics.h), from the
 * workers' counters summed by px_snapshot. The counting itself is px_count_request
 * (counters.h), once per request when its reply is complete.
 */

#include "metrics.h"
#include "info_name.h"
#include "dns_watch.h"
#include "fleet.h"
#include "hotkeys.h"
#include "snapshot.h"
#include "warm.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define U(x) ((unsigned long long)(x))

static const char *const class_names[PX_NCLASSES] = {
    [PX_CLASS_REFUSED] = "refused", [PX_CLASS_READ] = "read",   [PX_CLASS_WRITE] = "write",
    [PX_CLASS_MULTI] = "multi",     [PX_CLASS_LOCAL] = "local",
};
/* Exposition order of the classes. */
static const px_cmd_class class_order[PX_NCLASSES] = {PX_CLASS_READ, PX_CLASS_WRITE,
                                                      PX_CLASS_MULTI, PX_CLASS_LOCAL,
                                                      PX_CLASS_REFUSED};

#define X(b) #b,
static const char *const lat_labels[PX_LAT_NBOUNDS] = {PX_LAT_BOUNDS};
#undef X

/* Thousandths as a decimal number of units: 1234 -> "1.234" (a time kept in ms, shown in s). */
static int thousandths(px_buf *b, uint64_t v)
{
    return px_buf_printf(b, "%llu.%03llu\n", U(v / 1000u), U(v % 1000u));
}

/* A label value, escaped as the format requires: backslash, double quote and line feed. */
static int label_value(px_buf *b, const char *s)
{
    int rc = 0;
    for (; rc == 0 && *s != '\0'; s++) {
        if (*s == '\\')
            rc = px_buf_append(b, "\\\\", 2);
        else if (*s == '"')
            rc = px_buf_append(b, "\\\"", 2);
        else if (*s == '\n')
            rc = px_buf_append(b, "\\n", 2);
        else
            rc = px_buf_append(b, s, 1);
    }
    return rc;
}

static int family(px_buf *b, const char *name, const char *type, const char *help)
{
    return px_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{pool="P"[,server="S"]<extra>} */
static int series(px_buf *b, const char *name, const char *pool, const char *server,
                  const char *extra)
{
    int rc = px_buf_printf(b, "%s{pool=\"", name);
    rc |= label_value(b, pool);
    if (server != NULL) {
        rc |= px_buf_append(b, "\",server=\"", 10);
        rc |= label_value(b, server);
    }
    rc |= px_buf_printf(b, "\"%s} ", extra != NULL ? extra : "");
    return rc;
}

/* Server i of pool p, whose counters summed over the workers are s. */
typedef uint64_t (*server_value)(const px_snap_server *s, const px_shared_pool *p, size_t i);
#define SV(fn, expr)                                                                              \
    static uint64_t fn(const px_snap_server *s, const px_shared_pool *p, size_t i)               \
    {                                                                                             \
        (void)s, (void)p, (void)i;                                                                \
        return (expr);                                                                            \
    }
SV(sv_requests, s->stats.requests)
SV(sv_responses, s->stats.responses)
SV(sv_errors, s->stats.server_err)
SV(sv_eof, s->stats.server_eof)
SV(sv_timeouts, s->stats.server_timedout)
SV(sv_ejections, s->stats.ejects)
SV(sv_joined, s->stats.joined)
SV(sv_connections, s->stats.server_connections)
SV(sv_request_bytes, s->stats.request_bytes)
SV(sv_response_bytes, s->stats.response_bytes)
SV(sv_in_queue, s->in_queue)
SV(sv_in_queue_bytes, s->in_queue_bytes)
SV(sv_out_queue, s->out_queue)
SV(sv_out_queue_bytes, s->out_queue_bytes)
SV(sv_up, px_health_up(p->health, i) ? 1 : 0)
#undef SV

static const struct {
    const char *name, *type, *help;
    server_value get;
} server_families[] = {
    {"chash_proxy_server_requests_total", "counter",
     "Client requests (fragments) sent to the server.", sv_requests},
    {"chash_proxy_server_responses_total", "counter", "Replies received from the server.",
     sv_responses},
    {"chash_proxy_server_joined_requests_total", "counter",
     "Requests sent joined onto the one before them (memcached: single-key gets as one get).",
     sv_joined},
    {"chash_proxy_server_errors_total", "counter",
     "Connections to the server that failed (refused connect, reset, unparsable reply).",
     sv_errors},
    {"chash_proxy_server_eof_total", "counter", "Connections closed by the server.", sv_eof},
    {"chash_proxy_server_timeouts_total", "counter", "Requests to the server that timed out.",
     sv_timeouts},
    {"chash_proxy_server_ejections_total", "counter",
     "Times the health tracker ejected the server.", sv_ejections},
    {"chash_proxy_server_up", "gauge",
     "1 when the server takes requests, 0 while it is ejected.", sv_up},
    {"chash_proxy_server_connections", "gauge", "Connections to the server open now.",
     sv_connections},
    {"chash_proxy_server_request_bytes_total", "counter",
     "Bytes of requests written to the server (stats' request_bytes).", sv_request_bytes},
    {"chash_proxy_server_response_bytes_total", "counter",
     "Bytes of replies read from the server (stats' response_bytes).", sv_response_bytes},
    {"chash_proxy_server_in_queue_requests", "gauge",
     "Requests queued for the server, not yet written (stats' in_queue).", sv_in_queue},
    {"chash_proxy_server_in_queue_bytes", "gauge",
     "Bytes of the requests queued for the server, not yet written (stats' in_queue_bytes).",
     sv_in_queue_bytes},
    {"chash_proxy_server_out_queue_requests", "gauge",
     "Requests written to the server, their replies awaited (stats' out_queue).", sv_out_queue},
    {"chash_proxy_server_out_queue_bytes", "gauge",
     "Bytes of the requests written to the server whose replies are awaited (stats' "
     "out_queue_bytes).",
     sv_out_queue_bytes},
};

/* Pool p, whose counters summed over the workers are s. */
typedef uint64_t (*pool_value)(const px_snap_pool *s, const px_shared_pool *p);
#define PV(fn, expr)                                                                              \
    static uint64_t fn(const px_snap_pool *s, const px_shared_pool *p)                            \
    {                                                                                             \
        (void)s, (void)p;                                                                         \
        return (expr);                                                                            \
    }
PV(pv_clients, s->stats.client_connections)
PV(pv_accepted, s->m.clients_accepted)
PV(pv_client_err, s->stats.client_err)
PV(pv_client_eof, s->stats.client_eof)
PV(pv_forward_err, s->stats.forward_error)
PV(pv_fragments, s->stats.fragments)
PV(pv_nservers, p->nservers)
PV(pv_fail_open, PX_ATOMIC_LOAD(p->health->fail_open))
PV(pv_mem_refused, s->m.mem_refused)
PV(pv_fence_refused, s->m.fence_refused)
PV(pv_coalesced, s->m.coalesced)
#define X(f) PV(pv_##f, s->m.warm.f)
PX_WARM_SUMS
#undef X
#define X(f) PV(pv_shadow_##f, s->m.shadow.f)
PX_SHADOW_SUMS
#undef X
#define X(f) PV(pv_near_##f, s->m.near.f)
PX_NEAR_SUMS
#undef X
#define X(f) PV(pv_gutter_##f, s->m.gutter.f)
PX_GUTTER_SUMS
#undef X
#define X(f) PV(pv_track_##f, s->m.track.f)
PX_TRACK_SUMS
#undef X
#define X(f) PV(pv_ctrack_##f, s->m.ctrack.f)
PX_CTRACK_SUMS
#undef X
#undef PV

static const struct {
    const char *name, *type, *help;
    pool_value get;
} pool_families[] = {
    {"chash_proxy_client_connections", "gauge", "Client connections open now.", pv_clients},
    {"chash_proxy_client_connections_accepted_total", "counter",
     "Client connections accepted since start.", pv_accepted},
    {"chash_proxy_client_errors_total", "counter",
     "Clients closed on an error (protocol error, over a limit, socket error).", pv_client_err},
    {"chash_proxy_client_eof_total", "counter", "Clients that closed their connection.",
     pv_client_eof},
    {"chash_proxy_forward_errors_total", "counter",
     "Requests (or parts) answered with an error because no backend could serve them.",
     pv_forward_err},
    {"chash_proxy_fragments_total", "counter",
     "Sub-requests created by splitting multi-key commands.", pv_fragments},
    {"chash_proxy_servers", "gauge", "Servers in the pool's membership.", pv_nservers},
    {"chash_proxy_fail_open_total", "counter",
     "Ejections not made because max_ejected_share of the pool's servers were out already.",
     pv_fail_open},
    {"chash_proxy_memory_refusals_total", "counter",
     "Requests refused because the process held more than its memory budget (--max-memory).",
     pv_mem_refused},
    {"chash_proxy_fenced_requests_total", "counter",
     "Requests refused because the pool's membership could not be proven current (etcd "
     "unreachable or the lease lapsed; docs/FLEET.md, \"Fencing\").",
     pv_fence_refused},
    {"chash_proxy_coalesced_reads_total", "counter",
     "Reads answered with the reply of an identical read in flight (coalesce_reads), so sent "
     "to no backend.",
     pv_coalesced},
    {"chash_proxy_warm_up_hits_total", "counter",
     "Reads of a moved key that missed at its new owner and were answered by its old one.",
     pv_warm_hits},
    {"chash_proxy_warm_up_misses_total", "counter",
     "Reads of a moved key found at neither its new nor its old owner.", pv_warm_misses},
    {"chash_proxy_warm_up_fills_total", "counter",
     "Moved keys copied from their old owner to their new one with their lifetime.",
     pv_warm_fills},
    {"chash_proxy_warm_up_fills_present_total", "counter",
     "Copies not stored because the key was at its new owner already.", pv_warm_fills_present},
    {"chash_proxy_warm_up_fill_errors_total", "counter",
     "Copies that failed, or were dropped because the key was written meanwhile.",
     pv_warm_fill_errors},
    {"chash_proxy_warm_up_old_deletes_total", "counter",
     "Deletes at a moved key's old owner made before a write to its new owner.",
     pv_warm_deletes},
    {"chash_proxy_ramp_old_owner_total", "counter",
     "Requests served by a moved key's old owner because the ramp had not switched it yet.",
     pv_ramp_old},
    {"chash_proxy_stage_invalidations_total", "counter",
     "While a membership change is prepared: writes' deletes at a moving key's next owner "
     "(docs/FLEET.md, \"Staged migration\").",
     pv_stage_invalidations},
    {"chash_proxy_stage_invalidate_errors_total", "counter",
     "Such deletes that failed: the write was answered with an error.",
     pv_stage_invalidate_errors},
    {"chash_proxy_stage_refused_total", "counter",
     "While a membership change is prepared: requests refused -TRYAGAIN because their writes "
     "cannot be staged (a transaction's, a script's, a destination's; docs/FLEET.md, \"What "
     "the staging refuses\").",
     pv_stage_refused},
    {"chash_proxy_near_cache_hits_total", "counter",
     "Reads answered from the near cache of hot keys (hot_cache; docs/OPERATIONS.md, \"Hot "
     "keys\").",
     pv_near_hits},
    {"chash_proxy_near_cache_misses_total", "counter",
     "Reads the near cache could have answered but did not hold fresh: sent on.", pv_near_misses},
    {"chash_proxy_near_cache_stores_total", "counter",
     "Replies of hot keys the near cache kept.", pv_near_stores},
    {"chash_proxy_near_cache_bytes", "gauge",
     "Bytes the near cache holds now, all workers (counted in --max-memory).", pv_near_bytes},
    {"chash_proxy_near_cache_script_flushes_total", "counter",
     "Scripts (EVAL, EVALSHA) that may write keys they do not declare: each ended every "
     "entry of the pool's near cache, on every worker.",
     pv_near_script_flushes},
    {"chash_proxy_replica_reads_total", "counter",
     "Replicated pools: reads that missed at a key's owner and were answered by its next owner "
     "(docs/PROXY.md, \"Replicated pools\").",
     pv_replica_reads},
    {"chash_proxy_replica_repairs_total", "counter",
     "Such reads' copies stored back at the owner that missed (never overwriting).",
     pv_replica_repairs},
    {"chash_proxy_replica_repair_skips_total", "counter",
     "Copies not stored: the key was there, was written meanwhile, or the copy failed.",
     pv_replica_repair_skips},
    {"chash_proxy_replica_spread_reads_total", "counter",
     "Reads of hot keys sent to their owners in turn (hot_spread; docs/OPERATIONS.md, \"Hot "
     "keys\").",
     pv_replica_spread},
    {"chash_proxy_shadow_sent_total", "counter",
     "Requests mirrored to the pool's shadow pool (docs/PROXY.md, Shadow traffic).",
     pv_shadow_sent},
    {"chash_proxy_shadow_skipped_total", "counter",
     "Requests of the shadowed share not mirrored: the shadow requests in flight were at "
     "their bound.",
     pv_shadow_skipped},
    {"chash_proxy_shadow_agree_total", "counter",
     "Mirrored requests whose two answers agreed (reads: hit or miss, and the value).",
     pv_shadow_agree},
    {"chash_proxy_shadow_disagree_total", "counter",
     "Mirrored requests whose two answers disagreed.", pv_shadow_disagree},
    {"chash_proxy_shadow_failed_total", "counter",
     "Mirrored requests the shadow pool answered with an error where the pool did not.",
     pv_shadow_failed},
    {"chash_proxy_shadow_in_flight", "gauge", "Shadow requests in flight now.",
     pv_shadow_inflight},
    {"chash_proxy_gutter_reads_total", "counter",
     "Reads of a key whose owner was ejected, served by the pool's gutter pool (docs/PROXY.md, "
     "\"Gutter pool\").",
     pv_gutter_reads},
    {"chash_proxy_gutter_writes_total", "counter",
     "Writes and deletes of a key whose owner was ejected, sent to the gutter pool with their "
     "lifetime capped at gutter_ttl.",
     pv_gutter_writes},
    {"chash_proxy_gutter_refused_total", "counter",
     "Such writes the gutter refused (a write of several keys, a lifetime that is not a "
     "number).",
     pv_gutter_refused},
    {"chash_proxy_gutter_unavailable_total", "counter",
     "Keys of an ejected owner served by the pool's ring because no gutter server was up.",
     pv_gutter_unavailable},
    {"chash_proxy_near_tracking_live", "gauge",
     "Invalidation links live now, one per server and worker: the near cache's fills from "
     "those servers are tracked (near_tracking; docs/OPERATIONS.md, \"Hot keys\").",
     pv_track_live},
    {"chash_proxy_near_tracking_down", "gauge",
     "Servers (per worker) whose invalidation link is not live now: nothing filled from them "
     "is kept.",
     pv_track_down},
    {"chash_proxy_near_tracking_refused", "gauge",
     "Servers (per worker) that refused CLIENT TRACKING (older than Redis 6, an ACL): their "
     "entries are bounded by hot_cache alone.",
     pv_track_refused},
    {"chash_proxy_near_invalidations_total", "counter",
     "Keys the servers said changed (CLIENT TRACKING): their near-cache entries ended.",
     pv_track_invalidations},
    {"chash_proxy_near_tracking_flushes_total", "counter",
     "Times every near-cache entry of the pool was dropped: an invalidation link lost, a "
     "FLUSHALL, a connection of a tracked server failed, an ejection or readmission.",
     pv_track_flushes},
    {"chash_proxy_client_tracking_clients", "gauge",
     "Clients with CLIENT TRACKING on (client-side caching through the proxy; docs/PROXY.md, "
     "\"Client-side caching\").",
     pv_ctrack_clients},
    {"chash_proxy_client_tracking_keys", "gauge",
     "Keys the tracking clients read and are owed an invalidation of (a key read by two "
     "clients counts twice).",
     pv_ctrack_keys},
    {"chash_proxy_client_tracking_pushes_total", "counter",
     "Invalidations of a key pushed to a tracking client.",
     pv_ctrack_pushes},
    {"chash_proxy_client_tracking_flushes_total", "counter",
     "Null invalidations (every key) pushed to a tracking client: a link lost, a FLUSHALL, a "
     "bound passed, a read that could not be tracked.",
     pv_ctrack_flushes},
    {"chash_proxy_client_tracking_overflows_total", "counter",
     "Tracking clients flushed for their bound of keys, or the pool's on the worker.",
     pv_ctrack_overflows},
    {"chash_proxy_client_tracking_untracked_total", "counter",
     "Reads of tracking clients that could not be tracked (no live invalidation link at "
     "their server): each followed by a flush of its client.",
     pv_ctrack_untracked},
};

/* The fleet membership of the pools that take it from etcd (fleet.h): one series per such
 * pool, none for the others. */
static int fleet_families(const px_ctl *m, px_buf *b)
{
    /* by_reason: the refused documents, one series per reason; the others take their value
     * from v[] below, in this order. */
    static const struct {
        const char *name, *type, *help;
        bool by_reason;
    } fams[] = {
        {"chash_proxy_fleet_epoch", "gauge", "The membership epoch the pool serves (etcd).", false},
        {"chash_proxy_fleet_seen_epoch", "gauge",
         "The newest epoch read from etcd, applied or not.", false},
        {"chash_proxy_fleet_prepared_epoch", "gauge",
         "The pending epoch held prepared for its commit (0: none).", false},
        {"chash_proxy_fleet_etcd_up", "gauge",
         "1 while the watch is established and the lease alive.", false},
        {"chash_proxy_fleet_held_down", "gauge",
         "1 while a document that removes servers waits its hold-down.", false},
        {"chash_proxy_fleet_applied_total", "counter", "Membership documents applied.", false},
        {"chash_proxy_fleet_refused_total", "counter",
         "Membership documents refused, by reason (invalid: does not parse or build; stale: "
         "its epoch is not newer).", true},
        {"chash_proxy_fleet_damped_total", "counter",
         "Removals withdrawn within the hold-down: no change made.", false},
        {"chash_proxy_fleet_watch_restarts_total", "counter",
         "Times the watch was lost and started again.", false},
        {"chash_proxy_fleet_fenced", "gauge",
         "1 while the membership cannot be proven current (docs/FLEET.md, Fencing).", false},
        {"chash_proxy_fleet_fences_total", "counter",
         "Times the pool became fenced after having been current.", false},
        {"chash_proxy_fleet_serve_fenced", "gauge",
         "1 when the pool serves while fenced (membership_fenced: serve), 0 when it refuses.",
         false},
    };
    int rc = 0;
    bool any = false;
    px_fleet_stats fs;
    for (size_t i = 0; i < m->npools && !any; i++)
        any = px_fleet_stats_get(m, i, &fs);
    for (size_t f = 0; any && f < sizeof(fams) / sizeof(fams[0]); f++) {
        rc |= family(b, fams[f].name, fams[f].type, fams[f].help);
        for (size_t i = 0; i < m->npools; i++) {
            if (!px_fleet_stats_get(m, i, &fs))
                continue;
            const char *name = m->pools[i].conf->name;
            if (fams[f].by_reason) {
                rc |= series(b, fams[f].name, name, NULL, ",reason=\"invalid\"");
                rc |= px_buf_printf(b, "%llu\n", U(fs.refused_invalid));
                rc |= series(b, fams[f].name, name, NULL, ",reason=\"stale\"");
                rc |= px_buf_printf(b, "%llu\n", U(fs.refused_stale));
                continue;
            }
            uint64_t v[] = {(uint64_t)fs.epoch, (uint64_t)fs.seen_epoch, (uint64_t)fs.prepared,
                            fs.etcd_up, fs.held_down, fs.applied, 0, fs.damped,
                            fs.watch_restarts, fs.fenced, fs.fences, fs.serve_fenced};
            rc |= series(b, fams[f].name, name, NULL, NULL);
            rc |= px_buf_printf(b, "%llu\n", U(v[f]));
        }
    }
    return rc;
}

/* The membership of the pools that take it from DNS (dns_watch.h): one series per such pool,
 * none for the others. */
static int dns_families(const px_ctl *m, px_buf *b)
{
    static const struct {
        const char *name, *type, *help;
    } fams[] = {
        {"chash_proxy_dns_epoch", "gauge",
         "The membership epoch the pool serves (DNS): 1 at the start, one more per change."},
        {"chash_proxy_dns_lookups_total", "counter", "DNS lookups of the pool's name finished."},
        {"chash_proxy_dns_failed_total", "counter",
         "DNS lookups that failed (timeout, SERVFAIL, NXDOMAIN, no records): the list served "
         "was kept."},
        {"chash_proxy_dns_empty_total", "counter",
         "DNS lookups that found no server: the list served was kept."},
        {"chash_proxy_dns_keeping", "gauge",
         "1 while the last lookup failed or was empty and the pool keeps the list it serves."},
        {"chash_proxy_dns_held_down", "gauge",
         "1 while an answer that removes servers waits its hold-down."},
        {"chash_proxy_dns_applied_total", "counter", "Changed answers applied."},
        {"chash_proxy_dns_damped_total", "counter",
         "Removals withdrawn within the hold-down: no change made."},
        {"chash_proxy_dns_refused_total", "counter",
         "Changed answers that could not be applied (the membership could not be built)."},
        {"chash_proxy_dns_next_lookup_seconds", "gauge",
         "The wait before the next lookup, as last chosen (the interval, or the TTL when "
         "shorter)."},
    };
    int rc = 0;
    bool any = false;
    px_dns_stats ds;
    for (size_t i = 0; i < m->npools && !any; i++)
        any = px_dns_stats_get(m, i, &ds);
    for (size_t f = 0; any && f < sizeof(fams) / sizeof(fams[0]); f++) {
        rc |= family(b, fams[f].name, fams[f].type, fams[f].help);
        for (size_t i = 0; i < m->npools; i++) {
            if (!px_dns_stats_get(m, i, &ds))
                continue;
            rc |= series(b, fams[f].name, m->pools[i].conf->name, NULL, NULL);
            if (f == 9) {
                rc |= px_buf_printf(b, "%.3f\n", (double)ds.next_ms / 1000.0);
                continue;
            }
            uint64_t v[] = {(uint64_t)ds.epoch, ds.lookups, ds.failed, ds.empty, ds.keeping,
                            ds.held_down, ds.applied, ds.damped, ds.refused};
            rc |= px_buf_printf(b, "%llu\n", U(v[f]));
        }
    }
    return rc;
}

/* ---- process_*: the process's own figures, named and defined as Prometheus' client libraries
 * export them (client_golang's process collector), read from /proc (Linux). A figure that
 * cannot be read is left out of the scrape, never shown as 0. ------------------------------- */

/* /proc/self/stat's figures: CPU time (user + system, all threads), start, vsize, RSS. */
typedef struct proc_stat {
    double cpu_seconds, start_time; /* start_time: seconds since the epoch */
    uint64_t vsize_bytes, rss_bytes;
} proc_stat;

/* The boot time, seconds since the epoch (/proc/stat's btime). 0, or -1. */
static int boot_time(uint64_t *out)
{
    FILE *f = fopen("/proc/stat", "r");
    if (f == NULL)
        return -1;
    char line[512];
    int rc = -1;
    unsigned long long v;
    while (rc != 0 && fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "btime %llu", &v) == 1)
            *out = v, rc = 0;
    fclose(f);
    return rc;
}

/* proc(5): the command name (field 2) is in parentheses and may hold spaces or ')', so the
 * fields are read after its last ')': state (3) ... utime (14), stime (15) ... starttime (22),
 * vsize (23), rss (24, pages). 0, or -1. */
static int read_proc_stat(proc_stat *ps)
{
    FILE *f = fopen("/proc/self/stat", "r");
    if (f == NULL)
        return -1;
    char text[1024];
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *p = strrchr(text, ')');
    unsigned long long utime, stime, start, vsize;
    long long rss;
    if (p == NULL ||
        sscanf(p + 1,
               " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d "
               "%llu %llu %lld",
               &utime, &stime, &start, &vsize, &rss) != 5)
        return -1;
    long hz = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    uint64_t btime;
    if (hz <= 0 || page <= 0 || boot_time(&btime) != 0)
        return -1;
    ps->cpu_seconds = (double)(utime + stime) / (double)hz;
    ps->start_time = (double)btime + (double)start / (double)hz;
    ps->vsize_bytes = vsize;
    ps->rss_bytes = rss > 0 ? (uint64_t)rss * (uint64_t)page : 0;
    return 0;
}

/* Descriptors open now: the entries of /proc/self/fd but the one reading it. 0, or -1. */
static int open_fds(uint64_t *out)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return -1;
    int self = dirfd(d);
    uint64_t n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.' && atoi(e->d_name) != self)
            n++;
    closedir(d);
    *out = n;
    return 0;
}

static int process_families(px_buf *b)
{
    int rc = 0;
    proc_stat ps;
    if (read_proc_stat(&ps) == 0) {
        rc |= family(b, "process_cpu_seconds_total", "counter",
                     "Total user and system CPU time spent in seconds.");
        rc |= px_buf_printf(b, "process_cpu_seconds_total %.2f\n", ps.cpu_seconds);
        rc |= family(b, "process_start_time_seconds", "gauge",
                     "Start time of the process since unix epoch in seconds.");
        rc |= px_buf_printf(b, "process_start_time_seconds %.2f\n", ps.start_time);
        rc |= family(b, "process_virtual_memory_bytes", "gauge",
                     "Virtual memory size in bytes.");
        rc |= px_buf_printf(b, "process_virtual_memory_bytes %llu\n", U(ps.vsize_bytes));
        rc |= family(b, "process_resident_memory_bytes", "gauge",
                     "Resident memory size in bytes.");
        rc |= px_buf_printf(b, "process_resident_memory_bytes %llu\n", U(ps.rss_bytes));
    }
    uint64_t fds;
    if (open_fds(&fds) == 0) {
        rc |= family(b, "process_open_fds", "gauge", "Number of open file descriptors.");
        rc |= px_buf_printf(b, "process_open_fds %llu\n", U(fds));
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rc |= family(b, "process_max_fds", "gauge",
                     "Maximum number of open file descriptors (the soft limit).");
        rc |= px_buf_printf(b, "process_max_fds %llu\n", U(rl.rlim_cur));
    }
    return rc;
}

/* The reloads: counts by outcome (reload.c counts them), the last one's time and outcome. */
static int reload_families(const px_ctl *m, px_buf *b)
{
    int rc = family(b, "chash_proxy_reloads_total", "counter",
                    "Reloads (SIGHUP, POST /-/reload, an etcd membership change) by result: ok "
                    "(applied), error (refused; the configuration before it kept serving).");
    rc |= px_buf_printf(b, "chash_proxy_reloads_total{result=\"ok\"} %llu\n", U(m->reloads));
    rc |= px_buf_printf(b, "chash_proxy_reloads_total{result=\"error\"} %llu\n",
                        U(m->reload_failures));
    rc |= family(b, "chash_proxy_last_reload_timestamp_seconds", "gauge",
                 "When the last reload finished, applied or not, in seconds since the epoch "
                 "(0: none since the start).");
    rc |= px_buf_printf(b, "chash_proxy_last_reload_timestamp_seconds ");
    rc |= thousandths(b, m->last_reload_unix_ms);
    rc |= family(b, "chash_proxy_last_reload_successful", "gauge",
                 "1 when the last reload was applied (or none was tried), 0 when it failed.");
    rc |= px_buf_printf(b, "chash_proxy_last_reload_successful %d\n",
                        m->last_reload_failed ? 0 : 1);
    return rc;
}

/* The time left of each pool's window after a membership change (ramp and warm-up). */
static int warm_left_family(const px_ctl *m, px_buf *b)
{
    int rc = family(b, "chash_proxy_warm_up_left_seconds", "gauge",
                    "Time left of the window after a membership change (ramp and warm-up; 0: "
                    "none).");
    uint64_t now_ms = uv_hrtime() / 1000000u;
    for (size_t i = 0; i < m->npools; i++) {
        const px_shared_pool *p = &m->pools[i];
        rc |= series(b, "chash_proxy_warm_up_left_seconds", p->conf->name, NULL, NULL);
        rc |= thousandths(b, p->prev != NULL ? px_warm_times_left(&p->warm, now_ms) : 0);
    }
    return rc;
}

/* The proxy's own families: build, start, uptime, threads, memory, and each pool's membership
 * version. 0, or -1. */
static int proxy_families(const px_ctl *m, px_buf *b)
{
    int rc = 0;
    rc |= family(b, "chash_proxy_build_info", "gauge", "The proxy's version, as a label.");
    rc |= px_buf_printf(b, "chash_proxy_build_info{version=\"");
    rc |= label_value(b, PX_VERSION);
    rc |= px_buf_printf(b, "\"} 1\n");
    rc |= family(b, "chash_proxy_start_time_seconds", "gauge",
                 "When the proxy started, in seconds since the epoch.");
    rc |= px_buf_printf(b, "chash_proxy_start_time_seconds %llu\n", U(m->start_time));
    rc |= family(b, "chash_proxy_uptime_seconds", "gauge", "Seconds since the proxy started.");
    uint64_t now = (uint64_t)time(NULL);
    rc |= px_buf_printf(b, "chash_proxy_uptime_seconds %llu\n",
                        U(now > m->start_time ? now - m->start_time : 0));
    rc |= family(b, "chash_proxy_worker_threads", "gauge",
                 "Worker threads serving clients (--threads).");
    rc |= px_buf_printf(b, "chash_proxy_worker_threads %u\n", m->nworkers);
    rc |= family(b, "chash_proxy_memory_held_bytes", "gauge",
                 "Bytes held in buffers and requests, what --max-memory bounds.");
    rc |= px_buf_printf(b, "chash_proxy_memory_held_bytes %llu\n",
                        U(__atomic_load_n(&px_mem_held, __ATOMIC_RELAXED)));
    rc |= family(b, "chash_proxy_memory_budget_bytes", "gauge",
                 "The memory budget (--max-memory; 0: none).");
    rc |= px_buf_printf(b, "chash_proxy_memory_budget_bytes %llu\n", U(px_mem_budget));

    rc |= family(b, "chash_proxy_membership_info", "gauge",
                 "The membership version each pool serves, as a label (value 1).");
    for (size_t i = 0; i < m->npools; i++) {
        const px_shared_pool *pool = &m->pools[i];
        rc |= px_buf_printf(b, "chash_proxy_membership_info{pool=\"");
        rc |= label_value(b, pool->conf->name);
        rc |= px_buf_printf(b, "\",version=\"");
        rc |= label_value(b, ch_membership_version(pool->members));
        rc |= px_buf_printf(b, "\"} 1\n");
    }
    return rc;
}

/* A counter of every pool by command class: its errors, else its requests. 0, or -1. */
static int class_family(const px_ctl *m, const px_snap *sn, px_buf *b, const char *name,
                        const char *help, bool errors)
{
    int rc = family(b, name, "counter", help);
    for (size_t i = 0; i < m->npools; i++)
        for (size_t k = 0; k < PX_NCLASSES; k++) {
            char extra[32];
            snprintf(extra, sizeof(extra), ",class=\"%s\"", class_names[class_order[k]]);
            rc |= series(b, name, m->pools[i].conf->name, NULL, extra);
            const px_pool_metrics *pm = &sn->pools[i].m;
            rc |= px_buf_printf(b, "%llu\n", U(errors ? pm->errors[class_order[k]]
                                                      : pm->requests[class_order[k]]));
        }
    return rc;
}

/* The requests' families: by class, their errors, the latency histogram. 0, or -1. */
static int request_families(const px_ctl *m, const px_snap *sn, px_buf *b)
{
    int rc = 0;
    rc |= class_family(m, sn, b, "chash_proxy_requests_total",
                       "Client requests answered, by command class (read, write, multi: split "
                       "multi-key, local: answered by the proxy, refused: unsupported or "
                       "malformed).",
                       false);
    rc |= class_family(m, sn, b, "chash_proxy_request_errors_total",
                       "Client requests answered with an error reply (the proxy's or a "
                       "backend's), by command class.",
                       true);
    rc |= family(b, "chash_proxy_request_duration_seconds", "histogram",
                 "Time from a client request's arrival to its reply being queued for the "
                 "client.");
    for (size_t i = 0; i < m->npools; i++) {
        const char *name = m->pools[i].conf->name;
        const px_pool_metrics *pm = &sn->pools[i].m;
        uint64_t cum = 0;
        for (size_t k = 0; k <= PX_LAT_NBOUNDS; k++) {
            char extra[32];
            snprintf(extra, sizeof(extra), ",le=\"%s\"",
                     k < PX_LAT_NBOUNDS ? lat_labels[k] : "+Inf");
            cum += pm->lat_buckets[k];
            rc |= series(b, "chash_proxy_request_duration_seconds_bucket", name, NULL, extra);
            rc |= px_buf_printf(b, "%llu\n", U(cum));
        }
        rc |= series(b, "chash_proxy_request_duration_seconds_sum", name, NULL, NULL);
        rc |= px_buf_printf(b, "%llu.%09llu\n", U(pm->lat_sum_ns / 1000000000u),
                            U(pm->lat_sum_ns % 1000000000u));
        rc |= series(b, "chash_proxy_request_duration_seconds_count", name, NULL, NULL);
        rc |= px_buf_printf(b, "%llu\n", U(cum));
    }
    return rc;
}

/* The families of server_families[], each server of each pool. 0, or -1. */
static int server_table_families(const px_ctl *m, const px_snap *sn, px_buf *b)
{
    int rc = 0;
    for (size_t f = 0; f < sizeof(server_families) / sizeof(server_families[0]); f++) {
        rc |= family(b, server_families[f].name, server_families[f].type,
                     server_families[f].help);
        for (size_t i = 0; i < m->npools; i++) {
            const px_shared_pool *pool = &m->pools[i];
            for (size_t s = 0; s < pool->nservers; s++) {
                rc |= series(b, server_families[f].name, pool->conf->name, pool->servers[s]->id,
                             NULL);
                rc |= px_buf_printf(b, "%llu\n",
                                    U(server_families[f].get(&sn->pools[i].servers[s], pool, s)));
            }
        }
    }
    return rc;
}

int px_metrics_text(px_ctl *m, px_buf *b)
{
    px_snap sn;
    if (px_snapshot(m, &sn) != 0)
        return -1;
    int rc = proxy_families(m, b);
    rc |= process_families(b);
    rc |= reload_families(m, b);
    rc |= fleet_families(m, b);
    rc |= dns_families(m, b);
    rc |= warm_left_family(m, b);
    for (size_t f = 0; f < sizeof(pool_families) / sizeof(pool_families[0]); f++) {
        rc |= family(b, pool_families[f].name, pool_families[f].type, pool_families[f].help);
        for (size_t i = 0; i < m->npools; i++) {
            rc |= series(b, pool_families[f].name, m->pools[i].conf->name, NULL, NULL);
            rc |= px_buf_printf(b, "%llu\n", U(pool_families[f].get(&sn.pools[i], &m->pools[i])));
        }
    }
    rc |= request_families(m, &sn, b);
    rc |= server_table_families(m, &sn, b);
    rc |= px_hotkeys_metrics(m, b);
    px_snapshot_free(m, &sn);
    return rc == 0 ? 0 : -1;
}

/* ---------------------------------------------------------------------------------------------- */

/* One counter of pool's in INFO: pool_<name>_<prefix><field>:<value>. 0, or -1. */
static int info_count(px_buf *b, const px_pool *pool, const char *prefix, const char *field,
                      uint64_t v)
{
    int rc = px_buf_append(b, "pool_", 5);
    rc |= px_info_name(b, pool->conf->name);
    rc |= px_buf_printf(b, "_%s%s:%llu\r\n", prefix, field, U(v));
    return rc != 0 ? -1 : 0;
}

int px_metrics_info(const px_ctl *m, const px_worker *px, px_buf *b)
{
    uint64_t now = (uint64_t)time(NULL);
    int rc = px_buf_printf(b,
                           "# Proxy\r\n"
                           "chash_proxy_version:%s\r\n"
                           "process_id:%ld\r\n"
                           "uptime_in_seconds:%llu\r\n"
                           "connected_clients:%llu\r\n"
                           "total_connections_received:%llu\r\n"
                           "worker_threads:%u\r\n"
                           "worker_id:%u\r\n"
                           /* What clients that look for their server's role read (valkey-glide
                            * refuses a standalone server that is not a master): the proxy takes
                            * writes, so to its clients it is one. */
                           "\r\n# Replication\r\n"
                           "role:master\r\n"
                           "connected_slaves:0\r\n"
                           "\r\n# Pools\r\n"
                           "pools:%zu\r\n",
                           PX_VERSION, (long)getpid(),
                           U(now > m->start_time ? now - m->start_time : 0), U(px_clients(m)),
                           U(PX_ATOMIC_LOAD(m->total_connections)), m->nworkers, px->index,
                           px->npools);
    for (size_t i = 0; i < px->npools; i++) {
        const px_pool *pool = &px->pools[i];
        size_t up = 0;
        for (size_t s = 0; s < pool->nservers; s++)
            up += px_health_up(pool->health, s) ? 1 : 0;
        rc |= px_buf_append(b, "pool_", 5);
        rc |= px_info_name(b, pool->conf->name);
        rc |= px_buf_printf(b, "_membership_version:%s\r\n",
                            ch_membership_version(pool->members));
        rc |= px_buf_append(b, "pool_", 5);
        rc |= px_info_name(b, pool->conf->name);
        rc |= px_buf_printf(b, "_servers:%zu\r\n", pool->nservers);
        rc |= px_buf_append(b, "pool_", 5);
        rc |= px_info_name(b, pool->conf->name);
        rc |= px_buf_printf(b, "_servers_up:%zu\r\n", up);
        rc |= px_buf_append(b, "pool_", 5);
        rc |= px_info_name(b, pool->conf->name);
        uint64_t left = px_warm_left(pool, px_io_now(&px->io));
        rc |= px_buf_printf(b, "_warm_up:%s\r\n",
                            left == 0                                    ? "off"
                            : px_io_now(&px->io) < pool->warm.start_ms + pool->warm.ramp_ms
                                ? "ramp"
                                : "warm");
        rc |= px_buf_append(b, "pool_", 5);
        rc |= px_info_name(b, pool->conf->name);
        rc |= px_buf_printf(b, "_warm_up_left_ms:%llu\r\n", U(left));
        if (ch_conf_membership_etcd(pool->conf)) { /* docs/FLEET.md, "Fencing" */
            bool fenced = px_shared_fenced(pool->shared, uv_hrtime());
            rc |= px_buf_append(b, "pool_", 5);
            rc |= px_info_name(b, pool->conf->name);
            rc |= px_buf_printf(b, "_fleet_fenced:%d\r\n", fenced ? 1 : 0);
            rc |= px_buf_append(b, "pool_", 5);
            rc |= px_info_name(b, pool->conf->name);
            rc |= px_buf_printf(b, "_fleet_membership_fenced:%s\r\n",
                                pool->conf->membership_fenced == CH_CONF_FENCED_SERVE ? "serve"
                                                                                      : "error");
        }
#define X(f) rc |= info_count(b, pool, "", #f, pool->m.warm.f);
        PX_WARM_SUMS
#undef X
        /* this worker's counts, as the warm ones */
#define X(f) rc |= info_count(b, pool, "shadow_", #f, pool->m.shadow.f);
        if (pool->conf->shadow_pool != NULL) {
            PX_SHADOW_SUMS
        }
#undef X
#define X(f) rc |= info_count(b, pool, "near_cache_", #f, pool->m.near.f);
        if (pool->conf->hot_cache_ms > 0) {
            PX_NEAR_SUMS
        }
#undef X
#define X(f) rc |= info_count(b, pool, "near_tracking_", #f, pool->m.track.f);
        if (pool->conf->hot_cache_ms > 0 && pool->conf->redis) {
            PX_TRACK_SUMS
        }
#undef X
#define X(f) rc |= info_count(b, pool, "client_tracking_", #f, pool->m.ctrack.f);
        if (pool->conf->hot_cache_ms > 0 && pool->conf->redis && pool->conf->near_tracking) {
            PX_CTRACK_SUMS
        }
#undef X
#define X(f) rc |= info_count(b, pool, "gutter_", #f, pool->m.gutter.f);
        if (pool->conf->gutter_pool != NULL) {
            PX_GUTTER_SUMS
        }
#undef X
    }
    rc |= px_hotkeys_info(m, b);
    return rc == 0 ? 0 : -1;
}


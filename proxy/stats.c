/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stats.c — twemproxy-compatible stats: each TCP connection to the stats address receives one
 * JSON object, then the proxy closes it. Fields and nesting are nutcracker's: top-level service,
 * source, version, uptime, timestamp, total_connections, curr_connections; one object per pool
 * with its counters and one object per server (keyed by the server's twemproxy name, in
 * nutcracker's server order). Our additions: "membership_version" per pool; "reloads" and
 * "reload_failures" at the top level (SIGHUP, reload.c); "fleet_*" per pool whose membership
 * comes from etcd (fleet.h), "dns_*" per pool whose membership comes from DNS (dns_watch.h).
 * Values are live (nutcracker aggregates them every -i milliseconds; -i is accepted and ignored):
 * each request for them adds up every worker's counters (px_snapshot: one job per worker, on its
 * loop, so the request path keeps plain counters).
 */

#include "stats.h"
#include "dns_watch.h"
#include "fleet.h"
#include "json.h"
#include "snapshot.h"
#include "resolve.h"

#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int json_str(px_buf *b, const char *s)
{
    return px_json_string(b, s, strlen(s), false);
}

#define U(x) ((unsigned long long)(x))

/* ---- JSON -------------------------------------------------------------------------------------- */

int px_stats_json(px_ctl *m, px_buf *b)
{
    px_snap sn;
    if (px_snapshot(m, &sn) != 0)
        return -1;
    char host[256] = "localhost";
    gethostname(host, sizeof(host) - 1);
    uint64_t now = (uint64_t)time(NULL);
    int rc = px_buf_printf(b, "{\"service\":\"chash-proxy\", \"source\":");
    rc |= json_str(b, host);
    rc |= px_buf_printf(b,
                        ", \"version\":\"%s\", \"uptime\":%llu, \"timestamp\":%llu, "
                        "\"total_connections\":%llu, \"curr_connections\":%llu, "
                        "\"reloads\":%llu, \"reload_failures\":%llu",
                        PX_VERSION, U(now - m->start_time), U(now),
                        U(PX_ATOMIC_LOAD(m->total_connections)), U(px_clients(m)), U(m->reloads), U(m->reload_failures));
    for (size_t i = 0; i < m->npools; i++) {
        const px_shared_pool *pool = &m->pools[i];
        const px_pool_stats *ps = &sn.pools[i].stats;
        rc |= px_buf_printf(b, ", ");
        rc |= json_str(b, pool->conf->name);
        rc |= px_buf_printf(b,
                            ": {\"client_eof\":%llu, \"client_err\":%llu, "
                            "\"client_connections\":%llu, \"server_ejects\":%llu, "
                            "\"forward_error\":%llu, \"fragments\":%llu, \"membership_version\":",
                            U(ps->client_eof), U(ps->client_err), U(ps->client_connections),
                            U(ps->server_ejects), U(ps->forward_error), U(ps->fragments));
        rc |= json_str(b, ch_membership_version(pool->members));
        px_fleet_stats fs;
        if (px_fleet_stats_get(m, i, &fs)) /* our addition: its etcd membership (fleet.h) */
            rc |= px_buf_printf(b,
                                ", \"fleet_epoch\":%lld, \"fleet_seen_epoch\":%lld, "
                                "\"fleet_prepared\":%lld, \"fleet_etcd_up\":%d, "
                                "\"fleet_held_down\":%d, \"fleet_applied\":%llu, "
                                "\"fleet_refused_invalid\":%llu, \"fleet_refused_stale\":%llu, "
                                "\"fleet_damped\":%llu, \"fleet_watch_restarts\":%llu, "
                                "\"fleet_fenced\":%d, \"fleet_fences\":%llu",
                                (long long)fs.epoch, (long long)fs.seen_epoch,
                                (long long)fs.prepared, fs.etcd_up ? 1 : 0, fs.held_down ? 1 : 0,
                                U(fs.applied), U(fs.refused_invalid), U(fs.refused_stale),
                                U(fs.damped), U(fs.watch_restarts), fs.fenced ? 1 : 0,
                                U(fs.fences));
        px_dns_stats ds;
        if (px_dns_stats_get(m, i, &ds)) /* our addition: its DNS membership (dns_watch.h) */
            rc |= px_buf_printf(b,
                                ", \"dns_epoch\":%lld, \"dns_lookups\":%llu, "
                                "\"dns_failed\":%llu, \"dns_empty\":%llu, \"dns_keeping\":%d, "
                                "\"dns_held_down\":%d, \"dns_applied\":%llu, "
                                "\"dns_damped\":%llu, \"dns_refused\":%llu",
                                (long long)ds.epoch, U(ds.lookups), U(ds.failed), U(ds.empty),
                                ds.keeping ? 1 : 0, ds.held_down ? 1 : 0, U(ds.applied),
                                U(ds.damped), U(ds.refused));
        /* nutcracker's server order, whatever the membership's */
        const ch_conf_pool *pc = pool->conf;
        for (size_t k = 0; k < pc->nservers; k++) {
            const ch_conf_server *cs = &pc->servers[pc->order[k]];
            const px_snap_server *s = NULL;
            for (size_t j = 0; j < pool->nservers && s == NULL; j++)
                if (pool->servers[j] == cs)
                    s = &sn.pools[i].servers[j];
            if (s == NULL)
                continue;
            const px_server_stats *ss = &s->stats;
            rc |= px_buf_printf(b, ", ");
            rc |= json_str(b, cs->id);
            rc |= px_buf_printf(
                b,
                ": {\"server_eof\":%llu, \"server_err\":%llu, \"server_timedout\":%llu, "
                "\"server_connections\":%llu, \"server_ejected_at\":%llu, \"requests\":%llu, "
                "\"request_bytes\":%llu, \"responses\":%llu, \"response_bytes\":%llu, "
                "\"in_queue\":%llu, \"in_queue_bytes\":%llu, \"out_queue\":%llu, "
                "\"out_queue_bytes\":%llu}",
                U(ss->server_eof), U(ss->server_err), U(ss->server_timedout),
                U(ss->server_connections), U(ss->server_ejected_at), U(ss->requests),
                U(ss->request_bytes), U(ss->responses), U(ss->response_bytes), U(s->in_queue),
                U(s->in_queue_bytes), U(s->out_queue), U(s->out_queue_bytes));
        }
        rc |= px_buf_printf(b, "}");
    }
    rc |= px_buf_printf(b, "}\n");
    px_snapshot_free(m, &sn);
    return rc == 0 ? 0 : -1;
}

static void stats_shutdown_cb(uv_shutdown_t *req, int status)
{
    (void)status;
    px_stream_close(PX_CONTAINER(req->handle, px_stream, u));
    free(req);
}

/* The JSON is out (or failed): shut the connection down after it, then close. */
static void stats_finish(px_stream *st, int status)
{
    uv_shutdown_t *sd = status == 0 ? malloc(sizeof(*sd)) : NULL;
    if (sd == NULL || uv_shutdown(sd, &st->u.stream, stats_shutdown_cb) < 0) {
        free(sd);
        px_stream_close(st);
    }
}

static void stats_written(px_write *w, px_stream *st, int status)
{
    (void)w;
    stats_finish(st, status);
}

static void stats_conn_cb(uv_stream_t *server, int status)
{
    px_stream *ls = PX_CONTAINER(server, px_stream, u);
    px_ctl *px = ls->owner;
    if (status < 0)
        return;
    px_stream *st = px_stream_new(px->loop, false, px);
    if (st == NULL)
        return;
    if (uv_accept(server, &st->u.stream) < 0) {
        px_stream_close(st);
        return;
    }
    px_buf b = {0};
    size_t queued = 0;
    if (px_stats_json(px, &b) != 0) {
        px_buf_free(&b);
        px_stream_close(st);
        return;
    }
    int rc = px_stream_write(st, &b, stats_written, &queued);
    px_buf_free(&b);
    if (rc < 0)
        px_stream_close(st);
    else if (queued == 0)
        stats_finish(st, 0);
}

int px_stats_start(px_ctl *px)
{
    px_stream *st = px_stream_new(px->loop, false, px);
    if (st == NULL)
        return -1;
    struct sockaddr_storage sa;
    char why[128];
    if (px_resolve(px->stats_addr, px->stats_port, true, &sa, NULL, why, sizeof(why)) != 0) {
        PX_LOG(px, PX_LOG_ERR, "stats: cannot resolve '%s': %s", px->stats_addr, why);
        px_stream_close(st);
        return -1;
    }
    int rc = uv_tcp_bind(&st->u.tcp, (const struct sockaddr *)&sa, 0);
    if (rc == 0)
        rc = uv_listen(&st->u.stream, 64, stats_conn_cb);
    if (rc < 0) {
        PX_LOG(px, PX_LOG_ERR, "stats: cannot listen on %s:%d: %s", px->stats_addr,
               px->stats_port, uv_strerror(rc));
        px_stream_close(st);
        return -1;
    }
    px->stats_listener = st;
    PX_LOG(px, PX_LOG_NOTICE, "stats on %s:%d", px->stats_addr, px->stats_port);
    return 0;
}

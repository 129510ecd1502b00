/*
 * stats.c — twemproxy-compatible stats: each TCP connection to the stats address receives one
 * JSON object, then the proxy closes it. Fields and nesting are nutcracker's: top-level service,
 * source, version, uptime, timestamp, total_connections, curr_connections; one object per pool
 * with its counters and one object per server (keyed by the server's twemproxy name, in
 * nutcracker's server order). Our additions: "membership_version" per pool; "reloads" and
 * "reload_failures" at the top level (SIGHUP, reload.c).
 * Values are live (nutcracker aggregates them every -i milliseconds; -i is accepted and ignored):
 * each request for them adds up every worker's counters (px_snapshot: one job per worker, on its
 * loop, so the request path keeps plain counters).
 */

#include "proxy.h"

#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int json_str(px_buf *b, const char *s)
{
    int rc = px_buf_append(b, "\"", 1);
    for (; rc == 0 && *s != '\0'; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            rc = px_buf_printf(b, "\\%c", ch);
        else if (ch < 0x20)
            rc = px_buf_printf(b, "\\u%04x", ch);
        else
            rc = px_buf_append(b, s, 1);
    }
    return rc == 0 ? px_buf_append(b, "\"", 1) : rc;
}

#define U(x) ((unsigned long long)(x))

/* ---- snapshot ---------------------------------------------------------------------------------- */

/* Adds worker px's counters into the snapshot (a job on px's loop). */
static void snap_add(px_proxy *px, void *arg)
{
    px_snap *sn = arg;
    for (size_t i = 0; i < px->npools; i++) {
        const px_pool *pool = &px->pools[i];
        px_snap_pool *sp = &sn->pools[i];
#define X(f) sp->st.f += pool->st.f;
        PX_POOL_SUMS
#undef X
        for (size_t k = 0; k < PX_NCLASSES; k++) {
            sp->m.requests[k] += pool->m.requests[k];
            sp->m.errors[k] += pool->m.errors[k];
        }
        for (size_t k = 0; k <= PX_LAT_NBOUNDS; k++)
            sp->m.lat_buckets[k] += pool->m.lat_buckets[k];
        sp->m.lat_sum_ns += pool->m.lat_sum_ns;
        sp->m.clients_accepted += pool->m.clients_accepted;
        /* Every worker's pool has the shared pool's servers, in its order (a reload commits on
         * every worker before the control thread runs anything else). */
        for (size_t j = 0; j < pool->nservers; j++) {
            const px_server *s = &pool->servers[j];
            px_snap_server *ss = &sp->servers[j];
#define X(f) ss->st.f += s->st.f;
            PX_SERVER_SUMS
#undef X
            if (s->st.server_ejected_at > ss->st.server_ejected_at)
                ss->st.server_ejected_at = s->st.server_ejected_at;
            for (unsigned c = 0; c < s->nconns; c++) {
                const px_conn *cn = &s->conns[c];
                ss->in_queue += cn->nunsent;
                ss->in_queue_bytes += cn->unsent_bytes;
                ss->out_queue += cn->nfrags - cn->nunsent;
                ss->out_queue_bytes += cn->bytes - cn->unsent_bytes;
            }
        }
    }
}

int px_snapshot(px_main *m, px_snap *sn)
{
    memset(sn, 0, sizeof(*sn));
    if (m->stopping) /* the workers take no more jobs */
        return -1;
    sn->pools = calloc(m->npools, sizeof(*sn->pools));
    if (sn->pools == NULL)
        return -1;
    for (size_t i = 0; i < m->npools; i++) {
        sn->pools[i].servers = calloc(m->pools[i].nservers, sizeof(*sn->pools[i].servers));
        if (sn->pools[i].servers == NULL) {
            px_snapshot_free(m, sn);
            return -1;
        }
    }
    for (unsigned w = 0; w < m->nworkers; w++)
        px_worker_call(&m->workers[w], snap_add, sn);
    return 0;
}

void px_snapshot_free(px_main *m, px_snap *sn)
{
    for (size_t i = 0; sn->pools != NULL && i < m->npools; i++)
        free(sn->pools[i].servers);
    free(sn->pools);
    sn->pools = NULL;
}

uint64_t px_clients(const px_main *m)
{
    uint64_t n = 0;
    for (size_t i = 0; i < m->npools; i++)
        n += PX_ATOMIC_LOAD(m->pools[i].clients);
    return n;
}

/* ---- JSON -------------------------------------------------------------------------------------- */

int px_stats_json(px_main *m, px_buf *b)
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
        const px_pool_stats *ps = &sn.pools[i].st;
        rc |= px_buf_printf(b, ", ");
        rc |= json_str(b, pool->conf->name);
        rc |= px_buf_printf(b,
                            ": {\"client_eof\":%llu, \"client_err\":%llu, "
                            "\"client_connections\":%llu, \"server_ejects\":%llu, "
                            "\"forward_error\":%llu, \"fragments\":%llu, \"membership_version\":",
                            U(ps->client_eof), U(ps->client_err), U(ps->client_connections),
                            U(ps->server_ejects), U(ps->forward_error), U(ps->fragments));
        rc |= json_str(b, ch_membership_version(pool->members));
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
            const px_server_stats *ss = &s->st;
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

static void stats_close_cb(uv_handle_t *h)
{
    free(PX_CONTAINER(h, px_stream, u));
}

static void stats_shutdown_cb(uv_shutdown_t *req, int status)
{
    (void)status;
    uv_close((uv_handle_t *)req->handle, stats_close_cb);
    free(req);
}

static void stats_write_cb(uv_write_t *req, int status)
{
    px_write *w = PX_CONTAINER(req, px_write, req);
    uv_stream_t *stream = req->handle;
    free(w->data);
    free(w);
    uv_shutdown_t *sd = status == 0 ? malloc(sizeof(*sd)) : NULL;
    if (sd == NULL || uv_shutdown(sd, stream, stats_shutdown_cb) < 0) {
        free(sd);
        if (!uv_is_closing((uv_handle_t *)stream))
            uv_close((uv_handle_t *)stream, stats_close_cb);
    }
}

static void stats_conn_cb(uv_stream_t *server, int status)
{
    px_stream *ls = PX_CONTAINER(server, px_stream, u);
    px_main *px = ls->owner;
    if (status < 0)
        return;
    px_stream *st = calloc(1, sizeof(*st));
    if (st == NULL)
        return;
    uv_tcp_init(px->loop, &st->u.tcp);
    if (uv_accept(server, &st->u.stream) < 0) {
        uv_close(&st->u.handle, stats_close_cb);
        return;
    }
    px_buf b = {0};
    px_write *w = malloc(sizeof(*w));
    if (w == NULL || px_stats_json(px, &b) != 0) {
        free(w);
        px_buf_free(&b);
        uv_close(&st->u.handle, stats_close_cb);
        return;
    }
    w->data = b.p;
    w->len = b.len;
    uv_buf_t ub = uv_buf_init(w->data, (unsigned)w->len);
    if (uv_write(&w->req, &st->u.stream, &ub, 1, stats_write_cb) < 0) {
        free(w->data);
        free(w);
        uv_close(&st->u.handle, stats_close_cb);
    }
}

int px_stats_start(px_main *px)
{
    px_stream *st = calloc(1, sizeof(*st));
    if (st == NULL)
        return -1;
    st->owner = px;
    uv_tcp_init(px->loop, &st->u.tcp);
    char port[16];
    snprintf(port, sizeof(port), "%d", px->stats_port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(px->stats_addr, port, &hints, &res);
    if (rc != 0 || res == NULL) {
        PX_LOG(px, PX_LOG_ERR, "stats: cannot resolve '%s': %s", px->stats_addr,
               gai_strerror(rc));
        uv_close(&st->u.handle, stats_close_cb);
        return -1;
    }
    rc = uv_tcp_bind(&st->u.tcp, res->ai_addr, 0);
    freeaddrinfo(res);
    if (rc == 0)
        rc = uv_listen(&st->u.stream, 64, stats_conn_cb);
    if (rc < 0) {
        PX_LOG(px, PX_LOG_ERR, "stats: cannot listen on %s:%d: %s", px->stats_addr,
               px->stats_port, uv_strerror(rc));
        uv_close(&st->u.handle, stats_close_cb);
        return -1;
    }
    px->stats_listener = st;
    PX_LOG(px, PX_LOG_NOTICE, "stats on %s:%d", px->stats_addr, px->stats_port);
    return 0;
}

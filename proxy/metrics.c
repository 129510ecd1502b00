/*
 * metrics.c — the Prometheus endpoint (--metrics-port, --metrics-addr) and the INFO reply.
 *
 * The endpoint is a minimal HTTP/1.0 server on the control thread's loop: a connection sends
 * one request (request line and headers, at most PX_METRICS_MAX_REQUEST bytes, within
 * PX_METRICS_TIMEOUT_MS), receives one response, and is closed. GET (or HEAD) /metrics answers
 * 200 with the text exposition format 0.0.4; POST /-/reload reloads the config as SIGHUP does
 * (reload.c; 200 with "reloaded: ..." or "unchanged", 400 with file:line:column: message for an
 * invalid file, 500 for another failure; any other method there 405; a request body is not
 * read); another path 404, another method 405, a request that does not parse 400, one that is
 * too large 431. The body is built in memory (O(pools + servers), the workers' counters summed
 * by px_snapshot: one short job per worker) and written with one uv_write; no worker waits on
 * it. At most PX_METRICS_MAX_CONNS connections are open at once (a new one closes the oldest
 * still sending its request, or is itself closed when all are being answered), so a flood of
 * clients costs bounded memory.
 *
 * Counting: px_metrics_req_done() runs once per request, when its reply is complete; it adds the
 * request to its pool's counters (the worker's copy of the pool) for its class and to the
 * latency histogram (uv_hrtime from the request's arrival, px_req_new, to that moment).
 */

#include "proxy.h"

#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PX_METRICS_MAX_REQUEST 8192u  /* bytes of request line and headers */
#define PX_METRICS_TIMEOUT_MS 5000u   /* for a connection to send its request */
#define PX_METRICS_MAX_CONNS 32u      /* served at once */
#define PX_METRICS_SWEEP_MS 1000u     /* how often slow connections are looked for */

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
#define X(b) (uint64_t)((b)*1e9 + 0.5),
static const uint64_t lat_bounds_ns[PX_LAT_NBOUNDS] = {PX_LAT_BOUNDS};
#undef X

/* ---------------------------------------------------------------------------------------------- */

void px_metrics_req_done(px_req *r)
{
    if (r->observed || r->pool == NULL)
        return;
    r->observed = true;
    px_pool_metrics *m = &r->pool->m;
    unsigned cls = r->mclass < PX_NCLASSES ? r->mclass : PX_CLASS_REFUSED;
    m->requests[cls]++;
    if (r->reply.len > 0 && r->reply.p[0] == '-')
        m->errors[cls]++;
    uint64_t ns = uv_hrtime() - r->t0;
    size_t b = 0;
    while (b < PX_LAT_NBOUNDS && ns > lat_bounds_ns[b])
        b++;
    m->lat_buckets[b]++;
    m->lat_sum_ns += ns;
}

/* ---------------------------------------------------------------------------------------------- */

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
SV(sv_requests, s->st.requests)
SV(sv_responses, s->st.responses)
SV(sv_errors, s->st.server_err)
SV(sv_eof, s->st.server_eof)
SV(sv_timeouts, s->st.server_timedout)
SV(sv_ejections, s->st.ejects)
SV(sv_connections, s->st.server_connections)
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
};

/* Pool p, whose counters summed over the workers are s. */
typedef uint64_t (*pool_value)(const px_snap_pool *s, const px_shared_pool *p);
#define PV(fn, expr)                                                                              \
    static uint64_t fn(const px_snap_pool *s, const px_shared_pool *p)                            \
    {                                                                                             \
        (void)s, (void)p;                                                                         \
        return (expr);                                                                            \
    }
PV(pv_clients, s->st.client_connections)
PV(pv_accepted, s->m.clients_accepted)
PV(pv_client_err, s->st.client_err)
PV(pv_forward_err, s->st.forward_error)
PV(pv_fragments, s->st.fragments)
PV(pv_nservers, p->nservers)
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
    {"chash_proxy_forward_errors_total", "counter",
     "Requests (or parts) answered with an error because no backend could serve them.",
     pv_forward_err},
    {"chash_proxy_fragments_total", "counter",
     "Sub-requests created by splitting multi-key commands.", pv_fragments},
    {"chash_proxy_servers", "gauge", "Servers in the pool's membership.", pv_nservers},
};

int px_metrics_text(px_main *m, px_buf *b)
{
    px_snap sn;
    if (px_snapshot(m, &sn) != 0)
        return -1;
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

    for (size_t f = 0; f < sizeof(pool_families) / sizeof(pool_families[0]); f++) {
        rc |= family(b, pool_families[f].name, pool_families[f].type, pool_families[f].help);
        for (size_t i = 0; i < m->npools; i++) {
            rc |= series(b, pool_families[f].name, m->pools[i].conf->name, NULL, NULL);
            rc |= px_buf_printf(b, "%llu\n", U(pool_families[f].get(&sn.pools[i], &m->pools[i])));
        }
    }

    rc |= family(b, "chash_proxy_requests_total", "counter",
                 "Client requests answered, by command class (read, write, multi: split "
                 "multi-key, local: answered by the proxy, refused: unsupported or malformed).");
    for (size_t i = 0; i < m->npools; i++)
        for (size_t k = 0; k < PX_NCLASSES; k++) {
            char extra[32];
            snprintf(extra, sizeof(extra), ",class=\"%s\"", class_names[class_order[k]]);
            rc |= series(b, "chash_proxy_requests_total", m->pools[i].conf->name, NULL, extra);
            rc |= px_buf_printf(b, "%llu\n", U(sn.pools[i].m.requests[class_order[k]]));
        }
    rc |= family(b, "chash_proxy_request_errors_total", "counter",
                 "Client requests answered with an error reply (the proxy's or a backend's), "
                 "by command class.");
    for (size_t i = 0; i < m->npools; i++)
        for (size_t k = 0; k < PX_NCLASSES; k++) {
            char extra[32];
            snprintf(extra, sizeof(extra), ",class=\"%s\"", class_names[class_order[k]]);
            rc |= series(b, "chash_proxy_request_errors_total", m->pools[i].conf->name, NULL,
                         extra);
            rc |= px_buf_printf(b, "%llu\n", U(sn.pools[i].m.errors[class_order[k]]));
        }

    rc |= family(b, "chash_proxy_request_duration_seconds", "histogram",
                 "Time from a client request's arrival to its reply being queued for the "
                 "client.");
    for (size_t i = 0; i < m->npools; i++) {
        const char *name = m->pools[i].conf->name;
        const px_pool_metrics *pm = &sn.pools[i].m;
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

    for (size_t f = 0; f < sizeof(server_families) / sizeof(server_families[0]); f++) {
        rc |= family(b, server_families[f].name, server_families[f].type,
                     server_families[f].help);
        for (size_t i = 0; i < m->npools; i++) {
            const px_shared_pool *pool = &m->pools[i];
            for (size_t s = 0; s < pool->nservers; s++) {
                rc |= series(b, server_families[f].name, pool->conf->name, pool->servers[s]->id,
                             NULL);
                rc |= px_buf_printf(b, "%llu\n",
                                    U(server_families[f].get(&sn.pools[i].servers[s], pool, s)));
            }
        }
    }
    px_snapshot_free(m, &sn);
    return rc == 0 ? 0 : -1;
}

/* ---------------------------------------------------------------------------------------------- */

/* A pool name as part of an INFO field name: bytes other than [A-Za-z0-9_.-] become '_'. */
static int info_name(px_buf *b, const char *s)
{
    int rc = 0;
    for (; rc == 0 && *s != '\0'; s++) {
        char ch = *s;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-';
        rc = px_buf_append(b, ok ? &ch : "_", 1);
    }
    return rc;
}

int px_metrics_info(px_proxy *px, px_buf *b)
{
    const px_main *m = px->main;
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
        rc |= info_name(b, pool->conf->name);
        rc |= px_buf_printf(b, "_membership_version:%s\r\n",
                            ch_membership_version(pool->members));
        rc |= px_buf_append(b, "pool_", 5);
        rc |= info_name(b, pool->conf->name);
        rc |= px_buf_printf(b, "_servers:%zu\r\n", pool->nservers);
        rc |= px_buf_append(b, "pool_", 5);
        rc |= info_name(b, pool->conf->name);
        rc |= px_buf_printf(b, "_servers_up:%zu\r\n", up);
    }
    return rc == 0 ? 0 : -1;
}

/* ---------------------------------------------------------------------------------------------- */

/* The server lives until its listener, its sweep timer and every connection are closed: refs
 * counts those handles; the last close callback after px_metrics_stop frees it. */
struct px_metrics_server {
    px_main *px;
    uv_tcp_t listener;
    uv_timer_t sweep;
    px_dl conns;   /* open and closing connections, oldest first */
    size_t nconns; /* of them, those not closing */
    size_t refs;
    bool stopping;
};

typedef struct mconn {
    uv_tcp_t tcp;
    px_metrics_server *ms;
    px_dl link;
    uint64_t deadline; /* loop time (ms) by which the request must have arrived */
    bool answered;     /* reading stopped, the response is being written */
    bool closing;
    uv_write_t wr;
    uv_shutdown_t sd;
    px_buf out;
    size_t len;
    char req[PX_METRICS_MAX_REQUEST];
} mconn;

static void ms_unref(px_metrics_server *ms)
{
    if (--ms->refs == 0 && ms->stopping)
        free(ms);
}

static void ms_handle_close_cb(uv_handle_t *h)
{
    ms_unref(h->data);
}

static void mconn_close_cb(uv_handle_t *h)
{
    mconn *mc = h->data;
    px_metrics_server *ms = mc->ms;
    px_dl_remove(&mc->link);
    px_buf_free(&mc->out);
    free(mc);
    ms_unref(ms);
}

static void mconn_close(mconn *mc)
{
    if (mc->closing)
        return;
    mc->closing = true;
    mc->ms->nconns--;
    uv_close((uv_handle_t *)&mc->tcp, mconn_close_cb);
}

static void mconn_shutdown_cb(uv_shutdown_t *req, int status)
{
    (void)status;
    mconn_close(req->data);
}

static void mconn_write_cb(uv_write_t *req, int status)
{
    mconn *mc = req->data;
    if (mc->closing)
        return;
    mc->sd.data = mc;
    if (status < 0 || uv_shutdown(&mc->sd, (uv_stream_t *)&mc->tcp, mconn_shutdown_cb) < 0)
        mconn_close(mc);
}

/* allow: the methods a 405 lists in its Allow header. */
static void mconn_respond(mconn *mc, int code, const char *reason, const char *ctype,
                          const px_buf *body, bool head, const char *allow)
{
    uv_read_stop((uv_stream_t *)&mc->tcp);
    mc->answered = true;
    size_t blen = body != NULL ? body->len : 0;
    int rc = px_buf_printf(&mc->out,
                           "HTTP/1.0 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                           "%s%s%sConnection: close\r\n\r\n",
                           code, reason, ctype, blen, code == 405 ? "Allow: " : "",
                           code == 405 ? allow : "", code == 405 ? "\r\n" : "");
    if (rc == 0 && !head && blen > 0)
        rc = px_buf_append(&mc->out, body->p, blen);
    if (rc != 0) {
        mconn_close(mc);
        return;
    }
    uv_buf_t ub = uv_buf_init(mc->out.p, (unsigned)mc->out.len);
    mc->wr.data = mc;
    if (uv_write(&mc->wr, (uv_stream_t *)&mc->tcp, &ub, 1, mconn_write_cb) < 0)
        mconn_close(mc);
}

static void mconn_error_allow(mconn *mc, int code, const char *reason, const char *allow)
{
    px_buf body = {0};
    if (px_buf_printf(&body, "%d %s\n", code, reason) != 0) {
        px_buf_free(&body);
        mconn_close(mc);
        return;
    }
    mconn_respond(mc, code, reason, "text/plain; charset=utf-8", &body, false, allow);
    px_buf_free(&body);
}

static void mconn_error(mconn *mc, int code, const char *reason)
{
    mconn_error_allow(mc, code, reason, "GET, HEAD");
}

/* POST /-/reload: the SIGHUP reload (reload.c), its outcome as a one-line text body. */
static void mconn_reload(mconn *mc)
{
    px_buf body = {0};
    int rc = px_reload(mc->ms->px, "POST /-/reload", &body);
    if (px_buf_append(&body, "\n", 1) != 0) {
        px_buf_free(&body);
        mconn_error(mc, 500, "Internal Server Error");
        return;
    }
    int code = rc == PX_RELOAD_OK ? 200 : rc == PX_RELOAD_INVALID ? 400 : 500;
    const char *reason = rc == PX_RELOAD_OK        ? "OK"
                         : rc == PX_RELOAD_INVALID ? "Bad Request"
                                                   : "Internal Server Error";
    mconn_respond(mc, code, reason, "text/plain; charset=utf-8", &body, false, NULL);
    px_buf_free(&body);
}

static bool is_token_char(char ch)
{
    return ch > ' ' && ch < 0x7f;
}

/* The request line is mc->req[0, n) (no line end): answers it. */
static void mconn_request(mconn *mc, size_t n)
{
    const char *p = mc->req, *end = mc->req + n;
    if (n > 0 && end[-1] == '\r')
        end--;
    /* METHOD SP TARGET [SP HTTP/1.x] (without a version: HTTP/0.9's form, also answered) */
    const char *m = p;
    while (p < end && is_token_char(*p))
        p++;
    size_t mlen = (size_t)(p - m);
    if (mlen == 0 || p == end || *p != ' ') {
        mconn_error(mc, 400, "Bad Request");
        return;
    }
    const char *t = ++p;
    while (p < end && is_token_char(*p))
        p++;
    size_t tlen = (size_t)(p - t);
    if (tlen == 0 || (p < end && *p != ' ')) {
        mconn_error(mc, 400, "Bad Request");
        return;
    }
    if (p < end) {
        const char *v = ++p;
        while (p < end && is_token_char(*p))
            p++;
        if (p != end || (size_t)(end - v) != 8 || memcmp(v, "HTTP/1.", 7) != 0) {
            mconn_error(mc, 400, "Bad Request");
            return;
        }
    }
    size_t plen = 0;
    while (plen < tlen && t[plen] != '?')
        plen++;
    if (plen == 9 && memcmp(t, "/-/reload", 9) == 0) {
        if (mlen == 4 && memcmp(m, "POST", 4) == 0)
            mconn_reload(mc);
        else
            mconn_error_allow(mc, 405, "Method Not Allowed", "POST");
        return;
    }
    bool head = mlen == 4 && memcmp(m, "HEAD", 4) == 0;
    if (!head && !(mlen == 3 && memcmp(m, "GET", 3) == 0)) {
        mconn_error(mc, 405, "Method Not Allowed");
        return;
    }
    if (plen != 8 || memcmp(t, "/metrics", 8) != 0) {
        mconn_error(mc, 404, "Not Found");
        return;
    }
    px_buf body = {0};
    if (px_metrics_text(mc->ms->px, &body) != 0) {
        px_buf_free(&body);
        mconn_error(mc, 500, "Internal Server Error");
        return;
    }
    mconn_respond(mc, 200, "OK", "text/plain; version=0.0.4", &body, head, NULL);
    px_buf_free(&body);
}

static void mconn_alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)hint;
    mconn *mc = h->data;
    /* mconn_read_cb answers a full buffer at once, so there is always room here. */
    buf->base = mc->req + mc->len;
    buf->len = sizeof(mc->req) - mc->len;
}

static void mconn_read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    mconn *mc = stream->data;
    if (mc->closing || mc->answered || nread == 0)
        return;
    if (nread < 0) { /* EOF or an error before a whole request: nothing to answer */
        mconn_close(mc);
        return;
    }
    size_t old = mc->len;
    mc->len += (size_t)nread;
    /* The request line ends at the first LF; a request with a version ends with an empty line
     * (its headers are read and ignored), one without (HTTP/0.9) right after its line. */
    const char *lf = memchr(mc->req, '\n', mc->len);
    if (lf != NULL) {
        size_t n = (size_t)(lf - mc->req);
        size_t from = old > 3 ? old - 3 : 0;
        bool versioned = n >= 8 && memmem(mc->req, n, " HTTP/", 6) != NULL;
        bool done = !versioned || memmem(mc->req + from, mc->len - from, "\r\n\r\n", 4) != NULL ||
                    memmem(mc->req + from, mc->len - from, "\n\n", 2) != NULL;
        if (done) {
            mconn_request(mc, n);
            return;
        }
    }
    if (mc->len == sizeof(mc->req))
        mconn_error(mc, 431, "Request Header Fields Too Large");
}

static void listener_cb(uv_stream_t *server, int status)
{
    px_metrics_server *ms = server->data;
    if (status < 0 || ms->stopping)
        return;
    /* At the cap, the oldest connection still sending its request (a slow or idle client) makes
     * room: idle connections cannot lock scrapers out. */
    if (ms->nconns >= PX_METRICS_MAX_CONNS)
        for (px_dl *d = ms->conns.next; d != &ms->conns; d = d->next) {
            mconn *old = PX_CONTAINER(d, mconn, link);
            if (!old->answered && !old->closing) {
                mconn_close(old);
                break;
            }
        }
    mconn *mc = calloc(1, sizeof(*mc));
    if (mc == NULL)
        return;
    mc->ms = ms;
    uv_tcp_init(ms->px->loop, &mc->tcp);
    mc->tcp.data = mc;
    px_dl_push(&ms->conns, &mc->link);
    ms->nconns++;
    ms->refs++;
    if (uv_accept(server, (uv_stream_t *)&mc->tcp) < 0 || ms->nconns > PX_METRICS_MAX_CONNS) {
        mconn_close(mc);
        return;
    }
    mc->deadline = uv_now(ms->px->loop) + PX_METRICS_TIMEOUT_MS;
    if (uv_read_start((uv_stream_t *)&mc->tcp, mconn_alloc_cb, mconn_read_cb) < 0)
        mconn_close(mc);
}

/* Closes connections that have not sent a whole request in time (or not read their
 * response). */
static void sweep_cb(uv_timer_t *t)
{
    px_metrics_server *ms = t->data;
    uint64_t now = uv_now(ms->px->loop);
    for (px_dl *d = ms->conns.next; d != &ms->conns;) {
        mconn *mc = PX_CONTAINER(d, mconn, link);
        d = d->next;
        if (now >= mc->deadline)
            mconn_close(mc);
    }
}

int px_metrics_start(px_main *px)
{
    if (px->metrics_port <= 0)
        return 0;
    px_metrics_server *ms = calloc(1, sizeof(*ms));
    if (ms == NULL)
        return -1;
    ms->px = px;
    px_dl_init(&ms->conns);
    uv_tcp_init(px->loop, &ms->listener);
    uv_timer_init(px->loop, &ms->sweep);
    ms->listener.data = ms->sweep.data = ms;
    ms->refs = 2;
    px->metrics = ms;

    const char *addr = px->metrics_addr != NULL ? px->metrics_addr : "127.0.0.1";
    char port[16];
    snprintf(port, sizeof(port), "%d", px->metrics_port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(addr, port, &hints, &res);
    if (rc != 0 || res == NULL) {
        PX_LOG(px, PX_LOG_ERR, "metrics: cannot resolve '%s': %s", addr, gai_strerror(rc));
        return -1; /* px_metrics_stop (from px_main_free) closes the handles */
    }
    rc = uv_tcp_bind(&ms->listener, res->ai_addr, 0);
    freeaddrinfo(res);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&ms->listener, 64, listener_cb);
    if (rc < 0) {
        PX_LOG(px, PX_LOG_ERR, "metrics: cannot listen on %s:%d: %s", addr, px->metrics_port,
               uv_strerror(rc));
        return -1;
    }
    uv_timer_start(&ms->sweep, sweep_cb, PX_METRICS_SWEEP_MS, PX_METRICS_SWEEP_MS);
    PX_LOG(px, PX_LOG_NOTICE, "metrics on http://%s:%d/metrics", addr, px->metrics_port);
    return 0;
}

void px_metrics_stop(px_main *px)
{
    px_metrics_server *ms = px->metrics;
    if (ms == NULL)
        return;
    px->metrics = NULL;
    ms->stopping = true;
    for (px_dl *d = ms->conns.next; d != &ms->conns; d = d->next)
        mconn_close(PX_CONTAINER(d, mconn, link));
    uv_close((uv_handle_t *)&ms->listener, ms_handle_close_cb);
    uv_close((uv_handle_t *)&ms->sweep, ms_handle_close_cb);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * admin_http.c — the admin endpoint (--metrics-port, --metrics-addr; admin_http.h).
 *
 * It is a minimal HTTP/1.0 server on the control thread's loop: a connection sends
 * one request (request line and headers, at most PX_METRICS_MAX_REQUEST bytes, within
 * PX_METRICS_TIMEOUT_MS), receives one response, and is closed. The head is parsed strictly
 * (RFC 9112) by http_req.c, which is pure and fuzzed: what it refuses is answered with its
 * status (400, 413, 414, 431, 501, 505) and reason, and never reaches an endpoint. GET (or HEAD)
 * /metrics answers 200 with the text exposition format 0.0.4, GET /-/hotkeys with the hot keys'
 * JSON (hotkeys.c); POST /-/reload reloads the config as SIGHUP does (reload.c; 200 with
 * "reloaded: ..." or "unchanged", 400 with file:line:column: message for an invalid file, 500
 * for another failure; any other method there 405); another path 404, another method 405. On
 * every path a request whose Host, or absolute-form target, names another host (a
 * DNS-rebinding page's) is answered 403 (host_accepted), one a web page sent across origins 403
 * (cross_origin). Every response carries X-Content-Type-Options: nosniff, so a browser never
 * reads one as another type than it says (the JSON as a page). The body is built in memory
 * (O(pools + servers), the workers' counters summed by px_snapshot: one short job per worker)
 * and written with one uv_write; no worker waits on it. At most PX_METRICS_MAX_CONNS
 * connections are open at once (a new one closes the oldest still sending its request, or is
 * itself closed when all are being answered), so a flood of clients costs bounded memory.
 */

#include "admin_http.h"
#include "hotkeys.h"
#include "http_req.h"
#include "metrics.h"
#include "reload.h"
#include "resolve.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define PX_METRICS_MAX_REQUEST 8192u  /* bytes of request line and headers (431 beyond) */
#define PX_ADMIN_MAX_LINE 2048u       /* bytes of the request line (414 beyond) */
#define PX_ADMIN_MAX_FIELDS 64u       /* header field lines (431 beyond) */
#define PX_METRICS_TIMEOUT_MS 5000u   /* for a connection to send its request */
#define PX_METRICS_MAX_CONNS 32u      /* served at once */
#define PX_METRICS_SWEEP_MS 1000u     /* how often slow connections are looked for */


/* The server lives until its listener, its sweep timer and every connection are closed: refs
 * counts those handles; the last close callback after px_admin_http_stop frees it. */
struct px_admin_http {
    px_ctl *px;
    uv_tcp_t listener;
    uv_timer_t sweep;
    px_dl conns;   /* open and closing connections, oldest first */
    size_t nconns; /* of them, those not closing */
    size_t refs;
    bool stopping;
};

typedef struct mconn {
    uv_tcp_t tcp;
    px_admin_http *ms;
    px_dl link;
    uint64_t deadline; /* loop time (ms) by which the request must have arrived */
    bool answered;     /* reading stopped, the response is being written */
    bool closing;
    uv_write_t wr;
    uv_shutdown_t sd;
    px_buf out;
    size_t len;
    px_http_req hr; /* the head parsed so far (http_req.h) */
    char req[PX_METRICS_MAX_REQUEST];
} mconn;

static const px_http_limits admin_limits = {
    .max_line = PX_ADMIN_MAX_LINE,
    .max_head = PX_METRICS_MAX_REQUEST,
    .max_fields = PX_ADMIN_MAX_FIELDS,
};

static void ms_unref(px_admin_http *ms)
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
    px_admin_http *ms = mc->ms;
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
                           "X-Content-Type-Options: nosniff\r\n%s%s%sConnection: close\r\n\r\n",
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

/* code with a one-line text body saying why (text: no line end). */
static void mconn_text(mconn *mc, int code, const char *reason, const char *text)
{
    px_buf body = {0};
    if (px_buf_printf(&body, "%d %s: %s\n", code, reason, text) != 0) {
        px_buf_free(&body);
        mconn_close(mc);
        return;
    }
    mconn_respond(mc, code, reason, "text/plain; charset=utf-8", &body, false, NULL);
    px_buf_free(&body);
}

static int64_t unix_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

_Static_assert(CH_CONF_MAX_WINDOW_MS == 86400000, "reload_query's message says 86400000 ms");

/* ramp_start must be within this of the proxy's clock: a moment every proxy of a rollout can
 * agree on, not one so far ahead the change never takes effect. */
#define RAMP_START_SKEW_MS (3600 * 1000)

/* The query of POST /-/reload: warm_up=<ms>, ramp=<ms> (each at most CH_CONF_MAX_WINDOW_MS, as
 * in the file), ramp_start=<Unix ms> (within RAMP_START_SKEW_MS of now; reload.h), each a
 * decimal integer >= 0 at most once. Returns NULL, or what is wrong with the limit it breaks
 * (no value is echoed). */
static const char *reload_query(const char *q, size_t len, px_reload_opts *o)
{
    static const char *const names[] = {"warm_up", "ramp", "ramp_start"};
    int64_t *fields[] = {&o->warm_up_ms, &o->ramp_ms, &o->ramp_start_unix_ms};
    bool seen[3] = {false, false, false};
    for (size_t i = 0; i < len;) {
        size_t j = i;
        while (j < len && q[j] != '&')
            j++;
        const char *eq = memchr(q + i, '=', j - i);
        size_t k = 0;
        while (eq != NULL && k < 3 &&
               !(strlen(names[k]) == (size_t)(eq - (q + i)) &&
                 memcmp(names[k], q + i, strlen(names[k])) == 0))
            k++;
        if (eq == NULL || k == 3)
            return "unknown parameter: expected warm_up=<ms>, ramp=<ms> or ramp_start=<Unix ms>";
        if (seen[k])
            return "a parameter given twice";
        seen[k] = true;
        int64_t v = 0;
        const char *d = eq + 1;
        if (d == q + j)
            return "a parameter without a value";
        for (; d < q + j; d++) {
            if (*d < '0' || *d > '9' || v > (INT64_MAX - 9) / 10)
                return "expected a decimal integer >= 0 (milliseconds)";
            v = v * 10 + (*d - '0');
        }
        if (k < 2 && v > CH_CONF_MAX_WINDOW_MS)
            return "warm_up and ramp are at most 86400000 ms (a day), as in the file";
        if (k == 2 && (v > unix_now_ms() + RAMP_START_SKEW_MS ||
                       v < unix_now_ms() - RAMP_START_SKEW_MS))
            return "ramp_start (Unix ms) must be within an hour (3600000 ms) of this proxy's "
                   "clock";
        *fields[k] = v;
        i = j + 1;
    }
    return NULL;
}

/* POST /-/reload: the SIGHUP reload (reload.c), its outcome as a one-line text body. */
static void mconn_reload(mconn *mc, const char *query, size_t qlen)
{
    px_buf body = {0};
    px_reload_opts opt = PX_RELOAD_OPTS_POOLS;
    const char *bad = reload_query(query, qlen, &opt);
    if (bad != NULL) {
        (void)px_buf_printf(&body, "%s\n", bad);
        mconn_respond(mc, 400, "Bad Request", "text/plain; charset=utf-8", &body, false, NULL);
        px_buf_free(&body);
        return;
    }
    int rc = px_reload(mc->ms->px, "POST /-/reload", &opt, &body);
    if (px_buf_append(&body, "\n", 1) != 0) {
        px_buf_free(&body);
        mconn_error(mc, 500, "Internal Server Error");
        return;
    }
    int code = rc == PX_RELOAD_OK        ? 200
               : rc == PX_RELOAD_INVALID ? 400
               : rc == PX_RELOAD_PARTIAL ? 409
                                         : 500;
    const char *reason = rc == PX_RELOAD_OK        ? "OK"
                         : rc == PX_RELOAD_INVALID ? "Bad Request"
                         : rc == PX_RELOAD_PARTIAL ? "Conflict"
                                                   : "Internal Server Error";
    mconn_respond(mc, code, reason, "text/plain; charset=utf-8", &body, false, NULL);
    px_buf_free(&body);
}

/* Whether host[0, n) (no port) is an IP literal: dotted-quad IPv4 as inet_pton reads it, or
 * IPv6 within brackets. */
static bool ip_literal(const char *host, size_t n)
{
    char buf[INET6_ADDRSTRLEN + 2];
    unsigned char addr[sizeof(struct in6_addr)];
    if (n < 2 || n - 2 >= sizeof(buf) || host[0] != '[' || host[n - 1] != ']') {
        if (n == 0 || n >= sizeof(buf))
            return false;
        memcpy(buf, host, n);
        buf[n] = '\0';
        return inet_pton(AF_INET, buf, addr) == 1;
    }
    memcpy(buf, host + 1, n - 2);
    buf[n - 2] = '\0';
    return inet_pton(AF_INET6, buf, addr) == 1;
}

/* Whether a Host header's value names this proxy, not a name a DNS-rebinding page could have
 * pointed here: an IP literal, "localhost", or a name the operator listed
 * (--admin-allow-host, compared without case), each with an optional :port. */
static bool host_acceptable(const px_ctl *px, const char *v, size_t n)
{
    size_t host = n;
    const char *rb = n > 0 && v[0] == '[' ? memchr(v, ']', n) : NULL;
    const char *colon = memchr(rb != NULL ? rb : v, ':', n - (size_t)((rb != NULL ? rb : v) - v));
    if (colon != NULL)
        host = (size_t)(colon - v);
    for (size_t i = host + (colon != NULL); i < n; i++)
        if (v[i] < '0' || v[i] > '9')
            return false; /* a port is digits */
    if (ip_literal(v, host) || (host == 9 && strncasecmp(v, "localhost", 9) == 0))
        return true;
    for (size_t i = 0; i < px->nadmin_hosts; i++)
        if (strlen(px->admin_hosts[i]) == host && strncasecmp(v, px->admin_hosts[i], host) == 0)
            return true;
    return false;
}

/* A request a web page made the browser send across origins: it carries Origin, or a
 * Sec-Fetch-Site other than "none"/"same-origin". Refused (403) on every path. */
static bool cross_origin(const px_http_req *hr, const char *buf)
{
    size_t n = 0;
    if (px_http_field_value(hr, buf, "Origin", &n) != NULL)
        return true;
    const char *site = px_http_field_value(hr, buf, "Sec-Fetch-Site", &n);
    return site != NULL && !(n == 4 && strncasecmp(site, "none", 4) == 0) &&
           !(n == 11 && strncasecmp(site, "same-origin", 11) == 0);
}

/* Whether the host a request names is acceptable: its Host header and, for an absolute-form
 * target, the target's authority, which RFC 9112 section 3.2.2 puts in Host's place. One that
 * names another host is what a DNS-rebinding page sends (same-origin to the browser, so
 * without Origin); scrapers that name their targets by a DNS name need it listed
 * (--admin-allow-host). No Host (HTTP/1.0; http_req.c refuses HTTP/1.1 without one) is
 * accepted. Two Host headers never get here: http_req.c answers them 400, whatever the first
 * says (a proxy in front may have read another than this server would). */
static bool host_accepted(const px_ctl *px, const px_http_req *hr, const char *buf)
{
    if (hr->absolute &&
        !host_acceptable(px, buf + hr->authority.off, hr->authority.len))
        return false;
    if (hr->host < 0)
        return true;
    const px_http_field *f = &hr->fields[hr->host];
    return host_acceptable(px, buf + f->value.off, f->value.len);
}

/* With --admin-token-file, POST /-/reload needs "Authorization: Bearer <token>". */
static bool reload_authorized(const px_admin_http *ms, const px_http_req *hr, const char *buf)
{
    const char *token = ms->px->admin_token;
    if (token == NULL)
        return true;
    size_t n = 0;
    const char *v = px_http_field_value(hr, buf, "Authorization", &n);
    if (v == NULL || n < 7 || strncasecmp(v, "Bearer ", 7) != 0)
        return false;
    return px_equal_secret(v + 7, n - 7, token, strlen(token));
}

/* The request's head, parsed whole by http_req.c (mc->hr): answers it. */
static void mconn_request(mconn *mc)
{
    const px_http_req *hr = &mc->hr;
    const char *buf = mc->req;
    const char *m = buf + hr->method.off, *path = buf + hr->path.off;
    size_t mlen = hr->method.len, plen = hr->path.len;
    if (cross_origin(hr, buf)) {
        mconn_error(mc, 403, "Forbidden");
        return;
    }
    if (!host_accepted(mc->ms->px, hr, buf)) {
        mconn_text(mc, 403, "Forbidden",
                   "Host is not an address of this proxy, localhost, or a name given with "
                   "--admin-allow-host");
        return;
    }
    if (plen == 9 && memcmp(path, "/-/reload", 9) == 0) {
        if (!(mlen == 4 && memcmp(m, "POST", 4) == 0))
            mconn_error_allow(mc, 405, "Method Not Allowed", "POST");
        else if (!reload_authorized(mc->ms, hr, buf))
            mconn_error(mc, 401, "Unauthorized");
        else
            mconn_reload(mc, buf + hr->query.off, hr->query.len);
        return;
    }
    bool head = mlen == 4 && memcmp(m, "HEAD", 4) == 0;
    if (!head && !(mlen == 3 && memcmp(m, "GET", 3) == 0)) {
        mconn_error(mc, 405, "Method Not Allowed");
        return;
    }
    bool hot = plen == 10 && memcmp(path, "/-/hotkeys", 10) == 0;
    if ((!hot && (plen != 8 || memcmp(path, "/metrics", 8) != 0)) ||
        (hot && mc->ms->px->hot == NULL)) { /* --no-hot-keys */
        mconn_error(mc, 404, "Not Found");
        return;
    }
    px_buf body = {0};
    if (hot) { /* the pools' hot keys (hotkeys.h) */
        if (px_hotkeys_json(mc->ms->px, &body) != 0)
            mconn_error(mc, 500, "Internal Server Error");
        else
            mconn_respond(mc, 200, "OK", "application/json", &body, head, NULL);
        px_buf_free(&body);
        return;
    }
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
    mc->len += (size_t)nread;
    /* The parse resumes where the previous read's stopped: O(the bytes read). */
    px_http_status st = px_http_parse(&mc->hr, &admin_limits, mc->req, mc->len);
    if (st == PX_HTTP_OK)
        mconn_request(mc);
    else if (st == PX_HTTP_BAD)
        mconn_text(mc, mc->hr.status, px_http_reason(mc->hr.status), mc->hr.why);
    /* AGAIN leaves mc->len < PX_METRICS_MAX_REQUEST (http_req.h): room for the next read. */
}

static void listener_cb(uv_stream_t *server, int status)
{
    px_admin_http *ms = server->data;
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
    px_http_init(&mc->hr);
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
    px_admin_http *ms = t->data;
    uint64_t now = uv_now(ms->px->loop);
    for (px_dl *d = ms->conns.next; d != &ms->conns;) {
        mconn *mc = PX_CONTAINER(d, mconn, link);
        d = d->next;
        if (now >= mc->deadline)
            mconn_close(mc);
    }
}

int px_admin_http_start(px_ctl *px)
{
    if (px->metrics_port <= 0)
        return 0;
    px_admin_http *ms = calloc(1, sizeof(*ms));
    if (ms == NULL)
        return -1;
    ms->px = px;
    px_dl_init(&ms->conns);
    uv_tcp_init(px->loop, &ms->listener);
    uv_timer_init(px->loop, &ms->sweep);
    ms->listener.data = ms->sweep.data = ms;
    ms->refs = 2;
    px->admin = ms;

    const char *addr = px->metrics_addr != NULL ? px->metrics_addr : "127.0.0.1";
    struct sockaddr_storage sa;
    char why[128];
    if (px_resolve(addr, px->metrics_port, true, &sa, NULL, why, sizeof(why)) != 0) {
        PX_LOG(px, PX_LOG_ERR, "metrics: cannot resolve '%s': %s", addr, why);
        return -1; /* px_admin_http_stop (from px_ctl_free) closes the handles */
    }
    int rc = uv_tcp_bind(&ms->listener, (const struct sockaddr *)&sa, 0);
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

void px_admin_http_stop(px_ctl *px)
{
    px_admin_http *ms = px->admin;
    if (ms == NULL)
        return;
    px->admin = NULL;
    ms->stopping = true;
    for (px_dl *d = ms->conns.next; d != &ms->conns; d = d->next)
        mconn_close(PX_CONTAINER(d, mconn, link));
    uv_close((uv_handle_t *)&ms->listener, ms_handle_close_cb);
    uv_close((uv_handle_t *)&ms->sweep, ms_handle_close_cb);
}

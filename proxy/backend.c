/*
 * server.c — backend servers and their connections: lazy connect, pipelining, reply matching,
 * timeouts, failure reporting to the health tracker, failover of retryable fragments, and the
 * probes that readmit ejected servers.
 *
 * Invariants of a connection:
 * - Its FIFO holds every fragment whose bytes were appended to its output, in append order; the
 *   output buffer holds the bytes not yet handed to the kernel, in the same order. So the n-th
 *   reply read belongs to the n-th fragment of the FIFO.
 * - When it fails (connect error, read/write error, EOF, a reply that does not parse, or the
 *   head fragment's deadline passing) it is closed and every fragment of its FIFO fails with it:
 *   a pipelined reply stream cannot skip one reply. Retryable fragments move to their next
 *   candidate; the others are answered with an error.
 * - Its timer runs while the FIFO is non-empty, due at (or before) the head's deadline. The
 *   deadline is the pool's timeout after the later of: the fragment's queueing, the last bytes
 *   read on the connection, the previous reply. So a server that stops answering times out, and a
 *   long pipeline of large replies does not.
 */

#include "backend.h"
#include "command.h"
#include "resolve.h"

#include <inttypes.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

typedef enum conn_why { WHY_ERR, WHY_EOF, WHY_TIMEOUT, WHY_STOP } conn_why;

static void conn_fail(px_conn *c, conn_why why, const char *reason);

static px_io *conn_px(const px_conn *c)
{
    return c->server->pool->io;
}

static void conn_mark(px_conn *c)
{
    px_io_mark(c->server->pool->io, &c->flush, PX_FLUSH_BACKEND);
}

static const char *server_name(const px_server *s)
{
    return s->conf->id;
}

void px_frag_free(px_frag *f)
{
    if (f == NULL)
        return;
    free(f->data);
    free(f->keys);
    free(f);
}

/* ---- setup ------------------------------------------------------------------------------------ */

static void conn_timer_cb(uv_timer_t *t);
static void conn_flush(px_conn *c);

static void conn_flush_cb(px_flushable *f)
{
    conn_flush(PX_CONTAINER(f, px_conn, flush));
}

int px_server_init(px_pool *pool, px_server *s, size_t index, const ch_conf_server *conf)
{
    if (px_server_setup(pool, s, index, conf) != 0)
        return -1;
    px_server_start(s);
    return 0;
}

int px_server_setup(px_pool *pool, px_server *s, size_t index, const ch_conf_server *conf)
{
    px_io *px = pool->io;
    s->pool = pool;
    s->index = index;
    s->conf = conf;
    s->is_unix = conf->port == 0;
    if (!s->is_unix) {
        char why[128];
        if (px_resolve(conf->host, conf->port, false, &s->sa, NULL, why, sizeof(why)) != 0) {
            PX_LOG(px, PX_LOG_ERR, "pool %s: cannot resolve server '%s': %s", pool->conf->name,
                   conf->addr, why);
            return -1;
        }
    }
    int n = pool->conf->server_connections;
    s->nconns = n > 0 ? (unsigned)n : 1u;
    s->conns = calloc(s->nconns, sizeof(*s->conns));
    if (s->conns == NULL)
        return -1;
    for (unsigned i = 0; i < s->nconns; i++) {
        s->conns[i].server = s;
        s->conns[i].flush.flush = conn_flush_cb;
    }
    return 0;
}

void px_server_start(px_server *s)
{
    for (unsigned i = 0; i < s->nconns; i++) {
        px_conn *c = &s->conns[i];
        uv_timer_init(s->pool->io->loop, &c->timer);
        c->timer.data = c;
    }
}

void px_server_close(px_server *s)
{
    for (unsigned i = 0; s->conns != NULL && i < s->nconns; i++) {
        px_conn *c = &s->conns[i];
        conn_fail(c, WHY_STOP, "proxy shutting down");
        if (!uv_is_closing((uv_handle_t *)&c->timer))
            uv_close((uv_handle_t *)&c->timer, NULL);
    }
}

static void retired_timer_close_cb(uv_handle_t *h)
{
    px_conn *c = h->data;
    px_server *s = c->server;
    if (--s->closing > 0)
        return;
    px_server_free(s);
    free(s);
}

void px_server_dispose(px_server *s)
{
    px_dl_remove(&s->retired_link);
    for (unsigned i = 0; i < s->nconns; i++) {
        px_conn *c = &s->conns[i];
        conn_fail(c, WHY_STOP, "server removed from the pool");
        s->closing++;
        uv_close((uv_handle_t *)&c->timer, retired_timer_close_cb);
    }
    if (s->nconns == 0) {
        px_server_free(s);
        free(s);
    }
}

bool px_server_busy(const px_server *s)
{
    for (unsigned c = 0; c < s->nconns; c++)
        if (s->conns[c].head != NULL)
            return true;
    return false;
}

void px_server_free(px_server *s)
{
    for (unsigned i = 0; s->conns != NULL && i < s->nconns; i++) {
        px_buf_free(&s->conns[i].wbuf);
        px_buf_free(&s->conns[i].rbuf);
    }
    free(s->conns);
    s->conns = NULL;
    px_conf_unref(s->cref); /* a retired server's config */
    s->cref = NULL;
}

/* ---- I/O -------------------------------------------------------------------------------------- */

static void conn_alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)hint;
    px_conn *c = PX_CONTAINER(h, px_stream, u)->owner;
    buf->base = NULL;
    buf->len = 0;
    if (c != NULL)
        px_read_alloc(&c->rbuf, c->need, buf);
}

/* A reply for the FIFO's head fragment f (already unlinked). */
static void conn_reply(px_conn *c, px_frag *f, const char *p, const ch_resp_reply *r)
{
    px_server *s = c->server;
    px_pool *pool = s->pool;
    px_io *px = pool->io;
    /* Like nutcracker, count only the clients' traffic: not our SELECT/AUTH or probes. */
    if (f->kind == PX_FRAG_FORWARD) {
        s->stats.responses++;
        s->stats.response_bytes += r->len;
    }
    switch (f->kind) {
    case PX_FRAG_INIT:
        if (r->type == CH_RESP_ERROR)
            PX_LOG(px, PX_LOG_WARN, "pool %s: server %s refused %.*s: %.*s", pool->conf->name,
                   server_name(s), f->len > 20 ? 20 : (int)f->len, f->data, (int)r->body_len,
                   p + r->body);
        px_frag_free(f);
        return;
    case PX_FRAG_PROBE:
        s->probing = false;
        if (s->retired) { /* no longer in the membership: its health is not tracked */
            px_frag_free(f);
            return;
        }
        if (px_health_probe_result(pool->health, s->index, r->type != CH_RESP_ERROR, px_io_now(px),
                                   px_io_rand(px))) {
            /* server_ejected_at keeps the last ejection's time, as nutcracker's does. */
            PX_LOG(px, PX_LOG_NOTICE, "pool %s: server %s readmitted after a probe",
                   pool->conf->name, server_name(s));
        }
        px_frag_free(f);
        return;
    case PX_FRAG_FORWARD:
        if (!s->retired)
            px_health_success(pool->health, s->index, px_io_now(px));
        px_frag_reply(f, p, r->len, r);
        return;
    }
}

/* Matches complete replies in rbuf with the FIFO, from the head. */
static void conn_scan(px_conn *c)
{
    px_io *px = conn_px(c);
    px_stream *st = c->stream;
    size_t off = 0;
    while (c->stream == st && c->rbuf.len - off > 0 && c->rbuf.len >= c->need) {
        ch_resp_reply r;
        size_t need = 0;
        char err[128] = "";
        ch_resp_status rs = ch_resp_scan_reply(c->rbuf.p + off, c->rbuf.len - off, &c->server->pool->backend_limits,
                                               &r, &need, err, sizeof(err));
        if (rs == CH_RESP_INCOMPLETE) {
            c->need = off + need;
            break;
        }
        if (rs != CH_RESP_OK) {
            conn_fail(c, WHY_ERR, err[0] ? err : "bad reply");
            return;
        }
        px_frag *f = c->head;
        if (f == NULL) {
            conn_fail(c, WHY_ERR, "a reply without a request");
            return;
        }
        c->head = f->next;
        if (c->head == NULL)
            c->tail = NULL;
        c->nfrags--;
        c->bytes -= f->len;
        c->need = 0;
        if (c->head != NULL)
            c->head->deadline = px_io_now(px) + c->server->pool->timeout_ms;
        /* The reply's bytes stay valid during the call: nothing appends to rbuf meanwhile. */
        conn_reply(c, f, c->rbuf.p + off, &r);
        off += r.len;
    }
    if (c->stream != st)
        return; /* failed meanwhile: its buffers were reset */
    px_buf_consume(&c->rbuf, off);
    c->need = c->need > off ? c->need - off : 0;
}

static void conn_read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    px_stream *st = PX_CONTAINER(stream, px_stream, u);
    px_conn *c = st->owner;
    if (c == NULL || nread == 0)
        return;
    if (nread < 0) {
        if (nread == UV_EOF)
            conn_fail(c, WHY_EOF, "closed the connection");
        else
            conn_fail(c, WHY_ERR, uv_strerror((int)nread));
        return;
    }
    c->rbuf.len += (size_t)nread;
    /* The timeout bounds silence, not queueing: bytes arriving for the head (a large reply, or
     * replies to a long pipeline) push its deadline on. */
    if (c->head != NULL)
        c->head->deadline = px_io_now(conn_px(c)) + c->server->pool->timeout_ms;
    conn_scan(c);
}

static void conn_written(px_write *w, px_stream *st, int status)
{
    (void)w;
    if (status < 0 && status != UV_ECANCELED && st->owner != NULL)
        conn_fail(st->owner, WHY_ERR, uv_strerror(status));
}

static void conn_flush(px_conn *c)
{
    if (c->state != PX_CONN_UP || c->wbuf.len == 0)
        return;
    c->nunsent = 0;
    c->unsent_bytes = 0;
    size_t queued = 0;
    int rc = px_stream_write(c->stream, &c->wbuf, conn_written, &queued);
    if (rc < 0)
        conn_fail(c, WHY_ERR, uv_strerror(rc));
}

static void conn_connect_cb(uv_connect_t *req, int status)
{
    px_stream *st = PX_CONTAINER(req, px_stream, connect);
    px_conn *c = st->owner;
    if (c == NULL)
        return;
    if (status < 0) {
        conn_fail(c, WHY_ERR, uv_strerror(status));
        return;
    }
    c->state = PX_CONN_UP;
    c->server->stats.server_connections++;
    int rc = uv_read_start(&st->u.stream, conn_alloc_cb, conn_read_cb);
    if (rc < 0) {
        conn_fail(c, WHY_ERR, uv_strerror(rc));
        return;
    }
    conn_mark(c);
}

/* Queues f at the FIFO's tail and its bytes in the output. */
static void conn_enqueue(px_conn *c, px_frag *f)
{
    px_io *px = conn_px(c);
    px_server *s = c->server;
    if (px_buf_append(&c->wbuf, f->data, f->len) != 0) {
        px_frag_error(f, "ERR out of memory");
        return;
    }
    f->next = NULL;
    f->deadline = px_io_now(px) + s->pool->timeout_ms;
    if (c->tail != NULL)
        c->tail->next = f;
    else
        c->head = f;
    c->tail = f;
    c->nfrags++;
    c->nunsent++;
    c->bytes += f->len;
    c->unsent_bytes += f->len;
    if (f->kind == PX_FRAG_FORWARD) {
        s->stats.requests++;
        s->stats.request_bytes += f->len;
    }
    if (!uv_is_active((uv_handle_t *)&c->timer))
        uv_timer_start(&c->timer, conn_timer_cb, s->pool->timeout_ms, 0);
    if (c->state == PX_CONN_UP)
        conn_mark(c);
}

static px_frag *frag_internal(px_pool *pool, px_frag_kind kind, const ch_resp_arg *argv,
                              size_t argc)
{
    px_frag *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return NULL;
    px_buf b = {0};
    int rc = px_buf_printf(&b, "*%zu\r\n", argc);
    for (size_t i = 0; rc == 0 && i < argc; i++)
        rc = px_buf_bulk(&b, argv[i].p, argv[i].len);
    if (rc != 0) {
        px_buf_free(&b);
        free(f);
        return NULL;
    }
    f->kind = kind;
    f->pool = pool;
    f->data = b.p;
    f->len = b.len;
    return f;
}

/* Opens the connection; AUTH and SELECT (redis_auth, redis_db) go first in its FIFO. */
static int conn_open(px_conn *c)
{
    px_server *s = c->server;
    px_pool *pool = s->pool;
    px_io *px = pool->io;
    px_stream *st = px_stream_new(px->loop, s->is_unix, c);
    if (st == NULL)
        return UV_ENOMEM;
    int rc = 0;
    if (s->is_unix) {
        uv_pipe_connect(&st->connect, &st->u.pipe, s->conf->host, conn_connect_cb);
    } else {
        uv_tcp_nodelay(&st->u.tcp, 1);
        if (pool->conf->tcpkeepalive)
            uv_tcp_keepalive(&st->u.tcp, 1, 60);
        rc = uv_tcp_connect(&st->connect, &st->u.tcp, (const struct sockaddr *)&s->sa,
                            conn_connect_cb);
        if (rc < 0) {
            px_stream_close(st);
            return rc;
        }
    }
    c->stream = st;
    c->state = PX_CONN_CONNECTING;
    const ch_conf_pool *pc = pool->conf;
    if (pc->redis_auth != NULL) {
        ch_resp_arg a[2] = {{"AUTH", 4}, {pc->redis_auth, strlen(pc->redis_auth)}};
        px_frag *f = frag_internal(pool, PX_FRAG_INIT, a, 2);
        if (f != NULL)
            conn_enqueue(c, f);
    }
    if (pc->redis_db != 0) {
        char db[24];
        int n = snprintf(db, sizeof(db), "%d", pc->redis_db);
        ch_resp_arg a[2] = {{"SELECT", 6}, {db, (size_t)n}};
        px_frag *f = frag_internal(pool, PX_FRAG_INIT, a, 2);
        if (f != NULL)
            conn_enqueue(c, f);
    }
    return 0;
}

/* ---- failure and failover --------------------------------------------------------------------- */

/* f could not be served by server s (its connection failed): fail over or answer an error. */
static void frag_failed(px_frag *f, px_server *s, const char *why)
{
    px_pool *pool = s->pool;
    px_io *px = pool->io;
    switch (f->kind) {
    case PX_FRAG_INIT:
        px_frag_free(f);
        return;
    case PX_FRAG_PROBE:
        s->probing = false;
        if (!s->retired && px->stopping)
            px_health_probe_drop(pool->health, s->index);
        else if (!s->retired)
            (void)px_health_probe_result(pool->health, s->index, false, px_io_now(px), px_io_rand(px));
        px_frag_free(f);
        return;
    case PX_FRAG_FORWARD:
        break;
    }
    if (!px->stopping && f->retry) {
        /* A retired server is in no key's walk of the current membership. */
        if (f->nkeys > 1 && px_frag_resplit(f, s->retired ? SIZE_MAX : s->index))
            return;
        if (f->attempt + 1 < f->ncand) {
            f->attempt++;
            px_frag_dispatch(f);
            return;
        }
    }
    pool->stats.forward_error++;
    char msg[256];
    snprintf(msg, sizeof(msg), "ERR backend %s %s", server_name(s), why);
    px_frag_error(f, msg);
}

static void conn_fail(px_conn *c, conn_why why, const char *reason)
{
    px_server *s = c->server;
    px_pool *pool = s->pool;
    px_io *px = pool->io;
    bool had_work = c->head != NULL || c->state == PX_CONN_CONNECTING;
    if (c->stream == NULL && c->head == NULL)
        return;
    if (c->stream != NULL) {
        px_stream_close(c->stream);
        c->stream = NULL;
    }
    if (c->state == PX_CONN_UP)
        s->stats.server_connections--;
    c->state = PX_CONN_DOWN;
    px_buf_free(&c->rbuf);
    px_buf_free(&c->wbuf);
    c->need = 0;
    c->nunsent = 0;
    c->unsent_bytes = 0;
    uv_timer_stop(&c->timer);
    px_io_unmark(&c->flush);
    if (why == WHY_EOF)
        s->stats.server_eof++;
    else if (why == WHY_ERR)
        s->stats.server_err++;

    char what[200];
    if (why == WHY_TIMEOUT)
        snprintf(what, sizeof(what), "timed out");
    else
        snprintf(what, sizeof(what), "unavailable (%s)", reason);
    if (why != WHY_STOP && had_work) {
        bool probe = false;
        for (const px_frag *q = c->head; q != NULL; q = q->next)
            probe = probe || q->kind == PX_FRAG_PROBE;
        PX_LOG(px, probe ? PX_LOG_INFO : PX_LOG_WARN, "pool %s: server %s (%s) %s%s",
               pool->conf->name, server_name(s), s->conf->addr, what, probe ? " (probe)" : "");
        if (!probe && !s->retired && px_health_up(pool->health, s->index) &&
            px_health_failure(pool->health, s->index, px_io_now(px), px_io_rand(px))) {
            struct timeval tv;
            gettimeofday(&tv, NULL);
            pool->stats.server_ejects++;
            s->stats.ejects++;
            s->stats.server_ejected_at = (uint64_t)tv.tv_sec * 1000000u + (uint64_t)tv.tv_usec;
            PX_LOG(px, PX_LOG_WARN, "pool %s: server %s ejected", pool->conf->name,
                   server_name(s));
        }
    } else if (why == WHY_EOF) {
        PX_LOG(px, PX_LOG_INFO, "pool %s: server %s closed an idle connection", pool->conf->name,
               server_name(s));
    }
    px_frag *f = c->head;
    c->head = c->tail = NULL;
    c->nfrags = 0;
    c->bytes = 0;
    while (f != NULL) {
        px_frag *next = f->next;
        frag_failed(f, s, what);
        f = next;
    }
}

static void conn_timer_cb(uv_timer_t *t)
{
    px_conn *c = t->data;
    if (c->head == NULL)
        return;
    uint64_t now = px_io_now(conn_px(c));
    if (c->head->deadline <= now) {
        c->server->stats.server_timedout++;
        conn_fail(c, WHY_TIMEOUT, "timed out");
        return;
    }
    uv_timer_start(&c->timer, conn_timer_cb, c->head->deadline - now, 0);
}

/* ---- dispatch --------------------------------------------------------------------------------- */

static void conn_send(px_conn *c, px_frag *f)
{
    if (c->state == PX_CONN_DOWN) {
        int rc = conn_open(c);
        if (rc < 0) {
            /* Counted as a failure like a refused connect. */
            c->head = c->tail = f;
            f->next = NULL;
            c->nfrags = 1;
            c->bytes = f->len;
            c->state = PX_CONN_CONNECTING;
            conn_fail(c, WHY_ERR, uv_strerror(rc));
            return;
        }
    }
    conn_enqueue(c, f);
}

void px_frag_dispatch(px_frag *f)
{
    px_pool *pool = f->pool;
    while (f->attempt + 1 < f->ncand && !px_health_up(pool->health, f->cand[f->attempt]))
        f->attempt++;
    if (f->attempt >= f->ncand || !px_health_up(pool->health, f->cand[f->attempt])) {
        pool->stats.forward_error++;
        px_frag_error(f, "ERR no backend available");
        return;
    }
    px_server *s = &pool->servers[f->cand[f->attempt]];
    conn_send(&s->conns[f->cid % s->nconns], f);
}

void px_probe_due(px_pool *pool)
{
    px_io *px = pool->io;
    uint64_t now = px_io_now(px);
    for (size_t i = 0; i < pool->nservers; i++) {
        px_server *s = &pool->servers[i];
        if (s->probing || !px_health_probe_claim(pool->health, i, now))
            continue;
        ch_resp_arg ping = {"PING", 4};
        px_frag *f = frag_internal(pool, PX_FRAG_PROBE, &ping, 1);
        if (f == NULL) {
            px_health_probe_drop(pool->health, i);
            return;
        }
        f->cand[0] = i;
        f->ncand = 1;
        s->probing = true;
        PX_LOG(px, PX_LOG_INFO, "pool %s: probing server %s", pool->conf->name, server_name(s));
        conn_send(&s->conns[0], f);
    }
}

void px_server_preconnect(px_server *s)
{
    for (unsigned i = 0; i < s->nconns; i++)
        if (s->conns[i].state == PX_CONN_DOWN && conn_open(&s->conns[i]) < 0)
            PX_LOG(s->pool->io, PX_LOG_WARN, "pool %s: cannot preconnect to server %s",
                   s->pool->conf->name, server_name(s));
}

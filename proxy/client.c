/*
 * client.c — client connections: reading and parsing requests, the per-client queue that puts
 * replies back in request order, output buffering and its limit, and closing.
 *
 * Invariants:
 * - c->head..c->tail holds the client's requests in arrival order; a reply leaves only from the
 *   head, so a pipeline spanning several backends is answered in order.
 * - c->stored + c->wbuf.len + c->inflight is every reply byte the proxy holds for the client;
 *   beyond the pool's max_client_buffer (max_client_buffer_bytes) the client is closed (a
 *   client that never reads cannot make the proxy grow without bound).
 * - A client struct lives until its stream's close callback; requests still waiting for
 *   backends then lose their client (r->client = NULL) and are freed when their last fragment
 *   completes.
 */
#include "client.h"
#include "command.h"
#include "worker.h"

#include <stdlib.h>
#include <string.h>

static void client_process(px_client *c);
static void client_flush(px_client *c);

static void client_flush_cb(px_flushable *f)
{
    client_flush(PX_CONTAINER(f, px_client, flush));
}

static void client_mark(px_client *c)
{
    if (!c->closing)
        px_io_mark(c->pool->io, &c->flush, PX_FLUSH_CLIENT);
}

/* Counts r, whose reply is complete, once: class, error or not, latency. */
static void count_request(px_req *r)
{
    if (r->observed || r->pool == NULL)
        return;
    r->observed = true;
    bool error = r->reply.len > 0 && r->reply.p[0] == '-';
    px_count_request(&r->pool->m, r->mclass, error, uv_hrtime() - r->t0);
}

/* Backpressure: a client with this many requests waiting for backends is not read until they
 * drain (px_client_flush resumes it), so one pipelining client cannot queue unbounded work on
 * the backend connections it shares with everyone else. Reply bytes do not pause it: a client
 * that does not read its replies is closed at the pool's max_client_buffer instead. */
static bool client_busy(const px_client *c)
{
    return c->nreqs >= PX_MAX_CLIENT_REQUESTS;
}

/* ---- requests --------------------------------------------------------------------------------- */

px_req *px_req_new(px_client *c)
{
    px_req *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    r->client = c;
    r->pool = c->pool;
    r->t0 = uv_hrtime();
    if (c->tail != NULL)
        c->tail->next = r;
    else
        c->head = r;
    c->tail = r;
    c->nreqs++;
    return r;
}

void px_req_free(px_req *r)
{
    px_buf_free(&r->reply);
    px_buf_free(&r->err);
    for (size_t i = 0; i < r->nslots; i++)
        px_buf_free(&r->slots[i]);
    free(r->slots);
    free(r);
}

void px_req_reply(px_req *r, const char *data, size_t len)
{
    px_buf_append(&r->reply, data, len);
    r->done = true;
    px_req_done(r);
}

void px_req_error(px_req *r, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    px_buf_printf(&r->reply, "-%s\r\n", msg);
    r->done = true;
    px_req_done(r);
}

static void client_over_limit(px_client *c)
{
    PX_LOG(c->pool->io, PX_LOG_WARN, "pool %s: client %llu holds over %zu reply bytes unread: closing it",
           c->pool->conf->name, (unsigned long long)c->id, c->pool->max_client_buffer);
    c->pool->stats.client_err++;
    px_client_close(c);
}

void px_req_done(px_req *r)
{
    px_client *c = r->client;
    count_request(r);
    if (c == NULL) {
        if (r->pending == 0)
            px_req_free(r);
        return;
    }
    if (c->closing)
        return; /* the close callback frees it */
    if (r != c->head) {
        r->counted = true;
        c->stored += r->reply.len;
        if (c->stored + c->wbuf.len + c->inflight > c->pool->max_client_buffer)
            client_over_limit(c);
        return;
    }
    while (c->head != NULL && c->head->done) {
        px_req *h = c->head;
        c->head = h->next;
        if (c->head == NULL)
            c->tail = NULL;
        c->nreqs--;
        if (h->counted)
            c->stored -= h->reply.len;
        bool close_after = h->close_after;
        int rc = px_buf_append(&c->wbuf, h->reply.p, h->reply.len);
        px_req_free(h);
        if (rc != 0) {
            px_client_close(c);
            return;
        }
        if (close_after) {
            c->draining = true;
            break;
        }
    }
    client_mark(c);
    if (c->stored + c->wbuf.len + c->inflight > c->pool->max_client_buffer) {
        client_over_limit(c);
        return;
    }
}

/* ---- reading ---------------------------------------------------------------------------------- */

static void client_alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)hint;
    px_client *c = PX_CONTAINER(h, px_stream, u)->owner;
    px_read_alloc(&c->rbuf, c->need, buf);
}

static void client_read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    px_stream *st = PX_CONTAINER(stream, px_stream, u);
    px_client *c = st->owner;
    if (c->closing || nread == 0)
        return;
    if (nread < 0) {
        uv_read_stop(stream);
        if (nread == UV_EOF) {
            c->pool->stats.client_eof++;
            /* A half-closed client (nc, shell pipes) still gets the replies it asked for:
             * those already in wbuf or being written as well as those still awaited. The flush
             * writes what is ready, and shuts the stream down (after the pending writes) once
             * no request is left. */
            c->draining = true;
            client_flush(c);
        } else {
            c->pool->stats.client_err++;
            px_client_close(c);
        }
        return;
    }
    c->rbuf.len += (size_t)nread;
    client_process(c);
}

/* Parses and handles every complete request in the buffer. */
static void client_process(px_client *c)
{
    px_worker *px = c->pool->worker;
    size_t off = 0;
    while (!c->closing && !c->draining && c->rbuf.len > off && c->rbuf.len >= c->need) {
        if (client_busy(c)) {
            /* Backpressure: resume when the queue drains (px_client_flush). */
            uv_read_stop(&c->stream->u.stream);
            c->paused = true;
            break;
        }
        size_t argc = 0, consumed = 0, need = 0;
        char err[160] = "";
        ch_resp_status rs =
            ch_resp_parse_request(c->rbuf.p + off, c->rbuf.len - off, &c->pool->limits, px->argv,
                                  px->argv_cap, &argc, &consumed, &need, err, sizeof(err));
        if (rs == CH_RESP_INCOMPLETE) {
            c->need = off + need;
            break;
        }
        if (rs == CH_RESP_OK && argc > px->argv_cap) {
            ch_resp_arg *a = realloc(px->argv, argc * sizeof(*a));
            if (a != NULL) {
                px->argv = a;
                px->argv_cap = argc;
                continue; /* parse it again with room for every argument */
            }
            rs = CH_RESP_TOO_BIG;
            snprintf(err, sizeof(err), "ERR out of memory");
        }
        if (rs != CH_RESP_OK) {
            PX_LOG(c->pool->io, PX_LOG_INFO, "pool %s: client %llu: %s: closing it", c->pool->conf->name,
                   (unsigned long long)c->id, err);
            c->pool->stats.client_err++;
            px_req *r = px_req_new(c);
            if (r == NULL) {
                px_client_close(c);
                return;
            }
            r->close_after = true;
            c->draining = true;
            uv_read_stop(&c->stream->u.stream);
            px_req_error(r, "%s%s", strncmp(err, "ERR", 3) == 0 ? "" : "ERR ",
                         err[0] ? err : "Protocol error");
            off = c->rbuf.len;
            break;
        }
        c->need = 0;
        if (argc > 0)
            px_command_handle(c, px->argv, argc, c->rbuf.p + off, consumed);
        off += consumed;
    }
    if (c->draining && !c->closing)
        uv_read_stop(&c->stream->u.stream);
    px_buf_consume(&c->rbuf, off);
    c->need = c->need > off ? c->need - off : 0;
}

/* ---- writing ---------------------------------------------------------------------------------- */

static void client_written(px_write *w, px_stream *st, int status)
{
    px_client *c = st->owner;
    c->inflight -= w->len;
    if (status < 0 && !c->closing) {
        c->pool->stats.client_err++;
        px_client_close(c);
        return;
    }
    if (!c->closing && ((c->draining && c->head == NULL) || c->paused))
        client_mark(c);
}

static void client_shutdown_cb(uv_shutdown_t *req, int status)
{
    (void)status;
    px_stream *st = PX_CONTAINER(req->handle, px_stream, u);
    px_client_close(st->owner);
}

static void client_flush(px_client *c)
{
    if (c->closing)
        return;
    size_t queued = 0;
    if (px_stream_write(c->stream, &c->wbuf, client_written, &queued) < 0) {
        c->pool->stats.client_err++;
        px_client_close(c);
        return;
    }
    c->inflight += queued;
    if (c->draining && c->head == NULL && !c->shut) {
        c->shut = true;
        if (uv_shutdown(&c->shutdown, &c->stream->u.stream, client_shutdown_cb) < 0)
            px_client_close(c);
        return;
    }
    if (c->paused && !c->draining && c->nreqs < PX_MAX_CLIENT_REQUESTS / 2) {
        c->paused = false;
        uv_read_start(&c->stream->u.stream, client_alloc_cb, client_read_cb);
        client_process(c);
    }
}

/* ---- lifecycle -------------------------------------------------------------------------------- */

static void client_close_cb(uv_handle_t *h)
{
    px_stream *st = PX_CONTAINER(h, px_stream, u);
    px_client *c = st->owner;
    px_dl_remove(&c->link);
    px_io_unmark(&c->flush);
    px_req *r = c->head;
    while (r != NULL) {
        px_req *next = r->next;
        r->client = NULL;
        if (r->pending == 0)
            px_req_free(r);
        r = next;
    }
    px_buf_free(&c->rbuf);
    px_buf_free(&c->wbuf);
    free(c);
    free(st);
}

void px_client_close(px_client *c)
{
    if (c == NULL || c->closing)
        return;
    c->closing = true;
    c->pool->stats.client_connections--;
    PX_ATOMIC_SUB(c->pool->shared->clients, 1);
    px_io_unmark(&c->flush);
    uv_close(&c->stream->u.handle, client_close_cb);
}

void px_client_accept(px_pool *pool, uv_stream_t *listener)
{
    px_stream *st = px_stream_new(pool->io->loop, listener->type == UV_NAMED_PIPE, NULL);
    px_client *c = calloc(1, sizeof(*c));
    if (st == NULL || c == NULL) {
        if (st != NULL)
            px_stream_close(st);
        free(c);
        return;
    }
    st->owner = c;
    c->stream = st;
    c->pool = pool;
    c->id = pool->next_client_id++;
    c->flush.flush = client_flush_cb;
    c->closing = true; /* until accepted: a failure below frees it through the close callback */
    if (uv_accept(listener, &st->u.stream) < 0) {
        uv_close(&st->u.handle, client_close_cb);
        return;
    }
    if (pool->conf->client_connections > 0 &&
        PX_ATOMIC_LOAD(pool->shared->clients) >= (uint64_t)pool->conf->client_connections) {
        PX_LOG(pool->io, PX_LOG_WARN, "pool %s: client_connections limit %d reached: refusing a client",
               pool->conf->name, pool->conf->client_connections);
        uv_close(&st->u.handle, client_close_cb);
        return;
    }
    c->closing = false;
    if (listener->type == UV_TCP)
        uv_tcp_nodelay(&st->u.tcp, 1);
    px_dl_push(&pool->clients, &c->link);
    pool->stats.client_connections++;
    PX_ATOMIC_ADD(pool->shared->clients, 1); /* the limit is the pool's, over all workers */
    pool->m.clients_accepted++;
    PX_ATOMIC_ADD(*pool->accepted_total, 1);
    if (uv_read_start(&st->u.stream, client_alloc_cb, client_read_cb) < 0)
        px_client_close(c);
}

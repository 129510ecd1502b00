/* SPDX-License-Identifier: Apache-2.0 */
/*
 * io.c — streams, writes, read buffers and write batching (io.h).
 *
 * Write batching: sending to a backend or completing a client's reply only appends bytes to the
 * owner's buffer and marks it dirty. A check handle (run after each poll) flushes every dirty
 * object with one write, so the requests parsed from one read go out together, as Redis's
 * handleClientsWithPendingWrites does before it sleeps. An idle handle is started whenever
 * something is marked, so the loop does not block in poll with bytes waiting (marks made in
 * timer callbacks, before the poll).
 */
#include "io.h"
#include "tls.h"

#include <stdlib.h>

uint64_t px_io_now(const px_io *io)
{
    return uv_now(io->loop);
}

uint64_t px_io_rand(px_io *io)
{
    uint64_t x = io->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    io->rng = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static void idle_cb(uv_idle_t *h)
{
    uv_idle_stop(h);
}

void px_io_mark(px_io *io, px_flushable *f, int list)
{
    if (f->link.next != NULL)
        return;
    px_dl_push(&io->dirty[list], &f->link);
    if (!uv_is_active((uv_handle_t *)&io->flush_idle))
        uv_idle_start(&io->flush_idle, idle_cb);
}

void px_io_unmark(px_flushable *f)
{
    px_dl_remove(&f->link);
}

void px_io_defer(px_io *io, px_flushable *f)
{
    if (f->link.next != NULL)
        return;
    px_dl_push(&io->deferred, &f->link);
    if (!uv_is_active((uv_handle_t *)&io->flush_idle))
        uv_idle_start(&io->flush_idle, idle_cb);
}

/* The deferred work of this iteration: the list as it is now (what defers itself again waits
 * for the next iteration). */
static void run_deferred(px_io *io)
{
    if (io->deferred.next == &io->deferred)
        return;
    px_dl now;
    px_dl_init(&now);
    now.next = io->deferred.next;
    now.prev = io->deferred.prev;
    now.next->prev = &now;
    now.prev->next = &now;
    px_dl_init(&io->deferred);
    while (now.next != &now) {
        px_dl *d = now.next;
        px_dl_remove(d);
        px_flushable *f = PX_CONTAINER(d, px_flushable, link);
        f->flush(f);
    }
}

static void flush_cb(uv_check_t *h)
{
    px_io *io = h->data;
    io->quiet = io->reads == io->reads_flushed;
    io->reads_flushed = io->reads;
    run_deferred(io);
    for (int round = 0; round < 2; round++) {
        for (int l = 0; l < PX_FLUSH_NLISTS; l++) {
            while (io->dirty[l].next != &io->dirty[l]) {
                px_dl *d = io->dirty[l].next;
                px_dl_remove(d);
                px_flushable *f = PX_CONTAINER(d, px_flushable, link);
                f->flush(f);
            }
        }
    }
    if (io->after_flush != NULL)
        io->after_flush(io);
}

void px_io_init(px_io *io, uv_loop_t *loop, px_log log, uint64_t seed)
{
    io->loop = loop;
    io->log = log;
    io->rng = seed != 0 ? seed : 1u;
    io->read_hr = 0;
    io->reads = io->reads_flushed = 0;
    io->quiet = false;
    for (int l = 0; l < PX_FLUSH_NLISTS; l++)
        px_dl_init(&io->dirty[l]);
    px_dl_init(&io->deferred);
    uv_check_init(loop, &io->flush_check);
    io->flush_check.data = io;
    uv_check_start(&io->flush_check, flush_cb);
    uv_idle_init(loop, &io->flush_idle);
}

void px_io_close(px_io *io)
{
    uv_close((uv_handle_t *)&io->flush_check, NULL);
    uv_close((uv_handle_t *)&io->flush_idle, NULL);
}

/* ---- streams ----------------------------------------------------------------------------------- */

static void kick_close_cb(uv_handle_t *h)
{
    free(h);
}

void px_stream_free(px_stream *s)
{
    if (s->kick != NULL)
        uv_close((uv_handle_t *)s->kick, kick_close_cb);
    px_tls_free(s->tls);
    px_buf_free(&s->tin);
    px_buf_free(&s->pend);
    free(s);
}

void px_stream_free_cb(uv_handle_t *h)
{
    px_stream_free(PX_CONTAINER(h, px_stream, u));
}

px_stream *px_stream_new(uv_loop_t *loop, bool is_unix, void *owner)
{
    px_stream *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    int rc = is_unix ? uv_pipe_init(loop, &s->u.pipe, 0) : uv_tcp_init(loop, &s->u.tcp);
    if (rc < 0) {
        free(s);
        return NULL;
    }
    s->owner = owner;
    return s;
}

void px_stream_close(px_stream *s)
{
    s->owner = NULL;
    if (!uv_is_closing(&s->u.handle))
        uv_close(&s->u.handle, px_stream_free_cb);
}

static void write_cb(uv_write_t *req, int status)
{
    px_write *w = PX_CONTAINER(req, px_write, req);
    px_stream *s = PX_CONTAINER(req->handle, px_stream, u);
    w->done(w, s, status);
    PX_MEM_SUB(w->cap);
    free(w->data);
    free(w);
}

/* The bytes of b onto the socket (px_stream_write's contract, for ciphertext or plaintext). */
static int raw_write(px_stream *s, px_buf *b, px_write_done done, size_t *queued)
{
    *queued = 0;
    if (b->len == 0)
        return 0;
    uv_buf_t ub = uv_buf_init(b->p, (unsigned)b->len);
    int n = uv_try_write(&s->u.stream, &ub, 1);
    if (n < 0 && n != UV_EAGAIN && n != UV_ENOSYS) {
        b->len = 0;
        return n;
    }
    if (n > 0)
        px_buf_consume(b, (size_t)n);
    if (b->len == 0)
        return 0;
    px_write *w = malloc(sizeof(*w));
    if (w == NULL) {
        b->len = 0;
        return UV_ENOMEM;
    }
    w->data = b->p;
    w->len = b->len;
    w->cap = b->cap;
    w->done = done;
    *b = (px_buf){0};
    ub = uv_buf_init(w->data, (unsigned)w->len);
    int rc = uv_write(&w->req, &s->u.stream, &ub, 1, write_cb);
    if (rc < 0) {
        PX_MEM_SUB(w->cap);
        free(w->data);
        free(w);
        return rc;
    }
    *queued = w->len;
    return 0;
}

/* ---- TLS streams ------------------------------------------------------------------------------- */

#define PX_TLS_READ (64u * 1024u) /* ciphertext read per call */

/* The engine's own bytes (handshake, alerts, plaintext written before the handshake): no owner
 * counted them, so their completion tells no one; a failed write shows on the read side. */
static void tls_written(px_write *w, px_stream *s, int status)
{
    (void)w, (void)s, (void)status;
}

static void tls_send(px_stream *s, px_buf *out)
{
    size_t queued;
    if (out->len > 0 && !uv_is_closing(&s->u.handle))
        (void)raw_write(s, out, tls_written, &queued);
    px_buf_free(out);
}

/* The owner's plaintext, as long as it reads and the engine has some. */
static void tls_deliver(px_stream *s)
{
    while (s->owner != NULL && s->reading && s->tls_up) {
        uv_buf_t b = {0};
        s->alloc(&s->u.handle, PX_READ_CHUNK, &b);
        if (b.base == NULL || b.len == 0) {
            s->read(&s->u.stream, UV_ENOBUFS, &b);
            return;
        }
        px_buf out = {0};
        long n = px_tls_read(s->tls, b.base, b.len, &out);
        tls_send(s, &out);
        if (n == 0) {
            s->read(&s->u.stream, 0, &b); /* nothing now: the buffer goes back */
            return;
        }
        s->read(&s->u.stream, n > 0 ? n : n == -1 ? UV_EOF : UV_EPROTO, &b);
        if (n < 0)
            return;
    }
}

static void tls_alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)hint;
    px_stream *s = PX_CONTAINER(h, px_stream, u);
    s->tin.len = 0;
    if (px_buf_reserve(&s->tin, PX_TLS_READ) != 0) {
        *buf = uv_buf_init(NULL, 0);
        return;
    }
    *buf = uv_buf_init(s->tin.p, (unsigned)PX_TLS_READ);
}

/* Ciphertext from the peer: the handshake moves on (and what waited for it goes out), then the
 * owner gets what decrypts. */
static void tls_read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    px_stream *s = PX_CONTAINER(st, px_stream, u);
    if (s->owner == NULL || nread == 0)
        return;
    uv_buf_t none = uv_buf_init(NULL, 0);
    if (nread < 0) {
        s->read(st, nread, &none);
        return;
    }
    px_buf out = {0};
    int rc = px_tls_feed(s->tls, buf->base, (size_t)nread, &out);
    if (rc == 1 && !s->tls_up) {
        s->tls_up = true;
        if (s->pend.len > 0 && px_tls_write(s->tls, s->pend.p, s->pend.len, &out) != 0)
            rc = -1;
        px_buf_free(&s->pend);
    }
    tls_send(s, &out);
    if (rc < 0) {
        s->read(st, UV_EPROTO, &none);
        return;
    }
    tls_deliver(s);
}

static void kick_cb(uv_idle_t *h)
{
    uv_idle_stop(h);
    tls_deliver(h->data);
}

int px_stream_tls(px_stream *s, px_tls *t)
{
    s->kick = malloc(sizeof(*s->kick));
    if (s->kick == NULL) {
        px_tls_free(t);
        return UV_ENOMEM;
    }
    uv_idle_init(s->u.handle.loop, s->kick);
    s->kick->data = s;
    s->tls = t;
    px_buf out = {0};
    if (px_tls_feed(t, NULL, 0, &out) < 0) { /* a client's hello */
        px_buf_free(&out);
        return UV_EPROTO;
    }
    tls_send(s, &out);
    return 0;
}

int px_stream_read_start(px_stream *s, uv_alloc_cb alloc, uv_read_cb read)
{
    if (s->tls == NULL)
        return uv_read_start(&s->u.stream, alloc, read);
    s->alloc = alloc;
    s->read = read;
    s->reading = true;
    if (s->tls_up && px_tls_pending(s->tls))
        uv_idle_start(s->kick, kick_cb); /* decrypted earlier, not taken: no new bytes will come */
    int rc = uv_read_start(&s->u.stream, tls_alloc_cb, tls_read_cb);
    return rc == UV_EALREADY ? 0 : rc;
}

void px_stream_read_stop(px_stream *s)
{
    s->reading = false;
    if (s->kick != NULL)
        uv_idle_stop(s->kick);
    uv_read_stop(&s->u.stream);
}

int px_stream_shutdown(px_stream *s, uv_shutdown_t *req, uv_shutdown_cb cb)
{
    if (s->tls != NULL) {
        px_buf out = {0};
        px_tls_close_notify(s->tls, &out);
        tls_send(s, &out);
    }
    return uv_shutdown(req, &s->u.stream, cb);
}

const char *px_stream_error(const px_stream *s)
{
    return s->tls != NULL && px_tls_error(s->tls)[0] != '\0' ? px_tls_error(s->tls) : NULL;
}

int px_stream_write(px_stream *s, px_buf *b, px_write_done done, size_t *queued)
{
    if (s->tls == NULL)
        return raw_write(s, b, done, queued);
    *queued = 0;
    if (b->len == 0)
        return 0;
    if (px_stream_error(s) != NULL) {
        b->len = 0;
        return UV_EPROTO;
    }
    if (!s->tls_up) { /* sent when the handshake completes */
        int rc = px_buf_append(&s->pend, b->p, b->len);
        b->len = 0;
        return rc == 0 ? 0 : UV_ENOMEM;
    }
    px_buf out = {0};
    int rc = px_tls_write(s->tls, b->p, b->len, &out);
    b->len = 0;
    if (rc != 0) {
        px_buf_free(&out);
        return UV_EPROTO;
    }
    rc = raw_write(s, &out, done, queued);
    px_buf_free(&out);
    return rc;
}

void px_read_alloc(px_buf *rbuf, size_t need, uv_buf_t *out)
{
    out->base = NULL;
    out->len = 0;
    size_t want = PX_READ_CHUNK;
    if (need > rbuf->len && need - rbuf->len > want)
        want = need - rbuf->len;
    if (want > PX_READ_MAX)
        want = PX_READ_MAX;
    if (px_buf_reserve(rbuf, want) != 0)
        return;
    out->base = rbuf->p + rbuf->len;
    out->len = rbuf->cap - rbuf->len;
}

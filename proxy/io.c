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

static void flush_cb(uv_check_t *h)
{
    px_io *io = h->data;
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
    for (int l = 0; l < PX_FLUSH_NLISTS; l++)
        px_dl_init(&io->dirty[l]);
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

void px_stream_free_cb(uv_handle_t *h)
{
    free(PX_CONTAINER(h, px_stream, u));
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
    free(w->data);
    free(w);
}

int px_stream_write(px_stream *s, px_buf *b, px_write_done done, size_t *queued)
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
    w->done = done;
    *b = (px_buf){0};
    ub = uv_buf_init(w->data, (unsigned)w->len);
    int rc = uv_write(&w->req, &s->u.stream, &ub, 1, write_cb);
    if (rc < 0) {
        free(w->data);
        free(w);
        return rc;
    }
    *queued = w->len;
    return 0;
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

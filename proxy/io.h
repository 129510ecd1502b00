/* SPDX-License-Identifier: Apache-2.0 */
/*
 * io.h — the data path's side of a worker's loop: libuv streams of either family, writes that go
 * out at once when the socket takes them, read buffers, and write batching (dirty lists flushed
 * once per loop iteration). Protocol-blind, and it calls nothing above it: a dirty object is
 * flushed through the function pointer it registered (px_flushable.flush).
 *
 * Threading: a px_io and everything on it belong to one worker's thread.
 */
#ifndef CHASH_PROXY_IO_H
#define CHASH_PROXY_IO_H

#include "buf.h"
#include "log.h"

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#define PX_READ_CHUNK (64u * 1024u)       /* bytes asked of the kernel per read */
#define PX_READ_MAX (4u * 1024u * 1024u)  /* the most asked for at once, however much is owed */

typedef struct px_tls px_tls; /* tls.h */

/* A libuv stream of either family, with the object that owns it. Allocated per connection
 * attempt and freed in its close callback, so the owner can reconnect at once.
 *
 * With TLS (px_stream_tls) the owner still reads and writes plaintext through the same calls:
 * libuv reads ciphertext into tin, the engine decrypts it into the owner's buffers (its alloc
 * and read callbacks, as libuv would call them), and writes are encrypted on their way out.
 * Plaintext written before the handshake completes waits in pend. */
typedef struct px_stream {
    union {
        uv_handle_t handle;
        uv_stream_t stream;
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    } u;
    uv_connect_t connect;
    void *owner; /* px_conn or px_client; NULL once the owner let go of it */
    px_tls *tls; /* NULL: plain */
    uv_alloc_cb alloc; /* TLS: the owner's callbacks */
    uv_read_cb read;
    bool reading;      /* TLS: the owner wants its plaintext */
    bool tls_up;       /* TLS: the handshake is done */
    px_buf tin, pend;
    uv_idle_t *kick;   /* TLS: delivers plaintext left in the engine when reading resumes */
} px_stream;

/* One queued write: its bytes live until done runs (then px_stream_write frees it). */
typedef struct px_write px_write;
typedef void (*px_write_done)(px_write *w, px_stream *s, int status);
struct px_write {
    uv_write_t req;
    char *data;
    size_t len;
    size_t cap; /* data's allocation (px_mem_held) */
    px_write_done done;
};

/* Something with bytes to write: flushed once per loop iteration after it is marked. */
typedef struct px_flushable {
    px_dl link; /* in a px_io dirty list while marked */
    void (*flush)(struct px_flushable *f);
} px_flushable;

/* Flush order within an iteration: backends first, so that a client's flush which resumes its
 * reading and queues more requests has them sent in the same iteration (a second round). */
enum { PX_FLUSH_BACKEND = 0, PX_FLUSH_CLIENT = 1, PX_FLUSH_NLISTS };

typedef struct px_io {
    uv_loop_t *loop;
    px_log log;
    uint64_t rng;  /* xorshift64* state (px_io_rand) */
    bool stopping; /* the worker is shutting down: no failover, no new work */
    px_dl dirty[PX_FLUSH_NLISTS];
    px_dl deferred; /* work for the next flush, once per iteration (px_io_defer) */
    uv_check_t flush_check; /* flushes dirty streams after each poll */
    uv_idle_t flush_idle;   /* keeps the poll from blocking while something is dirty */
    void (*after_flush)(struct px_io *io); /* run after each iteration's flush (may be NULL) */
    /* uv_hrtime() when the read being handled came in (0: no read is being handled): every
     * request framed from one client read arrived with it, every reply matched in one backend
     * read too, so their latency clock is read once per read, not twice per request (a vDSO
     * clock read was 4-5 % of the proxy's CPU with -P 16). Set by px_io_read_begin. */
    uint64_t read_hr;
    /* Reads handled (px_io_read_begin), and their count at the last flush: quiet is set at each
     * flush when none came since the one before, i.e. that iteration's poll brought nothing. */
    uint64_t reads, reads_flushed;
    bool quiet;
} px_io;

/* Sets up io's handles on loop. Cannot fail. */
void px_io_init(px_io *io, uv_loop_t *loop, px_log log, uint64_t seed);
void px_io_close(px_io *io); /* closes its handles (shutdown) */
uint64_t px_io_now(const px_io *io); /* the loop's time, ms */
uint64_t px_io_rand(px_io *io);      /* jitter for the health tracker's probe delays */
/* The latency clock (ns): when the read being handled came in, else uv_hrtime(). */
static inline uint64_t px_io_hrtime(const px_io *io)
{
    return io->read_hr != 0 ? io->read_hr : uv_hrtime();
}
/* A read callback's bracket: begin returns what end restores. */
static inline uint64_t px_io_read_begin(px_io *io)
{
    uint64_t was = io->read_hr;
    io->read_hr = uv_hrtime();
    io->reads++;
    return was;
}
static inline void px_io_read_end(px_io *io, uint64_t was)
{
    io->read_hr = was;
}
/* During a flush: whether nothing was read since the previous flush. Something holding its bytes
 * back for more that is on its way (client.c) stops waiting then: the poll came back empty, so
 * waiting buys nothing and would only spin the loop. */
static inline bool px_io_quiet(const px_io *io)
{
    return io->quiet;
}
/* Marks f for the flush at the end of this iteration (no-op when already marked). */
void px_io_mark(px_io *io, px_flushable *f, int list);
void px_io_unmark(px_flushable *f);
/* Runs f->flush once at this iteration's flush, before the dirty lists (so what it sends goes
 * out in the same iteration); f may defer itself again, for the next iteration: a long job
 * done in slices lets the loop serve everyone else between them. px_io_unmark cancels it. */
void px_io_defer(px_io *io, px_flushable *f);

/* A new unopened stream (TCP, or a unix socket when is_unix) on loop, owned by owner.
 * NULL when out of memory or libuv refuses. */
px_stream *px_stream_new(uv_loop_t *loop, bool is_unix, void *owner);
/* Closes s and frees it once closed; s->owner is cleared first, so callbacks still pending on
 * it find no owner. */
void px_stream_close(px_stream *s);
/* A close callback that only frees the px_stream (for handles closed by other paths). */
void px_stream_free_cb(uv_handle_t *h);
/* Frees s (its TLS state too) once its handle is closed: for close callbacks of owners. */
void px_stream_free(px_stream *s);

/* Makes s a TLS stream with engine t (taken over): a client-side engine sends its hello at once.
 * 0, or a libuv error (t freed). */
int px_stream_tls(px_stream *s, px_tls *t);
/* uv_read_start / uv_read_stop for either kind of stream. */
int px_stream_read_start(px_stream *s, uv_alloc_cb alloc, uv_read_cb read);
void px_stream_read_stop(px_stream *s);
/* uv_shutdown, after a TLS close_notify. */
int px_stream_shutdown(px_stream *s, uv_shutdown_t *req, uv_shutdown_cb cb);
/* Why a TLS stream failed (its read callback got UV_EPROTO), or NULL. */
const char *px_stream_error(const px_stream *s);

/* Writes b to s: what the socket takes at once (uv_try_write: no allocation, no callback, no
 * re-arming of POLLOUT), the rest in one queued uv_write that takes b's allocation over (libuv
 * refuses a try while an earlier write is queued, so bytes never overtake each other). b is
 * empty afterwards. *queued is the bytes left to done (0: all written now). Returns 0, or a
 * libuv error (b's bytes are then dropped). */
int px_stream_write(px_stream *s, px_buf *b, px_write_done done, size_t *queued);

/* The read buffer for a libuv alloc callback: room at the end of rbuf for at least
 * PX_READ_CHUNK bytes, or what the message in progress still owes (rbuf must reach need), up
 * to PX_READ_MAX. out is empty when out of memory (libuv then reports UV_ENOBUFS). */
void px_read_alloc(px_buf *rbuf, size_t need, uv_buf_t *out);

#endif /* CHASH_PROXY_IO_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backend.c — backend servers and their connections: lazy connect, pipelining, reply matching
 * (the pool codec's scan_reply), timeouts, failure reporting to the health tracker, and the
 * probes that readmit ejected servers. Protocol-blind: bytes come from the codec, and a
 * fragment's outcome goes back through its done callback (failover is the route's business).
 *
 * Invariants of a connection:
 * - Its FIFO holds every fragment whose bytes were appended to its output, in append order; the
 *   output buffer holds the bytes not yet handed to the kernel, in the same order. So the n-th
 *   reply read belongs to the n-th fragment of the FIFO.
 * - When it fails (connect error, read/write error, EOF, a reply that does not parse, or the
 *   head fragment's deadline passing) it is closed and every fragment of its FIFO fails with it:
 *   a pipelined reply stream cannot skip one reply. Each is told so (PX_REPLY_FAILED).
 * - Its timer runs while the FIFO is non-empty, due at (or before) the head's deadline. The
 *   deadline is the pool's timeout after the later of: the fragment's queueing, the last bytes
 *   read on the connection, the previous reply. So a server that stops answering times out, and a
 *   long pipeline of large replies does not.
 */

#include "backend.h"
#include "client_track.h"
#include "tls.h"
#include "resolve.h"

#include "hot/near.h"

#include <inttypes.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

/* Why a connection failed. WHY_LOCAL: the proxy could not open it (no descriptor, no memory):
 * not the server's failure, so its health is not told and its keys do not move. */
typedef enum conn_why { WHY_ERR, WHY_EOF, WHY_TIMEOUT, WHY_STOP, WHY_LOCAL } conn_why;

/* A libuv error that is the proxy's own resource running out, not the peer's doing. */
static bool local_error(int rc)
{
    return rc == UV_EMFILE || rc == UV_ENFILE || rc == UV_ENOMEM || rc == UV_ENOBUFS;
}

static void conn_fail(px_conn *c, conn_why why, const char *reason);
static void dedicated_dispose(px_conn *c);
static void probe_done(px_server *s, bool ok);
static void rejoin(px_conn *c, px_server *s);

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

/* ---- joining (px_codec.join) ------------------------------------------------------------------- */

static void join_reset(px_join *j)
{
    j->open = false;
    j->keys.len = j->off = 0;
}

static void join_free(px_join *j)
{
    px_buf_free(&j->keys);
    px_buf_free(&j->scratch);
    j->open = false;
    j->off = 0;
}

/* The keys of the FIFO's oldest joined fragment. Records: a 2-byte length (the codec keeps a
 * joined request within one line, far below 64 KiB), then the bytes. */
static const char *join_front(const px_join *j, size_t *klen)
{
    const unsigned char *k = (const unsigned char *)j->keys.p + j->off;
    *klen = (size_t)k[0] | (size_t)k[1] << 8;
    return (const char *)k + 2;
}

/* Takes the oldest record off. A FIFO that never empties (a connection under steady load)
 * would grow keys for good: what was consumed is dropped once it is half of it (amortized
 * O(1) per record). */
static void join_pop(px_join *j)
{
    size_t klen;
    (void)join_front(j, &klen);
    j->off += 2u + klen;
    if (j->off == j->keys.len) {
        j->keys.len = j->off = 0;
    } else if (j->off >= 4096 && j->off * 2 >= j->keys.len) {
        memmove(j->keys.p, j->keys.p + j->off, j->keys.len - j->off);
        j->keys.len -= j->off;
        j->off = 0;
    }
}

/* f's request was just written to c's output at wbuf[at, ...): it joins the group open there,
 * or opens one, or closes it (a request that does not join). Nothing changes when joining
 * fails (a key too long to record, out of memory, a request too long): f then stands alone. */
static void conn_join(px_conn *c, px_frag *f, size_t at)
{
    const px_codec *codec = c->server->pool->codec;
    px_join *j = &c->join;
    size_t key, klen;
    if (codec->join == NULL || c->dedicated || f->kind != PX_FRAG_FORWARD ||
        !codec->join_keys(c->wbuf.p + at, c->wbuf.len - at, f->expect, &key, &klen) ||
        klen > UINT16_MAX) {
        j->open = false;
        return;
    }
    key += at;
    if (j->open && j->end == at && j->n < PX_JOIN_MAX && c->tail != NULL) {
        unsigned char n[2] = {(unsigned char)j->last_len, (unsigned char)(j->last_len >> 8)};
        size_t was = j->keys.len;
        if (px_buf_append(&j->keys, (const char *)n, 2) == 0 &&
            px_buf_append(&j->keys, c->wbuf.p + j->last, j->last_len) == 0 &&
            codec->join(&c->wbuf, j->line, at, &key, klen) == 0) {
            c->tail->joined = true;
            j->n++;
            j->last = key;
            j->last_len = klen;
            j->end = c->wbuf.len;
            f->len = c->wbuf.len - at;
            c->server->stats.joined++;
            return;
        }
        j->keys.len = was;
    }
    j->open = true; /* a group starts with f (its keys and scratch are the connection's) */
    j->line = at;
    j->end = c->wbuf.len;
    j->n = 1;
    j->last = key;
    j->last_len = klen;
}

/* Fragments come from the thread's block cache (buf.h): one per backend request. */
px_frag *px_frag_new(size_t nslots)
{
    px_frag *f = px_cache_calloc(sizeof(*f) + nslots * sizeof(f->slots[0]));
    if (f != NULL)
        f->nslots = nslots;
    return f;
}

void px_frag_free(px_frag *f)
{
    if (f != NULL)
        px_cache_free(f, sizeof(*f) + f->nslots * sizeof(f->slots[0]));
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
    static uint32_t next_uid = 1; /* atomic: servers are set up by every worker */
    px_io *px = pool->io;
    s->uid = __atomic_fetch_add(&next_uid, 1u, __ATOMIC_RELAXED);
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
    unsigned kinds = pool->codec->backend_dialects > 0 ? pool->codec->backend_dialects : 1u;
    s->nper = n > 0 ? (unsigned)n : 1u;
    s->nconns = s->nper * kinds;
    s->conns = calloc(s->nconns, sizeof(*s->conns));
    if (s->conns == NULL)
        return -1;
    for (unsigned i = 0; i < s->nconns; i++) {
        s->conns[i].server = s;
        s->conns[i].dialect = (uint8_t)(i / s->nper);
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

/* Fails every dedicated connection of s (their owners told), e.g. when s leaves the pool. */
static void dedicated_fail_all(px_server *s, const char *why)
{
    px_conn *d = s->dedicated;
    while (d != NULL) {
        px_conn *next = d->next_dedicated;
        conn_fail(d, WHY_STOP, why);
        d = next;
    }
}

void px_server_moved(px_server *s)
{
    for (unsigned c = 0; c < s->nconns; c++)
        s->conns[c].server = s;
    for (px_conn *d = s->dedicated; d != NULL; d = d->next_dedicated)
        d->server = s;
}

void px_server_close(px_server *s)
{
    dedicated_fail_all(s, "proxy shutting down");
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
    dedicated_fail_all(s, "server removed from the pool");
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
    for (const px_conn *d = s->dedicated; d != NULL; d = d->next_dedicated)
        if (d->head != NULL)
            return true;
    return false;
}

void px_server_free(px_server *s)
{
    for (unsigned i = 0; s->conns != NULL && i < s->nconns; i++) {
        px_buf_free(&s->conns[i].wbuf);
        px_buf_free(&s->conns[i].rbuf);
        join_free(&s->conns[i].join);
        px_tls_session_free(s->conns[i].tls_session);
    }
    free(s->conns);
    s->conns = NULL;
    px_journal_batch_free(&s->rejoin_batch);
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

/* ---- probes and rejoins --------------------------------------------------------------------- */

/* The end of s's probe (and of its rejoin's clean-up): the result to the shared health. A
 * clean-up that failed has given its journal back already (rejoin_round_done): the server
 * stays out and the next probe's rejoin cleans it up again. ok: s is readmitted only if no key
 * was journaled for it since its last clean-up took the journal (px_health_readmit: atomic
 * with the writes that journal), else the probe counts as failed and s stays out. dirty_retry:
 * on such keys, return PX_READMIT_DIRTY with nothing done, so the caller cleans again. Nothing
 * here flushes a server. */
static int probe_done_retry(px_server *s, bool ok, bool dirty_retry)
{
    px_pool *pool = s->pool;
    px_io *px = pool->io;
    if (s->retired || px->stopping) {
        s->probing = false;
        s->rejoin_round = 0;
        if (!s->retired)
            px_health_probe_drop(pool->health, s->index);
        return PX_READMIT_OUT;
    }
    int rc = ok ? px_health_readmit(pool->health, s->index, px_io_now(px), px_io_rand(px))
                : PX_READMIT_OUT;
    if (rc == PX_READMIT_DIRTY && dirty_retry)
        return rc;
    unsigned rounds = s->rejoin_round;
    s->probing = false;
    s->rejoin_round = 0;
    if (rc == PX_READMIT_DIRTY) {
        PX_LOG(px, PX_LOG_WARN,
               "pool %s: server %s: keys kept being written elsewhere for it through %u clean-up "
               "rounds: it stays out until its next probe", pool->conf->name, server_name(s),
               rounds + 1);
        ok = false;
    }
    if (!ok) {
        (void)px_health_probe_result(pool->health, s->index, false, px_io_now(px),
                                     px_io_rand(px));
        return PX_READMIT_OUT;
    }
    if (rc == PX_READMIT_UP)
        /* server_ejected_at keeps the last ejection's time, as nutcracker's does. */
        PX_LOG(px, PX_LOG_NOTICE, "pool %s: server %s readmitted after a probe",
               pool->conf->name, server_name(s));
    return rc;
}

static void probe_done(px_server *s, bool ok)
{
    (void)probe_done_retry(s, ok, false);
}

typedef struct cleanup_arg {
    const px_codec *codec;
    const char *key; /* a delete; NULL: the walk's page after cursor */
    size_t len;
    uint64_t cursor;
} cleanup_arg;

static int encode_cleanup(void *arg, px_buf *out, uint8_t *expect)
{
    const cleanup_arg *a = arg;
    return a->key == NULL ? a->codec->encode_walk(out, a->cursor, expect)
                          : a->codec->encode_delete(out, a->key, a->len, expect);
}

/* Sends one clean-up request (a delete, or a walk's page: kind) on c; counted in
 * cleanup_pending until its reply or failure. On failure to send, the clean-up fails. */
static void cleanup_send(px_conn *c, px_server *s, px_frag_kind kind, const cleanup_arg *a)
{
    px_frag *f = px_frag_new(0);
    if (f == NULL) {
        s->cleanup_failed = true;
        return;
    }
    f->kind = kind;
    f->cid = (uint64_t)(c - s->conns) % s->nper;
    f->dialect = c->dialect;
    s->cleanup_pending++; /* before the send: a connection failing at once releases it */
    if (px_server_send(s, f, encode_cleanup, (void *)a) != 0) {
        px_frag_free(f);
        s->cleanup_failed = true;
        s->cleanup_pending--;
    }
}

/* The end of a clean-up round (every request of it answered or failed). A failed round gives
 * back what it was cleaning to the journal and leaves s out (retried at its next probe). Writes
 * made during it (s still out) went to a new journal: another round cleans them, up to
 * PX_REJOIN_ROUNDS rounds; s is readmitted after a round that leaves nothing journaled (else its
 * probe fails and it stays out: never readmitted with a key older than a write made elsewhere). */
static void rejoin_round_done(px_conn *c, px_server *s)
{
    px_pool *pool = s->pool;
    if (s->cleanup_failed && !s->retired) {
        px_health_journal_return(pool->health, s->index, &s->rejoin_batch);
        PX_LOG(pool->io, PX_LOG_WARN,
               "pool %s: server %s: its clean-up failed; it stays out, its dirty keys kept for "
               "its next probe", pool->conf->name, server_name(s));
    } else {
        if (s->rejoin_batch.dirty != NULL)
            PX_LOG(pool->io, PX_LOG_NOTICE,
                   "pool %s: server %s: %llu of its %llu keys deleted (their buckets were "
                   "written elsewhere while it was out)", pool->conf->name, server_name(s),
                   (unsigned long long)s->walk_deleted, (unsigned long long)s->walk_seen);
        px_journal_batch_free(&s->rejoin_batch);
    }
    if (c == NULL || s->cleanup_failed || s->retired || pool->io->stopping ||
        ++s->rejoin_round >= PX_REJOIN_ROUNDS) {
        probe_done(s, !s->cleanup_failed);
        return;
    }
    rejoin(c, s); /* the writes made during this round, if any; readmission when none */
}

/* A clean-up request is answered (or failed); the last one ends the round. */
static void cleanup_release(px_conn *c, px_server *s)
{
    if (--s->cleanup_pending == 0)
        rejoin_round_done(c, s);
}

/* s answered its probe on c. Before it takes requests again, every key written elsewhere on
 * its behalf while it was out is deleted on it (its copy is older): the journal's keys, or,
 * past its bound, every key of the server in a dirty bucket, found by walking the server's
 * keys (codec encode_walk, walk_page) one page at a time, so the deletes in flight are one
 * page's. Readmission follows the last clean-up reply (probe_done). The probe's claim stays
 * held meanwhile, so no other worker probes s. Never a flush: a server is not emptied because
 * it was ejected. */
static void rejoin(px_conn *c, px_server *s)
{
    px_pool *pool = s->pool;
    px_journal_batch *b = &s->rejoin_batch;
    if (px_health_journal_take(pool->health, s->index, b) != 0) {
        PX_LOG(pool->io, PX_LOG_WARN,
               "pool %s: server %s answers again, but its clean-up is out of memory: it stays "
               "out until its next probe", pool->conf->name, server_name(s));
        probe_done(s, false);
        return;
    }
    if (b->n == 0 && b->dirty == NULL) {
        /* Nothing (left) to delete: readmitted, unless a write journaled a key for s since the
         * take; then another round, while rounds are left. */
        if (probe_done_retry(s, true, s->rejoin_round + 1 < PX_REJOIN_ROUNDS) ==
            PX_READMIT_DIRTY) {
            s->rejoin_round++;
            rejoin(c, s);
        }
        return;
    }
    if (s->rejoin_round == 0)
        PX_LOG(pool->io, PX_LOG_NOTICE,
               "pool %s: server %s answers again: %s before readmitting it", pool->conf->name,
               server_name(s),
               b->dirty != NULL ? "deleting on it its keys whose buckets were written "
                                    "elsewhere while it was out (more keys than "
                                    "rejoin_journal_keys)"
                                  : "deleting on it the keys written elsewhere while it was out");
    s->cleanup_pending = 1; /* held until every send is made */
    s->cleanup_failed = false;
    s->walk_seen = s->walk_deleted = 0;
    for (size_t k = 0; k < b->n; k++) {
        cleanup_arg a = {.codec = pool->codec, .key = b->keys[k], .len = b->lens[k]};
        cleanup_send(c, s, PX_FRAG_CLEANUP, &a);
    }
    if (b->dirty != NULL) {
        cleanup_arg a = {.codec = pool->codec, .cursor = 0};
        cleanup_send(c, s, PX_FRAG_WALK, &a);
    }
    cleanup_release(c, s);
}

typedef struct walk_ctx {
    px_conn *c;
    px_server *s;
} walk_ctx;

/* One key of a walk's page: deleted when its bucket is dirty. */
static void walk_key(void *arg, const char *key, size_t len)
{
    walk_ctx *w = arg;
    px_server *s = w->s;
    s->walk_seen++;
    if (!px_journal_dirty(s->rejoin_batch.dirty, px_journal_bucket(key, len)))
        return;
    cleanup_arg a = {.codec = s->pool->codec, .key = key, .len = len};
    s->walk_deleted++;
    cleanup_send(w->c, s, PX_FRAG_CLEANUP, &a);
}

/* A page of the walk: its dirty keys' deletes, then the next page's request, queued behind them
 * on the same connection. */
static void walk_page(px_conn *c, px_server *s, const px_reply *r)
{
    px_pool *pool = s->pool;
    uint64_t next = 0;
    walk_ctx w = {c, s};
    if (s->cleanup_failed || s->retired) {
        /* the round is over already: no more pages */
    } else if (r->kind == PX_REPLY_ERROR ||
               pool->codec->walk_page(r, &next, walk_key, &w) != 0) {
        size_t n = 0;
        while (n < r->len && n < 200 && r->p[n] != '\r' && r->p[n] != '\n')
            n++;
        PX_LOG(pool->io, PX_LOG_WARN, "pool %s: server %s: walking its keys failed: %.*s",
               pool->conf->name, server_name(s), (int)n, r->p);
        s->cleanup_failed = true;
    } else if (next != 0) {
        cleanup_arg a = {.codec = pool->codec, .cursor = next};
        cleanup_send(c, s, PX_FRAG_WALK, &a);
    }
    cleanup_release(c, s);
}

/* A reply for the FIFO's head fragment f (already unlinked). */
static void conn_reply(px_conn *c, px_frag *f, const px_reply *r)
{
    px_server *s = c->server;
    px_pool *pool = s->pool;
    px_io *px = pool->io;
    switch (f->kind) {
    case PX_FRAG_INIT:
        /* What was sent is named, never shown (it carries a password); the server's own
         * answer is shown, up to its first line end. */
        if (r->kind == PX_REPLY_ERROR) {
            size_t n = 0;
            while (n < r->len && n < 200 && r->p[n] != '\r' && r->p[n] != '\n')
                n++;
            PX_LOG(px, PX_LOG_WARN, "pool %s: server %s refused %s: %.*s", pool->conf->name,
                   server_name(s), f->what != NULL ? f->what : "the connection's setup", (int)n,
                   r->p);
        }
        px_frag_free(f);
        return;
    case PX_FRAG_PROBE:
        px_frag_free(f);
        if (s->retired) { /* no longer in the membership: its health is not tracked */
            s->probing = false;
            return;
        }
        if (r->kind == PX_REPLY_ERROR) {
            probe_done(s, false);
            return;
        }
        rejoin(c, s);
        return;
    case PX_FRAG_CLEANUP:
        px_frag_free(f);
        if (r->kind == PX_REPLY_ERROR)
            s->cleanup_failed = true;
        cleanup_release(c, s);
        return;
    case PX_FRAG_WALK:
        px_frag_free(f);
        walk_page(c, s, r); /* r's bytes stay valid: f is freed, not the read buffer */
        return;
    case PX_FRAG_FORWARD:
        /* Like nutcracker, count only the clients' traffic: not our handshakes or probes. */
        s->stats.responses++;
        s->stats.response_bytes += r->len;
        if (!s->retired)
            px_health_success(pool->health, s->index, px_io_now(px));
        f->done(f, r);
        px_frag_free(f);
        return;
    }
}

/* Matches complete replies in rbuf with the FIFO, from the head. */
static void conn_scan(px_conn *c)
{
    px_io *px = conn_px(c);
    px_pool *pool = c->server->pool;
    px_stream *st = c->stream;
    size_t off = 0;
    while (c->stream == st && c->rbuf.len - off > 0 && c->rbuf.len >= c->need) {
        px_frag *f = c->head;
        px_reply r;
        size_t need = 0, consumed = 0;
        char err[128];
        err[0] = '\0'; /* not the whole array: this runs once per reply */
        px_parse rs;
        if (f != NULL && f->joined) {
            size_t klen;
            const char *key = join_front(&c->join, &klen);
            rs = pool->codec->scan_joined(&pool->backend_limits, f->expect, key, klen,
                                          c->rbuf.p + off, c->rbuf.len - off, &c->join.scratch,
                                          &r, &consumed, &need, err, sizeof(err));
        } else {
            rs = pool->codec->scan_reply(&pool->backend_limits, f != NULL ? f->expect : 0,
                                         c->rbuf.p + off, c->rbuf.len - off, &r, &consumed, &need,
                                         err, sizeof(err));
        }
        if (rs == PX_PARSE_AGAIN) {
            c->need = off + need;
            break;
        }
        if (rs != PX_PARSE_OK) {
            conn_fail(c, WHY_ERR, err[0] ? err : "bad reply");
            return;
        }
        /* A push by its type is out of band whatever the FIFO holds; on a dedicated connection
         * with nothing in its FIFO, so is any reply (RESP2's pub/sub messages). The owner gets
         * it; a shared or released connection drops it. Anything else with nothing waiting is
         * a protocol error. */
        bool push = r.kind == PX_REPLY_PUSH;
        if (f == NULL && !push &&
            (!c->dedicated || (!c->released && c->owner.push == NULL))) {
            conn_fail(c, WHY_ERR, "a reply without a request");
            return;
        }
        if (push || f == NULL) {
            c->need = 0;
            off += consumed;
            if (c->dedicated && !c->released && c->owner.push != NULL)
                c->owner.push(c->owner.ctx, c, &r);
            continue;
        }
        c->head = f->next;
        if (c->head == NULL)
            c->tail = NULL;
        c->nfrags--;
        c->bytes -= f->len;
        c->need = 0;
        if (c->head != NULL)
            c->head->deadline = px_io_now(px) + c->server->pool->timeout_ms;
        if (f->joined)
            join_pop(&c->join);
        /* The reply's bytes stay valid during the call: nothing appends to rbuf meanwhile (nor
         * to the join's scratch: only this scan writes it). */
        conn_reply(c, f, &r);
        off += consumed;
        if (c->stream == st && c->join.scratch.cap > PX_BUF_KEEP)
            px_buf_free(&c->join.scratch); /* a huge value's copy is not kept */
        if (c->stream == st && c->released && c->head == NULL)
            dedicated_dispose(c); /* its last reply is in */
    }
    if (c->stream != st)
        return; /* failed meanwhile: its buffers were reset */
    px_buf_consume(&c->rbuf, off);
    c->need = c->need > off ? c->need - off : 0;
    if (c->rbuf.len == 0 && c->rbuf.cap > PX_BUF_KEEP)
        px_buf_free(&c->rbuf); /* a huge reply's buffer is not kept */
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
            conn_fail(c, WHY_ERR,
                      px_stream_error(st) != NULL ? px_stream_error(st) : uv_strerror((int)nread));
        return;
    }
    c->rbuf.len += (size_t)nread;
    /* The timeout bounds silence, not queueing: bytes arriving for the head (a large reply, or
     * replies to a long pipeline) push its deadline on. */
    if (c->head != NULL)
        c->head->deadline = px_io_now(conn_px(c)) + c->server->pool->timeout_ms;
    px_io *io = conn_px(c);
    uint64_t was = px_io_read_begin(io);
    conn_scan(c); /* c may be gone */
    px_io_read_end(io, was);
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
    c->join.open = false; /* what is written is joined no more */
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
    px_pool *pool = c->server->pool;
    if (pool->tls_servers != NULL) {
        /* TLS: the name sent as SNI and verified is server_tls_name, else the server's host. */
        const char *name = pool->conf->server_tls_name != NULL ? pool->conf->server_tls_name
                           : c->server->is_unix              ? NULL
                                                             : c->server->conf->host;
        px_tls *t = px_tls_new(pool->tls_servers, false, name, &c->tls_session);
        int trc = t != NULL ? px_stream_tls(st, t) : UV_ENOMEM;
        if (trc < 0) {
            conn_fail(c, WHY_LOCAL, uv_strerror(trc));
            return;
        }
    }
    int rc = px_stream_read_start(st, conn_alloc_cb, conn_read_cb);
    if (rc < 0) {
        conn_fail(c, WHY_ERR, uv_strerror(rc));
        return;
    }
    conn_mark(c);
}

/* Queues f, whose len bytes were just appended to the output, at the FIFO's tail. */
static void conn_enqueue(px_conn *c, px_frag *f)
{
    px_io *px = conn_px(c);
    px_server *s = c->server;
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

/* Opens the connection; the codec's handshake (AUTH, SELECT) goes first in its FIFO. */
static int conn_open(px_conn *c)
{
    px_server *s = c->server;
    px_pool *pool = s->pool;
    px_io *px = pool->io;
    px_stream *st = px_stream_new(px->loop, s->is_unix, c);
    if (st == NULL)
        return UV_ENOMEM;
    if (s->is_unix) {
        uv_pipe_connect(&st->connect, &st->u.pipe, s->conf->host, conn_connect_cb);
    } else {
        uv_tcp_nodelay(&st->u.tcp, 1);
        if (pool->conf->tcpkeepalive)
            uv_tcp_keepalive(&st->u.tcp, 1, 60);
        int rc = uv_tcp_connect(&st->connect, &st->u.tcp, (const struct sockaddr *)&s->sa,
                                conn_connect_cb);
        if (rc < 0) {
            px_stream_close(st);
            return rc;
        }
    }
    c->stream = st;
    c->state = PX_CONN_CONNECTING;
    for (size_t i = 0;; i++) {
        px_frag *f = px_frag_new(0);
        size_t before = c->wbuf.len;
        int n = f == NULL ? -1
                          : pool->codec->encode_handshake(&c->wbuf, pool->conf, c->dialect, i,
                                                          &f->expect, &f->what);
        if (n <= 0) {
            c->wbuf.len = before;
            px_frag_free(f);
            break;
        }
        f->kind = PX_FRAG_INIT;
        f->len = c->wbuf.len - before;
        conn_enqueue(c, f);
    }
    return 0;
}

/* ---- failure and failover --------------------------------------------------------------------- */

/* f could not be served by server s (its connection failed). */
static void frag_failed(px_frag *f, px_server *s, const char *why)
{
    switch (f->kind) {
    case PX_FRAG_INIT:
        break;
    case PX_FRAG_PROBE:
        if (s->retired)
            s->probing = false;
        else
            probe_done(s, false);
        break;
    case PX_FRAG_CLEANUP:
    case PX_FRAG_WALK:
        s->cleanup_failed = true;
        cleanup_release(NULL, s);
        break;
    case PX_FRAG_FORWARD: {
        char msg[256];
        int n = snprintf(msg, sizeof(msg), "backend %s %s", server_name(s), why);
        px_reply r = {.p = msg, .len = n > 0 ? (size_t)n : 0, .kind = PX_REPLY_FAILED};
        if (r.len >= sizeof(msg))
            r.len = sizeof(msg) - 1;
        f->done(f, &r);
        break;
    }
    }
    px_frag_free(f);
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
    /* A shared connection of a server that tracks the near cache's reads (track.h) may have
     * carried tracked fills: the server forgets what it tracked for it, so no entry of the pool
     * may be served on the strength of it. */
    if (!c->dedicated && c->state != PX_CONN_DOWN && s->track.id != 0) {
        ch__near_invalidate_all(pool->shared->near_gens);
        pool->m.track.flushes++;
        px_ctrack_flush(pool->ctrack); /* its tracking clients' reads went over it too */
    }
    c->state = PX_CONN_DOWN;
    px_buf_free(&c->rbuf);
    px_buf_free(&c->wbuf);
    join_reset(&c->join); /* its fragments fail below */
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
    else if (why == WHY_LOCAL)
        snprintf(what, sizeof(what), "not reached: the proxy is out of resources (%s)", reason);
    else
        snprintf(what, sizeof(what), "unavailable (%s)", reason);
    if (why == WHY_LOCAL) {
        if (px_log_due(&pool->fd_log_at, px_io_now(px), PX_FD_LOG_PERIOD_MS)) {
            PX_LOG(px, PX_LOG_WARN, "pool %s: cannot connect to server %s: %s; the server is not "
                   "blamed (%llu more refusals or pauses not logged)", pool->conf->name,
                   server_name(s), reason, (unsigned long long)pool->fd_unlogged);
            pool->fd_unlogged = 0;
        } else {
            pool->fd_unlogged++;
        }
    } else if (why != WHY_STOP && had_work) {
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
    if (c->dedicated && !c->disposed) { /* never reopened: its owner is told, then it goes */
        if (!c->released && c->owner.closed != NULL) {
            c->released = true;
            c->owner.closed(c->owner.ctx, c, what);
        }
        dedicated_dispose(c);
    }
}

/* ---- dedicated connections ---------------------------------------------------------------------- */

static void dedicated_free_cb(uv_handle_t *h)
{
    px_conn *c = h->data;
    px_buf_free(&c->wbuf);
    px_buf_free(&c->rbuf);
    join_free(&c->join);
    px_tls_session_free(c->tls_session);
    free(c);
}

/* Closes c for good: out of its server's list at once, freed once its timer has closed (so a
 * caller up the stack, conn_scan, may still look at it until it returns). */
static void dedicated_dispose(px_conn *c)
{
    if (c->disposed)
        return;
    c->disposed = true;
    c->released = true;
    conn_fail(c, WHY_STOP, "released");
    px_server *s = c->server;
    for (px_conn **p = &s->dedicated; *p != NULL; p = &(*p)->next_dedicated) {
        if (*p == c) {
            *p = c->next_dedicated;
            break;
        }
    }
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, dedicated_free_cb);
}

px_conn *px_conn_dedicated(px_server *s, uint8_t dialect, const px_conn_owner *owner)
{
    if (s->retired || s->pool->io->stopping)
        return NULL;
    px_conn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->server = s;
    c->dialect = dialect < s->nconns / s->nper ? dialect : 0u;
    c->flush.flush = conn_flush_cb;
    c->dedicated = true;
    c->owner = *owner;
    uv_timer_init(s->pool->io->loop, &c->timer);
    c->timer.data = c;
    c->next_dedicated = s->dedicated;
    s->dedicated = c;
    if (conn_open(c) < 0) {
        c->released = true; /* its owner has not got it: not told */
        dedicated_dispose(c);
        return NULL;
    }
    return c;
}

int px_conn_send(px_conn *c, px_frag *f, px_encode_fn enc, void *arg)
{
    c->join.open = false; /* a dedicated connection does not join */
    size_t before = c->wbuf.len;
    uint8_t expect = 0;
    if (enc(arg, &c->wbuf, f != NULL ? &f->expect : &expect) != 0) {
        c->wbuf.len = before;
        return -1;
    }
    if (f != NULL) {
        f->len = c->wbuf.len - before;
        conn_enqueue(c, f);
    } else if (c->state == PX_CONN_UP) {
        conn_mark(c);
    }
    return 0;
}

void px_conn_release(px_conn *c)
{
    if (c == NULL || c->released)
        return;
    c->released = true;
    if (c->head == NULL)
        dedicated_dispose(c);
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

/* ---- sending -------------------------------------------------------------------------------------- */

int px_server_send(px_server *s, px_frag *f, px_encode_fn enc, void *arg)
{
    unsigned kind = f->dialect < s->nconns / s->nper ? f->dialect : 0u;
    px_conn *c = &s->conns[kind * s->nper + f->cid % s->nper];
    if (c->state == PX_CONN_DOWN) {
        int rc = conn_open(c);
        if (rc < 0) {
            /* Counted as a failure like a refused connect. */
            c->head = c->tail = f;
            f->next = NULL;
            c->nfrags = 1;
            c->bytes = f->len = 0;
            c->state = PX_CONN_CONNECTING;
            conn_fail(c, local_error(rc) ? WHY_LOCAL : WHY_ERR, uv_strerror(rc));
            return 0;
        }
    }
    size_t before = c->wbuf.len;
    if (enc(arg, &c->wbuf, &f->expect) != 0) {
        c->wbuf.len = before;
        return -1;
    }
    f->len = c->wbuf.len - before;
    f->joined = false;
    conn_join(c, f, before);
    conn_enqueue(c, f);
    return 0;
}

static int encode_probe(void *arg, px_buf *out, uint8_t *expect)
{
    const px_pool *pool = arg;
    return pool->codec->encode_probe(out, expect);
}

void px_probe_due(px_pool *pool)
{
    px_io *px = pool->io;
    uint64_t now = px_io_now(px);
    for (size_t i = 0; i < pool->nservers; i++) {
        px_server *s = &pool->servers[i];
        if (s->probing || !px_health_probe_claim(pool->health, i, now))
            continue;
        px_frag *f = px_frag_new(0);
        if (f == NULL) {
            px_health_probe_drop(pool->health, i);
            return;
        }
        s->probing = true;
        PX_LOG(px, PX_LOG_INFO, "pool %s: probing server %s", pool->conf->name, server_name(s));
        f->kind = PX_FRAG_PROBE;
        f->cid = 0; /* the first connection */
        if (px_server_send(s, f, encode_probe, pool) != 0) {
            s->probing = false;
            px_health_probe_drop(pool->health, i);
            px_frag_free(f);
            return;
        }
    }
}

void px_server_preconnect(px_server *s)
{
    for (unsigned i = 0; i < s->nper; i++) /* kind 0's: the others when a client needs them */
        if (s->conns[i].state == PX_CONN_DOWN && conn_open(&s->conns[i]) < 0)  /* not blamed */
            PX_LOG(s->pool->io, PX_LOG_WARN, "pool %s: cannot preconnect to server %s",
                   s->pool->conf->name, server_name(s));
}

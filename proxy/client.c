/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client.c — client connections: reading, framing requests with the pool's codec and handing
 * each to px_dispatch; the per-client queue that puts replies back in request order; output
 * buffering and its limit; backpressure; closing. No command names and no protocol bytes here.
 *
 * Invariants:
 * - c->head..c->tail holds the client's requests in arrival order; a reply leaves only from the
 *   head, so a pipeline spanning several backends is answered in order.
 * - c->stored + c->wbuf.len + c->inflight is every reply byte the proxy holds for the client
 *   (client_held). Beyond the pool's max_client_buffer (max_client_buffer_bytes) the proxy
 *   stops reading the client's requests (no new replies are asked for), and closes it only if
 *   it has also taken no byte for PX_CLIENT_STALL_MS: a client that never reads is closed, one
 *   reading a reply larger than the limit as fast as it can never is.
 * - A client struct lives until its stream's close callback; requests still waiting for
 *   backends then lose their owner (rq->owner = NULL) and are freed when they complete.
 */
#include "client.h"
#include "client_track.h"
#include "dispatch.h"
#include "near_write.h"
#include "proto/mc_bin.h"
#include "redir.h"
#include "roster.h"
#include "tls.h"
#include "track.h"

#include <netinet/in.h>
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

/* Backpressure: a client with this many requests (PX_MAX_CLIENT_REQUESTS), or this many of
 * their bytes (max_client_inflight_bytes; a single request of any size up to max_request_bytes
 * still passes), waiting for backends is not read until they drain (client_flush resumes it),
 * so one pipelining client cannot queue unbounded work or memory on the backend connections it
 * shares with everyone else (128 pipelined 16 MiB SETs to a stopped backend held 2.5 GB). Reply bytes do not pause it: a client that
 * does not read its replies is closed at the pool's max_client_buffer instead. */
static bool client_busy(const px_client *c)
{
    return c->nreqs >= PX_MAX_CLIENT_REQUESTS ||
           (c->nreqs > 0 && c->inflight_bytes >= c->pool->max_client_inflight);
}

/* Whether rq's reply goes to the client: not when the client asked for none (CLIENT REPLY). */
static bool replied(const px_rq *rq)
{
    return (rq->msg.flags & PX_MSG_SILENT) == 0;
}

/* Counts rq, whose reply is complete, once: class, error or not, latency. */
static void count_request(px_rq *rq)
{
    if (rq->observed)
        return;
    rq->observed = true;
    px_count_request(&rq->pool->m, rq->cls, rq->error, px_io_hrtime(rq->pool->io) - rq->t0);
}

/* ---- the queue --------------------------------------------------------------------------------- */

static size_t client_held(const px_client *c)
{
    return c->stored + c->wbuf.len + c->inflight;
}

/* Over max_client_buffer: stop reading its requests (client_flush resumes once it is back
 * under); the sweep closes it if it takes nothing meanwhile (client_stalled). */
static void client_over_limit(px_client *c)
{
    if (client_held(c) <= c->pool->max_client_buffer || c->closing || c->paused)
        return;
    px_stream_read_stop(c->stream);
    c->paused = true;
}

/* Held over the limit and nothing taken for PX_CLIENT_STALL_MS: closed. */
static bool client_stalled(px_client *c, uint64_t now)
{
    if (client_held(c) <= c->pool->max_client_buffer || now - c->last_write_ms < PX_CLIENT_STALL_MS)
        return false;
    PX_LOG(c->pool->io, PX_LOG_WARN,
           "pool %s: client %llu holds over %zu reply bytes and has read none for %u ms: "
           "closing it",
           c->pool->conf->name, (unsigned long long)c->id, c->pool->max_client_buffer,
           PX_CLIENT_STALL_MS);
    c->pool->stats.client_err++;
    px_client_close(c);
    return true;
}

/* rq's reply is complete (request.c's on_done): move replies from the head of the queue to the
 * output while the head is done. */
static void client_track_owed(px_client *c);

/* rq's reply into the client's output: as it is, or translated into its binary response (a
 * binary memcached client's: the one place its replies are written, whatever made them). */
static int client_put(px_client *c, const px_rq *rq)
{
    if ((rq->msg.edge[1] & PX_MCB_E_BINARY) != 0)
        return px_mcb_reply(&c->wbuf, &rq->msg, rq->reply.p, rq->reply.len);
    return px_buf_append(&c->wbuf, rq->reply.p, rq->reply.len);
}

static void client_rq_done(px_rq *rq)
{
    px_client *c = rq->owner;
    count_request(rq);
    if (c->closing)
        return; /* the close callback frees it */
    /* A tracking client's read that some server did not track (client_track.h): a flush is
     * owed, sent once rq is in the queue's order (below: a push queued now goes after it). */
    if (rq->ctrack && !rq->error && (rq->ctrack_lost || !rq->ctrack_sent))
        c->track_owed = true;
    if (rq != c->head) {
        rq->counted = true;
        c->stored += rq->reply.len;
        client_over_limit(c);
        client_track_owed(c);
        return;
    }
    while (c->head != NULL && c->head->done) {
        px_rq *h = c->head;
        c->head = h->next;
        if (c->head == NULL)
            c->tail = NULL;
        c->nreqs--;
        c->inflight_bytes -= h->msg.len;
        if (h->counted)
            c->stored -= h->reply.len;
        if (c->head != NULL && replied(c->head) && !c->binary)
            c->head->out = &c->wbuf; /* the new head's reply goes straight to the output */
        bool close_after = h->close_after;
        int rc = h->direct || !replied(h) ? 0 : client_put(c, h);
        px_rq_free(h);
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
    client_over_limit(c);
    client_track_owed(c);
}

/* A new request for m at the tail of the queue; NULL when out of memory. */
static px_rq *client_rq(px_client *c, const px_msg *m)
{
    px_rq *rq = px_rq_new(c->pool, m, c->id);
    if (rq == NULL)
        return NULL;
    rq->owner = c;
    rq->on_done = client_rq_done;
    if (c->tail != NULL) {
        c->tail->next = rq;
    } else {
        c->head = rq;
        if (replied(rq) && !c->binary)
            rq->out = &c->wbuf; /* at the head: its reply goes straight to the output */
    }
    c->tail = rq;
    c->nreqs++;
    c->inflight_bytes += rq->msg.len;
    return rq;
}

/* ---- the session's hooks ---------------------------------------------------------------------- */

/* A pub/sub message: queued as an answered request, so it leaves after every reply before it.
 * Not a request in the metrics. */
static void client_emit(void *arg, const char *p, size_t len)
{
    px_client *c = arg;
    if (c->closing)
        return;
    px_msg none = {.raw = "", .args = NULL, .keys = NULL};
    px_rq *rq = client_rq(c, &none);
    if (rq == NULL) {
        px_client_close(c);
        return;
    }
    rq->observed = true;
    px_rq_finish(rq, p, len, false);
}

/* ---- client-side caching (client_track.h) ---------------------------------------------------- */

/* An invalidation owed to c (px_ctrack_push): a push queued as a message (client_emit). */
static void client_track_push(void *arg, const char *key, size_t len)
{
    px_client *c = arg;
    px_buf b = {0};
    if (c->closing)
        return;
    if (c->track_redir != 0) { /* to its target, maybe on another worker (redir.h) */
        bool resp3 = c->dialect == PX_DIALECT_RESP3;
        if (px_redir_post(c->pool->shared->redir, c->track_redir, key, len, resp3))
            return;
        c->redir_broken = true; /* Redis: a RESP3 client is told, each time */
        if (!resp3)
            return;
        if (c->pool->codec->encode_redir_broken(&b, c->track_redir) != 0) {
            px_buf_free(&b);
            px_client_close(c);
            return;
        }
        client_emit(c, b.p, b.len);
        px_buf_free(&b);
        return;
    }
    if (c->pool->codec->encode_invalidation(&b, key, len) != 0) {
        px_buf_free(&b);
        px_client_close(c); /* an invalidation it may not miss */
        return;
    }
    client_emit(c, b.p, b.len);
    px_buf_free(&b);
}

void px_client_redir_deliver(void *client, const char *key, size_t len, bool null_resp3)
{
    px_client *c = client;
    px_buf b = {0};
    if (c->closing)
        return;
    if (c->pool->codec->encode_redirected(&b, c->dialect, px_session_subscribed(c->session), key,
                                          len, null_resp3) != 0) {
        px_buf_free(&b);
        px_client_close(c); /* an invalidation it may not miss */
        return;
    }
    if (b.len > 0)
        client_emit(c, b.p, b.len);
    px_buf_free(&b);
}

/* REDIRECT's check (px_local.client_exists): id is a client of c's pool now. */
static bool client_exists(void *arg, uint64_t id)
{
    px_client *c = arg;
    return px_redir_exists(c->pool->shared->redir, id);
}

/* The flush owed for a read that was not tracked, outside client_rq_done's loop (the push is
 * a request of the queue: its completion runs client_rq_done again). */
static void client_track_owed(px_client *c)
{
    if (!c->track_owed || c->closing)
        return;
    c->track_owed = false;
    px_ctrack_untracked(c->pool->ctrack, c->track);
}

/* Why c's pool cannot serve CLIENT TRACKING (px_local.track_refused), or NULL: it can when the
 * servers' invalidations reach this worker (a Redis pool with hot_cache and near_tracking) and
 * no server refused tracking. A link down for now is no refusal: reads sent meanwhile are not
 * tracked, and each is followed by a flush. */
static const char *track_refusal(const px_pool *pool)
{
    if (pool->codec->encode_invalidation == NULL)
        return "chash-proxy: this pool's protocol has no client-side caching";
    if (!px_track_wanted(pool))
        return "chash-proxy serves CLIENT TRACKING on a pool whose servers' invalidations it "
               "receives: a Redis pool with hot_cache and near_tracking (on by default)";
    for (size_t i = 0; i < pool->nservers; i++)
        if (pool->servers[i].track.state == PX_TRACK_REFUSED)
            return "chash-proxy: a server of this pool refused CLIENT TRACKING (older than "
                   "Redis 6, or an ACL): client-side caching is not served";
    return NULL;
}

/* CLIENT TRACKING on or off (to), answered OK already; BCAST's prefixes, when ctx gives them,
 * as spans of raw. 0, or -1 when out of memory. */
static int client_track_set(px_client *c, uint8_t to, const px_local *ctx, const char *raw)
{
    px_pool *pool = c->pool;
    c->track_caching = false;
    c->track_redir = to != PX_TRACKING_OFF && ctx != NULL ? ctx->redirect_to : 0;
    c->redir_broken = false;
    if (to == PX_TRACKING_OFF) {
        px_ctrack_off(pool->ctrack, c->track);
        c->track = 0;
    } else if (c->track == 0) {
        if (pool->ctrack == NULL && (pool->ctrack = px_ctrack_new()) == NULL)
            return -1;
        if ((c->track = px_ctrack_on(pool->ctrack, client_track_push, c)) == 0)
            return -1;
    }
    if ((to & PX_TRACKING_BCAST) && ctx != NULL) {
        const char *p[PX_TRACKING_PREFIXES];
        uint32_t len[PX_TRACKING_PREFIXES];
        for (size_t i = 0; i < ctx->nprefix_to; i++) {
            p[i] = raw + ctx->prefix_to[i].off;
            len[i] = ctx->prefix_to[i].len;
        }
        if (px_ctrack_bcast_on(pool->ctrack, c->track, p, len, ctx->nprefix_to) != 0)
            return -1;
    }
    c->tracking = to;
    return 0;
}

/* Before rq of a tracking client is dispatched: a read's keys are recorded and it is marked
 * to go tracked (px_rq.ctrack); a write of a NOLOOP client forgets its keys for it (Redis sends
 * no invalidation for a NOLOOP client's own write, and stops tracking the key for it). A
 * transaction's or a subscription's command is not a read the links can track: a read inside
 * a transaction is flushed after (never sent tracked). OPTIN: only a read right after CLIENT
 * CACHING yes (caching) is tracked; OPTOUT: every read but one right after CLIENT CACHING no.
 * Cost: a hash and a probe run per key. */
static void client_track_request(px_client *c, px_rq *rq, bool caching)
{
    const px_cmd *cmd = rq->msg.cmd;
    if (c->track == 0 || cmd == NULL || cmd->cls == PX_CLASS_LOCAL || rq->msg.nkeys == 0 ||
        (cmd->session != PX_SES_NONE))
        return;
    bool write = px_near_writes(rq);
    if (c->tracking & PX_TRACKING_BCAST) { /* nothing recorded: its server broadcasts */
        rq->ctrack = rq->ctrack_bcast = !write;
        return;
    }
    if (write && (c->tracking & PX_TRACKING_NOLOOP) == 0)
        return;
    if (!write && ((c->tracking & PX_TRACKING_OPTIN) ? !caching
                                                       : (c->tracking & PX_TRACKING_OPTOUT) &&
                                                             caching))
        return; /* a read the client does not cache: nothing owed to it */
    if (!write)
        rq->ctrack = true;
    for (size_t k = 0; k < rq->msg.nkeys; k++) {
        uint64_t h;
        if (!px_rq_key_hash(rq, k, &h)) { /* a key too long to hash: not recorded */
            rq->ctrack_lost = !write;
            continue;
        }
        if (write)
            px_ctrack_forget(c->pool->ctrack, c->track, h);
        else
            px_ctrack_read(c->pool->ctrack, c->track, h);
    }
}

static void client_hook_close(void *arg)
{
    px_client *c = arg;
    c->pool->stats.client_err++;
    px_client_close(c);
}

/* ---- the connection's own facts (HELLO, CLIENT) ------------------------------------------ */

/* CLIENT LIST and INFO (px_local.clients): the pool's roster, or c's card alone. */
static int client_list(void *arg, bool self, px_buf *out)
{
    px_client *c = arg;
    px_roster *r = c->pool->shared->roster;
    if (r == NULL || c->card == NULL)
        return -1;
    return px_roster_text(r, self ? c->card : NULL, px_io_now(c->pool->io), out);
}

/* What a request set on the connection (ctx, its spans into raw): its name, library, protocol
 * and reply mode. 0, or -1 when out of memory. */
static int client_apply(px_client *c, const px_local *ctx, const char *raw)
{
    px_roster *r = c->pool->shared->roster;
    c->reply_mode = (uint8_t)ctx->reply_mode;
    if (ctx->dialect != c->dialect) {
        c->dialect = ctx->dialect;
        if (c->card != NULL)
            px_card_set_resp(r, c->card, ctx->dialect == PX_DIALECT_RESP3 ? 3u : 2u);
    }
    struct {
        bool set;
        px_card_field f;
        px_span to;
    } sets[] = {{ctx->set_name, PX_CARD_NAME, ctx->name_to},
                {ctx->set_lib_name, PX_CARD_LIB_NAME, ctx->lib_name_to},
                {ctx->set_lib_ver, PX_CARD_LIB_VER, ctx->lib_ver_to}};
    for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++)
        if (sets[i].set && (c->card == NULL ||
                            px_card_set(r, c->card, sets[i].f, raw + sets[i].to.off,
                                        sets[i].to.len) != 0))
            return -1;
    return 0;
}

/* ---- the AUTH guard ----------------------------------------------------------------------------- */

/* The guard slot of addr (a slot is reused by another address once its window is over). */
static px_auth_guard *auth_guard(px_pool *pool, uint64_t addr, uint64_t now)
{
    px_auth_guard *g = &pool->auth_guard[addr % PX_AUTH_GUARD_SLOTS];
    if (g->addr != addr || now - g->since >= PX_AUTH_WINDOW_MS)
        *g = (px_auth_guard){.addr = addr, .since = now};
    return g;
}

static bool auth_blocked(px_client *c)
{
    px_auth_guard *g = auth_guard(c->pool, c->addr_hash, px_io_now(c->pool->io));
    return g->fails >= PX_AUTH_ADDR_FAILS;
}

/* A wrong password from c: counted for its address and its connection; the connection is to
 * close (after this reply) once it has failed PX_AUTH_CONN_FAILS times in a row. */
static void auth_failure(px_client *c)
{
    px_pool *pool = c->pool;
    uint64_t now = px_io_now(pool->io);
    px_auth_guard *g = auth_guard(pool, c->addr_hash, now);
    g->fails++;
    if (++c->auth_fails >= PX_AUTH_CONN_FAILS || g->fails == PX_AUTH_ADDR_FAILS) {
        if (px_log_due(&pool->fd_log_at, now, PX_FD_LOG_PERIOD_MS))
            PX_LOG(pool->io, PX_LOG_WARN,
                   "pool %s: client %llu: %u wrong passwords (%u from its address in %u s): "
                   "closing it", pool->conf->name, (unsigned long long)c->id, c->auth_fails,
                   g->fails, PX_AUTH_WINDOW_MS / 1000u);
        c->draining = true;
    }
}

/* A hash of the peer's address without its port (FNV-1a over the address bytes). */
static uint64_t peer_hash(uv_stream_t *s)
{
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    uint64_t h = 14695981039346656037ULL;
    if (s->type != UV_TCP || uv_tcp_getpeername((uv_tcp_t *)s, (struct sockaddr *)&ss, &len) != 0)
        return h;
    const unsigned char *p = NULL;
    size_t n = 0;
    if (ss.ss_family == AF_INET) {
        p = (const unsigned char *)&((struct sockaddr_in *)&ss)->sin_addr;
        n = 4;
    } else if (ss.ss_family == AF_INET6) {
        p = (const unsigned char *)&((struct sockaddr_in6 *)&ss)->sin6_addr;
        n = 16;
    }
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

/* ---- reading ----------------------------------------------------------------------------------- */

static void client_alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)hint;
    px_client *c = PX_CONTAINER(h, px_stream, u)->owner;
    px_read_alloc(&c->rbuf, c->need, buf);
}

static void client_read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    px_client *c = PX_CONTAINER(stream, px_stream, u)->owner;
    if (c->closing || nread == 0)
        return;
    if (nread < 0) {
        px_stream_read_stop(c->stream);
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
    c->last_read_ms = px_io_now(c->pool->io);
    px_io *io = c->pool->io;
    uint64_t was = px_io_read_begin(io);
    client_process(c); /* c may be gone */
    px_io_read_end(io, was);
}

/* Grows the pool's parser arrays to hold m's arguments and keys. 0, or -1. */
static int grow_arrays(px_pool *pool, const px_msg *m)
{
    if (m->nargs > pool->args_cap) {
        px_span *a = realloc(pool->args, m->nargs * sizeof(*a));
        if (a == NULL)
            return -1;
        pool->args = a;
        pool->args_cap = m->nargs;
    }
    if (m->nkeys > pool->keys_cap) {
        px_span *k = realloc(pool->keys, m->nkeys * sizeof(*k));
        if (k == NULL)
            return -1;
        pool->keys = k;
        pool->keys_cap = m->nkeys;
    }
    return 0;
}

/* The client is answered with a client error (the codec's framing) after its earlier replies,
 * and closed: it sent what cannot be framed, or did not finish a request in time. Its reading
 * stops; what it sent beyond is dropped. */
static void client_fail(px_client *c, const char *err)
{
    c->pool->stats.client_err++;
    px_stream_read_stop(c->stream);
    c->draining = true;
    px_msg none = {.raw = "", .args = NULL, .keys = NULL};
    if (c->binary)
        none.edge[1] = PX_MCB_E_BINARY; /* its error as a binary response */
    px_rq *rq = client_rq(c, &none);
    if (rq == NULL) {
        px_client_close(c);
        return;
    }
    rq->close_after = true;
    px_rq_fail(rq, PX_ERR_CLIENT, err);
}

static void client_protocol_error(px_client *c, const char *err)
{
    PX_LOG(c->pool->io, PX_LOG_INFO, "pool %s: client %llu: %s: closing it", c->pool->conf->name,
           (unsigned long long)c->id, err);
    client_fail(c, err);
}

/* The process holds more than its memory budget (--max-memory): a request that would go to a
 * backend is answered with an error at once, in its place in the client's queue, without a copy
 * of it; local commands are still answered. Logged once per pool per 10 s. */
static void memory_refusal(px_client *c, const px_msg *m)
{
    px_pool *pool = c->pool;
    pool->m.mem_refused++;
    if (px_log_due(&pool->mem_log_at, px_io_now(pool->io), PX_FD_LOG_PERIOD_MS))
        PX_LOG(pool->io, PX_LOG_WARN,
               "pool %s: memory budget reached (%llu MiB held, --max-memory %llu MiB): "
               "refusing requests until it drains",
               pool->conf->name,
               (unsigned long long)(__atomic_load_n(&px_mem_held, __ATOMIC_RELAXED) >> 20),
               (unsigned long long)(px_mem_budget >> 20));
    px_msg none = {.raw = "", .args = NULL, .keys = NULL, .edge_keys = m->edge_keys,
                   .edge_keys_len = m->edge_keys_len}; /* a binary run's: each get answered */
    memcpy(none.edge, m->edge, sizeof(none.edge));
    px_rq *rq = client_rq(c, &none);
    if (rq == NULL) {
        px_client_close(c);
        return;
    }
    px_rq_fail(rq, PX_ERR_SERVER,
               "chash-proxy is over its memory budget (--max-memory): request refused");
}

/* A binary memcached client's request at rbuf[off]: a run of quiet gets as one gets request
 * (px_mcb_batch; m->edge_keys: each get's opcode and opaque, in c->bin_keys), or one frame
 * translated into a meta request, in c->bin, parsed from there into m by the pool's codec
 * (m->edge set: its reply is translated back, client_put), its *consumed the frames'. Or
 * answered at the edge (an unknown opcode, a bad frame, SASL, a command before
 * authentication): 1. Else BIN_PARSED + the px_parse of the request (PX_PARSE_AGAIN with
 * *need). -1 when out of memory. */
enum { BIN_PARSED = 10 };

/* Whether binary request f may be served now: a pool with client_auth_file serves only
 * version, noop, quit and SASL before authentication (memcached -S serves version and SASL). */
static bool client_bin_allowed(const px_client *c, const px_mcb_frame *f)
{
    if (c->pool->mc_users == NULL || c->authed)
        return true;
    return f->opcode == PX_MCB_OP_VERSION || f->opcode == PX_MCB_OP_NOOP ||
           f->opcode == PX_MCB_OP_QUIT || f->opcode == PX_MCB_OP_QUITQ;
}

/* A SASL request f (list mechanisms, auth, step) answered into c->bin, as memcached -S
 * answers: the mechanisms ("PLAIN"); "Authenticated", or "Auth failure." (0x20) for wrong
 * credentials, counted by the same guard as Redis's AUTH (auth_failure: the connection closes
 * after too many, and an address over its share is refused without a compare); a step, which
 * PLAIN never needs, "Auth failure.". Without client_auth_file, memcached without SASL:
 * "Unknown command". 0, or -1. */
static int client_sasl(px_client *c, const px_mcb_frame *f)
{
    const px_mcb_users *users = c->pool->mc_users;
    c->bin.len = 0;
    uint16_t st = PX_MCB_AUTH_ERROR;
    const char *text = "Auth failure.";
    if (users == NULL) {
        st = PX_MCB_UNKNOWN_COMMAND;
        text = "Unknown command";
    } else if (f->opcode == PX_MCB_OP_SASL_LIST) {
        st = PX_MCB_OK;
        text = "PLAIN";
    } else if (f->opcode == PX_MCB_OP_SASL_AUTH) {
        px_span u, p;
        bool blocked = auth_blocked(c);
        if (!blocked && px_mcb_sasl_plain(f, &u, &p) &&
            px_mcb_users_check(users, f->value + u.off, u.len, f->value + p.off, p.len)) {
            c->authed = true;
            c->auth_fails = 0;
            st = PX_MCB_OK;
            text = "Authenticated";
        } else if (!blocked) {
            auth_failure(c);
        }
    }
    return px_mcb_response(&c->bin, f->opcode, f->opaque, st, 0, NULL, 0, NULL, 0, text,
                           strlen(text));
}

/* The translation in c->bin parsed into m by the pool's codec, m->edge set: BIN_PARSED + the
 * px_parse. The translation is always whole: never more to wait for. */
static int client_bin_parse(px_client *c, px_msg *m, const uint8_t edge[8], size_t *need,
                            char *err, size_t errlen)
{
    const px_pool *pool = c->pool;
    size_t tconsumed = 0;
    px_parse rs = pool->codec->parse_request(&pool->limits, c->bin.p, c->bin.len, m, &tconsumed,
                                             need, err, errlen);
    if (rs == PX_PARSE_AGAIN || (rs == PX_PARSE_OK && tconsumed != c->bin.len)) {
        snprintf(err, errlen, "untranslatable request");
        rs = PX_PARSE_BAD;
    }
    memcpy(m->edge, edge, sizeof(m->edge));
    return BIN_PARSED + rs;
}

/* A run of quiet gets goes as one request of at most this many keys and this long a get line:
 * a multi-get's worth (libmemcached's mget sends a getkq per key), its merge bounded. */
enum { BIN_BATCH_KEYS = 128, BIN_BATCH_LINE = 16384 };

static int client_binary(px_client *c, size_t off, px_msg *m, size_t *consumed, size_t *need,
                         char *err, size_t errlen)
{
    px_pool *pool = c->pool;
    px_mcb_frame f;
    uint8_t edge[8];
    c->bin.len = 0;
    long batch = pool->mc_users == NULL || c->authed
                     ? px_mcb_batch(c->rbuf.p + off, c->rbuf.len - off, BIN_BATCH_KEYS,
                                    BIN_BATCH_LINE, &c->bin, &c->bin_keys, consumed, edge)
                     : 0;
    if (batch < 0)
        return -1;
    if (batch > 0) {
        int rs = client_bin_parse(c, m, edge, need, err, errlen);
        m->flags |= PX_MSG_KEYWISE;
        m->edge_keys = (const uint8_t *)c->bin_keys.p;
        m->edge_keys_len = c->bin_keys.len;
        return rs;
    }
    px_mcb_verdict v = px_mcb_request(c->rbuf.p + off, c->rbuf.len - off, pool->limits.max_request,
                                      &f, consumed, need, &c->bin, &c->bin, edge);
    if (v == PX_MCB_NOMEM)
        return -1;
    if (v == PX_MCB_AGAIN)
        return BIN_PARSED + PX_PARSE_AGAIN;
    if (v == PX_MCB_SASL && client_sasl(c, &f) != 0)
        return -1;
    if (v == PX_MCB_FORWARD && !client_bin_allowed(c, &f)) {
        /* memcached: "Auth failure." before authentication, and the close */
        c->bin.len = 0;
        edge[1] |= PX_MCB_E_ANSWERED;
        f.close = true;
        if (px_mcb_response(&c->bin, f.opcode, f.opaque, PX_MCB_AUTH_ERROR, 0, NULL, 0, NULL, 0,
                            "Auth failure.", 13) != 0)
            return -1;
        v = PX_MCB_ANSWER;
    }
    if (v != PX_MCB_FORWARD) {
        px_msg ans = {.raw = "", .args = NULL, .keys = NULL};
        memcpy(ans.edge, edge, sizeof(ans.edge));
        ans.edge[1] |= PX_MCB_E_ANSWERED;
        px_rq *rq = client_rq(c, &ans);
        if (rq == NULL)
            return -1;
        rq->observed = true;
        if (f.close) {
            rq->close_after = true;
            c->draining = true;
            pool->stats.client_err++;
        }
        px_rq_finish(rq, c->bin.p, c->bin.len, v == PX_MCB_ANSWER);
        return 1;
    }
    return client_bin_parse(c, m, edge, need, err, errlen);
}

/* Frames and dispatches every complete request in the buffer. */
static void client_process(px_client *c)
{
    px_pool *pool = c->pool;
    size_t off = 0;
    while (!c->closing && !c->draining && c->rbuf.len > off && c->rbuf.len >= c->need) {
        if (client_busy(c)) {
            /* Backpressure: resume when the queue drains (client_flush). */
            px_stream_read_stop(c->stream);
            c->paused = true;
            break;
        }
        px_msg m = {.args = pool->args, .args_cap = pool->args_cap, .keys = pool->keys,
                    .keys_cap = pool->keys_cap};
        size_t consumed = 0, need = 0;
        char err[160];
        err[0] = '\0'; /* not the whole array: this runs once per request */
        if (c->binary == 0 && c->text == 0) { /* decided by its first byte, for its life */
            c->binary = pool->codec == &px_codec_memcache &&
                        px_mcb_is_binary((unsigned char)c->rbuf.p[off]);
            c->text = !c->binary;
        }
        px_parse rs;
        if (c->binary) {
            int b = client_binary(c, off, &m, &consumed, &need, err, sizeof(err));
            if (b < 0) {
                px_client_close(c);
                return;
            }
            if (b == 1) { /* answered at the edge */
                off += consumed;
                continue;
            }
            rs = (px_parse)(b - BIN_PARSED);
        } else {
            rs = pool->codec->parse_request(&pool->limits, c->rbuf.p + off, c->rbuf.len - off, &m,
                                            &consumed, &need, err, sizeof(err));
        }
        if (rs == PX_PARSE_AGAIN) {
            c->need = off + need;
            break;
        }
        if (rs == PX_PARSE_OK && (m.nargs > m.args_cap || m.nkeys > m.keys_cap)) {
            if (grow_arrays(pool, &m) == 0)
                continue; /* parse it again with room for every argument and key */
            rs = PX_PARSE_TOO_BIG;
            snprintf(err, sizeof(err), "out of memory");
        }
        if (rs != PX_PARSE_OK) {
            client_protocol_error(c, err[0] ? err : "Protocol error");
            off = c->rbuf.len;
            break;
        }
        c->need = 0;
        off += consumed;
        if (m.nargs == 0)
            continue; /* an empty inline line */
        m.dialect = c->dialect;
        /* CLIENT REPLY OFF, or SKIP for this one request: served, its reply dropped. */
        bool silent = c->reply_mode != PX_REPLIES_ON;
        if (c->reply_mode == PX_REPLIES_SKIP)
            c->reply_mode = PX_REPLIES_ON;
        if (silent)
            m.flags |= PX_MSG_SILENT;
        if (c->card != NULL)
            px_card_touch(c->card, m.cmd != NULL ? m.cmd->name : NULL, c->last_read_ms);
        if (px_mem_over() && m.cmd != NULL && m.cmd->cls != PX_CLASS_LOCAL) {
            memory_refusal(c, &m);
            continue;
        }
        px_rq *rq = client_rq(c, &m);
        if (rq == NULL) {
            px_client_close(c);
            return;
        }
        /* A memcached pool with client_auth_file: its text clients cannot authenticate
         * (CLIENT_ERROR unauthenticated, memcached's words); its binary ones were let through by SASL */
        const char *password = pool->mc_users == NULL ? pool->client_password
                               : c->binary          ? NULL
                                                    : "";
        px_local ctx = {.password = password, .authed = c->authed,
                        .auth_blocked = password != NULL && auth_blocked(c),
                        .info = pool->info, .info_arg = pool->info_arg, .id = c->id,
                        .dialect = c->dialect, .pinned = px_session_pinned(c->session),
                        .reply_mode = (px_reply_mode)c->reply_mode, .silent = silent,
                        .clients = client_list, .clients_arg = c,
                        .tracking = c->tracking, .caching = c->track_caching,
                        .redirect = c->track_redir, .redirect_broken = c->redir_broken,
                        .client_exists = client_exists};
        /* CLIENT CACHING's choice is this command's, whatever it is (Redis keeps it past
         * other CLIENT subcommands and inside MULTI; chash-proxy does not) */
        c->track_caching = false;
        if (c->card != NULL)
            ctx.name = px_card_name(c->card, &ctx.name_len);
        if (m.cmd != NULL && m.cmd->cls == PX_CLASS_LOCAL) {
            ctx.track_refused = track_refusal(pool);
            ctx.nprefixes = px_ctrack_prefixes(pool->ctrack, c->track, &ctx.prefixes,
                                               &ctx.prefix_lens);
        } else
            client_track_request(c, rq, ctx.caching);
        px_session_hooks hooks = {.emit = client_emit, .close = client_hook_close, .arg = c};
        px_dispatch(rq, &ctx, &c->session, &hooks); /* rq may be gone */
        /* HELLO 2 ends its in-band tracking: RESP2 has no pushes to carry the invalidations */
        if (client_apply(c, &ctx, m.raw) != 0 ||
            (ctx.track_set && client_track_set(c, ctx.track_to, &ctx, m.raw) != 0) ||
            (c->track != 0 && c->dialect != PX_DIALECT_RESP3 && c->track_redir == 0 &&
             client_track_set(c, PX_TRACKING_OFF, NULL, NULL) != 0)) {
            px_client_close(c);
            return;
        }
        c->track_caching = ctx.caching_set && c->track != 0;
        c->authed = ctx.authed;
        if (ctx.authed)
            c->auth_fails = 0;
        if (ctx.auth_failed)
            auth_failure(c);
        if (ctx.close)
            c->draining = true;
    }
    if (c->draining && !c->closing)
        px_stream_read_stop(c->stream);
    px_buf_consume(&c->rbuf, off);
    c->need = c->need > off ? c->need - off : 0;
    if (c->rbuf.len == 0 && c->rbuf.cap > PX_BUF_KEEP)
        px_buf_free(&c->rbuf); /* a huge request's buffer is not kept */
    /* The read timeout runs from the first byte of a request still incomplete: restarted by
     * every request that completes, stopped when nothing is left over. */
    if (c->rbuf.len == 0)
        c->partial_since = 0;
    else if (off > 0 || c->partial_since == 0)
        c->partial_since = px_io_now(c->pool->io);
}

/* ---- writing ----------------------------------------------------------------------------------- */

static void client_written(px_write *w, px_stream *st, int status)
{
    px_client *c = st->owner;
    c->inflight -= w->len;
    c->last_write_ms = px_io_now(c->pool->io);
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

/* Whether the replies ready in c's output wait for the next loop iteration instead of leaving
 * now. A pipelined batch's requests go to several backends, whose replies come back in
 * different polls; replies leave in request order, so each backend's arrival would let out
 * another piece of the batch: 1.6-1.7 writes per 16-request batch over 3 servers, and a write
 * to a loopback socket (the receiver's TCP input and wake-up run in the sender's syscall) was
 * over half the proxy's CPU with -P 16. Held, the batch leaves in one write (1.005 writes).
 * Bounds: only while c waits for an earlier-sent request (the queue's head is not done), for
 * PX_CLIENT_HOLD_ITERS iterations at most, never past an iteration whose poll brought nothing
 * (px_io_quiet: nothing is arriving, waiting buys nothing), and never for PX_CLIENT_HOLD_BYTES
 * or more (a large write costs its bytes, not its syscall). A held reply so waits at most
 * until the last of its batch arrives or the loop goes quiet: the batch's last reply, which
 * its latency is measured by, is not delayed. The idle handle px_io_defer starts keeps the
 * loop from blocking meanwhile. */
#define PX_CLIENT_HOLD_ITERS 4u
#define PX_CLIENT_HOLD_BYTES (64u * 1024u)

static bool client_hold(const px_client *c)
{
    return c->held < PX_CLIENT_HOLD_ITERS && c->head != NULL && c->wbuf.len > 0 &&
           c->wbuf.len < PX_CLIENT_HOLD_BYTES && !c->draining && !c->paused &&
           !px_io_quiet(c->pool->io);
}

static void client_flush(px_client *c)
{
    if (c->closing)
        return;
    if (client_hold(c)) {
        c->held++;
        px_io_defer(c->pool->io, &c->flush); /* flushed again at the next iteration's flush */
        return;
    }
    c->held = 0;
    size_t queued = 0, before = c->wbuf.len;
    if (px_stream_write(c->stream, &c->wbuf, client_written, &queued) < 0) {
        c->pool->stats.client_err++;
        px_client_close(c);
        return;
    }
    if (queued < before)
        c->last_write_ms = px_io_now(c->pool->io); /* the socket took some now */
    c->inflight += queued;
    if (c->draining && c->head == NULL && !c->shut) {
        c->shut = true;
        if (px_stream_shutdown(c->stream, &c->shutdown, client_shutdown_cb) < 0)
            px_client_close(c);
        return;
    }
    if (c->paused && !c->draining && c->nreqs < PX_MAX_CLIENT_REQUESTS / 2 &&
        c->inflight_bytes < c->pool->max_client_inflight / 2 + 1 &&
        client_held(c) <= c->pool->max_client_buffer) {
        c->paused = false;
        px_stream_read_start(c->stream, client_alloc_cb, client_read_cb);
        client_process(c);
    }
}

/* ---- lifecycle --------------------------------------------------------------------------------- */

static void client_close_cb(uv_handle_t *h)
{
    px_stream *st = PX_CONTAINER(h, px_stream, u);
    px_client *c = st->owner;
    px_dl_remove(&c->link);
    px_io_unmark(&c->flush);
    px_rq *rq = c->head;
    while (rq != NULL) {
        px_rq *next = rq->next;
        rq->owner = NULL;
        rq->out = NULL;
        if (rq->done)
            px_rq_free(rq);
        rq = next;
    }
    px_session_free(c->session); /* after: the requests it holds have lost their owner */
    if (c->card != NULL)
        px_roster_leave(c->pool->shared->roster, c->card);
    px_buf_free(&c->rbuf);
    px_buf_free(&c->wbuf);
    px_buf_free(&c->bin);
    px_buf_free(&c->bin_keys);
    free(c);
    px_stream_free(st);
}

void px_client_close(px_client *c)
{
    if (c == NULL || c->closing)
        return;
    c->closing = true;
    px_ctrack_off(c->pool->ctrack, c->track); /* no push to it from here on */
    px_redir_leave(c->pool->shared->redir, c->id); /* none redirected to it either */
    c->track = 0;
    if (c->head != NULL)
        c->head->out = NULL; /* nothing more goes to the output of a closing client */
    c->pool->stats.client_connections--;
    PX_ATOMIC_SUB(c->pool->shared->clients, 1);
    PX_ATOMIC_SUB(*c->pool->clients_open, 1);
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
    /* Ids are the process's, as a server's are (CLIENT ID): from 1, never reused. */
    static uint64_t next_id = 1;
    st->owner = c;
    c->stream = st;
    c->pool = pool;
    c->id = __atomic_fetch_add(&next_id, 1u, __ATOMIC_RELAXED);
    c->flush.flush = client_flush_cb;
    c->closing = true; /* until accepted: a failure below frees it through the close callback */
    if (uv_accept(listener, &st->u.stream) < 0) {
        uv_close(&st->u.handle, client_close_cb);
        return;
    }
    /* A pool's client_connections; else the descriptors left for clients (pool.h): beyond it a
     * client is refused at once, so the backends' connections always find a descriptor. */
    const char *limit = NULL;
    if (pool->conf->client_connections > 0) {
        if (PX_ATOMIC_LOAD(pool->shared->clients) >= (uint64_t)pool->conf->client_connections)
            limit = "its client_connections";
    } else if (pool->clients_max > 0 && PX_ATOMIC_LOAD(*pool->clients_open) >= pool->clients_max) {
        limit = "the clients the descriptor limit leaves room for";
    }
    if (limit != NULL) {
        if (px_log_due(&pool->fd_log_at, px_io_now(pool->io), PX_FD_LOG_PERIOD_MS)) {
            PX_LOG(pool->io, PX_LOG_WARN, "pool %s: %s reached (%llu): refusing clients (%llu "
                   "more refusals or pauses not logged)", pool->conf->name, limit,
                   (unsigned long long)(pool->conf->client_connections > 0
                                            ? (uint64_t)pool->conf->client_connections
                                            : pool->clients_max),
                   (unsigned long long)pool->fd_unlogged);
            pool->fd_unlogged = 0;
        } else {
            pool->fd_unlogged++;
        }
        uv_close(&st->u.handle, client_close_cb);
        return;
    }
    c->closing = false;
    if (listener->type == UV_TCP)
        uv_tcp_nodelay(&st->u.tcp, 1);
    px_dl_push(&pool->clients, &c->link);
    pool->stats.client_connections++;
    PX_ATOMIC_ADD(pool->shared->clients, 1); /* the limit is the pool's, over all workers */
    PX_ATOMIC_ADD(*pool->clients_open, 1);
    c->last_read_ms = c->last_write_ms = px_io_now(pool->io);
    c->addr_hash = peer_hash(&st->u.stream);
    if (pool->shared->roster != NULL &&
        (c->card = px_roster_join(pool->shared->roster, c->id, &st->u.stream,
                                  c->last_read_ms)) == NULL) {
        px_client_close(c);
        return;
    }
    if (pool->shared->redir != NULL &&
        px_redir_join(pool->shared->redir, c->id, pool->windex, c) != 0) {
        px_client_close(c);
        return;
    }
    pool->m.clients_accepted++;
    PX_ATOMIC_ADD(*pool->accepted_total, 1);
    if (pool->tls_listen != NULL) {
        px_tls *t = px_tls_new(pool->tls_listen, true, NULL, NULL);
        if (t == NULL || px_stream_tls(st, t) != 0) {
            px_client_close(c);
            return;
        }
    }
    if (px_stream_read_start(st, client_alloc_cb, client_read_cb) < 0)
        px_client_close(c);
}

bool px_client_shed_idle(px_pool *pool)
{
    px_client *oldest = NULL;
    for (px_dl *d = pool->clients.next; d != &pool->clients; d = d->next) {
        px_client *c = PX_CONTAINER(d, px_client, link);
        if (!c->closing && c->nreqs == 0 &&
            (oldest == NULL || c->last_read_ms < oldest->last_read_ms))
            oldest = c;
    }
    if (oldest == NULL)
        return false;
    pool->stats.client_err++;
    px_client_close(oldest);
    return true;
}

/* A client whose request has not arrived whole within the read timeout: answered with an error
 * (its partial bytes dropped), then closed. */
static void client_read_timed_out(px_client *c, uint64_t ms)
{
    char msg[96];
    snprintf(msg, sizeof(msg), "request not complete within %llu ms", (unsigned long long)ms);
    c->rbuf.len = 0;
    c->partial_since = 0;
    client_fail(c, msg);
}

void px_client_sweep(px_pool *pool, uint64_t now)
{
    uint64_t idle = pool->conf->client_idle_timeout > 0 ? (uint64_t)pool->conf->client_idle_timeout
                                                        : 0;
    uint64_t read = pool->conf->client_read_timeout > 0 ? (uint64_t)pool->conf->client_read_timeout
                                                        : 0;
    for (px_dl *d = pool->clients.next; d != &pool->clients;) {
        px_client *c = PX_CONTAINER(d, px_client, link);
        d = d->next; /* c may close: its link stays valid until its close callback */
        if (c->closing || client_stalled(c, now) || c->draining || c->paused)
            continue;
        if (read > 0 && c->stream->tls != NULL && !c->stream->tls_up &&
            now - c->last_read_ms >= read) {
            /* A TLS handshake not done within the read timeout of the connection (nothing of
             * it reaches the request framing, so partial_since never starts). */
            pool->stats.client_err++;
            px_client_close(c);
        } else if (read > 0 && c->partial_since != 0 && now - c->partial_since >= read) {
            client_read_timed_out(c, read);
        } else if (idle > 0 && c->nreqs == 0 && c->rbuf.len == 0 && c->wbuf.len == 0 &&
                   c->inflight == 0 && now - c->last_read_ms >= idle &&
                   !px_session_subscribed(c->session)) { /* a subscriber waits, as on Redis */
            pool->stats.client_err++;
            px_client_close(c);
        }
    }
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * track.c — the near cache's invalidation links (track.h). A link is a dedicated RESP3
 * connection to its server (backend.h: the codec's handshake, HELLO 3, first): it names itself
 * (CLIENT SETNAME chash-invalidate), asks its id (CLIENT ID), turns tracking on redirected to
 * itself (opt-in: it reads nothing, so the server tracks nothing for it; a server that refuses
 * this refuses the fills' tracking too: older than 6, or an ACL), and is live once that is
 * answered OK: px_server.track.id is its id. Then a PING every PX_TRACK_PING_MS, answered within
 * the pool's timeout or the link fails (a server stopped is found out). Invalidations arrive as
 * pushes ([invalidate, keys | null]) whatever is in flight.
 *
 * Why a link per worker and server, redirected to, rather than RESP3 pushes on the connections
 * that carry the fills: those are the shared connections of the fill's client dialect, RESP2
 * ones among them, where Redis cannot push; and the link's state is the one thing to watch (a
 * fill connection that fails is a flush, backend.c). Why RESP3 for the link rather than a RESP2
 * connection subscribed to __redis__:invalidate: a RESP2 message is a plain array, which
 * backend.c tells from a reply only while nothing is in flight, so the keepalive could not have
 * a deadline; a RESP3 push is typed, and a RESP3 redirect target needs no SUBSCRIBE. Why
 * opt-in: the server tracks the keys the near cache filled, not every key read through the
 * proxy (500 cold reads and a hot key: 1 key tracked, proxy_tracking part 6). Measured: of
 * about 30,000 reads through a second proxy per 3 s run, at most 14 older than a write
 * acknowledged before they began, by at most 0.18 ms (docs/PERFORMANCE.md).
 *
 * The race (Redis's client-side caching guidance: with a redirect, an invalidation may arrive
 * after the reply of the read it ends): a fill records its key's generation when it is sent
 * (route_near.c) and is kept only if the generation has not moved when its reply comes, so an
 * invalidation that arrives first refuses it; one that arrives after it ends the entry on
 * arrival: an entry serves at most the invalidation's delay past the write (measured:
 * docs/PERFORMANCE.md).
 */
#include "track.h"

#include "hot/near.h"

#include <stdlib.h>

#define PX_TRACK_PING_MS 1000u      /* a live link's keepalive */
#define PX_TRACK_RETRY_MS 500u      /* a link lost opens again after this */
#define PX_TRACK_RETRY_MAX_MS 8000u /* and while none gets live, after up to this */
#define PX_TRACK_REFUSED_MS 60000u  /* a server that refused tracking is asked again after this */

typedef struct px_track_link {
    px_conn *conn;
    uint64_t id;      /* its client id, once answered */
    bool live;        /* its tracking is on: px_server.track.id is id */
    bool ping_out;    /* a keepalive is in flight */
    bool bcast_out;   /* a registration of BCAST prefixes is in flight */
    uint64_t sent_ver; /* the BCAST prefixes' version of its last CLIENT TRACKING on (0: none,
                          opt-in alone) */
    bool released;    /* its server let go of it: freed once no request of it is in flight */
    unsigned pending; /* its requests in flight: each one's answer (or failure) comes to
                         link_done, which must find the link */
    uint64_t ping_at;
} px_track_link;

/* Every key of the pool: what was filled is served no more, no fill in flight is kept; every
 * tracking client of the pool on this worker gets a null invalidation (client_track.h). */
static void flush_all(px_pool *pool)
{
    ch__near_invalidate_all(pool->shared->near_gens);
    pool->m.track.flushes++;
    px_ctrack_flush(pool->ctrack);
}

/* The link goes (closed, refused, or its pool no longer tracks): its server's state becomes
 * next, and a link opens again after PX_TRACK_RETRY_MS when this one was live, doubling up to
 * PX_TRACK_RETRY_MAX_MS while none gets live (a server down is not asked twice a second by
 * every worker), or PX_TRACK_REFUSED_MS after a refusal. A live link's loss is a flush. */
static void link_free(px_server *s, px_track_link *l, px_track_state next)
{
    px_pool *pool = s->pool;
    if (s->track.link == l) {
        uint32_t *b = &s->track.backoff_ms;
        *b = l->live || *b == 0 ? PX_TRACK_RETRY_MS
                                : (*b < PX_TRACK_RETRY_MAX_MS ? *b * 2 : PX_TRACK_RETRY_MAX_MS);
        s->track.link = NULL;
        s->track.id = 0;
        s->track.bcast_ver = 0;
        s->track.state = (uint8_t)next;
        s->track.retry_at = px_io_now(pool->io) + (next == PX_TRACK_REFUSED ? PX_TRACK_REFUSED_MS
                                                                           : *b);
    }
    if (l->live)
        flush_all(pool);
    l->live = false;
    l->released = true;
    if (l->pending == 0)
        free(l);
}

typedef struct send_arg {
    const px_codec *codec;
    px_track_op op;
    uint64_t id;
    const px_ctrack *ct; /* the BCAST clients' prefixes (client_track.h) */
} send_arg;

/* The link's tracking on: opt-in alone, or in BCAST mode for the prefixes of the pool's BCAST
 * clients on this worker (the fills' redirected tracking goes on either way). */
static int encode_op(void *arg, px_buf *out, uint8_t *expect)
{
    const send_arg *a = arg;
    const char *const *p;
    const uint32_t *len;
    size_t n;
    *expect = 0;
    if (a->op == PX_TRACK_ON && a->codec->encode_track_bcast != NULL &&
        px_ctrack_bcast_want(a->ct, &p, &len, &n) != 0)
        return a->codec->encode_track_bcast(out, a->id, p, len, n);
    return a->codec->encode_track(out, a->op, a->id);
}

static void link_done(px_frag *f, const px_reply *r);

static void link_send(px_track_link *l, px_track_op op, uint64_t id)
{
    px_server *s = l->conn->server;
    px_frag *f = px_frag_new(0);
    send_arg a = {s->pool->codec, op, id, s->pool->ctrack};
    if (op == PX_TRACK_ON) {
        const char *const *p;
        const uint32_t *len;
        size_t n;
        l->sent_ver = px_ctrack_bcast_want(s->pool->ctrack, &p, &len, &n);
    }
    if (f == NULL)
        goto fail;
    f->done = link_done;
    f->ctx = l;
    f->tag = (void *)(uintptr_t)op;
    f->cid = 0;
    f->dialect = l->conn->dialect;
    l->pending++; /* before: its answer may come (a failure) before the send returns */
    if (px_conn_send(l->conn, f, encode_op, &a) == 0)
        return;
    l->pending--;
    px_frag_free(f);
fail:
    /* out of memory: the link goes, and opens again later */
    px_conn_release(l->conn);
    link_free(s, l, PX_TRACK_DOWN);
}

/* The answer to one of the link's requests (op in f->tag). A failure (the connection's) is
 * followed by closed(), which frees the link. */
static void link_done(px_frag *f, const px_reply *r)
{
    px_track_link *l = f->ctx;
    px_track_op op = (px_track_op)(uintptr_t)f->tag;
    l->pending--;
    if (l->released) {
        if (l->pending == 0)
            free(l);
        return;
    }
    if (r->kind == PX_REPLY_FAILED)
        return;
    px_server *s = l->conn->server;
    px_pool *pool = s->pool;
    switch (op) {
    case PX_TRACK_ID:
        if (r->kind != PX_REPLY_INTEGER || r->integer <= 0)
            break;
        l->id = (uint64_t)r->integer;
        link_send(l, PX_TRACK_ON, l->id);
        return;
    case PX_TRACK_ON:
        if (r->kind == PX_REPLY_ERROR)
            break;
        l->bcast_out = false;
        s->track.bcast_ver = l->sent_ver;
        if (l->sent_ver != 0) /* what BCAST clients cached may have missed a change before */
            px_ctrack_bcast_confirmed(pool->ctrack);
        if (l->live)
            return; /* a registration of BCAST prefixes again */
        l->live = true;
        l->ping_at = px_io_now(pool->io) + PX_TRACK_PING_MS;
        s->track.id = l->id;
        s->track.state = PX_TRACK_LIVE;
        PX_LOG(pool->io, PX_LOG_INFO,
               "pool %s: server %s tracks the near cache's reads (invalidation link id %llu)",
               pool->conf->name, s->conf->id != NULL ? s->conf->id : s->conf->addr,
               (unsigned long long)l->id);
        return;
    case PX_TRACK_PING:
        l->ping_out = false;
        l->ping_at = px_io_now(pool->io) + PX_TRACK_PING_MS;
        return;
    default: /* the name: its refusal is not the tracking's */
        return;
    }
    /* CLIENT ID or CLIENT TRACKING refused: the server keeps the TTL alone */
    PX_LOG(pool->io, PX_LOG_WARN,
           "pool %s: server %s refused %s: its near-cache entries are bounded by hot_cache alone "
           "(asked again in %u s)",
           pool->conf->name, s->conf->id != NULL ? s->conf->id : s->conf->addr,
           op == PX_TRACK_ID ? "CLIENT ID" : "CLIENT TRACKING", PX_TRACK_REFUSED_MS / 1000u);
    px_conn_release(l->conn);
    link_free(s, l, PX_TRACK_REFUSED);
}

static void invalidate_key(void *arg, const char *key, size_t len)
{
    px_pool *pool = arg;
    uint64_t h = px_key_hash(key, len);
    ch__near_invalidate(pool->shared->near_gens, h);
    pool->m.track.invalidations++;
    px_ctrack_invalidate(pool->ctrack, h, key, len); /* the tracking clients that read it */
}

/* A push on the link: an invalidation (anything else is dropped). */
static void link_push(void *ctx, px_conn *c, const px_reply *r)
{
    (void)ctx;
    px_pool *pool = c->server->pool;
    bool all = false;
    if (pool->codec->track_keys(r, &all, invalidate_key, pool) == 1 && all)
        flush_all(pool);
}

static void link_closed(void *ctx, px_conn *c, const char *why)
{
    px_track_link *l = ctx;
    px_server *s = c->server;
    px_pool *pool = s->pool;
    if (l->live)
        PX_LOG(pool->io, pool->io->stopping ? PX_LOG_INFO : PX_LOG_WARN,
               "pool %s: server %s: invalidation link %s: the near cache's entries are dropped "
               "and none is kept from it until the link is back",
               pool->conf->name, s->conf->id != NULL ? s->conf->id : s->conf->addr, why);
    link_free(s, l, PX_TRACK_DOWN);
}

static void link_open(px_server *s)
{
    px_track_link *l = calloc(1, sizeof(*l));
    px_conn_owner owner = {.push = link_push, .closed = link_closed, .ctx = l};
    if (l == NULL || (l->conn = px_conn_dedicated(s, PX_DIALECT_RESP3, &owner)) == NULL) {
        free(l);
        s->track.state = PX_TRACK_DOWN;
        s->track.retry_at = px_io_now(s->pool->io) + PX_TRACK_RETRY_MS;
        return;
    }
    s->track.link = l;
    s->track.state = PX_TRACK_DOWN;
    link_send(l, PX_TRACK_NAME, 0);
    if (s->track.link == l)
        link_send(l, PX_TRACK_ID, 0);
}

void px_track_tick(px_pool *pool)
{
    bool want = px_track_wanted(pool);
    uint64_t now = px_io_now(pool->io);
    px_track_counts n = pool->m.track;
    n.live = n.down = n.refused = 0;
    for (size_t i = 0; i < pool->nservers; i++) {
        px_server *s = &pool->servers[i];
        px_track_link *l = s->track.link;
        if (!want) {
            if (l != NULL) {
                px_conn_release(l->conn);
                link_free(s, l, PX_TRACK_OFF);
            }
            s->track.state = PX_TRACK_OFF;
            continue;
        }
        /* An ejection or a readmission moves the server's keys: what was filled from their
         * owner before is not tracked by the owner after. */
        bool up = px_health_up(pool->health, s->index);
        if (up != s->track.up && s->track.state != PX_TRACK_OFF)
            flush_all(pool);
        s->track.up = up;
        if (l == NULL && now >= s->track.retry_at && !pool->io->stopping)
            link_open(s);
        else if (l != NULL && l->live && !l->ping_out && now >= l->ping_at) {
            l->ping_out = true;
            link_send(l, PX_TRACK_PING, 0);
        }
        /* BCAST clients' prefixes the link has not registered: its tracking off and on again
         * with them (Redis switches a client to BCAST only so); confirmed, a flush of them */
        const char *const *p;
        const uint32_t *plen;
        size_t np;
        uint64_t bver = px_ctrack_bcast_want(pool->ctrack, &p, &plen, &np);
        l = s->track.link;
        if (l != NULL && l->live && !l->bcast_out && bver != 0 && s->track.bcast_ver != bver) {
            l->bcast_out = true;
            link_send(l, PX_TRACK_DISABLE, 0);
            if (s->track.link == l)
                link_send(l, PX_TRACK_ON, l->id);
        }
        n.live += s->track.state == PX_TRACK_LIVE;
        n.down += s->track.state == PX_TRACK_DOWN;
        n.refused += s->track.state == PX_TRACK_REFUSED;
    }
    pool->m.track = n;
    pool->m.ctrack = px_ctrack_counts_of(pool->ctrack);
}

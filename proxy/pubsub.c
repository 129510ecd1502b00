/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pubsub.c — a client's subscriptions across a pool. A channel is hashed like a key: it is
 * subscribed on its owner's server, where PUBLISH (routed by its channel) delivers. A pattern
 * can match channels of every server: it is subscribed on every server. Each server the client
 * subscribes on gets a connection dedicated to the client (backend.h), in push mode: what it
 * reads with no request waiting goes to sub_push, as messages (forwarded to the client as they
 * are, through the session's emit hook, so they leave after every reply queued before them) or
 * confirmations.
 *
 * The client sees what one Redis server would answer: one confirmation per channel or pattern
 * with the running count of its subscriptions. The proxy computes that count itself (it knows
 * the client's channels and patterns: the servers only know their share), writes the reply at
 * dispatch, and holds it until every server involved has confirmed (a wait), so that a client
 * told "subscribed" is subscribed on the server, and a PUBLISH it causes next is delivered.
 * Confirmations come back on each connection in the order the subscriptions were sent on it:
 * each connection has a FIFO of (wait, confirmations still owed).
 *
 * Costs: a connect per server subscribed on (all of them after a PSUBSCRIBE); a (un)subscription
 * is O(subscriptions of the client) to keep its set exact. Limits: after a reload that moves a
 * channel to another server, the client stays subscribed on the old one until it subscribes
 * again; a server added by a reload has none of the client's patterns. A subscribed connection
 * that fails, or whose server leaves the pool, closes the client, whose library subscribes again
 * on reconnecting (redis-py, hiredis): silently losing subscriptions would be worse.
 *
 * One channel is the proxy's own: __redis__:invalidate, where a RESP2 client whose id another
 * client's CLIENT TRACKING on REDIRECT names gets that client's invalidations (redir.h), as
 * Redis sends them there. It is subscribed on no server (the servers' invalidations are the
 * proxy's links', not the client's), confirmed at once.
 */
#include "pubsub.h"

#include <stdlib.h>
#include <string.h>

#define PX_INVALIDATE_CHANNEL "__redis__:invalidate"

typedef struct sub_name {
    char *p;
    size_t len;
    uint32_t uid; /* a channel: its server's (px_server.uid) */
} sub_name;

typedef struct sub_wait {
    px_rq *rq;
    px_buf reply;       /* the client's confirmations, written at dispatch */
    bool error;         /* reply is an error instead */
    size_t remaining;   /* confirmations still owed by the servers */
} sub_wait;

typedef struct owed {
    sub_wait *w;
    size_t n;
} owed;

typedef struct sub_conn {
    px_conn *conn;
    uint32_t uid; /* its server's */
    owed *q;      /* FIFO [qhead, qn) */
    size_t qhead, qn, qcap;
} sub_conn;

struct px_pubsub {
    px_pool *pool;
    uint64_t cid;
    px_session_hooks hooks;
    sub_name *chans, *pats;
    size_t nchans, npats, chans_cap, pats_cap;
    sub_conn *conns;
    size_t nconns, conns_cap;
    bool closing; /* the client is being closed: nothing more is sent */
    uint8_t dialect; /* the client's: its connections speak it, its confirmations are written
                        in it (it does not change while subscribed: px_session_pinned) */
};

px_pubsub *px_pubsub_new(px_pool *pool, uint64_t cid, const px_session_hooks *hooks)
{
    px_pubsub *ps = calloc(1, sizeof(*ps));
    if (ps == NULL)
        return NULL;
    ps->pool = pool;
    ps->cid = cid;
    ps->hooks = *hooks;
    return ps;
}

size_t px_pubsub_count(const px_pubsub *ps)
{
    return ps->nchans + ps->npats;
}

/* ---- waits ------------------------------------------------------------------------------------- */

static void wait_finish(sub_wait *w)
{
    px_rq_finish(w->rq, w->reply.p, w->reply.len, w->error);
    px_buf_free(&w->reply);
    free(w);
}

/* One confirmation of w arrived (or will never: the connection failed). */
static void wait_confirmed(sub_wait *w, size_t n)
{
    w->remaining -= n;
    if (w->remaining == 0)
        wait_finish(w);
}

static int owe(sub_conn *sc, sub_wait *w, size_t n)
{
    if (sc->qn == sc->qcap) {
        if (sc->qhead > 0) {
            memmove(sc->q, sc->q + sc->qhead, (sc->qn - sc->qhead) * sizeof(*sc->q));
            sc->qn -= sc->qhead;
            sc->qhead = 0;
        }
        if (sc->qn == sc->qcap) {
            size_t cap = sc->qcap ? sc->qcap * 2 : 4;
            owed *q = realloc(sc->q, cap * sizeof(*q));
            if (q == NULL)
                return -1;
            sc->q = q;
            sc->qcap = cap;
        }
    }
    sc->q[sc->qn++] = (owed){w, n};
    w->remaining += n;
    return 0;
}

/* ---- connections ------------------------------------------------------------------------------- */

static sub_conn *conn_of(px_pubsub *ps, const px_conn *c)
{
    for (size_t i = 0; i < ps->nconns; i++)
        if (ps->conns[i].conn == c)
            return &ps->conns[i];
    return NULL;
}

static sub_conn *conn_by_uid(px_pubsub *ps, uint32_t uid)
{
    for (size_t i = 0; i < ps->nconns; i++)
        if (ps->conns[i].uid == uid)
            return &ps->conns[i];
    return NULL;
}

/* Every wait of sc is owed nothing more from it; sc leaves the list. */
static void conn_drop(px_pubsub *ps, sub_conn *sc)
{
    size_t qhead = sc->qhead, qn = sc->qn;
    owed *q = sc->q;
    *sc = ps->conns[--ps->nconns];
    for (size_t i = qhead; i < qn; i++)
        wait_confirmed(q[i].w, q[i].n);
    free(q);
}

static void release_idle(px_pubsub *ps);

static void sub_push(void *ctx, px_conn *c, const px_reply *r)
{
    px_pubsub *ps = ctx;
    switch (ps->pool->codec->push_kind(r)) {
    case PX_PUSH_MESSAGE:
        ps->hooks.emit(ps->hooks.arg, r->p, r->len);
        return;
    case PX_PUSH_CONFIRM: {
        sub_conn *sc = conn_of(ps, c);
        if (sc == NULL || sc->qhead == sc->qn)
            return; /* not one the proxy waits for */
        owed *o = &sc->q[sc->qhead];
        sub_wait *w = o->w;
        if (--o->n == 0)
            sc->qhead++;
        wait_confirmed(w, 1);
        release_idle(ps);
        return;
    }
    default:
        return;
    }
}

static void sub_closed(void *ctx, px_conn *c, const char *why)
{
    px_pubsub *ps = ctx;
    sub_conn *sc = conn_of(ps, c);
    /* What it still owed will not come: those replies become the error (the client, closed
     * next, is not told it subscribed). */
    for (size_t i = sc != NULL ? sc->qhead : 0; sc != NULL && i < sc->qn; i++) {
        px_buf *b = &sc->q[i].w->reply;
        b->len = 0;
        ps->pool->codec->encode_error(b, PX_ERR_SERVER, why);
        sc->q[i].w->error = true;
    }
    if (sc != NULL)
        conn_drop(ps, sc);
    if (!ps->closing) {
        ps->closing = true;
        ps->hooks.close(ps->hooks.arg);
    }
}

/* The client's connection to server s, opened when it has none. NULL when it cannot be. */
static sub_conn *conn_to(px_pubsub *ps, px_server *s)
{
    sub_conn *sc = conn_by_uid(ps, s->uid);
    if (sc != NULL)
        return sc;
    if (ps->nconns == ps->conns_cap) {
        size_t cap = ps->conns_cap ? ps->conns_cap * 2 : 4;
        sub_conn *a = realloc(ps->conns, cap * sizeof(*a));
        if (a == NULL)
            return NULL;
        ps->conns = a;
        ps->conns_cap = cap;
    }
    px_conn_owner owner = {.push = sub_push, .closed = sub_closed, .ctx = ps};
    px_conn *c = px_conn_dedicated(s, ps->dialect, &owner);
    if (c == NULL)
        return NULL;
    sc = &ps->conns[ps->nconns++];
    *sc = (sub_conn){.conn = c, .uid = s->uid};
    return sc;
}

typedef struct op_arg {
    const px_codec *codec;
    px_session_op op;
    const char *const *names;
    const size_t *lens;
    size_t n;
} op_arg;

static int encode_names(void *arg, px_buf *out, uint8_t *expect)
{
    const op_arg *a = arg;
    *expect = 0;
    return a->codec->encode_op(out, a->op, a->names, a->lens, a->n);
}

/* Sends op names[0, n) on sc (no fragment: each name is confirmed by a push) and makes w owed
 * n confirmations from it. 0, or -1. */
static int send_names(px_pubsub *ps, sub_conn *sc, sub_wait *w, px_session_op op,
                      const char *const *names, const size_t *lens, size_t n)
{
    if (n == 0)
        return 0;
    op_arg a = {ps->pool->codec, op, names, lens, n};
    if (px_conn_send(sc->conn, NULL, encode_names, &a) != 0)
        return -1;
    return owe(sc, w, n);
}

/* ---- the set of names -------------------------------------------------------------------------- */

static size_t find(const sub_name *v, size_t n, const char *p, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].len == len && memcmp(v[i].p, p, len) == 0)
            return i;
    return SIZE_MAX;
}

/* Adds p to the set (a no-op when in it). 0, or -1. */
static int add(sub_name **v, size_t *n, size_t *cap, const char *p, size_t len, uint32_t uid)
{
    if (find(*v, *n, p, len) != SIZE_MAX)
        return 0;
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 8;
        sub_name *a = realloc(*v, c * sizeof(*a));
        if (a == NULL)
            return -1;
        *v = a;
        *cap = c;
    }
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return -1;
    memcpy(copy, p, len);
    (*v)[(*n)++] = (sub_name){copy, len, uid};
    return 0;
}

static void drop(sub_name *v, size_t *n, size_t i)
{
    free(v[i].p);
    v[i] = v[--*n];
}

/* ---- dispatch ---------------------------------------------------------------------------------- */

/* The names of rq's request: its arguments from 1 on (rq->msg.keys). */
static const char *name_at(const px_rq *rq, size_t i, size_t *len)
{
    *len = rq->msg.keys[i].len;
    return rq->msg.raw + rq->msg.keys[i].off;
}

static int subscribe(px_pubsub *ps, px_rq *rq, sub_wait *w, bool pattern)
{
    px_pool *pool = ps->pool;
    px_session_op op = pattern ? PX_SES_PSUBSCRIBE : PX_SES_SUBSCRIBE;
    for (size_t i = 0; i < rq->msg.nkeys; i++) {
        size_t len;
        const char *p = name_at(rq, i, &len);
        if (pattern) {
            if (pool->nservers == 0)
                return -1;
            for (size_t s = 0; s < pool->nservers; s++) {
                sub_conn *sc = conn_to(ps, &pool->servers[s]);
                if (sc == NULL || send_names(ps, sc, w, op, &p, &len, 1) != 0)
                    return -1;
            }
            if (add(&ps->pats, &ps->npats, &ps->pats_cap, p, len, 0) != 0)
                return -1;
        } else if (len == sizeof(PX_INVALIDATE_CHANNEL) - 1 &&
                   memcmp(p, PX_INVALIDATE_CHANNEL, len) == 0) {
            /* the proxy's own invalidations (CLIENT TRACKING on REDIRECT, redir.h): confirmed
             * here, subscribed on no server (uid 0: no connection) */
            if (find(ps->chans, ps->nchans, p, len) == SIZE_MAX &&
                add(&ps->chans, &ps->nchans, &ps->chans_cap, p, len, 0) != 0)
                return -1;
        } else {
            size_t o = ch_lookup(pool->table, p, len);
            if (o >= pool->nservers)
                return -1;
            sub_conn *sc = conn_to(ps, &pool->servers[o]);
            if (sc == NULL || send_names(ps, sc, w, op, &p, &len, 1) != 0 ||
                add(&ps->chans, &ps->nchans, &ps->chans_cap, p, len, sc->uid) != 0)
                return -1;
        }
        if (pool->codec->encode_sub_reply(&w->reply, ps->dialect, op, p, len,
                                          px_pubsub_count(ps)) != 0)
            return -1;
    }
    return 0;
}

/* Unsubscribes one name held in the set (index i). */
static int unsubscribe_one(px_pubsub *ps, sub_wait *w, bool pattern, size_t i)
{
    px_session_op op = pattern ? PX_SES_PUNSUBSCRIBE : PX_SES_UNSUBSCRIBE;
    sub_name *v = pattern ? ps->pats : ps->chans;
    const char *p = v[i].p;
    size_t len = v[i].len;
    int rc = 0;
    if (pattern) {
        for (size_t k = 0; rc == 0 && k < ps->nconns; k++)
            rc = send_names(ps, &ps->conns[k], w, op, &p, &len, 1);
    } else {
        sub_conn *sc = conn_by_uid(ps, v[i].uid);
        if (sc != NULL)
            rc = send_names(ps, sc, w, op, &p, &len, 1);
    }
    if (rc != 0)
        return -1;
    /* The count after it: the name leaves the set first. The reply names it from a copy. */
    char *copy = v[i].p;
    v[i].p = NULL;
    drop(v, pattern ? &ps->npats : &ps->nchans, i);
    rc = ps->pool->codec->encode_sub_reply(&w->reply, ps->dialect, op, copy, len,
                                           px_pubsub_count(ps));
    free(copy);
    return rc;
}

static int unsubscribe(px_pubsub *ps, px_rq *rq, sub_wait *w, bool pattern)
{
    px_session_op op = pattern ? PX_SES_PUNSUBSCRIBE : PX_SES_UNSUBSCRIBE;
    size_t *n = pattern ? &ps->npats : &ps->nchans;
    if (rq->msg.nkeys == 0) { /* every one; Redis answers one nil when there is none */
        if (*n == 0)
            return ps->pool->codec->encode_sub_reply(&w->reply, ps->dialect, op, NULL, 0,
                                                     px_pubsub_count(ps));
        while (*n > 0)
            if (unsubscribe_one(ps, w, pattern, *n - 1) != 0)
                return -1;
        return 0;
    }
    for (size_t k = 0; k < rq->msg.nkeys; k++) {
        size_t len;
        const char *p = name_at(rq, k, &len);
        size_t i = find(pattern ? ps->pats : ps->chans, *n, p, len);
        if (i != SIZE_MAX) {
            if (unsubscribe_one(ps, w, pattern, i) != 0)
                return -1;
        } else if (ps->pool->codec->encode_sub_reply(&w->reply, ps->dialect, op, p, len,
                                                     px_pubsub_count(ps)) != 0) {
            return -1;
        }
    }
    return 0;
}

/* Once nothing is subscribed and nothing owed, the connections go (Redis leaves pub/sub mode). */
static void release_idle(px_pubsub *ps)
{
    if (px_pubsub_count(ps) > 0)
        return;
    for (size_t i = 0; i < ps->nconns; i++)
        if (ps->conns[i].qhead != ps->conns[i].qn)
            return;
    while (ps->nconns > 0) {
        sub_conn *sc = &ps->conns[ps->nconns - 1];
        px_conn_release(sc->conn);
        conn_drop(ps, sc);
    }
}

void px_pubsub_dispatch(px_pubsub *ps, px_rq *rq)
{
    sub_wait *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        px_rq_fail(rq, PX_ERR_SERVER, "out of memory");
        return;
    }
    w->rq = rq;
    w->remaining = 1; /* held while it is being built: confirmations may not finish it */
    ps->dialect = rq->msg.dialect;
    px_session_op op = (px_session_op)rq->msg.cmd->session;
    bool pattern = op == PX_SES_PSUBSCRIBE || op == PX_SES_PUNSUBSCRIBE;
    int rc = op == PX_SES_SUBSCRIBE || op == PX_SES_PSUBSCRIBE ? subscribe(ps, rq, w, pattern)
                                                               : unsubscribe(ps, rq, w, pattern);
    if (rc != 0) {
        /* A connection could not be opened or memory ran out: the client cannot know what it
         * is subscribed to, so it is closed (and subscribes again when it reconnects). */
        w->reply.len = 0;
        ps->pool->codec->encode_error(&w->reply, PX_ERR_SERVER,
                                      "cannot subscribe on a backend: closing the connection");
        w->error = true;
        if (!ps->closing) {
            ps->closing = true;
            ps->hooks.close(ps->hooks.arg);
        }
    }
    wait_confirmed(w, 1);
    release_idle(ps);
}

void px_pubsub_free(px_pubsub *ps)
{
    if (ps == NULL)
        return;
    ps->closing = true;
    while (ps->nconns > 0) {
        sub_conn *sc = &ps->conns[ps->nconns - 1];
        px_conn_release(sc->conn);
        conn_drop(ps, sc); /* its waits finish: their requests, owner gone, are freed */
    }
    for (size_t i = 0; i < ps->nchans; i++)
        free(ps->chans[i].p);
    for (size_t i = 0; i < ps->npats; i++)
        free(ps->pats[i].p);
    free(ps->chans);
    free(ps->pats);
    free(ps->conns);
    free(ps);
}

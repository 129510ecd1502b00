/* SPDX-License-Identifier: Apache-2.0 */
/*
 * request.c — requests in flight (request.h): their copy of the message, their slots, the
 * coalescing of a request's sends into one backend request per server, the merge of the parts'
 * replies through the codec, and completion through rq->on_done.
 *
 * Invariants:
 * - pending is the number of slots not yet answered; a slot is answered exactly once (a route
 *   that retries a slot re-sends it instead of answering it). When pending reaches 0 the request
 *   is done: its reply is final and on_done runs (or, owner gone, it is freed).
 * - Every send of a flush is built before any is handed to a backend, and nothing of the request
 *   is touched after the last hand-off: a backend may answer synchronously (a connection that
 *   cannot be opened fails its FIFO at once), which can complete and free the request. Within
 *   px_rq_start the owner is told only once it returns (rq->starting).
 * Cost per request: one block for the request with its slots and its message (raw bytes,
 * argument and key spans), one per backend request, both from the thread's block cache (buf.h)
 * when small (the common case: no malloc); a split command sorts its sends by server
 * (O(k log k) for k keys).
 */
#include "request.h"
#include "client_track.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Whether m's reply is merged from parts: a split command's (a slot per key), or a command
 * sent to every server (a slot per server, route_all.c). */
static bool merged(const px_msg *m)
{
    return m->cmd != NULL && (m->flags & PX_MSG_WHOLE) == 0 &&
           (m->cmd->cls == PX_CLASS_MULTI || m->cmd->merge == PX_MERGE_EVERY);
}

/* Whether sends storage p lives in rq itself (send1 or its block): not freed, not realloc'd. */
static bool sends_inline(const px_rq *rq, const px_rq_queued *p)
{
    return p == &rq->send1 || p == rq->sends_block;
}

/* Frees rq's reply bytes: a cache block (reply_cached) or a px_buf's. */
static void reply_drop(px_rq *rq)
{
    if (rq->reply_cached) {
        PX_MEM_SUB(rq->reply.cap);
        px_cache_free(rq->reply.p, rq->reply.cap);
        rq->reply = (px_buf){0};
        rq->reply_cached = false;
        return;
    }
    px_buf_free(&rq->reply);
}

px_rq *px_rq_new(px_pool *pool, const px_msg *m, uint64_t cid)
{
    size_t nslots = !merged(m)                          ? 1
                    : m->cmd->merge == PX_MERGE_EVERY ? (pool->nservers > 0 ? pool->nservers : 1)
                                                      : m->nkeys;
    size_t nblock = nslots > 1 ? (nslots < PX_RQ_SLICE ? nslots : PX_RQ_SLICE) : 0;
    size_t sz = sizeof(px_rq) + nslots * sizeof(px_rq_slot) + nblock * sizeof(px_rq_queued) +
                m->nkeys * sizeof(uint64_t) + m->nargs * sizeof(px_span) +
                m->nkeys * sizeof(px_span) + m->len + m->edge_keys_len;
    px_rq *rq = px_cache_alloc(sz);
    if (rq == NULL)
        return NULL;
    /* The header and the slots start zeroed, but msg, which is copied over: its reject text
     * (128 bytes) only when it has one. Per request this is what its set-up writes, so it is
     * kept to what the request needs. */
    memset(rq, 0, offsetof(px_rq, msg));
    memset(&rq->msg + 1, 0,
           sizeof(px_rq) - offsetof(px_rq, msg) - sizeof(px_msg) + nslots * sizeof(px_rq_slot));
    memcpy(&rq->msg, m, offsetof(px_msg, reject));
    rq->msg.reject[0] = '\0';
    if (m->reject[0] != '\0')
        memcpy(rq->msg.reject, m->reject, sizeof(m->reject));
    memcpy((char *)&rq->msg + offsetof(px_msg, reject_server),
           (const char *)m + offsetof(px_msg, reject_server),
           sizeof(px_msg) - offsetof(px_msg, reject_server));
    rq->bytes = sz;
    PX_MEM_ADD(sz);
    char *p = (char *)(rq + 1);
    rq->slots = (px_rq_slot *)(void *)p;
    p += nslots * sizeof(px_rq_slot);
    if (nblock > 0) {
        rq->sends_block = (px_rq_queued *)(void *)p;
        rq->block_cap = (uint32_t)nblock;
        p += nblock * sizeof(px_rq_queued);
    }
    rq->khash = (uint64_t *)(void *)p; /* 8-aligned: px_rq and the blocks before are */
    if (m->nkeys > 0)
        memset(rq->khash, 0, m->nkeys * sizeof(uint64_t));
    p += m->nkeys * sizeof(uint64_t);
    rq->msg.args = (px_span *)(void *)p;
    if (m->nargs > 0)
        memcpy(rq->msg.args, m->args, m->nargs * sizeof(px_span));
    rq->msg.args_cap = m->nargs;
    p += m->nargs * sizeof(px_span);
    rq->msg.keys = (px_span *)(void *)p;
    if (m->nkeys > 0)
        memcpy(rq->msg.keys, m->keys, m->nkeys * sizeof(px_span));
    rq->msg.keys_cap = m->nkeys;
    p += m->nkeys * sizeof(px_span);
    if (m->len > 0)
        memcpy(p, m->raw, m->len);
    rq->msg.raw = p;
    if (m->edge_keys_len > 0) {
        memcpy(p + m->len, m->edge_keys, m->edge_keys_len);
        rq->msg.edge_keys = (const uint8_t *)p + m->len;
    }
    rq->pool = pool;
    rq->codec = pool->codec;
    rq->cid = cid;
    rq->nslots = rq->pending = (uint32_t)nslots;
    for (size_t i = 0; i < nslots; i++)
        rq->slots[i].key = (uint32_t)i;
    rq->cls = m->cmd != NULL ? m->cmd->cls : PX_CLASS_REFUSED;
    rq->t0 = px_io_hrtime(pool->io);
    return rq;
}

void px_rq_free(px_rq *rq)
{
    if (rq == NULL)
        return;
    px_dl_remove(&rq->cont.link); /* a slice still deferred (the request failed at once) */
    if (rq->merger != NULL) { /* never finished: the merge is dropped */
        px_buf tmp = {0};
        rq->codec->merge_end(rq->merger, &rq->msg, &tmp);
        px_buf_free(&tmp);
    }
    reply_drop(rq);
    if (!sends_inline(rq, rq->sends))
        free(rq->sends);
    px_route_tree_release(rq->tree);
    PX_MEM_SUB(rq->bytes);
    px_cache_free(rq, rq->bytes);
}

/* rq's reply is final. While px_rq_start runs, telling the owner waits until it returns (the
 * owner may free rq at once). */
static void rq_done(px_rq *rq)
{
    rq->done = true;
    if (rq->starting)
        return;
    if (rq->owner != NULL)
        rq->on_done(rq);
    else
        px_rq_free(rq);
}

/* Puts reply bytes p[0, len) for rq: into the owner's output when rq heads its queue (rq->out,
 * direct), else into rq->reply. false when out of memory: an error reply is put instead. */
static bool reply_put(px_rq *rq, const char *p, size_t len)
{
    reply_drop(rq);
    if (rq->out == NULL && len > 0 && len <= PX_CACHE_MAX) {
        /* Kept until the owner takes it: a cache block of its exact length, not a malloc. */
        char *b = px_cache_alloc(len);
        if (b != NULL) {
            memcpy(b, p, len);
            rq->reply = (px_buf){.p = b, .len = len, .cap = len};
            rq->reply_cached = true;
            rq->direct = false;
            PX_MEM_ADD(len);
            return true;
        }
    }
    px_buf *dst = rq->out != NULL ? rq->out : &rq->reply;
    size_t before = rq->out != NULL ? dst->len : 0;
    dst->len = before;
    rq->direct = rq->out != NULL;
    if (px_buf_append(dst, p, len) == 0)
        return true;
    dst->len = before;
    rq->codec->encode_error(dst, PX_ERR_SERVER, "out of memory");
    return false;
}

void px_rq_finish(px_rq *rq, const char *p, size_t len, bool error)
{
    if (!reply_put(rq, p, len))
        error = true;
    rq->error = error;
    rq->pending = 0;
    rq_done(rq);
}

void px_rq_fail(px_rq *rq, px_error why, const char *msg)
{
    px_buf b = {0};
    rq->codec->encode_error(&b, why, msg);
    px_rq_finish(rq, b.p, b.len, true);
    px_buf_free(&b);
}

const px_span *px_rq_key(const px_rq *rq, px_slot s)
{
    return &rq->msg.keys[rq->slots[s].key];
}

const char *px_rq_key_bytes(const px_rq *rq, size_t k, char *buf, size_t cap, size_t *len)
{
    const px_span *sp = &rq->msg.keys[k];
    if ((rq->msg.flags & PX_MSG_ENCODED_KEYS) == 0) {
        *len = sp->len;
        return rq->msg.raw + sp->off;
    }
    long n = rq->codec->route_key(&rq->msg, *sp, buf, cap);
    if (n < 0)
        return NULL;
    *len = (size_t)n;
    return buf;
}

bool px_rq_key_hash(px_rq *rq, size_t k, uint64_t *out)
{
    if (rq->khash[k] != 0) { /* a key whose hash is 0 is hashed again each time: the same 0 */
        *out = rq->khash[k];
        return true;
    }
    char buf[PX_MAX_ROUTE_KEY];
    size_t len;
    const char *key = px_rq_key_bytes(rq, k, buf, sizeof(buf), &len);
    if (key == NULL)
        return false;
    *out = rq->khash[k] = px_key_hash(key, len);
    return true;
}

const char *px_rq_route_key(const px_rq *rq, px_slot s, char *buf, size_t cap, size_t *len)
{
    return px_rq_key_bytes(rq, rq->slots[s].key, buf, cap, len);
}

px_where px_rq_where(const px_rq *rq, size_t k, const px_route *rt)
{
    char buf[PX_MAX_ROUTE_KEY];
    size_t len;
    const char *key = px_rq_key_bytes(rq, k, buf, sizeof(buf), &len);
    return key != NULL ? px_route_where(rt, rq, key, len) : (px_where){0, SIZE_MAX, false};
}

bool px_rq_cross(const px_rq *rq, const px_route *rt)
{
    if ((rq->msg.cmd->flags & PX_CMD_ONE_SERVER) == 0 || rq->msg.nkeys < 2)
        return false;
    uint32_t first = px_rq_where(rq, 0, rt).server;
    for (size_t k = 1; k < rq->msg.nkeys; k++)
        if (px_rq_where(rq, k, rt).server != first)
            return true;
    return false;
}

/* ---- answers ----------------------------------------------------------------------------------- */

void px_rq_answer(px_rq *rq, const px_slot *slots, size_t n, const px_reply *r)
{
    if (rq->done || n == 0)
        return;
    bool split = merged(&rq->msg);
    if (!split) {
        reply_drop(rq);
        rq->reply_kind = (uint8_t)r->kind;
        rq->reply_integer = r->integer;
        if ((rq->msg.flags & PX_MSG_SWALLOW) != 0 ||
            (rq->codec->suppress != NULL && rq->codec->suppress(&rq->msg, r))) {
            /* no reply for the client (noreply, quiet mode) */
        } else {
            (void)reply_put(rq, r->p, r->len);
        }
        rq->error = r->kind == PX_REPLY_ERROR || r->kind == PX_REPLY_FAILED;
    } else {
        if (rq->merger == NULL && (rq->merger = rq->codec->merge_begin(&rq->msg)) == NULL) {
            px_rq_fail(rq, PX_ERR_SERVER, "out of memory");
            return;
        }
        uint32_t stack[64], *keys = n <= 64 ? stack : malloc(n * sizeof(*keys));
        if (keys == NULL) {
            px_rq_fail(rq, PX_ERR_SERVER, "out of memory");
            return;
        }
        for (size_t i = 0; i < n; i++)
            keys[i] = rq->slots[slots[i]].key;
        rq->codec->merge_part(rq->merger, &rq->msg, keys, n, r);
        if (keys != stack)
            free(keys);
    }
    rq->pending -= (uint32_t)n;
    if (rq->pending > 0)
        return;
    if (split) {
        int rc = rq->codec->merge_end(rq->merger, &rq->msg, &rq->reply);
        rq->merger = NULL;
        if (rc < 0) {
            rq->reply.len = 0;
            rq->codec->encode_error(&rq->reply, PX_ERR_SERVER, "out of memory");
        }
        rq->error = rc != 0;
    }
    rq_done(rq);
}

void px_rq_answer_error(px_rq *rq, const px_slot *slots, size_t n, px_error why, const char *msg)
{
    px_buf b = {0};
    rq->codec->encode_error(&b, why, msg);
    px_reply r = {.p = b.p, .len = b.len, .kind = PX_REPLY_ERROR};
    px_rq_answer(rq, slots, n, &r);
    px_buf_free(&b);
}

/* ---- the route tree ------------------------------------------------------------------------------ */

void px_rq_call(px_rq *rq, px_slot s, px_route *from, px_route *child)
{
    rq->slots[s].passed &= (uint8_t) ~(1u << from->level);
    child->ops->start(child, rq, s);
}

void px_rq_pass(px_rq *rq, px_slot s, px_route *from, px_route *child)
{
    rq->slots[s].passed |= (uint8_t)(1u << from->level);
    child->ops->start(child, rq, s);
}

/* The route slot s's answer from `from` goes to: the nearest ancestor that did not pass it on,
 * below the route the request started on (NULL: the request itself; a side request started
 * on a subtree answers at that subtree's top). O(levels). */
static px_route *answer_to(const px_rq *rq, px_slot s, const px_route *from)
{
    const px_route *top = rq->route;
    if (from == top)
        return NULL;
    px_route *to = from->parent;
    while (to != NULL && (rq->slots[s].passed >> to->level & 1u) != 0) {
        if (to == top)
            return NULL;
        to = to->parent;
    }
    return to;
}

void px_rq_return(px_rq *rq, px_route *from, const px_slot *slots, size_t n, const px_reply *r)
{
    /* Slots that go to the same route go together (a part's slots usually do: one call). rq
     * lives until the last group is delivered: until then some slot here is unanswered. */
    for (size_t i = 0; i < n;) {
        px_route *to = answer_to(rq, slots[i], from);
        size_t j = i + 1;
        while (j < n && answer_to(rq, slots[j], from) == to)
            j++;
        if (to != NULL) {
            px_route *via = from;
            while (via->parent != to)
                via = via->parent;
            rq->via = via;
            to->ops->reply(to, rq, slots + i, j - i, r);
        } else if (r->kind == PX_REPLY_FAILED && !rq->side) { /* nothing could serve them */
            char reason[256];
            size_t rl = r->len < sizeof(reason) - 1 ? r->len : sizeof(reason) - 1;
            memcpy(reason, r->p, rl);
            reason[rl] = '\0';
            px_rq_answer_error(rq, slots + i, j - i, PX_ERR_SERVER, reason);
        } else {
            px_rq_answer(rq, slots + i, j - i, r);
        }
        i = j;
    }
}

void px_rq_return_error(px_rq *rq, px_route *from, const px_slot *slots, size_t n, px_error why,
                        const char *msg)
{
    px_buf b = {0};
    rq->codec->encode_error(&b, why, msg);
    px_reply r = {.p = b.p, .len = b.len, .kind = PX_REPLY_ERROR};
    px_rq_return(rq, from, slots, n, &r);
    px_buf_free(&b);
}

/* ---- sends ------------------------------------------------------------------------------------- */

void px_rq_send(px_rq *rq, px_slot s, px_route *from, px_server *to)
{
    px_rq_send_op(rq, s, from, to, rq->slots[s].alone ? PX_SEND_ALONE : PX_SEND_REQUEST);
}

void px_rq_send_op(px_rq *rq, px_slot s, px_route *from, px_server *to, px_send_op op)
{
    px_rq_slot *sl = &rq->slots[s];
    if (sl->ntried < PX_MAX_DEPTH)
        sl->tried[sl->ntried++] = to->uid;
    if (rq->sends_cap == 0) { /* the first: in the request itself */
        rq->sends = rq->sends_block != NULL ? rq->sends_block : &rq->send1;
        rq->sends_cap = rq->sends_block != NULL ? rq->block_cap : 1;
    } else if (rq->nsends == rq->sends_cap) {
        size_t cap = rq->sends_cap < 4 ? 4 : rq->sends_cap * 2;
        bool own = sends_inline(rq, rq->sends);
        px_rq_queued *a = realloc(own ? NULL : rq->sends, cap * sizeof(*a));
        if (a == NULL) {
            px_rq_answer_error(rq, &s, 1, PX_ERR_SERVER, "out of memory");
            return;
        }
        if (own)
            memcpy(a, rq->sends, rq->nsends * sizeof(*a));
        rq->sends = a;
        rq->sends_cap = cap;
    }
    rq->sends[rq->nsends++] = (px_rq_queued){to, from, s, (uint8_t)op, sl->passed};
}

/* By server, route and passed bits, the coalesced sends first, then by slot. */
static int send_order(const void *a, const void *b)
{
    const px_rq_queued *x = a, *y = b;
    if (x->server->uid != y->server->uid)
        return x->server->uid < y->server->uid ? -1 : 1;
    if (x->route != y->route)
        return (uintptr_t)x->route < (uintptr_t)y->route ? -1 : 1;
    if (x->passed != y->passed)
        return x->passed < y->passed ? -1 : 1;
    if ((x->op == PX_SEND_REQUEST) != (y->op == PX_SEND_REQUEST))
        return x->op == PX_SEND_REQUEST ? -1 : 1;
    return x->slot < y->slot ? -1 : x->slot > y->slot;
}

/* sends[0, n) in send_order: insertion sort for the few sends of a multiget (qsort's merge
 * sort allocated and cost 2 % of a 10-key multiget's CPU), qsort beyond. */
static void sort_sends(px_rq_queued *sends, size_t n)
{
    if (n > 32) {
        qsort(sends, n, sizeof(*sends), send_order);
        return;
    }
    for (size_t i = 1; i < n; i++) {
        px_rq_queued x = sends[i];
        size_t j = i;
        while (j > 0 && send_order(&sends[j - 1], &x) > 0) {
            sends[j] = sends[j - 1];
            j--;
        }
        sends[j] = x;
    }
}

/* Whether queued send b joins a's backend request. */
static bool same_frag(const px_rq_queued *a, const px_rq_queued *b)
{
    return a->server == b->server && a->route == b->route && a->passed == b->passed &&
           a->op == PX_SEND_REQUEST && b->op == PX_SEND_REQUEST;
}

typedef struct encode_arg {
    const px_rq *rq;
    const px_frag *f;
} encode_arg;

/* The backend request for fragment f: the message for the keys of f's slots. */
static int encode_frag(void *arg, px_buf *out, uint8_t *expect)
{
    const encode_arg *ea = arg;
    const px_rq *rq = ea->rq;
    const px_frag *f = ea->f;
    /* Not zero-filled (this runs per request): the first f->nslots are written below. */
    uint32_t stack[64], *keys = f->nslots <= 64 ? stack : malloc(f->nslots * sizeof(*keys));
    if (keys == NULL)
        return -1;
    stack[0] = 0; /* read by no one when nslots is 0, but the compiler cannot tell */
    for (size_t i = 0; i < f->nslots; i++)
        keys[i] = rq->slots[f->slots[i]].key;
    int rc = rq->codec->encode_request(out, &rq->msg, keys, f->nslots, expect);
    if (keys != stack)
        free(keys);
    return rc;
}

/* An answer r to slots[0, n) of rq, for route rt's reply(). Whatever the routes send in answer
 * goes out when they are done (one flush), and the owner hears of completion only then: a route
 * may send, call and return in any order without rq going away under it. */
static void deliver(px_rq *rq, px_route *rt, px_route *via, const px_slot *slots, size_t n,
                    const px_reply *r)
{
    bool was = rq->starting;
    rq->starting = true;
    rq->via = via;
    rt->ops->reply(rt, rq, slots, n, r);
    if (!rq->done)
        px_rq_flush(rq);
    rq->starting = was;
    if (!was && rq->done)
        rq_done(rq);
}

/* A fragment's outcome: to the route that sent it. */
static void frag_done(px_frag *f, const px_reply *r)
{
    deliver(f->ctx, f->tag, NULL, f->slots, f->nslots, r);
}

/* A tracking command (codec->encode_track(op, id)) as px_server_send's encoder, expecting
 * nothing of its reply but that it comes. */
typedef struct track_cmd {
    const px_codec *codec;
    px_track_op op;
    uint64_t id;
} track_cmd;

static int track_cmd_encode(void *arg, px_buf *out, uint8_t *expect)
{
    const track_cmd *c = arg;
    *expect = 0;
    return c->codec->encode_track(out, c->op, c->id);
}

/* Server-assisted invalidation (track.h): a slot marked track (a near-cache fill) sent to a
 * server whose tracking is live goes after the link's tracking turned on (again: the link may be
 * new) and CLIENT CACHING yes, on the same connection (the same client and dialect), so that the
 * server tracks this read and no other. Their replies are the connection's setup's, dropped (an
 * error is logged). A send that cannot be tracked clears the mark: the read was not tracked, so
 * nothing of it is kept (route_near.c). Cost: two small requests per fill, fills being a hot
 * key's misses. A read of a client with CLIENT TRACKING on (px_rq.ctrack, client_track.h) goes
 * the same way, every fragment of it: its keys' invalidations come to this worker's links,
 * which pass them on to the client; one not tracked is told to the client (ctrack_lost). */
static void send_tracking(px_rq *rq, px_server *s, const px_frag *f)
{
    bool fill = f->nslots == 1 && rq->slots[f->slots[0]].track;
    if (!fill && !rq->ctrack)
        return;
    if (rq->ctrack_bcast && !fill) { /* its server broadcasts, or the client is flushed */
        const char *const *p;
        const uint32_t *len;
        size_t n;
        px_pool *pool = rq->pool;
        bool own = s >= pool->servers && s < pool->servers + pool->nservers;
        uint64_t want = px_ctrack_bcast_want(pool->ctrack, &p, &len, &n);
        bool ok = own && s->track.id != 0 && want != 0 && s->track.bcast_ver == want;
        rq->ctrack_sent = rq->ctrack_sent || ok;
        rq->ctrack_lost = rq->ctrack_lost || !ok;
        return;
    }
    bool tracked = false, *track = fill ? &rq->slots[f->slots[0]].track : &tracked;
    *track = s->track.id != 0 && rq->codec->encode_track != NULL;
    static const px_track_op ops[] = {PX_TRACK_ON, PX_TRACK_CACHING};
    for (size_t i = 0; *track && i < sizeof(ops) / sizeof(ops[0]); i++) {
        px_frag *t = px_frag_new(0);
        track_cmd ta = {rq->codec, ops[i], s->track.id};
        if (t != NULL) {
            t->kind = PX_FRAG_INIT;
            t->cid = f->cid;
            t->dialect = f->dialect;
            t->what = i == 0 ? "CLIENT TRACKING" : "CLIENT CACHING";
        }
        if (t == NULL || px_server_send(s, t, track_cmd_encode, &ta) != 0) {
            px_frag_free(t);
            *track = false;
        }
    }
    if (rq->ctrack) { /* a tracking client's read (client_track.h) */
        /* tracked for the client only by one of the pool's own servers: a gutter pool's, a
         * retired or a staged server's invalidations are not this pool's (track.h) */
        px_pool *pool = rq->pool;
        bool own = s >= pool->servers && s < pool->servers + pool->nservers;
        rq->ctrack_sent = rq->ctrack_sent || (*track && own);
        rq->ctrack_lost = rq->ctrack_lost || !*track || !own;
    }
}

void px_rq_flush(px_rq *rq)
{
    size_t n = rq->nsends;
    if (n == 0)
        return;
    /* Taken (a copy of send1): a synchronous failure may send again. */
    px_rq_queued one = {0}, *sends = rq->sends;
    if (sends == &rq->send1) {
        one = rq->send1;
        sends = &one;
    }
    rq->sends = NULL;
    rq->nsends = rq->sends_cap = 0;
    if (n > 1)
        sort_sends(sends, n);
    size_t nfrags = 1;
    for (size_t i = 1; i < n; i++)
        nfrags += !same_frag(&sends[i - 1], &sends[i]);
    px_frag *stack[8], **frags = nfrags <= 8 ? stack : calloc(nfrags, sizeof(*frags));
    px_server *fstack[8], **servers = nfrags <= 8 ? fstack : calloc(nfrags, sizeof(*servers));
    bool ok = frags != NULL && servers != NULL;
    size_t built = 0;
    for (size_t i = 0; ok && i < n;) {
        size_t j = i + 1;
        while (j < n && same_frag(&sends[i], &sends[j]))
            j++;
        px_frag *f = px_frag_new(j - i);
        if (f == NULL) {
            ok = false;
            break;
        }
        f->done = frag_done;
        f->ctx = rq;
        f->tag = sends[i].route;
        f->cid = rq->cid;
        f->dialect = rq->msg.dialect;
        for (size_t k = i; k < j; k++)
            f->slots[k - i] = sends[k].slot;
        frags[built] = f;
        servers[built++] = sends[i].server;
        i = j;
    }
    if (!ok) {
        for (size_t i = 0; i < built; i++)
            px_frag_free(frags[i]);
        /* The owner hears of completion only after the loop: sends may be in rq's block. */
        bool was = rq->starting;
        rq->starting = true;
        for (size_t i = 0; i < n; i++)
            px_rq_answer_error(rq, &sends[i].slot, 1, PX_ERR_SERVER, "out of memory");
        rq->starting = was;
        if (sends != &one && !sends_inline(rq, sends))
            free(sends);
        if (frags != stack)
            free(frags);
        if (servers != fstack)
            free(servers);
        if (!was && rq->done)
            rq_done(rq);
        return;
    }
    if (sends != &one && !sends_inline(rq, sends))
        free(sends);
    if (merged(&rq->msg) && rq->msg.cmd->cls == PX_CLASS_MULTI)
        rq->pool->stats.fragments += built;
    /* Hand-offs: from here on rq may complete (and be freed) at any send. */
    for (size_t i = 0; i < built; i++) {
        px_frag *f = frags[i];
        encode_arg ea = {rq, f};
        send_tracking(rq, servers[i], f);
        if (px_server_send(servers[i], f, encode_frag, &ea) != 0) {
            px_rq_answer_error(rq, f->slots, f->nslots, PX_ERR_SERVER, "out of memory");
            px_frag_free(f);
        }
    }
    if (frags != stack)
        free(frags);
    if (servers != fstack)
        free(servers);
}

/* The next PX_RQ_SLICE slots of rq, their sends flushed; the rest deferred. The owner is told
 * of completion only once this returns (rq->starting). */
static void start_slice(px_rq *rq)
{
    px_route *rt = rq->route;
    uint32_t end = rq->nslots - rq->started > PX_RQ_SLICE ? rq->started + PX_RQ_SLICE : rq->nslots;
    rq->starting = true;
    while (rq->started < end && !rq->done)
        rt->ops->start(rt, rq, rq->started++);
    if (!rq->done)
        px_rq_flush(rq);
    if (!rq->done && rq->started < rq->nslots)
        px_io_defer(rq->pool->io, &rq->cont);
    rq->starting = false;
    if (rq->done)
        rq_done(rq);
}

static void cont_cb(px_flushable *f)
{
    start_slice(PX_CONTAINER(f, px_rq, cont));
}

void px_rq_start(px_rq *rq, px_route *rt)
{
    rq->route = rt;
    if (rq->pool->tree != NULL && rt == rq->pool->route) {
        rq->tree = rq->pool->tree; /* kept while the request is in flight, even past a reload */
        rq->tree->refs++;
    }
    rq->cont.flush = cont_cb;
    start_slice(rq);
}

/* ---- side requests ------------------------------------------------------------------------- */

/* A side request's owner: the slot of the request waiting for it, or its detached callback. */
typedef struct px_side {
    px_rq *parent; /* NULL: detached */
    px_slot slot;
    px_route *from, *start;
    px_side_done done;
    void *arg;
} px_side;

/* The side request's answer: to the route waiting for it, or to its callback. */
static void side_done(px_rq *f)
{
    px_side *sd = f->owner;
    px_reply r = {.p = f->reply.p, .len = f->reply.len, .kind = (px_reply_kind)f->reply_kind,
                  .integer = f->reply_integer};
    if (sd->parent != NULL)
        deliver(sd->parent, sd->from, sd->start, &sd->slot, 1, &r);
    else if (sd->done != NULL)
        sd->done(sd->arg, f, &r);
    px_cache_free(sd, sizeof(*sd));
    px_rq_free(f);
}

/* Starts bytes[0, len) as a side request of cause (its connections) on `start`, a route of
 * pool's tree `tree` (NULL: pool's root, whose tree px_rq_start holds), owned by sd. 0, or -1
 * (nothing started, sd still the caller's). */
static int side_start(const px_rq *cause, px_pool *pool, px_route_tree *tree, px_route *start,
                      const char *bytes, size_t len, px_side *sd)
{
    px_span args[16], keys[16];
    px_msg m = {.args = args, .args_cap = 16, .keys = keys, .keys_cap = 16};
    px_limits lim = pool->limits;
    lim.max_request = lim.max_value = UINT32_MAX; /* a copy is as large as the value it copies */
    size_t consumed = 0, need = 0;
    char err[160];
    if (pool->codec->parse_request(&lim, bytes, len, &m, &consumed, &need, err, sizeof(err)) !=
            PX_PARSE_OK ||
        consumed != len || m.cmd == NULL || m.reject[0] != '\0' || m.nargs > m.args_cap ||
        m.nkeys > m.keys_cap)
        return -1;
    m.dialect = cause->msg.dialect;
    m.flags |= PX_MSG_WHOLE; /* its one key's reply, as it came: its kind, a failure as one */
    px_rq *f = px_rq_new(pool, &m, cause->cid);
    if (f == NULL)
        return -1;
    f->side = true;
    f->owner = sd;
    f->on_done = side_done;
    if (tree != NULL && start != pool->route) { /* a subtree of a tree the cause holds: held
                                                    by the side too (px_rq_start holds a root's) */
        f->tree = tree;
        tree->refs++;
    }
    px_rq_start(f, start); /* may complete (and free f and sd) at once */
    return 0;
}

int px_rq_fork(px_rq *rq, px_slot s, px_route *from, px_pool *pool, px_route *start,
               const char *bytes, size_t len)
{
    px_side *sd = px_cache_alloc(sizeof(*sd));
    if (sd == NULL)
        return -1;
    *sd = (px_side){.parent = rq, .slot = s, .from = from, .start = start};
    if (side_start(rq, pool, pool == rq->pool ? rq->tree : NULL, start, bytes, len, sd) != 0) {
        px_cache_free(sd, sizeof(*sd));
        return -1;
    }
    return 0;
}

int px_rq_fire(const px_rq *rq, px_route *start, const char *bytes, size_t len,
               px_side_done done, void *arg)
{
    px_side *sd = px_cache_alloc(sizeof(*sd));
    if (sd == NULL)
        return -1;
    *sd = (px_side){.done = done, .arg = arg};
    if (side_start(rq, rq->pool, rq->tree, start, bytes, len, sd) != 0) {
        px_cache_free(sd, sizeof(*sd));
        return -1;
    }
    return 0;
}

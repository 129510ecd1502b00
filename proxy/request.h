/* SPDX-License-Identifier: Apache-2.0 */
/*
 * request.h — a client request in flight (px_rq): its own copy of the parsed message, one slot
 * per key of a split command (one otherwise), the sends a route made and not yet flushed, the
 * merge of its parts, and its completion through rq->on_done (the client's callback: the
 * request layer never calls up into client.c).
 *
 * Lifetime: created by dispatch; done once every slot is answered (rq->done, on_done called
 * once); freed by its owner after that (px_rq_free), or by the request layer when its owner has
 * let go of it (owner NULL) and it completes.
 */
#ifndef CHASH_PROXY_REQUEST_H
#define CHASH_PROXY_REQUEST_H

#include "backend.h"
#include "route.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <xxhash.h>

/* The longest encoded key decoded for routing (memcached's keys: at most 250 bytes). */
#define PX_MAX_ROUTE_KEY 4096

typedef struct px_rq_slot {
    uint32_t key;                  /* index into msg.keys (0 for a command not split) */
    uint32_t ntried;
    uint32_t tried[PX_MAX_DEPTH];  /* px_server.uid of the servers it was sent to */
    uint8_t passed;                /* bit l: the route at level l passed it on (px_rq_pass): its
                                      answer skips that route */
    bool alone;                    /* a leaf sends it alone (PX_SEND_ALONE): its part's reply is
                                      this key's only (a route that reads the reply asks so) */
    bool track;                    /* sent alone to a server whose tracking is live (track.h),
                                      it is tracked there: a near-cache fill (route_near.c) */
    uint64_t state[PX_ROUTE_LEVELS]; /* the route at each level's own (px_rq_state) */
} px_rq_slot;

/* How a slot is sent. */
typedef enum px_send_op {
    PX_SEND_REQUEST, /* the request for the slot's key, coalesced with the request's others */
    PX_SEND_ALONE,   /* the request for the slot's key alone: its part's reply is that key's */
} px_send_op;

/* A send queued until px_rq_flush. Sends coalesce into one backend request only when their
 * server, route, op (PX_SEND_REQUEST) and passed bits agree: the same passed bits under the same
 * route mean the same route above takes the answer, so a part's reply is never split between
 * routes that read it differently. */
typedef struct px_rq_queued {
    px_server *server;
    px_route *route; /* the route that sent it: its reply's */
    px_slot slot;
    uint8_t op;      /* px_send_op */
    uint8_t passed;  /* the slot's px_rq_slot.passed when it was sent */
} px_rq_queued;

struct px_rq {
    px_rq *next;                /* the owner's queue (client.c) */
    void *owner;                /* the client; NULL once it let go */
    void (*on_done)(px_rq *rq); /* once, when done, while owner is set */
    px_pool *pool;
    const px_codec *codec;
    px_route *route;            /* the route its slots started on */
    px_route_tree *tree;        /* the pool's tree it started on (a reference), or NULL */
    px_msg msg;                 /* raw, args and keys are this request's own copies */
    uint64_t *khash;            /* per key of msg: its routing bytes' XXH3-64 once computed
                                   (px_rq_key_hash), 0 before */
    uint64_t cid;               /* its client's id: picks the backend connections */
    uint32_t nslots, pending;   /* slots; those not yet answered */
    px_rq_slot *slots;
    px_rq_queued *sends;          /* routed, not yet flushed: send1, sends_block, or an
                                     allocation when more */
    size_t nsends, sends_cap;
    px_rq_queued send1;           /* the one send of a command not split: no allocation */
    /* A split command's sends, in the request's own block (one per slot, up to PX_RQ_SLICE):
     * no allocation growing with its keys. Free again once a flush has taken them (nothing
     * queues sends while a flush still reads them). NULL for a command not split. */
    px_rq_queued *sends_block;
    uint32_t block_cap;
    px_merger *merger;          /* a split command's parts so far */
    px_buf reply;               /* the client's reply once done (unless direct) */
    /* The owner's output while this request heads the owner's queue (client.c sets and clears
     * it), else NULL. A reply not merged from parts is then appended there at once and direct
     * set: one copy of the reply (backend read buffer -> client output), not two, and no reply
     * buffer. Everything earlier in the owner's queue has left for that output already, so the
     * order holds. */
    px_buf *out;
    bool direct;                /* the reply went to out: reply holds nothing */
    /* reply.p is a block of the thread's cache (buf.h) of reply.cap bytes, not a px_buf
     * allocation: nothing may append to it (only a reply not merged from parts is stored so). */
    bool reply_cached;
    uint64_t t0;                /* uv_hrtime() at arrival: the latency histogram */
    uint8_t cls;                /* px_cmd_class, for the metrics */
    bool done, error;           /* complete; its reply is an error */
    bool starting;              /* in px_rq_start: on_done waits for it to return */
    bool close_after;           /* close the client once this reply is out */
    bool counted;               /* its reply bytes are in the client's `stored` (client.c) */
    bool observed;              /* counted in the metrics */
    bool shadow;                /* a shadow pool's copy of a request (route_shadow.c): not
                                   shadowed again */
    /* A read of a client with CLIENT TRACKING on (client_track.h): it bypasses the near cache
     * and the coalescing of reads, and each of its sends goes tracked (request.c); ctrack_lost:
     * a send could not be (no live link at its server), so its client is flushed after it. */
    bool ctrack, ctrack_sent, ctrack_lost;
    bool ctrack_bcast; /* a BCAST client's: tracked by its server's link registering the
                          pool's BCAST prefixes, not by CLIENT CACHING */
    bool side;                  /* a route's own request (px_rq_fork, px_rq_fire): its owner is
                                   a px_side; a failure reaching its top stays a failure */
    px_route *via;              /* the child an answer being delivered came through (px_rq_via) */
    uint8_t reply_kind;         /* px_reply_kind of its reply once done (not split) */
    int64_t reply_integer;      /* and its integer */
    size_t bytes;               /* its allocation (px_mem_held) */
    uint32_t started;           /* slots started so far (px_rq_start: PX_RQ_SLICE at a time) */
    px_flushable cont;          /* deferred to the next loop iteration while slots remain */
};

/* Slots a request starts in one loop iteration: a split command with more keys (an MGET of a
 * million) starts the rest over the next iterations, so other clients are served between its
 * slices. */
#define PX_RQ_SLICE 4096u

/* A request for m of pool's client cid, copied (m's bytes need not outlive the call). NULL when
 * out of memory. */
px_rq *px_rq_new(px_pool *pool, const px_msg *m, uint64_t cid);
void px_rq_free(px_rq *rq);
/* Finishes rq at once with reply bytes p[0, len) (error: it is an error reply). */
void px_rq_finish(px_rq *rq, const char *p, size_t len, bool error);
/* Finishes rq at once with an error of this kind (codec->encode_error). */
void px_rq_fail(px_rq *rq, px_error why, const char *msg);
/* Starts the slots of rq on route rt, PX_RQ_SLICE at a time, flushing each slice's sends; the
 * slices after the first run in later loop iterations (px_io_defer). */
void px_rq_start(px_rq *rq, px_route *rt);

/* For routes. */
const px_span *px_rq_key(const px_rq *rq, px_slot s);  /* the slot's key (raw: rq->msg.raw) */
/* The bytes slot s's key routes by: in rq->msg.raw, or decoded into buf[0, cap) (memcached's
 * base64 keys); *len their length. NULL when the key does not decode. */
const char *px_rq_route_key(const px_rq *rq, px_slot s, char *buf, size_t cap, size_t *len);
/* The same for the request's key k (an index into rq->msg.keys). */
const char *px_rq_key_bytes(const px_rq *rq, size_t k, char *buf, size_t cap, size_t *len);
/* Where the usual path under rt (route.h, px_route_where) places rq's key k; nowhere when it
 * does not decode. */
px_where px_rq_where(const px_rq *rq, size_t k, const px_route *rt);
/* Whether rq is a one-server command (MSETNX, EVAL) whose keys the usual path under rt places
 * on different servers. Cost: a lookup per key. */
bool px_rq_cross(const px_rq *rq, const px_route *rt);
/* The one hash the proxy groups keys by beside placement: XXH3-64 of a key's routing bytes
 * (hot-key detection, coalescing, the near cache's generations, the warm-up's switch and
 * generations, replicas' hot reads, shadow's share). Placement keeps the pool's own hash. */
static inline uint64_t px_key_hash(const char *key, size_t len)
{
    return XXH3_64bits(key, len);
}
/* px_key_hash of the request's key k, computed once per request (kept in rq->khash); false when
 * the key does not decode (memcached's base64). Cost: the first call a hash, then a load. */
bool px_rq_key_hash(px_rq *rq, size_t k, uint64_t *out);
/* Route from queues slot s for server `to` (recorded as tried); the reply comes back to from.
 * The sends of one request to one server from one route go as one backend request when the
 * request flushes (a slot marked alone goes alone). */
void px_rq_send(px_rq *rq, px_slot s, px_route *from, px_server *to);
/* px_rq_send with a way to send it (px_send_op). */
void px_rq_send_op(px_rq *rq, px_slot s, px_route *from, px_server *to, px_send_op op);
/* Route from has child serve slot s: the child's answer comes back to from's reply(). */
void px_rq_call(px_rq *rq, px_slot s, px_route *from, px_route *child);
/* Route from has child serve slot s in its place: the child's answer goes wherever from's
 * would (a tail call: from's reply() is not called for it). */
void px_rq_pass(px_rq *rq, px_slot s, px_route *from, px_route *child);
/* Route from's answer to slots[0, n): to the nearest route above it that called for them, or,
 * at the top, the request's (px_rq_answer). */
void px_rq_return(px_rq *rq, px_route *from, const px_slot *slots, size_t n, const px_reply *r);
/* px_rq_return of an error made by the proxy (codec->encode_error). */
void px_rq_return_error(px_rq *rq, px_route *from, const px_slot *slots, size_t n, px_error why,
                        const char *msg);
/* The child of the route whose reply() runs through which the answer came: the child called
 * (px_rq_call) or forked onto (px_rq_fork); NULL for a send of the route's own. Valid from the
 * start of reply() until the route answers or calls. */
static inline px_route *px_rq_via(const px_rq *rq)
{
    return rq->via;
}
/* Route rt's own word of state for slot s (zero until it writes it). rt must not be a leaf.
 * Routes read and write it through their own type (PX_SLOT_WORD), not as bits. */
static inline uint64_t *px_rq_state(px_rq *rq, px_slot s, const px_route *rt)
{
    return &rq->slots[s].state[rt->level];
}
/* A route's slot word as its own type T, of at most 8 bytes (all zero bits until written: NULL,
 * 0, false): declares NAME_get(rq, s, rt) and NAME_set(rq, s, rt, v). Cost: an 8-byte copy. */
#define PX_SLOT_WORD(NAME, T)                                                                   \
    _Static_assert(sizeof(T) <= sizeof(uint64_t), #T " is larger than a slot word");          \
    static inline T NAME##_get(px_rq *rq, px_slot s, const px_route *rt)                       \
    {                                                                                          \
        T v;                                                                                   \
        memcpy(&v, px_rq_state(rq, s, rt), sizeof(v));                                         \
        return v;                                                                              \
    }                                                                                          \
    static inline void NAME##_set(px_rq *rq, px_slot s, const px_route *rt, T v)               \
    {                                                                                          \
        uint64_t w = 0;                                                                        \
        memcpy(&w, &v, sizeof(v));                                                             \
        *px_rq_state(rq, s, rt) = w;                                                           \
    }
/* The request's answer to slots[0, n) (a root route's answer, or px_rq_return at the top). */
void px_rq_answer(px_rq *rq, const px_slot *slots, size_t n, const px_reply *r);
/* Answers slots[0, n) with an error made by the proxy. */
void px_rq_answer_error(px_rq *rq, const px_slot *slots, size_t n, px_error why, const char *msg);
/* Sends what was queued by px_rq_send: one backend request per server and route. */
void px_rq_flush(px_rq *rq);

/* ---- side requests: a route's own requests (a copy, a take, a delete) ----------------------
 * A side request is a request of its own, with no client, for a message a route encodes with
 * the codec (its key routed like any request's), started on a route of a tree: a child of the
 * route that sends it (the previous placement's leaf, the current placement's subtree), or
 * another pool's root (the gutter's). Only its leaves send it to a server. It goes over the
 * backend connections of its cause's client (cid, dialect), after that client's earlier
 * requests. Its bytes are not bounded by the pool's request limits (a copy of a value the
 * server holds is as large as that value). Cost: the encoding's parse, one request block. */

/* Route `from` of rq has slot s served by the side request bytes[0, len) (in the codec of
 * pool), started on `start`: a route of rq's tree below `from` when pool is rq's, else pool's
 * root. Its answer comes back to from's reply() for slot s, as a child's to px_rq_call (a
 * failure as PX_REPLY_FAILED); s stays unanswered meanwhile. 0, or -1 when the bytes do not
 * parse as one request or memory runs out (nothing started). */
int px_rq_fork(px_rq *rq, px_slot s, px_route *from, px_pool *pool, px_route *start,
               const char *bytes, size_t len);
/* The same, detached from rq (only its pool, tree and connections are taken): nobody waits
 * for it; done(arg, side, r), when not NULL, is told its answer, side being the side request
 * (alive during the call: it may cause another, px_rq_fire(side, ...)). 0, or -1 as above
 * (done is not called). */
typedef void (*px_side_done)(void *arg, const px_rq *side, const px_reply *r);
int px_rq_fire(const px_rq *rq, px_route *start, const char *bytes, size_t len,
               px_side_done done, void *arg);

#endif /* CHASH_PROXY_REQUEST_H */

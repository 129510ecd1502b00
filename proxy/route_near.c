/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_near.c — the near cache of hot keys as a route (route_near.h). Per slot:
 *
 *   a cacheable read (GET, MGET's keys; memcached get's), held fresh -> answered from memory:
 *        the reply bytes its server gave, replayed as the part they were (the merge of MGET
 *        and multi-key get takes them as any part);
 *   a cacheable read, not held -> sent alone through the child (its reply is the key's), its
 *        key's generation recorded; the reply is kept when the key is hot (the worker's
 *        detector counted at least hot_threshold / workers of its reads this window, surely) or
 *        was cached lately (an expired entry: a hot key stays cached without waiting for its
 *        threshold each window), and the generation has not moved; where the read's reply does
 *        not tell the value's remaining life (memcached's get: px_codec.near_fill), a read of a
 *        key hot or cached lately is sent as the codec's fetch instead (mg k v t f), answered
 *        as the read would have been and kept no longer than the item has left, and any other
 *        read as it came, not kept;
 *   a write or delete (any command not retryable; memcached's gat, gats, mg with T, which give
 *        an item a new lifetime: near_write.h) -> its keys' generations bumped when it is
 *        sent and again when it is answered (near.h: no read that may have seen the value
 *        before it is served after it), those it writes unnamed too (a destination, a STORE
 *        key), or every key's for a script (near_write.h), then answered as the child answers;
 *   anything else (gets with CAS, TTL, ...) -> passed on as it is.
 *
 * Entries are keyed by the command (a GET's reply is not an MGET part's), the client's dialect
 * and the key's bytes, their generations by the key alone. The TTL is counted from the
 * request's arrival, before its send: a value served is at most hot_cache old. Writes on a
 * session's own connection (a transaction's EXEC, a write after WATCH) go past the tree and end
 * their keys' entries the same way (session.c, near_write.h). Writes that do not pass through
 * this proxy (another proxy, a client of the server, an expiry or eviction) end the entry when
 * the server's invalidation arrives (track.h: a Redis pool with near_tracking, the fill kept
 * only while its server's link is live); for memcached pools, and Redis servers that refuse
 * tracking, the TTL (and a memcached item's own lifetime) alone bounds them. A slot's word at this route (near_word): its step, whether the key was cached lately,
 * and its generation when the read began.
 */
#include "route_near.h"
#include "near_write.h"
#include "pool.h"
#include "request.h"
#include "track.h"

#include "hot/near.h"

#include <stdlib.h>
#include <string.h>

enum { N_USUAL = 0, N_READ = 1, N_WRITE = 2, N_FILL = 3 };
#define MAX_CACHED_KEY 1024u /* longer keys are not cached */

/* A stored reply: its kind and integer before its bytes. */
typedef struct stored_head {
    uint8_t kind;
    int64_t integer;
} stored_head;

/* Slot s's key bytes (decoded), its hash, and the entry's key (the command, the client's
 * dialect, then the key) in ek[0, *eklen): a reply is replayed only to a client of the dialect
 * it was written for. False when the key does not decode or is too long to cache. */
static bool entry_key(px_rq *rq, px_slot s, uint64_t *hh, char *ek, size_t *eklen)
{
    char buf[PX_MAX_ROUTE_KEY];
    size_t len;
    const px_span *span = px_rq_key(rq, s);
    const char *key = span != NULL ? px_rq_key_bytes(rq, rq->slots[s].key, buf, sizeof(buf), &len)
                                   : NULL;
    if (key == NULL || len > MAX_CACHED_KEY || !px_rq_key_hash(rq, rq->slots[s].key, hh))
        return false;
    const px_cmd *cmd = rq->msg.cmd;
    memcpy(ek, &cmd, sizeof(cmd));
    ek[sizeof(cmd)] = (char)rq->msg.dialect;
    memcpy(ek + sizeof(cmd) + 1, key, len);
    *eklen = sizeof(cmd) + 1 + len;
    return true;
}

/* The route's state: the worker's near cache of the pool, its share of hot_cache_max_bytes
 * and TTL, and the bytes it holds (counted in px_mem_held and the pool's gauge). */
typedef struct near_state {
    ch__near *cache;
    px_pool *pool;
    size_t bytes, held;
    uint64_t ttl_ns;
} near_state;

static ch__near *cache_of(const px_route *rt)
{
    const near_state *st = rt->state;
    return st != NULL ? st->cache : NULL;
}

/* The near cache's bytes into the process budget (px_mem_held) and the pool's gauge, after a
 * change of its contents. */
static void account(px_route *rt)
{
    near_state *ns = rt->state;
    ch__near_stats st;
    ch__near_stats_get(ns->cache, &st);
    if (st.bytes > ns->held) {
        PX_MEM_ADD(st.bytes - ns->held);
        ns->pool->m.near.bytes += st.bytes - ns->held;
    } else {
        PX_MEM_SUB(ns->held - st.bytes);
        ns->pool->m.near.bytes -= ns->held - st.bytes;
    }
    ns->held = st.bytes;
}

/* A write's keys (near_write.h): slot s's, or every key of a command not split per key (EVAL,
 * RENAME, SORT ... STORE, ...), whose one slot stands for them all, with those it writes
 * unnamed. */
static void invalidate(px_rq *rq, px_slot s, bool sent)
{
    bool whole = rq->nslots < rq->msg.nkeys || rq->nslots == 1;
    px_near_forget(rq, whole ? SIZE_MAX : rq->slots[s].key, sent);
}

typedef struct near_word {
    uint32_t gen; /* a read's: its key's generation when it began (ch__near_gen) */
    uint8_t step;
    bool known; /* a read's: its key was cached lately (kept whether hot or not) */
} near_word;
PX_SLOT_WORD(near_word, near_word)

static void set_state(px_rq *rq, px_slot s, const px_route *rt, unsigned step, uint32_t gen)
{
    near_word_set(rq, s, rt, (near_word){gen, (uint8_t)step, false});
}

/* Read slot s of hot key (hash hh; known: cached lately) is sent as the codec's fetch, whose
 * reply tells the value's remaining life (memcached's mg ... t), when the key is worth keeping;
 * else as it came, its reply not kept: what cannot be bounded is not cached. */
static void fill(px_route *rt, px_rq *rq, px_slot s, uint64_t hh, bool known)
{
    char buf[PX_MAX_ROUTE_KEY];
    size_t len;
    const char *key = px_rq_route_key(rq, s, buf, sizeof(buf), &len);
    px_buf b = {0};
    uint8_t expect;
    near_word w = near_word_get(rq, s, rt);
    w.step = N_FILL;
    near_word_set(rq, s, rt, w);
    if (!(known || px_pool_hot(rq->pool, hh)) || key == NULL || rq->codec->encode_fetch == NULL ||
        rq->codec->encode_fetch(&b, key, len, &expect) != 0 ||
        px_rq_fork(rq, s, rt, rq->pool, rt->child[0], b.p, b.len) != 0) {
        set_state(rq, s, rt, N_USUAL, 0);
        px_rq_pass(rq, s, rt, rt->child[0]);
    }
    px_buf_free(&b);
}

static void near_start(px_route *rt, px_rq *rq, px_slot s)
{
    px_pool *pool = rq->pool;
    const px_cmd *cmd = rq->msg.cmd;
    char ek[sizeof(void *) + 1 + MAX_CACHED_KEY];
    size_t eklen;
    uint64_t hh;
    ch__near *cache = cache_of(rt);
    /* A shadow pool's copy of a read is answered by its servers (it is compared); a copy of a
     * write ends its keys' entries here as any write does. */
    if (rq->msg.nkeys == 0 || (rq->shadow && !px_near_writes(rq))) {
        set_state(rq, s, rt, N_USUAL, 0);
        px_rq_pass(rq, s, rt, rt->child[0]);
        return;
    }
    ch__near_gens *gens = pool->shared->near_gens;
    /* A write invalidates through the generations every worker's cache reads, even on a tree
     * whose cache a reload's tree took over (a side request of an old request starts late). */
    if (px_near_writes(rq)) {
        invalidate(rq, s, true);
        set_state(rq, s, rt, N_WRITE, 0);
        px_rq_call(rq, s, rt, rt->child[0]);
        return;
    }
    /* A tracking client's read goes to its server, tracked there (client_track.h): an entry
     * filled on another worker would have its invalidation come to that worker's link. */
    if (cache == NULL || rq->codec->near_cacheable == NULL || !rq->codec->near_cacheable(cmd) ||
        rq->ctrack || !entry_key(rq, s, &hh, ek, &eklen)) {
        set_state(rq, s, rt, N_USUAL, 0);
        px_rq_pass(rq, s, rt, rt->child[0]);
        return;
    }
    size_t len = 0;
    bool known = false;
    const char *p = ch__near_get(cache, hh, ek, eklen, px_io_hrtime(pool->io), &len, &known);
    if (p != NULL) {
        stored_head h;
        memcpy(&h, p, sizeof(h));
        px_reply r = {p + sizeof(h), len - sizeof(h), (px_reply_kind)h.kind, h.integer};
        pool->m.near.hits++;
        px_rq_return(rq, rt, &s, 1, &r);
        return;
    }
    pool->m.near.misses++;
    near_word_set(rq, s, rt, (near_word){ch__near_gen(gens, hh), N_READ, known});
    if (rq->codec->near_fill != NULL) { /* a reply that does not tell the value's life */
        fill(rt, rq, s, hh, known);
        return;
    }
    rq->slots[s].alone = true; /* its part's reply is this key's */
    /* a read whose reply may be kept is tracked by its server (track.h) */
    rq->slots[s].track = px_track_wanted(pool) && (known || px_pool_hot(pool, hh));
    px_rq_call(rq, s, rt, rt->child[0]);
}

/* A read's reply r for slot s, the part's only slot: kept when it is a value of a key hot or
 * cached lately, to serve at most life_ns from the read's arrival (and the TTL). */
static void keep(px_route *rt, px_rq *rq, px_slot s, const px_reply *r, uint64_t life_ns)
{
    px_pool *pool = rq->pool;
    near_word w = near_word_get(rq, s, rt);
    char ek[sizeof(void *) + 1 + MAX_CACHED_KEY];
    size_t eklen;
    uint64_t hh;
    ch__near *cache = cache_of(rt);
    if (r->kind != PX_REPLY_VALUE || cache == NULL ||
        (rq->codec->is_miss != NULL && rq->codec->is_miss(&rq->msg, r)) || /* an MGET null */
        !entry_key(rq, s, &hh, ek, &eklen) ||
        !(w.known || px_pool_hot(pool, hh)) || !px_track_keepable(pool, rq, s))
        return;
    stored_head h = {(uint8_t)r->kind, r->integer};
    size_t n = sizeof(h) + r->len;
    char small[512], *b = n <= sizeof(small) ? small : malloc(n);
    if (b == NULL)
        return;
    memcpy(b, &h, sizeof(h));
    memcpy(b + sizeof(h), r->p, r->len);
    if (ch__near_put(cache, hh, ek, eklen, w.gen, rq->t0, life_ns, px_io_hrtime(pool->io), b, n))
        pool->m.near.stores++;
    if (b != small)
        free(b);
    account(rt);
}

/* The fetch's reply f for read slot s (N_FILL): the read's reply made of it, kept within the
 * life it tells, and answered; when it is not a fetch's reply, the read is sent as it came (its
 * reply not kept). */
static void filled(px_route *rt, px_rq *rq, px_slot s, const px_reply *f)
{
    px_buf b = {0};
    px_reply r;
    uint64_t life = 0;
    int rc = rq->codec->near_fill(&b, &rq->msg, rq->slots[s].key, f, &r, &life);
    if (rc == 0) {
        set_state(rq, s, rt, N_USUAL, 0);
        px_rq_call(rq, s, rt, rt->child[0]);
    } else if (rc < 0) {
        set_state(rq, s, rt, N_USUAL, 0);
        px_rq_return_error(rq, rt, &s, 1, PX_ERR_SERVER, "out of memory");
    } else {
        keep(rt, rq, s, &r, life);
        set_state(rq, s, rt, N_USUAL, 0);
        px_rq_return(rq, rt, &s, 1, &r);
    }
    px_buf_free(&b);
}

static void near_reply(px_route *rt, px_rq *rq, const px_slot *slots, size_t n,
                       const px_reply *r)
{
    if (n == 1 && near_word_get(rq, slots[0], rt).step == N_FILL) { /* a fork's answer */
        filled(rt, rq, slots[0], r);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        px_slot s = slots[i];
        unsigned step = near_word_get(rq, s, rt).step;
        if (step == N_WRITE) {
            invalidate(rq, s, false);
        } else if (step == N_READ) {
            if (n == 1) /* a part of several keys is not one key's reply */
                keep(rt, rq, s, r, UINT64_MAX);
            rq->slots[s].alone = false;
            rq->slots[s].track = false;
        }
        set_state(rq, s, rt, N_USUAL, 0);
    }
    /* one answer for the slots of one part: rq may be gone after it */
    px_rq_return(rq, rt, slots, n, r);
}

/* This worker's share of the pool's near cache: its bytes (0: none) and TTL. */
static void near_settings(const px_pool *pool, size_t *bytes, uint64_t *ttl_ns)
{
    const ch_conf_pool *pc = pool->conf;
    unsigned workers = pool->shared->near_workers > 0 ? pool->shared->near_workers : 1;
    *bytes = pc->hot_cache_ms > 0 && pool->shared->near_gens != NULL
                 ? (size_t)pc->hot_cache_max_bytes / workers
                 : 0;
    *ttl_ns = (uint64_t)pc->hot_cache_ms * 1000000u;
}

bool px_route_near_wanted(const px_pool *pool)
{
    size_t bytes;
    uint64_t ttl;
    near_settings(pool, &bytes, &ttl);
    return bytes > 0;
}

static void near_free(px_route *rt)
{
    near_state *ns = rt->state;
    if (ns == NULL)
        return;
    ch__near_free(ns->cache);
    PX_MEM_SUB(ns->held);
    ns->pool->m.near.bytes -= ns->held;
    free(ns);
    rt->state = NULL;
}

/* The cache of the tree this one replaces is taken over when its settings are the same (a
 * reload keeps what it holds; its old tree's requests then keep nothing more), else a new one. */
static int near_build(px_route *rt, px_pool *pool, px_route *was)
{
    size_t bytes;
    uint64_t ttl;
    near_settings(pool, &bytes, &ttl);
    near_state *old = was != NULL ? was->state : NULL;
    if (old != NULL && old->bytes == bytes && old->ttl_ns == ttl && old->pool == pool) {
        rt->state = old;
        was->state = NULL;
        return 0;
    }
    near_state *ns = calloc(1, sizeof(*ns));
    if (ns == NULL || (ns->cache = ch__near_new(pool->shared->near_gens, bytes, ttl)) == NULL) {
        free(ns);
        return -1;
    }
    ns->pool = pool;
    ns->bytes = bytes;
    ns->ttl_ns = ttl;
    rt->state = ns;
    return 0;
}

const px_route_ops px_route_near_ops = {
    .name = "near",
    .start = near_start,
    .reply = near_reply,
    .build = near_build,
    .free = near_free,
};

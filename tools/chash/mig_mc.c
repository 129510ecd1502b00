/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mig_mc.c — the memcached driver of `chash migrate`, over mc_client.c.
 *
 * Enumeration is "lru_crawler metadump all" on a connection of its own, repeated until the keys
 * listed are as many as the server's curr_items (see "the dumps" below); the keys are then
 * handed out in batches, copied over a second connection. The dump has no cursor: the checkpoint records only whether a server is
 * done, and a rerun dumps an unfinished server again.
 *
 * A copy is the proxy's warm-up copy (proxy/proto/mc.h, "copying an item"): "mg <key> v t f" at
 * the source (value, seconds left, client flags), read by ch_mc_copy_read, then "add" (or "set"
 * with --replace) at the new owner with the flags and ch_mc_copy_exptime's exptime for the time
 * left (memcached's 30-day rule). The store is text, not the proxy's "ms ... ME": memcached
 * 1.6.18 drops the key when it refuses an ms as too large, so an ms would delete a newer key at
 * the new owner where add keeps it. Pipelines are cut so that the values held at once stay under
 * CHUNK_BYTES (by the sizes the dump reports), whatever the batch size.
 */
#define _POSIX_C_SOURCE 200809L
#include "migrate.h"

#include "mc_client.h"

#include <mc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHUNK_BYTES (16u << 20)
#define BUSY_TRIES 100      /* the crawler busy: tries, 100 ms apart */

struct mig_conn {
    mc_client *cmd; /* mg, add/set, stats; the dumps have connections of their own */
    mig_server s;
    int timeout_ms;
};

static mig_conn *m_open(const mig_server *s, const mig_auth *a, char *err, size_t errlen)
{
    mc_client *mc = mc_connect(s->host, s->port, a->timeout_ms, err, errlen);
    if (mc == NULL)
        return NULL;
    /* One round trip now, so that a server that is not a memcached is named at the start. */
    uint64_t n;
    int rc = mc_curr_items(mc, &n);
    if (rc != 0) {
        snprintf(err, errlen, "stats: %s", mc_error(mc));
        mc_close(mc);
        return NULL;
    }
    mig_conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        snprintf(err, errlen, "out of memory");
        mc_close(mc);
        return NULL;
    }
    c->cmd = mc;
    c->s = *s;
    c->timeout_ms = a->timeout_ms;
    return c;
}

static void m_close(mig_conn *c)
{
    if (c) {
        mc_close(c->cmd);
        free(c);
    }
}

static uint64_t m_count(mig_conn *c)
{
    uint64_t n = 0;
    return mc_curr_items(c->cmd, &n) == 0 ? n : 0;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- the dumps: a server's keys, deduplicated ------------------------------------------------
 * One metadump may list only part of a server: the crawler walks only the LRUs it could start
 * on (one still finishing an earlier crawl is left out, seen on memcached 1.6.18 right after
 * another dump), and items that move between LRUs during the walk can be passed over. The
 * driver therefore dumps a server until the keys listed, deduplicated, are as many as the
 * server's curr_items (read before each dump, after the previous one reclaimed what had
 * expired), at most MAX_DUMPS times with a growing pause, reading each dump straight through;
 * what is still missing then is reported (mig_cursor.unlisted). Memory: the server's keys,
 * about key length + 40 bytes each. */

#define MAX_DUMPS 8
#define ARENA_CHUNK (1u << 20)

typedef struct dump_key {
    const char *key;
    uint32_t len;
    int64_t exp;
    uint64_t size;
} dump_key;

typedef struct dump_set {
    dump_key *keys; /* in the order first seen */
    size_t n, cap;
    uint32_t *slots; /* open addressing: index + 1 into keys; 0 empty; load <= 1/2 */
    size_t nslots;
    char **chunks; /* the keys' bytes */
    size_t nchunks, used;
    size_t next; /* the next key to hand out */
    int dumps;
    bool dumped;
} dump_set;

static uint64_t key_hash(const char *k, size_t len)
{
    uint64_t h = 14695981039346656037ull; /* FNV-1a 64 */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)k[i]) * 1099511628211ull;
    return h;
}

static void set_free(dump_set *d)
{
    if (d == NULL)
        return;
    for (size_t i = 0; i < d->nchunks; i++)
        free(d->chunks[i]);
    free(d->chunks);
    free(d->keys);
    free(d->slots);
    free(d);
}

static bool set_grow(dump_set *d)
{
    size_t ns = d->nslots ? d->nslots * 2 : 4096;
    uint32_t *slots = calloc(ns, sizeof(*slots));
    if (slots == NULL)
        return false;
    for (size_t i = 0; i < d->n; i++) {
        size_t h = key_hash(d->keys[i].key, d->keys[i].len) & (ns - 1);
        while (slots[h] != 0)
            h = (h + 1) & (ns - 1);
        slots[h] = (uint32_t)(i + 1);
    }
    free(d->slots);
    d->slots = slots;
    d->nslots = ns;
    return true;
}

/* Adds the key unless it is there. Returns false when out of memory. O(1) expected. */
static bool set_add(dump_set *d, const mc_meta *m)
{
    if ((d->n + 1) * 2 > d->nslots && !set_grow(d))
        return false;
    size_t h = key_hash(m->key, m->len) & (d->nslots - 1);
    for (; d->slots[h] != 0; h = (h + 1) & (d->nslots - 1)) {
        const dump_key *k = &d->keys[d->slots[h] - 1];
        if (k->len == m->len && memcmp(k->key, m->key, m->len) == 0)
            return true;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4096;
        dump_key *keys = realloc(d->keys, cap * sizeof(*keys));
        if (keys == NULL)
            return false;
        d->keys = keys;
        d->cap = cap;
    }
    if (d->nchunks == 0 || d->used + m->len > ARENA_CHUNK) {
        char **chunks = realloc(d->chunks, (d->nchunks + 1) * sizeof(*chunks));
        if (chunks == NULL)
            return false;
        d->chunks = chunks;
        if ((d->chunks[d->nchunks] = malloc(ARENA_CHUNK)) == NULL)
            return false;
        d->nchunks++;
        d->used = 0;
    }
    char *dst = d->chunks[d->nchunks - 1] + d->used;
    memcpy(dst, m->key, m->len);
    d->used += m->len;
    d->keys[d->n] = (dump_key){dst, (uint32_t)m->len, m->exp, m->size};
    d->slots[h] = (uint32_t)(++d->n);
    return true;
}

/* One whole dump of the server into d. Returns 0, or -1 with err. */
static int dump_once(mig_conn *c, dump_set *d, char *err, size_t errlen)
{
    mc_client *mc = mc_connect(c->s.host, c->s.port, c->timeout_ms, err, errlen);
    if (mc == NULL)
        return -1;
    mc_meta m;
    int rc = MC_LOST;
    /* Another crawl (the server's own, or another client's) makes the dump wait. */
    for (int i = 0; i < BUSY_TRIES; i++) {
        if (mc_metadump_begin(mc) != 0)
            break;
        rc = mc_metadump_next(mc, &m);
        if (rc != MC_EREPLY || !mc_busy(mc))
            break;
        sleep_ms(100);
    }
    while (rc == 1) {
        if (!set_add(d, &m)) {
            snprintf(err, errlen, "out of memory for the keys of the dump");
            mc_close(mc);
            return -1;
        }
        rc = mc_metadump_next(mc, &m);
    }
    if (rc < 0)
        snprintf(err, errlen, "lru_crawler metadump: %s", mc_error(mc));
    mc_close(mc);
    return rc < 0 ? -1 : 0;
}

static int m_scan(mig_conn *c, mig_cursor *cur, size_t hint, mig_batch *b, char *err,
                  size_t errlen)
{
    dump_set *d = cur->priv;
    if (d == NULL && (d = cur->priv = calloc(1, sizeof(*d))) == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    /* A failed dump is simply done again: the set keeps what the others gave, once each. */
    while (!d->dumped) {
        uint64_t items = 0;
        if (mc_curr_items(c->cmd, &items) != 0) {
            snprintf(err, errlen, "stats: %s", mc_error(c->cmd));
            return -1;
        }
        if (d->dumps > 0 && d->n >= items)
            break;
        if (d->dumps == MAX_DUMPS) {
            cur->unlisted = items - d->n;
            break;
        }
        if (d->dumps > 0)
            sleep_ms(50L << (d->dumps - 1)); /* 50 ms, doubling: 6.4 s in all at most */
        if (dump_once(c, d, err, errlen) != 0)
            return -1;
        d->dumps++;
    }
    d->dumped = true;
    while (b->n < hint && d->next < d->n) {
        const dump_key *k = &d->keys[d->next];
        if (!mig_batch_add(b, k->key, k->len, k->exp, k->size)) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        d->next++;
    }
    if (d->next == d->n) {
        set_free(d);
        cur->priv = NULL;
        cur->done = true;
    }
    return 0;
}

static void m_cursor_free(mig_cursor *cur)
{
    set_free(cur->priv);
    cur->priv = NULL;
}

static bool pending(const mig_key *k)
{
    return k->state == MIG_TODO || k->state == MIG_RETRY;
}

/* A value read from the source, kept until it is written. */
typedef struct held {
    char *data;
    size_t len;
    int64_t exptime; /* as the store gives it (ch_mc_copy_exptime) */
    uint32_t flags;
    bool have;
} held;

/* Deletes at their new owners the keys of b[from, to) marked in gone[]; a delete that fails
 * makes its key MIG_FAILED (its copy may be older than the source). */
static void drop_chunk(mig_conn **dst, size_t ndst, mig_batch *b, size_t from, size_t to,
                       const bool *gone, bool *broken_dst)
{
    for (size_t j = 0; j < ndst; j++) {
        bool lost = false, any = false;
        for (size_t i = from; i < to && !lost; i++)
            if (gone[i - from] && b->keys[i].to == j) {
                lost = mc_delete(dst[j]->cmd, b->keys[i].key, b->keys[i].len) != 0;
                any = true;
            }
        for (size_t i = from; i < to && any; i++) {
            mig_key *k = &b->keys[i];
            if (!gone[i - from] || k->to != j)
                continue;
            int rc = lost ? MC_LOST : mc_delete_reply(dst[j]->cmd);
            lost = lost || rc == MC_LOST;
            if (rc < 0) {
                k->state = MIG_FAILED;
                snprintf(k->err, MIG_ERR_LEN, "written at the source during its copy, and the "
                         "copy at the new owner could not be deleted: %s",
                         mc_error(dst[j]->cmd));
            }
        }
        if (lost)
            broken_dst[j] = true;
    }
}

static void m_drop(mig_conn **dst, size_t ndst, mig_batch *b, const bool *gone,
                   bool *broken_dst)
{
    drop_chunk(dst, ndst, b, 0, b->n, gone, broken_dst);
}

/* The copies of b[from, to) confirmed (migrate.h, copy): each key copied read again at the
 * source; one whose value or flags changed, or that went, is deleted at its new owner
 * (MIG_CHANGED). The source lost meanwhile: every copy not confirmed is deleted and retried. */
static void confirm_chunk(mig_conn *src, mig_conn **dst, size_t ndst, mig_batch *b,
                          size_t from, size_t to, bool *broken_src, bool *broken_dst,
                          const held *h)
{
    bool *gone = calloc(to - from ? to - from : 1, sizeof(*gone));
    if (gone == NULL) {
        for (size_t i = from; i < to; i++)
            if (b->keys[i].state == MIG_COPIED) {
                b->keys[i].state = MIG_FAILED;
                snprintf(b->keys[i].err, MIG_ERR_LEN, "out of memory to confirm its copy");
            }
        return;
    }
    bool lost = false, any = false;
    for (size_t i = from; i < to && !lost; i++)
        if (b->keys[i].state == MIG_COPIED) {
            lost = mc_mg(src->cmd, b->keys[i].key, b->keys[i].len) != 0;
            any = true;
        }
    for (size_t i = from; i < to && any; i++) {
        mig_key *k = &b->keys[i];
        if (k->state != MIG_COPIED)
            continue;
        mc_value v;
        int rc = lost ? MC_LOST : mc_mg_reply(src->cmd, &v);
        lost = lost || rc == MC_LOST;
        bool same = rc == 1 && v.len == h[i].len && v.flags == h[i].flags &&
                    memcmp(v.data, h[i].data, v.len) == 0;
        if (!same) {
            gone[i - from] = true;
            k->state = lost ? MIG_RETRY : MIG_CHANGED;
        }
    }
    if (lost)
        *broken_src = true;
    drop_chunk(dst, ndst, b, from, to, gone, broken_dst);
    free(gone);
}

/* Copies the pending keys of b[from, to). */
static void copy_chunk(mig_conn *src, mig_conn **dst, size_t ndst, mig_batch *b, size_t from,
                       size_t to, bool replace, bool *broken_src, bool *broken_dst, held *h)
{
    /* add carries a key as it is: one with a space or a control byte cannot be stored. */
    for (size_t i = from; i < to; i++)
        if (pending(&b->keys[i]) && !ch_mc_key_plain(b->keys[i].key, b->keys[i].len)) {
            b->keys[i].state = MIG_FAILED;
            snprintf(b->keys[i].err, MIG_ERR_LEN, "a key with a space or a control byte: add "
                     "cannot carry it");
        }
    bool lost = false;
    for (size_t i = from; i < to && !lost; i++)
        if (pending(&b->keys[i]))
            lost = mc_mg(src->cmd, b->keys[i].key, b->keys[i].len) != 0;
    for (size_t i = from; i < to && !lost; i++) {
        mig_key *k = &b->keys[i];
        if (!pending(k))
            continue;
        mc_value v;
        int64_t exptime = 0;
        int rc = mc_mg_reply(src->cmd, &v);
        if (rc == MC_LOST) {
            lost = true;
        } else if (rc == MC_EREPLY) {
            k->state = MIG_FAILED;
            snprintf(k->err, MIG_ERR_LEN, "mg at the source: %s", mc_error(src->cmd));
        } else if (rc == 0 || !ch_mc_copy_exptime(v.ttl, (int64_t)time(NULL), &exptime)) {
            k->state = MIG_EXPIRED; /* gone, or in its last second */
        } else if ((h[i].data = malloc(v.len ? v.len : 1)) == NULL) {
            k->state = MIG_FAILED;
            snprintf(k->err, MIG_ERR_LEN, "out of memory for a %zu-byte value", v.len);
        } else {
            memcpy(h[i].data, v.data, v.len);
            h[i].len = v.len;
            h[i].exptime = exptime;
            h[i].flags = v.flags;
            h[i].have = true;
        }
    }
    if (lost) {
        *broken_src = true;
        for (size_t i = from; i < to; i++)
            if (pending(&b->keys[i]) && !h[i].have)
                b->keys[i].state = MIG_RETRY;
    }
    for (size_t j = 0; j < ndst; j++) {
        bool dlost = false, sent = false;
        for (size_t i = from; i < to && !dlost; i++) {
            if (!h[i].have || b->keys[i].to != j)
                continue;
            dlost = mc_store(dst[j]->cmd, replace ? "set" : "add", b->keys[i].key,
                             b->keys[i].len, h[i].flags, h[i].exptime, h[i].data,
                             h[i].len) != 0;
            sent = true;
        }
        for (size_t i = from; i < to && sent && !dlost; i++) {
            mig_key *k = &b->keys[i];
            if (!h[i].have || k->to != j)
                continue;
            int rc = mc_store_reply(dst[j]->cmd);
            if (rc == MC_LOST) {
                dlost = true;
                break;
            }
            if (rc == 1) {
                k->state = MIG_COPIED; /* its value kept for the confirmation */
                continue;
            }
            if (rc == 0) {
                k->state = MIG_PRESENT;
            } else {
                k->state = MIG_FAILED;
                snprintf(k->err, MIG_ERR_LEN, "%s", mc_error(dst[j]->cmd));
            }
            free(h[i].data);
            h[i] = (held){0};
        }
        if (dlost) {
            broken_dst[j] = true;
            for (size_t i = from; i < to; i++)
                if (h[i].have && b->keys[i].to == j && b->keys[i].state != MIG_COPIED)
                    b->keys[i].state = MIG_RETRY;
        }
    }
    if (!*broken_src)
        confirm_chunk(src, dst, ndst, b, from, to, broken_src, broken_dst, h);
    else /* the copies cannot be confirmed: dropped and retried */
        for (size_t i = from; i < to; i++)
            if (b->keys[i].state == MIG_COPIED)
                b->keys[i].state = MIG_RETRY;
    for (size_t i = from; i < to; i++) {
        free(h[i].data);
        h[i] = (held){0};
    }
}

static void m_copy(mig_conn *src, mig_conn **dst, size_t ndst, mig_batch *b, bool replace,
                   bool *broken_src, bool *broken_dst)
{
    held *h = calloc(b->n ? b->n : 1, sizeof(*h));
    if (h == NULL) {
        for (size_t i = 0; i < b->n; i++)
            if (pending(&b->keys[i])) {
                b->keys[i].state = MIG_FAILED;
                snprintf(b->keys[i].err, MIG_ERR_LEN, "out of memory");
            }
        return;
    }
    size_t from = 0;
    while (from < b->n && !*broken_src) {
        uint64_t bytes = 0;
        size_t to = from;
        while (to < b->n && (to == from || bytes + b->keys[to].size <= CHUNK_BYTES)) {
            if (pending(&b->keys[to]))
                bytes += b->keys[to].size;
            to++;
        }
        copy_chunk(src, dst, ndst, b, from, to, replace, broken_src, broken_dst, h);
        from = to;
    }
    if (*broken_src) /* the chunks not tried */
        for (size_t i = from; i < b->n; i++)
            if (pending(&b->keys[i]))
                b->keys[i].state = MIG_RETRY;
    free(h);
}

static bool unchecked(const mig_key *k)
{
    return k->state != MIG_SKIP && (k->check == MIG_V_TODO || k->check == MIG_V_RETRY);
}

/* The TTL (seconds, -1 never, -2 absent, INT64_MIN an error) of the unchecked keys of b[from,
 * to) going to `to_server` (SIZE_MAX: all) over c. Returns false when the connection failed. */
static bool ttls(mc_client *c, mig_batch *b, size_t from, size_t to, size_t to_server,
                 int64_t *out)
{
    for (size_t i = from; i < to; i++) {
        mig_key *k = &b->keys[i];
        if (unchecked(k) && (to_server == SIZE_MAX || k->to == to_server) &&
            mc_mg(c, k->key, k->len) != 0)
            return false;
    }
    for (size_t i = from; i < to; i++) {
        mig_key *k = &b->keys[i];
        if (!unchecked(k) || (to_server != SIZE_MAX && k->to != to_server))
            continue;
        mc_value v;
        int rc = mc_mg_reply(c, &v);
        if (rc == MC_LOST)
            return false;
        out[i] = rc == 1 ? v.ttl : rc == 0 ? -2 : INT64_MIN;
        if (rc == MC_EREPLY)
            snprintf(k->err, MIG_ERR_LEN, "%s", mc_error(c));
    }
    return true;
}

static void m_verify(mig_conn *src, mig_conn **dst, size_t ndst, mig_batch *b, int64_t tol_ms,
                     bool *broken_src, bool *broken_dst)
{
    int64_t *s = calloc(b->n ? b->n : 1, sizeof(*s)), *d = calloc(b->n ? b->n : 1, sizeof(*d));
    int64_t *t0 = calloc(ndst ? ndst : 1, sizeof(*t0)), *t1 = calloc(ndst ? ndst : 1, sizeof(*t1));
    /* Whole seconds on both sides: one more second of slack. */
    int64_t tol_s = tol_ms / 1000 + 1;
    if (s == NULL || d == NULL || t0 == NULL || t1 == NULL) {
        free(s);
        free(d);
        free(t0);
        free(t1);
        for (size_t i = 0; i < b->n; i++)
            if (unchecked(&b->keys[i])) {
                b->keys[i].check = MIG_V_ERROR;
                snprintf(b->keys[i].err, MIG_ERR_LEN, "out of memory");
            }
        return;
    }
    size_t from = 0;
    while (from < b->n) {
        uint64_t bytes = 0;
        size_t to = from;
        while (to < b->n && (to == from || bytes + b->keys[to].size <= CHUNK_BYTES / 2))
            bytes += b->keys[to++].size;
        /* The clock around each pipeline bounds the time between a key's two readings. */
        int64_t s0 = now_ms();
        bool src_ok = ttls(src->cmd, b, from, to, SIZE_MAX, s);
        int64_t s1 = now_ms();
        if (!src_ok) {
            *broken_src = true;
            for (size_t i = from; i < b->n; i++)
                if (unchecked(&b->keys[i]))
                    b->keys[i].check = MIG_V_RETRY;
            break;
        }
        for (size_t j = 0; j < ndst; j++) {
            t0[j] = now_ms();
            if (!broken_dst[j] && !ttls(dst[j]->cmd, b, from, to, j, d))
                broken_dst[j] = true;
            t1[j] = now_ms();
        }
        for (size_t i = from; i < to; i++) {
            mig_key *k = &b->keys[i];
            if (!unchecked(k))
                continue;
            if (broken_dst[k->to])
                k->check = MIG_V_RETRY;
            else if (s[i] == INT64_MIN || d[i] == INT64_MIN)
                k->check = MIG_V_ERROR;
            else if (s[i] == -2)
                k->check = MIG_V_GONE;
            else if (d[i] == -2)
                k->check = MIG_V_MISSING;
            else if (!mig_ttl_agrees(s[i], d[i], (t0[k->to] - s1) / 1000,
                                     (t1[k->to] - s0 + 999) / 1000, tol_s)) {
                k->check = MIG_V_TTL;
                snprintf(k->err, MIG_ERR_LEN,
                         "TTL %lld s at the source, %lld s at the new owner", (long long)s[i],
                         (long long)d[i]);
            } else
                k->check = MIG_V_OK;
        }
        from = to;
    }
    free(s);
    free(d);
    free(t0);
    free(t1);
}

const mig_driver mig_mc_driver = {
    .name = "memcached",
    .open = m_open,
    .close = m_close,
    .count = m_count,
    .resumable = false,
    .scan = m_scan,
    .cursor_free = m_cursor_free,
    .copy = m_copy,
    .drop = m_drop,
    .verify = m_verify,
};

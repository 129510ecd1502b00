/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hot.c — hot keys in libchash-cache (chash_cache.h, docs/OPERATIONS.md "Hot keys"), with
 * chash-proxy's semantics and names (proxy/hotkeys.c): a Space-Saving summary (src/hot/topk.h)
 * counts every key of a get, set or del in the current second; each second it becomes the last
 * second's, is merged into a decayed minute (59/60 per second) and into the counts since open.
 * Rates are counts over the window's measured length; a second with no request is a window of
 * its own (the last second is then empty).
 *
 * The near cache (src/hot/near.h), opt-in: a get of a key whose lower bound (count - error)
 * reached hot_threshold this second or the last stores the value it got, for hot_cache_ms from
 * the read's send; a get finds it there. A client is one thread's, so the keys it serves are
 * its own: a set or del drops the key's entry before it is sent (no generations needed), and
 * a value is stored only from a get that no write of this client followed.
 *
 * Cost per request: one XXH3 of the key and one summary update (O(log 128)); with the near
 * cache, one lookup, and a store per hot key's read from a server. Memory: five summaries of
 * 128 entries of 250 key bytes (about 200 KiB), and the near cache's bound.
 */
#define _POSIX_C_SOURCE 200809L

#include "cache_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HOT_K 128u
#define HOT_KEYMAX 250u
#define HOT_WINDOW_NS 1000000000ull
#define HOT_DECAY (59.0 / 60.0)

uint64_t ch__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t ch__hot_hash(const void *key, size_t len)
{
    uint64_t h = 0;
    (void)ch_hash64(CH_HASH_XXH3, key, len, &h); /* cannot fail: a known hash */
    return h;
}

int ch__hot_init(ch__hot *h, const ch_cache_options *o)
{
    memset(h, 0, sizeof(*h));
    h->window = ch__topk_new(HOT_K, HOT_KEYMAX);
    h->last = ch__topk_new(HOT_K, HOT_KEYMAX);
    h->minute = ch__topk_new(HOT_K, HOT_KEYMAX);
    h->total = ch__topk_new(HOT_K, HOT_KEYMAX);
    h->report = ch__topk_new(HOT_K, HOT_KEYMAX);
    h->reader = redisReaderCreate();
    bool ok = h->window && h->last && h->minute && h->total && h->report && h->reader;
    if (ok && o->hot_cache_ms > 0) {
        size_t max = o->hot_cache_max_bytes > 0 ? o->hot_cache_max_bytes
                                                : CH_CACHE_DEFAULT_HOT_CACHE_BYTES;
        h->near = ch__near_new(NULL, max, (uint64_t)o->hot_cache_ms * 1000000ull);
        h->threshold = o->hot_threshold > 0 ? o->hot_threshold : CH_CACHE_DEFAULT_HOT_THRESHOLD;
        ok = h->near != NULL;
    }
    h->window_start = ch__now_ns();
    if (!ok) {
        ch__hot_free(h);
        return CH_ENOMEM;
    }
    return CH_OK;
}

void ch__hot_free(ch__hot *h)
{
    ch__topk_free(h->window);
    ch__topk_free(h->last);
    ch__topk_free(h->minute);
    ch__topk_free(h->total);
    ch__topk_free(h->report);
    ch__near_free(h->near);
    if (h->reader != NULL)
        redisReaderFree(h->reader);
    memset(h, 0, sizeof(*h));
}

/* Ends the current window when its second is over: it becomes the last one (or, after a
 * second with no request at all, the last one is empty), and joins the minute and the total. */
static void roll(ch__hot *h, uint64_t now)
{
    if (now - h->window_start < HOT_WINDOW_NS)
        return;
    ch__topk *done = h->window;
    h->window = h->last;
    h->last = done;
    ch__topk_clear(h->window);
    h->last_ns = now - h->window_start;
    ch__topk_decay(h->minute, HOT_DECAY);
    ch__topk_merge(h->minute, h->last);
    ch__topk_merge(h->total, h->last);
    if (h->last_ns >= 2 * HOT_WINDOW_NS) { /* idle: the second before now saw nothing */
        ch__topk_clear(h->last);
        h->last_ns = HOT_WINDOW_NS;
    }
    h->window_start = now;
}

void ch__hot_count(ch__hot *h, const void *key, size_t len, uint64_t hh, uint64_t now)
{
    roll(h, now);
    ch__topk_add(h->window, hh, key, len, 1);
}

/* Whether the key's reads reached the threshold in a second: its lower bound in the current
 * window or the last. */
static bool is_hot(const ch__hot *h, uint64_t hh)
{
    ch__topk_entry e;
    const ch__topk *views[2] = {h->window, h->last};
    for (size_t v = 0; v < 2; v++)
        if (ch__topk_find(views[v], hh, &e) && e.count - e.error >= h->threshold)
            return true;
    return false;
}

bool ch__hot_get(ch_cache *c, const void *key, size_t len, uint64_t hh, size_t owner,
                 uint64_t now, ch_cache_result *r)
{
    ch__hot *h = &c->hot;
    size_t vlen = 0;
    const char *v = h->near != NULL ? ch__near_get(h->near, hh, key, len, now, &vlen, NULL) : NULL;
    if (v == NULL)
        return false;
    /* The value is handed out as a reply object the result owns, as a server's would be:
     * framed as a bulk string and read back by the client's reader. */
    char head[32];
    int hl = snprintf(head, sizeof(head), "$%zu\r\n", vlen);
    void *reply = NULL;
    if (redisReaderFeed(h->reader, head, (size_t)hl) != REDIS_OK ||
        redisReaderFeed(h->reader, v, vlen) != REDIS_OK ||
        redisReaderFeed(h->reader, "\r\n", 2) != REDIS_OK ||
        redisReaderGetReply(h->reader, &reply) != REDIS_OK || reply == NULL) {
        /* out of memory: the reader may hold part of it; a new one starts clean */
        redisReaderFree(h->reader);
        h->reader = redisReaderCreate();
        return false;
    }
    redisReply *rr = reply;
    r->status = CH_CACHE_HIT;
    r->node = owner;
    r->node_id = c->nodes[owner].id;
    r->node_addr = c->nodes[owner].addr;
    r->reply_ = rr;
    r->value = rr->str;
    r->len = rr->len;
    c->total.hits++;
    h->hits++;
    return true;
}

void ch__hot_put(ch_cache *c, const void *key, size_t len, uint64_t hh, uint64_t sent,
                 const ch_cache_result *r)
{
    ch__hot *h = &c->hot;
    if (h->near == NULL || r->status != CH_CACHE_HIT || !is_hot(h, hh))
        return;
    /* gen 0: no generations here (ch__hot_write drops at once) */
    (void)ch__near_put(h->near, hh, key, len, 0, sent, UINT64_MAX, ch__now_ns(), r->value,
                       r->len);
}

void ch__hot_write(ch_cache *c, const void *key, size_t len, uint64_t hh)
{
    if (c->hot.near != NULL)
        ch__near_drop(c->hot.near, hh, key, len);
}

void ch__hot_metrics(const ch_cache *c, ch_cache_metrics *x)
{
    if (c->hot.near == NULL)
        return;
    ch__near_stats st;
    ch__near_stats_get(c->hot.near, &st);
    x->hot_cache_hits = c->hot.hits;
    x->hot_cache_stores = st.stores;
    x->hot_cache_evictions = st.evictions;
    x->hot_cache_entries = st.entries;
    x->hot_cache_bytes = st.bytes;
}

/* A key's count and error in a view, or the view's floor for both when it is absent. */
static void in_view(const ch__topk *t, uint64_t hash, uint64_t *count, uint64_t *error)
{
    ch__topk_entry e;
    if (ch__topk_find(t, hash, &e)) {
        *count = e.count, *error = e.error;
    } else {
        *count = *error = ch__topk_floor(t);
    }
}

int ch_cache_hotkeys(ch_cache *c, ch_cache_hotkey *out, size_t cap, size_t *n)
{
    if (c == NULL || n == NULL || (out == NULL && cap > 0))
        return CH_EINVAL;
    ch__hot *h = &c->hot;
    roll(h, ch__now_ns());
    /* The report: the minute and the second under way, so a key is seen from its first
     * request on, not only once its second is over. */
    ch__topk_clear(h->report);
    ch__topk_merge(h->report, h->minute);
    ch__topk_merge(h->report, h->window);
    ch__topk_entry es[HOT_K];
    size_t m = ch__topk_sorted(h->report, es, cap < HOT_K ? cap : HOT_K);
    double last_s = h->last_ns > 0 ? (double)h->last_ns / 1e9 : 1.0;
    for (size_t k = 0; k < m; k++) {
        ch_cache_hotkey *o = &out[k];
        uint64_t cnt, err, wc, we;
        memset(o, 0, sizeof(*o));
        o->key = es[k].key;
        o->len = es[k].keylen;
        o->truncated = es[k].truncated;
        in_view(h->last, es[k].hash, &cnt, &err);
        o->rate = (double)cnt / last_s;
        o->rate_error = (double)err / last_s;
        o->rate_60s = (double)es[k].count * (1 - HOT_DECAY);
        o->rate_60s_error = (double)es[k].error * (1 - HOT_DECAY);
        in_view(h->total, es[k].hash, &cnt, &err);
        in_view(h->window, es[k].hash, &wc, &we);
        o->count = cnt + wc;
        o->count_error = err + we;
        o->node = es[k].truncated ? SIZE_MAX : ch_lookup(c->table, es[k].key, es[k].keylen);
    }
    *n = m;
    return CH_OK;
}

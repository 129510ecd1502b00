/* SPDX-License-Identifier: Apache-2.0 */
/*
 * health_shared.c — a pool's health shared by the workers (health_shared.h). The published state
 * (up[], n_up, streak[], probing[]) is written only under the lock and read with relaxed atomic
 * loads.
 */
#include "health_shared.h"
#include "window.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

int px_health_new(size_t n, const ch_health_options *opt, size_t journal_cap, size_t max_down,
                  px_health **out)
{
    px_health *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return CH_ENOMEM;
    int rc = ch_health_new(n, opt, &h->h);
    if (rc != CH_OK) {
        free(h);
        return rc;
    }
    h->n = h->n_up = n;
    h->up = malloc(n);
    h->streak = calloc(n, 1);
    h->probing = calloc(n, 1);
    h->journal = calloc(n, sizeof(*h->journal));
    h->readmit_at = calloc(n, sizeof(*h->readmit_at));
    h->journal_cap = journal_cap;
    h->max_down = max_down;
    if (h->up == NULL || h->streak == NULL || h->probing == NULL || h->journal == NULL ||
        h->readmit_at == NULL || pthread_mutex_init(&h->lock, NULL) != 0) {
        ch_health_free(h->h);
        free(h->readmit_at);
        free(h->up);
        free(h->streak);
        free(h->probing);
        free(h->journal);
        free(h);
        return CH_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        h->up[i] = 1;
        /* Fixed memory, allocated now: a spill never needs an allocation. */
        h->journal[i].dirty = calloc(PX_DIRTY_WORDS, sizeof(uint64_t));
        if (h->journal[i].dirty == NULL) {
            px_health_free(h);
            return CH_ENOMEM;
        }
    }
    *out = h;
    return CH_OK;
}

/* Drops j's exact keys (not its bitmap, nor whether it spilled). */
static void journal_clear(px_journal *j)
{
    for (size_t s = 0; j->keys != NULL && s < j->slots; s++)
        free(j->keys[s]);
    free(j->keys);
    free(j->lens);
    free(j->hashes);
    j->keys = NULL;
    j->lens = NULL;
    j->hashes = NULL;
    j->n = j->slots = 0;
}

void px_health_free(px_health *h)
{
    if (h == NULL)
        return;
    for (size_t i = 0; h->journal != NULL && i < h->n; i++) {
        journal_clear(&h->journal[i]);
        free(h->journal[i].dirty);
    }
    free(h->journal);
    pthread_mutex_destroy(&h->lock);
    ch_health_free(h->h);
    free(h->up);
    free(h->streak);
    free(h->probing);
    free(h->readmit_at);
    for (size_t i = 0; h->early != NULL && i < h->n; i++)
        free(h->early[i]);
    free(h->early);
    free(h);
}

bool px_health_up(const px_health *h, size_t i)
{
    return __atomic_load_n(&h->up[i], __ATOMIC_RELAXED) != 0;
}

static bool up_fn(const void *ctx, size_t i)
{
    return px_health_up(ctx, i);
}

int px_health_route(const px_health *h, const ch_table *t, uint64_t kh, size_t depth,
                    size_t *out, size_t *count)
{
    return ch_route_hash_fn(t, up_fn, h, __atomic_load_n(&h->n_up, __ATOMIC_RELAXED), kh, depth,
                            out, count);
}

/* Publishes i's state after a change of h->h (lock held). */
static void publish(px_health *h, size_t i)
{
    uint8_t up = ch_health_is_up(h->h, i) ? 1 : 0;
    if (up == h->up[i])
        return;
    __atomic_store_n(&h->up[i], up, __ATOMIC_RELAXED);
    __atomic_store_n(&h->n_up, up ? h->n_up + 1 : h->n_up - 1, __ATOMIC_RELAXED);
}

void px_health_success(px_health *h, size_t i, uint64_t now_ms)
{
    if (__atomic_load_n(&h->streak[i], __ATOMIC_RELAXED) == 0)
        return; /* nothing to end: the common case, no lock */
    pthread_mutex_lock(&h->lock);
    ch_health_success(h->h, i, now_ms);
    __atomic_store_n(&h->streak[i], 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&h->lock);
}

bool px_health_failure(px_health *h, size_t i, uint64_t now_ms, uint64_t rnd)
{
    pthread_mutex_lock(&h->lock);
    bool ejected = ch_health_failure(h->h, i, now_ms, rnd);
    if (ejected && h->n - h->n_up + 1 > h->max_down) {
        /* Over the cap: readmitted at once (the library's readmission, so its counts and
         * backoff stay consistent), and i's failure streak starts over. */
        ch_health_probe_result(h->h, i, true, now_ms, rnd);
        __atomic_fetch_add(&h->fail_open, 1u, __ATOMIC_RELAXED);
        ejected = false;
    }
    ch_health_info info;
    ch_health_info_get(h->h, i, &info);
    __atomic_store_n(&h->streak[i], info.streak > 0 ? 1 : 0, __ATOMIC_RELAXED);
    publish(h, i);
    pthread_mutex_unlock(&h->lock);
    return ejected;
}

bool px_health_probe_claim(px_health *h, size_t i, uint64_t now_ms)
{
    if (px_health_up(h, i) || __atomic_load_n(&h->probing[i], __ATOMIC_RELAXED) != 0)
        return false; /* the common case, no lock */
    pthread_mutex_lock(&h->lock);
    bool claim = h->probing[i] == 0 && ch_health_probe_due(h->h, i, now_ms);
    if (claim)
        __atomic_store_n(&h->probing[i], 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&h->lock);
    return claim;
}

/* The claimed probe's result (lock held). A readmission starts i's ramp, when there is one:
 * its time is stored before i is published up. A reader may still see i up a moment before its
 * ramp (up[] is published relaxed): its keys then go to i at once for that moment, as without
 * a ramp, which the rejoin's clean-up made safe (a miss, never an old value). */
static bool probe_result_locked(px_health *h, size_t i, bool ok, uint64_t now_ms, uint64_t rnd)
{
    bool was_up = h->up[i] != 0;
    ch_health_probe_result(h->h, i, ok, now_ms, rnd);
    __atomic_store_n(&h->probing[i], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&h->streak[i], 0, __ATOMIC_RELAXED);
    if (!was_up && h->readmit_ramp_ms > 0 && ch_health_is_up(h->h, i)) {
        /* i is down until published below: no reader looks at its bitmap meanwhile. */
        for (size_t w = 0; w < PX_DIRTY_WORDS; w++)
            __atomic_store_n(&h->early[i][w], 0, __ATOMIC_RELAXED);
        __atomic_store_n(&h->readmit_at[i], now_ms, __ATOMIC_RELAXED);
        if (now_ms + h->readmit_ramp_ms > h->ramp_until)
            __atomic_store_n(&h->ramp_until, now_ms + h->readmit_ramp_ms, __ATOMIC_RELEASE);
    }
    publish(h, i);
    return h->up[i] != 0;
}

bool px_health_probe_result(px_health *h, size_t i, bool ok, uint64_t now_ms, uint64_t rnd)
{
    pthread_mutex_lock(&h->lock);
    bool up = probe_result_locked(h, i, ok, now_ms, rnd);
    pthread_mutex_unlock(&h->lock);
    return up;
}

int px_health_readmit(px_health *h, size_t i, uint64_t now_ms, uint64_t rnd)
{
    pthread_mutex_lock(&h->lock);
    const px_journal *j = &h->journal[i];
    int rc = j->n > 0 || j->spilled ? PX_READMIT_DIRTY
             : probe_result_locked(h, i, true, now_ms, rnd) ? PX_READMIT_UP
                                                              : PX_READMIT_OUT;
    pthread_mutex_unlock(&h->lock);
    return rc;
}

static uint32_t hash_bucket(uint64_t hv); /* the rejoin journal's, below */

/* ---- slow start on readmission ------------------------------------------------------------------ */

int px_health_set_readmit_ramp(px_health *h, uint64_t ramp_ms)
{
    if (ramp_ms == 0)
        return 0;
    if ((h->early = calloc(h->n, sizeof(*h->early))) == NULL)
        return -1;
    for (size_t i = 0; i < h->n; i++)
        if ((h->early[i] = calloc(PX_DIRTY_WORDS, sizeof(uint64_t))) == NULL)
            return -1; /* freed with h; readmit_ramp_ms stays 0: no ramp */
    h->readmit_ramp_ms = ramp_ms;
    return 0;
}

void px_health_switch_early(px_health *h, size_t i, uint64_t xh)
{
    uint32_t b = hash_bucket(xh);
    /* Release: a reader that sees the bit sees it before the write it precedes is sent. */
    __atomic_fetch_or(&h->early[i][b / 64u], (uint64_t)1 << (b % 64u), __ATOMIC_RELEASE);
}

bool px_health_ramping(const px_health *h, uint64_t now)
{
    return now < __atomic_load_n(&h->ramp_until, __ATOMIC_ACQUIRE);
}

bool px_health_serves(const px_health *h, size_t i, uint64_t xh, uint64_t now)
{
    if (!px_health_up(h, i))
        return false;
    uint64_t at = __atomic_load_n(&h->readmit_at[i], __ATOMIC_RELAXED);
    if (at == 0 || px_ramp_switched(at, h->readmit_ramp_ms, xh, now))
        return true;
    uint32_t b = hash_bucket(xh);
    return (__atomic_load_n(&h->early[i][b / 64u], __ATOMIC_ACQUIRE) >> (b % 64u) & 1u) != 0;
}

typedef struct key_view {
    const px_health *h;
    uint64_t xh, now;
} key_view;

static bool serves_fn(const void *ctx, size_t i)
{
    const key_view *v = ctx;
    return px_health_serves(v->h, i, v->xh, v->now);
}

int px_health_route_key(const px_health *h, const ch_table *t, uint64_t kh, uint64_t xh,
                        uint64_t now, size_t depth, size_t *out, size_t *count)
{
    if (!px_health_ramping(h, now))
        return px_health_route(h, t, kh, depth, out, count);
    key_view v = {h, xh, now};
    /* n_up may count a ramping node that passes this key over: an upper bound, as the walk
     * allows (ch_route_hash_fn). */
    return ch_route_hash_fn(t, serves_fn, &v, __atomic_load_n(&h->n_up, __ATOMIC_RELAXED), kh,
                            depth, out, count);
}

void px_health_probe_drop(px_health *h, size_t i)
{
    pthread_mutex_lock(&h->lock);
    __atomic_store_n(&h->probing[i], 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&h->lock);
}

/* ---- the rejoin journal ------------------------------------------------------------------------ */

bool px_health_any_down(const px_health *h)
{
    return __atomic_load_n(&h->n_up, __ATOMIC_RELAXED) < h->n;
}

static uint64_t key_hash(const char *key, size_t len)
{
    return XXH3_64bits(key, len); /* the set's slots and the bitmap's buckets */
}

static uint32_t hash_bucket(uint64_t hv)
{
    return (uint32_t)(hv >> (64u - PX_DIRTY_BITS));
}

uint32_t px_journal_bucket(const char *key, size_t len)
{
    return hash_bucket(key_hash(key, len));
}

static void mark(px_journal *j, uint64_t hv)
{
    uint32_t b = hash_bucket(hv);
    j->dirty[b / 64u] |= (uint64_t)1 << (b % 64u);
}

/* j goes over to its bitmap: its exact keys become dirty buckets (lock held). */
static void journal_spill(px_journal *j)
{
    for (size_t s = 0; j->keys != NULL && j->hashes != NULL && s < j->slots; s++)
        if (j->keys[s] != NULL)
            mark(j, j->hashes[s]);
    journal_clear(j);
    j->spilled = true;
}

/* Adds key to j (lock held). Past cap keys, or out of memory, j spills into its bitmap. */
static void journal_add(px_journal *j, size_t cap, const char *key, size_t len)
{
    uint64_t hv = key_hash(key, len);
    if (j->spilled || cap == 0) {
        j->spilled = true;
        mark(j, hv);
        return;
    }
    if (j->slots == 0) {
        size_t slots = 64;
        while (slots < 2 * cap && slots < ((size_t)1 << 40))
            slots *= 2;
        j->slots = slots > 1024 ? 1024 : slots; /* grown on demand up to 2 cap */
        j->keys = calloc(j->slots, sizeof(*j->keys));
        j->lens = calloc(j->slots, sizeof(*j->lens));
        j->hashes = calloc(j->slots, sizeof(*j->hashes));
        if (j->keys == NULL || j->lens == NULL || j->hashes == NULL)
            goto overflow;
    }
    for (size_t s = hv & (j->slots - 1);; s = (s + 1) & (j->slots - 1)) {
        if (j->keys[s] == NULL)
            break;
        if (j->hashes[s] == hv && j->lens[s] == len && memcmp(j->keys[s], key, len) == 0)
            return; /* already there */
    }
    if (j->n + 1 > cap)
        goto overflow;
    if (2 * (j->n + 1) > j->slots) { /* keep the load under 1/2: grow */
        px_journal g = {.slots = j->slots * 2, .dirty = j->dirty}; /* not spilled */
        g.keys = calloc(g.slots, sizeof(*g.keys));
        g.lens = calloc(g.slots, sizeof(*g.lens));
        g.hashes = calloc(g.slots, sizeof(*g.hashes));
        if (g.keys == NULL || g.lens == NULL || g.hashes == NULL) {
            free(g.keys);
            free(g.lens);
            free(g.hashes);
            goto overflow;
        }
        for (size_t s = 0; s < j->slots; s++) {
            if (j->keys[s] == NULL)
                continue;
            size_t t = j->hashes[s] & (g.slots - 1);
            while (g.keys[t] != NULL)
                t = (t + 1) & (g.slots - 1);
            g.keys[t] = j->keys[s];
            g.lens[t] = j->lens[s];
            g.hashes[t] = j->hashes[s];
        }
        g.n = j->n;
        free(j->keys);
        free(j->lens);
        free(j->hashes);
        *j = g;
    }
    char *copy = malloc(len > 0 ? len : 1);
    if (copy == NULL)
        goto overflow;
    memcpy(copy, key, len);
    size_t s = hv & (j->slots - 1);
    while (j->keys[s] != NULL)
        s = (s + 1) & (j->slots - 1);
    j->keys[s] = copy;
    j->lens[s] = (uint32_t)len;
    j->hashes[s] = hv;
    j->n++;
    return;
overflow:
    journal_spill(j);
    mark(j, hv);
}

void px_health_journal(px_health *h, size_t i, const char *key, size_t len)
{
    pthread_mutex_lock(&h->lock);
    if (h->up[i] == 0)
        journal_add(&h->journal[i], h->journal_cap, key, len);
    pthread_mutex_unlock(&h->lock);
}

int px_health_journal_take(px_health *h, size_t i, px_journal_batch *out)
{
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&h->lock);
    px_journal *j = &h->journal[i];
    int rc = 0;
    if (j->spilled) {
        /* The batch takes the bitmap; the journal gets a clean one. */
        uint64_t *fresh = calloc(PX_DIRTY_WORDS, sizeof(uint64_t));
        if (fresh == NULL) {
            rc = -1;
        } else {
            out->dirty = j->dirty;
            j->dirty = fresh;
            j->spilled = false;
        }
    } else if (j->n > 0) {
        out->keys = malloc(j->n * sizeof(*out->keys));
        out->lens = malloc(j->n * sizeof(*out->lens));
        if (out->keys == NULL || out->lens == NULL) {
            free(out->keys);
            free(out->lens);
            memset(out, 0, sizeof(*out));
            rc = -1;
        } else {
            for (size_t s = 0; s < j->slots; s++) {
                if (j->keys[s] == NULL)
                    continue;
                out->keys[out->n] = j->keys[s];
                out->lens[out->n++] = j->lens[s];
                j->keys[s] = NULL; /* moved */
            }
            journal_clear(j);
        }
    }
    pthread_mutex_unlock(&h->lock);
    return rc;
}

void px_health_journal_return(px_health *h, size_t i, px_journal_batch *b)
{
    pthread_mutex_lock(&h->lock);
    px_journal *j = &h->journal[i];
    if (b->dirty != NULL) {
        journal_spill(j);
        for (size_t w = 0; w < PX_DIRTY_WORDS; w++)
            j->dirty[w] |= b->dirty[w];
    }
    for (size_t k = 0; k < b->n; k++)
        journal_add(j, h->journal_cap, b->keys[k], b->lens[k]);
    pthread_mutex_unlock(&h->lock);
    px_journal_batch_free(b);
}

void px_journal_batch_free(px_journal_batch *b)
{
    for (size_t k = 0; k < b->n; k++)
        free(b->keys[k]);
    free(b->keys);
    free(b->lens);
    free(b->dirty);
    memset(b, 0, sizeof(*b));
}

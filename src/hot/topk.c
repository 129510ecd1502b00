/* SPDX-License-Identifier: Apache-2.0 */
/*
 * topk.c — Space-Saving over key hashes (topk.h).
 *
 * Layout: k entries (hash, count, error, key length) and their key bytes, a min-heap of entry
 * indexes by count (heap[0] is the entry a new key replaces), and an open-addressed index from
 * hash to entry (linear probing, at most half full, removal by backward shift, so lookups never
 * meet tombstones). An add is one probe sequence and one sift: O(log k), no allocation.
 *
 * The floor generalizes Space-Saving's "the minimum count": an upper bound of the weight of
 * any key not held. A new key enters with count floor + w and error floor (its earlier weight,
 * if any, is at most the floor), which is Space-Saving's replacement when the summary is full
 * (the floor is then at least the evicted minimum), and makes merged and decayed summaries,
 * whose floor can be above zero with room left, keep the guarantee too.
 */
#include "topk.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct topk_ent {
    uint64_t hash, count, error;
    uint32_t heap;    /* its position in heap[] */
    uint32_t kslot;   /* its key bytes: keys + kslot * keymax (scratch entries: skeys) */
    uint16_t keylen;
    bool truncated;
} topk_ent;

struct ch__topk {
    size_t k, keymax, n;
    uint64_t floor, total;
    topk_ent *e;     /* [k] */
    char *keys;      /* [k * keymax] */
    uint32_t *heap;  /* [k] entry indexes; e[heap[i]].count <= its children's */
    uint32_t *idx;   /* [mask + 1] entry index + 1; 0: empty */
    size_t mask;
    topk_ent *se;    /* [2k] merge and sort scratch */
    char *skeys;     /* [2k * keymax] */
};

/* ---- the index ---------------------------------------------------------------------------- */

/* The index position holding hash, or the empty one where it would go. */
static size_t idx_find(const ch__topk *t, uint64_t hash)
{
    size_t p = (size_t)hash & t->mask;
    while (t->idx[p] != 0 && t->e[t->idx[p] - 1].hash != hash)
        p = (p + 1) & t->mask;
    return p;
}

/* Removes the entry at index position p, shifting later members of its probe run back so no
 * lookup stops early at the hole. */
static void idx_remove(ch__topk *t, size_t p)
{
    size_t j = p;
    for (;;) {
        j = (j + 1) & t->mask;
        if (t->idx[j] == 0)
            break;
        size_t home = (size_t)t->e[t->idx[j] - 1].hash & t->mask;
        /* j's entry may fill the hole at p unless its home lies in (p, j] (cyclically). */
        if (((j - home) & t->mask) >= ((j - p) & t->mask)) {
            t->idx[p] = t->idx[j];
            p = j;
        }
    }
    t->idx[p] = 0;
}

/* ---- the heap ----------------------------------------------------------------------------- */

static void heap_set(ch__topk *t, size_t pos, uint32_t ent)
{
    t->heap[pos] = ent;
    t->e[ent].heap = (uint32_t)pos;
}

static void sift_up(ch__topk *t, size_t pos)
{
    uint32_t ent = t->heap[pos];
    while (pos > 0) {
        size_t up = (pos - 1) / 2;
        if (t->e[t->heap[up]].count <= t->e[ent].count)
            break;
        heap_set(t, pos, t->heap[up]);
        pos = up;
    }
    heap_set(t, pos, ent);
}

static void sift_down(ch__topk *t, size_t pos)
{
    uint32_t ent = t->heap[pos];
    for (;;) {
        size_t c = 2 * pos + 1;
        if (c >= t->n)
            break;
        if (c + 1 < t->n && t->e[t->heap[c + 1]].count < t->e[t->heap[c]].count)
            c++;
        if (t->e[ent].count <= t->e[t->heap[c]].count)
            break;
        heap_set(t, pos, t->heap[c]);
        pos = c;
    }
    heap_set(t, pos, ent);
}

/* ---- the summary -------------------------------------------------------------------------- */

ch__topk *ch__topk_new(size_t k, size_t keymax)
{
    if (k == 0 || k > 65536 || keymax > UINT16_MAX)
        return NULL;
    ch__topk *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    size_t cap = 4;
    while (cap < 2 * k)
        cap *= 2;
    t->k = k;
    t->keymax = keymax;
    t->mask = cap - 1;
    t->e = calloc(k, sizeof(*t->e));
    t->keys = malloc(k * keymax + 1);
    t->heap = calloc(k, sizeof(*t->heap));
    t->idx = calloc(cap, sizeof(*t->idx));
    t->se = calloc(2 * k, sizeof(*t->se));
    t->skeys = malloc(2 * k * keymax + 1);
    if (t->e == NULL || t->keys == NULL || t->heap == NULL || t->idx == NULL || t->se == NULL ||
        t->skeys == NULL) {
        ch__topk_free(t);
        return NULL;
    }
    return t;
}

void ch__topk_free(ch__topk *t)
{
    if (t == NULL)
        return;
    free(t->e);
    free(t->keys);
    free(t->heap);
    free(t->idx);
    free(t->se);
    free(t->skeys);
    free(t);
}

void ch__topk_clear(ch__topk *t)
{
    memset(t->idx, 0, (t->mask + 1) * sizeof(*t->idx));
    t->n = 0;
    t->floor = 0;
    t->total = 0;
}

/* Writes key bytes into entry i's slot of t (the first keymax of them). */
static void set_key(ch__topk *t, topk_ent *en, char *slot, const void *key, size_t len,
                    bool truncated)
{
    size_t keep = len < t->keymax ? len : t->keymax;
    if (keep > 0)
        memcpy(slot, key, keep);
    en->keylen = (uint16_t)keep;
    en->truncated = truncated || keep < len;
}

void ch__topk_add(ch__topk *t, uint64_t hash, const void *key, size_t len, uint64_t w)
{
    t->total += w;
    size_t p = idx_find(t, hash);
    if (t->idx[p] != 0) {
        topk_ent *en = &t->e[t->idx[p] - 1];
        en->count += w;
        sift_down(t, en->heap);
        return;
    }
    uint32_t i;
    if (t->n < t->k) {
        i = (uint32_t)t->n++;
        t->e[i].heap = i;
        t->heap[i] = i;
    } else {
        /* Replace the minimum: its key's weight is at most its count from now on. */
        i = t->heap[0];
        if (t->e[i].count > t->floor)
            t->floor = t->e[i].count;
        idx_remove(t, idx_find(t, t->e[i].hash));
        p = idx_find(t, hash);
    }
    topk_ent *en = &t->e[i];
    en->hash = hash;
    en->count = t->floor + w;
    en->error = t->floor;
    en->kslot = i;
    set_key(t, en, t->keys + (size_t)i * t->keymax, key, len, false);
    t->idx[p] = i + 1;
    if (t->n == t->k && t->heap[0] == i)
        sift_down(t, 0);
    else
        sift_up(t, en->heap);
}

/* Largest count first, then smaller hash: a total order, so reports are deterministic. */
static int by_count_desc(const void *a, const void *b)
{
    const topk_ent *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    return (x->hash > y->hash) - (x->hash < y->hash);
}

/* Whether a ranks below b in by_count_desc's order (a smaller count, or a larger hash). */
static bool ranks_below(const topk_ent *a, const topk_ent *b)
{
    return a->count != b->count ? a->count < b->count : a->hash > b->hash;
}

/* A merge's candidates from src, h[0, n): a min-heap by rank, the lowest ranked at h[0]. */
static void cand_sift_up(topk_ent *h, size_t pos)
{
    topk_ent x = h[pos];
    while (pos > 0 && ranks_below(&x, &h[(pos - 1) / 2])) {
        h[pos] = h[(pos - 1) / 2];
        pos = (pos - 1) / 2;
    }
    h[pos] = x;
}

static void cand_sift_down(topk_ent *h, size_t n, size_t pos)
{
    topk_ent x = h[pos];
    for (;;) {
        size_t c = 2 * pos + 1;
        if (c >= n)
            break;
        if (c + 1 < n && ranks_below(&h[c + 1], &h[c]))
            c++;
        if (!ranks_below(&h[c], &x))
            break;
        h[pos] = h[c];
        pos = c;
    }
    h[pos] = x;
}

/* Rebuilds the index and the heap over e[0, n). */
static void rebuild(ch__topk *t)
{
    memset(t->idx, 0, (t->mask + 1) * sizeof(*t->idx));
    for (size_t i = 0; i < t->n; i++) {
        t->idx[idx_find(t, t->e[i].hash)] = (uint32_t)i + 1;
        t->heap[i] = (uint32_t)i;
        t->e[i].heap = (uint32_t)i;
    }
    for (size_t i = t->n / 2; i-- > 0;)
        sift_down(t, i);
}

void ch__topk_merge(ch__topk *t, const ch__topk *src)
{
    size_t m = 0;
    /* t's entries, with src's count where src holds the key, src's floor where not. */
    for (size_t i = 0; i < t->n; i++) {
        topk_ent *d = &t->se[m];
        *d = t->e[i];
        size_t q = idx_find(src, d->hash);
        if (src->idx[q] != 0) {
            d->count += src->e[src->idx[q] - 1].count;
            d->error += src->e[src->idx[q] - 1].error;
        } else {
            d->count += src->floor;
            d->error += src->floor;
        }
        d->kslot = (uint32_t)m;
        memcpy(t->skeys + m * t->keymax, t->keys + (size_t)t->e[i].kslot * t->keymax,
               d->keylen);
        m++;
    }
    /* src's keys t does not hold, with t's floor: into the scratch left, 2k - n >= k entries.
     * A src with more entries than that (a larger k) keeps the best ranked there, a min-heap
     * whose lowest one a better key replaces; only k are kept anyway, and every key dropped
     * here ranks below them all. dropped: the largest merged count dropped, so the floor
     * covers those keys too. O(src's n log k). */
    topk_ent *cand = t->se + m;
    size_t room = 2 * t->k - m, ncand = 0;
    uint64_t dropped = 0;
    for (size_t j = 0; j < src->n; j++) {
        const topk_ent *s = &src->e[j];
        if (t->idx[idx_find(t, s->hash)] != 0)
            continue;
        topk_ent d = *s;
        d.count += t->floor;
        d.error += t->floor;
        size_t at = ncand;
        if (ncand == room) {
            if (!ranks_below(&cand[0], &d)) {
                if (d.count > dropped)
                    dropped = d.count;
                continue;
            }
            if (cand[0].count > dropped)
                dropped = cand[0].count;
            at = 0;
            d.kslot = cand[0].kslot; /* its key bytes' slot is taken over */
        } else {
            d.kslot = (uint32_t)(m + ncand);
        }
        set_key(t, &d, t->skeys + (size_t)d.kslot * t->keymax,
                src->keys + (size_t)s->kslot * src->keymax, s->keylen, s->truncated);
        cand[at] = d;
        if (at == ncand)
            cand_sift_up(cand, ncand++);
        else
            cand_sift_down(cand, ncand, 0);
    }
    m += ncand;
    qsort(t->se, m, sizeof(*t->se), by_count_desc);
    uint64_t fl = t->floor + src->floor;
    if (dropped > fl)
        fl = dropped;
    size_t keep = m < t->k ? m : t->k;
    /* A dropped key's weight is at most its merged count, the largest of which is se[keep]. */
    if (m > keep && t->se[keep].count > fl)
        fl = t->se[keep].count;
    for (size_t i = 0; i < keep; i++) {
        t->e[i] = t->se[i];
        memcpy(t->keys + i * t->keymax, t->skeys + (size_t)t->se[i].kslot * t->keymax,
               t->se[i].keylen);
        t->e[i].kslot = (uint32_t)i;
    }
    t->n = keep;
    t->floor = fl;
    t->total += src->total;
    rebuild(t);
}

void ch__topk_decay(ch__topk *t, double factor)
{
    if (!(factor >= 0.0 && factor <= 1.0))
        return;
    /* ceil(x * f) is monotone in x, so the heap's order holds without a rebuild. */
    for (size_t i = 0; i < t->n; i++) {
        topk_ent *en = &t->e[i];
        uint64_t lower = (uint64_t)floor((double)(en->count - en->error) * factor);
        en->count = (uint64_t)ceil((double)en->count * factor);
        en->error = en->count - lower;
    }
    t->floor = (uint64_t)ceil((double)t->floor * factor);
    t->total = (uint64_t)ceil((double)t->total * factor);
}

size_t ch__topk_sorted(const ch__topk *t, ch__topk_entry *out, size_t cap)
{
    /* The scratch is t's own and no other call is running on t (one thread at a time). */
    topk_ent *se = t->se;
    memcpy(se, t->e, t->n * sizeof(*se));
    qsort(se, t->n, sizeof(*se), by_count_desc);
    size_t n = t->n < cap ? t->n : cap;
    for (size_t i = 0; i < n; i++)
        out[i] = (ch__topk_entry){
            .hash = se[i].hash,
            .count = se[i].count,
            .error = se[i].error,
            .key = t->keys + (size_t)se[i].kslot * t->keymax,
            .keylen = se[i].keylen,
            .truncated = se[i].truncated,
        };
    return n;
}

bool ch__topk_find(const ch__topk *t, uint64_t hash, ch__topk_entry *out)
{
    size_t p = idx_find(t, hash);
    if (t->idx[p] == 0)
        return false;
    const topk_ent *en = &t->e[t->idx[p] - 1];
    *out = (ch__topk_entry){
        .hash = en->hash,
        .count = en->count,
        .error = en->error,
        .key = t->keys + (size_t)en->kslot * t->keymax,
        .keylen = en->keylen,
        .truncated = en->truncated,
    };
    return true;
}

uint64_t ch__topk_floor(const ch__topk *t)
{
    return t->floor;
}

uint64_t ch__topk_total(const ch__topk *t)
{
    return t->total;
}

size_t ch__topk_size(const ch__topk *t)
{
    return t->n;
}

size_t ch__topk_capacity(const ch__topk *t)
{
    return t->k;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * topk_fuzz.c — libFuzzer target for the heavy-hitter summary (src/hot/topk.c; built and run by
 * fuzz/run.sh topk), which takes the keys of clients' requests.
 *
 * The input is a program over two summaries A and B (sizes and key bytes kept from its first
 * bytes, so evictions, truncated keys and merges of summaries of other sizes happen): adds of
 * weighted keys, merges of B into A, decays, clears. Beside them an exact model keeps every
 * key's true weight (decayed as the summaries are). Keys are 64 names whose hashes share their
 * low bits in groups, so the summary's open-addressed index probes, and removes from, long runs.
 * After each merge, decay and clear, every 8th add and at the end, for both summaries, trapping
 * on a violation of topk.h's contract (each key's absence asked of ch__topk_find at the end):
 *   - size <= capacity; ch__topk_sorted gives every entry, largest count first, ties by smaller
 *     hash; ch__topk_find gives each the same;
 *   - each entry: error <= count, count - error <= true <= count (the guarantee), its key bytes
 *     a prefix of its key of at most keymax bytes, truncated exactly when shorter than the key;
 *   - each key not held: true <= floor;
 *   - without a decay since the last clear: total is the weight added (merged ones included);
 *     with adds alone since then, every error <= total / k (Space-Saving's bound; a merge
 *     keeps the guarantee above, not this bound, for summaries of another k).
 */
#include "topk.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NKEYS 64
#define KEY_MAX 40
#define MAX_STEPS 128 /* a program's length (a check is O(k log k + keys)) */

static void check(int ok)
{
    if (!ok)
        __builtin_trap();
}

/* Key i: its hash shares its low 3 bits with the 7 others of its group; its bytes are i
 * repeated (i % 40) + 1 times, so some exceed any keymax below. */
static uint64_t key_hash(size_t i)
{
    return ((uint64_t)(i + 1) << 32) * 0x9E3779B1u + (i & 7);
}

static size_t key_bytes(size_t i, char *out)
{
    size_t n = i % KEY_MAX + 1;
    memset(out, (char)('A' + (int)i % 58), n);
    return n;
}

typedef struct side {
    ch__topk *t;
    size_t k, keymax;
    double truth[NKEYS]; /* each key's weight since the last clear, decayed as t is */
    double added;        /* the total weight added since the last clear */
    bool decayed;        /* a decay since the last clear (here or in a side merged in) */
    bool merged;         /* a merge since the last clear */
} side;

static bool near_le(double a, double b)
{
    return a <= b + 1e-6 * (1.0 + fabs(b));
}

/* last: the program's end, where every key's absence is asked of ch__topk_find too. */
static void verify(const side *s, bool last)
{
    const ch__topk *t = s->t;
    size_t n = ch__topk_size(t);
    check(n <= ch__topk_capacity(t) && ch__topk_capacity(t) == s->k);
    ch__topk_entry *es = malloc((n + 1) * sizeof(*es));
    check(es != NULL);
    check(ch__topk_sorted(t, es, n + 1) == n);
    bool held[NKEYS] = {false};
    uint64_t floor_ = ch__topk_floor(t), total = ch__topk_total(t);
    for (size_t e = 0; e < n; e++) {
        if (e > 0)
            check(es[e - 1].count > es[e].count ||
                  (es[e - 1].count == es[e].count && es[e - 1].hash < es[e].hash));
        size_t i = 0;
        while (i < NKEYS && key_hash(i) != es[e].hash)
            i++;
        check(i < NKEYS);
        check(!held[i]);
        held[i] = true;
        check(es[e].error <= es[e].count);
        check(near_le((double)(es[e].count - es[e].error), s->truth[i]));
        check(near_le(s->truth[i], (double)es[e].count));
        char kb[KEY_MAX];
        size_t kl = key_bytes(i, kb);
        check(es[e].keylen <= s->keymax && es[e].keylen <= kl);
        check(es[e].keylen == 0 || memcmp(es[e].key, kb, es[e].keylen) == 0);
        check(es[e].truncated == (es[e].keylen < kl));
        ch__topk_entry f;
        check(ch__topk_find(t, es[e].hash, &f));
        check(f.count == es[e].count && f.error == es[e].error && f.keylen == es[e].keylen &&
              f.truncated == es[e].truncated &&
              (f.keylen == 0 || memcmp(f.key, es[e].key, f.keylen) == 0));
        if (!s->decayed && !s->merged)
            check(es[e].error * s->k <= total);
    }
    for (size_t i = 0; i < NKEYS; i++) {
        ch__topk_entry f;
        if (!held[i]) {
            check(!last || !ch__topk_find(t, key_hash(i), &f));
            check(near_le(s->truth[i], (double)floor_));
        }
    }
    if (!s->decayed)
        check((double)total == s->added);
    free(es);
}

static void clear(side *s)
{
    ch__topk_clear(s->t);
    memset(s->truth, 0, sizeof(s->truth));
    s->added = 0;
    s->decayed = false;
    s->merged = false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    side a = {.k = 1 + data[0] % 16, .keymax = data[1] % 24};
    side b = {.k = 1 + data[2] % 16, .keymax = data[3] % 24};
    a.t = ch__topk_new(a.k, a.keymax);
    b.t = ch__topk_new(b.k, b.keymax);
    check(a.t != NULL && b.t != NULL);
    for (size_t p = 4, step = 0; p + 1 < size && step < MAX_STEPS; p += 2, step++) {
        uint8_t op = data[p], arg = data[p + 1];
        side *s = (op & 1) != 0 ? &b : &a;
        bool last = p + 3 >= size || step + 1 == MAX_STEPS;
        bool whole = step % 8 == 7 || last; /* check now: every 8th step, the last */
        switch ((op >> 1) % 8) {
        case 5: /* merge B into A */
            ch__topk_merge(a.t, b.t);
            for (size_t i = 0; i < NKEYS; i++)
                a.truth[i] += b.truth[i];
            a.added += b.added;
            a.decayed |= b.decayed;
            a.merged = true;
            whole = true;
            break;
        case 6: { /* decay by arg / 255 */
            double f = arg / 255.0;
            ch__topk_decay(s->t, f);
            for (size_t i = 0; i < NKEYS; i++)
                s->truth[i] *= f;
            s->decayed = true;
            whole = true;
            break;
        }
        case 7:
            if (arg < 16)
                clear(s);
            whole = true;
            break;
        default: { /* add key op >> 4 (with arg's low bits) with weight 1 + arg >> 2 */
            size_t i = ((size_t)(op >> 4) * 4 + (arg & 3)) % NKEYS;
            uint64_t w = 1 + (arg >> 2);
            char kb[KEY_MAX];
            size_t kl = key_bytes(i, kb);
            ch__topk_add(s->t, key_hash(i), kb, kl, w);
            s->truth[i] += (double)w;
            s->added += (double)w;
            break;
        }
        }
        if (whole) {
            verify(&a, last);
            verify(&b, last);
        }
    }
    ch__topk_free(a.t);
    ch__topk_free(b.t);
    return 0;
}

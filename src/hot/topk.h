/* SPDX-License-Identifier: Apache-2.0 */
/*
 * topk.h — a heavy-hitter summary (Space-Saving, Metwally, Agrawal and El Abbadi, ICDT 2005)
 * over a stream of weighted keys: at most k entries, each a key's 64-bit hash, the first keymax
 * bytes of the key, an estimated count and an error bound. Part of libchash's pure core: no
 * I/O, no clock, no globals; allocation only in ch__topk_new. Internal (ch__): the proxy links
 * the static library; libchash-cache can take it the same way.
 *
 * The guarantee, for every entry and at every moment, with `true` the key's total weight since
 * the summary was cleared (decayed as the summary was, see ch__topk_decay):
 *
 *     count - error <= true <= count
 *
 * and every key not in the summary has true <= ch__topk_floor(). Space-Saving's bound follows:
 * with total weight N over k entries, error <= N / k, so a key of weight > N / k is always in.
 * Keys are told apart by their hash alone: two keys of one 64-bit hash count as one.
 *
 * Thread safety: none; one summary belongs to one thread at a time (the proxy gives a worker's
 * window summary to the control thread whole, and takes a cleared one back).
 */
#ifndef CHASH_HOT_TOPK_H
#define CHASH_HOT_TOPK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ch__topk ch__topk;

/* One entry as ch__topk_sorted reports it. key points into the summary: valid until the
 * summary next changes. */
typedef struct ch__topk_entry {
    uint64_t hash;
    uint64_t count;    /* an upper bound of the key's weight */
    uint64_t error;    /* count - error is a lower bound */
    const char *key;
    size_t keylen;     /* <= keymax */
    bool truncated;    /* the key was longer than keymax */
} ch__topk_entry;

/* A summary of k entries (1..65536) keeping keymax key bytes (0..65535) each. NULL when out of
 * memory or an argument is out of range. Memory: about k * (keymax + 64) bytes, twice that
 * while merging (scratch held with it, so a merge never allocates). */
ch__topk *ch__topk_new(size_t k, size_t keymax);
void ch__topk_free(ch__topk *t);
/* Empties t (floor and total 0). O(k). */
void ch__topk_clear(ch__topk *t);
/* Adds weight w (>= 1) for the key of this hash, key[0, len) its bytes (only the first keymax
 * are kept, from the key's first add). O(log k): one lookup in an open-addressed index, one
 * sift in a min-heap of counts. */
void ch__topk_add(ch__topk *t, uint64_t hash, const void *key, size_t len, uint64_t w);
/* t := the merge of t and src (Agarwal et al., "Mergeable summaries", 2012): a key's count and
 * error in each side (a side's floor where it is absent) summed, the k largest counts kept; the
 * guarantee above holds for the merged stream. src is unchanged and may be of any k (a larger
 * one's keys that cannot be kept raise t's floor). Keys of src keep src's keymax bytes, cut to
 * t's. No allocation. O((k + src's size) log k). */
void ch__topk_merge(ch__topk *t, const ch__topk *src);
/* Scales every count, error, the floor and the total by factor (0..1): an exponentially
 * decayed view (a 60 s window from 1 s ones: factor 59/60 before each merge). Counts round up
 * and lower bounds (count - error) down, so the guarantee holds against the decayed true
 * weights. O(k). */
void ch__topk_decay(ch__topk *t, double factor);
/* The entries, largest count first (ties: smaller hash first), at most cap of them into out;
 * returns how many were written. O(k log k). Sorts in t's scratch: t is not changed, but no
 * other call may run on t meanwhile (the one-thread rule above). */
size_t ch__topk_sorted(const ch__topk *t, ch__topk_entry *out, size_t cap);
/* The entry of the key of this hash into *out (true), or false: the key's weight is then at
 * most the floor. O(1) expected. */
bool ch__topk_find(const ch__topk *t, uint64_t hash, ch__topk_entry *out);
/* The upper bound of any absent key's weight (0 until the summary has been full). */
uint64_t ch__topk_floor(const ch__topk *t);
/* The total weight added (decayed and merged as the counts are). */
uint64_t ch__topk_total(const ch__topk *t);
/* Entries held, and the most it holds. */
size_t ch__topk_size(const ch__topk *t);
size_t ch__topk_capacity(const ch__topk *t);

#endif /* CHASH_HOT_TOPK_H */

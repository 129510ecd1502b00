/* SPDX-License-Identifier: Apache-2.0 */
/*
 * journal.c — the keys a node missed (cache_internal.h, ch__journal): what a write or delete
 * for a node's keys did not reach it while it was ejected or failing, and the clean-up that
 * deletes exactly those keys from it before a probe readmits it, so a node that comes back with
 * its memory never serves a value older than one written meanwhile, and is never flushed whole.
 *
 * Exact up to CH__JOURNAL_KEYS distinct keys; past that it spills into a dirty bitmap of
 * CH__DIRTY_BUCKETS buckets of the key's XXH3 (as chash-proxy's rejoin journal), and the
 * clean-up walks the node (SCAN) and deletes the keys of dirty buckets. Memory: the keys' bytes
 * plus 16 bytes each and the set's 2 x CH__JOURNAL_KEYS words while exact; 8 KiB once spilled.
 * Only a node that missed writes holds any.
 */
#include "cache_internal.h"

#include <stdlib.h>
#include <string.h>

#define SET_SLOTS (2u * CH__JOURNAL_KEYS) /* the exact set's open addressing: half full at most */
#define DIRTY_WORDS (CH__DIRTY_BUCKETS / 64u)
#define SCAN_COUNT "1000"                 /* keys a SCAN step asks for */
#define DEL_BATCH 256u                    /* keys deleted per pipeline */

static uint64_t key_hash(const void *key, size_t len)
{
    uint64_t h = 0;
    (void)ch_hash64(CH_HASH_XXH3, key, len, &h); /* cannot fail: a known hash, key non-NULL */
    return h;
}

static uint32_t bucket(uint64_t h)
{
    return (uint32_t)(h >> (64u - CH__DIRTY_BITS));
}

static void mark(uint64_t *dirty, uint64_t h)
{
    uint32_t b = bucket(h);
    dirty[b / 64u] |= (uint64_t)1 << (b % 64u);
}

static bool is_dirty(const uint64_t *dirty, uint64_t h)
{
    uint32_t b = bucket(h);
    return (dirty[b / 64u] >> (b % 64u) & 1u) != 0;
}

bool ch__journal_empty(const ch__journal *j)
{
    return j->n == 0 && !j->spilled;
}

void ch__journal_free(ch__journal *j)
{
    for (size_t k = 0; k < j->n; k++)
        free(j->keys[k].p);
    free(j->keys);
    free(j->slots);
    free(j->dirty);
    *j = (ch__journal){0};
}

/* Every key moves to the bitmap. With no memory for the bitmap either, the journal says "every
 * key" (all): the clean-up then deletes every key the walk meets, the one case it empties the
 * node (counted, never silent: ch__journal_clean's deleted count). */
static void spill(ch__journal *j)
{
    if (j->dirty == NULL)
        j->dirty = calloc(DIRTY_WORDS, sizeof(*j->dirty));
    for (size_t k = 0; k < j->n; k++) {
        if (j->dirty != NULL)
            mark(j->dirty, key_hash(j->keys[k].p, j->keys[k].len));
        free(j->keys[k].p);
    }
    free(j->keys);
    free(j->slots);
    j->keys = NULL, j->slots = NULL, j->n = 0;
    j->spilled = true;
    j->all = j->dirty == NULL;
}

void ch__journal_add(ch__journal *j, const void *key, size_t len)
{
    uint64_t h = key_hash(key, len);
    if (j->spilled) {
        if (j->dirty != NULL)
            mark(j->dirty, h);
        return;
    }
    if (j->slots == NULL && (j->slots = calloc(SET_SLOTS, sizeof(*j->slots))) == NULL) {
        spill(j);
        ch__journal_add(j, key, len);
        return;
    }
    /* slots hold index + 1 of the key in keys (0: free); probing stops at a free slot */
    size_t s = (size_t)(h % SET_SLOTS);
    for (; j->slots[s] != 0; s = (s + 1) % SET_SLOTS) {
        const ch__journal_key *e = &j->keys[j->slots[s] - 1];
        if (e->len == len && memcmp(e->p, key, len) == 0)
            return; /* already there */
    }
    if (j->n == CH__JOURNAL_KEYS) {
        spill(j);
        ch__journal_add(j, key, len);
        return;
    }
    if (j->keys == NULL && (j->keys = calloc(CH__JOURNAL_KEYS, sizeof(*j->keys))) == NULL) {
        spill(j);
        ch__journal_add(j, key, len);
        return;
    }
    char *p = malloc(len > 0 ? len : 1);
    if (p == NULL) {
        spill(j);
        ch__journal_add(j, key, len);
        return;
    }
    memcpy(p, key, len);
    j->keys[j->n++] = (ch__journal_key){p, len};
    j->slots[s] = (uint32_t)j->n;
}

/* DEL (as UNLINK: the server frees the values off its main thread) of keys[0, n) at node i, one
 * pipeline. Returns the keys deleted, or -1 when the node failed (counted). */
static long long unlink_keys(ch_cache *c, size_t i, const char *const *keys, const size_t *lens,
                             size_t n)
{
    const char *argv[1 + DEL_BATCH];
    size_t alens[1 + DEL_BATCH];
    argv[0] = "UNLINK", alens[0] = 6;
    memcpy(argv + 1, keys, n * sizeof(*keys));
    memcpy(alens + 1, lens, n * sizeof(*lens));
    ch__attempt a;
    redisReply *r = ch__node_command(c, i, (int)(n + 1), argv, alens, &a);
    if (r == NULL) {
        ch__node_failed(c, i, &a, NULL);
        return -1;
    }
    long long got = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (got < 0)
        ch__node_bad_reply(c, i, r, &a);
    freeReplyObject(r);
    if (got < 0)
        ch__node_failed(c, i, &a, NULL);
    return got;
}

/* The exact keys, DEL_BATCH per pipeline. */
static bool clean_exact(ch_cache *c, size_t i, const ch__journal *j, uint64_t *deleted)
{
    const char *keys[DEL_BATCH];
    size_t lens[DEL_BATCH];
    for (size_t k = 0; k < j->n; k += DEL_BATCH) {
        size_t n = j->n - k < DEL_BATCH ? j->n - k : DEL_BATCH;
        for (size_t m = 0; m < n; m++)
            keys[m] = j->keys[k + m].p, lens[m] = j->keys[k + m].len;
        long long got = unlink_keys(c, i, keys, lens, n);
        if (got < 0)
            return false;
        *deleted += (uint64_t)got;
    }
    return true;
}

/* SCAN the node (its selected db) to the end; delete the keys of dirty buckets (every key when
 * the journal is "all"). A key written while the walk runs is one this client wrote to the node
 * itself, which is up for writes only once readmitted: the walk ends first. Another client's
 * write meanwhile, of a dirty bucket's key, is deleted too: a miss, never a stale value. */
static bool clean_walk(ch_cache *c, size_t i, const ch__journal *j, uint64_t *deleted)
{
    char cursor[32] = "0";
    do {
        const char *argv[4] = {"SCAN", cursor, "COUNT", SCAN_COUNT};
        const size_t lens[4] = {4, strlen(cursor), 5, sizeof(SCAN_COUNT) - 1};
        ch__attempt a;
        redisReply *r = ch__node_command(c, i, 4, argv, lens, &a);
        if (r == NULL) {
            ch__node_failed(c, i, &a, NULL);
            return false;
        }
        bool shape = r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                     r->element[0]->type == REDIS_REPLY_STRING &&
                     r->element[0]->len < sizeof(cursor) &&
                     r->element[1]->type == REDIS_REPLY_ARRAY;
        if (!shape) {
            ch__node_bad_reply(c, i, r, &a);
            freeReplyObject(r);
            ch__node_failed(c, i, &a, NULL);
            return false;
        }
        memcpy(cursor, r->element[0]->str, r->element[0]->len + 1);
        const redisReply *ks = r->element[1];
        const char *keys[DEL_BATCH];
        size_t lens2[DEL_BATCH], n = 0;
        bool ok = true;
        for (size_t k = 0; k < ks->elements && ok; k++) {
            const redisReply *e = ks->element[k];
            if (e->type != REDIS_REPLY_STRING)
                continue;
            if (!j->all && !is_dirty(j->dirty, key_hash(e->str, e->len)))
                continue;
            keys[n] = e->str, lens2[n] = e->len;
            if (++n == DEL_BATCH) {
                long long got = unlink_keys(c, i, keys, lens2, n);
                ok = got >= 0;
                *deleted += ok ? (uint64_t)got : 0;
                n = 0;
            }
        }
        if (ok && n > 0) {
            long long got = unlink_keys(c, i, keys, lens2, n);
            ok = got >= 0;
            *deleted += ok ? (uint64_t)got : 0;
        }
        freeReplyObject(r);
        if (!ok)
            return false;
    } while (strcmp(cursor, "0") != 0);
    return true;
}

bool ch__journal_clean(ch_cache *c, size_t i, uint64_t *deleted)
{
    ch__journal *j = &c->nodes[i].journal;
    *deleted = 0;
    if (ch__journal_empty(j))
        return true;
    bool ok = j->spilled ? clean_walk(c, i, j, deleted) : clean_exact(c, i, j, deleted);
    if (ok)
        ch__journal_free(j);
    return ok;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mget.c — many keys at once: split per node, one pipeline of GETs per node, merged back in the
 * caller's order.
 *
 * Rounds: each pending key is given its next candidate that has not failed during this call;
 * the keys are grouped by that node (a stable counting sort, so each pipeline keeps the caller's
 * order); each node gets one pipeline. When a node fails, the keys it did not answer stay
 * pending, and the node is not used again in this call (one failure is reported per node and
 * call, however many keys it held). A key whose candidates are exhausted is unserved. Every
 * round either finishes keys or fails a node, so there are at most nodes + 1 rounds.
 */
#define _POSIX_C_SOURCE 200809L

#include "cache_internal.h"

#include <stdlib.h>
#include <string.h>

/* The scratch of one call: O(n x depth + nodes), one allocation. */
typedef struct work {
    size_t depth;
    size_t *cand;    /* n x depth: key j's candidates at cand[j * depth] */
    size_t *ncand;   /* n: how many */
    size_t *next;    /* n: key j's next candidate to try */
    size_t *owner;   /* n: key j's owner in the table */
    size_t *klen;    /* n: key j's length */
    size_t *target;  /* n: key j's node in this round */
    size_t *pending; /* n: keys not finished yet */
    size_t *order;   /* n: this round's pending keys grouped by target */
    size_t *end;     /* nodes + 1: counting-sort bounds (see group_by_node()) */
    bool *failed;    /* nodes: failed during this call */
    void *block;
} work;

static bool work_alloc(work *w, size_t n, size_t depth, size_t nodes)
{
    /* n x (depth + 7) + nodes + 1 words, then nodes bools; nodes <= CH_MAX_NODES and
     * depth <= nodes, so only n can overflow the size. */
    size_t per_key = depth + 7;
    size_t room = SIZE_MAX / sizeof(size_t) - 2 * (nodes + 1);
    if (n > room / per_key)
        return false;
    size_t bytes = (n * per_key + nodes + 1) * sizeof(size_t);
    size_t *p = calloc(1, bytes + nodes);
    if (p == NULL)
        return false;
    w->block = p;
    w->depth = depth;
    w->cand = p, p += n * depth;
    w->ncand = p, p += n;
    w->next = p, p += n;
    w->owner = p, p += n;
    w->klen = p, p += n;
    w->target = p, p += n;
    w->pending = p, p += n;
    w->order = p, p += n;
    w->end = p, p += nodes + 1;
    w->failed = (bool *)p;
    return true;
}

/* Gives every pending key its next candidate that has not failed in this call; keys with none
 * left are unserved. Returns the number still pending (compacted at the front). */
static size_t assign_targets(ch_cache *c, work *w, size_t npending, ch_cache_result *results)
{
    size_t kept = 0;
    for (size_t p = 0; p < npending; p++) {
        size_t j = w->pending[p];
        const size_t *cand = &w->cand[j * w->depth];
        while (w->next[j] < w->ncand[j] && w->failed[cand[w->next[j]]])
            w->next[j]++;
        if (w->next[j] == w->ncand[j]) {
            ch__unserved(c, &results[j]);
            continue;
        }
        w->target[j] = cand[w->next[j]++];
        w->pending[kept++] = j;
    }
    return kept;
}

/* Stable counting sort of the pending keys by target into order[]: node i's keys end up at
 * order[i == 0 ? 0 : end[i - 1] .. end[i]). O(npending + nodes). */
static void group_by_node(work *w, size_t npending, size_t nodes)
{
    memset(w->end, 0, (nodes + 1) * sizeof(size_t));
    for (size_t p = 0; p < npending; p++)
        w->end[w->target[w->pending[p]] + 1]++;
    for (size_t i = 0; i < nodes; i++)
        w->end[i + 1] += w->end[i];
    /* end[i] is now where node i's keys begin; placing advances it to where they end. */
    for (size_t p = 0; p < npending; p++) {
        size_t j = w->pending[p];
        w->order[w->end[w->target[j]]++] = j;
    }
}

/* Sends node i the GETs of keys idx[0..m-1] as one pipeline and reads the replies in order.
 * Returns how many keys were answered (their results are final); fewer than m means the node
 * failed (*a says why). */
static size_t pipeline_once(ch_cache *c, size_t i, const size_t *idx, size_t m, work *w,
                            const char *const *keys, ch_cache_result *results, ch__attempt *a)
{
    if (!ch__node_connect(c, i, a))
        return 0;
    for (size_t k = 0; k < m; k++) {
        size_t j = idx[k];
        const char *argv[2] = {"GET", keys[j] != NULL ? keys[j] : ""};
        const size_t lens[2] = {3, w->klen[j]};
        if (!ch__node_append(c, i, 2, argv, lens, a))
            return 0;
    }
    for (size_t k = 0; k < m; k++) {
        size_t j = idx[k];
        redisReply *reply = ch__node_read(c, i, a);
        if (reply == NULL)
            return k;
        ch__outcome outcome = ch__classify_get(reply);
        if (outcome == CH__BAD_REPLY) {
            ch__node_bad_reply(c, i, reply, a);
            freeReplyObject(reply);
            return k;
        }
        ch__served(c, i, w->owner[j], outcome, reply, &results[j]);
    }
    return m;
}

/* pipeline_once(), and once more on a fresh connection when a kept one broke before answering
 * anything (as ch__node_command() does). */
static size_t pipeline(ch_cache *c, size_t i, const size_t *idx, size_t m, work *w,
                       const char *const *keys, ch_cache_result *results, ch__attempt *a)
{
    for (size_t k = 0; k < m; k++)
        results[idx[k]].attempts++;
    c->nodes[i].count.attempts += m;
    c->total.attempts += m;
    bool kept = c->nodes[i].conn != NULL;
    size_t done = pipeline_once(c, i, idx, m, w, keys, results, a);
    if (done == 0 && ch__node_stale(kept, a))
        done = pipeline_once(c, i, idx, m, w, keys, results, a);
    return done;
}

/* One round over the grouped keys; the unanswered ones go back to pending. Returns how many. */
static size_t run_round(ch_cache *c, work *w, const char *const *keys,
                        ch_cache_result *results)
{
    size_t left = 0;
    size_t begin = 0;
    for (size_t i = 0; i < c->n; i++) {
        size_t end = w->end[i];
        if (end == begin)
            continue;
        ch__attempt a;
        size_t m = end - begin;
        size_t done = pipeline(c, i, &w->order[begin], m, w, keys, results, &a);
        if (done < m) {
            w->failed[i] = true;
            ch__node_failed(c, i, &a, NULL);
            for (size_t k = done; k < m; k++) {
                size_t j = w->order[begin + k];
                results[j].fail = a.fail;
                memcpy(results[j].message, a.message, sizeof(results[j].message));
                w->pending[left++] = j;
            }
        }
        begin = end;
    }
    return left;
}

static bool valid_keys(size_t n, const char *const *keys, const size_t *lens)
{
    for (size_t j = 0; j < n; j++)
        if (keys[j] == NULL && (lens == NULL || lens[j] > 0))
            return false;
    return true;
}

int ch_cache_mget(ch_cache *c, size_t n, const char *const *keys, const size_t *lens,
                  ch_cache_result *results)
{
    if (c == NULL || (n > 0 && (keys == NULL || results == NULL)))
        return CH_EINVAL;
    if (!valid_keys(n, keys, lens))
        return CH_EINVAL;
    if (n == 0)
        return CH_OK;
    work w;
    if (!work_alloc(&w, n, c->rdepth, c->n))
        return CH_ENOMEM;

    ch__sigpipe guard;
    ch__sigpipe_block(&guard);
    ch__run_probes(c);
    c->requests += n;
    if (ch__fenced_now(c)) { /* every key refused, on one reading of the clock */
        for (size_t j = 0; j < n; j++) {
            ch__result_clear(&results[j]);
            ch__fenced(c, &results[j]);
        }
        ch__sigpipe_restore(&guard);
        free(w.block);
        return CH_OK;
    }
    /* Hot keys: every key counted; those the near cache holds are answered from it and sent
     * nowhere (their pending slot is not taken). */
    uint64_t sent = ch__now_ns();
    size_t npending = 0;
    for (size_t j = 0; j < n; j++) {
        ch__result_clear(&results[j]);
        w.klen[j] = lens != NULL ? lens[j] : strlen(keys[j]);
        const char *key = keys[j] != NULL ? keys[j] : "";
        uint64_t kh = ch_key_hash(c->table, key, w.klen[j]);
        if (ch_route_hash(c->table, c->health, kh, c->rdepth, &w.cand[j * w.depth],
                          &w.ncand[j]) != CH_OK)
            w.ncand[j] = 0; /* cannot happen: the depth was checked against the table */
        w.owner[j] = ch_lookup_hash(c->table, kh);
        uint64_t hh = ch__hot_hash(key, w.klen[j]);
        ch__hot_count(&c->hot, key, w.klen[j], hh, sent);
        if (!ch__hot_get(c, key, w.klen[j], hh, w.owner[j], sent, &results[j]))
            w.pending[npending++] = j;
    }
    while (npending > 0) {
        npending = assign_targets(c, &w, npending, results);
        if (npending == 0)
            break;
        group_by_node(&w, npending, c->n);
        npending = run_round(c, &w, keys, results);
    }
    /* Replicas: a miss at an owner is read from the key's next owners, one key at a time (the
     * rare case: a node that restarted empty, or a new owner after a membership change). */
    for (size_t j = 0; c->replicas > 1 && j < n; j++) {
        if (results[j].status != CH_CACHE_MISS)
            continue;
        const char *key = keys[j] != NULL ? keys[j] : "";
        uint64_t kh = ch_key_hash(c->table, key, w.klen[j]);
        ch__replica_fill(c, key, w.klen[j], kh, &w.cand[j * w.depth], w.ncand[j], w.owner[j],
                         &results[j]);
    }
    for (size_t j = 0; c->hot.near != NULL && j < n; j++) {
        const char *key = keys[j] != NULL ? keys[j] : "";
        if (results[j].attempts > 0) /* read from a server now, not from the near cache */
            ch__hot_put(c, key, w.klen[j], ch__hot_hash(key, w.klen[j]), sent, &results[j]);
    }
    ch__sigpipe_restore(&guard);
    free(w.block);
    return CH_OK;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * health_shared.h — a pool's health, shared by the workers: a ch_health behind a lock, and what
 * the request path needs of it published as atomics (up[], n_up) so that routing takes no lock.
 *
 * The lock is taken by a failure, a probe (claim and result) and the first success after a
 * failure (streak[] says a failure streak is open), none of which is the common case. Replaced
 * as a whole by a reload (the old one is freed once every worker has switched). A reader may see
 * a node's state a moment late, which is the same as the request having arrived a moment
 * earlier; it never sees a torn value.
 */
#ifndef CHASH_PROXY_HEALTH_SHARED_H
#define CHASH_PROXY_HEALTH_SHARED_H

#include "chash_route.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Keys written elsewhere on an ejected node's behalf (the rejoin journal): before the node is
 * readmitted they are deleted on it, so it cannot serve values older than what was written
 * while it was out. Exact while it fits: a set of at most cap keys. Past that (or out of
 * memory) it spills into a dirty bitmap over buckets of the key hash space, which cannot
 * overflow: bucket = the top PX_DIRTY_BITS bits of XXH3_64 of the key's routing bytes
 * (px_journal_bucket); a rejoin then enumerates the node's keys and deletes those of dirty
 * buckets. It never flushes the node. Guarded by its px_health's lock.
 * Memory: the bitmap is allocated with the health, PX_DIRTY_BUCKETS / 8 = 8 KiB per node; the
 * exact set is at most cap keys (their bytes, plus 16 bytes and two slots each). */
#define PX_DIRTY_BITS 16u
#define PX_DIRTY_BUCKETS (1u << PX_DIRTY_BITS)
#define PX_DIRTY_WORDS (PX_DIRTY_BUCKETS / 64u)

typedef struct px_journal {
    char **keys;   /* open addressing: NULL or a malloc'd key (its length in lens) */
    uint32_t *lens;
    uint64_t *hashes;
    size_t n, slots; /* keys held; table size (a power of two, >= 2 cap) */
    uint64_t *dirty; /* PX_DIRTY_WORDS words; set bits only while spilled */
    bool spilled;    /* keys went to dirty (the set then holds none) */
} px_journal;

/* What a readmission must clean up on its node (px_health_journal_take); the caller owns it. */
typedef struct px_journal_batch {
    char **keys;
    uint32_t *lens;
    size_t n;
    uint64_t *dirty; /* NULL, or PX_DIRTY_WORDS words: every key of a dirty bucket must go */
} px_journal_batch;
void px_journal_batch_free(px_journal_batch *b);
/* The key's bucket in the dirty bitmap (any thread, no lock). */
uint32_t px_journal_bucket(const char *key, size_t len);
static inline bool px_journal_dirty(const uint64_t *dirty, uint32_t bucket)
{
    return (dirty[bucket / 64u] >> (bucket % 64u) & 1u) != 0;
}

typedef struct px_health {
    pthread_mutex_t lock; /* guards h, and every write to the arrays below */
    ch_health *h;
    size_t n;
    uint8_t *up;      /* ch_health_is_up(h, i) */
    uint8_t *streak;  /* i has failures that no success has ended yet */
    uint8_t *probing; /* a worker has a probe of i in flight */
    size_t n_up;      /* nodes up */
    px_journal *journal; /* per node */
    size_t journal_cap;  /* exact keys per node (0: every key goes to the dirty bitmap) */
    size_t max_down;     /* the most nodes ejected at once (max_ejected_share x n) */
    uint64_t fail_open;  /* ejections refused by max_down (atomic: /metrics reads it) */
    /* Slow start (readmit_ramp): a node readmitted by its probe at loop time t serves each of
     * its keys from t + XXH3_64(key) mod readmit_ramp_ms on (px_ramp_switched, window.h); until
     * then the walk passes over it for that key, to the node that held the key while it was
     * out. readmit_at[i]: t of i's last readmission (0: never); ramp_until: the latest
     * readmission's t + ramp, so a request pays the key's XXH3 only while a ramp runs.
     * readmit_ramp_ms is set once, before the health is shared; the others are written under
     * the lock and read with relaxed atomic loads. */
    uint64_t readmit_ramp_ms;
    uint64_t *readmit_at;
    uint64_t ramp_until;
    /* Per node (NULL without a ramp): PX_DIRTY_WORDS words, a bit per bucket of the key hash
     * space (px_journal_bucket's), set when a key of that bucket was written during the node's
     * ramp before its switch; the bucket's keys have switched then (px_health_switch_early).
     * Cleared when the node is readmitted; read without the lock. 8 KiB per node. */
    uint64_t **early;
} px_health;

/* journal_cap: keys kept per ejected node (rejoin_journal_keys); max_down: the most nodes
 * ejected at once (fail-open beyond: max_ejected_share). CH_OK, CH_E*. */
int px_health_new(size_t n, const ch_health_options *opt, size_t journal_cap, size_t max_down,
                  px_health **out);
void px_health_free(px_health *h);
bool px_health_up(const px_health *h, size_t i); /* no lock */
/* The key's candidates (ch_route_hash_fn over the published state); no lock. */
int px_health_route(const px_health *h, const ch_table *t, uint64_t kh, size_t depth,
                    size_t *out, size_t *count);
void px_health_success(px_health *h, size_t i, uint64_t now_ms); /* locks only after a failure */
/* A failure of i; true when it ejected i. An ejection that would leave more than max_down
 * nodes out is undone at once (fail-open: the node keeps its keys; its requests keep failing
 * over one by one), as mcrouter's TKO cap does: when half a pool looks dead, the proxy is more
 * likely cut off than they. */
bool px_health_failure(px_health *h, size_t i, uint64_t now_ms, uint64_t rnd);
/* Whether this caller should probe i now: i is ejected, its probe is due and no one else probes
 * it. The caller then owns the probe and must report it with px_health_probe_result (or
 * px_health_probe_drop). */
bool px_health_probe_claim(px_health *h, size_t i, uint64_t now_ms);
/* The claimed probe's result; true when i is up afterwards (readmitted). */
bool px_health_probe_result(px_health *h, size_t i, bool ok, uint64_t now_ms, uint64_t rnd);
/* The claimed probe succeeded and its clean-up deleted everything taken from i's journal: i is
 * readmitted only if nothing was journaled for it since the last px_health_journal_take, checked
 * under the lock that px_health_journal takes, so a write either journals its key first (then i
 * is not readmitted) or finds i up and goes to it. PX_READMIT_DIRTY: keys were journaled
 * meanwhile, nothing is recorded and the probe stays claimed (the caller cleans again or reports
 * a failed probe); otherwise the probe's success is recorded, PX_READMIT_UP when i is up. */
enum { PX_READMIT_DIRTY = -1, PX_READMIT_OUT = 0, PX_READMIT_UP = 1 };
int px_health_readmit(px_health *h, size_t i, uint64_t now_ms, uint64_t rnd);
void px_health_probe_drop(px_health *h, size_t i); /* a claimed probe that will not report */
/* Sets the readmission ramp (readmit_ramp ms, 0: none) of a health not shared yet, with its
 * fixed memory (8 KiB per node). 0, or -1 when out of memory (no ramp then). */
int px_health_set_readmit_ramp(px_health *h, uint64_t ramp_ms);
/* A write of the key of XXH3-64 xh, whose owner i is in its ramp and has not switched the key:
 * the key's bucket switches to i now, before the write is routed, so the write and every later
 * read go to i (the bucket's other keys with it: each is on i as the rejoin left it, deleted
 * there when it was written while i was out, so none is older than its last write). No write
 * goes to the interim server during a ramp, so what it holds stays the latest until a key's
 * switch, and a node back with its memory never serves a value older than a write made during
 * its ramp. No lock (an atomic or). */
void px_health_switch_early(px_health *h, size_t i, uint64_t xh);
/* Whether a readmitted node's ramp runs at loop time now (no lock): only then does routing ask
 * px_health_serves or px_health_route_key. */
bool px_health_ramping(const px_health *h, uint64_t now);
/* Whether node i serves the key whose XXH3-64 (px_key_hash) is xh at loop time now: up, and
 * past its readmission ramp or its key's switch in it (no lock). */
bool px_health_serves(const px_health *h, size_t i, uint64_t xh, uint64_t now);
/* px_health_route for one key of XXH3-64 xh at loop time now: a node in its readmission ramp
 * that has not switched the key yet is passed over as if it were still ejected, so the key
 * stays on the node that held it meanwhile (the walk's next up one). No lock. Cost: as
 * px_health_route, plus a division per ramping node the walk visits. */
int px_health_route_key(const px_health *h, const ch_table *t, uint64_t kh, uint64_t xh,
                        uint64_t now, size_t depth, size_t *out, size_t *count);
/* A write of key was sent elsewhere because node i (its owner) is ejected: remembered for i's
 * rejoin. Takes the lock; a no-op once i is up again. Cost: O(len) expected. */
void px_health_journal(px_health *h, size_t i, const char *key, size_t len);
/* Moves node i's journal into out (empty afterwards). Its probe's owner calls it when the probe
 * succeeded, before reporting the result. 0, or -1 when out of memory (the journal is kept:
 * the node stays out until a later probe). */
int px_health_journal_take(px_health *h, size_t i, px_journal_batch *out);
/* The clean-up of a taken journal failed: what it held goes back into i's journal (merged with
 * what was written meanwhile), for the next rejoin; b is freed. Never loses a key. */
void px_health_journal_return(px_health *h, size_t i, px_journal_batch *b);
/* Whether any node is ejected (no lock): the request path records writes only then. */
bool px_health_any_down(const px_health *h);

#endif /* CHASH_PROXY_HEALTH_SHARED_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * near.h — a near cache of hot keys' replies (issue 25; docs/OPERATIONS.md, "Hot keys"): a
 * bounded map from a key to the bytes a read of it got from its server, served again without a
 * server request while fresh. Used per worker by chash-proxy (the reply bytes) and per client
 * by libchash-cache (the value). Part of libchash's pure core: no I/O, no clock (the caller
 * passes times, in ns of its own monotonic clock), no globals; internal (ch__), as topk.h.
 *
 * Freshness has two bounds:
 * - the TTL: an entry filled by a read sent at t serves until t + ttl, never later, so what it
 *   serves was the server's value at some time in [t, t + ttl): a value at most ttl old;
 * - invalidation: every write or delete of a key bumps its generation (ch__near_gens: one
 *   atomic counter per bucket of the key hash space, shared by the threads that serve the same
 *   keys), once when it is sent and once when it is answered. A read records the generation
 *   when it is sent; its reply is stored only with that generation, and an entry serves only
 *   while its bucket's generation is still the one it was stored with. So a read that may have
 *   seen the value before a write (sent before the write was answered) is never served after
 *   the write was sent. Writes that do not pass through the caller are not seen: only the TTL
 *   bounds those.
 *
 * Memory: each entry holds its key and reply bytes plus 56 bytes (ch__near_stats.bytes, which
 * never exceeds max_bytes: past it the least recently used entries go first). The generations:
 * CH__NEAR_GEN_BUCKETS x 4 bytes (64 KiB); a bucket shared by two keys costs misses, never a
 * stale answer. Thread safety: ch__near_gens_* from any thread; a ch__near belongs to one.
 */
#ifndef CHASH_HOT_NEAR_H
#define CHASH_HOT_NEAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CH__NEAR_GEN_BITS 14u
#define CH__NEAR_GEN_BUCKETS (1u << CH__NEAR_GEN_BITS)

typedef struct ch__near_gens ch__near_gens;
ch__near_gens *ch__near_gens_new(void); /* NULL when out of memory */
void ch__near_gens_free(ch__near_gens *g);
/* The generation of key hash kh now: its bucket's and every key's (ch__near_invalidate_all)
 * together (any thread; acquire). */
uint32_t ch__near_gen(const ch__near_gens *g, uint64_t kh);
/* A write or delete of a key of hash kh is sent, or was answered (any thread). */
void ch__near_invalidate(ch__near_gens *g, uint64_t kh);
/* The same for every key at once (a write of keys the caller cannot name: a script's
 * undeclared ones): every entry of every cache over g stops serving. Cost: one atomic add; the
 * caches' hits then miss until refilled. */
void ch__near_invalidate_all(ch__near_gens *g);

typedef struct ch__near_stats {
    uint64_t hits, misses, stores, refused, evictions, expired, invalidated;
    uint64_t entries, bytes;
} ch__near_stats;

typedef struct ch__near ch__near;
/* A cache over generations g: at most max_bytes (keys, replies and overhead), entries fresh
 * for ttl_ns from their read's send. g NULL: no generations (gen is ignored), for a caller
 * whose keys no other thread writes, which drops a key's entry itself before each of its
 * writes (ch__near_drop). NULL when out of memory. */
ch__near *ch__near_new(ch__near_gens *g, size_t max_bytes, uint64_t ttl_ns);
void ch__near_free(ch__near *c);

/* The reply cached for key (hash kh) that may be served at now_ns, or NULL. *len: its bytes;
 * valid until the next call on c. An expired or invalidated entry is never served but kept
 * until evicted or replaced; *known (when not NULL) says whether the key had an entry, live
 * or not: the key was hot lately (a caller may keep caching it without waiting for its
 * threshold again). Cost: O(1) expected. */
const char *ch__near_get(ch__near *c, uint64_t kh, const void *key, size_t klen,
                         uint64_t now_ns, size_t *len, bool *known);
/* Stores reply bytes for key (hash kh), from a read sent at sent_ns with the key's generation
 * gen then (ch__near_gen). Refused (false) when the generation moved since, the entry would be
 * expired already at now_ns, it is larger than max_bytes / 8, or memory is short; older
 * entries are evicted to make room. Replaces an entry of the same key. */
bool ch__near_put(ch__near *c, uint64_t kh, const void *key, size_t klen, uint32_t gen,
                  uint64_t sent_ns, uint64_t now_ns, const void *reply, size_t rlen);
/* Drops the entry of key, if any (a write the caller makes itself, where no other thread
 * shares its keys: the same as invalidating, without generations). */
void ch__near_drop(ch__near *c, uint64_t kh, const void *key, size_t klen);
void ch__near_stats_get(const ch__near *c, ch__near_stats *out);

#endif /* CHASH_HOT_NEAR_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nearcache.h — the proxy's near cache of hot keys' replies (issue 25; docs/OPERATIONS.md, "Hot
 * keys"): per worker, a bounded map from a key to the reply bytes its owner gave to a read of
 * it, served again without a backend request while it is fresh.
 *
 * Freshness has two bounds:
 * - the TTL: an entry filled by a read sent at t serves until t + ttl, never later, so what it
 *   serves was the server's value at some time in [t, t + ttl) — a value at most ttl old;
 * - invalidation: every write or delete through any worker of the pool bumps its key's
 *   generation (px_near_gens, shared by the pool's workers: one atomic counter per bucket
 *   of the key hash space), once when it is sent and once when it is answered. A read records
 *   the generation when it is sent; its reply is stored only with that generation, and an entry
 *   serves only while its bucket's generation is still the one it was stored with. So a read
 *   that may have seen the value before a write through the proxy (sent before the write was
 *   answered) is never served after the write was sent. Writes by clients that do not go
 *   through this proxy are not seen: only the TTL bounds them.
 *
 * Memory: each entry holds its key and reply bytes plus 56 bytes, counted in px_mem_held (the
 * process budget); past max_bytes the least recently used entries go first. The generations:
 * PX_NEAR_GEN_BUCKETS x 4 bytes per pool (64 KiB); bucket collisions cost misses, never stale
 * answers. Not thread-safe, except px_near_gens_*: a px_near belongs to one worker.
 */
#ifndef CHASH_PROXY_NEARCACHE_H
#define CHASH_PROXY_NEARCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PX_NEAR_GEN_BITS 14u
#define PX_NEAR_GEN_BUCKETS (1u << PX_NEAR_GEN_BITS)

/* The pool's invalidation generations, shared by its workers. */
typedef struct px_near_gens px_near_gens;
px_near_gens *px_near_gens_new(void); /* NULL when out of memory */
void px_near_gens_free(px_near_gens *g);
/* The generation of key hash kh now (any thread). */
uint32_t px_near_gen(const px_near_gens *g, uint64_t kh);
/* A write or delete of a key of hash kh is sent, or was answered (any thread). */
void px_near_invalidate(px_near_gens *g, uint64_t kh);

typedef struct px_near_stats {
    uint64_t hits, misses, stores, refused, evictions, expired, invalidated;
    uint64_t entries, bytes;
} px_near_stats;

typedef struct px_near px_near;
/* A worker's cache over the pool's generations g: at most max_bytes (entries' keys, replies
 * and overhead), entries fresh for ttl_ns from their read's send. NULL when out of memory. */
px_near *px_near_new(px_near_gens *g, size_t max_bytes, uint64_t ttl_ns);
void px_near_free(px_near *c);

/* The reply cached for key (hash kh) that may be served at now_ns, or NULL (then a stale or
 * invalidated entry is dropped). *len: its bytes; valid until the next call on c. Cost: O(1)
 * expected. */
const char *px_near_get(px_near *c, uint64_t kh, const char *key, size_t klen, uint64_t now_ns,
                        size_t *len);
/* Stores reply bytes for key (hash kh), from a read sent at sent_ns with the key's generation
 * gen then (px_near_gen). Refused (false) when the generation moved since, the entry would be
 * expired already at now_ns, or it is larger than max_bytes / 8; older entries are evicted to
 * make room. Replaces an entry of the same key. */
bool px_near_put(px_near *c, uint64_t kh, const char *key, size_t klen, uint32_t gen,
                 uint64_t sent_ns, uint64_t now_ns, const char *reply, size_t rlen);
void px_near_stats_get(const px_near *c, px_near_stats *out);

#endif /* CHASH_PROXY_NEARCACHE_H */

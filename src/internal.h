/* SPDX-License-Identifier: Apache-2.0 */
/*
 * internal.h — shared internals of libchash. Not installed; names are ch__ and never exported
 * from the shared library (src/chash.map keeps only ch_[a-z]* symbols).
 */
#ifndef CHASH_INTERNAL_H
#define CHASH_INTERNAL_H

#include "chash.h"

#include <stdbool.h>

/* A registry hash: the native value, 32-bit hashes zero-extended to 64 bits. */
typedef uint64_t (*ch__hash_fn)(const void *key, size_t len);

#define CH__HASH_DECL(id, name, bits, value) uint64_t ch__hash_##name(const void *key, size_t len);
CH_HASH_LIST(CH__HASH_DECL)
#undef CH__HASH_DECL

/* The registry function of a valid hash id. */
ch__hash_fn ch__hash_fn_of(ch_hash_id id);

/* The well-formed UTF-8 sequence at s[0..n-1]: its length and code point, or 0 and in *bad the
 * length of the ill-formed maximal subpart one U+FFFD replaces (hashes.c). */
size_t ch__utf8_next(const uint8_t *s, size_t n, uint32_t *cp, size_t *bad);

/* Building blocks exposed for tests against published vectors. */
uint32_t ch__murmur3_32(const void *key, size_t len, uint32_t seed);

/* murmur3's 32-bit finalizer: every input bit affects every output bit with probability close
 * to 1/2, which raw FNV-1a lacks for short, similar keys. Inline: it is half the default hash. */
static inline uint32_t ch__fmix32(uint32_t h)
{
    h ^= h >> 16;
    h *= UINT32_C(0x85ebca6b);
    h ^= h >> 13;
    h *= UINT32_C(0xc2b2ae35);
    h ^= h >> 16;
    return h;
}

/* The murmur3 64-bit finalizer: a bijection with full avalanche. Used to derive independent
 * pseudo-random values from a hash (rendezvous scores, maglev permutations). */
static inline uint64_t ch__fmix64(uint64_t k)
{
    k ^= k >> 33;
    k *= UINT64_C(0xff51afd7ed558ccd);
    k ^= k >> 33;
    k *= UINT64_C(0xc4ceb9fe1a85ec53);
    k ^= k >> 33;
    return k;
}

/* ---- tables ------------------------------------------------------------------------------ */

/* One ring point. Position and owner side by side, so a lookup touches one cache line. */
typedef struct ch__point {
    uint32_t pos;
    uint32_t node;
} ch__point;

/* A walk over a key's candidate nodes, in the algorithm's failover order. Candidates may repeat
 * (a ring passes several points of one node); callers deduplicate where they need to. */
/* A point of a ring whose positions are 64 bits wide (ring64.c). */
typedef struct ch__point64 {
    uint64_t pos;
    uint32_t node;
} ch__point64;

typedef struct ch__walk {
    uint64_t h;        /* the key hash */
    size_t next;       /* algorithm-specific cursor */
    size_t left;       /* steps left before the walk has made one full turn */
    double last_score; /* rendezvous: the score of the candidate returned last */
    size_t last;       /* rendezvous: its node index; dalli@3, pecl_memcache@4: the next retry */
    uint64_t aux;      /* dalli@3, cache_memcached@1: the CRC-32 shift over the key's length,
                          once computed */
    uint64_t acc;      /* cache_memcached@1, python_memcached@1: the library's retry hash */
} ch__walk;

#define CH__WALK_END SIZE_MAX

typedef struct ch__algo {
    /* Builds the algorithm's part of t from t->n validated nodes (ids, weights, id hashes set).
     * Allocates only through ch__alloc; on failure frees what it allocated and returns status. */
    int (*build)(ch_table *t);
    void (*destroy)(ch_table *t);
    size_t (*lookup)(const ch_table *t, uint64_t h);
    /* Fraction of the hash space per node, as ch_table_shares() documents. */
    void (*shares)(const ch_table *t, double *shares);
    /* Optional (NULL for jump): starts a walk; walk_next returns a node or CH__WALK_END. */
    void (*walk_start)(const ch_table *t, uint64_t h, ch__walk *w);
    size_t (*walk_next)(const ch_table *t, ch__walk *w);
    /* twemproxy's placements hash an empty key to 0 whatever the hash function. */
    bool empty_key_zero;
    /* The key hash carries the key's length in bits 32..63 (its hash is 32 bits wide): a
     * library whose retry rehashes a prefix and the key (dalli@3's "<try><key>") needs it to
     * derive the retry's hash from the key's. */
    bool len_in_key_hash;
    /* Optional: the key hash of the key (after the hash tag and the empty-key rule), for a
     * library that prepares keys before hashing them (pecl_memcache@4); NULL: t->hash. */
    uint64_t (*key_hash)(const ch_table *t, const void *key, size_t len);
    /* A client library's scheme fixes its key hash: the table uses `hash` whatever
     * ch_options.hash says (ch_table_info reports it). */
    bool fixed_hash;
    /* The algorithm has no weights: it refuses unequal weights (the tutorial rings: any weight
     * other than 1). */
    bool unweighted;
    /* The library names a server by its address ("host:port" as written): a config's servers
     * are given to it by address, not by their twemproxy names (CH_ALGO_F_ADDR_IDS). */
    bool addr_ids;
    /* Optional: a placement that hashes the key with each node (pymemcache's rendezvous over
     * "<node>-<key>") has no single key hash; ch_lookup() calls this instead of lookup(). Such
     * an algorithm is CH_ALGO_F_KEYED: its lookup(h) is only h % N. */
    size_t (*lookup_key)(const ch_table *t, const void *key, size_t len);
    ch_hash_id hash;
    /* The points per node (or per unit weight) that ch_options.vnodes == 0 stands for: the
     * library's own default for a client library's scheme; 0 here means CH_DEFAULT_VNODES. */
    uint32_t default_vnodes;
    /* The largest weight the scheme takes (ch_algo_max_weight); 0: no bound on one weight. */
    double max_weight;
    /* Optional: the number of points or slots ch_table_info reports; NULL: N, or the ring's
     * points for the ring layout's own lookup. */
    size_t (*points)(const ch_table *t);
    /* Not consistent: a change of N moves most keys (CH_ALGO_F_REMAPS). */
    bool remaps;
    /* Weights must be whole numbers >= 1 (CH_ALGO_F_WHOLE_WEIGHTS); the build checks it. */
    bool whole_weights;
    /* Optional: what the library refuses or caps, in one sentence naming the library
     * (ch_algo_limits); a build that breaks it fails with CH_EWEIGHT or CH_ETOOBIG. */
    const char *limits;
} ch__algo;

#define CH__ALGO_DECL(id, ident, name, value) extern const ch__algo ch__algo_##ident;
CH_ALGO_LIST(CH__ALGO_DECL)
#undef CH__ALGO_DECL

struct ch_table {
    ch_error *err;         /* during ch_table_build_err() only: where a failure is told (NULL:
                              nowhere); NULL once built */
    const ch__algo *algo;
    ch__hash_fn hash;
    ch_options opt;        /* as built; opt.allocator points at alloc below */
    ch_allocator alloc;
    size_t bytes;          /* heap bytes owned, kept by ch__alloc/ch__free */

    size_t n;
    const char **ids;      /* n pointers into id_block */
    char *id_block;
    size_t id_block_len;
    double *weights;
    uint64_t *id_hash;     /* ch__fmix64(hash64(id)): a per-node seed for rendezvous and maglev */
    uint32_t *by_id;       /* node indexes sorted by id (strcmp): an order that does not depend on
                              the order of the caller's list */
    double weight_sum;
    bool uniform;          /* all weights equal */

    union {
        struct {
            ch__point *points; /* sorted by (pos, node id, vnode index) */
            size_t npoints;
            uint32_t *bucket;  /* nbuckets + 1 entries: bucket[b] = first point with pos >= b << shift */
            unsigned shift;    /* 32 - log2(nbuckets) */
        } ring;
        struct {
            ch__point64 *points; /* sorted by pos, one point per position; + CH__RING64_PAD
                                    padding points */
            size_t npoints;
            uint32_t *bucket;    /* as the ring's, over the top 64 - shift bits */
            unsigned shift;
            size_t allocated;    /* entries allocated for points */
        } ring64;
        struct {
            uint32_t *slot;    /* M entries, each a node index; every slot is filled */
            uint32_t m;
        } maglev;              /* also modula's slot table: m slots, round(w_i) per node */
    } u;
};

/* ---- why a build failed (ch_error) ------------------------------------------------------- */

#define CH__PRINTF(f, a) __attribute__((format(printf, f, a)))

/* ch__error_set() (table_view.h) into the build's err (t->err), for an algorithm's build. */
int ch__fail(ch_table *t, int status, const char *fmt, ...) CH__PRINTF(3, 4);
/* The reasons several algorithms share, each with its status: more points (or slots) than
 * CH_MAX_POINTS (CH_ETOOBIG); no node gets a point at t's vnodes (CH_EINVAL); unequal weights
 * for a scheme without weights (CH_EUNSUPPORTED); a weight other than 1 for the tutorial rings
 * (CH_EUNSUPPORTED). */
int ch__fail_points(ch_table *t);
int ch__fail_no_points(ch_table *t);
int ch__fail_unweighted(ch_table *t);
int ch__fail_unit_weights(ch_table *t);
/* A refusal in a client library's words (the algorithm's limits, ch_algo_limits): unequal
 * weights where it has none (the first node that differs from node 0 named), or a weight it would
 * not take. Returns status. */
int ch__fail_library(ch_table *t, int status);

/* The ring layout, shared by ring and the ketama family (ring.c). ch__ring_index() takes
 * ownership of pts (total + CH__RING_SCAN entries, the first total filled in any order, ties in
 * the order they must keep), sorts them stably by position and builds the bucket index; on
 * failure it frees pts and returns CH_ENOMEM. */
#define CH__RING_SCAN 4
/* Appends sep and the decimal digits of k at buf + len (room for 11 bytes); returns the new
 * length. Point strings "<id>#<j>" (ring) and "<name>-<k>" (ketama). */
size_t ch__append_index(char *buf, size_t len, char sep, uint32_t k);
int ch__ring_index(ch_table *t, ch__point *pts, size_t total);
void ch__ring_destroy(ch_table *t);
size_t ch__ring_lookup(const ch_table *t, uint64_t h);
void ch__ring_walk_start(const ch_table *t, uint64_t h, ch__walk *w);
size_t ch__ring_walk_next(const ch_table *t, ch__walk *w);
void ch__ring_shares(const ch_table *t, double *shares);

/* The 64-bit ring layout (ring64.c). ch__ring64_index() takes ownership of pts
 * (total + CH__RING64_PAD entries, the first total filled in generation order), sorts them stably by position, keeps
 * the LAST generated point of each position (a later insert replaces the owner, as a map from
 * position to node does), and builds the bucket index; on failure it frees pts and returns
 * CH_ENOMEM. Lookups find the first point with pos >= h at full 64-bit width, wrapping. */
#define CH__RING64_PAD 4
int ch__ring64_index(ch_table *t, ch__point64 *pts, size_t total);
/* A 64-bit ring of named points: node i gets count(t, i) points (t->opt.vnodes when count is
 * NULL), point j of it at t->hash("<id><sep><j>"), bit-complemented when flip, then indexed by
 * ch__ring64_index. total is the sum of the counts, checked against CH_MAX_POINTS by the caller.
 * CH_OK or CH_ENOMEM. */
int ch__ring64_build_named(ch_table *t, size_t total, char sep, bool flip,
                           size_t (*count)(const ch_table *t, size_t i));
void ch__ring64_destroy(ch_table *t);
size_t ch__ring64_find(const ch_table *t, uint64_t h); /* index, wrapped; see ring64.c */
size_t ch__ring64_lookup(const ch_table *t, uint64_t h);
void ch__ring64_walk_start(const ch_table *t, uint64_t h, ch__walk *w);
size_t ch__ring64_walk_next(const ch_table *t, ch__walk *w);
void ch__ring64_shares(const ch_table *t, double *shares);
size_t ch__ring64_points(const ch_table *t);
size_t ch__ring_points(const ch_table *t);

/* CRC-32 arithmetic over GF(2) in the reflected representation (bit 31 is x^0), for
 * libraries whose retries hash a prefix and the key (clients.c): crc(P || K) =
 * crc(P) * x^(8 |K|) mod G xor crc(K). ch__crc32_mulmod(a, b) is a * b mod G (32 steps);
 * ch__crc32_shift(n) is x^(8 n) mod G (O(log n) products). */
uint32_t ch__crc32_mulmod(uint32_t a, uint32_t b);
uint32_t ch__crc32_shift(uint64_t n);

/* groupcache's ring over t's ids with t->opt.vnodes replicas (clients.c), go-redis' too. */
int ch__groupcache_build(ch_table *t);

/* The longest node id of t, for point-string buffers (clients.c). */
size_t ch__max_id_len(const ch_table *t);

/* Slot tables (maglev.c; modula shares them): u.maglev.slot[m]. */
void ch__slots_destroy(ch_table *t);
size_t ch__slots_points(const ch_table *t);
size_t ch__slots_walk_next(const ch_table *t, ch__walk *w);

/* The modulo family (modulo.c): node h % N, walk forward from there. */
size_t ch__modulo_lookup(const ch_table *t, uint64_t h);
void ch__modulo_walk_start(const ch_table *t, uint64_t h, ch__walk *w);
size_t ch__modulo_walk_next(const ch_table *t, ch__walk *w);
void ch__modulo_shares(const ch_table *t, double *shares);

void *ch__alloc(ch_table *t, size_t size);
void ch__free(ch_table *t, void *p, size_t size);

#endif /* CHASH_INTERNAL_H */

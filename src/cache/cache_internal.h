/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache_internal.h — internals of libchash-cache shared by the files of src/cache. Not installed.
 */
#ifndef CHASH_CACHE_INTERNAL_H
#define CHASH_CACHE_INTERNAL_H

#include "chash_cache.h"

#include "hot/near.h"
#include "hot/topk.h"

#include <hiredis/hiredis.h>
#include <signal.h>

/* Counters kept per node and in total; see ch_cache_node_metrics for their meaning. */
typedef struct ch__counters {
    uint64_t attempts, hits, misses, failovers, errors, reply_errors, ejections, probes,
        readmissions, repairs, replica_skips, rejoin_deleted, rejoin_walks;
} ch__counters;

/* The keys a node missed (journal.c): writes and deletes of its keys that did not reach it
 * (skipped while it was ejected, or failed on it), to delete from it before it is readmitted.
 * Exact up to CH__JOURNAL_KEYS distinct keys, then a dirty bitmap over CH__DIRTY_BUCKETS buckets
 * of the key's XXH3 (8 KiB), which cannot overflow: the clean-up then walks the node (SCAN) and
 * deletes the keys of dirty buckets. */
#define CH__JOURNAL_KEYS 4096u
#define CH__DIRTY_BITS 16u
#define CH__DIRTY_BUCKETS (1u << CH__DIRTY_BITS)
typedef struct ch__journal_key {
    char *p; /* owned */
    size_t len;
} ch__journal_key;
typedef struct ch__journal {
    ch__journal_key *keys; /* n of CH__JOURNAL_KEYS, while exact */
    uint32_t *slots;       /* the exact set: index + 1 into keys, 0 free; 2 x CH__JOURNAL_KEYS */
    size_t n;
    uint64_t *dirty;       /* CH__DIRTY_BUCKETS bits once spilled, else NULL */
    bool spilled;          /* keys went to dirty (keys holds none) */
    bool all;              /* spilled without memory for dirty: every key of the node must go */
} ch__journal;

typedef struct ch__node {
    const char *id;      /* points into the membership */
    const char *addr;    /* points into the membership */
    char *host;          /* owned: the host (IPv6 without brackets), or the unix socket path */
    int port;            /* 1..65535, or 0 for a unix socket */
    redisContext *conn;  /* NULL until first use, and after any failure (dropped) */
    ch__journal journal; /* the writes of its keys it missed since it last served them: it may
                            hold older values of those keys, deleted before a probe readmits it */
    ch__counters count;
} ch__node;

/* Hot keys (hot.c): the detector's summaries and the near cache. */
typedef struct ch__hot {
    ch__topk *window, *last, *minute, *total; /* this second, the last, decayed, since open */
    ch__topk *report;        /* scratch of ch_cache_hotkeys: the minute and this second */
    uint64_t window_start;   /* ns (ch__now_ns) */
    uint64_t last_ns;        /* the last window's length */
    ch__near *near;          /* NULL: the near cache is off */
    uint64_t threshold;      /* reads per second before a key's value is kept */
    uint64_t hits;           /* gets served from near */
    redisReader *reader;     /* frames a near hit's value as a reply object */
} ch__hot;

struct ch_cache {
    ch_membership *m;        /* owned */
    const ch_table *table;   /* ch_membership_table(m) */
    ch_health *health;       /* owned; node indexes as in m */
    ch_health_options hopt;  /* the policy health was built with */
    ch__node *nodes;         /* owned, one per member */
    size_t n;
    size_t depth;            /* failover depth, 1..n */
    size_t depth_wanted;     /* as asked for (depth is it clamped to n); kept across reloads */
    size_t replicas;         /* copies of a key, 1..min(CH_CACHE_MAX_REPLICAS, n) */
    size_t replicas_wanted;  /* as asked for; kept across reloads */
    size_t rdepth;           /* candidates of a get: max(depth, replicas), so every owner that is
                                up is among them */
    int timeout_ms;
    char *password;          /* owned, or NULL */
    int db;
    uint64_t rng;            /* splitmix64 state */
    size_t *cand;            /* rdepth entries: the candidates of a single-key request */
    ch__counters total;
    uint64_t requests, failed, reloads, replica_reads;
    ch__hot hot;             /* kept across reloads */

    /* ch_cache_open_config(): the loaded file, kept for the membership documents of a fleet
     * (docs/FLEET.md), which replace only a pool's membership; NULL for ch_cache_open().
     * The pool's membership fields are scratch: each document (applied or prepared) replaces
     * all of them, so only the pool's other settings are ever read from it. */
    ch_config *conf;          /* owned */
    size_t conf_pool;         /* the pool's index in conf */
    /* What the instance record says (ch_cache_fleet_record()); all 0 / "" until a document. */
    int64_t epoch;            /* served; 0: the file's servers */
    int64_t since_unix_ms;    /* when epoch began to be served */
    int64_t swapped_unix_us;  /* when a document's membership was last swapped in */
    int64_t seen_epoch;       /* the newest epoch given, applied or not */
    char refused[200];        /* why the newest document was not applied ("" when it was) */
    int64_t prepared, prepare_failed;
    char prepare_error[200];
    uint64_t current_until_ms; /* ch_cache_fence_until(): CLOCK_MONOTONIC; UINT64_MAX: never */
};

/* Whether c must refuse requests now (ch_cache_fence_until), and r filled as one refused. */
bool ch__fenced_now(const ch_cache *c);
void ch__fenced(ch_cache *c, ch_cache_result *r);

/* What went wrong with one attempt (an attempt that failed, or got an error reply). */
typedef struct ch__attempt {
    ch_cache_fail fail;
    char message[sizeof(((ch_cache_result *)0)->message)];
} ch__attempt;

/* How a reply answers a command. */
typedef enum ch__outcome {
    CH__HIT,
    CH__MISS,        /* a get found nothing: a cache miss */
    CH__OK,
    CH__ABSENT,      /* a del found nothing: status MISS, but not a cache miss */
    CH__REPLY_ERROR, /* the server's error reply */
    CH__BAD_REPLY    /* a reply this command cannot get: a protocol failure of the node */
} ch__outcome;

typedef ch__outcome (*ch__classify_fn)(const redisReply *reply);

/* The wall clock in microseconds since the epoch (cache.c). */
int64_t ch__unix_us(void);

/* ---- time, randomness, SIGPIPE (cache.c) ---------------------------------------------------- */

uint64_t ch__now_ms(void);
uint64_t ch__rand(ch_cache *c);

/* Blocks SIGPIPE in this thread; ch__sigpipe_restore() discards a SIGPIPE raised meanwhile
 * (unless one was already pending before) and restores the thread's mask. */
typedef struct ch__sigpipe {
    sigset_t old;
    bool was_pending;
} ch__sigpipe;
void ch__sigpipe_block(ch__sigpipe *g);
void ch__sigpipe_restore(const ch__sigpipe *g);

/* ---- hot keys (hot.c) ------------------------------------------------------------------------ */

uint64_t ch__now_ns(void);               /* CLOCK_MONOTONIC */
uint64_t ch__hot_hash(const void *key, size_t len); /* the detector's hash of a key: XXH3 */
int ch__hot_init(ch__hot *h, const ch_cache_options *o); /* CH_OK or CH_ENOMEM (h cleared) */
void ch__hot_free(ch__hot *h);
/* Counts a request for key (hash hh) at now (ns). */
void ch__hot_count(ch__hot *h, const void *key, size_t len, uint64_t hh, uint64_t now);
/* A get served from the near cache at now: r filled as a hit from owner (true), or false. */
bool ch__hot_get(ch_cache *c, const void *key, size_t len, uint64_t hh, size_t owner,
                 uint64_t now, ch_cache_result *r);
/* A get sent at `sent` got r: its value is kept when the key is hot and the cache on. */
void ch__hot_put(ch_cache *c, const void *key, size_t len, uint64_t hh, uint64_t sent,
                 const ch_cache_result *r);
/* A set or del of the key is about to be sent: its entry goes. */
void ch__hot_write(ch_cache *c, const void *key, size_t len, uint64_t hh);
void ch__hot_metrics(const ch_cache *c, ch_cache_metrics *x);

/* ---- the keys a node missed (journal.c) ------------------------------------------------------ */

bool ch__journal_empty(const ch__journal *j);
/* Records key (copied) as missed; never fails (past its bound or out of memory it spills).
 * Cost: O(1) expected. */
void ch__journal_add(ch__journal *j, const void *key, size_t len);
void ch__journal_free(ch__journal *j);
/* Deletes node i's missed keys from it (exact: UNLINK in pipelines of 256; spilled: a SCAN of
 * the node, deleting the keys of dirty buckets), then empties the journal. Returns false, the
 * journal kept, when the node failed (counted); *deleted: keys the node deleted. Cost: the
 * exact keys' round trips / 256, or one pass over the node's keys (a SCAN step per 1,000). */
bool ch__journal_clean(ch_cache *c, size_t i, uint64_t *deleted);

/* ---- nodes and connections (node.c) --------------------------------------------------------- */

/* Splits addr into *host (allocated) and *port (0 for a unix socket path). Returns CH_OK,
 * CH_EINVAL (not "host:port", "[v6]:port" or "/path", or a port outside 1..65535), CH_ENOMEM. */
int ch__parse_addr(const char *addr, char **host, int *port);

/* Closes node i's connection, if any. */
void ch__node_drop(ch__node *node);

/* Sends one command to node i (connecting first when needed) and reads its reply. A connection
 * kept from earlier requests that turns out broken (closed or reset: the server went away
 * since) is replaced once, so a restarted server does not cost a failure. Returns the reply
 * (the caller frees it), or NULL with *a filled, the connection dropped. */
redisReply *ch__node_command(ch_cache *c, size_t i, int argc, const char *const *argv,
                             const size_t *lens, ch__attempt *a);

/* Pipelining: ch__node_connect(), then ch__node_append() per command, then ch__node_read() per
 * reply. Each returns false / NULL with *a filled and the connection dropped on failure. */
bool ch__node_connect(ch_cache *c, size_t i, ch__attempt *a);
bool ch__node_append(ch_cache *c, size_t i, int argc, const char *const *argv,
                     const size_t *lens, ch__attempt *a);
redisReply *ch__node_read(ch_cache *c, size_t i, ch__attempt *a);

/* Whether a failure (*a) of a connection that was kept from earlier requests (kept) means it
 * went stale while idle, so one retry on a fresh connection is due. Timeouts never are. */
bool ch__node_stale(bool kept, const ch__attempt *a);

/* Fills *a for a reply the command cannot get, and drops the connection (the stream can no
 * longer be trusted). */
void ch__node_bad_reply(ch_cache *c, size_t i, const redisReply *reply, ch__attempt *a);

/* ---- requests (request.c) ------------------------------------------------------------------- */

/* Accounting shared by get/set/del and mget. */
void ch__result_clear(ch_cache_result *r);
/* Node i failed an attempt: counts it, reports it to the health tracker (which may eject the
 * node) and records the reason in r (when r is not NULL). */
void ch__node_failed(ch_cache *c, size_t i, const ch__attempt *a, ch_cache_result *r);
/* Node i answered a request for a key owned by `owner` with `reply`, classified as `outcome`
 * (not CH__BAD_REPLY): fills r (taking the reply) and counts it. */
void ch__served(ch_cache *c, size_t i, size_t owner, ch__outcome outcome, redisReply *reply,
                ch_cache_result *r);
/* The request could not be served: r becomes CH_CACHE_ERROR (NO_NODE when no attempt failed). */
void ch__unserved(ch_cache *c, ch_cache_result *r);

ch__outcome ch__classify_get(const redisReply *reply);

/* Replicas (c->replicas > 1): r is a MISS served by node r->node; when that node is one of the
 * key's owners, the later candidates cand[0..count-1] that are owners are read in order (GET and
 * PTTL, one pipeline each); the first hit replaces r (a failover read) and is copied to the node
 * that missed by ch__repair(). owner is the key's owner in the table, kh its ch_key_hash(). */
void ch__replica_fill(ch_cache *c, const void *key, size_t len, uint64_t kh, const size_t *cand,
                      size_t count, size_t owner, ch_cache_result *r);

/* Copies a value to node i without overwriting: SET key value NX, with PX pttl_ms when
 * pttl_ms > 0 (0: no expiry). Returns 1 when it stored, 0 when the key was there (the node's
 * value stays), -1 when the node failed (counted). */
int ch__repair(ch_cache *c, size_t i, const void *key, size_t len, const void *value,
               size_t vlen, uint64_t pttl_ms);

/* Probes every ejected node whose probe is due; returns how many were readmitted. O(nodes) plus
 * the probes. The caller holds the SIGPIPE guard. */
size_t ch__run_probes(ch_cache *c);

/* ---- membership (cache.c) ------------------------------------------------------------------- */

/* Options as given (opt may be NULL or an older, smaller struct) merged over the defaults. */
int ch__cache_options_resolve(const ch_cache_options *opt, ch_cache_options *out);
int ch__health_options_resolve(const ch_health_options *opt, ch_health_options *out);

/* A client over m (taken on success; on failure the caller still owns m). */
int ch__cache_new(ch_membership *m, const ch_health_options *hopt, const ch_cache_options *opt,
                  ch_cache **out);

/* Swaps in m (taken on success) with the policy and options given, carrying health, counters
 * and connections over by member id. On failure nothing changes. */
int ch__cache_swap(ch_cache *c, ch_membership *m, const ch_health_options *hopt,
                   const ch_cache_options *opt);

#endif /* CHASH_CACHE_INTERNAL_H */

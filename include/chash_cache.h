/* SPDX-License-Identifier: Apache-2.0 */
/*
 * chash_cache.h — libchash-cache: a sharded Redis client over hiredis.
 *
 * A ch_cache routes every key through a versioned membership (chash_route.h) to one Redis node,
 * and keeps each node's health: a node that times out or refuses connections K times in a row
 * within a window is ejected, its keys go to the next up node of their walk (the other keys do
 * not move), and it is readmitted only after a PING probe succeeds, at most once per backoff
 * delay (doubling, jittered). A request that fails on one node is retried on the next candidate,
 * up to the failover depth; a request that fails everywhere returns CH_CACHE_ERROR, it never
 * crashes and never blocks longer than its timeouts allow.
 *
 * Time and randomness: the client reads CLOCK_MONOTONIC and a PRNG seeded per handle, and hands
 * both to the pure routing layer.
 *
 * Thread-safety: a ch_cache is single-threaded: one thread at a time may call functions on one
 * handle (there is no lock). Use one handle per thread; handles share nothing.
 *
 * Signals: the client blocks SIGPIPE in the calling thread around its socket I/O and discards a
 * SIGPIPE it raised, so a node that dies mid-write cannot kill the process. It installs no signal
 * handler and changes no process-wide state.
 *
 * Errors: functions return an int status (chash.h): CH_OK, or CH_EINVAL for bad arguments,
 * CH_ENOMEM, and the other codes listed per function. An unreachable node is not a status: it is
 * the request's result (ch_cache_result), which always says what happened.
 *
 * Memory: hiredis allocates with malloc; the client does too (no custom allocator).
 */
#ifndef CHASH_CACHE_H
#define CHASH_CACHE_H

#include "chash_config.h"
#include "chash_route.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Used when neither the options nor the pool give a timeout (the pool's `timeout: -1`, or no
 * `timeout`, means this, never "wait forever"). Milliseconds, for connect and for each read or
 * write of a request. */
#define CH_CACHE_DEFAULT_TIMEOUT_MS 1000
#define CH_CACHE_DEFAULT_FAILOVER_DEPTH 2
#define CH_CACHE_MAX_TIMEOUT_MS 3600000 /* one hour: larger timeouts are rejected */
#define CH_CACHE_MAX_REPLICAS 8           /* copies of a key at most (chash_config.h's too) */

typedef struct ch_cache ch_cache;

/* Client options. The first field is the struct's own size: start from ch_cache_options_init().
 * Fields an older, smaller struct does not reach take their defaults. */
typedef struct ch_cache_options {
    size_t size;             /* sizeof(ch_cache_options), set by ch_cache_options_init() */
    int timeout_ms;          /* connect timeout, and the timeout of each socket read or write,
                                1..CH_CACHE_MAX_TIMEOUT_MS; default CH_CACHE_DEFAULT_TIMEOUT_MS */
    size_t failover_depth;   /* nodes tried per request (the owner, then successors), >= 1;
                                values above the node count are clamped; default 2 */
    uint64_t seed;           /* PRNG seed for the backoff jitter; 0 (default): from the clock,
                                the pid and the handle's address */
    const char *version;     /* the membership version for ch_cache_open(); NULL (default): a
                                content hash (ch_membership_build()). Copied. */
    const char *password;    /* sent with AUTH on each new connection; NULL (default): none.
                                Copied. */
    int db;                  /* SELECTed on each new connection when > 0; default 0 */
    size_t replicas;         /* copies of each key, 1..CH_CACHE_MAX_REPLICAS, clamped to the
                                node count; default (and 0) 1. With N > 1 (docs/OPERATIONS.md,
                                "Replicas"): writes and deletes go to the key's N owners, the
                                first N distinct nodes of its walk (ch_replicas()), skipping
                                ejected ones; a get reads the first up owner, and on a miss there
                                the next up owners, copying a hit back (SET NX: never over a
                                value) with its remaining TTL. Not with jump (no walk). */
    /* The near cache of hot keys (docs/OPERATIONS.md, "Hot keys"), off by default: with
     * hot_cache_ms > 0, a get of a key read at least hot_threshold times a second (the
     * detector's lower bound, this second or the last) keeps the value it got for
     * hot_cache_ms from the read's send, and serves it again without a request; a set or del
     * of the key through this client drops it at once. Writes by other clients are not seen:
     * the TTL bounds their staleness. At most hot_cache_max_bytes (default 64 MiB) of keys,
     * values and 56 bytes each; the least recently used go first. */
    uint32_t hot_cache_ms;        /* 1..CH_CACHE_MAX_HOT_CACHE_MS; 0 (default): off */
    size_t hot_cache_max_bytes;   /* 0: the default */
    uint32_t hot_threshold;       /* reads per second; 0: the default, 200 */
} ch_cache_options;

#define CH_CACHE_MAX_HOT_CACHE_MS 3600000u
#define CH_CACHE_DEFAULT_HOT_CACHE_BYTES ((size_t)64 << 20)
#define CH_CACHE_DEFAULT_HOT_THRESHOLD 200u

/* Fills *opt with the defaults above. opt must not be NULL. O(1). */
void ch_cache_options_init(ch_cache_options *opt);

/* Opens a client over members[0..n-1] ("host:port", "[v6addr]:port" or a unix socket path as
 * addr), placed with table_opt (NULL: chash's defaults) and watched with health_opt (NULL:
 * ch_health_options_init()'s defaults), with opt (NULL: defaults). No connection is made here:
 * each node connects on first use.
 * Returns CH_OK and *out, or CH_EINVAL (NULL out or members, an addr that is not one of the
 * forms above, bad options), CH_EUNSUPPORTED (a failover depth > 1 with jump, which has no
 * failover order), CH_ENOMEM, or what ch_membership_build() / ch_health_new() return.
 * Cost: the placement table's build (chash.h), O(n) memory besides. */
int ch_cache_open(const ch_member *members, size_t n, const ch_options *table_opt,
                  const ch_health_options *health_opt, const ch_cache_options *opt,
                  ch_cache **out);

/* Opens a client from a twemproxy-style config file (chash_config.h): the pool named `pool`
 * (NULL: the file's only pool), which must be a redis pool (`redis: true`). The pool gives the
 * membership (ch_config_membership(): servers, distribution, hash, hash_tag, version), the
 * health policy (ch_config_health()), the timeout (`timeout`; -1 or absent:
 * CH_CACHE_DEFAULT_TIMEOUT_MS), `failover_depth`, `replicas`, `redis_auth` and `redis_db`; opt (NULL:
 * defaults) gives only the seed.
 * Returns CH_OK and *out, or CH_EINVAL / CH_ETOOBIG / CH_ENOMEM / CH_EUNSUPPORTED with *err
 * (may be NULL) saying why as "file:line:column: message" (ch_config_error_str()).
 * Cost: loading the file, then as ch_cache_open(). */
int ch_cache_open_config(const char *path, const char *pool, const ch_cache_options *opt,
                         ch_cache **out, ch_config_error *err);

/* Closes every connection and frees the client. NULL is a no-op. Results already returned stay
 * valid except their node_id and node_addr (see ch_cache_result). */
void ch_cache_close(ch_cache *c);

/* ---- requests -------------------------------------------------------------------------------- */

typedef enum ch_cache_status {
    CH_CACHE_HIT,   /* get: the key's value is in value/len */
    CH_CACHE_MISS,  /* get: no such key; del: there was nothing to delete */
    CH_CACHE_OK,    /* set: stored; del: deleted */
    CH_CACHE_ERROR  /* the request was not served: see fail and message */
} ch_cache_status;

/* Why an attempt failed. Only CH_CACHE_FAIL_REPLY is the server's answer; the others are node
 * failures: they count toward the node's ejection and move the request to the next candidate. */
typedef enum ch_cache_fail {
    CH_CACHE_FAIL_NONE,     /* no attempt failed */
    CH_CACHE_FAIL_REPLY,    /* the server answered with an error (e.g. WRONGTYPE): the node is
                               healthy, the request is not retried elsewhere */
    CH_CACHE_FAIL_CONNECT,  /* the connection could not be made (refused, unreachable, AUTH or
                               SELECT refused) */
    CH_CACHE_FAIL_TIMEOUT,  /* connect, read or write took longer than the timeout */
    CH_CACHE_FAIL_IO,       /* the connection broke (closed, reset) */
    CH_CACHE_FAIL_PROTOCOL, /* a reply that is not RESP, or not a reply this command can get */
    CH_CACHE_FAIL_NO_NODE,  /* no candidate left: every node of the key's walk is ejected or
                               failed in this request */
    CH_CACHE_FAIL_FENCED    /* not sent: the membership is not proven current (a fleet's lease
                               lapsed: ch_cache_fence_until()) */
} ch_cache_fail;

/* The outcome of one key's request. Written in full by every request function (the previous
 * contents are not freed: call ch_cache_result_free() first when reusing one). */
typedef struct ch_cache_result {
    ch_cache_status status;
    ch_cache_fail fail;     /* for CH_CACHE_ERROR, why; otherwise the last failed attempt's
                               reason when the request was served after a failover, else NONE */
    size_t node;            /* index (in the membership) of the node that served it, or the node
                               that answered a REPLY error; SIZE_MAX when none did */
    const char *node_id;    /* that node's id and address, NULL when none; they point into the
                               client and are valid until the next ch_cache_reload*() or
                               ch_cache_close() */
    const char *node_addr;
    unsigned attempts;      /* nodes the request was sent to (0 when none was up) */
    bool failover;          /* served by a node other than the key's owner in the table (the
                               owner was ejected, or failed during this request) */
    const char *value;      /* CH_CACHE_HIT: the value, NUL-terminated (len excludes the NUL);
                               NULL otherwise. Owned by the result. */
    size_t len;
    char message[160];      /* a readable reason when fail != NONE (e.g. "cache-02
                               127.0.0.1:7001: Connection refused"), else "" */
    void *reply_;           /* private: the hiredis reply that owns value */
} ch_cache_result;

/* Frees what a result owns (its value) and clears it. NULL and a cleared result are no-ops.
 * O(1). */
void ch_cache_result_free(ch_cache_result *r);

/* The names of the enums above ("hit", "timeout", ...); "?" for other values. */
const char *ch_cache_status_name(ch_cache_status s);
const char *ch_cache_fail_name(ch_cache_fail f);

/* Gets a key (len bytes at key; key may be NULL when len is 0).
 * First runs the due probes (ch_cache_probe()). Then tries the key's candidates in order
 * (ch_route(): the owner, then the next up nodes of its walk, at most failover_depth), each
 * with one connect (when not connected) and one GET; a connection kept from earlier requests
 * that turns out closed or reset (the server went away meanwhile) is replaced once before that
 * counts as a failure. A node failure is reported to the health tracker and the next candidate
 * is tried. A miss or an error reply ends the request.
 * Returns CH_OK with *r filled (HIT, MISS or ERROR), or CH_EINVAL (NULL c or r, NULL key with
 * len > 0) with *r untouched.
 * Cost: one round trip when the owner answers, and two key hashes (route and owner). Worst case
 * (no node answers): for each due probe and each of the failover_depth candidates, a connect
 * timeout and a socket read or write timeout, i.e. about (due probes + failover_depth) x 2 x
 * timeout_ms. */
int ch_cache_get(ch_cache *c, const void *key, size_t len, ch_cache_result *r);

/* Sets key to value (vlen bytes; value may be NULL when vlen is 0), expiring after ttl_ms
 * milliseconds (0: never; SET ... PX). Routed and retried as ch_cache_get(); the result is OK
 * or ERROR. Note: a set that fails over stores the value on the successor, where the key lives
 * while its owner is ejected. Returns as ch_cache_get(); CH_EINVAL also for a NULL value with
 * vlen > 0. Cost: as ch_cache_get().
 * With replicas N > 1: sent to each of the key's N owners that is up (one round trip each);
 * OK when every owner that is up took it (ejected owners are skipped and counted in
 * replica_skips); ERROR when one that is up failed or answered an error (fail and message say
 * which, and how many took it: the copies may differ, so retry or delete); when no owner is up,
 * routed as with N = 1 (the walk's next up node). */
int ch_cache_set(ch_cache *c, const void *key, size_t len, const void *value, size_t vlen,
                 uint64_t ttl_ms, ch_cache_result *r);

/* Deletes a key (DEL) on the node it routes to: OK when it was deleted, MISS when it did not
 * exist there, or ERROR. Routed and retried as ch_cache_get(). With replicas N > 1: sent to
 * the key's owners as ch_cache_set() (OK when any owner deleted it, MISS when none had it). */
int ch_cache_del(ch_cache *c, const void *key, size_t len, ch_cache_result *r);

/* Gets n keys: keys[i] with lens[i] bytes (lens NULL: each key is a NUL-terminated string).
 * results[i] (n entries, caller-allocated) receives key i's outcome, as ch_cache_get() would
 * give it, in the caller's order; duplicates are allowed. The keys are split per node and sent
 * to each node as one pipeline of GETs; keys a failed node did not answer go to their next
 * candidate in a further round, up to failover_depth rounds. A node that fails is not used
 * again during this call.
 * Returns CH_OK with every result filled, CH_EINVAL (NULL c, keys or results with n > 0, a NULL
 * key with a non-zero length) or CH_ENOMEM, with the results untouched.
 * Cost: one pipelined round trip per node involved; O(n x failover_depth + nodes) memory for
 * the call. Worst case as ch_cache_get() per node, not per key. */
int ch_cache_mget(ch_cache *c, size_t n, const char *const *keys, const size_t *lens,
                  ch_cache_result *results);

/* Probes every ejected node whose probe is due (ch_health_probe_due()) with a PING under the
 * timeout, and reports each outcome to the health tracker: a PONG readmits the node, anything
 * else schedules the next probe after a doubled, jittered delay. Requests call this themselves;
 * call it to readmit nodes while no requests flow. *readmitted (may be NULL) receives the number
 * of nodes readmitted. Returns CH_OK or CH_EINVAL (NULL c).
 * Cost: O(nodes) to check, plus up to 2 x timeout_ms per due probe that gets no answer. */
int ch_cache_probe(ch_cache *c, size_t *readmitted);

/* ---- membership ------------------------------------------------------------------------------ */

/* The membership the client routes with: its version, members and placement table (e.g. to
 * compute a key's owner with ch_lookup()). Valid until the next ch_cache_reload*() or
 * ch_cache_close(). O(1). */
const ch_membership *ch_cache_membership(const ch_cache *c);

/* Replaces the membership at run time: members, table_opt (NULL: chash's defaults) and version
 * (NULL: a content hash) as for ch_cache_open(); the timeout, failover depth and health policy
 * stay. A node whose id was already a member keeps its health (ejected, failure streak), its
 * counters and, when its addr is unchanged, its connection; a new node starts up; a removed
 * node's connection is closed. Every result's node_id/node_addr from before becomes invalid.
 * On failure nothing changes. Returns as ch_cache_open(). Cost: as ch_cache_open(), plus
 * O(n x old nodes) id matching. */
int ch_cache_reload(ch_cache *c, const ch_member *members, size_t n, const ch_options *table_opt,
                    const char *version);

/* Reloads from a config file, as ch_cache_open_config() reads it: membership, health policy,
 * timeout, failover depth, auth and db all come from the pool; health state carries over by id
 * as in ch_cache_reload(). On failure nothing changes and *err says why. */
int ch_cache_reload_config(ch_cache *c, const char *path, const char *pool,
                           ch_config_error *err);

/* ---- a fleet's membership in etcd (docs/FLEET.md) ------------------------------------------- *
 * libchash-cache has no thread and no etcd client of its own: the application, which already
 * has both, watches the pool key K and feeds what it reads to these functions, and puts the
 * record ch_cache_fleet_record() gives under K/instances/<id> with its own lease. They need a
 * client opened with ch_cache_open_config(): a document replaces only the membership (servers,
 * hash, distribution, hash_tag, version); the timeout, failover depth, health policy, auth and
 * db stay the file's (ch_cache_reload_config() replaces the file kept). The file must list
 * servers, which serve until the first document is applied. Not thread-safe, as every call on
 * one client. */

/* Applies a membership document read from K: text[0, len), YAML or JSON (docs/FLEET.md), and
 * mod_rev, K's mod_revision. Its epoch is its "epoch", else mod_rev; it must be greater than
 * the epoch served (ch_cache_epoch()), so a replayed or stale document cannot move the client
 * backwards. The membership is then replaced as ch_cache_reload() replaces it: health,
 * counters and connections carry over by node id.
 * Returns CH_OK; or, with nothing changed and *err (may be NULL) saying why: CH_EINVAL (no
 * config file kept: a client from ch_cache_open(); a document that does not parse, with its
 * line and column, named by the pool's membership URL; an epoch not newer than the one served:
 * the message says "not newer"), CH_ETOOBIG, CH_ENOMEM, or what the build returns. A refusal is
 * also kept for the instance record ("refused"). Cost: O(len), the placement table's build,
 * and O(n x old nodes) id matching. */
int ch_cache_apply_membership_doc(ch_cache *c, const void *text, size_t len, int64_t mod_rev,
                                  ch_config_error *err);

/* Phase 2 of `chash fleet apply` for this client: checks that the document of K/pending parses
 * and builds, without applying it, and records the outcome for the instance record: prepared =
 * its epoch, or prepare_failed = its epoch with the reason. Its epoch is its "epoch" (`chash
 * fleet apply` always writes one), else pending_rev, K/pending's mod_revision
 * (ch_cache_prepared_epoch() tells which it was). Put the record afterwards; apply the commit (the document at K, with that
 * epoch) with ch_cache_apply_membership_doc(), which builds it again (a prepared build is not
 * held: it costs one build twice, and the commit fails only for memory). Returns CH_OK, or as
 * ch_cache_apply_membership_doc() (CH_EINVAL also for pending_rev <= 0 or an epoch not newer
 * than the one served). Cost: O(len) and one table build. */
int ch_cache_prepare_membership_doc(ch_cache *c, const void *text, size_t len,
                                    int64_t pending_rev, ch_config_error *err);

/* The pending epoch held prepared (0: none), as the instance record's "prepared". 0 for NULL.
 * O(1). */
int64_t ch_cache_prepared_epoch(const ch_cache *c);

/* Fencing (docs/FLEET.md, "Fencing"): the application proves the client's membership current
 * until mono_ms, a CLOCK_MONOTONIC time in milliseconds: the send time of the last answered
 * keepalive of the lease its record lives under, plus the TTL etcd returned, less a margin (a
 * fifth of the TTL, as chash-proxy), and only once it has read K after putting the record
 * under that lease. From then on every request is refused (CH_CACHE_ERROR,
 * CH_CACHE_FAIL_FENCED), sent nowhere, until a later call moves the time again; the record
 * says "fenced". UINT64_MAX (the default of a new client): never fenced; 0: fenced now. O(1). */
void ch_cache_fence_until(ch_cache *c, uint64_t mono_ms);

/* Drops the prepared (or failed) pending epoch: K/pending went away without a commit (an
 * abort). NULL is a no-op. O(1). */
void ch_cache_prepare_clear(ch_cache *c);

/* The epoch served: that of the last document applied, 0 when none was (the file's servers).
 * ch_cache_reload_config() and ch_cache_reload() leave it as it is. 0 for NULL. O(1). */
int64_t ch_cache_epoch(const ch_cache *c);

/* The client's instance record (docs/FLEET.md), JSON: id (NULL: "<host>:<pid>"), kind
 * "libchash-cache", pool, host, pid, epoch, since_unix_ms, membership (the version served),
 * servers, seen_epoch, refused, prepared, prepare_failed, prepare_error, warm_up ("off"),
 * warm_up_until_unix_ms, swapped_unix_us. Rewrite it whenever one of the calls above returned
 * (the record changes with each). Returns a malloc'd string (free() it), or NULL (NULL c, out
 * of memory). Cost: O(1) besides gethostname(). */
char *ch_cache_fleet_record(const ch_cache *c, const char *id);

/* ---- metrics --------------------------------------------------------------------------------- */

/* One node's counters. They follow the node's id across reloads. */
typedef struct ch_cache_node_metrics {
    size_t size;            /* sizeof(ch_cache_node_metrics); set by the caller */
    const char *id;         /* valid until the next reload or close */
    const char *addr;
    bool up;                /* false while ejected */
    uint64_t attempts;      /* requests sent to the node (a pipeline counts each key) */
    uint64_t hits;          /* gets served: found */
    uint64_t misses;        /* gets served: not found */
    uint64_t failovers;     /* requests it served for keys it does not own */
    uint64_t errors;        /* failed attempts: timeouts, connection and protocol errors */
    uint64_t reply_errors;  /* error replies (WRONGTYPE, ...): not failures */
    uint64_t ejections;
    uint64_t probes;        /* probes sent while it was ejected */
    uint64_t readmissions;
    uint64_t repairs;       /* replicas: keys copied to it after a miss (SET NX that stored) */
    uint64_t replica_skips; /* replicas: writes and deletes not sent to it while ejected */
    uint64_t rejoin_deleted; /* keys deleted from it before readmissions: those written or
                                deleted elsewhere while it was out (never a flush) */
    uint64_t rejoin_walks;   /* readmissions that walked its keys (SCAN): more than 4,096 keys
                                missed, their buckets' keys deleted */
} ch_cache_node_metrics;

/* Totals since open. They are counted when they happen, so they survive reloads (the sum of
 * the current nodes' counters may be smaller after a node left). */
typedef struct ch_cache_metrics {
    size_t size;                   /* sizeof(ch_cache_metrics); set by the caller */
    char version[CH_VERSION_MAX];  /* the membership version in use */
    size_t nodes;                  /* members */
    size_t nodes_up;               /* members not ejected */
    uint64_t requests;             /* keys requested (an mget of n keys counts n) */
    uint64_t hits, misses, failovers, errors, reply_errors, ejections, probes, readmissions;
    uint64_t failed;               /* hard failures: requests that returned CH_CACHE_ERROR for
                                      want of a node (fail other than CH_CACHE_FAIL_REPLY) */
    uint64_t reloads;              /* successful reloads */
    uint64_t repairs, replica_skips; /* replicas: as the nodes' counters */
    uint64_t replica_reads;        /* replicas: reads of a next owner after a miss at one (that
                                      miss is in misses, even when the next owner hit) */
    uint64_t rejoin_deleted, rejoin_walks; /* as the nodes' counters */
    /* The near cache of hot keys (off: all 0): gets served from it (in hits too, not in any
     * node's), values stored, entries dropped for room, and what it holds now. */
    uint64_t hot_cache_hits, hot_cache_stores, hot_cache_evictions;
    uint64_t hot_cache_entries, hot_cache_bytes;
} ch_cache_metrics;

/* Fills *out; out->size must be set (fields beyond it are not written). Returns CH_OK or
 * CH_EINVAL (NULL, or a size smaller than the first field). O(nodes). */
int ch_cache_metrics_get(const ch_cache *c, ch_cache_metrics *out);

/* Fills *out for node i (membership index); out->size must be set. Returns CH_OK or CH_EINVAL
 * (NULL, i out of range, bad size). O(1). */
int ch_cache_node_metrics_get(const ch_cache *c, size_t i, ch_cache_node_metrics *out);

/* ---- hot keys ------------------------------------------------------------------------------- */

/* One key of the detector (always on: every get, set and del key is counted in a Space-Saving
 * summary of 128 keys, rolled each second), with the names chash-proxy's GET /-/hotkeys uses.
 * Every count is an upper bound, and count - error a lower one. */
typedef struct ch_cache_hotkey {
    const char *key;          /* the key's first bytes (at most 250), valid until the next call
                                 on the client; not NUL-terminated */
    size_t len;
    bool truncated;           /* the key is longer than len */
    double rate, rate_error;  /* the last complete second, per second */
    double rate_60s, rate_60s_error; /* a decayed minute (each second weighs 59/60 of the
                                 next), per second */
    uint64_t count, count_error; /* since the client opened */
    size_t node;              /* its owner (membership index); SIZE_MAX when cut short */
} ch_cache_hotkey;

/* The hottest keys, by their decayed minute's count (as chash-proxy orders them), at most cap
 * of them into out, hottest first; *n how many. Returns CH_OK, or CH_EINVAL. Cost: O(128 log
 * 128). */
int ch_cache_hotkeys(ch_cache *c, ch_cache_hotkey *out, size_t cap, size_t *n);

#ifdef __cplusplus
}
#endif

#endif /* CHASH_CACHE_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * chash_route.h — routing around a placement table: versioned membership, node health
 * (ejection after consecutive failures in a window, exponential backoff with jitter, a probe
 * before readmission) and the failover order of a key.
 *
 * Pure, like libchash: no I/O, no clock, no randomness of its own, never prints or aborts. The
 * caller passes the time (milliseconds from any monotonic origin) and random values, so every
 * policy can be tested with a fake clock. Used by libchash-cache (src/cache/) and chash-proxy.
 *
 * Thread-safety: a ch_membership is immutable once built and may be shared by threads. A
 * ch_health is mutable and has no lock: one owner at a time.
 *
 * Memory: ch_membership and ch_health allocate with malloc/free (a ch_options allocator is used
 * by the membership's table only); ch_route() allocates nothing.
 */
#ifndef CHASH_ROUTE_H
#define CHASH_ROUTE_H

#include "chash.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- membership ------------------------------------------------------------------------------ */

/* A member as given to ch_membership_build(); strings are copied. */
typedef struct ch_member {
    const char *id;   /* the placement id: the node id in the table (non-empty, unique) */
    const char *addr; /* where it listens: "host:port" or "/path/to/socket" (non-empty) */
    const char *name; /* a display name, or NULL */
    double weight;    /* finite and > 0 */
} ch_member;

/* A versioned membership: the members, their placement table and a version string. */
typedef struct ch_membership ch_membership;

#define CH_VERSION_MAX 64 /* longest version string, including the terminating NUL */

/* Builds a membership: copies the members, builds the placement table from ids and weights with
 * opt (NULL: defaults), and sets the version: `version` when it is non-NULL (1 to
 * CH_VERSION_MAX - 1 printable ASCII characters, else CH_EINVAL), otherwise "m-" followed by 12
 * hex digits of a content hash over the algorithm, hash, vnodes, table size, hash tag and every
 * member's id, addr and weight in order — equal memberships get equal versions on every host.
 * Returns CH_OK and *out, or what ch_table_build() returns, or CH_EINVAL (empty addr, bad
 * version), CH_ENOMEM. Nothing is leaked on failure. Cost: the table's build. */
int ch_membership_build(const ch_member *members, size_t n, const ch_options *opt,
                        const char *version, ch_membership **out);
/* ch_membership_build() with *err (may be NULL) saying what failed: the table's reason
 * (ch_table_build_err), the member with an empty addr, the version, a scheme that cannot route. */
int ch_membership_build_err(const ch_member *members, size_t n, const ch_options *opt,
                            const char *version, ch_membership **out, ch_error *err);

/* Frees a membership. NULL is a no-op. */
void ch_membership_free(ch_membership *m);

/* Accessors; m must be a built membership, i < ch_membership_size(m). O(1). The returned
 * pointers live as long as m. */
const char *ch_membership_version(const ch_membership *m);
size_t ch_membership_size(const ch_membership *m);
const ch_member *ch_membership_member(const ch_membership *m, size_t i);
const ch_table *ch_membership_table(const ch_membership *m);
/* Index of the member with this id, or SIZE_MAX. O(log n). */
size_t ch_membership_find(const ch_membership *m, const char *id);

/* ---- health ---------------------------------------------------------------------------------- */

/* Health policy. The first field is the struct's size: start from ch_health_options_init().
 * Defaults (close to mcrouter's): 3 failures within 10 s eject a node; probes after 1 s,
 * doubling to 60 s, each delay jittered by +-50%. */
typedef struct ch_health_options {
    size_t size;                /* sizeof(ch_health_options), set by ch_health_options_init() */
    bool eject;                 /* false: never eject (twemproxy's auto_eject_hosts: false) */
    uint32_t failure_limit;     /* K >= 1: consecutive failures that eject; default 3 */
    uint64_t failure_window_ms; /* W > 0: the K failures must fall within W; default 10000 */
    uint64_t retry_min_ms;      /* first probe delay after an ejection, > 0; default 1000 */
    uint64_t retry_max_ms;      /* cap of the doubling delay, >= retry_min_ms; default 60000 */
    double jitter;              /* each delay is scaled by a factor in [1 - j, 1 + j]; 0 <= j < 1;
                                   default 0.5 */
    uint64_t stable_ms;         /* a readmitted node ejected again within stable_ms is flapping:
                                   its delay doubles (capped); one that stays up this long gets
                                   its delay reset to retry_min_ms; 0 (default): retry_max_ms */
} ch_health_options;

void ch_health_options_init(ch_health_options *opt);

typedef struct ch_health ch_health;

/* Health state of n nodes (indexes as in the membership), all up. Returns CH_OK and *out,
 * CH_EINVAL (n == 0, bad options), CH_ENOMEM. */
int ch_health_new(size_t n, const ch_health_options *opt, ch_health **out);
void ch_health_free(ch_health *h);

/* A request to node i succeeded (or got a miss: a miss is not a failure): the failure streak
 * ends. O(1). */
void ch_health_success(ch_health *h, size_t i, uint64_t now_ms);

/* A request to node i failed (timeout, connection error). Counts toward ejection: the node is
 * ejected when this is the K-th consecutive failure and the streak began no more than W ago
 * (a streak older than W restarts at this failure). rnd is a uniformly random 64-bit value, used
 * for the jitter of the first probe's delay. Returns true when this failure ejected the node.
 * Failures of an ejected node are ignored. O(1). */
bool ch_health_failure(ch_health *h, size_t i, uint64_t now_ms, uint64_t rnd);

/* Whether node i takes requests (not ejected). O(1). */
bool ch_health_is_up(const ch_health *h, size_t i);

/* Whether node i is ejected and its probe is due (now_ms >= its next probe time). O(1). */
bool ch_health_probe_due(const ch_health *h, size_t i, uint64_t now_ms);

/* The result of a probe (e.g. PING) of an ejected node. ok: the node is readmitted, and exactly
 * its own keys return to it. Not ok: the delay doubles (capped at retry_max_ms) and the next
 * probe is scheduled with jitter from rnd. Ignored for a node that is up. O(1). */
void ch_health_probe_result(ch_health *h, size_t i, bool ok, uint64_t now_ms, uint64_t rnd);

typedef struct ch_health_info {
    bool up;
    uint32_t streak;        /* consecutive failures so far */
    uint64_t delay_ms;      /* the current (unjittered) probe delay */
    uint64_t next_probe_ms; /* when ejected: the time its probe is due */
    uint64_t ejections;     /* times ejected */
    uint64_t readmissions;  /* times readmitted */
} ch_health_info;

/* Node i's state. Returns CH_OK, or CH_EINVAL (i out of range, NULL). O(1). */
int ch_health_info_get(const ch_health *h, size_t i, ch_health_info *out);

/* ---- router ---------------------------------------------------------------------------------- */

/* The key's candidates, in the order to try them: the owner, then its failover successors (the
 * table's walk, ch_replicas()), skipping ejected nodes, at most `depth` of them. While a node is
 * ejected its keys therefore go to the next up node of their walk, and no other key moves.
 * h may be NULL (every node up). Writes the candidates to out[0..depth-1] and their number to
 * *count (0 when every node of the walk is ejected). Returns CH_OK, CH_EINVAL (NULL t, out or
 * count with depth > 0, or an h for another number of nodes), CH_EUNSUPPORTED (jump, which has
 * no walk, with depth > 1).
 * Cost: ch_replicas() over the table's walk. */
int ch_route(const ch_table *t, const ch_health *h, const void *key, size_t len, size_t depth,
             size_t *out, size_t *count);

/* The same for the key whose ch_key_hash() is h, for a caller that also needs the owner
 * (ch_lookup_hash(t, h)) and should hash the key once. */
int ch_route_hash(const ch_table *t, const ch_health *h, uint64_t kh, size_t depth, size_t *out,
                  size_t *count);

/* Whether a node takes requests, for a caller that keeps node state its own way. */
typedef bool (*ch_node_up_fn)(const void *ctx, size_t node);

/* ch_route_hash() with the nodes' state given by up(ctx, node) instead of a ch_health (NULL:
 * every node up): for a caller whose health is shared by threads and published to readers
 * without a lock (chash-proxy's workers). up is called at most once per node the walk visits.
 * n_up is how many nodes are up, or more (SIZE_MAX: unknown): the walk stops once it holds that
 * many candidates, so with nodes down and depth >= the nodes up it does not run a whole turn of
 * the table (for maglev, M slots) looking for more. A node up() reports up is a candidate; an n_up
 * read apart from up() may be off by the nodes changing meanwhile (fewer candidates, or a longer
 * walk), never a wrong one. Same results and errors as ch_route_hash() with a tracker whose
 * ejected nodes are those up() reports down and n_up its number of up nodes. */
int ch_route_hash_fn(const ch_table *t, ch_node_up_fn up, const void *ctx, size_t n_up,
                     uint64_t kh, size_t depth, size_t *out, size_t *count);

#ifdef __cplusplus
}
#endif

#endif /* CHASH_ROUTE_H */

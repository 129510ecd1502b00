/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet.h — a pool's membership from etcd (docs/FLEET.md): the first read at start, the watch
 * of the pool's key, the instance record under a lease, the two-phase change (prepare on
 * "<key>/pending", swap on the commit) and flap damping. Control thread; every change goes
 * through reload.h's all-or-nothing path.
 */
#ifndef CHASH_PROXY_FLEET_H
#define CHASH_PROXY_FLEET_H

#include "ctl_state.h"

/* --fleet-id and --fleet-ttl. */
typedef struct px_fleet_options {
    const char *id; /* NULL: "<host>:<pid>" */
    int ttl_s;      /* the record's lease */
} px_fleet_options;
#define PX_FLEET_DEFAULT_TTL_S 10

/* What the first read found, per pool of the file (px_fleet_start stores it). */
typedef struct px_fleet_boot px_fleet_boot;

/* Before px_ctl_init: per pool in etcd, registers the instance (a lease, its record under it)
 * and then reads the pool's membership document and applies it to cfg's pool (blocking, at
 * most FIRST_READ_MS per request), so the pool starts current (docs/FLEET.md, "Fencing"). A
 * pool whose etcd cannot be read, or whose document is refused, starts fenced: it refuses its
 * requests until etcd answers (with "membership_fenced: serve", it serves its file servers
 * meanwhile); one without file servers fails the start. Returns 0 and *boot (NULL when no pool
 * names etcd), or -1 (logged). */
int px_fleet_bootstrap(ch_config *cfg, px_log *log, const px_fleet_options *opt,
                       px_fleet_boot **boot);

/* What -t checks of the pools in etcd: each one's document read (blocking, as the start's: at
 * most FIRST_READ_MS; nothing is written to etcd) and applied to cfg's pool, so px_ctl_check
 * then checks the servers a start would serve; a pool whose document cannot be had passes
 * when the file has servers (it would start fenced) and fails the check otherwise, by the
 * rule the start applies (one function). 0, or -1 with the reason, naming the pool, in why. */
int px_fleet_check(ch_config *cfg, char *why, size_t whylen);

/* Revokes the leases not taken over (their records go at once) and frees boot. */
void px_fleet_boot_free(px_fleet_boot *boot);

/* After px_ctl_init: hands boot's documents, leases and fences to m's pools and starts each
 * pool's watch, keepalive and record; takes boot over. 0, or -1 (logged). */
int px_fleet_start(px_ctl *m, px_fleet_boot *boot);

/* At shutdown, before the workers stop: drops a prepared change, revokes the lease (so the
 * record goes at once; bounded), stops every request and timer. */
void px_fleet_stop(px_ctl *m);

/* Pool i's fleet counters, for /metrics and INFO. false when the pool does not use etcd. */
typedef struct px_fleet_stats {
    int64_t epoch, seen_epoch, prepared;
    bool etcd_up;               /* the watch is established and the lease alive */
    bool fenced;                /* the membership cannot be proven current (docs/FLEET.md) */
    bool serve_fenced;          /* "membership_fenced: serve": it serves even so */
    uint64_t fences;            /* times it became fenced after having been current */
    bool held_down;             /* a document that removes servers waits (flap damping) */
    uint64_t applied;           /* documents applied */
    uint64_t refused_invalid;   /* refused: it does not parse or cannot be built */
    uint64_t refused_stale;     /* refused: its epoch is not newer than the one served */
    uint64_t damped;            /* removals withdrawn within the hold-down: no change made */
    uint64_t watch_restarts;    /* the watch lost and started again */
} px_fleet_stats;
bool px_fleet_stats_get(const px_ctl *m, size_t i, px_fleet_stats *out);

#endif /* CHASH_PROXY_FLEET_H */

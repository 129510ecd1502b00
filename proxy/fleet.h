/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet.h — a pool's membership from etcd (docs/FLEET.md), on the control thread, once the
 * first read at start (fleet_boot.h) is done: the watch of the pool's key (fleet_watch.h), the
 * instance's lease and record (fleet_instance.h) and member note (fleet_member.h), the changes
 * (fleet_change.h: the two-phase change, prepared on "<key>/pending" and swapped on the commit,
 * and flap damping, fleet_damp.h), each through reload.h's all-or-nothing path; and the fence
 * (fence.h) handed to the workers.
 */
#ifndef CHASH_PROXY_FLEET_H
#define CHASH_PROXY_FLEET_H

#include "ctl_state.h"
#include "fleet_boot.h"

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

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fence.h — whether a pool whose membership is in etcd may serve it (docs/FLEET.md,
 * "Fencing"), as a pure state machine. The fleet's modules feed it what they learn (a lease
 * granted or lost, the instance record written, the pool's key K read whole, a prepared change
 * held or released, a turn of the control loop) and px_fence_decide says whether the
 * membership is current and until when. Time, and the lease's deadline (which the lease
 * keeper's thread moves), are passed in: no I/O, no clock, no lock. It runs on the control
 * thread; fleet.c hands each decision to the workers (px_shared_pool.serve_until_ns,
 * fence_why), which compare it with their own clock (pool.h, px_pool_fenced).
 */
#ifndef CHASH_PROXY_FENCE_H
#define CHASH_PROXY_FENCE_H

#include <stdbool.h>
#include <stdint.h>

/* Why a pool in etcd cannot prove its membership current, for its error reply. */
typedef enum px_fence_why {
    PX_FENCE_UNREAD = 0, /* etcd has not been read since the start */
    PX_FENCE_LEASE,      /* the lease lapsed: etcd unreachable, or the process paused past it */
    PX_FENCE_RESYNC,     /* registered again: etcd is being read */
    PX_FENCE_WATCH,      /* a prepared change is pending and the watch that brings its commit
                            is down */
    PX_FENCE_HELD,       /* a prepared change is pending and the control thread, which would
                            swap in its commit, has not run for a while (fleet.c) */
} px_fence_why;

/* The error text of a fenced pool (docs/FLEET.md), without the pool's name. */
const char *px_fence_text(px_fence_why why);

/* A pool that holds a prepared change serves only until HELD_ALIVE after the control loop last
 * knew that no commit was waiting unread (px_fence.confirmed_ns): the commit may come at any
 * moment, and a worker must not answer from the old membership after it, e.g. when the process
 * was stopped (SIGSTOP, a VM pause) with its lease still valid and resumes with requests queued
 * and the commit unread in the watch's socket. The loop knows it after each turn of its I/O
 * (px_fence_beat), as long as turns follow each other within HELD_GAP (fleet.c's tick makes one
 * every HELD_TICK); after a longer gap (the process was stopped, or the loop busy) it knows it
 * again only from a read of K begun after the gap (px_fence_read_done), which swaps in a commit
 * it finds. HELD_TICK < HELD_GAP < HELD_ALIVE. */
#define PX_FENCE_HELD_ALIVE_NS (250u * 1000000u)
#define PX_FENCE_HELD_GAP_NS (150u * 1000000u)
#define PX_FENCE_HELD_TICK_MS 50u

/*
 * One pool's fence. Lease ids are etcd's (0: none); times are the control loop's monotonic
 * clock in ns (uv_hrtime), as the workers' deadlines are.
 *
 * The guarantee: px_fence_decide says current only when, at the `now` it is given,
 *   (1) the lease is alive: lease != 0 and now < lease_until_ns (the keeper's deadline, which
 *       ends before etcd can expire the lease: lease.h, px_fence_margin_ns);
 *   (2) registered == lease: the instance record is in etcd under this lease, so `chash fleet
 *       apply` waits for this instance's prepare before it commits a change;
 *   (3) synced == lease: K was read whole by a range begun after (2), so every commit since
 *       that range's revision waited for this instance, and none went unseen;
 *   (4) while a prepared change is held, the watch that brings its commit is up, and the
 *       decision's serve_until_ns is confirmed_ns + HELD_ALIVE, not for good.
 * A lapse of the lease clears synced, a lost lease clears all three ids: after either, (2) and
 * (3) are proven again under the lease in force before the pool serves. A pool that was never
 * current says UNREAD whatever the reason.
 */
typedef struct px_fence {
    int64_t lease;          /* the lease the keeper keeps alive */
    int64_t registered;     /* the lease the record was last written under */
    int64_t record_lease;   /* the lease of the record's write in flight */
    int64_t range_lease;    /* registered when the read of K in flight began */
    uint64_t range_sent_ns; /* when it began */
    int64_t synced;         /* the lease under which K was last read whole */
    bool held;              /* a prepared change waits for its commit */
    uint64_t confirmed_ns;  /* while held: when no commit was last known to wait unread */
    /* the last decision */
    bool published;          /* there was one */
    bool current;            /* its outcome */
    bool was_current;        /* current once: a fence since means the lease or a read was lost */
    uint64_t fenced_since_ns;
    uint64_t fences;         /* times it became fenced after the first decision */
} px_fence;

/* What px_fence_decide says. */
typedef struct px_fence_decision {
    bool current;
    px_fence_why why;        /* why not, once serve_until_ns (or the lease's deadline) passed */
    uint64_t serve_until_ns; /* 0: fenced now; UINT64_MAX: until a later decision; else the
                                held change's bound (4) */
    bool lease_alive;        /* (1): decide again at the lease's deadline */
    bool changed;            /* current is not the last decision's, or there was none (first) */
    bool first;
    uint64_t fenced_ns;      /* changed to current, not first: how long it was fenced */
} px_fence_decision;

/* ---- events: each changes only the fields it names ---------------------------------------- */

/* A lease was granted (or taken over from the start): lease. */
void px_fence_granted(px_fence *f, int64_t lease);
/* etcd says the lease is gone, or lost its data: lease, registered and synced cleared. */
void px_fence_lease_lost(px_fence *f);
/* The record's write under the current lease began: record_lease. */
void px_fence_record_sent(px_fence *f);
/* That write succeeded. When it made the record registered under the current lease (it was
 * not yet): true, and *read_again tells whether K must now be read whole (synced is not this
 * lease). false: nothing changed. */
bool px_fence_record_written(px_fence *f, bool *read_again);
/* A read of K whole began at now: range_lease, range_sent_ns. */
void px_fence_read_sent(px_fence *f, uint64_t now_ns);
/* That read came back (its key-values already applied: a commit it found is swapped in).
 * synced when it began under the registered lease; while held, confirmed_ns is when it began.
 * true when it began before the record was under the current lease: K must be read again. */
bool px_fence_read_done(px_fence *f);
/* The lease's deadline came (a timer at lease_until_ns): when it was not moved past now, K must
 * be read again once the lease is kept alive again (synced cleared). */
void px_fence_lapsed(px_fence *f, uint64_t now_ns, uint64_t lease_until_ns);
/* The keeper kept the lease alive. true when K must be read whole before serving (registered
 * under it, not synced: after a lapse). */
bool px_fence_kept(const px_fence *f);
/* A prepared change is held from now (confirmed_ns = now), or no longer. */
void px_fence_hold(px_fence *f, uint64_t now_ns);
void px_fence_release(px_fence *f);
/* A turn of the control loop at now, the previous one at last_ns, while a change is held:
 * within HELD_GAP, confirmed_ns = now (this turn's I/O is read: a commit would have been
 * swapped in); after a longer gap, true: K must be read whole again (until it is, confirmed_ns
 * stays, so the bound (4) runs out). false when no change is held. */
bool px_fence_beat(px_fence *f, uint64_t now_ns, uint64_t last_ns);

/* ---- the decision -------------------------------------------------------------------------- */

/* The rule above at now, given the lease's deadline and whether the watch is up; remembers its
 * outcome (published, current, was_current, fenced_since_ns, fences) and says in *d whether it
 * changed. */
void px_fence_decide(px_fence *f, uint64_t now_ns, uint64_t lease_until_ns, bool watching,
                     px_fence_decision *d);

#endif /* CHASH_PROXY_FENCE_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease.h — the lease keeper: one thread per fleet that keeps every pool's etcd leases alive
 * (its instance record's and its member note's) with blocking keepalives every ttl/3, so that
 * a control thread busy with something long (building a membership of thousands of servers, a
 * slow scrape) never lets a lease lapse (docs/FLEET.md, "Fencing"). Keeping a lease alive
 * while the control thread is busy is safe: the lease only promises that `chash fleet apply`
 * waits for this instance, and a commit needs its prepare, which a busy control thread cannot
 * give (while it holds one, fleet.c's heartbeat fences the pool instead).
 *
 * The keeper writes only each pool's lease deadline (px_shared_pool.lease_until_ns: the send
 * time of the answered keepalive plus the TTL etcd gave, less px_fence_margin_ns). What it
 * cannot keep (etcd answers that the lease expired, or does not answer) it hands to the
 * control thread as events through a uv_async; the control thread grants leases and sets the
 * ids the keeper keeps alive.
 */
#ifndef CHASH_PROXY_LEASE_H
#define CHASH_PROXY_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define PX_KEEPALIVE_ANSWER_MS 2000 /* each keepalive's whole time */

/* What a keepalive found, for the control thread (px_lease_slot.events). */
enum {
    PX_LEASE_ANSWERED = 1,       /* the record's lease was kept alive */
    PX_LEASE_UNANSWERED = 2,     /* etcd did not answer for it */
    PX_LEASE_EXPIRED = 4,        /* etcd says the record's lease is gone */
    PX_LEASE_MEMBER_EXPIRED = 8, /* and the member note's */
};

/* One pool's leases, shared by the keeper and the control thread. */
typedef struct px_lease_slot {
    char *endpoint;           /* etcd's "host:port" (the control thread's, constant) */
    int64_t lease;            /* atomic: the record's lease to keep alive (0: none) */
    int64_t member_lease;     /* atomic: the member note's (0: none) */
    uint64_t *lease_until_ns; /* atomic: the pool's px_shared_pool.lease_until_ns */
    uint32_t events;          /* atomic: PX_LEASE_* since the control thread last took them */
} px_lease_slot;

typedef struct px_lease_keeper px_lease_keeper;

/* How long before etcd may expire a lease of ttl_s seconds the instance fences: a fifth of the
 * TTL, at least 400 ms. etcd counts the TTL from when it receives a keepalive; the deadline
 * counts it from when the keepalive was sent, earlier, so this margin is what remains if
 * etcd's clock ran that much faster than this host's over one TTL. */
uint64_t px_fence_margin_ns(int64_t ttl_s);

/* The deadline a grant or keepalive sent at sent_ns (uv_hrtime) and answered with ttl_s > 0
 * proves. */
uint64_t px_lease_deadline(uint64_t sent_ns, int64_t ttl_s);

/* Starts the keeper over slots[0, n) (they must outlive it), one round every period_ms; events
 * wakes the control thread (on loop) when a slot's events are set. NULL on failure (logged by
 * the caller). */
px_lease_keeper *px_lease_keeper_start(uv_loop_t *loop, px_lease_slot *slots, size_t n,
                                       uint64_t period_ms, void (*events)(void *arg), void *arg);
/* A round now (a lease was just granted). */
void px_lease_keeper_kick(px_lease_keeper *k);
/* Stops the thread (waits for the keepalive in flight: at most PX_KEEPALIVE_ANSWER_MS) and
 * closes the async; k is freed once it is closed. NULL: nothing. */
void px_lease_keeper_stop(px_lease_keeper *k);

#endif /* CHASH_PROXY_LEASE_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet_watch.h — the watch of a pool's key K in etcd (docs/FLEET.md): a range of every key
 * under K (K, K/pending, K/instances/..., K/lost/...) at revision R, then a watch from R + 1.
 * rev is the newest revision delivered; a lost watch is started again from rev + 1 after a
 * backoff (100 ms doubling to 5 s), so no change is missed and none is replayed; a compacted
 * start revision makes it range again. Each key-value goes to the owner (fleet.c); the fence
 * hears when a read of K whole begins and comes back (fence.h, (3)). Control thread.
 */
#ifndef CHASH_PROXY_FLEET_WATCH_H
#define CHASH_PROXY_FLEET_WATCH_H

#include "etcd_http.h"
#include "fence.h"
#include "log.h"

#include <etcd_msg.h>

#include <stdint.h>
#include <uv.h>

/* What the owner is told. */
typedef struct fleet_watch_on {
    /* One key-value under K, from a range or a watch event. */
    void (*kv)(void *arg, const ch__etcd_kv *kv, bool deleted);
    /* A range came back: K whole, each of kvs already given to kv(). */
    void (*read)(void *arg, const ch__etcd_kv *kvs, size_t n);
    /* The watch went down, or a read of K came back: decide the fence again. */
    void (*changed)(void *arg);
    /* The watch is established (again). */
    void (*up)(void *arg);
    /* etcd did not answer, or ended the watch (what, why: for the log). */
    void (*lost)(void *arg, const char *what, const char *why);
    /* etcd is at revision etcd_rev, behind the seen_rev this watch saw: its data was lost or it
     * is another cluster (and the lease is gone with it). The next read is a range. */
    void (*behind)(void *arg, int64_t etcd_rev, int64_t seen_rev);
} fleet_watch_on;

/* Invariant: at most one of range and watch is in flight, and none while the retry timer runs;
 * rev is 0 while a range is. */
typedef struct fleet_watch {
    px_etcd *etcd;     /* the pool's */
    px_log *log;
    const char *name;  /* the pool's, for the log */
    const char *key;   /* K */
    px_fence *fence;
    px_etcd_req *range, *watch;
    int64_t rev;       /* the newest revision delivered (0: range first) */
    uint64_t backoff_ms;
    uv_timer_t retry;
    bool watching;     /* the watch is created */
    uint64_t restarts; /* the watch lost and started again */
    const fleet_watch_on *on;
    void *arg;
} fleet_watch;

void fleet_watch_init(fleet_watch *w, uv_loop_t *loop);
/* Starts the read: a range when rev is 0, else the watch from rev + 1. */
void fleet_watch_start(fleet_watch *w);
/* Stops the watch (or its range), doubles the backoff and starts again after it. */
void fleet_watch_again(fleet_watch *w);
/* Reads K whole again (now, or when the retry comes): after a lapse of the lease, once the
 * record is back under a new one, after a gap in the loop's turns. */
void fleet_watch_resync(fleet_watch *w);
/* Closes the timer (its data set to data, for cb); the requests go with the etcd client. */
void fleet_watch_close(fleet_watch *w, void *data, uv_close_cb cb);

#endif /* CHASH_PROXY_FLEET_WATCH_H */

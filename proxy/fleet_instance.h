/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet_instance.h — this instance in a pool's etcd (docs/FLEET.md, "The instance record"):
 * its lease, granted here and kept alive by the lease keeper's thread (lease.h), and its
 * record K/instances/<id> under that lease, rewritten whenever a field changes (what the pool
 * serves, its warm-up window, a refusal, a prepared change, the fence). Writing the record under
 * the lease is what registers the instance (fence.h, (2)): the fence hears of each step.
 * Control thread.
 */
#ifndef CHASH_PROXY_FLEET_INSTANCE_H
#define CHASH_PROXY_FLEET_INSTANCE_H

#include "etcd_http.h"
#include "fence.h"
#include "lease.h"
#include "log.h"
#include "pool.h"

#include <fleet_record.h>

/* What the owner (fleet.c) is told. */
typedef struct fleet_instance_on {
    void (*changed)(void *arg);                  /* a lease granted or dropped: decide again */
    void (*registered)(void *arg, bool read_again); /* the record is in etcd under the lease:
                                                       read K whole when read_again, decide */
    void (*lost)(void *arg, const char *what, const char *why); /* etcd did not answer */
} fleet_instance_on;

typedef struct fleet_instance {
    px_etcd *etcd;               /* the pool's */
    px_log *log;
    const char *name;            /* the pool's, for the log */
    int ttl_s;                   /* of the lease (--fleet-ttl) */
    px_fence *fence;             /* the lease's id is fence->lease */
    px_lease_slot *slot;         /* the keeper's copy of the lease id, and the deadline it moves
                                    (the pool's px_shared_pool.lease_until_ns) */
    const px_shared_pool *sp;    /* what the record says the pool serves */
    char *record_key;            /* K/instances/<id> (owned) */
    ch__fleet_record rec;
    px_etcd_req *grant_req, *record_req; /* at most one of each in flight */
    uint64_t grant_sent_ns;      /* when the grant in flight was sent (uv_hrtime) */
    bool dirty;                  /* rec changed since the last write began */
    uv_timer_t warm_end;         /* the record says "off" again when the warm-up window ends */
    const fleet_instance_on *on;
    void *arg;
} fleet_instance;

/* K/instances/<id>, malloc'd (NULL: out of memory). */
char *fleet_instance_key(const char *key, const char *id);
/* Revokes lease (0: none) at endpoint, blocking at most a second: the keys under it go at once,
 * not a TTL later (shutdown, or a lease the start took and nobody took over). */
void fleet_lease_revoke(const char *endpoint, int64_t lease);

void fleet_instance_init(fleet_instance *fi, uv_loop_t *loop);
/* Writes the record under the lease now, or marks it for when the write in flight ends or a
 * lease is granted. */
void fleet_instance_put(fleet_instance *fi);
/* The record's view of what the pool serves now (its epoch, version, servers, warm-up
 * window); not written (fleet_instance_put). */
void fleet_instance_served(fleet_instance *fi);
/* The keepalive tick's part (every ttl/3): a write that failed before, and a grant when there
 * is no lease. */
void fleet_instance_tick(fleet_instance *fi);
/* The lease is gone (etcd said so, or lost its data): fenced now; the next tick grants one. */
void fleet_instance_drop(fleet_instance *fi);
/* Closes the timer (its data set to data, for cb) and frees what fi owns. */
void fleet_instance_close(fleet_instance *fi, void *data, uv_close_cb cb);

#endif /* CHASH_PROXY_FLEET_INSTANCE_H */

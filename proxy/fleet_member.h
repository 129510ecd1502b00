/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet_member.h — an instance's member note, K/members/<id> (docs/FLEET.md, "The instance
 * record"): who it is, under a lease of a day (CH_FLEET_MEMBER_TTL_S) that the lease keeper
 * keeps alive with the record's. It outlives a lapse of the record's lease, so `chash fleet
 * apply` can name an instance whose record vanished. Best effort: granted and put once the
 * record is registered, tried again at each keepalive tick. Control thread.
 */
#ifndef CHASH_PROXY_FLEET_MEMBER_H
#define CHASH_PROXY_FLEET_MEMBER_H

#include "etcd_http.h"
#include "fence.h"
#include "lease.h"

#include <fleet_record.h>

typedef struct fleet_member {
    px_etcd *etcd;               /* the pool's */
    px_lease_slot *slot;         /* the keeper keeps slot->member_lease alive: lease's copy */
    const px_fence *fence;       /* the note is granted and put only once registered */
    const ch__fleet_record *rec; /* who: the instance's record */
    char *key;                   /* K/members/<id> (owned) */
    int64_t lease;               /* 0: none (granted at the next tick) */
    px_etcd_req *req;            /* the grant or put in flight */
    enum { FLEET_MEMBER_GRANT, FLEET_MEMBER_PUT } step; /* which req is */
    bool unput;                  /* granted, not yet put */
} fleet_member;

/* The note of r (its id, kind, host, pid, and now as its since), malloc'd; NULL: out of memory. */
char *fleet_member_json(const ch__fleet_record *r);
/* The next step, when none is in flight and the record is registered: a grant without a
 * lease, else the put when not yet done. */
void fleet_member_tick(fleet_member *mb);
/* The keeper found the note's lease expired: granted again at the next tick. */
void fleet_member_expired(fleet_member *mb);

#endif /* CHASH_PROXY_FLEET_MEMBER_H */

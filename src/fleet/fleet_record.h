/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet_record.h — what a fleet keeps under a pool's key in etcd (docs/FLEET.md, "What is stored
 * where"): the keys, the instance record every chash-proxy and libchash-cache client keeps under
 * its lease, the lost notes and the member notes, as JSON. Defined by src/fleet's etcd_msg.c;
 * shared with libchash-cache (which writes its record), chash-proxy and `chash fleet`. Not
 * installed; names are ch__ (DESIGN.md). Every returned string is malloc'd (free it); every
 * parser returns 0, or -1 with a reason (a clause) in why.
 */
#ifndef CHASH_FLEET_RECORD_H
#define CHASH_FLEET_RECORD_H

#include <stddef.h>
#include <stdint.h>

/* ---- the keys of a pool (docs/FLEET.md, "What is stored where") ------------------------------ */

/* key followed by tail (a prefix and an id: "<key>/instances/" + "<id>"), malloc'd. */
char *ch__fleet_key(const char *key, const char *tail);
/* "<key>/pending", "<key>/instances/" (the prefix of the records) and "<key>/lost/" (of the
 * instances a commit went without), malloc'd. */
char *ch__fleet_pending_key(const char *key);
char *ch__fleet_instances_prefix(const char *key);
char *ch__fleet_lost_prefix(const char *key);
/* "<key>/members/": each instance's membership of the fleet, under a lease of a day it keeps
 * alive, so that an instance whose record vanished (its short lease expired: it lost etcd, was
 * stopped, or died) is still known to `chash fleet apply` and status as lost; revoked at a
 * clean exit, removed by `chash fleet forget`. */
char *ch__fleet_members_prefix(const char *key);
#define CH_FLEET_MEMBER_TTL_S 86400

/* ---- the instance record ------------------------------------------------------------------------
 * "<key>/instances/<id>", under the instance's lease, so it vanishes when the instance dies.
 * JSON; written by each instance when any field changes, read by `chash fleet`. */
typedef struct ch__fleet_record {
    char id[128];            /* unique in the pool: "<host>:<pid>" unless given */
    char kind[24];           /* "chash-proxy" or "libchash-cache" */
    char pool[128];
    char host[128];
    int64_t pid;
    int64_t epoch;           /* the epoch it serves (0: the file's servers, etcd not read yet) */
    int64_t since_unix_ms;   /* since when */
    char membership[64];     /* its membership version */
    int64_t servers;
    int64_t seen_epoch;      /* the newest epoch it has read from etcd, applied or not */
    char refused[200];       /* why the newest one was not applied ("" when it was) */
    int64_t prepared;        /* the pending epoch it holds prepared (0: none) */
    int64_t prepare_failed;  /* the pending epoch it could not prepare (0: none) */
    char prepare_error[200];
    char warm_up[8];         /* "off", "ramp" or "warm" */
    int64_t warm_up_until_unix_ms;
    int64_t swapped_unix_us; /* when it last swapped a membership in (its clock) */
    int64_t fenced;          /* 1: it cannot prove its membership current (docs/FLEET.md) */
    char on_fence[8];        /* what it does then: "error" (refuses) or "serve" */
} ch__fleet_record;

/* "<key>/lost/<id>": written by `chash fleet apply` in the commit of an epoch it committed
 * without instance id (its lease had expired), under a lease of a day; deleted by the instance
 * once it is current again. */
typedef struct ch__fleet_lost {
    char id[128];
    int64_t epoch;           /* the epoch committed without it */
    int64_t lost_unix_ms;    /* when apply saw its record gone */
    char reason[400];
} ch__fleet_lost;
char *ch__fleet_lost_json(const ch__fleet_lost *l);

/* "<key>/members/<id>". */
typedef struct ch__fleet_member {
    char id[128];
    char kind[24];
    char host[128];
    int64_t pid;
    int64_t since_unix_ms;   /* when it registered */
} ch__fleet_member;
char *ch__fleet_member_json(const ch__fleet_member *m);
int ch__fleet_member_parse(const char *json, size_t len, ch__fleet_member *m, char *why,
                           size_t whylen);
int ch__fleet_lost_parse(const char *json, size_t len, ch__fleet_lost *l, char *why,
                         size_t whylen);

char *ch__fleet_record_json(const ch__fleet_record *r);
int ch__fleet_record_parse(const char *json, size_t len, ch__fleet_record *r, char *why,
                           size_t whylen);

#endif /* CHASH_FLEET_RECORD_H */

/*
 * fleet_internal.h — a fleet's membership in etcd (docs/FLEET.md): the messages of etcd's v3
 * JSON gateway (request bodies, responses; jansson, no I/O) and the instance record every
 * chash-proxy and libchash-cache client keeps under its lease. Shared by chash-proxy (which
 * watches over libcurl's multi interface), `chash fleet` (libcurl's easy interface) and
 * libchash-cache. Not installed; names are ch__ (DESIGN.md).
 *
 * etcd's gateway carries keys and values in base64 and 64-bit integers as decimal strings;
 * these functions take and give plain bytes and int64_t. Every returned string is malloc'd
 * (free it); every parser returns 0, or -1 with a reason (a clause) in why.
 */
#ifndef CHASH_FLEET_INTERNAL_H
#define CHASH_FLEET_INTERNAL_H

#include <stdbool.h>
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

/* ---- requests ---------------------------------------------------------------------------------- */

/* /v3/kv/range of key, or of every key with the prefix key when prefix. */
char *ch__etcd_range_body(const char *key, bool prefix);
/* /v3/kv/put; lease 0: none. */
char *ch__etcd_put_body(const char *key, const void *value, size_t len, int64_t lease);
/* /v3/kv/deleterange of key. */
char *ch__etcd_delete_body(const char *key);
/* /v3/watch: create a watch of key and every key it prefixes (key itself, "<key>/..."), from
 * start_rev (0: now), with progress notifications. */
char *ch__etcd_watch_body(const char *key, int64_t start_rev);
/* /v3/lease/grant and /v3/lease/keepalive. */
char *ch__etcd_grant_body(int ttl_s);
char *ch__etcd_keepalive_body(int64_t lease);

/* /v3/kv/txn: if cmp_key's mod_revision equals mod_rev (0: the key does not exist), do the ops
 * in order, each a put (value != NULL; under lease unless 0) or a delete (value NULL) of its
 * key. ch__etcd_txn_body_n: if every compare holds. */
typedef struct ch__etcd_op {
    const char *key;
    const void *value; /* NULL: delete */
    size_t len;
    int64_t lease;
} ch__etcd_op;
typedef struct ch__etcd_cmp {
    const char *key;
    int64_t mod_rev; /* 0: the key does not exist */
} ch__etcd_cmp;
char *ch__etcd_txn_body(const char *cmp_key, int64_t mod_rev, const ch__etcd_op *ops, size_t n);
char *ch__etcd_txn_body_n(const ch__etcd_cmp *cmp, size_t ncmp, const ch__etcd_op *ops, size_t n);

/* ---- responses --------------------------------------------------------------------------------- */

typedef struct ch__etcd_kv {
    char *key;       /* NUL-terminated */
    char *value;     /* NUL-terminated (the value may hold NULs: use len) */
    size_t len;
    int64_t create_rev, mod_rev, lease;
} ch__etcd_kv;

typedef struct ch__etcd_event {
    bool deleted;
    ch__etcd_kv kv;  /* for a delete: key and mod_rev (the delete's revision) only */
} ch__etcd_event;

/* An error answer ({"error": ..., "code": ...} or {"message": ...}) is a failure, its text the
 * reason. */

/* A range: the header's revision and the kvs (*kvs NULL when none). */
int ch__etcd_parse_range(const char *json, size_t len, int64_t *rev, ch__etcd_kv **kvs,
                         size_t *n, char *why, size_t whylen);
void ch__etcd_kvs_free(ch__etcd_kv *kvs, size_t n);

/* A put or a delete: the header's revision (a txn: ch__etcd_parse_txn). */
int ch__etcd_parse_write(const char *json, size_t len, int64_t *rev, char *why, size_t whylen);

/* A txn: the header's revision and whether its compare held. The gateway writes proto3 JSON,
 * which leaves out false: an answer without "succeeded" is a txn whose compare failed. */
int ch__etcd_parse_txn(const char *json, size_t len, int64_t *rev, bool *succeeded, char *why,
                       size_t whylen);

/* A lease grant or keepalive: its id and remaining TTL (0: the lease is gone). */
int ch__etcd_parse_lease(const char *json, size_t len, int64_t *id, int64_t *ttl, char *why,
                         size_t whylen);

/* One message of a watch stream (one line of the gateway's output). */
typedef struct ch__etcd_watch_msg {
    int64_t rev;          /* the header's revision */
    bool created, canceled;
    int64_t compact_rev;  /* > 0: the start revision was compacted; range again */
    ch__etcd_event *events;
    size_t nevents;
} ch__etcd_watch_msg;
int ch__etcd_parse_watch(const char *json, size_t len, ch__etcd_watch_msg *m, char *why,
                         size_t whylen);
void ch__etcd_watch_msg_free(ch__etcd_watch_msg *m);

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

#endif /* CHASH_FLEET_INTERNAL_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_msg.h — the messages of etcd's v3 JSON gateway (request bodies, responses; jansson, no
 * I/O), as a fleet's membership in etcd uses them (docs/FLEET.md). Defined by src/fleet's
 * etcd_msg.c; shared with the modules that talk to etcd, chash-proxy (libcurl's multi
 * interface) and `chash fleet` (libcurl's easy interface). Not installed; names are ch__
 * (DESIGN.md). What is stored under a pool's key is fleet_record.h.
 *
 * etcd's gateway carries keys and values in base64 and 64-bit integers as decimal strings;
 * these functions take and give plain bytes and int64_t. Every returned string is malloc'd
 * (free it); every parser returns 0, or -1 with a reason (a clause) in why.
 */
#ifndef CHASH_ETCD_MSG_H
#define CHASH_ETCD_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* The deepest nesting of arrays and objects an answer may have (etcd's go 4 levels deep): every
 * parser below refuses a deeper one before jansson reads it, naming the limit and the byte that
 * crosses it. jansson bounds the depth itself, at 2048 and in linear time, but without saying
 * where or which limit. */
#define CH__JSON_MAX_DEPTH 64

/* The offset of the '[' or '{' in json[0, len) that opens level max + 1, or SIZE_MAX when it
 * nests no deeper than max. Brackets inside strings are text. It does not validate the JSON.
 * Cost: one pass, O(len); O(1) memory. */
size_t ch__json_too_deep(const char *json, size_t len, unsigned max);

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

#endif /* CHASH_ETCD_MSG_H */

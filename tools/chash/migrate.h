/* SPDX-License-Identifier: Apache-2.0 */
/*
 * migrate.h — what `chash migrate` (migrate.c) shares with its protocol drivers (mig_redis.c,
 * mig_mc.c) and its checkpoint file (mig_checkpoint.c).
 *
 * The engine owns the placement (both pools' tables, built as chash-proxy builds them), the
 * counts, the rate limit and the output. A driver owns the bytes on the wire of one protocol:
 * it enumerates a source server's keys in batches, copies the batch's moved keys to their new
 * owners, and checks them there. Drivers never exit and never print: they report per key and
 * per connection, and the engine decides (retry, count, fail).
 *
 * Threading: none. One source server is drained at a time; each batch is pipelined.
 */
#ifndef CHASH_MIGRATE_H
#define CHASH_MIGRATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MIG_ERR_LEN 256

/* A server of either pool, identified by its address ("host:port" or "/path"): a server that is
 * in both configs (the same address) is the same node, whatever name each config gives it. */
typedef struct mig_server {
    const char *addr;
    const char *host; /* or the socket path */
    int port;         /* 0 for a unix socket */
    const char *name; /* the config's name, or NULL: for messages only */
} mig_server;

/* What a driver needs to reach a server: the pool's settings. Never printed. */
typedef struct mig_auth {
    const char *password; /* redis_auth, or NULL */
    int db;               /* redis_db */
    int timeout_ms;       /* per operation */
} mig_auth;

/* Where one key stands. The engine sets `to` (a NEW server index) for the keys that move and
 * MIG_SKIP for the others; the driver's copy() sets state and, on MIG_FAILED, err. */
enum mig_state {
    MIG_SKIP = 0, /* not moved: nothing to do */
    MIG_TODO,     /* moves, not copied yet */
    MIG_RETRY,    /* the connection failed while copying it: the engine reconnects and retries */
    MIG_COPIED,   /* written at the new owner */
    MIG_PRESENT,  /* the new owner already had the key (newer): left as it is */
    MIG_EXPIRED,  /* gone from the source (expired or deleted) before it could be read */
    MIG_FAILED,   /* refused or unreadable: err says why */
    MIG_CHANGED,  /* written (or deleted) at the source while it was copied: the copy, which
                     may be older, was deleted again at the new owner */
};

/* The verify pass's verdict on one moved key. */
enum mig_check {
    MIG_V_TODO = 0, /* not checked yet */
    MIG_V_OK,
    MIG_V_MISSING,  /* not at the new owner */
    MIG_V_TTL,      /* there, but its TTL differs from the source's by more than the tolerance */
    MIG_V_GONE,     /* gone from the source meanwhile: nothing to compare */
    MIG_V_RETRY,    /* the connection failed: the engine reconnects and retries */
    MIG_V_ERROR,    /* an error reply */
};

typedef struct mig_key {
    char *key; /* owned by the batch; NUL-terminated for messages, but len is authoritative */
    size_t len;
    int64_t exp;    /* memcached: metadump's absolute expiry (unix s), -1 never; redis: unused */
    uint64_t size;  /* memcached: metadump's item size (bounds a pipeline's bytes); redis: 0 */
    size_t to;      /* NEW server index when state != MIG_SKIP */
    int state;      /* enum mig_state */
    int check;      /* enum mig_check, set by verify() */
    char err[MIG_ERR_LEN];
} mig_key;

/* One batch of a source's keys, reused from batch to batch (its arrays only grow). */
typedef struct mig_batch {
    mig_key *keys;
    size_t n, cap;
} mig_batch;

/* Appends a key (copied). Returns false when out of memory. */
bool mig_batch_add(mig_batch *b, const char *key, size_t len, int64_t exp, uint64_t size);
void mig_batch_clear(mig_batch *b);
void mig_batch_free(mig_batch *b);

/* Where a source's enumeration stands: redis, the SCAN cursor; memcached, the keys its dumps
 * gave, held by the driver (priv) across reconnections of the source; metadump has no cursor,
 * so a checkpoint records only whether a server is done. */
typedef struct mig_cursor {
    uint64_t pos;
    bool done;
    uint64_t unlisted; /* memcached: items the server counted but no dump listed */
    void *priv;        /* the driver's, freed by cursor_free() */
} mig_cursor;

typedef struct mig_conn mig_conn; /* one driver's connection to one server */

typedef struct mig_driver {
    const char *name; /* "redis", "memcached" */
    /* Connects (and authenticates). NULL with err on failure. */
    mig_conn *(*open)(const mig_server *s, const mig_auth *a, char *err, size_t errlen);
    void (*close)(mig_conn *c);
    /* The server's number of keys, for the progress bar; 0 when unknown. */
    uint64_t (*count)(mig_conn *c);
    /* Whether a cursor saved in a checkpoint lets a rerun go on (SCAN's does; metadump has
     * none: a rerun dumps an unfinished server again, and its counts are redone). */
    bool resumable;
    /* Appends the next keys of the enumeration (about `hint` of them) to b and advances cur;
     * sets cur->done after the last. Returns 0, or -1 with err when the connection failed or the
     * server refused; the engine reconnects and calls again with the same cursor, which gives
     * no key twice. */
    int (*scan)(mig_conn *c, mig_cursor *cur, size_t hint, mig_batch *b, char *err,
                size_t errlen);
    /* Frees what scan() keeps in cur->priv (a no-op when nothing). */
    void (*cursor_free)(mig_cursor *cur);
    /* Copies every key of b whose state is MIG_TODO or MIG_RETRY from src to dst[k->to], setting
     * its state. replace: overwrite a key already at the new owner. A failed connection marks
     * its keys MIG_RETRY and sets *broken_src or broken_dst[i]. A copy is confirmed: once
     * written, the source is read again, and a key that changed there meanwhile is deleted at
     * the new owner (MIG_CHANGED), so a copy never leaves a value older than the source's at
     * the time of the check (docs/FLEET.md, "Staged migration"). */
    void (*copy)(mig_conn *src, mig_conn **dst, size_t ndst, mig_batch *b, bool replace,
                 bool *broken_src, bool *broken_dst);
    /* Deletes at dst[k->to] every key of b marked in gone[]; one whose delete fails becomes
     * MIG_FAILED (err set), the others keep their state. A failed connection sets
     * broken_dst[i]. */
    void (*drop)(mig_conn **dst, size_t ndst, mig_batch *b, const bool *gone,
                 bool *broken_dst);
    /* Checks every key of b whose state is not MIG_SKIP and whose check is MIG_V_TODO or
     * MIG_V_RETRY: present at dst[k->to], TTL within tol_ms of the source's. */
    void (*verify)(mig_conn *src, mig_conn **dst, size_t ndst, mig_batch *b, int64_t tol_ms,
                   bool *broken_src, bool *broken_dst);
} mig_driver;

/* The verify pass's TTL check. src and dst are the TTLs read at the source and, later, at the new
 * owner (one unit, -1: none); the time between the two readings is known to lie in [min_gap,
 * max_gap] (from the clock around each pipeline), so dst must lie in
 * [src - max_gap - tol, src - min_gap + tol]. Two keys without a TTL agree. */
bool mig_ttl_agrees(int64_t src, int64_t dst, int64_t min_gap, int64_t max_gap, int64_t tol);

extern const mig_driver mig_redis_driver;
extern const mig_driver mig_mc_driver;

/* ---- checkpoint (mig_checkpoint.c) ---------------------------------------------------------- */

/* The counts of one source server, as the checkpoint keeps them. */
typedef struct mig_counts {
    uint64_t scanned; /* keys the enumeration gave */
    uint64_t stray;   /* of them, keys the server holds but does not own under OLD (a copy
                         into it, by this migration or an earlier one): never copied */
    uint64_t moved;   /* of the others, keys whose owner changes */
    uint64_t copied, present, expired, failed; /* what became of the moved keys */
    uint64_t changed;                          /* ... MIG_CHANGED */
    uint64_t cleaned; /* totals only, a staged run's: keys deleted at NEW servers that would
                         have served them without being their current owners (mig_run) */
} mig_counts;

/* The checkpoint's view of one source: its cursor and counts, and its moved keys per NEW
 * server (pairs[nnew]). */
typedef struct mig_source_state {
    mig_cursor cur;
    mig_counts n;
    uint64_t *pairs;
} mig_source_state;

/* Writes the state of every source to path atomically (path.tmp, fsync, rename): a reader sees
 * the old file or the new one, never half of one. `id` names the migration (pool, OLD and NEW
 * membership versions) and `moves` identifies its moved set (mig_run's fingerprint of both
 * placements): a checkpoint of another migration is refused on load. The file ends with an
 * XXH64 checksum of its content. Returns 0 or -1 with err. */
int mig_checkpoint_save(const char *path, const char *id, uint64_t moves, const mig_server *olds,
                        size_t nold, const mig_server *news, size_t nnew,
                        const mig_source_state *st, char *err, size_t errlen);
/* Loads path into st[nold] (whose pairs arrays have nnew entries, all zero). Returns 1 when
 * loaded, 0 when the file does not exist (st untouched), -1 with err (naming the file, and what
 * is wrong) when it is unreadable, malformed, of another migration or moved set, edited (its
 * checksum), or its counts do not add up; st is then left all zero. resumable: the driver's
 * cursors resume (a Redis cursor 0 is then the start, never a position after keys). */
int mig_checkpoint_load(const char *path, const char *id, uint64_t moves, bool resumable,
                        const mig_server *olds, size_t nold, const mig_server *news, size_t nnew,
                        mig_source_state *st, char *err, size_t errlen);

#endif

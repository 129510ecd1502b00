/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mig_run.h — the state of one `chash migrate` run, shared by its files: migrate.c (the command
 * and its workers), mig_side.c (a pool and its placement) and mig_report.c (the output).
 * Internal to the CLI.
 */
#ifndef CHASH_MIG_RUN_H
#define CHASH_MIG_RUN_H

#include "cli.h"
#include "migrate.h"

#include <chash_config.h>

#include <pthread.h>

#define MAX_LISTED 20          /* failed keys and mismatches listed */
#define TIMEOUT_MS 10000       /* every server operation */
#define VERIFY_TOLERANCE_MS 2000

/* One side of the migration: a pool and the table chash-proxy builds for it. */
typedef struct side {
    const char *path;
    ch_config *cfg;
    const ch_conf_pool *pool;
    ch_membership *members;
    const ch_table *table;
    mig_server *servers; /* in the membership's order: table node i is servers[i] */
    size_t n;
    mig_auth auth;
} side;

/* Loads PATH's pool (--pool, else its only pool) and builds its placement as chash-proxy does
 * (ch_config_membership()). Exits 2 on an unknown pool or distribution random, 1 on a file
 * error. */
void side_load(const cli *c, const char *path, side *s);
/* side_load, with the pool's membership then taken from a membership document (docs/FLEET.md:
 * a fleet's committed one) instead of the file's servers. Exits 1 when the document does not
 * apply. */
void side_load_doc(const cli *c, const char *path, const char *doc, size_t len, side *s);
void side_free(side *s);
/* The index of the server with this address, or -1. O(n). */
long side_find(const side *s, const char *addr);
/* "addr" or "addr (name)", for messages. */
const char *server_label(const mig_server *s, char *buf, size_t len);

/* A token bucket of `rate` keys per second holding at most one batch (0: no limit); taking n
 * tokens says how long to wait until they are there (migrate.c). */
typedef struct bucket {
    double rate;
    double next; /* when the tokens taken so far are paid for */
} bucket;

typedef struct listed {
    char *key;
    size_t from, to;
    char *err;
} listed;

/* The run: both sides, the per-source state, the counts. Workers (one thread each, or the
 * main thread alone with --parallel 1) each drain one OLD server at a time; what they share is
 * under `mu`: the sources' states and counts (a source's cursor is published together with the
 * counts of the batches before it, so a checkpoint never runs ahead of the copies), the lists,
 * the rate bucket, the progress and the checkpoint file. A source's connection is used only by
 * the worker draining it. */
typedef struct run {
    const cli *c;
    const mig_driver *drv;
    side old, neu;
    long *same;              /* per OLD server: its index in NEW, or -1 */
    mig_conn **src;          /* per OLD server */
    mig_source_state *st;    /* per OLD server: what the checkpoint holds */
    mig_source_state *lost;  /* per OLD server: the batch its connection died in (counted,
                                never checkpointed: a rerun enumerates it again) */
    bool *source_failed;
    uint64_t *unlisted;      /* per OLD server: keys no dump listed (memcached), this run */
    char **source_err;
    bool dry_run, replace, verify;
    size_t batch;
    uint64_t limit;          /* keys scanned in this run before stopping; 0: none */
    const char *checkpoint;
    char id[256];
    uint64_t moves;          /* the moved set's identity (moved_set_id), in the checkpoint */
    pthread_mutex_t mu;
    /* under mu: */
    uint64_t scanned_run;    /* keys scanned in this run */
    uint64_t since_save;     /* keys scanned since the checkpoint was written */
    size_t next_source;      /* the pass's next OLD server to hand to a worker */
    bool stopped;            /* --limit or a signal: no more batches */
    bucket rate;
    progress prog;
    uint64_t prog_done;
    listed failed[MAX_LISTED];
    size_t nfailed_listed;
    uint64_t v_checked, v_ok, v_missing, v_ttl, v_gone, v_error;
    listed mismatch[MAX_LISTED];
    size_t nmismatch_listed;
} run;

/* Copies the keys whose owner changes from old's placement to neu's (both taken over and freed
 * here), as `chash migrate` does, with c's settings (--rate, --batch, --parallel, --replace,
 * --verify, --dry-run, --limit, --checkpoint, --json). report: print the result (else only
 * the failed keys, on stderr); totals: the counts, when not NULL. clean (a staged migration,
 * strictly before the switch): first, every NEW server is enumerated and each key it would
 * own under neu without owning it under old is deleted there (a copy it kept from a previous
 * ownership, or of a migration that did not commit: never the current value, which is at the
 * old owner, and which the copy then brings over). Returns migrate's exit
 * status (0 done, 1 keys failed, 3 stopped before the end) with why set unless 0, or -1 with
 * why when a server cannot be reached or a checkpoint read (nothing copied). */
int mig_run(const cli *c, side *old, side *neu, bool report, bool clean, mig_counts *totals,
            char *why, size_t whylen);

/* The totals over the OLD servers. */
void mig_totals(const run *r, mig_counts *t);
/* The run's result: one JSON object, or the text; then the failed keys and mismatches on
 * stderr. complete: the run went to the end; secs: its duration. */
void mig_print_json(const run *r, bool complete, double secs);
void mig_print_text(const run *r, bool complete, double secs);
void mig_print_listed(const run *r);

#endif

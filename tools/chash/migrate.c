/* SPDX-License-Identifier: Apache-2.0 */
/*
 * migrate.c — `chash migrate OLD NEW`: copy exactly the keys whose owner changes.
 *
 * Both placements are built as chash-proxy builds a pool's (ch_config_membership(): the pool's
 * distribution, hash, hash_tag, weights, server names and order), so a key is copied to the
 * server the proxy on NEW will ask for it. Servers are identified by address, as chash-proxy's
 * reload matches them (proxy/reload.c): a server in both files is the same node, and a key moves
 * when its NEW owner's address differs from the address of the server it is on.
 *
 * Each OLD server is enumerated in batches (migrate.h, a driver per protocol); of a batch, only
 * the keys that server owns under OLD and whose owner changes are copied (a key the server holds
 * but does not own, e.g. the stale copy of an earlier migration, is counted "stray" and left).
 * Copies are pipelined per batch; a lost connection is reopened and its keys retried, at most
 * RETRIES times. Nothing is deleted at the source: until the switch to NEW the old owners keep
 * serving, and a rollback to OLD finds its keys. Every key that moves ends in exactly one count:
 * copied, present (already at the new owner, left alone without --replace), expired, failed,
 * changed (written at the source during its copy: the copy deleted again).
 *
 * --parallel workers (threads) drain that many OLD servers at once, each with its own
 * connections to the NEW servers.
 *
 * Cost: one SCAN / metadump pass over every OLD server, plus, for each moved key, a read at the
 * source and a write at the new owner, pipelined per batch: about (keys / batch) x 3 round
 * trips. Memory: one batch of keys and values per worker (memcached: plus the keys of the
 * servers being drained). The output is mig_report.c's, a pool's placement mig_side.c's.
 */
#define _POSIX_C_SOURCE 200809L
#include "commands.h"
#include "mig_run.h"

#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#define RETRIES 3              /* attempts per batch when a connection fails */
#define CHECKPOINT_EVERY 5000  /* keys scanned between checkpoint writes */

/* ---- batches ------------------------------------------------------------------------------ */

bool mig_batch_add(mig_batch *b, const char *key, size_t len, int64_t exp, uint64_t size)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 1024;
        mig_key *k = realloc(b->keys, cap * sizeof(*k));
        if (k == NULL)
            return false;
        memset(k + b->cap, 0, (cap - b->cap) * sizeof(*k));
        b->keys = k;
        b->cap = cap;
    }
    mig_key *k = &b->keys[b->n];
    char *copy = realloc(k->key, len + 1); /* a slot's buffer is reused by later batches */
    if (copy == NULL)
        return false;
    memcpy(copy, key, len);
    copy[len] = '\0';
    *k = (mig_key){.key = copy, .len = len, .exp = exp, .size = size};
    b->n++;
    return true;
}

void mig_batch_clear(mig_batch *b)
{
    b->n = 0;
}

void mig_batch_free(mig_batch *b)
{
    for (size_t i = 0; i < b->cap; i++)
        free(b->keys[i].key);
    free(b->keys);
    *b = (mig_batch){0};
}

bool mig_ttl_agrees(int64_t src, int64_t dst, int64_t min_gap, int64_t max_gap, int64_t tol)
{
    if (src < 0 || dst < 0)
        return src < 0 && dst < 0;
    if (min_gap < 0)
        min_gap = 0;
    return dst >= src - max_gap - tol && dst <= src - min_gap + tol;
}

/* ---- the rate limit ----------------------------------------------------------------------- */



/* Takes n tokens; returns how long to sleep before using them (0: at once). The caller
 * serializes calls (the run's lock); the sleep is the caller's, outside the lock. */
static double bucket_take(bucket *b, size_t n, double burst_s)
{
    if (b->rate <= 0 || n == 0)
        return 0;
    double now = now_seconds();
    if (b->next < now - burst_s) /* idle: at most one burst's worth was saved */
        b->next = now - burst_s;
    b->next += (double)n / b->rate;
    return b->next > now ? b->next - now : 0;
}

static void sleep_s(double wait)
{
    if (wait <= 0)
        return;
    struct timespec ts = {(time_t)wait, (long)((wait - floor(wait)) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ---- the run ------------------------------------------------------------------------------ */

/* One worker: its own connection to every NEW server, and its batch. */
typedef struct worker {
    run *r;
    mig_conn **dst;   /* per NEW server (NULL: unreachable, or a dry run) */
    bool *broken_dst;
    mig_batch b;
    bool verify_pass;
    pthread_t thread;
} worker;

/* Set by SIGINT / SIGTERM, read by every worker: a lock-free atomic, safe in a handler and
 * between threads (a volatile sig_atomic_t is only the former). */
static atomic_int stop_requested;

static void on_stop(int sig)
{
    (void)sig;
    atomic_store_explicit(&stop_requested, 1, memory_order_relaxed);
}

static void list_key(const cli *c, listed *l, size_t *n, const mig_key *k, size_t from, size_t to,
                     const char *err)
{
    if (*n == MAX_LISTED)
        return;
    l[*n] = (listed){xstrdup(c, k->key), from, to, xstrdup(c, err)};
    (*n)++;
}

/* Writes the checkpoint; the caller holds r->mu. */
static void save(run *r)
{
    if (r->checkpoint == NULL || r->dry_run)
        return;
    char err[512];
    if (mig_checkpoint_save(r->checkpoint, r->id, r->moves, r->old.servers, r->old.n,
                            r->neu.servers, r->neu.n, r->st, err, sizeof(err)) != 0)
        cli_fail(r->c, "checkpoint: %s", err);
}

/* Opens a connection to s, trying `tries` times with a doubling pause. */
static mig_conn *connect_to(run *r, const mig_server *s, const mig_auth *a, int tries,
                            char *err, size_t errlen)
{
    long pause_ms = 100;
    for (int t = 0; t < tries; t++) {
        if (t > 0) {
            struct timespec ts = {pause_ms / 1000, (pause_ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
            pause_ms *= 2;
        }
        mig_conn *conn = r->drv->open(s, a, err, errlen);
        if (conn)
            return conn;
    }
    return NULL;
}

/* Reopens the OLD server's connection after a failure; false when it cannot. */
static bool reopen_src(run *r, size_t i, char *err, size_t errlen)
{
    r->drv->close(r->src[i]);
    r->src[i] = connect_to(r, &r->old.servers[i], &r->old.auth, RETRIES, err, errlen);
    return r->src[i] != NULL;
}

static void reopen_dsts(worker *w)
{
    run *r = w->r;
    for (size_t j = 0; j < r->neu.n; j++) {
        if (!w->broken_dst[j])
            continue;
        char err[MIG_ERR_LEN];
        r->drv->close(w->dst[j]);
        w->dst[j] = connect_to(r, &r->neu.servers[j], &r->neu.auth, RETRIES, err, sizeof(err));
        if (w->dst[j] == NULL) {
            char lb[300];
            cli_warn(r->c, "new owner %s is unreachable: %s; its keys fail",
                     server_label(&r->neu.servers[j], lb, sizeof(lb)), err);
        }
        w->broken_dst[j] = false;
    }
}

/* Marks the keys of b whose state (check) is `from` as `to` with err. */
static void mark(mig_batch *b, bool check, int from, int to, const char *err)
{
    for (size_t k = 0; k < b->n; k++) {
        mig_key *key = &b->keys[k];
        int *f = check ? &key->check : &key->state;
        if (key->state == MIG_SKIP || *f != from)
            continue;
        *f = to;
        size_t n = strnlen(err, MIG_ERR_LEN - 1); /* truncated to fit */
        memcpy(key->err, err, n);
        key->err[n] = '\0';
    }
}

/* Keys bound for a NEW server that is unreachable fail at once. */
static void fail_unreachable(const worker *w, mig_batch *b, bool check)
{
    for (size_t k = 0; k < b->n; k++) {
        mig_key *key = &b->keys[k];
        if (key->state == MIG_SKIP || w->dst[key->to] != NULL)
            continue;
        if (check ? key->check == MIG_V_TODO || key->check == MIG_V_RETRY
                  : key->state == MIG_TODO || key->state == MIG_RETRY) {
            if (check)
                key->check = MIG_V_ERROR;
            else
                key->state = MIG_FAILED;
            snprintf(key->err, MIG_ERR_LEN, "new owner unreachable");
        }
    }
}

static bool any(const mig_batch *b, bool check, int v)
{
    for (size_t k = 0; k < b->n; k++)
        if (b->keys[k].state != MIG_SKIP && (check ? b->keys[k].check : b->keys[k].state) == v)
            return true;
    return false;
}

/* Copies the batch's moved keys from OLD server i, retrying lost connections. Returns false
 * when the source's connection was lost and could not be reopened: the keys not copied then
 * failed, and the source is gone. */
static bool copy_batch(worker *w, size_t i, mig_batch *b, char *err, size_t errlen)
{
    run *r = w->r;
    for (int attempt = 0;; attempt++) {
        fail_unreachable(w, b, false);
        if (!any(b, false, MIG_TODO) && !any(b, false, MIG_RETRY))
            return true;
        bool broken_src = false;
        r->drv->copy(r->src[i], w->dst, r->neu.n, b, r->replace, &broken_src, w->broken_dst);
        err[0] = '\0';
        bool src_ok = !broken_src || reopen_src(r, i, err, errlen);
        reopen_dsts(w);
        if (!src_ok) {
            char why[MIG_ERR_LEN + 64];
            snprintf(why, sizeof(why), "the source's connection was lost: %.200s", err);
            mark(b, false, MIG_TODO, MIG_FAILED, why);
            mark(b, false, MIG_RETRY, MIG_FAILED, why);
            return false;
        }
        if (!any(b, false, MIG_RETRY))
            return true;
        if (attempt + 1 == RETRIES) {
            char why[MIG_ERR_LEN + 64];
            snprintf(why, sizeof(why), "connection lost after %d attempts", attempt + 1);
            mark(b, false, MIG_RETRY, MIG_FAILED, why);
        }
    }
}

static void verify_batch(worker *w, size_t i, mig_batch *b)
{
    run *r = w->r;
    for (int attempt = 0;; attempt++) {
        fail_unreachable(w, b, true);
        bool broken_src = false;
        r->drv->verify(r->src[i], w->dst, r->neu.n, b, VERIFY_TOLERANCE_MS, &broken_src,
                       w->broken_dst);
        char err[MIG_ERR_LEN] = "";
        bool src_ok = !broken_src || reopen_src(r, i, err, sizeof(err));
        reopen_dsts(w);
        if (!any(b, true, MIG_V_RETRY))
            return;
        if (!src_ok || attempt + 1 == RETRIES) {
            mark(b, true, MIG_V_RETRY, MIG_V_ERROR, "connection lost");
            return;
        }
    }
}

/* Decides, for each key of a batch from OLD server i, whether it moves and where. Returns the
 * number that move; *stray, the number server i holds but does not own. Pure: no lock. */
static size_t classify(const run *r, size_t i, mig_batch *b, uint64_t *stray)
{
    size_t moved = 0;
    *stray = 0;
    for (size_t k = 0; k < b->n; k++) {
        mig_key *key = &b->keys[k];
        key->state = MIG_SKIP;
        key->check = MIG_V_TODO;
        /* --match: another pool's key on a server the pools share is not this pool's to move
         * (a key with a NUL byte is matched up to it). */
        if (r->c->match != NULL && fnmatch(r->c->match, key->key, 0) != 0)
            continue;
        if (ch_lookup(r->old.table, key->key, key->len) != i) {
            (*stray)++;
            continue;
        }
        size_t to = ch_lookup(r->neu.table, key->key, key->len);
        if (r->same[i] >= 0 && (size_t)r->same[i] == to)
            continue;
        key->to = to;
        key->state = MIG_TODO;
        moved++;
    }
    return moved;
}

/* Counts batch b of OLD server i into s (its state, or its lost batch); the caller holds r->mu
 * (so do count_verify's). */
static void count_batch(run *r, size_t i, mig_source_state *s, const mig_batch *b,
                        uint64_t stray)
{
    s->n.scanned += b->n;
    s->n.stray += stray;
    for (size_t k = 0; k < b->n; k++) {
        const mig_key *key = &b->keys[k];
        if (key->state == MIG_SKIP)
            continue;
        s->n.moved++;
        s->pairs[key->to]++;
        switch (key->state) {
        case MIG_COPIED: s->n.copied++; break;
        case MIG_PRESENT: s->n.present++; break;
        case MIG_EXPIRED: s->n.expired++; break;
        case MIG_CHANGED: s->n.changed++; break;
        case MIG_FAILED:
            s->n.failed++;
            list_key(r->c, r->failed, &r->nfailed_listed, key, i, key->to, key->err);
            break;
        default: break; /* a dry run: only counted as moved */
        }
    }
}

static void count_verify(run *r, size_t i, const mig_batch *b)
{
    for (size_t k = 0; k < b->n; k++) {
        const mig_key *key = &b->keys[k];
        if (key->state == MIG_SKIP)
            continue;
        r->v_checked++;
        const char *what = NULL;
        switch (key->check) {
        case MIG_V_OK: r->v_ok++; break;
        case MIG_V_GONE: r->v_gone++; break;
        case MIG_V_MISSING: r->v_missing++; what = "missing at the new owner"; break;
        case MIG_V_TTL: r->v_ttl++; what = key->err; break;
        default: r->v_error++; what = key->err[0] ? key->err : "error"; break;
        }
        if (what)
            list_key(r->c, r->mismatch, &r->nmismatch_listed, key, i, key->to, what);
    }
}

/* Whether the run is to stop before its next batch. */
static bool must_stop(run *r, bool verify_pass)
{
    pthread_mutex_lock(&r->mu);
    if (atomic_load_explicit(&stop_requested, memory_order_relaxed) ||
        (!verify_pass && r->limit && r->scanned_run >= r->limit))
        r->stopped = true;
    bool stop = r->stopped;
    pthread_mutex_unlock(&r->mu);
    return stop;
}

/* Enumerates OLD server i from its cursor; copies (or, for verify, checks) what moves. Returns
 * false when the run must stop (--limit reached, a signal). */
static bool drain(worker *w, size_t i)
{
    run *r = w->r;
    bool verify_pass = w->verify_pass;
    mig_batch *b = &w->b;
    char lb[300];
    const mig_server *s = &r->old.servers[i];
    /* The worker's own cursor (with the driver's state); st[i].cur gets its position once the
     * batch before it is counted. */
    pthread_mutex_lock(&r->mu);
    mig_cursor cur = {0};
    if (!verify_pass)
        cur = (mig_cursor){.pos = r->st[i].cur.pos, .done = r->st[i].cur.done};
    pthread_mutex_unlock(&r->mu);
    size_t hint = r->batch;
    if (r->rate.rate > 0 && r->rate.rate < (double)hint)
        hint = (size_t)fmax(1, r->rate.rate);
    while (!cur.done) {
        if (must_stop(r, verify_pass)) {
            r->drv->cursor_free(&cur); /* a memcached server's keys: dumped again on a rerun */
            return false;
        }
        mig_batch_clear(b);
        char err[MIG_ERR_LEN];
        /* A connection that could not be reopened after a failed copy is tried once more. */
        int rc = r->src[i] != NULL || reopen_src(r, i, err, sizeof(err))
                     ? r->drv->scan(r->src[i], &cur, hint, b, err, sizeof(err))
                     : -1;
        for (int t = 1; rc != 0 && t < RETRIES; t++) {
            char e2[MIG_ERR_LEN];
            if (!reopen_src(r, i, e2, sizeof(e2))) {
                snprintf(err, sizeof(err), "%s", e2);
                break;
            }
            mig_batch_clear(b);
            rc = r->drv->scan(r->src[i], &cur, hint, b, err, sizeof(err));
        }
        if (rc != 0) {
            cli_warn(r->c, "%s: enumeration failed: %s", server_label(s, lb, sizeof(lb)), err);
            r->drv->cursor_free(&cur);
            r->source_failed[i] = true;
            r->source_err[i] = xstrdup(r->c, err);
            return true;
        }
        uint64_t stray;
        size_t moved = classify(r, i, b, &stray);
        if (verify_pass) {
            verify_batch(w, i, b);
            pthread_mutex_lock(&r->mu);
            count_verify(r, i, b);
        } else {
            bool src_ok = true;
            if (!r->dry_run && moved > 0) {
                pthread_mutex_lock(&r->mu);
                double wait = bucket_take(&r->rate, moved, (double)hint / fmax(1, r->rate.rate));
                pthread_mutex_unlock(&r->mu);
                sleep_s(wait);
                src_ok = copy_batch(w, i, b, err, sizeof(err));
            }
            if (!src_ok) {
                /* The source died mid-copy: the batch is counted (its keys not copied failed)
                 * apart from the checkpoint's state, whose cursor stays before it, so that a
                 * rerun enumerates it again; the source is done for this run. */
                cli_warn(r->c, "%s: connection lost while copying: %s",
                         server_label(s, lb, sizeof(lb)), err);
                pthread_mutex_lock(&r->mu);
                count_batch(r, i, &r->lost[i], b, stray);
                r->source_failed[i] = true;
                char e2[MIG_ERR_LEN + 64];
                snprintf(e2, sizeof(e2), "connection lost while copying: %.200s", err);
                r->source_err[i] = xstrdup(r->c, e2);
                r->prog_done += b->n;
                pthread_mutex_unlock(&r->mu);
                r->drv->cursor_free(&cur);
                return true;
            }
            pthread_mutex_lock(&r->mu);
            count_batch(r, i, &r->st[i], b, stray);
            r->st[i].cur.pos = cur.pos;
            r->st[i].cur.done = cur.done;
            r->scanned_run += b->n;
            r->since_save += b->n;
            if (r->since_save >= CHECKPOINT_EVERY || cur.done) {
                save(r);
                r->since_save = 0;
            }
        }
        r->prog_done += b->n;
        progress_update(&r->prog, r->prog_done);
        pthread_mutex_unlock(&r->mu);
    }
    if (!verify_pass && cur.unlisted > 0) {
        r->unlisted[i] = cur.unlisted;
        cli_warn(r->c, "%s: %" PRIu64 " items its stats count were listed by none of its "
                       "dumps (lru_crawler metadump): a rerun may copy them",
                 server_label(s, lb, sizeof(lb)), cur.unlisted);
    }
    return true;
}

/* A worker: drains the pass's OLD servers one after the other until none is left. */
static void *work(void *arg)
{
    worker *w = arg;
    run *r = w->r;
    for (;;) {
        pthread_mutex_lock(&r->mu);
        size_t i = r->next_source;
        while (i < r->old.n && !w->verify_pass && r->st[i].cur.done)
            i++;
        bool go = !r->stopped && i < r->old.n;
        r->next_source = go ? i + 1 : r->old.n;
        pthread_mutex_unlock(&r->mu);
        if (!go || !drain(w, i))
            return NULL;
    }
}

/* One pass over the OLD servers with nw workers (threads when nw > 1). Returns whether it ran
 * to the end. */
static bool pass(run *r, worker *w, size_t nw, bool verify_pass)
{
    r->next_source = 0;
    r->stopped = false;
    for (size_t k = 0; k < nw; k++)
        w[k].verify_pass = verify_pass;
    size_t started = 1;
    for (size_t k = 1; k < nw; k++, started++)
        if (pthread_create(&w[k].thread, NULL, work, &w[k]) != 0) {
            cli_warn(r->c, "cannot start worker thread %zu of %zu: going on with %zu", k + 1, nw,
                     k);
            break;
        }
    work(&w[0]);
    for (size_t k = 1; k < started; k++)
        pthread_join(w[k].thread, NULL);
    return !r->stopped;
}

/* ---- the command -------------------------------------------------------------------------- */

int cmd_migrate(cli *c)
{
    if (c->argc != 2)
        cli_usage(c, "wants OLD.yml and NEW.yml (see chash migrate --help)");
    if (c->nodes || c->config)
        cli_usage(c, "OLD and NEW are config files: --nodes and --config do not apply");
    side old, neu;
    side_load(c, c->argv[0], &old);
    side_load(c, c->argv[1], &neu);
    if (old.pool->redis != neu.pool->redis)
        cli_usage(c, "%s pool %s is a %s pool, %s pool %s a %s pool: keys cannot move between "
                     "protocols",
                  old.path, old.pool->name, old.pool->redis ? "redis" : "memcached",
                  neu.path, neu.pool->name, neu.pool->redis ? "redis" : "memcached");
    if (c->dry_run && c->replace)
        cli_usage(c, "--replace does nothing in a dry run");
    if (c->dry_run && c->checkpoint)
        cli_usage(c, "--checkpoint does nothing in a dry run (it records copies)");
    if (c->restart && !c->checkpoint)
        cli_usage(c, "--restart needs --checkpoint FILE (it starts that file afresh)");
    char err[600];
    int status = mig_run(c, &old, &neu, true, false, NULL, err, sizeof(err));
    if (status < 0)
        cli_fail(c, "%s", err);
    return status;
}

/* The clean pass (mig_run): NEW server j enumerated, the keys it would own under NEW and does
 * not own under OLD deleted there. Returns the number deleted, or -1 with why. */
static int64_t clean_server(run *r, size_t j, char *why, size_t whylen)
{
    char err[MIG_ERR_LEN], lb[300];
    const mig_server *s = &r->neu.servers[j];
    long oi = side_find(&r->old, s->addr);
    mig_conn *conn = connect_to(r, s, &r->neu.auth, RETRIES, err, sizeof(err));
    if (conn == NULL) {
        snprintf(why, whylen, "NEW server %s: %s", server_label(s, lb, sizeof(lb)), err);
        return -1;
    }
    mig_cursor cur = {0};
    mig_batch b = {0};
    int64_t cleaned = 0;
    while (cleaned >= 0 && !cur.done) {
        mig_batch_clear(&b);
        if (r->drv->scan(conn, &cur, r->batch, &b, err, sizeof(err)) != 0) {
            snprintf(why, whylen, "NEW server %s: %s", server_label(s, lb, sizeof(lb)), err);
            cleaned = -1;
            break;
        }
        bool *gone = calloc(b.n ? b.n : 1, sizeof(*gone)), broken = false;
        if (gone == NULL) {
            snprintf(why, whylen, "out of memory");
            cleaned = -1;
            break;
        }
        size_t n = 0;
        for (size_t k = 0; k < b.n; k++) {
            mig_key *key = &b.keys[k];
            if ((r->c->match != NULL && fnmatch(r->c->match, key->key, 0) != 0) ||
                ch_lookup(r->neu.table, key->key, key->len) != j ||
                (oi >= 0 && ch_lookup(r->old.table, key->key, key->len) == (size_t)oi))
                continue;
            key->to = 0;
            key->state = MIG_TODO;
            gone[k] = true;
            n++;
        }
        if (n > 0)
            r->drv->drop(&conn, 1, &b, gone, &broken);
        for (size_t k = 0; k < b.n && cleaned >= 0; k++) {
            if (!gone[k])
                continue;
            if (b.keys[k].state == MIG_FAILED) {
                snprintf(why, whylen, "NEW server %s: a copy it must not serve, %s: %s",
                         server_label(s, lb, sizeof(lb)), b.keys[k].key, b.keys[k].err);
                cleaned = -1;
            } else {
                cleaned++;
            }
        }
        free(gone);
    }
    r->drv->cursor_free(&cur);
    mig_batch_free(&b);
    r->drv->close(conn);
    return cleaned;
}

/* The identity of the moved set, for the checkpoint: what decides which keys move where and
 * which keys are the pool's. Both sides' server addresses (in placement order) and databases,
 * --match, the membership versions, and the owners under OLD and NEW of PROBES fixed keys
 * (plain and hash-tagged), which follow the placements themselves (distribution, hash,
 * hash_tag, weights, names) even where a pool's explicit "version" stays the same. XXH64. */
#define PROBES 4096
static uint64_t moved_set_id(const run *r)
{
    XXH64_state_t *h = XXH64_createState();
    if (h == NULL)
        cli_fail(r->c, "out of memory");
    XXH64_reset(h, 0);
    const side *sides[2] = {&r->old, &r->neu};
    XXH64_update(h, r->drv->name, strlen(r->drv->name) + 1);
    for (int k = 0; k < 2; k++) {
        const side *s = sides[k];
        const char *v = ch_membership_version(s->members);
        XXH64_update(h, k ? "NEW" : "OLD", 4);
        XXH64_update(h, v, strlen(v) + 1);
        int32_t db = s->auth.db;
        XXH64_update(h, &db, sizeof(db));
        for (size_t i = 0; i < s->n; i++)
            XXH64_update(h, s->servers[i].addr, strlen(s->servers[i].addr) + 1);
    }
    const char *match = r->c->match ? r->c->match : "";
    XXH64_update(h, match, strlen(match) + 1);
    for (unsigned i = 0; i < PROBES; i++) {
        char key[64];
        int len = snprintf(key, sizeof(key), i % 2 ? "{probe:%u}:%u" : "chash-probe:%u:%u", i,
                           i * 2654435761u);
        uint32_t own[2] = {(uint32_t)ch_lookup(r->old.table, key, (size_t)len),
                           (uint32_t)ch_lookup(r->neu.table, key, (size_t)len)};
        XXH64_update(h, own, sizeof(own));
    }
    uint64_t id = XXH64_digest(h);
    XXH64_freeState(h);
    return id;
}

int mig_run(const cli *c, side *old, side *neu, bool report, bool clean, mig_counts *totals,
            char *why, size_t whylen)
{
    run r = {.c = c, .old = *old, .neu = *neu, .dry_run = c->dry_run, .replace = c->replace,
             .verify = c->verify, .batch = c->batch ? c->batch : 1000, .limit = c->limit,
             .checkpoint = c->checkpoint, .rate = {.rate = (double)c->rate}};
    r.drv = r.old.pool->redis ? &mig_redis_driver : &mig_mc_driver;
    snprintf(r.id, sizeof(r.id), "%s %s %s", r.old.pool->name,
             ch_membership_version(r.old.members), ch_membership_version(r.neu.members));

    size_t no = r.old.n, nn = r.neu.n;
    r.same = xcalloc(c, no, sizeof(*r.same));
    r.src = xcalloc(c, no, sizeof(*r.src));
    r.st = xcalloc(c, no, sizeof(*r.st));
    r.lost = xcalloc(c, no, sizeof(*r.lost));
    r.source_failed = xcalloc(c, no, sizeof(*r.source_failed));
    r.unlisted = xcalloc(c, no, sizeof(*r.unlisted));
    r.source_err = xcalloc(c, no, sizeof(*r.source_err));
    for (size_t i = 0; i < no; i++) {
        r.same[i] = side_find(&r.neu, r.old.servers[i].addr);
        r.st[i].pairs = xcalloc(c, nn, sizeof(*r.st[i].pairs));
        r.lost[i].pairs = xcalloc(c, nn, sizeof(*r.lost[i].pairs));
    }
    int status = -1;
    size_t nw = 0;
    worker *w = NULL;
    r.moves = moved_set_id(&r);
    if (r.checkpoint && !r.dry_run && c->restart && !c->json)
        fprintf(stderr, "chash migrate: --restart: starting afresh; %s will be overwritten\n",
                r.checkpoint);
    if (r.checkpoint && !r.dry_run && !c->restart) {
        char err[600];
        int rc = mig_checkpoint_load(r.checkpoint, r.id, r.moves, r.drv->resumable,
                                     r.old.servers, no, r.neu.servers, nn, r.st, err,
                                     sizeof(err));
        if (rc < 0) {
            snprintf(why, whylen, "checkpoint: %s", err);
            goto out;
        }
        if (rc == 1 && !c->json)
            fprintf(stderr, "chash migrate: resuming from %s\n", r.checkpoint);
        /* A server whose enumeration cannot resume (metadump) starts again from nothing: its
         * counts are redone, so that no key is counted twice. */
        for (size_t i = 0; i < no && !r.drv->resumable; i++) {
            if (r.st[i].cur.done)
                continue;
            r.st[i].cur = (mig_cursor){0};
            r.st[i].n = (mig_counts){0};
            memset(r.st[i].pairs, 0, nn * sizeof(*r.st[i].pairs));
        }
    }

    /* Every server is reached before anything is written: a typo in a config stops the run
     * here, naming the server. A dry run needs only the OLD servers. */
    char err[MIG_ERR_LEN], lb[300];
    for (size_t i = 0; i < no; i++) {
        if ((r.src[i] = connect_to(&r, &r.old.servers[i], &r.old.auth, 1, err, sizeof(err))) ==
            NULL) {
            snprintf(why, whylen, "OLD server %s: %s",
                     server_label(&r.old.servers[i], lb, sizeof(lb)), err);
            goto out;
        }
    }
    nw = c->parallel ? c->parallel : 4;
    if (nw > no)
        nw = no;
    w = xcalloc(c, nw, sizeof(*w));
    for (size_t k = 0; k < nw; k++) {
        w[k].r = &r;
        w[k].dst = xcalloc(c, nn, sizeof(*w[k].dst));
        w[k].broken_dst = xcalloc(c, nn, sizeof(*w[k].broken_dst));
    }
    for (size_t k = 0; k < nw; k++) {
        for (size_t j = 0; j < nn && !(r.dry_run && !r.verify); j++) {
            if ((w[k].dst[j] = connect_to(&r, &r.neu.servers[j], &r.neu.auth, 1, err,
                                          sizeof(err))) == NULL) {
                snprintf(why, whylen, "NEW server %s: %s",
                         server_label(&r.neu.servers[j], lb, sizeof(lb)), err);
                goto out;
            }
        }
    }
    pthread_mutex_init(&r.mu, NULL);

    struct sigaction sa = {.sa_handler = on_stop, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* hiredis writes with write(2): a server that died would kill us with SIGPIPE instead of
     * failing its keys. */
    signal(SIGPIPE, SIG_IGN);

    uint64_t cleaned = 0;
    for (size_t j = 0; clean && j < nn; j++) {
        int64_t k = clean_server(&r, j, why, whylen);
        if (k < 0) {
            status = 1;
            pthread_mutex_destroy(&r.mu);
            goto out;
        }
        cleaned += (uint64_t)k;
    }
    uint64_t total = 0;
    for (size_t i = 0; i < no; i++)
        if (!r.st[i].cur.done)
            total += r.drv->count(r.src[i]);
    double t0 = now_seconds();
    bool complete = true;
    /* A dry run with --verify only checks: the copy pass is left out. */
    if (!(r.dry_run && r.verify)) {
        progress_start_counted(&r.prog, "migrate", r.dry_run ? "counting" : "migrating", total,
                               "keys", c->progress);
        complete = pass(&r, w, nw, false);
        progress_end(&r.prog);
        save(&r); /* the workers are done: no lock needed */
    }
    if (r.verify && complete) {
        total = 0;
        for (size_t i = 0; i < no; i++)
            total += r.src[i] ? r.drv->count(r.src[i]) : 0;
        r.prog_done = 0;
        progress_start_counted(&r.prog, "migrate", "verifying", total, "keys", c->progress);
        complete = pass(&r, w, nw, true);
        progress_end(&r.prog);
    }
    double secs = now_seconds() - t0;
    pthread_mutex_destroy(&r.mu);
    /* Complete: the run went to its end and every moved key is accounted for as copied,
     * present, expired or changed. A source that failed (its keys after the failure never
     * enumerated) or a failed key leaves it incomplete. */
    bool bad_source = false;
    for (size_t i = 0; i < no; i++)
        bad_source = bad_source || r.source_failed[i];
    mig_counts t;
    mig_totals(&r, &t);
    complete = complete && !bad_source && t.failed == 0;

    if (report && c->json)
        mig_print_json(&r, complete, secs);
    else if (report)
        mig_print_text(&r, complete, secs);
    fflush(stdout); /* before the list on stderr, so that a terminal shows them in order */
    mig_print_listed(&r);

    t.cleaned = cleaned;
    if (totals != NULL)
        *totals = t;
    status = 0;
    if (t.failed || bad_source || r.v_missing || r.v_ttl || r.v_error)
        status = 1;
    else if (!complete)
        status = 3;
    if (status != 0)
        snprintf(why, whylen, "%s",
                 status == 3  ? "the migration was stopped before its end"
                 : bad_source ? "a source server failed: its keys were not all copied (rerun "
                                "with the same --checkpoint once it is back)"
                              : "some keys could not be copied (listed above)");

out:
    for (size_t k = 0; k < nw; k++) {
        for (size_t j = 0; j < nn; j++)
            if (w[k].dst[j] != NULL)
                r.drv->close(w[k].dst[j]);
        free(w[k].dst);
        free(w[k].broken_dst);
        mig_batch_free(&w[k].b);
    }
    free(w);
    for (size_t i = 0; i < no; i++) {
        if (r.src[i] != NULL)
            r.drv->close(r.src[i]);
        free(r.st[i].pairs);
        free(r.lost[i].pairs);
        free(r.source_err[i]);
    }
    for (size_t k = 0; k < r.nfailed_listed; k++) {
        free(r.failed[k].key);
        free(r.failed[k].err);
    }
    for (size_t k = 0; k < r.nmismatch_listed; k++) {
        free(r.mismatch[k].key);
        free(r.mismatch[k].err);
    }
    free(r.same);
    free(r.src);
    free(r.st);
    free(r.lost);
    free(r.source_failed);
    free(r.unlisted);
    free(r.source_err);
    side_free(&r.old);
    side_free(&r.neu);
    return status;
}

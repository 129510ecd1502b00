/*
 * fleet.c — a pool's membership from etcd (fleet.h; the contract is docs/FLEET.md).
 *
 * Per pool that names a "membership" key K, on the control thread's loop:
 * - the watch: a range of every key under K (K, K/pending, K/instances/...) at revision R, then
 *   a watch from R + 1. rev is the newest revision delivered; a lost watch is started again
 *   from rev + 1 after a backoff (100 ms doubling to 5 s), so no change is missed and none is
 *   replayed; a compacted start revision makes it range again.
 * - the record: K/instances/<id> under a lease of ttl seconds, kept alive every ttl/3; it is
 *   rewritten whenever a field changes (one put in flight at a time, the latest state wins). An
 *   unanswered keepalive (etcd stopped or partitioned) restarts the watch; a lost lease is
 *   granted again and the record put under the new one.
 * - the changes, each through reload.h (all or nothing): a document in K is applied when its
 *   epoch is newer than the one served; in K/pending it is prepared and held (reported as
 *   prepared) until the commit in K with the same epoch swaps it in, or the pending key goes
 *   (aborted). A direct document that removes servers waits membership_hold_down first.
 * Invariant: fp->held is this pool's reload held in m->held, or NULL; m->held_dropped clears it
 * when a later reload drops it.
 */
#include "fleet.h"
#include "etcd_http.h"
#include "reload.h"

#include <fleet_internal.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FIRST_READ_MS 3000      /* the blocking read at start */
#define REQUEST_MS 3000         /* each unary request: record, lease, range */
#define KEEPALIVE_ANSWER_MS 2000
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000

typedef struct fleet_pool {
    px_fleet *f;
    size_t index;           /* in m->pools */
    char *name;             /* copies: a reload frees the config they come from */
    char *endpoint, *url, *key, *pending_key, *record_key;
    int hold_down_ms;
    px_etcd *etcd;
    /* the watch */
    px_etcd_req *range, *watch;
    int64_t rev;            /* the newest revision delivered (0: range first) */
    uint64_t backoff_ms;
    uv_timer_t retry;
    bool watching;          /* the watch is created */
    /* the lease and the record */
    px_etcd_req *lease_req, *record_req;
    int64_t lease;
    uv_timer_t keepalive;
    uv_timer_t warm_end;    /* the record says "off" again when the warm-up window ends */
    bool dirty;             /* rec changed since the last put began */
    bool etcd_warned;       /* "etcd unreachable" logged once per outage */
    ch__fleet_record rec;
    /* the two-phase change */
    px_reload_held *held;
    int64_t held_epoch;
    /* flap damping: a direct document that removes servers, waiting */
    uv_timer_t hold;
    char *hold_doc;
    size_t hold_len;
    int64_t hold_rev;
    px_fleet_stats st;
} fleet_pool;

struct px_fleet {
    px_ctl *m;
    fleet_pool *pools;
    size_t n;
    int ttl_s;
    unsigned closing; /* timers still closing after px_fleet_stop: f is freed at 0 */
};

typedef struct boot_doc {
    char *text;
    size_t len;
    int64_t epoch;
} boot_doc;

struct px_fleet_boot {
    size_t n;       /* the config's pools */
    char **names;
    boot_doc *docs; /* text NULL: none read */
};

static int64_t unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t unix_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static px_shared_pool *served(const fleet_pool *fp)
{
    return &fp->f->m->pools[fp->index];
}

/* ---- the first read ------------------------------------------------------------------------------ */

/* K's document from etcd (blocking): 1 and *kv, 0 when K does not exist, -1 (why) when etcd
 * cannot be read. */
static int read_key(const char *endpoint, const char *key, ch__etcd_kv *kv, char *why,
                    size_t whylen)
{
    char *body = ch__etcd_range_body(key, false);
    size_t len = 0;
    char *ans = body != NULL ? px_etcd_post_sync(endpoint, "/v3/kv/range", body, FIRST_READ_MS,
                                                 &len, why, whylen)
                             : NULL;
    free(body);
    if (ans == NULL)
        return -1;
    int64_t rev;
    ch__etcd_kv *kvs = NULL;
    size_t n = 0;
    int rc = ch__etcd_parse_range(ans, len, &rev, &kvs, &n, why, whylen);
    free(ans);
    if (rc != 0)
        return -1;
    if (n == 0)
        return 0;
    *kv = kvs[0];
    kvs[0].key = kvs[0].value = NULL;
    ch__etcd_kvs_free(kvs, n);
    return 1;
}

void px_fleet_boot_free(px_fleet_boot *b)
{
    for (size_t i = 0; b != NULL && i < b->n; i++) {
        free(b->names[i]);
        free(b->docs[i].text);
    }
    if (b != NULL) {
        free(b->names);
        free(b->docs);
    }
    free(b);
}

int px_fleet_bootstrap(ch_config *cfg, px_log *log, px_fleet_boot **out)
{
    *out = NULL;
    size_t any = 0;
    for (size_t i = 0; i < cfg->npools; i++)
        any += cfg->pools[i].membership != NULL;
    if (any == 0)
        return 0;
    px_fleet_boot *b = calloc(1, sizeof(*b));
    if (b == NULL || (b->names = calloc(cfg->npools, sizeof(*b->names))) == NULL ||
        (b->docs = calloc(cfg->npools, sizeof(*b->docs))) == NULL) {
        px_fleet_boot_free(b);
        PX_LOGL(log, PX_LOG_ERR, "out of memory");
        return -1;
    }
    b->n = cfg->npools;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < cfg->npools; i++) {
        ch_conf_pool *pc = &cfg->pools[i];
        if ((b->names[i] = strdup(pc->name)) == NULL)
            rc = -1;
        if (rc != 0 || pc->membership == NULL)
            continue;
        char why[600];
        ch__etcd_kv kv = {0};
        int got = read_key(pc->membership_endpoint, pc->membership_key, &kv, why, sizeof(why));
        if (got == 0)
            snprintf(why, sizeof(why), "%s does not exist yet", pc->membership);
        int64_t epoch = 0;
        ch_config_error err;
        if (got == 1 &&
            ch_config_membership_doc(pc, pc->membership, kv.value, kv.len, &epoch, &err) != 0) {
            char msg[600];
            snprintf(why, sizeof(why), "its document is refused: %s",
                     ch_config_error_str(&err, msg, sizeof(msg)));
            got = -1;
        }
        if (got == 1) {
            b->docs[i] = (boot_doc){kv.value, kv.len, epoch != 0 ? epoch : kv.mod_rev};
            kv.value = NULL;
            PX_LOGL(log, PX_LOG_NOTICE, "pool %s: membership from %s: epoch %lld, %zu servers",
                    pc->name, pc->membership, (long long)b->docs[i].epoch, pc->nservers);
        } else if (pc->nservers > 0) {
            PX_LOGL(log, PX_LOG_WARN,
                    "pool %s: cannot read its membership from %s (%s): serving the file's %zu "
                    "servers until etcd answers",
                    pc->name, pc->membership, why, pc->nservers);
        } else {
            PX_LOGL(log, PX_LOG_ERR,
                    "pool %s: cannot read its membership from %s (%s), and the file has no "
                    "servers",
                    pc->name, pc->membership, why);
            rc = -1;
        }
        free(kv.key);
        free(kv.value);
    }
    if (rc != 0) {
        px_fleet_boot_free(b);
        return -1;
    }
    *out = b;
    return 0;
}

/* ---- the record ------------------------------------------------------------------------------------ */

static void record_put(fleet_pool *fp);

static void record_done(void *arg, bool ok, const char *body, size_t len, const char *why)
{
    fleet_pool *fp = arg;
    fp->record_req = NULL;
    char w[300];
    int64_t rev;
    if (ok && ch__etcd_parse_write(body, len, &rev, w, sizeof(w)) != 0) {
        ok = false;
        why = w;
    }
    if (!ok) {
        PX_LOG(fp->f->m, PX_LOG_WARN, "fleet: pool %s: cannot write its record %s: %s", fp->name,
               fp->record_key, why);
        fp->dirty = true; /* the next keepalive tries again */
        return;
    }
    if (fp->dirty)
        record_put(fp);
}

/* Puts the record under the lease now, or marks it for when the put in flight ends or a lease
 * is granted. */
static void record_put(fleet_pool *fp)
{
    if (fp->lease == 0 || fp->record_req != NULL) {
        fp->dirty = true;
        return;
    }
    char *json = ch__fleet_record_json(&fp->rec);
    char *body = json != NULL ? ch__etcd_put_body(fp->record_key, json, strlen(json), fp->lease)
                              : NULL;
    if (body != NULL)
        fp->record_req = px_etcd_post(fp->etcd, "/v3/kv/put", body, REQUEST_MS, record_done, fp);
    fp->dirty = fp->record_req == NULL; /* not started: the next keepalive tries again */
    free(json);
    free(body);
}

static void record_served(fleet_pool *fp);

static void warm_end_cb(uv_timer_t *t)
{
    fleet_pool *fp = t->data;
    record_served(fp);
    record_put(fp);
}

/* The record's view of what the pool serves now. */
static void record_served(fleet_pool *fp)
{
    const px_shared_pool *sp = served(fp);
    ch__fleet_record *r = &fp->rec;
    if (r->epoch != sp->epoch || r->since_unix_ms == 0)
        r->since_unix_ms = unix_ms();
    r->epoch = sp->epoch;
    snprintf(r->membership, sizeof(r->membership), "%s", ch_membership_version(sp->members));
    r->servers = (int64_t)sp->nservers;
    snprintf(r->warm_up, sizeof(r->warm_up), "off");
    r->warm_up_until_unix_ms = 0;
    if (sp->warm_from == PX_WARM_FROM_NOW || sp->warm_from == PX_WARM_FROM_KEPT) {
        uint64_t end = sp->warm.start_ms + sp->warm.ramp_ms + sp->warm.warm_ms;
        uint64_t now = uv_hrtime() / 1000000u;
        if (end > now) {
            snprintf(r->warm_up, sizeof(r->warm_up), "%s", sp->warm.ramp_ms > 0 ? "ramp" : "warm");
            r->warm_up_until_unix_ms = unix_ms() + (int64_t)(end - now);
            uv_timer_start(&fp->warm_end, warm_end_cb, end - now + 1, 0);
        }
    }
}

/* ---- the changes ------------------------------------------------------------------------------------ */

static void refused(fleet_pool *fp, int64_t epoch, bool stale, const char *why)
{
    if (stale)
        fp->st.refused_stale++;
    else
        fp->st.refused_invalid++;
    if (epoch > fp->rec.seen_epoch)
        fp->rec.seen_epoch = epoch;
    snprintf(fp->rec.refused, sizeof(fp->rec.refused), "%s", why);
    PX_LOG(fp->f->m, PX_LOG_ERR, "fleet: pool %s: %s refused, still serving epoch %lld: %s",
           fp->name, fp->key, (long long)served(fp)->epoch, why);
    record_put(fp);
}

/* Applies a document of K now (a direct change, or a held-down one whose time came). */
static void apply_now(fleet_pool *fp, const char *text, size_t len, int64_t mod_rev,
                      const char *trigger)
{
    px_ctl *m = fp->f->m;
    px_reload_doc *docs = calloc(m->npools, sizeof(*docs));
    if (docs == NULL) {
        refused(fp, mod_rev, false, "out of memory");
        return;
    }
    docs[fp->index] = (px_reload_doc){text, len, mod_rev};
    px_reload_opts opt = PX_RELOAD_OPTS_POOLS;
    px_buf result = {0};
    int rc = px_reload_prepare(m, trigger, &opt, docs, NULL, &result);
    free(docs);
    char why[300];
    snprintf(why, sizeof(why), "%.*s", (int)result.len, result.p != NULL ? result.p : "");
    px_buf_free(&result);
    if (rc != PX_RELOAD_OK && rc != PX_RELOAD_PARTIAL) {
        refused(fp, mod_rev, rc == PX_RELOAD_STALE, why);
        return;
    }
    fp->st.applied++;
    fp->rec.refused[0] = '\0';
    if (served(fp)->epoch > fp->rec.seen_epoch)
        fp->rec.seen_epoch = served(fp)->epoch;
    fp->rec.swapped_unix_us = unix_us();
    record_served(fp);
    record_put(fp);
}

/* Whether doc (a parsed document's pool) lacks a server the pool serves (by address). */
static bool removes(const fleet_pool *fp, const ch_conf_pool *doc)
{
    const px_shared_pool *sp = served(fp);
    for (size_t i = 0; i < sp->nservers; i++) {
        bool found = false;
        for (size_t j = 0; j < doc->nservers && !found; j++)
            found = strcmp(sp->servers[i]->addr, doc->servers[j].addr) == 0;
        if (!found)
            return true;
    }
    return false;
}

static void hold_clear(fleet_pool *fp)
{
    free(fp->hold_doc);
    fp->hold_doc = NULL;
    fp->hold_len = 0;
    fp->st.held_down = false;
    uv_timer_stop(&fp->hold);
}

static void hold_cb(uv_timer_t *t)
{
    fleet_pool *fp = t->data;
    char *doc = fp->hold_doc;
    size_t len = fp->hold_len;
    int64_t rev = fp->hold_rev;
    fp->hold_doc = NULL;
    hold_clear(fp);
    PX_LOG(fp->f->m, PX_LOG_NOTICE,
           "fleet: pool %s: the hold-down (%d ms) is over and the servers did not come back: "
           "applying revision %lld",
           fp->name, fp->hold_down_ms, (long long)rev);
    apply_now(fp, doc, len, rev, "fleet: a document of etcd, after its hold-down");
    free(doc);
}

/* K was written: its document, at revision mod_rev. */
static void on_committed(fleet_pool *fp, const char *text, size_t len, int64_t mod_rev)
{
    px_ctl *m = fp->f->m;
    const px_shared_pool *sp = served(fp);
    ch_config *doc = NULL;
    int64_t epoch = 0;
    ch_config_error err;
    if (ch_config_membership_parse(fp->name, fp->url, text, len, &doc, &epoch, &err) != 0) {
        char msg[600];
        refused(fp, mod_rev, false, ch_config_error_str(&err, msg, sizeof(msg)));
        return;
    }
    if (epoch == 0)
        epoch = mod_rev;
    if (epoch <= sp->epoch) {
        /* The one served (a range or watch that repeats it) is not news. */
        bool same = epoch == sp->epoch && sp->doc != NULL && sp->doclen == len &&
                    memcmp(sp->doc, text, len) == 0;
        if (!same) {
            char why[200];
            snprintf(why, sizeof(why), "epoch %lld is not newer than %lld, the one served",
                     (long long)epoch, (long long)sp->epoch);
            refused(fp, epoch, true, why);
        }
        ch_config_free(doc);
        return;
    }
    if (epoch > fp->rec.seen_epoch)
        fp->rec.seen_epoch = epoch;
    if (fp->held != NULL && fp->held_epoch == epoch) { /* the commit of a prepared change */
        px_reload_held *h = fp->held;
        fp->held = NULL;
        px_buf result = {0};
        (void)px_reload_commit(m, h, &result);
        fp->rec.swapped_unix_us = unix_us();
        PX_LOG(m, PX_LOG_NOTICE, "fleet: pool %s: epoch %lld committed and swapped in: %.*s",
               fp->name, (long long)epoch, (int)result.len, result.p != NULL ? result.p : "");
        px_buf_free(&result);
        fp->st.applied++;
        fp->rec.prepared = 0;
        fp->rec.refused[0] = '\0';
        record_served(fp);
        record_put(fp);
        hold_clear(fp);
        ch_config_free(doc);
        return;
    }
    bool removing = fp->hold_down_ms > 0 && removes(fp, &doc->pools[0]);
    ch_config_free(doc);
    if (removing) {
        char *copy = malloc(len + 1);
        if (copy == NULL) {
            refused(fp, epoch, false, "out of memory");
            return;
        }
        memcpy(copy, text, len);
        copy[len] = '\0';
        bool waiting = fp->hold_doc != NULL;
        free(fp->hold_doc);
        fp->hold_doc = copy;
        fp->hold_len = len;
        fp->hold_rev = mod_rev;
        fp->st.held_down = true;
        if (!waiting) {
            uv_timer_start(&fp->hold, hold_cb, (uint64_t)fp->hold_down_ms, 0);
            PX_LOG(m, PX_LOG_NOTICE,
                   "fleet: pool %s: epoch %lld removes servers: held down for %d ms "
                   "(membership_hold_down) in case they come back",
                   fp->name, (long long)epoch, fp->hold_down_ms);
        }
        return;
    }
    if (fp->hold_doc != NULL) {
        fp->st.damped++;
        PX_LOG(m, PX_LOG_NOTICE,
               "fleet: pool %s: epoch %lld brings back the servers a held-down document "
               "removed: that removal is not applied",
               fp->name, (long long)epoch);
        hold_clear(fp);
    }
    apply_now(fp, text, len, mod_rev, "fleet: a document of etcd");
}

/* K/pending was written: prepare its epoch (its revision) and hold it for the commit. */
static void on_pending(fleet_pool *fp, const char *text, size_t len, int64_t mod_rev)
{
    px_ctl *m = fp->f->m;
    if (mod_rev <= served(fp)->epoch || (fp->held != NULL && fp->held_epoch == mod_rev))
        return;
    px_reload_doc *docs = calloc(m->npools, sizeof(*docs));
    px_reload_held *h = NULL;
    px_buf result = {0};
    px_reload_opts opt = PX_RELOAD_OPTS_POOLS;
    char trigger[80];
    snprintf(trigger, sizeof(trigger), "fleet: pending epoch %lld", (long long)mod_rev);
    int rc = PX_RELOAD_FAILED;
    if (docs != NULL) {
        docs[fp->index] = (px_reload_doc){text, len, mod_rev};
        rc = px_reload_prepare(m, trigger, &opt, docs, &h, &result);
    }
    free(docs);
    if (rc == PX_RELOAD_OK) {
        fp->held = h;
        fp->held_epoch = mod_rev;
        fp->rec.prepared = mod_rev;
        fp->rec.prepare_failed = 0;
        fp->rec.prepare_error[0] = '\0';
        PX_LOG(m, PX_LOG_NOTICE, "fleet: pool %s: pending epoch %lld prepared; waiting for its "
               "commit", fp->name, (long long)mod_rev);
    } else {
        fp->rec.prepared = 0;
        fp->rec.prepare_failed = mod_rev;
        snprintf(fp->rec.prepare_error, sizeof(fp->rec.prepare_error), "%.*s", (int)result.len,
                 result.p != NULL ? result.p : "out of memory");
        PX_LOG(m, PX_LOG_ERR, "fleet: pool %s: cannot prepare pending epoch %lld: %s",
               fp->name, (long long)mod_rev, fp->rec.prepare_error);
    }
    px_buf_free(&result);
    record_put(fp);
}

/* K/pending went away without a commit of ours: the change was aborted (or committed and its
 * K event already seen). */
static void on_pending_gone(fleet_pool *fp)
{
    if (fp->held == NULL)
        return;
    px_reload_held *h = fp->held;
    fp->held = NULL;
    px_reload_abort(fp->f->m, h);
    PX_LOG(fp->f->m, PX_LOG_NOTICE, "fleet: pool %s: pending epoch %lld withdrawn: dropped",
           fp->name, (long long)fp->held_epoch);
    fp->rec.prepared = 0;
    record_put(fp);
}

static void held_dropped(void *arg, const char *trigger)
{
    px_fleet *f = arg;
    for (size_t i = 0; i < f->n; i++) {
        fleet_pool *fp = &f->pools[i];
        if (fp->held == NULL || f->m->held == fp->held)
            continue;
        fp->held = NULL; /* reload.c freed it */
        fp->rec.prepared = 0;
        fp->rec.prepare_failed = fp->held_epoch;
        snprintf(fp->rec.prepare_error, sizeof(fp->rec.prepare_error),
                 "dropped by a later reload (%s)", trigger);
        record_put(fp);
    }
}

/* One key-value of K's prefix, from the first range or a watch event. */
static void on_kv(fleet_pool *fp, const ch__etcd_kv *kv, bool deleted)
{
    if (strcmp(kv->key, fp->key) == 0) {
        if (deleted)
            PX_LOG(fp->f->m, PX_LOG_WARN, "fleet: pool %s: %s was deleted: keeping epoch %lld",
                   fp->name, fp->key, (long long)served(fp)->epoch);
        else
            on_committed(fp, kv->value, kv->len, kv->mod_rev);
    } else if (strcmp(kv->key, fp->pending_key) == 0) {
        if (deleted)
            on_pending_gone(fp);
        else
            on_pending(fp, kv->value, kv->len, kv->mod_rev);
    } /* else: an instance record, or a key that only shares the prefix */
}

/* ---- the watch ----------------------------------------------------------------------------------- */

static void watch_start(fleet_pool *fp);

static void etcd_lost(fleet_pool *fp, const char *what, const char *why)
{
    if (!fp->etcd_warned)
        PX_LOG(fp->f->m, PX_LOG_WARN,
               "fleet: pool %s: %s: %s; serving epoch %lld, retrying (logged once until etcd "
               "answers)",
               fp->name, what, why, (long long)served(fp)->epoch);
    fp->etcd_warned = true;
}

/* Stops the watch (or its range) and doubles the backoff. */
static void watch_retry(fleet_pool *fp)
{
    if (fp->watch != NULL) {
        px_etcd_cancel(fp->watch);
        fp->watch = NULL;
    }
    if (fp->range != NULL) {
        px_etcd_cancel(fp->range);
        fp->range = NULL;
    }
    fp->watching = false;
    fp->st.watch_restarts++;
    fp->backoff_ms = fp->backoff_ms == 0 ? BACKOFF_MIN_MS
                     : fp->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
                                                           : fp->backoff_ms * 2;
}

static void retry_cb(uv_timer_t *t)
{
    watch_start(t->data);
}

/* Starts the watch again after the backoff, from rev + 1 (or with a range when rev is 0). */
static void watch_again(fleet_pool *fp)
{
    watch_retry(fp);
    uv_timer_start(&fp->retry, retry_cb, fp->backoff_ms, 0);
}

static void watch_line(void *arg, const char *line, size_t len)
{
    fleet_pool *fp = arg;
    ch__etcd_watch_msg msg;
    char why[300];
    if (ch__etcd_parse_watch(line, len, &msg, why, sizeof(why)) != 0) {
        etcd_lost(fp, "the watch failed", why);
        watch_again(fp);
        return;
    }
    if (msg.compact_rev > 0 || msg.canceled) {
        PX_LOG(fp->f->m, PX_LOG_WARN,
               "fleet: pool %s: the watch from revision %lld was %s: reading %s again",
               fp->name, (long long)fp->rev + 1,
               msg.compact_rev > 0 ? "compacted away" : "canceled", fp->key);
        fp->rev = 0;
        ch__etcd_watch_msg_free(&msg);
        watch_again(fp);
        return;
    }
    if (msg.created && msg.rev < fp->rev) {
        /* A watch from a revision etcd has not reached would never deliver what is written
         * below it: etcd lost its data or is another cluster. */
        PX_LOG(fp->f->m, PX_LOG_WARN,
               "fleet: pool %s: etcd is at revision %lld, behind the %lld seen: its data was "
               "lost or replaced; reading %s again (documents need an epoch above %lld to apply)",
               fp->name, (long long)msg.rev, (long long)fp->rev, fp->key,
               (long long)served(fp)->epoch);
        fp->rev = 0;
        ch__etcd_watch_msg_free(&msg);
        watch_again(fp);
        return;
    }
    if (msg.created) {
        fp->watching = true;
        fp->backoff_ms = 0;
        if (fp->etcd_warned)
            PX_LOG(fp->f->m, PX_LOG_NOTICE, "fleet: pool %s: etcd answers again; watching %s "
                   "from revision %lld", fp->name, fp->key, (long long)fp->rev + 1);
        fp->etcd_warned = false;
    }
    for (size_t i = 0; i < msg.nevents; i++) {
        on_kv(fp, &msg.events[i].kv, msg.events[i].deleted);
        if (msg.events[i].kv.mod_rev > fp->rev)
            fp->rev = msg.events[i].kv.mod_rev;
    }
    if (msg.rev > fp->rev && (msg.nevents > 0 || !msg.created))
        fp->rev = msg.rev; /* events and progress notices: everything up to it is delivered */
    ch__etcd_watch_msg_free(&msg);
}

static void watch_done(void *arg, bool ok, const char *body, size_t len, const char *why)
{
    (void)body, (void)len;
    fleet_pool *fp = arg;
    fp->watch = NULL;
    etcd_lost(fp, "the watch ended", ok ? "etcd closed it" : why);
    watch_again(fp);
}

static void range_done(void *arg, bool ok, const char *body, size_t len, const char *why)
{
    fleet_pool *fp = arg;
    fp->range = NULL;
    char w[300];
    int64_t rev = 0;
    ch__etcd_kv *kvs = NULL;
    size_t n = 0;
    if (ok && ch__etcd_parse_range(body, len, &rev, &kvs, &n, w, sizeof(w)) != 0) {
        ok = false;
        why = w;
    }
    if (!ok) {
        etcd_lost(fp, "cannot read its key", why);
        watch_again(fp);
        return;
    }
    /* K before K/pending (they sort so): a commit seen first makes the pending key old news. */
    for (size_t i = 0; i < n; i++)
        on_kv(fp, &kvs[i], false);
    bool pending = false;
    for (size_t i = 0; i < n; i++)
        pending |= strcmp(kvs[i].key, fp->pending_key) == 0;
    if (!pending)
        on_pending_gone(fp);
    ch__etcd_kvs_free(kvs, n);
    fp->rev = rev;
    watch_start(fp);
}

static void watch_start(fleet_pool *fp)
{
    if (fp->rev == 0) {
        char *body = ch__etcd_range_body(fp->key, true);
        fp->range = body != NULL ? px_etcd_post(fp->etcd, "/v3/kv/range", body, REQUEST_MS,
                                                range_done, fp)
                                 : NULL;
        free(body);
    } else {
        char *body = ch__etcd_watch_body(fp->key, fp->rev + 1);
        fp->watch = body != NULL ? px_etcd_stream(fp->etcd, "/v3/watch", body, REQUEST_MS,
                                                  watch_line, watch_done, fp)
                                 : NULL;
        free(body);
    }
    if (fp->range == NULL && fp->watch == NULL) {
        etcd_lost(fp, "cannot start a request", "out of memory");
        watch_again(fp);
    }
}

/* ---- the lease ----------------------------------------------------------------------------------- */

/* A grant (the request began with no lease) or a keepalive answered, or failed. */
static void lease_done(void *arg, bool ok, const char *body, size_t len, const char *why)
{
    fleet_pool *fp = arg;
    fp->lease_req = NULL;
    bool grant = fp->lease == 0;
    char w[300];
    int64_t id = 0, ttl = 0;
    if (ok && ch__etcd_parse_lease(body, len, &id, &ttl, w, sizeof(w)) != 0) {
        ok = false;
        why = w;
    }
    if (!ok) {
        etcd_lost(fp, grant ? "cannot grant its lease" : "its lease keepalive failed", why);
        /* etcd did not answer a keepalive in time: a watch on it may be silent too. */
        if (!grant && fp->watching)
            watch_again(fp);
        return; /* the next tick grants or keeps alive again */
    }
    if (grant) {
        fp->lease = id;
        PX_LOG(fp->f->m, PX_LOG_NOTICE, "fleet: pool %s: registered as %s (lease %lld, %d s)",
               fp->name, fp->record_key, (long long)id, fp->f->ttl_s);
        fp->dirty = true;
    } else if (ttl <= 0) {
        PX_LOG(fp->f->m, PX_LOG_WARN, "fleet: pool %s: its lease %lld expired: registering "
               "again", fp->name, (long long)fp->lease);
        fp->lease = 0;
        return; /* granted again at the next tick */
    }
    if (fp->dirty)
        record_put(fp);
}

static void keepalive_cb(uv_timer_t *t)
{
    fleet_pool *fp = t->data;
    if (fp->lease_req != NULL)
        return;
    char *body = fp->lease == 0 ? ch__etcd_grant_body(fp->f->ttl_s)
                                : ch__etcd_keepalive_body(fp->lease);
    if (body != NULL)
        fp->lease_req = px_etcd_post(fp->etcd, fp->lease == 0 ? "/v3/lease/grant"
                                                              : "/v3/lease/keepalive",
                                     body, fp->lease == 0 ? REQUEST_MS : KEEPALIVE_ANSWER_MS,
                                     lease_done, fp);
    free(body);
}

/* ---- start and stop ---------------------------------------------------------------------------------- */

static char *join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 1;
    char *s = malloc(n);
    if (s != NULL)
        snprintf(s, n, "%s%s", a, b);
    return s;
}

int px_fleet_start(px_ctl *m, px_fleet_boot *boot, const px_fleet_options *opt)
{
    if (boot == NULL)
        return 0;
    px_fleet *f = calloc(1, sizeof(*f));
    size_t n = 0;
    for (size_t i = 0; i < m->npools; i++)
        n += m->pools[i].conf->membership != NULL;
    if (f == NULL || (f->pools = calloc(n, sizeof(*f->pools))) == NULL) {
        free(f);
        px_fleet_boot_free(boot);
        PX_LOG(m, PX_LOG_ERR, "fleet: out of memory");
        return -1;
    }
    f->m = m;
    f->ttl_s = opt->ttl_s > 0 ? opt->ttl_s : PX_FLEET_DEFAULT_TTL_S;
    m->fleet = f;
    m->held_dropped = held_dropped;
    m->held_dropped_arg = f;
    char host[100] = "localhost";
    (void)gethostname(host, sizeof(host) - 1);
    int rc = 0;
    for (size_t i = 0; i < m->npools; i++) {
        px_shared_pool *sp = &m->pools[i];
        const ch_conf_pool *pc = sp->conf;
        if (pc->membership == NULL)
            continue;
        for (size_t k = 0; k < boot->n; k++) {
            if (strcmp(boot->names[k], pc->name) == 0 && boot->docs[k].text != NULL) {
                sp->doc = boot->docs[k].text;
                sp->doclen = boot->docs[k].len;
                sp->epoch = boot->docs[k].epoch;
                boot->docs[k].text = NULL;
            }
        }
        fleet_pool *fp = &f->pools[f->n++];
        fp->f = f;
        fp->index = i;
        fp->name = strdup(pc->name);
        fp->endpoint = strdup(pc->membership_endpoint);
        fp->hold_down_ms = pc->membership_hold_down_ms;
        uv_timer_init(m->loop, &fp->retry);
        uv_timer_init(m->loop, &fp->keepalive);
        uv_timer_init(m->loop, &fp->hold);
        uv_timer_init(m->loop, &fp->warm_end);
        fp->retry.data = fp->keepalive.data = fp->hold.data = fp->warm_end.data = fp;
        ch__fleet_record *r = &fp->rec;
        if (opt->id != NULL)
            snprintf(r->id, sizeof(r->id), "%s", opt->id);
        else
            snprintf(r->id, sizeof(r->id), "%s:%ld", host, (long)getpid());
        snprintf(r->kind, sizeof(r->kind), "chash-proxy");
        snprintf(r->pool, sizeof(r->pool), "%s", pc->name);
        snprintf(r->host, sizeof(r->host), "%s", host);
        r->pid = (int64_t)getpid();
        r->seen_epoch = sp->epoch;
        record_served(fp);
        char *prefix = ch__fleet_instances_prefix(pc->membership_key);
        fp->url = strdup(pc->membership);
        fp->key = strdup(pc->membership_key);
        fp->pending_key = ch__fleet_pending_key(pc->membership_key);
        fp->record_key = prefix != NULL ? join(prefix, r->id) : NULL;
        free(prefix);
        fp->etcd = px_etcd_new(m->loop, pc->membership_endpoint);
        if (fp->name == NULL || fp->endpoint == NULL || fp->url == NULL || fp->key == NULL || fp->pending_key == NULL ||
            fp->record_key == NULL || fp->etcd == NULL) {
            rc = -1;
            continue;
        }
        watch_start(fp);
        keepalive_cb(&fp->keepalive); /* the grant */
        uint64_t every = (uint64_t)f->ttl_s * 1000u / 3u;
        uv_timer_start(&fp->keepalive, keepalive_cb, every, every);
    }
    px_fleet_boot_free(boot);
    if (rc != 0)
        PX_LOG(m, PX_LOG_ERR, "fleet: out of memory");
    return rc;
}

static void timer_closed(uv_handle_t *h)
{
    px_fleet *f = ((fleet_pool *)h->data)->f;
    if (--f->closing == 0) {
        free(f->pools);
        free(f);
    }
}

void px_fleet_stop(px_ctl *m)
{
    px_fleet *f = m->fleet;
    if (f == NULL)
        return;
    m->fleet = NULL;
    m->held_dropped = NULL;
    for (size_t i = 0; i < f->n; i++) {
        fleet_pool *fp = &f->pools[i];
        if (fp->held != NULL) {
            px_reload_abort(m, fp->held);
            fp->held = NULL;
        }
        if (fp->lease != 0) { /* the record goes now, not a TTL later */
            char body[64], why[200];
            size_t len;
            snprintf(body, sizeof(body), "{\"ID\":\"%lld\"}", (long long)fp->lease);
            char *ans = px_etcd_post_sync(fp->endpoint, "/v3/lease/revoke", body, 1000, &len, why, sizeof(why));
            free(ans);
        }
        px_etcd_free(fp->etcd);
        uv_timer_t *timers[] = {&fp->retry, &fp->keepalive, &fp->hold, &fp->warm_end};
        for (size_t k = 0; k < sizeof(timers) / sizeof(timers[0]); k++) {
            f->closing++;
            uv_close((uv_handle_t *)timers[k], timer_closed);
        }
        free(fp->name);
        free(fp->endpoint);
        free(fp->url);
        free(fp->key);
        free(fp->pending_key);
        free(fp->record_key);
        free(fp->hold_doc);
    }
    if (f->closing == 0) {
        free(f->pools);
        free(f);
    }
}

bool px_fleet_stats_get(const px_ctl *m, size_t i, px_fleet_stats *out)
{
    const px_fleet *f = m->fleet;
    for (size_t k = 0; f != NULL && k < f->n; k++) {
        const fleet_pool *fp = &f->pools[k];
        if (fp->index != i)
            continue;
        *out = fp->st;
        out->epoch = m->pools[i].epoch;
        out->seen_epoch = fp->rec.seen_epoch;
        out->prepared = fp->rec.prepared;
        out->etcd_up = fp->watching && fp->lease != 0 && !fp->etcd_warned;
        return true;
    }
    return false;
}

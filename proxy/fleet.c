/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet.c — a pool's membership from etcd (fleet.h; the contract is docs/FLEET.md).
 *
 * Per pool that names a "membership" key K, on the control thread's loop:
 * - the watch: a range of every key under K (K, K/pending, K/instances/..., K/lost/...) at
 *   revision R, then a watch from R + 1. rev is the newest revision delivered; a lost watch is
 *   started again from rev + 1 after a backoff (100 ms doubling to 5 s), so no change is missed
 *   and none is replayed; a compacted start revision makes it range again.
 * - the record: K/instances/<id> under a lease of ttl seconds, kept alive every ttl/3 by the
 *   lease keeper's thread (lease.h), so that no work on this loop delays a keepalive; it is
 *   rewritten whenever a field changes (one put in flight at a time, the latest state wins). An
 *   unanswered keepalive (etcd stopped or partitioned) restarts the watch; a lost lease is
 *   granted again (here) and the record put under the new one.
 * - the changes, each through reload.h (all or nothing): a document in K is applied when its
 *   epoch is newer than the one served; in K/pending it is prepared and held (reported as
 *   prepared) until the commit in K with the same epoch swaps it in, or the pending key goes
 *   (aborted). A direct document that removes servers waits membership_hold_down first.
 * - the fence (docs/FLEET.md, "Fencing"): the pool's membership is current while
 *       lease != 0, registered == synced == lease, now < lease_until_ns,
 *       and no prepared change waits on a watch that is down;
 *   publish() hands what this loop knows to the workers (px_shared_pool.serve_until_ns), the
 *   keeper the lease's deadline (px_shared_pool.lease_until_ns), and the workers refuse
 *   requests past the earlier by their own clock. lease_until_ns is the send time of the last
 *   answered grant or keepalive plus the TTL etcd gave, less px_fence_margin_ns: etcd starts a
 *   lease's TTL when it receives the request, after it was sent, so the instance fences before
 *   etcd can expire the lease, and `chash fleet apply` commits without an instance only once
 *   its record (under that lease) is gone. After a lapse the instance must register again (a record put
 *   under its lease: "registered") and then read K completely (a range begun after that put:
 *   "synced") before it serves: any commit from then on waits for it.
 * Invariant: fp->held is this pool's reload held in m->held, or NULL; m->held_dropped clears it
 * when a later reload drops it.
 */
#include "fleet.h"
#include "etcd_http.h"
#include "fence.h"
#include "lease.h"
#include "reload.h"

#include <etcd_msg.h>
#include <fleet_record.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FIRST_READ_MS 3000      /* each blocking request at start: grant, record, read */
#define REQUEST_MS 3000         /* each unary request: record, lease, range */
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000

typedef struct fleet_pool {
    px_fleet *f;
    size_t index;           /* in m->pools */
    char *name;             /* copies: a reload frees the config they come from */
    char *endpoint, *url, *key, *pending_key, *record_key, *lost_key;
    int hold_down_ms;
    px_etcd *etcd;
    /* the watch */
    px_etcd_req *range, *watch;
    int64_t rev;            /* the newest revision delivered (0: range first) */
    uint64_t backoff_ms;
    uv_timer_t retry;
    bool watching;          /* the watch is created */
    /* the lease and the record */
    px_etcd_req *grant_req, *record_req;
    uint64_t grant_sent_ns; /* when the grant in flight was sent */
    px_lease_slot *slot;    /* f->slots[this pool's index in f->pools] */
    uv_timer_t keepalive;
    uv_timer_t warm_end;    /* the record says "off" again when the warm-up window ends */
    bool dirty;             /* rec changed since the last put began */
    bool etcd_warned;       /* "etcd unreachable" logged once per outage */
    ch__fleet_record rec;
    /* the fence (fence.h; its lease is slot->lease, which the keeper keeps alive, and its
     * deadline served(fp)->lease_until_ns) */
    px_fence fence;
    uv_timer_t lapse;        /* at the lease's deadline */
    bool lost_marked;        /* K/lost/<id> exists (a commit went without us): deleted once current */
    px_etcd_req *lost_req;
    /* K/members/<id> under a lease of a day, kept alive at each keepalive tick */
    char *member_key;
    int64_t member_lease;
    px_etcd_req *member_req;
    enum { MEMBER_GRANT, MEMBER_PUT } member_step;
    bool member_unput;       /* granted, not yet put */
    /* the two-phase change */
    px_reload_held *held;    /* NULL, or held in the fence too (px_fence_hold) */
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
    px_lease_slot *slots; /* one per pool, as pools */
    px_lease_keeper *keeper;
    size_t n;
    int ttl_s;
    /* While a pool holds a prepared change: the heartbeat of the fence (publish()), after each
     * turn of the loop's I/O (check) and at least every PX_FENCE_HELD_TICK_MS (tick). */
    uv_check_t check;
    uv_timer_t tick;
    uint64_t last_beat_ns; /* the check's last run (uv_hrtime) */
    unsigned closing; /* handles still closing after px_fleet_stop: f is freed at 0 */
};

/* What the start did for a pool: its document, and the lease and record it registered with. */
typedef struct boot_doc {
    char *endpoint;          /* a copy, to revoke a lease not taken over */
    char *text;
    size_t len;
    int64_t epoch;
    int64_t lease;           /* 0: none granted */
    uint64_t lease_until_ns;
    bool registered;         /* the record was put under lease */
    int64_t member_lease;    /* K/members/<id>'s (0: not put) */
    bool synced;             /* and K read after that */
    ch__fleet_record rec;
} boot_doc;

struct px_fleet_boot {
    int ttl_s;
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

/* The record's fields that never change: who the instance is. */
static void record_identity(ch__fleet_record *r, const px_fleet_options *opt,
                            const ch_conf_pool *pc)
{
    char host[100] = "localhost";
    (void)gethostname(host, sizeof(host) - 1);
    host[sizeof(host) - 1] = '\0';
    memset(r, 0, sizeof(*r));
    if (opt->id != NULL)
        snprintf(r->id, sizeof(r->id), "%s", opt->id);
    else
        snprintf(r->id, sizeof(r->id), "%s:%ld", host, (long)getpid());
    snprintf(r->kind, sizeof(r->kind), "chash-proxy");
    snprintf(r->pool, sizeof(r->pool), "%s", pc->name);
    snprintf(r->host, sizeof(r->host), "%s", host);
    r->pid = (int64_t)getpid();
    snprintf(r->warm_up, sizeof(r->warm_up), "off");
    snprintf(r->on_fence, sizeof(r->on_fence), "%s",
             pc->membership_fenced == CH_CONF_FENCED_SERVE ? "serve" : "error");
    r->fenced = 1;
}

/* K/instances/<id>, malloc'd. */
static char *record_key_of(const char *key, const char *id)
{
    char *prefix = ch__fleet_instances_prefix(key);
    char *s = prefix != NULL ? ch__fleet_key(prefix, id) : NULL;
    free(prefix);
    return s;
}

/* One blocking request at start (body freed here): the answer, or NULL with why. */
static char *post_sync(const char *endpoint, const char *path, char *body, size_t *len,
                       char *why, size_t whylen)
{
    char *ans = body != NULL ? px_etcd_post_sync(endpoint, path, body, FIRST_READ_MS, len, why,
                                                 whylen)
                             : NULL;
    if (body == NULL)
        snprintf(why, whylen, "out of memory");
    free(body);
    return ans;
}

/* The member note of r, malloc'd (NULL: out of memory). */
static char *member_json(const ch__fleet_record *r)
{
    ch__fleet_member mb = {0};
    snprintf(mb.id, sizeof(mb.id), "%s", r->id);
    snprintf(mb.kind, sizeof(mb.kind), "%s", r->kind);
    snprintf(mb.host, sizeof(mb.host), "%s", r->host);
    mb.pid = r->pid;
    mb.since_unix_ms = unix_ms();
    return ch__fleet_member_json(&mb);
}

/* K/members/<id> under a lease of a day (blocking, at start). Best effort: without it, only
 * an apply running when this instance's record vanishes can name it; the keepalive ticks try
 * again. */
static void boot_member(const ch_conf_pool *pc, boot_doc *b)
{
    char why[300];
    size_t len = 0;
    char *ans = post_sync(pc->membership_endpoint, "/v3/lease/grant",
                          ch__etcd_grant_body(CH_FLEET_MEMBER_TTL_S), &len, why, sizeof(why));
    int64_t id = 0, ttl = 0;
    int rc = ans != NULL ? ch__etcd_parse_lease(ans, len, &id, &ttl, why, sizeof(why)) : -1;
    free(ans);
    if (rc != 0)
        return;
    char *prefix = ch__fleet_members_prefix(pc->membership_key);
    char *key = prefix != NULL ? ch__fleet_key(prefix, b->rec.id) : NULL;
    char *json = member_json(&b->rec);
    char *body = key != NULL && json != NULL ? ch__etcd_put_body(key, json, strlen(json), id)
                                             : NULL;
    free(prefix);
    free(key);
    free(json);
    ans = post_sync(pc->membership_endpoint, "/v3/kv/put", body, &len, why, sizeof(why));
    int64_t rev;
    if (ans != NULL && ch__etcd_parse_write(ans, len, &rev, why, sizeof(why)) == 0)
        b->member_lease = id;
    free(ans);
}

/* Registers pool pc's instance before its first read (blocking): a lease, then its record
 * under it, so that from the first read on no commit can go without this instance. 0, or -1
 * with why (b->lease may be set: the lease is then revoked with the others at shutdown, or
 * expires). */
static int boot_register(const ch_conf_pool *pc, int ttl_s, boot_doc *b, char *why,
                         size_t whylen)
{
    size_t len = 0;
    uint64_t sent = uv_hrtime();
    char *ans = post_sync(pc->membership_endpoint, "/v3/lease/grant", ch__etcd_grant_body(ttl_s),
                          &len, why, whylen);
    int64_t id = 0, ttl = 0;
    int rc = ans != NULL ? ch__etcd_parse_lease(ans, len, &id, &ttl, why, whylen) : -1;
    free(ans);
    if (rc != 0)
        return -1;
    if (ttl <= 0) {
        snprintf(why, whylen, "etcd granted lease %lld with no TTL", (long long)id);
        return -1;
    }
    b->lease = id;
    b->lease_until_ns = px_lease_deadline(sent, ttl);
    char *key = record_key_of(pc->membership_key, b->rec.id);
    char *json = ch__fleet_record_json(&b->rec);
    char *body = key != NULL && json != NULL ? ch__etcd_put_body(key, json, strlen(json), id)
                                             : NULL;
    free(key);
    free(json);
    ans = post_sync(pc->membership_endpoint, "/v3/kv/put", body, &len, why, whylen);
    int64_t rev;
    rc = ans != NULL ? ch__etcd_parse_write(ans, len, &rev, why, whylen) : -1;
    free(ans);
    b->registered = rc == 0;
    if (rc == 0)
        boot_member(pc, b);
    return rc;
}

/* K's document from etcd (blocking): 1 and *kv, 0 when K does not exist, -1 (why) when etcd
 * cannot be read. */
static int read_key(const char *endpoint, const char *key, ch__etcd_kv *kv, char *why,
                    size_t whylen)
{
    size_t len = 0;
    char *ans = post_sync(endpoint, "/v3/kv/range", ch__etcd_range_body(key, false), &len, why,
                          whylen);
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

/* Revokes lease (0: none) at endpoint, blocking at most a second: the keys under it go at
 * once, not a TTL later. */
static void lease_revoke(const char *endpoint, int64_t lease)
{
    if (lease == 0)
        return;
    char body[64], why[200];
    size_t len;
    snprintf(body, sizeof(body), "{\"ID\":\"%lld\"}", (long long)lease);
    free(px_etcd_post_sync(endpoint, "/v3/lease/revoke", body, 1000, &len, why, sizeof(why)));
}

void px_fleet_boot_free(px_fleet_boot *b)
{
    for (size_t i = 0; b != NULL && i < b->n; i++) {
        boot_doc *bd = &b->docs[i];
        if (bd->endpoint != NULL) { /* leases not taken over: their keys go now */
            lease_revoke(bd->endpoint, bd->lease);
            lease_revoke(bd->endpoint, bd->member_lease);
        }
        free(b->names[i]);
        free(bd->endpoint);
        free(bd->text);
    }
    if (b != NULL) {
        free(b->names);
        free(b->docs);
    }
    free(b);
}

/* Pool pc's membership document read from etcd (blocking) and applied to pc: 1 (*kv holds it,
 * *epoch its "epoch" or 0), 0 when its key does not exist, -1 when etcd cannot be read or the
 * document is refused; why says which for 0 and -1. *answered: whether etcd answered. */
static int read_doc(ch_conf_pool *pc, ch__etcd_kv *kv, int64_t *epoch, bool *answered,
                    char *why, size_t whylen)
{
    int got = read_key(pc->membership_endpoint, pc->membership_key, kv, why, whylen);
    *answered = got >= 0;
    if (got == 0)
        snprintf(why, whylen, "%s does not exist yet", pc->membership);
    ch_config_error err;
    if (got == 1 &&
        ch_config_membership_doc(pc, pc->membership, kv->value, kv->len, epoch, &err) != 0) {
        char msg[600];
        snprintf(why, whylen, "its document is refused: %s",
                 ch_config_error_str(&err, msg, sizeof(msg)));
        got = -1;
    }
    return got;
}

/* The rule the start and -t share for a pool whose document could not be had (unread says why:
 * etcd down, the key absent, the document refused): with servers in the file it starts fenced
 * (docs/FLEET.md, "Fencing"); without, it has nothing it could serve, not even fenced, nor a
 * placement to build, so it cannot start. 0, or -1 with the refusal, naming the pool, in why. */
static int startable_unread(const ch_conf_pool *pc, const char *unread, char *why, size_t whylen)
{
    if (pc->nservers > 0)
        return 0;
    snprintf(why, whylen, "pool %s: cannot read its membership from %s (%s), and the file has no "
             "servers", pc->name, pc->membership, unread);
    return -1;
}

int px_fleet_check(ch_config *cfg, char *why, size_t whylen)
{
    for (size_t i = 0; i < cfg->npools; i++) {
        ch_conf_pool *pc = &cfg->pools[i];
        if (pc->membership == NULL)
            continue;
        char unread[600];
        ch__etcd_kv kv = {0};
        int64_t epoch = 0;
        bool answered;
        int got = read_doc(pc, &kv, &epoch, &answered, unread, sizeof(unread));
        free(kv.key);
        free(kv.value);
        if (got != 1 && startable_unread(pc, unread, why, whylen) != 0)
            return -1;
    }
    return 0;
}

int px_fleet_bootstrap(ch_config *cfg, px_log *log, const px_fleet_options *opt,
                       px_fleet_boot **out)
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
    int ttl_s = opt->ttl_s > 0 ? opt->ttl_s : PX_FLEET_DEFAULT_TTL_S;
    b->ttl_s = ttl_s;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < cfg->npools; i++) {
        ch_conf_pool *pc = &cfg->pools[i];
        if ((b->names[i] = strdup(pc->name)) == NULL)
            rc = -1;
        if (rc != 0 || pc->membership == NULL)
            continue;
        boot_doc *bd = &b->docs[i];
        record_identity(&bd->rec, opt, pc);
        if ((bd->endpoint = strdup(pc->membership_endpoint)) == NULL) {
            PX_LOGL(log, PX_LOG_ERR, "out of memory");
            rc = -1;
            continue;
        }
        char why[600];
        ch__etcd_kv kv = {0};
        int64_t epoch = 0;
        int got = boot_register(pc, ttl_s, bd, why, sizeof(why));
        if (got == 0)
            got = read_doc(pc, &kv, &epoch, &bd->synced, why, sizeof(why));
        bool serve = pc->membership_fenced == CH_CONF_FENCED_SERVE;
        char no[800];
        if (got == 1) {
            bd->text = kv.value;
            bd->len = kv.len;
            bd->epoch = epoch != 0 ? epoch : kv.mod_rev;
            kv.value = NULL;
            PX_LOGL(log, PX_LOG_NOTICE, "pool %s: membership from %s: epoch %lld, %zu servers",
                    pc->name, pc->membership, (long long)bd->epoch, pc->nservers);
        } else if (startable_unread(pc, why, no, sizeof(no)) != 0) {
            PX_LOGL(log, PX_LOG_ERR, "%s", no);
            rc = -1;
        } else if (serve) {
            PX_LOGL(log, PX_LOG_WARN,
                    "pool %s: cannot read its membership from %s (%s): serving the file's %zu "
                    "servers until etcd answers (membership_fenced: serve)",
                    pc->name, pc->membership, why, pc->nservers);
        } else {
            bd->synced = false;
            PX_LOGL(log, PX_LOG_WARN,
                    "pool %s: cannot read its membership from %s (%s): refusing its requests "
                    "until etcd answers (the file's %zu servers are not known to be current; "
                    "membership_fenced: serve would serve them)",
                    pc->name, pc->membership, why, pc->nservers);
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
static void publish(fleet_pool *fp);
static void resync(fleet_pool *fp);

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
    bool read_again;
    if (px_fence_record_written(&fp->fence, &read_again)) {
        if (read_again)
            resync(fp);
        publish(fp);
    }
    if (fp->dirty)
        record_put(fp);
}

/* Puts the record under the lease now, or marks it for when the put in flight ends or a lease
 * is granted. */
static void record_put(fleet_pool *fp)
{
    int64_t lease = fp->fence.lease;
    if (lease == 0 || fp->record_req != NULL) {
        fp->dirty = true;
        return;
    }
    char *json = ch__fleet_record_json(&fp->rec);
    char *body = json != NULL ? ch__etcd_put_body(fp->record_key, json, strlen(json), lease)
                              : NULL;
    if (body != NULL)
        fp->record_req = px_etcd_post(fp->etcd, "/v3/kv/put", body, REQUEST_MS, record_done, fp);
    px_fence_record_sent(&fp->fence);
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

/* ---- the fence ------------------------------------------------------------------------------------- */

static void lapse_cb(uv_timer_t *t);
static void publish(fleet_pool *fp);

static void heartbeat_cb(uv_check_t *c)
{
    px_fleet *f = c->data;
    uint64_t now = uv_hrtime(), last = f->last_beat_ns;
    f->last_beat_ns = now;
    for (size_t i = 0; i < f->n; i++) {
        fleet_pool *fp = &f->pools[i];
        if (fp->held == NULL)
            continue;
        if (px_fence_beat(&fp->fence, now, last) && fp->range == NULL)
            resync(fp); /* fenced (publish) until a read of K begun now comes back */
        publish(fp);
    }
}

static void tick_cb(uv_timer_t *t)
{
    (void)t; /* only wakes the loop: the check after it beats */
}

/* Runs the heartbeat while some pool holds a prepared change, and only then. */
static void held_heartbeat(px_fleet *f)
{
    bool any = false;
    for (size_t i = 0; i < f->n && !any; i++)
        any = f->pools[i].held != NULL;
    if (any && !uv_is_active((uv_handle_t *)&f->check)) {
        f->last_beat_ns = uv_hrtime();
        uv_check_start(&f->check, heartbeat_cb);
        uv_timer_start(&f->tick, tick_cb, PX_FENCE_HELD_TICK_MS, PX_FENCE_HELD_TICK_MS);
    } else if (!any && uv_is_active((uv_handle_t *)&f->check)) {
        uv_check_stop(&f->check);
        uv_timer_stop(&f->tick);
    }
}

static void lost_done(void *arg, bool ok, const char *body, size_t len, const char *why)
{
    (void)body, (void)len, (void)why;
    fleet_pool *fp = arg;
    fp->lost_req = NULL;
    if (ok)
        fp->lost_marked = false;
}

/* Hands the pool's fence to the workers (px_shared_pool.serve_until_ns, fence_why) and logs,
 * counts and records a change of it. Called whenever a term of the fence's rule (fence.h) may
 * have changed. */
static void publish(fleet_pool *fp)
{
    px_shared_pool *sp = served(fp);
    uint64_t now = uv_hrtime();
    uint64_t lease_until = __atomic_load_n(&sp->lease_until_ns, __ATOMIC_RELAXED);
    px_fence_decision d;
    px_fence_decide(&fp->fence, now, lease_until, fp->watching, &d);
    __atomic_store_n(&sp->fence_why, (uint8_t)d.why, __ATOMIC_RELAXED);
    __atomic_store_n(&sp->serve_until_ns, d.serve_until_ns, __ATOMIC_RELAXED);
    held_heartbeat(fp->f);
    if (d.lease_alive)
        uv_timer_start(&fp->lapse, lapse_cb, (lease_until - now) / 1000000u + 1, 0);
    if (d.current && fp->lost_marked && fp->lost_req == NULL) {
        char *body = ch__etcd_delete_body(fp->lost_key);
        fp->lost_req = body != NULL ? px_etcd_post(fp->etcd, "/v3/kv/deleterange", body,
                                                   REQUEST_MS, lost_done, fp)
                                    : NULL;
        free(body);
    }
    if (!d.changed)
        return;
    fp->rec.fenced = !d.current;
    bool serve = sp->conf->membership_fenced == CH_CONF_FENCED_SERVE;
    if (!d.current) {
        PX_LOG(fp->f->m, PX_LOG_WARN, "fleet: pool %s: fenced: %s; %s until it has registered "
               "with etcd and read %s again",
               fp->name, px_fence_text(d.why),
               serve ? "serving its membership anyway (membership_fenced: serve)"
                     : "refusing its requests",
               fp->key);
    } else if (!d.first) {
        PX_LOG(fp->f->m, PX_LOG_NOTICE, "fleet: pool %s: unfenced after %.3f s: epoch %lld is "
               "current (lease %lld)",
               fp->name, (double)d.fenced_ns / 1e9, (long long)sp->epoch,
               (long long)fp->fence.lease);
    }
    record_put(fp);
}

/* At lease_until_ns: the lease may lapse at etcd soon; once the keepalives are answered again,
 * K must be read again (a commit may have gone without this instance). */
static void lapse_cb(uv_timer_t *t)
{
    fleet_pool *fp = t->data;
    px_fence_lapsed(&fp->fence, uv_hrtime(),
                    __atomic_load_n(&served(fp)->lease_until_ns, __ATOMIC_RELAXED));
    publish(fp); /* when it was extended meanwhile, this arms the timer again */
}

/* ---- the changes ------------------------------------------------------------------------------------ */

/* A document of K not applied: counted each time, logged and recorded once (a range after a
 * resync reads the same document again). */
static void refused(fleet_pool *fp, int64_t epoch, bool stale, const char *why)
{
    if (stale)
        fp->st.refused_stale++;
    else
        fp->st.refused_invalid++;
    char text[sizeof(fp->rec.refused)];
    snprintf(text, sizeof(text), "%s", why);
    if (epoch == fp->rec.seen_epoch && strcmp(text, fp->rec.refused) == 0)
        return;
    if (epoch > fp->rec.seen_epoch)
        fp->rec.seen_epoch = epoch;
    memcpy(fp->rec.refused, text, sizeof(text));
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

/* Whether doc (a parsed document's pool) lacks a server the pool serves (by address). Out of
 * memory counts as removing (the document then waits its hold-down: the safe side). Cost:
 * O(n log n). */
static bool removes(const fleet_pool *fp, const ch_conf_pool *doc)
{
    const px_shared_pool *sp = served(fp);
    size_t n = sp->nservers, nd = doc->nservers;
    const char **have = malloc((nd ? nd : 1) * sizeof(*have));
    const char **want = malloc((n ? n : 1) * sizeof(*want));
    size_t *from = malloc((n ? n : 1) * sizeof(*from));
    bool out = have == NULL || want == NULL || from == NULL;
    for (size_t j = 0; !out && j < nd; j++)
        have[j] = doc->servers[j].addr;
    for (size_t i = 0; !out && i < n; i++)
        want[i] = sp->servers[i]->addr;
    out = out || px_match_addrs(have, nd, want, n, false, from) != 0;
    for (size_t i = 0; !out && i < n; i++)
        out = from[i] == SIZE_MAX;
    free(have);
    free(want);
    free(from);
    return out;
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
        px_fence_release(&fp->fence);
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
        publish(fp);
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

/* The epoch of a pending document: its "epoch" (`chash fleet apply` always gives one), else
 * its revision. A document that does not parse has its revision: preparing it then fails with
 * the parse error. */
static int64_t pending_epoch(const fleet_pool *fp, const char *text, size_t len, int64_t mod_rev)
{
    ch_config *doc = NULL;
    int64_t epoch = 0;
    ch_config_error err;
    if (ch_config_membership_parse(fp->name, fp->url, text, len, &doc, &epoch, &err) == 0)
        ch_config_free(doc);
    return epoch > 0 ? epoch : mod_rev;
}

/* K/pending was written: prepare its epoch and hold it for the commit. A refusal is logged and
 * recorded once per epoch (prepare_failed, with why), so that apply names it at once. */
static void on_pending(fleet_pool *fp, const char *text, size_t len, int64_t mod_rev)
{
    px_ctl *m = fp->f->m;
    int64_t epoch = pending_epoch(fp, text, len, mod_rev);
    if (fp->held != NULL && fp->held_epoch == epoch)
        return;
    px_buf result = {0};
    int rc = PX_RELOAD_FAILED;
    px_reload_held *h = NULL;
    if (epoch <= served(fp)->epoch) {
        (void)px_buf_printf(&result, "pending epoch %lld is not newer than %lld, the one served",
                            (long long)epoch, (long long)served(fp)->epoch);
    } else {
        px_reload_doc *docs = calloc(m->npools, sizeof(*docs));
        px_reload_opts opt = PX_RELOAD_OPTS_POOLS;
        char trigger[80];
        snprintf(trigger, sizeof(trigger), "fleet: pending epoch %lld", (long long)epoch);
        if (docs != NULL) {
            docs[fp->index] = (px_reload_doc){text, len, mod_rev};
            rc = px_reload_prepare(m, trigger, &opt, docs, &h, &result);
        }
        free(docs);
    }
    if (rc == PX_RELOAD_OK) {
        fp->held = h;
        fp->held_epoch = epoch;
        px_fence_hold(&fp->fence, uv_hrtime());
        fp->rec.prepared = epoch;
        fp->rec.prepare_failed = 0;
        fp->rec.prepare_error[0] = '\0';
        PX_LOG(m, PX_LOG_NOTICE, "fleet: pool %s: pending epoch %lld prepared; waiting for its "
               "commit", fp->name, (long long)epoch);
    } else if (fp->rec.prepare_failed != epoch) {
        fp->rec.prepared = 0;
        fp->rec.prepare_failed = epoch;
        snprintf(fp->rec.prepare_error, sizeof(fp->rec.prepare_error), "%.*s", (int)result.len,
                 result.p != NULL ? result.p : "out of memory");
        PX_LOG(m, PX_LOG_ERR, "fleet: pool %s: cannot prepare pending epoch %lld: %s",
               fp->name, (long long)epoch, fp->rec.prepare_error);
    }
    px_buf_free(&result);
    publish(fp);
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
    px_fence_release(&fp->fence);
    px_reload_abort(fp->f->m, h);
    PX_LOG(fp->f->m, PX_LOG_NOTICE, "fleet: pool %s: pending epoch %lld withdrawn: dropped",
           fp->name, (long long)fp->held_epoch);
    fp->rec.prepared = 0;
    publish(fp);
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
        px_fence_release(&fp->fence);
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
    } else if (strcmp(kv->key, fp->lost_key) == 0) {
        fp->lost_marked = !deleted; /* a commit went without this instance: publish clears it */
        if (!deleted)
            PX_LOG(fp->f->m, PX_LOG_WARN, "fleet: pool %s: %s says a change was committed "
                   "without this instance (its lease had lapsed)", fp->name, fp->lost_key);
        publish(fp);
    } /* else: an instance record, or a key that only shares the prefix */
}

/* ---- the watch ----------------------------------------------------------------------------------- */

static void watch_start(fleet_pool *fp);
static void keepalive_cb(uv_timer_t *t);
static void lease_drop(fleet_pool *fp);

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
    publish(fp); /* a prepared change may now be committed unseen */
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
        /* Its lease is gone with the data: fenced now, and granted again. */
        lease_drop(fp);
        watch_again(fp);
        keepalive_cb(&fp->keepalive);
        return;
    }
    if (msg.created) {
        fp->watching = true;
        publish(fp);
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
    bool lost = false;
    for (size_t i = 0; i < n; i++)
        lost |= strcmp(kvs[i].key, fp->lost_key) == 0;
    fp->lost_marked = lost;
    if (!pending)
        on_pending_gone(fp);
    ch__etcd_kvs_free(kvs, n);
    fp->rev = px_fence_read_done(&fp->fence) ? 0 : rev; /* begun too early: read again */
    publish(fp);
    watch_start(fp);
}

/* Reads K whole again (now, or when the watch's retry comes): after a lapse of the lease, or
 * once the record is back under a new one. */
static void resync(fleet_pool *fp)
{
    fp->rev = 0;
    if (fp->range != NULL || uv_is_active((uv_handle_t *)&fp->retry))
        return; /* range_done reads again if it began too early; the retry ranges */
    if (fp->watch != NULL) {
        px_etcd_cancel(fp->watch);
        fp->watch = NULL;
        fp->watching = false;
    }
    watch_start(fp);
}

static void watch_start(fleet_pool *fp)
{
    if (fp->rev == 0) {
        px_fence_read_sent(&fp->fence, uv_hrtime());
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

static void keepalive_cb(uv_timer_t *t);

/* The lease is gone (etcd said so, or lost its data): fenced now, a new one is granted. */
static void lease_drop(fleet_pool *fp)
{
    px_fence_lease_lost(&fp->fence);
    __atomic_store_n(&fp->slot->lease, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&served(fp)->lease_until_ns, 0, __ATOMIC_RELAXED);
    publish(fp);
}

/* A grant answered, or failed. */
static void grant_done(void *arg, bool ok, const char *body, size_t len, const char *why)
{
    fleet_pool *fp = arg;
    fp->grant_req = NULL;
    char w[300];
    int64_t id = 0, ttl = 0;
    if (ok && ch__etcd_parse_lease(body, len, &id, &ttl, w, sizeof(w)) != 0) {
        ok = false;
        why = w;
    }
    if (ok && ttl <= 0) {
        ok = false;
        why = "etcd granted a lease with no TTL";
    }
    if (!ok) {
        etcd_lost(fp, "cannot grant its lease", why);
        return; /* the next tick grants again */
    }
    px_fence_granted(&fp->fence, id);
    __atomic_store_n(&served(fp)->lease_until_ns, px_lease_deadline(fp->grant_sent_ns, ttl),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&fp->slot->lease, id, __ATOMIC_RELEASE);
    PX_LOG(fp->f->m, PX_LOG_NOTICE, "fleet: pool %s: registered as %s (lease %lld, %d s)",
           fp->name, fp->record_key, (long long)id, fp->f->ttl_s);
    fp->dirty = true;
    publish(fp);
    record_put(fp);
}

/* What the keeper found since the last call (lease.h), pool by pool. */
static void lease_events(void *arg)
{
    px_fleet *f = arg;
    for (size_t i = 0; i < f->n; i++) {
        fleet_pool *fp = &f->pools[i];
        uint32_t ev = __atomic_exchange_n(&fp->slot->events, 0, __ATOMIC_ACQUIRE);
        if (ev & PX_LEASE_MEMBER_EXPIRED) {
            fp->member_lease = 0; /* granted again at the next tick */
            __atomic_store_n(&fp->slot->member_lease, 0, __ATOMIC_RELEASE);
        }
        if ((ev & PX_LEASE_EXPIRED) && fp->fence.lease != 0) {
            PX_LOG(f->m, PX_LOG_WARN, "fleet: pool %s: its lease %lld expired: registering "
                   "again", fp->name, (long long)fp->fence.lease);
            lease_drop(fp);
            keepalive_cb(&fp->keepalive); /* a new grant now */
            continue;
        }
        if (ev & PX_LEASE_UNANSWERED) {
            etcd_lost(fp, "its lease keepalive failed", "etcd did not answer in time");
            /* etcd did not answer a keepalive in time: a watch on it may be silent too. */
            if (fp->watching)
                watch_again(fp);
        }
        if (ev & PX_LEASE_ANSWERED) {
            if (px_fence_kept(&fp->fence))
                resync(fp); /* answered again after a lapse: K is read before serving */
            publish(fp);
        }
    }
}

static void member_tick(fleet_pool *fp);

static void member_done(void *arg, bool ok, const char *body, size_t len, const char *why)
{
    (void)why;
    fleet_pool *fp = arg;
    fp->member_req = NULL;
    char w[300];
    int64_t id = 0, ttl = 0, rev;
    if (!ok)
        return; /* the next tick tries again */
    if (fp->member_step == MEMBER_PUT) {
        fp->member_unput = ch__etcd_parse_write(body, len, &rev, w, sizeof(w)) != 0;
    } else if (ch__etcd_parse_lease(body, len, &id, &ttl, w, sizeof(w)) == 0 && ttl > 0) {
        fp->member_lease = id;
        fp->member_unput = true;
        __atomic_store_n(&fp->slot->member_lease, id, __ATOMIC_RELEASE); /* the keeper's now */
        member_tick(fp); /* the put, now */
    }
}

/* K/members/<id>: granted and put once registered; the keeper keeps its lease alive. */
static void member_tick(fleet_pool *fp)
{
    if (fp->member_req != NULL || fp->fence.registered == 0)
        return;
    char *body = NULL;
    const char *path;
    if (fp->member_lease == 0) {
        fp->member_step = MEMBER_GRANT;
        path = "/v3/lease/grant";
        body = ch__etcd_grant_body(CH_FLEET_MEMBER_TTL_S);
    } else if (fp->member_unput) {
        fp->member_step = MEMBER_PUT;
        path = "/v3/kv/put";
        char *json = member_json(&fp->rec);
        body = json != NULL ? ch__etcd_put_body(fp->member_key, json, strlen(json),
                                                fp->member_lease)
                            : NULL;
        free(json);
    } else {
        return;
    }
    if (body != NULL)
        fp->member_req = px_etcd_post(fp->etcd, path, body, REQUEST_MS, member_done, fp);
    free(body);
}

/* The control side of the leases, every ttl/3: a grant when there is no lease, the member
 * note, and a record put that failed before. The keepalives are the keeper's. */
static void keepalive_cb(uv_timer_t *t)
{
    fleet_pool *fp = t->data;
    member_tick(fp);
    if (fp->dirty)
        record_put(fp);
    if (fp->fence.lease != 0 || fp->grant_req != NULL)
        return;
    char *body = ch__etcd_grant_body(fp->f->ttl_s);
    fp->grant_sent_ns = uv_hrtime();
    if (body != NULL)
        fp->grant_req = px_etcd_post(fp->etcd, "/v3/lease/grant", body, REQUEST_MS, grant_done,
                                     fp);
    free(body);
}

/* ---- start and stop ---------------------------------------------------------------------------------- */

int px_fleet_start(px_ctl *m, px_fleet_boot *boot)
{
    if (boot == NULL)
        return 0;
    px_fleet *f = calloc(1, sizeof(*f));
    size_t n = 0;
    for (size_t i = 0; i < m->npools; i++)
        n += m->pools[i].conf->membership != NULL;
    if (f == NULL || (f->pools = calloc(n, sizeof(*f->pools))) == NULL ||
        (f->slots = calloc(n, sizeof(*f->slots))) == NULL) {
        if (f != NULL)
            free(f->pools);
        free(f);
        px_fleet_boot_free(boot);
        PX_LOG(m, PX_LOG_ERR, "fleet: out of memory");
        return -1;
    }
    f->m = m;
    f->ttl_s = boot->ttl_s;
    m->fleet = f;
    m->held_dropped = held_dropped;
    m->held_dropped_arg = f;
    uv_check_init(m->loop, &f->check);
    uv_timer_init(m->loop, &f->tick);
    f->check.data = f->tick.data = f;
    int rc = 0;
    for (size_t i = 0; i < m->npools; i++) {
        px_shared_pool *sp = &m->pools[i];
        const ch_conf_pool *pc = sp->conf;
        if (pc->membership == NULL)
            continue;
        boot_doc *bd = NULL;
        for (size_t k = 0; k < boot->n && bd == NULL; k++)
            if (strcmp(boot->names[k], pc->name) == 0)
                bd = &boot->docs[k];
        fleet_pool *fp = &f->pools[f->n];
        fp->slot = &f->slots[f->n++];
        fp->slot->lease_until_ns = &sp->lease_until_ns;
        fp->f = f;
        fp->index = i;
        if (bd != NULL) { /* what the start registered and read (fleet.h) */
            if (bd->text != NULL) {
                sp->doc = bd->text;
                sp->doclen = bd->len;
                sp->epoch = bd->epoch;
                bd->text = NULL;
            }
            fp->rec = bd->rec;
            /* the start's own steps, in their order: granted, registered, then K read */
            fp->slot->lease = bd->lease;
            sp->lease_until_ns = bd->lease_until_ns;
            px_fence_granted(&fp->fence, bd->lease);
            bool again;
            if (bd->lease != 0 && bd->registered) {
                px_fence_record_sent(&fp->fence);
                (void)px_fence_record_written(&fp->fence, &again);
            }
            if (bd->lease != 0 && bd->registered && bd->synced) {
                px_fence_read_sent(&fp->fence, uv_hrtime());
                (void)px_fence_read_done(&fp->fence);
            }
            fp->member_lease = fp->slot->member_lease = bd->member_lease;
            bd->lease = bd->member_lease = 0; /* taken over */
        }
        fp->name = strdup(pc->name);
        fp->endpoint = strdup(pc->membership_endpoint);
        fp->slot->endpoint = fp->endpoint;
        fp->hold_down_ms = pc->membership_hold_down_ms;
        uv_timer_init(m->loop, &fp->retry);
        uv_timer_init(m->loop, &fp->keepalive);
        uv_timer_init(m->loop, &fp->hold);
        uv_timer_init(m->loop, &fp->warm_end);
        uv_timer_init(m->loop, &fp->lapse);
        fp->retry.data = fp->keepalive.data = fp->hold.data = fp->warm_end.data = fp;
        fp->lapse.data = fp;
        fp->rec.seen_epoch = sp->epoch;
        record_served(fp);
        fp->url = strdup(pc->membership);
        fp->key = strdup(pc->membership_key);
        fp->pending_key = ch__fleet_pending_key(pc->membership_key);
        fp->record_key = record_key_of(pc->membership_key, fp->rec.id);
        char *lost = ch__fleet_lost_prefix(pc->membership_key);
        char *members = ch__fleet_members_prefix(pc->membership_key);
        fp->lost_key = lost != NULL ? ch__fleet_key(lost, fp->rec.id) : NULL;
        fp->member_key = members != NULL ? ch__fleet_key(members, fp->rec.id) : NULL;
        free(lost);
        free(members);
        fp->etcd = px_etcd_new(m->loop, pc->membership_endpoint);
        if (fp->name == NULL || fp->endpoint == NULL || fp->url == NULL || fp->key == NULL ||
            fp->pending_key == NULL || fp->record_key == NULL || fp->lost_key == NULL ||
            fp->member_key == NULL || fp->etcd == NULL) {
            rc = -1;
            continue;
        }
        publish(fp); /* the workers start with the fence the start proved (or none) */
        watch_start(fp);
        if (fp->fence.lease == 0)
            keepalive_cb(&fp->keepalive); /* the grant the start could not get */
        else
            record_put(fp); /* the record with what the pool serves */
        uint64_t every = (uint64_t)f->ttl_s * 1000u / 3u;
        uv_timer_start(&fp->keepalive, keepalive_cb, every, every);
    }
    if (rc == 0 &&
        (f->keeper = px_lease_keeper_start(m->loop, f->slots, f->n,
                                           (uint64_t)f->ttl_s * 1000u / 3u, lease_events, f)) ==
            NULL)
        rc = -1;
    px_fleet_boot_free(boot);
    if (rc != 0)
        PX_LOG(m, PX_LOG_ERR, "fleet: out of memory");
    return rc;
}

static void fleet_free(px_fleet *f)
{
    free(f->pools);
    free(f->slots);
    free(f);
}

static void fleet_closed(px_fleet *f)
{
    if (--f->closing == 0)
        fleet_free(f);
}

static void timer_closed(uv_handle_t *h)
{
    fleet_closed(((fleet_pool *)h->data)->f);
}

static void own_closed(uv_handle_t *h)
{
    fleet_closed(h->data);
}

void px_fleet_stop(px_ctl *m)
{
    px_fleet *f = m->fleet;
    if (f == NULL)
        return;
    m->fleet = NULL;
    m->held_dropped = NULL;
    px_lease_keeper_stop(f->keeper); /* first: it reads the slots and endpoints freed below */
    f->closing += 2;
    uv_close((uv_handle_t *)&f->check, own_closed);
    uv_close((uv_handle_t *)&f->tick, own_closed);
    for (size_t i = 0; i < f->n; i++) {
        fleet_pool *fp = &f->pools[i];
        if (fp->held != NULL) {
            px_reload_abort(m, fp->held);
            fp->held = NULL;
            px_fence_release(&fp->fence);
        }
        lease_revoke(fp->endpoint, fp->fence.lease); /* the record and the member note go now */
        lease_revoke(fp->endpoint, fp->member_lease);
        px_etcd_free(fp->etcd);
        uv_timer_t *timers[] = {&fp->retry, &fp->keepalive, &fp->hold, &fp->warm_end,
                                &fp->lapse};
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
        free(fp->lost_key);
        free(fp->member_key);
        free(fp->hold_doc);
    }
    if (f->closing == 0)
        fleet_free(f);
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
        out->etcd_up = fp->watching && fp->fence.lease != 0 && !fp->etcd_warned;
        out->fences = fp->fence.fences;
        out->fenced = (fp->fence.published && !fp->fence.current) ||
                      px_shared_fenced(&m->pools[i], uv_hrtime());
        out->serve_fenced = m->pools[i].conf->membership_fenced == CH_CONF_FENCED_SERVE;
        return true;
    }
    return false;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet.c — a pool's membership from etcd (fleet.h; the contract is docs/FLEET.md): the owner
 * of each pool's parts, which it wires together. Per pool that names a "membership" key K, on
 * the control thread's loop:
 * - the watch (fleet_watch.c) hands each key-value under K here, and it goes to its concern: K
 *   and K/pending to the changes (fleet_change.c), K/lost/<id> to the lost marker below;
 * - every ttl/3 the member note (fleet_member.c) and the lease and record (fleet_instance.c)
 *   take their next step; the lease keeper's thread (lease.h) keeps the leases alive and
 *   reports here what it cannot keep;
 * - each part feeds the fence (fence.h) what it learns, and publish() hands the fence's
 *   decision to the workers (px_shared_pool.serve_until_ns, fence_why); the keeper hands them
 *   the lease's deadline (px_shared_pool.lease_until_ns), and the workers refuse requests past
 *   the earlier by their own clock. While a pool holds a prepared change, the heartbeat (a
 *   check after each turn of the loop's I/O, and a tick that makes turns) tells the fence the
 *   loop still turns.
 * A pool's parts point to each other within its fleet_pool, which never moves (f->pools is
 * allocated once).
 */
#include "fleet.h"
#include "etcd_http.h"
#include "fence.h"
#include "fleet_change.h"
#include "fleet_instance.h"
#include "fleet_member.h"
#include "fleet_watch.h"
#include "lease.h"

#include <etcd_msg.h>
#include <fleet_record.h>

#include <stdlib.h>
#include <string.h>

#define REQUEST_MS 3000 /* the lost marker's deletion */

typedef struct fleet_pool {
    px_fleet *f;
    size_t index;         /* in m->pools */
    char *name;           /* copies: a reload frees the config they come from */
    char *endpoint, *url, *key, *pending_key, *lost_key;
    px_etcd *etcd;        /* every request of the pool's parts */
    px_lease_slot *slot;  /* f->slots[this pool's index in f->pools] */
    px_fence fence;
    fleet_watch watch;
    fleet_instance inst;
    fleet_member member;
    fleet_change change;
    uv_timer_t keepalive; /* every ttl/3: the member note, the record, a grant */
    uv_timer_t lapse;     /* at the lease's deadline */
    bool lost_marked;     /* K/lost/<id> exists (a commit went without us): deleted once current */
    px_etcd_req *lost_req;
    bool etcd_warned;     /* "etcd unreachable" logged once per outage */
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

static px_shared_pool *served(const fleet_pool *fp)
{
    return &fp->f->m->pools[fp->index];
}

/* ---- the fence ----------------------------------------------------------------------------- */

static void publish(fleet_pool *fp);

static void heartbeat_cb(uv_check_t *c)
{
    px_fleet *f = c->data;
    uint64_t now = uv_hrtime(), last = f->last_beat_ns;
    f->last_beat_ns = now;
    for (size_t i = 0; i < f->n; i++) {
        fleet_pool *fp = &f->pools[i];
        if (fp->change.held == NULL)
            continue;
        if (px_fence_beat(&fp->fence, now, last) && fp->watch.range == NULL)
            fleet_watch_resync(&fp->watch); /* fenced (publish) until a read begun now is back */
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
        any = f->pools[i].change.held != NULL;
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

/* At lease_until_ns: the lease may lapse at etcd soon; once the keepalives are answered again,
 * K must be read again (a commit may have gone without this instance). */
static void lapse_cb(uv_timer_t *t)
{
    fleet_pool *fp = t->data;
    px_fence_lapsed(&fp->fence, uv_hrtime(),
                    __atomic_load_n(&served(fp)->lease_until_ns, __ATOMIC_RELAXED));
    publish(fp); /* when it was extended meanwhile, this arms the timer again */
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
    px_fence_decide(&fp->fence, now, lease_until, fp->watch.watching, &d);
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
    fp->inst.rec.fenced = !d.current;
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
    fleet_instance_put(&fp->inst);
}

/* ---- what the parts report ----------------------------------------------------------------- */

static void keepalive_cb(uv_timer_t *t);

static void on_decide(void *arg)
{
    publish(arg);
}

static void etcd_lost(void *arg, const char *what, const char *why)
{
    fleet_pool *fp = arg;
    if (!fp->etcd_warned)
        PX_LOG(fp->f->m, PX_LOG_WARN,
               "fleet: pool %s: %s: %s; serving epoch %lld, retrying (logged once until etcd "
               "answers)",
               fp->name, what, why, (long long)served(fp)->epoch);
    fp->etcd_warned = true;
}

/* One key-value of K's prefix, from a range or a watch event. */
static void on_kv(void *arg, const ch__etcd_kv *kv, bool deleted)
{
    fleet_pool *fp = arg;
    if (strcmp(kv->key, fp->key) == 0) {
        if (deleted)
            PX_LOG(fp->f->m, PX_LOG_WARN, "fleet: pool %s: %s was deleted: keeping epoch %lld",
                   fp->name, fp->key, (long long)served(fp)->epoch);
        else
            fleet_change_committed(&fp->change, kv->value, kv->len, kv->mod_rev);
    } else if (strcmp(kv->key, fp->pending_key) == 0) {
        if (deleted)
            fleet_change_pending_gone(&fp->change);
        else
            fleet_change_pending(&fp->change, kv->value, kv->len, kv->mod_rev);
    } else if (strcmp(kv->key, fp->lost_key) == 0) {
        fp->lost_marked = !deleted; /* a commit went without this instance: publish clears it */
        if (!deleted)
            PX_LOG(fp->f->m, PX_LOG_WARN, "fleet: pool %s: %s says a change was committed "
                   "without this instance (its lease had lapsed)", fp->name, fp->lost_key);
        publish(fp);
    } /* else: an instance record, or a key that only shares the prefix */
}

/* K read whole (each key-value already went to on_kv): what is absent counts too. */
static void on_read(void *arg, const ch__etcd_kv *kvs, size_t n)
{
    fleet_pool *fp = arg;
    bool pending = false, lost = false;
    for (size_t i = 0; i < n; i++) {
        pending |= strcmp(kvs[i].key, fp->pending_key) == 0;
        lost |= strcmp(kvs[i].key, fp->lost_key) == 0;
    }
    fp->lost_marked = lost;
    if (!pending)
        fleet_change_pending_gone(&fp->change);
}

static void on_watch_up(void *arg)
{
    fleet_pool *fp = arg;
    publish(fp);
    if (fp->etcd_warned)
        PX_LOG(fp->f->m, PX_LOG_NOTICE, "fleet: pool %s: etcd answers again; watching %s "
               "from revision %lld", fp->name, fp->key, (long long)fp->watch.rev + 1);
    fp->etcd_warned = false;
}

static void on_behind(void *arg, int64_t etcd_rev, int64_t seen_rev)
{
    fleet_pool *fp = arg;
    PX_LOG(fp->f->m, PX_LOG_WARN,
           "fleet: pool %s: etcd is at revision %lld, behind the %lld seen: its data was "
           "lost or replaced; reading %s again (documents need an epoch above %lld to apply)",
           fp->name, (long long)etcd_rev, (long long)seen_rev, fp->key,
           (long long)served(fp)->epoch);
    /* Its lease is gone with the data: fenced now, and granted again. */
    fleet_instance_drop(&fp->inst);
    fleet_watch_again(&fp->watch);
    keepalive_cb(&fp->keepalive);
}

static void on_registered(void *arg, bool read_again)
{
    fleet_pool *fp = arg;
    if (read_again)
        fleet_watch_resync(&fp->watch);
    publish(fp);
}

static const fleet_watch_on WATCH_ON = {on_kv, on_read, on_decide, on_watch_up, etcd_lost,
                                        on_behind};
static const fleet_instance_on INSTANCE_ON = {on_decide, on_registered, etcd_lost};

/* What the keeper found since the last call (lease.h), pool by pool. */
static void lease_events(void *arg)
{
    px_fleet *f = arg;
    for (size_t i = 0; i < f->n; i++) {
        fleet_pool *fp = &f->pools[i];
        uint32_t ev = __atomic_exchange_n(&fp->slot->events, 0, __ATOMIC_ACQUIRE);
        if (ev & PX_LEASE_MEMBER_EXPIRED)
            fleet_member_expired(&fp->member); /* granted again at the next tick */
        if ((ev & PX_LEASE_EXPIRED) && fp->fence.lease != 0) {
            PX_LOG(f->m, PX_LOG_WARN, "fleet: pool %s: its lease %lld expired: registering "
                   "again", fp->name, (long long)fp->fence.lease);
            fleet_instance_drop(&fp->inst);
            keepalive_cb(&fp->keepalive); /* a new grant now */
            continue;
        }
        if (ev & PX_LEASE_UNANSWERED) {
            etcd_lost(fp, "its lease keepalive failed", "etcd did not answer in time");
            /* etcd did not answer a keepalive in time: a watch on it may be silent too. */
            if (fp->watch.watching)
                fleet_watch_again(&fp->watch);
        }
        if (ev & PX_LEASE_ANSWERED) {
            if (px_fence_kept(&fp->fence))
                fleet_watch_resync(&fp->watch); /* answered again after a lapse: K is read */
            publish(fp);
        }
    }
}

/* The control side of the leases, every ttl/3: the member note, a record write that failed
 * before, and a grant when there is no lease. The keepalives are the keeper's. */
static void keepalive_cb(uv_timer_t *t)
{
    fleet_pool *fp = t->data;
    fleet_member_tick(&fp->member);
    fleet_instance_tick(&fp->inst);
}

/* A later reload dropped a change held prepared (reload.h: m->held_dropped). */
static void held_dropped(void *arg, const char *trigger)
{
    px_fleet *f = arg;
    for (size_t i = 0; i < f->n; i++)
        fleet_change_dropped(&f->pools[i].change, trigger);
}

/* ---- start and stop ------------------------------------------------------------------------ */

/* What the start registered and read for pool fp (bd: NULL when nothing), handed over: its
 * document to the pool, its lease, record and member note to fp, and the fence told the
 * start's own steps in their order (granted, registered, then K read). */
static void take_boot(fleet_pool *fp, px_shared_pool *sp, px_fleet_boot_doc *bd)
{
    if (bd == NULL)
        return;
    if (bd->text != NULL) {
        sp->doc = bd->text;
        sp->doclen = bd->len;
        sp->epoch = bd->epoch;
        bd->text = NULL;
    }
    fp->inst.rec = bd->rec;
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
    fp->member.lease = fp->slot->member_lease = bd->member_lease;
    bd->lease = bd->member_lease = 0; /* taken over */
}

/* Sets pool i's parts up (every handle initialized, so px_fleet_stop can close them even when
 * this fails) from what the start did (bd). 0, or -1 when out of memory. */
static int pool_init(px_fleet *f, fleet_pool *fp, size_t i, px_fleet_boot_doc *bd)
{
    px_ctl *m = f->m;
    px_shared_pool *sp = &m->pools[i];
    const ch_conf_pool *pc = sp->conf;
    fp->slot = &f->slots[fp - f->pools];
    fp->slot->lease_until_ns = &sp->lease_until_ns;
    fp->f = f;
    fp->index = i;
    fp->name = strdup(pc->name);
    fp->endpoint = strdup(pc->membership_endpoint);
    fp->url = strdup(pc->membership);
    fp->key = strdup(pc->membership_key);
    fp->slot->endpoint = fp->endpoint;
    fp->etcd = px_etcd_new(m->loop, pc->membership_endpoint);
    fp->watch = (fleet_watch){.etcd = fp->etcd, .log = &m->log, .name = fp->name,
                              .key = fp->key, .fence = &fp->fence, .on = &WATCH_ON, .arg = fp};
    fp->inst = (fleet_instance){.etcd = fp->etcd, .log = &m->log, .name = fp->name,
                                .ttl_s = f->ttl_s, .fence = &fp->fence, .slot = fp->slot,
                                .sp = sp, .on = &INSTANCE_ON, .arg = fp};
    fp->member = (fleet_member){.etcd = fp->etcd, .slot = fp->slot, .fence = &fp->fence,
                                .rec = &fp->inst.rec};
    fp->change = (fleet_change){.m = m, .index = i, .name = fp->name, .url = fp->url,
                                .key = fp->key, .fence = &fp->fence, .inst = &fp->inst,
                                .changed = on_decide, .arg = fp};
    fleet_watch_init(&fp->watch, m->loop);
    fleet_instance_init(&fp->inst, m->loop);
    fleet_change_init(&fp->change, pc->membership_hold_down_ms);
    uv_timer_init(m->loop, &fp->keepalive);
    uv_timer_init(m->loop, &fp->lapse);
    fp->keepalive.data = fp->lapse.data = fp;
    take_boot(fp, sp, bd);
    fp->inst.rec.seen_epoch = sp->epoch;
    fleet_instance_served(&fp->inst);
    fp->pending_key = ch__fleet_pending_key(pc->membership_key);
    fp->inst.record_key = fleet_instance_key(pc->membership_key, fp->inst.rec.id);
    char *lost = ch__fleet_lost_prefix(pc->membership_key);
    char *members = ch__fleet_members_prefix(pc->membership_key);
    fp->lost_key = lost != NULL ? ch__fleet_key(lost, fp->inst.rec.id) : NULL;
    fp->member.key = members != NULL ? ch__fleet_key(members, fp->inst.rec.id) : NULL;
    free(lost);
    free(members);
    return fp->name == NULL || fp->endpoint == NULL || fp->url == NULL || fp->key == NULL ||
                   fp->pending_key == NULL || fp->inst.record_key == NULL ||
                   fp->lost_key == NULL || fp->member.key == NULL || fp->etcd == NULL
               ? -1
               : 0;
}

/* Pool fp's first steps on the loop. */
static void pool_start(fleet_pool *fp)
{
    publish(fp); /* the workers start with the fence the start proved (or none) */
    fleet_watch_start(&fp->watch);
    if (fp->fence.lease == 0)
        keepalive_cb(&fp->keepalive); /* the grant the start could not get */
    else
        fleet_instance_put(&fp->inst); /* the record with what the pool serves */
    uint64_t every = (uint64_t)fp->f->ttl_s * 1000u / 3u;
    uv_timer_start(&fp->keepalive, keepalive_cb, every, every);
}

int px_fleet_start(px_ctl *m, px_fleet_boot *boot)
{
    if (boot == NULL)
        return 0;
    px_fleet *f = calloc(1, sizeof(*f));
    size_t n = 0;
    for (size_t i = 0; i < m->npools; i++)
        n += ch_conf_membership_etcd(m->pools[i].conf);
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
        const char *name = m->pools[i].conf->name;
        if (!ch_conf_membership_etcd(m->pools[i].conf))
            continue;
        px_fleet_boot_doc *bd = NULL;
        for (size_t k = 0; k < boot->n && bd == NULL; k++)
            if (strcmp(boot->names[k], name) == 0)
                bd = &boot->docs[k];
        fleet_pool *fp = &f->pools[f->n++];
        if (pool_init(f, fp, i, bd) != 0)
            rc = -1;
        else
            pool_start(fp);
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

static void handle_closed(uv_handle_t *h)
{
    px_fleet *f = h->data;
    if (--f->closing == 0)
        fleet_free(f);
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
    uv_close((uv_handle_t *)&f->check, handle_closed);
    uv_close((uv_handle_t *)&f->tick, handle_closed);
    for (size_t i = 0; i < f->n; i++) {
        fleet_pool *fp = &f->pools[i];
        f->closing += 5;
        fleet_change_close(&fp->change, f, handle_closed); /* a held change aborted */
        fleet_lease_revoke(fp->endpoint, fp->fence.lease); /* the record and note go now */
        fleet_lease_revoke(fp->endpoint, fp->member.lease);
        px_etcd_free(fp->etcd);
        fleet_watch_close(&fp->watch, f, handle_closed);
        fleet_instance_close(&fp->inst, f, handle_closed);
        fp->keepalive.data = fp->lapse.data = f;
        uv_close((uv_handle_t *)&fp->keepalive, handle_closed);
        uv_close((uv_handle_t *)&fp->lapse, handle_closed);
        free(fp->name);
        free(fp->endpoint);
        free(fp->url);
        free(fp->key);
        free(fp->pending_key);
        free(fp->lost_key);
        free(fp->member.key);
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
        *out = (px_fleet_stats){
            .epoch = m->pools[i].epoch,
            .seen_epoch = fp->inst.rec.seen_epoch,
            .prepared = fp->inst.rec.prepared,
            .etcd_up = fp->watch.watching && fp->fence.lease != 0 && !fp->etcd_warned,
            .fenced = (fp->fence.published && !fp->fence.current) ||
                      px_shared_fenced(&m->pools[i], uv_hrtime()),
            .serve_fenced = m->pools[i].conf->membership_fenced == CH_CONF_FENCED_SERVE,
            .fences = fp->fence.fences,
            .held_down = fleet_damp_waiting(&fp->change.damp),
            .applied = fp->change.applied,
            .refused_invalid = fp->change.refused_invalid,
            .refused_stale = fp->change.refused_stale,
            .damped = fp->change.damp.damped,
            .watch_restarts = fp->watch.restarts,
        };
        return true;
    }
    return false;
}

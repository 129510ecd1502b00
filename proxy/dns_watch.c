/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dns_watch.c — a pool's membership from DNS (dns_watch.h; the contract is docs/FLEET.md,
 * "Membership from DNS"). Per pool that names dns:// or dns+srv://, on the control thread's
 * loop: a c-ares channel (dns_resolve.h) and a timer; at each tick one lookup, whose answer is:
 * - failed (timeout, SERVFAIL, NXDOMAIN, no records) or without a server: the list served is
 *   kept, never emptied; logged when the pool starts keeping and when the reason changes, and
 *   when answers come again; counted;
 * - the document served, byte for byte (dns_answer.h sorts, so the same set in any order is the
 *   same bytes): no change; a removal waiting its hold-down is withdrawn (damped);
 * - else: fleet_change_committed with the next epoch, as a document written to an etcd key:
 *   applied by the reload path, or held down when it removes servers.
 * The next tick is membership_interval ms after the answer, sooner when its TTL is shorter, but
 * not sooner than CH_CONF_MIN_MEMBERSHIP_INTERVAL (a TTL of 0 does not spin). Lookups of one
 * pool never overlap. Cost, measured (release build, dnsmasq on loopback): an SRV lookup of 3
 * targets (7 queries) takes about 0.37 ms of the control thread's CPU, so the 100 ms floor
 * costs 0.4% of a core and the default 5 s interval 0.007%; an unchanged answer ends in one
 * memcmp of the document. A pool's parts point to each other within its dns_pool, which never moves.
 */
#include "dns_watch.h"
#include "dns_answer.h"
#include "dns_resolve.h"
#include "fleet_change.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct dns_pool {
    px_dns_watch *w;
    size_t index;        /* in m->pools */
    char *name, *url, *host; /* copies: a reload frees the config they come from */
    bool srv;
    int port, interval_ms;
    px_dns *dns;
    uv_timer_t tick;
    fleet_change change;
    uint64_t lookups, failed, empty, next_ms;
    bool keeping;        /* the last lookup kept the list served */
    char why[200];       /* why, as logged (logged again only when it changes) */
} dns_pool;

struct px_dns_watch {
    px_ctl *m;
    dns_pool *pools;
    size_t n;
    unsigned closing; /* handles still closing after px_dns_stop: freed at 0 */
};

/* What the start resolved, pool by pool (index as cfg's pools). */
typedef struct boot_doc {
    char *text; /* NULL: the lookup failed; the pool serves the file's servers */
    size_t len;
} boot_doc;

struct px_dns_boot {
    boot_doc *docs;
    size_t n;
};

static const px_shared_pool *served(const dns_pool *dp)
{
    return &dp->w->m->pools[dp->index];
}

/* ---- the start: one blocking lookup per pool, on a loop of its own -------------------------- */

typedef struct boot_wait {
    bool done;
    px_buf doc;
    char why[200];
    const ch_conf_pool *pc;
} boot_wait;

static void boot_answer(void *arg, const px_dns_result *r)
{
    boot_wait *bw = arg;
    bw->done = true;
    if (!r->ok)
        snprintf(bw->why, sizeof(bw->why), "%s", r->error);
    else if (r->n == 0)
        snprintf(bw->why, sizeof(bw->why), "the answer has no server");
    else if (px_dns_doc(r->servers, r->n, bw->pc, &bw->doc) != 0)
        snprintf(bw->why, sizeof(bw->why), "out of memory");
}

/* Resolves pc's name once on a loop of its own. The document in *doc (malloc'd), or NULL with
 * why. */
static char *boot_lookup(const ch_conf_pool *pc, size_t *len, char *why, size_t whylen)
{
    uv_loop_t loop;
    boot_wait bw = {.pc = pc};
    if (uv_loop_init(&loop) != 0) {
        snprintf(why, whylen, "cannot make a loop");
        return NULL;
    }
    px_dns *d = px_dns_new(&loop, pc->membership_resolver, PX_DNS_TIMEOUT_MS, why, whylen);
    if (d != NULL &&
        px_dns_lookup(d, pc->membership_endpoint, pc->membership_scheme == CH_CONF_MEMBERSHIP_DNS_SRV,
                      pc->membership_port, boot_answer, &bw) == 0) {
        while (!bw.done && uv_run(&loop, UV_RUN_ONCE) != 0)
            ;
        if (!bw.done)
            snprintf(bw.why, sizeof(bw.why), "the lookup ended without an answer");
        snprintf(why, whylen, "%s", bw.why);
    } else if (d != NULL) {
        snprintf(why, whylen, "out of memory");
    }
    px_dns_free(d);
    uv_run(&loop, UV_RUN_DEFAULT); /* the channel's handles close */
    (void)uv_loop_close(&loop);
    if (bw.why[0] != '\0' || bw.doc.p == NULL) {
        px_buf_free(&bw.doc);
        return NULL;
    }
    *len = bw.doc.len;
    return bw.doc.p;
}

void px_dns_boot_free(px_dns_boot *b)
{
    if (b == NULL)
        return;
    for (size_t i = 0; i < b->n; i++)
        free(b->docs[i].text);
    free(b->docs);
    free(b);
}

int px_dns_check(const ch_config *cfg, char *why, size_t whylen)
{
    for (size_t i = 0; i < cfg->npools; i++) {
        const ch_conf_pool *pc = &cfg->pools[i];
        if (!ch_conf_membership_dns(pc) || pc->nservers > 0)
            continue;
        char no[300];
        size_t len = 0;
        char *text = boot_lookup(pc, &len, no, sizeof(no));
        free(text);
        if (text == NULL) {
            snprintf(why, whylen,
                     "pool %s: cannot resolve its membership %s (%s), and the file has no "
                     "servers",
                     pc->name, pc->membership, no);
            return -1;
        }
    }
    return 0;
}

int px_dns_bootstrap(ch_config *cfg, px_log *log, px_dns_boot **out)
{
    *out = NULL;
    size_t any = 0;
    for (size_t i = 0; i < cfg->npools; i++)
        any += ch_conf_membership_dns(&cfg->pools[i]);
    if (any == 0)
        return 0;
    px_dns_boot *b = calloc(1, sizeof(*b));
    if (b == NULL || (b->docs = calloc(cfg->npools, sizeof(*b->docs))) == NULL) {
        free(b);
        PX_LOGL(log, PX_LOG_ERR, "out of memory");
        return -1;
    }
    b->n = cfg->npools;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < cfg->npools; i++) {
        ch_conf_pool *pc = &cfg->pools[i];
        if (!ch_conf_membership_dns(pc))
            continue;
        char why[600];
        size_t len = 0;
        char *text = boot_lookup(pc, &len, why, sizeof(why));
        int64_t epoch = 0;
        ch_config_error err;
        if (text != NULL &&
            ch_config_membership_doc(pc, pc->membership, text, len, &epoch, &err) != 0) {
            ch_config_error_str(&err, why, sizeof(why));
            free(text);
            text = NULL;
        }
        if (text != NULL) {
            b->docs[i] = (boot_doc){text, len};
            PX_LOGL(log, PX_LOG_NOTICE, "pool %s: membership from %s: %zu servers", pc->name,
                    pc->membership, pc->nservers);
        } else if (pc->nservers > 0) {
            PX_LOGL(log, PX_LOG_WARN,
                    "pool %s: cannot resolve its membership %s (%s): serving the file's %zu "
                    "servers until it answers",
                    pc->name, pc->membership, why, pc->nservers);
        } else {
            PX_LOGL(log, PX_LOG_ERR,
                    "pool %s: cannot resolve its membership %s (%s), and the file has no "
                    "servers",
                    pc->name, pc->membership, why);
            rc = -1;
        }
    }
    if (rc != 0) {
        px_dns_boot_free(b);
        return -1;
    }
    *out = b;
    return 0;
}

/* ---- the watch --------------------------------------------------------------------------- */

static void tick_cb(uv_timer_t *t);

/* The wait before the next lookup: the interval, or the answer's TTL when shorter, never under
 * the floor. */
static void schedule(dns_pool *dp, uint32_t ttl_s)
{
    uint64_t ms = (uint64_t)dp->interval_ms;
    if (ttl_s != UINT32_MAX && (uint64_t)ttl_s * 1000u < ms)
        ms = (uint64_t)ttl_s * 1000u;
    if (ms < CH_CONF_MIN_MEMBERSHIP_INTERVAL)
        ms = CH_CONF_MIN_MEMBERSHIP_INTERVAL;
    dp->next_ms = ms;
    uv_timer_start(&dp->tick, tick_cb, ms, 0);
}

/* The list served is kept: why (logged when it starts, or its reason changes). */
static void keep(dns_pool *dp, const char *why)
{
    if (!dp->keeping || strcmp(dp->why, why) != 0)
        PX_LOG(dp->w->m, PX_LOG_WARN,
               "dns: pool %s: %s: %s; keeping its %zu servers (epoch %lld) until it answers "
               "(logged once until that changes)",
               dp->name, dp->url, why, served(dp)->nservers, (long long)served(dp)->epoch);
    dp->keeping = true;
    snprintf(dp->why, sizeof(dp->why), "%s", why);
}

static void answer(void *arg, const px_dns_result *r)
{
    dns_pool *dp = arg;
    dp->lookups++;
    if (!r->ok || r->n == 0) {
        if (!r->ok)
            dp->failed++;
        else
            dp->empty++;
        char why[200];
        if (r->ok && r->unresolved > 0)
            snprintf(why, sizeof(why), "the answer has no server (%zu SRV targets without an "
                     "address)", r->unresolved);
        keep(dp, !r->ok ? r->error : r->unresolved > 0 ? why : "the answer has no server");
        schedule(dp, UINT32_MAX);
        return;
    }
    if (dp->keeping)
        PX_LOG(dp->w->m, PX_LOG_NOTICE, "dns: pool %s: %s answers again (%zu addresses)",
               dp->name, dp->url, r->n);
    dp->keeping = false;
    dp->why[0] = '\0';
    const px_shared_pool *sp = served(dp);
    px_buf doc = {0};
    if (px_dns_doc(r->servers, r->n, sp->conf, &doc) != 0) {
        keep(dp, "out of memory");
        px_buf_free(&doc);
        schedule(dp, UINT32_MAX);
        return;
    }
    if (sp->doc != NULL && sp->doclen == doc.len && memcmp(sp->doc, doc.p, doc.len) == 0) {
        /* No change; a removal waiting its hold-down did not happen after all. */
        fleet_damp_withdraw(&dp->change.damp, sp->epoch);
    } else {
        fleet_change_committed(&dp->change, doc.p, doc.len, sp->epoch + 1);
    }
    px_buf_free(&doc);
    schedule(dp, r->ttl_s);
}

static void tick_cb(uv_timer_t *t)
{
    dns_pool *dp = t->data;
    if (px_dns_lookup(dp->dns, dp->host, dp->srv, dp->port, answer, dp) != 0) {
        keep(dp, "out of memory");
        schedule(dp, UINT32_MAX);
    }
}

static void on_changed(void *arg)
{
    (void)arg; /* no fence: a DNS membership is never fenced */
}

/* Sets pool i's parts up (every handle initialized, so px_dns_stop can close them even when
 * this fails). 0, or -1 (logged). */
static int pool_init(px_dns_watch *w, dns_pool *dp, size_t i, boot_doc *bd)
{
    px_ctl *m = w->m;
    px_shared_pool *sp = &m->pools[i];
    const ch_conf_pool *pc = sp->conf;
    dp->w = w;
    dp->index = i;
    dp->srv = pc->membership_scheme == CH_CONF_MEMBERSHIP_DNS_SRV;
    dp->port = pc->membership_port;
    dp->interval_ms = pc->membership_interval_ms;
    dp->name = strdup(pc->name);
    dp->url = strdup(pc->membership);
    dp->host = strdup(pc->membership_endpoint);
    dp->change = (fleet_change){.m = m, .index = i, .name = dp->name, .url = dp->url,
                                .key = dp->url, .trigger = "dns: a changed answer",
                                .changed = on_changed, .arg = dp};
    fleet_change_init(&dp->change, pc->membership_hold_down_ms);
    dp->change.damp.by_id = true;
    uv_timer_init(m->loop, &dp->tick);
    dp->tick.data = dp;
    if (bd != NULL && bd->text != NULL) {
        sp->doc = bd->text;
        sp->doclen = bd->len;
        sp->epoch = 1;
        bd->text = NULL;
    }
    char why[300] = "out of memory";
    if (dp->name != NULL && dp->url != NULL && dp->host != NULL)
        dp->dns = px_dns_new(m->loop, pc->membership_resolver, PX_DNS_TIMEOUT_MS, why,
                             sizeof(why));
    if (dp->dns == NULL) {
        PX_LOG(m, PX_LOG_ERR, "dns: pool %s: %s", pc->name, why);
        return -1;
    }
    schedule(dp, UINT32_MAX);
    return 0;
}

int px_dns_start(px_ctl *m, px_dns_boot *boot)
{
    if (boot == NULL)
        return 0;
    px_dns_watch *w = calloc(1, sizeof(*w));
    size_t n = 0;
    for (size_t i = 0; i < m->npools; i++)
        n += ch_conf_membership_dns(m->pools[i].conf);
    if (w == NULL || (w->pools = calloc(n ? n : 1, sizeof(*w->pools))) == NULL) {
        free(w);
        px_dns_boot_free(boot);
        PX_LOG(m, PX_LOG_ERR, "dns: out of memory");
        return -1;
    }
    w->m = m;
    m->dns = w;
    int rc = 0;
    for (size_t i = 0; i < m->npools; i++) {
        if (!ch_conf_membership_dns(m->pools[i].conf))
            continue;
        boot_doc *bd = i < boot->n ? &boot->docs[i] : NULL;
        if (pool_init(w, &w->pools[w->n++], i, bd) != 0)
            rc = -1;
    }
    px_dns_boot_free(boot);
    return rc;
}

static void handle_closed(uv_handle_t *h)
{
    px_dns_watch *w = h->data;
    if (--w->closing == 0) {
        free(w->pools);
        free(w);
    }
}

void px_dns_stop(px_ctl *m)
{
    px_dns_watch *w = m->dns;
    if (w == NULL)
        return;
    m->dns = NULL;
    w->closing = 1; /* held until every pool's handles are on their way */
    for (size_t i = 0; i < w->n; i++) {
        dns_pool *dp = &w->pools[i];
        w->closing += 2;
        px_dns_free(dp->dns);
        dp->tick.data = w;
        uv_close((uv_handle_t *)&dp->tick, handle_closed);
        fleet_change_close(&dp->change, w, handle_closed);
        free(dp->name);
        free(dp->url);
        free(dp->host);
    }
    if (--w->closing == 0) {
        free(w->pools);
        free(w);
    }
}

bool px_dns_stats_get(const px_ctl *m, size_t i, px_dns_stats *out)
{
    const px_dns_watch *w = m->dns;
    for (size_t k = 0; w != NULL && k < w->n; k++) {
        const dns_pool *dp = &w->pools[k];
        if (dp->index != i)
            continue;
        *out = (px_dns_stats){
            .epoch = m->pools[i].epoch,
            .lookups = dp->lookups,
            .failed = dp->failed,
            .empty = dp->empty,
            .keeping = dp->keeping,
            .held_down = fleet_damp_waiting(&dp->change.damp),
            .applied = dp->change.applied,
            .damped = dp->change.damp.damped,
            .refused = dp->change.refused_invalid + dp->change.refused_stale,
            .next_ms = dp->next_ms,
        };
        return true;
    }
    return false;
}

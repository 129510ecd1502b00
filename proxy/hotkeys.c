/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hotkeys.c — the workers' key summaries merged per window, and their reports (hotkeys.h).
 *
 * Ownership: every summary is the control thread's. Per pool and worker two exist: the one
 * lent to the worker (px_pool.hot, which only that worker's thread touches between two swaps)
 * and a cleared spare; the swap job exchanges them, so the worker never allocates, frees or
 * waits, and the control thread reads the filled one after px_worker_call returned (its mutex
 * orders the worker's writes before the reads). Cost per window: one job per worker, then per
 * pool nworkers merges and one decay, O(nworkers * k log k).
 *
 * Rates: a window's count over its measured length. The 60 s view decays by PX_HOT_DECAY
 * before each window is merged in, so a key steady at r per window holds r / (1 - PX_HOT_DECAY)
 * = 60 r, and its rate is the count times (1 - PX_HOT_DECAY) per window length. The error
 * bounds scale the same way. A key absent from a view is reported at that view's floor, with
 * an error of the floor: at most that, possibly zero.
 */
#include "hotkeys.h"
#include "info_name.h"
#include "json.h"
#include "backend.h"
#include "log.h"

#include "hot/topk.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PX_HOT_DECAY (59.0 / 60.0)
#define HOT_MIN_LOAD 100u /* a server's requests in a window below which no key is logged */
#define HOT_TRACKED 16u   /* keys over the share tracked per pool (logged as they cross) */

#define U(x) ((unsigned long long)(x))

typedef struct hk_pool {
    ch__topk *last;   /* the last window, all workers */
    ch__topk *minute; /* decayed: about the last 60 windows */
    ch__topk *total;  /* since the start */
    ch__topk **lent;  /* [nworkers]: the worker's px_pool.hot */
    ch__topk **spare; /* [nworkers]: cleared; after a swap, the filled one */
    uint64_t *srv_now, *srv_prev; /* servers' requests summed over the workers */
    size_t nsrv;
    bool srv_valid;   /* srv_prev is a window old (not the first window, no resize) */
    uint64_t over[HOT_TRACKED]; /* hashes of keys over the share in the last window */
    size_t nover;
} hk_pool;

struct px_hotkeys {
    uv_timer_t timer;
    px_ctl *m;
    uint64_t since_ms;   /* loop time the current window began */
    uint64_t last_ms;    /* the last window's length */
    uint64_t windows;    /* windows merged */
    hk_pool *pools;      /* [m->npools] */
    pthread_mutex_t lock; /* guards info */
    px_buf info;
};

/* ---- the window --------------------------------------------------------------------------- */

typedef struct swap_job {
    px_hotkeys *h;
    unsigned w;
} swap_job;

/* On worker w: the cleared spares in, the filled summaries out, and the servers' request
 * counts summed (the same servers in the same order on every worker, as snapshot.c relies). */
static void swap_on_worker(px_worker *px, void *arg)
{
    swap_job *j = arg;
    for (size_t i = 0; i < px->npools; i++) {
        px_pool *pool = &px->pools[i];
        hk_pool *hp = &j->h->pools[i];
        ch__topk *filled = pool->hot;
        pool->hot = hp->spare[j->w];
        hp->lent[j->w] = pool->hot;
        hp->spare[j->w] = filled;
        for (size_t s = 0; s < pool->nservers && s < hp->nsrv; s++)
            hp->srv_now[s] += pool->servers[s].stats.requests;
    }
}

/* The owner's index of an entry's key under sp's placement, or SIZE_MAX (key cut short). */
static size_t owner_of(const px_shared_pool *sp, const ch__topk_entry *e)
{
    if (e->truncated || sp->members == NULL)
        return SIZE_MAX;
    const ch_table *t = ch_membership_table(sp->members);
    if (t == NULL)
        return SIZE_MAX;
    size_t o = ch_lookup(t, e->key, e->keylen);
    return o < sp->nservers ? o : SIZE_MAX;
}

/* A key as text for a log line, INFO or a metric label: printable ASCII as it is (but for '%',
 * '"' and '\\'), other bytes %XX; or, when names are not allowed, h:<hash>. */
static int key_text(px_buf *b, const ch__topk_entry *e, bool names)
{
    if (!names)
        return px_buf_printf(b, "h:%016llx", U(e->hash));
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < e->keylen; i++) {
        unsigned char ch = (unsigned char)e->key[i];
        if (ch > 0x20 && ch < 0x7f && ch != '%' && ch != '"' && ch != '\\')
            rc = px_buf_append(b, &e->key[i], 1);
        else
            rc = px_buf_printf(b, "%%%02X", ch);
    }
    return rc;
}

/* A Prometheus label value: '\\', '"' and newlines escaped (as metrics.c's). */
static int label(px_buf *b, const char *s)
{
    int rc = 0;
    for (; rc == 0 && *s != '\0'; s++)
        rc = *s == '\\'  ? px_buf_append(b, "\\\\", 2)
             : *s == '"'  ? px_buf_append(b, "\\\"", 2)
             : *s == '\n' ? px_buf_append(b, "\\n", 2)
                          : px_buf_append(b, s, 1);
    return rc;
}

/* Logs the keys of pool i that reached its hot_key_share of their server's requests in the
 * window just merged, once as each crosses. */
static void log_crossings(px_hotkeys *h, size_t i, double secs)
{
    px_ctl *m = h->m;
    const px_shared_pool *sp = &m->pools[i];
    hk_pool *hp = &h->pools[i];
    double share = sp->conf->hot_key_share;
    uint64_t over[HOT_TRACKED];
    size_t nover = 0;
    ch__topk_entry es[HOT_TRACKED];
    size_t n = share > 0 && hp->srv_valid ? ch__topk_sorted(hp->last, es, HOT_TRACKED) : 0;
    for (size_t k = 0; k < n; k++) {
        size_t o = owner_of(sp, &es[k]);
        if (o == SIZE_MAX || o >= hp->nsrv)
            continue;
        uint64_t load = hp->srv_now[o] - hp->srv_prev[o];
        uint64_t lower = es[k].count - es[k].error; /* surely this many */
        if (load < HOT_MIN_LOAD || (double)lower < share * (double)load)
            continue;
        over[nover++] = es[k].hash;
        bool was = false;
        for (size_t q = 0; q < hp->nover && !was; q++)
            was = hp->over[q] == es[k].hash;
        if (was)
            continue;
        px_buf name = {0};
        if (key_text(&name, &es[k], sp->conf->hot_key_names) == 0 &&
            px_buf_append(&name, "", 1) == 0) {
            double pct = lower >= load ? 100.0 : 100.0 * (double)lower / (double)load;
            PX_LOG(m, PX_LOG_WARN,
                   "pool %s: hot key %s (hash %016llx) is %.0f%% of server %s's requests: "
                   "%.0f/s of %.0f/s (hot_key_share %g)",
                   sp->conf->name, name.p, U(es[k].hash), pct, sp->servers[o]->id,
                   (double)lower / secs, (double)load / secs, share);
        }
        px_buf_free(&name);
    }
    memcpy(hp->over, over, nover * sizeof(*over));
    hp->nover = nover;
}

/* Makes pool i's server arrays match its servers now (a reload may change them). */
static int fit_servers(hk_pool *hp, size_t n)
{
    if (hp->nsrv == n && hp->srv_now != NULL) {
        memset(hp->srv_now, 0, n * sizeof(*hp->srv_now));
        return 0;
    }
    free(hp->srv_now);
    free(hp->srv_prev);
    hp->srv_now = calloc(n + 1, sizeof(*hp->srv_now));
    hp->srv_prev = calloc(n + 1, sizeof(*hp->srv_prev));
    hp->nsrv = hp->srv_now != NULL && hp->srv_prev != NULL ? n : 0;
    hp->srv_valid = false;
    return hp->nsrv == n ? 0 : -1;
}

static int render_info(px_hotkeys *h, px_buf *b);

static void window_cb(uv_timer_t *t)
{
    px_hotkeys *h = t->data;
    px_ctl *m = h->m;
    if (m->stopping)
        return;
    uint64_t now = uv_now(m->loop);
    h->last_ms = now > h->since_ms ? now - h->since_ms : 1;
    h->since_ms = now;
    for (size_t i = 0; i < m->npools; i++)
        (void)fit_servers(&h->pools[i], m->pools[i].nservers);
    for (unsigned w = 0; w < m->nworkers; w++) {
        swap_job j = {h, w};
        px_worker_call(&m->workers[w], swap_on_worker, &j);
    }
    double secs = (double)h->last_ms / 1000.0;
    for (size_t i = 0; i < m->npools; i++) {
        hk_pool *hp = &h->pools[i];
        ch__topk_clear(hp->last);
        for (unsigned w = 0; w < m->nworkers; w++) {
            if (hp->spare[w] == NULL)
                continue;
            ch__topk_merge(hp->last, hp->spare[w]);
            ch__topk_clear(hp->spare[w]);
        }
        ch__topk_decay(hp->minute, PX_HOT_DECAY);
        ch__topk_merge(hp->minute, hp->last);
        ch__topk_merge(hp->total, hp->last);
        log_crossings(h, i, secs);
        if (hp->nsrv > 0) {
            memcpy(hp->srv_prev, hp->srv_now, hp->nsrv * sizeof(*hp->srv_now));
            hp->srv_valid = true;
        }
    }
    h->windows++;
    px_buf text = {0};
    if (render_info(h, &text) == 0) {
        pthread_mutex_lock(&h->lock);
        px_buf tmp = h->info;
        h->info = text;
        text = tmp;
        pthread_mutex_unlock(&h->lock);
    }
    px_buf_free(&text);
}

/* ---- start and stop ----------------------------------------------------------------------- */

int px_hotkeys_start(px_ctl *m)
{
    if (m->no_hot_keys)
        return 0;
    px_hotkeys *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return -1;
    m->hot = h;
    h->m = m;
    pthread_mutex_init(&h->lock, NULL);
    h->pools = calloc(m->npools, sizeof(*h->pools));
    if (h->pools == NULL)
        return -1;
    for (size_t i = 0; i < m->npools; i++) {
        hk_pool *hp = &h->pools[i];
        hp->last = ch__topk_new(PX_HOT_K, PX_HOT_KEYMAX);
        hp->minute = ch__topk_new(PX_HOT_K, PX_HOT_KEYMAX);
        hp->total = ch__topk_new(PX_HOT_K, PX_HOT_KEYMAX);
        hp->lent = calloc(m->nworkers, sizeof(*hp->lent));
        hp->spare = calloc(m->nworkers, sizeof(*hp->spare));
        if (hp->last == NULL || hp->minute == NULL || hp->total == NULL || hp->lent == NULL ||
            hp->spare == NULL)
            return -1;
        for (unsigned w = 0; w < m->nworkers; w++)
            if ((hp->spare[w] = ch__topk_new(PX_HOT_K, PX_HOT_KEYMAX)) == NULL)
                return -1;
        /* The servers' counts start at zero: the first window's loads are known. */
        if (fit_servers(hp, m->pools[i].nservers) != 0)
            return -1;
        hp->srv_valid = true;
    }
    /* The first summaries go to the workers before they start, so counting begins at once
     * (no job is needed: their threads have not run yet). */
    for (unsigned w = 0; w < m->nworkers; w++)
        for (size_t i = 0; i < m->npools && i < m->workers[w].npools; i++) {
            hk_pool *hp = &h->pools[i];
            m->workers[w].pools[i].hot = hp->lent[w] = hp->spare[w];
            if ((hp->spare[w] = ch__topk_new(PX_HOT_K, PX_HOT_KEYMAX)) == NULL)
                return -1;
        }
    uv_timer_init(m->loop, &h->timer);
    h->timer.data = h;
    h->since_ms = uv_now(m->loop);
    uv_timer_start(&h->timer, window_cb, PX_HOT_WINDOW_MS, PX_HOT_WINDOW_MS);
    return 0;
}

void px_hotkeys_stop(px_ctl *m)
{
    px_hotkeys *h = m->hot;
    if (h != NULL && h->timer.loop != NULL && !uv_is_closing((uv_handle_t *)&h->timer))
        uv_close((uv_handle_t *)&h->timer, NULL);
}

void px_hotkeys_free(px_ctl *m)
{
    px_hotkeys *h = m->hot;
    if (h == NULL)
        return;
    for (size_t i = 0; h->pools != NULL && i < m->npools; i++) {
        hk_pool *hp = &h->pools[i];
        ch__topk_free(hp->last);
        ch__topk_free(hp->minute);
        ch__topk_free(hp->total);
        for (unsigned w = 0; w < m->nworkers; w++) {
            if (hp->lent != NULL)
                ch__topk_free(hp->lent[w]);
            if (hp->spare != NULL)
                ch__topk_free(hp->spare[w]);
        }
        free(hp->lent);
        free(hp->spare);
        free(hp->srv_now);
        free(hp->srv_prev);
    }
    free(h->pools);
    px_buf_free(&h->info);
    pthread_mutex_destroy(&h->lock);
    free(h);
    m->hot = NULL;
}

/* ---- reports ------------------------------------------------------------------------------ */

/* One key's figures in pool i: from the 60 s view's entry e, the other views looked up. */
typedef struct hk_figures {
    double rate, rate_error;         /* the last window, per second */
    double rate_60s, rate_60s_error; /* the decayed view, per second */
    uint64_t count, count_error;     /* since the start */
    size_t owner;                    /* SIZE_MAX: unknown */
} hk_figures;

static hk_figures figures(const px_hotkeys *h, size_t i, const ch__topk_entry *e)
{
    const hk_pool *hp = &h->pools[i];
    double secs = h->last_ms > 0 ? (double)h->last_ms / 1000.0 : PX_HOT_WINDOW_MS / 1000.0;
    hk_figures f = {0};
    ch__topk_entry x;
    if (ch__topk_find(hp->last, e->hash, &x)) {
        f.rate = (double)x.count / secs;
        f.rate_error = (double)x.error / secs;
    } else {
        f.rate = f.rate_error = (double)ch__topk_floor(hp->last) / secs;
    }
    f.rate_60s = (double)e->count * (1 - PX_HOT_DECAY) / secs;
    f.rate_60s_error = (double)e->error * (1 - PX_HOT_DECAY) / secs;
    if (ch__topk_find(hp->total, e->hash, &x)) {
        f.count = x.count;
        f.count_error = x.error;
    } else {
        f.count = f.count_error = ch__topk_floor(hp->total);
    }
    f.owner = owner_of(&h->m->pools[i], e);
    return f;
}

int px_hotkeys_json(px_ctl *m, px_buf *b)
{
    px_hotkeys *h = m->hot;
    if (h == NULL)
        return -1;
    ch__topk_entry *es = calloc(PX_HOT_K, sizeof(*es));
    if (es == NULL)
        return -1;
    int rc = px_buf_printf(b, "{\"window_ms\":%llu,\"windows\":%llu,\"k\":%u,\"pools\":[",
                           U(h->last_ms), U(h->windows), PX_HOT_K);
    for (size_t i = 0; i < m->npools; i++) {
        const px_shared_pool *sp = &m->pools[i];
        const hk_pool *hp = &h->pools[i];
        rc |= px_buf_printf(b, "%s{\"pool\":", i > 0 ? "," : "");
        rc |= px_json_string(b, sp->conf->name, strlen(sp->conf->name), true);
        rc |= px_buf_printf(b, ",\"total\":%llu,\"floor\":%llu,\"keys\":[",
                            U(ch__topk_total(hp->total)), U(ch__topk_floor(hp->total)));
        size_t n = ch__topk_sorted(hp->minute, es, PX_HOT_K);
        for (size_t k = 0; k < n; k++) {
            hk_figures f = figures(h, i, &es[k]);
            rc |= px_buf_append(b, k > 0 ? ",{\"key\":" : "{\"key\":", k > 0 ? 8 : 7);
            rc |= px_json_string(b, es[k].key, es[k].keylen, true);
            rc |= px_buf_printf(b, ",\"key_hash\":\"%016llx\",\"truncated\":%s,\"server\":",
                                U(es[k].hash), es[k].truncated ? "true" : "false");
            if (f.owner == SIZE_MAX)
                rc |= px_buf_append(b, "null", 4);
            else
                rc |= px_json_string(b, sp->servers[f.owner]->id, strlen(sp->servers[f.owner]->id),
                                     true);
            rc |= px_buf_printf(b,
                                ",\"rate\":%.3f,\"rate_error\":%.3f,\"rate_60s\":%.3f,"
                                "\"rate_60s_error\":%.3f,\"count\":%llu,\"count_error\":%llu}",
                                f.rate, f.rate_error, f.rate_60s, f.rate_60s_error, U(f.count),
                                U(f.count_error));
        }
        rc |= px_buf_append(b, "]}", 2);
    }
    rc |= px_buf_append(b, "]}\n", 3);
    free(es);
    return rc == 0 ? 0 : -1;
}

int px_hotkeys_metrics(px_ctl *m, px_buf *b)
{
    px_hotkeys *h = m->hot;
    if (h == NULL)
        return 0;
    static const struct {
        const char *name, *help;
        bool error;
    } fams[] = {
        {"chash_proxy_hot_key_rate",
         "A hot key's requests per second over about the last 60 s (the pool's top keys; key "
         "is h:<hash> unless hot_key_names).", false},
        {"chash_proxy_hot_key_rate_error",
         "The error bound of chash_proxy_hot_key_rate: the true rate is within [rate - error, "
         "rate].", true},
    };
    ch__topk_entry es[PX_HOT_SHOWN];
    int rc = 0;
    for (size_t f = 0; f < sizeof(fams) / sizeof(fams[0]); f++) {
        rc |= px_buf_printf(b, "# HELP %s %s\n# TYPE %s gauge\n", fams[f].name, fams[f].help,
                            fams[f].name);
        for (size_t i = 0; i < m->npools; i++) {
            const px_shared_pool *sp = &m->pools[i];
            size_t n = ch__topk_sorted(h->pools[i].minute, es, PX_HOT_SHOWN);
            for (size_t k = 0; k < n; k++) {
                hk_figures fg = figures(h, i, &es[k]);
                rc |= px_buf_printf(b, "%s{pool=\"", fams[f].name);
                rc |= label(b, sp->conf->name);
                rc |= px_buf_append(b, "\",key=\"", 7);
                rc |= key_text(b, &es[k], sp->conf->hot_key_names);
                rc |= px_buf_append(b, "\",server=\"", 10);
                rc |= label(b, fg.owner == SIZE_MAX ? "" : sp->servers[fg.owner]->id);
                rc |= px_buf_printf(b, "\"} %.3f\n",
                                    fams[f].error ? fg.rate_60s_error : fg.rate_60s);
            }
        }
    }
    return rc == 0 ? 0 : -1;
}

/* INFO's section: per pool, its top keys as pool_<name>_hot_key_<i>:key=..,rate=..,.. */
static int render_info(px_hotkeys *h, px_buf *b)
{
    px_ctl *m = h->m;
    ch__topk_entry es[PX_HOT_SHOWN];
    int rc = px_buf_printf(b, "\r\n# Hotkeys\r\nhot_keys_window_ms:%llu\r\n", U(h->last_ms));
    for (size_t i = 0; i < m->npools; i++) {
        const px_shared_pool *sp = &m->pools[i];
        size_t n = ch__topk_sorted(h->pools[i].minute, es, PX_HOT_SHOWN);
        for (size_t k = 0; k < n; k++) {
            hk_figures f = figures(h, i, &es[k]);
            rc |= px_buf_append(b, "pool_", 5);
            rc |= px_info_name(b, sp->conf->name);
            rc |= px_buf_printf(b, "_hot_key_%zu:key=", k);
            rc |= key_text(b, &es[k], sp->conf->hot_key_names);
            rc |= px_buf_printf(b, ",rate=%.1f,rate_error=%.1f,rate_60s=%.1f,server=%s\r\n",
                                f.rate, f.rate_error, f.rate_60s,
                                f.owner == SIZE_MAX ? "" : sp->servers[f.owner]->id);
        }
    }
    return rc == 0 ? 0 : -1;
}

int px_hotkeys_info(const px_ctl *m, px_buf *out)
{
    px_hotkeys *h = m->hot;
    if (h == NULL)
        return 0;
    pthread_mutex_lock(&h->lock);
    int rc = h->info.len > 0 ? px_buf_append(out, h->info.p, h->info.len) : 0;
    pthread_mutex_unlock(&h->lock);
    return rc;
}

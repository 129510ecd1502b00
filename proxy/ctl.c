/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl.c — the control thread (ctl.h): the shared pools, the listening sockets bound before any
 * worker starts, signals (SIGINT/SIGTERM stop, SIGHUP reopens the log and reloads, SIGUSR1
 * reopens the log), the stats and metrics ports, starting the workers and a clean shutdown.
 */
#include "ctl.h"
#include "admin_http.h"
#include "dns_watch.h"
#include "fleet.h"
#include "hotkeys.h"
#include "listen.h"
#include "metrics.h"
#include "notify.h"
#include "reload.h"
#include "redir.h"
#include "resolve.h"
#include "roster.h"
#include "stats.h"

#include "hot/near.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static void ctl_stop(px_ctl *m)
{
    if (m->stopping)
        return;
    m->stopping = true;
    px_notify_stopping();
    PX_LOG(m, PX_LOG_NOTICE, "shutting down");
    px_fleet_stop(m); /* first: a change it holds prepared is dropped on the workers */
    px_dns_stop(m);
    for (unsigned w = 0; w < m->nworkers; w++) {
        if (m->workers[w].io.loop == NULL ||
            px_worker_call_within(&m->workers[w], px_worker_stop, NULL, PX_STOP_WAIT_MS))
            continue;
        /* A worker that does not take its stop job is stuck: a clean shutdown cannot happen,
         * and hanging on SIGTERM would be worse than exiting at once. */
        PX_LOG(m, PX_LOG_ERR, "worker %u did not stop within %u ms: exiting now", w,
               PX_STOP_WAIT_MS);
        _exit(1);
    }
    if (m->stats_listener != NULL) {
        px_stream_close(m->stats_listener);
        m->stats_listener = NULL;
    }
    px_admin_http_stop(m);
    px_hotkeys_stop(m);
    uv_signal_t *sigs[] = {&m->sigint, &m->sigterm, &m->sighup, &m->sigusr1, &m->sigusr2};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        uv_close((uv_handle_t *)sigs[i], NULL);
}

/* The -o file reopened at its path (a rotation moved it away); trigger names the signal. */
static void reopen_log(px_ctl *m, const char *trigger)
{
    if (m->log_path == NULL)
        return;
    if (px_log_reopen(&m->log, m->log_path) == 0)
        PX_LOG(m, PX_LOG_NOTICE, "%s: log file '%s' reopened", trigger, m->log_path);
    else
        PX_LOG(m, PX_LOG_ERR, "%s: cannot reopen log file '%s': %s; still writing to the old one",
               trigger, m->log_path, strerror(errno));
}

/* SIGHUP, as nutcracker's: the log file is reopened, then the config is reloaded. */
static void sighup_cb(uv_signal_t *h, int signum)
{
    (void)signum;
    px_ctl *m = h->data;
    reopen_log(m, "SIGHUP");
    px_reload_opts pools = PX_RELOAD_OPTS_POOLS;
    if (!m->stopping)
        (void)px_reload(m, "SIGHUP", &pools, NULL);
}

/* SIGUSR1, as nginx's (logrotate's postrotate sends it): the log file is reopened and nothing
 * else, so a rotation never applies an edit of the config waiting in the file. */
static void sigusr1_cb(uv_signal_t *h, int signum)
{
    (void)signum;
    reopen_log(h->data, "SIGUSR1");
}

/* SIGUSR2 is logged and ignored (nutcracker carries on too). SIGTTIN and SIGTTOU are not the
 * loop's: their handlers change the log level at once (px_log_level_signals, main.c). */
static void sigusr2_cb(uv_signal_t *h, int signum)
{
    px_ctl *m = h->data;
    PX_LOG(m, PX_LOG_NOTICE, "signal %d (SIGUSR2) received: ignored", signum);
}

static void signal_cb(uv_signal_t *h, int signum)
{
    px_ctl *m = h->data;
    PX_LOG(m, PX_LOG_NOTICE, "signal %d received", signum);
    ctl_stop(m);
}

/* The descriptors left for clients: the soft RLIMIT_NOFILE less what the proxy needs for
 * itself (PX_FD_RESERVE: stdio, the log, the stats and admin ports and their connections) and,
 * per worker, its loop (PX_FD_PER_WORKER), each pool's listener and its spare, and every
 * backend connection (servers x server_connections x the protocol's kinds of connection), plus
 * a tenth of the limit for servers a reload adds. 0: no limit to keep. Cost: O(pools). */
static uint64_t clients_budget(px_ctl *m, const ch_config *cfg)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
        rl.rlim_cur > (1u << 30))
        return 0;
    uint64_t per_worker = PX_FD_PER_WORKER;
    for (size_t i = 0; i < cfg->npools; i++) {
        const ch_conf_pool *pc = &cfg->pools[i];
        uint64_t conns = pc->server_connections > 0 ? (uint64_t)pc->server_connections : 1;
        conns *= px_codec_of(pc)->backend_dialects; /* a Redis pool's RESP2 and RESP3 ones */
        per_worker += 2 + pc->nservers * conns;
    }
    uint64_t reserved = PX_FD_RESERVE + m->nworkers * per_worker + rl.rlim_cur / 10;
    uint64_t left = rl.rlim_cur > reserved ? rl.rlim_cur - reserved : 0;
    if (left < 16) {
        PX_LOG(m, PX_LOG_WARN,
               "descriptors: the limit (ulimit -n) is %llu, and the backends and the proxy need "
               "about %llu: only %llu clients can be served; raise the limit",
               (unsigned long long)rl.rlim_cur, (unsigned long long)reserved,
               (unsigned long long)(left > 0 ? left : 1));
        return left > 0 ? left : 1;
    }
    PX_LOG(m, PX_LOG_NOTICE,
           "descriptors: limit %llu, %llu kept for the backends and the proxy: at most %llu "
           "clients in pools without client_connections",
           (unsigned long long)rl.rlim_cur, (unsigned long long)reserved,
           (unsigned long long)left);
    return left;
}

int px_ctl_check(const ch_config *cfg, char *why, size_t whylen)
{
    /* A reference for the pools' shared state to hold; cfg stays the caller's, so this one is
     * freed by hand at the end (each pool's init and clear take and drop their own). */
    px_conf *cref = px_conf_new((ch_config *)cfg);
    if (cref == NULL) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < cfg->npools; i++) {
        const ch_conf_pool *pc = &cfg->pools[i];
        px_shared_pool sp;
        struct sockaddr_storage sa;
        char r[256];
        if (pc->listen == NULL) {
            snprintf(why, whylen, "pool %s: no \"listen\" address", pc->name);
            rc = -1;
        } else if (pc->nservers == 0 && pc->membership != NULL) {
            /* its servers come from etcd or DNS at start: only its listen address is checked */
            if (pc->listen_port != 0 &&
                px_resolve(pc->listen_host, pc->listen_port, true, &sa, NULL, r, sizeof(r)) != 0) {
                snprintf(why, whylen, "pool %s: cannot resolve listen address '%s': %s", pc->name,
                         pc->listen, r);
                rc = -1;
            }
        } else if (px_shared_pool_init(&sp, cref, pc, why, whylen) != 0) {
            rc = -1;
        } else {
            px_shared_pool_clear(&sp);
            if (pc->listen_port != 0 &&
                px_resolve(pc->listen_host, pc->listen_port, true, &sa, NULL, r, sizeof(r)) != 0) {
                snprintf(why, whylen, "pool %s: cannot resolve listen address '%s': %s", pc->name,
                         pc->listen, r);
                rc = -1;
            }
            for (size_t s = 0; rc == 0 && s < pc->nservers; s++) {
                const ch_conf_server *cs = &pc->servers[s];
                if (cs->port != 0 &&
                    px_resolve(cs->host, cs->port, false, &sa, NULL, r, sizeof(r)) != 0) {
                    snprintf(why, whylen, "pool %s: cannot resolve server '%s': %s", pc->name,
                             cs->addr, r);
                    rc = -1;
                }
            }
        }
    }
    free(cref);
    return rc;
}

/* A worker's INFO text (metrics.c), handed to the workers as px_worker_env.info. */
static int ctl_info(void *arg, const px_worker *w, px_buf *out)
{
    return px_metrics_info(arg, w, out);
}

uint64_t px_rand_seed(const px_ctl *m, unsigned index)
{
    uint64_t x = m->rng + 0x9E3779B97F4A7C15ULL * (index + 1u);
    return x != 0 ? x : 1u;
}

int px_ctl_init(px_ctl *m, ch_config *cfg, unsigned nworkers)
{
    m->conf = px_conf_new(cfg);
    if (m->conf == NULL) {
        ch_config_free(cfg);
        return -1;
    }
    m->loop = malloc(sizeof(*m->loop));
    if (m->loop == NULL || uv_loop_init(m->loop) != 0) {
        free(m->loop);
        m->loop = NULL;
        return -1;
    }
    m->rng = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ULL ^ (uint64_t)getpid() ^ 1u;
    m->start_time = (uint64_t)time(NULL);
    struct {
        uv_signal_t *h;
        uv_signal_cb cb;
        int signum;
    } sigs[] = {{&m->sigint, signal_cb, SIGINT}, {&m->sigterm, signal_cb, SIGTERM},
                {&m->sighup, sighup_cb, SIGHUP}, {&m->sigusr1, sigusr1_cb, SIGUSR1},
                {&m->sigusr2, sigusr2_cb, SIGUSR2}};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        uv_signal_init(m->loop, sigs[i].h);
        sigs[i].h->data = m;
        uv_signal_start(sigs[i].h, sigs[i].cb, sigs[i].signum);
    }

    m->pools = calloc(cfg->npools, sizeof(*m->pools));
    m->workers = calloc(nworkers, sizeof(*m->workers));
    int **fds = calloc(cfg->npools, sizeof(*fds));
    if (m->pools == NULL || m->workers == NULL || fds == NULL) {
        free(fds);
        return -1;
    }
    m->nworkers = nworkers;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < cfg->npools; i++) {
        const ch_conf_pool *pc = &cfg->pools[i];
        char why[512];
        if (pc->listen == NULL) {
            PX_LOG(m, PX_LOG_ERR, "pool %s: no \"listen\" address", pc->name);
            rc = -1;
        } else if (px_shared_pool_init(&m->pools[i], m->conf, pc, why, sizeof(why)) != 0) {
            PX_LOG(m, PX_LOG_ERR, "%s", why);
            rc = -1;
        } else if ((m->pools[i].near_gens = ch__near_gens_new()) == NULL ||
                   (m->pools[i].roster = px_roster_new()) == NULL ||
                   (m->pools[i].redir = px_redir_new(nworkers)) == NULL) {
            PX_LOG(m, PX_LOG_ERR, "pool %s: out of memory", pc->name);
            px_shared_pool_clear(&m->pools[i]);
            ch__near_gens_free(m->pools[i].near_gens);
            m->pools[i].near_gens = NULL;
            px_roster_free(m->pools[i].roster);
            m->pools[i].roster = NULL;
            rc = -1;
        } else {
            m->pools[i].near_workers = nworkers;
            m->npools = i + 1;
            fds[i] = malloc(nworkers * sizeof(**fds));
            rc = fds[i] != NULL ? px_listen_pool(&m->log, pc, nworkers, fds[i]) : -1;
        }
    }
    if (rc == 0)
        m->clients_max = clients_budget(m, cfg);
    for (unsigned w = 0; rc == 0 && w < nworkers; w++) {
        px_worker_env env = {m->pools, m->npools, m->log, px_rand_seed(m, w),
                             &m->total_connections, &m->clients_open, m->clients_max,
                             ctl_info, m};
        rc = px_worker_init(&env, &m->workers[w], w, fds);
    }
    for (size_t i = 0; i < cfg->npools; i++) {
        for (unsigned w = 0; fds[i] != NULL && w < nworkers; w++)
            if (fds[i][w] >= 0)
                close(fds[i][w]);
        free(fds[i]);
    }
    free(fds);
    if (rc != 0)
        return -1;
    for (size_t i = 0; i < m->npools; i++)
        PX_LOG(m, PX_LOG_NOTICE, "pool %s: listening on %s, %zu servers, membership %s, %u workers",
               m->pools[i].conf->name, m->pools[i].conf->listen, m->pools[i].nservers,
               ch_membership_version(m->pools[i].members), nworkers);
    if (px_stats_start(m) != 0)
        return -1;
    if (px_admin_http_start(m) != 0)
        return -1;
    if (px_hotkeys_start(m) != 0) {
        PX_LOG(m, PX_LOG_ERR, "hot keys: out of memory");
        return -1;
    }
    return 0;
}

int px_ctl_run(px_ctl *m)
{
    for (unsigned w = 0; w < m->nworkers; w++) {
        if (px_worker_start(&m->workers[w]) != 0) {
            PX_LOG(m, PX_LOG_ERR, "cannot start worker %u: %s", w, strerror(errno));
            ctl_stop(m);
            break;
        }
    }
    /* Ready: every listener is bound (px_ctl_init) and every worker's loop runs to accept. */
    if (!m->stopping) {
        char status[96];
        snprintf(status, sizeof(status), "serving %zu pool%s with %u worker%s", m->npools,
                 m->npools == 1 ? "" : "s", m->nworkers, m->nworkers == 1 ? "" : "s");
        px_notify_ready(status);
    }
    uv_run(m->loop, UV_RUN_DEFAULT);
    return 0;
}

void px_ctl_free(px_ctl *m)
{
    if (m->loop != NULL) {
        ctl_stop(m); /* no-op after a signal; closes everything after a failed start */
        uv_run(m->loop, UV_RUN_DEFAULT);
    }
    for (unsigned w = 0; w < m->nworkers; w++)
        px_worker_free(&m->workers[w]);
    px_hotkeys_free(m); /* after the workers: it owns the summaries they counted into */
    free(m->workers);
    m->workers = NULL;
    if (m->loop != NULL) {
        if (uv_loop_close(m->loop) != 0)
            PX_LOG(m, PX_LOG_WARN, "event loop closed with handles still open");
        free(m->loop);
        m->loop = NULL;
    }
    for (size_t i = 0; i < m->npools; i++) {
        px_shared_pool_clear(&m->pools[i]);
        ch__near_gens_free(m->pools[i].near_gens);
        px_roster_free(m->pools[i].roster);
        px_redir_free(m->pools[i].redir);
    }
    free(m->pools);
    m->pools = NULL;
    px_conf_unref(m->conf);
    m->conf = NULL;
}

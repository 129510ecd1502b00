/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl_state.h — what the control thread holds (struct px_ctl): the state every module of the
 * control plane reads and writes (reload, fleet, metrics, stats, admin, hot keys). Only data:
 * it includes nothing of the control plane, so those modules sit below ctl.c, which sets them
 * up (ctl.h), and the control plane's includes form no circle (tests/lint/proxy_direction.py).
 */
#ifndef CHASH_PROXY_CTL_STATE_H
#define CHASH_PROXY_CTL_STATE_H

#include "pool.h"
#include "worker.h"

#include <uv.h>

typedef struct px_ctl px_ctl;
typedef struct px_admin_http px_admin_http; /* admin_http.h */
typedef struct px_reload_held px_reload_held; /* reload.h */
typedef struct px_fleet px_fleet;             /* fleet.h */
typedef struct px_dns_watch px_dns_watch;     /* dns_watch.h */

/* Descriptors the proxy keeps for itself (stdio, the log, the stats and admin ports and their
 * connections), and per worker for its loop (epoll, its wake-up and signal pipes). */
#define PX_FD_RESERVE 64u
#define PX_FD_PER_WORKER 8u

struct px_ctl {
    uv_loop_t *loop;
    px_log log;
    int log_level;          /* what every copy of log.level points to */
    const char *log_path;   /* -o, reopened on SIGHUP and SIGUSR1; NULL: stderr */
    const char *conf_path;  /* the -c file, absolute (set by main; re-read by a reload) */
    px_conf *conf;          /* the file as last loaded (a reference) */
    px_shared_pool *pools;
    size_t npools;
    px_worker *workers;
    unsigned nworkers;
    uv_signal_t sigint, sigterm, sighup, sigusr1, sigusr2; /* SIGTTIN/SIGTTOU: log.h */
    uint64_t reloads, reload_failures; /* stats: configs applied / rejected (SIGHUP, POST
                                          /-/reload) */
    uint64_t last_reload_unix_ms; /* when the last reload finished, applied or not (0: none) */
    bool last_reload_failed;      /* its outcome (false before any: the start's config applied) */
    px_stream *stats_listener;
    const char *stats_addr;
    int stats_port;
    uint64_t stats_interval_ms;
    px_admin_http *admin; /* NULL unless --metrics-port */
    const char *metrics_addr;
    int metrics_port;
    const char *admin_token; /* --admin-token-file's token: POST /-/reload needs it (NULL: not) */
    /* --admin-allow-host names: the Host values (without a port, any case) the admin port
     * accepts besides IP literals and localhost; the strings are main's argv */
    const char *const *admin_hosts;
    size_t nadmin_hosts;
    uint64_t start_time;
    uint64_t total_connections; /* client connections accepted, all workers (atomic); those
                                   open are the pools' px_shared_pool.clients */
    uint64_t clients_open;      /* client connections open, all pools and workers (atomic) */
    uint64_t clients_max;       /* the descriptors left for clients once the backends' and the
                                   proxy's own are set aside (0: no limit); pools without
                                   client_connections refuse clients beyond it */
    uint64_t rng;
    bool stopping;
    /* A reload prepared and not yet committed (reload.h), and who is told when a later reload
     * drops it (the fleet, whose two-phase change it was). */
    px_reload_held *held;
    void (*held_dropped)(void *arg, const char *trigger);
    void *held_dropped_arg;
    px_fleet *fleet; /* NULL unless a pool takes its membership from etcd */
    px_dns_watch *dns; /* NULL unless a pool takes its membership from DNS */
    struct px_hotkeys *hot; /* hot-key detection (hotkeys.h); NULL with --no-hot-keys */
    bool no_hot_keys;       /* --no-hot-keys */
};

#endif /* CHASH_PROXY_CTL_STATE_H */

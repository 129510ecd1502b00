/* SPDX-License-Identifier: Apache-2.0 */
/*
 * worker.h — a worker: one thread, one libuv loop, its copy of every pool (servers, backend
 * connections, clients, counters), a listener per pool, the probe timer, the servers a reload
 * retired, and the mailbox through which the control thread runs jobs on it.
 */
#ifndef CHASH_PROXY_WORKER_H
#define CHASH_PROXY_WORKER_H

#include "pool.h"

#include <pthread.h>
#include <stdbool.h>
#include <uv.h>

#define PX_PROBE_TICK_MS 100u   /* how often due probes are looked for */
#define PX_SWEEP_TICKS 10u      /* the clients' timeouts are looked at every 10 ticks (1 s) */
#define PX_ACCEPT_PAUSE_MS 100u /* out of descriptors: how long a listener stops accepting */
#define PX_STOP_WAIT_MS 10000u  /* shutdown: how long a worker may take to take its stop job */

/* A job the control thread runs on a worker's loop (px_worker_call). */
typedef void (*px_job_fn)(px_worker *w, void *arg);

/* What a worker needs of the control thread, handed to it at creation (ctl.c) so that the
 * worker calls nothing of the control plane by name: the pools it serves, the counters and
 * budget shared by every worker, its log and random seed, and the INFO text (metrics.c). */
typedef struct px_worker_env {
    px_shared_pool *pools;
    size_t npools;
    px_log log;
    uint64_t seed;
    uint64_t *accepted_total; /* client connections accepted, all workers (atomic) */
    uint64_t *clients_open;   /* client connections open, all pools and workers (atomic) */
    uint64_t clients_max;     /* the descriptors left for clients (0: no cap) */
    int (*info)(void *arg, const px_worker *w, px_buf *out); /* INFO for w's clients */
    void *info_arg;
} px_worker_env;

struct px_worker {
    px_io io;       /* the loop as the data path sees it (first: px_io * == px_worker *) */
    px_worker_env env;
    unsigned index; /* 0 .. nworkers-1, in log lines as "worker N" */
    pthread_t thread;
    bool started;   /* thread is running */
    px_pool *pools; /* as env.pools */
    size_t npools;
    uv_timer_t probe_timer;
    uint64_t ticks;     /* of probe_timer */
    px_dl retired;      /* retired servers (px_server.retired_link) */
    void *reload_plans; /* reload.c: this worker's prepared plans between two jobs */
    /* px_worker_call's mailbox */
    uv_async_t wake;
    pthread_mutex_t job_lock;
    pthread_cond_t job_cond;
    px_job_fn job_fn;
    void *job_arg;
    bool job_done;
    uv_async_t redir_wake; /* an invalidation redirected to one of its clients (redir.h) */
};

/* Worker `index` of env's pools: its loop and handles, its pools listening on fds[pool][index]
 * (taken over). Returns 0 or -1 (px_worker_free cleans up). */
int px_worker_init(const px_worker_env *env, px_worker *w, unsigned index, int **fds);
/* Runs the worker's loop in its own thread. Returns 0, or -1 (errno set). */
int px_worker_start(px_worker *w);
/* Closes the worker's handles; its loop then ends once the closes are done (a job, or at free). */
void px_worker_stop(px_worker *w, void *arg);
void px_worker_free(px_worker *w); /* joins the thread when started */
/* Runs fn(w, arg) on worker w's loop and waits for it (control thread only; not once the
 * workers are stopping). */
void px_worker_call(px_worker *w, px_job_fn fn, void *arg);
/* Closes the retired servers whose in-flight fragments are done (after each loop turn, and
 * after a reload's commit). */
void px_worker_reap(px_worker *w);
/* px_worker_call waiting at most ms: false when the job has not run by then (it may still run
 * later: the caller must not free what arg points to; shutdown then exits the process). */
bool px_worker_call_within(px_worker *w, px_job_fn fn, void *arg, unsigned ms);
/* The default worker count: half the CPUs this process may run on, at least one. */
unsigned px_default_threads(void);

#endif /* CHASH_PROXY_WORKER_H */

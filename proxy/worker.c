/* SPDX-License-Identifier: Apache-2.0 */
/*
 * worker.c — one worker's loop (worker.h): its pools' listeners handing connections to
 * px_client_accept, the probe tick, the servers a reload retired (closed once drained), the job
 * mailbox, start and a clean stop.
 */
#include "worker.h"
#include "backend.h"
#include "warm.h"
#include "client.h"
#include "route_build.h"
#include "route_near.h"
#include "redir.h"
#include "track.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void probe_cb(uv_timer_t *t)
{
    px_worker *w = t->data;
    for (size_t i = 0; i < w->npools; i++) {
        px_probe_due(&w->pools[i]);
        px_track_tick(&w->pools[i]);
        /* A window over with no request to notice it: its retired servers can go. */
        if (w->pools[i].warm.table != NULL && px_warm_left(&w->pools[i], px_io_now(&w->io)) == 0)
            px_warm_end(&w->pools[i]);
    }
    /* Every PX_SWEEP_TICKS ticks: the clients' timeouts. */
    if (++w->ticks % PX_SWEEP_TICKS == 0)
        for (size_t i = 0; i < w->npools; i++)
            px_client_sweep(&w->pools[i], px_io_now(&w->io));
}

/* ---- retired servers ------------------------------------------------------------------------ */

void px_worker_reap(px_worker *w)
{
    if (w->retired.next == NULL)
        return;
    px_dl *d = w->retired.next;
    while (d != &w->retired) {
        px_dl *next = d->next;
        px_server *s = PX_CONTAINER(d, px_server, retired_link);
        if (!px_server_busy(s) && !s->warm_source) {
            PX_LOG(&w->io, PX_LOG_INFO, "pool %s: removed server %s closed", s->pool->conf->name,
                   s->conf->id);
            px_server_dispose(s);
        }
        d = next;
    }
}

/* Runs after each iteration's flush: servers a reload removed close once drained; a new
 * placement drops the near cache's tracked entries (track.h). */
static void after_flush(px_io *io)
{
    px_worker *w = (px_worker *)(void *)io;
    if (w->retired.next != &w->retired)
        px_worker_reap(w);
    for (size_t i = 0; i < w->npools; i++)
        px_track_placement(&w->pools[i]);
}

/* ---- jobs ------------------------------------------------------------------------------------- */

static void wake_cb(uv_async_t *h)
{
    px_worker *w = h->data;
    pthread_mutex_lock(&w->job_lock);
    px_job_fn fn = w->job_fn;
    void *arg = w->job_arg;
    w->job_fn = NULL;
    pthread_mutex_unlock(&w->job_lock);
    if (fn == NULL)
        return;
    fn(w, arg);
    pthread_mutex_lock(&w->job_lock);
    w->job_done = true;
    pthread_cond_signal(&w->job_cond);
    pthread_mutex_unlock(&w->job_lock);
}

/* Invalidations redirected to clients of w (redir.h): delivered by each pool's clients. */
static void redir_cb(uv_async_t *h)
{
    px_worker *w = h->data;
    for (size_t i = 0; i < w->npools; i++)
        px_redir_drain(w->pools[i].shared->redir, w->index, px_client_redir_deliver);
}

/* Posts fn(w, arg) to w's loop. Returns false when w has no thread (fn then ran here). */
static bool job_post(px_worker *w, px_job_fn fn, void *arg)
{
    if (!w->started) { /* no thread (a failed start): the control thread owns the loop */
        fn(w, arg);
        return false;
    }
    pthread_mutex_lock(&w->job_lock);
    w->job_fn = fn;
    w->job_arg = arg;
    w->job_done = false;
    pthread_mutex_unlock(&w->job_lock);
    uv_async_send(&w->wake);
    return true;
}

void px_worker_call(px_worker *w, px_job_fn fn, void *arg)
{
    if (!job_post(w, fn, arg))
        return;
    pthread_mutex_lock(&w->job_lock);
    while (!w->job_done)
        pthread_cond_wait(&w->job_cond, &w->job_lock);
    pthread_mutex_unlock(&w->job_lock);
}

bool px_worker_call_within(px_worker *w, px_job_fn fn, void *arg, unsigned ms)
{
    if (!job_post(w, fn, arg))
        return true;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000u;
    until.tv_nsec += (long)(ms % 1000u) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&w->job_lock);
    int rc = 0;
    while (!w->job_done && rc == 0)
        rc = pthread_cond_timedwait(&w->job_cond, &w->job_lock, &until);
    bool done = w->job_done;
    pthread_mutex_unlock(&w->job_lock);
    return done;
}

/* ---- listening, and running out of descriptors -------------------------------------------- */

static void listen_cb(uv_stream_t *server, int status);

/* Opens the pool's listener on fd (taken over). 0, or a libuv error (fd closed). */
static int listener_open(px_pool *pool, int fd)
{
    const ch_conf_pool *pc = pool->conf;
    px_stream *st = px_stream_new(pool->io->loop, pc->listen_port == 0, pool);
    if (st == NULL) {
        close(fd);
        return UV_ENOMEM;
    }
    int rc = pc->listen_port == 0 ? uv_pipe_open(&st->u.pipe, fd) : uv_tcp_open(&st->u.tcp, fd);
    if (rc == 0)
        rc = uv_listen(&st->u.stream, pc->backlog > 0 ? pc->backlog : 512, listen_cb);
    else
        close(fd);
    if (rc < 0) {
        px_stream_close(st);
        return rc;
    }
    pool->listener = st;
    return 0;
}

static void listen_retry_cb(uv_timer_t *t)
{
    px_pool *pool = t->data;
    if (pool->io->stopping || pool->listener != NULL)
        return;
    int fd = pool->listen_spare;
    pool->listen_spare = -1;
    if (listener_open(pool, fd) != 0) {
        PX_LOG(pool->io, PX_LOG_ERR, "pool %s: cannot listen again on %s: this worker no longer "
               "accepts clients of the pool", pool->conf->name, pool->conf->listen);
        return;
    }
    /* A spare for the next pause; without one (no descriptor free now) a pause only sheds. */
    uv_os_fd_t lfd = -1;
    uv_fileno(&pool->listener->u.handle, &lfd);
    pool->listen_spare = lfd >= 0 ? fcntl(lfd, F_DUPFD_CLOEXEC, 0) : -1;
}

/* accept() failed with EMFILE/ENFILE. libuv calls the connection callback again at once while
 * accept keeps failing (its reserved-descriptor trick fails when another worker takes the
 * descriptor it freed), so the listener is closed, which ends that, and opened again from its
 * spare dup (the same socket: its backlog is kept) after PX_ACCEPT_PAUSE_MS. Meanwhile the
 * pool's longest-silent idle client is closed, so an idle flood rotates instead of locking
 * every newcomer out; the line saying so is written at most once per PX_FD_LOG_PERIOD_MS. */
static void listener_out_of_fds(px_pool *pool, int status)
{
    bool shed = px_client_shed_idle(pool);
    bool paused = pool->listen_spare >= 0;
    if (paused) {
        px_stream_close(pool->listener);
        pool->listener = NULL;
        uv_timer_start(&pool->listen_retry, listen_retry_cb, PX_ACCEPT_PAUSE_MS, 0);
    }
    if (px_log_due(&pool->fd_log_at, px_io_now(pool->io), PX_FD_LOG_PERIOD_MS)) {
        PX_LOG(pool->io, PX_LOG_WARN,
               "pool %s: accept: %s: %s%s (%llu more refusals or pauses not logged)",
               pool->conf->name, uv_strerror(status),
               paused ? "accepting paused for a moment" : "no spare descriptor to pause with",
               shed ? ", the longest idle client closed" : "",
               (unsigned long long)pool->fd_unlogged);
        pool->fd_unlogged = 0;
    } else {
        pool->fd_unlogged++;
    }
}

static void listen_cb(uv_stream_t *server, int status)
{
    px_stream *st = PX_CONTAINER(server, px_stream, u);
    px_pool *pool = st->owner;
    if (pool == NULL)
        return;
    if (status == UV_EMFILE || status == UV_ENFILE) {
        listener_out_of_fds(pool, status);
        return;
    }
    if (status < 0) {
        if (px_log_due(&pool->fd_log_at, px_io_now(pool->io), PX_FD_LOG_PERIOD_MS))
            PX_LOG(pool->io, PX_LOG_WARN, "pool %s: accept: %s", pool->conf->name,
                   uv_strerror(status));
        return;
    }
    px_client_accept(pool, server);
}

/* The INFO text of the worker whose pool asks: the control plane's, given at creation. */
static int worker_info(void *arg, px_buf *out)
{
    const px_worker *w = arg;
    return w->env.info(w->env.info_arg, w, out);
}

/* The worker's copy of shared pool sp, listening on fd (taken over). */
static int pool_init(px_worker *w, px_pool *pool, px_shared_pool *sp, int fd)
{
    const ch_conf_pool *pc = sp->conf;
    pool->io = &w->io;
    pool->worker = w;
    pool->shared = sp;
    pool->conf = pc;
    pool->members = sp->members;
    pool->table = ch_membership_table(sp->members);
    pool->health = sp->health;
    pool->tls_listen = sp->tls_listen;
    pool->tls_servers = sp->tls_servers;
    pool->mc_users = sp->mc_users;
    pool->nservers = sp->nservers;
    pool->accepted_total = w->env.accepted_total;
    pool->clients_open = w->env.clients_open;
    pool->clients_max = w->env.clients_max;
    pool->listen_spare = -1;
    pool->info = worker_info;
    pool->info_arg = w;
    pool->windex = w->index;
    px_redir_wake_on(sp->redir, w->index, &w->redir_wake);
    px_dl_init(&pool->clients);
    px_pool_configure(pool);
    pool->servers = calloc(pool->nservers, sizeof(*pool->servers));
    if (pool->servers == NULL) {
        close(fd);
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < pool->nservers; i++)
        rc = px_server_init(pool, &pool->servers[i], i, sp->servers[i]);
    if (rc != 0) {
        close(fd);
        return -1;
    }
    pool->listen_spare = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    uv_timer_init(w->io.loop, &pool->listen_retry);
    pool->listen_retry.data = pool;
    rc = listener_open(pool, fd);
    if (rc < 0) {
        PX_LOG(&w->io, PX_LOG_ERR, "pool %s: cannot listen on %s: %s", pc->name, pc->listen,
               uv_strerror(rc));
        return -1;
    }
    if (pc->preconnect)
        for (size_t i = 0; i < pool->nservers; i++)
            px_server_preconnect(&pool->servers[i]);
    px_track_tick(pool); /* the invalidation links at once: nothing is kept before they are live */
    return 0;
}

/* ---- lifecycle -------------------------------------------------------------------------------- */

int px_worker_init(const px_worker_env *env, px_worker *w, unsigned index, int **fds)
{
    w->env = *env;
    w->index = index;
    uv_loop_t *loop = malloc(sizeof(*loop));
    if (loop == NULL || uv_loop_init(loop) != 0) {
        free(loop);
        return -1;
    }
    px_io_init(&w->io, loop, env->log, env->seed);
    w->io.after_flush = after_flush;
    pthread_mutex_init(&w->job_lock, NULL);
    pthread_cond_init(&w->job_cond, NULL);
    uv_async_init(loop, &w->wake, wake_cb);
    w->wake.data = w;
    uv_async_init(loop, &w->redir_wake, redir_cb);
    w->redir_wake.data = w;
    px_dl_init(&w->retired);
    uv_timer_init(loop, &w->probe_timer);
    w->probe_timer.data = w;
    uv_timer_start(&w->probe_timer, probe_cb, PX_PROBE_TICK_MS, PX_PROBE_TICK_MS);
    w->pools = calloc(env->npools, sizeof(*w->pools));
    if (w->pools == NULL)
        return -1;
    w->npools = env->npools;
    for (size_t i = 0; i < env->npools; i++) {
        int fd = fds[i][index];
        fds[i][index] = -1; /* taken over */
        if (pool_init(w, &w->pools[i], &env->pools[i], fd) != 0)
            return -1;
    }
    for (size_t i = 0; i < w->npools; i++) /* once every pool is set up: shadows name others */
        if (px_route_build(&w->pools[i], w->pools, w->npools) != 0)
            return -1;
    return 0;
}

static void *worker_main(void *arg)
{
    px_worker *w = arg;
    uv_run(w->io.loop, UV_RUN_DEFAULT);
    px_cache_drain(); /* what this thread kept (requests freed later go to their thread's) */
    return NULL;
}

int px_worker_start(px_worker *w)
{
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0)
        return -1;
    w->started = true;
    return 0;
}

void px_worker_stop(px_worker *w, void *arg)
{
    (void)arg;
    if (w->io.stopping)
        return;
    w->io.stopping = true;
    for (size_t i = 0; i < w->npools; i++) {
        px_pool *pool = &w->pools[i];
        if (pool->listener != NULL) {
            px_stream_close(pool->listener);
            pool->listener = NULL;
        }
        if (pool->listen_retry.loop != NULL && !uv_is_closing((uv_handle_t *)&pool->listen_retry))
            uv_close((uv_handle_t *)&pool->listen_retry, NULL);
        if (pool->listen_spare >= 0) {
            close(pool->listen_spare);
            pool->listen_spare = -1;
        }
        px_warm_end(pool); /* its retired servers close below */
        for (px_dl *d = pool->clients.next; d != NULL && d != &pool->clients; d = d->next)
            px_client_close(PX_CONTAINER(d, px_client, link));
        for (size_t s = 0; pool->servers != NULL && s < pool->nservers; s++)
            px_server_close(&pool->servers[s]);
    }
    while (w->retired.next != NULL && w->retired.next != &w->retired)
        px_server_dispose(PX_CONTAINER(w->retired.next, px_server, retired_link));
    px_io_close(&w->io);
    uv_close((uv_handle_t *)&w->probe_timer, NULL);
    uv_close((uv_handle_t *)&w->wake, NULL);
    for (size_t i = 0; i < w->npools; i++)
        px_redir_wake_on(w->pools[i].shared->redir, w->index, NULL);
    uv_close((uv_handle_t *)&w->redir_wake, NULL);
}

void px_worker_free(px_worker *w)
{
    if (w->started)
        pthread_join(w->thread, NULL);
    w->started = false;
    if (w->io.loop != NULL) {
        px_worker_stop(w, NULL); /* no-op after a stop job; closes everything after a failed init */
        uv_run(w->io.loop, UV_RUN_DEFAULT);
        if (uv_loop_close(w->io.loop) != 0)
            PX_LOG(&w->io, PX_LOG_WARN, "worker %u: event loop closed with handles still open",
                   w->index);
        free(w->io.loop);
        w->io.loop = NULL;
        pthread_mutex_destroy(&w->job_lock);
        pthread_cond_destroy(&w->job_cond);
    }
    for (size_t i = 0; i < w->npools; i++) {
        px_pool *pool = &w->pools[i];
        px_warm_end(pool);
        px_route_drop(pool); /* the requests on its tree are gone with the loop (its routes'
                                states, a near cache, with it) */
        for (size_t s = 0; pool->servers != NULL && s < pool->nservers; s++)
            px_server_free(&pool->servers[s]);
        free(pool->servers);
        free(pool->args);
        free(pool->keys);
        px_ctrack_free(pool->ctrack);
        pool->ctrack = NULL;
    }
    free(w->pools);
    w->pools = NULL;
}

/* Half the CPUs, at least one. A worker buys throughput only with a core of its own to run
 * on, and every request it serves also costs kernel time that runs beside it (the TCP stack's
 * softirqs for its four socket operations, its clients' and backends' sends): one worker per two
 * cores leaves that room. A worker without an idle core costs CPU per request and buys nothing:
 * the clients of one loop iteration split over two loops batch half as well (each backend write
 * and epoll_wait serves fewer requests). docs/PERFORMANCE.md (issue 18) has both measured on
 * 2 cores. */
unsigned px_default_threads(void)
{
    unsigned cpus = 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) {
        cpus = (unsigned)CPU_COUNT(&set);
    } else {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        cpus = n > 0 ? (unsigned)n : 1u;
    }
    return cpus >= 2 ? cpus / 2 : 1u;
}

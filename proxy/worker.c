/*
 * worker.c — one worker's loop (worker.h): its pools' listeners handing connections to
 * px_client_accept, the probe tick, the servers a reload retired (closed once drained), the job
 * mailbox, start and a clean stop.
 */
#include "worker.h"
#include "backend.h"
#include "client.h"
#include "ctl.h"
#include "metrics.h"
#include "route_pool.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void probe_cb(uv_timer_t *t)
{
    px_worker *w = t->data;
    for (size_t i = 0; i < w->npools; i++)
        px_probe_due(&w->pools[i]);
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
        if (!px_server_busy(s)) {
            PX_LOG(&w->io, PX_LOG_INFO, "pool %s: removed server %s closed", s->pool->conf->name,
                   s->conf->id);
            px_server_dispose(s);
        }
        d = next;
    }
}

/* Runs after each iteration's flush: servers a reload removed close once drained. */
static void after_flush(px_io *io)
{
    px_worker *w = (px_worker *)(void *)io;
    if (w->retired.next != &w->retired)
        px_worker_reap(w);
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

void px_worker_call(px_worker *w, px_job_fn fn, void *arg)
{
    if (!w->started) { /* no thread (a failed start): the control thread owns the loop */
        fn(w, arg);
        return;
    }
    pthread_mutex_lock(&w->job_lock);
    w->job_fn = fn;
    w->job_arg = arg;
    w->job_done = false;
    pthread_mutex_unlock(&w->job_lock);
    uv_async_send(&w->wake);
    pthread_mutex_lock(&w->job_lock);
    while (!w->job_done)
        pthread_cond_wait(&w->job_cond, &w->job_lock);
    pthread_mutex_unlock(&w->job_lock);
}

/* ---- pools ------------------------------------------------------------------------------------ */

static void listen_cb(uv_stream_t *server, int status)
{
    px_stream *st = PX_CONTAINER(server, px_stream, u);
    px_pool *pool = st->owner;
    if (status < 0) {
        PX_LOG(pool->io, PX_LOG_WARN, "pool %s: accept: %s", pool->conf->name,
               uv_strerror(status));
        return;
    }
    px_client_accept(pool, server);
}

/* The INFO text of the worker whose pool asks. */
static int worker_info(void *arg, px_buf *out)
{
    return px_metrics_info(arg, out);
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
    pool->nservers = sp->nservers;
    pool->next_client_id = 1;
    pool->accepted_total = &w->ctl->total_connections;
    pool->route = &px_route_pool;
    pool->info = worker_info;
    pool->info_arg = w;
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
    px_stream *st = rc == 0 ? px_stream_new(w->io.loop, pc->listen_port == 0, pool) : NULL;
    if (st == NULL) {
        close(fd);
        return -1;
    }
    rc = pc->listen_port == 0 ? uv_pipe_open(&st->u.pipe, fd) : uv_tcp_open(&st->u.tcp, fd);
    if (rc == 0)
        rc = uv_listen(&st->u.stream, pc->backlog > 0 ? pc->backlog : 512, listen_cb);
    else
        close(fd);
    if (rc < 0) {
        PX_LOG(&w->io, PX_LOG_ERR, "pool %s: cannot listen on %s: %s", pc->name, pc->listen,
               uv_strerror(rc));
        px_stream_close(st);
        return -1;
    }
    pool->listener = st;
    if (pc->preconnect)
        for (size_t i = 0; i < pool->nservers; i++)
            px_server_preconnect(&pool->servers[i]);
    return 0;
}

/* ---- lifecycle -------------------------------------------------------------------------------- */

int px_worker_init(px_ctl *ctl, px_worker *w, unsigned index, int **fds)
{
    w->ctl = ctl;
    w->index = index;
    uv_loop_t *loop = malloc(sizeof(*loop));
    if (loop == NULL || uv_loop_init(loop) != 0) {
        free(loop);
        return -1;
    }
    px_io_init(&w->io, loop, ctl->log, px_rand_seed(ctl, index));
    w->io.after_flush = after_flush;
    pthread_mutex_init(&w->job_lock, NULL);
    pthread_cond_init(&w->job_cond, NULL);
    uv_async_init(loop, &w->wake, wake_cb);
    w->wake.data = w;
    px_dl_init(&w->retired);
    uv_timer_init(loop, &w->probe_timer);
    w->probe_timer.data = w;
    uv_timer_start(&w->probe_timer, probe_cb, PX_PROBE_TICK_MS, PX_PROBE_TICK_MS);
    w->pools = calloc(ctl->npools, sizeof(*w->pools));
    if (w->pools == NULL)
        return -1;
    w->npools = ctl->npools;
    for (size_t i = 0; i < ctl->npools; i++) {
        int fd = fds[i][index];
        fds[i][index] = -1; /* taken over */
        if (pool_init(w, &w->pools[i], &ctl->pools[i], fd) != 0)
            return -1;
    }
    return 0;
}

static void *worker_main(void *arg)
{
    px_worker *w = arg;
    uv_run(w->io.loop, UV_RUN_DEFAULT);
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
        for (size_t s = 0; pool->servers != NULL && s < pool->nservers; s++)
            px_server_free(&pool->servers[s]);
        free(pool->servers);
        free(pool->args);
        free(pool->keys);
    }
    free(w->pools);
    w->pools = NULL;
}

unsigned px_default_threads(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
        return (unsigned)CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1u;
}

/*
 * proxy.c — the control thread (px_main: the shared pools, the listening sockets, signals, the
 * stats and metrics ports) and the workers (px_proxy: one thread and loop each, with their pools'
 * servers and listeners), the job mailbox between them, the write batching that flushes every
 * dirty stream once per loop iteration, the probe timer and a clean shutdown.
 *
 * Listening: the control thread binds every pool's address before a worker starts, so a port in
 * use fails the start with one clear error. TCP: one socket per worker with SO_REUSEPORT (first
 * checked free by a plain bind, so a second proxy cannot silently share the port), the kernel
 * spreading new connections over them; a unix socket: one socket, each worker polling a dup of it.
 *
 * Write batching: sending to a backend or completing a client's reply only appends bytes to the
 * stream's buffer and marks it dirty. A check handle (run after each poll) flushes every dirty
 * stream with one write, so the requests parsed from one read go out together. An idle handle is
 * started whenever something is marked, so the loop does not block in poll with bytes waiting
 * (marks made in timer callbacks, before the poll).
 */

#include "proxy.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

uint64_t px_now(px_proxy *px)
{
    return uv_now(px->loop);
}

/* xorshift64*: jitter for the health tracker's probe delays. */
uint64_t px_rand(px_proxy *px)
{
    uint64_t x = px->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    px->rng = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static void idle_cb(uv_idle_t *h)
{
    uv_idle_stop(h);
}

void px_mark_client(px_client *c)
{
    px_proxy *px = c->pool->px;
    if (c->closing || c->dirty.next != NULL)
        return;
    px_dl_push(&px->dirty_clients, &c->dirty);
    if (!uv_is_active((uv_handle_t *)&px->flush_idle))
        uv_idle_start(&px->flush_idle, idle_cb);
}

void px_mark_conn(px_conn *c)
{
    px_proxy *px = c->server->pool->px;
    if (c->dirty.next != NULL)
        return;
    px_dl_push(&px->dirty_conns, &c->dirty);
    if (!uv_is_active((uv_handle_t *)&px->flush_idle))
        uv_idle_start(&px->flush_idle, idle_cb);
}

static void flush_cb(uv_check_t *h)
{
    px_proxy *px = h->data;
    /* Backends first: a flush of a client may resume its reading and queue more requests,
     * which the loop below then sends in the same iteration. */
    for (int round = 0; round < 2; round++) {
        while (px->dirty_conns.next != &px->dirty_conns) {
            px_dl *d = px->dirty_conns.next;
            px_dl_remove(d);
            px_conn_flush(PX_CONTAINER(d, px_conn, dirty));
        }
        while (px->dirty_clients.next != &px->dirty_clients) {
            px_dl *d = px->dirty_clients.next;
            px_dl_remove(d);
            px_client_flush(PX_CONTAINER(d, px_client, dirty));
        }
    }
    if (px->retired.next != &px->retired) /* servers a reload removed, draining */
        px_reload_reap(px);
}

static void probe_cb(uv_timer_t *t)
{
    px_proxy *px = t->data;
    for (size_t i = 0; i < px->npools; i++)
        px_probe_due(&px->pools[i]);
}

/* ---- jobs ------------------------------------------------------------------------------------- */

static void wake_cb(uv_async_t *h)
{
    px_proxy *px = h->data;
    pthread_mutex_lock(&px->job_lock);
    px_job_fn fn = px->job_fn;
    void *arg = px->job_arg;
    px->job_fn = NULL;
    pthread_mutex_unlock(&px->job_lock);
    if (fn == NULL)
        return;
    fn(px, arg);
    pthread_mutex_lock(&px->job_lock);
    px->job_done = true;
    pthread_cond_signal(&px->job_cond);
    pthread_mutex_unlock(&px->job_lock);
}

void px_worker_call(px_proxy *w, px_job_fn fn, void *arg)
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

/* ---- shutdown ----------------------------------------------------------------------------------- */

static void free_stream_cb(uv_handle_t *h)
{
    free(PX_CONTAINER(h, px_stream, u));
}

/* Closes the worker's handles; its loop then ends once the closes are done. */
static void worker_stop(px_proxy *px, void *arg)
{
    (void)arg;
    if (px->stopping)
        return;
    px->stopping = true;
    for (size_t i = 0; i < px->npools; i++) {
        px_pool *pool = &px->pools[i];
        if (pool->listener != NULL) {
            uv_close(&pool->listener->u.handle, free_stream_cb);
            pool->listener = NULL;
        }
        for (px_dl *d = pool->clients.next; d != NULL && d != &pool->clients; d = d->next)
            px_client_close(PX_CONTAINER(d, px_client, link));
        for (size_t s = 0; pool->servers != NULL && s < pool->nservers; s++)
            px_server_close(&pool->servers[s]);
    }
    px_reload_stop(px);
    uv_close((uv_handle_t *)&px->flush_check, NULL);
    uv_close((uv_handle_t *)&px->flush_idle, NULL);
    uv_close((uv_handle_t *)&px->probe_timer, NULL);
    uv_close((uv_handle_t *)&px->wake, NULL);
}

static void main_stop(px_main *m)
{
    if (m->stopping)
        return;
    m->stopping = true;
    PX_LOG(m, PX_LOG_NOTICE, "shutting down");
    for (unsigned w = 0; w < m->nworkers; w++)
        if (m->workers[w].loop != NULL)
            px_worker_call(&m->workers[w], worker_stop, NULL);
    if (m->stats_listener != NULL) {
        uv_close(&m->stats_listener->u.handle, free_stream_cb);
        m->stats_listener = NULL;
    }
    px_metrics_stop(m);
    uv_close((uv_handle_t *)&m->sigint, NULL);
    uv_close((uv_handle_t *)&m->sigterm, NULL);
    uv_close((uv_handle_t *)&m->sighup, NULL);
}

static void sighup_cb(uv_signal_t *h, int signum)
{
    (void)signum;
    px_main *m = h->data;
    if (!m->stopping)
        (void)px_reload(m, "SIGHUP", NULL);
}

static void signal_cb(uv_signal_t *h, int signum)
{
    px_main *m = h->data;
    PX_LOG(m, PX_LOG_NOTICE, "signal %d received", signum);
    main_stop(m);
}

/* ---- listening sockets (control thread) ------------------------------------------------------ */

/* A bound, listening TCP socket for addr; reuseport: shared with the other workers' sockets.
 * Returns the fd or -1 with errno set. */
static int tcp_socket(const struct addrinfo *ai, bool reuseport, int backlog)
{
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, backlog) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* Binds pool i's listen address: fds[w] for worker w. Returns 0 or -1 (logged). */
static int pool_sockets(px_main *m, const ch_conf_pool *pc, int *fds)
{
    int backlog = pc->backlog > 0 ? pc->backlog : 512;
    for (unsigned w = 0; w < m->nworkers; w++)
        fds[w] = -1;
    if (pc->listen_port == 0) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(pc->listen_host) >= sizeof(sa.sun_path)) {
            PX_LOG(m, PX_LOG_ERR, "pool %s: socket path too long: %s", pc->name, pc->listen);
            return -1;
        }
        strcpy(sa.sun_path, pc->listen_host);
        /* A socket file left by an earlier run is removed (as twemproxy does), but not one a
         * live process accepts on: that is an address in use, as for TCP. */
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bool live = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
        if (fd >= 0)
            close(fd);
        if (live) {
            PX_LOG(m, PX_LOG_ERR, "pool %s: cannot listen on %s: %s", pc->name, pc->listen,
                   strerror(EADDRINUSE));
            return -1;
        }
        unlink(pc->listen_host);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
            listen(fd, backlog) != 0) {
            PX_LOG(m, PX_LOG_ERR, "pool %s: cannot listen on %s: %s", pc->name, pc->listen,
                   strerror(errno));
            if (fd >= 0)
                close(fd);
            return -1;
        }
        if (pc->listen_perm >= 0)
            chmod(pc->listen_host, (mode_t)pc->listen_perm);
        fds[0] = fd;
        for (unsigned w = 1; w < m->nworkers; w++) {
            fds[w] = fcntl(fd, F_DUPFD_CLOEXEC, 0);
            if (fds[w] < 0) {
                PX_LOG(m, PX_LOG_ERR, "pool %s: dup: %s", pc->name, strerror(errno));
                return -1;
            }
        }
        return 0;
    }
    char port[16];
    snprintf(port, sizeof(port), "%d", pc->listen_port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(pc->listen_host, port, &hints, &res);
    if (rc != 0 || res == NULL) {
        PX_LOG(m, PX_LOG_ERR, "pool %s: cannot resolve listen address '%s': %s", pc->name,
               pc->listen, gai_strerror(rc));
        return -1;
    }
    /* A plain bind first: it fails when anyone listens there, SO_REUSEPORT or not. */
    int probe = tcp_socket(res, false, 1);
    if (probe >= 0)
        close(probe);
    for (unsigned w = 0; probe >= 0 && w < m->nworkers; w++)
        if ((fds[w] = tcp_socket(res, true, backlog)) < 0)
            probe = -1;
    freeaddrinfo(res);
    if (probe < 0) {
        PX_LOG(m, PX_LOG_ERR, "pool %s: cannot listen on %s: %s", pc->name, pc->listen,
               strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- worker pools -------------------------------------------------------------------------------- */

static void listen_cb(uv_stream_t *server, int status)
{
    px_stream *st = PX_CONTAINER(server, px_stream, u);
    px_pool *pool = st->owner;
    if (status < 0) {
        PX_LOG(pool->px, PX_LOG_WARN, "pool %s: accept: %s", pool->conf->name,
               uv_strerror(status));
        return;
    }
    px_client_accept(pool, server);
}

/* Sets the pool's settings from its conf (startup and reload). */
void px_pool_configure(px_pool *pool)
{
    const ch_conf_pool *pc = pool->conf;
    pool->depth = pc->failover_depth < 1                        ? 1
                  : (size_t)pc->failover_depth > PX_MAX_DEPTH ? PX_MAX_DEPTH
                                                               : (size_t)pc->failover_depth;
    pool->timeout_ms = pc->timeout_ms > 0 ? (uint64_t)pc->timeout_ms : PX_DEFAULT_TIMEOUT_MS;
    pool->limits = pool->px->limits;
    pool->limits.max_request = pc->max_request_bytes > 0 ? (size_t)pc->max_request_bytes : 1;
    pool->max_client_buffer =
        pc->max_client_buffer_bytes > 0 ? (size_t)pc->max_client_buffer_bytes : 1;
    pool->client_password = pc->client_auth != NULL ? pc->client_auth : pc->redis_auth;
}

/* The worker's copy of shared pool sp, listening on fd (taken over). */
static int pool_init(px_proxy *px, px_pool *pool, px_shared_pool *sp, int fd)
{
    const ch_conf_pool *pc = sp->conf;
    pool->px = px;
    pool->shared = sp;
    pool->conf = pc;
    pool->members = sp->members;
    pool->table = ch_membership_table(sp->members);
    pool->health = sp->health;
    pool->nservers = sp->nservers;
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
    px_stream *st = rc == 0 ? calloc(1, sizeof(*st)) : NULL;
    if (st == NULL) {
        close(fd);
        return -1;
    }
    st->owner = pool;
    if (pc->listen_port == 0) {
        uv_pipe_init(px->loop, &st->u.pipe, 0);
        rc = uv_pipe_open(&st->u.pipe, fd);
    } else {
        uv_tcp_init(px->loop, &st->u.tcp);
        rc = uv_tcp_open(&st->u.tcp, fd);
    }
    if (rc == 0)
        rc = uv_listen(&st->u.stream, pc->backlog > 0 ? pc->backlog : 512, listen_cb);
    else
        close(fd);
    if (rc < 0) {
        PX_LOG(px, PX_LOG_ERR, "pool %s: cannot listen on %s: %s", pc->name, pc->listen,
               uv_strerror(rc));
        uv_close(&st->u.handle, free_stream_cb);
        return -1;
    }
    pool->listener = st;
    if (pc->preconnect)
        for (size_t i = 0; i < pool->nservers; i++)
            px_server_preconnect(&pool->servers[i]);
    return 0;
}

/* Worker index of m, its loop and handles, its pools listening on fds[pool][index]. */
static int worker_init(px_main *m, unsigned index, int **fds)
{
    px_proxy *px = &m->workers[index];
    px->main = m;
    px->index = index;
    px->log = m->log;
    px->loop = malloc(sizeof(*px->loop));
    if (px->loop == NULL || uv_loop_init(px->loop) != 0) {
        free(px->loop);
        px->loop = NULL;
        return -1;
    }
    pthread_mutex_init(&px->job_lock, NULL);
    pthread_cond_init(&px->job_cond, NULL);
    uv_async_init(px->loop, &px->wake, wake_cb);
    px->wake.data = px;
    ch_resp_limits_init(&px->limits);
    /* The proxy parses its own fragments again (a failed multi-key read is re-split), and a
     * fragment can be larger than the client's request it came from (an inline MGET re-encoded
     * as RESP): no request-size limit there. Replies are bounded by max_bulk and max_depth. */
    px->limits.max_request = SIZE_MAX;
    px->argv_cap = 256;
    px->argv = malloc(px->argv_cap * sizeof(*px->argv));
    px->rng = px_rand_seed(m, index);
    px->next_client_id = 1;
    px_dl_init(&px->dirty_clients);
    px_dl_init(&px->dirty_conns);
    px_dl_init(&px->retired);
    uv_check_init(px->loop, &px->flush_check);
    px->flush_check.data = px;
    uv_check_start(&px->flush_check, flush_cb);
    uv_idle_init(px->loop, &px->flush_idle);
    uv_timer_init(px->loop, &px->probe_timer);
    px->probe_timer.data = px;
    uv_timer_start(&px->probe_timer, probe_cb, PX_PROBE_TICK_MS, PX_PROBE_TICK_MS);
    px->pools = calloc(m->npools, sizeof(*px->pools));
    if (px->argv == NULL || px->pools == NULL)
        return -1;
    px->npools = m->npools;
    for (size_t i = 0; i < m->npools; i++) {
        int fd = fds[i][index];
        fds[i][index] = -1; /* taken over */
        if (pool_init(px, &px->pools[i], &m->pools[i], fd) != 0)
            return -1;
    }
    return 0;
}

static void *worker_main(void *arg)
{
    px_proxy *px = arg;
    uv_run(px->loop, UV_RUN_DEFAULT);
    return NULL;
}

static void worker_free(px_proxy *px)
{
    if (px->loop != NULL) {
        worker_stop(px, NULL); /* no-op after a stop job; closes everything after a failed init */
        uv_run(px->loop, UV_RUN_DEFAULT);
        if (uv_loop_close(px->loop) != 0)
            PX_LOG(px, PX_LOG_WARN, "worker %u: event loop closed with handles still open",
                   px->index);
        free(px->loop);
        px->loop = NULL;
        pthread_mutex_destroy(&px->job_lock);
        pthread_cond_destroy(&px->job_cond);
    }
    for (size_t i = 0; i < px->npools; i++) {
        px_pool *pool = &px->pools[i];
        for (size_t s = 0; pool->servers != NULL && s < pool->nservers; s++)
            px_server_free(&pool->servers[s]);
        free(pool->servers);
    }
    free(px->pools);
    free(px->argv);
    px->pools = NULL;
    px->argv = NULL;
}

/* ---- control thread ------------------------------------------------------------------------------ */

unsigned px_default_threads(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
        return (unsigned)CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1u;
}

/* The shared state of pool pc (membership, health, servers in membership order). */
int px_shared_pool_init(px_shared_pool *sp, px_conf *cref, const ch_conf_pool *pc, char *why,
                        size_t whylen)
{
    memset(sp, 0, sizeof(*sp));
    int rc = ch_config_membership(pc, &sp->members);
    if (rc != CH_OK) {
        snprintf(why, whylen, "pool %s: cannot build its placement: %s", pc->name,
                 ch_strerror(rc));
        return -1;
    }
    sp->nservers = ch_membership_size(sp->members);
    ch_health_options ho;
    ch_config_health(pc, &ho);
    rc = px_health_new(sp->nservers, &ho, &sp->health);
    if (rc != CH_OK) {
        snprintf(why, whylen, "pool %s: health policy: %s", pc->name, ch_strerror(rc));
        px_shared_pool_clear(sp);
        return -1;
    }
    sp->servers = calloc(pc->nservers, sizeof(*sp->servers));
    if (sp->servers == NULL || px_pool_servers(pc, sp->servers) != 0) {
        snprintf(why, whylen, "pool %s: out of memory", pc->name);
        px_shared_pool_clear(sp);
        return -1;
    }
    sp->conf = pc;
    sp->cref = cref;
    px_conf_ref(cref);
    return 0;
}

void px_shared_pool_clear(px_shared_pool *sp)
{
    ch_membership_free(sp->members);
    px_health_free(sp->health);
    free(sp->servers);
    px_conf_unref(sp->cref);
    sp->cref = NULL;
    sp->conf = NULL;
    sp->members = NULL;
    sp->health = NULL;
    sp->servers = NULL;
    sp->nservers = 0;
    /* clients is left alone: workers add to it while the pool serves (a reload clears the
     * rest of a live pool). */
}

uint64_t px_rand_seed(px_main *m, unsigned index)
{
    uint64_t x = m->rng + 0x9E3779B97F4A7C15ULL * (index + 1u);
    return x != 0 ? x : 1u;
}

int px_main_init(px_main *m, ch_config *cfg, unsigned nworkers)
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
    uv_signal_init(m->loop, &m->sigint);
    uv_signal_init(m->loop, &m->sigterm);
    uv_signal_init(m->loop, &m->sighup);
    m->sigint.data = m->sigterm.data = m->sighup.data = m;
    uv_signal_start(&m->sigint, signal_cb, SIGINT);
    uv_signal_start(&m->sigterm, signal_cb, SIGTERM);
    uv_signal_start(&m->sighup, sighup_cb, SIGHUP);

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
        if (!pc->redis) {
            PX_LOG(m, PX_LOG_ERR,
                   "pool %s: memcached pools are not supported yet (set \"redis: true\")",
                   pc->name);
            rc = -1;
        } else if (pc->listen == NULL) {
            PX_LOG(m, PX_LOG_ERR, "pool %s: no \"listen\" address", pc->name);
            rc = -1;
        } else if (px_shared_pool_init(&m->pools[i], m->conf, pc, why, sizeof(why)) != 0) {
            PX_LOG(m, PX_LOG_ERR, "%s", why);
            rc = -1;
        } else {
            m->npools = i + 1;
            fds[i] = malloc(nworkers * sizeof(**fds));
            rc = fds[i] != NULL ? pool_sockets(m, pc, fds[i]) : -1;
        }
    }
    for (unsigned w = 0; rc == 0 && w < nworkers; w++)
        rc = worker_init(m, w, fds);
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
    if (px_metrics_start(m) != 0)
        return -1;
    return 0;
}

int px_main_run(px_main *m)
{
    for (unsigned w = 0; w < m->nworkers; w++) {
        px_proxy *px = &m->workers[w];
        if (pthread_create(&px->thread, NULL, worker_main, px) != 0) {
            PX_LOG(m, PX_LOG_ERR, "cannot start worker %u: %s", w, strerror(errno));
            main_stop(m);
            break;
        }
        px->started = true;
    }
    uv_run(m->loop, UV_RUN_DEFAULT);
    return 0;
}

void px_main_free(px_main *m)
{
    if (m->loop != NULL) {
        main_stop(m); /* no-op after a signal; closes everything after a failed start */
        uv_run(m->loop, UV_RUN_DEFAULT);
    }
    for (unsigned w = 0; w < m->nworkers; w++) {
        px_proxy *px = &m->workers[w];
        if (px->started)
            pthread_join(px->thread, NULL);
        px->started = false;
        worker_free(px);
    }
    free(m->workers);
    m->workers = NULL;
    if (m->loop != NULL) {
        if (uv_loop_close(m->loop) != 0)
            PX_LOG(m, PX_LOG_WARN, "event loop closed with handles still open");
        free(m->loop);
        m->loop = NULL;
    }
    for (size_t i = 0; i < m->npools; i++)
        px_shared_pool_clear(&m->pools[i]);
    free(m->pools);
    m->pools = NULL;
    px_conf_unref(m->conf);
    m->conf = NULL;
}

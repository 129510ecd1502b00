/*
 * proxy.c — the proxy context: pools (membership, health, servers, listener), the write batching
 * that flushes every dirty stream once per loop iteration, the probe timer, signals and a clean
 * shutdown.
 *
 * Write batching: sending to a backend or completing a client's reply only appends bytes to the
 * stream's buffer and marks it dirty. A check handle (run after each poll) flushes every dirty
 * stream with one write, so the requests parsed from one read go out together. An idle handle is
 * started whenever something is marked, so the loop does not block in poll with bytes waiting
 * (marks made in timer callbacks, before the poll).
 */

#include "proxy.h"

#include <netdb.h>
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

/* ---- shutdown ----------------------------------------------------------------------------------- */

static void free_stream_cb(uv_handle_t *h)
{
    free(PX_CONTAINER(h, px_stream, u));
}

static void proxy_stop(px_proxy *px)
{
    if (px->stopping)
        return;
    px->stopping = true;
    PX_LOG(px, PX_LOG_NOTICE, "shutting down");
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
    if (px->stats_listener != NULL) {
        uv_close(&px->stats_listener->u.handle, free_stream_cb);
        px->stats_listener = NULL;
    }
    px_metrics_stop(px);
    uv_close((uv_handle_t *)&px->flush_check, NULL);
    uv_close((uv_handle_t *)&px->flush_idle, NULL);
    uv_close((uv_handle_t *)&px->probe_timer, NULL);
    uv_close((uv_handle_t *)&px->sigint, NULL);
    uv_close((uv_handle_t *)&px->sigterm, NULL);
    uv_close((uv_handle_t *)&px->sighup, NULL);
}

static void sighup_cb(uv_signal_t *h, int signum)
{
    (void)signum;
    px_proxy *px = h->data;
    if (!px->stopping)
        (void)px_reload(px, "SIGHUP", NULL);
}

static void signal_cb(uv_signal_t *h, int signum)
{
    px_proxy *px = h->data;
    PX_LOG(px, PX_LOG_NOTICE, "signal %d received", signum);
    proxy_stop(px);
}

/* ---- pools -------------------------------------------------------------------------------------- */

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

/* Binds and listens on the pool's "listen" address. */
static int pool_listen(px_pool *pool)
{
    px_proxy *px = pool->px;
    const ch_conf_pool *pc = pool->conf;
    px_stream *st = calloc(1, sizeof(*st));
    if (st == NULL)
        return -1;
    st->owner = pool;
    int rc;
    if (pc->listen_port == 0) {
        uv_pipe_init(px->loop, &st->u.pipe, 0);
        unlink(pc->listen_host); /* a stale socket from an earlier run */
        rc = uv_pipe_bind(&st->u.pipe, pc->listen_host);
        if (rc == 0 && pc->listen_perm >= 0)
            chmod(pc->listen_host, (mode_t)pc->listen_perm);
    } else {
        uv_tcp_init(px->loop, &st->u.tcp);
        char port[16];
        snprintf(port, sizeof(port), "%d", pc->listen_port);
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                                 .ai_flags = AI_PASSIVE};
        struct addrinfo *res = NULL;
        rc = getaddrinfo(pc->listen_host, port, &hints, &res);
        if (rc != 0 || res == NULL) {
            PX_LOG(px, PX_LOG_ERR, "pool %s: cannot resolve listen address '%s': %s", pc->name,
                   pc->listen, gai_strerror(rc));
            uv_close(&st->u.handle, free_stream_cb);
            return -1;
        }
        rc = uv_tcp_bind(&st->u.tcp, res->ai_addr, 0);
        freeaddrinfo(res);
    }
    if (rc == 0)
        rc = uv_listen(&st->u.stream, pc->backlog > 0 ? pc->backlog : 512, listen_cb);
    if (rc < 0) {
        PX_LOG(px, PX_LOG_ERR, "pool %s: cannot listen on %s: %s", pc->name, pc->listen,
               uv_strerror(rc));
        uv_close(&st->u.handle, free_stream_cb);
        return -1;
    }
    pool->listener = st;
    PX_LOG(px, PX_LOG_NOTICE, "pool %s: listening on %s, %zu servers, membership %s", pc->name,
           pc->listen, pool->nservers, ch_membership_version(pool->members));
    return 0;
}

static int pool_init(px_proxy *px, px_pool *pool, const ch_conf_pool *pc)
{
    pool->px = px;
    pool->conf = pc;
    px_dl_init(&pool->clients);
    if (!pc->redis) {
        PX_LOG(px, PX_LOG_ERR,
               "pool %s: memcached pools are not supported yet (set \"redis: true\")", pc->name);
        return -1;
    }
    if (pc->listen == NULL) {
        PX_LOG(px, PX_LOG_ERR, "pool %s: no \"listen\" address", pc->name);
        return -1;
    }
    int rc = ch_config_membership(pc, &pool->members);
    if (rc != CH_OK) {
        PX_LOG(px, PX_LOG_ERR, "pool %s: cannot build its placement: %s", pc->name,
               ch_strerror(rc));
        return -1;
    }
    pool->table = ch_membership_table(pool->members);
    pool->nservers = ch_membership_size(pool->members);
    ch_health_options ho;
    ch_config_health(pc, &ho);
    rc = ch_health_new(pool->nservers, &ho, &pool->health);
    if (rc != CH_OK) {
        PX_LOG(px, PX_LOG_ERR, "pool %s: health policy: %s", pc->name, ch_strerror(rc));
        return -1;
    }
    pool->depth = pc->failover_depth < 1                        ? 1
                  : (size_t)pc->failover_depth > PX_MAX_DEPTH ? PX_MAX_DEPTH
                                                               : (size_t)pc->failover_depth;
    pool->timeout_ms = pc->timeout_ms > 0 ? (uint64_t)pc->timeout_ms : PX_DEFAULT_TIMEOUT_MS;
    pool->limits = px->limits;
    pool->limits.max_request = pc->max_request_bytes > 0 ? (size_t)pc->max_request_bytes : 1;
    pool->max_client_buffer =
        pc->max_client_buffer_bytes > 0 ? (size_t)pc->max_client_buffer_bytes : 1;
    pool->client_password = pc->client_auth != NULL ? pc->client_auth : pc->redis_auth;

    /* The membership's members are in ch_config_members() order; map each to its server entry
     * (the member strings ch_config_members() gives point into the pool's servers). */
    ch_options opt;
    ch_config_options(pc, &opt);
    ch_member *members = calloc(pc->nservers, sizeof(*members));
    pool->servers = calloc(pool->nservers, sizeof(*pool->servers));
    if (members == NULL || pool->servers == NULL) {
        free(members);
        return -1;
    }
    ch_config_members(pc, opt.algo, members);
    rc = 0;
    for (size_t i = 0; rc == 0 && i < pool->nservers; i++) {
        const ch_conf_server *conf = NULL;
        for (size_t j = 0; j < pc->nservers && conf == NULL; j++)
            if (members[i].addr == pc->servers[j].addr)
                conf = &pc->servers[j];
        rc = conf != NULL ? px_server_init(pool, &pool->servers[i], i, conf) : -1;
    }
    free(members);
    if (rc != 0)
        return -1;
    if (pool_listen(pool) != 0)
        return -1;
    if (pc->preconnect)
        for (size_t i = 0; i < pool->nservers; i++)
            px_server_preconnect(&pool->servers[i]);
    return 0;
}

int px_proxy_init(px_proxy *px, ch_config *cfg)
{
    px->cfg = cfg;
    px->loop = malloc(sizeof(*px->loop));
    if (px->loop == NULL || uv_loop_init(px->loop) != 0) {
        free(px->loop);
        px->loop = NULL;
        return -1;
    }
    ch_resp_limits_init(&px->limits);
    /* The proxy parses its own fragments again (a failed multi-key read is re-split), and a
     * fragment can be larger than the client's request it came from (an inline MGET re-encoded
     * as RESP): no request-size limit there. Replies are bounded by max_bulk and max_depth. */
    px->limits.max_request = SIZE_MAX;
    px->argv_cap = 256;
    px->argv = malloc(px->argv_cap * sizeof(*px->argv));
    if (px->argv == NULL)
        return -1;
    px->rng = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ULL ^ (uint64_t)getpid() ^ 1u;
    px->start_time = (uint64_t)time(NULL);
    px->next_client_id = 1;
    px_dl_init(&px->dirty_clients);
    px_dl_init(&px->dirty_conns);
    uv_check_init(px->loop, &px->flush_check);
    px->flush_check.data = px;
    uv_check_start(&px->flush_check, flush_cb);
    uv_idle_init(px->loop, &px->flush_idle);
    uv_timer_init(px->loop, &px->probe_timer);
    px->probe_timer.data = px;
    uv_timer_start(&px->probe_timer, probe_cb, PX_PROBE_TICK_MS, PX_PROBE_TICK_MS);
    uv_signal_init(px->loop, &px->sigint);
    uv_signal_init(px->loop, &px->sigterm);
    px->sigint.data = px->sigterm.data = px;
    uv_signal_start(&px->sigint, signal_cb, SIGINT);
    uv_signal_start(&px->sigterm, signal_cb, SIGTERM);
    px_dl_init(&px->retired);
    uv_signal_init(px->loop, &px->sighup);
    px->sighup.data = px;
    uv_signal_start(&px->sighup, sighup_cb, SIGHUP);

    px->pools = calloc(cfg->npools, sizeof(*px->pools));
    if (px->pools == NULL)
        return -1;
    px->npools = cfg->npools;
    for (size_t i = 0; i < cfg->npools; i++)
        if (pool_init(px, &px->pools[i], &cfg->pools[i]) != 0)
            return -1;
    if (px_stats_start(px) != 0)
        return -1;
    if (px_metrics_start(px) != 0)
        return -1;
    return 0;
}

int px_proxy_run(px_proxy *px)
{
    uv_run(px->loop, UV_RUN_DEFAULT);
    return 0;
}

void px_proxy_free(px_proxy *px)
{
    if (px->loop != NULL) {
        proxy_stop(px); /* no-op after a signal; closes everything after a failed init */
        uv_run(px->loop, UV_RUN_DEFAULT);
        if (uv_loop_close(px->loop) != 0)
            PX_LOG(px, PX_LOG_WARN, "event loop closed with handles still open");
        free(px->loop);
        px->loop = NULL;
    }
    px_reload_free(px);
    for (size_t i = 0; i < px->npools; i++) {
        px_pool *pool = &px->pools[i];
        for (size_t s = 0; pool->servers != NULL && s < pool->nservers; s++)
            px_server_free(&pool->servers[s]);
        free(pool->servers);
        ch_health_free(pool->health);
        ch_membership_free(pool->members);
    }
    free(px->pools);
    free(px->argv);
    px->pools = NULL;
    px->argv = NULL;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reload.c — hot reload: SIGHUP (or POST /-/reload) re-reads the config file and swaps each
 * pool's membership, placement table and health in, without closing a client connection
 * (docs/PROXY.md, "Reload").
 *
 * A reload is all or nothing, in three steps. The control thread loads the file and builds each
 * changed pool's shared state (membership, health; px_shared_pool). Then every worker prepares,
 * in a job on its loop, its side of every pool (pool_plan: new servers set up, addresses
 * resolved, arrays allocated). Every fallible step is in these two; a failure logs why (a config
 * error as file:line:column), aborts the plans prepared, counts reload_failures and leaves the
 * proxy exactly as it was. Then every worker commits (cannot fail): it swaps its pools' pointers
 * between two requests of its loop. Workers switch one after the other, each within one job; the
 * control thread then logs the change once and frees the old shared state, which no worker
 * points to any more.
 *
 * What a reload changes, per pool matched by name: the servers, weights, names, hash,
 * distribution, hash_tag, version, timeouts, failover and health policy, passwords, limits. Pools
 * added or removed, and a pool whose listen, redis, redis_db or server_connections changed, need a
 * restart: they are logged and the pool keeps its old configuration as a whole.
 *
 * Backend servers are matched by address ("host:port" or the socket path, as written). A server
 * in both keeps its px_server: its connections, their in-flight fragments, its stats and, when it
 * was ejected, its ejection (the new health tracker ejects it again; its probe schedule restarts).
 * A new server starts with no connection (opened by its first fragment, or at once with
 * preconnect). A removed server is retired: it takes no new fragment, the ones in flight finish
 * on its connections (their replies go to their clients as usual), and it is closed and freed by
 * px_worker_reap once its FIFOs are empty.
 *
 * Fragments in flight keep their connection. A request stores no membership index: a failover
 * routes its key again against the membership of that moment (route_pool.c), so a failover after
 * a reload goes to a server that exists, and the swap has nothing to renumber.
 */

#include "reload.h"
#include "backend.h"
#include "notify.h"
#include "route_build.h"
#include "warm.h"
#include "resolve.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Keys through both tables when the library cannot compare them exactly (ketama, modula, ...),
 * or when the comparison's matrix would exceed RELOAD_EXACT_CELLS (8 bytes each: 32 MiB). */
#define RELOAD_SAMPLE_KEYS 100000u
#define RELOAD_EXACT_CELLS ((size_t)1 << 22)

/* A pool's new state, built before anything is swapped. */
typedef struct pool_plan {
    px_pool *pool;
    const px_shared_pool *next; /* the control thread's new shared state of the pool */
    px_server *servers;   /* the new array: reused servers are moved in, new ones set up */
    size_t n;
    size_t *from;         /* per new server: its index in the old array, or SIZE_MAX (new) */
    size_t *map;          /* per old server: its new index, or SIZE_MAX (retired) */
    size_t *rix;          /* per old server retired: its index in retire[] */
    px_server **retire;   /* one allocation per removed server */
    size_t nretire;
    bool staged;          /* the pool stages it (px_pool.stage): its new servers are started */
    px_server **spare;    /* staged: per new server, where it retires if the change is dropped */
    bool applied;         /* job_commit applied it (plan_apply leaves the rest cleared) */
} pool_plan;

static void plan_free(pool_plan *p)
{
    for (size_t i = 0; p->servers != NULL && i < p->n; i++)
        if (p->from[i] == SIZE_MAX)
            px_server_free(&p->servers[i]); /* never started, or moved out: no handle */
    free(p->servers);
    free(p->from);
    free(p->map);
    free(p->rix);
    for (size_t i = 0; i < p->nretire; i++)
        free(p->retire[i]);
    free(p->retire);
    for (size_t i = 0; p->spare != NULL && i < p->n; i++)
        free(p->spare[i]);
    free(p->spare);
    memset(p, 0, sizeof(*p));
}

/* The key a change of which needs a restart, or NULL. */
static const char *restart_key(const ch_conf_pool *a, const ch_conf_pool *b)
{
    if (a->listen == NULL || b->listen == NULL || strcmp(a->listen, b->listen) != 0)
        return "listen";
    if (a->redis != b->redis)
        return "redis";
    if (a->redis_db != b->redis_db)
        return "redis_db";
    if (a->server_connections != b->server_connections)
        return "server_connections";
    if ((a->membership == NULL) != (b->membership == NULL) ||
        (a->membership != NULL && strcmp(a->membership, b->membership) != 0))
        return "membership"; /* the fleet's watch and record follow the key they started on */
    /* A DNS pool's document carries the file's hash, distribution and hash_tag as they were at
     * the start (dns_answer.h): composing the file's new ones would be undone by the next
     * answer. */
    if (ch_conf_membership_dns(b) && strcmp(a->hash, b->hash) != 0)
        return "hash";
    if (ch_conf_membership_dns(b) && strcmp(a->distribution, b->distribution) != 0)
        return "distribution";
    if (ch_conf_membership_dns(b) &&
        ((a->hash_tag == NULL) != (b->hash_tag == NULL) ||
         (a->hash_tag != NULL && strcmp(a->hash_tag, b->hash_tag) != 0)))
        return "hash_tag";
    if (a->membership_interval_ms != b->membership_interval_ms)
        return "membership_interval"; /* dns_watch.c keeps the one it started with */
    if ((a->membership_resolver == NULL) != (b->membership_resolver == NULL) ||
        (a->membership_resolver != NULL &&
         strcmp(a->membership_resolver, b->membership_resolver) != 0))
        return "membership_resolver";
    return NULL;
}

static bool resolvable(const ch_conf_server *cs)
{
    struct sockaddr_storage sa;
    char why[128];
    return cs->port == 0 || px_resolve(cs->host, cs->port, false, &sa, NULL, why, sizeof(why)) == 0;
}

/* Builds p, worker pool's side of the shared state next. Returns 0, or -1 (logged, the reason
 * also in why; p freed). */
static int plan_build(px_pool *pool, const px_shared_pool *next, pool_plan *p, char *why,
                      size_t whylen)
{
    px_io *px = pool->io;
    const ch_conf_pool *pc = next->conf;
    memset(p, 0, sizeof(*p));
    p->pool = pool;
    p->next = next;
    p->n = next->nservers;
    size_t oldn = pool->nservers;
    const char **have = malloc((oldn ? oldn : 1) * sizeof(*have));
    const char **want = malloc((p->n ? p->n : 1) * sizeof(*want));
    p->servers = calloc(p->n, sizeof(*p->servers));
    p->from = malloc((p->n ? p->n : 1) * sizeof(*p->from));
    p->map = malloc((oldn ? oldn : 1) * sizeof(*p->map));
    p->rix = malloc((oldn ? oldn : 1) * sizeof(*p->rix));
    p->retire = calloc(oldn, sizeof(*p->retire));
    bool ok = have != NULL && want != NULL && p->servers != NULL && p->from != NULL &&
              p->map != NULL && p->rix != NULL && p->retire != NULL;
    for (size_t j = 0; ok && j < oldn; j++) {
        have[j] = pool->servers[j].conf->addr;
        p->map[j] = SIZE_MAX;
    }
    for (size_t i = 0; ok && i < p->n; i++)
        want[i] = next->servers[i]->addr;
    /* Reused servers: matched by address, in order when an address appears twice. */
    ok = ok && px_match_addrs(have, oldn, want, p->n, false, p->from) == 0;
    free(have);
    free(want);
    if (!ok) {
        PX_LOG(px, PX_LOG_ERR, "reload: pool %s: out of memory", pc->name);
        snprintf(why, whylen, "pool %s: out of memory", pc->name);
        free(p->servers); /* nothing set up yet */
        p->servers = NULL;
        free(p->from); /* plan_free reads from[] only with servers */
        p->from = NULL;
        plan_free(p);
        return -1;
    }
    for (size_t i = 0; i < p->n; i++)
        if (p->from[i] != SIZE_MAX)
            p->map[p->from[i]] = i;
    bool fail = false; /* why says what */
    for (size_t i = 0; !fail && i < p->n; i++) {
        const ch_conf_server *cs = next->servers[i];
        if (p->from[i] != SIZE_MAX) {
            /* Reused: moved in at the swap; only its line in the file changes. */
            p->servers[i].conf = cs;
            continue;
        }
        if (!resolvable(cs) || px_server_setup(pool, &p->servers[i], i, cs) != 0) {
            /* px_server_setup logged a resolution failure; an allocation failure leaves a
             * partial setup that px_server_free undoes. */
            fail = true;
            snprintf(why, whylen, "pool %s: cannot add server '%s'", pc->name, cs->addr);
        }
    }
    for (size_t j = 0; !fail && j < oldn; j++) {
        if (p->map[j] != SIZE_MAX)
            continue;
        p->retire[p->nretire] = calloc(1, sizeof(**p->retire));
        if (p->retire[p->nretire] == NULL) {
            fail = true;
            snprintf(why, whylen, "pool %s: out of memory", pc->name);
        } else {
            p->rix[j] = p->nretire;
            p->nretire++;
        }
    }
    if (fail) { /* why says what, naming the server when one could not be added */
        PX_LOG(px, PX_LOG_ERR, "reload: %s", why);
        plan_free(p);
        return -1;
    }
    return 0;
}

/* The fraction of the key space whose owner changes from a to b (owners compared by node id):
 * exact when the library can compare the tables (ch_table_transfer) and its Na x Nb matrix
 * stays under RELOAD_EXACT_CELLS, else measured on RELOAD_SAMPLE_KEYS generated keys: the ones
 * `chash plan --keys 100000` uses ("key:0:<i>"), so both print the same figure for the same two
 * files. Negative when out of memory. Cost: O(Na x Nb) plus the transfer, or two lookups per
 * sample key (a 10,000-server pool: the sample, 200,000 lookups, not an 800 MB matrix). */
static double moved_share(const ch_membership *a, const ch_membership *b, bool *exact)
{
    const ch_table *ta = ch_membership_table(a), *tb = ch_membership_table(b);
    size_t na = ch_membership_size(a), nb = ch_membership_size(b);
    bool small = nb == 0 || na <= RELOAD_EXACT_CELLS / nb;
    size_t *same = malloc((na ? na : 1) * sizeof(*same)); /* a's node i is b's node same[i] */
    double *m = small ? calloc(na * nb > 0 ? na * nb : 1, sizeof(*m)) : NULL;
    if (same == NULL || (small && m == NULL)) {
        free(same);
        free(m);
        return -1;
    }
    for (size_t i = 0; i < na; i++)
        same[i] = ch_membership_find(b, ch_table_node_id(ta, i));
    double moved = 0;
    *exact = small && ch_table_transfer(ta, tb, m) == CH_OK;
    if (*exact) {
        for (size_t i = 0; i < na; i++)
            for (size_t j = 0; j < nb; j++)
                if (same[i] != j)
                    moved += m[i * nb + j];
    } else {
        size_t n = 0;
        char key[32];
        for (unsigned k = 0; k < RELOAD_SAMPLE_KEYS; k++) {
            int len = snprintf(key, sizeof(key), "key:0:%u", k);
            if (same[ch_lookup(ta, key, (size_t)len)] != ch_lookup(tb, key, (size_t)len))
                n++;
        }
        moved = (double)n / RELOAD_SAMPLE_KEYS;
    }
    free(same);
    free(m);
    return moved;
}

/* Moves a px_server to dst and points its connections at the new place. */
static void server_move(px_server *dst, px_server *src)
{
    *dst = *src;
    px_server_moved(dst);
}

/* Retires src into s (allocated): it closes once drained (px_worker_reap); cref is the config
 * its conf points into, referenced for as long as it lives. */
static void server_retire(px_worker *px, px_server *s, px_server *src, px_conf *cref)
{
    server_move(s, src);
    s->retired = true;
    s->probing = false;
    s->cref = cref;
    px_conf_ref(cref);
    px_dl_push(&px->retired, &s->retired_link);
}

/* ---- staging: a prepared change's writes invalidated at their keys' next owners ------------- */

/* Stages p on its pool (px_pool.stage): its new servers start now, outside the pool's health
 * (retired until the commit), so that writes can reach them. Returns 0, or -1 when out of
 * memory (nothing staged). */
static int stage_begin(px_worker *px, pool_plan *p)
{
    px_pool *pool = p->pool;
    px_server **to = malloc((p->n ? p->n : 1) * sizeof(*to));
    p->spare = calloc(p->n ? p->n : 1, sizeof(*p->spare));
    bool ok = to != NULL && p->spare != NULL;
    for (size_t i = 0; ok && i < p->n; i++)
        if (p->from[i] == SIZE_MAX)
            ok = (p->spare[i] = calloc(1, sizeof(px_server))) != NULL;
    if (!ok) {
        free(to);
        return -1; /* plan_free frees the spares */
    }
    for (size_t i = 0; i < p->n; i++) {
        if (p->from[i] != SIZE_MAX) {
            to[i] = &pool->servers[p->from[i]];
            continue;
        }
        to[i] = &p->servers[i];
        to[i]->retired = true;
        px_server_start(to[i]);
    }
    pool->stage = (px_stage){ch_membership_table(p->next->members), to, p->n};
    p->staged = true;
    if (px_route_build(pool, px->pools, px->npools) != 0) {
        pool->stage = (px_stage){0};
        free(to);
        return -1; /* the servers started stay so until the plan is applied or dropped */
    }
    return 0;
}

/* Ends the pool's stage (the change committed or dropped); the pool's tree is rebuilt by the
 * caller. */
static void stage_end(px_pool *pool)
{
    free(pool->stage.to);
    pool->stage = (px_stage){0};
}

/* The server that serves what old[j] served, once p is applied. */
static px_server *moved_to(const pool_plan *p, size_t j)
{
    return p->map[j] != SIZE_MAX ? &p->servers[p->map[j]] : p->retire[p->rix[j]];
}

/* The pool's window after p (warm.h; old: its server array before, servers already moved):
 * a new one over the placement in force until now when the change moved keys and asks for a
 * window; the one running, its servers followed to their new places, when the change moved
 * nothing; else none. */
static void warm_apply(px_pool *pool, const pool_plan *p, px_server *old, size_t oldn)
{
    const px_shared_pool *next = p->next;
    px_warm *w = &pool->warm;
    for (size_t i = 0; i < w->nsrc; i++) { /* the running window's servers, where they are now */
        px_server *s = w->src[i];
        if (s != NULL && s >= old && s < old + oldn)
            w->src[i] = moved_to(p, (size_t)(s - old));
    }
    if (next->warm_from == PX_WARM_FROM_NOW && oldn > 0) {
        px_server **src = malloc(oldn * sizeof(*src));
        for (size_t j = 0; src != NULL && j < oldn; j++)
            src[j] = moved_to(p, j);
        if (src != NULL)
            px_warm_begin(pool, pool->table, src, oldn, &next->warm);
        else
            px_warm_end(pool);
        free(src);
    } else if (next->warm_from != PX_WARM_FROM_KEPT) {
        px_warm_end(pool);
    }
}

/* Swaps p in (a worker's commit). Cannot fail. */
static void plan_apply(pool_plan *p)
{
    px_pool *pool = p->pool;
    px_worker *px = pool->worker;
    const px_shared_pool *next = p->next;
    size_t oldn = pool->nservers;
    px_server *old = pool->servers;

    for (size_t i = 0; i < p->n; i++) {
        if (p->from[i] != SIZE_MAX) {
            const ch_conf_server *cs = p->servers[i].conf;
            server_move(&p->servers[i], &old[p->from[i]]);
            p->servers[i].index = i;
            p->servers[i].conf = cs;
        } else if (p->staged) {
            p->servers[i].retired = false; /* started by the stage: now in the health */
        } else {
            px_server_start(&p->servers[i]);
        }
    }
    if (p->staged)
        stage_end(pool);
    size_t r = 0;
    for (size_t j = 0; j < oldn; j++) {
        if (p->map[j] != SIZE_MAX)
            continue;
        /* The config s->conf points into: still the old one. */
        server_retire(px, p->retire[r++], &old[j], pool->shared->cref);
    }
    if (px->index == 0 && p->nretire > 0) { /* one line for the pool, whatever the count */
        char names[300] = "";
        for (size_t k = 0; k < p->nretire && k < 4; k++) {
            size_t len = strlen(names);
            snprintf(names + len, sizeof(names) - len, "%s%s (%s)", k ? ", " : "",
                     p->retire[k]->conf->id, p->retire[k]->conf->addr);
        }
        char more[48] = "";
        if (p->nretire > 4)
            snprintf(more, sizeof(more), " and %zu more", p->nretire - 4);
        PX_LOG(&px->io, PX_LOG_NOTICE,
               "reload: pool %s: %zu server%s removed: %s%s; %s connections close once the "
               "requests in flight on them are answered%s",
               next->conf->name, p->nretire, p->nretire == 1 ? "" : "s", names, more,
               p->nretire == 1 ? "its" : "their",
               next->warm_from == PX_WARM_FROM_NOW ? " and the warm-up window is over" : "");
    }

    warm_apply(pool, p, old, oldn);
    free(old);
    pool->conf = next->conf;
    pool->members = next->members;
    pool->table = ch_membership_table(next->members);
    pool->health = next->health;
    pool->tls_listen = next->tls_listen;
    pool->tls_servers = next->tls_servers;
    pool->mc_users = next->mc_users;
    pool->servers = p->servers;
    pool->nservers = p->n;
    px_pool_configure(pool);
    for (size_t i = 0; pool->conf->preconnect && i < p->n; i++)
        if (p->from[i] == SIZE_MAX)
            px_server_preconnect(&pool->servers[i]);
    /* The plan's arrays now belong to the pool, or were moved out; the spares are not
     * needed. */
    for (size_t i = 0; p->spare != NULL && i < p->n; i++)
        free(p->spare[i]);
    free(p->spare);
    free(p->from);
    free(p->map);
    free(p->rix);
    free(p->retire);
    memset(p, 0, sizeof(*p));
}

/* ---- the jobs (on each worker's loop) ------------------------------------------------------------ */

typedef struct reload_job {
    px_shared_pool *next; /* per pool: its new shared state; conf NULL: the pool is kept */
    bool ok;
    char why[512];
} reload_job;

static void job_abort(px_worker *px, void *arg)
{
    (void)arg;
    pool_plan *plans = px->reload_plans;
    for (size_t i = 0; plans != NULL && i < px->npools; i++) {
        pool_plan *p = &plans[i];
        if (p->pool != NULL && p->staged) {
            /* New servers the stage started may have deletes in flight: retired (into the
             * spares allocated for it), they close once drained. */
            for (size_t k = 0; k < p->n; k++) {
                if (p->from[k] == SIZE_MAX) {
                    server_retire(px, p->spare[k], &p->servers[k], p->next->cref);
                    p->spare[k] = NULL;
                    memset(&p->servers[k], 0, sizeof(p->servers[k]));
                }
            }
            stage_end(p->pool);
            if (px_route_build(p->pool, px->pools, px->npools) != 0)
                PX_LOG(&px->io, PX_LOG_ERR, "reload: pool %s: out of memory for its routes",
                       p->pool->conf->name);
        }
        plan_free(p);
    }
    free(plans);
    px->reload_plans = NULL;
    px_worker_reap(px);
}

static void job_prepare(px_worker *px, void *arg)
{
    reload_job *j = arg;
    pool_plan *plans = calloc(px->npools, sizeof(*plans));
    px->reload_plans = plans;
    j->ok = plans != NULL;
    for (size_t i = 0; j->ok && i < px->npools; i++)
        if (j->next[i].conf != NULL)
            j->ok = plan_build(&px->pools[i], &j->next[i], &plans[i], j->why,
                               sizeof(j->why)) == 0;
    for (size_t i = 0; j->ok && i < px->npools; i++) {
        if (plans[i].pool != NULL && stage_begin(px, &plans[i]) != 0) {
            snprintf(j->why, sizeof(j->why), "pool %s: out of memory for its stage",
                     px->pools[i].conf->name);
            j->ok = false;
        }
    }
    if (!j->ok)
        job_abort(px, NULL);
}

static void job_commit(px_worker *px, void *arg)
{
    (void)arg;
    pool_plan *plans = px->reload_plans;
    /* plan_apply clears its plan: the pools it applied to are marked in plans[i].applied. */
    for (size_t i = 0; i < px->npools; i++)
        if (plans[i].pool != NULL) {
            plan_apply(&plans[i]);
            plans[i].applied = true;
        }
    /* The trees again, from the new configs (a shadow or gutter added or changed), once every
     * pool has its new config (a tree names other pools); out of memory keeps a pool's tree as
     * it was. */
    for (size_t i = 0; i < px->npools; i++)
        if (plans[i].applied && px_route_build(&px->pools[i], px->pools, px->npools) != 0)
            PX_LOG(&px->io, PX_LOG_ERR, "reload: pool %s: out of memory for its routes: kept",
                   px->pools[i].conf->name);
    free(plans);
    px->reload_plans = NULL;
    px_worker_reap(px); /* retired servers with nothing in flight close now */
}

/* ---- the control thread ------------------------------------------------------------------------ */

/* Health by address: a server of next that was ejected in cur is ejected again (the new
 * tracker's probe schedule starts over at retry_min), with its rejoin journal; failure streaks
 * of servers up are not kept. */
static void health_carry(px_ctl *m, const px_shared_pool *cur, px_shared_pool *next)
{
    ch_health_options ho;
    ch_config_health(next->conf, &ho);
    uint64_t now = uv_now(m->loop);
    const char **have = malloc((cur->nservers ? cur->nservers : 1) * sizeof(*have));
    const char **want = malloc((next->nservers ? next->nservers : 1) * sizeof(*want));
    size_t *from = malloc((next->nservers ? next->nservers : 1) * sizeof(*from));
    bool ok = have != NULL && want != NULL && from != NULL;
    for (size_t j = 0; ok && j < cur->nservers; j++)
        have[j] = cur->servers[j]->addr;
    for (size_t i = 0; ok && i < next->nservers; i++)
        want[i] = next->servers[i]->addr;
    /* Out of memory: no health carries over (every server starts up, as a new one does). */
    ok = ok && px_match_addrs(have, cur->nservers, want, next->nservers, false, from) == 0;
    for (size_t i = 0; ok && i < next->nservers; i++) {
        size_t j = from[i];
        if (j == SIZE_MAX)
            continue;
        for (uint32_t k = 0; !px_health_up(cur->health, j) && k < ho.failure_limit; k++)
            if (px_health_failure(next->health, i, now, m->rng += 0x9E3779B97F4A7C15ULL))
                break;
        /* Its rejoin journal goes with it (workers may still add to cur's: under its lock;
         * next is no one else's yet). */
        pthread_mutex_lock(&cur->health->lock);
        px_journal t = next->health->journal[i];
        next->health->journal[i] = cur->health->journal[j];
        cur->health->journal[j] = t;
        pthread_mutex_unlock(&cur->health->lock);
    }
    free(have);
    free(want);
    free(from);
}

/* The loop clock every worker's px_io_now follows (monotonic ms). */
static uint64_t mono_ms(void)
{
    return uv_hrtime() / 1000000u;
}

/* A reload (SIGHUP, POST /-/reload, an etcd change) finished, applied (ok) or refused: its
 * wall-clock time and outcome, which /metrics shows as chash_proxy_last_reload_*. */
static void reload_done(px_ctl *m, bool ok)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    m->last_reload_unix_ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
    m->last_reload_failed = !ok;
}

/* next's window (warm.h) after cur, which moved the share `moved` of the key space. */
static void warm_plan(const px_shared_pool *cur, px_shared_pool *next, const px_reload_opts *opt,
                      double moved)
{
    const ch_conf_pool *pc = next->conf;
    int64_t warm = opt->warm_up_ms >= 0 ? opt->warm_up_ms : pc->warm_up_ms;
    int64_t ramp = opt->ramp_ms >= 0 ? opt->ramp_ms : pc->ramp_ms;
    uint64_t now = mono_ms();
    if (moved != 0 && (warm > 0 || ramp > 0)) {
        uint64_t start = now;
        if (opt->ramp_start_unix_ms != 0) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            int64_t wall = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
            int64_t at = (int64_t)now + (opt->ramp_start_unix_ms - wall);
            start = at > 0 ? (uint64_t)at : 0;
        }
        next->warm_from = PX_WARM_FROM_NOW;
        next->warm = (px_warm_times){start, (uint64_t)ramp, (uint64_t)warm};
    } else if (moved == 0 && cur->prev != NULL &&
               cur->warm.start_ms + cur->warm.ramp_ms + cur->warm.warm_ms > now) {
        next->warm_from = PX_WARM_FROM_KEPT;
        next->warm = cur->warm;
    }
}

/* Logs pool i's change from cur to next (which moved the share `moved` of the key space, -1
 * when unknown) and appends "<pool>: <old> -> <new>" to changed (", "-separated) when its
 * version changed. */
static void log_change(px_ctl *m, const px_shared_pool *cur, const px_shared_pool *next,
                       double moved, bool exact, px_buf *changed)
{
    const char *was = ch_membership_version(cur->members);
    const char *now = ch_membership_version(next->members);
    const char *name = next->conf->name;
    if (strcmp(was, now) != 0)
        (void)px_buf_printf(changed, "%s%s: %s -> %s", changed->len > 0 ? ", " : "", name, was,
                            now);
    if (strcmp(was, now) == 0) {
        PX_LOG(m, PX_LOG_NOTICE, "reload: pool %s: membership %s unchanged, %zu servers", name,
               now, next->nservers);
    } else if (moved < 0) {
        PX_LOG(m, PX_LOG_NOTICE, "reload: pool %s: membership %s -> %s, %zu -> %zu servers",
               name, was, now, cur->nservers, next->nservers);
    } else {
        char how[64] = "exact";
        if (!exact)
            snprintf(how, sizeof(how), "measured on %u sample keys key:0:<i>",
                     RELOAD_SAMPLE_KEYS);
        PX_LOG(m, PX_LOG_NOTICE,
               "reload: pool %s: membership %s -> %s, %zu -> %zu servers, %.2f%% of the key "
               "space moved (%s)",
               name, was, now, cur->nservers, next->nservers, 100.0 * moved, how);
    }
    if (next->warm_from == PX_WARM_FROM_NOW)
        PX_LOG(m, PX_LOG_NOTICE,
               "reload: pool %s: the moved keys switch over %llu ms (ramp) and warm from their "
               "old owners for %llu ms after (warm_up)",
               name, (unsigned long long)next->warm.ramp_ms,
               (unsigned long long)next->warm.warm_ms);
}

/* A config error as a reload reports it (log line and POST /-/reload body): its ", got
 * \"<value>\"" tail is cut, since a value in the wrong key may be a secret (a password typed
 * into timeout:); the location and the key stay. */
static void value_not_shown(char *msg, size_t cap)
{
    char *got = strstr(msg, ", got \"");
    if (got != NULL)
        snprintf(got, cap - (size_t)(got - msg), " (the value is not shown)");
}

/* A prepared reload: every worker holds its plans (job_prepare) until commit or abort. */
struct px_reload_held {
    reload_job job;
    px_conf *cref;
    double *moved;
    bool *exact;
    px_buf held;         /* what the file changes that a reload cannot: "pool x: its listen" */
    px_reload_opts opt;
    int64_t *epochs;     /* per pool: the epoch of its new document (0: none given) */
};

static void held_free(px_reload_held *h)
{
    free(h->job.next);
    free(h->moved);
    free(h->exact);
    free(h->epochs);
    px_buf_free(&h->held);
    free(h);
}

/* Drops h's plans on every worker and its shared states. */
static void held_abort(px_ctl *m, px_reload_held *h)
{
    for (unsigned w = 0; w < m->nworkers; w++)
        px_worker_call(&m->workers[w], job_abort, NULL);
    for (size_t i = 0; h->job.next != NULL && i < m->npools; i++)
        px_shared_pool_clear(&h->job.next[i]);
    px_conf_unref(h->cref);
    held_free(h);
}

/* Takes pool pc's membership from its document (the new one in doc, else the one cur serves):
 * 0, or -1 with why (the document's error as name:line:column, or a stale epoch). */
static int compose(const px_shared_pool *cur, ch_conf_pool *pc, const px_reload_doc *doc,
                   px_shared_pool *next, char *why, size_t whylen)
{
    const char *text = doc != NULL && doc->text != NULL ? doc->text : cur->doc;
    size_t len = doc != NULL && doc->text != NULL ? doc->len : cur->doclen;
    if (pc->membership == NULL)
        return 0;
    if (text == NULL) {
        if (pc->nservers > 0)
            return 0; /* etcd has not answered yet: the file's servers */
        snprintf(why, whylen, "pool %s: no servers yet: %s has not been read", pc->name,
                 pc->membership);
        return -1;
    }
    int64_t epoch = 0;
    ch_config_error err;
    if (ch_config_membership_doc(pc, pc->membership, text, len, &epoch, &err) != 0) {
        char msg[600];
        snprintf(why, whylen, "%s", ch_config_error_str(&err, msg, sizeof(msg)));
        return -1;
    }
    if (doc != NULL && doc->text != NULL) {
        if (epoch == 0)
            epoch = doc->mod_rev;
        if (epoch <= cur->epoch) {
            snprintf(why, whylen, "pool %s: epoch %lld is not newer than %lld, the one served",
                     pc->name, (long long)epoch, (long long)cur->epoch);
            return PX_RELOAD_STALE;
        }
    } else {
        epoch = cur->epoch;
    }
    next->doc = malloc(len + 1);
    if (next->doc == NULL) {
        snprintf(why, whylen, "pool %s: out of memory", pc->name);
        return -1;
    }
    memcpy(next->doc, text, len);
    next->doc[len] = '\0';
    next->doclen = len;
    next->epoch = epoch;
    return 0;
}

/* One reload prepared at a time: a new one drops the one held before it (trigger: the new
 * one's), and tells its holder (m->held_dropped). */
static void drop_held(px_ctl *m, const char *trigger)
{
    if (m->held == NULL)
        return;
    px_reload_held *old = m->held;
    m->held = NULL;
    held_abort(m, old);
    PX_LOG(m, PX_LOG_WARN, "reload: %s drops the reload prepared before it", trigger);
    if (m->held_dropped != NULL)
        m->held_dropped(m->held_dropped_arg, trigger);
}

/* Pool i's next shared state, built into h->job.next[i] from the file's pool pc and its
 * membership document (doc: NULL or no text: the one it serves). A pool the file removed
 * (pc NULL), or changed in what only a restart can, keeps its state and is named in h->held.
 * false when it cannot be built: h->job.why says why, and *rc is PX_RELOAD_STALE or
 * PX_RELOAD_INVALID when the document is (else *rc is left as it was). */
static bool next_pool(px_ctl *m, px_reload_held *h, size_t i, ch_conf_pool *pc,
                      const px_reload_doc *doc, int *rc)
{
    reload_job *job = &h->job;
    const px_shared_pool *cur = &m->pools[i];
    const char *key = pc != NULL ? restart_key(cur->conf, pc) : NULL;
    if (pc == NULL || key != NULL)
        (void)px_buf_printf(&h->held, "%spool %s %s", h->held.len > 0 ? ", " : "",
                            cur->conf->name, pc == NULL ? "removed" : "");
    if (key != NULL)
        (void)px_buf_printf(&h->held, "(its \"%s\")", key);
    if (pc == NULL) {
        PX_LOG(m, PX_LOG_WARN,
               "reload: pool %s is no longer in the file: it needs a restart to stop; "
               "serving it as before",
               cur->conf->name);
        return true;
    }
    if (key != NULL) {
        PX_LOG(m, PX_LOG_WARN,
               "reload: pool %s: its \"%s\" changed: that needs a restart; serving the "
               "pool as before",
               pc->name, key);
        return true;
    }
    px_shared_pool scratch = {0}; /* compose's doc and epoch, moved into next */
    int crc = compose(cur, pc, doc, &scratch, job->why, sizeof(job->why));
    if (crc != 0) {
        PX_LOG(m, PX_LOG_ERR, "reload: %s", job->why);
        *rc = crc == PX_RELOAD_STALE ? PX_RELOAD_STALE : PX_RELOAD_INVALID;
        return false;
    }
    px_shared_pool *next = &job->next[i];
    if (px_shared_pool_init(next, h->cref, pc, job->why, sizeof(job->why)) != 0) {
        free(scratch.doc);
        PX_LOG(m, PX_LOG_ERR, "reload: %s", job->why);
        return false;
    }
    next->doc = scratch.doc;
    next->doclen = scratch.doclen;
    next->epoch = scratch.epoch;
    health_carry(m, cur, next);
    h->moved[i] = moved_share(cur->members, next->members, &h->exact[i]);
    warm_plan(cur, next, &h->opt, h->moved[i]);
    return true;
}

/* Pools of the file that the proxy does not serve: they need a restart (named in h->held). */
static void note_added(px_ctl *m, const ch_config *cfg, px_reload_held *h)
{
    for (size_t k = 0; k < cfg->npools; k++) {
        bool known = false;
        for (size_t i = 0; i < m->npools && !known; i++)
            known = strcmp(m->pools[i].conf->name, cfg->pools[k].name) == 0;
        if (!known) {
            PX_LOG(m, PX_LOG_WARN, "reload: pool %s is new: it needs a restart to be served",
                   cfg->pools[k].name);
            (void)px_buf_printf(&h->held, "%spool %s added", h->held.len > 0 ? ", " : "",
                                cfg->pools[k].name);
        }
    }
}

/* A reload that failed before every worker prepared (the first `prepared` did): their plans
 * and the next shared states dropped, the failure counted and told. Returns rc. */
static int prepare_failed(px_ctl *m, px_reload_held *h, unsigned prepared, int rc,
                          px_buf *result)
{
    reload_job *job = &h->job;
    for (unsigned w = 0; w < prepared; w++)
        px_worker_call(&m->workers[w], job_abort, NULL);
    for (size_t i = 0; job->next != NULL && i < m->npools; i++)
        px_shared_pool_clear(&job->next[i]);
    px_conf_unref(h->cref);
    m->reload_failures++;
    reload_done(m, false);
    PX_LOG(m, PX_LOG_ERR, "reload failed (above), still serving the old configuration");
    if (result != NULL)
        (void)px_buf_printf(result, "%s", job->why);
    held_free(h);
    return rc;
}

int px_reload_prepare(px_ctl *m, const char *trigger, const px_reload_opts *opt,
                      const px_reload_doc *docs, px_reload_held **out, px_buf *result)
{
    if (m->stopping) { /* the workers take no more jobs */
        if (result != NULL)
            (void)px_buf_printf(result, "shutting down");
        return PX_RELOAD_FAILED;
    }
    drop_held(m, trigger);
    PX_LOG(m, PX_LOG_NOTICE, "reload: %s, reading '%s'", trigger, m->conf_path);
    ch_config *cfg = NULL;
    ch_config_error err;
    if (ch_config_load(m->conf_path, &cfg, &err) != 0) {
        char msg[600];
        m->reload_failures++;
        reload_done(m, false);
        ch_config_error_str(&err, msg, sizeof(msg));
        value_not_shown(msg, sizeof(msg));
        PX_LOG(m, PX_LOG_ERR, "reload failed, still serving the old configuration: %s", msg);
        if (result != NULL)
            (void)px_buf_printf(result, "%s", msg);
        return PX_RELOAD_INVALID;
    }
    px_reload_held *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        ch_config_free(cfg);
        if (result != NULL)
            (void)px_buf_printf(result, "out of memory");
        return PX_RELOAD_FAILED;
    }
    reload_job *job = &h->job;
    job->ok = true;
    h->opt = *opt;
    int rc = PX_RELOAD_FAILED;
    snprintf(job->why, sizeof(job->why), "out of memory");
    h->cref = px_conf_new(cfg);
    job->next = calloc(m->npools, sizeof(*job->next));
    h->moved = calloc(m->npools, sizeof(*h->moved));
    h->exact = calloc(m->npools, sizeof(*h->exact));
    if (h->cref == NULL || job->next == NULL || h->moved == NULL || h->exact == NULL) {
        if (h->cref == NULL)
            ch_config_free(cfg);
        job->ok = false;
    }
    for (size_t i = 0; job->ok && i < m->npools; i++)
        job->ok = next_pool(m, h, i, (ch_conf_pool *)ch_config_pool(cfg, m->pools[i].conf->name),
                            docs != NULL ? &docs[i] : NULL, &rc);
    if (job->ok)
        note_added(m, cfg, h);
    unsigned prepared = 0;
    for (; job->ok && prepared < m->nworkers; prepared++) {
        px_worker_call(&m->workers[prepared], job_prepare, job);
        if (!job->ok)
            break; /* that worker freed its own plans */
    }
    if (!job->ok)
        return prepare_failed(m, h, prepared, rc, result);
    if (out == NULL)
        return px_reload_commit(m, h, result);
    m->held = h;
    *out = h;
    return PX_RELOAD_OK;
}

void px_reload_abort(px_ctl *m, px_reload_held *h)
{
    if (h == NULL)
        return;
    if (m->held == h)
        m->held = NULL;
    held_abort(m, h);
}

int px_reload_commit(px_ctl *m, px_reload_held *h, px_buf *result)
{
    if (m->held == h)
        m->held = NULL;
    /* A window starts at the swap, not when it was prepared (a two-phase change may wait). */
    uint64_t now = mono_ms();
    for (size_t i = 0; i < m->npools; i++) {
        px_shared_pool *next = &h->job.next[i];
        if (next->conf != NULL && next->warm_from == PX_WARM_FROM_NOW &&
            h->opt.ramp_start_unix_ms == 0)
            next->warm.start_ms = now;
    }
    for (unsigned w = 0; w < m->nworkers; w++)
        px_worker_call(&m->workers[w], job_commit, NULL);
    /* No worker points into the old shared state any more. */
    px_buf changed = {0};
    for (size_t i = 0; i < m->npools; i++) {
        px_shared_pool *cur = &m->pools[i], *next = &h->job.next[i];
        if (next->conf == NULL)
            continue;
        log_change(m, cur, next, h->moved[i], h->exact[i], &changed);
        /* The placement a window starts from, or the running one's, passes to next. */
        if (next->warm_from == PX_WARM_FROM_NOW) {
            next->prev = cur->members;
            cur->members = NULL;
        } else if (next->warm_from == PX_WARM_FROM_KEPT) {
            next->prev = cur->prev;
            cur->prev = NULL;
        }
        px_shared_pool_clear(cur); /* next's reference to the config passes to cur */
        cur->cref = next->cref;
        cur->conf = next->conf;
        cur->members = next->members;
        cur->health = next->health;
        cur->servers = next->servers;
        cur->nservers = next->nservers;
        cur->tls_listen = next->tls_listen;
        cur->tls_servers = next->tls_servers;
        cur->mc_users = next->mc_users;
        cur->prev = next->prev;
        cur->warm = next->warm;
        cur->warm_from = next->warm_from;
        cur->doc = next->doc;
        cur->doclen = next->doclen;
        cur->epoch = next->epoch;
    }
    px_conf_unref(m->conf);
    m->conf = h->cref;
    m->reloads++;
    reload_done(m, true);
    PX_LOG(m, PX_LOG_NOTICE, "reload done (%llu so far)", (unsigned long long)m->reloads);
    if (result != NULL) {
        if (changed.len > 0)
            (void)px_buf_printf(result, "reloaded: %.*s", (int)changed.len, changed.p);
        else
            (void)px_buf_printf(result, "unchanged");
        if (h->held.len > 0)
            (void)px_buf_printf(result, "; not applied, needs a restart: %.*s",
                                (int)h->held.len, h->held.p);
    }
    px_buf_free(&changed);
    int rc = h->held.len > 0 ? PX_RELOAD_PARTIAL : PX_RELOAD_OK;
    held_free(h);
    return rc;
}

/* The service manager sees the reload (RELOADING=1, then READY=1 whatever its outcome: the
 * proxy serves either way; STATUS= says which configuration). */
int px_reload(px_ctl *m, const char *trigger, const px_reload_opts *opt, px_buf *result)
{
    px_notify_reloading(trigger);
    int rc = px_reload_prepare(m, trigger, opt, NULL, NULL, result);
    char status[160];
    snprintf(status, sizeof(status), "serving; the last reload (%s) %s", trigger,
             rc == PX_RELOAD_OK        ? "applied"
             : rc == PX_RELOAD_PARTIAL ? "applied in part (the rest needs a restart: see the log)"
                                       : "failed: the configuration before it serves (see the log)");
    px_notify_reloaded(status);
    return rc;
}

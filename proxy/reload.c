/*
 * reload.c — hot reload: SIGHUP re-reads the config file and swaps each pool's membership,
 * placement table and health in, without closing a client connection (docs/PROXY.md, "Reload").
 *
 * A reload is all or nothing: every fallible step (loading the file, building each pool's
 * membership and health, resolving new servers' addresses, allocating) is done for every pool
 * before anything is swapped. A failure there logs why (a config error as file:line:column),
 * counts reload_failures and leaves the proxy exactly as it was. The swap itself cannot fail.
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
 * px_reload_reap once its FIFOs are empty.
 *
 * Fragments in flight keep their connection; their failover candidates (membership indexes) are
 * renumbered into the new membership, dropping removed servers, so a failover after a reload goes
 * to a server that still exists.
 */

#include "proxy.h"

#include <netdb.h>
#include <stdlib.h>
#include <string.h>

/* Keys through both tables when the library cannot compare them exactly (ketama, modula, ...). */
#define RELOAD_SAMPLE_KEYS 100000u

/* A pool's new state, built before anything is swapped. */
typedef struct pool_plan {
    px_pool *pool;
    const ch_conf_pool *pc;
    ch_membership *members;
    ch_health *health;
    px_server *servers;   /* the new array: reused servers are moved in, new ones set up */
    size_t n;
    size_t *from;         /* per new server: its index in the old array, or SIZE_MAX (new) */
    size_t *map;          /* per old server: its new index, or SIZE_MAX (retired) */
    px_server **retire;   /* one allocation per removed server */
    size_t nretire;
} pool_plan;

static void plan_free(pool_plan *p)
{
    ch_membership_free(p->members);
    ch_health_free(p->health);
    for (size_t i = 0; p->servers != NULL && i < p->n; i++)
        if (p->from[i] == SIZE_MAX)
            px_server_free(&p->servers[i]); /* set up, never started: no handle */
    free(p->servers);
    free(p->from);
    free(p->map);
    for (size_t i = 0; i < p->nretire; i++)
        free(p->retire[i]);
    free(p->retire);
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
    return NULL;
}

static bool resolvable(const ch_conf_server *cs)
{
    if (cs->port == 0)
        return true;
    char port[16];
    snprintf(port, sizeof(port), "%d", cs->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(cs->host, port, &hints, &res);
    if (res != NULL)
        freeaddrinfo(res);
    return rc == 0 && res != NULL;
}

/* Builds p for pool under pc. Returns 0, or -1 (logged, the reason also in why; p freed). */
static int plan_build(px_pool *pool, const ch_conf_pool *pc, pool_plan *p, char *why,
                      size_t whylen)
{
    px_proxy *px = pool->px;
    memset(p, 0, sizeof(*p));
    p->pool = pool;
    p->pc = pc;
    int rc = ch_config_membership(pc, &p->members);
    if (rc != CH_OK) {
        PX_LOG(px, PX_LOG_ERR, "reload: pool %s: cannot build its placement: %s", pc->name,
               ch_strerror(rc));
        snprintf(why, whylen, "pool %s: cannot build its placement: %s", pc->name,
                 ch_strerror(rc));
        return -1;
    }
    p->n = ch_membership_size(p->members);
    ch_health_options ho;
    ch_config_health(pc, &ho);
    rc = ch_health_new(p->n, &ho, &p->health);
    if (rc != CH_OK) {
        PX_LOG(px, PX_LOG_ERR, "reload: pool %s: health policy: %s", pc->name, ch_strerror(rc));
        snprintf(why, whylen, "pool %s: health policy: %s", pc->name, ch_strerror(rc));
        plan_free(p);
        return -1;
    }
    size_t oldn = pool->nservers;
    ch_options opt;
    ch_config_options(pc, &opt);
    ch_member *members = calloc(pc->nservers, sizeof(*members));
    bool *taken = calloc(oldn, sizeof(*taken));
    p->servers = calloc(p->n, sizeof(*p->servers));
    p->from = malloc(p->n * sizeof(*p->from));
    p->map = malloc(oldn * sizeof(*p->map));
    p->retire = calloc(oldn, sizeof(*p->retire));
    if (members == NULL || taken == NULL || p->servers == NULL || p->from == NULL ||
        p->map == NULL || p->retire == NULL) {
        PX_LOG(px, PX_LOG_ERR, "reload: pool %s: out of memory", pc->name);
        snprintf(why, whylen, "pool %s: out of memory", pc->name);
        free(members);
        free(taken);
        free(p->servers); /* nothing set up yet */
        p->servers = NULL;
        plan_free(p);
        return -1;
    }
    for (size_t i = 0; i < p->n; i++)
        p->from[i] = SIZE_MAX;
    for (size_t j = 0; j < oldn; j++)
        p->map[j] = SIZE_MAX;
    /* Membership order is ch_config_members() order; its addr strings point into pc. */
    ch_config_members(pc, opt.algo, members);
    const char *fail = NULL;
    for (size_t i = 0; fail == NULL && i < p->n; i++) {
        const ch_conf_server *cs = NULL;
        for (size_t k = 0; k < pc->nservers && cs == NULL; k++)
            if (members[i].addr == pc->servers[k].addr)
                cs = &pc->servers[k];
        if (cs == NULL) {
            fail = "a member without its server entry";
            break;
        }
        for (size_t j = 0; j < oldn; j++) {
            if (!taken[j] && strcmp(pool->servers[j].conf->addr, cs->addr) == 0) {
                taken[j] = true;
                p->from[i] = j;
                p->map[j] = i;
                break;
            }
        }
        if (p->from[i] != SIZE_MAX) {
            /* Reused: moved in at the swap; only its line in the file changes. */
            p->servers[i].conf = cs;
            continue;
        }
        if (!resolvable(cs) || px_server_setup(pool, &p->servers[i], i, cs) != 0) {
            /* px_server_setup logged a resolution failure; an allocation failure leaves a
             * partial setup that px_server_free undoes. */
            fail = "cannot set up a new server";
            PX_LOG(px, PX_LOG_ERR, "reload: pool %s: cannot add server '%s'", pc->name,
                   cs->addr);
            snprintf(why, whylen, "pool %s: cannot add server '%s'", pc->name, cs->addr);
        }
    }
    free(members);
    for (size_t j = 0; fail == NULL && j < oldn; j++) {
        if (taken[j])
            continue;
        p->retire[p->nretire] = calloc(1, sizeof(**p->retire));
        if (p->retire[p->nretire] == NULL)
            fail = "out of memory";
        else
            p->nretire++;
    }
    free(taken);
    if (fail != NULL) {
        PX_LOG(px, PX_LOG_ERR, "reload: pool %s: %s", pc->name, fail);
        if (strstr(fail, "new server") == NULL) /* else why names the server already */
            snprintf(why, whylen, "pool %s: %s", pc->name, fail);
        plan_free(p);
        return -1;
    }
    /* Health by address: a reused server that was ejected is ejected again (the new tracker's
     * probe schedule starts over at retry_min); failure streaks of servers up are not kept. */
    uint64_t now = px_now(px);
    for (size_t i = 0; i < p->n; i++) {
        size_t j = p->from[i];
        if (j == SIZE_MAX || ch_health_is_up(pool->health, j))
            continue;
        for (uint32_t k = 0; k < ho.failure_limit; k++)
            if (ch_health_failure(p->health, i, now, px_rand(px)))
                break;
    }
    return 0;
}

/* The fraction of the key space whose owner changes from a to b (owners compared by node id):
 * exact when the library can compare the tables (ch_table_transfer), else measured on
 * RELOAD_SAMPLE_KEYS generated keys: the ones `chash plan --keys 100000` uses ("key:0:<i>"), so
 * both print the same figure for the same two files. Negative when out of memory. Cost: O(Na x Nb) plus the transfer, or two lookups per sample key. */
static double moved_share(const ch_membership *a, const ch_membership *b, bool *exact)
{
    const ch_table *ta = ch_membership_table(a), *tb = ch_membership_table(b);
    size_t na = ch_membership_size(a), nb = ch_membership_size(b);
    size_t *same = malloc(na * sizeof(*same)); /* a's node i is b's node same[i] */
    double *m = calloc(na * nb, sizeof(*m));
    if (same == NULL || m == NULL) {
        free(same);
        free(m);
        return -1;
    }
    for (size_t i = 0; i < na; i++)
        same[i] = ch_membership_find(b, ch_table_node_id(ta, i));
    double moved = 0;
    *exact = ch_table_transfer(ta, tb, m) == CH_OK;
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
    for (unsigned c = 0; c < dst->nconns; c++)
        dst->conns[c].server = dst;
}

/* Renumbers the candidates of every fragment queued on s: cand[attempt] (the server it is on)
 * becomes cand[0], SIZE_MAX when that server is retired (never dispatched to again: a failure
 * moves on from it); the later candidates follow, minus retired ones. */
static void frags_remap(px_server *s, const size_t *map, size_t oldn)
{
    for (unsigned c = 0; c < s->nconns; c++) {
        for (px_frag *f = s->conns[c].head; f != NULL; f = f->next) {
            if (f->kind != PX_FRAG_FORWARD || f->ncand == 0)
                continue;
            size_t cand[PX_MAX_DEPTH], n = 0;
            for (size_t k = f->attempt; k < f->ncand; k++) {
                size_t x = f->cand[k] < oldn ? map[f->cand[k]] : SIZE_MAX;
                if (x != SIZE_MAX || k == f->attempt)
                    cand[n++] = x;
            }
            memcpy(f->cand, cand, n * sizeof(*cand));
            f->ncand = n;
            f->attempt = 0;
        }
    }
}

/* Swaps p in. Cannot fail. Appends "<pool>: <old> -> <new>" to changed (", "-separated) when
 * the membership version changed (changed may be NULL; out of memory there only shortens it). */
static void plan_apply(pool_plan *p, px_buf *changed)
{
    px_pool *pool = p->pool;
    px_proxy *px = pool->px;
    const ch_conf_pool *pc = p->pc;
    size_t oldn = pool->nservers;
    px_server *old = pool->servers;

    bool exact = false;
    double moved = moved_share(pool->members, p->members, &exact);
    char was[CH_VERSION_MAX];
    snprintf(was, sizeof(was), "%s", ch_membership_version(pool->members));

    for (size_t i = 0; i < p->n; i++) {
        if (p->from[i] != SIZE_MAX) {
            const ch_conf_server *cs = p->servers[i].conf;
            server_move(&p->servers[i], &old[p->from[i]]);
            p->servers[i].index = i;
            p->servers[i].conf = cs;
        } else {
            px_server_start(&p->servers[i]);
        }
    }
    size_t r = 0;
    for (size_t j = 0; j < oldn; j++) {
        if (p->map[j] != SIZE_MAX)
            continue;
        px_server *s = p->retire[r++];
        server_move(s, &old[j]);
        s->retired = true;
        s->probing = false;
        px_dl_push(&px->retired, &s->retired_link);
        PX_LOG(px, PX_LOG_NOTICE,
               "reload: pool %s: server %s (%s) removed: its connections close once the "
               "requests in flight on them are answered",
               pc->name, s->conf->id, s->conf->addr);
    }
    for (size_t i = 0; i < p->n; i++)
        frags_remap(&p->servers[i], p->map, oldn);
    for (px_dl *d = px->retired.next; d != &px->retired; d = d->next) {
        px_server *s = PX_CONTAINER(d, px_server, retired_link);
        if (s->pool == pool)
            frags_remap(s, p->map, oldn);
    }

    ch_membership_free(pool->members);
    ch_health_free(pool->health);
    free(old);
    pool->conf = pc;
    pool->members = p->members;
    pool->table = ch_membership_table(p->members);
    pool->health = p->health;
    pool->servers = p->servers;
    pool->nservers = p->n;
    pool->depth = pc->failover_depth < 1                        ? 1
                  : (size_t)pc->failover_depth > PX_MAX_DEPTH ? PX_MAX_DEPTH
                                                               : (size_t)pc->failover_depth;
    pool->timeout_ms = pc->timeout_ms > 0 ? (uint64_t)pc->timeout_ms : PX_DEFAULT_TIMEOUT_MS;
    pool->limits.max_request = pc->max_request_bytes > 0 ? (size_t)pc->max_request_bytes : 1;
    pool->max_client_buffer =
        pc->max_client_buffer_bytes > 0 ? (size_t)pc->max_client_buffer_bytes : 1;
    pool->client_password = pc->client_auth != NULL ? pc->client_auth : pc->redis_auth;
    for (size_t i = 0; pc->preconnect && i < p->n; i++)
        if (p->from[i] == SIZE_MAX)
            px_server_preconnect(&pool->servers[i]);

    const char *now = ch_membership_version(pool->members);
    if (strcmp(was, now) != 0 && changed != NULL)
        (void)px_buf_printf(changed, "%s%s: %s -> %s", changed->len > 0 ? ", " : "", pc->name,
                            was, now);
    if (strcmp(was, now) == 0) {
        PX_LOG(px, PX_LOG_NOTICE, "reload: pool %s: membership %s unchanged, %zu servers",
               pc->name, now, p->n);
    } else if (moved < 0) {
        PX_LOG(px, PX_LOG_NOTICE, "reload: pool %s: membership %s -> %s, %zu -> %zu servers",
               pc->name, was, now, oldn, p->n);
    } else {
        char how[64] = "exact";
        if (!exact)
            snprintf(how, sizeof(how), "measured on %u sample keys key:0:<i>",
                     RELOAD_SAMPLE_KEYS);
        PX_LOG(px, PX_LOG_NOTICE,
               "reload: pool %s: membership %s -> %s, %zu -> %zu servers, %.2f%% of the key "
               "space moved (%s)",
               pc->name, was, now, oldn, p->n, 100.0 * moved, how);
    }
    /* The plan's arrays now belong to the pool, or were moved out. */
    free(p->from);
    free(p->map);
    free(p->retire);
    memset(p, 0, sizeof(*p));
}

/* Whether anything still points into cfg: a pool's conf, or a retired server's. */
static bool cfg_in_use(px_proxy *px, const ch_config *cfg)
{
    for (size_t k = 0; k < cfg->npools; k++) {
        const ch_conf_pool *pc = &cfg->pools[k];
        for (size_t i = 0; i < px->npools; i++)
            if (px->pools[i].conf == pc)
                return true;
        for (px_dl *d = px->retired.next; d != NULL && d != &px->retired; d = d->next) {
            const px_server *s = PX_CONTAINER(d, px_server, retired_link);
            for (size_t j = 0; j < pc->nservers; j++)
                if (s->conf == &pc->servers[j])
                    return true;
        }
    }
    return false;
}

static void cfg_collect(px_proxy *px)
{
    size_t keep = 0;
    for (size_t i = 0; i < px->nold_cfgs; i++) {
        if (cfg_in_use(px, px->old_cfgs[i]))
            px->old_cfgs[keep++] = px->old_cfgs[i];
        else
            ch_config_free(px->old_cfgs[i]);
    }
    px->nold_cfgs = keep;
}

int px_reload(px_proxy *px, const char *trigger, px_buf *result)
{
    PX_LOG(px, PX_LOG_NOTICE, "reload: %s, reading '%s'", trigger, px->conf_path);
    ch_config *cfg = NULL;
    ch_config_error err;
    if (ch_config_load(px->conf_path, &cfg, &err) != 0) {
        char msg[600];
        px->reload_failures++;
        ch_config_error_str(&err, msg, sizeof(msg));
        PX_LOG(px, PX_LOG_ERR, "reload failed, still serving the old configuration: %s", msg);
        if (result != NULL)
            (void)px_buf_printf(result, "%s", msg);
        return PX_RELOAD_INVALID;
    }
    char why[512] = "out of memory";
    pool_plan *plans = calloc(px->npools, sizeof(*plans));
    ch_config **olds = realloc(px->old_cfgs, (px->nold_cfgs + 1) * sizeof(*olds));
    if (olds != NULL)
        px->old_cfgs = olds;
    bool ok = plans != NULL && olds != NULL;
    for (size_t i = 0; ok && i < px->npools; i++) {
        px_pool *pool = &px->pools[i];
        const ch_conf_pool *pc = ch_config_pool(cfg, pool->conf->name);
        const char *key = pc != NULL ? restart_key(pool->conf, pc) : NULL;
        if (pc == NULL) {
            PX_LOG(px, PX_LOG_WARN,
                   "reload: pool %s is no longer in the file: it needs a restart to stop; "
                   "serving it as before",
                   pool->conf->name);
        } else if (key != NULL) {
            PX_LOG(px, PX_LOG_WARN,
                   "reload: pool %s: its \"%s\" changed: that needs a restart; serving the "
                   "pool as before",
                   pc->name, key);
        } else if (!pc->redis) {
            PX_LOG(px, PX_LOG_WARN, "reload: pool %s: not a redis pool; serving it as before",
                   pc->name);
        } else {
            ok = plan_build(pool, pc, &plans[i], why, sizeof(why)) == 0;
        }
    }
    for (size_t k = 0; ok && k < cfg->npools; k++) {
        bool known = false;
        for (size_t i = 0; i < px->npools && !known; i++)
            known = strcmp(px->pools[i].conf->name, cfg->pools[k].name) == 0;
        if (!known)
            PX_LOG(px, PX_LOG_WARN, "reload: pool %s is new: it needs a restart to be served",
                   cfg->pools[k].name);
    }
    if (!ok) {
        for (size_t i = 0; plans != NULL && i < px->npools; i++)
            plan_free(&plans[i]);
        free(plans);
        ch_config_free(cfg);
        px->reload_failures++;
        PX_LOG(px, PX_LOG_ERR, "reload failed (above), still serving the old configuration");
        if (result != NULL)
            (void)px_buf_printf(result, "%s", why);
        return PX_RELOAD_FAILED;
    }
    px_buf changed = {0};
    for (size_t i = 0; i < px->npools; i++)
        if (plans[i].pool != NULL)
            plan_apply(&plans[i], result != NULL ? &changed : NULL);
    free(plans);
    px->old_cfgs[px->nold_cfgs++] = px->cfg;
    px->cfg = cfg;
    px->reloads++;
    px_reload_reap(px); /* retired servers with nothing in flight close now */
    cfg_collect(px);
    PX_LOG(px, PX_LOG_NOTICE, "reload done (%llu so far)", (unsigned long long)px->reloads);
    if (result != NULL) {
        if (changed.len > 0)
            (void)px_buf_printf(result, "reloaded: %.*s", (int)changed.len, changed.p);
        else
            (void)px_buf_printf(result, "unchanged");
    }
    px_buf_free(&changed);
    return PX_RELOAD_OK;
}

void px_reload_reap(px_proxy *px)
{
    if (px->retired.next == NULL)
        return;
    bool freed = false;
    px_dl *d = px->retired.next;
    while (d != &px->retired) {
        px_dl *next = d->next;
        px_server *s = PX_CONTAINER(d, px_server, retired_link);
        bool busy = false;
        for (unsigned c = 0; c < s->nconns && !busy; c++)
            busy = s->conns[c].head != NULL;
        if (!busy) {
            PX_LOG(px, PX_LOG_INFO, "pool %s: removed server %s closed", s->pool->conf->name,
                   s->conf->id);
            px_server_dispose(s);
            freed = true;
        }
        d = next;
    }
    if (freed)
        cfg_collect(px);
}

void px_reload_stop(px_proxy *px)
{
    while (px->retired.next != NULL && px->retired.next != &px->retired)
        px_server_dispose(PX_CONTAINER(px->retired.next, px_server, retired_link));
}

void px_reload_free(px_proxy *px)
{
    for (size_t i = 0; i < px->nold_cfgs; i++)
        ch_config_free(px->old_cfgs[i]);
    free(px->old_cfgs);
    px->old_cfgs = NULL;
    px->nold_cfgs = 0;
}

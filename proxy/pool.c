/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pool.c — a pool's shared state and a worker's settings of it (pool.h).
 */
#include "pool.h"
#include "file.h"
#include "proto/mc_bin.h"
#include "tls.h"

#include <unistd.h>

#include "hot/topk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most one block of a pool's placement table may take (a ring's points, 16 bytes each): a
 * weight that would need more fails the start, -t or the reload at once, with the figure,
 * instead of building for seconds into gigabytes. Placements are built by the control thread
 * only (start, -t, reload); the refusal's size is left for its message. */
#define PX_MAX_TABLE_BLOCK ((size_t)64 << 20)
static _Thread_local size_t table_refused;

static void *table_alloc(void *ctx, size_t size)
{
    (void)ctx;
    if (size > PX_MAX_TABLE_BLOCK) {
        table_refused = size;
        return NULL;
    }
    return malloc(size);
}

static void table_free(void *ctx, void *p, size_t size)
{
    (void)ctx, (void)size;
    free(p);
}

static const ch_allocator table_allocator = {table_alloc, table_free, NULL};

/* The largest client_auth_file read: a file of users, not of data. */
#define PX_AUTH_FILE_MAX (1u << 20)

/* client_auth_file's users into *out (NULL when the pool has none), read at each start and
 * reload like the TLS files. 0, or -1 with why naming the config key's place
 * (conf:line:column), the file and its line, never a line's content. */
static int load_users(const ch_conf_pool *pc, const char *conf, const char *dir,
                      px_mcb_users **out, char *why, size_t whylen)
{
    *out = NULL;
    if (pc->client_auth_file == NULL)
        return 0;
    char path[4200], r[4400];
    const char *f = pc->client_auth_file;
    if (f[0] == '/' || dir[0] == '\0')
        snprintf(path, sizeof(path), "%s", f);
    else
        snprintf(path, sizeof(path), "%s/%s", dir, f);
    const char *where = conf != NULL ? conf : "(config)";
    int fd = px_file_open_regular(path, "client_auth_file", r, sizeof(r));
    if (fd < 0) {
        snprintf(why, whylen, "%s:%u:%u: pool %s: %s", where, pc->client_auth_file_line,
                 pc->client_auth_file_column, pc->name, r);
        return -1;
    }
    char *text = malloc(PX_AUTH_FILE_MAX + 1);
    size_t len = 0;
    ssize_t n = 1;
    while (text != NULL && len <= PX_AUTH_FILE_MAX &&
           (n = read(fd, text + len, PX_AUTH_FILE_MAX + 1 - len)) > 0)
        len += (size_t)n;
    close(fd);
    const char *what = NULL;
    size_t line = 0;
    int rc = text == NULL ? -1
             : n < 0 ? 2
             : len > PX_AUTH_FILE_MAX ? 3
                                      : px_mcb_users_parse(text, len, out, &line, &what);
    if (text != NULL)
        memset(text, 0, len); /* passwords do not linger in freed memory */
    free(text);
    if (rc == 0)
        return 0;
    if (rc == 1)
        snprintf(why, whylen, "%s:%u:%u: pool %s: client_auth_file '%s': line %zu: %s", where,
                 pc->client_auth_file_line, pc->client_auth_file_column, pc->name, path, line,
                 what);
    else
        snprintf(why, whylen, "%s:%u:%u: pool %s: client_auth_file '%s': %s", where,
                 pc->client_auth_file_line, pc->client_auth_file_column, pc->name, path,
                 rc == 2 ? "cannot be read" : rc == 3 ? "larger than 1 MiB" : "out of memory");
    return -1;
}

/* The pool whose servers pc's placement is built from: pc's own, or, for a listener with routes
 * and no servers of its own (prefix routing, route_prefix.h), its catch-all route's pool: it
 * never sends to them (every key and every keyless request goes to a route's pool), but a pool
 * has servers. */
static const ch_conf_pool *placed_by(const px_conf *cref, const ch_conf_pool *pc)
{
    if (pc->nservers > 0 || pc->membership != NULL || cref == NULL || cref->cfg == NULL)
        return pc;
    for (size_t i = 0; i < pc->nroutes; i++)
        if (pc->routes[i].prefix_len == 0) {
            const ch_conf_pool *to = ch_config_pool(cref->cfg, pc->routes[i].pool);
            return to != NULL && to->nroutes == 0 ? to : pc;
        }
    return pc;
}

int px_shared_pool_init(px_shared_pool *sp, px_conf *cref, const ch_conf_pool *pc, char *why,
                        size_t whylen)
{
    memset(sp, 0, sizeof(*sp));
    const ch_conf_pool *place = placed_by(cref, pc);
    table_refused = 0;
    ch_error err = {.size = sizeof(err)};
    int rc = ch_config_membership_err(place, &table_allocator, &sp->members, &err);
    if (rc == CH_ENOMEM && table_refused > 0) {
        snprintf(why, whylen,
                 "pool %s: its placement would need %.0f MiB in one table (chash-proxy allows "
                 "%zu MiB): lower the weights (a ring has vnodes points per unit of weight)",
                 pc->name, (double)table_refused / (1 << 20), PX_MAX_TABLE_BLOCK >> 20);
        return -1;
    }
    if (rc != CH_OK) {
        /* The pool's line (its key's; servers from etcd have none in the file) and libchash's
         * reason: the argument at fault and its limit. */
        snprintf(why, whylen, "%s:%u: pool %s: cannot build its placement: %s",
                 cref != NULL && cref->cfg != NULL && cref->cfg->path != NULL ? cref->cfg->path
                                                                              : "(config)",
                 pc->line, pc->name, err.message);
        return -1;
    }
    sp->nservers = ch_membership_size(sp->members);
    size_t walk[8], nwalk = 0;
    if (pc->replicas > 1 && ch_replicas_hash(ch_membership_table(sp->members), 0,
                                             (size_t)pc->replicas, walk, &nwalk) != CH_OK) {
        /* A replicated pool's owners are the first N nodes of a key's walk (route_replica.h) */
        snprintf(why, whylen,
                 "%s:%u:%u: pool %s: \"replicas: %d\" needs a placement with a walk; "
                 "distribution %s has none (use ketama, ring, maglev or rendezvous)",
                 cref != NULL && cref->cfg != NULL && cref->cfg->path != NULL ? cref->cfg->path
                                                                              : "(config)",
                 pc->replicas_line, pc->replicas_column, pc->name, pc->replicas,
                 pc->distribution != NULL ? pc->distribution : "ketama");
        px_shared_pool_clear(sp);
        return -1;
    }
    if (pc->replicas > 1 && pc->gutter_pool != NULL) {
        /* An ejected owner's keys are served by its other owners; a gutter would take them
         * from those (and miss) instead. */
        snprintf(why, whylen,
                 "%s:%u:%u: pool %s: \"gutter\" with \"replicas: %d\": an ejected server's keys "
                 "are served by their other owners (drop one of the two)",
                 cref != NULL && cref->cfg != NULL && cref->cfg->path != NULL ? cref->cfg->path
                                                                              : "(config)",
                 pc->gutter_line, pc->gutter_column, pc->name, pc->replicas);
        px_shared_pool_clear(sp);
        return -1;
    }
    ch_health_options ho;
    ch_config_health(pc, &ho);
    size_t journal = pc->rejoin_journal_keys > 0 ? (size_t)pc->rejoin_journal_keys : 0;
    size_t max_down = (size_t)(pc->max_ejected_share * (double)sp->nservers + 1e-9);
    rc = px_health_new(sp->nservers, &ho, journal, max_down, &sp->health);
    if (rc != CH_OK) {
        snprintf(why, whylen, "pool %s: health policy: %s", pc->name, ch_strerror(rc));
        px_shared_pool_clear(sp);
        return -1;
    }
    if (px_health_set_readmit_ramp(sp->health, pc->readmit_ramp_ms > 0
                                                    ? (uint64_t)pc->readmit_ramp_ms
                                                    : 0) != 0) {
        snprintf(why, whylen, "pool %s: out of memory", pc->name);
        px_shared_pool_clear(sp);
        return -1;
    }
    sp->servers = calloc(place->nservers, sizeof(*sp->servers));
    if (sp->servers == NULL || px_pool_servers(place, sp->servers) != 0) {
        snprintf(why, whylen, "pool %s: out of memory", pc->name);
        px_shared_pool_clear(sp);
        return -1;
    }
    /* TLS contexts are built here, so a reload reads the certificate files again (and fails,
     * leaving everything as it was, when one does not load). */
    char dir[4096] = "";
    const char *path = cref != NULL && cref->cfg != NULL ? cref->cfg->path : NULL;
    const char *slash = path != NULL ? strrchr(path, '/') : NULL;
    if (slash != NULL && (size_t)(slash - path) < sizeof(dir))
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    if (px_tls_ctx_new(pc, dir, &sp->tls_listen, &sp->tls_servers, why, whylen) != 0 ||
        load_users(pc, path, dir, &sp->mc_users, why, whylen) != 0) {
        px_shared_pool_clear(sp);
        return -1;
    }
    sp->conf = pc;
    sp->cref = cref;
    px_conf_ref(cref);
    /* Only a membership in etcd is fenced (fleet.c publishes its bound); one from DNS or the
     * file is always served. */
    sp->lease_until_ns = sp->serve_until_ns = ch_conf_membership_etcd(pc) ? 0 : UINT64_MAX;
    sp->fence_why = PX_FENCE_UNREAD;
    return 0;
}

bool px_pool_hot(const px_pool *pool, uint64_t kh)
{
    ch__topk_entry e;
    return pool->hot != NULL && ch__topk_find(pool->hot, kh, &e) &&
           e.count - e.error >= pool->hot_threshold;
}

void px_route_tree_release(px_route_tree *t)
{
    if (t == NULL || --t->refs > 0)
        return;
    for (unsigned i = 0; i < t->n && i < PX_POOL_ROUTES; i++)
        if (t->nodes[i].ops != NULL && t->nodes[i].ops->free != NULL)
            t->nodes[i].ops->free(&t->nodes[i]);
    free(t->prefix); /* one block (route_prefix.c) */
    free(t);
}

void px_shared_pool_clear(px_shared_pool *sp)
{
    ch_membership_free(sp->members);
    ch_membership_free(sp->prev);
    sp->prev = NULL;
    px_tls_ctx_free(sp->tls_listen);
    px_tls_ctx_free(sp->tls_servers);
    sp->tls_listen = sp->tls_servers = NULL;
    px_mcb_users_free(sp->mc_users);
    sp->mc_users = NULL;
    memset(&sp->warm, 0, sizeof(sp->warm));
    sp->warm_from = PX_WARM_FROM_NONE;
    px_health_free(sp->health);
    free(sp->servers);
    free(sp->doc);
    sp->doc = NULL;
    sp->doclen = 0;
    sp->epoch = 0;
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

typedef struct addr_at {
    const char *addr;
    size_t i;
} addr_at;

static int addr_at_cmp(const void *a, const void *b)
{
    const addr_at *x = a, *y = b;
    int c = strcmp(x->addr, y->addr);
    return c != 0 ? c : (x->i > y->i) - (x->i < y->i);
}

int px_match_addrs(const char *const *have, size_t nhave, const char *const *want, size_t n,
                   bool same_pointer, size_t *from)
{
    addr_at *v = malloc((nhave ? nhave : 1) * sizeof(*v));
    bool *used = calloc(nhave ? nhave : 1, sizeof(*used));
    if (v == NULL || used == NULL) {
        free(v);
        free(used);
        return -1;
    }
    for (size_t k = 0; k < nhave; k++)
        v[k] = (addr_at){have[k], k};
    qsort(v, nhave, sizeof(*v), addr_at_cmp);
    for (size_t i = 0; i < n; i++) {
        size_t lo = 0, hi = nhave; /* the first entry >= want[i] */
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (strcmp(v[mid].addr, want[i]) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        from[i] = SIZE_MAX;
        for (size_t k = lo; k < nhave && strcmp(v[k].addr, want[i]) == 0; k++) {
            if (!used[k] && (!same_pointer || v[k].addr == want[i])) {
                used[k] = true;
                from[i] = v[k].i;
                break;
            }
        }
    }
    free(v);
    free(used);
    return 0;
}

int px_pool_servers(const ch_conf_pool *pc, const ch_conf_server **out)
{
    ch_options opt;
    ch_config_options(pc, &opt);
    size_t n = pc->nservers;
    ch_member *members = calloc(n ? n : 1, sizeof(*members));
    const char **have = malloc((n ? n : 1) * sizeof(*have));
    const char **want = malloc((n ? n : 1) * sizeof(*want));
    size_t *from = malloc((n ? n : 1) * sizeof(*from));
    int rc = members != NULL && have != NULL && want != NULL && from != NULL ? 0 : -1;
    if (rc == 0) {
        /* ch_config_members' addr strings point into the pool's servers: match by pointer. */
        ch_config_members(pc, opt.algo, members);
        for (size_t i = 0; i < n; i++) {
            have[i] = pc->servers[i].addr;
            want[i] = members[i].addr;
        }
        rc = px_match_addrs(have, n, want, n, true, from);
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        out[i] = from[i] != SIZE_MAX ? &pc->servers[from[i]] : NULL;
        rc = out[i] != NULL ? 0 : -1;
    }
    free(members);
    free(have);
    free(want);
    free(from);
    return rc;
}

void px_pool_configure(px_pool *pool)
{
    const ch_conf_pool *pc = pool->conf;
    pool->depth = pc->failover_depth < 1                        ? 1
                  : (size_t)pc->failover_depth > PX_MAX_DEPTH ? PX_MAX_DEPTH
                                                               : (size_t)pc->failover_depth;
    pool->timeout_ms = pc->timeout_ms > 0 ? (uint64_t)pc->timeout_ms : PX_DEFAULT_TIMEOUT_MS;
    pool->codec = px_codec_of(pc);
    pool->codec->limits(pc, &pool->limits, &pool->backend_limits);
    pool->max_client_buffer =
        pc->max_client_buffer_bytes > 0 ? (size_t)pc->max_client_buffer_bytes : 1;
    pool->client_password = pc->client_auth != NULL ? pc->client_auth : pc->redis_auth;
    pool->max_client_inflight =
        pc->max_client_inflight_bytes > 0 ? (size_t)pc->max_client_inflight_bytes : 1;
}

/*
 * config.c — opening and reloading a client from a twemproxy-style config file: the pool gives
 * the membership, the health policy and the client options (chash_config.h).
 */
#define _POSIX_C_SOURCE 200809L

#include "cache_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void set_error(ch_config_error *err, const char *path, unsigned line, const char *fmt, ...)
{
    if (err == NULL)
        return;
    memset(err, 0, sizeof(*err));
    snprintf(err->file, sizeof(err->file), "%s", path != NULL ? path : "");
    err->line = line;
    err->column = line > 0 ? 1 : 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
}

/* The pool to use, or NULL with *err filled. */
static const ch_conf_pool *find_pool(const ch_config *cfg, const char *path, const char *name,
                                     ch_config_error *err)
{
    const ch_conf_pool *p = ch_config_pool(cfg, name);
    if (p == NULL) {
        if (name != NULL)
            set_error(err, path, 0, "no pool named \"%s\"", name);
        else
            set_error(err, path, 0, "the file has %zu pools: name the one to use", cfg->npools);
        return NULL;
    }
    if (!p->redis) {
        set_error(err, path, p->line,
                  "pool \"%s\" is not a redis pool (libchash-cache needs \"redis: true\")",
                  p->name);
        return NULL;
    }
    return p;
}

/* The client options the pool gives; seed (and nothing else) from opt. */
static int pool_options(const ch_conf_pool *p, const ch_cache_options *opt, ch_cache_options *o)
{
    ch_cache_options given;
    int rc = ch__cache_options_resolve(opt, &given);
    if (rc != CH_OK)
        return rc;
    ch_cache_options_init(o);
    o->seed = given.seed;
    /* twemproxy's timeout: -1 (its default) means none; a client never waits forever, so it
     * means CH_CACHE_DEFAULT_TIMEOUT_MS. */
    if (p->timeout_ms > 0)
        o->timeout_ms = p->timeout_ms > CH_CACHE_MAX_TIMEOUT_MS ? CH_CACHE_MAX_TIMEOUT_MS
                                                                : p->timeout_ms;
    if (p->failover_depth > 0)
        o->failover_depth = (size_t)p->failover_depth;
    o->version = p->version;
    o->password = p->redis_auth;
    o->db = p->redis_db > 0 ? p->redis_db : 0;
    return CH_OK;
}

/* Loads the pool and builds what a client needs from it. On success the caller owns *cfg and
 * *m; on failure nothing is left allocated and *err says why. */
static int load_pool(const char *path, const char *name, const ch_cache_options *opt,
                     ch_config **cfg_out, const ch_conf_pool **pool, ch_membership **m,
                     ch_health_options *hopt, ch_cache_options *o, ch_config_error *err)
{
    ch_config *cfg;
    int rc = ch_config_load(path, &cfg, err);
    if (rc != CH_OK)
        return rc;
    const ch_conf_pool *p = find_pool(cfg, path, name, err);
    if (p == NULL) {
        ch_config_free(cfg);
        return CH_EINVAL;
    }
    rc = pool_options(p, opt, o);
    if (rc != CH_OK) {
        set_error(err, path, p->line, "pool \"%s\": invalid client options: %s", p->name,
                  ch_strerror(rc));
        ch_config_free(cfg);
        return rc;
    }
    ch_config_health(p, hopt);
    rc = ch_config_membership(p, m);
    if (rc != CH_OK) {
        set_error(err, path, p->line, "pool \"%s\": cannot build its membership: %s", p->name,
                  ch_strerror(rc));
        ch_config_free(cfg);
        return rc;
    }
    *cfg_out = cfg;
    *pool = p;
    return CH_OK;
}

int ch_cache_open_config(const char *path, const char *pool, const ch_cache_options *opt,
                         ch_cache **out, ch_config_error *err)
{
    if (path == NULL || out == NULL) {
        set_error(err, path, 0, "%s", ch_strerror(CH_EINVAL));
        return CH_EINVAL;
    }
    ch_config *cfg;
    const ch_conf_pool *p;
    ch_membership *m;
    ch_health_options hopt;
    ch_cache_options o;
    int rc = load_pool(path, pool, opt, &cfg, &p, &m, &hopt, &o, err);
    if (rc != CH_OK)
        return rc;
    rc = ch__cache_new(m, &hopt, &o, out);
    if (rc != CH_OK) {
        set_error(err, path, p->line, "pool \"%s\": %s", p->name, ch_strerror(rc));
        ch_membership_free(m);
    }
    ch_config_free(cfg); /* the client copied what it keeps */
    return rc;
}

int ch_cache_reload_config(ch_cache *c, const char *path, const char *pool, ch_config_error *err)
{
    if (c == NULL || path == NULL) {
        set_error(err, path, 0, "%s", ch_strerror(CH_EINVAL));
        return CH_EINVAL;
    }
    ch_config *cfg;
    const ch_conf_pool *p;
    ch_membership *m;
    ch_health_options hopt;
    ch_cache_options o;
    int rc = load_pool(path, pool, NULL, &cfg, &p, &m, &hopt, &o, err); /* the PRNG stays */
    if (rc != CH_OK)
        return rc;
    rc = ch__cache_swap(c, m, &hopt, &o);
    if (rc != CH_OK) {
        set_error(err, path, p->line, "pool \"%s\": %s", p->name, ch_strerror(rc));
        ch_membership_free(m);
    } else {
        c->reloads++;
    }
    ch_config_free(cfg);
    return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
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
    if (p->replicas > 0)
        o->replicas = (size_t)p->replicas;
    o->version = p->version;
    o->password = p->redis_auth;
    o->db = p->redis_db > 0 ? p->redis_db : 0;
    o->hot_cache_ms = p->hot_cache_ms > 0 ? (uint32_t)p->hot_cache_ms : 0; /* <= an hour */
    o->hot_cache_max_bytes = p->hot_cache_max_bytes > 0 ? (size_t)p->hot_cache_max_bytes : 0;
    o->hot_threshold = p->hot_threshold > 0 ? (uint32_t)p->hot_threshold : 0;
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
    ch_error why = {.size = sizeof(why)};
    rc = ch_config_membership_err(p, NULL, m, &why);
    if (rc != CH_OK) {
        set_error(err, path, p->line, "pool \"%s\": cannot build its membership: %s", p->name,
                  why.message);
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
        ch_config_free(cfg);
        return rc;
    }
    /* The client copied what it routes with; the file stays for membership documents. */
    (*out)->conf = cfg;
    (*out)->conf_pool = (size_t)(p - cfg->pools);
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
        ch_config_free(cfg);
        return rc;
    }
    c->reloads++;
    /* The new file's settings serve the next documents; the epoch stays, so an older
     * document is still refused. */
    ch_config_free(c->conf);
    c->conf = cfg;
    c->conf_pool = (size_t)(p - cfg->pools);
    return rc;
}

/* ---- a fleet's membership documents (docs/FLEET.md) --------------------------------------- */

/* The name documents are given in errors: the pool's etcd URL, else a generic one. */
static const char *doc_name(const ch_conf_pool *p)
{
    return p->membership != NULL ? p->membership : "(membership document)";
}

/* Reads a document into the kept pool (its membership fields are scratch) and builds the
 * membership and options a client needs from it. *epoch: the document's "epoch", else mod_rev.
 * On failure nothing is left allocated and *err says why. Cost: O(len) to parse, then the
 * placement table's build. */
static int doc_build(ch_cache *c, const void *text, size_t len, int64_t mod_rev, int64_t *epoch,
                     ch_membership **m, ch_health_options *hopt, ch_cache_options *o,
                     ch_config_error *err)
{
    if (c->conf == NULL) {
        set_error(err, "(membership document)", 0,
                  "a membership document needs a client opened with ch_cache_open_config()");
        return CH_EINVAL;
    }
    ch_conf_pool *p = &c->conf->pools[c->conf_pool];
    int64_t e = 0;
    int rc = ch_config_membership_doc(p, doc_name(p), text, len, &e, err);
    if (rc != CH_OK)
        return rc;
    *epoch = e > 0 ? e : mod_rev;
    ch_error why = {.size = sizeof(why)};
    if ((rc = pool_options(p, NULL, o)) != CH_OK) {
        snprintf(why.message, sizeof(why.message), "%s", ch_strerror(rc));
    } else {
        ch_config_health(p, hopt);
        rc = ch_config_membership_err(p, NULL, m, &why);
    }
    if (rc != CH_OK)
        set_error(err, doc_name(p), 0, "pool \"%s\": cannot build its membership: %s", p->name,
                  why.message);
    return rc;
}

/* Records why a document was refused, for the instance record. */
static void refuse(ch_cache *c, const ch_config_error *err)
{
    ch_config_error_str(err, c->refused, sizeof(c->refused));
}

int ch_cache_apply_membership_doc(ch_cache *c, const void *text, size_t len, int64_t mod_rev,
                                  ch_config_error *err)
{
    ch_config_error local;
    if (err == NULL)
        err = &local;
    if (c == NULL || (text == NULL && len > 0) || mod_rev < 0) {
        set_error(err, "(membership document)", 0, "%s", ch_strerror(CH_EINVAL));
        return CH_EINVAL;
    }
    int64_t epoch = mod_rev;
    ch_membership *m = NULL;
    ch_health_options hopt;
    ch_cache_options o;
    int rc = doc_build(c, text, len, mod_rev, &epoch, &m, &hopt, &o, err);
    if (epoch > c->seen_epoch)
        c->seen_epoch = epoch;
    if (rc == CH_OK && epoch <= c->epoch) {
        set_error(err, doc_name(&c->conf->pools[c->conf_pool]), 0,
                  "epoch %lld is not newer than the epoch served (%lld): refused",
                  (long long)epoch, (long long)c->epoch);
        rc = CH_EINVAL;
    }
    if (rc == CH_OK && (rc = ch__cache_swap(c, m, &hopt, &o)) != CH_OK)
        set_error(err, doc_name(&c->conf->pools[c->conf_pool]), 0, "%s", ch_strerror(rc));
    if (rc != CH_OK) {
        ch_membership_free(m);
        if (c != NULL && c->conf != NULL)
            refuse(c, err);
        return rc;
    }
    int64_t now = ch__unix_us();
    c->epoch = epoch;
    c->since_unix_ms = now / 1000;
    c->swapped_unix_us = now;
    c->refused[0] = '\0';
    if (c->prepared <= epoch)
        c->prepared = 0;
    if (c->prepare_failed <= epoch) {
        c->prepare_failed = 0;
        c->prepare_error[0] = '\0';
    }
    c->reloads++;
    return CH_OK;
}

int ch_cache_prepare_membership_doc(ch_cache *c, const void *text, size_t len,
                                    int64_t pending_rev, ch_config_error *err)
{
    ch_config_error local;
    if (err == NULL)
        err = &local;
    if (c == NULL || (text == NULL && len > 0) || pending_rev <= 0) {
        set_error(err, "(membership document)", 0, "%s", ch_strerror(CH_EINVAL));
        return CH_EINVAL;
    }
    int64_t epoch = pending_rev; /* its "epoch" once it parses (docs/FLEET.md, "Epochs") */
    ch_membership *m = NULL;
    ch_health_options hopt;
    ch_cache_options o;
    int rc = doc_build(c, text, len, pending_rev, &epoch, &m, &hopt, &o, err);
    if (rc == CH_OK && epoch <= c->epoch) {
        set_error(err, doc_name(&c->conf->pools[c->conf_pool]), 0,
                  "pending epoch %lld is not newer than the epoch served (%lld)",
                  (long long)epoch, (long long)c->epoch);
        rc = CH_EINVAL;
    }
    ch_membership_free(m); /* proven to build; the commit builds it again */
    if (rc != CH_OK) {
        if (c->conf != NULL) {
            c->prepared = 0;
            c->prepare_failed = epoch;
            ch_config_error_str(err, c->prepare_error, sizeof(c->prepare_error));
        }
        return rc;
    }
    c->prepared = epoch;
    if (c->prepare_failed == epoch) {
        c->prepare_failed = 0;
        c->prepare_error[0] = '\0';
    }
    return CH_OK;
}

int64_t ch_cache_prepared_epoch(const ch_cache *c)
{
    return c != NULL ? c->prepared : 0;
}

void ch_cache_prepare_clear(ch_cache *c)
{
    if (c == NULL)
        return;
    c->prepared = 0;
    c->prepare_failed = 0;
    c->prepare_error[0] = '\0';
}

int64_t ch_cache_epoch(const ch_cache *c)
{
    return c == NULL ? 0 : c->epoch;
}

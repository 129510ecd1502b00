/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mig_side.c — one side of `chash migrate`: a pool of a config file and the placement
 * chash-proxy builds for it (mig_run.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "mig_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void side_build(const cli *c, const char *path, side *s);

/* Loads PATH and finds the pool (--pool, else its only one). */
static ch_conf_pool *side_pool(const cli *c, const char *path, side *s)
{
    *s = (side){.path = path};
    ch_config_error err;
    if (ch_config_load(path, &s->cfg, &err) != CH_OK) {
        char buf[600];
        if (err.line == 0)
            cli_fail(c, "%s: %s", path, err.message);
        cli_fail(c, "%s", ch_config_error_str(&err, buf, sizeof(buf)));
    }
    s->pool = ch_config_pool(s->cfg, c->pool);
    if (s->pool == NULL) {
        char names[512] = "";
        for (size_t i = 0; i < s->cfg->npools; i++) {
            size_t len = strlen(names);
            snprintf(names + len, sizeof(names) - len, "%s%s", i ? ", " : "",
                     s->cfg->pools[i].name);
        }
        if (c->pool)
            cli_usage(c, "%s has no pool '%s' (pools: %s)", path, c->pool, names);
        cli_usage(c, "%s has %zu pools; choose one with --pool (%s)", path, s->cfg->npools,
                  names);
    }
    return (ch_conf_pool *)s->pool; /* s->cfg is ours */
}

void side_load(const cli *c, const char *path, side *s)
{
    side_pool(c, path, s);
    side_build(c, path, s);
}

void side_load_doc(const cli *c, const char *path, const char *doc, size_t len, side *s)
{
    ch_conf_pool *p = side_pool(c, path, s);
    ch_config_error err;
    int64_t epoch;
    if (ch_config_membership_doc(p, "(the committed membership document)", doc, len, &epoch,
                                 &err) != CH_OK) {
        char buf[600];
        cli_fail(c, "%s", ch_config_error_str(&err, buf, sizeof(buf)));
    }
    side_build(c, path, s);
}

/* The placement of s's pool, as chash-proxy builds it, and its servers. */
static void side_build(const cli *c, const char *path, side *s)
{
    const ch_conf_pool *p = s->pool;
    if (p->nservers == 0)
        cli_fail(c, "%s: pool %s has no servers", path, p->name);
    ch_options opt;
    ch_config_options(p, &opt);
    if (opt.algo == CH_ALGO_RANDOM)
        cli_usage(c, "%s: pool %s has distribution random: a key has no owner, so there is "
                     "nothing to migrate by",
                  path, p->name);
    if (p->bounded_load_factor >= 1)
        cli_warn(c, "%s: pool %s has bounded_load_factor: chash-proxy may send a hot key to "
                    "another server than its owner; keys are copied to their owners",
                 path, p->name);
    /* The proxy's own build of the pool's table (proxy/pool.c): the same call, so the same
     * owners. */
    ch_error err = {.size = sizeof(err)};
    int rc = ch_config_membership_err(p, NULL, &s->members, &err);
    if (rc != CH_OK)
        cli_fail(c, "%s: pool %s: cannot build its placement: %s", path, p->name, err.message);
    s->table = ch_membership_table(s->members);
    s->n = ch_membership_size(s->members);
    /* Table node i is ch_config_members()'s i-th member, whose addr points into the pool's
     * servers: that gives its host and port. */
    ch_member *m = xmalloc(c, p->nservers * sizeof(*m));
    ch_config_members(p, opt.algo, m);
    s->servers = xcalloc(c, s->n, sizeof(*s->servers));
    for (size_t i = 0; i < s->n; i++) {
        for (size_t j = 0; j < p->nservers; j++) {
            if (m[i].addr == p->servers[j].addr) {
                const ch_conf_server *cs = &p->servers[j];
                s->servers[i] = (mig_server){cs->addr, cs->host, cs->port, cs->name};
            }
        }
        if (s->servers[i].addr == NULL)
            cli_fail(c, "%s: pool %s: member %zu has no server", path, p->name, i);
    }
    free(m);
    for (size_t i = 0; i < s->n; i++)
        for (size_t j = 0; j < i; j++)
            if (strcmp(s->servers[i].addr, s->servers[j].addr) == 0)
                cli_fail(c, "%s: pool %s lists %s twice: a key's copy would have two homes",
                         path, p->name, s->servers[i].addr);
    s->auth = (mig_auth){p->redis_auth, p->redis_db, TIMEOUT_MS};
}

void side_free(side *s)
{
    free(s->servers);
    ch_membership_free(s->members);
    ch_config_free(s->cfg);
}

long side_find(const side *s, const char *addr)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->servers[i].addr, addr) == 0)
            return (long)i;
    return -1;
}

const char *server_label(const mig_server *s, char *buf, size_t len)
{
    if (s->name)
        snprintf(buf, len, "%s (%s)", s->addr, s->name);
    else
        snprintf(buf, len, "%s", s->addr);
    return buf;
}

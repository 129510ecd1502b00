/* SPDX-License-Identifier: Apache-2.0 */
/*
 * routing.c — from a loaded pool to what routing needs (include/chash_route.h): table options,
 * members in the peers' order, the versioned membership, and the health policy. No I/O: the
 * pool is already loaded.
 */
#include "chash_config.h"

#include <stdio.h>
#include <stdlib.h>

int ch_config_options(const ch_conf_pool *p, ch_options *opt)
{
    ch_options_init(opt);
    /* A pool names no vnodes: each scheme's own default (ketama's 160, hashring@3's 40, ...),
     * as the library it reproduces uses, and as chash lookup --config places. */
    opt->vnodes = 0;
    int rc = ch_algo_from_name(p->distribution, &opt->algo);
    if (rc == CH_OK)
        rc = ch_hash_from_name(p->hash, &opt->hash);
    if (rc == CH_OK && p->hash_tag != NULL) {
        opt->hash_tag[0] = p->hash_tag[0];
        opt->hash_tag[1] = p->hash_tag[1];
    }
    return rc;
}

void ch_config_members(const ch_conf_pool *p, ch_algo_id algo, ch_member *members)
{
    bool twemproxy = algo == CH_ALGO_KETAMA || algo == CH_ALGO_MODULA || algo == CH_ALGO_RANDOM;
    /* libmemcached and the client libraries that name servers by address (dalli@3, ...). */
    bool libmemcached = algo == CH_ALGO_LIBMEMCACHED_KETAMA ||
                        algo == CH_ALGO_LIBMEMCACHED_KETAMA_SPY ||
                        (ch_algo_flags(algo) & CH_ALGO_F_ADDR_IDS) != 0;
    for (size_t i = 0; i < p->nservers; i++) {
        const ch_conf_server *s = &p->servers[twemproxy ? p->order[i] : i];
        members[i] = (ch_member){
            .id = libmemcached ? s->addr : s->id,
            .addr = s->addr,
            .name = s->name,
            .weight = s->weight,
        };
    }
}

int ch_config_membership(const ch_conf_pool *p, ch_membership **out)
{
    return ch_config_membership_alloc(p, NULL, out);
}

int ch_config_membership_alloc(const ch_conf_pool *p, const ch_allocator *alloc,
                               ch_membership **out)
{
    return ch_config_membership_err(p, alloc, out, NULL);
}

/* Tells a failure of this file's own, which has nothing more to say than its status, in err (a
 * caller's full-size struct only). Returns status. */
static int failed(ch_error *err, int status)
{
    if (err != NULL && err->size >= sizeof(*err)) {
        err->status = status;
        snprintf(err->message, sizeof(err->message), "%s", ch_strerror(status));
    }
    return status;
}

int ch_config_membership_err(const ch_conf_pool *p, const ch_allocator *alloc,
                             ch_membership **out, ch_error *err)
{
    ch_options opt;
    int rc = ch_config_options(p, &opt);
    if (rc != CH_OK)
        return failed(err, rc);
    opt.allocator = alloc;
    ch_member *members = malloc(p->nservers * sizeof(*members));
    if (members == NULL)
        return failed(err, CH_ENOMEM);
    ch_config_members(p, opt.algo, members);
    rc = ch_membership_build_err(members, p->nservers, &opt, p->version, out, err);
    free(members);
    return rc;
}

void ch_config_health(const ch_conf_pool *p, ch_health_options *opt)
{
    ch_health_options_init(opt);
    if (p->has_auto_eject_hosts)
        opt->eject = p->auto_eject_hosts;
    if (p->has_server_failure_limit && p->server_failure_limit > 0)
        opt->failure_limit = (uint32_t)p->server_failure_limit;
    if (p->has_server_retry_timeout && p->server_retry_timeout_ms > 0)
        opt->retry_min_ms = (uint64_t)p->server_retry_timeout_ms;
    opt->retry_max_ms = (uint64_t)p->server_retry_max_ms;
    if (opt->retry_max_ms < opt->retry_min_ms)
        opt->retry_max_ms = opt->retry_min_ms;
    opt->failure_window_ms = (uint64_t)p->server_failure_window_ms;
}

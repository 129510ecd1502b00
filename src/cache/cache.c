/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache.c — the libchash-cache handle: options, open/close, membership swaps (open and reload
 * share one path), metrics, and the clock, PRNG and SIGPIPE guard the requests use.
 */
#define _POSIX_C_SOURCE 200809L

#include "cache_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- time, randomness, SIGPIPE ----------------------------------------------------------------- */

uint64_t ch__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int64_t ch__unix_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* splitmix64: statistically good enough for jitter, and one add and three multiplies. */
uint64_t ch__rand(ch_cache *c)
{
    uint64_t z = (c->rng += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static uint64_t default_seed(const ch_cache *c)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
           ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)c;
}

void ch__sigpipe_block(ch__sigpipe *g)
{
    sigset_t pipe_only, pending;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, &g->old);
    sigpending(&pending);
    g->was_pending = sigismember(&pending, SIGPIPE) == 1;
}

void ch__sigpipe_restore(const ch__sigpipe *g)
{
    if (!g->was_pending) {
        sigset_t pipe_only, pending;
        sigemptyset(&pipe_only);
        sigaddset(&pipe_only, SIGPIPE);
        sigpending(&pending);
        if (sigismember(&pending, SIGPIPE) == 1) {
            /* Ours (a write to a socket the peer closed): take it off the pending set. */
            const struct timespec zero = {0, 0};
            while (sigtimedwait(&pipe_only, NULL, &zero) < 0 && errno == EINTR) {
            }
        }
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

/* ---- options ----------------------------------------------------------------------------------- */

void ch_cache_options_init(ch_cache_options *opt)
{
    memset(opt, 0, sizeof(*opt));
    opt->size = sizeof(*opt);
    opt->timeout_ms = CH_CACHE_DEFAULT_TIMEOUT_MS;
    opt->failover_depth = CH_CACHE_DEFAULT_FAILOVER_DEPTH;
    opt->replicas = 1;
}

int ch__cache_options_resolve(const ch_cache_options *opt, ch_cache_options *out)
{
    ch_cache_options_init(out);
    if (opt != NULL) {
        if (opt->size < sizeof(opt->size))
            return CH_EINVAL;
        memcpy(out, opt, opt->size < sizeof(*out) ? opt->size : sizeof(*out));
        out->size = sizeof(*out);
    }
    if (out->timeout_ms < 1 || out->timeout_ms > CH_CACHE_MAX_TIMEOUT_MS)
        return CH_EINVAL;
    if (out->failover_depth < 1 || out->db < 0)
        return CH_EINVAL;
    if (out->replicas == 0)
        out->replicas = 1; /* a zeroed struct: the default */
    if (out->replicas > CH_CACHE_MAX_REPLICAS)
        return CH_EINVAL;
    if (out->hot_cache_ms > CH_CACHE_MAX_HOT_CACHE_MS)
        return CH_EINVAL;
    return CH_OK;
}

int ch__health_options_resolve(const ch_health_options *opt, ch_health_options *out)
{
    ch_health_options_init(out);
    if (opt != NULL) {
        if (opt->size < sizeof(opt->size))
            return CH_EINVAL;
        memcpy(out, opt, opt->size < sizeof(*out) ? opt->size : sizeof(*out));
        out->size = sizeof(*out);
    }
    return CH_OK; /* ch_health_new() validates the policy itself */
}

/* ---- open, close, reload ----------------------------------------------------------------------- */

static void nodes_free(ch__node *nodes, size_t n)
{
    if (nodes == NULL)
        return;
    for (size_t i = 0; i < n; i++) {
        ch__node_drop(&nodes[i]);
        ch__journal_free(&nodes[i].journal);
        free(nodes[i].host);
    }
    free(nodes);
}

/* Nodes for m's members, addresses parsed, not connected. */
static int nodes_new(const ch_membership *m, ch__node **out)
{
    size_t n = ch_membership_size(m);
    ch__node *nodes = calloc(n, sizeof(*nodes));
    if (nodes == NULL)
        return CH_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const ch_member *mem = ch_membership_member(m, i);
        nodes[i].id = mem->id;
        nodes[i].addr = mem->addr;
        int rc = ch__parse_addr(mem->addr, &nodes[i].host, &nodes[i].port);
        if (rc != CH_OK) {
            nodes_free(nodes, n);
            return rc;
        }
    }
    *out = nodes;
    return CH_OK;
}

/* Replays what the old health tracker knew of a node into the new one: an ejected node is
 * ejected again (failure_limit failures now, so its next probe is due after the minimum delay,
 * jittered); an up node keeps its failure streak. The route layer keeps its state private, so
 * the replay goes through its public calls; the counters the client reports are its own and
 * move unchanged. */
static void health_carry(ch_cache *c, const ch_health *old, size_t i, ch_health *h, size_t j,
                         const ch_health_options *hopt, uint64_t now)
{
    ch_health_info info;
    if (ch_health_info_get(old, i, &info) != CH_OK)
        return;
    uint32_t replay = info.up ? info.streak : hopt->failure_limit;
    if (!info.up && !hopt->eject)
        replay = 0; /* the new policy never ejects: the node is up again */
    for (uint32_t k = 0; k < replay; k++)
        ch_health_failure(h, j, now, ch__rand(c));
}

/* Whether connections made under c's options can serve under opt (same AUTH and SELECT). */
static bool same_session(const ch_cache *c, const ch_cache_options *opt)
{
    bool same_password = (c->password == NULL && opt->password == NULL) ||
                         (c->password != NULL && opt->password != NULL &&
                          strcmp(c->password, opt->password) == 0);
    return same_password && c->db == opt->db;
}

/* Moves what c knew of each node that stays (by id) to the new nodes and health tracker: its
 * counters, its health, and its connection when its address and session are unchanged. */
static void carry_over(ch_cache *c, const ch_membership *m, ch__node *nodes, ch_health *h,
                       const ch_health_options *hopt, bool keep_conns)
{
    if (c->m == NULL)
        return;
    uint64_t now = ch__now_ms();
    size_t n = ch_membership_size(m);
    for (size_t j = 0; j < n; j++) {
        size_t i = ch_membership_find(c->m, nodes[j].id);
        if (i == SIZE_MAX)
            continue;
        nodes[j].count = c->nodes[i].count;
        nodes[j].journal = c->nodes[i].journal; /* moved: the old node's is freed empty */
        c->nodes[i].journal = (ch__journal){0};
        if (keep_conns && strcmp(nodes[j].addr, c->nodes[i].addr) == 0) {
            nodes[j].conn = c->nodes[i].conn;
            c->nodes[i].conn = NULL;
        }
        health_carry(c, c->health, i, h, j, hopt, now);
    }
}

int ch__cache_swap(ch_cache *c, ch_membership *m, const ch_health_options *hopt,
                   const ch_cache_options *opt)
{
    size_t n = ch_membership_size(m);
    size_t depth = opt->failover_depth < n ? opt->failover_depth : n;
    size_t replicas = opt->replicas < n ? opt->replicas : n;
    size_t rdepth = depth > replicas ? depth : replicas;
    ch__node *nodes = NULL;
    ch_health *health = NULL;
    char *password = NULL;
    size_t *cand = calloc(rdepth, sizeof(*cand));
    int rc = cand == NULL ? CH_ENOMEM : CH_OK;
    if (rc == CH_OK && opt->password != NULL && (password = strdup(opt->password)) == NULL)
        rc = CH_ENOMEM;
    if (rc == CH_OK)
        rc = nodes_new(m, &nodes);
    if (rc == CH_OK)
        rc = ch_health_new(n, hopt, &health);
    if (rc == CH_OK) {
        /* A table without a failover order (jump) refuses depth > 1: find out now, not per
         * request. */
        size_t count;
        rc = ch_route(ch_membership_table(m), NULL, "", 0, rdepth, cand, &count);
        /* Nor has it owners beyond the first (replicas > 1). */
        if (rc == CH_OK && replicas > 1)
            rc = ch_replicas(ch_membership_table(m), "", 0, replicas, cand, &count);
    }
    if (rc != CH_OK) {
        free(cand);
        free(password);
        nodes_free(nodes, n);
        ch_health_free(health);
        return rc;
    }

    /* Nothing below fails. */
    carry_over(c, m, nodes, health, hopt, same_session(c, opt));
    nodes_free(c->nodes, c->n);
    ch_health_free(c->health);
    ch_membership_free(c->m);
    free(c->cand);
    free(c->password);

    c->m = m;
    c->table = ch_membership_table(m);
    c->health = health;
    c->hopt = *hopt;
    c->nodes = nodes;
    c->n = n;
    c->depth = depth;
    c->depth_wanted = opt->failover_depth;
    c->replicas = replicas;
    c->replicas_wanted = opt->replicas;
    c->rdepth = rdepth;
    c->timeout_ms = opt->timeout_ms;
    c->password = password;
    c->db = opt->db;
    c->cand = cand;
    return CH_OK;
}

int ch__cache_new(ch_membership *m, const ch_health_options *hopt, const ch_cache_options *opt,
                  ch_cache **out)
{
    ch_cache *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return CH_ENOMEM;
    c->rng = opt->seed != 0 ? opt->seed : default_seed(c);
    c->current_until_ms = UINT64_MAX;
    int rc = ch__hot_init(&c->hot, opt);
    if (rc == CH_OK && (rc = ch__cache_swap(c, m, hopt, opt)) != CH_OK)
        ch__hot_free(&c->hot);
    if (rc != CH_OK) {
        free(c);
        return rc;
    }
    *out = c;
    return CH_OK;
}

int ch_cache_open(const ch_member *members, size_t n, const ch_options *table_opt,
                  const ch_health_options *health_opt, const ch_cache_options *opt,
                  ch_cache **out)
{
    if (out == NULL || members == NULL)
        return CH_EINVAL;
    ch_cache_options o;
    ch_health_options h;
    int rc = ch__cache_options_resolve(opt, &o);
    if (rc == CH_OK)
        rc = ch__health_options_resolve(health_opt, &h);
    ch_membership *m = NULL;
    if (rc == CH_OK)
        rc = ch_membership_build(members, n, table_opt, o.version, &m);
    if (rc == CH_OK)
        rc = ch__cache_new(m, &h, &o, out);
    if (rc != CH_OK)
        ch_membership_free(m);
    return rc;
}

void ch_cache_close(ch_cache *c)
{
    if (c == NULL)
        return;
    nodes_free(c->nodes, c->n);
    ch_health_free(c->health);
    ch_membership_free(c->m);
    free(c->cand);
    free(c->password);
    ch_config_free(c->conf);
    ch__hot_free(&c->hot);
    free(c);
}

const ch_membership *ch_cache_membership(const ch_cache *c)
{
    return c == NULL ? NULL : c->m;
}

int ch_cache_reload(ch_cache *c, const ch_member *members, size_t n, const ch_options *table_opt,
                    const char *version)
{
    if (c == NULL || members == NULL)
        return CH_EINVAL;
    ch_membership *m;
    int rc = ch_membership_build(members, n, table_opt, version, &m);
    if (rc != CH_OK)
        return rc;
    ch_cache_options o;
    ch_cache_options_init(&o);
    o.timeout_ms = c->timeout_ms;
    o.failover_depth = c->depth_wanted;
    o.replicas = c->replicas_wanted;
    o.password = c->password;
    o.db = c->db;
    ch_health_options h = c->hopt;
    rc = ch__cache_swap(c, m, &h, &o);
    if (rc != CH_OK) {
        ch_membership_free(m);
        return rc;
    }
    c->reloads++;
    return CH_OK;
}

/* ---- results ----------------------------------------------------------------------------------- */

void ch__result_clear(ch_cache_result *r)
{
    memset(r, 0, sizeof(*r));
    r->status = CH_CACHE_ERROR;
    r->node = SIZE_MAX;
}

void ch_cache_result_free(ch_cache_result *r)
{
    if (r == NULL)
        return;
    if (r->reply_ != NULL)
        freeReplyObject(r->reply_);
    ch__result_clear(r);
}

const char *ch_cache_status_name(ch_cache_status s)
{
    switch (s) {
    case CH_CACHE_HIT: return "hit";
    case CH_CACHE_MISS: return "miss";
    case CH_CACHE_OK: return "ok";
    case CH_CACHE_ERROR: return "error";
    }
    return "?";
}

const char *ch_cache_fail_name(ch_cache_fail f)
{
    switch (f) {
    case CH_CACHE_FAIL_NONE: return "none";
    case CH_CACHE_FAIL_REPLY: return "reply";
    case CH_CACHE_FAIL_CONNECT: return "connect";
    case CH_CACHE_FAIL_TIMEOUT: return "timeout";
    case CH_CACHE_FAIL_IO: return "io";
    case CH_CACHE_FAIL_PROTOCOL: return "protocol";
    case CH_CACHE_FAIL_NO_NODE: return "no node";
    case CH_CACHE_FAIL_FENCED: return "fenced";
    }
    return "?";
}

/* ---- metrics ----------------------------------------------------------------------------------- */

int ch_cache_metrics_get(const ch_cache *c, ch_cache_metrics *out)
{
    if (c == NULL || out == NULL || out->size < sizeof(out->size))
        return CH_EINVAL;
    ch_cache_metrics x;
    memset(&x, 0, sizeof(x));
    x.size = out->size;
    snprintf(x.version, sizeof(x.version), "%s", ch_membership_version(c->m));
    x.nodes = c->n;
    for (size_t i = 0; i < c->n; i++)
        x.nodes_up += ch_health_is_up(c->health, i);
    x.requests = c->requests;
    x.hits = c->total.hits;
    x.misses = c->total.misses;
    x.failovers = c->total.failovers;
    x.errors = c->total.errors;
    x.reply_errors = c->total.reply_errors;
    x.ejections = c->total.ejections;
    x.probes = c->total.probes;
    x.readmissions = c->total.readmissions;
    x.failed = c->failed;
    x.reloads = c->reloads;
    x.repairs = c->total.repairs;
    x.replica_skips = c->total.replica_skips;
    x.rejoin_deleted = c->total.rejoin_deleted;
    x.rejoin_walks = c->total.rejoin_walks;
    x.replica_reads = c->replica_reads;
    ch__hot_metrics(c, &x);
    memcpy(out, &x, out->size < sizeof(x) ? out->size : sizeof(x));
    return CH_OK;
}

int ch_cache_node_metrics_get(const ch_cache *c, size_t i, ch_cache_node_metrics *out)
{
    if (c == NULL || out == NULL || out->size < sizeof(out->size) || i >= c->n)
        return CH_EINVAL;
    const ch__node *node = &c->nodes[i];
    ch_cache_node_metrics x;
    memset(&x, 0, sizeof(x));
    x.size = out->size;
    x.id = node->id;
    x.addr = node->addr;
    x.up = ch_health_is_up(c->health, i);
    x.attempts = node->count.attempts;
    x.hits = node->count.hits;
    x.misses = node->count.misses;
    x.failovers = node->count.failovers;
    x.errors = node->count.errors;
    x.reply_errors = node->count.reply_errors;
    x.ejections = node->count.ejections;
    x.probes = node->count.probes;
    x.readmissions = node->count.readmissions;
    x.repairs = node->count.repairs;
    x.replica_skips = node->count.replica_skips;
    x.rejoin_deleted = node->count.rejoin_deleted;
    x.rejoin_walks = node->count.rejoin_walks;
    memcpy(out, &x, out->size < sizeof(x) ? out->size : sizeof(x));
    return CH_OK;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lost_node — the `make demo` story of libchash-cache: 4 local redis-servers, 10,000 keys
 * written through the client, one server killed. Every read still completes: the lost node's
 * keys (about 1/4) become misses served by the next node of their walk, the others stay hits,
 * nothing fails hard. Restarted, the node comes back only after its backoff and a probe, and
 * exactly its keys return to it.
 *
 * The servers run on free loopback ports in a temp dir, without persistence; every one is
 * stopped at exit, and on SIGINT/SIGTERM (tests/integration/redis_harness.c).
 */
#include "redis_harness.h"

#include <chash_cache.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NODES 4
#define KEYS 10000
#define VICTIM 1 /* cache-02 */
#define READMIT_LIMIT_MS 90000.0 /* beyond the longest backoff (60 s x 1.5) */

static rh_fleet *fleet; /* the harness's; NULL until started */

static void die(const char *what, int rc)
{
    fprintf(stderr, "lost_node: %s: %s\n", what, rc != 0 ? ch_strerror(rc) : "failed");
    rh_fleet_stop(fleet);
    exit(1);
}

static ch_cache *open_client(void)
{
    static char ids[NODES][16];
    ch_member members[NODES];
    for (size_t i = 0; i < NODES; i++) {
        snprintf(ids[i], sizeof(ids[i]), "cache-%02zu", i + 1);
        members[i] = (ch_member){.id = ids[i], .addr = fleet->servers[i].addr, .weight = 1.0};
    }
    /* Defaults: 1 s timeouts, failover to the next node, ejection after 3 failures in 10 s,
     * probes after 1 s doubling to 60 s with +-50% jitter. */
    ch_cache *c;
    int rc = ch_cache_open(members, NODES, NULL, NULL, NULL, &c);
    if (rc != CH_OK)
        die("ch_cache_open", rc);
    return c;
}

static size_t key_of(char *buf, size_t k)
{
    return (size_t)snprintf(buf, 32, "user:%05zu", k);
}

static void write_keys(ch_cache *c, size_t per_node[NODES])
{
    char key[32], value[48];
    for (size_t k = 0; k < KEYS; k++) {
        size_t len = key_of(key, k);
        int vlen = snprintf(value, sizeof(value), "profile of user %zu", k);
        ch_cache_result r;
        if (ch_cache_set(c, key, len, value, (size_t)vlen, 0, &r) != CH_OK ||
            r.status != CH_CACHE_OK)
            die(r.message, 0);
        per_node[r.node]++;
        ch_cache_result_free(&r);
    }
}

typedef struct tally {
    size_t hits, misses, failures;
    size_t by_victim; /* reads the victim served */
    size_t away;      /* reads served by a node other than the key's owner */
} tally;

static ch_cache_node_metrics victim_metrics(const ch_cache *c)
{
    ch_cache_node_metrics m = {.size = sizeof(m)};
    ch_cache_node_metrics_get(c, VICTIM, &m);
    return m;
}

static double ejected_at; /* when the victim was first seen ejected, or 0 */

static tally read_keys(ch_cache *c)
{
    tally t = {0, 0, 0, 0, 0};
    char key[32];
    for (size_t k = 0; k < KEYS; k++) {
        size_t len = key_of(key, k);
        ch_cache_result r;
        if (ch_cache_get(c, key, len, &r) != CH_OK)
            die("ch_cache_get", CH_EINVAL);
        t.hits += r.status == CH_CACHE_HIT;
        t.misses += r.status == CH_CACHE_MISS;
        t.failures += r.status == CH_CACHE_ERROR;
        t.by_victim += r.node == VICTIM;
        t.away += r.failover;
        ch_cache_result_free(&r);
        if (ejected_at == 0 && !victim_metrics(c).up)
            ejected_at = rh_now_ms();
    }
    return t;
}

static void print_healthy(const ch_cache *c)
{
    printf("healthy nodes:     ");
    const char *sep = "";
    for (size_t i = 0; i < NODES; i++) {
        ch_cache_node_metrics m = {.size = sizeof(m)};
        ch_cache_node_metrics_get(c, i, &m);
        if (m.up) {
            printf("%s%s", sep, m.id);
            sep = ", ";
        }
    }
    printf("\n");
}

/* Polls the due probes until the victim is readmitted; returns when (rh_now_ms()). */
static double wait_readmitted(ch_cache *c)
{
    double start = rh_now_ms();
    while (!victim_metrics(c).up) {
        if (rh_now_ms() - start > READMIT_LIMIT_MS)
            die("the node was not readmitted", 0);
        ch_cache_probe(c, NULL);
        rh_sleep_ms(20);
    }
    return rh_now_ms();
}

int main(void)
{
    if (!rh_have_redis()) {
        fprintf(stderr, "lost_node: redis-server not found on PATH: run scripts/bootstrap "
                        "(Debian: apt-get install redis-server)\n");
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("== Lose a cache node: libchash-cache in front of %d local redis-servers\n\n", NODES);
    if ((fleet = rh_fleet_start(NODES)) == NULL)
        die("starting redis-server", 0);
    ch_cache *c = open_client();
    const ch_membership *m = ch_cache_membership(c);
    printf("membership %s: cache-01..cache-%02d on 127.0.0.1 ports", ch_membership_version(m),
           NODES);
    for (size_t i = 0; i < NODES; i++)
        printf(" %d", fleet->servers[i].port);
    printf("\n");

    size_t per_node[NODES] = {0};
    write_keys(c, per_node);
    printf("wrote %d keys through the client:", KEYS);
    for (size_t i = 0; i < NODES; i++)
        printf(" %s %zu%s", ch_membership_member(m, i)->id, per_node[i], i + 1 < NODES ? "," : "");
    printf("\n\n");

    const char *victim = ch_membership_member(m, VICTIM)->id;
    printf("kill -9 %s, then read every key back:\n", victim);
    if (rh_kill(fleet, VICTIM) != 0)
        die("kill", 0);
    tally t = read_keys(c);
    printf("served from cache: %zu\n", t.hits);
    printf("cache misses:      %zu\n", t.misses);
    printf("hard failures:     %zu\n", t.failures);
    print_healthy(c);
    printf("miss share:        %.1f%% (%s held %.1f%% of the keys: ~1/%d of reads fall to "
           "the database)\n\n",
           100.0 * (double)t.misses / KEYS, victim, 100.0 * (double)per_node[VICTIM] / KEYS,
           NODES);

    ch_cache_node_metrics v = victim_metrics(c);
    printf("%s was ejected after %llu failed requests. Restart it (empty) on its port: it\n"
           "returns only after its backoff (1 s +-50%%, doubling per failed probe) and a probe\n"
           "(PING) that answers:\n",
           victim, (unsigned long long)v.errors);
    if (rh_restart(fleet, VICTIM) != 0)
        die("restart", 0);
    double restarted = rh_now_ms();
    double readmitted = wait_readmitted(c);
    v = victim_metrics(c);
    printf("  readmitted %.1f s after its ejection, %.1f s after the restart (probes: %llu)\n",
           (readmitted - ejected_at) / 1000.0, (readmitted - restarted) / 1000.0,
           (unsigned long long)v.probes);
    t = read_keys(c);
    printf("  reads served by %s again: %zu (it owns %zu keys); keys away from their owner: "
           "%zu\n",
           victim, t.by_victim, per_node[VICTIM], t.away);
    print_healthy(c);

    ch_cache_close(c);
    rh_fleet_stop(fleet);
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_demo — route keys over 8 cache nodes, add a 9th, and count how many keys moved:
 * a consistent-hash ring against hash % N.
 */
#include <chash.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEYS 100000

static ch_table *build(ch_algo_id algo, size_t n)
{
    static char ids[16][32];
    ch_node nodes[16];
    for (size_t i = 0; i < n; i++) {
        snprintf(ids[i], sizeof(ids[i]), "cache-%02zu", i + 1);
        nodes[i] = (ch_node){.id = ids[i], .weight = 1.0};
    }
    ch_options opt;
    ch_options_init(&opt);
    opt.algo = algo;
    ch_table *t;
    int rc = ch_table_build(nodes, n, &opt, &t);
    if (rc != CH_OK) {
        fprintf(stderr, "route_demo: build failed: %s\n", ch_strerror(rc));
        exit(1);
    }
    return t;
}

/* Fraction of KEYS keys whose owner id differs between two tables. */
static double moved(const ch_table *a, const ch_table *b, size_t *to_new)
{
    size_t n = 0;
    *to_new = 0;
    char key[32];
    for (int k = 0; k < KEYS; k++) {
        int len = snprintf(key, sizeof(key), "user:%d", k);
        const char *x = ch_table_node_id(a, ch_lookup(a, key, (size_t)len));
        const char *y = ch_table_node_id(b, ch_lookup(b, key, (size_t)len));
        if (x != y && strcmp(x, y) != 0) {
            n++;
            *to_new += strcmp(y, "cache-09") == 0;
        }
    }
    return (double)n / KEYS;
}

int main(void)
{
    ch_table *ring8 = build(CH_ALGO_RING, 8), *ring9 = build(CH_ALGO_RING, 9);
    ch_table *mod8 = build(CH_ALGO_MODULO, 8), *mod9 = build(CH_ALGO_MODULO, 9);

    printf("Routing keys over 8 nodes (ring, %u points per node, hash %s):\n", CH_DEFAULT_VNODES,
           ch_hash_name(CH_HASH_DEFAULT));
    const char *sample[] = {"user:1", "user:2", "session:42", "cart:7", "feed:alice"};
    for (size_t i = 0; i < sizeof(sample) / sizeof(*sample); i++) {
        size_t r[3], c;
        ch_replicas(ring8, sample[i], strlen(sample[i]), 3, r, &c);
        printf("  %-12s -> %s   (failover: %s, %s)\n", sample[i], ch_table_node_id(ring8, r[0]),
               ch_table_node_id(ring8, r[1]), ch_table_node_id(ring8, r[2]));
    }

    size_t to_new_ring, to_new_mod;
    double f_ring = moved(ring8, ring9, &to_new_ring), f_mod = moved(mod8, mod9, &to_new_mod);
    printf("\nAdding cache-09 (8 -> 9 nodes), %d keys:\n", KEYS);
    printf("  hash %% N : %5.1f%% of keys moved  (%zu of them to cache-09)\n", 100 * f_mod,
           to_new_mod);
    printf("  ring     : %5.1f%% of keys moved  (%zu of them to cache-09; the minimum is 1/9 = %.1f%%)\n",
           100 * f_ring, to_new_ring, 100.0 / 9);

    ch_table_free(ring8);
    ch_table_free(ring9);
    ch_table_free(mod8);
    ch_table_free(mod9);
    return 0;
}

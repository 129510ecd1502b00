/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_properties.c — the properties that make consistent hashing worth having, checked on
 * random node sets (fixed seeds) over 100,000 keys:
 *   - adding a node moves keys only to the new node, about 1/(N+1) of them;
 *   - removing a node moves only its own keys; add-then-remove restores every owner;
 *   - replicas are distinct, start with the owner, are capped at N and the walk terminates;
 *   - weights 4:4:1:1 land within 2.5 points of 40/40/10/10;
 *   - bounded loads never exceed ceil(c * average) while keys are placed one by one.
 * Tolerances are derived in the comments from the spread each quantity has.
 */
#include "testutil.h"

#include <stdarg.h>
#include <setjmp.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#define KEYS 100000

static const struct {
    uint64_t seed;
    size_t n;
} sets[] = {{1, 7}, {2, 20}, {3, 50}};

/* Owner id of every key. ids point into the table's own copies. */
static const char **owners(const ch_table *t, uint64_t seed)
{
    const char **o = malloc(KEYS * sizeof(*o));
    assert_non_null(o);
    char key[48];
    for (size_t k = 0; k < KEYS; k++) {
        size_t len = tu_key(key, seed, k);
        o[k] = ch_table_node_id(t, ch_lookup(t, key, len));
    }
    return o;
}

static void shuffle(ch_node *a, size_t n, uint64_t *st)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = tu_below(st, i);
        ch_node x = a[i - 1];
        a[i - 1] = a[j];
        a[j] = x;
    }
}

/* Relative tolerance of the moved fraction around 1/(N+1), per algorithm.
 * - jump, rendezvous: each key moves independently with probability exactly 1/(N+1); over
 *   K = 100,000 keys the relative standard deviation is sqrt(N / K) <= 2.3% for N <= 50.
 *   Tolerance 10% (over 4 sigma).
 * - ring: the new node's share of the ring is Beta(v, v N) for v = 160 points per node, with
 *   relative standard deviation about 1/sqrt(v) = 7.9%, plus the key sampling above: about 8.2%
 *   together. Tolerance 35% (over 4 sigma).
 * - maglev: not minimal by design (the paper trades some disruption for balance); we require
 *   the moved fraction within [1, 2] x 1/(N+1) and only that few keys move between old nodes. */
/* jump and Guava's consistentHash number buckets: only the last can be added or removed. */
static bool append_only(ch_algo_id algo)
{
    return algo == CH_ALGO_JUMP || algo == CH_ALGO_GUAVA_31;
}

/* The client libraries' rings break ties by list order, so removal is checked on the list in
 * its order; chash's own placements do not depend on it and get a shuffled list. */
static bool order_free(ch_algo_id algo)
{
    return algo == CH_ALGO_RING || algo == CH_ALGO_RENDEZVOUS || algo == CH_ALGO_MAGLEV;
}

/* tol < 0: the moved share is printed, not checked (java_hashcode_ring's clustered points put
 * it anywhere; docs/COMPATIBILITY.md). */
static void check_add_remove(ch_algo_id algo, double tol)
{
    for (size_t s = 0; s < sizeof(sets) / sizeof(*sets); s++) {
        uint64_t st = sets[s].seed * 1000;
        size_t n = sets[s].n;
        tu_nodes a = tu_nodes_random(sets[s].seed, n, "node");
        ch_node extra = {"node-new", 1.0};
        /* jump can only append; the others take the new node anywhere in the list. */
        size_t at = append_only(algo) ? n : tu_below(&st, n + 1);
        tu_nodes b = tu_nodes_with(&a, &extra, at);

        ch_table *ta = tu_build(a.nodes, a.n, algo, CH_HASH_DEFAULT, 160);
        ch_table *tb = tu_build(b.nodes, b.n, algo, CH_HASH_DEFAULT, 160);
        const char **oa = owners(ta, sets[s].seed), **ob = owners(tb, sets[s].seed);

        size_t moved = 0, elsewhere = 0;
        for (size_t k = 0; k < KEYS; k++) {
            if (strcmp(oa[k], ob[k]) != 0) {
                moved++;
                elsewhere += strcmp(ob[k], "node-new") != 0;
            }
        }
        double frac = (double)moved / KEYS, ideal = 1.0 / (double)(n + 1);
        print_message("  %-10s N=%2zu -> %2zu: moved %.4f (ideal %.4f, ratio %.3f), "
                      "between old nodes %.4f\n",
                      ch_algo_name(algo), n, n + 1, frac, ideal, frac / ideal,
                      (double)elsewhere / KEYS);
        if (algo == CH_ALGO_MAGLEV) {
            assert_true(frac >= ideal && frac <= 2.0 * ideal);
            assert_true((double)elsewhere / KEYS <= ideal);
        } else {
            assert_int_equal(elsewhere, 0); /* keys move only to the new node */
            assert_true(tol < 0 || fabs(frac / ideal - 1.0) <= tol);
        }

        /* Remove the new node again, from a shuffled list (jump: from the end, order kept):
         * every key returns to exactly its previous owner. */
        tu_nodes c = tu_nodes_without(&b, at);
        if (order_free(algo))
            shuffle(c.nodes, c.n, &st);
        ch_table *tc = tu_build(c.nodes, c.n, algo, CH_HASH_DEFAULT, 160);
        const char **oc = owners(tc, sets[s].seed);
        for (size_t k = 0; k < KEYS; k++)
            assert_string_equal(oc[k], oa[k]);

        /* Remove an old node (jump: the last): only its keys move. */
        size_t gone = append_only(algo) ? n - 1 : tu_below(&st, n);
        tu_nodes d = tu_nodes_without(&a, gone);
        ch_table *td = tu_build(d.nodes, d.n, algo, CH_HASH_DEFAULT, 160);
        const char **od = owners(td, sets[s].seed);
        size_t others_moved = 0;
        for (size_t k = 0; k < KEYS; k++) {
            assert_string_not_equal(od[k], a.ids[gone]);
            if (strcmp(oa[k], a.ids[gone]) != 0)
                others_moved += strcmp(oa[k], od[k]) != 0;
        }
        if (algo == CH_ALGO_MAGLEV)
            assert_true((double)others_moved / KEYS <= 1.0 / (double)n);
        else
            assert_int_equal(others_moved, 0);

        free(oa);
        free(ob);
        free(oc);
        free(od);
        ch_table_free(ta);
        ch_table_free(tb);
        ch_table_free(tc);
        ch_table_free(td);
        tu_nodes_free_view(&b);
        tu_nodes_free_view(&c);
        tu_nodes_free_view(&d);
        tu_nodes_free(&a);
    }
}

static void test_ring_add_remove(void **state)
{
    (void)state;
    check_add_remove(CH_ALGO_RING, 0.35);
}

static void test_rendezvous_add_remove(void **state)
{
    (void)state;
    check_add_remove(CH_ALGO_RENDEZVOUS, 0.10);
}

static void test_jump_add_remove(void **state)
{
    (void)state;
    check_add_remove(CH_ALGO_JUMP, 0.10);
}

static void test_maglev_add_remove(void **state)
{
    (void)state;
    check_add_remove(CH_ALGO_MAGLEV, 0.0 /* unused: bounded loosely above */);
}

/* The client libraries' schemes that claim it, with equal weights (their point counts then do
 * not depend on N): keys move only to an added node, removing it restores every owner, removing
 * a node moves only its keys. The moved share is checked as for the ring (more points, a
 * tighter share: groupcache's 160 replicas here, uhashring_ketama's 160 groups of 4), except
 * for java_hashcode_ring (tol < 0). Guava's consistentHash: as jump, append and remove last. */
static void test_client_schemes_add_remove(void **state)
{
    (void)state;
    const struct {
        ch_algo_id algo;
        double tol;
    } schemes[] = {
        {CH_ALGO_MD5_64_RING, 0.35},    {CH_ALGO_JAVA_HASHCODE_RING, -1.0},
        {CH_ALGO_DALLI_3, 0.35},        {CH_ALGO_UHASHRING_2, 0.35},
        {CH_ALGO_UHASHRING_KETAMA_2, 0.35}, {CH_ALGO_GROUPCACHE_0, 0.35},
        {CH_ALGO_GUAVA_31, 0.10},       {CH_ALGO_SPYMEMCACHED_2, 0.35},
        {CH_ALGO_SPYMEMCACHED_LIBMEMCACHED_2, 0.35},
        /* Of issue 38's rings whose point counts do not depend on N, one of each kind: a
         * predecessor search on 32-bit points (redis_rb@4; predis@1 with equal weights has the
         * same points), on 64-bit points (django_redis_shard@5), and nginx's crc32 chain
         * (cmfast@0). Not predis_ketama@1 or node_memcached@2 (a floor of 40 x N / N in
         * doubles gives 39 for some N, as in PHP and JavaScript), nor envoy_ring_hash@1 (its
         * ring keeps about 1,024 entries, so each node's shrink as N grows:
         * docs/COMPATIBILITY.md). */
        {CH_ALGO_REDIS_RB_4, 0.35},     {CH_ALGO_DJANGO_REDIS_SHARD_5, 0.35},
        {CH_ALGO_CMFAST_0, 0.35},
    };
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
        check_add_remove(schemes[i].algo, schemes[i].tol);
}

/* The baseline, for contrast: hash % N moves about N/(N+1) of the keys when N grows by one. */
static void test_modulo_moves_almost_everything(void **state)
{
    (void)state;
    tu_nodes a = tu_nodes_random(4, 8, "node");
    ch_node extra = {"node-new", 1.0};
    tu_nodes b = tu_nodes_with(&a, &extra, 8);
    ch_table *ta = tu_build(a.nodes, a.n, CH_ALGO_MODULO, CH_HASH_DEFAULT, 160);
    ch_table *tb = tu_build(b.nodes, b.n, CH_ALGO_MODULO, CH_HASH_DEFAULT, 160);
    const char **oa = owners(ta, 4), **ob = owners(tb, 4);
    size_t moved = 0;
    for (size_t k = 0; k < KEYS; k++)
        moved += strcmp(oa[k], ob[k]) != 0;
    /* 8/9 = 0.889, binomial spread 0.1% over 100k keys. */
    assert_true(fabs((double)moved / KEYS - 8.0 / 9.0) < 0.01);
    free(oa);
    free(ob);
    ch_table_free(ta);
    ch_table_free(tb);
    tu_nodes_free_view(&b);
    tu_nodes_free(&a);
}

/* Replicas: min(R, N) distinct nodes, the owner first. The call returning at all shows the walk
 * is bounded (it would loop forever otherwise, with R > N in particular). */
static void test_replicas(void **state)
{
    (void)state;
    ch_algo_id algos[] = {CH_ALGO_MODULO, CH_ALGO_RING, CH_ALGO_RENDEZVOUS, CH_ALGO_MAGLEV};
    for (size_t a = 0; a < sizeof(algos) / sizeof(*algos); a++) {
        for (size_t s = 0; s < sizeof(sets) / sizeof(*sets); s++) {
            size_t n = sets[s].n;
            tu_nodes ns = tu_nodes_random(sets[s].seed, n, "node");
            ch_table *t = tu_build(ns.nodes, n, algos[a], CH_HASH_DEFAULT, 160);
            size_t rs[] = {1, 2, 3, n, n + 5}, out[64], count;
            for (size_t ri = 0; ri < sizeof(rs) / sizeof(*rs); ri++) {
                size_t r = rs[ri], want = r < n ? r : n;
                size_t keys = r >= n ? 500 : 5000; /* a full walk costs O(N^2) for rendezvous */
                char key[48];
                for (size_t k = 0; k < keys; k++) {
                    size_t len = tu_key(key, 9, k);
                    assert_int_equal(ch_replicas(t, key, len, r, out, &count), CH_OK);
                    assert_int_equal(count, want);
                    assert_int_equal(out[0], ch_lookup(t, key, len));
                    for (size_t i = 0; i < count; i++) {
                        assert_true(out[i] < n);
                        for (size_t j = 0; j < i; j++)
                            assert_true(out[i] != out[j]);
                    }
                }
            }
            ch_table_free(t);
            tu_nodes_free(&ns);
        }
    }
}

/* A node's replica set changes only where that node itself is involved: on the ring, adding a
 * node changes a key's replica list only by inserting the new node into it. */
static void test_ring_replicas_stable_on_add(void **state)
{
    (void)state;
    tu_nodes a = tu_nodes_random(6, 10, "node");
    ch_node extra = {"node-new", 1.0};
    tu_nodes b = tu_nodes_with(&a, &extra, 3);
    ch_table *ta = tu_build(a.nodes, a.n, CH_ALGO_RING, CH_HASH_DEFAULT, 160);
    ch_table *tb = tu_build(b.nodes, b.n, CH_ALGO_RING, CH_HASH_DEFAULT, 160);
    char key[48];
    for (size_t k = 0; k < 20000; k++) {
        size_t len = tu_key(key, 6, k), ra[3], rb[3], ca, cb;
        assert_int_equal(ch_replicas(ta, key, len, 3, ra, &ca), CH_OK);
        assert_int_equal(ch_replicas(tb, key, len, 3, rb, &cb), CH_OK);
        /* rb without the new node is a prefix of ra. */
        size_t j = 0;
        for (size_t i = 0; i < cb; i++) {
            const char *id = ch_table_node_id(tb, rb[i]);
            if (strcmp(id, "node-new") == 0)
                continue;
            assert_string_equal(id, ch_table_node_id(ta, ra[j]));
            j++;
        }
    }
    ch_table_free(ta);
    ch_table_free(tb);
    tu_nodes_free_view(&b);
    tu_nodes_free(&a);
}

/* Keys split as ch_table_shares() says: over K = 100,000 keys a share p is observed with
 * standard deviation sqrt(p (1 - p) / K) <= 0.16 points, so 0.7 points is over 4 sigma. */
static void test_shares_match_keys(void **state)
{
    (void)state;
    ch_node nodes[] = {{"cache-a", 4}, {"cache-b", 4}, {"cache-c", 1}, {"cache-d", 1}};
    ch_node eq[] = {{"cache-a", 1}, {"cache-b", 1}, {"cache-c", 1}, {"cache-d", 1}};
    for (int a = 0; a < CH_ALGO_COUNT_; a++) {
        bool weighted = (ch_algo_flags((ch_algo_id)a) & CH_ALGO_F_WEIGHTED) != 0;
        ch_table *t = tu_build(weighted ? nodes : eq, 4, (ch_algo_id)a, CH_HASH_DEFAULT, 160);
        double shares[4], sum = 0;
        size_t count[4] = {0};
        assert_int_equal(ch_table_shares(t, shares), CH_OK);
        char key[48];
        for (size_t k = 0; k < KEYS; k++) {
            size_t len = tu_key(key, 10, k);
            count[ch_lookup(t, key, len)]++;
        }
        for (size_t i = 0; i < 4; i++) {
            sum += shares[i];
            assert_true(fabs((double)count[i] / KEYS - shares[i]) <= 0.007);
        }
        assert_true(fabs(sum - 1.0) < 1e-9);
        ch_table_free(t);
    }
}

/* Weights 4:4:1:1 at 160 points per unit weight, target 40/40/10/10.
 * Rendezvous is exact in expectation and maglev's turns follow the weights to a few slots in
 * 65537, so one fixed node set must land within 2.5 points.
 * The ring is a random construction: a node holding k of P = 1600 points owns a Beta(k, P - k)
 * share, standard deviation 1.22 points for the 640-point nodes and 0.75 for the 160-point ones.
 * So +-2.5 points is only a 2-sigma band for the heavy nodes: about 7% of node-name sets miss it
 * by chance, whatever the hash (measured: md5 and xxh3 alike). The ring is therefore checked
 * over 200 name sets, exactly (ch_table_shares): the mean share within 0.3 points of the target
 * (standard error 0.09), the RMS deviation at most 1.4 points for the heavy and 0.9 for the light
 * nodes (theory 1.22 and 0.75), and at least 88% of the sets within 2.5 points on every node
 * (expected 93%, binomial spread 1.8%). */
static void test_weights(void **state)
{
    (void)state;
    const double w[4] = {4, 4, 1, 1}, want[4] = {0.4, 0.4, 0.1, 0.1};
    ch_node fixed[] = {{"cache-a", 4}, {"cache-b", 4}, {"cache-c", 1}, {"cache-d", 1}};
    ch_algo_id exact[] = {CH_ALGO_RENDEZVOUS, CH_ALGO_MAGLEV};
    for (size_t a = 0; a < 2; a++) {
        ch_table *t = tu_build(fixed, 4, exact[a], CH_HASH_DEFAULT, 160);
        double shares[4];
        ch_table_shares(t, shares);
        for (size_t i = 0; i < 4; i++)
            assert_true(fabs(shares[i] - want[i]) <= 0.025);
        ch_table_free(t);
    }

    enum { SETS = 200 };
    double mean[4] = {0}, sq[4] = {0};
    int within = 0;
    for (int s = 0; s < SETS; s++) {
        char ids[4][32];
        ch_node nodes[4];
        for (int i = 0; i < 4; i++) {
            snprintf(ids[i], sizeof(ids[i]), "set%03d-cache-%c", s, 'a' + i);
            nodes[i] = (ch_node){ids[i], w[i]};
        }
        ch_table *t = tu_build(nodes, 4, CH_ALGO_RING, CH_HASH_DEFAULT, 160);
        double shares[4];
        ch_table_shares(t, shares);
        bool ok = true;
        for (int i = 0; i < 4; i++) {
            double d = shares[i] - want[i];
            mean[i] += d / SETS;
            sq[i] += d * d / SETS;
            ok &= fabs(d) <= 0.025;
        }
        within += ok;
        ch_table_free(t);
    }
    for (int i = 0; i < 4; i++) {
        print_message("  ring weight %.0f: mean deviation %+.4f, rms %.4f\n", w[i], mean[i],
                      sqrt(sq[i]));
        assert_true(fabs(mean[i]) <= 0.003);
        assert_true(sqrt(sq[i]) <= (w[i] > 1 ? 0.014 : 0.009));
    }
    print_message("  ring: %d of %d name sets within 2.5 points on every node\n", within, SETS);
    assert_true(within >= SETS * 88 / 100);
}

/* ch_table_transfer: for two rings (and two maglev tables) N -> N+1, the matrix's rows sum to
 * the old shares and its columns to the new ones (both exact, so to rounding); on the ring
 * nothing moves except to the new node; and keys split as the matrix says (each cell p observed
 * over K = 100,000 keys with standard deviation sqrt(p (1 - p) / K) <= 0.16 points: 0.7 points
 * is over 4 sigma). Other pairs are refused. */
static void test_transfer(void **state)
{
    (void)state;
    tu_nodes a = tu_nodes_random(21, 9, "node");
    ch_node extra = {"node-new", 2.0};
    tu_nodes b = tu_nodes_with(&a, &extra, 4);
    ch_algo_id algos[] = {CH_ALGO_RING, CH_ALGO_MAGLEV};
    for (size_t x = 0; x < 2; x++) {
        ch_table *ta = tu_build(a.nodes, a.n, algos[x], CH_HASH_DEFAULT, 160);
        ch_table *tb = tu_build(b.nodes, b.n, algos[x], CH_HASH_DEFAULT, 160);
        double m[9 * 10], sa[9], sb[10], rows[9] = {0}, cols[10] = {0};
        assert_int_equal(ch_table_transfer(ta, tb, m), CH_OK);
        ch_table_shares(ta, sa);
        ch_table_shares(tb, sb);
        for (size_t i = 0; i < 9; i++)
            for (size_t j = 0; j < 10; j++) {
                rows[i] += m[i * 10 + j];
                cols[j] += m[i * 10 + j];
                bool same = strcmp(ch_table_node_id(ta, i), ch_table_node_id(tb, j)) == 0;
                if (algos[x] == CH_ALGO_RING && !same && j != 4)
                    assert_true(m[i * 10 + j] == 0.0);
            }
        for (size_t i = 0; i < 9; i++)
            assert_true(fabs(rows[i] - sa[i]) < 1e-12);
        for (size_t j = 0; j < 10; j++)
            assert_true(fabs(cols[j] - sb[j]) < 1e-12);

        double count[9 * 10] = {0};
        char key[48];
        for (size_t k = 0; k < KEYS; k++) {
            size_t len = tu_key(key, 21, k);
            count[ch_lookup(ta, key, len) * 10 + ch_lookup(tb, key, len)] += 1.0 / KEYS;
        }
        for (size_t c = 0; c < 90; c++)
            assert_true(fabs(count[c] - m[c]) <= 0.007);

        ch_table *other = tu_build(a.nodes, a.n, CH_ALGO_RING, CH_HASH_XXH3, 160);
        assert_int_equal(ch_table_transfer(ta, other, m), CH_EUNSUPPORTED);
        ch_table_free(other);
        ch_table_free(ta);
        ch_table_free(tb);
    }
    ch_table *r = tu_build(a.nodes, a.n, CH_ALGO_RENDEZVOUS, CH_HASH_DEFAULT, 160);
    double m[81];
    assert_int_equal(ch_table_transfer(r, r, m), CH_EUNSUPPORTED);
    assert_int_equal(ch_table_transfer(r, NULL, m), CH_EINVAL);
    ch_table_free(r);
    tu_nodes_free_view(&b);
    tu_nodes_free(&a);
}

/* Bounded loads: items placed one by one, half of them copies of 10 hot keys. The cap for the
 * next item, ceil(c (total + 1) w_i / W), is never exceeded, so the final loads respect
 * ceil(c total w_i / W). Without the bound the same stream overloads some node well past it,
 * so the check is not vacuous. */
static void check_bounded(ch_algo_id algo, const ch_node *nodes, size_t n)
{
    const double c = 1.25;
    ch_table *t = tu_build(nodes, n, algo, CH_HASH_DEFAULT, 160);
    uint64_t *loads = calloc(n, sizeof(*loads)), *plain = calloc(n, sizeof(*plain)), total = 0;
    assert_non_null(loads);
    assert_non_null(plain);
    double wsum = 0;
    for (size_t i = 0; i < n; i++)
        wsum += nodes[i].weight;
    uint64_t st = 77;
    char key[48];
    for (size_t k = 0; k < KEYS; k++) {
        size_t id = tu_rand(&st) & 1 ? tu_below(&st, 10) : 10 + tu_below(&st, 1000000);
        size_t len = tu_key(key, 11, id), node;
        assert_int_equal(ch_lookup_bounded(t, key, len, loads, total, c, &node), CH_OK);
        double cap = ceil(c * (double)(total + 1) * nodes[node].weight / wsum);
        assert_true((double)(loads[node] + 1) <= cap);
        loads[node]++;
        total++;
        plain[ch_lookup(t, key, len)]++;
    }
    bool plain_over = false;
    for (size_t i = 0; i < n; i++) {
        double cap = ceil(c * (double)total * nodes[i].weight / wsum);
        assert_true((double)loads[i] <= cap);
        plain_over |= (double)plain[i] > cap;
    }
    assert_true(plain_over);
    free(loads);
    free(plain);
    ch_table_free(t);
}

static void test_bounded_loads(void **state)
{
    (void)state;
    tu_nodes eq = tu_nodes_random(12, 10, "node");
    ch_node weighted[] = {{"w-a", 3}, {"w-b", 1}, {"w-c", 1}, {"w-d", 2}, {"w-e", 1}};
    ch_algo_id algos[] = {CH_ALGO_RING, CH_ALGO_RENDEZVOUS, CH_ALGO_MAGLEV, CH_ALGO_MODULO};
    for (size_t a = 0; a < 4; a++) {
        check_bounded(algos[a], eq.nodes, eq.n);
        if (algos[a] != CH_ALGO_MODULO)
            check_bounded(algos[a], weighted, 5);
    }
    tu_nodes_free(&eq);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_add_remove),
        cmocka_unit_test(test_rendezvous_add_remove),
        cmocka_unit_test(test_jump_add_remove),
        cmocka_unit_test(test_maglev_add_remove),
        cmocka_unit_test(test_client_schemes_add_remove),
        cmocka_unit_test(test_modulo_moves_almost_everything),
        cmocka_unit_test(test_replicas),
        cmocka_unit_test(test_ring_replicas_stable_on_add),
        cmocka_unit_test(test_shares_match_keys),
        cmocka_unit_test(test_weights),
        cmocka_unit_test(test_transfer),
        cmocka_unit_test(test_bounded_loads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hashcheck.c — `chash hashcheck`: is a hash fit for placement?
 *
 * Three tests per hash, each a p-value under the hypothesis "this hash behaves like a uniformly
 * random function" (then every p-value is uniform on [0, 1]). A hash fails when a p-value is
 * below ALPHA = 0.001, so a good hash fails a test by chance one time in a thousand:
 *
 *   spread   A node's ring points, hash32("<id>#<j>") for j < k, should be k independent uniform
 *            positions. Kuiper's V (the Kolmogorov-Smirnov statistic made for a circle: no
 *            starting point matters) per node, with Stephens' approximation of its p-value; the
 *            smallest of the N p-values, times N (Bonferroni), is the test's p-value. Shown with it:
 *            the largest empty arc between a node's points against its expectation H(k)/k for k
 *            uniform points (H the harmonic number). A clustered hash packs a node's points into a
 *            narrow band, leaving a huge gap.
 *   balance  The ring's exact shares S_i (ch_table_shares). With random points, S ~ Dirichlet(k_1,
 *            ..., k_N), so (P + 1) sum (S_i - p_i)^2 / p_i, p_i = k_i / P, is close to chi-square
 *            with N - 1 degrees of freedom (good from about 20 points per node).
 *   keys     Generated keys key:<seed>:<i> should fall evenly on B equal arcs of the circle
 *            (B = 1024, fewer when there are under 5 keys per arc): Pearson's chi-square, B - 1
 *            degrees of freedom.
 *   pool     With --config (or --algo): the keys placed by the pool's own distribution with this
 *            hash (e.g. twemproxy's ketama, whose points are MD5 whatever the key hash). The
 *            servers' key counts against the table's exact shares (chi-square, N' - 1 degrees of
 *            freedom over the N' servers that own any of the circle): a failure means the key
 *            hash, not the table, unbalances the pool. Shown with it: the busiest server's keys
 *            against its fair share w_i / W, which is what the operator sees, and the same for
 *            the table's exact shares, which is what a perfect key hash would give.
 * Chi-square tails use the Wilson-Hilferty normal approximation.
 */
#define _POSIX_C_SOURCE 200809L
#include "commands.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define ALPHA 0.001
#define MIN_SPREAD_POINTS 5 /* Kuiper's approximation needs a few points; fewer are not tested */

/* Stephens (1970): P(V > v) for k points, from the asymptotic Kuiper distribution. */
static double kuiper_p(double v, size_t k)
{
    double sk = sqrt((double)k), lam = (sk + 0.155 + 0.24 / sk) * v;
    if (lam < 0.4)
        return 1.0; /* the series converges badly here, and the answer is 1 to 10 digits */
    double q = 0;
    for (int j = 1; j <= 100; j++) {
        double t = 2 * j * j * lam * lam;
        q += 2 * (4 * j * j * lam * lam - 1) * exp(-t);
        if (t > 700)
            break;
    }
    return fmin(1.0, fmax(0.0, q));
}

/* Upper tail of chi-square with d degrees of freedom at x (Wilson-Hilferty). */
static double chi2_sf(double x, double d)
{
    if (d <= 0)
        return 1.0;
    double s = 2.0 / (9.0 * d), z = (cbrt(x / d) - (1 - s)) / sqrt(s);
    return 0.5 * erfc(z / sqrt(2.0));
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

typedef struct check {
    ch_hash_id hash;
    double spread_p, node_p, gap, expected_gap;
    const char *worst; /* the node with the smallest spread p-value */
    size_t tested;     /* nodes with enough points for the spread test */
    double balance_p, min, max, stddev, theory;
    double keys_p, chi2;
    size_t buckets;
    double pool_p, pool_max; /* NaN when there is no pool distribution */
    double pool_table;       /* the busiest server's exact share / its fair share */
    bool pass;
    char failed[64];
} check;

/* The spread test over every node's points. */
static void spread(const cli *c, const fleet *f, uint32_t vnodes, check *r)
{
    size_t maxk = 0, maxid = 0;
    for (size_t i = 0; i < f->n; i++) {
        size_t k = (size_t)fmax(1.0, round((double)vnodes * f->nodes[i].weight));
        maxk = k > maxk ? k : maxk;
        maxid = strlen(f->nodes[i].id) > maxid ? strlen(f->nodes[i].id) : maxid;
    }
    uint32_t *pos = xmalloc(c, maxk * sizeof(*pos));
    char *name = xmalloc(c, maxid + 16);
    r->node_p = 1.0;
    r->gap = r->expected_gap = NAN;
    double worst_ratio = 0;
    for (size_t i = 0; i < f->n; i++) {
        size_t k = (size_t)fmax(1.0, round((double)vnodes * f->nodes[i].weight));
        if (k < MIN_SPREAD_POINTS)
            continue;
        for (size_t j = 0; j < k; j++) {
            int len = snprintf(name, maxid + 16, "%s#%zu", f->nodes[i].id, j);
            ch_hash32(r->hash, name, (size_t)len, &pos[j]);
        }
        qsort(pos, k, sizeof(*pos), cmp_u32);
        double dplus = 0, dminus = 0, gap = 0, h = 0;
        for (size_t j = 0; j < k; j++) {
            double x = (double)pos[j] * 0x1p-32;
            dplus = fmax(dplus, (double)(j + 1) / (double)k - x);
            dminus = fmax(dminus, x - (double)j / (double)k);
            double next = j + 1 < k ? (double)pos[j + 1] * 0x1p-32 : 1.0 + (double)pos[0] * 0x1p-32;
            gap = fmax(gap, next - x);
            h += 1.0 / (double)(j + 1);
        }
        double p = kuiper_p(dplus + dminus, k), expected = h / (double)k;
        r->tested++;
        if (p <= r->node_p) {
            r->node_p = p;
            r->worst = f->nodes[i].id;
        }
        if (gap / expected > worst_ratio) {
            worst_ratio = gap / expected;
            r->gap = gap;
            r->expected_gap = expected;
        }
    }
    r->spread_p = r->tested ? fmin(1.0, r->node_p * (double)r->tested) : NAN;
    free(pos);
    free(name);
}

static void balance(const cli *c, const fleet *f, uint32_t vnodes, check *r)
{
    ch_options opt = cli_options(c, f, CH_ALGO_RING, r->hash, vnodes);
    ch_table *t = cli_build(c, f, &opt, false);
    double *s = xmalloc(c, f->n * sizeof(*s)), *load = xmalloc(c, f->n * sizeof(*load));
    ch_table_shares(t, s);
    double P = 0, W = 0, T = 0;
    for (size_t i = 0; i < f->n; i++) {
        P += fmax(1.0, round((double)vnodes * f->nodes[i].weight));
        W += f->nodes[i].weight;
    }
    for (size_t i = 0; i < f->n; i++) {
        double p = fmax(1.0, round((double)vnodes * f->nodes[i].weight)) / P;
        T += (s[i] - p) * (s[i] - p) / p;
        load[i] = s[i] / (f->nodes[i].weight / W);
    }
    r->balance_p = f->n > 1 ? chi2_sf((P + 1) * T, (double)f->n - 1) : NAN;
    load_stats(load, f->n, &r->min, &r->max, &r->stddev);
    r->theory = ring_theory_stddev(f, vnodes);
    free(s);
    free(load);
    ch_table_free(t);
}

/* The keys test. Counts keys on 1024 equal arcs, then halves the arcs (merging neighbours)
 * while they average under 5 keys, so a short key file is tested too. */
static void keys(const cli *c, size_t n, check *r)
{
    size_t b = 1024;
    uint64_t *count = xcalloc(c, b, sizeof(*count)), total = 0;
    keysrc ks;
    keys_open(c, &ks, n);
    const char *key;
    size_t len;
    while (keys_next(c, &ks, &key, &len)) {
        uint32_t h;
        ch_hash32(r->hash, key, len, &h);
        count[h >> 22]++;
        total++;
    }
    keys_close(&ks);
    while (b > 2 && (double)total / (double)b < 5) {
        b /= 2;
        for (size_t i = 0; i < b; i++)
            count[i] = count[2 * i] + count[2 * i + 1];
    }
    double e = (double)total / (double)b, chi2 = 0;
    for (size_t i = 0; i < b && total > 0; i++)
        chi2 += ((double)count[i] - e) * ((double)count[i] - e) / e;
    free(count);
    r->chi2 = chi2;
    r->buckets = b;
    r->keys_p = total > 0 ? chi2_sf(chi2, (double)b - 1) : NAN;
}

/* The pool test: keys through the pool's own table. */
static void pool(const cli *c, const fleet *f, ch_algo_id algo, uint32_t vnodes, size_t n,
                 check *r)
{
    ch_options opt = cli_options(c, f, algo, r->hash, vnodes);
    ch_table *t = cli_build(c, f, &opt, false);
    double *share = xmalloc(c, f->n * sizeof(*share));
    uint64_t *count = xcalloc(c, f->n, sizeof(*count));
    ch_table_shares(t, share);
    keysrc ks;
    keys_open(c, &ks, n);
    const char *key;
    size_t len, total = 0;
    while (keys_next(c, &ks, &key, &len)) {
        count[ch_lookup(t, key, len)]++;
        total++;
    }
    keys_close(&ks);
    double W = 0, chi2 = 0, df = -1;
    for (size_t i = 0; i < f->n; i++)
        W += f->nodes[i].weight;
    r->pool_max = r->pool_table = 0;
    for (size_t i = 0; i < f->n; i++) {
        double fair = (double)total * f->nodes[i].weight / W, e = (double)total * share[i];
        r->pool_max = fmax(r->pool_max, (double)count[i] / fair);
        r->pool_table = fmax(r->pool_table, share[i] / (f->nodes[i].weight / W));
        if (e > 0) {
            chi2 += ((double)count[i] - e) * ((double)count[i] - e) / e;
            df++;
        }
    }
    r->pool_p = df > 0 ? chi2_sf(chi2, df) : NAN;
    free(share);
    free(count);
    ch_table_free(t);
}

static void verdict(check *r)
{
    const char *names[4] = {"spread", "balance", "keys", "pool"};
    double p[4] = {r->spread_p, r->balance_p, r->keys_p, r->pool_p};
    r->pass = true;
    r->failed[0] = '\0';
    for (int i = 0; i < 4; i++) {
        if (p[i] < ALPHA) { /* NaN (not tested) compares false: not a failure */
            size_t used = strlen(r->failed);
            snprintf(r->failed + used, sizeof(r->failed) - used, "%s%s", r->pass ? "" : ", ",
                     names[i]);
            r->pass = false;
        }
    }
}

static void print_p(double p)
{
    if (isnan(p))
        printf(" %9s", "-");
    else if (p < 1e-12)
        printf(" %9s", "<1e-12");
    else if (p < 0.001)
        printf(" %9.1e", p);
    else
        printf(" %9.3f", p);
}

int cmd_hashcheck(cli *c)
{
    if (c->argc)
        cli_usage(c, "unexpected argument '%s'", c->argv[0]);
    fleet f;
    fleet_from_cli(c, &f);
    ch_hash_id hashes[CH_HASH_COUNT_];
    size_t nh = cli_hashes(c, c->hash, "all", hashes);
    uint32_t vnodes = 0;
    cli_vnodes(c, c->vnodes ? c->vnodes : "160", &vnodes, 1);
    size_t nkeys = c->keys ? c->keys : 200000;
    struct stat st;
    if (c->key_file && (stat(c->key_file, &st) != 0 || !S_ISREG(st.st_mode)))
        cli_usage(c, "--key-file %s: hashcheck reads the keys once per hash and test, so it "
                     "takes a regular file (not stdin or a pipe)",
                  c->key_file);

    const char *pool_spec = fleet_algo_spec(c, &f, NULL);
    ch_algo_id pool_algo = pool_spec ? cli_algo1(c, pool_spec, NULL) : CH_ALGO_RING;

    check res[CH_HASH_COUNT_];
    progress pg;
    progress_start(&pg, "hashcheck", nh);
    for (size_t i = 0; i < nh; i++) {
        res[i] = (check){.hash = hashes[i]};
        spread(c, &f, vnodes, &res[i]);
        balance(c, &f, vnodes, &res[i]);
        keys(c, nkeys, &res[i]);
        res[i].pool_p = res[i].pool_max = res[i].pool_table = NAN;
        if (pool_spec)
            pool(c, &f, pool_algo, vnodes, nkeys, &res[i]);
        verdict(&res[i]);
        progress_update(&pg, i + 1);
    }
    progress_end(&pg);

    if (c->json) {
        json j;
        json_init(&j, stdout);
        json_obj(&j);
        json_key(&j, "nodes");
        json_int(&j, f.n);
        json_key(&j, "vnodes");
        json_int(&j, vnodes);
        json_key(&j, "keys");
        json_int(&j, nkeys);
        json_key(&j, "alpha");
        json_num(&j, ALPHA);
        json_key(&j, "results");
        json_arr(&j);
        for (size_t i = 0; i < nh; i++) {
            const check *r = &res[i];
            json_obj(&j);
            json_key(&j, "hash");
            json_str(&j, ch_hash_name(r->hash));
            json_key(&j, "verdict");
            json_str(&j, r->pass ? "pass" : "fail");
            json_key(&j, "failed");
            json_arr(&j);
            char failed[64];
            snprintf(failed, sizeof(failed), "%s", r->failed);
            for (char *save, *t = strtok_r(failed, ", ", &save); t; t = strtok_r(NULL, ", ", &save))
                json_str(&j, t);
            json_end(&j);
            json_key(&j, "spread");
            json_obj(&j);
            json_key(&j, "p");
            json_num(&j, r->spread_p);
            json_key(&j, "nodes_tested");
            json_int(&j, r->tested);
            json_key(&j, "worst_node");
            json_str(&j, r->worst);
            json_key(&j, "worst_node_p");
            json_num(&j, r->tested ? r->node_p : NAN);
            json_key(&j, "max_gap");
            json_num(&j, r->gap);
            json_key(&j, "expected_gap");
            json_num(&j, r->expected_gap);
            json_end(&j);
            json_key(&j, "balance");
            json_obj(&j);
            json_key(&j, "p");
            json_num(&j, r->balance_p);
            json_key(&j, "min_load");
            json_num(&j, r->min);
            json_key(&j, "max_load");
            json_num(&j, r->max);
            json_key(&j, "stddev_load");
            json_num(&j, r->stddev);
            json_key(&j, "theory_stddev");
            json_num(&j, r->theory);
            json_end(&j);
            json_key(&j, "keys");
            json_obj(&j);
            json_key(&j, "p");
            json_num(&j, r->keys_p);
            json_key(&j, "chi2");
            json_num(&j, r->chi2);
            json_key(&j, "buckets");
            json_int(&j, r->buckets);
            json_end(&j);
            if (pool_spec) {
                json_key(&j, "pool");
                json_obj(&j);
                json_key(&j, "distribution");
                json_str(&j, ch_algo_name(pool_algo));
                json_key(&j, "p");
                json_num(&j, r->pool_p);
                json_key(&j, "max_load");
                json_num(&j, r->pool_max);
                json_key(&j, "table_max_load");
                json_num(&j, r->pool_table);
                json_end(&j);
            }
            json_end(&j);
        }
        json_end(&j);
        json_end(&j);
        json_done(&j);
    } else {
        char keys_desc[300];
        if (c->key_file)
            snprintf(keys_desc, sizeof(keys_desc), "the keys of %s", c->key_file);
        else
            snprintf(keys_desc, sizeof(keys_desc), "%zu keys", nkeys);
        printf("hash check: %zu nodes x %u vnodes, %s; a test fails below p = %g\n\n", f.n,
               vnodes, keys_desc, ALPHA);
        if (pool_spec)
            printf("pool: %s, distribution %s\n\n", f.source, ch_algo_name(pool_algo));
        printf("%-13s %9s %14s %9s %16s %9s", "", "spread p", "largest gap", "balance p",
               "stddev (theory)", "keys p");
        if (pool_spec)
            printf(" %9s %8s %7s", "pool p", "max load", "(table)");
        printf("   %s\n", "verdict");
        for (size_t i = 0; i < nh; i++) {
            const check *r = &res[i];
            printf("%-13s", ch_hash_name(r->hash));
            print_p(r->spread_p);
            if (isnan(r->gap))
                printf(" %14s", "-");
            else
                printf(" %8.3f %4.1fx", r->gap, r->gap / r->expected_gap);
            print_p(r->balance_p);
            printf("   %6.3f (%.3f)", r->stddev, r->theory);
            print_p(r->keys_p);
            if (pool_spec) {
                print_p(r->pool_p);
                printf(" %7.2fx %6.2fx", r->pool_max, r->pool_table);
            }
            if (r->pass)
                printf("   pass\n");
            else
                printf("   FAIL: %s\n", r->failed);
        }
        printf("\nspread: each node's points over the whole circle (Kuiper, worst node x nodes);\n"
               "largest gap: the widest empty arc of a node (x what uniform points leave);\n"
               "balance: the ring's exact shares against random points (chi-square);\n");
        if (c->key_file)
            printf("keys: the keys of %s over %zu equal arcs (chi-square).\n", c->key_file,
                   res[0].buckets);
        else
            printf("keys: key:%llu:<i> over %zu equal arcs (chi-square).\n",
                   (unsigned long long)c->seed, res[0].buckets);
        if (pool_spec)
            printf("pool p: the keys on the pool's servers against the table's exact shares "
                   "(chi-square);\nmax load: the busiest server's keys / its fair share by "
                   "weight (table: the\nbusiest server's exact share of the circle / its fair "
                   "share, the hash aside).\n");
    }
    fleet_free(&f);
    return 0; /* a failing verdict is a finding, not an error */
}

/*
 * bench_place — what a lookup costs next to hashing the key alone, for every placement
 * algorithm x hash x N in one run; build time and bytes per point of every table; and
 * libmemcached's weighted ketama (memcached_generate_hash) as the peer. Ends with the
 * performance targets, each MET or MISSED. docs/PERFORMANCE.md records a run.
 *
 * Method. One array of NKEYS keys "user:<digits>" (8..24 bytes, fixed-seed PRNG) is shared by
 * every measurement. A measurement covers the first nk keys in chunks of CHUNK_KEYS; each chunk
 * gets REPS rounds of {hash-only pass, lookup pass}, both with the same loop shape (one
 * out-of-line library call per key, results summed into a local that ends in a volatile sink).
 * The best (minimum) time of each pass kind per chunk is kept and the chunks are summed. Short
 * passes (a few ms), alternated and spread over the measurement, keep a preempted pass from
 * counting and let drift hit both kinds alike. nk is NKEYS unless the lookups would take more than MEASURE_BUDGET_NS (md5,
 * rendezvous at large N): then nk is cut to fit, in whole chunks; figures are per key.
 *
 * Why chunks of 64 Ki keys, not fewer: a pass replays its chunk REPS times, and a short replayed
 * sequence trains the branch predictor (the hash loops exit at the key length, the ring search
 * on the key's position). On the reference machine a 512-key chunk replayed makes fnv1a32_fmix
 * look 1.7x faster (9.6 vs 16.3 ns); from 64 Ki keys on the effect is gone. The best rounds run
 * with the chunk's keys (about 2 MB) in cache, as a key a router just received would be.
 */
#define _POSIX_C_SOURCE 200809L

#include <chash.h>
#include <libmemcached/memcached.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef BENCH_BUILD_TYPE
#define BENCH_BUILD_TYPE "?"
#endif
#ifndef BENCH_CFLAGS
#define BENCH_CFLAGS "?"
#endif

#define NKEYS (1u << 20)      /* keys in the shared array */
#define PROBE_KEYS 4096u      /* keys of the pass that sizes a measurement */
#define MEASURE_BUDGET_NS 50e6 /* aim for at most this per pass over all nk keys */
#define CHUNK_KEYS 65536u     /* keys per chunk, and the fewest a measurement uses */
_Static_assert(NKEYS % CHUNK_KEYS == 0, "NKEYS must be whole chunks");
#define REPS 7                /* rounds per chunk; the best is kept */
#define BUILD_REPS 5          /* builds per table; the best is kept */
#define VNODES 160u
#define MAX_NODES 1000u
#define MEMCACHED_PORT 11211
/* libmemcached's continuum holds MEMCACHED_CONTINUUM_SIZE points of MEMCACHED_POINTS_PER_SERVER
 * each; adding server 101 fails an assertion in update_continuum() and aborts the process. */
#define PEER_MAX_SERVERS (MEMCACHED_CONTINUUM_SIZE / MEMCACHED_POINTS_PER_SERVER)

static const size_t node_counts[] = {8, 100, 1000};
#define NCOUNTS (sizeof(node_counts) / sizeof(node_counts[0]))

/* Targets (see the summary). */
#define T_RING_SMALL 1.5      /* ring 8x160: lookup / hash-only */
#define T_RING_LARGE 3.0      /* ring 1000x160: lookup / hash-only */
#define T_O1 1.3              /* jump, maglev: lookup / hash-only, every N */
#define T_PEER 10.0           /* default-hash ring lookups/s / libmemcached ketama lookups/s */
#define T_BUILD_MS 10.0       /* ring 1000x160 build */

static volatile uint64_t sink; /* every pass ends here, so no pass can be optimized away */

typedef struct key {
    const char *p;
    size_t len;
} key;

static key *keys;
static char *key_block;

static char node_ids[MAX_NODES][16];
static ch_node nodes[MAX_NODES];

/* One measured table. */
typedef struct row {
    size_t n;
    ch_algo_id algo;
    ch_hash_id hash;
    double build_ns;
    size_t points, bytes;
    size_t nk;        /* keys measured */
    double hash_ns;   /* per key, hash only */
    double lookup_ns; /* per key, ch_lookup */
} row;

static row rows[NCOUNTS * CH_ALGO_COUNT_ * CH_HASH_COUNT_];
static size_t nrows;

typedef struct peer {
    size_t n, nk;     /* nk == 0: not measured (n > PEER_MAX_SERVERS) */
    double lookup_ns; /* per key, memcached_generate_hash */
} peer;

static peer peers[NCOUNTS];

/* ---- helpers ----------------------------------------------------------------------------- */

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "bench_place: %s: %s\n", what, rc <= 0 ? ch_strerror(rc) : "failed");
    exit(1);
}

/* NKEYS keys "user:" + 3..19 zero-padded digits, so 8..24 bytes, contiguous in one block. */
static void make_keys(void)
{
    keys = malloc(NKEYS * sizeof(*keys));
    key_block = malloc((size_t)NKEYS * 25);
    if (keys == NULL || key_block == NULL)
        die("out of memory", 1);
    uint64_t seed = 42;
    char *p = key_block;
    for (size_t i = 0; i < NKEYS; i++) {
        int digits = 3 + (int)(splitmix64(&seed) % 17);
        uint64_t mod = 1;
        for (int d = 0; d < digits; d++)
            mod *= 10;
        int len = sprintf(p, "user:%0*" PRIu64, digits, splitmix64(&seed) % mod);
        keys[i] = (key){p, (size_t)len};
        p += len;
    }
}

static void make_nodes(void)
{
    for (size_t i = 0; i < MAX_NODES; i++) {
        snprintf(node_ids[i], sizeof(node_ids[i]), "node-%zu", i + 1);
        nodes[i] = (ch_node){.id = node_ids[i], .weight = 1.0};
    }
}

/* Keys for a measurement whose slower pass costs probe_ns per key: whole chunks, at least one. */
static size_t keys_for(double probe_ns)
{
    double chunks = MEASURE_BUDGET_NS / (probe_ns > 0.0 ? probe_ns : 1.0) / CHUNK_KEYS;
    size_t nk = chunks < 1.0 ? CHUNK_KEYS : (size_t)chunks * CHUNK_KEYS;
    return nk < NKEYS ? nk : NKEYS;
}

/* ---- timed passes: one loop shape, one library call per key ------------------------------ */

static double pass_hash(ch_hash_id h, const key *k, size_t nk)
{
    uint64_t acc = 0;
    double t0 = now_ns();
    for (size_t i = 0; i < nk; i++) {
        uint64_t v;
        ch_hash64(h, k[i].p, k[i].len, &v);
        acc += v;
    }
    double t = now_ns() - t0;
    sink += acc;
    return t;
}

static double pass_lookup(const ch_table *t, const key *k, size_t nk)
{
    uint64_t acc = 0;
    double t0 = now_ns();
    for (size_t i = 0; i < nk; i++)
        acc += ch_lookup(t, k[i].p, k[i].len);
    double el = now_ns() - t0;
    sink += acc;
    return el;
}

static double pass_memcached(const memcached_st *m, const key *k, size_t nk)
{
    uint64_t acc = 0;
    double t0 = now_ns();
    for (size_t i = 0; i < nk; i++)
        acc += memcached_generate_hash(m, k[i].p, k[i].len);
    double el = now_ns() - t0;
    sink += acc;
    return el;
}

/* ---- measurements ------------------------------------------------------------------------ */

/* Builds the table BUILD_REPS times; keeps the last, and the best build time in r. */
static ch_table *build_table(row *r)
{
    ch_options opt;
    ch_options_init(&opt);
    opt.algo = r->algo;
    opt.hash = r->hash;
    opt.vnodes = VNODES;
    ch_table *t = NULL;
    r->build_ns = 1e300;
    for (int rep = 0; rep < BUILD_REPS; rep++) {
        ch_table_free(t);
        double t0 = now_ns();
        int rc = ch_table_build(nodes, r->n, &opt, &t);
        double el = now_ns() - t0;
        if (rc != CH_OK)
            die("ch_table_build", rc);
        r->build_ns = el < r->build_ns ? el : r->build_ns;
    }
    ch_table_info info = {.size = sizeof(info)};
    int rc = ch_table_info_get(t, &info);
    if (rc != CH_OK)
        die("ch_table_info_get", rc);
    r->points = info.points;
    r->bytes = info.bytes;
    return t;
}

/* Lookup and hash-only cost per key over the first r->nk keys. Rounds go over all chunks, so
 * a chunk's rounds are spread over the whole measurement and a burst of other work on the
 * machine spoils at most one of them. Within a round the two passes over a chunk alternate in
 * order, so each kind gets rounds with the chunk's keys already in cache. Best per chunk and
 * kind, summed over the chunks. */
static void measure_lookups(const ch_table *t, row *r)
{
    double probe = 1e300;
    for (int i = 0; i < 3; i++) {
        double l = pass_lookup(t, keys, PROBE_KEYS);
        probe = l < probe ? l : probe;
    }
    r->nk = keys_for(probe / PROBE_KEYS);
    size_t nchunks = r->nk / CHUNK_KEYS;
    double best_h[NKEYS / CHUNK_KEYS], best_l[NKEYS / CHUNK_KEYS];
    for (size_t c = 0; c < nchunks; c++)
        best_h[c] = best_l[c] = 1e300;
    for (int rep = 0; rep < REPS; rep++) {
        for (size_t c = 0; c < nchunks; c++) {
            const key *k = keys + c * CHUNK_KEYS;
            double h, l;
            if (rep % 2 == 0) {
                h = pass_hash(r->hash, k, CHUNK_KEYS);
                l = pass_lookup(t, k, CHUNK_KEYS);
            } else {
                l = pass_lookup(t, k, CHUNK_KEYS);
                h = pass_hash(r->hash, k, CHUNK_KEYS);
            }
            best_h[c] = h < best_h[c] ? h : best_h[c];
            best_l[c] = l < best_l[c] ? l : best_l[c];
        }
    }
    double sum_h = 0.0, sum_l = 0.0;
    for (size_t c = 0; c < nchunks; c++) {
        sum_h += best_h[c];
        sum_l += best_l[c];
    }
    r->hash_ns = sum_h / (double)r->nk;
    r->lookup_ns = sum_l / (double)r->nk;
}

/* Weighted ketama over n servers 127.0.0.1:11211+i, weight 1. No connection is made:
 * memcached_generate_hash only hashes the key and searches the continuum. The owners are checked
 * (every index < n, every server owns some of 100 * n keys) so a broken setup cannot pass. */
static memcached_st *ketama_create(size_t n)
{
    memcached_st *m = memcached_create(NULL);
    if (m == NULL ||
        memcached_behavior_set(m, MEMCACHED_BEHAVIOR_DISTRIBUTION,
                               MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA) != MEMCACHED_SUCCESS ||
        memcached_behavior_set(m, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1) != MEMCACHED_SUCCESS)
        die("libmemcached setup", 1);
    for (size_t i = 0; i < n; i++)
        if (memcached_server_add_with_weight(m, "127.0.0.1", (in_port_t)(MEMCACHED_PORT + i), 1) !=
            MEMCACHED_SUCCESS)
            die("memcached_server_add_with_weight", 1);
    if (memcached_server_count(m) != n)
        die("memcached_server_count", 1);

    size_t owned[MAX_NODES] = {0}, distinct = 0;
    for (size_t i = 0; i < 100 * n; i++) {
        uint32_t s = memcached_generate_hash(m, keys[i].p, keys[i].len);
        if (s >= n)
            die("memcached_generate_hash returned an index out of range", 1);
        distinct += owned[s]++ == 0;
    }
    if (distinct != n)
        die("memcached_generate_hash leaves servers without keys", 1);
    return m;
}

/* As measure_lookups(), without a partner pass: each chunk is passed twice per round and the
 * second, with the keys in cache, can count. */
static void measure_peer(peer *p)
{
    memcached_st *m = ketama_create(p->n);
    double probe = 1e300;
    for (int i = 0; i < 3; i++) {
        double l = pass_memcached(m, keys, PROBE_KEYS);
        probe = l < probe ? l : probe;
    }
    p->nk = keys_for(probe / PROBE_KEYS);
    size_t nchunks = p->nk / CHUNK_KEYS;
    double best[NKEYS / CHUNK_KEYS];
    for (size_t c = 0; c < nchunks; c++)
        best[c] = 1e300;
    for (int rep = 0; rep < REPS; rep++) {
        for (size_t c = 0; c < nchunks; c++) {
            for (int twice = 0; twice < 2; twice++) {
                double l = pass_memcached(m, keys + c * CHUNK_KEYS, CHUNK_KEYS);
                best[c] = l < best[c] ? l : best[c];
            }
        }
    }
    double sum = 0.0;
    for (size_t c = 0; c < nchunks; c++)
        sum += best[c];
    p->lookup_ns = sum / (double)p->nk;
    memcached_free(m);
}

/* ---- report ------------------------------------------------------------------------------ */

static const row *find_row(size_t n, ch_algo_id a, ch_hash_id h)
{
    for (size_t i = 0; i < nrows; i++)
        if (rows[i].n == n && rows[i].algo == a && rows[i].hash == h)
            return &rows[i];
    die("missing measurement", 1);
    return NULL;
}

static double ratio(const row *r)
{
    return r->lookup_ns / r->hash_ns;
}

/* The 1-minute load average from /proc/loadavg, or -1: other work on the machine skews figures. */
static double load_average(void)
{
    double load = -1.0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f != NULL) {
        if (fscanf(f, "%lf", &load) != 1)
            load = -1.0;
        fclose(f);
    }
    return load;
}

static void print_header(void)
{
    printf("bench_place: libchash %d.%d.%d, libmemcached %s\n", CH_VERSION_MAJOR,
           CH_VERSION_MINOR, CH_VERSION_PATCH, memcached_lib_version());
    printf("build: %s, C flags \"%s\", compiler %s\n", BENCH_BUILD_TYPE, BENCH_CFLAGS,
           __VERSION__);
    if (strcmp(BENCH_BUILD_TYPE, "Release") != 0)
        printf("WARNING: not a Release build; figures are not representative\n");
    printf("keys: %u \"user:<digits>\", 8..24 bytes; best of %d rounds per chunk; %u points per "
           "node; load average %.2f\n\n",
           NKEYS, REPS, VNODES, load_average());
    printf("%5s %-10s %-12s %8s %9s %9s %10s %7s %9s %8s %7s\n", "nodes", "algo", "hash", "keys",
           "hash ns", "lookup ns", "Mlookup/s", "ratio", "build ms", "points", "B/point");
}

static void print_row(const row *r)
{
    printf("%5zu %-10s %-12s %8zu %9.1f %9.1f %10.2f %6.2fx %9.3f %8zu %7.1f\n", r->n,
           ch_algo_name(r->algo), ch_hash_name(r->hash), r->nk, r->hash_ns, r->lookup_ns,
           1e3 / r->lookup_ns, ratio(r), r->build_ns / 1e6, r->points,
           (double)r->bytes / (double)r->points);
}

static void print_peers(void)
{
    printf("\nlibmemcached weighted ketama (MD5, memcached_generate_hash) vs chash ring, same keys\n");
    printf("%5s %8s %9s %10s | %-24s %-24s\n", "nodes", "keys", "ns", "Mlookup/s",
           "ring fnv1a32_fmix (dflt)", "ring md5 (like for like)");
    for (size_t i = 0; i < NCOUNTS; i++) {
        const peer *p = &peers[i];
        if (p->nk == 0) {
            printf("%5zu   n/a: libmemcached aborts above %d servers (MEMCACHED_CONTINUUM_SIZE "
                   "assertion in update_continuum)\n",
                   p->n, PEER_MAX_SERVERS);
            continue;
        }
        const row *d = find_row(p->n, CH_ALGO_RING, CH_HASH_DEFAULT);
        const row *m = find_row(p->n, CH_ALGO_RING, CH_HASH_MD5);
        printf("%5zu %8zu %9.1f %10.2f | %8.2f M/s = %6.2fx   %8.2f M/s = %6.2fx\n", p->n, p->nk,
               p->lookup_ns, 1e3 / p->lookup_ns, 1e3 / d->lookup_ns, p->lookup_ns / d->lookup_ns,
               1e3 / m->lookup_ns, p->lookup_ns / m->lookup_ns);
    }
}

static int missed;

static void target(const char *what, const char *measured, bool met, const char *goal)
{
    printf("  %-50s %-20s %-9s %s\n", what, measured, goal, met ? "MET" : "MISSED");
    missed += !met;
}

/* The worst lookup / hash-only ratio of an algorithm over every N, default hash. */
static void target_o1(ch_algo_id a)
{
    const row *worst = NULL;
    for (size_t i = 0; i < NCOUNTS; i++) {
        const row *r = find_row(node_counts[i], a, CH_HASH_DEFAULT);
        if (worst == NULL || ratio(r) > ratio(worst))
            worst = r;
    }
    char what[64], got[64], goal[16];
    snprintf(what, sizeof(what), "%s lookup / hash-only, worst over N", ch_algo_name(a));
    snprintf(got, sizeof(got), "%.2fx (N=%zu)", ratio(worst), worst->n);
    snprintf(goal, sizeof(goal), "<= %.1fx", T_O1);
    target(what, got, ratio(worst) <= T_O1, goal);
}

static void print_targets(void)
{
    char got[64], goal[16];
    printf("\ntargets (default hash %s):\n", ch_hash_name(CH_HASH_DEFAULT));

    const row *r = find_row(8, CH_ALGO_RING, CH_HASH_DEFAULT);
    snprintf(got, sizeof(got), "%.2fx", ratio(r));
    snprintf(goal, sizeof(goal), "<= %.1fx", T_RING_SMALL);
    target("ring 8x160 lookup / hash-only", got, ratio(r) <= T_RING_SMALL, goal);

    r = find_row(1000, CH_ALGO_RING, CH_HASH_DEFAULT);
    snprintf(got, sizeof(got), "%.2fx", ratio(r));
    snprintf(goal, sizeof(goal), "<= %.1fx", T_RING_LARGE);
    target("ring 1000x160 lookup / hash-only", got, ratio(r) <= T_RING_LARGE, goal);

    target_o1(CH_ALGO_JUMP);
    target_o1(CH_ALGO_MAGLEV);

    const peer *worst = NULL;
    double worst_x = 0.0;
    for (size_t i = 0; i < NCOUNTS; i++) {
        if (peers[i].nk == 0)
            continue;
        double x = peers[i].lookup_ns / find_row(peers[i].n, CH_ALGO_RING, CH_HASH_DEFAULT)->lookup_ns;
        if (worst == NULL || x < worst_x) {
            worst = &peers[i];
            worst_x = x;
        }
    }
    snprintf(got, sizeof(got), "%.2fx (N=%zu)", worst_x, worst->n);
    snprintf(goal, sizeof(goal), ">= %.0fx", T_PEER);
    target("ring / libmemcached ketama lookups/s, worst N<=100", got, worst_x >= T_PEER, goal);

    r = find_row(1000, CH_ALGO_RING, CH_HASH_DEFAULT);
    snprintf(got, sizeof(got), "%.3f ms", r->build_ns / 1e6);
    snprintf(goal, sizeof(goal), "< %.0f ms", T_BUILD_MS);
    target("ring 1000x160 build", got, r->build_ns / 1e6 < T_BUILD_MS, goal);
}

/* ---- main -------------------------------------------------------------------------------- */

int main(void)
{
    double t0 = now_ns();
    make_keys();
    make_nodes();
    print_header();

    for (size_t c = 0; c < NCOUNTS; c++) {
        for (unsigned a = 0; a < CH_ALGO_COUNT_; a++) {
            ch_algo_id algo;
            int rc = ch_algo_from_name(ch_algo_name((ch_algo_id)a), &algo);
            if (rc != CH_OK)
                die("ch_algo_from_name", rc);
            for (unsigned h = 0; h < CH_HASH_COUNT_; h++) {
                ch_hash_id hash;
                if ((rc = ch_hash_from_name(ch_hash_name((ch_hash_id)h), &hash)) != CH_OK)
                    die("ch_hash_from_name", rc);
                row *r = &rows[nrows++];
                *r = (row){.n = node_counts[c], .algo = algo, .hash = hash};
                ch_table *t = build_table(r);
                measure_lookups(t, r);
                ch_table_free(t);
                print_row(r);
                fflush(stdout);
            }
        }
        peers[c].n = node_counts[c];
        if (node_counts[c] <= PEER_MAX_SERVERS)
            measure_peer(&peers[c]);
    }

    print_peers();
    print_targets();
    printf("\n%d of 6 targets missed; total run %.1f s; load average %.2f (sink %" PRIu64 ")\n",
           missed, (now_ns() - t0) / 1e9, load_average(), (uint64_t)sink);
    free(keys);
    free(key_block);
    return 0;
}

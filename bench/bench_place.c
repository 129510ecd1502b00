/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_place — what a lookup costs next to hashing the key alone, build time and bytes per
 * point of the tables, and libmemcached's weighted ketama (memcached_generate_hash) as the peer.
 * Ends with the performance targets, each MET or MISSED. docs/PERFORMANCE.md records a run.
 *
 * Rows. Not the whole cross product of algorithms x hashes (10 x 16 x 3 N would take minutes);
 * for each N in {8, 100, 1000}, in this order:
 *   - every algorithm with the default hash (fnv1a32_fmix), and right after it with its
 *     compatibility hash where it has one: fnv1a_64 (twemproxy's default hash) for ketama and
 *     modula; md5 for libmemcached_ketama and libmemcached_ketama_spy (libmemcached's weighted
 *     ketama hashes keys with md5). random gets no second row: ch_lookup() hashes the key and
 *     takes it modulo N whatever the hash (twemproxy draws a random value instead), so it costs
 *     what modulo costs; modula with weights 1 is the same h % N over a slot table.
 *   - a client library's scheme (CH_ALGO_F_FIXED_HASH) once, with its own key hash: the hash
 *     column is that hash alone, the lookup column the scheme's whole lookup; guava@31 takes
 *     the table's hash and gets the default's row and an md5 row (Guava's md5().padToLong()).
 *   - the ring with every other hash: the "hash ns" column of these rows is each hash's
 *     hash-only cost on the keys (twemproxy's hashes included), and the lookup column what the
 *     ring adds to it.
 * Then the peer, at N = 8 and 100 (libmemcached holds at most 100 servers): libmemcached's
 * weighted ketama over servers 127.0.0.1:11211+i against chash's libmemcached_ketama with md5
 * over ids "127.0.0.1:<11211+i>" in the same order: the same continuum. Before timing, both must
 * give the same owner for every key of the key set (the bench dies otherwise). In the same
 * rounds: the md5 hash-only cost of each library (chash's ch_hash64 md5; libhashkit_md5, the
 * hash memcached_generate_hash uses), so the split between hashing and placement is visible;
 * and, over the same servers, chash's default ring (fnv1a32_fmix) and twemproxy's default
 * configuration (ketama + fnv1a_64, ids as twemproxy names the servers: "127.0.0.1" for port
 * 11211, else "127.0.0.1:<port>"). Measuring them together, not from the rows above, keeps the
 * ratios free of the machine's slow phases (several seconds at a time, up to 1.45x slower on the
 * reference machine), which would otherwise hit one side of a ratio and not the other.
 *
 * Method. One array of NKEYS keys "user:<digits>" (8..24 bytes, fixed-seed PRNG) is shared by
 * every measurement. A measurement runs several passes (e.g. hash-only and lookup), each timed
 * over the first nk keys in chunks of CHUNK_KEYS; each chunk gets REPS rounds of all passes,
 * every pass with the same loop shape (one out-of-line library call per key, results summed
 * into a local that ends in a volatile sink), the pass that goes first rotating from round to
 * round. The best (minimum) time of each pass per chunk is kept and the chunks are summed.
 * Short passes (a few ms), alternated and spread over the measurement, keep a preempted pass
 * from counting and let drift hit all passes alike. nk is NKEYS unless the slowest pass would
 * take more than MEASURE_BUDGET_NS (md5, the crcs, rendezvous and jump at large N): then nk is
 * cut to fit, in whole chunks; figures are per key.
 *
 * Why chunks of 64 Ki keys, not fewer: a pass replays its chunk REPS times, and a short replayed
 * sequence trains the branch predictor (the hash loops exit at the key length, the ring search
 * on the key's position). On the reference machine a 512-key chunk replayed makes fnv1a32_fmix
 * look 1.7x faster (9.6 vs 16.3 ns); from 64 Ki keys on the effect is gone. The best rounds run
 * with the chunk's keys (about 2 MB) in cache, as a key a router just received would be.
 */
#define _POSIX_C_SOURCE 200809L

#include <chash.h>
#include <libhashkit-1.0/hashkit.h>
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
#define NCHUNKS_MAX (NKEYS / CHUNK_KEYS)
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

/* The hash twemproxy uses when a pool names none, and the distribution it uses then (ketama). */
#define TW_DEFAULT_HASH CH_HASH_TW_FNV1A_64

/* Targets (see the summary). */
#define T_RING_SMALL 1.5      /* ring 8x160: lookup / hash-only */
#define T_RING_LARGE 3.0      /* ring 1000x160: lookup / hash-only */
#define T_O1 1.3              /* jump, maglev: lookup / hash-only, every N */
#define T_PEER 10.0           /* default-hash ring lookups/s / libmemcached ketama lookups/s */
#define T_SAME 1.4            /* chash libmemcached_ketama+md5 / libmemcached, same continuum;
                                 * set after measuring (why: docs/PERFORMANCE.md) */
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
static char peer_ids[PEER_MAX_SERVERS][24];
static ch_node peer_nodes[PEER_MAX_SERVERS]; /* "127.0.0.1:<port>": libmemcached_ketama, ring */
static ch_node tw_nodes[PEER_MAX_SERVERS];   /* twemproxy's names for the same servers: ketama */

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

/* Per N: every algorithm twice at most, the ring once per hash. */
#define MAX_ROWS (NCOUNTS * (2 * CH_ALGO_COUNT_ + CH_HASH_COUNT_))
static row rows[MAX_ROWS];
static size_t nrows;

/* The peer comparison at one N: the same continuum in libmemcached and in chash. */
typedef struct peer {
    size_t n, nk;       /* nk == 0: not measured (n > PEER_MAX_SERVERS) */
    size_t agree;       /* keys with the same owner in both: all, or the bench died */
    double lm_ns;       /* per key, memcached_generate_hash */
    double lm_md5_ns;   /* per key, libhashkit_md5 (libmemcached's key hash) alone */
    double ch_ns;       /* per key, ch_lookup on libmemcached_ketama + md5 */
    double ch_md5_ns;   /* per key, ch_hash64(CH_HASH_MD5) alone */
    double ring_ns;     /* per key, ch_lookup on the default ring over the same servers */
    double tw_ns;       /* per key, ch_lookup on ketama + fnv1a_64 (twemproxy's default) */
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

/* "node-1" ... for the rows; "127.0.0.1:<11211+i>" for the peer comparison, the ids under which
 * chash's libmemcached_ketama builds libmemcached's continuum for those servers, and the same
 * servers as twemproxy names them ("host" alone for port 11211). */
static void make_nodes(void)
{
    for (size_t i = 0; i < MAX_NODES; i++) {
        snprintf(node_ids[i], sizeof(node_ids[i]), "node-%zu", i + 1);
        nodes[i] = (ch_node){.id = node_ids[i], .weight = 1.0};
    }
    for (size_t i = 0; i < PEER_MAX_SERVERS; i++) {
        snprintf(peer_ids[i], sizeof(peer_ids[i]), "127.0.0.1:%zu", MEMCACHED_PORT + i);
        peer_nodes[i] = (ch_node){.id = peer_ids[i], .weight = 1.0};
        tw_nodes[i] = peer_nodes[i];
    }
    tw_nodes[0].id = "127.0.0.1"; /* port 11211 */
}

/* Keys for a measurement whose slowest pass costs probe_ns per key: whole chunks, at least one. */
static size_t keys_for(double probe_ns)
{
    double chunks = MEASURE_BUDGET_NS / (probe_ns > 0.0 ? probe_ns : 1.0) / CHUNK_KEYS;
    size_t nk = chunks < 1.0 ? CHUNK_KEYS : (size_t)chunks * CHUNK_KEYS;
    return nk < NKEYS ? nk : NKEYS;
}

/* The registry's own id for a name it printed: rows go through the public names. */
static ch_algo_id algo_id(unsigned a)
{
    ch_algo_id id;
    int rc = ch_algo_from_name(ch_algo_name((ch_algo_id)a), &id);
    if (rc != CH_OK)
        die("ch_algo_from_name", rc);
    return id;
}

static ch_hash_id hash_id(unsigned h)
{
    ch_hash_id id;
    int rc = ch_hash_from_name(ch_hash_name((ch_hash_id)h), &id);
    if (rc != CH_OK)
        die("ch_hash_from_name", rc);
    return id;
}

/* The hash an algorithm is compatible with a peer under, when it is not the default: the second
 * row of that algorithm. false: none, or none worth a row (see the header comment). */
static bool compat_hash(ch_algo_id a, ch_hash_id *out)
{
    switch (a) {
    case CH_ALGO_KETAMA:
    case CH_ALGO_MODULA:
        *out = TW_DEFAULT_HASH;
        return true;
    case CH_ALGO_LIBMEMCACHED_KETAMA:
    case CH_ALGO_LIBMEMCACHED_KETAMA_SPY:
    case CH_ALGO_GUAVA_31:
        *out = CH_HASH_MD5;
        return true;
    default:
        return false;
    }
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

static double pass_hashkit_md5(const key *k, size_t nk)
{
    uint64_t acc = 0;
    double t0 = now_ns();
    for (size_t i = 0; i < nk; i++)
        acc += libhashkit_md5(k[i].p, k[i].len);
    double el = now_ns() - t0;
    sink += acc;
    return el;
}

/* ch_lookup_hash over key hashes computed before (kh[i] for keys[i]): the search alone. */
static double pass_search(const ch_table *t, const uint64_t *kh, size_t nk)
{
    uint64_t acc = 0;
    double t0 = now_ns();
    for (size_t i = 0; i < nk; i++)
        acc += ch_lookup_hash(t, kh[i]);
    double el = now_ns() - t0;
    sink += acc;
    return el;
}

/* One kind of pass in a measurement, and its result. */
typedef enum pass_kind { P_HASH, P_LOOKUP, P_MEMCACHED, P_HASHKIT_MD5, P_SEARCH } pass_kind;

typedef struct pass {
    pass_kind kind;
    ch_hash_id hash;         /* P_HASH */
    const ch_table *t;       /* P_LOOKUP, P_SEARCH */
    const uint64_t *kh;      /* P_SEARCH: the table's key hash of every key of keys[] */
    const memcached_st *m;   /* P_MEMCACHED */
    double ns;               /* result: per key */
} pass;

static double run_pass(const pass *p, const key *k, size_t nk)
{
    switch (p->kind) {
    case P_HASH:
        return pass_hash(p->hash, k, nk);
    case P_LOOKUP:
        return pass_lookup(p->t, k, nk);
    case P_MEMCACHED:
        return pass_memcached(p->m, k, nk);
    case P_HASHKIT_MD5:
        return pass_hashkit_md5(k, nk);
    case P_SEARCH:
        return pass_search(p->t, p->kh + (k - keys), nk);
    }
    return 0.0;
}

/* ---- measurements ------------------------------------------------------------------------ */

/* Times the np passes over the same keys; returns nk and sets each pass's ns per key.
 * Rounds go over all chunks, so a chunk's rounds are spread over the whole measurement and a
 * burst of other work on the machine spoils at most one of them. Within a round the passes over
 * a chunk follow each other, the first one rotating from round to round (with two passes: A B,
 * then B A), so each gets rounds with the chunk's keys already in cache. Best per chunk and
 * pass, summed over the chunks. */
#define MAX_PASSES 6
static size_t measure(pass *p, size_t np)
{
    double slowest = 0.0;
    for (size_t j = 0; j < np; j++) {
        double probe = 1e300;
        for (int i = 0; i < 3; i++) {
            double el = run_pass(&p[j], keys, PROBE_KEYS);
            probe = el < probe ? el : probe;
        }
        slowest = probe > slowest ? probe : slowest;
    }
    size_t nk = keys_for(slowest / PROBE_KEYS);
    size_t nchunks = nk / CHUNK_KEYS;
    double best[MAX_PASSES][NCHUNKS_MAX];
    for (size_t j = 0; j < np; j++)
        for (size_t c = 0; c < nchunks; c++)
            best[j][c] = 1e300;
    for (int rep = 0; rep < REPS; rep++) {
        for (size_t c = 0; c < nchunks; c++) {
            const key *k = keys + c * CHUNK_KEYS;
            for (size_t i = 0; i < np; i++) {
                size_t j = ((size_t)rep + i) % np;
                double el = run_pass(&p[j], k, CHUNK_KEYS);
                best[j][c] = el < best[j][c] ? el : best[j][c];
            }
        }
    }
    for (size_t j = 0; j < np; j++) {
        double sum = 0.0;
        for (size_t c = 0; c < nchunks; c++)
            sum += best[j][c];
        p[j].ns = sum / (double)nk;
    }
    return nk;
}

/* Builds the table BUILD_REPS times; keeps the last, and the best build time in r. */
static ch_table *build_table(row *r)
{
    ch_options opt;
    ch_options_init(&opt);
    opt.algo = r->algo;
    opt.hash = r->hash;
    /* A client library's scheme with its library's points per node (0: its default). */
    opt.vnodes = ch_algo_flags(r->algo) & CH_ALGO_F_FIXED_HASH ? 0 : VNODES;
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

static void print_row(const row *r);

/* Builds, measures and prints one row: hash-only and lookup cost per key. */
static void measure_row(size_t n, ch_algo_id a, ch_hash_id h)
{
    if (nrows == MAX_ROWS)
        die("too many rows", 1);
    row *r = &rows[nrows++];
    *r = (row){.n = n, .algo = a, .hash = h};
    ch_table *t = build_table(r);
    pass p[2] = {{.kind = P_HASH, .hash = h}, {.kind = P_LOOKUP, .t = t}};
    r->nk = measure(p, 2);
    r->hash_ns = p[0].ns;
    r->lookup_ns = p[1].ns;
    ch_table_free(t);
    print_row(r);
    fflush(stdout);
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

static ch_table *peer_table(const ch_node *ns, size_t n, ch_algo_id a, ch_hash_id h)
{
    ch_options opt;
    ch_options_init(&opt);
    opt.algo = a;
    opt.hash = h;
    ch_table *t;
    int rc = ch_table_build(ns, n, &opt, &t);
    if (rc != CH_OK)
        die("ch_table_build (peer comparison)", rc);
    return t;
}

/* libmemcached's continuum and chash's libmemcached_ketama + md5 over the same servers in the
 * same order: checked equal on every key, then timed in the same rounds with both md5s alone,
 * the default ring and twemproxy's default over the same servers. */
static void measure_peer(peer *p)
{
    memcached_st *m = ketama_create(p->n);
    ch_table *t = peer_table(peer_nodes, p->n, CH_ALGO_LIBMEMCACHED_KETAMA, CH_HASH_MD5);
    ch_table *ring = peer_table(peer_nodes, p->n, CH_ALGO_RING, CH_HASH_DEFAULT);
    ch_table *tw = peer_table(tw_nodes, p->n, CH_ALGO_KETAMA, TW_DEFAULT_HASH);

    for (size_t i = 0; i < NKEYS; i++) {
        uint32_t lm = memcached_generate_hash(m, keys[i].p, keys[i].len);
        size_t ch = ch_lookup(t, keys[i].p, keys[i].len);
        if (ch != lm) {
            fprintf(stderr,
                    "bench_place: N=%zu, key \"%.*s\": libmemcached says server %" PRIu32
                    ", chash libmemcached_ketama says %zu\n",
                    p->n, (int)keys[i].len, keys[i].p, lm, ch);
            die("libmemcached and chash disagree on the same continuum", 1);
        }
        p->agree++;
    }

    pass ps[6] = {{.kind = P_HASHKIT_MD5},
                  {.kind = P_MEMCACHED, .m = m},
                  {.kind = P_HASH, .hash = CH_HASH_MD5},
                  {.kind = P_LOOKUP, .t = t},
                  {.kind = P_LOOKUP, .t = ring},
                  {.kind = P_LOOKUP, .t = tw}};
    p->nk = measure(ps, 6);
    p->lm_md5_ns = ps[0].ns;
    p->lm_ns = ps[1].ns;
    p->ch_md5_ns = ps[2].ns;
    p->ch_ns = ps[3].ns;
    p->ring_ns = ps[4].ns;
    p->tw_ns = ps[5].ns;
    ch_table_free(tw);
    ch_table_free(ring);
    ch_table_free(t);
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
           "node; load average %.2f\n",
           NKEYS, REPS, VNODES, load_average());
    printf("rows per N: every algorithm with %s, then with its compatibility hash (ketama, modula: "
           "%s; libmemcached_ketama*: md5); the ring with every other hash\n\n",
           ch_hash_name(CH_HASH_DEFAULT), ch_hash_name(TW_DEFAULT_HASH));
    printf("%5s %-23s %-13s %8s %8s %9s %9s %8s %9s %7s %7s\n", "nodes", "algo", "hash", "keys",
           "hash ns", "lookup ns", "Mlookup/s", "ratio", "build ms", "points", "B/point");
}

static void print_row(const row *r)
{
    if (r > rows && r[-1].n != r->n) /* a blank line between the N groups */
        printf("\n");
    printf("%5zu %-23s %-13s %8zu %8.1f %9.1f %9.2f %7.2fx %9.3f %7zu %7.1f\n", r->n,
           ch_algo_name(r->algo), ch_hash_name(r->hash), r->nk, r->hash_ns, r->lookup_ns,
           1e3 / r->lookup_ns, ratio(r), r->build_ns / 1e6, r->points,
           (double)r->bytes / (double)r->points);
}

static void print_peers(void)
{
    printf("\nsame continuum: libmemcached weighted ketama (memcached_generate_hash) vs chash "
           "libmemcached_ketama + md5,\nservers 127.0.0.1:11211+i in order; owners checked "
           "equal on every key first\n");
    printf("%5s %8s %8s | %-26s %-26s %7s | %-24s\n", "nodes", "agree", "keys",
           "libmemcached  ns   M/s", "chash         ns   M/s", "chash/lm",
           "md5 alone: hashkit  chash");
    for (size_t i = 0; i < NCOUNTS; i++) {
        const peer *p = &peers[i];
        if (p->nk == 0) {
            printf("%5zu   n/a: libmemcached aborts above %d servers (MEMCACHED_CONTINUUM_SIZE "
                   "assertion in update_continuum)\n",
                   p->n, PEER_MAX_SERVERS);
            continue;
        }
        printf("%5zu %8zu %8zu | %16.1f %6.2f   %16.1f %6.2f   %7.2fx | %18.1f %6.1f\n", p->n,
               p->agree, p->nk, p->lm_ns, 1e3 / p->lm_ns, p->ch_ns, 1e3 / p->ch_ns,
               p->lm_ns / p->ch_ns, p->lm_md5_ns, p->ch_md5_ns);
    }

    printf("\nsame rounds, same servers: chash's default and twemproxy's default configuration "
           "vs libmemcached above\n");
    printf("%5s | %s | %s\n", "nodes", "ring fnv1a32_fmix  ns    M/s    x lm",
           "ketama fnv1a_64    ns    M/s    x lm");
    for (size_t i = 0; i < NCOUNTS; i++) {
        const peer *p = &peers[i];
        if (p->nk == 0)
            continue;
        printf("%5zu | %21.1f %6.2f %6.2fx | %21.1f %6.2f %6.2fx\n", p->n, p->ring_ns,
               1e3 / p->ring_ns, p->lm_ns / p->ring_ns, p->tw_ns, 1e3 / p->tw_ns,
               p->lm_ns / p->tw_ns);
    }
}

static int missed, ntargets;

static void target(const char *what, const char *measured, bool met, const char *goal)
{
    printf("  %-58s %-18s %-9s %s\n", what, measured, goal, met ? "MET" : "MISSED");
    missed += !met;
    ntargets++;
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

    /* Worst N of the peer figures: the default-hash ring, then the same continuum. */
    const peer *worst = NULL, *worst_same = NULL;
    double worst_x = 0.0, worst_same_x = 0.0;
    for (size_t i = 0; i < NCOUNTS; i++) {
        if (peers[i].nk == 0)
            continue;
        double x = peers[i].lm_ns / peers[i].ring_ns;
        if (worst == NULL || x < worst_x) {
            worst = &peers[i];
            worst_x = x;
        }
        double s = peers[i].lm_ns / peers[i].ch_ns;
        if (worst_same == NULL || s < worst_same_x) {
            worst_same = &peers[i];
            worst_same_x = s;
        }
    }
    snprintf(got, sizeof(got), "%.2fx (N=%zu)", worst_x, worst->n);
    snprintf(goal, sizeof(goal), ">= %.0fx", T_PEER);
    target("ring / libmemcached ketama lookups/s, worst N<=100", got, worst_x >= T_PEER, goal);

    snprintf(got, sizeof(got), "%.2fx (N=%zu)", worst_same_x, worst_same->n);
    snprintf(goal, sizeof(goal), ">= %.1fx", T_SAME);
    target("libmemcached_ketama (chash) / libmemcached, same continuum", got,
           worst_same_x >= T_SAME, goal);

    r = find_row(1000, CH_ALGO_RING, CH_HASH_DEFAULT);
    snprintf(got, sizeof(got), "%.3f ms", r->build_ns / 1e6);
    snprintf(goal, sizeof(goal), "< %.0f ms", T_BUILD_MS);
    target("ring 1000x160 build", got, r->build_ns / 1e6 < T_BUILD_MS, goal);
}

/* ---- main -------------------------------------------------------------------------------- */

/* The search alone, key hashes computed before timing: the 32-bit ring (8-byte points) and the
 * 64-bit ring (md5_64_ring: 16-byte points, full-width positions) over the same N nodes and
 * 160 points each, measured together; "64-bit - 32-bit" is what the wider layout costs. */
static void measure_search(void)
{
    uint64_t *kh32 = malloc(NKEYS * sizeof(*kh32)), *kh64 = malloc(NKEYS * sizeof(*kh64));
    if (kh32 == NULL || kh64 == NULL)
        die("malloc", 0);
    printf("\nsearch alone (ch_lookup_hash on key hashes computed before), ns per key:\n"
           "%5s %10s %10s %10s\n", "N", "ring", "ring64", "64 - 32");
    for (size_t c = 0; c < NCOUNTS; c++) {
        size_t n = node_counts[c];
        ch_options o;
        ch_options_init(&o);
        ch_table *t32 = NULL, *t64 = NULL;
        int rc = ch_table_build(nodes, n, &o, &t32);
        o.algo = CH_ALGO_MD5_64_RING;
        o.vnodes = VNODES;
        if (rc != CH_OK || (rc = ch_table_build(nodes, n, &o, &t64)) != CH_OK)
            die("ch_table_build", rc);
        for (size_t i = 0; i < NKEYS; i++) {
            kh32[i] = ch_key_hash(t32, keys[i].p, keys[i].len);
            kh64[i] = ch_key_hash(t64, keys[i].p, keys[i].len);
        }
        pass p[2] = {{.kind = P_SEARCH, .t = t32, .kh = kh32},
                     {.kind = P_SEARCH, .t = t64, .kh = kh64}};
        measure(p, 2);
        printf("%5zu %10.1f %10.1f %10.1f\n", n, p[0].ns, p[1].ns, p[1].ns - p[0].ns);
        fflush(stdout);
        ch_table_free(t32);
        ch_table_free(t64);
    }
    free(kh32);
    free(kh64);
}

/* "bench_place search": the search section alone (measure_search). */
int main(int argc, char **argv)
{
    double t0 = now_ns();
    make_keys();
    make_nodes();
    if (argc > 1 && strcmp(argv[1], "search") == 0) {
        measure_search();
        printf("load average %.2f\n", load_average());
        free(keys);
        free(key_block);
        return 0;
    }
    print_header();

    for (size_t c = 0; c < NCOUNTS; c++) {
        size_t n = node_counts[c];
        for (unsigned a = 0; a < CH_ALGO_COUNT_; a++) {
            ch_algo_id algo = algo_id(a);
            ch_hash_id compat, own;
            /* A client library's scheme has its own key hash: one row, against that hash. */
            if (ch_algo_hash(algo, &own) == CH_OK) {
                measure_row(n, algo, own);
                continue;
            }
            measure_row(n, algo, CH_HASH_DEFAULT);
            if (compat_hash(algo, &compat))
                measure_row(n, algo, compat);
        }
        for (unsigned h = 0; h < CH_HASH_COUNT_; h++) {
            ch_hash_id hash = hash_id(h);
            if (hash != CH_HASH_DEFAULT)
                measure_row(n, CH_ALGO_RING, hash);
        }
        peers[c].n = n;
        if (n <= PEER_MAX_SERVERS)
            measure_peer(&peers[c]);
    }

    measure_search();
    print_peers();
    print_targets();
    printf("\n%d of %d targets missed; total run %.1f s; load average %.2f (sink %" PRIu64 ")\n",
           missed, ntargets, (now_ns() - t0) / 1e9, load_average(), (uint64_t)sink);
    free(keys);
    free(key_block);
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_libmemcached.c — libchash's libmemcached_ketama and libmemcached_ketama_spy against the
 * real libmemcached (1.1.4, libmemcached-dev), used as an oracle in-process. No network: the
 * continuum is computed when servers are added, and memcached_generate_hash() answers the index
 * of a key's server without connecting to anything.
 *
 * For every configuration (1 to 100 servers; IP and DNS-style hosts, port 11211 and others;
 * equal, unequal and very unequal weights, including weight sets where libmemcached's float
 * arithmetic for the points per server differs from exact arithmetic or from double precision):
 *   - libmemcached in weighted ketama (MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED: md5 key hash,
 *     distribution CONSISTENT_WEIGHTED), and that plus distribution CONSISTENT_KETAMA_SPY,
 *     servers added in list order with memcached_server_add_with_weight(), host sorting off;
 *   - a chash table over the same nodes in the same order ("host:port", weight), algo
 *     libmemcached_ketama / libmemcached_ketama_spy, hash md5;
 *   - 20,000 seeded keys per configuration (lengths 1..250, printable, binary and high bytes):
 *     ch_lookup() must equal memcached_generate_hash() for every one.
 * Further:
 *   - every point of libmemcached's continuum (read from the memcached_st it built; the layout is
 *     libmemcached's private one, validated against memcached_generate_hash first): hashes equal
 *     to a point, one past it, 0 and UINT32_MAX go to the same server in chash (ch_lookup_hash),
 *     also with junk in the high 32 bits of the hash, which the compatible placements ignore;
 *   - points per server: libmemcached's counts for the rounding traps are the ones expected, and
 *     chash's ring (internal.h) has libmemcached's count for every server of every table;
 *   - the empty key (libmemcached hashes it with md5 like any other key);
 *   - "host" alone is the same node as "host:11211";
 *   - weighted ketama switched on by libmemcached itself (a weight > 1 added under
 *     MEMCACHED_BEHAVIOR_KETAMA or the spy distribution), where keys keep the default
 *     one_at_a_time hash: chash with CH_HASH_TW_ONE_AT_A_TIME;
 *   - answers depend on the list only: a table rebuilt from fresh copies answers the same, and
 *     so does libmemcached configured in another order (behaviors first, then the servers).
 * On a mismatch the test prints the configuration, the key in hex, both indexes, both key hashes,
 * and where the two continuums first differ (points per server), then fails.
 */
#define _POSIX_C_SOURCE 200809L

#include "testutil.h"
#include "internal.h"

#include <libmemcached-1.0/memcached.h>

#include <stdarg.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#define KEYS 20000
#define MAX_HOST 256
#define MAX_ID (MAX_HOST + 8)
#define SHOW_MISMATCHES 5

/* ---- configurations -------------------------------------------------------------------- */

typedef struct server {
    char host[MAX_HOST];
    unsigned port;
    uint32_t weight;
    char id[MAX_ID]; /* "host:port" */
} server;

typedef struct config {
    char name[128];
    size_t n;
    server *s;
    /* Weight sets chosen for libmemcached's float rounding: the points every server of weight
     * trap[i].w must have in libmemcached's continuum (computed independently, in Python with
     * float32 emulation), so the configuration is known to exercise the rounding. */
    size_t ntraps;
    struct {
        uint32_t w, points;
    } trap[2];
} config;

typedef struct config_set {
    config *c;
    size_t n;
} config_set;

/* Server i of configuration c: hosts of several shapes, ports 11211 and others. */
static void make_host(server *sv, size_t c, size_t i)
{
    unsigned ci = (unsigned)c, ii = (unsigned)i;
    switch ((i + c) % 6) {
    case 0:
        snprintf(sv->host, sizeof(sv->host), "10.0.%u.%u", ci % 250, ii % 250 + 1);
        sv->port = 11211;
        break;
    case 1:
        snprintf(sv->host, sizeof(sv->host), "cache-%c%u.example", 'a' + (int)(i % 26), ii);
        sv->port = 11211;
        break;
    case 2:
        snprintf(sv->host, sizeof(sv->host), "10.1.%u.%u", ci % 250, ii % 250 + 1);
        sv->port = 11212 + ii;
        break;
    case 3:
        snprintf(sv->host, sizeof(sv->host), "cache-%u.example", ii);
        sv->port = 22122;
        break;
    case 4:
        snprintf(sv->host, sizeof(sv->host), "mc%u", ii);
        sv->port = 1 + ii;
        break;
    default:
        snprintf(sv->host, sizeof(sv->host), "Mem_Cache-%u.internal", ii);
        sv->port = 65535 - ii;
        break;
    }
}

static void set_ids(config *cf)
{
    for (size_t i = 0; i < cf->n; i++)
        snprintf(cf->s[i].id, sizeof(cf->s[i].id), "%s:%u", cf->s[i].host, cf->s[i].port);
}

static void add_trap(config *cf, uint32_t w, uint32_t points)
{
    assert_true(cf->ntraps < 2);
    cf->trap[cf->ntraps].w = w;
    cf->trap[cf->ntraps].points = points;
    cf->ntraps++;
}

static config *add_config(config_set *cs, size_t n, const char *fmt, ...)
{
    cs->c = realloc(cs->c, (cs->n + 1) * sizeof(*cs->c));
    assert_non_null(cs->c);
    config *cf = &cs->c[cs->n];
    memset(cf, 0, sizeof(*cf));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cf->name, sizeof(cf->name), fmt, ap);
    va_end(ap);
    cf->n = n;
    cf->s = calloc(n, sizeof(*cf->s));
    assert_non_null(cf->s);
    for (size_t i = 0; i < n; i++) {
        make_host(&cf->s[i], cs->n, i);
        cf->s[i].weight = 1;
    }
    cs->n++;
    return cf;
}

/* A 50-server weight set (weights 1..9) where libmemcached's float arithmetic gives several
 * weight-5 servers 156 points where exact arithmetic gives 160. */
static const uint32_t w50_float[50] = {5, 1, 5, 3, 2, 9, 1, 5, 4, 9, 7, 1, 9, 1, 6, 9, 2,
                                       4, 4, 7, 4, 5, 6, 7, 6, 2, 4, 7, 2, 9, 6, 5, 5, 9,
                                       6, 3, 6, 1, 8, 2, 5, 6, 3, 3, 7, 5, 5, 6, 5, 8};

static config_set make_configs(void)
{
    config_set cs = {NULL, 0};
    static const size_t sizes[] = {1, 2, 3, 5, 8, 13, 50};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(*sizes); k++) {
        size_t n = sizes[k];
        config *cf = add_config(&cs, n, "%zu servers, weights all 1", n);
        cf = add_config(&cs, n, "%zu servers, weights 1..7 cyclic", n);
        for (size_t i = 0; i < n; i++)
            cf->s[i].weight = 1 + (uint32_t)(i % 7);
        if (n >= 2) {
            cf = add_config(&cs, n, "%zu servers, server %zu weight 10", n, n / 2);
            cf->s[n / 2].weight = 10;
        }
        if (n >= 3) {
            /* For n = 3, 1/1002 * 40 * 3 < 1: the light servers get no points at all. */
            cf = add_config(&cs, n, "%zu servers, server 0 weight 1000", n);
            cf->s[0].weight = 1000;
            if (n == 3) {
                add_trap(cf, 1, 0);
                add_trap(cf, 1000, 476);
            }
        }
    }
    /* Weight sets where libmemcached's float rounding of the points per server matters. */
    config *cf = add_config(&cs, 7, "7 servers, weights 1,1,1,1,1,1,3");
    cf->s[6].weight = 3;
    add_trap(cf, 1, 124);
    add_trap(cf, 3, 372);
    /* 1/7 * 40 * 7 is 39.999... in double: double arithmetic would give 156 points, float 160. */
    cf = add_config(&cs, 7, "7 servers, weights all 1 (double would round down)");
    add_trap(cf, 1, 160);
    /* 6/25 * 40 * 5 is 48 exactly, 47.999996 in float: 188 points, not 192. */
    cf = add_config(&cs, 5, "5 servers, weights 1,6,6,6,6 (float below exact)");
    for (size_t i = 1; i < 5; i++)
        cf->s[i].weight = 6;
    add_trap(cf, 1, 28);
    add_trap(cf, 6, 188);
    cf = add_config(&cs, 10, "10 servers, weights 1,11 x 9 (float below exact)");
    for (size_t i = 1; i < 10; i++)
        cf->s[i].weight = 11;
    add_trap(cf, 1, 12);
    add_trap(cf, 11, 176);
    cf = add_config(&cs, 9, "9 servers, weights 1 x 7,7,7 (double below float)");
    cf->s[7].weight = cf->s[8].weight = 7;
    add_trap(cf, 1, 68);
    add_trap(cf, 7, 480);
    cf = add_config(&cs, 50, "50 servers, weights 1..9 (float below exact)");
    for (size_t i = 0; i < 50; i++)
        cf->s[i].weight = w50_float[i];
    add_trap(cf, 5, 156);
    cf = add_config(&cs, 50, "50 servers, 49 of weight 1 and one of 100");
    cf->s[49].weight = 100;
    /* Total weight above 2^24: libmemcached's (float)total_weight is rounded. */
    cf = add_config(&cs, 50, "50 servers, weights near 1e6 (total > 2^24)");
    for (size_t i = 0; i < 50; i++)
        cf->s[i].weight = 1000000u + (uint32_t)i * 7919u + (uint32_t)(i % 3);
    add_config(&cs, 100, "100 servers, weights all 1");
    cf = add_config(&cs, 4, "4 servers, 200-character hostnames");
    for (size_t i = 0; i < 4; i++) {
        memset(cf->s[i].host, 'h', 200);
        snprintf(cf->s[i].host + 200, sizeof(cf->s[i].host) - 200, "-%zu.example", i);
        cf->s[i].port = i % 2 ? 11211 : 11300;
        cf->s[i].weight = (uint32_t)i + 1;
    }
    /* IPv6 literals: libmemcached writes them bare into its point strings ("::1-0",
     * "/::1:11211-0"); the ids are still "host:port", split at the last colon. */
    cf = add_config(&cs, 4, "4 servers, IPv6 literals");
    static const char *v6[4] = {"::1", "fe80::2", "2001:db8::3", "2001:db8:0:0:0:0:0:4"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(cf->s[i].host, sizeof(cf->s[i].host), "%s", v6[i]);
        cf->s[i].port = i % 2 ? 11212 : 11211;
        cf->s[i].weight = (uint32_t)i + 1;
    }
    for (size_t c = 0; c < cs.n; c++)
        set_ids(&cs.c[c]);
    return cs;
}

static void free_configs(config_set *cs)
{
    for (size_t c = 0; c < cs->n; c++)
        free(cs->c[c].s);
    free(cs->c);
    cs->c = NULL;
    cs->n = 0;
}

/* ---- keys ------------------------------------------------------------------------------ */

/* A key of varied length (1..250) and content into buf (>= 256 bytes); returns its length. */
static size_t make_key(uint64_t *st, unsigned char *buf)
{
    uint64_t r = tu_rand(st);
    size_t len;
    switch (r % 8) {
    case 0: case 1: case 2: case 3:
        len = 1 + (size_t)((r >> 8) % 16);
        break;
    case 4: case 5:
        len = 17 + (size_t)((r >> 8) % 48);
        break;
    case 6:
        len = 65 + (size_t)((r >> 8) % 186);
        break;
    default:
        len = 1 + (size_t)((r >> 8) % 40);
        break;
    }
    unsigned kind = (unsigned)((r >> 32) % 8);
    for (size_t i = 0; i < len; i++) {
        uint64_t b = tu_rand(st);
        if (kind == 0) /* any byte, NUL and >= 0x80 included */
            buf[i] = (unsigned char)b;
        else if (kind == 1 && b % 4 == 0) /* printable with high bytes mixed in */
            buf[i] = (unsigned char)(0x80 + (b >> 8) % 0x80);
        else
            buf[i] = (unsigned char)(0x21 + (b >> 8) % 94);
    }
    return len;
}

/* The key in hex; keys over 48 bytes end in "..." after their first 48 bytes. */
static void hex(const unsigned char *k, size_t len, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = 0;
    for (size_t i = 0; i < len && i < 48 && o + 3 < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, "%02x", k[i]);
    if (len > 48 && o + 4 < cap)
        snprintf(out + o, cap - o, "...");
}

/* ---- both sides ------------------------------------------------------------------------ */

static const char *algo_label(bool spy)
{
    return spy ? "libmemcached_ketama_spy" : "libmemcached_ketama";
}

static void lm_set_mode(memcached_st *m, bool spy)
{
    memcached_return_t rc = memcached_behavior_set(m, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1);
    if (rc != MEMCACHED_SUCCESS)
        fail_msg("KETAMA_WEIGHTED: %s", memcached_strerror(m, rc));
    if (spy) {
        rc = memcached_behavior_set_distribution(m, MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY);
        if (rc != MEMCACHED_SUCCESS)
            fail_msg("distribution SPY: %s", memcached_strerror(m, rc));
    }
}

/* How lm_build() configures libmemcached; every way must give the same continuum. */
typedef enum lm_order {
    /* Servers added (memcached_server_add_with_weight, list order) under the default
     * distribution, modula, which computes nothing; the continuum is built once when the mode is
     * set. The fixture's way: cheap. */
    LM_ADD_THEN_MODE,
    /* Mode set on the empty memcached_st, then the servers added one by one: each add rebuilds
     * the continuum (O(n^2) md5s, and a reallocation of the large server structs). */
    LM_MODE_THEN_ADD,
    /* Mode first, then all servers at once with memcached_server_push() of a server list. */
    LM_MODE_THEN_PUSH,
} lm_order;

/* libmemcached over the servers of cf in list order, in weighted ketama (+ spy). */
static memcached_st *lm_build(const config *cf, bool spy, lm_order order)
{
    memcached_st *m = memcached_create(NULL);
    assert_non_null(m);
    if (order != LM_ADD_THEN_MODE)
        lm_set_mode(m, spy);
    if (order == LM_MODE_THEN_PUSH) {
        memcached_server_list_st list = NULL;
        for (size_t i = 0; i < cf->n; i++) {
            const server *sv = &cf->s[i];
            memcached_return_t rc = MEMCACHED_SUCCESS;
            list = memcached_server_list_append_with_weight(list, sv->host, (in_port_t)sv->port,
                                                            sv->weight, &rc);
            if (list == NULL || rc != MEMCACHED_SUCCESS)
                fail_msg("%s: memcached_server_list_append_with_weight(%s, %u, %u): %s",
                         cf->name, sv->host, sv->port, sv->weight, memcached_strerror(m, rc));
        }
        memcached_return_t rc = memcached_server_push(m, list);
        memcached_server_list_free(list);
        if (rc != MEMCACHED_SUCCESS)
            fail_msg("%s: memcached_server_push: %s", cf->name, memcached_last_error_message(m));
    } else {
        for (size_t i = 0; i < cf->n; i++) {
            const server *sv = &cf->s[i];
            memcached_return_t rc =
                memcached_server_add_with_weight(m, sv->host, (in_port_t)sv->port, sv->weight);
            if (rc != MEMCACHED_SUCCESS)
                fail_msg("%s: memcached_server_add_with_weight(%s, %u, %u): %s", cf->name,
                         sv->host, sv->port, sv->weight, memcached_last_error_message(m));
        }
    }
    if (order == LM_ADD_THEN_MODE)
        lm_set_mode(m, spy);

    /* Really the mode we mean: weighted ketama, md5 keys, the distribution, hosts unsorted. */
    assert_int_equal(memcached_server_count(m), cf->n);
    assert_int_equal(memcached_behavior_get(m, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED), 1);
    assert_int_equal(memcached_behavior_get(m, MEMCACHED_BEHAVIOR_KETAMA), 1);
    assert_int_equal(memcached_behavior_get(m, MEMCACHED_BEHAVIOR_DISTRIBUTION),
                     spy ? MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY
                         : MEMCACHED_DISTRIBUTION_CONSISTENT_WEIGHTED);
    assert_int_equal(memcached_behavior_get(m, MEMCACHED_BEHAVIOR_HASH), MEMCACHED_HASH_MD5);
    assert_int_equal(memcached_behavior_get(m, MEMCACHED_BEHAVIOR_SORT_HOSTS), 0);
    for (size_t i = 0; i < cf->n; i++) {
        const memcached_instance_st *in = memcached_server_instance_by_position(m, (uint32_t)i);
        assert_non_null(in);
        assert_string_equal(memcached_server_name(in), cf->s[i].host);
        assert_int_equal(memcached_server_port(in), cf->s[i].port);
    }
    return m;
}

/* The chash table over the same nodes; ids are "host:port", or "host" alone for port 11211
 * when short_default_port. The ids are written to fresh strings that are overwritten and freed
 * right after the build: the table must keep its own copies. */
static ch_table *ch_build_hash(const config *cf, bool spy, bool short_default_port,
                              ch_hash_id hash)
{
    ch_node *nodes = calloc(cf->n, sizeof(*nodes));
    char *ids = calloc(cf->n, MAX_ID);
    assert_non_null(nodes);
    assert_non_null(ids);
    for (size_t i = 0; i < cf->n; i++) {
        char *id = ids + i * MAX_ID;
        /* "host" alone is ambiguous for an IPv6 literal: those keep "host:port". */
        if (short_default_port && cf->s[i].port == 11211 && strchr(cf->s[i].host, ':') == NULL)
            snprintf(id, MAX_ID, "%s", cf->s[i].host);
        else
            snprintf(id, MAX_ID, "%s", cf->s[i].id);
        nodes[i].id = id;
        nodes[i].weight = (double)cf->s[i].weight;
    }
    ch_options o;
    ch_options_init(&o);
    o.algo = spy ? CH_ALGO_LIBMEMCACHED_KETAMA_SPY : CH_ALGO_LIBMEMCACHED_KETAMA;
    o.hash = hash;
    ch_table *t = NULL;
    int rc = ch_table_build(nodes, cf->n, &o, &t);
    /* Scribble over the caller-side ids: the table must not keep pointers to them. */
    memset(ids, 'X', cf->n * MAX_ID);
    free(ids);
    free(nodes);
    if (rc != CH_OK)
        fail_msg("%s [%s]: ch_table_build: %s", cf->name, algo_label(spy), ch_strerror(rc));
    return t;
}

static ch_table *ch_build(const config *cf, bool spy, bool short_default_port)
{
    return ch_build_hash(cf, spy, short_default_port, CH_HASH_MD5);
}

/* ---- libmemcached's continuum, read from the memcached_st (private layout, validated) ---- */

/* libmemcached's struct memcached_continuum_item_st (src/libmemcached/continuum.hpp). */
typedef struct lm_point {
    uint32_t index;
    uint32_t value;
} lm_point;

typedef struct lm_continuum {
    const lm_point *p;
    size_t n;
    bool valid;
} lm_continuum;

/* libmemcached's dispatch over its continuum: the first point with value >= h (ties sorted by
 * server index), wrapping to the first point. */
static uint32_t lm_dispatch(const lm_continuum *c, uint32_t h)
{
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->p[mid].value < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    return c->p[lo == c->n ? 0 : lo].index;
}

/* Reads the continuum and checks it is what we think: sorted, indexes in range, and our reading
 * of the dispatch agrees with memcached_generate_hash() on some keys. */
static lm_continuum lm_continuum_get(memcached_st *m, size_t nservers)
{
    lm_continuum c = {(const lm_point *)(const void *)m->ketama.continuum,
                      m->ketama.continuum_points_counter, false};
    if (c.p == NULL || c.n == 0)
        return c;
    for (size_t i = 0; i < c.n; i++) {
        if (c.p[i].index >= nservers)
            return c;
        if (i > 0 && (c.p[i - 1].value > c.p[i].value ||
                      (c.p[i - 1].value == c.p[i].value && c.p[i - 1].index > c.p[i].index)))
            return c;
    }
    if (nservers > 1) {
        uint64_t st = 99;
        unsigned char key[256];
        for (size_t k = 0; k < 2000; k++) {
            size_t len = make_key(&st, key);
            uint32_t h = memcached_generate_hash_value((const char *)key, len, MEMCACHED_HASH_MD5);
            if (lm_dispatch(&c, h) != memcached_generate_hash(m, (const char *)key, len))
                return c;
        }
    }
    c.valid = true;
    return c;
}

/* chash's points, when the table uses the shared ring layout (internal.h). */
static bool ch_ring_points(const ch_table *t, const ch__point **p, size_t *n)
{
    if (t->algo->shares != ch__ring_shares && t->algo->walk_next != ch__ring_walk_next)
        return false;
    *p = t->u.ring.points;
    *n = t->u.ring.npoints;
    if (*p == NULL || *n > CH_MAX_POINTS)
        return false;
    for (size_t i = 0; i < *n; i++)
        if ((*p)[i].node >= t->n || (i > 0 && (*p)[i - 1].pos > (*p)[i].pos))
            return false;
    return true;
}

/* Prints points per server on both sides and where the two continuums first differ. */
static void explain_continuum(const config *cf, memcached_st *m, const ch_table *t)
{
    lm_continuum c = lm_continuum_get(m, cf->n);
    const ch__point *cp = NULL;
    size_t cn = 0;
    bool have_ch = ch_ring_points(t, &cp, &cn);
    if (!c.valid)
        print_message("  (libmemcached's continuum could not be read)\n");
    if (!have_ch)
        print_message("  (chash's table does not use the ring layout; its points are not shown)\n");
    if (!c.valid || !have_ch)
        return;
    print_message("  continuum points: libmemcached %zu, chash %zu\n", c.n, cn);
    size_t *lm_per = calloc(cf->n, sizeof(size_t)), *ch_per = calloc(cf->n, sizeof(size_t));
    assert_non_null(lm_per);
    assert_non_null(ch_per);
    for (size_t i = 0; i < c.n; i++)
        lm_per[c.p[i].index]++;
    for (size_t i = 0; i < cn; i++)
        ch_per[cp[i].node]++;
    size_t shown = 0;
    for (size_t i = 0; i < cf->n; i++) {
        if (lm_per[i] != ch_per[i] && shown++ < 12)
            print_message("  server %zu (%s, weight %u): libmemcached %zu points, chash %zu\n", i,
                          cf->s[i].id, cf->s[i].weight, lm_per[i], ch_per[i]);
    }
    if (shown == 0)
        print_message("  points per server agree (e.g. server 0: %zu)\n", lm_per[0]);
    free(lm_per);
    free(ch_per);
    size_t lim = c.n < cn ? c.n : cn;
    for (size_t i = 0; i < lim; i++) {
        if (c.p[i].value != cp[i].pos || c.p[i].index != cp[i].node) {
            print_message("  first difference at sorted point %zu: libmemcached (%08x -> %u), "
                          "chash (%08x -> %u)\n",
                          i, c.p[i].value, c.p[i].index, cp[i].pos, cp[i].node);
            return;
        }
    }
    if (c.n == cn)
        print_message("  the continuums are identical\n");
}

/* ---- comparisons ----------------------------------------------------------------------- */

/* Compares KEYS keys of config cf; returns the number of keys that differ. */
static size_t compare_keys_hash(const config *cf, size_t cidx, bool spy, memcached_st *m,
                                const ch_table *t, memcached_hash_t key_hash)
{
    uint64_t st = 0x6c69626d656d63ull ^ ((uint64_t)cidx << 40);
    unsigned char key[256];
    char kh[2 * 48 + 4];
    size_t bad = 0;
    for (size_t k = 0; k < KEYS; k++) {
        size_t len = make_key(&st, key);
        uint32_t want = memcached_generate_hash(m, (const char *)key, len);
        size_t got = ch_lookup(t, key, len);
        if (want == got)
            continue;
        if (bad++ < SHOW_MISMATCHES) {
            hex(key, len, kh, sizeof(kh));
            print_message("MISMATCH %s [%s] key %zu (len %zu) %s: libmemcached server %u (%s), "
                          "chash node %zu (%s); key hash: libmemcached %08x, chash %08x\n",
                          cf->name, algo_label(spy), k, len, kh, want,
                          want < cf->n ? cf->s[want].id : "?", got,
                          got < cf->n ? cf->s[got].id : "?",
                          memcached_generate_hash_value((const char *)key, len, key_hash),
                          (uint32_t)ch_key_hash(t, key, len));
        }
    }
    if (bad) {
        print_message("%s [%s]: %zu of %d keys differ\n", cf->name, algo_label(spy), bad, KEYS);
        explain_continuum(cf, m, t);
    }
    return bad;
}

static size_t compare_keys(const config *cf, size_t cidx, bool spy, memcached_st *m,
                           const ch_table *t)
{
    return compare_keys_hash(cf, cidx, spy, m, t, MEMCACHED_HASH_MD5);
}

/* Every configuration, built once on both sides for both modes (group setup): building
 * libmemcached is the slow part under the sanitizers (it reallocates its array of large server
 * structs on every add). */
typedef struct fixture {
    config_set cs;
    memcached_st **m[2]; /* [spy][config] */
    ch_table **t[2];
} fixture;

static fixture G;

static int setup(void **state)
{
    (void)state;
    G.cs = make_configs();
    for (int spy = 0; spy < 2; spy++) {
        G.m[spy] = calloc(G.cs.n, sizeof(*G.m[spy]));
        G.t[spy] = calloc(G.cs.n, sizeof(*G.t[spy]));
        if (G.m[spy] == NULL || G.t[spy] == NULL)
            return -1;
        for (size_t c = 0; c < G.cs.n; c++) {
            G.m[spy][c] = lm_build(&G.cs.c[c], spy, LM_ADD_THEN_MODE);
            G.t[spy][c] = ch_build(&G.cs.c[c], spy, false);
        }
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int spy = 0; spy < 2; spy++) {
        for (size_t c = 0; c < G.cs.n; c++) {
            if (G.m[spy] != NULL)
                memcached_free(G.m[spy][c]);
            if (G.t[spy] != NULL)
                ch_table_free(G.t[spy][c]);
        }
        free(G.m[spy]);
        free(G.t[spy]);
    }
    free_configs(&G.cs);
    return 0;
}

static void run_all_configs(bool spy)
{
    size_t bad_configs = 0, total_bad = 0;
    for (size_t c = 0; c < G.cs.n; c++) {
        size_t bad = compare_keys(&G.cs.c[c], c, spy, G.m[spy][c], G.t[spy][c]);
        bad_configs += bad != 0;
        total_bad += bad;
    }
    print_message("[%s] %zu configurations x %d keys: %zu configurations differ, %zu keys\n",
                  algo_label(spy), G.cs.n, KEYS, bad_configs, total_bad);
    if (bad_configs)
        fail_msg("%s: %zu of %zu configurations place keys differently from libmemcached",
                 algo_label(spy), bad_configs, G.cs.n);
}

static void test_ketama_keys(void **state)
{
    (void)state;
    run_all_configs(false);
}

static void test_spy_keys(void **state)
{
    (void)state;
    run_all_configs(true);
}

/* Every point of libmemcached's continuum: the hash equal to it, one past it, plus 0 and
 * UINT32_MAX, with and without junk in the high 32 bits. */
static void run_boundaries(bool spy)
{
    size_t bad_configs = 0, checked = 0;
    for (size_t c = 0; c < G.cs.n; c++) {
        const config *cf = &G.cs.c[c];
        if (cf->n < 2)
            continue; /* memcached_generate_hash answers 0 without the continuum */
        memcached_st *m = G.m[spy][c];
        const ch_table *t = G.t[spy][c];
        lm_continuum lc = lm_continuum_get(m, cf->n);
        if (!lc.valid)
            fail_msg("%s [%s]: libmemcached's continuum is not laid out as expected", cf->name,
                     algo_label(spy));
        size_t bad = 0;
        for (size_t i = 0; i <= lc.n + 1; i++) {
            uint32_t hs[2];
            size_t nh;
            if (i < lc.n) {
                hs[0] = lc.p[i].value;
                hs[1] = lc.p[i].value + 1u; /* wraps to 0 at UINT32_MAX */
                nh = 2;
            } else {
                hs[0] = i == lc.n ? 0u : UINT32_MAX;
                nh = 1;
            }
            for (size_t j = 0; j < nh; j++) {
                uint32_t want = lm_dispatch(&lc, hs[j]);
                size_t got = ch_lookup_hash(t, hs[j]);
                size_t got_hi = ch_lookup_hash(t, ((uint64_t)0xa5a5a5a5u << 32) | hs[j]);
                checked++;
                if ((want != got || want != got_hi) && bad++ < SHOW_MISMATCHES)
                    print_message("MISMATCH %s [%s] hash %08x: libmemcached server %u, "
                                  "chash %zu (with high bits set: %zu)\n",
                                  cf->name, algo_label(spy), hs[j], want, got, got_hi);
            }
        }
        if (bad) {
            print_message("%s [%s]: %zu continuum boundaries differ\n", cf->name,
                          algo_label(spy), bad);
            explain_continuum(cf, m, t);
        }
        bad_configs += bad != 0;
    }
    print_message("[%s] %zu boundary hashes checked\n", algo_label(spy), checked);
    if (bad_configs)
        fail_msg("%s: %zu configurations differ at continuum boundaries", algo_label(spy),
                 bad_configs);
}

static void test_ketama_boundaries(void **state)
{
    (void)state;
    run_boundaries(false);
}

static void test_spy_boundaries(void **state)
{
    (void)state;
    run_boundaries(true);
}

/* Points per server: libmemcached's continuum has the expected counts for the rounding traps,
 * and chash's ring (read through internal.h when the table uses the shared ring layout) has the
 * same points per server as libmemcached's, for every configuration. */
static void test_points_per_server(void **state)
{
    (void)state;
    size_t bad = 0, traps = 0, compared = 0;
    for (int spy = 0; spy < 2; spy++) {
        for (size_t c = 0; c < G.cs.n; c++) {
            const config *cf = &G.cs.c[c];
            lm_continuum lc = lm_continuum_get(G.m[spy][c], cf->n);
            if (!lc.valid && cf->n < 2)
                continue;
            if (!lc.valid)
                fail_msg("%s [%s]: libmemcached's continuum is not laid out as expected",
                         cf->name, algo_label(spy));
            size_t *lm_per = calloc(cf->n, sizeof(size_t));
            size_t *ch_per = calloc(cf->n, sizeof(size_t));
            assert_non_null(lm_per);
            assert_non_null(ch_per);
            for (size_t i = 0; i < lc.n; i++)
                lm_per[lc.p[i].index]++;
            for (size_t k = 0; k < cf->ntraps; k++) {
                for (size_t i = 0; i < cf->n; i++) {
                    if (cf->s[i].weight != cf->trap[k].w)
                        continue;
                    traps++;
                    if (lm_per[i] != cf->trap[k].points)
                        fail_msg("%s [%s]: libmemcached gives server %zu (weight %u) %zu points, "
                                 "the test expected %u: the rounding trap is not one",
                                 cf->name, algo_label(spy), i, cf->trap[k].w, lm_per[i],
                                 cf->trap[k].points);
                }
            }
            const ch__point *cp;
            size_t cn;
            if (ch_ring_points(G.t[spy][c], &cp, &cn)) {
                compared++;
                for (size_t i = 0; i < cn; i++)
                    ch_per[cp[i].node]++;
                size_t shown = 0;
                for (size_t i = 0; i < cf->n; i++) {
                    if (lm_per[i] != ch_per[i] && shown++ < SHOW_MISMATCHES)
                        print_message("MISMATCH %s [%s] server %zu (%s, weight %u): libmemcached "
                                      "%zu points, chash %zu\n",
                                      cf->name, algo_label(spy), i, cf->s[i].id, cf->s[i].weight,
                                      lm_per[i], ch_per[i]);
                }
                bad += shown != 0;
            }
            free(lm_per);
            free(ch_per);
        }
    }
    print_message("%zu trap servers checked; points per server compared in %zu tables\n", traps,
                  compared);
    if (compared == 0)
        print_message("(chash's libmemcached tables do not use the ring layout: not compared)\n");
    if (bad)
        fail_msg("%zu tables have other points per server than libmemcached", bad);
}

/* libmemcached hashes the empty key with md5 like any other (no special case); chash must place
 * it where libmemcached does. */
static void test_empty_key(void **state)
{
    (void)state;
    size_t bad = 0;
    for (int spy = 0; spy < 2; spy++) {
        for (size_t c = 0; c < G.cs.n; c++) {
            const config *cf = &G.cs.c[c];
            const ch_table *t = G.t[spy][c];
            uint32_t want = memcached_generate_hash(G.m[spy][c], "", 0);
            size_t got = ch_lookup(t, "", 0);
            if (want != got && bad++ < SHOW_MISMATCHES)
                print_message("MISMATCH %s [%s] empty key: libmemcached server %u, chash %zu "
                              "(chash key hash %08x, md5(\"\") %08x)\n",
                              cf->name, algo_label(spy), want, got,
                              (uint32_t)ch_key_hash(t, "", 0),
                              memcached_generate_hash_value("", 0, MEMCACHED_HASH_MD5));
        }
    }
    if (bad)
        fail_msg("the empty key is placed differently in %zu configurations", bad);
}

/* "host" alone means port 11211: those ids give libmemcached's answers too. */
static void test_default_port_spelling(void **state)
{
    (void)state;
    size_t bad = 0;
    for (int spy = 0; spy < 2; spy++) {
        for (size_t c = 0; c < G.cs.n; c++) {
            const config *cf = &G.cs.c[c];
            bool any = false;
            for (size_t i = 0; i < cf->n; i++)
                any |= cf->s[i].port == 11211;
            if (!any)
                continue;
            ch_table *t = ch_build(cf, spy, true);
            size_t b = compare_keys(cf, c, spy, G.m[spy][c], t);
            if (b)
                print_message("  (ids of port-11211 servers given as \"host\" alone)\n");
            bad += b != 0;
            ch_table_free(t);
        }
    }
    if (bad)
        fail_msg("%zu configurations differ with port-11211 servers given as \"host\"", bad);
}

/* libmemcached switches to weighted ketama by itself when a server with weight > 1 is added under
 * a consistent distribution (MEMCACHED_BEHAVIOR_KETAMA, i.e. CONSISTENT_KETAMA, or
 * CONSISTENT_KETAMA_SPY), but then keeps its key hash, one_at_a_time by default: the same
 * continuum, keys hashed by one_at_a_time (CH_HASH_TW_ONE_AT_A_TIME). Lists of up to 13 servers
 * with some weight > 1 (each add rebuilds the continuum, slow for long lists). */
static void test_auto_weighted(void **state)
{
    (void)state;
    size_t bad = 0, runs = 0;
    for (int spy = 0; spy < 2; spy++) {
        for (size_t c = 0; c < G.cs.n; c++) {
            const config *cf = &G.cs.c[c];
            bool heavy = false;
            for (size_t i = 0; i < cf->n; i++)
                heavy |= cf->s[i].weight > 1;
            if (!heavy || cf->n < 2 || cf->n > 13)
                continue;
            memcached_st *m = memcached_create(NULL);
            assert_non_null(m);
            memcached_return_t rc;
            if (spy)
                rc = memcached_behavior_set_distribution(
                    m, MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY);
            else
                rc = memcached_behavior_set(m, MEMCACHED_BEHAVIOR_KETAMA, 1);
            assert_int_equal(rc, MEMCACHED_SUCCESS);
            for (size_t i = 0; i < cf->n; i++) {
                const server *sv = &cf->s[i];
                rc = memcached_server_add_with_weight(m, sv->host, (in_port_t)sv->port,
                                                      sv->weight);
                if (rc != MEMCACHED_SUCCESS)
                    fail_msg("%s: memcached_server_add_with_weight: %s", cf->name,
                             memcached_last_error_message(m));
            }
            assert_int_equal(memcached_behavior_get(m, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED), 1);
            assert_int_equal(memcached_behavior_get(m, MEMCACHED_BEHAVIOR_DISTRIBUTION),
                             spy ? MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY
                                 : MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA);
            assert_int_equal(memcached_behavior_get(m, MEMCACHED_BEHAVIOR_HASH),
                             MEMCACHED_HASH_DEFAULT);
            ch_table *t = ch_build_hash(cf, spy, false, CH_HASH_TW_ONE_AT_A_TIME);
            size_t b = compare_keys_hash(cf, c, spy, m, t, MEMCACHED_HASH_DEFAULT);
            if (b)
                print_message("  (weighted ketama switched on by a weight > 1; keys hashed by "
                              "one_at_a_time)\n");
            bad += b != 0;
            runs++;
            ch_table_free(t);
            memcached_free(m);
        }
    }
    print_message("%zu auto-weighted configurations compared\n", runs);
    if (bad)
        fail_msg("%zu auto-weighted configurations differ", bad);
}

/* The answers depend on the list only: a chash table built again from fresh copies of the ids
 * agrees on every key with the first, and libmemcached configured in another order (mode first,
 * then the servers) agrees with the fixture's. */
static void test_rebuild(void **state)
{
    (void)state;
    for (int spy = 0; spy < 2; spy++) {
        for (size_t c = 0; c < G.cs.n; c++) {
            const config *cf = &G.cs.c[c];
            /* Adding 50 or 100 large server structs one by one under the sanitizers is slow:
             * push those lists at once. */
            lm_order order = cf->n <= 13 ? LM_MODE_THEN_ADD : LM_MODE_THEN_PUSH;
            memcached_st *m2 = lm_build(cf, spy, order);
            ch_table *t2 = ch_build(cf, spy, false);
            uint64_t st = 0x72656275696c64ull ^ c;
            unsigned char key[256];
            for (size_t k = 0; k < KEYS / 4; k++) {
                size_t len = make_key(&st, key);
                uint32_t a = memcached_generate_hash(G.m[spy][c], (const char *)key, len);
                uint32_t b = memcached_generate_hash(m2, (const char *)key, len);
                if (a != b)
                    fail_msg("%s [%s]: libmemcached answers depend on configuration order",
                             cf->name, algo_label(spy));
                size_t x = ch_lookup(G.t[spy][c], key, len), y = ch_lookup(t2, key, len);
                if (x != y)
                    fail_msg("%s [%s]: two chash tables over the same list differ on key %zu "
                             "(%zu vs %zu)",
                             cf->name, algo_label(spy), k, x, y);
            }
            ch_table_free(t2);
            memcached_free(m2);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ketama_keys),
        cmocka_unit_test(test_spy_keys),
        cmocka_unit_test(test_ketama_boundaries),
        cmocka_unit_test(test_spy_boundaries),
        cmocka_unit_test(test_points_per_server),
        cmocka_unit_test(test_empty_key),
        cmocka_unit_test(test_default_port_spelling),
        cmocka_unit_test(test_auto_weighted),
        cmocka_unit_test(test_rebuild),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * plan.c — `chash plan OLD NEW`: which share of the key space changes owner, from which node to
 * which. Exact where the library can describe both partitions (ch_table_transfer: two rings, or
 * two maglev tables, with the same hash); measured on sample keys otherwise, and then the sample
 * size is stated. With --key-file, the keys of the file that move.
 *
 * A plan also guards against the changes that remap far more than they seem to: a new hash or
 * vnode count, and a node id spelt differently (the hash of the id places its points).
 */
#define _POSIX_C_SOURCE 200809L
#include "commands.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct warnings {
    char *msg[64];
    size_t n;
} warnings;

static void warn(const cli *c, warnings *w, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A loud warning: on stderr now, and kept for the JSON output. */
static void warn(const cli *c, warnings *w, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    fprintf(stderr, "chash %s: WARNING: %s\n", c->cmd, buf);
    if (w->n < sizeof(w->msg) / sizeof(w->msg[0]))
        w->msg[w->n++] = xstrdup(c, buf);
}

/* An id folded to what a person would read as "the same": lower case, no white space, no
 * leading zeros in runs of digits ("Cache-007 " -> "cache-7"). */
static void fold_id(const char *id, char *out, size_t len)
{
    size_t k = 0;
    for (const char *p = id; *p && k + 1 < len; p++) {
        unsigned char ch = (unsigned char)*p;
        if (isspace(ch))
            continue;
        bool run_start = p == id || !isdigit((unsigned char)p[-1]);
        if (ch == '0' && run_start) {
            const char *q = p;
            while (*q == '0')
                q++;
            if (isdigit((unsigned char)*q)) {
                p = q - 1; /* drop the zeros; the loop moves to the first other digit */
                continue;
            }
        }
        out[k++] = (char)tolower(ch);
    }
    out[k] = '\0';
}

static void check_spelling(const cli *c, const fleet *a, const fleet *b, warnings *w)
{
    char fa[256], fb[256];
    for (size_t i = 0; i < a->n; i++) {
        const char *ida = a->nodes[i].id;
        if (fleet_find(b, ida) >= 0)
            continue; /* kept: nothing to compare */
        for (size_t j = 0; j < b->n; j++) {
            const char *idb = b->nodes[j].id;
            if (fleet_find(a, idb) >= 0)
                continue; /* not a new id */
            fold_id(ida, fa, sizeof(fa));
            fold_id(idb, fb, sizeof(fb));
            if (strcmp(fa, fb) == 0)
                warn(c, w,
                     "node id '%s' in OLD is spelt '%s' in NEW: to the hash these are two "
                     "different nodes, so all of its keys move",
                     ida, idb);
            else if (a->addr[i] && b->addr[j] && strcmp(a->addr[i], b->addr[j]) == 0)
                warn(c, w,
                     "%s is '%s' in OLD and '%s' in NEW: the id (the server's name, else "
                     "host:port) places the keys, so all of its keys move",
                     a->addr[i], ida, idb);
        }
    }
}

static bool differs(const char *x, const char *y)
{
    return (x || y) && (!x || !y || strcmp(x, y) != 0);
}

typedef struct flow {
    size_t from, to;
    double share;
} flow;

static int by_share(const void *x, const void *y)
{
    double a = ((const flow *)x)->share, b = ((const flow *)y)->share;
    return (a < b) - (a > b);
}

static void side_json(json *j, const fleet *f, ch_hash_id hash, uint32_t vnodes)
{
    json_obj(j);
    json_key(j, "source");
    json_str(j, f->source);
    json_key(j, "nodes");
    json_int(j, f->n);
    json_key(j, "hash");
    json_str(j, ch_hash_name(hash));
    json_key(j, "vnodes");
    json_int(j, vnodes);
    json_end(j);
}

/* The warm-up window (chash-proxy's warm_up) within which a share p of the moved keys is read
 * at least once, so copied from its old owner before the window ends: with K keys read
 * uniformly at R reads/s a key waits an exponential time of mean K / R for its first read, so
 * W = -ln(1 - p) K / R. Skewed reads copy the hot keys sooner; the cold tail costs little. */
static const double window_shares[] = {0.9, 0.99, 0.999};

static double window_s(const cli *c, double p)
{
    return -log(1 - p) * (double)c->pool_keys / (double)c->read_rate;
}

static void warm_up_text(const cli *c, double moved)
{
    double mk = moved * (double)c->pool_keys;
    printf("\nwarm_up: %.0f of the pool's %llu keys move; read at %llu/s in all, they are read\n",
           mk, (unsigned long long)c->pool_keys, (unsigned long long)c->read_rate);
    for (size_t i = 0; i < sizeof(window_shares) / sizeof(window_shares[0]); i++) {
        double w = window_s(c, window_shares[i]);
        printf("  %5.1f%% within %.0f s (warm_up: %.0f); the rest, %.0f keys, miss after it\n",
               100 * window_shares[i], w, w * 1000, mk * (1 - window_shares[i]));
    }
}

static void warm_up_json(json *j, const cli *c, double moved)
{
    json_obj(j);
    json_key(j, "pool_keys");
    json_int(j, c->pool_keys);
    json_key(j, "read_rate");
    json_int(j, c->read_rate);
    json_key(j, "moved_keys");
    json_num(j, moved * (double)c->pool_keys);
    json_key(j, "windows");
    json_arr(j);
    for (size_t i = 0; i < sizeof(window_shares) / sizeof(window_shares[0]); i++) {
        json_obj(j);
        json_key(j, "read_share");
        json_num(j, window_shares[i]);
        json_key(j, "warm_up_ms");
        json_num(j, window_s(c, window_shares[i]) * 1000);
        json_end(j);
    }
    json_end(j);
    json_end(j);
}

int cmd_plan(cli *c)
{
    if (c->nodes || c->config)
        cli_usage(c, "give the fleets as arguments: chash plan OLD NEW (a node list or a file)");
    if ((c->pool_keys > 0) != (c->read_rate > 0))
        cli_usage(c, "--pool-keys and --read-rate go together (the window needs both)");
    /* --from/--to: OLD placed by one scheme, NEW by another; NEW may be left out (the same
     * fleet, switched from one scheme to the other). */
    bool schemes = c->from != NULL || c->to != NULL;
    if (c->argc != 2 && !(c->argc == 1 && schemes))
        cli_usage(c, "want two fleets, OLD and NEW (got %d argument%s)", c->argc,
                  c->argc == 1 ? "" : "s");
    if (c->algo && c->from)
        cli_usage(c, "give either --algo or --from (the scheme of OLD)");
    fleet a, b;
    fleet_from_spec(c, "OLD", c->argv[0], &a);
    fleet_from_spec(c, "NEW", c->argv[c->argc - 1], &b);
    ch_algo_id algo = cli_algo1(c, c->from ? c->from : fleet_algo_spec(c, &a, "ring"), "ring");
    /* NEW: --to, else --algo for both, else NEW's own distribution (a config's), else OLD's. */
    ch_algo_id algob = c->to       ? cli_algo1(c, c->to, "ring")
                       : c->algo || c->from || !b.conf_dist ? algo
                                                          : cli_algo1(c, b.conf_dist, "ring");
    ch_hash_id ha = fleet_hash(c, &a);
    ch_hash_id hb = c->new_hash ? cli_hash1(c, c->new_hash) : c->hash ? ha : fleet_hash(c, &b);
    /* A client library's scheme hashes keys its own way, whatever --hash says. */
    ch_hash_id own;
    if (ch_algo_hash(algo, &own) == CH_OK)
        ha = own;
    if (ch_algo_hash(algob, &own) == CH_OK)
        hb = own;
    uint32_t va = 0, vb = 0;
    cli_vnodes(c, c->vnodes ? c->vnodes : "160", &va, 1);
    vb = va;
    if (c->new_vnodes)
        cli_vnodes(c, c->new_vnodes, &vb, 1);

    warnings w = {0};
    if (ha != hb)
        warn(c, &w, "the hash changes (%s -> %s): almost every key moves", ch_hash_name(ha),
             ch_hash_name(hb));
    if (va != vb && algo == CH_ALGO_RING)
        warn(c, &w, "the vnode count changes (%u -> %u): most keys move", va, vb);
    if (algo != algob)
        warn(c, &w, "the placement changes (%s -> %s): almost every key moves",
             ch_algo_name(algo), ch_algo_name(algob));
    else if (a.conf_dist && b.conf_dist && differs(a.conf_dist, b.conf_dist))
        warn(c, &w,
             "the pool's distribution changes (%s -> %s): almost every key moves (this plan "
             "places both with %s)",
             a.conf_dist, b.conf_dist, ch_algo_name(algo));
    if (memcmp(a.hash_tag, b.hash_tag, sizeof(a.hash_tag)) != 0)
        warn(c, &w, "the pool's hash_tag changes: every tagged key may move");
    check_spelling(c, &a, &b, &w);

    ch_options oa = cli_options(c, &a, algo, ha, va), ob = cli_options(c, &b, algob, hb, vb);
    ch_table *ta = cli_build(c, &a, &oa, false), *tb = cli_build(c, &b, &ob, false);

    /* share[i * Nb + j]: the key space owned by OLD's node i and NEW's node j. */
    double *share = xcalloc(c, a.n * b.n, sizeof(*share));
    size_t sample = 0;
    int rc = ch_table_transfer(ta, tb, share);
    if (rc == CH_EUNSUPPORTED) {
        sample = c->keys ? c->keys : 1000000;
        memset(share, 0, a.n * b.n * sizeof(*share));
        cli key_args = *c;
        key_args.key_file = NULL; /* the sample is generated; --key-file lists moves below */
        keysrc ks;
        keys_open(&key_args, &ks, sample);
        progress pg;
        progress_start(&pg, "plan", sample);
        const char *key;
        size_t len;
        while (keys_next(c, &ks, &key, &len)) {
            uint64_t h = ch_key_hash(ta, key, len);
            uint64_t h2 = ha == hb && algo == algob ? h : ch_key_hash(tb, key, len);
            share[ch_lookup_hash(ta, h) * b.n + ch_lookup_hash(tb, h2)] += 1.0;
            if ((ks.done & 0xffff) == 0)
                progress_update(&pg, ks.done);
        }
        progress_end(&pg);
        keys_close(&ks);
        for (size_t i = 0; i < a.n * b.n; i++)
            share[i] /= (double)sample;
    } else if (rc != CH_OK) {
        cli_fail(c, "cannot compare the two tables: %s", ch_strerror(rc));
    }

    /* Moves: pairs of nodes with different ids. */
    size_t *map = xmalloc(c, a.n * sizeof(*map));
    for (size_t i = 0; i < a.n; i++) {
        long j = fleet_find(&b, a.nodes[i].id);
        map[i] = j < 0 ? SIZE_MAX : (size_t)j;
    }
    flow *flows = xmalloc(c, a.n * b.n * sizeof(*flows));
    size_t nflows = 0;
    double moved = 0;
    for (size_t i = 0; i < a.n; i++) {
        for (size_t j = 0; j < b.n; j++) {
            double s = share[i * b.n + j];
            if (map[i] == j || s <= 0)
                continue;
            moved += s;
            flows[nflows++] = (flow){i, j, s};
        }
    }
    qsort(flows, nflows, sizeof(*flows), by_share);
    double theory = min_moved(&a, &b);
    /* A placement that is not consistent (modulo over the servers, a range split): say plainly
     * what the change costs, in keys when the pool's size is known. */
    bool remaps = algo == algob && (ch_algo_flags(algo) & CH_ALGO_F_REMAPS) && moved > 0;
    if (remaps) {
        char keys[96] = "";
        if (c->pool_keys > 0)
            snprintf(keys, sizeof(keys), " (%.0f of the pool's %llu keys)",
                     moved * (double)c->pool_keys, (unsigned long long)c->pool_keys);
        warn(c, &w,
             "%s is not consistent (the key hash modulo the servers): this change moves %.2f%% "
             "of the keys%s, where the least any placement must move is %.2f%%; to change the "
             "fleet without that, move it behind chash-proxy with this distribution, then to a "
             "consistent one with warm_up (docs/COMPATIBILITY.md, \"Moving a fleet that shards "
             "in its clients\")",
             ch_algo_name(algo), 100 * moved, keys, 100 * theory);
    }

    /* --key-file: the keys that move. */
    uint64_t nkeys = 0, nmoved = 0;
    json j;
    if (c->json) {
        json_init(&j, stdout);
        json_obj(&j);
        json_key(&j, "algo");
        json_str(&j, ch_algo_name(algo));
        json_key(&j, "new_algo");
        json_str(&j, ch_algo_name(algob));
        json_key(&j, "old");
        side_json(&j, &a, ha, va);
        json_key(&j, "new");
        side_json(&j, &b, hb, vb);
        json_key(&j, "method");
        json_str(&j, sample ? "sampled" : "exact");
        json_key(&j, "sample_keys");
        sample ? json_int(&j, sample) : json_null(&j);
        json_key(&j, "moved_fraction");
        json_num(&j, moved);
        json_key(&j, "theory");
        json_num(&j, theory);
        json_key(&j, "consistent");
        json_bool(&j, (ch_algo_flags(algob) & CH_ALGO_F_REMAPS) == 0);
        if (c->pool_keys > 0 && c->read_rate > 0) {
            json_key(&j, "warm_up");
            warm_up_json(&j, c, moved);
        }
        json_key(&j, "flows");
        json_arr(&j);
        for (size_t i = 0; i < nflows; i++) {
            json_obj(&j);
            json_key(&j, "from");
            json_str(&j, a.nodes[flows[i].from].id);
            json_key(&j, "to");
            json_str(&j, b.nodes[flows[i].to].id);
            json_key(&j, "fraction");
            json_num(&j, flows[i].share);
            json_end(&j);
        }
        json_end(&j);
        json_key(&j, "warnings");
        json_arr(&j);
        for (size_t i = 0; i < w.n; i++)
            json_str(&j, w.msg[i]);
        json_end(&j);
    }
    if (c->key_file) {
        keysrc ks;
        keys_open(c, &ks, 0);
        if (c->json) {
            json_key(&j, "key_file");
            json_obj(&j);
            json_key(&j, "path");
            json_str(&j, c->key_file);
            json_key(&j, "moves");
            json_arr(&j);
        }
        const char *key;
        size_t len;
        while (keys_next(c, &ks, &key, &len)) {
            size_t from = ch_lookup(ta, key, len), to = ch_lookup(tb, key, len);
            nkeys++;
            if (map[from] == to)
                continue;
            nmoved++;
            if (c->json) {
                /* Keys are text lines; a NUL inside one would end the string early. */
                json_obj(&j);
                json_key(&j, "key");
                json_str(&j, key);
                json_key(&j, "from");
                json_str(&j, a.nodes[from].id);
                json_key(&j, "to");
                json_str(&j, b.nodes[to].id);
                json_end(&j);
            } else {
                fwrite(key, 1, len, stdout);
                printf("\t%s -> %s\n", a.nodes[from].id, b.nodes[to].id);
            }
        }
        keys_close(&ks);
        if (c->json) {
            json_end(&j);
            json_key(&j, "keys");
            json_int(&j, nkeys);
            json_key(&j, "moved");
            json_int(&j, nmoved);
            json_end(&j);
        } else {
            fprintf(stderr, "chash plan: %llu of %llu keys in %s move (%.2f%%)\n",
                    (unsigned long long)nmoved, (unsigned long long)nkeys, c->key_file,
                    nkeys ? 100.0 * (double)nmoved / (double)nkeys : 0.0);
        }
    }
    if (c->json) {
        json_end(&j);
        json_done(&j);
    } else if (!c->key_file) {
        printf("plan: %s, %s", ch_algo_name(algo), ch_hash_name(ha));
        if (algob != algo)
            printf(" -> %s, %s", ch_algo_name(algob), ch_hash_name(hb));
        else if (hb != ha)
            printf(" -> %s", ch_hash_name(hb));
        if (algo == CH_ALGO_RING)
            printf(va == vb ? ", %u vnodes" : ", %u -> %u vnodes", va, vb);
        printf("; %zu -> %zu nodes\n", a.n, b.n);
        if (sample)
            printf("measured on a sample of %zu keys (key:%llu:<i>): %s plans are not exact\n",
                   sample, (unsigned long long)c->seed,
                   algob != algo ? "two-scheme" : ha != hb ? "two-hash" : ch_algo_name(algo));
        else
            printf("exact: from the %s of both tables\n",
                   algo == CH_ALGO_RING ? "ring arcs" : "maglev slots");
        printf("\nmoves %.2f%% of the key space (the least any placement must move: %.2f%%)\n",
               100 * moved, 100 * theory);
        if (remaps) {
            printf("%s is not consistent: %.2f%% of the keys move", ch_algo_name(algo),
                   100 * moved);
            if (c->pool_keys > 0)
                printf(", %.0f of the pool's %llu", moved * (double)c->pool_keys,
                       (unsigned long long)c->pool_keys);
            printf(" (%.1fx the least); docs/COMPATIBILITY.md, \"Moving a fleet that shards in "
                   "its clients\", shows the way round it\n", theory > 0 ? moved / theory : 0.0);
        }
        if (c->pool_keys > 0 && c->read_rate > 0)
            warm_up_text(c, moved);
        size_t shown = nflows <= 25 ? nflows : 20;
        int wa = 4, wb = 2;
        for (size_t i = 0; i < shown; i++) {
            int la = (int)strlen(a.nodes[flows[i].from].id), lb = (int)strlen(b.nodes[flows[i].to].id);
            wa = la > wa ? la : wa;
            wb = lb > wb ? lb : wb;
        }
        if (nflows)
            printf("\n%-*s    %-*s %8s\n", wa, "from", wb, "to", "share");
        for (size_t i = 0; i < shown; i++)
            printf("%-*s -> %-*s %7.3f%%\n", wa, a.nodes[flows[i].from].id, wb,
                   b.nodes[flows[i].to].id, 100 * flows[i].share);
        if (shown < nflows) {
            double rest = 0;
            for (size_t i = shown; i < nflows; i++)
                rest += flows[i].share;
            printf("... and %zu smaller flows, %.3f%% in all (--json lists every one)\n",
                   nflows - shown, 100 * rest);
        }
    }

    for (size_t i = 0; i < w.n; i++)
        free(w.msg[i]);
    free(flows);
    free(map);
    free(share);
    ch_table_free(ta);
    ch_table_free(tb);
    fleet_free(&a);
    fleet_free(&b);
    return 0;
}

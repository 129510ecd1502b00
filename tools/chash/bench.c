/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench.c — `chash bench`: lookups per second for each algorithm x hash. The cost of the hash
 * alone is measured in the same run on the same keys, so the ratio lookup / hash says what the
 * placement adds, independent of the machine.
 */
#include "commands.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK 1024    /* keys per timed pass */
#define MIN_TIME 0.1  /* seconds of passes per algorithm x hash, at least */
#define MIN_PASSES 20 /* and at least this many passes of each kind */

typedef struct keyset {
    char *bytes;
    size_t *off; /* key i is bytes[off[i] .. off[i + 1]) */
    size_t n;
} keyset;

static volatile uint64_t sink; /* keeps the timed loops from being optimised away */

/* ns per key of one pass over keys [from, from + n): lookups (hash + placement) or the hash
 * alone. */
static double pass_ns(const ch_table *t, const keyset *k, size_t from, size_t n, bool lookup)
{
    uint64_t acc = 0;
    double start = now_seconds();
    if (lookup)
        for (size_t i = from; i < from + n; i++)
            acc += ch_lookup(t, k->bytes + k->off[i], k->off[i + 1] - k->off[i]);
    else
        for (size_t i = from; i < from + n; i++)
            acc += ch_key_hash(t, k->bytes + k->off[i], k->off[i + 1] - k->off[i]);
    double el = now_seconds() - start;
    sink += acc;
    return el * 1e9 / (double)n;
}

typedef struct row {
    ch_algo_id algo;
    ch_hash_id hash;
    size_t points;
    double ns, hash_ns;
} row;

int cmd_bench(cli *c)
{
    if (c->argc)
        cli_usage(c, "unexpected argument '%s'", c->argv[0]);
    fleet f;
    fleet_from_cli(c, &f);
    ch_algo_id algos[CH_ALGO_COUNT_];
    ch_hash_id hashes[CH_HASH_COUNT_];
    size_t na = cli_algos(c, c->algo, "all", algos), nh = cli_hashes(c, c->hash, "all", hashes);
    uint32_t vnodes = 0;
    cli_vnodes(c, c->vnodes ? c->vnodes : "160", &vnodes, 1);

    keyset ks = {.n = c->keys ? c->keys : 100000};
    ks.off = xmalloc(c, (ks.n + 1) * sizeof(*ks.off));
    ks.bytes = xmalloc(c, ks.n * 48 + 1); /* "key:<seed>:<i>" is at most 46 bytes */
    keysrc src;
    keys_open(c, &src, ks.n);
    const char *key;
    size_t len, used = 0;
    for (size_t i = 0; keys_next(c, &src, &key, &len); i++) {
        ks.off[i] = used;
        memcpy(ks.bytes + used, key, len);
        used += len;
    }
    ks.off[ks.n] = used;
    keys_close(&src);

    row *rows = xcalloc(c, na * nh, sizeof(*rows));
    size_t nrows = 0;
    progress pg;
    progress_start(&pg, "bench", na * nh);
    for (size_t a = 0; a < na; a++) {
        for (size_t h = 0; h < nh; h++) {
            ch_options opt = cli_options(c, &f, algos[a], hashes[h], vnodes);
            ch_table *t = cli_build(c, &f, &opt, na > 1 || !c->algo);
            progress_update(&pg, a * nh + h + 1);
            if (t == NULL)
                break; /* no weights: the note is printed once; the other hashes skip it too */
            ch_table_info info = {.size = sizeof(info)};
            ch_table_info_get(t, &info);
            row *r = &rows[nrows++];
            *r = (row){.algo = algos[a], .hash = hashes[h], .points = info.points};
            /* Short hash-only and lookup passes over the same chunk of keys alternate,
             * walking the whole key set; each kind keeps its fastest pass. Other load on the
             * machine then slows a few passes, and hardly ever all of them. */
            r->hash_ns = r->ns = INFINITY;
            size_t chunk = ks.n < CHUNK ? ks.n : CHUNK, from = 0;
            double start = now_seconds();
            for (int pass = 0; pass < MIN_PASSES || now_seconds() - start < MIN_TIME; pass++) {
                r->hash_ns = fmin(r->hash_ns, pass_ns(t, &ks, from, chunk, false));
                r->ns = fmin(r->ns, pass_ns(t, &ks, from, chunk, true));
                from = from + 2 * chunk <= ks.n ? from + chunk : 0;
            }
            ch_table_free(t);
        }
    }
    progress_end(&pg);

    if (c->json) {
        json j;
        json_init(&j, stdout);
        json_obj(&j);
        json_key(&j, "keys");
        json_int(&j, ks.n);
        json_key(&j, "results");
        json_arr(&j);
        for (size_t i = 0; i < nrows; i++) {
            json_obj(&j);
            json_key(&j, "algo");
            json_str(&j, ch_algo_name(rows[i].algo));
            json_key(&j, "hash");
            json_str(&j, ch_hash_name(rows[i].hash));
            json_key(&j, "nodes");
            json_int(&j, f.n);
            json_key(&j, "points");
            json_int(&j, rows[i].points);
            json_key(&j, "ns_per_lookup");
            json_num(&j, rows[i].ns);
            json_key(&j, "hash_ns");
            json_num(&j, rows[i].hash_ns);
            json_key(&j, "ratio");
            json_num(&j, rows[i].ns / rows[i].hash_ns);
            json_end(&j);
        }
        json_end(&j);
        json_end(&j);
        json_done(&j);
    } else {
        printf("%zu nodes, %zu distinct keys; ns: the fastest of alternating passes over %d keys "
               "(>= %.0f ms in all)\n\n",
               f.n, ks.n, CHUNK, MIN_TIME * 1e3);
        printf("%-11s %-13s %9s %8s %9s %7s %12s\n", "algo", "hash", "points", "ns/lookup",
               "hash ns", "ratio", "lookups/s");
        for (size_t i = 0; i < nrows; i++)
            printf("%-11s %-13s %9zu %8.1f %9.1f %7.2f %12.3g\n", ch_algo_name(rows[i].algo),
                   ch_hash_name(rows[i].hash), rows[i].points, rows[i].ns, rows[i].hash_ns,
                   rows[i].ns / rows[i].hash_ns, 1e9 / rows[i].ns);
        printf("\nratio: ns per lookup / ns per hash of the same keys, measured in this run.\n");
    }
    free(rows);
    free(ks.bytes);
    free(ks.off);
    fleet_free(&f);
    return 0;
}

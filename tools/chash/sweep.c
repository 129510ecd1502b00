/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sweep.c — `chash sweep`: how even a ring is against the number of virtual nodes per node, and
 * what the table costs in memory. Loads come from the ring's exact arc lengths
 * (ch_table_shares), so there is no sampling noise.
 */
#include "commands.h"

#include <math.h>
#include <stdlib.h>

#define MAX_VNODES 64

static void human_bytes(size_t b, char *buf, size_t len)
{
    if (b < 10 * 1024)
        snprintf(buf, len, "%zu B", b);
    else if (b < 10 * 1024 * 1024)
        snprintf(buf, len, "%.1f KiB", (double)b / 1024);
    else
        snprintf(buf, len, "%.1f MiB", (double)b / (1024 * 1024));
}

int cmd_sweep(cli *c)
{
    if (c->argc)
        cli_usage(c, "unexpected argument '%s'", c->argv[0]);
    fleet f;
    fleet_from_cli(c, &f);
    ch_hash_id hash = fleet_hash(c, &f);
    uint32_t v[MAX_VNODES];
    size_t nv = cli_vnodes(c, c->vnodes ? c->vnodes : "1,10,40,100,160,500,1000", v, MAX_VNODES);

    double wsum = 0;
    for (size_t i = 0; i < f.n; i++)
        wsum += f.nodes[i].weight;
    double *share = xmalloc(c, f.n * sizeof(*share)), *load = xmalloc(c, f.n * sizeof(*load));

    json j;
    if (c->json) {
        json_init(&j, stdout);
        json_obj(&j);
        json_key(&j, "algo");
        json_str(&j, "ring");
        json_key(&j, "hash");
        json_str(&j, ch_hash_name(hash));
        json_key(&j, "nodes");
        json_int(&j, f.n);
        json_key(&j, "results");
        json_arr(&j);
    } else {
        printf("ring balance over %zu nodes, hash %s (exact: the arcs each node owns)\n\n", f.n,
               ch_hash_name(hash));
        printf("%8s %9s %8s %7s %7s %7s %11s\n", "vnodes", "points", "min", "max", "stddev",
               "theory", "memory");
    }
    progress pg;
    progress_start(&pg, "sweep", nv);
    for (size_t s = 0; s < nv; s++) {
        ch_options opt = cli_options(c, &f, CH_ALGO_RING, hash, v[s]);
        ch_table *t = cli_build(c, &f, &opt, false);
        ch_table_info info = {.size = sizeof(info)};
        ch_table_info_get(t, &info);
        ch_table_shares(t, share);
        for (size_t i = 0; i < f.n; i++)
            load[i] = share[i] / (f.nodes[i].weight / wsum);
        double min, max, sd, th = ring_theory_stddev(&f, v[s]);
        load_stats(load, f.n, &min, &max, &sd);
        ch_table_free(t);
        if (c->json) {
            json_obj(&j);
            json_key(&j, "vnodes");
            json_int(&j, v[s]);
            json_key(&j, "points");
            json_int(&j, info.points);
            json_key(&j, "bytes");
            json_int(&j, info.bytes);
            json_key(&j, "min_load");
            json_num(&j, min);
            json_key(&j, "max_load");
            json_num(&j, max);
            json_key(&j, "stddev_load");
            json_num(&j, sd);
            json_key(&j, "theory_stddev");
            json_num(&j, th);
            json_end(&j);
        } else {
            char mem[32];
            human_bytes(info.bytes, mem, sizeof(mem));
            printf("%8u %9zu %8.3f %7.3f %7.3f %7.3f %11s\n", v[s], info.points, min, max, sd,
                   th, mem);
        }
        progress_update(&pg, s + 1);
    }
    progress_end(&pg);
    if (c->json) {
        json_end(&j);
        json_end(&j);
        json_done(&j);
    } else {
        printf("\nmin, max: a node's share of the hash space / its fair share (1.0 = fair);\n"
               "stddev: root mean square distance of those from 1.0;\n"
               "theory: the stddev expected of uniformly random points, ~1/sqrt(vnodes).\n");
    }
    free(share);
    free(load);
    fleet_free(&f);
    return 0;
}

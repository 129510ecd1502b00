/* SPDX-License-Identifier: Apache-2.0 */
/*
 * simulate.c — `chash simulate`: for each algorithm, the keys that change owner when the fleet
 * changes, and the load on each node as a multiple of its fair share.
 *
 * Cost: every key is hashed once (all tables use the same hash, so they share the key hash) and
 * then looked up in two tables per algorithm; keys are processed in blocks so each table's
 * lookups run back to back.
 */
#define _POSIX_C_SOURCE 200809L
#include "commands.h"

#include <stdlib.h>
#include <string.h>

#define BLOCK 4096

/* The new fleet: old minus --remove plus --add. "--add N" (a count) adds N nodes named node-<k>
 * after the old count; ids added must be new and ids removed must exist (exit 2 otherwise). */
static void edit_fleet(const cli *c, const fleet *old, fleet *out)
{
    size_t cap = old->n;
    fleet add[CLI_MAX_LIST];
    for (size_t i = 0; i < c->nadd; i++) {
        const char *spec = c->add[i];
        bool count = true;
        for (const char *p = spec; *p; p++)
            count = count && *p >= '0' && *p <= '9';
        if (count) {
            size_t k = (size_t)cli_u64(c, "--add", spec, 1, CH_MAX_NODES);
            char *list = xmalloc(c, k * 24);
            size_t used = 0;
            list[0] = '\0';
            for (size_t j = 0; j < k; j++)
                used += (size_t)snprintf(list + used, 24, "%snode-%zu", j ? "," : "", cap + j + 1);
            fleet_from_list(c, "--add", list, &add[i]);
            free(list);
        } else {
            fleet_from_list(c, "--add", spec, &add[i]);
        }
        cap += add[i].n;
    }

    *out = (fleet){0};
    out->nodes = xcalloc(c, cap, sizeof(*out->nodes));
    out->addr = xcalloc(c, cap, sizeof(*out->addr));
    out->name = xcalloc(c, cap, sizeof(*out->name));
    out->source = xstrdup(c, "the new fleet");

    bool *gone = xcalloc(c, old->n, sizeof(*gone));
    for (size_t i = 0; i < c->nremove; i++) {
        char *copy = xstrdup(c, c->remove[i]), *save;
        for (char *id = strtok_r(copy, ",", &save); id; id = strtok_r(NULL, ",", &save)) {
            long at = fleet_find(old, id);
            if (at < 0)
                cli_usage(c, "--remove %s: no such node in %s", id, old->source);
            gone[at] = true;
        }
        free(copy);
    }
    for (size_t i = 0; i < old->n; i++) {
        if (gone[i])
            continue;
        size_t k = out->n++;
        out->nodes[k] = (ch_node){xstrdup(c, old->nodes[i].id), old->nodes[i].weight};
        out->addr[k] = old->addr[i] ? xstrdup(c, old->addr[i]) : NULL;
        out->name[k] = old->name[i] ? xstrdup(c, old->name[i]) : NULL;
    }
    free(gone);
    for (size_t i = 0; i < c->nadd; i++) {
        for (size_t j = 0; j < add[i].n; j++) {
            if (fleet_find(out, add[i].nodes[j].id) >= 0)
                cli_usage(c, "--add %s: node '%s' is already in the fleet", c->add[i],
                          add[i].nodes[j].id);
            out->nodes[out->n++] = (ch_node){xstrdup(c, add[i].nodes[j].id), add[i].nodes[j].weight};
        }
        fleet_free(&add[i]);
    }
    if (out->n == 0)
        cli_usage(c, "the change leaves no nodes");
    out->named = old->named;
}

/* Describes the change in a few words: "8 -> 9 nodes (+node-9)", at most 4 ids named. */
static void change_text(const fleet *a, const fleet *b, char *buf, size_t len)
{
    int used = snprintf(buf, len, "%zu -> %zu nodes", a->n, b->n);
    size_t listed = 0;
    for (int pass = 0; pass < 2; pass++) {
        const fleet *x = pass ? a : b, *y = pass ? b : a; /* added, then removed ids */
        for (size_t i = 0; i < x->n; i++) {
            if (fleet_find(y, x->nodes[i].id) >= 0)
                continue;
            if (++listed <= 4 && used >= 0 && (size_t)used < len)
                used += snprintf(buf + used, len - (size_t)used, "%s%c%s",
                                 listed == 1 ? " (" : " ", pass ? '-' : '+', x->nodes[i].id);
        }
    }
    if (listed && used >= 0 && (size_t)used < len)
        snprintf(buf + used, len - (size_t)used, "%s)", listed > 4 ? " ..." : "");
}

typedef struct result {
    ch_algo_id algo;
    ch_table *before, *after; /* after == before without a change */
    uint64_t moved;
    uint64_t *count; /* keys per node of the fleet after the change */
    double *load;
    double min, max, stddev;
} result;

int cmd_simulate(cli *c)
{
    if (c->argc)
        cli_usage(c, "unexpected argument '%s'", c->argv[0]);
    fleet old, nw;
    fleet_from_cli(c, &old);
    bool change = c->to || c->nadd || c->nremove;
    if (c->to)
        fleet_from_spec(c, "--to", c->to, &nw);
    else if (change)
        edit_fleet(c, &old, &nw);
    const fleet *after = change ? &nw : &old;

    ch_algo_id algos[CH_ALGO_COUNT_];
    size_t nalgo = cli_algos(c, fleet_algo_spec(c, &old, "all"), "all", algos);
    ch_hash_id hash = fleet_hash(c, &old);
    uint32_t vnodes = 0;
    cli_vnodes(c, c->vnodes ? c->vnodes : "160", &vnodes, 1);

    result res[CH_ALGO_COUNT_];
    const char *skipped[CH_ALGO_COUNT_];
    size_t nres = 0, nskipped = 0;
    for (size_t i = 0; i < nalgo; i++) {
        ch_options opt = cli_options(c, &old, algos[i], hash, vnodes);
        bool skip = nalgo > 1 || !c->algo;
        result r = {.algo = algos[i]};
        r.before = cli_build(c, &old, &opt, skip);
        r.after = r.before && change ? cli_build(c, &nw, &opt, skip) : r.before;
        if (r.before == NULL || r.after == NULL) {
            if (r.before)
                ch_table_free(r.before);
            skipped[nskipped++] = ch_algo_name(algos[i]);
            continue;
        }
        r.count = xcalloc(c, after->n, sizeof(*r.count));
        r.load = xcalloc(c, after->n, sizeof(*r.load));
        res[nres++] = r;
    }
    if (nres == 0)
        cli_fail(c, "no algorithm can place these nodes");

    /* Old node index -> new node index (SIZE_MAX when removed): an owner is unchanged when the
     * new owner is the same id. */
    size_t *map = xmalloc(c, old.n * sizeof(*map));
    for (size_t i = 0; i < old.n; i++) {
        long j = fleet_find(after, old.nodes[i].id);
        map[i] = j < 0 ? SIZE_MAX : (size_t)j;
    }

    keysrc ks;
    keys_open(c, &ks, c->keys ? c->keys : 1000000);
    progress pg;
    progress_start(&pg, "simulate", ks.total);
    /* A key is hashed once per distinct key hash: a client library's scheme hashes keys its
     * own way (ch_algo_hash), the others with the fleet's hash. own[r]: result r's table hashes
     * differently from the first table, so its keys get their own row of h. */
    bool *own = xcalloc(c, nres, sizeof(*own));
    ch_table_info i0 = {.size = sizeof(i0)};
    ch_table_info_get(res[0].before, &i0);
    for (size_t r = 1; r < nres; r++) {
        ch_table_info ir = {.size = sizeof(ir)};
        ch_table_info_get(res[r].before, &ir);
        own[r] = ir.hash != i0.hash;
    }
    uint64_t *h = xmalloc(c, nres * BLOCK * sizeof(*h));
    uint64_t nkeys = 0;
    for (;;) {
        size_t n = 0;
        const char *key;
        size_t len;
        while (n < BLOCK && keys_next(c, &ks, &key, &len)) {
            h[n] = ch_key_hash(res[0].before, key, len);
            for (size_t r = 1; r < nres; r++)
                if (own[r])
                    h[r * BLOCK + n] = ch_key_hash(res[r].before, key, len);
            n++;
        }
        if (n == 0)
            break;
        nkeys += n;
        for (size_t r = 0; r < nres; r++) {
            result *x = &res[r];
            const uint64_t *hr = own[r] ? h + r * BLOCK : h;
            for (size_t k = 0; k < n; k++) {
                size_t to = ch_lookup_hash(x->after, hr[k]);
                x->count[to]++;
                if (change)
                    x->moved += map[ch_lookup_hash(x->before, hr[k])] != to;
            }
        }
        progress_update(&pg, keys_pos(&ks));
    }
    progress_end(&pg);
    keys_close(&ks);
    free(h);
    free(own);
    free(map);
    if (nkeys == 0)
        cli_fail(c, "no keys in %s", c->key_file);

    double wsum = 0;
    for (size_t i = 0; i < after->n; i++)
        wsum += after->nodes[i].weight;
    for (size_t r = 0; r < nres; r++) {
        for (size_t i = 0; i < after->n; i++)
            res[r].load[i] = (double)res[r].count[i] /
                             ((double)nkeys * after->nodes[i].weight / wsum);
        load_stats(res[r].load, after->n, &res[r].min, &res[r].max, &res[r].stddev);
    }
    double theory = change ? min_moved(&old, after) : 0.0;

    if (c->json) {
        json j;
        json_init(&j, stdout);
        json_obj(&j);
        json_key(&j, "keys");
        json_int(&j, nkeys);
        json_key(&j, "hash");
        json_str(&j, ch_hash_name(hash));
        json_key(&j, "vnodes");
        json_int(&j, vnodes);
        json_key(&j, "old_nodes");
        json_int(&j, old.n);
        json_key(&j, "new_nodes");
        json_int(&j, after->n);
        json_key(&j, "results");
        json_arr(&j);
        for (size_t r = 0; r < nres; r++) {
            json_obj(&j);
            json_key(&j, "algo");
            json_str(&j, ch_algo_name(res[r].algo));
            json_key(&j, "moved_fraction");
            change ? json_num(&j, (double)res[r].moved / (double)nkeys) : json_null(&j);
            json_key(&j, "theory");
            change ? json_num(&j, theory) : json_null(&j);
            json_key(&j, "min_load");
            json_num(&j, res[r].min);
            json_key(&j, "max_load");
            json_num(&j, res[r].max);
            json_key(&j, "stddev_load");
            json_num(&j, res[r].stddev);
            json_key(&j, "loads");
            json_obj(&j);
            for (size_t i = 0; i < after->n; i++) {
                json_key(&j, after->nodes[i].id);
                json_num(&j, res[r].load[i]);
            }
            json_end(&j);
            json_end(&j);
        }
        json_end(&j);
        json_key(&j, "skipped");
        json_arr(&j);
        for (size_t i = 0; i < nskipped; i++)
            json_str(&j, skipped[i]);
        json_end(&j);
        json_end(&j);
        json_done(&j);
    } else {
        char what[256];
        if (change)
            change_text(&old, after, what, sizeof(what));
        else
            snprintf(what, sizeof(what), "%zu nodes, no change", old.n);
        printf("%s; %llu keys%s%s, hash %s, ring %u vnodes\n\n", what, (unsigned long long)nkeys,
               c->key_file ? " from " : "", c->key_file ? c->key_file : "", ch_hash_name(hash),
               vnodes);
        /* The name column fits the longest name (the client schemes' are long). */
        int wn = 12;
        for (size_t r = 0; r < nres; r++) {
            int l = (int)strlen(ch_algo_name(res[r].algo));
            wn = l > wn ? l : wn;
        }
        if (change)
            printf("%-*s %8s %9s", wn, "", "moved", "minimum");
        else
            printf("%-*s", wn, "");
        printf(" %10s %7s %7s\n", "load min", "max", "stddev");
        for (size_t r = 0; r < nres; r++) {
            printf("%-*s", wn, ch_algo_name(res[r].algo));
            if (change)
                printf(" %7.2f%% %8.2f%%", 100.0 * (double)res[r].moved / (double)nkeys,
                       100.0 * theory);
            printf(" %10.3f %7.3f %7.3f\n", res[r].min, res[r].max, res[r].stddev);
        }
        if (after->n <= 24) {
            printf("\n%-20s", change ? "load after" : "load");
            for (size_t r = 0; r < nres; r++)
                printf(" %10s", ch_algo_name(res[r].algo));
            putchar('\n');
            for (size_t i = 0; i < after->n; i++) {
                printf("%-20.20s", after->nodes[i].id);
                for (size_t r = 0; r < nres; r++)
                    printf(" %10.3f", res[r].load[i]);
                putchar('\n');
            }
        }
        if (change)
            printf("\nmoved: keys whose owner changed; minimum: the least any placement must move."
                   "\nload: keys per node after the change / the node's fair share (1.0 = fair);\n"
                   "stddev: root mean square distance of the loads from 1.0.\n");
        else
            printf("\nload: keys per node / the node's fair share (1.0 = fair); stddev: root mean\n"
                   "square distance of the loads from 1.0.\n");
    }

    for (size_t r = 0; r < nres; r++) {
        if (res[r].after != res[r].before)
            ch_table_free(res[r].after);
        ch_table_free(res[r].before);
        free(res[r].count);
        free(res[r].load);
    }
    if (change)
        fleet_free(&nw);
    fleet_free(&old);
    return 0;
}

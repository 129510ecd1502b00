/* SPDX-License-Identifier: Apache-2.0 */
/*
 * registry.c — `chash algorithms` and `chash hashes`: libchash's registries as a user needs
 * them, one name a line with what it takes. The names come from the registry itself
 * (ch_algo_name, ch_hash_name over their counts), so a scheme added there is listed here.
 */
#include "commands.h"

#include <stdio.h>

static void no_args(const cli *c)
{
    if (c->argc != 0)
        cli_usage(c, "takes no arguments (see chash %s --help)", c->cmd);
}

int cmd_algorithms(cli *c)
{
    no_args(c);
    json j;
    if (c->json) {
        json_init(&j, stdout);
        json_obj(&j);
        json_key(&j, "algorithms");
        json_arr(&j);
    }
    for (unsigned i = 0; i < CH_ALGO_COUNT_; i++) {
        ch_algo_id a = (ch_algo_id)i;
        unsigned fl = ch_algo_flags(a);
        ch_hash_id h;
        const char *fixed = ch_algo_hash(a, &h) == CH_OK ? ch_hash_name(h) : NULL;
        double wmax = ch_algo_max_weight(a);
        if (c->json) {
            json_obj(&j);
            json_key(&j, "name");
            json_str(&j, ch_algo_name(a));
            json_key(&j, "weighted");
            json_bool(&j, (fl & CH_ALGO_F_WEIGHTED) != 0);
            json_key(&j, "max_weight");
            if (wmax > 0)
                json_num(&j, wmax);
            else
                json_null(&j);
            json_key(&j, "fixed_hash");
            json_str(&j, fixed);
            json_key(&j, "address_ids");
            json_bool(&j, (fl & CH_ALGO_F_ADDR_IDS) != 0);
            json_key(&j, "keyed");
            json_bool(&j, (fl & CH_ALGO_F_KEYED) != 0);
            json_key(&j, "whole_weights");
            json_bool(&j, (fl & CH_ALGO_F_WHOLE_WEIGHTS) != 0);
            json_key(&j, "consistent");
            json_bool(&j, (fl & CH_ALGO_F_REMAPS) == 0);
            json_key(&j, "limits");
            json_str(&j, ch_algo_limits(a));
            json_end(&j);
            continue;
        }
        printf("%s\t", ch_algo_name(a));
        if (!(fl & CH_ALGO_F_WEIGHTED))
            fputs("no weights", stdout);
        else if (fl & CH_ALGO_F_WHOLE_WEIGHTS)
            fputs("whole weights", stdout);
        else
            fputs("weights", stdout);
        if ((fl & CH_ALGO_F_WEIGHTED) && wmax > 0)
            printf(" up to %.15g", wmax);
        if (fl & CH_ALGO_F_REMAPS)
            fputs(", not consistent", stdout);
        if (fixed)
            printf(", hash %s", fixed);
        if (fl & CH_ALGO_F_ADDR_IDS)
            fputs(", ids host:port", stdout);
        if (fl & CH_ALGO_F_KEYED)
            fputs(", places by the key (lookup and bench only)", stdout);
        putchar('\n');
    }
    if (c->json) {
        json_end(&j);
        json_end(&j);
        json_done(&j);
    }
    return fflush(stdout) == 0 ? 0 : 1;
}

int cmd_hashes(cli *c)
{
    no_args(c);
    json j;
    if (c->json) {
        json_init(&j, stdout);
        json_obj(&j);
        json_key(&j, "hashes");
        json_arr(&j);
    }
    for (unsigned i = 0; i < CH_HASH_COUNT_; i++) {
        ch_hash_id h = (ch_hash_id)i;
        if (c->json) {
            json_obj(&j);
            json_key(&j, "name");
            json_str(&j, ch_hash_name(h));
            json_key(&j, "bits");
            json_int(&j, ch_hash_bits(h));
            json_key(&j, "default");
            json_bool(&j, h == CH_HASH_DEFAULT);
            json_end(&j);
            continue;
        }
        printf("%s\t%u bits%s\n", ch_hash_name(h), ch_hash_bits(h),
               h == CH_HASH_DEFAULT ? ", the default" : "");
    }
    if (c->json) {
        json_end(&j);
        json_end(&j);
        json_done(&j);
    }
    return fflush(stdout) == 0 ? 0 : 1;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config_fuzz.c — libFuzzer target for the config loader (src/config): the input is a YAML
 * file's text, loaded as ch_config_load() would load it (ch__config_load_text). Checks that a
 * load either succeeds with pools whose fields are consistent, or fails with a location inside
 * the text and a message; ASan/UBSan catch the rest. Every membership the proxy would build is
 * built too, as chash-proxy builds it (ch_config_membership_alloc, with table blocks over 64 MiB
 * refused as proxy/pool.c refuses them), which runs the placement library on what the loader
 * kept without spending seconds on the huge tables a start would refuse anyway. The same text is
 * also read as a membership document (what etcd hands chash-proxy, docs/FLEET.md:
 * ch_config_membership_parse), and its membership built the same way.
 */
#include "chash_config.h"
#include "config_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_TABLE_BLOCK ((size_t)64 << 20) /* chash-proxy's PX_MAX_TABLE_BLOCK */

static void *table_alloc(void *ctx, size_t n)
{
    (void)ctx;
    return n > MAX_TABLE_BLOCK ? NULL : malloc(n);
}

static void table_free(void *ctx, void *p, size_t n)
{
    (void)ctx, (void)n;
    free(p);
}

static const ch_allocator table_allocator = {table_alloc, table_free, NULL};

/* Builds p's membership as chash-proxy would, refusing huge table blocks. */
static void build(const ch_conf_pool *p)
{
    if (p->name == NULL || (p->nservers > 0 && p->servers == NULL))
        abort();
    for (size_t s = 0; s < p->nservers; s++)
        if (p->servers[s].addr == NULL || p->servers[s].weight < 1)
            abort();
    ch_membership *m = NULL;
    if (ch_config_membership_alloc(p, &table_allocator, &m) == CH_OK)
        ch_membership_free(m);
}

/* The text as a membership document: parsed whole with servers and an epoch, or refused with a
 * reason and nothing left behind. */
static void as_document(const uint8_t *data, size_t size)
{
    ch_config *doc = NULL;
    ch_config_error err;
    memset(&err, 0, sizeof(err));
    int64_t epoch = -1;
    if (ch_config_membership_parse("p", "etcd://fuzz/k", data, size, &doc, &epoch, &err) != CH_OK) {
        if (doc != NULL || err.message[0] == '\0' || epoch != -1)
            abort();
        return;
    }
    if (doc->npools != 1 || doc->pools[0].nservers == 0 || epoch < 0)
        abort();
    build(&doc->pools[0]);
    ch_config_free(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    as_document(data, size);
    ch_config *cfg = NULL;
    ch_config_error err;
    memset(&err, 0, sizeof(err));
    int rc = ch__config_load_text("fuzz.yml", data, size, &cfg, &err);
    if (rc != CH_OK) {
        if (cfg != NULL || err.message[0] == '\0')
            abort(); /* a failure must say why and leave nothing behind */
        return 0;
    }
    for (size_t i = 0; i < cfg->npools; i++)
        if (cfg->pools[i].nservers > 0) /* none: a pool whose servers come from etcd */
            build(&cfg->pools[i]);
    ch_config_free(cfg);
    return 0;
}

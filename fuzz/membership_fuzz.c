/* SPDX-License-Identifier: Apache-2.0 */
/*
 * membership_fuzz.c — libFuzzer target for the membership document (docs/FLEET.md), what etcd
 * hands chash-proxy, libchash-cache and `chash fleet`, and what the bindings' from_membership
 * reads: YAML in block or flow style, so JSON too. Each input is read alone
 * (ch_config_membership_parse) and applied to a pool of a loaded file
 * (ch_config_membership_doc), and the two must agree. Checks:
 *   - a refusal has a message, a position inside the text (line 1.. its lines + 1, or 0 for a
 *     status without one), leaves nothing behind and changes neither the pool nor the epoch;
 *     one naming the nesting limit has a position;
 *   - an acceptance gives one pool with servers, each with an address and a weight >= 1, an
 *     epoch >= 0, and the pool then holds the same servers in the same order;
 *   - the membership is built (ch_config_membership_err, table blocks over 64 KiB refused) and
 *     a refused build says why: a status and a message that is not empty.
 * ASan and UBSan catch the rest. Seeds in fuzz/corpus/membership.
 */
#include "chash_config.h"
#include "config_internal.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Table blocks over 64 KiB are refused (chash-proxy's bound is 64 MiB): a default maglev table
 * (256 KiB) or a ring of more than about 50 servers then fails at its first allocation, which
 * still exercises the refusal's contract. The document is this target's subject; config_fuzz
 * builds the tables as the proxy does. Building them here took 70% of the time (2,500
 * executions a second instead of the parser's ~10,000). */
#define MAX_TABLE_BLOCK ((size_t)64 << 10)

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

/* The file the documents are applied to: one pool whose servers come from etcd. */
static const char base[] = "a:\n  listen: 127.0.0.1:1\n  redis: true\n"
                           "  membership: etcd://127.0.0.1:2379/k\n  servers:\n"
                           "    - 127.0.0.1:7001:1 s1\n";

/* An upper bound of the lines of the text as YAML counts them: a line ends at \n, \r (\r\n
 * is one break, counted twice here), NEL (U+0085), LS (U+2028) or PS (U+2029). */
static size_t lines_of(const uint8_t *data, size_t size)
{
    size_t n = 1;
    for (size_t i = 0; i < size; i++) {
        bool nel = data[i] == 0x85 && i > 0 && data[i - 1] == 0xC2;
        bool ls_ps = (data[i] == 0xA8 || data[i] == 0xA9) && i > 1 && data[i - 1] == 0x80 &&
                     data[i - 2] == 0xE2;
        n += data[i] == '\n' || data[i] == '\r' || nel || ls_ps;
    }
    return n;
}

/* A refusal: a message, a position inside the text. */
static void check_refusal(const ch_config_error *err, const uint8_t *data, size_t size)
{
    if (err->message[0] == '\0' || err->line > lines_of(data, size) + 1 ||
        (err->line == 0) != (err->column == 0))
        abort();
}

static void build(const ch_conf_pool *p)
{
    ch_membership *m = NULL;
    ch_error err = {.size = sizeof(err)};
    int rc = ch_config_membership_err(p, &table_allocator, &m, &err);
    if (rc == CH_OK) {
        if (m == NULL || ch_membership_size(m) != p->nservers || err.status != CH_OK)
            abort();
        ch_membership_free(m);
    } else if (m != NULL || err.status != rc || err.message[0] == '\0') {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ch_config *doc = NULL;
    ch_config_error err;
    memset(&err, 0, sizeof(err));
    int64_t epoch = -1;
    int rc = ch_config_membership_parse("a", "etcd://fuzz/k", data, size, &doc, &epoch, &err);

    /* The file is loaded once; each accepted document replaces its pool's membership. */
    static ch_config *cfg;
    ch_config_error ferr;
    if (cfg == NULL && ch__config_load_text("f.yml", base, sizeof(base) - 1, &cfg, &ferr) != CH_OK)
        abort();
    ch_conf_pool *pool = &cfg->pools[0];
    const ch_conf_server *servers = pool->servers;
    size_t nservers = pool->nservers;
    ch_config_error derr;
    memset(&derr, 0, sizeof(derr));
    int64_t depoch = -1;
    int drc = ch_config_membership_doc(pool, "etcd://fuzz/k", data, size, &depoch, &derr);
    if (drc != rc || strcmp(derr.message, err.message) != 0)
        abort(); /* alone or applied: the same verdict */

    if (rc != CH_OK) {
        check_refusal(&err, data, size);
        if (doc != NULL || epoch != -1 || depoch != -1 || pool->nservers != nservers ||
            pool->servers != servers)
            abort(); /* nothing behind, the pool as it was */
        if (strstr(err.message, "CH_CONFIG_MAX_DEPTH") != NULL && err.line == 0)
            abort(); /* the nesting limit is told where it is crossed */
        return 0;
    }
    const ch_conf_pool *d = doc != NULL && doc->npools == 1 ? &doc->pools[0] : NULL;
    if (d == NULL || d->nservers == 0 || epoch < 0 || depoch != epoch ||
        pool->nservers != d->nservers)
        abort();
    for (size_t s = 0; s < d->nservers; s++)
        if (d->servers[s].addr == NULL || d->servers[s].weight < 1 ||
            strcmp(d->servers[s].addr, pool->servers[s].addr) != 0)
            abort();
    build(d);
    ch_config_free(doc);
    return 0;
}

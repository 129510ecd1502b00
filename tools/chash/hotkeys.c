/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hotkeys.c — `chash hotkeys`: a chash-proxy's hot keys (GET /-/hotkeys of its admin port), as
 * a table per pool or as the endpoint's JSON cut to --pool and --top.
 */
#include "commands.h"
#include "hotkeys_fetch.h"

#include <stdio.h>
#include <string.h>

#define HK_DEFAULT_TOP 10
#define HK_DEFAULT_TIMEOUT_MS 5000

int cmd_hotkeys(cli *c)
{
    if (c->admin == NULL)
        cli_usage(c, "--admin HOST:PORT is required (the proxy's --metrics-port)");
    if (c->argc > 0)
        cli_usage(c, "unexpected argument '%s'", c->argv[0]);
    hk_doc d;
    char why[600];
    if (hk_fetch(c->admin, c->timeout_ms > 0 ? c->timeout_ms : HK_DEFAULT_TIMEOUT_MS, c->pool,
                 c->top > 0 ? c->top : HK_DEFAULT_TOP, &d, why, sizeof(why)) != 0)
        cli_fail(c, "%s", why);
    if (c->json) {
        printf("%s\n", d.json);
        hk_doc_free(&d);
        return 0;
    }
    for (size_t i = 0; i < d.npools; i++) {
        const hk_pool *p = &d.pools[i];
        printf("%spool %s: %llu requests since start, %zu hot keys shown\n", i > 0 ? "\n" : "",
               p->name, (unsigned long long)p->total, p->nkeys);
        if (p->nkeys == 0)
            continue;
        printf("%-4s %-40s %12s %10s %12s %12s  %s\n", "rank", "key", "rate/s(60s)", "+-error",
               "rate/s(1s)", "count", "server");
        for (size_t k = 0; k < p->nkeys; k++) {
            const hk_key *e = &p->keys[k];
            printf("%-4zu %-40s %12.1f %10.1f %12.1f %12llu  %s\n", k + 1, e->key, e->rate_60s,
                   e->rate_60s_error, e->rate, (unsigned long long)e->count,
                   e->server != NULL ? e->server : "-");
        }
    }
    hk_doc_free(&d);
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dns_answer.c — an answer into a membership document (dns_answer.h).
 */
#include "dns_answer.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static int cmp_str(const char *a, const char *b)
{
    return strcmp(a != NULL ? a : "", b != NULL ? b : "");
}

/* By name (the placement's identity), then port, then address. */
static int server_cmp(const void *pa, const void *pb)
{
    const px_dns_server *a = pa, *b = pb;
    int c = cmp_str(a->name, b->name);
    if (c == 0)
        c = (a->port > b->port) - (a->port < b->port);
    return c != 0 ? c : cmp_str(a->addr, b->addr);
}

/* The length of name without its trailing dot (an absolute DNS name). */
static size_t name_len(const char *name)
{
    size_t l = strlen(name);
    return l > 0 && name[l - 1] == '.' ? l - 1 : l;
}

/* s as a JSON string; the strings here are DNS names, addresses and config values, so only '"'
 * and '\' need escaping (the config loader refused control characters). */
static int json_str(px_buf *out, const char *s, size_t len)
{
    int rc = px_buf_append(out, "\"", 1);
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '"' || s[i] == '\\')
            rc |= px_buf_append(out, "\\", 1);
        rc |= px_buf_append(out, &s[i], 1);
    }
    return rc | px_buf_append(out, "\"", 1);
}

int px_dns_doc(const px_dns_server *servers, size_t n, const ch_conf_pool *pool, px_buf *out)
{
    px_dns_server *v = malloc((n ? n : 1) * sizeof(*v));
    if (v == NULL)
        return -1;
    memcpy(v, servers, n * sizeof(*v));
    qsort(v, n, sizeof(*v), server_cmp);
    int rc = px_buf_append(out, "{\"servers\": [", 13);
    size_t kept = 0;
    for (size_t i = 0, first = 0; i < n; i++) {
        const px_dns_server *s = &v[i];
        bool same_name = i > 0 && s->name != NULL && cmp_str(s->name, v[i - 1].name) == 0;
        if (!same_name)
            first = i; /* v[first, i] share s's name */
        /* A target with several addresses is one server: its first address in sorted order
         * (a pod has one); an exact duplicate is dropped. */
        if (i > 0 && (same_name ? s->port == v[i - 1].port : server_cmp(s, &v[i - 1]) == 0))
            continue;
        size_t last = i;
        while (s->name != NULL && last + 1 < n && cmp_str(v[last + 1].name, s->name) == 0)
            last++;
        bool twice = s->name != NULL && v[first].port != v[last].port;
        bool six = strchr(s->addr, ':') != NULL;
        px_buf one = {0};
        rc |= px_buf_printf(&one, "%s%s%s:%d:1", six ? "[" : "", s->addr, six ? "]" : "", s->port);
        if (s->name != NULL) {
            rc |= px_buf_printf(&one, " %.*s", (int)name_len(s->name), s->name);
            if (twice)
                rc |= px_buf_printf(&one, ":%d", s->port);
        }
        rc |= px_buf_append(out, kept > 0 ? ", " : "", kept > 0 ? 2 : 0);
        rc |= json_str(out, one.p != NULL ? one.p : "", one.len);
        px_buf_free(&one);
        kept++;
    }
    rc |= px_buf_append(out, "], \"hash\": ", 11);
    rc |= json_str(out, pool->hash, strlen(pool->hash));
    rc |= px_buf_append(out, ", \"distribution\": ", 18);
    rc |= json_str(out, pool->distribution, strlen(pool->distribution));
    if (pool->hash_tag != NULL) {
        rc |= px_buf_append(out, ", \"hash_tag\": ", 14);
        rc |= json_str(out, pool->hash_tag, strlen(pool->hash_tag));
    }
    rc |= px_buf_append(out, "}", 1);
    free(v);
    return rc != 0 ? -1 : 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hotkeys_fetch.c — hk_fetch (hotkeys_fetch.h): one GET with libcurl's easy interface, the
 * answer parsed and cut with jansson (its nesting bounded first, as etcd's answers are).
 */
#include "hotkeys_fetch.h"

#include <etcd_msg.h>

#include <curl/curl.h>
#include <jansson.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HK_MAX_BODY (64u * 1024 * 1024)

typedef struct body {
    char *p;
    size_t len, cap; /* cap doubles: a body of n bytes costs O(n) copying, not O(n^2) */
} body;

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
    body *b = arg;
    size_t add = size * n;
    if (b->len + add > HK_MAX_BODY)
        return 0;
    if (b->len + add + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + add + 1)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (q == NULL)
            return 0;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, add);
    b->len += add;
    b->p[b->len] = '\0';
    return add;
}

static char *dup_str(const json_t *v)
{
    if (!json_is_string(v))
        return NULL;
    size_t n = json_string_length(v);
    char *s = malloc(n + 1);
    if (s != NULL) {
        memcpy(s, json_string_value(v), n);
        s[n] = '\0';
    }
    return s;
}

static double num(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : 0;
}

/* The keys of pool object po, its first top of them kept in po too. */
static int take_pool(json_t *po, size_t top, hk_pool *out)
{
    out->name = dup_str(json_object_get(po, "pool"));
    out->total = (uint64_t)num(po, "total");
    json_t *keys = json_object_get(po, "keys");
    if (out->name == NULL || !json_is_array(keys))
        return -1;
    while (json_array_size(keys) > top)
        json_array_remove(keys, json_array_size(keys) - 1);
    out->nkeys = json_array_size(keys);
    out->keys = calloc(out->nkeys + 1, sizeof(*out->keys));
    if (out->keys == NULL)
        return -1;
    for (size_t i = 0; i < out->nkeys; i++) {
        const json_t *e = json_array_get(keys, i);
        hk_key *k = &out->keys[i];
        k->key = dup_str(json_object_get(e, "key"));
        k->hash = dup_str(json_object_get(e, "key_hash"));
        k->server = dup_str(json_object_get(e, "server"));
        k->truncated = json_is_true(json_object_get(e, "truncated"));
        k->rate = num(e, "rate");
        k->rate_error = num(e, "rate_error");
        k->rate_60s = num(e, "rate_60s");
        k->rate_60s_error = num(e, "rate_60s_error");
        k->count = (uint64_t)num(e, "count");
        k->count_error = (uint64_t)num(e, "count_error");
        if (k->key == NULL || k->hash == NULL)
            return -1;
    }
    return 0;
}

int hk_fetch(const char *admin, uint64_t timeout_ms, const char *pool, size_t top, hk_doc *d,
             char *why, size_t whylen)
{
    memset(d, 0, sizeof(*d));
    char url[512];
    snprintf(url, sizeof(url), "http://%s/-/hotkeys", admin);
    CURL *curl = curl_easy_init();
    if (curl == NULL) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    body b = {0};
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    CURLcode rc = curl_easy_perform(curl);
    long code = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(curl);
    if (rc != CURLE_OK || code != 200) {
        snprintf(why, whylen, "%s: %s", url,
                 rc != CURLE_OK ? curl_easy_strerror(rc) : code == 404 ? "404 (not a chash-proxy "
                                                                         "with hot keys?)"
                                                                       : "not 200");
        free(b.p);
        return -1;
    }
    size_t deep = ch__json_too_deep(b.p != NULL ? b.p : "", b.len, CH__JSON_MAX_DEPTH);
    if (deep != SIZE_MAX) {
        snprintf(why, whylen, "%s: JSON nested deeper than %d levels, the limit, at byte %zu", url,
                 CH__JSON_MAX_DEPTH, deep);
        free(b.p);
        return -1;
    }
    json_error_t err;
    json_t *doc = json_loadb(b.p != NULL ? b.p : "", b.len, 0, &err);
    free(b.p);
    json_t *pools = json_object_get(doc, "pools");
    if (doc == NULL || !json_is_array(pools)) {
        snprintf(why, whylen, "%s: not the hot-keys JSON: %s", url, doc == NULL ? err.text : "");
        json_decref(doc);
        return -1;
    }
    d->window_ms = (uint64_t)num(doc, "window_ms");
    for (size_t i = json_array_size(pools); i-- > 0;) {
        const json_t *name = json_object_get(json_array_get(pools, i), "pool");
        if (pool != NULL && !(json_is_string(name) && strcmp(json_string_value(name), pool) == 0))
            json_array_remove(pools, i);
    }
    if (pool != NULL && json_array_size(pools) == 0) {
        snprintf(why, whylen, "%s: no pool %s", url, pool);
        json_decref(doc);
        return -1;
    }
    d->npools = json_array_size(pools);
    d->pools = calloc(d->npools + 1, sizeof(*d->pools));
    int ok = d->pools != NULL ? 0 : -1;
    for (size_t i = 0; ok == 0 && i < d->npools; i++)
        ok = take_pool(json_array_get(pools, i), top, &d->pools[i]);
    if (ok == 0)
        d->json = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(doc);
    if (ok != 0 || d->json == NULL) {
        snprintf(why, whylen, "%s: a pool or key without its fields, or out of memory", url);
        hk_doc_free(d);
        return -1;
    }
    return 0;
}

void hk_doc_free(hk_doc *d)
{
    for (size_t i = 0; d->pools != NULL && i < d->npools; i++) {
        for (size_t k = 0; d->pools[i].keys != NULL && k < d->pools[i].nkeys; k++) {
            free(d->pools[i].keys[k].key);
            free(d->pools[i].keys[k].hash);
            free(d->pools[i].keys[k].server);
        }
        free(d->pools[i].keys);
        free(d->pools[i].name);
    }
    free(d->pools);
    free(d->json);
    memset(d, 0, sizeof(*d));
}

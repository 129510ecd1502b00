/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_http.c — POSTs to etcd's v3 JSON gateway with libcurl's easy interface (etcd_http.h).
 */
#include "etcd_http.h"

#include <curl/curl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growing answer buffer; on allocation failure `failed` is set and curl is told to stop. */
typedef struct buf {
    char *p;
    size_t len, cap;
    int failed;
} buf;

static size_t on_data(char *data, size_t size, size_t n, void *arg)
{
    buf *b = arg;
    size_t add = size * n;
    if (b->len + add + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + add + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            b->failed = 1;
            return 0;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, add);
    b->len += add;
    b->p[b->len] = '\0';
    return add;
}

int etcd_http_open(etcd_http *e, const char *endpoint, long timeout_ms, char *why, size_t whylen)
{
    memset(e, 0, sizeof(*e));
    /* curl_global_init is not thread-safe; the CLI calls this from its one thread. */
    static int inited;
    if (!inited) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
            snprintf(why, whylen, "libcurl could not be initialized");
            return -1;
        }
        inited = 1;
    }
    if ((size_t)snprintf(e->base, sizeof(e->base), "http://%s", endpoint) >= sizeof(e->base)) {
        snprintf(why, whylen, "etcd endpoint too long: %s", endpoint);
        return -1;
    }
    e->timeout_ms = timeout_ms;
    if ((e->curl = curl_easy_init()) == NULL) {
        snprintf(why, whylen, "libcurl could not make a handle");
        return -1;
    }
    return 0;
}

int etcd_http_post(etcd_http *e, const char *path, const char *body, char **resp, size_t *len,
                   char *why, size_t whylen)
{
    char url[400];
    snprintf(url, sizeof(url), "%s%s", e->base, path);
    CURL *h = e->curl;
    buf b = {0};
    char err[CURL_ERROR_SIZE] = "";
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, err);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, e->timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, e->timeout_ms);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
    CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(hdr);
    if (rc != CURLE_OK || b.failed) {
        snprintf(why, whylen, "etcd at %s: %s", url,
                 b.failed ? "out of memory" : err[0] ? err : curl_easy_strerror(rc));
        free(b.p);
        return -1;
    }
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (b.p == NULL || (status != 200 && b.p[0] != '{')) {
        /* Not the gateway (another server on that port, a proxy's error page). */
        snprintf(why, whylen, "etcd at %s: HTTP %ld without a JSON answer", url, status);
        free(b.p);
        return -1;
    }
    *resp = b.p;
    *len = b.len;
    return 0;
}

void etcd_http_close(etcd_http *e)
{
    if (e->curl != NULL)
        curl_easy_cleanup(e->curl);
    e->curl = NULL;
}

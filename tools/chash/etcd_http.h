/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_http.h — one etcd endpoint over its v3 JSON gateway, with libcurl's easy interface:
 * POST a JSON body to http://host:port/v3/..., get the answer's body back. Blocking, one
 * request at a time, every request bounded by a timeout. The bodies and their parsing are
 * src/fleet's (etcd_msg.h); this file only moves bytes.
 */
#ifndef CHASH_ETCD_HTTP_H
#define CHASH_ETCD_HTTP_H

#include <stddef.h>

typedef struct etcd_http {
    void *curl;        /* CURL *, reused so its connection is kept alive between requests */
    char base[300];    /* "http://host:port" */
    long timeout_ms;   /* each request's whole time, connecting included */
} etcd_http;

/* Opens an endpoint "host:port" (an IPv6 host in brackets). Returns 0, or -1 with why. */
int etcd_http_open(etcd_http *e, const char *endpoint, long timeout_ms, char *why, size_t whylen);

/* POSTs body to base + path (e.g. "/v3/kv/range"). Returns 0 and *resp (malloc'd, NUL-
 * terminated, *len bytes; the caller frees it) for any HTTP answer, the gateway's error answers
 * included (they carry a JSON error its parsers report); -1 with why, which names the URL, when
 * nothing was answered (refused, timed out, ...). */
int etcd_http_post(etcd_http *e, const char *path, const char *body, char **resp, size_t *len,
                   char *why, size_t whylen);

void etcd_http_close(etcd_http *e);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hotkeys_fetch.h — GET /-/hotkeys of a chash-proxy's admin port (libcurl) and its JSON
 * (jansson) as plain structs, for `chash hotkeys` (hotkeys.c). Its own file because jansson's
 * names and cli.h's JSON writer's overlap.
 */
#ifndef CHASH_HOTKEYS_FETCH_H
#define CHASH_HOTKEYS_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct hk_key {
    char *key;        /* UTF-8 as the endpoint gives it (a byte >= 0x80 as U+0080..U+00FF) */
    char *hash;       /* 16 hex digits */
    char *server;     /* NULL: unknown (a key longer than the 250 bytes kept) */
    bool truncated;
    double rate, rate_error, rate_60s, rate_60s_error;
    uint64_t count, count_error;
} hk_key;

typedef struct hk_pool {
    char *name;
    uint64_t total;
    hk_key *keys;
    size_t nkeys;
} hk_pool;

typedef struct hk_doc {
    uint64_t window_ms;
    hk_pool *pools;
    size_t npools;
    char *json; /* the document cut to the pool and top asked for, one line */
} hk_doc;

/* Fetches http://admin/-/hotkeys within timeout_ms, keeping pool `pool` only (NULL: all) and
 * its first `top` keys. 0, or -1 with the reason in why. */
int hk_fetch(const char *admin, uint64_t timeout_ms, const char *pool, size_t top, hk_doc *d,
             char *why, size_t whylen);
void hk_doc_free(hk_doc *d);

#endif /* CHASH_HOTKEYS_FETCH_H */

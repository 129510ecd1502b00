/* SPDX-License-Identifier: Apache-2.0 */
/*
 * buf.c — growable byte buffers and an intrusive list, the two containers the proxy needs.
 */
#include "buf.h"

#include <stdint.h>
#include <stdio.h>

#include <stdlib.h>
#include <string.h>

uint64_t px_mem_held;
uint64_t px_mem_budget;

int px_buf_reserve(px_buf *b, size_t extra)
{
    if (b->cap - b->len >= extra)
        return 0;
    if (extra > SIZE_MAX / 2 - b->len)
        return -1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < extra)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (p == NULL)
        return -1;
    PX_MEM_ADD(cap - b->cap);
    b->p = p;
    b->cap = cap;
    return 0;
}

int px_buf_append(px_buf *b, const void *data, size_t len)
{
    if (len == 0)
        return 0;
    if (px_buf_reserve(b, len) != 0)
        return -1;
    memcpy(b->p + b->len, data, len);
    b->len += len;
    return 0;
}

int px_buf_printf(px_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || px_buf_reserve(b, (size_t)n + 1) != 0)
        return -1;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void px_buf_consume(px_buf *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
        return;
    }
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
}

void px_buf_free(px_buf *b)
{
    if (b->p == NULL)
        return; /* nothing held: no atomic on the shared count */
    PX_MEM_SUB(b->cap);
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* ---- the block cache ---------------------------------------------------------------------- */

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
/* A kept block is poisoned but for its link, so a use after px_cache_free is still reported. */
#define CACHE_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define CACHE_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define CACHE_POISON(p, n) ((void)(p), (void)(n))
#define CACHE_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define CACHE_CLASSES 5u /* 64 << k bytes, k < CACHE_CLASSES; 64 << 4 == PX_CACHE_MAX */

typedef struct cache_block {
    struct cache_block *next;
} cache_block;

/* This thread's kept blocks: a list and its length per size class. */
static __thread cache_block *cache_head[CACHE_CLASSES];
static __thread unsigned cache_len[CACHE_CLASSES];

static unsigned cache_class(size_t size)
{
    unsigned k = 0;
    while ((64u << k) < size)
        k++;
    return k;
}

void *px_cache_alloc(size_t size)
{
    if (size > PX_CACHE_MAX)
        return malloc(size);
    unsigned k = cache_class(size);
    cache_block *b = cache_head[k];
    if (b == NULL)
        return malloc(64u << k);
    cache_head[k] = b->next;
    cache_len[k]--;
    CACHE_UNPOISON(b, 64u << k);
    return b;
}

void *px_cache_calloc(size_t size)
{
    void *p = px_cache_alloc(size);
    if (p != NULL)
        memset(p, 0, size);
    return p;
}

void px_cache_free(void *p, size_t size)
{
    if (p == NULL)
        return;
    if (size > PX_CACHE_MAX) {
        free(p);
        return;
    }
    unsigned k = cache_class(size);
    if (cache_len[k] >= PX_CACHE_KEEP) {
        free(p);
        return;
    }
    cache_block *b = p;
    b->next = cache_head[k];
    cache_head[k] = b;
    cache_len[k]++;
    CACHE_POISON((char *)b + sizeof(*b), (64u << k) - sizeof(*b));
}

void px_cache_drain(void)
{
    for (unsigned k = 0; k < CACHE_CLASSES; k++) {
        while (cache_head[k] != NULL) {
            cache_block *b = cache_head[k];
            cache_head[k] = b->next;
            CACHE_UNPOISON(b, 64u << k);
            free(b);
        }
        cache_len[k] = 0;
    }
}

void px_dl_init(px_dl *head)
{
    head->prev = head->next = head;
}

void px_dl_push(px_dl *head, px_dl *node)
{
    node->prev = head->prev;
    node->next = head;
    head->prev->next = node;
    head->prev = node;
}

void px_dl_remove(px_dl *node)
{
    if (node->next == NULL)
        return;
    node->prev->next = node->next;
    node->next->prev = node->prev;
    node->next = node->prev = NULL;
}

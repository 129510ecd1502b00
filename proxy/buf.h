/* SPDX-License-Identifier: Apache-2.0 */
/*
 * buf.h — the two containers the proxy needs: a growable byte buffer and an intrusive list.
 * Protocol-blind: nothing here knows RESP or memcached.
 */
#ifndef CHASH_PROXY_BUF_H
#define CHASH_PROXY_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growable byte buffer; p is NULL until the first append. */
typedef struct px_buf {
    char *p;
    size_t len, cap;
} px_buf;

/* The bytes the process holds in px_bufs (their capacity) and requests (request.c): what the
 * memory budget (--max-memory) bounds. A relaxed atomic: every thread adds and subtracts. */
extern uint64_t px_mem_held;
#define PX_MEM_ADD(n) ((void)__atomic_fetch_add(&px_mem_held, (uint64_t)(n), __ATOMIC_RELAXED))
#define PX_MEM_SUB(n) ((void)__atomic_fetch_sub(&px_mem_held, (uint64_t)(n), __ATOMIC_RELAXED))
/* The budget (0: none), set once at start; whether the bytes held are over it. */
extern uint64_t px_mem_budget;
static inline bool px_mem_over(void)
{
    return px_mem_budget > 0 && __atomic_load_n(&px_mem_held, __ATOMIC_RELAXED) > px_mem_budget;
}

int px_buf_reserve(px_buf *b, size_t extra); /* 0, or -1 when out of memory */
int px_buf_append(px_buf *b, const void *data, size_t len);
int px_buf_printf(px_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void px_buf_consume(px_buf *b, size_t n); /* drops the first n bytes */
void px_buf_free(px_buf *b);

/* Small blocks kept for reuse, per thread: the data path allocates a request and a fragment per
 * client request and frees them a few hundred microseconds later, so a thread keeps the blocks
 * it frees (up to PX_CACHE_KEEP per size class: 64, 128, 256, 512 and 1024 bytes) and hands them
 * out again instead of going to malloc. A block may be freed on another thread than the one that
 * allocated it: it then joins that thread's cache. A size over PX_CACHE_MAX goes to malloc and
 * free. Cost: a list push or pop; at most PX_CACHE_KEEP x 1984 bytes (about 4 MB) kept per
 * thread, not counted in px_mem_held (only blocks in use are). */
#define PX_CACHE_MAX 1024u
#define PX_CACHE_KEEP 1024u
/* size bytes, zeroed; NULL when out of memory. */
void *px_cache_calloc(size_t size);
/* size bytes, not zeroed; NULL when out of memory. */
void *px_cache_alloc(size_t size);
/* Frees p, allocated by px_cache_calloc(size) or px_cache_alloc(size) with the same size. p may
 * be NULL. */
void px_cache_free(void *p, size_t size);
/* Frees the blocks the calling thread keeps: a worker's thread, before it ends. */
void px_cache_drain(void);

/* An intrusive circular doubly linked list; a node is unlinked when next == NULL. */
typedef struct px_dl {
    struct px_dl *prev, *next;
} px_dl;
void px_dl_init(px_dl *head);
void px_dl_push(px_dl *head, px_dl *node);
void px_dl_remove(px_dl *node); /* no-op on an unlinked node */
#define PX_CONTAINER(ptr, type, field) ((type *)(void *)((char *)(ptr)-offsetof(type, field)))

#endif /* CHASH_PROXY_BUF_H */

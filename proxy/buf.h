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

/* An intrusive circular doubly linked list; a node is unlinked when next == NULL. */
typedef struct px_dl {
    struct px_dl *prev, *next;
} px_dl;
void px_dl_init(px_dl *head);
void px_dl_push(px_dl *head, px_dl *node);
void px_dl_remove(px_dl *node); /* no-op on an unlinked node */
#define PX_CONTAINER(ptr, type, field) ((type *)(void *)((char *)(ptr)-offsetof(type, field)))

#endif /* CHASH_PROXY_BUF_H */

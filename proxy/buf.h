/*
 * buf.h — the two containers the proxy needs: a growable byte buffer and an intrusive list.
 * Protocol-blind: nothing here knows RESP or memcached.
 */
#ifndef CHASH_PROXY_BUF_H
#define CHASH_PROXY_BUF_H

#include <stdarg.h>
#include <stddef.h>

/* A growable byte buffer; p is NULL until the first append. */
typedef struct px_buf {
    char *p;
    size_t len, cap;
} px_buf;

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

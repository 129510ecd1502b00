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
    PX_MEM_SUB(b->cap);
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
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

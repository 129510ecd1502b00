/* SPDX-License-Identifier: Apache-2.0 */
/*
 * redir.c — the pool's client ids and each worker's inbox of redirected invalidations
 * (redir.h).
 *
 * Invariants (under r->lock):
 * - the table is open addressing on the id, at most half full (tombstones counted), so a probe
 *   run ends; an entry's handle is dereferenced only by its worker (in px_redir_drain);
 * - an inbox holds records [id u64][len u32][key], len NULL_2 or NULL_3 for a flush, at most
 *   PX_REDIR_INBOX_BYTES of them; a target whose record did not fit has lost set, and
 *   inbox[w].lost counts those of worker w: each gets a flush at the drain.
 */
#include "redir.h"

#include "buf.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define EMPTY 0u   /* ids start at 1 */
#define GONE UINT64_MAX
#define NULL_2 UINT32_MAX
#define NULL_3 (UINT32_MAX - 1u)

typedef struct slot {
    uint64_t id;
    void *client;
    unsigned w;
    bool lost, lost3; /* lost3: the flush owed is written with RESP3's null */
} slot;

typedef struct inbox {
    uv_async_t *wake;
    px_buf q;
    size_t lost;
} inbox;

struct px_redir {
    pthread_mutex_t lock;
    slot *at;
    size_t cap, used; /* used: live and gone */
    inbox *in;
    unsigned nw;
};

px_redir *px_redir_new(unsigned nworkers)
{
    px_redir *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    r->in = calloc(nworkers ? nworkers : 1, sizeof(*r->in));
    if (r->in == NULL) {
        free(r);
        return NULL;
    }
    r->nw = nworkers;
    pthread_mutex_init(&r->lock, NULL);
    return r;
}

void px_redir_free(px_redir *r)
{
    if (r == NULL)
        return;
    for (unsigned i = 0; i < r->nw; i++)
        px_buf_free(&r->in[i].q);
    PX_MEM_SUB(r->cap * sizeof(slot));
    free(r->at);
    free(r->in);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

void px_redir_wake_on(px_redir *r, unsigned w, uv_async_t *wake)
{
    if (r == NULL || w >= r->nw)
        return;
    pthread_mutex_lock(&r->lock);
    r->in[w].wake = wake;
    pthread_mutex_unlock(&r->lock);
}

static size_t home(const px_redir *r, uint64_t id)
{
    return (size_t)((id * 0x9E3779B97F4A7C15ull) >> 20) & (r->cap - 1);
}

static slot *find(px_redir *r, uint64_t id)
{
    if (r->cap == 0)
        return NULL;
    for (size_t p = home(r, id); r->at[p].id != EMPTY; p = (p + 1) & (r->cap - 1))
        if (r->at[p].id == id)
            return &r->at[p];
    return NULL;
}

static int grow(px_redir *r, size_t live)
{
    size_t cap = 64;
    while (cap < live * 4)
        cap *= 2;
    slot *at = calloc(cap, sizeof(*at));
    if (at == NULL)
        return -1;
    slot *old = r->at;
    size_t ocap = r->cap;
    r->at = at;
    r->cap = cap;
    r->used = 0;
    for (size_t i = 0; i < ocap; i++) {
        if (old[i].id == EMPTY || old[i].id == GONE)
            continue;
        size_t p = home(r, old[i].id);
        while (at[p].id != EMPTY)
            p = (p + 1) & (cap - 1);
        at[p] = old[i];
        r->used++;
    }
    PX_MEM_ADD(cap * sizeof(slot));
    PX_MEM_SUB(ocap * sizeof(slot));
    free(old);
    return 0;
}

int px_redir_join(px_redir *r, uint64_t id, unsigned w, void *client)
{
    if (id == EMPTY || id == GONE || w >= r->nw)
        return -1;
    pthread_mutex_lock(&r->lock);
    int rc = 0;
    if ((r->used + 1) * 2 > r->cap && grow(r, r->used + 1) != 0) {
        rc = -1;
    } else {
        size_t p = home(r, id);
        while (r->at[p].id != EMPTY && r->at[p].id != GONE)
            p = (p + 1) & (r->cap - 1);
        if (r->at[p].id == EMPTY)
            r->used++;
        r->at[p] = (slot){id, client, w, false, false};
    }
    pthread_mutex_unlock(&r->lock);
    return rc;
}

void px_redir_leave(px_redir *r, uint64_t id)
{
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->lock);
    slot *s = find(r, id);
    if (s != NULL) {
        if (s->lost)
            r->in[s->w].lost--;
        *s = (slot){.id = GONE};
    }
    pthread_mutex_unlock(&r->lock);
}

bool px_redir_exists(px_redir *r, uint64_t id)
{
    if (r == NULL || id == EMPTY || id == GONE)
        return false;
    pthread_mutex_lock(&r->lock);
    bool yes = find(r, id) != NULL;
    pthread_mutex_unlock(&r->lock);
    return yes;
}

bool px_redir_post(px_redir *r, uint64_t id, const char *key, size_t len, bool null_resp3)
{
    if (r == NULL || id == EMPTY || id == GONE)
        return false;
    pthread_mutex_lock(&r->lock);
    slot *s = find(r, id);
    if (s == NULL) {
        pthread_mutex_unlock(&r->lock);
        return false;
    }
    inbox *in = &r->in[s->w];
    if (!s->lost) {
        uint32_t l = key == NULL ? (null_resp3 ? NULL_3 : NULL_2) : (uint32_t)len;
        size_t n = sizeof(id) + sizeof(l) + (key ? len : 0), was = in->q.len;
        if (len >= NULL_3 || was + n > PX_REDIR_INBOX_BYTES ||
            px_buf_append(&in->q, &id, sizeof(id)) != 0 ||
            px_buf_append(&in->q, &l, sizeof(l)) != 0 ||
            (key != NULL && px_buf_append(&in->q, key, len) != 0)) {
            in->q.len = was; /* a partial record cut off */
            s->lost = true;  /* its next delivery is a flush */
            s->lost3 = null_resp3;
            in->lost++;
        }
    }
    if (in->wake != NULL) /* under the lock: the worker's stop clears it before closing it */
        uv_async_send(in->wake);
    pthread_mutex_unlock(&r->lock);
    return true;
}

/* The handle of id if it is still a client of worker w, else NULL. */
static void *handle(px_redir *r, uint64_t id, unsigned w)
{
    pthread_mutex_lock(&r->lock);
    slot *s = find(r, id);
    void *c = s != NULL && s->w == w ? s->client : NULL;
    pthread_mutex_unlock(&r->lock);
    return c;
}

void px_redir_drain(px_redir *r, unsigned w, px_redir_deliver fn)
{
    if (r == NULL || w >= r->nw)
        return;
    pthread_mutex_lock(&r->lock);
    px_buf q = r->in[w].q;
    r->in[w].q = (px_buf){0};
    size_t nlost = r->in[w].lost;
    uint64_t *lost = NULL;
    bool *lost3 = NULL;
    size_t k = 0;
    if (nlost > 0 && (lost = malloc(nlost * sizeof(*lost))) != NULL &&
        (lost3 = malloc(nlost * sizeof(*lost3))) != NULL) {
        for (size_t i = 0; i < r->cap && k < nlost; i++)
            if (r->at[i].id != EMPTY && r->at[i].id != GONE && r->at[i].w == w &&
                r->at[i].lost) {
                r->at[i].lost = false;
                lost3[k] = r->at[i].lost3;
                lost[k++] = r->at[i].id;
            }
        r->in[w].lost = 0;
    }
    pthread_mutex_unlock(&r->lock);
    size_t off = 0;
    while (off + sizeof(uint64_t) + sizeof(uint32_t) <= q.len) {
        uint64_t id;
        uint32_t l;
        memcpy(&id, q.p + off, sizeof(id));
        memcpy(&l, q.p + off + sizeof(id), sizeof(l));
        off += sizeof(id) + sizeof(l);
        bool null = l == NULL_2 || l == NULL_3;
        void *c = handle(r, id, w);
        if (c != NULL)
            fn(c, null ? NULL : q.p + off, null ? 0 : l, l == NULL_3);
        off += null ? 0 : l;
    }
    px_buf_free(&q);
    for (size_t i = 0; i < k; i++) {
        void *c = handle(r, lost[i], w);
        if (c != NULL)
            fn(c, NULL, 0, lost3[i]);
    }
    free(lost);
    free(lost3);
}

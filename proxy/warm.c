/* SPDX-License-Identifier: Apache-2.0 */
/*
 * warm.c — a pool's warm-up window and ramp after a membership change (warm.h): where a key
 * stands, its write generations, and the fills that copy a key from its old owner to its new.
 */
#include "warm.h"
#include "backend.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

static uint64_t key_hash(const char *key, size_t len)
{
    return XXH3_64bits(key, len);
}

void px_warm_end(px_pool *pool)
{
    px_warm *w = &pool->warm;
    for (size_t i = 0; i < w->nsrc; i++)
        if (w->src[i] != NULL)
            w->src[i]->warm_source = w->src[i]->warm_dead = false;
    free(w->src);
    memset(w, 0, sizeof(*w)); /* the retired ones are reaped after this iteration's flush */
}

void px_warm_begin(px_pool *pool, const ch_table *prev, px_server *const *src, size_t n,
                   const px_warm_times *t)
{
    px_warm_end(pool);
    px_warm *w = &pool->warm;
    if (prev == NULL || n == 0 || (w->src = malloc(n * sizeof(*w->src))) == NULL)
        return;
    memcpy(w->src, src, n * sizeof(*src));
    for (size_t i = 0; i < n; i++)
        if (src[i] != NULL)
            src[i]->warm_source = true, src[i]->warm_dead = false;
    w->nsrc = n;
    w->table = prev;
    w->start_ms = t->start_ms;
    w->ramp_ms = t->ramp_ms;
    w->warm_ms = t->warm_ms;
    w->end_ms = t->start_ms + t->ramp_ms + t->warm_ms;
}

uint64_t px_warm_left(const px_pool *pool, uint64_t now)
{
    const px_warm *w = &pool->warm;
    return w->table != NULL && now < w->end_ms ? w->end_ms - now : 0;
}

uint64_t px_warm_times_left(const px_warm_times *t, uint64_t now)
{
    uint64_t end = t->start_ms + t->ramp_ms + t->warm_ms;
    return now < end ? end - now : 0;
}

px_warm_step px_warm_where(px_pool *pool, const char *key, size_t len, uint64_t now,
                           px_server **src)
{
    px_warm *w = &pool->warm;
    if (w->table == NULL)
        return PX_WARM_NONE;
    if (now >= w->end_ms) {
        px_warm_end(pool);
        return PX_WARM_NONE;
    }
    size_t o = ch_lookup(w->table, key, len);
    if (o >= w->nsrc || w->src[o] == NULL)
        return PX_WARM_NONE;
    px_server *s = w->src[o];
    size_t n = ch_lookup(pool->table, key, len);
    if (n < pool->nservers && &pool->servers[n] == s)
        return PX_WARM_NONE; /* did not move */
    if (s->warm_dead || (!s->retired && !px_health_up(pool->health, s->index)))
        return PX_WARM_NONE;
    uint64_t at = w->start_ms + (w->ramp_ms > 0 ? key_hash(key, len) % w->ramp_ms : 0);
    *src = s;
    if (now < at)
        return PX_WARM_BEFORE;
    return now < at + w->warm_ms ? PX_WARM_ON : PX_WARM_NONE;
}

uint32_t px_warm_gen(const px_pool *pool, const char *key, size_t len)
{
    return pool->warm.gen[key_hash(key, len) % PX_WARM_GENS];
}

void px_warm_write(px_pool *pool, const char *key, size_t len)
{
    pool->warm.gen[key_hash(key, len) % PX_WARM_GENS]++;
}

/* ---- fills ------------------------------------------------------------------------------------ */

/* A fill in flight: owned by the fragment it waits on (fetch, then store). */
typedef struct warm_fill {
    px_pool *pool;
    uint64_t cid;
    uint32_t gen;
    size_t len;
    char key[];
} warm_fill;

int px_warm_encode(void *arg, px_buf *out, uint8_t *expect)
{
    const px_warm_request *a = arg;
    if (a->fn != NULL)
        return a->fn(out, a->key, a->len, expect);
    *expect = a->expect;
    return px_buf_append(out, a->bytes->p, a->bytes->len);
}

static void fill_stored(px_frag *f, const px_reply *r)
{
    warm_fill *wf = f->ctx;
    px_warm_stats *st = &wf->pool->m.warm;
    int rc = r->kind == PX_REPLY_FAILED ? -1 : wf->pool->codec->fill_stored(r);
    if (rc > 0)
        st->warm_fills++;
    else if (rc == 0)
        st->warm_fills_present++;
    else
        st->warm_fill_errors++;
    free(wf);
}

/* Sends f (its ctx set) to s for request e; frees wf when it cannot. */
static void fill_send(px_server *s, px_frag *f, px_warm_request *e)
{
    warm_fill *wf = f->ctx;
    f->kind = PX_FRAG_FORWARD;
    f->cid = wf->cid;
    if (px_server_send(s, f, px_warm_encode, e) != 0) {
        wf->pool->m.warm.warm_fill_errors++;
        px_frag_free(f);
        free(wf);
    }
}

/* The fetch's reply: the copy goes to the key's owner now, unless written meanwhile. */
static void fill_fetched(px_frag *f, const px_reply *r)
{
    warm_fill *wf = f->ctx;
    px_pool *pool = wf->pool;
    if (r->kind == PX_REPLY_FAILED || r->kind == PX_REPLY_ERROR ||
        px_warm_gen(pool, wf->key, wf->len) != wf->gen || pool->io->stopping) {
        pool->m.warm.warm_fill_errors++;
        free(wf);
        return;
    }
    /* The key's owners up: its owner, or with `replicas` its first N distinct servers
     * (route_replica.h), each sent its own copy of the fill. */
    size_t own[8], n = 0, up = 0;
    size_t nrep = pool->conf->replicas > 1 ? (size_t)pool->conf->replicas : 1;
    if (nrep == 1 || nrep > 8 ||
        ch_replicas(pool->table, wf->key, wf->len, nrep, own, &n) != CH_OK) {
        own[0] = ch_lookup(pool->table, wf->key, wf->len);
        n = 1;
    }
    for (size_t i = 0; i < n; i++)
        if (own[i] < pool->nservers && px_health_up(pool->health, own[i]))
            own[up++] = own[i];
    px_buf b = {0};
    uint8_t expect = 0;
    int rc = up == 0 ? -1
                     : pool->codec->encode_fill(&b, wf->key, wf->len, r, (int64_t)time(NULL),
                                                &expect);
    if (rc <= 0) {
        if (rc != 0) /* 0: nothing to copy (expired meanwhile) */
            pool->m.warm.warm_fill_errors++;
        px_buf_free(&b);
        free(wf);
        return;
    }
    for (size_t i = 0; i < up; i++) {
        /* The last owner's fill takes wf; the others get a copy of it. */
        bool last = i + 1 == up;
        warm_fill *w = last ? wf : malloc(sizeof(*wf) + wf->len);
        px_frag *g = w != NULL ? px_frag_new(0) : NULL;
        if (g == NULL) {
            pool->m.warm.warm_fill_errors++;
            if (w != NULL)
                free(w);
            continue;
        }
        if (!last)
            memcpy(w, wf, sizeof(*wf) + wf->len);
        g->done = fill_stored;
        g->ctx = w;
        px_warm_request e = {NULL, w->key, w->len, &b, expect};
        fill_send(&pool->servers[own[i]], g, &e);
    }
    px_buf_free(&b);
}

void px_warm_fill(px_pool *pool, const char *key, size_t len, uint64_t cid, uint32_t gen)
{
    px_server *src = NULL;
    if (pool->codec->encode_fetch == NULL || pool->io->stopping ||
        px_warm_where(pool, key, len, px_io_now(pool->io), &src) != PX_WARM_ON)
        return;
    warm_fill *wf = malloc(sizeof(*wf) + len);
    px_frag *f = wf != NULL ? px_frag_new(0) : NULL;
    if (f == NULL) {
        free(wf);
        pool->m.warm.warm_fill_errors++;
        return;
    }
    wf->pool = pool;
    wf->cid = cid;
    wf->gen = gen;
    wf->len = len;
    memcpy(wf->key, key, len);
    f->done = fill_fetched;
    f->ctx = wf;
    px_warm_request e = {pool->codec->encode_fetch, wf->key, wf->len, NULL, 0};
    fill_send(src, f, &e);
}

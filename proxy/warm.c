/* SPDX-License-Identifier: Apache-2.0 */
/*
 * warm.c — a pool's warm-up window and ramp after a membership change (warm.h): where a key
 * stands and its write generations. The copies are route_warm.c's side requests.
 */
#include "warm.h"
#include "backend.h"

#include <stdlib.h>
#include <string.h>

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

bool px_warm_open(px_pool *pool, uint64_t now)
{
    px_warm *w = &pool->warm;
    if (w->table != NULL && now >= w->end_ms)
        px_warm_end(pool);
    return w->table != NULL;
}

px_warm_step px_warm_when(const px_pool *pool, uint64_t kh, uint64_t now)
{
    const px_warm *w = &pool->warm;
    if (!px_ramp_switched(w->start_ms, w->ramp_ms, kh, now))
        return PX_WARM_BEFORE;
    uint64_t at = px_ramp_at(w->start_ms, w->ramp_ms, kh);
    return now < at + w->warm_ms ? PX_WARM_ON : PX_WARM_NONE;
}

uint32_t px_warm_gen(const px_pool *pool, uint64_t kh)
{
    return pool->warm.gen[kh % PX_WARM_GENS];
}

void px_warm_write(px_pool *pool, uint64_t kh)
{
    pool->warm.gen[kh % PX_WARM_GENS]++;
}

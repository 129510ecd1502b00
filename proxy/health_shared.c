/*
 * health_shared.c — a pool's health shared by the workers (health_shared.h). The published state
 * (up[], n_up, streak[], probing[]) is written only under the lock and read with relaxed atomic
 * loads.
 */
#include "health_shared.h"

#include <stdlib.h>

int px_health_new(size_t n, const ch_health_options *opt, px_health **out)
{
    px_health *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return CH_ENOMEM;
    int rc = ch_health_new(n, opt, &h->h);
    if (rc != CH_OK) {
        free(h);
        return rc;
    }
    h->n = h->n_up = n;
    h->up = malloc(n);
    h->streak = calloc(n, 1);
    h->probing = calloc(n, 1);
    if (h->up == NULL || h->streak == NULL || h->probing == NULL ||
        pthread_mutex_init(&h->lock, NULL) != 0) {
        ch_health_free(h->h);
        free(h->up);
        free(h->streak);
        free(h->probing);
        free(h);
        return CH_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        h->up[i] = 1;
    *out = h;
    return CH_OK;
}

void px_health_free(px_health *h)
{
    if (h == NULL)
        return;
    pthread_mutex_destroy(&h->lock);
    ch_health_free(h->h);
    free(h->up);
    free(h->streak);
    free(h->probing);
    free(h);
}

bool px_health_up(const px_health *h, size_t i)
{
    return __atomic_load_n(&h->up[i], __ATOMIC_RELAXED) != 0;
}

static bool up_fn(const void *ctx, size_t i)
{
    return px_health_up(ctx, i);
}

int px_health_route(const px_health *h, const ch_table *t, uint64_t kh, size_t depth,
                    size_t *out, size_t *count)
{
    return ch_route_hash_fn(t, up_fn, h, __atomic_load_n(&h->n_up, __ATOMIC_RELAXED), kh, depth,
                            out, count);
}

/* Publishes i's state after a change of h->h (lock held). */
static void publish(px_health *h, size_t i)
{
    uint8_t up = ch_health_is_up(h->h, i) ? 1 : 0;
    if (up == h->up[i])
        return;
    __atomic_store_n(&h->up[i], up, __ATOMIC_RELAXED);
    __atomic_store_n(&h->n_up, up ? h->n_up + 1 : h->n_up - 1, __ATOMIC_RELAXED);
}

void px_health_success(px_health *h, size_t i, uint64_t now_ms)
{
    if (__atomic_load_n(&h->streak[i], __ATOMIC_RELAXED) == 0)
        return; /* nothing to end: the common case, no lock */
    pthread_mutex_lock(&h->lock);
    ch_health_success(h->h, i, now_ms);
    __atomic_store_n(&h->streak[i], 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&h->lock);
}

bool px_health_failure(px_health *h, size_t i, uint64_t now_ms, uint64_t rnd)
{
    pthread_mutex_lock(&h->lock);
    bool ejected = ch_health_failure(h->h, i, now_ms, rnd);
    ch_health_info info;
    ch_health_info_get(h->h, i, &info);
    __atomic_store_n(&h->streak[i], info.streak > 0 ? 1 : 0, __ATOMIC_RELAXED);
    publish(h, i);
    pthread_mutex_unlock(&h->lock);
    return ejected;
}

bool px_health_probe_claim(px_health *h, size_t i, uint64_t now_ms)
{
    if (px_health_up(h, i) || __atomic_load_n(&h->probing[i], __ATOMIC_RELAXED) != 0)
        return false; /* the common case, no lock */
    pthread_mutex_lock(&h->lock);
    bool claim = h->probing[i] == 0 && ch_health_probe_due(h->h, i, now_ms);
    if (claim)
        __atomic_store_n(&h->probing[i], 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&h->lock);
    return claim;
}

bool px_health_probe_result(px_health *h, size_t i, bool ok, uint64_t now_ms, uint64_t rnd)
{
    pthread_mutex_lock(&h->lock);
    ch_health_probe_result(h->h, i, ok, now_ms, rnd);
    __atomic_store_n(&h->probing[i], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&h->streak[i], 0, __ATOMIC_RELAXED);
    publish(h, i);
    bool up = h->up[i] != 0;
    pthread_mutex_unlock(&h->lock);
    return up;
}

void px_health_probe_drop(px_health *h, size_t i)
{
    pthread_mutex_lock(&h->lock);
    __atomic_store_n(&h->probing[i], 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&h->lock);
}

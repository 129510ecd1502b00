/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lease.c — the lease keeper's thread (lease.h).
 *
 * One round: per slot, a blocking keepalive of the record's lease, then of the member note's,
 * each bounded by PX_KEEPALIVE_ANSWER_MS; then a wait of period_ms (or until kicked or
 * stopped). A slow or dead etcd delays the rounds by at most one bound per lease, so with the
 * period at a third of the TTL a lease sees a keepalive at least every ttl/3 + 2 bounds.
 * Invariants: the keeper reads a slot's lease ids and writes its lease_until_ns and events
 * only, all atomically; a deadline is written only while the slot still holds the lease id it
 * was sent for, and only ever moves forward for one lease (a CAS keeps the maximum).
 */
#include "lease.h"
#include "etcd_http.h"

#include <etcd_msg.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct px_lease_keeper {
    px_lease_slot *slots;
    size_t n;
    uint64_t period_ms;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool stop, kicked; /* under lock */
    uv_async_t async;
    void (*events)(void *arg);
    void *arg;
};

uint64_t px_fence_margin_ns(int64_t ttl_s)
{
    uint64_t m = (uint64_t)ttl_s * 1000000000u / 5u;
    return m > 400000000u ? m : 400000000u;
}

uint64_t px_lease_deadline(uint64_t sent_ns, int64_t ttl_s)
{
    return sent_ns + (uint64_t)ttl_s * 1000000000u - px_fence_margin_ns(ttl_s);
}

static void post_event(px_lease_keeper *k, px_lease_slot *s, uint32_t ev)
{
    __atomic_fetch_or(&s->events, ev, __ATOMIC_RELEASE);
    uv_async_send(&k->async);
}

/* Keeps *lease alive once; record: it is the record's lease, which proves the fence. */
static void keep(px_lease_keeper *k, px_lease_slot *s, int64_t *lease, bool record)
{
    int64_t id = __atomic_load_n(lease, __ATOMIC_ACQUIRE);
    if (id == 0)
        return;
    char *body = ch__etcd_keepalive_body(id);
    if (body == NULL)
        return;
    char why[300];
    size_t len = 0;
    uint64_t sent = uv_hrtime();
    char *ans = px_etcd_post_sync(s->endpoint, "/v3/lease/keepalive", body,
                                  PX_KEEPALIVE_ANSWER_MS, &len, why, sizeof(why));
    free(body);
    int64_t got = 0, ttl = 0;
    bool ok = ans != NULL && ch__etcd_parse_lease(ans, len, &got, &ttl, why, sizeof(why)) == 0;
    free(ans);
    if (!ok) {
        if (record)
            post_event(k, s, PX_LEASE_UNANSWERED);
        return;
    }
    if (ttl <= 0) {
        if (__atomic_load_n(lease, __ATOMIC_ACQUIRE) == id) /* not one replaced meanwhile */
            post_event(k, s, record ? PX_LEASE_EXPIRED : PX_LEASE_MEMBER_EXPIRED);
        return;
    }
    if (!record)
        return;
    uint64_t until = px_lease_deadline(sent, ttl);
    uint64_t cur = __atomic_load_n(s->lease_until_ns, __ATOMIC_RELAXED);
    while (cur < until && __atomic_load_n(lease, __ATOMIC_ACQUIRE) == id &&
           !__atomic_compare_exchange_n(s->lease_until_ns, &cur, until, false, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED))
        ;
    post_event(k, s, PX_LEASE_ANSWERED);
}

static void *run(void *arg)
{
    px_lease_keeper *k = arg;
    pthread_mutex_lock(&k->lock);
    while (!k->stop) {
        pthread_mutex_unlock(&k->lock);
        for (size_t i = 0; i < k->n; i++) {
            keep(k, &k->slots[i], &k->slots[i].lease, true);
            keep(k, &k->slots[i], &k->slots[i].member_lease, false);
        }
        pthread_mutex_lock(&k->lock);
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += (time_t)(k->period_ms / 1000);
        until.tv_nsec += (long)(k->period_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        while (!k->stop && !k->kicked &&
               pthread_cond_timedwait(&k->cond, &k->lock, &until) == 0)
            ;
        k->kicked = false;
    }
    pthread_mutex_unlock(&k->lock);
    return NULL;
}

static void async_cb(uv_async_t *a)
{
    px_lease_keeper *k = a->data;
    k->events(k->arg);
}

static void keeper_closed(uv_handle_t *h)
{
    px_lease_keeper *k = h->data;
    pthread_cond_destroy(&k->cond);
    pthread_mutex_destroy(&k->lock);
    free(k);
}

px_lease_keeper *px_lease_keeper_start(uv_loop_t *loop, px_lease_slot *slots, size_t n,
                                       uint64_t period_ms, void (*events)(void *arg), void *arg)
{
    px_lease_keeper *k = calloc(1, sizeof(*k));
    if (k == NULL)
        return NULL;
    k->slots = slots;
    k->n = n;
    k->period_ms = period_ms > 0 ? period_ms : 1;
    k->events = events;
    k->arg = arg;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    bool cond = pthread_cond_init(&k->cond, &ca) == 0;
    pthread_condattr_destroy(&ca);
    if (!cond || pthread_mutex_init(&k->lock, NULL) != 0) {
        if (cond)
            pthread_cond_destroy(&k->cond);
        free(k);
        return NULL;
    }
    if (uv_async_init(loop, &k->async, async_cb) != 0) {
        pthread_cond_destroy(&k->cond);
        pthread_mutex_destroy(&k->lock);
        free(k);
        return NULL;
    }
    k->async.data = k;
    if (pthread_create(&k->thread, NULL, run, k) != 0) {
        uv_close((uv_handle_t *)&k->async, keeper_closed); /* frees k */
        return NULL;
    }
    return k;
}

void px_lease_keeper_kick(px_lease_keeper *k)
{
    if (k == NULL)
        return;
    pthread_mutex_lock(&k->lock);
    k->kicked = true;
    pthread_cond_signal(&k->cond);
    pthread_mutex_unlock(&k->lock);
}

void px_lease_keeper_stop(px_lease_keeper *k)
{
    if (k == NULL)
        return;
    pthread_mutex_lock(&k->lock);
    k->stop = true;
    pthread_cond_signal(&k->cond);
    pthread_mutex_unlock(&k->lock);
    pthread_join(k->thread, NULL);
    uv_close((uv_handle_t *)&k->async, keeper_closed);
}

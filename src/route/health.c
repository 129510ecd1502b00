/* SPDX-License-Identifier: Apache-2.0 */
/*
 * health.c — per-node health: ejection after K consecutive failures within a window W, probes on
 * an exponential backoff with jitter, readmission only after a successful probe.
 *
 * Every call takes the time from the caller and does O(1) work on one node. The tracker is one
 * malloc'd block (the options and an array of node states). Calls naming a node index >= n are
 * ignored (is_up and probe_due answer false), and so are calls on a NULL tracker, so a caller's
 * bug cannot write out of bounds.
 *
 * Times are unsigned milliseconds from the caller's monotonic origin. A time earlier than one
 * already seen (a caller mixing clocks) counts as no time elapsed, and sums saturate at
 * UINT64_MAX, so no arithmetic wraps.
 */
#include "chash_route.h"
#include "route_internal.h"

#include <stdlib.h>
#include <string.h>

void ch_health_options_init(ch_health_options *opt)
{
    if (opt == NULL)
        return;
    *opt = (ch_health_options){
        .size = sizeof(ch_health_options),
        .eject = true,
        .failure_limit = 3,
        .failure_window_ms = 10000,
        .retry_min_ms = 1000,
        .retry_max_ms = 60000,
        .jitter = 0.5,
        .stable_ms = 0,
    };
}

/* Copies the caller's options over the defaults, as far as the caller's struct reaches, and
 * validates them. The struct must reach at least the first field after size. */
static int read_options(const ch_health_options *opt, ch_health_options *o)
{
    ch_health_options_init(o);
    if (opt != NULL) {
        if (opt->size < offsetof(ch_health_options, eject) + sizeof(opt->eject) ||
            opt->size > sizeof(*o))
            return CH_EINVAL;
        memcpy(o, opt, opt->size);
        o->size = sizeof(*o);
    }
    /* Written so that a NaN jitter fails. */
    if (o->failure_limit < 1 || o->failure_window_ms == 0 || o->retry_min_ms == 0 ||
        o->retry_max_ms < o->retry_min_ms || !(o->jitter >= 0.0 && o->jitter < 1.0))
        return CH_EINVAL;
    if (o->stable_ms == 0)
        o->stable_ms = o->retry_max_ms;
    return CH_OK;
}

int ch_health_new(size_t n, const ch_health_options *opt, ch_health **out)
{
    ch_health_options o;
    int rc;
    if (out == NULL || n == 0)
        return CH_EINVAL;
    if ((rc = read_options(opt, &o)) != CH_OK)
        return rc;
    if (n > (SIZE_MAX - sizeof(ch_health)) / sizeof(ch__node_health))
        return CH_ENOMEM;
    ch_health *h = malloc(sizeof(*h) + n * sizeof(ch__node_health));
    if (h == NULL)
        return CH_ENOMEM;
    h->opt = o;
    h->n = n;
    h->n_up = n;
    for (size_t i = 0; i < n; i++)
        h->node[i] = (ch__node_health){.delay_ms = o.retry_min_ms, .up = true};
    *out = h;
    return CH_OK;
}

void ch_health_free(ch_health *h)
{
    free(h);
}

/* Time from `from` to `now`, 0 when now is earlier. */
static uint64_t elapsed(uint64_t from, uint64_t now)
{
    return now > from ? now - from : 0;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* d scaled by 1 - j + 2 j u, u = rnd / 2^64 in [0, 1) (its 53 high bits, so u < 1 exactly);
 * never below 1 ms. Without jitter, d exactly. */
static uint64_t jittered(const ch_health *h, uint64_t d, uint64_t rnd)
{
    uint64_t r = d;
    if (h->opt.jitter > 0.0) {
        double u = (double)(rnd >> 11) * 0x1p-53;
        double x = (double)d * (1.0 - h->opt.jitter + 2.0 * h->opt.jitter * u);
        r = x >= 0x1p64 ? UINT64_MAX : (uint64_t)x;
    }
    return r < 1 ? 1 : r;
}

/* The doubled delay, capped at retry_max_ms. */
static uint64_t doubled(const ch_health *h, uint64_t d)
{
    return d > h->opt.retry_max_ms / 2 ? h->opt.retry_max_ms : 2 * d;
}

/* The lazy half of the backoff: a readmitted node that has stayed up for stable_ms gets its
 * delay back to retry_min_ms. Called wherever time is known and the delay may be used next. */
static void settle(const ch_health *h, ch__node_health *s, uint64_t now_ms)
{
    if (s->readmitted && elapsed(s->up_since_ms, now_ms) >= h->opt.stable_ms) {
        s->delay_ms = h->opt.retry_min_ms;
        s->readmitted = false;
    }
}

void ch_health_success(ch_health *h, size_t i, uint64_t now_ms)
{
    if (h == NULL || i >= h->n || !h->node[i].up)
        return;
    ch__node_health *s = &h->node[i];
    s->streak = 0;
    settle(h, s, now_ms);
}

bool ch_health_failure(ch_health *h, size_t i, uint64_t now_ms, uint64_t rnd)
{
    if (h == NULL || i >= h->n || !h->node[i].up)
        return false;
    ch__node_health *s = &h->node[i];
    settle(h, s, now_ms);
    if (s->streak == 0 || elapsed(s->streak_start_ms, now_ms) > h->opt.failure_window_ms) {
        s->streak = 1;
        s->streak_start_ms = now_ms;
    } else if (s->streak < UINT32_MAX) {
        s->streak++;
    }
    /* The streak began no more than W ago: it restarted above otherwise. */
    if (!h->opt.eject || s->streak < h->opt.failure_limit)
        return false;
    /* A node ejected again within stable_ms of its readmission is flapping: it waits twice as
     * long as last time (capped), so a flapping node is ejected ever more rarely. */
    if (s->readmitted)
        s->delay_ms = doubled(h, s->delay_ms);
    s->readmitted = false;
    s->up = false;
    s->ejections++;
    s->next_probe_ms = add_sat(now_ms, jittered(h, s->delay_ms, rnd));
    h->n_up--;
    return true;
}

bool ch_health_is_up(const ch_health *h, size_t i)
{
    if (h == NULL)
        return true; /* as ch_route: no tracker, every node up */
    return i < h->n && h->node[i].up;
}

bool ch_health_probe_due(const ch_health *h, size_t i, uint64_t now_ms)
{
    return h != NULL && i < h->n && !h->node[i].up && now_ms >= h->node[i].next_probe_ms;
}

void ch_health_probe_result(ch_health *h, size_t i, bool ok, uint64_t now_ms, uint64_t rnd)
{
    if (h == NULL || i >= h->n || h->node[i].up)
        return;
    ch__node_health *s = &h->node[i];
    if (ok) {
        /* The delay is kept: if the node is ejected again before stable_ms, its next probe
         * waits twice as long. settle() resets it once the node has stayed up. */
        s->up = true;
        s->streak = 0;
        s->readmissions++;
        s->up_since_ms = now_ms;
        s->readmitted = true;
        s->next_probe_ms = 0;
        h->n_up++;
        return;
    }
    s->delay_ms = doubled(h, s->delay_ms);
    s->next_probe_ms = add_sat(now_ms, jittered(h, s->delay_ms, rnd));
}

int ch_health_info_get(const ch_health *h, size_t i, ch_health_info *out)
{
    if (h == NULL || out == NULL || i >= h->n)
        return CH_EINVAL;
    const ch__node_health *s = &h->node[i];
    *out = (ch_health_info){
        .up = s->up,
        .streak = s->streak,
        .delay_ms = s->delay_ms,
        .next_probe_ms = s->up ? 0 : s->next_probe_ms,
        .ejections = s->ejections,
        .readmissions = s->readmissions,
    };
    return CH_OK;
}

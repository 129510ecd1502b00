/*
 * health_shared.h — a pool's health, shared by the workers: a ch_health behind a lock, and what
 * the request path needs of it published as atomics (up[], n_up) so that routing takes no lock.
 *
 * The lock is taken by a failure, a probe (claim and result) and the first success after a
 * failure (streak[] says a failure streak is open), none of which is the common case. Replaced
 * as a whole by a reload (the old one is freed once every worker has switched). A reader may see
 * a node's state a moment late, which is the same as the request having arrived a moment
 * earlier; it never sees a torn value.
 */
#ifndef CHASH_PROXY_HEALTH_SHARED_H
#define CHASH_PROXY_HEALTH_SHARED_H

#include "chash_route.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct px_health {
    pthread_mutex_t lock; /* guards h, and every write to the arrays below */
    ch_health *h;
    size_t n;
    uint8_t *up;      /* ch_health_is_up(h, i) */
    uint8_t *streak;  /* i has failures that no success has ended yet */
    uint8_t *probing; /* a worker has a probe of i in flight */
    size_t n_up;      /* nodes up */
} px_health;

int px_health_new(size_t n, const ch_health_options *opt, px_health **out); /* CH_OK, CH_E* */
void px_health_free(px_health *h);
bool px_health_up(const px_health *h, size_t i); /* no lock */
/* The key's candidates (ch_route_hash_fn over the published state); no lock. */
int px_health_route(const px_health *h, const ch_table *t, uint64_t kh, size_t depth,
                    size_t *out, size_t *count);
void px_health_success(px_health *h, size_t i, uint64_t now_ms); /* locks only after a failure */
/* A failure of i; true when it ejected i. */
bool px_health_failure(px_health *h, size_t i, uint64_t now_ms, uint64_t rnd);
/* Whether this caller should probe i now: i is ejected, its probe is due and no one else probes
 * it. The caller then owns the probe and must report it with px_health_probe_result (or
 * px_health_probe_drop). */
bool px_health_probe_claim(px_health *h, size_t i, uint64_t now_ms);
/* The claimed probe's result; true when i is up afterwards (readmitted). */
bool px_health_probe_result(px_health *h, size_t i, bool ok, uint64_t now_ms, uint64_t rnd);
void px_health_probe_drop(px_health *h, size_t i); /* a claimed probe that will not report */

#endif /* CHASH_PROXY_HEALTH_SHARED_H */

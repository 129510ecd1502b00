/* SPDX-License-Identifier: Apache-2.0 */
/*
 * window.h — what a pool holds of the window after a membership change (warm.h has the
 * logic): types only, so pool.h can hold one without including the data path.
 */
#ifndef CHASH_PROXY_WINDOW_H
#define CHASH_PROXY_WINDOW_H

#include <chash.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct px_server px_server; /* backend.h */

#define PX_WARM_GENS 256u /* write generations, per bucket of keys (h(key) mod this) */

/* A pool's window, as one worker sees it. Off when table is NULL. */
typedef struct px_warm {
    const ch_table *table; /* the previous placement (the shared pool's prev) */
    px_server **src;       /* per node of table: the server that holds its keys */
    size_t nsrc;
    uint64_t start_ms;     /* the loop clock (monotonic ms) at which switches start */
    uint64_t ramp_ms;      /* moved keys switch over [start, start + ramp) */
    uint64_t warm_ms;      /* and warm for this long after their switch */
    uint64_t end_ms;       /* start + ramp + warm: the window's end */
    uint32_t gen[PX_WARM_GENS];
} px_warm;

/* The window times of a change (control thread, for every worker). */
typedef struct px_warm_times {
    uint64_t start_ms, ramp_ms, warm_ms;
} px_warm_times;

/* The ramp's rule, the one place it is written: a key whose XXH3-64 (px_key_hash) is kh, in a
 * ramp of ramp ms from start, has switched at loop time now once now >= start + kh mod ramp
 * (at start when ramp is 0). Used by a membership change's window (warm.c) and by a readmitted
 * server's slow start (health_shared.c), so every proxy and worker given the same start
 * switches each key at the same moment. Cost: a division. */
static inline uint64_t px_ramp_at(uint64_t start, uint64_t ramp, uint64_t kh)
{
    return start + (ramp > 0 ? kh % ramp : 0);
}
static inline bool px_ramp_switched(uint64_t start, uint64_t ramp, uint64_t kh, uint64_t now)
{
    return now >= px_ramp_at(start, ramp, kh);
}

#endif /* CHASH_PROXY_WINDOW_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * window.h — what a pool holds of the window after a membership change (warm.h has the
 * logic): types only, so pool.h can hold one without including the data path.
 */
#ifndef CHASH_PROXY_WINDOW_H
#define CHASH_PROXY_WINDOW_H

#include <chash.h>

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

#endif /* CHASH_PROXY_WINDOW_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * snapshot.h — every worker's counters added up, for the stats JSON and /metrics (control
 * thread). One short job per worker, on its loop, so the request path keeps plain counters.
 */
#ifndef CHASH_PROXY_SNAPSHOT_H
#define CHASH_PROXY_SNAPSHOT_H

#include "ctl_state.h"

/* Servers in membership order. */
typedef struct px_snap_server {
    px_server_stats stats;
    uint64_t in_queue, in_queue_bytes, out_queue, out_queue_bytes;
} px_snap_server;
typedef struct px_snap_pool {
    px_pool_stats stats;
    px_pool_metrics m;
    px_snap_server *servers; /* the shared pool's nservers */
} px_snap_pool;
typedef struct px_snap {
    px_snap_pool *pools; /* m->npools */
} px_snap;

/* Fills s with one job per worker. Returns 0, or -1 when out of memory or stopping. */
int px_snapshot(px_ctl *m, px_snap *s);
void px_snapshot_free(px_ctl *m, px_snap *s);
uint64_t px_clients(const px_ctl *m); /* client connections open now, all pools and workers */

#endif /* CHASH_PROXY_SNAPSHOT_H */

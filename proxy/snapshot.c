/* SPDX-License-Identifier: Apache-2.0 */
/*
 * snapshot.c — every worker's counters added up (snapshot.h).
 */
#include "snapshot.h"
#include "backend.h"

#include <stdlib.h>
#include <string.h>

/* Adds worker px's counters into the snapshot (a job on px's loop). */
static void snap_add(px_worker *px, void *arg)
{
    px_snap *sn = arg;
    for (size_t i = 0; i < px->npools; i++) {
        const px_pool *pool = &px->pools[i];
        px_snap_pool *sp = &sn->pools[i];
#define X(f) sp->stats.f += pool->stats.f;
        PX_POOL_SUMS
#undef X
        for (size_t k = 0; k < PX_NCLASSES; k++) {
            sp->m.requests[k] += pool->m.requests[k];
            sp->m.errors[k] += pool->m.errors[k];
        }
        for (size_t k = 0; k <= PX_LAT_NBOUNDS; k++)
            sp->m.lat_buckets[k] += pool->m.lat_buckets[k];
        sp->m.lat_sum_ns += pool->m.lat_sum_ns;
        sp->m.clients_accepted += pool->m.clients_accepted;
        sp->m.mem_refused += pool->m.mem_refused;
        sp->m.fence_refused += pool->m.fence_refused;
        sp->m.coalesced += pool->m.coalesced;
#define X(f) sp->m.warm.f += pool->m.warm.f;
        PX_WARM_SUMS
#undef X
#define X(f) sp->m.shadow.f += pool->m.shadow.f;
        PX_SHADOW_SUMS
#undef X
#define X(f) sp->m.near.f += pool->m.near.f;
        PX_NEAR_SUMS
#undef X
#define X(f) sp->m.gutter.f += pool->m.gutter.f;
        PX_GUTTER_SUMS
#undef X
#define X(f) sp->m.track.f += pool->m.track.f;
        PX_TRACK_SUMS
#undef X
#define X(f) sp->m.ctrack.f += pool->m.ctrack.f;
        PX_CTRACK_SUMS
#undef X
        /* Every worker's pool has the shared pool's servers, in its order (a reload commits on
         * every worker before the control thread runs anything else). */
        for (size_t j = 0; j < pool->nservers; j++) {
            const px_server *s = &pool->servers[j];
            px_snap_server *ss = &sp->servers[j];
#define X(f) ss->stats.f += s->stats.f;
            PX_SERVER_SUMS
#undef X
            if (s->stats.server_ejected_at > ss->stats.server_ejected_at)
                ss->stats.server_ejected_at = s->stats.server_ejected_at;
            for (unsigned c = 0; c < s->nconns; c++) {
                const px_conn *cn = &s->conns[c];
                ss->in_queue += cn->nunsent;
                ss->in_queue_bytes += cn->unsent_bytes;
                ss->out_queue += cn->nfrags - cn->nunsent;
                ss->out_queue_bytes += cn->bytes - cn->unsent_bytes;
            }
        }
    }
}

int px_snapshot(px_ctl *m, px_snap *sn)
{
    memset(sn, 0, sizeof(*sn));
    if (m->stopping) /* the workers take no more jobs */
        return -1;
    sn->pools = calloc(m->npools, sizeof(*sn->pools));
    if (sn->pools == NULL)
        return -1;
    for (size_t i = 0; i < m->npools; i++) {
        sn->pools[i].servers = calloc(m->pools[i].nservers, sizeof(*sn->pools[i].servers));
        if (sn->pools[i].servers == NULL) {
            px_snapshot_free(m, sn);
            return -1;
        }
    }
    for (unsigned w = 0; w < m->nworkers; w++)
        px_worker_call(&m->workers[w], snap_add, sn);
    return 0;
}

void px_snapshot_free(px_ctl *m, px_snap *sn)
{
    for (size_t i = 0; sn->pools != NULL && i < m->npools; i++)
        free(sn->pools[i].servers);
    free(sn->pools);
    sn->pools = NULL;
}

uint64_t px_clients(const px_ctl *m)
{
    uint64_t n = 0;
    for (size_t i = 0; i < m->npools; i++)
        n += PX_ATOMIC_LOAD(m->pools[i].clients);
    return n;
}


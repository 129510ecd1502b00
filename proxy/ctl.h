/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ctl.h — the control thread: what is not per worker. It binds the listeners, starts and stops
 * the workers, handles signals, serves the stats and metrics ports and runs reloads. It never
 * touches client traffic; it talks to a worker only through px_worker_call().
 */
#ifndef CHASH_PROXY_CTL_H
#define CHASH_PROXY_CTL_H

#include "ctl_state.h"

/* Sets up the control thread and nworkers workers (listeners bound, servers set up) from cfg,
 * which it takes over. Returns 0, or -1 (logged; px_ctl_free cleans up). */
int px_ctl_init(px_ctl *m, ch_config *cfg, unsigned nworkers);
int px_ctl_run(px_ctl *m); /* starts the workers; returns after SIGINT/SIGTERM */
void px_ctl_free(px_ctl *m);
uint64_t px_rand_seed(const px_ctl *m, unsigned index); /* worker index's random state */
/* What -t checks: everything a start builds but binding — every pool's placement, health and
 * server list, its listen address and its servers' addresses resolved — so -t refuses what a
 * start would refuse. 0, or -1 with the reason (naming the pool) in why. */
int px_ctl_check(const ch_config *cfg, char *why, size_t whylen);

#endif /* CHASH_PROXY_CTL_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stats.h — twemproxy-compatible stats: each TCP connection to the stats address receives one
 * JSON object, then the proxy closes it.
 */
#ifndef CHASH_PROXY_STATS_H
#define CHASH_PROXY_STATS_H

#include "ctl_state.h"

int px_stats_start(px_ctl *m);
/* The stats JSON into b. Returns 0, or -1 when out of memory. */
int px_stats_json(px_ctl *m, px_buf *b);

#endif /* CHASH_PROXY_STATS_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.h — the Prometheus text exposition and the INFO reply's text.
 */
#ifndef CHASH_PROXY_METRICS_H
#define CHASH_PROXY_METRICS_H

#include "ctl_state.h"

/* The Prometheus text exposition (format 0.0.4) into b (control thread). 0, or -1. */
int px_metrics_text(px_ctl *m, px_buf *b);
/* The INFO reply's text (not yet a bulk) into b; runs on worker w: counts of clients are this
 * worker's and the whole proxy's. 0, or -1. */
int px_metrics_info(const px_ctl *m, const px_worker *w, px_buf *b);

#endif /* CHASH_PROXY_METRICS_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hotkeys.h — hot-key detection on the control thread (docs/OPERATIONS.md, "Hot keys").
 *
 * Each worker counts every key of its pools' requests into a summary of its own
 * (px_pool.hot, src/hot/topk.h: Space-Saving, k = PX_HOT_K), with no lock: once per window
 * (PX_HOT_WINDOW_MS) the control thread swaps a cleared summary in with one job per worker and
 * merges the filled ones into the pool's views: the last window, a decayed 60 s view and the
 * counts since the start. The views are read on the control thread (GET /-/hotkeys, /metrics);
 * INFO, which runs on the workers, reads a text the control thread publishes under a lock once
 * per window. A key reaching the pool's hot_key_share of its server's requests in a window is
 * logged once as it crosses.
 */
#ifndef CHASH_PROXY_HOTKEYS_H
#define CHASH_PROXY_HOTKEYS_H

#include "ctl_state.h"

typedef struct px_hotkeys px_hotkeys;

#define PX_HOT_K 128u           /* entries per summary: recall of a zipf 1.1 top 10, 30 of 30 */
#define PX_HOT_KEYMAX 250u      /* key bytes kept (memcached's longest key) */
#define PX_HOT_WINDOW_MS 1000u
#define PX_HOT_SHOWN 10u        /* keys in /metrics and INFO */

/* Starts the window timer (0), or -1 when out of memory; nothing with --no-hot-keys (the
 * workers count nothing, the reports are empty, GET /-/hotkeys answers 404). */
int px_hotkeys_start(px_ctl *m);
/* Stops the timer (shutdown, before the loop's last run). */
void px_hotkeys_stop(px_ctl *m);
/* Frees the views and every summary lent to a worker (once the workers are gone). */
void px_hotkeys_free(px_ctl *m);
/* GET /-/hotkeys: the pools' hot keys as JSON (docs/OPERATIONS.md). 0, or -1. */
int px_hotkeys_json(px_ctl *m, px_buf *out);
/* The hot-key families of /metrics. 0, or -1. */
int px_hotkeys_metrics(px_ctl *m, px_buf *out);
/* INFO's "# Hotkeys" section, as last published (any thread). 0, or -1. */
int px_hotkeys_info(const px_ctl *m, px_buf *out);

#endif /* CHASH_PROXY_HOTKEYS_H */

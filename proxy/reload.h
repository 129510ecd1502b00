/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reload.h — hot reload: re-reads the config file and swaps each pool's membership, placement
 * table and health in on every worker, all or nothing (docs/PROXY.md, "Reload").
 */
#ifndef CHASH_PROXY_RELOAD_H
#define CHASH_PROXY_RELOAD_H

#include "ctl_state.h"

/* SIGHUP or POST /-/reload (trigger names which, for the log): re-reads m->conf_path and
 * applies it to every worker. When result is not NULL, appends one line (no line end) to it:
 * "reloaded: <pool>: <old> -> <new>, ..." or "unchanged" on success, followed by "; not applied,
 * needs a restart: ..." when PX_RELOAD_PARTIAL, else why it failed (a config error as
 * file:line:column: message). Control thread. */
enum {
    PX_RELOAD_OK = 0,
    PX_RELOAD_INVALID = 1, /* the file */
    PX_RELOAD_FAILED = 2,  /* else: nothing applied */
    PX_RELOAD_PARTIAL = 3, /* applied, but the file also changes what only a restart can (a
                              pool's listen, redis, redis_db, server_connections or membership;
                              pools added or removed): result says which */
    PX_RELOAD_STALE = 4,   /* a membership document's epoch is not newer than the one served
                              (docs/FLEET.md, "Epochs"): nothing applied */
};
/* A reload's own window after a membership change (warm.h), instead of the pools' warm_up and
 * ramp keys: -1 takes the pool's; ramp_start_unix_ms, when not 0, is the wall-clock time (Unix
 * ms) at which the ramp starts, so every proxy given the same change switches each key at the
 * same moment (else the reload's own time). */
typedef struct px_reload_opts {
    int64_t warm_up_ms, ramp_ms;
    int64_t ramp_start_unix_ms;
} px_reload_opts;
#define PX_RELOAD_OPTS_POOLS ((px_reload_opts){-1, -1, 0})
int px_reload(px_ctl *m, const char *trigger, const px_reload_opts *opt, px_buf *result);

/* ---- in two steps, for a fleet's two-phase change (fleet_change.c; docs/FLEET.md) ------------
 * A pool whose file names a "membership" key takes its servers from a membership document: the
 * one in docs[i] (for pool i of m->pools) when its text is given, else the one it serves. A new
 * document's epoch is its "epoch", else mod_rev, and must be greater than the pool's (else
 * PX_RELOAD_STALE). Errors name it by the pool's "membership" URL. */
typedef struct px_reload_doc {
    const char *text; /* NULL: the document the pool serves */
    size_t len;
    int64_t mod_rev;
} px_reload_doc;

/* px_reload_prepare does every fallible step of a reload (docs NULL: every pool keeps its
 * document) and, with held NULL, commits it at once (px_reload). With held, it keeps every
 * worker's plans and returns the reload in *held, to be committed (cannot fail) or aborted
 * later; meanwhile the proxy serves as before. One reload is held at a time: any later reload,
 * held or not, drops the held one first and calls m->held_dropped. */
typedef struct px_reload_held px_reload_held;
int px_reload_prepare(px_ctl *m, const char *trigger, const px_reload_opts *opt,
                      const px_reload_doc *docs, px_reload_held **held, px_buf *result);
int px_reload_commit(px_ctl *m, px_reload_held *h, px_buf *result);
void px_reload_abort(px_ctl *m, px_reload_held *h);

#endif /* CHASH_PROXY_RELOAD_H */

/*
 * reload.h — hot reload: re-reads the config file and swaps each pool's membership, placement
 * table and health in on every worker, all or nothing (docs/PROXY.md, "Reload").
 */
#ifndef CHASH_PROXY_RELOAD_H
#define CHASH_PROXY_RELOAD_H

#include "ctl.h"

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
                              pool's listen, redis, redis_db or server_connections; pools added
                              or removed): result says which */
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

#endif /* CHASH_PROXY_RELOAD_H */

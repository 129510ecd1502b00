/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet_damp.h — flap damping of a pool's membership in etcd (docs/FLEET.md, "Writes straight
 * to K"): a document written to K that removes servers the pool serves waits
 * membership_hold_down before it is applied, in case they come back; a document that removes
 * none, arriving meanwhile, withdraws the removal (counted: damped). Control thread.
 */
#ifndef CHASH_PROXY_FLEET_DAMP_H
#define CHASH_PROXY_FLEET_DAMP_H

#include "log.h"
#include "pool.h"

#include <uv.h>

/* Applies a removal whose hold-down is over (text valid during the call). */
typedef void (*fleet_damp_apply_cb)(void *arg, const char *text, size_t len, int64_t mod_rev);

/* Invariant: doc != NULL exactly while the timer runs (a removal waits); it is a copy, with a
 * NUL after its len bytes. */
typedef struct fleet_damp {
    int hold_down_ms; /* 0: no damping */
    bool by_id;       /* servers compared by their name (id) instead of their address: a DNS
                         membership, where an SRV target that moved to a new address is the
                         same server (its keys stay), not a removal */
    char *doc;
    size_t len;
    int64_t rev;      /* doc's revision of K */
    uv_timer_t timer; /* at the hold-down's end */
    uint64_t damped;  /* removals withdrawn within their hold-down */
    const char *name; /* the pool's, for the log */
    px_log *log;
    fleet_damp_apply_cb apply;
    void *arg;
} fleet_damp;

void fleet_damp_init(fleet_damp *d, uv_loop_t *loop, int hold_down_ms, const char *name,
                     px_log *log, fleet_damp_apply_cb apply, void *arg);
/* Whether damping is on and doc (a parsed document's pool) lacks a server sp serves (by
 * address, or by id with by_id). Out of memory counts as removing (the document then waits: the safe side). Cost:
 * O(n log n) in the servers. */
bool fleet_damp_removes(const fleet_damp *d, const px_shared_pool *sp, const ch_conf_pool *doc);
/* Holds a removing document (epoch: its epoch, for the log) in place of the one waiting; the
 * hold-down starts when none was waiting. 0, or -1 when out of memory (nothing changed). */
int fleet_damp_hold(fleet_damp *d, const char *text, size_t len, int64_t mod_rev, int64_t epoch);
/* A document of epoch that removes nothing arrived: the removal waiting, if any, is not
 * applied (logged, counted). */
void fleet_damp_withdraw(fleet_damp *d, int64_t epoch);
/* Drops the removal waiting, if any (a committed change replaced the membership). */
void fleet_damp_clear(fleet_damp *d);
static inline bool fleet_damp_waiting(const fleet_damp *d)
{
    return d->doc != NULL;
}
/* Drops what waits and closes the timer (its data set to data, for cb). */
void fleet_damp_close(fleet_damp *d, void *data, uv_close_cb cb);

#endif /* CHASH_PROXY_FLEET_DAMP_H */

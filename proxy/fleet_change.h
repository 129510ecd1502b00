/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet_change.h — the changes of a pool's membership in etcd (docs/FLEET.md), each through
 * reload.h's all-or-nothing path: a document in K is applied when its epoch is newer than the
 * one served (after its hold-down when it removes servers: fleet_damp.h); one in K/pending is
 * prepared and held (the record says prepared) until the commit in K with the same epoch swaps
 * it in, or the pending key goes (aborted). A DNS membership (dns_watch.h) hands its changed
 * answers to fleet_change_committed as documents of K, without an instance record. Control
 * thread.
 */
#ifndef CHASH_PROXY_FLEET_CHANGE_H
#define CHASH_PROXY_FLEET_CHANGE_H

#include "fence.h"
#include "fleet_damp.h"
#include "fleet_instance.h"
#include "reload.h"

typedef struct fleet_change {
    px_ctl *m;
    size_t index;           /* the pool's, in m->pools */
    const char *name, *url; /* the pool's name and "membership" URL, for errors */
    const char *key;        /* K, for the log */
    const char *trigger;    /* what a direct change is, for the reload's log; NULL: "fleet: a
                               document of etcd" */
    px_fence *fence;        /* NULL: never held (a DNS membership has no two-phase change) */
    fleet_instance *inst;   /* its record says what was applied, refused, prepared; NULL: no
                               record (DNS, dns_watch.h): own keeps what the log needs */
    ch__fleet_record own;
    fleet_damp damp;
    /* Invariant: held is this pool's reload held in m->held (and held in the fence), or NULL;
     * fleet_change_dropped clears it when a later reload drops it. */
    px_reload_held *held;
    int64_t held_epoch;
    uint64_t applied;         /* documents applied */
    uint64_t refused_invalid; /* refused: it does not parse or cannot be built */
    uint64_t refused_stale;   /* refused: its epoch is not newer than the one served */
    void (*changed)(void *arg); /* a change held, committed, withdrawn or dropped: decide the
                                   fence */
    void *arg;
} fleet_change;

/* Sets up the damping (hold_down_ms) over the fields set before. */
void fleet_change_init(fleet_change *c, int hold_down_ms);
/* K was written: its document, at revision mod_rev. */
void fleet_change_committed(fleet_change *c, const char *text, size_t len, int64_t mod_rev);
/* K/pending was written: prepared and held for the commit. A refusal is logged and recorded
 * once per epoch (prepare_failed, with why), so that apply names it at once. */
void fleet_change_pending(fleet_change *c, const char *text, size_t len, int64_t mod_rev);
/* K/pending went away without a commit of ours: the change was aborted (or committed and its
 * K event already seen). */
void fleet_change_pending_gone(fleet_change *c);
/* A later reload (trigger) dropped the held change, reload.c freed it (m->held_dropped). */
void fleet_change_dropped(fleet_change *c, const char *trigger);
/* Shutdown: a held change aborted, the damping's timer closed (its data set to data, for cb). */
void fleet_change_close(fleet_change *c, void *data, uv_close_cb cb);

#endif /* CHASH_PROXY_FLEET_CHANGE_H */

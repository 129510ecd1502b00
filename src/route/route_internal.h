/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_internal.h — the health tracker's layout, shared by health.c, which owns it, and
 * router.c, which reads a node's up flag once per candidate. Not installed.
 */
#ifndef CHASH_ROUTE_INTERNAL_H
#define CHASH_ROUTE_INTERNAL_H

#include "chash_route.h"

typedef struct ch__node_health {
    uint64_t streak_start_ms; /* time of the streak's first failure; meaningful when streak > 0 */
    uint64_t delay_ms;        /* the current unjittered probe delay, in [retry_min, retry_max] */
    uint64_t next_probe_ms;   /* when ejected: the time the probe is due */
    uint64_t up_since_ms;     /* time of the last readmission; meaningful when readmitted */
    uint64_t ejections;
    uint64_t readmissions;
    uint32_t streak; /* consecutive failures; never above failure_limit while ejection is on */
    bool up;
    bool readmitted; /* up after a probe, with a delay not yet reset to retry_min */
} ch__node_health;

struct ch_health {
    ch_health_options opt; /* complete: stable_ms already resolved (never 0) */
    size_t n;
    size_t n_up; /* number of nodes with up set: ch_route stops walking once it has them all */
    ch__node_health node[];
};

#endif /* CHASH_ROUTE_INTERNAL_H */

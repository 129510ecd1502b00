/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dns_watch.h — a pool's membership from DNS (docs/FLEET.md, "Membership from DNS"):
 * "membership: dns://name:port" (A and AAAA records) or "dns+srv://name" (SRV records), resolved
 * once at the start (px_dns_bootstrap, before the workers) and then again on the control
 * thread's loop every membership_interval ms, or at the answer's TTL when shorter
 * (dns_resolve.h, never blocking the loop). An answer is made a membership document
 * (dns_answer.h); a changed one goes to fleet_change_committed as a document of the next epoch,
 * so it is applied through reload.h's all-or-nothing path (warm-up and ramp apply) and its
 * removals are held down and damped (fleet_damp.h), exactly as an etcd document written to K.
 * A lookup that fails or finds no server keeps the list served. Control thread.
 */
#ifndef CHASH_PROXY_DNS_WATCH_H
#define CHASH_PROXY_DNS_WATCH_H

#include "ctl_state.h"

#include <chash_config.h>

typedef struct px_dns_boot px_dns_boot;

/* Before px_ctl_init: each pool of cfg with a DNS membership is resolved (blocking, at most two
 * tries of PX_DNS_TIMEOUT_MS), its servers taken from the answer (ch_config_membership_doc on
 * the pool) and the document kept in *out for px_dns_start. A pool whose lookup fails or finds
 * no server starts on the file's servers (logged), or, with none, cannot start. *out is NULL
 * when no pool uses DNS. 0, or -1 (logged). */
int px_dns_bootstrap(ch_config *cfg, px_log *log, px_dns_boot **out);
void px_dns_boot_free(px_dns_boot *b);

/* chash-proxy -t: the start's rule without starting: each DNS pool without servers in the file
 * is resolved (blocking, as px_dns_bootstrap), and one whose lookup fails or finds no server
 * is refused (it could not start). 0, or -1 with why naming the pool and the URL. */
int px_dns_check(const ch_config *cfg, char *why, size_t whylen);

/* After px_ctl_init: hands boot's documents to m's pools (epoch 1) and starts each pool's
 * watch; takes boot over. 0, or -1 (logged). */
int px_dns_start(px_ctl *m, px_dns_boot *boot);

/* At shutdown: stops every lookup and timer. */
void px_dns_stop(px_ctl *m);

/* The wait for one try of a query (ms); a lookup is at most two tries per DNS server. */
#define PX_DNS_TIMEOUT_MS 1000

/* Pool i's DNS counters, for /metrics. false when the pool does not use DNS. */
typedef struct px_dns_stats {
    int64_t epoch;          /* the membership epoch served: 1 at the start, +1 per change */
    uint64_t lookups;       /* lookups finished */
    uint64_t failed;        /* lookups that failed (timeout, SERVFAIL, NXDOMAIN, ...) */
    uint64_t empty;         /* lookups that found no server */
    bool keeping;           /* the last lookup failed or was empty: the list served is kept */
    bool held_down;         /* an answer that removes servers waits its hold-down */
    uint64_t applied;       /* changed answers applied */
    uint64_t damped;        /* removals withdrawn within the hold-down */
    uint64_t refused;       /* changed answers that could not be applied (e.g. not built) */
    uint64_t next_ms;       /* the wait before the next lookup, as last chosen */
} px_dns_stats;
bool px_dns_stats_get(const px_ctl *m, size_t i, px_dns_stats *out);

#endif /* CHASH_PROXY_DNS_WATCH_H */

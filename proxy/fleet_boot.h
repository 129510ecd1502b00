/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet_boot.h — the first read of the pools whose membership is in etcd (docs/FLEET.md,
 * "Fencing"), before the control thread's loop runs: the instance registered, the document
 * read and applied to the config, so a pool starts current; and what -t checks of them.
 * Blocking; main thread.
 */
#ifndef CHASH_PROXY_FLEET_BOOT_H
#define CHASH_PROXY_FLEET_BOOT_H

#include "chash_config.h"
#include "log.h"

#include <fleet_record.h>

#include <stdbool.h>
#include <stdint.h>

/* --fleet-id and --fleet-ttl. */
typedef struct px_fleet_options {
    const char *id; /* NULL: "<host>:<pid>" */
    int ttl_s;      /* the record's lease */
} px_fleet_options;
#define PX_FLEET_DEFAULT_TTL_S 10

/* What the start did for a pool: its document, and the lease and record it registered with. */
typedef struct px_fleet_boot_doc {
    char *endpoint;          /* a copy, to revoke a lease not taken over */
    char *text;
    size_t len;
    int64_t epoch;
    int64_t lease;           /* 0: none granted */
    uint64_t lease_until_ns;
    bool registered;         /* the record was put under lease */
    int64_t member_lease;    /* K/members/<id>'s (0: not put) */
    bool synced;             /* and K read after that */
    ch__fleet_record rec;
} px_fleet_boot_doc;

/* What the first read found, per pool of the file; px_fleet_start (fleet.h) takes it over. */
typedef struct px_fleet_boot {
    int ttl_s;
    size_t n;                /* the config's pools */
    char **names;
    px_fleet_boot_doc *docs; /* text NULL: none read */
} px_fleet_boot;

/* Before px_ctl_init: per pool in etcd, registers the instance (a lease, its record under it)
 * and then reads the pool's membership document and applies it to cfg's pool (blocking, at
 * most FIRST_READ_MS per request), so the pool starts current (docs/FLEET.md, "Fencing"). A
 * pool whose etcd cannot be read, or whose document is refused, starts fenced: it refuses its
 * requests until etcd answers (with "membership_fenced: serve", it serves its file servers
 * meanwhile); one without file servers fails the start. Returns 0 and *boot (NULL when no pool
 * names etcd), or -1 (logged). */
int px_fleet_bootstrap(ch_config *cfg, px_log *log, const px_fleet_options *opt,
                       px_fleet_boot **boot);

/* What -t checks of the pools in etcd: each one's document read (blocking, as the start's: at
 * most FIRST_READ_MS; nothing is written to etcd) and applied to cfg's pool, so px_ctl_check
 * then checks the servers a start would serve; a pool whose document cannot be had passes
 * when the file has servers (it would start fenced) and fails the check otherwise, by the
 * rule the start applies (one function). 0, or -1 with the reason, naming the pool, in why. */
int px_fleet_check(ch_config *cfg, char *why, size_t whylen);

/* Revokes the leases not taken over (their records go at once) and frees boot. */
void px_fleet_boot_free(px_fleet_boot *boot);

#endif /* CHASH_PROXY_FLEET_BOOT_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dns_answer.h — a DNS answer turned into a pool's membership document (docs/FLEET.md,
 * "Membership from DNS"): pure, no I/O, no clock. The document is what a membership in etcd
 * holds (ch_config_membership_doc), so a DNS pool's change goes through the same reload path
 * (fleet_change.h) as an etcd one.
 */
#ifndef CHASH_PROXY_DNS_ANSWER_H
#define CHASH_PROXY_DNS_ANSWER_H

#include "buf.h"

#include <chash_config.h>

#include <stddef.h>

/* One server an answer names. */
typedef struct px_dns_server {
    const char *name; /* dns+srv://: the SRV target (a trailing '.' is dropped), the server's
                         name in the placement, stable across address changes; dns://: NULL,
                         the server is named by its address and port as a file's would be */
    const char *addr; /* its address, IPv4 or IPv6, as text */
    int port;         /* 1..65535 */
} px_dns_server;

/* Writes the membership document of servers[0, n) into out (appended): a JSON mapping of
 * "servers" (each "addr:port:1 name"), and pool's "hash", "distribution" and "hash_tag", which
 * the file sets for a DNS pool (a document's absent keys would take their defaults). Every
 * server has weight 1: an SRV record's priority and weight are not read (kube-dns gives each
 * record the weight 100/n, which would change every server's weight at every scale and remap
 * keys that need not move). The servers are sorted and duplicates dropped, so two answers that
 * hold the same set in any order give the same bytes: the caller compares documents to know
 * whether anything changed. An SRV target named twice (two ports) is named "target:port" each
 * time. n must be > 0. 0, or -1 when out of memory. Cost: O(n log n). */
int px_dns_doc(const px_dns_server *servers, size_t n, const ch_conf_pool *pool, px_buf *out);

#endif /* CHASH_PROXY_DNS_ANSWER_H */

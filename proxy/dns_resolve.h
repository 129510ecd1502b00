/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dns_resolve.h — a pool's DNS lookups with c-ares on a uv loop (docs/FLEET.md, "Membership
 * from DNS"), never blocking it: c-ares tells which sockets to watch (a uv_poll each) and when
 * it must be called back (one timer), as libcurl does for etcd_http.h. A lookup asks every A and
 * AAAA record of a name, or its SRV records and then each target's addresses. /etc/hosts is not
 * read (only DNS), and c-ares 1.18 keeps no cache: every lookup asks the server. One thread:
 * the loop's.
 */
#ifndef CHASH_PROXY_DNS_RESOLVE_H
#define CHASH_PROXY_DNS_RESOLVE_H

#include "dns_answer.h"

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

typedef struct px_dns px_dns;

/* What a lookup found. */
typedef struct px_dns_result {
    bool ok;                   /* the server answered the name (NXDOMAIN and NODATA are not ok) */
    const char *error;         /* !ok: why, for the log ("timeout", "server failure", ...) */
    const px_dns_server *servers; /* ok: every server found (n may be 0: no address at all) */
    size_t n;
    size_t unresolved;         /* SRV: targets whose addresses could not be had (left out) */
    uint32_t ttl_s;            /* the least TTL of the address records (UINT32_MAX: none); an
                                  SRV record's own TTL is not read (c-ares 1.18 gives none) */
} px_dns_result;
/* Called once per lookup, on the loop; r and what it points to are valid during the call. */
typedef void (*px_dns_cb)(void *arg, const px_dns_result *r);

/* A channel on loop asking resolver ("ip:port", as membership_resolver), or the system's
 * resolvers (/etc/resolv.conf) when NULL. Each query waits timeout_ms per try, 2 tries. NULL,
 * with why, when c-ares cannot start. */
px_dns *px_dns_new(uv_loop_t *loop, const char *resolver, int timeout_ms, char *why,
                   size_t whylen);
/* Starts a lookup of name: srv false, its A and AAAA records, each a server on port (named
 * NULL); srv true, its SRV records (port ignored), each target resolved and named. At most one
 * lookup at a time per channel: -1 while one is in flight (or out of memory), else 0 and cb is
 * called later, never from within this call. */
int px_dns_lookup(px_dns *d, const char *name, bool srv, int port, px_dns_cb cb, void *arg);
/* Whether a lookup is in flight. */
bool px_dns_busy(const px_dns *d);
/* Cancels the lookup in flight (its cb is not called) and frees the channel once its handles
 * are closed (the loop must run on). */
void px_dns_free(px_dns *d);

#endif /* CHASH_PROXY_DNS_RESOLVE_H */

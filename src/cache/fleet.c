/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet.c — the instance record of a libchash-cache client (docs/FLEET.md, "The instance
 * record"), built with src/fleet's ch__fleet_record_json(). Its own file so that a program
 * linking libchash_cache.a without it does not pull in jansson.
 */
#define _POSIX_C_SOURCE 200809L

#include "cache_internal.h"
#include "fleet_record.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

char *ch_cache_fleet_record(const ch_cache *c, const char *id)
{
    if (c == NULL)
        return NULL;
    ch__fleet_record r;
    memset(&r, 0, sizeof(r));
    char host[96] = ""; /* room for ":<pid>" after it in the record's id */
    if (gethostname(host, sizeof(host) - 1) != 0)
        snprintf(host, sizeof(host), "unknown");
    long pid = (long)getpid();
    if (id != NULL)
        snprintf(r.id, sizeof(r.id), "%s", id);
    else
        snprintf(r.id, sizeof(r.id), "%s:%ld", host, pid);
    snprintf(r.kind, sizeof(r.kind), "libchash-cache");
    if (c->conf != NULL)
        snprintf(r.pool, sizeof(r.pool), "%s", c->conf->pools[c->conf_pool].name);
    snprintf(r.host, sizeof(r.host), "%s", host);
    r.pid = pid;
    r.epoch = c->epoch;
    r.since_unix_ms = c->since_unix_ms;
    snprintf(r.membership, sizeof(r.membership), "%s", ch_membership_version(c->m));
    r.servers = (int64_t)c->n;
    r.seen_epoch = c->seen_epoch;
    snprintf(r.refused, sizeof(r.refused), "%s", c->refused);
    r.prepared = c->prepared;
    r.prepare_failed = c->prepare_failed;
    snprintf(r.prepare_error, sizeof(r.prepare_error), "%s", c->prepare_error);
    snprintf(r.warm_up, sizeof(r.warm_up), "off"); /* a client has no warm-up window */
    r.swapped_unix_us = c->swapped_unix_us;
    r.fenced = ch__fenced_now(c);
    snprintf(r.on_fence, sizeof(r.on_fence), "error"); /* a fenced client refuses requests */
    return ch__fleet_record_json(&r);
}

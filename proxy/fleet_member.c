/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet_member.c — the member note (fleet_member.h): at most one request in flight; a failure
 * is retried by the next keepalive tick.
 */
#include "fleet_member.h"

#include <etcd_msg.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REQUEST_MS 3000

char *fleet_member_json(const ch__fleet_record *r)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ch__fleet_member mb = {0};
    snprintf(mb.id, sizeof(mb.id), "%s", r->id);
    snprintf(mb.kind, sizeof(mb.kind), "%s", r->kind);
    snprintf(mb.host, sizeof(mb.host), "%s", r->host);
    mb.pid = r->pid;
    mb.since_unix_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    return ch__fleet_member_json(&mb);
}

static void member_done(void *arg, bool ok, const char *body, size_t len, const char *why)
{
    (void)why;
    fleet_member *mb = arg;
    mb->req = NULL;
    char w[300];
    int64_t id = 0, ttl = 0, rev;
    if (!ok)
        return; /* the next tick tries again */
    if (mb->step == FLEET_MEMBER_PUT) {
        mb->unput = ch__etcd_parse_write(body, len, &rev, w, sizeof(w)) != 0;
    } else if (ch__etcd_parse_lease(body, len, &id, &ttl, w, sizeof(w)) == 0 && ttl > 0) {
        mb->lease = id;
        mb->unput = true;
        __atomic_store_n(&mb->slot->member_lease, id, __ATOMIC_RELEASE); /* the keeper's now */
        fleet_member_tick(mb); /* the put, now */
    }
}

void fleet_member_tick(fleet_member *mb)
{
    if (mb->req != NULL || mb->fence->registered == 0)
        return;
    char *body = NULL;
    const char *path;
    if (mb->lease == 0) {
        mb->step = FLEET_MEMBER_GRANT;
        path = "/v3/lease/grant";
        body = ch__etcd_grant_body(CH_FLEET_MEMBER_TTL_S);
    } else if (mb->unput) {
        mb->step = FLEET_MEMBER_PUT;
        path = "/v3/kv/put";
        char *json = fleet_member_json(mb->rec);
        body = json != NULL ? ch__etcd_put_body(mb->key, json, strlen(json), mb->lease) : NULL;
        free(json);
    } else {
        return;
    }
    if (body != NULL)
        mb->req = px_etcd_post(mb->etcd, path, body, REQUEST_MS, member_done, mb);
    free(body);
}

void fleet_member_expired(fleet_member *mb)
{
    mb->lease = 0;
    __atomic_store_n(&mb->slot->member_lease, 0, __ATOMIC_RELEASE);
}

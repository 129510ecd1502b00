/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet_instance.c — the lease and the record (fleet_instance.h). One write of the record is
 * in flight at a time and the latest state wins: a change meanwhile marks it dirty, and the
 * write's end (or the next tick, after a failure) writes it again.
 */
#include "fleet_instance.h"

#include <etcd_msg.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REQUEST_MS 3000 /* each request: a grant, a write */

static int64_t unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

char *fleet_instance_key(const char *key, const char *id)
{
    char *prefix = ch__fleet_instances_prefix(key);
    char *s = prefix != NULL ? ch__fleet_key(prefix, id) : NULL;
    free(prefix);
    return s;
}

void fleet_lease_revoke(const char *endpoint, int64_t lease)
{
    if (lease == 0)
        return;
    char body[64], why[200];
    size_t len;
    snprintf(body, sizeof(body), "{\"ID\":\"%lld\"}", (long long)lease);
    free(px_etcd_post_sync(endpoint, "/v3/lease/revoke", body, 1000, &len, why, sizeof(why)));
}

static void warm_end_cb(uv_timer_t *t)
{
    fleet_instance *fi = t->data;
    fleet_instance_served(fi);
    fleet_instance_put(fi);
}

void fleet_instance_init(fleet_instance *fi, uv_loop_t *loop)
{
    uv_timer_init(loop, &fi->warm_end);
    fi->warm_end.data = fi;
}

static void record_done(void *arg, bool ok, const char *body, size_t len, const char *why)
{
    fleet_instance *fi = arg;
    fi->record_req = NULL;
    char w[300];
    int64_t rev;
    if (ok && ch__etcd_parse_write(body, len, &rev, w, sizeof(w)) != 0) {
        ok = false;
        why = w;
    }
    if (!ok) {
        PX_LOGL(fi->log, PX_LOG_WARN, "fleet: pool %s: cannot write its record %s: %s",
                fi->name, fi->record_key, why);
        fi->dirty = true; /* the next keepalive tries again */
        return;
    }
    bool read_again;
    if (px_fence_record_written(fi->fence, &read_again))
        fi->on->registered(fi->arg, read_again);
    if (fi->dirty)
        fleet_instance_put(fi);
}

void fleet_instance_put(fleet_instance *fi)
{
    int64_t lease = fi->fence->lease;
    if (lease == 0 || fi->record_req != NULL) {
        fi->dirty = true;
        return;
    }
    char *json = ch__fleet_record_json(&fi->rec);
    char *body = json != NULL ? ch__etcd_put_body(fi->record_key, json, strlen(json), lease)
                              : NULL;
    if (body != NULL)
        fi->record_req = px_etcd_post(fi->etcd, "/v3/kv/put", body, REQUEST_MS, record_done, fi);
    px_fence_record_sent(fi->fence);
    fi->dirty = fi->record_req == NULL; /* not started: the next keepalive tries again */
    free(json);
    free(body);
}

void fleet_instance_served(fleet_instance *fi)
{
    const px_shared_pool *sp = fi->sp;
    ch__fleet_record *r = &fi->rec;
    if (r->epoch != sp->epoch || r->since_unix_ms == 0)
        r->since_unix_ms = unix_ms();
    r->epoch = sp->epoch;
    snprintf(r->membership, sizeof(r->membership), "%s", ch_membership_version(sp->members));
    r->servers = (int64_t)sp->nservers;
    snprintf(r->warm_up, sizeof(r->warm_up), "off");
    r->warm_up_until_unix_ms = 0;
    if (sp->warm_from == PX_WARM_FROM_NOW || sp->warm_from == PX_WARM_FROM_KEPT) {
        uint64_t end = sp->warm.start_ms + sp->warm.ramp_ms + sp->warm.warm_ms;
        uint64_t now = uv_hrtime() / 1000000u;
        if (end > now) {
            snprintf(r->warm_up, sizeof(r->warm_up), "%s", sp->warm.ramp_ms > 0 ? "ramp" : "warm");
            r->warm_up_until_unix_ms = unix_ms() + (int64_t)(end - now);
            uv_timer_start(&fi->warm_end, warm_end_cb, end - now + 1, 0);
        }
    }
}

/* A grant answered, or failed. */
static void grant_done(void *arg, bool ok, const char *body, size_t len, const char *why)
{
    fleet_instance *fi = arg;
    fi->grant_req = NULL;
    char w[300];
    int64_t id = 0, ttl = 0;
    if (ok && ch__etcd_parse_lease(body, len, &id, &ttl, w, sizeof(w)) != 0) {
        ok = false;
        why = w;
    }
    if (ok && ttl <= 0) {
        ok = false;
        why = "etcd granted a lease with no TTL";
    }
    if (!ok) {
        fi->on->lost(fi->arg, "cannot grant its lease", why);
        return; /* the next tick grants again */
    }
    px_fence_granted(fi->fence, id);
    __atomic_store_n(fi->slot->lease_until_ns, px_lease_deadline(fi->grant_sent_ns, ttl),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&fi->slot->lease, id, __ATOMIC_RELEASE);
    PX_LOGL(fi->log, PX_LOG_NOTICE, "fleet: pool %s: registered as %s (lease %lld, %d s)",
            fi->name, fi->record_key, (long long)id, fi->ttl_s);
    fi->dirty = true;
    fi->on->changed(fi->arg);
    fleet_instance_put(fi);
}

void fleet_instance_tick(fleet_instance *fi)
{
    if (fi->dirty)
        fleet_instance_put(fi);
    if (fi->fence->lease != 0 || fi->grant_req != NULL)
        return;
    char *body = ch__etcd_grant_body(fi->ttl_s);
    fi->grant_sent_ns = uv_hrtime();
    if (body != NULL)
        fi->grant_req = px_etcd_post(fi->etcd, "/v3/lease/grant", body, REQUEST_MS, grant_done,
                                     fi);
    free(body);
}

void fleet_instance_drop(fleet_instance *fi)
{
    px_fence_lease_lost(fi->fence);
    __atomic_store_n(&fi->slot->lease, 0, __ATOMIC_RELEASE);
    __atomic_store_n(fi->slot->lease_until_ns, 0, __ATOMIC_RELAXED);
    fi->on->changed(fi->arg);
}

void fleet_instance_close(fleet_instance *fi, void *data, uv_close_cb cb)
{
    free(fi->record_key);
    fi->record_key = NULL;
    fi->warm_end.data = data;
    uv_close((uv_handle_t *)&fi->warm_end, cb);
}

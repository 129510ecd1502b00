/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet_watch.c — the watch of K (fleet_watch.h).
 */
#include "fleet_watch.h"

#include <stdlib.h>
#include <string.h>

#define REQUEST_MS 3000 /* a range; a watch's connection */
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000

/* Stops the watch (or its range) and doubles the backoff. */
static void watch_retry(fleet_watch *w)
{
    if (w->watch != NULL) {
        px_etcd_cancel(w->watch);
        w->watch = NULL;
    }
    if (w->range != NULL) {
        px_etcd_cancel(w->range);
        w->range = NULL;
    }
    w->watching = false;
    w->restarts++;
    w->backoff_ms = w->backoff_ms == 0 ? BACKOFF_MIN_MS
                    : w->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
                                                         : w->backoff_ms * 2;
    w->on->changed(w->arg); /* a prepared change may now be committed unseen */
}

static void retry_cb(uv_timer_t *t)
{
    fleet_watch_start(t->data);
}

void fleet_watch_again(fleet_watch *w)
{
    watch_retry(w);
    uv_timer_start(&w->retry, retry_cb, w->backoff_ms, 0);
}

static void watch_line(void *arg, const char *line, size_t len)
{
    fleet_watch *w = arg;
    ch__etcd_watch_msg msg;
    char why[300];
    if (ch__etcd_parse_watch(line, len, &msg, why, sizeof(why)) != 0) {
        w->on->lost(w->arg, "the watch failed", why);
        fleet_watch_again(w);
        return;
    }
    if (msg.compact_rev > 0 || msg.canceled) {
        PX_LOGL(w->log, PX_LOG_WARN,
                "fleet: pool %s: the watch from revision %lld was %s: reading %s again",
                w->name, (long long)w->rev + 1,
                msg.compact_rev > 0 ? "compacted away" : "canceled", w->key);
        w->rev = 0;
        ch__etcd_watch_msg_free(&msg);
        fleet_watch_again(w);
        return;
    }
    if (msg.created && msg.rev < w->rev) {
        /* A watch from a revision etcd has not reached would never deliver what is written
         * below it. */
        int64_t seen = w->rev, at = msg.rev;
        w->rev = 0;
        ch__etcd_watch_msg_free(&msg);
        w->on->behind(w->arg, at, seen);
        return;
    }
    if (msg.created) {
        w->watching = true;
        w->backoff_ms = 0;
        w->on->up(w->arg);
    }
    for (size_t i = 0; i < msg.nevents; i++) {
        w->on->kv(w->arg, &msg.events[i].kv, msg.events[i].deleted);
        if (msg.events[i].kv.mod_rev > w->rev)
            w->rev = msg.events[i].kv.mod_rev;
    }
    if (msg.rev > w->rev && (msg.nevents > 0 || !msg.created))
        w->rev = msg.rev; /* events and progress notices: everything up to it is delivered */
    ch__etcd_watch_msg_free(&msg);
}

static void watch_done(void *arg, bool ok, const char *body, size_t len, const char *why)
{
    (void)body, (void)len;
    fleet_watch *w = arg;
    w->watch = NULL;
    w->on->lost(w->arg, "the watch ended", ok ? "etcd closed it" : why);
    fleet_watch_again(w);
}

static void range_done(void *arg, bool ok, const char *body, size_t len, const char *why)
{
    fleet_watch *w = arg;
    w->range = NULL;
    char e[300];
    int64_t rev = 0;
    ch__etcd_kv *kvs = NULL;
    size_t n = 0;
    if (ok && ch__etcd_parse_range(body, len, &rev, &kvs, &n, e, sizeof(e)) != 0) {
        ok = false;
        why = e;
    }
    if (!ok) {
        w->on->lost(w->arg, "cannot read its key", why);
        fleet_watch_again(w);
        return;
    }
    /* K before K/pending (they sort so): a commit seen first makes the pending key old news. */
    for (size_t i = 0; i < n; i++)
        w->on->kv(w->arg, &kvs[i], false);
    w->on->read(w->arg, kvs, n);
    ch__etcd_kvs_free(kvs, n);
    w->rev = px_fence_read_done(w->fence) ? 0 : rev; /* begun too early: read again */
    w->on->changed(w->arg);
    fleet_watch_start(w);
}

void fleet_watch_init(fleet_watch *w, uv_loop_t *loop)
{
    uv_timer_init(loop, &w->retry);
    w->retry.data = w;
}

void fleet_watch_resync(fleet_watch *w)
{
    w->rev = 0;
    if (w->range != NULL || uv_is_active((uv_handle_t *)&w->retry))
        return; /* range_done reads again if it began too early; the retry ranges */
    if (w->watch != NULL) {
        px_etcd_cancel(w->watch);
        w->watch = NULL;
        w->watching = false;
    }
    fleet_watch_start(w);
}

void fleet_watch_start(fleet_watch *w)
{
    if (w->rev == 0) {
        px_fence_read_sent(w->fence, uv_hrtime());
        char *body = ch__etcd_range_body(w->key, true);
        w->range = body != NULL ? px_etcd_post(w->etcd, "/v3/kv/range", body, REQUEST_MS,
                                               range_done, w)
                                : NULL;
        free(body);
    } else {
        char *body = ch__etcd_watch_body(w->key, w->rev + 1);
        w->watch = body != NULL ? px_etcd_stream(w->etcd, "/v3/watch", body, REQUEST_MS,
                                                 watch_line, watch_done, w)
                                : NULL;
        free(body);
    }
    if (w->range == NULL && w->watch == NULL) {
        w->on->lost(w->arg, "cannot start a request", "out of memory");
        fleet_watch_again(w);
    }
}

void fleet_watch_close(fleet_watch *w, void *data, uv_close_cb cb)
{
    w->retry.data = data;
    uv_close((uv_handle_t *)&w->retry, cb);
}

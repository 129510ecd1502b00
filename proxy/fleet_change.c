/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet_change.c — a pool's changes from etcd (fleet_change.h). A document refused is counted
 * each time and logged and recorded once (a range after a resync reads the same document
 * again).
 */
#include "fleet_change.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t unix_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static const px_shared_pool *served(const fleet_change *c)
{
    return &c->m->pools[c->index];
}

/* The record of what was applied and refused: the instance's, or c's own without one. */
static ch__fleet_record *rec_of(fleet_change *c)
{
    return c->inst != NULL ? &c->inst->rec : &c->own;
}

/* The instance's record brought up to what the pool serves (served) and written, if any. */
static void record_put(fleet_change *c, bool served)
{
    if (c->inst == NULL)
        return;
    if (served)
        fleet_instance_served(c->inst);
    fleet_instance_put(c->inst);
}

/* A document of K not applied. */
static void refused(fleet_change *c, int64_t epoch, bool stale, const char *why)
{
    ch__fleet_record *rec = rec_of(c);
    if (stale)
        c->refused_stale++;
    else
        c->refused_invalid++;
    char text[sizeof(rec->refused)];
    snprintf(text, sizeof(text), "%s", why);
    if (epoch == rec->seen_epoch && strcmp(text, rec->refused) == 0)
        return;
    if (epoch > rec->seen_epoch)
        rec->seen_epoch = epoch;
    memcpy(rec->refused, text, sizeof(text));
    PX_LOG(c->m, PX_LOG_ERR, "fleet: pool %s: %s refused, still serving epoch %lld: %s",
           c->name, c->key, (long long)served(c)->epoch, why);
    record_put(c, false);
}

/* Applies a document of K now (a direct change, or a held-down one whose time came). */
static void apply_now(fleet_change *c, const char *text, size_t len, int64_t mod_rev,
                      const char *trigger)
{
    px_ctl *m = c->m;
    ch__fleet_record *rec = rec_of(c);
    px_reload_doc *docs = calloc(m->npools, sizeof(*docs));
    if (docs == NULL) {
        refused(c, mod_rev, false, "out of memory");
        return;
    }
    docs[c->index] = (px_reload_doc){text, len, mod_rev};
    px_reload_opts opt = PX_RELOAD_OPTS_POOLS;
    px_buf result = {0};
    int rc = px_reload_prepare(m, trigger, &opt, docs, NULL, &result);
    free(docs);
    char why[300];
    snprintf(why, sizeof(why), "%.*s", (int)result.len, result.p != NULL ? result.p : "");
    px_buf_free(&result);
    if (rc != PX_RELOAD_OK && rc != PX_RELOAD_PARTIAL) {
        refused(c, mod_rev, rc == PX_RELOAD_STALE, why);
        return;
    }
    c->applied++;
    rec->refused[0] = '\0';
    if (served(c)->epoch > rec->seen_epoch)
        rec->seen_epoch = served(c)->epoch;
    rec->swapped_unix_us = unix_us();
    record_put(c, true);
}

static const char *trigger_of(const fleet_change *c)
{
    return c->trigger != NULL ? c->trigger : "fleet: a document of etcd";
}

static void damp_apply(void *arg, const char *text, size_t len, int64_t mod_rev)
{
    fleet_change *c = arg;
    char trigger[120];
    snprintf(trigger, sizeof(trigger), "%s, after its hold-down", trigger_of(c));
    apply_now(c, text, len, mod_rev, trigger);
}

void fleet_change_init(fleet_change *c, int hold_down_ms)
{
    fleet_damp_init(&c->damp, c->m->loop, hold_down_ms, c->name, &c->m->log, damp_apply, c);
}

static void held_set(fleet_change *c, px_reload_held *h, int64_t epoch)
{
    c->held = h;
    c->held_epoch = epoch;
    px_fence_hold(c->fence, uv_hrtime());
}

/* Takes the held change out of c (and the fence). */
static px_reload_held *held_take(fleet_change *c)
{
    px_reload_held *h = c->held;
    c->held = NULL;
    px_fence_release(c->fence);
    return h;
}

/* The commit of the held change (epoch) arrived: swapped in. */
static void commit(fleet_change *c, int64_t epoch)
{
    ch__fleet_record *rec = rec_of(c);
    px_buf result = {0};
    (void)px_reload_commit(c->m, held_take(c), &result);
    rec->swapped_unix_us = unix_us();
    PX_LOG(c->m, PX_LOG_NOTICE, "fleet: pool %s: epoch %lld committed and swapped in: %.*s",
           c->name, (long long)epoch, (int)result.len, result.p != NULL ? result.p : "");
    px_buf_free(&result);
    c->applied++;
    rec->prepared = 0;
    rec->refused[0] = '\0';
    if (c->inst != NULL)
        fleet_instance_served(c->inst);
    c->changed(c->arg);
    record_put(c, false);
    fleet_damp_clear(&c->damp);
}

void fleet_change_committed(fleet_change *c, const char *text, size_t len, int64_t mod_rev)
{
    const px_shared_pool *sp = served(c);
    ch__fleet_record *rec = rec_of(c);
    ch_config *doc = NULL;
    int64_t epoch = 0;
    ch_config_error err;
    if (ch_config_membership_parse(c->name, c->url, text, len, &doc, &epoch, &err) != 0) {
        char msg[600];
        refused(c, mod_rev, false, ch_config_error_str(&err, msg, sizeof(msg)));
        return;
    }
    if (epoch == 0)
        epoch = mod_rev;
    if (epoch <= sp->epoch) {
        /* The one served (a range or watch that repeats it) is not news. */
        bool same = epoch == sp->epoch && sp->doc != NULL && sp->doclen == len &&
                    memcmp(sp->doc, text, len) == 0;
        if (!same) {
            char why[200];
            snprintf(why, sizeof(why), "epoch %lld is not newer than %lld, the one served",
                     (long long)epoch, (long long)sp->epoch);
            refused(c, epoch, true, why);
        }
        ch_config_free(doc);
        return;
    }
    if (epoch > rec->seen_epoch)
        rec->seen_epoch = epoch;
    if (c->held != NULL && c->held_epoch == epoch) { /* the commit of a prepared change */
        ch_config_free(doc);
        commit(c, epoch);
        return;
    }
    bool removing = fleet_damp_removes(&c->damp, sp, &doc->pools[0]);
    ch_config_free(doc);
    if (removing) {
        if (fleet_damp_hold(&c->damp, text, len, mod_rev, epoch) != 0)
            refused(c, epoch, false, "out of memory");
        return;
    }
    fleet_damp_withdraw(&c->damp, epoch);
    apply_now(c, text, len, mod_rev, trigger_of(c));
}

/* The epoch of a pending document: its "epoch" (`chash fleet apply` always gives one), else
 * its revision. A document that does not parse has its revision: preparing it then fails with
 * the parse error. */
static int64_t pending_epoch(const fleet_change *c, const char *text, size_t len,
                             int64_t mod_rev)
{
    ch_config *doc = NULL;
    int64_t epoch = 0;
    ch_config_error err;
    if (ch_config_membership_parse(c->name, c->url, text, len, &doc, &epoch, &err) == 0)
        ch_config_free(doc);
    return epoch > 0 ? epoch : mod_rev;
}

void fleet_change_pending(fleet_change *c, const char *text, size_t len, int64_t mod_rev)
{
    px_ctl *m = c->m;
    ch__fleet_record *rec = rec_of(c);
    int64_t epoch = pending_epoch(c, text, len, mod_rev);
    if (c->held != NULL && c->held_epoch == epoch)
        return;
    px_buf result = {0};
    int rc = PX_RELOAD_FAILED;
    px_reload_held *h = NULL;
    if (epoch <= served(c)->epoch) {
        (void)px_buf_printf(&result, "pending epoch %lld is not newer than %lld, the one served",
                            (long long)epoch, (long long)served(c)->epoch);
    } else {
        px_reload_doc *docs = calloc(m->npools, sizeof(*docs));
        px_reload_opts opt = PX_RELOAD_OPTS_POOLS;
        char trigger[80];
        snprintf(trigger, sizeof(trigger), "fleet: pending epoch %lld", (long long)epoch);
        if (docs != NULL) {
            docs[c->index] = (px_reload_doc){text, len, mod_rev};
            rc = px_reload_prepare(m, trigger, &opt, docs, &h, &result);
        }
        free(docs);
    }
    if (rc == PX_RELOAD_OK) {
        held_set(c, h, epoch);
        rec->prepared = epoch;
        rec->prepare_failed = 0;
        rec->prepare_error[0] = '\0';
        PX_LOG(m, PX_LOG_NOTICE, "fleet: pool %s: pending epoch %lld prepared; waiting for its "
               "commit", c->name, (long long)epoch);
    } else if (rec->prepare_failed != epoch) {
        rec->prepared = 0;
        rec->prepare_failed = epoch;
        snprintf(rec->prepare_error, sizeof(rec->prepare_error), "%.*s", (int)result.len,
                 result.p != NULL ? result.p : "out of memory");
        PX_LOG(m, PX_LOG_ERR, "fleet: pool %s: cannot prepare pending epoch %lld: %s",
               c->name, (long long)epoch, rec->prepare_error);
    }
    px_buf_free(&result);
    c->changed(c->arg);
    record_put(c, false);
}

void fleet_change_pending_gone(fleet_change *c)
{
    if (c->held == NULL)
        return;
    px_reload_abort(c->m, held_take(c));
    PX_LOG(c->m, PX_LOG_NOTICE, "fleet: pool %s: pending epoch %lld withdrawn: dropped",
           c->name, (long long)c->held_epoch);
    rec_of(c)->prepared = 0;
    c->changed(c->arg);
    record_put(c, false);
}

void fleet_change_dropped(fleet_change *c, const char *trigger)
{
    if (c->held == NULL || c->m->held == c->held)
        return;
    (void)held_take(c); /* reload.c freed it */
    ch__fleet_record *rec = rec_of(c);
    rec->prepared = 0;
    rec->prepare_failed = c->held_epoch;
    snprintf(rec->prepare_error, sizeof(rec->prepare_error), "dropped by a later reload (%s)",
             trigger);
    c->changed(c->arg); /* the workers' bound was the held change's, which nothing renews now */
    record_put(c, false);
}

void fleet_change_close(fleet_change *c, void *data, uv_close_cb cb)
{
    if (c->held != NULL)
        px_reload_abort(c->m, held_take(c));
    fleet_damp_close(&c->damp, data, cb);
}

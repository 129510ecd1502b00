/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet_damp.c — flap damping (fleet_damp.h): one removal at most waits per pool; a later
 * removal takes its place without restarting the hold-down, so a server that keeps flapping
 * cannot postpone a removal for ever.
 */
#include "fleet_damp.h"

#include <stdlib.h>
#include <string.h>

static void hold_cb(uv_timer_t *t)
{
    fleet_damp *d = t->data;
    char *doc = d->doc;
    size_t len = d->len;
    int64_t rev = d->rev;
    d->doc = NULL; /* taken: it outlives the clear */
    fleet_damp_clear(d);
    PX_LOGL(d->log, PX_LOG_NOTICE,
            "fleet: pool %s: the hold-down (%d ms) is over and the servers did not come back: "
            "applying revision %lld",
            d->name, d->hold_down_ms, (long long)rev);
    d->apply(d->arg, doc, len, rev);
    free(doc);
}

void fleet_damp_init(fleet_damp *d, uv_loop_t *loop, int hold_down_ms, const char *name,
                     px_log *log, fleet_damp_apply_cb apply, void *arg)
{
    memset(d, 0, sizeof(*d));
    d->hold_down_ms = hold_down_ms;
    d->name = name;
    d->log = log;
    d->apply = apply;
    d->arg = arg;
    uv_timer_init(loop, &d->timer);
    d->timer.data = d;
}

bool fleet_damp_removes(const fleet_damp *d, const px_shared_pool *sp, const ch_conf_pool *doc)
{
    if (d->hold_down_ms <= 0)
        return false;
    size_t n = sp->nservers, nd = doc->nservers;
    const char **have = malloc((nd ? nd : 1) * sizeof(*have));
    const char **want = malloc((n ? n : 1) * sizeof(*want));
    size_t *from = malloc((n ? n : 1) * sizeof(*from));
    bool out = have == NULL || want == NULL || from == NULL;
    for (size_t j = 0; !out && j < nd; j++)
        have[j] = d->by_id ? doc->servers[j].id : doc->servers[j].addr;
    for (size_t i = 0; !out && i < n; i++)
        want[i] = d->by_id ? sp->servers[i]->id : sp->servers[i]->addr;
    out = out || px_match_addrs(have, nd, want, n, false, from) != 0;
    for (size_t i = 0; !out && i < n; i++)
        out = from[i] == SIZE_MAX;
    free(have);
    free(want);
    free(from);
    return out;
}

int fleet_damp_hold(fleet_damp *d, const char *text, size_t len, int64_t mod_rev, int64_t epoch)
{
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return -1;
    memcpy(copy, text, len);
    copy[len] = '\0';
    bool waiting = d->doc != NULL;
    free(d->doc);
    d->doc = copy;
    d->len = len;
    d->rev = mod_rev;
    if (!waiting) {
        uv_timer_start(&d->timer, hold_cb, (uint64_t)d->hold_down_ms, 0);
        PX_LOGL(d->log, PX_LOG_NOTICE,
                "fleet: pool %s: epoch %lld removes servers: held down for %d ms "
                "(membership_hold_down) in case they come back",
                d->name, (long long)epoch, d->hold_down_ms);
    }
    return 0;
}

void fleet_damp_withdraw(fleet_damp *d, int64_t epoch)
{
    if (d->doc == NULL)
        return;
    d->damped++;
    PX_LOGL(d->log, PX_LOG_NOTICE,
            "fleet: pool %s: epoch %lld brings back the servers a held-down document "
            "removed: that removal is not applied",
            d->name, (long long)epoch);
    fleet_damp_clear(d);
}

void fleet_damp_clear(fleet_damp *d)
{
    free(d->doc);
    d->doc = NULL;
    d->len = 0;
    uv_timer_stop(&d->timer);
}

void fleet_damp_close(fleet_damp *d, void *data, uv_close_cb cb)
{
    free(d->doc);
    d->doc = NULL;
    d->timer.data = data;
    uv_close((uv_handle_t *)&d->timer, cb);
}

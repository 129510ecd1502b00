/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dispatch.c — px_dispatch (dispatch.h). Protocol-blind: the command spec says what a request
 * is, the codec answers and frames, the route sends.
 */
#include "dispatch.h"
#include "route_all.h"
#include "route_prefix.h"
#include "route_scan.h"

#include "hot/topk.h"

#include <stdio.h>

/* With client_auth, health checks (PING) are served before AUTH too; with redis_auth alone, as
 * twemproxy and Redis, only AUTH and QUIT are. */
static bool auth_gate_passes(const px_rq *rq, const px_local *ctx)
{
    const px_cmd *c = rq->msg.cmd;
    return ctx->password == NULL || ctx->authed || (c->flags & PX_CMD_AUTH_EXEMPT) != 0 ||
           ((c->flags & PX_CMD_HEALTH) != 0 && rq->pool->conf->client_auth != NULL);
}

/* Hot-key detection (hotkeys.h): each key of a request the pool serves, counted in the window
 * summary the control thread lent this worker. Cost per key: one XXH3 of its bytes, kept in the
 * request for the routes after (px_rq_key_hash), and one Space-Saving add (an index probe and a
 * heap sift over PX_HOT_K entries), no lock. */
static void count_keys(px_rq *rq)
{
    struct ch__topk *t = rq->pool->hot;
    for (size_t k = 0; t != NULL && k < rq->msg.nkeys; k++) {
        char buf[PX_MAX_ROUTE_KEY];
        size_t len = 0;
        uint64_t h;
        const char *key = px_rq_key_bytes(rq, k, buf, sizeof(buf), &len);
        if (key != NULL && px_rq_key_hash(rq, k, &h)) /* kept for the routes after */
            ch__topk_add(t, h, key, len, 1);
    }
}

/* Prefix routing (route_prefix.h) of rq on a listener with routes: 0, rq->pool is now the pool
 * of its keys (of the transaction open, for a keyless command inside one); 1, it is served
 * across pools by px_route_prefix; -1, refused (answered). A transaction or WATCH stays in the
 * pool of its first key, keys keeping their prefix. Cost: a match per key. */
static int route_by_prefix(px_rq *rq, px_session *ss)
{
    const px_msg *m = &rq->msg;
    char why[240];
    px_pool *to = NULL;
    int rc = px_prefix_pick(rq->pool->tree->prefix, rq, &to, why, sizeof(why));
    bool pinned = px_session_pinned(ss);
    if (rc == 0 && m->nkeys == 0 && pinned) {
        to = px_session_pool(ss);
    } else if (rc == 0 && m->nkeys > 0 && ss != NULL && !px_session_adopt(ss, to)) {
        snprintf(why, sizeof(why), "chash-proxy: this command's keys go to pool %s (routes), "
                 "the open transaction or WATCH is on pool %s: a transaction stays in one pool",
                 to->conf->name, px_session_pool(ss)->conf->name);
        rc = -1;
    } else if (rc == 1 && (pinned || m->cmd->session != PX_SES_NONE)) {
        snprintf(why, sizeof(why), "chash-proxy: inside a transaction or WATCH, keys must go to "
                 "one pool and keep their prefix (routes)");
        rc = -1;
    }
    if (rc < 0)
        px_session_refuse(ss, rq, PX_ERR_CLIENT, why);
    else if (rc == 0)
        rq->pool = to;
    return rc;
}

void px_dispatch(px_rq *rq, px_local *ctx, px_session **session, const px_session_hooks *hooks)
{
    const px_msg *m = &rq->msg;
    px_session *ss = session != NULL ? *session : NULL;
    if (m->cmd == NULL) {
        char name[72];
        px_printable_name(name, sizeof(name), m->raw + m->args[0].off, m->args[0].len);
        px_session_refuse(ss, rq, PX_ERR_UNKNOWN, name);
        return;
    }
    if (!auth_gate_passes(rq, ctx)) {
        px_rq_fail(rq, PX_ERR_NOAUTH, "");
        return;
    }
    if (m->reject[0] != '\0') {
        px_session_refuse(ss, rq, m->reject_server ? PX_ERR_SERVER : PX_ERR_CLIENT, m->reject);
        return;
    }
    /* A listener with routes: the request goes to its keys' pool, or across pools. */
    int by_prefix = 0;
    if (rq->pool->tree != NULL && rq->pool->tree->prefix != NULL &&
        m->cmd->cls != PX_CLASS_LOCAL && (by_prefix = route_by_prefix(rq, ss)) < 0)
        return;
    /* A pool that cannot prove its membership current answers nothing from it (docs/FLEET.md,
     * "Fencing"); a transaction it interrupts is discarded, as on any refusal inside MULTI.
     * The clock is the read's: taken after this request's bytes arrived. */
    if (m->cmd->cls != PX_CLASS_LOCAL && px_pool_fenced(rq->pool, px_io_hrtime(rq->pool->io))) {
        px_pool *pool = rq->pool;
        char why[200];
        snprintf(why, sizeof(why), "chash-proxy: %s; not serving pool %s",
                 px_fence_text(PX_ATOMIC_LOAD(pool->shared->fence_why)), pool->conf->name);
        pool->m.fence_refused++;
        px_session_refuse(ss, rq, PX_ERR_SERVER, why);
        return;
    }
    /* Transactions, subscriptions, and whatever comes while one is open: the session's. */
    if (session != NULL && *session == NULL && m->cmd->session != PX_SES_NONE &&
        (*session = px_session_new(rq->pool, rq->cid, hooks)) == NULL) {
        px_rq_fail(rq, PX_ERR_SERVER, "out of memory");
        return;
    }
    if (session != NULL && *session != NULL) {
        ctx->subscribed = px_session_subscribed(*session);
        if (px_session_dispatch(*session, rq))
            return;
    }
    if (m->cmd->cls == PX_CLASS_LOCAL) {
        px_buf out = {0};
        int rc = rq->codec->answer_local(ctx, m, &out);
        rq->close_after = ctx->close;
        if (!ctx->silent) /* CLIENT REPLY ON: replied to whatever the mode was */
            rq->msg.flags &= ~(uint32_t)PX_MSG_SILENT;
        if (rc < 0)
            px_rq_fail(rq, PX_ERR_SERVER, "out of memory");
        else
            px_rq_finish(rq, out.p, out.len, rc == 1);
        px_buf_free(&out);
        return;
    }
    if (m->cmd->session != PX_SES_NONE) { /* no session here */
        char name[72];
        px_printable_name(name, sizeof(name), m->raw + m->args[0].off, m->args[0].len);
        px_rq_fail(rq, PX_ERR_UNKNOWN, name);
        return;
    }
    if (by_prefix == 1) {
        px_rq_start(rq, &px_route_prefix);
        return;
    }
    /* SCAN walks the servers, SCRIPT goes to all of them; the rest takes the pool's route. */
    px_route *rt = (m->cmd->flags & PX_CMD_SCAN) != 0       ? &px_route_scan
                   : m->cmd->merge == PX_MERGE_EVERY ? &px_route_all
                                                     : rq->pool->route;
    if (rt == rq->pool->route && px_session_refuse_unstaged(rq))
        return; /* it writes keys it does not name, and its keys move under a staged change */
    if (rt == rq->pool->route)
        count_keys(rq);
    px_rq_start(rq, rt);
}

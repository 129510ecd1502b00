/* SPDX-License-Identifier: Apache-2.0 */
/*
 * session.c — a client's session (session.h): what decides that a request is the session's,
 * pub/sub mode's refusals, and transactions (MULTI, EXEC, DISCARD, WATCH, UNWATCH) on one
 * server. Subscriptions are pubsub.c's.
 *
 * A transaction runs on one server, on a connection dedicated to the client (MULTI state and
 * WATCHed keys live in a Redis connection: on a shared one they would catch other clients'
 * commands). The first command with keys picks the server (the owner of its keys: give them a
 * common hash tag); every later key must have the same owner. States:
 *
 *   NONE     no transaction. WATCH opens the connection on its keys' server (-> WATCHING); MULTI
 *            is answered +OK by the proxy (-> PENDING): the server is not known yet.
 *   WATCHING WATCH sent on the connection. Commands whose keys are on its server go on it too
 *            (in order with the WATCH), the others as usual; MULTI goes on it (-> MULTI);
 *            UNWATCH goes on it and releases it (-> NONE).
 *   PENDING  MULTI answered, nothing queued: the first command with keys opens the connection on
 *            their server and sends MULTI then the command (-> MULTI). EXEC answers an empty
 *            array and DISCARD +OK, as Redis does with nothing queued (-> NONE).
 *   MULTI    queueing on the connection. EXEC or DISCARD goes on it and releases it (-> NONE).
 *   ABORTED  the proxy refused a command while queueing (its keys on another server: -CROSSSLOT;
 *            a command it cannot queue on one server: SCAN, SCRIPT, a proxy-local command), or
 *            the connection failed: DISCARD was sent and the connection released; later commands
 *            are refused, EXEC answers -EXECABORT, DISCARD +OK (-> NONE). Nothing was applied.
 *
 * Redis's own errors are kept: EXEC or DISCARD without MULTI, nested MULTI, WATCH inside MULTI.
 *
 * While a membership change is prepared for the pool (px_pool.stage), route_stage.c stages every
 * write of a key that moves under it: written at its owner, then deleted at its next owner, so
 * the copy `chash fleet apply --migrate` makes there cannot outlive it. What goes on a dedicated
 * connection does not pass through it, and neither do the keys a command writes without naming
 * them (a script's undeclared keys, a destination). So, as Redis Cluster answers during a resharding, such writes are refused
 * -TRYAGAIN when a key they name moves (docs/FLEET.md, "What the staging refuses"):
 *   - a write queued in MULTI: the transaction is discarded (EXEC answers -EXECABORT);
 *   - EXEC, when a key the transaction writes moves under a change prepared since it was queued,
 *     or has another owner than the transaction's server (a change committed since): DISCARD is
 *     sent instead, nothing is applied (Redis Cluster checks EXEC's queued keys again too);
 *   - a write after WATCH, which goes on the watched connection to stay in order with the WATCH;
 *   - outside a transaction, a command that may write keys it does not name, when one it names
 *     moves (px_session_refuse_unstaged): a script that may write (EVAL, EVALSHA), and the
 *     destination of RPOPLPUSH, LMOVE, SMOVE, SORT ... STORE (px_codec.writes_unnamed).
 * Reads, EVAL_RO, and writes of keys that stay are served as always. Keys written unnamed are
 * followed only through a named key's hash tag: with hash_tag, a key of the same tag moves
 * exactly when the named one does; a key of another tag reaches the command's server but not its
 * own owner, with or without a change.
 *
 * The near cache of hot keys (route_near.c) is before the route tree, which these connections go
 * past: EXEC makes it forget every key the transaction's writes write (ss->near), and a write
 * after WATCH its own keys, when sent and again when answered (near_write.h), as the tree does
 * for any write; a queued command is applied only at EXEC.
 *
 * Invariants: a dedicated connection carries one client's requests only, and is released (closed
 * once its FIFO is empty, never reused) by EXEC, DISCARD, UNWATCH, an abort or the client's close,
 * so no other client ever runs inside someone's MULTI or WATCH. A request sent on it completes
 * through its fragment (fwd_done), which touches only the request: the session may be gone by
 * then (the client closed), and the request, whose owner let go, is then freed on completion.
 * State moves at dispatch, in the client's request order, not at replies: a client pipelining
 * MULTI ... EXEC MULTI ... EXEC has the second transaction on a new connection while the first's
 * EXEC reply is still on its way.
 */
#include "session.h"
#include "near_write.h"
#include "pubsub.h"
#include "route_pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum txn_state { TXN_NONE, TXN_WATCHING, TXN_PENDING, TXN_MULTI, TXN_ABORTED } txn_state;

struct px_session {
    px_pool *pool;
    uint64_t cid;
    px_session_hooks hooks;
    txn_state txn;
    bool in_multi;  /* ABORTED: MULTI was given (else a WATCH's connection failed before it) */
    px_conn *conn;  /* the transaction's (WATCHING, MULTI); its server: conn->server */
    uint8_t dialect; /* the client's (px_msg.dialect) at its last request: its connections
                        speak it, and it cannot change while they are open (px_session_pinned) */
    px_pubsub *pubsub; /* NULL until the first subscription */
    /* MULTI: the routing bytes of every key the queued writes name, each as a uint32_t length
     * then the bytes, for EXEC to check again (exec_check_keys). Emptied when the transaction ends.
     * Its size: those keys' bytes, less than the server holds for the queued commands. */
    px_buf written;
    /* MULTI: what EXEC makes the near cache forget (near_write.h): the hashes of every key the
     * queued writes write (uint64_t each, named or not: 8 bytes a key), or every key
     * (near_all: a queued script). Emptied when the transaction ends. */
    px_buf near;
    bool near_all;
};

/* ---- the near cache ---------------------------------------------------------------------------- */

/* What a request sent on the dedicated connection makes the near cache forget when it is sent
 * and again when it is answered (near_write.h, as the route tree's writes): a write after WATCH
 * its own keys (near_own), EXEC the keys its transaction's writes write (ss->near), or every key
 * (near_every: a queued script, or memory short). Carried by the request's fragment (its tag);
 * one made for an EXEC is freed at the answer. */
typedef struct near_keys {
    bool all;
    px_buf kh; /* uint64_t each */
} near_keys;

static near_keys near_own, near_every = {.all = true};

static void forget(px_rq *rq, const near_keys *nk, bool sent)
{
    if (nk == &near_own)
        px_near_forget(rq, SIZE_MAX, sent);
    else if (nk != NULL)
        px_near_forget_hashes(rq->pool, (const uint64_t *)(const void *)nk->kh.p,
                              nk->kh.len / sizeof(uint64_t), nk->all, sent);
}

static void near_keys_free(near_keys *nk)
{
    if (nk != NULL && nk != &near_own && nk != &near_every) {
        px_buf_free(&nk->kh);
        free(nk);
    }
}

/* What EXEC makes the near cache forget: the transaction's (ss->near, taken). */
static near_keys *exec_keys(px_session *ss)
{
    near_keys *nk = ss->near_all ? NULL : malloc(sizeof(*nk));
    if (nk == NULL) {
        px_buf_free(&ss->near);
        return &near_every;
    }
    *nk = (near_keys){.kh = ss->near};
    ss->near = (px_buf){0};
    return nk;
}

/* The transaction's record for the near cache is dropped (it ended, or was discarded). */
static void near_clear(px_session *ss)
{
    px_buf_free(&ss->near);
    ss->near_all = false;
}

/* ---- sending on the dedicated connection ------------------------------------------------------- */

/* The reply to a request sent on a dedicated connection: the request's whole reply (no merge:
 * the command went whole to one server). What it wrote is forgotten by the near cache first. */
static void fwd_done(px_frag *f, const px_reply *r)
{
    px_rq *rq = f->ctx;
    forget(rq, f->tag, false);
    near_keys_free(f->tag);
    if (r->kind == PX_REPLY_FAILED) {
        char why[256];
        size_t n = r->len < sizeof(why) - 1 ? r->len : sizeof(why) - 1;
        memcpy(why, r->p, n);
        why[n] = '\0';
        px_rq_fail(rq, PX_ERR_SERVER, why);
        return;
    }
    px_rq_finish(rq, r->p, r->len, r->kind == PX_REPLY_ERROR);
}

/* A request the proxy itself sends (MULTI, DISCARD): its reply is not the client's. */
static void own_done(px_frag *f, const px_reply *r)
{
    (void)f;
    (void)r;
}

/* rq whole, as the client sent it: every key, in order. */
static int encode_whole(void *arg, px_buf *out, uint8_t *expect)
{
    const px_rq *rq = arg;
    size_t n = rq->msg.nkeys;
    uint32_t stack[64] = {0}, *keys = n <= 64 ? stack : malloc(n * sizeof(*keys));
    if (keys == NULL)
        return -1;
    for (size_t i = 0; i < n; i++)
        keys[i] = (uint32_t)i;
    int rc = rq->codec->encode_request(out, &rq->msg, keys, n, expect);
    if (keys != stack)
        free(keys);
    return rc;
}

typedef struct op_arg {
    const px_codec *codec;
    px_session_op op;
} op_arg;

static int encode_own(void *arg, px_buf *out, uint8_t *expect)
{
    const op_arg *a = arg;
    *expect = 0;
    return a->codec->encode_op(out, a->op, NULL, NULL, 0);
}

/* Sends rq on the transaction's connection; its reply completes it. nk: what it makes the near
 * cache forget (NULL: nothing), now and at its reply; taken. */
static void send_rq(px_session *ss, px_rq *rq, near_keys *nk)
{
    forget(rq, nk, true);
    px_frag *f = px_frag_new(1);
    if (f == NULL) {
        near_keys_free(nk);
        px_rq_fail(rq, PX_ERR_SERVER, "out of memory");
        return;
    }
    f->done = fwd_done;
    f->ctx = rq;
    f->tag = nk;
    f->cid = ss->cid;
    if (px_conn_send(ss->conn, f, encode_whole, rq) != 0) {
        px_frag_free(f);
        near_keys_free(nk);
        px_rq_fail(rq, PX_ERR_SERVER, "out of memory");
    }
}

/* Sends the proxy's own op (MULTI, DISCARD) on the transaction's connection. 0, or -1. */
static int send_own(px_session *ss, px_session_op op)
{
    px_frag *f = px_frag_new(0);
    if (f == NULL)
        return -1;
    f->done = own_done;
    f->cid = ss->cid;
    op_arg a = {ss->pool->codec, op};
    if (px_conn_send(ss->conn, f, encode_own, &a) != 0) {
        px_frag_free(f);
        return -1;
    }
    return 0;
}

static void release(px_session *ss)
{
    px_conn_release(ss->conn);
    ss->conn = NULL;
    px_buf_free(&ss->written); /* the transaction, if any, ends with its connection */
    near_clear(ss);
}

/* The transaction's connection failed: what was queued on it is gone, and so is a WATCH. */
static void conn_closed(void *ctx, px_conn *c, const char *why)
{
    (void)why;
    px_session *ss = ctx;
    if (ss->conn != c)
        return;
    ss->conn = NULL;
    px_buf_free(&ss->written);
    near_clear(ss);
    ss->in_multi = ss->txn == TXN_MULTI;
    ss->txn = TXN_ABORTED;
}

/* Opens the transaction's connection to server s. 0, or -1. */
static int open_conn(px_session *ss, px_server *s)
{
    px_conn_owner owner = {.push = NULL, .closed = conn_closed, .ctx = ss};
    ss->conn = px_conn_dedicated(s, ss->dialect, &owner);
    return ss->conn != NULL ? 0 : -1;
}

/* ---- keys ---------------------------------------------------------------------------------------- */

/* The server owning every key of rq, or NULL (*cross: their owners differ). */
static px_server *keys_server(const px_session *ss, const px_rq *rq, bool *cross)
{
    const px_pool *pool = ss->pool;
    size_t first = SIZE_MAX;
    *cross = false;
    for (size_t k = 0; k < rq->msg.nkeys; k++) {
        const px_span *key = &rq->msg.keys[k];
        size_t o = ch_lookup(pool->table, rq->msg.raw + key->off, key->len);
        if (first == SIZE_MAX) {
            first = o;
        } else if (o != first) {
            *cross = true;
            return NULL;
        }
    }
    return first < pool->nservers ? &pool->servers[first] : NULL;
}

/* ---- what a staged change refuses ---------------------------------------------------------------- */

/* Whether a key rq names moves under the change its pool stages (px_route_pool_moves, as
 * route_stage.c decides). Cost: one test when nothing is staged, else two lookups per key. */
static bool names_moving_key(const px_rq *rq)
{
    if (rq->pool->stage.table == NULL)
        return false;
    for (size_t k = 0; k < rq->msg.nkeys; k++) {
        char buf[PX_MAX_ROUTE_KEY];
        size_t len;
        const char *key = px_rq_key_bytes(rq, k, buf, sizeof(buf), &len);
        if (key != NULL && px_route_pool_moves(rq->pool, key, len))
            return true;
    }
    return false;
}

/* Refuses rq -TRYAGAIN: a write the staging cannot follow, `what` saying which. A transaction
 * open is the caller's to end. */
static void refuse_unstaged(px_rq *rq, const char *what)
{
    char msg[400];
    snprintf(msg, sizeof(msg),
             "pool %s is staging a membership change and %s; refused only until the change is "
             "committed or withdrawn: retry then",
             rq->pool->conf->name, what);
    rq->pool->m.warm.stage_refused++;
    px_rq_fail(rq, PX_ERR_TRYAGAIN, msg);
}

/* Records the keys of write rq, queued in the transaction, for exec_check_keys. 0, or -1 when out
 * of memory. */
static int record_written(px_session *ss, const px_rq *rq)
{
    for (size_t k = 0; k < rq->msg.nkeys; k++) {
        char buf[PX_MAX_ROUTE_KEY];
        size_t len;
        const char *key = px_rq_key_bytes(rq, k, buf, sizeof(buf), &len);
        uint32_t len32 = (uint32_t)len;
        if (key == NULL)
            continue; /* a key that does not decode (memcached's: no transactions) */
        if (px_buf_append(&ss->written, (const char *)&len32, sizeof(len32)) != 0 ||
            px_buf_append(&ss->written, key, len) != 0)
            return -1;
    }
    return 0;
}

typedef enum exec_check {
    EXEC_RUNS,  /* every key it writes is on its server, none moves under a staged change */
    EXEC_OWNER, /* a key it writes has another owner now: a change was committed since */
    EXEC_MOVES, /* a key it writes moves under the change staged now (prepared since) */
} exec_check;

/* Whether the transaction queued on ss->conn may run now. Cost: one lookup per key written, two
 * more while a change is staged. */
static exec_check exec_check_keys(const px_session *ss)
{
    const px_pool *pool = ss->pool;
    for (size_t at = 0; at < ss->written.len;) {
        uint32_t len;
        memcpy(&len, ss->written.p + at, sizeof(len));
        const char *key = ss->written.p + at + sizeof(len);
        at += sizeof(len) + len;
        size_t o = ch_lookup(pool->table, key, len);
        if (o >= pool->nservers || &pool->servers[o] != ss->conn->server)
            return EXEC_OWNER;
        if (px_route_pool_moves(pool, key, len))
            return EXEC_MOVES;
    }
    return EXEC_RUNS;
}

/* ---- transactions --------------------------------------------------------------------------------- */

static void answer(px_rq *rq, px_txn_reply what)
{
    px_buf b = {0};
    if (rq->codec->encode_txn(&b, rq->msg.dialect, what) != 0)
        px_rq_fail(rq, PX_ERR_SERVER, "out of memory");
    else
        px_rq_finish(rq, b.p, b.len, what == PX_TXN_EXECABORT);
    px_buf_free(&b);
}

/* DISCARD on the transaction's connection, if open (nothing applied), which is released. */
static void discard_conn(px_session *ss)
{
    if (ss->conn != NULL) {
        send_own(ss, PX_SES_DISCARD); /* out of memory: the close discards it as well */
        release(ss);
    }
}

/* The transaction is refused while queueing: discarded; EXEC will answer -EXECABORT. rq is
 * answered by the caller. */
static void discard_txn(px_session *ss)
{
    discard_conn(ss);
    ss->txn = TXN_ABORTED;
    ss->in_multi = true;
}

/* discard_txn, and rq gets why. */
static void abort_txn(px_session *ss, px_rq *rq, px_error why, const char *msg)
{
    discard_txn(ss);
    px_rq_fail(rq, why, msg);
}

/* What Redis itself answers to a transaction command out of place (NULL: it is in place). */
static const char *misplaced(const px_session *ss, px_session_op op)
{
    bool multi = ss->txn == TXN_PENDING || ss->txn == TXN_MULTI ||
                 (ss->txn == TXN_ABORTED && ss->in_multi);
    if (op == PX_SES_EXEC && !multi)
        return "EXEC without MULTI";
    if (op == PX_SES_DISCARD && !multi)
        return "DISCARD without MULTI";
    if (op == PX_SES_MULTI && multi)
        return "MULTI calls can not be nested";
    if (op == PX_SES_WATCH && multi)
        return "WATCH inside MULTI is not allowed";
    return NULL;
}

/* A command that is not a transaction command, inside MULTI (PENDING, MULTI, ABORTED). */
static void queue_command(px_session *ss, px_rq *rq)
{
    const px_cmd *c = rq->msg.cmd;
    if (ss->txn == TXN_ABORTED) {
        px_rq_fail(rq, PX_ERR_CLIENT,
                   "Transaction discarded by the proxy because of previous errors (EXEC will "
                   "answer EXECABORT)");
        return;
    }
    if (c->cls == PX_CLASS_LOCAL || (c->flags & PX_CMD_SCAN) != 0 ||
        c->merge == PX_MERGE_EVERY || rq->msg.nkeys == 0) {
        abort_txn(ss, rq, PX_ERR_CLIENT,
                  "this command cannot be queued in a transaction through the proxy (only "
                  "commands with keys, all on one server); transaction discarded");
        return;
    }
    bool cross;
    px_server *s = keys_server(ss, rq, &cross);
    if (s == NULL || (ss->conn != NULL && ss->conn->server != s)) {
        abort_txn(ss, rq, s == NULL && !cross ? PX_ERR_SERVER : PX_ERR_CROSS_SERVER,
                  "no backend available");
        return;
    }
    if (!c->retry && names_moving_key(rq)) {
        discard_txn(ss);
        refuse_unstaged(rq, "this command writes a key that moves under it, which a transaction "
                            "cannot stage: the transaction is discarded (EXEC answers "
                            "EXECABORT)");
        return;
    }
    if (ss->txn == TXN_PENDING) { /* the first command with keys picks the server */
        if (open_conn(ss, s) != 0 || send_own(ss, PX_SES_MULTI) != 0) {
            abort_txn(ss, rq, PX_ERR_SERVER, "cannot open a connection to the backend");
            return;
        }
        ss->txn = TXN_MULTI;
    }
    if (!c->retry && record_written(ss, rq) != 0) {
        abort_txn(ss, rq, PX_ERR_SERVER, "out of memory");
        return;
    }
    if (px_near_writes(rq) && !ss->near_all && !px_near_write_hashes(rq, &ss->near))
        ss->near_all = true;
    send_rq(ss, rq, NULL); /* queued: applied at EXEC */
}

static void txn_dispatch(px_session *ss, px_rq *rq)
{
    px_session_op op = (px_session_op)rq->msg.cmd->session;
    const char *err = misplaced(ss, op);
    if (err != NULL) {
        px_rq_fail(rq, PX_ERR_CLIENT, err);
        return;
    }
    switch (op) {
    case PX_SES_MULTI:
        if (ss->txn == TXN_WATCHING) {
            send_rq(ss, rq, NULL);
            ss->txn = TXN_MULTI;
        } else if (ss->txn == TXN_ABORTED) { /* a WATCH's connection was lost: refused */
            ss->in_multi = true;
            answer(rq, PX_TXN_OK);
        } else {
            ss->txn = TXN_PENDING;
            answer(rq, PX_TXN_OK);
        }
        return;
    case PX_SES_EXEC:
    case PX_SES_DISCARD: {
        exec_check ok = ss->txn == TXN_MULTI && op == PX_SES_EXEC ? exec_check_keys(ss)
                                                                   : EXEC_RUNS;
        if (ok != EXEC_RUNS) { /* DISCARD in EXEC's place: nothing applied */
            discard_conn(ss);
            if (ok == EXEC_MOVES)
                refuse_unstaged(rq, "a key this transaction writes moves under it, which a "
                                    "transaction cannot stage: discarded, nothing applied");
            else
                px_rq_fail(rq, PX_ERR_TRYAGAIN,
                           "a key this transaction writes changed owner while it was queued (a "
                           "membership change was committed): it is discarded, nothing applied; "
                           "retry it");
        } else if (ss->txn == TXN_MULTI) {
            send_rq(ss, rq, op == PX_SES_EXEC ? exec_keys(ss) : NULL);
            release(ss);
        } else {
            answer(rq, op == PX_SES_DISCARD       ? PX_TXN_OK
                       : ss->txn == TXN_PENDING ? PX_TXN_EMPTY
                                                : PX_TXN_EXECABORT);
        }
        ss->txn = TXN_NONE;
        ss->in_multi = false;
        return;
    }
    case PX_SES_WATCH: {
        bool cross;
        px_server *s = keys_server(ss, rq, &cross);
        if (s == NULL) {
            px_rq_fail(rq, cross ? PX_ERR_CROSS_SERVER : PX_ERR_SERVER, "no backend available");
            return;
        }
        if (ss->txn == TXN_ABORTED) {
            px_rq_fail(rq, PX_ERR_SERVER, "the connection of an earlier WATCH failed: UNWATCH "
                                          "first");
            return;
        }
        if (ss->txn == TXN_WATCHING && ss->conn->server != s) {
            px_rq_fail(rq, PX_ERR_CROSS_SERVER, "");
            return;
        }
        if (ss->txn == TXN_NONE && open_conn(ss, s) != 0) {
            px_rq_fail(rq, PX_ERR_SERVER, "cannot open a connection to the backend");
            return;
        }
        ss->txn = TXN_WATCHING;
        send_rq(ss, rq, NULL);
        return;
    }
    case PX_SES_UNWATCH:
        if (ss->txn == TXN_MULTI) { /* queued, as Redis does */
            send_rq(ss, rq, NULL);
            return;
        }
        if (ss->txn == TXN_PENDING) {
            queue_command(ss, rq); /* nothing to queue it on: refused */
            return;
        }
        if (ss->txn == TXN_WATCHING) {
            send_rq(ss, rq, NULL);
            release(ss);
        } else {
            answer(rq, PX_TXN_OK);
        }
        ss->txn = TXN_NONE;
        return;
    default:
        px_rq_fail(rq, PX_ERR_SERVER, "not a transaction command");
        return;
    }
}

/* ---- the session ---------------------------------------------------------------------------------- */

void px_session_refuse(px_session *ss, px_rq *rq, px_error why, const char *msg)
{
    if (ss != NULL && (ss->txn == TXN_PENDING || ss->txn == TXN_MULTI))
        abort_txn(ss, rq, why, msg);
    else
        px_rq_fail(rq, why, msg);
}

px_session *px_session_new(px_pool *pool, uint64_t cid, const px_session_hooks *hooks)
{
    px_session *ss = calloc(1, sizeof(*ss));
    if (ss == NULL)
        return NULL;
    ss->pool = pool;
    ss->cid = cid;
    ss->hooks = *hooks;
    return ss;
}

void px_session_free(px_session *ss)
{
    if (ss == NULL)
        return;
    release(ss);
    px_pubsub_free(ss->pubsub);
    free(ss);
}

bool px_session_subscribed(const px_session *ss)
{
    return ss != NULL && ss->pubsub != NULL && px_pubsub_count(ss->pubsub) > 0;
}

bool px_session_pinned(const px_session *ss)
{
    return ss != NULL && (ss->conn != NULL || ss->txn != TXN_NONE ||
                          (ss->pubsub != NULL && px_pubsub_count(ss->pubsub) > 0));
}

bool px_session_adopt(px_session *ss, px_pool *pool)
{
    if (ss->pool == pool)
        return true;
    if (ss->conn != NULL || ss->txn == TXN_WATCHING || ss->txn == TXN_MULTI)
        return false;
    ss->pool = pool; /* subscriptions keep the pool they were made on (pubsub.c) */
    return true;
}

px_pool *px_session_pool(const px_session *ss)
{
    return ss->pool;
}

bool px_session_dispatch(px_session *ss, px_rq *rq)
{
    const px_cmd *c = rq->msg.cmd;
    px_session_op op = (px_session_op)c->session;
    bool sub_op = op >= PX_SES_SUBSCRIBE && op <= PX_SES_PUNSUBSCRIBE;
    ss->dialect = rq->msg.dialect;
    /* RESP2's pub/sub mode; a RESP3 client subscribed goes on with any command (its messages
     * are pushes, which its replies cannot be mistaken for). */
    if (px_session_subscribed(ss) && !sub_op && rq->msg.dialect == PX_DIALECT_RESP2) {
        if ((c->flags & PX_CMD_SUBSCRIBED) != 0)
            return false; /* PING (answered as in pub/sub mode), QUIT */
        char name[72], msg[200];
        px_printable_name(name, sizeof(name), rq->msg.raw + rq->msg.args[0].off,
                          rq->msg.args[0].len);
        snprintf(msg, sizeof(msg), "Can't execute '%s': only (P)SUBSCRIBE / (P)UNSUBSCRIBE / "
                                   "PING / QUIT are allowed in this context", name);
        px_rq_fail(rq, PX_ERR_CLIENT, msg);
        return true;
    }
    if (sub_op) {
        if (ss->txn != TXN_NONE) {
            px_rq_fail(rq, PX_ERR_CLIENT, "subscriptions are not served inside a transaction or "
                                          "after WATCH by the proxy");
            return true;
        }
        if (ss->pubsub == NULL &&
            (ss->pubsub = px_pubsub_new(ss->pool, ss->cid, &ss->hooks)) == NULL) {
            px_rq_fail(rq, PX_ERR_SERVER, "out of memory");
            return true;
        }
        px_pubsub_dispatch(ss->pubsub, rq);
        return true;
    }
    if (op != PX_SES_NONE) {
        txn_dispatch(ss, rq);
        return true;
    }
    switch (ss->txn) {
    case TXN_NONE:
        return false;
    case TXN_ABORTED:
        if (!ss->in_multi)
            return false; /* only a WATCH was lost: commands run as usual */
        break;
    case TXN_WATCHING: {
        /* Commands on the watched server stay in order with the WATCH on its connection. */
        bool cross;
        if (c->cls == PX_CLASS_LOCAL || rq->msg.nkeys == 0 || (c->flags & PX_CMD_SCAN) != 0 ||
            c->merge == PX_MERGE_EVERY || keys_server(ss, rq, &cross) != ss->conn->server)
            return false;
        if (!c->retry && names_moving_key(rq))
            refuse_unstaged(rq, "this command writes a key that moves under it, on the "
                                "connection of a WATCH, where it cannot be staged");
        else
            send_rq(ss, rq, px_near_writes(rq) ? &near_own : NULL);
        return true;
    }
    default:
        break;
    }
    if ((c->flags & PX_CMD_AUTH_EXEMPT) != 0 && (c->flags & PX_CMD_SUBSCRIBED) != 0)
        return false; /* QUIT: the client closes, and its transaction with it */
    queue_command(ss, rq);
    return true;
}

bool px_session_refuse_unstaged(px_rq *rq)
{
    const char *unnamed = NULL;
    if (rq->pool->stage.table == NULL || rq->codec->writes_unnamed == NULL ||
        (unnamed = rq->codec->writes_unnamed(&rq->msg, NULL, NULL)) == NULL ||
        !names_moving_key(rq))
        return false;
    char what[240];
    snprintf(what, sizeof(what), "a key of this command moves under it: %s", unnamed);
    refuse_unstaged(rq, what);
    return true;
}

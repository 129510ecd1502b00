/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mig_redis.c — the Redis driver of `chash migrate`, over hiredis.
 *
 * Enumeration is SCAN with a COUNT: a cursor the server hands back, so a lost connection or a
 * rerun goes on from it. A batch's moved keys are copied in two pipelines: DUMP + PTTL of every
 * key to the source, then RESTORE key ttl payload [REPLACE] of every key to its new owner, all
 * written before any reply is read. So a batch costs about one round trip per server it
 * touches, not one per key; memory is the batch's payloads (the batch size bounds it).
 *
 * RESTORE without REPLACE refuses a key that exists (BUSYKEY): the key was written at its new
 * owner after the switch and is newer than the source's copy, so it is counted "present". The
 * TTL given to RESTORE is the source's PTTL less the time since it was read, so a copy never
 * outlives its original: ch_resp_restore_ttl (proxy/proto/resp.h), the proxy's warm-up rule.
 */
#define _POSIX_C_SOURCE 200809L
#include "migrate.h"

#include <hiredis/hiredis.h>
#include <resp.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct mig_conn {
    redisContext *rc;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void reply_error(const redisReply *r, char *err, size_t len)
{
    if (r->type == REDIS_REPLY_ERROR)
        snprintf(err, len, "%.*s", (int)(r->len < 200 ? r->len : 200), r->str);
    else
        snprintf(err, len, "unexpected reply type %d", r->type);
}

/* One command, its reply checked for an error. Returns the reply (to free) or NULL with err. */
static redisReply *command(redisContext *rc, char *err, size_t len, int argc, const char **argv,
                           const size_t *argvlen)
{
    redisReply *r = redisCommandArgv(rc, argc, argv, argvlen);
    if (r == NULL) {
        snprintf(err, len, "%s", rc->errstr[0] ? rc->errstr : "connection lost");
        return NULL;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        reply_error(r, err, len);
        freeReplyObject(r);
        return NULL;
    }
    return r;
}

static mig_conn *r_open(const mig_server *s, const mig_auth *a, char *err, size_t errlen)
{
    struct timeval tv = {a->timeout_ms / 1000, (a->timeout_ms % 1000) * 1000};
    redisContext *rc = s->port == 0 ? redisConnectUnixWithTimeout(s->host, tv)
                                    : redisConnectWithTimeout(s->host, s->port, tv);
    if (rc == NULL || rc->err) {
        snprintf(err, errlen, "cannot connect: %s", rc ? rc->errstr : "out of memory");
        redisFree(rc);
        return NULL;
    }
    redisSetTimeout(rc, tv);
    redisReply *r;
    if (a->password != NULL) {
        /* The password goes on the wire only; an error names the refusal, never the password. */
        const char *argv[] = {"AUTH", a->password};
        size_t lens[] = {4, strlen(a->password)};
        char why[MIG_ERR_LEN];
        if ((r = command(rc, why, sizeof(why), 2, argv, lens)) == NULL) {
            snprintf(err, errlen, "AUTH (redis_auth) refused: %s", why);
            redisFree(rc);
            return NULL;
        }
        freeReplyObject(r);
    }
    if (a->db != 0) {
        char db[16];
        snprintf(db, sizeof(db), "%d", a->db);
        const char *argv[] = {"SELECT", db};
        size_t lens[] = {6, strlen(db)};
        char why[MIG_ERR_LEN];
        if ((r = command(rc, why, sizeof(why), 2, argv, lens)) == NULL) {
            snprintf(err, errlen, "SELECT %d (redis_db) refused: %s", a->db, why);
            redisFree(rc);
            return NULL;
        }
        freeReplyObject(r);
    }
    /* A password-protected server answers NOAUTH only to a command: ask it one now, so that a
     * missing redis_auth is named at the start instead of as failed keys. */
    const char *argv[] = {"PING"};
    size_t lens[] = {4};
    char why[MIG_ERR_LEN];
    if ((r = command(rc, why, sizeof(why), 1, argv, lens)) == NULL) {
        snprintf(err, errlen, "PING refused: %s", why);
        redisFree(rc);
        return NULL;
    }
    freeReplyObject(r);
    mig_conn *c = malloc(sizeof(*c));
    if (c == NULL) {
        snprintf(err, errlen, "out of memory");
        redisFree(rc);
        return NULL;
    }
    c->rc = rc;
    return c;
}

static void r_close(mig_conn *c)
{
    if (c) {
        redisFree(c->rc);
        free(c);
    }
}

static uint64_t r_count(mig_conn *c)
{
    const char *argv[] = {"DBSIZE"};
    size_t lens[] = {6};
    char err[MIG_ERR_LEN];
    redisReply *r = command(c->rc, err, sizeof(err), 1, argv, lens);
    uint64_t n = r && r->type == REDIS_REPLY_INTEGER && r->integer > 0 ? (uint64_t)r->integer : 0;
    freeReplyObject(r);
    return n;
}

static int r_scan(mig_conn *c, mig_cursor *cur, size_t hint, mig_batch *b, char *err,
                  size_t errlen)
{
    char pos[24], count[24];
    snprintf(pos, sizeof(pos), "%" PRIu64, cur->pos);
    snprintf(count, sizeof(count), "%zu", hint);
    const char *argv[] = {"SCAN", pos, "COUNT", count};
    size_t lens[] = {4, strlen(pos), 5, strlen(count)};
    redisReply *r = command(c->rc, err, errlen, 4, argv, lens);
    if (r == NULL)
        return -1;
    int rc = -1;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY) {
        snprintf(err, errlen, "SCAN: unexpected reply");
        goto out;
    }
    char *end;
    uint64_t next = strtoull(r->element[0]->str, &end, 10);
    const redisReply *keys = r->element[1];
    for (size_t i = 0; i < keys->elements; i++) {
        const redisReply *k = keys->element[i];
        if (k->type != REDIS_REPLY_STRING || !mig_batch_add(b, k->str, k->len, -1, 0)) {
            snprintf(err, errlen, "SCAN: %s", k->type != REDIS_REPLY_STRING ? "a key that is not "
                                                                             "a string"
                                                                           : "out of memory");
            goto out;
        }
    }
    cur->pos = next;
    cur->done = next == 0;
    rc = 0;
out:
    freeReplyObject(r);
    return rc;
}

/* Reads the next pipelined reply; NULL when the connection failed. */
static redisReply *next_reply(redisContext *rc)
{
    void *r = NULL;
    if (redisGetReply(rc, &r) != REDIS_OK)
        return NULL;
    return r;
}

static bool pending(const mig_key *k)
{
    return k->state == MIG_TODO || k->state == MIG_RETRY;
}

/* Deletes, at each new owner, the keys of b marked in gone[] (their copies are dropped); a key
 * whose delete fails is MIG_FAILED (its copy may be older than the source: the run fails). A
 * delete done leaves the key's state as the caller set it. */
static void r_drop(mig_conn **dst, size_t ndst, mig_batch *b, const bool *gone,
                   bool *broken_dst)
{
    for (size_t j = 0; j < ndst; j++) {
        bool lost = false, any = false;
        for (size_t i = 0; i < b->n && !lost; i++) {
            if (!gone[i] || b->keys[i].to != j)
                continue;
            const char *argv[] = {"DEL", b->keys[i].key};
            size_t lens[] = {3, b->keys[i].len};
            lost = redisAppendCommandArgv(dst[j]->rc, 2, argv, lens) != REDIS_OK;
            any = true;
        }
        for (size_t i = 0; i < b->n && any; i++) {
            mig_key *k = &b->keys[i];
            if (!gone[i] || k->to != j)
                continue;
            redisReply *r = lost ? NULL : next_reply(dst[j]->rc);
            if (r == NULL || r->type != REDIS_REPLY_INTEGER) {
                lost = lost || r == NULL;
                k->state = MIG_FAILED;
                const char *why = r == NULL                      ? "connection lost"
                                  : r->type == REDIS_REPLY_ERROR ? r->str
                                                                 : "not an integer reply";
                snprintf(k->err, MIG_ERR_LEN, "written at the source during its copy, and the "
                         "copy at the new owner could not be deleted: %s", why);
            }
            freeReplyObject(r);
        }
        if (lost)
            broken_dst[j] = true;
    }
}

/* 3. The copies confirmed (migrate.h, copy): the source's DUMP of each key copied, read again;
 * a key whose value changed or went since its first read is deleted at its new owner
 * (MIG_CHANGED). A write that lands at the source after this read deletes at the new owner
 * itself (route_stage.c), after the copy: either way the new owner never keeps an older value.
 * The source lost: every copy of the batch is deleted and retried. */
static void r_confirm(mig_conn *src, mig_conn **dst, size_t ndst, mig_batch *b,
                      redisReply **dump, bool *broken_src, bool *broken_dst)
{
    bool *gone = calloc(b->n ? b->n : 1, sizeof(*gone));
    if (gone == NULL) {
        for (size_t i = 0; i < b->n; i++)
            if (b->keys[i].state == MIG_COPIED) {
                b->keys[i].state = MIG_FAILED;
                snprintf(b->keys[i].err, MIG_ERR_LEN, "out of memory to confirm its copy");
            }
        return;
    }
    bool lost = false;
    size_t any = 0;
    for (size_t i = 0; i < b->n && !lost; i++) {
        if (b->keys[i].state != MIG_COPIED || dump[i] == NULL)
            continue;
        const char *argv[] = {"DUMP", b->keys[i].key};
        size_t lens[] = {4, b->keys[i].len};
        lost = redisAppendCommandArgv(src->rc, 2, argv, lens) != REDIS_OK;
        any++;
    }
    for (size_t i = 0; i < b->n && any > 0; i++) {
        mig_key *k = &b->keys[i];
        if (k->state != MIG_COPIED || dump[i] == NULL)
            continue;
        redisReply *r = lost ? NULL : next_reply(src->rc);
        lost = lost || r == NULL;
        bool same = r != NULL && r->type == REDIS_REPLY_STRING && r->len == dump[i]->len &&
                    memcmp(r->str, dump[i]->str, r->len) == 0;
        if (!same) {
            gone[i] = true;
            k->state = lost ? MIG_RETRY : MIG_CHANGED;
        }
        freeReplyObject(r);
    }
    if (lost)
        *broken_src = true;
    r_drop(dst, ndst, b, gone, broken_dst);
    free(gone);
}

static void r_copy(mig_conn *src, mig_conn **dst, size_t ndst, mig_batch *b, bool replace,
                   bool *broken_src, bool *broken_dst)
{
    redisReply **dump = calloc(b->n ? b->n : 1, sizeof(*dump));
    /* Each key's PTTL and when it was read (monotonic ms). */
    int64_t *pttl = calloc(b->n ? b->n : 1, sizeof(*pttl));
    int64_t *read_at = calloc(b->n ? b->n : 1, sizeof(*read_at));
    if (dump == NULL || pttl == NULL || read_at == NULL) {
        for (size_t i = 0; i < b->n; i++)
            if (pending(&b->keys[i])) {
                b->keys[i].state = MIG_FAILED;
                snprintf(b->keys[i].err, MIG_ERR_LEN, "out of memory");
            }
        free(dump);
        free(pttl);
        free(read_at);
        return;
    }

    /* 1. DUMP + PTTL of every pending key, one pipeline to the source. */
    bool lost = false;
    for (size_t i = 0; i < b->n && !lost; i++) {
        mig_key *k = &b->keys[i];
        if (!pending(k))
            continue;
        const char *a1[] = {"DUMP", k->key}, *a2[] = {"PTTL", k->key};
        size_t l1[] = {4, k->len}, l2[] = {4, k->len};
        lost = redisAppendCommandArgv(src->rc, 2, a1, l1) != REDIS_OK ||
               redisAppendCommandArgv(src->rc, 2, a2, l2) != REDIS_OK;
    }
    for (size_t i = 0; i < b->n && !lost; i++) {
        mig_key *k = &b->keys[i];
        if (!pending(k))
            continue;
        redisReply *d = next_reply(src->rc), *t = d ? next_reply(src->rc) : NULL;
        if (t == NULL) {
            freeReplyObject(d);
            lost = true;
            break;
        }
        int64_t now_read = now_ms();
        if (d->type == REDIS_REPLY_NIL || (t->type == REDIS_REPLY_INTEGER && t->integer == -2)) {
            k->state = MIG_EXPIRED;
            freeReplyObject(d);
        } else if (d->type != REDIS_REPLY_STRING || t->type != REDIS_REPLY_INTEGER) {
            k->state = MIG_FAILED;
            reply_error(d->type != REDIS_REPLY_STRING ? d : t, k->err, MIG_ERR_LEN);
            freeReplyObject(d);
        } else {
            dump[i] = d;
            pttl[i] = t->integer;
            read_at[i] = now_read;
        }
        freeReplyObject(t);
    }
    if (lost) {
        *broken_src = true;
        for (size_t i = 0; i < b->n; i++)
            if (pending(&b->keys[i]) && dump[i] == NULL)
                b->keys[i].state = MIG_RETRY;
    }

    /* 2. RESTORE of every key read, one pipeline per new owner. Every pipeline is written out
     * before any reply is read, so the new owners restore at the same time. */
    int64_t now = now_ms();
    bool *sent = calloc(ndst ? ndst : 1, sizeof(*sent));
    bool *dlost = calloc(ndst ? ndst : 1, sizeof(*dlost));
    for (size_t j = 0; j < ndst && sent && dlost; j++) {
        for (size_t i = 0; i < b->n && !dlost[j]; i++) {
            mig_key *k = &b->keys[i];
            if (dump[i] == NULL || k->to != j)
                continue;
            int64_t left;
            if (!ch_resp_restore_ttl(pttl[i], now - read_at[i], &left)) { /* expired on the way */
                k->state = MIG_EXPIRED;
                freeReplyObject(dump[i]);
                dump[i] = NULL;
                continue;
            }
            char ts[24];
            snprintf(ts, sizeof(ts), "%" PRId64, left);
            const char *argv[] = {"RESTORE", k->key, ts, dump[i]->str, "REPLACE"};
            size_t lens[] = {7, k->len, strlen(ts), dump[i]->len, 7};
            dlost[j] = redisAppendCommandArgv(dst[j]->rc, replace ? 5 : 4, argv, lens) != REDIS_OK;
            sent[j] = true;
        }
        /* The replies are 5 bytes each: the server can never block on them while we write. */
        int done = 0;
        while (sent[j] && !dlost[j] && !done)
            dlost[j] = redisBufferWrite(dst[j]->rc, &done) != REDIS_OK;
    }
    for (size_t j = 0; j < ndst && sent && dlost; j++) {
        for (size_t i = 0; i < b->n && sent[j] && !dlost[j]; i++) {
            mig_key *k = &b->keys[i];
            if (dump[i] == NULL || k->to != j)
                continue;
            redisReply *r = next_reply(dst[j]->rc);
            if (r == NULL) {
                dlost[j] = true;
                break;
            }
            bool copied = r->type == REDIS_REPLY_STATUS;
            if (copied) {
                k->state = MIG_COPIED;
            } else if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "BUSYKEY", 7) == 0) {
                k->state = MIG_PRESENT;
            } else {
                k->state = MIG_FAILED;
                reply_error(r, k->err, MIG_ERR_LEN);
            }
            freeReplyObject(r);
            if (!copied) { /* a copy's dump is kept for its confirmation */
                freeReplyObject(dump[i]);
                dump[i] = NULL;
            }
        }
        if (dlost[j])
            broken_dst[j] = true;
    }
    if (sent != NULL && dlost != NULL)
        r_confirm(src, dst, ndst, b, dump, broken_src, broken_dst);
    /* What is left was not answered (a lost connection) or never sent (out of memory). */
    for (size_t i = 0; i < b->n; i++) {
        if (dump[i] == NULL)
            continue;
        if (b->keys[i].state != MIG_TODO && b->keys[i].state != MIG_RETRY) {
            freeReplyObject(dump[i]); /* confirmed or settled by r_confirm */
            continue;
        }
        mig_key *k = &b->keys[i];
        if (sent && dlost) {
            k->state = MIG_RETRY;
        } else {
            k->state = MIG_FAILED;
            snprintf(k->err, MIG_ERR_LEN, "out of memory");
        }
        freeReplyObject(dump[i]);
    }
    free(sent);
    free(dlost);
    free(dump);
    free(pttl);
    free(read_at);
}

static bool unchecked(const mig_key *k)
{
    return k->state != MIG_SKIP && (k->check == MIG_V_TODO || k->check == MIG_V_RETRY);
}

/* PTTL of every unchecked key of b going to `to` (SIZE_MAX: every one), pipelined on rc, into
 * out[]. Returns false when the connection failed. */
static bool pttls(redisContext *rc, mig_batch *b, size_t to, int64_t *out)
{
    bool any = false;
    for (size_t i = 0; i < b->n; i++) {
        mig_key *k = &b->keys[i];
        if (!unchecked(k) || (to != SIZE_MAX && k->to != to))
            continue;
        const char *argv[] = {"PTTL", k->key};
        size_t lens[] = {4, k->len};
        if (redisAppendCommandArgv(rc, 2, argv, lens) != REDIS_OK)
            return false;
        any = true;
    }
    for (size_t i = 0; i < b->n && any; i++) {
        mig_key *k = &b->keys[i];
        if (!unchecked(k) || (to != SIZE_MAX && k->to != to))
            continue;
        redisReply *r = next_reply(rc);
        if (r == NULL)
            return false;
        out[i] = r->type == REDIS_REPLY_INTEGER ? r->integer : INT64_MIN;
        if (r->type == REDIS_REPLY_ERROR)
            reply_error(r, k->err, MIG_ERR_LEN);
        freeReplyObject(r);
    }
    return true;
}

static void r_verify(mig_conn *src, mig_conn **dst, size_t ndst, mig_batch *b, int64_t tol_ms,
                     bool *broken_src, bool *broken_dst)
{
    int64_t *s = calloc(b->n ? b->n : 1, sizeof(*s)), *d = calloc(b->n ? b->n : 1, sizeof(*d));
    if (s == NULL || d == NULL) {
        free(s);
        free(d);
        for (size_t i = 0; i < b->n; i++)
            if (unchecked(&b->keys[i])) {
                b->keys[i].check = MIG_V_ERROR;
                snprintf(b->keys[i].err, MIG_ERR_LEN, "out of memory");
            }
        return;
    }
    /* The clock around each pipeline bounds the time between a key's two readings. */
    int64_t *t0 = calloc(ndst ? ndst : 1, sizeof(*t0)), *t1 = calloc(ndst ? ndst : 1, sizeof(*t1));
    int64_t s0 = now_ms();
    bool src_ok = t0 && t1 && pttls(src->rc, b, SIZE_MAX, s);
    int64_t s1 = now_ms();
    if (!src_ok) {
        *broken_src = t0 && t1;
        for (size_t i = 0; i < b->n; i++)
            if (unchecked(&b->keys[i]))
                b->keys[i].check = MIG_V_RETRY;
        goto out;
    }
    for (size_t j = 0; j < ndst; j++) {
        t0[j] = now_ms();
        bool ok = pttls(dst[j]->rc, b, j, d);
        t1[j] = now_ms();
        if (ok)
            continue;
        broken_dst[j] = true;
        for (size_t i = 0; i < b->n; i++)
            if (unchecked(&b->keys[i]) && b->keys[i].to == j)
                b->keys[i].check = MIG_V_RETRY;
    }
    for (size_t i = 0; i < b->n; i++) {
        mig_key *k = &b->keys[i];
        if (!unchecked(k) || k->check == MIG_V_RETRY)
            continue;
        if (s[i] == INT64_MIN || d[i] == INT64_MIN)
            k->check = MIG_V_ERROR;
        else if (s[i] == -2)
            k->check = MIG_V_GONE;
        else if (d[i] == -2)
            k->check = MIG_V_MISSING;
        else if (!mig_ttl_agrees(s[i], d[i], t0[k->to] - s1, t1[k->to] - s0, tol_ms)) {
            k->check = MIG_V_TTL;
            snprintf(k->err, MIG_ERR_LEN, "TTL %" PRId64 " ms at the source, %" PRId64
                     " ms at the new owner", s[i], d[i]);
        } else
            k->check = MIG_V_OK;
    }
out:
    free(t0);
    free(t1);
    free(s);
    free(d);
}

static void r_cursor_free(mig_cursor *cur)
{
    (void)cur; /* a SCAN cursor is a number */
}

const mig_driver mig_redis_driver = {
    .name = "redis",
    .open = r_open,
    .close = r_close,
    .count = r_count,
    .resumable = true,
    .scan = r_scan,
    .cursor_free = r_cursor_free,
    .copy = r_copy,
    .drop = r_drop,
    .verify = r_verify,
};

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * request.c — single-key requests (get, set, del) with failover, the probes of ejected nodes,
 * and the accounting every request shares.
 *
 * A request: run the due probes; ask the router for the key's candidates (the owner, then the
 * next up nodes of its walk, at most the failover depth); try them in order until one answers.
 * A node failure (connect, timeout, broken connection, unexpected reply) is reported to the
 * health tracker and moves on; an answer, including a miss or an error reply, ends the request.
 */
#define _POSIX_C_SOURCE 200809L

#include "cache_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---- accounting -------------------------------------------------------------------------------- */

void ch__node_failed(ch_cache *c, size_t i, const ch__attempt *a, ch_cache_result *r)
{
    ch__node *node = &c->nodes[i];
    node->count.errors++;
    c->total.errors++;
    if (ch_health_failure(c->health, i, ch__now_ms(), ch__rand(c))) {
        node->count.ejections++;
        c->total.ejections++;
    }
    if (r != NULL) {
        r->fail = a->fail;
        memcpy(r->message, a->message, sizeof(r->message));
    }
}

void ch__served(ch_cache *c, size_t i, size_t owner, ch__outcome outcome, redisReply *reply,
                ch_cache_result *r)
{
    ch__node *node = &c->nodes[i];
    ch_health_success(c->health, i, ch__now_ms());
    r->node = i;
    r->node_id = node->id;
    r->node_addr = node->addr;
    if (i != owner) {
        r->failover = true;
        node->count.failovers++;
        c->total.failovers++;
    }
    switch (outcome) {
    case CH__HIT:
        r->status = CH_CACHE_HIT;
        r->reply_ = reply; /* the value lives in the reply until ch_cache_result_free() */
        r->value = reply->str;
        r->len = reply->len;
        node->count.hits++;
        c->total.hits++;
        return;
    case CH__MISS:
        r->status = CH_CACHE_MISS;
        node->count.misses++;
        c->total.misses++;
        break;
    case CH__ABSENT:
        r->status = CH_CACHE_MISS;
        break;
    case CH__OK:
        r->status = CH_CACHE_OK;
        break;
    case CH__REPLY_ERROR:
    case CH__BAD_REPLY: /* not passed here; treated as an error reply if it were */
        r->status = CH_CACHE_ERROR;
        r->fail = CH_CACHE_FAIL_REPLY;
        snprintf(r->message, sizeof(r->message), "%s %s: %s", node->id, node->addr,
                 reply->type == REDIS_REPLY_ERROR ? reply->str : "unexpected reply");
        node->count.reply_errors++;
        c->total.reply_errors++;
        break;
    }
    freeReplyObject(reply);
}

void ch__unserved(ch_cache *c, ch_cache_result *r)
{
    r->status = CH_CACHE_ERROR;
    if (r->fail == CH_CACHE_FAIL_NONE) {
        r->fail = CH_CACHE_FAIL_NO_NODE;
        snprintf(r->message, sizeof(r->message), "no node of the key's walk is up");
    }
    c->failed++;
}

void ch_cache_fence_until(ch_cache *c, uint64_t mono_ms)
{
    if (c != NULL)
        c->current_until_ms = mono_ms;
}

bool ch__fenced_now(const ch_cache *c)
{
    return c->current_until_ms != UINT64_MAX && ch__now_ms() >= c->current_until_ms;
}

void ch__fenced(ch_cache *c, ch_cache_result *r)
{
    r->status = CH_CACHE_ERROR;
    r->fail = CH_CACHE_FAIL_FENCED;
    snprintf(r->message, sizeof(r->message),
             "the membership is not proven current (its fleet lease lapsed): not sent");
    c->failed++;
}

/* ---- replies ----------------------------------------------------------------------------------- */

ch__outcome ch__classify_get(const redisReply *reply)
{
    switch (reply->type) {
    case REDIS_REPLY_STRING: return CH__HIT;
    case REDIS_REPLY_NIL: return CH__MISS;
    case REDIS_REPLY_ERROR: return CH__REPLY_ERROR;
    default: return CH__BAD_REPLY;
    }
}

static ch__outcome classify_set(const redisReply *reply)
{
    if (reply->type == REDIS_REPLY_STATUS && strcmp(reply->str, "OK") == 0)
        return CH__OK;
    return reply->type == REDIS_REPLY_ERROR ? CH__REPLY_ERROR : CH__BAD_REPLY;
}

static ch__outcome classify_del(const redisReply *reply)
{
    if (reply->type == REDIS_REPLY_INTEGER)
        return reply->integer > 0 ? CH__OK : CH__ABSENT;
    return reply->type == REDIS_REPLY_ERROR ? CH__REPLY_ERROR : CH__BAD_REPLY;
}

/* ---- probes ------------------------------------------------------------------------------------ */

/* PING under the timeout; only a PONG counts. */
static bool ping(ch_cache *c, size_t i)
{
    const char *argv[1] = {"PING"};
    const size_t lens[1] = {4};
    ch__attempt a;
    redisReply *reply = ch__node_command(c, i, 1, argv, lens, &a);
    if (reply == NULL)
        return false;
    bool ok = reply->type == REDIS_REPLY_STATUS && strcmp(reply->str, "PONG") == 0;
    freeReplyObject(reply);
    if (!ok)
        ch__node_drop(&c->nodes[i]);
    return ok;
}

size_t ch__run_probes(ch_cache *c)
{
    size_t readmitted = 0;
    uint64_t now = ch__now_ms();
    for (size_t i = 0; i < c->n; i++) {
        if (!ch_health_probe_due(c->health, i, now))
            continue;
        ch__node *node = &c->nodes[i];
        bool ok = ping(c, i);
        now = ch__now_ms();
        ch_health_probe_result(c->health, i, ok, now, ch__rand(c));
        node->count.probes++;
        c->total.probes++;
        if (ok && ch_health_is_up(c->health, i)) {
            node->count.readmissions++;
            c->total.readmissions++;
            readmitted++;
        }
    }
    return readmitted;
}

int ch_cache_probe(ch_cache *c, size_t *readmitted)
{
    if (c == NULL)
        return CH_EINVAL;
    ch__sigpipe guard;
    ch__sigpipe_block(&guard);
    size_t n = ch__run_probes(c);
    ch__sigpipe_restore(&guard);
    if (readmitted != NULL)
        *readmitted = n;
    return CH_OK;
}

/* ---- single-key requests ----------------------------------------------------------------------- */

typedef struct command {
    int argc;
    const char *argv[5];
    size_t lens[5];
    ch__classify_fn classify;
} command;

/* Tries candidates c->cand[0..count-1] in order until one answers; returns whether one did
 * (then r holds its answer). Each failure is counted and recorded in r. */
static bool try_candidates(ch_cache *c, size_t count, size_t owner, const command *cmd,
                           ch_cache_result *r)
{
    for (size_t k = 0; k < count; k++) {
        size_t i = c->cand[k];
        ch__attempt a;
        r->attempts++;
        c->nodes[i].count.attempts++;
        c->total.attempts++;
        redisReply *reply = ch__node_command(c, i, cmd->argc, cmd->argv, cmd->lens, &a);
        if (reply != NULL) {
            ch__outcome outcome = cmd->classify(reply);
            if (outcome != CH__BAD_REPLY) {
                ch__served(c, i, owner, outcome, reply, r);
                return true;
            }
            ch__node_bad_reply(c, i, reply, &a);
            freeReplyObject(reply);
        }
        ch__node_failed(c, i, &a, r);
    }
    return false;
}

/* Runs one single-key request: due probes, routing, the candidates; fills r. */
static void request(ch_cache *c, const void *key, size_t len, const command *cmd,
                    ch_cache_result *r)
{
    ch__sigpipe guard;
    ch__sigpipe_block(&guard);
    ch__run_probes(c);
    ch__result_clear(r);
    c->requests++;
    if (ch__fenced_now(c)) {
        ch__fenced(c, r);
        ch__sigpipe_restore(&guard);
        return;
    }
    size_t count = 0;
    /* ch_route() cannot fail here: the arguments are valid and the depth was checked against
     * the table when it was swapped in. Should it fail, the request is unserved. */
    uint64_t kh = ch_key_hash(c->table, key, len);
    if (ch_route_hash(c->table, c->health, kh, c->depth, c->cand, &count) != CH_OK)
        count = 0;
    size_t owner = ch_lookup_hash(c->table, kh);
    if (!try_candidates(c, count, owner, cmd, r))
        ch__unserved(c, r);
    ch__sigpipe_restore(&guard);
}

/* hiredis copies arguments with memcpy, which must not see NULL even for 0 bytes. */
static const void *nonnull(const void *p)
{
    return p != NULL ? p : "";
}

int ch_cache_get(ch_cache *c, const void *key, size_t len, ch_cache_result *r)
{
    if (c == NULL || r == NULL || (key == NULL && len > 0))
        return CH_EINVAL;
    key = nonnull(key);
    command cmd = {2, {"GET", key}, {3, len}, ch__classify_get};
    request(c, key, len, &cmd, r);
    return CH_OK;
}

int ch_cache_set(ch_cache *c, const void *key, size_t len, const void *value, size_t vlen,
                 uint64_t ttl_ms, ch_cache_result *r)
{
    if (c == NULL || r == NULL || (key == NULL && len > 0) || (value == NULL && vlen > 0))
        return CH_EINVAL;
    key = nonnull(key);
    char ttl[24];
    int tlen = snprintf(ttl, sizeof(ttl), "%" PRIu64, ttl_ms);
    command cmd = {3, {"SET", key, nonnull(value), "PX", ttl}, {3, len, vlen, 2, (size_t)tlen},
                   classify_set};
    if (ttl_ms > 0)
        cmd.argc = 5;
    request(c, key, len, &cmd, r);
    return CH_OK;
}

int ch_cache_del(ch_cache *c, const void *key, size_t len, ch_cache_result *r)
{
    if (c == NULL || r == NULL || (key == NULL && len > 0))
        return CH_EINVAL;
    key = nonnull(key);
    command cmd = {2, {"DEL", key}, {3, len}, classify_del};
    request(c, key, len, &cmd, r);
    return CH_OK;
}

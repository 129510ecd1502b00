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
        /* A node that missed writes of its keys may hold older values of them: those keys
         * (exactly, or a walk's dirty buckets) are deleted before it serves again; a clean-up
         * that fails fails the probe, the journal kept. */
        bool walk = node->journal.spilled;
        uint64_t deleted = 0;
        if (ok && !ch__journal_empty(&node->journal)) {
            ok = ch__journal_clean(c, i, &deleted);
            node->count.rejoin_deleted += deleted;
            c->total.rejoin_deleted += deleted;
            node->count.rejoin_walks += ok && walk;
            c->total.rejoin_walks += ok && walk;
        }
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
    bool write;                  /* a set or del: to every owner with replicas */
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

/* ---- replicas ---------------------------------------------------------------------------------- */

static bool among(const size_t *set, size_t n, size_t i)
{
    for (size_t k = 0; k < n; k++)
        if (set[k] == i)
            return true;
    return false;
}

/* The key's owners (its first c->replicas distinct nodes of the walk) into owners[]. */
static size_t owners_of(const ch_cache *c, uint64_t kh, size_t owners[CH_CACHE_MAX_REPLICAS])
{
    size_t count = 0;
    /* Cannot fail: replicas > 1 was checked against the table when it was swapped in. */
    if (ch_replicas_hash(c->table, kh, c->replicas, owners, &count) != CH_OK)
        return 0;
    return count;
}

int ch__repair(ch_cache *c, size_t i, const void *key, size_t len, const void *value,
               size_t vlen, uint64_t pttl_ms)
{
    char ttl[24];
    int tlen = snprintf(ttl, sizeof(ttl), "%" PRIu64, pttl_ms);
    const char *argv[6] = {"SET", key, value, "NX", "PX", ttl};
    const size_t lens[6] = {3, len, vlen, 2, 2, (size_t)tlen};
    ch__attempt a;
    c->nodes[i].count.attempts++;
    c->total.attempts++;
    redisReply *reply = ch__node_command(c, i, pttl_ms > 0 ? 6 : 4, argv, lens, &a);
    if (reply == NULL) {
        ch__node_failed(c, i, &a, NULL);
        return -1;
    }
    /* NX: OK when stored, nil when the key was there (its value stays). */
    int stored = reply->type == REDIS_REPLY_STATUS && strcmp(reply->str, "OK") == 0 ? 1
                 : reply->type == REDIS_REPLY_NIL                                   ? 0
                                                                                    : -1;
    if (stored < 0)
        ch__node_bad_reply(c, i, reply, &a);
    freeReplyObject(reply);
    if (stored < 0) {
        ch__node_failed(c, i, &a, NULL);
        return -1;
    }
    ch_health_success(c->health, i, ch__now_ms());
    if (stored) {
        c->nodes[i].count.repairs++;
        c->total.repairs++;
    }
    return stored;
}

/* GET and PTTL of the key at node i, one pipeline: the GET reply (the caller frees it), or NULL
 * when the node failed (counted). *pttl: the PTTL answer (-1: no expiry, -2: gone since). */
static redisReply *get_with_ttl(ch_cache *c, size_t i, const void *key, size_t len,
                                long long *pttl)
{
    const char *get[2] = {"GET", key}, *ttl[2] = {"PTTL", key};
    const size_t lens[2] = {3, len}, tlens[2] = {4, len};
    ch__attempt a;
    redisReply *value = NULL, *t = NULL;
    c->nodes[i].count.attempts++;
    c->total.attempts++;
    bool sent = ch__node_connect(c, i, &a) && ch__node_append(c, i, 2, get, lens, &a) &&
                ch__node_append(c, i, 2, ttl, tlens, &a);
    if (sent && (value = ch__node_read(c, i, &a)) != NULL &&
        (t = ch__node_read(c, i, &a)) != NULL &&
        (ch__classify_get(value) == CH__BAD_REPLY || t->type != REDIS_REPLY_INTEGER)) {
        ch__node_bad_reply(c, i, t->type != REDIS_REPLY_INTEGER ? t : value, &a);
        freeReplyObject(t);
        t = NULL;
    }
    if (t == NULL) {
        if (value != NULL)
            freeReplyObject(value);
        ch__node_failed(c, i, &a, NULL);
        return NULL;
    }
    *pttl = t->integer;
    freeReplyObject(t);
    return value;
}

void ch__replica_fill(ch_cache *c, const void *key, size_t len, uint64_t kh, const size_t *cand,
                      size_t count, size_t owner, ch_cache_result *r)
{
    size_t owners[CH_CACHE_MAX_REPLICAS];
    size_t nowners = owners_of(c, kh, owners);
    size_t missed = r->node;
    if (r->status != CH_CACHE_MISS || !among(owners, nowners, missed))
        return;
    size_t k = 0;
    while (k < count && cand[k] != missed)
        k++;
    for (k++; k < count; k++) {
        size_t i = cand[k];
        if (!among(owners, nowners, i) || !ch_health_is_up(c->health, i))
            continue;
        c->replica_reads++;
        r->attempts++;
        long long pttl = -2;
        redisReply *reply = get_with_ttl(c, i, key, len, &pttl);
        if (reply == NULL)
            continue;
        ch__outcome outcome = ch__classify_get(reply);
        if (outcome != CH__HIT) {
            /* nothing here either (or an error reply): the miss stands */
            freeReplyObject(reply);
            continue;
        }
        ch__served(c, i, owner, CH__HIT, reply, r);
        if (pttl != -2) /* -2: it expired between the GET and the PTTL: not copied */
            ch__repair(c, missed, key, len, r->value, r->len, pttl > 0 ? (uint64_t)pttl : 0);
        return;
    }
}

/* A write or delete with replicas: sent to each owner that is up. Returns false, with nothing
 * sent, when no owner is up (the caller routes it as without replicas). */
static bool write_owners(ch_cache *c, uint64_t kh, size_t owner, const command *cmd,
                         ch_cache_result *r)
{
    size_t owners[CH_CACHE_MAX_REPLICAS];
    size_t nowners = owners_of(c, kh, owners), up = 0;
    for (size_t k = 0; k < nowners; k++)
        up += ch_health_is_up(c->health, owners[k]);
    const void *key = cmd->argv[1];
    size_t len = cmd->lens[1];
    if (up == 0) {
        for (size_t k = 0; k < nowners; k++)
            ch__journal_add(&c->nodes[owners[k]].journal, key, len);
        return false;
    }
    size_t took = 0;
    ch__attempt last = {CH_CACHE_FAIL_NONE, ""};
    for (size_t k = 0; k < nowners; k++) {
        size_t i = owners[k];
        ch__node *node = &c->nodes[i];
        if (!ch_health_is_up(c->health, i)) {
            ch__journal_add(&node->journal, key, len);
            node->count.replica_skips++;
            c->total.replica_skips++;
            continue;
        }
        ch__attempt a;
        r->attempts++;
        node->count.attempts++;
        c->total.attempts++;
        redisReply *reply = ch__node_command(c, i, cmd->argc, cmd->argv, cmd->lens, &a);
        ch__outcome outcome = reply != NULL ? cmd->classify(reply) : CH__BAD_REPLY;
        if (reply != NULL && outcome == CH__BAD_REPLY) {
            ch__node_bad_reply(c, i, reply, &a);
            freeReplyObject(reply);
        }
        if (outcome == CH__BAD_REPLY) {
            ch__journal_add(&node->journal, key, len); /* it may or may not have taken it */
            ch__node_failed(c, i, &a, NULL);
            last = a;
            continue;
        }
        ch_cache_result one;
        ch__result_clear(&one);
        ch__served(c, i, owner, outcome, reply, &one);
        if (one.status == CH_CACHE_ERROR) { /* an error reply */
            last.fail = one.fail;
            memcpy(last.message, one.message, sizeof(last.message));
            continue;
        }
        /* A delete is OK when any owner deleted it, MISS when none had it. */
        if (took == 0 || one.status == CH_CACHE_OK) {
            unsigned attempts = r->attempts;
            *r = one;
            r->attempts = attempts;
        }
        took++;
    }
    if (took == up)
        return true; /* every owner that is up took it */
    r->status = CH_CACHE_ERROR;
    r->fail = last.fail;
    /* the count, then the reason (cut to fit) */
    int at = snprintf(r->message, sizeof(r->message), "written to %zu of %zu owners up: ", took,
                      up);
    if (at > 0 && (size_t)at < sizeof(r->message))
        memcpy(r->message + at, last.message,
               strnlen(last.message, sizeof(r->message) - (size_t)at - 1) + 1);
    r->message[sizeof(r->message) - 1] = '\0';
    if (last.fail != CH_CACHE_FAIL_REPLY)
        c->failed++;
    return true;
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
    size_t owner = ch_lookup_hash(c->table, kh);
    uint64_t hh = ch__hot_hash(key, len), sent = ch__now_ns();
    ch__hot_count(&c->hot, key, len, hh, sent);
    if (cmd->write) {
        ch__hot_write(c, key, len, hh);
    } else if (ch__hot_get(c, key, len, hh, owner, sent, r)) {
        ch__sigpipe_restore(&guard);
        return;
    }
    bool replicated = c->replicas > 1;
    if (replicated && cmd->write && write_owners(c, kh, owner, cmd, r)) {
        ch__sigpipe_restore(&guard);
        return;
    }
    /* A get may try every owner that is up (rdepth); a write here has no owner up. */
    size_t depth = cmd->write ? c->depth : c->rdepth;
    if (ch_route_hash(c->table, c->health, kh, depth, c->cand, &count) != CH_OK)
        count = 0;
    bool served = try_candidates(c, count, owner, cmd, r);
    /* A write its owner did not take (ejected, or it failed there: it may or may not have
     * taken it) is the owner's to forget before it serves again. With replicas this is the
     * case of no owner up, each of them journaled by write_owners already. */
    if (cmd->write && !replicated && (!served || r->node != owner))
        ch__journal_add(&c->nodes[owner].journal, key, len);
    if (!served)
        ch__unserved(c, r);
    else if (replicated && !cmd->write)
        ch__replica_fill(c, key, len, kh, c->cand, count, owner, r);
    if (!cmd->write)
        ch__hot_put(c, key, len, hh, sent, r);
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
    command cmd = {2, {"GET", key}, {3, len}, ch__classify_get, false};
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
                   classify_set, true};
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
    command cmd = {2, {"DEL", key}, {3, len}, classify_del, true};
    request(c, key, len, &cmd, r);
    return CH_OK;
}

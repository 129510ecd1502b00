/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node.c — one Redis node: its address, its connection (made on first use, dropped on any
 * failure, so the next use reconnects) and the classification of what went wrong.
 *
 * Every socket operation is bounded: connect by redisConnectWithTimeout(), each read and write
 * by SO_RCVTIMEO/SO_SNDTIMEO (redisSetTimeout()), both at the client's timeout.
 */
#define _POSIX_C_SOURCE 200809L

#include "cache_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- addresses --------------------------------------------------------------------------------- */

static int parse_port(const char *s, int *port)
{
    if (*s == '\0' || strlen(s) > 5)
        return CH_EINVAL;
    long v = 0;
    for (const char *p = s; *p != '\0'; p++) {
        if (*p < '0' || *p > '9')
            return CH_EINVAL;
        v = v * 10 + (*p - '0');
    }
    if (v < 1 || v > 65535)
        return CH_EINVAL;
    *port = (int)v;
    return CH_OK;
}

int ch__parse_addr(const char *addr, char **host, int *port)
{
    if (addr == NULL || addr[0] == '\0')
        return CH_EINVAL;
    if (addr[0] == '/') {
        *port = 0;
        *host = strdup(addr);
        return *host == NULL ? CH_ENOMEM : CH_OK;
    }
    const char *colon = strrchr(addr, ':');
    if (colon == NULL || parse_port(colon + 1, port) != CH_OK)
        return CH_EINVAL;
    const char *begin = addr, *end = colon;
    if (*begin == '[') { /* "[v6addr]:port" */
        if (end - begin < 3 || end[-1] != ']')
            return CH_EINVAL;
        begin++;
        end--;
    } else if (memchr(begin, ':', (size_t)(end - begin)) != NULL) {
        return CH_EINVAL; /* an IPv6 address needs its brackets */
    }
    if (end == begin)
        return CH_EINVAL;
    *host = strndup(begin, (size_t)(end - begin));
    return *host == NULL ? CH_ENOMEM : CH_OK;
}

/* ---- failures ---------------------------------------------------------------------------------- */

static void attempt_fail(ch__attempt *a, const ch__node *node, ch_cache_fail fail,
                         const char *what)
{
    a->fail = fail;
    snprintf(a->message, sizeof(a->message), "%s %s: %s", node->id, node->addr, what);
}

static bool is_timeout(int saved_errno, const char *errstr)
{
    if (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK || saved_errno == ETIMEDOUT)
        return true;
    /* hiredis formats errno into errstr; trust the text when errno was overwritten. */
    return strstr(errstr, "timed out") != NULL ||
           strstr(errstr, "temporarily unavailable") != NULL;
}

/* What a failed hiredis call on ctx means. connecting: the connection was being made. */
static ch_cache_fail classify(const redisContext *ctx, int saved_errno, bool connecting)
{
    if (ctx->err == REDIS_ERR_IO && is_timeout(saved_errno, ctx->errstr))
        return CH_CACHE_FAIL_TIMEOUT;
    if (connecting)
        return CH_CACHE_FAIL_CONNECT;
    if (ctx->err == REDIS_ERR_PROTOCOL)
        return CH_CACHE_FAIL_PROTOCOL;
    return CH_CACHE_FAIL_IO;
}

void ch__node_drop(ch__node *node)
{
    if (node->conn != NULL) {
        redisFree(node->conn);
        node->conn = NULL;
    }
}

static void node_io_failed(ch__node *node, int saved_errno, bool connecting, ch__attempt *a)
{
    const char *what = node->conn->errstr[0] != '\0' ? node->conn->errstr : "I/O error";
    attempt_fail(a, node, classify(node->conn, saved_errno, connecting), what);
    ch__node_drop(node);
}

void ch__node_bad_reply(ch_cache *c, size_t i, const redisReply *reply, ch__attempt *a)
{
    char what[64];
    snprintf(what, sizeof(what), "unexpected reply (type %d)", reply->type);
    attempt_fail(a, &c->nodes[i], CH_CACHE_FAIL_PROTOCOL, what);
    ch__node_drop(&c->nodes[i]);
}

/* ---- connections ------------------------------------------------------------------------------- */

static struct timeval timeout_tv(int ms)
{
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    return tv;
}

/* Runs AUTH or SELECT on a fresh connection. An error reply makes the connection useless, so it
 * counts as a failure to connect. */
static bool handshake(ch__node *node, const char *cmd, const char *arg, ch__attempt *a)
{
    const char *argv[2] = {cmd, arg};
    size_t lens[2] = {strlen(cmd), strlen(arg)};
    errno = 0;
    redisReply *reply = redisCommandArgv(node->conn, 2, argv, lens);
    if (reply == NULL) {
        node_io_failed(node, errno, true, a);
        return false;
    }
    bool ok = reply->type == REDIS_REPLY_STATUS;
    if (!ok) {
        char what[128];
        snprintf(what, sizeof(what), "%s refused: %s", cmd,
                 reply->type == REDIS_REPLY_ERROR ? reply->str : "unexpected reply");
        attempt_fail(a, node, CH_CACHE_FAIL_CONNECT, what);
        ch__node_drop(node);
    }
    freeReplyObject(reply);
    return ok;
}

bool ch__node_connect(ch_cache *c, size_t i, ch__attempt *a)
{
    ch__node *node = &c->nodes[i];
    if (node->conn != NULL)
        return true;
    struct timeval tv = timeout_tv(c->timeout_ms);
    errno = 0;
    redisContext *ctx = node->port != 0 ? redisConnectWithTimeout(node->host, node->port, tv)
                                        : redisConnectUnixWithTimeout(node->host, tv);
    int saved_errno = errno;
    if (ctx == NULL) {
        attempt_fail(a, node, CH_CACHE_FAIL_CONNECT, "out of memory");
        return false;
    }
    node->conn = ctx;
    if (ctx->err != 0) {
        node_io_failed(node, saved_errno, true, a);
        return false;
    }
    if (redisSetTimeout(ctx, tv) != REDIS_OK) {
        node_io_failed(node, errno, true, a);
        return false;
    }
    if (c->password != NULL && !handshake(node, "AUTH", c->password, a))
        return false;
    if (c->db > 0) {
        char db[16];
        snprintf(db, sizeof(db), "%d", c->db);
        if (!handshake(node, "SELECT", db, a))
            return false;
    }
    return true;
}

bool ch__node_append(ch_cache *c, size_t i, int argc, const char *const *argv,
                     const size_t *lens, ch__attempt *a)
{
    ch__node *node = &c->nodes[i];
    /* Appending only formats into the output buffer; it fails only when out of memory. */
    /* hiredis takes const char ** but only reads the arguments. */
    if (redisAppendCommandArgv(node->conn, argc, (const char **)argv, lens) != REDIS_OK) {
        attempt_fail(a, node, CH_CACHE_FAIL_IO, "out of memory");
        ch__node_drop(node);
        return false;
    }
    return true;
}

redisReply *ch__node_read(ch_cache *c, size_t i, ch__attempt *a)
{
    ch__node *node = &c->nodes[i];
    void *reply = NULL;
    errno = 0;
    /* Flushes what was appended (each write bounded by the timeout), then reads one reply (each
     * read bounded by the timeout). */
    if (redisGetReply(node->conn, &reply) != REDIS_OK || reply == NULL) {
        node_io_failed(node, errno, false, a);
        return NULL;
    }
    return reply;
}

redisReply *ch__node_command(ch_cache *c, size_t i, int argc, const char *const *argv,
                             const size_t *lens, ch__attempt *a)
{
    bool kept = c->nodes[i].conn != NULL;
    redisReply *reply = NULL;
    if (ch__node_connect(c, i, a) && ch__node_append(c, i, argc, argv, lens, a))
        reply = ch__node_read(c, i, a);
    if (reply == NULL && ch__node_stale(kept, a)) {
        /* The kept connection broke while idle (e.g. the server restarted): one fresh try. */
        if (ch__node_connect(c, i, a) && ch__node_append(c, i, argc, argv, lens, a))
            reply = ch__node_read(c, i, a);
    }
    return reply;
}

bool ch__node_stale(bool kept, const ch__attempt *a)
{
    return kept && a->fail == CH_CACHE_FAIL_IO;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * resp_codec.c — px_codec_redis: everything chash-proxy knows of RESP beyond framing (resp.c):
 * the command table with its key specs, how a request is written to a backend for a subset of
 * its keys, how the parts of a split request are merged, the errors, the probe and the
 * connection handshake (AUTH, SELECT), and the commands the proxy answers itself.
 */
#include "codec.h"
#include "resp.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum kind {
    K_KEY,  /* argv[1] is the key: forwarded whole */
    K_EVAL, /* EVAL/EVALSHA(_RO): routed by the first key (numkeys >= 1) */
    K_MGET, /* split; values merged in key order */
    K_MSET, /* split by pairs; +OK or the first error */
    K_SUM,  /* split; integer replies summed */
    K_PING, K_ECHO, K_QUIT, K_SELECT, K_COMMAND, K_AUTH, K_INFO,
    K_HELLO,  /* the connection's protocol: RESP2 or RESP3 */
    K_CLIENT, /* CLIENT ID, GETNAME, SETNAME, SETINFO, INFO, LIST, REPLY, ...: the connection */
    K_KEYS1, /* every key (from 1, step 2) on one server, forwarded whole (MSETNX) */
    K_KEY2,  /* argv[2] is the key, after a subcommand (XGROUP CREATE key ..., XINFO STREAM key) */
    K_XREAD, /* XREAD, XREADGROUP: the keys after STREAMS, on one server; BLOCK refused */
    K_SCAN,  /* SCAN: a cursor over every server in membership order (route_scan.c) */
    K_SCRIPT, /* SCRIPT LOAD|EXISTS|FLUSH: sent to every server, replies combined */
    /* served by the client's session on its dedicated connection (session.c) */
    K_MULTI, K_EXEC, K_DISCARD, K_WATCH, K_UNWATCH,
    K_SUBSCRIBE, K_PSUBSCRIBE, K_UNSUBSCRIBE, K_PUNSUBSCRIBE,
} kind;

enum { R = 1, W = 0 }; /* R: a read, safe to retry on the next candidate */

/* The one registry of supported commands: X(name, kind, retry, min argc). Multi-key commands that
 * Redis runs on one server (SINTER, RPOPLPUSH, ZUNIONSTORE, PFMERGE, ...) are routed by their
 * first key, as twemproxy does: their keys must share a hash tag. */
#define PX_COMMAND_LIST(X)                                                                       \
    /* strings */                                                                                \
    X(get, K_KEY, R, 2) X(set, K_KEY, W, 3) X(setex, K_KEY, W, 4) X(psetex, K_KEY, W, 4)          \
    X(setnx, K_KEY, W, 3) X(getset, K_KEY, W, 3) X(getdel, K_KEY, W, 2) X(getex, K_KEY, W, 2)     \
    X(append, K_KEY, W, 3) X(strlen, K_KEY, R, 2) X(incr, K_KEY, W, 2) X(decr, K_KEY, W, 2)       \
    X(incrby, K_KEY, W, 3) X(decrby, K_KEY, W, 3) X(incrbyfloat, K_KEY, W, 3)                     \
    X(getrange, K_KEY, R, 4) X(substr, K_KEY, R, 4) X(setrange, K_KEY, W, 4)                      \
    X(getbit, K_KEY, R, 3) X(setbit, K_KEY, W, 4) X(bitcount, K_KEY, R, 2) X(bitpos, K_KEY, R, 3) \
    X(bitfield, K_KEY, W, 2)                                                                     \
    /* keys */                                                                                   \
    X(expire, K_KEY, W, 3) X(pexpire, K_KEY, W, 3) X(expireat, K_KEY, W, 3)                       \
    X(pexpireat, K_KEY, W, 3) X(ttl, K_KEY, R, 2) X(pttl, K_KEY, R, 2) X(expiretime, K_KEY, R, 2) \
    X(pexpiretime, K_KEY, R, 2) X(persist, K_KEY, W, 2) X(type, K_KEY, R, 2) X(dump, K_KEY, R, 2) \
    X(restore, K_KEY, W, 4) X(sort, K_KEY, W, 2)                                                 \
    /* hashes */                                                                                 \
    X(hget, K_KEY, R, 3) X(hset, K_KEY, W, 4) X(hmset, K_KEY, W, 4) X(hmget, K_KEY, R, 3)         \
    X(hdel, K_KEY, W, 3) X(hexists, K_KEY, R, 3) X(hgetall, K_KEY, R, 2) X(hincrby, K_KEY, W, 4)  \
    X(hincrbyfloat, K_KEY, W, 4) X(hkeys, K_KEY, R, 2) X(hvals, K_KEY, R, 2) X(hlen, K_KEY, R, 2) \
    X(hsetnx, K_KEY, W, 4) X(hstrlen, K_KEY, R, 3) X(hscan, K_KEY, R, 3)                          \
    X(hrandfield, K_KEY, R, 2)                                                                   \
    /* lists */                                                                                  \
    X(lpush, K_KEY, W, 3) X(rpush, K_KEY, W, 3) X(lpop, K_KEY, W, 2) X(rpop, K_KEY, W, 2)         \
    X(llen, K_KEY, R, 2) X(lrange, K_KEY, R, 4) X(lindex, K_KEY, R, 3) X(lset, K_KEY, W, 4)       \
    X(lrem, K_KEY, W, 4) X(ltrim, K_KEY, W, 4) X(linsert, K_KEY, W, 5) X(lpushx, K_KEY, W, 3)     \
    X(rpushx, K_KEY, W, 3) X(lpos, K_KEY, R, 3) X(rpoplpush, K_KEY, W, 3) X(lmove, K_KEY, W, 5)   \
    /* sets */                                                                                   \
    X(sadd, K_KEY, W, 3) X(srem, K_KEY, W, 3) X(smembers, K_KEY, R, 2) X(sismember, K_KEY, R, 3)  \
    X(smismember, K_KEY, R, 3) X(scard, K_KEY, R, 2) X(spop, K_KEY, W, 2)                         \
    X(srandmember, K_KEY, R, 2) X(sscan, K_KEY, R, 3) X(sdiff, K_KEY, R, 2)                       \
    X(sdiffstore, K_KEY, W, 3) X(sinter, K_KEY, R, 2) X(sinterstore, K_KEY, W, 3)                 \
    X(sunion, K_KEY, R, 2) X(sunionstore, K_KEY, W, 3) X(smove, K_KEY, W, 4)                      \
    /* sorted sets */                                                                            \
    X(zadd, K_KEY, W, 4) X(zrem, K_KEY, W, 3) X(zscore, K_KEY, R, 3) X(zmscore, K_KEY, R, 3)      \
    X(zcard, K_KEY, R, 2) X(zcount, K_KEY, R, 4) X(zlexcount, K_KEY, R, 4)                        \
    X(zincrby, K_KEY, W, 4) X(zrange, K_KEY, R, 4) X(zrangebyscore, K_KEY, R, 4)                  \
    X(zrangebylex, K_KEY, R, 4) X(zrevrange, K_KEY, R, 4) X(zrevrangebyscore, K_KEY, R, 4)        \
    X(zrevrangebylex, K_KEY, R, 4) X(zrank, K_KEY, R, 3) X(zrevrank, K_KEY, R, 3)                 \
    X(zremrangebyrank, K_KEY, W, 4) X(zremrangebyscore, K_KEY, W, 4)                              \
    X(zremrangebylex, K_KEY, W, 4) X(zscan, K_KEY, R, 3) X(zpopmin, K_KEY, W, 2)                  \
    X(zpopmax, K_KEY, W, 2) X(zrandmember, K_KEY, R, 2) X(zinterstore, K_KEY, W, 4)               \
    X(zunionstore, K_KEY, W, 4)                                                                  \
    /* hyperloglog, geo */                                                                       \
    X(pfadd, K_KEY, W, 2) X(pfcount, K_KEY, R, 2) X(pfmerge, K_KEY, W, 2)                         \
    X(geoadd, K_KEY, W, 5) X(geodist, K_KEY, R, 4) X(geohash, K_KEY, R, 2)                        \
    X(geopos, K_KEY, R, 2) X(georadius, K_KEY, W, 6) X(georadiusbymember, K_KEY, W, 5)            \
    /* scripting */                                                                              \
    X(eval, K_EVAL, W, 3) X(evalsha, K_EVAL, W, 3) X(eval_ro, K_EVAL, R, 3)                       \
    X(evalsha_ro, K_EVAL, R, 3) X(msetnx, K_KEYS1, W, 3)                                         \
    X(script, K_SCRIPT, W, 2)                                                                    \
    /* streams, but their blocking forms: a blocked command would hold a shared connection */   \
    X(xadd, K_KEY, W, 5) X(xrange, K_KEY, R, 4) X(xrevrange, K_KEY, R, 4) X(xlen, K_KEY, R, 2)    \
    X(xdel, K_KEY, W, 3) X(xtrim, K_KEY, W, 4) X(xack, K_KEY, W, 4) X(xpending, K_KEY, R, 3)      \
    X(xclaim, K_KEY, W, 6) X(xautoclaim, K_KEY, W, 6) X(xsetid, K_KEY, W, 3)                      \
    X(xgroup, K_KEY2, W, 3) X(xinfo, K_KEY2, R, 3) X(xread, K_XREAD, R, 4)                        \
    X(xreadgroup, K_XREAD, W, 7)                                                                 \
    /* the key space, pub/sub: PUBLISH goes to its channel's server, hashed like a key */         \
    X(scan, K_SCAN, W, 2) X(publish, K_KEY, W, 3)                                                \
    /* transactions and subscriptions: the client's session (session.c) */                       \
    X(multi, K_MULTI, W, 1) X(exec, K_EXEC, W, 1) X(discard, K_DISCARD, W, 1)                     \
    X(watch, K_WATCH, W, 2) X(unwatch, K_UNWATCH, W, 1) X(subscribe, K_SUBSCRIBE, R, 2)           \
    X(psubscribe, K_PSUBSCRIBE, R, 2) X(unsubscribe, K_UNSUBSCRIBE, R, 1)                         \
    X(punsubscribe, K_PUNSUBSCRIBE, R, 1)                                                        \
    /* multi-key, split per server */                                                            \
    X(mget, K_MGET, R, 2) X(mset, K_MSET, W, 3) X(del, K_SUM, W, 2) X(unlink, K_SUM, W, 2)        \
    X(touch, K_SUM, R, 2) X(exists, K_SUM, R, 2)                                                  \
    /* answered by the proxy */                                                                  \
    X(ping, K_PING, R, 1) X(echo, K_ECHO, R, 2) X(quit, K_QUIT, R, 1) X(select, K_SELECT, R, 2)   \
    X(command, K_COMMAND, R, 1) X(auth, K_AUTH, R, 2) X(info, K_INFO, R, 1)                      \
    X(hello, K_HELLO, R, 1) X(client, K_CLIENT, R, 2)

/* A kind's key spec and semantics, as constant expressions. */
#define IS_MULTI(k) ((k) == K_MGET || (k) == K_MSET || (k) == K_SUM)
#define IS_SESSION(k) ((k) >= K_MULTI && (k) <= K_PUNSUBSCRIBE)
/* Their arguments from 1 on are keys (WATCH) or channels and patterns (hashed like keys). */
#define IS_ARGKEYS(k) ((k) == K_WATCH || ((k) >= K_SUBSCRIBE && (k) <= K_PUNSUBSCRIBE))
#define KIND_CLS(k, r)                                                                           \
    ((k) == K_KEY || (k) == K_EVAL || (k) == K_KEYS1 || (k) == K_SCRIPT || IS_SESSION(k) ||      \
             (k) == K_KEY2 || (k) == K_XREAD                                                     \
         ? ((r) ? PX_CLASS_READ : PX_CLASS_WRITE)                                                \
     : (k) == K_SCAN ? PX_CLASS_READ                                                             \
     : IS_MULTI(k)   ? PX_CLASS_MULTI                                                            \
                     : PX_CLASS_LOCAL)
#define KIND_MERGE(k)                                                                            \
    ((k) == K_MGET ? PX_MERGE_ARRAY : (k) == K_MSET ? PX_MERGE_ALL_OK                            \
     : (k) == K_SUM ? PX_MERGE_SUM : (k) == K_SCRIPT ? PX_MERGE_EVERY : PX_MERGE_ONE)
#define KIND_FLAGS(k)                                                                            \
    ((k) == K_QUIT                                    ? PX_CMD_AUTH_EXEMPT | PX_CMD_SUBSCRIBED  \
     : (k) == K_AUTH || (k) == K_HELLO                ? PX_CMD_AUTH_EXEMPT                      \
     : (k) == K_PING                                  ? PX_CMD_HEALTH | PX_CMD_SUBSCRIBED       \
     : (k) == K_EVAL || (k) == K_KEYS1 || (k) == K_XREAD ? PX_CMD_ONE_SERVER                    \
     : (k) == K_SCAN                                  ? PX_CMD_SCAN                             \
                                                      : 0)
#define KIND_SESSION(k)                                                                          \
    ((k) == K_MULTI ? PX_SES_MULTI : (k) == K_EXEC ? PX_SES_EXEC                                 \
     : (k) == K_DISCARD ? PX_SES_DISCARD : (k) == K_WATCH ? PX_SES_WATCH                         \
     : (k) == K_UNWATCH ? PX_SES_UNWATCH : (k) == K_SUBSCRIBE ? PX_SES_SUBSCRIBE                 \
     : (k) == K_PSUBSCRIBE ? PX_SES_PSUBSCRIBE : (k) == K_UNSUBSCRIBE ? PX_SES_UNSUBSCRIBE       \
     : (k) == K_PUNSUBSCRIBE ? PX_SES_PUNSUBSCRIBE : PX_SES_NONE)

static const px_cmd commands[] = {
#define PX__CMD(n, k, r, a)                                                                      \
    {#n, sizeof(#n) - 1, KIND_CLS(k, r), KIND_MERGE(k), KIND_FLAGS(k),                           \
     r == R && !IS_SESSION(k), a,                                                                \
     (k) == K_KEY || IS_MULTI(k) || (k) == K_KEYS1 || IS_ARGKEYS(k) ? 1 : (k) == K_KEY2 ? 2 : 0, \
     (k) == K_KEY ? 1 : (k) == K_KEY2 ? 2 : IS_MULTI(k) || (k) == K_KEYS1 || IS_ARGKEYS(k) ? -1 \
                                                                                         : 0,   \
     (k) == K_MSET || (k) == K_KEYS1 ? 2 : 1, (k) == K_EVAL ? 2 : 0, (uint8_t)(k),              \
     KIND_SESSION(k)},
    PX_COMMAND_LIST(PX__CMD)
#undef PX__CMD
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

/* The table by name length and first byte, built once (the table is constant, so the index is
 * too once built): a lookup compares the one or two names of that length and first letter, in
 * table order, instead of walking the ~140 entries (4 % of the proxy's CPU with -P 16).
 * by_name[len][c]: 1 + the index of the first such command, 0: none; next_same: the next one. */
#define NAME_MAX_LEN 32u
static uint16_t by_name[NAME_MAX_LEN][256];
static uint16_t next_same[NCOMMANDS];
static pthread_once_t by_name_once = PTHREAD_ONCE_INIT;

static void by_name_build(void)
{
    for (size_t i = NCOMMANDS; i-- > 0;) { /* from the end: each chain is in table order */
        size_t len = commands[i].name_len;
        if (len == 0 || len >= NAME_MAX_LEN)
            continue;
        uint16_t *head = &by_name[len][(unsigned char)commands[i].name[0]];
        next_same[i] = *head;
        *head = (uint16_t)(i + 1);
    }
}

/* The command named p[0, len), case-insensitively (ASCII, as tolower in the C locale). */
static const px_cmd *command_find(const char *p, size_t len)
{
    char lower[NAME_MAX_LEN];
    if (len == 0 || len >= sizeof(lower))
        return NULL;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)p[i];
        lower[i] = (char)(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
    }
    pthread_once(&by_name_once, by_name_build);
    for (uint16_t i = by_name[len][(unsigned char)lower[0]]; i != 0; i = next_same[i - 1])
        if (memcmp(commands[i - 1].name, lower, len) == 0)
            return &commands[i - 1];
    return NULL;
}

/* ---- limits ------------------------------------------------------------------------------------ */

static void to_resp(const px_limits *l, ch_resp_limits *r)
{
    r->max_args = l->max_args;
    r->max_bulk = l->max_value;
    r->max_request = l->max_request;
    r->max_inline = l->max_line;
    r->max_depth = l->max_depth;
}

static void redis_limits(const ch_conf_pool *pc, px_limits *lim, px_limits *blim)
{
    ch_resp_limits d;
    ch_resp_limits_init(&d);
    /* Spans are 32-bit offsets: a request stays under 4 GiB. */
    size_t max_request = pc->max_request_bytes > 0 ? (size_t)pc->max_request_bytes : 1;
    if (max_request > UINT32_MAX)
        max_request = UINT32_MAX;
    *lim = (px_limits){.max_request = max_request,
                       .max_args = d.max_args, .max_value = d.max_bulk,
                       .max_line = d.max_inline, .max_key = d.max_bulk,
                       .max_depth = d.max_depth};
    /* Replies: bounded by max_bulk and max_depth, not by a request size. */
    *blim = *lim;
    blim->max_request = SIZE_MAX;
}

/* ---- parsing ----------------------------------------------------------------------------------- */

static void reject_arity(px_msg *m, const char *name, size_t len)
{
    char pn[72];
    px_printable_name(pn, sizeof(pn), name, len);
    snprintf(m->reject, sizeof(m->reject), "wrong number of arguments for '%s' command", pn);
}

static bool arg_is(const px_msg *m, size_t i, const char *word);

/* XREAD [COUNT n] [BLOCK ms] STREAMS key... id..., XREADGROUP GROUP g c [COUNT n] [BLOCK ms]
 * [NOACK] STREAMS key... id...: where its keys are, from the first STREAMS argument (Redis takes
 * the first too); false with m->reject set when it has none, an odd count after it, or BLOCK. */
static bool xread_keys(px_msg *m, size_t *first, size_t *last)
{
    char pn[24];
    px_printable_name(pn, sizeof(pn), m->raw + m->args[0].off, m->args[0].len);
    size_t at = 0;
    for (size_t i = 1; i < m->nargs && at == 0; i++) {
        if (arg_is(m, i, "block")) {
            snprintf(m->reject, sizeof(m->reject),
                     "%s with BLOCK is not served by the proxy (a blocked command would hold a "
                     "connection others share)", pn);
            return false;
        }
        if (arg_is(m, i, "streams"))
            at = i;
    }
    size_t rest = at > 0 ? m->nargs - at - 1 : 0;
    if (at == 0 || rest == 0) {
        snprintf(m->reject, sizeof(m->reject), "syntax error");
        return false;
    }
    if (rest % 2 != 0) {
        snprintf(m->reject, sizeof(m->reject),
                 "Unbalanced '%s' list of streams: for each stream key an ID or '$' must be "
                 "specified.", pn);
        return false;
    }
    *first = at + 1;
    *last = at + rest / 2;
    return true;
}

/* The keys of m from its command's key spec. */
static void find_keys(px_msg *m)
{
    const px_cmd *c = m->cmd;
    size_t first = 0, last = 0, step = (size_t)c->key_step;
    m->nkeys = 0;
    if (c->local == K_XREAD) {
        if (!xread_keys(m, &first, &last))
            return;
    } else if (c->keynum_at > 0) {
        const px_span *a = &m->args[c->keynum_at];
        char num[24];
        size_t n = a->len < sizeof(num) ? a->len : sizeof(num) - 1;
        memcpy(num, m->raw + a->off, n);
        num[n] = '\0';
        char *end = NULL;
        long numkeys = strtol(num, &end, 10);
        size_t rest = m->nargs - (size_t)c->keynum_at - 1;
        if (n == 0 || *end != '\0' || numkeys < 0 || (size_t)numkeys > rest) {
            snprintf(m->reject, sizeof(m->reject),
                     "Number of keys can't be greater than number of args");
            return;
        }
        if (numkeys == 0) {
            char pn[72];
            px_printable_name(pn, sizeof(pn), m->raw + m->args[0].off, m->args[0].len);
            snprintf(m->reject, sizeof(m->reject), "%s without keys is not supported by the proxy",
                     pn);
            return;
        }
        first = (size_t)c->keynum_at + 1;
        last = first + (size_t)numkeys - 1;
    } else if (c->first_key > 0) {
        first = (size_t)c->first_key;
        last = c->last_key < 0 ? m->nargs - 1 : (size_t)c->last_key;
    } else {
        return;
    }
    for (size_t i = first; i <= last && i < m->nargs; i += step) {
        if (m->nkeys < m->keys_cap)
            m->keys[m->nkeys] = m->args[i];
        m->nkeys++;
    }
}

/* SCAN's cursor: an unsigned decimal (Redis's own words when it is not one). */
static void parse_cursor(px_msg *m)
{
    const px_span *a = &m->args[1];
    uint64_t v = 0;
    bool ok = a->len > 0 && a->len <= 20;
    for (size_t i = 0; ok && i < a->len; i++) {
        unsigned char ch = (unsigned char)m->raw[a->off + i];
        unsigned d = (unsigned)(ch - '0');
        ok = ch >= '0' && ch <= '9' && v <= (UINT64_MAX - d) / 10;
        v = v * 10 + d;
    }
    if (!ok)
        snprintf(m->reject, sizeof(m->reject), "invalid cursor");
    m->cursor = v;
}

static bool arg_is(const px_msg *m, size_t i, const char *word)
{
    size_t n = strlen(word);
    return m->args[i].len == n && strncasecmp(m->raw + m->args[i].off, word, n) == 0;
}

/* SCRIPT LOAD script | EXISTS sha... | FLUSH [ASYNC|SYNC]: what goes to every server. KILL and
 * DEBUG act on one running script of one server: not served. */
static void check_script(px_msg *m)
{
    bool ok = arg_is(m, 1, "load")     ? m->nargs == 3
              : arg_is(m, 1, "exists") ? m->nargs >= 3
              : arg_is(m, 1, "flush")
                  ? m->nargs == 2 || (m->nargs == 3 && (arg_is(m, 2, "async") || arg_is(m, 2, "sync")))
                  : false;
    if (ok)
        return;
    if (arg_is(m, 1, "load") || arg_is(m, 1, "exists") || arg_is(m, 1, "flush")) {
        char sub[32];
        px_printable_name(sub, sizeof(sub), m->raw + m->args[1].off, m->args[1].len);
        snprintf(m->reject, sizeof(m->reject), "wrong number of arguments for 'script|%s' command",
                 sub);
        return;
    }
    char sub[32];
    px_printable_name(sub, sizeof(sub), m->raw + m->args[1].off, m->args[1].len);
    snprintf(m->reject, sizeof(m->reject),
             "unsupported command 'script %s' (the proxy serves SCRIPT LOAD, EXISTS and FLUSH)",
             sub);
}

static px_parse from_resp(ch_resp_status st)
{
    switch (st) {
    case CH_RESP_OK:
        return PX_PARSE_OK;
    case CH_RESP_INCOMPLETE:
        return PX_PARSE_AGAIN;
    case CH_RESP_TOO_BIG:
        return PX_PARSE_TOO_BIG;
    default:
        return PX_PARSE_BAD;
    }
}

/* The resp.c arguments are pointers: the spans are their offsets from buf. Parsed into an array
 * on the stack (4 KiB) when the request fits, else once more into one as large as it needs. */
static px_parse redis_parse_request(const px_limits *lim, const char *buf, size_t len, px_msg *m,
                                    size_t *consumed, size_t *need, char *err, size_t errlen)
{
    ch_resp_limits rl;
    to_resp(lim, &rl);
    ch_resp_arg stack[256], *argv = stack;
    size_t cap = sizeof(stack) / sizeof(stack[0]), argc = 0;
    ch_resp_status st =
        ch_resp_parse_request(buf, len, &rl, argv, cap, &argc, consumed, need, err, errlen);
    if (st == CH_RESP_OK && argc > cap && argc <= m->args_cap) {
        argv = malloc(argc * sizeof(*argv));
        if (argv == NULL) {
            snprintf(err, errlen, "out of memory");
            return PX_PARSE_TOO_BIG;
        }
        cap = argc;
        st = ch_resp_parse_request(buf, len, &rl, argv, cap, &argc, consumed, need, err, errlen);
    }
    m->raw = buf;
    m->len = st == CH_RESP_OK ? *consumed : 0;
    m->cmd = NULL;
    m->nargs = st == CH_RESP_OK ? argc : 0;
    m->nkeys = 0;
    m->flags = 0;
    m->reject[0] = '\0';
    m->reject_server = false;
    if (st == CH_RESP_OK && argc > 0 && argc <= m->args_cap) {
        for (size_t i = 0; i < argc; i++)
            m->args[i] = (px_span){(uint32_t)(argv[i].p - buf), (uint32_t)argv[i].len};
        m->cmd = command_find(buf + m->args[0].off, m->args[0].len);
        const px_cmd *c = m->cmd;
        if (c == NULL) {
            /* not served: dispatch answers it */
        } else if (argc < (size_t)c->arity || (c->key_step == 2 && (argc - 1) % 2 != 0) ||
                   (c->local == K_ECHO && argc != 2) ||
                   ((c->local == K_MULTI || c->local == K_EXEC || c->local == K_DISCARD ||
                     c->local == K_UNWATCH) && argc != 1)) {
            reject_arity(m, buf + m->args[0].off, m->args[0].len);
        } else if (c->local == K_SCAN) {
            parse_cursor(m);
        } else if (c->local == K_SCRIPT) {
            check_script(m);
        } else {
            find_keys(m);
        }
    }
    if (argv != stack)
        free(argv);
    return from_resp(st);
}

static px_parse redis_scan_reply(const px_limits *lim, uint8_t expect, const char *buf,
                                 size_t len, px_reply *r, size_t *consumed, size_t *need,
                                 char *err, size_t errlen)
{
    (void)expect;
    ch_resp_limits rl;
    to_resp(lim, &rl);
    ch_resp_reply rr;
    ch_resp_status st = ch_resp_scan_reply(buf, len, &rl, &rr, need, err, errlen);
    if (st != CH_RESP_OK)
        return from_resp(st);
    *consumed = rr.len;
    r->p = buf; /* with its attributes, if any: they reach the client with it */
    r->len = rr.len;
    r->integer = rr.integer;
    switch (rr.type) {
    case CH_RESP_STATUS:
        r->kind = PX_REPLY_OK;
        break;
    case CH_RESP_ERROR:
    case CH_RESP_BLOB_ERROR:
        r->kind = PX_REPLY_ERROR;
        break;
    case CH_RESP_INTEGER:
        r->kind = PX_REPLY_INTEGER;
        break;
    case CH_RESP_PUSH:
        r->kind = PX_REPLY_PUSH;
        break;
    case CH_RESP_NULL:
        r->kind = PX_REPLY_MISS;
        break;
    default: /* bulk, array (their nulls: misses), and RESP3's other values */
        r->kind = (rr.type == CH_RESP_BULK || rr.type == CH_RESP_ARRAY) && rr.integer < 0
                      ? PX_REPLY_MISS
                      : PX_REPLY_VALUE;
        break;
    }
    return PX_PARSE_OK;
}

/* ---- writing ----------------------------------------------------------------------------------- */

/* "$<len>\r\n<data>\r\n" in one reservation (the length written by hand: printf's cost was
 * a tenth of a split command's encoding). */
static int bulk(px_buf *b, const void *data, size_t len)
{
    char num[24];
    size_t n = 0;
    size_t v = len;
    do {
        num[sizeof(num) - 1 - n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    if (px_buf_reserve(b, 1 + n + 2 + len + 2) != 0)
        return -1;
    char *p = b->p + b->len;
    *p++ = '$';
    memcpy(p, num + sizeof(num) - n, n);
    p += n;
    *p++ = '\r';
    *p++ = '\n';
    if (len > 0)
        memcpy(p, data, len);
    p += len;
    *p++ = '\r';
    *p++ = '\n';
    b->len = (size_t)(p - b->p);
    return 0;
}

static int span_bulk(px_buf *b, const px_msg *m, px_span s)
{
    return bulk(b, m->raw + s.off, s.len);
}

/* A null as a dialect writes it where Redis writes a null bulk: "$-1" in RESP2, "_" in RESP3. */
static int null_bulk(px_buf *b, uint8_t dialect)
{
    return dialect == PX_DIALECT_RESP3 ? px_buf_append(b, "_\r\n", 3)
                                       : px_buf_append(b, "$-1\r\n", 5);
}

/* Text as Redis replies with a report (INFO, CLIENT INFO, CLIENT LIST): a bulk string in RESP2,
 * a verbatim string of format "txt" in RESP3. */
static int verbatim(px_buf *b, uint8_t dialect, const char *text, size_t len)
{
    if (dialect != PX_DIALECT_RESP3)
        return bulk(b, text, len);
    return px_buf_printf(b, "=%zu\r\ntxt:", len + 4) == 0 && px_buf_append(b, text, len) == 0 &&
                   px_buf_append(b, "\r\n", 2) == 0
               ? 0
               : -1;
}

/* A request that is not split goes as it came (an inline command as an array); a split one as
 * the command with its keys keys[0, nkeys) (and their values: step 2). */
static int redis_encode_request(px_buf *out, const px_msg *m, const uint32_t *keys, size_t nkeys,
                                uint8_t *expect)
{
    *expect = 0;
    const px_cmd *c = m->cmd;
    if (c->local == K_SCAN) { /* with the server's own cursor (the route set it) */
        char cur[24];
        int n = snprintf(cur, sizeof(cur), "%llu", (unsigned long long)m->cursor);
        int rc = px_buf_printf(out, "*%zu\r\n", m->nargs);
        rc |= span_bulk(out, m, m->args[0]);
        rc |= bulk(out, cur, (size_t)n);
        for (size_t i = 2; rc == 0 && i < m->nargs; i++)
            rc = span_bulk(out, m, m->args[i]);
        return rc;
    }
    if (c->cls != PX_CLASS_MULTI) {
        if (m->len > 0 && m->raw[0] == '*')
            return px_buf_append(out, m->raw, m->len);
        int rc = px_buf_printf(out, "*%zu\r\n", m->nargs);
        for (size_t i = 0; rc == 0 && i < m->nargs; i++)
            rc = span_bulk(out, m, m->args[i]);
        return rc;
    }
    size_t step = (size_t)c->key_step;
    int rc = px_buf_printf(out, "*%zu\r\n", 1 + nkeys * step);
    rc |= span_bulk(out, m, m->args[0]);
    for (size_t k = 0; rc == 0 && k < nkeys; k++) {
        size_t at = (size_t)c->first_key + keys[k] * step;
        for (size_t j = 0; rc == 0 && j < step; j++)
            rc = span_bulk(out, m, m->args[at + j]);
    }
    return rc;
}

/* m as an array of its arguments' spans (a key a route stripped of its prefix). */
static int redis_encode_args(px_buf *out, const px_msg *m)
{
    int rc = px_buf_printf(out, "*%zu\r\n", m->nargs);
    for (size_t i = 0; rc == 0 && i < m->nargs; i++)
        rc = span_bulk(out, m, m->args[i]);
    return rc;
}

static int redis_encode_error(px_buf *out, px_error why, const char *msg)
{
    switch (why) {
    case PX_ERR_NOAUTH:
        return px_buf_append(out, "-NOAUTH Authentication required.\r\n", 34);
    case PX_ERR_UNKNOWN:
        return px_buf_printf(out, "-ERR unsupported command '%s'\r\n", msg);
    case PX_ERR_CROSS_SERVER: /* as Redis Cluster words it: clients know this error */
        return px_buf_printf(out, "-CROSSSLOT Keys in request don't hash to the same server "
                                  "(give them a common hash tag)\r\n");
    case PX_ERR_TRYAGAIN: /* Redis Cluster's code for "not now, during a resharding" */
        return px_buf_printf(out, "-TRYAGAIN %s\r\n", msg);
    default:
        return px_buf_printf(out, "-ERR %s\r\n", msg);
    }
}

static int redis_encode_probe(px_buf *out, uint8_t *expect)
{
    *expect = 0;
    return px_buf_append(out, "*1\r\n$4\r\nPING\r\n", 14);
}

static int redis_encode_delete(px_buf *out, const char *key, size_t len, uint8_t *expect)
{
    *expect = 0;
    return px_buf_append(out, "*2\r\n$3\r\nDEL\r\n", 13) == 0 && bulk(out, key, len) == 0 ? 0
                                                                                      : -1;
}

/* ---- warm-up copies ------------------------------------------------------------------------- */

/* A miss: a null (GET, HGET), an empty or null array (LRANGE, SMEMBERS, HGETALL of a key that
 * does not exist), or an MGET part for one key whose one value is null. Integer replies (EXISTS,
 * STRLEN, TTL) are never misses: their key is not looked for elsewhere. */
/* GET and MGET (a part for one key): a string's value and nothing else. */
static bool redis_near_cacheable(const px_cmd *cmd)
{
    return cmd->local == K_MGET ||
           (cmd->name_len == 3 && cmd->name[0] == 'g' && memcmp(cmd->name, "get", 3) == 0);
}

static bool redis_is_miss(const px_msg *m, const px_reply *r)
{
    (void)m;
    /* RESP2's, then RESP3's: its null, and the empty map and set of HGETALL and SMEMBERS. */
    static const char *const shapes[] = {"$-1\r\n", "*-1\r\n", "*0\r\n", "*1\r\n$-1\r\n",
                                         "_\r\n",   "*1\r\n_\r\n", "%0\r\n", "~0\r\n"};
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
        if (r->len == strlen(shapes[i]) && memcmp(r->p, shapes[i], r->len) == 0)
            return true;
    return false;
}

/* The key's remaining lifetime and serialized value in one round trip, read atomically: nil
 * when it does not exist, else {PTTL, DUMP}. EVAL keeps the contract of one reply per request;
 * Redis caches the script's compilation after the first call. */
#define FETCH_SCRIPT                                                                             \
    "local t = redis.call('PTTL', KEYS[1]) if t == -2 then return nil end "                     \
    "return {t, redis.call('DUMP', KEYS[1])}"

/* The same, deleting the key in the same step. */
#define TAKE_SCRIPT                                                                              \
    "local t = redis.call('PTTL', KEYS[1]) if t == -2 then return nil end "                     \
    "local v = redis.call('DUMP', KEYS[1]) redis.call('DEL', KEYS[1]) return {t, v}"

static int eval_one_key(px_buf *out, const char *script, size_t slen, const char *key,
                        size_t len, uint8_t *expect)
{
    *expect = 0;
    int rc = px_buf_append(out, "*4\r\n$4\r\nEVAL\r\n", 14);
    rc |= bulk(out, script, slen);
    rc |= px_buf_append(out, "$1\r\n1\r\n", 7);
    return rc == 0 ? bulk(out, key, len) : -1;
}

static int redis_encode_fetch(px_buf *out, const char *key, size_t len, uint8_t *expect)
{
    return eval_one_key(out, FETCH_SCRIPT, sizeof(FETCH_SCRIPT) - 1, key, len, expect);
}

static int redis_encode_take(px_buf *out, const char *key, size_t len, uint8_t *expect)
{
    return eval_one_key(out, TAKE_SCRIPT, sizeof(TAKE_SCRIPT) - 1, key, len, expect);
}

/* RESTORE key ttl payload, without REPLACE: a key that exists at the new owner (written there
 * since the change) answers BUSYKEY and keeps its value. The ttl is ch_resp_restore_ttl's (a
 * lifetime of -1, none, is RESTORE's 0; a key that expires before the copy, PTTL 0, is not
 * copied). */
static int redis_encode_fill(px_buf *out, const char *key, size_t len, const px_reply *fetched,
                             int64_t now_unix, uint8_t *expect)
{
    (void)now_unix;
    *expect = 0;
    ch_resp_limits rl;
    ch_resp_limits_init(&rl);
    rl.max_bulk = rl.max_request = (size_t)1 << 40;
    ch_resp_reply a, t, v;
    size_t need;
    const char *p = fetched->p;
    size_t n = fetched->len;
    if (ch_resp_scan_reply(p, n, &rl, &a, &need, NULL, 0) != CH_RESP_OK ||
        a.type != CH_RESP_ARRAY || a.integer != 2)
        return 0;
    const char *e = p + a.body;
    int64_t ttl;
    if (ch_resp_scan_reply(e, n - a.body, &rl, &t, &need, NULL, 0) != CH_RESP_OK ||
        t.type != CH_RESP_INTEGER || !ch_resp_restore_ttl(t.integer, 0, &ttl))
        return 0;
    e += t.len;
    if (ch_resp_scan_reply(e, n - (size_t)(e - p), &rl, &v, &need, NULL, 0) != CH_RESP_OK ||
        v.type != CH_RESP_BULK || v.integer < 0)
        return 0;
    int rc = px_buf_append(out, "*4\r\n$7\r\nRESTORE\r\n", 17);
    rc |= bulk(out, key, len);
    char ts[24];
    int tl = snprintf(ts, sizeof(ts), "%lld", (long long)ttl);
    rc |= bulk(out, ts, (size_t)tl);
    rc |= bulk(out, e + v.body, v.body_len);
    return rc == 0 ? 1 : -1;
}

static int redis_fill_stored(const px_reply *r)
{
    if (r->kind == PX_REPLY_OK)
        return 1;
    return r->len >= 8 && memcmp(r->p, "-BUSYKEY", 8) == 0 ? 0 : -1;
}


/* ---- the gutter pool --------------------------------------------------------------------- */

/* A decimal int64 (Redis's own syntax: an optional '-', digits, no spaces); false otherwise. */
static bool arg_i64(const px_msg *m, size_t i, int64_t *out)
{
    const char *p = m->raw + m->args[i].off;
    size_t n = m->args[i].len, k = 0;
    bool neg = n > 0 && p[0] == '-';
    k = neg ? 1 : 0;
    if (k == n || n - k > 18) /* 18 digits: no overflow below */
        return false;
    int64_t v = 0;
    for (; k < n; k++) {
        if (p[k] < '0' || p[k] > '9')
            return false;
        v = v * 10 + (p[k] - '0');
    }
    *out = neg ? -v : v;
    return true;
}

static int int_bulk(px_buf *b, int64_t v)
{
    char num[24];
    int n = snprintf(num, sizeof(num), "%lld", (long long)v);
    return bulk(b, num, (size_t)n);
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* Runs the command in ARGV[2..] and caps KEYS[1]'s lifetime at ARGV[1] ms, atomically; the
 * command's reply is the script's (Lua keeps integers, bulks, nils, arrays and statuses). For a
 * RESP3 client the command is called in RESP3 (redis.setresp(3)), so its maps, sets, doubles
 * and booleans come back to the client as such, as they would without the script. */
#define CAP_BODY                                                                                 \
    "local r = redis.call(unpack(ARGV, 2)) local t = redis.call('PTTL', KEYS[1]) "              \
    "if t == -1 or t > tonumber(ARGV[1]) then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end "     \
    "return r"
#define CAP_SCRIPT CAP_BODY
#define CAP_SCRIPT3 "redis.setresp(3) " CAP_BODY

/* Writes of more than one key (a destination besides the routing key, or several keys): the
 * gutter could cap the routing key alone, so they are refused there. */
static bool writes_several(const px_msg *m)
{
    static const char *const names[] = {
        "rpoplpush", "lmove", "smove", "sdiffstore", "sinterstore", "sunionstore",
        "zinterstore", "zunionstore", "pfmerge", "sort", "georadius", "georadiusbymember",
    };
    if ((m->cmd->flags & PX_CMD_ONE_SERVER) != 0)
        return true;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(m->cmd->name, names[i]) == 0)
            return true;
    return false;
}

/* One more key written unnamed, argument arg: into at[*n] while there is room. */
static void unnamed_at(uint32_t *at, size_t *n, size_t arg)
{
    if (at != NULL && *n < PX_UNNAMED_MAX)
        at[*n] = (uint32_t)arg;
    ++*n;
}

/* The keys a request writes that its key spec does not name (px_codec.writes_unnamed): those
 * a script that may write does not declare (not EVAL_RO's: Redis refuses a write there), the
 * destination of RPOPLPUSH, LMOVE and SMOVE (argv[2]), the STORE or STOREDIST key of SORT,
 * GEORADIUS and GEORADIUSBYMEMBER: the argument after any argument spelled so, a BY pattern's
 * too (at worst a read refused while a change is staged, or an entry of the near cache ended,
 * never a write served unstaged). Cost: a few name compares and, for those three, a pass over
 * the arguments. */
static const char *redis_writes_unnamed(const px_msg *m, uint32_t *at, size_t *nat)
{
    static const char *const dst[] = {"rpoplpush", "lmove", "smove"};
    static const char *const store[] = {"sort", "georadius", "georadiusbymember"};
    const px_cmd *c = m->cmd;
    size_t n = 0;
    const char *why = NULL;
    if (c->local == K_EVAL && !c->retry)
        why = "a script may write keys it does not declare, which cannot be staged (EVAL_RO and "
              "EVALSHA_RO are served)";
    for (size_t i = 0; why == NULL && i < sizeof(dst) / sizeof(dst[0]); i++) {
        if (strcmp(c->name, dst[i]) == 0) {
            why = "it writes its destination, which cannot be staged";
            unnamed_at(at, &n, 2);
        }
    }
    for (size_t i = 0; why == NULL && i < sizeof(store) / sizeof(store[0]); i++) {
        if (strcmp(c->name, store[i]) != 0)
            continue;
        for (size_t a = 2; a < m->nargs; a++) {
            if (!arg_is(m, a, "store") && !arg_is(m, a, "storedist"))
                continue;
            why = "it writes its STORE key, which cannot be staged";
            if (a + 1 < m->nargs) /* last: Redis answers a syntax error, writes nothing */
                unnamed_at(at, &n, a + 1);
        }
    }
    if (nat != NULL)
        *nat = n <= PX_UNNAMED_MAX ? n : 0; /* more than it can name: none named */
    return why;
}

/* SET k v [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]: its other options kept, its
 * lifetime replaced by PX min(given, ttl) or PXAT min(given, now + ttl); none or KEEPTTL: PX
 * ttl. 1 with why set when a lifetime's value is not an integer. */
static int capped_set(px_buf *out, const px_msg *m, int64_t ttl, int64_t now_ms, char *why,
                      size_t whylen)
{
    int64_t rel = ttl, at = -1, v;
    size_t dropped = 0, lifetimes = 0;
    for (size_t i = 3; i < m->nargs; i++) {
        bool ex = arg_is(m, i, "ex"), px = arg_is(m, i, "px");
        bool exat = arg_is(m, i, "exat"), pxat = arg_is(m, i, "pxat");
        bool keep = arg_is(m, i, "keepttl");
        if ((ex || px || exat || pxat || keep) && ++lifetimes > 1) {
            snprintf(why, whylen, "syntax error"); /* as Redis answers two of them */
            return 1;
        }
        if (keep) {
            dropped++;
            continue;
        }
        if (!(ex || px || exat || pxat) || i + 1 >= m->nargs)
            continue; /* kept: Redis judges it */
        if (!arg_i64(m, i + 1, &v)) {
            snprintf(why, whylen, "value is not an integer or out of range");
            return 1;
        }
        if (ex || exat)
            v = v > INT64_MAX / 1000 ? INT64_MAX : v < INT64_MIN / 1000 ? INT64_MIN : v * 1000;
        if (ex || px)
            rel = min64(v, ttl);
        else
            at = min64(v, now_ms + ttl);
        dropped += 2;
        i++;
    }
    int rc = px_buf_printf(out, "*%zu\r\n", m->nargs - dropped + 2);
    for (size_t i = 0; rc == 0 && i < m->nargs; i++) {
        if (i >= 3 && arg_is(m, i, "keepttl"))
            continue;
        if (i >= 3 && i + 1 < m->nargs &&
            (arg_is(m, i, "ex") || arg_is(m, i, "px") || arg_is(m, i, "exat") ||
             arg_is(m, i, "pxat"))) {
            i++;
            continue;
        }
        rc = span_bulk(out, m, m->args[i]);
    }
    if (rc == 0)
        rc = at >= 0 ? bulk(out, "PXAT", 4) : bulk(out, "PX", 2);
    return rc == 0 ? int_bulk(out, at >= 0 ? at : rel) : -1;
}

/* The request m as the gutter gets it (px_codec.encode_capped):
 *   a read             -> as it is;
 *   SET                -> its lifetime capped (capped_set);
 *   SETEX, PSETEX      -> PSETEX k min(given, ttl) v;
 *   an MSET part       -> SET k v PX ttl (one key: the gutter serves its keys one by one);
 *   DEL, UNLINK, GETDEL, PUBLISH -> as they are (they give no key a lifetime);
 *   a write of more than one key -> refused (writes_several);
 *   any other write    -> EVAL CAP_SCRIPT: the command, then its key's lifetime capped, in one
 *                         step. */
static int redis_encode_capped(px_buf *out, const px_msg *m, const uint32_t *keys, size_t nkeys,
                               uint64_t ttl_ms, int64_t now_ms, uint8_t *expect, char *why,
                               size_t whylen)
{
    *expect = 0;
    const px_cmd *c = m->cmd;
    int64_t ttl = ttl_ms > (uint64_t)INT64_MAX / 2 ? INT64_MAX / 2 : (int64_t)ttl_ms;
    if (c->retry) /* a read: no lifetime given */
        return redis_encode_request(out, m, keys, nkeys, expect);
    if (c->local == K_MSET) {
        if (nkeys != 1)
            return -1;
        size_t at = (size_t)c->first_key + keys[0] * 2;
        int rc = px_buf_append(out, "*5\r\n$3\r\nSET\r\n", 13);
        rc |= span_bulk(out, m, m->args[at]);
        rc |= span_bulk(out, m, m->args[at + 1]);
        rc |= bulk(out, "PX", 2);
        return rc == 0 ? int_bulk(out, ttl) : -1;
    }
    if (c->cls == PX_CLASS_MULTI || strcmp(c->name, "getdel") == 0 ||
        strcmp(c->name, "publish") == 0)
        return redis_encode_request(out, m, keys, nkeys, expect);
    if (writes_several(m)) {
        snprintf(why, whylen,
                 "chash-proxy: '%s' writes more than one key; not served by the gutter pool "
                 "while the key's server is out",
                 c->name);
        return 1;
    }
    if (strcmp(c->name, "set") == 0)
        return capped_set(out, m, ttl, now_ms, why, whylen);
    int64_t v;
    bool setex = strcmp(c->name, "setex") == 0;
    if (setex || strcmp(c->name, "psetex") == 0) {
        if (!arg_i64(m, 2, &v)) {
            snprintf(why, whylen, "value is not an integer or out of range");
            return 1;
        }
        if (setex)
            v = v > INT64_MAX / 1000 ? INT64_MAX : v < INT64_MIN / 1000 ? INT64_MIN : v * 1000;
        int rc = px_buf_append(out, "*4\r\n$6\r\nPSETEX\r\n", 16);
        rc |= span_bulk(out, m, m->args[1]);
        rc |= int_bulk(out, min64(v, ttl));
        return rc == 0 ? span_bulk(out, m, m->args[3]) : -1;
    }
    int rc = px_buf_printf(out, "*%zu\r\n", 5 + m->nargs);
    rc |= bulk(out, "EVAL", 4);
    rc |= m->dialect == PX_DIALECT_RESP3 ? bulk(out, CAP_SCRIPT3, sizeof(CAP_SCRIPT3) - 1)
                                         : bulk(out, CAP_SCRIPT, sizeof(CAP_SCRIPT) - 1);
    rc |= bulk(out, "1", 1);
    rc |= span_bulk(out, m, m->args[1]);
    rc |= int_bulk(out, ttl);
    for (size_t i = 0; rc == 0 && i < m->nargs; i++)
        rc = span_bulk(out, m, m->args[i]);
    return rc;
}

/* AUTH (redis_auth), SELECT (redis_db), then HELLO 3 on a connection for RESP3 clients: its
 * replies are then the server's RESP3 (a server that refuses it, older than Redis 6, is logged
 * and answers in RESP2, which RESP3 clients read too). */
static int redis_encode_handshake(px_buf *out, const ch_conf_pool *pc, uint8_t dialect, size_t i,
                                  uint8_t *expect, const char **what)
{
    *expect = 0;
    enum { AUTH, SELECT, HELLO3 } steps[3];
    size_t n = 0;
    if (pc->redis_auth != NULL)
        steps[n++] = AUTH;
    if (pc->redis_db != 0)
        steps[n++] = SELECT;
    if (dialect == PX_DIALECT_RESP3)
        steps[n++] = HELLO3;
    if (i >= n)
        return 0;
    switch (steps[i]) {
    case AUTH:
        *what = "AUTH";
        return px_buf_append(out, "*2\r\n$4\r\nAUTH\r\n", 14) == 0 &&
                       bulk(out, pc->redis_auth, strlen(pc->redis_auth)) == 0
                   ? 1
                   : -1;
    case SELECT: {
        char db[24];
        int len = snprintf(db, sizeof(db), "%d", pc->redis_db);
        *what = "SELECT";
        return px_buf_append(out, "*2\r\n$6\r\nSELECT\r\n", 16) == 0 &&
                       bulk(out, db, (size_t)len) == 0
                   ? 1
                   : -1;
    }
    default:
        *what = "HELLO 3";
        return px_buf_append(out, "*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n", 22) == 0 ? 1 : -1;
    }
}

/* ---- merging ----------------------------------------------------------------------------------- */

struct px_merger {
    px_buf err;    /* the first error reply of a part */
    int64_t sum;   /* PX_MERGE_SUM */
    size_t nslots; /* PX_MERGE_ARRAY: one value per key */
    px_span *slots; /* into vals; len 0: none yet ($-1) */
    px_buf vals;    /* PX_MERGE_EVERY: the first part's reply, which every other must equal */
    size_t nparts;  /* PX_MERGE_EVERY: parts merged */
    uint8_t *all;   /* SCRIPT EXISTS: per SHA, 1 while every server so far has it */
    size_t nall;
};

static void set_error(px_merger *mg, const char *p, size_t len)
{
    if (mg->err.len == 0)
        px_buf_append(&mg->err, p, len);
}

/* SCRIPT EXISTS sha...: the AND over the servers' arrays, per script. */
static void merge_exists(px_merger *mg, const px_reply *r)
{
    ch_resp_reply rr, el;
    ch_resp_limits rl;
    ch_resp_limits_init(&rl);
    rl.max_request = SIZE_MAX;
    size_t need;
    static const char bad[] = "-ERR unexpected reply to SCRIPT EXISTS from a backend\r\n";
    if (ch_resp_scan_reply(r->p, r->len, &rl, &rr, &need, NULL, 0) != CH_RESP_OK ||
        rr.type != CH_RESP_ARRAY || rr.integer != (int64_t)mg->nall) {
        set_error(mg, bad, sizeof(bad) - 1);
        return;
    }
    size_t off = rr.body;
    for (size_t k = 0; k < mg->nall; k++) {
        if (ch_resp_scan_reply(r->p + off, r->len - off, &rl, &el, &need, NULL, 0) !=
                CH_RESP_OK ||
            el.type != CH_RESP_INTEGER) {
            set_error(mg, bad, sizeof(bad) - 1);
            return;
        }
        if (el.integer == 0)
            mg->all[k] = 0;
        off += el.len;
    }
}

/* SCRIPT LOAD and FLUSH: every server must answer the same (the same SHA, +OK). */
static void merge_same(px_merger *mg, const px_reply *r)
{
    if (mg->nparts == 1) {
        if (px_buf_append(&mg->vals, r->p, r->len) != 0) {
            static const char oom[] = "-ERR out of memory\r\n";
            set_error(mg, oom, sizeof(oom) - 1);
        }
    } else if (r->len != mg->vals.len || memcmp(r->p, mg->vals.p, r->len) != 0) {
        static const char bad[] = "-ERR the servers of the pool answered differently\r\n";
        set_error(mg, bad, sizeof(bad) - 1);
    }
}

static px_merger *redis_merge_begin(const px_msg *m)
{
    px_merger *mg = calloc(1, sizeof(*mg));
    if (mg == NULL)
        return NULL;
    if (m->cmd->merge == PX_MERGE_EVERY && arg_is(m, 1, "exists")) {
        mg->nall = m->nargs - 2;
        mg->all = malloc(mg->nall);
        if (mg->all == NULL) {
            free(mg);
            return NULL;
        }
        memset(mg->all, 1, mg->nall);
    }
    if (m->cmd->merge == PX_MERGE_ARRAY) {
        mg->nslots = m->nkeys;
        mg->slots = calloc(m->nkeys, sizeof(*mg->slots));
        if (mg->slots == NULL) {
            free(mg);
            return NULL;
        }
    }
    return mg;
}

static void redis_merge_part(px_merger *mg, const px_msg *m, const uint32_t *keys, size_t nkeys,
                             const px_reply *r)
{
    if (r->kind == PX_REPLY_ERROR || r->kind == PX_REPLY_FAILED) {
        set_error(mg, r->p, r->len);
        return;
    }
    switch (m->cmd->merge) {
    case PX_MERGE_EVERY:
        mg->nparts++;
        if (mg->all != NULL)
            merge_exists(mg, r);
        else
            merge_same(mg, r);
        return;
    case PX_MERGE_ARRAY: {
        ch_resp_reply rr;
        ch_resp_limits rl;
        ch_resp_limits_init(&rl);
        rl.max_request = SIZE_MAX;
        size_t need;
        if (r->kind != PX_REPLY_VALUE ||
            ch_resp_scan_reply(r->p, r->len, &rl, &rr, &need, NULL, 0) != CH_RESP_OK ||
            rr.type != CH_RESP_ARRAY || rr.integer != (int64_t)nkeys) {
            static const char bad[] = "-ERR unexpected reply to MGET from a backend\r\n";
            set_error(mg, bad, sizeof(bad) - 1);
            return;
        }
        size_t off = rr.body;
        for (size_t k = 0; k < nkeys; k++) {
            ch_resp_reply el;
            if (ch_resp_scan_reply(r->p + off, r->len - off, &rl, &el, &need, NULL, 0) !=
                CH_RESP_OK)
                break;
            mg->slots[keys[k]] = (px_span){(uint32_t)mg->vals.len, (uint32_t)el.len};
            if (px_buf_append(&mg->vals, r->p + off, el.len) != 0)
                mg->slots[keys[k]].len = 0;
            off += el.len;
        }
        return;
    }
    case PX_MERGE_SUM:
        if (r->kind == PX_REPLY_INTEGER) {
            mg->sum += r->integer;
        } else {
            static const char bad[] = "-ERR unexpected reply from a backend\r\n";
            set_error(mg, bad, sizeof(bad) - 1);
        }
        return;
    default:
        return;
    }
}

static int redis_merge_end(px_merger *mg, const px_msg *m, px_buf *out)
{
    int rc;
    bool error = mg->err.len > 0;
    if (error) {
        rc = px_buf_append(out, mg->err.p, mg->err.len);
    } else if (m->cmd->merge == PX_MERGE_ARRAY) {
        rc = px_buf_printf(out, "*%zu\r\n", mg->nslots);
        for (size_t i = 0; rc == 0 && i < mg->nslots; i++)
            rc = mg->slots[i].len == 0
                     ? null_bulk(out, m->dialect)
                     : px_buf_append(out, mg->vals.p + mg->slots[i].off, mg->slots[i].len);
    } else if (m->cmd->merge == PX_MERGE_SUM) {
        rc = px_buf_printf(out, ":%lld\r\n", (long long)mg->sum);
    } else if (m->cmd->merge == PX_MERGE_EVERY && mg->all != NULL) {
        rc = px_buf_printf(out, "*%zu\r\n", mg->nall);
        for (size_t i = 0; rc == 0 && i < mg->nall; i++)
            rc = px_buf_printf(out, ":%d\r\n", mg->all[i]);
    } else if (m->cmd->merge == PX_MERGE_EVERY) {
        rc = px_buf_append(out, mg->vals.p, mg->vals.len);
    } else {
        rc = px_buf_append(out, "+OK\r\n", 5);
    }
    px_buf_free(&mg->err);
    px_buf_free(&mg->vals);
    free(mg->slots);
    free(mg->all);
    free(mg);
    return rc != 0 ? -1 : error ? 1 : 0;
}

/* ---- SCAN, pub/sub, transactions ---------------------------------------------------------------- */

static void reply_limits(ch_resp_limits *rl)
{
    ch_resp_limits_init(rl);
    rl->max_request = SIZE_MAX;
}

/* A SCAN reply: [cursor (bulk), keys (array)]. *el0: the cursor's element. */
static int scan_parts(const px_reply *r, ch_resp_reply *el0, size_t *at)
{
    ch_resp_reply rr;
    ch_resp_limits rl;
    reply_limits(&rl);
    size_t need;
    if (ch_resp_scan_reply(r->p, r->len, &rl, &rr, &need, NULL, 0) != CH_RESP_OK ||
        rr.type != CH_RESP_ARRAY || rr.integer != 2)
        return -1;
    *at = rr.body;
    if (ch_resp_scan_reply(r->p + *at, r->len - *at, &rl, el0, &need, NULL, 0) != CH_RESP_OK ||
        el0->type != CH_RESP_BULK || el0->integer < 0)
        return -1;
    return 0;
}

static int redis_scan_cursor(const px_reply *r, uint64_t *cursor)
{
    ch_resp_reply el;
    size_t at;
    if (scan_parts(r, &el, &at) != 0 || el.body_len == 0 || el.body_len > 20)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < el.body_len; i++) {
        unsigned char ch = (unsigned char)r->p[at + el.body + i];
        unsigned d = (unsigned)(ch - '0');
        if (ch < '0' || ch > '9' || v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *cursor = v;
    return 0;
}

static int redis_scan_rewrite(px_buf *out, const px_reply *r, uint64_t cursor)
{
    ch_resp_reply el;
    size_t at;
    if (scan_parts(r, &el, &at) != 0)
        return -1;
    char cur[24];
    int n = snprintf(cur, sizeof(cur), "%llu", (unsigned long long)cursor);
    size_t keys = at + el.len; /* the keys' array, as the server sent it */
    if (px_buf_append(out, "*2\r\n", 4) != 0 || bulk(out, cur, (size_t)n) != 0)
        return -1;
    return px_buf_append(out, r->p + keys, r->len - keys);
}

/* The rejoin's walk: SCAN cursor COUNT 1000 over the connection's database (redis_db was
 * SELECTed when it opened). COUNT bounds a page (so the deletes in flight) roughly: Redis may
 * return a few more. */
#define WALK_COUNT "1000"

static int redis_encode_walk(px_buf *out, uint64_t cursor, uint8_t *expect)
{
    *expect = 0;
    char cur[24];
    int n = snprintf(cur, sizeof(cur), "%llu", (unsigned long long)cursor);
    static const char scan[] = "*4\r\n$4\r\nSCAN\r\n", count[] = "$5\r\nCOUNT\r\n";
    return px_buf_append(out, scan, sizeof(scan) - 1) == 0 && bulk(out, cur, (size_t)n) == 0 &&
                   px_buf_append(out, count, sizeof(count) - 1) == 0 &&
                   bulk(out, WALK_COUNT, sizeof(WALK_COUNT) - 1) == 0
               ? 0
               : -1;
}

static int redis_walk_page(const px_reply *r, uint64_t *next,
                           void (*fn)(void *arg, const char *key, size_t len), void *arg)
{
    ch_resp_reply el, arr;
    ch_resp_limits rl;
    reply_limits(&rl);
    size_t at, need;
    if (redis_scan_cursor(r, next) != 0 || scan_parts(r, &el, &at) != 0)
        return -1;
    size_t off = at + el.len; /* the keys' array */
    if (ch_resp_scan_reply(r->p + off, r->len - off, &rl, &arr, &need, NULL, 0) != CH_RESP_OK ||
        arr.type != CH_RESP_ARRAY || arr.integer < 0)
        return -1;
    off += arr.body;
    for (int64_t k = 0; k < arr.integer; k++) {
        if (ch_resp_scan_reply(r->p + off, r->len - off, &rl, &el, &need, NULL, 0) !=
                CH_RESP_OK ||
            el.type != CH_RESP_BULK || el.integer < 0)
            return -1;
        fn(arg, r->p + off + el.body, el.body_len);
        off += el.len;
    }
    return 0;
}

/* Pushes on a subscribed connection: [kind, ...] with kind one of Redis's words (an array in
 * RESP2, a push in RESP3). */
static int redis_push_kind(const px_reply *r)
{
    ch_resp_reply rr, el;
    ch_resp_limits rl;
    reply_limits(&rl);
    size_t need;
    if (ch_resp_scan_reply(r->p, r->len, &rl, &rr, &need, NULL, 0) != CH_RESP_OK ||
        (rr.type != CH_RESP_ARRAY && rr.type != CH_RESP_PUSH) || rr.integer < 3 ||
        ch_resp_scan_reply(r->p + rr.body, r->len - rr.body, &rl, &el, &need, NULL, 0) !=
            CH_RESP_OK ||
        el.type != CH_RESP_BULK || el.integer < 0)
        return PX_PUSH_OTHER;
    const char *w = r->p + rr.body + el.body;
    size_t n = el.body_len;
#define IS(word) (n == sizeof(word) - 1 && memcmp(w, word, n) == 0)
    if (IS("message") || IS("pmessage"))
        return PX_PUSH_MESSAGE;
    if (IS("subscribe") || IS("psubscribe") || IS("unsubscribe") || IS("punsubscribe"))
        return PX_PUSH_CONFIRM;
#undef IS
    return PX_PUSH_OTHER;
}

static const char *op_word(px_session_op op)
{
    switch (op) {
    case PX_SES_MULTI: return "MULTI";
    case PX_SES_EXEC: return "EXEC";
    case PX_SES_DISCARD: return "DISCARD";
    case PX_SES_UNWATCH: return "UNWATCH";
    case PX_SES_SUBSCRIBE: return "subscribe";
    case PX_SES_PSUBSCRIBE: return "psubscribe";
    case PX_SES_UNSUBSCRIBE: return "unsubscribe";
    case PX_SES_PUNSUBSCRIBE: return "punsubscribe";
    default: return "";
    }
}

/* A subscription's confirmation: an array in RESP2, a push in RESP3, as Redis writes it. */
static int redis_encode_sub_reply(px_buf *out, uint8_t dialect, px_session_op op,
                                  const char *name, size_t len, uint64_t count)
{
    const char *w = op_word(op);
    int rc = px_buf_append(out, dialect == PX_DIALECT_RESP3 ? ">3\r\n" : "*3\r\n", 4) |
             bulk(out, w, strlen(w));
    rc |= name != NULL ? bulk(out, name, len) : null_bulk(out, dialect);
    rc |= px_buf_printf(out, ":%llu\r\n", (unsigned long long)count);
    return rc != 0 ? -1 : 0;
}

static int redis_encode_txn(px_buf *out, uint8_t dialect, px_txn_reply what)
{
    static const char abort[] = "-EXECABORT Transaction discarded because of previous errors.\r\n";
    switch (what) {
    case PX_TXN_OK:
        return px_buf_append(out, "+OK\r\n", 5);
    case PX_TXN_EMPTY:
        return px_buf_append(out, "*0\r\n", 4);
    case PX_TXN_NIL: /* a null array: RESP3 has one null */
        return dialect == PX_DIALECT_RESP3 ? px_buf_append(out, "_\r\n", 3)
                                           : px_buf_append(out, "*-1\r\n", 5);
    default:
        return px_buf_append(out, abort, sizeof(abort) - 1);
    }
}

static int redis_encode_op(px_buf *out, px_session_op op, const char *const *names,
                           const size_t *lens, size_t n)
{
    const char *w = op_word(op);
    int rc = px_buf_printf(out, "*%zu\r\n", 1 + n) | bulk(out, w, strlen(w));
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = bulk(out, names[i], lens[i]);
    return rc != 0 ? -1 : 0;
}

/* ---- server-assisted invalidation (track.c) ------------------------------------------------------ */

/* The link is RESP3 (its connection opens with HELLO 3), so that invalidations come as pushes,
 * told apart from the replies to its keepalive whatever is in flight; a fill connection's
 * tracking redirects to it (Redis sends a RESP3 redirect target the push
 * [invalidate, keys | null] without a SUBSCRIBE). */
static int redis_encode_track(px_buf *out, px_track_op op, uint64_t id)
{
    static const char name[] = "*3\r\n$6\r\nCLIENT\r\n$7\r\nSETNAME\r\n$16\r\nchash-invalidate\r\n";
    static const char cid[] = "*2\r\n$6\r\nCLIENT\r\n$2\r\nID\r\n";
    static const char caching[] = "*3\r\n$6\r\nCLIENT\r\n$7\r\nCACHING\r\n$3\r\nyes\r\n";
    static const char ping[] = "*1\r\n$4\r\nPING\r\n";
    static const char off[] = "*3\r\n$6\r\nCLIENT\r\n$8\r\nTRACKING\r\n$3\r\noff\r\n";
    static const char on[] = "*6\r\n$6\r\nCLIENT\r\n$8\r\nTRACKING\r\n$2\r\non\r\n"
                             "$8\r\nREDIRECT\r\n";
    switch (op) {
    case PX_TRACK_NAME:
        return px_buf_append(out, name, sizeof(name) - 1);
    case PX_TRACK_ID:
        return px_buf_append(out, cid, sizeof(cid) - 1);
    case PX_TRACK_ON: {
        char n[24];
        int len = snprintf(n, sizeof(n), "%llu", (unsigned long long)id);
        return px_buf_append(out, on, sizeof(on) - 1) == 0 && bulk(out, n, (size_t)len) == 0 &&
                       px_buf_append(out, "$5\r\nOPTIN\r\n", 11) == 0
                   ? 0
                   : -1;
    }
    case PX_TRACK_CACHING:
        return px_buf_append(out, caching, sizeof(caching) - 1);
    case PX_TRACK_DISABLE:
        return px_buf_append(out, off, sizeof(off) - 1);
    default:
        return px_buf_append(out, ping, sizeof(ping) - 1);
    }
}

static int redis_encode_track_bcast(px_buf *out, uint64_t id, const char *const *p,
                                    const uint32_t *len, size_t n)
{
    char num[24];
    int k = snprintf(num, sizeof(num), "%llu", (unsigned long long)id);
    int rc = px_buf_printf(out, "*%zu\r\n", 6 + 2 * n);
    rc |= bulk(out, "CLIENT", 6) | bulk(out, "TRACKING", 8) | bulk(out, "on", 2) |
          bulk(out, "REDIRECT", 8) | bulk(out, num, (size_t)k) | bulk(out, "BCAST", 5);
    for (size_t i = 0; i < n; i++)
        rc |= bulk(out, "PREFIX", 6) | bulk(out, p[i], len[i]);
    return rc == 0 ? 0 : -1;
}

static int redis_track_keys(const px_reply *r, bool *all,
                            void (*fn)(void *arg, const char *key, size_t len), void *arg)
{
    ch_resp_reply rr, el;
    ch_resp_limits rl;
    reply_limits(&rl);
    size_t need, off;
    *all = false;
    if (ch_resp_scan_reply(r->p, r->len, &rl, &rr, &need, NULL, 0) != CH_RESP_OK ||
        rr.type != CH_RESP_PUSH || rr.integer != 2 ||
        ch_resp_scan_reply(r->p + rr.body, r->len - rr.body, &rl, &el, &need, NULL, 0) !=
            CH_RESP_OK ||
        el.type != CH_RESP_BULK || el.body_len != 10 ||
        memcmp(r->p + rr.body + el.body, "invalidate", 10) != 0)
        return 0;
    off = rr.body + el.len;
    if (ch_resp_scan_reply(r->p + off, r->len - off, &rl, &rr, &need, NULL, 0) != CH_RESP_OK)
        return 0;
    if (rr.type == CH_RESP_NULL || (rr.type == CH_RESP_ARRAY && rr.integer < 0)) {
        *all = true; /* FLUSHALL, FLUSHDB: every key */
        return 1;
    }
    if (rr.type != CH_RESP_ARRAY)
        return 0;
    off += rr.body;
    for (int64_t k = 0; k < rr.integer; k++) {
        if (ch_resp_scan_reply(r->p + off, r->len - off, &rl, &el, &need, NULL, 0) !=
                CH_RESP_OK ||
            el.type != CH_RESP_BULK || el.integer < 0) {
            *all = true; /* what it names cannot be read: every key, to be safe */
            return 1;
        }
        fn(arg, r->p + off + el.body, el.body_len);
        off += el.len;
    }
    return 1;
}

/* ---- local commands ---------------------------------------------------------------------------- */

static int reply_error(px_buf *out, const char *msg)
{
    return redis_encode_error(out, PX_ERR_CLIENT, msg) == 0 ? 1 : -1;
}

static int reply(px_buf *out, const char *p, size_t len)
{
    return px_buf_append(out, p, len) == 0 ? 0 : -1;
}

/* An error reply with its own code ("-WRONGPASS ...\r\n"): 1, or -1. */
static int reply_coded(px_buf *out, const char *line)
{
    return px_buf_append(out, line, strlen(line)) == 0 ? 1 : -1;
}

static const char WRONGPASS[] =
    "-WRONGPASS invalid username-password pair or user is disabled.\r\n";

/* Whether the span is a name Redis accepts for a client (CLIENT SETNAME, HELLO SETNAME) or a
 * library (CLIENT SETINFO): printable ASCII without spaces, '!' to '~'. */
static bool name_ok(const px_msg *m, px_span sp)
{
    for (uint32_t i = 0; i < sp.len; i++) {
        unsigned char c = (unsigned char)m->raw[sp.off + i];
        if (c < '!' || c > '~')
            return false;
    }
    return true;
}

/* An argument as an error shows it where Redis shows it as given (its case kept): printable
 * bytes as they are, others '?', NUL-ended within cap. */
static void as_given(char *out, size_t cap, const px_msg *m, px_span sp)
{
    size_t n = 0;
    for (; n + 1 < cap && n < sp.len; n++) {
        unsigned char c = (unsigned char)m->raw[sp.off + n];
        out[n] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    out[n] = '\0';
}

static const char BAD_NAME[] =
    "Client names cannot contain spaces, newlines or special characters.";

/* The credentials user, password against the pool's: the user "default" with the password
 * clients AUTH with (client_auth, else redis_auth), or any password when there is none, as
 * Redis's default user without requirepass. Sets authed, auth_failed as AUTH does. 0 when
 * they pass, else the error written (1, or -1). */
static int authenticate(px_local *ctx, const char *user, size_t ulen, const char *pw,
                        size_t pwlen, px_buf *out)
{
    if (ctx->auth_blocked) {
        ctx->authed = false;
        return reply_error(out, "too many failed AUTH attempts, try again later");
    }
    bool user_ok = ulen == 7 && memcmp(user, "default", 7) == 0;
    bool pw_ok = ctx->password == NULL ||
                 px_equal_secret(pw, pwlen, ctx->password, strlen(ctx->password));
    if (user_ok && pw_ok) {
        ctx->authed = true;
        return 0;
    }
    ctx->authed = false;
    ctx->auth_failed = true;
    return reply_coded(out, WRONGPASS);
}

/* HELLO's reply: the connection's properties in its (new) dialect, a map in RESP3. */
static int hello_reply(const px_local *ctx, px_buf *out)
{
    bool v3 = ctx->dialect == PX_DIALECT_RESP3;
    int rc = px_buf_append(out, v3 ? "%7\r\n" : "*14\r\n", v3 ? 4 : 5);
    rc |= bulk(out, "server", 6) | bulk(out, "chash-proxy", 11) | bulk(out, "version", 7);
    rc |= bulk(out, PX_VERSION, strlen(PX_VERSION));
    rc |= px_buf_printf(out, "$5\r\nproto\r\n:%d\r\n$2\r\nid\r\n:%llu\r\n", v3 ? 3 : 2,
                        (unsigned long long)ctx->id);
    static const char rest[] = "$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n"
                               "$7\r\nmodules\r\n*0\r\n";
    rc |= px_buf_append(out, rest, sizeof(rest) - 1);
    return rc == 0 ? 0 : -1;
}

/* HELLO [protover [AUTH username password] [SETNAME clientname]], as Redis 7 answers it: the
 * options are read first (a syntax error, a bad name refuse it whole), then the credentials,
 * then a connection that is not authenticated is refused; else the name is set, the protocol
 * switched, and the reply written in the new one. A connection that holds backend connections
 * of its protocol (a transaction, WATCH, subscriptions) keeps it: a HELLO that would change it
 * is refused. */
static int hello(px_local *ctx, const px_msg *m, px_buf *out)
{
    const px_span *a = m->args;
    int64_t ver = 0;
    if (m->nargs >= 2) {
        if (!arg_i64(m, 1, &ver))
            return reply_error(out, "Protocol version is not an integer or out of range");
        if (ver < 2 || ver > 3)
            return reply_coded(out, "-NOPROTO unsupported protocol version\r\n");
    }
    px_span user = {0, 0}, pw = {0, 0}, name = {0, 0};
    bool auth = false, setname = false;
    for (size_t j = 2; j < m->nargs; j++) {
        size_t more = m->nargs - 1 - j;
        if (arg_is(m, j, "auth") && more >= 2) {
            auth = true;
            user = a[j + 1];
            pw = a[j + 2];
            j += 2;
        } else if (arg_is(m, j, "setname") && more >= 1) {
            name = a[j + 1];
            if (!name_ok(m, name))
                return reply_error(out, BAD_NAME);
            setname = true;
            j++;
        } else {
            char opt[72], msg[128];
            as_given(opt, sizeof(opt), m, a[j]);
            snprintf(msg, sizeof(msg), "Syntax error in HELLO option '%s'", opt);
            return reply_error(out, msg);
        }
    }
    if (auth) {
        int rc = authenticate(ctx, m->raw + user.off, user.len, m->raw + pw.off, pw.len, out);
        if (rc != 0)
            return rc;
    }
    if (ctx->password != NULL && !ctx->authed)
        return reply_coded(out, "-NOAUTH HELLO must be called with the client already "
                                "authenticated, otherwise the HELLO AUTH <user> <pass> option "
                                "can be used to authenticate the client and select the RESP "
                                "protocol version at the same time\r\n");
    uint8_t dialect = ver == 0 ? ctx->dialect : ver == 3 ? PX_DIALECT_RESP3 : PX_DIALECT_RESP2;
    if (dialect != ctx->dialect && ctx->pinned)
        return reply_error(out, "chash-proxy cannot change the protocol of a connection that "
                                "has a transaction, a WATCH or subscriptions open");
    if (setname) {
        ctx->set_name = true;
        ctx->name_to = name;
    }
    ctx->dialect = dialect;
    return hello_reply(ctx, out);
}

/* AUTH [username] password, as Redis 7 answers it (the username "default" alone), but AUTH
 * password without a password set: twemproxy's (and Redis 5's) words, which twemproxy's own
 * test suite checks (test_auth.py, test_nopass_on_proxy): a drop-in keeps them. */
static int auth(px_local *ctx, const px_msg *m, px_buf *out)
{
    if (m->nargs > 3)
        return reply_error(out, "wrong number of arguments for 'auth' command");
    if (m->nargs == 2 && ctx->password == NULL)
        return reply_error(out, "Client sent AUTH, but no password is set");
    const px_span *pw = &m->args[m->nargs - 1];
    int rc = m->nargs == 3 ? authenticate(ctx, m->raw + m->args[1].off, m->args[1].len,
                                          m->raw + pw->off, pw->len, out)
                           : authenticate(ctx, "default", 7, m->raw + pw->off, pw->len, out);
    return rc != 0 ? rc : reply(out, "+OK\r\n", 5);
}

/* "wrong number of arguments for 'client|sub' command", sub as given, lowered. */
static int client_arity(const px_msg *m, px_buf *out)
{
    char sub[40], msg[96];
    px_printable_name(sub, sizeof(sub), m->raw + m->args[1].off, m->args[1].len);
    snprintf(msg, sizeof(msg), "wrong number of arguments for 'client|%s' command", sub);
    return reply_error(out, msg);
}

/* CLIENT TRACKING on|off [REDIRECT id] [NOLOOP] [OPTIN|OPTOUT] [BCAST [PREFIX p]...]: RESP3
 * in-band tracking (client_track.h), or redirected to another client of the pool (redir.h:
 * RESP2's way, ctx->client_exists checks the id as Redis does), with Redis's errors for OPTIN
 * with OPTOUT and for a mode switched while on. The pool's refusal (ctx->track_refused), RESP2
 * without REDIRECT and NOLOOP with BCAST are refused with a clear error. */
static int client_tracking(px_local *ctx, const px_msg *m, px_buf *out)
{
    size_t n = m->nargs;
    if (n < 3)
        return client_arity(m, out);
    bool on = arg_is(m, 2, "on");
    if (!on && !arg_is(m, 2, "off"))
        return reply_error(out, "syntax error");
    uint8_t to = PX_TRACKING_ON;
    size_t np = 0;
    long long redir = 0;
    bool has_redir = false;
    for (size_t i = 3; i < n; i++) {
        if (arg_is(m, i, "noloop")) {
            to |= PX_TRACKING_NOLOOP;
        } else if (arg_is(m, i, "optin")) {
            to |= PX_TRACKING_OPTIN;
        } else if (arg_is(m, i, "optout")) {
            to |= PX_TRACKING_OPTOUT;
        } else if (arg_is(m, i, "bcast")) {
            to |= PX_TRACKING_BCAST;
        } else if (arg_is(m, i, "prefix") && i + 1 < n) {
            if (np == PX_TRACKING_PREFIXES)
                return reply_error(out, "chash-proxy serves at most 16 prefixes per client");
            ctx->prefix_to[np++] = m->args[++i];
        } else if (arg_is(m, i, "redirect") && i + 1 < n) {
            char num[24];
            const px_span *a = &m->args[++i];
            char *end;
            if (a->len == 0 || a->len >= sizeof(num))
                return reply_error(out, "value is not an integer or out of range");
            memcpy(num, m->raw + a->off, a->len);
            num[a->len] = '\0';
            errno = 0;
            long long v = strtoll(num, &end, 10);
            if (*end != '\0' || errno != 0)
                return reply_error(out, "value is not an integer or out of range");
            /* Redis: the target must exist now (it may go later: tracking-redir-broken) */
            if (v <= 0 || ctx->client_exists == NULL ||
                !ctx->client_exists(ctx->clients_arg, (uint64_t)v))
                return reply_error(out, "The client ID you want redirect to does not exist");
            redir = v;
            has_redir = true;
        } else {
            return reply_error(out, "syntax error");
        }
    }
    if (!on) {
        ctx->track_set = true;
        ctx->track_to = PX_TRACKING_OFF;
        ctx->redirect_to = 0;
        return reply(out, "+OK\r\n", 5);
    }
    const uint8_t modes = PX_TRACKING_OPTIN | PX_TRACKING_OPTOUT;
    bool bcast = (to & PX_TRACKING_BCAST) != 0;
    if (np > 0 && !bcast)
        return reply_error(out, "PREFIX option requires BCAST mode to be enabled");
    if (bcast && (to & modes) != 0)
        return reply_error(out, "OPTIN and OPTOUT are not compatible with BCAST");
    if ((to & modes) == modes)
        return reply_error(out, "You can't use both OPTIN and OPTOUT");
    if (ctx->tracking != PX_TRACKING_OFF &&
        ((ctx->tracking & PX_TRACKING_BCAST) != 0) != bcast)
        return reply_error(out, "You can't switch BCAST mode on/off before disabling tracking "
                                "for this client, and then re-enabling it with a different "
                                "mode.");
    if (bcast && (to & PX_TRACKING_NOLOOP))
        return reply_error(out, "chash-proxy does not serve NOLOOP with BCAST yet");
    if (bcast && ctx->tracking != PX_TRACKING_OFF)
        return reply_error(out, "chash-proxy: turn tracking off before giving a BCAST client "
                                "other prefixes");
    for (size_t a = 0; a < np; a++)
        for (size_t b = 0; b < np; b++) {
            px_span x = ctx->prefix_to[a], y = ctx->prefix_to[b];
            if (a != b && x.len <= y.len && memcmp(m->raw + x.off, m->raw + y.off, x.len) == 0) {
                char px[40], py[40], msg[200];
                px_printable_name(px, sizeof(px), m->raw + x.off, x.len);
                px_printable_name(py, sizeof(py), m->raw + y.off, y.len);
                snprintf(msg, sizeof(msg),
                         "Prefix '%s' overlaps with another provided prefix '%s'. Prefixes for "
                         "a single client must not overlap.", px, py);
                return reply_error(out, msg);
            }
        }
    if (ctx->tracking != PX_TRACKING_OFF && (ctx->tracking & modes) != (to & modes))
        return reply_error(out, "You can't switch OPTIN/OPTOUT mode before disabling tracking "
                                "for this client, and then re-enabling it with a different "
                                "mode.");
    if (ctx->dialect != PX_DIALECT_RESP3 && !has_redir)
        return reply_error(out, "chash-proxy serves client-side caching to RESP3 clients "
                                "(HELLO 3 first), or to RESP2 clients with REDIRECT <id> (a "
                                "connection SUBSCRIBEd to __redis__:invalidate)");
    if (ctx->track_refused != NULL)
        return reply_error(out, ctx->track_refused);
    ctx->track_set = true;
    ctx->track_to = to;
    ctx->nprefix_to = np;
    ctx->redirect_to = has_redir ? (uint64_t)redir : 0;
    return reply(out, "+OK\r\n", 5);
}

/* CLIENT CACHING yes|no, as Redis answers it: yes in OPTIN mode, no in OPTOUT mode, for the
 * client's next command. */
static int client_caching(px_local *ctx, const px_msg *m, px_buf *out)
{
    if (m->nargs != 3)
        return client_arity(m, out);
    bool yes = arg_is(m, 2, "yes");
    if (!yes && !arg_is(m, 2, "no"))
        return reply_error(out, "syntax error");
    if ((ctx->tracking & (PX_TRACKING_OPTIN | PX_TRACKING_OPTOUT)) == 0)
        return reply_error(out, "CLIENT CACHING can be called only when the client is in "
                                "tracking mode with OPTIN or OPTOUT mode enabled");
    if (yes && (ctx->tracking & PX_TRACKING_OPTIN) == 0)
        return reply_error(out, "CLIENT CACHING YES is only valid when tracking is enabled in "
                                "OPTIN mode.");
    if (!yes && (ctx->tracking & PX_TRACKING_OPTOUT) == 0)
        return reply_error(out, "CLIENT CACHING NO is only valid when tracking is enabled in "
                                "OPTOUT mode.");
    ctx->caching_set = true;
    return reply(out, "+OK\r\n", 5);
}

/* CLIENT TRACKINGINFO: flags (Redis's order: off | on, bcast, optin, optout, caching-yes,
 * caching-no, noloop), redirect (-1 off, 0 in-band), prefixes (a BCAST client's), as Redis
 * frames it in each dialect. */
static int client_trackinginfo(const px_local *ctx, px_buf *out)
{
    bool resp3 = ctx->dialect == PX_DIALECT_RESP3;
    uint8_t t = ctx->tracking;
    const char *flags[8];
    size_t nf = 0;
    if (t == PX_TRACKING_OFF)
        flags[nf++] = "$3\r\noff\r\n";
    else
        flags[nf++] = "$2\r\non\r\n";
    if (t & PX_TRACKING_BCAST)
        flags[nf++] = "$5\r\nbcast\r\n";
    if (t & PX_TRACKING_OPTIN)
        flags[nf++] = "$5\r\noptin\r\n";
    if (t & PX_TRACKING_OPTOUT)
        flags[nf++] = "$6\r\noptout\r\n";
    if (ctx->caching && (t & PX_TRACKING_OPTIN))
        flags[nf++] = "$11\r\ncaching-yes\r\n";
    if (ctx->caching && (t & PX_TRACKING_OPTOUT))
        flags[nf++] = "$10\r\ncaching-no\r\n";
    if (t & PX_TRACKING_NOLOOP)
        flags[nf++] = "$6\r\nnoloop\r\n";
    if (t != PX_TRACKING_OFF && ctx->redirect != 0 && ctx->redirect_broken)
        flags[nf++] = "$15\r\nbroken_redirect\r\n";
    int rc = px_buf_printf(out, "%s$5\r\nflags\r\n%c%zu\r\n", resp3 ? "%3\r\n" : "*6\r\n",
                           resp3 ? '~' : '*', nf);
    for (size_t i = 0; rc == 0 && i < nf; i++)
        rc = px_buf_append(out, flags[i], strlen(flags[i]));
    if (rc == 0)
        rc = px_buf_printf(out, "$8\r\nredirect\r\n:%lld\r\n$8\r\nprefixes\r\n*%zu\r\n",
                           t == PX_TRACKING_OFF ? -1LL : (long long)ctx->redirect,
                           ctx->nprefixes);
    for (size_t i = 0; rc == 0 && i < ctx->nprefixes; i++)
        rc = bulk(out, ctx->prefixes[i], ctx->prefix_lens[i]);
    return rc == 0 ? 0 : -1;
}

/* A tracking client's invalidation push (px_codec.encode_invalidation). */
static int redis_encode_invalidation(px_buf *out, const char *key, size_t len)
{
    static const char head[] = ">2\r\n$10\r\ninvalidate\r\n";
    char n[32];
    int k = key == NULL ? 0 : snprintf(n, sizeof(n), "*1\r\n$%zu\r\n", len);
    if (px_buf_append(out, head, sizeof(head) - 1) != 0)
        return -1;
    if (key == NULL)
        return px_buf_append(out, "_\r\n", 3);
    return px_buf_append(out, n, (size_t)k) != 0 || px_buf_append(out, key, len) != 0 ||
                   px_buf_append(out, "\r\n", 2) != 0
               ? -1
               : 0;
}

/* What a REDIRECT target gets (px_codec.encode_redirected), byte for byte as Redis 7. */
static int redis_encode_redirected(px_buf *out, uint8_t dialect, bool subscribed,
                                   const char *key, size_t len, bool null_resp3)
{
    static const char msg[] = "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n";
    static const char head[] = ">2\r\n$10\r\ninvalidate\r\n";
    if (dialect == PX_DIALECT_RESP3) {
        if (px_buf_append(out, head, sizeof(head) - 1) != 0)
            return -1;
    } else if (!subscribed) {
        return 0; /* RESP2 carries no push outside pub/sub mode: Redis sends nothing */
    } else if (px_buf_append(out, msg, sizeof(msg) - 1) != 0) {
        return -1;
    }
    if (key == NULL)
        return null_resp3 ? px_buf_append(out, "_\r\n", 3) : px_buf_append(out, "$-1\r\n", 5);
    return px_buf_printf(out, "*1\r\n$%zu\r\n", len) != 0 ||
                   px_buf_append(out, key, len) != 0 || px_buf_append(out, "\r\n", 2) != 0
               ? -1
               : 0;
}

/* A RESP3 tracking client's target is gone (px_codec.encode_redir_broken). */
static int redis_encode_redir_broken(px_buf *out, uint64_t id)
{
    return px_buf_printf(out, ">2\r\n$21\r\ntracking-redir-broken\r\n:%llu\r\n",
                         (unsigned long long)id);
}

/* CLIENT HELP: the subcommands the proxy answers, in Redis's form (one status line each). */
static int client_help(px_buf *out)
{
    static const char *const lines[] = {
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GETNAME",
        "    Return the name of the current connection.",
        "ID",
        "    Return the ID of the current connection.",
        "INFO",
        "    Return information about the current client connection.",
        "LIST",
        "    Return information about the client connections of this pool (chash-proxy).",
        "NO-EVICT (ON|OFF)",
        "    Accepted; chash-proxy evicts no client.",
        "NO-TOUCH (ON|OFF)",
        "    Accepted; the servers' LRU is touched as the commands touch it.",
        "REPLY (ON|OFF|SKIP)",
        "    Control the replies sent to the current connection.",
        "SETINFO <LIB-NAME|LIB-VER> <value>",
        "    Set the client library's name or version.",
        "SETNAME <name>",
        "    Assign the name <name> to the current connection.",
        "HELP",
        "    Prints this help.",
    };
    size_t n = sizeof(lines) / sizeof(lines[0]);
    int rc = px_buf_printf(out, "*%zu\r\n", n);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = px_buf_printf(out, "+%s\r\n", lines[i]);
    return rc == 0 ? 0 : -1;
}

/* ON or OFF, Redis's argument of NO-EVICT and NO-TOUCH. */
static bool on_off(const px_msg *m, size_t i)
{
    return arg_is(m, i, "on") || arg_is(m, i, "off");
}

/* CLIENT's subcommands: the connection's own facts are the proxy's (its id, name, library,
 * protocol, reply mode), so they are answered here, never by a backend. */
static int client(px_local *ctx, const px_msg *m, px_buf *out)
{
    const size_t n = m->nargs;
    if (arg_is(m, 1, "id"))
        return n != 2 ? client_arity(m, out)
                      : px_buf_printf(out, ":%llu\r\n", (unsigned long long)ctx->id) == 0 ? 0
                                                                                         : -1;
    if (arg_is(m, 1, "getname")) {
        if (n != 2)
            return client_arity(m, out);
        return (ctx->name != NULL ? bulk(out, ctx->name, ctx->name_len)
                                  : null_bulk(out, ctx->dialect)) == 0
                   ? 0
                   : -1;
    }
    if (arg_is(m, 1, "setname")) {
        if (n != 3)
            return client_arity(m, out);
        if (!name_ok(m, m->args[2]))
            return reply_error(out, BAD_NAME);
        ctx->set_name = true;
        ctx->name_to = m->args[2];
        return reply(out, "+OK\r\n", 5);
    }
    if (arg_is(m, 1, "setinfo")) {
        if (n != 4)
            return client_arity(m, out);
        bool lib_name = arg_is(m, 2, "lib-name");
        char attr[40], msg[128];
        px_printable_name(attr, sizeof(attr), m->raw + m->args[2].off, m->args[2].len);
        if (!lib_name && !arg_is(m, 2, "lib-ver")) {
            snprintf(msg, sizeof(msg), "Unrecognized option '%s'", attr);
            return reply_error(out, msg);
        }
        if (!name_ok(m, m->args[3])) {
            snprintf(msg, sizeof(msg), "%s cannot contain spaces, newlines or special characters.",
                     attr);
            return reply_error(out, msg);
        }
        if (lib_name) {
            ctx->set_lib_name = true;
            ctx->lib_name_to = m->args[3];
        } else {
            ctx->set_lib_ver = true;
            ctx->lib_ver_to = m->args[3];
        }
        return reply(out, "+OK\r\n", 5);
    }
    if (arg_is(m, 1, "info") || arg_is(m, 1, "list")) {
        bool self = arg_is(m, 1, "info");
        if (self ? n != 2 : n > 2)
            return self ? client_arity(m, out)
                        : reply_error(out, "chash-proxy serves CLIENT LIST without options");
        px_buf text = {0};
        int rc = ctx->clients != NULL && ctx->clients(ctx->clients_arg, self, &text) == 0 &&
                         verbatim(out, ctx->dialect, text.p, text.len) == 0
                     ? 0
                     : -1;
        px_buf_free(&text);
        return rc;
    }
    if (arg_is(m, 1, "no-evict") || arg_is(m, 1, "no-touch")) {
        if (n != 3)
            return client_arity(m, out);
        return on_off(m, 2) ? reply(out, "+OK\r\n", 5) : reply_error(out, "syntax error");
    }
    if (arg_is(m, 1, "reply")) {
        if (n != 3)
            return client_arity(m, out);
        if (arg_is(m, 2, "on")) { /* replied to whatever the mode was */
            ctx->reply_mode = PX_REPLIES_ON;
            ctx->silent = false;
            return reply(out, "+OK\r\n", 5);
        }
        if (arg_is(m, 2, "off") || arg_is(m, 2, "skip")) { /* no reply to this one either */
            ctx->reply_mode = arg_is(m, 2, "off") ? PX_REPLIES_OFF : PX_REPLIES_SKIP;
            return 0;
        }
        return reply_error(out, "syntax error");
    }
    if (arg_is(m, 1, "help"))
        return n != 2 ? client_arity(m, out) : client_help(out);
    if (arg_is(m, 1, "tracking"))
        return client_tracking(ctx, m, out);
    if (arg_is(m, 1, "caching"))
        return client_caching(ctx, m, out);
    if (arg_is(m, 1, "getredir")) {
        if (n != 2)
            return client_arity(m, out);
        return reply(out, ctx->tracking == PX_TRACKING_OFF ? ":-1\r\n" : ":0\r\n", 4 +
                     (ctx->tracking == PX_TRACKING_OFF));
    }
    if (arg_is(m, 1, "trackinginfo"))
        return n != 2 ? client_arity(m, out) : client_trackinginfo(ctx, out);
    char sub[40], msg[160];
    px_printable_name(sub, sizeof(sub), m->raw + m->args[1].off, m->args[1].len);
    if (arg_is(m, 1, "kill") || arg_is(m, 1, "pause") || arg_is(m, 1, "unpause") ||
        arg_is(m, 1, "unblock")) {
        snprintf(msg, sizeof(msg),
                 "unsupported command 'client %s' (chash-proxy answers CLIENT itself: its "
                 "connections are not the servers')", sub);
        return reply_error(out, msg);
    }
    as_given(sub, sizeof(sub), m, m->args[1]); /* as Redis words an unknown subcommand */
    snprintf(msg, sizeof(msg), "unknown subcommand '%s'. Try CLIENT HELP.", sub);
    return reply_error(out, msg);
}

/* INFO section...: the sections of text (lines of "# Name" then its fields, sections apart by
 * an empty line) whose names the arguments give, case aside, in text's order; "all", "default"
 * and "everything" give every one, as Redis's do. An unknown name gives nothing of its own. */
static int info_sections(const px_msg *m, const char *text, size_t len, px_buf *out)
{
    for (size_t i = 1; i < m->nargs; i++)
        if (arg_is(m, i, "all") || arg_is(m, i, "default") || arg_is(m, i, "everything"))
            return px_buf_append(out, text, len);
    bool keep = false;
    for (size_t at = 0; at < len;) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t end = nl != NULL ? (size_t)(nl - text) + 1 : len;
        const char *line = text + at;
        size_t n = end - at;
        if (n >= 2 && line[0] == '#' && line[1] == ' ') {
            size_t name = n - 2;
            while (name > 0 && (line[2 + name - 1] == '\r' || line[2 + name - 1] == '\n'))
                name--;
            keep = false;
            for (size_t i = 1; i < m->nargs && !keep; i++)
                keep = m->args[i].len == name &&
                       strncasecmp(m->raw + m->args[i].off, line + 2, name) == 0;
            if (keep && out->len > 0 && px_buf_append(out, "\r\n", 2) != 0)
                return -1;
        }
        bool blank = n <= 2 && (n == 0 || line[0] == '\r' || line[0] == '\n');
        if (keep && !blank && px_buf_append(out, line, n) != 0)
            return -1;
        at = end;
    }
    return 0;
}

static int redis_answer_local(px_local *ctx, const px_msg *m, px_buf *out)
{
    const px_span *a = m->args;
    switch ((kind)m->cmd->local) {
    case K_PING:
        if (ctx->subscribed && ctx->dialect == PX_DIALECT_RESP2) /* as Redis answers there */
            return px_buf_append(out, "*2\r\n$4\r\npong\r\n", 14) == 0 &&
                           (m->nargs == 1 ? px_buf_append(out, "$0\r\n\r\n", 6)
                                          : span_bulk(out, m, a[1])) == 0
                       ? 0
                       : -1;
        if (m->nargs == 1)
            return reply(out, "+PONG\r\n", 7);
        return span_bulk(out, m, a[1]) == 0 ? 0 : -1; /* PING msg answers msg */
    case K_ECHO:
        return span_bulk(out, m, a[1]) == 0 ? 0 : -1;
    case K_QUIT:
        ctx->close = true;
        return reply(out, "+OK\r\n", 5);
    case K_SELECT:
        if (m->nargs == 2 && a[1].len == 1 && m->raw[a[1].off] == '0')
            return reply(out, "+OK\r\n", 5);
        return reply_error(out, "the proxy serves database 0 only");
    case K_COMMAND:
        return reply(out, "*0\r\n", 4);
    case K_HELLO:
        return hello(ctx, m, out);
    case K_CLIENT:
        return client(ctx, m, out);
    case K_INFO: {
        px_buf text = {0}, some = {0};
        int rc = ctx->info(ctx->info_arg, &text);
        if (rc == 0 && m->nargs > 1)
            rc = info_sections(m, text.p, text.len, &some);
        const px_buf *b = m->nargs > 1 ? &some : &text;
        rc = rc == 0 && verbatim(out, ctx->dialect, b->p, b->len) == 0 ? 0 : -1;
        px_buf_free(&text);
        px_buf_free(&some);
        return rc;
    }
    case K_AUTH:
        return auth(ctx, m, out);
    default:
        return reply_error(out, "unsupported command");
    }
}

const px_codec px_codec_redis = {
    .name = "redis",
    .backend_dialects = 2,
    .limits = redis_limits,
    .parse_request = redis_parse_request,
    .scan_reply = redis_scan_reply,
    .encode_request = redis_encode_request,
    .encode_args = redis_encode_args,
    .encode_capped = redis_encode_capped,
    .writes_unnamed = redis_writes_unnamed,
    .encode_error = redis_encode_error,
    .encode_probe = redis_encode_probe,
    .encode_delete = redis_encode_delete,
    .encode_walk = redis_encode_walk,
    .walk_page = redis_walk_page,
    .encode_handshake = redis_encode_handshake,
    .merge_begin = redis_merge_begin,
    .merge_part = redis_merge_part,
    .merge_end = redis_merge_end,
    .answer_local = redis_answer_local,
    .is_miss = redis_is_miss,
    .near_cacheable = redis_near_cacheable,
    .encode_fetch = redis_encode_fetch,
    .encode_take = redis_encode_take,
    .encode_fill = redis_encode_fill,
    .fill_stored = redis_fill_stored,
    .scan_cursor = redis_scan_cursor,
    .scan_rewrite = redis_scan_rewrite,
    .push_kind = redis_push_kind,
    .encode_sub_reply = redis_encode_sub_reply,
    .encode_txn = redis_encode_txn,
    .encode_op = redis_encode_op,
    .encode_track = redis_encode_track,
    .track_keys = redis_track_keys,
    .encode_invalidation = redis_encode_invalidation,
    .encode_redirected = redis_encode_redirected,
    .encode_redir_broken = redis_encode_redir_broken,
    .encode_track_bcast = redis_encode_track_bcast,
};

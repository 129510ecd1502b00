/*
 * command.c — the command table, and how each kind of command becomes fragments: single-key
 * commands are forwarded whole to the key's server; MGET, MSET, DEL, UNLINK, TOUCH and EXISTS are
 * split per server and their replies merged in the client's key order; a few commands are
 * answered by the proxy itself; everything else is refused with an error naming it.
 */
#include "command.h"
#include "metrics.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

typedef enum px_kind {
    K_KEY,     /* argv[1] is the key: forwarded whole */
    K_EVAL,    /* EVAL/EVALSHA: routed by the first key (numkeys >= 1) */
    K_MGET,    /* split; values merged in key order */
    K_MSET,    /* split by pairs; +OK or the first error */
    K_SUM,     /* split; integer replies summed */
    K_PING, K_ECHO, K_QUIT, K_SELECT, K_COMMAND, K_AUTH, K_INFO,
} px_kind;

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
    X(eval, K_EVAL, W, 3) X(evalsha, K_EVAL, W, 3)                                                \
    /* multi-key, split per server */                                                            \
    X(mget, K_MGET, R, 2) X(mset, K_MSET, W, 3) X(del, K_SUM, W, 2) X(unlink, K_SUM, W, 2)        \
    X(touch, K_SUM, R, 2) X(exists, K_SUM, R, 2)                                                  \
    /* answered by the proxy */                                                                  \
    X(ping, K_PING, R, 1) X(echo, K_ECHO, R, 2) X(quit, K_QUIT, R, 1) X(select, K_SELECT, R, 2)   \
    X(command, K_COMMAND, R, 1) X(auth, K_AUTH, R, 2) X(info, K_INFO, R, 1)

typedef struct px_cmd {
    const char *name;
    size_t len;
    px_kind kind;
    bool retry;
    unsigned arity;
} px_cmd;

static const px_cmd commands[] = {
#define PX__CMD(n, k, r, a) {#n, sizeof(#n) - 1, k, r == R, a},
    PX_COMMAND_LIST(PX__CMD)
#undef PX__CMD
};

/* Linear over ~140 entries, filtered by length and first letter: a few dozen byte compares,
 * small next to the system calls of a request. */
static const px_cmd *command_find(const char *lower, size_t len)
{
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (commands[i].len == len && commands[i].name[0] == lower[0] &&
            memcmp(commands[i].name, lower, len) == 0)
            return &commands[i];
    return NULL;
}

/* The metrics class of a command: its kind and, for single-key commands, whether it is a read. */
static px_cmd_class command_class(const px_cmd *cmd)
{
    switch (cmd->kind) {
    case K_KEY:
    case K_EVAL:
        return cmd->retry ? PX_CLASS_READ : PX_CLASS_WRITE;
    case K_MGET:
    case K_MSET:
    case K_SUM:
        return PX_CLASS_MULTI;
    default:
        return PX_CLASS_LOCAL;
    }
}

int px_buf_bulk(px_buf *b, const void *data, size_t len)
{
    if (px_buf_printf(b, "$%zu\r\n", len) != 0 || px_buf_append(b, data, len) != 0)
        return -1;
    return px_buf_append(b, "\r\n", 2);
}

/* ---- fragments -------------------------------------------------------------------------------- */

static px_frag *frag_new(px_req *r, px_pool *pool, bool retry)
{
    px_frag *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return NULL;
    f->kind = PX_FRAG_FORWARD;
    f->req = r;
    f->cid = r->client->id;
    f->pool = pool;
    f->retry = retry;
    return f;
}

/* Bounded loads (bounded_load_factor, docs/PROXY.md): the first server on the key's walk whose
 * in-flight fragments (those in its connections' FIFOs: sent or queued, reply not yet read) are
 * under ceil(c * (total + 1) * w / W). Returns false when off or unsupported (jump). */
static bool bounded_owner(px_pool *pool, uint64_t kh, size_t *out)
{
    double c = pool->conf->bounded_load_factor;
    if (!(c >= 1) || pool->nservers == 0)
        return false;
    uint64_t stack[64], *loads = stack, total = 0;
    if (pool->nservers > 64 && (loads = malloc(pool->nservers * sizeof *loads)) == NULL)
        return false;
    for (size_t i = 0; i < pool->nservers; i++) {
        const px_server *s = &pool->servers[i];
        loads[i] = 0;
        for (unsigned k = 0; k < s->nconns; k++)
            loads[i] += s->conns[k].nfrags;
        total += loads[i];
    }
    bool ok = ch_lookup_bounded_hash(pool->table, kh, loads, total, c, out) == CH_OK &&
              *out < pool->nservers;
    if (loads != stack)
        free(loads);
    return ok;
}

/* The key's candidates into cand[], owner first; returns their number (0: none up). With bounded
 * loads the bounded choice goes first when it is up, then ch_route's candidates without it; an
 * ejected bounded choice is skipped (ch_route's candidates as they are). */
static size_t route_key(px_pool *pool, const char *key, size_t len, size_t *cand)
{
    size_t n = 0, b;
    uint64_t kh = ch_key_hash(pool->table, key, len); /* once: routing and bounded loads */
    if (px_health_route(pool->health, pool->table, kh, pool->depth, cand, &n) != CH_OK) {
        /* jump has no walk: its owner only */
        if (px_health_route(pool->health, pool->table, kh, 1, cand, &n) != CH_OK)
            n = 0;
    }
    if (n > 0 && bounded_owner(pool, kh, &b) && b != cand[0] && px_health_up(pool->health, b)) {
        size_t j = 0;
        while (j < n && cand[j] != b)
            j++;
        if (j == n) /* not among them: the last one gives way */
            j = n - 1;
        memmove(cand + 1, cand, j * sizeof *cand);
        cand[0] = b;
    }
    return n;
}

static void req_finish(px_req *r)
{
    switch (r->merge) {
    case PX_MERGE_ONE:
        break;
    case PX_MERGE_MGET:
        if (r->err.len > 0) {
            r->reply = r->err;
            r->err = (px_buf){0};
            break;
        }
        px_buf_printf(&r->reply, "*%zu\r\n", r->nslots);
        for (size_t i = 0; i < r->nslots; i++) {
            if (r->slots[i].len == 0)
                px_buf_append(&r->reply, "$-1\r\n", 5);
            else
                px_buf_append(&r->reply, r->slots[i].p, r->slots[i].len);
        }
        break;
    case PX_MERGE_SUM:
        if (r->err.len > 0) {
            r->reply = r->err;
            r->err = (px_buf){0};
        } else {
            px_buf_printf(&r->reply, ":%lld\r\n", (long long)r->sum);
        }
        break;
    case PX_MERGE_OK:
        if (r->err.len > 0) {
            r->reply = r->err;
            r->err = (px_buf){0};
        } else {
            px_buf_append(&r->reply, "+OK\r\n", 5);
        }
        break;
    }
    if (r->reply.len == 0) /* only when out of memory */
        px_buf_append(&r->reply, "-ERR out of memory\r\n", 20);
    r->done = true;
    px_req_done(r);
}

static void frag_complete(px_frag *f)
{
    px_req *r = f->req;
    px_frag_free(f);
    if (--r->pending == 0)
        req_finish(r);
}

static void req_set_error(px_req *r, const char *p, size_t len)
{
    if (r->err.len == 0)
        px_buf_append(&r->err, p, len);
}

void px_frag_reply(px_frag *f, const char *p, size_t len, const ch_resp_reply *info)
{
    px_req *r = f->req;
    switch (r->merge) {
    case PX_MERGE_ONE:
        px_buf_append(&r->reply, p, len);
        break;
    case PX_MERGE_MGET:
        if (info->type == CH_RESP_ARRAY && info->integer == (int64_t)f->nkeys) {
            size_t off = info->body;
            for (size_t k = 0; k < f->nkeys; k++) {
                ch_resp_reply el;
                size_t need;
                if (ch_resp_scan_reply(p + off, len - off, &f->pool->backend_limits, &el, &need, NULL, 0) !=
                    CH_RESP_OK)
                    break;
                px_buf *slot = &r->slots[f->keys[k]];
                slot->len = 0;
                px_buf_append(slot, p + off, el.len);
                off += el.len;
            }
        } else if (info->type == CH_RESP_ERROR) {
            req_set_error(r, p, len);
        } else {
            static const char bad[] = "-ERR unexpected reply to MGET from a backend\r\n";
            req_set_error(r, bad, sizeof(bad) - 1);
        }
        break;
    case PX_MERGE_SUM:
        if (info->type == CH_RESP_INTEGER) {
            r->sum += info->integer;
        } else if (info->type == CH_RESP_ERROR) {
            req_set_error(r, p, len);
        } else {
            static const char bad[] = "-ERR unexpected reply from a backend\r\n";
            req_set_error(r, bad, sizeof(bad) - 1);
        }
        break;
    case PX_MERGE_OK:
        if (info->type == CH_RESP_ERROR)
            req_set_error(r, p, len);
        break;
    }
    frag_complete(f);
}

void px_frag_error(px_frag *f, const char *msg)
{
    px_req *r = f->req;
    if (r->merge == PX_MERGE_ONE) {
        px_buf_printf(&r->reply, "-%s\r\n", msg);
    } else if (r->err.len == 0) {
        px_buf_printf(&r->err, "-%s\r\n", msg);
    }
    frag_complete(f);
}

bool px_frag_resplit(px_frag *f, size_t failed)
{
    px_pool *pool = f->pool;
    px_req *r = f->req;
    size_t n = f->nkeys;
    ch_resp_arg *argv = malloc((n + 1) * sizeof(*argv));
    if (argv == NULL)
        return false;
    size_t argc = 0, consumed = 0, need = 0;
    if (ch_resp_parse_request(f->data, f->len, &pool->backend_limits, argv, n + 1, &argc, &consumed,
                              &need, NULL, 0) != CH_RESP_OK ||
        argc != n + 1) {
        free(argv);
        return false;
    }
    /* One fragment per key, each to the key's first candidate other than the failed server.
     * The request's count goes up first, so none of them can finish it early. */
    px_frag **parts = calloc(n, sizeof(*parts));
    if (parts == NULL) {
        free(argv);
        return false;
    }
    for (size_t k = 0; k < n; k++) {
        px_frag *g = calloc(1, sizeof(*g));
        px_buf b = {0};
        if (g == NULL || px_buf_printf(&b, "*2\r\n") != 0 ||
            px_buf_bulk(&b, argv[0].p, argv[0].len) != 0 ||
            px_buf_bulk(&b, argv[1 + k].p, argv[1 + k].len) != 0 ||
            (r->merge == PX_MERGE_MGET && (g->keys = malloc(sizeof(size_t))) == NULL)) {
            free(g);
            px_buf_free(&b);
            for (size_t j = 0; j < k; j++)
                px_frag_free(parts[j]);
            free(parts);
            free(argv);
            return false;
        }
        *g = (px_frag){.kind = PX_FRAG_FORWARD, .req = r, .cid = f->cid, .pool = pool,
                       .data = b.p, .len = b.len, .retry = true, .split = true,
                       .keys = g->keys, .nkeys = 1};
        if (g->keys != NULL)
            g->keys[0] = f->keys[k];
        size_t cand[PX_MAX_DEPTH];
        size_t nc = route_key(pool, argv[1 + k].p, argv[1 + k].len, cand);
        for (size_t i = 0; i < nc; i++)
            if (cand[i] != failed)
                g->cand[g->ncand++] = cand[i];
        parts[k] = g;
    }
    free(argv);
    r->pending += (unsigned)n - 1;
    pool->stats.fragments += n - 1;
    px_frag_free(f);
    for (size_t k = 0; k < n; k++) {
        if (parts[k]->ncand == 0) {
            pool->stats.forward_error++;
            px_frag_error(parts[k], "ERR no backend available");
        } else {
            px_frag_dispatch(parts[k]);
        }
    }
    free(parts);
    return true;
}

/* ---- handlers ---------------------------------------------------------------------------------- */

/* The request as a RESP array (inline commands arrive as text lines). */
static int req_bytes(px_buf *b, const ch_resp_arg *argv, size_t argc, const char *raw,
                     size_t rawlen)
{
    if (rawlen > 0 && raw[0] == '*')
        return px_buf_append(b, raw, rawlen);
    int rc = px_buf_printf(b, "*%zu\r\n", argc);
    for (size_t i = 0; rc == 0 && i < argc; i++)
        rc = px_buf_bulk(b, argv[i].p, argv[i].len);
    return rc;
}

static void forward_one(px_req *r, px_pool *pool, const px_cmd *cmd, const ch_resp_arg *key,
                        const ch_resp_arg *argv, size_t argc, const char *raw, size_t rawlen)
{
    px_frag *f = frag_new(r, pool, cmd->retry);
    px_buf b = {0};
    if (f == NULL || req_bytes(&b, argv, argc, raw, rawlen) != 0) {
        free(f);
        px_buf_free(&b);
        px_req_error(r, "ERR out of memory");
        return;
    }
    f->data = b.p;
    f->len = b.len;
    f->ncand = route_key(pool, key->p, key->len, f->cand);
    r->merge = PX_MERGE_ONE;
    r->pending = 1;
    if (f->ncand == 0) {
        pool->stats.forward_error++;
        px_frag_error(f, "ERR no backend available");
        return;
    }
    px_frag_dispatch(f);
}

/* Per-server fragment under construction. */
typedef struct part {
    px_buf body;
    size_t *keys;
    size_t nkeys, nargs;
    size_t cand[PX_MAX_DEPTH];
    size_t ncand;
} part;

/* MGET, MSET, DEL, UNLINK, TOUCH, EXISTS: step is 1 (keys) or 2 (key value pairs). */
static void forward_split(px_req *r, px_pool *pool, const px_cmd *cmd, const ch_resp_arg *argv,
                          size_t argc, size_t step)
{
    size_t nkeys = (argc - 1) / step;
    part *parts = calloc(pool->nservers, sizeof(*parts));
    size_t *owner = malloc(nkeys * sizeof(*owner));
    bool ok = parts != NULL && owner != NULL;
    if (ok && cmd->kind == K_MGET) {
        r->slots = calloc(nkeys, sizeof(*r->slots));
        r->nslots = nkeys;
        ok = r->slots != NULL;
    }
    r->merge = cmd->kind == K_MGET ? PX_MERGE_MGET : cmd->kind == K_MSET ? PX_MERGE_OK
                                                                          : PX_MERGE_SUM;
    const char *fail = ok ? NULL : "ERR out of memory";
    for (size_t k = 0; fail == NULL && k < nkeys; k++) {
        const ch_resp_arg *key = &argv[1 + k * step];
        size_t cand[PX_MAX_DEPTH];
        size_t nc = route_key(pool, key->p, key->len, cand);
        if (nc == 0) {
            fail = "ERR no backend available";
            break;
        }
        part *pt = &parts[cand[0]];
        owner[k] = cand[0];
        if (pt->nkeys == 0) {
            memcpy(pt->cand, cand, nc * sizeof(size_t));
            pt->ncand = nc;
            pt->keys = malloc(nkeys * sizeof(size_t));
            if (pt->keys == NULL) {
                fail = "ERR out of memory";
                break;
            }
        }
        pt->keys[pt->nkeys++] = k;
        for (size_t j = 0; j < step; j++)
            if (px_buf_bulk(&pt->body, key[j].p, key[j].len) != 0)
                fail = "ERR out of memory";
        pt->nargs += step;
    }
    /* Build every fragment before sending any, so the count is final before replies arrive. */
    px_frag **frags = NULL;
    size_t nfrags = 0;
    if (fail == NULL) {
        frags = calloc(pool->nservers, sizeof(*frags));
        if (frags == NULL)
            fail = "ERR out of memory";
    }
    for (size_t s = 0; fail == NULL && s < pool->nservers; s++) {
        part *pt = &parts[s];
        if (pt->nkeys == 0)
            continue;
        px_frag *f = frag_new(r, pool, cmd->retry);
        px_buf b = {0};
        if (f == NULL || px_buf_printf(&b, "*%zu\r\n", pt->nargs + 1) != 0 ||
            px_buf_bulk(&b, argv[0].p, argv[0].len) != 0 ||
            px_buf_append(&b, pt->body.p, pt->body.len) != 0) {
            free(f);
            px_buf_free(&b);
            fail = "ERR out of memory";
            break;
        }
        f->data = b.p;
        f->len = b.len;
        f->split = true;
        f->nkeys = pt->nkeys;
        f->keys = pt->keys;
        pt->keys = NULL;
        memcpy(f->cand, pt->cand, pt->ncand * sizeof(size_t));
        f->ncand = pt->ncand;
        frags[nfrags++] = f;
    }
    for (size_t s = 0; parts != NULL && s < pool->nservers; s++) {
        px_buf_free(&parts[s].body);
        free(parts[s].keys);
    }
    free(parts);
    free(owner);
    if (fail != NULL) {
        for (size_t i = 0; i < nfrags; i++)
            px_frag_free(frags[i]);
        free(frags);
        if (strstr(fail, "backend") != NULL)
            pool->stats.forward_error++;
        r->merge = PX_MERGE_ONE;
        px_req_error(r, "%s", fail);
        return;
    }
    r->pending = (unsigned)nfrags;
    pool->stats.fragments += nfrags;
    for (size_t i = 0; i < nfrags; i++)
        px_frag_dispatch(frags[i]);
    free(frags);
}

static void printable_name(char *out, size_t cap, const ch_resp_arg *a)
{
    size_t n = 0;
    for (size_t i = 0; i < a->len && n + 1 < cap; i++) {
        unsigned char ch = (unsigned char)a->p[i];
        out[n++] = isprint(ch) && ch != '\'' ? (char)tolower(ch) : '?';
    }
    out[n] = '\0';
}

void px_command_handle(px_client *c, const ch_resp_arg *argv, size_t argc, const char *raw,
                       size_t rawlen)
{
    px_pool *pool = c->pool;
    px_req *r = px_req_new(c);
    if (r == NULL) {
        px_client_close(c);
        return;
    }
    char lower[32];
    const px_cmd *cmd = NULL;
    if (argv[0].len > 0 && argv[0].len < sizeof(lower)) {
        for (size_t i = 0; i < argv[0].len; i++)
            lower[i] = (char)tolower((unsigned char)argv[0].p[i]);
        cmd = command_find(lower, argv[0].len);
    }
    char name[72];
    printable_name(name, sizeof(name), &argv[0]);
    if (cmd == NULL) {
        px_req_error(r, "ERR unsupported command '%s'", name);
        return;
    }
    r->mclass = (uint8_t)command_class(cmd);
    /* With client_auth, PING is answered before AUTH too (health checks need no password);
     * with redis_auth alone, as twemproxy and Redis, only AUTH and QUIT are. */
    const char *password = pool->client_password;
    if (password != NULL && !c->authed && cmd->kind != K_AUTH && cmd->kind != K_QUIT &&
        !(cmd->kind == K_PING && pool->conf->client_auth != NULL)) {
        px_req_error(r, "NOAUTH Authentication required.");
        return;
    }
    if (argc < cmd->arity || (cmd->kind == K_MSET && argc % 2 == 0)) {
        px_req_error(r, "ERR wrong number of arguments for '%s' command", name);
        return;
    }
    switch (cmd->kind) {
    case K_KEY:
        forward_one(r, pool, cmd, &argv[1], argv, argc, raw, rawlen);
        return;
    case K_EVAL: {
        char num[24];
        size_t n = argv[2].len < sizeof(num) ? argv[2].len : sizeof(num) - 1;
        memcpy(num, argv[2].p, n);
        num[n] = '\0';
        char *end = NULL;
        long numkeys = strtol(num, &end, 10);
        if (n == 0 || *end != '\0' || numkeys < 0 || (size_t)numkeys > argc - 3) {
            px_req_error(r, "ERR Number of keys can't be greater than number of args");
            return;
        }
        if (numkeys == 0) {
            px_req_error(r, "ERR %s without keys is not supported by the proxy", name);
            return;
        }
        forward_one(r, pool, cmd, &argv[3], argv, argc, raw, rawlen);
        return;
    }
    case K_MGET:
    case K_SUM:
        forward_split(r, pool, cmd, argv, argc, 1);
        return;
    case K_MSET:
        forward_split(r, pool, cmd, argv, argc, 2);
        return;
    case K_PING:
        if (argc == 1) {
            px_req_reply(r, "+PONG\r\n", 7);
            return;
        }
        px_buf_bulk(&r->reply, argv[1].p, argv[1].len); /* PING msg answers msg */
        r->done = true;
        px_req_done(r);
        return;
    case K_ECHO: {
        if (argc != 2) {
            px_req_error(r, "ERR wrong number of arguments for '%s' command", name);
            return;
        }
        px_buf_bulk(&r->reply, argv[1].p, argv[1].len);
        r->done = true;
        px_req_done(r);
        return;
    }
    case K_QUIT:
        r->close_after = true;
        c->draining = true;
        px_req_reply(r, "+OK\r\n", 5);
        return;
    case K_SELECT:
        if (argc == 2 && argv[1].len == 1 && argv[1].p[0] == '0')
            px_req_reply(r, "+OK\r\n", 5);
        else
            px_req_error(r, "ERR the proxy serves database 0 only");
        return;
    case K_COMMAND:
        px_req_reply(r, "*0\r\n", 4);
        return;
    case K_INFO: {
        px_buf text = {0};
        if (px_metrics_info(pool->worker, &text) != 0 ||
            px_buf_bulk(&r->reply, text.p, text.len) != 0) {
            px_buf_free(&text);
            r->reply.len = 0;
            px_req_error(r, "ERR out of memory");
            return;
        }
        px_buf_free(&text);
        r->done = true;
        px_req_done(r);
        return;
    }
    case K_AUTH: {
        const ch_resp_arg *pw = &argv[argc - 1];
        if (password == NULL) {
            px_req_error(r, "ERR Client sent AUTH, but no password is set");
        } else if (argc > 3) {
            px_req_error(r, "ERR wrong number of arguments for 'auth' command");
        } else if (pw->len == strlen(password) && memcmp(pw->p, password, pw->len) == 0) {
            c->authed = true;
            px_req_reply(r, "+OK\r\n", 5);
        } else {
            c->authed = false;
            px_req_error(r, "ERR invalid password");
        }
        return;
    }
    }
}

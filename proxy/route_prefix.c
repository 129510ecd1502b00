/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_prefix.c — prefix routing (route_prefix.h).
 *
 * The table: the routes with a prefix, sorted by first byte and, within one first byte, longest
 * first, with the start of each first byte's run (first[]); the catch-all ("") is not in it, it
 * is dflt. A key's match scans only its first byte's run and stops at the first hit, the
 * longest. Each entry keeps its first 8 bytes as a word and a mask, so an entry costs one
 * masked compare of the key's first 8 bytes (loaded once per key), and a memcmp only for the
 * bytes of a prefix longer than 8 once those matched. Built with its listener's tree (route_build.c), freed with it: a reload builds a new
 * one, and a request reads the table only while it starts (px_prefix_pick, prefix_start), from
 * its listener's current tree.
 *
 * px_route_prefix keeps no state per slot: each slot is one side request of its pool, whose
 * answer comes back here and goes to the request as that slot's (merged by the codec for a
 * split command). Cost of that path: one encoding and one parse per slot (the side request).
 */
#include "route_prefix.h"
#include "pool.h"
#include "request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct prefix_entry {
    uint64_t head, mask; /* the prefix's first min(len, 8) bytes, and the mask of those */
    const char *p;       /* into the table's own block */
    size_t len;
    px_pool *pool;
    bool strip;
} prefix_entry;

struct px_prefix {
    px_pool *dflt;         /* the catch-all's pool, else the listener */
    size_t n;
    uint32_t first[257];   /* e[first[b], first[b + 1]): the prefixes starting with byte b */
    prefix_entry e[];      /* then the prefixes' bytes */
};

static px_pool *pool_named(px_pool *pools, size_t npools, const char *name)
{
    for (size_t i = 0; i < npools; i++)
        if (pools[i].conf != NULL && strcmp(pools[i].conf->name, name) == 0)
            return &pools[i];
    return NULL;
}

static int entry_cmp(const void *a, const void *b)
{
    const prefix_entry *x = a, *y = b;
    unsigned char bx = (unsigned char)x->p[0], by = (unsigned char)y->p[0];
    if (bx != by)
        return bx < by ? -1 : 1;
    return x->len > y->len ? -1 : x->len < y->len ? 1 : 0;
}

px_prefix *px_prefix_build(const px_pool *pool, px_pool *pools, size_t npools, bool *err)
{
    const ch_conf_pool *pc = pool->conf;
    *err = false;
    if (pc == NULL || pc->nroutes == 0)
        return NULL;
    size_t bytes = 0;
    for (size_t i = 0; i < pc->nroutes; i++)
        bytes += pc->routes[i].prefix_len;
    px_prefix *t = calloc(1, sizeof(*t) + pc->nroutes * sizeof(prefix_entry) + bytes);
    if (t == NULL) {
        *err = true;
        return NULL;
    }
    char *at = (char *)&t->e[pc->nroutes];
    t->dflt = (px_pool *)pool;
    for (size_t i = 0; i < pc->nroutes; i++) {
        const ch_conf_route *r = &pc->routes[i];
        px_pool *to = pool_named(pools, npools, r->pool);
        if (to == NULL || to->codec != pool->codec) { /* the config's checks make this a bug */
            free(t);
            *err = true;
            return NULL;
        }
        if (r->prefix_len == 0) {
            t->dflt = to;
            continue;
        }
        memcpy(at, r->prefix, r->prefix_len);
        prefix_entry *e = &t->e[t->n++];
        *e = (prefix_entry){.p = at, .len = r->prefix_len, .pool = to, .strip = r->strip};
        size_t h = r->prefix_len < 8 ? r->prefix_len : 8;
        memcpy(&e->head, at, h);
        memset(&e->mask, 0xff, h);
        at += r->prefix_len;
    }
    qsort(t->e, t->n, sizeof(t->e[0]), entry_cmp);
    size_t i = 0;
    for (unsigned b = 0; b < 256; b++) {
        t->first[b] = (uint32_t)i;
        while (i < t->n && (unsigned char)t->e[i].p[0] == b)
            i++;
    }
    t->first[256] = (uint32_t)t->n;
    return t;
}

void px_prefix_free(px_prefix *t)
{
    free(t);
}

px_pool *px_prefix_match(const px_prefix *t, const char *key, size_t len, size_t *strip)
{
    *strip = 0;
    if (len == 0)
        return t->dflt;
    unsigned b = (unsigned char)key[0];
    uint32_t i = t->first[b], end = t->first[b + 1];
    if (i == end)
        return t->dflt;
    uint64_t w = 0;
    memcpy(&w, key, len < 8 ? len : 8);
    for (; i < end; i++) {
        const prefix_entry *e = &t->e[i];
        if ((w & e->mask) == e->head && e->len <= len &&
            (e->len <= 8 || memcmp(e->p + 8, key + 8, e->len - 8) == 0)) {
            *strip = e->strip ? e->len : 0;
            return e->pool;
        }
    }
    return t->dflt;
}

px_pool *px_prefix_default(const px_prefix *t)
{
    return t->dflt;
}

/* Whether m is split into a slot per key (request.c's rule for PX_CLASS_MULTI). */
static bool split(const px_msg *m)
{
    return (m->flags & PX_MSG_WHOLE) == 0 && m->cmd->cls == PX_CLASS_MULTI;
}

/* Where rq's key k goes (an undecodable key: the default pool, whose codec refuses it). */
static px_pool *key_pool(const px_prefix *t, const px_rq *rq, size_t k, size_t *strip)
{
    char buf[PX_MAX_ROUTE_KEY];
    size_t len = 0;
    const char *key = px_rq_key_bytes(rq, k, buf, sizeof(buf), &len);
    if (key == NULL) {
        *strip = 0;
        return t->dflt;
    }
    return px_prefix_match(t, key, len, strip);
}

/* The arguments of m that are keys it writes without naming them (RPOPLPUSH's destination,
 * px_codec.writes_unnamed) into at[]; their count. */
static size_t unnamed(const px_rq *rq, uint32_t at[PX_UNNAMED_MAX])
{
    size_t nat = 0;
    if (rq->codec->writes_unnamed == NULL ||
        rq->codec->writes_unnamed(&rq->msg, at, &nat) == NULL)
        return 0;
    return nat < PX_UNNAMED_MAX ? nat : PX_UNNAMED_MAX;
}

int px_prefix_pick(const px_prefix *t, px_rq *rq, px_pool **to, char *why, size_t cap)
{
    const px_msg *m = &rq->msg;
    px_pool *first = m->nkeys == 0 ? t->dflt : NULL;
    bool span = false, strip = false;
    for (size_t k = 0; k < m->nkeys; k++) {
        size_t cut = 0;
        px_pool *p = key_pool(t, rq, k, &cut);
        if (first == NULL)
            first = p;
        span |= p != first;
        strip |= cut > 0;
    }
    /* A key written unnamed goes where its own prefix says too: to the same pool, or refused. */
    uint32_t at[PX_UNNAMED_MAX];
    size_t nat = m->nkeys > 0 ? unnamed(rq, at) : 0;
    for (size_t i = 0; i < nat && at[i] < m->nargs; i++) {
        size_t cut = 0;
        px_pool *p = px_prefix_match(t, m->raw + m->args[at[i]].off, m->args[at[i]].len, &cut);
        span |= p != first;
        strip |= cut > 0;
    }
    *to = first;
    if (!span && !strip) {
        if (m->cmd->merge == PX_MERGE_EVERY && first != rq->pool &&
            rq->nslots != (first->nservers > 0 ? first->nservers : 1)) {
            snprintf(why, cap, "chash-proxy: a command sent to every server is not served on a "
                               "listener with routes whose default pool is another (send it "
                               "to pool %s's own listener)", first->conf->name);
            return -1;
        }
        return 0;
    }
    if (split(m))
        return 1;
    if (span) {
        snprintf(why, cap, "chash-proxy: the keys of this command go to different pools "
                           "(routes); only MGET, DEL, UNLINK, TOUCH, EXISTS, MSET and multi-key "
                           "get are split across pools");
        return -1;
    }
    if (rq->codec->encode_args == NULL) {
        snprintf(why, cap, "chash-proxy: this protocol's keys cannot be stripped (routes)");
        return -1;
    }
    return 1;
}

/* ---- px_route_prefix ------------------------------------------------------------------------ */

/* Key k of m, and the argument that is the same span, lose their first cut bytes. */
static void cut_key(px_msg *m, size_t k, size_t cut)
{
    px_span key = m->keys[k];
    for (size_t i = 0; i < m->nargs && i < m->args_cap; i++)
        if (m->args[i].off == key.off && m->args[i].len == key.len) {
            m->args[i].off += (uint32_t)cut;
            m->args[i].len -= (uint32_t)cut;
        }
    m->keys[k].off += (uint32_t)cut;
    m->keys[k].len -= (uint32_t)cut;
}

/* The side request's bytes for slot s of rq going to *to: the slot's key's part (a split
 * command) or the whole command, keys stripped where their route says. 0, or -1. */
static int encode_slot(px_rq *rq, px_slot s, const px_prefix *t, px_pool **to, px_buf *out)
{
    px_msg *m = &rq->msg;
    uint8_t expect = 0;
    if (split(m)) {
        uint32_t k = rq->slots[s].key;
        size_t cut = 0;
        *to = key_pool(t, rq, k, &cut);
        if (cut == 0)
            return rq->codec->encode_request(out, m, &k, 1, &expect);
        px_span keep_key = m->keys[k];
        px_span keep[64];
        size_t nkeep = m->nargs < 64 ? m->nargs : 64;
        memcpy(keep, m->args, nkeep * sizeof(px_span));
        if (m->nargs > 64) /* args beyond what keep holds: not restored, so not cut */
            return -1;
        cut_key(m, k, cut);
        int rc = rq->codec->encode_request(out, m, &k, 1, &expect);
        memcpy(m->args, keep, nkeep * sizeof(px_span));
        m->keys[k] = keep_key;
        return rc;
    }
    /* Not split: one pool (px_prefix_pick), some keys stripped. */
    px_span args[64], keys[64];
    if (m->nargs > 64 || m->nkeys > 64)
        return -1;
    px_msg c = *m;
    memcpy(args, m->args, m->nargs * sizeof(px_span));
    memcpy(keys, m->keys, m->nkeys * sizeof(px_span));
    c.args = args;
    c.keys = keys;
    c.args_cap = m->nargs;
    c.keys_cap = m->nkeys;
    *to = t->dflt;
    uint32_t at[PX_UNNAMED_MAX];
    size_t nat = unnamed(rq, at);
    for (size_t k = 0; k < m->nkeys; k++) {
        size_t cut = 0;
        *to = key_pool(t, rq, k, &cut);
        if (cut > 0)
            cut_key(&c, k, cut);
    }
    for (size_t i = 0; i < nat && at[i] < m->nargs; i++) { /* keys written unnamed */
        size_t cut = 0;
        (void)px_prefix_match(t, m->raw + m->args[at[i]].off, m->args[at[i]].len, &cut);
        args[at[i]].off += (uint32_t)cut;
        args[at[i]].len -= (uint32_t)cut;
    }
    return rq->codec->encode_args(out, &c);
}

static void prefix_start(px_route *rt, px_rq *rq, px_slot s)
{
    const px_prefix *t = rq->pool->tree != NULL ? rq->pool->tree->prefix : NULL;
    if (t == NULL) { /* a reload took the routes away between two slices */
        px_rq_answer_error(rq, &s, 1, PX_ERR_SERVER, "chash-proxy: the routes changed");
        return;
    }
    px_buf b = {0};
    px_pool *to = NULL;
    int rc = encode_slot(rq, s, t, &to, &b);
    if (rc == 0 && to != NULL && px_pool_fenced(to, px_io_hrtime(to->io))) {
        /* as dispatch refuses a request of a fenced pool (docs/FLEET.md, "Fencing") */
        char why[160];
        snprintf(why, sizeof(why), "chash-proxy: membership not proven current; not serving "
                                   "pool %s", to->conf->name);
        to->m.fence_refused++;
        px_rq_answer_error(rq, &s, 1, PX_ERR_SERVER, why);
        px_buf_free(&b);
        return;
    }
    if (rc != 0 ||
        px_rq_fork(rq, s, rt, to, to->route, b.p, b.len) != 0)
        px_rq_answer_error(rq, &s, 1, PX_ERR_SERVER,
                           "chash-proxy: this request cannot be routed by prefix (out of memory, "
                           "or more than 16 arguments in a part)");
    px_buf_free(&b);
}

static void prefix_reply(px_route *rt, px_rq *rq, const px_slot *slots, size_t n,
                         const px_reply *r)
{
    px_rq_return(rq, rt, slots, n, r);
}

static const px_route_ops prefix_ops = {
    .name = "prefix",
    .start = prefix_start,
    .reply = prefix_reply,
};

px_route px_route_prefix = {.ops = &prefix_ops};

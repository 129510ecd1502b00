/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client_track.c — the keys each tracking client read, per pool and worker (client_track.h).
 *
 * Invariants:
 * - An entry is live when its client slot is in use and its epoch is the slot's: a slot's
 *   epoch moves whenever its keys are forgotten at once (off, a flush, a bound), so a slot
 *   reused by another client never inherits an entry.
 * - t->occupied counts every entry not empty (live, dead or removed); the table is rehashed
 *   (dead and removed ones dropped) before it would pass half full, so each probe run ends.
 * - cl->count is the client's live entries, t->total the sum: the bounds are checked on them.
 */
#include "client_track.h"

#include "buf.h"

#include <stdlib.h>
#include <string.h>

#define EMPTY 0u
#define REMOVED UINT32_MAX
#define MIN_CAP 64u

typedef struct entry {
    uint64_t h;
    uint32_t client; /* slot + 1; EMPTY, REMOVED */
    uint32_t epoch;
} entry;

/* A set of prefixes (a BCAST client's, or the union the links register). */
typedef struct prefixes {
    char **p;
    uint32_t *len;
    size_t n;
    bool all; /* BCAST without PREFIX: every key */
} prefixes;

typedef struct client_slot {
    px_ctrack_push push;
    void *arg;
    uint32_t epoch;
    uint32_t count;
    bool used;
    bool bcast;
    prefixes pfx;
} client_slot;

struct px_ctrack {
    entry *at;
    size_t cap, occupied, total;
    client_slot *cl;
    size_t ncl, clcap;
    px_ctrack_counts n;
    size_t nbcast;     /* BCAST clients now */
    prefixes bunion;   /* the links' prefixes: every BCAST client's covered */
    uint64_t bver;     /* its version (0: none yet) */
};

static void prefixes_free(prefixes *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->p[i]);
    free(s->p);
    free(s->len);
    *s = (prefixes){0};
}

/* Adds p (no check of overlap). 0, or -1. */
static int prefixes_add(prefixes *s, const char *p, uint32_t len)
{
    char **np = realloc(s->p, (s->n + 1) * sizeof(*np));
    if (np == NULL)
        return -1;
    s->p = np;
    uint32_t *nl = realloc(s->len, (s->n + 1) * sizeof(*nl));
    if (nl == NULL)
        return -1;
    s->len = nl;
    if ((s->p[s->n] = malloc(len + 1u)) == NULL)
        return -1;
    memcpy(s->p[s->n], p, len);
    s->len[s->n++] = len;
    return 0;
}

static bool under(const char *key, size_t klen, const char *p, uint32_t plen)
{
    return klen >= plen && memcmp(key, p, plen) == 0;
}

/* Whether the key is under one of s. */
static bool prefixes_match(const prefixes *s, const char *key, size_t len)
{
    if (s->all)
        return true;
    for (size_t i = 0; i < s->n; i++)
        if (under(key, len, s->p[i], s->len[i]))
            return true;
    return false;
}

px_ctrack *px_ctrack_new(void)
{
    px_ctrack *t = calloc(1, sizeof(*t));
    if (t != NULL)
        PX_MEM_ADD(sizeof(*t));
    return t;
}

void px_ctrack_free(px_ctrack *t)
{
    if (t == NULL)
        return;
    PX_MEM_SUB(sizeof(*t) + t->cap * sizeof(entry) + t->clcap * sizeof(client_slot));
    for (size_t i = 0; i < t->ncl; i++)
        prefixes_free(&t->cl[i].pfx);
    prefixes_free(&t->bunion);
    free(t->at);
    free(t->cl);
    free(t);
}

static bool live(const px_ctrack *t, const entry *e)
{
    if (e->client == EMPTY || e->client == REMOVED)
        return false;
    const client_slot *c = &t->cl[e->client - 1];
    return c->used && c->epoch == e->epoch;
}

/* Rebuilt with room for want live entries at most a quarter full: dead and removed entries
 * dropped. 0, or -1 when out of memory (the table unchanged). Cost: O(cap). */
static int rehash(px_ctrack *t, size_t want)
{
    size_t cap = MIN_CAP;
    while (cap < want * 4)
        cap *= 2;
    entry *at = calloc(cap, sizeof(*at));
    if (at == NULL)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < t->cap; i++) {
        if (!live(t, &t->at[i]))
            continue;
        size_t p = (size_t)t->at[i].h & (cap - 1);
        while (at[p].client != EMPTY)
            p = (p + 1) & (cap - 1);
        at[p] = t->at[i];
        n++;
    }
    PX_MEM_ADD(cap * sizeof(entry));
    PX_MEM_SUB(t->cap * sizeof(entry));
    free(t->at);
    t->at = at;
    t->cap = cap;
    t->occupied = n;
    return 0;
}

uint32_t px_ctrack_on(px_ctrack *t, px_ctrack_push push, void *arg)
{
    size_t i = 0;
    while (i < t->ncl && t->cl[i].used)
        i++;
    if (i == t->ncl) {
        if (t->ncl == t->clcap) {
            size_t cap = t->clcap ? t->clcap * 2 : 16;
            client_slot *cl = realloc(t->cl, cap * sizeof(*cl));
            if (cl == NULL)
                return 0;
            memset(cl + t->clcap, 0, (cap - t->clcap) * sizeof(*cl));
            PX_MEM_ADD((cap - t->clcap) * sizeof(*cl));
            t->cl = cl;
            t->clcap = cap;
        }
        t->ncl++;
    }
    client_slot *c = &t->cl[i];
    c->push = push;
    c->arg = arg;
    c->epoch++; /* whatever an earlier client of the slot left is dead */
    c->count = 0;
    c->used = true;
    t->n.clients++;
    return (uint32_t)i + 1;
}

/* The client's keys forgotten at once. */
static void forget_all(px_ctrack *t, client_slot *c)
{
    c->epoch++;
    t->total -= c->count;
    c->count = 0;
}

void px_ctrack_off(px_ctrack *t, uint32_t client)
{
    if (t == NULL || client == 0 || client > t->ncl || !t->cl[client - 1].used)
        return;
    client_slot *c = &t->cl[client - 1];
    forget_all(t, c);
    c->used = false;
    c->push = NULL;
    if (c->bcast) {
        c->bcast = false;
        prefixes_free(&c->pfx);
        t->nbcast--;
    }
    t->n.clients--;
}

int px_ctrack_bcast_on(px_ctrack *t, uint32_t client, const char *const *p, const uint32_t *len,
                       size_t n)
{
    if (client == 0 || client > t->ncl || !t->cl[client - 1].used)
        return 0;
    client_slot *c = &t->cl[client - 1];
    prefixes_free(&c->pfx);
    c->bcast = true;
    t->nbcast++;
    c->pfx.all = n == 0;
    for (size_t i = 0; i < n; i++)
        if (prefixes_add(&c->pfx, p[i], len[i]) != 0)
            return -1;
    /* the union: a prefix covered by one there adds nothing; one that covers some replaces
     * them (the links' prefixes must not overlap); every key covers all */
    prefixes *u = &t->bunion;
    bool grew = false;
    if (c->pfx.all && !u->all) {
        prefixes_free(u);
        u->all = grew = true;
    }
    for (size_t i = 0; !u->all && i < c->pfx.n; i++) {
        const char *q = c->pfx.p[i];
        uint32_t ql = c->pfx.len[i];
        bool covered = false;
        for (size_t j = 0; j < u->n && !covered; j++)
            covered = under(q, ql, u->p[j], u->len[j]);
        if (covered)
            continue;
        for (size_t j = 0; j < u->n;) { /* those under q go */
            if (under(u->p[j], u->len[j], q, ql)) {
                free(u->p[j]);
                u->p[j] = u->p[u->n - 1];
                u->len[j] = u->len[u->n - 1];
                u->n--;
            } else {
                j++;
            }
        }
        if (prefixes_add(u, q, ql) != 0)
            return -1;
        grew = true;
    }
    if (grew || t->bver == 0)
        t->bver++;
    return 0;
}

uint64_t px_ctrack_bcast_want(const px_ctrack *t, const char *const **p, const uint32_t **len,
                              size_t *n)
{
    if (t == NULL || t->bver == 0) {
        *n = 0;
        return 0;
    }
    *p = (const char *const *)t->bunion.p;
    *len = t->bunion.len;
    *n = t->bunion.all ? 0 : t->bunion.n;
    return t->bver;
}

void px_ctrack_bcast_confirmed(px_ctrack *t)
{
    if (t == NULL || t->nbcast == 0)
        return;
    for (size_t i = 0; i < t->ncl; i++)
        if (t->cl[i].used && t->cl[i].bcast)
            px_ctrack_flush_client(t, (uint32_t)i + 1);
}

size_t px_ctrack_prefixes(const px_ctrack *t, uint32_t client, const char *const **p,
                          const uint32_t **len)
{
    if (t == NULL || client == 0 || client > t->ncl || !t->cl[client - 1].bcast)
        return 0;
    const client_slot *c = &t->cl[client - 1];
    *p = (const char *const *)c->pfx.p;
    *len = c->pfx.len;
    return c->pfx.n;
}

void px_ctrack_flush_client(px_ctrack *t, uint32_t client)
{
    if (t == NULL || client == 0 || client > t->ncl || !t->cl[client - 1].used)
        return;
    client_slot *c = &t->cl[client - 1];
    forget_all(t, c);
    t->n.flushes++;
    c->push(c->arg, NULL, 0); /* may close the client: px_ctrack_off, nothing moves */
}

void px_ctrack_untracked(px_ctrack *t, uint32_t client)
{
    if (t == NULL)
        return;
    t->n.untracked++;
    px_ctrack_flush_client(t, client);
}

int px_ctrack_read(px_ctrack *t, uint32_t client, uint64_t h)
{
    if (client == 0 || client > t->ncl || !t->cl[client - 1].used)
        return 0;
    client_slot *c = &t->cl[client - 1];
    if (t->cap > 0) { /* already tracked for it: nothing to add */
        for (size_t p = (size_t)h & (t->cap - 1); t->at[p].client != EMPTY;
             p = (p + 1) & (t->cap - 1))
            if (t->at[p].h == h && t->at[p].client == client && live(t, &t->at[p]))
                return 0;
    }
    if (c->count >= PX_CTRACK_CLIENT_KEYS || t->total >= PX_CTRACK_TOTAL_KEYS) {
        t->n.overflows++;
        px_ctrack_flush_client(t, client);
        if (!c->used || t->total >= PX_CTRACK_TOTAL_KEYS)
            return 0; /* the flush comes after this read's reply: its value is dropped too */
    }
    if ((t->occupied + 1) * 2 > t->cap && rehash(t, t->total + 1) != 0) {
        px_ctrack_flush_client(t, client);
        return -1;
    }
    size_t p = (size_t)h & (t->cap - 1);
    size_t reuse = SIZE_MAX;
    for (; t->at[p].client != EMPTY; p = (p + 1) & (t->cap - 1))
        if (reuse == SIZE_MAX && !live(t, &t->at[p]))
            reuse = p;
    if (reuse == SIZE_MAX)
        t->occupied++;
    else
        p = reuse;
    t->at[p] = (entry){h, client, c->epoch};
    c->count++;
    t->total++;
    return 0;
}

void px_ctrack_forget(px_ctrack *t, uint32_t client, uint64_t h)
{
    if (t == NULL || t->cap == 0 || client == 0)
        return;
    for (size_t p = (size_t)h & (t->cap - 1); t->at[p].client != EMPTY;
         p = (p + 1) & (t->cap - 1)) {
        entry *e = &t->at[p];
        if (e->h == h && e->client == client && live(t, e)) {
            e->client = REMOVED;
            t->cl[client - 1].count--;
            t->total--;
            return;
        }
    }
}

void px_ctrack_invalidate(px_ctrack *t, uint64_t h, const char *key, size_t len)
{
    if (t == NULL)
        return;
    for (size_t i = 0; t->nbcast > 0 && i < t->ncl; i++) { /* BCAST: by prefix, read or not */
        client_slot *c = &t->cl[i];
        if (c->used && c->bcast && prefixes_match(&c->pfx, key, len)) {
            t->n.pushes++;
            c->push(c->arg, key, len); /* may close the client: px_ctrack_off */
        }
    }
    if (t->cap == 0 || t->total == 0)
        return;
    for (size_t p = (size_t)h & (t->cap - 1); t->at[p].client != EMPTY;
         p = (p + 1) & (t->cap - 1)) {
        entry *e = &t->at[p];
        if (e->h != h || !live(t, e))
            continue;
        client_slot *c = &t->cl[e->client - 1];
        e->client = REMOVED;
        c->count--;
        t->total--;
        t->n.pushes++;
        c->push(c->arg, key, len); /* may close the client: px_ctrack_off, nothing moves */
    }
}

void px_ctrack_flush(px_ctrack *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->ncl; i++)
        px_ctrack_flush_client(t, (uint32_t)i + 1);
}

px_ctrack_counts px_ctrack_counts_of(const px_ctrack *t)
{
    px_ctrack_counts n = {0};
    if (t != NULL) {
        n = t->n;
        n.keys = t->total;
    }
    return n;
}

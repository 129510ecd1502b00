/* SPDX-License-Identifier: Apache-2.0 */
/*
 * near.c — the near cache of hot keys' replies (near.h). A chained hash map whose table doubles
 * as it fills (load <= 1), and a circular recency list whose head's next is the least recently
 * used entry: a get or put moves its entry to the tail, eviction takes the oldest.
 */
#include "near.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* A key's generation is its bucket's plus the epoch's. Both only grow, so the sum moves when
 * either does; it could come back to a value an entry holds only after 2^32 moves between the
 * entry's read and a get. */
struct ch__near_gens {
    uint32_t gen[CH__NEAR_GEN_BUCKETS];
    uint32_t epoch; /* ch__near_invalidate_all's */
};

/* The recency list: circular, through a head; a node is unlinked when next == NULL. */
typedef struct lru_link {
    struct lru_link *prev, *next;
} lru_link;

static void link_remove(lru_link *n)
{
    if (n->next == NULL)
        return;
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->next = n->prev = NULL;
}

static void link_push(lru_link *head, lru_link *n) /* at the tail: the most recently used */
{
    n->prev = head->prev;
    n->next = head;
    head->prev->next = n;
    head->prev = n;
}

static uint32_t gen_bucket(uint64_t kh)
{
    return (uint32_t)(kh >> (64u - CH__NEAR_GEN_BITS));
}

ch__near_gens *ch__near_gens_new(void)
{
    return calloc(1, sizeof(ch__near_gens));
}

void ch__near_gens_free(ch__near_gens *g)
{
    free(g);
}

/* Acquire / release: a worker that sees a bumped generation also sees what the writer did
 * before bumping it (nothing else is shared; the order of bump and send is the writer's). */
uint32_t ch__near_gen(const ch__near_gens *g, uint64_t kh)
{
    return __atomic_load_n(&g->gen[gen_bucket(kh)], __ATOMIC_ACQUIRE) +
           __atomic_load_n(&g->epoch, __ATOMIC_ACQUIRE);
}

void ch__near_invalidate(ch__near_gens *g, uint64_t kh)
{
    (void)__atomic_add_fetch(&g->gen[gen_bucket(kh)], 1u, __ATOMIC_ACQ_REL);
}

void ch__near_invalidate_all(ch__near_gens *g)
{
    (void)__atomic_add_fetch(&g->epoch, 1u, __ATOMIC_ACQ_REL);
}

typedef struct entry {
    struct entry *next; /* the bucket's chain */
    lru_link lru;
    uint64_t kh;
    uint64_t expires;   /* ns: the read's send + ttl */
    uint32_t gen;       /* the key's generation when the read was sent */
    uint32_t klen, rlen;
    char data[];        /* the key, then the reply */
} entry;

/* An entry's cost against max_bytes: its allocation. */
static size_t entry_bytes(size_t klen, size_t rlen)
{
    return sizeof(entry) + klen + rlen;
}

struct ch__near {
    ch__near_gens *gens;
    entry **table;       /* mask + 1 chains */
    size_t mask;
    lru_link lru;       /* head->next: least recently used */
    size_t max_bytes, bytes, entries;
    uint64_t ttl_ns;
    ch__near_stats st;
};

#define INITIAL_BUCKETS 64u

ch__near *ch__near_new(ch__near_gens *g, size_t max_bytes, uint64_t ttl_ns)
{
    ch__near *c = calloc(1, sizeof(*c));
    if (c == NULL || (c->table = calloc(INITIAL_BUCKETS, sizeof(*c->table))) == NULL) {
        free(c);
        return NULL;
    }
    c->gens = g;
    c->mask = INITIAL_BUCKETS - 1;
    c->max_bytes = max_bytes;
    c->ttl_ns = ttl_ns;
    c->lru.next = c->lru.prev = &c->lru;
    return c;
}

/* The lru_link that points at the entry of key, or at the chain's NULL end. */
static entry **find(ch__near *c, uint64_t kh, const void *key, size_t klen)
{
    entry **at = &c->table[kh & c->mask];
    while (*at != NULL && !((*at)->kh == kh && (*at)->klen == klen &&
                            memcmp((*at)->data, key, klen) == 0))
        at = &(*at)->next;
    return at;
}

/* Unlinks *at's entry from its chain and the recency list, and frees it. */
static void drop(ch__near *c, entry **at)
{
    entry *e = *at;
    *at = e->next;
    link_remove(&e->lru);
    size_t n = entry_bytes(e->klen, e->rlen);
    c->bytes -= n;
    c->entries--;
    free(e);
}

void ch__near_free(ch__near *c)
{
    if (c == NULL)
        return;
    for (size_t b = 0; b <= c->mask; b++)
        while (c->table[b] != NULL)
            drop(c, &c->table[b]);
    free(c->table);
    free(c);
}

const char *ch__near_get(ch__near *c, uint64_t kh, const void *key, size_t klen,
                         uint64_t now_ns, size_t *len, bool *known)
{
    entry **at = find(c, kh, key, klen);
    entry *e = *at;
    if (known != NULL)
        *known = e != NULL;
    if (e == NULL) {
        c->st.misses++;
        return NULL;
    }
    bool expired = now_ns >= e->expires;
    bool moved = c->gens != NULL && ch__near_gen(c->gens, kh) != e->gen;
    if (expired || moved) {
        /* kept (never served) until evicted or refilled: the key was hot lately */
        c->st.expired += expired;
        c->st.invalidated += !expired;
        c->st.misses++;
        return NULL;
    }
    link_remove(&e->lru);
    link_push(&c->lru, &e->lru);
    c->st.hits++;
    *len = e->rlen;
    return e->data + e->klen;
}

/* Doubles the table (out of memory: it stays as it is, only chains grow longer). */
static void grow(ch__near *c)
{
    size_t n = (c->mask + 1) * 2;
    entry **t = calloc(n, sizeof(*t));
    if (t == NULL)
        return;
    for (size_t b = 0; b <= c->mask; b++) {
        for (entry *e = c->table[b], *next; e != NULL; e = next) {
            next = e->next;
            e->next = t[e->kh & (n - 1)];
            t[e->kh & (n - 1)] = e;
        }
    }
    free(c->table);
    c->table = t;
    c->mask = n - 1;
}

bool ch__near_put(ch__near *c, uint64_t kh, const void *key, size_t klen, uint32_t gen,
                  uint64_t sent_ns, uint64_t now_ns, const void *reply, size_t rlen)
{
    size_t need = entry_bytes(klen, rlen);
    if ((c->gens != NULL && ch__near_gen(c->gens, kh) != gen) || sent_ns + c->ttl_ns <= now_ns ||
        need > c->max_bytes / 8 || klen > UINT32_MAX || rlen > UINT32_MAX) {
        c->st.refused++;
        return false;
    }
    entry **at = find(c, kh, key, klen);
    if (*at != NULL)
        drop(c, at);
    while (c->bytes + need > c->max_bytes && c->lru.next != &c->lru) {
        entry *old = (entry *)(void *)((char *)c->lru.next - offsetof(entry, lru));
        drop(c, find(c, old->kh, old->data, old->klen));
        c->st.evictions++;
    }
    entry *e = malloc(need);
    if (e == NULL) {
        c->st.refused++;
        return false;
    }
    e->kh = kh;
    e->expires = sent_ns + c->ttl_ns;
    e->gen = gen;
    e->klen = (uint32_t)klen;
    e->rlen = (uint32_t)rlen;
    memcpy(e->data, key, klen);
    memcpy(e->data + klen, reply, rlen);
    e->lru.next = e->lru.prev = NULL;
    link_push(&c->lru, &e->lru);
    if (c->entries + 1 > c->mask + 1)
        grow(c);
    at = &c->table[kh & c->mask];
    e->next = *at;
    *at = e;
    c->entries++;
    c->bytes += need;
    c->st.stores++;
    return true;
}

void ch__near_drop(ch__near *c, uint64_t kh, const void *key, size_t klen)
{
    entry **at = find(c, kh, key, klen);
    if (*at != NULL)
        drop(c, at);
}

void ch__near_stats_get(const ch__near *c, ch__near_stats *out)
{
    *out = c->st;
    out->entries = c->entries;
    out->bytes = c->bytes;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core_ctrack.c — the table of keys tracking clients read (proxy/client_track.h; issue 37,
 * item 4): an invalidation reaches each client that read the key once, and no other; off,
 * a flush and a slot's reuse forget at once; NOLOOP's forget; the per-client bound flushes
 * that client alone; many keys through rehashes keep every entry. The REDIRECT registry
 * (proxy/redir.h): each worker drains its own clients' invalidations, in order; past the
 * inbox's bound a target gets a flush; a client gone gets nothing.
 */
#include "core.h"

#include "client_track.h"
#include "redir.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

typedef struct got {
    int keys, flushes;
    char last[16];
} got;

static void push(void *arg, const char *key, size_t len)
{
    got *g = arg;
    if (key == NULL) {
        g->flushes++;
        return;
    }
    g->keys++;
    memcpy(g->last, key, len < sizeof(g->last) - 1 ? len : sizeof(g->last) - 1);
    g->last[len < sizeof(g->last) - 1 ? len : sizeof(g->last) - 1] = '\0';
}

void test_ctrack_table(void **state)
{
    (void)state;
    px_ctrack *t = px_ctrack_new();
    assert_non_null(t);
    got a = {0}, b = {0};
    uint32_t ca = px_ctrack_on(t, push, &a), cb = px_ctrack_on(t, push, &b);
    assert_true(ca != 0 && cb != 0 && ca != cb);
    /* a read k1 (twice: one entry), b read k1 and k2 */
    assert_int_equal(px_ctrack_read(t, ca, 1), 0);
    assert_int_equal(px_ctrack_read(t, ca, 1), 0);
    assert_int_equal(px_ctrack_read(t, cb, 1), 0);
    assert_int_equal(px_ctrack_read(t, cb, 2), 0);
    assert_int_equal(px_ctrack_counts_of(t).keys, 3);
    px_ctrack_invalidate(t, 1, "k1", 2);
    assert_int_equal(a.keys, 1);
    assert_int_equal(b.keys, 1);
    assert_string_equal(a.last, "k1");
    px_ctrack_invalidate(t, 1, "k1", 2); /* forgotten once pushed, as Redis does */
    assert_int_equal(a.keys + b.keys, 2);
    px_ctrack_invalidate(t, 3, "k3", 2); /* read by no one */
    assert_int_equal(a.keys + b.keys, 2);
    /* NOLOOP: b's own write of k2 forgets it without a push */
    px_ctrack_forget(t, cb, 2);
    px_ctrack_invalidate(t, 2, "k2", 2);
    assert_int_equal(b.keys, 1);
    /* a flush: a null push to each client, every key forgotten */
    px_ctrack_read(t, ca, 5);
    px_ctrack_flush(t);
    assert_int_equal(a.flushes, 1);
    assert_int_equal(b.flushes, 1);
    px_ctrack_invalidate(t, 5, "k5", 2);
    assert_int_equal(a.keys, 1);
    assert_int_equal(px_ctrack_counts_of(t).keys, 0);
    /* off, and the slot reused by another client: nothing of the first reaches it */
    px_ctrack_read(t, ca, 6);
    px_ctrack_off(t, ca);
    got c = {0};
    uint32_t cc = px_ctrack_on(t, push, &c);
    assert_int_equal(cc, ca);
    px_ctrack_invalidate(t, 6, "k6", 2);
    assert_int_equal(a.keys + c.keys, 1);
    /* the bound: the key past PX_CTRACK_CLIENT_KEYS flushes that client alone, and is then
     * its one key; through the rehashes every key read is still found */
    for (uint64_t h = 100; h < 100 + PX_CTRACK_CLIENT_KEYS; h++)
        assert_int_equal(px_ctrack_read(t, cc, h * 0x9E3779B97F4A7C15ull), 0);
    assert_int_equal(c.flushes, 0);
    assert_int_equal(px_ctrack_counts_of(t).keys, PX_CTRACK_CLIENT_KEYS);
    px_ctrack_read(t, cb, 7);
    px_ctrack_read(t, cc, 7);
    assert_int_equal(c.flushes, 1);
    assert_int_equal(b.flushes, 1);
    assert_int_equal(px_ctrack_counts_of(t).overflows, 1);
    px_ctrack_invalidate(t, 100 * 0x9E3779B97F4A7C15ull, "old", 3);
    assert_int_equal(c.keys, 0);
    px_ctrack_invalidate(t, 7, "k7", 2);
    assert_int_equal(c.keys, 1);
    assert_int_equal(b.keys, 2);
    px_ctrack_free(t);
}

/* BCAST: a client gets every key under its prefixes, read or not, and no other; the links'
 * union grows only by what it does not cover (a version each time), a prefix that covers
 * some replaces them, every key covers all; a confirmation flushes the BCAST clients alone. */
void test_ctrack_bcast(void **state)
{
    (void)state;
    px_ctrack *t = px_ctrack_new();
    got a = {0}, b = {0}, d = {0};
    uint32_t ca = px_ctrack_on(t, push, &a), cb = px_ctrack_on(t, push, &b),
             cd = px_ctrack_on(t, push, &d);
    const char *const *p;
    const uint32_t *len;
    size_t n;
    assert_int_equal(px_ctrack_bcast_want(t, &p, &len, &n), 0);
    const char *pa[] = {"a:b", "c"};
    uint32_t la[] = {3, 1};
    assert_int_equal(px_ctrack_bcast_on(t, ca, pa, la, 2), 0);
    uint64_t v1 = px_ctrack_bcast_want(t, &p, &len, &n);
    assert_true(v1 != 0);
    assert_int_equal(n, 2);
    const char *pb[] = {"a:"}; /* covers a:b: it replaces it */
    uint32_t lb[] = {2};
    assert_int_equal(px_ctrack_bcast_on(t, cb, pb, lb, 1), 0);
    uint64_t v2 = px_ctrack_bcast_want(t, &p, &len, &n);
    assert_true(v2 > v1);
    assert_int_equal(n, 2); /* c, a: */
    for (size_t i = 0; i < n; i++)
        assert_true((len[i] == 2 && memcmp(p[i], "a:", 2) == 0) ||
                    (len[i] == 1 && p[i][0] == 'c'));
    px_ctrack_read(t, cd, 42); /* a default-mode client */
    px_ctrack_invalidate(t, 1, "a:bx", 4);
    assert_int_equal(a.keys, 1);
    assert_int_equal(b.keys, 1);
    assert_int_equal(d.keys, 0);
    px_ctrack_invalidate(t, 2, "a:x", 3);
    assert_int_equal(a.keys, 1);
    assert_int_equal(b.keys, 2);
    px_ctrack_invalidate(t, 42, "zz", 2);
    assert_int_equal(a.keys + b.keys, 3);
    assert_int_equal(d.keys, 1);
    px_ctrack_bcast_confirmed(t);
    assert_int_equal(a.flushes, 1);
    assert_int_equal(b.flushes, 1);
    assert_int_equal(d.flushes, 0);
    /* every key */
    px_ctrack_off(t, cb);
    uint32_t ce = px_ctrack_on(t, push, &b);
    assert_int_equal(px_ctrack_bcast_on(t, ce, NULL, NULL, 0), 0);
    assert_true(px_ctrack_bcast_want(t, &p, &len, &n) > v2);
    assert_int_equal(n, 0);
    px_ctrack_invalidate(t, 3, "anything", 8);
    assert_int_equal(b.keys, 3);
    assert_int_equal(px_ctrack_prefixes(t, ca, &p, &len), 2);
    px_ctrack_free(t);
}

/* What px_redir_drain delivered to the clients of test_redir (handles: &seen[i]). */
typedef struct redir_got {
    int keys, flushes, flushes3;
    char last[16];
} redir_got;

static void redir_deliver(void *client, const char *key, size_t len, bool null_resp3)
{
    redir_got *g = client;
    if (key == NULL) {
        g->flushes++;
        g->flushes3 += null_resp3;
        return;
    }
    g->keys++;
    snprintf(g->last, sizeof(g->last), "%.*s", (int)(len < 15 ? len : 15), key);
}

void test_redir(void **state)
{
    (void)state;
    px_redir *r = px_redir_new(2);
    assert_non_null(r);
    redir_got a = {0}, b = {0};
    assert_int_equal(px_redir_join(r, 5, 0, &a), 0);
    assert_int_equal(px_redir_join(r, 9, 1, &b), 0);
    assert_true(px_redir_exists(r, 5));
    assert_false(px_redir_exists(r, 6));
    assert_false(px_redir_post(r, 6, "k", 1, false)); /* no such client: broken */
    assert_true(px_redir_post(r, 5, "k1", 2, false));
    assert_true(px_redir_post(r, 9, "k2", 2, false));
    assert_true(px_redir_post(r, 5, NULL, 0, true));
    px_redir_drain(r, 0, redir_deliver); /* worker 0: a's only */
    assert_int_equal(a.keys, 1);
    assert_string_equal(a.last, "k1");
    assert_int_equal(a.flushes3, 1);
    assert_int_equal(b.keys, 0);
    px_redir_drain(r, 1, redir_deliver);
    assert_int_equal(b.keys, 1);
    /* past the bound: what fits is delivered, then one flush */
    static char big[4096];
    memset(big, 'x', sizeof(big));
    int posted = 0;
    while (posted * (int)sizeof(big) < (int)PX_REDIR_INBOX_BYTES + 8192) {
        assert_true(px_redir_post(r, 5, big, sizeof(big), false));
        posted++;
    }
    a = (redir_got){0};
    px_redir_drain(r, 0, redir_deliver);
    assert_true(a.keys > 0 && a.keys < posted);
    assert_int_equal(a.flushes, 1);
    a = (redir_got){0};
    px_redir_drain(r, 0, redir_deliver); /* nothing more */
    assert_int_equal(a.keys + a.flushes, 0);
    /* a client that left: what was queued for it is dropped, posts refused */
    assert_true(px_redir_post(r, 9, "k3", 2, false));
    px_redir_leave(r, 9);
    assert_false(px_redir_post(r, 9, "k4", 2, false));
    b = (redir_got){0};
    px_redir_drain(r, 1, redir_deliver);
    assert_int_equal(b.keys, 0);
    /* many clients through the table's growth */
    static redir_got many[300];
    for (uint64_t id = 100; id < 400; id++)
        assert_int_equal(px_redir_join(r, id, (unsigned)(id & 1), &many[id - 100]), 0);
    for (uint64_t id = 100; id < 400; id += 2)
        px_redir_leave(r, id);
    for (uint64_t id = 100; id < 400; id++)
        assert_int_equal(px_redir_exists(r, id), (id & 1) == 1);
    assert_true(px_redir_exists(r, 5));
    px_redir_free(r);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core_ctrack.c — the table of keys tracking clients read (proxy/client_track.h; issue 37,
 * item 4): an invalidation reaches each client that read the key once, and no other; off,
 * a flush and a slot's reuse forget at once; NOLOOP's forget; the per-client bound flushes
 * that client alone; many keys through rehashes keep every entry.
 */
#include "core.h"

#include "client_track.h"

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

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core_merge.c — the proxy's logic in process (core.h): requests split over servers and their
 * replies merged: MGET in the client's key order, a large split started one slice per loop
 * iteration, DEL summed, MSET's first error.
 */
#include "core.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* MGET over 40 keys: one backend request per server holding some of them, each an MGET of
 * exactly its keys in the client's order; answered in reverse order, the client still gets the
 * values in its key order, nulls where a server had none. */
void test_mget_split_merge(void **state)
{
    fixture *fx = *state;
    enum { K = 40 };
    char *words[K + 1], names[K][16];
    words[0] = "MGET";
    for (int i = 0; i < K; i++) {
        snprintf(names[i], sizeof(names[i]), "k%d", i);
        words[i + 1] = names[i];
    }
    px_buf req = {0}, want = {0};
    resp(&req, K + 1, words);
    request(fx, NULL, req.p);
    size_t used = 0;
    for (size_t s = 0; s < NSERVERS; s++) {
        char *mine[K + 1];
        size_t n = 0;
        mine[n++] = "MGET";
        for (int i = 0; i < K; i++)
            if (owner(fx, names[i]) == s)
                mine[n++] = names[i];
        fake_sent *e = sent_to(s);
        if (n == 1) {
            assert_null(e);
            continue;
        }
        used++;
        assert_non_null(e);
        resp(&want, n, mine);
        assert_int_equal(e->bytes.len, want.len);
        assert_memory_equal(e->bytes.p, want.p, want.len);
    }
    assert_int_equal(fake_nlog, used);
    assert_true(used >= 2);
    assert_int_equal(fx->pool.stats.fragments, used);
    /* Reverse order; a server's value for key ki is "v<i>", except keys divisible by 3 (null). */
    for (size_t k = fake_nlog; k-- > 0;) {
        size_t s = fake_log[k].server->index;
        px_buf rep = {0};
        size_t n = 0;
        for (int i = 0; i < K; i++)
            n += owner(fx, names[i]) == s;
        px_buf_printf(&rep, "*%zu\r\n", n);
        for (int i = 0; i < K; i++)
            if (owner(fx, names[i]) == s) {
                if (i % 3 == 0)
                    px_buf_printf(&rep, "$-1\r\n");
                else
                    px_buf_printf(&rep, "$%d\r\nv%d\r\n", i < 10 ? 2 : 3, i);
            }
        assert_int_equal(ndone, 0);
        fake_reply(&fx->pool, &fake_log[k], rep.p, rep.len);
        px_buf_free(&rep);
    }
    assert_int_equal(ndone, 1);
    want.len = 0;
    px_buf_printf(&want, "*%d\r\n", K);
    for (int i = 0; i < K; i++) {
        if (i % 3 == 0)
            px_buf_printf(&want, "$-1\r\n");
        else
            px_buf_printf(&want, "$%d\r\nv%d\r\n", i < 10 ? 2 : 3, i);
    }
    assert_int_equal(done_log[0].len, want.len);
    assert_memory_equal(done_log[0].p, want.p, want.len);
    px_buf_free(&req);
    px_buf_free(&want);
}

/* A split command over more keys than PX_RQ_SLICE starts one slice per loop iteration: the first
 * slice's sends go out at once, the rest only when the loop runs its deferred work; the client
 * still gets every value in its key order, and the request completes only after its last slice. */
void test_mget_slices(void **state)
{
    fixture *fx = *state;
    px_pool *pool = &fx->pool;
    enum { K = 2 * PX_RQ_SLICE + 100 };
    px_buf req = {0};
    px_buf_printf(&req, "*%d\r\n$4\r\nMGET\r\n", K + 1);
    for (int i = 0; i < K; i++) {
        char k[16];
        int n = snprintf(k, sizeof(k), "s%d", i);
        px_buf_printf(&req, "$%d\r\n%s\r\n", n, k);
    }
    px_buf_append(&req, "", 1);
    req.len--;
    request(fx, NULL, req.p);
    size_t keys_sent = 0;
    for (size_t k = 0; k < fake_nlog; k++)
        keys_sent += fake_log[k].frag->nslots;
    assert_int_equal(keys_sent, PX_RQ_SLICE);
    fake_run_deferred();
    keys_sent = 0;
    for (size_t k = 0; k < fake_nlog; k++)
        keys_sent += fake_log[k].frag->nslots;
    assert_int_equal(keys_sent, K);
    /* Each server answers its parts with the key's own name as the value. */
    for (size_t k = 0; k < fake_nlog; k++) {
        fake_sent *e = &fake_log[k];
        px_buf r = {0};
        px_buf_printf(&r, "*%zu\r\n", e->frag->nslots);
        /* The part's request is MGET k1 k2 ...: its keys in order. */
        const char *p = e->bytes.p, *end = e->bytes.p + e->bytes.len;
        p = memchr(p, '\n', (size_t)(end - p)) + 1;                    /* *n */
        p = memchr(p, '\n', (size_t)(end - p)) + 1;                    /* $4 */
        p = memchr(p, '\n', (size_t)(end - p)) + 1;                    /* MGET */
        for (size_t j = 0; j < e->frag->nslots; j++) {
            int len = atoi(p + 1);
            p = memchr(p, '\n', (size_t)(end - p)) + 1;
            px_buf_printf(&r, "$%d\r\n%.*s\r\n", len, len, p);
            p += len + 2;
        }
        fake_reply(pool, e, r.p, r.len);
        px_buf_free(&r);
        if (k + 1 < fake_nlog)
            assert_int_equal(ndone, 0);
    }
    assert_int_equal(ndone, 1);
    px_buf want = {0};
    px_buf_printf(&want, "*%d\r\n", K);
    for (int i = 0; i < K; i++) {
        char k[16];
        int n = snprintf(k, sizeof(k), "s%d", i);
        px_buf_printf(&want, "$%d\r\n%s\r\n", n, k);
    }
    assert_int_equal(done_log[0].len, want.len);
    assert_memory_equal(done_log[0].p, want.p, want.len);
    px_buf_free(&want);
    px_buf_free(&req);
}

/* DEL: integers summed; MSET: +OK, or the first error when a part fails. */
void test_sum_and_all_ok(void **state)
{
    fixture *fx = *state;
    char *del[] = {"DEL", "a", "b", "c", "d", "e", "f", "g", "h"};
    px_buf req = {0};
    resp(&req, 9, del);
    request(fx, NULL, req.p);
    size_t parts = fake_nlog;
    assert_true(parts >= 2);
    int64_t want = 0;
    for (size_t k = 0; k < parts; k++) {
        char rep[16];
        int n = snprintf(rep, sizeof(rep), ":%zu\r\n", k + 1);
        want += (int64_t)k + 1;
        fake_reply(&fx->pool, &fake_log[k], rep, (size_t)n);
    }
    char wantb[32];
    int wn = snprintf(wantb, sizeof(wantb), ":%lld\r\n", (long long)want);
    assert_int_equal(ndone, 1);
    assert_int_equal(done_log[0].len, (size_t)wn);
    assert_memory_equal(done_log[0].p, wantb, (size_t)wn);

    fake_reset();
    char *mset[] = {"MSET", "a", "1", "b", "2", "c", "3", "d", "4", "e", "5",
                    "f", "6", "g", "7", "h", "8", "i", "9", "j", "0"};
    resp(&req, 21, mset);
    request(fx, NULL, req.p);
    assert_true(fake_nlog >= 2);
    /* Each part is an MSET of its own pairs: the value follows its key. */
    for (size_t k = 0; k < fake_nlog; k++)
        assert_non_null(memmem(fake_log[k].bytes.p, fake_log[k].bytes.len, "MSET", 4));
    fake_reply(&fx->pool, &fake_log[0], "-ERR oops\r\n", 11);
    for (size_t k = 1; k < fake_nlog; k++)
        fake_reply(&fx->pool, &fake_log[k], "+OK\r\n", 5);
    assert_int_equal(ndone, 2);
    assert_int_equal(done_log[1].len, 11);
    assert_memory_equal(done_log[1].p, "-ERR oops\r\n", 11);
    px_buf_free(&req);
}

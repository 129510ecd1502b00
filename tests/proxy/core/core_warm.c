/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core_warm.c — the proxy's logic in process (core.h): a membership change's window (warm.h):
 * warm-up reads from the old owner and their fills, writes moving a key first, the ramp's switch
 * per key, memcached's copy.
 */
#include "core.h"
#include "warm.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

/* The placement of the fixture's file without its last server: the "previous" membership of a
 * window over the fixture's four servers. */
static ch_membership *prev_membership(fixture *fx, bool redis, ch_config **cfg_out,
                                      px_conf **cref_out)
{
    char path[80];
    snprintf(path, sizeof(path), "%s.prev", fx->path);
    FILE *fp = fopen(path, "w");
    fprintf(fp, "p:\n  listen: 127.0.0.1:1\n  redis: %s\n  hash: md5\n"
                "  distribution: ketama\n  servers:\n", redis ? "true" : "false");
    for (int i = 0; i < NSERVERS - 1; i++)
        fprintf(fp, "   - 127.0.0.1:%d:1 s%d\n", 7001 + i, i);
    fclose(fp);
    ch_config_error err;
    assert_int_equal(ch_config_load(path, cfg_out, &err), 0);
    unlink(path);
    *cref_out = px_conf_new(*cfg_out);
    ch_membership *m = NULL;
    assert_int_equal(ch_config_membership(&(*cfg_out)->pools[0], &m), CH_OK);
    return m;
}

typedef struct window {
    ch_config *cfg;
    px_conf *cref;
    ch_membership *prev;
} window;

/* Opens a window over the first three servers (which held every key before the fourth came). */
static void window_open(fixture *fx, window *w, bool redis, uint64_t ramp, uint64_t warm)
{
    w->prev = prev_membership(fx, redis, &w->cfg, &w->cref);
    px_server *src[NSERVERS - 1];
    for (int i = 0; i < NSERVERS - 1; i++)
        src[i] = &fx->servers[i];
    px_warm_times t = {1000, ramp, warm};
    px_warm_begin(&fx->pool, ch_membership_table(w->prev), src, NSERVERS - 1, &t);
    fake_now_ms = 1000;
}

static void window_close(fixture *fx, window *w)
{
    px_warm_end(&fx->pool);
    ch_membership_free(w->prev);
    px_conf_unref(w->cref);
}

/* A key the window moves (its owner now is the new fourth server), and one it does not. */
static void moved_and_kept(fixture *fx, const window *w, char *moved, char *kept, int skip)
{
    moved[0] = kept[0] = '\0';
    for (int i = 0; moved[0] == '\0' || kept[0] == '\0'; i++) {
        char k[16];
        snprintf(k, sizeof(k), "key%d", i);
        size_t now = owner(fx, k), before = ch_lookup(ch_membership_table(w->prev), k, strlen(k));
        assert_true(now == before || now == NSERVERS - 1); /* ketama moves keys to the new one */
        if (now != before && moved[0] == '\0' && skip-- <= 0)
            strcpy(moved, k);
        else if (now == before && kept[0] == '\0')
            strcpy(kept, k);
    }
}

static size_t prev_owner(const window *w, const char *k)
{
    return ch_lookup(ch_membership_table(w->prev), k, strlen(k));
}

static bool sent_is(const fake_sent *e, const char *want)
{
    return e->bytes.len == strlen(want) && memcmp(e->bytes.p, want, e->bytes.len) == 0;
}

/* MGET of a moved and a kept key in a warm-up window: the kept key goes as usual; the moved
 * one alone to its new owner, then, on a miss, to its old owner; the client gets both values
 * in order; the hit is then fetched (PTTL + DUMP) and RESTOREd at the new owner, without
 * REPLACE. A second moved key read, then written before its fetch returns: its copy is
 * dropped. */
void test_warm_read_and_fill(void **state)
{
    fixture *fx = *state;
    px_pool *pool = &fx->pool;
    window w;
    window_open(fx, &w, true, 0, 10000);
    char mk[16], kk[16], mk2[16], unused[16];
    moved_and_kept(fx, &w, mk, kk, 0);
    moved_and_kept(fx, &w, mk2, unused, 1);
    fake_now_ms = 2000;
    char *words[] = {"MGET", kk, mk};
    px_buf req = {0};
    resp(&req, 3, words);
    request(fx, NULL, req.p);
    assert_int_equal(fake_nlog, 2);
    fake_sent *to_kept = sent_to(owner(fx, kk)), *to_new = sent_to(NSERVERS - 1);
    assert_non_null(to_kept);
    assert_non_null(to_new);
    char want[128];
    snprintf(want, sizeof(want), "*2\r\n$4\r\nMGET\r\n$%zu\r\n%s\r\n", strlen(mk), mk);
    assert_true(sent_is(to_new, want));
    fake_reply(pool, to_kept, "*1\r\n$1\r\nK\r\n", sizeof("*1\r\n$1\r\nK\r\n") - 1);
    fake_reply(pool, to_new, "*1\r\n$-1\r\n", sizeof("*1\r\n$-1\r\n") - 1);
    assert_int_equal(ndone, 0);
    fake_sent *to_old = sent_to(prev_owner(&w, mk));
    assert_non_null(to_old);
    assert_true(sent_is(to_old, want));
    fake_reply(pool, to_old, "*1\r\n$1\r\nM\r\n", sizeof("*1\r\n$1\r\nM\r\n") - 1);
    assert_int_equal(ndone, 1);
    assert_done(0, "*2\r\n$1\r\nK\r\n$1\r\nM\r\n");
    /* The copy: a fetch on the old owner, then RESTORE on the new. */
    fake_sent *fetch = sent_to(prev_owner(&w, mk));
    assert_non_null(fetch);
    assert_non_null(memmem(fetch->bytes.p, fetch->bytes.len, "EVAL", strlen("EVAL")));
    assert_non_null(memmem(fetch->bytes.p, fetch->bytes.len, "DUMP", strlen("DUMP")));
    fake_reply(pool, fetch, "*2\r\n:5000\r\n$3\r\nabc\r\n", sizeof("*2\r\n:5000\r\n$3\r\nabc\r\n") - 1);
    fake_sent *restore = sent_to(NSERVERS - 1);
    assert_non_null(restore);
    snprintf(want, sizeof(want),
             "*4\r\n$7\r\nRESTORE\r\n$%zu\r\n%s\r\n$4\r\n5000\r\n$3\r\nabc\r\n", strlen(mk),
             mk);
    assert_true(sent_is(restore, want));
    fake_reply(pool, restore, "+OK\r\n", sizeof("+OK\r\n") - 1);
    assert_int_equal(pool->m.warm.warm_hits, 1);
    assert_int_equal(pool->m.warm.warm_fills, 1);
    assert_int_equal(pending(), 0);

    /* mk2: read (miss at the new owner, hit at the old), then written before its fetch is
     * answered: the copy is dropped, the write's own move goes on. */
    char *get2[] = {"GET", mk2};
    resp(&req, 2, get2);
    request(fx, NULL, req.p);
    fake_reply(pool, sent_to(NSERVERS - 1), "$-1\r\n", sizeof("$-1\r\n") - 1);
    fake_reply(pool, sent_to(prev_owner(&w, mk2)), "$1\r\nX\r\n", sizeof("$1\r\nX\r\n") - 1);
    assert_int_equal(ndone, 2);
    fake_sent *fetch2 = sent_to(prev_owner(&w, mk2));
    assert_non_null(fetch2);
    char *set2[] = {"SET", mk2, "new"};
    resp(&req, 3, set2);
    request(fx, NULL, req.p);
    fake_reply(pool, fetch2, "*2\r\n:5000\r\n$1\r\nX\r\n", sizeof("*2\r\n:5000\r\n$1\r\nX\r\n") - 1);
    assert_int_equal(pool->m.warm.warm_fill_errors, 1); /* dropped: written since its read */
    for (size_t k = 0; k < fake_nlog; k++)
        if (fake_log[k].frag != NULL)
            assert_null(memmem(fake_log[k].bytes.p, fake_log[k].bytes.len, "RESTORE", 7));
    /* The write: its take finds nothing (say), then it goes to the new owner. */
    fake_reply(pool, sent_to(prev_owner(&w, mk2)), "$-1\r\n", 5);
    fake_reply(pool, sent_to(NSERVERS - 1), "+OK\r\n", 5);
    assert_int_equal(ndone, 3);
    assert_int_equal(pending(), 0);
    px_buf_free(&req);
    window_close(fx, &w);
    fake_reset();
}

/* A RESP3 client's GET of a moved key: the new owner's RESP3 null is a miss, so the key is read
 * from its old owner (on a RESP3 connection too), answered as that server wrote it, and
 * copied. */
void test_warm_resp3(void **state)
{
    fixture *fx = *state;
    px_pool *pool = &fx->pool;
    window w;
    window_open(fx, &w, true, 0, 10000);
    char mk[16], kk[16];
    moved_and_kept(fx, &w, mk, kk, 0);
    fake_now_ms = 2000;
    char *words[] = {"GET", mk};
    px_buf req = {0};
    resp(&req, 2, words);
    px_local v3 = {.dialect = PX_DIALECT_RESP3};
    request(fx, &v3, req.p);
    fake_sent *to_new = sent_to(NSERVERS - 1);
    assert_non_null(to_new);
    assert_int_equal(to_new->dialect, PX_DIALECT_RESP3);
    fake_reply(pool, to_new, "_\r\n", 3);
    assert_int_equal(ndone, 0);
    fake_sent *to_old = sent_to(prev_owner(&w, mk));
    assert_non_null(to_old);
    assert_int_equal(to_old->dialect, PX_DIALECT_RESP3);
    fake_reply(pool, to_old, "$1\r\nM\r\n", 7);
    assert_done(0, "$1\r\nM\r\n");
    assert_int_equal(pool->m.warm.warm_hits, 1);
    fake_sent *fetch = sent_to(prev_owner(&w, mk));
    assert_non_null(fetch);
    assert_non_null(memmem(fetch->bytes.p, fetch->bytes.len, "DUMP", 4));
    fake_reply(pool, fetch, "$-1\r\n", 5); /* gone meanwhile: nothing to copy */
    assert_int_equal(pending(), 0);
    px_buf_free(&req);
    window_close(fx, &w);
    fake_reset();
}

/* A write of a moved key in the window moves it first: one EVAL takes PTTL, DUMP and DEL on
 * the old owner, RESTORE (no REPLACE) copies it to the new owner, then the write goes there.
 * DEL of a moved key the old owner does not have goes straight to the new owner. */
void test_warm_write_moves(void **state)
{
    fixture *fx = *state;
    px_pool *pool = &fx->pool;
    window w;
    window_open(fx, &w, true, 0, 10000);
    char mk[16], kk[16], mk2[16];
    moved_and_kept(fx, &w, mk, kk, 0);
    moved_and_kept(fx, &w, mk2, kk, 1);
    fake_now_ms = 2000;
    char *words[] = {"INCR", mk};
    px_buf req = {0};
    resp(&req, 2, words);
    request(fx, NULL, req.p);
    assert_int_equal(fake_nlog, 1);
    fake_sent *take = &fake_log[0];
    assert_int_equal(take->server->index, prev_owner(&w, mk));
    assert_non_null(memmem(take->bytes.p, take->bytes.len, "DEL", strlen("DEL")));
    fake_reply(pool, take, "*2\r\n:-1\r\n$2\r\n41\r\n", sizeof("*2\r\n:-1\r\n$2\r\n41\r\n") - 1);
    fake_sent *restore = sent_to(NSERVERS - 1);
    char want[128];
    snprintf(want, sizeof(want),
             "*4\r\n$7\r\nRESTORE\r\n$%zu\r\n%s\r\n$1\r\n0\r\n$2\r\n41\r\n", strlen(mk), mk);
    assert_true(sent_is(restore, want));
    assert_int_equal(ndone, 0);
    fake_reply(pool, restore, "+OK\r\n", sizeof("+OK\r\n") - 1);
    fake_sent *incr = sent_to(NSERVERS - 1);
    assert_true(sent_is(incr, req.p));
    fake_reply(pool, incr, ":42\r\n", sizeof(":42\r\n") - 1);
    assert_int_equal(ndone, 1);
    assert_done(0, ":42\r\n");
    assert_int_equal(pool->m.warm.warm_fills, 1);
    assert_int_equal(pool->m.warm.warm_deletes, 1);

    char *del[] = {"DEL", mk2};
    resp(&req, 2, del);
    request(fx, NULL, req.p);
    fake_reply(pool, sent_to(prev_owner(&w, mk2)), "$-1\r\n", sizeof("$-1\r\n") - 1);
    fake_sent *d = sent_to(NSERVERS - 1);
    assert_non_null(d);
    snprintf(want, sizeof(want), "*2\r\n$3\r\nDEL\r\n$%zu\r\n%s\r\n", strlen(mk2), mk2);
    assert_true(sent_is(d, want));
    fake_reply(pool, d, ":0\r\n", sizeof(":0\r\n") - 1);
    assert_done(1, ":0\r\n");
    px_buf_free(&req);
    window_close(fx, &w);
}

/* A ramp over 10 s: at 5 s in, a moved key goes to its old owner exactly when its switch
 * (start + XXH3_64(key) mod ramp) is still ahead, else to its new owner; kept keys to their
 * owner. After the ramp every key is on its new owner and the window is over. */
void test_ramp(void **state)
{
    fixture *fx = *state;
    px_pool *pool = &fx->pool;
    window w;
    window_open(fx, &w, true, 10000, 0);
    fake_now_ms = 6000;
    size_t before = 0, after = 0;
    px_buf req = {0};
    for (int i = 0; i < 200; i++) {
        char k[16];
        snprintf(k, sizeof(k), "key%d", i);
        char *words[] = {"GET", k};
        resp(&req, 2, words);
        size_t at = fake_nlog;
        request(fx, NULL, req.p);
        size_t to = fake_log[at].server->index;
        if (owner(fx, k) == prev_owner(&w, k)) {
            assert_int_equal(to, owner(fx, k));
        } else if (1000 + XXH3_64bits(k, strlen(k)) % 10000 > 6000) {
            assert_int_equal(to, prev_owner(&w, k));
            before++;
        } else {
            assert_int_equal(to, NSERVERS - 1);
            after++;
        }
        fake_reply(pool, &fake_log[at], "$-1\r\n", sizeof("$-1\r\n") - 1);
        assert_int_equal(ndone, 1);
        ndone = 0;
    }
    assert_true(before > 0 && after > 0);
    assert_int_equal(pool->m.warm.ramp_old, before);
    fake_now_ms = 11000;
    assert_int_equal(px_warm_left(pool, fake_now_ms), 0);
    char *words[] = {"GET", "key1"};
    resp(&req, 2, words);
    size_t at = fake_nlog;
    request(fx, NULL, req.p);
    assert_int_equal(fake_log[at].server->index, owner(fx, "key1"));
    assert_null(pool->warm.table); /* ended by the first lookup after it */
    px_buf_free(&req);
    window_close(fx, &w);
}

/* memcached: get of a moved key misses at the new owner, is answered by the old one, then
 * copied with mg (value, remaining TTL, flags) and an add-mode ms that keeps them. */
void test_mc_warm(void **state)
{
    fixture *fx = *state;
    px_pool *pool = &fx->pool;
    window w;
    window_open(fx, &w, false, 0, 10000);
    char mk[16], kk[16];
    moved_and_kept(fx, &w, mk, kk, 0);
    fake_now_ms = 2000;
    char req[64], want[96];
    snprintf(req, sizeof(req), "get %s\r\n", mk);
    request(fx, NULL, req);
    fake_reply(pool, sent_to(NSERVERS - 1), "END\r\n", sizeof("END\r\n") - 1);
    fake_sent *old = sent_to(prev_owner(&w, mk));
    assert_true(sent_is(old, req));
    char value[64];
    int vl = snprintf(value, sizeof(value), "VALUE %s 3 2\r\nab\r\nEND\r\n", mk);
    fake_reply(pool, old, value, (size_t)vl);
    assert_done(0, value);
    fake_sent *fetch = sent_to(prev_owner(&w, mk));
    snprintf(want, sizeof(want), "mg %s v t f\r\n", mk);
    assert_true(sent_is(fetch, want));
    fake_reply(pool, fetch, "VA 2 t100 f3\r\nab\r\n", sizeof("VA 2 t100 f3\r\nab\r\n") - 1);
    fake_sent *fill = sent_to(NSERVERS - 1);
    snprintf(want, sizeof(want), "ms %s 2 T100 F3 ME\r\nab\r\n", mk);
    assert_true(sent_is(fill, want));
    fake_reply(pool, fill, "NS\r\n", sizeof("NS\r\n") - 1);
    assert_int_equal(pool->m.warm.warm_fills_present, 1);
    window_close(fx, &w);
}

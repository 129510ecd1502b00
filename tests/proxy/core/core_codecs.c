/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core_codecs.c — the proxy's logic in process (core.h): the memcached codec through the proxy (a
 * multiget split and merged, noreply and meta quiet mode, base64 keys, local commands) and both
 * codecs' clean-up requests.
 */
#include "core.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

/* get k1 .. kn over several servers: each server gets "get" with its keys in the client's order;
 * the reply is every VALUE block in the client's key order (a key asked twice answered twice, a
 * miss left out) and one END. */
void test_mc_multiget(void **state)
{
    fixture *fx = *state;
    const char *keys[] = {"a", "b", "c", "d", "e", "f", "g", "h", "a"};
    size_t nk = sizeof(keys) / sizeof(keys[0]);
    px_buf req = {0};
    px_buf_printf(&req, "get");
    for (size_t i = 0; i < nk; i++)
        px_buf_printf(&req, " %s", keys[i]);
    px_buf_printf(&req, "\r\n");
    px_buf_append(&req, "", 1);
    request(fx, NULL, req.p);
    assert_true(fake_nlog >= 2);
    for (size_t k = 0; k < fake_nlog; k++) {
        size_t s = fake_log[k].server->index;
        px_buf want = {0}, rep = {0};
        px_buf_printf(&want, "get");
        for (size_t i = 0; i < nk; i++)
            if (owner(fx, keys[i]) == s) {
                px_buf_printf(&want, " %s", keys[i]);
                if (keys[i][0] != 'c') /* c misses */
                    px_buf_printf(&rep, "VALUE %s 0 2\r\nv%s\r\n", keys[i], keys[i]);
            }
        px_buf_printf(&want, "\r\n");
        px_buf_printf(&rep, "END\r\n");
        assert_int_equal(fake_log[k].bytes.len, want.len);
        assert_memory_equal(fake_log[k].bytes.p, want.p, want.len);
        fake_reply(&fx->pool, &fake_log[k], rep.p, rep.len);
        px_buf_free(&want);
        px_buf_free(&rep);
    }
    assert_int_equal(ndone, 1);
    assert_done(0, "VALUE a 0 2\r\nva\r\nVALUE b 0 2\r\nvb\r\nVALUE d 0 2\r\nvd\r\n"
                   "VALUE e 0 2\r\nve\r\nVALUE f 0 2\r\nvf\r\nVALUE g 0 2\r\nvg\r\n"
                   "VALUE h 0 2\r\nvh\r\nVALUE a 0 2\r\nva\r\nEND\r\n");
    px_buf_free(&req);
}

/* noreply is stripped towards the backend (which then answers, keeping one reply per request)
 * and the client gets nothing, whatever the answer; a failure too is swallowed. The meta q
 * flag is stripped, and the reply dropped exactly when memcached would not have sent it. */
void test_mc_noreply_quiet(void **state)
{
    fixture *fx = *state;
    request(fx, NULL, "set k 0 0 2 noreply\r\nhi\r\n");
    assert_int_equal(fake_nlog, 1);
    assert_int_equal(fake_log[0].bytes.len, strlen("set k 0 0 2\r\nhi\r\n"));
    assert_memory_equal(fake_log[0].bytes.p, "set k 0 0 2\r\nhi\r\n", fake_log[0].bytes.len);
    fake_reply(&fx->pool, &fake_log[0], "NOT_STORED\r\n", 12);
    request(fx, NULL, "delete k noreply\r\n");
    fake_fail(&fake_log[1]);
    request(fx, NULL, "mg k v q O9\r\n");
    assert_memory_equal(fake_log[2].bytes.p, "mg k v O9\r\n", fake_log[2].bytes.len);
    fake_reply(&fx->pool, &fake_log[2], "EN\r\n", 4);          /* a quiet miss: dropped */
    request(fx, NULL, "mg k v q O9\r\n");
    fake_reply(&fx->pool, &fake_log[3], "VA 2 O9\r\nhi\r\n", 13); /* a hit: sent */
    request(fx, NULL, "ms k 2 q\r\nhi\r\n");
    fake_reply(&fx->pool, &fake_log[4], "HD\r\n", 4);          /* stored, quiet: dropped */
    request(fx, NULL, "ms k 2 q\r\nhi\r\n");
    fake_reply(&fx->pool, &fake_log[5], "NS\r\n", 4);          /* not stored: sent */
    request(fx, NULL, "mn\r\n");
    assert_int_equal(fake_nlog, 6);
    assert_int_equal(ndone, 7);
    const char *want[] = {"", "", "", "VA 2 O9\r\nhi\r\n", "", "NS\r\n", "MN\r\n"};
    for (size_t i = 0; i < 7; i++)
        assert_done(i, want[i]);
}

/* A base64 meta key routes by its decoded bytes: mg with b goes where get of the plain key goes. */
void test_mc_base64_routing(void **state)
{
    fixture *fx = *state;
    for (int i = 0; i < 20; i++) {
        char key[16], b64[32], req[64];
        snprintf(key, sizeof(key), "user:%03d", i); /* 8 bytes: base64 without padding */
        static const char tbl[] =
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        size_t o = 0;
        for (size_t j = 0; j < 8; j += 3) {
            unsigned v = (unsigned)(unsigned char)key[j] << 16 |
                         (j + 1 < 8 ? (unsigned)(unsigned char)key[j + 1] << 8 : 0) |
                         (j + 2 < 8 ? (unsigned)(unsigned char)key[j + 2] : 0);
            b64[o++] = tbl[v >> 18 & 63];
            b64[o++] = tbl[v >> 12 & 63];
            b64[o++] = j + 1 < 8 ? tbl[v >> 6 & 63] : '=';
            b64[o++] = j + 2 < 8 ? tbl[v & 63] : '=';
        }
        b64[o] = '\0';
        snprintf(req, sizeof(req), "mg %s b v\r\n", b64);
        size_t before = fake_nlog;
        request(fx, NULL, req);
        assert_int_equal(fake_log[before].server->index, owner(fx, key));
        fake_reply(&fx->pool, &fake_log[before], "EN\r\n", 4);
    }
}

/* Local and refused commands never reach a backend. */
void test_mc_local(void **state)
{
    fixture *fx = *state;
    px_local ctx = {0};
    request(fx, &ctx, "version\r\n");
    request(fx, &ctx, "stats\r\n");
    request(fx, &ctx, "nonsense\r\n");
    request(fx, &ctx, "quit\r\n");
    assert_true(ctx.close);
    assert_int_equal(fake_nlog, 0);
    assert_int_equal(ndone, 4);
    assert_done(0, "VERSION " PX_VERSION "\r\n");
    assert_done(1, "CLIENT_ERROR stats is not supported by the proxy\r\n");
    assert_done(2, "ERROR\r\n");
    assert_done(3, "");
}

/* The rejoin clean-up's requests, as each codec writes them (and as its own reply scanner reads
 * the answers the servers give). */
void test_cleanup_encodings(void **state)
{
    (void)state;
    struct {
        const px_codec *codec;
        const char *key;
        size_t len;
        const char *want;
    } cases[] = {
        {&px_codec_redis, "k:1", 3, "*2\r\n$3\r\nDEL\r\n$3\r\nk:1\r\n"},
        {&px_codec_redis, "a b\n", 4, "*2\r\n$3\r\nDEL\r\n$4\r\na b\n\r\n"},
        {&px_codec_memcache, "k:1", 3, "delete k:1\r\n"},
        {&px_codec_memcache, "a b", 3, "md YSBi b\r\n"},   /* base64 of "a b" */
        {&px_codec_memcache, "\x01", 1, "md AQ== b\r\n"},
        {&px_codec_redis, NULL, 0, "*1\r\n$7\r\nFLUSHDB\r\n"},
        {&px_codec_memcache, NULL, 0, "flush_all\r\n"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        px_buf b = {0};
        uint8_t expect = 0;
        int rc = cases[i].key != NULL
                     ? cases[i].codec->encode_delete(&b, cases[i].key, cases[i].len, &expect)
                     : cases[i].codec->encode_flush(&b, &expect);
        assert_int_equal(rc, 0);
        assert_int_equal(b.len, strlen(cases[i].want));
        assert_memory_equal(b.p, cases[i].want, b.len);
        px_buf_free(&b);
    }
    /* memcached's answers to them frame as one reply each. */
    const char *answers[] = {"DELETED\r\n", "NOT_FOUND\r\n", "HD\r\n", "NF\r\n", "OK\r\n"};
    uint8_t expects[] = {0, 0, 0, 0, 0};
    px_buf b = {0};
    px_codec_memcache.encode_delete(&b, "k", 1, &expects[0]);
    expects[1] = expects[0];
    px_codec_memcache.encode_delete(&b, " ", 1, &expects[2]);
    expects[3] = expects[2];
    px_codec_memcache.encode_flush(&b, &expects[4]);
    px_buf_free(&b);
    px_limits lim, blim;
    ch_conf_pool pc = {.max_request_bytes = 1 << 20};
    px_codec_memcache.limits(&pc, &lim, &blim);
    for (size_t i = 0; i < 5; i++) {
        px_reply r;
        size_t consumed = 0, need = 0;
        char err[64];
        assert_int_equal(px_codec_memcache.scan_reply(&blim, expects[i], answers[i],
                                                      strlen(answers[i]), &r, &consumed, &need,
                                                      err, sizeof(err)),
                         PX_PARSE_OK);
        assert_int_equal(consumed, strlen(answers[i]));
        assert_int_not_equal(r.kind, PX_REPLY_ERROR);
    }
}

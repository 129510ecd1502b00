/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_config_nomem.c — the loader built with CH_CONFIG_FAILPOINTS: for every fixture, each of
 * the loader's own allocations fails in turn. Every such run must return CH_ENOMEM with *out
 * untouched and nothing left allocated; the run after the last allocation must give the same
 * result as a normal load. (libyaml's internal allocations are not injected; its memory errors
 * map to CH_ENOMEM the same way.) ASan adds its leak check at exit.
 */
#define _POSIX_C_SOURCE 200809L

#include "testutil.h"
#include "config/config_internal.h"

#include <chash_config.h>

#include <dirent.h>
#include <stdarg.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

long ch__config_fail_at = -1;
long ch__config_allocs;
long ch__config_live;

/* Returns the status of a load without failures; its error goes to *want_err. */
static int sweep(const char *path, ch_config_error *want_err)
{
    ch_config *cfg = NULL;
    ch_config_error err;
    ch__config_fail_at = -1;
    ch__config_allocs = 0;
    int want = ch_config_load(path, &cfg, want_err);
    long total = ch__config_allocs;
    assert_true(want == CH_OK || want == CH_EINVAL);
    ch_config_free(cfg);
    assert_int_equal(ch__config_live, 0);

    for (long k = 0; k <= total; k++) {
        ch_config *sentinel = (ch_config *)&sentinel;
        cfg = sentinel;
        ch__config_fail_at = k;
        ch__config_allocs = 0;
        int rc = ch_config_load(path, &cfg, &err);
        if (k < total) {
            if (rc != CH_ENOMEM)
                fail_msg("%s: allocation %ld of %ld failed, status %d", path, k, total, rc);
            assert_ptr_equal(cfg, sentinel);
            assert_string_equal(err.message, "out of memory");
            assert_int_equal(err.line, 0);
        } else {
            /* No allocation failed: the same outcome as without injection. */
            assert_int_equal(rc, want);
            if (rc == CH_OK) {
                ch_config_free(cfg);
            } else {
                assert_ptr_equal(cfg, sentinel);
                assert_string_equal(err.message, want_err->message);
                assert_int_equal(err.line, want_err->line);
                assert_int_equal(err.column, want_err->column);
            }
        }
        if (ch__config_live != 0)
            fail_msg("%s: %ld allocations leaked when allocation %ld failed", path,
                     ch__config_live, k);
    }
    ch__config_fail_at = -1;
    return want;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_every_fixture(void **state)
{
    (void)state;
    DIR *d = opendir(CH_CONFIG_FIXTURES);
    assert_non_null(d);
    char *names[256];
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (len > 4 && strcmp(e->d_name + len - 4, ".yml") == 0) {
            assert_true(n < 256);
            names[n] = malloc(len + 1);
            assert_non_null(names[n]);
            memcpy(names[n++], e->d_name, len + 1);
        }
    }
    closedir(d);
    assert_true(n >= 50);
    qsort(names, n, sizeof names[0], by_name);
    for (size_t i = 0; i < n; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", CH_CONFIG_FIXTURES, names[i]);
        ch_config_error err;
        sweep(path, &err);
        free(names[i]);
    }
}

/* The growth paths (pool, server and set arrays) need more entries than the fixtures have. */
static void test_growth(void **state)
{
    (void)state;
    char path[64];
    snprintf(path, sizeof path, "config_nomem_%ld.yml", (long)getpid());
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    /* 12 pools of 4 + 20 lines; odd servers are named n1, n3, ... */
    for (int p = 0; p < 12; p++) {
        fprintf(f, "p%d:\n  listen: 127.0.0.1:%d\n  hash: md5\n  servers:\n", p, 2000 + p);
        for (int s = 0; s < 20; s++) {
            fprintf(f, "    - 10.0.%d.%d:6379:1", p, s);
            if (s % 2 == 1)
                fprintf(f, " n%d", s);
            fputc('\n', f);
        }
    }
    /* Line 289 repeats the name of pool p11's server on line 265 + 4 + 3: an error after all
     * the growth. */
    fprintf(f, "    - 10.0.11.30:6379:1 n3\n");
    assert_int_equal(fclose(f), 0);
    ch_config_error err;
    assert_int_equal(sweep(path, &err), CH_EINVAL);
    assert_int_equal(err.line, 289);
    assert_int_equal(err.column, 7);
    assert_string_equal(err.message, "duplicate server name \"n3\" in pool \"p11\" (first on line 272)");
    remove(path);
}

/* ch_config_membership_doc: each of its allocations fails in turn; the pool stays as it was and
 * nothing leaks. */
static void test_membership_doc(void **state)
{
    (void)state;
    static const char file[] = "a:\n  membership: etcd://127.0.0.1:2379/k\n  servers:\n"
                               "    - 127.0.0.1:1:1\n";
    static const char doc[] = "{\"servers\": [\"127.0.0.1:7001:1 s1\", \"127.0.0.1:7002:1 s2\"], "
                              "\"hash\": \"md5\", \"hash_tag\": \"{}\", \"version\": \"v9\"}";
    ch_config *cfg = NULL;
    ch_config_error err;
    ch__config_fail_at = -1;
    assert_int_equal(ch__config_load_text("f.yml", file, strlen(file), &cfg, &err), CH_OK);
    long base = ch__config_live;
    int64_t epoch;
    ch__config_allocs = 0;
    ch_conf_pool *p = &cfg->pools[0];
    assert_int_equal(ch_config_membership_doc(p, "d", doc, strlen(doc), &epoch, &err), CH_OK);
    long total = ch__config_allocs;
    assert_int_equal(p->nservers, 2);
    ch_config_free(cfg);
    for (long k = 0; k < total; k++) {
        ch__config_fail_at = -1;
        assert_int_equal(ch__config_load_text("f.yml", file, strlen(file), &cfg, &err), CH_OK);
        p = &cfg->pools[0];
        ch__config_fail_at = k;
        ch__config_allocs = 0;
        assert_int_equal(ch_config_membership_doc(p, "d", doc, strlen(doc), &epoch, &err),
                         CH_ENOMEM);
        assert_int_equal(ch__config_live, base);
        assert_int_equal(p->nservers, 1);
        assert_string_equal(p->servers[0].addr, "127.0.0.1:1");
        ch__config_fail_at = -1;
        ch_config_free(cfg);
        assert_int_equal(ch__config_live, 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_fixture),
        cmocka_unit_test(test_growth),
        cmocka_unit_test(test_membership_doc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

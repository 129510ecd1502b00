/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet_cache_client.c — a libchash-cache client that a test drives line by line on stdin, in
 * the role of an application that watches a fleet's membership in etcd (docs/FLEET.md) and
 * feeds it to ch_cache_apply_membership_doc() / ch_cache_prepare_membership_doc()
 * (tests/integration/test_fleet_cache.py). One answer line per command on stdout:
 *
 *   apply REV FILE     the document in FILE, read from K at mod_revision REV
 *                      -> "ok EPOCH" | "err STATUS MESSAGE"
 *   prepare REV FILE   the document of K/pending at revision REV -> "ok EPOCH" (the epoch
 *                      prepared: its "epoch", else REV) | "err ..."
 *   clear              ch_cache_prepare_clear() -> "ok"
 *   epoch              -> "ok EPOCH"
 *   fence MS           ch_cache_fence_until(now + MS) (MS -1: never) -> "ok"
 *   set KEY VALUE      -> "ok NODE_ADDR" | "err STATUS FAIL MESSAGE"
 *   record ID          the instance record -> "ok JSON", after checking that it parses with
 *                      ch__fleet_record_parse() into the same id, kind and epoch
 *
 * usage: fleet_cache_client CONFIG.yml POOL
 */
#define _POSIX_C_SOURCE 200809L
#include <chash_cache.h>

#include "fleet_record.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    size_t got;
    while (b != NULL && (got = fread(b + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *nb = realloc(b, cap *= 2);
            if (nb == NULL)
                free(b);
            b = nb;
        }
    }
    fclose(f);
    *len = n;
    return b;
}

static void err_line(int rc, const ch_config_error *e)
{
    char buf[900];
    printf("err %d %s\n", rc, ch_config_error_str(e, buf, sizeof(buf)));
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: fleet_cache_client CONFIG.yml POOL\n");
        return 2;
    }
    ch_cache *c;
    ch_config_error e;
    int rc = ch_cache_open_config(argv[1], argv[2], NULL, &c, &e);
    if (rc != CH_OK) {
        char buf[900];
        fprintf(stderr, "open: %s\n", ch_config_error_str(&e, buf, sizeof(buf)));
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    char line[4096];
    while (fgets(line, sizeof(line), stdin) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        char cmd[16] = "", a[2048] = "", b[2048] = "";
        if (sscanf(line, "%15s %2047s %2047s", cmd, a, b) < 1)
            continue;
        if (strcmp(cmd, "apply") == 0 || strcmp(cmd, "prepare") == 0) {
            size_t len = 0;
            char *doc = slurp(b, &len);
            if (doc == NULL) {
                printf("err -1 cannot read %s\n", b);
                continue;
            }
            int64_t rev = strtoll(a, NULL, 10);
            rc = cmd[0] == 'a' ? ch_cache_apply_membership_doc(c, doc, len, rev, &e)
                               : ch_cache_prepare_membership_doc(c, doc, len, rev, &e);
            free(doc);
            if (rc != CH_OK)
                err_line(rc, &e);
            else
                printf("ok %" PRId64 "\n",
                       cmd[0] == 'a' ? ch_cache_epoch(c) : ch_cache_prepared_epoch(c));
        } else if (strcmp(cmd, "clear") == 0) {
            ch_cache_prepare_clear(c);
            printf("ok\n");
        } else if (strcmp(cmd, "epoch") == 0) {
            printf("ok %" PRId64 "\n", ch_cache_epoch(c));
        } else if (strcmp(cmd, "fence") == 0) {
            long long ms = strtoll(a, NULL, 10);
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            uint64_t now = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
            ch_cache_fence_until(c, ms < 0 ? UINT64_MAX : now + (uint64_t)ms);
            printf("ok\n");
        } else if (strcmp(cmd, "set") == 0) {
            ch_cache_result r;
            rc = ch_cache_set(c, a, strlen(a), b, strlen(b), 0, &r);
            if (rc == CH_OK && r.status == CH_CACHE_OK)
                printf("ok %s\n", r.node_addr);
            else
                printf("err %d %d %s\n", rc, (int)r.fail, r.message);
            ch_cache_result_free(&r);
        } else if (strcmp(cmd, "record") == 0) {
            char *json = ch_cache_fleet_record(c, a);
            ch__fleet_record rec;
            char why[200];
            if (json == NULL) {
                printf("err -2 no record\n");
            } else if (ch__fleet_record_parse(json, strlen(json), &rec, why, sizeof(why)) != 0) {
                printf("err -1 the record does not parse: %s\n", why);
            } else if (strcmp(rec.id, a) != 0 || strcmp(rec.kind, "libchash-cache") != 0 ||
                       rec.epoch != ch_cache_epoch(c)) {
                printf("err -1 the record parses into id %s kind %s epoch %" PRId64 "\n", rec.id,
                       rec.kind, rec.epoch);
            } else {
                printf("ok %s\n", json);
            }
            free(json);
        } else {
            printf("err -1 unknown command %s\n", cmd);
        }
    }
    ch_cache_close(c);
    return 0;
}

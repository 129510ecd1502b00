/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clients_place.c — libchash's side of the client-library compat tests (clients_compat.py).
 *
 * Usage: clients_place ALGO < case
 * The case is lines of text:
 *   hash NAME           (optional; ch_options.hash, for a scheme that takes the table's hash)
 *   vnodes V            (optional; ch_options.vnodes, else 0: the library's default)
 *   node W HEXID        one per node, in list order: weight W, id as hex bytes
 *   key HEX             one per key, hex bytes ("key -" is the empty key)
 *   keyhash HEX64       a key hash given directly (ch_lookup_hash), after the first key
 *   down I              (optional, after the nodes) node I is down: each key's server is then
 *                       the first candidate of ch_route_hash_fn() (the walk without the down
 *                       nodes, what chash-proxy and libchash-cache send to), -1 when none
 *   tag AB              (optional) ch_options.hash_tag = {A, B}
 *   case                starts the next case of a batch (rings_compat.py): the table, nodes,
 *                       down set and options are reset; "hash", "vnodes" and "tag" lines may
 *                       follow. One process places every case of a scheme.
 * Prints, for every key in order, the index of its owner in the node list, one per line.
 * Exit status: 0, or 2 with a message on stderr (bad input, a build that fails).
 */
#define _POSIX_C_SOURCE 200809L

#include "chash.h"
#include "chash_route.h"

#include <stdbool.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Decodes hex text in place; returns the byte count, or -1 for bad hex. "-" is empty. */
static long unhex(char *s)
{
    if (strcmp(s, "-") == 0)
        return 0;
    size_t n = strlen(s);
    if (n % 2 != 0)
        return -1;
    for (size_t i = 0; i < n / 2; i++) {
        int hi = hexval((unsigned char)s[2 * i]), lo = hexval((unsigned char)s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        s[i] = (char)(hi << 4 | lo);
    }
    s[n / 2] = '\0';
    return (long)(n / 2);
}

static bool *down;
static size_t ndown;

static bool node_up(const void *ctx, size_t i)
{
    (void)ctx;
    return !down[i];
}

static void die(const char *what)
{
    fprintf(stderr, "clients_place: %s\n", what);
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        die("usage: clients_place ALGO < case");
    ch_options o;
    ch_options_init(&o);
    if (ch_algo_from_name(argv[1], &o.algo) != CH_OK)
        die("unknown algorithm");
    o.vnodes = 0; /* without a vnodes line: the algorithm's (the library's) default */

    size_t cap = 0, n = 0;
    ch_node *nodes = NULL;
    ch_table *t = NULL;
    static char line[1 << 16];
    while (fgets(line, sizeof line, stdin) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        if (strcmp(line, "case") == 0) {
            ch_table_free(t);
            t = NULL;
            free(down);
            down = NULL;
            ndown = 0;
            for (size_t i = 0; i < n; i++)
                free((char *)nodes[i].id);
            n = 0;
            ch_algo_id algo = o.algo;
            ch_options_init(&o);
            o.algo = algo;
            o.vnodes = 0;
        } else if (strncmp(line, "tag ", 4) == 0 && strlen(line) == 6) {
            o.hash_tag[0] = line[4];
            o.hash_tag[1] = line[5];
        } else if (strncmp(line, "hash ", 5) == 0) {
            if (ch_hash_from_name(line + 5, &o.hash) != CH_OK)
                die("unknown hash");
        } else if (strncmp(line, "vnodes ", 7) == 0) {
            o.vnodes = (uint32_t)strtoul(line + 7, NULL, 10);
        } else if (strncmp(line, "node ", 5) == 0) {
            char *sp = strchr(line + 5, ' ');
            if (sp == NULL || t != NULL)
                die("bad node line");
            *sp = '\0';
            if (n == cap) {
                cap = cap ? 2 * cap : 16;
                if ((nodes = realloc(nodes, cap * sizeof(*nodes))) == NULL)
                    die("out of memory");
            }
            char *id = strdup(sp + 1);
            if (id == NULL || unhex(id) <= 0)
                die("bad node id");
            nodes[n++] = (ch_node){.id = id, .weight = strtod(line + 5, NULL)};
        } else if (strncmp(line, "down ", 5) == 0) {
            size_t i = (size_t)strtoul(line + 5, NULL, 10);
            if (t != NULL || i >= n)
                die("bad down line");
            if (down == NULL && (down = calloc(n, sizeof(*down))) == NULL)
                die("out of memory");
            ndown += !down[i];
            down[i] = true;
        } else if (strncmp(line, "key ", 4) == 0) {
            if (t == NULL) {
                int rc = ch_table_build(nodes, n, &o, &t);
                if (rc != CH_OK) {
                    fprintf(stderr, "clients_place: build: %s\n", ch_strerror(rc));
                    return 2;
                }
            }
            long len = unhex(line + 4);
            if (len < 0)
                die("bad key hex");
            if (down != NULL) {
                /* As chash-proxy routes: the key hash once, then the walk over the up nodes. */
                size_t cand[1], count = 0;
                uint64_t kh = ch_key_hash(t, line + 4, (size_t)len);
                if (ch_route_hash_fn(t, node_up, NULL, n - ndown, kh, 1, cand, &count) != CH_OK)
                    die("route failed");
                if (count == 0)
                    printf("-1\n");
                else
                    printf("%zu\n", cand[0]);
            } else {
                printf("%zu\n", ch_lookup(t, line + 4, (size_t)len));
            }
        } else if (strncmp(line, "keyhash ", 8) == 0) {
            if (t == NULL)
                die("keyhash before the first key");
            printf("%zu\n", ch_lookup_hash(t, strtoull(line + 8, NULL, 16)));
        } else if (line[0] != '\0') {
            die("unknown line");
        }
    }
    ch_table_free(t);
    free(down);
    for (size_t i = 0; i < n; i++)
        free((char *)nodes[i].id);
    free(nodes);
    return 0;
}

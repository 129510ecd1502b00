/* SPDX-License-Identifier: Apache-2.0 */
#define _POSIX_C_SOURCE 200809L

#include "testutil.h"

#include <signal.h>
#include <stdarg.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

uint64_t tu_rand(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

size_t tu_below(uint64_t *state, size_t n)
{
    return (size_t)(tu_rand(state) % n);
}

tu_nodes tu_nodes_random(uint64_t seed, size_t n, const char *prefix)
{
    tu_nodes s = {calloc(n, sizeof(ch_node)), calloc(n, sizeof(char *)), n};
    assert_non_null(s.nodes);
    assert_non_null(s.ids);
    uint64_t st = seed;
    for (size_t i = 0; i < n; i++) {
        s.ids[i] = malloc(48);
        assert_non_null(s.ids[i]);
        snprintf(s.ids[i], 48, "%s-%04zu-%08llx", prefix, i,
                 (unsigned long long)(tu_rand(&st) & 0xffffffffu));
        s.nodes[i] = (ch_node){.id = s.ids[i], .weight = 1.0};
    }
    return s;
}

tu_nodes tu_nodes_without(const tu_nodes *s, size_t at)
{
    tu_nodes v = {calloc(s->n, sizeof(ch_node)), NULL, s->n - 1};
    assert_non_null(v.nodes);
    for (size_t i = 0, k = 0; i < s->n; i++)
        if (i != at)
            v.nodes[k++] = s->nodes[i];
    return v;
}

tu_nodes tu_nodes_with(const tu_nodes *s, const ch_node *extra, size_t at)
{
    tu_nodes v = {calloc(s->n + 1, sizeof(ch_node)), NULL, s->n + 1};
    assert_non_null(v.nodes);
    for (size_t i = 0, k = 0; k < v.n; k++)
        v.nodes[k] = k == at ? *extra : s->nodes[i++];
    return v;
}

void tu_nodes_free(tu_nodes *s)
{
    for (size_t i = 0; s->ids != NULL && i < s->n; i++)
        free(s->ids[i]);
    free(s->ids);
    free(s->nodes);
}

void tu_nodes_free_view(tu_nodes *s)
{
    free(s->nodes);
}

size_t tu_key(char *buf, uint64_t seed, size_t k)
{
    return (size_t)snprintf(buf, 48, "key:%llu:%zu", (unsigned long long)seed, k);
}

ch_table *tu_build(const ch_node *nodes, size_t n, ch_algo_id algo, ch_hash_id hash,
                   uint32_t vnodes)
{
    ch_options o;
    ch_options_init(&o);
    o.algo = algo;
    o.hash = hash;
    o.vnodes = vnodes;
    ch_table *t = NULL;
    int rc = ch_table_build(nodes, n, &o, &t);
    if (rc != CH_OK)
        fail_msg("build %s/%s over %zu nodes: %s", ch_algo_name(algo), ch_hash_name(hash), n,
                 ch_strerror(rc));
    return t;
}

static void *count_alloc(void *ctx, size_t size)
{
    tu_alloc *t = ctx;
    if (t->fail_at >= 0 && t->calls++ == t->fail_at)
        return NULL;
    void *p = malloc(size);
    if (p != NULL) {
        t->live++;
        t->live_bytes += size;
    }
    return p;
}

static void count_free(void *ctx, void *p, size_t size)
{
    tu_alloc *t = ctx;
    t->live--;
    t->live_bytes -= size;
    free(p);
}

void tu_alloc_init(tu_alloc *t, long fail_at)
{
    *t = (tu_alloc){.a = {count_alloc, count_free, t}, .fail_at = fail_at};
}

/* What the armed watchdog waits for; only its handler reads it (a static, set before alarm()). */
static char watchdog_msg[256];

static void watchdog_fired(int sig)
{
    (void)sig;
    ssize_t w = write(STDERR_FILENO, watchdog_msg, strlen(watchdog_msg));
    (void)w;
    _exit(1);
}

void tu_watchdog_arm(unsigned seconds, const char *what)
{
    snprintf(watchdog_msg, sizeof watchdog_msg, "FAIL: %s did not return within %u s\n", what,
             seconds);
    signal(SIGALRM, watchdog_fired);
    alarm(seconds);
}

void tu_watchdog_disarm(void)
{
    alarm(0);
}

char *tu_repeat(const char *head, const char *unit, size_t len)
{
    char *buf = malloc(len > 0 ? len : 1);
    assert_non_null(buf);
    size_t h = strlen(head), u = strlen(unit);
    assert_true(h <= len && u > 0);
    memcpy(buf, head, h);
    for (size_t i = h; i < len; i++)
        buf[i] = unit[(i - h) % u];
    return buf;
}

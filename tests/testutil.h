/* SPDX-License-Identifier: Apache-2.0 */
/*
 * testutil.h — deterministic helpers shared by the tests: a seeded PRNG, node sets and keys,
 * and an allocator that counts and can be told to fail.
 */
#ifndef CHASH_TESTUTIL_H
#define CHASH_TESTUTIL_H

#include <chash.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* splitmix64: a fixed-seed generator, so every test run sees the same sequence. */
uint64_t tu_rand(uint64_t *state);
/* Uniform in [0, n). */
size_t tu_below(uint64_t *state, size_t n);

/* A node set with owned id strings. */
typedef struct tu_nodes {
    ch_node *nodes;
    char **ids;
    size_t n;
} tu_nodes;

/* n nodes with random-looking ids "<prefix>-<hex>" from the seed, weight 1. */
tu_nodes tu_nodes_random(uint64_t seed, size_t n, const char *prefix);
/* A copy of s with node `at` removed (at < s->n), or with `extra` inserted at position `at`
 * (extra != NULL, at <= s->n). Ids are shared with s; free with tu_nodes_free_view(). */
tu_nodes tu_nodes_without(const tu_nodes *s, size_t at);
tu_nodes tu_nodes_with(const tu_nodes *s, const ch_node *extra, size_t at);
void tu_nodes_free(tu_nodes *s);
void tu_nodes_free_view(tu_nodes *s);

/* Key k of a set: "key:<seed>:<k>" written to buf (>= 48 bytes); returns its length. */
size_t tu_key(char *buf, uint64_t seed, size_t k);

/* Builds a table or fails the test with the status message. */
ch_table *tu_build(const ch_node *nodes, size_t n, ch_algo_id algo, ch_hash_id hash,
                   uint32_t vnodes);

/* An allocator that counts live bytes and allocations and fails the allocation numbered
 * fail_at (0-based) when fail_at >= 0. */
typedef struct tu_alloc {
    ch_allocator a;
    long fail_at;
    long calls;
    long live;
    size_t live_bytes;
} tu_alloc;
void tu_alloc_init(tu_alloc *t, long fail_at);

/* A watchdog for a call that must return: tu_watchdog_arm(s) before it, tu_watchdog_disarm()
 * after. If the call has not returned after s seconds, the test process prints what and ends
 * with a failure. A deadline on a condition (the call returned), not a timing assertion: it is
 * for inputs that a linear parser refuses in milliseconds and a quadratic one takes hours on. */
void tu_watchdog_arm(unsigned seconds, const char *what);
void tu_watchdog_disarm(void);

/* A malloc'd text of len bytes: head, then unit repeated and cut at len (a nested document:
 * "[" repeated, "{\"a\": " repeated, ...). Free it. */
char *tu_repeat(const char *head, const char *unit, size_t len);

#endif

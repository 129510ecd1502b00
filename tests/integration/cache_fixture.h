/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache_fixture.h — what the libchash-cache integration tests share: a client over a harness
 * fleet (node ids cache-01, cache-02, ...), the expected routing of a key computed from the
 * client's own placement table (owner, and first successor when a node is down), and test keys.
 */
#ifndef CHASH_CACHE_FIXTURE_H
#define CHASH_CACHE_FIXTURE_H

#include "redis_harness.h"

#include <chash_cache.h>

#include <stddef.h>

/* Health options: the defaults with these fields set. */
ch_health_options fx_health(uint32_t failure_limit, uint64_t window_ms, uint64_t retry_min_ms,
                            uint64_t retry_max_ms);

/* A client over the fleet's servers, or a failed test. timeout_ms and depth for the client;
 * seed 42 (a fixed PRNG sequence). */
ch_cache *fx_open(const rh_fleet *f, const ch_health_options *h, int timeout_ms, size_t depth);

/* Key k as "key:<k>" (buf >= 32 bytes); returns its length. */
size_t fx_key(char *buf, size_t k);

/* The key's owner in the client's table. */
size_t fx_owner(const ch_cache *c, const char *key);

/* The first node of the key's walk (ch_replicas(), owner first) that is not `down`. */
size_t fx_successor(const ch_cache *c, const char *key, size_t down);

/* A direct connection (hiredis) to server i of the fleet, or a failed test. */
struct redisContext *fx_direct(const rh_fleet *f, size_t i);

/* Node i's metrics, or a failed test. */
ch_cache_node_metrics fx_node(const ch_cache *c, size_t i);
ch_cache_metrics fx_metrics(const ch_cache *c);

/* Polls ch_cache_probe() every 10 ms until node i is up, for at most limit_ms. Returns the
 * milliseconds it took, or -1. */
double fx_wait_readmitted(ch_cache *c, size_t i, double limit_ms);

#endif /* CHASH_CACHE_FIXTURE_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * near_write.h — what a write through the proxy makes the near cache of hot keys forget
 * (route_near.c; src/hot/near.h; docs/OPERATIONS.md, "Hot keys"): the generations of the keys
 * it writes move when it is sent and again when it is answered, so no worker serves a value
 * read before the write once it is sent. The route tree's writes (route_near.c) and those that
 * go past it on a session's own connection (session.c: a transaction's EXEC, a write after
 * WATCH) forget the same way. A key's generation is per bucket of its hash: forgetting a key
 * costs its bucket's other keys a miss, never a stale answer.
 */
#ifndef CHASH_PROXY_NEAR_WRITE_H
#define CHASH_PROXY_NEAR_WRITE_H

#include "request.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether rq writes for the near cache: a command the proxy does not retry (a write or a
 * delete), or a read that gives its keys a new lifetime (PX_MSG_TOUCH: memcached gat, gats, mg
 * with T, which may expire the item at once). */
bool px_near_writes(const px_rq *rq);

/* rq's write of its key k, or (k SIZE_MAX) of every key it names and of those it writes
 * unnamed (px_codec.writes_unnamed: a destination, a STORE key): their generations move.
 * When it may write keys no one can name (a script's undeclared keys), every key's generation
 * moves: the pool's whole near cache ends, on every worker (counted in
 * near.script_flushes when sent). Nothing when the pool has no near cache. Cost: a hash and an
 * atomic add per key. */
void px_near_forget(px_rq *rq, size_t k, bool sent);

/* The same for keys of hashes kh[0, n) (px_key_hash), or every key when all (a session's
 * transaction, whose commands are gone by its EXEC). */
void px_near_forget_hashes(px_pool *pool, const uint64_t *kh, size_t n, bool all, bool sent);

/* Appends to out (uint64_t each) the hashes of every key write rq writes, named or not, for a
 * px_near_forget_hashes later (a command queued in a transaction, applied at EXEC); false when
 * it may write keys no one can name, or memory is short: then every key must be forgotten. */
bool px_near_write_hashes(px_rq *rq, px_buf *out);

#endif /* CHASH_PROXY_NEAR_WRITE_H */

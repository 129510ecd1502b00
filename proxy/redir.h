/* SPDX-License-Identifier: Apache-2.0 */
/*
 * redir.h — RESP2's form of client-side caching (CLIENT TRACKING on REDIRECT <id>; issue 37,
 * item 4): the invalidations of client B's reads go to another connection A, named by its id,
 * which may live on another worker. This is the shared part: a registry of the pool's client
 * ids (which worker holds each, and an opaque handle that only that worker dereferences) and,
 * per worker, an inbox of invalidations owed to its clients, which the worker drains on its own
 * loop when woken (a uv_async_t it owns).
 *
 * Threads: everything under one mutex per registry (a client's join and leave, a REDIRECT's
 * look-up, each posted invalidation, each drain). A post copies the key into the target
 * worker's inbox and wakes it (uv_async_send coalesces wakeups).
 *
 * Bound: each inbox holds at most PX_REDIR_INBOX_BYTES of keys (counted in px_mem_held); a post
 * past it drops what that target is owed and marks it: its next delivery is a flush (a null
 * invalidation: every key), so nothing it caches outlives a dropped invalidation.
 *
 * Costs: a join and a leave per connection (O(1) average, open addressing on the id); a post is
 * a look-up and a copy of the key under the mutex; a drain is O(bytes queued).
 */
#ifndef CHASH_PROXY_REDIR_H
#define CHASH_PROXY_REDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define PX_REDIR_INBOX_BYTES (1u << 20) /* keys queued for one worker's clients */

typedef struct px_redir px_redir;

/* What a drain hands the target's worker: client (the handle it joined with) is owed the
 * invalidation of key[0, len), or a flush when key is NULL (nul_resp3: the writer's null was
 * RESP3's, as Redis writes the null of the tracking client, not of its target). */
typedef void (*px_redir_deliver)(void *client, const char *key, size_t len, bool null_resp3);

/* For nworkers workers; NULL when out of memory. */
px_redir *px_redir_new(unsigned nworkers);
void px_redir_free(px_redir *r); /* NULL: nothing */
/* Worker w's wakeup (an async handle on its loop, whose callback calls px_redir_drain; NULL
 * before the worker closes it). */
void px_redir_wake_on(px_redir *r, unsigned w, uv_async_t *wake);

/* Client id, on worker w, handled as client there. 0, or -1 when out of memory. */
int px_redir_join(px_redir *r, uint64_t id, unsigned w, void *client);
/* It closed: what it is owed is dropped on delivery (its worker finds no handle). */
void px_redir_leave(px_redir *r, uint64_t id);
/* Whether the id is a client now (REDIRECT's check). */
bool px_redir_exists(px_redir *r, uint64_t id);
/* An invalidation for id (key NULL: a flush). false when id is no client now. */
bool px_redir_post(px_redir *r, uint64_t id, const char *key, size_t len, bool null_resp3);
/* Worker w delivers what its inbox holds, in order, to the clients still joined. */
void px_redir_drain(px_redir *r, unsigned w, px_redir_deliver fn);

#endif /* CHASH_PROXY_REDIR_H */

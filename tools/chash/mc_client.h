/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mc_client.h — a small client of memcached's text protocol, for `chash migrate`: the commands
 * it needs (lru_crawler metadump, mg, add/set, stats) over one blocking-with-deadline socket.
 * The mg, add and set replies are read by proxy/proto's parser (mc.h), and mg is its copy's fetch.
 *
 * Requests are appended to an output buffer and sent by mc_flush() (or by the first read after
 * them), so any number can be pipelined: while the output is being written, replies that arrive
 * are read into the input buffer, so a pipeline never deadlocks against a server that stops
 * reading until its replies are read. Memory: the unsent requests and the unread replies.
 *
 * Every call that touches the socket returns MC_LOST (the connection failed or timed out; the
 * client is unusable, mc_error() says why) or MC_EREPLY (the server answered an error line,
 * mc_error() holds it; the connection is still in step). Not thread-safe: one owner.
 */
#ifndef CHASH_MC_CLIENT_H
#define CHASH_MC_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MC_LOST (-2)
#define MC_EREPLY (-1)
#define MC_KEY_MAX 250 /* memcached's longest key */

typedef struct mc_client mc_client;

/* Connects to host:port (port 0: the unix socket at host). timeout_ms bounds every wait.
 * NULL with err on failure. */
mc_client *mc_connect(const char *host, int port, int timeout_ms, char *err, size_t errlen);
void mc_close(mc_client *c);
/* The last MC_LOST / MC_EREPLY reason. */
const char *mc_error(const mc_client *c);

/* Sends everything appended so far. Returns 0 or MC_LOST. */
int mc_flush(mc_client *c);

/* "stats" curr_items. Returns 0 and *n, or an error. */
int mc_curr_items(mc_client *c, uint64_t *n);

/* One key of a metadump: key decoded from its URL encoding; exp absolute unix seconds or -1;
 * size the item's size in bytes (its header included) as memcached reports it. */
typedef struct mc_meta {
    char key[MC_KEY_MAX + 1];
    size_t len;
    int64_t exp;
    uint64_t size;
} mc_meta;

/* Sends "lru_crawler metadump all". Returns 0 or MC_LOST. */
int mc_metadump_begin(mc_client *c);
/* The dump's next key: 1 and *m; 0 at its END; MC_EREPLY when the server refused the dump
 * (e.g. "BUSY currently processing crawler request": mc_busy() says so) or sent a line that is
 * not a key; MC_LOST. */
int mc_metadump_next(mc_client *c, mc_meta *m);
/* Whether the last MC_EREPLY was the crawler being busy (try again shortly). */
bool mc_busy(const mc_client *c);

/* Appends the copy's fetch (ch_mc_copy_fetch: "mg <key> v t f", a key that is not plain in
 * base64): the value, its remaining TTL and its client flags. */
int mc_mg(mc_client *c, const char *key, size_t len);
/* A value as mg returns it; data points into the client's buffer, valid until its next call. */
typedef struct mc_value {
    const char *data;
    size_t len;
    int64_t ttl; /* seconds left, -1: never expires */
    uint32_t flags;
} mc_value;
/* The next mg reply (ch_mc_copy_read): 1 and *v (a hit), 0 (a miss: EN), MC_EREPLY, MC_LOST (a
 * reply that is not an answer to the fetch, a VA without t or f among them). */
int mc_mg_reply(mc_client *c, mc_value *v);

/* Appends "<cmd> <key> <flags> <exptime> <bytes>" and the data (cmd: "add" or "set"). exptime is
 * as memcached reads it: 0 never, up to 30 days relative seconds, beyond an absolute time. */
int mc_store(mc_client *c, const char *cmd, const char *key, size_t len, uint32_t flags,
             int64_t exptime, const void *data, size_t dlen);
/* The next store reply: 1 STORED, 0 NOT_STORED (add of a key that exists), MC_EREPLY
 * (SERVER_ERROR object too large, out of memory, ...), MC_LOST. */
int mc_store_reply(mc_client *c);

/* Appends "delete <key>" (a plain key). */
int mc_delete(mc_client *c, const char *key, size_t len);
/* The next delete reply: 1 DELETED, 0 NOT_FOUND, MC_EREPLY, MC_LOST. */
int mc_delete_reply(mc_client *c);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_http.h — HTTP requests to etcd's v3 JSON gateway from the control thread's loop:
 * libcurl's multi interface driven by libuv (a uv_poll per socket libcurl opens, one uv_timer
 * for its timeouts), so a watch that streams for hours and the short requests of the lease and
 * the instance record share the loop without a thread. Also one blocking request (libcurl's
 * easy interface) for what runs before the loop does: the first read at start, the lease's
 * revocation at shutdown.
 *
 * Why libcurl: etcd's gateway is HTTP/1.1 with chunked streaming answers (a watch), keep-alive
 * and timeouts; libcurl is the well-kept client that does all of it, and its multi interface
 * hands its sockets to any event loop. Control thread only.
 */
#ifndef CHASH_PROXY_ETCD_HTTP_H
#define CHASH_PROXY_ETCD_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

typedef struct px_etcd px_etcd;
typedef struct px_etcd_req px_etcd_req;

/* A request's end: ok (HTTP 200 and the whole answer read), its body (a unary request's whole
 * answer; "" for a stream) or, when not ok, why (a clause naming the URL). Called once, from
 * the loop, never from within px_etcd_post/px_etcd_stream or after px_etcd_cancel. */
typedef void (*px_etcd_done_cb)(void *arg, bool ok, const char *body, size_t len,
                                const char *why);
/* One line of a streaming answer (without its '\n'). */
typedef void (*px_etcd_line_cb)(void *arg, const char *line, size_t len);

/* A client of http://<endpoint> ("host:port") on loop. NULL when out of memory. */
px_etcd *px_etcd_new(uv_loop_t *loop, const char *endpoint);
/* Cancels every request (no callback runs) and frees e once its sockets are closed. */
void px_etcd_free(px_etcd *e);

/* POSTs body (JSON, copied) to path ("/v3/kv/put"): the whole answer within timeout_ms.
 * Returns the request (for px_etcd_cancel), or NULL when it could not be started (then done is
 * not called). */
px_etcd_req *px_etcd_post(px_etcd *e, const char *path, const char *body, long timeout_ms,
                          px_etcd_done_cb done, void *arg);
/* POSTs body to path and reads the answer as a stream of lines, without a time limit once
 * connected (connecting: connect_ms): line for each, done at its end. */
px_etcd_req *px_etcd_stream(px_etcd *e, const char *path, const char *body, long connect_ms,
                            px_etcd_line_cb line, px_etcd_done_cb done, void *arg);
/* Stops r: no callback of it runs any more. r is invalid after. */
void px_etcd_cancel(px_etcd_req *r);

/* One blocking POST (before the loop runs, or at shutdown). Returns the answer (malloc'd,
 * NUL-terminated, *len its length) or NULL with why. */
char *px_etcd_post_sync(const char *endpoint, const char *path, const char *body,
                        long timeout_ms, size_t *len, char *why, size_t whylen);

#endif /* CHASH_PROXY_ETCD_HTTP_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tls.h — TLS with OpenSSL for chash-proxy's streams (docs/PROXY.md, "TLS"): the contexts a pool
 * builds from its config (for its clients, for its servers), and the engine of one connection
 * over memory BIOs, which io.c drives from the stream's reads and writes. Nothing here touches a
 * socket or the loop: ciphertext in, plaintext out, and back.
 *
 * Threading: a context is built by the control thread and shared read-only by the workers
 * (OpenSSL's SSL_CTX is safe for that; each connection's SSL holds a reference, so a reload may
 * free the pool's context while connections made from it live on). An engine is one worker's.
 */
#ifndef CHASH_PROXY_TLS_H
#define CHASH_PROXY_TLS_H

#include "buf.h"

#include <chash_config.h>

#include <stdbool.h>
#include <stddef.h>

typedef struct px_tls_ctx px_tls_ctx;
typedef struct px_tls px_tls;

/* The pool's contexts: *listen for its clients (NULL when the pool has no tls_cert_file), and
 * *servers for its backends (NULL without server_tls). Relative file names are taken from
 * conf_dir. Returns 0, or -1 with the reason (naming the file, never a key's content) in why. */
int px_tls_ctx_new(const ch_conf_pool *pc, const char *conf_dir, px_tls_ctx **listen,
                   px_tls_ctx **servers, char *why, size_t whylen);
void px_tls_ctx_free(px_tls_ctx *ctx);

/* A connection's engine: server side (a client of the proxy) or client side (to a backend, with
 * name, when not NULL, sent as SNI and verified as the certificate's host name or IP address).
 * *session, when not NULL, is a session to resume (an SSL_SESSION, or NULL) and receives the new
 * one after each handshake (the caller frees it with px_tls_session_free). NULL when out of
 * memory. */
px_tls *px_tls_new(px_tls_ctx *ctx, bool server, const char *name, void **session);
void px_tls_free(px_tls *t);
void px_tls_session_free(void *session);

/* Drives the engine: in[0, n) is ciphertext from the peer (n may be 0); every ciphertext byte
 * the engine has for the peer is appended to out. Returns 1 once the handshake is done (and on
 * every later call), 0 while it goes on, -1 when the connection failed (px_tls_error says why). */
int px_tls_feed(px_tls *t, const char *in, size_t n, px_buf *out);
/* Plaintext for the application: up to cap bytes into p. Returns the count, 0 when none is
 * ready, -1 at the peer's close_notify, -2 on a failure. Appends any ciphertext produced (an
 * alert, a key update) to out. */
long px_tls_read(px_tls *t, char *p, size_t cap, px_buf *out);
/* Whether plaintext, or ciphertext not yet processed, waits inside the engine. */
bool px_tls_pending(const px_tls *t);
/* Encrypts p[0, n) onto out (the handshake must be done). 0, or -1. */
int px_tls_write(px_tls *t, const char *p, size_t n, px_buf *out);
/* A close_notify onto out. */
void px_tls_close_notify(px_tls *t, px_buf *out);
/* Why the connection failed (empty when it did not). */
const char *px_tls_error(const px_tls *t);

#endif /* CHASH_PROXY_TLS_H */

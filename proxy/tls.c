/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tls.c — OpenSSL contexts and per-connection engines over memory BIOs (tls.h).
 *
 * An engine's SSL reads ciphertext from rbio (what px_tls_feed was given) and writes ciphertext
 * to wbio (drained into the caller's buffer after every call), so the stream layer keeps its own
 * reads and writes and OpenSSL never sees a socket. TLS 1.2 is the least version accepted.
 * Backend sessions: with TLS 1.3 a session arrives after the handshake (a ticket), so it is
 * taken from the context's new-session callback and kept in the connection's slot, to be
 * offered on its next connect.
 */
#include "tls.h"
#include "file.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct px_tls_ctx {
    SSL_CTX *ctx;
};

struct px_tls {
    SSL *ssl;
    BIO *rbio, *wbio; /* owned by ssl */
    bool done, failed;
    void **session;   /* the backend connection's session slot, or NULL */
    char err[256];
};

/* OpenSSL's reason for the last failure of this thread, and its queue cleared. */
static void ssl_reason(char *buf, size_t len)
{
    unsigned long e = ERR_get_error();
    unsigned long last = e;
    while (e != 0) { /* the last one queued is the most specific */
        last = e;
        e = ERR_get_error();
    }
    if (last == 0)
        snprintf(buf, len, "unknown error");
    else
        ERR_error_string_n(last, buf, len);
}

/* file, or conf_dir/file when it is relative, into out. */
static const char *path_of(const char *conf_dir, const char *file, char *out, size_t len)
{
    if (file[0] == '/' || conf_dir == NULL || conf_dir[0] == '\0')
        snprintf(out, len, "%s", file);
    else
        snprintf(out, len, "%s/%s", conf_dir, file);
    return out;
}

static int fail_ctx(SSL_CTX *ctx, char *why, size_t whylen, const char *pool, const char *what,
                    const char *file)
{
    char reason[200];
    ssl_reason(reason, sizeof(reason));
    snprintf(why, whylen, "pool %s: %s '%s': %s", pool, what, file, reason);
    SSL_CTX_free(ctx);
    return -1;
}

/* Before OpenSSL opens a file by name: a regular file only (file.h), so a FIFO named by the
 * config fails here, naming key and path, instead of blocking -t, the start or a reload. 0, or
 * -1 with why (ctx freed). */
static int regular(SSL_CTX *ctx, const ch_conf_pool *pc, const char *key, const char *path,
                   char *why, size_t whylen)
{
    char r[4200 + 64];
    if (px_file_check_regular(path, key, r, sizeof(r)) == 0)
        return 0;
    snprintf(why, whylen, "pool %s: %s", pc->name, r);
    SSL_CTX_free(ctx);
    return -1;
}

/* A certificate chain and its key into ctx; cert_key and key_key are their config keys. */
static int load_pair(SSL_CTX *ctx, const ch_conf_pool *pc, const char *dir, const char *cert,
                     const char *key, const char *cert_key, const char *key_key, char *why,
                     size_t whylen)
{
    char pc_[4096], pk[4096];
    path_of(dir, cert, pc_, sizeof(pc_));
    path_of(dir, key, pk, sizeof(pk));
    if (regular(ctx, pc, cert_key, pc_, why, whylen) != 0)
        return -1;
    if (SSL_CTX_use_certificate_chain_file(ctx, pc_) != 1)
        return fail_ctx(ctx, why, whylen, pc->name, "cannot load the certificate", pc_);
    if (regular(ctx, pc, key_key, pk, why, whylen) != 0)
        return -1;
    if (SSL_CTX_use_PrivateKey_file(ctx, pk, SSL_FILETYPE_PEM) != 1)
        return fail_ctx(ctx, why, whylen, pc->name, "cannot load the private key", pk);
    if (SSL_CTX_check_private_key(ctx) != 1)
        return fail_ctx(ctx, why, whylen, pc->name, "the private key does not match", pc_);
    return 0;
}

/* A new session for a backend connection: kept in its slot (the reference is ours). */
static int new_session_cb(SSL *ssl, SSL_SESSION *sess)
{
    px_tls *t = SSL_get_app_data(ssl);
    if (t == NULL || t->session == NULL)
        return 0;
    if (*t->session != NULL)
        SSL_SESSION_free(*t->session);
    *t->session = sess;
    return 1;
}

static px_tls_ctx *wrap(SSL_CTX *ctx)
{
    px_tls_ctx *c = malloc(sizeof(*c));
    if (c == NULL) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    c->ctx = ctx;
    return c;
}

static int listen_ctx(const ch_conf_pool *pc, const char *dir, px_tls_ctx **out, char *why,
                      size_t whylen)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == NULL || SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
        snprintf(why, whylen, "pool %s: out of memory", pc->name);
        SSL_CTX_free(ctx);
        return -1;
    }
    if (load_pair(ctx, pc, dir, pc->tls_cert_file, pc->tls_key_file, "tls_cert_file",
                  "tls_key_file", why, whylen) != 0)
        return -1;
    static const unsigned char sid[] = "chash-proxy";
    SSL_CTX_set_session_id_context(ctx, sid, sizeof(sid) - 1);
    if (pc->tls_client_ca_file != NULL) {
        char ca[4096];
        path_of(dir, pc->tls_client_ca_file, ca, sizeof(ca));
        if (regular(ctx, pc, "tls_client_ca_file", ca, why, whylen) != 0)
            return -1;
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(ca);
        if (names == NULL || SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1) {
            sk_X509_NAME_pop_free(names, X509_NAME_free);
            return fail_ctx(ctx, why, whylen, pc->name, "cannot load the client CA", ca);
        }
        SSL_CTX_set_client_CA_list(ctx, names);
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    }
    if ((*out = wrap(ctx)) == NULL) {
        snprintf(why, whylen, "pool %s: out of memory", pc->name);
        return -1;
    }
    return 0;
}

static int servers_ctx(const ch_conf_pool *pc, const char *dir, px_tls_ctx **out, char *why,
                       size_t whylen)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL || SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
        snprintf(why, whylen, "pool %s: out of memory", pc->name);
        SSL_CTX_free(ctx);
        return -1;
    }
    if (pc->server_tls_verify) {
        char ca[4096];
        if (pc->server_tls_ca_file != NULL &&
            regular(ctx, pc, "server_tls_ca_file",
                    path_of(dir, pc->server_tls_ca_file, ca, sizeof(ca)), why, whylen) != 0)
            return -1;
        int ok = pc->server_tls_ca_file != NULL ? SSL_CTX_load_verify_locations(ctx, ca, NULL)
                                                : SSL_CTX_set_default_verify_paths(ctx);
        if (ok != 1)
            return fail_ctx(ctx, why, whylen, pc->name, "cannot load the servers' CA",
                            pc->server_tls_ca_file != NULL ? ca : "(the system's store)");
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    }
    if (pc->server_tls_cert_file != NULL &&
        load_pair(ctx, pc, dir, pc->server_tls_cert_file, pc->server_tls_key_file,
                  "server_tls_cert_file", "server_tls_key_file", why, whylen) != 0)
        return -1;
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, new_session_cb);
    if ((*out = wrap(ctx)) == NULL) {
        snprintf(why, whylen, "pool %s: out of memory", pc->name);
        return -1;
    }
    return 0;
}

int px_tls_ctx_new(const ch_conf_pool *pc, const char *conf_dir, px_tls_ctx **listen,
                   px_tls_ctx **servers, char *why, size_t whylen)
{
    *listen = *servers = NULL;
    ERR_clear_error();
    if (pc->tls_cert_file != NULL && listen_ctx(pc, conf_dir, listen, why, whylen) != 0)
        return -1;
    if (pc->server_tls && servers_ctx(pc, conf_dir, servers, why, whylen) != 0) {
        px_tls_ctx_free(*listen);
        *listen = NULL;
        return -1;
    }
    return 0;
}

void px_tls_ctx_free(px_tls_ctx *ctx)
{
    if (ctx == NULL)
        return;
    SSL_CTX_free(ctx->ctx);
    free(ctx);
}

/* ---- engines ------------------------------------------------------------------------------------ */

px_tls *px_tls_new(px_tls_ctx *ctx, bool server, const char *name, void **session)
{
    px_tls *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->ssl = SSL_new(ctx->ctx);
    t->rbio = BIO_new(BIO_s_mem());
    t->wbio = BIO_new(BIO_s_mem());
    if (t->ssl == NULL || t->rbio == NULL || t->wbio == NULL) {
        BIO_free(t->rbio);
        BIO_free(t->wbio);
        SSL_free(t->ssl);
        free(t);
        return NULL;
    }
    BIO_set_mem_eof_return(t->rbio, -1); /* empty: "retry", not end of stream */
    SSL_set_bio(t->ssl, t->rbio, t->wbio);
    SSL_set_app_data(t->ssl, t);
    t->session = session;
    if (server) {
        SSL_set_accept_state(t->ssl);
        return t;
    }
    SSL_set_connect_state(t->ssl);
    if (name != NULL && name[0] != '\0') {
        unsigned char ip[16];
        bool literal = inet_pton(AF_INET, name, ip) == 1 || inet_pton(AF_INET6, name, ip) == 1;
        if (literal) {
            X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl), name);
        } else {
            SSL_set_tlsext_host_name(t->ssl, name);
            SSL_set1_host(t->ssl, name);
        }
    }
    if (session != NULL && *session != NULL)
        SSL_set_session(t->ssl, *session);
    return t;
}

void px_tls_free(px_tls *t)
{
    if (t == NULL)
        return;
    /* A connection that did not fail is closed as if shut down: OpenSSL marks the session of
     * one freed without a shutdown as not resumable, which would cost every reconnect of a
     * backend connection (closed by an idle timeout, a reload) a full handshake. */
    if (t->done && !t->failed)
        SSL_set_shutdown(t->ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    SSL_free(t->ssl); /* and its BIOs */
    free(t);
}

void px_tls_session_free(void *session)
{
    if (session != NULL)
        SSL_SESSION_free(session);
}

/* Every ciphertext byte waiting in wbio, appended to out. */
static void drain(px_tls *t, px_buf *out)
{
    size_t n;
    while ((n = BIO_ctrl_pending(t->wbio)) > 0) {
        if (px_buf_reserve(out, n) != 0) {
            t->failed = true;
            snprintf(t->err, sizeof(t->err), "out of memory");
            return;
        }
        int got = BIO_read(t->wbio, out->p + out->len, (int)n);
        if (got <= 0)
            return;
        out->len += (size_t)got;
    }
}

static void fail(px_tls *t, const char *what)
{
    char reason[200];
    long v = SSL_get_verify_result(t->ssl);
    if (v != X509_V_OK)
        snprintf(reason, sizeof(reason), "certificate verify failed: %s",
                 X509_verify_cert_error_string(v));
    else
        ssl_reason(reason, sizeof(reason));
    ERR_clear_error();
    t->failed = true;
    snprintf(t->err, sizeof(t->err), "TLS %s: %s", what, reason);
}

int px_tls_feed(px_tls *t, const char *in, size_t n, px_buf *out)
{
    if (t->failed)
        return -1;
    if (n > 0 && BIO_write(t->rbio, in, (int)n) != (int)n) {
        t->failed = true;
        snprintf(t->err, sizeof(t->err), "out of memory");
        return -1;
    }
    if (!t->done) {
        int rc = SSL_do_handshake(t->ssl);
        if (rc == 1) {
            t->done = true;
        } else {
            int e = SSL_get_error(t->ssl, rc);
            if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
                fail(t, "handshake failed");
        }
    }
    drain(t, out); /* the handshake's bytes, or the alert that ends it */
    return t->failed ? -1 : t->done ? 1 : 0;
}

long px_tls_read(px_tls *t, char *p, size_t cap, px_buf *out)
{
    if (t->failed)
        return -2;
    int n = SSL_read(t->ssl, p, cap > INT32_MAX ? INT32_MAX : (int)cap);
    long rc = n;
    if (n <= 0) {
        int e = SSL_get_error(t->ssl, n);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
            rc = 0;
        } else if (e == SSL_ERROR_ZERO_RETURN) {
            rc = -1;
        } else {
            fail(t, "read failed");
            rc = -2;
        }
    }
    drain(t, out);
    return rc;
}

bool px_tls_pending(const px_tls *t)
{
    return SSL_pending(t->ssl) > 0 || BIO_ctrl_pending(t->rbio) > 0;
}

int px_tls_write(px_tls *t, const char *p, size_t n, px_buf *out)
{
    while (n > 0 && !t->failed) {
        int chunk = n > (1u << 30) ? (1 << 30) : (int)n;
        int rc = SSL_write(t->ssl, p, chunk);
        if (rc <= 0) {
            fail(t, "write failed");
            break;
        }
        p += rc;
        n -= (size_t)rc;
    }
    drain(t, out);
    return t->failed ? -1 : 0;
}

void px_tls_close_notify(px_tls *t, px_buf *out)
{
    if (t->done && !t->failed)
        (void)SSL_shutdown(t->ssl);
    ERR_clear_error();
    drain(t, out);
}

const char *px_tls_error(const px_tls *t)
{
    return t->err;
}

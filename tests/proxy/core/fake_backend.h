/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fake_backend.h — a backend layer for in-process tests of the proxy's logic (fake_backend.c).
 */
#ifndef CHASH_TEST_FAKE_BACKEND_H
#define CHASH_TEST_FAKE_BACKEND_H

#include "backend.h"

#define FAKE_MAX 4096

typedef struct fake_sent {
    px_server *server; /* where it went */
    px_frag *frag;     /* NULL once answered */
    px_buf bytes;      /* what the codec wrote for it */
    px_conn *conn;     /* a dedicated connection it went on (NULL: a shared one) */
    uint8_t dialect;   /* the kind of connection it went on (px_frag.dialect, px_conn.dialect) */
} fake_sent;

extern fake_sent fake_log[FAKE_MAX];
extern size_t fake_nlog;
extern uint64_t fake_now_ms; /* px_io_now's answer */
/* Runs the work px_io_defer left for the next loop iteration (once each, as a loop would). */
void fake_run_deferred(void);

void fake_reset(void);
void fake_down(const px_server *s); /* its sends fail at once from now on (until fake_reset) */
void fake_reply(px_pool *pool, fake_sent *e, const char *p, size_t len);
void fake_fail(fake_sent *e);
/* Dedicated connections (px_conn_dedicated) opened since fake_reset, released or not. */
extern px_conn *fake_conns[64];
extern size_t fake_nconns;
/* A reply read on dedicated connection c with no fragment waiting (its owner's push). */
void fake_push(px_pool *pool, px_conn *c, const char *p, size_t len);

#endif /* CHASH_TEST_FAKE_BACKEND_H */

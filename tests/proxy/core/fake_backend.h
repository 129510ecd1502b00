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
} fake_sent;

extern fake_sent fake_log[FAKE_MAX];
extern size_t fake_nlog;
extern uint64_t fake_now_ms; /* px_io_now's answer */

void fake_reset(void);
void fake_down(const px_server *s); /* its sends fail at once from now on (until fake_reset) */
void fake_reply(px_pool *pool, fake_sent *e, const char *p, size_t len);
void fake_fail(fake_sent *e);

#endif /* CHASH_TEST_FAKE_BACKEND_H */

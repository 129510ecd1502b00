/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fake_backend.c — backend.c's interface to the request layer (px_frag_new, px_frag_free,
 * px_server_send), with no sockets: every fragment sent is recorded with its bytes, and the test
 * answers it when it likes (fake_reply, fake_fail), in any order. A server can be made to fail
 * its sends at once (fake_down), as a connection that cannot be opened does. The loop's clock
 * (px_io_now) is fake_now_ms, which only the test moves.
 */
#include "fake_backend.h"

#include <stdlib.h>
#include <string.h>

fake_sent fake_log[FAKE_MAX];
size_t fake_nlog;
uint64_t fake_now_ms;

px_dl fake_deferred = {&fake_deferred, &fake_deferred};

void px_io_defer(px_io *io, px_flushable *f)
{
    (void)io;
    if (f->link.next == NULL)
        px_dl_push(&fake_deferred, &f->link);
}

void fake_run_deferred(void)
{
    while (fake_deferred.next != &fake_deferred) {
        px_dl *d = fake_deferred.next;
        px_dl_remove(d);
        px_flushable *f = PX_CONTAINER(d, px_flushable, link);
        f->flush(f);
    }
}

uint64_t px_io_now(const px_io *io)
{
    (void)io;
    return fake_now_ms;
}
static uint32_t down[64];
static size_t ndown;

px_conn *fake_conns[64];
size_t fake_nconns;

void fake_reset(void)
{
    for (size_t i = 0; i < fake_nlog; i++)
        px_buf_free(&fake_log[i].bytes);
    fake_nlog = 0;
    ndown = 0;
    for (size_t i = 0; i < fake_nconns; i++)
        free(fake_conns[i]);
    fake_nconns = 0;
}

px_conn *px_conn_dedicated(px_server *s, uint8_t dialect, const px_conn_owner *owner)
{
    if (fake_nconns == 64)
        return NULL;
    px_conn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->server = s;
    c->dialect = dialect;
    c->dedicated = true;
    c->owner = *owner;
    fake_conns[fake_nconns++] = c;
    return c;
}

int px_conn_send(px_conn *c, px_frag *f, px_encode_fn enc, void *arg)
{
    if (fake_nlog == FAKE_MAX || c->released)
        return -1;
    fake_sent *e = &fake_log[fake_nlog];
    memset(e, 0, sizeof(*e));
    uint8_t expect = 0;
    if (enc(arg, &e->bytes, f != NULL ? &f->expect : &expect) != 0)
        return -1;
    e->server = c->server;
    e->frag = f;
    e->conn = c;
    e->dialect = c->dialect;
    fake_nlog++;
    return 0;
}

void px_conn_release(px_conn *c)
{
    if (c != NULL)
        c->released = true;
}

void fake_push(px_pool *pool, px_conn *c, const char *p, size_t len)
{
    px_reply r;
    size_t consumed = 0, need = 0;
    char err[128];
    if (pool->codec->scan_reply(&pool->backend_limits, 0, p, len, &r, &consumed, &need, err,
                                sizeof(err)) != PX_PARSE_OK || consumed != len)
        abort();
    if (!c->released)
        c->owner.push(c->owner.ctx, c, &r);
}

void fake_down(const px_server *s)
{
    down[ndown++] = s->uid;
}

px_frag *px_frag_new(size_t nslots)
{
    px_frag *f = calloc(1, sizeof(*f) + nslots * sizeof(f->slots[0]));
    if (f != NULL)
        f->nslots = nslots;
    return f;
}

void px_frag_free(px_frag *f)
{
    free(f);
}

int px_server_send(px_server *s, px_frag *f, px_encode_fn enc, void *arg)
{
    for (size_t i = 0; i < ndown; i++) {
        if (down[i] == s->uid) {
            px_reply r = {.p = "backend down", .len = 12, .kind = PX_REPLY_FAILED};
            f->done(f, &r);
            px_frag_free(f);
            return 0;
        }
    }
    if (fake_nlog == FAKE_MAX)
        return -1;
    fake_sent *e = &fake_log[fake_nlog];
    memset(e, 0, sizeof(*e));
    if (enc(arg, &e->bytes, &f->expect) != 0)
        return -1;
    e->server = s;
    e->frag = f;
    e->dialect = f->dialect;
    fake_nlog++;
    return 0;
}

/* The pending fragment e is answered with reply bytes p (framed by the pool's codec). */
void fake_reply(px_pool *pool, fake_sent *e, const char *p, size_t len)
{
    px_reply r;
    size_t consumed = 0, need = 0;
    char err[128];
    px_parse st = pool->codec->scan_reply(&pool->backend_limits, e->frag->expect, p, len, &r,
                                          &consumed, &need, err, sizeof(err));
    if (st != PX_PARSE_OK || consumed != len)
        abort(); /* a test's own reply must frame */
    px_frag *f = e->frag;
    e->frag = NULL;
    if (f->kind == PX_FRAG_FORWARD) /* a connection's setup: its reply dropped, as backend.c */
        f->done(f, &r);
    px_frag_free(f);
}

void fake_fail(fake_sent *e)
{
    px_reply r = {.p = "backend x timed out", .len = 19, .kind = PX_REPLY_FAILED};
    px_frag *f = e->frag;
    e->frag = NULL;
    if (f->kind == PX_FRAG_FORWARD) /* a connection's setup: its reply dropped, as backend.c */
        f->done(f, &r);
    px_frag_free(f);
}

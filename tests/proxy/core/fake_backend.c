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

uint64_t px_io_now(const px_io *io)
{
    (void)io;
    return fake_now_ms;
}
static uint32_t down[64];
static size_t ndown;

void fake_reset(void)
{
    for (size_t i = 0; i < fake_nlog; i++)
        px_buf_free(&fake_log[i].bytes);
    fake_nlog = 0;
    ndown = 0;
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
    f->done(f, &r);
    px_frag_free(f);
}

void fake_fail(fake_sent *e)
{
    px_reply r = {.p = "backend x timed out", .len = 19, .kind = PX_REPLY_FAILED};
    px_frag *f = e->frag;
    e->frag = NULL;
    f->done(f, &r);
    px_frag_free(f);
}

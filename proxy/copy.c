/* SPDX-License-Identifier: Apache-2.0 */
/*
 * copy.c — a key copied between two children of a route (copy.h): two fired side requests,
 * the store fired from the fetch's answer, the copy's own allocation freed at its end.
 */
#include "copy.h"
#include "pool.h"
#include "request.h"
#include "warm.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct copy {
    px_pool *pool;
    px_route *to;
    px_copy_done done;
    uint32_t gen;
    size_t len;
    char key[];
} copy;

static void end(copy *c, px_copy_end e)
{
    c->done(c->pool, e);
    free(c);
}

static void stored(void *arg, const px_rq *side, const px_reply *r)
{
    (void)side;
    copy *c = arg;
    int rc = r->kind == PX_REPLY_FAILED ? -1 : c->pool->codec->fill_stored(r);
    end(c, rc > 0 ? PX_COPY_STORED : rc == 0 ? PX_COPY_PRESENT : PX_COPY_FAILED);
}

static void fetched(void *arg, const px_rq *side, const px_reply *r)
{
    copy *c = arg;
    px_pool *pool = c->pool;
    if (r->kind == PX_REPLY_FAILED || r->kind == PX_REPLY_ERROR) {
        end(c, PX_COPY_FAILED);
        return;
    }
    if (pool->io->stopping || px_warm_gen(pool, px_key_hash(c->key, c->len)) != c->gen) {
        end(c, PX_COPY_SKIPPED);
        return;
    }
    px_buf b = {0};
    uint8_t expect = 0;
    int rc = pool->codec->encode_fill(&b, c->key, c->len, r, (int64_t)time(NULL), &expect);
    if (rc > 0 && px_rq_fire(side, c->to, b.p, b.len, stored, c) == 0)
        c = NULL; /* stored() ends it */
    px_buf_free(&b);
    if (c != NULL)
        end(c, rc == 0 ? PX_COPY_NONE : PX_COPY_FAILED);
}

void px_copy(px_rq *rq, px_route *from, px_route *to, const char *key, size_t len, uint32_t gen,
             px_copy_done done)
{
    px_pool *pool = rq->pool;
    const px_codec *cd = rq->codec;
    if (pool->io->stopping) {
        done(pool, PX_COPY_SKIPPED);
        return;
    }
    copy *c = NULL;
    px_buf b = {0};
    uint8_t expect;
    bool fired = false;
    if (cd->encode_fetch != NULL && cd->encode_fill != NULL && cd->fill_stored != NULL &&
        (c = malloc(sizeof(*c) + len)) != NULL && cd->encode_fetch(&b, key, len, &expect) == 0) {
        *c = (copy){pool, to, done, gen, len};
        memcpy(c->key, key, len);
        fired = px_rq_fire(rq, from, b.p, b.len, fetched, c) == 0; /* fetched() ends it */
    }
    px_buf_free(&b);
    if (!fired) {
        free(c);
        done(pool, PX_COPY_FAILED);
    }
}

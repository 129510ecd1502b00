/* SPDX-License-Identifier: Apache-2.0 */
/*
 * near_write.c — what a write makes the near cache forget (near_write.h).
 */
#include "near_write.h"
#include "pool.h"

#include "hot/near.h"

/* The pool's generations when it has a near cache (hot_cache), else NULL: a pool without one
 * has no entry to end. */
static ch__near_gens *gens_of(const px_pool *pool)
{
    return pool->conf->hot_cache_ms > 0 ? pool->shared->near_gens : NULL;
}

bool px_near_writes(const px_rq *rq)
{
    return !rq->msg.cmd->retry || (rq->msg.flags & PX_MSG_TOUCH) != 0;
}

void px_near_forget_hashes(px_pool *pool, const uint64_t *kh, size_t n, bool all, bool sent)
{
    ch__near_gens *gens = gens_of(pool);
    if (gens == NULL)
        return;
    if (all) {
        ch__near_invalidate_all(gens);
        pool->m.near.script_flushes += sent;
        return;
    }
    for (size_t i = 0; i < n; i++)
        ch__near_invalidate(gens, kh[i]);
}

/* The keys rq writes that it does not name: their hashes into kh[0, *n); false when they
 * cannot be named. */
static bool unnamed(const px_rq *rq, uint64_t *kh, size_t *n)
{
    uint32_t at[PX_UNNAMED_MAX];
    *n = 0;
    if (rq->codec->writes_unnamed == NULL ||
        rq->codec->writes_unnamed(&rq->msg, at, n) == NULL)
        return true;
    if (*n == 0)
        return false;
    for (size_t i = 0; i < *n; i++) {
        const px_span *a = &rq->msg.args[at[i]];
        kh[i] = px_key_hash(rq->msg.raw + a->off, a->len);
    }
    return true;
}

bool px_near_write_hashes(px_rq *rq, px_buf *out)
{
    int rc = 0;
    for (size_t k = 0; k < rq->msg.nkeys; k++) {
        uint64_t h;
        if (px_rq_key_hash(rq, k, &h))
            rc |= px_buf_append(out, (const char *)&h, sizeof(h));
    }
    uint64_t kh[PX_UNNAMED_MAX];
    size_t n;
    if (!unnamed(rq, kh, &n))
        return false;
    rc |= px_buf_append(out, (const char *)kh, n * sizeof(kh[0]));
    return rc == 0;
}

void px_near_forget(px_rq *rq, size_t k, bool sent)
{
    ch__near_gens *gens = gens_of(rq->pool);
    if (gens == NULL)
        return;
    bool every = k == SIZE_MAX;
    for (size_t i = every ? 0 : k; i < (every ? rq->msg.nkeys : k + 1u); i++) {
        uint64_t h;
        if (px_rq_key_hash(rq, i, &h))
            ch__near_invalidate(gens, h);
    }
    if (!every)
        return;
    uint64_t kh[PX_UNNAMED_MAX];
    size_t n;
    bool named = unnamed(rq, kh, &n);
    px_near_forget_hashes(rq->pool, kh, n, !named, sent);
}

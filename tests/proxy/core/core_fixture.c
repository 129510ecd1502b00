/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core_fixture.c — the shared fixture of the proxy's in-process tests (core.h): a pool over a
 * real placement table and health, requests dispatched over fake_backend.c, what each finished
 * request left.
 */
#include "core.h"
#include "route_build.h"

#include "hot/near.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

px_buf done_log[64];
bool done_direct[64];
size_t ndone;
px_buf *next_out;
px_buf emitted;
int closes;

static void on_done(px_rq *rq)
{
    done_direct[ndone] = rq->direct;
    px_buf *b = &done_log[ndone++];
    b->len = 0;
    px_buf_append(b, rq->reply.p, rq->reply.len);
    px_rq_free(rq);
}

static int setup_proto(void **state, const char *extra, bool redis)
{
    fixture *fx = calloc(1, sizeof(*fx));
    snprintf(fx->path, sizeof(fx->path), "/tmp/chash-core-%ld.yml", (long)getpid());
    FILE *fp = fopen(fx->path, "w");
    fprintf(fp, "p:\n  listen: 127.0.0.1:1\n  redis: %s\n  hash: md5\n"
                "  distribution: ketama\n%s  servers:\n", redis ? "true" : "false", extra);
    for (int i = 0; i < NSERVERS; i++)
        fprintf(fp, "   - 127.0.0.1:%d:1 s%d\n", 7001 + i, i);
    fclose(fp);
    ch_config_error err;
    assert_int_equal(ch_config_load(fx->path, &fx->cfg, &err), 0);
    fx->cref = px_conf_new(fx->cfg);
    char why[256];
    assert_int_equal(px_shared_pool_init(&fx->sp, fx->cref, &fx->cfg->pools[0], why, sizeof(why)),
                     0);
    px_pool *pool = &fx->pool;
    pool->io = &fx->io;
    pool->shared = &fx->sp;
    pool->conf = fx->sp.conf;
    pool->members = fx->sp.members;
    pool->table = ch_membership_table(fx->sp.members);
    pool->health = fx->sp.health;
    pool->servers = fx->servers;
    pool->nservers = fx->sp.nservers;
    px_route_build(pool, pool, 1);
    px_pool_configure(pool);
    for (size_t i = 0; i < pool->nservers; i++)
        fx->servers[i] = (px_server){.uid = (uint32_t)(100 + i), .pool = pool, .index = i,
                                     .conf = fx->sp.servers[i]};
    fake_reset();
    ndone = 0;
    next_out = NULL;
    *state = fx;
    return 0;
}

int setup_conf(void **state, const char *extra)
{
    return setup_proto(state, extra, true);
}

int setup(void **state)
{
    return setup_conf(state, "");
}

int setup_mc(void **state)
{
    return setup_proto(state, "", false);
}

int setup_near(void **state)
{
    int rc = setup_conf(state, "  hot_cache: 1000\n");
    fixture *fx = *state;
    fx->sp.near_gens = ch__near_gens_new();
    assert_non_null(fx->sp.near_gens);
    return rc;
}

int setup_auth(void **state)
{
    return setup_conf(state, "  client_auth: sesame\n");
}

int teardown(void **state)
{
    fixture *fx = *state;
    fake_reset();
    px_route_drop(&fx->pool);
    free(fx->pool.args);
    free(fx->pool.keys);
    ch__near_gens_free(fx->sp.near_gens);
    px_shared_pool_clear(&fx->sp);
    px_conf_unref(fx->cref);
    unlink(fx->path);
    for (size_t i = 0; i < 64; i++)
        px_buf_free(&done_log[i]);
    free(fx);
    return 0;
}

void request(fixture *fx, px_local *ctx, const char *text)
{
    request_in(fx, ctx, text, NULL);
}

static void emit(void *arg, const char *p, size_t len)
{
    (void)arg;
    px_buf_append(&emitted, p, len);
}

static void hook_close(void *arg)
{
    (void)arg;
    closes++;
}

void request_in(fixture *fx, px_local *ctx, const char *text, px_session **ss)
{
    px_pool *pool = &fx->pool;
    static px_span args[16384], keys[16384];
    px_msg m = {.args = args, .args_cap = 16384, .keys = keys, .keys_cap = 16384};
    size_t consumed = 0, need = 0;
    char err[128];
    assert_int_equal(pool->codec->parse_request(&pool->limits, text, strlen(text), &m, &consumed,
                                                &need, err, sizeof(err)),
                     PX_PARSE_OK);
    assert_int_equal(consumed, strlen(text));
    m.dialect = ctx != NULL ? ctx->dialect : PX_DIALECT_RESP2; /* as client.c sets it */
    px_rq *rq = px_rq_new(pool, &m, 1);
    assert_non_null(rq);
    rq->owner = fx;
    rq->on_done = on_done;
    rq->out = next_out;
    px_local none = {0};
    px_session_hooks hooks = {.emit = emit, .close = hook_close, .arg = fx};
    px_dispatch(rq, ctx != NULL ? ctx : &none, ss, &hooks);
}

void resp(px_buf *b, size_t n, char *const *words)
{
    b->len = 0;
    px_buf_printf(b, "*%zu\r\n", n);
    for (size_t i = 0; i < n; i++)
        px_buf_printf(b, "$%zu\r\n%s\r\n", strlen(words[i]), words[i]);
    px_buf_append(b, "", 1); /* NUL, not counted */
    b->len--;
}

size_t owner(fixture *fx, const char *key)
{
    return ch_lookup(fx->pool.table, key, strlen(key));
}

fake_sent *sent_to(size_t i)
{
    for (size_t k = 0; k < fake_nlog; k++)
        if (fake_log[k].frag != NULL && fake_log[k].server->index == i)
            return &fake_log[k];
    return NULL;
}

size_t pending(void)
{
    size_t n = 0;
    for (size_t k = 0; k < fake_nlog; k++)
        n += fake_log[k].frag != NULL;
    return n;
}

void assert_done(size_t i, const char *want)
{
    px_buf_append(&done_log[i], "", 1);
    done_log[i].len--;
    assert_string_equal(done_log[i].p, want);
}

const char *last_done(void)
{
    px_buf *b = &done_log[ndone - 1];
    px_buf_append(b, "", 1);
    b->len--;
    return b->p;
}

/* The sends made on dedicated connection c, NUL-ended, concatenated. */
void sent_on(px_conn *c, px_buf *out)
{
    out->len = 0;
    for (size_t k = 0; k < fake_nlog; k++)
        if (fake_log[k].conn == c)
            px_buf_append(out, fake_log[k].bytes.p, fake_log[k].bytes.len);
    px_buf_append(out, "", 1);
}

fake_sent *pending_on(px_conn *c)
{
    for (size_t k = 0; k < fake_nlog; k++)
        if (fake_log[k].conn == c && fake_log[k].frag != NULL)
            return &fake_log[k];
    return NULL;
}

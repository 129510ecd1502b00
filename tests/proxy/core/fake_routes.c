/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fake_routes.c — fake routes, hand-built trees and the requests' clients for the in-process
 * tests of routes (fake_routes.h).
 */
#include "fake_routes.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

fake_event events[64];
size_t nevents;
unsigned state_checks;
fake_held holding[64];
size_t nheld;
char fired_log[4][64];
px_reply_kind fired_kind[4];
size_t nfired;
bool in_route;
size_t ndone;
char done_reply[512];

/* The clients of the requests fake_start started, by request number. */
#define FAKE_CLIENTS 64u
typedef struct fake_client {
    bool started, done;
    uint8_t ctrack; /* at done: bit 0 the request's ctrack_sent, bit 1 its ctrack_lost */
    px_buf reply;
} fake_client;
static fake_client clients[FAKE_CLIENTS];
static size_t nclients;

/* ---- fake routes ----------------------------------------------------------------------------- */

static uint64_t state_mark(const px_route *rt, px_slot s)
{
    const fake_conf *c = rt->conf;
    return 0xA000u + (uint64_t)c->id * 100u + s;
}

static void fired(void *arg, const px_rq *side, const px_reply *r)
{
    (void)arg;
    assert_true(side->side);
    assert_true(nfired < 4);
    size_t n = r->len < 63 ? r->len : 63;
    memcpy(fired_log[nfired], r->p, n);
    fired_log[nfired][n] = '\0';
    fired_kind[nfired++] = r->kind;
}

static void relay_start(px_route *rt, px_rq *rq, px_slot s)
{
    const fake_conf *c = rt->conf;
    *px_rq_state(rq, s, rt) = state_mark(rt, s);
    if (c->mode == FORK) {
        assert_int_equal(px_rq_fork(rq, s, rt, rq->pool, rt->child[0], FAKE_DEL_SIDE,
                                    strlen(FAKE_DEL_SIDE)),
                         0);
        return;
    }
    if (c->mode == FIRE) {
        assert_int_equal(
            px_rq_fire(rq, rt->child[0], FAKE_DEL_SIDE, strlen(FAKE_DEL_SIDE), fired, NULL), 0);
        px_rq_pass(rq, s, rt, rt->child[1]);
        return;
    }
    bool pass = c->mode == PASS || (c->mode == PASS_EVEN && s % 2 == 0);
    if (pass)
        px_rq_pass(rq, s, rt, rt->child[0]);
    else
        px_rq_call(rq, s, rt, rt->child[0]);
}

static void relay_reply(px_route *rt, px_rq *rq, const px_slot *slots, size_t n,
                        const px_reply *r)
{
    const fake_conf *c = rt->conf;
    assert_true(nevents < 64);
    fake_event *e = &events[nevents++];
    e->id = c->id;
    e->n = n;
    e->kind = r->kind;
    for (size_t i = 0; i < n && i < 8; i++) {
        e->slots[i] = slots[i];
        if (*px_rq_state(rq, slots[i], rt) == state_mark(rt, slots[i]))
            state_checks++;
    }
    if (c->mode == RETRY && r->kind == PX_REPLY_FAILED && rt->nchild > 1) {
        for (size_t i = 0; i < n; i++)
            px_rq_call(rq, slots[i], rt, rt->child[1]);
        return;
    }
    px_rq_return(rq, rt, slots, n, r);
}

static const px_route_ops relay_ops = {.name = "fake relay", .start = relay_start,
                                       .reply = relay_reply};

static px_reply value(const char *resp)
{
    return (px_reply){.p = resp, .len = strlen(resp), .kind = PX_REPLY_VALUE};
}

static void leaf_start(px_route *rt, px_rq *rq, px_slot s)
{
    fake_conf *c = (fake_conf *)(uintptr_t)rt->conf;
    if (c->mode == HELD_LEAF) {
        assert_true(nheld < 64);
        holding[nheld++] = (fake_held){rq, s, rt};
        return;
    }
    if (c->mode == SEND_LEAF) {
        px_rq_send(rq, s, rt, &c->server);
        return;
    }
    px_reply r = value("*1\r\n$4\r\nsync\r\n");
    in_route = true;
    px_rq_return(rq, rt, &s, 1, &r);
    in_route = false;
}

static void leaf_reply(px_route *rt, px_rq *rq, const px_slot *slots, size_t n,
                       const px_reply *r)
{
    const fake_conf *c = rt->conf;
    if (c->mode != SEND_LEAF)
        fail_msg("a leaf that sent nothing was answered");
    px_rq_return(rq, rt, slots, n, r); /* a backend's answer: up as it is */
}

static px_where leaf_where(const px_route *rt, const px_rq *rq, const char *key, size_t len)
{
    (void)rq;
    const fake_conf *c = rt->conf;
    for (size_t i = 0; i < c->nat; i++)
        if (strlen(c->at[i].key) == len && memcmp(c->at[i].key, key, len) == 0)
            return c->at[i].where;
    return c->where;
}

static const px_route_ops leaf_ops = {.name = "fake leaf", .start = leaf_start,
                                      .reply = leaf_reply, .where = leaf_where};

void fake_answer(size_t i, const char *resp)
{
    fake_held h = holding[i];
    px_reply r = value(resp);
    px_rq_return(h.rq, h.leaf, &h.slot, 1, &r);
}

void fake_answer_failed(size_t i, const char *reason)
{
    fake_held h = holding[i];
    px_reply r = {.p = reason, .len = strlen(reason), .kind = PX_REPLY_FAILED};
    px_rq_return(h.rq, h.leaf, &h.slot, 1, &r);
}

/* ---- trees ----------------------------------------------------------------------------------- */

fake_tree *fake_tree_new(void)
{
    fake_tree *ft = calloc(1, sizeof(*ft));
    assert_non_null(ft);
    ft->t.refs = 1;
    return ft;
}

px_route *fake_node(fake_tree *ft, px_route *parent, const px_route_ops *ops, const void *conf)
{
    px_route_tree *t = &ft->t;
    assert_true(t->n < PX_POOL_ROUTES);
    px_route *rt = &t->nodes[t->n++];
    rt->ops = ops;
    rt->conf = conf;
    if (parent != NULL) {
        assert_true(parent->nchild < PX_ROUTE_CHILDREN);
        rt->parent = parent;
        rt->level = parent->level + 1;
        parent->child[parent->nchild++] = rt;
    }
    return rt;
}

px_route *fake_add(fake_tree *ft, px_route *parent, fake_mode mode)
{
    unsigned i = ft->t.n;
    fake_conf *c = &ft->confs[i];
    *c = (fake_conf){.mode = mode, .id = (int)i, .where = {0, SIZE_MAX, false}};
    c->server.uid = 200u + i;
    c->server.index = SIZE_MAX;
    return fake_node(ft, parent, mode >= SYNC_LEAF ? &leaf_ops : &relay_ops, c);
}

void fake_use(px_pool *pool, fake_tree *ft)
{
    for (unsigned i = 0; i < ft->t.n; i++) {
        px_route *rt = &ft->t.nodes[i];
        if (rt->ops->build != NULL)
            assert_int_equal(rt->ops->build(rt, pool, NULL), 0);
    }
    px_route_tree_release(pool->tree);
    pool->tree = &ft->t;
    pool->route = &ft->t.nodes[0];
}

void fake_place_key(px_route *leaf, const char *key, uint32_t server, size_t index, bool up)
{
    assert_ptr_equal(leaf->ops, &leaf_ops);
    fake_conf *c = (fake_conf *)(uintptr_t)leaf->conf;
    px_where w = {server, index, up};
    if (key == NULL) {
        c->where = w;
        return;
    }
    for (size_t i = 0; i < c->nat; i++) {
        if (strcmp(c->at[i].key, key) == 0) {
            c->at[i].where = w;
            return;
        }
    }
    assert_true(c->nat < FAKE_PLACES);
    c->at[c->nat++] = (fake_place){key, w};
}

px_server *fake_server_of(px_route *leaf)
{
    assert_ptr_equal(leaf->ops, &leaf_ops);
    return &((fake_conf *)(uintptr_t)leaf->conf)->server;
}

/* ---- requests -------------------------------------------------------------------------------- */

static void on_done(px_rq *rq)
{
    assert_false(in_route);
    fake_client *c = rq->owner;
    assert_false(c->done); /* told once */
    c->done = true;
    c->ctrack = (uint8_t)(rq->ctrack_sent | rq->ctrack_lost << 1);
    ndone++;
    c->reply.len = 0;
    assert_int_equal(px_buf_append(&c->reply, rq->reply.p, rq->reply.len), 0);
    assert_int_equal(px_buf_append(&c->reply, "", 1), 0);
    c->reply.len--;
    size_t len = rq->reply.len < sizeof(done_reply) - 1 ? rq->reply.len : sizeof(done_reply) - 1;
    memcpy(done_reply, rq->reply.p, len);
    done_reply[len] = '\0';
    px_rq_free(rq);
}

size_t fake_start(px_pool *pool, const char *text, uint64_t cid, uint8_t dialect)
{
    static px_span args[64], keys[64];
    px_msg m = {.args = args, .args_cap = 64, .keys = keys, .keys_cap = 64};
    size_t consumed = 0, need = 0;
    char err[128];
    assert_int_equal(pool->codec->parse_request(&pool->limits, text, strlen(text), &m, &consumed,
                                                &need, err, sizeof(err)),
                     PX_PARSE_OK);
    assert_int_equal(consumed, strlen(text));
    assert_true(m.reject[0] == '\0');
    m.dialect = dialect; /* as client.c sets it */
    assert_true(nclients < FAKE_CLIENTS);
    size_t i = nclients++;
    clients[i].started = true;
    clients[i].done = false;
    px_rq *rq = px_rq_new(pool, &m, cid);
    assert_non_null(rq);
    rq->owner = &clients[i];
    rq->on_done = on_done;
    rq->ctrack = fake_ctrack;
    px_rq_start(rq, pool->route);
    return i;
}

bool fake_ctrack;

uint8_t fake_done_ctrack(size_t i)
{
    assert_true(i < nclients && clients[i].done);
    return clients[i].ctrack;
}

bool fake_done(size_t i)
{
    assert_true(i < nclients);
    return clients[i].done;
}

const char *fake_done_reply(size_t i)
{
    if (!fake_done(i))
        return "(not done)";
    return clients[i].reply.p != NULL ? clients[i].reply.p : "";
}

/* ---- the fake servers ------------------------------------------------------------------------ */

size_t fake_sends(px_route *leaf)
{
    px_server *s = fake_server_of(leaf);
    size_t n = 0;
    for (size_t k = 0; k < fake_nlog; k++)
        n += fake_log[k].server == s;
    return n;
}

fake_sent *fake_sent_to(px_route *leaf, size_t n)
{
    px_server *s = fake_server_of(leaf);
    for (size_t k = 0, seen = 0; k < fake_nlog; k++)
        if (fake_log[k].server == s && seen++ == n)
            return &fake_log[k];
    fail_msg("leaf %d got fewer than %zu requests", ((const fake_conf *)leaf->conf)->id, n + 1);
    return NULL;
}

size_t fake_unanswered(void)
{
    size_t n = 0;
    for (size_t k = 0; k < fake_nlog; k++)
        n += fake_log[k].frag != NULL;
    return n;
}

bool fake_bytes_are(const fake_sent *e, const char *want)
{
    size_t n = strlen(want);
    if (e->bytes.len == n && memcmp(e->bytes.p, want, n) == 0)
        return true;
    print_message("sent   %.*s\nwanted %s\n", (int)e->bytes.len, e->bytes.p, want);
    return false;
}

void fake_routes_reset(void)
{
    nevents = nheld = ndone = nfired = 0;
    state_checks = 0;
    in_route = false;
    done_reply[0] = '\0';
    for (size_t i = 0; i < nclients; i++)
        clients[i].started = clients[i].done = false;
    nclients = 0;
}

void fake_routes_free(void)
{
    fake_routes_reset();
    for (size_t i = 0; i < FAKE_CLIENTS; i++)
        px_buf_free(&clients[i].reply);
}

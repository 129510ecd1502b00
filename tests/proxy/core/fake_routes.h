/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fake_routes.h — fake routes for in-process tests of the tree of routes (test_routes.c) and of
 * each route's policy over fake children (test_policies.c), as mcrouter tests its routes over
 * TestHandles: relays that call or pass a child, and leaves that answer at once, hold a slot
 * until the test answers it, or send it to a fake server of their own (fake_backend.c), and
 * that tell where they place a key (px_route_ops.where) from a table the test sets. Trees are
 * built by hand, real routes and fakes mixed, as route_build.c wires them. The requests the
 * tests start are parsed by the pool's real codec; what each one's client finally got is kept.
 * Not thread-safe: one test at a time (cmocka runs them in turn).
 */
#ifndef CHASH_TEST_FAKE_ROUTES_H
#define CHASH_TEST_FAKE_ROUTES_H

#include "backend.h"
#include "fake_backend.h"
#include "pool.h"
#include "request.h"
#include "route.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Relays: CALL, PASS, PASS_EVEN (pass even slots, call odd ones), RETRY (call child[0]; on a
 * failure, child[1]), FORK (a side request FAKE_DEL_SIDE on child[0], its answer the slot's),
 * FIRE (FAKE_DEL_SIDE fired on child[0], detached, its answer to fake_fired; the slot passed
 * to child[1]). Leaves: SYNC_LEAF answers inside start, HELD_LEAF holds the slot for the test
 * (fake_answer), SEND_LEAF sends it to its own fake server (fake_log, fake_reply) and returns
 * the server's answer up as it is, a failure included (no failover of its own). */
typedef enum {
    CALL, PASS, PASS_EVEN, RETRY, FORK, FIRE, /* relays */
    SYNC_LEAF, HELD_LEAF, SEND_LEAF,          /* leaves: from SYNC_LEAF on */
} fake_mode;

#define FAKE_DEL_SIDE "*2\r\n$3\r\nDEL\r\n$4\r\nside\r\n"
#define FAKE_PLACES 8u

/* Where a fake leaf places a key (its routing bytes). */
typedef struct fake_place {
    const char *key;
    px_where where;
} fake_place;

/* A fake route's settings (its px_route.conf). */
typedef struct fake_conf {
    fake_mode mode;
    int id;                    /* its node's index in its tree */
    px_server server;          /* SEND_LEAF: the fake server it sends to (uid 200 + id) */
    px_where where;            /* where() of a key not in at[] (nowhere unless set) */
    fake_place at[FAKE_PLACES];
    size_t nat;
} fake_conf;

/* A tree and its fake routes' settings, freed together by px_route_tree_release (t first). */
typedef struct fake_tree {
    px_route_tree t;
    fake_conf confs[PX_POOL_ROUTES];
} fake_tree;

/* ---- building trees ------------------------------------------------------------------------- */

/* An empty tree, one reference (the pool's once fake_use gives it one). */
fake_tree *fake_tree_new(void);
/* A node of ft under parent (NULL: the root) with a real route's ops and conf. */
px_route *fake_node(fake_tree *ft, px_route *parent, const px_route_ops *ops, const void *conf);
/* A fake route of this mode under parent (NULL: the root). */
px_route *fake_add(fake_tree *ft, px_route *parent, fake_mode mode);
/* Builds each route's own state for pool, as route_build.c does (ops->build, nothing
 * replaced), then makes ft pool's tree (the previous one released). */
void fake_use(px_pool *pool, fake_tree *ft);
/* The fake leaf's where() answer for key, or for every key not placed (key NULL). */
void fake_place_key(px_route *leaf, const char *key, uint32_t server, size_t index, bool up);
/* The fake server a SEND_LEAF sends to. */
px_server *fake_server_of(px_route *leaf);

/* ---- what the fake routes saw ---------------------------------------------------------------- */

/* Each reply() a relay received: which relay, which slots. */
typedef struct fake_event {
    int id;
    size_t n;
    px_slot slots[8];
    px_reply_kind kind;
} fake_event;
extern fake_event events[64];
extern size_t nevents;
extern unsigned state_checks; /* relays that found their own state word intact */

/* Slots a held leaf is holding, in the order they arrived. */
typedef struct fake_held {
    px_rq *rq;
    px_slot slot;
    px_route *leaf;
} fake_held;
extern fake_held holding[64];
extern size_t nheld;
/* Answers held slot i with resp (kind VALUE), or as failed for reason. */
void fake_answer(size_t i, const char *resp);
void fake_answer_failed(size_t i, const char *reason);

/* What fired side requests (FIRE) answered, in order. */
extern char fired_log[4][64];
extern px_reply_kind fired_kind[4];
extern size_t nfired;

/* A fake route's start is running (a request's owner must not be told then). */
extern bool in_route;

/* ---- requests and their clients ------------------------------------------------------------- */

/* Requests whose client was told they are done, and the last one's reply. */
extern size_t ndone;
extern char done_reply[512];

/* Parses text with pool's codec (it must be one whole request), makes it a request of client
 * cid in dialect (PX_DIALECT_*) and starts it on pool's tree, as dispatch does. Returns the
 * request's number (0 for the first since fake_routes_reset). */
size_t fake_start(px_pool *pool, const char *text, uint64_t cid, uint8_t dialect);
/* The requests fake_start makes from now on are a tracking client's reads (px_rq.ctrack, as
 * client.c marks them); fake_done_ctrack: request i's ctrack_sent (bit 0) and ctrack_lost
 * (bit 1) when it was done. */
extern bool fake_ctrack;
uint8_t fake_done_ctrack(size_t i);
/* Whether request i's client was told it is done; the reply it got, NUL-ended ("(not done)"
 * before: a test comparing it fails instead of crashing). */
bool fake_done(size_t i);
const char *fake_done_reply(size_t i);

/* ---- the fake servers' side (fake_backend.c's log) ------------------------------------------ */

/* How many backend requests leaf's server got so far; the n-th of them (0: the first). */
size_t fake_sends(px_route *leaf);
fake_sent *fake_sent_to(px_route *leaf, size_t n);
/* How many backend requests are not answered yet, anywhere. */
size_t fake_unanswered(void);
/* Whether e's bytes are want's, exactly. */
bool fake_bytes_are(const fake_sent *e, const char *want);

/* Forgets everything above (call before a test); fake_routes_free also frees what it kept. */
void fake_routes_reset(void);
void fake_routes_free(void);

#endif /* CHASH_TEST_FAKE_ROUTES_H */

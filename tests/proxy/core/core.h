/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core.h — what the in-process tests of the proxy's logic share (core_fixture.c): a pool of
 * NSERVERS servers over a real placement table and health, with fake_backend.c in place of
 * backend.c; requests dispatched as a client's would be; what each finished request left.
 * The tests themselves are in core_<subject>.c, listed in test_core.c's main.
 *
 * Expected owners come from the library (ch_lookup, ch_route), expected replies from the
 * test's own model of the command: a route, merge or failover bug fails here without any
 * timing. Not thread-safe: one test at a time (cmocka runs them in turn).
 */
#ifndef CHASH_TEST_PROXY_CORE_H
#define CHASH_TEST_PROXY_CORE_H

#include "dispatch.h"
#include "fake_backend.h"
#include "route_pool.h"

#include <stdbool.h>
#include <stddef.h>

#define NSERVERS 4

typedef struct fixture {
    char path[64]; /* the pool's config file (removed by teardown) */
    ch_config *cfg;
    px_conf *cref;
    px_shared_pool sp;
    px_io io;
    px_pool pool;
    px_server servers[NSERVERS];
} fixture;

/* ---- what finished requests left ------------------------------------------------------------- */

/* Each finished request's reply bytes, in completion order (ndone of them). */
extern px_buf done_log[64];
extern bool done_direct[64]; /* the reply went to the request's output (rq->out) instead */
extern size_t ndone;
/* The output the next request is given as its client's queue head would be (NULL: none). */
extern px_buf *next_out;
/* What the session emitted (pub/sub messages), and how many times it closed the client. */
extern px_buf emitted;
extern int closes;

/* ---- fixtures (cmocka setup and teardown) ---------------------------------------------------- */

int setup(void **state);      /* a Redis pool "p": md5, ketama, servers s0..s3 */
int setup_mc(void **state);   /* the same as a memcached pool */
int setup_auth(void **state); /* the Redis pool with client_auth: sesame */
int setup_conf(void **state, const char *extra); /* the Redis pool with extra settings */
int setup_replicas(void **state); /* the Redis pool with replicas: 2 (core_replica.c) */
int setup_near(void **state); /* the Redis pool with hot_cache: 1000 and its generations */
int teardown(void **state);

/* ---- driving requests ------------------------------------------------------------------------ */

/* Parses the request text (RESP or memcached, as the pool speaks) and dispatches it as client
 * 1 would, with ctx (NULL: an empty one) ... */
void request(fixture *fx, px_local *ctx, const char *text);
/* ... within session *ss (NULL: none). */
void request_in(fixture *fx, px_local *ctx, const char *text, px_session **ss);
/* The RESP array of bulk strings for words, NUL-ended (the NUL not counted). */
void resp(px_buf *b, size_t n, char *const *words);
/* The index of key's owner in the fixture's placement. */
size_t owner(fixture *fx, const char *key);
/* The pending fragment sent to server i (NULL: none). */
fake_sent *sent_to(size_t i);
/* How many sent fragments are not answered yet. */
size_t pending(void);
/* Asserts that finished request i's reply is want. */
void assert_done(size_t i, const char *want);
/* The last reply, NUL-ended. */
const char *last_done(void);
/* The sends made on dedicated connection c, NUL-ended, concatenated into out. */
void sent_on(px_conn *c, px_buf *out);
/* The first fragment sent on dedicated connection c not answered yet (NULL: none). */
fake_sent *pending_on(px_conn *c);

/* ---- the tests, by file ---------------------------------------------------------------------- */

/* core_dispatch.c */
void test_single_key(void **state);
void test_reply_to_output(void **state);
void test_auth_gate(void **state);
void test_rejects(void **state);
void test_one_server_and_hello(void **state);
/* core_merge.c */
void test_mget_split_merge(void **state);
void test_mget_slices(void **state);
void test_sum_and_all_ok(void **state);
/* core_failover.c */
void test_failover_reroute(void **state);
void test_split_failover(void **state);
void test_synchronous_failures(void **state);
void test_ejected_owner(void **state);
void test_failover_after_membership_change(void **state);
void test_fail_open(void **state);
int setup_readmit_ramp(void **state); /* the Redis pool with readmit_ramp: 10000 */
void test_readmit_ramp(void **state);
/* core_codecs.c */
void test_mc_multiget(void **state);
void test_mc_noreply_quiet(void **state);
void test_mc_base64_routing(void **state);
void test_mc_local(void **state);
void test_cleanup_encodings(void **state);
void test_walk_redis(void **state);
void test_track_redis(void **state);
void test_journal_spill(void **state);
void test_readmit_only_clean(void **state);
/* core_warm.c */
void test_warm_read_and_fill(void **state);
void test_warm_write_moves(void **state);
void test_ramp(void **state);
void test_mc_warm(void **state);
void test_warm_resp3(void **state);
/* core_stage.c */
void test_stage_write_invalidates(void **state);
void test_stage_split_write(void **state);
void test_stage_swapped_mid_write(void **state);
void test_stage_refuses_unnamed(void **state);
void test_stage_refuses_transactions(void **state);
void test_gutter_redis(void **state);
/* core_replica.c */
void test_replica_write(void **state);
void test_replica_split_del(void **state);
void test_replica_read_repair(void **state);
void test_replica_read_again(void **state);
void test_gutter_mc(void **state);
/* core_sessions.c */
void test_scan(void **state);
void test_script_every_server(void **state);
void test_transaction(void **state);
void test_transaction_near(void **state);
void test_pubsub(void **state);
/* core_resp3.c */
void test_resp3_hello(void **state);
void test_resp3_auth(void **state);
void test_resp3_forwarded(void **state);
void test_resp3_mget(void **state);
void test_resp3_client(void **state);
void test_resp3_reports(void **state);
void test_resp3_pubsub(void **state);
void test_resp3_handshake(void **state);
void test_resp3_misses(void **state);
/* core_ctrack.c */
void test_ctrack_table(void **state);
void test_ctrack_bcast(void **state);
void test_redir(void **state);

#endif /* CHASH_TEST_PROXY_CORE_H */

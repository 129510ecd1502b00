/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_core.c — the proxy's logic in process, without sockets or sleeps: dispatch, the request
 * layer and the pool route over a real placement table and health, with fake_backend.c in place
 * of backend.c. One executable (proxy_core) runs every test, in this order; the tests are in
 * core_<subject>.c and share core_fixture.c (core.h):
 *
 *   core_dispatch.c   where a request goes, the proxy's own answers and refusals
 *   core_merge.c      split requests and their merged replies
 *   core_failover.c   failures, failover, ejection and fail-open health
 *   core_codecs.c     the memcached codec, both codecs' clean-up requests, Redis's tracking
 *   core_warm.c       a membership change's window: warm-up and the ramp
 *   core_sessions.c   SCAN, SCRIPT, transactions and pub/sub
 */
#include "core.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_single_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reply_to_output, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mget_split_merge, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mget_slices, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sum_and_all_ok, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failover_reroute, setup, teardown),
        cmocka_unit_test_setup_teardown(test_split_failover, setup, teardown),
        cmocka_unit_test_setup_teardown(test_synchronous_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ejected_owner, setup, teardown),
        cmocka_unit_test_setup_teardown(test_auth_gate, setup_auth, teardown),
        cmocka_unit_test_setup_teardown(test_rejects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failover_after_membership_change, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mc_multiget, setup_mc, teardown),
        cmocka_unit_test_setup_teardown(test_mc_noreply_quiet, setup_mc, teardown),
        cmocka_unit_test_setup_teardown(test_mc_base64_routing, setup_mc, teardown),
        cmocka_unit_test_setup_teardown(test_mc_local, setup_mc, teardown),
        cmocka_unit_test(test_cleanup_encodings),
        cmocka_unit_test(test_walk_redis),
        cmocka_unit_test(test_track_redis),
        cmocka_unit_test(test_journal_spill),
        cmocka_unit_test(test_readmit_only_clean),
        cmocka_unit_test_setup_teardown(test_fail_open, setup, teardown),
        cmocka_unit_test_setup_teardown(test_readmit_ramp, setup_readmit_ramp, teardown),
        cmocka_unit_test_setup_teardown(test_one_server_and_hello, setup, teardown),
        cmocka_unit_test_setup_teardown(test_warm_read_and_fill, setup, teardown),
        cmocka_unit_test_setup_teardown(test_warm_write_moves, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ramp, setup, teardown),
        cmocka_unit_test_setup_teardown(test_warm_resp3, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mc_warm, setup_mc, teardown),
        cmocka_unit_test_setup_teardown(test_stage_write_invalidates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stage_split_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stage_swapped_mid_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stage_refuses_unnamed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stage_refuses_transactions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gutter_redis, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gutter_mc, setup_mc, teardown),
        cmocka_unit_test_setup_teardown(test_replica_write, setup_replicas, teardown),
        cmocka_unit_test_setup_teardown(test_replica_split_del, setup_replicas, teardown),
        cmocka_unit_test_setup_teardown(test_replica_read_repair, setup_replicas, teardown),
        cmocka_unit_test_setup_teardown(test_replica_read_again, setup_replicas, teardown),
        cmocka_unit_test_setup_teardown(test_scan, setup, teardown),
        cmocka_unit_test_setup_teardown(test_script_every_server, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transaction, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transaction_near, setup_near, teardown),
        cmocka_unit_test_setup_teardown(test_pubsub, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resp3_hello, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resp3_auth, setup_auth, teardown),
        cmocka_unit_test_setup_teardown(test_resp3_forwarded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resp3_mget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resp3_client, setup, teardown),
        cmocka_unit_test(test_ctrack_table),
        cmocka_unit_test(test_ctrack_bcast),
        cmocka_unit_test(test_redir),
        cmocka_unit_test_setup_teardown(test_resp3_reports, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resp3_pubsub, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resp3_handshake, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resp3_misses, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

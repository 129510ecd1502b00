/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_fence.c — the fence (proxy/fence.h) in process: every transition of its state machine,
 * with the time and the lease's deadline chosen by the test. No etcd, no loop, no clock.
 *
 * The states, as px_fence_decide names them: UNREAD (never current), current (for good, or
 * bounded while a change is held), LEASE (the lease is not alive), RESYNC (alive, but the
 * record or the read of K is not under it), WATCH (a change is held and the watch is down).
 * One test per way in and out of each; then a seeded walk of 20,000 random events checks every
 * decision against a model of the guarantee written at px_fence (fence.h) that keeps its own
 * books: which lease the record's write was sent under, whether a read of K began after the
 * record was in etcd under the lease in force, what happened since.
 */
#include "fence.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdint.h>
#include <string.h>

#define MS 1000000ull
#define TTL (3000 * MS) /* what a grant or keepalive proves, from "now" */

static px_fence f;
static uint64_t now, until; /* the test's clock and the lease's deadline */
static bool watching;
static px_fence_decision d;

static int setup(void **state)
{
    (void)state;
    memset(&f, 0, sizeof(f));
    memset(&d, 0, sizeof(d));
    now = 1000 * MS;
    until = 0;
    watching = true;
    return 0;
}

static void decide(void)
{
    px_fence_decide(&f, now, until, watching, &d);
}

/* The start's path to current, step by step: a lease, the record under it, then K read. */
static void register_and_read(void)
{
    bool again;
    px_fence_record_sent(&f);
    assert_true(px_fence_record_written(&f, &again));
    assert_true(again); /* not read under this lease yet */
    px_fence_read_sent(&f, now);
    assert_false(px_fence_read_done(&f));
}

static void become_current(int64_t lease)
{
    px_fence_granted(&f, lease);
    until = now + TTL;
    register_and_read();
    decide();
    assert_true(d.current);
}

static void test_first_decision_is_unread(void **state)
{
    (void)state;
    decide();
    assert_false(d.current);
    assert_int_equal(d.why, PX_FENCE_UNREAD);
    assert_int_equal(d.serve_until_ns, 0);
    assert_true(d.changed);
    assert_true(d.first);
    assert_false(d.lease_alive);
    assert_int_equal(f.fences, 0); /* the first decision is not a fence */
    decide();
    assert_false(d.changed); /* the same outcome again: nothing to tell */
    assert_false(d.first);
}

static void test_unread_to_current(void **state)
{
    (void)state;
    decide(); /* UNREAD */
    px_fence_granted(&f, 7);
    until = now + TTL;
    decide();
    assert_false(d.current);
    assert_int_equal(d.why, PX_FENCE_UNREAD); /* never current: UNREAD whatever is missing */
    assert_true(d.lease_alive);
    now += 40 * MS;
    register_and_read();
    decide();
    assert_true(d.current);
    assert_true(d.changed);
    assert_false(d.first);
    assert_int_equal(d.fenced_ns, 40 * MS); /* fenced since the first decision */
    assert_int_equal(d.serve_until_ns, UINT64_MAX);
    assert_int_equal(f.fences, 0);
}

static void test_current_at_first_decision(void **state)
{
    (void)state;
    become_current(7); /* what the start proved */
    assert_true(d.first);
    assert_int_equal(d.fenced_ns, 0);
    assert_int_equal(d.why, PX_FENCE_HELD); /* the reason a bounded decision would run out */
}

static void test_read_before_the_record_is_read_again(void **state)
{
    (void)state;
    px_fence_granted(&f, 7);
    until = now + TTL;
    px_fence_read_sent(&f, now); /* begun before the record is in etcd */
    bool again;
    px_fence_record_sent(&f);
    assert_true(px_fence_record_written(&f, &again));
    assert_true(again);
    assert_true(px_fence_read_done(&f)); /* a commit may have gone between: read again */
    decide();
    assert_false(d.current);
    px_fence_read_sent(&f, now);
    assert_false(px_fence_read_done(&f));
    decide();
    assert_true(d.current);
}

static void test_read_without_a_lease_is_not_repeated(void **state)
{
    (void)state;
    px_fence_read_sent(&f, now); /* no lease: the read only serves the document */
    assert_false(px_fence_read_done(&f));
    decide();
    assert_false(d.current);
    assert_int_equal(f.synced, 0);
}

static void test_record_written_twice_or_late(void **state)
{
    (void)state;
    become_current(7);
    bool again;
    px_fence_record_sent(&f); /* a field changed: the record is written again */
    assert_false(px_fence_record_written(&f, &again)); /* already registered: no news */
    assert_false(again);
    px_fence_record_sent(&f);          /* a write under lease 7 in flight ... */
    px_fence_lease_lost(&f);           /* ... the lease goes ... */
    px_fence_granted(&f, 8);           /* ... a new one is granted ... */
    assert_false(px_fence_record_written(&f, &again)); /* ... and the old write proves nothing */
    assert_int_equal(f.registered, 0);
    decide();
    assert_false(d.current);
    assert_int_equal(d.why, PX_FENCE_RESYNC);
}

static void test_lapse_not_passed_changes_nothing(void **state)
{
    (void)state;
    become_current(7);
    until = now + TTL;          /* the keeper moved the deadline before the timer ran */
    px_fence_lapsed(&f, now, until);
    decide();
    assert_true(d.current);
    assert_false(d.changed);
}

static void test_current_lease_resync_current(void **state)
{
    (void)state;
    become_current(7);
    now = until; /* the deadline passes (etcd unreachable, or the process was stopped) */
    decide();
    assert_false(d.current);
    assert_int_equal(d.why, PX_FENCE_LEASE);
    assert_false(d.lease_alive);
    assert_true(d.changed);
    assert_int_equal(f.fences, 1);
    px_fence_lapsed(&f, now, until); /* the timer at the deadline */
    assert_int_equal(f.synced, 0);
    now += 500 * MS;
    until = now + TTL; /* a keepalive answered again */
    assert_true(px_fence_kept(&f));
    decide();
    assert_false(d.current);
    assert_int_equal(d.why, PX_FENCE_RESYNC); /* alive again, but K must be read first */
    assert_false(d.changed);
    px_fence_read_sent(&f, now);
    assert_false(px_fence_read_done(&f));
    assert_false(px_fence_kept(&f)); /* read: nothing more to do */
    now += 10 * MS;
    decide();
    assert_true(d.current);
    assert_int_equal(d.fenced_ns, 510 * MS);
    assert_int_equal(f.fences, 1);
}

static void test_lease_lost_and_granted_again(void **state)
{
    (void)state;
    become_current(7);
    px_fence_lease_lost(&f); /* etcd says it expired */
    decide();
    assert_false(d.current);
    assert_int_equal(d.why, PX_FENCE_LEASE);
    assert_false(d.lease_alive);
    assert_int_equal(f.fences, 1);
    assert_false(px_fence_kept(&f)); /* no lease: nothing to read under */
    px_fence_granted(&f, 9);
    until = now + TTL;
    decide();
    assert_int_equal(d.why, PX_FENCE_RESYNC);
    register_and_read(); /* under the new lease, in order */
    decide();
    assert_true(d.current);
    assert_int_equal(f.registered, 9);
    assert_int_equal(f.synced, 9);
}

static void test_held_is_bounded_and_beats(void **state)
{
    (void)state;
    become_current(7);
    px_fence_hold(&f, now);
    decide();
    assert_true(d.current);
    assert_false(d.changed);
    assert_int_equal(d.serve_until_ns, now + PX_FENCE_HELD_ALIVE_NS);
    uint64_t last = now;
    now += PX_FENCE_HELD_TICK_MS * MS; /* a turn within the gap */
    assert_false(px_fence_beat(&f, now, last));
    decide();
    assert_int_equal(d.serve_until_ns, now + PX_FENCE_HELD_ALIVE_NS);
    last = now;
    now += PX_FENCE_HELD_GAP_NS + 1; /* the process was stopped */
    assert_true(px_fence_beat(&f, now, last)); /* K must be read again ... */
    decide();
    /* ... and the bound runs out */
    assert_int_equal(d.serve_until_ns, last + PX_FENCE_HELD_ALIVE_NS);
    assert_true(d.serve_until_ns < now + PX_FENCE_HELD_ALIVE_NS);
    uint64_t sent = now;
    px_fence_read_sent(&f, sent);
    now += 30 * MS;
    assert_false(px_fence_read_done(&f)); /* K as of `sent`: a commit found is swapped in */
    decide();
    assert_int_equal(d.serve_until_ns, sent + PX_FENCE_HELD_ALIVE_NS);
    px_fence_release(&f); /* committed, withdrawn or dropped */
    decide();
    assert_int_equal(d.serve_until_ns, UINT64_MAX);
    assert_false(px_fence_beat(&f, now + 10 * PX_FENCE_HELD_GAP_NS, now)); /* no beat needed */
}

static void test_held_with_the_watch_down(void **state)
{
    (void)state;
    become_current(7);
    px_fence_hold(&f, now);
    watching = false; /* the watch that brings the commit is lost */
    decide();
    assert_false(d.current);
    assert_int_equal(d.why, PX_FENCE_WATCH);
    assert_int_equal(d.serve_until_ns, 0);
    assert_int_equal(f.fences, 1);
    watching = true;
    decide();
    assert_true(d.current);
    assert_int_equal(d.serve_until_ns, f.confirmed_ns + PX_FENCE_HELD_ALIVE_NS);
    px_fence_release(&f);
    watching = false; /* nothing held: a watch down alone does not fence */
    decide();
    assert_true(d.current);
}

/* ---- the model walk ------------------------------------------------------------------------ */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static unsigned pick(unsigned n)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17; /* xorshift64 */
    return (unsigned)(rng % n);
}

/* The model's own books, in terms of what happened, not of fence.c's fields. */
typedef struct model {
    int64_t lease;            /* in force (0: none) */
    bool write_busy;          /* a record write in flight, sent under write_lease */
    int64_t write_lease;
    bool registered;          /* a write sent under `lease` succeeded since it was granted */
    bool read_busy;           /* a read in flight, begun after `registered` under read_lease */
    bool read_after_reg;
    int64_t read_lease;
    uint64_t read_sent;
    bool synced;              /* such a read came back, and no lapse since */
    bool held;
    uint64_t confirmed;
    bool was_current, published, current;
    uint64_t fences;
} model;

static void test_model_walk(void **state)
{
    (void)state;
    model m = {0};
    int64_t next_lease = 1;
    uint64_t last_beat = now;
    for (int step = 0; step < 20000; step++) {
        bool again;
        switch (pick(12)) {
        case 0: /* a grant (only without a lease, as fleet.c asks for one) */
            if (m.lease != 0)
                break;
            m.lease = next_lease++;
            m.registered = m.synced = false;
            until = now + TTL;
            px_fence_granted(&f, m.lease);
            break;
        case 1: /* the lease lost */
            m.lease = 0;
            m.registered = m.synced = false;
            px_fence_lease_lost(&f);
            break;
        case 2: /* a record write sent */
            if (m.lease == 0 || m.write_busy)
                break;
            m.write_busy = true;
            m.write_lease = m.lease;
            px_fence_record_sent(&f);
            break;
        case 3: { /* ... and done */
            if (!m.write_busy)
                break;
            m.write_busy = false;
            bool news = m.write_lease == m.lease && m.lease != 0 && !m.registered;
            if (news)
                m.registered = true;
            assert_int_equal(px_fence_record_written(&f, &again), news);
            assert_int_equal(again, news && !m.synced);
            break;
        }
        case 4: /* a read of K begun */
            if (m.read_busy)
                break;
            m.read_busy = true;
            m.read_after_reg = m.registered;
            m.read_lease = m.lease;
            m.read_sent = now;
            px_fence_read_sent(&f, now);
            break;
        case 5: { /* ... and done */
            if (!m.read_busy)
                break;
            m.read_busy = false;
            bool proves = m.read_after_reg && m.read_lease == m.lease && m.registered;
            if (proves)
                m.synced = true;
            if (m.held)
                m.confirmed = m.read_sent;
            assert_int_equal(px_fence_read_done(&f), !proves && m.lease != 0 && m.registered);
            break;
        }
        case 6: /* time passes, sometimes past the deadline */
            now += (uint64_t)(pick(4) == 0 ? 4000 : pick(200)) * MS;
            break;
        case 7: /* the lapse timer (it runs at the deadline, or later) */
            if (!(m.lease != 0 && now < until))
                m.synced = false;
            px_fence_lapsed(&f, now, until);
            break;
        case 8: /* a keepalive answered */
            if (m.lease == 0)
                break;
            until = now + TTL;
            assert_int_equal(px_fence_kept(&f), m.registered && !m.synced);
            break;
        case 9: /* a change prepared, or dropped */
            if (!m.held) {
                m.held = true;
                m.confirmed = now;
                px_fence_hold(&f, now);
            } else {
                m.held = false;
                px_fence_release(&f);
            }
            break;
        case 10: /* a turn of the loop */
            if (m.held && now - last_beat <= PX_FENCE_HELD_GAP_NS)
                m.confirmed = now;
            assert_int_equal(px_fence_beat(&f, now, last_beat),
                             m.held && now - last_beat > PX_FENCE_HELD_GAP_NS);
            last_beat = now;
            break;
        case 11: /* the watch up or down */
            watching = !watching;
            break;
        }
        decide();
        bool alive = m.lease != 0 && now < until;
        bool cur = alive && m.registered && m.synced && !(m.held && !watching);
        assert_int_equal(d.current, cur);
        assert_int_equal(d.lease_alive, alive);
        assert_int_equal(d.serve_until_ns,
                         !cur ? 0 : m.held ? m.confirmed + PX_FENCE_HELD_ALIVE_NS : UINT64_MAX);
        if (!cur)
            assert_int_equal(d.why, !m.was_current                ? PX_FENCE_UNREAD
                                    : !alive                      ? PX_FENCE_LEASE
                                    : !(m.registered && m.synced) ? PX_FENCE_RESYNC
                                                                  : PX_FENCE_WATCH);
        assert_int_equal(d.changed, !m.published || cur != m.current);
        if (m.published && m.current && !cur)
            m.fences++;
        m.published = true;
        m.current = cur;
        m.was_current |= cur;
        assert_int_equal(f.fences, m.fences);
    }
    assert_true(m.fences > 10); /* the walk went through the fences it checks */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_first_decision_is_unread, setup),
        cmocka_unit_test_setup(test_unread_to_current, setup),
        cmocka_unit_test_setup(test_current_at_first_decision, setup),
        cmocka_unit_test_setup(test_read_before_the_record_is_read_again, setup),
        cmocka_unit_test_setup(test_read_without_a_lease_is_not_repeated, setup),
        cmocka_unit_test_setup(test_record_written_twice_or_late, setup),
        cmocka_unit_test_setup(test_lapse_not_passed_changes_nothing, setup),
        cmocka_unit_test_setup(test_current_lease_resync_current, setup),
        cmocka_unit_test_setup(test_lease_lost_and_granted_again, setup),
        cmocka_unit_test_setup(test_held_is_bounded_and_beats, setup),
        cmocka_unit_test_setup(test_held_with_the_watch_down, setup),
        cmocka_unit_test_setup(test_model_walk, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

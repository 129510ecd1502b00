/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fence.c — the fence's state machine (fence.h): every function is O(1), reads no clock and
 * does no I/O.
 */
#include "fence.h"

const char *px_fence_text(px_fence_why why)
{
    switch (why) {
    case PX_FENCE_LEASE: return "membership lease lost (etcd unreachable)";
    case PX_FENCE_RESYNC: return "membership lease lost; reading etcd again";
    case PX_FENCE_WATCH: return "etcd watch lost while a membership change is pending";
    case PX_FENCE_HELD:
        return "a membership change is pending and its commit cannot be ruled out (control "
               "thread stalled)";
    default: return "membership not read from etcd yet (etcd unreachable)";
    }
}

void px_fence_granted(px_fence *f, int64_t lease)
{
    f->lease = lease;
}

void px_fence_lease_lost(px_fence *f)
{
    f->lease = f->registered = f->synced = 0;
}

void px_fence_record_sent(px_fence *f)
{
    f->record_lease = f->lease;
}

bool px_fence_record_written(px_fence *f, bool *read_again)
{
    *read_again = false;
    if (f->record_lease != f->lease || f->registered == f->lease)
        return false;
    f->registered = f->lease; /* visible to apply: from here on, a read makes it current */
    *read_again = f->synced != f->lease;
    return true;
}

void px_fence_read_sent(px_fence *f, uint64_t now_ns)
{
    f->range_lease = f->registered;
    f->range_sent_ns = now_ns;
}

bool px_fence_read_done(px_fence *f)
{
    bool again = false;
    /* Read whole after the record was written under this lease: every commit from the read's
     * revision on waits for this instance. A read begun before that is read again. */
    if (f->range_lease != 0 && f->range_lease == f->lease && f->registered == f->lease)
        f->synced = f->lease;
    else if (f->lease != 0 && f->registered == f->lease)
        again = true;
    if (f->held)
        f->confirmed_ns = f->range_sent_ns; /* K as of then: a commit found was swapped in */
    return again;
}

void px_fence_lapsed(px_fence *f, uint64_t now_ns, uint64_t lease_until_ns)
{
    if (f->lease != 0 && now_ns < lease_until_ns)
        return; /* kept alive meanwhile */
    f->synced = 0;
}

bool px_fence_kept(const px_fence *f)
{
    return f->lease != 0 && f->synced != f->lease && f->registered == f->lease;
}

void px_fence_hold(px_fence *f, uint64_t now_ns)
{
    f->held = true;
    f->confirmed_ns = now_ns; /* apply commits only once this prepare is recorded */
}

void px_fence_release(px_fence *f)
{
    f->held = false;
}

bool px_fence_beat(px_fence *f, uint64_t now_ns, uint64_t last_ns)
{
    if (!f->held)
        return false;
    if (now_ns - last_ns > PX_FENCE_HELD_GAP_NS)
        return true;
    f->confirmed_ns = now_ns;
    return false;
}

void px_fence_decide(px_fence *f, uint64_t now_ns, uint64_t lease_until_ns, bool watching,
                     px_fence_decision *d)
{
    bool lease_ok = f->lease != 0 && now_ns < lease_until_ns;
    bool read = f->registered == f->lease && f->synced == f->lease;
    bool cur = lease_ok && read && !(f->held && !watching);
    d->current = cur;
    d->why = !f->was_current && !cur ? PX_FENCE_UNREAD
             : !lease_ok             ? PX_FENCE_LEASE
             : !read                 ? PX_FENCE_RESYNC
             : !cur                  ? PX_FENCE_WATCH
                                     : PX_FENCE_HELD; /* if the bound (4) runs out */
    d->serve_until_ns = !cur     ? 0
                        : f->held ? f->confirmed_ns + PX_FENCE_HELD_ALIVE_NS
                                  : UINT64_MAX;
    d->lease_alive = lease_ok;
    d->changed = !f->published || cur != f->current;
    d->first = !f->published;
    d->fenced_ns = 0;
    if (!d->changed)
        return;
    f->published = true;
    f->current = cur;
    if (!cur) {
        f->fences += !d->first;
        f->fenced_since_ns = now_ns;
    } else {
        if (!d->first)
            d->fenced_ns = now_ns - f->fenced_since_ns;
        f->was_current = true;
    }
}

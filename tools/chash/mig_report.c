/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mig_report.c — what `chash migrate` prints: the counts as text or one JSON object (schema in
 * docs/CLI.md), and the failed keys and the verify pass's mismatches on stderr.
 */
#define _POSIX_C_SOURCE 200809L
#include "mig_run.h"

#include <inttypes.h>
#include <stdio.h>

/* Source i's counts: its checkpointed state and its lost batch. */
static mig_counts source_counts(const run *r, size_t i)
{
    const mig_counts *a = &r->st[i].n, *b = &r->lost[i].n;
    return (mig_counts){a->scanned + b->scanned, a->stray + b->stray, a->moved + b->moved,
                        a->copied + b->copied,   a->present + b->present,
                        a->expired + b->expired, a->failed + b->failed,
                        a->changed + b->changed, 0};
}

static uint64_t pair_keys(const run *r, size_t i, size_t k)
{
    return r->st[i].pairs[k] + r->lost[i].pairs[k];
}

void mig_totals(const run *r, mig_counts *t)
{
    *t = (mig_counts){0};
    for (size_t i = 0; i < r->old.n; i++) {
        mig_counts sc = source_counts(r, i);
        const mig_counts *n = &sc;
        t->scanned += n->scanned;
        t->stray += n->stray;
        t->moved += n->moved;
        t->copied += n->copied;
        t->present += n->present;
        t->expired += n->expired;
        t->failed += n->failed;
        t->changed += n->changed;
    }
}

static void json_listed(json *j, const run *r, const listed *l, size_t n, const char *errkey)
{
    json_arr(j);
    for (size_t k = 0; k < n; k++) {
        json_obj(j);
        json_key(j, "key");
        json_str(j, l[k].key);
        json_key(j, "from");
        json_str(j, r->old.servers[l[k].from].addr);
        json_key(j, "to");
        json_str(j, r->neu.servers[l[k].to].addr);
        json_key(j, errkey);
        json_str(j, l[k].err);
        json_end(j);
    }
    json_end(j);
}

void mig_print_json(const run *r, bool complete, double secs)
{
    mig_counts t;
    mig_totals(r, &t);
    uint64_t failed_sources = 0, owned = t.scanned - t.stray;
    for (size_t i = 0; i < r->old.n; i++)
        failed_sources += r->source_failed[i];
    json j;
    json_init(&j, stdout);
    json_obj(&j);
    json_key(&j, "old");
    json_str(&j, r->old.path);
    json_key(&j, "new");
    json_str(&j, r->neu.path);
    json_key(&j, "pool");
    json_str(&j, r->old.pool->name);
    json_key(&j, "protocol");
    json_str(&j, r->drv->name);
    json_key(&j, "dry_run");
    json_bool(&j, r->dry_run);
    json_key(&j, "complete");
    json_bool(&j, complete);
    json_key(&j, "scanned");
    json_int(&j, t.scanned);
    json_key(&j, "stray");
    json_int(&j, t.stray);
    json_key(&j, "moved");
    json_int(&j, t.moved);
    json_key(&j, "moved_share");
    json_num(&j, owned ? (double)t.moved / (double)owned : 0.0);
    json_key(&j, "copied");
    json_int(&j, t.copied);
    json_key(&j, "present");
    json_int(&j, t.present);
    json_key(&j, "expired");
    json_int(&j, t.expired);
    json_key(&j, "failed");
    json_int(&j, t.failed);
    json_key(&j, "changed");
    json_int(&j, t.changed);
    json_key(&j, "failed_sources");
    json_int(&j, failed_sources);
    json_key(&j, "seconds");
    json_num(&j, secs);
    json_key(&j, "keys_per_second");
    json_num(&j, secs > 0 ? (double)r->scanned_run / secs : 0.0);
    json_key(&j, "pairs");
    json_arr(&j);
    for (size_t i = 0; i < r->old.n; i++)
        for (size_t k = 0; k < r->neu.n; k++) {
            if (pair_keys(r, i, k) == 0)
                continue;
            json_obj(&j);
            json_key(&j, "from");
            json_str(&j, r->old.servers[i].addr);
            json_key(&j, "to");
            json_str(&j, r->neu.servers[k].addr);
            json_key(&j, "keys");
            json_int(&j, pair_keys(r, i, k));
            json_end(&j);
        }
    json_end(&j);
    json_key(&j, "sources");
    json_arr(&j);
    for (size_t i = 0; i < r->old.n; i++) {
        mig_counts sc = source_counts(r, i);
        const mig_counts *n = &sc;
        json_obj(&j);
        json_key(&j, "server");
        json_str(&j, r->old.servers[i].addr);
        json_key(&j, "done");
        json_bool(&j, r->st[i].cur.done && !r->source_failed[i]);
        json_key(&j, "error");
        json_str(&j, r->source_err[i]);
        json_key(&j, "scanned");
        json_int(&j, n->scanned);
        json_key(&j, "stray");
        json_int(&j, n->stray);
        json_key(&j, "unlisted");
        json_int(&j, r->unlisted[i]);
        json_key(&j, "moved");
        json_int(&j, n->moved);
        json_key(&j, "copied");
        json_int(&j, n->copied);
        json_key(&j, "present");
        json_int(&j, n->present);
        json_key(&j, "expired");
        json_int(&j, n->expired);
        json_key(&j, "failed");
        json_int(&j, n->failed);
        json_key(&j, "changed");
        json_int(&j, n->changed);
        json_end(&j);
    }
    json_end(&j);
    json_key(&j, "failures");
    json_listed(&j, r, r->failed, r->nfailed_listed, "error");
    json_key(&j, "verify");
    if (!r->verify) {
        json_null(&j);
    } else {
        json_obj(&j);
        json_key(&j, "tolerance_ms");
        json_int(&j, VERIFY_TOLERANCE_MS);
        json_key(&j, "checked");
        json_int(&j, r->v_checked);
        json_key(&j, "ok");
        json_int(&j, r->v_ok);
        json_key(&j, "missing");
        json_int(&j, r->v_missing);
        json_key(&j, "ttl_mismatch");
        json_int(&j, r->v_ttl);
        json_key(&j, "gone");
        json_int(&j, r->v_gone);
        json_key(&j, "errors");
        json_int(&j, r->v_error);
        json_key(&j, "mismatches");
        json_listed(&j, r, r->mismatch, r->nmismatch_listed, "problem");
        json_end(&j);
    }
    json_end(&j);
    json_done(&j);
}

void mig_print_text(const run *r, bool complete, double secs)
{
    mig_counts t;
    mig_totals(r, &t);
    uint64_t owned = t.scanned - t.stray;
    printf("%s pool %s (%zu servers) -> %s pool %s (%zu servers), %s%s\n", r->old.path,
           r->old.pool->name, r->old.n, r->neu.path, r->neu.pool->name, r->neu.n, r->drv->name,
           r->dry_run ? ", dry run: nothing written" : "");
    printf("scanned %" PRIu64 " keys; %" PRIu64 " of them %s (%.2f%%)", t.scanned, t.moved,
           r->dry_run ? "would move" : "move",
           owned ? 100.0 * (double)t.moved / (double)owned : 0.0);
    if (t.stray)
        printf("; %" PRIu64 " stray (on a server that does not own them under OLD: left alone)",
               t.stray);
    printf("\n");
    char la[300], lb[300];
    for (size_t i = 0; i < r->old.n; i++)
        for (size_t k = 0; k < r->neu.n; k++)
            if (pair_keys(r, i, k))
                printf("  %-40s -> %-40s %" PRIu64 "\n",
                       server_label(&r->old.servers[i], la, sizeof(la)),
                       server_label(&r->neu.servers[k], lb, sizeof(lb)), pair_keys(r, i, k));
    if (!r->dry_run)
        printf("copied %" PRIu64 ", present %" PRIu64 " (already at the new owner%s), expired %"
               PRIu64 ", failed %" PRIu64 ", changed %" PRIu64 " (written at the source during "
               "the copy: the copy dropped)\n",
               t.copied, t.present, r->replace ? "" : ", kept", t.expired, t.failed, t.changed);
    if (r->verify)
        printf("verify: %" PRIu64 " checked, %" PRIu64 " ok, %" PRIu64 " missing, %" PRIu64
               " TTL mismatches (tolerance %d ms), %" PRIu64 " gone from the source, %" PRIu64
               " errors\n",
               r->v_checked, r->v_ok, r->v_missing, r->v_ttl, VERIFY_TOLERANCE_MS, r->v_gone,
               r->v_error);
    printf("%.2f s, %.0f keys scanned/s%s\n", secs, secs > 0 ? (double)r->scanned_run / secs : 0.0,
           complete ? ""
                    : "; incomplete (stopped, or keys or a source failed): rerun with the same "
                      "--checkpoint to go on");
}

/* The failed keys and mismatches listed on stderr (with or without --json). */
void mig_print_listed(const run *r)
{
    mig_counts t;
    mig_totals(r, &t);
    for (size_t k = 0; k < r->nfailed_listed; k++)
        fprintf(stderr, "chash migrate: failed: %s (%s -> %s): %s\n", r->failed[k].key,
                r->old.servers[r->failed[k].from].addr, r->neu.servers[r->failed[k].to].addr,
                r->failed[k].err);
    if (t.failed > r->nfailed_listed)
        fprintf(stderr, "chash migrate: ... and %" PRIu64 " more failed keys\n",
                t.failed - r->nfailed_listed);
    for (size_t k = 0; k < r->nmismatch_listed; k++)
        fprintf(stderr, "chash migrate: verify: %s (%s -> %s): %s\n", r->mismatch[k].key,
                r->old.servers[r->mismatch[k].from].addr,
                r->neu.servers[r->mismatch[k].to].addr, r->mismatch[k].err);
}

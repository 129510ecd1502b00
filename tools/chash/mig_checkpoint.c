/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mig_checkpoint.c — the resumable state of `chash migrate`: per source server, how far its
 * enumeration got and what it counted. A text file, one line per fact:
 *
 *   chash-migrate-checkpoint 1
 *   id <pool> <OLD membership version> <NEW membership version>
 *   source <addr> cursor <u64> done <0|1> scanned <n> stray <n> moved <n> copied <n>
 *          present <n> expired <n> failed <n> changed <n>      (one line)
 *   pair <old addr> <new addr> <keys>
 *   end
 *
 * Invariant: a cursor is written only once every key the enumeration gave before it has been
 * copied or counted, so a resumed run neither skips a key nor counts one twice (SCAN itself may
 * give a key twice; the second copy is then counted "present"). The file is replaced
 * atomically: written to PATH.tmp, flushed to disk, renamed over PATH.
 */
#define _POSIX_C_SOURCE 200809L
#include "migrate.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAGIC "chash-migrate-checkpoint 1"

int mig_checkpoint_save(const char *path, const char *id, const mig_server *olds, size_t nold,
                        const mig_server *news, size_t nnew, const mig_source_state *st,
                        char *err, size_t errlen)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
        snprintf(err, errlen, "%s: path too long", path);
        return -1;
    }
    FILE *f = fopen(tmp, "w");
    if (f == NULL) {
        snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
        return -1;
    }
    fprintf(f, "%s\nid %s\n", MAGIC, id);
    for (size_t i = 0; i < nold; i++) {
        const mig_counts *n = &st[i].n;
        fprintf(f,
                "source %s cursor %" PRIu64 " done %d scanned %" PRIu64 " stray %" PRIu64
                " moved %" PRIu64
                " copied %" PRIu64 " present %" PRIu64 " expired %" PRIu64 " failed %" PRIu64
                " changed %" PRIu64 "\n",
                olds[i].addr, st[i].cur.pos, st[i].cur.done ? 1 : 0, n->scanned, n->stray, n->moved,
                n->copied, n->present, n->expired, n->failed, n->changed);
        for (size_t j = 0; j < nnew; j++)
            if (st[i].pairs[j] > 0)
                fprintf(f, "pair %s %s %" PRIu64 "\n", olds[i].addr, news[j].addr,
                        st[i].pairs[j]);
    }
    fputs("end\n", f);
    bool ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
    int e = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        e = errno;
    }
    if (!ok || rename(tmp, path) != 0) {
        snprintf(err, errlen, "%s: %s", ok ? path : tmp, strerror(ok ? errno : e));
        unlink(tmp);
        return -1;
    }
    return 0;
}

static long find_addr(const mig_server *s, size_t n, const char *addr)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s[i].addr, addr) == 0)
            return (long)i;
    return -1;
}

int mig_checkpoint_load(const char *path, const char *id, const mig_server *olds, size_t nold,
                        const mig_server *news, size_t nnew, mig_source_state *st, char *err,
                        size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        if (errno == ENOENT)
            return 0;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    char line[8192], a[4096], b[4096];
    unsigned lineno = 0;
    bool magic = false, have_id = false, end = false;
    int rc = -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        lineno++;
        line[strcspn(line, "\n")] = '\0';
        if (!magic) {
            if (strcmp(line, MAGIC) != 0) {
                snprintf(err, errlen, "%s: not a chash migrate checkpoint", path);
                goto out;
            }
            magic = true;
            continue;
        }
        if (strncmp(line, "id ", 3) == 0) {
            if (strcmp(line + 3, id) != 0) {
                snprintf(err, errlen,
                         "%s belongs to another migration (its pool and configs: '%s'; this "
                         "one: '%s'); remove it or give another --checkpoint",
                         path, line + 3, id);
                goto out;
            }
            have_id = true;
            continue;
        }
        if (!have_id)
            break;
        uint64_t pos, v[8] = {0}, keys;
        int done;
        /* "changed" is last: a checkpoint written before it had none (0). */
        if (sscanf(line,
                   "source %4095s cursor %" SCNu64 " done %d scanned %" SCNu64 " stray %" SCNu64
                   " moved %" SCNu64 " copied %" SCNu64 " present %" SCNu64 " expired %" SCNu64
                   " failed %" SCNu64 " changed %" SCNu64,
                   a, &pos, &done, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) >= 10) {
            long i = find_addr(olds, nold, a);
            if (i < 0) {
                snprintf(err, errlen, "%s:%u: server %s is not in OLD", path, lineno, a);
                goto out;
            }
            st[i].cur = (mig_cursor){.pos = pos, .done = done != 0};
            st[i].n = (mig_counts){v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], 0};
        } else if (sscanf(line, "pair %4095s %4095s %" SCNu64, a, b, &keys) == 3) {
            long i = find_addr(olds, nold, a), j = find_addr(news, nnew, b);
            if (i < 0 || j < 0) {
                snprintf(err, errlen, "%s:%u: server %s is not in %s", path, lineno,
                         i < 0 ? a : b, i < 0 ? "OLD" : "NEW");
                goto out;
            }
            st[i].pairs[j] = keys;
        } else if (strcmp(line, "end") == 0) {
            end = true;
            break;
        } else {
            snprintf(err, errlen, "%s:%u: unreadable line", path, lineno);
            goto out;
        }
    }
    if (ferror(f))
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
    else if (!magic || !have_id || !end)
        snprintf(err, errlen, "%s: truncated checkpoint", path);
    else
        rc = 1;
out:
    fclose(f);
    return rc;
}

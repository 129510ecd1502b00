/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mig_checkpoint.c — the resumable state of `chash migrate`: per source server, how far its
 * enumeration got and what it counted. A text file, one line per fact:
 *
 *   chash-migrate-checkpoint 2
 *   id <pool> <OLD membership version> <NEW membership version>
 *   moves <16 hex digits>     the identity of the moved set (mig_run: both placements, the
 *                             servers' addresses and database, --match), XXH64
 *   source <addr> cursor <u64> done <0|1> scanned <n> stray <n> moved <n> copied <n>
 *          present <n> expired <n> failed <n> changed <n>      (one line; every OLD server)
 *   pair <old addr> <new addr> <keys>
 *   check <16 hex digits>     XXH64 (seed 0) of every byte of the file before this line
 *   end
 *
 * Invariant: a cursor is written only once every key the enumeration gave before it has been
 * copied or counted, so a resumed run neither skips a key nor counts one twice (SCAN itself may
 * give a key twice; the second copy is then counted "present"). The file is replaced
 * atomically: written to PATH.tmp, flushed to disk, renamed over PATH.
 *
 * A checkpoint is trusted only when it is this migration's and adds up: the checksum holds (an
 * edited line, e.g. "done 1" or a moved cursor, is refused: resuming from it would skip keys
 * and report them copied), the moved set is this run's (configs swapped or changed are
 * refused), every number is a plain decimal that fits 64 bits (no sign, no wrap), and per
 * source moved <= scanned - stray, the outcomes add up to moved, and the pairs too. The
 * checksum detects edits and damage, not an adversary who recomputes it: the file is the
 * operator's.
 */
#define _POSIX_C_SOURCE 200809L
#include "migrate.h"

#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#define MAGIC "chash-migrate-checkpoint 2"
#define MAGIC_V1 "chash-migrate-checkpoint 1"
#define MAX_BYTES (64u << 20) /* a checkpoint: a few lines per server */
#define AFRESH "; to start afresh, remove it or rerun with --restart"

int mig_checkpoint_save(const char *path, const char *id, uint64_t moves, const mig_server *olds,
                        size_t nold, const mig_server *news, size_t nnew,
                        const mig_source_state *st, char *err, size_t errlen)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
        snprintf(err, errlen, "%s: path too long", path);
        return -1;
    }
    /* The content first, in memory, for its checksum. */
    char *body = NULL;
    size_t blen = 0;
    FILE *m = open_memstream(&body, &blen);
    if (m == NULL) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    fprintf(m, "%s\nid %s\nmoves %016" PRIx64 "\n", MAGIC, id, moves);
    for (size_t i = 0; i < nold; i++) {
        const mig_counts *n = &st[i].n;
        fprintf(m,
                "source %s cursor %" PRIu64 " done %d scanned %" PRIu64 " stray %" PRIu64
                " moved %" PRIu64
                " copied %" PRIu64 " present %" PRIu64 " expired %" PRIu64 " failed %" PRIu64
                " changed %" PRIu64 "\n",
                olds[i].addr, st[i].cur.pos, st[i].cur.done ? 1 : 0, n->scanned, n->stray, n->moved,
                n->copied, n->present, n->expired, n->failed, n->changed);
        for (size_t j = 0; j < nnew; j++)
            if (st[i].pairs[j] > 0)
                fprintf(m, "pair %s %s %" PRIu64 "\n", olds[i].addr, news[j].addr,
                        st[i].pairs[j]);
    }
    if (fclose(m) != 0) {
        free(body);
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    FILE *f = fopen(tmp, "w");
    if (f == NULL) {
        snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
        free(body);
        return -1;
    }
    fwrite(body, 1, blen, f);
    fprintf(f, "check %016llx\nend\n", (unsigned long long)XXH64(body, blen, 0));
    free(body);
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

/* A plain decimal that fits 64 bits: digits only (strtoull would take "-1" as 2^64 - 1). */
static bool parse_u64(const char *s, uint64_t *out)
{
    if (*s < '0' || *s > '9')
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return false;
    *out = v;
    return true;
}

/* Sums without wrapping: false on overflow. */
static bool add_u64(uint64_t *acc, uint64_t v)
{
    if (*acc > UINT64_MAX - v)
        return false;
    *acc += v;
    return true;
}

/* The whole file, NUL-terminated, or NULL with err. */
static char *read_all(const char *path, size_t *len, bool *absent, char *err, size_t errlen)
{
    *absent = false;
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        *absent = errno == ENOENT;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (ferror(f) || feof(f) || n + 1 < cap)
            break;
        char *b = cap >= MAX_BYTES ? NULL : realloc(buf, cap * 2);
        if (b == NULL) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = b;
        cap *= 2;
    }
    bool bad = buf == NULL || ferror(f);
    fclose(f);
    if (bad) {
        snprintf(err, errlen, "%s: %s", path, buf ? strerror(errno) : "too large or out of memory");
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* The fields of a source line; false when it is not one. */
static bool parse_source(char *line, char **addr, uint64_t v[11])
{
    static const char *const names[] = {"cursor", "done", "scanned", "stray", "moved", "copied",
                                        "present", "expired", "failed", "changed"};
    char *save, *tok = strtok_r(line, " ", &save);
    if (tok == NULL || strcmp(tok, "source") != 0 || (*addr = strtok_r(NULL, " ", &save)) == NULL)
        return false;
    for (size_t k = 0; k < 10; k++) {
        char *name = strtok_r(NULL, " ", &save), *val = strtok_r(NULL, " ", &save);
        if (name == NULL || val == NULL || strcmp(name, names[k]) != 0 || !parse_u64(val, &v[k]))
            return false;
    }
    return strtok_r(NULL, " ", &save) == NULL;
}

/* Whether source i's counts add up; err says what does not. */
static bool source_adds_up(const char *path, const mig_server *s, const mig_source_state *st,
                           size_t nnew, bool resumable, char *err, size_t errlen)
{
    const mig_counts *n = &st->n;
    uint64_t outcomes = 0, pairs = 0;
    bool fits = add_u64(&outcomes, n->copied) && add_u64(&outcomes, n->present) &&
                add_u64(&outcomes, n->expired) && add_u64(&outcomes, n->failed) &&
                add_u64(&outcomes, n->changed);
    for (size_t j = 0; j < nnew && fits; j++)
        fits = add_u64(&pairs, st->pairs[j]);
    if (!fits)
        snprintf(err, errlen, "%s: source %s: its counts overflow 64 bits" AFRESH, path, s->addr);
    else if (n->stray > n->scanned || n->moved > n->scanned - n->stray)
        snprintf(err, errlen,
                 "%s: source %s: %" PRIu64 " moved and %" PRIu64 " stray of %" PRIu64
                 " scanned: the counts do not add up" AFRESH,
                 path, s->addr, n->moved, n->stray, n->scanned);
    else if (outcomes != n->moved)
        snprintf(err, errlen,
                 "%s: source %s: copied + present + expired + failed + changed = %" PRIu64
                 ", moved %" PRIu64 ": the counts do not add up" AFRESH,
                 path, s->addr, outcomes, n->moved);
    else if (pairs != n->moved)
        snprintf(err, errlen,
                 "%s: source %s: its pairs add up to %" PRIu64 ", moved %" PRIu64
                 ": the counts do not add up" AFRESH,
                 path, s->addr, pairs, n->moved);
    else if (resumable && !st->cur.done && st->cur.pos == 0 && n->scanned > 0)
        snprintf(err, errlen,
                 "%s: source %s: cursor 0 (the start) after %" PRIu64 " keys scanned" AFRESH,
                 path, s->addr, n->scanned);
    else
        return true;
    return false;
}

int mig_checkpoint_load(const char *path, const char *id, uint64_t moves, bool resumable,
                        const mig_server *olds, size_t nold, const mig_server *news, size_t nnew,
                        mig_source_state *st, char *err, size_t errlen)
{
    size_t len;
    bool absent;
    char *buf = read_all(path, &len, &absent, err, errlen);
    if (buf == NULL)
        return absent ? 0 : -1;
    int rc = -1;
    bool *seen = calloc(nold ? nold : 1, sizeof(*seen));
    size_t nl = strcspn(buf, "\n");
    char *check = strstr(buf, "\ncheck ");
    uint64_t sum = 0;
    if (seen == NULL) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto out;
    }
    if (strncmp(buf, MAGIC_V1, nl) == 0 && nl == strlen(MAGIC_V1)) {
        snprintf(err, errlen,
                 "%s: a checkpoint of an older chash, without a checksum: it cannot be "
                 "trusted" AFRESH,
                 path);
        goto out;
    }
    if (nl != strlen(MAGIC) || strncmp(buf, MAGIC, nl) != 0) {
        snprintf(err, errlen, "%s: not a chash migrate checkpoint", path);
        goto out;
    }
    /* The checksum covers every byte before the "check" line; after it only "end". */
    char *tail = check ? check + 1 + strlen("check ") : NULL;
    if (check == NULL || strlen(tail) != 16 + strlen("\nend\n") ||
        strcmp(tail + 16, "\nend\n") != 0) {
        snprintf(err, errlen, "%s: truncated checkpoint (no checksum at its end)" AFRESH, path);
        goto out;
    }
    tail[16] = '\0';
    char *hend;
    errno = 0;
    sum = strtoull(tail, &hend, 16);
    if (errno != 0 || *hend != '\0' || sum != XXH64(buf, (size_t)(check + 1 - buf), 0)) {
        snprintf(err, errlen,
                 "%s: its checksum does not match its content: the file was edited or "
                 "damaged, and resuming from it could skip keys" AFRESH,
                 path);
        goto out;
    }
    check[1] = '\0'; /* the lines to parse: up to the "check" line */
    unsigned lineno = 1;
    char *save, *line = strtok_r(buf + nl + 1, "\n", &save);
    for (; line != NULL; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        char *addr, a[4096], b[4096], extra;
        uint64_t v[11], keys;
        if (strncmp(line, "id ", 3) == 0) {
            if (lineno != 2 || strcmp(line + 3, id) != 0) {
                snprintf(err, errlen,
                         "%s belongs to another migration (its pool and configs: '%s'; this "
                         "one: '%s'); remove it or give another --checkpoint",
                         path, line + 3, id);
                goto out;
            }
        } else if (strncmp(line, "moves ", 6) == 0) {
            char want[32];
            snprintf(want, sizeof(want), "%016" PRIx64, moves);
            if (lineno != 3 || strcmp(line + 6, want) != 0) {
                snprintf(err, errlen,
                         "%s was written for another moved set (OLD's or NEW's servers, "
                         "placement or database, or --match, differ from this run's: e.g. "
                         "OLD and NEW swapped)" AFRESH,
                         path);
                goto out;
            }
        } else if (lineno <= 3) {
            snprintf(err, errlen, "%s:%u: expected the %s line" AFRESH, path, lineno,
                     lineno == 2 ? "id" : "moves");
            goto out;
        } else if (strncmp(line, "source ", 7) == 0) {
            if (!parse_source(line, &addr, v)) {
                snprintf(err, errlen,
                         "%s:%u: a source line whose numbers are not plain decimals of 64 bits "
                         "(or a field is missing)" AFRESH,
                         path, lineno);
                goto out;
            }
            long i = find_addr(olds, nold, addr);
            if (i < 0 || seen[i] || v[1] > 1) {
                snprintf(err, errlen, "%s:%u: server %s %s" AFRESH, path, lineno, addr,
                         i < 0     ? "is not in OLD"
                         : seen[i] ? "appears twice"
                                   : "done is not 0 or 1");
                goto out;
            }
            seen[i] = true;
            st[i].cur = (mig_cursor){.pos = v[0], .done = v[1] != 0};
            st[i].n = (mig_counts){v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], 0};
        } else if (sscanf(line, "pair %4095s %4095s %" SCNu64 " %c", a, b, &keys, &extra) == 3 &&
                   strrchr(line, ' ') != NULL && parse_u64(strrchr(line, ' ') + 1, &keys)) {
            long i = find_addr(olds, nold, a), j = find_addr(news, nnew, b);
            if (i < 0 || j < 0) {
                snprintf(err, errlen, "%s:%u: server %s is not in %s", path, lineno,
                         i < 0 ? a : b, i < 0 ? "OLD" : "NEW");
                goto out;
            }
            st[i].pairs[j] = keys;
        } else {
            snprintf(err, errlen, "%s:%u: unreadable line" AFRESH, path, lineno);
            goto out;
        }
    }
    if (lineno < 3) {
        snprintf(err, errlen, "%s: truncated checkpoint" AFRESH, path);
        goto out;
    }
    for (size_t i = 0; i < nold; i++) {
        if (!seen[i]) {
            snprintf(err, errlen, "%s: no line for OLD server %s" AFRESH, path, olds[i].addr);
            goto out;
        }
        if (!source_adds_up(path, &olds[i], &st[i], nnew, resumable, err, errlen))
            goto out;
    }
    rc = 1;
out:
    if (rc != 1) /* nothing half-applied: st as it was (zeroed by the caller) */
        for (size_t i = 0; i < nold; i++) {
            st[i].cur = (mig_cursor){0};
            st[i].n = (mig_counts){0};
            memset(st[i].pairs, 0, nnew * sizeof(*st[i].pairs));
        }
    free(seen);
    free(buf);
    return rc;
}

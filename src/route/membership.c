/* SPDX-License-Identifier: Apache-2.0 */
/*
 * membership.c — a versioned membership: the members (id, addr, name, weight), their placement
 * table and a version string.
 *
 * Memory: one malloc'd block holds the struct, the member array, the index of the members by
 * id and every string; a build's other allocations (the table's node list, the id sort, the
 * content hash's buffer when no version is given) are freed before it returns, and a free
 * releases one block and the table. The index makes ch_membership_find O(log n): a reload that matches two
 * 10,000-node memberships by id compares about 140,000 strings, not 10^8.
 *
 * The content version is "m-" followed by the 12 lowercase hex digits of the high 48 bits of
 * XXH3-64 (ch_hash64(CH_HASH_XXH3, ...)) over this serialization, every field ended by a NUL
 * byte, which no field can contain:
 *     algorithm name, hash name, vnodes (decimal), table_size (decimal),
 *     the two hash tag bytes (two NULs when there is no tag),
 *     then per member, in order: id, addr, weight printed as C's "%.17g" in the "C" locale.
 * The options are the table's as built, so a NULL opt and ch_options_init()'s defaults give
 * equal versions. "%.17g" identifies a double exactly; the decimal point is written as '.'
 * whatever the process's LC_NUMERIC is, so equal memberships get equal versions on every host.
 */
#include "../table_view.h"
#include "chash_route.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ch_membership {
    ch_table *table;
    size_t n;
    size_t *by_id;       /* n member indexes in the order of their ids (strcmp), after members */
    char version[CH_VERSION_MAX];
    ch_member members[]; /* n entries; by_id and then their strings follow in the same block */
};

typedef struct id_at {
    const char *id;
    size_t i;
} id_at;

static int id_at_cmp(const void *a, const void *b)
{
    return strcmp(((const id_at *)a)->id, ((const id_at *)b)->id);
}

/* A version given by the caller: 1 to CH_VERSION_MAX - 1 printable ASCII characters. */
static bool version_ok(const char *v)
{
    size_t len = 0;
    for (; v[len] != '\0'; len++)
        if (len == CH_VERSION_MAX - 1 || (unsigned char)v[len] < 0x20 ||
            (unsigned char)v[len] > 0x7e)
            return false;
    return len > 0;
}

/* Writes the weight as "%.17g" would in the "C" locale to buf (>= 32 bytes) and returns its
 * length. For a finite double, a locale's decimal point (possibly several bytes) is the only
 * thing %g writes besides digits, sign and exponent; it becomes '.'. */
static size_t format_weight(char *buf, double w)
{
    char raw[64];
    int len = snprintf(raw, sizeof(raw), "%.17g", w);
    if (len < 0 || (size_t)len >= sizeof(raw))
        len = 0; /* unreachable for a double: at most 24 characters in the "C" locale */
    size_t out = 0;
    for (int i = 0; i < len && out < 31; i++) {
        char c = raw[i];
        if ((c >= '0' && c <= '9') || c == '-' || c == '+' || c == 'e')
            buf[out++] = c;
        else if (out == 0 || buf[out - 1] != '.')
            buf[out++] = '.';
    }
    buf[out] = '\0';
    return out;
}

/* Appends a field and its terminating NUL at buf + at (buf NULL: only counts). */
static size_t put(char *buf, size_t at, const char *s, size_t len)
{
    if (buf != NULL) {
        memcpy(buf + at, s, len);
        buf[at + len] = '\0';
    }
    return at + len + 1;
}

/* The serialization described at the top of this file, to buf (NULL: only its length).
 * Every member's strings have been checked to be non-NULL. */
static size_t serialize(const ch_table *t, const ch_member *members, size_t n, char *buf)
{
    char num[32];
    const ch_options *o = ch__table_options(t);
    const char *algo = ch_algo_name(o->algo), *hash = ch_hash_name(o->hash);
    size_t at = put(buf, 0, algo, strlen(algo));
    at = put(buf, at, hash, strlen(hash));
    at = put(buf, at, num, (size_t)snprintf(num, sizeof(num), "%u", (unsigned)o->vnodes));
    at = put(buf, at, num, (size_t)snprintf(num, sizeof(num), "%u", (unsigned)o->table_size));
    at = put(buf, at, o->hash_tag, 2);
    for (size_t i = 0; i < n; i++) {
        at = put(buf, at, members[i].id, strlen(members[i].id));
        at = put(buf, at, members[i].addr, strlen(members[i].addr));
        at = put(buf, at, num, format_weight(num, members[i].weight));
    }
    return at;
}

static int content_version(const ch_table *t, const ch_member *members, size_t n,
                           char version[CH_VERSION_MAX])
{
    size_t len = serialize(t, members, n, NULL);
    char *buf = malloc(len);
    if (buf == NULL)
        return CH_ENOMEM;
    serialize(t, members, n, buf);
    uint64_t h = 0;
    ch_hash64(CH_HASH_XXH3, buf, len, &h);
    free(buf);

    static const char hex[] = "0123456789abcdef";
    version[0] = 'm';
    version[1] = '-';
    for (int d = 0; d < 12; d++)
        version[2 + d] = hex[(h >> (60 - 4 * d)) & 0xf];
    version[14] = '\0';
    return CH_OK;
}

/* Adds a string's size (with its NUL) to *total; false on overflow. */
static bool add_size(size_t *total, const char *s)
{
    size_t len = strlen(s) + 1;
    if (len > SIZE_MAX - *total)
        return false;
    *total += len;
    return true;
}

static char *copy_str(char **p, const char *s)
{
    size_t len = strlen(s) + 1;
    char *dst = *p;
    memcpy(dst, s, len);
    *p += len;
    return dst;
}

int ch_membership_build(const ch_member *members, size_t n, const ch_options *opt,
                        const char *version, ch_membership **out)
{
    return ch_membership_build_err(members, n, opt, version, out, NULL);
}

/* ch_membership_build_err() once err is cleared; every failure with words of its own is
 * recorded in err. */
static int build(const ch_member *members, size_t n, const ch_options *opt, const char *version,
                 ch_membership **out, ch_error *err)
{
    if (out == NULL || (members == NULL && n > 0))
        return ch__error_set(err, CH_EINVAL, "%s is NULL", out == NULL ? "out" : "members");
    if (version != NULL && !version_ok(version))
        return ch__error_set(err, CH_EINVAL,
                             "version (%zu bytes) must be 1 to %d printable ASCII characters",
                             strlen(version), CH_VERSION_MAX - 1);

    /* The table validates n, ids and weights; then every id is a non-empty string. Above
     * CH_MAX_NODES the node array's size could overflow: answer as the table would. */
    if (n > CH_MAX_NODES)
        return ch__error_set(err, CH_ETOOBIG, "%zu members: at most %u (CH_MAX_NODES)", n,
                             (unsigned)CH_MAX_NODES);
    /* Routing places keys by their hash (ch_route_hash): a scheme without one cannot route. */
    if (opt != NULL && opt->size >= offsetof(ch_options, algo) + sizeof(opt->algo) &&
        (ch_algo_flags(opt->algo) & CH_ALGO_F_KEYED))
        return ch__error_set(err, CH_EUNSUPPORTED,
                             "%s hashes the key with each node (CH_ALGO_F_KEYED): it has no key "
                             "hash to route by",
                             ch_algo_name(opt->algo));
    ch_node *nodes = calloc(n > 0 ? n : 1, sizeof(*nodes));
    if (nodes == NULL)
        return CH_ENOMEM;
    for (size_t i = 0; i < n; i++)
        nodes[i] = (ch_node){.id = members[i].id, .weight = members[i].weight};
    ch_table *t = NULL;
    int rc = ch_table_build_err(nodes, n, opt, &t, err);
    free(nodes);
    if (rc != CH_OK)
        return rc;

    /* n <= CH_MAX_NODES now, so the array sizes cannot overflow. */
    size_t total = sizeof(ch_membership) + n * sizeof(ch_member) + n * sizeof(size_t);
    for (size_t i = 0; i < n; i++) {
        if (members[i].addr == NULL || members[i].addr[0] == '\0') {
            ch_table_free(t);
            return ch__error_set(err, CH_EINVAL, "member %zu (\"%.40s\"): its addr is %s", i,
                                 members[i].id, members[i].addr == NULL ? "NULL" : "empty");
        }
        if (!add_size(&total, members[i].id) || !add_size(&total, members[i].addr) ||
            (members[i].name != NULL && !add_size(&total, members[i].name))) {
            ch_table_free(t);
            return CH_ENOMEM;
        }
    }

    ch_membership *m = malloc(total);
    id_at *order = calloc(n > 0 ? n : 1, sizeof(*order));
    if (m == NULL || order == NULL) {
        free(m);
        free(order);
        ch_table_free(t);
        return CH_ENOMEM;
    }
    m->table = t;
    m->n = n;
    if (version != NULL) {
        memcpy(m->version, version, strlen(version) + 1);
    } else if ((rc = content_version(t, members, n, m->version)) != CH_OK) {
        free(m);
        free(order);
        ch_table_free(t);
        return rc;
    }
    m->by_id = (size_t *)(void *)(m->members + n);
    char *p = (char *)(m->by_id + n);
    for (size_t i = 0; i < n; i++) {
        m->members[i].id = copy_str(&p, members[i].id);
        m->members[i].addr = copy_str(&p, members[i].addr);
        m->members[i].name = members[i].name != NULL ? copy_str(&p, members[i].name) : NULL;
        m->members[i].weight = members[i].weight;
        order[i] = (id_at){m->members[i].id, i};
    }
    qsort(order, n, sizeof(*order), id_at_cmp); /* ids are distinct: the table checked */
    for (size_t i = 0; i < n; i++)
        m->by_id[i] = order[i].i;
    free(order);
    *out = m;
    return CH_OK;
}

int ch_membership_build_err(const ch_member *members, size_t n, const ch_options *opt,
                            const char *version, ch_membership **out, ch_error *err)
{
    ch__error_set(err, CH_OK, "%s", "");
    return ch__error_end(err, build(members, n, opt, version, out, err));
}

void ch_membership_free(ch_membership *m)
{
    if (m == NULL)
        return;
    ch_table_free(m->table);
    free(m);
}

const char *ch_membership_version(const ch_membership *m)
{
    return m->version;
}

size_t ch_membership_size(const ch_membership *m)
{
    return m->n;
}

const ch_member *ch_membership_member(const ch_membership *m, size_t i)
{
    return i < m->n ? &m->members[i] : NULL;
}

const ch_table *ch_membership_table(const ch_membership *m)
{
    return m->table;
}

size_t ch_membership_find(const ch_membership *m, const char *id)
{
    if (m == NULL || id == NULL)
        return SIZE_MAX;
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(m->members[m->by_id[mid]].id, id);
        if (c == 0)
            return m->by_id[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return SIZE_MAX;
}

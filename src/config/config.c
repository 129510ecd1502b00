/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config.c — loads twemproxy (nutcracker) YAML pools with libyaml's event parser.
 *
 * Two passes over libyaml events. The first only checks the YAML itself: syntax, and the
 * features twemproxy refuses (document markers, directives, anchors, aliases, tags, flow style).
 * So a syntax error is reported as such, not as whatever it made of the pool before it (an
 * indentation slip would otherwise read as "pool has no servers"), as twemproxy, which also
 * validates the stream before reading it. The second pass is a recursive descent: stream > one
 * document > a mapping of pool names > a mapping of keys > scalar values, or the "servers"
 * sequence of scalars. Each pass stops at its first problem and reports it with the 1-based line
 * and column of the offending node (libyaml's marks are 0-based). The file is read into memory first, at most
 * CH_CONFIG_MAX_BYTES, so that neither a device nor a huge file can keep the loader reading, and
 * so that reader errors, which libyaml reports as a byte offset, can be given a line and column.
 *
 * Ownership: every string hangs off the ch_config being built. A pool or a server is counted
 * (npools, nservers) before its strings are allocated and all its pointers start NULL, so
 * ch_config_free() can release a half-built configuration; on failure it does, and *out is not
 * touched.
 *
 * Duplicate pool names, listen addresses and server names are found with hash sets keyed by the
 * strings themselves, so a file with many pools or servers loads in expected linear time, and the
 * first duplicate in file order is the one reported.
 *
 * Nesting is bounded (CH_CONFIG_MAX_DEPTH) by counting the collections open in next(), which
 * both passes read through, so the parse stops at the collection that opens level 65. That is in
 * time: libyaml 0.2.5's scanner keeps one possible simple key per open flow collection and walks
 * all of them for every token, so its cost is quadratic in the flow depth (100,000 '[': 15 s;
 * 200,000: 59 s), and block nesting costs memory linear in the depth (16 MiB of "- ": 0.9 GB).
 * But the scanner reads ahead of the events only while a simple key is possible, which ends
 * after 1024 characters or at the line's end (YAML's limit on an implicit key), so when level 65
 * is reported at most about 1,100 levels are open in the scanner, and a 16 MiB document of '['
 * is refused after 1,089 bytes in 3 ms.
 */
#define _POSIX_C_SOURCE 200809L

#include "chash_config.h"
#include "config_internal.h"

#include <chash.h>
#include <yaml.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))
#define QB (CH__QUOTE_MAX + 4) /* a buffer for ch__conf_quote() */

/* ---- allocation ----------------------------------------------------------------------------
 * Every allocation of the loader goes through these, so a test build can fail each one in turn
 * (CH_CONFIG_FAILPOINTS) and check that nothing leaks. */
#ifdef CH_CONFIG_FAILPOINTS
static bool fail_now(void)
{
    return ch__config_allocs++ == ch__config_fail_at;
}
static void *xmalloc(size_t n)
{
    void *p = fail_now() ? NULL : malloc(n);
    if (p != NULL)
        ch__config_live++;
    return p;
}
static void *xrealloc(void *old, size_t n)
{
    void *p = fail_now() ? NULL : realloc(old, n);
    if (p != NULL && old == NULL)
        ch__config_live++;
    return p;
}
static void xfree(void *p)
{
    if (p != NULL)
        ch__config_live--;
    free(p);
}
#else
static void *xmalloc(size_t n)
{
    return malloc(n);
}
static void *xrealloc(void *old, size_t n)
{
    return realloc(old, n);
}
static void xfree(void *p)
{
    free(p);
}
#endif

/* A NUL-terminated copy of s[0..len), or NULL when out of memory. */
static char *dupn(const char *s, size_t len)
{
    char *d = xmalloc(len + 1);
    if (d != NULL) {
        memcpy(d, s, len);
        d[len] = '\0';
    }
    return d;
}

/* ---- the keys of a pool -------------------------------------------------------------------- */

enum kind { K_STR, K_INT, K_BOOL, K_SERVERS, K_SHADOW, K_ROUTES };

/* X(ID, name, kind, what the value must be, for "expected ... got" messages) */
#define POOL_KEYS(X)                                                                        \
    X(LISTEN, listen, K_STR, "\"host:port\" or \"/path/to/socket [permissions]\"")         \
    X(HASH, hash, K_STR, "a hash name")                                                     \
    X(HASH_TAG, hash_tag, K_STR, "a 2-character string")                                    \
    X(DISTRIBUTION, distribution, K_STR, "a distribution name")                             \
    X(TIMEOUT, timeout, K_INT, "an integer")                                                \
    X(BACKLOG, backlog, K_INT, "an integer")                                                \
    X(CLIENT_CONNECTIONS, client_connections, K_INT, "an integer")                          \
    X(REDIS, redis, K_BOOL, "true or false")                                                \
    X(TCPKEEPALIVE, tcpkeepalive, K_BOOL, "true or false")                                  \
    X(REUSEPORT, reuseport, K_BOOL, "true or false")                                        \
    X(REDIS_AUTH, redis_auth, K_STR, "a string")                                            \
    X(REDIS_DB, redis_db, K_INT, "an integer")                                              \
    X(PRECONNECT, preconnect, K_BOOL, "true or false")                                      \
    X(AUTO_EJECT_HOSTS, auto_eject_hosts, K_BOOL, "true or false")                          \
    X(SERVER_CONNECTIONS, server_connections, K_INT, "an integer")                          \
    X(SERVER_RETRY_TIMEOUT, server_retry_timeout, K_INT, "an integer")                      \
    X(SERVER_FAILURE_LIMIT, server_failure_limit, K_INT, "an integer")                      \
    X(SERVERS, servers, K_SERVERS, "a sequence of servers")                                 \
    /* chash's own keys (docs/CONFIG.md) */                                                  \
    X(VERSION, version, K_STR, "a version string")                                          \
    X(FAILOVER_DEPTH, failover_depth, K_INT, "an integer")                                  \
    X(REPLICAS, replicas, K_INT, "an integer from 1 to 8")                                  \
    X(SERVER_FAILURE_WINDOW, server_failure_window, K_INT, "an integer")                    \
    X(SERVER_RETRY_MAX, server_retry_max, K_INT, "an integer")                              \
    X(CLIENT_AUTH, client_auth, K_STR, "a string")                                          \
    X(CLIENT_AUTH_FILE, client_auth_file, K_STR, "a file name")                             \
    X(MAX_REQUEST_BYTES, max_request_bytes, K_INT, "an integer")                            \
    X(MAX_CLIENT_BUFFER_BYTES, max_client_buffer_bytes, K_INT, "an integer")                \
    X(MAX_ITEM_BYTES, max_item_bytes, K_INT, "an integer")                                  \
    X(CLIENT_IDLE_TIMEOUT, client_idle_timeout, K_INT, "an integer")                        \
    X(CLIENT_READ_TIMEOUT, client_read_timeout, K_INT, "an integer")                        \
    X(REJOIN_JOURNAL_KEYS, rejoin_journal_keys, K_INT, "an integer")                        \
    X(MAX_CLIENT_INFLIGHT_BYTES, max_client_inflight_bytes, K_INT, "an integer")            \
    X(BOUNDED_LOAD_FACTOR, bounded_load_factor, K_STR, "a number >= 1")                    \
    X(MAX_EJECTED_SHARE, max_ejected_share, K_STR, "a number from 0 to 1")                 \
    X(WARM_UP, warm_up, K_INT, "an integer")                                                \
    X(RAMP, ramp, K_INT, "an integer")                                                      \
    X(READMIT_RAMP, readmit_ramp, K_INT, "an integer")                                      \
    X(HOT_CACHE, hot_cache, K_INT, "an integer")                                            \
    X(HOT_CACHE_MAX_BYTES, hot_cache_max_bytes, K_INT, "an integer")                        \
    X(HOT_THRESHOLD, hot_threshold, K_INT, "an integer")                                    \
    X(HOT_SPREAD, hot_spread, K_BOOL, "true or false")                                      \
    X(TLS_CERT_FILE, tls_cert_file, K_STR, "a file name")                                   \
    X(TLS_KEY_FILE, tls_key_file, K_STR, "a file name")                                     \
    X(TLS_CLIENT_CA_FILE, tls_client_ca_file, K_STR, "a file name")                         \
    X(SERVER_TLS, server_tls, K_BOOL, "true or false")                                      \
    X(SERVER_TLS_VERIFY, server_tls_verify, K_BOOL, "true or false")                        \
    X(SERVER_TLS_CA_FILE, server_tls_ca_file, K_STR, "a file name")                         \
    X(SERVER_TLS_NAME, server_tls_name, K_STR, "a host name")                               \
    X(SERVER_TLS_CERT_FILE, server_tls_cert_file, K_STR, "a file name")                     \
    X(SERVER_TLS_KEY_FILE, server_tls_key_file, K_STR, "a file name")                     \
    /* fleet membership (docs/FLEET.md) */                                                   \
    X(MEMBERSHIP, membership, K_STR, "an etcd://, dns:// or dns+srv:// URL")                \
    X(MEMBERSHIP_HOLD_DOWN, membership_hold_down, K_INT, "an integer")                      \
    X(MEMBERSHIP_FENCED, membership_fenced, K_STR, "error or serve")                        \
    X(MEMBERSHIP_INTERVAL, membership_interval, K_INT, "an integer")                        \
    X(MEMBERSHIP_RESOLVER, membership_resolver, K_STR, "an ip:port address")                \
    /* shadow traffic (docs/PROXY.md) */                                                     \
    X(SHADOW, shadow, K_SHADOW, "a mapping {pool: NAME, fraction: F, writes: B}")           \
    /* the gutter pool (docs/PROXY.md, "Gutter pool") */                                     \
    X(GUTTER, gutter, K_STR, "a pool name")                                                 \
    X(GUTTER_TTL, gutter_ttl, K_INT, "an integer")                                          \
    X(EPOCH, epoch, K_STR, "an integer >= 1")                                               \
    X(HOT_KEY_SHARE, hot_key_share, K_STR, "a number from 0 to 1")                          \
    X(HOT_KEY_NAMES, hot_key_names, K_BOOL, "true or false")                                \
    X(COALESCE_READS, coalesce_reads, K_BOOL, "true or false")                              \
    X(ROUTES, routes, K_ROUTES, "a sequence of {prefix: P, pool: NAME, strip: B}")          \
    X(NEAR_TRACKING, near_tracking, K_BOOL, "true or false")

enum key_id {
#define KEY_ENUM(id, name, kind, expect) KEY_##id,
    POOL_KEYS(KEY_ENUM)
#undef KEY_ENUM
    KEY_COUNT
};

static const struct {
    const char *name;
    enum kind kind;
    const char *expect;
} keys[KEY_COUNT] = {
#define KEY_ENTRY(id, name, kind, expect) [KEY_##id] = {#name, kind, expect},
    POOL_KEYS(KEY_ENTRY)
#undef KEY_ENTRY
};

_Static_assert(KEY_COUNT <= 64, "pool_state.seen holds one bit per key");

static int key_lookup(const char *s, size_t len)
{
    for (int i = 0; i < KEY_COUNT; i++)
        if (strlen(keys[i].name) == len && memcmp(keys[i].name, s, len) == 0)
            return i;
    return -1;
}

static int *int_field(ch_conf_pool *p, int id)
{
    switch (id) {
    case KEY_TIMEOUT: return &p->timeout_ms;
    case KEY_BACKLOG: return &p->backlog;
    case KEY_CLIENT_CONNECTIONS: return &p->client_connections;
    case KEY_REDIS_DB: return &p->redis_db;
    case KEY_SERVER_CONNECTIONS: return &p->server_connections;
    case KEY_SERVER_RETRY_TIMEOUT: return &p->server_retry_timeout_ms;
    case KEY_FAILOVER_DEPTH: return &p->failover_depth;
    case KEY_REPLICAS: return &p->replicas;
    case KEY_SERVER_FAILURE_WINDOW: return &p->server_failure_window_ms;
    case KEY_SERVER_RETRY_MAX: return &p->server_retry_max_ms;
    case KEY_MAX_REQUEST_BYTES: return &p->max_request_bytes;
    case KEY_MAX_CLIENT_BUFFER_BYTES: return &p->max_client_buffer_bytes;
    case KEY_MAX_ITEM_BYTES: return &p->max_item_bytes;
    case KEY_CLIENT_IDLE_TIMEOUT: return &p->client_idle_timeout;
    case KEY_CLIENT_READ_TIMEOUT: return &p->client_read_timeout;
    case KEY_REJOIN_JOURNAL_KEYS: return &p->rejoin_journal_keys;
    case KEY_MAX_CLIENT_INFLIGHT_BYTES: return &p->max_client_inflight_bytes;
    case KEY_WARM_UP: return &p->warm_up_ms;
    case KEY_RAMP: return &p->ramp_ms;
    case KEY_READMIT_RAMP: return &p->readmit_ramp_ms;
    case KEY_HOT_CACHE: return &p->hot_cache_ms;
    case KEY_HOT_CACHE_MAX_BYTES: return &p->hot_cache_max_bytes;
    case KEY_HOT_THRESHOLD: return &p->hot_threshold;
    case KEY_MEMBERSHIP_HOLD_DOWN: return &p->membership_hold_down_ms;
    case KEY_MEMBERSHIP_INTERVAL: return &p->membership_interval_ms;
    case KEY_GUTTER_TTL: return &p->gutter_ttl_ms;
    default: return &p->server_failure_limit;
    }
}

/* The string of a TLS key. */
static char **tls_field(ch_conf_pool *p, int id)
{
    switch (id) {
    case KEY_TLS_CERT_FILE: return &p->tls_cert_file;
    case KEY_TLS_KEY_FILE: return &p->tls_key_file;
    case KEY_TLS_CLIENT_CA_FILE: return &p->tls_client_ca_file;
    case KEY_SERVER_TLS_CA_FILE: return &p->server_tls_ca_file;
    case KEY_SERVER_TLS_NAME: return &p->server_tls_name;
    case KEY_SERVER_TLS_CERT_FILE: return &p->server_tls_cert_file;
    default: return &p->server_tls_key_file;
    }
}

static bool *bool_field(ch_conf_pool *p, int id)
{
    switch (id) {
    case KEY_REDIS: return &p->redis;
    case KEY_TCPKEEPALIVE: return &p->tcpkeepalive;
    case KEY_REUSEPORT: return &p->reuseport;
    case KEY_PRECONNECT: return &p->preconnect;
    case KEY_SERVER_TLS: return &p->server_tls;
    case KEY_SERVER_TLS_VERIFY: return &p->server_tls_verify;
    case KEY_HOT_KEY_NAMES: return &p->hot_key_names;
    case KEY_HOT_SPREAD: return &p->hot_spread;
    case KEY_COALESCE_READS: return &p->coalesce_reads;
    case KEY_NEAR_TRACKING: return &p->near_tracking;
    default: return &p->auto_eject_hosts;
    }
}

/* ---- hash and distribution names ----------------------------------------------------------- */

/* Every twemproxy hash and distribution name is a libchash registry name (include/chash.h), so
 * the registries are the one list of what a pool may say. */
static bool hash_known(const char *s)
{
    ch_hash_id id;
    return ch_hash_from_name(s, &id) == CH_OK;
}

static bool dist_known(const char *s)
{
    ch_algo_id id;
    return ch_algo_from_name(s, &id) == CH_OK;
}

static const char *hash_name_i(unsigned i)
{
    return ch_hash_name((ch_hash_id)i);
}

static const char *algo_name_i(unsigned i)
{
    return ch_algo_name((ch_algo_id)i);
}

/* "unknown <what> "<value>"; expected one of: <every registry name>" into msg[cap]. When the
 * registry outgrows the message (cap: ch_config_error.message), the names that fit are followed
 * by "... and N more (`chash <lister>` lists them all)": a list is never cut silently. */
static void unknown_name_msg(char *msg, size_t cap, const char *what, const char *value,
                             const char *(*name)(unsigned), unsigned count, const char *lister)
{
    int n = snprintf(msg, cap, "unknown %s \"%s\"; expected one of:", what, value);
    size_t at = n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
    size_t all = at;
    for (unsigned i = 0; i < count; i++)
        all += 1 + strlen(name(i));
    char tail[96];
    for (unsigned i = 0; i < count; i++) {
        size_t len = 1 + strlen(name(i));
        int tl = snprintf(tail, sizeof tail, " ... and %u more (`chash %s` lists them all)",
                          count - i, lister);
        /* Room for this name, and for the tail after it unless the whole list fits. */
        if (all >= cap && at + len + (size_t)tl + 1 >= cap) {
            snprintf(msg + at, cap - at, "%s", tail);
            return;
        }
        snprintf(msg + at, cap - at, " %s", name(i));
        at += len;
    }
}

/* ---- a set of strings, for duplicates ------------------------------------------------------
 * Open addressing with linear probing; the load factor stays <= 1/2. Keys are not copied: they
 * point at strings owned by the configuration, which do not move while it is built. */
typedef struct slot {
    const char *key; /* NULL: empty slot */
    size_t len;
    size_t idx;
} slot;

typedef struct strset {
    slot *slots;
    size_t cap; /* 0 or a power of two */
    size_t n;
} strset;

static size_t key_hash(const char *key, size_t len)
{
    uint64_t h = 0;
    (void)ch_hash64(CH_HASH_XXH3, key, len, &h);
    return (size_t)h;
}

static void strset_put(slot *slots, size_t cap, slot s)
{
    size_t i = key_hash(s.key, s.len) & (cap - 1);
    while (slots[i].key != NULL)
        i = (i + 1) & (cap - 1);
    slots[i] = s;
}

/* Adds key -> idx. *found is the idx of an equal key already present (the set is then
 * unchanged), or SIZE_MAX. Returns CH_OK or CH_ENOMEM. */
static int strset_add(strset *s, const char *key, size_t len, size_t idx, size_t *found)
{
    if ((s->n + 1) * 2 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        slot *slots = xmalloc(cap * sizeof *slots);
        if (slots == NULL)
            return CH_ENOMEM;
        memset(slots, 0, cap * sizeof *slots);
        for (size_t i = 0; i < s->cap; i++)
            if (s->slots[i].key != NULL)
                strset_put(slots, cap, s->slots[i]);
        xfree(s->slots);
        s->slots = slots;
        s->cap = cap;
    }
    for (size_t i = key_hash(key, len) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
        const slot *t = &s->slots[i];
        if (t->key == NULL)
            break;
        if (t->len == len && memcmp(t->key, key, len) == 0) {
            *found = t->idx;
            return CH_OK;
        }
    }
    strset_put(s->slots, s->cap, (slot){key, len, idx});
    s->n++;
    *found = SIZE_MAX;
    return CH_OK;
}

static void strset_free(strset *s)
{
    xfree(s->slots);
    *s = (strset){0};
}

/* ---- the loader ---------------------------------------------------------------------------- */

typedef struct loader {
    const char *path;
    ch_config_error *err; /* may be NULL */
    const unsigned char *buf;
    size_t len;
    yaml_parser_t parser;
    yaml_event_t ev; /* the current event, valid when have_ev */
    bool have_ev;
    unsigned documents;
    ch_config *cfg;
    size_t pools_cap;
    size_t servers_cap; /* capacity of the servers array of the pool being loaded */
    strset pool_names;  /* pool name -> pool index */
    strset listens;     /* listen value -> pool index */
    strset servers;     /* twemproxy's server name -> server index, in the current pool */
    /* A membership document (ch_config_membership_doc) instead of a file: one mapping of the
     * membership keys (DOC_KEYS), flow style (JSON) allowed. */
    bool doc;
    unsigned depth; /* collections open at the current event (next() counts them) */
    int64_t epoch; /* the document's "epoch", 0 when absent */
    bool after_shadow; /* the event before the current one is the scalar "shadow" (a key):
                          its mapping may be written in flow style, {pool: ..., ...} */
    bool after_routes; /* the same for the scalar "routes": its sequence's entries may be
                          written in flow style, {prefix: ..., pool: ...} */
    unsigned routes_depth; /* depth of the "routes" sequence open (0: none) */
} loader;

/* The keys a membership document may hold: what placement depends on, and its epoch. */
#define DOC_KEYS                                                                            \
    ((UINT64_C(1) << KEY_SERVERS) | (UINT64_C(1) << KEY_HASH) |                             \
     (UINT64_C(1) << KEY_DISTRIBUTION) | (UINT64_C(1) << KEY_HASH_TAG) |                    \
     (UINT64_C(1) << KEY_VERSION) | (UINT64_C(1) << KEY_EPOCH))

/* Per-pool bookkeeping while its keys are read. */
typedef struct pool_state {
    uint64_t seen; /* bit i: key i was given */
    yaml_mark_t mark[KEY_COUNT];
} pool_state;

static int failv(loader *ld, int status, size_t line, size_t col, const char *fmt, va_list ap)
{
    if (ld->err != NULL) {
        snprintf(ld->err->file, sizeof ld->err->file, "%s", ld->path);
        ld->err->line = line > UINT_MAX ? UINT_MAX : (unsigned)line;
        ld->err->column = col > UINT_MAX ? UINT_MAX : (unsigned)col;
        vsnprintf(ld->err->message, sizeof ld->err->message, fmt, ap);
    }
    return status;
}

/* Records an error at 1-based line and column (0: unknown) and returns status. */
PRINTF_LIKE(5, 6)
static int fail_at(loader *ld, int status, size_t line, size_t col, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    failv(ld, status, line, col, fmt, ap);
    va_end(ap);
    return status;
}

/* Records a validation error at a libyaml mark and returns CH_EINVAL. */
PRINTF_LIKE(3, 4)
static int fail(loader *ld, yaml_mark_t m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    failv(ld, CH_EINVAL, m.line + 1, m.column + 1, fmt, ap);
    va_end(ap);
    return CH_EINVAL;
}

static int nomem(loader *ld)
{
    return fail_at(ld, CH_ENOMEM, 0, 0, "%s", ch_strerror(CH_ENOMEM));
}

static int fail_errno(loader *ld, int e)
{
    char msg[200];
    if (strerror_r(e, msg, sizeof msg) != 0)
        snprintf(msg, sizeof msg, "error %d", e);
    return fail_at(ld, CH_EINVAL, 0, 0, "%s", msg);
}

/* The 1-based line and column of byte offset off of the input; columns count characters. */
static void offset_pos(const loader *ld, size_t off, size_t *line, size_t *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off && i < ld->len; i++) {
        if (ld->buf[i] == '\n')
            ++*line, *col = 1;
        else if ((ld->buf[i] & 0xC0) != 0x80)
            ++*col;
    }
}

static int yaml_fail(loader *ld)
{
    const yaml_parser_t *p = &ld->parser;
    const char *problem = p->problem != NULL ? p->problem : "unknown error";
    size_t line, col;
    switch (p->error) {
    case YAML_MEMORY_ERROR:
        return nomem(ld);
    case YAML_READER_ERROR:
        offset_pos(ld, p->problem_offset, &line, &col);
        if (p->problem_value >= 0)
            return fail_at(ld, CH_EINVAL, line, col, "invalid input: %s (0x%02X)", problem,
                           (unsigned)p->problem_value);
        return fail_at(ld, CH_EINVAL, line, col, "invalid input: %s", problem);
    default:
        if (p->context != NULL)
            return fail(ld, p->problem_mark, "YAML syntax error: %s (%s at line %zu, column %zu)",
                        problem, p->context, p->context_mark.line + 1,
                        p->context_mark.column + 1);
        return fail(ld, p->problem_mark, "YAML syntax error: %s", problem);
    }
}

/* Anchors and tags are refused on every node, as twemproxy does. */
static int check_props(loader *ld, const yaml_char_t *anchor, const yaml_char_t *tag)
{
    char q[QB];
    if (anchor != NULL)
        return fail(ld, ld->ev.start_mark,
                    "anchors (&%s) are not allowed in a config (twemproxy rejects them)",
                    ch__conf_quote(q, sizeof q, (const char *)anchor, strlen((const char *)anchor)));
    if (tag != NULL)
        return fail(ld, ld->ev.start_mark,
                    "tags (%s) are not allowed in a config (twemproxy rejects them)",
                    ch__conf_quote(q, sizeof q, (const char *)tag, strlen((const char *)tag)));
    return CH_OK;
}

/* Counts a collection that opens at the current event, refusing one that would nest deeper than
 * CH_CONFIG_MAX_DEPTH. */
static int open_collection(loader *ld)
{
    if (++ld->depth > CH_CONFIG_MAX_DEPTH)
        return fail(ld, ld->ev.start_mark, "nesting deeper than %d levels, the limit "
                    "(CH_CONFIG_MAX_DEPTH)", CH_CONFIG_MAX_DEPTH);
    return CH_OK;
}

/* Moves to the next event and refuses the YAML features twemproxy's loader refuses: document
 * markers and directives, a second document, anchors, aliases, tags and flow collections; and
 * nesting deeper than CH_CONFIG_MAX_DEPTH. */
static int next(loader *ld)
{
    if (ld->have_ev) {
        yaml_event_delete(&ld->ev);
        ld->have_ev = false;
    }
    if (!yaml_parser_parse(&ld->parser, &ld->ev))
        return yaml_fail(ld);
    ld->have_ev = true;

    const yaml_event_t *e = &ld->ev;
    char q[QB];
    bool shadow_value = ld->after_shadow, routes_value = ld->after_routes;
    ld->after_shadow = ld->after_routes = false;
    switch (e->type) {
    case YAML_DOCUMENT_START_EVENT:
        if (++ld->documents > 1)
            return fail(ld, e->start_mark, "a second YAML document: a config holds exactly one");
        if (e->data.document_start.version_directive != NULL ||
            e->data.document_start.tag_directives.start != e->data.document_start.tag_directives.end)
            return fail(ld, e->start_mark,
                        "directives (%%YAML, %%TAG) are not allowed (twemproxy rejects them)");
        if (!e->data.document_start.implicit)
            return fail(ld, e->start_mark,
                        "the document marker \"---\" is not allowed (twemproxy rejects it)");
        return CH_OK;
    case YAML_DOCUMENT_END_EVENT:
        if (!e->data.document_end.implicit)
            return fail(ld, e->start_mark,
                        "the document marker \"...\" is not allowed (twemproxy rejects it)");
        return CH_OK;
    case YAML_ALIAS_EVENT:
        return fail(ld, e->start_mark,
                    "aliases (*%s) are not allowed in a config (twemproxy rejects them)",
                    ch__conf_quote(q, sizeof q, (const char *)e->data.alias.anchor,
                                   strlen((const char *)e->data.alias.anchor)));
    case YAML_SCALAR_EVENT:
        ld->after_shadow = e->data.scalar.length == 6 &&
                           memcmp(e->data.scalar.value, "shadow", 6) == 0;
        ld->after_routes = e->data.scalar.length == 6 &&
                           memcmp(e->data.scalar.value, "routes", 6) == 0;
        return check_props(ld, e->data.scalar.anchor, e->data.scalar.tag);
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        if (ld->depth == ld->routes_depth)
            ld->routes_depth = 0;
        ld->depth--;
        return CH_OK;
    case YAML_SEQUENCE_START_EVENT:
        if (open_collection(ld) != CH_OK)
            return CH_EINVAL;
        if (routes_value && ld->routes_depth == 0)
            ld->routes_depth = ld->depth;
        if (e->data.sequence_start.style == YAML_FLOW_SEQUENCE_STYLE && !ld->doc)
            return fail(ld, e->start_mark,
                        "flow sequences [...] are not allowed (twemproxy rejects them); write one "
                        "\"- item\" per line, or quote a value that starts with '['");
        return check_props(ld, e->data.sequence_start.anchor, e->data.sequence_start.tag);
    case YAML_MAPPING_START_EVENT:
        if (open_collection(ld) != CH_OK)
            return CH_EINVAL;
        if (e->data.mapping_start.style == YAML_FLOW_MAPPING_STYLE && !ld->doc && !shadow_value &&
            !(ld->routes_depth != 0 && ld->depth == ld->routes_depth + 1))
            return fail(ld, e->start_mark,
                        "flow mappings {...} are not allowed (twemproxy rejects them); quote a "
                        "value that starts with '{', e.g. hash_tag: \"{}\"");
        return check_props(ld, e->data.mapping_start.anchor, e->data.mapping_start.tag);
    default:
        return CH_OK;
    }
}

static bool is_empty_scalar(const yaml_event_t *e)
{
    return e->type == YAML_SCALAR_EVENT && e->data.scalar.length == 0;
}

/* What the current event is, for "expected ..., got X" messages. */
static const char *got(const loader *ld, char *buf, size_t cap)
{
    const yaml_event_t *e = &ld->ev;
    switch (e->type) {
    case YAML_MAPPING_START_EVENT:
        return "a mapping";
    case YAML_SEQUENCE_START_EVENT:
        return "a sequence";
    case YAML_SCALAR_EVENT:
        if (e->data.scalar.length == 0)
            return "an empty value";
        buf[0] = '"';
        ch__conf_quote(buf + 1, cap - 2, (const char *)e->data.scalar.value, e->data.scalar.length);
        strcat(buf, "\"");
        return buf;
    default:
        return "nothing";
    }
}

/* Where to report a bad value: the value itself, or its key when the value is an empty plain
 * scalar (libyaml places those after the colon or on the next line). */
static yaml_mark_t value_mark(const loader *ld, yaml_mark_t key_mark)
{
    const yaml_event_t *e = &ld->ev;
    if (is_empty_scalar(e) && e->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
        return key_mark;
    return e->start_mark;
}

/* Appends a pool with twemproxy's defaults; it is counted before anything is allocated. */
static int pool_new(loader *ld, ch_conf_pool **out)
{
    ch_config *c = ld->cfg;
    if (c->npools == ld->pools_cap) {
        size_t cap = ld->pools_cap ? ld->pools_cap * 2 : 4;
        ch_conf_pool *pools = xrealloc(c->pools, cap * sizeof *pools);
        if (pools == NULL)
            return nomem(ld);
        c->pools = pools;
        ld->pools_cap = cap;
    }
    ch_conf_pool *p = &c->pools[c->npools++];
    memset(p, 0, sizeof *p);
    p->timeout_ms = -1;
    p->backlog = 512;
    p->client_connections = 0;
    p->redis_db = 0;
    p->server_connections = 1;
    p->server_retry_timeout_ms = 30000;
    p->server_failure_limit = 2;
    p->listen_perm = -1;
    p->failover_depth = 2;
    p->replicas = 1;
    p->server_failure_window_ms = 10000;
    p->server_retry_max_ms = 60000;
    p->max_request_bytes = CH_CONF_DEFAULT_MAX_REQUEST_BYTES;
    p->max_client_buffer_bytes = CH_CONF_DEFAULT_MAX_CLIENT_BUFFER_BYTES;
    p->max_item_bytes = CH_CONF_DEFAULT_MAX_ITEM_BYTES;
    p->client_idle_timeout = 0;
    p->server_tls_verify = true;
    p->client_read_timeout = CH_CONF_DEFAULT_CLIENT_READ_TIMEOUT;
    p->rejoin_journal_keys = CH_CONF_DEFAULT_REJOIN_JOURNAL_KEYS;
    p->max_client_inflight_bytes = CH_CONF_DEFAULT_MAX_CLIENT_INFLIGHT_BYTES;
    p->max_ejected_share = CH_CONF_DEFAULT_MAX_EJECTED_SHARE;
    p->hot_key_share = CH_CONF_DEFAULT_HOT_KEY_SHARE;
    p->hot_cache_max_bytes = CH_CONF_DEFAULT_HOT_CACHE_BYTES;
    p->hot_threshold = CH_CONF_DEFAULT_HOT_THRESHOLD;
    p->coalesce_reads = true;
    p->near_tracking = true;
    p->membership_hold_down_ms = CH_CONF_DEFAULT_MEMBERSHIP_HOLD_DOWN;
    p->membership_interval_ms = CH_CONF_DEFAULT_MEMBERSHIP_INTERVAL;
    p->gutter_ttl_ms = CH_CONF_DEFAULT_GUTTER_TTL;
    ld->servers_cap = 0;
    p->hash = dupn("fnv1a_64", 8);
    p->distribution = dupn("ketama", 6);
    if (p->hash == NULL || p->distribution == NULL)
        return nomem(ld);
    *out = p;
    return CH_OK;
}

static int load_listen(loader *ld, ch_conf_pool *p, const char *v, size_t len)
{
    char why[160], q[QB], q2[QB], q3[QB];
    ch__conf_addr a;
    yaml_mark_t m = ld->ev.start_mark;
    if (!ch__conf_parse_listen(v, len, &a, why, sizeof why))
        return fail(ld, m, "invalid listen address \"%s\" in pool \"%s\": %s",
                    ch__conf_quote(q, sizeof q, v, len),
                    ch__conf_quote(q2, sizeof q2, p->name, strlen(p->name)), why);
    p->listen = dupn(v, len);
    p->listen_host = dupn(a.host, a.host_len);
    if (p->listen == NULL || p->listen_host == NULL)
        return nomem(ld);
    p->listen_port = a.port;
    p->listen_perm = a.perm;
    size_t first;
    if (strset_add(&ld->listens, p->listen, len, (size_t)(p - ld->cfg->pools), &first) != CH_OK)
        return nomem(ld);
    if (first != SIZE_MAX) {
        const char *other = ld->cfg->pools[first].name;
        return fail(ld, m, "pools \"%s\" and \"%s\" have the same listen address \"%s\"",
                    ch__conf_quote(q, sizeof q, other, strlen(other)),
                    ch__conf_quote(q2, sizeof q2, p->name, strlen(p->name)),
                    ch__conf_quote(q3, sizeof q3, v, len));
    }
    return CH_OK;
}

/* A scalar value of a key other than "servers"; the value is not empty and holds no NUL. */

/* A finite decimal number: s[0, len) wholly, as strtod reads it from a bounded copy (hex, inf
 * and nan refused, as are trailing characters). */
static bool parse_number(const char *s, size_t len, double *out)
{
    char buf[64], *end;
    if (len == 0 || len >= sizeof buf || strspn(s, "0123456789.eE+-") < len)
        return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    errno = 0;
    double d = strtod(buf, &end);
    if (end != buf + len || errno != 0 || !isfinite(d))
        return false;
    *out = d;
    return true;
}

/* "membership: dns://name:port" (every A and AAAA record of name, a server on port) or
 * "membership: dns+srv://name" (every SRV record of name: its target and port). The name
 * is a DNS name: letters, digits, '-', '_' and '.', 1 to 253 characters, no empty label. */
static int load_membership_dns(loader *ld, ch_conf_pool *p, const char *v, size_t len, bool srv)
{
    yaml_mark_t m = ld->ev.start_mark;
    char q[QB];
    size_t sl = srv ? sizeof("dns+srv://") - 1 : sizeof("dns://") - 1;
    const char *name = v + sl, *end = v + len;
    const char *colon = srv ? NULL : memchr(name, ':', (size_t)(end - name));
    const char *nend = colon != NULL ? colon : end;
    size_t nl = (size_t)(nend - name);
    bool ok = nl >= 1 && nl <= 253 && name[0] != '.';
    for (size_t i = 0; ok && i < nl; i++)
        ok = (name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
             (name[i] >= '0' && name[i] <= '9') || name[i] == '-' || name[i] == '_' ||
             (name[i] == '.' && name[i - 1] != '.');
    int port = 0;
    if (ok && !srv) {
        ok = colon != NULL && colon + 1 < end && (size_t)(end - colon - 1) <= 5;
        for (const char *c = colon != NULL ? colon + 1 : end; ok && c < end; c++) {
            ok = *c >= '0' && *c <= '9';
            port = port * 10 + (*c - '0');
        }
        ok = ok && port >= 1 && port <= 65535;
    }
    if (!ok)
        return fail(ld, m,
                    srv ? "\"membership\": expected dns+srv://name with a DNS name (letters, "
                          "digits, '-', '_', '.'), got \"%s\""
                        : "\"membership\": expected dns://name:port with a DNS name (letters, "
                          "digits, '-', '_', '.') and a port from 1 to 65535, got \"%s\"",
                    ch__conf_quote(q, sizeof q, v, len));
    if ((p->membership = dupn(v, len)) == NULL || (p->membership_endpoint = dupn(name, nl)) == NULL)
        return nomem(ld);
    p->membership_scheme = srv ? CH_CONF_MEMBERSHIP_DNS_SRV : CH_CONF_MEMBERSHIP_DNS;
    p->membership_port = port;
    return CH_OK;
}

/* "membership_resolver": the DNS server a dns:// or dns+srv:// membership asks, an IPv4
 * address or a bracketed IPv6 one, and a port: "127.0.0.1:5353", "[::1]:53". */
static int load_resolver(loader *ld, ch_conf_pool *p, const char *v, size_t len)
{
    char q[QB], host[64];
    struct in6_addr six;
    struct in_addr four;
    /* "[v6]:port" or "v4:port": the host is what the brackets or the last ':' enclose */
    bool v6 = len > 0 && v[0] == '[';
    const char *close = v6 ? memchr(v, ']', len) : NULL;
    const char *colon = v6 ? (close != NULL && close + 1 < v + len && close[1] == ':' ? close + 1
                                                                                      : NULL)
                           : memchr(v, ':', len); /* IPv4: one colon */
    const char *h = v6 ? v + 1 : v;
    size_t hl = colon == NULL ? 0 : (size_t)((v6 ? close : colon) - h);
    bool ok = colon != NULL && hl > 0 && hl < sizeof host;
    int port = 0;
    size_t pl = ok ? len - (size_t)(colon + 1 - v) : 0;
    ok = ok && pl >= 1 && pl <= 5;
    for (size_t i = 0; ok && i < pl; i++) {
        ok = colon[1 + i] >= '0' && colon[1 + i] <= '9';
        port = port * 10 + (colon[1 + i] - '0');
    }
    if (ok) {
        memcpy(host, h, hl);
        host[hl] = '\0';
        ok = port >= 1 && port <= 65535 &&
             (v6 ? inet_pton(AF_INET6, host, &six) == 1 : inet_pton(AF_INET, host, &four) == 1);
    }
    if (!ok)
        return fail(ld, ld->ev.start_mark,
                    "\"membership_resolver\": expected a DNS server's ip:port (\"127.0.0.1:53\", "
                    "\"[::1]:53\"), got \"%s\"",
                    ch__conf_quote(q, sizeof q, v, len));
    if ((p->membership_resolver = dupn(v, len)) == NULL)
        return nomem(ld);
    return CH_OK;
}

/* "membership": etcd://host:port/key, the key printable ASCII without spaces, not ending in
 * '/' (instance records live under "<key>/"); or a DNS name (load_membership_dns). */
static int load_membership(loader *ld, ch_conf_pool *p, const char *v, size_t len)
{
    if (len >= 6 && memcmp(v, "dns://", 6) == 0)
        return load_membership_dns(ld, p, v, len, false);
    if (len >= 10 && memcmp(v, "dns+srv://", 10) == 0)
        return load_membership_dns(ld, p, v, len, true);
    static const char scheme[] = "etcd://";
    const size_t sl = sizeof(scheme) - 1;
    yaml_mark_t m = ld->ev.start_mark;
    char q[QB], why[160];
    const char *slash = len > sl && memcmp(v, scheme, sl) == 0 ? memchr(v + sl, '/', len - sl)
                                                               : NULL;
    if (slash == NULL)
        return fail(ld, m,
                    "expected an etcd://host:port/key, dns://name:port or dns+srv://name URL for "
                    "\"membership\", got \"%s\"",
                    ch__conf_quote(q, sizeof q, v, len));
    ch__conf_addr a;
    size_t hl = (size_t)(slash - (v + sl)), kl = len - (size_t)(slash - v);
    if (!ch__conf_parse_listen(v + sl, hl, &a, why, sizeof why) || a.port == 0)
        return fail(ld, m,
                    "\"membership\": expected etcd://host:port/key with etcd's client address "
                    "as host:port, got \"%s\"",
                    ch__conf_quote(q, sizeof q, v, len));
    bool ok = kl > 1 && slash[kl - 1] != '/';
    for (size_t i = 0; ok && i < kl; i++)
        ok = slash[i] > 0x20 && slash[i] < 0x7f;
    if (!ok)
        return fail(ld, m,
                    "\"membership\": expected a key after host:port (printable, no spaces, not "
                    "ending in '/'), got \"%s\"",
                    ch__conf_quote(q, sizeof q, v, len));
    if ((p->membership = dupn(v, len)) == NULL || (p->membership_endpoint = dupn(v + sl, hl)) == NULL ||
        (p->membership_key = dupn(slash, kl)) == NULL)
        return nomem(ld);
    return CH_OK;
}

static int load_value(loader *ld, ch_conf_pool *p, int id)
{
    const yaml_event_t *e = &ld->ev;
    const char *v = (const char *)e->data.scalar.value;
    size_t len = e->data.scalar.length;
    const char *k = keys[id].name;
    yaml_mark_t m = e->start_mark;
    char q[QB], names[sizeof ld->err->message]; /* a message, as ch_config_error holds it */
    int n, rc;

    switch (keys[id].kind) {
    case K_INT: {
        int min = id == KEY_SERVER_CONNECTIONS || id == KEY_FAILOVER_DEPTH || id == KEY_REPLICAS ||
                          id == KEY_SERVER_FAILURE_WINDOW || id == KEY_SERVER_RETRY_MAX ||
                          id == KEY_MAX_REQUEST_BYTES || id == KEY_MAX_CLIENT_BUFFER_BYTES ||
                          id == KEY_MAX_ITEM_BYTES || id == KEY_MAX_CLIENT_INFLIGHT_BYTES ||
                          id == KEY_HOT_CACHE_MAX_BYTES || id == KEY_HOT_THRESHOLD ||
                          id == KEY_GUTTER_TTL
                      ? 1
                  : id == KEY_MEMBERSHIP_INTERVAL ? CH_CONF_MIN_MEMBERSHIP_INTERVAL
                                                  : 0;
        rc = ch__conf_parse_int(v, len, &n);
        if (rc == CH__NUM_BAD)
            return fail(ld, m, "expected an integer for \"%s\", got \"%s\"", k,
                        ch__conf_quote(q, sizeof q, v, len));
        if (rc == CH__NUM_NEG || (rc == CH__NUM_OK && n < min))
            return fail(ld, m, "expected an integer >= %d for \"%s\", got \"%s\"", min, k,
                        ch__conf_quote(q, sizeof q, v, len));
        int max = id == KEY_WARM_UP || id == KEY_RAMP || id == KEY_READMIT_RAMP ||
                          id == KEY_GUTTER_TTL ||
                          id == KEY_MEMBERSHIP_INTERVAL
                      ? CH_CONF_MAX_WINDOW_MS
                  : id == KEY_REPLICAS                 ? CH_CONF_MAX_REPLICAS
                  : id == KEY_HOT_CACHE                ? CH_CONF_MAX_HOT_CACHE_MS
                                                       : INT_MAX;
        if (rc == CH__NUM_RANGE || (rc == CH__NUM_OK && n > max))
            return fail(ld, m, "expected an integer <= %d%s for \"%s\", got \"%s\"", max,
                        max == CH_CONF_MAX_WINDOW_MS     ? " (a day, in ms)"
                        : max == CH_CONF_MAX_HOT_CACHE_MS ? " (an hour, in ms)"
                                                          : "",
                        k,
                        ch__conf_quote(q, sizeof q, v, len));
        *int_field(p, id) = n;
        return CH_OK;
    }
    case K_BOOL:
        if (len == 4 && memcmp(v, "true", 4) == 0)
            *bool_field(p, id) = true;
        else if (len == 5 && memcmp(v, "false", 5) == 0)
            *bool_field(p, id) = false;
        else
            return fail(ld, m, "expected true or false for \"%s\", got \"%s\"", k,
                        ch__conf_quote(q, sizeof q, v, len));
        return CH_OK;
    default:
        break;
    }

    switch (id) {
    case KEY_LISTEN:
        return load_listen(ld, p, v, len);
    case KEY_HASH:
        xfree(p->hash);
        if ((p->hash = dupn(v, len)) == NULL)
            return nomem(ld);
        if (!hash_known(p->hash)) {
            unknown_name_msg(names, sizeof names, "hash", ch__conf_quote(q, sizeof q, v, len),
                             hash_name_i, CH_HASH_COUNT_, "hashes");
            return fail(ld, m, "%s", names);
        }
        return CH_OK;
    case KEY_DISTRIBUTION:
        xfree(p->distribution);
        if ((p->distribution = dupn(v, len)) == NULL)
            return nomem(ld);
        if (!dist_known(p->distribution)) {
            unknown_name_msg(names, sizeof names, "distribution",
                             ch__conf_quote(q, sizeof q, v, len), algo_name_i, CH_ALGO_COUNT_,
                             "algorithms");
            return fail(ld, m, "%s", names);
        }
        return CH_OK;
    case KEY_HASH_TAG:
        if (len != 2)
            return fail(ld, m, "expected 2 characters for \"hash_tag\" (e.g. \"{}\"), got \"%s\"",
                        ch__conf_quote(q, sizeof q, v, len));
        return (p->hash_tag = dupn(v, len)) == NULL ? nomem(ld) : CH_OK;
    case KEY_VERSION:
        if (len >= CH_VERSION_MAX)
            return fail(ld, m, "expected a version of at most %d characters, got \"%s\"",
                        CH_VERSION_MAX - 1, ch__conf_quote(q, sizeof q, v, len));
        for (size_t i = 0; i < len; i++)
            if (v[i] < 0x21 || v[i] > 0x7e)
                return fail(ld, m,
                            "expected a version of printable characters without spaces, got "
                            "\"%s\"",
                            ch__conf_quote(q, sizeof q, v, len));
        return (p->version = dupn(v, len)) == NULL ? nomem(ld) : CH_OK;
    case KEY_CLIENT_AUTH:
        return (p->client_auth = dupn(v, len)) == NULL ? nomem(ld) : CH_OK;
    case KEY_CLIENT_AUTH_FILE: /* read by chash-proxy, which names this place in its errors */
        if (len == 0 || memchr(v, '\0', len) != NULL)
            return fail(ld, m, "expected %s for \"%s\", got \"%s\"", keys[id].expect, k,
                        ch__conf_quote(q, sizeof q, v, len));
        xfree(p->client_auth_file);
        return (p->client_auth_file = dupn(v, len)) == NULL ? nomem(ld) : CH_OK;
    case KEY_GUTTER: /* the pool named is checked once the whole file is read (check_refs) */
        p->gutter_line = (unsigned)(m.line + 1);
        p->gutter_column = (unsigned)(m.column + 1);
        return (p->gutter_pool = dupn(v, len)) == NULL ? nomem(ld) : CH_OK;
    case KEY_TLS_CERT_FILE:
    case KEY_TLS_KEY_FILE:
    case KEY_TLS_CLIENT_CA_FILE:
    case KEY_SERVER_TLS_CA_FILE:
    case KEY_SERVER_TLS_NAME:
    case KEY_SERVER_TLS_CERT_FILE:
    case KEY_SERVER_TLS_KEY_FILE: {
        char **f = tls_field(p, id);
        if (len == 0 || memchr(v, '\0', len) != NULL)
            return fail(ld, m, "expected %s for \"%s\", got \"%s\"", keys[id].expect, k,
                        ch__conf_quote(q, sizeof q, v, len));
        xfree(*f);
        return (*f = dupn(v, len)) == NULL ? nomem(ld) : CH_OK;
    }
    case KEY_BOUNDED_LOAD_FACTOR: {
        double d = 0;
        if (!parse_number(v, len, &d) || !(d == 0 || d >= 1))
            return fail(ld, m,
                        "expected a number >= 1 (or 0: off) for \"bounded_load_factor\", got "
                        "\"%s\"",
                        ch__conf_quote(q, sizeof q, v, len));
        p->bounded_load_factor = d;
        return CH_OK;
    }
    case KEY_MAX_EJECTED_SHARE: {
        double d = 0;
        if (!parse_number(v, len, &d) || !(d >= 0 && d <= 1))
            return fail(ld, m,
                        "expected a number from 0 to 1 for \"max_ejected_share\", got \"%s\"",
                        ch__conf_quote(q, sizeof q, v, len));
        p->max_ejected_share = d;
        return CH_OK;
    }
    case KEY_HOT_KEY_SHARE: {
        double d = 0;
        if (!parse_number(v, len, &d) || !(d >= 0 && d <= 1))
            return fail(ld, m,
                        "expected a number from 0 to 1 for \"hot_key_share\", got \"%s\"",
                        ch__conf_quote(q, sizeof q, v, len));
        p->hot_key_share = d;
        return CH_OK;
    }
    case KEY_MEMBERSHIP:
        return load_membership(ld, p, v, len);
    case KEY_MEMBERSHIP_RESOLVER:
        return load_resolver(ld, p, v, len);
    case KEY_MEMBERSHIP_FENCED:
        if (len == 5 && memcmp(v, "error", 5) == 0)
            p->membership_fenced = CH_CONF_FENCED_ERROR;
        else if (len == 5 && memcmp(v, "serve", 5) == 0)
            p->membership_fenced = CH_CONF_FENCED_SERVE;
        else
            return fail(ld, m,
                        "expected error (refuse requests while the membership cannot be proven "
                        "current: the default) or serve (answer from it anyway) for "
                        "\"membership_fenced\", got \"%s\"",
                        ch__conf_quote(q, sizeof q, v, len));
        return CH_OK;
    case KEY_EPOCH: {
        int64_t ep = 0;
        for (size_t i = 0; i < len && ep >= 0; i++)
            ep = v[i] >= '0' && v[i] <= '9' && ep <= (INT64_MAX - 9) / 10 ? ep * 10 + (v[i] - '0')
                                                                       : -1;
        if (ep < 1)
            return fail(ld, m, "expected an integer from 1 to %lld for \"epoch\", got \"%s\"",
                        (long long)(INT64_MAX - 9) / 10, ch__conf_quote(q, sizeof q, v, len));
        ld->epoch = ep;
        return CH_OK;
    }
    default: /* KEY_REDIS_AUTH */
        return (p->redis_auth = dupn(v, len)) == NULL ? nomem(ld) : CH_OK;
    }
}

/* One entry of "servers": the current event, a non-empty scalar. */
static int load_server(loader *ld, ch_conf_pool *p)
{
    const yaml_event_t *e = &ld->ev;
    const char *v = (const char *)e->data.scalar.value;
    size_t len = e->data.scalar.length;
    yaml_mark_t m = e->start_mark;
    char why[160], q[QB], q2[QB], q3[QB];
    ch__conf_addr a;

    if (!ch__conf_parse_server(v, len, &a, why, sizeof why))
        return fail(ld, m, "invalid server \"%s\" in pool \"%s\": %s",
                    ch__conf_quote(q, sizeof q, v, len),
                    ch__conf_quote(q2, sizeof q2, p->name, strlen(p->name)), why);
    if (p->nservers == ld->servers_cap) {
        size_t cap = ld->servers_cap ? ld->servers_cap * 2 : 8;
        ch_conf_server *s = xrealloc(p->servers, cap * sizeof *s);
        if (s == NULL)
            return nomem(ld);
        p->servers = s;
        ld->servers_cap = cap;
    }
    size_t idx = p->nservers++;
    ch_conf_server *s = &p->servers[idx];
    memset(s, 0, sizeof *s);
    s->port = a.port;
    s->weight = a.weight;
    s->line = (unsigned)(m.line + 1);
    s->addr = dupn(v, a.addr_len);
    s->host = dupn(a.host, a.host_len);
    if (a.name != NULL)
        s->name = dupn(a.name, a.name_len);
    if (s->addr == NULL || s->host == NULL || (a.name != NULL && s->name == NULL))
        return nomem(ld);

    /* twemproxy names an unnamed server by "host:port" as written, by "host" alone when the
     * port is 11211 (libmemcached's ketama), and a unix socket by its path and a ':' (it appends
     * the separator of a port the socket has not); it refuses two servers with the same name. */
    size_t klen = s->name != NULL ? a.name_len : a.addr_len;
    if (s->name == NULL && a.port == 11211)
        klen = (size_t)(strrchr(s->addr, ':') - s->addr);
    if ((s->id = xmalloc(klen + 2)) == NULL)
        return nomem(ld);
    memcpy(s->id, s->name != NULL ? s->name : s->addr, klen);
    if (s->name == NULL && a.port == 0)
        s->id[klen++] = ':';
    s->id[klen] = '\0';
    const char *key = s->id;
    size_t first;
    if (strset_add(&ld->servers, key, klen, idx, &first) != CH_OK)
        return nomem(ld);
    if (first == SIZE_MAX)
        return CH_OK;

    const ch_conf_server *f = &p->servers[first];
    const char *pool = ch__conf_quote(q2, sizeof q2, p->name, strlen(p->name));
    if (s->name != NULL && f->name != NULL)
        return fail(ld, m, "duplicate server name \"%s\" in pool \"%s\" (first on line %u)",
                    ch__conf_quote(q, sizeof q, key, klen), pool, f->line);
    if (s->name == NULL && f->name == NULL)
        return fail(ld, m, "duplicate server \"%s\" in pool \"%s\" (first on line %u)",
                    ch__conf_quote(q, sizeof q, s->addr, a.addr_len), pool, f->line);
    if (s->name != NULL)
        return fail(ld, m,
                    "server name \"%s\" in pool \"%s\" is the name twemproxy gives the unnamed "
                    "server on line %u",
                    ch__conf_quote(q, sizeof q, key, klen), pool, f->line);
    return fail(ld, m,
                "unnamed server \"%s\" in pool \"%s\" is named \"%s\" by twemproxy, as is the "
                "server on line %u",
                ch__conf_quote(q, sizeof q, s->addr, a.addr_len), pool,
                ch__conf_quote(q3, sizeof q3, key, klen), f->line);
}

/* twemproxy's order of a pool's servers: it sorts them by name, shorter names first, then
 * bytewise (to find duplicates), and its distributions index that sorted list. */
static int id_cmp(const void *a, const void *b)
{
    const ch_conf_server *x = *(const ch_conf_server *const *)a;
    const ch_conf_server *y = *(const ch_conf_server *const *)b;
    size_t lx = strlen(x->id), ly = strlen(y->id);
    if (lx != ly)
        return lx < ly ? -1 : 1;
    return memcmp(x->id, y->id, lx);
}

static int twemproxy_order(ch_conf_pool *p)
{
    const ch_conf_server **by = xmalloc(p->nservers * sizeof(*by));
    if (by == NULL || (p->order = xmalloc(p->nservers * sizeof(*p->order))) == NULL) {
        xfree(by);
        return CH_ENOMEM;
    }
    for (size_t i = 0; i < p->nservers; i++)
        by[i] = &p->servers[i];
    qsort(by, p->nservers, sizeof(*by), id_cmp); /* ids are unique: the order is total */
    for (size_t i = 0; i < p->nservers; i++)
        p->order[i] = (size_t)(by[i] - p->servers);
    xfree(by);
    return CH_OK;
}

/* The value of "servers" (the current event): a block sequence of non-empty scalars. */
static int load_servers(loader *ld, ch_conf_pool *p, yaml_mark_t key_mark)
{
    char g[QB + 2], q[QB];
    int rc;
    if (ld->ev.type != YAML_SEQUENCE_START_EVENT)
        return fail(ld, value_mark(ld, key_mark),
                    "expected a sequence of servers for \"servers\", got %s", got(ld, g, sizeof g));
    strset_free(&ld->servers);
    for (;;) {
        if ((rc = next(ld)) != CH_OK)
            return rc;
        if (ld->ev.type == YAML_SEQUENCE_END_EVENT)
            return CH_OK;
        if (ld->ev.type != YAML_SCALAR_EVENT || is_empty_scalar(&ld->ev))
            return fail(ld, ld->ev.start_mark,
                        "expected a server \"host:port:weight [name]\" in pool \"%s\", got %s",
                        ch__conf_quote(q, sizeof q, p->name, strlen(p->name)),
                        got(ld, g, sizeof g));
        if ((rc = load_server(ld, p)) != CH_OK)
            return rc;
    }
}

/* "shadow": a mapping of pool (required), fraction (required, (0, 1]) and writes (optional). The
 * pool named is checked once the whole file is read (check_shadows). */
static int load_shadow(loader *ld, ch_conf_pool *p, yaml_mark_t key_mark)
{
    const yaml_event_t *e = &ld->ev;
    char g[QB + 2], q[QB];
    int rc;
    if (e->type != YAML_MAPPING_START_EVENT)
        return fail(ld, value_mark(ld, key_mark),
                    "expected a mapping {pool: NAME, fraction: F, writes: B} for \"shadow\", got %s",
                    got(ld, g, sizeof g));
    yaml_mark_t start = e->start_mark;
    bool fraction = false;
    for (;;) {
        if ((rc = next(ld)) != CH_OK)
            return rc;
        if (e->type == YAML_MAPPING_END_EVENT)
            break;
        if (e->type != YAML_SCALAR_EVENT)
            return fail(ld, e->start_mark, "expected a key of \"shadow\", got %s",
                        got(ld, g, sizeof g));
        char k[16];
        snprintf(k, sizeof(k), "%.*s", (int)(e->data.scalar.length < 15 ? e->data.scalar.length
                                                                       : 15),
                 (const char *)e->data.scalar.value);
        yaml_mark_t km = e->start_mark;
        bool known = strcmp(k, "pool") == 0 || strcmp(k, "fraction") == 0 ||
                     strcmp(k, "writes") == 0;
        if (!known || e->data.scalar.length >= 15)
            return fail(ld, km, "unknown key \"%s\" in \"shadow\" (pool, fraction, writes)",
                        ch__conf_quote(q, sizeof q, (const char *)e->data.scalar.value,
                                       e->data.scalar.length));
        if ((rc = next(ld)) != CH_OK)
            return rc;
        if (e->type != YAML_SCALAR_EVENT || e->data.scalar.length == 0)
            return fail(ld, value_mark(ld, km), "expected a value for \"shadow\"'s \"%s\", got %s",
                        k, got(ld, g, sizeof g));
        const char *v = (const char *)e->data.scalar.value;
        size_t len = e->data.scalar.length;
        yaml_mark_t vm = e->start_mark;
        if (strcmp(k, "pool") == 0) {
            xfree(p->shadow_pool);
            if ((p->shadow_pool = dupn(v, len)) == NULL)
                return nomem(ld);
        } else if (strcmp(k, "fraction") == 0) {
            double d = 0;
            if (!parse_number(v, len, &d) || !(d > 0 && d <= 1))
                return fail(ld, vm,
                            "expected a number above 0 and at most 1 for \"shadow\"'s "
                            "\"fraction\", got \"%s\"",
                            ch__conf_quote(q, sizeof q, v, len));
            p->shadow_fraction = d;
            fraction = true;
        } else if (len == 4 && memcmp(v, "true", 4) == 0) {
            p->shadow_writes = true;
        } else if (len == 5 && memcmp(v, "false", 5) == 0) {
            p->shadow_writes = false;
        } else {
            return fail(ld, vm, "expected true or false for \"shadow\"'s \"writes\", got \"%s\"",
                        ch__conf_quote(q, sizeof q, v, len));
        }
    }
    if (p->shadow_pool == NULL || !fraction)
        return fail(ld, start, "\"shadow\" needs \"pool\" and \"fraction\"");
    p->shadow_line = (unsigned)(start.line + 1);
    p->shadow_column = (unsigned)(start.column + 1);
    return CH_OK;
}

/* One entry of "routes" (the current event, a mapping): prefix and pool (required; the
 * prefix may be ""), strip (optional). Its pool is checked once the whole file is read
 * (check_routes). */
static int load_route(loader *ld, ch_conf_pool *p)
{
    const yaml_event_t *e = &ld->ev;
    char g[QB + 2], q[QB];
    int rc;
    if (e->type != YAML_MAPPING_START_EVENT)
        return fail(ld, e->start_mark,
                    "expected a route {prefix: P, pool: NAME, strip: B} in \"routes\", got %s",
                    got(ld, g, sizeof g));
    ch_conf_route *nr = xrealloc(p->routes, (p->nroutes + 1) * sizeof(*nr));
    if (nr == NULL)
        return nomem(ld);
    p->routes = nr;
    ch_conf_route *r = &p->routes[p->nroutes++];
    memset(r, 0, sizeof(*r));
    yaml_mark_t start = e->start_mark;
    r->line = (unsigned)(start.line + 1);
    r->column = (unsigned)(start.column + 1);
    bool have_prefix = false;
    for (;;) {
        if ((rc = next(ld)) != CH_OK)
            return rc;
        if (e->type == YAML_MAPPING_END_EVENT)
            break;
        if (e->type != YAML_SCALAR_EVENT)
            return fail(ld, e->start_mark, "expected a key of a route, got %s",
                        got(ld, g, sizeof g));
        const char *kv = (const char *)e->data.scalar.value;
        size_t kl = e->data.scalar.length;
        yaml_mark_t km = e->start_mark;
        int which = kl == 6 && memcmp(kv, "prefix", 6) == 0 ? 0
                    : kl == 4 && memcmp(kv, "pool", 4) == 0 ? 1
                    : kl == 5 && memcmp(kv, "strip", 5) == 0 ? 2
                                                             : -1;
        if (which < 0)
            return fail(ld, km, "unknown key \"%s\" in a route (prefix, pool, strip)",
                        ch__conf_quote(q, sizeof q, kv, kl));
        if ((which == 0 && have_prefix) || (which == 1 && r->pool != NULL))
            return fail(ld, km, "duplicate key \"%s\" in a route",
                        ch__conf_quote(q, sizeof q, kv, kl));
        if ((rc = next(ld)) != CH_OK)
            return rc;
        if (e->type != YAML_SCALAR_EVENT || (which != 0 && e->data.scalar.length == 0))
            return fail(ld, value_mark(ld, km), "expected a value for a route's \"%s\", got %s",
                        which == 0 ? "prefix" : which == 1 ? "pool" : "strip",
                        got(ld, g, sizeof g));
        const char *v = (const char *)e->data.scalar.value;
        size_t len = e->data.scalar.length;
        yaml_mark_t vm = e->start_mark;
        if (memchr(v, '\0', len) != NULL)
            return fail(ld, vm, "a route's value contains a NUL character");
        if (which == 0) {
            if ((r->prefix = dupn(v, len)) == NULL)
                return nomem(ld);
            r->prefix_len = len;
            have_prefix = true;
        } else if (which == 1) {
            if ((r->pool = dupn(v, len)) == NULL)
                return nomem(ld);
            r->pool_line = (unsigned)(vm.line + 1);
            r->pool_column = (unsigned)(vm.column + 1);
        } else if (len == 4 && memcmp(v, "true", 4) == 0) {
            r->strip = true;
        } else if (len == 5 && memcmp(v, "false", 5) == 0) {
            r->strip = false;
        } else {
            return fail(ld, vm, "expected true or false for a route's \"strip\", got \"%s\"",
                        ch__conf_quote(q, sizeof q, v, len));
        }
    }
    if (!have_prefix || r->pool == NULL)
        return fail(ld, start, "a route needs \"prefix\" and \"pool\" (prefix \"\" is the "
                               "catch-all)");
    if (r->strip && r->prefix_len == 0)
        return fail(ld, start, "\"strip\" on the catch-all route (prefix \"\") strips nothing");
    for (size_t i = 0; i + 1 < p->nroutes; i++)
        if (p->routes[i].prefix_len == r->prefix_len &&
            memcmp(p->routes[i].prefix, r->prefix, r->prefix_len) == 0)
            return fail(ld, start, "duplicate route prefix \"%s\" (first on line %u)",
                        ch__conf_quote(q, sizeof q, r->prefix, r->prefix_len),
                        p->routes[i].line);
    return CH_OK;
}

/* "routes": a sequence of routes (load_route), in any order: the longest matching prefix
 * wins. */
static int load_routes(loader *ld, ch_conf_pool *p, yaml_mark_t key_mark)
{
    const yaml_event_t *e = &ld->ev;
    char g[QB + 2];
    int rc;
    if (e->type != YAML_SEQUENCE_START_EVENT)
        return fail(ld, value_mark(ld, key_mark),
                    "expected a sequence of routes {prefix: P, pool: NAME, strip: B} for "
                    "\"routes\", got %s",
                    got(ld, g, sizeof g));
    p->routes_line = (unsigned)(key_mark.line + 1);
    p->routes_column = (unsigned)(key_mark.column + 1);
    for (;;) {
        if ((rc = next(ld)) != CH_OK)
            break;
        if (e->type == YAML_SEQUENCE_END_EVENT)
            break;
        if ((rc = load_route(ld, p)) != CH_OK)
            break;
    }
    if (rc == CH_OK && p->nroutes == 0)
        return fail(ld, key_mark, "\"routes\" is empty");
    return rc;
}

/* A key of pool p (the current event, a scalar) and its value. */
static int load_key(loader *ld, ch_conf_pool *p, pool_state *st)
{
    const yaml_event_t *e = &ld->ev;
    const char *k = (const char *)e->data.scalar.value;
    size_t klen = e->data.scalar.length;
    yaml_mark_t km = e->start_mark;
    char q[QB], q2[QB], g[QB + 2];
    int rc;

    int id = key_lookup(k, klen);
    if (id < 0)
        return fail(ld, km, "unknown key \"%s\" in pool \"%s\"", ch__conf_quote(q, sizeof q, k, klen),
                    ch__conf_quote(q2, sizeof q2, p->name, strlen(p->name)));
    if (ld->doc && (DOC_KEYS & (UINT64_C(1) << id)) == 0)
        return fail(ld, km,
                    "\"%s\" cannot be set by a membership document (it holds servers, hash, "
                    "distribution, hash_tag, version and epoch)",
                    keys[id].name);
    if (!ld->doc && id == KEY_EPOCH)
        return fail(ld, km,
                    "\"epoch\" belongs in a membership document (docs/FLEET.md), not in a pool");
    if (st->seen & (UINT64_C(1) << id))
        return fail(ld, km, "duplicate key \"%s\" in pool \"%s\" (first on line %zu)", keys[id].name,
                    ch__conf_quote(q2, sizeof q2, p->name, strlen(p->name)),
                    st->mark[id].line + 1);
    st->seen |= UINT64_C(1) << id;
    st->mark[id] = km;

    if ((rc = next(ld)) != CH_OK)
        return rc;
    if (id == KEY_SERVERS)
        return load_servers(ld, p, km);
    if (id == KEY_SHADOW)
        return load_shadow(ld, p, km);
    if (id == KEY_ROUTES)
        return load_routes(ld, p, km);
    if (e->type != YAML_SCALAR_EVENT || e->data.scalar.length == 0)
        return fail(ld, value_mark(ld, km), "expected %s for \"%s\", got %s", keys[id].expect,
                    keys[id].name, got(ld, g, sizeof g));
    if (memchr(e->data.scalar.value, '\0', e->data.scalar.length) != NULL)
        return fail(ld, e->start_mark, "the value of \"%s\" contains a NUL character",
                    keys[id].name);
    return load_value(ld, p, id);
}

/* A pool: the current event is its name, a scalar. */
/* The TLS keys come in pairs and need what they refine: a key without its partner is named at
 * its own place in the file. */
static int check_tls(loader *ld, const ch_conf_pool *p, const pool_state *st)
{
    static const struct {
        int key, needs;
        const char *msg;
    } rules[] = {
        {KEY_TLS_CERT_FILE, KEY_TLS_KEY_FILE, "\"tls_cert_file\" needs \"tls_key_file\""},
        {KEY_TLS_KEY_FILE, KEY_TLS_CERT_FILE, "\"tls_key_file\" needs \"tls_cert_file\""},
        {KEY_TLS_CLIENT_CA_FILE, KEY_TLS_CERT_FILE,
         "\"tls_client_ca_file\" needs \"tls_cert_file\" and \"tls_key_file\" (clients are "
         "verified only on a TLS listener)"},
        {KEY_SERVER_TLS_CERT_FILE, KEY_SERVER_TLS_KEY_FILE,
         "\"server_tls_cert_file\" needs \"server_tls_key_file\""},
        {KEY_SERVER_TLS_KEY_FILE, KEY_SERVER_TLS_CERT_FILE,
         "\"server_tls_key_file\" needs \"server_tls_cert_file\""},
    };
    for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
        if ((st->seen & (UINT64_C(1) << rules[i].key)) != 0 &&
            (st->seen & (UINT64_C(1) << rules[i].needs)) == 0)
            return fail(ld, st->mark[rules[i].key], "%s", rules[i].msg);
    static const int server_keys[] = {KEY_SERVER_TLS_VERIFY, KEY_SERVER_TLS_CA_FILE,
                                      KEY_SERVER_TLS_NAME, KEY_SERVER_TLS_CERT_FILE,
                                      KEY_SERVER_TLS_KEY_FILE};
    for (size_t i = 0; !p->server_tls && i < sizeof(server_keys) / sizeof(server_keys[0]); i++)
        if ((st->seen & (UINT64_C(1) << server_keys[i])) != 0)
            return fail(ld, st->mark[server_keys[i]], "\"%s\" needs \"server_tls: true\"",
                        keys[server_keys[i]].name);
    return CH_OK;
}

static int load_body(loader *ld, ch_conf_pool *p, yaml_mark_t pm);

static int load_pool(loader *ld)
{
    const yaml_event_t *e = &ld->ev;
    const char *v = (const char *)e->data.scalar.value;
    size_t len = e->data.scalar.length;
    yaml_mark_t pm = e->start_mark;
    char q[QB];
    ch_conf_pool *p = NULL;
    int rc;

    if (len == 0)
        return fail(ld, pm, "a pool name is empty");
    if (memchr(v, '\0', len) != NULL)
        return fail(ld, pm, "the pool name \"%s\" contains a NUL character",
                    ch__conf_quote(q, sizeof q, v, len));
    if ((rc = pool_new(ld, &p)) != CH_OK)
        return rc;
    if ((p->name = dupn(v, len)) == NULL)
        return nomem(ld);
    p->line = (unsigned)(pm.line + 1);
    size_t first;
    if (strset_add(&ld->pool_names, p->name, len, ld->cfg->npools - 1, &first) != CH_OK)
        return nomem(ld);
    if (first != SIZE_MAX)
        return fail(ld, pm, "duplicate pool \"%s\" (first on line %u)",
                    ch__conf_quote(q, sizeof q, v, len), ld->cfg->pools[first].line);
    if ((rc = next(ld)) != CH_OK)
        return rc;
    return load_body(ld, p, pm);
}

/* A pool's mapping of settings (the current event), in a file or a membership document. */
static int load_body(loader *ld, ch_conf_pool *p, yaml_mark_t pm)
{
    const yaml_event_t *e = &ld->ev;
    char q[QB], g[QB + 2];
    const char *name = ch__conf_quote(q, sizeof q, p->name, strlen(p->name));
    int rc;

    if (e->type != YAML_MAPPING_START_EVENT)
        return ld->doc ? fail(ld, e->start_mark, "expected a mapping of membership keys, got %s",
                              got(ld, g, sizeof g))
                       : fail(ld, value_mark(ld, pm),
                              "expected a mapping of settings for pool \"%s\", got %s", name,
                              got(ld, g, sizeof g));
    pool_state st = {0};
    for (;;) {
        if ((rc = next(ld)) != CH_OK)
            return rc;
        if (e->type == YAML_MAPPING_END_EVENT)
            break;
        if (e->type != YAML_SCALAR_EVENT)
            return fail(ld, e->start_mark, "expected a key in pool \"%s\", got %s", name,
                        got(ld, g, sizeof g));
        if ((rc = load_key(ld, p, &st)) != CH_OK)
            return rc;
    }
    if (p->nservers == 0 && ld->doc)
        return fail(ld, pm, "the membership document has no \"servers\"");
    bool catch_all = false;
    for (size_t i = 0; i < p->nroutes; i++)
        catch_all |= p->routes[i].prefix_len == 0;
    if (p->nservers == 0 && p->membership == NULL && !catch_all)
        return fail(ld, pm, p->nroutes > 0 ? "pool \"%s\" has routes but no servers and no "
                                             "catch-all route (prefix \"\") for the keys "
                                             "matching none"
                                           : "pool \"%s\" has no servers",
                    name);
    if (p->nroutes > 0 && p->listen == NULL)
        return fail(ld, st.mark[KEY_ROUTES], "\"routes\" needs \"listen\" (routes choose "
                                             "the pool of a listener's keys)");
    if ((st.seen & (UINT64_C(1) << KEY_MEMBERSHIP_HOLD_DOWN)) != 0 && p->membership == NULL)
        return fail(ld, st.mark[KEY_MEMBERSHIP_HOLD_DOWN],
                    "\"membership_hold_down\" needs \"membership\"");
    if ((st.seen & (UINT64_C(1) << KEY_MEMBERSHIP_FENCED)) != 0 && !ch_conf_membership_etcd(p))
        return fail(ld, st.mark[KEY_MEMBERSHIP_FENCED],
                    p->membership == NULL
                        ? "\"membership_fenced\" needs \"membership\""
                        : "\"membership_fenced\" needs a membership in etcd: a DNS membership "
                          "is never fenced (docs/FLEET.md, \"Membership from DNS\")");
    static const int dns_only[] = {KEY_MEMBERSHIP_INTERVAL, KEY_MEMBERSHIP_RESOLVER};
    for (size_t i = 0; i < sizeof(dns_only) / sizeof(dns_only[0]); i++) {
        int k = dns_only[i];
        if ((st.seen & (UINT64_C(1) << k)) != 0 && !ch_conf_membership_dns(p))
            return fail(ld, st.mark[k], "\"%s\" needs \"membership: dns://...\" or "
                        "\"membership: dns+srv://...\"", keys[k].name);
    }
    if (p->hot_spread && p->replicas < 2)
        return fail(ld, st.mark[KEY_HOT_SPREAD],
                    "\"hot_spread\" needs \"replicas\" of 2 or more (a hot key's reads are "
                    "spread over its replicas)");
    if ((st.seen & (UINT64_C(1) << KEY_GUTTER_TTL)) != 0 && p->gutter_pool == NULL)
        return fail(ld, st.mark[KEY_GUTTER_TTL], "\"gutter_ttl\" needs \"gutter\"");
    if ((st.seen & (UINT64_C(1) << KEY_REPLICAS)) != 0) {
        p->replicas_line = (unsigned)st.mark[KEY_REPLICAS].line + 1;
        p->replicas_column = (unsigned)st.mark[KEY_REPLICAS].column + 1;
    }
    /* A file's replicas are checked against its servers; a membership document's servers are
     * not (the client clamps replicas to the members it is given). */
    if ((st.seen & (UINT64_C(1) << KEY_REPLICAS)) != 0 && !ld->doc && p->nservers > 0 &&
        (size_t)p->replicas > p->nservers)
        return fail(ld, st.mark[KEY_REPLICAS],
                    "\"replicas\" is %d, more than the %zu servers of pool \"%s\"",
                    p->replicas, p->nservers, name);
    if (p->nservers > 0 && (rc = twemproxy_order(p)) != CH_OK)
        return nomem(ld);
    p->has_auto_eject_hosts = st.seen & (UINT64_C(1) << KEY_AUTO_EJECT_HOSTS);
    p->has_server_failure_limit = st.seen & (UINT64_C(1) << KEY_SERVER_FAILURE_LIMIT);
    p->has_server_retry_timeout = st.seen & (UINT64_C(1) << KEY_SERVER_RETRY_TIMEOUT);
    /* Both passwords need a redis pool; when both are misplaced, the first in the file is named. */
    bool redis_auth_bad = p->redis_auth != NULL && !p->redis;
    bool client_auth_bad = p->client_auth != NULL && !p->redis;
    if (redis_auth_bad &&
        (!client_auth_bad || st.mark[KEY_REDIS_AUTH].index < st.mark[KEY_CLIENT_AUTH].index))
        return fail(ld, st.mark[KEY_REDIS_AUTH],
                    "\"redis_auth\" is only valid in a redis pool (redis: true), as in twemproxy");
    if (client_auth_bad)
        return fail(ld, st.mark[KEY_CLIENT_AUTH],
                    "\"client_auth\" is only valid in a redis pool (redis: true)");
    if (p->client_auth_file != NULL) { /* the key's place, for chash-proxy's errors */
        p->client_auth_file_line = (unsigned)(st.mark[KEY_CLIENT_AUTH_FILE].line + 1);
        p->client_auth_file_column = (unsigned)(st.mark[KEY_CLIENT_AUTH_FILE].column + 1);
    }
    if (p->client_auth_file != NULL && p->redis)
        return fail(ld, st.mark[KEY_CLIENT_AUTH_FILE],
                    "\"client_auth_file\" is only valid in a memcached pool (redis: false); a "
                    "redis pool's clients AUTH with \"client_auth\"");
    return check_tls(ld, p, &st);
}

/* The pool of this file named name, or NULL. */
static const ch_conf_pool *pool_by_name(const ch_config *cfg, const char *name)
{
    for (size_t k = 0; k < cfg->npools; k++)
        if (strcmp(cfg->pools[k].name, name) == 0)
            return &cfg->pools[k];
    return NULL;
}

/* What is wrong with pool p naming pool s (NULL: not found) as its shadow or gutter, or NULL. */
static const char *ref_problem(const ch_conf_pool *p, const ch_conf_pool *s)
{
    return s == NULL  ? "is not a pool of this file"
           : s == p   ? "is the pool itself"
           : s->redis != p->redis ? "speaks another protocol (redis: true and false do not mix)"
                                  : NULL;
}

/* Every "shadow" and "gutter" names another pool of the file, of the same protocol; a gutter
 * pool has no gutter of its own (no chains: a lost server's keys go to one place). */
static int check_refs(loader *ld)
{
    char q[QB], q2[QB], q3[QB];
    for (size_t i = 0; i < ld->cfg->npools; i++) {
        const ch_conf_pool *p = &ld->cfg->pools[i];
        const char *name = ch__conf_quote(q, sizeof q, p->name, strlen(p->name));
        if (p->shadow_pool != NULL) {
            const char *why = ref_problem(p, pool_by_name(ld->cfg, p->shadow_pool));
            if (why != NULL)
                return fail_at(ld, CH_EINVAL, p->shadow_line, p->shadow_column,
                               "pool \"%s\": its shadow pool \"%s\" %s", name,
                               ch__conf_quote(q2, sizeof q2, p->shadow_pool,
                                              strlen(p->shadow_pool)),
                               why);
        }
        for (size_t j = 0; j < p->nroutes; j++) {
            const ch_conf_route *r = &p->routes[j];
            const ch_conf_pool *t = pool_by_name(ld->cfg, r->pool);
            const char *why = ref_problem(p, t);
            if (why == NULL && t->nroutes > 0)
                why = "has routes of its own (a route leads to one pool: no chains)";
            if (why == NULL && r->strip && !t->redis)
                why = "is a memcached pool: \"strip\" is for Redis pools only";
            if (why != NULL)
                return fail_at(ld, CH_EINVAL, r->pool_line, r->pool_column,
                               "pool \"%s\": the pool \"%s\" of its route for prefix \"%s\" %s",
                               name, ch__conf_quote(q2, sizeof q2, r->pool, strlen(r->pool)),
                               ch__conf_quote(q3, sizeof q3, r->prefix, r->prefix_len), why);
        }
        if (p->gutter_pool != NULL) {
            const ch_conf_pool *g = pool_by_name(ld->cfg, p->gutter_pool);
            const char *why = ref_problem(p, g);
            if (why == NULL && g->gutter_pool != NULL)
                why = "has a gutter of its own (a gutter pool cannot have one)";
            if (why != NULL)
                return fail_at(ld, CH_EINVAL, p->gutter_line, p->gutter_column,
                               "pool \"%s\": its gutter pool \"%s\" %s", name,
                               ch__conf_quote(q2, sizeof q2, p->gutter_pool,
                                              strlen(p->gutter_pool)),
                               why);
        }
    }
    return CH_OK;
}

static int load_stream(loader *ld)
{
    const yaml_event_t *e = &ld->ev;
    char g[QB + 2];
    int rc;

    if ((rc = next(ld)) != CH_OK) /* stream start */
        return rc;
    if ((rc = next(ld)) != CH_OK)
        return rc;
    if (e->type == YAML_STREAM_END_EVENT)
        return fail(ld, e->start_mark, "no pools: the file holds no YAML document");
    if ((rc = next(ld)) != CH_OK) /* after the document start, which next() checked */
        return rc;
    if (e->type != YAML_MAPPING_START_EVENT)
        return fail(ld, e->start_mark, "expected a mapping of pool names to pools, got %s",
                    got(ld, g, sizeof g));
    for (;;) {
        if ((rc = next(ld)) != CH_OK)
            return rc;
        if (e->type == YAML_MAPPING_END_EVENT)
            break;
        if (e->type != YAML_SCALAR_EVENT)
            return fail(ld, e->start_mark, "expected a pool name, got %s", got(ld, g, sizeof g));
        if ((rc = load_pool(ld)) != CH_OK)
            return rc;
    }
    if ((rc = check_refs(ld)) != CH_OK)
        return rc;
    if ((rc = next(ld)) != CH_OK) /* document end */
        return rc;
    return next(ld); /* stream end; a second document is refused by next() */
}

/* A membership document: one mapping of membership keys, into the loader's one pool. */
static int load_doc_stream(loader *ld)
{
    const yaml_event_t *e = &ld->ev;
    int rc;
    if ((rc = next(ld)) != CH_OK || (rc = next(ld)) != CH_OK) /* stream and document start */
        return rc;
    if (e->type == YAML_STREAM_END_EVENT)
        return fail(ld, e->start_mark, "the membership document is empty");
    if ((rc = next(ld)) != CH_OK || (rc = load_body(ld, &ld->cfg->pools[0], e->start_mark)) != CH_OK)
        return rc;
    if ((rc = next(ld)) != CH_OK) /* document end */
        return rc;
    return next(ld);
}

/* The first pass: every event of the stream, for the checks next() makes. */
static int scan_stream(loader *ld)
{
    int rc;
    do {
        if ((rc = next(ld)) != CH_OK)
            return rc;
    } while (ld->ev.type != YAML_STREAM_END_EVENT);
    return CH_OK;
}

/* Runs one pass with a fresh parser over the whole input. */
static int run_pass(loader *ld, int (*pass)(loader *))
{
    if (!yaml_parser_initialize(&ld->parser))
        return nomem(ld);
    yaml_parser_set_input_string(&ld->parser, ld->len > 0 ? ld->buf : (const unsigned char *)"",
                                 ld->len);
    ld->documents = 0;
    ld->depth = 0;
    ld->routes_depth = 0;
    int rc = pass(ld);
    if (ld->have_ev) {
        yaml_event_delete(&ld->ev);
        ld->have_ev = false;
    }
    yaml_parser_delete(&ld->parser);
    return rc;
}

/* Reads the whole file into *out (xfree it), refusing more than CH_CONFIG_MAX_BYTES, and
 * anything but a regular file: a FIFO or a device would block the caller (a reload's control
 * thread, -t) or never end. It is opened without blocking and checked before it is read. */
static int read_all(loader *ld, unsigned char **out, size_t *outlen)
{
    int fd = open(ld->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return fail_errno(ld, errno);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return fail_errno(ld, e);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        if (S_ISDIR(st.st_mode))
            return fail_errno(ld, EISDIR);
        return fail_at(ld, CH_EINVAL, 0, 0, "not a regular file");
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "rb");
    if (f == NULL) {
        int e = errno;
        close(fd);
        return fail_errno(ld, e);
    }
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = CH_OK;
    for (;;) {
        if (len == cap) {
            if (cap > CH_CONFIG_MAX_BYTES) {
                rc = fail_at(ld, CH_ETOOBIG, 0, 0,
                             "the file is larger than %u bytes, the limit (CH_CONFIG_MAX_BYTES)",
                             CH_CONFIG_MAX_BYTES);
                break;
            }
            size_t ncap = cap ? cap * 2 : 65536;
            if (ncap > (size_t)CH_CONFIG_MAX_BYTES + 1)
                ncap = (size_t)CH_CONFIG_MAX_BYTES + 1;
            unsigned char *nb = xrealloc(buf, ncap);
            if (nb == NULL) {
                rc = nomem(ld);
                break;
            }
            buf = nb;
            cap = ncap;
        }
        size_t want = cap - len;
        errno = 0;
        size_t n = fread(buf + len, 1, want, f);
        len += n;
        if (n < want) {
            if (ferror(f))
                rc = fail_errno(ld, errno != 0 ? errno : EIO);
            break;
        }
    }
    fclose(f);
    if (rc != CH_OK) {
        xfree(buf);
        return rc;
    }
    *out = buf;
    *outlen = len;
    return CH_OK;
}

/* Loads the text buf[0, len) (taken over: freed here) as the file path. */
static int load_text(loader *ld, unsigned char *buf, size_t len, const char *path,
                     ch_config **out)
{
    int rc = CH_OK;
    ld->buf = buf;
    ld->len = len;
    ld->cfg = xmalloc(sizeof *ld->cfg);
    if (ld->cfg == NULL) {
        rc = nomem(ld);
        goto done;
    }
    memset(ld->cfg, 0, sizeof *ld->cfg);
    if ((ld->cfg->path = dupn(path, strlen(path))) == NULL) {
        rc = nomem(ld);
        goto done;
    }
    rc = run_pass(ld, scan_stream);
    if (rc == CH_OK)
        rc = run_pass(ld, load_stream);

done:
    strset_free(&ld->pool_names);
    strset_free(&ld->listens);
    strset_free(&ld->servers);
    xfree(buf);
    if (rc != CH_OK) {
        ch_config_free(ld->cfg);
        return rc;
    }
    *out = ld->cfg;
    return CH_OK;
}

int ch_config_load(const char *path, ch_config **out, ch_config_error *err)
{
    loader ld = {.path = path != NULL ? path : "(null)", .err = err};
    if (path == NULL || out == NULL)
        return fail_at(&ld, CH_EINVAL, 0, 0, "%s", ch_strerror(CH_EINVAL));

    unsigned char *buf = NULL;
    size_t len = 0;
    int rc = read_all(&ld, &buf, &len);
    if (rc != CH_OK)
        return rc;
    return load_text(&ld, buf, len, path, out);
}

int ch__config_load_text(const char *name, const void *text, size_t len, ch_config **out,
                         ch_config_error *err)
{
    loader ld = {.path = name != NULL ? name : "(text)", .err = err};
    if (out == NULL || (text == NULL && len > 0) || len > CH_CONFIG_MAX_BYTES)
        return fail_at(&ld, CH_EINVAL, 0, 0, "%s", ch_strerror(CH_EINVAL));
    unsigned char *buf = xmalloc(len > 0 ? len : 1);
    if (buf == NULL)
        return nomem(&ld);
    if (len > 0)
        memcpy(buf, text, len);
    return load_text(&ld, buf, len, ld.path, out);
}

/* ld->cfg: a new config of one pool named name, with the defaults (*p). On failure the caller
 * frees ld->cfg (ch_config_free takes a half-built one). */
static int scratch_config(loader *ld, const char *name, ch_conf_pool **p)
{
    if ((ld->cfg = xmalloc(sizeof *ld->cfg)) == NULL)
        return nomem(ld);
    memset(ld->cfg, 0, sizeof *ld->cfg);
    int rc = pool_new(ld, p);
    if (rc == CH_OK && ((*p)->name = dupn(name, strlen(name))) == NULL)
        rc = nomem(ld);
    return rc;
}

/* The fields a membership document sets (swapped, so each side frees what it then holds). */
static void swap_membership(ch_conf_pool *a, ch_conf_pool *b)
{
#define SWAP(f)                                                                             \
    do {                                                                                    \
        __typeof__(a->f) t = a->f;                                                          \
        a->f = b->f;                                                                        \
        b->f = t;                                                                           \
    } while (0)
    SWAP(servers);
    SWAP(nservers);
    SWAP(order);
    SWAP(hash);
    SWAP(distribution);
    SWAP(hash_tag);
    SWAP(version);
#undef SWAP
}

int ch_config_membership_doc(ch_conf_pool *pool, const char *name, const void *text, size_t len,
                             int64_t *epoch, ch_config_error *err)
{
    loader ld = {.path = name != NULL ? name : "(membership)", .err = err, .doc = true};
    if (pool == NULL || epoch == NULL || (text == NULL && len > 0))
        return fail_at(&ld, CH_EINVAL, 0, 0, "%s", ch_strerror(CH_EINVAL));
    if (len > CH_CONFIG_MAX_BYTES)
        return fail_at(&ld, CH_ETOOBIG, 0, 0, "the document is larger than %u bytes",
                       CH_CONFIG_MAX_BYTES);
    unsigned char *buf = xmalloc(len > 0 ? len : 1);
    ch_conf_pool *p = NULL;
    int rc = buf == NULL ? nomem(&ld) : CH_OK;
    if (rc == CH_OK && len > 0)
        memcpy(buf, text, len);
    ld.buf = buf;
    ld.len = len;
    if (rc == CH_OK)
        rc = scratch_config(&ld, pool->name, &p);
    if (rc == CH_OK)
        rc = run_pass(&ld, scan_stream);
    if (rc == CH_OK)
        rc = run_pass(&ld, load_doc_stream);
    if (rc == CH_OK) {
        swap_membership(pool, p);
        *epoch = ld.epoch;
    }
    strset_free(&ld.servers);
    xfree(buf);
    ch_config_free(ld.cfg);
    return rc;
}

int ch_config_membership_parse(const char *pool_name, const char *name, const void *text,
                               size_t len, ch_config **out, int64_t *epoch,
                               ch_config_error *err)
{
    loader ld = {.path = name != NULL ? name : "(membership)", .err = err};
    if (pool_name == NULL || out == NULL)
        return fail_at(&ld, CH_EINVAL, 0, 0, "%s", ch_strerror(CH_EINVAL));
    ch_conf_pool *p = NULL;
    int rc = scratch_config(&ld, pool_name, &p);
    if (rc == CH_OK)
        rc = ch_config_membership_doc(p, name, text, len, epoch, err);
    if (rc != CH_OK) {
        ch_config_free(ld.cfg);
        return rc;
    }
    *out = ld.cfg;
    return CH_OK;
}

const char *ch_config_error_str(const ch_config_error *err, char *buf, size_t len)
{
    if (buf == NULL || len == 0)
        return buf;
    if (err == NULL)
        snprintf(buf, len, "(no error)");
    else
        snprintf(buf, len, "%s:%u:%u: %s", err->file, err->line, err->column, err->message);
    return buf;
}

const ch_conf_pool *ch_config_pool(const ch_config *cfg, const char *name)
{
    if (cfg == NULL)
        return NULL;
    if (name == NULL)
        return cfg->npools == 1 ? &cfg->pools[0] : NULL;
    for (size_t i = 0; i < cfg->npools; i++)
        if (strcmp(cfg->pools[i].name, name) == 0)
            return &cfg->pools[i];
    return NULL;
}

void ch_config_free(ch_config *cfg)
{
    if (cfg == NULL)
        return;
    for (size_t i = 0; i < cfg->npools; i++) {
        ch_conf_pool *p = &cfg->pools[i];
        for (size_t j = 0; j < p->nservers; j++) {
            xfree(p->servers[j].addr);
            xfree(p->servers[j].host);
            xfree(p->servers[j].id);
            xfree(p->servers[j].name);
        }
        xfree(p->servers);
        xfree(p->order);
        xfree(p->name);
        xfree(p->listen);
        xfree(p->listen_host);
        xfree(p->hash);
        xfree(p->hash_tag);
        xfree(p->distribution);
        xfree(p->redis_auth);
        xfree(p->client_auth);
        xfree(p->client_auth_file);
        xfree(p->version);
        xfree(p->tls_cert_file);
        xfree(p->tls_key_file);
        xfree(p->tls_client_ca_file);
        xfree(p->server_tls_ca_file);
        xfree(p->server_tls_name);
        xfree(p->server_tls_cert_file);
        xfree(p->server_tls_key_file);
        xfree(p->membership);
        xfree(p->membership_endpoint);
        xfree(p->membership_key);
        xfree(p->membership_resolver);
        xfree(p->shadow_pool);
        xfree(p->gutter_pool);
        for (size_t j = 0; j < p->nroutes; j++) {
            xfree(p->routes[j].prefix);
            xfree(p->routes[j].pool);
        }
        xfree(p->routes);
    }
    xfree(cfg->pools);
    xfree(cfg->path);
    xfree(cfg);
}

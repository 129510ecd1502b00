/* SPDX-License-Identifier: Apache-2.0 */
/*
 * chash_node.c — the Node.js addon over libchash and libchash_config, in plain Node-API (C).
 *
 * The addon is the thin native half of the `chash` module; index.js is the public surface (the
 * Table class, options, names). Everything here takes a table handle first: an external value
 * whose finalizer frees the placement it holds, so a table lives exactly as long as the JS
 * objects that reach it (index.js keeps the handle in the Table). Nothing here is global or
 * mutable, so the addon is context-aware: any number of worker threads may load it, each
 * building and reading its own tables (a built table is immutable, chash.h).
 *
 * Keys are strings (their UTF-8 bytes, as Buffer.from(s) gives them: a lone surrogate is
 * U+FFFD) or Uint8Arrays (Buffer included: their bytes as they are).
 * Errors are thrown as Error objects whose message is libchash's (a build's ch_error: which
 * argument and which limit; for a config "file:line:column: message") and whose code is the
 * status name ("CH_EDUPID", ...). A string argument holding a NUL is refused (CH_EINVAL), never
 * read as a shorter string.
 */
#include <chash.h>
#include <chash_config.h>
#include <chash_route.h>

#include <node_api.h>

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One placement, owned by one external value. Exactly one of table and membership owns the
 * table that t points to; t is never NULL once built and never changes (immutable). */
typedef struct nb_table {
    ch_table *table;           /* built from nodes, or NULL */
    ch_membership *membership; /* built from a config pool or a membership document, or NULL */
    const ch_table *t;         /* the table lookups read */
    size_t n;                  /* its node count, >= 1 */
    int64_t bytes;             /* its heap bytes, as reported to V8 (napi_adjust_external_memory)
                                  so that its garbage collector sees what a Table holds */
} nb_table;

/* Keys up to this many UTF-8 bytes are read into a stack buffer; longer ones into the heap. */
#define NB_KEY_STACK 512

/* A key's bytes: data points into buf, into a typed array's memory, or into heap (owned). */
typedef struct nb_key {
    const char *data;
    size_t len;
    char *heap;
    char buf[NB_KEY_STACK];
} nb_key;

/* ---- errors ------------------------------------------------------------------------------ */

static const char *status_name(int status)
{
    switch (status) {
#define NB__STATUS_CASE(name, value, msg) \
    case value:                           \
        return #name;
        CH_STATUS_LIST(NB__STATUS_CASE)
#undef NB__STATUS_CASE
    }
    return "CH_EUNKNOWN_STATUS";
}

/* Throws Error(message) with .code = the status name; returns NULL for the caller to return. */
static napi_value throw_status(napi_env env, int status, const char *message)
{
    napi_throw_error(env, status_name(status), message ? message : ch_strerror(status));
    return NULL;
}

static napi_value throw_type(napi_env env, const char *message)
{
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", message);
    return NULL;
}

/* A pending exception from a failed napi call stays; otherwise a generic one is thrown. */
static napi_value napi_failed(napi_env env)
{
    bool pending = false;
    napi_is_exception_pending(env, &pending);
    if (!pending)
        napi_throw_error(env, NULL, "chash: a Node-API call failed");
    return NULL;
}

#define NB_CHECK(env, call)            \
    do {                               \
        if ((call) != napi_ok)         \
            return napi_failed(env);   \
    } while (0)

/* ---- arguments ----------------------------------------------------------------------------- */

/* Reads a key (string or Uint8Array) into *k. Returns false with a TypeError thrown. */
static bool key_get(napi_env env, napi_value v, nb_key *k)
{
    k->heap = NULL;
    napi_valuetype type;
    if (napi_typeof(env, v, &type) != napi_ok)
        return false;
    if (type == napi_string) {
        size_t len = 0;
        /* Most keys fit the buffer in one copy. A copy cut short stops before a whole
         * character (at most 4 UTF-8 bytes) that did not fit, so a length more than 4 bytes
         * short of the buffer is the whole key; the others ask for their exact length. */
        if (napi_get_value_string_utf8(env, v, k->buf, sizeof(k->buf), &len) != napi_ok)
            return false;
        if (len + 4 < sizeof(k->buf)) {
            k->data = k->buf;
            k->len = len;
            return true;
        }
        if (napi_get_value_string_utf8(env, v, NULL, 0, &len) != napi_ok)
            return false;
        k->heap = malloc(len + 1);
        if (k->heap == NULL) {
            throw_status(env, CH_ENOMEM, NULL);
            return false;
        }
        if (napi_get_value_string_utf8(env, v, k->heap, len + 1, &len) != napi_ok) {
            free(k->heap);
            k->heap = NULL;
            return false;
        }
        k->data = k->heap;
        k->len = len;
        return true;
    }
    bool is_typed = false;
    if (type == napi_object && napi_is_typedarray(env, v, &is_typed) == napi_ok && is_typed) {
        napi_typedarray_type ttype;
        size_t length = 0;
        void *data = NULL;
        if (napi_get_typedarray_info(env, v, &ttype, &length, &data, NULL, NULL) != napi_ok)
            return false;
        if (ttype == napi_uint8_array || ttype == napi_int8_array ||
            ttype == napi_uint8_clamped_array) {
            k->data = length ? data : "";
            k->len = length;
            return true;
        }
    }
    throw_type(env, "chash: a key must be a string or a Buffer (Uint8Array)");
    return false;
}

static void key_release(nb_key *k)
{
    free(k->heap);
    k->heap = NULL;
}

static nb_table *table_get(napi_env env, napi_value v)
{
    void *p = NULL;
    napi_valuetype type;
    if (napi_typeof(env, v, &type) != napi_ok || type != napi_external ||
        napi_get_value_external(env, v, &p) != napi_ok || p == NULL) {
        throw_type(env, "chash: not a table handle");
        return NULL;
    }
    return p;
}

/* A string argument copied into the heap (NUL-terminated; embedded NULs refused), or NULL with
 * an exception pending. null/undefined give *absent = true and NULL when allow_absent. */
static char *string_dup(napi_env env, napi_value v, const char *what, bool allow_absent,
                        bool *absent)
{
    napi_valuetype type;
    if (absent)
        *absent = false;
    if (napi_typeof(env, v, &type) != napi_ok)
        return NULL;
    if (allow_absent && (type == napi_undefined || type == napi_null)) {
        *absent = true;
        return NULL;
    }
    if (type != napi_string) {
        char msg[160];
        snprintf(msg, sizeof(msg), "chash: %s must be a string", what);
        throw_type(env, msg);
        return NULL;
    }
    size_t len = 0;
    if (napi_get_value_string_utf8(env, v, NULL, 0, &len) != napi_ok)
        return NULL;
    char *s = malloc(len + 1);
    if (s == NULL) {
        throw_status(env, CH_ENOMEM, NULL);
        return NULL;
    }
    if (napi_get_value_string_utf8(env, v, s, len + 1, &len) != napi_ok) {
        free(s);
        return NULL;
    }
    if (strlen(s) != len) {
        char msg[160];
        snprintf(msg, sizeof(msg), "chash: %s holds a NUL character", what);
        free(s);
        throw_status(env, CH_EINVAL, msg);
        return NULL;
    }
    return s;
}

/* ---- handles ------------------------------------------------------------------------------- */

static void table_finalize(napi_env env, void *data, void *hint)
{
    (void)hint;
    nb_table *nt = data;
    int64_t total;
    napi_adjust_external_memory(env, -nt->bytes, &total);
    ch_table_free(nt->table);
    ch_membership_free(nt->membership);
    free(nt);
}

/* Wraps nt (owned from here on: freed on failure too) in an external value. */
static napi_value handle_new(napi_env env, nb_table *nt)
{
    napi_value ext;
    if (napi_create_external(env, nt, table_finalize, NULL, &ext) != napi_ok) {
        table_finalize(env, nt, NULL); /* bytes is still 0: nothing was reported */
        return napi_failed(env);
    }
    ch_table_info ti = {.size = sizeof(ti)};
    ch_table_info_get(nt->t, &ti);
    int64_t total;
    if (napi_adjust_external_memory(env, (int64_t)ti.bytes, &total) == napi_ok)
        nt->bytes = (int64_t)ti.bytes;
    return ext;
}

/* {handle, ids, addrs, names, version, algorithm, hash} for a membership (owned from here on). */
static napi_value membership_result(napi_env env, ch_membership *m, const char *algo_name,
                                    const char *hash_name)
{
    nb_table *nt = calloc(1, sizeof(*nt));
    if (nt == NULL) {
        ch_membership_free(m);
        return throw_status(env, CH_ENOMEM, NULL);
    }
    nt->membership = m;
    nt->t = ch_membership_table(m);
    nt->n = ch_membership_size(m);
    napi_value handle = handle_new(env, nt);
    if (handle == NULL)
        return NULL;
    napi_value out, ids, addrs, names, s;
    NB_CHECK(env, napi_create_object(env, &out));
    NB_CHECK(env, napi_set_named_property(env, out, "handle", handle));
    NB_CHECK(env, napi_create_array_with_length(env, nt->n, &ids));
    NB_CHECK(env, napi_create_array_with_length(env, nt->n, &addrs));
    NB_CHECK(env, napi_create_array_with_length(env, nt->n, &names));
    for (size_t i = 0; i < nt->n; i++) {
        const ch_member *mb = ch_membership_member(m, i);
        NB_CHECK(env, napi_create_string_utf8(env, mb->id, NAPI_AUTO_LENGTH, &s));
        NB_CHECK(env, napi_set_element(env, ids, (uint32_t)i, s));
        NB_CHECK(env, napi_create_string_utf8(env, mb->addr, NAPI_AUTO_LENGTH, &s));
        NB_CHECK(env, napi_set_element(env, addrs, (uint32_t)i, s));
        if (mb->name)
            NB_CHECK(env, napi_create_string_utf8(env, mb->name, NAPI_AUTO_LENGTH, &s));
        else
            NB_CHECK(env, napi_get_null(env, &s));
        NB_CHECK(env, napi_set_element(env, names, (uint32_t)i, s));
    }
    NB_CHECK(env, napi_set_named_property(env, out, "ids", ids));
    NB_CHECK(env, napi_set_named_property(env, out, "addrs", addrs));
    NB_CHECK(env, napi_set_named_property(env, out, "names", names));
    NB_CHECK(env, napi_create_string_utf8(env, ch_membership_version(m), NAPI_AUTO_LENGTH, &s));
    NB_CHECK(env, napi_set_named_property(env, out, "version", s));
    NB_CHECK(env, napi_create_string_utf8(env, algo_name, NAPI_AUTO_LENGTH, &s));
    NB_CHECK(env, napi_set_named_property(env, out, "algorithm", s));
    NB_CHECK(env, napi_create_string_utf8(env, hash_name, NAPI_AUTO_LENGTH, &s));
    NB_CHECK(env, napi_set_named_property(env, out, "hash", s));
    return out;
}

/* ---- building ------------------------------------------------------------------------------ */

/* build(ids: string[], weights: number[], algo: string, hash: string|null, vnodes: number,
 *       tableSize: number, hashTag: string|null) -> handle. index.js checks the shapes; the
 * library checks the values (unknown names, duplicate ids, weights, sizes). */
static napi_value nb_build(napi_env env, napi_callback_info info)
{
    size_t argc = 7;
    napi_value argv[7];
    NB_CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
    if (argc != 7)
        return throw_type(env, "chash: build takes 7 arguments");
    uint32_t n = 0, nw = 0;
    bool is_array = false;
    NB_CHECK(env, napi_is_array(env, argv[0], &is_array));
    if (!is_array)
        return throw_type(env, "chash: nodes must be an array");
    NB_CHECK(env, napi_get_array_length(env, argv[0], &n));
    NB_CHECK(env, napi_get_array_length(env, argv[1], &nw));
    if (nw != n)
        return throw_type(env, "chash: one weight per node");

    ch_options opt;
    ch_options_init(&opt);
    napi_value result = NULL;
    bool absent = false;
    ch_node *nodes = calloc(n ? n : 1, sizeof(*nodes));
    char *algo = NULL, *hash = NULL, *tag = NULL;
    if (nodes == NULL)
        return throw_status(env, CH_ENOMEM, NULL);
    for (uint32_t i = 0; i < n; i++) {
        napi_value v;
        if (napi_get_element(env, argv[0], i, &v) != napi_ok)
            goto done;
        nodes[i].id = string_dup(env, v, "a node id", false, NULL);
        if (nodes[i].id == NULL)
            goto done;
        if (napi_get_element(env, argv[1], i, &v) != napi_ok ||
            napi_get_value_double(env, v, &nodes[i].weight) != napi_ok) {
            throw_type(env, "chash: a node weight must be a number");
            goto done;
        }
    }
    algo = string_dup(env, argv[2], "algorithm", false, NULL);
    if (algo == NULL)
        goto done;
    if (ch_algo_from_name(algo, &opt.algo) != CH_OK) {
        char msg[300];
        snprintf(msg, sizeof(msg), "%s: algorithm '%.200s' (chash.algorithms() lists them)",
                 ch_strerror(CH_EUNKNOWN), algo);
        throw_status(env, CH_EUNKNOWN, msg);
        goto done;
    }
    hash = string_dup(env, argv[3], "hash", true, &absent);
    if (hash == NULL && !absent)
        goto done;
    if (hash != NULL && ch_hash_from_name(hash, &opt.hash) != CH_OK) {
        char msg[300];
        snprintf(msg, sizeof(msg), "%s: hash '%.200s' (chash.hashes() lists them)",
                 ch_strerror(CH_EUNKNOWN), hash);
        throw_status(env, CH_EUNKNOWN, msg);
        goto done;
    }
    if (napi_get_value_uint32(env, argv[4], &opt.vnodes) != napi_ok ||
        napi_get_value_uint32(env, argv[5], &opt.table_size) != napi_ok) {
        throw_type(env, "chash: vnodes and tableSize must be numbers");
        goto done;
    }
    tag = string_dup(env, argv[6], "hashTag", true, &absent);
    if (tag == NULL && !absent)
        goto done;
    if (tag != NULL) {
        if (strlen(tag) != 2) {
            throw_status(env, CH_EINVAL, "chash: hashTag must be two characters, e.g. \"{}\"");
            goto done;
        }
        memcpy(opt.hash_tag, tag, 2);
    }
    ch_table *t = NULL;
    ch_error err = {.size = sizeof(err)};
    int rc = ch_table_build_err(nodes, n, &opt, &t, &err);
    if (rc != CH_OK) {
        throw_status(env, rc, err.message);
        goto done;
    }
    nb_table *nt = calloc(1, sizeof(*nt));
    if (nt == NULL) {
        ch_table_free(t);
        throw_status(env, CH_ENOMEM, NULL);
        goto done;
    }
    nt->table = t;
    nt->t = t;
    nt->n = n;
    result = handle_new(env, nt);
done:
    for (uint32_t i = 0; i < n; i++)
        free((char *)nodes[i].id);
    free(nodes);
    free(algo);
    free(hash);
    free(tag);
    return result;
}

/* Throws a config error as "file:line:column: message" (code CH_EINVAL, CH_ETOOBIG, ...). */
static napi_value throw_config(napi_env env, int rc, const ch_config_error *err)
{
    char buf[sizeof(err->file) + sizeof(err->message) + 32];
    ch_config_error_str(err, buf, sizeof(buf));
    return throw_status(env, rc, buf);
}

/* The membership of a loaded pool, as chash-proxy and `chash lookup --config` place it. */
static napi_value pool_result(napi_env env, const char *source, const ch_conf_pool *p)
{
    if (p->nservers == 0) {
        char msg[700];
        snprintf(msg, sizeof(msg), "%.400s: pool %.200s has no servers%s", source, p->name,
                 ch_conf_membership_dns(p) ? " (its membership is in DNS)"
                 : p->membership           ? " (its membership is in etcd)"
                                           : "");
        return throw_status(env, CH_EEMPTY, msg);
    }
    ch_membership *m = NULL;
    ch_error err = {.size = sizeof(err)};
    int rc = ch_config_membership_err(p, NULL, &m, &err);
    if (rc != CH_OK) {
        char msg[900];
        snprintf(msg, sizeof(msg), "%.400s: pool %.200s: %s", source, p->name, err.message);
        return throw_status(env, rc, msg);
    }
    const ch_table *t = ch_membership_table(m);
    ch_table_info ti = {.size = sizeof(ti)};
    ch_table_info_get(t, &ti);
    return membership_result(env, m, ch_algo_name(ti.algo), ch_hash_name(ti.hash));
}

/* fromConfig(path: string, pool: string|null) -> {handle, ids, addrs, names, version, ...} */
static napi_value nb_from_config(napi_env env, napi_callback_info info)
{
    size_t argc = 2;
    napi_value argv[2];
    NB_CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
    if (argc != 2)
        return throw_type(env, "chash: fromConfig takes 2 arguments");
    bool absent = false;
    char *path = string_dup(env, argv[0], "path", false, NULL);
    if (path == NULL)
        return NULL;
    char *pool = string_dup(env, argv[1], "pool", true, &absent);
    if (pool == NULL && !absent) {
        free(path);
        return NULL;
    }
    napi_value result = NULL;
    ch_config *cfg = NULL;
    ch_config_error err;
    int rc = ch_config_load(path, &cfg, &err);
    if (rc != CH_OK) {
        throw_config(env, rc, &err);
    } else {
        const ch_conf_pool *p = ch_config_pool(cfg, pool);
        if (p == NULL) {
            char msg[1200], names[512] = "";
            for (size_t i = 0; i < cfg->npools; i++) {
                size_t len = strlen(names);
                snprintf(names + len, sizeof(names) - len, "%s%s", i ? ", " : "",
                         cfg->pools[i].name);
            }
            if (pool)
                snprintf(msg, sizeof(msg), "%.400s has no pool '%.200s' (pools: %s)", path,
                         pool, names);
            else
                snprintf(msg, sizeof(msg), "%.400s has %zu pools; name one (pools: %s)", path,
                         cfg->npools, names);
            throw_status(env, CH_EINVAL, msg);
        } else {
            result = pool_result(env, path, p);
        }
    }
    ch_config_free(cfg);
    free(path);
    free(pool);
    return result;
}

/* fromMembershipDocument(text: string|Uint8Array, name: string)
 *   -> {handle, ids, addrs, names, version, algorithm, hash, epoch} */
static napi_value nb_from_membership(napi_env env, napi_callback_info info)
{
    size_t argc = 2;
    napi_value argv[2];
    NB_CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
    if (argc != 2)
        return throw_type(env, "chash: fromMembershipDocument takes 2 arguments");
    nb_key text;
    if (!key_get(env, argv[0], &text))
        return NULL;
    char *name = string_dup(env, argv[1], "name", false, NULL);
    if (name == NULL) {
        key_release(&text);
        return NULL;
    }
    napi_value result = NULL;
    ch_config *cfg = NULL;
    ch_config_error err;
    int64_t epoch = 0;
    int rc = ch_config_membership_parse("membership", name, text.data, text.len, &cfg, &epoch,
                                        &err);
    if (rc != CH_OK) {
        throw_config(env, rc, &err);
    } else {
        result = pool_result(env, name, &cfg->pools[0]);
        napi_value e;
        if (result != NULL && (napi_create_int64(env, epoch, &e) != napi_ok ||
                               napi_set_named_property(env, result, "epoch", e) != napi_ok))
            result = napi_failed(env);
    }
    ch_config_free(cfg);
    free(name);
    key_release(&text);
    return result;
}

/* ---- lookups ------------------------------------------------------------------------------- */

/* lookup(handle, key) -> node index */
static napi_value nb_lookup(napi_env env, napi_callback_info info)
{
    size_t argc = 2;
    napi_value argv[2], out;
    NB_CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
    if (argc != 2)
        return throw_type(env, "chash: lookup takes a key");
    nb_table *nt = table_get(env, argv[0]);
    nb_key k;
    if (nt == NULL || !key_get(env, argv[1], &k))
        return NULL;
    size_t i = ch_lookup(nt->t, k.data, k.len);
    key_release(&k);
    NB_CHECK(env, napi_create_uint32(env, (uint32_t)i, &out));
    return out;
}

/* replicas(handle, key, r) -> node index[] (owner first, then the failover order) */
static napi_value nb_replicas(napi_env env, napi_callback_info info)
{
    size_t argc = 3;
    napi_value argv[3], out;
    NB_CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
    if (argc != 3)
        return throw_type(env, "chash: replicas takes a key and a count");
    nb_table *nt = table_get(env, argv[0]);
    if (nt == NULL)
        return NULL;
    uint32_t r = 0;
    if (napi_get_value_uint32(env, argv[2], &r) != napi_ok)
        return throw_type(env, "chash: the replica count must be a number");
    size_t want = r < nt->n ? r : nt->n;
    size_t stack[64], *idx = want <= 64 ? stack : malloc(want * sizeof(*idx));
    if (idx == NULL)
        return throw_status(env, CH_ENOMEM, NULL);
    nb_key k;
    napi_value result = NULL;
    if (key_get(env, argv[1], &k)) {
        size_t count = 0;
        int rc = ch_replicas(nt->t, k.data, k.len, want, idx, &count);
        key_release(&k);
        if (rc != CH_OK) {
            throw_status(env, rc, NULL);
        } else if (napi_create_array_with_length(env, count, &out) == napi_ok) {
            result = out;
            for (size_t i = 0; i < count && result; i++) {
                napi_value v;
                if (napi_create_uint32(env, (uint32_t)idx[i], &v) != napi_ok ||
                    napi_set_element(env, out, (uint32_t)i, v) != napi_ok)
                    result = napi_failed(env);
            }
        } else {
            napi_failed(env);
        }
    }
    if (idx != stack)
        free(idx);
    return result;
}

/* lookupMany(handle, keys: Array<string|Uint8Array>) -> Uint32Array of node indexes */
static napi_value nb_lookup_many(napi_env env, napi_callback_info info)
{
    size_t argc = 2;
    napi_value argv[2];
    NB_CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
    if (argc != 2)
        return throw_type(env, "chash: lookupMany takes an array of keys");
    nb_table *nt = table_get(env, argv[0]);
    if (nt == NULL)
        return NULL;
    bool is_array = false;
    uint32_t n = 0;
    NB_CHECK(env, napi_is_array(env, argv[1], &is_array));
    if (!is_array)
        return throw_type(env, "chash: lookupMany takes an array of keys");
    NB_CHECK(env, napi_get_array_length(env, argv[1], &n));
    napi_value ab, out;
    void *data = NULL;
    NB_CHECK(env, napi_create_arraybuffer(env, (size_t)n * sizeof(uint32_t), &data, &ab));
    NB_CHECK(env, napi_create_typedarray(env, napi_uint32_array, n, ab, 0, &out));
    uint32_t *res = data;
    for (uint32_t i = 0; i < n; i++) {
        napi_value v;
        nb_key k;
        NB_CHECK(env, napi_get_element(env, argv[1], i, &v));
        if (!key_get(env, v, &k))
            return NULL;
        res[i] = (uint32_t)ch_lookup(nt->t, k.data, k.len);
        key_release(&k);
    }
    return out;
}

/* keyHash(handle, key) -> BigInt: the table's hash of the key (ch_key_hash) */
static napi_value nb_key_hash(napi_env env, napi_callback_info info)
{
    size_t argc = 2;
    napi_value argv[2], out;
    NB_CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
    if (argc != 2)
        return throw_type(env, "chash: keyHash takes a key");
    nb_table *nt = table_get(env, argv[0]);
    nb_key k;
    if (nt == NULL || !key_get(env, argv[1], &k))
        return NULL;
    uint64_t h = ch_key_hash(nt->t, k.data, k.len);
    key_release(&k);
    NB_CHECK(env, napi_create_bigint_uint64(env, h, &out));
    return out;
}

static bool set_num(napi_env env, napi_value obj, const char *key, double v)
{
    napi_value x;
    return napi_create_double(env, v, &x) == napi_ok &&
           napi_set_named_property(env, obj, key, x) == napi_ok;
}

static bool set_str(napi_env env, napi_value obj, const char *key, const char *v)
{
    napi_value x;
    if (v == NULL)
        return napi_get_null(env, &x) == napi_ok && napi_set_named_property(env, obj, key, x) == napi_ok;
    return napi_create_string_utf8(env, v, NAPI_AUTO_LENGTH, &x) == napi_ok &&
           napi_set_named_property(env, obj, key, x) == napi_ok;
}

/* info(handle) -> {algorithm, hash, nodes, points, bytes, vnodes, tableSize, weights} */
static napi_value nb_info(napi_env env, napi_callback_info info)
{
    size_t argc = 1;
    napi_value argv[1], out, w;
    NB_CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
    nb_table *nt = argc == 1 ? table_get(env, argv[0]) : NULL;
    if (nt == NULL)
        return argc == 1 ? NULL : throw_type(env, "chash: info takes a handle");
    ch_table_info ti = {.size = sizeof(ti)};
    ch_table_info_get(nt->t, &ti);
    NB_CHECK(env, napi_create_object(env, &out));
    NB_CHECK(env, napi_create_array_with_length(env, nt->n, &w));
    bool ok = set_str(env, out, "algorithm", ch_algo_name(ti.algo)) &&
              set_str(env, out, "hash", ch_hash_name(ti.hash)) &&
              set_num(env, out, "nodes", (double)ti.nodes) &&
              set_num(env, out, "points", (double)ti.points) &&
              set_num(env, out, "bytes", (double)ti.bytes) &&
              set_num(env, out, "vnodes", ti.vnodes) &&
              set_num(env, out, "tableSize", ti.table_size);
    for (size_t i = 0; ok && i < nt->n; i++) {
        napi_value x;
        ok = napi_create_double(env, ch_table_node_weight(nt->t, i), &x) == napi_ok &&
             napi_set_element(env, w, (uint32_t)i, x) == napi_ok;
    }
    if (!ok || napi_set_named_property(env, out, "weights", w) != napi_ok)
        return napi_failed(env);
    return out;
}

/* ---- registries ---------------------------------------------------------------------------- */

/* algorithms() -> [{name, id, weighted, fixedHash, addrIds, keyed, wholeWeights, consistent,
 * limits, maxWeight}] in id order */
static napi_value nb_algorithms(napi_env env, napi_callback_info info)
{
    (void)info;
    napi_value out;
    NB_CHECK(env, napi_create_array(env, &out));
    for (int id = 0; id < CH_ALGO_COUNT_; id++) {
        napi_value o, b;
        unsigned f = ch_algo_flags((ch_algo_id)id);
        ch_hash_id h;
        bool ok = napi_create_object(env, &o) == napi_ok &&
                  set_str(env, o, "name", ch_algo_name((ch_algo_id)id)) &&
                  set_num(env, o, "id", id) &&
                  set_num(env, o, "maxWeight", ch_algo_max_weight((ch_algo_id)id)) &&
                  set_str(env, o, "fixedHash",
                          ch_algo_hash((ch_algo_id)id, &h) == CH_OK ? ch_hash_name(h) : NULL);
        static const struct {
            const char *key;
            unsigned bit;
        } flags[] = {{"weighted", CH_ALGO_F_WEIGHTED},
                     {"addrIds", CH_ALGO_F_ADDR_IDS},
                     {"keyed", CH_ALGO_F_KEYED},
                     {"wholeWeights", CH_ALGO_F_WHOLE_WEIGHTS}};
        for (size_t j = 0; ok && j < sizeof(flags) / sizeof(flags[0]); j++)
            ok = napi_get_boolean(env, (f & flags[j].bit) != 0, &b) == napi_ok &&
                 napi_set_named_property(env, o, flags[j].key, b) == napi_ok;
        ok = ok && napi_get_boolean(env, (f & CH_ALGO_F_REMAPS) == 0, &b) == napi_ok &&
             napi_set_named_property(env, o, "consistent", b) == napi_ok &&
             set_str(env, o, "limits", ch_algo_limits((ch_algo_id)id));
        if (!ok || napi_set_element(env, out, (uint32_t)id, o) != napi_ok)
            return napi_failed(env);
    }
    return out;
}

/* hashes() -> [{name, id, bits}] in id order */
static napi_value nb_hashes(napi_env env, napi_callback_info info)
{
    (void)info;
    napi_value out;
    NB_CHECK(env, napi_create_array(env, &out));
    for (int id = 0; id < CH_HASH_COUNT_; id++) {
        napi_value o;
        bool ok = napi_create_object(env, &o) == napi_ok &&
                  set_str(env, o, "name", ch_hash_name((ch_hash_id)id)) &&
                  set_num(env, o, "id", id) &&
                  set_num(env, o, "bits", ch_hash_bits((ch_hash_id)id));
        if (!ok || napi_set_element(env, out, (uint32_t)id, o) != napi_ok)
            return napi_failed(env);
    }
    return out;
}

static napi_value nb_version(napi_env env, napi_callback_info info)
{
    (void)info;
    napi_value out;
    NB_CHECK(env, napi_create_string_utf8(env, ch_version(), NAPI_AUTO_LENGTH, &out));
    return out;
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */)
{
    static const struct {
        const char *name;
        napi_callback fn;
    } fns[] = {
        {"build", nb_build},
        {"fromConfig", nb_from_config},
        {"fromMembershipDocument", nb_from_membership},
        {"lookup", nb_lookup},
        {"replicas", nb_replicas},
        {"lookupMany", nb_lookup_many},
        {"keyHash", nb_key_hash},
        {"info", nb_info},
        {"algorithms", nb_algorithms},
        {"hashes", nb_hashes},
        {"version", nb_version},
    };
    for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
        napi_value f;
        if (napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].fn, NULL, &f) !=
                napi_ok ||
            napi_set_named_property(env, exports, fns[i].name, f) != napi_ok)
            return NULL;
    }
    return exports;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_msg.c — etcd v3 JSON gateway messages (etcd_msg.h) and what a fleet stores under a pool's
 * key: its keys, the instance record, lost and member notes (fleet_record.h).
 * jansson builds and reads the JSON; OpenSSL's EVP_EncodeBlock/EVP_DecodeBlock do base64.
 */
#include "etcd_msg.h"
#include "fleet_record.h"

#include <jansson.h>
#include <openssl/evp.h>

#include <inttypes.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WHY(...) (snprintf(why, whylen, __VA_ARGS__), -1)

char *ch__fleet_key(const char *key, const char *tail)
{
    size_t n = strlen(key) + strlen(tail) + 1;
    char *s = malloc(n);
    if (s != NULL)
        snprintf(s, n, "%s%s", key, tail);
    return s;
}

char *ch__fleet_pending_key(const char *key)
{
    return ch__fleet_key(key, "/pending");
}

char *ch__fleet_instances_prefix(const char *key)
{
    return ch__fleet_key(key, "/instances/");
}

char *ch__fleet_lost_prefix(const char *key)
{
    return ch__fleet_key(key, "/lost/");
}

char *ch__fleet_members_prefix(const char *key)
{
    return ch__fleet_key(key, "/members/");
}

/* ---- base64 and numbers ------------------------------------------------------------------------ */

static char *b64(const void *p, size_t len)
{
    char *s = malloc(4 * ((len + 2) / 3) + 1);
    if (s != NULL)
        EVP_EncodeBlock((unsigned char *)s, p, (int)len);
    return s;
}

/* Decodes s into a NUL-terminated malloc'd buffer; *len its length. NULL when invalid. */
static char *unb64(const char *s, size_t *len)
{
    size_t n = strlen(s);
    if (n % 4 != 0)
        return NULL;
    char *d = malloc(n / 4 * 3 + 1);
    if (d == NULL)
        return NULL;
    int got = n > 0 ? EVP_DecodeBlock((unsigned char *)d, (const unsigned char *)s, (int)n) : 0;
    if (got < 0) {
        free(d);
        return NULL;
    }
    size_t pad = n >= 2 && s[n - 1] == '=' ? (s[n - 2] == '=' ? 2 : 1) : 0;
    *len = (size_t)got - pad;
    d[*len] = '\0';
    return d;
}

/* The end of the range of keys that start with key: key with its last byte incremented (keys
 * here are printable ASCII, so it never wraps). */
static char *prefix_end(const char *key)
{
    size_t n = strlen(key);
    char *e = malloc(n + 1);
    if (e != NULL) {
        memcpy(e, key, n + 1);
        e[n - 1]++;
    }
    return e;
}

static json_t *jint(int64_t v)
{
    char s[24];
    snprintf(s, sizeof(s), "%" PRId64, v);
    return json_string(s);
}

/* An int64 given as a decimal string (the gateway's way) or a number; absent: 0. */
static int64_t get_int(const json_t *o, const char *name)
{
    const json_t *v = json_object_get(o, name);
    if (json_is_integer(v))
        return (int64_t)json_integer_value(v);
    if (json_is_string(v))
        return strtoll(json_string_value(v), NULL, 10);
    return 0;
}

static bool set_b64(json_t *o, const char *name, const void *p, size_t len)
{
    char *s = b64(p, len);
    int rc = s != NULL ? json_object_set_new(o, name, json_string(s)) : -1;
    free(s);
    return rc == 0;
}

static char *dump(json_t *o, bool ok)
{
    char *s = ok && o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

/* ---- requests ---------------------------------------------------------------------------------- */

static bool set_range(json_t *o, const char *key, bool prefix)
{
    bool ok = set_b64(o, "key", key, strlen(key));
    if (ok && prefix) {
        char *end = prefix_end(key);
        ok = end != NULL && set_b64(o, "range_end", end, strlen(end));
        free(end);
    }
    return ok;
}

char *ch__etcd_range_body(const char *key, bool prefix)
{
    json_t *o = json_object();
    return dump(o, o != NULL && set_range(o, key, prefix));
}

char *ch__etcd_put_body(const char *key, const void *value, size_t len, int64_t lease)
{
    json_t *o = json_object();
    bool ok = o != NULL && set_b64(o, "key", key, strlen(key)) && set_b64(o, "value", value, len);
    if (ok && lease != 0)
        ok = json_object_set_new(o, "lease", jint(lease)) == 0;
    return dump(o, ok);
}

char *ch__etcd_delete_body(const char *key)
{
    return ch__etcd_range_body(key, false);
}

char *ch__etcd_watch_body(const char *key, int64_t start_rev)
{
    json_t *c = json_object(), *o = json_object();
    bool ok = c != NULL && o != NULL && set_range(c, key, true) &&
              json_object_set_new(c, "progress_notify", json_true()) == 0 &&
              (start_rev <= 0 || json_object_set_new(c, "start_revision", jint(start_rev)) == 0);
    if (ok)
        ok = json_object_set_new(o, "create_request", c) == 0;
    else
        json_decref(c);
    return dump(o, ok);
}

char *ch__etcd_grant_body(int ttl_s)
{
    json_t *o = json_object();
    return dump(o, o != NULL && json_object_set_new(o, "TTL", jint(ttl_s)) == 0);
}

char *ch__etcd_keepalive_body(int64_t lease)
{
    json_t *o = json_object();
    return dump(o, o != NULL && json_object_set_new(o, "ID", jint(lease)) == 0);
}

char *ch__etcd_txn_body(const char *cmp_key, int64_t mod_rev, const ch__etcd_op *ops, size_t n)
{
    ch__etcd_cmp cmp = {cmp_key, mod_rev};
    return ch__etcd_txn_body_n(&cmp, 1, ops, n);
}

char *ch__etcd_txn_body_n(const ch__etcd_cmp *cmp, size_t ncmp, const ch__etcd_op *ops, size_t n)
{
    json_t *o = json_object(), *cmps = json_array(), *succ = json_array();
    bool ok = o != NULL && cmps != NULL && succ != NULL;
    for (size_t i = 0; ok && i < ncmp; i++) {
        json_t *c = json_object();
        int64_t rev = cmp[i].mod_rev;
        ok = c != NULL && set_b64(c, "key", cmp[i].key, strlen(cmp[i].key)) &&
             json_object_set_new(c, "target", json_string(rev != 0 ? "MOD" : "CREATE")) == 0 &&
             json_object_set_new(c, "result", json_string("EQUAL")) == 0 &&
             json_object_set_new(c, rev != 0 ? "mod_revision" : "create_revision", jint(rev)) == 0;
        if (ok)
            ok = json_array_append_new(cmps, c) == 0;
        else
            json_decref(c);
    }
    for (size_t i = 0; ok && i < n; i++) {
        json_t *req = json_object(), *wrap = json_object();
        ok = req != NULL && wrap != NULL && set_b64(req, "key", ops[i].key, strlen(ops[i].key)) &&
             (ops[i].value == NULL || set_b64(req, "value", ops[i].value, ops[i].len)) &&
             (ops[i].value == NULL || ops[i].lease == 0 ||
              json_object_set_new(req, "lease", jint(ops[i].lease)) == 0) &&
             json_object_set_new(wrap, ops[i].value != NULL ? "request_put" : "request_delete_range",
                                 req) == 0;
        if (!ok)
            json_decref(req);
        if (ok)
            ok = json_array_append_new(succ, wrap) == 0;
        else
            json_decref(wrap);
    }
    if (ok)
        ok = json_object_set_new(o, "compare", cmps) == 0 && json_object_set_new(o, "success", succ) == 0;
    else {
        json_decref(cmps);
        json_decref(succ);
    }
    return dump(o, ok);
}

/* ---- responses --------------------------------------------------------------------------------- */

/* The offset of the quote that closes the string opened at json[open], or len when it is not
 * closed. A quote closes it when an even number of backslashes precede it; memchr finds the
 * quotes, so a long string (a base64 value of megabytes) costs about what memchr does, and each
 * backslash is counted at most once. */
static size_t string_end(const char *json, size_t len, size_t open)
{
    size_t from = open + 1;
    for (;;) {
        const char *q = memchr(json + from, '"', len - from);
        if (q == NULL)
            return len;
        size_t at = (size_t)(q - json), bs = 0;
        while (at - bs > from && json[at - bs - 1] == '\\')
            bs++;
        if (bs % 2 == 0)
            return at;
        from = at + 1;
    }
}

size_t ch__json_too_deep(const char *json, size_t len, unsigned max)
{
    unsigned depth = 0;
    for (size_t i = 0; i < len; i++) {
        switch (json[i]) {
        case '"': /* an unclosed string ends the text */
            i = string_end(json, len, i);
            break;
        case '[':
        case '{':
            if (++depth > max)
                return i;
            break;
        case ']':
        case '}':
            if (depth > 0)
                depth--;
            break;
        default:
            break;
        }
    }
    return SIZE_MAX;
}

/* Parses json into *root; an error answer is a failure with its message. */
static int parse(const char *json, size_t len, json_t **root, char *why, size_t whylen)
{
    size_t deep = ch__json_too_deep(json, len, CH__JSON_MAX_DEPTH);
    *root = NULL;
    if (deep != SIZE_MAX)
        return WHY("etcd answered with JSON nested deeper than %d levels, the limit, at byte %zu",
                   CH__JSON_MAX_DEPTH, deep);
    json_error_t je;
    *root = json_loadb(json, len, 0, &je);
    if (*root == NULL || !json_is_object(*root)) {
        json_decref(*root);
        *root = NULL;
        return WHY("etcd answered with something that is not a JSON object (%s)", je.text);
    }
    const json_t *err = json_object_get(*root, "error");
    const json_t *msg = json_object_get(*root, "message");
    if (json_is_object(err)) { /* a watch stream's error */
        msg = json_object_get(err, "message");
        err = msg;
    }
    if (err != NULL || (msg != NULL && json_object_get(*root, "code") != NULL)) {
        const json_t *t = json_is_string(msg) ? msg : err;
        snprintf(why, whylen, "etcd: %s", json_is_string(t) ? json_string_value(t) : "an error");
        json_decref(*root);
        *root = NULL;
        return -1;
    }
    return 0;
}

static int get_kv(const json_t *o, ch__etcd_kv *kv)
{
    memset(kv, 0, sizeof(*kv));
    const json_t *k = json_object_get(o, "key"), *v = json_object_get(o, "value");
    size_t kl;
    if (!json_is_string(k) || (kv->key = unb64(json_string_value(k), &kl)) == NULL)
        return -1;
    kv->value = unb64(json_is_string(v) ? json_string_value(v) : "", &kv->len);
    if (kv->value == NULL) {
        free(kv->key);
        return -1;
    }
    kv->create_rev = get_int(o, "create_revision");
    kv->mod_rev = get_int(o, "mod_revision");
    kv->lease = get_int(o, "lease");
    return 0;
}

void ch__etcd_kvs_free(ch__etcd_kv *kvs, size_t n)
{
    for (size_t i = 0; kvs != NULL && i < n; i++) {
        free(kvs[i].key);
        free(kvs[i].value);
    }
    free(kvs);
}

static int64_t header_rev(const json_t *o)
{
    return get_int(json_object_get(o, "header"), "revision");
}

int ch__etcd_parse_range(const char *json, size_t len, int64_t *rev, ch__etcd_kv **kvs,
                         size_t *n, char *why, size_t whylen)
{
    json_t *o;
    *kvs = NULL;
    *n = 0;
    if (parse(json, len, &o, why, whylen) != 0)
        return -1;
    *rev = header_rev(o);
    const json_t *a = json_object_get(o, "kvs");
    size_t m = json_is_array(a) ? json_array_size(a) : 0;
    int rc = 0;
    if (m > 0 && (*kvs = calloc(m, sizeof(**kvs))) == NULL)
        rc = WHY("out of memory");
    for (size_t i = 0; rc == 0 && i < m; i++) {
        if (get_kv(json_array_get(a, i), &(*kvs)[i]) != 0)
            rc = WHY("etcd answered with a malformed key-value");
        else
            *n = i + 1;
    }
    json_decref(o);
    if (rc != 0) {
        ch__etcd_kvs_free(*kvs, *n);
        *kvs = NULL;
        *n = 0;
    }
    return rc;
}

/* A write's answer: its revision, and for a txn (succeeded not NULL) whether its compare held. */
static int parse_written(const char *json, size_t len, int64_t *rev, bool *succeeded, char *why,
                         size_t whylen)
{
    json_t *o;
    if (parse(json, len, &o, why, whylen) != 0)
        return -1;
    *rev = header_rev(o);
    if (succeeded != NULL) /* absent: false (proto3 JSON leaves false out) */
        *succeeded = json_is_true(json_object_get(o, "succeeded"));
    json_decref(o);
    return 0;
}

int ch__etcd_parse_write(const char *json, size_t len, int64_t *rev, char *why, size_t whylen)
{
    return parse_written(json, len, rev, NULL, why, whylen);
}

int ch__etcd_parse_txn(const char *json, size_t len, int64_t *rev, bool *succeeded, char *why,
                       size_t whylen)
{
    return parse_written(json, len, rev, succeeded, why, whylen);
}

int ch__etcd_parse_lease(const char *json, size_t len, int64_t *id, int64_t *ttl, char *why,
                         size_t whylen)
{
    json_t *o;
    if (parse(json, len, &o, why, whylen) != 0)
        return -1;
    const json_t *r = json_object_get(o, "result"); /* keepalive wraps its answer */
    if (!json_is_object(r))
        r = o;
    *id = get_int(r, "ID");
    *ttl = get_int(r, "TTL");
    json_decref(o);
    return *id != 0 ? 0 : WHY("etcd answered without a lease id");
}

void ch__etcd_watch_msg_free(ch__etcd_watch_msg *m)
{
    for (size_t i = 0; m->events != NULL && i < m->nevents; i++) {
        free(m->events[i].kv.key);
        free(m->events[i].kv.value);
    }
    free(m->events);
    memset(m, 0, sizeof(*m));
}

int ch__etcd_parse_watch(const char *json, size_t len, ch__etcd_watch_msg *m, char *why,
                         size_t whylen)
{
    json_t *o;
    memset(m, 0, sizeof(*m));
    if (parse(json, len, &o, why, whylen) != 0)
        return -1;
    const json_t *r = json_object_get(o, "result");
    if (!json_is_object(r)) {
        json_decref(o);
        return WHY("a watch message without a result");
    }
    m->rev = header_rev(r);
    m->created = json_is_true(json_object_get(r, "created"));
    m->canceled = json_is_true(json_object_get(r, "canceled"));
    m->compact_rev = get_int(r, "compact_revision");
    const json_t *a = json_object_get(r, "events");
    size_t n = json_is_array(a) ? json_array_size(a) : 0;
    int rc = 0;
    if (n > 0 && (m->events = calloc(n, sizeof(*m->events))) == NULL)
        rc = WHY("out of memory");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const json_t *e = json_array_get(a, i);
        const json_t *t = json_object_get(e, "type");
        m->events[i].deleted = json_is_string(t) && strcmp(json_string_value(t), "DELETE") == 0;
        if (get_kv(json_object_get(e, "kv"), &m->events[i].kv) != 0)
            rc = WHY("a watch event with a malformed key-value");
        else
            m->nevents = i + 1;
    }
    json_decref(o);
    if (rc != 0)
        ch__etcd_watch_msg_free(m);
    return rc;
}

/* ---- the instance record ------------------------------------------------------------------------ */

/* X(field, kind): S a char array, I an int64. The one list of the record's fields. */
/* A flat JSON object of strings and integers, described field by field: the instance record
 * and the lost-instance note are two tables of these. */
typedef struct field {
    const char *name;
    bool str;        /* a char array of size bytes, else an int64_t */
    size_t off, size;
} field;
#define F_S(type, f) {#f, true, offsetof(type, f), sizeof(((type *)0)->f)}
#define F_I(type, f) {#f, false, offsetof(type, f), sizeof(int64_t)}

static char *fields_json(const void *r, const field *fs, size_t n)
{
    json_t *o = json_object();
    bool ok = o != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        const char *p = (const char *)r + fs[i].off;
        int64_t v = 0;
        if (!fs[i].str)
            memcpy(&v, p, sizeof(v));
        ok = json_object_set_new(o, fs[i].name, fs[i].str ? json_string(p) : json_integer(v)) == 0;
    }
    return dump(o, ok);
}

/* Fills r (zeroed first) from json; the first field (an id) must be there. */
static int fields_parse(const char *json, size_t len, void *r, size_t rsize, const field *fs,
                        size_t n, const char *what, char *why, size_t whylen)
{
    json_t *o;
    memset(r, 0, rsize);
    if (parse(json, len, &o, why, whylen) != 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        char *p = (char *)r + fs[i].off;
        const json_t *v = json_object_get(o, fs[i].name);
        if (fs[i].str && json_is_string(v)) {
            snprintf(p, fs[i].size, "%s", json_string_value(v));
        } else if (!fs[i].str) {
            int64_t x = get_int(o, fs[i].name);
            memcpy(p, &x, sizeof(x));
        }
    }
    json_decref(o);
    return *(const char *)((char *)r + fs[0].off) != '\0' ? 0 : WHY("%s without an id", what);
}

static const field record_fields[] = {
    F_S(ch__fleet_record, id), F_S(ch__fleet_record, kind), F_S(ch__fleet_record, pool),
    F_S(ch__fleet_record, host), F_I(ch__fleet_record, pid), F_I(ch__fleet_record, epoch),
    F_I(ch__fleet_record, since_unix_ms), F_S(ch__fleet_record, membership),
    F_I(ch__fleet_record, servers), F_I(ch__fleet_record, seen_epoch),
    F_S(ch__fleet_record, refused), F_I(ch__fleet_record, prepared),
    F_I(ch__fleet_record, prepare_failed), F_S(ch__fleet_record, prepare_error),
    F_S(ch__fleet_record, warm_up), F_I(ch__fleet_record, warm_up_until_unix_ms),
    F_I(ch__fleet_record, swapped_unix_us), F_I(ch__fleet_record, fenced),
    F_S(ch__fleet_record, on_fence),
};

static const field lost_fields[] = {
    F_S(ch__fleet_lost, id), F_I(ch__fleet_lost, epoch), F_I(ch__fleet_lost, lost_unix_ms),
    F_S(ch__fleet_lost, reason),
};

static const field member_fields[] = {
    F_S(ch__fleet_member, id), F_S(ch__fleet_member, kind), F_S(ch__fleet_member, host),
    F_I(ch__fleet_member, pid), F_I(ch__fleet_member, since_unix_ms),
};

#define NFIELDS(t) (sizeof(t) / sizeof((t)[0]))

char *ch__fleet_record_json(const ch__fleet_record *r)
{
    return fields_json(r, record_fields, NFIELDS(record_fields));
}

int ch__fleet_record_parse(const char *json, size_t len, ch__fleet_record *r, char *why,
                           size_t whylen)
{
    return fields_parse(json, len, r, sizeof(*r), record_fields, NFIELDS(record_fields),
                        "an instance record", why, whylen);
}

char *ch__fleet_lost_json(const ch__fleet_lost *l)
{
    return fields_json(l, lost_fields, NFIELDS(lost_fields));
}

int ch__fleet_lost_parse(const char *json, size_t len, ch__fleet_lost *l, char *why,
                         size_t whylen)
{
    return fields_parse(json, len, l, sizeof(*l), lost_fields, NFIELDS(lost_fields),
                        "a lost-instance note", why, whylen);
}

char *ch__fleet_member_json(const ch__fleet_member *m)
{
    return fields_json(m, member_fields, NFIELDS(member_fields));
}

int ch__fleet_member_parse(const char *json, size_t len, ch__fleet_member *m, char *why,
                           size_t whylen)
{
    return fields_parse(json, len, m, sizeof(*m), member_fields, NFIELDS(member_fields),
                        "a member note", why, whylen);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_fuzz.c — libFuzzer target for the parsers of etcd's answers (src/fleet/etcd_msg.c):
 * a range, a put or delete, a txn, a lease grant or keepalive, one watch message (a line of the
 * gateway's stream), and the instance record, lost-instance note and member note stored under
 * a pool's key. Every input goes through all of them. Checks:
 *   - a refusal gives a reason (a non-empty clause) and leaves nothing behind (no key-values,
 *     no events);
 *   - an acceptance gives key-values and events whose keys and values are NUL-terminated at
 *     their length, no longer than the input could hold (base64: 3 bytes per 4), and a lease
 *     with an id; a record, note or member with an id;
 *   - JSON nested deeper than CH__JSON_MAX_DEPTH is refused by every parser, naming the limit,
 *     and ch__json_too_deep's offset points at the '[' or '{' that crosses it and is the one a
 *     plain byte-at-a-time scan finds (at the limit and at 2 levels).
 * ASan and UBSan catch the rest. Seeds in fuzz/corpus/etcd: etcd 3.4's own answers.
 */
#include "etcd_msg.h"
#include "fleet_record.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_kv(const ch__etcd_kv *kv, size_t size)
{
    if (kv->key == NULL || kv->value == NULL || kv->value[kv->len] != '\0' ||
        kv->len > size / 4 * 3 || strlen(kv->key) > size / 4 * 3)
        abort();
}

/* A refusal must say why; deep is whether the input crosses the nesting limit. */
static void refused(const char *why, bool deep)
{
    if (why[0] == '\0' || (deep && strstr(why, "nested deeper than") == NULL))
        abort();
}

/* ch__json_too_deep the plain way, a byte at a time: the two must agree. */
static size_t too_deep_ref(const char *json, size_t len, unsigned max)
{
    unsigned depth = 0;
    for (size_t i = 0; i < len; i++) {
        if (json[i] == '"') {
            for (i++; i < len && json[i] != '"'; i++)
                if (json[i] == '\\')
                    i++;
        } else if (json[i] == '[' || json[i] == '{') {
            if (++depth > max)
                return i;
        } else if ((json[i] == ']' || json[i] == '}') && depth > 0) {
            depth--;
        }
    }
    return SIZE_MAX;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *json = (const char *)data;
    size_t at = ch__json_too_deep(json, size, CH__JSON_MAX_DEPTH);
    if (at != too_deep_ref(json, size, CH__JSON_MAX_DEPTH) ||
        ch__json_too_deep(json, size, 2) != too_deep_ref(json, size, 2))
        abort();
    bool deep = at != SIZE_MAX;
    if (deep && (at >= size || (json[at] != '[' && json[at] != '{')))
        abort();
    char why[300];
    int64_t rev, id, ttl;
    bool ok;

    ch__etcd_kv *kvs = (ch__etcd_kv *)&kvs;
    size_t n = 99;
    why[0] = '\0';
    if (ch__etcd_parse_range(json, size, &rev, &kvs, &n, why, sizeof(why)) != 0) {
        refused(why, deep);
        if (kvs != NULL || n != 0)
            abort();
    } else {
        if (deep || (n > 0) != (kvs != NULL))
            abort();
        for (size_t i = 0; i < n; i++)
            check_kv(&kvs[i], size);
        ch__etcd_kvs_free(kvs, n);
    }

    why[0] = '\0';
    if (ch__etcd_parse_write(json, size, &rev, why, sizeof(why)) != 0)
        refused(why, deep);
    else if (deep)
        abort();
    why[0] = '\0';
    if (ch__etcd_parse_txn(json, size, &rev, &ok, why, sizeof(why)) != 0)
        refused(why, deep);
    else if (deep)
        abort();
    why[0] = '\0';
    if (ch__etcd_parse_lease(json, size, &id, &ttl, why, sizeof(why)) != 0)
        refused(why, deep);
    else if (deep || id == 0)
        abort();

    ch__etcd_watch_msg w;
    why[0] = '\0';
    if (ch__etcd_parse_watch(json, size, &w, why, sizeof(why)) != 0) {
        refused(why, deep);
        if (w.events != NULL || w.nevents != 0)
            abort();
    } else {
        if (deep || (w.nevents > 0) != (w.events != NULL))
            abort();
        for (size_t i = 0; i < w.nevents; i++)
            check_kv(&w.events[i].kv, size);
        ch__etcd_watch_msg_free(&w);
    }

    ch__fleet_record rec;
    ch__fleet_lost lost;
    ch__fleet_member mem;
    why[0] = '\0';
    if (ch__fleet_record_parse(json, size, &rec, why, sizeof(why)) != 0)
        refused(why, deep);
    else if (deep || rec.id[0] == '\0')
        abort();
    why[0] = '\0';
    if (ch__fleet_lost_parse(json, size, &lost, why, sizeof(why)) != 0)
        refused(why, deep);
    else if (deep || lost.id[0] == '\0')
        abort();
    why[0] = '\0';
    if (ch__fleet_member_parse(json, size, &mem, why, sizeof(why)) != 0)
        refused(why, deep);
    else if (deep || mem.id[0] == '\0')
        abort();
    return 0;
}

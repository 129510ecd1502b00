/* SPDX-License-Identifier: Apache-2.0 */
/*
 * registry.c — the hash registry: names, widths and functions, all from CH_HASH_LIST.
 */
#include "../internal.h"

#include <string.h>

static const struct {
    const char *name;
    unsigned bits;
    ch__hash_fn fn;
} registry[CH_HASH_COUNT_] = {
#define ENTRY(id, name, bits, value) [CH_HASH_##id] = {#name, bits, ch__hash_##name},
    CH_HASH_LIST(ENTRY)
#undef ENTRY
};

static bool valid(ch_hash_id id)
{
    return (unsigned)id < CH_HASH_COUNT_;
}

ch__hash_fn ch__hash_fn_of(ch_hash_id id)
{
    return registry[id].fn;
}

int ch_hash_from_name(const char *name, ch_hash_id *out)
{
    if (name == NULL || out == NULL)
        return CH_EINVAL;
    for (unsigned i = 0; i < CH_HASH_COUNT_; i++) {
        if (strcmp(name, registry[i].name) == 0) {
            *out = (ch_hash_id)i;
            return CH_OK;
        }
    }
    return CH_EUNKNOWN;
}

const char *ch_hash_name(ch_hash_id id)
{
    return valid(id) ? registry[id].name : NULL;
}

unsigned ch_hash_bits(ch_hash_id id)
{
    return valid(id) ? registry[id].bits : 0;
}

int ch_hash64(ch_hash_id id, const void *key, size_t len, uint64_t *out)
{
    if (!valid(id) || out == NULL || (key == NULL && len > 0))
        return CH_EINVAL;
    *out = registry[id].fn(key, len);
    return CH_OK;
}

int ch_hash32(ch_hash_id id, const void *key, size_t len, uint32_t *out)
{
    uint64_t v;
    if (out == NULL)
        return CH_EINVAL;
    int rc = ch_hash64(id, key, len, &v);
    if (rc == CH_OK)
        *out = (uint32_t)v;
    return rc;
}

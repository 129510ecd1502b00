/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_bytes.h — for the fuzz targets over the codecs (hotpath, walk): a parsed key's routing
 * bytes, as the proxy routes by them.
 */
#ifndef CHASH_FUZZ_ROUTE_BYTES_H
#define CHASH_FUZZ_ROUTE_BYTES_H

#include "codec.h"

/* The routing bytes of m's key i into *out: the key as it stands, or decoded into buf[0, cap)
 * (a memcached base64 key); their length. A key the codec parsed must decode: a trap if not. */
static inline size_t route_bytes(const px_codec *c, const px_msg *m, size_t i, char *buf,
                                 size_t cap, const char **out)
{
    if ((m->flags & PX_MSG_ENCODED_KEYS) != 0) {
        long n = c->route_key(m, m->keys[i], buf, cap);
        if (n < 0)
            __builtin_trap();
        *out = buf;
        return (size_t)n;
    }
    *out = m->raw + m->keys[i].off;
    return m->keys[i].len;
}

#endif /* CHASH_FUZZ_ROUTE_BYTES_H */

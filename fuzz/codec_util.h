/* SPDX-License-Identifier: Apache-2.0 */
/*
 * codec_util.h — for the fuzz targets over the codecs (hotpath, walk): a codec's limits as
 * the proxy sets them, and a parsed key's routing bytes, as the proxy routes by them.
 */
#ifndef CHASH_FUZZ_CODEC_UTIL_H
#define CHASH_FUZZ_CODEC_UTIL_H

#include "codec.h"

#include <string.h>

/* The codec's limits for a pool taking requests of up to 1 MiB: the backend's or the clients'. */
static inline px_limits limits(const px_codec *c, bool backend)
{
    ch_conf_pool pc;
    memset(&pc, 0, sizeof(pc));
    pc.max_request_bytes = 1 << 20;
    px_limits lim, blim;
    c->limits(&pc, &lim, &blim);
    return backend ? blim : lim;
}

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

#endif /* CHASH_FUZZ_CODEC_UTIL_H */

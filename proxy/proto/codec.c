/*
 * codec.c — which codec serves a pool, and what the codecs and dispatch share.
 */
#include "codec.h"

#include <ctype.h>

const px_codec *px_codec_of(const ch_conf_pool *pc)
{
    return pc->redis ? &px_codec_redis : &px_codec_memcache;
}

void px_printable_name(char *out, size_t cap, const char *p, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len && n + 1 < cap; i++) {
        unsigned char ch = (unsigned char)p[i];
        out[n++] = isprint(ch) && ch != '\'' ? (char)tolower(ch) : '?';
    }
    out[n] = '\0';
}

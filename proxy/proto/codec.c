/* SPDX-License-Identifier: Apache-2.0 */
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

bool px_equal_secret(const char *a, size_t alen, const char *b, size_t blen)
{
    /* Every byte of the longer one is read; a volatile accumulator keeps the loop whole. */
    size_t n = alen > blen ? alen : blen;
    volatile unsigned char diff = (unsigned char)(alen != blen);
    for (size_t i = 0; i < n; i++) {
        unsigned char x = i < alen ? (unsigned char)a[i] : 0;
        unsigned char y = i < blen ? (unsigned char)b[i] : 0;
        diff |= (unsigned char)(x ^ y);
    }
    return diff == 0;
}

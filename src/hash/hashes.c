/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hashes.c — the hash functions of the registry (include/chash.h, CH_HASH_LIST).
 * Every function returns the hash's native value, 32-bit hashes zero-extended.
 */
#include "../internal.h"

#include <md5.h>
#include <sha2.h>
#include <string.h>
#include <xxhash.h>

#define FNV32_OFFSET UINT32_C(2166136261)
#define FNV32_PRIME UINT32_C(16777619)

static uint32_t fnv1a32(const unsigned char *p, size_t len)
{
    uint32_t h = FNV32_OFFSET;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= FNV32_PRIME;
    }
    return h;
}

static uint32_t rotl32(uint32_t x, int r)
{
    return (x << r) | (x >> (32 - r));
}

/* MurmurHash3 x86_32 (Appleby). Blocks are read little-endian, whatever the host order. */
uint32_t ch__murmur3_32(const void *key, size_t len, uint32_t seed)
{
    const unsigned char *p = key;
    const uint32_t c1 = UINT32_C(0xcc9e2d51), c2 = UINT32_C(0x1b873593);
    uint32_t h = seed;
    size_t nblocks = len / 4;

    for (size_t i = 0; i < nblocks; i++, p += 4) {
        uint32_t k = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24;
        k *= c1;
        k = rotl32(k, 15);
        k *= c2;
        h ^= k;
        h = rotl32(h, 13);
        h = h * 5 + UINT32_C(0xe6546b64);
    }

    uint32_t k = 0;
    switch (len & 3) {
    case 3:
        k ^= (uint32_t)p[2] << 16;
        /* fall through */
    case 2:
        k ^= (uint32_t)p[1] << 8;
        /* fall through */
    case 1:
        k ^= p[0];
        k *= c1;
        k = rotl32(k, 15);
        k *= c2;
        h ^= k;
    }
    h ^= (uint32_t)len;
    return ch__fmix32(h);
}

uint64_t ch__hash_fnv1a32_fmix(const void *key, size_t len)
{
    return ch__fmix32(fnv1a32(key, len));
}

uint64_t ch__hash_fnv1a32(const void *key, size_t len)
{
    return fnv1a32(key, len);
}

uint64_t ch__hash_murmur3_32(const void *key, size_t len)
{
    return ch__murmur3_32(key, len, 0);
}

uint64_t ch__hash_xxh3(const void *key, size_t len)
{
    return XXH3_64bits(key, len);
}

/* Bytes 0..7 of the digest, little-endian: the low 32 bits are ketama's point value. */
uint64_t ch__hash_md5(const void *key, size_t len)
{
    MD5_CTX ctx;
    uint8_t d[MD5_DIGEST_LENGTH];
    MD5Init(&ctx);
    MD5Update(&ctx, key, len);
    MD5Final(d, &ctx);
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | d[i];
    return v;
}

/* Bytes 0..7 of the digest, big-endian: Python's int(md5(x).hexdigest(), 16) >> 64, the
 * position of the rings that read an MD5 digest as one big number. */
uint64_t ch__hash_md5_64be(const void *key, size_t len)
{
    MD5_CTX ctx;
    uint8_t d[MD5_DIGEST_LENGTH];
    MD5Init(&ctx);
    MD5Update(&ctx, key, len);
    MD5Final(d, &ctx);
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | d[i];
    return v;
}

/* The length of the well-formed UTF-8 sequence at s[0..n-1] and its code point in *cp; 0 when
 * s[0] starts none. *bad receives the length of the maximal subpart of an ill-formed sequence
 * (at least 1): the bytes that one U+FFFD replaces, as Java's UTF-8 decoder and the Unicode
 * standard's recommended practice do. */
static inline size_t utf8_next(const uint8_t *s, size_t n, uint32_t *cp, size_t *bad)
{
    uint8_t b = s[0];
    *bad = 1;
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    size_t need;
    uint32_t c;
    uint8_t lo = 0x80, hi = 0xBF; /* the range of the second byte */
    if (b >= 0xC2 && b <= 0xDF) {
        need = 1, c = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
        need = 2, c = b & 0x0F;
        lo = b == 0xE0 ? 0xA0 : 0x80;
        hi = b == 0xED ? 0x9F : 0xBF;
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 3, c = b & 0x07;
        lo = b == 0xF0 ? 0x90 : 0x80;
        hi = b == 0xF4 ? 0x8F : 0xBF;
    } else {
        return 0;
    }
    for (size_t k = 1; k <= need; k++) {
        uint8_t lo_k = k == 1 ? lo : 0x80, hi_k = k == 1 ? hi : 0xBF;
        if (k >= n || s[k] < lo_k || s[k] > hi_k) {
            *bad = k;
            return 0;
        }
        c = c << 6 | (s[k] & 0x3F);
    }
    *cp = c;
    return need + 1;
}

/* Java's String.hashCode() over the UTF-16 code units of the key decoded from UTF-8: h = 31h + u
 * in 32-bit arithmetic, a code point above U+FFFF as its two surrogates. */
uint64_t ch__hash_java_hashcode(const void *key, size_t len)
{
    const uint8_t *s = key;
    uint32_t h = 0;
    size_t i = 0;
    while (i < len) {
        uint32_t cp;
        size_t bad, k = utf8_next(s + i, len - i, &cp, &bad);
        if (k == 0) {
            cp = 0xFFFD;
            k = bad;
        }
        if (cp >= 0x10000) {
            cp -= 0x10000;
            h = 31 * h + (0xD800 + (cp >> 10));
            h = 31 * h + (0xDC00 + (cp & 0x3FF));
        } else {
            h = 31 * h + cp;
        }
        i += k;
    }
    return h;
}

/* sdbm over the key's bytes (unsigned): h = c + (h << 6) + (h << 16) - h, from 0. HAProxy's
 * default hash for "balance hdr/uri/..." under hash-type consistent. */
uint64_t ch__hash_sdbm(const void *key, size_t len)
{
    const uint8_t *p = key;
    uint32_t h = 0;
    for (size_t i = 0; i < len; i++)
        h = p[i] + (h << 6) + (h << 16) - h;
    return h;
}

/* fnv1a32_fmix over the UTF-16 code units of the key decoded from UTF-8 (as java_hashcode
 * decodes it): h ^= unit; h *= 16777619 per code unit, then fmix32. What a JavaScript port of
 * chash's default hash computes with charCodeAt(); equal to fnv1a32_fmix on ASCII keys. */
uint64_t ch__hash_fnv1a32_fmix_utf16(const void *key, size_t len)
{
    const uint8_t *s = key;
    uint32_t h = UINT32_C(2166136261);
    size_t i = 0;
    while (i < len) {
        uint32_t cp;
        size_t bad, k = utf8_next(s + i, len - i, &cp, &bad);
        if (k == 0) {
            cp = 0xFFFD;
            k = bad;
        }
        if (cp >= 0x10000) {
            cp -= 0x10000;
            h = (h ^ (0xD800 + (cp >> 10))) * UINT32_C(16777619);
            h = (h ^ (0xDC00 + (cp & 0x3FF))) * UINT32_C(16777619);
        } else {
            h = (h ^ cp) * UINT32_C(16777619);
        }
        i += k;
    }
    return ch__fmix32(h);
}

/* MurmurHash2 64-bit as libstdc++ computes std::hash<std::string> on LP64 (_Hash_bytes with
 * seed 0xc70f6907), which Envoy's MurmurHash::murmurHash2 reproduces for its redis_proxy: with
 * m = 0xc6a4a7935bd1e995 and mix(v) = v ^ (v >> 47), h = seed ^ (len * m); each 8-byte block b
 * (little-endian) does h = (h ^ mix(b * m) * m) * m; a 1..7-byte tail t (little-endian) does
 * h = (h ^ t) * m; then h = mix(mix(h) * m). */
uint64_t ch__hash_murmur2_64(const void *key, size_t len)
{
    const uint64_t m = UINT64_C(0xc6a4a7935bd1e995);
    const uint8_t *p = key;
    uint64_t h = UINT64_C(0xc70f6907) ^ ((uint64_t)len * m);
    size_t blocks = len / 8;
    for (size_t i = 0; i < blocks; i++, p += 8) {
        uint64_t b = 0;
        for (int j = 8; j-- > 0;)
            b = b << 8 | p[j];
        b *= m;
        b ^= b >> 47;
        h ^= b * m;
        h *= m;
    }
    if (len & 7) {
        uint64_t t = 0;
        for (size_t j = len & 7; j-- > 0;)
            t = t << 8 | p[j];
        h ^= t;
        h *= m;
    }
    h ^= h >> 47;
    h *= m;
    return h ^ (h >> 47);
}

/* SHA-256 (libmd), digest bytes 0..7 big-endian: the order of SHA-256 hex digests compared as
 * strings, to 64 bits (django-redis' ring). */
uint64_t ch__hash_sha256_64be(const void *key, size_t len)
{
    uint8_t d[SHA256_DIGEST_LENGTH];
    SHA2_CTX ctx;
    SHA256Init(&ctx);
    SHA256Update(&ctx, key, len);
    SHA256Final(d, &ctx);
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | d[i];
    return v;
}

/* utf8_next() for the placements (pymemcache@3); the hashes above use the inline one. */
size_t ch__utf8_next(const uint8_t *s, size_t n, uint32_t *cp, size_t *bad)
{
    return utf8_next(s, n, cp, bad);
}

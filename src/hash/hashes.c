/*
 * hashes.c — the hash functions of the registry (include/chash.h, CH_HASH_LIST).
 * Every function returns the hash's native value, 32-bit hashes zero-extended.
 */
#include "../internal.h"

#include <md5.h>
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

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * twemproxy.c — twemproxy's key hashes (a pool's "hash:"), reproducing nutcracker 0.5.0 exactly,
 * quirks included. Every function returns a 32-bit value zero-extended to 64 bits.
 *
 * The signed-char quirk. twemproxy takes keys as `const char *`, and char is signed on x86-64,
 * where nutcracker is built and deployed. Where it converts such a char straight to a wider
 * unsigned type, a byte b >= 0x80 enters the hash as b - 256 sign-extended (0xffffff80..0xffffffff
 * in 32 bits) instead of b. The functions below say where that happens, and sx32()/sx64() do it
 * on every host, whatever the signedness of its char. Where twemproxy masks the value to 8 bits
 * (the CRCs) or reads bytes as unsigned (murmur, jenkins), there is no quirk.
 *
 * Key bytes are read one at a time, never as words, so no function reads past key[len - 1] and
 * none depends on the key's alignment or the host's byte order.
 */
#include "../internal.h"

/* A key byte as twemproxy's (uint32_t)(char) / (uint64_t)(char) conversion gives it on x86-64. */
static uint32_t sx32(unsigned char b)
{
    return b < 0x80 ? b : UINT32_C(0xffffff00) | b;
}

static uint64_t sx64(unsigned char b)
{
    return b < 0x80 ? b : UINT64_C(0xffffffffffffff00) | b;
}

static uint32_t le16(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static uint32_t le32(const unsigned char *p)
{
    return le16(p) | le16(p + 2) << 16;
}

static uint32_t rotl32(uint32_t x, int r)
{
    return (x << r) | (x >> (32 - r));
}

/* Bob Jenkins' one-at-a-time. Quirk: bytes are sign-extended. */
uint64_t ch__hash_one_at_a_time(const void *key, size_t len)
{
    const unsigned char *p = key;
    uint32_t h = 0;
    for (size_t i = 0; i < len; i++) {
        h += sx32(p[i]);
        h += h << 10;
        h ^= h >> 6;
    }
    h += h << 3;
    h ^= h >> 11;
    h += h << 15;
    return h;
}

/* ---- CRCs -------------------------------------------------------------------------------------
 * Computed four bits at a time from 16-entry tables that the compiler derives from the
 * polynomial: entry n is n pushed through four shift-and-reduce steps of the CRC register. */

/* MSB-first CRC-16 with polynomial 0x1021 (XMODEM), for the nibble n in the top four bits. */
#define CRC16_STEP(c) ((((c) << 1) ^ (((c) & 0x8000u) ? 0x1021u : 0u)) & 0xffffu)
#define CRC16_NIB(n) CRC16_STEP(CRC16_STEP(CRC16_STEP(CRC16_STEP((unsigned)(n) << 12))))
static const uint16_t crc16_nibble[16] = {
    CRC16_NIB(0),  CRC16_NIB(1),  CRC16_NIB(2),  CRC16_NIB(3),  CRC16_NIB(4),  CRC16_NIB(5),
    CRC16_NIB(6),  CRC16_NIB(7),  CRC16_NIB(8),  CRC16_NIB(9),  CRC16_NIB(10), CRC16_NIB(11),
    CRC16_NIB(12), CRC16_NIB(13), CRC16_NIB(14), CRC16_NIB(15),
};

/* LSB-first (reflected) CRC-32 with polynomial 0xedb88320 (IEEE 802.3), for the low nibble n. */
#define CRC32_STEP(c) (((c) >> 1) ^ (((c) & 1u) ? UINT32_C(0xedb88320) : 0u))
#define CRC32_NIB(n) CRC32_STEP(CRC32_STEP(CRC32_STEP(CRC32_STEP((uint32_t)(n)))))
static const uint32_t crc32_nibble[16] = {
    CRC32_NIB(0),  CRC32_NIB(1),  CRC32_NIB(2),  CRC32_NIB(3),  CRC32_NIB(4),  CRC32_NIB(5),
    CRC32_NIB(6),  CRC32_NIB(7),  CRC32_NIB(8),  CRC32_NIB(9),  CRC32_NIB(10), CRC32_NIB(11),
    CRC32_NIB(12), CRC32_NIB(13), CRC32_NIB(14), CRC32_NIB(15),
};

/* The CRC-32 register after one more byte (no pre- or post-inversion here). */
static uint32_t crc32_byte(uint32_t crc, unsigned char b)
{
    crc ^= b;
    crc = (crc >> 4) ^ crc32_nibble[crc & 15];
    crc = (crc >> 4) ^ crc32_nibble[crc & 15];
    return crc;
}

/* The IEEE CRC-32 of the key (init 0xffffffff, final inversion): CRC-32("123456789") = 0xcbf43926. */
static uint32_t crc32_ieee(const unsigned char *p, size_t len)
{
    uint32_t crc = UINT32_C(0xffffffff);
    for (size_t i = 0; i < len; i++)
        crc = crc32_byte(crc, p[i]);
    return ~crc;
}

/* CRC-16/XMODEM (init 0, no inversion) in the low 16 bits — but twemproxy keeps its CRC in a
 * 32-bit variable that it never masks back to 16 bits, so each byte shifts the register's high
 * byte up into bits 16..31 instead of out, and all 32 bits are returned. The result is
 *   crc16(key) | hi8(crc16(key[0..len-2])) << 16 | hi8(crc16(key[0..len-3])) << 24,
 * where crc16(prefix) is the XMODEM CRC of that prefix: a 16-bit value for keys of one byte,
 * 24 bits for two, 32 bits from three. */
uint64_t ch__hash_crc16(const void *key, size_t len)
{
    const unsigned char *p = key;
    uint32_t reg = 0; /* bits 0..15: the CRC; bits 16..31: the bytes shifted out of it */
    for (size_t i = 0; i < len; i++) {
        uint32_t crc = (reg ^ (uint32_t)p[i] << 8) & 0xffffu;
        crc = ((crc << 4) ^ crc16_nibble[crc >> 12]) & 0xffffu;
        crc = ((crc << 4) ^ crc16_nibble[crc >> 12]) & 0xffffu;
        reg = (reg << 8 & UINT32_C(0xffff0000)) | crc;
    }
    return reg;
}

/* libmemcached's "crc": bits 16..30 of the IEEE CRC-32, so only 15 bits (0..32767). twemproxy's
 * conversion of a signed char is masked to 8 bits before use: no sign quirk. */
uint64_t ch__hash_crc32(const void *key, size_t len)
{
    return (crc32_ieee(key, len) >> 16) & 0x7fffu;
}

/* The full IEEE CRC-32. */
uint64_t ch__hash_crc32a(const void *key, size_t len)
{
    return crc32_ieee(key, len);
}

/* ---- FNV ------------------------------------------------------------------------------------ */

#define FNV64_OFFSET UINT64_C(0xcbf29ce484222325)
#define FNV64_PRIME UINT64_C(0x100000001b3)
#define FNV32_OFFSET UINT32_C(0x811c9dc5)
#define FNV32_PRIME UINT32_C(0x01000193)

/* FNV-1 64-bit (multiply, then xor), truncated to its low 32 bits. Quirk: bytes are
 * sign-extended to 64 bits, so a byte >= 0x80 also flips bits 8..63. */
uint64_t ch__hash_fnv1_64(const void *key, size_t len)
{
    const unsigned char *p = key;
    uint64_t h = FNV64_OFFSET;
    for (size_t i = 0; i < len; i++) {
        h *= FNV64_PRIME;
        h ^= sx64(p[i]);
    }
    return (uint32_t)h;
}

/* "FNV-1a 64" that is in fact a 32-bit FNV-1a whose offset basis and prime are the 64-bit ones
 * truncated to 32 bits: 0x84222325 and 0x1b3. Multiplying by 0x1b3 mixes each byte only into
 * the bits above it, weakly: this is twemproxy's default hash, and it clusters. Quirk: bytes are
 * sign-extended. */
uint64_t ch__hash_fnv1a_64(const void *key, size_t len)
{
    const unsigned char *p = key;
    uint32_t h = (uint32_t)FNV64_OFFSET;
    for (size_t i = 0; i < len; i++) {
        h ^= sx32(p[i]);
        h *= (uint32_t)FNV64_PRIME;
    }
    return h;
}

/* FNV-1 32-bit. Quirk: bytes are sign-extended. */
uint64_t ch__hash_fnv1_32(const void *key, size_t len)
{
    const unsigned char *p = key;
    uint32_t h = FNV32_OFFSET;
    for (size_t i = 0; i < len; i++) {
        h *= FNV32_PRIME;
        h ^= sx32(p[i]);
    }
    return h;
}

/* FNV-1a 32-bit. Quirk: bytes are sign-extended, so it equals the registry's fnv1a32 only for
 * keys without bytes >= 0x80. */
uint64_t ch__hash_fnv1a_32(const void *key, size_t len)
{
    const unsigned char *p = key;
    uint32_t h = FNV32_OFFSET;
    for (size_t i = 0; i < len; i++) {
        h ^= sx32(p[i]);
        h *= FNV32_PRIME;
    }
    return h;
}

/* ---- the rest -------------------------------------------------------------------------------- */

/* Paul Hsieh's SuperFastHash, with twemproxy's differences from the published version: the hash
 * starts at 0 instead of at len, a 1-byte tail is added as an unsigned byte, and the third byte of
 * a 3-byte tail is sign-extended before the shift by 18 (for b >= 0x80 it sets bits 26..31, as
 * in the published version). Words are 16-bit little-endian. An empty key hashes to 0. */
uint64_t ch__hash_hsieh(const void *key, size_t len)
{
    const unsigned char *p = key;
    uint32_t h = 0;
    if (len == 0)
        return 0;
    for (size_t blocks = len / 4; blocks > 0; blocks--, p += 4) {
        h += le16(p);
        h = (h << 16) ^ (le16(p + 2) << 11) ^ h;
        h += h >> 11;
    }
    switch (len & 3) {
    case 3:
        h += le16(p);
        h ^= h << 16;
        h ^= sx32(p[2]) << 18;
        h += h >> 11;
        break;
    case 2:
        h += le16(p);
        h ^= h << 11;
        h += h >> 17;
        break;
    case 1:
        h += p[0];
        h ^= h << 10;
        h += h >> 1;
        break;
    default:
        break;
    }
    h ^= h << 3;
    h += h >> 5;
    h ^= h << 4;
    h += h >> 17;
    h ^= h << 25;
    h += h >> 6;
    return h;
}

/* Austin Appleby's MurmurHash2 (32-bit), seeded with 0xdeadbeef * len (mod 2^32) as libmemcached
 * and twemproxy do. Blocks are 32-bit little-endian; bytes are unsigned: no sign quirk. */
uint64_t ch__hash_murmur(const void *key, size_t len)
{
    const unsigned char *p = key;
    const uint32_t m = UINT32_C(0x5bd1e995);
    const uint32_t n = (uint32_t)len;
    uint32_t h = (UINT32_C(0xdeadbeef) * n) ^ n;
    size_t rest = len;

    for (; rest >= 4; rest -= 4, p += 4) {
        uint32_t k = le32(p);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    switch (rest) {
    case 3:
        h ^= (uint32_t)p[2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)p[1] << 8;
        /* fall through */
    case 1:
        h ^= p[0];
        h *= m;
        break;
    default:
        break;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

/* lookup3's mixing of a full 12-byte block into (a, b, c). */
static void lookup3_mix(uint32_t *a, uint32_t *b, uint32_t *c)
{
    *a -= *c; *a ^= rotl32(*c, 4);  *c += *b;
    *b -= *a; *b ^= rotl32(*a, 6);  *a += *c;
    *c -= *b; *c ^= rotl32(*b, 8);  *b += *a;
    *a -= *c; *a ^= rotl32(*c, 16); *c += *b;
    *b -= *a; *b ^= rotl32(*a, 19); *a += *c;
    *c -= *b; *c ^= rotl32(*b, 4);  *b += *a;
}

/* lookup3's final avalanche of (a, b, c) into c. */
static void lookup3_final(uint32_t *a, uint32_t *b, uint32_t *c)
{
    *c ^= *b; *c -= rotl32(*b, 14);
    *a ^= *c; *a -= rotl32(*c, 11);
    *b ^= *a; *b -= rotl32(*a, 25);
    *c ^= *b; *c -= rotl32(*b, 16);
    *a ^= *c; *a -= rotl32(*c, 4);
    *b ^= *a; *b -= rotl32(*a, 14);
    *c ^= *b; *c -= rotl32(*b, 24);
}

/* Bob Jenkins' lookup3 hashlittle() with initval 13. The original reads aligned keys a word at
 * a time and masks off the bytes past the end; reading the last block as little-endian words
 * padded with zero bytes gives the same value without reading past the key. Bytes are unsigned:
 * no sign quirk. An empty key hashes to 0xdeadbeef + 13, unmixed, as in the original. */
uint64_t ch__hash_jenkins(const void *key, size_t len)
{
    const unsigned char *p = key;
    uint32_t a, b, c;
    size_t rest = len;

    a = b = c = UINT32_C(0xdeadbeef) + (uint32_t)len + 13u;
    if (len == 0)
        return c;
    /* Every block but the last, which has 1..12 bytes, is mixed. */
    for (; rest > 12; rest -= 12, p += 12) {
        a += le32(p);
        b += le32(p + 4);
        c += le32(p + 8);
        lookup3_mix(&a, &b, &c);
    }
    uint32_t w[3] = {0, 0, 0};
    for (size_t i = 0; i < rest; i++)
        w[i / 4] |= (uint32_t)p[i] << (8 * (i % 4));
    a += w[0];
    b += w[1];
    c += w[2];
    lookup3_final(&a, &b, &c);
    return c;
}

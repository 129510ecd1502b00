/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_hashkit.c — libchash's twemproxy key hashes (and md5) against libmemcached's libhashkit
 * (1.1.4, libhashkit-dev), the library twemproxy took its hashes from, used as an oracle
 * in-process through libhashkit_digest().
 *
 * Pairs (registry name = libhashkit algorithm): one_at_a_time = DEFAULT, md5 = MD5 (the 32-bit
 * value), crc32 = CRC, fnv1_64, fnv1a_64, fnv1_32, fnv1a_32, hsieh, murmur, jenkins. Debian's
 * libhashkit is built without hsieh (libhashkit_has_algorithm() says so): then hsieh is reported
 * and left out; any other missing algorithm fails the test. crc16 and crc32a have no libhashkit
 * counterpart: the KAT vectors check them against values observed from nutcracker itself.
 *
 * Byte values. libhashkit and twemproxy read keys as `const char *` in the same way, so where
 * char is signed (x86-64, where nutcracker ships) both sign-extend bytes >= 0x80 in
 * one_at_a_time and the four FNVs, which libchash reproduces on every host: there the two must
 * agree on every key, whatever its bytes. Where char is unsigned, libhashkit does not sign-extend
 * and those five legitimately differ from twemproxy's x86-64 values on keys with such bytes: there
 * they are compared on ASCII keys only (the others on every key).
 *
 * Keys: every single byte, runs of 0xff of lengths 0..64, and 6,000 seeded keys of lengths
 * 0..64, half printable ASCII, half any bytes. Each is hashed by libchash from a heap copy of
 * exactly its length (ASan catches any read past it) at an even and an odd address.
 */
#include "testutil.h"
#include "internal.h"

#include <libhashkit-1.0/hashkit.h>

#include <limits.h>
#include <stdarg.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#define RANDOM_KEYS 6000
#define MAX_LEN 64
#define SHOW_MISMATCHES 8

typedef struct pair {
    ch_hash_id ours;
    hashkit_hash_algorithm_t theirs;
    const char *theirs_name;
    bool sign_quirk; /* reads bytes as (signed) chars widened to an unsigned integer */
    bool optional;   /* may be compiled out of libhashkit */
} pair;

static const pair pairs[] = {
    {CH_HASH_TW_ONE_AT_A_TIME, HASHKIT_HASH_DEFAULT, "HASHKIT_HASH_DEFAULT", true, false},
    {CH_HASH_MD5, HASHKIT_HASH_MD5, "HASHKIT_HASH_MD5", false, false},
    {CH_HASH_TW_CRC32, HASHKIT_HASH_CRC, "HASHKIT_HASH_CRC", false, false},
    {CH_HASH_TW_FNV1_64, HASHKIT_HASH_FNV1_64, "HASHKIT_HASH_FNV1_64", true, false},
    {CH_HASH_TW_FNV1A_64, HASHKIT_HASH_FNV1A_64, "HASHKIT_HASH_FNV1A_64", true, false},
    {CH_HASH_TW_FNV1_32, HASHKIT_HASH_FNV1_32, "HASHKIT_HASH_FNV1_32", true, false},
    {CH_HASH_TW_FNV1A_32, HASHKIT_HASH_FNV1A_32, "HASHKIT_HASH_FNV1A_32", true, false},
    {CH_HASH_TW_HSIEH, HASHKIT_HASH_HSIEH, "HASHKIT_HASH_HSIEH", false, true},
    {CH_HASH_TW_MURMUR, HASHKIT_HASH_MURMUR, "HASHKIT_HASH_MURMUR", false, false},
    {CH_HASH_TW_JENKINS, HASHKIT_HASH_JENKINS, "HASHKIT_HASH_JENKINS", false, false},
};
#define NPAIRS (sizeof pairs / sizeof pairs[0])

/* Whether libhashkit's reading of bytes matches twemproxy's x86-64 one for every byte value. */
static const bool char_is_signed = CHAR_MIN < 0;

typedef struct key {
    unsigned char bytes[MAX_LEN];
    size_t len;
} key;

static bool is_ascii(const key *k)
{
    for (size_t i = 0; i < k->len; i++)
        if (k->bytes[i] >= 0x80)
            return false;
    return true;
}

/* The keys described at the top, in a fixed order; *n receives their number. */
static key *make_keys(size_t *n)
{
    size_t cap = 256 + (MAX_LEN + 1) + RANDOM_KEYS, m = 0;
    key *keys = calloc(cap, sizeof *keys);
    assert_non_null(keys);
    for (unsigned b = 0; b < 256; b++)
        keys[m++] = (key){.bytes = {(unsigned char)b}, .len = 1};
    for (size_t len = 0; len <= MAX_LEN; len++, m++) {
        memset(keys[m].bytes, 0xff, len);
        keys[m].len = len;
    }
    uint64_t st = 0x6861736b6974ULL; /* "hashkit" */
    for (size_t i = 0; i < RANDOM_KEYS; i++, m++) {
        keys[m].len = tu_below(&st, MAX_LEN + 1);
        for (size_t j = 0; j < keys[m].len; j++)
            keys[m].bytes[j] = i % 2 ? (unsigned char)tu_below(&st, 256)
                                     : (unsigned char)(0x20 + tu_below(&st, 0x7f - 0x20));
    }
    assert_int_equal(m, cap);
    *n = m;
    return keys;
}

static void print_key(const key *k)
{
    for (size_t i = 0; i < k->len; i++)
        fprintf(stderr, "%02x", k->bytes[i]);
    if (k->len == 0)
        fprintf(stderr, "(empty)");
}

/* libchash's 32-bit value of a key, hashed from a heap copy of its bytes that starts `offset`
 * bytes into an allocation ending right after it. */
static uint32_t ours(ch_hash_id id, const key *k, size_t offset)
{
    unsigned char *buf = malloc(k->len + offset > 0 ? k->len + offset : 1);
    assert_non_null(buf);
    unsigned char *p = buf + offset;
    if (k->len > 0)
        memcpy(p, k->bytes, k->len);
    uint32_t h = 0;
    assert_int_equal(ch_hash32(id, p, k->len, &h), CH_OK);
    free(buf);
    return h;
}

static void test_against_libhashkit(void **state)
{
    (void)state;
    size_t nkeys;
    key *keys = make_keys(&nkeys);
    int failed_pairs = 0, compared_pairs = 0;

    for (size_t i = 0; i < NPAIRS; i++) {
        const pair *pr = &pairs[i];
        const char *name = ch_hash_name(pr->ours);
        if (!libhashkit_has_algorithm(pr->theirs)) {
            if (pr->optional) {
                printf("  %-14s not compared: this libhashkit is built without %s (the KAT "
                       "vectors check it against nutcracker)\n",
                       name, pr->theirs_name);
                continue;
            }
            fprintf(stderr, "libhashkit lacks %s, which every build has\n", pr->theirs_name);
            failed_pairs++;
            continue;
        }
        bool all_bytes = char_is_signed || !pr->sign_quirk;
        size_t compared = 0, high = 0, bad = 0;
        for (size_t k = 0; k < nkeys; k++) {
            const key *kk = &keys[k];
            bool ascii = is_ascii(kk);
            if (!all_bytes && !ascii)
                continue;
            uint32_t want = libhashkit_digest((const char *)kk->bytes, kk->len, pr->theirs);
            for (size_t offset = 0; offset < 2; offset++) {
                uint32_t got = ours(pr->ours, kk, offset);
                if (got != want && bad++ < SHOW_MISMATCHES) {
                    fprintf(stderr, "%s: key ", name);
                    print_key(kk);
                    fprintf(stderr, " (len %zu, offset %zu): libchash 0x%08x, libhashkit %s "
                                    "0x%08x\n",
                            kk->len, offset, (unsigned)got, pr->theirs_name, (unsigned)want);
                }
            }
            compared++;
            high += !ascii;
        }
        printf("  %-14s = %-22s %zu keys (%zu with bytes >= 0x80): %s\n", name,
               pr->theirs_name, compared, high, bad ? "MISMATCH" : "equal");
        if (bad)
            failed_pairs++;
        compared_pairs++;
    }
    free(keys);
    if (failed_pairs)
        fail_msg("%d of %zu hashes disagree with libhashkit (see above)", failed_pairs, NPAIRS);
    assert_true(compared_pairs >= (int)NPAIRS - 1); /* at most hsieh left out */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_libhashkit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * near_fuzz.c — libFuzzer target for the near cache (src/hot/near.c; built and run by
 * fuzz/run.sh near), which keeps clients' keys and the bytes their servers answered.
 *
 * The input is a program over one cache (with generations, or without: its first byte, which
 * also picks max_bytes and the TTL): reads sent (a generation taken), replies stored (puts with
 * the generation taken, or a stale one, and a life of their own or none), gets, drops,
 * invalidations of a key or of all, and the clock moving on.
 * Keys are 16 names of up to 40 bytes, in pairs that share their 64-bit hash (so the cache
 * tells them apart by their bytes), all in one bucket of its table and a few of the
 * generations'. Beside the cache a model keeps, per key, the last reply stored and not dropped
 * since, with its generation and expiry (its read's send plus the TTL or its own life, the
 * shorter). Contracts checked, trapping on a violation:
 *   - a get serves only the model's reply for that key, byte for byte, while fresh: before its
 *     expiry, its key's generation unchanged since that read (with generations: neither its
 *     bucket's nor every key's moved), never after a drop of the key; *known is true when it
 *     serves;
 *   - a put succeeds only with the generation current (with generations), now before the
 *     expiry, and bytes within max_bytes / 8; it succeeds whenever those hold (memory does not
 *     run out here);
 *   - the stats: bytes never above max_bytes, entries at most the keys stored and not dropped,
 *     stores and refusals counting the puts, hits and misses counting the gets.
 */
#include "near.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NKEYS 16
#define MAX_REPLY 200
#define MAX_STEPS 256

static void check(int ok)
{
    if (!ok)
        __builtin_trap();
}

/* Key i: keys 2j and 2j+1 share a hash; every hash is in the table's bucket 5 of any size up to
 * 2^40, and in generation bucket j % 4. */
static uint64_t key_hash(size_t i)
{
    uint64_t j = i / 2;
    return ((j % 4) << (64 - CH__NEAR_GEN_BITS)) | ((j + 1) << 40) | 5;
}

static size_t key_bytes(size_t i, char *out)
{
    size_t n = 1 + (i * 7) % 40;
    memset(out, 'a' + (int)i, n);
    return n;
}

typedef struct model {
    bool stored;
    uint32_t gen;
    uint64_t expires;
    size_t len;
    unsigned char reply[MAX_REPLY];
} model;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    bool gens = (data[0] & 1) != 0;
    size_t max_bytes = 64 + (size_t)(data[0] >> 1) * 40;   /* 64 .. 5144 */
    uint64_t ttl = 1 + (uint64_t)data[1] * 3;             /* 1 .. 766 ns */
    ch__near_gens *g = gens ? ch__near_gens_new() : NULL;
    ch__near *c = ch__near_new(g, max_bytes, ttl);
    check(c != NULL && (!gens || g != NULL));
    model *md = calloc(NKEYS, sizeof(*md));
    check(md != NULL);
    uint64_t now = 1000;
    uint64_t sent_at[NKEYS] = {0};
    uint32_t gen_at[NKEYS] = {0};
    uint64_t gets = 0, puts_ok = 0, puts_refused = 0;
    /* The per-entry overhead near.c counts (its entry header), learnt from the first store. */
    size_t overhead = 0;
    for (size_t p = 2, step = 0; p + 1 < size && step < MAX_STEPS; step++) {
        uint8_t op = data[p], arg = data[p + 1];
        p += 2;
        size_t i = (op >> 3) % NKEYS;
        char key[40];
        size_t klen = key_bytes(i, key);
        uint64_t kh = key_hash(i);
        switch (op & 7) {
        case 0: /* the clock moves on */
            now += arg;
            break;
        case 1: /* a read of key i is sent now */
            sent_at[i] = now;
            gen_at[i] = gens ? ch__near_gen(g, kh) : 0;
            break;
        case 2:
        case 3: { /* its reply is stored: arg bytes from the input; op 3 with a stale gen; with
                     op's top bit, a life of its own from the next byte */
            uint64_t life = UINT64_MAX;
            if ((op & 0x80) != 0 && p < size)
                life = (uint64_t)data[p++] * 3;
            size_t rlen = arg % MAX_REPLY;
            if (p + rlen > size)
                rlen = size - p;
            const uint8_t *reply = data + p;
            p += rlen;
            uint32_t gen = gen_at[i] - ((op & 7) == 3 ? 1u : 0u);
            uint32_t cur = gens ? ch__near_gen(g, kh) : 0;
            ch__near_stats before;
            ch__near_stats_get(c, &before);
            bool ok = ch__near_put(c, kh, key, klen, gen, sent_at[i], life, now, reply, rlen);
            uint64_t expires = sent_at[i] + (life < ttl ? life : ttl);
            bool fresh = expires > now, current = !gens || gen == cur;
            if (ok) {
                check(fresh && current);
                puts_ok++;
                if (overhead == 0 && before.entries == 0) {
                    ch__near_stats after;
                    ch__near_stats_get(c, &after);
                    overhead = after.bytes - klen - rlen;
                }
                check(overhead == 0 || overhead + klen + rlen <= max_bytes / 8);
                md[i] = (model){.stored = true, .gen = gen, .expires = expires, .len = rlen};
                memcpy(md[i].reply, reply, rlen);
            } else {
                puts_refused++;
                check(!(fresh && current && overhead != 0 &&
                        overhead + klen + rlen <= max_bytes / 8));
            }
            break;
        }
        case 4:
        case 5: { /* a get now */
            size_t len = 0;
            bool known = false;
            const char *r = ch__near_get(c, kh, key, klen, now, &len, (op & 7) == 4 ? &known : NULL);
            gets++;
            if (r != NULL) {
                check(md[i].stored && md[i].expires > now);
                check(!gens || ch__near_gen(g, kh) == md[i].gen);
                check(len == md[i].len && (len == 0 || memcmp(r, md[i].reply, len) == 0));
                if ((op & 7) == 4)
                    check(known);
            }
            break;
        }
        case 6: /* the key is dropped (a write the caller makes itself) */
            ch__near_drop(c, kh, key, klen);
            md[i].stored = false;
            break;
        case 7: /* a write or delete of key i is sent or answered: its generation moves; odd
                   arg: a write of keys that cannot be named, every key's moves */
            if (gens && (arg & 1) != 0)
                ch__near_invalidate_all(g);
            else if (gens)
                ch__near_invalidate(g, kh);
            break;
        }
        ch__near_stats st;
        ch__near_stats_get(c, &st);
        size_t live = 0;
        for (size_t k = 0; k < NKEYS; k++)
            live += md[k].stored;
        check(st.bytes <= max_bytes && st.entries <= live);
        check(st.stores == puts_ok && st.refused == puts_refused && st.hits + st.misses == gets);
    }
    ch__near_free(c);
    ch__near_gens_free(g);
    free(md);
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ketama.c — the ketama continuum as twemproxy and libmemcached build it, point for point.
 *
 * Node i gets 4 * floorf((float)w_i / (float)W * vnodes / 4 * N) points (vnodes = 160 in both
 * peers), computed in float as they do. twemproxy adds 1e-10 before flooring; that never changes
 * the result (below 1 the sum stays below 1; from 1 up it is under half a float ulp), so it is
 * left out. Each MD5 digest of the point string "<prefix>-<k>", k = 0, 1, ..., gives 4 points:
 * digest bytes 4x..4x+3 read little-endian, x = 0..3. A key belongs to the first point at or
 * after the low 32 bits of its hash, wrapping (the ring's lookup, ring.c).
 *
 * The algorithms differ only in the prefix of node i's point strings:
 *   ketama                   the id (the server's twemproxy name, worked out by the caller);
 *   libmemcached_ketama      id "host:port": "host" when the port is 11211, else the id;
 *   libmemcached_ketama_spy  "/host:port" (spymemcached's format; "host" alone means 11211).
 *
 * Equal positions: points are generated in list order and the sort is stable, so the node
 * earlier in the list comes first and wins, as with nutcracker's qsort (glibc's merge sort is
 * stable) and libmemcached's comparator (value, then server index).
 *
 * Build cost: one MD5 per 4 points, O(P) sort. Memory: the ring's, 8 bytes per point.
 */
#include "../internal.h"

#include <math.h>
#include <md5.h>
#include <string.h>

#define KETAMA_PORT ":11211"

/* Points of node i: a multiple of 4, possibly 0 (a node with a tiny weight gets no keys, as in
 * the peers). SIZE_MAX when it exceeds CH_MAX_POINTS. */
static size_t ketama_points(const ch_table *t, size_t i)
{
    float pct = (float)t->weights[i] / (float)t->weight_sum;
    float x = pct * (float)t->opt.vnodes / 4.0f * (float)t->n;
    float groups = floorf(x);
    if (!(groups <= (float)(CH_MAX_POINTS / 4)))
        return SIZE_MAX;
    return (size_t)groups * 4;
}

/* Writes node i's point-string prefix into buf (room for strlen(id) + 8) and returns its length. */
static size_t ketama_prefix(const ch_table *t, size_t i, char *buf)
{
    const char *id = t->ids[i];
    size_t len = strlen(id);
    const char *colon = strrchr(id, ':');
    bool port_11211 = colon == NULL || strcmp(colon, KETAMA_PORT) == 0;

    if (t->opt.algo == CH_ALGO_LIBMEMCACHED_KETAMA && colon != NULL && port_11211)
        len = (size_t)(colon - id);
    if (t->opt.algo != CH_ALGO_LIBMEMCACHED_KETAMA_SPY) {
        memcpy(buf, id, len);
        return len;
    }
    buf[0] = '/';
    memcpy(buf + 1, id, len);
    if (colon == NULL) {
        memcpy(buf + 1 + len, KETAMA_PORT, sizeof(KETAMA_PORT) - 1);
        return 1 + len + sizeof(KETAMA_PORT) - 1;
    }
    return 1 + len;
}

static int ketama_build(ch_table *t)
{
    size_t total = 0, maxid = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t p = ketama_points(t, i);
        if (p == SIZE_MAX || (total += p) > CH_MAX_POINTS)
            return ch__fail_points(t);
        size_t len = strlen(t->ids[i]);
        maxid = len > maxid ? len : maxid;
    }
    if (total == 0) /* only when vnodes < 4: no node gets a whole digest */
        return ch__fail_no_points(t);

    size_t cap = maxid + 8 + 12;
    ch__point *pts = ch__alloc(t, (total + CH__RING_SCAN) * sizeof(*pts));
    char *name = ch__alloc(t, cap);
    if (pts == NULL || name == NULL) {
        ch__free(t, pts, (total + CH__RING_SCAN) * sizeof(*pts));
        ch__free(t, name, cap);
        return CH_ENOMEM;
    }

    size_t k = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t prefix = ketama_prefix(t, i, name), groups = ketama_points(t, i) / 4;
        for (uint32_t g = 0; g < groups; g++) {
            unsigned char d[MD5_DIGEST_LENGTH];
            MD5_CTX ctx;
            MD5Init(&ctx);
            MD5Update(&ctx, (const unsigned char *)name, ch__append_index(name, prefix, '-', g));
            MD5Final(d, &ctx);
            for (int x = 0; x < 4; x++) {
                const unsigned char *b = d + 4 * x;
                uint32_t pos = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                               (uint32_t)b[3] << 24;
                pts[k++] = (ch__point){.pos = pos, .node = (uint32_t)i};
            }
        }
    }
    ch__free(t, name, cap);
    return ch__ring_index(t, pts, total);
}

#define KETAMA_OPS(twemproxy)                                                                   \
    {                                                                                           \
        .build = ketama_build, .destroy = ch__ring_destroy, .lookup = ch__ring_lookup,          \
        .shares = ch__ring_shares, .walk_start = ch__ring_walk_start,                           \
        .walk_next = ch__ring_walk_next, .empty_key_zero = (twemproxy),                         \
    }

const ch__algo ch__algo_ketama = KETAMA_OPS(true);
const ch__algo ch__algo_libmemcached_ketama = KETAMA_OPS(false);
const ch__algo ch__algo_libmemcached_ketama_spy = KETAMA_OPS(false);

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * redis_clients.c — the rings of the Redis clients that shard in the application (Predis,
 * phpredis' RedisArray, redis-rb, go-redis' Ring, django-redis' ShardClient) and Envoy's ring
 * hash, each reproducing one library's placement exactly (docs/COMPATIBILITY.md gives the rules
 * and how each is proven against the real library).
 *
 * They are built on clients.c's two ring layouts with its order-preserving transforms: a
 * library that sends a key to the LARGEST point <= its hash (Predis' HashRing, redis-rb,
 * django-redis) stores complemented positions and looks up the complemented hash, so the
 * layouts' "first position >= x" is its search and their walk runs toward smaller positions,
 * which is where the key would go were its node not on the ring. A library whose map keeps
 * the LAST node written at a position (a PHP array, a Ruby hash, a Python dict) is generated
 * from the last node to the first on the 32-bit layout, whose equal positions keep generation
 * order and whose lookup takes the first of them; the 64-bit layout keeps the last point
 * generated at a position, so there the order is the library's own.
 *
 * Each library applies its own hash-tag rule before hashing; the rules differ in small ways
 * (empty tags, NUL bytes, anchoring, greed) and each is written out below. The table's
 * ch_options.hash_tag, when set, applies first (table.c), so leave it unset for these.
 */
#include "../internal.h"

#include <math.h>
#include <md5.h>
#include <sha2.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* ---- hash tags --------------------------------------------------------------------------- */

/* The text between the first '{' and the first '}' after it, when that text is non-empty;
 * else the whole key: Predis (ClusterStrategy::extractKeyTag), go-redis (hashtag.Key) and
 * twemproxy's own rule. */
static void tag_first_nonempty(const unsigned char **key, size_t *len)
{
    const unsigned char *k = *key, *open = memchr(k, '{', *len);
    if (open == NULL)
        return;
    size_t rest = *len - (size_t)(open - k) - 1;
    const unsigned char *close = memchr(open + 1, '}', rest);
    if (close == NULL || close == open + 1)
        return;
    *key = open + 1;
    *len = (size_t)(close - open - 1);
}

/* phpredis' ra_extract_key(): strchr() for '{', then strchr() for '}' after it, so the search
 * stops at the key's first NUL byte and an empty tag ("{}") is used as the (empty) key. */
static void tag_c_string(const unsigned char **key, size_t *len)
{
    const unsigned char *k = *key, *nul = memchr(k, '\0', *len);
    size_t clen = nul != NULL ? (size_t)(nul - k) : *len;
    const unsigned char *open = memchr(k, '{', clen);
    if (open == NULL)
        return;
    const unsigned char *close = memchr(open + 1, '}', clen - (size_t)(open - k) - 1);
    if (close == NULL)
        return;
    *key = open + 1;
    *len = (size_t)(close - open - 1);
}

/* redis-rb's default tag, the regular expression /^\{(.+?)\}/ searched in the key: '^' is
 * Ruby's start of a LINE, so at the key's start or after any "\n", the first line that begins
 * with '{' followed by the shortest non-empty run up to a '}' that does not cross a newline
 * ('.' matches any byte or character but "\n"; the run's first byte may itself be '}'). */
static void tag_ruby_anchored(const unsigned char **key, size_t *len)
{
    const unsigned char *k = *key;
    size_t n = *len;
    for (size_t s = 0; s < n; s++) {
        if (s > 0 && k[s - 1] != '\n')
            continue;
        if (s + 2 >= n || k[s] != '{' || k[s + 1] == '\n')
            continue;
        for (size_t j = s + 2; j < n && k[j] != '\n'; j++) {
            if (k[j] == '}') {
                *key = k + s + 1;
                *len = j - s - 1;
                return;
            }
        }
    }
}

/* django-redis' ShardClient: re.match(r".*\{(.*)\}.*") on the key, so both '.*' stay on its
 * first line; greedy, the tag runs from the last '{' before the line's last '}' to that '}'
 * (empty tags included). */
static void tag_python_greedy(const unsigned char **key, size_t *len)
{
    const unsigned char *k = *key, *nl = memchr(k, '\n', *len);
    size_t line = nl != NULL ? (size_t)(nl - k) : *len;
    size_t close = line;
    while (close > 0 && k[close - 1] != '}')
        close--;
    if (close == 0)
        return;
    close--; /* k[close] is the line's last '}' */
    size_t open = close;
    while (open > 0 && k[open - 1] != '{')
        open--;
    if (open == 0)
        return;
    open--;
    *key = k + open + 1;
    *len = close - open - 1;
}

/* ---- shared builders --------------------------------------------------------------------- */

/* Allocates the point array for `total` points of the 32-bit layout and a name buffer for
 * ids plus an index; frees both on failure. */
static int alloc_points(ch_table *t, size_t total, ch__point **pts, char **name, size_t *cap)
{
    *cap = ch__max_id_len(t) + 24;
    *pts = ch__alloc(t, (total + CH__RING_SCAN) * sizeof(**pts));
    *name = ch__alloc(t, *cap);
    if (*pts == NULL || *name == NULL) {
        ch__free(t, *pts, (total + CH__RING_SCAN) * sizeof(**pts));
        ch__free(t, *name, *cap);
        return CH_ENOMEM;
    }
    return CH_OK;
}

static uint32_t le32(const uint8_t *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint32_t be32(const uint8_t *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
}

static void md5_of(const char *s, size_t len, uint8_t d[MD5_DIGEST_LENGTH])
{
    MD5_CTX ctx;
    MD5Init(&ctx);
    MD5Update(&ctx, (const uint8_t *)s, len);
    MD5Final(d, &ctx);
}

/* Whole weights of at least 1, as the PHP and Python libraries read them. */
static bool whole_weights(const ch_table *t, double max)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->weights[i] < 1.0 || t->weights[i] > max || t->weights[i] != floor(t->weights[i]))
            return false;
    return true;
}

/* A predecessor ring's walk: the complemented ring's, from the complemented key hash. */
static size_t pred_lookup(const ch_table *t, uint64_t h)
{
    return ch__ring_lookup(t, ~(uint32_t)h);
}

static void pred_walk_start(const ch_table *t, uint64_t h, ch__walk *w)
{
    ch__ring_walk_start(t, ~(uint32_t)h, w);
}

/* ---- predis@1 ---------------------------------------------------------------------------- *
 * Predis 1.1's Predis\Cluster\Distributor\HashRing (Debian php-predis), the distributor of a
 * client given several servers: node i (its connection's "host:port", a socket's path) with
 * weight w_i ((int) of the "weight" parameter, 100 when that is 0 or missing: equal weights
 * whatever they are) gets round(w_i / W * N * replicas) points (replicas 128; PHP's round():
 * half away from zero after rounding to 15 significant digits), point k at
 * crc32("<id>:<k>") in a PHP array position -> node (the later node keeps a shared position).
 * A key (its tag, tag_first_nonempty) goes to the largest point <= crc32(key): an exact hit,
 * else the binary search's upper end, wrapping to the last point. */

#define PREDIS_LIMITS                                                                         \
    "Predis casts a weight to a whole number and reads one below 1 as its default, 100: "     \
    "weights must be whole numbers >= 1"

/* PHP 5.3+'s round($x) for places 0: x is first rounded to 15 significant digits (so that
 * 7.4999999999999991, the double nearest to 7.5 that arithmetic reached, rounds to 8), then
 * half away from zero. */
static double php_round(double x)
{
    if (!isfinite(x) || x == 0.0)
        return x;
    int pp = 14 - (int)floor(log10(fabs(x)));
    double tmp = x;
    if (pp > 0 && pp < 15) {
        double f = pow(10.0, pp); /* exact: 10^pp <= 10^14 */
        tmp = x * f;
        tmp = tmp >= 0.0 ? floor(tmp + 0.5) : ceil(tmp - 0.5);
        tmp /= f;
    } else if (fabs(x) >= 1e15) {
        return x;
    }
    return tmp >= 0.0 ? floor(tmp + 0.5) : ceil(tmp - 0.5);
}

/* Sum of the whole weights (each < 2^53 / N, so exact). */
static double weight_total(const ch_table *t)
{
    double w = 0;
    for (size_t i = 0; i < t->n; i++)
        w += floor(t->weights[i]);
    return w;
}

static size_t predis_points(const ch_table *t, size_t i, double total)
{
    double p = php_round(floor(t->weights[i]) / total * (double)t->n * (double)t->opt.vnodes);
    return p > (double)CH_MAX_POINTS ? SIZE_MAX : (size_t)p;
}

static int predis_build(ch_table *t)
{
    if (!whole_weights(t, (double)INT32_MAX))
        return ch__fail_library(t, CH_EWEIGHT);
    double wt = weight_total(t);
    size_t total = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t p = predis_points(t, i, wt);
        if (p == SIZE_MAX || (total += p) > CH_MAX_POINTS)
            return ch__fail_points(t);
    }
    if (total == 0)
        return ch__fail_no_points(t);
    ch__point *pts;
    char *name;
    size_t cap;
    if (alloc_points(t, total, &pts, &name, &cap) != CH_OK)
        return CH_ENOMEM;
    size_t k = 0;
    for (size_t i = t->n; i-- > 0;) {
        size_t idlen = strlen(t->ids[i]), p = predis_points(t, i, wt);
        memcpy(name, t->ids[i], idlen);
        for (uint32_t j = 0; j < p; j++) {
            size_t len = ch__append_index(name, idlen, ':', j);
            pts[k++] = (ch__point){.pos = ~(uint32_t)t->hash(name, len), .node = (uint32_t)i};
        }
    }
    ch__free(t, name, cap);
    return ch__ring_index(t, pts, total);
}

static uint64_t key_tag_first_nonempty(const ch_table *t, const void *key, size_t len)
{
    const unsigned char *k = key;
    tag_first_nonempty(&k, &len);
    return t->hash(k, len);
}

const ch__algo ch__algo_predis_1 = {
    .build = predis_build,
    .destroy = ch__ring_destroy,
    .lookup = pred_lookup,
    .shares = ch__ring_shares,
    .walk_start = pred_walk_start,
    .walk_next = ch__ring_walk_next,
    .key_hash = key_tag_first_nonempty,
    .whole_weights = true,
    .fixed_hash = true,
    .hash = CH_HASH_TW_CRC32A,
    .addr_ids = true,
    .default_vnodes = 128,
    .max_weight = (double)INT32_MAX,
    .limits = PREDIS_LIMITS,
    .points = ch__ring_points,
};

/* ---- predis_ketama@1 --------------------------------------------------------------------- *
 * Predis' KetamaRing (a HashRing with replicas 160): node i gets floor(w_i / W * N *
 * (replicas / 4)) MD5 digests of "<id>-<k>", each unpacked 'V4' into 4 positions (bytes
 * 4x..4x+3 little-endian) in a PHP array (the later node keeps a shared position). A key hashed
 * with md5 (its 'V' unpack: bytes 0..3 little-endian, chash's md5) goes to the first position
 * >= its hash: an exact hit, else the binary search's lower end, wrapping to the first. */

static size_t predis_ketama_digests(const ch_table *t, size_t i, double total)
{
    double d = floor(floor(t->weights[i]) / total * (double)t->n * ((double)t->opt.vnodes / 4.0));
    return d > (double)(CH_MAX_POINTS / 4) ? SIZE_MAX : (size_t)d;
}

static int predis_ketama_build(ch_table *t)
{
    if (!whole_weights(t, (double)INT32_MAX))
        return ch__fail_library(t, CH_EWEIGHT);
    double wt = weight_total(t);
    size_t total = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t d = predis_ketama_digests(t, i, wt);
        if (d == SIZE_MAX || (total += 4 * d) > CH_MAX_POINTS)
            return ch__fail_points(t);
    }
    if (total == 0)
        return ch__fail_no_points(t);
    ch__point *pts;
    char *name;
    size_t cap;
    if (alloc_points(t, total, &pts, &name, &cap) != CH_OK)
        return CH_ENOMEM;
    size_t k = 0;
    for (size_t i = t->n; i-- > 0;) {
        size_t idlen = strlen(t->ids[i]), nd = predis_ketama_digests(t, i, wt);
        memcpy(name, t->ids[i], idlen);
        for (size_t g = 0; g < nd; g++) {
            uint8_t d[MD5_DIGEST_LENGTH];
            md5_of(name, ch__append_index(name, idlen, '-', (uint32_t)g), d);
            for (int x = 0; x < 4; x++)
                pts[k++] = (ch__point){.pos = le32(d + 4 * x), .node = (uint32_t)i};
        }
    }
    ch__free(t, name, cap);
    return ch__ring_index(t, pts, total);
}

const ch__algo ch__algo_predis_ketama_1 = {
    .build = predis_ketama_build,
    .destroy = ch__ring_destroy,
    .lookup = ch__ring_lookup,
    .shares = ch__ring_shares,
    .walk_start = ch__ring_walk_start,
    .walk_next = ch__ring_walk_next,
    .key_hash = key_tag_first_nonempty,
    .whole_weights = true,
    .fixed_hash = true,
    .hash = CH_HASH_MD5,
    .addr_ids = true,
    .max_weight = (double)INT32_MAX,
    .limits = PREDIS_LIMITS,
    .points = ch__ring_points,
};

/* ---- phpredis_array@5 and phpredis_array_range@5 ----------------------------------------- *
 * phpredis 5's RedisArray (Debian php-redis 5.3; redis_array_impl.c). The host strings as
 * given ("host:port") are the ids. A key's tag (tag_c_string) is hashed with a CRC-32 loop that
 * leaves out the final xor: ~crc32(tag). With "consistent" => true each host gets 40 MD5
 * digests of "<host>-<j>", 4 points each (bytes 4x..4x+3 little-endian), sorted with glibc's
 * qsort (a merge sort: equal points keep the earlier host first), and a key goes to the first
 * point >= its hash (a lower-bound search), wrapping to the first; by default the range split
 * floor(crc32(tag) * N / 0xffffffff). The key hash here is crc32a(tag); the lookups invert it.
 * No weights. */

#define PHPREDIS_LIMITS "RedisArray has no weights: every weight must be equal"

static int phpredis_build(ch_table *t)
{
    if (!t->uniform)
        return ch__fail_library(t, CH_EUNSUPPORTED);
    size_t nd = t->opt.vnodes / 4;
    uint64_t total64 = (uint64_t)t->n * nd * 4;
    if (total64 > CH_MAX_POINTS)
        return ch__fail_points(t);
    if (total64 == 0)
        return ch__fail_no_points(t);
    size_t total = (size_t)total64;
    ch__point *pts;
    char *name;
    size_t cap;
    if (alloc_points(t, total, &pts, &name, &cap) != CH_OK)
        return CH_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t idlen = strlen(t->ids[i]);
        memcpy(name, t->ids[i], idlen);
        for (size_t g = 0; g < nd; g++) {
            uint8_t d[MD5_DIGEST_LENGTH];
            md5_of(name, ch__append_index(name, idlen, '-', (uint32_t)g), d);
            for (int x = 0; x < 4; x++)
                pts[k++] = (ch__point){.pos = le32(d + 4 * x), .node = (uint32_t)i};
        }
    }
    ch__free(t, name, cap);
    return ch__ring_index(t, pts, total);
}

static uint64_t key_tag_c_string(const ch_table *t, const void *key, size_t len)
{
    const unsigned char *k = key;
    tag_c_string(&k, &len);
    return t->hash(k, len);
}

static size_t phpredis_lookup(const ch_table *t, uint64_t h)
{
    return ch__ring_lookup(t, ~(uint32_t)h);
}

static void phpredis_walk_start(const ch_table *t, uint64_t h, ch__walk *w)
{
    ch__ring_walk_start(t, ~(uint32_t)h, w);
}

const ch__algo ch__algo_phpredis_array_5 = {
    .build = phpredis_build,
    .destroy = ch__ring_destroy,
    .lookup = phpredis_lookup,
    .shares = ch__ring_shares,
    .walk_start = phpredis_walk_start,
    .walk_next = ch__ring_walk_next,
    .key_hash = key_tag_c_string,
    .fixed_hash = true,
    .hash = CH_HASH_TW_CRC32A,
    .unweighted = true,
    .addr_ids = true,
    .limits = PHPREDIS_LIMITS,
    .points = ch__ring_points,
};

static int phpredis_range_build(ch_table *t)
{
    return t->uniform ? CH_OK : ch__fail_library(t, CH_EUNSUPPORTED);
}

static void phpredis_range_destroy(ch_table *t)
{
    (void)t;
}

/* floor(crc * N / 0xffffffff) in 64 bits; crc 0xffffffff would give N (RedisArray then reads
 * past its array): the last host here. */
static size_t phpredis_range_lookup(const ch_table *t, uint64_t h)
{
    uint64_t pos = (uint64_t)(uint32_t)h * t->n / UINT64_C(0xffffffff);
    return pos < t->n ? (size_t)pos : t->n - 1;
}

static void phpredis_range_walk_start(const ch_table *t, uint64_t h, ch__walk *w)
{
    w->next = phpredis_range_lookup(t, h);
    w->left = t->n;
}

/* Host i owns the crcs c with floor(c N / (2^32 - 1)) = i: c in [ceil(i (2^32-1) / N),
 * ceil((i+1) (2^32-1) / N)), and the last also c = 2^32 - 1. */
static void phpredis_range_shares(const ch_table *t, double *shares)
{
    const uint64_t m = UINT64_C(0xffffffff);
    for (size_t i = 0; i < t->n; i++) {
        uint64_t lo = (i * m + t->n - 1) / t->n, hi = ((i + 1) * m + t->n - 1) / t->n;
        shares[i] = (double)(hi - lo + (i + 1 == t->n)) * 0x1p-32;
    }
}

const ch__algo ch__algo_phpredis_array_range_5 = {
    .build = phpredis_range_build,
    .destroy = phpredis_range_destroy,
    .lookup = phpredis_range_lookup,
    .shares = phpredis_range_shares,
    .walk_start = phpredis_range_walk_start,
    .walk_next = ch__modulo_walk_next,
    .key_hash = key_tag_c_string,
    .fixed_hash = true,
    .hash = CH_HASH_TW_CRC32A,
    .unweighted = true,
    .addr_ids = true,
    .remaps = true,
    .limits = PHPREDIS_LIMITS,
};

/* ---- redis_rb@4 and redis_rb@5 ----------------------------------------------------------- *
 * redis-rb's Redis::Distributed over Redis::HashRing (Debian ruby-redis 4.8; redis-rb 5 from
 * its source): node i (its client's id, "redis://host:port/db" unless an :id is given) gets
 * 160 points (POINTS_PER_SERVER) at crc32("<id>:<k>") (4.x) or MD5("<id>:<k>") bytes 0..3
 * big-endian (5.x, unpack1("L>")), in a Ruby hash position -> node (the later node keeps a
 * shared position). A key (its tag, tag_ruby_anchored) hashed with Zlib.crc32 goes to the
 * largest point <= its hash, wrapping to the largest (index -1). No weights. An id written
 * "host:port" is taken as the client's id for it, "redis://host:port/0". */

#define REDIS_RB_LIMITS "redis-rb's HashRing has no weights: every weight must be equal"

/* Writes the point-string prefix of an id into buf: "redis://<id>/0" for "host:port" (a
 * non-empty host, a ':', digits), else the id itself. Returns its length. */
static size_t redis_rb_name(const char *id, char *buf)
{
    size_t len = strlen(id);
    const char *colon = strrchr(id, ':');
    bool host_port = strstr(id, "://") == NULL && colon != NULL && colon > id &&
                     colon[1] != '\0' && strspn(colon + 1, "0123456789") == strlen(colon + 1);
    if (!host_port) {
        memcpy(buf, id, len);
        return len;
    }
    memcpy(buf, "redis://", 8);
    memcpy(buf + 8, id, len);
    memcpy(buf + 8 + len, "/0", 2);
    return len + 10;
}

static int redis_rb_build_hash(ch_table *t, bool md5)
{
    if (!t->uniform)
        return ch__fail_library(t, CH_EUNSUPPORTED);
    uint64_t total64 = (uint64_t)t->n * t->opt.vnodes;
    if (total64 > CH_MAX_POINTS)
        return ch__fail_points(t);
    size_t total = (size_t)total64;
    ch__point *pts;
    char *name;
    size_t cap;
    if (alloc_points(t, total, &pts, &name, &cap) != CH_OK)
        return CH_ENOMEM;
    size_t k = 0;
    for (size_t i = t->n; i-- > 0;) {
        size_t base = redis_rb_name(t->ids[i], name);
        for (uint32_t j = 0; j < t->opt.vnodes; j++) {
            size_t len = ch__append_index(name, base, ':', j);
            uint32_t pos;
            if (md5) {
                uint8_t d[MD5_DIGEST_LENGTH];
                md5_of(name, len, d);
                pos = be32(d);
            } else {
                pos = (uint32_t)t->hash(name, len);
            }
            pts[k++] = (ch__point){.pos = ~pos, .node = (uint32_t)i};
        }
    }
    ch__free(t, name, cap);
    return ch__ring_index(t, pts, total);
}

static int redis_rb4_build(ch_table *t)
{
    return redis_rb_build_hash(t, false);
}

static int redis_rb5_build(ch_table *t)
{
    return redis_rb_build_hash(t, true);
}

static uint64_t key_tag_ruby(const ch_table *t, const void *key, size_t len)
{
    const unsigned char *k = key;
    tag_ruby_anchored(&k, &len);
    return t->hash(k, len);
}

#define REDIS_RB_OPS(build_fn)                                                                  \
    {                                                                                           \
        .build = build_fn, .destroy = ch__ring_destroy, .lookup = pred_lookup,                  \
        .shares = ch__ring_shares, .walk_start = pred_walk_start,                               \
        .walk_next = ch__ring_walk_next, .key_hash = key_tag_ruby, .fixed_hash = true,          \
        .hash = CH_HASH_TW_CRC32A, .unweighted = true, .limits = REDIS_RB_LIMITS,               \
        .points = ch__ring_points,                                                              \
    }

const ch__algo ch__algo_redis_rb_4 = REDIS_RB_OPS(redis_rb4_build);
const ch__algo ch__algo_redis_rb_5 = REDIS_RB_OPS(redis_rb5_build);

/* ---- go_redis_ring@5 ----------------------------------------------------------------------- *
 * go-redis v5's Ring (Debian golang-gopkg-redis.v5-dev; ring.go, internal/consistenthash): the
 * groupcache ring (clients.c) over the shard names with 100 replicas, rebuilt over the shards
 * that answer its heartbeat; a key's tag is hashtag.Key's (tag_first_nonempty). Ring adds the
 * shards in Go's map order, which is random: two shards' points that collide go to either;
 * chash gives them to the later one in the list (a collision of 32-bit positions, a chance of
 * about P^2 / 2^33 for P points). The build is groupcache@0's (clients.c). */

#define GO_REDIS_LIMITS "go-redis' Ring has no weights: every weight must be equal"

const ch__algo ch__algo_go_redis_ring_5 = {
    .build = ch__groupcache_build,
    .destroy = ch__ring_destroy,
    .lookup = ch__ring_lookup,
    .shares = ch__ring_shares,
    .walk_start = ch__ring_walk_start,
    .walk_next = ch__ring_walk_next,
    .key_hash = key_tag_first_nonempty,
    .fixed_hash = true,
    .hash = CH_HASH_TW_CRC32A,
    .unweighted = true,
    .default_vnodes = 100,
    .limits = GO_REDIS_LIMITS,
    .points = ch__ring_points,
};

/* ---- django_redis_shard@5 ---------------------------------------------------------------- *
 * django-redis 5's ShardClient (Debian python3-django-redis 5.2; hash_ring.py, sharded.py):
 * server i (its LOCATION string) gets 128 points, sha256("<name>:<x>").hexdigest(), in a dict
 * (the later server keeps a shared point) and a sorted list of the hex strings; a key's tag
 * (tag_python_greedy) goes to sorted_keys[bisect(sorted_keys, sha256(key).hexdigest()) - 1]:
 * the largest point <= the key's, index -1 (the largest) below the first. Fixed-length
 * lowercase hex compares as the 256-bit number; chash compares the top 64 bits (sha256_64be),
 * complemented on the 64-bit layout: exact unless a key's digest shares its first 8 bytes with
 * a point's (then chash counts the point as <= the key whatever follows). No weights. */

#define DJANGO_LIMITS "django-redis' HashRing has no weights: every weight must be equal"

static int django_build(ch_table *t)
{
    if (!t->uniform)
        return ch__fail_library(t, CH_EUNSUPPORTED);
    uint64_t total64 = (uint64_t)t->n * t->opt.vnodes;
    if (total64 > CH_MAX_POINTS)
        return ch__fail_points(t);
    return ch__ring64_build_named(t, (size_t)total64, ':', true, NULL);
}

static uint64_t key_tag_python(const ch_table *t, const void *key, size_t len)
{
    const unsigned char *k = key;
    tag_python_greedy(&k, &len);
    return t->hash(k, len);
}

static size_t django_lookup(const ch_table *t, uint64_t h)
{
    return ch__ring64_lookup(t, ~h);
}

static void django_walk_start(const ch_table *t, uint64_t h, ch__walk *w)
{
    ch__ring64_walk_start(t, ~h, w);
}

const ch__algo ch__algo_django_redis_shard_5 = {
    .build = django_build,
    .destroy = ch__ring64_destroy,
    .lookup = django_lookup,
    .shares = ch__ring64_shares,
    .walk_start = django_walk_start,
    .walk_next = ch__ring64_walk_next,
    .key_hash = key_tag_python,
    .fixed_hash = true,
    .hash = CH_HASH_SHA256_64BE,
    .unweighted = true,
    .default_vnodes = 128,
    .limits = DJANGO_LIMITS,
    .points = ch__ring64_points,
};

/* ---- envoy_ring_hash@1 ------------------------------------------------------------------- *
 * Envoy's ring hash load balancer (ring_hash_lb.cc; gRFC A42, which @grpc/grpc-js-xds 1.14
 * implements the same way): with normalized weights n_i = w_i / W and m their smallest, the
 * ring has ceil(scale) entries, scale = min(ceil(m * min_ring_size) / m, max_ring_size)
 * (min_ring_size: vnodes, 0 meaning Envoy's 1024; max_ring_size Envoy's default 8388608). Node
 * by node in list order, a running target grows by scale * n_i and entries "<id>_<k>", k from
 * 0, are hashed with XXH64 (seed 0) while the running count of entries is below the target.
 * The ring is sorted by hash (gRPC's stable sort: the earlier node first among equal hashes;
 * Envoy's std::sort leaves them in any order) and a key goes to the first entry >= its hash,
 * wrapping; gRPC's picker, finding that entry's endpoint down, tries the next entries: the
 * ring's walk. The key hash is Envoy's redis_proxy's: murmur2_64 of the key (of its tag when
 * enable_hashtagging is on: ch_options.hash_tag "{}"). Weights are xDS's load_balancing_weight,
 * whole numbers from 1 to 2^32 - 1. */

#define ENVOY_MAX_RING 8388608u
#define ENVOY_LIMITS                                                                            \
    "Envoy's load_balancing_weight is a whole number from 1 to 4294967295, and its "            \
    "minimum_ring_size (vnodes) at most 8388608"

static int envoy_build(ch_table *t)
{
    if (!whole_weights(t, 4294967295.0))
        return ch__fail_library(t, CH_EWEIGHT);
    if (t->opt.vnodes > ENVOY_MAX_RING)
        return ch__fail(t, CH_ETOOBIG, "envoy_ring_hash@1: vnodes (minimum_ring_size) %u: %s",
                        t->opt.vnodes, t->algo->limits);
    double wsum = 0, m = 1.0;
    for (size_t i = 0; i < t->n; i++)
        wsum += t->weights[i];
    for (size_t i = 0; i < t->n; i++) {
        double nw = t->weights[i] / wsum;
        m = nw < m ? nw : m;
    }
    double scale = ceil(m * (double)t->opt.vnodes) / m;
    if (scale > (double)ENVOY_MAX_RING)
        scale = (double)ENVOY_MAX_RING;
    /* The count per node follows the running sums; it is computed first, in list order, so the
     * points can then be generated from the last node to the first (ring64 keeps the last point
     * generated at a position: the earlier node). The counts add up to ceil(scale), or one more
     * where rounding leaves the last target a hair above scale, as in Envoy. */
    uint32_t *count = ch__alloc(t, t->n * sizeof(*count));
    if (count == NULL)
        return CH_ENOMEM;
    double current = 0, target = 0;
    size_t total = 0;
    for (size_t i = 0; i < t->n; i++) {
        target += scale * (t->weights[i] / wsum);
        uint32_t c = 0;
        while (current < target) {
            current += 1.0;
            c++;
        }
        count[i] = c;
        total += c;
    }
    size_t cap = ch__max_id_len(t) + 24;
    ch__point64 *pts = total > 0 ? ch__alloc(t, (total + CH__RING64_PAD) * sizeof(*pts)) : NULL;
    char *name = ch__alloc(t, cap);
    if (pts == NULL || name == NULL) {
        ch__free(t, count, t->n * sizeof(*count));
        ch__free(t, pts, (total + CH__RING64_PAD) * sizeof(*pts));
        ch__free(t, name, cap);
        return total > 0 ? CH_ENOMEM : ch__fail_no_points(t);
    }
    size_t k = 0;
    for (size_t i = t->n; i-- > 0;) {
        size_t idlen = strlen(t->ids[i]);
        memcpy(name, t->ids[i], idlen);
        for (uint32_t j = 0; j < count[i]; j++) {
            size_t len = ch__append_index(name, idlen, '_', j);
            pts[k++] = (ch__point64){.pos = XXH64(name, len, 0), .node = (uint32_t)i};
        }
    }
    ch__free(t, name, cap);
    ch__free(t, count, t->n * sizeof(*count));
    return ch__ring64_index(t, pts, k);
}

const ch__algo ch__algo_envoy_ring_hash_1 = {
    .build = envoy_build,
    .destroy = ch__ring64_destroy,
    .lookup = ch__ring64_lookup,
    .shares = ch__ring64_shares,
    .walk_start = ch__ring64_walk_start,
    .walk_next = ch__ring64_walk_next,
    .whole_weights = true,
    .fixed_hash = true,
    .hash = CH_HASH_MURMUR2_64,
    .addr_ids = true,
    .default_vnodes = 1024,
    .max_weight = 4294967295.0,
    .limits = ENVOY_LIMITS,
    .points = ch__ring64_points,
};

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * chash.h — libchash, the pure placement core of chash.
 *
 * libchash maps keys to nodes. It offers a registry of hash functions and a set of placement
 * tables (modulo, hash ring, rendezvous, jump, maglev), each built once from a node list and then
 * immutable. The library does no I/O, reads no clock, keeps no global mutable state, never prints
 * and never aborts.
 *
 * Thread-safety: every function is reentrant. A built ch_table is immutable, so any number of
 * threads may look keys up in one table at the same time without locks. A membership change builds
 * a new table; the caller swaps the pointer and frees the old table once no reader uses it.
 *
 * Errors: functions that can fail return an int status, CH_OK (0) on success and a negative
 * CH_E* code otherwise; results go to out-parameters, which are left untouched on failure.
 */
#ifndef CHASH_H
#define CHASH_H

#include <stddef.h>
#include <stdint.h>

/* CH_VERSION_MAJOR, _MINOR, _PATCH and CH_VERSION_STRING: the version of these headers,
 * generated from the CMake project version. ch_version() gives the library's at run time. */
#include "chash_version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Status codes. One list; it yields the enum and ch_strerror().
 * X(name, value, message)
 * ------------------------------------------------------------------------------------------- */
#define CH_STATUS_LIST(X)                                                                \
    X(CH_OK, 0, "success")                                                               \
    X(CH_EINVAL, -1, "invalid argument")                                                 \
    X(CH_ENOMEM, -2, "out of memory")                                                    \
    X(CH_EEMPTY, -3, "empty node list")                                                  \
    X(CH_EUNKNOWN, -4, "unknown name")                                                   \
    X(CH_EDUPID, -5, "duplicate node id")                                                \
    X(CH_EBADID, -6, "node id is empty or NULL")                                         \
    X(CH_EWEIGHT, -7, "node weight out of range (finite, > 0, within ch_algo_max_weight)") \
    X(CH_EUNSUPPORTED, -8, "operation not supported by this algorithm")                  \
    X(CH_ETOOBIG, -9, "size limit exceeded")

typedef enum ch_status {
#define CH__STATUS_ENUM(name, value, msg) name = value,
    CH_STATUS_LIST(CH__STATUS_ENUM)
#undef CH__STATUS_ENUM
} ch_status;

/* Returns a static, human-readable message for a status code; "unknown status" for any value
 * not in CH_STATUS_LIST. Never NULL. Cost: O(number of codes). */
const char *ch_strerror(int status);

/* Why a call failed, in words: the argument at fault and the limit it broke, e.g. "maglev:
 * table_size 65537 must be a prime greater than the node count, 100000 (e.g. 100003)". The
 * functions with an err parameter (ch_table_build_err, ch_membership_build_err in chash_route.h,
 * ch_config_membership_err in chash_config.h) fill it; err may be NULL.
 * Set size to sizeof(ch_error) first: the library writes nothing past size bytes, so an older
 * caller's smaller struct stays valid when the struct grows (it only ever grows at its end). */
#define CH_ERROR_MAX 256
typedef struct ch_error {
    size_t size;                /* sizeof(ch_error), set by the caller */
    int status;                 /* what the call returned: CH_OK, or a CH_E* code */
    char message[CH_ERROR_MAX]; /* NUL-terminated; on success "", on a failure without more to
                                   say (CH_ENOMEM) ch_strerror(status) */
} ch_error;

/* Returns the version of the library the program runs with, "MAJOR.MINOR.PATCH" (the
 * CH_VERSION_STRING it was built with; a program compiled against other headers sees its own
 * CH_VERSION_STRING differ). A static string, never NULL. Cost: O(1). */
const char *ch_version(void);

/* ---------------------------------------------------------------------------------------------
 * Hash functions. One registry list; it yields the enum, the names used by the CLI and config,
 * and the test tables. Adding a hash is one line here plus its function.
 * X(ENUM_SUFFIX, name, native_bits, value): the name token is both the registry name ("name")
 * and, inside the library, the implementing function; value is the enum value (ABI).
 *
 * Every hash gives a 32-bit ring position, and a 64-bit value that is the hash's native 64-bit
 * output where it has one; for the 32-bit hashes the 64-bit value is the 32-bit one with zero
 * high bits. For every hash, (uint32_t)ch_hash64(...) == ch_hash32(...).
 *   fnv1a32_fmix  FNV-1a 32-bit followed by the murmur3 fmix32 finalizer. THE DEFAULT.
 *   fnv1a32       raw FNV-1a 32-bit; kept to show why the finalizer matters (it clusters).
 *   murmur3_32    MurmurHash3 x86_32, seed 0.
 *   xxh3          XXH3 64-bit (libxxhash), seed 0; 32-bit value = low 32 bits.
 *   md5           MD5 (libmd); 64-bit value = digest bytes 0..7 read little-endian,
 *                 32-bit value = bytes 0..3 little-endian (ketama's convention; twemproxy's and
 *                 libmemcached's "md5" key hash is this 32-bit value).
 *
 * twemproxy's key hashes, under its names (a pool's "hash:"), reproducing nutcracker 0.5.0
 * exactly, quirks included; all 32-bit. They read key bytes as twemproxy does, i.e. as signed
 * chars where it does, so keys with bytes >= 0x80 hash as in nutcracker (and may differ from
 * textbook versions of the same function; docs/COMPATIBILITY.md lists where):
 *   one_at_a_time Bob Jenkins' one-at-a-time (libmemcached's default hash).
 *   crc16         CRC-16/XMODEM's table steps (poly 0x1021, init 0) in a 32-bit register that is
 *                 never masked to 16 bits: the XMODEM CRC in the low 16 bits, the high bytes of
 *                 earlier steps above (16 bits for 1-byte keys, 24 for 2, 32 from 3 bytes on).
 *   crc32         libmemcached's crc: ((CRC-32 >> 16) & 0x7fff): only 15 bits.
 *   crc32a        the full CRC-32 (IEEE 802.3).
 *   fnv1_64       FNV-1 64-bit, truncated to its low 32 bits.
 *   fnv1a_64      FNV-1a 64-bit truncated to 32 bits, which is a 32-bit FNV-1a with the 64-bit
 *                 offset and prime truncated (prime 0x1b3): twemproxy's DEFAULT, and poorly mixed.
 *   fnv1_32       FNV-1 32-bit.
 *   fnv1a_32      FNV-1a 32-bit (twemproxy's: differs from fnv1a32 for bytes >= 0x80).
 *   hsieh         Paul Hsieh's SuperFastHash with an initial value of 0.
 *   murmur        MurmurHash2 with seed 0xdeadbeef * len.
 *   jenkins       Bob Jenkins' lookup3 hashlittle() with initval 13.
 *
 * Hashes of client libraries' rings (docs/COMPATIBILITY.md):
 *   java_hashcode Java's String.hashCode() of the key read as UTF-8: s[0]*31^(n-1) + ... over
 *                 its UTF-16 code units, in 32-bit two's complement (as uint32_t). A byte that is
 *                 not part of a well-formed UTF-8 sequence counts as U+FFFD, as Java's decoder
 *                 replaces it.
 *   md5_64be      MD5, digest bytes 0..7 read BIG-endian as a 64-bit value (the top 64 bits of
 *                 Python's int(md5(...).hexdigest(), 16)); 32-bit value = its low 32 bits.
 *   fnv1a32_fmix_utf16  the default hash over the key's UTF-16 code units (decoded from UTF-8
 *                 as java_hashcode does): one FNV-1a step per code unit, then fmix32. A
 *                 JavaScript port of the default ring hashing charCodeAt() agrees with the ring
 *                 under this hash on every key (with fnv1a32_fmix only on ASCII keys).
 *   sdbm          sdbm over unsigned bytes, h = c + (h << 6) + (h << 16) - h from 0 (HAProxy's
 *                 default hash function).
 *   murmur2_64    MurmurHash2 64-bit as libstdc++'s std::hash<std::string> computes it on LP64
 *                 hosts (seed 0xc70f6907): Envoy's MurmurHash::murmurHash2, its redis_proxy's
 *                 key hash; 32-bit value = its low 32 bits.
 *   sha256_64be   SHA-256, digest bytes 0..7 read big-endian (the top 64 bits of Python's
 *                 int(sha256(...).hexdigest(), 16)); 32-bit value = its low 32 bits.
 * ------------------------------------------------------------------------------------------- */
/* The list is ABI: append only, never reorder or renumber. Each entry carries its enum value,
 * pinned by tests/unit/test_api.c; values are dense from 0. */
#define CH_HASH_LIST(X)                        \
    X(FNV1A32_FMIX, fnv1a32_fmix, 32, 0)       \
    X(FNV1A32, fnv1a32, 32, 1)                 \
    X(MURMUR3_32, murmur3_32, 32, 2)           \
    X(XXH3, xxh3, 64, 3)                       \
    X(MD5, md5, 64, 4)                         \
    X(TW_ONE_AT_A_TIME, one_at_a_time, 32, 5)  \
    X(TW_CRC16, crc16, 32, 6)                  \
    X(TW_CRC32, crc32, 32, 7)                  \
    X(TW_CRC32A, crc32a, 32, 8)                \
    X(TW_FNV1_64, fnv1_64, 32, 9)              \
    X(TW_FNV1A_64, fnv1a_64, 32, 10)           \
    X(TW_FNV1_32, fnv1_32, 32, 11)             \
    X(TW_FNV1A_32, fnv1a_32, 32, 12)           \
    X(TW_HSIEH, hsieh, 32, 13)                 \
    X(TW_MURMUR, murmur, 32, 14)               \
    X(TW_JENKINS, jenkins, 32, 15)             \
    X(JAVA_HASHCODE, java_hashcode, 32, 16)    \
    X(MD5_64BE, md5_64be, 64, 17)              \
    X(SDBM, sdbm, 32, 18)                      \
    X(FNV1A32_FMIX_UTF16, fnv1a32_fmix_utf16, 32, 19) \
    X(MURMUR2_64, murmur2_64, 64, 20)                \
    X(SHA256_64BE, sha256_64be, 64, 21)

#define CH__HASH_PLUS1(id, name, bits, value) +1

typedef enum ch_hash_id {
#define CH__HASH_ENUM(id, name, bits, value) CH_HASH_##id = value,
    CH_HASH_LIST(CH__HASH_ENUM)
#undef CH__HASH_ENUM
    CH_HASH_COUNT_ = 0 CH_HASH_LIST(CH__HASH_PLUS1) /* number of hashes; not a hash */
} ch_hash_id;

#define CH_HASH_DEFAULT CH_HASH_FNV1A32_FMIX

/* Parses a registry name (exact, case-sensitive) into *out.
 * Returns CH_OK, CH_EINVAL if name or out is NULL, CH_EUNKNOWN if no hash has that name. */
int ch_hash_from_name(const char *name, ch_hash_id *out);

/* Returns the registry name of a hash, or NULL if id is out of range. */
const char *ch_hash_name(ch_hash_id id);

/* Returns the native width of a hash in bits (32 or 64), or 0 if id is out of range. */
unsigned ch_hash_bits(ch_hash_id id);

/* Hashes len bytes at key (key may be NULL when len is 0) into *out.
 * Returns CH_OK, or CH_EINVAL for an unknown id, a NULL out, or a NULL key with len > 0.
 * Cost: O(len). */
int ch_hash32(ch_hash_id id, const void *key, size_t len, uint32_t *out);
int ch_hash64(ch_hash_id id, const void *key, size_t len, uint64_t *out);

/* ---------------------------------------------------------------------------------------------
 * Placement algorithms. One registry list, like the hashes.
 *   modulo      hash32(key) % N. The baseline: a change of N moves almost every key.
 *   ring        consistent-hash ring with virtual nodes: node i has max(1, round(vnodes * w_i))
 *               points at hash32("<id>#<j>"), j from 0; a key belongs to the first point at or
 *               after hash32(key), wrapping to the first point. Weighted. Replicas: the first R
 *               distinct nodes clockwise.
 *   rendezvous  highest random weight; weighted by the logarithmic method (score = -w / ln(u)).
 *               Replicas: the R highest scores. Independent of node order.
 *   jump        Lamping & Veach's jump consistent hash over node indexes 0..N-1. Only appending or
 *               removing the LAST node keeps other keys in place; removing any other node
 *               renumbers the ones after it and remaps their keys. No weights, no replicas (R > 1)
 *               and no bounded loads: jump has no notion of a second choice.
 *   maglev      Eisenbud et al.'s lookup table of prime size M (default 65537), filled from per-node
 *               permutations; O(1) lookup; weights by share of the filling turns. Replicas: the
 *               first R distinct nodes in table order from the key's slot.
 *
 * Compatible placements: each reproduces a peer's placement exactly, proven against the peer
 * (docs/COMPATIBILITY.md). They place keys by the LOW 32 bits of the key hash. Give them only the
 * live servers: the peers rebuild over live servers only, which these reproduce by being built
 * over the list given.
 *   ketama      twemproxy's "distribution: ketama". Node i has
 *                 4 * floorf((float)w_i / (float)W * vnodes / 4 * N)     (float arithmetic)
 *               points (vnodes = twemproxy's 160 by default), 4 per MD5 digest of "<id>-<k>",
 *               k = 0, 1, ...: bytes 4x..4x+3 little-endian, x = 0..3. The id is the server's
 *               name in twemproxy: its configured name, else "host:port", or "host" alone when
 *               the port is 11211 (ch_config gives it as ch_conf_server.id). A key belongs to the
 *               first point at or after its hash, wrapping; equal positions go to the node
 *               earlier in the list. An empty key hashes to 0, as in twemproxy. Replicas as ring.
 *   modula      twemproxy's "distribution: modula": a table of round(w_i) (at least 1)
 *               consecutive slots per node in list order (twemproxy's weights are whole
 *               numbers); a key belongs to slot hash % slots. Empty key: hash 0. Replicas: the
 *               next distinct nodes in slot order.
 *   random      twemproxy's "distribution: random": one slot per node, weights ignored; the owner
 *               is node h % N for the value h given to ch_lookup_hash(). twemproxy draws h from
 *               random() per request: pass a random value there. ch_lookup() uses the key's hash,
 *               which makes it a deterministic modulo, not what twemproxy does.
 *   libmemcached_ketama      libmemcached's weighted ketama (MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED,
 *               also switched on by any weight > 1): as ketama, with ids "host:port" ("host"
 *               alone means port 11211) and point strings "host-k" for port 11211, else
 *               "host:port-k". Keys: libmemcached hashes them with md5 when the mode is set
 *               by KETAMA_WEIGHTED (use CH_HASH_MD5), but keeps its default one_at_a_time when
 *               a weight > 1 switched it on (use CH_HASH_TW_ONE_AT_A_TIME). Compatible only
 *               with vnodes = 160 (the default), as are ketama's points.
 *   libmemcached_ketama_spy  libmemcached's MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY with
 *               weighted ketama (spymemcached's point strings "/host:port-k"); otherwise as
 *               libmemcached_ketama.
 *
 * Client libraries' schemes (docs/COMPATIBILITY.md, "Client libraries", has the exact rules and
 * the proofs). Each fixes its own key hash (CH_ALGO_F_FIXED_HASH: ch_options.hash is ignored),
 * reproduces the library's tie rule and search, and places by the key's full registry hash.
 * Node i of the list is the library's i-th server, named as the library names it.
 *   java_hashcode_ring  the Java tutorial ring: Math.abs(("<id>#<j>").hashCode()), j < vnodes,
 *               in a TreeMap (a later put at an equal position wins), ceilingEntry, wrapping;
 *               keys Math.abs(key.hashCode()) (java_hashcode). Weights must be 1.
 *   md5_64_ring the Python tutorial ring: MD5("<id>#<j>") bytes 0..7 big-endian (md5_64be),
 *               j < vnodes, compared at 64 bits; a dict (a later node wins), bisect_left,
 *               wrapping. Weights must be 1.
 *   dalli@3     Dalli 3's ring (Ruby): floor(N * 160 * w_i / W) points at SHA-1("<id>:<k>")
 *               bytes 0..3 big-endian; keys Zlib.crc32 (crc32a); the LAST point <= the key's
 *               hash, wrapping to the last point. Ids "host:port". The walk (ch_replicas,
 *               ch_route) is Dalli's failover rehash: the owner of crc32(key), then of
 *               crc32("<t><key>") for t = 0..18 (Dalli's 20 tries), then, where Dalli gives
 *               up, the ring onward from the key's point.
 *   uhashring@2 uhashring 2's default ring (Python): vnodes * w_i points (vnodes 160) at
 *               int(MD5("<id>-<k>").hexdigest(), 16), compared on its top 64 bits
 *               (md5_64be); keys the same; a dict (a later node wins), bisect_right (the first
 *               point ABOVE the key's hash), wrapping.
 *   uhashring_ketama@2  uhashring 2's HashRing(hash_fn="ketama"): floor(vnodes * N * w_i / W)
 *               MD5 digests of "<id>-<g>" (vnodes 40), 4 points each as ketama's; keys md5;
 *               a dict, bisect_right, wrapping.
 *   groupcache@0  Go groupcache's consistenthash: replicas (vnodes; 0: 50) points
 *               at crc32a("<j><id>") (the index first), a map (a later put wins), the first
 *               point >= crc32a(key), wrapping. No weights.
 *   guava@31    Guava's Hashing.consistentHash(input, N): a jump driven by a 64-bit LCG over
 *               the key's 64-bit hash (ch_options.hash: md5 is Guava's md5().padToLong(),
 *               crc32a its crc32()). Node i is bucket i; no weights, no walk (as jump).
 *   spymemcached@2  spymemcached 2's KetamaNodeLocator (KETAMA_HASH): 4 points per MD5 of
 *               "<id>-<i>" little-endian, 40 digests per node (vnodes / 4), or with unequal
 *               weights ketama's float count; a TreeMap (a later put wins), ceiling, wrapping;
 *               keys md5. Ids are its node keys: "ip:port" or "host/ip:port".
 *   spymemcached_libmemcached@2  the same with Format.LIBMEMCACHED: ids "host:port", the
 *               node key without ":11211".
 *   pecl_memcache@4  PECL memcache 4's consistent strategy: vnodes * w_i points at
 *               hash("<host:port>-<k>") with the table's hash (crc32a: PECL's crc32, the
 *               default; fnv1a_32: its fnv), quantised into 1024 buckets (bucket b: the first
 *               point >= b * floor((2^32 - 1) / 1024)); a key goes to bucket hash % 1024.
 *               Keys are prepared as PECL does (cut to 250 bytes, bytes <= 0x20 made '_')
 *               before hashing (ch_key_hash). The walk is PECL's failover: the key's server,
 *               then those of hash("<key>-<i>"), i < 20, then the ring from the key's bucket
 *               (with a table hash other than crc32a or fnv1a_32: the ring alone).
 *   hashring@3  Node's hashring 3: floor(w_i / W * vnodes * N) MD5 digests of "<id>-<k>"
 *               (vnodes 40), 4 points each as ketama's; keys md5; first point >= hash.
 *   hashring_hash_ring@3  the same with { compatibility: "hash_ring" }: 3 points a digest.
 *   nginx@1     nginx's "hash $key consistent": weight * 160 points per server, chained
 *               crc32(host "\0" port prev) from the server string ("ip:port", "unix:/path"),
 *               equal points to the earlier server; keys crc32a; first point >= hash.
 *   haproxy@2   HAProxy's "hash-type consistent" (its default: sdbm keys, avalanche): weight *
 *               16 points per server at full_hash(puid * 4096 + j), puid the numeric id (ids
 *               all decimal) or i + 1; a key goes to the point NEAREST full_hash(sdbm(key))
 *               (the earlier one on a tie). Weights 1..256. The walk: points by increasing
 *               distance from that position (HAProxy's nearest point once down servers'
 *               points are taken out).
 *   pymemcache@3  pymemcache 3's HashClient (RendezvousHash): the node with the highest
 *               murmur3_32("<id>-<key>") (seed 0, over the text's code points mod 256), ties
 *               to the greatest id; ids "host:port". CH_ALGO_F_KEYED: only ch_lookup().
 *
 * The Redis clients' rings (docs/COMPATIBILITY.md, "Client libraries", part two). Each applies
 * its library's own hash-tag rule to the key (leave ch_options.hash_tag unset: a table's
 * hash_tag would apply before it); "ties" are equal positions of two nodes' points.
 *   predis@1    Predis 1.1's HashRing (PHP, its default distributor): round(w_i / W * N * 128)
 *               points per node, PHP's round() (half up, after rounding to 15 significant
 *               digits), whole weights >= 1 (Predis casts a weight to int and reads 0 as its
 *               default 100; others are refused), point k at crc32a("<id>:<k>"); a key goes
 *               to the largest point <= crc32a(key), wrapping to the largest point; ties to
 *               the LATER node.
 *               Tag: the text between the first '{' and the next '}', when non-empty. Ids
 *               "host:port" (a unix socket's path). No failover in Predis: the walk is the
 *               ring's, toward smaller points (the owner were the node not there).
 *   predis_ketama@1  Predis's KetamaRing: floor(w_i / W * N * 40) MD5 digests of "<id>-<k>",
 *               4 points each (bytes 4x..4x+3 little-endian); keys md5; the first point
 *               >= the key's hash, wrapping; ties to the later node; tag and ids as predis@1.
 *   phpredis_array@5  phpredis 5's RedisArray with "consistent" => true: 40 MD5 digests of
 *               "<host>-<j>" per host, 4 points each as ketama's, no weights; a key goes to
 *               the first point >= ~crc32a(tag) (RedisArray's CRC-32 without its final xor),
 *               wrapping; ties to the earlier host. Tag: the text between the first '{' and
 *               the first '}' after it, even empty, searched as C strings (not past a NUL byte).
 *               Ids: the host strings as given ("host:port"). RedisArray's "algorithm" option
 *               (a PHP hash for the key) is not reproduced.
 *   phpredis_array_range@5  RedisArray's default: host floor(crc32a(tag) * N / 0xffffffff),
 *               tag and ids as phpredis_array@5 (a key whose crc32 is 0xffffffff, for which
 *               RedisArray reads past its host array, goes to the last host). Not consistent.
 *   redis_rb@4  redis-rb 4's Redis::Distributed (Ruby; Rails' RedisCacheStore over several
 *               URLs): 160 points per node at crc32a("<id>:<k>"), the largest point <= the
 *               key's crc32a, wrapping to the largest; ties to the later node. The id is the
 *               client's id: "redis://host:port/db"; an id written "host:port" is read as
 *               "redis://host:port/0". Tag: /^\{(.+?)\}/, where '^' is the start of any
 *               line of the key. No weights, no failover (the walk as predis@1's).
 *   redis_rb@5  redis-rb 5: as redis_rb@4 with points at MD5("<id>:<k>") bytes 0..3
 *               big-endian.
 *   go_redis_ring@5  go-redis v5's Ring: groupcache@0's ring with 100 replicas (vnodes) over
 *               the shard names, ties to the later name; tag: the text between the first '{'
 *               and the next '}', when non-empty. Ring rebuilds over the shards that answer:
 *               the ring's walk.
 *   django_redis_shard@5  django-redis 5's ShardClient: 128 points per server at
 *               SHA-256("<name>:<k>"), compared as hex strings (chash: their top 64 bits), the
 *               largest point <= SHA-256(key), wrapping to the largest; ties to the later
 *               server. Tag (greedy): on the key's first line, the text between the last '{'
 *               before the last '}' and that '}'. Names: the LOCATION strings. No weights.
 *   envoy_ring_hash@1  Envoy's ring hash (gRFC A42, as @grpc/grpc-js-xds builds it): a ring of
 *               ceil(min(ceil(m * vnodes) / m, 8388608)) entries, m the smallest w_i / W,
 *               vnodes Envoy's minimum_ring_size (0: 1024); node i's entries at
 *               XXH64("<id>_<k>", 0) while a running total of entries is below the running
 *               sum of scale * w_i / W; positions 64 bits wide; keys murmur2_64 (Envoy's
 *               redis_proxy; its enable_hashtagging is ch_options.hash_tag "{}"); the first
 *               entry >= the key's hash, wrapping; ties to the earlier node. Weights whole,
 *               1..4294967295 (xDS's load_balancing_weight). Ids "ip:port".
 *
 * The memcached clients still in service:
 *   cache_memcached@1  Perl's Cache::Memcached 1.30: each node floor(w_i) consecutive buckets
 *               in list order (weights >= 1), a key goes to bucket ((crc32a >> 16) & 0x7fff)
 *               % buckets. Its rehash on a dead server is the walk: hv += that 15-bit hash of
 *               "<try><key>" for try = 1..19 (20 tries in all), then the buckets onward from
 *               the last one tried. As dalli@3, the key hash carries the key's length in bits
 *               32..63 above its crc32a. Not consistent.
 *   cmfast@0    Perl's Cache::Memcached::Fast with ketama_points (vnodes; 0: 150, its
 *               documentation's example): (int)(vnodes * w_i + 0.5) points per node (weights
 *               any positive number), chained point_j = crc32(host "\0" port prev) as nginx@1,
 *               host and port split at the id's last ':'; keys crc32a; the first point >= the
 *               key's hash, wrapping; ties to the earlier node. No failover.
 *   python_memcached@1  python-memcached 1.59 (OpenStack's oslo.cache): w_i consecutive buckets
 *               (whole weights), key hash h = ((crc32a >> 16) & 0x7fff) or 1, bucket h %
 *               buckets; its 10 tries on a dead server are the walk: h = that hash of
 *               str(h) + str(i), then the buckets onward. Not consistent.
 *   gomemcache@0  Go's gomemcache ServerList: crc32a(key[:256]) % slots; a server listed w
 *               times (whole w) is w consecutive slots. No failover. Not consistent.
 *   node_memcached@2  npm memcached 2.2 (its ring is hashring 3 with ketama compatibility):
 *               hashring@3's ring, whose point strings leave out the default port 11211
 *               ("host-<k>" for host:11211). Ids "host:port".
 *   memjs@1     npm memjs 1.3: abs(hashCode) % N, hashCode Java's over the key's UTF-16 code
 *               units (java_hashcode) with JavaScript's Math.abs (2^31 for -2^31); its failover
 *               (option failover) tries the next index: the walk is N, N+1, ... Not consistent.
 *   ch_options.vnodes 0 gives each scheme its library's default (uhashring 160 and 40,
 *   groupcache 50, hashring 40, go-redis 100, django-redis 128, Envoy 1024 entries, cmfast 150;
 *   160 for the others).
 * ------------------------------------------------------------------------------------------- */
/* The list is ABI: append only, never reorder or renumber. Each entry carries its enum value,
 * pinned by tests/unit/test_api.c; values are dense from 0.
 * X(ENUM_SUFFIX, ident, "registry name", value): ident names the implementation inside the
 * library; the registry name is what ch_algo_from_name() parses, the CLI's --algo and a pool's
 * "distribution:". Compatible schemes of client libraries have versioned names
 * "<library>@<major version>" (docs/COMPATIBILITY.md), because libraries change their placement
 * between releases. */
#define CH_ALGO_LIST(X)                                                              \
    X(MODULO, modulo, "modulo", 0)                                                   \
    X(RING, ring, "ring", 1)                                                         \
    X(RENDEZVOUS, rendezvous, "rendezvous", 2)                                       \
    X(JUMP, jump, "jump", 3)                                                         \
    X(MAGLEV, maglev, "maglev", 4)                                                   \
    X(KETAMA, ketama, "ketama", 5)                                                   \
    X(MODULA, modula, "modula", 6)                                                   \
    X(RANDOM, random, "random", 7)                                                   \
    X(LIBMEMCACHED_KETAMA, libmemcached_ketama, "libmemcached_ketama", 8)            \
    X(LIBMEMCACHED_KETAMA_SPY, libmemcached_ketama_spy, "libmemcached_ketama_spy", 9) \
    X(JAVA_HASHCODE_RING, java_hashcode_ring, "java_hashcode_ring", 10)              \
    X(MD5_64_RING, md5_64_ring, "md5_64_ring", 11)                                   \
    X(DALLI_3, dalli_3, "dalli@3", 12)                                               \
    X(UHASHRING_2, uhashring_2, "uhashring@2", 13)                                   \
    X(UHASHRING_KETAMA_2, uhashring_ketama_2, "uhashring_ketama@2", 14)              \
    X(GROUPCACHE_0, groupcache_0, "groupcache@0", 15)                                \
    X(GUAVA_31, guava_31, "guava@31", 16)                                            \
    X(SPYMEMCACHED_2, spymemcached_2, "spymemcached@2", 17)                          \
    X(SPYMEMCACHED_LIBMEMCACHED_2, spymemcached_libmemcached_2, "spymemcached_libmemcached@2", 18) \
    X(PECL_MEMCACHE_4, pecl_memcache_4, "pecl_memcache@4", 19)                       \
    X(HASHRING_3, hashring_3, "hashring@3", 20)                                      \
    X(HASHRING_HASH_RING_3, hashring_hash_ring_3, "hashring_hash_ring@3", 21)        \
    X(NGINX_1, nginx_1, "nginx@1", 22)                                               \
    X(HAPROXY_2, haproxy_2, "haproxy@2", 23)                                         \
    X(PYMEMCACHE_3, pymemcache_3, "pymemcache@3", 24)                                \
    X(PREDIS_1, predis_1, "predis@1", 25)                                            \
    X(PREDIS_KETAMA_1, predis_ketama_1, "predis_ketama@1", 26)                       \
    X(PHPREDIS_ARRAY_5, phpredis_array_5, "phpredis_array@5", 27)                    \
    X(PHPREDIS_ARRAY_RANGE_5, phpredis_array_range_5, "phpredis_array_range@5", 28)  \
    X(REDIS_RB_4, redis_rb_4, "redis_rb@4", 29)                                      \
    X(REDIS_RB_5, redis_rb_5, "redis_rb@5", 30)                                      \
    X(GO_REDIS_RING_5, go_redis_ring_5, "go_redis_ring@5", 31)                       \
    X(DJANGO_REDIS_SHARD_5, django_redis_shard_5, "django_redis_shard@5", 32)        \
    X(CACHE_MEMCACHED_1, cache_memcached_1, "cache_memcached@1", 33)                 \
    X(CMFAST_0, cmfast_0, "cmfast@0", 34)                                            \
    X(PYTHON_MEMCACHED_1, python_memcached_1, "python_memcached@1", 35)              \
    X(GOMEMCACHE_0, gomemcache_0, "gomemcache@0", 36)                                \
    X(NODE_MEMCACHED_2, node_memcached_2, "node_memcached@2", 37)                    \
    X(MEMJS_1, memjs_1, "memjs@1", 38)                                               \
    X(ENVOY_RING_HASH_1, envoy_ring_hash_1, "envoy_ring_hash@1", 39)

#define CH__ALGO_PLUS1(id, ident, name, value) +1

typedef enum ch_algo_id {
#define CH__ALGO_ENUM(id, ident, name, value) CH_ALGO_##id = value,
    CH_ALGO_LIST(CH__ALGO_ENUM)
#undef CH__ALGO_ENUM
    CH_ALGO_COUNT_ = 0 CH_ALGO_LIST(CH__ALGO_PLUS1) /* number of algorithms; not an algorithm */
} ch_algo_id;

/* Parses an algorithm name; same contract as ch_hash_from_name(). */
int ch_algo_from_name(const char *name, ch_algo_id *out);

/* Returns the registry name of an algorithm, or NULL if id is out of range. */
const char *ch_algo_name(ch_algo_id id);

/* What an algorithm accepts, as CH_ALGO_F_* bits; 0 for an id out of range. Cost: O(1).
 *   CH_ALGO_F_WEIGHTED    nodes may have unequal weights (without it, ch_table_build refuses
 *                         them with CH_EUNSUPPORTED; the tutorial rings refuse any weight but 1);
 *   CH_ALGO_F_FIXED_HASH  the scheme reproduces a client library whose key and point hash is
 *                         part of it: ch_options.hash is ignored, ch_algo_hash() names it;
 *   CH_ALGO_F_ADDR_IDS    the library names servers by address: node ids are "host:port" as
 *                         the servers are written (a config gives them so, not by name);
 *   CH_ALGO_F_KEYED       the placement hashes the key together with each node, so there is no
 *                         key hash: only ch_lookup() gives the library's answer; ch_lookup_hash
 *                         gives h % N, there is no walk (replicas, bounded loads:
 *                         CH_EUNSUPPORTED), and ch_membership_build() refuses it;
 *   CH_ALGO_F_REMAPS      not consistent: the key hash modulo (or scaled to) the number of
 *                         nodes or slots, so a change of N moves most keys (modulo, modula,
 *                         random and the modulo schemes of client libraries);
 *   CH_ALGO_F_WHOLE_WEIGHTS  weighted, and the library's weights are whole numbers >= 1:
 *                         ch_table_build refuses others with CH_EWEIGHT (ch_algo_limits()
 *                         says the library's rule). */
#define CH_ALGO_F_WEIGHTED 1u
#define CH_ALGO_F_FIXED_HASH 2u
#define CH_ALGO_F_ADDR_IDS 4u
#define CH_ALGO_F_KEYED 8u
#define CH_ALGO_F_REMAPS 16u
#define CH_ALGO_F_WHOLE_WEIGHTS 32u
unsigned ch_algo_flags(ch_algo_id id);

/* The largest node weight an algorithm takes, or 0 when it bounds no single weight (only the
 * table's size bounds them: CH_MAX_POINTS points or slots, so a ring's weights times its vnodes).
 * A scheme that reproduces a peer takes the peer's range: haproxy@2's is 256 (HAProxy's
 * largest server weight; weights are rounded to whole numbers). ch_table_build() refuses a
 * weight above it with CH_EWEIGHT. Cost: O(1). */
double ch_algo_max_weight(ch_algo_id id);

/* What the library a scheme reproduces refuses or caps (weights, node counts, names), as one
 * static sentence naming the library, e.g. "Predis casts a weight to a whole number and reads
 * one below 1 as its default, 100: weights must be >= 1"; NULL when the scheme has no limit
 * beyond chash's own (or for an id out of range). A table that breaks it is refused by
 * ch_table_build() with CH_EWEIGHT (a weight) or CH_ETOOBIG (a size): this says why.
 * Cost: O(1). */
const char *ch_algo_limits(ch_algo_id id);

/* The key hash a CH_ALGO_F_FIXED_HASH scheme always uses, into *out. Returns CH_OK,
 * CH_EUNSUPPORTED for an algorithm that takes ch_options.hash, CH_EINVAL for a bad id or out. */
int ch_algo_hash(ch_algo_id id, ch_hash_id *out);

/* ---------------------------------------------------------------------------------------------
 * Building tables.
 * ------------------------------------------------------------------------------------------- */

/* A node as given to ch_table_build(). The id is copied into the table; the caller keeps
 * ownership of the array and the strings. Ids must be non-empty and unique within a table. */
typedef struct ch_node {
    const char *id;
    double weight; /* finite and > 0; 1.0 is one unit */
} ch_node;

/* Optional per-table allocator. alloc returns NULL on failure; free receives the size that was
 * asked for. The struct is copied into the table; ctx must outlive the table. */
typedef struct ch_allocator {
    void *(*alloc)(void *ctx, size_t size);
    void (*free)(void *ctx, void *ptr, size_t size);
    void *ctx;
} ch_allocator;

#define CH_DEFAULT_VNODES 160u
#define CH_DEFAULT_MAGLEV_SIZE 65537u
#define CH_MAX_NODES 1000000u
#define CH_MAX_POINTS (64u * 1024u * 1024u) /* ring points and maglev slots, each */

/* Table options. The first field is the struct's own size, so the struct can grow: always start
 * from ch_options_init(). Fields a caller's (older, smaller) struct does not reach take their
 * defaults. */
typedef struct ch_options {
    size_t size;                   /* sizeof(ch_options), set by ch_options_init() */
    ch_algo_id algo;               /* default CH_ALGO_RING */
    ch_hash_id hash;               /* default CH_HASH_DEFAULT, for keys and for points */
    uint32_t vnodes;               /* ring points per unit weight; default 160; 0: the
                                      algorithm's own default (a client library's, for its
                                      scheme; 160 for chash's) */
    uint32_t table_size;           /* maglev table size M: a prime > N; default 65537 */
    const ch_allocator *allocator; /* NULL: malloc/free */
    /* twemproxy's hash_tag, e.g. {'{', '}'}; {0, 0} (the default) for none. With a tag, only the
     * text between the first hash_tag[0] and the next hash_tag[1] after it is hashed, when that
     * text is non-empty; otherwise the whole key. Applies to every algorithm. */
    char hash_tag[2];
} ch_options;

/* Fills *opt with the defaults above. opt must not be NULL. Cost: O(1). */
void ch_options_init(ch_options *opt);

typedef struct ch_table ch_table;

/* Builds a placement table from nodes[0..n-1] and opt (NULL means the defaults). Node i of the
 * list is node index i in every lookup result.
 * Returns CH_OK and *out, or:
 *   CH_EINVAL      out or nodes NULL, opt->size unusable, table_size not a prime > n,
 *                  or an unknown algo/hash id;
 *   CH_EEMPTY      n == 0;  CH_EBADID  an empty or NULL id;  CH_EDUPID  two equal ids;
 *   CH_EWEIGHT     a weight that is not finite and > 0, or above ch_algo_max_weight();
 *   CH_EUNSUPPORTED unequal weights for modulo or jump, which have no weights;
 *   CH_ETOOBIG     n > CH_MAX_NODES, or more than CH_MAX_POINTS points or slots;
 *   CH_ENOMEM      an allocation failed; nothing is leaked.
 * Cost: ring O(P) hashing + O(P) radix sort for P points (1000 nodes x 160 points: a few ms);
 * maglev O(M log M); rendezvous, jump and modulo O(n). Memory: see ch_table_info(). */
int ch_table_build(const ch_node *nodes, size_t n, const ch_options *opt, ch_table **out);

/* ch_table_build(), and on failure *err (when err is not NULL and err->size is set) says which
 * argument and which limit: the node (index and id) with a bad id or weight, the two nodes that
 * share an id, maglev's table_size against the node count, the points of a ring against
 * CH_MAX_POINTS with its vnodes and weights, a scheme's weight rule. On success err->status is
 * CH_OK and its message "". Same cost as ch_table_build(). */
int ch_table_build_err(const ch_node *nodes, size_t n, const ch_options *opt, ch_table **out,
                       ch_error *err);

/* Frees a table and everything it owns, with the allocator it was built with. NULL is a no-op.
 * The caller must ensure no other thread still uses it. */
void ch_table_free(ch_table *t);

/* A description of a built table. */
typedef struct ch_table_info {
    size_t size;         /* sizeof(ch_table_info); set by the caller */
    ch_algo_id algo;
    ch_hash_id hash;
    size_t nodes;        /* N */
    size_t points;       /* ring points, maglev slots; N for the others */
    size_t bytes;        /* heap bytes owned by the table, ids included */
    uint32_t vnodes;     /* as built (ring) */
    uint32_t table_size; /* as built (maglev) */
} ch_table_info;

/* Fills *info (info->size must be set; fields beyond it are not written).
 * Returns CH_OK or CH_EINVAL. Cost: O(1). */
int ch_table_info_get(const ch_table *t, ch_table_info *info);

/* Node i's id as copied at build time (NUL-terminated, owned by the table), or NULL if i >= N. */
const char *ch_table_node_id(const ch_table *t, size_t i);

/* Node i's weight, or 0.0 if i >= N. */
double ch_table_node_weight(const ch_table *t, size_t i);

/* Writes to shares[0..N-1] the fraction of the key-hash space each node owns (they sum to 1):
 * exact for ring (the lengths of the arcs ending at each node's points), maglev (slots / M),
 * modulo (residues of 2^32) and jump (1/N); for rendezvous w_i / W, the probability that a
 * random key hash goes to node i. A key set's actual split differs from these by sampling.
 * Returns CH_OK or CH_EINVAL. Cost: ring O(P), maglev O(M), others O(N). */
int ch_table_shares(const ch_table *t, double *shares);

/* What changes between two tables: matrix[i * Nb + j] receives the fraction of the key-hash space
 * owned by a's node i and by b's node j (Na x Nb entries, written in full; they sum to 1). The
 * diagonal of a plan: keys that stay, and which node hands which share to which.
 * Exact for two rings with the same hash (the boundaries of both rings merged: O(Pa + Pb)) and
 * for two maglev tables with the same hash and size (slot by slot: O(M)).
 * Returns CH_OK, CH_EINVAL (a NULL argument), or CH_EUNSUPPORTED for any other pair of tables
 * (different algorithms or hashes, or algorithms without a finite description of their
 * partition): sample keys instead. */
int ch_table_transfer(const ch_table *a, const ch_table *b, double *matrix);

/* ---------------------------------------------------------------------------------------------
 * Lookups. All take a const table and are safe from many threads at once. A built table always
 * has at least one node, so single lookups cannot fail; preconditions: t != NULL and
 * (key != NULL or len == 0).
 * ------------------------------------------------------------------------------------------- */

/* The table's hash of a key: ch_hash64(table hash, key, len), of the hash_tag part of the key
 * when the table has a hash_tag and the key a non-empty tagged part; 0 for an empty key under the
 * twemproxy placements (ketama, modula, random), as twemproxy does; pecl_memcache@4 hashes
 * the key as PECL prepares it (at most 250 bytes, bytes <= 0x20 as '_'). dalli@3 adds the (hashed)
 * key's length in bits 32..63 above its 32-bit crc32: its failover order rehashes
 * "<try><key>", which follows from the crc and the length; so give its walks
 * (ch_replicas_hash, ch_route_hash, bounded loads) this value, not a bare ch_hash64.
 * Cost: O(len). */
uint64_t ch_key_hash(const ch_table *t, const void *key, size_t len);

/* The owner of the key whose ch_key_hash() is h: a node index in [0, N).
 * Cost: ring O(1) expected (bucket index over the sorted points, then a search of one bucket);
 * maglev, modulo O(1); jump O(log N); rendezvous O(N). */
size_t ch_lookup_hash(const ch_table *t, uint64_t h);

/* The owner of a key: ch_lookup_hash(t, ch_key_hash(t, key, len)). */
size_t ch_lookup(const ch_table *t, const void *key, size_t len);

/* Writes the first min(r, N) distinct nodes of the key's walk to out[] (owner first, then the
 * failover order) and their number to *count.
 * Walks: ring, clockwise from the key's point, at most one turn; rendezvous, decreasing score;
 * maglev, table slots forward from the key's slot, at most one turn (a node with no slot is
 * never listed); modulo, (h % N) + 0, 1, 2, ...  jump: only r <= 1.
 * Returns CH_OK, CH_EINVAL (NULL out/count with r > 0), CH_EUNSUPPORTED (jump with r > 1).
 * Cost: ring O(points walked x r); rendezvous O(N x r); maglev O(slots walked x r). */
int ch_replicas(const ch_table *t, const void *key, size_t len, size_t r, size_t *out,
                size_t *count);
int ch_replicas_hash(const ch_table *t, uint64_t h, size_t r, size_t *out, size_t *count);

/* Consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam 2016).
 * loads[0..N-1] are the caller's current loads (e.g. keys or connections placed so far) and
 * total is their sum. The capacity of node i for the item being placed is
 *     cap_i = ceil(c * (total + 1) * w_i / W)      (W = sum of weights)
 * and the result is the first node on the key's walk (as ch_replicas) with loads[i] < cap_i.
 * Such a node always exists for c >= 1, so after placing items one by one, each at the returned
 * node, no node ever exceeds ceil(c * total * w_i / W). The table itself is not modified.
 * Returns CH_OK and *out, CH_EINVAL (NULL loads/out, c < 1 or not finite), CH_EUNSUPPORTED (jump).
 * Cost: as a walk until the first node under capacity; O(N) worst case for rendezvous. */
int ch_lookup_bounded(const ch_table *t, const void *key, size_t len, const uint64_t *loads,
                      uint64_t total, double c, size_t *out);
int ch_lookup_bounded_hash(const ch_table *t, uint64_t h, const uint64_t *loads, uint64_t total,
                           double c, size_t *out);

#ifdef __cplusplus
}
#endif

#endif /* CHASH_H */

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * chash_config.h — twemproxy-style YAML configuration (libyaml), loaded into plain structs.
 *
 * A file holds one or more pools (the top-level mapping's keys). Each pool has twemproxy's keys
 * (listen, hash, hash_tag, distribution, timeout, backlog, client_connections, redis,
 * tcpkeepalive, reuseport, redis_auth, redis_db, preconnect, auto_eject_hosts,
 * server_connections, server_retry_timeout, server_failure_limit, servers) with twemproxy's
 * defaults, plus chash's own keys, documented in docs/CONFIG.md. Unknown keys are errors.
 * Servers are "host:port:weight [name]" or "/path/to/socket:weight [name]".
 *
 * This is an edge module (it reads files); the pure core (chash.h) does not depend on it.
 * Thread-safety: a loaded ch_config is immutable; ch_config_load is reentrant.
 */
#ifndef CHASH_CONFIG_H
#define CHASH_CONFIG_H

#include "chash_route.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ch_conf_server {
    char *addr;    /* "host:port" or "/path" (unix socket), as written, without the weight */
    char *host;    /* host part, or the socket path */
    int port;      /* 0 for a unix socket */
    double weight; /* > 0 */
    char *name;    /* the optional name after the weight, or NULL */
    char *id;      /* the server's name in twemproxy, which its ketama hashes: name if given, else
                      addr, host alone when the port is 11211, or "/path:" for a unix socket
                      (twemproxy's quirks). Unique within a pool. */
    unsigned line; /* 1-based line of the server entry in the file */
} ch_conf_server;

/* One entry of a listener's "routes": keys starting with prefix[0, prefix_len) go to pool
 * `pool` (its name), without the prefix when strip. An empty prefix is the catch-all. */
typedef struct ch_conf_route {
    char *prefix;
    size_t prefix_len;
    char *pool;
    bool strip;
    unsigned line, column; /* where the entry is */
    unsigned pool_line, pool_column; /* where its pool's name is */
} ch_conf_route;

typedef struct ch_conf_pool {
    char *name;                 /* the pool's key */
    unsigned line;              /* 1-based line of the pool's key */
    char *listen;               /* "host:port" or "/path[ permissions]"; NULL if absent */
    char *hash;                 /* as written; default "fnv1a_64" (twemproxy's default) */
    char *hash_tag;             /* two characters, or NULL */
    char *distribution;         /* as written; default "ketama" */
    int timeout_ms;             /* default -1: no timeout */
    int backlog;                /* default 512 */
    int client_connections;     /* default 0: unlimited */
    bool redis;                 /* default false (memcached) */
    bool tcpkeepalive;          /* default false */
    bool reuseport;             /* default false */
    char *redis_auth;           /* NULL if absent */
    int redis_db;               /* default 0 */
    bool preconnect;            /* default false */
    bool auto_eject_hosts;      /* default false */
    int server_connections;     /* default 1 */
    int server_retry_timeout_ms;/* default 30000 */
    int server_failure_limit;   /* default 2 */
    ch_conf_server *servers;    /* in file order */
    size_t nservers;
    size_t *order;              /* twemproxy's order: server indexes sorted by id, shorter ids
                                   first, then bytewise. nutcracker's distributions (ketama,
                                   modula, random) index servers in this order. */
    /* Additions: the listen address taken apart, so a proxy need not parse it again. */
    char *listen_host;          /* host (IPv6 without brackets) or socket path; NULL if absent */
    int listen_port;            /* 1..65535; 0 for a unix socket or when listen is absent */
    int listen_perm;            /* unix socket mode from "/path 0666"; -1 when not given */
    /* Whether the file gave these twemproxy keys (their defaults are twemproxy's; routing maps
     * them onto its own defaults when absent, see ch_config_health()). */
    bool has_auto_eject_hosts, has_server_failure_limit, has_server_retry_timeout;
    /* chash's own keys (docs/CONFIG.md): */
    char *version;              /* "version": the membership version; NULL: a content hash */
    int failover_depth;         /* candidates tried per request, >= 1; default 2 */
    int replicas;               /* "replicas": copies of each key, on the first `replicas`
                                   distinct nodes of its walk (ch_replicas), 1..
                                   min(CH_CONF_MAX_REPLICAS, servers); default 1. libchash-cache
                                   and chash-proxy (route_replica.c). */
    unsigned replicas_line, replicas_column; /* where "replicas" was given (1-based); 0: not */
    int server_failure_window_ms; /* the window of server_failure_limit; default 10000 */
    int server_retry_max_ms;    /* cap of the doubling probe delay; default 60000 */
    char *client_auth;          /* "client_auth": the password clients must AUTH with (redis
                                   pools only); NULL if absent: then clients AUTH with
                                   redis_auth, as in twemproxy. redis_auth stays the password
                                   sent to the servers. */
    char *client_auth_file;     /* "client_auth_file": memcached pools only: the file of the
                                   users binary clients authenticate as (SASL PLAIN), one
                                   "user:password" a line (memcached's -Y file), relative to the
                                   config file's directory; read by chash-proxy. NULL: none */
    unsigned client_auth_file_line, client_auth_file_column; /* where it was given (1-based) */
    int max_request_bytes;      /* one client request, >= 1; default
                                   CH_CONF_DEFAULT_MAX_REQUEST_BYTES */
    int max_client_buffer_bytes; /* reply bytes held for one client, >= 1; default
                                    CH_CONF_DEFAULT_MAX_CLIENT_BUFFER_BYTES */
    int max_item_bytes;          /* memcached pools: the largest value stored, >= 1; default
                                    CH_CONF_DEFAULT_MAX_ITEM_BYTES (1 MiB, as memcached's -I) */
    int client_idle_timeout;     /* ms a client with nothing in flight may stay silent before
                                    it is closed; default 0: never (as twemproxy) */
    int client_read_timeout;     /* ms a request may take to arrive whole once it has begun;
                                    0: no limit; default CH_CONF_DEFAULT_CLIENT_READ_TIMEOUT */
    int max_client_inflight_bytes; /* request bytes one client may have waiting for backends
                                      before its reading pauses (backpressure), >= 1; default
                                      CH_CONF_DEFAULT_MAX_CLIENT_INFLIGHT_BYTES */
    int rejoin_journal_keys;     /* keys written elsewhere for an ejected server that are
                                    deleted on it before it is readmitted; beyond this many
                                    they go to a dirty bitmap, whose buckets' keys are deleted
                                    (never a flush); 0: the bitmap alone; default
                                    CH_CONF_DEFAULT_REJOIN_JOURNAL_KEYS */
    int warm_up_ms;             /* "warm_up": after a reload that changes the membership, for
                                   this long a moved key missing at its new owner is read from
                                   its old one and copied over (docs/OPERATIONS.md, "Growing and
                                   shrinking without a miss storm"); 0 (default): off */
    int ramp_ms;                /* "ramp": a membership change switches each moved key to its
                                   new owner at a moment spread over this long (start + hash of
                                   the key mod ramp); 0 (default): all at once */
    int readmit_ramp_ms;        /* "readmit_ramp": an ejected server readmitted by its probe
                                   takes each of its keys back at readmission + hash of the key
                                   mod this (the ramp's rule), the server that held the key
                                   meanwhile serving it until then; 0 (default): all at once */
    /* The near cache of hot keys (docs/OPERATIONS.md, "Hot keys"; chash-proxy and
     * libchash-cache): "hot_cache" ms of freshness from a read's send (0, the default: off),
     * "hot_cache_max_bytes" of keys and values held (default CH_CONF_DEFAULT_HOT_CACHE_BYTES;
     * chash-proxy's, split between its workers), "hot_threshold" reads per second of a key
     * before its value is kept (default CH_CONF_DEFAULT_HOT_THRESHOLD). */
    int hot_cache_ms;
    int hot_cache_max_bytes;
    int hot_threshold;
    /* "hot_spread" (chash-proxy, with replicas >= 2; default false): the reads of a key at
     * least hot_threshold times a second go to its up replicas in turn, not to the first. */
    bool hot_spread;
    /* TLS (chash-proxy; docs/PROXY.md, "TLS"). For clients, on the pool's listen: its
     * certificate chain and key (PEM; both or neither), and the CA whose certificates clients
     * must present (NULL: none asked). For the servers: server_tls on; verify their certificate
     * (default true) against server_tls_ca_file (NULL: the system's store) and its name
     * (server_tls_name, else each server's host); the name is also sent as SNI; an optional
     * client certificate and key. Relative file names are relative to the config file. */
    char *tls_cert_file, *tls_key_file, *tls_client_ca_file;
    bool server_tls, server_tls_verify;
    char *server_tls_ca_file, *server_tls_name, *server_tls_cert_file, *server_tls_key_file;
    double max_ejected_share;   /* "max_ejected_share": the most of a pool's servers ejected at
                                   once, in [0, 1]; a failure that would eject one more leaves
                                   the server in (fail-open); default
                                   CH_CONF_DEFAULT_MAX_EJECTED_SHARE */
    double bounded_load_factor; /* "bounded_load_factor": c of consistent hashing with bounded
                                   loads (ch_lookup_bounded), a finite number >= 1; default 0:
                                   off (docs/PROXY.md, "Bounded loads") */
    /* Fleet membership (docs/FLEET.md): "membership: etcd://host:port/key" takes the pool's
     * servers, hash, distribution, hash_tag and version from that etcd key (a membership
     * document, ch_config_membership_doc()) instead of the file; "servers" may then be absent
     * (or serve until etcd first answers). NULL when absent. */
    char *membership;             /* as written */
    char *membership_endpoint;    /* its "host:port" */
    char *membership_key;         /* its key, from the '/' after host:port */
    int membership_hold_down_ms;  /* "membership_hold_down": a document that removes servers
                                     waits this long before it is applied, so a server that
                                     leaves and comes back within it changes nothing; default
                                     CH_CONF_DEFAULT_MEMBERSHIP_HOLD_DOWN */
    int membership_fenced;        /* "membership_fenced": what the pool answers while its
                                     membership cannot be proven current (docs/FLEET.md,
                                     "Fencing"): CH_CONF_FENCED_ERROR (default) or
                                     CH_CONF_FENCED_SERVE */
    /* "membership: dns://name:port" or "dns+srv://name" (chash-proxy; docs/FLEET.md,
     * "Membership from DNS"): the servers are name's A and AAAA records on port, or its SRV
     * records, re-resolved every "membership_interval" ms (or at the answer's TTL when shorter,
     * at least CH_CONF_MIN_MEMBERSHIP_INTERVAL). Then membership_endpoint is the name,
     * membership_key NULL. */
    int membership_scheme;        /* CH_CONF_MEMBERSHIP_ETCD (also when membership is NULL),
                                     CH_CONF_MEMBERSHIP_DNS or CH_CONF_MEMBERSHIP_DNS_SRV */
    int membership_port;          /* dns://: the servers' port; else 0 */
    int membership_interval_ms;   /* default CH_CONF_DEFAULT_MEMBERSHIP_INTERVAL */
    char *membership_resolver;    /* "membership_resolver": the DNS server asked, "ip:port";
                                     NULL: the system's (/etc/resolv.conf) */
    /* "shadow: {pool: NAME, fraction: F, writes: B}" (chash-proxy; docs/PROXY.md, "Shadow
     * traffic"): a deterministic fraction F of the key space's requests is mirrored to pool
     * NAME of the same file (same protocol), reads only unless writes. NULL: none. */
    char *shadow_pool;
    double shadow_fraction;       /* (0, 1] */
    bool shadow_writes;
    unsigned shadow_line, shadow_column; /* where "shadow" is, for the error naming its pool */
    /* Hot keys (chash-proxy; docs/OPERATIONS.md, "Hot keys"): a key whose reads and writes
     * reach "hot_key_share" of its server's requests in a second is logged (0: never; default
     * CH_CONF_DEFAULT_HOT_KEY_SHARE); "hot_key_names" (default false) lets /metrics and INFO
     * name hot keys (else they show a hash of the key). */
    double hot_key_share;
    bool hot_key_names;
    /* "gutter: NAME" (chash-proxy; docs/PROXY.md, "Gutter pool"): while a key's owner is
     * ejected, its reads and writes go to pool NAME of the same file (same protocol, with no
     * gutter of its own), every write's lifetime capped at "gutter_ttl" ms (1 .. a day;
     * default CH_CONF_DEFAULT_GUTTER_TTL). NULL: none. */
    char *gutter_pool;
    int gutter_ttl_ms;
    unsigned gutter_line, gutter_column; /* where the pool's name is, for the error naming it */
    /* "routes" (chash-proxy; docs/PROXY.md, "Prefix routing"): on a pool with "listen", the
     * keys of its clients go to the pool of their longest matching prefix (another pool of the
     * same file and protocol, without routes of its own); a key matching none stays with this
     * pool's own servers. NULL/0: none. routes_line/column: where "routes" is. */
    struct ch_conf_route *routes;
    size_t nroutes;
    unsigned routes_line, routes_column;
    /* "coalesce_reads" (chash-proxy; default true): identical single-key reads in flight at
     * once on one worker share one backend request (docs/PROXY.md, "Coalescing"). */
    bool coalesce_reads;
    /* "near_tracking" (chash-proxy, Redis pools with hot_cache; default true): the servers
     * tell the proxy which of the near cache's keys changed (CLIENT TRACKING, an invalidation
     * link per server and worker: docs/OPERATIONS.md, "Hot keys"); false: hot_cache alone
     * bounds what another writer changed. */
    bool near_tracking;
} ch_conf_pool;

/* The values of ch_conf_pool.membership_fenced. */
enum { CH_CONF_FENCED_ERROR = 0, CH_CONF_FENCED_SERVE = 1 };

/* The values of ch_conf_pool.membership_scheme, and the two questions its users ask. */
enum { CH_CONF_MEMBERSHIP_ETCD = 0, CH_CONF_MEMBERSHIP_DNS = 1, CH_CONF_MEMBERSHIP_DNS_SRV = 2 };
static inline bool ch_conf_membership_etcd(const ch_conf_pool *p)
{
    return p->membership != NULL && p->membership_scheme == CH_CONF_MEMBERSHIP_ETCD;
}
static inline bool ch_conf_membership_dns(const ch_conf_pool *p)
{
    return p->membership != NULL && p->membership_scheme != CH_CONF_MEMBERSHIP_ETCD;
}

/* Defaults of the proxy limits max_request_bytes and max_client_buffer_bytes: 64 MiB each. */
#define CH_CONF_DEFAULT_MAX_REQUEST_BYTES (64 * 1024 * 1024)
#define CH_CONF_DEFAULT_MAX_CLIENT_BUFFER_BYTES (64 * 1024 * 1024)
#define CH_CONF_DEFAULT_MAX_ITEM_BYTES (1024 * 1024)
#define CH_CONF_DEFAULT_CLIENT_READ_TIMEOUT 30000
#define CH_CONF_DEFAULT_REJOIN_JOURNAL_KEYS 100000
#define CH_CONF_DEFAULT_MAX_CLIENT_INFLIGHT_BYTES (32 * 1024 * 1024)
#define CH_CONF_DEFAULT_MAX_EJECTED_SHARE 0.5
#define CH_CONF_DEFAULT_HOT_KEY_SHARE 0.1
#define CH_CONF_DEFAULT_HOT_CACHE_BYTES (64 * 1024 * 1024)
#define CH_CONF_DEFAULT_HOT_THRESHOLD 200
#define CH_CONF_MAX_HOT_CACHE_MS 3600000 /* an hour: longer is a typo */
/* The longest warm_up and ramp (ms): a day. A longer window is a typo, and its change would
 * never finish in any useful time. */
#define CH_CONF_MAX_WINDOW_MS (24 * 3600 * 1000)
/* "replicas" at most (and at most the pool's servers). */
#define CH_CONF_MAX_REPLICAS 8
#define CH_CONF_DEFAULT_MEMBERSHIP_HOLD_DOWN 10000
/* "membership_interval" (ms) of a DNS membership: the default, and the least (also the floor of
 * an answer's TTL: a TTL of 0 re-resolves every CH_CONF_MIN_MEMBERSHIP_INTERVAL ms, not in a
 * loop). */
#define CH_CONF_DEFAULT_MEMBERSHIP_INTERVAL 5000
#define CH_CONF_MIN_MEMBERSHIP_INTERVAL 100
#define CH_CONF_DEFAULT_GUTTER_TTL 10000

typedef struct ch_config {
    char *path;
    ch_conf_pool *pools;
    size_t npools;
} ch_config;

/* Where and why loading failed: "file:line:column: message". line and column are 1-based,
 * 0 when not known (e.g. the file cannot be opened). */
typedef struct ch_config_error {
    char file[256];
    unsigned line;
    unsigned column;
    char message[512]; /* room for the list of every distribution name */
} ch_config_error;

/* Largest file ch_config_load() reads (an addition): larger files are rejected with CH_ETOOBIG. */
#define CH_CONFIG_MAX_BYTES (16u * 1024u * 1024u)

/* The deepest nesting of collections (mappings and sequences, block or flow style) that a config
 * file or a membership document may have; deeper is refused with the line and column of the
 * collection that opens level CH_CONFIG_MAX_DEPTH + 1. A file needs 3 levels (its pools, a pool,
 * its "servers" or "shadow"), a document 2. */
#define CH_CONFIG_MAX_DEPTH 64

/* Loads and validates the file. Returns 0 and *out, or a negative chash status (CH_EINVAL for a
 * syntax or validation error, CH_ENOMEM) with *err filled; nothing is half-loaded. */
/* Details (additions): CH_EINVAL also when path or out is NULL or the file cannot be read (then
 * line and column are 0 and the message is strerror's); CH_ETOOBIG for a file larger than
 * CH_CONFIG_MAX_BYTES. err may be NULL. *out is left untouched on failure. The first error in
 * file order is reported (checks that need a whole pool, such as a missing "servers", at the
 * pool's end). Nesting deeper than CH_CONFIG_MAX_DEPTH is CH_EINVAL. Cost: O(file size),
 * expected, whatever the text; memory O(file size). Thread-safe. */
int ch_config_load(const char *path, ch_config **out, ch_config_error *err);

/* Takes pool's membership from a membership document (docs/FLEET.md): text[0, len), YAML in
 * block or flow style (so JSON too), a mapping of "servers" (required, as in a file) and
 * optionally "hash", "distribution", "hash_tag", "version" and "epoch" (an integer >= 1); any
 * other key is an error. On success pool's servers, order, hash, distribution, hash_tag and
 * version are the document's (keys it does not give take their defaults, not the pool's), and
 * *epoch is its "epoch", or 0 when absent. Errors name the document as name (e.g. the etcd
 * URL) with its line and column. pool must belong to a ch_config loaded by ch_config_load()
 * that no one else reads yet. Returns 0, or CH_EINVAL / CH_ENOMEM / CH_ETOOBIG with *err
 * filled and pool unchanged; nesting deeper than CH_CONFIG_MAX_DEPTH is CH_EINVAL. Cost: O(len),
 * whatever the text. Thread-safe (on distinct pools). */
int ch_config_membership_doc(ch_conf_pool *pool, const char *name, const void *text, size_t len,
                             int64_t *epoch, ch_config_error *err);

/* Reads a membership document alone, as ch_config_membership_doc() would apply it, for a caller
 * that looks at it before applying it (its epoch, its servers): *out is a ch_config of one pool,
 * named pool_name, holding the document's membership and defaults for the rest (free it with
 * ch_config_free). Same errors as ch_config_membership_doc(); *out untouched on failure. */
int ch_config_membership_parse(const char *pool_name, const char *name, const void *text,
                               size_t len, ch_config **out, int64_t *epoch,
                               ch_config_error *err);

/* Formats err as "file:line:column: message" into buf (truncated to len, always terminated when
 * len > 0). Returns buf. */
const char *ch_config_error_str(const ch_config_error *err, char *buf, size_t len);

/* The pool with that name, or, when name is NULL and the file has exactly one pool, that pool.
 * NULL otherwise. */
const ch_conf_pool *ch_config_pool(const ch_config *cfg, const char *name);

/* Frees cfg and everything it owns. NULL is a no-op. */
void ch_config_free(ch_config *cfg);

/* ---- from a pool to routing (include/chash_route.h) ------------------------------------------ */

/* The pool's table options: its distribution, hash and hash_tag; vnodes 0 (each scheme's own
 * default: ketama's 160, hashring@3's 40, ..., as the library it reproduces) and the default
 * table size. Returns CH_OK (a loaded pool's names are always valid). */
int ch_config_options(const ch_conf_pool *p, ch_options *opt);

/* The pool's members for placement by `algo`, in the order and with the ids the peers use:
 * nutcracker's distributions (ketama, modula, random) take its server order (p->order) and
 * twemproxy's names (ch_conf_server.id); the libmemcached ones take the file's order and ids
 * "host:port"; the others the file's order and twemproxy's names. members[] has room for
 * p->nservers entries; its strings point into p. */
void ch_config_members(const ch_conf_pool *p, ch_algo_id algo, ch_member *members);

/* The pool's membership: ch_config_members() under its distribution, ch_config_options(), and
 * its "version" key (else a content hash). Returns what ch_membership_build() returns. */
int ch_config_membership(const ch_conf_pool *p, ch_membership **out);
/* ch_config_membership with the placement table's memory from alloc (NULL: malloc): e.g. one
 * that refuses blocks over a bound, so a weight that would need gigabytes fails at once
 * (CH_ENOMEM) instead of building. */
int ch_config_membership_alloc(const ch_conf_pool *p, const ch_allocator *alloc,
                               ch_membership **out);
/* ch_config_membership_alloc() with *err (may be NULL) saying what failed, as
 * ch_membership_build_err() says it (maglev's table size against the pool's servers, a ring's
 * points against its weights, ...). alloc may be NULL. */
int ch_config_membership_err(const ch_conf_pool *p, const ch_allocator *alloc,
                             ch_membership **out, ch_error *err);

/* The pool's health policy. twemproxy's keys map onto chash's when the file gives them:
 *   auto_eject_hosts       -> eject (absent: true)
 *   server_failure_limit   -> failure_limit (absent: 3)
 *   server_retry_timeout   -> retry_min_ms (absent: 1000)
 *   server_retry_max       -> retry_max_ms (absent: 60000, or retry_min_ms if larger)
 *   server_failure_window  -> failure_window_ms (absent: 10000)
 * jitter and stable_ms keep ch_health_options_init()'s defaults. */
void ch_config_health(const ch_conf_pool *p, ch_health_options *opt);

#ifdef __cplusplus
}
#endif

#endif /* CHASH_CONFIG_H */

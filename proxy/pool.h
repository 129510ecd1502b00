/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pool.h — a pool, as the control thread shares it (px_shared_pool) and as one worker serves it
 * (px_pool: its copy, with its servers, clients and counters).
 *
 * Shared by the workers, read-mostly: a pool's membership and placement table (immutable; a
 * reload builds new ones and each worker swaps its pointers in one job on its loop, between two
 * requests), its health (health_shared.h), the config (conf_ref.h) and the count of its client
 * connections (a relaxed atomic). Everything else of a px_pool is its worker's alone.
 */
#ifndef CHASH_PROXY_POOL_H
#define CHASH_PROXY_POOL_H

#include "chash_config.h"
#include "conf_ref.h"
#include "counters.h"
#include "fence.h"
#include "health_shared.h"
#include "io.h"
#include "proto/codec.h"
#include "route.h"
#include "window.h"

#include <stddef.h>
#include <stdint.h>

/* Requests of one client in flight before its reading pauses. It also bounds what a client
 * closed for not reading still costs the backend connections it shares: at most this many
 * replies to drain before other clients' requests behind them are answered. */
#define PX_MAX_CLIENT_REQUESTS 128u
#define PX_DEFAULT_TIMEOUT_MS 1000u /* a pool without "timeout" */
/* A buffer left this large once empty is freed, so a connection that once carried a huge
 * request or reply does not keep its high-water mark for good. */
#define PX_BUF_KEEP (1024u * 1024u)
#define PX_MAX_DEPTH 8u             /* failover candidates tried per key */
#define PX_POOL_ROUTES 20u          /* the nodes of a pool's tree of routes (route_build.c): at most
                                       near, coalesce, shadow, stage, gutter, warm, replica over
                                       8 owners' leaves, and 3 leaves more, 18 */
/* A client over max_client_buffer_bytes that takes no reply byte for this long is closed. */
#define PX_CLIENT_STALL_MS 2000u
#define PX_FD_LOG_PERIOD_MS 10000u  /* "out of descriptors" lines: at most one per pool per 10 s */
/* AUTH guessing: a connection is closed after PX_AUTH_CONN_FAILS wrong passwords in a row; an
 * address with PX_AUTH_ADDR_FAILS wrong passwords within PX_AUTH_WINDOW_MS (per worker) has
 * every AUTH refused until that window ends. */
#define PX_AUTH_CONN_FAILS 3u
#define PX_AUTH_ADDR_FAILS 20u
#define PX_AUTH_WINDOW_MS 10000u
#define PX_AUTH_GUARD_SLOTS 64u

/* Failed AUTHs of one client address (its hash) in the current window. */
typedef struct px_auth_guard {
    uint64_t addr;
    uint64_t since; /* loop time the window started */
    uint32_t fails;
} px_auth_guard;

/* Relaxed atomics for counters several threads add to (connections), and loads of them. */
#define PX_ATOMIC_ADD(x, n) ((void)__atomic_fetch_add(&(x), (n), __ATOMIC_RELAXED))
#define PX_ATOMIC_SUB(x, n) ((void)__atomic_fetch_sub(&(x), (n), __ATOMIC_RELAXED))
#define PX_ATOMIC_LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

typedef struct px_worker px_worker; /* worker.h; opaque below it */
typedef struct px_server px_server; /* backend.h */
typedef struct px_tls_ctx px_tls_ctx; /* tls.h */
typedef struct px_mcb_users px_mcb_users; /* proto/mc_bin.h */

/* A pool as the control thread knows it: what every worker's copy of the pool points to. */
typedef struct px_shared_pool {
    px_conf *cref;              /* holds a reference: conf points into it */
    const ch_conf_pool *conf;
    ch_membership *members;     /* owned */
    px_health *health;          /* owned */
    const ch_conf_server **servers; /* in membership order (owned array) */
    size_t nservers;
    /* A warm-up window or ramp (warm.h) after the reload that made this state: the previous
     * membership (owned; NULL: none) and the window's times. */
    px_tls_ctx *tls_listen, *tls_servers; /* owned (tls.h; NULL: plain) */
    px_mcb_users *mc_users;     /* owned: client_auth_file's users (NULL: none) */
    ch_membership *prev;
    px_warm_times warm;
    enum {
        PX_WARM_FROM_NONE, /* no window: a worker ends its own */
        PX_WARM_FROM_NOW,  /* a window starts over the placement in force until this state */
        PX_WARM_FROM_KEPT, /* the running window goes on (a change that moved no key) */
    } warm_from;
    /* Fleet membership (docs/FLEET.md): the membership document this state was built from
     * (owned; NULL: the file's servers) and its epoch (0: none). A reload of the file composes
     * the file's pool with it again. */
    char *doc;
    size_t doclen;
    int64_t epoch;
    /* Fencing (docs/FLEET.md, "Fencing"): the membership is proven current until the earlier
     * of lease_until_ns (what the lease proves: lease.c's keeper moves it) and serve_until_ns
     * (what the fence decides, fence.h: UINT64_MAX while current, a heartbeat while a prepared
     * change is held, 0 when not current), both uv_hrtime, both UINT64_MAX for a pool not in
     * etcd; fence_why says why not once the earlier has passed. Each worker compares them with
     * its own clock, read after the request's bytes arrived, before it sends a request anywhere
     * (px_pool_fenced), so it fences at the deadline even when the control thread is stalled or
     * the process was stopped. Relaxed atomics: a stale read of a deadline is still a deadline
     * that was proven. None is touched by a reload (px_shared_pool_clear). */
    uint64_t lease_until_ns;
    uint64_t serve_until_ns;
    uint8_t fence_why; /* px_fence_why */
    uint64_t clients;           /* client connections open, all workers (atomic) */
    /* The near cache's invalidation generations (src/hot/near.h), shared by the workers, and
     * their count: set at start for the process's life, untouched by reloads (like clients). */
    struct ch__near_gens *near_gens;
    unsigned near_workers;
    /* Its client connections on every worker, for CLIENT LIST (roster.h): set at start for the
     * process's life, untouched by reloads. */
    struct px_roster *roster;
    /* Its client ids on every worker and each worker's inbox of invalidations redirected to
     * them (CLIENT TRACKING on REDIRECT, redir.h): set at start for the process's life. */
    struct px_redir *redir;
} px_shared_pool;

/* The shared state of pool pc: its membership, health and servers in membership order; holds a
 * reference to cref. Returns 0, or -1 with the reason in why. */
int px_shared_pool_init(px_shared_pool *sp, px_conf *cref, const ch_conf_pool *pc, char *why,
                        size_t whylen);
/* Frees what sp owns and clears it; never touches its clients counter, which workers update
 * concurrently (so a live pool can be cleared and refilled by a reload). */
void px_shared_pool_clear(px_shared_pool *sp);
/* The config's servers of pc in membership order (ch_config_members' order) into out[]
 * (pc->nservers entries). Returns 0, or -1 when a member has no server entry. Cost:
 * O(n log n). */
int px_pool_servers(const ch_conf_pool *pc, const ch_conf_server **out);

/* For each address want[i] (i < n), the index of an equal address in have[0, nhave), each index
 * given at most once (equal addresses pair up in order), or SIZE_MAX when none is left: into
 * from[i]. With same_pointer, only the very string (want[i] == have[k]) matches. Returns 0, or
 * -1 when out of memory. Cost: O((n + nhave) log nhave), so a reload of 10,000 servers matches
 * them in milliseconds, not in the 10^8 string compares of a nested loop. */
int px_match_addrs(const char *const *have, size_t nhave, const char *const *want, size_t n,
                   bool same_pointer, size_t *from);

/* A prepared membership change as one worker stages it (route_stage.c), from its prepare to its
 * commit or abort (reload.c): the change's table, and per node of it the server it will be,
 * one of the pool's servers now or a new one started for the stage (not in the pool's health
 * until the commit). table NULL: nothing staged. */
typedef struct px_stage {
    const ch_table *table;
    struct px_server **to;
    size_t n;
} px_stage;

/* A shadow route's settings (route_shadow.c): the shadow pool, of the same worker. */
typedef struct px_shadow_conf {
    struct px_pool *pool;
    double fraction;
    bool writes;
} px_shadow_conf;

/* A gutter route's settings (route_gutter.c): the gutter pool, of the same worker, and the
 * longest lifetime a write sent there gets (gutter_ttl). */
typedef struct px_gutter_conf {
    struct px_pool *pool;
    uint64_t ttl_ms;
} px_gutter_conf;

/* A pool's tree of routes (route_build.c), immutable once built: a reload builds a new one, and
 * the old one lives on while requests started on it are in flight (their slots' states and
 * their fragments point into it). */
typedef struct px_route_tree {
    unsigned refs;   /* the pool's, while it is the pool's tree, and one per request on it */
    unsigned n;
    px_shadow_conf shadow;
    px_gutter_conf gutter;
    struct px_prefix *prefix; /* a listener's routes (route_prefix.h; owned: one block), or
                                 NULL */
    px_route nodes[PX_POOL_ROUTES]; /* parent before child; nodes[0] the root */
} px_route_tree;

/* Drops a reference to t (NULL: nothing); the last frees it. */
void px_route_tree_release(px_route_tree *t);

/* A worker's copy of a pool: its servers and their connections, its clients, its counters.
 * conf, members, table and health are the shared pool's, swapped by a reload. */
typedef struct px_pool {
    px_io *io;          /* its worker's loop */
    px_worker *worker;  /* its worker (for the layers above the data path) */
    unsigned windex;    /* its worker's index (redir.h's inboxes) */
    px_shared_pool *shared;
    const ch_conf_pool *conf;
    const ch_membership *members;
    const ch_table *table;
    px_health *health;
    px_server *servers; /* membership order */
    size_t nservers;
    size_t depth;         /* failover candidates per request */
    uint64_t timeout_ms;  /* per request to a backend */
    const px_codec *codec;   /* its protocol */
    px_limits limits;        /* for its clients' requests */
    px_limits backend_limits; /* for its backends' replies */
    px_span *args, *keys;    /* the parser's arrays for its clients' requests, grown on demand */
    size_t args_cap, keys_cap;
    px_route_tree *tree;     /* its tree of routes (route_build.c; NULL until built) */
    px_route *route;         /* where its requests start: tree's root */
    px_warm warm;            /* the window after a membership change (warm.h) */
    px_stage stage;          /* a change prepared, not committed yet (route_stage.c) */
    px_tls_ctx *tls_listen;  /* the shared pool's TLS contexts (NULL: plain) */
    px_tls_ctx *tls_servers;
    /* The INFO text for this worker (metrics.c, set by the worker). */
    int (*info)(void *arg, px_buf *out);
    void *info_arg;
    size_t max_client_buffer; /* max_client_buffer_bytes: reply bytes held for one client */
    size_t max_client_inflight; /* max_client_inflight_bytes: its requests' bytes in flight */
    const px_mcb_users *mc_users; /* the shared pool's (client_auth_file: SASL PLAIN for binary
                                     memcached clients); NULL: none */
    const char *client_password; /* what clients AUTH with: client_auth, else redis_auth; NULL:
                                    no AUTH needed */
    px_stream *listener;  /* NULL while accepting is paused (out of descriptors) */
    int listen_spare;     /* a dup of the listening socket: resumes accepting after a pause */
    uv_timer_t listen_retry;
    uint64_t fd_log_at, fd_unlogged; /* rate-limited "out of descriptors" lines */
    uint64_t mem_log_at;             /* and "memory budget reached" lines */
    px_dl clients;
    uint64_t *accepted_total;  /* the control thread's count over all pools (atomic) */
    uint64_t *clients_open;    /* client connections open in every pool and worker (atomic) */
    uint64_t clients_max;      /* the descriptors left for clients: a pool without
                                  client_connections refuses clients beyond it (0: no cap) */
    px_auth_guard auth_guard[PX_AUTH_GUARD_SLOTS]; /* by address hash, this worker's */
    px_pool_stats stats;
    px_pool_metrics m;
    /* The keys of its requests in this window (hotkeys.h: the control thread lends it and
     * swaps it once a window; NULL: none lent). Touched only by this worker's thread. */
    struct ch__topk *hot;
    /* The reads of a key this worker counts in a window (hot_threshold / workers) before the
     * near cache or hot_spread takes it as hot (set with the tree, route_build.c). */
    uint64_t hot_threshold;
    /* The placement its near cache's tracking last saw (track.c): a change is a flush. */
    const ch_table *track_table;
    /* The keys its tracking clients on this worker read (client_track.h; NULL until the first
     * CLIENT TRACKING on): every flush of the near cache's tracking flushes them too. */
    struct px_ctrack *ctrack;
} px_pool;

/* Whether this worker's detector says the key of hash kh (px_key_hash) is hot now: its reads'
 * lower bound this window reached the worker's share of hot_threshold (the near cache and
 * hot_spread ask). Cost: a lookup in the window's summary. */
bool px_pool_hot(const px_pool *pool, uint64_t kh);

/* A worker pool's settings from its conf: depth, timeout, limits, password (start and reload). */
void px_pool_configure(px_pool *pool);

/* Whether shared pool sp's membership is not proven current at now_ns (uv_hrtime). Cost: two
 * relaxed atomic loads and two compares. */
static inline bool px_shared_fenced(const px_shared_pool *sp, uint64_t now_ns)
{
    return now_ns >= PX_ATOMIC_LOAD(sp->lease_until_ns) ||
           now_ns >= PX_ATOMIC_LOAD(sp->serve_until_ns);
}

/* Whether pool must refuse a request that came in at now_ns: its membership is not proven
 * current and the pool does not choose to serve anyway ("membership_fenced: serve"). */
static inline bool px_pool_fenced(const px_pool *pool, uint64_t now_ns)
{
    return pool->conf->membership_fenced != CH_CONF_FENCED_SERVE &&
           px_shared_fenced(pool->shared, now_ns);
}

#endif /* CHASH_PROXY_POOL_H */

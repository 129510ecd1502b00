/*
 * proxy.h — chash-proxy internals: the proxy context, pools, backend servers and their
 * connections, client connections, requests and their fragments.
 *
 * Threading (docs/OPERATIONS.md, "Threads"): a control thread (px_main: signals, the stats and
 * metrics ports, reloads) and N workers (px_proxy), each with its own libuv loop, its own
 * listener per pool (SO_REUSEPORT: the kernel spreads connections over the workers), its own
 * clients and its own backend connections. Everything a worker holds (its pools' px_server and
 * px_conn, clients, requests, fragments, counters) is touched only from its thread, except where
 * a comment says otherwise. Shared by the workers, read-mostly:
 *   - a pool's membership and placement table (immutable; a reload builds new ones and each
 *     worker swaps its pointers in one job on its loop, between two requests);
 *   - a pool's health (px_health): readers load published atomics without a lock; the lock is
 *     taken on failures, probes and the first success after a failure, never on a plain request;
 *   - the config (px_conf, reference counted);
 *   - connection counters (relaxed atomics).
 * The control thread talks to a worker only through px_worker_call(): a job run on the worker's
 * loop while the control thread waits. Reloads are two jobs (prepare on every worker, then commit
 * or abort on every worker); stats and metrics add each worker's counters into a snapshot, one
 * job per worker, so counters stay plain integers on the request path.
 *
 * The data path:
 *   client bytes -> ch_resp_parse_request -> command table (command.c) -> a px_req, queued on its
 *   client in arrival order -> one or more px_frag (one per backend touched) -> routed by the
 *   pool's membership and health (ch_route) -> appended to a backend connection's FIFO and
 *   output buffer -> replies scanned with ch_resp_scan_reply complete the FIFO's head fragment
 *   -> a request whose fragments are all complete is done -> the client's queue is flushed from
 *   its head while the head is done, so replies leave in the client's request order.
 */
#ifndef CHASH_PROXY_H
#define CHASH_PROXY_H

#include "chash_config.h"
#include "metrics.h"
#include "proto/resp.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <uv.h>

#define PX_VERSION "0.1.0"

/* Limits and defaults (docs/PROXY.md lists them). The size of one client request and the reply
 * bytes held for one client are per pool: max_request_bytes and max_client_buffer_bytes in the
 * config (defaults CH_CONF_DEFAULT_MAX_REQUEST_BYTES, CH_CONF_DEFAULT_MAX_CLIENT_BUFFER_BYTES). */
/* Requests of one client in flight before its reading pauses. It also bounds what a client
 * closed for not reading still costs the backend connections it shares: at most this many
 * replies to drain before other clients' requests behind them are answered. */
#define PX_MAX_CLIENT_REQUESTS 128u
#define PX_DEFAULT_TIMEOUT_MS 1000u               /* a pool without "timeout" */
#define PX_PROBE_TICK_MS 100u                     /* how often due probes are looked for */
#define PX_MAX_DEPTH 8u                           /* failover candidates kept per request */
#define PX_READ_CHUNK (64u * 1024u)               /* bytes asked of the kernel per read */

/* ---- logging (log.c) ------------------------------------------------------------------------- */

/* twemproxy's levels: 0 emerg .. 3 error, 4 warn, 5 notice (default), 6 info, 7+ debug. */
enum { PX_LOG_EMERG = 0, PX_LOG_ERR = 3, PX_LOG_WARN = 4, PX_LOG_NOTICE = 5, PX_LOG_INFO = 6,
       PX_LOG_DEBUG = 7 };

typedef struct px_log {
    FILE *fp;  /* stderr or the -o file */
    int level; /* messages above this level are dropped */
} px_log;

void px_log_write(px_log *lg, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define PX_LOG(px, lvl, ...)                                                                      \
    do {                                                                                          \
        if ((lvl) <= (px)->log.level)                                                             \
            px_log_write(&(px)->log, (lvl), __VA_ARGS__);                                         \
    } while (0)

/* ---- buffers (buf.c) ------------------------------------------------------------------------- */

/* A growable byte buffer; p is NULL until the first append. */
typedef struct px_buf {
    char *p;
    size_t len, cap;
} px_buf;

int px_buf_reserve(px_buf *b, size_t extra); /* 0, or -1 when out of memory */
int px_buf_append(px_buf *b, const void *data, size_t len);
int px_buf_printf(px_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void px_buf_consume(px_buf *b, size_t n); /* drops the first n bytes */
/* Writes what the stream takes at once of b (uv_try_write) and drops it from b. Returns 0 (also
 * when nothing could be written: UV_EAGAIN, or an earlier write still queued) or a libuv error. */
int px_try_write(uv_stream_t *s, px_buf *b);
void px_buf_free(px_buf *b);
/* Appends a RESP bulk string. */
int px_buf_bulk(px_buf *b, const void *data, size_t len);

/* An intrusive circular doubly linked list; a node is unlinked when next == NULL. */
typedef struct px_dl {
    struct px_dl *prev, *next;
} px_dl;
void px_dl_init(px_dl *head);
void px_dl_push(px_dl *head, px_dl *node);
void px_dl_remove(px_dl *node); /* no-op on an unlinked node */
#define PX_CONTAINER(ptr, type, field) ((type *)(void *)((char *)(ptr)-offsetof(type, field)))

/* ---- types ----------------------------------------------------------------------------------- */

typedef struct px_main px_main;
typedef struct px_proxy px_proxy;
typedef struct px_pool px_pool;
typedef struct px_server px_server;
typedef struct px_conn px_conn;
typedef struct px_client px_client;
typedef struct px_req px_req;
typedef struct px_frag px_frag;

/* A libuv stream of either family, with the object that owns it. Allocated per connection
 * attempt and freed in its close callback, so the owner can reconnect at once. */
typedef struct px_stream {
    union {
        uv_handle_t handle;
        uv_stream_t stream;
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    } u;
    uv_connect_t connect;
    void *owner; /* px_conn or px_client; NULL once the owner let go of it */
} px_stream;

/* One write in flight: its bytes live until the callback. */
typedef struct px_write {
    uv_write_t req;
    char *data;
    size_t len;
    void *owner;
} px_write;

typedef enum px_merge {
    PX_MERGE_ONE,  /* one fragment: its reply is the reply */
    PX_MERGE_MGET, /* values into slots, in the client's key order */
    PX_MERGE_SUM,  /* integer replies summed (DEL, UNLINK, TOUCH, EXISTS) */
    PX_MERGE_OK,   /* +OK unless a fragment failed (MSET) */
} px_merge;

/* A client request. Invariant: it stays in its client's queue (while the client lives) until its
 * reply has been copied into the client's output; pending counts its fragments not yet
 * complete; it is freed when it is done and off the queue, or when it is done and its client is
 * gone (client == NULL). */
struct px_req {
    px_req *next;      /* the client's queue, in arrival order */
    px_client *client; /* NULL once the client has closed */
    unsigned pending;  /* fragments outstanding */
    bool done;
    bool close_after; /* QUIT, protocol errors: close the client once this reply is out */
    bool counted;     /* its reply bytes are in the client's `stored` */
    px_merge merge;
    px_buf reply;   /* the reply once done (for MGET: built at the end) */
    px_buf err;     /* the first error reply of a fragment (multi-key merges) */
    int64_t sum;    /* PX_MERGE_SUM */
    px_buf *slots;  /* PX_MERGE_MGET: one reply per key */
    size_t nslots;
    px_pool *pool;     /* whose metrics count it (its client's pool) */
    uint64_t t0;       /* uv_hrtime() at arrival: the latency histogram */
    uint8_t mclass;    /* px_cmd_class */
    bool observed;     /* counted in the metrics */
};

typedef enum px_frag_kind {
    PX_FRAG_FORWARD, /* serves a client request */
    PX_FRAG_INIT,    /* AUTH / SELECT sent when a backend connection opens; reply dropped */
    PX_FRAG_PROBE,   /* PING of an ejected server */
} px_frag_kind;

/* A command sent to one backend. Invariant: while queued it is in exactly one connection's FIFO,
 * and the FIFO order is the order its bytes were written, so the n-th reply read on that
 * connection belongs to the n-th fragment of the FIFO. */
struct px_frag {
    px_frag *next;
    px_frag_kind kind;
    px_req *req; /* the request served (FORWARD) */
    uint64_t cid; /* its client's id: picks the backend connection */
    px_pool *pool;
    char *data; /* the command, kept for a retry */
    size_t len;
    size_t cand[PX_MAX_DEPTH]; /* candidate servers (membership indexes), owner first */
    size_t ncand, attempt;     /* cand[attempt] is the server it is sent to */
    bool retry;                /* a read: safe to send to the next candidate on failure */
    bool split;                /* a fragment of a multi-key command */
    size_t *keys;              /* PX_MERGE_MGET: the slot of each key of this fragment */
    size_t nkeys;
    uint64_t deadline; /* loop time (ms) by which the reply must have arrived */
};

typedef enum px_conn_state { PX_CONN_DOWN, PX_CONN_CONNECTING, PX_CONN_UP } px_conn_state;

/* A connection to a backend server. Reconnected lazily: the first fragment sent to a DOWN
 * connection opens it; fragments sent while it connects wait in the FIFO and the output buffer. */
struct px_conn {
    px_server *server;
    px_stream *st; /* NULL when DOWN */
    px_conn_state state;
    px_buf wbuf; /* written on the next flush, when UP */
    px_buf rbuf; /* reply bytes read, not yet matched */
    size_t need; /* rbuf must reach this length before scanning again */
    px_frag *head, *tail;
    size_t nfrags, nunsent;       /* in the FIFO; not yet handed to the kernel */
    size_t bytes, unsent_bytes;   /* their request bytes */
    uv_timer_t timer;             /* the FIFO head's deadline */
    px_dl dirty;                  /* in its worker's list of connections to flush */
};

/* ---- shared by the threads (shared.c) --------------------------------------------------------- */

/* Relaxed atomics for counters several threads add to (connections), and loads of them. */
#define PX_ATOMIC_ADD(x, n) ((void)__atomic_fetch_add(&(x), (n), __ATOMIC_RELAXED))
#define PX_ATOMIC_SUB(x, n) ((void)__atomic_fetch_sub(&(x), (n), __ATOMIC_RELAXED))
#define PX_ATOMIC_LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

/* A loaded config, shared by the threads; freed when its last reference goes. The control thread
 * holds one per pool whose conf points into it and one for the file's latest version; a retired
 * server (reload.c) holds one until it is freed. */
typedef struct px_conf {
    ch_config *cfg;
    unsigned refs; /* atomic */
} px_conf;
px_conf *px_conf_new(ch_config *cfg); /* one reference; NULL when out of memory (cfg not freed) */
void px_conf_ref(px_conf *c);
void px_conf_unref(px_conf *c); /* the last one frees cfg */

/* A pool's health, shared by the workers: a ch_health behind a lock, and what the request path
 * needs of it published as atomics (up[], n_up) so that routing takes no lock. The lock is taken
 * by a failure, a probe (claim and result) and the first success after a failure (streak[]
 * says a failure streak is open), none of which is the common case. Replaced as a whole by a
 * reload (the old one is freed once every worker has switched). */
typedef struct px_health {
    pthread_mutex_t lock; /* guards h, and every write to the arrays below */
    ch_health *h;
    size_t n;
    uint8_t *up;      /* ch_health_is_up(h, i) */
    uint8_t *streak;  /* i has failures that no success has ended yet */
    uint8_t *probing; /* a worker has a probe of i in flight */
    size_t n_up;      /* nodes up */
} px_health;
int px_health_new(size_t n, const ch_health_options *opt, px_health **out); /* CH_OK, CH_E* */
void px_health_free(px_health *h);
bool px_health_up(const px_health *h, size_t i); /* no lock */
/* The key's candidates (ch_route_hash_fn over the published state); no lock. */
int px_health_route(const px_health *h, const ch_table *t, uint64_t kh, size_t depth,
                    size_t *out, size_t *count);
void px_health_success(px_health *h, size_t i, uint64_t now_ms); /* locks only after a failure */
/* A failure of i; true when it ejected i. */
bool px_health_failure(px_health *h, size_t i, uint64_t now_ms, uint64_t rnd);
/* Whether this caller should probe i now: i is ejected, its probe is due and no one else probes
 * it. The caller then owns the probe and must report it with px_health_probe_result (or
 * px_health_probe_drop). */
bool px_health_probe_claim(px_health *h, size_t i, uint64_t now_ms);
/* The claimed probe's result; true when i is up afterwards (readmitted). */
bool px_health_probe_result(px_health *h, size_t i, bool ok, uint64_t now_ms, uint64_t rnd);
void px_health_probe_drop(px_health *h, size_t i); /* a claimed probe that will not report */

/* A pool as the control thread knows it: what every worker's copy of the pool points to. */
typedef struct px_shared_pool {
    px_conf *cref;              /* holds a reference: conf points into it */
    const ch_conf_pool *conf;
    ch_membership *members;     /* owned */
    px_health *health;          /* owned */
    const ch_conf_server **servers; /* in membership order (owned array) */
    size_t nservers;
    uint64_t clients;           /* client connections open, all workers (atomic) */
} px_shared_pool;

/* The config's servers of pc in membership order (ch_config_members' order) into out[]
 * (pc->nservers entries). Returns 0, or -1 when a member has no server entry. */
int px_pool_servers(const ch_conf_pool *pc, const ch_conf_server **out);

typedef struct px_server_stats {
    uint64_t server_eof, server_err, server_timedout, server_connections, server_ejected_at;
    uint64_t requests, request_bytes, responses, response_bytes;
    uint64_t ejects; /* times this server was ejected (metrics; not in the stats JSON) */
} px_server_stats;
/* The counters of px_server_stats summed over the workers (server_ejected_at: the latest). */
#define PX_SERVER_SUMS                                                                            \
    X(server_eof) X(server_err) X(server_timedout) X(server_connections) X(requests)              \
    X(request_bytes) X(responses) X(response_bytes) X(ejects)

/* A backend server as one worker sees it: its connections from that worker, its counters (the
 * stats and metrics add every worker's up, px_snapshot). */
struct px_server {
    px_pool *pool;
    size_t index;                /* in the membership */
    const ch_conf_server *conf;  /* its line in the file */
    struct sockaddr_storage sa;  /* resolved at startup (TCP) */
    bool is_unix;
    px_conn *conns;
    unsigned nconns;
    bool probing; /* this worker has a probe of it in flight (claimed in the pool's px_health) */
    px_server_stats st;
    /* Hot reload (reload.c): a server dropped from the pool's membership is retired: it leaves
     * the pool's array for its own allocation, in px_proxy.retired, and takes no new fragments;
     * its health is no longer tracked (its index means nothing in the new membership). It is
     * closed and freed once its connections' FIFOs are empty. */
    bool retired;
    px_dl retired_link; /* in px_proxy.retired while retired and not yet closing */
    px_conf *cref;      /* retired: a reference to the config its conf points into */
    unsigned closing;   /* timers whose close callback is pending; the last one frees it */
};

typedef struct px_pool_stats {
    uint64_t client_eof, client_err, client_connections, server_ejects, forward_error, fragments;
} px_pool_stats;
#define PX_POOL_SUMS                                                                              \
    X(client_eof) X(client_err) X(client_connections) X(server_ejects) X(forward_error)           \
    X(fragments)

/* A worker's copy of a pool: its servers and their connections, its clients, its counters. conf,
 * members, table and health are the shared pool's (px_shared_pool), swapped by a reload. */
struct px_pool {
    px_proxy *px;
    px_shared_pool *shared;
    const ch_conf_pool *conf;
    const ch_membership *members;
    const ch_table *table;
    px_health *health;
    px_server *servers; /* membership order */
    size_t nservers;
    size_t depth;         /* failover candidates per request */
    uint64_t timeout_ms;  /* per request to a backend */
    ch_resp_limits limits; /* for its clients' requests: max_request is max_request_bytes */
    size_t max_client_buffer; /* max_client_buffer_bytes: reply bytes held for one client */
    const char *client_password; /* what clients AUTH with: client_auth, else redis_auth; NULL:
                                    no AUTH needed */
    px_stream *listener;
    px_dl clients;
    px_pool_stats st;
    px_pool_metrics m;
};

struct px_client {
    px_stream *st;
    px_pool *pool;
    uint64_t id;
    px_dl link;  /* in the pool's client list */
    px_dl dirty; /* in its worker's list of clients to flush */
    px_buf rbuf;
    size_t need;
    px_req *head, *tail;
    size_t nreqs;
    size_t stored;   /* reply bytes of done requests waiting behind an unfinished one */
    size_t inflight; /* bytes handed to uv_write, not yet written */
    px_buf wbuf;
    bool authed;
    bool closing;  /* uv_close called (or about to be) */
    bool draining; /* no more reading: close once the queue is flushed */
    bool paused;   /* reading stopped for backpressure */
    bool shut;     /* uv_shutdown issued */
    uv_shutdown_t shutdown;
};

/* A job the control thread runs on a worker's loop (px_worker_call). */
typedef void (*px_job_fn)(px_proxy *px, void *arg);

/* A worker: one thread, one loop. */
struct px_proxy {
    px_main *main;
    unsigned index; /* 0 .. nworkers-1, in log lines as "worker N" */
    uv_loop_t *loop;
    pthread_t thread;
    bool started;     /* thread is running */
    px_log log;
    px_pool *pools;   /* as main->pools */
    size_t npools;
    ch_resp_limits limits; /* for the proxy's own fragments and the backends' replies; a
                              pool's clients are held to px_pool.limits */
    ch_resp_arg *argv; /* the parser's argument array, grown on demand */
    size_t argv_cap;
    px_dl dirty_clients, dirty_conns;
    uv_check_t flush_check; /* flushes dirty streams after each poll */
    uv_idle_t flush_idle;   /* keeps the poll from blocking while something is dirty */
    uv_timer_t probe_timer;
    px_dl retired;          /* retired servers (px_server.retired_link) */
    void *reload_plans;     /* reload.c: this worker's prepared plans between two jobs */
    uint64_t next_client_id;
    uint64_t rng;
    bool stopping;
    /* px_worker_call's mailbox */
    uv_async_t wake;
    pthread_mutex_t job_lock;
    pthread_cond_t job_cond;
    px_job_fn job_fn;
    void *job_arg;
    bool job_done;
};

/* The control thread: what is not per worker. */
struct px_main {
    uv_loop_t *loop;
    px_log log;
    const char *conf_path;  /* the -c file, absolute (set by main; re-read by a reload) */
    px_conf *conf;          /* the file as last loaded (a reference) */
    px_shared_pool *pools;
    size_t npools;
    px_proxy *workers;
    unsigned nworkers;
    uv_signal_t sigint, sigterm, sighup;
    uint64_t reloads, reload_failures; /* stats: configs applied / rejected (SIGHUP, POST
                                          /-/reload) */
    px_stream *stats_listener;
    const char *stats_addr;
    int stats_port;
    uint64_t stats_interval_ms;
    px_metrics_server *metrics; /* NULL unless --metrics-port */
    const char *metrics_addr;
    int metrics_port;
    uint64_t start_time;
    uint64_t total_connections; /* client connections accepted, all workers (atomic); those
                                   open are the pools' px_shared_pool.clients */
    uint64_t rng;
    bool stopping;
};

/* ---- main loop and workers (proxy.c) ---------------------------------------------------------- */

/* Sets up the control thread and nworkers workers (listeners bound, servers set up) from cfg,
 * which it takes over. Returns 0, or -1 (logged; px_main_free cleans up). */
int px_main_init(px_main *m, ch_config *cfg, unsigned nworkers);
int px_main_run(px_main *m); /* starts the workers; returns after SIGINT/SIGTERM */
void px_main_free(px_main *m);
/* The shared state of pool pc: its membership, health and servers in membership order; holds a
 * reference to cref. Returns 0, or -1 with the reason in why. */
int px_shared_pool_init(px_shared_pool *sp, px_conf *cref, const ch_conf_pool *pc, char *why,
                        size_t whylen);
/* Frees what sp owns and clears it; never touches its clients counter, which workers update
 * concurrently (so a live pool can be cleared and refilled by a reload). */
void px_shared_pool_clear(px_shared_pool *sp);
/* A worker pool's settings from its conf: depth, timeout, limits, password. */
void px_pool_configure(px_pool *pool);
uint64_t px_rand_seed(px_main *m, unsigned index); /* worker index's random state */
/* Runs fn(w, arg) on worker w's loop and waits for it (control thread only; not once the
 * workers are stopping: m->stopping). */
void px_worker_call(px_proxy *w, px_job_fn fn, void *arg);
void px_mark_client(px_client *c);
void px_mark_conn(px_conn *c);
uint64_t px_rand(px_proxy *px);
uint64_t px_now(px_proxy *px); /* loop time, ms */
/* The default worker count: the CPUs this process may run on. */
unsigned px_default_threads(void);

/* ---- client.c -------------------------------------------------------------------------------- */

void px_client_accept(px_pool *pool, uv_stream_t *listener);
void px_client_close(px_client *c);
void px_client_flush(px_client *c);
/* A request became done: move replies from the head of its client's queue to the output. */
void px_req_done(px_req *r);
void px_req_free(px_req *r);
/* A new request at the tail of the client's queue. NULL when out of memory. */
px_req *px_req_new(px_client *c);
/* Finish r at once with a literal reply. */
void px_req_reply(px_req *r, const char *data, size_t len);
void px_req_error(px_req *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- server.c -------------------------------------------------------------------------------- */

int px_server_init(px_pool *pool, px_server *s, size_t index, const ch_conf_server *conf);
/* px_server_init in two steps, for a reload that must not fail half way: setup resolves the
 * address and allocates (no libuv handle yet: on failure, px_server_free undoes it); start
 * initializes the connections' timers and cannot fail. */
int px_server_setup(px_pool *pool, px_server *s, size_t index, const ch_conf_server *conf);
void px_server_start(px_server *s);
/* Closes a retired (separately allocated) server's connections and frees it once its timers
 * have closed. */
void px_server_dispose(px_server *s);
void px_server_close(px_server *s); /* closes its connections (shutdown) */
void px_server_preconnect(px_server *s);
void px_server_free(px_server *s);
/* Sends f to f->cand[f->attempt] (skipping ejected candidates), on the connection chosen by
 * the client's id so one client's commands to a server keep their order. */
void px_frag_dispatch(px_frag *f);
void px_conn_flush(px_conn *c);
void px_probe_due(px_pool *pool);
void px_frag_free(px_frag *f);

/* ---- command.c ------------------------------------------------------------------------------- */

/* Handles one parsed request of client c (argv points into the client's buffer, valid only during
 * the call; raw is the request's bytes as received). */
void px_command_handle(px_client *c, const ch_resp_arg *argv, size_t argc, const char *raw,
                       size_t rawlen);
/* A fragment's reply arrived (bytes of one complete RESP reply). */
void px_frag_reply(px_frag *f, const char *reply, size_t len, const ch_resp_reply *info);
/* A fragment cannot be served any more (its last candidate failed): answer with this error. */
void px_frag_error(px_frag *f, const char *msg);
/* A retryable multi-key fragment failed on its server: re-issue each key on its next candidate.
 * Returns true when it did (f is then consumed). */
bool px_frag_resplit(px_frag *f, size_t failed_server);

/* ---- reload.c -------------------------------------------------------------------------------- */

/* SIGHUP or POST /-/reload (trigger names which, for the log): re-reads m->conf_path and
 * applies it to every worker (docs/PROXY.md, "Reload"). When result is not NULL, appends one
 * line (no line end) to it: "reloaded: <pool>: <old> -> <new>, ..." or "unchanged" on success,
 * else why it failed (a config error as file:line:column: message). Control thread. */
enum { PX_RELOAD_OK = 0, PX_RELOAD_INVALID = 1 /* the file */, PX_RELOAD_FAILED = 2 /* else */ };
int px_reload(px_main *m, const char *trigger, px_buf *result);
/* Closes the retired servers whose in-flight fragments are done (called once per loop turn). */
void px_reload_reap(px_proxy *px);
/* Shutdown: closes every retired server. */
void px_reload_stop(px_proxy *px);

/* ---- stats.c --------------------------------------------------------------------------------- */

/* Every worker's counters added up (control thread, px_snapshot). Servers in membership order. */
typedef struct px_snap_server {
    px_server_stats st;
    uint64_t in_queue, in_queue_bytes, out_queue, out_queue_bytes;
} px_snap_server;
typedef struct px_snap_pool {
    px_pool_stats st;
    px_pool_metrics m;
    px_snap_server *servers; /* the shared pool's nservers */
} px_snap_pool;
typedef struct px_snap {
    px_snap_pool *pools; /* m->npools */
} px_snap;
/* Fills s with one job per worker. Returns 0, or -1 when out of memory. */
int px_snapshot(px_main *m, px_snap *s);
void px_snapshot_free(px_main *m, px_snap *s);
uint64_t px_clients(const px_main *m); /* client connections open now, all pools and workers */

int px_stats_start(px_main *m);
/* The stats JSON into b. */
int px_stats_json(px_main *m, px_buf *b);

/* ---- metrics.c ------------------------------------------------------------------------------- */

/* Starts the Prometheus endpoint when m->metrics_port is set (0 otherwise). */
int px_metrics_start(px_main *m);
/* Closes its listener and connections (shutdown). */
void px_metrics_stop(px_main *m);
/* Counts r, whose reply is complete, once: class, error or not, latency. */
void px_metrics_req_done(px_req *r);
/* The Prometheus text exposition into b. */
int px_metrics_text(px_main *m, px_buf *b);
/* The INFO reply's text (not yet a bulk) into b; runs on a worker: counts of clients are this
 * worker's and the whole proxy's. */
int px_metrics_info(px_proxy *px, px_buf *b);

#endif /* CHASH_PROXY_H */

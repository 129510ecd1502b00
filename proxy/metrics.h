/*
 * metrics.h — the counters behind the Prometheus endpoint (metrics.c) and the INFO reply:
 * requests, errors and a latency histogram per pool and command class. Included by proxy.h;
 * depends on nothing of it, so proxy.h's structures can embed these.
 *
 * Threading: a worker's counters are touched only from its thread; the endpoint (control
 * thread) reads their sums (px_snapshot, one job per worker).
 */
#ifndef CHASH_PROXY_METRICS_H
#define CHASH_PROXY_METRICS_H

#include <stdint.h>

/* The class of a request, from the command table (command.c). PX_CLASS_REFUSED is 0, so a
 * request never classified (unknown command, protocol error) is counted as refused. */
typedef enum px_cmd_class {
    PX_CLASS_REFUSED = 0, /* unsupported command, or a request that did not parse */
    PX_CLASS_READ,        /* single-key read, forwarded (retried on failover) */
    PX_CLASS_WRITE,       /* single-key write (or EVAL), forwarded */
    PX_CLASS_MULTI,       /* multi-key, split per server: MGET MSET DEL UNLINK TOUCH EXISTS */
    PX_CLASS_LOCAL,       /* answered by the proxy: PING ECHO QUIT SELECT COMMAND AUTH INFO */
    PX_NCLASSES
} px_cmd_class;

/* Upper bounds of the latency buckets, in seconds (the "le" labels); +Inf is implicit. */
#define PX_LAT_BOUNDS                                                                             \
    X(0.0001) X(0.00025) X(0.0005) X(0.001) X(0.0025) X(0.005) X(0.01) X(0.025) X(0.05) X(0.1)    \
    X(0.25) X(0.5) X(1)
#define PX_LAT_NBOUNDS 13

/* Per pool. A request is counted once, when its reply is complete (queued for its client, or
 * dropped because its client has gone), so requests[] summed over the classes equals the
 * histogram's count at every instant. */
typedef struct px_pool_metrics {
    uint64_t requests[PX_NCLASSES];
    uint64_t errors[PX_NCLASSES];          /* replies that are RESP errors (proxy's or backend's) */
    uint64_t lat_buckets[PX_LAT_NBOUNDS + 1]; /* not cumulative; the last is (1 s, +Inf) */
    uint64_t lat_sum_ns;
    uint64_t clients_accepted; /* client connections accepted since start */
} px_pool_metrics;

typedef struct px_metrics_server px_metrics_server; /* the HTTP listener and its connections */

#endif /* CHASH_PROXY_METRICS_H */

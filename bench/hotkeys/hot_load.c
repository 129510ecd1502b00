/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hot_load.c — the skewed GET load of bench/hotkeys/bench_hotkeys.py: C connections from one
 * thread, each keeping P GETs in flight, keys key:<i> over a keyspace of K drawn from
 *
 *   -m hot:F     key:0 with probability F (hot:0.3: 30% of the reads), else uniform over the
 *                keyspace;
 *   -m zipf:S    zipf with exponent S over ranks 1..K (key:<rank - 1>), by its inverse CDF;
 *   -m late:F    uniform for the first half of the run, then as hot:F (a key that turns hot).
 *
 * It runs for -d seconds, then prints one JSON line: requests, seconds, rps, the per-request
 * latency p50/p99 (microseconds, from the write of a request's batch to its reply), hits, misses,
 * errors, and the exact counts of the top -t keys it sent ("top": [[index, count], ...], largest
 * first). Replies are framed by the project's own RESP parser (ch_resp_scan_reply).
 *
 * usage: hot_load -p PORT [-h 127.0.0.1] [-c 50] [-P 1] [-d 10] [-m hot:F|late:F|zipf:S]
 *                 [-k 1000000]
 *                 [-t 100] [-s SEED]
 */
#define _POSIX_C_SOURCE 200809L
#define LOAD_PROG "hot_load"
#include "load_util.h"
#include "resp.h"

#include <fcntl.h>

typedef struct conn {
    int fd, want_out;
    char *wbuf, *rbuf;
    size_t wlen, woff, rlen, rcap;
    uint32_t inflight;
    double sent_at; /* when the batch in flight was written */
} conn;

static struct {
    const char *host;
    int port, conns, pipeline, top;
    double seconds, zipf_s, hot_share;
    bool hot, late; /* late: key:0 is hot only from the run's half on (hot_from) */
    uint32_t keys;
    uint64_t seed;
} opt = {"127.0.0.1", 0, 50, 1, 100, 10.0, 1.1, 0.3, true, false, 1000000, 1};

static bool hot_from_now; /* -m late: the second half has begun */

static double *cdf;      /* zipf: cumulative probability of ranks 1..keys */
static uint32_t *counts; /* per key index: GETs sent */
static uint32_t *lat;    /* per answered request: microseconds */
static size_t nlat, lat_cap;

static uint32_t draw(uint64_t *rng)
{
    double u = (double)(rng_next(rng) >> 11) * 0x1.0p-53;
    if (opt.hot) {
        if ((!opt.late || hot_from_now) && u < opt.hot_share)
            return 0;
        return (uint32_t)(rng_next(rng) % opt.keys);
    }
    return zipf_index(cdf, opt.keys, u);
}

/* Queues P GETs on c. */
static void fill(conn *c, uint64_t *rng)
{
    c->wlen = c->woff = 0;
    for (int i = 0; i < opt.pipeline; i++) {
        uint32_t k = draw(rng);
        counts[k]++;
        char key[32];
        int n = snprintf(key, sizeof key, "key:%u", k);
        char cmd[96];
        int m = snprintf(cmd, sizeof cmd, "*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", n, key);
        memcpy(c->wbuf + c->wlen, cmd, (size_t)m);
        c->wlen += (size_t)m;
    }
    c->inflight = (uint32_t)opt.pipeline;
    c->sent_at = now();
}

static int by_count(const void *a, const void *b)
{
    uint32_t x = counts[*(const uint32_t *)a], y = counts[*(const uint32_t *)b];
    return (x < y) - (x > y);
}

int main(int argc, char **argv)
{
    int o;
    while ((o = getopt(argc, argv, "h:p:c:P:d:m:k:t:s:")) != -1) {
        switch (o) {
        case 'h': opt.host = optarg; break;
        case 'p': opt.port = (int)parse_num(optarg, "-p", 1, 65535); break;
        case 'c': opt.conns = (int)parse_num(optarg, "-c", 1, 10000); break;
        case 'P': opt.pipeline = (int)parse_num(optarg, "-P", 1, 1000); break;
        case 'd': opt.seconds = parse_real(optarg, "-d", 0.1, 3600); break;
        case 'k': opt.keys = (uint32_t)parse_num(optarg, "-k", 1, 100000000); break;
        case 't': opt.top = (int)parse_num(optarg, "-t", 1, 100000); break;
        case 's': opt.seed = (uint64_t)parse_num(optarg, "-s", 0, 1L << 40); break;
        case 'm':
            if (strncmp(optarg, "hot:", 4) == 0) {
                opt.hot = true;
                opt.hot_share = parse_real(optarg + 4, "-m hot:F", 0, 1);
            } else if (strncmp(optarg, "late:", 5) == 0) {
                opt.hot = opt.late = true;
                opt.hot_share = parse_real(optarg + 5, "-m late:F", 0, 1);
            } else if (strncmp(optarg, "zipf:", 5) == 0) {
                opt.hot = false;
                opt.zipf_s = parse_real(optarg + 5, "-m zipf:S", 0.01, 10);
            } else {
                die("-m: hot:F, late:F or zipf:S, not %s", optarg);
            }
            break;
        default: die("usage: see the header of bench/hotkeys/hot_load.c");
        }
    }
    if (opt.port == 0)
        die("-p PORT is required");
    counts = calloc(opt.keys, sizeof(*counts));
    if (counts == NULL)
        die("out of memory");
    if (!opt.hot)
        cdf = zipf_cdf(opt.keys, opt.zipf_s);
    struct sockaddr_in sa = ipv4_addr(opt.host, opt.port);
    int epfd = epoll_create1(0);
    conn *cs = calloc((size_t)opt.conns, sizeof(*cs));
    if (epfd < 0 || cs == NULL)
        die("epoll or memory: %s", strerror(errno));
    uint64_t rng = rng_seed(opt.seed);
    for (int i = 0; i < opt.conns; i++) {
        conn *c = &cs[i];
        if ((c->fd = connect_tcp(&sa)) < 0)
            die("connect %s:%d: %s", opt.host, opt.port, strerror(errno));
        fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
        c->wbuf = xrealloc(NULL, (size_t)opt.pipeline * 96);
        c->rcap = 4096;
        c->rbuf = xrealloc(NULL, c->rcap);
        c->want_out = -1;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0)
            die("epoll_ctl: %s", strerror(errno));
        fill(c, &rng);
        int e = load_write(c->fd, c->wbuf, c->wlen, &c->woff);
        if (e != 0)
            die("write: %s", strerror(e));
        load_set_events(epfd, c->fd, &c->want_out, c, c->woff < c->wlen);
    }
    uint64_t requests = 0, hits = 0, misses = 0, errors = 0;
    double t0 = now(), end = t0 + opt.seconds;
    bool stopping = false;
    size_t open = (size_t)opt.conns;
    struct epoll_event evs[256];
    while (open > 0) {
        int n = epoll_wait(epfd, evs, 256, 1000);
        if (n < 0 && errno != EINTR)
            die("epoll_wait: %s", strerror(errno));
        double t = now();
        stopping = stopping || t >= end;
        hot_from_now = t >= t0 + opt.seconds / 2;
        for (int i = 0; i < n; i++) {
            conn *c = evs[i].data.ptr;
            if (evs[i].events & EPOLLOUT) {
                int e = load_write(c->fd, c->wbuf, c->wlen, &c->woff);
                if (e != 0)
                    die("write: %s", strerror(e));
            }
            if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                ssize_t r = load_read(c->fd, &c->rbuf, &c->rlen, &c->rcap);
                if (r == 0 || r == -2)
                    die("the proxy closed a connection (%s)", r == 0 ? "EOF" : strerror(errno));
            }
            size_t used = 0;
            while (c->inflight > 0) {
                ch_resp_limits lim;
                ch_resp_limits_init(&lim);
                ch_resp_reply rep;
                char err[128];
                size_t need = 0;
                ch_resp_status st = ch_resp_scan_reply(c->rbuf + used, c->rlen - used, &lim,
                                                       &rep, &need, err, sizeof err);
                if (st == CH_RESP_INCOMPLETE)
                    break;
                if (st != CH_RESP_OK)
                    die("a reply breaks the protocol: %s", err);
                used += rep.len;
                c->inflight--;
                requests++;
                if (rep.type == CH_RESP_ERROR)
                    errors++;
                else if (rep.type == CH_RESP_BULK && rep.integer < 0)
                    misses++;
                else
                    hits++;
                if (nlat == lat_cap) {
                    lat_cap = lat_cap ? lat_cap * 2 : 1 << 20;
                    lat = xrealloc(lat, lat_cap * sizeof(*lat));
                }
                lat[nlat++] = (uint32_t)((t - c->sent_at) * 1e6);
            }
            memmove(c->rbuf, c->rbuf + used, c->rlen - used);
            c->rlen -= used;
            if (c->inflight == 0) {
                if (stopping) {
                    if (c->fd >= 0) {
                        close(c->fd);
                        c->fd = -1;
                        open--;
                    }
                    continue;
                }
                fill(c, &rng);
                int e = load_write(c->fd, c->wbuf, c->wlen, &c->woff);
                if (e != 0)
                    die("write: %s", strerror(e));
            }
            if (c->fd >= 0)
                load_set_events(epfd, c->fd, &c->want_out, c, c->woff < c->wlen);
        }
    }
    double secs = now() - t0;
    qsort(lat, nlat, sizeof(*lat), cmp_u32);
    uint32_t *idx = xrealloc(NULL, opt.keys * sizeof(*idx));
    for (uint32_t i = 0; i < opt.keys; i++)
        idx[i] = i;
    qsort(idx, opt.keys, sizeof(*idx), by_count);
    printf("{\"requests\":%llu,\"seconds\":%.3f,\"rps\":%.0f,\"p50_us\":%u,\"p99_us\":%u,"
           "\"hits\":%llu,\"misses\":%llu,\"errors\":%llu,\"top\":[",
           (unsigned long long)requests, secs, (double)requests / secs,
           percentile_sorted(lat, nlat, 0.5), percentile_sorted(lat, nlat, 0.99),
           (unsigned long long)hits, (unsigned long long)misses, (unsigned long long)errors);
    for (int i = 0; i < opt.top && (uint32_t)i < opt.keys; i++)
        printf("%s[%u,%u]", i > 0 ? "," : "", idx[i], counts[idx[i]]);
    printf("]}\n");
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mc_load — a small memcached load generator for bench/proxy/bench_proxy.py.
 *
 * C connections (-c, default 50) to one memcached-speaking server (memcached itself, nutcracker
 * or chash-proxy), driven from one thread with epoll. Each connection sends a batch of P requests
 * (-P, default 1: unpipelined; -P 16: pipelined) in one write, waits for the P replies, then sends
 * the next batch, until -n requests have been sent or the time limit (-T) has passed. Commands
 * (-t), in the text protocol:
 *   get    "get key:<k>\r\n"
 *   set    "set key:<k> 0 0 <d>\r\n<d bytes>\r\n"          (-d, default 32 bytes)
 *   mget   "get key:<k1> .. key:<k10>\r\n"                  (-k keys, default 10)
 * or, with -b, in the binary protocol, as libmemcached (behind pylibmc, php-memcached) sends them:
 *   get    one GETK (0x0c) packet, answered by one response (status 0x01: a miss)
 *   set    one SET (0x01) packet: extras flags 0 and expiry 0, the key, the value
 *   mget   k GETKQ (0x0d) packets then a NOOP (0x0a): only hits are answered; the NOOP's
 *          response ends the request (the keys not answered before it are misses)
 * Keys are "key:<k>" with k drawn uniformly from [0, -r) (default 100,000) by a fixed-seed PRNG
 * (-S), or with -s in sequence 0, 1, 2, ... (to fill the key space once). A multiget counts as
 * ONE request (its keys are reported apart, as keys=).
 *
 * Text replies are framed by the project's own pure parser, ch_mc_scan_reply (proxy/proto/mc.h);
 * no second parser here. Binary responses are framed by their 24-byte header alone (magic 0x81,
 * an opcode the request sent, the total body length: frame_binary). A SERVER_ERROR / CLIENT_ERROR
 * / ERROR reply, or a binary status other than 0 (and 0x01, a get's miss), is counted in errors=
 * and the run goes on. A reply that breaks the protocol, a connection closed by the server, or no
 * progress for 10 s is fatal: a message on stderr and exit status 1. Every wait is bounded.
 *
 * Output: one machine-readable line on stdout, key=value pairs separated by spaces:
 *   mc_load cmd=get proto=text pipeline=1 conns=50 requests=60000 keys=60000 seconds=1.234
 *     rps=48622 p50_us=812 p99_us=2140 errors=0 hits=60000 misses=0
 * (one line; proto=binary with -b). Latency is per batch round-trip: from the batch's write to its
 * last reply, in microseconds, exact percentiles (every batch's latency kept and sorted). rps is
 * requests completed / seconds from the first batch sent to the last reply. hits/misses count
 * keys of get/mget (values returned, and keys not returned; a key answered by an error is
 * neither).
 *
 * usage: mc_load [-h host] [-p port] [-c conns] [-P pipeline] [-n requests] [-t get|set|mget]
 *                [-d value_bytes] [-r keyspace] [-k mget_keys] [-T seconds] [-S seed] [-s] [-b]
 */
#define _POSIX_C_SOURCE 200809L
#define LOAD_PROG "mc_load"

#include "load_util.h"
#include "mc.h"

#include <fcntl.h>
#include <inttypes.h>
#include <sys/epoll.h>

enum { CMD_GET, CMD_SET, CMD_MGET };

enum { STALL_SECONDS = 10, MAX_CONNS = 10000, MAX_PIPELINE = 4096, MAX_MGET_KEYS = 100 };

/* The binary protocol's constants this program uses (memcached's protocol_binary.h). */
enum {
    BIN_HEADER = 24,
    BIN_MAGIC_REQ = 0x80,
    BIN_MAGIC_RES = 0x81,
    BIN_OP_SET = 0x01,
    BIN_OP_NOOP = 0x0a,
    BIN_OP_GETK = 0x0c,
    BIN_OP_GETKQ = 0x0d,
    BIN_OK = 0x00,
    BIN_ENOENT = 0x01,
    BIN_MAX_BODY = 16 << 20, /* a larger body is a broken frame, not a value of -d <= 1e6 */
};

typedef struct conn {
    int fd;
    char *wbuf;   /* the batch being written */
    size_t wlen, woff;
    char *rbuf;   /* replies read, from rpos on not yet framed */
    size_t rlen, rpos, rcap, need;
    unsigned expect, got; /* replies of the current batch: expected, framed */
    long long khits, kfailed; /* the answering request's keys: returned, answered by errors */
    double t0;            /* when the batch was sent */
    int busy, want_out;
} conn;

static struct {
    const char *host;
    int port, conns, pipeline, cmd, mget_keys;
    long long requests;
    long keyspace, value_bytes;
    double time_limit;
    uint64_t seed;
    int sequential, binary;
} opt = {"127.0.0.1", 11211, 50, 1, CMD_GET, 10, 100000, 100000, 32, 60.0, 1, 0, 0};

static uint64_t rng_state;
static long long next_seq;
static char *value; /* value_bytes of 'x' */

/* xorshift64*, fixed seed (load_util.h). */
static uint64_t rng(void)
{
    return rng_next(&rng_state);
}

static long next_key(void)
{
    if (opt.sequential)
        return (long)(next_seq++ % opt.keyspace);
    return (long)(rng() % (uint64_t)opt.keyspace);
}

static void usage(void)
{
    fprintf(stderr, "usage: mc_load [-h host] [-p port] [-c conns] [-P pipeline] [-n requests]\n"
                    "               [-t get|set|mget] [-d value_bytes] [-r keyspace] [-k mget_keys]\n"
                    "               [-T seconds] [-S seed] [-s] [-b]\n");
    exit(2);
}

static void parse_args(int argc, char **argv)
{
    int c;
    while ((c = getopt(argc, argv, "h:p:c:P:n:t:d:r:k:T:S:sb")) != -1) {
        switch (c) {
        case 'h': opt.host = optarg; break;
        case 'p': opt.port = (int)parse_num(optarg, "-p", 1, 65535); break;
        case 'c': opt.conns = (int)parse_num(optarg, "-c", 1, MAX_CONNS); break;
        case 'P': opt.pipeline = (int)parse_num(optarg, "-P", 1, MAX_PIPELINE); break;
        case 'n': opt.requests = parse_num(optarg, "-n", 1, 1000000000L); break;
        case 'd': opt.value_bytes = parse_num(optarg, "-d", 0, 1000000L); break;
        case 'r': opt.keyspace = parse_num(optarg, "-r", 1, 1000000000L); break;
        case 'k': opt.mget_keys = (int)parse_num(optarg, "-k", 1, MAX_MGET_KEYS); break;
        case 'S': opt.seed = (uint64_t)parse_num(optarg, "-S", 0, 0x7fffffffL); break;
        case 's': opt.sequential = 1; break;
        case 'b': opt.binary = 1; break;
        case 'T': {
            char *end;
            opt.time_limit = strtod(optarg, &end);
            if (end == optarg || *end || !(opt.time_limit > 0 && opt.time_limit <= 3600))
                die("-T: %s is not a number of seconds in (0, 3600]", optarg);
            break;
        }
        case 't':
            if (!strcmp(optarg, "get"))
                opt.cmd = CMD_GET;
            else if (!strcmp(optarg, "set"))
                opt.cmd = CMD_SET;
            else if (!strcmp(optarg, "mget"))
                opt.cmd = CMD_MGET;
            else
                die("-t: %s is not get, set or mget", optarg);
            break;
        default: usage();
        }
    }
    if (optind != argc)
        usage();
}

static const char *cmd_name(void)
{
    return opt.cmd == CMD_GET ? "get" : opt.cmd == CMD_SET ? "set" : "mget";
}

/* Writes one text request at dst (room is ensured by the caller's sizing); returns its length. */
static size_t put_text(char *dst)
{
    size_t n = 0;
    switch (opt.cmd) {
    case CMD_GET: n = (size_t)sprintf(dst, "get key:%ld\r\n", next_key()); break;
    case CMD_SET:
        n = (size_t)sprintf(dst, "set key:%ld 0 0 %ld\r\n", next_key(), opt.value_bytes);
        memcpy(dst + n, value, (size_t)opt.value_bytes);
        n += (size_t)opt.value_bytes;
        memcpy(dst + n, "\r\n", 2);
        n += 2;
        break;
    case CMD_MGET:
        memcpy(dst, "get", 3);
        n = 3;
        for (int i = 0; i < opt.mget_keys; i++)
            n += (size_t)sprintf(dst + n, " key:%ld", next_key());
        memcpy(dst + n, "\r\n", 2);
        n += 2;
        break;
    }
    return n;
}

static void put_be32(char *p, uint32_t v)
{
    for (int i = 3; i >= 0; i--, v >>= 8)
        p[i] = (char)(v & 0xff);
}

/* Writes one binary request packet at dst: the header, extras_len bytes of extras (all zero: a
 * set's flags and expiry), the next key, then val_len bytes of the value (the 'x's); returns the
 * packet's length. Opaque and CAS are 0: responses come back in order, framed by position. */
static size_t put_bin_packet(char *dst, uint8_t opcode, size_t extras_len, size_t val_len)
{
    char *key = dst + BIN_HEADER + extras_len;
    size_t klen = (size_t)sprintf(key, "key:%ld", next_key());
    memset(dst, 0, BIN_HEADER + extras_len);
    dst[0] = (char)BIN_MAGIC_REQ;
    dst[1] = (char)opcode;
    dst[2] = (char)(klen >> 8);
    dst[3] = (char)klen;
    dst[4] = (char)extras_len;
    put_be32(dst + 8, (uint32_t)(extras_len + klen + val_len));
    memcpy(key + klen, value, val_len);
    return BIN_HEADER + extras_len + klen + val_len;
}

/* Writes one binary request at dst (room is ensured by the caller's sizing); returns its length.
 * A multiget is its keys' GETKQ packets and the NOOP that ends it. */
static size_t put_binary(char *dst)
{
    size_t n = 0;
    switch (opt.cmd) {
    case CMD_GET: n = put_bin_packet(dst, BIN_OP_GETK, 0, 0); break;
    case CMD_SET: n = put_bin_packet(dst, BIN_OP_SET, 8, (size_t)opt.value_bytes); break;
    case CMD_MGET:
        for (int i = 0; i < opt.mget_keys; i++)
            n += put_bin_packet(dst + n, BIN_OP_GETKQ, 0, 0);
        memset(dst + n, 0, BIN_HEADER);
        dst[n] = (char)BIN_MAGIC_REQ;
        dst[n + 1] = (char)BIN_OP_NOOP;
        n += BIN_HEADER;
        break;
    }
    return n;
}

static size_t put_request(char *dst)
{
    return opt.binary ? put_binary(dst) : put_text(dst);
}

/* The longest request put_request writes: "key:" + up to 10 digits (keyspace <= 1e9), so a key
 * is at most 14 bytes. */
static size_t request_max(void)
{
    if (opt.binary) {
        switch (opt.cmd) {
        case CMD_GET: return BIN_HEADER + 16;
        case CMD_SET: return BIN_HEADER + 8 + 16 + (size_t)opt.value_bytes;
        default: return (size_t)(opt.mget_keys + 1) * (BIN_HEADER + 16);
        }
    }
    switch (opt.cmd) {
    case CMD_GET: return 32;
    case CMD_SET: return 64 + (size_t)opt.value_bytes;
    default: return 8 + (size_t)opt.mget_keys * 16;
    }
}

static int epfd;
static long long sent, done, errors, hits, misses, keys_done;
static uint32_t *lat; /* µs per batch */
static size_t nlat, caplat;
static double t_first, t_last, t_progress, deadline;

static void flush_out(conn *c)
{
    int err = load_write(c->fd, c->wbuf, c->wlen, &c->woff);
    if (err != 0)
        die("write to %s:%d: %s", opt.host, opt.port, strerror(err));
    load_set_events(epfd, c->fd, &c->want_out, c, c->woff < c->wlen);
}

/* Starts the next batch on c when there is one to send; returns whether it did. */
static int start_batch(conn *c, double t)
{
    if (sent >= opt.requests || t >= deadline)
        return 0;
    long long left = opt.requests - sent;
    unsigned p = left < opt.pipeline ? (unsigned)left : (unsigned)opt.pipeline;
    c->wlen = 0;
    for (unsigned i = 0; i < p; i++)
        c->wlen += put_request(c->wbuf + c->wlen);
    c->woff = 0;
    c->expect = p;
    c->got = 0;
    c->busy = 1;
    c->t0 = t;
    sent += p;
    if (t_first == 0)
        t_first = t;
    flush_out(c);
    return 1;
}

static void batch_done(conn *c, double t)
{
    double us = (t - c->t0) * 1e6;
    if (nlat == caplat) {
        caplat = caplat ? caplat * 2 : 4096;
        lat = xrealloc(lat, caplat * sizeof *lat);
    }
    lat[nlat++] = us < 0 ? 0 : us > 4e9 ? 4000000000u : (uint32_t)(us + 0.5);
    c->busy = 0;
    t_last = t;
}

/* One reply framed: its bytes, whether it ends a request, what it says of the request's keys. */
typedef struct framed {
    size_t len;
    int ends;        /* every text reply; a binary response but an mget's GETKQ hits */
    int error;       /* an error reply (counted in errors=) */
    long long hits;  /* keys it returned */
    long long failed; /* keys it answered with an error */
} framed;

/* Frames the text reply at p[0..n): 1 and *f, 0 and *need (bytes from p) when incomplete. A reply
 * that breaks the protocol is fatal. */
static int frame_text(const char *p, size_t n, framed *f, size_t *need)
{
    const ch_mc_cmd mc = opt.cmd == CMD_SET ? CH_MC_CMD_SET : CH_MC_CMD_GET;
    ch_mc_reply r;
    char err[128];
    ch_mc_status st = ch_mc_scan_reply(p, n, mc, NULL, &r, need, err, sizeof err);
    if (st == CH_MC_INCOMPLETE)
        return 0;
    if (st != CH_MC_OK)
        die("a reply from %s:%d breaks the protocol: %s", opt.host, opt.port, err);
    long long k = opt.cmd == CMD_MGET ? opt.mget_keys : 1;
    *f = (framed){.len = r.len, .ends = 1, .error = r.cls == CH_MC_C_ERROR};
    if (f->error)
        f->failed = k;
    else if (opt.cmd != CMD_SET && r.code == CH_MC_R_VALUES)
        f->hits = (long long)r.integer;
    return 1;
}

/* Frames the binary response at p[0..n) by its header: magic 0x81, an opcode the request sent,
 * then 24 + total body length bytes. 1 and *f, 0 and *need when incomplete; a response that is
 * not one is fatal. Its status: 0 a hit (or a stored set), 0x01 a get's miss, any other an
 * error. */
static int frame_binary(const char *p, size_t n, framed *f, size_t *need)
{
    if (n < BIN_HEADER) {
        *need = BIN_HEADER;
        return 0;
    }
    const unsigned char *h = (const unsigned char *)p;
    uint32_t body = (uint32_t)h[8] << 24 | (uint32_t)h[9] << 16 | (uint32_t)h[10] << 8 | h[11];
    unsigned status = (unsigned)h[6] << 8 | h[7];
    uint8_t op = h[1];
    int op_ok = opt.cmd == CMD_GET   ? op == BIN_OP_GETK
                : opt.cmd == CMD_SET ? op == BIN_OP_SET
                                     : op == BIN_OP_GETKQ || op == BIN_OP_NOOP;
    if (h[0] != BIN_MAGIC_RES || !op_ok || body > BIN_MAX_BODY)
        die("a reply from %s:%d breaks the protocol: magic 0x%02x opcode 0x%02x body %" PRIu32
            " is not a response to a %s", opt.host, opt.port, h[0], op, body, cmd_name());
    if (n < BIN_HEADER + (size_t)body) {
        *need = BIN_HEADER + (size_t)body;
        return 0;
    }
    int miss = status == BIN_ENOENT && opt.cmd != CMD_SET;
    *f = (framed){.len = BIN_HEADER + (size_t)body, .ends = op != BIN_OP_GETKQ,
                  .error = status != BIN_OK && !miss};
    if (f->error)
        f->failed = op == BIN_OP_NOOP ? 0 : 1;
    else if (opt.cmd != CMD_SET && status == BIN_OK && op != BIN_OP_NOOP)
        f->hits = 1;
    return 1;
}

/* The request c->got of c's batch answered in full: counted, and the next batch started when
 * this one is done. */
static void request_done(conn *c, double t)
{
    c->got++;
    done++;
    if (opt.cmd != CMD_SET) {
        long long k = opt.cmd == CMD_MGET ? opt.mget_keys : 1;
        hits += c->khits;
        misses += k - c->khits - c->kfailed;
    }
    c->khits = c->kfailed = 0;
    keys_done += opt.cmd == CMD_MGET ? opt.mget_keys : 1;
    if (c->got == c->expect) {
        batch_done(c, t);
        if (c->rpos < c->rlen)
            die("%zu bytes from %s:%d that answer no request", c->rlen - c->rpos, opt.host,
                opt.port);
        start_batch(c, t);
    }
}

/* Frames the replies in c->rbuf[rpos..rlen). */
static void frame_replies(conn *c, double t)
{
    while (c->rpos < c->rlen) {
        if (!c->busy || c->got >= c->expect)
            die("%zu bytes from %s:%d that answer no request", c->rlen - c->rpos, opt.host,
                opt.port);
        if (c->need > c->rlen)
            return;
        framed f = {0};
        size_t need = 0;
        const char *p = c->rbuf + c->rpos;
        size_t n = c->rlen - c->rpos;
        if (!(opt.binary ? frame_binary(p, n, &f, &need) : frame_text(p, n, &f, &need))) {
            c->need = c->rpos + need; /* in rbuf offsets, until the compaction below */
            break;
        }
        c->rpos += f.len;
        c->need = 0;
        errors += f.error;
        c->khits += f.hits;
        c->kfailed += f.failed;
        if (f.ends)
            request_done(c, t);
    }
    /* Keep the unframed tail at the start of the buffer, with room for what it needs. */
    if (c->rpos > 0) {
        memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
        c->rlen -= c->rpos;
        if (c->need)
            c->need -= c->rpos;
        c->rpos = 0;
    }
    if (c->need > c->rcap) {
        c->rcap = c->need + 4096;
        c->rbuf = xrealloc(c->rbuf, c->rcap);
    }
}

static void on_readable(conn *c, double t)
{
    for (;;) {
        ssize_t n = load_read(c->fd, &c->rbuf, &c->rlen, &c->rcap);
        if (n == -1)
            return;
        if (n == -2)
            die("read from %s:%d: %s", opt.host, opt.port, strerror(errno));
        if (n == 0)
            die("%s:%d closed a connection (%lld requests answered)", opt.host, opt.port, done);
        t_progress = t;
        frame_replies(c, t);
        if ((size_t)n < c->rcap - c->rlen)
            return; /* the socket is drained for now (level-triggered: more wakes us) */
    }
}

static int connect_one(const struct sockaddr_in *sa)
{
    int fd = connect_tcp(sa);
    if (fd < 0)
        die("connect to %s:%d: %s", opt.host, opt.port, strerror(errno));
    return fd;
}

static uint32_t percentile(double q)
{
    return percentile_sorted(lat, nlat, q);
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    rng_state = rng_seed(opt.seed);
    value = xrealloc(NULL, (size_t)opt.value_bytes);
    memset(value, 'x', (size_t)opt.value_bytes);

    struct sockaddr_in sa = ipv4_addr(opt.host, opt.port);

    epfd = epoll_create1(0);
    if (epfd < 0)
        die("epoll_create1: %s", strerror(errno));
    conn *cs = calloc((size_t)opt.conns, sizeof *cs);
    if (!cs)
        die("out of memory");
    const size_t wcap = request_max() * (size_t)opt.pipeline;
    for (int i = 0; i < opt.conns; i++) {
        conn *c = &cs[i];
        c->fd = connect_one(&sa);
        c->wbuf = xrealloc(NULL, wcap);
        c->rcap = 16384;
        c->rbuf = xrealloc(NULL, c->rcap);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0)
            die("epoll_ctl: %s", strerror(errno));
        int fl = fcntl(c->fd, F_GETFL);
        if (fl < 0 || fcntl(c->fd, F_SETFL, fl | O_NONBLOCK) < 0)
            die("O_NONBLOCK: %s", strerror(errno));
    }

    double t = now();
    deadline = t + opt.time_limit;
    t_progress = t;
    for (int i = 0; i < opt.conns; i++)
        start_batch(&cs[i], t);

    struct epoll_event evs[256];
    for (;;) {
        int busy = 0;
        for (int i = 0; i < opt.conns && !busy; i++)
            busy = cs[i].busy;
        if (!busy)
            break;
        int n = epoll_wait(epfd, evs, 256, 100);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_wait: %s", strerror(errno));
        }
        t = now();
        for (int i = 0; i < n; i++) {
            conn *c = evs[i].data.ptr;
            if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                on_readable(c, t);
            if ((evs[i].events & EPOLLOUT) && c->woff < c->wlen)
                flush_out(c);
        }
        if (t - t_progress > STALL_SECONDS)
            die("no reply from %s:%d for %d s (%lld of %lld requests answered)", opt.host,
                opt.port, STALL_SECONDS, done, sent);
    }

    qsort(lat, nlat, sizeof *lat, cmp_u32);
    double secs = t_last > t_first ? t_last - t_first : 0;
    printf("mc_load cmd=%s proto=%s pipeline=%d conns=%d requests=%lld keys=%lld seconds=%.3f "
           "rps=%.0f p50_us=%u p99_us=%u errors=%lld hits=%lld misses=%lld\n",
           cmd_name(), opt.binary ? "binary" : "text", opt.pipeline, opt.conns, done, keys_done,
           secs, secs > 0 ? (double)done / secs : 0.0, percentile(0.50), percentile(0.99), errors,
           hits, misses);
    for (int i = 0; i < opt.conns; i++) {
        close(cs[i].fd);
        free(cs[i].wbuf);
        free(cs[i].rbuf);
    }
    free(cs);
    free(lat);
    free(value);
    close(epfd);
    return 0;
}

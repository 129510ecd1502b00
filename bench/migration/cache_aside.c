/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache_aside — the cache-aside load driver of bench/migration/bench_migration.py (issue 13).
 *
 * A service that reads through a cache: every read is a GET; a miss is one "database read"
 * (counted, not performed: the database is this process's table of versions) followed by a SET of
 * the key with the database's value and a TTL (-e). A share -w of the operations are writes: the
 * database version of the key goes up by one, then the cache is updated, by -W del (the default,
 * cache-aside's "delete on write": the next read misses and refills) or -W set (write-through:
 * SET of the new value). Values are "v<10-digit version>:" padded with 'x' to -d bytes, so a read
 * that returns a value older than the key's last acknowledged write is detected and counted in
 * stale=. Operations on one key never overlap (a key in flight is not picked again until its
 * operation is done), so the driver's own races cannot make a read stale: a stale read is the
 * proxy's (or the servers') doing, unless a refill or a write of that key was lost before (no
 * reply: the cache may hold an older value, the lost operation's doing): those are counted
 * apart, in stale_lost=.
 *
 * Keys "ca:<k>", k uniform in [0, -r) (default 200,000) from a fixed-seed PRNG (-S). Uniform on
 * purpose: it is the issue's scenario (the time a moved key waits for its first read is
 * exponential with mean K / R), and every key is equally likely to be among the moved ones.
 * Operations are started at -R reads per second (plus the writes' share on top: one operation
 * every (1 - w) / R s) on -c connections (default 20), one operation in flight per connection;
 * an operation whose time has come while every connection is busy waits, and when the backlog
 * exceeds 0.5 s the overdue operations are dropped and counted in late= (the driver could not
 * keep the rate: the box or the server is saturated).
 *
 * Protocols (-P): redis (RESP: GET, SET k v EX ttl, DEL) or memcache (text: get, set k 0 ttl n,
 * delete). Replies are framed by the project's own pure parsers (ch_resp_scan_reply, proxy/proto/
 * resp.h; ch_mc_scan_reply, proxy/proto/mc.h). An error reply counts in errors= (a read) or
 * write_errors= (a fill or a write); so does an operation whose connection is closed or that has
 * no reply after -o ms (default 2000): the connection is then closed and opened again (those
 * are also counted in closed= and timeouts=). The first 8 errors are described on stderr. A
 * reply that breaks the protocol is fatal, as is having no connection for 10 s.
 *
 * -m FILE: key indices (one per line) of the keys a membership change moves (bench_migration.py
 * writes them from `chash plan --key-file`): their reads and misses are also counted apart
 * (moved_reads=, moved_misses=). SIGUSR1 starts a new phase (the orchestrator sends it when it
 * reloads the proxy, and when the warm-up window ends): the JSON summary has the counts and exact
 * p50/p99 of every phase. SIGUSR2 ends the run early, as the time limit does (no new operation,
 * the ones in flight finish, then the last line and the summary).
 *
 * -F: fill mode: SET every key 0 .. r-1 once (version -V, TTL -e), as fast as -c connections go,
 * then the summary and exit; the cache then holds exactly what the database does.
 *
 * -V N: the database's version of every key at the start (default 0). A run with -V 1 over a
 * cache filled with -V 0 finds every hit stale: the check of the stale counter itself.
 *
 * Output, stdout, line-buffered:
 *   cache_aside start proto=redis keys=200000 rate=10000 conns=20 ... t0_mono=12345.678901
 *   cache_aside sec=1 reads=9981 hits=9890 misses=91 errors=0 stale=0 writes=101
 *     write_errors=0 moved_reads=0 moved_misses=0 late=0 timeouts=0 closed=0 p50_us=180
 *     p99_us=610   (one line)
 *   cache_aside phase=1 t=20.003
 *   {"proto": "redis", ..., "totals": {...}, "phases": [...], "per_second": [...]}
 * reads = hits + misses + errors always; misses = database reads. Latency is the GET's round
 * trip in microseconds (the read as the service sees it; a miss's refill is not in it), exact
 * percentiles per second and per phase. t0_mono is CLOCK_MONOTONIC at the start, the clock of
 * Python's time.monotonic(): sec=N covers [t0 + N - 1, t0 + N).
 *
 * usage: cache_aside [-h host] [-p port] [-P redis|memcache] [-c conns] [-r keys] [-R reads/s]
 *                    [-T seconds] [-w write_share] [-W del|set] [-e ttl_s] [-d value_bytes]
 *                    [-o op_timeout_ms] [-m moved_file] [-S seed] [-V version] [-F]
 */
#define _POSIX_C_SOURCE 200809L
#define LOAD_PROG "cache_aside"

#include "load_util.h"
#include "mc.h"
#include "resp.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>

enum { PROTO_REDIS, PROTO_MC };
enum { OP_NONE, OP_READ, OP_FILL, OP_WRITE };
enum { WRITE_DEL, WRITE_SET };
/* KEY_LOST: a refill or a write of the key was lost (no reply, or its connection closed): the
 * cache may hold an older version with nobody at fault but the lost operation. */
enum { KEY_BUSY = 1, KEY_MOVED = 2, KEY_LOST = 4 };
enum { NO_CONN_SECONDS = 10, MAX_CONNS = 1000, MAX_PHASES = 16, KEY_TRIES = 16, MAX_NOTES = 8 };
enum { R_HIT, R_MISS, R_DONE, R_ERR };

typedef struct counts {
    long long reads, hits, misses, errors, stale, writes, write_errors, moved_reads, moved_misses,
        late, timeouts, closed, stale_lost;
} counts;

typedef struct conn {
    int fd; /* -1 while down */
    char *wbuf;
    size_t wlen, woff, wcap;
    char *rbuf;
    size_t rlen, rcap;
    int op;           /* OP_*: the operation in flight, OP_NONE when free */
    long key;
    uint32_t version; /* OP_FILL, OP_WRITE: the version written */
    double t0;        /* when the current request was sent */
    int want_out;
} conn;

static struct {
    const char *host;
    int port, proto, conns, write_mode, fill;
    long keyspace, value_bytes, ttl, op_timeout_ms;
    double rate, seconds, write_share;
    const char *moved_file;
    uint64_t seed;
    uint32_t base_version;
} opt = {"127.0.0.1", 6379, PROTO_REDIS, 20, WRITE_DEL, 0, 200000, 32, 3600, 2000,
         10000, 60, 0.01, NULL, 1, 0};

static uint32_t *version; /* the "database": each key's current version */
static uint8_t *kflags;   /* KEY_BUSY, KEY_MOVED */
static uint64_t rng_state;
static conn *cs;
static int epfd;
static struct sockaddr_in addr;

static counts sec_c, tot_c, phase_c[MAX_PHASES];
static double phase_t[MAX_PHASES];
static size_t phase_lat0[MAX_PHASES]; /* index into lat of each phase's first latency */
static int nphases = 1;
static uint32_t *lat; /* every read latency of the run, µs, in completion order */
static size_t nlat, caplat, sec_lat0;
static volatile sig_atomic_t phase_requests, stop_requested;

/* JSON of the per-second lines, kept for the summary. */
static char *persec;
static size_t persec_len, persec_cap;

#define BUMP(field) (sec_c.field++, tot_c.field++, phase_c[nphases - 1].field++)

static void usage(void)
{
    fprintf(stderr,
            "usage: cache_aside [-h host] [-p port] [-P redis|memcache] [-c conns] [-r keys]\n"
            "                   [-R reads/s] [-T seconds] [-w write_share] [-W del|set]\n"
            "                   [-e ttl_s] [-d value_bytes] [-o op_timeout_ms] [-m moved_file]\n"
            "                   [-S seed] [-V version] [-F]\n");
    exit(2);
}

static void parse_args(int argc, char **argv)
{
    int c;
    while ((c = getopt(argc, argv, "h:p:P:c:r:R:T:w:W:e:d:o:m:S:V:F")) != -1) {
        switch (c) {
        case 'h': opt.host = optarg; break;
        case 'p': opt.port = (int)parse_num(optarg, "-p", 1, 65535); break;
        case 'P':
            if (!strcmp(optarg, "redis"))
                opt.proto = PROTO_REDIS;
            else if (!strcmp(optarg, "memcache"))
                opt.proto = PROTO_MC;
            else
                die("-P: %s is not redis or memcache", optarg);
            break;
        case 'c': opt.conns = (int)parse_num(optarg, "-c", 1, MAX_CONNS); break;
        case 'r': opt.keyspace = parse_num(optarg, "-r", 1, 100000000L); break;
        case 'R': opt.rate = parse_real(optarg, "-R", 1, 1e7); break;
        case 'T': opt.seconds = parse_real(optarg, "-T", 1, 3600); break;
        case 'w': opt.write_share = parse_real(optarg, "-w", 0, 0.5); break;
        case 'W':
            if (!strcmp(optarg, "del"))
                opt.write_mode = WRITE_DEL;
            else if (!strcmp(optarg, "set"))
                opt.write_mode = WRITE_SET;
            else
                die("-W: %s is not del or set", optarg);
            break;
        case 'e': opt.ttl = parse_num(optarg, "-e", 1, 30L * 86400); break;
        case 'd': opt.value_bytes = parse_num(optarg, "-d", 12, 100000L); break;
        case 'o': opt.op_timeout_ms = parse_num(optarg, "-o", 10, 600000L); break;
        case 'm': opt.moved_file = optarg; break;
        case 'S': opt.seed = (uint64_t)parse_num(optarg, "-S", 0, 0x7fffffffL); break;
        case 'V': opt.base_version = (uint32_t)parse_num(optarg, "-V", 0, 1000000000L); break;
        case 'F': opt.fill = 1; break;
        default: usage();
        }
    }
    if (optind != argc)
        usage();
}

static void load_moved(void)
{
    FILE *f = fopen(opt.moved_file, "r");
    if (!f)
        die("-m %s: %s", opt.moved_file, strerror(errno));
    char line[64];
    long n = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0])
            continue;
        long k = parse_num(line, "-m line", 0, opt.keyspace - 1);
        kflags[k] |= KEY_MOVED;
        n++;
    }
    fclose(f);
    (void)n;
}

/* ---- requests ------------------------------------------------------------------------------ */

static void wreserve(conn *c, size_t n)
{
    if (c->wcap < n) {
        c->wcap = n + 256;
        c->wbuf = xrealloc(c->wbuf, c->wcap);
    }
}

static void put_get(conn *c, long k)
{
    wreserve(c, 64);
    if (opt.proto == PROTO_REDIS) {
        char key[32];
        int kl = snprintf(key, sizeof key, "ca:%ld", k);
        c->wlen = (size_t)snprintf(c->wbuf, c->wcap, "*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", kl, key);
    } else {
        c->wlen = (size_t)snprintf(c->wbuf, c->wcap, "get ca:%ld\r\n", k);
    }
}

static void put_del(conn *c, long k)
{
    wreserve(c, 64);
    if (opt.proto == PROTO_REDIS) {
        char key[32];
        int kl = snprintf(key, sizeof key, "ca:%ld", k);
        c->wlen = (size_t)snprintf(c->wbuf, c->wcap, "*2\r\n$3\r\nDEL\r\n$%d\r\n%s\r\n", kl, key);
    } else {
        c->wlen = (size_t)snprintf(c->wbuf, c->wcap, "delete ca:%ld\r\n", k);
    }
}

/* The value of version v: "v%010u:" then 'x' up to value_bytes. */
static void put_value(char *dst, uint32_t v)
{
    char head[16];
    snprintf(head, sizeof head, "v%010u:", v);
    memcpy(dst, head, 12);
    memset(dst + 12, 'x', (size_t)opt.value_bytes - 12);
}

static void put_set(conn *c, long k, uint32_t v)
{
    size_t d = (size_t)opt.value_bytes;
    wreserve(c, 128 + d);
    char key[32], ttl[24];
    int kl = snprintf(key, sizeof key, "ca:%ld", k);
    int tl = snprintf(ttl, sizeof ttl, "%ld", opt.ttl);
    size_t n;
    if (opt.proto == PROTO_REDIS)
        n = (size_t)snprintf(c->wbuf, c->wcap, "*5\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%zu\r\n", kl, key,
                             d);
    else
        n = (size_t)snprintf(c->wbuf, c->wcap, "set %s 0 %s %zu\r\n", key, ttl, d);
    put_value(c->wbuf + n, v);
    n += d;
    memcpy(c->wbuf + n, "\r\n", 2);
    n += 2;
    if (opt.proto == PROTO_REDIS)
        n += (size_t)snprintf(c->wbuf + n, c->wcap - n, "$2\r\nEX\r\n$%d\r\n%s\r\n", tl, ttl);
    c->wlen = n;
}

/* The version in a value, or -1 when it is not one of ours. */
static long long value_version(const char *p, size_t n)
{
    if (n < 12 || p[0] != 'v' || p[11] != ':')
        return -1;
    long long v = 0;
    for (int i = 1; i < 11; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

/* ---- connections --------------------------------------------------------------------------- */

static int conn_open(conn *c)
{
    int fd = connect_tcp(&addr);
    if (fd < 0)
        return -1;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        die("O_NONBLOCK: %s", strerror(errno));
    c->fd = fd;
    c->rlen = 0;
    c->op = OP_NONE;
    c->want_out = 0;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
        die("epoll_ctl: %s", strerror(errno));
    return 0;
}

static void op_done(conn *c)
{
    kflags[c->key] &= (uint8_t)~KEY_BUSY;
    c->op = OP_NONE;
}

static int notes; /* error notes written to stderr so far */

/* The first few errors, on stderr: what they were, for whoever reads the run. */
static void note(const conn *c, const char *what, const char *text, size_t len)
{
    if (notes >= MAX_NOTES)
        return;
    notes++;
    static const char *const ops[] = {"-", "GET", "refill SET", "write"};
    fprintf(stderr, "cache_aside: %s of a %s of ca:%ld after %.0f ms: %.*s%s\n", what,
            ops[c->op], c->key, (now() - c->t0) * 1000, (int)(len > 200 ? 200 : len), text,
            notes == MAX_NOTES ? " (no more notes)" : "");
}

/* The operation in flight on c failed without a reply (closed or reset by the server: timeout
 * 0; no reply within -o: timeout 1): counted as an error of its kind (and in closed= or
 * timeouts=); the connection is closed, to be opened again at the next tick. */
static void conn_lost(conn *c, int timeout, int err)
{
    if (timeout)
        BUMP(timeouts);
    else
        BUMP(closed);
    const char *why = timeout ? "no reply" : err ? strerror(err) : "closed by the server";
    if (c->op != OP_NONE)
        note(c, "lost", why, strlen(why));
    if (c->op == OP_FILL || c->op == OP_WRITE)
        kflags[c->key] |= KEY_LOST;
    if (c->op == OP_READ) {
        BUMP(reads);
        BUMP(errors);
        if (kflags[c->key] & KEY_MOVED)
            BUMP(moved_reads);
    } else if (c->op != OP_NONE) {
        BUMP(write_errors);
    }
    if (c->op != OP_NONE)
        op_done(c);
    close(c->fd);
    c->fd = -1;
    c->rlen = 0;
}

static void flush_out(conn *c)
{
    int err = load_write(c->fd, c->wbuf, c->wlen, &c->woff);
    if (err != 0) {
        conn_lost(c, 0, err);
        return;
    }
    load_set_events(epfd, c->fd, &c->want_out, c, c->woff < c->wlen);
}

static void send_req(conn *c, double t)
{
    c->woff = 0;
    c->t0 = t;
    flush_out(c);
}

/* ---- operations ---------------------------------------------------------------------------- */

/* A key not in flight, or -1 after KEY_TRIES busy picks (then the operation is not started). */
static long pick_key(void)
{
    for (int i = 0; i < KEY_TRIES; i++) {
        long k = (long)(rng_next(&rng_state) % (uint64_t)opt.keyspace);
        if (!(kflags[k] & KEY_BUSY))
            return k;
    }
    return -1;
}

static void start_fill(conn *c, long k, uint32_t v, double t)
{
    c->op = OP_FILL;
    c->key = k;
    c->version = v;
    kflags[k] |= KEY_BUSY;
    put_set(c, k, v);
    send_req(c, t);
}

static long next_fill; /* -F: the next key to fill */

/* Starts the next operation on the free connection c; returns whether it did. */
static int start_op(conn *c, double t)
{
    if (opt.fill) {
        if (next_fill >= opt.keyspace)
            return 0;
        start_fill(c, next_fill, version[next_fill], t);
        next_fill++;
        return 1;
    }
    long k = pick_key();
    if (k < 0)
        return 0;
    c->key = k;
    kflags[k] |= KEY_BUSY;
    /* The write share of the operations, from the top 53 bits of a draw. */
    double u = (double)(rng_next(&rng_state) >> 11) * (1.0 / 9007199254740992.0);
    if (u < opt.write_share) {
        c->op = OP_WRITE;
        c->version = ++version[k];
        if (opt.write_mode == WRITE_DEL)
            put_del(c, k);
        else
            put_set(c, k, c->version);
    } else {
        c->op = OP_READ;
        put_get(c, k);
    }
    send_req(c, t);
    return 1;
}

static void record_latency(double us)
{
    if (nlat == caplat) {
        caplat = caplat ? caplat * 2 : 65536;
        lat = xrealloc(lat, caplat * sizeof *lat);
    }
    lat[nlat++] = us < 0 ? 0 : us > 4e9 ? 4000000000u : (uint32_t)(us + 0.5);
}

/* One reply to c's request, at the start of c->rbuf: 1 with *kind, the value (hits) and *used;
 * 0 when more bytes are needed; a reply that breaks the protocol is fatal. */
static int scan_reply(conn *c, int *kind, const char **val, size_t *vlen, size_t *used)
{
    char err[128];
    size_t need = 0;
    if (opt.proto == PROTO_REDIS) {
        ch_resp_limits lim;
        ch_resp_limits_init(&lim);
        ch_resp_reply r;
        ch_resp_status st = ch_resp_scan_reply(c->rbuf, c->rlen, &lim, &r, &need, err, sizeof err);
        if (st == CH_RESP_INCOMPLETE)
            return 0;
        if (st != CH_RESP_OK)
            die("a reply from %s:%d breaks the protocol: %s", opt.host, opt.port, err);
        *used = r.len;
        if (r.type == CH_RESP_ERROR) {
            *kind = R_ERR;
            *val = c->rbuf + r.body;
            *vlen = r.body_len;
        } else if (r.type == CH_RESP_BULK && c->op == OP_READ) {
            *kind = r.integer < 0 ? R_MISS : R_HIT;
            *val = c->rbuf + r.body;
            *vlen = r.body_len;
        } else if ((r.type == CH_RESP_STATUS && c->op != OP_READ) ||
                   (r.type == CH_RESP_INTEGER && c->op == OP_WRITE)) {
            *kind = R_DONE;
        } else {
            die("reply type '%c' from %s:%d to a %s", (char)r.type, opt.host, opt.port,
                c->op == OP_READ ? "GET" : c->op == OP_FILL ? "SET" : "write");
        }
        return 1;
    }
    ch_mc_cmd cmd = c->op == OP_READ                                       ? CH_MC_CMD_GET
                    : c->op == OP_WRITE && opt.write_mode == WRITE_DEL ? CH_MC_CMD_DELETE
                                                                           : CH_MC_CMD_SET;
    ch_mc_reply r;
    ch_mc_status st = ch_mc_scan_reply(c->rbuf, c->rlen, cmd, NULL, &r, &need, err, sizeof err);
    if (st == CH_MC_INCOMPLETE)
        return 0;
    if (st != CH_MC_OK)
        die("a reply from %s:%d breaks the protocol: %s", opt.host, opt.port, err);
    *used = r.len;
    switch (r.cls) {
    case CH_MC_C_HIT: {
        size_t pos = 0;
        ch_mc_value v;
        if (cmd != CH_MC_CMD_GET || !ch_mc_value_next(c->rbuf, r.len, &pos, &v))
            die("an unexpected value reply from %s:%d", opt.host, opt.port);
        *kind = R_HIT;
        *val = c->rbuf + v.data.off;
        *vlen = v.data.len;
        break;
    }
    case CH_MC_C_MISS: *kind = cmd == CH_MC_CMD_GET ? R_MISS : R_DONE; break; /* delete: NOT_FOUND */
    case CH_MC_C_OK: *kind = R_DONE; break;
    default: /* ERROR, CLIENT_ERROR, SERVER_ERROR, NOT_STORED */
        *kind = R_ERR;
        *val = c->rbuf + r.line.off;
        *vlen = r.line.len;
        break;
    }
    return 1;
}

/* c's reply is in: the operation goes on (a miss's refill) or is done. */
static void on_reply(conn *c, int kind, const char *val, size_t vlen, double t)
{
    long k = c->key;
    switch (c->op) {
    case OP_READ: {
        record_latency((t - c->t0) * 1e6);
        BUMP(reads);
        int moved = (kflags[k] & KEY_MOVED) != 0;
        if (moved)
            BUMP(moved_reads);
        if (kind == R_HIT) {
            long long v = value_version(val, vlen);
            if (v < 0) {
                BUMP(errors); /* not a value of ours: as wrong as an error */
                note(c, "a foreign value", val, vlen);
            } else {
                BUMP(hits);
                if (v < (long long)version[k]) {
                    if (kflags[k] & KEY_LOST)
                        BUMP(stale_lost); /* after a lost write or refill of its own */
                    else
                        BUMP(stale);
                }
            }
            op_done(c);
        } else if (kind == R_MISS) {
            BUMP(misses); /* a database read, then the refill */
            if (moved)
                BUMP(moved_misses);
            c->op = OP_FILL;
            c->version = version[k];
            put_set(c, k, c->version);
            send_req(c, t);
        } else {
            BUMP(errors);
            note(c, "error reply", val, vlen);
            op_done(c);
        }
        break;
    }
    case OP_FILL:
    case OP_WRITE:
        if (kind == R_ERR) {
            BUMP(write_errors);
            note(c, "error reply", val, vlen);
        }
        else if (c->op == OP_WRITE || opt.fill)
            BUMP(writes); /* -F: the fills are the writes */
        op_done(c);
        break;
    default: die("a reply from %s:%d with no request in flight", opt.host, opt.port);
    }
}

static void on_readable(conn *c, double t)
{
    for (;;) {
        ssize_t n = load_read(c->fd, &c->rbuf, &c->rlen, &c->rcap);
        if (n == -1)
            return;
        if (n <= 0) {
            conn_lost(c, 0, n == 0 ? 0 : errno);
            return;
        }
        int kind;
        const char *val = NULL;
        size_t vlen = 0, used = 0;
        if (c->op == OP_NONE)
            die("%zu bytes from %s:%d that answer no request", c->rlen, opt.host, opt.port);
        if (scan_reply(c, &kind, &val, &vlen, &used)) {
            if (used != c->rlen)
                die("%zu bytes from %s:%d beyond the reply", c->rlen - used, opt.host, opt.port);
            on_reply(c, kind, val, vlen, t);
            c->rlen = 0;
            return;
        }
    }
}

/* ---- output -------------------------------------------------------------------------------- */

static uint32_t *sorted_copy(size_t from, size_t to)
{
    size_t n = to - from;
    uint32_t *v = xrealloc(NULL, n * sizeof *v);
    if (n)
        memcpy(v, lat + from, n * sizeof *v); /* lat is NULL before the first read */
    qsort(v, n, sizeof *v, cmp_u32);
    return v;
}

static void persec_append(const char *s)
{
    size_t n = strlen(s);
    if (persec_len + n + 1 > persec_cap) {
        persec_cap = (persec_len + n + 1) * 2;
        persec = xrealloc(persec, persec_cap);
    }
    memcpy(persec + persec_len, s, n + 1);
    persec_len += n;
}

#define COUNT_FIELDS(c)                                                                            \
    (c).reads, (c).hits, (c).misses, (c).errors, (c).stale, (c).writes, (c).write_errors,          \
        (c).moved_reads, (c).moved_misses, (c).late, (c).timeouts, (c).closed, (c).stale_lost

static const char *const json_counts_fmt =
    "\"reads\": %lld, \"hits\": %lld, \"misses\": %lld, \"errors\": %lld, \"stale\": %lld, "
    "\"writes\": %lld, \"write_errors\": %lld, \"moved_reads\": %lld, \"moved_misses\": %lld, "
    "\"late\": %lld, \"timeouts\": %lld, \"closed\": %lld, \"stale_lost\": %lld";

static void emit_second(int s)
{
    uint32_t *v = sorted_copy(sec_lat0, nlat);
    size_t n = nlat - sec_lat0;
    uint32_t p50 = percentile_sorted(v, n, 0.50), p99 = percentile_sorted(v, n, 0.99);
    free(v);
    printf("cache_aside sec=%d reads=%lld hits=%lld misses=%lld errors=%lld stale=%lld "
           "writes=%lld write_errors=%lld moved_reads=%lld moved_misses=%lld late=%lld "
           "timeouts=%lld closed=%lld stale_lost=%lld p50_us=%u p99_us=%u\n",
           s, COUNT_FIELDS(sec_c), p50, p99);
    fflush(stdout);
    char buf[512], cnt[400];
    snprintf(cnt, sizeof cnt, json_counts_fmt, COUNT_FIELDS(sec_c));
    snprintf(buf, sizeof buf, "%s{\"sec\": %d, %s, \"p50_us\": %u, \"p99_us\": %u}",
             persec_len ? ", " : "", s, cnt, p50, p99);
    persec_append(buf);
    memset(&sec_c, 0, sizeof sec_c);
    sec_lat0 = nlat;
}

static void on_usr1(int sig)
{
    (void)sig;
    phase_requests++;
}

static void on_usr2(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static void new_phase(double t_rel)
{
    if (nphases == MAX_PHASES)
        return;
    phase_t[nphases] = t_rel;
    phase_lat0[nphases] = nlat;
    nphases++;
    printf("cache_aside phase=%d t=%.3f\n", nphases - 1, t_rel);
    fflush(stdout);
}

static void summary(double secs)
{
    const char *proto = opt.proto == PROTO_REDIS ? "redis" : "memcache";
    uint32_t *v = sorted_copy(0, nlat);
    char cnt[400];
    snprintf(cnt, sizeof cnt, json_counts_fmt, COUNT_FIELDS(tot_c));
    printf("{\"proto\": \"%s\", \"mode\": \"%s\", \"keys\": %ld, \"rate\": %g, \"conns\": %d, "
           "\"write_share\": %g, \"write_mode\": \"%s\", \"ttl\": %ld, \"seconds\": %.3f, "
           "\"totals\": {%s, \"p50_us\": %u, \"p99_us\": %u}, \"phases\": [",
           proto, opt.fill ? "fill" : "run", opt.keyspace, opt.rate, opt.conns, opt.write_share,
           opt.write_mode == WRITE_DEL ? "del" : "set", opt.ttl, secs, cnt,
           percentile_sorted(v, nlat, 0.50), percentile_sorted(v, nlat, 0.99));
    free(v);
    for (int i = 0; i < nphases; i++) {
        size_t to = i + 1 < nphases ? phase_lat0[i + 1] : nlat;
        uint32_t *pv = sorted_copy(phase_lat0[i], to);
        size_t n = to - phase_lat0[i];
        snprintf(cnt, sizeof cnt, json_counts_fmt, COUNT_FIELDS(phase_c[i]));
        printf("%s{\"phase\": %d, \"start\": %.3f, %s, \"p50_us\": %u, \"p99_us\": %u}",
               i ? ", " : "", i, phase_t[i], cnt, percentile_sorted(pv, n, 0.50),
               percentile_sorted(pv, n, 0.99));
        free(pv);
    }
    printf("], \"per_second\": [%s]}\n", persec ? persec : "");
    fflush(stdout);
}

/* ---- main loop ----------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    rng_state = rng_seed(opt.seed);
    addr = ipv4_addr(opt.host, opt.port);
    version = calloc((size_t)opt.keyspace, sizeof *version);
    kflags = calloc((size_t)opt.keyspace, 1);
    cs = calloc((size_t)opt.conns, sizeof *cs);
    if (!version || !kflags || !cs)
        die("out of memory");
    for (long k = 0; k < opt.keyspace; k++)
        version[k] = opt.base_version;
    if (opt.moved_file)
        load_moved();

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    sa.sa_handler = on_usr2;
    sigaction(SIGUSR2, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    epfd = epoll_create1(0);
    if (epfd < 0)
        die("epoll_create1: %s", strerror(errno));
    for (int i = 0; i < opt.conns; i++) {
        conn *c = &cs[i];
        c->rcap = 4096;
        c->rbuf = xrealloc(NULL, c->rcap);
        if (conn_open(c) < 0)
            die("connect to %s:%d: %s", opt.host, opt.port, strerror(errno));
    }

    const double t0 = now();
    const double interval = opt.fill ? 0 : (1.0 - opt.write_share) / opt.rate;
    const double deadline = t0 + opt.seconds;
    double next_op = t0, next_tick = t0 + 1, last_conn = t0;
    int sec = 0, seen_phase = 0;
    printf("cache_aside start proto=%s mode=%s keys=%ld rate=%g conns=%d write_share=%g "
           "write_mode=%s ttl=%ld value_bytes=%ld t0_mono=%.6f\n",
           opt.proto == PROTO_REDIS ? "redis" : "memcache", opt.fill ? "fill" : "run",
           opt.keyspace, opt.rate, opt.conns, opt.write_share,
           opt.write_mode == WRITE_DEL ? "del" : "set", opt.ttl, opt.value_bytes, t0);
    fflush(stdout);

    struct epoll_event evs[256];
    for (;;) {
        double t = now();
        while (seen_phase != phase_requests) {
            seen_phase++;
            new_phase(t - t0);
        }
        /* Ticks: a line per second, and the connections lost since the last one opened again. */
        int stopping = stop_requested || (opt.fill ? next_fill >= opt.keyspace : t >= deadline);
        while (t >= next_tick && !stopping) {
            emit_second(++sec);
            next_tick += 1;
            for (int i = 0; i < opt.conns; i++)
                if (cs[i].fd < 0)
                    conn_open(&cs[i]);
        }
        int up = 0, busy = 0;
        double oldest = t;
        for (int i = 0; i < opt.conns; i++) {
            conn *c = &cs[i];
            if (c->fd < 0)
                continue;
            up++;
            if (c->op != OP_NONE && (t - c->t0) * 1000 > (double)opt.op_timeout_ms) {
                /* A reply already in the socket is taken first: after this process was not
                 * scheduled for a while, its replies are there, not lost. */
                on_readable(c, t);
                if (c->fd < 0)
                    continue;
            }
            if (c->op != OP_NONE) {
                if ((t - c->t0) * 1000 > (double)opt.op_timeout_ms) {
                    conn_lost(c, 1, 0); /* no reply in time: an error, and a new connection */
                    continue;
                }
                busy++;
                if (c->t0 < oldest)
                    oldest = c->t0;
            }
        }
        if (up)
            last_conn = t;
        else if (t - last_conn > NO_CONN_SECONDS)
            die("no connection to %s:%d for %d s", opt.host, opt.port, NO_CONN_SECONDS);
        if (stopping && busy == 0)
            break;
        /* Start the operations whose time has come, on the free connections. */
        for (int i = 0; i < opt.conns && !stopping; i++) {
            conn *c = &cs[i];
            if (c->fd < 0 || c->op != OP_NONE)
                continue;
            if (!opt.fill && t < next_op)
                break;
            if (start_op(c, t))
                next_op += interval;
            else if (opt.fill)
                break;
        }
        if (!opt.fill && t - next_op > 0.5) {
            long long over = (long long)((t - next_op) / interval);
            for (long long j = 0; j < over; j++)
                BUMP(late);
            next_op += (double)over * interval;
        }
        double wake = next_tick;
        if (!opt.fill && next_op < wake)
            wake = next_op;
        int timeout = wake <= t ? 0 : (int)((wake - t) * 1000) + 1;
        if (timeout > 100)
            timeout = 100;
        int n = epoll_wait(epfd, evs, 256, timeout);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_wait: %s", strerror(errno));
        }
        t = now();
        for (int i = 0; i < n; i++) {
            conn *c = evs[i].data.ptr;
            if (c->fd < 0)
                continue;
            if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                on_readable(c, t);
            if (c->fd >= 0 && (evs[i].events & EPOLLOUT) && c->woff < c->wlen)
                flush_out(c);
        }
    }
    double end = now();
    emit_second(++sec);
    summary(end - t0);
    for (int i = 0; i < opt.conns; i++) {
        if (cs[i].fd >= 0)
            close(cs[i].fd);
        free(cs[i].wbuf);
        free(cs[i].rbuf);
    }
    free(cs);
    free(lat);
    free(version);
    free(kflags);
    free(persec);
    close(epfd);
    return 0;
}

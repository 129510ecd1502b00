/* SPDX-License-Identifier: Apache-2.0 */
/*
 * load_util.h — the few helpers the load generators of bench/ share (bench/proxy/mc_load.c,
 * bench/migration/cache_aside.c): a fatal message, an allocation that cannot fail, the monotonic
 * clock, a fixed-seed PRNG, a bounded number parser, a bounded blocking loopback connect, and
 * the non-blocking reads, writes and epoll interest of one connection.
 *
 * Header only, every function static inline: each load generator is one translation unit.
 * Define LOAD_PROG (the program's name, a string literal) before including it.
 */
#ifndef CHASH_BENCH_LOAD_UTIL_H
#define CHASH_BENCH_LOAD_UTIL_H

#ifndef LOAD_PROG
#error "define LOAD_PROG before including load_util.h"
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static inline void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* "<prog>: <message>" on stderr, then exit status 1. */
static inline void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs(LOAD_PROG ": ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static inline void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        die("out of memory (%zu bytes)", n);
    return q;
}

/* CLOCK_MONOTONIC in seconds (the clock Python's time.monotonic() reads on Linux). */
static inline double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* xorshift64*: fast, fixed-seed, good enough to spread keys. *state must not be 0. */
static inline uint64_t rng_next(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* A non-zero PRNG state from a seed. */
static inline uint64_t rng_seed(uint64_t seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 0x1234567ULL;
    return s ? s : 1;
}

/* s as a decimal number in [lo, hi], or a fatal message naming the option what. */
static inline long parse_num(const char *s, const char *what, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        die("%s: %s is not a number in [%ld, %ld]", what, s, lo, hi);
    return v;
}

/* s as a decimal fraction in [lo, hi]. */
static inline double parse_real(const char *s, const char *what, double lo, double hi)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        die("%s: %s is not a number in [%g, %g]", what, s, lo, hi);
    return v;
}

/* host (IPv4 text) and port as a sockaddr, or a fatal message. */
static inline struct sockaddr_in ipv4_addr(const char *host, int port)
{
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        die("-h: %s is not an IPv4 address", host);
    return sa;
}

/* A blocking TCP connect bounded by 5 s, TCP_NODELAY; returns the socket or -1 (errno set). The
 * socket is left blocking, with no send timeout. */
static inline int connect_tcp(const struct sockaddr_in *sa)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct timeval tv = {.tv_sec = 5, .tv_usec = 0}; /* bounds a blocking connect */
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval zero = {0, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &zero, sizeof zero);
    return fd;
}

/* ---- non-blocking I/O on one connection (epoll, level-triggered) ------------------------------ */

/* Watches fd for input, and for output too while out, with data ptr; *want_out remembers what
 * is asked, so an unchanged interest costs no epoll_ctl. */
static inline void load_set_events(int epfd, int fd, int *want_out, void *ptr, int out)
{
    if (*want_out == out)
        return;
    struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0u), .data.ptr = ptr};
    if (epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev) < 0)
        die("epoll_ctl: %s", strerror(errno));
    *want_out = out;
}

/* Writes buf[*off, len) while the socket takes it. Returns 0 (all written, or the socket is
 * full), or the errno of a failed write. */
static inline int load_write(int fd, const char *buf, size_t len, size_t *off)
{
    while (*off < len) {
        ssize_t w = write(fd, buf + *off, len - *off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : errno;
        }
        *off += (size_t)w;
    }
    return 0;
}

/* Reads once into (*buf)[*len, *cap), doubling the buffer when it is full. Returns the bytes
 * read (added to *len), 0 at the end of the stream, -1 when nothing is there now, or -2 with
 * errno set when the read failed. */
static inline ssize_t load_read(int fd, char **buf, size_t *len, size_t *cap)
{
    if (*len == *cap) {
        *cap *= 2;
        *buf = xrealloc(*buf, *cap);
    }
    for (;;) {
        ssize_t n = read(fd, *buf + *len, *cap - *len);
        if (n >= 0) {
            *len += (size_t)n;
            return n;
        }
        if (errno != EINTR)
            return errno == EAGAIN || errno == EWOULDBLOCK ? -1 : -2;
    }
}

static inline int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The q-quantile (0..1) of n sorted values (nearest rank); 0 when n is 0. */
static inline uint32_t percentile_sorted(const uint32_t *v, size_t n, double q)
{
    if (n == 0)
        return 0;
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

/* Zipf with exponent s over ranks 1..n: each rank's cumulative probability (allocated, n
 * entries; the caller frees it). Cost: n pow()s. */
static inline double *zipf_cdf(size_t n, double s)
{
    double *cdf = xrealloc(NULL, n * sizeof(*cdf)), sum = 0;
    for (size_t i = 0; i < n; i++)
        cdf[i] = (sum += pow((double)i + 1, -s));
    for (size_t i = 0; i < n; i++)
        cdf[i] /= sum;
    return cdf;
}

/* The index (rank - 1) that u in [0, 1) draws from cdf[0, n), by the inverse CDF. O(log n). */
static inline uint32_t zipf_index(const double *cdf, size_t n, double u)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (uint32_t)lo;
}

#endif /* CHASH_BENCH_LOAD_UTIL_H */

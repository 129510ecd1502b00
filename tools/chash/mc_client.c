/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mc_client.c — memcached text protocol client of `chash migrate` (mc_client.h).
 *
 * The socket is non-blocking; every wait is a poll() bounded by the client's timeout. Writing
 * and reading are one loop (pump): while output remains it is written, and whatever input is
 * ready is read meanwhile, so a deep pipeline cannot deadlock. The input buffer keeps
 * [rpos, rlen) unread; it is compacted before it grows, so it holds at most the unread replies
 * plus one read's worth.
 *
 * The replies of the proxy's commands (mg, add, set) are framed by proxy/proto's parser
 * (ch_mc_scan_reply) and a copy's request and reply are its (ch_mc_copy_fetch, ch_mc_copy_read),
 * the same code the proxy's warm-up runs; only the lines of the commands the proxy never sends
 * (stats, lru_crawler metadump) are read here.
 */
#define _POSIX_C_SOURCE 200809L
#include "mc_client.h"

#include <mc.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#define READ_CHUNK 65536

struct mc_client {
    int fd;
    int timeout_ms;
    char *in;
    size_t rpos, rlen, rcap;
    char *out;
    size_t wpos, wlen, wcap;
    bool lost, busy;
    ch_mc_limits lim; /* for the replies ch_mc_scan_reply frames */
    char err[256];
};

static int lost(mc_client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int lost(mc_client *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof(c->err), fmt, ap);
    va_end(ap);
    c->lost = true;
    return MC_LOST;
}

/* An error line from the server, kept (trimmed) for mc_error(). */
static int ereply(mc_client *c, const char *line, size_t len)
{
    snprintf(c->err, sizeof(c->err), "%.*s", (int)(len < 200 ? len : 200), line);
    c->busy = len >= 4 && memcmp(line, "BUSY", 4) == 0;
    return MC_EREPLY;
}

const char *mc_error(const mc_client *c)
{
    return c->err;
}

bool mc_busy(const mc_client *c)
{
    return c->busy;
}

mc_client *mc_connect(const char *host, int port, int timeout_ms, char *err, size_t errlen)
{
    int fd = -1;
    if (port == 0) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(host) >= sizeof(sa.sun_path)) {
            snprintf(err, errlen, "socket path too long");
            return NULL;
        }
        strcpy(sa.sun_path, host);
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
            snprintf(err, errlen, "cannot connect: %s", strerror(errno));
            if (fd >= 0)
                close(fd);
            return NULL;
        }
    } else {
        char ps[16];
        snprintf(ps, sizeof(ps), "%d", port);
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
        int gai = getaddrinfo(host, ps, &hints, &res);
        if (gai != 0) {
            snprintf(err, errlen, "cannot resolve: %s", gai_strerror(gai));
            return NULL;
        }
        int e = 0;
        for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
            fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
            if (fd < 0) {
                e = errno;
                continue;
            }
            /* A blocking connect, bounded by the send timeout. */
            struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
            if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
                e = errno;
                close(fd);
                fd = -1;
            }
        }
        freeaddrinfo(res);
        if (fd < 0) {
            snprintf(err, errlen, "cannot connect: %s", strerror(e ? e : ECONNREFUSED));
            return NULL;
        }
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    mc_client *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        close(fd);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->fd = fd;
    c->timeout_ms = timeout_ms;
    /* Any item memcached can hold (-I is at most 1 GiB); reply lines up to 64 KiB, as the
     * lines read here. */
    ch_mc_limits_init(&c->lim);
    c->lim.max_item = c->lim.max_swallow = (size_t)1 << 30;
    c->lim.max_line = 64 * 1024;
    return c;
}

void mc_close(mc_client *c)
{
    if (c == NULL)
        return;
    close(c->fd);
    free(c->in);
    free(c->out);
    free(c);
}

/* Room for len more output bytes at c->out + c->wlen. Returns 0 or MC_LOST. */
static int out_room(mc_client *c, size_t len)
{
    if (c->lost)
        return MC_LOST;
    if (c->wlen + len > c->wcap) {
        size_t cap = c->wcap ? c->wcap : 65536;
        while (cap < c->wlen + len)
            cap *= 2;
        char *p = realloc(c->out, cap);
        if (p == NULL)
            return lost(c, "out of memory");
        c->out = p;
        c->wcap = cap;
    }
    return 0;
}

static int append(mc_client *c, const void *data, size_t len)
{
    if (out_room(c, len) != 0)
        return MC_LOST;
    memcpy(c->out + c->wlen, data, len);
    c->wlen += len;
    return 0;
}

/* Room for READ_CHUNK more input bytes: compact, then grow. */
static int in_room(mc_client *c)
{
    if (c->rpos > 0 && c->rpos == c->rlen)
        c->rpos = c->rlen = 0;
    if (c->rcap - c->rlen >= READ_CHUNK)
        return 0;
    if (c->rpos > 0) {
        memmove(c->in, c->in + c->rpos, c->rlen - c->rpos);
        c->rlen -= c->rpos;
        c->rpos = 0;
        if (c->rcap - c->rlen >= READ_CHUNK)
            return 0;
    }
    size_t cap = c->rcap ? c->rcap * 2 : 2 * READ_CHUNK;
    char *p = realloc(c->in, cap);
    if (p == NULL)
        return lost(c, "out of memory");
    c->in = p;
    c->rcap = cap;
    return 0;
}

/* Writes pending output and, when want_input, waits until some input arrived; reads whatever
 * input is ready in either case. Returns 0 or MC_LOST. */
static int pump(mc_client *c, bool want_input)
{
    if (c->lost)
        return MC_LOST;
    for (;;) {
        bool writing = c->wpos < c->wlen;
        if (!writing && !want_input)
            return 0;
        struct pollfd p = {.fd = c->fd, .events = (short)(POLLIN | (writing ? POLLOUT : 0))};
        int n = poll(&p, 1, c->timeout_ms);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return lost(c, "poll: %s", strerror(errno));
        if (n == 0)
            return lost(c, "timed out after %d ms", c->timeout_ms);
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
            if (in_room(c) != 0)
                return MC_LOST;
            ssize_t r = read(c->fd, c->in + c->rlen, c->rcap - c->rlen);
            if (r == 0)
                return lost(c, "connection closed by the server");
            if (r < 0 && errno != EAGAIN && errno != EINTR)
                return lost(c, "read: %s", strerror(errno));
            if (r > 0) {
                c->rlen += (size_t)r;
                want_input = false; /* got some: the caller looks at it */
            }
        }
        if (writing && (p.revents & POLLOUT)) {
            ssize_t w = send(c->fd, c->out + c->wpos, c->wlen - c->wpos, MSG_NOSIGNAL);
            if (w < 0 && errno != EAGAIN && errno != EINTR)
                return lost(c, "write: %s", strerror(errno));
            if (w > 0)
                c->wpos += (size_t)w;
            if (c->wpos == c->wlen)
                c->wpos = c->wlen = 0;
        }
    }
}

int mc_flush(mc_client *c)
{
    return pump(c, false);
}

/* The next line without its "\r\n"; *line points into the input buffer, valid until the next
 * read. Returns 0 or MC_LOST. */
static int read_line(mc_client *c, const char **line, size_t *len)
{
    size_t scanned = c->rpos;
    for (;;) {
        char *nl = scanned < c->rlen ? memchr(c->in + scanned, '\n', c->rlen - scanned) : NULL;
        if (nl != NULL) {
            size_t end = (size_t)(nl - c->in);
            *line = c->in + c->rpos;
            *len = end - c->rpos - (end > c->rpos && c->in[end - 1] == '\r');
            c->rpos = end + 1;
            return 0;
        }
        if (c->rlen - c->rpos > 64 * 1024)
            return lost(c, "a reply line longer than 64 KiB");
        size_t off = c->rlen - c->rpos; /* rpos moves on compaction: keep the offset */
        if (pump(c, true) != 0)
            return MC_LOST;
        scanned = c->rpos + off;
    }
}

/* The next whole reply to a request of command cmd, framed by ch_mc_scan_reply: *r, and *reply
 * pointing at its first byte in the input buffer, valid until the next read. A reply that breaks
 * the protocol loses the connection. Returns 0 or MC_LOST. */
static int read_reply(mc_client *c, ch_mc_cmd cmd, ch_mc_reply *r, const char **reply)
{
    for (;;) {
        size_t need;
        char why[128];
        ch_mc_status st = ch_mc_scan_reply(c->in + c->rpos, c->rlen - c->rpos, cmd, &c->lim, r,
                                           &need, why, sizeof(why));
        if (st == CH_MC_OK) {
            *reply = c->in + c->rpos;
            c->rpos += r->len;
            return 0;
        }
        if (st != CH_MC_INCOMPLETE)
            return lost(c, "%s reply: %s", ch_mc_cmd_name(cmd), why);
        /* need is at least one byte more: read until it is there, not one parse per read. */
        while (c->rlen - c->rpos < need)
            if (pump(c, true) != 0)
                return MC_LOST;
    }
}

/* An unexpected reply r (reply[0..]), named by its first line. */
static int unexpected(mc_client *c, const char *what, const char *reply, const ch_mc_reply *r)
{
    return lost(c, "unexpected %s reply '%.*s'", what, (int)(r->line.len < 80 ? r->line.len : 80),
                reply + r->line.off);
}

static bool starts(const char *line, size_t len, const char *word)
{
    size_t n = strlen(word);
    return len >= n && memcmp(line, word, n) == 0;
}

static bool error_line(const char *line, size_t len)
{
    return starts(line, len, "ERROR") || starts(line, len, "CLIENT_ERROR") ||
           starts(line, len, "SERVER_ERROR") || starts(line, len, "BUSY");
}

int mc_curr_items(mc_client *c, uint64_t *n)
{
    if (append(c, "stats\r\n", 7) != 0)
        return MC_LOST;
    *n = 0;
    for (;;) {
        const char *line;
        size_t len;
        if (read_line(c, &line, &len) != 0)
            return MC_LOST;
        if (starts(line, len, "END"))
            return 0;
        if (error_line(line, len))
            return ereply(c, line, len);
        if (starts(line, len, "STAT curr_items "))
            *n = strtoull(line + 16, NULL, 10);
    }
}

int mc_metadump_begin(mc_client *c)
{
    if (append(c, "lru_crawler metadump all\r\n", 26) != 0)
        return MC_LOST;
    return mc_flush(c);
}

int mc_metadump_next(mc_client *c, mc_meta *m)
{
    const char *line;
    size_t len;
    if (read_line(c, &line, &len) != 0)
        return MC_LOST;
    if (len == 3 && memcmp(line, "END", 3) == 0)
        return 0;
    if (!starts(line, len, "key="))
        return ereply(c, line, len);
    /* key=<urlencoded> exp=<n> la=<n> cas=<n> fetch=<yes|no> cls=<n> size=<n> [...] */
    bool have_key = false, have_exp = false;
    m->size = 0;
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && line[j] != ' ')
            j++;
        const char *tok = line + i;
        size_t tl = j - i;
        if (starts(tok, tl, "key=")) {
            long k = ch_mc_url_decode(tok + 4, tl - 4, m->key, MC_KEY_MAX);
            if (k <= 0)
                return ereply(c, line, len);
            m->key[k] = '\0';
            m->len = (size_t)k;
            have_key = true;
        } else if (starts(tok, tl, "exp=")) {
            m->exp = strtoll(tok + 4, NULL, 10);
            have_exp = true;
        } else if (starts(tok, tl, "size=")) {
            m->size = strtoull(tok + 5, NULL, 10);
        }
        i = j + 1;
    }
    if (!have_key || !have_exp)
        return ereply(c, line, len);
    return 1;
}

int mc_mg(mc_client *c, const char *key, size_t len)
{
    size_t n = ch_mc_copy_fetch(key, len, NULL, 0);
    if (n == 0)
        return lost(c, "an empty key");
    if (out_room(c, n) != 0)
        return MC_LOST;
    c->wlen += ch_mc_copy_fetch(key, len, c->out + c->wlen, n);
    return 0;
}

int mc_mg_reply(mc_client *c, mc_value *v)
{
    ch_mc_reply r;
    const char *reply;
    if (read_reply(c, CH_MC_CMD_MG, &r, &reply) != 0)
        return MC_LOST;
    if (r.cls == CH_MC_C_ERROR)
        return ereply(c, reply + r.line.off, r.line.len);
    ch_mc_copy copy;
    int rc = ch_mc_copy_read(reply, r.len, &copy);
    if (rc < 0)
        return unexpected(c, "mg", reply, &r);
    if (rc == 0)
        return 0;
    v->data = reply + copy.data.off;
    v->len = copy.data.len;
    v->ttl = copy.ttl;
    v->flags = copy.flags;
    return 1;
}

int mc_store(mc_client *c, const char *cmd, const char *key, size_t len, uint32_t flags,
             int64_t exptime, const void *data, size_t dlen)
{
    char head[64];
    int hl = snprintf(head, sizeof(head), " %" PRIu32 " %" PRId64 " %zu\r\n", flags, exptime,
                      dlen);
    if (append(c, cmd, strlen(cmd)) != 0 || append(c, " ", 1) != 0 || append(c, key, len) != 0 ||
        append(c, head, (size_t)hl) != 0 || append(c, data, dlen) != 0)
        return MC_LOST;
    return append(c, "\r\n", 2);
}

int mc_delete(mc_client *c, const char *key, size_t len)
{
    if (append(c, "delete ", 7) != 0 || append(c, key, len) != 0)
        return MC_LOST;
    return append(c, "\r\n", 2);
}

int mc_delete_reply(mc_client *c)
{
    ch_mc_reply r;
    const char *reply;
    if (read_reply(c, CH_MC_CMD_DELETE, &r, &reply) != 0)
        return MC_LOST;
    if (r.code == CH_MC_R_DELETED)
        return 1;
    if (r.code == CH_MC_R_NOT_FOUND)
        return 0;
    return r.cls == CH_MC_C_ERROR ? ereply(c, reply + r.line.off, r.line.len)
                                  : unexpected(c, "delete", reply, &r);
}

int mc_store_reply(mc_client *c)
{
    /* add and set have one reply grammar (STORED NOT_STORED EXISTS NOT_FOUND, or an error). */
    ch_mc_reply r;
    const char *reply;
    if (read_reply(c, CH_MC_CMD_ADD, &r, &reply) != 0)
        return MC_LOST;
    if (r.code == CH_MC_R_STORED)
        return 1;
    if (r.code == CH_MC_R_NOT_STORED)
        return 0;
    return r.cls == CH_MC_C_ERROR ? ereply(c, reply + r.line.off, r.line.len)
                                  : unexpected(c, "store", reply, &r);
}

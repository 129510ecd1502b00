/* SPDX-License-Identifier: Apache-2.0 */
/*
 * roster.c — a pool's client connections for CLIENT LIST and INFO (roster.h).
 *
 * Invariant: a card is in its roster's list from px_roster_join to px_roster_leave, and the
 * list, the cards' strings and their resp are read and written under the roster's mutex only,
 * except that the card's own worker reads its name without it (no one else writes it).
 */
#include "roster.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

struct px_card {
    px_dl link;
    uint64_t id;
    long fd;
    char addr[64], laddr[64]; /* the peer's and the listener's: "ip:port", "path:0" */
    uint64_t created_ms;
    /* The mutex's. */
    char *str[3]; /* px_card_field: NULL when not set */
    size_t len[3];
    unsigned resp;
    /* The worker's, relaxed atomics. */
    uint64_t last_ms;
    const char *cmd;
};

struct px_roster {
    pthread_mutex_t mu;
    px_dl cards;
};

px_roster *px_roster_new(void)
{
    px_roster *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    if (pthread_mutex_init(&r->mu, NULL) != 0) {
        free(r);
        return NULL;
    }
    px_dl_init(&r->cards);
    return r;
}

void px_roster_free(px_roster *r)
{
    if (r == NULL)
        return;
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* "ip:port" of a socket address, as Redis writes it (an IPv6 address without brackets); a unix
 * socket is "path:0". */
static void show_addr(const struct sockaddr_storage *ss, int len, char *out, size_t cap)
{
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        uv_ip4_name(a, host, sizeof(host));
        port = ntohs(a->sin_port);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        uv_ip6_name(a, host, sizeof(host));
        port = ntohs(a->sin6_port);
    } else if (ss->ss_family == AF_UNIX && len > (int)offsetof(struct sockaddr_un, sun_path)) {
        const struct sockaddr_un *a = (const struct sockaddr_un *)ss;
        snprintf(out, cap, "%.*s:0", (int)(len - (int)offsetof(struct sockaddr_un, sun_path)),
                 a->sun_path);
        out[strcspn(out, "\n")] = '\0';
        return;
    }
    snprintf(out, cap, "%s:%d", host, port);
}

px_card *px_roster_join(px_roster *r, uint64_t id, uv_stream_t *stream, uint64_t now_ms)
{
    px_card *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->id = id;
    c->created_ms = c->last_ms = now_ms;
    c->resp = 2;
    uv_os_fd_t fd = -1;
    c->fd = uv_fileno((uv_handle_t *)stream, &fd) == 0 ? (long)fd : -1;
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    snprintf(c->addr, sizeof(c->addr), "?:0");
    snprintf(c->laddr, sizeof(c->laddr), "?:0");
    if (stream->type == UV_TCP) {
        if (uv_tcp_getpeername((uv_tcp_t *)stream, (struct sockaddr *)&ss, &len) == 0)
            show_addr(&ss, len, c->addr, sizeof(c->addr));
        len = sizeof(ss);
        if (uv_tcp_getsockname((uv_tcp_t *)stream, (struct sockaddr *)&ss, &len) == 0)
            show_addr(&ss, len, c->laddr, sizeof(c->laddr));
    } else if (fd >= 0) {
        socklen_t sl = sizeof(ss);
        if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
            show_addr(&ss, (int)sl, c->laddr, sizeof(c->laddr));
            snprintf(c->addr, sizeof(c->addr), "%s", c->laddr); /* Redis: the same path */
        }
    }
    pthread_mutex_lock(&r->mu);
    px_dl_push(&r->cards, &c->link);
    pthread_mutex_unlock(&r->mu);
    return c;
}

void px_roster_leave(px_roster *r, px_card *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&r->mu);
    px_dl_remove(&c->link);
    pthread_mutex_unlock(&r->mu);
    for (size_t i = 0; i < 3; i++)
        free(c->str[i]);
    free(c);
}

int px_card_set(px_roster *r, px_card *c, px_card_field f, const char *p, size_t len)
{
    char *copy = NULL;
    if (len > 0) {
        if ((copy = malloc(len)) == NULL)
            return -1;
        memcpy(copy, p, len);
    }
    pthread_mutex_lock(&r->mu);
    char *old = c->str[f];
    c->str[f] = copy;
    c->len[f] = len;
    pthread_mutex_unlock(&r->mu);
    free(old);
    return 0;
}

void px_card_set_resp(px_roster *r, px_card *c, unsigned resp)
{
    pthread_mutex_lock(&r->mu);
    c->resp = resp;
    pthread_mutex_unlock(&r->mu);
}

const char *px_card_name(const px_card *c, size_t *len)
{
    *len = c->len[PX_CARD_NAME];
    return c->str[PX_CARD_NAME];
}

void px_card_touch(px_card *c, const char *cmd, uint64_t now_ms)
{
    __atomic_store_n(&c->cmd, cmd, __ATOMIC_RELAXED);
    __atomic_store_n(&c->last_ms, now_ms, __ATOMIC_RELAXED);
}

static int card_line(const px_card *c, uint64_t now_ms, px_buf *out)
{
    uint64_t last = __atomic_load_n(&c->last_ms, __ATOMIC_RELAXED);
    const char *cmd = __atomic_load_n(&c->cmd, __ATOMIC_RELAXED);
    uint64_t age = now_ms > c->created_ms ? (now_ms - c->created_ms) / 1000 : 0;
    uint64_t idle = now_ms > last ? (now_ms - last) / 1000 : 0;
    return px_buf_printf(out,
                         "id=%llu addr=%s laddr=%s fd=%ld name=%.*s age=%llu idle=%llu db=0 "
                         "cmd=%s user=default resp=%u lib-name=%.*s lib-ver=%.*s\n",
                         (unsigned long long)c->id, c->addr, c->laddr, c->fd,
                         (int)c->len[PX_CARD_NAME],
                         c->str[PX_CARD_NAME] != NULL ? c->str[PX_CARD_NAME] : "",
                         (unsigned long long)age, (unsigned long long)idle,
                         cmd != NULL ? cmd : "NULL", c->resp, (int)c->len[PX_CARD_LIB_NAME],
                         c->str[PX_CARD_LIB_NAME] != NULL ? c->str[PX_CARD_LIB_NAME] : "",
                         (int)c->len[PX_CARD_LIB_VER],
                         c->str[PX_CARD_LIB_VER] != NULL ? c->str[PX_CARD_LIB_VER] : "");
}

int px_roster_text(px_roster *r, const px_card *self, uint64_t now_ms, px_buf *out)
{
    int rc = 0;
    pthread_mutex_lock(&r->mu);
    if (self != NULL) {
        rc = card_line(self, now_ms, out);
    } else {
        for (px_dl *d = r->cards.next; rc == 0 && d != &r->cards; d = d->next)
            rc = card_line(PX_CONTAINER(d, px_card, link), now_ms, out);
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

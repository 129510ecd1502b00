/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dns_resolve.c — DNS lookups with c-ares on a uv loop (dns_resolve.h).
 *
 * c-ares reports each socket it opens and what to wait for (sock_state_cb): each gets a
 * uv_poll, stopped and closed when c-ares says it is done with it (before c-ares closes the
 * descriptor). One timer calls c-ares back at its next deadline (ares_timeout), re-armed after
 * every call into c-ares. A lookup is one query (A and AAAA through ares_getaddrinfo) or an SRV
 * query and one ares_getaddrinfo per target; it counts its queries out (pending) and is
 * delivered by a 0 ms timer once pending is 0, so the callback never runs inside
 * px_dns_lookup or inside c-ares. Cost per lookup: one query per name, O(n) memory in the
 * servers found.
 */
#include "dns_resolve.h"

#include <ares.h>
#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct dsock {
    uv_poll_t poll; /* first: the handle's address is the sock's */
    px_dns *d;
    ares_socket_t fd;
    struct dsock *next;
} dsock;

typedef struct lookup {
    px_dns *d;
    px_dns_cb cb;
    void *arg;
    bool srv, cancelled, failed;
    int port;
    unsigned pending; /* queries not yet called back */
    char error[160];
    px_dns_server *servers; /* name and addr owned (malloc'd) */
    size_t n, cap, unresolved;
    uint32_t ttl_s;
} lookup;

/* One ares_getaddrinfo's context: the target it resolves (NULL for dns://) and its port. */
typedef struct target {
    lookup *lk;
    char *name;
    int port;
} target;

struct px_dns {
    uv_loop_t *loop;
    ares_channel ch;
    uv_timer_t timer;   /* c-ares' next deadline */
    uv_timer_t deliver; /* a finished lookup's callback, on a turn of its own */
    dsock *socks;       /* every polled socket */
    lookup *cur;        /* the lookup in flight, or NULL */
    unsigned handles;   /* uv handles open: the two timers and each sock's poll */
    bool freeing;
};

static pthread_once_t ares_once = PTHREAD_ONCE_INIT;
static int ares_init_rc;
static void ares_global(void)
{
    ares_init_rc = ares_library_init(ARES_LIB_INIT_ALL);
}

static void handle_closed(uv_handle_t *h)
{
    px_dns *d = h->data;
    if ((void *)h != (void *)&d->timer && (void *)h != (void *)&d->deliver)
        free(h); /* a dsock: its poll is its first member */
    if (--d->handles == 0 && d->freeing)
        free(d);
}

static void lookup_free(lookup *lk)
{
    for (size_t i = 0; i < lk->n; i++) {
        free((char *)lk->servers[i].name);
        free((char *)lk->servers[i].addr);
    }
    free(lk->servers);
    free(lk);
}

static void arm(px_dns *d);

static void timer_cb(uv_timer_t *t)
{
    px_dns *d = t->data;
    ares_process_fd(d->ch, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
    arm(d);
}

/* Re-arms the timer at c-ares' next deadline (none: stopped). */
static void arm(px_dns *d)
{
    if (d->freeing)
        return;
    struct timeval tv;
    if (ares_timeout(d->ch, NULL, &tv) == NULL) {
        uv_timer_stop(&d->timer);
        return;
    }
    uint64_t ms = (uint64_t)tv.tv_sec * 1000u + ((uint64_t)tv.tv_usec + 999u) / 1000u;
    uv_timer_start(&d->timer, timer_cb, ms, 0);
}

static void poll_cb(uv_poll_t *p, int status, int events)
{
    dsock *s = (dsock *)p;
    px_dns *d = s->d;
    /* An error on the socket: let c-ares read it, so it sees the failure and moves on. */
    bool r = status < 0 || (events & UV_READABLE), w = status >= 0 && (events & UV_WRITABLE);
    ares_process_fd(d->ch, r ? s->fd : ARES_SOCKET_BAD, w ? s->fd : ARES_SOCKET_BAD);
    arm(d);
}

/* c-ares opens, changes or is done with socket fd. */
static void sock_state_cb(void *data, ares_socket_t fd, int readable, int writable)
{
    px_dns *d = data;
    dsock **at = &d->socks;
    while (*at != NULL && (*at)->fd != fd)
        at = &(*at)->next;
    dsock *s = *at;
    if (!readable && !writable) {
        if (s != NULL) {
            *at = s->next;
            uv_poll_stop(&s->poll); /* before c-ares closes fd */
            uv_close((uv_handle_t *)&s->poll, handle_closed);
        }
        return;
    }
    if (s == NULL) {
        if ((s = calloc(1, sizeof(*s))) == NULL)
            return; /* its query times out instead */
        if (uv_poll_init_socket(d->loop, &s->poll, fd) != 0) {
            free(s);
            return;
        }
        s->d = d;
        s->fd = fd;
        s->poll.data = d;
        s->next = d->socks;
        d->socks = s;
        d->handles++;
    }
    uv_poll_start(&s->poll, (readable ? UV_READABLE : 0) | (writable ? UV_WRITABLE : 0), poll_cb);
}

static void deliver_cb(uv_timer_t *t)
{
    px_dns *d = t->data;
    lookup *lk = d->cur;
    if (lk == NULL || lk->pending > 0)
        return;
    d->cur = NULL;
    px_dns_result r = {
        .ok = !lk->failed,
        .error = lk->failed ? lk->error : NULL,
        .servers = lk->servers,
        .n = lk->n,
        .unresolved = lk->unresolved,
        .ttl_s = lk->ttl_s,
    };
    lk->cb(lk->arg, &r);
    lookup_free(lk);
}

/* One query of lk called back: when it was the last, the lookup is delivered (or, cancelled,
 * freed). */
static void query_done(lookup *lk)
{
    if (--lk->pending > 0)
        return;
    if (lk->cancelled)
        lookup_free(lk);
    else
        uv_timer_start(&lk->d->deliver, deliver_cb, 0, 0);
}

static void fail(lookup *lk, int status)
{
    if (lk->failed)
        return;
    lk->failed = true;
    snprintf(lk->error, sizeof(lk->error), "%s",
             status == ARES_ENOTFOUND ? "no such name (NXDOMAIN)"
             : status == ARES_ENODATA ? "no records of that type"
             : status == ARES_ETIMEOUT ? "timeout: the DNS server did not answer"
             : status == ARES_ESERVFAIL ? "server failure (SERVFAIL)"
             : status == ARES_EREFUSED  ? "refused by the DNS server"
             /* c-ares 1.18 tries the next server on SERVFAIL, NOTIMP and REFUSED answers, and
              * when none is left reports what it reports for a closed port */
             : status == ARES_ECONNREFUSED ? "no DNS server answered (connection refused, or "
                                             "each answered SERVFAIL or REFUSED)"
                                           : ares_strerror(status));
}

static int add(lookup *lk, const char *name, const char *addr, int port)
{
    if (lk->n == lk->cap) {
        size_t cap = lk->cap ? lk->cap * 2 : 8;
        px_dns_server *v = realloc(lk->servers, cap * sizeof(*v));
        if (v == NULL)
            return -1;
        lk->servers = v;
        lk->cap = cap;
    }
    char *nm = name != NULL ? strdup(name) : NULL, *ad = strdup(addr);
    if ((name != NULL && nm == NULL) || ad == NULL) {
        free(nm);
        free(ad);
        return -1;
    }
    lk->servers[lk->n++] = (px_dns_server){nm, ad, port};
    return 0;
}

/* A target's (or dns://'s name's) addresses. */
static void addr_cb(void *arg, int status, int timeouts, struct ares_addrinfo *res)
{
    (void)timeouts;
    target *t = arg;
    lookup *lk = t->lk;
    size_t before = lk->n;
    if (status == ARES_SUCCESS && !lk->cancelled && res != NULL) {
        for (struct ares_addrinfo_node *nd = res->nodes; nd != NULL; nd = nd->ai_next) {
            char text[INET6_ADDRSTRLEN];
            const void *a = nd->ai_family == AF_INET
                                ? (const void *)&((struct sockaddr_in *)nd->ai_addr)->sin_addr
                                : (const void *)&((struct sockaddr_in6 *)nd->ai_addr)->sin6_addr;
            if ((nd->ai_family != AF_INET && nd->ai_family != AF_INET6) ||
                inet_ntop(nd->ai_family, a, text, sizeof(text)) == NULL)
                continue;
            if (add(lk, t->name, text, t->port) != 0) {
                fail(lk, ARES_ENOMEM);
                break;
            }
            if (nd->ai_ttl >= 0 && (uint32_t)nd->ai_ttl < lk->ttl_s)
                lk->ttl_s = (uint32_t)nd->ai_ttl;
        }
    }
    if (!lk->cancelled && lk->srv && lk->n == before)
        lk->unresolved++; /* a target without an address is left out */
    else if (!lk->cancelled && !lk->srv && status != ARES_SUCCESS)
        fail(lk, status);
    if (res != NULL)
        ares_freeaddrinfo(res);
    free(t->name);
    free(t);
    query_done(lk);
}

static void resolve(lookup *lk, const char *name, bool named, int port)
{
    target *t = calloc(1, sizeof(*t));
    if (t == NULL || (named && (t->name = strdup(name)) == NULL)) {
        free(t);
        fail(lk, ARES_ENOMEM);
        return;
    }
    t->lk = lk;
    t->port = port;
    struct ares_addrinfo_hints hints = {.ai_family = AF_UNSPEC};
    lk->pending++;
    ares_getaddrinfo(lk->d->ch, name, NULL, &hints, addr_cb, t);
}

/* The SRV records of the name: each target resolved. */
static void srv_cb(void *arg, int status, int timeouts, unsigned char *abuf, int alen)
{
    (void)timeouts;
    lookup *lk = arg;
    struct ares_srv_reply *srv = NULL;
    if (lk->cancelled) {
        query_done(lk);
        return;
    }
    if (status == ARES_SUCCESS)
        status = ares_parse_srv_reply(abuf, alen, &srv);
    if (status != ARES_SUCCESS)
        fail(lk, status);
    for (struct ares_srv_reply *r = srv; r != NULL && !lk->failed; r = r->next)
        if (r->port > 0 && r->host != NULL && r->host[0] != '\0')
            resolve(lk, r->host, true, r->port);
    if (srv != NULL)
        ares_free_data(srv);
    query_done(lk);
}

px_dns *px_dns_new(uv_loop_t *loop, const char *resolver, int timeout_ms, char *why,
                   size_t whylen)
{
    pthread_once(&ares_once, ares_global);
    if (ares_init_rc != ARES_SUCCESS) {
        snprintf(why, whylen, "c-ares: %s", ares_strerror(ares_init_rc));
        return NULL;
    }
    px_dns *d = calloc(1, sizeof(*d));
    if (d == NULL) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    struct ares_options o;
    memset(&o, 0, sizeof(o));
    o.sock_state_cb = sock_state_cb;
    o.sock_state_cb_data = d;
    o.timeout = timeout_ms;
    o.tries = 2;
    o.lookups = (char *)"b"; /* DNS only: /etc/hosts does not name a fleet */
    int rc = ares_init_options(&d->ch, &o,
                               ARES_OPT_SOCK_STATE_CB | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES |
                                   ARES_OPT_LOOKUPS);
    if (rc == ARES_SUCCESS && resolver != NULL) {
        rc = ares_set_servers_ports_csv(d->ch, resolver);
        if (rc != ARES_SUCCESS)
            ares_destroy(d->ch);
    }
    if (rc != ARES_SUCCESS) {
        snprintf(why, whylen, "c-ares: %s", ares_strerror(rc));
        free(d);
        return NULL;
    }
    d->loop = loop;
    uv_timer_init(loop, &d->timer);
    uv_timer_init(loop, &d->deliver);
    d->timer.data = d->deliver.data = d;
    d->handles = 2;
    return d;
}

int px_dns_lookup(px_dns *d, const char *name, bool srv, int port, px_dns_cb cb, void *arg)
{
    if (d->cur != NULL)
        return -1;
    lookup *lk = calloc(1, sizeof(*lk));
    if (lk == NULL)
        return -1;
    *lk = (lookup){.d = d, .cb = cb, .arg = arg, .srv = srv, .port = port, .ttl_s = UINT32_MAX};
    d->cur = lk;
    lk->pending = 1; /* held while the queries start, so none can finish the lookup early */
    if (srv) {
        lk->pending++;
        ares_search(d->ch, name, ns_c_in, ns_t_srv, srv_cb, lk);
    } else {
        resolve(lk, name, false, port);
    }
    query_done(lk);
    arm(d);
    return 0;
}

bool px_dns_busy(const px_dns *d)
{
    return d->cur != NULL;
}

void px_dns_free(px_dns *d)
{
    if (d == NULL)
        return;
    if (d->cur != NULL) {
        d->cur->cancelled = true;
        if (d->cur->pending == 0)
            lookup_free(d->cur); /* finished, its delivery not yet run */
        d->cur = NULL;
    }
    d->freeing = true;
    ares_destroy(d->ch); /* calls back each query still out (cancelled), closes the sockets */
    while (d->socks != NULL) {
        dsock *s = d->socks;
        d->socks = s->next;
        uv_poll_stop(&s->poll);
        uv_close((uv_handle_t *)&s->poll, handle_closed);
    }
    uv_close((uv_handle_t *)&d->timer, handle_closed);
    uv_close((uv_handle_t *)&d->deliver, handle_closed);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd_http.c — libcurl's multi interface on the control thread's libuv loop (etcd_http.h).
 *
 * libcurl tells which sockets to watch (socket_cb: a uv_poll each) and when to call it back
 * without I/O (timer_cb: one uv_timer); each readiness or expiry is handed to
 * curl_multi_socket_action, after which dispatch() delivers what it produced: complete lines of
 * streams, then finished requests. No callback of ours runs inside a libcurl callback (those
 * only append bytes), so ours may start and cancel requests freely. A request cancelled during
 * dispatch is only marked (dead) and freed when dispatch ends, so the lists it walks stay valid.
 */
#include "etcd_http.h"

#include <curl/curl.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct px_etcd_req {
    px_etcd *e;
    CURL *easy;
    struct curl_slist *headers;
    char *body;            /* the POST body (libcurl does not copy it) */
    char *buf;             /* the answer so far; for a stream, the bytes of an unfinished line */
    size_t len, cap;
    size_t scanned;        /* a stream: buf[0, scanned) holds no '\n' (searched already) */
    bool oom;              /* the answer did not fit in memory: the request fails */
    px_etcd_line_cb line;  /* NULL: unary */
    px_etcd_done_cb done;
    void *arg;
    bool dead;             /* cancelled: no callback, freed at the end of dispatch */
    px_etcd_req *next;
};

struct px_etcd {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer;
    char base[300];        /* "http://host:port" */
    px_etcd_req *reqs;     /* every started request */
    unsigned dispatching;  /* > 0 inside dispatch(): cancelled requests wait for its end */
    unsigned handles;      /* uv handles open (the timer and each socket's poll) */
    bool freeing;
};

typedef struct sock {
    uv_poll_t poll;
    px_etcd *e;
    curl_socket_t fd;
} sock;

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void handle_closed(uv_handle_t *h)
{
    px_etcd *e = h->data;
    if ((void *)h != (void *)&e->timer)
        free(h); /* a sock: its poll is its first member */
    if (--e->handles == 0 && e->freeing) {
        curl_multi_cleanup(e->multi);
        free(e);
    }
}

/* Takes r out of libcurl (its sockets may close: socket_cb runs). */
static void req_detach(px_etcd_req *r)
{
    if (r->easy != NULL) {
        curl_multi_remove_handle(r->e->multi, r->easy);
        curl_easy_cleanup(r->easy);
        r->easy = NULL;
    }
}

/* Frees r, already out of libcurl and of e->reqs. */
static void req_release(px_etcd_req *r)
{
    curl_slist_free_all(r->headers);
    free(r->body);
    free(r->buf);
    free(r);
}

static void req_free(px_etcd_req *r)
{
    px_etcd *e = r->e;
    for (px_etcd_req **p = &e->reqs; *p != NULL; p = &(*p)->next) {
        if (*p == r) {
            *p = r->next;
            break;
        }
    }
    req_release(r);
}

/* Removes r from libcurl (its sockets may close: socket_cb runs) and frees it, or marks it
 * dead for dispatch's end. */
static void req_stop(px_etcd_req *r)
{
    req_detach(r);
    r->dead = true;
    if (r->e->dispatching == 0)
        req_free(r);
}

/* Delivers the complete lines of r, a live stream, and keeps the unfinished one. Each byte is
 * searched for the end of its line once, however many reads a long line takes (a watch event
 * carrying a 16 MiB document arrives in about a thousand of them). */
static void deliver_lines(px_etcd_req *r)
{
    size_t at = 0;
    char *nl;
    while (!r->dead && (nl = memchr(r->buf + r->scanned, '\n', r->len - r->scanned)) != NULL) {
        size_t end = (size_t)(nl - r->buf);
        if (end > at)
            r->line(r->arg, r->buf + at, end - at);
        at = end + 1;
        r->scanned = at;
    }
    if (r->dead)
        return;
    r->scanned = r->len - at;
    if (at > 0) {
        memmove(r->buf, r->buf + at, r->len - at);
        r->len -= at;
    }
}

/* Delivers the complete lines of each live stream, then each finished request. */
static void dispatch(px_etcd *e)
{
    e->dispatching++;
    for (px_etcd_req *r = e->reqs; r != NULL; r = r->next)
        if (!r->dead && r->line != NULL && r->buf != NULL)
            deliver_lines(r);
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(e->multi, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        px_etcd_req *r = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
        if (r == NULL || r->dead)
            continue;
        long code = 0;
        curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
        char why[400] = "";
        bool ok = msg->data.result == CURLE_OK && code == 200 && !r->oom;
        const char *path = NULL;
        curl_easy_getinfo(r->easy, CURLINFO_EFFECTIVE_URL, &path);
        if (r->oom)
            snprintf(why, sizeof(why), "%s: out of memory", path != NULL ? path : e->base);
        else if (msg->data.result != CURLE_OK)
            snprintf(why, sizeof(why), "%s: %s", path != NULL ? path : e->base,
                     curl_easy_strerror(msg->data.result));
        else if (code != 200)
            snprintf(why, sizeof(why), "%s: HTTP %ld: %.*s", path != NULL ? path : e->base, code,
                     (int)(r->len < 200 ? r->len : 200), r->buf != NULL ? r->buf : "");
        px_etcd_done_cb done = r->done;
        void *arg = r->arg;
        const char *body = r->line == NULL && r->buf != NULL ? r->buf : "";
        size_t len = r->line == NULL ? r->len : 0;
        r->dead = true; /* it ends here: the callback may not cancel it */
        done(arg, ok, body, len, why);
        req_detach(r);
    }
    if (--e->dispatching == 0) {
        for (px_etcd_req **p = &e->reqs; *p != NULL;) {
            px_etcd_req *r = *p;
            if (r->dead) {
                req_detach(r);
                *p = r->next;
                req_release(r);
            } else {
                p = &r->next;
            }
        }
    }
}

static void act(px_etcd *e, curl_socket_t fd, int flags)
{
    int running;
    curl_multi_socket_action(e->multi, fd, flags, &running);
    dispatch(e);
}

static void poll_cb(uv_poll_t *h, int status, int events)
{
    sock *s = (sock *)h;
    int flags = 0;
    if (status < 0)
        flags = CURL_CSELECT_ERR;
    if (events & UV_READABLE)
        flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE)
        flags |= CURL_CSELECT_OUT;
    act(s->e, s->fd, flags);
}

static void timer_cb(uv_timer_t *t)
{
    act(t->data, CURL_SOCKET_TIMEOUT, 0);
}

static int socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
    (void)easy;
    px_etcd *e = userp;
    sock *s = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (s != NULL) {
            uv_poll_stop(&s->poll);
            uv_close((uv_handle_t *)&s->poll, handle_closed);
            curl_multi_assign(e->multi, fd, NULL);
        }
        return 0;
    }
    if (s == NULL) {
        s = calloc(1, sizeof(*s));
        if (s == NULL || uv_poll_init_socket(e->loop, &s->poll, fd) != 0) {
            free(s);
            return -1;
        }
        s->e = e;
        s->fd = fd;
        s->poll.data = e;
        e->handles++;
        curl_multi_assign(e->multi, fd, s);
    }
    int events = (what == CURL_POLL_IN || what == CURL_POLL_INOUT ? UV_READABLE : 0) |
                 (what == CURL_POLL_OUT || what == CURL_POLL_INOUT ? UV_WRITABLE : 0);
    uv_poll_start(&s->poll, events, poll_cb);
    return 0;
}

static int timerfn_cb(CURLM *multi, long timeout_ms, void *userp)
{
    (void)multi;
    px_etcd *e = userp;
    if (timeout_ms < 0)
        uv_timer_stop(&e->timer);
    else
        uv_timer_start(&e->timer, timer_cb, (uint64_t)timeout_ms, 0);
    return 0;
}

/* Appends an answer's bytes; a unary answer is capped at 64 MiB (an etcd range of a pool's
 * records is far smaller), a stream's unfinished line too. */
static size_t write_cb(char *p, size_t size, size_t n, void *userp)
{
    px_etcd_req *r = userp;
    size_t add = size * n;
    if (r->len + add + 1 > r->cap) {
        size_t cap = r->cap > 0 ? r->cap : 4096;
        while (cap < r->len + add + 1)
            cap *= 2;
        char *b = cap <= (64u << 20) ? realloc(r->buf, cap) : NULL;
        if (b == NULL) {
            r->oom = true;
            return 0; /* libcurl fails the request */
        }
        r->buf = b;
        r->cap = cap;
    }
    memcpy(r->buf + r->len, p, add);
    r->len += add;
    r->buf[r->len] = '\0';
    return add;
}

px_etcd *px_etcd_new(uv_loop_t *loop, const char *endpoint)
{
    pthread_once(&curl_once, curl_init);
    px_etcd *e = calloc(1, sizeof(*e));
    if (e == NULL || (e->multi = curl_multi_init()) == NULL) {
        free(e);
        return NULL;
    }
    e->loop = loop;
    snprintf(e->base, sizeof(e->base), "http://%s", endpoint);
    uv_timer_init(loop, &e->timer);
    e->timer.data = e;
    e->handles = 1;
    curl_multi_setopt(e->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
    curl_multi_setopt(e->multi, CURLMOPT_SOCKETDATA, e);
    curl_multi_setopt(e->multi, CURLMOPT_TIMERFUNCTION, timerfn_cb);
    curl_multi_setopt(e->multi, CURLMOPT_TIMERDATA, e);
    return e;
}

void px_etcd_free(px_etcd *e)
{
    if (e == NULL)
        return;
    while (e->reqs != NULL) {
        px_etcd_req *r = e->reqs;
        req_detach(r); /* its sockets' polls close */
        req_free(r);
    }
    e->freeing = true;
    uv_timer_stop(&e->timer);
    uv_close((uv_handle_t *)&e->timer, handle_closed);
}

/* A request's easy handle: POST body to base+path, JSON, no signals (threads), IPv4/6 as the
 * endpoint says. */
static CURL *easy_for(const char *url, const char *body, struct curl_slist *headers, long connect_ms)
{
    CURL *c = curl_easy_init();
    if (c == NULL)
        return NULL;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*"); /* loopback etcd: never through $http_proxy */
    return c;
}

static px_etcd_req *start(px_etcd *e, const char *path, const char *body, long timeout_ms,
                          long connect_ms, px_etcd_line_cb line, px_etcd_done_cb done, void *arg)
{
    if (e->freeing)
        return NULL;
    px_etcd_req *r = calloc(1, sizeof(*r));
    char url[400];
    snprintf(url, sizeof(url), "%s%s", e->base, path);
    if (r == NULL || (r->body = strdup(body)) == NULL ||
        (r->headers = curl_slist_append(NULL, "Content-Type: application/json")) == NULL ||
        (r->easy = easy_for(url, r->body, r->headers, connect_ms)) == NULL) {
        if (r != NULL) {
            curl_slist_free_all(r->headers);
            free(r->body);
        }
        free(r);
        return NULL;
    }
    r->e = e;
    r->line = line;
    r->done = done;
    r->arg = arg;
    curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(r->easy, CURLOPT_PRIVATE, r);
    if (timeout_ms > 0)
        curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, timeout_ms);
    if (curl_multi_add_handle(e->multi, r->easy) != CURLM_OK) {
        curl_easy_cleanup(r->easy);
        curl_slist_free_all(r->headers);
        free(r->body);
        free(r);
        return NULL;
    }
    r->next = e->reqs;
    e->reqs = r;
    return r;
}

px_etcd_req *px_etcd_post(px_etcd *e, const char *path, const char *body, long timeout_ms,
                          px_etcd_done_cb done, void *arg)
{
    return start(e, path, body, timeout_ms, timeout_ms, NULL, done, arg);
}

px_etcd_req *px_etcd_stream(px_etcd *e, const char *path, const char *body, long connect_ms,
                            px_etcd_line_cb line, px_etcd_done_cb done, void *arg)
{
    return start(e, path, body, 0, connect_ms, line, done, arg);
}

void px_etcd_cancel(px_etcd_req *r)
{
    if (r != NULL && !r->dead)
        req_stop(r);
}

char *px_etcd_post_sync(const char *endpoint, const char *path, const char *body,
                        long timeout_ms, size_t *len, char *why, size_t whylen)
{
    pthread_once(&curl_once, curl_init);
    char url[400];
    snprintf(url, sizeof(url), "http://%s%s", endpoint, path);
    px_etcd_req r = {0};
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    CURL *c = h != NULL ? easy_for(url, body, h, timeout_ms) : NULL;
    if (c == NULL) {
        curl_slist_free_all(h);
        snprintf(why, whylen, "%s: out of memory", url);
        return NULL;
    }
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(c);
    curl_slist_free_all(h);
    if (rc != CURLE_OK || code != 200 || r.oom) {
        if (rc != CURLE_OK)
            snprintf(why, whylen, "%s: %s", url, curl_easy_strerror(rc));
        else
            snprintf(why, whylen, "%s: HTTP %ld", url, code);
        free(r.buf);
        return NULL;
    }
    if (r.buf == NULL && (r.buf = calloc(1, 1)) == NULL) {
        snprintf(why, whylen, "%s: out of memory", url);
        return NULL;
    }
    *len = r.len;
    return r.buf;
}

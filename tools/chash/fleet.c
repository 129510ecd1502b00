/*
 * fleet.c — `chash fleet status|apply|abort`: a pool's membership in etcd (docs/FLEET.md).
 *
 * status reads the pool key K, K/pending and the instance records under K/instances/; apply
 * runs the two-phase switch (propose K/pending, wait until every live instance has prepared,
 * commit K and delete K/pending in one conditional transaction, wait until every live instance
 * serves the new epoch); abort deletes K/pending. Every etcd request is one blocking POST to
 * its JSON gateway (etcd_http.c) whose body and answer are built and parsed by src/fleet. The
 * waits poll the records every POLL_MS: a poll is one range request, O(instances).
 */
#define _POSIX_C_SOURCE 200809L
#include "commands.h"
#include "etcd_http.h"
#include "fleet_doc.h"

#include <chash_config.h>
#include <config_internal.h>
#include <fleet_internal.h>

#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POLL_MS 10
#define DEFAULT_TIMEOUT_MS 10000

/* ---- clocks --------------------------------------------------------------------------------- */

static int64_t clock_us(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
static int64_t unix_us(void) { return clock_us(CLOCK_REALTIME); }
static int64_t mono_ms(void) { return clock_us(CLOCK_MONOTONIC) / 1000; }

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- interruption ------------------------------------------------------------------------ */

/* SIGINT, SIGTERM or SIGHUP during apply: the waits stop at their next poll (within POLL_MS,
 * or one etcd request, <= 5 s), and a change not yet committed is withdrawn as on a timeout. */
static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    interrupted = sig;
}

static void catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* ---- one pool in etcd ----------------------------------------------------------------------- */

typedef struct fctx {
    const cli *c;
    etcd_http h;
    char endpoint[256];  /* "host:port" */
    char key[512];       /* K */
    char url[800];       /* "etcd://host:port/K", for messages */
    char *pending;       /* K/pending */
    char *prefix;        /* K/instances/ */
    /* apply: set once K/pending is ours, cleared once committed or deleted; a failure in
     * between deletes it (conditionally) before exiting, so nothing is left half-done. */
    int64_t proposed;
} fctx;

static void abort_pending(fctx *f, int64_t epoch, char *why, size_t whylen);

/* Exits 1 with the message; first withdraws a change this run proposed and has not committed. */
__attribute__((format(printf, 2, 3))) _Noreturn static void ffail(fctx *f, const char *fmt, ...)
{
    char msg[1500];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (f->proposed != 0) {
        int64_t e = f->proposed;
        char why[600] = "";
        f->proposed = 0;
        abort_pending(f, e, why, sizeof(why));
        if (why[0] != '\0')
            cli_fail(f->c, "%s (and %s: run `chash fleet abort`)", msg, why);
        cli_fail(f->c, "%s (the proposed change, epoch %" PRId64 ", was withdrawn)", msg, e);
    }
    cli_fail(f->c, "%s", msg);
}

/* POSTs body (freed here) and returns the answer, or NULL with why. */
static char *call(fctx *f, const char *path, char *body, size_t *len, char *why, size_t whylen)
{
    if (body == NULL) {
        free(body);
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    char *resp = NULL;
    int rc = etcd_http_post(&f->h, path, body, &resp, len, why, whylen);
    free(body);
    return rc == 0 ? resp : NULL;
}

/* A range of key (or of its prefix): 0, or -1 with why. */
static int range(fctx *f, const char *key, bool prefix, ch__etcd_kv **kvs, size_t *n, char *why,
                 size_t whylen)
{
    size_t len;
    char *resp = call(f, "/v3/kv/range", ch__etcd_range_body(key, prefix), &len, why, whylen);
    int64_t rev;
    int rc = resp != NULL ? ch__etcd_parse_range(resp, len, &rev, kvs, n, why, whylen) : -1;
    free(resp);
    return rc;
}

/* One key, or *kv zeroed when absent. Exits on failure. */
static bool get1(fctx *f, const char *key, ch__etcd_kv *kv)
{
    ch__etcd_kv *kvs;
    size_t n;
    char why[600];
    if (range(f, key, false, &kvs, &n, why, sizeof(why)) != 0)
        ffail(f, "%s", why);
    memset(kv, 0, sizeof(*kv));
    if (n > 0) {
        *kv = kvs[0];
        kvs[0] = (ch__etcd_kv){0};
    }
    ch__etcd_kvs_free(kvs, n);
    return kv->key != NULL;
}

/* A transaction conditional on cmp_key's mod_revision (0: absence): 0 with *succeeded and *rev
 * (the revision after it), or -1 with why. */
static int txn(fctx *f, const char *cmp_key, int64_t mod_rev, const ch__etcd_op *ops, size_t n,
               bool *succeeded, int64_t *rev, char *why, size_t whylen)
{
    size_t len;
    char *resp = call(f, "/v3/kv/txn", ch__etcd_txn_body(cmp_key, mod_rev, ops, n), &len, why,
                      whylen);
    int rc = resp != NULL ? ch__etcd_parse_txn(resp, len, rev, succeeded, why, whylen) : -1;
    free(resp);
    return rc;
}

/* Deletes K/pending if its mod_revision is still epoch. why stays "" on success (or when it
 * was gone already). */
static void abort_pending(fctx *f, int64_t epoch, char *why, size_t whylen)
{
    ch__etcd_op del = {f->pending, NULL, 0};
    bool ok;
    int64_t rev;
    if (txn(f, f->pending, epoch, &del, 1, &ok, &rev, why, whylen) == 0)
        why[0] = '\0';
}

/* The live instance records, sorted by id. A record that does not parse is warned about and
 * left out. Returns 0, or -1 with why. */
static int cmp_rec(const void *a, const void *b)
{
    return strcmp(((const ch__fleet_record *)a)->id, ((const ch__fleet_record *)b)->id);
}

static int records(fctx *f, ch__fleet_record **out, size_t *nout, char *why, size_t whylen)
{
    ch__etcd_kv *kvs;
    size_t n;
    *out = NULL;
    *nout = 0;
    if (range(f, f->prefix, true, &kvs, &n, why, whylen) != 0)
        return -1;
    ch__fleet_record *r = xcalloc(f->c, n, sizeof(*r));
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        char rwhy[200];
        if (ch__fleet_record_parse(kvs[i].value, kvs[i].len, &r[m], rwhy, sizeof(rwhy)) == 0)
            m++;
        else
            cli_warn(f->c, "%s: not an instance record (%s)", kvs[i].key, rwhy);
    }
    ch__etcd_kvs_free(kvs, n);
    qsort(r, m, sizeof(*r), cmp_rec);
    *out = r;
    *nout = m;
    return 0;
}

/* ---- where the pool is ---------------------------------------------------------------------- */

/* Splits "etcd://host:port[/key]" (the scheme may be left out) into endpoint and key ("" when
 * absent). Exits 2 on a malformed URL. */
static void parse_etcd_url(const cli *c, const char *s, char *endpoint, size_t elen, char *key,
                           size_t klen)
{
    const char *p = strncmp(s, "etcd://", 7) == 0 ? s + 7 : s;
    if (strstr(p, "://") != NULL)
        cli_usage(c, "--etcd wants etcd://host:port[/key], not '%s'", s);
    const char *slash = strchr(p, '/');
    size_t hl = slash ? (size_t)(slash - p) : strlen(p);
    const char *colon = memchr(p, ':', hl);
    if (hl == 0 || colon == NULL || colon == p || colon + 1 == p + hl || hl >= elen)
        cli_usage(c, "--etcd wants etcd://host:port[/key], not '%s'", s);
    memcpy(endpoint, p, hl);
    endpoint[hl] = '\0';
    const char *k = slash ? slash : "";
    if (strlen(k) >= klen || (k[0] != '\0' && (k[1] == '\0' || k[strlen(k) - 1] == '/')))
        cli_usage(c, "--etcd: the key in '%s' must not be empty or end in '/'", s);
    snprintf(key, klen, "%s", k);
}

/* The config file's pool (exits 1 on a file error, 2 on an unknown or ambiguous pool). */
static ch_conf_pool *load_pool(const cli *c, const char *path, ch_config **cfg)
{
    ch_config_error err;
    if (ch_config_load(path, cfg, &err) != CH_OK) {
        char buf[800];
        if (err.line == 0)
            cli_fail(c, "%s: %s", path, err.message);
        cli_fail(c, "%s", ch_config_error_str(&err, buf, sizeof(buf)));
    }
    const ch_conf_pool *p = ch_config_pool(*cfg, c->pool);
    if (p == NULL) {
        char names[512] = "";
        for (size_t i = 0; i < (*cfg)->npools; i++) {
            size_t len = strlen(names);
            snprintf(names + len, sizeof(names) - len, "%s%s", i ? ", " : "",
                     (*cfg)->pools[i].name);
        }
        if (c->pool)
            cli_usage(c, "%s has no pool '%s' (pools: %s)", path, c->pool, names);
        cli_usage(c, "%s has %zu pools; choose one with --pool (%s)", path, (*cfg)->npools,
                  names);
    }
    return (ch_conf_pool *)p;
}

/* Sets f's endpoint and key from the pool's "membership" (when p) and --etcd, which overrides
 * the endpoint and, when it has one, the key. Exits when neither names a key. */
static void locate(fctx *f, const char *path, const ch_conf_pool *p)
{
    const cli *c = f->c;
    char ep[256] = "", key[512] = "";
    if (c->etcd != NULL)
        parse_etcd_url(c, c->etcd, ep, sizeof(ep), key, sizeof(key));
    if (p != NULL && p->membership != NULL) {
        if (ep[0] == '\0')
            snprintf(ep, sizeof(ep), "%s", p->membership_endpoint);
        if (key[0] == '\0')
            snprintf(key, sizeof(key), "%s", p->membership_key);
    }
    if (key[0] == '\0') {
        if (p != NULL)
            cli_fail(c, "%s: pool '%s' has no 'membership: etcd://host:port/key' (or give "
                        "--etcd etcd://host:port/key)", path, p->name);
        cli_usage(c, "give CONFIG.yml (a pool with 'membership') or --etcd etcd://host:port/key");
    }
    snprintf(f->endpoint, sizeof(f->endpoint), "%s", ep);
    snprintf(f->key, sizeof(f->key), "%s", key);
    snprintf(f->url, sizeof(f->url), "etcd://%s%s", ep, key);
    f->pending = ch__fleet_pending_key(key);
    f->prefix = ch__fleet_instances_prefix(key);
    if (f->pending == NULL || f->prefix == NULL)
        cli_fail(c, "out of memory");
    char why[600];
    long t = c->timeout_ms > 0 ? (long)c->timeout_ms : DEFAULT_TIMEOUT_MS;
    if (etcd_http_open(&f->h, ep, t < 5000 ? t : 5000, why, sizeof(why)) != 0)
        cli_fail(c, "%s", why);
}

static void fctx_free(fctx *f)
{
    etcd_http_close(&f->h);
    free(f->pending);
    free(f->prefix);
}

/* ---- membership documents ------------------------------------------------------------------- */

typedef struct docinfo {
    bool valid;
    char error[800];    /* when not valid */
    int64_t epoch;      /* its "epoch", else the key's mod_revision */
    bool epoch_given;
    int64_t mod_rev;
    size_t servers;
    char version[128];  /* "" when it gives none */
} docinfo;

/* What a membership document says, read by ch_config_membership_doc() itself (so exactly what
 * an instance would accept), into a scratch pool that holds nothing else. */
static void doc_info(const cli *c, const char *name, const char *text, size_t len,
                     int64_t mod_rev, docinfo *d)
{
    static const char scratch[] = "p:\n  membership: etcd://127.0.0.1:1/k\n";
    memset(d, 0, sizeof(*d));
    d->mod_rev = mod_rev;
    ch_config *cfg;
    ch_config_error err;
    if (ch__config_load_text("(scratch)", scratch, sizeof(scratch) - 1, &cfg, &err) != CH_OK)
        cli_fail(c, "internal error: the scratch pool does not load: %s", err.message);
    int64_t epoch = 0;
    if (ch_config_membership_doc(&cfg->pools[0], name, text, len, &epoch, &err) != CH_OK) {
        ch_config_error_str(&err, d->error, sizeof(d->error));
    } else {
        d->valid = true;
        d->epoch_given = epoch > 0;
        d->epoch = epoch > 0 ? epoch : mod_rev;
        d->servers = cfg->pools[0].nservers;
        snprintf(d->version, sizeof(d->version), "%s",
                 cfg->pools[0].version ? cfg->pools[0].version : "");
    }
    ch_config_free(cfg);
}

/* The membership document of pool p, or exits (out of memory). */
static char *doc_json(const cli *c, const ch_conf_pool *p, int64_t epoch)
{
    char *s = fleet_doc_json(p, epoch);
    if (s == NULL)
        cli_fail(c, "out of memory");
    return s;
}

/* ---- status --------------------------------------------------------------------------------- */

/* How long the committed epoch has been served: since the first instance began serving it,
 * i.e. the least since_unix_ms among the instances on it (their own clocks); 0 when none is. */
static int64_t first_since(const ch__fleet_record *r, size_t n, int64_t epoch)
{
    int64_t first = 0;
    for (size_t i = 0; i < n; i++)
        if (r[i].epoch == epoch && r[i].since_unix_ms > 0 &&
            (first == 0 || r[i].since_unix_ms < first))
            first = r[i].since_unix_ms;
    return first;
}

/* Exact integers (json_num would round revisions and timestamps to %g). */
static void json_i64(json *j, int64_t v)
{
    if (v >= 0)
        json_int(j, (uint64_t)v);
    else
        json_num(j, (double)v);
}

static void json_docinfo(json *j, const docinfo *d)
{
    json_obj(j);
    json_key(j, "valid");
    json_bool(j, d->valid);
    if (!d->valid) {
        json_key(j, "error");
        json_str(j, d->error);
    } else {
        json_key(j, "epoch");
        json_i64(j, d->epoch);
        json_key(j, "epoch_from");
        json_str(j, d->epoch_given ? "document" : "mod_revision");
        json_key(j, "servers");
        json_int(j, d->servers);
        json_key(j, "version");
        json_str(j, d->version[0] ? d->version : NULL);
    }
    json_key(j, "mod_revision");
    json_i64(j, d->mod_rev);
    json_end(j);
}

static int fleet_status(fctx *f)
{
    const cli *c = f->c;
    char why[600];
    ch__etcd_kv k, pend;
    bool has_k = get1(f, f->key, &k), has_p = get1(f, f->pending, &pend);
    docinfo dk = {0}, dp = {0};
    if (has_k)
        doc_info(c, f->url, k.value, k.len, k.mod_rev, &dk);
    if (has_p) {
        char name[900];
        snprintf(name, sizeof(name), "%s/pending", f->url);
        doc_info(c, name, pend.value, pend.len, pend.mod_rev, &dp);
        dp.epoch = pend.mod_rev; /* a pending change's epoch is always its revision */
    }
    ch__fleet_record *r;
    size_t n;
    if (records(f, &r, &n, why, sizeof(why)) != 0)
        ffail(f, "%s", why);
    int64_t cur = has_k && dk.valid ? dk.epoch : 0;
    size_t behind = 0;
    for (size_t i = 0; i < n; i++)
        behind += cur > 0 && r[i].epoch < cur;
    int64_t since = cur > 0 ? first_since(r, n, cur) : 0;
    int64_t now_ms = unix_us() / 1000;

    if (c->json) {
        json j;
        json_init(&j, stdout);
        json_obj(&j);
        json_key(&j, "url");
        json_str(&j, f->url);
        json_key(&j, "committed");
        if (has_k)
            json_docinfo(&j, &dk);
        else
            json_null(&j);
        json_key(&j, "pending");
        if (has_p)
            json_docinfo(&j, &dp);
        else
            json_null(&j);
        json_key(&j, "instances");
        json_arr(&j);
        for (size_t i = 0; i < n; i++) {
            const ch__fleet_record *x = &r[i];
            json_obj(&j);
            json_key(&j, "id"), json_str(&j, x->id);
            json_key(&j, "kind"), json_str(&j, x->kind);
            json_key(&j, "pool"), json_str(&j, x->pool);
            json_key(&j, "host"), json_str(&j, x->host);
            json_key(&j, "pid"), json_i64(&j, x->pid);
            json_key(&j, "epoch"), json_i64(&j, x->epoch);
            json_key(&j, "since_unix_ms"), json_i64(&j, x->since_unix_ms);
            json_key(&j, "membership"), json_str(&j, x->membership);
            json_key(&j, "servers"), json_i64(&j, x->servers);
            json_key(&j, "seen_epoch"), json_i64(&j, x->seen_epoch);
            json_key(&j, "refused"), json_str(&j, x->refused);
            json_key(&j, "prepared"), json_i64(&j, x->prepared);
            json_key(&j, "prepare_failed"), json_i64(&j, x->prepare_failed);
            json_key(&j, "prepare_error"), json_str(&j, x->prepare_error);
            json_key(&j, "warm_up"), json_str(&j, x->warm_up);
            json_key(&j, "warm_up_until_unix_ms"), json_i64(&j, x->warm_up_until_unix_ms);
            json_key(&j, "swapped_unix_us"), json_i64(&j, x->swapped_unix_us);
            json_key(&j, "behind"), json_bool(&j, cur > 0 && x->epoch < cur);
            json_end(&j);
        }
        json_end(&j);
        json_key(&j, "skew");
        json_obj(&j);
        json_key(&j, "epoch"), json_i64(&j, cur);
        json_key(&j, "behind");
        json_arr(&j);
        for (size_t i = 0; i < n; i++)
            if (cur > 0 && r[i].epoch < cur)
                json_str(&j, r[i].id);
        json_end(&j);
        json_key(&j, "first_since_unix_ms");
        if (since > 0)
            json_i64(&j, since);
        else
            json_null(&j);
        json_key(&j, "for_ms");
        if (since > 0)
            json_i64(&j, now_ms - since);
        else
            json_null(&j);
        json_end(&j);
        json_end(&j);
        json_done(&j);
    } else {
        printf("%s\n", f->url);
        if (!has_k)
            printf("committed  none (no document at the key: instances serve their file's "
                   "servers)\n");
        else if (!dk.valid)
            printf("committed  invalid (mod_revision %" PRId64 "): %s\n", dk.mod_rev, dk.error);
        else
            printf("committed  epoch %" PRId64 " (%s), %zu servers, version %s\n", dk.epoch,
                   dk.epoch_given ? "its \"epoch\"" : "the key's mod_revision", dk.servers,
                   dk.version[0] ? dk.version : "(a content hash)");
        if (!has_p)
            printf("pending    none\n");
        else if (!dp.valid)
            printf("pending    epoch %" PRId64 ", invalid: %s\n", dp.epoch, dp.error);
        else
            printf("pending    epoch %" PRId64 ", %zu servers (an apply in progress; if it "
                   "died: chash fleet abort)\n", dp.epoch, dp.servers);
        printf("instances  %zu\n", n);
        if (n > 0)
            printf("  %-24s %-15s %8s %7s %-7s %8s %8s  %s\n", "ID", "KIND", "EPOCH", "SERVERS",
                   "WARM_UP", "PREPARED", "FAILED", "REFUSED");
        for (size_t i = 0; i < n; i++) {
            const ch__fleet_record *x = &r[i];
            printf("  %-24s %-15s %8" PRId64 " %7" PRId64 " %-7s %8" PRId64 " %8" PRId64 "  %s%s%s\n",
                   x->id, x->kind, x->epoch, x->servers, x->warm_up[0] ? x->warm_up : "-",
                   x->prepared, x->prepare_failed, x->refused,
                   x->prepare_error[0] ? (x->refused[0] ? "; prepare: " : "prepare: ") : "",
                   x->prepare_error);
        }
        if (cur == 0)
            printf("skew       - (no committed epoch)\n");
        else if (n == 0)
            printf("skew       - (no live instances)\n");
        else {
            if (behind == 0)
                printf("skew       none: all %zu instances serve epoch %" PRId64, n, cur);
            else {
                printf("skew       %zu of %zu instances behind epoch %" PRId64 ":", behind, n,
                       cur);
                for (size_t i = 0, k2 = 0; i < n; i++)
                    if (r[i].epoch < cur)
                        printf("%s %s (%" PRId64 ")", k2++ ? "," : "", r[i].id, r[i].epoch);
            }
            if (since > 0)
                printf("; the first began serving it %.1f s ago\n",
                       (double)(now_ms - since) / 1000.0);
            else
                printf("; no instance serves it yet\n");
        }
    }
    free(r);
    free(k.key), free(k.value), free(pend.key), free(pend.value);
    return 0;
}

/* ---- abort ---------------------------------------------------------------------------------- */

static int fleet_abort(fctx *f)
{
    ch__etcd_kv p;
    if (!get1(f, f->pending, &p)) {
        printf("no change is pending at %s\n", f->url);
        return 0;
    }
    int64_t e = p.mod_rev;
    free(p.key), free(p.value);
    ch__etcd_op del = {f->pending, NULL, 0};
    bool ok;
    int64_t rev;
    char why[600];
    if (txn(f, f->pending, e, &del, 1, &ok, &rev, why, sizeof(why)) != 0)
        ffail(f, "%s", why);
    if (!ok)
        ffail(f, "the pending change at %s changed while aborting it (epoch %" PRId64
                 " is gone): run status", f->url, e);
    printf("aborted the pending change (epoch %" PRId64 ") at %s\n", e, f->url);
    return 0;
}

/* ---- apply ---------------------------------------------------------------------------------- */

/* A list of ids for a message, "a, b, c" (at most ~1000 bytes). */
static void id_list(char *out, size_t cap, const ch__fleet_record *r, size_t n,
                    bool (*pick)(const ch__fleet_record *, int64_t), int64_t e)
{
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (!pick(&r[i], e))
            continue;
        size_t len = strlen(out);
        snprintf(out + len, cap - len, "%s%s", len ? ", " : "", r[i].id);
    }
}

static bool not_prepared(const ch__fleet_record *r, int64_t e) { return r->prepared != e; }
static bool not_on(const ch__fleet_record *r, int64_t e) { return r->epoch < e; }

static void apply_json_fail(const cli *c, const fctx *f, int64_t e, const char *stage,
                            const char *reason)
{
    if (!c->json)
        return;
    json j;
    json_init(&j, stdout);
    json_obj(&j);
    json_key(&j, "url"), json_str(&j, f->url);
    json_key(&j, "epoch"), json_i64(&j, e);
    json_key(&j, "committed"), json_bool(&j, strcmp(stage, "swap") == 0);
    json_key(&j, "failed"), json_str(&j, stage);
    json_key(&j, "error"), json_str(&j, reason);
    json_end(&j);
    json_done(&j);
}

static int fleet_apply(fctx *f, ch_conf_pool *p)
{
    const cli *c = f->c;
    char why[1200];
    int64_t timeout = c->timeout_ms > 0 ? (int64_t)c->timeout_ms : DEFAULT_TIMEOUT_MS;

    /* The document, checked as an instance will read it (ch_config_membership_doc on the
     * scratch pool) before anything is written. */
    char *doc = doc_json(c, p, 0);
    docinfo d;
    doc_info(c, "(the membership document)", doc, strlen(doc), 0, &d);
    if (!d.valid)
        cli_fail(c, "internal error: the document built from the pool is refused: %s", d.error);

    /* 1. Propose: K/pending, only if there is none. E is the write's revision. */
    catch_signals();
    ch__etcd_op put = {f->pending, doc, strlen(doc)};
    bool ok;
    int64_t e;
    if (txn(f, f->pending, 0, &put, 1, &ok, &e, why, sizeof(why)) != 0)
        ffail(f, "%s", why);
    if (!ok) {
        ch__etcd_kv cur;
        int64_t pe = get1(f, f->pending, &cur) ? cur.mod_rev : 0;
        free(cur.key), free(cur.value);
        snprintf(why, sizeof(why), "a change is pending (epoch %" PRId64 "): wait for it or run "
                 "`chash fleet abort`", pe);
        apply_json_fail(c, f, 0, "propose", why);
        free(doc);
        ffail(f, "%s", why);
    }
    f->proposed = e;
    int64_t t_prop = mono_ms();
    if (!c->json)
        printf("proposed epoch %" PRId64 " (%zu servers) at %s/pending\n", e, d.servers, f->url);

    /* 2. Prepare: every live instance reports prepared == E; one prepare_failed == E aborts. */
    ch__fleet_record *r = NULL;
    size_t n = 0;
    for (;;) {
        free(r);
        if (records(f, &r, &n, why, sizeof(why)) != 0) {
            apply_json_fail(c, f, e, "prepare", why);
            ffail(f, "%s", why);
        }
        for (size_t i = 0; i < n; i++) {
            if (r[i].prepare_failed == e) {
                snprintf(why, sizeof(why), "instance %s could not prepare epoch %" PRId64 ": %s",
                         r[i].id, e, r[i].prepare_error[0] ? r[i].prepare_error : "(no reason)");
                apply_json_fail(c, f, e, "prepare", why);
                ffail(f, "%s", why);
            }
        }
        size_t ready = 0;
        for (size_t i = 0; i < n; i++)
            ready += r[i].prepared == e;
        if (ready == n)
            break;
        if (interrupted) {
            snprintf(why, sizeof(why), "interrupted (signal %d) while %zu of %zu instances had "
                     "prepared epoch %" PRId64, (int)interrupted, ready, n, e);
            apply_json_fail(c, f, e, "prepare", why);
            ffail(f, "%s", why);
        }
        if (mono_ms() - t_prop >= timeout) {
            char ids[1000];
            id_list(ids, sizeof(ids), r, n, not_prepared, e);
            snprintf(why, sizeof(why), "%zu of %zu instances did not prepare epoch %" PRId64
                     " within %" PRId64 " ms: %s", n - ready, n, e, timeout, ids);
            apply_json_fail(c, f, e, "prepare", why);
            ffail(f, "%s", why);
        }
        sleep_ms(POLL_MS);
    }
    int64_t prepare_ms = mono_ms() - t_prop;

    /* 3. Commit: K = the document with its epoch, K/pending deleted, if K/pending is still E. */
    char *final = doc_json(c, p, e);
    ch__etcd_op ops[2] = {{f->key, final, strlen(final)}, {f->pending, NULL, 0}};
    int64_t t_commit_us = unix_us(); /* just before the commit: the swaps are measured from it */
    int64_t t_commit = mono_ms();
    int64_t rev;
    if (txn(f, f->pending, e, ops, 2, &ok, &rev, why, sizeof(why)) != 0) {
        /* Whether it was applied is unknown: leave K/pending to the operator. */
        f->proposed = 0;
        apply_json_fail(c, f, e, "commit", why);
        ffail(f, "%s (the commit may or may not have happened: run `chash fleet status`)", why);
    }
    f->proposed = 0;
    if (!ok) {
        snprintf(why, sizeof(why), "%s/pending is no longer epoch %" PRId64 " (aborted by "
                 "someone else?): nothing was committed", f->url, e);
        apply_json_fail(c, f, e, "commit", why);
        ffail(f, "%s", why);
    }
    if (!c->json) {
        if (n == 0)
            printf("no live instances: committed epoch %" PRId64 " at once\n", e);
        else
            printf("all %zu instances prepared in %" PRId64 " ms; committed epoch %" PRId64 "\n",
                   n, prepare_ms, e);
    }

    /* 4. Swap: every live instance serves E (or a newer epoch: K was written again since). */
    int ret = 0;
    for (;;) {
        free(r);
        if (records(f, &r, &n, why, sizeof(why)) != 0) {
            apply_json_fail(c, f, e, "swap", why);
            ffail(f, "committed epoch %" PRId64 ", but %s", e, why);
        }
        size_t on = 0;
        for (size_t i = 0; i < n; i++)
            on += r[i].epoch >= e;
        if (on == n)
            break;
        if (interrupted) {
            snprintf(why, sizeof(why), "committed epoch %" PRId64 ", but interrupted (signal %d) "
                     "while %zu of %zu instances served it", e, (int)interrupted, on, n);
            apply_json_fail(c, f, e, "swap", why);
            ffail(f, "%s", why);
        }
        for (size_t i = 0; i < n; i++) {
            if (r[i].epoch < e && r[i].seen_epoch == e && r[i].refused[0] != '\0') {
                snprintf(why, sizeof(why), "committed epoch %" PRId64 ", but instance %s "
                         "refused it: %s", e, r[i].id, r[i].refused);
                apply_json_fail(c, f, e, "swap", why);
                ffail(f, "%s", why);
            }
        }
        if (mono_ms() - t_commit >= timeout) {
            char ids[1000];
            id_list(ids, sizeof(ids), r, n, not_on, e);
            snprintf(why, sizeof(why), "committed epoch %" PRId64 ", but %zu of %zu instances "
                     "did not serve it within %" PRId64 " ms: %s", e, n - on, n, timeout, ids);
            apply_json_fail(c, f, e, "swap", why);
            ffail(f, "%s", why);
        }
        sleep_ms(POLL_MS);
    }
    int64_t wait_ms = mono_ms() - t_commit;

    /* The swap window and the commit-to-last-swap, from the instances' swapped_unix_us (their
     * clocks) against this process's clock before the commit: one clock is assumed (loopback,
     * or hosts kept in step by NTP). */
    int64_t smin = 0, smax = 0;
    size_t swapped = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t s = r[i].swapped_unix_us;
        if (r[i].epoch != e || s <= 0)
            continue;
        smin = swapped == 0 || s < smin ? s : smin;
        smax = swapped == 0 || s > smax ? s : smax;
        swapped++;
    }
    double window_ms = swapped ? (double)(smax - smin) / 1000.0 : 0.0;
    double to_last_ms = swapped ? (double)(smax - t_commit_us) / 1000.0 : 0.0;
    if (c->json) {
        json j;
        json_init(&j, stdout);
        json_obj(&j);
        json_key(&j, "url"), json_str(&j, f->url);
        json_key(&j, "epoch"), json_i64(&j, e);
        json_key(&j, "committed"), json_bool(&j, true);
        json_key(&j, "servers"), json_int(&j, d.servers);
        json_key(&j, "instances"), json_int(&j, n);
        json_key(&j, "swapped"), json_int(&j, swapped);
        json_key(&j, "prepare_ms"), json_i64(&j, prepare_ms);
        json_key(&j, "swap_window_ms");
        if (swapped)
            json_num(&j, window_ms);
        else
            json_null(&j);
        json_key(&j, "commit_to_last_swap_ms");
        if (swapped)
            json_num(&j, to_last_ms);
        else
            json_null(&j);
        json_key(&j, "wait_ms"), json_i64(&j, wait_ms);
        json_end(&j);
        json_done(&j);
    } else if (n > 0) {
        printf("%zu instances serve epoch %" PRId64 "; swap window %.3f ms (first to last "
               "swap), commit to last swap %.3f ms (one clock assumed: loopback or NTP)\n",
               n, e, window_ms, to_last_ms);
    }
    free(r);
    free(final);
    free(doc);
    return ret;
}

/* ---- the subcommand ------------------------------------------------------------------------- */

int cmd_fleet(cli *c)
{
    if (c->argc < 1)
        cli_usage(c, "missing action: status, apply or abort (see chash fleet --help)");
    const char *action = c->argv[0];
    bool status = strcmp(action, "status") == 0, apply = strcmp(action, "apply") == 0,
         abrt = strcmp(action, "abort") == 0;
    if (!status && !apply && !abrt)
        cli_usage(c, "unknown action '%s': status, apply or abort", action);
    if (c->argc > 2)
        cli_usage(c, "%s takes at most one file (got '%s')", action, c->argv[2]);
    if (abrt && c->json)
        cli_usage(c, "--json does not apply to abort");
    if (!apply && c->timeout_ms > 0)
        cli_usage(c, "--timeout applies to apply only");
    const char *path = c->argc == 2 ? c->argv[1] : NULL;
    if (apply && path == NULL)
        cli_usage(c, "apply needs NEW.yml");

    fctx f = {.c = c};
    ch_config *cfg = NULL;
    ch_conf_pool *p = path ? load_pool(c, path, &cfg) : NULL;
    if (apply && p->nservers == 0)
        cli_fail(c, "%s: pool '%s' has no servers: nothing to apply", path, p->name);
    locate(&f, path, p);
    int rc = status ? fleet_status(&f) : apply ? fleet_apply(&f, p) : fleet_abort(&f);
    fctx_free(&f);
    ch_config_free(cfg);
    return rc;
}

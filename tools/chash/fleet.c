/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet.c — `chash fleet status|apply|abort`: a pool's membership in etcd (docs/FLEET.md).
 *
 * status reads the pool key K, K/pending, the instance records under K/instances/ and the
 * notes under K/lost/; apply runs the two-phase switch (propose K/pending with an epoch above
 * every one served, wait until every live instance has prepared, commit K and delete K/pending
 * in one conditional transaction, wait until every live instance serves the new epoch); abort
 * deletes K/pending. Every etcd request is one blocking POST to
 * its JSON gateway (etcd_http.c) whose body and answer are built and parsed by src/fleet. The
 * waits poll the records every POLL_MS: a poll is one range request, O(instances).
 */
#define _POSIX_C_SOURCE 200809L
#include "commands.h"
#include "etcd_http.h"
#include "fleet_doc.h"
#include "mig_run.h"

#include <chash_config.h>
#include <etcd_msg.h>
#include <fleet_record.h>

#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POLL_MS 10
#define DEFAULT_TIMEOUT_MS 10000
/* An instance whose record vanished (its lease expired) is committed without only once it has
 * been gone this long: the instance fenced itself a fifth of its TTL before etcd could expire
 * the lease (docs/FLEET.md, "Fencing"); this is a second margin, on apply's side. */
#define LOST_MARGIN_MS 500
#define LOST_NOTE_TTL_S 86400 /* a K/lost/<id> note lives a day unless its instance returns */
#define PROPOSE_TRIES 5       /* K written by someone else between the read and the proposal */

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
    char *lost;          /* K/lost/ */
    char *members;       /* K/members/ */
    /* apply: K/pending's mod_revision once it is ours, cleared once committed or deleted; a
     * failure in between deletes it (conditionally) before exiting, so nothing is left
     * half-done. */
    int64_t proposed;
    int64_t proposed_epoch;
    const char *path;     /* apply: NEW.yml */
    bool migrated;        /* apply --migrate: the copy ran; its counts and time */
    mig_counts mig;
    int64_t mig_ms;
} fctx;

static void abort_pending(fctx *f, int64_t epoch, char *why, size_t whylen);

/* The apply whose proposal is withdrawn should the process exit anywhere before the commit
 * (a cli_fail deep in the staged copy: a file, out of memory), as ffail does. */
static fctx *proposer;

static void withdraw_at_exit(void)
{
    if (proposer != NULL && proposer->proposed != 0) {
        char why[600];
        abort_pending(proposer, proposer->proposed, why, sizeof(why));
        proposer->proposed = 0;
    }
}

/* Exits 1 with the message; first withdraws a change this run proposed and has not committed. */
__attribute__((format(printf, 2, 3))) _Noreturn static void ffail(fctx *f, const char *fmt, ...)
{
    char msg[1500];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (f->proposed != 0) {
        int64_t e = f->proposed_epoch;
        char why[600] = "";
        abort_pending(f, f->proposed, why, sizeof(why));
        f->proposed = 0;
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

/* A range of key (or of its prefix), and etcd's revision: 0, or -1 with why. */
static int range_rev(fctx *f, const char *key, bool prefix, ch__etcd_kv **kvs, size_t *n,
                     int64_t *rev, char *why, size_t whylen)
{
    size_t len;
    char *resp = call(f, "/v3/kv/range", ch__etcd_range_body(key, prefix), &len, why, whylen);
    int rc = resp != NULL ? ch__etcd_parse_range(resp, len, rev, kvs, n, why, whylen) : -1;
    free(resp);
    return rc;
}

static int range(fctx *f, const char *key, bool prefix, ch__etcd_kv **kvs, size_t *n, char *why,
                 size_t whylen)
{
    int64_t rev;
    return range_rev(f, key, prefix, kvs, n, &rev, why, whylen);
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

/* A transaction conditional on every compare (a key's mod_revision, 0: its absence): 0 with
 * *succeeded and *rev (the revision after it), or -1 with why. */
static int txn_n(fctx *f, const ch__etcd_cmp *cmp, size_t ncmp, const ch__etcd_op *ops,
                 size_t n, bool *succeeded, int64_t *rev, char *why, size_t whylen)
{
    size_t len;
    char *resp = call(f, "/v3/kv/txn", ch__etcd_txn_body_n(cmp, ncmp, ops, n), &len, why,
                      whylen);
    int rc = resp != NULL ? ch__etcd_parse_txn(resp, len, rev, succeeded, why, whylen) : -1;
    free(resp);
    return rc;
}

static int txn(fctx *f, const char *cmp_key, int64_t mod_rev, const ch__etcd_op *ops, size_t n,
               bool *succeeded, int64_t *rev, char *why, size_t whylen)
{
    ch__etcd_cmp cmp = {cmp_key, mod_rev};
    return txn_n(f, &cmp, 1, ops, n, succeeded, rev, why, whylen);
}

/* Deletes K/pending if its mod_revision is still mod_rev. why stays "" on success (or when it
 * was gone already). */
static void abort_pending(fctx *f, int64_t mod_rev, char *why, size_t whylen)
{
    ch__etcd_op del = {f->pending, NULL, 0, 0};
    bool ok;
    int64_t rev;
    if (txn(f, f->pending, mod_rev, &del, 1, &ok, &rev, why, whylen) == 0)
        why[0] = '\0';
}

/* The JSON values under prefix, each parsed by parse into an array of size-byte elements
 * (*out, *nout); one that does not parse is warned about (as not a what) and left out.
 * Returns 0, or -1 with why. */
typedef int (*note_parse)(const char *json, size_t len, void *out, char *why, size_t whylen);

static int notes(fctx *f, const char *prefix, size_t size, note_parse parse, const char *what,
                 void **out, size_t *nout, char *why, size_t whylen)
{
    ch__etcd_kv *kvs;
    size_t n;
    *out = NULL;
    *nout = 0;
    if (range(f, prefix, true, &kvs, &n, why, whylen) != 0)
        return -1;
    char *v = xcalloc(f->c, n, size);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        char pwhy[200];
        if (parse(kvs[i].value, kvs[i].len, v + m * size, pwhy, sizeof(pwhy)) == 0)
            m++;
        else
            cli_warn(f->c, "%s: not %s (%s)", kvs[i].key, what, pwhy);
    }
    ch__etcd_kvs_free(kvs, n);
    *out = v;
    *nout = m;
    return 0;
}

static int parse_record(const char *j, size_t len, void *out, char *why, size_t whylen)
{
    return ch__fleet_record_parse(j, len, out, why, whylen);
}

static int parse_lost(const char *j, size_t len, void *out, char *why, size_t whylen)
{
    return ch__fleet_lost_parse(j, len, out, why, whylen);
}

static int parse_member(const char *j, size_t len, void *out, char *why, size_t whylen)
{
    return ch__fleet_member_parse(j, len, out, why, whylen);
}

static int cmp_rec(const void *a, const void *b)
{
    return strcmp(((const ch__fleet_record *)a)->id, ((const ch__fleet_record *)b)->id);
}

/* The live instance records (K/instances/), sorted by id. */
static int records(fctx *f, ch__fleet_record **out, size_t *nout, char *why, size_t whylen)
{
    void *v;
    int rc = notes(f, f->prefix, sizeof(**out), parse_record, "an instance record", &v, nout,
                   why, whylen);
    *out = v;
    if (rc == 0)
        qsort(*out, *nout, sizeof(**out), cmp_rec);
    return rc;
}

static const ch__fleet_record *find_record(const ch__fleet_record *r, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(r[i].id, id) == 0)
            return &r[i];
    return NULL;
}

/* The notes under K/lost/ (instances a commit went without). */
static int lost_notes(fctx *f, ch__fleet_lost **out, size_t *nout, char *why, size_t whylen)
{
    void *v;
    int rc = notes(f, f->lost, sizeof(**out), parse_lost, "a lost-instance note", &v, nout, why,
                   whylen);
    *out = v;
    return rc;
}

/* The member notes under K/members/ (every instance registered within a day, live or not). */
static int members(fctx *f, ch__fleet_member **out, size_t *nout, char *why, size_t whylen)
{
    void *v;
    int rc = notes(f, f->members, sizeof(**out), parse_member, "a member note", &v, nout, why,
                   whylen);
    *out = v;
    return rc;
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
    if (p != NULL && ch_conf_membership_etcd(p)) {
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
    f->lost = ch__fleet_lost_prefix(key);
    f->members = ch__fleet_members_prefix(key);
    if (f->pending == NULL || f->prefix == NULL || f->lost == NULL || f->members == NULL)
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
    free(f->lost);
    free(f->members);
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

/* What a membership document says, read by ch_config_membership_parse() (so exactly what an
 * instance would accept) into a pool of its own. */
static void doc_info(const char *name, const char *text, size_t len, int64_t mod_rev, docinfo *d)
{
    memset(d, 0, sizeof(*d));
    d->mod_rev = mod_rev;
    ch_config *cfg = NULL;
    ch_config_error err;
    int64_t epoch = 0;
    if (ch_config_membership_parse("p", name, text, len, &cfg, &epoch, &err) != CH_OK) {
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
        doc_info(f->url, k.value, k.len, k.mod_rev, &dk);
    if (has_p) {
        char name[900];
        snprintf(name, sizeof(name), "%s/pending", f->url);
        doc_info(name, pend.value, pend.len, pend.mod_rev, &dp);
    }
    ch__fleet_record *r;
    size_t n;
    if (records(f, &r, &n, why, sizeof(why)) != 0)
        ffail(f, "%s", why);
    ch__fleet_lost *lost;
    size_t nlost;
    if (lost_notes(f, &lost, &nlost, why, sizeof(why)) != 0)
        ffail(f, "%s", why);
    ch__fleet_member *mem;
    size_t nmem;
    if (members(f, &mem, &nmem, why, sizeof(why)) != 0)
        ffail(f, "%s", why);
    /* Lost: a note of a commit without it, or a member without a record (and no note). */
    ch__fleet_lost *l2 = xcalloc(c, nlost + nmem, sizeof(*l2));
    memcpy(l2, lost, nlost * sizeof(*lost));
    free(lost);
    lost = l2;
    for (size_t i = 0; i < nmem; i++) {
        bool noted = false;
        for (size_t q = 0; q < nlost && !noted; q++)
            noted = strcmp(lost[q].id, mem[i].id) == 0;
        if (noted || find_record(r, n, mem[i].id) != NULL)
            continue;
        ch__fleet_lost *x = &lost[nlost++];
        snprintf(x->id, sizeof(x->id), "%s", mem[i].id);
        snprintf(x->reason, sizeof(x->reason), "a member (registered at %" PRId64 " Unix ms) "
                 "with no live record: its lease expired (it lost etcd, was stopped or died); "
                 "`chash fleet forget %s` if it is gone for good", mem[i].since_unix_ms,
                 mem[i].id);
    }
    free(mem);
    size_t fenced = 0;
    for (size_t i = 0; i < n; i++)
        fenced += r[i].fenced != 0;
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
            json_key(&j, "fenced"), json_bool(&j, x->fenced != 0);
            json_key(&j, "on_fence"), json_str(&j, x->on_fence[0] ? x->on_fence : NULL);
            json_key(&j, "behind"), json_bool(&j, cur > 0 && x->epoch < cur);
            json_end(&j);
        }
        json_end(&j);
        json_key(&j, "lost");
        json_arr(&j);
        for (size_t i = 0; i < nlost; i++) {
            json_obj(&j);
            json_key(&j, "id"), json_str(&j, lost[i].id);
            json_key(&j, "epoch"), json_i64(&j, lost[i].epoch);
            json_key(&j, "lost_unix_ms"), json_i64(&j, lost[i].lost_unix_ms);
            json_key(&j, "reason"), json_str(&j, lost[i].reason);
            json_key(&j, "registered"), json_bool(&j, find_record(r, n, lost[i].id) != NULL);
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
        printf("instances  %zu%s\n", n, fenced > 0 ? " (FENCED: cannot prove its membership "
                                                        "current; see docs/FLEET.md)" : "");
        if (n > 0)
            printf("  %-24s %-15s %8s %7s %-7s %-6s %8s %8s  %s\n", "ID", "KIND", "EPOCH",
                   "SERVERS", "WARM_UP", "FENCED", "PREPARED", "FAILED", "REFUSED");
        for (size_t i = 0; i < n; i++) {
            const ch__fleet_record *x = &r[i];
            printf("  %-24s %-15s %8" PRId64 " %7" PRId64 " %-7s %-6s %8" PRId64 " %8" PRId64
                   "  %s%s%s\n",
                   x->id, x->kind, x->epoch, x->servers, x->warm_up[0] ? x->warm_up : "-",
                   !x->fenced ? "no" : strcmp(x->on_fence, "serve") == 0 ? "serves" : "yes",
                   x->prepared, x->prepare_failed, x->refused,
                   x->prepare_error[0] ? (x->refused[0] ? "; prepare: " : "prepare: ") : "",
                   x->prepare_error);
        }
        for (size_t i = 0; i < nlost; i++) {
            if (lost[i].epoch == 0) {
                printf("lost       %s: %s\n", lost[i].id, lost[i].reason);
                continue;
            }
            printf("lost       %s: epoch %" PRId64 " was committed without it %.1f s ago (%s)%s\n",
                   lost[i].id, lost[i].epoch, (double)(now_ms - lost[i].lost_unix_ms) / 1000.0,
                   lost[i].reason,
                   find_record(r, n, lost[i].id) != NULL ? "; registered again, not yet current"
                                                         : "; not registered since");
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
    free(lost);
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
    docinfo d;
    doc_info("(the pending document)", p.value, p.len, p.mod_rev, &d);
    int64_t e = d.valid ? d.epoch : p.mod_rev, mod_rev = p.mod_rev;
    free(p.key), free(p.value);
    ch__etcd_op del = {f->pending, NULL, 0, 0};
    bool ok;
    int64_t rev;
    char why[600];
    if (txn(f, f->pending, mod_rev, &del, 1, &ok, &rev, why, sizeof(why)) != 0)
        ffail(f, "%s", why);
    if (!ok)
        ffail(f, "the pending change at %s changed while aborting it (epoch %" PRId64
                 " is gone): run status", f->url, e);
    printf("aborted the pending change (epoch %" PRId64 ") at %s\n", e, f->url);
    return 0;
}

/* ---- forget --------------------------------------------------------------------------------- */

/* Deletes K/members/ID and K/lost/ID: an instance gone for good is no longer reported lost. A
 * live one (its record is there) is refused: stop it first. */
static int fleet_forget(fctx *f, const char *id)
{
    char why[600];
    char *rec = ch__fleet_key(f->prefix, id), *mem = ch__fleet_key(f->members, id),
         *lost = ch__fleet_key(f->lost, id);
    if (rec == NULL || mem == NULL || lost == NULL)
        cli_fail(f->c, "out of memory");
    ch__etcd_kv kv;
    if (get1(f, rec, &kv)) {
        free(kv.key), free(kv.value);
        ffail(f, "instance %s is live (%s exists): stop it first", id, rec);
    }
    ch__etcd_op del[2] = {{mem, NULL, 0, 0}, {lost, NULL, 0, 0}};
    bool ok;
    int64_t rev;
    if (txn_n(f, NULL, 0, del, 2, &ok, &rev, why, sizeof(why)) != 0)
        ffail(f, "%s", why);
    printf("forgot instance %s at %s\n", id, f->url);
    free(rec);
    free(mem);
    free(lost);
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
/* Not on e yet, and serving: a fenced instance that refuses its requests serves nothing stale. */
static bool not_on(const ch__fleet_record *r, int64_t e)
{
    return r->epoch < e && !(r->fenced && strcmp(r->on_fence, "serve") != 0);
}

/* The instances seen during an apply: those whose record vanished are its lost ones. */
typedef struct seen_inst {
    char id[128];
    int64_t gone_ms;      /* mono_ms when its record was first missing (0: present) */
    int64_t gone_unix_ms;
    bool before;          /* a member already without a record when the apply began */
} seen_inst;

typedef struct seen_set {
    seen_inst *v;
    size_t n, cap;
} seen_set;

/* id's entry in s, added (present) when new. */
static seen_inst *seen_get(const cli *c, seen_set *s, const char *id)
{
    for (size_t k = 0; k < s->n; k++)
        if (strcmp(s->v[k].id, id) == 0)
            return &s->v[k];
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 8;
        seen_inst *v = realloc(s->v, s->cap * sizeof(*s->v));
        if (v == NULL)
            cli_fail(c, "out of memory");
        s->v = v;
    }
    seen_inst *x = &s->v[s->n++];
    memset(x, 0, sizeof(*x));
    snprintf(x->id, sizeof(x->id), "%s", id);
    return x;
}

/* Notes the records of one poll: new ids join, ids missing start (or keep) their gone time,
 * ids back clear it. */
static void seen_update(const cli *c, seen_set *s, const ch__fleet_record *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        seen_get(c, s, r[i].id);
    for (size_t k = 0; k < s->n; k++) {
        if (find_record(r, n, s->v[k].id) != NULL) {
            s->v[k].gone_ms = s->v[k].gone_unix_ms = 0;
            s->v[k].before = false;
        } else if (s->v[k].gone_ms == 0) {
            s->v[k].gone_ms = mono_ms();
            s->v[k].gone_unix_ms = unix_us() / 1000;
        }
    }
}

/* The members without a record as the apply begins: lost already, nothing to wait for. */
static void seen_members(fctx *f, seen_set *s, const ch__fleet_record *r, size_t n)
{
    ch__fleet_member *m;
    size_t nm;
    char why[600];
    if (members(f, &m, &nm, why, sizeof(why)) != 0)
        ffail(f, "%s", why);
    for (size_t i = 0; i < nm; i++) {
        if (find_record(r, n, m[i].id) != NULL)
            continue;
        seen_inst *x = seen_get(f->c, s, m[i].id);
        x->gone_ms = mono_ms() - LOST_MARGIN_MS;
        x->gone_unix_ms = unix_us() / 1000;
        x->before = true;
    }
    free(m);
}

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

/* The epoch to propose: above the committed one, above every epoch an instance serves, has
 * seen, holds prepared or refused, and above etcd's revision (docs/FLEET.md, "Epochs"), so no
 * instance can refuse it as old, whatever explicit epochs were written before. */
static int64_t next_epoch(int64_t rev, const docinfo *k, const ch__fleet_record *r, size_t n)
{
    int64_t e = rev;
    if (k->valid && k->epoch > e)
        e = k->epoch;
    for (size_t i = 0; i < n; i++) {
        int64_t v[] = {r[i].epoch, r[i].seen_epoch, r[i].prepared, r[i].prepare_failed};
        for (size_t j = 0; j < sizeof(v) / sizeof(v[0]); j++)
            if (v[j] > e)
                e = v[j];
    }
    return e + 1;
}

/* 1. Propose: K/pending holds the document with epoch E, only if there is none and K is as
 * read. Sets f->proposed (K/pending's revision) and f->proposed_epoch; exits on failure. */
static void propose(fctx *f, const ch_conf_pool *p, char **doc)
{
    const cli *c = f->c;
    char why[1200];
    for (int attempt = 0; attempt < PROPOSE_TRIES; attempt++) {
        ch__etcd_kv *kvs;
        size_t nk;
        int64_t rev;
        if (range_rev(f, f->key, false, &kvs, &nk, &rev, why, sizeof(why)) != 0)
            ffail(f, "%s", why);
        docinfo k = {0};
        int64_t k_rev = nk > 0 ? kvs[0].mod_rev : 0;
        if (nk > 0)
            doc_info(f->url, kvs[0].value, kvs[0].len, kvs[0].mod_rev, &k);
        ch__etcd_kvs_free(kvs, nk);
        ch__fleet_record *r;
        size_t n;
        if (records(f, &r, &n, why, sizeof(why)) != 0)
            ffail(f, "%s", why);
        int64_t e = next_epoch(rev, &k, r, n);
        free(r);
        free(*doc);
        *doc = doc_json(c, p, e);
        ch__etcd_cmp cmp[2] = {{f->pending, 0}, {f->key, k_rev}};
        ch__etcd_op put = {f->pending, *doc, strlen(*doc), 0};
        bool ok;
        int64_t wrote;
        if (txn_n(f, cmp, 2, &put, 1, &ok, &wrote, why, sizeof(why)) != 0)
            ffail(f, "%s", why);
        if (ok) {
            f->proposed = wrote;
            f->proposed_epoch = e;
            return;
        }
        ch__etcd_kv cur;
        if (get1(f, f->pending, &cur)) {
            docinfo d;
            doc_info("(the pending document)", cur.value, cur.len, cur.mod_rev, &d);
            free(cur.key), free(cur.value);
            snprintf(why, sizeof(why), "a change is pending (epoch %" PRId64 "): wait for it or "
                     "run `chash fleet abort`", d.valid ? d.epoch : cur.mod_rev);
            apply_json_fail(c, f, 0, "propose", why);
            ffail(f, "%s", why);
        }
        /* K was written between the read and the proposal: read it again. */
    }
    snprintf(why, sizeof(why), "%s kept changing while proposing (%d tries): who else writes it?",
             f->url, PROPOSE_TRIES);
    apply_json_fail(c, f, 0, "propose", why);
    ffail(f, "%s", why);
}

/* The reason apply gives for committing without a lost instance (its K/lost/<id> note too). */
static void lost_reason(char *out, size_t cap, const seen_inst *x, int64_t t_commit)
{
    if (x->before)
        snprintf(out, cap, "a member (K/members/) with no record when the apply began: its lease "
                 "expired, so it lost etcd, was stopped or died, and fenced itself before that "
                 "(docs/FLEET.md); `chash fleet forget %s` if it is gone for good", x->id);
    else
        snprintf(out, cap, "its record (under its lease) vanished %" PRId64 " ms before the "
                 "commit: its lease expired, so it lost etcd, was stopped or died, and fenced "
                 "itself before that (docs/FLEET.md)", t_commit - x->gone_ms);
}

/* 2. Prepare: waits until every live instance reports prepared == e (one prepare_failed == e
 * aborts); an instance whose record vanishes (its lease expired) is waited for LOST_MARGIN_MS
 * more, then committed without (seen). t0: when the wait's timeout started. *r, *n: the
 * records at the end. Exits (withdrawing the change) on a failure, a signal or the timeout. */
static void wait_prepared(fctx *f, int64_t e, int64_t t0, ch__fleet_record **r, size_t *n,
                          seen_set *seen, bool *members_read)
{
    const cli *c = f->c;
    char why[1200];
    int64_t timeout = c->timeout_ms > 0 ? (int64_t)c->timeout_ms : DEFAULT_TIMEOUT_MS;
    for (;;) {
        free(*r);
        *r = NULL;
        if (records(f, r, n, why, sizeof(why)) != 0) {
            apply_json_fail(c, f, e, "prepare", why);
            ffail(f, "%s", why);
        }
        if (!*members_read)
            seen_members(f, seen, *r, *n);
        *members_read = true;
        seen_update(c, seen, *r, *n);
        for (size_t i = 0; i < *n; i++) {
            if ((*r)[i].prepare_failed == e) {
                snprintf(why, sizeof(why), "instance %s could not prepare epoch %" PRId64 ": %s",
                         (*r)[i].id, e,
                         (*r)[i].prepare_error[0] ? (*r)[i].prepare_error : "(no reason)");
                apply_json_fail(c, f, e, "prepare", why);
                ffail(f, "%s", why);
            }
        }
        size_t ready = 0;
        for (size_t i = 0; i < *n; i++)
            ready += (*r)[i].prepared == e;
        bool settled = true; /* every lost instance gone long enough */
        for (size_t k = 0; k < seen->n; k++)
            settled &= seen->v[k].gone_ms == 0 || mono_ms() - seen->v[k].gone_ms >= LOST_MARGIN_MS;
        if (ready == *n && settled)
            return;
        if (interrupted) {
            snprintf(why, sizeof(why), "interrupted (signal %d) while %zu of %zu instances had "
                     "prepared epoch %" PRId64, (int)interrupted, ready, *n, e);
            apply_json_fail(c, f, e, "prepare", why);
            ffail(f, "%s", why);
        }
        if (mono_ms() - t0 >= timeout) {
            char ids[1000];
            id_list(ids, sizeof(ids), *r, *n, not_prepared, e);
            snprintf(why, sizeof(why), "%zu of %zu instances did not prepare epoch %" PRId64
                     " within %" PRId64 " ms: %s", *n - ready, *n, e, timeout, ids);
            apply_json_fail(c, f, e, "prepare", why);
            ffail(f, "%s", why);
        }
        sleep_ms(POLL_MS);
    }
}

/* 2b. The staged copy (apply --migrate; docs/FLEET.md, "Staged migration"). Every live
 * instance has prepared epoch e, so each stages it: a write of a key whose owner changes is
 * deleted at its next owner once written (route_stage.c). The keys that move are copied from
 * their owners under the committed document to their owners under NEW, each copy confirmed
 * (migrate.h): after it, the next owners hold each moved key's latest value or nothing. Then
 * the instances are checked again: the same ones, all still prepared (one that joined
 * meanwhile may have written unstaged), before the commit. */
static void staged_copy(fctx *f, int64_t e, ch__fleet_record **r, size_t *n, seen_set *seen,
                        bool *members_read)
{
    const cli *c = f->c;
    char why[1200];
    ch__etcd_kv kv;
    if (!get1(f, f->key, &kv)) {
        if (!c->json)
            printf("no committed membership at %s: nothing to copy\n", f->url);
        return;
    }
    if (c->match == NULL && !c->json)
        cli_warn(c, "no --match: every key on %s's servers is taken for this pool's; on a "
                    "server shared with other pools, their keys it would place there are deleted",
                 f->path);
    size_t n0 = *n;
    char **ids = xcalloc(c, n0 + 1, sizeof(*ids));
    for (size_t i = 0; i < n0; i++)
        ids[i] = xstrdup(c, (*r)[i].id);
    side old, neu;
    side_load_doc(c, f->path, kv.value, kv.len, &old);
    side_load(c, f->path, &neu);
    free(kv.key), free(kv.value);
    /* A copy replaces what the next owner holds: before the commit that is never the key's
     * current value (its owner is the old one, and staged writes delete there), but may be an
     * older copy it kept from a previous ownership, which a copy that leaves it "present"
     * would serve after the switch. */
    cli copy = *c;
    copy.replace = true;
    int64_t t0 = mono_ms();
    int st = mig_run(&copy, &old, &neu, false, true, &f->mig, why, sizeof(why));
    f->mig_ms = mono_ms() - t0;
    f->migrated = true;
    if (st != 0) {
        apply_json_fail(c, f, e, "migrate", why);
        ffail(f, "the copy of epoch %" PRId64 "'s moved keys: %s", e, why);
    }
    if (!c->json)
        printf("copied the moved keys in %" PRId64 " ms: %" PRIu64 " moved, %" PRIu64
               " copied, %" PRIu64 " present, %" PRIu64 " expired, %" PRIu64 " changed (written "
               "meanwhile: their copies dropped); %" PRIu64 " older copies deleted at the new "
               "owners first\n",
               f->mig_ms, f->mig.moved, f->mig.copied, f->mig.present, f->mig.expired,
               f->mig.changed, f->mig.cleaned);
    wait_prepared(f, e, mono_ms(), r, n, seen, members_read);
    for (size_t i = 0; i < *n; i++) {
        bool known = false;
        for (size_t k = 0; k < n0 && !known; k++)
            known = strcmp(ids[k], (*r)[i].id) == 0;
        if (!known) {
            snprintf(why, sizeof(why), "instance %s joined during the copy: its writes may not "
                     "have been staged; nothing was committed (run the apply again)", (*r)[i].id);
            apply_json_fail(c, f, e, "migrate", why);
            ffail(f, "%s", why);
        }
    }
    for (size_t k = 0; k < n0; k++)
        free(ids[k]);
    free(ids);
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
    doc_info("(the membership document)", doc, strlen(doc), 0, &d);
    if (!d.valid)
        cli_fail(c, "internal error: the document built from the pool is refused: %s", d.error);

    catch_signals();
    proposer = f;
    atexit(withdraw_at_exit);
    propose(f, p, &doc);
    int64_t e = f->proposed_epoch;
    int64_t t_prop = mono_ms();
    if (!c->json)
        printf("proposed epoch %" PRId64 " (%zu servers) at %s/pending\n", e, d.servers, f->url);

    ch__fleet_record *r = NULL;
    size_t n = 0;
    seen_set seen = {0};
    bool members_read = false;
    wait_prepared(f, e, t_prop, &r, &n, &seen, &members_read);
    int64_t prepare_ms = mono_ms() - t_prop;
    if (c->migrate)
        staged_copy(f, e, &r, &n, &seen, &members_read);

    /* 3. Commit: K = the document with its epoch, K/pending deleted, and a K/lost/<id> note per
     * instance committed without, if K/pending is still ours. */
    size_t nops = 2, nlost = 0;
    for (size_t k = 0; k < seen.n; k++)
        nlost += seen.v[k].gone_ms != 0;
    char *final = doc_json(c, p, e);
    ch__etcd_op *ops = xcalloc(c, 2 + nlost, sizeof(*ops));
    char **notes = xcalloc(c, nlost + 1, sizeof(*notes)), **note_keys = xcalloc(c, nlost + 1,
                                                                                 sizeof(char *));
    ops[0] = (ch__etcd_op){f->key, final, strlen(final), 0};
    ops[1] = (ch__etcd_op){f->pending, NULL, 0, 0};
    int64_t note_lease = 0;
    if (nlost > 0) { /* the notes expire by themselves: a day, unless their instance returns */
        size_t len;
        char *ans = call(f, "/v3/lease/grant", ch__etcd_grant_body(LOST_NOTE_TTL_S), &len, why,
                         sizeof(why));
        int64_t ttl = 0;
        if (ans == NULL || ch__etcd_parse_lease(ans, len, &note_lease, &ttl, why, sizeof(why)) != 0)
            note_lease = 0; /* the notes then stay until their instances return */
        free(ans);
    }
    int64_t t_commit_us = unix_us(); /* just before the commit: the swaps are measured from it */
    int64_t t_commit = mono_ms();
    for (size_t k = 0, m = 0; k < seen.n; k++) {
        if (seen.v[k].gone_ms == 0)
            continue;
        ch__fleet_lost l = {0};
        snprintf(l.id, sizeof(l.id), "%s", seen.v[k].id);
        l.epoch = e;
        l.lost_unix_ms = seen.v[k].gone_unix_ms;
        lost_reason(l.reason, sizeof(l.reason), &seen.v[k], t_commit);
        notes[m] = ch__fleet_lost_json(&l);
        note_keys[m] = ch__fleet_key(f->lost, l.id);
        if (notes[m] == NULL || note_keys[m] == NULL)
            cli_fail(c, "out of memory");
        ops[nops++] = (ch__etcd_op){note_keys[m], notes[m], strlen(notes[m]), note_lease};
        m++;
    }
    int64_t rev;
    bool ok;
    if (txn(f, f->pending, f->proposed, ops, nops, &ok, &rev, why, sizeof(why)) != 0) {
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
        if (n == 0 && nlost == 0)
            printf("no live instances: committed epoch %" PRId64 " at once\n", e);
        else
            printf("%zu instances prepared in %" PRId64 " ms; committed epoch %" PRId64 "%s\n",
                   n, prepare_ms, e, nlost > 0 ? " WITHOUT the instances below" : "");
        for (size_t k = 0; k < seen.n; k++) {
            if (seen.v[k].gone_ms == 0)
                continue;
            char reason[400];
            lost_reason(reason, sizeof(reason), &seen.v[k], t_commit);
            printf("  without %s: %s\n", seen.v[k].id, reason);
        }
    }

    /* 4. Swap: every live instance serves E (or a newer epoch: K was written again since), or
     * is fenced and refuses its requests; those committed without are not waited for. */
    int ret = nlost > 0 ? 3 : 0;
    for (;;) {
        free(r);
        if (records(f, &r, &n, why, sizeof(why)) != 0) {
            apply_json_fail(c, f, e, "swap", why);
            ffail(f, "committed epoch %" PRId64 ", but %s", e, why);
        }
        size_t on = 0;
        for (size_t i = 0; i < n; i++)
            on += !not_on(&r[i], e);
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
    size_t swapped = 0, fenced = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t sw = r[i].swapped_unix_us;
        fenced += r[i].epoch < e;
        if (r[i].epoch != e || sw <= 0)
            continue;
        smin = swapped == 0 || sw < smin ? sw : smin;
        smax = swapped == 0 || sw > smax ? sw : smax;
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
        json_key(&j, "fenced"), json_int(&j, fenced);
        json_key(&j, "committed_without");
        json_arr(&j);
        for (size_t k = 0; k < seen.n; k++) {
            if (seen.v[k].gone_ms == 0)
                continue;
            char reason[400];
            lost_reason(reason, sizeof(reason), &seen.v[k], t_commit);
            json_obj(&j);
            json_key(&j, "id"), json_str(&j, seen.v[k].id);
            json_key(&j, "reason"), json_str(&j, reason);
            json_end(&j);
        }
        json_end(&j);
        json_key(&j, "prepare_ms"), json_i64(&j, prepare_ms);
        json_key(&j, "commit_unix_us"), json_i64(&j, t_commit_us);
        json_key(&j, "last_swap_unix_us");
        if (swapped)
            json_i64(&j, smax);
        else
            json_null(&j);
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
        json_key(&j, "migration");
        if (f->migrated) {
            json_obj(&j);
            json_key(&j, "moved"), json_int(&j, f->mig.moved);
            json_key(&j, "copied"), json_int(&j, f->mig.copied);
            json_key(&j, "present"), json_int(&j, f->mig.present);
            json_key(&j, "expired"), json_int(&j, f->mig.expired);
            json_key(&j, "changed"), json_int(&j, f->mig.changed);
            json_key(&j, "cleaned"), json_int(&j, f->mig.cleaned);
            json_key(&j, "ms"), json_i64(&j, f->mig_ms);
            json_end(&j);
        } else {
            json_null(&j);
        }
        json_end(&j);
        json_done(&j);
    } else if (n > 0) {
        printf("%zu instances serve epoch %" PRId64 "%s; swap window %.3f ms (first to last "
               "swap), commit to last swap %.3f ms (one clock assumed: loopback or NTP)\n",
               swapped, e, fenced > 0 ? " (the others are fenced: they refuse requests)" : "",
               window_ms, to_last_ms);
    }
    for (size_t k = 0; k < nlost; k++) {
        free(notes[k]);
        free(note_keys[k]);
    }
    free(notes);
    free(note_keys);
    free(ops);
    free(seen.v);
    free(r);
    free(final);
    free(doc);
    return ret;
}

/* ---- the subcommand ------------------------------------------------------------------------- */

int cmd_fleet(cli *c)
{
    if (c->argc < 1)
        cli_usage(c, "missing action: status, apply, abort or forget (see chash fleet --help)");
    const char *action = c->argv[0];
    bool status = strcmp(action, "status") == 0, apply = strcmp(action, "apply") == 0,
         abrt = strcmp(action, "abort") == 0, forget = strcmp(action, "forget") == 0;
    if (!status && !apply && !abrt && !forget)
        cli_usage(c, "unknown action '%s': status, apply, abort or forget", action);
    int first = forget ? 2 : 1; /* forget ID [CONFIG.yml] */
    if (forget && (c->argc < 2 || c->argv[1][0] == '\0' || strchr(c->argv[1], '/') != NULL))
        cli_usage(c, "forget needs the ID of an instance (as chash fleet status shows it)");
    if (c->argc > first + 1)
        cli_usage(c, "%s takes at most one file (got '%s')", action, c->argv[first + 1]);
    if ((abrt || forget) && c->json)
        cli_usage(c, "--json does not apply to %s", action);
    if (!apply && c->timeout_ms > 0)
        cli_usage(c, "--timeout applies to apply only");
    if (!apply && c->migrate)
        cli_usage(c, "--migrate applies to apply only");
    if ((c->rate || c->parallel || c->batch || c->match) && !c->migrate)
        cli_usage(c, "--rate, --batch, --parallel and --match apply to apply --migrate only");
    const char *path = c->argc == first + 1 ? c->argv[first] : NULL;
    if (apply && path == NULL)
        cli_usage(c, "apply needs NEW.yml");

    fctx f = {.c = c, .path = path};
    ch_config *cfg = NULL;
    ch_conf_pool *p = path ? load_pool(c, path, &cfg) : NULL;
    if (apply && p->nservers == 0)
        cli_fail(c, "%s: pool '%s' has no servers: nothing to apply", path, p->name);
    locate(&f, path, p);
    int rc = status  ? fleet_status(&f)
             : apply ? fleet_apply(&f, p)
             : abrt  ? fleet_abort(&f)
                     : fleet_forget(&f, c->argv[1]);
    proposer = NULL; /* f goes: nothing of it is pending any more */
    fctx_free(&f);
    ch_config_free(cfg);
    return rc;
}

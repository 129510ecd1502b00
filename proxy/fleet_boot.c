/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fleet_boot.c — the first read of the pools in etcd, before the loop runs (fleet_boot.h). Every
 * request blocks, at most FIRST_READ_MS each: a lease, the record under it, the member note,
 * then the pool's document, in that order, so that from the first read on no commit can go
 * without this instance.
 */
#include "fleet_boot.h"
#include "etcd_http.h"
#include "fleet_instance.h"
#include "fleet_member.h"
#include "lease.h"

#include <etcd_msg.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FIRST_READ_MS 3000 /* each blocking request at start: grant, record, read */

/* The record's fields that never change: who the instance is. */
static void record_identity(ch__fleet_record *r, const px_fleet_options *opt,
                            const ch_conf_pool *pc)
{
    char host[100] = "localhost";
    (void)gethostname(host, sizeof(host) - 1);
    host[sizeof(host) - 1] = '\0';
    memset(r, 0, sizeof(*r));
    if (opt->id != NULL)
        snprintf(r->id, sizeof(r->id), "%s", opt->id);
    else
        snprintf(r->id, sizeof(r->id), "%s:%ld", host, (long)getpid());
    snprintf(r->kind, sizeof(r->kind), "chash-proxy");
    snprintf(r->pool, sizeof(r->pool), "%s", pc->name);
    snprintf(r->host, sizeof(r->host), "%s", host);
    r->pid = (int64_t)getpid();
    snprintf(r->warm_up, sizeof(r->warm_up), "off");
    snprintf(r->on_fence, sizeof(r->on_fence), "%s",
             pc->membership_fenced == CH_CONF_FENCED_SERVE ? "serve" : "error");
    r->fenced = 1;
}

/* One blocking request at start (body freed here): the answer, or NULL with why. */
static char *post_sync(const char *endpoint, const char *path, char *body, size_t *len,
                       char *why, size_t whylen)
{
    char *ans = body != NULL ? px_etcd_post_sync(endpoint, path, body, FIRST_READ_MS, len, why,
                                                 whylen)
                             : NULL;
    if (body == NULL)
        snprintf(why, whylen, "out of memory");
    free(body);
    return ans;
}

/* K/members/<id> under a lease of a day (blocking, at start). Best effort: without it, only
 * an apply running when this instance's record vanishes can name it; the keepalive ticks try
 * again. */
static void boot_member(const ch_conf_pool *pc, px_fleet_boot_doc *b)
{
    char why[300];
    size_t len = 0;
    char *ans = post_sync(pc->membership_endpoint, "/v3/lease/grant",
                          ch__etcd_grant_body(CH_FLEET_MEMBER_TTL_S), &len, why, sizeof(why));
    int64_t id = 0, ttl = 0;
    int rc = ans != NULL ? ch__etcd_parse_lease(ans, len, &id, &ttl, why, sizeof(why)) : -1;
    free(ans);
    if (rc != 0)
        return;
    char *prefix = ch__fleet_members_prefix(pc->membership_key);
    char *key = prefix != NULL ? ch__fleet_key(prefix, b->rec.id) : NULL;
    char *json = fleet_member_json(&b->rec);
    char *body = key != NULL && json != NULL ? ch__etcd_put_body(key, json, strlen(json), id)
                                             : NULL;
    free(prefix);
    free(key);
    free(json);
    ans = post_sync(pc->membership_endpoint, "/v3/kv/put", body, &len, why, sizeof(why));
    int64_t rev;
    if (ans != NULL && ch__etcd_parse_write(ans, len, &rev, why, sizeof(why)) == 0)
        b->member_lease = id;
    free(ans);
}

/* Registers pool pc's instance before its first read (blocking): a lease, then its record
 * under it, so that from the first read on no commit can go without this instance. 0, or -1
 * with why (b->lease may be set: the lease is then revoked with the others at shutdown, or
 * expires). */
static int boot_register(const ch_conf_pool *pc, int ttl_s, px_fleet_boot_doc *b, char *why,
                         size_t whylen)
{
    size_t len = 0;
    uint64_t sent = uv_hrtime();
    char *ans = post_sync(pc->membership_endpoint, "/v3/lease/grant", ch__etcd_grant_body(ttl_s),
                          &len, why, whylen);
    int64_t id = 0, ttl = 0;
    int rc = ans != NULL ? ch__etcd_parse_lease(ans, len, &id, &ttl, why, whylen) : -1;
    free(ans);
    if (rc != 0)
        return -1;
    if (ttl <= 0) {
        snprintf(why, whylen, "etcd granted lease %lld with no TTL", (long long)id);
        return -1;
    }
    b->lease = id;
    b->lease_until_ns = px_lease_deadline(sent, ttl);
    char *key = fleet_instance_key(pc->membership_key, b->rec.id);
    char *json = ch__fleet_record_json(&b->rec);
    char *body = key != NULL && json != NULL ? ch__etcd_put_body(key, json, strlen(json), id)
                                             : NULL;
    free(key);
    free(json);
    ans = post_sync(pc->membership_endpoint, "/v3/kv/put", body, &len, why, whylen);
    int64_t rev;
    rc = ans != NULL ? ch__etcd_parse_write(ans, len, &rev, why, whylen) : -1;
    free(ans);
    b->registered = rc == 0;
    if (rc == 0)
        boot_member(pc, b);
    return rc;
}

/* K's document from etcd (blocking): 1 and *kv, 0 when K does not exist, -1 (why) when etcd
 * cannot be read. */
static int read_key(const char *endpoint, const char *key, ch__etcd_kv *kv, char *why,
                    size_t whylen)
{
    size_t len = 0;
    char *ans = post_sync(endpoint, "/v3/kv/range", ch__etcd_range_body(key, false), &len, why,
                          whylen);
    if (ans == NULL)
        return -1;
    int64_t rev;
    ch__etcd_kv *kvs = NULL;
    size_t n = 0;
    int rc = ch__etcd_parse_range(ans, len, &rev, &kvs, &n, why, whylen);
    free(ans);
    if (rc != 0)
        return -1;
    if (n == 0)
        return 0;
    *kv = kvs[0];
    kvs[0].key = kvs[0].value = NULL;
    ch__etcd_kvs_free(kvs, n);
    return 1;
}

void px_fleet_boot_free(px_fleet_boot *b)
{
    for (size_t i = 0; b != NULL && i < b->n; i++) {
        px_fleet_boot_doc *bd = &b->docs[i];
        if (bd->endpoint != NULL) { /* leases not taken over: their keys go now */
            fleet_lease_revoke(bd->endpoint, bd->lease);
            fleet_lease_revoke(bd->endpoint, bd->member_lease);
        }
        free(b->names[i]);
        free(bd->endpoint);
        free(bd->text);
    }
    if (b != NULL) {
        free(b->names);
        free(b->docs);
    }
    free(b);
}

/* Pool pc's membership document read from etcd (blocking) and applied to pc: 1 (*kv holds it,
 * *epoch its "epoch" or 0), 0 when its key does not exist, -1 when etcd cannot be read or the
 * document is refused; why says which for 0 and -1. *answered: whether etcd answered. */
static int read_doc(ch_conf_pool *pc, ch__etcd_kv *kv, int64_t *epoch, bool *answered,
                    char *why, size_t whylen)
{
    int got = read_key(pc->membership_endpoint, pc->membership_key, kv, why, whylen);
    *answered = got >= 0;
    if (got == 0)
        snprintf(why, whylen, "%s does not exist yet", pc->membership);
    ch_config_error err;
    if (got == 1 &&
        ch_config_membership_doc(pc, pc->membership, kv->value, kv->len, epoch, &err) != 0) {
        char msg[600];
        snprintf(why, whylen, "its document is refused: %s",
                 ch_config_error_str(&err, msg, sizeof(msg)));
        got = -1;
    }
    return got;
}

/* The rule the start and -t share for a pool whose document could not be had (unread says why:
 * etcd down, the key absent, the document refused): with servers in the file it starts fenced
 * (docs/FLEET.md, "Fencing"); without, it has nothing it could serve, not even fenced, nor a
 * placement to build, so it cannot start. 0, or -1 with the refusal, naming the pool, in why. */
static int startable_unread(const ch_conf_pool *pc, const char *unread, char *why, size_t whylen)
{
    if (pc->nservers > 0)
        return 0;
    snprintf(why, whylen, "pool %s: cannot read its membership from %s (%s), and the file has no "
             "servers", pc->name, pc->membership, unread);
    return -1;
}

int px_fleet_check(ch_config *cfg, char *why, size_t whylen)
{
    for (size_t i = 0; i < cfg->npools; i++) {
        ch_conf_pool *pc = &cfg->pools[i];
        if (!ch_conf_membership_etcd(pc))
            continue;
        char unread[600];
        ch__etcd_kv kv = {0};
        int64_t epoch = 0;
        bool answered;
        int got = read_doc(pc, &kv, &epoch, &answered, unread, sizeof(unread));
        free(kv.key);
        free(kv.value);
        if (got != 1 && startable_unread(pc, unread, why, whylen) != 0)
            return -1;
    }
    return 0;
}

int px_fleet_bootstrap(ch_config *cfg, px_log *log, const px_fleet_options *opt,
                       px_fleet_boot **out)
{
    *out = NULL;
    size_t any = 0;
    for (size_t i = 0; i < cfg->npools; i++)
        any += ch_conf_membership_etcd(&cfg->pools[i]);
    if (any == 0)
        return 0;
    px_fleet_boot *b = calloc(1, sizeof(*b));
    if (b == NULL || (b->names = calloc(cfg->npools, sizeof(*b->names))) == NULL ||
        (b->docs = calloc(cfg->npools, sizeof(*b->docs))) == NULL) {
        px_fleet_boot_free(b);
        PX_LOGL(log, PX_LOG_ERR, "out of memory");
        return -1;
    }
    b->n = cfg->npools;
    int ttl_s = opt->ttl_s > 0 ? opt->ttl_s : PX_FLEET_DEFAULT_TTL_S;
    b->ttl_s = ttl_s;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < cfg->npools; i++) {
        ch_conf_pool *pc = &cfg->pools[i];
        if ((b->names[i] = strdup(pc->name)) == NULL)
            rc = -1;
        if (rc != 0 || !ch_conf_membership_etcd(pc))
            continue;
        px_fleet_boot_doc *bd = &b->docs[i];
        record_identity(&bd->rec, opt, pc);
        if ((bd->endpoint = strdup(pc->membership_endpoint)) == NULL) {
            PX_LOGL(log, PX_LOG_ERR, "out of memory");
            rc = -1;
            continue;
        }
        char why[600];
        ch__etcd_kv kv = {0};
        int64_t epoch = 0;
        int got = boot_register(pc, ttl_s, bd, why, sizeof(why));
        if (got == 0)
            got = read_doc(pc, &kv, &epoch, &bd->synced, why, sizeof(why));
        bool serve = pc->membership_fenced == CH_CONF_FENCED_SERVE;
        char no[800];
        if (got == 1) {
            bd->text = kv.value;
            bd->len = kv.len;
            bd->epoch = epoch != 0 ? epoch : kv.mod_rev;
            kv.value = NULL;
            PX_LOGL(log, PX_LOG_NOTICE, "pool %s: membership from %s: epoch %lld, %zu servers",
                    pc->name, pc->membership, (long long)bd->epoch, pc->nservers);
        } else if (startable_unread(pc, why, no, sizeof(no)) != 0) {
            PX_LOGL(log, PX_LOG_ERR, "%s", no);
            rc = -1;
        } else if (serve) {
            PX_LOGL(log, PX_LOG_WARN,
                    "pool %s: cannot read its membership from %s (%s): serving the file's %zu "
                    "servers until etcd answers (membership_fenced: serve)",
                    pc->name, pc->membership, why, pc->nservers);
        } else {
            bd->synced = false;
            PX_LOGL(log, PX_LOG_WARN,
                    "pool %s: cannot read its membership from %s (%s): refusing its requests "
                    "until etcd answers (the file's %zu servers are not known to be current; "
                    "membership_fenced: serve would serve them)",
                    pc->name, pc->membership, why, pc->nservers);
        }
        free(kv.key);
        free(kv.value);
    }
    if (rc != 0) {
        px_fleet_boot_free(b);
        return -1;
    }
    *out = b;
    return 0;
}

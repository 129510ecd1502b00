/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lookup.c — `chash lookup`: the owner, and optionally the failover walk, of each key.
 */
#define _POSIX_C_SOURCE 200809L
#include "commands.h"

#include <chash_config.h>
#include <chash_route.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* twemproxy's "random" sends each request to a random server: the owner shown is one draw, by
 * ch_lookup_hash() with a value from this generator (splitmix64). 0 when not in use. */
static uint64_t draw_state;

static uint64_t draw(void)
{
    uint64_t z = (draw_state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* The plain output's escaping, so a line is always KEY<TAB>OWNER...<NEWLINE> whatever the key
 * holds: a backslash is written "\\\\", a tab "\\t", a newline "\\n", a carriage return
 * "\\r", any other control byte (and DEL) "\\xHH"; every other byte as it is (the output is
 * bytes, as the keys are: invalid UTF-8 passes through). So the escaped text never holds a tab
 * or a newline of its own, and unescaping it gives the key back. */
static void put_escaped(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        switch (ch) {
        case '\\': fputs("\\\\", stdout); break;
        case '\t': fputs("\\t", stdout); break;
        case '\n': fputs("\\n", stdout); break;
        case '\r': fputs("\\r", stdout); break;
        default:
            if (ch < 0x20 || ch == 0x7f)
                printf("\\x%02x", ch);
            else
                putchar(ch);
        }
    }
}

static void put_escaped_str(const char *s)
{
    put_escaped(s, strlen(s));
}

/* A node as the user knows it: host:port (and the server's name, when the pool names its
 * servers) from a config, else the id. */
static void print_node(const fleet *f, size_t i)
{
    if (f->addr[i] == NULL) {
        put_escaped_str(f->nodes[i].id);
        return;
    }
    put_escaped_str(f->addr[i]);
    if (f->named) {
        putchar('\t');
        put_escaped_str(f->name[i] ? f->name[i] : "");
    }
}

/* --json: one object a line (JSON Lines), so a stream of keys gives a stream of objects. */
static void json_node(json *j, const fleet *f, size_t i)
{
    json_obj(j);
    json_key(j, "node");
    json_str(j, f->addr[i] ? f->addr[i] : f->nodes[i].id);
    json_key(j, "name");
    json_str(j, f->name[i]);
    json_end(j);
}

/* "# version V": the membership's version (chash_route.h), the pool's "version" or a content
 * hash of the members and options, as libchash-cache and chash-proxy report it. */
static char version[128]; /* --show-version: the membership's version */

static void print_version(const cli *c, const fleet *f, const ch_options *opt)
{
    ch_member *m = xmalloc(c, f->n * sizeof(*m));
    for (size_t i = 0; i < f->n; i++)
        m[i] = (ch_member){.id = f->nodes[i].id,
                           .addr = f->addr[i] ? f->addr[i] : f->nodes[i].id,
                           .name = f->name[i],
                           .weight = f->nodes[i].weight};
    ch_membership *ms;
    ch_error err = {.size = sizeof(err)};
    int rc = ch_membership_build_err(m, f->n, opt, f->conf_version, &ms, &err);
    free(m);
    if (rc != CH_OK)
        cli_fail(c, "cannot build the membership of %s: %s", f->source, err.message);
    snprintf(version, sizeof(version), "%s", ch_membership_version(ms));
    if (!c->json)
        printf("# version %s\n", version);
    ch_membership_free(ms);
}

/* The table places by the key itself, not a key hash (pymemcache@3). */
static bool keyed;
static bool json_out; /* --json */

/* A listener with routes (chash-proxy's prefix routing): the pool of the key being looked up,
 * printed after the key; NULL otherwise. The key is placed without its stripped prefix
 * (placed_off bytes of it). */
static const char *route_pool;
static size_t placed_off;

static void lookup_one(const ch_table *t, const fleet *f, size_t r, size_t *walk, const char *key,
                       size_t len)
{
    size_t n = 1;
    const char *shown = key;
    size_t shown_len = len;
    key += placed_off;
    len -= placed_off;
    uint64_t h = draw_state ? draw() : ch_key_hash(t, key, len);
    if (keyed)
        walk[0] = ch_lookup(t, key, len);
    else if (r > 1)
        ch_replicas_hash(t, h, r, walk, &n); /* cannot fail: r > 1 is refused for jump */
    else
        walk[0] = ch_lookup_hash(t, h);
    key = shown, len = shown_len; /* printed as given */
    if (!json_out) {
        put_escaped(key, len);
        if (route_pool != NULL) {
            putchar('\t');
            put_escaped_str(route_pool);
        }
        for (size_t i = 0; i < n; i++) {
            putchar('\t');
            print_node(f, walk[i]);
        }
        putchar('\n');
        return;
    }
    json j;
    json_init(&j, stdout);
    json_obj(&j);
    json_key(&j, "key");
    json_strn(&j, key, len);
    if (!utf8_valid(key, len)) { /* "key" has U+FFFD for its invalid bytes: these are exact */
        static const char digits[] = "0123456789abcdef";
        char *hex = xmalloc(NULL, 2 * len + 1);
        for (size_t i = 0; i < len; i++) {
            hex[2 * i] = digits[(unsigned char)key[i] >> 4];
            hex[2 * i + 1] = digits[(unsigned char)key[i] & 15];
        }
        hex[2 * len] = '\0';
        json_key(&j, "key_hex");
        json_str(&j, hex);
        free(hex);
    }
    if (route_pool != NULL) {
        json_key(&j, "pool");
        json_str(&j, route_pool);
    }
    json_key(&j, "owner");
    json_str(&j, f->addr[walk[0]] ? f->addr[walk[0]] : f->nodes[walk[0]].id);
    json_key(&j, "nodes");
    json_arr(&j);
    for (size_t i = 0; i < n; i++)
        json_node(&j, f, walk[i]);
    json_end(&j);
    if (version[0]) {
        json_key(&j, "version");
        json_str(&j, version);
    }
    json_end(&j);
    fputc('\n', stdout); /* json_done() would flush each line: the buffer does it */
}

/* One pool's table as --config and the options make it; *algo its algorithm. */
static ch_table *pool_table(cli *c, fleet *f, ch_algo_id *algo_out)
{
    ch_algo_id algo = cli_algo1(c, fleet_algo_spec(c, f, "ring"), "ring");
    if (algo == CH_ALGO_JUMP && c->replicas > 1)
        cli_usage(c, "jump has no failover order: --replicas must be 1 with --algo jump");
    uint32_t vnodes = 0;
    cli_vnodes(c, c->vnodes ? c->vnodes : "160", &vnodes, 1);
    ch_options opt = cli_options(c, f, algo, fleet_hash(c, f), vnodes);
    ch_table *t = cli_build(c, f, &opt, false);
    size_t probe[2], nprobe;
    if (c->replicas > 1 && ch_replicas_hash(t, 0, 2, probe, &nprobe) == CH_EUNSUPPORTED)
        cli_usage(c, "%s has no failover order: --replicas must be 1 with it",
                  ch_algo_name(algo));
    *algo_out = algo;
    return t;
}

/* The pool of the config whose routes `chash lookup --config` follows: --pool's, else the one
 * pool with routes of a file of several; NULL when that pool has none (a plain lookup). */
static const ch_conf_pool *routed_pool(const cli *c, const ch_config *cfg)
{
    if (c->pool != NULL) {
        const ch_conf_pool *p = ch_config_pool(cfg, c->pool);
        return p != NULL && p->nroutes > 0 ? p : NULL;
    }
    const ch_conf_pool *found = NULL;
    for (size_t i = 0; i < cfg->npools; i++)
        if (cfg->pools[i].nroutes > 0) {
            if (found != NULL)
                return NULL; /* ambiguous: fleet_from_config asks for --pool */
            found = &cfg->pools[i];
        }
    return found;
}

/* The pool key[0, len) goes to under listener p's routes (longest prefix; "" the catch-all; no
 * match: p itself) and how many bytes of it are stripped. */
static const char *route_of(const ch_conf_pool *p, const char *key, size_t len, size_t *strip)
{
    const ch_conf_route *best = NULL;
    for (size_t i = 0; i < p->nroutes; i++) {
        const ch_conf_route *r = &p->routes[i];
        if (r->prefix_len <= len && memcmp(r->prefix, key, r->prefix_len) == 0 &&
            (best == NULL || r->prefix_len > best->prefix_len))
            best = r;
    }
    *strip = best != NULL && best->strip ? best->prefix_len : 0;
    return best != NULL ? best->pool : p->name;
}

/* A listener with routes: each key's pool and that pool's owner. Keys come from the arguments
 * or, for "-", stdin. */
static int lookup_routed(cli *c, ch_config *cfg, const ch_conf_pool *p)
{
    size_t n = p->nroutes + 1, ntab = 0;
    const char **names = xmalloc(c, n * sizeof(*names));
    ch_table **tabs = xmalloc(c, n * sizeof(*tabs));
    fleet *fl = xmalloc(c, n * sizeof(*fl));
    bool *keyed_of = xmalloc(c, n * sizeof(*keyed_of));
    json_out = c->json;
    size_t *walk = xmalloc(c, c->replicas * sizeof(*walk));
    static char outbuf[1 << 16];
    setvbuf(stdout, outbuf, _IOFBF, sizeof(outbuf));
    char *line = NULL;
    size_t cap = 0;
    for (int a = 0; a < c->argc; a++) {
        bool in = strcmp(c->argv[a], "-") == 0;
        for (;;) {
            const char *key = c->argv[a];
            size_t len = strlen(key);
            if (in) {
                ssize_t got = getline(&line, &cap, stdin);
                if (got < 0)
                    break;
                if (got > 0 && line[got - 1] == '\n')
                    got--;
                key = line, len = (size_t)got;
            }
            size_t strip = 0;
            const char *name = route_of(p, key, len, &strip);
            size_t i = 0;
            while (i < ntab && strcmp(names[i], name) != 0)
                i++;
            if (i == ntab) { /* this pool's table, built on its first key */
                ch_algo_id algo;
                fleet_from_config(c, c->config, name, &fl[i]);
                tabs[i] = pool_table(c, &fl[i], &algo);
                keyed_of[i] = (ch_algo_flags(algo) & CH_ALGO_F_KEYED) != 0;
                names[i] = name;
                ntab++;
            }
            keyed = keyed_of[i];
            route_pool = name;
            placed_off = strip;
            lookup_one(tabs[i], &fl[i], c->replicas, walk, key, len);
            if (!in)
                break;
        }
        if (in && ferror(stdin))
            cli_fail(c, "cannot read stdin");
    }
    free(line);
    for (size_t i = 0; i < ntab; i++) {
        ch_table_free(tabs[i]);
        fleet_free(&fl[i]);
    }
    free(tabs);
    free(fl);
    free(names);
    free(keyed_of);
    free(walk);
    ch_config_free(cfg);
    if (fflush(stdout) != 0)
        cli_fail(c, "cannot write the output");
    return 0;
}

int cmd_lookup(cli *c)
{
    if (c->argc == 0)
        cli_usage(c, "no keys: give KEY... or - to read keys from stdin");
    if (c->config != NULL) {
        ch_config *cfg = NULL;
        ch_config_error err;
        if (ch_config_load(c->config, &cfg, &err) == CH_OK) {
            const ch_conf_pool *p = routed_pool(c, cfg);
            if (p != NULL) {
                if (c->show_version)
                    cli_usage(c, "--show-version: pool %s has routes; look its pools up "
                                 "one by one (--pool)", p->name);
                return lookup_routed(c, cfg, p);
            }
            ch_config_free(cfg);
        } /* else fleet_from_cli reports the error */
    }
    fleet f;
    fleet_from_cli(c, &f);
    ch_algo_id algo = cli_algo1(c, fleet_algo_spec(c, &f, "ring"), "ring");
    if (algo == CH_ALGO_JUMP && c->replicas > 1)
        cli_usage(c, "jump has no failover order: --replicas must be 1 with --algo jump");
    uint32_t vnodes = 0;
    cli_vnodes(c, c->vnodes ? c->vnodes : "160", &vnodes, 1);
    ch_options opt = cli_options(c, &f, algo, fleet_hash(c, &f), vnodes);
    ch_table *t = cli_build(c, &f, &opt, false);
    /* jump, guava@31, pymemcache@3: no failover order. */
    size_t probe[2], nprobe;
    if (c->replicas > 1 && ch_replicas_hash(t, 0, 2, probe, &nprobe) == CH_EUNSUPPORTED)
        cli_usage(c, "%s has no failover order: --replicas must be 1 with it",
                  ch_algo_name(algo));
    keyed = (ch_algo_flags(algo) & CH_ALGO_F_KEYED) != 0;
    json_out = c->json;
    if (c->show_version)
        print_version(c, &f, &opt);
    if (algo == CH_ALGO_RANDOM) {
        draw_state = (uint64_t)time(NULL) << 20 ^ (uint64_t)getpid() ^ 1;
        cli_warn(c, "distribution random: nutcracker picks a random server per request; each "
                    "owner shown is one random draw");
    }

    static char outbuf[1 << 16];
    setvbuf(stdout, outbuf, _IOFBF, sizeof(outbuf));
    size_t *walk = xmalloc(c, c->replicas * sizeof(*walk));
    for (int a = 0; a < c->argc; a++) {
        if (strcmp(c->argv[a], "-") != 0) {
            lookup_one(t, &f, c->replicas, walk, c->argv[a], strlen(c->argv[a]));
            continue;
        }
        /* Streaming: one line in memory at a time. */
        char *line = NULL;
        size_t cap = 0;
        ssize_t len;
        while ((len = getline(&line, &cap, stdin)) >= 0) {
            if (len > 0 && line[len - 1] == '\n')
                len--;
            lookup_one(t, &f, c->replicas, walk, line, (size_t)len);
        }
        free(line);
        if (ferror(stdin))
            cli_fail(c, "cannot read stdin");
    }
    free(walk);
    ch_table_free(t);
    fleet_free(&f);
    if (fflush(stdout) != 0)
        cli_fail(c, "cannot write the output");
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cli.c — option parsing, node sets, table building, keys, JSON and progress for `chash`.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <chash_config.h>

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- messages ----------------------------------------------------------------------------- */

static void vmessage(const cli *c, const char *kind, const char *fmt, va_list ap)
{
    fflush(stdout);
    fprintf(stderr, "chash%s%s: %s", c && c->cmd ? " " : "", c && c->cmd ? c->cmd : "", kind);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void cli_usage(const cli *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage(c, "", fmt, ap);
    va_end(ap);
    exit(2);
}

void cli_fail(const cli *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage(c, "", fmt, ap);
    va_end(ap);
    exit(1);
}

void cli_warn(const cli *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage(c, "warning: ", fmt, ap);
    va_end(ap);
}

void *xmalloc(const cli *c, size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        cli_fail(c, "out of memory (%zu bytes)", n);
    return p;
}

void *xcalloc(const cli *c, size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL)
        cli_fail(c, "out of memory (%zu x %zu bytes)", n, size);
    return p;
}

char *xstrdup(const cli *c, const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(xmalloc(c, n), s, n);
}

uint64_t cli_u64(const cli *c, const char *opt, const char *s, uint64_t min, uint64_t max)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!isdigit((unsigned char)s[0]) || *end != '\0' || errno != 0 || v < min || v > max)
        cli_usage(c, "%s wants a whole number from %llu to %llu, not '%s'", opt,
                  (unsigned long long)min, (unsigned long long)max, s);
    return v;
}

/* ---- option parsing ----------------------------------------------------------------------- */

enum {
    O_NODES = 256, O_CONFIG, O_POOL, O_ALGO, O_HASH, O_VNODES, O_SEED, O_KEYS, O_KEYFILE, O_JSON,
    O_REPLICAS, O_ADD, O_REMOVE, O_TO, O_OUT, O_TABLESIZE, O_NEWHASH, O_NEWVNODES,
    O_SHOWVERSION, O_FROM, O_RATE, O_CHECKPOINT, O_DRYRUN, O_VERIFY, O_REPLACE, O_LIMIT, O_BATCH,
    O_PARALLEL,
    O_POOLKEYS,
    O_READRATE,
    O_ETCD,
    O_TIMEOUT,
    O_MIGRATE,
    O_MATCH,
    O_PROGRESS,
    O_RESTART,
    O_ADMIN,
    O_TOP,
};

static const struct {
    struct option opt;
    unsigned group;
} options[] = {
    {{"nodes", required_argument, NULL, O_NODES}, OPT_NODES},
    {{"config", required_argument, NULL, O_CONFIG}, OPT_NODES},
    {{"pool", required_argument, NULL, O_POOL}, OPT_NODES | OPT_FLEET | OPT_HOTKEYS},
    {{"algo", required_argument, NULL, O_ALGO}, OPT_ALGO},
    {{"hash", required_argument, NULL, O_HASH}, OPT_HASH},
    {{"vnodes", required_argument, NULL, O_VNODES}, OPT_VNODES},
    {{"seed", required_argument, NULL, O_SEED}, OPT_SEED},
    {{"keys", required_argument, NULL, O_KEYS}, OPT_KEYS},
    {{"key-file", required_argument, NULL, O_KEYFILE}, OPT_KEYFILE},
    {{"json", no_argument, NULL, O_JSON}, OPT_JSON},
    {{"replicas", required_argument, NULL, O_REPLICAS}, OPT_REPLICAS},
    {{"add", required_argument, NULL, O_ADD}, OPT_CHANGE},
    {{"remove", required_argument, NULL, O_REMOVE}, OPT_CHANGE},
    {{"to", required_argument, NULL, O_TO}, OPT_CHANGE | OPT_NEW}, /* plan: the NEW scheme */
    {{"out", required_argument, NULL, O_OUT}, OPT_OUT},
    {{"table-size", required_argument, NULL, O_TABLESIZE}, OPT_MAGLEV},
    {{"new-hash", required_argument, NULL, O_NEWHASH}, OPT_NEW},
    {{"new-vnodes", required_argument, NULL, O_NEWVNODES}, OPT_NEW},
    {{"from", required_argument, NULL, O_FROM}, OPT_NEW},
    {{"show-version", no_argument, NULL, O_SHOWVERSION}, OPT_SHOWVERSION},
    {{"rate", required_argument, NULL, O_RATE}, OPT_MIGRATE | OPT_FLEET},
    {{"checkpoint", required_argument, NULL, O_CHECKPOINT}, OPT_MIGRATE},
    {{"dry-run", no_argument, NULL, O_DRYRUN}, OPT_MIGRATE},
    {{"verify", no_argument, NULL, O_VERIFY}, OPT_MIGRATE},
    {{"replace", no_argument, NULL, O_REPLACE}, OPT_MIGRATE},
    {{"limit", required_argument, NULL, O_LIMIT}, OPT_MIGRATE},
    {{"batch", required_argument, NULL, O_BATCH}, OPT_MIGRATE | OPT_FLEET},
    {{"parallel", required_argument, NULL, O_PARALLEL}, OPT_MIGRATE | OPT_FLEET},
    {{"pool-keys", required_argument, NULL, O_POOLKEYS}, OPT_WINDOW},
    {{"read-rate", required_argument, NULL, O_READRATE}, OPT_WINDOW},
    {{"etcd", required_argument, NULL, O_ETCD}, OPT_FLEET},
    {{"timeout", required_argument, NULL, O_TIMEOUT}, OPT_FLEET | OPT_HOTKEYS},
    {{"migrate", no_argument, NULL, O_MIGRATE}, OPT_FLEET},
    {{"match", required_argument, NULL, O_MATCH}, OPT_MIGRATE | OPT_FLEET},
    {{"progress", no_argument, NULL, O_PROGRESS}, OPT_MIGRATE},
    {{"restart", no_argument, NULL, O_RESTART}, OPT_MIGRATE},
    {{"admin", required_argument, NULL, O_ADMIN}, OPT_HOTKEYS},
    {{"top", required_argument, NULL, O_TOP}, OPT_HOTKEYS},
    {{"help", no_argument, NULL, 'h'}, 0},
};
#define NOPTIONS (sizeof(options) / sizeof(options[0]))

void cli_parse(cli *c, int argc, char **argv, unsigned allowed, const char *help)
{
    struct option longopts[NOPTIONS + 1];
    for (size_t i = 0; i < NOPTIONS; i++)
        longopts[i] = options[i].opt;
    longopts[NOPTIONS] = (struct option){0};

    opterr = 0;
    optind = 1;
    int ch, idx;
    while ((ch = getopt_long(argc, argv, ":h", longopts, &idx)) != -1) {
        if (ch == '?')
            cli_usage(c, "unknown option '%s' (see chash %s --help)", argv[optind - 1], c->cmd);
        if (ch == ':')
            cli_usage(c, "option '%s' needs a value", argv[optind - 1]);
        if (ch == 'h') {
            fputs(help, stdout);
            exit(0);
        }
        unsigned group = 0;
        const char *name = "";
        for (size_t i = 0; i < NOPTIONS; i++) {
            if (options[i].opt.val == ch) {
                group = options[i].group;
                name = options[i].opt.name;
            }
        }
        if (!(group & allowed))
            cli_usage(c, "option --%s does not apply to 'chash %s' (see chash %s --help)", name,
                      c->cmd, c->cmd);
        switch (ch) {
        case O_NODES: c->nodes = optarg; break;
        case O_CONFIG: c->config = optarg; break;
        case O_POOL: c->pool = optarg; break;
        case O_ALGO: c->algo = optarg; break;
        case O_HASH: c->hash = optarg; break;
        case O_VNODES: c->vnodes = optarg; break;
        case O_SEED: c->seed = cli_u64(c, "--seed", optarg, 0, UINT64_MAX); break;
        case O_KEYS: c->keys = (size_t)cli_u64(c, "--keys", optarg, 1, UINT64_C(1) << 40); break;
        case O_KEYFILE: c->key_file = optarg; break;
        case O_JSON: c->json = true; break;
        case O_REPLICAS: c->replicas = (size_t)cli_u64(c, "--replicas", optarg, 1, 1000); break;
        case O_ADD:
        case O_REMOVE: {
            const char **list = ch == O_ADD ? c->add : c->remove;
            size_t *n = ch == O_ADD ? &c->nadd : &c->nremove;
            if (*n == CLI_MAX_LIST)
                cli_usage(c, "at most %d --%s options (a comma list counts as one)", CLI_MAX_LIST,
                          name);
            list[(*n)++] = optarg;
            break;
        }
        case O_TO: c->to = optarg; break;
        case O_OUT: c->out = optarg; break;
        case O_TABLESIZE:
            c->table_size = (uint32_t)cli_u64(c, "--table-size", optarg, 2, CH_MAX_POINTS);
            for (uint32_t d = 2; d * d <= c->table_size; d++)
                if (c->table_size % d == 0)
                    cli_usage(c, "--table-size must be a prime (%u = %u x %u)", c->table_size, d,
                              c->table_size / d);
            break;
        case O_NEWHASH: c->new_hash = optarg; break;
        case O_NEWVNODES: c->new_vnodes = optarg; break;
        case O_FROM: c->from = optarg; break;
        case O_SHOWVERSION: c->show_version = true; break;
        case O_RATE: c->rate = cli_u64(c, "--rate", optarg, 0, UINT64_C(1) << 40); break;
        case O_CHECKPOINT: c->checkpoint = optarg; break;
        case O_DRYRUN: c->dry_run = true; break;
        case O_VERIFY: c->verify = true; break;
        case O_REPLACE: c->replace = true; break;
        case O_LIMIT: c->limit = cli_u64(c, "--limit", optarg, 1, UINT64_MAX); break;
        case O_BATCH: c->batch = (size_t)cli_u64(c, "--batch", optarg, 1, 100000); break;
        case O_PARALLEL: c->parallel = (size_t)cli_u64(c, "--parallel", optarg, 1, 64); break;
        case O_POOLKEYS:
            c->pool_keys = cli_u64(c, "--pool-keys", optarg, 1, UINT64_C(1) << 48);
            break;
        case O_READRATE:
            c->read_rate = cli_u64(c, "--read-rate", optarg, 1, UINT64_C(1) << 40);
            break;
        case O_ETCD: c->etcd = optarg; break;
        case O_TIMEOUT:
            c->timeout_ms = cli_u64(c, "--timeout", optarg, 1, UINT64_C(24) * 3600 * 1000);
            break;
        case O_MIGRATE: c->migrate = true; break;
        case O_MATCH: c->match = optarg; break;
        case O_PROGRESS: c->progress = true; break;
        case O_RESTART: c->restart = true; break;
        case O_ADMIN: c->admin = optarg; break;
        case O_TOP: c->top = (size_t)cli_u64(c, "--top", optarg, 1, 100000); break;
        }
    }
    if (c->nodes && c->config)
        cli_usage(c, "give either --nodes or --config, not both");
    if (c->keys && c->key_file)
        cli_usage(c, "give either --keys or --key-file, not both");
    if (c->to && (c->nadd || c->nremove))
        cli_usage(c, "give either --to or --add/--remove, not both");
    if (c->replicas == 0)
        c->replicas = 1;
    c->argc = argc - optind;
    c->argv = argv + optind;
}

/* ---- node sets ---------------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Rejects repeated ids (exit 2 for a list, 1 for a file). */
static void fleet_finish(const cli *c, fleet *f, bool from_file)
{
    const char **ids = xmalloc(c, f->n * sizeof(*ids));
    for (size_t i = 0; i < f->n; i++)
        ids[i] = f->nodes[i].id;
    qsort(ids, f->n, sizeof(*ids), cmp_str);
    for (size_t i = 1; i < f->n; i++) {
        if (strcmp(ids[i - 1], ids[i]) == 0) {
            char id[128];
            snprintf(id, sizeof(id), "%s", ids[i]);
            free(ids);
            if (from_file)
                cli_fail(c, "%s: node id '%s' appears twice", f->source, id);
            cli_usage(c, "%s: node id '%s' appears twice", f->source, id);
        }
    }
    free(ids);
}

static void fleet_alloc(const cli *c, fleet *f, size_t n, const char *source)
{
    *f = (fleet){0};
    f->n = n;
    f->nodes = xcalloc(c, n, sizeof(*f->nodes));
    f->addr = xcalloc(c, n, sizeof(*f->addr));
    f->name = xcalloc(c, n, sizeof(*f->name));
    f->source = xstrdup(c, source);
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

void fleet_from_list(const cli *c, const char *opt, const char *spec, fleet *f)
{
    char source[256]; /* "--nodes 8" for an option, the list alone for an argument */
    bool is_opt = opt[0] == '-';
    snprintf(source, sizeof(source), "%s%s%s", is_opt ? opt : "", is_opt ? " " : "", spec);
    bool count = spec[0] != '\0';
    for (const char *p = spec; *p; p++)
        count = count && isdigit((unsigned char)*p);
    if (count) {
        size_t n = (size_t)cli_u64(c, opt, spec, 1, CH_MAX_NODES);
        fleet_alloc(c, f, n, source);
        for (size_t i = 0; i < n; i++) {
            char id[32];
            snprintf(id, sizeof(id), "node-%zu", i + 1);
            f->nodes[i] = (ch_node){xstrdup(c, id), 1.0};
        }
        fleet_finish(c, f, false);
        return;
    }

    size_t n = 1;
    for (const char *p = spec; *p; p++)
        n += *p == ',';
    if (n > CH_MAX_NODES)
        cli_usage(c, "%s: more than %u nodes", opt, CH_MAX_NODES);
    fleet_alloc(c, f, n, source);
    char *copy = xstrdup(c, spec), *item = copy;
    for (size_t i = 0; i < n; i++) {
        char *comma = strchr(item, ',');
        if (comma)
            *comma = '\0';
        char *it = trim(item);
        double w = 1.0;
        char *colon = strrchr(it, ':');
        if (colon) {
            char *end;
            errno = 0;
            double v = strtod(colon + 1, &end);
            if (colon[1] != '\0' && *end == '\0' && errno == 0) {
                if (!isfinite(v) || v <= 0)
                    cli_usage(c, "%s: weight of '%s' must be a number > 0", opt, it);
                w = v;
                *colon = '\0';
                if (v >= 1024 && v <= 65535 && v == floor(v))
                    cli_warn(c, "%s: '%s:%s' reads as node '%s' with weight %s; for a host:port id "
                                "write %s:%s:1",
                             opt, it, colon + 1, it, colon + 1, it, colon + 1);
            }
        }
        if (it[0] == '\0')
            cli_usage(c, "%s: empty node id in '%s'", opt, spec);
        f->nodes[i] = (ch_node){xstrdup(c, it), w};
        item = comma ? comma + 1 : NULL;
    }
    free(copy);
    fleet_finish(c, f, false);
}

void fleet_from_config(const cli *c, const char *path, const char *pool, fleet *f)
{
    ch_config *cfg;
    ch_config_error err;
    int rc = ch_config_load(path, &cfg, &err);
    if (rc != CH_OK) {
        char buf[600];
        if (err.line == 0) /* the file could not be read: no position to give */
            cli_fail(c, "%s: %s", path, err.message);
        cli_fail(c, "%s", ch_config_error_str(&err, buf, sizeof(buf)));
    }
    const ch_conf_pool *p = ch_config_pool(cfg, pool);
    if (p == NULL) {
        char names[512] = "";
        for (size_t i = 0; i < cfg->npools; i++) {
            size_t len = strlen(names);
            snprintf(names + len, sizeof(names) - len, "%s%s", i ? ", " : "", cfg->pools[i].name);
        }
        if (pool)
            fprintf(stderr, "chash %s: %s has no pool '%s' (pools: %s)\n", c->cmd, path, pool,
                    names);
        else
            fprintf(stderr, "chash %s: %s has %zu pools; choose one with --pool (%s)\n", c->cmd,
                    path, cfg->npools, names);
        ch_config_free(cfg);
        exit(2);
    }
    if (p->nservers == 0) {
        char from[600] = "";
        if (ch_conf_membership_dns(p))
            snprintf(from, sizeof(from),
                     ": its servers are the DNS records of %s, which chash-proxy resolves (its "
                     "INFO and /metrics show the membership)",
                     p->membership);
        else if (p->membership != NULL)
            snprintf(from, sizeof(from),
                     ": its servers are in etcd, at %s (chash fleet status %s shows that "
                     "membership)",
                     p->membership, path);
        ch_config_free(cfg);
        cli_fail(c, "%s: pool has no servers%s", path, from);
    }
    char source[512];
    if (pool)
        snprintf(source, sizeof(source), "%s pool %s", path, p->name);
    else
        snprintf(source, sizeof(source), "%s", path);
    fleet_alloc(c, f, p->nservers, source);
    /* The ids and order the peers use under the distribution in force (--algo, else the
     * pool's): ch_config_members(). An --algo that is not a name is refused later. */
    ch_algo_id algo = CH_ALGO_RING;
    ch_algo_from_name(c->algo ? c->algo : p->distribution, &algo);
    ch_member *m = xmalloc(c, p->nservers * sizeof(*m));
    ch_config_members(p, algo, m);
    for (size_t i = 0; i < p->nservers; i++) {
        f->addr[i] = xstrdup(c, m[i].addr);
        f->name[i] = m[i].name ? xstrdup(c, m[i].name) : NULL;
        f->named = f->named || m[i].name != NULL;
        f->nodes[i] = (ch_node){xstrdup(c, m[i].id), m[i].weight};
    }
    free(m);
    if (p->hash_tag)
        memcpy(f->hash_tag, p->hash_tag, sizeof(f->hash_tag));
    f->conf_version = p->version ? xstrdup(c, p->version) : NULL;
    f->conf_hash = p->hash ? xstrdup(c, p->hash) : NULL;
    f->conf_dist = p->distribution ? xstrdup(c, p->distribution) : NULL;
    ch_config_free(cfg);
    fleet_finish(c, f, true);
}

void fleet_from_spec(const cli *c, const char *opt, const char *spec, fleet *f)
{
    struct stat st;
    if (stat(spec, &st) == 0 && S_ISREG(st.st_mode))
        fleet_from_config(c, spec, c->pool, f);
    else
        fleet_from_list(c, opt, spec, f);
}

void fleet_from_cli(const cli *c, fleet *f)
{
    if (c->pool && !c->config)
        cli_usage(c, "--pool needs --config FILE");
    if (c->config)
        fleet_from_config(c, c->config, c->pool, f);
    else
        fleet_from_list(c, "--nodes", c->nodes ? c->nodes : "8", f);
}

void fleet_free(fleet *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free((char *)f->nodes[i].id);
        free(f->addr[i]);
        free(f->name[i]);
    }
    free(f->nodes);
    free(f->addr);
    free(f->name);
    free(f->source);
    free(f->conf_hash);
    free(f->conf_dist);
    free(f->conf_version);
    *f = (fleet){0};
}

long fleet_find(const fleet *f, const char *id)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->nodes[i].id, id) == 0)
            return (long)i;
    return -1;
}

double min_moved(const fleet *a, const fleet *b)
{
    double wa = 0, wb = 0, kept = 0;
    for (size_t i = 0; i < a->n; i++)
        wa += a->nodes[i].weight;
    for (size_t i = 0; i < b->n; i++)
        wb += b->nodes[i].weight;
    for (size_t i = 0; i < a->n; i++) {
        long j = fleet_find(b, a->nodes[i].id);
        if (j >= 0)
            kept += fmin(a->nodes[i].weight / wa, b->nodes[j].weight / wb);
    }
    return fmax(0.0, 1.0 - kept);
}

/* ---- algorithms, hashes, tables ----------------------------------------------------------- */

static const char *algo_name_u(unsigned i);
static const char *hash_name_u(unsigned i);

/* Whether `bad` is a registry name but for its case, or its part before the '@<version>'
 * ("nginx" for "nginx@1"): the names a user most likely meant. */
static bool near_name(const char *bad, const char *name)
{
    size_t n = strlen(bad);
    if (strcasecmp(bad, name) == 0)
        return true;
    return strncasecmp(bad, name, n) == 0 && name[n] == '@';
}

/* An unknown name: the message names every registry name, however many there are (printed
 * from the registry, not through a buffer that could cut the list), and first the names the
 * user probably meant. Exits 2. */
_Noreturn static void unknown_name(const cli *c, const char *opt, const char *bad,
                                   const char *(*name)(unsigned), unsigned count)
{
    fflush(stdout);
    fprintf(stderr, "chash %s: %s: unknown name '%s'", c->cmd, opt, bad);
    bool near = false;
    for (unsigned i = 0; i < count; i++)
        if (near_name(bad, name(i))) {
            fprintf(stderr, "%s%s", near ? " or " : " (did you mean ", name(i));
            near = true;
        }
    if (near)
        fputs("?)", stderr);
    fputs("; known:", stderr);
    for (unsigned i = 0; i < count; i++)
        fprintf(stderr, " %s", name(i));
    fprintf(stderr, " (or all); chash %s describes each\n",
            name == hash_name_u ? "hashes" : "algorithms");
    exit(2);
}

static const char *algo_name_u(unsigned i)
{
    return ch_algo_name((ch_algo_id)i);
}

static const char *hash_name_u(unsigned i)
{
    return ch_hash_name((ch_hash_id)i);
}

/* Parses a comma list of registry names into ids (deduplicated, in the order given). */
static size_t parse_names(const cli *c, const char *opt, const char *spec, unsigned count,
                          const char *(*name)(unsigned), unsigned *out)
{
    if (strcmp(spec, "all") == 0) {
        for (unsigned i = 0; i < count; i++)
            out[i] = i;
        return count;
    }
    size_t n = 0;
    char *copy = xstrdup(c, spec);
    for (char *save, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        unsigned id = count;
        for (unsigned i = 0; i < count; i++)
            if (strcmp(trim(tok), name(i)) == 0)
                id = i;
        if (id == count)
            unknown_name(c, opt, trim(tok), name, count); /* exits: copy is the OS's */
        bool dup = false;
        for (size_t k = 0; k < n; k++)
            dup = dup || out[k] == id;
        if (!dup)
            out[n++] = id;
    }
    free(copy);
    if (n == 0)
        cli_usage(c, "%s: empty list", opt);
    return n;
}

size_t cli_algos(const cli *c, const char *spec, const char *dflt, ch_algo_id *out)
{
    unsigned ids[CH_ALGO_COUNT_];
    size_t n = parse_names(c, "--algo", spec ? spec : dflt, CH_ALGO_COUNT_, algo_name_u, ids);
    for (size_t i = 0; i < n; i++)
        out[i] = (ch_algo_id)ids[i];
    return n;
}

size_t cli_hashes(const cli *c, const char *spec, const char *dflt, ch_hash_id *out)
{
    unsigned ids[CH_HASH_COUNT_];
    size_t n = parse_names(c, "--hash", spec ? spec : dflt, CH_HASH_COUNT_, hash_name_u, ids);
    for (size_t i = 0; i < n; i++)
        out[i] = (ch_hash_id)ids[i];
    return n;
}

ch_algo_id cli_algo1(const cli *c, const char *spec, const char *dflt)
{
    ch_algo_id a[CH_ALGO_COUNT_];
    if (cli_algos(c, spec, dflt, a) != 1)
        cli_usage(c, "--algo: 'chash %s' takes one algorithm", c->cmd);
    return a[0];
}

ch_hash_id cli_hash1(const cli *c, const char *spec)
{
    ch_hash_id h[CH_HASH_COUNT_];
    if (cli_hashes(c, spec, ch_hash_name(CH_HASH_DEFAULT), h) != 1)
        cli_usage(c, "--hash: 'chash %s' takes one hash", c->cmd);
    return h[0];
}

size_t cli_vnodes(const cli *c, const char *spec, uint32_t *out, size_t max)
{
    size_t n = 0;
    char *copy = xstrdup(c, spec);
    for (char *save, *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n == max) {
            free(copy);
            cli_usage(c, "--vnodes: at most %zu values", max);
        }
        char v[32];
        snprintf(v, sizeof(v), "%s", trim(tok));
        out[n++] = (uint32_t)cli_u64(c, "--vnodes", v, 1, CH_MAX_POINTS);
    }
    free(copy);
    if (n == 0)
        cli_usage(c, "--vnodes: empty list");
    return n;
}

const char *fleet_algo_spec(const cli *c, const fleet *f, const char *dflt)
{
    return c->algo ? c->algo : f->conf_dist ? f->conf_dist : dflt;
}

ch_hash_id fleet_hash(const cli *c, const fleet *f)
{
    return cli_hash1(c, c->hash ? c->hash : f->conf_hash);
}

ch_options cli_options(const cli *c, const fleet *f, ch_algo_id algo, ch_hash_id hash,
                       uint32_t vnodes)
{
    ch_options o;
    ch_options_init(&o);
    memcpy(o.hash_tag, f->hash_tag, sizeof(o.hash_tag));
    o.algo = algo;
    o.hash = hash;
    /* Without --vnodes, 0: the algorithm's default (a client library's own for its scheme). */
    if (c->vnodes == NULL && c->new_vnodes == NULL && vnodes == CH_DEFAULT_VNODES)
        o.vnodes = 0;
    else if (vnodes)
        o.vnodes = vnodes;
    if (c->table_size)
        o.table_size = c->table_size;
    return o;
}

bool algo_weighted(ch_algo_id a)
{
    return (ch_algo_flags(a) & CH_ALGO_F_WEIGHTED) != 0;
}

/* A table the scheme refuses to build for f, and why: skipped with a note when several schemes
 * are compared (skip: NULL is returned), else the command fails. */
static ch_table *build_refused(const cli *c, const fleet *f, const ch_options *opt, bool skip,
                               const char *why)
{
    if (!skip)
        cli_fail(c, "cannot build the %s table for %s: %s", ch_algo_name(opt->algo), f->source,
                 why);
    fprintf(stderr, "chash %s: note: %s skipped: %s\n", c->cmd, ch_algo_name(opt->algo), why);
    return NULL;
}

ch_table *cli_build(const cli *c, const fleet *f, const ch_options *opt, bool skip)
{
    ch_table *t;
    /* A scheme that places by the key itself (pymemcache@3) has no key hash for the commands
     * that hash keys once for many tables; lookup and bench call ch_lookup. */
    if ((ch_algo_flags(opt->algo) & CH_ALGO_F_KEYED) && strcmp(c->cmd, "lookup") != 0 &&
        strcmp(c->cmd, "bench") != 0) {
        if (skip) {
            fprintf(stderr, "chash %s: note: %s skipped: it places by the key, not a key hash "
                            "(only chash lookup and bench take it)\n",
                    c->cmd, ch_algo_name(opt->algo));
            return NULL;
        }
        cli_fail(c, "%s places by the key, not a key hash: only chash lookup and bench take it",
                 ch_algo_name(opt->algo));
    }
    ch_error err = {.size = sizeof(err)};
    int rc = ch_table_build_err(f->nodes, f->n, opt, &t, &err);
    if (rc == CH_OK)
        return t;
    /* The library's own limit, in its words (ch_algo_limits), where it has one. */
    const char *limits = ch_algo_limits(opt->algo);
    if (rc == CH_EUNSUPPORTED && !algo_weighted(opt->algo)) {
        if (skip) {
            fprintf(stderr, "chash %s: note: %s skipped: it has no weights (%s)\n", c->cmd,
                    ch_algo_name(opt->algo), f->source);
            return NULL;
        }
        cli_fail(c, "%s has no weights, and the nodes of %s have unequal weights%s%s%s",
                 ch_algo_name(opt->algo), f->source, limits ? " (" : "", limits ? limits : "",
                 limits ? ")" : "");
    }
    /* A scheme that reproduces a library with limits (whole weights, a ring's bounds): the
     * library's rule the table broke, as ch_table_build_err words it; a comparison of several
     * algorithms goes on without this one. */
    if (limits != NULL && (rc == CH_EWEIGHT || rc == CH_ETOOBIG || rc == CH_EINVAL))
        return build_refused(c, f, opt, skip, err.message);
    /* A weight above the scheme's largest (haproxy@2: HAProxy's 256): name it, the limit and
     * why; a comparison of several algorithms goes on without this one. */
    double wmax = ch_algo_max_weight(opt->algo);
    if (rc == CH_EWEIGHT && wmax > 0) {
        size_t big = 0;
        for (size_t i = 1; i < f->n; i++)
            if (f->nodes[i].weight > f->nodes[big].weight)
                big = i;
        char why[512];
        snprintf(why, sizeof(why),
                 "node '%s' has weight %.15g, above %.15g, the largest %s takes (the peer it "
                 "reproduces refuses more; only the weights' ratios matter, so scale them down)",
                 f->nodes[big].id, f->nodes[big].weight, wmax, ch_algo_name(opt->algo));
        return build_refused(c, f, opt, skip, why);
    }
    /* Too many points: the table's size bound, CH_MAX_POINTS points or slots (each a few bytes
     * of memory), which the weights times the points per unit weight exceed. */
    if (rc == CH_ETOOBIG && f->n <= CH_MAX_NODES) {
        double sum = 0;
        for (size_t i = 0; i < f->n; i++)
            sum += f->nodes[i].weight;
        char vn[64] = "the scheme's default";
        if (opt->vnodes)
            snprintf(vn, sizeof(vn), "%u", opt->vnodes);
        char why[512];
        snprintf(why, sizeof(why),
                 "the table would have more than %u points or slots (CH_MAX_POINTS, the size "
                 "bound of a table): the weights add up to %.15g, each unit of weight taking "
                 "--vnodes points (%s); lower --vnodes or scale the weights down (only their "
                 "ratios matter)",
                 CH_MAX_POINTS, sum, vn);
        return build_refused(c, f, opt, skip, why);
    }
    if (rc == CH_EINVAL && opt->algo == CH_ALGO_MAGLEV)
        cli_fail(c, "cannot build the maglev table for %s: %s: set --table-size", f->source,
                 err.message);
    cli_fail(c, "cannot build the %s table for %s: %s", ch_algo_name(opt->algo), f->source,
             err.message);
}

/* ---- keys --------------------------------------------------------------------------------- */

void keys_open(const cli *c, keysrc *k, size_t n)
{
    *k = (keysrc){0};
    if (c->key_file) {
        k->path = c->key_file;
        if (strcmp(c->key_file, "-") == 0) {
            k->f = stdin;
        } else {
            k->f = fopen(c->key_file, "r");
            if (k->f == NULL)
                cli_fail(c, "cannot open %s: %s", c->key_file, strerror(errno));
            struct stat st;
            if (fstat(fileno(k->f), &st) == 0 && S_ISREG(st.st_mode))
                k->total = (uint64_t)st.st_size;
        }
        return;
    }
    k->total = n;
    int len = snprintf(k->buf, sizeof(k->buf), "key:%llu:", (unsigned long long)c->seed);
    k->prefix = (size_t)len;
}

bool keys_next(const cli *c, keysrc *k, const char **key, size_t *len)
{
    if (k->f) {
        errno = 0;
        ssize_t got = getline(&k->line, &k->cap, k->f);
        if (got < 0) {
            if (ferror(k->f))
                cli_fail(c, "cannot read %s: %s", k->path, strerror(errno));
            return false;
        }
        k->done += (uint64_t)got; /* bytes, for progress */
        if (got > 0 && k->line[got - 1] == '\n')
            k->line[--got] = '\0';
        *key = k->line;
        *len = (size_t)got;
        return true;
    }
    if (k->done == k->total)
        return false;
    /* Decimal digits of the index after the fixed "key:<seed>:" prefix. */
    char digits[24];
    size_t nd = 0;
    uint64_t v = k->done++;
    do {
        digits[nd++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < nd; i++)
        k->buf[k->prefix + i] = digits[nd - 1 - i];
    k->buf[k->prefix + nd] = '\0';
    *key = k->buf;
    *len = k->prefix + nd;
    return true;
}

uint64_t keys_pos(const keysrc *k)
{
    return k->done;
}

void keys_close(keysrc *k)
{
    if (k->f && k->f != stdin)
        fclose(k->f);
    free(k->line);
    *k = (keysrc){0};
}

/* ---- progress ----------------------------------------------------------------------------- */

double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void progress_start(progress *p, const char *label, uint64_t total)
{
    progress_start_counted(p, NULL, label, total, NULL, false);
}

void progress_start_counted(progress *p, const char *cmd, const char *label, uint64_t total,
                            const char *unit, bool lines)
{
    bool tty = isatty(STDERR_FILENO) == 1;
    *p = (progress){.label = label, .cmd = cmd, .unit = unit, .total = total, .tty = tty,
                    .lines = lines && !tty};
    p->start = p->last = now_seconds();
}

/* "1:02:03" or "2:03" for s seconds; "--" when unknown. */
static void fmt_duration(char *buf, size_t len, double s)
{
    if (!isfinite(s) || s < 0 || s > 1e8) {
        snprintf(buf, len, "--");
        return;
    }
    unsigned long t = (unsigned long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, len, "%lu:%02lu:%02lu", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, len, "%lu:%02lu", t / 60, t % 60);
}

/* The counts, the rate and the time left, after the bar: "  1234/5678 keys  400 keys/s  ETA
 * 0:11". The rate is the average since the start (the work is even: a migration's --rate, or
 * the CPU); the ETA is what is left at that rate. */
static void progress_counts(const progress *p, uint64_t done, double t)
{
    /* Under a second the average says little (a first batch is taken at once): "--". */
    double el = t - p->start, rate = el >= 1.0 ? (double)done / el : NAN;
    if (p->total > 0)
        fprintf(stderr, "  %llu/%llu %s", (unsigned long long)done,
                (unsigned long long)p->total, p->unit);
    else
        fprintf(stderr, "  %llu %s", (unsigned long long)done, p->unit);
    if (isfinite(rate))
        fprintf(stderr, "  %.0f %s/s", rate, p->unit);
    else
        fprintf(stderr, "  -- %s/s", p->unit);
    if (p->total > 0) {
        char eta[32];
        uint64_t left = done >= p->total ? 0 : p->total - done;
        fmt_duration(eta, sizeof(eta), rate > 0 ? (double)left / rate : NAN);
        fprintf(stderr, "  ETA %s", eta);
    }
}

void progress_update(progress *p, uint64_t done)
{
    if (!(p->tty || p->lines) || (p->total == 0 && p->unit == NULL))
        return;
    double t = now_seconds();
    if (p->lines) {
        /* Lines: the first at once, then two a second. */
        if (p->shown && t - p->last < 0.5)
            return;
    } else if (t - p->start < 1.0 || (p->shown && t - p->last < 0.1)) {
        /* Work under a second never shows a bar; after that, redraw ten times a second. */
        return;
    }
    p->last = t;
    p->shown = true;
    double f = p->total == 0 ? 0.0 : done >= p->total ? 1.0 : (double)done / (double)p->total;
    int width = 30, full = (int)(f * width);
    if (p->lines)
        fprintf(stderr, "chash %s: %s [", p->cmd ? p->cmd : "", p->label);
    else
        fprintf(stderr, "\r%s [", p->label);
    for (int i = 0; i < width; i++)
        fputc(i < full ? '#' : '.', stderr);
    fprintf(stderr, "] %3d%%", (int)(f * 100));
    if (p->unit)
        progress_counts(p, done, t);
    if (p->lines)
        fputc('\n', stderr);
    else if (p->unit)
        fputs("\033[K", stderr); /* the line may have been longer */
    fflush(stderr);
}

void progress_end(progress *p)
{
    if (p->shown && !p->lines)
        fputs("\r\033[K", stderr);
    p->shown = false;
}

/* ---- JSON --------------------------------------------------------------------------------- */

void json_init(json *j, FILE *out)
{
    *j = (json){.out = out};
    j->first[0] = true;
}

/* Before a value or a key: a comma unless it is the first in its container or follows a key. */
static void json_sep(json *j)
{
    if (j->after_key) {
        j->after_key = false;
        return;
    }
    if (!j->first[j->depth])
        fputc(',', j->out);
    j->first[j->depth] = false;
}

static void json_open(json *j, char ch)
{
    json_sep(j);
    fputc(ch, j->out);
    if (j->depth + 1 < (int)sizeof(j->close))
        j->depth++;
    j->first[j->depth] = true;
    j->close[j->depth] = ch == '{' ? '}' : ']';
}

void json_obj(json *j)
{
    json_open(j, '{');
}

void json_arr(json *j)
{
    json_open(j, '[');
}

void json_end(json *j)
{
    fputc(j->close[j->depth], j->out);
    if (j->depth > 0)
        j->depth--;
}

/* The length of the valid UTF-8 sequence at p[0, n), or 0; *part gets the length of its
 * maximal valid prefix (at least 1) when it is not valid: the bytes one U+FFFD stands for, as
 * Unicode's "maximal subpart" practice (and Python's, browsers') replaces them. */
static size_t utf8_scan(const unsigned char *p, size_t n, size_t *part)
{
    *part = 1;
    if (n == 0)
        return 0;
    if (p[0] < 0x80)
        return 1;
    /* The lead byte's length and the range of its first continuation byte (RFC 3629, table
     * 3-7 of Unicode): that range excludes overlong forms, surrogates and > U+10FFFF. */
    size_t len;
    unsigned lo = 0x80, hi = 0xBF;
    if (p[0] >= 0xC2 && p[0] <= 0xDF)
        len = 2;
    else if (p[0] >= 0xE0 && p[0] <= 0xEF) {
        len = 3;
        lo = p[0] == 0xE0 ? 0xA0 : 0x80;
        hi = p[0] == 0xED ? 0x9F : 0xBF;
    } else if (p[0] >= 0xF0 && p[0] <= 0xF4) {
        len = 4;
        lo = p[0] == 0xF0 ? 0x90 : 0x80;
        hi = p[0] == 0xF4 ? 0x8F : 0xBF;
    } else
        return 0;
    if (n < 2 || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++) {
        if (i >= n || (p[i] & 0xC0) != 0x80) {
            *part = i;
            return 0;
        }
    }
    return len;
}

size_t utf8_seq(const unsigned char *p, size_t n)
{
    size_t part;
    return utf8_scan(p, n, &part);
}

bool utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0, k; i < len; i += k)
        if ((k = utf8_seq(p + i, len - i)) == 0)
            return false;
    return true;
}

/* A JSON string per RFC 8259 of the bytes s[0, len): '"', '\\' and every control character
 * (U+0000..U+001F, and DEL) escaped; valid UTF-8 passes through; each maximal subpart of an
 * invalid sequence becomes U+FFFD (so the output is always valid UTF-8 JSON, which any
 * parser reads; a caller that must keep such bytes writes them again, e.g. as hex). */
static void json_escaped(json *j, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', j->out);
    for (size_t i = 0; i < len;) {
        size_t part, k = utf8_scan(p + i, len - i, &part);
        if (k == 0) {
            fputs("\xEF\xBF\xBD", j->out); /* U+FFFD for the maximal subpart */
            i += part;
            continue;
        }
        if (k > 1) {
            fwrite(p + i, 1, k, j->out);
            i += k;
            continue;
        }
        switch (p[i]) {
        case '"': fputs("\\\"", j->out); break;
        case '\\': fputs("\\\\", j->out); break;
        case '\n': fputs("\\n", j->out); break;
        case '\r': fputs("\\r", j->out); break;
        case '\t': fputs("\\t", j->out); break;
        case '\b': fputs("\\b", j->out); break;
        case '\f': fputs("\\f", j->out); break;
        default:
            if (p[i] < 0x20 || p[i] == 0x7f)
                fprintf(j->out, "\\u%04x", p[i]);
            else
                fputc(p[i], j->out);
        }
        i++;
    }
    fputc('"', j->out);
}

void json_key(json *j, const char *k)
{
    json_sep(j);
    json_escaped(j, k, strlen(k));
    fputc(':', j->out);
    j->after_key = true;
}

void json_str(json *j, const char *s)
{
    json_sep(j);
    if (s)
        json_escaped(j, s, strlen(s));
    else
        fputs("null", j->out);
}

void json_strn(json *j, const char *s, size_t len)
{
    json_sep(j);
    json_escaped(j, s, len);
}

void json_num(json *j, double v)
{
    json_sep(j);
    if (isfinite(v))
        fprintf(j->out, "%.6g", v);
    else
        fputs("null", j->out);
}

void json_int(json *j, uint64_t v)
{
    json_sep(j);
    fprintf(j->out, "%llu", (unsigned long long)v);
}

void json_bool(json *j, bool v)
{
    json_sep(j);
    fputs(v ? "true" : "false", j->out);
}

void json_null(json *j)
{
    json_sep(j);
    fputs("null", j->out);
}

void json_done(json *j)
{
    fputc('\n', j->out);
    fflush(j->out);
}

/* ---- statistics --------------------------------------------------------------------------- */

void load_stats(const double *x, size_t n, double *min, double *max, double *stddev)
{
    double lo = INFINITY, hi = -INFINITY, ss = 0;
    for (size_t i = 0; i < n; i++) {
        lo = fmin(lo, x[i]);
        hi = fmax(hi, x[i]);
        ss += (x[i] - 1.0) * (x[i] - 1.0);
    }
    *min = lo;
    *max = hi;
    *stddev = n ? sqrt(ss / (double)n) : 0.0;
}

/* A node with k of P uniformly random points owns a Beta(k, P - k) share of the circle, whose
 * variance relative to its mean k / P is (P - k) / (k (P + 1)). The mean of that over the nodes is
 * the expected square of load_stats' stddev: about 1/vnodes. */
double ring_theory_stddev(const fleet *f, uint32_t vnodes)
{
    double P = 0, sum = 0;
    for (size_t i = 0; i < f->n; i++)
        P += fmax(1.0, round((double)vnodes * f->nodes[i].weight));
    for (size_t i = 0; i < f->n; i++) {
        double k = fmax(1.0, round((double)vnodes * f->nodes[i].weight));
        sum += (P - k) / (k * (P + 1));
    }
    return f->n ? sqrt(sum / (double)f->n) : 0.0;
}

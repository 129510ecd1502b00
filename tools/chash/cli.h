/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cli.h — what the subcommands of `chash` share: option parsing, node sets (fleets), table
 * building, keys, JSON output and a progress bar. Everything here either succeeds or exits:
 * cli_usage() exits 2 (a bad command line), cli_fail() exits 1 (a runtime error), each after a
 * one-line message on stderr. The CLI computes nothing the library does not offer; this file only
 * feeds it and formats what it says.
 */
#ifndef CHASH_CLI_H
#define CHASH_CLI_H

#include <chash.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Which options a subcommand accepts (a bit set); the parser rejects the others. */
enum {
    OPT_NODES = 1u << 0,    /* --nodes, --config, --pool */
    OPT_ALGO = 1u << 1,     /* --algo */
    OPT_HASH = 1u << 2,     /* --hash */
    OPT_VNODES = 1u << 3,   /* --vnodes (a list for sweep) */
    OPT_SEED = 1u << 4,     /* --seed */
    OPT_KEYS = 1u << 5,     /* --keys */
    OPT_KEYFILE = 1u << 6,  /* --key-file */
    OPT_JSON = 1u << 7,     /* --json */
    OPT_REPLICAS = 1u << 8, /* --replicas */
    OPT_CHANGE = 1u << 9,   /* --add, --remove, --to */
    OPT_OUT = 1u << 10,     /* --out */
    OPT_MAGLEV = 1u << 11,  /* --table-size */
    OPT_NEW = 1u << 12,     /* --new-hash, --new-vnodes, --from, --to (plan's schemes) */
    OPT_SHOWVERSION = 1u << 13, /* --show-version */
    OPT_WINDOW = 1u << 15,  /* --pool-keys, --read-rate (plan: the warm-up window to size) */
    OPT_MIGRATE = 1u << 14, /* --rate, --checkpoint, --dry-run, --verify, --replace, --limit,
                               --batch, --parallel, --match, --progress, --restart (migrate) */
    OPT_FLEET = 1u << 16,   /* --etcd, --timeout, --pool, --migrate, --rate, --batch,
                               --parallel, --match (fleet) */
    OPT_HOTKEYS = 1u << 17, /* --admin, --top, --pool, --timeout (hotkeys) */
};

#define CLI_MAX_LIST 16 /* repeated --add / --remove */

typedef struct cli {
    const char *cmd; /* subcommand name, for messages */

    const char *nodes;  /* --nodes SPEC */
    const char *config; /* --config FILE */
    const char *pool;   /* --pool NAME */
    const char *algo;   /* --algo LIST|all; NULL: the subcommand's default */
    const char *hash;   /* --hash LIST|all */
    const char *vnodes; /* --vnodes N or LIST */
    uint64_t seed;
    size_t keys;      /* --keys N; 0: the subcommand's default */
    const char *key_file;
    bool json;
    size_t replicas;        /* --replicas R; default 1 */
    const char *to;         /* --to NODES|FILE (simulate); --to SCHEME (plan) */
    const char *from;       /* --from SCHEME (plan) */
    const char *add[CLI_MAX_LIST];
    size_t nadd;
    const char *remove[CLI_MAX_LIST];
    size_t nremove;
    const char *out;        /* --out FILE */
    uint32_t table_size;    /* --table-size M; 0: the library default */
    const char *new_hash;   /* --new-hash NAME */
    const char *new_vnodes; /* --new-vnodes N */
    bool show_version;      /* --show-version */
    uint64_t rate;          /* --rate KEYS_PER_S; 0: no limit */
    const char *checkpoint; /* --checkpoint FILE */
    const char *match;      /* --match GLOB: the pool's keys (migrate, fleet apply --migrate) */
    bool dry_run, verify, replace;
    uint64_t limit;         /* --limit N keys scanned; 0: none */
    size_t batch;           /* --batch N; 0: the subcommand's default */
    size_t parallel;        /* --parallel N; 0: the subcommand's default */
    uint64_t pool_keys;     /* --pool-keys K: the keys the pool holds (plan) */
    uint64_t read_rate;     /* --read-rate R: its reads per second (plan) */
    const char *etcd;       /* --etcd etcd://host:port[/key] (fleet) */
    uint64_t timeout_ms;    /* --timeout MS (fleet apply); 0: the default */
    bool migrate;           /* --migrate (fleet apply): the staged copy before the commit */
    bool progress;          /* --progress: progress lines even when stderr is no terminal */
    bool restart;           /* --restart (migrate): start afresh over a refused checkpoint */
    const char *admin;      /* --admin HOST:PORT: a chash-proxy's admin port (hotkeys) */
    size_t top;             /* --top N (hotkeys); 0: the subcommand's default */

    int argc; /* positional arguments */
    char **argv;
} cli;

/* Parses argv[1..] (argv[0] is the subcommand) into *c, accepting the options in `allowed`.
 * Prints help and exits 0 on --help; exits 2 on anything it cannot accept. */
void cli_parse(cli *c, int argc, char **argv, unsigned allowed, const char *help);

/* One line "chash CMD: message" on stderr, then exit(2) / exit(1). */
_Noreturn void cli_usage(const cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
_Noreturn void cli_fail(const cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A warning line "chash CMD: warning: message" on stderr. */
void cli_warn(const cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Strict number parsing for option values: exits 2 naming the option on bad input. */
uint64_t cli_u64(const cli *c, const char *opt, const char *s, uint64_t min, uint64_t max);

/* ---- node sets ---------------------------------------------------------------------------- */

/* A fleet: the nodes handed to ch_table_build(), plus what a config file says about them. */
typedef struct fleet {
    ch_node *nodes;
    size_t n;
    char **addr;      /* per node: "host:port" from a config, else NULL */
    char **name;      /* per node: the server's name from a config, else NULL */
    bool named;       /* some server has a name */
    char *source;     /* "--nodes 8", "file.yml", "file.yml pool alpha": for messages */
    char *conf_hash;  /* the pool's hash and distribution as written, or NULL (no config) */
    char *conf_dist;
    char hash_tag[2]; /* the pool's hash_tag, {0, 0} for none */
    char *conf_version; /* the pool's "version", or NULL */
} fleet;

/* Parses a node list: a count ("8" -> node-1 .. node-8) or "id[:weight],...". The weight is the
 * part after the last ':' when it parses as a number, so an id holding a ':' (host:port) must
 * carry its weight: "10.0.0.1:11211:1". Exits 2 on a bad list or a repeated id. */
void fleet_from_list(const cli *c, const char *opt, const char *spec, fleet *f);
/* Loads --config FILE [--pool NAME]. Node ids are the names twemproxy hashes (ch_conf_server.id:
 * the server's name, else host:port, or host for port 11211), or "host:port" when the
 * distribution in force (--algo, else the pool's) is a libmemcached one, whose ids those are.
 * Under nutcracker's distributions the nodes are in its order (ch_conf_pool.order), else in
 * the file's. Exits 1 on a file error (file:line:column: message), 2 on an unknown or ambiguous pool. */
void fleet_from_config(const cli *c, const char *path, const char *pool, fleet *f);
/* A node list or, when spec names an existing file, a config file (--pool applies). */
void fleet_from_spec(const cli *c, const char *opt, const char *spec, fleet *f);
/* The subcommand's fleet from --nodes / --config (default: 8 nodes). */
void fleet_from_cli(const cli *c, fleet *f);
void fleet_free(fleet *f);
/* Index of the node with this id, or -1. O(n). */
long fleet_find(const fleet *f, const char *id);

/* ---- tables ------------------------------------------------------------------------------- */

/* A list of algorithms or hashes from a spec ("ring", "ring,jump", "all"); NULL spec gives
 * dflt. Exits 2 on an unknown name, naming the known ones. Returns the count. */
size_t cli_algos(const cli *c, const char *spec, const char *dflt, ch_algo_id *out);
size_t cli_hashes(const cli *c, const char *spec, const char *dflt, ch_hash_id *out);
/* One algorithm / hash: exits 2 if the spec names more than one. */
ch_algo_id cli_algo1(const cli *c, const char *spec, const char *dflt);
ch_hash_id cli_hash1(const cli *c, const char *spec);
/* A list of vnode counts ("160" or "1,10,160"). Returns the count (<= max). */
size_t cli_vnodes(const cli *c, const char *spec, uint32_t *out, size_t max);

/* The algorithm and hash a subcommand uses by default: the pool's when the fleet comes from a
 * config file, else dflt (for hashes: the registry default). --algo / --hash override them. */
const char *fleet_algo_spec(const cli *c, const fleet *f, const char *dflt);
ch_hash_id fleet_hash(const cli *c, const fleet *f);

/* Options for one table from the command line and the fleet (its pool's hash_tag). */
ch_options cli_options(const cli *c, const fleet *f, ch_algo_id algo, ch_hash_id hash,
                       uint32_t vnodes);

/* Builds a table. On failure: if `skip` and the algorithm cannot take these weights, prints a
 * note and returns NULL; otherwise exits 1 with the library's message. */
ch_table *cli_build(const cli *c, const fleet *f, const ch_options *opt, bool skip);

/* Whether an algorithm honours weights (modulo and jump do not). */
bool algo_weighted(ch_algo_id a);

/* ---- keys --------------------------------------------------------------------------------- */

/* A stream of keys: generated "key:<seed>:<i>" for i < n, or the lines of a file ("-": stdin)
 * without their newline. Holds one key at a time. */
typedef struct keysrc {
    FILE *f;
    const char *path;
    char *line;
    size_t cap;
    uint64_t total; /* keys (generated) or bytes (file), for progress; 0 if unknown */
    uint64_t done;  /* keys given so far */
    char buf[64];
    size_t prefix;  /* length of "key:<seed>:" in buf */
} keysrc;

/* Opens the keys of --key-file, else n generated keys from --seed. Exits 1 if the file cannot
 * be opened. */
void keys_open(const cli *c, keysrc *k, size_t n);
/* The next key, valid until the next call; false at the end. Exits 1 on a read error. */
bool keys_next(const cli *c, keysrc *k, const char **key, size_t *len);
/* Progress so far in [0, total]. */
uint64_t keys_pos(const keysrc *k);
void keys_close(keysrc *k);

/* ---- progress ----------------------------------------------------------------------------- */

/* A progress bar on stderr, shown only when stderr is a terminal and only once the work has run
 * for a second; progress_end() clears it. Cheap to update often. With a unit ("keys") it also
 * shows the counts, the rate and the time left: "[###...]  42%  1234/5678 keys  400 keys/s  ETA
 * 0:11" (without a known total: the count and the rate). Forced (--progress), it is drawn when
 * stderr is not a terminal too, as one line "chash CMD: LABEL ..." every half second, from the
 * first update on, for logs and scripts. */
typedef struct progress {
    const char *label;
    const char *cmd;  /* forced lines: "chash CMD: " */
    const char *unit; /* NULL: a bare bar */
    uint64_t total;
    double start, last;
    bool tty, shown, lines;
} progress;

void progress_start(progress *p, const char *label, uint64_t total);
/* progress_start with counts in `unit`; lines: draw lines when stderr is not a terminal. */
void progress_start_counted(progress *p, const char *cmd, const char *label, uint64_t total,
                            const char *unit, bool lines);
void progress_update(progress *p, uint64_t done);
void progress_end(progress *p);

double now_seconds(void);

/* ---- JSON --------------------------------------------------------------------------------- */

/* A streaming JSON writer to stdout: objects and arrays nest; commas are placed for you.
 * Keys and strings are escaped per RFC 8259 (", \, every control character); valid UTF-8 is
 * passed through and each byte that is not part of valid UTF-8 becomes U+FFFD, so the output is
 * always valid JSON in UTF-8. Non-finite numbers are written as null. */
typedef struct json {
    FILE *out;
    int depth;
    bool first[32]; /* per nesting level: nothing written in it yet */
    char close[32]; /* per nesting level: the bracket that closes it */
    bool after_key;
} json;

void json_init(json *j, FILE *out);
void json_obj(json *j);   /* { */
void json_arr(json *j);   /* [ */
void json_end(json *j);   /* } or ] */
void json_key(json *j, const char *k);
void json_str(json *j, const char *s); /* NULL writes null */
void json_strn(json *j, const char *s, size_t len); /* len bytes, NULs included (\u0000) */
void json_num(json *j, double v);
void json_int(json *j, uint64_t v);
void json_bool(json *j, bool v);
void json_null(json *j);
void json_done(json *j); /* the final newline */

/* ---- small helpers ------------------------------------------------------------------------ */

/* The length of the valid UTF-8 sequence (RFC 3629: no overlong form, surrogate or code point
 * above U+10FFFF) at p[0, n), or 0 when none starts there. */
size_t utf8_seq(const unsigned char *p, size_t n);
bool utf8_valid(const char *s, size_t len);

void *xmalloc(const cli *c, size_t n);
void *xcalloc(const cli *c, size_t n, size_t size);
char *xstrdup(const cli *c, const char *s);
/* Load statistics of x[0..n-1] (multiples of the fair share): min, max and the root mean
 * square deviation from 1.0 (exactly fair). */
void load_stats(const double *x, size_t n, double *min, double *max, double *stddev);
/* The stddev of a ring's loads expected from uniformly random points (see sweep.c). */
double ring_theory_stddev(const fleet *f, uint32_t vnodes);
/* The least fraction of keys any placement must move from fleet a to fleet b: one minus the sum,
 * over the ids in both, of the smaller of the two fair shares w / W. */
double min_moved(const fleet *a, const fleet *b);

#endif

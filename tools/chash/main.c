/* SPDX-License-Identifier: Apache-2.0 */
/*
 * main.c — `chash`: measure, compare and plan a cache fleet's placement with libchash.
 * One table of subcommands; each names its options, and its help ends with an example.
 */
#include "commands.h"

#include <stdio.h>
#include <string.h>

#define NODE_OPTS                                                                              \
    "  --nodes N|LIST     N nodes node-1..node-N (default 8), or id[:weight],...\n"            \
    "  --config FILE      nodes from a twemproxy-style YAML pool (ids: server names, else\n"    \
    "                     host:port; weights from the file); --pool NAME picks the pool\n"

static const struct command {
    const char *name;
    int (*fn)(cli *c);
    unsigned opts;
    const char *summary;
    const char *help;
} commands[] = {
    {"lookup", cmd_lookup,
     OPT_NODES | OPT_ALGO | OPT_HASH | OPT_VNODES | OPT_REPLICAS | OPT_MAGLEV | OPT_SHOWVERSION |
         OPT_JSON,
     "print the owner (and replicas) of each key",
     "usage: chash lookup [--nodes N|LIST | --config FILE [--pool NAME]] [--algo NAME]\n"
     "                    [--hash NAME] [--vnodes N] [--replicas R] [--show-version]\n"
     "                    [--json] KEY... | -\n"
     "\n"
     "One line per key: KEY<TAB>OWNER[<TAB>REPLICA...]. With --config an owner is printed as\n"
     "host:port, followed by a tab and the server's name when the pool names its servers.\n"
     "Keys and names are escaped so that a line stays one record: \\\\ for a backslash, \\t,\n"
     "\\n, \\r, and \\xHH for any other control byte; other bytes as they are.\n"
     "'-' reads keys from stdin, one per line, streaming. With --config the pool's hash,\n"
     "distribution and hash_tag apply, so the owner is the server nutcracker would use (for\n"
     "distribution random, nutcracker picks a server per request: one random draw is shown).\n"
     "\n" NODE_OPTS
     "  --algo NAME        placement (default: the pool's distribution, else ring)\n"
     "  --hash NAME        key hash (default: the pool's hash, else fnv1a32_fmix)\n"
     "  --vnodes N         ring points per unit weight (default 160)\n"
     "  --table-size M     maglev table size, a prime (default 65537)\n"
     "  --replicas R       also print the next R-1 nodes of the key's failover walk\n"
     "  --show-version     first print '# version V': the membership version (the pool's\n"
     "                     'version', else a content hash), as libchash-cache reports it\n"
     "  --json             one JSON object per key, a line each (JSON Lines; schema in\n"
     "                     docs/CLI.md): key, key_hex (when the key is not UTF-8), owner, nodes\n"
     "\n"
     "example:\n"
     "  chash lookup --nodes cache-01,cache-02,cache-03:2 --replicas 2 user:42 user:43\n"},

    {"simulate", cmd_simulate,
     OPT_NODES | OPT_ALGO | OPT_HASH | OPT_VNODES | OPT_SEED | OPT_KEYS | OPT_KEYFILE | OPT_JSON |
         OPT_CHANGE | OPT_MAGLEV,
     "keys moved by a fleet change, and the load on each node",
     "usage: chash simulate [nodes] [--add ID[:W]... | --remove ID... | --to NODES|FILE]\n"
     "                      [--algo LIST|all] [--keys N | --key-file F] [--json]\n"
     "\n"
     "For each algorithm: the fraction of keys whose owner changes (and the least any placement\n"
     "must move), and each node's load as a multiple of its fair share (weights respected; 1.0 is\n"
     "exactly fair) after the change, with min, max and stddev (root mean square distance from\n"
     "1.0). Without a change, only the loads. Modulo and jump are skipped for weighted nodes.\n"
     "\n" NODE_OPTS
     "  --add ID[:W]       add a node (repeatable, or a comma list)\n"
     "  --remove ID        remove a node (repeatable, or a comma list)\n"
     "  --to NODES|FILE    the new fleet, as a node list or a config file\n"
     "  --algo LIST|all    algorithms to compare (default: the pool's distribution, else all)\n"
     "  --hash NAME        key and point hash (default: the pool's hash, else fnv1a32_fmix)\n"
     "  --vnodes N         ring points per unit weight (default 160)\n"
     "  --table-size M     maglev table size (default 65537)\n"
     "  --keys N           generated keys key:<seed>:0 .. key:<seed>:N-1 (default 1000000)\n"
     "  --seed N           seed of the generated keys (default 0)\n"
     "  --key-file F       keys from a file, one per line ('-': stdin)\n"
     "  --json             one JSON object (schema in docs/CLI.md)\n"
     "\n"
     "example:\n"
     "  chash simulate --nodes 8 --add node-9 --keys 1000000\n"},

    {"sweep", cmd_sweep, OPT_NODES | OPT_HASH | OPT_VNODES | OPT_JSON,
     "ring balance and memory against virtual nodes per node",
     "usage: chash sweep [nodes] [--vnodes LIST] [--hash NAME] [--json]\n"
     "\n"
     "For each vnode count: the ring's exact load per node (from the arcs it owns, as a multiple\n"
     "of the fair share), min, max and stddev, the stddev a uniformly random ring would have\n"
     "(about 1/sqrt(vnodes)), and the table's memory.\n"
     "\n" NODE_OPTS
     "  --vnodes LIST      points per unit weight (default 1,10,40,100,160,500,1000)\n"
     "  --hash NAME        point hash (default: the pool's hash, else fnv1a32_fmix)\n"
     "  --json             one JSON object (schema in docs/CLI.md)\n"
     "\n"
     "example:\n"
     "  chash sweep --nodes 8 --vnodes 1,10,40,100,160,500,1000\n"},

    {"hashcheck", cmd_hashcheck,
     OPT_NODES | OPT_ALGO | OPT_HASH | OPT_VNODES | OPT_SEED | OPT_KEYS | OPT_KEYFILE | OPT_JSON,
     "is a hash fit for placement? spread, balance, verdict",
     "usage: chash hashcheck [nodes] [--hash LIST|all] [--algo NAME] [--vnodes N] [--keys N]\n"
     "                       [--key-file F] [--json]\n"
     "\n"
     "Three tests per hash (four with a pool), each a p-value against what a uniformly random\n"
     "hash gives; a hash\n"
     "fails when any p-value is below 0.001 (the node test is Bonferroni-corrected over nodes):\n"
     "  spread   each node's ring points should be spread over the whole circle (Kuiper test per\n"
     "           node; the largest empty arc is shown against its uniform expectation H(k)/k)\n"
     "  balance  the ring's exact shares against the Beta spread of k random points per node\n"
     "           (chi-square; stddev shown against theory, about 1/sqrt(vnodes))\n"
     "  keys     generated keys key:<seed>:<i> over 1024 equal arcs of the circle (chi-square)\n"
     "  pool     with --config (or --algo): the keys placed by the pool's distribution with this\n"
     "           hash, per server against the table's exact shares (chi-square), and the busiest\n"
     "           server's load against its fair share by weight\n"
     "\n" NODE_OPTS
     "  --hash LIST|all    hashes to check (default all)\n"
     "  --algo NAME        the pool test's distribution (default: the pool's)\n"
     "  --key-file F       keys for the key and pool tests, one per line ('-': stdin)\n"
     "  --vnodes N         ring points per unit weight (default 160)\n"
     "  --keys N           keys for the key test (default 200000)\n"
     "  --seed N           seed of the generated keys (default 0)\n"
     "  --json             one JSON object (schema in docs/CLI.md)\n"
     "\n"
     "example:\n"
     "  chash hashcheck --nodes 8 --hash fnv1a32,fnv1a32_fmix\n"
     "  chash hashcheck --config nutcracker.yml --hash fnv1a_64,murmur,md5\n"},

    {"bench", cmd_bench, OPT_NODES | OPT_ALGO | OPT_HASH | OPT_VNODES | OPT_SEED | OPT_KEYS |
                             OPT_JSON | OPT_MAGLEV,
     "lookups per second per algorithm and hash",
     "usage: chash bench [nodes] [--algo LIST|all] [--hash LIST|all] [--keys N] [--json]\n"
     "\n"
     "For each algorithm x hash: ns per lookup (hash + placement), ns per hash alone measured in\n"
     "the same run on the same keys, their ratio, and lookups per second. Short passes over\n"
     "1024 keys alternate between hash-only and lookup, walking the key set; each kind keeps\n"
     "its fastest pass (>= 100 ms in all per algorithm x hash).\n"
     "\n" NODE_OPTS
     "  --algo LIST|all    algorithms (default all)\n"
     "  --hash LIST|all    hashes (default all)\n"
     "  --vnodes N         ring points per unit weight (default 160)\n"
     "  --keys N           distinct keys looked up in turn (default 100000)\n"
     "  --json             one JSON object (schema in docs/CLI.md)\n"
     "\n"
     "example:\n"
     "  chash bench --nodes 100 --algo ring,jump --hash fnv1a32_fmix,xxh3\n"},

    {"plan", cmd_plan,
     OPT_ALGO | OPT_HASH | OPT_VNODES | OPT_SEED | OPT_KEYS | OPT_KEYFILE | OPT_JSON | OPT_NEW |
         OPT_MAGLEV | OPT_NODES | OPT_WINDOW,
     "which share of the keys moves from which node to which",
     "usage: chash plan OLD NEW [--algo NAME] [--hash NAME] [--vnodes N]\n"
     "                  [--new-hash NAME] [--new-vnodes N] [--keys N | --key-file F] [--json]\n"
     "                  [--pool-keys K --read-rate R]\n"
     "       chash plan OLD [NEW] --from SCHEME --to SCHEME [...]\n"
     "\n"
     "OLD and NEW are node lists (as --nodes) or config files (--pool applies to both). Prints\n"
     "the share of the key space that changes owner, from which node to which: exact from the\n"
     "ring arcs (ring) or maglev slots (maglev, same size), otherwise measured on --keys sample\n"
     "keys (default 1000000, the sample size is printed). With --key-file, prints instead each\n"
     "key that moves: KEY<TAB>FROM -> TO. Warns loudly when the change alters the hash, the vnode\n"
     "count, or the spelling of a node id (the same host:port under another name, ids that\n"
     "differ only in case, spaces or zero padding): that remaps far more than it seems to.\n"
     "\n"
     "  --algo NAME        ring (default), modulo, rendezvous, jump, maglev, or any\n"
     "                     registry name (dalli@3, ...): both sides\n"
     "  --from SCHEME      the algorithm of OLD (a config's distribution otherwise)\n"
     "  --to SCHEME        the algorithm of NEW (default: NEW's distribution, else OLD's);\n"
     "                     with --from/--to, NEW may be left out: the same fleet\n"
     "  --hash NAME        hash of OLD (and NEW unless --new-hash)\n"
     "  --vnodes N         vnodes of OLD (and NEW unless --new-vnodes)\n"
     "  --pool NAME        the pool to read from config files\n"
     "  --keys N           sample size when the plan cannot be exact (default 1000000)\n"
     "  --key-file F       list the keys of F that move ('-': stdin)\n"
     "  --pool-keys K      with --read-rate: the pool holds K keys, read R times a second\n"
     "  --read-rate R      in all; prints the moved keys and the warm_up window (chash-proxy)\n"
     "                     that sees 90%, 99% and 99.9% of them read, so copied, before it\n"
     "                     ends (uniform reads: W = -ln(1 - p) K / R)\n"
     "  --json             one JSON object (schema in docs/CLI.md)\n"
     "\n"
     "example:\n"
     "  chash plan cache-01,cache-02,cache-03 cache-01,cache-02,cache-03,cache-04\n"
     "  chash plan --from dalli@3 --to ring 10.0.0.1:11211:1,10.0.0.2:11211:1\n"},

    {"migrate", cmd_migrate, OPT_NODES | OPT_JSON | OPT_MIGRATE,
     "copy the keys whose owner changes from OLD's servers to NEW's",
     "usage: chash migrate OLD.yml NEW.yml [--pool NAME] [--rate KEYS_PER_S]\n"
     "                     [--checkpoint FILE] [--dry-run] [--verify] [--replace]\n"
     "                     [--limit N] [--batch N] [--parallel N] [--match GLOB] [--json]\n"
     "                     [--progress] [--restart]\n"
     "\n"
     "OLD and NEW are chash-proxy (twemproxy) configs; both placements are built as chash-proxy\n"
     "builds them (distribution, hash, hash_tag, weights, names). Every OLD server's keys are\n"
     "enumerated (Redis: SCAN; memcached: lru_crawler metadump all); a key it owns under OLD\n"
     "whose owner under NEW is another server (by address) is copied there with its TTL (Redis:\n"
     "DUMP, PTTL, RESTORE; memcached: mg, then add with the flags and the time left). Nothing\n"
     "is deleted. Each moved key is counted copied, present (the new owner has it already: it\n"
     "is newer, and kept), expired or failed; failed keys are listed on stderr. Exit status: 0\n"
     "done, 1 any key failed (or a server, or --verify found a mismatch), 2 bad input, 3\n"
     "stopped early (--limit, SIGINT, SIGTERM: rerun with the same --checkpoint to go on).\n"
     "\n"
     "  --pool NAME        the pool to migrate (needed when a file has several)\n"
     "  --rate N           copy at most N keys per second (default 0: no limit)\n"
     "  --checkpoint FILE  record each OLD server's progress in FILE (every 5000 keys, atomic);\n"
     "                     a rerun with the same FILE resumes (memcached: finished servers\n"
     "                     only: metadump has no cursor). The file carries a checksum and the\n"
     "                     identity of the moved set: one edited, of other configs, or whose\n"
     "                     counts do not add up is refused (exit 1), naming what is wrong\n"
     "  --restart          with --checkpoint: ignore what FILE holds and start afresh\n"
     "  --dry-run          count what would move, per pair of servers; write nothing (with\n"
     "                     --verify: only check an earlier run's copies)\n"
     "  --verify           afterwards, check every moved key at its new owner: present, TTL\n"
     "                     within 2 s of the source's\n"
     "  --replace          overwrite a key the new owner has already (RESTORE REPLACE / set)\n"
     "  --match GLOB       only keys matching GLOB (fnmatch) are the pool's: servers shared\n"
     "                     with other pools hold theirs too, which are left alone\n"
     "  --limit N          stop after about N keys scanned (resume with --checkpoint)\n"
     "  --batch N          keys per SCAN COUNT and per pipeline (default 1000)\n"
     "  --parallel N       OLD servers drained at once, each by a thread with its own\n"
     "                     connections (default 4, at most the OLD servers)\n"
     "  --progress         progress lines on stderr even when it is no terminal (a terminal\n"
     "                     gets a bar): keys scanned of the total, keys/s, ETA\n"
     "  --json             one JSON object (schema in docs/CLI.md); \"complete\" is true only\n"
     "                     when the run went to its end with no failed key and no failed source\n"
     "\n"
     "example:\n"
     "  chash migrate old.yml new.yml --pool cache --dry-run\n"
     "  chash migrate old.yml new.yml --pool cache --rate 20000 --checkpoint mig.ckpt --verify\n"},

    {"fleet", cmd_fleet, OPT_FLEET | OPT_JSON,
     "a pool's membership in etcd: status, two-phase apply, abort, forget",
     "usage: chash fleet status (CONFIG.yml [--pool NAME] | --etcd etcd://host:port/key) [--json]\n"
     "       chash fleet apply NEW.yml [--pool NAME] [--etcd etcd://host:port[/key]]\n"
     "                         [--timeout MS] [--migrate [--rate N] [--batch N] [--parallel N]\n"
     "                         [--match GLOB]] [--json]\n"
     "       chash fleet abort (CONFIG.yml [--pool NAME] | --etcd etcd://host:port/key)\n"
     "       chash fleet forget ID (CONFIG.yml [--pool NAME] | --etcd etcd://host:port/key)\n"
     "\n"
     "The pool's membership in etcd under the key K of its 'membership: etcd://host:port/K'\n"
     "(docs/FLEET.md). status prints K's committed document (its epoch: its \"epoch\", else K's\n"
     "mod_revision; servers; version), a pending change (K/pending), every live instance\n"
     "record under K/instances/ (epoch, servers, warm-up, fenced, prepared, failed, refused),\n"
     "the lost instances (a member of K/members/ without a live record, or one a commit went\n"
     "without: K/lost/), and the skew: the instances behind the committed epoch, and how long\n"
     "ago the first instance began serving it. apply runs the two-phase switch: it writes\n"
     "NEW.yml's membership to K/pending with an epoch above every one committed or served\n"
     "(refused while another change is pending), waits until every live instance has prepared\n"
     "it, then writes K and deletes K/pending in one transaction, and waits until every live\n"
     "instance serves it (or is fenced); it prints the swap window (first to last swap) and the\n"
     "time from the commit to the last swap. If an instance fails to prepare, or not all have\n"
     "within the timeout, it deletes K/pending instead and exits 1 naming them: nothing was\n"
     "applied. An instance whose lease expired (it fenced itself before) is committed without,\n"
     "named with why, noted in K/lost/, and the exit status is 3. abort deletes a pending\n"
     "change (of an apply that died); forget removes an instance gone for good from K/members/\n"
     "and K/lost/. With --migrate the change is staged before its commit: once every instance\n"
     "has prepared it, each deletes a written key at its next owner after writing it, while\n"
     "apply deletes at NEW's servers the keys they would own without owning them now, then\n"
     "copies the keys that move from their owners under K's document to their owners\n"
     "under NEW.yml (as chash migrate does, each copy confirmed at its source afterwards); then\n"
     "the commit. So a key written during the copy is never left older at its new owner: 0\n"
     "stale reads after the switch (docs/FLEET.md, \"Staged migration\"). Exit status: 0 done,\n"
     "1 an error (etcd unreachable, a refused or timed out change, keys that could not be\n"
     "copied: nothing committed), 2 bad usage, 3 committed without the lost instances it names.\n"
     "\n"
     "  --pool NAME        the pool of the file (needed when it has several)\n"
     "  --etcd URL         etcd://host:port[/key]: without a file, the pool key; with one, it\n"
     "                     overrides the file's endpoint (and its key, when given)\n"
     "  --timeout MS       apply: how long to wait for the prepares, then for the swaps\n"
     "                     (default 10000)\n"
     "  --migrate          apply: stage the change and copy the moved keys before the commit\n"
     "  --rate N           --migrate: at most N keys scanned per second (default: no limit)\n"
     "  --batch N          --migrate: keys per pipeline (default 1000)\n"
     "  --match GLOB       --migrate: only the keys matching GLOB are the pool's (servers shared\n"
     "                     with other pools hold theirs too)\n"
     "  --parallel N       --migrate: old servers drained at once (default 4)\n"
     "  --json             one JSON object (schema in docs/CLI.md)\n"
     "\n"
     "example:\n"
     "  chash fleet status proxy.yml --pool alpha\n"
     "  chash fleet apply new.yml --pool alpha --timeout 5000\n"
     "  chash fleet apply new.yml --pool alpha --migrate --rate 20000\n"},

    {"algorithms", cmd_algorithms, OPT_JSON,
     "the placement algorithms and schemes, with the weights each takes",
     "usage: chash algorithms [--json]\n"
     "\n"
     "Every name --algo and a pool's 'distribution' take (libchash's registry), one a line:\n"
     "NAME<TAB>what it takes: weights (up to the scheme's largest, when it has one) or none,\n"
     "the key hash a client library's scheme fixes, node ids as host:port, placement by the key.\n"
     "\n"
     "  --json             one JSON object (schema in docs/CLI.md)\n"
     "\n"
     "example:\n"
     "  chash algorithms --json\n"},

    {"hashes", cmd_hashes, OPT_JSON,
     "the key hashes, with their widths",
     "usage: chash hashes [--json]\n"
     "\n"
     "Every name --hash and a pool's 'hash' take (libchash's registry), one a line:\n"
     "NAME<TAB>its width in bits, and which is the default.\n"
     "\n"
     "  --json             one JSON object (schema in docs/CLI.md)\n"
     "\n"
     "example:\n"
     "  chash hashes --json\n"},

    {"hotkeys", cmd_hotkeys, OPT_HOTKEYS | OPT_JSON,
     "a chash-proxy's hot keys, from its admin port",
     "usage: chash hotkeys --admin HOST:PORT [--pool NAME] [--top N] [--timeout MS] [--json]\n"
     "\n"
     "Reads GET /-/hotkeys of the chash-proxy whose admin port (--metrics-port) is HOST:PORT and\n"
     "prints, per pool, its hottest keys over about the last 60 s: the key, its requests per\n"
     "second with the error bound (the true rate is within [rate - error, rate]), the last\n"
     "second's rate, the count since the proxy started, and the server that owns it\n"
     "(docs/OPERATIONS.md, \"Hot keys\").\n"
     "\n"
     "  --admin HOST:PORT  the proxy's admin port\n"
     "  --pool NAME        only this pool\n"
     "  --top N            the N hottest keys per pool (default 10)\n"
     "  --timeout MS       how long to wait for the proxy (default 5000)\n"
     "  --json             the endpoint's JSON, cut to --pool and --top (schema in\n"
     "                     docs/OPERATIONS.md)\n"
     "\n"
     "example:\n"
     "  chash hotkeys --admin 127.0.0.1:9121 --top 5\n"},

    {"report", cmd_report, OPT_NODES | OPT_HASH | OPT_VNODES | OPT_SEED | OPT_KEYS | OPT_OUT,
     "write a self-contained HTML report with SVG charts",
     "usage: chash report [nodes] [--hash NAME] [--vnodes N] [--keys N] [--out FILE]\n"
     "\n"
     "One HTML file, no external JS, CSS or fonts: keys moved on +1 and -1 node per algorithm,\n"
     "balance against vnodes, weights achieved against intended, and hashes compared.\n"
     "\n" NODE_OPTS
     "  --hash NAME        hash for the algorithm charts (default fnv1a32_fmix)\n"
     "  --vnodes N         ring points per unit weight (default 160)\n"
     "  --keys N           sample keys per measurement (default 200000)\n"
     "  --seed N           seed of the sample keys (default 0)\n"
     "  --out FILE         where to write (default report.html; '-': stdout)\n"
     "\n"
     "example:\n"
     "  chash report --nodes 8 --out report.html\n"},
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *f)
{
    fputs("usage: chash COMMAND [options]    (chash COMMAND --help for its options)\n"
          "       chash --version\n\n", f);
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fputs("\nexample:\n  chash simulate --nodes 8 --add node-9\n", f);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs("chash: missing command (try chash --help)\n", stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
        printf("chash %s\n", ch_version());
        return 0;
    }
    for (size_t i = 0; i < NCOMMANDS; i++) {
        if (strcmp(argv[1], commands[i].name) == 0) {
            cli c = {.cmd = commands[i].name};
            cli_parse(&c, argc - 1, argv + 1, commands[i].opts, commands[i].help);
            return commands[i].fn(&c);
        }
    }
    fprintf(stderr, "chash: unknown command '%s' (try chash --help)\n", argv[1]);
    return 2;
}

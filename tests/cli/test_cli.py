#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""
test_cli.py -- tests of the chash CLI against the library's properties.

usage: test_cli.py PATH/TO/chash GROUP      (GROUP: one of GROUPS below; ctest runs each)

Every tolerance below is derived from the spread of the quantity it bounds, and the comment next
to it says how. Two spreads recur:
  - sampling: a fraction p measured on n keys has standard deviation sqrt(p (1 - p) / n); at
    n = 1,000,000 and p = 1/9 that is 0.031 percentage points;
  - ring randomness: a node holding k of the ring's P points owns a Beta(k, P - k) share, whose
    standard deviation relative to its mean is sqrt((P - k) / (k (P + 1))): about 8% at 160
    points per node. This is a property of the node names, not noise of the measurement; it is
    why a ring's moved fraction is compared with the exact share from `chash plan` (and with
    1/(N+1) only at 10,000 points per node).
"""
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

CHASH = sys.argv[1] if len(sys.argv) > 1 else "chash"
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
MILLION = 1000000


def registry(macro):
    """The names of a registry list (CH_ALGO_LIST / CH_HASH_LIST) read from include/chash.h, so
    "all" is checked against the header, not against what the CLI prints."""
    header = os.path.join(os.path.dirname(FIXTURES), "..", "..", "include", "chash.h")
    lines = open(header).read().split("#define %s(X)" % macro, 1)[1].splitlines()[1:]
    names = []
    for line in lines:
        # X(ID, name, bits, value) for hashes; X(ID, ident, "name", value) for algorithms.
        m = re.match(r'\s*X\(\w+, (?:\w+, "([^"]+)"|(\w+))', line)
        if m:
            names.append(m.group(1) or m.group(2))
        if not line.rstrip().endswith("\\"):
            break
    return set(names)


ALGOS = registry("CH_ALGO_LIST")
# Placed by the key itself, without a key hash: only lookup and bench take them; simulate skips.
KEYED = {"pymemcache@3"}
HASHES = registry("CH_HASH_LIST")


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def run(*args, stdin=None, rc=0):
    """Runs chash; checks the exit status; returns (stdout, stderr)."""
    p = subprocess.run([CHASH, *args], input=stdin, capture_output=True, text=True)
    if p.returncode != rc:
        raise Fail("chash %s: exit %d, wanted %d\nstdout: %s\nstderr: %s"
                   % (" ".join(args), p.returncode, rc, p.stdout[:2000], p.stderr[:2000]))
    return p.stdout, p.stderr


def run_json(*args):
    out, err = run(*args, "--json")
    try:
        return json.loads(out), err
    except json.JSONDecodeError as e:
        raise Fail("chash %s --json: not JSON (%s):\n%s" % (" ".join(args), e, out[:2000]))


def near(x, want, tol, what):
    check(abs(x - want) <= tol, "%s: %.6f, wanted %.6f +- %.6f" % (what, x, want, tol))


def sampling_sd(p, n):
    return math.sqrt(p * (1 - p) / n)


def by_algo(doc):
    return {r["algo"]: r for r in doc["results"]}


def is_num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def check_fields(obj, fields, what):
    """fields: name -> a type or a predicate, for exactly the keys obj must have."""
    check(isinstance(obj, dict), "%s: not an object: %r" % (what, obj))
    check(set(obj) == set(fields), "%s: keys %s, wanted %s" % (what, sorted(obj), sorted(fields)))
    for k, ok in fields.items():
        good = isinstance(obj[k], ok) if isinstance(ok, type) else ok(obj[k])
        check(good, "%s: bad %s: %r" % (what, k, obj[k]))


# ---- help -------------------------------------------------------------------------------------

COMMANDS = ["lookup", "simulate", "sweep", "hashcheck", "bench", "plan", "report", "migrate",
            "fleet", "algorithms", "hashes", "hotkeys"]


def test_help():
    out, _ = run("--help")
    for c in COMMANDS:
        check(re.search(r"^  %s " % c, out, re.M), "chash --help does not list %s" % c)
    for c in COMMANDS:
        out, err = run(c, "--help")
        check(out.startswith("usage: chash %s" % c), "%s --help: no usage line" % c)
        check("\nexample:\n  chash %s " % c in out, "%s --help: no example" % c)
        check(err == "", "%s --help wrote to stderr" % c)
        # The example in the help must itself be a valid command line (here: its options parse).
        example = out.split("example:\n  ")[1].split("\n")[0].split()
        check(example[:2] == ["chash", c], "%s --help: odd example %r" % (c, example))


# ---- lookup -----------------------------------------------------------------------------------

def test_lookup():
    out, err = run("lookup", "--nodes", "cache-01,cache-02,cache-03:2", "user:42", "user:43")
    lines = out.splitlines()
    check(len(lines) == 2 and err == "", "lookup: %r %r" % (out, err))
    for line, key in zip(lines, ["user:42", "user:43"]):
        k, owner = line.split("\t")
        check(k == key and owner in ("cache-01", "cache-02", "cache-03"), "lookup line %r" % line)

    # '-' reads stdin, one key per line, and gives what the same keys as arguments give.
    # Replicas: min(R, N) distinct nodes, the owner first (jump has no replicas).
    keys = ["key:%d" % i for i in range(300)] + ["", "with space", "tab-less:\u00fc"]
    for algo in ("ring", "modulo", "rendezvous", "jump", "maglev"):
        a, _ = run("lookup", "--nodes", "5", "--algo", algo, *keys)
        b, _ = run("lookup", "--nodes", "5", "--algo", algo, "-", stdin="\n".join(keys) + "\n")
        check(a == b, "lookup %s: stdin and arguments differ" % algo)
        check([l.split("\t")[0] for l in b.split("\n")[:-1]] == keys, "lookup %s: keys" % algo)
        if algo == "jump":
            continue
        rep, _ = run("lookup", "--nodes", "5", "--algo", algo, "--replicas", "3", *keys)
        for r, o in zip(rep.splitlines(), a.splitlines()):
            f = r.split("\t")
            check(len(f) == 4 and len(set(f[1:])) == 3, "replicas %s: %r" % (algo, r))
            check(f[1] == o.split("\t")[1], "replicas %s: owner first: %r vs %r" % (algo, r, o))
    rep, _ = run("lookup", "--nodes", "3", "--replicas", "10", "k")
    check(len(rep.rstrip("\n").split("\t")) == 4, "replicas > N: %r" % rep)

    # Streaming: with stdin still open, answers for the first keys arrive (a lookup does not
    # wait for the end of its input, so it never holds millions of keys).
    p = subprocess.Popen([CHASH, "lookup", "--nodes", "4", "-"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    done = threading.Event()

    def feed():  # a writer of its own, so neither side can block the other
        p.stdin.write("".join("stream:%d\n" % i for i in range(20000)))
        p.stdin.flush()
        done.wait()
        p.stdin.close()

    writer = threading.Thread(target=feed)
    writer.start()
    first = p.stdout.readline()  # blocks until output; the ctest timeout ends a hang
    check(first.startswith("stream:0\tnode-"), "streaming: first line %r" % first)
    done.set()
    rest = p.stdout.read()
    writer.join()
    check(p.wait() == 0 and rest.count("\n") == 19999, "streaming: output incomplete")

    # --config: owners as host:port, then the server's name when the pool names its servers.
    # The ids are the names (else host:port), the weights, hash and distribution come from the
    # file (fnv1a_64, ketama), so the owners must be those of the equivalent --nodes list.
    pools = os.path.join(FIXTURES, "pools.yml")
    addr = {"cache-a": "127.0.0.1:6379", "cache-b": "127.0.0.1:6380", "cache-c": "127.0.0.1:6381"}
    keys = ["user:%d" % i for i in range(200)]
    named, _ = run("lookup", "--config", pools, "--pool", "named", "--replicas", "2", *keys)
    same, _ = run("lookup", "--nodes", "cache-a:1,cache-b:1,cache-c:2", "--replicas", "2",
                  "--algo", "ketama", "--hash", "fnv1a_64", *keys)
    other, _ = run("lookup", "--nodes", "cache-a:1,cache-b:1,cache-c:2", "--replicas", "2", *keys)
    check(other != same, "the pool's hash and distribution must matter")
    for n, s in zip(named.splitlines(), same.splitlines()):
        k, a1, n1, a2, n2 = n.split("\t")
        _, s1, s2 = s.split("\t")
        check((n1, n2) == (s1, s2) and addr[n1] == a1 and addr[n2] == a2,
              "lookup --config named: %r vs %r" % (n, s))
    # --show-version: the pool's "version" verbatim, else "m-" + 12 hex digits of a content
    # hash that follows the membership (same members: same version; a weight changed: another).
    out, _ = run("lookup", "--show-version", "--config",
                 os.path.join(FIXTURES, "..", "..", "config", "fixtures", "valid_chash_keys.yml"),
                 "--pool", "cache", "k")
    check(out.splitlines()[0] == "# version fleet-2026-11-29.1", "explicit version: %r" % out)
    v1 = run("lookup", "--show-version", "--nodes", "a,b,c", "k")[0].splitlines()[0]
    v2 = run("lookup", "--show-version", "--nodes", "a,b,c", "k")[0].splitlines()[0]
    v3 = run("lookup", "--show-version", "--nodes", "a,b,c:2", "k")[0].splitlines()[0]
    check(re.fullmatch(r"# version m-[0-9a-f]{12}", v1) and v1 == v2 and v1 != v3,
          "content versions: %r %r %r" % (v1, v2, v3))

    # Unnamed servers on port 11211: twemproxy's ketama hashes them by host alone (the pool's
    # defaults: fnv1a_64, ketama); printed as host:port.
    plain, _ = run("lookup", "--config", pools, "--pool", "plain", *keys)
    same, _ = run("lookup", "--nodes", "10.0.0.1,10.0.0.2,10.0.0.3", "--algo", "ketama",
                  "--hash", "fnv1a_64", *keys)
    check(plain == same.replace("\n", ":11211\n"), "lookup --config plain: ids must be hosts")
    check(len(plain.splitlines()[0].split("\t")) == 2, "lookup --config plain: one column")
    out, err = run("lookup", "--config", pools, "k", rc=2)
    check("--pool" in err and "named" in err and "plain" in err, "two pools: %r" % err)


# ---- simulate: moved fractions at 1M keys -----------------------------------------------------

def test_simulate():
    doc, _ = run_json("simulate", "--nodes", "8", "--add", "node-9", "--keys", str(MILLION))
    r = by_algo(doc)
    check(set(r) == ALGOS - KEYED, "algos %s" % sorted(r))
    check(doc["keys"] == MILLION and doc["old_nodes"] == 8 and doc["new_nodes"] == 9, "header")
    for a in r.values():
        near(a["theory"], 1 / 9, 1e-6, "theory 8 -> 9")
    # Rendezvous and jump move exactly the new node's share, 1/(N+1), in expectation: the only
    # spread is sampling (0.031 pp), so +-0.5 pp is 16 standard deviations.
    for algo in ("rendezvous", "jump"):
        near(r[algo]["moved_fraction"], 1 / 9, 0.005, "%s moved 8 -> 9" % algo)
    # Modulo keeps a key only when h % 8 == h % 9, i.e. h mod 72 < 8: it moves 8/9 = N/(N+1).
    near(r["modulo"]["moved_fraction"], 8 / 9, 0.005, "modulo moved 8 -> 9")
    # The ring moves exactly the new node's arcs, whose size is Beta-distributed around 1/9
    # (sd ~0.9 pp at 160 points per node): compare with the exact share from the plan, up to
    # 5 sampling standard deviations ...
    plan, _ = run_json("plan", "8", "9")
    check(plan["method"] == "exact", "ring plan not exact")
    tol = 5 * sampling_sd(plan["moved_fraction"], MILLION)
    near(r["ring"]["moved_fraction"], plan["moved_fraction"], tol, "ring moved vs exact plan")
    # ... and with 1/(N+1) itself at 10,000 points per node, where the Beta sd is 0.105 pp and
    # +-0.5 pp is 4.8 of it.
    doc, _ = run_json("simulate", "--nodes", "8", "--add", "node-9", "--keys", str(MILLION),
                      "--algo", "ring", "--vnodes", "10000")
    near(doc["results"][0]["moved_fraction"], 1 / 9, 0.005, "ring (10000 vnodes) moved 8 -> 9")

    # A node lost, 8 -> 7: the last one, so jump keeps its promise; modulo keeps h mod 56 < 7.
    doc, _ = run_json("simulate", "--nodes", "8", "--remove", "node-8", "--keys", str(MILLION),
                      "--algo", "modulo,rendezvous,jump")
    r = by_algo(doc)
    for algo in ("rendezvous", "jump"):
        near(r[algo]["moved_fraction"], 1 / 8, 0.005, "%s moved 8 -> 7" % algo)
    near(r["modulo"]["moved_fraction"], 7 / 8, 0.005, "modulo moved 8 -> 7")
    # Removing a node from the middle renumbers jump's buckets after it: far more than 1/8
    # moves (documented in ALGORITHMS.md), while rendezvous still moves 1/8.
    doc, _ = run_json("simulate", "--nodes", "8", "--remove", "node-3", "--keys", "100000",
                      "--algo", "rendezvous,jump")
    r = by_algo(doc)
    check(r["jump"]["moved_fraction"] > 0.5, "jump, middle node removed: %r" % r["jump"])
    near(r["rendezvous"]["moved_fraction"], 1 / 8, 0.01, "rendezvous, middle node removed")

    # Without a change: loads only.
    doc, _ = run_json("simulate", "--nodes", "5", "--keys", "50000")
    for a in doc["results"]:
        check(a["moved_fraction"] is None and a["theory"] is None, "no change: %r" % a)
        check(len(a["loads"]) == 5, "no change: loads")
    # --to and --add N give the same fleet as the list; --key-file reads keys from a file.
    a, _ = run_json("simulate", "--nodes", "4", "--add", "2", "--keys", "20000")
    b, _ = run_json("simulate", "--nodes", "4", "--to", "6", "--keys", "20000")
    check(a["results"] == b["results"], "--add 2 and --to 6 differ")
    with tempfile.NamedTemporaryFile("w", suffix=".keys") as f:
        f.write("".join("key:0:%d\n" % i for i in range(20000)))
        f.flush()
        c, _ = run_json("simulate", "--nodes", "4", "--to", "6", "--key-file", f.name)
    check(c["results"] == b["results"], "--key-file of the generated keys differs")
    out, _ = run("simulate", "--nodes", "8", "--add", "node-9", "--keys", "20000")
    check(re.search(r"^ring +\d+\.\d\d% +11\.11% ", out, re.M), "text output:\n" + out)


def test_client_schemes_config():
    # A pool's "distribution:" takes the versioned ids; the servers go to a scheme that names
    # them by address as "host:port" (Dalli's names; twemproxy's name for port 11211 is the host
    # alone), so the config places as --nodes with those addresses does.
    keys = "\n".join("user:%d" % i for i in range(2000)) + "\n"
    for dist, hash_line in (("dalli@3", ""), ("pecl_memcache@4", "  hash: crc32a\n"),
                            ("nginx@1", ""), ("uhashring@2", ""), ("predis@1", ""),
                            ("cache_memcached@1", ""), ("envoy_ring_hash@1", "")):
        with tempfile.NamedTemporaryFile("w", suffix=".yml") as f:
            f.write("pool:\n  listen: 127.0.0.1:22121\n  distribution: %s\n%s"
                    "  servers:\n   - 10.0.0.1:11211:1\n   - 10.0.0.2:11211:2 cache-b\n"
                    "   - 10.0.0.3:11212:1\n" % (dist, hash_line))
            f.flush()
            a, _ = run("lookup", "--config", f.name, "-", stdin=keys)
        ids = ("10.0.0.1:11211:1,10.0.0.2:11211:2,10.0.0.3:11212:1" if dist != "uhashring@2"
               else "10.0.0.1:1,cache-b:2,10.0.0.3:11212:1")
        b, _ = run("lookup", "--algo", dist, "--nodes", ids, "--hash", "crc32a", "-", stdin=keys)
        owners_a = [line.split("\t")[1] for line in a.splitlines()]
        owners_b = [line.split("\t")[1] for line in b.splitlines()]
        check(len(set(owners_b)) == 3, "%s: all three servers own keys" % dist)
        # --config prints host:port; --nodes prints the id.
        norm = {"10.0.0.1": "10.0.0.1:11211", "cache-b": "10.0.0.2:11211"}
        check([norm.get(x, x) for x in owners_b] == owners_a,
              "%s: --config and --nodes place differently" % dist)


def test_client_schemes():
    # simulate hashes keys with each scheme's own hash (md5_64be for md5_64_ring, a 64-bit
    # position): the loads it reports are the ones lookup gives, key for key.
    keys = ["user:%d" % i for i in range(20000)]
    with tempfile.NamedTemporaryFile("w", suffix=".keys") as f:
        f.write("\n".join(keys) + "\n")
        f.flush()
        for algo in ("md5_64_ring", "uhashring@2", "dalli@3", "pecl_memcache@4"):
            doc, _ = run_json("simulate", "--nodes", "8", "--algo", "ring," + algo,
                              "--key-file", f.name)
            r = by_algo(doc)[algo]
            out, _ = run("lookup", "--nodes", "8", "--algo", algo, "-",
                         stdin="\n".join(keys) + "\n")
            owners = [line.split("\t")[1] for line in out.splitlines()]
            want = max(owners.count(n) for n in set(owners)) / (len(keys) / 8)
            near(r["max_load"], want, 1e-3, "simulate %s max load %r, lookup %r"
                 % (algo, r["max_load"], want))


def test_weights():
    w = {"a": 4, "b": 4, "c": 1, "d": 1}
    W = sum(w.values())
    doc, err = run_json("simulate", "--nodes", "a:4,b:4,c:1,d:1", "--keys", str(MILLION))
    r = by_algo(doc)
    unweighted = ["modulo", "jump", "java_hashcode_ring", "md5_64_ring", "groupcache@0",
                  "guava@31", "pymemcache@3", "phpredis_array@5", "phpredis_array_range@5",
                  "redis_rb@4", "redis_rb@5", "go_redis_ring@5", "django_redis_shard@5",
                  "memjs@1"]
    check(doc["skipped"] == unweighted and set(r) == ALGOS - set(unweighted),
          "weights: the unweighted algorithms must be skipped: %r" % doc["skipped"])
    check("modulo skipped" in err and "jump skipped" in err, "no skip note: %r" % err)
    for node, wi in w.items():
        p = wi / W
        # A load is keys / (n p): its sampling sd is sqrt((1 - p) / (n p)), 0.3% for p = 0.1.
        samp = math.sqrt((1 - p) / (MILLION * p))
        # Rendezvous gives node i the probability w_i / W exactly (logarithmic method).
        near(r["rendezvous"]["loads"][node], 1.0, 5 * samp, "rendezvous load of %s" % node)
        # Maglev's shares are whole slots of 65537 taken in turns of w_i / w_max: off by at most
        # a few slots (N / (M p) < 0.1%), plus sampling.
        near(r["maglev"]["loads"][node], 1.0, 5 * samp + 0.001, "maglev load of %s" % node)
        # The ring: k = 160 w points of P = 1600; Beta sd sqrt((P - k) / (k (P + 1))) is 7.5%
        # for the light nodes and 3.1% for the heavy ones; 4.5 sd of it plus sampling.
        P, k = 160 * W, 160 * wi
        beta = math.sqrt((P - k) / (k * (P + 1)))
        near(r["ring"]["loads"][node], 1.0, 4.5 * math.hypot(beta, samp),
             "ring load of %s" % node)
    # Asking for an algorithm without weights by name is an error, not a skip.
    _, err = run("simulate", "--nodes", "a:4,b:1", "--algo", "jump", "--keys", "10", rc=1)
    check("no weights" in err, err)


# ---- JSON of every subcommand -----------------------------------------------------------------

ODD = ['quote"d', "back\\slash", "tab\there", "ctl\x01", "utf8-\u00e9"]


def test_json():
    ids = ",".join(ODD)
    num, s, n, nul = is_num, (lambda x: isinstance(x, str)), (lambda x: isinstance(x, int)), \
        (lambda x: x is None)
    # simulate, with ids that need escaping.
    doc, _ = run_json("simulate", "--nodes", ids, "--add", "new", "--keys", "20000")
    check_fields(doc, {"keys": n, "hash": s, "vnodes": n, "old_nodes": n, "new_nodes": n,
                       "results": lambda x: isinstance(x, list) and len(x) == len(ALGOS - KEYED),
                       "skipped": lambda x: set(x) == KEYED}, "simulate")
    for r in doc["results"]:
        check_fields(r, {"algo": s, "moved_fraction": num, "theory": num, "min_load": num,
                         "max_load": num, "stddev_load": num,
                         "loads": lambda x: sorted(x) == sorted(ODD + ["new"])}, "simulate result")
        check(r["min_load"] <= 1 <= r["max_load"] or r["min_load"] == r["max_load"], "min/max")
        check(all(is_num(v) for v in r["loads"].values()), "loads")

    # sweep: stddev against vnodes follows the 1/sqrt(vnodes) theory within 3x at each point
    # (the ratio of a sample stddev over 8 nodes to its expectation rarely leaves [1/3, 3]).
    doc, _ = run_json("sweep", "--nodes", "8", "--vnodes", "1,10,100,1000")
    check_fields(doc, {"algo": s, "hash": s, "nodes": n, "results": list}, "sweep")
    for r in doc["results"]:
        check_fields(r, {"vnodes": n, "points": n, "bytes": n, "min_load": num, "max_load": num,
                         "stddev_load": num, "theory_stddev": num}, "sweep result")
        check(r["points"] == 8 * r["vnodes"] and r["bytes"] > 8 * r["points"], "sweep points")
        if r["vnodes"] >= 10:
            check(1 / 3 < r["stddev_load"] / r["theory_stddev"] < 3, "sweep vs theory: %r" % r)
        # 8 nodes of v points: sqrt((P - k) / (k (P + 1))) = sqrt(7 / (8 v + 1)).
        near(r["theory_stddev"], math.sqrt(7 / (8 * r["vnodes"] + 1)), 1e-4, "sweep theory")
    sd = [r["stddev_load"] for r in doc["results"]]
    check(sd[0] > sd[-1] * 5, "balance must improve with vnodes: %r" % sd)

    # hashcheck
    doc, _ = run_json("hashcheck", "--keys", "20000")
    check_fields(doc, {"nodes": n, "vnodes": n, "keys": n, "alpha": num, "results": list},
                 "hashcheck")
    pnum = lambda x: is_num(x) and 0 <= x <= 1
    for r in doc["results"]:
        check_fields(r, {"hash": s, "verdict": lambda x: x in ("pass", "fail"), "failed": list,
                         "spread": dict, "balance": dict, "keys": dict}, "hashcheck result")
        check_fields(r["spread"], {"p": pnum, "nodes_tested": n, "worst_node": s,
                                   "worst_node_p": pnum, "max_gap": num, "expected_gap": num},
                     "hashcheck spread")
        check_fields(r["balance"], {"p": pnum, "min_load": num, "max_load": num,
                                    "stddev_load": num, "theory_stddev": num}, "hashcheck balance")
        check_fields(r["keys"], {"p": pnum, "chi2": num, "buckets": n}, "hashcheck keys")
        check((r["verdict"] == "pass") == (r["failed"] == []), "verdict vs failed")

    # bench
    doc, _ = run_json("bench", "--algo", "ring,jump", "--hash", "fnv1a32_fmix,xxh3", "--keys",
                      "2000")
    check_fields(doc, {"keys": n, "results": lambda x: len(x) == 4}, "bench")
    for r in doc["results"]:
        check_fields(r, {"algo": s, "hash": s, "nodes": n, "points": n, "ns_per_lookup": num,
                         "hash_ns": num, "ratio": num}, "bench result")
        check(r["ns_per_lookup"] > 0 and r["hash_ns"] > 0, "bench times")
        near(r["ratio"], r["ns_per_lookup"] / r["hash_ns"], 1e-4 * r["ratio"], "bench ratio")
        check(r["nodes"] == 8 and r["points"] == (1280 if r["algo"] == "ring" else 8), "points")

    # plan, exact and sampled, with odd ids.
    for algo, method in (("ring", "exact"), ("rendezvous", "sampled")):
        doc, _ = run_json("plan", ids, ids + ",new", "--algo", algo, "--keys", "20000")
        side = {"source": s, "nodes": n, "hash": s, "vnodes": n}
        check_fields(doc, {"algo": s, "new_algo": lambda x: x == algo, "old": dict,
                           "new": dict, "method": lambda x: x == method,
                           "sample_keys": (nul if method == "exact" else n),
                           "moved_fraction": num, "theory": num, "flows": list,
                           "consistent": lambda x: x is True,
                           "warnings": lambda x: x == []}, "plan")
        check_fields(doc["old"], side, "plan old")
        for f in doc["flows"]:
            check_fields(f, {"from": lambda x: x in ODD, "to": lambda x: x == "new",
                             "fraction": num}, "plan flow")
        near(sum(f["fraction"] for f in doc["flows"]), doc["moved_fraction"], 1e-5, "flows sum")


# ---- usage and runtime errors -----------------------------------------------------------------

USAGE = [  # exit 2, one line naming the problem, nothing on stdout
    ([], "missing command"),
    (["frob"], "unknown command"),
    (["simulate", "--bogus"], "unknown option '--bogus'"),
    (["simulate", "--keys"], "needs a value"),
    (["simulate", "--keys", "0"], "--keys"),
    (["simulate", "--keys", "12x"], "--keys"),
    (["simulate", "--algo", "ring,foo"], "unknown name 'foo'"),
    (["simulate", "--hash", "sha1"], "unknown name 'sha1'"),
    (["hashcheck", "--key-file", "-"], "takes a regular file"),
    (["simulate", "--replicas", "2"], "does not apply"),
    (["simulate", "--nodes", "a,a"], "appears twice"),
    (["simulate", "--nodes", "a:-1"], "weight"),
    (["simulate", "--nodes", "a,,b"], "empty node id"),
    (["simulate", "--remove", "node-99"], "no such node"),
    (["simulate", "--add", "node-1"], "already"),
    (["simulate", "--to", "3", "--add", "x"], "either --to"),
    (["simulate", "--keys", "5", "--key-file", "f"], "either --keys"),
    (["simulate", "--nodes", "3", "--config", "f"], "either --nodes"),
    (["simulate", "--table-size", "65536"], "prime"),
    (["lookup"], "no keys"),
    (["lookup", "--algo", "ring,jump", "k"], "one algorithm"),
    (["lookup", "--algo", "jump", "--replicas", "2", "k"], "jump"),
    (["lookup", "--pool", "x", "k"], "--pool needs --config"),
    (["sweep", "--vnodes", "10,x"], "--vnodes"),
    (["sweep", "extra"], "unexpected argument"),
    (["plan", "3"], "OLD and NEW"),
    (["plan", "3", "4", "--nodes", "5"], "arguments"),
    (["plan", "3", "4", "--new-hash", "nope"], "unknown name"),
    (["plan", "3", "4", "--pool-keys", "100"], "go together"),
    (["hashcheck", "--seed", "-1"], "--seed"),
    (["bench", "--json", "--out", "x"], "does not apply"),
]

RUNTIME = [  # exit 1 with a message
    (["simulate", "--key-file", "/nonexistent/keys"], "cannot open /nonexistent/keys"),
    (["lookup", "--config", "/nonexistent.yml", "k"], "/nonexistent.yml"),
    (["simulate", "--nodes", "a:2,b", "--algo", "modulo"], "no weights"),
    (["simulate", "--table-size", "5", "--algo", "maglev"],
     "maglev: table_size 5 must be a prime greater than the node count, 8 (e.g. 11): set "
     "--table-size"),
    (["lookup", "--nodes", "100000", "--algo", "maglev", "k"],
     "table_size 65537 must be a prime greater than the node count, 100000 (e.g. 100003)"),
    (["lookup", "--nodes", "3", "--algo", "ketama", "--vnodes", "2", "k"],
     "cannot build the ketama table for --nodes 3: ketama: vnodes 2 gives no node a point: "
     "raise vnodes"),
    (["report", "--out", "/nonexistent/dir/report.html"], "cannot write"),
]


def test_errors():
    for args, msg in USAGE:
        out, err = run(*args, rc=2)
        check(out == "", "%r: wrote to stdout: %r" % (args, out))
        check(err.count("\n") == 1 and msg in err, "%r: wanted one line with %r, got %r"
              % (args, msg, err))
    for args, msg in RUNTIME:
        out, err = run(*args, rc=1)
        check(msg in err and err.endswith("\n"), "%r: wanted %r, got %r" % (args, msg, err))
    # A weight in the port range is probably a port: a warning, not an error.
    out, err = run("lookup", "--nodes", "10.0.0.1:11211,10.0.0.2:11211", "k")
    check(out.startswith("k\t10.0.0.") and "write 10.0.0.1:11211:1" in err, err)
    with tempfile.NamedTemporaryFile("w", suffix=".yml") as f:
        f.write("pool:\n  servers:\n   - 127.0.0.1:6379:1\n  bogus_key: 1\n")
        f.flush()
        _, err = run("lookup", "--config", f.name, "k", rc=1)
        check(re.search(re.escape(f.name) + r":\d+:\d+: ", err), "config error position: " + err)


# ---- plan -------------------------------------------------------------------------------------

def test_plan():
    # plan and simulate agree on the moved fraction. The ring plan is exact, simulate samples
    # 1M keys: they agree within 5 sampling sd. Rendezvous plans by sampling the same generated
    # keys as simulate: the same fraction, to the printed precision.
    for change in (["--add", "node-9"], ["--remove", "node-3"]):
        sim, _ = run_json("simulate", "--nodes", "8", *change, "--keys", str(MILLION),
                          "--algo", "ring,rendezvous,maglev")
        new = "9" if change[0] == "--add" else ",".join("node-%d" % i for i in range(1, 9) if i != 3)
        r = by_algo(sim)
        for algo in ("ring", "rendezvous", "maglev"):
            plan, _ = run_json("plan", "8", new, "--algo", algo, "--keys", str(MILLION))
            p = plan["moved_fraction"]
            exact = plan["method"] == "exact"
            check(exact == (algo != "rendezvous"), "%s plan method %s" % (algo, plan["method"]))
            check((plan["sample_keys"] is None) == exact, "sample size must be stated")
            tol = 5 * sampling_sd(p, MILLION) if exact else 1e-5
            near(r[algo]["moved_fraction"], p, tol, "plan vs simulate, %s %s" % (algo, change))
            near(plan["theory"], r[algo]["theory"], 1e-6, "plan theory")
    # On +1 node every flow goes to the new node (ring, rendezvous: only the new node gains).
    plan, _ = run_json("plan", "8", "9")
    check(all(f["to"] == "node-9" for f in plan["flows"]) and len(plan["flows"]) == 8, "flows")
    out, _ = run("plan", "8", "9")
    check("exact" in out and "node-9" in out and re.search(r"moves \d+\.\d\d% ", out), out)
    out, _ = run("plan", "8", "9", "--algo", "jump", "--keys", "50000")
    check("sample of 50000 keys" in out, "sampled plan must state its sample size:\n" + out)

    # --pool-keys/--read-rate: the moved keys and the warm_up windows, W = -ln(1 - p) K / R
    # (a key's first read under uniform reads comes after an exponential time of mean K / R).
    plan, _ = run_json("plan", "8", "12", "--pool-keys", "200000", "--read-rate", "10000")
    wu = plan["warm_up"]
    # (json_num prints 6 significant digits: compared to 1e-5 of the value)
    near(wu["moved_keys"], plan["moved_fraction"] * 200000, 1e-5 * wu["moved_keys"],
         "warm_up moved keys")
    check([w["read_share"] for w in wu["windows"]] == [0.9, 0.99, 0.999], "window shares")
    for w in wu["windows"]:
        want = -math.log(1 - w["read_share"]) * 200000 / 10000 * 1000
        near(w["warm_up_ms"], want, 1e-5 * want, "warm_up window for %s" % w["read_share"])
    out, _ = run("plan", "8", "12", "--pool-keys", "200000", "--read-rate", "10000")
    check("99.0% within 92 s (warm_up: 92103)" in out, "plan's warm_up lines:\n" + out)

    # --key-file: the keys that move, "key<TAB>from -> to", exactly those whose owner differs
    # between two lookups.
    keys = ["user:%d" % i for i in range(3000)]
    with tempfile.NamedTemporaryFile("w", suffix=".keys") as f:
        f.write("\n".join(keys) + "\n")
        f.flush()
        out, err = run("plan", "8", "9", "--key-file", f.name)
        a, _ = run("lookup", "--nodes", "8", "-", stdin="\n".join(keys) + "\n")
        b, _ = run("lookup", "--nodes", "9", "-", stdin="\n".join(keys) + "\n")
        want = ["%s\t%s -> %s" % (x.split("\t")[0], x.split("\t")[1], y.split("\t")[1])
                for x, y in zip(a.splitlines(), b.splitlines()) if x != y]
        check(out.splitlines() == want, "plan --key-file lists other keys than lookup")
        check("%d of 3000 keys" % len(want) in err, "plan --key-file count: %r" % err)
        doc, _ = run_json("plan", "8", "9", "--key-file", f.name)
        kf = doc["key_file"]
        check(kf["keys"] == 3000 and kf["moved"] == len(want) and len(kf["moves"]) == len(want),
              "plan --key-file JSON")
        check(["%s\t%s -> %s" % (m["key"], m["from"], m["to"]) for m in kf["moves"]] == want,
              "plan --key-file JSON moves")

    # --from/--to: one fleet moved from one scheme to another. The same scheme on both sides
    # moves nothing; dalli@3 -> ring is sampled and moves about 1 - 1/N; with --key-file the
    # keys listed are exactly those whose owner differs between lookups under each scheme.
    fleet3 = "10.0.0.1:11211:1,10.0.0.2:11211:1,10.0.0.3:11211:1"
    doc, _ = run_json("plan", "--from", "dalli@3", "--to", "dalli@3", fleet3, "--keys", "20000")
    check(doc["moved_fraction"] == 0 and doc["new_algo"] == "dalli@3", "dalli -> dalli moves")
    doc, err = run_json("plan", "--from", "dalli@3", "--to", "ring", fleet3, "--keys", "100000")
    check(doc["method"] == "sampled" and doc["algo"] == "dalli@3" and doc["new_algo"] == "ring"
          and 0.55 < doc["moved_fraction"] < 0.78 and "placement changes" in err,
          "dalli -> ring: %r" % {k: doc[k] for k in ("method", "moved_fraction")})
    check(doc["old"]["hash"] == "crc32a", "dalli's own hash: %r" % doc["old"])
    with tempfile.NamedTemporaryFile("w", suffix=".keys") as f:
        f.write("\n".join(keys) + "\n")
        f.flush()
        out, err = run("plan", "--from", "dalli@3", "--to", "uhashring@2", fleet3,
                       "--key-file", f.name)
        a, _ = run("lookup", "--algo", "dalli@3", "--nodes", fleet3, "-",
                   stdin="\n".join(keys) + "\n")
        b, _ = run("lookup", "--algo", "uhashring@2", "--nodes", fleet3, "-",
                   stdin="\n".join(keys) + "\n")
        want = ["%s\t%s -> %s" % (x.split("\t")[0], x.split("\t")[1], y.split("\t")[1])
                for x, y in zip(a.splitlines(), b.splitlines()) if x != y]
        check(len(want) > 1000 and out.splitlines() == want,
              "plan --from/--to --key-file lists other keys than lookup")
    run("plan", "--algo", "ring", "--from", "dalli@3", fleet3, rc=2)

    # Loud warnings, on stderr and in the JSON: a new hash, a new vnode count, ids respelt.
    doc, err = run_json("plan", "8", "9", "--new-hash", "xxh3", "--keys", "10000")
    check("WARNING" in err and "hash changes" in err and doc["method"] == "sampled", err)
    check(any("hash changes" in w for w in doc["warnings"]) and doc["moved_fraction"] > 0.8,
          "hash change: %r" % doc["warnings"])
    doc, err = run_json("plan", "8", "8", "--new-vnodes", "100")
    check(any("vnode count" in w for w in doc["warnings"]) and "WARNING" in err, err)
    doc, err = run_json("plan", "cache-01,cache-02,cache-03", "Cache-01,cache-2,cache-03")
    check(len(doc["warnings"]) == 2 and err.count("WARNING") == 2, "spelling: %r" % err)
    check("'cache-01'" in err and "'Cache-01'" in err and "'cache-2'" in err, err)
    doc, err = run_json("plan", "cache-01,cache-02", "cache-01,cache-02,cache-03")
    check(doc["warnings"] == [] and err == "", "no warning for a plain change: %r" % err)
    old, new = os.path.join(FIXTURES, "plan_old.yml"), os.path.join(FIXTURES, "plan_new.yml")
    doc, err = run_json("plan", old, new)
    w = "\n".join(doc["warnings"])
    check("10.0.0.2:6379 is 'cache-02' in OLD and 'redis-02' in NEW" in w, w)
    check("'cache-03' in OLD is spelt 'cache-3'" in w and "hash changes (fnv1a_64 -> murmur)" in w,
          w)
    check(doc["old"]["nodes"] == 4 and doc["new"]["nodes"] == 5, "plan from files")
    again, _ = run_json("plan", "--pool", "cache", old, new)
    check(again["flows"] == doc["flows"], "plan --pool")
    near(doc["theory"], 1 - 2 * 0.2, 1e-9, "theory with two renamed nodes")


# ---- hashcheck --------------------------------------------------------------------------------

def test_hashcheck():
    doc, _ = run_json("hashcheck")
    r = {x["hash"]: x for x in doc["results"]}
    check(doc["alpha"] == 0.001 and set(r) == HASHES, "hashes %s" % sorted(r))
    check(r["fnv1a32"]["verdict"] == "fail" and "spread" in r["fnv1a32"]["failed"],
          "raw FNV-1a must be flagged: %r" % r["fnv1a32"])
    # Its points cluster: the largest empty arc of a node is several times what random points
    # leave.
    check(r["fnv1a32"]["spread"]["max_gap"] > 4 * r["fnv1a32"]["spread"]["expected_gap"], "gap")
    for h in ("fnv1a32_fmix", "murmur3_32", "xxh3", "md5"):
        check(r[h]["verdict"] == "pass", "%s must pass: %r" % (h, r[h]))
    for nodes in ("3", "20", "cache-01,cache-02,cache-03:2,cache-04"):
        doc, _ = run_json("hashcheck", "--nodes", nodes, "--hash", "fnv1a32,fnv1a32_fmix")
        r = {x["hash"]: x for x in doc["results"]}
        check(r["fnv1a32"]["verdict"] == "fail", "fnv1a32 passes for --nodes %s" % nodes)
        check(r["fnv1a32_fmix"]["verdict"] == "pass", "default fails for --nodes %s" % nodes)
    out, _ = run("hashcheck", "--hash", "fnv1a32,fnv1a32_fmix")
    check(re.search(r"^fnv1a32 .*FAIL: spread", out, re.M), out)
    check(re.search(r"^fnv1a32_fmix .* pass$", out, re.M), out)

    # With a pool: keys placed by its distribution (ketama). crc32 keeps 15 bits, so every key
    # hashes below 2^15 and lands on the one server owning the start of the circle (unless a
    # point falls there: 1 chance in 2^17 per point); murmur must pass.
    pools = os.path.join(FIXTURES, "pools.yml")
    doc, _ = run_json("hashcheck", "--config", pools, "--pool", "named", "--hash", "crc32,murmur",
                      "--keys", "20000")
    r = {x["hash"]: x for x in doc["results"]}
    check(r["crc32"]["pool"]["distribution"] == "ketama" and "pool" in r["crc32"]["failed"],
          "crc32 ketama: %r" % r["crc32"])
    # 3 servers of weights 1, 1, 2: all keys on one of them is 4x (weight 1) or 2x (weight 2).
    check(r["crc32"]["pool"]["max_load"] in (2.0, 4.0), "crc32 max load %r" % r["crc32"]["pool"])
    check(r["murmur"]["verdict"] == "pass" and r["murmur"]["pool"]["p"] > 0.001, "murmur pool")
    check(r["murmur"]["pool"]["table_max_load"] >= 1.0, "table max load")


# ---- the registries' names in messages (issue 28) ---------------------------------------------

def listed(kind):
    """The names `chash algorithms|hashes --json` lists: the registry's own listing command."""
    doc, _ = run_json(kind)
    return [e["name"] for e in doc[kind]]


def test_registry():
    algos, hashes = listed("algorithms"), listed("hashes")
    # The listing command is itself checked against the header's X-macro lists.
    check(set(algos) == ALGOS and len(algos) == len(ALGOS), "chash algorithms: %r" % algos)
    check(set(hashes) == HASHES and len(hashes) == len(HASHES), "chash hashes: %r" % hashes)
    plain, _ = run("algorithms")
    check([l.split("\t")[0] for l in plain.splitlines()] == algos, "chash algorithms: plain")
    # Every command that takes --algo / --hash names every registered name when given an unknown
    # one: nothing cut, however long the list (25 algorithms today).
    cases = [(("simulate", "--keys", "10", "--algo"), algos),
             (("lookup", "--algo"), algos),
             (("bench", "--keys", "10", "--algo"), algos),
             (("plan", "a,b", "a,b,c", "--algo"), algos),
             (("simulate", "--keys", "10", "--hash"), hashes),
             (("hashcheck", "--keys", "10", "--hash"), hashes)]
    for args, names in cases:
        argv = list(args) + ["no-such-name"] + (["k"] if args[0] == "lookup" else [])
        _, err = run(*argv, rc=2)
        words = set(re.split(r"[\s,;()]+", err))
        missing = [n for n in names if n not in words]
        check(not missing, "%s: the message lacks %d of %d names (%s): %r"
              % (" ".join(args), len(missing), len(names), ", ".join(missing), err))
        check(err.count("\n") == 1, "%s: one line, got %r" % (" ".join(args), err))
    # A name without its version (or in another case) suggests the registry's spelling.
    for bad in ("nginx", "HAPROXY", "dalli"):
        _, err = run("lookup", "--algo", bad, "k", rc=2)
        want = [a for a in algos
                if a.lower() == bad.lower() or a.lower().startswith(bad.lower() + "@")]
        check(want and all(("did you mean" in err and w in err.split("known:")[0]) for w in want),
              "--algo %s: no suggestion of %r: %r" % (bad, want, err))
    # A config's unknown distribution lists them too (libchash's config loader): those that fit
    # its error message (ch_config_error.message), in registry order, then "... and N more
    # (`chash algorithms` lists them all)" for the N that do not: none is left out silently.
    with tempfile.NamedTemporaryFile("w", suffix=".yml") as f:
        f.write("pool:\n  distribution: nope\n  servers:\n   - 127.0.0.1:6379:1\n")
        f.flush()
        _, err = run("lookup", "--config", f.name, "k", rc=1)
        words = set(re.split(r"[\s,;()]+", err))
        shown = [n for n in algos if n in words]
        m = re.search(r"\.\.\. and (\d+) more \(`chash algorithms` lists them all\)", err)
        more = int(m.group(1)) if m else 0
        check(shown == algos[:len(shown)] and len(shown) + more == len(algos),
              "config: unknown distribution: %d names shown, %d more said, of %d: %r"
              % (len(shown), more, len(algos), err))


def header_max_points():
    """CH_MAX_POINTS from include/chash.h, evaluated (e.g. (64u * 1024u * 1024u))."""
    header = os.path.join(os.path.dirname(FIXTURES), "..", "..", "include", "chash.h")
    m = re.search(r"#define CH_MAX_POINTS \(([0-9u *]+)\)", open(header).read())
    return eval(m.group(1).replace("u", ""))


def test_weight_limits():
    # HAProxy's server weights go to 256 (its documentation's "weight" keyword): haproxy@2
    # refuses more, the other weighted schemes take 300 and more (twemproxy's and nginx's
    # weights are any positive integer). A comparison goes on without the one that refuses.
    doc, err = run_json("simulate", "--nodes", "a:300,b:1", "--keys", "2000")
    meta = {e["name"]: e for e in run_json("algorithms")[0]["algorithms"]}
    weighted = {n for n, e in meta.items() if e["weighted"] and not e["keyed"]}
    takes = {n for n in weighted if meta[n]["max_weight"] is None or meta[n]["max_weight"] >= 300}
    check(set(r["algo"] for r in doc["results"]) == takes and "haproxy@2" not in takes,
          "a:300: results for %r, wanted %r" % (sorted(r["algo"] for r in doc["results"]),
                                                sorted(takes)))
    check("haproxy@2" in doc["skipped"], "a:300: haproxy@2 not skipped: %r" % doc["skipped"])
    note = [l for l in err.splitlines() if "haproxy@2" in l]
    check(note and "300" in note[0] and "256" in note[0] and "'a'" in note[0],
          "a:300: the note must name the node, its weight and the limit: %r" % note)
    check(meta["haproxy@2"]["max_weight"] == 256, "haproxy@2's limit: %r" % meta["haproxy@2"])
    # 256 itself is HAProxy's and taken; by name, 300 is an error naming value, limit, reason.
    run("simulate", "--nodes", "a:256,b:1", "--algo", "haproxy@2", "--keys", "1000")
    _, err = run("lookup", "--nodes", "a:300,b:1", "--algo", "haproxy@2", "k", rc=1)
    check("'a'" in err and "300" in err and "256" in err and "largest" in err,
          "haproxy@2 a:300: %r" % err)
    # A table's size bound: a ring of weights 10^6 x 160 points is over CH_MAX_POINTS; the
    # message says so, with the bound and what to change.
    limit = header_max_points()
    _, err = run("lookup", "--nodes", "a:1000000,b:1", "k", rc=1)
    check(str(limit) in err and "--vnodes" in err and "1000001" in err,
          "a ring too big: wanted %d, the weights' sum and --vnodes: %r" % (limit, err))
    # Weights far above HAProxy's are built where the table's size allows them.
    for algo in ("ring", "ketama", "nginx@1", "maglev", "rendezvous"):
        run("lookup", "--nodes", "10.0.0.1:11211:10000,10.0.0.2:11211:1", "--algo", algo, "k")


def test_client_limits():
    # The client libraries' own limits (issue 38), named when a table is refused: whole weights
    # where the library's are whole, no weights where it has none; and a plan for a scheme that
    # is not consistent says what the change costs.
    meta = {e["name"]: e for e in run_json("algorithms")[0]["algorithms"]}
    for algo, lib in (("predis@1", "Predis"), ("cache_memcached@1", "Cache::Memcached"),
                      ("python_memcached@1", "python-memcached"), ("gomemcache@0", "gomemcache"),
                      ("envoy_ring_hash@1", "Envoy")):
        check(meta[algo]["whole_weights"] and lib in (meta[algo]["limits"] or ""),
              "%s: whole weights and its limit: %r" % (algo, meta[algo]))
        _, err = run("lookup", "--nodes", "10.0.0.1:6379:2.5,10.0.0.2:6379:1", "--algo", algo, "k",
                     rc=1)
        check("2.5" in err and lib in err and "whole" in err, "%s, weight 2.5: %r" % (algo, err))
        run("lookup", "--nodes", "10.0.0.1:6379:2,10.0.0.2:6379:1", "--algo", algo, "k")
    _, err = run("lookup", "--nodes", "10.0.0.1:6379:2,10.0.0.2:6379:1", "--algo",
                 "phpredis_array@5", "k", rc=1)
    check("no weights" in err and "RedisArray" in err, "phpredis_array@5 weights: %r" % err)
    modular = {n for n, e in meta.items() if not e["consistent"]}
    check({"modulo", "modula", "random", "phpredis_array_range@5", "cache_memcached@1",
           "python_memcached@1", "gomemcache@0", "memjs@1"} == modular,
          "not consistent: %r" % sorted(modular))
    three = "10.0.0.1:11211:1,10.0.0.2:11211:1,10.0.0.3:11211:1"
    out, err = run("plan", "--algo", "python_memcached@1", three, three + ",10.0.0.4:11211:1",
                   "--pool-keys", "1000000", "--read-rate", "1000")
    m = re.search(r"python_memcached@1 is not consistent: (\d+\.\d\d)% of the keys move, "
                  r"(\d+) of the pool's 1000000", out)
    check(m and abs(float(m.group(1)) - 75.0) < 0.5 and "not consistent" in err,
          "plan of a modulo scheme: %r %r" % (out, err))
    doc, _ = run_json("plan", "--algo", "memjs@1", three, three + ",10.0.0.4:11211:1")
    check(doc["consistent"] is False and any("not consistent" in w for w in doc["warnings"]),
          "plan --json of memjs@1: %r" % doc)
    out, err = run("plan", "--algo", "predis@1", three, three + ",10.0.0.4:11211:1")
    check("not consistent" not in out + err, "predis@1 is consistent: %r" % out)


def unescape(b):
    """The plain output's escaping undone: \\\\, \\t, \\n, \\r, \\xHH."""
    out, i = bytearray(), 0
    while i < len(b):
        if b[i:i + 1] != b"\\":
            out += b[i:i + 1]
            i += 1
            continue
        c = b[i + 1:i + 2]
        if c == b"x":
            out.append(int(b[i + 2:i + 4], 16))
            i += 4
        else:
            out += {b"\\": b"\\", b"t": b"\t", b"n": b"\n", b"r": b"\r"}[c]
            i += 2
    return bytes(out)


def run_bytes(*args, stdin=None):
    p = subprocess.run([CHASH, *args], input=stdin, capture_output=True)
    if p.returncode != 0:
        raise Fail("chash %r: exit %d: %r" % (args, p.returncode, p.stderr[:500]))
    return p.stdout


def test_lookup_json():
    # Tabs, newlines, quotes, backslashes, control bytes, valid UTF-8, and invalid UTF-8: bytes
    # that start nothing, a cut sequence, a surrogate, a cut 4-byte sequence, an overlong form.
    keys = [b"tab\there", b"new\nline", b"cr\rhere", b'quote"d', b"back\\slash", b"\\t",
            b"\xff\xfe-not-utf8", b"half-\xe2\x82", b"\xed\xa0\x80", b"\xf0\x9f\x98", b"\xc0\xaf",
            b"ctl\x01\x1f\x7f", "utf8-\u00e9\u20ac".encode(), b"", b"plain:42"]
    pools = os.path.join(FIXTURES, "pools.yml")
    for fleet in (["--nodes", "7"], ["--config", pools, "--pool", "named", "--replicas", "2"]):
        plain = run_bytes("lookup", *fleet, *keys)
        lines = plain.split(b"\n")
        check(lines[-1] == b"" and len(lines) == len(keys) + 1,
              "plain: %d lines for %d keys: %r" % (len(lines) - 1, len(keys), plain))
        rows = [l.split(b"\t") for l in lines[:-1]]
        check([unescape(r[0]) for r in rows] == keys, "plain: keys do not unescape: %r" % rows)
        out = run_bytes("lookup", *fleet, "--json", *keys)
        text = out.decode("utf-8")  # strict: the JSON is valid UTF-8 whatever the keys
        docs = [json.loads(l) for l in text.split("\n")[:-1]]  # strict: no raw control chars
        check(len(docs) == len(keys), "--json: %d objects for %d keys" % (len(docs), len(keys)))
        for k, d, r in zip(keys, docs, rows):
            try:
                k.decode("utf-8")
                utf8 = True
            except UnicodeDecodeError:
                utf8 = False
            if utf8:
                check(d["key"].encode("utf-8") == k and "key_hex" not in d,
                      "--json %r: %r" % (k, d))
            else:
                check(bytes.fromhex(d["key_hex"]) == k and
                      d["key"] == k.decode("utf-8", "replace"), "--json %r: %r" % (k, d))
            # Each owner (and the walk, names included) is the plain lookup's of the same key.
            want = [x.decode() for x in r[1:]]
            got = []
            for n in d["nodes"]:
                got += [n["node"]] + ([n["name"]] if n["name"] is not None else [])
            check(d["owner"] == want[0] and got == want, "--json %r: %r, plain %r" % (k, d, want))
        # Streaming from stdin gives the same objects (a key there cannot hold a newline).
        line_keys = [k for k in keys if b"\n" not in k]
        a = run_bytes("lookup", *fleet, "--json", *line_keys)
        b = run_bytes("lookup", *fleet, "--json", "-",
                      stdin=b"".join(k + b"\n" for k in line_keys))
        check(a == b, "--json: stdin and arguments differ")
    v = run_bytes("lookup", "--nodes", "a,b,c", "--json", "--show-version", "k").decode()
    check(re.fullmatch(r"m-[0-9a-f]{12}", json.loads(v)["version"] or ""), "--show-version: %r" % v)


GROUPS = {
    "help": test_help,
    "lookup": test_lookup,
    "simulate": test_simulate,
    "weights": lambda: (test_weights(), test_client_schemes(), test_client_schemes_config()),
    "json": test_json,
    "errors": test_errors,
    "plan": test_plan,
    "hashcheck": test_hashcheck,
    "registry": test_registry,
    "weight_limits": lambda: (test_weight_limits(), test_client_limits()),
    "lookup_json": test_lookup_json,
}


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in GROUPS:
        print("usage: test_cli.py PATH/TO/chash {%s}" % "|".join(GROUPS), file=sys.stderr)
        return 2
    start = time.monotonic()
    try:
        GROUPS[sys.argv[2]]()
    except Fail as e:
        print("FAIL %s: %s" % (sys.argv[2], e), file=sys.stderr)
        return 1
    print("ok %s (%.1f s)" % (sys.argv[2], time.monotonic() - start))
    return 0


if __name__ == "__main__":
    sys.exit(main())

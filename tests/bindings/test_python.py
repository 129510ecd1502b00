#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""binding_python: the Python binding (bindings/python) routes key for key like `chash lookup`.

Run against a plain (unsanitized) build tree, the install_tree fixture's (a sanitized libchash
cannot be loaded into python3): its bindings/python/ is the package, its tools/chash the oracle.
For EVERY scheme of the registry (`chash algorithms --json`), 10,000 keys (ASCII, long, non-ASCII,
binary with \\r, NUL and invalid UTF-8) give the same owner and replica order through
Table.replicas(), Table.lookup() and Table.lookup_many() as one batched `chash lookup --json -` run
per scheme. Then every pool of nutcracker YAML files (`chash lookup --config FILE --pool NAME`), a
membership document (written out as a pool for the oracle), and the errors.

usage: test_python.py --build BUILD_DIR
"""
import argparse
import concurrent.futures
import faulthandler
import json
import os
import random
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
NKEYS = 10000
NODES = 8
REPLICAS = 3

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def make_keys():
    """NKEYS distinct keys, no \\n (the oracle reads one a line): a quarter each ASCII, long,
    non-ASCII text, binary; str for text (hashed as UTF-8) and bytes for the rest."""
    rnd = random.Random(29)
    keys, seen = [], set()
    alphabet = "aé中😀ß\u0301Ω-_:/ "
    while len(keys) < NKEYS:
        kind = len(keys) % 4
        if kind == 0:
            k = "user:%d" % rnd.randrange(10 ** 9)
        elif kind == 1:
            k = "session/" + "".join(rnd.choice("abcdefghij0123456789") for _ in range(rnd.randrange(200, 1200)))
        elif kind == 2:
            k = "".join(rnd.choice(alphabet) for _ in range(rnd.randrange(1, 40)))
        else:
            k = bytes(b for b in rnd.randbytes(rnd.randrange(0, 60)) if b != 0x0A)
            if rnd.random() < 0.2:
                k += b"\r"
        raw = k.encode() if isinstance(k, str) else k
        if raw in seen:
            continue
        seen.add(raw)
        keys.append(k)
    return keys


def raw(k):
    return k.encode() if isinstance(k, str) else k


def oracle(chash_bin, args, keys):
    """One `chash lookup ... --json -` over all keys: per key, its node list (owner first)."""
    stdin = b"".join(raw(k) + b"\n" for k in keys)
    p = subprocess.run([chash_bin, "lookup", *args, "--json", "-"], input=stdin,
                       capture_output=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError("chash lookup %s: %s" % (" ".join(args), p.stderr.decode(errors="replace")))
    out = []
    for line, k in zip(p.stdout.splitlines(), keys):
        o = json.loads(line)
        got = bytes.fromhex(o["key_hex"]) if "key_hex" in o else o["key"].encode()
        if got != raw(k):
            raise RuntimeError("oracle out of step at key %r (it echoed %r)" % (raw(k), got))
        out.append([n["node"] for n in o["nodes"]])
    if len(out) != len(keys):
        raise RuntimeError("chash lookup %s: %d results for %d keys" % (" ".join(args), len(out), len(keys)))
    return out


def fleet_for(info):
    """NODES (id, weight) pairs the scheme takes: host:port ids (every scheme accepts them, the
    address-id ones need them), unequal whole weights where it is weighted."""
    weights = [1, 2, 1, 3, 1, 1, 2, 5] if info["weighted"] else [1] * NODES
    return [("10.0.%d.%d:%d" % (i // 3, i + 1, 11211 + (i % 3)), float(w)) for i, w in enumerate(weights)]


def compare(name, table, keys, expect, r, addresses=False):
    """table's walk, owner and batch owner per key against the oracle's lists."""
    names = table.addresses if addresses else table.nodes
    owners = table.index_many(keys)
    batch = table.lookup_many(keys)
    bad = 0
    for k, exp, oi, bo in zip(keys, expect, owners, batch):
        walk = [names[i] for i in table.replica_indexes(k, r)]
        one = table.address(k) if addresses else table.lookup(k)
        ok = walk == exp and one == exp[0] and names[oi] == exp[0] and (addresses or bo == exp[0])
        if not ok:
            bad += 1
            if bad <= 3:
                print("  %s: key %r: binding %s / %s, chash lookup %s" % (name, raw(k)[:40], walk, one, exp),
                      file=sys.stderr)
    check(bad == 0, "%s: %d of %d keys differ from chash lookup" % (name, bad, len(keys)))
    return len(keys) - bad


def test_schemes(chash, chash_bin, keys):
    reg = json.loads(subprocess.run([chash_bin, "algorithms", "--json"], check=True,
                                    capture_output=True).stdout)["algorithms"]
    names = [a["name"] for a in reg]
    check(list(chash.algorithms()) == names, "chash.algorithms() %s != the CLI's registry %s" % (chash.algorithms(), names))
    jobs = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for a in reg:
            name = a["name"]
            info = chash.algorithm_info(name)
            check(info["weighted"] == a["weighted"] and info["keyed"] == a["keyed"]
                  and info["fixed_hash"] == a["fixed_hash"]
                  and info["whole_weights"] == a["whole_weights"]
                  and info["consistent"] == a["consistent"] and info["limits"] == a["limits"],
                  "%s: algorithm_info %s vs %s" % (name, info, a))
            if name == "random":
                continue  # below: chash lookup draws a random server per key, as nutcracker does
            fleet = fleet_for(a)
            r = REPLICAS if info["walk"] else 1
            spec = ",".join("%s:%g" % nw for nw in fleet)
            jobs[name] = (fleet, r, pool.submit(oracle, chash_bin, ["--nodes", spec, "--algo", name,
                                                                   "--replicas", str(r)], keys))
        total = 0
        for name, (fleet, r, fut) in jobs.items():
            t = chash.Table(fleet, name)
            total += compare(name, t, keys, fut.result(), r)
    print("schemes: %d schemes x %d keys, %d agree with chash lookup" % (len(jobs), len(keys), total))
    check(len(jobs) == len(reg) - 1, "every scheme but random compared")
    # random: libchash's ch_lookup() is h % N of the key's hash (chash.h); the CLI draws instead.
    t = chash.Table([n for n, _ in fleet_for({"weighted": False})], "random")
    check(all(t.index(k) == t.key_hash(k) % len(t) for k in keys[:2000]), "random: owner != key_hash % N")


def test_hash_option(chash, chash_bin, keys):
    """--hash and --vnodes pass through as the CLI takes them."""
    fleet = ["node-%d" % i for i in range(1, 6)]
    for algo, h, v in (("ring", "xxh3", 40), ("maglev", "murmur3_32", None), ("rendezvous", "md5", None)):
        args = ["--nodes", ",".join(fleet), "--algo", algo, "--hash", h, "--replicas", "2"]
        if v:
            args += ["--vnodes", str(v)]
        t = chash.Table(fleet, algo, hash=h, vnodes=v)
        compare("%s/%s" % (algo, h), t, keys[:3000], oracle(chash_bin, args, keys[:3000]), 2)


def config_pools(chash):
    """(file, pool) of nutcracker YAML fixtures whose pools have servers and a deterministic
    distribution."""
    out = []
    for rel in ("tests/config/fixtures/valid_quirks.yml", "tests/config/fixtures/valid_readme.yml",
                "tests/config/fixtures/valid_all_keys.yml", "tests/cli/fixtures/pools.yml"):
        path = os.path.join(SRC, rel)
        with open(path) as f:
            pools = [line.split(":")[0] for line in f if line[:1].isalpha() and line.rstrip().endswith(":")]
        for p in pools:
            t = chash.Table.from_config(path, p)
            if t.algorithm != "random":
                out.append((path, p))
    return out


def test_config(chash, chash_bin, keys):
    pools = config_pools(chash)
    check(len(pools) >= 4, "at least 4 nutcracker pools found (%d)" % len(pools))
    for path, p in pools:
        t = chash.Table.from_config(path, p)
        r = 2 if chash.algorithm_info(t.algorithm)["walk"] else 1
        exp = oracle(chash_bin, ["--config", path, "--pool", p, "--replicas", str(r)], keys)
        compare("%s pool %s (%s)" % (os.path.basename(path), p, t.algorithm), t, keys, exp, r, addresses=True)
    print("config: %d pools routed as chash lookup --config" % len(pools))


def test_membership(chash, chash_bin, keys):
    servers = ["10.1.0.%d:6379:%d redis-%d" % (i, 1 + i % 2, i) for i in range(1, 7)]
    doc = json.dumps({"servers": servers, "distribution": "ketama", "hash": "murmur", "epoch": 7})
    t, epoch = chash.Table.from_membership(doc)
    check(epoch == 7, "membership: epoch %r" % epoch)
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        f.write("fleet:\n  listen: 127.0.0.1:22121\n  hash: murmur\n  distribution: ketama\n  servers:\n")
        f.write("".join("    - %s\n" % s for s in servers))
    try:
        exp = oracle(chash_bin, ["--config", f.name, "--replicas", "2"], keys[:4000])
    finally:
        os.unlink(f.name)
    compare("membership document", t, keys[:4000], exp, 2, addresses=True)


def test_errors(chash):
    def raises(cls, fn, *words):
        try:
            fn()
        except cls as e:
            msg = str(e)
            check(all(w in msg for w in words), "%s: message %r lacks %s" % (cls.__name__, msg, words))
            return e
        check(False, "no %s from %s" % (cls.__name__, fn))
        return None

    e = raises(chash.Error, lambda: chash.Table(["a", "a"]), 'nodes 0 and 1 have the same id "a"')
    check(e is not None and e.code == -5, "duplicate id: code -5")
    raises(chash.Error, lambda: chash.Table([], "ring"), "no nodes")
    raises(chash.Error, lambda: chash.Table(["a"], "no-such"), "unknown algorithm 'no-such'", "dalli@3")
    raises(chash.Error, lambda: chash.Table(["a"], hash="sha7"), "unknown hash 'sha7'")
    raises(chash.Error, lambda: chash.Table([("a", -1.0)]), "weight")
    raises(chash.Error, lambda: chash.Table([("a", 1.0), ("b", 2.0)], "jump"), "jump has no weights")
    # A client library's own limit is named: Predis' weights are whole, RedisArray has none.
    raises(chash.Error, lambda: chash.Table([("a:1", 2.5), ("b:1", 1.0)], "predis@1"), "Predis", "whole")
    raises(chash.Error, lambda: chash.Table([("a:1", 2.0), ("b:1", 1.0)], "phpredis_array@5"), "RedisArray")
    raises(chash.Error, lambda: chash.Table(["a", "b"], "jump").replicas("k", 2), "jump has no failover order")
    raises(TypeError, lambda: chash.Table(["a"]).lookup(42), "str, bytes or bytearray")
    raises(TypeError, lambda: chash.Table("abc"), "single string")
    bad = os.path.join(SRC, "tests/config/fixtures/err_hash.yml")
    e = raises(chash.ConfigError, lambda: chash.Table.from_config(bad), "err_hash.yml:2:9", "sha1")
    check(e is not None and (e.line, e.column) == (2, 9) and isinstance(e, chash.Error), "ConfigError's position")
    raises(chash.ConfigError, lambda: chash.Table.from_config("/nonexistent.yml"), "/nonexistent.yml")
    raises(chash.Error, lambda: chash.Table.from_config(os.path.join(SRC, "tests/config/fixtures/valid_quirks.yml"), "nope"),
           "no pool 'nope'")
    raises(chash.ConfigError, lambda: chash.Table.from_membership("servers: [", name="etcd://x/k"), "etcd://x/k:")
    test_nul_refused(chash, raises)
    test_limits_named(chash, raises)
    test_nesting(chash, raises)


def test_nul_refused(chash, raises):
    """A NUL in a string that goes to C is an error naming the argument, never a shorter string
    (issue 35: 'ring\\0x' was taken as 'ring')."""
    cfg = os.path.join(SRC, "tests/config/fixtures/valid_quirks.yml")
    doc = '{"servers": ["127.0.0.1:6379:1 a"]}'
    for what, fn in (("algorithm", lambda: chash.Table(["a", "b"], "ring\0x")),
                     ("hash", lambda: chash.Table(["a", "b"], hash="md5\0x")),
                     ("a node id", lambda: chash.Table(["a\0b", "c"])),
                     ("hash_tag", lambda: chash.Table(["a", "b"], hash_tag="{\0")),
                     ("algorithm", lambda: chash.Table.from_config(cfg, algorithm="ring\0x")),
                     ("hash", lambda: chash.Table.from_membership(doc, hash="md5\0")),
                     ("pool", lambda: chash.Table.from_config(cfg, "alpha\0beta")),
                     ("name", lambda: chash.Table.from_membership(doc, name="etcd://x\0y")),
                     ("algorithm", lambda: chash.algorithm_info("ring\0x"))):
        e = raises(chash.Error, fn, what, "NUL")
        check(e is None or e.code == -1, "NUL in %s: code %r, want CH_EINVAL (-1)" % (what, getattr(e, "code", None)))


def test_limits_named(chash, raises):
    """Every refusal of a build says which argument and which limit, in libchash's words."""
    e = raises(chash.Error, lambda: chash.Table([str(i) for i in range(100000)], "maglev"),
               "maglev: table_size 65537 must be a prime greater than the node count, 100000 (e.g. 100003)")
    check(e is None or e.code == -1, "maglev: code %r" % getattr(e, "code", None))
    raises(chash.Error, lambda: chash.Table(["a", "b", "c"], "maglev", table_size=4),
           "table_size 4 must be a prime greater than the node count, 3 (e.g. 5)")
    raises(chash.Error, lambda: chash.Table(["a", "b", "c"], "ketama", vnodes=2), "ketama: vnodes 2 gives no node a point")
    raises(chash.Error, lambda: chash.Table([("a", 1), ("b", 2)], "jump"),
           'jump has no weights: every node must weigh the same, but node 1 ("b") weighs 2')
    raises(chash.Error, lambda: chash.Table([("a", 1), ("b", 0)]), 'node 1 ("b"): weight 0 is not finite and > 0')
    raises(chash.Error, lambda: chash.Table(["a", "b", "a"]), 'nodes 0 and 2 have the same id "a"')
    raises(chash.Error, lambda: chash.Table([("a", 500000), ("b", 1)], "ring"),
           "ring: more than 67108864 points (CH_MAX_POINTS)", "vnodes 160")
    raises(chash.Error, lambda: chash.Table([("1", 1), ("2", 300)], "haproxy@2"), "HAProxy's weights are 1 to 256")
    doc = json.dumps({"servers": ["10.0.%d.%d:6379:1" % (i // 250, i % 250 + 1) for i in range(66000)],
                      "distribution": "maglev"})
    raises(chash.Error, lambda: chash.Table.from_membership(doc, name="m"),
           "table_size 65537 must be a prime greater than the node count, 66000 (e.g. 66029)")


def nested_parse(fn, what):
    """fn() under a watchdog: a parse that has not returned after 10 s ends the process with a
    failure (a deadline on the call returning, not a timing assertion; faulthandler's thread
    fires even while the call holds the GIL in C)."""
    faulthandler.dump_traceback_later(10, exit=True)
    try:
        return fn()
    finally:
        faulthandler.cancel_dump_traceback_later()


def test_nesting(chash, raises):
    """1 MiB and 16 MiB of nesting are refused at once, naming the limit (issue 35: 100,000 '['
    took 14 s in from_membership, and 400,000 more than two minutes)."""
    limit = "nesting deeper than 64 levels, the limit (CH_CONFIG_MAX_DEPTH)"
    for size in (1 << 20, 16 << 20):
        for text, pos in (("[" * size, "1:65"), ('{"servers": ' + "[" * (size - 12), "1:76")):
            e = nested_parse(lambda: raises(chash.ConfigError, lambda: chash.Table.from_membership(text, name="p"),
                                            "p:%s: %s" % (pos, limit)), "from_membership")
            check(e is None or (e.line, e.column) == tuple(map(int, pos.split(":"))), "nesting: position")
        with tempfile.NamedTemporaryFile("w", suffix=".yml") as f:
            head = "alpha:\n  servers:\n    "
            f.write(head + "- " * ((size - len(head)) // 2))
            f.flush()
            nested_parse(lambda: raises(chash.ConfigError, lambda: chash.Table.from_config(f.name),
                                        "%s:3:129: %s" % (f.name, limit)), "from_config")


def test_threads(chash, keys):
    """One table read by several threads at once (batches release the GIL) agrees with itself."""
    t = chash.Table(["n%d" % i for i in range(20)], "maglev")
    want = t.lookup_many(keys)
    got = [None] * 4

    def run(i):
        got[i] = t.lookup_many(keys)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    check(all(g == want for g in got), "threads: lookup_many differs between threads")


def test_examples(pkg, chash_bin):
    """bindings/python/examples run, and the fleet example answers what chash lookup --config does."""
    ex = os.path.join(SRC, "bindings", "python", "examples")
    env = dict(os.environ, PYTHONPATH=pkg)
    p = subprocess.run([sys.executable, os.path.join(ex, "md5_64_ring.py")], env=env,
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and "20000 of 20000" in p.stdout, "examples/md5_64_ring.py: %s%s" % (p.stdout, p.stderr))
    conf = os.path.join(SRC, "examples", "chash-proxy.yml")
    keys = ["user:42", "session:{abc}:cart", "k%d" % 7]
    p = subprocess.run([sys.executable, os.path.join(ex, "proxy_fleet.py"), "--config", conf, *keys], env=env,
                       capture_output=True, text=True, timeout=60)
    want = subprocess.run([chash_bin, "lookup", "--config", conf, *keys], capture_output=True, text=True).stdout
    got = [line.split()[2] for line in p.stdout.splitlines()[1:]]
    check(p.returncode == 0 and got == [line.split("\t")[1] for line in want.splitlines()],
          "examples/proxy_fleet.py: %s%s vs %s" % (p.stdout, p.stderr, want))


PIP_CHILD = r"""
import json, sys
import chash
keys = json.loads(sys.stdin.read())
out = {a: chash.Table(["10.0.0.%d:11211" % i for i in range(1, 9)], a).lookup_many(keys)
       for a in ("ring", "ketama", "md5_64_ring", "dalli@3")}
print(json.dumps({"file": chash.__file__, "owners": out}))
"""


def test_pip(chash, build, keys):
    """`pip install bindings/python` with no package index, against libchash-dev and libchash0
    as the packages ship them (unpacked into a tree: pkg-config with PKG_CONFIG_SYSROOT_DIR),
    from a copy of the source (pip builds in place). The installed module routes as this one."""
    import glob
    import shutil

    debs = [glob.glob(os.path.join(build, "packages", p + "_*.deb")) for p in ("libchash0", "libchash-dev")]
    if not all(debs):
        check(False, "pip: no libchash0/libchash-dev .deb in %s/packages" % build)
        return
    with tempfile.TemporaryDirectory() as tmp:
        root, src, target = (os.path.join(tmp, d) for d in ("root", "src", "target"))
        for d in debs:
            subprocess.run(["dpkg-deb", "-x", d[0], root], check=True)
        shutil.copytree(os.path.join(SRC, "bindings", "python"), src,
                        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        libdir = os.path.dirname(glob.glob(os.path.join(root, "usr/lib/*/pkgconfig/chash_config.pc"))[0])
        env = dict(os.environ, PKG_CONFIG_SYSROOT_DIR=root, PKG_CONFIG_PATH=libdir,
                   PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
        p = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--target", target, src],
                           env=env, capture_output=True, text=True, timeout=300)
        check(p.returncode == 0, "pip install: %s" % (p.stdout[-2000:] + p.stderr[-2000:]))
        if p.returncode != 0:
            return
        env = dict(os.environ, PYTHONPATH=target, LD_LIBRARY_PATH=os.path.dirname(libdir))
        sample = [k for k in keys[:2000] if isinstance(k, str)]
        p = subprocess.run([sys.executable, "-c", PIP_CHILD], input=json.dumps(sample), env=env,
                           capture_output=True, text=True, timeout=60)
        check(p.returncode == 0, "pip-installed chash: %s" % p.stderr[-2000:])
        if p.returncode != 0:
            return
        got = json.loads(p.stdout)
        check(got["file"].startswith(target), "pip: imported %s" % got["file"])
        for a, owners in got["owners"].items():
            t = chash.Table(["10.0.0.%d:11211" % i for i in range(1, 9)], a)
            check(owners == t.lookup_many(sample), "pip-installed chash routes %s differently" % a)
        print("pip: installed offline into a target, %d schemes route as the build's" % len(got["owners"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True, help="a plain (unsanitized) build tree")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    pkg = os.path.join(build, "bindings", "python")
    chash_bin = os.path.join(build, "tools", "chash")
    if not os.path.isfile(os.path.join(pkg, "chash", "__init__.py")):
        print("binding_python: %s has no chash package (python3-dev missing when it was configured?)" % pkg,
              file=sys.stderr)
        return 1
    sys.path.insert(0, pkg)
    import chash  # noqa: E402

    check(os.path.dirname(chash.__file__) == os.path.join(pkg, "chash"), "imported %s" % chash.__file__)
    keys = make_keys()
    test_errors(chash)
    test_schemes(chash, chash_bin, keys)
    test_hash_option(chash, chash_bin, keys)
    test_config(chash, chash_bin, keys)
    test_membership(chash, chash_bin, keys)
    test_threads(chash, keys)
    test_pip(chash, build, keys)
    test_examples(pkg, chash_bin)
    if failures:
        print("binding_python: %d failures" % len(failures), file=sys.stderr)
        return 1
    print("binding_python: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

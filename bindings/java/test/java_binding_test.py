#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""java_binding: the Java binding (chash.jar + libchash_jni.so) routes key for key like
`chash lookup`, for every scheme of the registry and for nutcracker YAML pools.

  java_binding_test.py SRC BUILD

BUILD is the install_tree fixture's plain release build (tests/install/build_packages.sh:
`make deb`), whose libchash, bindings/java/chash.jar, libchash_jni.so and tools/chash are used:
a sanitized libchash cannot be loaded into a JVM. The oracle is `chash lookup ... --json -`, one
run per scheme with all 10,000 keys on stdin; the schemes come from `chash algorithms --json`.
Then BindingTest.java checks them all in one JVM. Exit 77 (skip) without a JDK."""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

SKIP = 77


def die(msg):
    print("java_binding: " + msg, file=sys.stderr)
    sys.exit(1)


def make_keys(rng):
    """10,000 keys: ASCII, long, non-ASCII UTF-8 (supplementary planes too), binary (invalid
    UTF-8, any byte but \\n: `chash lookup -` reads one key a line; \\r and \\t stay in a key)."""
    keys = [b"", b"user:42", b"{user:42}:cart", b"a\rb", b"tab\there"]
    keys += [b"user:%d" % i for i in range(4000)]
    while len(keys) < 6000:
        n = rng.choice([100, 250, 251, 1000, rng.randrange(64, 2000)])
        keys.append(bytes(rng.randrange(0x21, 0x7f) for _ in range(n)))
    alphabet = [chr(c) for c in list(range(0xa0, 0x250)) + list(range(0x4e00, 0x4e80))] + \
        ["\U0001f600", "\U00010348", "\u20ac", "\ufffd", "\u00e9"]
    while len(keys) < 8000:
        s = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 24)))
        keys.append(("k:" + s if rng.random() < 0.5 else s).encode())
    while len(keys) < 10000:
        b = bytes(rng.choice([rng.randrange(0x80, 0x100), rng.randrange(0, 0x100)])
                  for _ in range(rng.randrange(1, 40)))
        keys.append(b.replace(b"\n", b"\x0b"))
    return keys


def nodes_for(algo):
    """7 nodes: host:port ids for the schemes that name servers by address, names otherwise;
    unequal whole weights where the scheme has weights."""
    out = []
    for i in range(7):
        if algo["address_ids"] or algo["name"].startswith("spymemcached"):
            nid = "10.0.1.%d:%d" % (i + 1, 11211 + i % 2)
        else:
            nid = "cache-%02d" % (i + 1)
        out.append((nid, (i % 3) + 1 if algo["weighted"] else 1))
    return out


def oracle(chash, args, keys):
    stdin = b"".join(k + b"\n" for k in keys)
    p = subprocess.run([chash, "lookup"] + args + ["--json", "-"], input=stdin,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        return None, p.stderr.decode(errors="replace")
    rows = [json.loads(line) for line in p.stdout.splitlines()]
    if len(rows) != len(keys):
        die("chash lookup %s: %d rows for %d keys" % (args, len(rows), len(keys)))
    for k, row in zip(keys, rows):
        got = bytes.fromhex(row["key_hex"]) if "key_hex" in row else row["key"].encode()
        if got != k:
            die("chash lookup %s: row for %r is for %r" % (args, k, got))
    return rows, None


def main():
    src, build = sys.argv[1], sys.argv[2]
    java, javac = shutil.which("java"), shutil.which("javac")
    if java is None or javac is None:
        print("java_binding: skipped: no JDK (default-jdk-headless; scripts/bootstrap installs it)")
        sys.exit(SKIP)
    chash = os.path.join(build, "tools", "chash")
    jar = os.path.join(build, "bindings", "java", "chash.jar")
    jni = os.path.join(build, "bindings", "java", "libchash_jni.so")
    for f in (chash, jar, jni):
        if not os.path.exists(f):
            die("%s missing: the install_tree build did not build the Java binding" % f)
    rng = random.Random(29)
    keys = make_keys(rng)
    algos = json.loads(subprocess.run([chash, "algorithms", "--json"], check=True,
                                      stdout=subprocess.PIPE).stdout)["algorithms"]
    if len(algos) < 25:
        die("chash algorithms lists %d schemes" % len(algos))
    with tempfile.TemporaryDirectory(prefix="java_binding.") as tmp:
        case = [b"K %s\n" % (k.hex().encode() if k else b"-") for k in keys]
        for a in algos:
            nodes = nodes_for(a)
            spec = ",".join("%s:%d" % n for n in nodes)
            # The chash ring with another hash too, and a ring with few points.
            variants = [(None, 0)]
            if a["name"] == "ring":
                variants += [("md5", 0), ("murmur3_32", 40)]
            if a["name"] in ("ketama", "modula"):
                variants += [("fnv1a_64", 0)]
            for hash_, vnodes in variants:
                args = ["--nodes", spec, "--algo", a["name"]]
                if hash_:
                    args += ["--hash", hash_]
                if vnodes:
                    args += ["--vnodes", str(vnodes)]
                r = 3
                rows, err = oracle(chash, args + ["--replicas", "3"], keys)
                if rows is None:  # no walk (jump, guava@31, pymemcache@3): the owner alone
                    r = 1
                    rows, err = oracle(chash, args, keys)
                    if rows is None:
                        die("chash lookup %s: %s" % (args, err))
                index = {nid: i for i, (nid, _) in enumerate(nodes)}
                case.append(b"S %s %s %d %d %d\n" % (a["name"].encode(),
                            (hash_ or "-").encode(), vnodes, r, len(nodes)))
                case += [b"N %s %d\n" % (nid.encode().hex().encode(), w) for nid, w in nodes]
                for row in rows:
                    want = [index[n["node"]] for n in row["nodes"]]
                    if len(want) != min(r, len(nodes)):
                        die("%s: %d nodes for --replicas %d" % (args, len(want), r))
                    case.append(b"E " + " ".join(map(str, want)).encode() + b"\n")
        # nutcracker pools: the README's (named servers, hash_tag) and one of unnamed, weighted
        # servers (port 11211 named by host alone) under ketama and modula with other hashes.
        yml = os.path.join(tmp, "pools.yml")
        with open(yml, "w") as f:
            f.write("weighted:\n  listen: 127.0.0.1:22122\n  hash: md5\n  distribution: ketama\n"
                    "  servers:\n" + "".join("   - 10.0.2.%d:%d:%d\n" % (i, 11211 + i % 2, i % 3 + 1)
                                             for i in range(1, 10)) +
                    "modula:\n  listen: 127.0.0.1:22123\n  hash: murmur\n  distribution: modula\n"
                    "  hash_tag: \"{}\"\n  servers:\n" +
                    "".join("   - 10.0.3.%d:6379:%d node-%d\n" % (i, i % 2 + 1, i) for i in range(1, 6)))
        pools = [(os.path.join(src, "examples", "nutcracker.yml"), "cache"), (yml, "weighted"),
                 (yml, "modula")]
        for path, pool in pools:
            rows, err = oracle(chash, ["--config", path, "--pool", pool], keys)
            if rows is None:
                die("chash lookup --config %s: %s" % (path, err))
            case.append(b"C %s %s\n" % (path.encode().hex().encode(), pool.encode()))
            case += [b"A %s\n" % row["owner"].encode().hex().encode() for row in rows]
        # A membership document (docs/FLEET.md) against the same pool written as a file.
        doc = json.dumps({"servers": ["10.0.4.%d:6379:1 m-%d" % (i, i) for i in range(1, 7)],
                          "distribution": "ketama", "hash": "fnv1a_64", "version": "v7",
                          "epoch": 3})
        docyml = os.path.join(tmp, "doc.yml")
        with open(docyml, "w") as f:
            f.write("fleet:\n  listen: 127.0.0.1:22124\n  hash: fnv1a_64\n  distribution: ketama\n"
                    "  servers:\n" + "".join("   - 10.0.4.%d:6379:1 m-%d\n" % (i, i) for i in range(1, 7)))
        rows, err = oracle(chash, ["--config", docyml, "--pool", "fleet"], keys)
        if rows is None:
            die("chash lookup --config %s: %s" % (docyml, err))
        case.append(b"M %s\n" % doc.encode().hex().encode())
        case += [b"A %s\n" % row["owner"].encode().hex().encode() for row in rows]
        casefile = os.path.join(tmp, "cases.txt")
        with open(casefile, "wb") as f:
            f.writelines(case)
        classes = os.path.join(tmp, "classes")
        subprocess.run([javac, "-Werror", "-Xlint:all", "-cp", jar, "-d", classes,
                        os.path.join(src, "bindings", "java", "test", "BindingTest.java")], check=True)
        # -Xcheck:jni: the JVM checks every JNI call of the shim; a warning of it fails the test.
        # A fixed heap: the Cleaner check reads the RSS, which a resizing heap would blur.
        p = subprocess.run([java, "-Dchash.jni=" + jni, "-Dchash.src=" + src, "-Xcheck:jni",
                            "-Xms256m", "-Xmx256m",
                            "-XX:+AlwaysPreTouch", "-cp", jar + os.pathsep + classes,
                            "BindingTest", casefile], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out = p.stdout.decode(errors="replace")
        print(out, end="")
        if "WARNING in native method" in out:
            die("-Xcheck:jni warned about the shim")
        if p.returncode != 0:
            sys.exit(p.returncode)
        check_package(src, build, tmp, java, javac)


def check_package(src, build, tmp, java, javac):
    """The package libchash-java of the same build: its files where Debian's Java tools and JVM
    look (/usr/share/java/chash-VERSION.jar and the chash.jar link, the shim in
    /usr/lib/<multiarch>/jni), lintian-clean, and working from an unpacked tree with libchash0
    by the JVM's own library search (System.loadLibrary): seed 003's example, run."""
    pkgs = os.path.join(build, "packages")
    deb = [f for f in os.listdir(pkgs) if f.startswith("libchash-java_") and f.endswith(".deb")]
    lib0 = [f for f in os.listdir(pkgs) if f.startswith("libchash0_") and f.endswith(".deb")]
    if len(deb) != 1 or len(lib0) != 1:
        die("%s: no single libchash-java and libchash0 package (%s)" % (pkgs, sorted(os.listdir(pkgs))))
    deb, lib0 = os.path.join(pkgs, deb[0]), os.path.join(pkgs, lib0[0])
    version = subprocess.run(["dpkg-deb", "-f", deb, "Version"], check=True,
                             stdout=subprocess.PIPE).stdout.decode().strip()
    multiarch = subprocess.run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"], check=True,
                               stdout=subprocess.PIPE).stdout.decode().strip()
    files = subprocess.run(["dpkg-deb", "-c", deb], check=True, stdout=subprocess.PIPE).stdout.decode()
    for want in ("./usr/share/java/chash-%s.jar" % version, "./usr/share/java/chash.jar -> chash-%s.jar" % version,
                 "./usr/lib/%s/jni/libchash_jni.so" % multiarch, "./usr/share/doc/libchash-java/copyright"):
        if want not in files:
            die("%s lacks %s:\n%s" % (deb, want, files))
    if shutil.which("lintian"):
        dbg = deb.replace("libchash-java_", "libchash-java-dbgsym_").replace(".deb", ".ddeb")
        lint = subprocess.run(["lintian", "--tag-display-limit", "0", deb] + ([dbg] if os.path.exists(dbg) else []),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT).stdout.decode()
        bad = [l for l in lint.splitlines() if l.startswith(("E: ", "W: "))]
        if bad:
            die("lintian: " + "; ".join(bad))
        print("ok lintian: libchash-java: no error, no warning")
    tree = os.path.join(tmp, "tree")
    for d in (deb, lib0):
        subprocess.run(["dpkg-deb", "-x", d, tree], check=True)
    libdir = os.path.join(tree, "usr", "lib", multiarch)
    classes = os.path.join(tmp, "examples")
    jar = os.path.join(tree, "usr", "share", "java", "chash.jar")
    subprocess.run([javac, "-Werror", "-Xlint:all", "-cp", jar, "-d", classes,
                    os.path.join(src, "bindings", "java", "examples", "JavaHashcodeRing.java"),
                    os.path.join(src, "bindings", "java", "examples", "FleetRoute.java")], check=True)
    env = dict(os.environ, LD_LIBRARY_PATH=libdir)
    for cmd in (["JavaHashcodeRing"], ["FleetRoute", os.path.join(src, "examples", "nutcracker.yml")]):
        p = subprocess.run([java, "-Djava.library.path=" + os.path.join(libdir, "jni"), "-cp",
                            jar + os.pathsep + classes] + cmd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        if p.returncode != 0:
            die("the packaged example %s failed:\n%s" % (cmd[0], p.stdout.decode(errors="replace")))
    print("ok the packaged jar and shim (unpacked with libchash0) run the examples")


if __name__ == "__main__":
    main()

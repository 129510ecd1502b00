#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""clients_compat.py -- a client library's placement against libchash's scheme for it, key for
key (docs/COMPATIBILITY.md, "Client libraries").

    clients_compat.py SCHEME PLACE

SCHEME is a libchash algorithm name (java_hashcode_ring, md5_64_ring, dalli@3, ...); PLACE is
the clients_place binary (libchash's side). For every server set of the scheme (named and
unnamed servers, unequal weights where the library has weights, a server added and one removed
in the middle of the list, the issue's own cases), the same case (nodes in list order, >= 5,000
keys: ASCII, UTF-8, binary and empty where the library takes them, plus keys the scheme's rules
make interesting) is given to the real library's oracle program (tests/compat/oracles/) and to
PLACE; every key's owner must be the same. On a mismatch it prints the set, the first keys that
differ (hex) and both owners, and exits 1.

An oracle that cannot run (its language or library missing) makes the test skip with exit 77,
or fail with exit 1 when the environment variable CI is set; scripts/bootstrap installs them all.
"""
import hashlib
import os
import random
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ORACLES = os.path.join(HERE, "oracles")
KEYS_PER_SET = 5000


# ---- keys -----------------------------------------------------------------------------------

def ascii_keys(rng, n):
    keys = [b"user:%d" % i for i in range(n // 2)]
    printable = bytes(range(0x20, 0x7F))
    while len(keys) < n:
        keys.append(bytes(rng.choice(printable) for _ in range(rng.randint(1, 60))))
    return keys


def utf8_keys(rng, n):
    ranges = [(0xA0, 0x7FF), (0x800, 0xD7FF), (0xE000, 0xFFFD), (0x10000, 0x10FFFF)]
    keys = []
    for _ in range(n):
        chars = []
        for _ in range(rng.randint(1, 20)):
            lo, hi = rng.choice(ranges) if rng.random() < 0.6 else (0x20, 0x7E)
            chars.append(chr(rng.randint(lo, hi)))
        keys.append("".join(chars).encode("utf-8"))
    return keys


def binary_keys(rng, n):
    # No newline or NUL restriction: the case format carries keys in hex.
    return [bytes(rng.randrange(256) for _ in range(rng.randint(1, 40))) for _ in range(n)]


def key_set(rng, kinds, extra=()):
    """>= KEYS_PER_SET keys of the kinds the library takes, then the scheme's extra keys."""
    keys = ascii_keys(rng, 2500)
    keys += utf8_keys(rng, 1500 if "binary" in kinds else 2500)
    if "binary" in kinds:
        keys += binary_keys(rng, 1000)
    if "empty" in kinds:
        keys.append(b"")
    keys += list(extra)
    assert len(keys) >= KEYS_PER_SET
    return keys


# ---- cases ----------------------------------------------------------------------------------

def case_text(nodes, keys, vnodes=None, hash_name=None, down=()):
    lines = []
    if hash_name is not None:
        lines.append("hash %s" % hash_name)
    if vnodes is not None:
        lines.append("vnodes %d" % vnodes)
    for node_id, w in nodes:
        lines.append("node %r %s" % (float(w), node_id.hex()))
    for i in down:
        lines.append("down %d" % i)
    for k in keys:
        lines.append("key %s" % (k.hex() if k else "-"))
    return "\n".join(lines) + "\n"


def run_owners(cmd, text, what):
    p = subprocess.run(cmd, input=text.encode(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        sys.exit("clients_compat: %s failed (exit %d): %s" % (what, p.returncode,
                                                              p.stderr.decode(errors="replace")[-2000:]))
    return [int(x) for x in p.stdout.split()]


def middle_variants(nodes, new):
    """The list with a server removed from the middle, and with one inserted there."""
    mid = len(nodes) // 2
    return [(", middle one removed", nodes[:mid] + nodes[mid + 1:]),
            (", one added in the middle", nodes[:mid] + [new] + nodes[mid:])]


def named(prefix, n, w=1):
    return [(("%s%02d" % (prefix, i)).encode(), w) for i in range(n)]


def unnamed(n, port=11211, w=1):
    return [(("10.0.%d.%d:%d" % (i // 200, 1 + i % 200, port)).encode(), w) for i in range(n)]


def standard_sets(weighted, host_port_only=False):
    """(name, nodes, vnodes) for a scheme. Host names are "host:port" where the library names its
    servers that way."""
    sets = []
    if not host_port_only:
        sets.append(("named, 3", named("cache-", 3)))
        sets.append(("named, 8", named("cache-", 8)))
        sets.append(("named, 1", named("solo-", 1)))
    else:
        sets.append(("named hosts, 3", [(b"cache-%d.example.net:11211" % i, 1) for i in range(3)]))
        sets.append(("named hosts, 8", [(b"mc%d.local:%d" % (i, 11211 + i), 1) for i in range(8)]))
        sets.append(("one server", [(b"solo.example:11211", 1)]))
    sets.append(("unnamed, 5", unnamed(5)))
    sets.append(("unnamed, 30, port 22122", unnamed(30, 22122)))
    sets.append(("two", unnamed(2)))
    base = unnamed(9)
    new = (b"10.9.9.9:11211", 1)
    for what, nodes in middle_variants(base, new):
        sets.append(("unnamed, 9" + what, nodes))
    if weighted:
        ws = [1, 2, 3, 5, 1, 8, 1, 2]
        sets.append(("unequal weights", [(n, w) for (n, _), w in zip(unnamed(8), ws)]))
        sets.append(("very unequal weights", [(b"a.example:11211", 1), (b"b.example:11211", 10),
                                              (b"c.example:11211", 100), (b"d.example:11211", 3)]))
        wbase = [(n, w) for (n, _), w in zip(unnamed(7), [3, 1, 4, 1, 5, 9, 2])]
        for what, nodes in middle_variants(wbase, (b"10.9.9.9:11211", 6)):
            sets.append(("unequal weights" + what, nodes))
    return [(name, nodes, None) for name, nodes in sets]


# ---- schemes --------------------------------------------------------------------------------

def java_hashcode(s):
    units = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h


def java_min_value_server(rng):
    """A server name whose point "<name>#0" has String.hashCode() == Integer.MIN_VALUE (so
    Math.abs keeps it negative): the name is a random prefix and two chars u1, u2 solving
    h = ((P*31 + u1)*31 + u2)*31^2 + hash("#0") (mod 2^32)."""
    target, tail = 0x80000000, java_hashcode("#0")
    inv = pow(31 * 31, -1, 1 << 32)
    while True:
        prefix = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(6))
        p = java_hashcode(prefix)
        need = ((target - tail) * inv - p * 31 * 31) % (1 << 32)  # u1*31 + u2
        u1, u2 = divmod(need, 31)
        # u1*31 + u2 with u2 in 0..30 and u1 a char: other splits add 31 to u2 per char taken off.
        while u1 > 0xD7FF and u2 + 31 <= 0xD7FF:
            u1, u2 = u1 - 1, u2 + 31
        if 0x20 <= u1 <= 0xD7FF and 0x20 <= u2 + 0 <= 0xD7FF:
            name = prefix + chr(u1) + chr(u2)
            assert java_hashcode(name + "#0") == target
            return name.encode("utf-8")
        if 0x20 <= u1 - 1 <= 0xD7FF and 0x20 <= u2 + 31 <= 0xD7FF:
            name = prefix + chr(u1 - 1) + chr(u2 + 31)
            assert java_hashcode(name + "#0") == target
            return name.encode("utf-8")


def java_sets(rng):
    sets = [(name, nodes, 100) for name, nodes, _ in standard_sets(False)]
    sets.append(("named, 4, 160 points", named("node-", 4), 160))
    sets.append(("unnamed, 6, 7 points", unnamed(6), 7))
    # The case: three servers, 100 points each.
    sets.append(("serveur_A/B/C, 100 points",
                 [(b"serveur_A", 1), (b"serveur_B", 1), (b"serveur_C", 1)], 100))
    # ... and its keys: user:0 .. user:19999 all go to two of the three servers, in Java too
    # (the points of "serveur_X#i" and the keys cluster; chash hashcheck shows it).
    sets.append(("serveur_A/B/C, keys user:0..19999 (2 servers used)",
                 [(b"serveur_A", 1), (b"serveur_B", 1), (b"serveur_C", 1)], 100,
                 [b"user:%d" % i for i in range(20000)], 2))
    # "Aa" and "BB" have equal hashCode()s, so every point of the two collides: the later put
    # (BB) owns them all.
    sets.append(("colliding Aa / BB", [(b"Aa", 1), (b"zz", 1), (b"BB", 1)], 50))
    sets.append(("colliding BB / Aa", [(b"BB", 1), (b"zz", 1), (b"Aa", 1)], 50))
    # A server whose point #0 sits at Math.abs(Integer.MIN_VALUE), the smallest key of the map.
    sets.append(("a point at Integer.MIN_VALUE",
                 [(b"cache-a", 1), (java_min_value_server(rng), 1), (b"cache-b", 1)], 20))
    return sets


def java_extra(nodes, vnodes):
    # Keys on the points themselves (ceilingEntry takes the equal one), and keys whose hashCode
    # is Integer.MIN_VALUE ("polygenelubricants") or 0.
    extra = [n + b"#%d" % i for n, _ in nodes for i in (0, 1, vnodes - 1)]
    return extra + [b"polygenelubricants", b"\x00", "\u0000\u0000".encode()]


def md5_64_extra(nodes, vnodes, rng):
    """Keys on the points, and keys whose hash has the top 32 bits of a point's position but
    differs below: a ring cut to 32 bits would place some of them on the wrong side of it."""
    extra = [n + b"#%d" % i for n, _ in nodes for i in (0, 1, vnodes - 1)]
    tops = {}
    for n, _ in nodes:
        for i in range(vnodes):
            pos = int.from_bytes(hashlib.md5(n + b"#%d" % i).digest()[:8], "big")
            tops[pos >> 32] = pos
    # A birthday search: P points and K probes give about K * P / 2^32 such keys, half of them
    # above their point (those a 32-bit ring misplaces). Only for the large set.
    above = 0
    for j in range(600000 if len(tops) >= 50000 else 0):
        k = b"probe:%d" % j
        pos = int.from_bytes(hashlib.md5(k).digest()[:8], "big")
        if pos >> 32 in tops and pos != tops[pos >> 32]:
            extra.append(k)
            above += pos > tops[pos >> 32]
            if above == 3:
                break
    if len(tops) >= 50000 and above < 3:
        sys.exit("clients_compat: the search found %d keys above a point's top 32 bits, not 3"
                 % above)
    return extra


def md5_sets(rng):
    sets = [(name, nodes, 100) for name, nodes, _ in standard_sets(False)]
    sets.append(("named, 4, 160 points", named("node-", 4), 160))
    # 200 servers x 500 points: enough positions to find keys that tie a point in 32 bits.
    sets.append(("unnamed, 200 x 500 points: keys tying a point's top 32 bits", unnamed(200), 500))
    return sets


def oracle_java(tmp):
    if shutil.which("javac") is None or shutil.which("java") is None:
        return None, "java and javac (default-jdk-headless) missing"
    src = os.path.join(ORACLES, "JavaHashcodeRing.java")
    p = subprocess.run(["javac", "-d", tmp, src], stderr=subprocess.PIPE)
    if p.returncode != 0:
        return None, "javac failed: " + p.stderr.decode(errors="replace")
    return ["java", "-cp", tmp, "JavaHashcodeRing"], None


def oracle_python(script, modules=(), args=()):
    def make(tmp):
        py = "/usr/bin/python3"
        for m in modules:
            if subprocess.run([py, "-c", "import " + m], stderr=subprocess.DEVNULL).returncode:
                return None, "python module %s (python3-%s) missing" % (m, m)
        return [py, os.path.join(ORACLES, script)] + list(args), None
    return make


def oracle_dalli(tmp):
    if shutil.which("ruby") is None:
        return None, "ruby missing"
    if subprocess.run(["ruby", "-e", "require 'dalli'"], stderr=subprocess.DEVNULL).returncode:
        return None, "ruby-dalli missing"
    return ["ruby", os.path.join(ORACLES, "dalli_ring.rb")], None


def uhashring_sets(rng):
    sets = standard_sets(True)
    sets.append(("named, 5, vnodes 7", named("redis-", 5), 7))
    sets.append(("named, 3, vnodes 1", named("r", 3), 1))
    return sets


def uhashring_extra(sep):
    # Keys equal to point strings (bisect_right passes the equal point).
    return lambda nodes, v, rng: [n + sep + b"%d" % i for n, _ in nodes for i in (0, 1, 2)]


def oracle_groupcache(tmp):
    src = "/usr/share/gocode/src/github.com/golang/groupcache/consistenthash"
    if shutil.which("go") is None:
        return None, "go (golang-go) missing"
    if not os.path.isdir(src):
        return None, "groupcache (golang-github-golang-groupcache-dev) missing"
    env = dict(os.environ, GO111MODULE="off", GOPATH="/usr/share/gocode",
               GOCACHE=os.path.join(tmp, "gocache"), GOFLAGS="")
    exe = os.path.join(tmp, "groupcache_ring")
    p = subprocess.run(["go", "build", "-o", exe, os.path.join(ORACLES, "groupcache_ring.go")],
                       env=env, stderr=subprocess.PIPE)
    if p.returncode != 0:
        return None, "go build failed: " + p.stderr.decode(errors="replace")
    return [exe], None


def groupcache_sets(rng):
    sets = [(name, nodes, None) for name, nodes, _ in standard_sets(False)]
    sets.append(("named, 4, 3 replicas", named("peer-", 4), 3))
    sets.append(("unnamed, 6, 160 replicas", unnamed(6), 160))
    # "1" + "0x" and "10" + "x" are the same point string: ids "0x" and "x" collide on replica
    # 1 of one and 10 of the other, 2/20, ... (a later put wins).
    sets.append(("colliding point strings 0x / x", [(b"0x", 1), (b"x", 1), (b"y", 1)], 40))
    return sets


def oracle_guava(fn):
    def make(tmp):
        jar = "/usr/share/java/guava.jar"
        if shutil.which("javac") is None or not os.path.exists(jar):
            return None, "javac (default-jdk-headless) or guava (libguava-java) missing"
        src = os.path.join(ORACLES, "GuavaConsistentHash.java")
        p = subprocess.run(["javac", "-cp", jar, "-d", tmp, src], stderr=subprocess.PIPE)
        if p.returncode != 0:
            return None, "javac failed: " + p.stderr.decode(errors="replace")
        return ["java", "-cp", jar + ":" + tmp, "GuavaConsistentHash", fn], None
    return make


def guava_inputs():
    """Raw 64-bit inputs for Hashing.consistentHash(long, N): 0, -1, and inputs whose first
    generator step gives (int)(state >>> 33) + 1 == 2^31, which Java's int arithmetic wraps to
    Integer.MIN_VALUE (a negative draw ends the jump at once)."""
    a, m = 2862933555777941757, 1 << 64
    inv = pow(a, -1, m)
    out = [0, m - 1, 1, 1 << 63]
    for s1 in (0xFFFFFFFE00000000, 0xFFFFFFFFFFFFFFFF, 0xFFFFFFFE12345678):
        out.append(((s1 - 1) * inv) % m)
    return out


def guava_sets(rng):
    sets = [(name, nodes, None) for name, nodes, _ in standard_sets(False)]
    sets.append(("1000 buckets", unnamed(1000), None))
    return sets


def oracle_spy(fmt):
    def make(tmp):
        jar = "/usr/share/java/spymemcached.jar"
        if shutil.which("javac") is None or not os.path.exists(jar):
            return None, "javac (default-jdk-headless) or spymemcached (libspymemcached-java) missing"
        src = os.path.join(ORACLES, "SpyKetama.java")
        p = subprocess.run(["javac", "-cp", jar, "-d", tmp, src], stderr=subprocess.PIPE)
        if p.returncode != 0:
            return None, "javac failed: " + p.stderr.decode(errors="replace")
        return ["java", "-cp", jar + ":" + tmp, "SpyKetama", fmt], None
    return make


def spy_sets(libmemcached_format):
    def sets(rng):
        out = []
        for name, nodes, v in standard_sets(True, host_port_only=False):
            if name.startswith("named"):
                continue
            if not libmemcached_format and not all(n[:1].isdigit() for n, _ in nodes):
                # Format.SPYMEMCACHED names a server by its address: IP literals here, and
                # "host/ip:port" in the set below.
                nodes = [(b"10.7.0.%d:11211" % (i + 1), w) for i, (_, w) in enumerate(nodes)]
            out.append((name, nodes, v))
        if libmemcached_format:
            out.append(("host names, port 11211 and others",
                        [(b"cache-a.example:11211", 1), (b"cache-b.example:11212", 1),
                         (b"mc.local:11211", 1), (b"10.1.2.3:22122", 1)], None))
        else:
            out.append(("resolved names host/ip:port",
                        [(b"cache-a.example/10.1.0.1:11211", 1), (b"cache-b/10.1.0.2:11211", 1),
                         (b"mc.local/10.1.0.3:22122", 1)], None))
        # 25 equal servers: with a weights map ketama's float count gives 39 digests, without
        # it 40; equal weights here mean no map.
        out.append(("unnamed, 25", unnamed(25), None))
        out.append(("unequal weights, 25 (float rounding)",
                    [(n, 1 + i % 3) for i, (n, _) in enumerate(unnamed(25))], None))
        return out
    return sets


def oracle_pecl(fn):
    def make(tmp):
        if shutil.which("php") is None:
            return None, "php (php-cli) missing"
        p = subprocess.run(["php", "-r", "exit(extension_loaded('memcache') ? 0 : 1);"])
        if p.returncode != 0:
            return None, "the memcache extension (php-memcache) missing"
        return ["php", os.path.join(ORACLES, "pecl_memcache.php"), fn], None
    return make


def pecl_key(k):
    """A key PECL memcache takes: any non-empty bytes (it refuses the empty key). It prepares
    the others before hashing, as chash does: cut to 250 bytes, bytes <= 0x20 made '_'."""
    return len(k) > 0


def pecl_extra(nodes, vnodes, rng):
    """Keys PECL's preparation changes: spaces, tabs, newlines and every control byte, inside
    and at the ends; keys of 251..600 bytes (cut to 250, also with a control byte past the cut);
    and each such key next to its prepared form, which must go to the same server."""
    keys = []
    for c in range(0x00, 0x21):
        keys += [b"a%cb" % c, b"%cuser:%d" % (c, c), b"user:%d%c" % (c, c), bytes([c]) * 3]
    for i in range(400):
        k = bytes(rng.randint(0x21, 0xFF) for _ in range(rng.randint(1, 40)))
        cut = rng.randrange(len(k) + 1)
        keys.append(k[:cut] + bytes([rng.randint(0, 0x20)]) + k[cut:])
    for i in range(300):
        n = rng.randint(251, 600)
        k = bytes(rng.randint(0x21, 0x7E) for _ in range(n))
        if i % 3 == 0:
            k = k[:260] + b" " + k[260:]
        keys.append(k)
    prepared = [bytes(b if b > 0x20 else 0x5F for b in k[:250]) for k in keys]
    return keys + prepared


NPM_PREFIX = "/usr/local/lib/chash-oracles"


def oracle_hashring(mode):
    def make(tmp):
        mod = os.path.join(NPM_PREFIX, "node_modules")
        if shutil.which("node") is None:
            return None, "node (nodejs) missing"
        if not os.path.isfile(os.path.join(mod, "hashring", "package.json")):
            return None, "the npm package hashring missing in " + NPM_PREFIX
        return ["env", "NODE_PATH=" + mod, "node", os.path.join(ORACLES, "hashring.js"), mode], None
    return make


def hashring_sets(rng):
    sets = standard_sets(True, host_port_only=True)
    sets.append(("unnamed, 6, vnode count 160", unnamed(6), 160))
    sets.append(("unnamed, 25, vnode count 7", unnamed(25), 7))
    return sets


def oracle_node_script(script):
    def make(tmp):
        if shutil.which("node") is None:
            return None, "node (nodejs) missing"
        return ["node", os.path.join(ORACLES, script)], None
    return make


def ring_utf16_sets(rng):
    sets = [(name, nodes, None) for name, nodes, _ in standard_sets(True)]
    sets.append(("named, 5, 1000 vnodes", named("cache-", 5), 1000))
    return sets


def pymemcache_key(k):
    """A key HashClient takes: at most 250 bytes, no ASCII white space (bytes.split()) or NUL."""
    return len(k) <= 250 and not any(b in b" \t\n\r\x0b\x0c\x00" for b in k)


SCHEMES = {
    # Java rings take Strings: keys are well-formed UTF-8 (a byte string that is not has no
    # String; Java's decoder and the Unicode practice chash follows replace ill-formed bytes
    # differently, e.g. an encoded surrogate is one U+FFFD in Java, three in Unicode's).
    "java_hashcode_ring": dict(oracle=oracle_java, kinds=("empty",), sets=java_sets,
                               extra=lambda nodes, v, rng: java_extra(nodes, v)),
    "md5_64_ring": dict(oracle=oracle_python("md5_64_ring.py"), kinds=("binary", "empty"),
                        sets=md5_sets, extra=md5_64_extra),
    # uhashring hashes str(key): keys are text (UTF-8), no binary.
    "uhashring@2": dict(oracle=oracle_python("uhashring_ring.py", ("uhashring",), ["meta"]),
                        kinds=("empty",), sets=uhashring_sets, extra=uhashring_extra(b"-")),
    "uhashring_ketama@2": dict(oracle=oracle_python("uhashring_ring.py", ("uhashring",),
                                                    ["ketama"]),
                               kinds=("empty",), sets=uhashring_sets, extra=uhashring_extra(b"-")),
    "groupcache@0": dict(oracle=oracle_groupcache, kinds=("binary", "empty"), sets=groupcache_sets,
                         extra=lambda nodes, v, rng: [b"%d" % i + n for n, _ in nodes
                                                      for i in (0, 1, 2)]),
    # Guava's consistentHash over Guava's own key hashes: md5 (padToLong: digest bytes 0..7
    # little-endian, chash's md5) and crc32 (chash's crc32a). "SCHEME+HASH" names the table's
    # hash for a scheme that takes one.
    "guava@31+md5": dict(oracle=oracle_guava("md5"), kinds=("binary", "empty"), sets=guava_sets,
                         extra=lambda nodes, v, rng: [], inputs=guava_inputs),
    "guava@31+crc32a": dict(oracle=oracle_guava("crc32"), kinds=("binary", "empty"),
                            sets=guava_sets, extra=lambda nodes, v, rng: []),
    # spymemcached takes String keys (UTF-8): no binary keys.
    "spymemcached@2": dict(oracle=oracle_spy("SPYMEMCACHED"), kinds=("empty",),
                           sets=spy_sets(False),
                           extra=lambda nodes, v, rng: [n + b"-%d" % i for n, _ in nodes
                                                        for i in (0, 1)]),
    "spymemcached_libmemcached@2": dict(oracle=oracle_spy("LIBMEMCACHED"), kinds=("empty",),
                                        sets=spy_sets(True),
                                        extra=lambda nodes, v, rng: [n + b"-%d" % i
                                                                     for n, _ in nodes
                                                                     for i in (0, 1)]),
    "pecl_memcache@4+crc32a": dict(oracle=oracle_pecl("crc32"), kinds=("binary",),
                                   sets=lambda rng: standard_sets(True, host_port_only=True),
                                   extra=pecl_extra, key_ok=pecl_key, failover=True),
    "pecl_memcache@4+fnv1a_32": dict(oracle=oracle_pecl("fnv"), kinds=("binary",),
                                     sets=lambda rng: standard_sets(True, host_port_only=True),
                                     extra=pecl_extra, key_ok=pecl_key, failover=True),
    # Node's hashring takes JavaScript strings: text keys (UTF-8), no binary.
    "hashring@3": dict(oracle=oracle_hashring("default"), kinds=("empty",), sets=hashring_sets,
                       extra=lambda nodes, v, rng: [n + b"-%d" % i for n, _ in nodes
                                                    for i in (0, 1)]),
    "hashring_hash_ring@3": dict(oracle=oracle_hashring("hash_ring"), kinds=("empty",),
                                 sets=hashring_sets,
                                 extra=lambda nodes, v, rng: [n + b"-%d" % i for n, _ in nodes
                                                              for i in (0, 1)]),
    # chash's own ring under fnv1a32_fmix_utf16 against a JavaScript port hashing charCodeAt():
    # text keys, including 4-byte characters (two code units each).
    "ring+fnv1a32_fmix_utf16": dict(oracle=oracle_node_script("chash_ring_utf16.js"),
                                    kinds=("empty",), sets=ring_utf16_sets,
                                    extra=lambda nodes, v, rng: [n + b"#%d" % i for n, _ in nodes
                                                                 for i in (0, 1)]),
    # pymemcache's HashClient: text keys (allow_unicode_keys) it accepts; no weights.
    "pymemcache@3": dict(oracle=oracle_python("pymemcache_hash.py", ("pymemcache",)),
                         kinds=("empty",), key_ok=pymemcache_key,
                         sets=lambda rng: [(n, [(i, 1) for i, _ in nodes], v)
                                           for n, nodes, v in standard_sets(False, True)],
                         extra=lambda nodes, v, rng: [n + b"-" for n, _ in nodes]),
    # Dalli's failover rehash ("#{try}#{key}") with servers down: chash's walk (failover).
    "dalli@3": dict(oracle=oracle_dalli, kinds=("binary", "empty"), failover=True,
                    sets=lambda rng: standard_sets(True, host_port_only=True),
                    extra=lambda nodes, v, rng: [n + b":%d" % i for n, _ in nodes for i in (0, 1)]),
}


def down_variants(n):
    """The servers marked down for a scheme whose failover order chash reproduces: one from the
    middle, then two (the first and the last); none for a one-server set beyond that server."""
    if n == 1:
        return [[0]]
    return [[n // 2], sorted({0, n - 1})]


def compare(name, set_name, nodes, keys, want, got, down):
    """Exits 1 on a key placed differently. With servers down the library may find none for a
    key (-1: it gave up after its retries) where chash's walk goes on: chash's server must then
    be up. Returns the number of such keys."""
    bad = [i for i in range(len(keys)) if want[i] != got[i]
           and not (down and want[i] == -1 and got[i] >= 0 and got[i] not in down)]
    if bad:
        print("clients_compat %s [%s]: %d of %d keys differ" % (name, set_name, len(bad),
                                                                 len(keys)))
        show = lambda o: "(none)" if o < 0 else nodes[o][0].decode(errors="replace")
        for i in bad[:5]:
            print("  key %s: library -> %s, chash -> %s"
                  % (keys[i].hex() or "(empty)", show(want[i]), show(got[i])))
        sys.exit(1)
    return sum(1 for i in range(len(keys)) if want[i] == -1 and got[i] >= 0)


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in SCHEMES:
        sys.exit("usage: clients_compat.py {%s} PLACE" % ",".join(SCHEMES))
    name, place = sys.argv[1], sys.argv[2]
    scheme = SCHEMES[name]
    rng = random.Random("clients_compat:" + name)
    with tempfile.TemporaryDirectory() as tmp:
        cmd, why = scheme["oracle"](tmp)
        if cmd is None:
            print("clients_compat %s: oracle unavailable: %s; run scripts/bootstrap" % (name, why))
            sys.exit(1 if os.environ.get("CI") else 77)
        total = total_down = 0
        sets = scheme["sets"](rng)
        for set_name, nodes, vnodes, *fixed in sets:
            # A set may bring its own keys and the number of servers they must use.
            keys = fixed[0] if fixed else key_set(rng, scheme["kinds"],
                                                  scheme["extra"](nodes, vnodes or 160, rng))
            if "key_ok" in scheme:
                keys = [k for k in keys if scheme["key_ok"](k)]
                # Topped up with printable keys without spaces, and binary keys above 0x20.
                top = 0xFF if "binary" in scheme["kinds"] else 0x7E
                while len(keys) < KEYS_PER_SET + 500:
                    keys.append(bytes(rng.randint(0x21, 0x7E if len(keys) % 2 else top)
                                      for _ in range(rng.randint(1, 60))))
                if len(keys) < KEYS_PER_SET:
                    sys.exit("clients_compat %s [%s]: only %d keys the library takes"
                             % (name, set_name, len(keys)))
            text = case_text(nodes, keys, vnodes, name.split("+")[1] if "+" in name else None)
            raw = scheme.get("inputs", list)()
            text += "".join("keyhash %016x\n" % h for h in raw)
            keys = keys + [b"<hash %016x>" % h for h in raw]
            want = run_owners(cmd, text, "oracle for " + name)
            got = run_owners([place, name.split("+")[0]], text, "clients_place")
            owners = want
            if len(want) != len(keys) or len(got) != len(keys):
                sys.exit("clients_compat %s [%s]: %d keys, oracle gave %d owners, chash %d"
                         % (name, set_name, len(keys), len(want), len(got)))
            compare(name, set_name, nodes, keys, want, got, ())
            used = len(set(want))
            if len(fixed) > 1 and used != fixed[1]:
                sys.exit("clients_compat %s [%s]: the library used %d servers, expected %d"
                         % (name, set_name, used, fixed[1]))
            print("  %-55s %2d servers, %5d keys, %2d servers used: equal"
                  % (set_name, len(nodes), len(keys), used))
            total += len(keys)
            # The library's failover with servers down: chash's walk (as chash-proxy routes)
            # must pick the server the library's own retries pick.
            for down in (down_variants(len(nodes)) if scheme.get("failover") else ()):
                dtext = case_text(nodes, keys, vnodes, name.split("+")[1] if "+" in name else None,
                                  down)
                want = run_owners(cmd, dtext, "oracle for " + name)
                got = run_owners([place, name.split("+")[0]], dtext, "clients_place")
                if len(want) != len(keys) or len(got) != len(keys):
                    sys.exit("clients_compat %s [%s, down %s]: owner counts differ"
                             % (name, set_name, down))
                gave_up = compare(name, "%s, down %s" % (set_name, down), nodes, keys, want, got,
                                  down)
                moved = sum(1 for i in range(len(keys)) if want[i] != owners[i])
                print("  %-55s %2d down, %5d keys, %4d failed over, %4d with none%s: equal"
                      % ("  " + set_name, len(down), len(keys), moved, want.count(-1),
                         " (chash went on: %d)" % gave_up if gave_up else ""))
                total_down += len(keys)
        print("clients_compat %s: %d server sets, %d keys, 100%% equal to the library"
              % (name, len(sets), total))
        if total_down:
            print("clients_compat %s: failover, %d keys with servers down, 100%% equal to the "
                  "library's retries" % (name, total_down))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""rings_compat.py -- the Redis clients' rings and the memcached clients of issue 38 against
their real libraries, key for key, one library process per scheme (docs/COMPATIBILITY.md,
"Client libraries").

    rings_compat.py SCHEME PLACE [WORKDIR]

SCHEME is a libchash algorithm name (predis@1, cache_memcached@1, ...); PLACE the
clients_place binary (libchash's side); WORKDIR a directory for build products kept between
runs (the Go oracles' build cache), else a temporary one.

For each scheme: three node sets (3, 7 and 13 nodes; unequal weights where the library takes
weights; named servers where it names them) and the scheme's own sharp sets, each with at
least 10,000 keys (ASCII, long, non-ASCII UTF-8, binary with NUL and CR where the library takes
bytes, keys with hash tags and the tag rule's edge cases). Every set is placed:
  - as it is: each key's owner;
  - with one node appended: each key's owner, and the moved set (the keys whose owner changed)
    must be the library's;
  - where the library fails over, with its middle node down, then its first and last: the node
    the library's own retry picks must be chash's route (ch_route_hash_fn, as chash-proxy and
    libchash-cache route) -- where the library gives up, chash's must be a node that is up.
All cases go to ONE oracle process (tests/compat/oracles/) and ONE clients_place process, as a
batch: "case" lines separate them. Exit 0 when every key agrees, 1 with the first differing
keys otherwise, 77 when the library is missing (1 when CI is set; scripts/bootstrap installs
them all).
"""
import os
import random
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ORACLES = os.path.join(HERE, "oracles")
NPM = "/usr/local/lib/chash-oracles/node_modules"
PY = "/usr/bin/python3"
KEYS = 10000


# ---- keys ------------------------------------------------------------------------------------

def text_chars(rng, n, lo=0x20):
    """n characters, 60% beyond ASCII (2-, 3- and 4-byte UTF-8; no surrogates)."""
    ranges = [(0xA0, 0x7FF), (0x800, 0xD7FF), (0xE000, 0xFFFD), (0x10000, 0x10FFFF)]
    out = []
    for _ in range(n):
        a, b = rng.choice(ranges) if rng.random() < 0.6 else (lo, 0x7E)
        out.append(chr(rng.randint(a, b)))
    return "".join(out)


TAG_SHAPES = [b"{user:%d}:cart", b"{user:%d}:profile", b"a{%d}b", b"x{tag%d}y{z}", b"{}%d",
              b"%d{}", b"}{%d}", b"{{%d}}", b"{a\nb%d}c", b"z{%d}\n{w}", b"{%d", b"%d}",
              b"\n{k%d}", b"{\n%d}", b"{}}%d}", b"pre{%d}mid}post", b"{%d}\x00{n}",
              b"\x00{%d}", b"{%d\x00}", b"a{b}c{%d}d", b"{%d}{x}", b"{ %d }"]


def make_keys(rng, kinds, maxlen=None, key_ok=None):
    """At least KEYS keys of the kinds the library takes: "ascii" always; "long" (300 of up to
    600 bytes, or maxlen), "utf8" (2,500), "binary" (1,500 with NUL and CR), "tags" (the tag
    shapes above, text or bytes), "empty"."""
    keys = [b"user:%d" % i for i in range(3000)]
    keys += [b"session:%08x" % rng.getrandbits(32) for _ in range(500)]
    printable = bytes(range(0x21, 0x7F)) if "nospace" in kinds else bytes(range(0x20, 0x7F))
    while len(keys) < 5500:
        keys.append(bytes(rng.choice(printable) for _ in range(rng.randint(1, 60))))
    if "long" in kinds:
        top = maxlen or 600
        for _ in range(300):
            keys.append(bytes(rng.choice(printable) for _ in range(rng.randint(min(200, top), top))))
    if "utf8" in kinds:
        lo = 0x21 if "nospace" in kinds else 0x20
        keys += [text_chars(rng, rng.randint(1, 24), lo).encode("utf-8") for _ in range(2500)]
    if "binary" in kinds:
        for _ in range(1500):
            k = bytearray(rng.randrange(256) for _ in range(rng.randint(1, 40)))
            k[rng.randrange(len(k))] = rng.choice((0, 13))
            keys.append(bytes(k))
    if "tags" in kinds:
        for i in range(800):
            keys.append(TAG_SHAPES[i % len(TAG_SHAPES)] % i)
    if "empty" in kinds:
        keys.append(b"")
    keys += [b"polygenelubricants", b"Aa", b"BB"]  # Java hashCode -2^31, and a collision
    if key_ok is not None:
        keys = [k for k in keys if key_ok(k)]
    keys = list(dict.fromkeys(keys))
    while len(keys) < KEYS + 200:
        keys.append(b"fill:%d:%x" % (len(keys), rng.getrandbits(24)))
    return keys


# ---- cases -----------------------------------------------------------------------------------

class Case:
    def __init__(self, label, nodes, keys, down=(), opts=(), chash_opts=(), chash_keys=None):
        self.label, self.nodes, self.keys = label, nodes, keys
        self.down, self.opts, self.chash_opts = list(down), list(opts), list(chash_opts)
        if chash_keys is not None:
            self.chash_keys = chash_keys

    def text(self, for_chash, hashes=None):
        keys = getattr(self, "chash_keys", self.keys) if for_chash else self.keys
        lines = ["case"]
        lines += ["%s %s" % o for o in (self.chash_opts if for_chash else self.opts)]
        lines += ["node %r %s" % (float(w), i.hex()) for i, w in self.nodes]
        lines += ["down %d" % i for i in self.down]
        if hashes is not None and not for_chash:
            lines += ["keyhash %016x" % h for h in hashes]
        else:
            lines += ["key %s" % (k.hex() if k else "-") for k in keys]
        return "\n".join(lines) + "\n"


def run(cmd, text, what, env=None):
    p = subprocess.run(cmd, input=text.encode(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=env)
    if p.returncode != 0:
        sys.exit("rings_compat: %s failed (exit %d): %s"
                 % (what, p.returncode, p.stderr.decode(errors="replace")[-3000:]))
    return [int(x) for x in p.stdout.split()]


def split(owners, cases, what):
    out, at = [], 0
    for c in cases:
        out.append(owners[at:at + len(c.keys)])
        at += len(c.keys)
    if at != len(owners):
        sys.exit("rings_compat: %s gave %d owners for %d keys" % (what, len(owners), at))
    return out


# ---- node sets -------------------------------------------------------------------------------

def addrs(n, port=11211, base="10.0"):
    return [("%s.%d.%d:%d" % (base, i // 200, 1 + i % 200, port)).encode() for i in range(n)]


W3, W7, W13 = [1, 2, 3], [5, 1, 1, 2, 3, 1, 4], [1, 3, 2, 1, 1, 4, 2, 1, 5, 1, 2, 3, 1]


def sets_of(ids3, ids7, ids13, weighted, extra=()):
    """(label, nodes) for the three sizes, weights unequal where the library takes them."""
    out = []
    for ids, ws in ((ids3, W3), (ids7, W7), (ids13, W13)):
        ws = ws if weighted else [1] * len(ids)
        out.append(("%d nodes%s" % (len(ids), ", weights %s" % ":".join(map(str, ws))
                                    if weighted else ""), list(zip(ids, ws))))
    return out + list(extra)


def appended(nodes, new):
    return nodes + [new]


def new_id(last):
    """An id of the same form as the last one, not in the set: an IPv4 address's third octet
    made 99, a URL's host prefixed "new-", a "host:port" host suffixed "-new", a path or a
    name suffixed."""
    import re
    m = re.match(rb"^(\d+\.\d+\.)\d+(\.\d+(:\d+)?)$", last)
    if m:
        return m.group(1) + b"99" + m.group(2)
    m = re.match(rb"^(\w+://)(.*)$", last)
    if m:
        return m.group(1) + b"new-" + m.group(2)
    m = re.match(rb"^([^/:]+):(\d+)$", last)
    if m:
        return m.group(1) + b"-new:" + m.group(2)
    return last + b"-new"


def down_variants(n):
    return [[n // 2], sorted({0, n - 1})]


# ---- oracles ---------------------------------------------------------------------------------

def have(cmd):
    return subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


def need(ok, why):
    if not ok:
        print("rings_compat: oracle unavailable: %s; run scripts/bootstrap" % why)
        sys.exit(1 if os.environ.get("CI") else 77)


def php_oracle(script, *args):
    def make(work):
        need(shutil.which("php") is not None, "php (php-cli) missing")
        return ["php", os.path.join(ORACLES, script)] + list(args), None
    return make


def ruby_oracle(mode):
    def make(work):
        need(have(["ruby", "-e", "require 'redis'"]), "ruby-redis missing")
        return ["ruby", os.path.join(ORACLES, "redis_rb_ring.rb"), mode], None
    return make


def perl_oracle(script, module):
    def make(work):
        need(have(["perl", "-M" + module, "-e", "1"]), "perl %s missing" % module)
        return ["perl", os.path.join(ORACLES, script)], None
    return make


def python_oracle(script, module):
    def make(work):
        need(have([PY, "-c", "import " + module]), "python3 module %s missing" % module)
        return [PY, os.path.join(ORACLES, script)], None
    return make


def node_oracle(script, package, env_extra=None):
    def make(work):
        need(shutil.which("node") is not None, "node (nodejs) missing")
        need(os.path.isfile(os.path.join(NPM, package, "package.json")),
             "the npm package %s missing in %s" % (package, NPM))
        env = dict(os.environ, NODE_PATH=NPM, **(env_extra or {}))
        return ["node", os.path.join(ORACLES, script)], env
    return make


def go_oracle(script, pkg_dir, mirror=None):
    """Builds oracles/SCRIPT against the Debian Go sources (GOPATH mode). With mirror=(import
    path, file), the package is first mirrored into WORKDIR's GOPATH (symlinks to the installed
    files) with that file of ours added to it, to reach what the package does not export."""
    def make(work):
        need(shutil.which("go") is not None, "go (golang-go) missing")
        need(os.path.isdir(pkg_dir), "%s missing" % pkg_dir)
        gopath = "/usr/share/gocode"
        if mirror is not None:
            path, extra = mirror
            root = os.path.join(work, "gopath")
            dst = os.path.join(root, "src", path)
            if os.path.isdir(dst):
                shutil.rmtree(dst)
            os.makedirs(dst)
            for name in os.listdir(pkg_dir):
                if not name.endswith("_test.go"):
                    os.symlink(os.path.join(pkg_dir, name), os.path.join(dst, name))
            shutil.copy(os.path.join(ORACLES, extra), dst)
            gopath = root + ":" + gopath
        env = dict(os.environ, GO111MODULE="off", GOPATH=gopath, GOFLAGS="",
                   GOCACHE=os.path.join(work, "gocache"))
        exe = os.path.join(work, script[:-3])
        p = subprocess.run(["go", "build", "-o", exe, os.path.join(ORACLES, script)], env=env,
                           stderr=subprocess.PIPE)
        if p.returncode != 0:
            sys.exit("rings_compat: go build %s failed: %s" % (script, p.stderr.decode()))
        return [exe], None
    return make


def stdhash(work):
    """A C++ program printing std::hash<std::string> of each hex key: libstdc++'s, the hash
    Envoy's redis_proxy uses (MurmurHash::murmurHash2 reproduces it)."""
    need(shutil.which("g++") is not None, "g++ (build-essential) missing")
    exe = os.path.join(work, "stdhash")
    src = os.path.join(ORACLES, "stdhash.cc")
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
        p = subprocess.run(["g++", "-O1", "-o", exe, src], stderr=subprocess.PIPE)
        if p.returncode != 0:
            sys.exit("rings_compat: g++ stdhash.cc failed: %s" % p.stderr.decode())
    return exe


# ---- the schemes -----------------------------------------------------------------------------

def nodes_unit(ids):
    return [(i, 1) for i in ids]


def predis_sets(rng):
    a = addrs(13, 6379)
    ws = [15, 49] + [300] * 8 + [352]  # W = 2816, N = 11: 15 and 49 are PHP-rounding edges
    extra = [("11 nodes, weights 15:49:300x8:352 (PHP's round() pre-rounding)",
              list(zip(addrs(11, 6380), ws))),
             ("3 nodes, equal weights 100 (Predis' default)", [(i, 100) for i in a[:3]]),
             ("unix sockets", [(b"/run/redis/r%d.sock" % i, 1) for i in range(3)])]
    return sets_of(a[:3], a[:7], a[:13], True, extra)


def redis_rb_sets(rng):
    named = [b"redis://10.1.0.%d:6379/0" % (i + 1) for i in range(3)]
    mixed = [b"10.2.0.%d:6379" % (i + 1) for i in range(4)] + [b"cache-%c" % c for c in b"abc"]
    urls = [b"redis://10.3.0.%d:%d/%d" % (i + 1, 6379 + i % 3, i % 4) for i in range(13)]
    return sets_of(named, mixed, urls, False)


SCHEMES = {
    # Predis 1.1, new Predis\Client(servers, ['cluster' => 'predis']): PHP strings are bytes.
    "predis@1": dict(oracle=php_oracle("predis_ring.php", "hashring"),
                     kinds=("long", "utf8", "binary", "tags", "empty"), sets=predis_sets),
    "predis_ketama@1": dict(oracle=php_oracle("predis_ring.php", "ketama"),
                            kinds=("long", "utf8", "binary", "tags", "empty"),
                            sets=predis_sets),
    "phpredis_array@5": dict(
        oracle=php_oracle("phpredis_array.php", "consistent"),
        kinds=("long", "utf8", "binary", "tags", "empty"),
        sets=lambda rng: sets_of(addrs(3, 6379), [b"redis-%d.local:6379" % i for i in range(6)]
                                 + [b"10.9.9.9"], addrs(13, 6380), False)),
    "phpredis_array_range@5": dict(
        oracle=php_oracle("phpredis_array.php", "range"),
        kinds=("long", "utf8", "binary", "tags", "empty"),
        sets=lambda rng: sets_of(addrs(3, 6379), [b"redis-%d.local:6379" % i for i in range(6)]
                                 + [b"10.9.9.9"], addrs(13, 6380), False)),
    # redis-rb 4.8's Redis::Distributed; keys as binary strings (a UTF-8 key has the same bytes).
    "redis_rb@4": dict(oracle=ruby_oracle("4"), kinds=("long", "utf8", "binary", "tags", "empty"),
                       sets=redis_rb_sets),
    # redis-rb 5's point hash on redis-rb 4.8's Distributed, binary search and tags.
    "redis_rb@5": dict(oracle=ruby_oracle("5"), kinds=("long", "utf8", "binary", "tags", "empty"),
                       sets=redis_rb_sets),
    "go_redis_ring@5": dict(
        oracle=go_oracle("go_redis_ring.go", "/usr/share/gocode/src/gopkg.in/redis.v5",
                         ("gopkg.in/redis.v5", "go_redis_export.go")),
        kinds=("long", "utf8", "binary", "tags", "empty"), failover=True,
        sets=lambda rng: sets_of([b"shard1", b"shard2", b"shard3"],
                                 [b"cache-%d" % i for i in range(7)],
                                 [b"redis-%02d.example:6379" % i for i in range(13)], False)),
    # django-redis hashes str(key): text keys.
    "django_redis_shard@5": dict(
        oracle=python_oracle("django_redis_ring.py", "django_redis"),
        kinds=("long", "utf8", "tags", "empty"),
        sets=lambda rng: sets_of([b"redis://127.0.0.1:6379/%d" % i for i in range(1, 4)],
                                 [b"redis://10.0.0.%d:6379/1" % i for i in range(1, 8)],
                                 [b"rediss://cache-%d.example:6380/0" % i for i in range(13)],
                                 False)),
    # Envoy's ring hash as @grpc/grpc-js-xds builds it; keys hashed by libstdc++'s std::hash.
    "envoy_ring_hash@1": dict(
        oracle=node_oracle("envoy_ring.js", "@grpc/grpc-js-xds"), stdhash=True,
        kinds=("long", "utf8", "binary", "tags", "empty"), failover=True,
        sets=lambda rng: sets_of(addrs(3, 6379), addrs(7, 6380, "10.1"), addrs(13, 6381, "10.2"),
                                 True, [("4 nodes, weights 1:5000:3:2 (5,006 entries: past "
                                         "gRPC's default cap of 4,096, within Envoy's)",
                                         list(zip(addrs(4, 7000), [1, 5000, 3, 2])))])),
    "cache_memcached@1": dict(
        oracle=perl_oracle("cache_memcached.pl", "Cache::Memcached"),
        kinds=("long", "utf8", "binary", "tags", "empty"), failover=True,
        sets=lambda rng: sets_of(addrs(3), addrs(7, 11212), addrs(13, 22122), True)),
    # Cache::Memcached::Fast sends the key on the wire, which the oracle's listeners read:
    # keys without space or newline (memcached's text protocol), NUL and CR included.
    "cmfast@0": dict(
        oracle=perl_oracle("cmfast.pl", "Cache::Memcached::Fast"), loopback=True,
        kinds=("long", "utf8", "binary", "tags", "nospace"), maxlen=250,
        key_ok=lambda k: 0 < len(k) <= 250 and b" " not in k and b"\n" not in k,
        variants=lambda label, nodes, keys: [
            Case(label + ", namespace \"app1:\" with hash_namespace", nodes, keys,
                 opts=[("namespace", b"app1:".hex()), ("hash_namespace", "1")],
                 chash_keys=[b"app1:" + k for k in keys]),
            Case(label + ", namespace \"app1:\" (not hashed: the default)", nodes, keys,
                 opts=[("namespace", b"app1:".hex())]),
            Case(label + ", ketama_points 40", nodes, keys, opts=[("ketama_points", "40")],
                 chash_opts=[("vnodes", "40")])],
        sets=None),
    "python_memcached@1": dict(
        oracle=python_oracle("python_memcached.py", "memcache"), failover=True,
        kinds=("long", "utf8", "tags", "nospace"), maxlen=250,
        key_ok=lambda k: 0 < len(k) <= 250 and all(b > 0x20 and b != 0x7F for b in k),
        sets=lambda rng: sets_of(addrs(3), addrs(7, 11212), addrs(13, 22122), True)),
    "gomemcache@0": dict(
        oracle=go_oracle("gomemcache_pick.go",
                         "/usr/share/gocode/src/github.com/bradfitz/gomemcache/memcache"),
        kinds=("long", "utf8", "binary", "tags", "empty"),
        sets=lambda rng: sets_of(addrs(3), addrs(7, 11212), addrs(13, 22122), True)),
    "node_memcached@2": dict(
        oracle=node_oracle("node_memcached.js", "memcached"),
        kinds=("long", "utf8", "tags", "empty"), removal=True,
        sets=lambda rng: sets_of(addrs(3), addrs(4) + addrs(3, 11212, "10.5"),
                                 addrs(13, 22122), True)),
    "memjs@1": dict(
        oracle=node_oracle("memjs_server.js", "memjs"), failover=True,
        kinds=("long", "utf8", "tags", "empty"),
        sets=lambda rng: sets_of(addrs(3), addrs(7, 11212), addrs(13, 22122), False)),
}


def free_ports(n):
    import socket
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def cmfast_sets(rng):
    """Loopback servers (the oracle answers on them): weights any positive number."""
    ports = free_ports(3 + 7 + 13 + 3)
    ids = [b"127.0.0.%d:%d" % (1 + i % 5, p) for i, p in enumerate(ports)]
    ws7 = [2.5, 1, 0.7, 3, 1.25, 1, 4]
    return [("3 nodes, weights 1:2:3", list(zip(ids[:3], W3))),
            ("7 nodes, weights 2.5:1:0.7:3:1.25:1:4", list(zip(ids[3:10], ws7))),
            ("13 nodes, weights %s" % ":".join(map(str, W13)), list(zip(ids[10:23], W13)))], \
        ids[23:]


def main():
    if len(sys.argv) not in (3, 4) or sys.argv[1] not in SCHEMES:
        sys.exit("usage: rings_compat.py {%s} PLACE [WORKDIR]" % ",".join(SCHEMES))
    name, place = sys.argv[1], sys.argv[2]
    scheme = SCHEMES[name]
    rng = random.Random("rings_compat:" + name)
    work = sys.argv[3] if len(sys.argv) == 4 else None
    tmp = tempfile.TemporaryDirectory()
    work = os.path.abspath(work or tmp.name)
    os.makedirs(work, exist_ok=True)
    cmd, env = scheme["oracle"](work)

    spare = None
    if scheme.get("loopback"):
        sets, spare = cmfast_sets(rng)
    else:
        sets = scheme["sets"](rng)
    cases = []
    for label, nodes in sets:
        keys = make_keys(rng, scheme["kinds"], scheme.get("maxlen"), scheme.get("key_ok"))
        if len(keys) < KEYS:
            sys.exit("rings_compat %s [%s]: only %d keys" % (name, label, len(keys)))
        weighted = any(w != nodes[0][1] for _, w in nodes)
        new = (spare.pop(0) if spare is not None else new_id(nodes[-1][0]),
               2 if weighted else 1)
        base = Case(label, nodes, keys)
        cases.append(base)
        cases.append(Case(label + ", one appended", appended(nodes, new), keys))
        for d in (down_variants(len(nodes)) if scheme.get("failover") else ()):
            cases.append(Case(label + ", down %s" % d, nodes, keys, down=d))
        cases += scheme.get("variants", lambda *a: [])(label, nodes, keys)
        if scheme.get("removal"):
            mid = len(nodes) // 2
            c = Case(label + ", middle one removed", nodes, keys, opts=[("remove", "%d" % mid)])
            c.chash_nodes = nodes[:mid] + nodes[mid + 1:]
            cases.append(c)

    hashes = None
    if scheme.get("stdhash"):
        exe = stdhash(work)
        text = "".join("%s\n" % (k.hex() if k else "-") for c in cases for k in c.keys)
        p = subprocess.run([exe], input=text.encode(), stdout=subprocess.PIPE)
        if p.returncode != 0:
            sys.exit("rings_compat: stdhash failed")
        hashes = [int(x, 16) for x in p.stdout.split()]
    at = 0
    otext = []
    for c in cases:
        otext.append(c.text(False, hashes[at:at + len(c.keys)] if hashes else None))
        at += len(c.keys)
    ctext = []
    for c in cases:
        if hasattr(c, "chash_nodes"):
            cc = Case(c.label, c.chash_nodes, c.keys)
            ctext.append(cc.text(True))
        else:
            ctext.append(c.text(True))
    want = split(run(cmd, "".join(otext), "the oracle for " + name, env), cases, "the oracle")
    got = split(run([place, name], "".join(ctext), "clients_place"), cases, "clients_place")

    total = failed_over = gave_up = 0
    base_owners = {}
    for c, w, g in zip(cases, want, got):
        ids = [n for n, _ in (c.chash_nodes if hasattr(c, "chash_nodes") else c.nodes)]
        lib_ids = [n for n, _ in c.nodes]
        if hasattr(c, "chash_nodes"):
            # The library's owners are indexes into its full list; chash's into the list
            # without the removed node: compare by id.
            w = [lib_ids[o] for o in w]
            g = [ids[o] for o in g]
        bad = [i for i in range(len(c.keys)) if w[i] != g[i]
               and not (c.down and w[i] == -1 and g[i] >= 0 and g[i] not in c.down)]
        if bad:
            print("rings_compat %s [%s]: %d of %d keys differ" % (name, c.label, len(bad),
                                                                 len(c.keys)))
            show = lambda o: "(none)" if o == -1 else (o if isinstance(o, bytes) else
                                                       lib_ids[o]).decode(errors="replace")
            for i in bad[:5]:
                print("  key %s: library -> %s, chash -> %s"
                      % (c.keys[i].hex() or "(empty)", show(w[i]), show(g[i])))
            sys.exit(1)
        total += len(c.keys)
        note = ""
        if ", one appended" in c.label:
            b_lib, b_ch = base_owners[c.label.split(", one appended")[0]]
            moved_lib = {i for i in range(len(c.keys)) if lib_ids[w[i]] != b_lib[i]}
            moved_ch = {i for i in range(len(c.keys)) if ids[g[i]] != b_ch[i]}
            if moved_lib != moved_ch:
                sys.exit("rings_compat %s [%s]: moved sets differ (%d vs %d keys)"
                         % (name, c.label, len(moved_lib), len(moved_ch)))
            note = ", %d moved (%.1f%%), the same keys" % (len(moved_lib),
                                                            100.0 * len(moved_lib) / len(c.keys))
        elif c.down:
            base = base_owners[c.label.split(", down")[0]][0]
            moved = sum(1 for i in range(len(c.keys)) if w[i] != -1 and lib_ids[w[i]] != base[i])
            none = w.count(-1)
            failed_over += moved
            gave_up += none
            note = ", %d failed over%s" % (moved, ", %d the library gives up on (chash: an up "
                                                   "node)" % none if none else "")
        elif not hasattr(c, "chash_nodes"):
            base_owners[c.label] = ([lib_ids[o] for o in w], [ids[o] for o in g])
        used = len(set(w) - {-1})
        print("  %-62s %2d nodes, %5d keys, %2d used%s: equal"
              % (c.label, len(c.nodes), len(c.keys), used, note))
    print("rings_compat %s: %d cases in one oracle process, %d keys placed, 0 disagreements%s"
          % (name, len(cases), total, "; failover: %d keys off the down nodes where the "
             "library's own failover puts them, %d it gives up on" % (failed_over, gave_up)
             if scheme.get("failover") else ""))


if __name__ == "__main__":
    main()

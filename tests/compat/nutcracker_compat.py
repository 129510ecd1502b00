#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""End-to-end placement check against the real twemproxy (nutcracker 0.5.0).

Real redis-servers behind real nutcracker instances; every key is written through nutcracker, the
backends are then asked which of them holds which key, and
`chash lookup --config FILE --pool NAME -`, given the same config file, must name that backend
for 100% of the keys. Four phases, each a function below, each with its own backends and its own
nutcracker:

  main    every twemproxy hash x distribution (ketama, modula) x servers (named, unnamed) x
          weights (equal, unequal) x hash_tag ("{}", none): 192 pools of 5 TCP backends. Half the
          unnamed pools have their servers on port 11211, which twemproxy names by host alone
          (127.0.0.2, not 127.0.0.2:11211); the others on ordinary ports.
  eject   auto_eject_hosts: one backend is killed, nutcracker ejects it and rebuilds its
          continuum over the live servers; chash, given the config without the dead server,
          must agree (ketama, modula; 3 hashes; named, unnamed; unequal weights: 12 pools).
  unix    servers on unix sockets, which twemproxy names "/path:" when unnamed (ketama, modula;
          3 hashes; named, unnamed; equal, unequal weights: 18 pools).
  random  distribution random: nutcracker spreads keys over every backend, and chash (which
          cannot predict a per-request draw) warns and names only servers of the pool (2 pools).

Each pool has its own redis database (`redis_db`) on its backends; read back is SELECT + KEYS *.

Usage: nutcracker_compat.py CHASH_BINARY [--keep]   (--keep: leave the temp dir for a look)
Exit: 0 when chash agrees on every key of every pool; 1 otherwise; 77 when nutcracker or
redis-server is missing and CI is unset (1 when CI is set). Only loopback addresses and unix
sockets in the temp dir are used; every socket operation has a timeout, every wait a deadline,
and every process started is killed on the way out.
"""
import concurrent.futures
import ctypes
import os
import random
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from loopback import bindable, free_ports, tail  # noqa: E402

HASHES = ["one_at_a_time", "md5", "crc16", "crc32", "crc32a", "fnv1_64", "fnv1a_64", "fnv1_32",
          "fnv1a_32", "hsieh", "murmur", "jenkins"]
DISTRIBUTIONS = ["ketama", "modula"]
WEIGHTS = {"equal": [1, 1, 1, 1, 1], "unequal": [3, 1, 4, 1, 5]}
# Server names of the "named" pools. twemproxy sorts a pool's servers by name, shorter names
# first, then bytewise (modula indexes that order): these are in neither order, and the two orders
# differ. A name may look like an address.
NAMES = ["alpha", "b", "srv-3", "node_4.example.com", "10.0.0.5:6379"]
NBACKENDS = 5
NKEYS = 5000             # keys written through every pool (>= 5,000)
BATCH = 1000             # SETs per pipelined round trip
SOCK_TIMEOUT = 20.0      # seconds, every socket operation
START_TIMEOUT = 10.0     # seconds for a server to start accepting
# Phase eject and phase unix: a few hashes (not crc32: its 15-bit values put every ketama key on
# one server).
EJECT_HASHES = ["md5", "fnv1a_64", "murmur"]
UNIX_HASHES = ["one_at_a_time", "fnv1a_32", "hsieh"]
DEAD = 2                 # phase eject kills backend 2 (weight 4 of 14, named "srv-3")
EJECT_TIMEOUT = 10.0     # seconds for nutcracker to eject the dead server, all pools together
PROBE = 200              # GETs per probe round (phase eject)


def fail(msg):
    print("compat_nutcracker: " + msg, file=sys.stderr)
    sys.exit(1)


# ---------------------------------------------------------------------------------------------
# Addresses. A backend is (host, port) for TCP or a str, the path of a unix socket.

def addr_text(backend):
    """As written in the config and as chash prints it: host:port, or the socket's path."""
    return backend if isinstance(backend, str) else "%s:%d" % backend


def connect(backend, timeout):
    if isinstance(backend, str):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(backend)
        except OSError:
            s.close()
            raise
        return s
    s = socket.create_connection(backend, timeout=timeout)
    s.settimeout(timeout)
    return s


# ---------------------------------------------------------------------------------------------
# A tiny RESP client: binary-safe, pipelined (send many commands, then read as many replies).

def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class RespError(RuntimeError):
    """A -ERR reply: raised by reply(), returned as a value by replies()."""


class Resp:
    def __init__(self, backend):
        self.sock = connect(backend, SOCK_TIMEOUT)
        self.buf = b""
        self.pos = 0

    def close(self):
        self.sock.close()

    def _fill(self):
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("connection closed by the server")
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0

    def _line(self):
        while True:
            end = self.buf.find(b"\r\n", self.pos)
            if end >= 0:
                line, self.pos = self.buf[self.pos:end], end + 2
                return line
            self._fill()

    def _parse(self):
        """One reply: bytes for +/$, int for :, list for *, None for nil, RespError for -."""
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest
        if kind == b"-":
            return RespError("server error: %r" % rest)
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) - self.pos < n + 2:
                self._fill()
            data, self.pos = self.buf[self.pos:self.pos + n], self.pos + n + 2
            return data
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._parse() for _ in range(n)]
        raise RuntimeError("bad RESP line %r" % line)

    def reply(self):
        """One reply, as _parse(); -ERR raises."""
        r = self._parse()
        if isinstance(r, RespError):
            raise r
        return r

    def expect(self, reply):
        """Reads len(reply) bytes and tells whether they are exactly reply (fast path)."""
        while len(self.buf) - self.pos < len(reply):
            self._fill()
        ok = self.buf[self.pos:self.pos + len(reply)] == reply
        if ok:
            self.pos += len(reply)
        return ok

    def pipeline(self, commands):
        self.sock.sendall(b"".join(commands))
        return [self.reply() for _ in commands]

    def replies(self, commands):
        """As pipeline(), with -ERR replies returned as RespError values."""
        self.sock.sendall(b"".join(commands))
        return [self._parse() for _ in commands]


# ---------------------------------------------------------------------------------------------
# Processes: each child is killed if this script dies (PR_SET_PDEATHSIG), and in main()'s finally.

def _die_with_parent():
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)     # PR_SET_PDEATHSIG


def spawn(argv, log):
    with open(log, "wb") as f:
        return subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)


def accepts(backend):
    try:
        connect(backend, 1.0).close()
        return True
    except OSError:
        return False


def wait_accepting(proc, backends, log):
    deadline = time.monotonic() + START_TIMEOUT
    pending = list(backends)
    while pending:
        if proc.poll() is not None:
            return False
        if time.monotonic() > deadline:
            fail("%s: no listener on %s after %gs; log:\n%s" % (
                os.path.basename(log), addr_text(pending[0]), START_TIMEOUT, tail(log)))
        pending = [a for a in pending if not accepts(a)]
        if pending:
            time.sleep(0.05)
    return True


def redis_argv(redis, d):
    return [redis, "--save", "", "--appendonly", "no", "--databases", "256", "--daemonize", "no",
            "--dir", d]


def start_redis(redis, tmp, procs, port11211):
    """NBACKENDS redis-servers: on 127.0.0.1:<free port>, or on 127.0.0.<x>:11211 (distinct x).
    A server that cannot bind (a race with another program) is replaced by another address.
    The 11211 hosts have different lengths, in an order that is neither sorted by text nor by
    length: twemproxy orders a pool's servers by name, shorter names first (see make_pools).
    Returns the backends and their processes."""
    backends, bprocs = [], []
    first = [200, 9, 30, 101, 7, 42, 5, 123, 66, 3, 250, 11, 150, 8]
    candidates = iter(first + [x for x in range(2, 255) if x not in first])
    for _attempt in range(50):
        if len(backends) == NBACKENDS:
            break
        if port11211:
            host = next((h for h in ("127.0.0.%d" % x for x in candidates)
                         if bindable(h, 11211)), None)
            if host is None:
                fail("cannot bind port 11211 on any of 127.0.0.2..127.0.0.254: the unnamed-"
                     "server-on-11211 pools need 5 of them (is something listening on "
                     "0.0.0.0:11211, e.g. memcached?)")
            port = 11211
        else:
            host, port = "127.0.0.1", free_ports(1)[0]
        d = os.path.join(tmp, "redis-%s-%d" % (host, port))
        os.mkdir(d)
        log = os.path.join(d, "log")
        p = spawn(redis_argv(redis, d) + ["--port", str(port), "--bind", host], log)
        procs.append(p)
        if wait_accepting(p, [(host, port)], log):
            backends.append((host, port))
            bprocs.append(p)
    if len(backends) < NBACKENDS:
        fail("could not start %d redis-servers; last log:\n%s" % (NBACKENDS, tail(log)))
    return backends, bprocs


def start_redis_unix(redis, tmp, procs):
    """NBACKENDS redis-servers listening on unix sockets only (tmp/u0.sock...; tmp is short:
    sun_path holds 107 bytes)."""
    backends = []
    for i in range(NBACKENDS):
        d = os.path.join(tmp, "redis-unix-%d" % i)
        os.mkdir(d)
        path = os.path.join(tmp, "u%d.sock" % i)
        if len(path.encode()) > 100:
            fail("socket path too long for sun_path: %s" % path)
        log = os.path.join(d, "log")
        p = spawn(redis_argv(redis, d) + ["--port", "0", "--unixsocket", path,
                                          "--unixsocketperm", "700"], log)
        procs.append(p)
        if not wait_accepting(p, [path], log):
            fail("redis-server on %s exited with %s; log:\n%s" % (path, p.returncode, tail(log)))
        backends.append(path)
    return backends


# ---------------------------------------------------------------------------------------------
# Keys: deterministic, 1..60 bytes, many with bytes >= 0x80 (twemproxy's hashes sign-extend
# chars), plus hash-tag shapes. Never \0 \t \n \r: the CLI reads lines and prints tab-separated.

ALPHABET = bytes(b for b in range(1, 256) if b not in (0x09, 0x0a, 0x0d))


def make_keys():
    rng = random.Random(20240611)
    keys = dict.fromkeys(bytes([b]) for b in ALPHABET)      # every possible 1-byte key

    def rnd(lo, hi, alphabet=ALPHABET):
        return bytes(rng.choice(alphabet) for _ in range(rng.randint(lo, hi)))

    fixed = [b"{", b"}", b"{}", b"}{", b"{{}}", b"{a}", b"{}{}", b"{}x", b"x{}", b"{unclosed",
             b"unopened}", b"\x80", b"\xff{\xfe}\xfd"]
    keys.update(dict.fromkeys(fixed))
    shapes = [
        lambda: rnd(1, 60),                                                 # any bytes
        lambda: rnd(1, 60, bytes(range(0x80, 0x100))),                      # high bytes only
        lambda: b"user:%d" % rng.randrange(10 ** 6),                        # plain ascii
        lambda: rnd(1, 60, b"abcdefghijklmnopqrstuvwxyz0123456789:_-."),
        lambda: b"{user%d}:%s" % (rng.randrange(40), rnd(0, 20)),           # shared tags
        lambda: b"a{%s}c%s" % (rnd(1, 8), rnd(0, 8)),
        lambda: b"{}%s" % rnd(1, 30),                                       # empty tag
        lambda: b"%s{}%s" % (rnd(0, 10), rnd(0, 10)),
        lambda: b"{unclosed%s" % rnd(0, 30),
        lambda: b"}{%s" % rnd(0, 30),
        lambda: b"%s}%s{%s" % (rnd(0, 8), rnd(0, 8), rnd(0, 8)),
        lambda: b"{%s}%s{%s}" % (rnd(1, 6), rnd(0, 6), rnd(1, 6)),          # first tag counts
        lambda: b"{{%s}}" % rnd(1, 10),
        lambda: b"x{\xc3\xa9t\xe9%s}" % rnd(0, 10, bytes(range(0x80, 0x100))),
    ]
    while len(keys) < NKEYS:
        k = rng.choice(shapes)()[:60]
        if k:
            keys[k] = None
    return list(keys)


# ---------------------------------------------------------------------------------------------
# Pools and the config files shared by nutcracker and chash.
#
# A pool is a dict: name, hash, dist, naming, weights, tag, servers [(backend, weight, name)],
# db (its redis database on every backend), settings (extra config lines), and, once its
# nutcracker is configured, listen (its port).

def pool(name, h, dist, naming, wname, tag, backends, db, settings=()):
    servers = [(b, w, NAMES[i] if naming == "named" else None)
               for i, (b, w) in enumerate(zip(backends, WEIGHTS[wname]))]
    return dict(name=name, hash=h, dist=dist, naming=naming, weights=wname, tag=tag,
                servers=servers, db=db, settings=list(settings))


def make_pools(plain, at11211):
    """Phase main's pools: every hash x distribution x naming x weights x tag."""
    pools, dbs = [], {"plain": 0, "11211": 0}
    for h in HASHES:
        for dist in DISTRIBUTIONS:
            for named in (True, False):
                for wname in WEIGHTS:
                    for tag in (False, True):
                        # Unnamed servers on port 11211 for (equal, tag) and (unequal, no tag),
                        # so that both weights and both tag settings meet both kinds of port.
                        on11211 = not named and (wname == "equal") == tag
                        naming = "named" if named else "unnamed" + ("11211" if on11211 else "")
                        bset = "11211" if on11211 else "plain"
                        pools.append(pool(
                            "%s-%s-%s-%s-%s" % (h, dist, naming, wname, "tag" if tag else "notag"),
                            h, dist, naming, wname, tag, at11211 if on11211 else plain,
                            dbs[bset]))
                        dbs[bset] += 1
    assert max(dbs.values()) <= 256
    return pools


def write_config(path, pools):
    out = []
    for p in pools:
        out += ["%s:" % p["name"],
                "  listen: 127.0.0.1:%d" % p["listen"],
                "  redis: true",
                "  redis_db: %d" % p["db"],
                "  hash: %s" % p["hash"],
                "  distribution: %s" % p["dist"],
                "  server_connections: 1"]
        settings = p["settings"] or ["timeout: 10000", "auto_eject_hosts: false"]
        out += ["  " + s for s in settings]
        if p["tag"]:
            out.append('  hash_tag: "{}"')
        out.append("  servers:")
        for backend, w, name in p["servers"]:
            out.append("   - %s:%d%s" % (addr_text(backend), w, " " + name if name else ""))
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def start_nutcracker(nutcracker, tmp, procs, label, pools):
    """Writes tmp/LABEL.yml for pools (giving each a listen port), checks it with `nutcracker -t`
    and starts a nutcracker on it. Returns the config's path."""
    config = os.path.join(tmp, label + ".yml")
    stats_port, *listen = free_ports(len(pools) + 1)
    for p, lport in zip(pools, listen):
        p["listen"] = lport
    write_config(config, pools)
    t = subprocess.run([nutcracker, "-t", "-c", config], capture_output=True, timeout=30)
    if t.returncode != 0:
        fail("nutcracker -t rejects %s:\n%s" % (config, t.stderr.decode("utf-8", "replace")))
    log = os.path.join(tmp, label + ".log")
    nc = spawn([nutcracker, "-c", config, "-s", str(stats_port), "-a", "127.0.0.1",
                "-p", os.path.join(tmp, label + ".pid"), "-o", log, "-v", "4"], log)
    procs.append(nc)
    if not wait_accepting(nc, [("127.0.0.1", p) for p in listen], log):
        fail("nutcracker (%s) exited with %s; log:\n%s" % (label, nc.returncode, tail(log)))
    return config


# ---------------------------------------------------------------------------------------------
# Writing through nutcracker, reading back from the backends.

def make_batches(keys):
    """The SETs of every key, encoded once for all pools: [(blob, number of commands)]."""
    return [(b"".join(encode(b"SET", k, b"1") for k in keys[i:i + BATCH]),
             len(keys[i:i + BATCH])) for i in range(0, len(keys), BATCH)]


def write_through(p, batches):
    """Sends every batch of SETs and expects +OK for each; an error string otherwise."""
    conn = Resp(("127.0.0.1", p["listen"]))
    try:
        for blob, n in batches:
            conn.sock.sendall(blob)
            if not conn.expect(b"+OK\r\n" * n):
                bad = [r for r in (conn._parse() for _ in range(n)) if r != b"OK"]
                return "pool %s: SET answered %r" % (p["name"], bad[0] if bad else "?")
        return None
    except (OSError, RuntimeError) as e:
        return "pool %s: %s" % (p["name"], e)
    finally:
        conn.close()


def write_all(pools, batches):
    # Four pools at a time, so that nutcracker and the backends all have work.
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as ex:
        errors = [e for e in ex.map(lambda p: write_through(p, batches), pools) if e]
    if errors:
        fail(errors[0])


def read_back(backend, dbs):
    """{db: [keys]} for the databases dbs of one backend."""
    conn = Resp(backend)
    try:
        cmds = []
        for db in dbs:
            cmds += [encode(b"SELECT", db), encode(b"KEYS", b"*")]
        replies = conn.pipeline(cmds)
        return {db: replies[2 * i + 1] for i, db in enumerate(dbs)}
    finally:
        conn.close()


def read_all(pools):
    """{backend: {db: [keys]}} over the pools' backends, in the pools' databases."""
    dbs = {}
    for p in pools:
        for backend, _, _ in p["servers"]:
            dbs.setdefault(backend, set()).add(p["db"])
    return {b: read_back(b, sorted(dbs[b])) for b in dbs}


def placements(p, held, keys, key_index):
    """For each key, the index in p["servers"] of the backend that holds it; fails unless the
    backends hold exactly the keys, each once."""
    where = [None] * len(keys)
    for si, (backend, _, _) in enumerate(p["servers"]):
        for k in held[backend][p["db"]]:
            i = key_index.get(k)
            if i is None or where[i] is not None:
                fail("pool %s: %s key %s on %s" % (
                    p["name"], "unexpected" if i is None else "duplicated", k.hex(),
                    server_str(p, si)))
            where[i] = si
    lost = [keys[i].hex() for i, w in enumerate(where) if w is None]
    if lost:        # i.e. the backends do not hold exactly the keys written
        fail("pool %s: %d keys written but on no backend, e.g. %s" % (
            p["name"], len(lost), lost[0]))
    # twemproxy's crc32 is 15 bits (libmemcached's), far below the ketama points (0..2^32):
    # every key goes to the server of the lowest point. Elsewhere, keys on a single backend
    # would mean the pool, or this harness, is broken.
    if len(set(where)) < 2 and (p["hash"], p["dist"]) != ("crc32", "ketama"):
        fail("pool %s: every key on one backend; the test would prove nothing" % p["name"])
    return where


# ---------------------------------------------------------------------------------------------
# chash's answers, and the comparison.

def run_chash(chash, config, p, keys):
    """`chash lookup --config CONFIG --pool NAME -` on keys: the CompletedProcess, or an error."""
    # In an ASan build, skip the leak scan at exit: it is other tests' job, and costs ~1/3 of
    # the time of each run.
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "detect_leaks=0"]))
    try:
        r = subprocess.run([chash, "lookup", "--config", config, "--pool", p["name"], "-"],
                           input=b"".join(k + b"\n" for k in keys), capture_output=True,
                           timeout=120, env=env)
    except subprocess.TimeoutExpired:
        return "chash timed out"
    if r.returncode != 0:
        return "chash exited %d: %s" % (r.returncode, r.stderr.decode("utf-8", "replace")[:300])
    return r



def lookup_escape(key):
    """KEY as `chash lookup`'s plain output prints it (chash(1)): a backslash, tab, newline and
    carriage return as \\\\ \\t \\n \\r, any other control byte and DEL as \\xHH."""
    named = {0x5c: b"\\\\", 0x09: b"\\t", 0x0a: b"\\n", 0x0d: b"\\r"}
    return b"".join(named.get(c) or (b"\\x%02x" % c if c < 0x20 or c == 0x7f else bytes([c]))
                    for c in key)


def owners(p, keys, stdout):
    """The server index chash names for each key, from its output, or an error string."""
    # Expected: KEY<TAB>addr (host:port, or a unix socket's path), plus <TAB>name in a pool with
    # named servers.
    index = {}
    for i, (backend, _, name) in enumerate(p["servers"]):
        index[addr_text(backend).encode() + (b"\t" + name.encode() if name else b"")] = i
    lines = stdout.split(b"\n")
    if lines[-1] != b"" or len(lines) - 1 != len(keys):
        return "chash printed %d lines for %d keys" % (len(lines) - 1, len(keys))
    answer = []
    for k, line in zip(keys, lines):
        key, _, server = line.partition(b"\t")
        if key != lookup_escape(k) or server not in index:
            return "unexpected chash line %r for key %s" % (line[:120], k.hex())
        answer.append(index[server])
    return answer


def ask_chash(chash, config, p, keys):
    """The server index chash names for each key, or an error string."""
    r = run_chash(chash, config, p, keys)
    return r if isinstance(r, str) else owners(p, keys, r.stdout)


def ask_all(chash, config, pools, keys):
    # Two at a time: 2 cores.
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:
        return list(ex.map(lambda p: ask_chash(chash, config, p, keys), pools))


def compare(truth, answer):
    """Indices of the keys where chash's answer differs from where nutcracker put the key."""
    return [i for i, (t, a) in enumerate(zip(truth, answer)) if t != a]


def check_pools(chash, config, pools, keys, truth):
    """chash on every pool of config against truth {pool name: placements}: the failures, as
    [(pool, indices of the keys that differ or None, chash's answer or error)]."""
    failed = []
    for p, answer in zip(pools, ask_all(chash, config, pools, keys)):
        where = truth[p["name"]]
        # Honesty: the comparator must see a deliberately wrong answer as wrong everywhere.
        shifted = [(w + 1) % len(p["servers"]) for w in where]
        if len(compare(where, shifted)) != len(keys) or compare(where, where):
            fail("the comparator is broken")
        if isinstance(answer, str):
            failed.append((p, None, answer))
            continue
        bad = compare(where, answer)
        if bad:
            failed.append((p, bad, answer))
    return failed


def server_str(p, i):
    backend, _, name = p["servers"][i]
    return addr_text(backend) + (" " + name if name else "")


def report_failures(failed, keys, truth, config_of):
    print("%-14s %-7s %-13s %-8s %-6s %6s %8s" % (
        "hash", "dist", "naming", "weights", "tag", "keys", "matches"))
    for p, bad, _ in failed:
        print("%-14s %-7s %-13s %-8s %-6s %6d %8s" % (
            p["hash"], p["dist"], p["naming"], p["weights"], "{}" if p["tag"] else "-",
            len(keys), "-" if bad is None else len(keys) - len(bad)))
    for p, bad, answer in failed[:6]:
        print("\npool %s (%s):" % (p["name"], config_of[p["name"]]))
        if bad is None:
            print("  " + answer)
            continue
        for i in bad[:4]:
            print("  key %-40s nutcracker %-28s chash %s" % (
                keys[i].hex(), server_str(p, truth[p["name"]][i]), server_str(p, answer[i])))
    if len(failed) > 6:
        print("\n(first keys shown for 6 of %d failing pools)" % len(failed))


# ---------------------------------------------------------------------------------------------
# The phases. main, eject and unix return (pools checked, failures as check_pools(), {pool name:
# config file chash read}, {pool name: placements}, a note for the summary).

def phase_main(redis, nutcracker, chash, tmp, procs, keys, batches):
    """Every hash x distribution x naming x weights x hash_tag: chash names the backend that
    nutcracker wrote each key to, for every key of 192 pools (10 TCP backends, half on 11211).
    Also returns the plain backends and their first database unused (phase random uses them)."""
    plain, _ = start_redis(redis, tmp, procs, port11211=False)
    at11211, _ = start_redis(redis, tmp, procs, port11211=True)
    pools = make_pools(plain, at11211)
    config = start_nutcracker(nutcracker, tmp, procs, "main", pools)
    write_all(pools, batches)
    held = read_all(pools)
    key_index = {k: i for i, k in enumerate(keys)}
    truth = {p["name"]: placements(p, held, keys, key_index) for p in pools}
    failed = check_pools(chash, config, pools, keys, truth)
    db0 = 1 + max(p["db"] for p in pools if p["servers"][0][0] == plain[0])
    return (pools, failed, {p["name"]: config for p in pools}, truth, ""), (plain, db0)


def phase_eject(redis, nutcracker, chash, tmp, procs, keys, batches):
    """Only live servers count. With auto_eject_hosts, twemproxy rebuilds its continuum over the
    live servers: ketama's points per server come from the live servers' count and total weight,
    modula's slots cover the live servers only. One of 5 backends is killed; once nutcracker has
    ejected it from every pool, the keys written must land where chash puts them given the
    config without the dead server's line; and some keys the full config puts on the dead
    server must have moved (else the phase proves nothing)."""
    backends, bprocs = start_redis(redis, tmp, procs, port11211=False)
    settings = ["timeout: 5000", "auto_eject_hosts: true", "server_failure_limit: 1",
                "server_retry_timeout: 600000"]       # the dead server stays out for 10 minutes
    pools = []
    for h in EJECT_HASHES:
        for dist in DISTRIBUTIONS:
            for naming in ("named", "unnamed"):
                pools.append(pool("eject-%s-%s-%s" % (h, dist, naming), h, dist, naming,
                                  "unequal", False, backends, len(pools), settings))
    config = start_nutcracker(nutcracker, tmp, procs, "eject", pools)

    # Where the full config puts each key (chash agrees with nutcracker there: phase main).
    full = ask_all(chash, config, pools, keys)
    for p, answer in zip(pools, full):
        if isinstance(answer, str):
            fail("pool %s, full config: %s" % (p["name"], answer))

    dead = backends[DEAD]
    bprocs[DEAD].kill()
    bprocs[DEAD].wait(timeout=10)
    if accepts(dead):
        fail("the killed redis-server on %s still accepts connections" % addr_text(dead))

    # Requests for keys on the dead server fail until nutcracker ejects it (after
    # server_failure_limit failures). Probe each pool with GETs of fresh keys until a round of
    # PROBE keys, after errors, sees none: with 4/14 of the weight on the dead server, a round
    # with no key for it is next to impossible before the ejection.
    deadline = time.monotonic() + EJECT_TIMEOUT
    nprobes = 0
    for p in pools:
        seen = 0
        conn = Resp(("127.0.0.1", p["listen"]))
        try:
            while True:
                if time.monotonic() > deadline:
                    fail("pool %s: dead server not ejected after %gs of probes (%d errors); "
                         "log:\n%s" % (p["name"], EJECT_TIMEOUT, seen,
                                       tail(os.path.join(tmp, "eject.log"))))
                cmds = [encode(b"GET", b"probe:%d" % (nprobes + i)) for i in range(PROBE)]
                nprobes += PROBE
                try:
                    errors = sum(isinstance(r, RespError) for r in conn.replies(cmds))
                except (OSError, RuntimeError) as e:
                    fail("pool %s: probing for the ejection: %s" % (p["name"], e))
                seen += errors
                if seen and not errors:
                    break
        finally:
            conn.close()

    # Write, read back from the live backends, and check against the reduced config.
    write_all(pools, batches)
    dead_line = "- %s:" % addr_text(dead)
    reduced = os.path.join(tmp, "eject-live.yml")
    with open(config) as f:
        lines = f.readlines()
    kept = [line for line in lines if not line.strip().startswith(dead_line)]
    if len(lines) - len(kept) != len(pools):
        fail("%s: %d lines of the dead server for %d pools" % (
            config, len(lines) - len(kept), len(pools)))
    with open(reduced, "w") as g:
        g.writelines(kept)
    live_pools = [dict(p, servers=[s for s in p["servers"] if s[0] != dead]) for p in pools]
    held = read_all(live_pools)
    key_index = {k: i for i, k in enumerate(keys)}
    truth = {p["name"]: placements(p, held, keys, key_index) for p in live_pools}
    # Keys moved off the dead server, and between live servers: the rebuilt continuum differs
    # from the old one less the dead server's points (modula: slots; ketama: points per server).
    moved = shifted = 0
    for p, lp, answer in zip(pools, live_pools, full):
        before = [p["servers"][a][0] for a in answer]
        after = [lp["servers"][t][0] for t in truth[p["name"]]]
        on_dead = sum(b == dead for b in before)
        between = sum(b != dead and b != a for b, a in zip(before, after))
        if not on_dead or not between:
            fail("pool %s: %d keys moved off the dead server %s, %d between live servers: the "
                 "phase would prove little" % (p["name"], on_dead, addr_text(dead), between))
        moved += on_dead
        shifted += between
    # Every SET answered +OK and every key is on a live backend: none went to the dead one.
    failed = check_pools(chash, reduced, live_pools, keys, truth)
    return (live_pools, failed, {p["name"]: reduced for p in pools}, truth,
            "%d keys moved off the dead server, %d between live ones; %d probe GETs" % (
                moved, shifted, nprobes))


def phase_unix(redis, nutcracker, chash, tmp, procs, keys, batches):
    """Unix-socket servers: twemproxy names an unnamed socket server "/path:" (the path and the
    separator of the port it has not), and hashes that name for ketama; it sorts a pool's
    servers by name for modula. chash names the backend of every key (its socket's path)."""
    backends = start_redis_unix(redis, tmp, procs)
    pools = []
    for h in UNIX_HASHES:
        for dist in DISTRIBUTIONS:
            for naming, wname in (("named", "unequal"), ("unnamed", "unequal"),
                                  ("unnamed", "equal")):
                pools.append(pool("unix-%s-%s-%s-%s" % (h, dist, naming, wname), h, dist,
                                  naming, wname, False, backends, 0))
    config = start_nutcracker(nutcracker, tmp, procs, "unix", pools)
    # nutcracker 0.5.0 ignores redis_db on unix sockets: their connect() completes at once, and
    # only a connect that completes later (TCP) runs the post-connect step that sends SELECT.
    # So every pool uses database 0, one pool at a time, emptied after each.
    key_index = {k: i for i, k in enumerate(keys)}
    truth = {}
    for p in pools:
        write_all([p], batches)
        truth[p["name"]] = placements(p, read_all([p]), keys, key_index)
        for b in backends:
            conn = Resp(b)
            try:
                conn.pipeline([encode(b"FLUSHALL")])
            finally:
                conn.close()
    failed = check_pools(chash, config, pools, keys, truth)
    return pools, failed, {p["name"]: config for p in pools}, truth, ""


def phase_random(nutcracker, chash, tmp, procs, keys, batches, backends, db0):
    """distribution random: nutcracker sends each request to a random live server, which chash
    cannot predict. Checks only that nutcracker spreads the keys over every backend, and that
    `chash lookup --config` exits 0, warns about "random" on stderr and names only servers of
    the pool. backends: 5 running TCP backends, in databases db0, db0 + 1."""
    pools = [pool("random-%s" % naming, "fnv1a_64", "random", naming, "equal", False, backends,
                  db0 + i) for i, naming in enumerate(("named", "unnamed"))]
    config = start_nutcracker(nutcracker, tmp, procs, "random", pools)
    write_all(pools, batches)
    held = read_all(pools)
    key_index = {k: i for i, k in enumerate(keys)}
    spread = []
    for p in pools:
        where = placements(p, held, keys, key_index)
        counts = [where.count(i) for i in range(len(p["servers"]))]
        if min(counts) == 0:
            fail("pool %s: nutcracker put no key on %s (keys per server: %s)" % (
                p["name"], server_str(p, counts.index(0)), counts))
        spread.append("/".join(map(str, counts)))
        r = run_chash(chash, config, p, keys)
        if isinstance(r, str):
            fail("pool %s: %s" % (p["name"], r))
        if b"random" not in r.stderr:
            fail("pool %s: chash gave no warning about random on stderr (got %r)" % (
                p["name"], r.stderr[:300]))
        answer = owners(p, keys, r.stdout)
        if isinstance(answer, str):
            fail("pool %s: %s" % (p["name"], answer))
    return pools, "keys per backend " + ", ".join(spread)


def main():
    args = [a for a in sys.argv[1:] if a != "--keep"]
    keep = "--keep" in sys.argv[1:]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    chash = os.path.abspath(args[0])
    nutcracker = shutil.which("nutcracker") or shutil.which("nutcracker", path="/usr/sbin")
    redis = shutil.which("redis-server") or shutil.which("redis-server", path="/usr/sbin")
    if not (nutcracker and redis):
        missing = " and ".join(n for n, p in (("nutcracker", nutcracker),
                                              ("redis-server", redis)) if not p)
        print("compat_nutcracker: %s not found (Debian: apt-get install nutcracker redis-server; "
              "scripts/bootstrap installs them)%s" % (
                  missing, "" if os.environ.get("CI") else ": skipped"), file=sys.stderr)
        return 1 if os.environ.get("CI") else 77

    # Signals become exceptions, so the finally below always kills what was started.
    def on_signal(signum, _frame):
        raise SystemExit("compat_nutcracker: killed by signal %d" % signum)
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, on_signal)
    # nutcracker holds ~1,000 server connections and 192 listeners: raise the fd limit if we can.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 8192 if hard == resource.RLIM_INFINITY else min(hard, 8192)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))

    t0 = time.monotonic()
    # Unix socket paths live in the temp dir: keep it short (sun_path holds 107 bytes).
    tmp = tempfile.mkdtemp(prefix="chash-nutcracker-",
                           dir="/tmp" if len(tempfile.gettempdir()) > 40 else None)
    procs = []
    try:
        keys = make_keys()
        batches = make_batches(keys)
        checked, failed, config_of, truth, times = [], [], {}, {}, []

        def run(label, result, t):
            pools, f, configs, tr, note = result
            checked.extend(pools)
            failed.extend(f)
            config_of.update(configs)
            truth.update(tr)
            times.append("%s %.1f" % (label, time.monotonic() - t))
            print("compat_nutcracker: %s: %d/%d pools agree%s" % (
                label, len(pools) - len(f), len(pools), "; " + note if note else ""))

        t = time.monotonic()
        result, (plain, db0) = phase_main(redis, nutcracker, chash, tmp, procs, keys, batches)
        run("main", result, t)
        t = time.monotonic()
        run("eject", phase_eject(redis, nutcracker, chash, tmp, procs, keys, batches), t)
        t = time.monotonic()
        run("unix", phase_unix(redis, nutcracker, chash, tmp, procs, keys, batches), t)
        t = time.monotonic()
        random_pools, spread = phase_random(nutcracker, chash, tmp, procs, keys, batches,
                                            plain, db0)
        times.append("random %.1f" % (time.monotonic() - t))
        print("compat_nutcracker: random: %d pools spread over every backend; %s" % (
            len(random_pools), spread))

        if failed:
            report_failures(failed, keys, truth, config_of)
            if not keep:
                print("(run with --keep to keep the configs and the logs)")
        nwritten = len(keys) * (len(checked) + len(random_pools))
        print("compat_nutcracker: %d/%d pools agree, %d keys each (%d written through "
              "nutcracker, %d random pools checked apart); %.1fs (%s)%s" % (
                  len(checked) - len(failed), len(checked), len(keys), nwritten,
                  len(random_pools), time.monotonic() - t0, ", ".join(times),
                  "" if not keep else "; files in " + tmp))
        return 1 if failed else 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

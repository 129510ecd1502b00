#!/usr/bin/python3
"""End-to-end placement check against the real twemproxy (nutcracker 0.5.0).

For every twemproxy hash x distribution (ketama, modula) x servers (named, unnamed) x weights
(equal, unequal) x hash_tag ("{}", none), one pool of 5 real redis-server backends: 192 pools.
Half the unnamed pools have their servers on port 11211, which twemproxy names by host alone
(127.0.0.2, not 127.0.0.2:11211); the others on ordinary ports. Every key is written through
nutcracker; the backends are then asked which of them holds which key, and
`chash lookup --config FILE --pool NAME -`, given the same config file, must name that backend
for 100% of the keys.

Phases (see main()):
  1. start 10 redis-servers: 5 on 127.0.0.1:<free port>, 5 on 127.0.0.<x>:11211;
  2. write one YAML file with all pools (each in its own redis database, `redis_db`) and start
     one nutcracker on it;
  3. SET every key through each pool's listen port (pipelined);
  4. read back: on every backend, for every database, SELECT + KEYS *;
  5. ask chash for every pool, compare, and check the harness's own honesty.

Usage: nutcracker_compat.py CHASH_BINARY [--keep]   (--keep: leave the temp dir for a look)
Exit: 0 when chash agrees on every key of every pool; 1 otherwise; 77 when nutcracker or
redis-server is missing and CI is unset (1 when CI is set). Only loopback addresses are used;
every socket operation has a timeout and every process started is killed on the way out.
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


def fail(msg):
    print("compat_nutcracker: " + msg, file=sys.stderr)
    sys.exit(1)


# ---------------------------------------------------------------------------------------------
# A tiny RESP client: binary-safe, pipelined (send many commands, then read as many replies).

def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Resp:
    def __init__(self, host, port):
        self.sock = socket.create_connection((host, port), timeout=SOCK_TIMEOUT)
        self.sock.settimeout(SOCK_TIMEOUT)
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

    def reply(self):
        """One reply: bytes for +/$, int for :, list for *, None for nil; -ERR raises."""
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest
        if kind == b"-":
            raise RuntimeError("server error: %r" % rest)
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
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise RuntimeError("bad RESP line %r" % line)

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


# ---------------------------------------------------------------------------------------------
# Processes: each child is killed if this script dies (PR_SET_PDEATHSIG), and in main()'s finally.

def _die_with_parent():
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)     # PR_SET_PDEATHSIG


def spawn(argv, log):
    with open(log, "wb") as f:
        return subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)


def accepts(host, port):
    try:
        socket.create_connection((host, port), timeout=1.0).close()
        return True
    except OSError:
        return False


def wait_accepting(proc, addrs, log):
    deadline = time.monotonic() + START_TIMEOUT
    pending = list(addrs)
    while pending:
        if proc.poll() is not None:
            return False
        if time.monotonic() > deadline:
            fail("%s: no listener on %s after %gs; log:\n%s" % (
                os.path.basename(log), pending[0], START_TIMEOUT, tail(log)))
        pending = [a for a in pending if not accepts(*a)]
        if pending:
            time.sleep(0.05)
    return True


def tail(path, n=20):
    try:
        with open(path, "rb") as f:
            return b"\n".join(f.read().splitlines()[-n:]).decode("utf-8", "replace")
    except OSError:
        return ""


def free_ports(n):
    """n distinct free TCP ports on 127.0.0.1 (all held at once so they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def bindable(host, port):
    """Whether nothing listens on host:port (connections of a previous run in TIME_WAIT do not
    count: redis-server binds with SO_REUSEADDR too)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((host, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def start_redis(redis, tmp, procs, port11211):
    """NBACKENDS redis-servers: on 127.0.0.1:<free port>, or on 127.0.0.<x>:11211 (distinct x).
    A server that cannot bind (a race with another program) is replaced by another address.
    The 11211 hosts have different lengths, in an order that is neither sorted by text nor by
    length: twemproxy orders a pool's servers by name, shorter names first (see make_pools)."""
    backends = []
    first = [200, 9, 30, 101, 7, 42, 5, 123, 66, 3, 250, 11, 150, 8]
    candidates = iter(first + [x for x in range(2, 255) if x not in first])
    for _attempt in range(50):
        if len(backends) == NBACKENDS:
            return backends
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
        p = spawn([redis, "--port", str(port), "--bind", host, "--save", "", "--appendonly",
                   "no", "--databases", "256", "--daemonize", "no", "--dir", d], log)
        procs.append(p)
        if wait_accepting(p, [(host, port)], log):
            backends.append((host, port))
    if len(backends) < NBACKENDS:
        fail("could not start %d redis-servers; last log:\n%s" % (NBACKENDS, tail(log)))
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
# Pools and the config file shared by nutcracker and chash.

def make_pools(plain, at11211):
    """One dict per pool: name, settings, servers [(host, port, weight, name)], db."""
    pools, dbs = [], {"plain": 0, "11211": 0}
    for h in HASHES:
        for dist in DISTRIBUTIONS:
            for named in (True, False):
                for wname, weights in WEIGHTS.items():
                    for tag in (False, True):
                        # Unnamed servers on port 11211 for (equal, tag) and (unequal, no tag),
                        # so that both weights and both tag settings meet both kinds of port.
                        on11211 = not named and (wname == "equal") == tag
                        naming = "named" if named else "unnamed" + ("11211" if on11211 else "")
                        bset = "11211" if on11211 else "plain"
                        backends = at11211 if bset == "11211" else plain
                        servers = [(host, port, w, NAMES[i] if naming == "named" else None)
                                   for i, ((host, port), w) in enumerate(zip(backends, weights))]
                        pools.append(dict(
                            name="%s-%s-%s-%s-%s" % (h, dist, naming, wname,
                                                     "tag" if tag else "notag"),
                            hash=h, dist=dist, naming=naming, weights=wname, tag=tag,
                            servers=servers, bset=bset, db=dbs[bset]))
                        dbs[bset] += 1
    assert max(dbs.values()) <= 256
    return pools


def write_config(path, pools, listen_ports):
    out = []
    for pool, lport in zip(pools, listen_ports):
        pool["listen"] = lport
        out += ["%s:" % pool["name"],
                "  listen: 127.0.0.1:%d" % lport,
                "  redis: true",
                "  redis_db: %d" % pool["db"],
                "  hash: %s" % pool["hash"],
                "  distribution: %s" % pool["dist"],
                "  timeout: 10000",
                "  auto_eject_hosts: false",
                "  server_connections: 1"]
        if pool["tag"]:
            out.append('  hash_tag: "{}"')
        out.append("  servers:")
        for host, port, w, name in pool["servers"]:
            out.append("   - %s:%d:%d%s" % (host, port, w, " " + name if name else ""))
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


# ---------------------------------------------------------------------------------------------
# Phases 3 and 4: write through nutcracker, read back from the backends.

def write_through(pool, batches):
    """Sends every batch of SETs (encoded once for all pools) and expects +OK for each."""
    conn = Resp("127.0.0.1", pool["listen"])
    try:
        for blob, n in batches:
            conn.sock.sendall(blob)
            if not conn.expect(b"+OK\r\n" * n):
                bad = [r for r in (conn.reply() for _ in range(n)) if r != b"OK"]
                return "pool %s: SET answered %r" % (pool["name"], bad[0] if bad else "?")
        return None
    except (OSError, RuntimeError) as e:
        return "pool %s: %s" % (pool["name"], e)
    finally:
        conn.close()


def read_back(backend, ndbs):
    """{db: [keys]} for databases 0..ndbs-1 of one backend."""
    conn = Resp(*backend)
    try:
        cmds = []
        for db in range(ndbs):
            cmds += [encode(b"SELECT", db), encode(b"KEYS", b"*")]
        replies = conn.pipeline(cmds)
        return {db: replies[2 * db + 1] for db in range(ndbs)}
    finally:
        conn.close()


# ---------------------------------------------------------------------------------------------
# Phase 5: chash's answers, and the comparison.

def ask_chash(chash, config, pool, keys):
    """The backend index chash names for each key, or an error string."""
    # In an ASan build, skip the leak scan at exit: it is other tests' job, and costs ~1/3 of
    # the time of each of the 192 runs.
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "detect_leaks=0"]))
    try:
        r = subprocess.run([chash, "lookup", "--config", config, "--pool", pool["name"], "-"],
                           input=b"".join(k + b"\n" for k in keys), capture_output=True,
                           timeout=120, env=env)
    except subprocess.TimeoutExpired:
        return "chash timed out"
    if r.returncode != 0:
        return "chash exited %d: %s" % (r.returncode, r.stderr.decode("utf-8", "replace")[:300])
    # Expected: KEY<TAB>host:port, plus <TAB>name in a pool with named servers.
    index = {}
    for i, (h, p, _, name) in enumerate(pool["servers"]):
        index[b"%s:%d" % (h.encode(), p) + (b"\t" + name.encode() if name else b"")] = i
    lines = r.stdout.split(b"\n")
    if lines[-1] != b"" or len(lines) - 1 != len(keys):
        return "chash printed %d lines for %d keys" % (len(lines) - 1, len(keys))
    answer = []
    for k, line in zip(keys, lines):
        key, _, server = line.partition(b"\t")
        if key != k or server not in index:
            return "unexpected chash line %r for key %s" % (line[:120], k.hex())
        answer.append(index[server])
    return answer


def compare(truth, answer):
    """Indices of the keys where chash's answer differs from where nutcracker put the key."""
    return [i for i, (t, a) in enumerate(zip(truth, answer)) if t != a]


def server_str(pool, i):
    h, p, _, name = pool["servers"][i]
    return "%s:%d%s" % (h, p, " " + name if name else "")


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
    tmp = tempfile.mkdtemp(prefix="chash-nutcracker-")
    procs = []
    try:
        # 1. Backends.
        plain = start_redis(redis, tmp, procs, port11211=False)
        at11211 = start_redis(redis, tmp, procs, port11211=True)
        backends = {"plain": plain, "11211": at11211}

        # 2. One nutcracker serving every pool, from the config chash will read too.
        pools = make_pools(plain, at11211)
        config = os.path.join(tmp, "pools.yml")
        stats_port, *listen = free_ports(len(pools) + 1)
        write_config(config, pools, listen)
        t = subprocess.run([nutcracker, "-t", "-c", config], capture_output=True, timeout=30)
        if t.returncode != 0:
            fail("nutcracker -t rejects the config:\n" + t.stderr.decode("utf-8", "replace"))
        log = os.path.join(tmp, "nutcracker.log")
        nc = spawn([nutcracker, "-c", config, "-s", str(stats_port), "-a", "127.0.0.1",
                    "-p", os.path.join(tmp, "nutcracker.pid"), "-o", log, "-v", "4"], log)
        procs.append(nc)
        if not wait_accepting(nc, [("127.0.0.1", p) for p in listen], log):
            fail("nutcracker exited with %s; log:\n%s" % (nc.returncode, tail(log)))

        # 3. Write every key through every pool.
        # Four pools at a time, so that nutcracker and the backends all have work.
        keys = make_keys()
        batches = [(b"".join(encode(b"SET", k, b"1") for k in keys[i:i + BATCH]),
                    len(keys[i:i + BATCH])) for i in range(0, len(keys), BATCH)]
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as ex:
            errors = [e for e in ex.map(lambda p: write_through(p, batches), pools) if e]
        if errors:
            fail(errors[0])
        t_write = time.monotonic()

        # 4. Read back which backend holds which key, in each pool's database.
        ndbs = {b: 1 + max(p["db"] for p in pools if p["bset"] == b) for b in backends}
        held = {b: [read_back(be, ndbs[b]) for be in bes] for b, bes in backends.items()}
        key_index = {k: i for i, k in enumerate(keys)}
        truth = {}
        for pool in pools:
            where = [None] * len(keys)
            for bi, dbs in enumerate(held[pool["bset"]]):
                for k in dbs[pool["db"]]:
                    i = key_index.get(k)
                    if i is None or where[i] is not None:
                        fail("pool %s: %s key %s on %s" % (
                            pool["name"], "unexpected" if i is None else "duplicated",
                            k.hex(), server_str(pool, bi)))
                    where[i] = bi
            lost = [keys[i].hex() for i, w in enumerate(where) if w is None]
            if lost:        # i.e. the backends do not hold exactly the keys written
                fail("pool %s: %d keys written but on no backend, e.g. %s" % (
                    pool["name"], len(lost), lost[0]))
            # twemproxy's crc32 is 15 bits (libmemcached's), far below the ketama points
            # (0..2^32): every key goes to the server of the lowest point. Elsewhere, keys on a
            # single backend would mean the pool, or this harness, is broken.
            if len(set(where)) < 2 and (pool["hash"], pool["dist"]) != ("crc32", "ketama"):
                fail("pool %s: every key on one backend; the test would prove nothing"
                     % pool["name"])
            truth[pool["name"]] = where
        t_read = time.monotonic()

        # 5. chash's answers (two at a time: 2 cores), and the comparison.
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:
            answers = list(ex.map(lambda p: ask_chash(chash, config, p, keys), pools))
        failed = []
        for pool, answer in zip(pools, answers):
            where = truth[pool["name"]]
            # Honesty: the comparator must see a deliberately wrong answer as wrong everywhere.
            shifted = [(w + 1) % len(pool["servers"]) for w in where]
            if len(compare(where, shifted)) != len(keys) or compare(where, where):
                fail("the comparator is broken")
            if isinstance(answer, str):
                failed.append((pool, None, answer))
                continue
            bad = compare(where, answer)
            if bad:
                failed.append((pool, bad, answer))

        if failed:
            print("%-14s %-7s %-13s %-8s %-6s %6s %8s" % (
                "hash", "dist", "naming", "weights", "tag", "keys", "matches"))
            for pool, bad, _ in failed:
                print("%-14s %-7s %-13s %-8s %-6s %6d %8s" % (
                    pool["hash"], pool["dist"], pool["naming"], pool["weights"],
                    "{}" if pool["tag"] else "-", len(keys),
                    "-" if bad is None else len(keys) - len(bad)))
            for pool, bad, answer in failed[:6]:
                print("\npool %s:" % pool["name"])
                if bad is None:
                    print("  " + answer)
                    continue
                for i in bad[:4]:
                    print("  key %-40s nutcracker %-28s chash %s" % (
                        keys[i].hex(), server_str(pool, truth[pool["name"]][i]),
                        server_str(pool, answer[i])))
            if len(failed) > 6:
                print("\n(first keys shown for 6 of %d failing pools)" % len(failed))
            if not keep:
                print("(run with --keep to keep the config and the logs)")
        t_end = time.monotonic()
        print("compat_nutcracker: %d/%d pools agree, %d keys each (%d written through "
              "nutcracker); %.1fs (write %.1f, read %.1f, chash %.1f)%s" % (
                  len(pools) - len(failed), len(pools), len(keys), len(keys) * len(pools),
                  t_end - t0, t_write - t0, t_read - t_write, t_end - t_read,
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

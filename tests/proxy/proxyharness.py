# SPDX-License-Identifier: Apache-2.0
"""Shared plumbing of the chash-proxy tests (tests/proxy/test_*.py).

Real redis-servers on free loopback ports, chash-proxy (and, as an oracle, nutcracker) on
generated twemproxy configs, in a temp dir; a tiny pipelined RESP client; every process
started is stopped on the way out (finally, atexit, SIGTERM/SIGINT/SIGHUP handlers, and
PR_SET_PDEATHSIG should this script be SIGKILLed, e.g. by ctest's TIMEOUT). Every socket
operation has a timeout and every wait a deadline.

chash-proxy is stopped with SIGTERM: it must exit by itself within STOP_TIMEOUT, and its stderr
must not hold a sanitizer report (the test build has ASan + UBSan; LeakSanitizer runs at exit).

A missing program (redis-server, redis-cli, nutcracker) makes a test skip (exit 77), or fail
when the environment variable CI is set (DESIGN.md).

A test script's entry point is run_test(body, programs=..., ...): it reads the binaries'
paths from the command line, requires the programs, makes the temp dir and runs body(t) with
them (exit 0 pass, 1 fail, 77 skip). A test waits for the system to reach a state through
wait_until / poll_until (a condition polled up to a deadline: a stats field, a log line, a
reply, a process state), never through a fixed sleep; a sleep a test keeps is a duration it
sets (how long a fault lasts, how long something must not happen), named as such.
"""
import argparse
import atexit
import ctypes
import importlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from loopback import bindable, free_ports, tail  # noqa: E402,F401 (the tests import them from here)

SOCK_TIMEOUT = 10.0       # seconds, every socket operation unless a test says otherwise
WAIT_TIMEOUT = 15.0       # seconds for the proxy to reach a state a test waits for (ASan, load)
POLL = 0.05               # seconds between two looks at a state a test waits for
START_TIMEOUT = 15.0      # seconds for a server to accept connections (ASan start-up is slow)
STOP_TIMEOUT = 15.0       # seconds for chash-proxy to exit after SIGTERM (leak scan included)
SANITIZER_MARKS = (b"ERROR: AddressSanitizer", b"ERROR: LeakSanitizer", b"runtime error:",
                   b"WARNING: ThreadSanitizer",
                   b"SUMMARY: UndefinedBehaviorSanitizer", b"SUMMARY: AddressSanitizer")

NAME = os.path.splitext(os.path.basename(sys.argv[0]))[0]


class TestFailure(Exception):
    """A check failed: main() prints it and exits 1."""


def fail(msg):
    raise TestFailure(msg)


_soft = []


def soft_fail(msg):
    """A failed check after which the test can go on: reported with the others at the end."""
    print("%s: FAIL: %s" % (NAME, msg), file=sys.stderr, flush=True)
    _soft.append(msg)


def log(msg):
    print("%s: %s" % (NAME, msg), flush=True)


def find_program(name):
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/local/sbin:/sbin")


def skip(why):
    """Exits 77 (skip) saying why (a program, a module, a resource the test needs is missing),
    or 1 when CI is set: there a missing dependency is a failure (DESIGN.md)."""
    ci = bool(os.environ.get("CI"))
    print("%s: %s%s" % (NAME, why, "" if ci else ": skipped"), file=sys.stderr, flush=True)
    sys.exit(1 if ci else 77)


def require_programs(*names):
    """Paths of the programs; exits 77 (skip) when one is missing, 1 when CI is set."""
    paths, missing = [], []
    for n in names:
        p = find_program(n)
        (paths if p else missing).append(p or n)
    if missing:
        skip("%s not found (Debian: apt-get install redis-server redis-tools nutcracker; "
             "scripts/bootstrap installs them)" % " and ".join(missing))
    return paths


def require_modules(*names):
    """Imports the Python modules; exits 77 (skip) when one is missing, 1 when CI is set."""
    for n in names:
        try:
            importlib.import_module(n)
        except ImportError:
            skip("python3-%s not found (scripts/bootstrap installs it)" % n)


def require_binary(path, what="chash-proxy"):
    if not path or not os.access(path, os.X_OK):
        print("%s: %s binary not found at %r" % (NAME, what, path), file=sys.stderr)
        sys.exit(1)
    return os.path.abspath(path)


# ---------------------------------------------------------------------------------------------
# Processes.

_procs = []          # every child started, killed on the way out
_tmpdirs = []


def _die_with_parent():
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)     # PR_SET_PDEATHSIG
    os.setpgid(0, 0)       # own process group: a terminal's ^C reaches only this script


def spawn(argv, stdout_path, stderr_path=None, env=None):
    """Starts argv with stdout (and stderr, or its own file) to files; registered for cleanup."""
    out = open(stdout_path, "ab")
    err = open(stderr_path, "ab") if stderr_path else subprocess.STDOUT
    try:
        p = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                             preexec_fn=_die_with_parent)
    finally:
        out.close()
        if stderr_path:
            err.close()
    _procs.append(p)
    return p


def kill_all():
    for p in _procs:
        if p.poll() is None:
            try:
                p.kill()
            except OSError:
                pass
    for p in _procs:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        if p.poll() is None:      # a SIGSTOPped child still dies of SIGKILL; belt and braces
            try:
                os.kill(p.pid, signal.SIGCONT)
            except OSError:
                pass


def _on_signal(signum, _frame):
    raise SystemExit(128 + signum)


def make_tmpdir():
    """A temp dir with a short path (unix socket paths hold 107 bytes), removed at exit unless
    KEEP_TMP is set."""
    d = tempfile.mkdtemp(prefix="chp-", dir="/tmp")
    _tmpdirs.append(d)
    return d


def _cleanup():
    kill_all()
    for d in _tmpdirs:
        if os.environ.get("KEEP_TMP"):
            print("%s: kept %s" % (NAME, d), file=sys.stderr)
        else:
            shutil.rmtree(d, ignore_errors=True)


atexit.register(_cleanup)
for _s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(_s, _on_signal)


def run_main(body):
    """Runs body() (returns None or a summary line); exit 0 on success, 1 on TestFailure."""
    try:
        summary = body()
        if _soft:
            raise TestFailure("%d failed checks (above); the first: %s" % (len(_soft), _soft[0]))
    except SystemExit as e:     # skip() inside body: its exit code, past threads still running
        _cleanup()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(e.code if isinstance(e.code, int) else 1)
    except TestFailure as e:
        print("%s: FAIL: %s" % (NAME, e), file=sys.stderr, flush=True)
        _cleanup()
        os._exit(1)      # not sys.exit: threads still blocked in a socket must not hold us
    except Exception:   # an unexpected exception (a lost connection...) is a failure too
        print("%s: FAIL: unexpected exception:\n%s" % (NAME, traceback.format_exc()),
              file=sys.stderr, flush=True)
        _cleanup()
        os._exit(1)
    _cleanup()
    log("ok" + (": " + summary if summary else ""))
    sys.stdout.flush()
    os._exit(0)


PROXY_BINARIES = (("proxy", "chash-proxy"), ("chash", "chash"))


def run_test(body, programs=("redis-server",), binaries=PROXY_BINARIES, modules=(),
             options=None):
    """The entry point of a test script; does not return (exit 0 pass, 1 fail, 77 skip).

    The command line holds the path of each of `binaries`, (attribute, what) pairs (ctest
    passes chash-proxy's, then the chash CLI's), then whatever options(parser) adds to the
    argparse parser (more positional arguments, --flags); a wrong command line exits 2 with the
    usage. Each binary must be executable (else exit 1); each program of `programs` is looked
    up on PATH and each Python module of `modules` imported: a missing one skips (77), or fails
    when CI is set. Then body(t) runs under run_main, t being the parsed arguments (t.proxy,
    t.chash, ...) plus t.programs ({name: path}, in the order given) and t.tmp (a temp dir,
    removed at exit). body returns None or a summary line."""
    main = sys.modules.get("__main__")
    parser = argparse.ArgumentParser(prog=os.path.basename(sys.argv[0]),
                                     description=getattr(main, "__doc__", None),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    for attr, what in binaries:
        parser.add_argument(attr, metavar=what.upper().replace("-", "_"),
                            help="the %s binary" % what)
    if options is not None:
        options(parser)
    t = parser.parse_args()
    for attr, what in binaries:
        setattr(t, attr, require_binary(getattr(t, attr), what))
    t.programs = dict(zip(programs, require_programs(*programs)))
    require_modules(*modules)
    t.tmp = make_tmpdir()
    run_main(lambda: body(t))


# ---------------------------------------------------------------------------------------------
# Waiting for a state.

def poll_until(pred, timeout, poll=POLL):
    """Calls pred() every poll seconds until it returns something true, which it returns, or
    until timeout seconds have passed: then its last (false) value, for the caller to judge."""
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(poll)


def wait_until(pred, timeout, what, poll=POLL):
    """Polls pred() until it returns something true, which it returns; fails after timeout
    seconds naming what (a string, or a function returning one: called then, so that it can
    describe the last state seen)."""
    got = poll_until(pred, timeout, poll)
    if not got:
        fail("%s: not within %g s" % (what() if callable(what) else what, timeout))
    return got


def holds(pred, seconds, what, poll=POLL):
    """Checks that pred() stays true for the next seconds (a duration the test sets: how long
    something must not happen); fails the first time it is false, naming what."""
    deadline = time.monotonic() + seconds
    while True:
        if not pred():
            fail("%s: no longer so %.2f s into %g s" % (
                what() if callable(what) else what,
                seconds - max(0.0, deadline - time.monotonic()), seconds))
        if time.monotonic() > deadline:
            return
        time.sleep(poll)


def read_text(path, start=0):
    """The text of a file from offset start ("" when it does not exist yet)."""
    try:
        with open(path, "rb") as f:
            f.seek(start)
            return f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""


def wait_log(path, pattern, what, start=0, timeout=WAIT_TIMEOUT):
    """The re match of pattern in the file at path (from offset start) once it is there;
    fails after timeout with the file's tail."""
    return wait_until(lambda: re.search(pattern, read_text(path, start)), timeout,
                      lambda: "%s: no line matching %r in %s; it ends with:\n%s" % (
                          what, pattern, path, tail(path)))


def proc_states(pid):
    """The state letters of every thread of pid (/proc/PID/task/*/stat), ["?"] if gone."""
    states = []
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                states.append(f.read().rsplit(")", 1)[1].split()[0])
    except OSError:
        return ["?"]
    return states


# ---------------------------------------------------------------------------------------------
# Addresses.

def accepts(addr, timeout=1.0):
    try:
        socket.create_connection(addr, timeout=timeout).close()
        return True
    except OSError:
        return False


def wait_accepting(proc, addrs, logpath, what):
    pending = list(addrs)

    def listening():
        if proc.poll() is not None:
            fail("%s exited with status %s before accepting on %s:%d; log:\n%s" % (
                what, proc.returncode, pending[0][0], pending[0][1], tail(logpath)))
        pending[:] = [a for a in pending if not accepts(a)]
        return not pending
    wait_until(listening, START_TIMEOUT, lambda: "%s: no listener on %s:%d; log:\n%s" % (
        what, pending[0][0], pending[0][1], tail(logpath)))


# ---------------------------------------------------------------------------------------------
# RESP: a tiny binary-safe, pipelined client.

def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class RespError(Exception):
    """An error reply (-ERR ...); its args[0] is the text without the '-'."""

    def __eq__(self, other):
        return isinstance(other, RespError) and self.args == other.args

    def __hash__(self):
        return hash(self.args)

    def __repr__(self):
        return "RespError(%r)" % (self.args[0],)


class Closed(ConnectionError):
    """The server closed the connection."""


class Conn:
    """A client socket to addr: (host, port), or a unix socket's path; closed on exit."""

    def __init__(self, addr, timeout=SOCK_TIMEOUT):
        if isinstance(addr, str):
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            self.sock.connect(addr)
        else:
            self.sock = socket.create_connection(addr, timeout=timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(timeout)
        self.buf = b""
        self.pos = 0

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, data):
        self.sock.sendall(data)


class Push(list):
    """A RESP3 push (>): out-of-band data such as a pub/sub message."""


class Resp(Conn):
    """A RESP client connection: RESP2's replies, and RESP3's once the test sends HELLO 3."""

    hold = None  # read_raw: where the reply being read starts in buf (kept by _fill)

    def _fill(self):
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise Closed("connection closed by the server")
        keep = self.pos if self.hold is None else self.hold
        self.buf = self.buf[keep:] + chunk
        self.pos -= keep
        if self.hold is not None:
            self.hold = 0

    def _line(self):
        while True:
            end = self.buf.find(b"\r\n", self.pos)
            if end >= 0:
                line, self.pos = self.buf[self.pos:end], end + 2
                return line
            self._fill()

    def _blob(self, n):
        while len(self.buf) - self.pos < n + 2:
            self._fill()
        data = self.buf[self.pos:self.pos + n]
        if self.buf[self.pos + n:self.pos + n + 2] != b"\r\n":
            raise RuntimeError("bulk of %d bytes not followed by CRLF" % n)
        self.pos += n + 2
        return data

    def read(self):
        """One reply: bytes for + and $, int for :, list for *, None for a nil, and a RespError
        instance (returned, not raised) for -. RESP3: None for _, bool for #, float for ",",
        int for (, RespError for !, bytes for = (its text, without the format), dict for %, set
        for ~ (a list when its members cannot be hashed), Push for >; an attribute (|) is read
        and dropped."""
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest
        if kind == b"-":
            return RespError(rest.decode("utf-8", "replace"))
        if kind == b":" or kind == b"(":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._blob(n)
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        if kind == b"_":
            return None
        if kind == b"#":
            return rest == b"t"
        if kind == b",":
            return float(rest)
        if kind == b"!":
            return RespError(self._blob(int(rest)).decode("utf-8", "replace"))
        if kind == b"=":
            return self._blob(int(rest))[4:]
        if kind == b"%":
            pairs = [(self.read(), self.read()) for _ in range(int(rest))]
            try:
                return dict(pairs)
            except TypeError:
                return pairs
        if kind == b"~":
            items = [self.read() for _ in range(int(rest))]
            try:
                return set(items)
            except TypeError:
                return items
        if kind == b">":
            return Push(self.read() for _ in range(int(rest)))
        if kind == b"|":
            for _ in range(2 * int(rest)):
                self.read()
            return self.read()
        raise RuntimeError("bad RESP line %r" % line[:100])

    def read_raw(self):
        """One reply's bytes as they came (RESP2 or RESP3, an attribute with its element)."""
        self.hold = self.pos
        try:
            self.read()
            return self.buf[self.hold:self.pos]
        finally:
            self.hold = None

    def call(self, *args):
        self.sock.sendall(encode(*args))
        return self.read()

    def call_raw(self, *args):
        self.sock.sendall(encode(*args))
        return self.read_raw()

    def pipeline(self, commands):
        """commands: a list of argument tuples; sends all in one write, returns the replies."""
        self.sock.sendall(b"".join(encode(*c) for c in commands))
        return [self.read() for _ in commands]


def sigstop(pid, bound=5.0):
    """SIGSTOPs pid and returns once every thread of it is stopped (state T in
    /proc/PID/task/*/stat): the signal takes effect asynchronously, and a server still running
    for a moment answers what a test sends right after kill() returns."""
    os.kill(pid, signal.SIGSTOP)
    wait_until(lambda: all(st in ("T", "t") for st in proc_states(pid)), bound,
               lambda: "pid %d stopped after SIGSTOP (states %s)" % (pid, proc_states(pid)),
               poll=0.005)


def run_threads(target, n, bound, what):
    """Runs target(i) for i in range(n) on n daemon threads at once; fails when one has not
    returned within bound seconds (what: for the message)."""
    threads = [threading.Thread(target=target, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + bound
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
        if t.is_alive():
            fail("%s did not finish within %g s" % (what, bound))


def resp_call(addr, *args, timeout=SOCK_TIMEOUT):
    with Resp(addr, timeout) as c:
        return c.call(*args)


# ---------------------------------------------------------------------------------------------
# redis-server.

class Server:
    """A server process on host:port (a free loopback port unless given), stopped by kill()."""

    def __init__(self, exe, port=None, host="127.0.0.1"):
        self.exe, self.host = exe, host
        self.port = port or free_ports(1)[0]
        self.proc = None

    @property
    def addr(self):
        return (self.host, self.port)

    @property
    def text(self):
        return "%s:%d" % self.addr

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


def start_servers(make, n, what):
    """n servers made by make() and started (a port lost to a race is replaced)."""
    out = []
    for _attempt in range(n + 10):
        if len(out) == n:
            break
        srv = make()
        try:
            out.append(srv.start())
        except TestFailure:
            if srv.proc and srv.proc.poll() is None:
                raise
    if len(out) < n:
        fail("could not start %d %s" % (n, what))
    return out


class Redis(Server):
    """A redis-server on 127.0.0.1:port (or host:port), no persistence, in its own dir; with a
    password, it requires AUTH (--requirepass) and call()/keys() authenticate first."""

    def __init__(self, exe, tmp, port=None, host="127.0.0.1", password=None):
        Server.__init__(self, exe, port, host)
        self.password = password
        self.dir = os.path.join(tmp, "redis-%s-%d" % (host, self.port))
        os.makedirs(self.dir, exist_ok=True)
        self.log = os.path.join(self.dir, "log")

    def start(self):
        self.proc = spawn([self.exe, "--port", str(self.port), "--bind", self.host,
                           "--save", "", "--appendonly", "no", "--daemonize", "no",
                           "--databases", "64", "--dir", self.dir] +
                          (["--requirepass", self.password] if self.password else []), self.log)
        wait_accepting(self.proc, [self.addr], self.log, "redis-server " + self.text)
        return self

    def call(self, *args):
        if not self.password:
            return resp_call(self.addr, *args)
        with Resp(self.addr) as c:
            self._auth(c)
            return c.call(*args)

    def _auth(self, c):
        if self.password and c.call("AUTH", self.password) != b"OK":
            fail("%s: AUTH refused" % self.text)

    def keys(self, db=0):
        with Resp(self.addr) as c:
            self._auth(c)
            sel, keys = c.pipeline([("SELECT", db), ("KEYS", "*")])
            if sel != b"OK":
                fail("%s: SELECT %d answered %r" % (self.text, db, sel))
            return keys


def start_redises(exe, tmp, n, password=None):
    """n redis-servers on free loopback ports."""
    return start_servers(lambda: Redis(exe, tmp, password=password), n, "redis-servers")


def start_redises_11211(exe, tmp, n):
    """n redis-servers on 127.0.0.X:11211 for distinct X (twemproxy names an unnamed server on
    port 11211 by its host alone). The hosts have different lengths, in an order that is neither
    sorted by text nor by length."""
    out = []
    candidates = iter([200, 9, 30, 101, 7, 42, 5, 123, 66, 3, 250, 11, 150, 8] +
                      [x for x in range(2, 255)])
    for _attempt in range(50):
        if len(out) == n:
            break
        host = next((h for h in ("127.0.0.%d" % x for x in candidates) if bindable(h, 11211)),
                    None)
        if host is None:
            fail("cannot bind port 11211 on 127.0.0.2..254 (is something listening on "
                 "0.0.0.0:11211, e.g. memcached?)")
        r = Redis(exe, tmp, port=11211, host=host)
        try:
            out.append(r.start())
        except TestFailure:
            if r.proc and r.proc.poll() is None:
                raise
    if len(out) < n:
        fail("could not start %d redis-servers on port 11211" % n)
    return out


class Memcached(Server):
    """A memcached on 127.0.0.1:port (TCP only; as root with -u root)."""

    def __init__(self, exe, tmp, port=None, host="127.0.0.1"):
        Server.__init__(self, exe, port, host)
        self.log = os.path.join(tmp, "memcached-%s-%d.log" % (host, self.port))

    def start(self):
        argv = [self.exe, "-p", str(self.port), "-l", self.host, "-U", "0", "-m", "64"]
        if os.geteuid() == 0:
            argv += ["-u", "root"]
        self.proc = spawn(argv, self.log)
        wait_accepting(self.proc, [self.addr], self.log, "memcached " + self.text)
        return self

    def keys_present(self, keys):
        """The subset of keys (bytes) this server holds."""
        with Mc(self.addr) as c:
            have = set()
            for i in range(0, len(keys), 100):
                for k, _v in c.get_many(keys[i:i + 100]).items():
                    have.add(k)
            return have

    def flush(self):
        with Mc(self.addr) as c:
            if c.call(b"flush_all\r\n") != b"OK\r\n":
                fail("%s: flush_all failed" % self.text)


def start_memcacheds(exe, tmp, n):
    """n memcacheds on free loopback ports."""
    return start_servers(lambda: Memcached(exe, tmp), n, "memcacheds")


class Mc(Conn):
    """A memcached text/meta protocol client over one socket: replies are read by shape."""

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise Closed("connection closed by the server")
        self.buf += chunk

    def line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        i = self.buf.index(b"\r\n") + 2
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def exact(self, n):
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def reply(self):
        """One reply: a get's VALUE blocks up to END, a VA with its data, or one line."""
        first = self.line()
        if first.startswith(b"VALUE "):
            out = first
            line = first
            while line.startswith(b"VALUE "):
                n = int(line.split()[3])
                out += self.exact(n + 2)
                line = self.line()
                out += line
            return out
        if first.startswith(b"VA "):
            n = int(first.split()[1])
            return first + self.exact(n + 2)
        return first

    def call(self, data):
        self.send(data)
        return self.reply()

    def get_many(self, keys):
        """{key: value} of a text multiget (keys: bytes)."""
        rep = self.call(b"get " + b" ".join(keys) + b"\r\n")
        out, pos = {}, 0
        while rep.startswith(b"VALUE ", pos):
            eol = rep.index(b"\r\n", pos)
            parts = rep[pos:eol].split()
            n = int(parts[3])
            out[parts[1]] = rep[eol + 2:eol + 2 + n]
            pos = eol + 2 + n + 2
        if rep[pos:] != b"END\r\n":
            fail("unexpected get reply tail %r" % rep[pos:pos + 100])
        return out


# ---------------------------------------------------------------------------------------------
# Configs.

def pool_yaml(name, listen_port, servers, redis=True, **settings):
    """One pool of a twemproxy config. servers: [(addr text, weight, name or None)]; settings:
    key -> value (True/False written as true/false, strings as given, so hash_tag='"{}"')."""
    lines = ["%s:" % name, "  listen: 127.0.0.1:%d" % listen_port,
             "  redis: %s" % ("true" if redis else "false")]
    for k, v in settings.items():
        if isinstance(v, bool):
            v = "true" if v else "false"
        lines.append("  %s: %s" % (k, v))
    lines.append("  servers:")
    for addr, weight, sname in servers:
        lines.append("   - %s:%d%s" % (addr, weight, " " + sname if sname else ""))
    return "\n".join(lines) + "\n"


def write_file(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


# ---------------------------------------------------------------------------------------------
# chash-proxy and nutcracker.

def sanitizer_env():
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "detect_leaks=1"]))
    env["UBSAN_OPTIONS"] = ":".join(filter(None, [env.get("UBSAN_OPTIONS"), "print_stacktrace=1"]))
    return env


class Proxy:
    """chash-proxy (or, with nutcracker=True, the real nutcracker) on a config.

    listens: the (host, port) pairs it must accept on before start() returns. The stats server
    is on 127.0.0.1:stats_port (-s, -a: loopback only; twemproxy's default is 0.0.0.0:22222).
    """

    def __init__(self, exe, tmp, config, listens, label="proxy", nutcracker=False,
                 stats_interval_ms=None, verbosity=None, extra_args=()):
        self.exe, self.config, self.listens = exe, config, list(listens)
        self.label, self.nutcracker = label, nutcracker
        self.stats_port = free_ports(1)[0]
        self.log = os.path.join(tmp, label + ".log")
        self.stdout = os.path.join(tmp, label + ".stdout")
        self.stderr = os.path.join(tmp, label + ".stderr")
        self.pidfile = os.path.join(tmp, label + ".pid")
        self.argv = [exe, "-c", config, "-s", str(self.stats_port), "-a", "127.0.0.1",
                     "-p", self.pidfile, "-o", self.log]
        if stats_interval_ms is not None:
            self.argv += ["-i", str(stats_interval_ms)]
        if verbosity is not None:
            self.argv += ["-v", str(verbosity)]
        self.argv += list(extra_args)
        self.proc = None

    @property
    def what(self):
        return "%s (%s)" % ("nutcracker" if self.nutcracker else "chash-proxy", self.label)

    def start(self):
        for attempt in range(3):
            self.proc = spawn(self.argv, self.stdout, self.stderr,
                              env=None if self.nutcracker else sanitizer_env())
            try:
                wait_accepting(self.proc, self.listens + [("127.0.0.1", self.stats_port)],
                               self.stderr, self.what)
                return self
            except TestFailure as e:
                # The stats port was free when chosen, but a client connection of this run may
                # have taken it as its own port since: choose another, twice at most.
                logged = tail(self.log)
                if attempt < 2 and self.proc.poll() is not None and \
                        ("stats: cannot listen" in logged or "stats on" not in logged and
                         "in use" in logged.lower()):
                    self.stats_port = free_ports(1)[0]
                    self.argv[self.argv.index("-s") + 1] = str(self.stats_port)
                    continue
                fail("%s\n%s log:\n%s" % (e, self.what, logged))
        return self

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def rss_kib(self):
        try:
            with open("/proc/%d/status" % self.proc.pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return None

    def stats(self, timeout=SOCK_TIMEOUT):
        """The raw bytes the stats port sends on one connection (until it closes)."""
        s = socket.create_connection(("127.0.0.1", self.stats_port), timeout=timeout)
        s.settimeout(timeout)
        data = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return data
                data += chunk
        finally:
            s.close()

    def stats_json(self):
        data = self.stats()
        try:
            return json.loads(data.decode("utf-8"))
        except ValueError as e:
            fail("%s: stats port sent no single JSON object (%s): %r" % (self.what, e, data[:400]))

    def poll_stats(self, pred, timeout=WAIT_TIMEOUT):
        """The stats (stats_json) once pred(stats) holds, or the last ones read after timeout
        seconds: for a caller whose own checks judge them (and report what they find)."""
        last = [None]

        def seen():
            last[0] = self.stats_json()
            return pred(last[0])
        poll_until(seen, timeout)
        return last[0]

    def wait_stats(self, pred, what, timeout=WAIT_TIMEOUT):
        """The stats once pred(stats) holds; fails after timeout naming what, with the last
        stats' top-level fields and the log's tail."""
        st = self.poll_stats(pred, timeout)
        if not pred(st):
            fail("%s: not in %s's stats within %g s (last: %r); log:\n%s" % (
                what, self.what, timeout, {k: v for k, v in st.items()
                                           if not isinstance(v, dict)}, tail(self.log)))
        return st

    def sanitizer_report(self):
        try:
            with open(self.stderr, "rb") as f:
                err = f.read()
        except OSError:
            return None
        hits = [m for m in SANITIZER_MARKS if m in err]
        if not hits:
            return None
        i = min(err.find(m) for m in hits)
        return err[max(0, i - 200):i + 3000].decode("utf-8", "replace")

    def stop(self, check=True):
        """SIGTERM, then a bounded wait. With check: fails unless the proxy exits by itself,
        without a signal, and its stderr holds no sanitizer report."""
        if self.proc is None:
            return
        if self.proc.poll() is not None:
            rc = self.proc.returncode
            if check and not self.nutcracker:
                rep = self.sanitizer_report()
                fail("%s had already exited with status %s%s" % (
                    self.what, rc, ("; sanitizer report:\n" + rep) if rep else
                    "; stderr:\n" + tail(self.stderr)))
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            if check:
                fail("%s did not exit within %gs of SIGTERM" % (self.what, STOP_TIMEOUT))
            return
        if not check or self.nutcracker:
            return
        rep = self.sanitizer_report()
        if rep:
            fail("%s: sanitizer report on stderr:\n%s" % (self.what, rep))
        if rc < 0:
            fail("%s died of signal %d on SIGTERM instead of exiting (no clean shutdown, so "
                 "LeakSanitizer did not run); stderr:\n%s" % (self.what, -rc, tail(self.stderr)))


# ---------------------------------------------------------------------------------------------
# chash lookup: where nutcracker (and so chash-proxy) places keys.


def lookup_escape(key):
    """KEY as `chash lookup`'s plain output prints it (chash(1)): a backslash, tab, newline and
    carriage return as \\\\ \\t \\n \\r, any other control byte and DEL as \\xHH."""
    named = {0x5c: b"\\\\", 0x09: b"\\t", 0x0a: b"\\n", 0x0d: b"\\r"}
    return b"".join(named.get(c) or (b"\\x%02x" % c if c < 0x20 or c == 0x7f else bytes([c]))
                    for c in key)


def chash_lookup(chash, config, pool, keys):
    """{key: owner text} as `chash lookup --config CONFIG --pool POOL -` prints it (host:port,
    then TAB name for named pools: only the address is kept). Keys must not hold \\n \\t \\r."""
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "detect_leaks=0"]))
    r = subprocess.run([chash, "lookup", "--config", config, "--pool", pool, "-"],
                       input=b"".join(k + b"\n" for k in keys), capture_output=True,
                       timeout=120, env=env)
    if r.returncode != 0:
        fail("chash lookup exited %d: %s" % (r.returncode, r.stderr.decode("utf-8", "replace")))
    lines = r.stdout.split(b"\n")
    if lines[-1] != b"" or len(lines) - 1 != len(keys):
        fail("chash lookup printed %d lines for %d keys" % (len(lines) - 1, len(keys)))
    out = {}
    for k, line in zip(keys, lines):
        parts = line.split(b"\t")
        if parts[0] != lookup_escape(k) or len(parts) < 2:
            fail("unexpected chash lookup line %r" % line[:200])
        out[k] = parts[1].decode()
    return out

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_reload: hot reload on SIGHUP, under load.

chash-proxy in front of 3 real redis-servers (one pool, ketama, fnv1a_64, equal weights); a
4th redis-server is running but not in the config yet. Client threads run SET k v / GET k pairs
(pipelined per pair) and MSET / MGET across nodes, each on one connection held throughout.

  1. Valid reload that adds the 4th server (the file rewritten, SIGHUP): the stats'
     membership_version changes to what `chash lookup --show-version` says for the new file,
     "reloads" counts 1, the log names both versions and how much of the key space moved.
     Under load: no request lost (every one answered, the connections stay open), none fails
     (no error reply); a GET may miss (nil) only for a key whose owner changed.
  2. Only keys that move to the new node move: for 3,000 sample keys, the owner under the old
     file vs the new (chash lookup): every moved key's new owner is the new server (ketama's
     property), roughly a quarter moved; the share the proxy logged is the one `chash plan
     --keys 100000` measures; and the proxy now stores each key on its new owner (checked on
     the backends directly).
  3. Invalid config (a misspelled key): the log holds "FILE:LINE:COLUMN: message",
     reload_failures counts 1, the version is unchanged and the proxy keeps routing by the
     last good file (under load: nothing lost or failed).
  4. Valid reload that removes the 4th server again, under load, while GETs of its keys are in
     flight on it (it is SIGSTOPped across the reload): those are answered by it with their
     values, nothing is lost or failed, the stats list 3 servers, and then the proxy's
     connection to the removed server closes (the server's INFO clients count).
  5. A reload that changes the pool's listen address: logged as needing a restart, the pool
     keeps serving on its old address with its old membership.
  6. SIGTERM: clean exit, no sanitizer report (ASan + LeakSanitizer in the test build).

Usage: test_reload.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server missing and CI unset).
"""
import json
import os
import re
import select
import signal
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import proxyharness  # noqa: E402
from proxyharness import (Proxy, Resp, RespError, chash_lookup, encode, fail,  # noqa: E402
                          free_ports, holds, log, poll_until, pool_yaml, run_test, sigstop,
                          soft_fail, start_redises, wait_until, write_file)

POOL = "alpha"
NSAMPLE = 3000
WAIT = 15.0          # seconds for a reload to show in the stats (ASan, loaded machine)
PACE = 0.001         # seconds between two pairs of a loader: pacing, not a wait
LOAD_AFTER = 600     # requests each loader answers after an event before its load stops
LOAD_BEFORE = 300    # requests each loader answers before the event
HELD_STOPPED = 0.2   # seconds the removed server stays stopped after the reload committed


class Loader(threading.Thread):
    """SET/GET pairs (kind "kv") or MSET/MGET of 8 keys (kind "multi") in a loop on one
    connection. Records every anomaly; counts requests sent and replies received."""

    def __init__(self, addr, kind, tag):
        super().__init__(daemon=True, name="%s-%s" % (kind, tag))
        self.addr, self.kind, self.tag = addr, kind, tag
        self.stop_flag = threading.Event()
        self.sent = self.answered = 0
        self.errors = []        # error replies and exceptions
        self.misses = []        # keys a GET/MGET found missing right after setting them

    def run(self):
        try:
            c = Resp(self.addr, timeout=15.0)
        except OSError as e:
            self.errors.append("connect: %s" % e)
            return
        i = 0
        try:
            while not self.stop_flag.is_set():
                if self.kind == "kv":
                    k, v = b"%s:%d" % (self.tag.encode(), i), b"v%d" % i
                    cmds = [("SET", k, v), ("GET", k)]
                    self.sent += 2
                    got = c.pipeline(cmds)
                    self.answered += 2
                    if got[0] != b"OK" or isinstance(got[1], RespError):
                        self.errors.append((cmds, got))
                    elif got[1] is None:
                        self.misses.append(k)
                    elif got[1] != v:
                        self.errors.append((cmds, got))
                else:
                    keys = [b"%s:%d:%d" % (self.tag.encode(), i, j) for j in range(8)]
                    mset = ["MSET"]
                    for j, k in enumerate(keys):
                        mset += [k, b"m%d" % j]
                    self.sent += 2
                    got = c.pipeline([tuple(mset), tuple(["MGET"] + keys)])
                    self.answered += 2
                    if got[0] != b"OK" or not isinstance(got[1], list):
                        self.errors.append(("MSET/MGET", got))
                    else:
                        for j, (k, val) in enumerate(zip(keys, got[1])):
                            if val is None:
                                self.misses.append(k)
                            elif val != b"m%d" % j:
                                self.errors.append(("MGET", k, val))
                i += 1
                self.stop_flag.wait(PACE)
        except Exception as e:      # a closed connection, a timeout: a lost request
            self.errors.append("exception after %d requests: %r" % (self.sent, e))
        finally:
            c.close()


def start_load(addr, tag):
    loaders = [Loader(addr, "kv", tag + "kv"), Loader(addr, "multi", tag + "m")]
    for t in loaders:
        t.start()
    return loaders


def load_after(loaders, n=LOAD_AFTER):
    """Returns once every loader has answered n more requests than now (or stopped on an
    error, which stop_load reports): the load went on past what just happened."""
    base = [t.answered for t in loaders]
    wait_until(lambda: all(t.answered >= b + n or t.errors or not t.is_alive()
                           for t, b in zip(loaders, base)), WAIT,
               lambda: "%d requests answered by each loader (%s)" % (n, ", ".join(
                   "%s: %d" % (t.name, t.answered - b) for t, b in zip(loaders, base))))


def stop_load(loaders, phase, unmoved):
    """Stops the loaders and checks them; unmoved(keys) lists the keys (of those missed) for
    which a miss is not allowed."""
    for t in loaders:
        t.stop_flag.set()
    for t in loaders:
        t.join(timeout=30)
        if t.is_alive():
            fail("%s: loader %s hung" % (phase, t.name))
    total = 0
    for t in loaders:
        total += t.answered
        if t.errors:
            soft_fail("%s: %s: %d failures, first: %r" % (phase, t.name, len(t.errors),
                                                         t.errors[0]))
        if t.sent != t.answered:
            soft_fail("%s: %s: %d requests sent, %d answered" % (phase, t.name, t.sent,
                                                                  t.answered))
        if t.answered < 20:
            soft_fail("%s: %s: only %d requests answered: no load" % (phase, t.name,
                                                                      t.answered))
        bad = unmoved(t.misses) if t.misses else []
        if bad:
            soft_fail("%s: %s: %d GETs missed keys that did not move, e.g. %r" % (
                phase, t.name, len(bad), bad[0]))
    log("%s: %d requests under load, none lost or failed" % (phase, total))


def show_version(chash, config):
    r = subprocess.run([chash, "lookup", "--config", config, "--pool", POOL, "--show-version",
                        "x"], capture_output=True, timeout=60)
    first = r.stdout.decode().splitlines()[0] if r.stdout else ""
    if r.returncode != 0 or not first.startswith("# version "):
        fail("chash lookup --show-version: %r %r" % (r.stdout[:200], r.stderr[:200]))
    return first[len("# version "):]


def chash_plan(chash, old, new):
    """The moved fraction `chash plan OLD NEW --keys 100000` measures."""
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "detect_leaks=0"]))
    r = subprocess.run([chash, "plan", old, new, "--pool", POOL, "--keys", "100000", "--json"],
                       capture_output=True, timeout=120, env=env)
    try:
        return float(json.loads(r.stdout.decode())["moved_fraction"])
    except (ValueError, KeyError) as e:
        fail("chash plan: %s: %r %r" % (e, r.stdout[:300], r.stderr[:300]))


def wait_stats(px, pred, what):
    return px.wait_stats(pred, what, timeout=WAIT)


def wait_log(px, pattern, what, start=0):
    return proxyharness.wait_log(px.log, pattern, what, start=start, timeout=WAIT)


def log_size(px):
    try:
        return os.path.getsize(px.log)
    except OSError:
        return 0


def replace_file(path, text):
    """Rewrites path atomically (as a config management tool would)."""
    write_file(path + ".tmp", text)
    os.rename(path + ".tmp", path)


def connected_clients(r):
    info = r.call("INFO", "clients").decode()
    m = re.search(r"connected_clients:(\d+)", info)
    return int(m.group(1)) if m else -1


def body(t):
    proxy_exe, chash, redis_exe, tmp = t.proxy, t.chash, t.programs["redis-server"], t.tmp
    backends = start_redises(redis_exe, tmp, 4)
    three, new = backends[:3], backends[3]
    port, port2 = free_ports(2)
    addr = ("127.0.0.1", port)
    settings = dict(hash="fnv1a_64", distribution="ketama", timeout=5000,
                    server_connections=1)

    def conf_text(servers, listen=port, **extra):
        s = dict(settings)
        s.update(extra)
        return pool_yaml(POOL, listen, [(b.text, 1, None) for b in servers], **s)

    old_file = write_file(os.path.join(tmp, "old.yml"), conf_text(three))
    new_file = write_file(os.path.join(tmp, "new.yml"), conf_text(backends))
    conf = write_file(os.path.join(tmp, "proxy.yml"), conf_text(three))
    v_old, v_new = show_version(chash, old_file), show_version(chash, new_file)
    if v_old == v_new:
        fail("the two configs have the same version %s" % v_old)

    px = Proxy(proxy_exe, tmp, conf, [addr], verbosity=6).start()
    st = px.stats_json()
    if st[POOL].get("membership_version") != v_old:
        fail("membership_version %r at start, chash lookup says %r" % (
            st[POOL].get("membership_version"), v_old))
    if st.get("reloads") != 0 or st.get("reload_failures") != 0:
        fail("reloads/reload_failures at start: %r/%r" % (st.get("reloads"),
                                                          st.get("reload_failures")))

    # Owners of the sample keys (and of the loaders' keys, to judge misses) in both files.
    sample = [b"s:%d" % i for i in range(NSAMPLE)]
    own_old = chash_lookup(chash, old_file, POOL, sample)
    own_new = chash_lookup(chash, new_file, POOL, sample)

    def unmoved(keys):
        a = chash_lookup(chash, old_file, POOL, keys)
        b = chash_lookup(chash, new_file, POOL, keys)
        return [k for k in keys if a[k] == b[k]]

    # 1. Add a server under load.
    loaders = start_load(addr, "a")
    load_after(loaders, LOAD_BEFORE)
    mark = log_size(px)
    replace_file(conf, conf_text(backends))
    px.proc.send_signal(signal.SIGHUP)
    st = wait_stats(px, lambda s: s.get("reloads") == 1, "reload 1")
    load_after(loaders)
    stop_load(loaders, "add a server", unmoved)
    if st[POOL].get("membership_version") != v_new:
        soft_fail("membership_version after the reload %r, chash lookup says %r" % (
            st[POOL].get("membership_version"), v_new))
    if st.get("reload_failures") != 0:
        soft_fail("reload_failures %r after a valid reload" % st.get("reload_failures"))
    servers = [k for k, v in st[POOL].items() if isinstance(v, dict)]
    if len(servers) != 4 or new.text not in servers:
        soft_fail("stats list servers %s after adding %s" % (servers, new.text))
    m = wait_log(px, r"membership (\S+) -> (\S+), 3 -> 4 servers, ([0-9.]+)% of the key space "
                 r"moved", "reload 1 log", mark)
    if (m.group(1), m.group(2)) != (v_old, v_new):
        soft_fail("log names versions %s -> %s, expected %s -> %s" % (m.group(1), m.group(2),
                                                                     v_old, v_new))
    logged = float(m.group(3)) / 100
    log("reload 1: %s -> %s, the proxy logged %.2f%% of the key space moved" % (
        v_old, v_new, 100 * logged))

    # 2. Only keys that move to the new node move, and the proxy stores them there.
    moved = [k for k in sample if own_old[k] != own_new[k]]
    wrong = [k for k in moved if own_new[k] != new.text]
    if wrong:
        soft_fail("%d keys moved to a server other than the new one, e.g. %r: %s -> %s" % (
            len(wrong), wrong[0], own_old[wrong[0]], own_new[wrong[0]]))
    frac = len(moved) / len(sample)
    log("%d of %d sample keys moved (%.1f%%), all to %s" % (len(moved), len(sample),
                                                             100 * frac, new.text))
    # How many move depends on the servers' ketama points, which depend on their (free, so
    # random) ports, and fnv1a_64 spreads short sequential keys unevenly: no bound on the share
    # here, only that the check above was not vacuous. The proxy's own figure must be
    # `chash plan`'s on the same 100,000 keys, to the digit (checked above).
    if not moved:
        soft_fail("no sample key moved when adding a 4th server: the check above is vacuous")
    plan = chash_plan(chash, old_file, new_file)
    if abs(plan - logged) > 0.00006:
        soft_fail("the proxy logged %.2f%% moved, chash plan --keys 100000 says %.3f%%" % (
            100 * logged, 100 * plan))
    with Resp(addr) as c:
        got = c.pipeline([("SET", k, b"x" + k) for k in sample])
        if got != [b"OK"] * len(sample):
            fail("SET of the sample keys through the proxy: %r" % got[:5])
    by_text = {b.text: b for b in backends}
    for owner in sorted(set(own_new.values())):
        keys = [k for k in sample if own_new[k] == owner]
        with Resp(by_text[owner].addr) as c:
            vals = c.pipeline([("GET", k) for k in keys])
        missing = [k for k, v in zip(keys, vals) if v != b"x" + k]
        if missing:
            soft_fail("%d keys not stored on their new owner %s, e.g. %r" % (
                len(missing), owner, missing[0]))

    # 3. An invalid config: rejected with file:line:column, the old one keeps serving.
    loaders = start_load(addr, "b")
    load_after(loaders, LOAD_BEFORE)
    mark = log_size(px)
    bad = conf_text(backends).replace("  timeout:", "  timeuot:")
    replace_file(conf, bad)
    bad_line = 1 + bad.splitlines().index(next(l for l in bad.splitlines() if "timeuot" in l))
    px.proc.send_signal(signal.SIGHUP)
    st = wait_stats(px, lambda s: s.get("reload_failures") == 1, "rejected reload")
    load_after(loaders)
    stop_load(loaders, "invalid config", lambda keys: keys)
    m = wait_log(px, re.escape(conf) + r":(\d+):(\d+): (.*)", "invalid config log", mark)
    log("rejected: %s" % m.group(0))
    if int(m.group(1)) != bad_line:
        soft_fail("error reported at line %s, the misspelled key is on line %d" % (
            m.group(1), bad_line))
    if st.get("reloads") != 1 or st[POOL].get("membership_version") != v_new:
        soft_fail("after a rejected reload: reloads %r, version %r (want 1, %s)" % (
            st.get("reloads"), st[POOL].get("membership_version"), v_new))

    # 4. Remove the 4th server again, under load: its connection closes.
    if connected_clients(new) < 2:
        soft_fail("the proxy holds no connection to %s before its removal" % new.text)
    # GETs of keys it holds are in flight on its connection while it is removed (it is
    # SIGSTOPped meanwhile): they must still be answered by it, on that connection.
    held_keys = [k for k in sample if own_new[k] == new.text][:50]
    loaders = start_load(addr, "c")
    load_after(loaders, LOAD_BEFORE)
    held = Resp(addr)
    try:
        sigstop(new.proc.pid)
        held.send(b"".join(encode("GET", k) for k in held_keys))
        # In flight: written to the stopped server's connection (the loaders' requests to it
        # wait there too).
        wait_stats(px, lambda s: s[POOL].get(new.text, {}).get("out_queue", 0) >= len(held_keys),
                   "the %d GETs in flight on the stopped %s" % (len(held_keys), new.text))
        replace_file(conf, conf_text(three))
        px.proc.send_signal(signal.SIGHUP)
        st = wait_stats(px, lambda s: s.get("reloads") == 2, "reload 2")
        # The server stays stopped HELD_STOPPED s after the reload committed: nothing may
        # answer its requests meanwhile (a proxy that failed or re-sent them at the removal
        # would answer them now, before the server can).
        holds(lambda: not select.select([held.sock], [], [], 0)[0], HELD_STOPPED,
              "no reply to the GETs in flight on the stopped, removed server")
    finally:
        new.proc.send_signal(signal.SIGCONT)
    got = [held.read() for _ in held_keys]
    held.close()
    bad = [(k, v) for k, v in zip(held_keys, got) if v != b"x" + k]
    if bad:
        soft_fail("%d GETs in flight on the removed server were not answered by it, e.g. %r" % (
            len(bad), bad[0]))
    else:
        log("%d GETs in flight on the removed server answered by it after the reload" % (
            len(held_keys)))
    load_after(loaders)
    # A miss is allowed for keys whose owner changed back (from the new server to the old).
    stop_load(loaders, "remove a server", unmoved)
    if st[POOL].get("membership_version") != v_old:
        soft_fail("membership_version %r after removing the server, want %s" % (
            st[POOL].get("membership_version"), v_old))
    servers = [k for k, v in st[POOL].items() if isinstance(v, dict)]
    if len(servers) != 3 or new.text in servers:
        soft_fail("stats list servers %s after removing %s" % (servers, new.text))
    if not poll_until(lambda: connected_clients(new) <= 1, WAIT):   # our INFO connection only
        soft_fail("the proxy's connection to the removed %s is still open" % new.text)

    # 5. A changed listen address needs a restart: the pool is kept as it was.
    mark = log_size(px)
    replace_file(conf, conf_text(backends, listen=port2))
    px.proc.send_signal(signal.SIGHUP)
    wait_log(px, r"\"listen\" changed: that needs a restart", "listen change log", mark)
    st = wait_stats(px, lambda s: s.get("reloads") == 3, "reload 3")
    if st[POOL].get("membership_version") != v_old:
        soft_fail("a listen change reloaded the pool anyway: version %r" % (
            st[POOL].get("membership_version")))
    with Resp(addr) as c:
        if c.call("SET", "after", "1") != b"OK" or c.call("GET", "after") != b"1":
            soft_fail("the pool does not serve on its old address after a listen change")

    # 6. Clean exit.
    px.stop()
    return "add, reject, remove, listen change: nothing lost; clean exit"


if __name__ == "__main__":
    run_test(body)

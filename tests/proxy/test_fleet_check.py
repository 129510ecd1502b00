#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_fleet_check: `chash-proxy -t` and the start agree on pools whose membership is in etcd
(issue 28).

docs/FLEET.md ("a proxy started while etcd is down"): such a pool starts fenced on its file's
servers; one without servers in the file cannot start, having nothing it could serve, not even
fenced, nor a placement to build. -t now applies the same rule, by the same function, after
reading the document as the start does (nothing written to etcd). Each case is run both ways,
-t and a start, and their verdicts must be the same:

1. etcd down (a port nothing listens on), a pool without servers: both refuse, naming the pool
   and the membership URL (before: -t said "syntax is ok", exit 0, while the start refused).
2. etcd down, a pool with file servers: both accept (the start then serves fenced; stopped).
3. A real etcd holding a document for the key, a pool without servers: both accept; -t also
   checks the document's servers (a document whose server does not resolve is refused by -t,
   as by the start).
4. A real etcd without the key: both refuse ("does not exist yet").
-t never writes to etcd: its keys are the same before and after a -t.

Usage: test_fleet_check.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (etcd missing and CI unset).
"""
import json
import os
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from proxyharness import (accepts, fail, free_ports, log, poll_until, run_test,  # noqa: E402
                          sanitizer_env, spawn, write_file)
import etcd  # noqa: E402

KEY = "/chash/pools/chk"
BOUND = 30.0     # the start's etcd requests take at most 3 s each


def dead_port():
    """A loopback port nothing listens on (bound, then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def conf(tmp, name, etcd_port, servers):
    port, = free_ports(1)
    lines = ["chk:", "  listen: 127.0.0.1:%d" % port, "  redis: true",
             "  membership: etcd://127.0.0.1:%d%s" % (etcd_port, KEY)]
    if servers:
        lines += ["  servers:"] + ["   - %s" % s for s in servers]
    return write_file(os.path.join(tmp, name + ".yml"), "\n".join(lines) + "\n"), port


def check(t, path):
    r = subprocess.run([t.proxy, "-t", "-c", path], capture_output=True, timeout=BOUND,
                       stdin=subprocess.DEVNULL, env=sanitizer_env())
    return r.returncode, r.stderr.decode("utf-8", "replace")


def start(t, path, port, label):
    """(verdict, text): 0 and the output when the start serves (it is stopped then), else its
    exit status and output."""
    out = os.path.join(t.tmp, label + ".out")
    p = spawn([t.proxy, "-c", path, "-s", str(free_ports(1)[0])], out, env=sanitizer_env())
    if not poll_until(lambda: p.poll() is not None or accepts(("127.0.0.1", port)), BOUND):
        fail("%s: the start neither served nor exited within %g s:\n%s" % (
            label, BOUND, open(out).read()[-1500:]))
    if p.poll() is None:
        p.terminate()
        if p.wait(timeout=BOUND) != 0:
            fail("%s: the start did not exit cleanly on SIGTERM:\n%s" % (
                label, open(out).read()[-1500:]))
        return 0, open(out).read()
    return p.returncode, open(out).read()


def agree(t, name, path, port, ok, *needles):
    rc_t, text_t = check(t, path)
    rc_s, text_s = start(t, path, port, name)
    for what, rc, text in (("-t", rc_t, text_t), ("the start", rc_s, text_s)):
        if (rc == 0) != ok or (not ok and any(n not in text for n in needles)):
            fail("%s: %s exited %d (want %s%s); -t %d, start %d; output:\n%s" % (
                name, what, rc, "success" if ok else "a refusal naming ",
                "" if ok else repr(needles), rc_t, rc_s, text[-1500:]))
    return text_t


def body(t):
    down = dead_port()
    url = "etcd://127.0.0.1:%d%s" % (down, KEY)
    path, port = conf(t.tmp, "down_empty", down, [])
    agree(t, "1. etcd down, no servers", path, port, False, "pool chk", url,
          "the file has no servers")
    path, port = conf(t.tmp, "down_servers", down, ["127.0.0.1:1:1"])
    agree(t, "2. etcd down, file servers", path, port, True)
    log("etcd down: a pool without servers refused by -t and the start, one with servers "
        "accepted by both")

    server = etcd.EtcdServer(t.tmp, lambda argv, out: spawn(argv, out)).start()
    client = server.client
    url = "etcd://127.0.0.1:%d%s" % (server.port, KEY)
    path, port = conf(t.tmp, "up_absent", server.port, [])
    agree(t, "4. etcd up, no key", path, port, False, "pool chk", url, "does not exist yet")
    client.put(KEY, json.dumps({"servers": ["127.0.0.1:1:1 s0"]}))
    path, port = conf(t.tmp, "up_doc", server.port, [])
    before = client.prefix(KEY)
    rc, text = check(t, path)
    if rc != 0 or client.prefix(KEY) != before:
        fail("3. -t with etcd up: exit %d, etcd's keys under %s %r -> %r\n%s" % (
            rc, KEY, sorted(before), sorted(client.prefix(KEY)), text))
    agree(t, "3. etcd up, a document", path, port, True)
    client.put(KEY, json.dumps({"servers": ["no-such-host.invalid:6379:1 s0"]}))
    rc, text = check(t, path)
    if rc == 0 or "no-such-host.invalid" not in text:
        fail("3. -t of a document whose server does not resolve: exit %d\n%s" % (rc, text))
    server.stop()
    log("etcd up: the document's servers checked by -t; a missing key refused by both")
    return "-t and the start agree on 4 etcd cases"


if __name__ == "__main__":
    run_test(body, programs=("etcd",))

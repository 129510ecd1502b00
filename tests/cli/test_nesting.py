#!/usr/bin/python3 -B
# SPDX-License-Identifier: Apache-2.0
"""cli_nesting: the chash CLI refuses nested documents at once, naming the limit (issue 35).

usage: test_nesting.py CHASH

1. `chash lookup --config FILE` on config files of 1 MiB and 16 MiB whose servers nest block
   sequences ("- - - ..."): exit 1 with "FILE:3:129: nesting deeper than 64 levels, the limit
   (CH_CONFIG_MAX_DEPTH)".
2. A real etcd (taking writes up to 32 MiB) holding 16 MiB of '[' under a pool's key K, then
   under K/pending: `chash fleet status` reports the document invalid with its URL, line,
   column and the limit, in text and JSON; `chash fleet apply` reads K as status does and
   commits a valid document over it (no instances: at once).
3. `chash hotkeys --admin` against a stand-in admin port (a stdlib HTTP server) answering
   /-/hotkeys with 16 MiB of '[': refused naming the limit and the byte where it is crossed.
Each run is bounded (BOUND): a parse that does not return fails the test, it is no timing
assertion (before the limit, such a document took libyaml's scanner hours). Every chash run is
checked for sanitizer reports. A missing etcd skips (77), or fails when CI is set.
"""
import http.server
import json
import os
import subprocess
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "proxy"))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from proxyharness import (SANITIZER_MARKS, fail, log, run_test, sanitizer_env,  # noqa: E402
                          spawn, write_file)
import etcd  # noqa: E402

KEY = "/chash/pools/alpha"
BOUND = 30.0
LIMIT = "nesting deeper than 64 levels, the limit (CH_CONFIG_MAX_DEPTH)"


def run(chash, args, expect):
    """(stdout, stderr) of chash args, which must exit expect within BOUND seconds."""
    try:
        r = subprocess.run([chash] + args, capture_output=True, timeout=BOUND,
                           env=sanitizer_env())
    except subprocess.TimeoutExpired:
        fail("chash %s did not return within %g s" % (" ".join(args)[:200], BOUND))
    out, err = r.stdout.decode(), r.stderr.decode()
    for m in SANITIZER_MARKS:
        if m.decode() in err:
            fail("chash %s: sanitizer report:\n%s" % (" ".join(args), err[-3000:]))
    if r.returncode != expect:
        fail("chash %s exited %d, not %d\nstdout: %s\nstderr: %s" % (
            " ".join(args)[:200], r.returncode, expect, out[-2000:], err[-2000:]))
    return out, err


def body(t):
    chash = t.chash
    for size in (1 << 20, 16 << 20):
        head = "alpha:\n  servers:\n    "
        text = head + "- " * ((size - len(head)) // 2)
        path = write_file(os.path.join(t.tmp, "nested-%d.yml" % size), text)
        _, err = run(chash, ["lookup", "--config", path, "k"], 1)
        if "%s:3:129: %s" % (path, LIMIT) not in err:
            fail("lookup --config of %d bytes of nesting: %s" % (size, err[-1000:]))
    log("lookup --config: 1 MiB and 16 MiB of nesting refused at 3:129 naming the limit")

    server = etcd.EtcdServer(t.tmp, lambda argv, out: spawn(argv, out),
                             extra_args=["--max-request-bytes", str(32 << 20)]).start()
    client = etcd.EtcdClient(server.url, timeout=60.0)
    url = "etcd://127.0.0.1:%d%s" % (server.port, KEY)
    doc = "[" * (16 << 20)
    client.put(KEY, json.dumps({"servers": ["127.0.0.1:6379:1 s0"]}))
    for key, field in ((KEY + "/pending", "pending"), (KEY, "committed")):
        client.put(key, doc)
        want = "etcd://127.0.0.1:%d%s:1:65: %s" % (server.port, key, LIMIT)
        out, _ = run(chash, ["fleet", "status", "--etcd", url, "--json"], 0)
        got = json.loads(out).get(field) or {}
        if got.get("valid") is not False or got.get("error") != want:
            fail("fleet status --json, %s of 16 MiB of '[': %r" % (field, got))
        out, _ = run(chash, ["fleet", "status", "--etcd", url], 0)
        if want not in out:
            fail("fleet status, %s of 16 MiB of '[': %s" % (field, out[-1000:]))
        if key.endswith("/pending"):
            client.delete(key)
    log("fleet status: 16 MiB of '[' in K/pending and in K reported invalid naming the limit")

    pool = write_file(os.path.join(t.tmp, "new.yml"), "alpha:\n  membership: %s\n  servers:\n"
                      "    - 127.0.0.1:6379:1 s0\n" % url)
    # The way out: apply reads K as status does and commits a valid document over it. (No
    # instance is there to prepare, so --timeout is not waited out; it also bounds each etcd
    # request, at most 5 s: reading K's 19.5 MB took over 500 ms on a loaded box.)
    out, _ = run(chash, ["fleet", "apply", pool, "--timeout", "20000"], 0)
    if "committed epoch" not in out:
        fail("fleet apply over 16 MiB of '[' in K: %s" % out[-1000:])
    out, _ = run(chash, ["fleet", "status", "--etcd", url, "--json"], 0)
    if json.loads(out).get("committed", {}).get("valid") is not True:
        fail("fleet status after apply: %s" % out[-1000:])
    server.stop()

    class Nested(http.server.BaseHTTPRequestHandler):
        body = b"[" * (16 << 20)

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(self.body)))
            self.end_headers()
            self.wfile.write(self.body)

        def log_message(self, *args):
            pass

    admin = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Nested)
    threading.Thread(target=admin.serve_forever, daemon=True).start()
    try:
        _, err = run(chash, ["hotkeys", "--admin", "127.0.0.1:%d" % admin.server_address[1],
                             "--timeout", "20000"], 1)
    finally:
        admin.shutdown()
    if "JSON nested deeper than 64 levels, the limit, at byte 64" not in err:
        fail("hotkeys of 16 MiB of '[': %s" % err[-1000:])
    log("hotkeys: 16 MiB of '[' from the admin port refused naming the limit")
    return "nested documents refused by lookup --config, fleet status and hotkeys, none stalled"


if __name__ == "__main__":
    run_test(body, programs=("etcd",), binaries=(("chash", "chash"),))

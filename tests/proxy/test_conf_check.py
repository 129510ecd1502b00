#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_conf_check: `chash-proxy -t` and reloads tell the truth (issue 16, finding 7).

For each config below, `chash-proxy -t` and a real start must agree, each within a bound: both
refuse (exit 1, naming the pool or the file) or both accept. Before, -t said "syntax is ok" for
configs the proxy then refused (jump with weights, a weight of 2^31-1, servers or listen
addresses that do not resolve), and a FIFO as the config blocked both forever; a weight of
400000 on a ring passed and took seconds and a gigabyte to build: now refused with the
table's figure. A placement the library refuses is named with libchash's own reason at the
pool's line (jump with weights, maglev over more servers than its table, a weight above
haproxy@2's): before, "invalid argument" or a status name alone.

Then reloads through POST /-/reload: a file whose only change needs a restart (a new listen)
answers 409 naming it (before: 200 "unchanged"), and the config path replaced by a FIFO answers
400 "not a regular file" at once (before: the control thread blocked, and with it every later
reload, stats and metrics request).

Usage: test_conf_check.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server missing and CI unset).
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Proxy, fail, free_ports, log, run_test, sanitizer_env,  # noqa: E402
                          start_redises, write_file)
import promtext  # noqa: E402

BOUND = 10


def pool(listen, servers, extra=""):
    return "p:\n  listen: 127.0.0.1:%d\n  redis: true\n%s  servers:\n%s" % (
        listen, extra, "".join("   - %s\n" % s for s in servers))


def run(argv):
    try:
        r = subprocess.run(argv, capture_output=True, timeout=BOUND, env=sanitizer_env())
        return r.returncode, (r.stdout + r.stderr).decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        return None, "did not end within %d s" % BOUND


def post_reload(port):
    """POST /-/reload as curl sends it (Host: 127.0.0.1:port): (status, body)."""
    data = promtext.http(port, b"POST /-/reload HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % port)
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def body(t):
    proxy_exe, redis_server, tmp = t.proxy, t.programs["redis-server"], t.tmp
    (backend,) = start_redises(redis_server, tmp, 1)
    port = free_ports(1)[0]
    ok_server = backend.text + ":1"
    maglev_servers = ["127.0.%d.%d:6379:1" % (i // 250, i % 250 + 1) for i in range(66000)]
    cases = [
        # A placement the library refuses is named with libchash's reason (issue 35): which
        # argument and which limit, not "invalid argument".
        ("jump with weights", pool(port, [backend.text + ":3", "127.0.0.1:1:1"],
                                   "  distribution: jump\n"), False,
         '.yml:1: pool p: cannot build its placement: jump has no weights: every node must '
         'weigh the same, but node 1 ("127.0.0.1:1") weighs 1 and node 0'),
        ("maglev over more servers than its table", pool(port, maglev_servers,
                                                         "  distribution: maglev\n"), False,
         ".yml:1: pool p: cannot build its placement: maglev: table_size 65537 must be a prime "
         "greater than the node count, 66000 (e.g. 66029)"),
        ("a weight above haproxy@2's", pool(port, [ok_server, "127.0.0.1:1:300"],
                                            "  distribution: haproxy@2\n"), False,
         'cannot build its placement: haproxy@2: node 1 ("127.0.0.1:1") weighs 300: HAProxy\'s '
         'weights are 1 to 256'),
        ("a weight of 2^31-1 on a ring", pool(port, [backend.text + ":2147483647"],
                                             "  distribution: ring\n"), False, "pool p"),
        # 400000 x 160 points, 64 M: 488 MiB of ring and seconds to build (the library's
        # own bound is 64 M points): refused at once with the figure.
        ("a weight of 400000 on a ring", pool(port, [backend.text + ":400000", "127.0.0.1:1:1"],
                                              "  distribution: ring\n"), False, "488 MiB"),
        ("a server that does not resolve", pool(port, [ok_server, "no-such-host.invalid:6379:1"]),
         False, "no-such-host.invalid"),
        ("a listen address that does not resolve",
         pool(port, [ok_server]).replace("127.0.0.1:%d" % port, "no-such-host.invalid:%d" % port,
                                         1), False, "no-such-host.invalid"),
        # replicas need a walk (issue 26): under jump, which has none, refused at the key
        # (line 4, column 3), not silently served with one copy.
        ("replicas: 2 under jump", pool(port, [ok_server, "127.0.0.1:1:1"],
                                        "  replicas: 2\n  distribution: jump\n"), False,
         '.yml:4:3: pool p: "replicas: 2" needs a placement with a walk'),
        ("replicas: 2", pool(port, [ok_server, "127.0.0.1:1:1"], "  replicas: 2\n"), True, None),
        ("replicas: 2 with a gutter", "g:\n  listen: 127.0.0.1:%d\n  redis: true\n  servers:\n"
         "   - %s\n" % (free_ports(1)[0], ok_server) +
         pool(port, [ok_server, "127.0.0.1:1:1"], "  replicas: 2\n  gutter: g\n"), False,
         '.yml:10:11: pool p: "gutter" with "replicas: 2"'),
        ("a valid pool", pool(port, [ok_server]), True, None),
    ]
    fifo = os.path.join(tmp, "fifo.yml")
    os.mkfifo(fifo)
    results = []
    for what, text, valid, names in cases + [("a FIFO as the config", None, False,
                                              "not a regular file")]:
        path = fifo if text is None else write_file(os.path.join(tmp, "c%d.yml" % len(results)),
                                                    text)
        rc_t, out_t = run([proxy_exe, "-t", "-c", path])
        rc_s, out_s = run([proxy_exe, "-c", path, "-s", str(free_ports(1)[0]), "-a", "127.0.0.1",
                           "--threads", "1"]) if not valid else (None, "")
        if valid:
            if rc_t != 0:
                fail("-t refuses %s: %r" % (what, out_t))
            p = Proxy(proxy_exe, tmp, path, [("127.0.0.1", port)], label="valid").start()
            p.stop()
        else:
            if rc_t != 1 or (names and names not in out_t):
                fail("-t on %s: exit %r, %r (want 1, naming %r)" % (what, rc_t, out_t, names))
            if rc_s != 1:
                fail("the proxy on %s: exit %r, %r (want 1, as -t)" % (what, rc_s, out_s))
        results.append(what)

    # Reloads.
    mport = free_ports(1)[0]
    conf = write_file(os.path.join(tmp, "live.yml"), pool(port, [ok_server]))
    p = Proxy(proxy_exe, tmp, conf, [("127.0.0.1", port)], label="live",
              extra_args=("--metrics-port", str(mport))).start()
    write_file(conf, pool(free_ports(1)[0], [ok_server]))
    code, b = post_reload(mport)
    if code != 409 or b"needs a restart" not in b or b"listen" not in b:
        fail("a reload whose only change is a new listen: %d %r (want 409 naming listen)" % (
            code, b))
    write_file(conf, pool(port, [ok_server, "127.0.0.1:1:1"],
                          "  replicas: 2\n  distribution: jump\n"))
    code, b = post_reload(mport)
    # refused as the other pools the proxy cannot build (500), naming the key's place
    if code == 200 or b"needs a placement with a walk" not in b or b"live.yml:4:3" not in b:
        fail("a reload to replicas: 2 under jump: %d %r (want a refusal naming live.yml:4:3)" % (
            code, b))
    os.unlink(conf)
    os.mkfifo(conf)
    code, b = post_reload(mport)
    if code != 400 or b"not a regular file" not in b:
        fail("a reload of a FIFO: %d %r (want 400 'not a regular file')" % (code, b))
    code, _h, _b = promtext.get(mport, "/metrics")
    if code != 200:
        fail("/metrics after the refused reloads: %d" % code)
    p.stop()
    log("-t and a start agree on %d configs; reloads answer 409 for a restart-only change, 400 "
        "for replicas and for a FIFO" % len(results))
    return "%d configs, 3 reloads" % len(results)


if __name__ == "__main__":
    run_test(body)

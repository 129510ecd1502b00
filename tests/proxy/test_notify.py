#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_notify: chash-proxy speaks sd_notify(3) to a Type=notify (or notify-reload) unit's
manager (issue 28).

The test plays systemd: it binds an AF_UNIX datagram socket and starts the proxy with
NOTIFY_SOCKET naming it (--metrics-port on).
- READY=1 arrives with MAINPID= the proxy's pid and a STATUS=, and at that moment a client
  connects to the pool's listener and is answered (PING); nothing came before READY=1.
- SIGHUP: RELOADING=1 with MONOTONIC_USEC= between the monotonic clock (this script's, the
  same CLOCK_MONOTONIC) before the signal and after the message, then READY=1.
- POST /-/reload: the same pair, the second READY=1 after the HTTP answer's reload.
- A reload of an invalid file: RELOADING=1, then READY=1 all the same (the old configuration
  serves), its STATUS= saying it failed.
- SIGTERM: STOPPING=1, then a clean exit.
- Without NOTIFY_SOCKET the proxy starts and stops as before (a no-op).
Before: no message at all (the first wait fails).

Usage: test_notify.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail.
"""
import http.client
import os
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Proxy, Resp, fail, free_ports, log, run_test,  # noqa: E402
                          write_file)

BOUND = 15.0


class Manager:
    """The service manager's end: the datagrams sent to NOTIFY_SOCKET, parsed."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.path = path

    def next(self, what):
        """The next message as {key: value}; fails after BOUND s naming what was awaited."""
        self.sock.settimeout(BOUND)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            fail("no sd_notify message within %g s: waiting for %s" % (BOUND, what))
        fields = {}
        for line in data.decode("utf-8", "replace").split("\n"):
            if line:
                k, _, v = line.partition("=")
                fields[k] = v
        return fields

    def expect(self, key, what):
        msg = self.next(what)
        if msg.get(key) != "1":
            fail("%s: expected %s=1, got %r" % (what, key, msg))
        return msg

    def quiet(self):
        """No message is waiting."""
        self.sock.settimeout(0)
        try:
            data = self.sock.recv(65536)
        except BlockingIOError:
            return None
        return data


def monotonic_usec():
    return int(time.clock_gettime(time.CLOCK_MONOTONIC) * 1e6)


def post_reload(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=BOUND)
    c.request("POST", "/-/reload", headers={"Host": "127.0.0.1:%d" % port})
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, body


def reload_pair(mgr, what, before):
    msg = mgr.expect("RELOADING", what)
    usec = msg.get("MONOTONIC_USEC", "")
    if not usec.isdigit() or not before <= int(usec) <= monotonic_usec():
        fail("%s: MONOTONIC_USEC=%r is not the monotonic clock between the request (%d) and "
             "now" % (what, usec, before))
    return mgr.expect("READY", what + ", then READY=1")


def body(t):
    port, mport = free_ports(2)
    conf = write_file(os.path.join(t.tmp, "n.yml"), "\n".join([
        "n:", "  listen: 127.0.0.1:%d" % port, "  redis: true", "  servers:",
        "   - 127.0.0.1:1:1", ""]))
    mgr = Manager(os.path.join(t.tmp, "notify.sock"))
    os.environ["NOTIFY_SOCKET"] = mgr.path
    p = Proxy(t.proxy, t.tmp, conf, [], label="notify",
              extra_args=["--metrics-port", str(mport)])
    p.start()       # listens=[]: returns once the stats port accepts (bound before READY)
    del os.environ["NOTIFY_SOCKET"]
    ready = mgr.expect("READY", "the start")
    if ready.get("MAINPID") != str(p.proc.pid) or not ready.get("STATUS"):
        fail("READY=1 without MAINPID=%d and a STATUS=: %r" % (p.proc.pid, ready))
    with Resp(("127.0.0.1", port)) as c:
        if c.call("PING") != b"PONG":
            fail("a client right after READY=1 is not answered")
    log("READY=1 (%s), MAINPID=%s; a client then answered" % (ready["STATUS"], ready["MAINPID"]))

    before = monotonic_usec()
    p.proc.send_signal(signal.SIGHUP)
    again = reload_pair(mgr, "SIGHUP", before)
    if "applied" not in again.get("STATUS", ""):
        fail("READY=1 after a good SIGHUP reload has STATUS=%r" % again.get("STATUS"))

    before = monotonic_usec()
    status, text = post_reload(mport)
    if status != 200:
        fail("POST /-/reload answered %d %r" % (status, text))
    reload_pair(mgr, "POST /-/reload", before)

    write_file(conf, "n:\n  listen: [\n")
    before = monotonic_usec()
    status, text = post_reload(mport)
    if status != 400:
        fail("POST /-/reload of an invalid file answered %d %r" % (status, text))
    bad = reload_pair(mgr, "a reload of an invalid file", before)
    if "failed" not in bad.get("STATUS", ""):
        fail("READY=1 after a failed reload has STATUS=%r" % bad.get("STATUS"))
    log("RELOADING=1 (MONOTONIC_USEC on the clock), READY=1 around SIGHUP, POST /-/reload and "
        "a failed reload (%s)" % bad["STATUS"])

    extra = mgr.quiet()
    if extra is not None:
        fail("an unexpected message before SIGTERM: %r" % extra)
    p.proc.send_signal(signal.SIGTERM)
    mgr.expect("STOPPING", "SIGTERM")
    rc = p.proc.wait(timeout=BOUND)
    if rc != 0 or p.sanitizer_report():
        fail("the proxy exited with %s after SIGTERM; %s" % (rc, p.sanitizer_report()))

    q = Proxy(t.proxy, t.tmp, write_file(conf, "n:\n  listen: 127.0.0.1:%d\n  redis: true\n"
                                               "  servers:\n   - 127.0.0.1:1:1\n" % port),
              [("127.0.0.1", port)], label="plain").start()
    q.stop()
    if mgr.quiet() is not None:
        fail("a proxy started without NOTIFY_SOCKET sent a message")
    return "READY, RELOADING/READY x3, STOPPING; nothing without NOTIFY_SOCKET"


if __name__ == "__main__":
    run_test(body, programs=())

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_signal_level: SIGTTIN and SIGTTOU change the log level at once, whatever the control
thread is doing, as nutcracker's handlers do (issue 28; twemproxy's test_signal).

1. The control thread blocked: three pools name an "etcd" that accepts connections and never
   answers, so the start blocks in its first request to it (3 s per pool, the start's bound per
   request) before any event loop runs. Once that connection is accepted the test sends
   SIGTTIN, SIGTTIN, SIGTTOU: the three lines (levels 6, 7, 6) must be in the log, in
   px_log_write's format ("[YYYY-MM-DD HH:MM:SS.mmm] NOTICE ..."), their time within 10 s of the
   "starting" line's (localtime_r's), before the start's first line after the etcd request;
   then SIGTERM, still fatal at that point, kills the proxy (proof it was still blocked).
2. kill -TTIN; kill -TERM on a running proxy, both pending at once (every thread of the proxy
   and this script on one CPU, the proxy's SCHED_IDLE, so it cannot run between the two
   kill(2)s; the kernel then delivers SIGTERM, the lower number, first): the level line is in
   the log and the proxy exits cleanly.
Before: libuv watchers on the control loop changed the level. In 1 SIGTTIN came before the loop
existed and stopped the process (its default action), nothing logged; in 2 SIGTERM's callback
ran first and closed the SIGTTIN watcher, whose pending signal was dropped.

Usage: test_signal_level.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail.
"""
import datetime
import os
import re
import signal
import socket
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Proxy, fail, free_ports, log, poll_until, read_text,  # noqa: E402
                          run_test, sanitizer_env, spawn, wait_until, write_file)

BOUND = 10.0
LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\.\d{3}\] (\w+) (.*)$")


class SilentEtcd:
    """A TCP listener that accepts and never answers (an etcd whose process is stuck)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = []
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(c)     # held open, never read nor answered

    def close(self):
        self.sock.close()
        for c in self.accepted:
            c.close()


def parse(text):
    """[(datetime, level, message)] of the log's lines in order; fails on a malformed one."""
    out = []
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            fail("a log line not in the log's format: %r" % line)
        out.append((datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S"), m.group(2),
                    m.group(3)))
    return out


def check_lines(text, want):
    """The log's level lines are want, NOTICE, stamped within BOUND s of its "starting" line;
    returns the parsed lines."""
    lines = parse(text)
    starting = [ts for ts, _, msg in lines if msg.startswith("chash-proxy-")]
    levels = [(ts, lvl, msg) for ts, lvl, msg in lines if ": log level now " in msg]
    if [msg for _, _, msg in levels] != want or any(lvl != "NOTICE" for _, lvl, _ in levels):
        fail("the level lines are %r, not %r (NOTICE); log:\n%s" % (levels, want, text))
    if not starting:
        fail("no 'starting' line in the log:\n%s" % text)
    for ts, _, msg in levels:
        if abs((ts - starting[0]).total_seconds()) > BOUND:
            fail("%r is stamped %s, the start %s: the handler's clock is not the log's" % (
                msg, ts, starting[0]))
    return lines


def blocked_start(t):
    etcd = SilentEtcd()
    ports = free_ports(4)
    text = []
    for i in range(3):
        text += ["p%d:" % i, "  listen: 127.0.0.1:%d" % ports[i], "  redis: true",
                 "  membership: etcd://127.0.0.1:%d/chash/pools/p%d" % (etcd.port, i),
                 "  servers:", "   - 127.0.0.1:1:1"]
    conf = write_file(os.path.join(t.tmp, "blocked.yml"), "\n".join(text) + "\n")
    logpath = os.path.join(t.tmp, "blocked.log")
    p = spawn([t.proxy, "-c", conf, "-o", logpath, "-s", str(ports[3]), "-a", "127.0.0.1"],
              os.path.join(t.tmp, "blocked.stdout"), env=sanitizer_env())
    wait_until(lambda: etcd.accepted or p.poll() is not None, BOUND,
               "the proxy's first request to etcd")
    if p.poll() is not None:
        fail("1. the proxy exited (%s) before its first request to etcd:\n%s" % (
            p.returncode, read_text(logpath)[-1500:]))
    want = ["SIGTTIN: log level now 6", "SIGTTIN: log level now 7", "SIGTTOU: log level now 6"]
    for sig, line in zip((signal.SIGTTIN, signal.SIGTTIN, signal.SIGTTOU), want):
        os.kill(p.pid, sig)
        if not poll_until(lambda: line in read_text(logpath), BOUND):
            fail("1. %r not logged within %g s while the start waits on etcd; the proxy is %s;"
                 " log:\n%s" % (line, BOUND, "alive" if p.poll() is None else
                                 "gone (%s)" % p.returncode, read_text(logpath)[-1500:]))
    os.kill(p.pid, signal.SIGTERM)
    try:
        rc = p.wait(timeout=BOUND)
    except subprocess.TimeoutExpired:
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=BOUND)
        fail("1. the proxy did not exit within %g s of SIGTERM; log:\n%s" % (
            BOUND, read_text(logpath)[-1500:]))
    etcd.close()
    text = read_text(logpath)
    if rc != -signal.SIGTERM:
        fail("1. the proxy exited with %s, not of SIGTERM: the start was no longer blocked on "
             "etcd, so this run proves nothing; log:\n%s" % (rc, text))
    lines = check_lines(text, want)
    first_after = next((i for i, (_, _, msg) in enumerate(lines) if "membership" in msg),
                       len(lines))
    last_level = max(i for i, (_, _, msg) in enumerate(lines) if ": log level now " in msg)
    if last_level > first_after:
        fail("1. the level lines came after the start's etcd request had ended (%r): the "
             "control thread was not blocked then" % lines[first_after][2])
    log("1. SIGTTIN, SIGTTIN, SIGTTOU while the start waits on etcd: levels 6, 7, 6 logged at "
        "once; SIGTERM then fatal")


def one_cpu(pid):
    """Every thread of pid and this script on this script's first CPU, pid's threads
    SCHED_IDLE (they never preempt this script). Returns how to undo it (None when the kernel
    refused: then nothing was changed that matters)."""
    cpus = os.sched_getaffinity(0)
    tids = [int(tid) for tid in os.listdir("/proc/%d/task" % pid)]

    def undo():
        for tid in tids:
            try:
                os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
                os.sched_setaffinity(tid, cpus)
            except OSError:
                pass     # a thread gone meanwhile; one left SCHED_IDLE only exits slower
        os.sched_setaffinity(0, cpus)
    try:
        os.sched_setaffinity(0, {min(cpus)})
        for tid in tids:
            os.sched_setaffinity(tid, {min(cpus)})
            os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
    except OSError:
        undo()
        return None
    return undo


def running(t):
    port, = free_ports(1)
    conf = write_file(os.path.join(t.tmp, "run.yml"), "\n".join([
        "run:", "  listen: 127.0.0.1:%d" % port, "  redis: true", "  servers:",
        "   - 127.0.0.1:1:1", ""]))
    p = Proxy(t.proxy, t.tmp, conf, [("127.0.0.1", port)], label="run").start()
    undo = one_cpu(p.proc.pid)
    os.kill(p.proc.pid, signal.SIGTTIN)
    os.kill(p.proc.pid, signal.SIGTERM)
    if undo is not None:
        undo()          # the shutdown at full speed again, however loaded the machine
    pinned = undo is not None
    try:
        rc = p.proc.wait(timeout=BOUND)
    except subprocess.TimeoutExpired:
        fail("2. the proxy did not exit within %g s of SIGTERM" % BOUND)
    text = read_text(p.log)
    if rc != 0:
        fail("2. the proxy exited with %s after SIGTERM; log:\n%s" % (rc, text[-1500:]))
    check_lines(text, ["SIGTTIN: log level now 6"])
    log("2. kill -TTIN; kill -TERM (%s): the level line logged, a clean exit" % (
        "both pending at once: one CPU, the proxy SCHED_IDLE" if pinned else
        "the kernel refused the pinning: their order left to the scheduler"))


def body(t):
    blocked_start(t)
    running(t)
    return "level changes logged while the control thread was blocked or stopping"


if __name__ == "__main__":
    run_test(body, programs=())

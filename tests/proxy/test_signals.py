#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_signals: chash-proxy's signals, as nutcracker's and as docs/PROXY.md lists them
(issue 17, part 2).

- SIGUSR2: logged and ignored; the proxy keeps serving (before: it killed it).
- SIGUSR1 (logrotate's, as nginx's): the log file is reopened and nothing else: with the file
  moved away, a new one is created at the path and takes the following lines, the stats'
  "reloads" stays as it was and an edit of the config waiting in the file (a second server) is
  not applied (issue 28; before: logged and ignored, the proxy kept writing to the moved file).
- SIGTTIN / SIGTTOU: the log level up / down by one, logged; at level 7 (debug) a debug line
  shows up where none did at 5 (before: nothing happened).
- SIGHUP with the log file moved away (nutcracker's rotation): a new log file is created at the
  path and takes the new lines (the reload's), the moved one takes none (before: the proxy kept
  writing to the moved file); the pending edit is applied now ("reloads" one up, two servers).
- SIGABRT (a crash): the proxy dies of the signal and the log holds a "fatal signal 6,
  backtrace" line with frames (before: nothing in the log).

Usage: test_signals.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server missing and CI unset).
"""
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Proxy, Resp, fail, free_ports, log, pool_yaml, run_test,  # noqa: E402
                          start_redises, wait_until, write_file)

BOUND = 10.0


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""


def wait_for(path, needle, what):
    wait_until(lambda: needle in read(path), BOUND, lambda: "%s: %r in %s; it holds:\n%s" % (
        what, needle, path, read(path)[-1500:].decode("utf-8", "replace")))


def servers_of(stats, pool):
    """The server names of pool in nutcracker's stats JSON (its entries that are objects)."""
    return sorted(k for k, v in stats[pool].items() if isinstance(v, dict))


def body(t):
    proxy_exe, redis_server, tmp = t.proxy, t.programs["redis-server"], t.tmp
    backend, second = start_redises(redis_server, tmp, 2)
    port = free_ports(1)[0]
    conf = write_file(os.path.join(tmp, "sig.yml"), pool_yaml("sig", port, [(backend.text, 1,
                                                                              None)]))
    p = Proxy(proxy_exe, tmp, conf, [("127.0.0.1", port)], label="sig").start()
    addr = ("127.0.0.1", port)
    with Resp(addr) as c:
        p.proc.send_signal(signal.SIGUSR2)
        wait_for(p.log, b"(SIGUSR2) received: ignored", "SIGUSR2")
        if c.call("PING") != b"PONG" or not p.alive():
            fail("the proxy does not serve after SIGUSR2")
        # SIGUSR1: the log reopened, nothing reloaded, with an edit waiting in the file.
        reloads = p.stats_json()["reloads"]
        before = servers_of(p.stats_json(), "sig")
        if before != [backend.text]:
            fail("the stats list servers %r, not the file's one (%s)" % (before, backend.text))
        write_file(conf, pool_yaml("sig", port, [(backend.text, 1, None),
                                                 (second.text, 1, None)]))
        usr1_moved = p.log + ".usr1"
        os.rename(p.log, usr1_moved)
        p.proc.send_signal(signal.SIGUSR1)
        wait_for(p.log, b"SIGUSR1: log file", "a new log file after SIGUSR1 and a rotation")
        if b"SIGUSR1" in read(usr1_moved):
            fail("the moved log file took the SIGUSR1 line")
        if c.call("PING") != b"PONG" or not p.alive():
            fail("the proxy does not serve after SIGUSR1")
        st = p.stats_json()
        if st["reloads"] != reloads or servers_of(st, "sig") != before:
            fail("SIGUSR1 reloaded: reloads %s -> %s, servers %r -> %r" % (
                reloads, st["reloads"], before, servers_of(st, "sig")))
        if b"reload" in read(p.log):
            fail("SIGUSR1 logged a reload:\n%s" % read(p.log).decode("utf-8", "replace"))
        # Log level: 5 -> 7 -> 6. A reload logs an INFO line only above 5: "reading" is NOTICE,
        # a client's protocol error is INFO.
        p.proc.send_signal(signal.SIGTTIN)
        wait_for(p.log, b"SIGTTIN: log level now 6", "SIGTTIN")
        p.proc.send_signal(signal.SIGTTIN)
        wait_for(p.log, b"SIGTTIN: log level now 7", "SIGTTIN")
        with Resp(addr) as bad:
            bad.send(b"*1\r\n$x\r\n")
            try:
                bad.read()
            except Exception:
                pass
        wait_for(p.log, b"Protocol error", "an INFO line at level 7")
        p.proc.send_signal(signal.SIGTTOU)
        wait_for(p.log, b"SIGTTOU: log level now 6", "SIGTTOU")
        # Rotation: the file moved away, then SIGHUP.
        moved = p.log + ".1"
        os.rename(p.log, moved)
        p.proc.send_signal(signal.SIGHUP)
        wait_for(p.log, b"reload done", "SIGHUP after a rotation")
        if b"reload done" in read(moved):
            fail("the moved log file still took the reload's lines")
        st = p.stats_json()
        want = sorted([backend.text, second.text])
        if st["reloads"] != reloads + 1 or servers_of(st, "sig") != want:
            fail("SIGHUP: reloads %s -> %s (want one more), servers %r (want %r)" % (
                reloads, st["reloads"], servers_of(st, "sig"), want))
        if c.call("PING") != b"PONG":
            fail("the proxy does not serve after SIGHUP")
    p.stop()

    # A crash leaves a line in the log.
    q = Proxy(proxy_exe, tmp, conf, [("127.0.0.1", port)], label="crash").start()
    q.proc.send_signal(signal.SIGABRT)
    try:
        rc = q.proc.wait(timeout=BOUND)
    except Exception:
        fail("the proxy did not die of SIGABRT within %g s" % BOUND)
    if rc != -signal.SIGABRT:
        fail("after SIGABRT the proxy exited with %r, not the signal" % rc)
    text = read(q.log)
    if b"fatal signal 6, backtrace:" not in text:
        fail("no crash line in the log after SIGABRT:\n%s" % text[-1500:].decode("utf-8",
                                                                                "replace"))
    frames = text.split(b"fatal signal 6, backtrace:", 1)[1].strip().split(b"\n")
    if len(frames) < 2:
        fail("the crash line has %d frames" % len(frames))
    log("USR2 ignored, USR1 reopens a rotated log without a reload, TTIN/TTOU change the level, "
        "HUP reopens a rotated log and reloads, ABRT logs a backtrace (%d frames)" % len(frames))
    return "6 signals as documented"


if __name__ == "__main__":
    run_test(body)

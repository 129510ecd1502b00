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
- SIGSEGV, SIGBUS, SIGABRT sent to a running proxy (as `kill -SEGV` does): the -o log holds
  nutcracker's line "signal 11 (SEGV) received, core dumping" (BUS 7, ABRT 6), the sender's
  pid and a backtrace, and the proxy dies of that signal (issue 35; before, in the sanitizer
  build the tests use: SEGV and BUS left no line in the log, the sanitizer's report of a fault
  that never happened went to stderr and the proxy exited 1).
- twemproxy's test_signal (tests/test_redis/test_basic.py): the log file removed, then HUP,
  HUP, TTIN, TTOU, SEGV (each once the previous is in the log), and the log holds HUP, TTIN,
  TTOU and SEGV (before: no SEGV in the sanitizer build).
Core dumps are off for the proxies this test starts (RLIMIT_CORE 0: the default action is
still the one that dumps core, only no file is written). Each of those proxies has one worker and
answers a PING through it before a fatal signal is sent: a signal that lands in a thread
ThreadSanitizer's runtime is still starting fails the runtime's own check (CallUserSignalHandler:
"thr->slot != 0") before any handler runs, in about 1 of 20 starts under load (the TSan build
of `make test-tsan`).

Usage: test_signals.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server missing and CI unset).
"""
import os
import resource
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

    # A fatal signal leaves nutcracker's line in the log, then the proxy dies of it.
    resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    frames = {}
    for sig, name in ((signal.SIGSEGV, "SEGV"), (signal.SIGBUS, "BUS"),
                      (signal.SIGABRT, "ABRT")):
        frames[name] = fatal(proxy_exe, tmp, conf, port, sig, name)
    twemproxy_test_signal(proxy_exe, tmp, conf, port)
    log("USR2 ignored, USR1 reopens a rotated log without a reload, TTIN/TTOU change the level, "
        "HUP reopens a rotated log and reloads; SEGV, BUS, ABRT logged (frames %r), each "
        "fatal; twemproxy's test_signal" % frames)
    return "9 signals as documented"


def died_of(q, sig, name):
    try:
        rc = q.proc.wait(timeout=BOUND)
    except Exception:
        fail("the proxy did not die of SIG%s within %g s" % (name, BOUND))
    if rc != -sig:
        fail("after SIG%s the proxy exited with %r, not the signal; stderr:\n%s" % (
            name, rc, read(q.stderr)[-1500:].decode("utf-8", "replace")))


def running(proxy_exe, tmp, conf, port, label):
    """A proxy with one worker, which has answered a PING (so its threads have started)."""
    q = Proxy(proxy_exe, tmp, conf, [("127.0.0.1", port)], label=label,
              extra_args=["--threads", "1"]).start()
    with Resp(("127.0.0.1", port)) as c:
        if c.call("PING") != b"PONG":
            fail("%s: no PONG" % label)
    return q


def fatal(proxy_exe, tmp, conf, port, sig, name):
    """Sends sig to a running proxy: its log must hold the line, the sender and a backtrace,
    and the proxy die of the signal. Returns the backtrace's frame count."""
    q = running(proxy_exe, tmp, conf, port, "crash-" + name)
    q.proc.send_signal(sig)
    died_of(q, sig, name)
    text = read(q.log)
    line = b"signal %d (%s) received from pid %d, core dumping" % (sig, name.encode(),
                                                                  os.getpid())
    if line not in text:
        fail("no %r in the log after SIG%s:\n%s" % (line, name,
                                                   text[-1500:].decode("utf-8", "replace")))
    after = text.split(line, 1)[1].split(b"\n")
    if not after[0].startswith(b"; backtrace:") or len([f for f in after[1:] if f]) < 2:
        fail("SIG%s: no backtrace after the line: %r" % (name, after[:4]))
    return len([f for f in after[1:] if f])


def twemproxy_test_signal(proxy_exe, tmp, conf, port):
    """twemproxy's test_signal: the log file removed, then HUP, HUP, TTIN, TTOU, SEGV, and the
    log holds HUP, TTIN, TTOU and SEGV. That test sends each with a pkill of its own and reads
    the log 0.3 s after the last; here each is sent once the previous one is in the log (HUP's
    reload runs on the control thread's loop), and the log read once the proxy has died."""
    q = running(proxy_exe, tmp, conf, port, "twemproxy")
    os.unlink(q.log)
    for sig, needle, count in ((signal.SIGHUP, b"SIGHUP: log file", 1),
                               (signal.SIGHUP, b"SIGHUP: log file", 2),
                               (signal.SIGTTIN, b"SIGTTIN", 1), (signal.SIGTTOU, b"SIGTTOU", 1)):
        q.proc.send_signal(sig)
        wait_until(lambda: read(q.log).count(needle) >= count, BOUND,
                   lambda: "%r x%d in the log after %s" % (needle, count, sig.name))
    q.proc.send_signal(signal.SIGSEGV)
    died_of(q, signal.SIGSEGV, "SEGV")
    text = read(q.log)
    for word in (b"HUP", b"TTIN", b"TTOU", b"SEGV"):
        if word not in text:
            fail("twemproxy's test_signal: no %r in the log:\n%s" % (
                word, text[-1500:].decode("utf-8", "replace")))


if __name__ == "__main__":
    run_test(body)

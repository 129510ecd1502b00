#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Binary memcached clients against text clients on the same chash-proxy pool: CPU per request
(issue 39).

3 memcacheds behind one chash-proxy (default threads, a `redis: false` pool, ketama, md5);
bench/mc_load (-c 50, keys key:<0..99999>, 32-byte values) drives it in the text protocol and,
with -b, in the binary one, on the same pool: get (text "get k"; binary one GETK), set (text
"set"; binary SET with flags and expiry) and a 10-key multiget of random keys over the servers
(text "get k1 .. k10"; binary 10 GETKQ and a NOOP, as libmemcached sends it; ONE request either
way), each without pipelining and with -P 16. The key space is filled first, so every get hits
(a miss or an error reply stops the bench). The proxy's CPU time (utime + stime, /proc/PID/stat)
during a run divided by its requests is the cost. Each round runs, per cell, text, binary, text
back to back: the ratio is the binary run's cost over the mean of the two text runs around it
(paired, so a slow phase of a shared box hits both sides), its median over the rounds printed
against the goal (<= 1.1x), MET or MISSED.

What the ratio holds: a binary request is translated into a meta one at the edge and its reply
back into a binary response (one more copy per reply), and binary gets are meta gets to the
memcacheds, so they are neither joined with other gets in flight (text gets are, on a memcached
connection) nor served from the near cache (off here: no hot_cache).

The noise: the two text runs of a round are the same thing measured twice; their ratio's median
distance from 1 is printed beside the ratio, so a ratio within it of 1 is within this box's
noise. (Instruction counts would be steadier, but this kind of machine has no hardware counters:
perf stat -e instructions is not supported here.)

usage: bench/proxy/bench_mc_binary.py [--build build/release] [--rounds 5] [--n1 N] [--n16 N]
"""
import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from benchutil import Procs, cpu_seconds, free_ports, loadavg, mc_ping, say  # noqa: E402

RUN_TIMEOUT = 300
GOAL = 1.1
CELLS = ["get", "set", "mget"]  # mc_load -t; mget: 10 keys
LABEL = {"get": "get", "set": "set", "mget": "mget10"}
PROCS = Procs("mc_binary")
die, start = PROCS.die, PROCS.start


def wait_ping(port, what):
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if mc_ping(port):
            return
        time.sleep(0.05)
    die("%s on port %d does not answer" % (what, port))


def run(mc_load, port, binary, cmd, pipeline, n, pid, sequential=False):
    argv = [mc_load, "-p", str(port), "-c", "50", "-n", str(n), "-r", "100000", "-d", "32",
            "-k", "10", "-t", cmd, "-P", str(pipeline), "-T", "60"]
    argv += (["-b"] if binary else []) + (["-s"] if sequential else [])
    c0 = cpu_seconds(pid)
    out = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    cpu = cpu_seconds(pid) - c0
    if out.returncode != 0:
        die("%s failed: %s" % (" ".join(argv), out.stderr.strip()))
    kv = None
    for line in out.stdout.splitlines():
        if line.startswith("mc_load "):
            kv = dict(f.split("=", 1) for f in line.split()[1:])
    if kv is None:
        die("no result line from mc_load: %r" % out.stdout)
    if int(kv["requests"]) != n or int(kv["errors"]) or int(kv["misses"]):
        die("%s: %d requests wanted, every get a hit: %s" % (" ".join(argv), n, out.stdout))
    return cpu / n * 1e6, float(kv["rps"])  # microseconds of proxy CPU per request


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n1", type=int, default=100000,
                    help="requests per get/set run without pipelining (mget: half)")
    ap.add_argument("--n16", type=int, default=700000,
                    help="requests per get/set run with -P 16 (mget: an eighth)")
    args = ap.parse_args()
    if args.rounds < 1:
        die("--rounds must be at least 1")
    proxy_bin = os.path.join(args.build, "proxy", "chash-proxy")
    mc_load = os.path.abspath(os.path.join(args.build, "bench", "mc_load"))
    if shutil.which("memcached") is None:
        die("memcached not found (scripts/bootstrap installs it)")
    for prog in (proxy_bin, mc_load):
        if not os.access(prog, os.X_OK):
            die("%s not found: build it first (make)" % prog)
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, lambda *_: die("interrupted"))
    tmp = tempfile.mkdtemp(prefix="bench-mc-binary-")
    ports = free_ports(4)
    backends, listen = ports[:3], ports[3]
    user = ["-u", "root"] if os.geteuid() == 0 else []  # memcached refuses root without -u
    for p in backends:
        start(["memcached", "-l", "127.0.0.1", "-p", str(p), "-U", "0", "-m", "64"] + user,
              os.path.join(tmp, "memcached-%d.log" % p))
    for p in backends:
        wait_ping(p, "memcached")
    conf = os.path.join(tmp, "proxy.yml")
    with open(conf, "w") as f:
        f.write("bench:\n  listen: 127.0.0.1:%d\n  redis: false\n  hash: md5\n"
                "  distribution: ketama\n  timeout: 5000\n  servers:\n" % listen)
        for i, p in enumerate(backends):
            f.write("   - 127.0.0.1:%d:1 s%d\n" % (p, i))
    proxy = start([proxy_bin, "-c", conf, "-s", str(free_ports(1)[0])],
                  os.path.join(tmp, "proxy.log"))
    wait_ping(listen, "chash-proxy")
    # The data: every key the gets and multigets name, once, in sequence.
    run(mc_load, listen, False, "set", 16, 100000, proxy.pid, sequential=True)

    n = {("get", 1): args.n1, ("set", 1): args.n1, ("mget", 1): args.n1 // 2,
         ("get", 16): args.n16, ("set", 16): args.n16, ("mget", 16): args.n16 // 8}
    say("chash-proxy, binary memcached clients against text clients on one pool (3 memcacheds, "
        "mc_load -c 50 [-b]); load %s" % loadavg())
    say("proxy CPU per request (us) and rps, medians of %d rounds; ratio: the binary run over "
        "the mean of the text runs just before and after it, median of the rounds; noise: those "
        "two text runs' own ratio, median distance from 1" % args.rounds)
    samples, ratios, controls = {}, {}, {}
    for _r in range(args.rounds):
        for cmd in CELLS:
            for pipeline in (1, 16):
                m = n[(cmd, pipeline)]
                a = run(mc_load, listen, False, cmd, pipeline, m, proxy.pid)
                b = run(mc_load, listen, True, cmd, pipeline, m, proxy.pid)
                a2 = run(mc_load, listen, False, cmd, pipeline, m, proxy.pid)
                key = (cmd, pipeline)
                samples.setdefault(key + (False,), []).extend([a, a2])
                samples.setdefault(key + (True,), []).append(b)
                ratios.setdefault(key, []).append(b[0] / ((a[0] + a2[0]) / 2))
                controls.setdefault(key, []).append(a2[0] / a[0])
    if proxy.poll() is not None:
        die("chash-proxy exited during the runs")
    missed = []
    say("%-8s %-3s %9s %9s %10s %10s %7s %7s %6s" % ("command", "-P", "text us", "binary us",
                                                      "text rps", "binary rps", "ratio",
                                                      "noise", "goal"))
    for cmd in CELLS:
        for pipeline in (1, 16):
            key = (cmd, pipeline)
            text, binary = samples[key + (False,)], samples[key + (True,)]
            ratio = statistics.median(ratios[key])
            noise = statistics.median(abs(c - 1) for c in controls[key])
            ok = ratio <= GOAL
            if not ok:
                missed.append("%s -P %d" % (LABEL[cmd], pipeline))
            say("%-8s %-3d %9.2f %9.2f %10.0f %10.0f %7.3f %6.1f%% %6s" % (
                LABEL[cmd], pipeline, statistics.median(c for c, _ in text),
                statistics.median(c for c, _ in binary), statistics.median(x for _, x in text),
                statistics.median(x for _, x in binary), ratio, 100 * noise,
                "MET" if ok else "MISSED"))
    say("goal: binary CPU per request <= %.1fx text's in every cell: %s" % (
        GOAL, "MET" if not missed else "MISSED in " + ", ".join(missed)))
    PROCS.stop()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

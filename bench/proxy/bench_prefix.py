#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Prefix routing's cost: CPU per request through a listener with 1 and with 20 prefixes
against a pool without routes (issue 40, item 1).

3 redis-servers (no persistence) behind one chash-proxy (default threads) with three
listeners: "plain", a pool of the 3 servers (ketama, md5) without routes; "r1", whose routes
send "key:" to pool "target" (the same 3 servers, same placement) with a catch-all to it; "r20",
20 prefixes, 19 of them decoys sharing the first byte 'k' with "key:" (the worst case of the
prefix table, which scans one first byte's prefixes, longest first), and the catch-all.
redis-benchmark (-c 50) drives each with GET and SET of key:<0..99999> and a 10-key MGET (its
keys all in one pool: handed over whole), without pipelining and with -P 16. The proxy's CPU
time (utime + stime, /proc/PID/stat) during a run divided by its requests is the cost. Each
round runs, per cell, plain, r1, r20, plain back to back: a ratio is the routed run's cost over
the mean of the two plain runs around it (paired, so a slow phase of a shared box hits both
sides), its median over the rounds printed against the goal (<= 1.05x), MET or MISSED; the
noise is the two plain runs' own ratio, median distance from 1.

usage: bench/proxy/bench_prefix.py [--build build/release] [--rounds 5] [--n1 N] [--n16 N]
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
from benchutil import Procs, cpu_seconds, free_ports, loadavg, say  # noqa: E402

RUN_TIMEOUT = 300
GOAL = 1.05
CELLS = [("GET", ["GET", "key:__rand_int__"]),
         ("SET", ["SET", "key:__rand_int__", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"]),
         ("MGET10", ["MGET"] + ["key:__rand_int__"] * 10)]
PROCS = Procs("prefix")
die, start = PROCS.die, PROCS.start


def cli(port, *args):
    out = subprocess.run(["redis-cli", "-p", str(port)] + list(args), capture_output=True,
                         text=True, timeout=30)
    return out.stdout.strip()


def wait_ping(port, what):
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if cli(port, "PING") == "PONG":
            return
        time.sleep(0.05)
    die("%s on port %d does not answer" % (what, port))


def run(port, words, pipeline, n, pid):
    argv = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", "50", "-n", str(n),
            "-r", "100000", "-P", str(pipeline), "--csv"] + words
    c0 = cpu_seconds(pid)
    out = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    cpu = cpu_seconds(pid) - c0
    if out.returncode != 0:
        die("%s failed: %s" % (" ".join(argv), out.stderr.strip()))
    rps = None
    for line in out.stdout.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if len(cells) > 1 and cells[0] != "test":
            rps = float(cells[1])
    if rps is None:
        die("no result line from redis-benchmark: %r" % out.stdout)
    return cpu / n * 1e6, rps  # microseconds of proxy CPU per request


def config(path, listens, backends):
    plain, r1, r20, target = listens
    servers = "".join("   - 127.0.0.1:%d:1 s%d\n" % (p, i) for i, p in enumerate(backends))
    pool = "  redis: true\n  hash: md5\n  distribution: ketama\n  timeout: 5000\n"
    decoys = "".join("    - {prefix: \"k%02d:\", pool: target}\n" % i for i in range(19))
    with open(path, "w") as f:
        f.write("plain:\n  listen: 127.0.0.1:%d\n%s  servers:\n%s" % (plain, pool, servers))
        f.write("target:\n  listen: 127.0.0.1:%d\n%s  servers:\n%s" % (target, pool, servers))
        f.write("r1:\n  listen: 127.0.0.1:%d\n  redis: true\n  routes:\n"
                "    - {prefix: \"key:\", pool: target}\n"
                "    - {prefix: \"\", pool: target}\n" % r1)
        f.write("r20:\n  listen: 127.0.0.1:%d\n  redis: true\n  routes:\n%s"
                "    - {prefix: \"key:\", pool: target}\n"
                "    - {prefix: \"\", pool: target}\n" % (r20, decoys))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n1", type=int, default=100000)
    ap.add_argument("--n16", type=int, default=400000)
    args = ap.parse_args()
    proxy_bin = os.path.join(args.build, "proxy", "chash-proxy")
    for prog in ("redis-server", "redis-benchmark", "redis-cli"):
        if shutil.which(prog) is None:
            die("%s not found (scripts/bootstrap installs redis)" % prog)
    if not os.access(proxy_bin, os.X_OK):
        die("%s not found: build it first (make)" % proxy_bin)
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, lambda *_: die("interrupted"))
    tmp = tempfile.mkdtemp(prefix="bench-prefix-")
    ports = free_ports(7)
    backends, listens = ports[:3], ports[3:]
    for p in backends:
        start(["redis-server", "--port", str(p), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", tmp], os.path.join(tmp, "redis-%d.log" % p))
    for p in backends:
        wait_ping(p, "redis-server")
    conf = os.path.join(tmp, "proxy.yml")
    config(conf, listens, backends)
    proxy = start([proxy_bin, "-c", conf, "-s", str(free_ports(1)[0])],
                  os.path.join(tmp, "proxy.log"))
    for p in listens:
        wait_ping(p, "chash-proxy")
    run(listens[0], CELLS[1][1], 16, 400000, proxy.pid)  # every key the GETs and MGETs name

    say("chash-proxy, a listener with 1 and with 20 prefixes against a pool without routes "
        "(3 redis-servers, redis-benchmark -c 50); load %s" % loadavg())
    say("proxy CPU per request (us), medians of %d rounds; ratio: the routed run over the mean "
        "of the plain runs just before and after it, median of the rounds; noise: those two "
        "plain runs' own ratio, median distance from 1" % args.rounds)
    samples, ratios, controls = {}, {}, {}
    for _r in range(args.rounds):
        for name, words in CELLS:
            for pipeline, n in ((1, args.n1), (16, args.n16)):
                key = (name, pipeline)
                a = run(listens[0], words, pipeline, n, proxy.pid)
                one = run(listens[1], words, pipeline, n, proxy.pid)
                twenty = run(listens[2], words, pipeline, n, proxy.pid)
                a2 = run(listens[0], words, pipeline, n, proxy.pid)
                base = (a[0] + a2[0]) / 2
                samples.setdefault(key + ("plain",), []).extend([a[0], a2[0]])
                samples.setdefault(key + ("1",), []).append(one[0])
                samples.setdefault(key + ("20",), []).append(twenty[0])
                ratios.setdefault(key + ("1",), []).append(one[0] / base)
                ratios.setdefault(key + ("20",), []).append(twenty[0] / base)
                controls.setdefault(key, []).append(a2[0] / a[0])
    if proxy.poll() is not None:
        die("chash-proxy exited during the runs")
    missed = []
    say("%-8s %-3s %9s %9s %9s %8s %8s %7s %6s" % ("command", "-P", "plain us", "1 pfx us",
                                                    "20 pfx us", "ratio 1", "ratio 20", "noise",
                                                    "goal"))
    for name, _ in CELLS:
        for pipeline in (1, 16):
            key = (name, pipeline)
            r1 = statistics.median(ratios[key + ("1",)])
            r20 = statistics.median(ratios[key + ("20",)])
            noise = statistics.median(abs(c - 1) for c in controls[key])
            ok = r1 <= GOAL and r20 <= GOAL
            if not ok:
                missed.append("%s -P %d" % (name, pipeline))
            say("%-8s %-3d %9.2f %9.2f %9.2f %8.3f %8.3f %6.1f%% %6s" % (
                name, pipeline, statistics.median(samples[key + ("plain",)]),
                statistics.median(samples[key + ("1",)]),
                statistics.median(samples[key + ("20",)]), r1, r20, 100 * noise,
                "MET" if ok else "MISSED"))
    say("goal: CPU per request with 1 and with 20 prefixes <= %.2fx a pool's without routes in "
        "every cell: %s" % (GOAL, "MET" if not missed else "MISSED in " + ", ".join(missed)))
    PROCS.stop()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

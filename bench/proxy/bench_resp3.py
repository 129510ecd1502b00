#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""RESP3 clients against RESP2 clients on the same chash-proxy pool: CPU per request (issue 34).

3 redis-servers (no persistence) behind one chash-proxy (default threads, ketama, md5, hash tags
"{}"); redis-benchmark (-c 50) drives it as RESP2 clients and, with -3, as RESP3 clients, on
the same pool: GET and SET of key:<0..99999>, a 10-key MGET of random keys (over the servers),
HGETALL of a 10-field hash (a map in RESP3), each without pipelining and with -P 16. The
proxy's CPU time (utime + stime, /proc/PID/stat) during a run divided by its requests is the
cost. Each round runs, per cell, RESP2, RESP3, RESP2 back to back: the ratio is the RESP3 run's
cost over the mean of the two RESP2 runs around it (paired, so a slow phase of a shared box hits
both sides), its median over the rounds printed against the goal (<= 1.05x), MET or MISSED.

The noise: the two RESP2 runs of a round are the same thing measured twice; their ratio's
median distance from 1 is printed beside the ratio, so a ratio within it of 1 is within this
box's noise. (Instruction counts would be steadier, but this kind of machine has no hardware
counters: perf stat -e instructions is not supported here.)

usage: bench/proxy/bench_resp3.py [--build build/release] [--rounds 5] [--n1 N] [--n16 N]
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
         ("MGET10", ["MGET"] + ["key:__rand_int__"] * 10),
         ("HGETALL", ["HGETALL", "{h}hash"])]
PROCS = Procs("resp3")
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


def run(port, resp3, words, pipeline, n, pid):
    argv = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", "50", "-n", str(n),
            "-r", "100000", "-P", str(pipeline), "--csv"] + (["-3"] if resp3 else []) + words
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
    tmp = tempfile.mkdtemp(prefix="bench-resp3-")
    ports = free_ports(4)
    backends, listen = ports[:3], ports[3]
    for p in backends:
        start(["redis-server", "--port", str(p), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", tmp], os.path.join(tmp, "redis-%d.log" % p))
    for p in backends:
        wait_ping(p, "redis-server")
    conf = os.path.join(tmp, "proxy.yml")
    with open(conf, "w") as f:
        f.write("bench:\n  listen: 127.0.0.1:%d\n  redis: true\n  hash: md5\n"
                "  distribution: ketama\n  hash_tag: \"{}\"\n  timeout: 5000\n  servers:\n" % listen)
        for i, p in enumerate(backends):
            f.write("   - 127.0.0.1:%d:1 s%d\n" % (p, i))
    proxy = start([proxy_bin, "-c", conf, "-s", str(free_ports(1)[0])],
                  os.path.join(tmp, "proxy.log"))
    wait_ping(listen, "chash-proxy")
    # The data: every key the GETs and MGETs name, and the hash.
    run(listen, False, CELLS[1][1], 16, 400000, proxy.pid)
    cli(listen, "HSET", "{h}hash", *[x for i in range(10) for x in ("field%d" % i, "v" * 16)])

    say("chash-proxy, RESP3 clients against RESP2 clients on one pool (3 redis-servers, "
        "redis-benchmark -c 50); load %s" % loadavg())
    say("proxy CPU per request (us) and rps, medians of %d rounds; ratio: RESP3's run over the "
        "mean of the RESP2 runs just before and after it, median of the rounds; noise: those "
        "two RESP2 runs' own ratio, median distance from 1" % args.rounds)
    samples, ratios, controls = {}, {}, {}
    for r in range(args.rounds):
        for name, words in CELLS:
            for pipeline, n in ((1, args.n1), (16, args.n16)):
                a = run(listen, False, words, pipeline, n, proxy.pid)
                b = run(listen, True, words, pipeline, n, proxy.pid)
                a2 = run(listen, False, words, pipeline, n, proxy.pid)
                key = (name, pipeline)
                samples.setdefault(key + (False,), []).extend([a, a2])
                samples.setdefault(key + (True,), []).append(b)
                ratios.setdefault(key, []).append(b[0] / ((a[0] + a2[0]) / 2))
                controls.setdefault(key, []).append(a2[0] / a[0])
    if proxy.poll() is not None:
        die("chash-proxy exited during the runs")
    missed = []
    say("%-8s %-3s %9s %9s %10s %10s %7s %7s %6s" % ("command", "-P", "RESP2 us", "RESP3 us",
                                                      "RESP2 rps", "RESP3 rps", "ratio",
                                                      "noise", "goal"))
    for name, _ in CELLS:
        for pipeline in (1, 16):
            key = (name, pipeline)
            two, three = samples[key + (False,)], samples[key + (True,)]
            ratio = statistics.median(ratios[key])
            noise = statistics.median(abs(c - 1) for c in controls[key])
            ok = ratio <= GOAL
            if not ok:
                missed.append("%s -P %d" % (name, pipeline))
            say("%-8s %-3d %9.2f %9.2f %10.0f %10.0f %7.3f %6.1f%% %6s" % (
                name, pipeline, statistics.median(c for c, _ in two),
                statistics.median(c for c, _ in three), statistics.median(x for _, x in two),
                statistics.median(x for _, x in three), ratio, 100 * noise,
                "MET" if ok else "MISSED"))
    say("goal: RESP3 CPU per request <= %.2fx RESP2's in every cell: %s" % (
        GOAL, "MET" if not missed else "MISSED in " + ", ".join(missed)))
    PROCS.stop()
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

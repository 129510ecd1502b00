#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""CPU per request of several chash-proxy binaries on the same Redis pool, in alternating rounds:
what each commit of a series bought (docs/PERFORMANCE.md, issue 18).

3 redis-servers (no persistence) on free loopback ports in a temp dir; each binary NAME=PATH runs
as its own chash-proxy (the pool of bench_proxy.py: ketama, fnv1a_64; --threads T, 1 unless
--threads says otherwise) on them. A warm-up SET fills the key space; then each round runs, for
GET and SET, unpipelined and with -P 16, `redis-benchmark -c 50 -r 100000` against every proxy in
turn (the first rotating from round to round). CPU per request is the proxy's on-CPU time over
the run (the sum of /proc/PID/task/*/schedstat, ns) / requests. Printed per cell: each binary's
median, and the median over rounds of its ratio to the first binary's run of the same round
(the runs of one round are seconds apart, so a slow phase of a shared box hits them alike), with
the range of those ratios. Every process is stopped on exit (normal, error or signal).

With --memcache the pool is bench_proxy.py's memcached one instead: 3 memcacheds (default
threads), a `redis: false` pool, driven by bench/mc_load (-c 50 -r 100000 -d 32, GET, SET and
the 10-key MGET; --build says where mc_load is), the requests per run as in bench_proxy.py.

usage: bench/proxy/bench_steps.py [--rounds 5] [--threads 1] [--n1 60000] [--n16 400000]
                                  [--pipeline 1|16] [--memcache [--build build/release]]
                                  NAME=PATH NAME=PATH ...
  --pipeline P   only the unpipelined (1) or the -P 16 (16) runs
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_proxy as bp  # noqa: E402  (the same helpers: ports, processes, pool config)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--n1", type=int, help="requests per unpipelined run (60000; mc 150000)")
    ap.add_argument("--n16", type=int, help="requests per -P 16 run (400000; mc 800000)")
    ap.add_argument("--pipeline", type=int, choices=bp.MODES)
    ap.add_argument("--memcache", action="store_true", help="the memcached pool, mc_load")
    ap.add_argument("--build", default="build/release", help="where bench/mc_load is")
    ap.add_argument("binaries", nargs="+", metavar="NAME=PATH")
    args = ap.parse_args()
    bins = []
    for spec in args.binaries:
        name, _, path = spec.partition("=")
        if not name or not os.access(path, os.X_OK):
            bp.die(f"{spec}: want NAME=PATH of an executable")
        bins.append((name, os.path.abspath(path)))
    mc_bin = os.path.abspath(os.path.join(args.build, "bench", "mc_load"))
    if args.memcache and not os.access(mc_bin, os.X_OK):
        bp.die(f"{mc_bin} not found: build it first (make build)")
    for tool in ("memcached",) if args.memcache else ("redis-server", "redis-benchmark"):
        if not shutil.which(tool):
            bp.die(f"{tool} not found (scripts/bootstrap installs it)")

    tmp = tempfile.mkdtemp(prefix="chash-bench-steps.")
    procs = bp.Procs()

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)
    try:
        backends = bp.free_ports(3)
        user = ["-u", "root"] if os.geteuid() == 0 else []  # memcached refuses root without -u
        for i, port in enumerate(backends):
            d = os.path.join(tmp, f"r{i}")
            os.mkdir(d)
            if args.memcache:
                procs.start(["memcached", "-l", "127.0.0.1", "-p", str(port), "-U", "0",
                             "-m", "64"] + user, os.path.join(d, "log"))
            else:
                procs.start(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no", "--dir", d],
                            os.path.join(d, "log"))
        probe = bp.mc_ping if args.memcache else bp.ping
        for port in backends:
            bp.wait_ping(port, "memcached" if args.memcache else "redis-server", probe=probe)
        port, pid = {}, {}
        for name, path in bins:
            listen, stats = bp.free_ports(2)
            conf = os.path.join(tmp, f"{name}.yml")
            log = os.path.join(tmp, f"{name}.log")
            with open(conf, "w") as f:
                f.write(bp.pool_conf(listen, backends, not args.memcache))
            p = procs.start([path, "-c", conf, "-s", str(stats), "-a", "127.0.0.1", "-o", log,
                             "--threads", str(args.threads)], log + ".out")
            bp.wait_ping(listen, name, log, probe)
            port[name], pid[name] = listen, p.pid
        print("== chash-proxy binaries, same pool, alternating rounds (bench/proxy/bench_steps.py)")
        if args.memcache:
            n1, n16 = args.n1 or 150000, args.n16 or 800000  # bench_proxy.py's --mc-n1, --mc-n16
            n = {("GET", 1): n1, ("SET", 1): n1, ("MGET", 1): n1 // 2,
                 ("GET", 16): n16, ("SET", 16): n16, ("MGET", 16): n16 // 8}
            load = f"{os.path.relpath(mc_bin)} -c 50 -r 100000 -d 32, -n {n1} (P1; MGET half), " \
                   f"-P 16 -n {n16} (P16; MGET an eighth); 3 memcacheds"

            def run(p, cmd, pl):
                bp.mc_load(mc_bin, p, cmd, pl, n[(cmd, pl)])
            cmds = bp.MC_CMDS
        else:
            n1, n16 = args.n1 or 60000, args.n16 or 400000
            n = {(cmd, pl): n1 if pl == 1 else n16 for cmd in bp.CMDS for pl in bp.MODES}
            load = f"redis-benchmark -c 50 -r 100000, -n {n1} (P1), -P 16 -n {n16} (P16); " \
                   "3 redis-servers"

            def run(p, cmd, pl):
                bp.benchmark(p, cmd, pl, n[(cmd, pl)])
            cmds = bp.CMDS
        print(f"   {bp.CPUS} cores, load average {bp.loadavg()} at start; {args.rounds} rounds; "
              f"--threads {args.threads}; {load}")
        for name, path in bins:
            print(f"   {name}: {path}")
        if args.memcache:
            bp.mc_load(mc_bin, port[bins[0][0]], "SET", 16, 100000, sequential=True)
        else:
            bp.benchmark(port[bins[0][0]], "SET", 16, 100000)
        cells = [(cmd, pl) for pl in bp.MODES for cmd in cmds if args.pipeline in (None, pl)]
        names = [b[0] for b in bins]
        cpu = {}
        for r in range(args.rounds):
            k = r % len(names)
            for cmd, pl in cells:
                for name in names[k:] + names[:k]:
                    s0 = bp.sched_seconds(pid[name])
                    run(port[name], cmd, pl)
                    s1 = bp.sched_seconds(pid[name])
                    cpu.setdefault((cmd, pl, name), []).append((s1 - s0) * 1e6 / n[(cmd, pl)])
            print(f"   round {r + 1}/{args.rounds} done (load {bp.loadavg()})", flush=True)
        print()
        print("CPU us/req: median of rounds; (x): median over rounds of the ratio to "
              f"{names[0]}'s run of the same round [range]")
        for cmd, pl in cells:
            base = cpu[(cmd, pl, names[0])]
            cols = []
            for name in names:
                v = cpu[(cmd, pl, name)]
                ratios = [a / b for a, b in zip(v, base)]
                cols.append(f"{name} {statistics.median(v):.2f} ({statistics.median(ratios):.2f}x "
                            f"[{min(ratios):.2f}-{max(ratios):.2f}])")
            print(f"  {cmd} P{pl:<2}  " + "  ".join(cols))
    finally:
        procs.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nbench steps: load average {bp.loadavg()} at end")


if __name__ == "__main__":
    main()

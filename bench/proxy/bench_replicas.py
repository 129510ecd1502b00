#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""bench_replicas: what `replicas: N` costs chash-proxy per request (docs/PERFORMANCE.md,
"Replicated pools").

3 redis-servers; chash-proxy (one worker) on a pool of them with `replicas: 1`, 2 and 3, each
loaded in turn by `redis-benchmark -c 50 -r 100000 -P 16` with SET, GET and MSET (10 keys);
rounds rotate the order; medians. CPU per request = the proxy's utime + stime over the run
(/proc/PID/stat) / requests, in microseconds; the backends' CPU per request likewise, summed.

Usage: bench_replicas.py [--build build/release] [--rounds 3] [-n 200000]
"""
import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from benchutil import cpu_seconds as cpu, free_ports, loadavg  # noqa: E402

TESTS = ("set", "get", "mset")


def wait_port(port, proc, what):
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit("%s exited" % what)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit("%s not accepting on %d" % (what, port))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-n", type=int, default=200000, help="requests per run")
    args = ap.parse_args()
    proxy = os.path.join(args.build, "proxy", "chash-proxy")
    tmp = tempfile.mkdtemp(prefix="bench-rep-")
    procs = []
    try:
        ports = free_ports(3)
        backends = []
        for p in ports:
            pr = subprocess.Popen(["redis-server", "--port", str(p), "--bind", "127.0.0.1",
                                   "--save", "", "--appendonly", "no", "--dir", tmp],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(pr)
            wait_port(p, pr, "redis-server")
            backends.append(pr)
        proxies = {}
        for r in (1, 2, 3):
            lp, sp = free_ports(2)
            conf = os.path.join(tmp, "r%d.yml" % r)
            with open(conf, "w") as f:
                f.write("rep:\n  listen: 127.0.0.1:%d\n  redis: true\n  hash: fnv1a_64\n"
                        "  distribution: ketama\n  replicas: %d\n  servers:\n%s" % (
                            lp, r, "".join("   - 127.0.0.1:%d:1\n" % p for p in ports)))
            pr = subprocess.Popen([proxy, "-c", conf, "-s", str(sp), "-a", "127.0.0.1",
                                   "-o", os.path.join(tmp, "r%d.log" % r)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(pr)
            wait_port(lp, pr, "chash-proxy")
            proxies[r] = (lp, pr)
        samples = {(r, t): [] for r in proxies for t in TESTS}
        for rnd in range(args.rounds):
            order = list(proxies)[rnd % 3:] + list(proxies)[:rnd % 3]
            for r in order:
                port, pr = proxies[r]
                for t in TESTS:
                    c0, b0 = cpu(pr.pid), sum(cpu(b.pid) for b in backends)
                    t0 = time.monotonic()
                    run = subprocess.run(["redis-benchmark", "-p", str(port), "-c", "50",
                                          "-r", "100000", "-n", str(args.n), "-P", "16", "-t",
                                          t, "-q"], capture_output=True)
                    if run.returncode != 0:
                        sys.exit("replicas %d, %s: redis-benchmark: %s" % (
                            r, t, (run.stdout + run.stderr).decode()[-500:]))
                    dt = time.monotonic() - t0
                    c1, b1 = cpu(pr.pid), sum(cpu(b.pid) for b in backends)
                    samples[(r, t)].append((args.n / dt, (c1 - c0) / args.n * 1e6,
                                            (b1 - b0) / args.n * 1e6))
        print("| replicas | %s |" % " | ".join("%s rps, proxy µs/req, backends µs/req" %
                                                 t.upper() for t in TESTS))
        print("|---|" + "---:|" * len(TESTS))
        for r in proxies:
            cells = []
            for t in TESTS:
                s = samples[(r, t)]
                cells.append("%.0f, %.2f, %.2f" % tuple(statistics.median(x[i] for x in s)
                                                        for i in range(3)))
            print("| %d | %s |" % (r, " | ".join(cells)))
        print("(load average %s, %d rounds, -n %d)" % (
            loadavg(), args.rounds, args.n))
    finally:
        for pr in procs:
            pr.kill()
            pr.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

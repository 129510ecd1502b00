#!/usr/bin/python3
"""chash-proxy against nutcracker (twemproxy) and direct Redis, measured in one run.

Starts, on free loopback ports in a temp dir, 3 redis-servers (no persistence), one nutcracker
and two chash-proxies serving the same pool (same servers, ketama, fnv1a_64; only the listen
ports differ): "chash-proxy" with its default worker threads (--threads = the cores) and
"chash-1thread" with --threads 1, then drives each target with redis-benchmark (-c 50,
-r 100000, GET and SET, without pipelining and with -P 16). The direct-Redis baseline is
backend 1 itself.

Rounds alternate the targets (and rotate which goes first) so that a slow phase of a shared
machine hits every target alike; the median of the rounds is kept per cell. Besides rps and the
p50/p99 latency redis-benchmark reports, it reads the CPU time (utime + stime, /proc/PID/stat)
each server process (proxy, or redis-server for the direct baseline) spent during each run and
divides it by the requests of that run: on a 2-core box the client, the proxy and the backends
share the cores, so CPU per request is the fair measure of what a proxy costs.

Ratios printed: each chash-proxy / nutcracker and / direct, then the goals of issue 7 for the
default chash-proxy (>= 1.5x nutcracker rps without pipelining, >= 2x with -P 16, p99 no worse
than nutcracker's), each MET or MISSED. Goals missed do not fail the run (it is a benchmark, not a test); a target
that does not start or answer does.

usage: bench/proxy/bench_proxy.py [--build build/release] [--rounds 3] [--n1 N] [--n16 N]
                                   [--perf SECONDS]
  --perf S  after the rounds, profile chash-proxy with `perf record -g` during one -P 16 GET run
            (S seconds at most) and print the top symbols.
"""

import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")
TARGETS = ("direct", "nutcracker", "chash-proxy", "chash-1thread")
PROXIES = {"chash-proxy": [], "chash-1thread": ["--threads", "1"]}  # extra flags
CMDS = ("GET", "SET")
MODES = (1, 16)


def die(msg):
    print(f"bench proxy: {msg}", file=sys.stderr)
    sys.exit(1)


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def ping(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def wait_ping(port, name, logfile=None):
    for _ in range(100):
        if ping(port):
            return
        time.sleep(0.1)
    if logfile and os.path.exists(logfile):
        sys.stderr.write(open(logfile).read()[-2000:])
    die(f"{name} does not answer PING on 127.0.0.1:{port}")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


class Procs:
    """Child processes, all stopped on exit (normal, error or signal)."""

    def __init__(self):
        self.procs = []

    def start(self, argv, log):
        p = subprocess.Popen(argv, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL)
        self.procs.append(p)
        return p

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def benchmark(port, cmd, pipeline, n):
    argv = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", "50", "-n", str(n),
            "-r", "100000", "-t", cmd.lower(), "-P", str(pipeline), "--csv"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        die(f"{' '.join(argv)} failed: {out.stderr.strip()}")
    for line in out.stdout.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if cells[0] == cmd:
            # test, rps, avg, min, p50, p95, p99, max
            return float(cells[1]), float(cells[4]), float(cells[6])
    die(f"no {cmd} line in redis-benchmark output: {out.stdout!r} {out.stderr!r}")


def fmt_rps(x):
    return f"{x:,.0f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n1", type=int, default=60000, help="requests per run, no pipelining")
    ap.add_argument("--n16", type=int, default=400000, help="requests per run, -P 16")
    ap.add_argument("--perf", type=float, default=0, metavar="SECONDS")
    args = ap.parse_args()

    proxy_bin = os.path.abspath(os.path.join(args.build, "proxy", "chash-proxy"))
    if not os.access(proxy_bin, os.X_OK):
        die(f"{proxy_bin} not built (run make build)")
    for tool in ("redis-server", "redis-benchmark", "nutcracker"):
        if not shutil.which(tool) and not os.access(f"/usr/sbin/{tool}", os.X_OK):
            die(f"{tool} not found (scripts/bootstrap installs redis-server, redis-tools, nutcracker)")
    nutcracker_bin = shutil.which("nutcracker") or "/usr/sbin/nutcracker"

    t_start = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="chash-bench-proxy.")
    procs = Procs()

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    try:
        run(args, proxy_bin, nutcracker_bin, tmp, procs, t_start)
    finally:
        procs.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def run(args, proxy_bin, nutcracker_bin, tmp, procs, t_start):
    (b1, b2, b3, nc_port, nc_stats) = free_ports(5)
    backends = (b1, b2, b3)
    redis = []
    for i, port in enumerate(backends):
        d = os.path.join(tmp, f"r{i}")
        os.mkdir(d)
        redis.append(procs.start(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                                  "--save", "", "--appendonly", "no", "--dir", d],
                                 os.path.join(d, "log")))
    for port in backends:
        wait_ping(port, "redis-server")

    def pool_conf(listen):
        servers = "".join(f"   - 127.0.0.1:{p}:1 cache-0{i + 1}\n" for i, p in enumerate(backends))
        return ("bench:\n"
                f"  listen: 127.0.0.1:{listen}\n"
                "  redis: true\n"
                "  hash: fnv1a_64\n"
                "  distribution: ketama\n"
                "  auto_eject_hosts: true\n"
                "  server_retry_timeout: 2000\n"
                "  server_failure_limit: 3\n"
                "  servers:\n" + servers)

    nc_conf, nc_log = os.path.join(tmp, "nutcracker.yml"), os.path.join(tmp, "nutcracker.log")
    with open(nc_conf, "w") as f:
        f.write(pool_conf(nc_port))
    nc = procs.start([nutcracker_bin, "-c", nc_conf, "-s", str(nc_stats),
                      "-a", "127.0.0.1", "-o", nc_log], nc_log + ".out")
    wait_ping(nc_port, "nutcracker", nc_log)
    port = {"direct": b1, "nutcracker": nc_port}
    pid = {"direct": redis[0].pid, "nutcracker": nc.pid}
    chp = {}
    for name, flags in PROXIES.items():
        listen, stats = free_ports(2)
        conf, log = os.path.join(tmp, f"{name}.yml"), os.path.join(tmp, f"{name}.log")
        with open(conf, "w") as f:
            f.write(pool_conf(listen))
        chp[name] = procs.start([proxy_bin, "-c", conf, "-s", str(stats), "-a", "127.0.0.1",
                                 "-o", log] + flags, log + ".out")
        wait_ping(listen, name, log)
        port[name], pid[name] = listen, chp[name].pid
    ch, ch_port = chp["chash-proxy"], port["chash-proxy"]
    n = {1: args.n1, 16: args.n16}

    print("== chash-proxy vs nutcracker vs direct Redis (bench/proxy/bench_proxy.py)")
    print(f"   {os.cpu_count()} cores, load average {loadavg()} at start; "
          f"{args.rounds} rounds, alternating targets, median kept")
    print(f"   redis-benchmark -c 50 -r 100000 -t get|set --csv, -n {args.n1} (P1) "
          f"and -P 16 -n {args.n16} (P16)")
    print(f"   backends 127.0.0.1:{b1},{b2},{b3}; direct = backend 1; "
          f"{nutcracker_bin} and chash-proxy, same pool (ketama, fnv1a_64)")
    print(f"   chash-proxy: default --threads ({os.cpu_count()} cores here); chash-1thread: "
          "--threads 1")
    print("   CPU/req: utime+stime of the server process (the proxy; redis-server for direct) "
          "during the run / requests")

    # Warm-up: fill the key space once through chash-proxy (keys land where either proxy
    # would put them: same placement) and through backend 1 for the direct target.
    benchmark(ch_port, "SET", 16, 100000)
    benchmark(b1, "SET", 16, 100000)

    samples = {}  # (target, cmd, pipeline) -> list of (rps, p50, p99, cpu_us_per_req)
    for r in range(args.rounds):
        k = r % len(TARGETS)
        order = TARGETS[k:] + TARGETS[:k]
        for pipeline in MODES:
            for cmd in ("SET", "GET"):
                for t in order:
                    c0 = cpu_seconds(pid[t])
                    rps, p50, p99 = benchmark(port[t], cmd, pipeline, n[pipeline])
                    c1 = cpu_seconds(pid[t])
                    cpu_us = (c1 - c0) * 1e6 / n[pipeline]
                    samples.setdefault((t, cmd, pipeline), []).append((rps, p50, p99, cpu_us))
        print(f"   round {r + 1}/{args.rounds} done ({time.monotonic() - t_start:.0f} s, "
              f"load {loadavg()})", flush=True)
    for name, p in [("nutcracker", nc)] + list(chp.items()):
        if p.poll() is not None:
            die(f"{name} exited during the run (status {p.returncode})")

    med = {k: tuple(statistics.median(s[i] for s in v) for i in range(4))
           for k, v in samples.items()}

    print()
    print(f"{'target':<12} {'cmd':<4} {'pipe':<4} {'rps':>10} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'CPU us/req':>10}   rps of each round")
    for pipeline in MODES:
        for cmd in CMDS:
            for t in TARGETS:
                rps, p50, p99, cpu = med[(t, cmd, pipeline)]
                rounds = " ".join(fmt_rps(s[0]) for s in samples[(t, cmd, pipeline)])
                print(f"{t:<12} {cmd:<4} P{pipeline:<3} {fmt_rps(rps):>10} {p50:>8.3f} "
                      f"{p99:>8.3f} {cpu:>10.2f}   {rounds}")
        print()

    print("ratios (median of rounds)     rps ch/nc  rps ch/direct  p99 ch/nc  CPU/req ch/nc")
    for name in PROXIES:
        for pipeline in MODES:
            for cmd in CMDS:
                ch_ = med[(name, cmd, pipeline)]
                nc_ = med[("nutcracker", cmd, pipeline)]
                di_ = med[("direct", cmd, pipeline)]
                print(f"  {name:<13} {cmd} P{pipeline:<2}        {ch_[0] / nc_[0]:>9.2f}  "
                      f"{ch_[0] / di_[0]:>13.2f}  {ch_[2] / nc_[2]:>9.2f}  "
                      f"{ch_[3] / nc_[3]:>13.2f}")

    print()
    print("goals (issue 7), chash-proxy with its default threads")
    for pipeline, want in ((1, 1.5), (16, 2.0)):
        for cmd in CMDS:
            ratio = med[("chash-proxy", cmd, pipeline)][0] / med[("nutcracker", cmd, pipeline)][0]
            verdict = "MET" if ratio >= want else "MISSED"
            print(f"  {cmd} P{pipeline:<2} rps >= {want}x nutcracker: {ratio:.2f}x  {verdict}")
    for pipeline in MODES:
        for cmd in CMDS:
            c, nn = med[("chash-proxy", cmd, pipeline)][2], med[("nutcracker", cmd, pipeline)][2]
            verdict = "MET" if c <= nn else "MISSED"
            print(f"  {cmd} P{pipeline:<2} p99 <= nutcracker's: {c:.3f} vs {nn:.3f} ms  {verdict}")
    if (os.cpu_count() or 1) <= 2:
        print("  note: on this 2-core box redis-benchmark, the proxy and the 3 backends share the "
              "cores, so rps is bound by the box; CPU/req is the fair comparison")

    if args.perf > 0:
        profile(args, ch, ch_port, tmp)

    print(f"\nbench proxy: {time.monotonic() - t_start:.0f} s, load average {loadavg()} at end")


def profile(args, ch, ch_port, tmp):
    perf = shutil.which("perf")
    if not perf:
        print("perf not found: no profile")
        return
    data = os.path.join(tmp, "perf.data")
    rec = subprocess.Popen([perf, "record", "-e", "cpu-clock", "-g", "-F", "999", "-p", str(ch.pid), "-o", data,
                            "--", "sleep", str(args.perf)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    deadline = time.monotonic() + args.perf
    while time.monotonic() < deadline - 0.5 and rec.poll() is None:
        benchmark(ch_port, "GET", 16, args.n16)
    rec.wait()
    rep = subprocess.run([perf, "report", "-i", data, "--no-children", "--stdio", "-g", "none",
                          "--percent-limit", "1", "--sort", "dso,symbol"],
                         capture_output=True, text=True)
    dso = subprocess.run([perf, "report", "-i", data, "--no-children", "--stdio", "-g", "none",
                          "--sort", "dso"], capture_output=True, text=True)

    def rows(text):
        for line in text.splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                # -g none still prints empty call-graph columns ("-      -"): drop them.
                yield re.sub(r"(\s+-)+$", "", line)

    print(f"\nperf record -g of chash-proxy during -P 16 GET runs, {args.perf:g} s "
          "(self time by object, then symbols >= 1%):")
    print("  " + "; ".join(" ".join(r.split()) for r in rows(dso.stdout)))
    for r in rows(rep.stdout):
        print("  " + r)


if __name__ == "__main__":
    main()

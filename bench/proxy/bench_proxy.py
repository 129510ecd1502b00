#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""chash-proxy against nutcracker (twemproxy) and direct Redis / memcached, measured in one run.

Two parts, each on free loopback ports in a temp dir, every process stopped on exit (normal,
error or signal), every wait bounded:

Redis (`--only redis`): 3 redis-servers (no persistence), one nutcracker and two chash-proxies
serving the same pool (same servers, ketama, fnv1a_64; only the listen ports differ):
"chash-proxy" with its default worker threads (--threads: half the cores, at least 1) and, as
the other thread count, "chash-1thread" (--threads 1) where the default is not 1, else
"chash-ncores" (--threads = the cores, the default before issue 18), then drives each target with redis-benchmark (-c 50, -r 100000, GET and SET,
without pipelining and with -P 16). The direct-Redis baseline is backend 1 itself. With
--before PATH a fifth target, "chash-before", is that chash-proxy binary (built from an older
commit; default threads) on the same pool, in the same alternating rounds: the before/after
comparison of the Redis path (issue 12: "the reshaped proxy is no slower than before").

memcached (`--only memcache`): 3 memcacheds, nutcracker and the two chash-proxies on the same
`redis: false` pool (ketama, fnv1a_64), direct memcached (backend 1) as the baseline, driven by
bench/mc_load (built next to bench_place; -c 50 connections, keys key:<0..99999>, 32-byte
values): GET, SET and a 10-key multiget (MGET: "get k1 .. k10"), unpipelined and -P 16. A
multiget counts as ONE request in rps and in CPU per request.

Rounds alternate the targets (and rotate which goes first) so that a slow phase of a shared
machine hits every target alike; the median of the rounds is kept per cell. Besides rps and the
p50/p99 latency the load generator reports (redis-benchmark: per request; mc_load: per batch
round-trip), it reads the CPU time (utime + stime, /proc/PID/stat) each server process (proxy,
or redis-server / memcached for the direct baseline) spent during each run and divides it by the
requests of that run: on a 2-core box the client, the proxy and the backends share the cores,
so CPU per request is the fair measure of what a proxy costs.

Syscalls per request (unless --no-syscalls): after the rounds, one more run per target and cell
under `perf stat -e raw_syscalls:sys_enter,syscalls:sys_enter_<name>... -p PID` (the kernel's
syscall-entry tracepoints of every thread of the server process, counted in the kernel, not
traced: the counting adds little to the run, and it is kept out of the CPU rounds anyway), divided
by the run's requests; by kind (read, write, writev, epoll_wait, epoll_ctl, ...) and in total.

Ratios printed: each chash-proxy / nutcracker and / direct, then the goals, each MET or MISSED:
issue 7's for Redis (>= 1.5x nutcracker rps without pipelining, >= 2x with -P 16, p99 no worse
than nutcracker's), issue 12's for memcached (CPU per request <= 0.6x nutcracker's, rps >=
nutcracker's), issue 18's for both (CPU per request <= 0.5x nutcracker's unpipelined, <= 0.3x
with -P 16, p99 no worse than nutcracker's), and with --before the after/before ratios. Goals missed do not fail the run (it
is a benchmark, not a test); a target that does not start or answer does.

usage: bench/proxy/bench_proxy.py [--build build/release] [--only redis|memcache] [--rounds 3]
                                   [--n1 N] [--n16 N] [--mc-n1 N] [--mc-n16 N]
                                   [--before PATH] [--perf SECONDS] [--no-syscalls]
  --before PATH  a chash-proxy binary built from an older commit, run as "chash-before" in the
                 Redis rounds (e.g. 83b8e8e, the last commit before issue 12's reshape).
  --perf S       after the Redis rounds, profile chash-proxy with `perf record -g` during one
                 -P 16 GET run (S seconds at most) and print the top symbols.
  --no-syscalls  skip the syscall pass (it needs perf and the syscall tracepoints).
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from benchutil import Procs, free_ports, loadavg, mc_ping  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
CPUS = len(os.sched_getaffinity(0)) or 1
DEFAULT_THREADS = max(1, CPUS // 2)  # chash-proxy's default (proxy/worker.c px_default_threads)
# chash-proxy at its defaults, and at the other thread count worth comparing: one thread where the
# default is more, else one per core (the default before issue 18). Extra flags per target.
OTHER = "chash-1thread" if DEFAULT_THREADS > 1 else "chash-ncores"
PROXIES = {"chash-proxy": [],
           OTHER: ["--threads", "1" if DEFAULT_THREADS > 1 else str(CPUS)]}
TARGETS = ("direct", "nutcracker") + tuple(PROXIES)
CMDS = ("GET", "SET")
MC_CMDS = ("GET", "SET", "MGET")
MODES = (1, 16)
RUN_TIMEOUT = 120  # seconds: bound on one load-generator run


def die(msg):
    print(f"bench proxy: {msg}", file=sys.stderr)
    sys.exit(1)


def ping(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def wait_ping(port, name, logfile=None, probe=ping):
    for _ in range(100):
        if probe(port):
            return
        time.sleep(0.1)
    if logfile and os.path.exists(logfile):
        sys.stderr.write(open(logfile).read()[-2000:])
    die(f"{name} does not answer PING on 127.0.0.1:{port}")


def cpu_seconds(pid):
    return sum(cpu_split(pid))


def cpu_split(pid):
    """(utime, stime) of pid in seconds: its user-space and its kernel CPU time."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def sched_seconds(pid):
    """On-CPU time of every thread of pid, in ns precision (the first field of each
    /proc/PID/task/TID/schedstat, the scheduler's sum_exec_runtime): a cross-check of the
    tick-sampled utime+stime. Threads that exit are lost, so this is read only from processes whose
    threads live through the run (the proxies, memcached, redis-server)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total / 1e9


def benchmark(port, cmd, pipeline, n):
    argv = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", "50", "-n", str(n),
            "-r", "100000", "-t", cmd.lower(), "-P", str(pipeline), "--csv"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT)
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


def mc_load(mc_bin, port, cmd, pipeline, n, sequential=False):
    """One mc_load run: (rps, p50 ms, p99 ms, requests, errors, keys missed)."""
    argv = [mc_bin, "-p", str(port), "-c", "50", "-n", str(n), "-r", "100000", "-d", "32",
            "-t", cmd.lower(), "-P", str(pipeline), "-T", "60"] + (["-s"] if sequential else [])
    out = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    if out.returncode != 0:
        die(f"{' '.join(argv)} failed: {out.stderr.strip()}")
    for line in out.stdout.splitlines():
        if line.startswith("mc_load "):
            kv = dict(f.split("=", 1) for f in line.split()[1:])
            return (float(kv["rps"]), int(kv["p50_us"]) / 1000, int(kv["p99_us"]) / 1000,
                    int(kv["requests"]), int(kv["errors"]), int(kv["misses"]))
    die(f"no result line in mc_load output: {out.stdout!r} {out.stderr!r}")


def run_rounds(rounds, targets, cells, pid, one_run, t_start, label):
    """Alternating rounds: for each cell (cmd, pipeline), every target in turn, the first target
    rotating from round to round. one_run(target, cmd, pipeline) -> (rps, p50, p99, requests).
    Returns samples: (target, cmd, pipeline) -> list of (rps, p50, p99, cpu_us_per_req,
    sched_us_per_req, sys_us_per_req), sys being the stime part of cpu (the kernel's)."""
    samples = {}
    for r in range(rounds):
        k = r % len(targets)
        order = targets[k:] + targets[:k]
        for cmd, pipeline in cells:
            for t in order:
                (u0, k0), s0 = cpu_split(pid[t]), sched_seconds(pid[t])
                rps, p50, p99, reqs = one_run(t, cmd, pipeline)
                (u1, k1), s1 = cpu_split(pid[t]), sched_seconds(pid[t])
                cpu_us = (u1 + k1 - u0 - k0) * 1e6 / reqs
                sched_us = (s1 - s0) * 1e6 / reqs
                sys_us = (k1 - k0) * 1e6 / reqs
                samples.setdefault((t, cmd, pipeline), []).append((rps, p50, p99, cpu_us,
                                                                   sched_us, sys_us))
        print(f"   {label} round {r + 1}/{rounds} done ({time.monotonic() - t_start:.0f} s, "
              f"load {loadavg()})", flush=True)
    return samples


def medians(samples):
    return {k: tuple(statistics.median(s[i] for s in v) for i in range(6))
            for k, v in samples.items()}


def print_table(samples, med, targets, cmds):
    print()
    print(f"{'target':<13} {'cmd':<4} {'pipe':<4} {'rps':>10} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'CPU us/req':>10} {'sched us':>8} {'sys us':>7}   rps of each round")
    for pipeline in MODES:
        for cmd in cmds:
            for t in targets:
                rps, p50, p99, cpu, sched, sys_ = med[(t, cmd, pipeline)]
                rounds = " ".join(fmt_rps(s[0]) for s in samples[(t, cmd, pipeline)])
                print(f"{t:<13} {cmd:<4} P{pipeline:<3} {fmt_rps(rps):>10} {p50:>8.3f} "
                      f"{p99:>8.3f} {cpu:>10.2f} {sched:>8.2f} {sys_:>7.2f}   {rounds}")
        print()


def print_ratios(med, cmds):
    print("ratios (median of rounds)     rps ch/nc  rps ch/direct  p99 ch/nc  CPU/req ch/nc  "
          "sched ch/nc")
    for name in PROXIES:
        for pipeline in MODES:
            for cmd in cmds:
                ch_ = med[(name, cmd, pipeline)]
                nc_ = med[("nutcracker", cmd, pipeline)]
                di_ = med[("direct", cmd, pipeline)]
                print(f"  {name:<13} {cmd:<4} P{pipeline:<2}      {ch_[0] / nc_[0]:>9.2f}  "
                      f"{ch_[0] / di_[0]:>13.2f}  {ch_[2] / nc_[2]:>9.2f}  "
                      f"{ch_[3] / nc_[3]:>13.2f}  {ch_[4] / nc_[4]:>11.2f}")


# The syscalls counted by kind; "other" is the rest of raw_syscalls:sys_enter (every syscall).
SYSCALLS = ("read", "write", "writev", "readv", "recvfrom", "sendto", "recvmsg", "sendmsg",
            "epoll_wait", "epoll_pwait", "epoll_ctl", "getpeername", "accept4")
SYS_COLS = (("read", ("read", "readv", "recvfrom", "recvmsg")),
            ("write", ("write", "writev", "sendto", "sendmsg")),
            ("epoll_wait", ("epoll_wait", "epoll_pwait")),
            ("epoll_ctl", ("epoll_ctl",)),
            ("getpeername", ("getpeername",)))


def syscall_probe():
    """Whether perf can count syscall-entry tracepoints here (the reason if not, else None)."""
    perf = shutil.which("perf")
    if not perf:
        return "perf not found"
    out = subprocess.run([perf, "stat", "-x", ",", "-e", "raw_syscalls:sys_enter", "--", "true"],
                         capture_output=True, text=True, timeout=30)
    if out.returncode != 0 or "raw_syscalls:sys_enter" not in out.stderr or \
            "<not supported>" in out.stderr:
        return f"perf stat cannot count raw_syscalls:sys_enter: {out.stderr.strip()[-200:]}"
    return None


def count_syscalls(pid, tmp, run):
    """Runs run() with `perf stat` counting pid's syscalls (every thread); returns (result of
    run(), {syscall name or "total": count})."""
    data = os.path.join(tmp, "perf-stat.csv")
    events = ["raw_syscalls:sys_enter"] + [f"syscalls:sys_enter_{n}" for n in SYSCALLS]
    argv = ["perf", "stat", "-x", ",", "-o", data, "-p", str(pid)]
    for e in events:
        argv += ["-e", e]
    rec = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)  # perf attaches to every thread before the load starts
    try:
        res = run()
    finally:
        rec.send_signal(signal.SIGINT)
        rec.wait(timeout=30)
    counts = {}
    with open(data) as f:
        for line in f:
            cells = line.strip().split(",")
            if len(cells) < 3 or not cells[0].strip().isdigit():
                continue
            name = cells[2]
            key = "total" if name == "raw_syscalls:sys_enter" else name.split("sys_enter_")[-1]
            counts[key] = int(cells[0])
    return res, counts


def syscall_pass(targets, cells, pid, one_run, tmp, label):
    """One run per target and cell under count_syscalls; returns (target, cmd, pipeline) ->
    {kind: syscalls per request}."""
    why = syscall_probe()
    if why is not None:
        print(f"   {label}: no syscall counts ({why})")
        return {}
    per = {}
    for cmd, pipeline in cells:
        for t in targets:
            (_, _, _, reqs), counts = count_syscalls(pid[t], tmp,
                                                     lambda: one_run(t, cmd, pipeline))
            row = {col: sum(counts.get(n, 0) for n in names) / reqs for col, names in SYS_COLS}
            row["total"] = counts.get("total", 0) / reqs
            row["other"] = row["total"] - sum(row[col] for col, _ in SYS_COLS)
            per[(t, cmd, pipeline)] = row
    return per


def print_syscalls(per, targets, cmds):
    if not per:
        return
    cols = [c for c, _ in SYS_COLS] + ["other", "total"]
    print("syscalls per request (perf stat of the server process's syscall-entry tracepoints, "
          "one run per cell; read = read+readv+recvfrom+recvmsg, write = write+writev+sendto+"
          "sendmsg)")
    print(f"{'target':<13} {'cmd':<4} {'pipe':<4} " + " ".join(f"{c:>11}" for c in cols))
    for pipeline in MODES:
        for cmd in cmds:
            for t in targets:
                row = per.get((t, cmd, pipeline))
                if row is not None:
                    print(f"{t:<13} {cmd:<4} P{pipeline:<3} " +
                          " ".join(f"{row[c]:>11.3f}" for c in cols))
        print()


def print_goals_18(med, cmds, what):
    """Issue 18's goals for chash-proxy at its defaults."""
    print()
    print(f"goals (issue 18), {what}, chash-proxy at its defaults: CPU/req <= 0.5x nutcracker's "
          "(P1), <= 0.3x (P16); p99 <= nutcracker's")
    for pipeline, want in ((1, 0.5), (16, 0.3)):
        for cmd in cmds:
            c, nn = med[("chash-proxy", cmd, pipeline)], med[("nutcracker", cmd, pipeline)]
            one = med[(OTHER, cmd, pipeline)]
            cpu_r = c[3] / nn[3]
            print(f"  {cmd:<4} P{pipeline:<2} CPU/req {cpu_r:.2f}x ({c[3]:.2f} vs {nn[3]:.2f} us; "
                  f"direct {med[('direct', cmd, pipeline)][3]:.2f}, {OTHER} {one[3]:.2f})  "
                  f"{'MET' if cpu_r <= want + 1e-9 else 'MISSED':<6}  p99 {c[2]:.3f} vs "
                  f"{nn[2]:.3f} ms  {'MET' if c[2] <= nn[2] else 'MISSED'}")
    print("  floor: a proxy makes at least the client-side syscalls the server itself makes per "
          "request (a read and a write); their kernel time is direct's sys us/req:")
    for pipeline, want in ((1, 0.5), (16, 0.3)):
        for cmd in cmds:
            d, nn = med[("direct", cmd, pipeline)], med[("nutcracker", cmd, pipeline)]
            print(f"  {cmd:<4} P{pipeline:<2} direct's kernel time {d[5]:.2f} us/req = "
                  f"{d[5] / nn[3]:.2f}x nutcracker's CPU/req (goal {want}x); direct's whole "
                  f"CPU/req {d[3] / nn[3]:.2f}x")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--only", choices=("redis", "memcache"), help="run one part only")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n1", type=int, default=60000, help="Redis: requests per run, no pipelining")
    ap.add_argument("--n16", type=int, default=400000, help="Redis: requests per run, -P 16")
    ap.add_argument("--mc-n1", type=int, default=150000,
                    help="memcached: requests per GET/SET run, no pipelining (MGET: half)")
    ap.add_argument("--mc-n16", type=int, default=800000,
                    help="memcached: requests per GET/SET run, -P 16 (MGET: an eighth)")
    ap.add_argument("--before", metavar="PATH",
                    help="an older chash-proxy binary, run as chash-before in the Redis rounds")
    ap.add_argument("--perf", type=float, default=0, metavar="SECONDS")
    ap.add_argument("--no-syscalls", action="store_true", help="skip the syscall pass")
    args = ap.parse_args()
    if args.rounds < 1:
        die("--rounds must be at least 1")

    proxy_bin = os.path.abspath(os.path.join(args.build, "proxy", "chash-proxy"))
    if not os.access(proxy_bin, os.X_OK):
        die(f"{proxy_bin} not built (run make build)")
    before_bin = None
    if args.before:
        before_bin = os.path.abspath(args.before)
        if not os.access(before_bin, os.X_OK):
            die(f"--before {before_bin}: not an executable")
    mc_bin = os.path.abspath(os.path.join(args.build, "bench", "mc_load"))
    parts = (args.only,) if args.only else ("redis", "memcache")
    tools = {"redis": ("redis-server", "redis-benchmark", "nutcracker"),
             "memcache": ("memcached", "nutcracker")}
    for part in parts:
        for tool in tools[part]:
            if not shutil.which(tool) and not os.access(f"/usr/sbin/{tool}", os.X_OK):
                die(f"{tool} not found (scripts/bootstrap installs redis-server, redis-tools, "
                    "memcached, nutcracker)")
    if "memcache" in parts and not os.access(mc_bin, os.X_OK):
        die(f"{mc_bin} not built (run make build)")
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
        if "redis" in parts:
            run_redis(args, proxy_bin, before_bin, nutcracker_bin, tmp, procs, t_start)
            procs.stop()
        if "memcache" in parts:
            if "redis" in parts:
                print()
            run_memcache(args, proxy_bin, mc_bin, nutcracker_bin, tmp, procs, t_start)
    finally:
        procs.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nbench proxy: {time.monotonic() - t_start:.0f} s, load average {loadavg()} at end")


def pool_conf(listen, backends, redis):
    servers = "".join(f"   - 127.0.0.1:{p}:1 cache-0{i + 1}\n" for i, p in enumerate(backends))
    return ("bench:\n"
            f"  listen: 127.0.0.1:{listen}\n"
            f"  redis: {'true' if redis else 'false'}\n"
            "  hash: fnv1a_64\n"
            "  distribution: ketama\n"
            "  auto_eject_hosts: true\n"
            "  server_retry_timeout: 2000\n"
            "  server_failure_limit: 3\n"
            "  servers:\n" + servers)


def start_proxies(procs, tmp, nutcracker_bin, proxies, backends, redis, probe, tag):
    """nutcracker and each chash-proxy (name -> (binary, extra flags)) on the same pool; returns
    (port, pid, popen) dicts keyed by target name."""
    nc_port, nc_stats = free_ports(2)
    nc_conf = os.path.join(tmp, f"{tag}-nutcracker.yml")
    nc_log = os.path.join(tmp, f"{tag}-nutcracker.log")
    with open(nc_conf, "w") as f:
        f.write(pool_conf(nc_port, backends, redis))
    nc = procs.start([nutcracker_bin, "-c", nc_conf, "-s", str(nc_stats),
                      "-a", "127.0.0.1", "-o", nc_log], nc_log + ".out")
    wait_ping(nc_port, "nutcracker", nc_log, probe)
    port, pid, popen = {"nutcracker": nc_port}, {"nutcracker": nc.pid}, {"nutcracker": nc}
    for name, (binary, flags) in proxies.items():
        listen, stats = free_ports(2)
        conf = os.path.join(tmp, f"{tag}-{name}.yml")
        log = os.path.join(tmp, f"{tag}-{name}.log")
        with open(conf, "w") as f:
            f.write(pool_conf(listen, backends, redis))
        p = procs.start([binary, "-c", conf, "-s", str(stats), "-a", "127.0.0.1",
                         "-o", log] + flags, log + ".out")
        wait_ping(listen, name, log, probe)
        port[name], pid[name], popen[name] = listen, p.pid, p
    return port, pid, popen


def check_alive(popen):
    for name, p in popen.items():
        if p.poll() is not None:
            die(f"{name} exited during the run (status {p.returncode})")


def run_redis(args, proxy_bin, before_bin, nutcracker_bin, tmp, procs, t_start):
    backends = tuple(free_ports(3))
    b1, b2, b3 = backends
    redis = []
    for i, port in enumerate(backends):
        d = os.path.join(tmp, f"r{i}")
        os.mkdir(d)
        redis.append(procs.start(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                                  "--save", "", "--appendonly", "no", "--dir", d],
                                 os.path.join(d, "log")))
    for port in backends:
        wait_ping(port, "redis-server")

    proxies = {name: (proxy_bin, flags) for name, flags in PROXIES.items()}
    if before_bin:
        proxies["chash-before"] = (before_bin, [])
    targets = TARGETS + (("chash-before",) if before_bin else ())
    port, pid, popen = start_proxies(procs, tmp, nutcracker_bin, proxies, backends, True, ping,
                                     "redis")
    port["direct"], pid["direct"] = b1, redis[0].pid
    ch, ch_port = popen["chash-proxy"], port["chash-proxy"]
    n = {1: args.n1, 16: args.n16}

    print("== chash-proxy vs nutcracker vs direct Redis (bench/proxy/bench_proxy.py)")
    print(f"   {os.cpu_count()} cores, load average {loadavg()} at start; "
          f"{args.rounds} rounds, alternating targets, median kept")
    print(f"   redis-benchmark -c 50 -r 100000 -t get|set --csv, -n {args.n1} (P1) "
          f"and -P 16 -n {args.n16} (P16)")
    print(f"   backends 127.0.0.1:{b1},{b2},{b3}; direct = backend 1; "
          f"{nutcracker_bin} and chash-proxy, same pool (ketama, fnv1a_64)")
    print(f"   chash-proxy: default --threads ({DEFAULT_THREADS} with {CPUS} cores here); {OTHER}: "
          f"{' '.join(PROXIES[OTHER])}")
    if before_bin:
        print(f"   chash-before: {before_bin} (default --threads)")
    print("   CPU/req: utime+stime of the server process (the proxy; redis-server for direct) "
          "during the run / requests; sched: the same from /proc/PID/task/*/schedstat (ns); sys: the "
          "stime part of CPU/req (the kernel's)")

    # Warm-up: fill the key space once through chash-proxy (keys land where either proxy
    # would put them: same placement) and through backend 1 for the direct target.
    benchmark(ch_port, "SET", 16, 100000)
    benchmark(b1, "SET", 16, 100000)

    def one_run(t, cmd, pipeline):
        rps, p50, p99 = benchmark(port[t], cmd, pipeline, n[pipeline])
        return rps, p50, p99, n[pipeline]

    cells = [(cmd, pipeline) for pipeline in MODES for cmd in ("SET", "GET")]
    samples = run_rounds(args.rounds, targets, cells, pid, one_run, t_start, "redis")
    check_alive(popen)
    med = medians(samples)
    print_table(samples, med, targets, CMDS)
    if not args.no_syscalls:
        print_syscalls(syscall_pass(targets, cells, pid, one_run, tmp, "redis"), targets, CMDS)
    print_ratios(med, CMDS)
    print_goals_18(med, CMDS, "Redis")

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

    if before_bin:
        print()
        print("before/after (issue 12): chash-proxy (this build) / chash-before, both default "
              "threads, median of rounds")
        print("                 rps after/before  p99 after/before  CPU/req after/before  "
              "sched after/before")
        for pipeline in MODES:
            for cmd in CMDS:
                a, b = med[("chash-proxy", cmd, pipeline)], med[("chash-before", cmd, pipeline)]
                print(f"  {cmd} P{pipeline:<2}      {a[0] / b[0]:>16.2f}  {a[2] / b[2]:>16.2f}  "
                      f"{a[3] / b[3]:>20.2f}  {a[4] / b[4]:>18.2f}   "
                      f"({a[3]:.2f} vs {b[3]:.2f} us; sched {a[4]:.2f} vs {b[4]:.2f})")
        print("  paired: the median over rounds of each round's after/before ratio (the two ran "
              "minutes apart at most)")
        for pipeline in MODES:
            for cmd in CMDS:
                pairs = list(zip(samples[("chash-proxy", cmd, pipeline)],
                                 samples[("chash-before", cmd, pipeline)]))
                rps_r = statistics.median(a[0] / b[0] for a, b in pairs)
                cpu_r = statistics.median(a[3] / b[3] for a, b in pairs)
                lo, hi = min(a[3] / b[3] for a, b in pairs), max(a[3] / b[3] for a, b in pairs)
                print(f"  {cmd} P{pipeline:<2} rps {rps_r:.2f}x  CPU/req {cpu_r:.2f}x "
                      f"(rounds {lo:.2f}-{hi:.2f})")
        print("  goal: no slower than before (rps >= 0.95x and CPU/req <= 1.05x before's; 5 % "
              "for the noise of a shared box)")
        for pipeline in MODES:
            for cmd in CMDS:
                a, b = med[("chash-proxy", cmd, pipeline)], med[("chash-before", cmd, pipeline)]
                ok = a[0] >= 0.95 * b[0] and a[3] <= 1.05 * b[3]
                print(f"  {cmd} P{pipeline:<2} rps {a[0] / b[0]:.2f}x, CPU/req {a[3] / b[3]:.2f}x  "
                      f"{'MET' if ok else 'MISSED'}")

    if args.perf > 0:
        profile(args, ch, ch_port, tmp)
    print(f"   redis part: {time.monotonic() - t_start:.0f} s, load average {loadavg()}")


def run_memcache(args, proxy_bin, mc_bin, nutcracker_bin, tmp, procs, t_start):
    t_part = time.monotonic()
    backends = tuple(free_ports(3))
    user = ["-u", "root"] if os.geteuid() == 0 else []  # memcached refuses root without -u
    mcs = []
    for i, port in enumerate(backends):
        mcs.append(procs.start(["memcached", "-l", "127.0.0.1", "-p", str(port), "-U", "0",
                                "-m", "64"] + user, os.path.join(tmp, f"memcached{i}.log")))
    for port in backends:
        wait_ping(port, "memcached", probe=mc_ping)
    proxies = {name: (proxy_bin, flags) for name, flags in PROXIES.items()}
    port, pid, popen = start_proxies(procs, tmp, nutcracker_bin, proxies, backends, False,
                                     mc_ping, "mc")
    port["direct"], pid["direct"] = backends[0], mcs[0].pid
    n = {("GET", 1): args.mc_n1, ("SET", 1): args.mc_n1, ("MGET", 1): args.mc_n1 // 2,
         ("GET", 16): args.mc_n16, ("SET", 16): args.mc_n16, ("MGET", 16): args.mc_n16 // 8}

    print("== chash-proxy vs nutcracker vs direct memcached (bench/proxy/bench_proxy.py)")
    print(f"   {os.cpu_count()} cores, load average {loadavg()} at start; "
          f"{args.rounds} rounds, alternating targets, median kept")
    print(f"   {os.path.relpath(mc_bin)} -c 50 -r 100000 -d 32 -t get|set|mget, -n {args.mc_n1} "
          f"(P1; mget {args.mc_n1 // 2}) and -P 16 -n {args.mc_n16} (P16; mget "
          f"{args.mc_n16 // 8})")
    print("   MGET = get of 10 keys, counted as ONE request (rps, CPU/req); latency = batch "
          "round-trip")
    print(f"   memcacheds 127.0.0.1:{','.join(map(str, backends))} (memcached "
          f"{memcached_version()}, default threads); direct = backend 1; nutcracker and "
          "chash-proxy, same redis: false pool (ketama, fnv1a_64)")
    print(f"   chash-proxy: default --threads ({DEFAULT_THREADS} with {CPUS} cores here); {OTHER}: "
          f"{' '.join(PROXIES[OTHER])}")
    print("   CPU/req: utime+stime of the server process (the proxy; memcached for direct) "
          "during the run / requests; sched: the same from /proc/PID/task/*/schedstat (ns); sys: the "
          "stime part of CPU/req (the kernel's)")

    # Warm-up: every key once, through chash-proxy (same placement as nutcracker's) and on
    # backend 1 for the direct target, so GETs hit.
    for p in (port["chash-proxy"], backends[0]):
        mc_load(mc_bin, p, "SET", 16, 100000, sequential=True)

    errors, misses = {}, {}

    def one_run(t, cmd, pipeline):
        rps, p50, p99, reqs, errs, miss = mc_load(mc_bin, port[t], cmd, pipeline,
                                                  n[(cmd, pipeline)])
        errors[t] = errors.get(t, 0) + errs
        misses[t] = misses.get(t, 0) + miss
        return rps, p50, p99, reqs

    cells = [(cmd, pipeline) for pipeline in MODES for cmd in ("SET", "GET", "MGET")]
    samples = run_rounds(args.rounds, TARGETS, cells, pid, one_run, t_start, "memcache")
    check_alive(popen)
    for t in TARGETS:
        print(f"   {t}: {errors.get(t, 0)} error replies, {misses.get(t, 0)} GET/MGET keys "
              "missed (0 and 0 expected: the key space is filled first)")
    med = medians(samples)
    print_table(samples, med, TARGETS, MC_CMDS)
    if not args.no_syscalls:
        print_syscalls(syscall_pass(TARGETS, cells, pid, one_run, tmp, "memcache"), TARGETS,
                       MC_CMDS)
    print_ratios(med, MC_CMDS)
    print_goals_18(med, MC_CMDS, "memcached")

    print()
    print("goals (issue 12), memcached pools: CPU/req <= 0.6x nutcracker's, rps >= nutcracker's")
    for name in PROXIES:
        for pipeline in MODES:
            for cmd in MC_CMDS:
                c, nn = med[(name, cmd, pipeline)], med[("nutcracker", cmd, pipeline)]
                cpu_r, rps_r = c[3] / nn[3], c[0] / nn[0]
                print(f"  {name:<13} {cmd:<4} P{pipeline:<2} CPU/req {cpu_r:.2f}x "
                      f"({c[3]:.2f} vs {nn[3]:.2f} us)  {'MET' if cpu_r <= 0.6 + 1e-9 else 'MISSED':<6}  "
                      f"rps {rps_r:.2f}x  {'MET' if rps_r >= 1.0 else 'MISSED':<6}  "
                      f"(sched {c[4] / nn[4]:.2f}x)")
    print(f"   memcache part: {time.monotonic() - t_part:.0f} s, load average {loadavg()}")


def memcached_version():
    try:
        out = subprocess.run(["memcached", "-V"], capture_output=True, text=True, timeout=10)
        return out.stdout.split()[-1]
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return "?"


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

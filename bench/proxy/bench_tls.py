#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""TLS against plain through chash-proxy, in one run: requests per second and proxy CPU per request.

Three redis-servers, each listening plain and with TLS (--tls-port); one chash-proxy with three
pools over them: plain (clients and servers plain), tls-clients (clients TLS, servers plain)
and tls-both (TLS on both sides). redis-benchmark -c 50 GET and SET, without pipelining and with
-P 16, against each pool in alternating rounds; a pool's CPU per request is the proxy's
on-CPU time (schedstat) over its runs divided by their requests (the three pools share the process, and
each run loads one pool only). Certificates are made with openssl in a temp dir. The steady
state is measured: redis-benchmark opens its 50 connections once per run, so handshakes are
50 of the n requests' cost.

usage: bench/proxy/bench_tls.py [--build build/release] [--rounds 3] [--n1 40000] [--n16 300000]
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
from bench_proxy import Procs, die, free_ports, loadavg, sched_seconds  # noqa: E402

RUN_TIMEOUT = 300
POOLS = ("plain", "tls-clients", "tls-both")


def certs(tmp):
    def run(*a):
        r = subprocess.run(list(a), capture_output=True, timeout=60)
        if r.returncode != 0:
            die("%s: %s" % (" ".join(a[:3]), r.stderr.decode()[:300]))
    p = lambda n: os.path.join(tmp, n)  # noqa: E731
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", p("ca.key"),
        "-out", p("ca.pem"), "-days", "2", "-subj", "/CN=bench CA")
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", p("server.key"), "-out",
        p("server.csr"), "-subj", "/CN=localhost")
    with open(p("server.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    run("openssl", "x509", "-req", "-in", p("server.csr"), "-CA", p("ca.pem"), "-CAkey",
        p("ca.key"), "-CAcreateserial", "-out", p("server.pem"), "-days", "2", "-extfile",
        p("server.ext"))
    return p


def ping(port, tls_args=()):
    r = subprocess.run(["redis-cli", "-p", str(port)] + list(tls_args) + ["PING"],
                       capture_output=True, text=True, timeout=5)
    return r.stdout.strip() == "PONG"


def wait(port, tls_args=(), what="server"):
    for _ in range(100):
        if ping(port, tls_args):
            return
        time.sleep(0.1)
    die("%s on %d does not answer" % (what, port))


def bench(port, cmd, pipeline, n, tls_args):
    argv = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", "50", "-n", str(n),
            "-r", "100000", "-t", cmd.lower(), "-P", str(pipeline), "--csv"] + list(tls_args)
    out = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    if out.returncode != 0:
        die("%s failed: %s" % (" ".join(argv), out.stderr.strip()))
    for line in out.stdout.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if cells[0] == cmd:
            return float(cells[1]), float(cells[6])
    die("no %s line in redis-benchmark output: %r" % (cmd, out.stdout))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n1", type=int, default=40000)
    ap.add_argument("--n16", type=int, default=300000)
    args = ap.parse_args()
    proxy = os.path.join(args.build, "proxy", "chash-proxy")
    for prog in ("redis-server", "redis-benchmark", "redis-cli", "openssl"):
        if shutil.which(prog) is None:
            die("%s not found (scripts/bootstrap installs it)" % prog)
    if not os.access(proxy, os.X_OK):
        die("%s not built (make build)" % proxy)
    tmp = tempfile.mkdtemp(prefix="chash-bench-tls-")
    procs = Procs()

    def on_signal(signum, _frame):
        procs.stop()
        sys.exit(128 + signum)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        p = certs(tmp)
        ports = free_ports(3 * 2 + 3 + 1)
        plain_ports, tls_ports = ports[0:3], ports[3:6]
        pool_ports = dict(zip(POOLS, ports[6:9]))
        for i in range(3):
            d = os.path.join(tmp, "r%d" % i)
            os.makedirs(d)
            procs.start(["redis-server", "--port", str(plain_ports[i]), "--tls-port",
                         str(tls_ports[i]), "--bind", "127.0.0.1", "--tls-cert-file",
                         p("server.pem"), "--tls-key-file", p("server.key"),
                         "--tls-ca-cert-file", p("ca.pem"), "--tls-auth-clients", "no",
                         "--save", "", "--appendonly", "no", "--dir", d],
                        os.path.join(d, "log"))
            wait(plain_ports[i], what="redis-server")
        conf = []
        for name in POOLS:
            conf += ["%s:" % name, "  listen: 127.0.0.1:%d" % pool_ports[name], "  redis: true",
                     "  hash: fnv1a_64", "  distribution: ketama"]
            if name != "plain":
                conf += ["  tls_cert_file: %s" % p("server.pem"),
                         "  tls_key_file: %s" % p("server.key")]
            if name == "tls-both":
                conf += ["  server_tls: true", "  server_tls_ca_file: %s" % p("ca.pem")]
            conf.append("  servers:")
            bports = tls_ports if name == "tls-both" else plain_ports
            conf += ["   - 127.0.0.1:%d:1" % bp for bp in bports]
        cpath = os.path.join(tmp, "bench.yml")
        with open(cpath, "w") as f:
            f.write("\n".join(conf) + "\n")
        stats_port = ports[9]
        px = procs.start([proxy, "-c", cpath, "-s", str(stats_port), "-o",
                          os.path.join(tmp, "proxy.log")], os.path.join(tmp, "proxy.out"))
        tls_args = ["--tls", "--cacert", p("ca.pem")]
        for name in POOLS:
            wait(pool_ports[name], tls_args if name != "plain" else (), "chash-proxy " + name)
        cells = [(c, pl) for c in ("GET", "SET") for pl in (1, 16)]
        samples = {}  # (pool, cmd, pipeline) -> [(rps, p99, cpu_us)]
        t0 = time.time()
        print("# bench_tls: chash-proxy %s, %d rounds, load %s" % (proxy, args.rounds,
                                                                    loadavg()))
        for r in range(args.rounds):
            for cmd, pl in cells:
                n = args.n1 if pl == 1 else args.n16
                order = POOLS if r % 2 == 0 else tuple(reversed(POOLS))
                for name in order:
                    targs = tls_args if name != "plain" else []
                    c0 = sched_seconds(px.pid)
                    rps, p99 = bench(pool_ports[name], cmd, pl, n, targs)
                    cpu = (sched_seconds(px.pid) - c0) / n * 1e6
                    samples.setdefault((name, cmd, pl), []).append((rps, p99, cpu))
        print("| pool | command | rps (median) | p99 ms | proxy CPU us/request | CPU vs plain |")
        print("|---|---|---|---|---|---|")
        for cmd, pl in cells:
            base = statistics.median(s[2] for s in samples[("plain", cmd, pl)])
            for name in POOLS:
                ss = samples[(name, cmd, pl)]
                rps = statistics.median(s[0] for s in ss)
                p99 = statistics.median(s[1] for s in ss)
                cpu = statistics.median(s[2] for s in ss)
                print("| %s | %s%s | %s | %.2f | %.2f | %.2fx |" % (
                    name, cmd, "" if pl == 1 else " -P 16", format(int(rps), ","), p99, cpu,
                    cpu / base if base > 0 else 0))
        print("# %.0f s, load after %s" % (time.time() - t0, loadavg()))
    finally:
        procs.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""How long one huge MGET stalls chash-proxy's worker for everyone else.

Three redis-servers (empty: every value is a miss), chash-proxy with one worker (--threads 1,
so the big request and the other client share it), a client sending PING every millisecond on
its own connection, and one MGET of N keys (13 bytes of RESP per key at N = 1 M). Prints the
MGET's time and the other client's worst PING round trip during it.

usage: bench/proxy/mget_stall.py [--build build/release] [--keys 1000000]
"""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_proxy import Procs, free_ports, wait_ping  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--keys", type=int, default=1000000)
    args = ap.parse_args()
    proxy = os.path.join(args.build, "proxy", "chash-proxy")
    tmp = tempfile.mkdtemp(prefix="chash-mget-stall-")
    procs = Procs()
    try:
        ports = free_ports(5)
        rports, pport, sport = ports[:3], ports[3], ports[4]
        for p in rports:
            procs.start(["redis-server", "--port", str(p), "--bind", "127.0.0.1", "--save", "",
                         "--appendonly", "no"], os.path.join(tmp, "r%d.log" % p))
            wait_ping(p, "redis-server")
        conf = os.path.join(tmp, "c.yml")
        with open(conf, "w") as f:
            f.write("p:\n  listen: 127.0.0.1:%d\n  redis: true\n  max_request_bytes: 1073741824\n"
                    "  servers:\n%s" % (pport, "".join("   - 127.0.0.1:%d:1\n" % p
                                                        for p in rports)))
        procs.start([proxy, "-c", conf, "-s", str(sport), "--threads", "1", "-o",
                     os.path.join(tmp, "proxy.log")], os.path.join(tmp, "proxy.out"))
        wait_ping(pport, "chash-proxy")
        worst, stop = [0.0], [False]

        def pinger():
            s = socket.create_connection(("127.0.0.1", pport))
            while not stop[0]:
                t = time.time()
                s.sendall(b"*1\r\n$4\r\nPING\r\n")
                s.recv(100)
                worst[0] = max(worst[0], time.time() - t)
                time.sleep(0.001)
        th = threading.Thread(target=pinger)
        th.start()
        time.sleep(0.3)
        worst[0] = 0.0
        n = args.keys
        req = b"*%d\r\n$4\r\nMGET\r\n" % (n + 1) + b"".join(
            b"$%d\r\n%s\r\n" % (len(k), k) for k in (b"key:%d" % i for i in range(n)))
        s = socket.create_connection(("127.0.0.1", pport))
        t = time.time()
        s.sendall(req)
        buf = bytearray()
        while buf.count(b"$-1\r\n") < n:
            d = s.recv(1 << 20)
            if not d:
                sys.exit("the proxy closed the connection")
            buf += d
        took = time.time() - t
        stop[0] = True
        th.join()
        print("MGET of %d keys (%d bytes): %.2f s; another client's worst PING meanwhile: %.1f ms"
              % (n, len(req), took, worst[0] * 1000))
    finally:
        procs.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

# SPDX-License-Identifier: Apache-2.0
"""benchutil: what the benchmark scripts under bench/ share: output, giving up, the processes
a bench starts, a memcached's ping, the box's load, a process's CPU time and free loopback
ports."""
import os
import socket
import subprocess
import sys

CLK_TCK = os.sysconf("SC_CLK_TCK")


def say(msg=""):
    print(msg, flush=True)


def dier(name, cleanup):
    """die(msg) for bench `name`: "bench NAME: msg" on stderr, cleanup() (stopping what the
    bench started), exit status 1 at once."""
    def die(msg):
        print("bench %s: %s" % (name, msg), file=sys.stderr, flush=True)
        cleanup()
        os._exit(1)
    return die


class Procs:
    """The processes a bench starts (start), each with its output in a log file, stopped
    together (stop: SIGTERM, then SIGKILL after 5 s); with a name, die is the bench's dier
    stopping them."""

    def __init__(self, name=None):
        self.procs = []
        self.die = dier(name, self.stop) if name else None

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


def mc_ping(port):
    """Whether a memcached (or a proxy of one) on 127.0.0.1:port answers a get."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"get __bench_ping\r\n")
            return s.recv(64).startswith(b"END\r\n")
    except OSError:
        return False


def loadavg():
    """The 1, 5 and 15 minute load averages, as /proc/loadavg gives them."""
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cpu_seconds(pid):
    """utime + stime of process pid so far (/proc/PID/stat), in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def free_ports(n):
    """n loopback ports the kernel assigns (bound at once, then released)."""
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A TCP forwarder on loopback, to put a network fault between two processes of a test.

Run as a program: `forwarder.py TARGET_HOST TARGET_PORT` listens on 127.0.0.1 at a port the
kernel chooses, writes "PORT <n>" on stdout, and forwards every connection it accepts to the
target, bytes both ways, until either side closes. SIGSTOP it and every connection through it
stalls with its sockets open (a partition that times out, not one that refuses); SIGCONT and
they flow again. SIGKILL it and they break.

As a module: Forwarder(spawn, tmp, host, port).start() runs the program through the test
harness's spawn (so it is stopped on the way out) and returns once its port is known; pause()
and resume() send SIGSTOP and SIGCONT (pause returns once the process is stopped).
"""
import os
import signal
import socket
import sys
import threading
import time

START_TIMEOUT = 10.0


def _pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()


def _serve(host, port):
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(128)
    print("PORT %d" % ls.getsockname()[1], flush=True)
    while True:
        c, _ = ls.accept()
        try:
            t = socket.create_connection((host, port), timeout=10)
            t.settimeout(None)
        except OSError:
            c.close()
            continue
        for s in (c, t):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_pump, args=(c, t), daemon=True).start()
        threading.Thread(target=_pump, args=(t, c), daemon=True).start()


class Forwarder:
    """The program above, started by spawn(argv, stdout_path) (the harness's)."""

    def __init__(self, spawn, tmp, host, port, label="fwd"):
        self.spawn, self.target = spawn, (host, port)
        self.out = os.path.join(tmp, "%s-%d.out" % (label, port))
        self.proc, self.port = None, None

    def start(self):
        self.proc = self.spawn([sys.executable, os.path.abspath(__file__), self.target[0],
                                str(self.target[1])], self.out)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("forwarder exited: see %s" % self.out)
            try:
                with open(self.out) as f:
                    for line in f:
                        if line.startswith("PORT "):
                            self.port = int(line.split()[1])
                            return self
            except OSError:
                pass
            time.sleep(0.02)
        raise RuntimeError("forwarder gave no port within %.0f s" % START_TIMEOUT)

    def pause(self, bound=5.0):
        """SIGSTOP, and return once the process is stopped (state T)."""
        os.kill(self.proc.pid, signal.SIGSTOP)
        deadline = time.monotonic() + bound
        while time.monotonic() < deadline:
            try:
                with open("/proc/%d/stat" % self.proc.pid) as f:
                    if f.read().rsplit(")", 1)[1].split()[0] in ("T", "t"):
                        return
            except OSError:
                return
            time.sleep(0.005)
        raise RuntimeError("forwarder %d not stopped within %g s" % (self.proc.pid, bound))

    def resume(self):
        os.kill(self.proc.pid, signal.SIGCONT)


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]))

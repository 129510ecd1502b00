# SPDX-License-Identifier: Apache-2.0
"""What the compat tests against real HTTP load balancers share (nginx_compat.py,
haproxy_compat.py): free loopback ports, the key sets a header carries, one request per key over
a kept-alive connection to the balancer's front, and the balancer's process, stopped on the way
out whatever happens.
"""
import contextlib
import http.client
import os
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clients_compat as cc  # noqa: E402


def free_port(host):
    s = socket.socket()
    s.bind((host, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def header_keys(rng, ok):
    """The binary key set of clients_compat kept where ok(key) (what the balancer carries in a
    header unchanged), topped up with random keys ok accepts to KEYS_PER_SET + 200."""
    keys = [k for k in cc.key_set(rng, ("binary",)) if ok(k)]
    while len(keys) < cc.KEYS_PER_SET + 200:
        k = bytes(rng.randint(0x21, 0x7E if len(keys) % 2 else 0xFF)
                  for _ in range(rng.randint(1, 40)))
        if ok(k):
            keys.append(k)
    return keys


def ask(front, keys, status, header, what):
    """Sends each key as the X-Key header of one GET to 127.0.0.1:front over one kept-alive
    connection (retried for 10 s while the balancer starts); returns the response header
    `header` of each, which names the server the balancer chose. Any status but `status` is an
    error naming what answered."""
    deadline = time.monotonic() + 10
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", front, timeout=10)
            conn.connect()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    out = []
    for k in keys:
        conn.putrequest("GET", "/", skip_accept_encoding=True)
        conn.putheader("X-Key", k)
        conn.endheaders()
        r = conn.getresponse()
        r.read()
        if r.status != status:
            raise RuntimeError("%s answered %d for key %r" % (what, r.status, k))
        out.append(r.getheader(header))
    conn.close()
    return out


@contextlib.contextmanager
def running(argv, stop=signal.SIGTERM, settle=0.0):
    """argv running for the with block (after settle seconds), then stopped with stop, killed
    if it has not exited within 10 s."""
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        if settle:
            time.sleep(settle)
        yield p
    finally:
        p.send_signal(stop)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

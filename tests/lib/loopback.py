# SPDX-License-Identifier: Apache-2.0
"""Loopback helpers shared by the Python test harnesses (tests/compat, tests/proxy): free ports,
whether an address can be bound, and the tail of a log file for failure messages."""
import socket


def free_ports(n):
    """n distinct free TCP ports on 127.0.0.1 (all held at once so they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def bindable(host, port):
    """Whether nothing listens on host:port, an IPv4 or (with a colon) IPv6 address
    (connections of a previous run in TIME_WAIT do not count: redis-server binds with
    SO_REUSEADDR too)."""
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((host, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def tail(path, n=30):
    """The last n lines of a file, for a failure message ("" when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            return b"\n".join(f.read().splitlines()[-n:]).decode("utf-8", "replace")
    except OSError:
        return ""

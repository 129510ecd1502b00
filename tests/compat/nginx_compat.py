#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""nginx_compat.py -- nginx's "hash $key consistent" against libchash's nginx@1, key for key.

    nginx_compat.py PLACE

A real nginx (Debian nginx-light) runs in a temporary prefix, on loopback only: N backend
servers (each a `server { listen ... }` block of the same nginx on 127.0.0.x:<free port>, or on
a unix socket in the temp dir, answering 204) and a front server whose `upstream` block lists
them, in list order with their weights, under `hash $http_x_key consistent;`. Each key is sent
as the X-Key header of one request to the front over a kept-alive connection, and the front
answers with the peer it chose (`add_header X-Upstream $upstream_addr`). PLACE (clients_place)
places the same keys with nginx@1 over the same server strings; every key must agree.

Server sets: 2, 3, 8 and 30 servers on 127.0.0.x, unix-socket servers, unequal weights
(1:2:3:5:1:8:1:2 and 1:10:100:3), a server removed from and one added in the middle of a list;
>= 5,000 keys each (ASCII, UTF-8, binary bytes): keys nginx carries in a header unchanged (no
NUL, CR, LF, no white space or control bytes) and non-empty. Then failover: 8 servers with 1
and 2 of them down (nothing listening: nginx's connect is refused and it tries the key's next
point; the peer that answered is the last of $upstream_addr), against chash's route over the
up servers. Then the empty key: nginx sends it
round robin, which the test shows (40 requests over weights 1:2:1 go 10/20/10) and chash does
not reproduce (docs/COMPATIBILITY.md).

Without nginx the test skips (exit 77), or fails when CI is set; scripts/bootstrap installs it.
"""
import os
import random
import signal
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clients_compat as cc  # noqa: E402
from http_oracle import ask, free_port, header_keys, running  # noqa: E402

NGINX = "/usr/sbin/nginx"


def header_key(k):
    return 0 < len(k) <= 200 and all(b > 0x20 and b != 0x7F for b in k)


def config(tmp, front, servers):
    """servers: [(server string, weight, listen directive)]."""
    lines = ["daemon off;", "master_process off;", "worker_processes 1;",
             "error_log %s/error.log warn;" % tmp, "pid %s/nginx.pid;" % tmp,
             "events { worker_connections 256; }", "http {",
             "  access_log off;", "  client_body_temp_path %s/body;" % tmp,
             "  proxy_temp_path %s/proxy;" % tmp,
             "  upstream pool {", "    hash $http_x_key consistent;"]
    for s, w, _ in servers:
        lines.append("    server %s weight=%d max_fails=0;" % (s, w))
    lines.append("  }")
    for _, _, listen in servers:
        if listen is not None:  # None: a server that is down (nothing listens there)
            lines.append("  server { listen %s; location / { return 204; } }" % listen)
    lines += ["  server {", "    listen 127.0.0.1:%d;" % front,
              "    location / { proxy_pass http://pool; add_header X-Upstream $upstream_addr always; }",
              "  }", "}"]
    return "\n".join(lines) + "\n"


def nginx(tmp, text):
    """nginx on the config text in the prefix tmp, for a with block (stopped with SIGQUIT, its
    graceful shutdown)."""
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write(text)
    return running([NGINX, "-p", tmp, "-c", conf], stop=signal.SIGQUIT)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: nginx_compat.py PLACE")
    place = sys.argv[1]
    if not os.access(NGINX, os.X_OK):
        print("nginx_compat: nginx (nginx-light) missing; run scripts/bootstrap")
        sys.exit(1 if os.environ.get("CI") else 77)
    rng = random.Random("nginx_compat")
    total = nsets = 0
    with tempfile.TemporaryDirectory() as tmp:
        def tcp(n, weights=None, first=1):
            out = []
            for i in range(n):
                host = "127.0.0.%d" % (first + i)
                port = free_port(host)
                s = "%s:%d" % (host, port)
                out.append((s, weights[i] if weights else 1, s))
            return out

        def unix(n):
            return [("unix:%s/b%d.sock" % (tmp, i), 1, "unix:%s/b%d.sock" % (tmp, i))
                    for i in range(n)]

        nine = tcp(9, first=20)
        mid = len(nine) // 2
        wbase = tcp(7, [3, 1, 4, 1, 5, 9, 2], first=40)
        sets = [("2 servers", tcp(2)), ("3 servers", tcp(3)), ("8 servers", tcp(8)),
                ("30 servers", tcp(30, first=60)), ("unix sockets, 4", unix(4)),
                ("unequal weights 1:2:3:5:1:8:1:2", tcp(8, [1, 2, 3, 5, 1, 8, 1, 2])),
                ("very unequal weights 1:10:100:3", tcp(4, [1, 10, 100, 3])),
                ("9 servers", nine),
                ("9, middle one removed", nine[:mid] + nine[mid + 1:]),
                ("9, one added in the middle", nine[:mid] + tcp(1, first=99) + nine[mid:]),
                ("weights 3:1:4:1:5:9:2, middle one removed", wbase[:3] + wbase[4:])]
        for set_name, servers in sets:
            keys = header_keys(rng, header_key)
            front = free_port("127.0.0.1")
            with nginx(tmp, config(tmp, front, servers)):
                got_addr = ask(front, keys, 204, "X-Upstream", "nginx")
            index = {s: i for i, (s, _, _) in enumerate(servers)}
            want = [index[a] for a in got_addr]
            nodes = [(s.encode(), w) for s, w, _ in servers]
            text = cc.case_text(nodes, keys)
            got = cc.run_owners([place, "nginx@1"], text, "clients_place")
            bad = [i for i in range(len(keys)) if want[i] != got[i]]
            if bad:
                print("nginx_compat [%s]: %d of %d keys differ" % (set_name, len(bad), len(keys)))
                for i in bad[:5]:
                    print("  key %s: nginx -> %s, chash -> %s"
                          % (keys[i].hex(), servers[want[i]][0], servers[got[i]][0]))
                sys.exit(1)
            print("  %-45s %2d servers, %5d keys, %2d servers used: equal"
                  % (set_name, len(servers), len(keys), len(set(want))))
            total += len(keys)
            nsets += 1
        # Servers down: nothing listens on them, so nginx's connect is refused and it tries the
        # key's next point (max_fails=0: every request walks afresh, the proxy_next_upstream
        # default "error"); $upstream_addr lists the peers tried, the last one answered. chash's
        # route over the up servers (the walk, as chash-proxy fails over) must end on the same.
        eight = tcp(8, [1, 2, 1, 3, 1, 1, 2, 1], first=140)
        for down in ([3], [0, 5]):
            servers = [(st, w, None if i in down else ls) for i, (st, w, ls) in enumerate(eight)]
            keys = header_keys(rng, header_key)
            front = free_port("127.0.0.1")
            with nginx(tmp, config(tmp, front, servers)):
                got_addr = ask(front, keys, 204, "X-Upstream", "nginx")
            index = {st: i for i, (st, _, _) in enumerate(servers)}
            want = [index[a.split(", ")[-1]] for a in got_addr]
            retried = sum(1 for a in got_addr if ", " in a)
            nodes = [(st.encode(), w) for st, w, _ in servers]
            got = cc.run_owners([place, "nginx@1"], cc.case_text(nodes, keys, down=down),
                                "clients_place")
            bad = [i for i in range(len(keys)) if want[i] != got[i]]
            if bad:
                print("nginx_compat [8 servers, down %s]: %d of %d keys differ"
                      % (down, len(bad), len(keys)))
                for i in bad[:5]:
                    print("  key %s: nginx -> %s, chash -> %s"
                          % (keys[i].hex(), got_addr[i], servers[got[i]][0] if got[i] >= 0
                             else "(none)"))
                sys.exit(1)
            print("  %-45s %2d servers, %5d keys, %4d retried: equal"
                  % ("8 servers, %d down %s" % (len(down), down), len(servers), len(keys),
                     retried))
            total += len(keys)
            nsets += 1

        # The empty key: nginx's hash balancer hands a request whose key is empty to round
        # robin (weighted), so its server depends on the requests before it, not on the key: no
        # placement reproduces it. Shown here on 3 servers weighted 1:2:1, 40 requests: every
        # server takes its weight's share, exactly, where chash@nginx@1 names one server.
        servers = tcp(3, [1, 2, 1], first=120)
        front = free_port("127.0.0.1")
        with nginx(tmp, config(tmp, front, servers)):
            got_addr = ask(front, [b""] * 40, 204, "X-Upstream", "nginx")
        index = {s: i for i, (s, _, _) in enumerate(servers)}
        counts = [sum(1 for a in got_addr if index[a] == i) for i in range(3)]
        chash = cc.run_owners([place, "nginx@1"],
                              cc.case_text([(s.encode(), w) for s, w, _ in servers], [b""]),
                              "clients_place")[0]
        if counts != [10, 20, 10]:
            sys.exit("nginx_compat [empty key]: expected round robin 10/20/10 over weights "
                     "1:2:1, nginx gave %s" % counts)
        print("  %-45s  3 servers, 40 requests, round robin %s (chash's placement: server %d)"
              % ("empty key, weights 1:2:1", "/".join(map(str, counts)), chash))
    print("nginx_compat: %d server sets, %d keys through a real nginx, 100%% equal" % (nsets, total))


if __name__ == "__main__":
    main()

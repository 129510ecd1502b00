# SPDX-License-Identifier: Apache-2.0
"""A real etcd for the fleet tests, benchmarks and demo (docs/FLEET.md), and a small client of
its v3 JSON gateway (stdlib only: urllib, base64, json).

EtcdServer starts `etcd` (Debian's etcd-server) on two free loopback ports with its data dir in
a temp dir; the caller stops it (stop(), or the harness's kill_all for the process it returns).
EtcdClient speaks the same gateway chash-proxy and `chash fleet` speak, so a test can write,
read and watch what they do without going through them.
"""
import base64
import json
import os
import subprocess
import time
import urllib.error
import urllib.request

from loopback import free_ports


def b64(s):
    if isinstance(s, str):
        s = s.encode()
    return base64.b64encode(s).decode()


def unb64(s):
    return base64.b64decode(s or "")


def prefix_end(key):
    k = key.encode()
    return k[:-1] + bytes([k[-1] + 1])


class EtcdClient:
    def __init__(self, url, timeout=5.0):
        self.url = url.rstrip("/")
        self.timeout = timeout

    def call(self, path, body):
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=self.timeout) as r:
            return json.loads(r.read())

    def put(self, key, value, lease=0):
        body = {"key": b64(key), "value": b64(value)}
        if lease:
            body["lease"] = str(lease)
        return int(self.call("/v3/kv/put", body)["header"]["revision"])

    def get(self, key):
        """(value bytes, mod_revision), or (None, 0)."""
        kvs = self.call("/v3/kv/range", {"key": b64(key)}).get("kvs", [])
        if not kvs:
            return None, 0
        return unb64(kvs[0].get("value")), int(kvs[0]["mod_revision"])

    def prefix(self, key):
        """{key: (value bytes, mod_revision)} of every key starting with key."""
        r = self.call("/v3/kv/range", {"key": b64(key), "range_end": b64(prefix_end(key))})
        return {unb64(kv["key"]).decode(): (unb64(kv.get("value")), int(kv["mod_revision"]))
                for kv in r.get("kvs", [])}

    def delete(self, key):
        return int(self.call("/v3/kv/deleterange", {"key": b64(key)})["header"]["revision"])

    def revision(self):
        return int(self.call("/v3/kv/range", {"key": b64("\0")})["header"]["revision"])

    def records(self, pool_key):
        """The instance records under pool_key/instances/, by id."""
        out = {}
        for k, (v, _rev) in self.prefix(pool_key + "/instances/").items():
            rec = json.loads(v)
            out[rec["id"]] = rec
        return out

    def wait_records(self, pool_key, pred, timeout, what):
        """Polls the records until pred(records) is true; returns them, or raises after
        timeout seconds with what and the last records seen."""
        deadline = time.monotonic() + timeout
        recs = {}
        while time.monotonic() < deadline:
            try:
                recs = self.records(pool_key)
            except (OSError, urllib.error.URLError, ValueError):
                recs = {}
            if pred(recs):
                return recs
            time.sleep(0.05)
        raise AssertionError("%s: not within %.0f s; records: %s" % (what, timeout,
                                                                   json.dumps(recs)))


class EtcdServer:
    """etcd on free loopback ports, data in tmp/etcd-<port>. spawn(argv, out) starts a process
    (the harness's spawn, so it is stopped on the way out); extra_args go to etcd's command line
    (e.g. ["--max-request-bytes", str(32 << 20)]: etcd refuses writes over 1.5 MiB by default)."""

    def __init__(self, tmp, spawn, exe="etcd", extra_args=()):
        self.tmp, self.spawn, self.exe = tmp, spawn, exe
        self.extra_args = list(extra_args)
        self.port, self.peer = free_ports(2)
        self.url = "http://127.0.0.1:%d" % self.port
        self.dir = os.path.join(tmp, "etcd-%d" % self.port)
        self.log = self.dir + ".log"
        self.proc = None
        self.client = EtcdClient(self.url)

    def start(self, timeout=20.0):
        peer = "http://127.0.0.1:%d" % self.peer
        argv = [self.exe, "--name", "t", "--data-dir", self.dir,
                "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", "t=" + peer, "--log-level", "error"] + self.extra_args
        self.proc = self.spawn(argv, self.log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("etcd exited: see %s" % self.log)
            try:
                self.client.revision()
                return self
            except (OSError, urllib.error.URLError, ValueError, KeyError):
                time.sleep(0.1)
        raise RuntimeError("etcd did not answer within %.0f s: see %s" % (timeout, self.log))

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


def start_etcd(tmp, spawn=None):
    if spawn is None:
        def spawn(argv, out):
            f = open(out, "ab")
            try:
                return subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL)
            finally:
                f.close()
    return EtcdServer(tmp, spawn).start()

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_tls: TLS for clients and backends, beside plain pools (docs/PROXY.md, "TLS").

Certificates are made here with the openssl command (a test CA, a server certificate for
localhost and 127.0.0.1, a client certificate, and a second CA nobody trusts). Real
redis-servers listen with TLS only (--port 0 --tls-port) and require a client certificate;
a memcached listens with TLS (-Z); clients are redis-cli --tls and Python's ssl module.

  1. Pool "secure": TLS listener that requires client certificates, TLS to two TLS-only
     redis-servers with the proxy's own client certificate. redis-cli --tls SET/GET of 200 keys
     through it; every key is on its owner (chash lookup), read there directly over TLS.
  2. Pool "plain" in the same process: plain clients, plain redis-server, unaffected.
  3. Refusals: a plain client on the TLS port, a TLS client without a certificate, a client
     certificate from the untrusted CA: each is closed without an answer; the stats count
     client errors; a TLS client on the plain port is closed too; a handshake left unfinished
     is closed after client_read_timeout.
  4. Pool "rogue": the servers' certificate is checked against the untrusted CA: requests
     answer an error naming the verification failure, nothing reaches Redis.
  5. SNI and session reuse: a Python TLS backend (PING/GET, closing every connection after one
     reply) sees server_tls_name as SNI on every connection, and every connection after each
     worker's first resumes the TLS session.
  6. Reloadable certificates: the listener's certificate files replaced (a new one, CN
     "renewed") and SIGHUP: a new client connection gets the new certificate, a connection
     opened before keeps working; a reload naming a missing key file is refused (the file named,
     the old certificate still served).
  7. memcached over TLS: set/get through a pool with server_tls.
  8. chash-proxy -t refuses a config whose certificate file is missing, naming it.
Then SIGTERM: clean exit, no sanitizer report.

Usage: test_tls.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip.
"""
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Proxy, Resp, chash_lookup, fail, free_ports, log, pool_yaml,  # noqa: E402
                          run_test, spawn, start_redises, tail, wait_accepting, wait_until,
                          write_file)

WAIT = 15.0


def run(*argv, **kw):
    r = subprocess.run(list(argv), capture_output=True, timeout=60, **kw)
    if r.returncode != 0:
        fail("%s failed: %s" % (" ".join(argv[:3]), r.stderr.decode("utf-8", "replace")[:500]))
    return r


class Certs:
    """A CA, certificates it signs, and a CA nobody trusts, in dir."""

    def __init__(self, openssl, d):
        self.openssl, self.d = openssl, d
        self.ca = self._ca("ca", "chash test CA")
        self.rogue = self._ca("rogue", "rogue CA")
        self.server = self.sign("server", "localhost", "DNS:localhost,IP:127.0.0.1", self.ca)
        self.client = self.sign("client", "client", "DNS:client", self.ca)
        self.rogue_client = self.sign("rclient", "client", "DNS:client", self.rogue)
        self.rogue_server = self.sign("rserver", "localhost", "DNS:localhost,IP:127.0.0.1",
                                      self.rogue)

    def p(self, name):
        return os.path.join(self.d, name)

    def _ca(self, name, cn):
        run(self.openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
            self.p(name + ".key"), "-out", self.p(name + ".pem"), "-days", "2", "-subj",
            "/CN=" + cn)
        return name

    def sign(self, name, cn, san, ca):
        run(self.openssl, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", self.p(name + ".key"),
            "-out", self.p(name + ".csr"), "-subj", "/CN=" + cn)
        write_file(self.p(name + ".ext"), "subjectAltName=%s\n" % san)
        run(self.openssl, "x509", "-req", "-in", self.p(name + ".csr"), "-CA",
            self.p(ca + ".pem"), "-CAkey", self.p(ca + ".key"), "-CAcreateserial", "-out",
            self.p(name + ".pem"), "-days", "2", "-extfile", self.p(name + ".ext"))
        return name


def start_tls_redis(exe, tmp, certs):
    port = free_ports(1)[0]
    d = os.path.join(tmp, "tlsredis-%d" % port)
    os.makedirs(d)
    proc = spawn([exe, "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
                  "--tls-cert-file", certs.p("server.pem"), "--tls-key-file",
                  certs.p("server.key"), "--tls-ca-cert-file", certs.p("ca.pem"),
                  "--tls-auth-clients", "yes", "--save", "", "--appendonly", "no", "--dir", d],
                 os.path.join(d, "log"))
    wait_accepting(proc, [("127.0.0.1", port)], os.path.join(d, "log"), "TLS redis-server")
    return port, proc


def client_ctx(certs, cert=None, ca="ca"):
    ctx = ssl.create_default_context(cafile=certs.p(ca + ".pem"))
    ctx.check_hostname = False
    if cert:
        ctx.load_cert_chain(certs.p(cert + ".pem"), certs.p(cert + ".key"))
    return ctx


def tls_call(port, ctx, payload, server_name="localhost"):
    """payload over one TLS connection: the reply bytes (b"" when closed), or the exception."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        s = ctx.wrap_socket(raw, server_hostname=server_name)
        s.sendall(payload)
        data = b""
        while not data.endswith(b"\r\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        return data
    except (ssl.SSLError, OSError) as e:
        return e
    finally:
        raw.close()


def redis_cli(certs, port, *args, cert="client"):
    r = subprocess.run(["redis-cli", "--tls", "--cacert", certs.p("ca.pem"), "--cert",
                        certs.p(cert + ".pem"), "--key", certs.p(cert + ".key"), "-p", str(port)]
                       + [str(a) for a in args], capture_output=True, timeout=30)
    return r.stdout.decode().strip(), r.returncode


class TlsBackend(threading.Thread):
    """A minimal RESP server over TLS: answers one command per connection (PING: +PONG, else
    $-1), then closes; records each connection's SNI and whether its session was resumed."""

    def __init__(self, certs):
        super().__init__(daemon=True)
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(certs.p("server.pem"), certs.p("server.key"))
        self.snis, self.reused = [], []
        self.ctx.sni_callback = lambda sock, name, ctx: self.snis.append(name)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.stop = False

    def run(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            try:
                s = self.ctx.wrap_socket(conn, server_side=True)
                data = s.recv(4096)
                self.reused.append(s.session_reused)
                s.sendall(b"+PONG\r\n" if b"PING" in data.upper() else b"$-1\r\n")
                s.close()
            except (ssl.SSLError, OSError):
                conn.close()


PROGRAMS = ("redis-server", "memcached", "openssl", "redis-cli")


def body(t):
    proxy_exe, chash, tmp = t.proxy, t.chash, t.tmp
    redis_exe, mc_exe, openssl = (t.programs[p] for p in PROGRAMS[:3])
    certs = Certs(openssl, tmp)
    tls_ports = [start_tls_redis(redis_exe, tmp, certs)[0] for _ in range(2)]
    plain = start_redises(redis_exe, tmp, 1)[0]
    backend = TlsBackend(certs)
    backend.start()
    mc_port = free_ports(1)[0]
    mc_log = os.path.join(tmp, "mc.log")
    mcp = spawn([mc_exe, "-p", str(mc_port), "-l", "127.0.0.1", "-U", "0", "-m", "16", "-Z",
                 "-o", "ssl_chain_cert=%s,ssl_key=%s" % (certs.p("server.pem"),
                                                         certs.p("server.key"))] +
                (["-u", "root"] if os.geteuid() == 0 else []), mc_log)
    wait_accepting(mcp, [("127.0.0.1", mc_port)], mc_log, "TLS memcached")

    sp, pp, rp, bp, mp = free_ports(5)
    listen_cert = {"tls_cert_file": "listen.pem", "tls_key_file": "listen.key"}
    write_file(certs.p("listen.pem"), open(certs.p("server.pem")).read())
    write_file(certs.p("listen.key"), open(certs.p("server.key")).read())
    secure_servers = [("127.0.0.1:%d" % p, 1, None) for p in tls_ports]

    def conf_text(listen_key="listen.key"):
        lc = dict(listen_cert, tls_key_file=listen_key)
        return (pool_yaml("secure", sp, secure_servers, hash="fnv1a_64", distribution="ketama",
                          tls_client_ca_file="ca.pem", server_tls=True, client_read_timeout=2000,
                          server_tls_ca_file="ca.pem", server_tls_cert_file="client.pem",
                          server_tls_key_file="client.key", **lc) +
                pool_yaml("plain", pp, [(plain.text, 1, None)]) +
                pool_yaml("rogue", rp, secure_servers[:1], server_tls=True,
                          server_tls_ca_file="rogue.pem", server_tls_cert_file="client.pem",
                          server_tls_key_file="client.key", server_failure_limit=1000) +
                pool_yaml("sni", bp, [("127.0.0.1:%d" % backend.port, 1, None)], server_tls=True,
                          server_tls_ca_file="ca.pem", server_tls_name="localhost",
                          server_failure_limit=1000) +
                pool_yaml("mc", mp, [("127.0.0.1:%d" % mc_port, 1, None)], redis=False,
                          server_tls=True, server_tls_ca_file="ca.pem"))

    conf = write_file(os.path.join(tmp, "tls.yml"), conf_text())
    px = Proxy(proxy_exe, tmp, conf, [("127.0.0.1", p) for p in (sp, pp, rp, bp, mp)],
               verbosity=6).start()

    # 1. redis-cli --tls through the TLS pool, keys on their owners.
    keys = ["tls:%d" % i for i in range(200)]
    script = "".join("SET %s v-%s\n" % (k, k) for k in keys) + \
        "".join("GET %s\n" % k for k in keys)
    r = subprocess.run(["redis-cli", "--tls", "--cacert", certs.p("ca.pem"), "--cert",
                        certs.p("client.pem"), "--key", certs.p("client.key"), "-p", str(sp)],
                       input=script.encode(), capture_output=True, timeout=60)
    out = r.stdout.decode().split("\n")
    if out[:len(keys)] != ["OK"] * len(keys) or out[len(keys):2 * len(keys)] != \
            ["v-" + k for k in keys]:
        fail("redis-cli --tls through the proxy: %r %r" % (out[:4], r.stderr[:300]))
    owners = chash_lookup(chash, conf, "secure", [k.encode() for k in keys])
    for k in keys[:60]:
        port = int(owners[k.encode()].split(":")[1])
        got, _ = redis_cli(certs, port, "GET", k)
        if got != "v-" + k:
            fail("key %s not on its owner %s over TLS (got %r)" % (k, port, got))
    log("200 keys through the TLS pool (client certificates both ways), each on its owner")
    # RESP3 over TLS both ways: redis-cli -3's map, from the servers' RESP3 connections (TLS,
    # then HELLO 3).
    r = subprocess.run(["redis-cli", "-3", "--tls", "--cacert", certs.p("ca.pem"), "--cert",
                        certs.p("client.pem"), "--key", certs.p("client.key"), "-p", str(sp)],
                       input=b"HSET tls:h f v\nHGETALL tls:h\n", capture_output=True,
                       timeout=60)
    if r.stdout.decode().split("\n")[:2] != ["1", "f v"] or \
            redis_cli(certs, sp, "-3", "--no-raw", "HGETALL", "tls:h")[0] != '1# "f" => "v"':
        fail("redis-cli -3 --tls through the proxy: %r %r" % (r.stdout[:200], r.stderr[:300]))

    # 2. The plain pool beside it.
    with Resp(("127.0.0.1", pp)) as c:
        if c.call("SET", "p", "q") != b"OK" or c.call("GET", "p") != b"q":
            fail("the plain pool beside the TLS ones")

    # 3. Refusals.
    with Resp(("127.0.0.1", sp), timeout=5) as c:
        try:
            c.send(b"*1\r\n$4\r\nPING\r\n")
            got = c.sock.recv(100)
        except OSError as e:
            got = e
    if got not in (b"",) and not isinstance(got, OSError):
        fail("a plain client on the TLS port was answered: %r" % got)
    for what, ctx in (("no client certificate", client_ctx(certs)),
                      ("a client certificate of another CA", client_ctx(certs, "rclient"))):
        got = tls_call(sp, ctx, b"*1\r\n$4\r\nPING\r\n")
        if got == b"+PONG\r\n":
            fail("a TLS client with %s was served" % what)
    got = tls_call(sp, client_ctx(certs, "client"), b"*1\r\n$4\r\nPING\r\n")
    if got != b"+PONG\r\n":
        fail("a TLS client with a good certificate: %r" % got)
    got = tls_call(pp, client_ctx(certs, "client"), b"*1\r\n$4\r\nPING\r\n")
    if got == b"+PONG\r\n":
        fail("a TLS client on the plain port was answered")
    log("refused: plain on TLS, no certificate, untrusted certificate, TLS on plain")
    # A handshake that never completes (a TLS slowloris): closed after client_read_timeout
    # (2 s in the secure pool).
    stall = socket.create_connection(("127.0.0.1", sp), timeout=10)
    stall.sendall(b"\x16\x03\x01")  # the first bytes of a ClientHello, then nothing
    t0 = time.time()
    try:
        closed = stall.recv(100) == b""
    except ConnectionResetError:
        closed = True
    except socket.timeout:
        closed = False
    stall.close()
    if not closed:
        fail("a TLS handshake left unfinished was not closed within 10 s")
    log("an unfinished handshake closed after %.1f s" % (time.time() - t0))

    # 4. A server certificate the pool does not trust.
    with Resp(("127.0.0.1", rp)) as c:
        got = c.call("GET", "x")
    if not (hasattr(got, "msg") or isinstance(got, Exception)) or \
            b"certificate verify failed" not in str(got).encode() and \
            "certificate verify failed" not in str(got):
        fail("a request to a server with an untrusted certificate answered %r" % got)
    log("untrusted server certificate: %s" % str(got)[:120])

    # 5. SNI and session reuse.
    def sni_closed():
        """Until the proxy holds no connection to the SNI backend (it has seen its close)."""
        wait_until(lambda: sum(v["server_connections"] for v in px.stats_json()["sni"].values()
                               if isinstance(v, dict)) == 0, WAIT,
                   "the proxy seeing the SNI backend close its connection")
    for i in range(6):
        # The backend closes each connection after its reply: a request may race that close
        # (the proxy has not read the end of the stream yet) and answer an error; once again.
        for attempt in range(3):
            with Resp(("127.0.0.1", bp)) as c:
                got = c.call("GET", "k%d" % i)
            if got is None:
                break
            sni_closed()
        if got is not None:
            fail("GET through the SNI pool: %r" % got)
        sni_closed()      # the next GET opens a new connection (and resumes the session)
    if not backend.snis or any(n != "localhost" for n in backend.snis):
        fail("SNI seen by the backend: %r, want localhost on every connection" % backend.snis)
    # Each worker (2 by default here) has its own backend connection: its first handshake is
    # full, every later one resumes.
    if len(backend.reused) < 6 or backend.reused.count(False) > 2:
        fail("TLS sessions resumed on the backend's connections: %r (all but each worker's "
             "first should be)" % backend.reused)
    log("SNI %r on %d connections, sessions resumed %r" % (backend.snis[0], len(backend.snis),
                                                           backend.reused))

    # 6. Reloadable certificates.
    old_conn = client_ctx(certs, "client").wrap_socket(
        socket.create_connection(("127.0.0.1", sp), timeout=5), server_hostname="localhost")
    certs.sign("renewed", "renewed", "DNS:localhost,IP:127.0.0.1", certs.ca)
    os.rename(certs.p("renewed.pem"), certs.p("listen.pem"))
    os.rename(certs.p("renewed.key"), certs.p("listen.key"))
    px.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: "reload done" in tail(px.log, 10 ** 6), WAIT,
               "the certificates' reload logged", poll=0.1)

    def served_cn():
        s = client_ctx(certs, "client").wrap_socket(
            socket.create_connection(("127.0.0.1", sp), timeout=5), server_hostname="localhost")
        try:
            return dict(x[0] for x in s.getpeercert()["subject"])["commonName"]
        finally:
            s.close()
    if served_cn() != "renewed":
        fail("after the reload a new connection got the certificate %r" % served_cn())
    old_conn.sendall(b"*1\r\n$4\r\nPING\r\n")
    if old_conn.recv(100) != b"+PONG\r\n":
        fail("a connection opened before the certificate reload stopped working")
    old_conn.close()
    write_file(conf + ".tmp", conf_text(listen_key="missing.key"))
    os.rename(conf + ".tmp", conf)
    mark = len(tail(px.log, 10 ** 6))
    px.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: "reload failed" in tail(px.log, 10 ** 6)[mark:], WAIT,
               "the refused reload logged", poll=0.1)
    logged = tail(px.log, 10 ** 6)[mark:]
    if "missing.key" not in logged:
        fail("a reload naming a missing key file: the log does not name it:\n%s" % logged[-800:])
    if served_cn() != "renewed":
        fail("a refused reload changed the certificate served")
    log("certificates reloaded on SIGHUP; a missing key file refused, named, nothing changed")

    # 7. memcached over TLS.
    with socket.create_connection(("127.0.0.1", mp), timeout=5) as s:
        s.sendall(b"set m 3 0 2\r\nhi\r\nget m\r\n")
        data = b""
        while not data.endswith(b"END\r\n") and len(data) < 200:
            chunk = s.recv(1000)
            if not chunk:
                break
            data += chunk
    if data != b"STORED\r\nVALUE m 3 2\r\nhi\r\nEND\r\n":
        fail("memcached over TLS through the proxy: %r" % data)

    # 8. -t on a missing certificate.
    bad = write_file(os.path.join(tmp, "bad.yml"),
                     pool_yaml("b", free_ports(1)[0], [(plain.text, 1, None)],
                               tls_cert_file=certs.p("nope.pem"), tls_key_file="x.key"))
    r = subprocess.run([proxy_exe, "-t", "-c", bad], capture_output=True, timeout=30)
    if r.returncode == 0 or b"nope.pem" not in r.stdout + r.stderr:
        fail("-t on a missing certificate: exit %d, %r" % (r.returncode, (r.stdout + r.stderr)[:300]))
    px.stop()
    backend.stop = True
    backend.sock.close()


if __name__ == "__main__":
    run_test(body, programs=PROGRAMS)

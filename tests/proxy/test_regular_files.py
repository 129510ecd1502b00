#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_regular_files: every file chash-proxy reads must be a regular file; a FIFO (whose open
blocks until a writer comes) is refused at once with its name (issue 28).

1. chash-proxy -t with a FIFO as each TLS file of a pool in turn (tls_cert_file, tls_key_file,
   tls_client_ca_file, server_tls_ca_file, server_tls_cert_file, server_tls_key_file; the
   others a real self-signed certificate and key made with openssl): exits 1 within 10 s,
   naming the key, the FIFO's path and "not a regular file" (before: -t blocked forever on
   the FIFO).
2. A running proxy reloaded (POST /-/reload) with a FIFO as tls_cert_file: refused within
   10 s (500, as for any certificate that cannot be loaded) naming it, reload_failures one up, /metrics still answered, the pool still serving (before:
   the control thread blocked in the reload; neither the reload nor /metrics was answered).
3. --admin-token-file naming a FIFO: the start fails within 10 s, naming it (before: blocked).
4. -o naming a FIFO nobody reads, -p naming a FIFO: the start fails within 10 s saying so
   (before: blocked in the open).

Usage: test_regular_files.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (openssl missing and CI unset).
"""
import http.client
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Proxy, Resp, fail, free_ports, log, run_test,  # noqa: E402
                          sanitizer_env, write_file)

BOUND = 10.0


def run_bounded(argv, what):
    """(exit status, stderr) of argv, which must end within BOUND s."""
    try:
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=BOUND,
                           env=sanitizer_env())
    except subprocess.TimeoutExpired:
        fail("%s: chash-proxy still running after %g s (blocked on the FIFO?)" % (what, BOUND))
    return r.returncode, r.stdout.decode("utf-8", "replace") + r.stderr.decode("utf-8",
                                                                              "replace")


def expect_refusal(argv, what, *needles):
    rc, out = run_bounded(argv, what)
    if rc == 0 or any(n not in out for n in needles):
        fail("%s: exit %d, output without %r:\n%s" % (what, rc, needles, out[-1500:]))
    return out


def pool(port, **keys):
    lines = ["p:", "  listen: 127.0.0.1:%d" % port, "  redis: true"]
    lines += ["  %s: %s" % (k, v) for k, v in keys.items()]
    return "\n".join(lines + ["  servers:", "   - 127.0.0.1:1:1", ""])


def request(port, method, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=BOUND)
    try:
        c.request(method, path, headers={"Host": "127.0.0.1:%d" % port})
        r = c.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    except OSError as e:
        fail("%s %s: no answer within %g s (%s): the control thread is blocked" % (
            method, path, BOUND, e))
    finally:
        c.close()


def body(t):
    tmp, openssl = t.tmp, t.programs["openssl"]
    cert, key = os.path.join(tmp, "c.pem"), os.path.join(tmp, "c.key")
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert, "-days",
                    "2", "-subj", "/CN=localhost"], check=True, capture_output=True, timeout=60)
    fifo = os.path.join(tmp, "fifo")
    os.mkfifo(fifo)
    port, mport = free_ports(2)

    # 1. -t, a FIFO in each TLS key in turn
    listen = {"tls_cert_file": cert, "tls_key_file": key, "tls_client_ca_file": cert}
    servers = {"server_tls": "true", "server_tls_ca_file": cert, "server_tls_cert_file": cert,
               "server_tls_key_file": key}
    for k in list(listen) + [k for k in servers if k != "server_tls"]:
        keys = dict(listen) if k in listen else dict(servers)
        keys[k] = fifo
        conf = write_file(os.path.join(tmp, "t_%s.yml" % k), pool(port, **keys))
        expect_refusal([t.proxy, "-t", "-c", conf], "-t with a FIFO as %s" % k, k, fifo,
                       "not a regular file (a FIFO)")
    log("1. -t refuses a FIFO as each of the 6 TLS files, naming it")

    # 2. a reload with a FIFO as tls_cert_file
    conf = write_file(os.path.join(tmp, "run.yml"), pool(port))
    p = Proxy(t.proxy, tmp, conf, [("127.0.0.1", port)], label="run",
              extra_args=["--metrics-port", str(mport)]).start()
    failures = p.stats_json()["reload_failures"]
    write_file(conf, pool(port, tls_cert_file=fifo, tls_key_file=key))
    code, text = request(mport, "POST", "/-/reload")
    if code != 500 or "tls_cert_file" not in text or "not a regular file" not in text:
        fail("2. a reload with a FIFO as tls_cert_file: %d %r" % (code, text))
    code, metrics = request(mport, "GET", "/metrics")
    if code != 200 or "chash_proxy_" not in metrics:
        fail("2. /metrics after the refused reload: %d %r" % (code, metrics[:200]))
    if p.stats_json()["reload_failures"] != failures + 1:
        fail("2. reload_failures did not count the refused reload")
    with Resp(("127.0.0.1", port)) as c:
        if c.call("PING") != b"PONG":
            fail("2. the pool does not serve after the refused reload")
    p.stop()
    log("2. a reload with a FIFO as tls_cert_file: refused (500) naming it; /metrics answered")

    # 3. --admin-token-file
    conf = write_file(os.path.join(tmp, "plain.yml"), pool(port))
    expect_refusal([t.proxy, "-c", conf, "-s", str(free_ports(1)[0]), "--admin-token-file",
                    fifo], "--admin-token-file naming a FIFO", "admin token file", fifo,
                   "not a regular file (a FIFO)")
    log("3. --admin-token-file naming a FIFO: the start refused, naming it")

    # 4. -o and -p
    expect_refusal([t.proxy, "-c", conf, "-s", str(free_ports(1)[0]), "-o", fifo],
                   "-o naming a FIFO nobody reads", fifo, "a FIFO that nobody reads")
    expect_refusal([t.proxy, "-c", conf, "-s", str(free_ports(1)[0]), "-p", fifo],
                   "-p naming a FIFO", fifo, "FIFO")
    log("4. -o and -p naming a FIFO: the start refused at once")
    return "FIFOs refused in -t (6 TLS keys), a reload, the token, the log and pid files"


if __name__ == "__main__":
    run_test(body, programs=("openssl",))

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_threads: chash-proxy --threads 2 — clients spread over two workers that share one
placement, one health state, one membership version and one set of counters.

One chash-proxy (--threads 2, --metrics-port) in front of 3 real redis-servers (a 4th joins by
a reload). Each client connection asks INFO which worker serves it (worker_id), so every check
below is made on connections of both workers. Checked:
  - spread: CONNS connections land on both workers (SO_REUSEPORT);
  - routing: keys SET through either worker sit on the backend `chash lookup` names;
  - shared health: backend B is killed; writes of B's keys through worker 0 fail until B is
    ejected (server_failure_limit of them); then a write of a B key through worker 1, which has
    seen no failure of B, succeeds at its first attempt (worker 1 skips B: the ejection is the
    proxy's, not worker 0's), and /metrics shows B down;
  - shared readmission: B restarted; once one worker's probe readmits it, writes of B's keys
    through both workers land on B again;
  - reload: a server added by SIGHUP; every connection of both workers reports the new
    membership version in INFO, and keys SET through either worker land where `chash lookup`
    with the new file says;
  - a unix-socket pool (one socket every worker polls): connections are served, keys placed
    as `chash lookup` says;
  - counters: /metrics' requests_total summed over classes equals the requests this test sent
    (both workers' counters added up); the stats JSON's total_connections grows by the
    connections it opened and curr_connections is their number;
  - a second chash-proxy on the same config fails to start, naming the address in use (the
    SO_REUSEPORT listeners must not let it share the port), while the first keeps serving;
  - bad --threads values (0, 257, "two") exit 1 with the option's error, before anything starts;
  - clean exit (no sanitizer report).

Usage: test_threads.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server missing and CI unset).
"""
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Proxy, Redis, Resp, RespError, chash_lookup, fail,  # noqa: E402
                          free_ports, log, poll_until, pool_yaml, run_test, sanitizer_env,
                          soft_fail, start_redises, wait_until, write_file)
from promtext import scrape, total, value  # noqa: E402

CONNS = 16
FAILURE_LIMIT = 2
RETRY_MS = 300
WAIT = 15.0  # seconds: bound of every wait for a state change


class Counted:
    """A client connection that counts the requests it sends (to check /metrics)."""
    sent = 0

    def __init__(self, addr):
        self.c = Resp(addr)
        self.worker = int(self.info()["worker_id"])

    def call(self, *args):
        Counted.sent += 1
        return self.c.call(*args)

    def info(self):
        text = self.call("INFO")
        if not isinstance(text, bytes):
            fail("INFO answered %r" % (text,))
        return dict(line.split(":", 1) for line in text.decode().split("\r\n")
                    if ":" in line and not line.startswith("#"))

    def close(self):
        self.c.close()


def wait_for(what, pred):
    wait_until(pred, WAIT, what)


def config(backends, port, sock):
    servers = [(b.text, 1, "s%d" % i) for i, b in enumerate(backends)]
    alpha = pool_yaml("alpha", port, servers, hash="murmur", distribution="ketama", timeout=500,
                      auto_eject_hosts=True, server_failure_limit=FAILURE_LIMIT,
                      server_retry_timeout=RETRY_MS)
    beta = pool_yaml("beta", 0, servers, hash="md5", distribution="ketama", timeout=2000)
    # beta first: a second proxy meets the unix socket before the TCP port
    return beta.replace("listen: 127.0.0.1:0", "listen: %s 0600" % sock) + alpha


def run_proxy(proxy_exe, args, timeout=30):
    """Runs chash-proxy to its exit; (status, stderr text)."""
    r = subprocess.run([proxy_exe] + args, capture_output=True, timeout=timeout,
                       env=sanitizer_env(), stdin=subprocess.DEVNULL)
    return r.returncode, r.stderr.decode("utf-8", "replace")


def check_bad_flags(proxy_exe, conf):
    for bad in ("0", "257", "two"):
        rc, err = run_proxy(proxy_exe, ["-c", conf, "--threads", bad])
        if rc != 1 or "option --threads requires a number from 1 to 256" not in err:
            fail("--threads %s: exit %d, stderr %r; want exit 1 and the option's error" % (
                bad, rc, err[-300:]))


def expect_refused(proxy_exe, tmp, conf, want):
    """chash-proxy on conf must exit 1 with want in its log (an address in use)."""
    log_path = os.path.join(tmp, "second.log")
    rc, err = run_proxy(proxy_exe, ["-c", conf, "--threads", "2", "-s", str(free_ports(1)[0]),
                                    "-a", "127.0.0.1", "-o", log_path])
    text = open(log_path).read() if os.path.exists(log_path) else ""
    if rc != 1 or want not in text:
        fail("a second chash-proxy on %s: exit %d, log %r; want exit 1 and %r" % (
            os.path.basename(conf), rc, text[-400:] + err[-200:], want))


def check_port_taken(proxy_exe, tmp, conf, port, sock, live):
    """A second proxy on the first one's config must fail to listen, not share the port nor
    remove the live unix socket."""
    expect_refused(proxy_exe, tmp, conf,
                   "cannot listen on %s 0600: Address already in use" % sock)
    # The TCP port alone: the config's alpha pool (the last one) without the unix pool.
    only_tcp = write_file(os.path.join(tmp, "tcp-only.yml"),
                          "alpha:" + open(conf).read().split("\nalpha:", 1)[1])
    expect_refused(proxy_exe, tmp, only_tcp,
                   "cannot listen on 127.0.0.1:%d: Address already in use" % port)
    if live.call("PING") != b"PONG":
        fail("the first proxy stopped answering after a second one tried its port")
    if not os.path.exists(sock):
        fail("a second chash-proxy removed the first one's live socket %s" % sock)


def check_placement(conns, chash, conf, backends, tag, pool="alpha"):
    """SETs 40 keys through the connections (of both workers); each must be on chash lookup's
    backend."""
    keys = [("%s:%d" % (tag, i)).encode() for i in range(40)]
    owner = chash_lookup(chash, conf, pool, keys)
    by_addr = {b.text: b for b in backends}
    for i, k in enumerate(keys):
        c = conns[i % len(conns)]
        if c.call("SET", k, b"v") != b"OK":
            fail("pool %s: SET %s through worker %d failed" % (pool, k.decode(), c.worker))
    for k in keys:
        b = by_addr.get(owner[k])
        if b is None:
            fail("chash lookup named %s for %s, not a backend" % (owner[k], k.decode()))
        if b.call("GET", k) != b"v":
            soft_fail("%s: not on %s, its owner by chash lookup" % (k.decode(), owner[k]))


def body(t):
    proxy_exe, chash, redis_exe, tmp = t.proxy, t.chash, t.programs["redis-server"], t.tmp
    backends = start_redises(redis_exe, tmp, 4)
    serving, spare = backends[:3], backends[3]
    port, mport = free_ports(2)
    sock = os.path.join(tmp, "beta.sock")
    conf = write_file(os.path.join(tmp, "proxy.yml"), config(serving, port, sock))
    px = Proxy(proxy_exe, tmp, conf, [("127.0.0.1", port)],
               extra_args=["--threads", "2", "--metrics-port", str(mport)]).start()
    addr = ("127.0.0.1", port)

    # Spread. (The harness connected once to see the proxy accept: the baseline.)
    base_total = px.stats_json().get("total_connections")
    conns = [Counted(addr) for _ in range(CONNS)]
    by_worker = {0: [], 1: []}
    for c in conns:
        if c.worker not in by_worker:
            fail("INFO worker_id %d with --threads 2" % c.worker)
        by_worker[c.worker].append(c)
    log("%d connections: %d on worker 0, %d on worker 1" % (
        CONNS, len(by_worker[0]), len(by_worker[1])))
    if not by_worker[0] or not by_worker[1]:
        fail("all %d connections on one worker: SO_REUSEPORT listeners not spreading" % CONNS)
    w0, w1 = by_worker[0][0], by_worker[1][0]
    if w0.info().get("worker_threads") != "2":
        fail("INFO worker_threads is not 2")

    check_placement(conns, chash, conf, serving, "placed")
    check_port_taken(proxy_exe, tmp, conf, port, sock, conns[0])
    check_bad_flags(proxy_exe, conf)
    log("a second proxy on the same port refused (address in use); bad --threads refused")
    uconns = [Counted(sock) for _ in range(4)]
    check_placement(uconns, chash, conf, serving, "unix", pool="beta")
    log("unix-socket pool: %d connections served (workers %s)" % (
        len(uconns), sorted({c.worker for c in uconns})))
    for c in uconns:
        c.close()

    # Shared health: B's keys written through worker 0 until B is ejected.
    b = serving[1]
    candidates = [("bkey:%d" % i).encode() for i in range(200)]
    owner = chash_lookup(chash, conf, "alpha", candidates)
    bkeys = [k for k in candidates if owner[k] == b.text]
    if len(bkeys) < 4:
        fail("only %d of 200 keys on %s" % (len(bkeys), b.text))
    b.kill()
    errors = 0
    for k in bkeys:
        r = w0.call("SET", k, b"after")
        if r == b"OK":
            break
        if not isinstance(r, RespError):
            fail("SET of a killed backend's key through worker 0 answered %r" % (r,))
        errors += 1
    if errors != FAILURE_LIMIT:
        soft_fail("worker 0: %d writes of the killed backend's keys failed before it was "
                  "ejected; server_failure_limit is %d" % (errors, FAILURE_LIMIT))
    if value(scrape(mport), "chash_proxy_server_up", pool="alpha", server="s1") != 0:
        fail("/metrics: s1 still up after its ejection")
    r = w1.call("SET", bkeys[-1], b"after")
    if r != b"OK":
        fail("worker 1, which saw no failure of the killed backend, answered %r to a write of "
             "one of its keys: the ejection is not shared" % (r,))
    log("killed backend ejected after %d failures on worker 0; worker 1 skipped it at once" %
        errors)

    # Shared readmission.
    b = Redis(redis_exe, tmp, port=b.port).start()
    serving[1] = b
    wait_for("s1 readmitted", lambda: value(scrape(mport), "chash_proxy_server_up",
                                            pool="alpha", server="s1") == 1)
    for c in (w0, w1):
        k = bkeys[c.worker]
        if c.call("SET", k, b"back") != b"OK" or b.call("GET", k) != b"back":
            fail("after readmission, %s written through worker %d is not on its owner %s" % (
                k.decode(), c.worker, b.text))
    log("readmitted by one probe; both workers route to it again")

    # Reload: a 4th server, on every worker.
    before = w0.info()["pool_alpha_membership_version"]
    write_file(conf, config(serving + [spare], port, sock))
    os.kill(px.proc.pid, signal.SIGHUP)
    wait_for("reloaded", lambda: all(
        c.info()["pool_alpha_membership_version"] != before for c in conns))
    versions = {c.info()["pool_alpha_membership_version"] for c in conns}
    if len(versions) != 1:
        fail("workers report different versions after the reload: %s" % versions)
    check_placement(conns, chash, conf, serving + [spare], "reloaded")
    log("reload: %s -> %s on all %d connections of both workers" % (
        before, versions.pop(), CONNS))

    # Counters of both workers, added up: once they count every request answered and the unix
    # connections' closes (judged below).
    poll_until(lambda: total(scrape(mport), "chash_proxy_requests_total") == Counted.sent and
               px.stats_json().get("curr_connections") == CONNS, WAIT)
    counted = total(scrape(mport), "chash_proxy_requests_total")  # both pools, every class
    if counted != Counted.sent:
        soft_fail("/metrics counts %d requests; this test sent %d" % (counted, Counted.sent))
    st = px.stats_json()
    # opened: ours, plus the second proxy's one connection to the unix socket (its check that
    # a live proxy listens there)
    opened = CONNS + len(uconns) + 1
    if (st.get("total_connections") != base_total + opened or
            st.get("curr_connections") != CONNS):
        soft_fail("stats: total_connections %r, curr_connections %r; %d opened (after %r), "
                  "%d open" % (st.get("total_connections"), st.get("curr_connections"),
                               opened, base_total, CONNS))
    for c in conns:
        c.close()
    px.stop()
    return "2 workers: spread, shared ejection and readmission, reload, counters summed"


if __name__ == "__main__":
    run_test(body)

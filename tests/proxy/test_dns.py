#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_dns: a pool's membership from DNS (docs/FLEET.md, "Membership from DNS"), against a
real DNS server on loopback (dnsmasq, run as the test's user on a free port, answering only
from its command line and a hosts file the test rewrites).

Pool alpha names "membership: dns+srv://_redis._tcp.cache.test" (SRV records, each target a
server named by its target, all on 127.0.0.1 and distinct ports); pool beta names
"membership: dns://a.cache.test:P" (A records on 127.0.0.2.., one port). dnsmasq serves its
local data with a TTL of 0, so the proxy re-resolves every 100 ms (the floor) rather than every
membership_interval. SRV records come from dnsmasq's command line, which SIGHUP does not read
again: each SRV change restarts dnsmasq on the same port (an outage the proxy rides out, as
logged). Checked, each step waiting on /metrics, INFO or the log with a deadline:

  1. Start: alpha serves the 4 targets of the SRV answer, beta the 2 addresses (epoch 1 each);
     every key written through the proxy sits on the server `chash lookup` names for a file
     listing that answer's servers; /metrics shows the next lookup in 0.1 s (TTL 0, floored).
  2. beta's hosts file rewritten with a third address and dnsmasq SIGHUPed: beta serves 3
     (epoch 2) and the change opened beta's warm_up window (INFO), as a reload's; then an
     AAAA record (::1, a redis-server there): 4 servers (epoch 3); keys on their owners.
  3. Scale 4 -> 6 (adds only): applied at once, epoch 2, INFO shows 6 servers and a new
     membership version; keys on their owners under the 6. A second proxy on the same DNS
     serves the same version (the gap between the two is logged, not checked: a figure).
  4. Scale 6 -> 3 (removals): held down membership_hold_down first (held_down 1, logged once),
     then applied: epoch 3, by both proxies; keys on their owners under the 3.
  5. A flapping answer: r2 leaves (held down) and comes back within the hold-down: no change
     (epoch 3 for the hold-down and more, damped counted, "brings back" logged once).
  6. A target rescheduled: r2's name now resolves to 127.0.0.5 (a redis-server there on the
     same port): applied at once, not held down (the server is the same, by name), 0.00% of
     the key space moved; keys on their owners, r2's at its new address.
  7. The record set disappears (NXDOMAIN): the pool keeps its 3 servers, serves every key,
     logs it once while lookups go on failing, counts failed lookups, /metrics keeping 1.
  8. The DNS server stopped (SIGSTOP: lookups time out): kept the same way, logged once with
     "timeout"; SIGCONT: "answers again", no change (same set), keeping 0. Then a server
     that answers SERVFAIL in dnsmasq's place (a few lines of Python): kept, logged once.
  9. Each change shows once: one "membership OLD -> NEW" reload line per applied epoch (and
     the stats port's dns_epoch, dns_applied); a SIGHUP of the proxy keeps the list DNS gave (same version, same epoch).
 10. chash-proxy -t names a bad DNS URL by file:line:column; a pool without servers whose DNS
     does not answer refuses to start, naming the URL, and -t refuses it too (and passes
     the test's config while DNS answers). SIGTERM: clean exit, no sanitizer
     report.

Usage: test_dns.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (dnsmasq or redis-server missing and CI unset).
"""
import os
import pwd
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Proxy, Redis, Resp, bindable, chash_lookup, fail, free_ports,  # noqa: E402
                          holds, log, read_text, run_test, spawn, start_redises, tail,
                          wait_until, write_file)

SRV = "_redis._tcp.cache.test"
A_NAME = "a.cache.test"
HOLD_MS = 1500   # membership_hold_down: over several lookups (every 100 ms) on a loaded machine
WAIT = 15.0
NKEYS = 200


class Dnsmasq:
    """dnsmasq on 127.0.0.1:port, answering from its command line (SRV records) and a hosts
    file, NXDOMAIN for anything else under .test, never asking upstream."""

    def __init__(self, exe, tmp):
        self.exe, self.tmp = exe, tmp
        self.port = None
        self.hosts = os.path.join(tmp, "dns-hosts")
        self.log = os.path.join(tmp, "dnsmasq.log")
        self.proc = None
        self.user = pwd.getpwuid(os.getuid()).pw_name

    def write_hosts(self, lines):
        write_file(self.hosts, "".join("%s %s\n" % (a, n) for a, n in lines))

    def start(self, srv):
        """srv: [(target, port)] served as SRV records of SRV (none: NXDOMAIN)."""
        for _attempt in range(5):
            port = self.port or free_ports(1)[0]
            argv = [self.exe, "--keep-in-foreground", "--no-resolv", "--no-hosts",
                    "--port=%d" % port, "--listen-address=127.0.0.1", "--bind-interfaces",
                    "--user=%s" % self.user,
                    "--pid-file=%s" % os.path.join(self.tmp, "dnsmasq.pid"), "--local=/test/",
                    "--addn-hosts=%s" % self.hosts, "--local-ttl=0", "--log-facility=-"]
            argv += ["--srv-host=%s,%s,%d" % (SRV, t, p) for t, p in srv]
            self.proc = spawn(argv, self.log)
            ok = wait_until(lambda: self.proc.poll() is not None or
                            "started, version" in read_text(self.log), WAIT,
                            lambda: "dnsmasq did not start; log:\n" + tail(self.log))
            if self.proc.poll() is None and ok:
                self.port = port
                return self
            if self.port is not None:   # the port must stay: a proxy asks it
                fail("dnsmasq could not start again on port %d:\n%s" % (port, tail(self.log)))
        fail("dnsmasq could not start:\n" + tail(self.log))

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def restart(self, srv):
        self.stop()
        return self.start(srv)


class ServFail(threading.Thread):
    """A DNS server on UDP 127.0.0.1:port that answers every query SERVFAIL (the header's id,
    opcode and RD copied, QR and RA set, RCODE 2; the question echoed, no records): what a
    resolver whose upstream is broken answers. Test code: the proxy parses nothing itself."""

    def __init__(self, port):
        threading.Thread.__init__(self, daemon=True)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", port))
        self.sock.settimeout(0.05)
        self.done = threading.Event()
        self.answered = 0

    def run(self):
        while not self.done.is_set():
            try:
                q, peer = self.sock.recvfrom(4096)
            except socket.timeout:
                continue
            i = 12
            while i < len(q) and q[i] != 0:
                i += q[i] + 1
            if len(q) < 12 or i + 5 > len(q):
                continue
            head = q[:2] + bytes([0x80 | (q[2] & 0x79), 0x82]) + q[4:6] + b"\0" * 6
            self.sock.sendto(head + q[12:i + 5], peer)
            self.answered += 1

    def stop(self):
        self.done.set()
        self.join(5)
        self.sock.close()


def metrics(port):
    """{(family, pool): value} of chash_proxy_dns_* on the proxy's /metrics."""
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        text = r.read().decode()
    out = {}
    for m in re.finditer(r'^chash_proxy_dns_(\w+)\{pool="(\w+)"\} (\S+)$', text, re.M):
        out[(m.group(1), m.group(2))] = float(m.group(3))
    return out


def info(addr):
    with Resp(addr) as c:
        text = c.call("INFO").decode()
    return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)


def written(r):
    return "[%s]:%d" % (r.host, r.port) if ":" in r.host else r.text


def check_keys(t, proxy_addr, pool, servers, tag, hash_line="  hash: md5"):
    """NKEYS keys written through the proxy, each on the server chash lookup names for a file
    listing servers ([(redis, name or None)]) as the pool's."""
    lines = ["%s:" % pool, "  listen: 127.0.0.1:1", "  redis: true", hash_line, "  servers:"]
    # an IPv6 address in brackets, as the proxy names a server of an AAAA record
    lines += ['    - "%s:1%s"' % (written(r), " " + n if n else "") for r, n in servers]
    equiv = write_file(os.path.join(t.tmp, "equiv-%s-%s.yml" % (pool, tag)),
                       "\n".join(lines) + "\n")
    keys = ["%s:%s:%d" % (pool, tag, i) for i in range(NKEYS)]
    with Resp(proxy_addr) as c:
        got = c.pipeline([("SET", k, "v" + k) for k in keys])
    if any(g != b"OK" for g in got):
        fail("%s %s: a SET through the proxy failed: %r" % (pool, tag, got[:5]))
    owners = chash_lookup(t.chash, equiv, pool, [k.encode() for k in keys])
    by_addr = {written(r): r for r, _n in servers}
    used = set()
    for k in keys:
        owner = owners[k.encode()]
        used.add(owner)
        if by_addr[owner].call("GET", k) != ("v" + k).encode():
            fail("%s %s: key %s is not on %s, its owner under the answer" % (pool, tag, k, owner))
    if len(used) < len(servers):
        fail("%s %s: only %d of %d servers own a key" % (pool, tag, len(used), len(servers)))


def body(t):
    redis_exe, dnsmasq_exe = t.programs["redis-server"], t.programs["dnsmasq"]
    reds = start_redises(redis_exe, t.tmp, 6)
    names = ["r%d.cache.test" % i for i in range(6)]
    # beta: redis-servers on 127.0.0.2..4 and ::1, one port
    bport = next((p for p in free_ports(20)
                  if all(bindable("127.0.0.%d" % h, p) for h in (2, 3, 4)) and
                  bindable("::1", p)), None)
    if bport is None:
        fail("no port free on 127.0.0.2, .3, .4 and ::1 (IPv6 loopback)")
    breds = [Redis(redis_exe, t.tmp, port=bport, host=h).start()
             for h in ("127.0.0.2", "127.0.0.3", "127.0.0.4", "::1")]

    dns = Dnsmasq(dnsmasq_exe, t.tmp)
    hosts = [("127.0.0.1", n) for n in names] + [(breds[0].host, A_NAME),
                                                 (breds[1].host, A_NAME)]
    dns.write_hosts(hosts)

    def srv(idx):
        return [(names[i], reds[i].port) for i in idx]

    dns.start(srv(range(4)))

    port, bp, mport = free_ports(3)
    conf = os.path.join(t.tmp, "proxy.yml")
    write_file(conf, "\n".join([
        "alpha:", "  listen: 127.0.0.1:%d" % port, "  redis: true", "  hash: md5",
        "  membership: dns+srv://%s" % SRV,
        "  membership_resolver: 127.0.0.1:%d" % dns.port,
        "  membership_interval: 1000",
        "  membership_hold_down: %d" % HOLD_MS,
        "beta:", "  listen: 127.0.0.1:%d" % bp, "  redis: true", "  hash: md5",
        "  membership: dns://%s:%d" % (A_NAME, bport),
        "  membership_resolver: 127.0.0.1:%d" % dns.port,
        "  membership_hold_down: %d" % HOLD_MS, "  warm_up: 60000"]) + "\n")
    px = Proxy(t.proxy, t.tmp, conf, [("127.0.0.1", port), ("127.0.0.1", bp)],
               extra_args=["--metrics-port", str(mport)]).start()
    alpha, beta = ("127.0.0.1", port), ("127.0.0.1", bp)
    # a second proxy on the same DNS (alpha only), for the convergence of two proxies
    port2, mport2 = free_ports(2)
    conf2 = write_file(os.path.join(t.tmp, "proxy2.yml"), "\n".join([
        "alpha:", "  listen: 127.0.0.1:%d" % port2, "  redis: true", "  hash: md5",
        "  membership: dns+srv://%s" % SRV, "  membership_resolver: 127.0.0.1:%d" % dns.port,
        "  membership_interval: 1000", "  membership_hold_down: %d" % HOLD_MS]) + "\n")
    px2 = Proxy(t.proxy, t.tmp, conf2, [("127.0.0.1", port2)], label="proxy2",
                extra_args=["--metrics-port", str(mport2)]).start()
    alpha2 = ("127.0.0.1", port2)

    def converged(what):
        """Both proxies serve the same membership version (they never talk to each other)."""
        v = info(alpha)["pool_alpha_membership_version"]
        v2 = info(alpha2)["pool_alpha_membership_version"]
        if v != v2:
            fail("%s: the two proxies serve %s and %s" % (what, v, v2))

    def both_reach(epoch, what):
        """Seconds between the first and the second proxy showing epoch (polled every 20 ms:
        a figure for the log, not a check)."""
        seen = {}

        def look():
            for label, mp in (("1", mport), ("2", mport2)):
                if label not in seen and metrics(mp).get(("epoch", "alpha")) == epoch:
                    seen[label] = time.monotonic()
            return len(seen) == 2
        wait_until(look, WAIT, lambda: "%s: epoch %d on proxies %r only; logs:\n%s\n%s" % (
            what, epoch, sorted(seen), tail(px.log), tail(px2.log)), poll=0.02)
        converged(what)
        return abs(seen["1"] - seen["2"])

    def m(fam, pool="alpha"):
        return metrics(mport).get((fam, pool))

    def wait_m(fam, want, what, pool="alpha"):
        wait_until(lambda: m(fam, pool) == want, WAIT,
                   lambda: "%s: %s{%s} is %r, not %r; log:\n%s" % (
                       what, fam, pool, m(fam, pool), want, tail(px.log)))

    # 1. start
    if m("epoch") != 1 or m("epoch", "beta") != 1:
        fail("start: epochs %r %r, expected 1 and 1" % (m("epoch"), m("epoch", "beta")))
    i = info(alpha)
    if i.get("pool_alpha_servers") != "4" or i.get("pool_beta_servers") != "2":
        fail("start: INFO servers alpha %r beta %r" % (i.get("pool_alpha_servers"),
                                                         i.get("pool_beta_servers")))
    # the first lookup after the start's waits the interval; then the TTL (0) floored
    wait_until(lambda: m("lookups_total") >= 1, WAIT, "a first lookup")
    if m("next_lookup_seconds") != 0.1:
        fail("TTL 0: next lookup in %r s, expected 0.1 (the floor)" % m("next_lookup_seconds"))
    check_keys(t, alpha, "alpha", [(reds[k], names[k]) for k in range(4)], "s1")
    check_keys(t, beta, "beta", [(breds[0], None), (breds[1], None)], "s1")
    log("1. start: alpha 4 SRV targets, beta 2 A records, keys on their owners")

    # 2. beta's A records: hosts rewritten, SIGHUP
    dns.write_hosts(hosts + [(breds[2].host, A_NAME)])
    dns.proc.send_signal(signal.SIGHUP)
    wait_m("epoch", 2, "beta's third address", "beta")
    i = info(beta)
    if i.get("pool_beta_servers") != "3" or i.get("pool_beta_warm_up") != "warm":
        fail("beta: INFO shows %r servers, warm-up %r; expected 3 and warm (the change opens "
             "its warm_up window, as a reload's)" % (i.get("pool_beta_servers"),
                                                     i.get("pool_beta_warm_up")))
    check_keys(t, beta, "beta", [(r, None) for r in breds[:3]], "s2")
    # an AAAA record too: [::1] is a fourth server
    beta_hosts = [(breds[2].host, A_NAME), (breds[3].host, A_NAME)]
    dns.write_hosts(hosts + beta_hosts)
    dns.proc.send_signal(signal.SIGHUP)
    wait_m("epoch", 3, "beta's AAAA record", "beta")
    check_keys(t, beta, "beta", [(r, None) for r in breds], "s2b")
    log("2. dns://: a third A record (SIGHUP) is epoch 2 with its warm-up window, an AAAA record "
        "epoch 3 ([::1]), keys on their owners")

    # 3. scale 4 -> 6 (adds: at once)
    v1 = info(alpha)["pool_alpha_membership_version"]
    dns.restart(srv(range(6)))
    gap = both_reach(2, "scale 4 -> 6")
    i = info(alpha)
    if i["pool_alpha_servers"] != "6" or i["pool_alpha_membership_version"] == v1:
        fail("scale 4 -> 6: INFO servers %s version %s (was %s)" % (
            i["pool_alpha_servers"], i["pool_alpha_membership_version"], v1))
    check_keys(t, alpha, "alpha", [(reds[k], names[k]) for k in range(6)], "s3")
    check_keys(t, alpha2, "alpha", [(reds[k], names[k]) for k in range(6)], "s3b")
    log("3. scale 4 -> 6: epoch 2 at once, keys on their owners; the two proxies %.0f ms "
        "apart (TTL 0: a lookup every 100 ms)" % (gap * 1000))

    # 4. scale 6 -> 3 (removals: held down, then applied)
    start = len(read_text(px.log))
    dns.restart(srv(range(3)))
    wait_m("held_down", 1, "scale 6 -> 3 held down")
    if m("epoch") != 2:
        fail("scale 6 -> 3 applied before its hold-down")
    gap = both_reach(3, "scale 6 -> 3 after its hold-down")
    wait_m("held_down", 0, "hold-down over")
    if read_text(px.log, start).count("removes servers: held down") != 1:
        fail("the held-down removal is not logged once:\n" + read_text(px.log, start))
    check_keys(t, alpha, "alpha", [(reds[k], names[k]) for k in range(3)], "s4")
    px2.stop()
    log("4. scale 6 -> 3: held down %d ms, then epoch 3, keys on their owners; the two proxies "
        "%.0f ms apart" % (HOLD_MS, gap * 1000))

    # 5. a flapping answer: r2 leaves and comes back within the hold-down
    start = len(read_text(px.log))
    dns.restart(srv(range(2)))
    wait_m("held_down", 1, "r2 gone: held down")
    dns.restart(srv(range(3)))
    wait_m("damped_total", 1, "r2 back: damped")
    holds(lambda: m("epoch") == 3 and m("held_down") == 0, HOLD_MS / 1000.0 + 0.5,
          "the flap changed nothing")
    text = read_text(px.log, start)
    if text.count("brings back the servers") != 1 or "membership m-" in text:
        fail("the flap: expected one 'brings back' line and no membership change:\n" + text)
    log("5. flap: r2 out and back within the hold-down: damped, epoch 3 kept")

    # 6. a target rescheduled: r2's address changes (hosts file, SIGHUP), its name stays; the
    # change is applied at once (an address change is not a removal) and no key moves
    moved_port = reds[2].port
    if not bindable("127.0.0.5", moved_port):
        fail("127.0.0.5:%d is not free for r2's new address" % moved_port)
    r2b = Redis(redis_exe, t.tmp, port=moved_port, host="127.0.0.5").start()
    hosts = [(r2b.host if n == names[2] else a, n) for a, n in hosts]
    dns.write_hosts(hosts + beta_hosts)
    start = len(read_text(px.log))
    dns.proc.send_signal(signal.SIGHUP)
    wait_m("epoch", 4, "r2 at its new address")
    text = read_text(px.log, start)
    if "held down" in text or "0.00% of the key space moved" not in text:
        fail("r2's new address: expected no hold-down and no key moved:\n" + text)
    check_keys(t, alpha, "alpha", [(reds[0], names[0]), (reds[1], names[1]), (r2b, names[2])],
               "s6")
    log("6. a target's address changed: epoch 4 at once, no key moved, keys on their owners")

    # 7. the record set disappears (NXDOMAIN): kept
    start = len(read_text(px.log))
    failed0 = m("failed_total")
    dns.restart([])
    wait_until(lambda: m("failed_total") >= failed0 + 5, WAIT, "NXDOMAIN lookups counted")
    if m("keeping") != 1 or m("epoch") != 4 or info(alpha)["pool_alpha_servers"] != "3":
        fail("NXDOMAIN: keeping %r epoch %r" % (m("keeping"), m("epoch")))
    text = read_text(px.log, start)
    if text.count("NXDOMAIN") != 1 or "keeping its 3 servers" not in text:
        fail("NXDOMAIN: expected one line keeping the 3 servers:\n" + text)
    now3 = [(reds[0], names[0]), (reds[1], names[1]), (r2b, names[2])]
    check_keys(t, alpha, "alpha", now3, "s7")
    log("7. NXDOMAIN: the 3 servers kept and served, logged once")

    # 8. the DNS server stopped (timeouts): kept; back: no change
    dns.restart(srv(range(3)))
    wait_m("keeping", 0, "answers again")
    start = len(read_text(px.log))
    failed0 = m("failed_total")
    os.kill(dns.proc.pid, signal.SIGSTOP)
    try:
        wait_until(lambda: m("failed_total") >= failed0 + 1, WAIT, "a timeout counted")
        if m("keeping") != 1 or m("epoch") != 4:
            fail("timeout: keeping %r epoch %r" % (m("keeping"), m("epoch")))
        check_keys(t, alpha, "alpha", now3, "s8")
    finally:
        os.kill(dns.proc.pid, signal.SIGCONT)
    wait_m("keeping", 0, "answers again after the stop")
    wait_m("keeping", 0, "beta answers again after the stop", "beta")
    text = "".join(line for line in read_text(px.log, start).splitlines(True)
                   if "pool alpha" in line)
    if text.count("timeout") != 1 or text.count("answers again") != 1 or "membership m-" in text:
        fail("timeout: expected one timeout line, one 'answers again', no change:\n" + text)
    log("8. DNS server stopped: timeouts, the 3 servers kept, logged once; back: no change")

    # 8b. a DNS server that answers SERVFAIL: kept the same way, logged once
    dns.stop()
    start = len(read_text(px.log))
    failed0 = m("failed_total")
    sf = ServFail(dns.port)
    sf.start()
    try:
        wait_until(lambda: m("failed_total") >= failed0 + 3, WAIT, "SERVFAIL lookups counted")
        if m("keeping") != 1 or m("epoch") != 4 or sf.answered == 0:
            fail("SERVFAIL: keeping %r epoch %r answered %d" % (m("keeping"), m("epoch"),
                                                                 sf.answered))
        check_keys(t, alpha, "alpha", now3, "s8b")
    finally:
        sf.stop()
    text = "".join(line for line in read_text(px.log, start).splitlines(True)
                   if "pool alpha" in line)
    # c-ares 1.18 reports "every server answered SERVFAIL" as it reports a closed port (the
    # one dnsmasq left just before): one line for both
    if text.count("each answered SERVFAIL") != 1:
        fail("SERVFAIL: expected one line:\n" + text)
    dns.start(srv(range(3)))
    wait_m("keeping", 0, "answers again after SERVFAIL")
    wait_m("keeping", 0, "beta answers again after SERVFAIL", "beta")
    log("8b. SERVFAIL: the 3 servers kept and served, logged once")

    # 9. each change once in the log; a SIGHUP of the proxy keeps the list DNS gave
    whole = read_text(px.log)
    changes = len(re.findall(r"reload: pool alpha: membership m-\w+ -> m-\w+", whole))
    if changes != 3 or m("applied_total") != 3:
        fail("alpha: %d membership lines, %r applied; expected 3 (epochs 2, 3 and 4)" % (
            changes, m("applied_total")))
    st = px.stats_json()["alpha"]
    if st.get("dns_epoch") != 4 or st.get("dns_applied") != 3 or st.get("dns_keeping") != 0:
        fail("stats: %r" % {k: v for k, v in st.items() if k.startswith("dns_")})
    start = len(read_text(px.log))
    v4 = info(alpha)["pool_alpha_membership_version"]
    px.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: "reload done" in read_text(px.log, start), WAIT, "the SIGHUP's reload")
    i = info(alpha)
    if i["pool_alpha_membership_version"] != v4 or i["pool_alpha_servers"] != "3" or \
            m("epoch") != 4:
        fail("SIGHUP changed the DNS pool: %r" % {k: v for k, v in i.items() if "alpha" in k})
    check_keys(t, alpha, "alpha", now3, "s9")
    log("9. each change logged once (%d lookups, %d failed); SIGHUP keeps the DNS list" % (
        m("lookups_total"), m("failed_total")))

    # 10. chash-proxy -t, a start that cannot resolve, SIGTERM
    bad = write_file(os.path.join(t.tmp, "bad.yml"), "a:\n  listen: 127.0.0.1:1\n"
                     "  membership: dns://cache.test\n")
    r = subprocess.run([t.proxy, "-t", "-c", bad], capture_output=True, text=True, timeout=30)
    if r.returncode == 0 or "bad.yml:3:15" not in r.stdout + r.stderr:
        fail("-t on a bad DNS URL: status %d, output %r" % (r.returncode, r.stdout + r.stderr))
    dead = free_ports(1)[0]
    nodns = write_file(os.path.join(t.tmp, "nodns.yml"), "\n".join([
        "a:", "  listen: 127.0.0.1:%d" % free_ports(1)[0],
        "  membership: dns+srv://%s" % SRV, "  membership_resolver: 127.0.0.1:%d" % dead]) + "\n")
    r = subprocess.run([t.proxy, "-c", nodns], capture_output=True, text=True, timeout=30)
    if r.returncode == 0 or "cannot resolve its membership dns+srv://" not in r.stderr:
        fail("a start without DNS: status %d, stderr %r" % (r.returncode, r.stderr))
    r = subprocess.run([t.proxy, "-t", "-c", nodns], capture_output=True, text=True, timeout=30)
    if r.returncode == 0 or "cannot resolve its membership dns+srv://" not in r.stderr:
        fail("-t without DNS: status %d, stderr %r" % (r.returncode, r.stderr))
    r = subprocess.run([t.proxy, "-t", "-c", conf], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        fail("-t with DNS answering: status %d, stderr %r" % (r.returncode, r.stderr))
    px.stop()
    dns.stop()
    return "scaled 4 -> 6 -> 3 by SRV, 2 -> 3 by A, a flap damped, NXDOMAIN and timeouts kept"


if __name__ == "__main__":
    run_test(body, programs=("redis-server", "dnsmasq"))

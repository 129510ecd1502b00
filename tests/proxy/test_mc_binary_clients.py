#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_mc_binary_clients: the memcached clients that speak the binary protocol, unchanged,
through chash-proxy in front of 3 memcacheds of unequal weights (3, 1, 2; ketama, md5) (issue 39).

Two pools over the same 3 memcacheds: "sasl" with client_auth_file (SASL PLAIN, memcached -Y's
format) and "plain" without. The clients, all at once, each on its own key prefix:

  - memjs (npm memjs@1.3.2: binary only) with SASL: tests/proxy/clients/mc_binary_memjs.js;
  - PHP's memcached extension (Debian php-memcached) with OPT_BINARY_PROTOCOL and SASL:
    tests/proxy/clients/mc_binary_php.php;
  - pylibmc (Debian python3-pylibmc) with binary=True, on the plain pool, and with SASL;
  - libmemcached's tools (Debian libmemcached-tools: memccp, memccat, memcexist, memctouch,
    memcrm) with --binary and SASL.

Each client sets, gets, multi-gets (memjs, which has no multi-get, pipelines its gets on one
connection), CAS-updates (PHP and pylibmc; memjs and the tools have no CAS), increments and
decrements (with an initial value where the client sends one), touches and deletes, checking
every answer; a wrong password is refused; PHP's getVersion and getStats (binary and text
mode) and pylibmc's get_stats read the proxy's own version and stats. Then the test checks
every key a client left on the memcached that `chash lookup --config` names for it, with the
value the client's work must have left there, and on no other; and every key it deleted or
never stored on none.

Then the layers a binary request goes through as any memcached request does, on a third pool
over the same memcacheds: replicas 2 and a TLS listener (a self-signed certificate made with
openssl). A binary client over TLS stores 40 keys with quiet sets; each is on exactly the 2
memcacheds `chash lookup --replicas 2` names; a quiet multi-get answers all 40 in the client's
order; one memcached is killed (kill -9), and the same multi-get and a loud get of each key it
held still answer every key with its value (the replica's read failover).

Usage: test_mc_binary_clients.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (a client or memcached missing and CI unset).
"""
import json
import os
import ssl
import struct
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Mc, Proxy, chash_lookup, fail, free_ports, pool_yaml,  # noqa: E402
                          run_test, skip, start_memcacheds, write_file)
from test_mc_binary import OPS, Bin, fields, packet  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
NPM_MODULES = "/usr/local/lib/chash-oracles/node_modules"
BOUND = 120  # seconds for everything a client does
USER, PASSWORD = "chash-app", "s3cret-Binary"
WEIGHTS = (3, 1, 2)
TOOLS = ("memccp", "memccat", "memcexist", "memctouch", "memcrm")


def run_client(argv, env=None):
    """A client script's state ({present: {key: value}, absent: [key]}), or fail."""
    try:
        r = subprocess.run(argv, capture_output=True, timeout=BOUND, env=env)
    except subprocess.TimeoutExpired:
        fail("%s: no result within %d s" % (argv[:2], BOUND))
    out = r.stdout.decode("utf-8", "replace").strip().splitlines()
    if r.returncode != 0 or not out or not out[-1].startswith("ok "):
        fail("%s: exit %d: %s %s" % (os.path.basename(argv[1]), r.returncode, out[-1:],
                                     r.stderr.decode("utf-8", "replace")[-2000:]))
    return json.loads(out[-1][3:])


def pylibmc_work(port, prefix, sasl, pid):
    """pylibmc with binary=True (and SASL when sasl): its work, checked; the state it leaves."""
    import pylibmc
    auth = {"username": USER, "password": PASSWORD} if sasl else {}
    mc = pylibmc.Client(["127.0.0.1:%d" % port], binary=True,
                        behaviors={"cas": True, "receive_timeout": 20000000,
                                   "send_timeout": 20000000}, **auth)
    keys = ["%sk%d" % (prefix, i) for i in range(24)]

    def value(i):
        return b"L" * 300000 if i == 5 else ("%s-value-%d" % (prefix, i)).encode()

    def check(what, got, want):
        if got != want:
            fail("pylibmc (%s): %s: %r, expected %r" % (prefix, what, got, want))

    for i, k in enumerate(keys):
        check("set " + k, mc.set(k, value(i)), True)
    for i, k in enumerate(keys):
        check("get " + k, mc.get(k), value(i))
    absent = ["%sabsent%d" % (prefix, i) for i in range(6)]
    check("get_multi", mc.get_multi(keys + absent), {k: value(i) for i, k in enumerate(keys)})
    got, cas = mc.gets(keys[1])
    check("gets", got, value(1))
    check("cas with the current cas", mc.cas(keys[1], b"cas-updated", cas), True)
    check("cas with a stale cas", mc.cas(keys[1], b"stale", cas), False)
    check("get after cas", mc.get(keys[1]), b"cas-updated")
    check("add of a present key", mc.add(keys[0], b"x"), False)
    check("add of a new key", mc.add(prefix + "added", b"fresh"), True)
    try:  # libmemcached's binary replace of an absent key is NotFound (as from memcached)
        mc.replace(prefix + "nobody", b"x")
        fail("pylibmc (%s): replace of an absent key succeeded" % prefix)
    except pylibmc.NotFound:
        pass
    check("append", mc.append(keys[2], b"+tail"), True)
    check("prepend", mc.prepend(keys[2], b"head+"), True)
    counter = prefix + "counter"
    check("set the counter", mc.set(counter, b"10"), True)
    check("incr by 5", mc.incr(counter, 5), 15)
    check("decr by 3", mc.decr(counter, 3), 12)
    try:
        mc.incr(prefix + "nobody", 1)
        fail("pylibmc (%s): incr of an absent key succeeded" % prefix)
    except pylibmc.NotFound:
        pass
    check("touch of a present key", mc.touch(keys[3], 3600), True)
    check("touch of an absent key", mc.touch(prefix + "nobody", 3600), False)
    check("delete", mc.delete(keys[4]), True)
    check("delete of an absent key", mc.delete(keys[4]), False)
    check("get of the deleted key", mc.get(keys[4]), None)
    stats = mc.get_stats()  # the binary stat: the proxy's own
    check("get_stats' pid", [(st.get("pid"), st.get("version")) for _srv, st in stats],
          [(b"%d" % pid, b"1.6.0+chash-proxy-0.1.0")])
    mc.disconnect_all()
    if sasl:
        bad = pylibmc.Client(["127.0.0.1:%d" % port], binary=True, username=USER,
                             password="wr0ng-" + PASSWORD)
        try:
            bad.get(keys[0])
            fail("pylibmc: a get with a wrong password was served")
        except pylibmc.Error:
            pass
    present = {k: value(i).decode() for i, k in enumerate(keys) if i != 4}
    present.update({keys[1]: "cas-updated", prefix + "added": "fresh", counter: "12",
                    keys[2]: "head+%s+tail" % value(2).decode()})
    return {"present": present, "absent": absent + [prefix + "nobody", keys[4]]}


def tools_work(port, tmp, prefix):
    """libmemcached's tools with --binary and SASL: copies, reads, tests, touches, removes."""
    common = ["--binary", "--servers=127.0.0.1:%d" % port, "--username=" + USER,
              "--password=" + PASSWORD]

    def tool(name, *args, ok=True):
        r = subprocess.run([name] + common + list(args), capture_output=True, timeout=60)
        if (r.returncode == 0) != ok:
            fail("%s %s: exit %d, expected %s: %s" % (name, " ".join(args), r.returncode,
                                                       "success" if ok else "failure",
                                                       (r.stdout + r.stderr)[-500:]))
        return r.stdout

    files = os.path.join(tmp, "memc-files")
    os.makedirs(files, exist_ok=True)
    keys = ["%sk%d" % (prefix, i) for i in range(12)]
    values = {k: ("%s contents %d\n" % (k, i) * (1 + i * 40)).encode() for i, k in enumerate(keys)}
    paths = []
    for k in keys:
        path = os.path.join(files, k)
        with open(path, "wb") as f:
            f.write(values[k])
        paths.append(path)
    tool("memccp", *paths)  # memccp stores each file under its base name
    got = tool("memccat", *keys)  # each value, then a newline
    if got != b"".join(values[k] + b"\n" for k in keys):
        fail("memccat --binary of %d keys: %d bytes, not the files' %d" %
             (len(keys), len(got), sum(map(len, values.values()))))
    tool("memcexist", keys[0])
    tool("memcexist", prefix + "nobody", ok=False)
    tool("memctouch", "--expire=3600", keys[1])
    tool("memctouch", "--expire=3600", prefix + "nobody", ok=False)
    tool("memcrm", keys[2])
    tool("memcexist", keys[2], ok=False)
    # --add of a present file is refused, of a new one stored
    added = os.path.join(files, prefix + "added")
    with open(added, "wb") as f:
        f.write(b"added by memccp --add\n")
    tool("memccp", "--add", paths[0], ok=False)
    tool("memccp", "--add", added)
    present = {k: values[k].decode() for k in keys if k != keys[2]}
    present[prefix + "added"] = "added by memccp --add\n"
    return {"present": present, "absent": [keys[2], prefix + "nobody"]}


def check_placement(t, config, pool, mcs, name, state):
    """Every key of state["present"] on the memcached chash lookup names, with its value, and
    on no other; every key of state["absent"] on none."""
    present = {k.encode(): v.encode() for k, v in state["present"].items()}
    absent = [k.encode() for k in state["absent"]]
    owners = chash_lookup(t.chash, config, pool, list(present))
    by_addr = {m.text: m for m in mcs}
    held = []
    for m in mcs:
        with Mc(m.addr) as c:
            have = {}
            keys = list(present) + absent
            for i in range(0, len(keys), 50):
                have.update(c.get_many(keys[i:i + 50]))
            held.append(have)
    for k, v in present.items():
        owner = by_addr.get(owners[k])
        if owner is None:
            fail("%s: chash lookup named %r for %r, not one of the pool's" % (name, owners[k], k))
        on = [m.text for m, have in zip(mcs, held) if k in have]
        if on != [owner.text]:
            fail("%s: key %r on %s, chash lookup names %s" % (name, k, on, owner.text))
        got = held[mcs.index(owner)][k]
        if got != v:
            fail("%s: key %r holds %r on %s, expected %r" % (name, k, got[:60], owner.text,
                                                              v[:60]))
    for k in absent:
        on = [m.text for m, have in zip(mcs, held) if k in have]
        if on:
            fail("%s: key %r, deleted or never stored, is on %s" % (name, k, on))
    return {m.text for m in mcs if any(owners[k] == m.text for k in present)}


class TlsBin(Bin):
    """A binary-protocol connection over TLS."""

    def __init__(self, addr, cafile):
        Bin.__init__(self, addr)
        ctx = ssl.create_default_context(cafile=cafile)
        ctx.check_hostname = False
        self.sock = ctx.wrap_socket(self.sock, server_hostname="localhost")


def replica_owners(chash, config, pool, keys):
    """{key: {host:port, host:port}}: the first 2 owners of chash lookup --replicas 2."""
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "detect_leaks=0"]))
    r = subprocess.run([chash, "lookup", "--config", config, "--pool", pool, "--replicas", "2",
                        "-"], input=b"".join(k + b"\n" for k in keys), capture_output=True,
                       timeout=60, env=env)
    lines = r.stdout.split(b"\n")
    if r.returncode != 0 or len(lines) != len(keys) + 1:
        fail("chash lookup --replicas 2: exit %d, %d lines: %s" % (r.returncode, len(lines) - 1,
                                                                    r.stderr[-300:]))
    out = {}
    for k, line in zip(keys, lines):
        parts = line.split(b"\t")
        if parts[0] != k or len(parts) != 3:
            fail("unexpected chash lookup line %r" % line[:200])
        out[k] = {p.decode() for p in parts[1:]}
    return out


def multi_get(c, keys):
    """A quiet multi-get (getkq of each key, then a noop): [(opaque, key, value, status)]."""
    mark = 0xFEEDFACE
    c.send(b"".join(packet(OPS["getkq"], k, opaque=i) for i, k in enumerate(keys)) +
           packet(OPS["noop"], opaque=mark))
    out = []
    while True:
        r = c.response()
        if r is None:
            fail("a multi-get over TLS: the connection closed")
        f = fields(r)
        if f["opaque"] == mark:
            return out
        k = f["body"][4:4 + f["klen"]]
        out.append((f["opaque"], k, f["body"][4 + f["klen"]:], f["status"]))


def replicas_over_tls(t, config, port, mcs, cafile):
    """Binary requests through a pool with replicas 2 and a TLS listener; one memcached killed."""
    keys = [b"layers:%d" % i for i in range(40)]
    want = [(i, k, b"replicated " + k, 0) for i, k in enumerate(keys)]
    c = TlsBin(("127.0.0.1", port), cafile)
    c.send(b"".join(packet(OPS["setq"], k, struct.pack(">II", 0, 0), b"replicated " + k,
                           opaque=i) for i, k in enumerate(keys)))
    if multi_get(c, keys) != want:
        fail("40 quiet sets then a multi-get over TLS through replicas 2")
    owners = replica_owners(t.chash, config, "layers", keys)
    for k in keys:
        on = {m.text for m in mcs if k in m.keys_present([k])}
        if on != owners[k]:
            fail("replicas 2: %r on %s, chash lookup names %s" % (k, sorted(on),
                                                                 sorted(owners[k])))
    dead = max(mcs, key=lambda m: sum(m.text in o for o in owners.values()))
    dead.kill()
    lost = [k for k in keys if dead.text in owners[k]]
    if multi_get(c, keys) != want:
        fail("a multi-get over TLS with a replica's memcached killed")
    for i, k in enumerate(lost):
        c.send(packet(OPS["get"], k, opaque=i))
        f = fields(c.response())
        if f["status"] != 0 or f["body"][4:] != b"replicated " + k or f["opaque"] != i:
            fail("a get of %r, whose owner %s is killed: %r" % (k, dead.text, f))
    c.close()
    return len(lost)


def body(t):
    if not os.path.exists(os.path.join(NPM_MODULES, "memjs", "package.json")):
        skip("npm memjs not in %s (scripts/bootstrap installs it)" % NPM_MODULES)
    mcs = start_memcacheds(t.programs["memcached"], t.tmp, 3)
    servers = [(m.text, w, None) for m, w in zip(mcs, WEIGHTS)]
    write_file(os.path.join(t.tmp, "users"), "%s:%s\n" % (USER, PASSWORD))
    subprocess.run([t.programs["openssl"], "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                    "-keyout", os.path.join(t.tmp, "tls.key"), "-out",
                    os.path.join(t.tmp, "tls.pem"), "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True,
                   timeout=60)
    sasl_port, plain_port, layers_port = free_ports(3)
    settings = dict(redis=False, distribution="ketama", hash="md5", timeout=5000,
                    auto_eject_hosts=False)
    config = write_file(os.path.join(t.tmp, "proxy.yml"),
                        pool_yaml("sasl", sasl_port, servers, client_auth_file="users",
                                  **settings) +
                        pool_yaml("plain", plain_port, servers, **settings) +
                        pool_yaml("layers", layers_port, servers, replicas=2,
                                  tls_cert_file="tls.pem", tls_key_file="tls.key",
                                  **dict(settings, auto_eject_hosts=True,
                                         server_failure_limit=1, server_retry_timeout=60000)))
    proxy = Proxy(t.proxy, t.tmp, config, [("127.0.0.1", p) for p in
                                           (sasl_port, plain_port, layers_port)],
                  extra_args=["--threads", "2"]).start()

    env = dict(os.environ, NODE_PATH=NPM_MODULES)
    jobs = {
        "memjs": ("sasl", lambda: run_client(
            [t.programs["node"], os.path.join(HERE, "clients", "mc_binary_memjs.js"),
             "127.0.0.1", str(sasl_port), USER, PASSWORD, "memjs:"], env=env)),
        "php-memcached": ("sasl", lambda: run_client(
            [t.programs["php"], "-d", "memcached.use_sasl=1",
             os.path.join(HERE, "clients", "mc_binary_php.php"),
             "127.0.0.1", str(sasl_port), USER, PASSWORD, "php:", str(plain_port)])),
        "pylibmc": ("plain", lambda: pylibmc_work(plain_port, "pylibmc:", False, proxy.proc.pid)),
        "pylibmc-sasl": ("sasl", lambda: pylibmc_work(sasl_port, "pylibmc-sasl:", True,
                                                          proxy.proc.pid)),
        "libmemcached-tools": ("sasl", lambda: tools_work(sasl_port, t.tmp, "memc-tools:")),
    }
    results, errors, lock = {}, [], threading.Lock()

    def run(name, fn):
        try:
            got = fn()
            with lock:
                results[name] = got
        except BaseException as e:  # fail() raises; a client's exception is a failure too
            with lock:
                errors.append("%s: %s" % (name, e))

    threads = [threading.Thread(target=run, args=(n, fn)) for n, (_pool, fn) in jobs.items()]
    for th in threads:
        th.start()
    for th in threads:
        th.join(BOUND + 30)
        if th.is_alive():
            errors.append("a client did not finish within %d s" % (BOUND + 30))
    if errors:
        fail("through chash-proxy:\n  " + "\n  ".join(errors))
    summary = []
    for name, (pool, _fn) in jobs.items():
        used = check_placement(t, config, pool, mcs, name, results[name])
        summary.append("%s %d keys on %d servers" % (name, len(results[name]["present"]),
                                                     len(used)))
    lost = replicas_over_tls(t, config, layers_port, mcs, os.path.join(t.tmp, "tls.pem"))
    summary.append("over TLS with replicas 2: 40 keys, %d of them on a killed memcached, "
                   "all read back" % lost)
    proxy.stop()
    for path in (proxy.log, proxy.stderr):
        with open(path, errors="replace") as f:
            if PASSWORD in f.read():
                fail("%s holds the password" % path)
    return "; ".join(summary)


if __name__ == "__main__":
    run_test(body, programs=("memcached", "node", "php", "openssl") + TOOLS,
             modules=("pylibmc",))

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_mc_binary: memcached's binary protocol through chash-proxy (issue 39), against a real
memcached as the oracle.

  1. The differential test: every request of mc_binary_requests.txt (every opcode the proxy
     serves, quiet and loud, CAS mismatches, missing keys, 500 KB values, keys that the text
     protocol cannot carry) is sent to a memcached directly and to chash-proxy in front of
     another, fresh one (a one-server pool), each line followed by a noop; every response up to
     that noop's is compared byte for byte. Both memcacheds start empty and see the same
     writes in the same order, so their CAS values agree too. Masked, and only these: the
     body of version's response (the proxy answers its own version, as the text version
     does). Not in the list, because the proxy answers them otherwise on purpose: flush
     (refused with status 0x83, as the text flush_all is) and stat (the proxy's own stats, as
     the text stats; both checked in part 2).
  2. quit and quitq after a pipeline: the same bytes as memcached's, then the close. The
     proxy's own answers: flush and flushq refused with 0x83 and the connection kept; stat
     the proxy's own stats (its pid, version, uptime, connections), framed as memcached frames
     its own (every response checked the same way for both; the last, empty one the same
     bytes); stat with a group (items) refused with 0x83, the connection kept.
  3. Bad input (item 4): an unknown opcode gets 0x81 "Unknown command" and the connection is
     kept (as memcached); extras and key lengths beyond the body get 0x81 and a close; a key
     over 250 bytes or a frame of the wrong shape gets 0x04 "Invalid arguments" and a close (as
     memcached); a body beyond the pool's request limit gets 0x03 "Too large." and a close; a
     text line on a binary connection (a wrong magic) a close; a value over the item limit
     0x03 with the connection kept (as memcached: -I 1m); a key over 186 bytes that the text
     protocol cannot carry 0x04, kept (its base64 would be over the 250 characters memcached
     takes as a meta key: one difference from memcached, which stores binary keys up to 250
     bytes, documented in docs/PROXY.md); and a quiet flood (200,000 getq of
     absent keys without a noop) answers nothing, leaves the proxy's RSS bounded and is
     answered by its noop. Throughout, another client's gets are served.
  4. SASL PLAIN (item 3) on a pool with client_auth_file (a relative path, memcached's -Y
     format): the mechanisms are "PLAIN"; before authentication version and noop are served
     and a get gets 0x20 "Auth failure." and a close (as memcached -S); wrong credentials get
     0x20 with the connection kept, and after 3 in a row it is closed (the AUTH guard's
     limit); right ones get "Authenticated" and the commands work; a text client of that pool
     gets what a memcached started with -Y on those users answers it; a pool without the file
     answers the SASL opcodes "Unknown command" (memcached without SASL). A malformed file, a missing one, and
     the key in a redis pool each fail `chash-proxy -t` naming the config's file:line:column,
     never a password.
  5. A pool of 3 memcacheds (unequal weights): 60 keys set in binary land each on exactly one
     memcached, and a text delete of each through the proxy removes it from that one (binary
     and text requests route alike); a quiet multi-get (getkq of present and absent keys, then
     a noop) spanning the 3 answers the present keys in the client's order with their opaques;
     one memcached killed (failover_depth 1): a get of a key it owned answers the proxy's error
     as status 0x86 with its text, a quiet get's error is sent too (errors are never
     withheld), the connection is kept and the other keys are still served; a quiet
     multi-get over the 3 answers each of the killed one's keys 0x86 and the others their
     values (the run is one request, split and merged, answered key by key).

Usage: test_mc_binary.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (memcached missing and CI unset).
"""
import os
import socket
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Mc, Memcached, Proxy, fail, free_ports, log, pool_yaml,  # noqa: E402
                          run_test, spawn, start_memcacheds, wait_accepting, wait_until,
                          write_file)

HERE = os.path.dirname(os.path.abspath(__file__))
REQUESTS = os.path.join(HERE, "mc_binary_requests.txt")
MARK = 0xFEEDFACE  # the opaque of the noop that ends each line

OPS = {
    "get": 0x00, "set": 0x01, "add": 0x02, "replace": 0x03, "delete": 0x04, "increment": 0x05,
    "decrement": 0x06, "quit": 0x07, "flush": 0x08, "getq": 0x09, "noop": 0x0a,
    "version": 0x0b, "getk": 0x0c, "getkq": 0x0d, "append": 0x0e, "prepend": 0x0f, "stat": 0x10,
    "setq": 0x11, "addq": 0x12, "replaceq": 0x13, "deleteq": 0x14, "incrementq": 0x15,
    "decrementq": 0x16, "quitq": 0x17, "flushq": 0x18, "appendq": 0x19, "prependq": 0x1a,
    "touch": 0x1c, "gat": 0x1d, "gatq": 0x1e, "sasl_list": 0x20, "sasl_auth": 0x21,
    "sasl_step": 0x22, "gatk": 0x23, "gatkq": 0x24,
}


def packet(op, key=b"", extras=b"", value=b"", opaque=0, cas=0, magic=0x80):
    body = extras + key + value
    return struct.pack(">BBHBBHIIQ", magic, op, len(key), len(extras), 0, 0, len(body), opaque,
                       cas) + body


def data(text):
    if text.startswith("hex:"):
        return bytes.fromhex(text[4:])
    if text.startswith("%"):
        n = int(text[1:])
        return (b"a b\tc\x00d\r\n" * (n // 9 + 1))[:n]
    if text.startswith("*"):
        n = int(text[1:])
        return (b"0123456789abcdefghijklmnopqrstuvwxyz" * (n // 36 + 1))[:n]
    return text.encode()


def build(spec, lineno, last_cas):
    """The packet for one request spec ("set key=k value=v flags=1")."""
    words = spec.split()
    name, args = words[0], dict(w.split("=", 1) for w in words[1:])
    op = OPS[name]
    key, value = data(args.get("key", "")), data(args.get("value", ""))
    cas = args.get("cas", "0")
    cas = last_cas if cas == "@" else int(cas)
    extras = b""
    if name.rstrip("q") in ("set", "add", "replace"):
        extras = struct.pack(">II", int(args.get("flags", 0)), int(args.get("exp", 0)))
    elif name.rstrip("q") in ("increment", "decrement"):
        extras = struct.pack(">QQI", int(args.get("delta", 1)), int(args.get("initial", 0)),
                             int(args.get("exp", 0)))
    elif name in ("touch", "gat", "gatq", "gatk", "gatkq"):
        extras = struct.pack(">I", int(args.get("exp", 0)))
    return packet(op, key, extras, value, int(args.get("opaque", lineno)), cas)


class Bin:
    """A raw binary-protocol connection."""

    def __init__(self, addr, timeout=15.0):
        self.sock = socket.create_connection(addr, timeout=timeout)
        self.buf = b""

    def close(self):
        self.sock.close()

    def send(self, b):
        self.sock.sendall(b)

    def _fill(self):
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise EOFError
        self.buf += chunk

    def response(self):
        """One response (header + body), or None at a close."""
        try:
            while len(self.buf) < 24:
                self._fill()
            blen = struct.unpack(">I", self.buf[8:12])[0]
            while len(self.buf) < 24 + blen:
                self._fill()
        except EOFError:
            if self.buf:
                fail("a close in the middle of a response: %r" % self.buf[:64])
            return None
        r, self.buf = self.buf[:24 + blen], self.buf[24 + blen:]
        return r

    def until_mark(self):
        """Every response up to and including the noop with opaque MARK; None if closed."""
        out = []
        while True:
            r = self.response()
            if r is None:
                return out, True
            out.append(r)
            if r[1] == 0x0a and struct.unpack(">I", r[12:16])[0] == MARK:
                return out, False

    def closed(self):
        try:
            while True:
                self._fill()
        except EOFError:
            return True
        except socket.timeout:
            return False
        except ConnectionResetError:
            return True


def fields(r):
    magic, op, klen, elen, _dt, status, blen, opaque, cas = struct.unpack(">BBHBBHIIQ", r[:24])
    return {"op": op, "status": status, "klen": klen, "elen": elen, "opaque": opaque, "cas": cas,
            "body": r[24:]}


def show(rs):
    return [(hex(f["op"]), hex(f["status"]), f["cas"], f["opaque"], f["body"][:48])
            for f in map(fields, rs)]


def masked(rs):
    out = []
    for r in rs:
        if r[1] == OPS["version"]:
            r = r[:24]  # the proxy's own version: the one mask
        out.append(r)
    return out


def differential(direct_addr, proxy_addr):
    lines = []
    with open(REQUESTS) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if line and not line.startswith("#"):
                lines.append((n, line))
    sides = [Bin(direct_addr), Bin(proxy_addr)]
    last = [0, 0]
    compared = 0
    for n, line in lines:
        specs = [s.strip() for s in line.split("|")]
        quits = any(s.split()[0].startswith("quit") for s in specs)
        got = []
        for i, c in enumerate(sides):
            b = b"".join(build(s, n, last[i]) for s in specs)
            if not quits:
                b += packet(OPS["noop"], opaque=MARK)
            c.send(b)
            rs, closed = c.until_mark() if not quits else (list(iter(c.response, None)), True)
            for r in rs:
                cas = struct.unpack(">Q", r[16:24])[0]
                if cas:
                    last[i] = cas
            got.append((masked(rs), closed))
        if got[0] != got[1]:
            fail("line %d %r: memcached answered %s (closed %s), the proxy %s (closed %s)" %
                 (n, line, show(got[0][0]), got[0][1], show(got[1][0]), got[1][1]))
        compared += len(got[0][0])
    for c in sides:
        c.close()
    return len(lines), compared


def expect(resp, op, status, what):
    if resp is None:
        fail("%s: the connection closed, expected status %#x" % (what, status))
    f = fields(resp)
    if f["op"] != op or f["status"] != status:
        fail("%s: got opcode %#x status %#x body %r, expected opcode %#x status %#x" %
             (what, f["op"], f["status"], f["body"][:80], op, status))
    return f


def quits(direct_addr, proxy_addr):
    """quit (a response, then the close) and quitq (the close alone), after a pipeline: the same
    bytes from memcached and from the proxy."""
    for name in ("quit", "quitq"):
        got = []
        for a in (direct_addr, proxy_addr):
            c = Bin(a)
            c.send(packet(OPS["getk"], b"nothing-here", opaque=1) + packet(OPS["noop"], opaque=2) +
                   packet(OPS[name], opaque=3) + packet(OPS["noop"], opaque=4))
            got.append(list(iter(c.response, None)))
            c.close()
        if got[0] != got[1] or len(got[0]) != (3 if name == "quit" else 2):
            fail("%s: memcached %s, the proxy %s" % (name, show(got[0]), show(got[1])))


def stat_responses(addr, key=b""):
    """A binary stat's responses, up to the empty one that ends them: [fields]."""
    c = Bin(addr)
    c.send(packet(OPS["stat"], key, opaque=7))
    out = []
    while not out or out[-1]["klen"] or out[-1]["body"]:
        r = c.response()
        if r is None:
            fail("stat %r: closed after %d responses" % (key, len(out)))
        out.append(fields(r))
        if out[-1]["status"] != 0:
            break
    c.close()
    return out


def stats(direct_addr, proxy_addr, pid):
    """stat: the proxy's own stats (memcached's names where it has one), framed as memcached
    frames its own: every response the stat opcode, status 0, the request's opaque, no extras
    nor CAS, a key and a value; then the same empty response memcached ends with. stat with a
    group (a key) is refused with 0x83, the connection kept."""
    theirs, ours = stat_responses(direct_addr), stat_responses(proxy_addr)
    for who, rs in (("memcached", theirs), ("the proxy", ours)):
        for f in rs:
            if (f["op"], f["status"], f["opaque"], f["cas"], f["elen"]) != \
                    (OPS["stat"], 0, 7, 0, 0):
                fail("stat from %s: %r" % (who, f))
        if len(rs) < 5 or any(f["klen"] == 0 for f in rs[:-1]):
            fail("stat from %s: %d responses, %s" % (who, len(rs), rs[:3]))
    if theirs[-1] != ours[-1]:
        fail("stat's last response: memcached %r, the proxy %r" % (theirs[-1], ours[-1]))
    got = {f["body"][:f["klen"]]: f["body"][f["klen"]:] for f in ours[:-1]}
    if got.get(b"pid") != b"%d" % pid or got.get(b"version") != b"1.6.0+chash-proxy-0.1.0" or \
            b"uptime" not in got or int(got.get(b"curr_connections", b"0")) < 1:
        fail("stat from the proxy: %r" % got)
    c = Bin(proxy_addr)
    c.send(packet(OPS["stat"], b"items", opaque=8) + packet(OPS["noop"], opaque=MARK))
    rs, closed = c.until_mark()
    if closed or len(rs) != 2:
        fail("stat items: %s (closed %s)" % (show(rs), closed))
    f = expect(rs[0], OPS["stat"], 0x83, "stat items")
    if f["opaque"] != 8 or b"not supported" not in f["body"]:
        fail("stat items: %r" % f)
    c.close()
    return len(ours) - 1


def proxy_answers(addr):
    c = Bin(addr)
    for name in ("flush", "flushq"):
        c.send(packet(OPS[name], opaque=7) + packet(OPS["noop"], opaque=MARK))
        rs, closed = c.until_mark()
        if closed or len(rs) != 2:
            fail("%s: expected a refusal then the noop, got %s (closed %s)" % (name, show(rs),
                                                                               closed))
        f = expect(rs[0], OPS[name], 0x83, name)
        if f["opaque"] != 7 or b"not supported" not in f["body"]:
            fail("%s: refusal %r" % (name, f))
    c.close()


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def bad_input(addr, other, proxy):
    def fresh():
        return Bin(addr)

    def served(what):
        # another client, all along: a get through the proxy answered
        other.send(packet(OPS["getk"], b"other-key", opaque=5))
        f = expect(other.response(), OPS["getk"], 0x00, "the other client after " + what)
        if f["body"][4:] != b"other-keyother-value":
            fail("the other client after %s: %r" % (what, f["body"]))

    # unknown opcode: kept
    c = fresh()
    c.send(packet(0x42, b"k", b"", b"body", opaque=11) + packet(OPS["noop"], opaque=MARK))
    rs, closed = c.until_mark()
    if closed or len(rs) != 2:
        fail("unknown opcode: %s closed %s" % (show(rs), closed))
    f = expect(rs[0], 0x42, 0x81, "unknown opcode")
    if f["body"] != b"Unknown command" or f["opaque"] != 11:
        fail("unknown opcode: %r" % f)
    c.close()
    served("an unknown opcode")
    # extlen + keylen > bodylen: Unknown command, closed
    c = fresh()
    c.send(struct.pack(">BBHBBHIIQ", 0x80, 0x00, 10, 8, 0, 0, 4, 1, 0) + b"abcd")
    expect(c.response(), 0x00, 0x81, "lengths beyond the body")
    if not c.closed():
        fail("lengths beyond the body: the connection stayed open")
    c.close()
    served("lengths beyond the body")
    # key over 250 bytes; a get with extras: Invalid arguments, closed
    for what, p in (("a 251-byte key", packet(OPS["get"], b"k" * 251)),
                    ("a get with extras", packet(OPS["get"], b"k", b"\0\0\0\0")),
                    ("a set without extras", packet(OPS["set"], b"k", b"", b"v"))):
        c = fresh()
        c.send(p)
        f = expect(c.response(), p[1], 0x04, what)
        if f["body"] != b"Invalid arguments":
            fail("%s: %r" % (what, f))
        if not c.closed():
            fail("%s: the connection stayed open" % what)
        c.close()
        served(what)
    # a key the text protocol cannot carry, over 186 bytes (its base64 over the 250 characters
    # of a meta key): Invalid arguments, kept
    c = fresh()
    c.send(packet(OPS["getk"], (b"a b" * 70)[:187], opaque=6) + packet(OPS["noop"], opaque=MARK))
    rs, closed = c.until_mark()
    if closed or len(rs) != 2:
        fail("a 187-byte key with spaces: %s closed %s" % (show(rs), closed))
    f = expect(rs[0], OPS["getk"], 0x04, "a 187-byte key with spaces")
    if b"186 bytes" not in f["body"] or f["opaque"] != 6:
        fail("a 187-byte key with spaces: %r" % f)
    c.close()
    served("a 187-byte key with spaces")
    # a body over the request limit (max_request_bytes 2 MiB here): Too large, closed
    c = fresh()
    c.send(struct.pack(">BBHBBHIIQ", 0x80, 0x01, 1, 8, 0, 0, 64 << 20, 3, 0))
    expect(c.response(), 0x01, 0x03, "a 64 MiB body")
    if not c.closed():
        fail("a 64 MiB body: the connection stayed open")
    c.close()
    served("a 64 MiB body")
    # a value over the item limit (1 MiB) within the request limit: Too large, kept
    c = fresh()
    c.send(packet(OPS["set"], b"huge", struct.pack(">II", 0, 0), b"x" * (1536 * 1024), opaque=4) +
           packet(OPS["noop"], opaque=MARK))
    rs, closed = c.until_mark()
    if closed or len(rs) != 2:
        fail("a 1.5 MiB value: %s closed %s" % (show(rs), closed))
    expect(rs[0], OPS["set"], 0x03, "a 1.5 MiB value")
    c.close()
    served("a 1.5 MiB value")
    # a text request on a binary connection: a wrong magic, closed
    c = fresh()
    c.send(packet(OPS["noop"], opaque=MARK) + b"get foo\r\n")
    rs, closed = c.until_mark()
    if not c.closed():
        fail("a text line on a binary connection: the connection stayed open")
    c.close()
    served("a wrong magic")
    # a quiet flood: 200,000 getq of absent keys, then one noop: only the noop's response
    c = fresh()
    before = rss_kib(proxy.proc.pid)
    chunk = b"".join(packet(OPS["getq"], b"flood-%06d" % i, opaque=i) for i in range(10000))
    for _ in range(20):
        c.send(chunk)
    c.send(packet(OPS["noop"], opaque=MARK))
    rs, closed = c.until_mark()
    if closed or len(rs) != 1:
        fail("a quiet flood: %d responses (closed %s), expected the noop's alone" %
             (len(rs), closed))
    grown = rss_kib(proxy.proc.pid) - before
    if grown > 64 * 1024:
        fail("a quiet flood grew the proxy by %d KiB" % grown)
    c.close()
    served("a quiet flood")
    return grown


def sasl(c, op, mech=b"", value=b"", opaque=9):
    c.send(packet(op, mech, b"", value, opaque=opaque))
    return c.response()


def sasl_tests(t, backend):
    port, plain_port = free_ports(2)
    users = write_file(os.path.join(t.tmp, "users"), "alice:s3cret:with:colons\nbob:pw\r\n\n")
    del users
    config = os.path.join(t.tmp, "auth.yml")
    write_file(config, pool_yaml("auth", port, [(backend.text, 1, None)], redis=False,
                                 client_auth_file="users") +
               pool_yaml("plain", plain_port, [(backend.text, 1, None)], redis=False))
    proxy = Proxy(t.proxy, t.tmp, config, [("127.0.0.1", port), ("127.0.0.1", plain_port)],
                  label="auth").start()
    addr = ("127.0.0.1", port)
    # the mechanisms; version and noop before authentication; a get refused and closed
    c = Bin(addr)
    f = expect(sasl(c, OPS["sasl_list"]), OPS["sasl_list"], 0, "list mechanisms")
    if f["body"] != b"PLAIN":
        fail("mechanisms: %r" % f["body"])
    c.send(packet(OPS["version"], opaque=1))
    expect(c.response(), OPS["version"], 0, "version before authentication")
    c.send(packet(OPS["noop"], opaque=2))
    expect(c.response(), OPS["noop"], 0, "noop before authentication")
    c.send(packet(OPS["get"], b"k", opaque=3))
    f = expect(c.response(), OPS["get"], 0x20, "a get before authentication")
    if f["body"] != b"Auth failure." or not c.closed():
        fail("a get before authentication: %r, or the connection stayed open" % f)
    c.close()
    # wrong credentials: refused, kept; the third in a row closes
    c = Bin(addr)
    for i, cred in enumerate((b"\0alice\0wr0ngpw", b"\0mallory\0pw", b"\0bob\0s3cret:with:colons")):
        expect(sasl(c, OPS["sasl_auth"], b"PLAIN", cred), OPS["sasl_auth"], 0x20,
               "wrong credentials %d" % i)
    if not c.closed():
        fail("3 wrong credentials in a row: the connection stayed open")
    c.close()
    # a step without a start, an unknown mechanism: refused
    c = Bin(addr)
    expect(sasl(c, OPS["sasl_step"], b"PLAIN", b"\0bob\0pw"), OPS["sasl_step"], 0x20, "a step")
    expect(sasl(c, OPS["sasl_auth"], b"CRAM-MD5", b"x"), OPS["sasl_auth"], 0x20,
           "an unknown mechanism")
    c.close()
    # right credentials (an authzid, a password with colons), then commands
    for user, cred in ((b"alice", b"alice\0alice\0s3cret:with:colons"), (b"bob", b"\0bob\0pw")):
        c = Bin(addr)
        f = expect(sasl(c, OPS["sasl_auth"], b"PLAIN", cred), OPS["sasl_auth"], 0,
                   "%s's credentials" % user.decode())
        if f["body"] != b"Authenticated":
            fail("authenticated: %r" % f["body"])
        c.send(packet(OPS["set"], b"auth-" + user, struct.pack(">II", 0, 0), b"v", opaque=4))
        expect(c.response(), OPS["set"], 0, "a set after authentication")
        c.send(packet(OPS["getk"], b"auth-" + user, opaque=5))
        f = expect(c.response(), OPS["getk"], 0, "a get after authentication")
        if f["body"][4:] != b"auth-" + user + b"v":
            fail("a get after authentication: %r" % f["body"])
        c.close()
    # a text client of that pool: answered as memcached -Y on the same file answers it
    yport = free_ports(1)[0]
    # (memcached's own reader takes neither the CRLF nor the empty line of "users")
    yusers = write_file(os.path.join(t.tmp, "users-Y"), "alice:s3cret:with:colons\nbob:pw\n")
    argv = [t.programs["memcached"], "-p", str(yport), "-l", "127.0.0.1", "-U", "0", "-Y",
            yusers] + (["-u", "root"] if os.geteuid() == 0 else [])
    yproc = spawn(argv, os.path.join(t.tmp, "memcached-Y.log"))
    wait_accepting(yproc, [("127.0.0.1", yport)], os.path.join(t.tmp, "memcached-Y.log"),
                   "memcached -Y")
    lines = []
    for a in (("127.0.0.1", yport), addr):
        s = socket.create_connection(a, timeout=10)
        s.sendall(b"get k\r\n")
        lines.append(s.recv(4096))
        s.close()
    yproc.kill()
    if lines[0] != lines[1] or not lines[0].startswith(b"CLIENT_ERROR"):
        fail("a text client of an authenticating pool: memcached -Y %r, the proxy %r" %
             tuple(lines))
    # a pool without client_auth_file: the SASL opcodes are unknown, as memcached without SASL
    c = Bin(("127.0.0.1", plain_port))
    for name in ("sasl_list", "sasl_auth"):
        expect(sasl(c, OPS[name], b"PLAIN" if name == "sasl_auth" else b"",
                    b"\0bob\0pw" if name == "sasl_auth" else b""), OPS[name], 0x81, name)
    c.close()
    # bad files, a misplaced key: -t names the config's place, never a password
    bad = write_file(os.path.join(t.tmp, "bad-users"), "carol:topsecret\nnocolon-hunter2\n")
    del bad
    cases = (
        ("bad-users", False, "client_auth_file 'BASE/bad-users': line 2: expected user:password"),
        ("missing-users", False, "missing-users"),
        ("users", True, "\"client_auth_file\" is only valid in a memcached pool"),
    )
    for i, (fname, redis, want) in enumerate(cases):
        path = write_file(os.path.join(t.tmp, "bad%d.yml" % i),
                          "# a comment\n" + pool_yaml("p", free_ports(1)[0],
                                                      [(backend.text, 1, None)], redis=redis,
                                                      client_auth_file=fname))
        r = subprocess.run([t.proxy, "-t", "-c", path], capture_output=True, text=True,
                           timeout=30)
        out = r.stdout + r.stderr
        where = "%s:5:3" % path
        if r.returncode == 0 or where not in out or want.replace("BASE", t.tmp) not in out:
            fail("-t with %s (redis %s): rc %d, expected %r and %r in:\n%s" %
                 (fname, redis, r.returncode, where, want, out))
        for secret in ("topsecret", "hunter2", "s3cret", ":pw"):
            if secret in out:
                fail("-t with %s echoed a password: %s" % (fname, out))
    for path in (proxy.log, proxy.stderr):
        with open(path, errors="replace") as f:
            text = f.read()
        for secret in ("s3cret", "wr0ngpw"):
            if secret in text:
                fail("%s holds a password: %s" % (path, secret))
    return "SASL checks passed"


def three_servers(t):
    mcs = start_memcacheds(t.programs["memcached"], t.tmp, 3)
    port = free_ports(1)[0]
    config = write_file(os.path.join(t.tmp, "three.yml"), pool_yaml(
        "three", port, [(m.text, w, None) for m, w in zip(mcs, (1, 2, 3))], redis=False,
        distribution="ketama", hash="md5", auto_eject_hosts=False, timeout=1000,
        failover_depth=1))
    proxy = Proxy(t.proxy, t.tmp, config, [("127.0.0.1", port)], label="three").start()
    addr = ("127.0.0.1", port)
    keys = [b"three-%03d" % i for i in range(60)]
    c = Bin(addr)
    c.send(b"".join(packet(OPS["setq"], k, struct.pack(">II", i, 0), b"v" + k, opaque=i)
                    for i, k in enumerate(keys)) + packet(OPS["noop"], opaque=MARK))
    rs, closed = c.until_mark()
    if closed or len(rs) != 1:
        fail("60 quiet sets: %s" % show(rs))
    owner = {}
    for k in keys:
        have = [i for i, m in enumerate(mcs) if k in m.keys_present([k])]
        if len(have) != 1:
            fail("key %r on memcacheds %s, expected exactly one" % (k, have))
        owner[k] = have[0]
    if len(set(owner.values())) != 3:
        fail("60 keys on %d of 3 memcacheds" % len(set(owner.values())))
    # a quiet multi-get over the 3: present keys in order, absent ones silent
    ask = []
    for i, k in enumerate(keys[:30]):
        ask.append(k)
        if i % 3 == 0:
            ask.append(b"absent-%d" % i)
    c.send(b"".join(packet(OPS["getkq"], k, opaque=1000 + j) for j, k in enumerate(ask)) +
           packet(OPS["noop"], opaque=MARK))
    rs, closed = c.until_mark()
    want = [(1000 + j, k) for j, k in enumerate(ask) if not k.startswith(b"absent")]
    got = [(fields(r)["opaque"], fields(r)["body"][4:4 + fields(r)["klen"]]) for r in rs[:-1]]
    if closed or got != want:
        fail("quiet multi-get: got %s, expected %s" % (got[:5], want[:5]))
    for r, (_o, k) in zip(rs, want):
        f = fields(r)
        if f["body"][4 + f["klen"]:] != b"v" + k or f["status"] != 0:
            fail("quiet multi-get: %r for %r" % (f, k))
    # text deletes through the proxy remove each key from the memcached binary put it on
    with Mc(addr) as text:
        for k in keys[30:]:
            if text.call(b"delete " + k + b"\r\n") != b"DELETED\r\n":
                fail("text delete of %r through the proxy" % k)
    for k in keys[30:]:
        if k in mcs[owner[k]].keys_present([k]):
            fail("a text delete did not reach the memcached the binary set used for %r" % k)
    # one memcached killed: its keys answer 0x86, loud or quiet; the others are served
    dead = owner[keys[0]]
    mcs[dead].kill()
    lost = [k for k in keys[:30] if owner[k] == dead][:2]
    kept = [k for k in keys[:30] if owner[k] != dead][0]
    c.send(packet(OPS["get"], lost[0], opaque=1) + packet(OPS["getq"], lost[1], opaque=2) +
           packet(OPS["getk"], kept, opaque=3) + packet(OPS["noop"], opaque=MARK))
    rs, closed = c.until_mark()
    if closed or len(rs) != 4:
        fail("with a memcached killed: %s (closed %s)" % (show(rs), closed))
    for r, opq in zip(rs[:2], (1, 2)):
        f = fields(r)
        if f["status"] != 0x86 or f["opaque"] != opq or not f["body"]:
            fail("a get of a killed memcached's key: %r" % f)
    f = fields(rs[2])
    if f["status"] != 0 or f["body"][4 + f["klen"]:] != b"v" + kept:
        fail("a get of a live memcached's key with another killed: %r" % f)
    # a quiet multi-get over the killed memcached and the live ones: each key answered as its
    # own request would be, the killed one's keys 0x86, the others their values
    mixed = keys[:30]
    c.send(b"".join(packet(OPS["getkq"], k, opaque=2000 + j) for j, k in enumerate(mixed)) +
           packet(OPS["noop"], opaque=MARK))
    rs, closed = c.until_mark()
    got = [(fields(r)["opaque"], fields(r)["status"], fields(r)["body"][4 + fields(r)["klen"]:])
           for r in rs[:-1]]
    want = [(2000 + j, 0x86 if owner[k] == dead else 0, None if owner[k] == dead else b"v" + k)
            for j, k in enumerate(mixed)]
    if closed or [(o, st, v if st == 0 else None) for o, st, v in got] != want or \
            {owner[k] for k in mixed} != {0, 1, 2}:
        fail("a quiet multi-get with a memcached killed: %s, expected %s" % (got, want))
    c.close()
    return fields(rs[0])["body"]


def body(t):
    # The quiet flood's RSS is the proxy's own: ASan's quarantine (256 MB by default) would
    # otherwise keep every block the flood's requests freed, whatever the proxy holds.
    os.environ["ASAN_OPTIONS"] = ":".join(filter(None, [os.environ.get("ASAN_OPTIONS"),
                                                        "quarantine_size_mb=16"]))
    mc_exe = t.programs["memcached"]
    direct = Memcached(mc_exe, t.tmp).start()
    backend = Memcached(mc_exe, t.tmp).start()
    port = free_ports(1)[0]
    config = write_file(os.path.join(t.tmp, "proxy.yml"), pool_yaml(
        "bin", port, [(backend.text, 1, None)], redis=False, max_request_bytes=2 << 20,
        server_failure_limit=3, auto_eject_hosts=False))
    proxy = Proxy(t.proxy, t.tmp, config, [("127.0.0.1", port)]).start()
    paddr = ("127.0.0.1", port)
    nlines, nresp = differential(direct.addr, paddr)
    log("differential: %d request lines, %d responses identical" % (nlines, nresp))
    quits(direct.addr, paddr)
    proxy_answers(paddr)
    log("stat: %d of the proxy's own, framed as memcached's" %
        stats(direct.addr, paddr, proxy.proc.pid))
    other = Bin(paddr)
    other.send(packet(OPS["set"], b"other-key", struct.pack(">II", 0, 0), b"other-value",
                      opaque=1))
    expect(other.response(), OPS["set"], 0, "the other client's set")
    grown = bad_input(paddr, other, proxy)
    other.close()
    wait_until(proxy.alive, 5, "the proxy alive")
    sasl_tests(t, backend)
    why = three_servers(t)
    log("a killed memcached's key: 0x86 %r" % why)
    return "%d lines, %d responses identical; quiet flood grew RSS by %d KiB" % (
        nlines, nresp, grown)


if __name__ == "__main__":
    run_test(body, programs=("memcached",))

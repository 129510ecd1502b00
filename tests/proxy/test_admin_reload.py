#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""proxy_admin_reload: reload through the metrics port, POST /-/reload (Prometheus' convention).

chash-proxy with --metrics-port in front of 3 real redis-servers (one pool); a 4th is running
but not in the config yet. Requests go through http.client, as an admin tool's would.

  1. The file rewritten to add the 4th server, POST /-/reload: 200, the body is
     "reloaded: alpha: OLD -> NEW" with the versions `chash lookup --show-version` gives for the
     two files; the stats' membership_version and INFO's pool_alpha_membership_version are NEW,
     "reloads" counts 1.
  2. POST again with the same file: 200 "unchanged".
  3. An invalid file (a misspelled key), POST: 400, the body is FILE:LINE:COLUMN: message (the
     line of the misspelled key); the version stays NEW, reload_failures counts 1, and SET/GET
     through the proxy still work, on every key's owner under the last good file.
  4. GET /-/reload: 405 with "Allow: POST"; GET /metrics still 200 (with the new version).
     Time values out of bounds are refused with their limit, nothing applied (issue 24):
     ramp_start a day ahead (the change would never take effect) or behind, warm_up and ramp
     over a day; a sane reload after them still applies the file.
  5. SIGTERM: clean exit, no sanitizer report.

Usage: test_admin_reload.py CHASH_PROXY CHASH_CLI
Exit: 0 pass, 1 fail, 77 skip (redis-server missing and CI unset).
"""
import http.client
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxyharness import (Proxy, Resp, RespError, chash_lookup, fail, free_ports, log,  # noqa: E402
                          pool_yaml, run_test, soft_fail, start_redises, write_file)

POOL = "alpha"
HTTP_TIMEOUT = 30.0   # a reload measures the moved share on 100,000 keys (ASan build)


def show_version(chash, config):
    r = subprocess.run([chash, "lookup", "--config", config, "--pool", POOL, "--show-version",
                        "x"], capture_output=True, timeout=60)
    first = r.stdout.decode().splitlines()[0] if r.stdout else ""
    if r.returncode != 0 or not first.startswith("# version "):
        fail("chash lookup --show-version: %r %r" % (r.stdout[:200], r.stderr[:200]))
    return first[len("# version "):]


def request(port, method, path):
    """(status, {lower header: value}, body text) of one request on its own connection."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=HTTP_TIMEOUT)
    try:
        c.request(method, path, body=b"" if method == "POST" else None)
        r = c.getresponse()
        body = r.read().decode("utf-8", "replace")
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body
    finally:
        c.close()


def replace_file(path, text):
    write_file(path + ".tmp", text)
    os.rename(path + ".tmp", path)


def info_version(addr):
    with Resp(addr) as c:
        text = c.call("INFO")
    if isinstance(text, RespError):
        fail("INFO through the proxy: %r" % text)
    m = re.search(r"pool_%s_membership_version:(\S+)" % POOL, text.decode())
    if not m:
        fail("INFO has no pool_%s_membership_version: %r" % (POOL, text[:400]))
    return m.group(1)


def check_served(addr, chash, good_file, backends, tag):
    """SET/GET of 200 keys through the proxy: each answered, stored on its owner under
    good_file (read back on the backend directly)."""
    keys = [b"%s:%d" % (tag.encode(), i) for i in range(200)]
    with Resp(addr) as c:
        got = c.pipeline([("SET", k, b"v" + k) for k in keys] + [("GET", k) for k in keys])
    bad = [(k, g) for k, g in zip(keys * 2, got)
           if g != b"OK" and g != b"v" + k]
    if bad:
        fail("%s: %d requests not served, e.g. %r" % (tag, len(bad), bad[0]))
    owners = chash_lookup(chash, good_file, POOL, keys)
    by_text = {b.text: b for b in backends}
    wrong = [k for k in keys if by_text[owners[k]].call("GET", k) != b"v" + k]
    if wrong:
        soft_fail("%s: %d keys not on their owner under %s, e.g. %r" % (
            tag, len(wrong), os.path.basename(good_file), wrong[0]))


def body(t):
    proxy_exe, chash, redis_exe, tmp = t.proxy, t.chash, t.programs["redis-server"], t.tmp
    backends = start_redises(redis_exe, tmp, 4)
    port, mport = free_ports(2)
    addr = ("127.0.0.1", port)

    def conf_text(servers):
        return pool_yaml(POOL, port, [(b.text, 1, None) for b in servers], hash="fnv1a_64",
                         distribution="ketama", timeout=5000, server_connections=1)

    old_file = write_file(os.path.join(tmp, "old.yml"), conf_text(backends[:3]))
    new_file = write_file(os.path.join(tmp, "new.yml"), conf_text(backends))
    conf = write_file(os.path.join(tmp, "proxy.yml"), conf_text(backends[:3]))
    v_old, v_new = show_version(chash, old_file), show_version(chash, new_file)
    if v_old == v_new:
        fail("the two configs have the same version %s" % v_old)

    px = Proxy(proxy_exe, tmp, conf, [addr, ("127.0.0.1", mport)],
               extra_args=["--metrics-port", str(mport)]).start()
    st = px.stats_json()
    if st[POOL].get("membership_version") != v_old:
        fail("membership_version %r at start, chash lookup says %r" % (
            st[POOL].get("membership_version"), v_old))
    check_served(addr, chash, old_file, backends, "before")

    # 1. A valid reload that adds a server.
    replace_file(conf, conf_text(backends))
    code, _, text = request(mport, "POST", "/-/reload")
    log("POST /-/reload (server added): %d %r" % (code, text))
    want = "reloaded: %s: %s -> %s\n" % (POOL, v_old, v_new)
    if code != 200 or text != want:
        fail("POST /-/reload after adding a server: %d %r, want 200 %r" % (code, text, want))
    st = px.stats_json()
    if st[POOL].get("membership_version") != v_new or st.get("reloads") != 1:
        fail("after the reload: stats version %r, reloads %r (want %s, 1)" % (
            st[POOL].get("membership_version"), st.get("reloads"), v_new))
    if info_version(addr) != v_new:
        fail("INFO's version after the reload is not %s" % v_new)
    check_served(addr, chash, new_file, backends, "after")

    # 2. The same file again: nothing changes.
    code, _, text = request(mport, "POST", "/-/reload")
    if code != 200 or text != "unchanged\n":
        soft_fail("POST /-/reload with the same file: %d %r, want 200 'unchanged'" % (code, text))

    # 3. An invalid file: 400 with file:line:column, the last good config keeps serving.
    bad = conf_text(backends[:3]).replace("  timeout:", "  timeuot:")
    replace_file(conf, bad)
    bad_line = 1 + next(i for i, l in enumerate(bad.splitlines()) if "timeuot" in l)
    code, _, text = request(mport, "POST", "/-/reload")
    log("POST /-/reload (invalid file): %d %r" % (code, text))
    m = re.match(re.escape(conf) + r":(\d+):(\d+): (.+)\n$", text)
    if code != 400 or not m:
        fail("POST /-/reload with an invalid file: %d %r, want 400 FILE:LINE:COLUMN: message" %
             (code, text))
    if int(m.group(1)) != bad_line:
        soft_fail("error at line %s, the misspelled key is on line %d" % (m.group(1), bad_line))
    st = px.stats_json()
    if (st[POOL].get("membership_version") != v_new or st.get("reload_failures") != 1 or
            st.get("reloads") != 2):
        fail("after a rejected reload: version %r, reloads %r, reload_failures %r "
             "(want %s, 2, 1)" % (st[POOL].get("membership_version"), st.get("reloads"),
                                  st.get("reload_failures"), v_new))
    if info_version(addr) != v_new:
        fail("INFO's version changed on a rejected reload")
    check_served(addr, chash, new_file, backends, "rejected")

    # 4. Other methods.
    code, headers, _ = request(mport, "GET", "/-/reload")
    if code != 405 or headers.get("allow") != "POST":
        fail("GET /-/reload: %d, Allow %r (want 405, POST)" % (code, headers.get("allow")))
    code, _, text = request(mport, "GET", "/metrics")
    if code != 200 or ('version="%s"' % v_new) not in text:
        fail("GET /metrics after the reloads: %d, new version listed: %s" % (
            code, ('version="%s"' % v_new) in text))
    if request(mport, "POST", "/metrics")[0] != 405:
        soft_fail("POST /metrics is not 405")
    replace_file(conf, conf_text(backends[:3]))  # a change, so an accepted reload would apply
    now_ms = int(time.time() * 1000)
    for query, want in (
            ("?ramp=1000&ramp_start=99999999999999", "within an hour (3600000 ms)"),
            ("?ramp=1000&ramp_start=%d" % (now_ms + 86400000), "within an hour (3600000 ms)"),
            ("?ramp=1000&ramp_start=%d" % (now_ms - 86400000), "within an hour (3600000 ms)"),
            ("?warm_up=86400001", "at most 86400000 ms (a day)"),
            ("?ramp=2147483647", "at most 86400000 ms (a day)")):
        code, _, text = request(mport, "POST", "/-/reload" + query)
        if code != 400 or want not in text or "99999999999999" in text:
            fail("POST /-/reload%s: %d %r, want 400 naming the limit (%s), no value echoed" % (
                query, code, text, want))
    if px.stats_json()[POOL].get("membership_version") != v_new:
        fail("a refused out-of-bounds reload changed the membership")
    code, _, text = request(mport, "POST", "/-/reload?ramp=1000&ramp_start=%d" % (now_ms + 500))
    if code != 200 or text != "reloaded: %s: %s -> %s\n" % (POOL, v_new, v_old):
        fail("a sane reload after the refused ones: %d %r" % (code, text))

    # 5. Clean exit.
    px.stop()
    log("admin reload: applied, unchanged, rejected (400, file:line:column), 405; clean exit")


if __name__ == "__main__":
    run_test(body)

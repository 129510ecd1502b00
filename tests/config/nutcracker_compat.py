#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the config fixtures against the real twemproxy: `nutcracker -t` must accept every
valid_*.yml and reject every err_*.yml, except for the deviations listed below (each must still
be a deviation, so the list stays honest).

twemproxy requires "listen" in every pool and chash does not, so a pool without one gets a unique
"listen: 127.0.0.1:<port>" in the copy given to nutcracker. Exits 0 when everything agrees,
1 on an unexpected verdict; when nutcracker is missing (Debian: apt-get install nutcracker),
77 (ctest: skipped), or 1 when the environment variable CI is set.

Usage: tests/config/nutcracker_compat.py [fixtures dir]
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

# Where chash deliberately differs from nutcracker 0.5.0; see docs/CONFIG.md.
DEVIATIONS = {
    "valid_all_keys.yml": "reuseport is newer than the 0.5.0 release",
    "valid_sockets.yml": "libchash's own hash and distribution names (xxh3, ring)",
    "valid_chash_keys.yml": "chash's own pool keys (version, failover_depth, "
                            "server_failure_window, server_retry_max, max_request_bytes, "
                            "max_client_buffer_bytes, bounded_load_factor)",
    "valid_client_auth.yml": "chash's own pool key client_auth",
    "valid_gutter.yml": "chash's own pool keys gutter and gutter_ttl",
    "valid_membership_dns.yml": "chash's own pool keys membership (dns://, dns+srv://), "
                                "membership_interval, membership_hold_down and "
                                "membership_resolver",
    "err_host.yml": "twemproxy resolves server hosts only when connecting; chash refuses "
                    "characters no hostname has",
    "err_listen_perm.yml": "twemproxy reads permissions with strtol: \"0999\" becomes 0",
    "err_nul.yml": "a NUL byte cannot live in a C string; twemproxy keeps lengths",
}


def with_listen(text, first_port):
    """Adds a listen line to every pool that has none."""
    lines = text.split("\n")
    out, port = [], first_port
    for i, line in enumerate(lines):
        out.append(line)
        if re.match(r'^[A-Za-z"][^:]*:\s*$', line):
            j, has = i + 1, False
            while j < len(lines) and (lines[j].startswith(" ") or lines[j] == ""):
                has = has or lines[j].strip().startswith("listen:")
                j += 1
            if not has:
                port += 1
                out.append("  listen: 127.0.0.1:%d" % port)
    return "\n".join(out), port


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    fixtures = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "fixtures")
    nutcracker = shutil.which("nutcracker") or (
        "/usr/sbin/nutcracker" if os.access("/usr/sbin/nutcracker", os.X_OK) else None)
    if nutcracker is None:
        ci = bool(os.environ.get("CI"))
        print("nutcracker_compat: nutcracker not found (apt-get install nutcracker; "
              "scripts/bootstrap installs it)%s" % ("" if ci else ": skipped"), file=sys.stderr)
        return 1 if ci else 77
    bad, port = 0, 23000
    with tempfile.TemporaryDirectory() as tmp:
        for name in sorted(os.listdir(fixtures)):
            if not name.endswith(".yml"):
                continue
            with open(os.path.join(fixtures, name), "rb") as f:
                text = f.read().decode("utf-8", "surrogateescape")
            text, port = with_listen(text, port)
            path = os.path.join(tmp, name)
            with open(path, "wb") as f:
                f.write(text.encode("utf-8", "surrogateescape"))
            rc = subprocess.run([nutcracker, "-t", "-c", path], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL).returncode
            theirs = rc == 0
            ours = name.startswith("valid_")
            deviation = name in DEVIATIONS
            if (theirs != ours) != deviation:
                bad += 1
                print("%s: nutcracker %s, chash %s%s" % (
                    name, "accepts" if theirs else "rejects", "accepts" if ours else "rejects",
                    " (listed as a deviation, but they agree)" if deviation else ""))
    print("nutcracker_compat: %s" % ("ok" if bad == 0 else "%d unexpected verdicts" % bad))
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bootstrap_dpkg: scripts/bootstrap against the two states of dpkg that broke `make` (issue 28),
# made for real with a probe package this test builds (chash-bootstrap-probe, one man page):
#   1. man-db in dpkg state triggers-pending (the probe installed with `dpkg --no-triggers`):
#      bootstrap exits 0, says nothing and runs no apt-get (an apt-get first in PATH that
#      records its calls and fails);
#   2. dpkg's frontend lock held by another process (a python3 holding its fcntl lock, as apt
#      and dpkg take it) while bootstrap must install something (the probe's .deb, through
#      CHASH_BOOTSTRAP_EXTRA): bootstrap says once that it waits and for whom (the holder's pid),
#      is still waiting when the holder lets go, then installs the probe (a copy without the man page) and exits 0.
# Afterwards man-db's triggers are run and the probe purged. Root only (exit 77 otherwise);
# it takes the machine's dpkg lock (RESOURCE_LOCK dpkg).
set -euo pipefail
src=$1
. "$src/tests/install/common.sh"
[ "$(id -u)" -eq 0 ] || { echo "bootstrap_dpkg: not root: skipped"; exit 77; }
command -v dpkg-deb >/dev/null && command -v apt-get >/dev/null || { echo "bootstrap_dpkg: no dpkg/apt: skipped"; exit 77; }
probe=chash-bootstrap-probe
status() { dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || true; }
case $(status "$probe") in
    "" | not-installed) ;;
    *) dpkg -P "$probe" >/dev/null 2>&1 || true ;;   # left by a run killed before its cleanup
esac
work=$(mktemp -d)
chmod 755 "$work"   # apt's _apt user reads the probe's .deb
holder_pid= boot_pid=
cleanup() {
    [ -z "$holder_pid" ] || kill "$holder_pid" 2>/dev/null || true
    # A bootstrap still running is not killed mid-install (dpkg would be left half-done): the
    # lock is free now, so it ends soon.
    [ -z "$boot_pid" ] || wait "$boot_pid" 2>/dev/null || true
    # man-db's triggers run (it is back to 'installed'), the probe goes (it never was here).
    dpkg --triggers-only --pending >/dev/null 2>&1 || true
    dpkg -P "$probe" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
[ "$(status man-db)" = installed ] || fail "man-db is '$(status man-db)' before the test (scripts/bootstrap installs it)"

# ---- the probe: a package with one man page, so that installing it triggers man-db ----------
pkg=$work/pkg
mkdir -p "$pkg/DEBIAN" "$pkg/usr/share/man/man1"
printf '.TH CHASH-BOOTSTRAP-PROBE 1\n.SH NAME\nchash-bootstrap-probe \\- a test package\n' |
    gzip -9n >"$pkg/usr/share/man/man1/$probe.1.gz"
cat >"$pkg/DEBIAN/control" <<EOF
Package: $probe
Version: 1
Architecture: all
Maintainer: chash tests <tests@chash.invalid>
Description: scripts/bootstrap's test package (tests/install/check_bootstrap.sh)
EOF
deb=$work/${probe}_1_all.deb
dpkg-deb --root-owner-group -b "$pkg" "$deb" >/dev/null
# The same package without its man page, for part 2 (installing it triggers nothing: quicker).
rm -r "$pkg/usr"
deb2=$work/${probe}_2_all.deb
sed -i 's/^Version: 1$/Version: 2/' "$pkg/DEBIAN/control"
dpkg-deb --root-owner-group -b "$pkg" "$deb2" >/dev/null

# An apt-get that records that it was called and fails: bootstrap must not need it.
mkdir -p "$work/bin"
printf '#!/bin/sh\necho "apt-get $*" >>%s/apt-calls\nexit 1\n' "$work" >"$work/bin/apt-get"
chmod +x "$work/bin/apt-get"

# ---- 1. man-db with pending triggers ---------------------------------------------------------
dpkg --no-triggers -i "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log" >&2; fail "dpkg --no-triggers -i the probe"; }
[ "$(status man-db)" = triggers-pending ] || fail "man-db is '$(status man-db)', not triggers-pending, after the probe"
set +e
PATH=$work/bin:$PATH "$src/scripts/bootstrap" >"$work/boot1.out" 2>&1
rc=$?
set -e
[ ! -e "$work/apt-calls" ] || fail "bootstrap ran apt-get with man-db triggers-pending: $(cat "$work/apt-calls"); output: $(cat "$work/boot1.out")"
[ "$rc" = 0 ] || fail "bootstrap exited $rc with man-db triggers-pending: $(cat "$work/boot1.out")"
[ ! -s "$work/boot1.out" ] || fail "bootstrap was not silent with every package present: $(cat "$work/boot1.out")"
[ "$(status man-db)" = triggers-pending ] || fail "bootstrap changed man-db's state"
echo "bootstrap_dpkg: man-db triggers-pending: exit 0, silent, no apt-get"
# Purging the probe triggers man-db again; dpkg runs its pending triggers at the end.
dpkg -P "$probe" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log" >&2; fail "dpkg -P the probe"; }
[ "$(status man-db)" = installed ] || fail "man-db is '$(status man-db)' after the probe's purge"

# ---- 2. the dpkg lock held by another process while bootstrap must install ------------------
# The holder takes the lock as apt and dpkg do (fcntl), says so, and lets go once told to.
/usr/bin/python3 - "$work" <<'EOF' &
import fcntl, os, sys, time
work = sys.argv[1]
with open("/var/lib/dpkg/lock-frontend", "w") as f:
    fcntl.lockf(f, fcntl.LOCK_EX)
    open(os.path.join(work, "locked"), "w").close()
    deadline = time.monotonic() + 50
    while not os.path.exists(os.path.join(work, "release")) and time.monotonic() < deadline:
        time.sleep(0.05)
EOF
holder_pid=$!
wait_for() {   # wait_for SECONDS COMMAND...: poll until COMMAND succeeds
    local end=$((SECONDS + $1)); shift
    until "$@"; do [ "$SECONDS" -lt "$end" ] || return 1; sleep 0.1; done
}
wait_for 10 test -e "$work/locked" || fail "the lock holder did not take the lock"
CHASH_BOOTSTRAP_EXTRA=$deb2 CHASH_BOOTSTRAP_LOCK_WAIT=40 "$src/scripts/bootstrap" >"$work/boot2.out" 2>&1 &
boot_pid=$!
waits() { grep -q "waiting up to 40 s for the dpkg lock" "$work/boot2.out"; }
wait_for 20 waits || fail "bootstrap did not say it waits for the lock: $(cat "$work/boot2.out")"
grep -q "held by python3 (pid $holder_pid)" "$work/boot2.out" ||
    fail "bootstrap's message does not name the holder (python3, pid $holder_pid): $(cat "$work/boot2.out")"
kill -0 "$boot_pid" 2>/dev/null || fail "bootstrap did not wait for the lock: $(cat "$work/boot2.out")"
[ "$(status "$probe")" = "" ] || [ "$(status "$probe")" = not-installed ] || fail "the probe was installed while the lock was held"
touch "$work/release"
wait "$holder_pid" || true
held_by=$holder_pid holder_pid=
set +e
wait "$boot_pid"
rc=$?
set -e
boot_pid=
[ "$rc" = 0 ] || fail "bootstrap exited $rc after waiting for the lock: $(cat "$work/boot2.out")"
[ "$(grep -c "waiting up to" "$work/boot2.out")" = 1 ] || fail "bootstrap said more than once that it waits: $(cat "$work/boot2.out")"
[ "$(status "$probe")" = installed ] || [ "$(status "$probe")" = triggers-pending ] ||
    fail "the probe is '$(status "$probe")' after bootstrap: $(cat "$work/boot2.out")"
echo "bootstrap_dpkg: dpkg lock held by pid $held_by: bootstrap waited, said so once, then installed the probe ($SECONDS s)"
echo "bootstrap_dpkg: ok"

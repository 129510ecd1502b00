#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# install_packages: the Debian packages `make deb` built (the install_build fixture), installed
# as a user installs them: `dpkg -i` when running as root (CI), otherwise unpacked with
# `dpkg-deb -x` into a fresh tree (also when a chash package is already installed here, which
# this test must not replace). Then, against what was installed:
#   - the README's C examples build through pkg-config; the libchash one runs, the
#     libchash-cache one sets and gets a key on a real redis-server;
#   - chash-proxy -t accepts the installed example config and refuses a broken copy of it;
#     the installed proxy serves a copy of it on free ports in front of that redis-server;
#   - lintian, once over every .deb and -dbgsym .ddeb: no error, and no warning but those in
#     lintian-accepted.txt (each with its reason); the binaries stripped, their debug symbols in
#     the -dbgsym packages under their build ids;
#   - both systemd units (chash-proxy.service, chash-proxy@.service) carry their hardening and
#     Type=notify, `systemd-analyze verify` accepts them and `systemd-analyze security --offline`
#     scores their exposure at most 2.0 ("OK") (both skipped, saying so, when systemd-analyze is
#     missing); with dpkg, the config is 0640 root:chash-proxy-config, the group the units run in;
#   - the shipped logrotate file, run by logrotate -f with its paths moved to the test's
#     directory, rotates the installed proxy's log, whose SIGUSR1 makes it write to the new file
#     without reloading its config (the stats' reloads unchanged);
# and the packages are removed again (dpkg -P), leaving none of their files behind.
set -euo pipefail
src=$1 pkgdir=$2
. "$src/tests/install/common.sh"
version=$(project_version "$src")
[ -n "$version" ] || fail "no project(chash VERSION ...) in $src/CMakeLists.txt"
work=$(mktemp -d)
pids=()
installed=no
group=chash-proxy-config
group_before=$(getent group "$group" || true)
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    if [ "$installed" = yes ]; then dpkg -P libchash-dev chash libchash0 >/dev/null 2>&1 || true; fi
    # The package leaves its system group on purge, as Debian's do; the test leaves none it made.
    if [ -z "$group_before" ] && [ "$(id -u)" -eq 0 ] && getent group "$group" >/dev/null; then
        groupdel "$group" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# ---- the packages: names, version, contents, dependencies -----------------------------------
declare -A deb
for p in chash libchash0 libchash-dev; do
    deb[$p]=$(ls "$pkgdir/${p}_${version}"_*.deb 2>/dev/null | head -n 1 || true)
    [ -n "${deb[$p]}" ] || fail "no package ${p}_${version}_*.deb in $pkgdir"
    [ "$(dpkg-deb -f "${deb[$p]}" Version)" = "$version" ] || fail "$p: version is not $version"
done
contents() { dpkg-deb -c "${deb[$1]}" | awk '{print $6}' | sed 's|^\./|/|'; }
has() { grep -qx -- "$2" <<<"$(contents "$1")" || fail "package $1 lacks $2"; }
has chash /usr/bin/chash
has chash /usr/bin/chash-proxy
has chash /usr/lib/systemd/system/chash-proxy.service
has chash /usr/lib/systemd/system/chash-proxy@.service
has chash /usr/lib/sysusers.d/chash-proxy.conf
has chash /etc/chash-proxy/chash-proxy.yml
has chash /etc/default/chash-proxy
has chash /etc/logrotate.d/chash-proxy
for p in chash libchash0 libchash-dev; do
    has "$p" "/usr/share/doc/$p/copyright"
    has "$p" "/usr/share/doc/$p/changelog.gz"
    has "$p" "/usr/share/doc/$p/NOTICE.gz"
done
for m in "${MANPAGES[@]}"; do has chash "/usr/share/man/$m"; done
for h in "${HEADERS[@]}"; do has libchash-dev "/usr/include/$h"; done
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
for l in "${LIBS[@]}"; do
    has libchash-dev "/usr/lib/$multiarch/lib$l.a"
    has libchash-dev "/usr/lib/$multiarch/lib$l.so"
    has libchash-dev "/usr/lib/$multiarch/pkgconfig/$l.pc"
    has libchash0 "/usr/lib/$multiarch/lib$l.so.$version"
done
for f in /etc/chash-proxy/chash-proxy.yml /etc/default/chash-proxy /etc/logrotate.d/chash-proxy; do
    grep -qx "$f" <<<"$(dpkg-deb -I "${deb[chash]}" conffiles)" || fail "$f is not a conffile"
done
grep -qx "activate-noawait ldconfig" <<<"$(dpkg-deb -I "${deb[libchash0]}" triggers)" ||
    fail "libchash0 does not activate ldconfig's trigger"
# The changelog is the project version's, signed by the Maintainer field's address.
changelog=$(dpkg-deb --fsys-tarfile "${deb[chash]}" | tar -xOf - ./usr/share/doc/chash/changelog.gz | zcat)
[ "$(head -n 1 <<<"$changelog")" = "chash ($version) unstable; urgency=medium" ] ||
    fail "chash's changelog does not start with version $version: $(head -n 1 <<<"$changelog")"
grep -qF -- " -- $(dpkg-deb -f "${deb[chash]}" Maintainer)  " <<<"$changelog" ||
    fail "chash's changelog is not signed by its Maintainer ($(dpkg-deb -f "${deb[chash]}" Maintainer))"

# ---- lintian: once over every package (it takes ~15 s) -----------------------------------------
# No error; no warning that lintian-accepted.txt does not list (tag and package, with the reason
# beside it); the overrides the packages ship (usr/share/lintian/overrides) carry theirs.
declare -A dbgsym
for p in chash libchash0; do
    dbgsym[$p]=$(ls "$pkgdir/${p}-dbgsym_${version}"_*.ddeb 2>/dev/null | head -n 1 || true)
    [ -n "${dbgsym[$p]}" ] || fail "no package ${p}-dbgsym_${version}_*.ddeb in $pkgdir"
done
if command -v lintian >/dev/null; then
    # Every package make deb built, the bindings' too (python3-chash, node-chash, libchash-java).
    all=("$pkgdir"/*_"${version}"_*.deb "$pkgdir"/*_"${version}"_*.ddeb)
    lintian --no-tag-display-limit "${all[@]}" >"$work/lintian.out" 2>&1 || true
    echo "lintian: ${#all[@]} packages"
    accepted=$(sed 's/#.*//' "$src/tests/install/lintian-accepted.txt" | awk 'NF {print $1 " " $2}')
    bad=$(awk '$1 == "E:" || $1 == "W:" {print}' "$work/lintian.out" | while read -r sev pkg tag rest; do
              [ "$sev" = W: ] && grep -qxF "${pkg%:} $tag" <<<"$accepted" && continue
              echo "$sev $pkg $tag $rest"
          done)
    [ -z "$bad" ] || fail "lintian: $bad"
    grep -q "^E: \|^W: " "$work/lintian.out" || echo "lintian: no error, no warning"
    grep -q "^[EW]: " "$work/lintian.out" && echo "lintian: only accepted warnings: $(grep "^W: " "$work/lintian.out")"
elif [ -n "${CI:-}" ]; then
    fail "lintian is missing (scripts/bootstrap installs it)"
else
    echo "install_packages: lintian missing: the packages are not linted"
fi

# ---- stripped binaries, their debug symbols in -dbgsym by build id -----------------------------
mkdir -p "$work/dbg"
for p in chash libchash0; do dpkg-deb -x "${dbgsym[$p]}" "$work/dbg"; dpkg-deb -x "${deb[$p]}" "$work/bin"; done
for f in "$work/bin/usr/bin/chash" "$work/bin/usr/bin/chash-proxy" "$work/bin/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)"/libchash*.so.*.*; do
    grep -q ", stripped" <<<"$(file -L "$f")" || fail "${f#$work/bin} is not stripped: $(file -L "$f")"
    id=$(readelf -n "$f" | awk '/Build ID:/ {print $3}')
    [ -n "$id" ] || fail "${f#$work/bin} has no build id"
    debug=$work/dbg/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug
    [ -f "$debug" ] || fail "no debug file for ${f#$work/bin} (build id $id) in the -dbgsym packages"
    grep -q '\.debug_info' <<<"$(readelf -W -S "$debug" 2>/dev/null)" || fail "$debug has no .debug_info"
    # Its symbols: the file's own functions, by name (ch_ for the libraries, main for the programs).
    grep -Eq ' FUNC +GLOBAL .* (main|ch_[a-z0-9_]+)$' <<<"$(readelf -W -s "$debug" 2>/dev/null)" ||
        fail "$debug has no function symbols"
done
echo "stripped; debug symbols in chash-dbgsym and libchash0-dbgsym by build id"
for script in postinst prerm postrm; do
    dpkg-deb -I "${deb[chash]}" "$script" >"$work/$script" || fail "chash has no $script"
    sh -n "$work/$script" || fail "chash's $script is not valid sh"
    grep -q "chash-proxy" "$work/$script" || fail "chash's $script does not handle chash-proxy"
done
grep -qF "libchash0 (= $version)" <<<"$(dpkg-deb -f "${deb[libchash-dev]}" Depends)" ||
    fail "libchash-dev does not depend on libchash0 (= $version)"
grep -q libuv1 <<<"$(dpkg-deb -f "${deb[chash]}" Depends)" || fail "chash's Depends (dpkg-shlibdeps) lack libuv1"

# ---- install ---------------------------------------------------------------------------------
already=$(dpkg-query -W -f='${Package} ${db:Status-Status}\n' chash libchash0 libchash-dev 2>/dev/null |
          awk '$2 == "installed" {print $1}' || true)
# CHASH_INSTALL_TREE=1 asks for the tree even as root (to check that path).
if [ "$(id -u)" -eq 0 ] && [ -z "$already" ] && [ -z "${CHASH_INSTALL_TREE:-}" ]; then
    mode=dpkg root=
    installed=yes
    for try in 1 2 3 4 5 6 7 8 9 10; do   # another dpkg or apt may hold the lock for a while
        if dpkg -i "${deb[libchash0]}" "${deb[libchash-dev]}" "${deb[chash]}" >"$work/dpkg.log" 2>&1; then break; fi
        grep -q "lock" "$work/dpkg.log" && [ "$try" -lt 10 ] || { cat "$work/dpkg.log" >&2; fail "dpkg -i"; }
        sleep 3
    done
    for p in chash libchash0 libchash-dev; do
        [ "$(dpkg-query -W -f='${db:Status-Status} ${Version}' "$p")" = "installed $version" ] ||
            fail "$p is not installed at $version after dpkg -i"
    done
    # The config's passwords are for root and the units' group only (dpkg-statoverride).
    getent group "$group" >/dev/null || fail "postinst did not create the group $group"
    [ "$(stat -c '%U:%G %a' /etc/chash-proxy/chash-proxy.yml)" = "root:$group 640" ] ||
        fail "/etc/chash-proxy/chash-proxy.yml is $(stat -c '%U:%G %a' /etc/chash-proxy/chash-proxy.yml), not root:$group 640"
else
    mode=tree root=$work/root
    [ -n "$already" ] && echo "install_packages: $already already installed here: unpacking into a tree instead of dpkg -i"
    [ "$(id -u)" -eq 0 ] || echo "install_packages: not root: unpacking into a tree instead of dpkg -i"
    [ -n "${CHASH_INSTALL_TREE:-}" ] && echo "install_packages: CHASH_INSTALL_TREE set: unpacking into a tree"
    for p in chash libchash0 libchash-dev; do dpkg-deb -x "${deb[$p]}" "$root"; done
fi
echo "install_packages: installed with $mode ($SECONDS s)"
usr=$root/usr
libdir=$usr/lib/$multiarch
export PKG_CONFIG_PATH=$libdir/pkgconfig
# In a tree the libraries are found through LD_LIBRARY_PATH; with dpkg, where they are installed.
# In a tree, the pkg-config files' paths (/usr/...) are taken in the tree (PKG_CONFIG_SYSROOT_DIR).
if [ "$mode" = tree ]; then export LD_LIBRARY_PATH=$libdir PKG_CONFIG_SYSROOT_DIR=$root; fi

[ "$("$usr/bin/chash" --version)" = "chash $version" ] || fail "installed chash --version"
[ "$("$usr/bin/chash-proxy" --version)" = "This is chash-proxy-$version" ] || fail "installed chash-proxy --version"

# ---- the README's C examples against the installed libraries, via pkg-config ---------------
cc -std=c11 -Wall -Wextra -Werror "$src/examples/readme_example.c" \
   $(pkg-config --cflags --libs chash) -o "$work/readme_example"
cc -std=c11 -Wall -Wextra -Werror "$src/examples/readme_cache.c" \
   $(pkg-config --cflags --libs chash_cache) -o "$work/readme_cache"
used=$(ldd "$work/readme_cache" | awk '$1 == "libchash_cache.so.'"${version%%.*}"'" {print $3}')
[ -n "$used" ] && [ "$(readlink -f "$used")" = "$(readlink -f "$libdir/libchash_cache.so.$version")" ] ||
    fail "readme_cache does not use the installed libchash_cache.so: $(ldd "$work/readme_cache")"
out=$("$work/readme_example")
grep -q '^user:42 -> cache-0[123] (failover cache-0[123])$' <<<"$out" || fail "readme_example: $out"
echo "$out"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}
if command -v redis-server >/dev/null; then
    rport=$(free_port)
    redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no >"$work/redis.log" 2>&1 &
    pids+=($!)
    wait_port "$rport" || fail "redis-server did not start: $(cat "$work/redis.log")"
    printf 'cache:\n  listen: 127.0.0.1:22121\n  redis: true\n  servers:\n   - 127.0.0.1:%s:1 redis-1\n' \
        "$rport" >"$work/nutcracker.yml"
    out=$("$work/readme_cache" "$work/nutcracker.yml") || fail "readme_cache against redis-server: $out"
    [ "$out" = "user:42 = alice (node redis-1)" ] || fail "readme_cache: $out"
    echo "$out"
    [ "$(redis-cli -p "$rport" GET user:42)" = alice ] || fail "user:42 is not on the redis-server"
elif [ -n "${CI:-}" ]; then
    fail "redis-server is missing (scripts/bootstrap installs it)"
else
    echo "install_packages: redis-server missing: readme_cache built, not run"
fi

# ---- chash-proxy -t on the installed config, and the installed proxy serving a copy ---------
conf=$root/etc/chash-proxy/chash-proxy.yml
out=$("$usr/bin/chash-proxy" -t -c "$conf" 2>&1) || fail "chash-proxy -t $conf: $out"
grep -q "syntax is ok" <<<"$out" || fail "chash-proxy -t: $out"
sed 's/^  distribution: ketama$/  distribution: ketamaa/' "$conf" >"$work/broken.yml"
cmp -s "$conf" "$work/broken.yml" && fail "the example config has no 'distribution: ketama' to break"
if out=$("$usr/bin/chash-proxy" -t -c "$work/broken.yml" 2>&1); then fail "chash-proxy -t accepted a broken config"; fi
grep -q "broken.yml:[0-9]*:[0-9]*:" <<<"$out" || fail "chash-proxy -t gave no file:line:column: $out"
if [ -n "${rport:-}" ]; then
    pport=$(free_port) sport=$(free_port)
    sed -e "s/127.0.0.1:22121/127.0.0.1:$pport/" -e "s/127.0.0.1:6379:1/127.0.0.1:$rport:1/" \
        -e '/127.0.0.1:638[01]:1/d' "$conf" >"$work/proxy.yml"
    "$usr/bin/chash-proxy" -c "$work/proxy.yml" -s "$sport" -a 127.0.0.1 --threads 1 \
        -o "$work/proxy.log" -p "$work/proxy.pid" &
    pids+=($!)
    wait_port "$pport" || fail "installed chash-proxy did not listen: $(cat "$work/proxy.log")"
    [ "$(redis-cli -p "$pport" SET via:proxy 1)" = OK ] || fail "SET through the installed proxy"
    [ "$(redis-cli -p "$rport" GET via:proxy)" = 1 ] || fail "the proxy's SET is not on the redis-server"
    [ "$(cat "$work/proxy.pid")" = "${pids[-1]}" ] || fail "pid file does not hold the proxy's pid"
    kill -TERM "${pids[-1]}"
    wait "${pids[-1]}" || fail "installed chash-proxy did not exit cleanly on SIGTERM"
    echo "installed chash-proxy: served the example config on port $pport"
fi

# ---- the systemd units ------------------------------------------------------------------------
# chash-proxy.service and the template chash-proxy@.service: the same sandbox; each its config,
# log and pid file (the template's by instance), its options from /etc/default/chash-proxy.
units=$usr/lib/systemd/system
for u in chash-proxy.service chash-proxy@.service; do
    for d in Type=notify NotifyAccess=main DynamicUser=yes User=chash-proxy \
             "SupplementaryGroups=$group" NoNewPrivileges=yes ProtectSystem=strict Restart=on-failure \
             'ExecReload=/bin/kill -HUP $MAINPID' LogsDirectory=chash-proxy CapabilityBoundingSet= \
             EnvironmentFile=-/etc/default/chash-proxy; do
        grep -qxF -- "$d" "$units/$u" || fail "$u lacks $d"
    done
    grep -q "^ReadWritePaths=" "$units/$u" && fail "$u makes more than its log and pid directories writable"
done
grep -qx "RuntimeDirectory=chash-proxy" "$units/chash-proxy.service" || fail "chash-proxy.service lacks RuntimeDirectory=chash-proxy"
grep -q '^ExecStart=/usr/bin/chash-proxy -c /etc/chash-proxy/chash-proxy.yml -o /var/log/chash-proxy/[^ ]* -p /run/chash-proxy/[^ ]* .*$CHASH_PROXY_OPTS$' "$units/chash-proxy.service" ||
    fail "chash-proxy.service's ExecStart does not run the installed proxy on the installed config with its log and pid in the unit's writable directories and \$CHASH_PROXY_OPTS"
grep -qx "RuntimeDirectory=chash-proxy-%i" "$units/chash-proxy@.service" || fail "chash-proxy@.service lacks RuntimeDirectory=chash-proxy-%i"
grep -qxF 'ExecStart=/usr/bin/chash-proxy -c /etc/chash-proxy/%i.yml -o /var/log/chash-proxy/%i.log -p /run/chash-proxy-%i/chash-proxy.pid -a 127.0.0.1 $CHASH_PROXY_OPTS $CHASH_PROXY_INSTANCE_OPTS' "$units/chash-proxy@.service" ||
    fail "chash-proxy@.service's ExecStart is not the instance's config, log and pid file"
grep -q '^CHASH_PROXY_OPTS=' "$root/etc/default/chash-proxy" || fail "/etc/default/chash-proxy sets no CHASH_PROXY_OPTS"
if command -v systemd-analyze >/dev/null; then
    # In a tree the units name /usr/bin/chash-proxy, which is in the tree only: verify copies that
    # name the tree's binary and configs (the man pages are not installed on the host). The
    # template is verified as an instance, chash-proxy@test.service.
    mkdir -p "$work/units"
    for u in chash-proxy.service chash-proxy@.service; do
        if [ "$mode" = dpkg ]; then cp "$units/$u" "$work/units/$u"; else
            sed "s|/usr/bin/chash-proxy|$usr/bin/chash-proxy|g; s|/etc/chash-proxy/|$root/etc/chash-proxy/|g" \
                "$units/$u" >"$work/units/$u"
        fi
    done
    man=yes
    [ "$mode" = dpkg ] || man=no
    for u in chash-proxy.service chash-proxy@test.service; do
        out=$(systemd-analyze verify --man=$man "$work/units/$u" 2>&1) || fail "systemd-analyze verify $u: $out"
        [ -z "$out" ] || fail "systemd-analyze verify $u warns: $out"
    done
    echo "systemd-analyze verify: ok (chash-proxy.service, chash-proxy@test.service)"
    # systemd's own exposure score of the units' sandbox (0 best, 10 worst; "OK" below 2.0):
    # the hardening above scores 1.4; dropping DynamicUser, NoNewPrivileges, ProtectSystem and
    # the syscall filter would score 5.5. --threshold is in tenths.
    if grep -q -- --offline <<<"$(systemd-analyze --help 2>/dev/null)"; then
        for u in chash-proxy.service chash-proxy@test.service; do
            out=$(systemd-analyze security --offline=true --threshold=20 --no-pager "$work/units/$u" 2>&1) ||
                fail "systemd-analyze security $u: exposure above 2.0: $(tail -n 1 <<<"$out")"
            echo "systemd-analyze security: $(grep -o 'exposure level.*' <<<"$out")"
        done
    else
        echo "install_packages: systemd-analyze has no offline security check: skipped"
    fi
else
    echo "install_packages: systemd-analyze not found: the units' verification is skipped"
fi

# ---- the logrotate file, run for real ----------------------------------------------------------
# The shipped file with its paths moved into the test's directory (/var/log/chash-proxy -> LOG,
# /run/chash-proxy -> RUN) and systemd's directory made absent, so that its postrotate signals
# the proxies of the pid files, as it does where systemd does not run: the installed proxy,
# logging to LOG/chash-proxy.log with its pid in RUN/chash-proxy.pid. After `logrotate -f`, the
# old log is chash-proxy.log.1 (delaycompress), the proxy writes to a new chash-proxy.log (its
# SIGUSR1 line), and its reloads counter is what it was: SIGUSR1 reopened the log only.
if [ -n "${rport:-}" ] && command -v logrotate >/dev/null; then
    mkdir -p "$work/lr/log" "$work/lr/run"
    pport=$(free_port) sport=$(free_port)
    sed -e "s/127.0.0.1:22121/127.0.0.1:$pport/" -e "s/127.0.0.1:6379:1/127.0.0.1:$rport:1/" \
        -e '/127.0.0.1:638[01]:1/d' "$conf" >"$work/lr/proxy.yml"
    "$usr/bin/chash-proxy" -c "$work/lr/proxy.yml" -s "$sport" -a 127.0.0.1 --threads 1 \
        -o "$work/lr/log/chash-proxy.log" -p "$work/lr/run/chash-proxy.pid" &
    pids+=($!)
    wait_port "$pport" || fail "installed chash-proxy did not listen: $(cat "$work/lr/log/chash-proxy.log")"
    reloads() { python3 -c 'import json,socket,sys
s=socket.create_connection(("127.0.0.1",int(sys.argv[1]))); b=b""
while True:
    d=s.recv(65536)
    if not d: break
    b+=d
print(json.loads(b)["reloads"])' "$sport"; }
    before=$(reloads)
    sed -e "s|/var/log/chash-proxy|$work/lr/log|g" -e "s|/run/chash-proxy|$work/lr/run|g" \
        -e "s|/run/systemd/system|$work/lr/no-systemd|g" "$root/etc/logrotate.d/chash-proxy" >"$work/lr/logrotate.conf"
    grep -q "kill -USR1" "$work/lr/logrotate.conf" || fail "the logrotate file does not send SIGUSR1"
    for d in missingok notifempty compress delaycompress; do
        grep -qx "	$d" "$work/lr/logrotate.conf" || fail "the logrotate file lacks $d"
    done
    out=$(logrotate -f -s "$work/lr/state" "$work/lr/logrotate.conf" 2>&1) || fail "logrotate: $out"
    [ -s "$work/lr/log/chash-proxy.log.1" ] || fail "logrotate did not rotate the log: $(ls "$work/lr/log")"
    reopened() { [ -s "$work/lr/log/chash-proxy.log" ] && grep -q SIGUSR1 "$work/lr/log/chash-proxy.log"; }
    for _ in $(seq 100); do reopened && break; sleep 0.05; done
    reopened || fail "the proxy did not write to the new log after logrotate: $(ls -l "$work/lr/log"; cat "$work/lr/log/chash-proxy.log" 2>/dev/null)"
    [ "$(redis-cli -p "$pport" SET after:rotate 1)" = OK ] || fail "SET through the proxy after the rotation"
    [ "$(reloads)" = "$before" ] || fail "the rotation reloaded the proxy's config (reloads $before -> $(reloads))"
    kill -TERM "${pids[-1]}"
    wait "${pids[-1]}" || fail "installed chash-proxy did not exit cleanly on SIGTERM"
    echo "logrotate: the log rotated, the proxy reopened it on SIGUSR1 without a reload (reloads $before)"
elif [ -n "${CI:-}" ]; then
    fail "logrotate or redis-server is missing (scripts/bootstrap installs them)"
else
    echo "install_packages: logrotate or redis-server missing: the logrotate file is not run"
fi

# ---- removal -----------------------------------------------------------------------------------
if [ "$mode" = dpkg ]; then
    dpkg -P libchash-dev chash libchash0 >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log" >&2; fail "dpkg -P"; }
    installed=no
    for p in chash libchash0 libchash-dev; do
        st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
        [ -z "$st" ] || [ "$st" = not-installed ] || fail "$p is still '$st' after dpkg -P"
        while read -r f; do
            [ -d "$f" ] && continue
            [ ! -e "$f" ] && [ ! -L "$f" ] || fail "$f remains after dpkg -P $p"
        done < <(contents "$p")
    done
    [ ! -e /etc/chash-proxy ] || fail "/etc/chash-proxy remains after dpkg -P"
    [ -z "$(dpkg-statoverride --list /etc/chash-proxy/chash-proxy.yml || true)" ] ||
        fail "the config's dpkg-statoverride remains after dpkg -P"
    echo "removed: dpkg -P left no file behind"
fi
echo "install_packages: ok ($version, $mode)"

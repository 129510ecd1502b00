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
#   - the systemd unit carries its hardening, `systemd-analyze verify` accepts it and
#     `systemd-analyze security --offline` scores its exposure at most 2.0 ("OK") (both skipped,
#     saying so, when systemd-analyze is missing);
# and the packages are removed again (dpkg -P), leaving none of their files behind.
set -euo pipefail
src=$1 pkgdir=$2
. "$src/tests/install/common.sh"
version=$(project_version "$src")
[ -n "$version" ] || fail "no project(chash VERSION ...) in $src/CMakeLists.txt"
work=$(mktemp -d)
pids=()
installed=no
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    if [ "$installed" = yes ]; then dpkg -P libchash-dev chash libchash0 >/dev/null 2>&1 || true; fi
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
has chash /etc/chash-proxy/chash-proxy.yml
for m in "${MANPAGES[@]}"; do has chash "/usr/share/man/$m"; done
for h in "${HEADERS[@]}"; do has libchash-dev "/usr/include/$h"; done
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
for l in "${LIBS[@]}"; do
    has libchash-dev "/usr/lib/$multiarch/lib$l.a"
    has libchash-dev "/usr/lib/$multiarch/lib$l.so"
    has libchash-dev "/usr/lib/$multiarch/pkgconfig/$l.pc"
    has libchash0 "/usr/lib/$multiarch/lib$l.so.$version"
done
grep -qx /etc/chash-proxy/chash-proxy.yml <<<"$(dpkg-deb -I "${deb[chash]}" conffiles)" ||
    fail "the installed config is not a conffile"
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

# ---- the systemd unit ------------------------------------------------------------------------
unit=$usr/lib/systemd/system/chash-proxy.service
for d in DynamicUser=yes NoNewPrivileges=yes ProtectSystem=strict Restart=on-failure \
         'ExecReload=/bin/kill -HUP $MAINPID' LogsDirectory=chash-proxy RuntimeDirectory=chash-proxy \
         CapabilityBoundingSet=; do
    grep -qxF -- "$d" "$unit" || fail "chash-proxy.service lacks $d"
done
grep -q "^ExecStart=/usr/bin/chash-proxy -c /etc/chash-proxy/chash-proxy.yml -o /var/log/chash-proxy/[^ ]* -p /run/chash-proxy/" "$unit" ||
    fail "ExecStart does not run the installed proxy on the installed config with its log and pid in the unit's writable directories"
grep -q "^ReadWritePaths=" "$unit" && fail "the unit makes more than its log and pid directories writable"
if command -v systemd-analyze >/dev/null; then
    if [ "$mode" = dpkg ]; then
        out=$(systemd-analyze verify "$unit" 2>&1) || fail "systemd-analyze verify: $out"
    else
        # The unit names /usr/bin/chash-proxy, which is in the tree only: verify a copy that
        # names the tree's binary and config (the man pages are not installed on the host).
        sed "s|/usr/bin/chash-proxy|$usr/bin/chash-proxy|g; s|/etc/chash-proxy/|$root/etc/chash-proxy/|g" \
            "$unit" >"$work/chash-proxy.service"
        out=$(systemd-analyze verify --man=no "$work/chash-proxy.service" 2>&1) || fail "systemd-analyze verify: $out"
    fi
    [ -z "$out" ] || fail "systemd-analyze verify warns: $out"
    echo "systemd-analyze verify: ok"
    # systemd's own exposure score of the unit's sandbox (0 best, 10 worst; "OK" below 2.0):
    # the hardening above scores 1.5; dropping DynamicUser, NoNewPrivileges, ProtectSystem and
    # the syscall filter would score 5.5. --threshold is in tenths.
    checked=$unit
    [ "$mode" = dpkg ] || checked=$work/chash-proxy.service
    if grep -q -- --offline <<<"$(systemd-analyze --help 2>/dev/null)"; then
        out=$(systemd-analyze security --offline=true --threshold=20 --no-pager "$checked" 2>&1) ||
            fail "systemd-analyze security: exposure above 2.0: $(tail -n 1 <<<"$out")"
        echo "systemd-analyze security: $(grep -o 'exposure level.*' <<<"$out")"
    else
        echo "install_packages: systemd-analyze has no offline security check: skipped"
    fi
else
    echo "install_packages: systemd-analyze not found: the unit's verification is skipped"
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
    echo "removed: dpkg -P left no file behind"
fi
echo "install_packages: ok ($version, $mode)"

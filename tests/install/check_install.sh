#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# install_smoke: `cmake --install` of the install_build fixture into a fresh DESTDIR tree holds
# everything a user needs: both programs, the three libraries static and shared (exporting only
# ch_ symbols), their headers and pkg-config files, the man pages (rendering without a warning;
# chash(1) naming every command `chash --help` lists and every option of each command's --help,
# chash-proxy(8) every option of `chash-proxy --help`, chash-proxy.yml(5) every pool key of
# docs/CONFIG.md), the systemd units, the sysusers.d file, /etc/default/chash-proxy, the logrotate
# file, the example config, LICENSE and NOTICE.
# Then the README's libchash example is built through pkg-config against the tree, shared and
# static, and both builds agree; the versions of the programs, the library and the pkg-config
# files are the project() version of CMakeLists.txt.
set -euo pipefail
src=$1 build=$2
. "$src/tests/install/common.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
version=$(project_version "$src")
[ -n "$version" ] || fail "no project(chash VERSION ...) in $src/CMakeLists.txt"

root=$work/root
DESTDIR=$root cmake --install "$build" >/dev/null
libdir=$(dirname "$(find "$root" -name chash.pc -path '*/pkgconfig/*' -print -quit)")/..
libdir=$(cd "$libdir" && pwd)
usr=$root/usr

for f in bin/chash bin/chash-proxy lib/systemd/system/chash-proxy.service \
         lib/systemd/system/chash-proxy@.service lib/sysusers.d/chash-proxy.conf \
         share/doc/chash/LICENSE share/doc/chash/NOTICE; do
    [ -f "$usr/$f" ] || fail "missing /usr/$f"
done
for f in chash-proxy/chash-proxy.yml default/chash-proxy logrotate.d/chash-proxy; do
    [ -f "$root/etc/$f" ] || fail "missing /etc/$f"
done
# The packages' own files (copyright, changelog, lintian overrides) are not a plain install's.
[ ! -e "$usr/share/lintian" ] || fail "a plain install holds the packages' lintian overrides"
for h in "${HEADERS[@]}"; do [ -f "$usr/include/$h" ] || fail "missing header $h"; done
for l in "${LIBS[@]}"; do
    for f in "lib$l.a" "lib$l.so" "lib$l.so.${version%%.*}" "lib$l.so.$version" "pkgconfig/$l.pc"; do
        [ -e "$libdir/$f" ] || fail "missing $libdir/$f"
    done
    check_exports "$libdir/lib$l.so.$version"
    # The header's version and the pkg-config version are the project's.
    v=$(PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --modversion "$l")
    [ "$v" = "$version" ] || fail "$l.pc says version $v, CMakeLists.txt $version"
done
grep -q "^#define CH_VERSION_STRING \"$version\"$" "$usr/include/chash_version.h" ||
    fail "installed chash_version.h does not say $version"

for m in "${MANPAGES[@]}"; do
    [ -f "$usr/share/man/$m" ] || fail "missing man page $m"
    check_manpage "$usr/share/man/$m"
    grep -q "$version" <<<"$(zcat "$usr/share/man/$m")" || fail "$m does not carry version $version"
done
manpage=$(MANWIDTH=200 man -l "$usr/share/man/man1/chash.1.gz" 2>/dev/null)
commands=$("$usr/bin/chash" --help | awk '/^  [a-z]+ / {print $1}')
[ -n "$commands" ] || fail "chash --help lists no command"
for c in $commands; do
    grep -Eq "^       $c( |$)" <<<"$manpage" || fail "chash(1) does not document '$c'"
done

# The man pages keep up with the programs and the config format: every option of every
# `chash COMMAND --help` is in chash(1), every option of `chash-proxy --help` in chash-proxy(8),
# every pool key of docs/CONFIG.md's tables in chash-proxy.yml(5).
render() { MANWIDTH=200 man -l "$usr/share/man/$1" 2>/dev/null; }
n=0
for c in $commands; do
    for o in $("$usr/bin/chash" "$c" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
        grep -q -- "$o" <<<"$manpage" || fail "chash(1) lacks '$c $o'"
        n=$((n + 1))
    done
done
[ "$n" -ge 20 ] || fail "only $n options found in chash's --help"
page=$(render man8/chash-proxy.8.gz)
opts=$("$usr/bin/chash-proxy" --help | grep -o -- ' -[a-zA-Z]\b\|--[a-z][a-z-]*' | sort -u)
[ "$(wc -w <<<"$opts")" -ge 20 ] || fail "too few options found in chash-proxy --help: $opts"
for o in $opts; do grep -q -- "$o" <<<"$page" || fail "chash-proxy(8) lacks $o"; done
page=$(render man5/chash-proxy.yml.5.gz)
keys=$(grep -o '^| `[a-z_]*`' "$src/docs/CONFIG.md" | tr -d '|` ' | sort -u)
[ "$(wc -w <<<"$keys")" -ge 25 ] || fail "too few keys found in docs/CONFIG.md: $keys"
for k in $keys; do grep -q -- "$k" <<<"$page" || fail "chash-proxy.yml(5) lacks the key $k"; done

# The programs run from the tree and say the project version.
[ "$("$usr/bin/chash" --version)" = "chash $version" ] || fail "chash --version: $("$usr/bin/chash" --version)"
[ "$("$usr/bin/chash-proxy" -V)" = "This is chash-proxy-$version" ] || fail "chash-proxy -V: $("$usr/bin/chash-proxy" -V)"

# The README's libchash example through the tree's pkg-config files (they name /usr: the
# sysroot puts the tree in front of their paths), against the shared and the static library.
export PKG_CONFIG_PATH=$libdir/pkgconfig PKG_CONFIG_SYSROOT_DIR=$root
cc -std=c11 -Wall -Wextra -Werror "$src/examples/readme_example.c" $(pkg-config --cflags --libs chash) \
   -Wl,-rpath,"$libdir" -o "$work/shared"
cc -std=c11 -Wall -Wextra -Werror "$src/examples/readme_example.c" $(pkg-config --cflags chash) \
   "$libdir/libchash.a" $(pkg-config --libs-only-l --static chash | sed 's/-lchash\b//') -o "$work/static"
grep -q "$libdir/libchash.so.${version%%.*}" <<<"$(ldd "$work/shared")" || fail "shared build does not use the tree's libchash.so"
if grep -q libchash <<<"$(ldd "$work/static" 2>/dev/null)"; then fail "static build links libchash.so"; fi
out_shared=$("$work/shared")
out_static=$("$work/static")
echo "$out_shared"
[ "$out_shared" = "$out_static" ] || fail "shared and static builds disagree"
grep -q '^user:42 -> cache-0[123] (failover cache-0[123])$' <<<"$out_shared" || fail "readme_example: $out_shared"
# The README's libchash-cache example against the three static libraries (its run against a
# redis-server is install_packages'): it links, and runs to its usage message.
cc -std=c11 -Wall -Wextra -Werror "$src/examples/readme_cache.c" $(pkg-config --cflags chash_cache) \
   "$libdir/libchash_cache.a" "$libdir/libchash_config.a" "$libdir/libchash.a" \
   $(pkg-config --libs-only-l --static chash_cache | sed 's/-lchash[a-z_]*\b//g') -o "$work/cache_static"
if grep -q libchash <<<"$(ldd "$work/cache_static" 2>/dev/null)"; then fail "static readme_cache links a libchash .so"; fi
set +e; out=$("$work/cache_static" 2>&1); rc=$?; set -e
[ "$rc" = 2 ] && [ "$out" = "usage: readme_cache NUTCRACKER.YML" ] || fail "static readme_cache: $rc $out"
echo "install: ok ($version)"

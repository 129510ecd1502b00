# SPDX-License-Identifier: Apache-2.0
# Shared by the install tests: fail(), the project version read from CMakeLists.txt's project()
# line (independently of CMake, so the tests check the generated files against the source), the
# libraries, headers and man pages an install must hold. No `cmd | grep -q` here or in the
# tests: under pipefail, grep quitting at its first match kills cmd with SIGPIPE and fails the
# check at random; grep reads a here-string instead.
fail() { echo "FAIL: $*" >&2; exit 1; }

project_version() {
    sed -n 's/^project(chash VERSION \([0-9][0-9.]*\)[ )].*/\1/p' "$1/CMakeLists.txt"
}

LIBS=(chash chash_config chash_cache)
HEADERS=(chash.h chash_route.h chash_version.h chash_config.h chash_cache.h)
MANPAGES=(man1/chash.1.gz man8/chash-proxy.8.gz man5/chash-proxy.yml.5.gz)

# check_exports LIB.so: the shared library exports functions and data named ch_ only.
check_exports() {
    local leaked
    leaked=$(nm -D --defined-only "$1" | awk '$3 !~ /^ch_[a-z]/')
    [ -z "$leaked" ] || fail "$1 exports non-API symbols: $leaked"
    grep -q ' T ch_' <<<"$(nm -D --defined-only "$1")" || fail "$1 exports no ch_ function"
}

# check_manpage FILE: renders with no groff warning and has the sections a man page needs.
check_manpage() {
    local out warn
    warn=$(MANWIDTH=80 man --warnings -l "$1" 2>&1 >/dev/null) || fail "man -l $1 failed: $warn"
    [ -z "$warn" ] || fail "man -l $1 warns: $warn"
    out=$(MANWIDTH=80 man -l "$1" 2>/dev/null)
    for s in NAME SYNOPSIS DESCRIPTION "SEE ALSO"; do
        grep -q "^$s" <<<"$out" || fail "$1 has no $s section"
    done
}

# SPDX-License-Identifier: Apache-2.0
# Shared by the proxy demos (sourced): a temp dir and the background processes started in it,
# all stopped on the way out (EXIT, INT, TERM), bold headings on a terminal, free loopback ports.
#   demo_begin NAME       sets tmp (a new dir /tmp/NAME.XXXXXX), pids (append each child's $!)
#   demo_ports N          prints N free loopback ports, space-separated

if [ -t 1 ]; then bold=$'\e[1m' off=$'\e[0m'; else bold= off=; fi

demo_begin() {
    tmp=$(mktemp -d "/tmp/$1.XXXXXX")
    pids=()
    trap demo_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

demo_cleanup() {
    local pid
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$tmp"
}

demo_ports() {
    /usr/bin/python3 -c '
import socket, sys
s = [socket.socket() for _ in range(int(sys.argv[1]))]
for x in s: x.bind(("127.0.0.1", 0))
print(" ".join(str(x.getsockname()[1]) for x in s))' "$1"
}

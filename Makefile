# SPDX-License-Identifier: Apache-2.0
# Thin wrapper over CMake. `make test` and `make demo` work on a fresh Debian machine.
JOBS ?= 2
RELEASE := build/release
TEST := build/test
TSAN := build/tsan
DEB ?= build/deb
PREFIX ?= /usr/local

.PHONY: all build test test-tsan demo bench install deb clean bootstrap

all: build

# Sub-makes run by cmake --build need not announce every directory they enter.
MAKEFLAGS += --no-print-directory

bootstrap:
	@scripts/bootstrap

build: bootstrap
	@cmake -S . -B $(RELEASE) -DCMAKE_BUILD_TYPE=Release -DCHASH_WERROR=ON >/dev/null
	@cmake --build $(RELEASE) -j $(JOBS)

# Debug build with ASan + UBSan and -Werror; every test kind runs under ctest.
test: bootstrap
	@cmake -S . -B $(TEST) -DCMAKE_BUILD_TYPE=Debug -DCHASH_SANITIZE=ON -DCHASH_WERROR=ON >/dev/null
	@cmake --build $(TEST) -j $(JOBS)
	cd $(TEST) && ctest --output-on-failure -j $(JOBS)
	@$(MAKE) test-tsan

# chash-proxy's worker threads under ThreadSanitizer: a clang build of the proxy and the CLI,
# and the proxy tests that drive threads (workers, shared health, reloads, stats) against it; a
# ThreadSanitizer report on the proxy's stderr fails them. The same for `chash migrate`'s
# workers (--parallel), whose tests fail on a report on chash's stderr.
TSAN_TESTS := ^(unit_near|proxy_(nearcache|tracking|client_tracking|spread|threads|hotkeys|coalesce|commands|reload|admin_reload|admin_http|backend_failure|metrics|stats|bounded|memcache|descriptors|rejoin|readmit|gutter|replicas|signals|warmup|tls|fleet|fencing|resp3_clients)|cli_migrate_(redis|memcached))$$
test-tsan: bootstrap
	@CC=clang cmake -S . -B $(TSAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCHASH_TSAN=ON -DCHASH_WERROR=ON -DCHASH_BENCH=OFF >/dev/null
	@cmake --build $(TSAN) -j $(JOBS) --target chash-proxy chash_cli unit_near
	cd $(TSAN) && ctest --output-on-failure -R '$(TSAN_TESTS)'

# A lost cache node with libchash-cache and 4 local redis-servers (examples/lost_node.c), then
# through chash-proxy over 8 without replicas, with replicas 2 and with a gutter pool
# (bench/lost_node, --quick),
# chash-proxy in front of 3 redis-servers (tools/chash/proxy_demo.sh, ending with the warm-up and
# the etcd fleet demos) and of 3 memcacheds (tools/chash/proxy_memcache_demo.sh), the library from C (examples/route_demo.c), then the
# story through the CLI (tools/chash/demo.sh).
demo: build
	@$(RELEASE)/examples/lost_node
	@/usr/bin/python3 bench/lost_node/bench_lost_node.py --build $(RELEASE) --quick
	@tools/chash/proxy_demo.sh $(RELEASE)
	@tools/chash/proxy_memcache_demo.sh $(RELEASE)
	@echo
	@$(RELEASE)/examples/route_demo
	@tools/chash/demo.sh $(RELEASE)

# bench_place: the placement library (docs/PERFORMANCE.md); bench-proxy (bench/proxy/): chash-proxy
# against nutcracker and direct Redis, then direct memcached (load from build/release/bench/mc_load),
# on loopback, 2-5 minutes by the box's load; bench_resp3.py: RESP3 clients against RESP2 clients
# on one pool (CPU per request, GET SET MGET HGETALL, -P 1 and 16), 3 minutes; bench_prefix.py: a
# listener with 1 and with 20 prefixes (routes) against a pool without (CPU per request), 3 minutes;
# bench_mc_binary.py: binary memcached clients against text clients on one pool (CPU per request,
# get set 10-key multiget, -P 1 and 16; bench/mc_load -b), 3-4 minutes; bench_tls.py: TLS
# against plain (docs/PERFORMANCE.md);
# bench/migration/bench_migration.py: a hot reload 8 -> 12 and 8 -> 7
# under a cache-aside load (build/release/bench/cache_aside), without and with warm-up and ramp,
# Redis and memcached pools (the two at once, --parallel), 8-10 minutes; bench/fleet/bench_fleet.py:
# stale reads across three proxies during a change (SIGHUP rollout, etcd, chash fleet apply), 1 min;
# bench/lost_node/bench_lost_node.py: kill -9 of one of 8 redis-servers under a cache-aside load,
# without replicas, with replicas 2 and with a gutter pool, 4 min; bench/hotkeys/bench_hotkeys.py:
# one hot key at 30% and zipf 1.1 / 1.3 over 1M keys on 8 redis-servers, coalescing off and on,
# detection off and on (build/release/bench/hot_load), 5 min.
bench: build
	@$(RELEASE)/bench/bench_place
	@bindings/java/bench/bench_java.sh $(RELEASE)
	@/usr/bin/python3 bench/proxy/bench_proxy.py --build $(RELEASE)
	@/usr/bin/python3 bench/proxy/bench_resp3.py --build $(RELEASE)
	@/usr/bin/python3 bench/proxy/bench_prefix.py --build $(RELEASE)
	@/usr/bin/python3 bench/proxy/bench_mc_binary.py --build $(RELEASE)
	@/usr/bin/python3 bench/proxy/bench_tls.py --build $(RELEASE)
	@/usr/bin/python3 bench/migration/bench_migration.py --build $(RELEASE) --parallel
	@/usr/bin/python3 bench/fleet/bench_fleet.py --build $(RELEASE)
	@/usr/bin/python3 bench/lost_node/bench_lost_node.py --build $(RELEASE)
	@/usr/bin/python3 bench/hotkeys/bench_hotkeys.py --build $(RELEASE)
	@/usr/bin/python3 bindings/python/bench/bench_lookup.py --build $(RELEASE)
	@LD_LIBRARY_PATH=$(RELEASE) node bindings/node/bench/bench_hashring.js --module $(RELEASE)/bindings/node/chash

# The release build, configured for PREFIX (default /usr/local) so that the paths written into
# the systemd unit and the man pages are the installed ones; DESTDIR stages it elsewhere.
install: bootstrap
	@cmake -S . -B $(RELEASE) -DCMAKE_BUILD_TYPE=Release -DCHASH_WERROR=ON \
	       -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null
	@cmake --build $(RELEASE) -j $(JOBS)
	DESTDIR=$(DESTDIR) cmake --install $(RELEASE)

# Debian packages chash, libchash0 and libchash-dev (CPack's DEB generator, docs/INSTALL.md)
# from a release build for /usr, in build/deb/packages. -g: CPack moves the debug symbols into
# the -dbgsym packages and strips the binaries it ships.
deb: bootstrap
	@cmake -S . -B $(DEB) -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS=-g -DCHASH_WERROR=ON \
	       -DCHASH_TESTS=OFF -DCHASH_BENCH=OFF -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
	@cmake --build $(DEB) -j $(JOBS)
	@cd $(DEB) && cpack -G DEB >/dev/null
	@ls -1 $(DEB)/packages/*.deb

clean:
	rm -rf build

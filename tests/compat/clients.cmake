# SPDX-License-Identifier: Apache-2.0
# Client libraries as oracles (docs/COMPATIBILITY.md, "Client libraries"): for each scheme, the
# real library (or, for the two tutorial rings, an oracle written from their description) places
# >= 5,000 keys per server set, in-process in its own language, and libchash's clients_place
# must place every key on the same server (clients_compat.py). Each oracle program is in
# oracles/; scripts/bootstrap installs the languages and libraries. A missing oracle skips
# (exit 77), or fails when CI is set.
add_executable(clients_place ${CMAKE_CURRENT_LIST_DIR}/clients_place.c)
target_link_libraries(clients_place PRIVATE chash)

foreach(scheme java_hashcode_ring md5_64_ring dalli@3 uhashring@2 uhashring_ketama@2
               groupcache@0 guava@31+md5 guava@31+crc32a spymemcached@2
               spymemcached_libmemcached@2 pecl_memcache@4+crc32a pecl_memcache@4+fnv1a_32
               hashring@3 hashring_hash_ring@3 ring+fnv1a32_fmix_utf16 pymemcache@3)
  string(REGEX REPLACE "[^A-Za-z0-9_]" "_" test_name "compat_${scheme}")
  add_test(NAME ${test_name}
    COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/clients_compat.py ${scheme}
            $<TARGET_FILE:clients_place>)
  set_tests_properties(${test_name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()

# compat_nginx_1: a real nginx (nginx-light) with loopback and unix-socket upstreams under
# "hash $http_x_key consistent"; each key's chosen upstream ($upstream_addr) against nginx@1
# (nginx_compat.py). About 20 s.
add_test(NAME compat_nginx_1
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/nginx_compat.py $<TARGET_FILE:clients_place>)
set_tests_properties(compat_nginx_1 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)

# compat_haproxy_2: a real HAProxy with loopback servers under "balance hdr(X-Key)" and
# "hash-type consistent"; each key's chosen server against haproxy@2 (haproxy_compat.py).
add_test(NAME compat_haproxy_2
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/haproxy_compat.py $<TARGET_FILE:clients_place>)
set_tests_properties(compat_haproxy_2 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)

# The Redis clients' rings and the memcached clients of issue 38 (rings_compat.py): per scheme,
# one process of the real library places every case -- 3, 7 and 13 nodes (weights, names where
# the library has them), each with a node appended (the moved set) and, where the library fails
# over, with nodes down -- at least 10,000 keys a case, against clients_place. The Go oracles'
# build cache is kept in the build tree.
foreach(scheme predis@1 predis_ketama@1 phpredis_array@5 phpredis_array_range@5 redis_rb@4
               redis_rb@5 go_redis_ring@5 django_redis_shard@5 envoy_ring_hash@1
               cache_memcached@1 cmfast@0 python_memcached@1 gomemcache@0 node_memcached@2
               memjs@1)
  string(REGEX REPLACE "[^A-Za-z0-9_]" "_" test_name "compat_${scheme}")
  add_test(NAME ${test_name}
    COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/rings_compat.py ${scheme}
            $<TARGET_FILE:clients_place> ${CMAKE_CURRENT_BINARY_DIR}/rings_work)
  set_tests_properties(${test_name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()

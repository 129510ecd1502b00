# SPDX-License-Identifier: Apache-2.0
# The real twemproxy (nutcracker 0.5.0, Debian's nutcracker package) as an oracle. Without
# nutcracker (or redis-server) these tests skip (exit 77), or fail when CI is set.
#
# compat_nutcracker: 192 pools (every twemproxy hash x ketama/modula x named/unnamed servers x
# equal/unequal weights x hash_tag or not) in front of real redis-servers; 12 pools with
# auto_eject_hosts after one backend is killed and ejected (chash reads the config without it);
# 18 pools of unix-socket servers; >= 5,000 keys are written through nutcracker per pool, and
# `chash lookup --config` must name the backend that holds each of them (nutcracker_compat.py).
# Plus 2 distribution-random pools: nutcracker spreads keys over every backend, chash warns.
# It starts its own servers, on loopback and unix sockets in its temp dir only, and keeps both
# cores busy (~20 s): PROCESSORS 2 keeps `ctest -j2` from running other tests beside it.
add_test(NAME compat_nutcracker
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/nutcracker_compat.py
          $<TARGET_FILE:chash_cli>)
set_tests_properties(compat_nutcracker PROPERTIES
  SKIP_RETURN_CODE 77 TIMEOUT 300 PROCESSORS 2)

# compat_nutcracker_config: `nutcracker -t` accepts every valid_*.yml fixture and rejects every
# err_*.yml one, except for chash's listed deviations (tests/config/nutcracker_compat.py).
add_test(NAME compat_nutcracker_config
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/config/nutcracker_compat.py
          ${PROJECT_SOURCE_DIR}/tests/config/fixtures)
set_tests_properties(compat_nutcracker_config PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)

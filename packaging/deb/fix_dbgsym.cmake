# SPDX-License-Identifier: Apache-2.0
# CPack post-build script (CPACK_POST_BUILD_SCRIPTS): mends the -dbgsym packages CMake 3.25's
# DEB generator writes (CPACK_DEBIAN_DEBUGINFO_PACKAGE), with dpkg-deb, before CPack copies them
# to the output directory. Three defects, each an error or warning of lintian's:
#   - DEBIAN/md5sums names each file by its absolute path in CPack's staging tree, not by its
#     path in the package (md5sums-lists-nonexistent-file, file-missing-in-md5sums);
#   - no copyright file nor changelog: as debhelper's dbgsym packages do, usr/share/doc/PKG-dbgsym
#     becomes a link to usr/share/doc/PKG, the package it depends on (= version);
#   - the .debug files are executable (mode 0755); debug files are data: 0644.
# A package CPack already writes right is rebuilt the same; one this script cannot read fails
# the packaging with the dpkg-deb error.
find_program(DPKG_DEB dpkg-deb REQUIRED)
set(ddebs)
foreach(f IN LISTS CPACK_PACKAGE_FILES)
  get_filename_component(dir "${f}" DIRECTORY)
  file(GLOB found "${dir}/*-dbgsym_*.ddeb")
  list(APPEND ddebs ${found})
endforeach()
list(REMOVE_DUPLICATES ddebs)
foreach(ddeb IN LISTS ddebs)
  set(tree "${ddeb}.tree")
  file(REMOVE_RECURSE "${tree}")
  execute_process(COMMAND ${DPKG_DEB} -R "${ddeb}" "${tree}" RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "fix_dbgsym: dpkg-deb -R ${ddeb}: ${err}")
  endif()
  # md5sums: "SUM  PATH" with PATH relative to the package's root.
  file(STRINGS "${tree}/DEBIAN/md5sums" sums)
  set(fixed "")
  foreach(line IN LISTS sums)
    string(REGEX REPLACE "^([0-9a-f]+)  .*/(usr/lib/debug/.*)$" "\\1  \\2" line "${line}")
    string(APPEND fixed "${line}\n")
  endforeach()
  file(WRITE "${tree}/DEBIAN/md5sums" "${fixed}")
  file(GLOB_RECURSE debug_files "${tree}/usr/lib/debug/*.debug")
  foreach(d IN LISTS debug_files)
    file(CHMOD "${d}" PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
  endforeach()
  # The package it depends on: "Depends: chash (= 0.1.0)" -> chash.
  file(STRINGS "${tree}/DEBIAN/control" depends REGEX "^Depends: ")
  string(REGEX REPLACE "^Depends: ([a-z0-9.+-]+) .*" "\\1" parent "${depends}")
  file(STRINGS "${tree}/DEBIAN/control" package REGEX "^Package: ")
  string(REGEX REPLACE "^Package: " "" package "${package}")
  file(MAKE_DIRECTORY "${tree}/usr/share/doc")
  file(CREATE_LINK "${parent}" "${tree}/usr/share/doc/${package}" SYMBOLIC)
  execute_process(COMMAND ${DPKG_DEB} --root-owner-group -Zxz -b "${tree}" "${ddeb}"
    RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "fix_dbgsym: dpkg-deb -b ${ddeb}: ${err}")
  endif()
  file(REMOVE_RECURSE "${tree}")
endforeach()

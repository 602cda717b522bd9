# The Debian package (docs/packaging.md): `cpack -G DEB` in a built tree makes
# pccl_<version>_<arch>.deb with the library, headers, pkg-config and CMake files
# (PcclInstall.cmake), ccoip_master and pccl-tune, plus the `service` component:
# ccoip-master.service and /etc/pccl/master.env. That component is EXCLUDE_FROM_ALL so
# that a plain `cmake --install --prefix DIR` never writes to /etc; CPack installs it
# explicitly. One package: a library, its development files and a daemon of ~3 MB do not
# justify a split yet.

# The unit's ExecStart names the packaged binary: CMAKE_INSTALL_PREFIX is read when the
# install script runs (CPack runs it with /usr), not at configure time (/usr/local).
install(CODE "set(PCCL_BINDIR \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}\")
  configure_file(\"${CMAKE_SOURCE_DIR}/packaging/ccoip-master.service.in\"
                 \"${CMAKE_BINARY_DIR}/packaging/ccoip-master.service\" @ONLY)"
  COMPONENT service EXCLUDE_FROM_ALL)
install(FILES ${CMAKE_BINARY_DIR}/packaging/ccoip-master.service
  DESTINATION lib/systemd/system COMPONENT service EXCLUDE_FROM_ALL)
install(FILES ${CMAKE_SOURCE_DIR}/packaging/master.env
  DESTINATION /etc/pccl PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
  COMPONENT service EXCLUDE_FROM_ALL)
install(FILES ${CMAKE_SOURCE_DIR}/docs/packaging.md
  DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/pccl COMPONENT service EXCLUDE_FROM_ALL)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME pccl)
set(CPACK_PACKAGE_VENDOR pccl)
set(CPACK_PACKAGE_CONTACT "pccl maintainers <pccl@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "fault-tolerant collective communication over IP (PCCL API) and its master daemon")
set(CPACK_PACKAGE_DESCRIPTION "libpccl (shared and static), its headers, pkg-config and CMake \
files, the ccoip_master daemon with a systemd unit (ccoip-master.service, settings in \
/etc/pccl/master.env) and pccl-tune.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Every install() without a COMPONENT is "Unspecified"; both go into the one package.
set(CPACK_COMPONENTS_ALL Unspecified service)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://pccl.dev")
# dpkg-shlibdeps (dpkg-dev) derives Depends from the ELF files: libc6, libnng1, libssl3.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The static library and the CMake package need the development files of nng and OpenSSL.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libnng-dev, libssl-dev, pkg-config")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${CMAKE_SOURCE_DIR}/packaging/deb/conffiles ${CMAKE_SOURCE_DIR}/packaging/deb/triggers
  ${CMAKE_SOURCE_DIR}/packaging/deb/postinst ${CMAKE_SOURCE_DIR}/packaging/deb/prerm
  ${CMAKE_SOURCE_DIR}/packaging/deb/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/packages)
include(CPack)

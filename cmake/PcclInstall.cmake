# Install rules: headers, libpccl.so / libpccl.a, ccoip_master, a CMake
# package (find_package(pccl) -> pccl::pccl, pccl::pccl_static) and pccl.pc.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(FILES ${CMAKE_SOURCE_DIR}/include/pccl.h ${CMAKE_SOURCE_DIR}/include/pccl_types.h
              ${CMAKE_SOURCE_DIR}/include/ccoip.h
              ${CMAKE_SOURCE_DIR}/include/ccoip_inet.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS pccl EXPORT pcclTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES $<TARGET_FILE:pccl_static> DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT pcclTargets NAMESPACE pccl:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pccl)

configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/pcclConfig.cmake.in
  ${CMAKE_BINARY_DIR}/pcclConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pccl)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/pcclConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/pcclConfig.cmake ${CMAKE_BINARY_DIR}/pcclConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pccl)

# pccl.pc finds its prefix from its own directory: as many ".." as LIBDIR/pkgconfig has parts
# (lib -> ../.., Debian's lib/x86_64-linux-gnu -> ../../..).
file(RELATIVE_PATH PCCL_PC_PREFIX_FROM_PCDIR "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" PCCL_PC_PREFIX_FROM_PCDIR "${PCCL_PC_PREFIX_FROM_PCDIR}")
configure_file(${CMAKE_SOURCE_DIR}/cmake/pccl.pc.in ${CMAKE_BINARY_DIR}/pccl.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/pccl.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

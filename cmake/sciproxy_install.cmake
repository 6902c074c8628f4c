# Install rules and the CMake package: headers, the library, the Fortran module, the targets file,
# sciproxyConfig.cmake and sciproxyConfigVersion.cmake under <prefix>/<libdir>/cmake/sciproxy.
#
#   cmake --install build/cpu --prefix /opt/sciproxy
#   # downstream: find_package(sciproxy CONFIG REQUIRED) with CMAKE_PREFIX_PATH=/opt/sciproxy
#   target_link_libraries(app PRIVATE sciproxy::sciproxy)     # C++ and C
#   target_link_libraries(app PRIVATE sciproxy::fortran)      # Fortran: `use sciproxy`
#
# Components: `development` (library, headers, Fortran module, CMake package), `cli` (the
# sciproxy command, apps/CMakeLists.txt), `python` and `scripts` (the wheel, pyproject.toml).
include(CMakePackageConfigHelpers)

set(SCIPROXY_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/sciproxy"
    CACHE STRING "Where sciproxyConfig.cmake is installed, relative to the prefix")

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/sciproxy
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT development
        FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")

set(_sciproxy_export_targets sciproxy)
if(TARGET sciproxy_fortran)
  list(APPEND _sciproxy_export_targets sciproxy_fortran)
  # The .mod files are compiler-specific: they sit beside the headers, for the gfortran that built them.
  install(FILES ${PROJECT_BINARY_DIR}/fortran/sciproxy.mod ${PROJECT_BINARY_DIR}/fortran/sciproxy_diffusion.mod
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/sciproxy/fortran
          COMPONENT development)
endif()
install(TARGETS ${_sciproxy_export_targets}
        EXPORT sciproxyTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT development)
install(EXPORT sciproxyTargets
        NAMESPACE sciproxy::
        DESTINATION ${SCIPROXY_INSTALL_CMAKEDIR}
        COMPONENT development)

# What the config needs to know about this build: whether the library is static (then its private
# link dependencies, fmt and FFTW3, must be found downstream too) and whether CUDA is in.
get_target_property(_sciproxy_type sciproxy TYPE)
if(_sciproxy_type STREQUAL "STATIC_LIBRARY")
  set(SCIPROXY_STATIC ON)
else()
  set(SCIPROXY_STATIC OFF)
endif()
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/sciproxyConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/sciproxyConfig.cmake
  INSTALL_DESTINATION ${SCIPROXY_INSTALL_CMAKEDIR})
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/cmake/sciproxyConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)  # 0.x: a new minor version may break the API
install(FILES ${PROJECT_BINARY_DIR}/cmake/sciproxyConfig.cmake
              ${PROJECT_BINARY_DIR}/cmake/sciproxyConfigVersion.cmake
        DESTINATION ${SCIPROXY_INSTALL_CMAKEDIR}
        COMPONENT development)

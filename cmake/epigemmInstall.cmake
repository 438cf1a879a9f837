# Install rules: the headers, the library, the CMake package (epigemm::epigemm through
# find_package(epigemm)) and epigemm.pc. Included by the top-level CMakeLists.txt when
# EPIGEMM_INSTALL is on.
include(CMakePackageConfigHelpers)

set(EPIGEMM_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/epigemm)

install(TARGETS epigemm EXPORT epigemmTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES
  ${PROJECT_SOURCE_DIR}/include/epigemm/epigemm.h
  ${PROJECT_SOURCE_DIR}/include/epigemm/epigemm.hpp
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/epigemm)

install(EXPORT epigemmTargets NAMESPACE epigemm:: DESTINATION ${EPIGEMM_CMAKE_INSTALL_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/epigemmConfig.cmake.in
  ${PROJECT_BINARY_DIR}/epigemmConfig.cmake INSTALL_DESTINATION ${EPIGEMM_CMAKE_INSTALL_DIR})
# 0.x: a new minor version may change the API, so only the same major.minor is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/epigemmConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/epigemmConfig.cmake
  ${PROJECT_BINARY_DIR}/epigemmConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/epigemmEngines.cmake
  DESTINATION ${EPIGEMM_CMAKE_INSTALL_DIR})

# epigemm.pc. A static libepigemm needs its dependencies on the link line (Libs.private, which
# `pkg-config --static` adds), the C++ runtime included, for a C program linked by the C
# compiler; a shared one links them itself. The prefix is found relative to the .pc file, so an
# installed tree can be moved.
if(EPIGEMM_SHARED)
  set(EPIGEMM_PC_LIBS_PRIVATE "")
else()
  get_property(pc_libs GLOBAL PROPERTY EPIGEMM_PC_LIBS_PRIVATE)
  list(APPEND pc_libs -lstdc++ -lm)
  list(REMOVE_DUPLICATES pc_libs)
  list(JOIN pc_libs " " EPIGEMM_PC_LIBS_PRIVATE)
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(EPIGEMM_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  # lib/pkgconfig -> ${pcfiledir}/../..; lib/x86_64-linux-gnu/pkgconfig -> ${pcfiledir}/../../..
  file(RELATIVE_PATH pc_to_prefix /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
  string(REGEX REPLACE "/$" "" pc_to_prefix "${pc_to_prefix}")
  set(EPIGEMM_PC_PREFIX "\${pcfiledir}/${pc_to_prefix}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(EPIGEMM_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  set(EPIGEMM_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(EPIGEMM_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(EPIGEMM_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/epigemm.pc.in ${PROJECT_BINARY_DIR}/epigemm.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/epigemm.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

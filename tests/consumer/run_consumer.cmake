# Driver of the consumer tests (tests/consumer/CMakeLists.txt): cmake -DSTEP=<step> ... -P <this>.
# Every command is echoed, and any failure stops the test with its output.
cmake_minimum_required(VERSION 3.24)

# Runs a command and prints what it printed (QUIET: only when it fails); fails the test when it
# fails. OUTPUT_VAR receives the output when given.
function(run)
  cmake_parse_arguments(PARSE_ARGV 0 arg "QUIET" "OUTPUT_VAR" "COMMAND")
  list(JOIN arg_COMMAND " " shown)
  message(STATUS "$ ${shown}")
  execute_process(COMMAND ${arg_COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT arg_QUIET OR NOT rc EQUAL 0)
    message("${out}")
  endif()
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${shown}")
  endif()
  if(arg_OUTPUT_VAR)
    set(${arg_OUTPUT_VAR} "${out}" PARENT_SCOPE)
  endif()
endfunction()

set(compilers -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
if(BUILD_TYPE)
  list(APPEND compilers -DCMAKE_BUILD_TYPE=${BUILD_TYPE})
endif()

# The header's version, to compare with what pkg-config reports.
file(STRINGS ${EPIGEMM_SOURCE_DIR}/include/epigemm/epigemm.h version_lines
     REGEX "^#define EPIGEMM_VERSION_(MAJOR|MINOR|PATCH) ")
string(REGEX REPLACE ".*MAJOR ([0-9]+).*MINOR ([0-9]+).*PATCH ([0-9]+).*" "\\1.\\2.\\3"
       header_version "${version_lines}")

if(STEP STREQUAL "install")
  file(REMOVE_RECURSE ${PREFIX})
  run(COMMAND ${CMAKE_COMMAND} --install ${EPIGEMM_BINARY_DIR} --prefix ${PREFIX})
  set(expected
    ${INCLUDEDIR}/epigemm/epigemm.h
    ${INCLUDEDIR}/epigemm/epigemm.hpp
    ${LIBDIR}/cmake/epigemm/epigemmConfig.cmake
    ${LIBDIR}/cmake/epigemm/epigemmConfigVersion.cmake
    ${LIBDIR}/cmake/epigemm/epigemmTargets.cmake
    ${LIBDIR}/cmake/epigemm/epigemmEngines.cmake
    ${LIBDIR}/pkgconfig/epigemm.pc)
  if(SHARED)
    list(APPEND expected ${LIBDIR}/libepigemm.so)
  else()
    list(APPEND expected ${LIBDIR}/libepigemm.a)
  endif()
  foreach(file IN LISTS expected)
    if(NOT EXISTS ${PREFIX}/${file})
      message(FATAL_ERROR "not installed: ${file}")
    endif()
  endforeach()
  # Nothing of the internal library, the tests or the tools.
  file(GLOB_RECURSE installed RELATIVE ${PREFIX} ${PREFIX}/*)
  foreach(file IN LISTS installed)
    if(file MATCHES "internal|gtest|_tests|bench|/bin/|^bin/")
      message(FATAL_ERROR "installed but internal: ${file}")
    endif()
  endforeach()
  list(JOIN installed "\n  " shown)
  message(STATUS "installed:\n  ${shown}")

elseif(STEP STREQUAL "find_package")
  set(build ${WORK_DIR}/find_package-build)
  file(REMOVE_RECURSE ${build})
  run(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR}/installed -B ${build} -G ${GENERATOR}
              ${compilers} -DCMAKE_PREFIX_PATH=${PREFIX})
  run(COMMAND ${CMAKE_COMMAND} --build ${build})
  run(COMMAND ${build}/consumer_c)
  run(COMMAND ${build}/consumer_cpp)

elseif(STEP STREQUAL "pkg_config")
  set(ENV{PKG_CONFIG_PATH} ${PREFIX}/${LIBDIR}/pkgconfig)
  run(COMMAND ${PKG_CONFIG} --modversion epigemm OUTPUT_VAR pc_version)
  string(STRIP "${pc_version}" pc_version)
  if(NOT pc_version STREQUAL header_version)
    message(FATAL_ERROR "epigemm.pc says version ${pc_version}, epigemm.h ${header_version}")
  endif()
  # A static libepigemm: its dependencies come from Libs.private (--static). A shared one: the
  # program finds it at run time through its rpath.
  if(SHARED)
    set(static_flag "")
    set(rpath -Wl,-rpath,${PREFIX}/${LIBDIR})
  else()
    set(static_flag --static)
    set(rpath "")
  endif()
  run(COMMAND ${PKG_CONFIG} --cflags --libs ${static_flag} epigemm OUTPUT_VAR pc_flags)
  separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
  set(program ${WORK_DIR}/pkg_config_consumer)
  file(REMOVE ${program})
  run(COMMAND ${C_COMPILER} -std=c99 -Wall -Wextra -pedantic -Werror
              ${CONSUMER_SOURCE_DIR}/consumer.c -o ${program} ${pc_flags} ${rpath})
  run(COMMAND ${program})

elseif(STEP STREQUAL "add_subdirectory")
  # Kept between runs: the second `make test` only rebuilds what changed.
  set(build ${WORK_DIR}/add_subdirectory-build)
  run(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR}/subdirectory -B ${build} -G ${GENERATOR}
              ${compilers} -DEPIGEMM_SOURCE_DIR=${EPIGEMM_SOURCE_DIR} -DEPIGEMM_WITH_CUDA=OFF
              -DEPIGEMM_SHARED=ON)
  run(COMMAND ${CMAKE_COMMAND} --build ${build})
  run(COMMAND ${CMAKE_CTEST_COMMAND} -N --test-dir ${build} OUTPUT_VAR listed)
  if(NOT listed MATCHES "Total Tests: 1\n" OR NOT listed MATCHES "subdirectory_consumer_runs")
    message(FATAL_ERROR "the consumer's ctest lists more than its own test")
  endif()
  run(COMMAND ${CMAKE_CTEST_COMMAND} --output-on-failure --test-dir ${build})

  # The shared library: SONAME libepigemm.so.MAJOR.MINOR (0.x), and its dynamic symbols are
  # exactly the functions epigemm.h declares.
  file(GLOB library ${build}/epigemm/libepigemm.so.${header_version})
  if(NOT library)
    message(FATAL_ERROR "no ${build}/epigemm/libepigemm.so.${header_version}")
  endif()
  run(QUIET COMMAND ${OBJDUMP} -p ${library} OUTPUT_VAR headers)
  string(REGEX REPLACE "\\.[0-9]+$" "" soversion "${header_version}")
  if(NOT headers MATCHES "SONAME +libepigemm\\.so\\.${soversion}\n")
    message(FATAL_ERROR "libepigemm.so has no SONAME libepigemm.so.${soversion}")
  endif()
  message(STATUS "SONAME libepigemm.so.${soversion}")
  run(QUIET COMMAND ${NM} -D --defined-only ${library} OUTPUT_VAR symbols)
  string(REGEX MATCHALL "[^\n]+" symbol_lines "${symbols}")
  set(exported "")
  foreach(line IN LISTS symbol_lines)
    if(NOT line MATCHES " ([^ ]+)$")
      continue()
    endif()
    list(APPEND exported ${CMAKE_MATCH_1})
  endforeach()
  # Every function declaration of the header starts a line: "<type> epigemm_<name>(".
  file(READ ${EPIGEMM_SOURCE_DIR}/include/epigemm/epigemm.h header)
  string(REGEX MATCHALL "\n[a-z_ ]+[ *](epigemm_[a-z0-9_]+)\\(" declarations "${header}")
  set(declared "")
  foreach(declaration IN LISTS declarations)
    string(REGEX MATCH "(epigemm_[a-z0-9_]+)\\($" name "${declaration}")
    list(APPEND declared ${CMAKE_MATCH_1})
  endforeach()
  list(SORT exported)
  list(SORT declared)
  list(LENGTH declared declared_count)
  if(declared_count LESS 20)
    message(FATAL_ERROR "found only ${declared_count} function declarations in epigemm.h")
  endif()
  if(NOT exported STREQUAL declared)
    set(extra ${exported})
    list(REMOVE_ITEM extra ${declared})
    set(missing ${declared})
    list(REMOVE_ITEM missing ${exported})
    message(FATAL_ERROR "libepigemm.so exports what epigemm.h does not declare: [${extra}]; "
                        "does not export what it declares: [${missing}]")
  endif()
  message(STATUS "libepigemm.so exports the ${declared_count} functions of epigemm.h, nothing else")

else()
  message(FATAL_ERROR "unknown STEP '${STEP}'")
endif()

# Sanitizer and fuzzing builds (scripts/sanitize.sh runs both in CI):
#   -DEPIGEMM_SANITIZE=address,undefined   every C/C++ target compiled and linked with these
#                                          sanitizers, and a finding is fatal (no recovery), so
#                                          ctest fails on the first report
#   -DEPIGEMM_FUZZ=ON                      clang only: coverage instrumentation for libFuzzer on
#                                          every target and the fuzz target tests/fuzz/
# Both need the host code alone: CUDA is turned off (the CUDA runtime and ASan's shadow memory
# need special options to coexist, and the device code is not instrumented anyway).
set(EPIGEMM_SANITIZE "" CACHE STRING
    "Sanitizers for every C/C++ target, as for -fsanitize= (e.g. address,undefined); empty: none")
option(EPIGEMM_FUZZ "Build the C API fuzz target (clang with libFuzzer)" OFF)

if(EPIGEMM_SANITIZE OR EPIGEMM_FUZZ)
  if(EPIGEMM_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "EPIGEMM_SANITIZE / EPIGEMM_FUZZ build the host code only; "
                        "configure with -DEPIGEMM_WITH_CUDA=OFF")
  endif()
  set(EPIGEMM_WITH_CUDA OFF)
endif()

if(EPIGEMM_SANITIZE)
  add_compile_options(-fsanitize=${EPIGEMM_SANITIZE} -fno-sanitize-recover=all
                      -fno-omit-frame-pointer -g)
  add_link_options(-fsanitize=${EPIGEMM_SANITIZE})
endif()

if(EPIGEMM_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "EPIGEMM_FUZZ needs clang (libFuzzer); configure with CXX=clang++ CC=clang")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

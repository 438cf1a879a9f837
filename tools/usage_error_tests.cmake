# add_usage_error_tests(<prefix> <target> "<name>|<arg>,<arg>,..." ...): one CTest entry
# <prefix>_<name> per case, running <target> with those arguments through
# expect_usage_error.cmake, which checks the contract for a usage mistake: exit code 2, exactly
# one line on stderr, nothing on stdout. Used by tools/ (epigemm) and bench/ (epigemm_bench_cpu).
set(EPIGEMM_EXPECT_USAGE_ERROR ${CMAKE_CURRENT_LIST_DIR}/expect_usage_error.cmake)
function(add_usage_error_tests prefix target)
  foreach(bad_usage ${ARGN})
    string(REPLACE "|" ";" parts "${bad_usage}")
    list(GET parts 0 name)
    list(GET parts 1 arguments)
    add_test(NAME ${prefix}_${name}
      COMMAND ${CMAKE_COMMAND} -DPROGRAM=$<TARGET_FILE:${target}> "-DARGS=${arguments}"
              -P ${EPIGEMM_EXPECT_USAGE_ERROR})
  endforeach()
endfunction()

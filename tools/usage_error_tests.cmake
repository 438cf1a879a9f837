# add_usage_error_tests(<prefix> <target> "<name>|<arg>,<arg>,...[|<regex>]" ...): one CTest entry
# <prefix>_<name> per case, running <target> with those arguments through
# expect_usage_error.cmake, which checks the contract for a usage mistake: exit code 2, exactly
# one line on stderr (matching <regex> where one is given), nothing on stdout. Used by tools/
# (epigemm) and bench/ (epigemm_bench_cpu).
set(EPIGEMM_EXPECT_USAGE_ERROR ${CMAKE_CURRENT_LIST_DIR}/expect_usage_error.cmake)
function(add_usage_error_tests prefix target)
  foreach(bad_usage ${ARGN})
    string(REPLACE "|" ";" parts "${bad_usage}")
    list(GET parts 0 name)
    list(GET parts 1 arguments)
    list(LENGTH parts fields)
    set(expected "")
    if(fields GREATER 2)
      list(GET parts 2 expected)
    endif()
    add_test(NAME ${prefix}_${name}
      COMMAND ${CMAKE_COMMAND} -DPROGRAM=$<TARGET_FILE:${target}> "-DARGS=${arguments}"
              "-DEXPECT=${expected}" -P ${EPIGEMM_EXPECT_USAGE_ERROR})
  endforeach()
endfunction()

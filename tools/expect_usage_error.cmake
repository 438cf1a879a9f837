# Runs `${PROGRAM} ${ARGS}` (ARGS separated by commas) and checks the contract for a usage
# mistake: exit code 2, exactly one line on stderr (matching the regular expression EXPECT where it
# is given and not empty), nothing on stdout.
#   cmake -DPROGRAM=... -DARGS=demo,--tokens,0 -P expect_usage_error.cmake
string(REPLACE "," ";" ARGS "${ARGS}")
execute_process(COMMAND ${PROGRAM} ${ARGS}
  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX MATCHALL "\n" newlines "${err}")
list(LENGTH newlines lines)
if(NOT code EQUAL 2)
  message(FATAL_ERROR "expected exit code 2, got '${code}'; stderr: ${err}")
endif()
if(NOT lines EQUAL 1)
  message(FATAL_ERROR "expected one line on stderr, got ${lines}: ${err}")
endif()
if(NOT "${EXPECT}" STREQUAL "" AND NOT err MATCHES "${EXPECT}")
  message(FATAL_ERROR "expected stderr to match '${EXPECT}', got: ${err}")
endif()
if(NOT out STREQUAL "")
  message(FATAL_ERROR "expected nothing on stdout, got: ${out}")
endif()
message(STATUS "exit code 2, one line: ${err}")

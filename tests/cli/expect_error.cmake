# tests/cli/expect_error.cmake: runs the sciproxy tool on bad input and checks that it fails the
# documented way: the expected exit status and exactly one line "sciproxy: error: ..." on stderr.
# Usage: cmake -DEXE=<sciproxy> -DARGS="a|b|c" -DEXPECT_RC=2 [-DEXPECT_MATCH=regex]
#        [-DEXPECT_STDOUT=regex] -P expect_error.cmake
# EXPECT_STDOUT: what stdout must show too (the report of a run that fails, as `verify` prints).
string(REPLACE "|" ";" args "${ARGS}")  # '|' separates arguments: ';' would not survive add_test
execute_process(COMMAND "${EXE}" ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 120)
if(NOT "${rc}" STREQUAL "${EXPECT_RC}")
  message(FATAL_ERROR "sciproxy ${args}: expected exit status ${EXPECT_RC}, got ${rc}\nstdout:\n${out}\nstderr:\n${err}")
endif()
if(NOT err MATCHES "^sciproxy: error: [^\n]+\n$")
  message(FATAL_ERROR "sciproxy ${args}: expected one line 'sciproxy: error: ...' on stderr, got:\n${err}")
endif()
if(DEFINED EXPECT_MATCH AND NOT err MATCHES "${EXPECT_MATCH}")
  message(FATAL_ERROR "sciproxy ${args}: the error does not mention '${EXPECT_MATCH}':\n${err}")
endif()
if(DEFINED EXPECT_STDOUT AND NOT out MATCHES "${EXPECT_STDOUT}")
  message(FATAL_ERROR "sciproxy ${args}: stdout does not match '${EXPECT_STDOUT}':\n${out}")
endif()
message(STATUS "ok (${rc}): ${err}")

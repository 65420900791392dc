# Run by the build whenever a memrun_discover_tests() target or its
# arguments changed (cmake -P): lists its GoogleTest cases and writes a
# CTest file with one test per case, each `memrun exec` of exactly that
# case under its limit. SETTINGS names the file memrun_discover_tests()
# generated (EXE, MEMRUN, OUT, MEMORY, CASES, EXPECT_OOM, ...).
cmake_minimum_required(VERSION 3.25)
include("${SETTINGS}")
include("${CMAKE_CURRENT_LIST_DIR}/memrunFunctions.cmake")

execute_process(COMMAND "${EXE}" --gtest_list_tests
  WORKING_DIRECTORY "${WORKING_DIRECTORY}"
  TIMEOUT ${DISCOVERY_TIMEOUT}
  OUTPUT_VARIABLE listing ERROR_VARIABLE errors RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  file(REMOVE "${OUT}")
  message(FATAL_ERROR "memrun_discover_tests: ${EXE} --gtest_list_tests failed (${result}); "
                      "is it a GoogleTest binary?\n${listing}${errors}")
endif()

# A glob (* and ?, as fnmatch without flags) as an anchored regex.
function(glob_regex glob out)
  string(REGEX REPLACE "([][.+^$(){}|\\\\])" "\\\\\\1" re "${glob}")
  string(REPLACE "*" ".*" re "${re}")
  string(REPLACE "?" "." re "${re}")
  set(${out} "^${re}$" PARENT_SCOPE)
endfunction()

# Suite lines end in '.', case lines are indented; either may end in a
# comment ("  # GetParam() = 3"), dropped before the lines are split (a
# comment may hold a ';', CMake's list separator).
string(REGEX REPLACE "  #[^\n]*" "" listing "${listing}")
if(listing MATCHES ";")
  message(FATAL_ERROR "memrun_discover_tests: a case name of ${EXE} holds a ';', which CTest names cannot")
endif()
string(REPLACE "\n" ";" lines "${listing}")
set(text "# Written by memrun_discover_tests from ${EXE} --gtest_list_tests; rewritten when it or the arguments change.\n")
set(suite "")
set(count 0)
foreach(line IN LISTS lines)
  string(REGEX REPLACE "[ \r]+$" "" line "${line}")
  if(line STREQUAL "")
    continue()
  endif()
  if(NOT line MATCHES "^ ")
    set(suite "${line}")
    continue()
  endif()
  string(STRIP "${line}" case)
  set(name "${suite}${case}")
  if(name MATCHES "^DISABLED_|/DISABLED_|\\.DISABLED_")
    continue()
  endif()
  # Names go into the CTest file as bracket arguments: one that could close
  # the bracket would be CMake code, not a name.
  if(name MATCHES "\\]==\\]")
    message(FATAL_ERROR "memrun_discover_tests: the case name '${name}' of ${EXE} holds ']==]'; rename it")
  endif()
  set(memory "${MEMORY}")
  set(index 0)
  list(LENGTH CASES n)
  while(index LESS n)
    list(GET CASES ${index} glob)
    math(EXPR next "${index} + 1")
    list(GET CASES ${next} limit)
    glob_regex("${glob}" re)
    if(name MATCHES "${re}")
      set(memory "${limit}")
    endif()
    math(EXPR index "${index} + 2")
  endwhile()
  set(expect "")
  foreach(glob IN LISTS EXPECT_OOM)
    glob_regex("${glob}" re)
    if(name MATCHES "${re}")
      set(expect oom)
    endif()
  endforeach()
  _memrun_exec_args(args "${name}" "${memory}" "${expect}" "${MIN_HEADROOM}" "${TIMEOUT}" "${UNENFORCEABLE_SKIP}"
                    "${RUN_DIR}" "${JSON_DIR}")
  set(words "")
  foreach(word IN LISTS args ITEMS -- "${EXE}" "--gtest_filter=${name}" ${EXTRA_ARGS})
    string(APPEND words " [==[${word}]==]")
  endforeach()
  string(APPEND text "add_test([==[${TEST_PREFIX}${name}]==] [==[${MEMRUN}]==]${words})\n"
                     "set_tests_properties([==[${TEST_PREFIX}${name}]==] PROPERTIES "
                     "WORKING_DIRECTORY [==[${WORKING_DIRECTORY}]==])\n")
  if(UNENFORCEABLE_SKIP)
    string(APPEND text "set_tests_properties([==[${TEST_PREFIX}${name}]==] PROPERTIES SKIP_RETURN_CODE 77)\n")
  endif()
  math(EXPR count "${count} + 1")
endforeach()
if(count EQUAL 0)
  message(WARNING "memrun_discover_tests: ${EXE} lists no case to run")
endif()
file(WRITE "${OUT}" "${text}")

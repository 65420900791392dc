# CTest tests under kernel-enforced memory limits, in the style of CMake's
# own GoogleTest module. Each test runs as `memrun exec`: its own cgroup,
# its limit set before its first instruction, and memrun's verdict line
# (peak, headroom, OOM kill and who was killed) in the test's output. The
# verdict reaches CTest as the exit code: 0 when the expectation held, 1
# when not, 3 when memory limits cannot be enforced on this machine (run
# `memrun doctor`): never a pass without a limit. With UNENFORCEABLE_SKIP
# such a test is skipped instead (memrun's exit 77, CTest's
# SKIP_RETURN_CODE): for developers' machines without root.

set(_memrun_functions_dir "${CMAKE_CURRENT_LIST_DIR}")

# memrun_add_test(NAME name COMMAND cmd [args...] MEMORY size
#                 [EXPECT pass|oom|fail|N] [MIN_HEADROOM size|N%]
#                 [TIMEOUT duration] [WORKING_DIRECTORY dir] [LABELS ...]
#                 [UNENFORCEABLE_SKIP] [JSON_DIR dir])
# One CTest test: COMMAND under memrun, with a hard limit of MEMORY. A
# target name as the command's first word runs that target's file.
function(memrun_add_test)
  cmake_parse_arguments(PARSE_ARGV 0 arg "UNENFORCEABLE_SKIP"
    "NAME;MEMORY;EXPECT;MIN_HEADROOM;TIMEOUT;WORKING_DIRECTORY;JSON_DIR" "COMMAND;LABELS")
  foreach(required NAME COMMAND MEMORY)
    if(NOT arg_${required})
      message(FATAL_ERROR "memrun_add_test: ${required} is missing (e.g. memrun_add_test(NAME reads-one-column "
                          "COMMAND reader --column a MEMORY 64MiB))")
    endif()
  endforeach()
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "memrun_add_test(${arg_NAME}): unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  _memrun_run_dir(run_dir)
  if(arg_JSON_DIR)
    file(MAKE_DIRECTORY "${arg_JSON_DIR}")
  endif()
  _memrun_exec_args(args "${arg_NAME}" "${arg_MEMORY}" "${arg_EXPECT}" "${arg_MIN_HEADROOM}" "${arg_TIMEOUT}"
                    "${arg_UNENFORCEABLE_SKIP}" "${run_dir}" "${arg_JSON_DIR}")
  list(POP_FRONT arg_COMMAND program)
  if(TARGET "${program}")
    set(program "$<TARGET_FILE:${program}>")
  endif()
  set(where "")
  if(arg_WORKING_DIRECTORY)
    set(where WORKING_DIRECTORY "${arg_WORKING_DIRECTORY}")
  endif()
  add_test(NAME "${arg_NAME}" COMMAND memrun::memrun ${args} -- "${program}" ${arg_COMMAND} ${where})
  if(arg_LABELS)
    set_tests_properties("${arg_NAME}" PROPERTIES LABELS "${arg_LABELS}")
  endif()
  if(arg_UNENFORCEABLE_SKIP)
    set_tests_properties("${arg_NAME}" PROPERTIES SKIP_RETURN_CODE 77)
  endif()
endfunction()

# memrun_discover_tests(target MEMORY size
#                       [CASES glob size [glob size ...]]
#                       [EXPECT_OOM glob...] [MIN_HEADROOM size|N%]
#                       [TIMEOUT duration] [TEST_PREFIX prefix]
#                       [EXTRA_ARGS args...] [WORKING_DIRECTORY dir]
#                       [DISCOVERY_TIMEOUT seconds] [UNENFORCEABLE_SKIP]
#                       [JSON_DIR dir])
# Every GoogleTest case of `target`, listed after each build that changed
# the target or these arguments (as gtest_discover_tests does, with
# --gtest_list_tests; DISABLED_ cases left out), becomes a CTest test named TEST_PREFIX + the case's name, run
# alone (--gtest_filter=CASE) under MEMORY. CASES gives the cases whose
# names match a glob (* and ? as in the shell; * crosses . and /) another
# limit, later pairs winning; EXPECT_OOM's cases pass only when the kernel
# OOM-kills them.
function(memrun_discover_tests target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "UNENFORCEABLE_SKIP"
    "MEMORY;MIN_HEADROOM;TIMEOUT;TEST_PREFIX;WORKING_DIRECTORY;DISCOVERY_TIMEOUT;JSON_DIR" "CASES;EXPECT_OOM;EXTRA_ARGS")
  if(NOT TARGET "${target}")
    message(FATAL_ERROR "memrun_discover_tests: '${target}' is not a target (add_executable it first)")
  endif()
  if(NOT arg_MEMORY)
    message(FATAL_ERROR "memrun_discover_tests(${target}): MEMORY is missing: every case's limit (e.g. MEMORY 256MiB)")
  endif()
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "memrun_discover_tests(${target}): unknown arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  list(LENGTH arg_CASES n)
  math(EXPR odd "${n} % 2")
  if(odd)
    message(FATAL_ERROR "memrun_discover_tests(${target}): CASES takes pairs of a glob and a limit "
                        "(CASES \"Parquet.*\" 64MiB); got: ${arg_CASES}")
  endif()
  if(NOT arg_WORKING_DIRECTORY)
    set(arg_WORKING_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}")
  endif()
  if(NOT arg_DISCOVERY_TIMEOUT)
    set(arg_DISCOVERY_TIMEOUT 60)
  endif()
  # What the listing script needs, in a file of its own (lists survive; the
  # executables' paths are known only at generation time). With a
  # multi-config generator, a list per configuration.
  set(base "${CMAKE_CURRENT_BINARY_DIR}/${target}_memrun")
  get_property(multi GLOBAL PROPERTY GENERATOR_IS_MULTI_CONFIG)
  set(config "")
  if(multi)
    set(config "-$<CONFIG>")
  endif()
  set(settings "")
  _memrun_run_dir(arg_RUN_DIR)
  if(arg_JSON_DIR)
    file(MAKE_DIRECTORY "${arg_JSON_DIR}")
  endif()
  foreach(var MEMORY MIN_HEADROOM TIMEOUT TEST_PREFIX WORKING_DIRECTORY DISCOVERY_TIMEOUT CASES EXPECT_OOM EXTRA_ARGS
              UNENFORCEABLE_SKIP RUN_DIR JSON_DIR)
    string(APPEND settings "set(${var} [==[${arg_${var}}]==])\n")
  endforeach()
  string(APPEND settings "set(EXE [==[$<TARGET_FILE:${target}>]==])\n"
                         "set(MEMRUN [==[$<TARGET_FILE:memrun::memrun>]==])\n"
                         "set(OUT [==[${base}_tests${config}.cmake]==])\n")
  file(GENERATE OUTPUT "${base}_settings${config}.cmake" CONTENT "${settings}")
  # The list is written again whenever the target's file or these settings
  # change (file(GENERATE) rewrites them only when they differ): a limit
  # changed here reaches ctest on the next build, relinked or not.
  add_custom_command(OUTPUT "${base}_tests${config}.cmake"
    COMMAND "${CMAKE_COMMAND}" -D "SETTINGS=${base}_settings${config}.cmake"
            -P "${_memrun_functions_dir}/memrunDiscoverTests.cmake"
    DEPENDS ${target} "${base}_settings${config}.cmake" "${_memrun_functions_dir}/memrunDiscoverTests.cmake"
            "${_memrun_functions_dir}/memrunFunctions.cmake"
    COMMENT "Listing the GoogleTest cases of ${target} for memrun"
    VERBATIM)
  add_custom_target(${target}_memrun_tests ALL DEPENDS "${base}_tests${config}.cmake")
  # CTest reads the list the last build wrote (for the configuration it
  # runs); before a build there is none, and a placeholder test says so.
  set(list "${base}_tests.cmake")
  if(multi)
    set(list "${base}_tests-\${CTEST_CONFIGURATION_TYPE}.cmake")
  endif()
  file(WRITE "${base}_include.cmake"
    "if(EXISTS \"${list}\")\n"
    "  include(\"${list}\")\n"
    "else()\n"
    "  add_test([==[${target}_NOT_BUILT]==] [==[${target}_NOT_BUILT]==])\n"
    "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${base}_include.cmake")
endfunction()

# Every test's run folder is below one place in the build tree, which
# `cmake --build . --target clean` removes.
function(_memrun_run_dir out)
  set(dir "${CMAKE_BINARY_DIR}/memrun-runs")
  set_property(DIRECTORY "${CMAKE_SOURCE_DIR}" APPEND PROPERTY ADDITIONAL_CLEAN_FILES "${dir}")
  set(${out} "${dir}" PARENT_SCOPE)
endfunction()

# The arguments of `memrun exec` for one test, into `out`: its verdict line
# first in CTest's log, then the command's whole output (--output after);
# with JSON_DIR, a report per test (`memrun merge DIR/*.json` makes one).
function(_memrun_exec_args out name memory expect min_headroom timeout skip run_dir json_dir)
  set(args exec --name "${name}" --memory "${memory}" --output after --run-dir "${run_dir}")
  if(skip)
    list(APPEND args --unenforceable skip)
  endif()
  if(json_dir)
    string(REGEX REPLACE "[^A-Za-z0-9._-]" "_" file "${name}")
    list(APPEND args --json "${json_dir}/${file}.json")
  endif()
  if(expect)
    list(APPEND args --expect "${expect}")
  endif()
  if(min_headroom)
    list(APPEND args --min-headroom "${min_headroom}")
  endif()
  if(timeout)
    list(APPEND args --timeout "${timeout}")
  endif()
  set(${out} "${args}" PARENT_SCOPE)
endfunction()

# Writes OUT, the C++ file that names the commit memrun is built from
# (`memrun --version`), run by the build at every build (cmake -P) and
# rewritten only when the commit changed. SOURCE is the source tree: its
# git commit, with "-dirty" when a tracked file differs from it; in a
# source archive (no git checkout of its own), the commit its COMMIT file
# names (release/make writes it into the sdist); else "unknown".
cmake_minimum_required(VERSION 3.25)
set(commit unknown)
find_program(GIT git)
if(GIT)
  execute_process(COMMAND "${GIT}" -C "${SOURCE}" rev-parse --show-toplevel
    OUTPUT_VARIABLE top OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
endif()
# The checkout must be the source tree's own: a source archive unpacked
# inside another project's checkout is not that project's commit.
if(GIT AND rc EQUAL 0 AND EXISTS "${top}")
  file(REAL_PATH "${top}" top)
  file(REAL_PATH "${SOURCE}" source)
endif()
if(DEFINED source AND top STREQUAL source)
  execute_process(COMMAND "${GIT}" -C "${SOURCE}" rev-parse --short=12 HEAD
    OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  execute_process(COMMAND "${GIT}" -C "${SOURCE}" status --porcelain --untracked-files=no
    OUTPUT_VARIABLE changed ERROR_QUIET)
  if(changed)
    string(APPEND commit "-dirty")
  endif()
elseif(EXISTS "${SOURCE}/COMMIT")
  file(STRINGS "${SOURCE}/COMMIT" commit LIMIT_COUNT 1 REGEX "^[0-9a-f]+(-dirty)?$")
endif()
if(NOT commit)
  set(commit unknown)
endif()
set(text "// Written by cmake/commit.cmake at every build; do not edit.\nnamespace memrun {\nextern const char* const kCommit;\nconst char* const kCommit = \"${commit}\";\n}  // namespace memrun\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()

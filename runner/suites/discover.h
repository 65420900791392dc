// Stage 1b: the cases of existing suites (GoogleTest binaries, pytest,
// CTest build trees), listed by the suites' own tools, once per memrun
// invocation. Each case becomes a test of its own (spec/parser.cc applies the
// suite's limits and rules to it).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cgroup/cgroup.h"
#include "runner/spec/suite.h"

namespace memrun {

/// Lists the cases of `source` by running its tool once, in a group of
/// `backend` under the suite's memory limit (none without a backend).
/// Throws Error(bad_input) saying what went wrong (the tool is
/// missing, timed out, was OOM-killed, failed, or found no case) and what
/// to do. With `source.found`, each case goes there as it is read and
/// none is returned.
std::vector<Case> discover(const SuiteSource& source, cgroup::Backend* backend);

/// Lists suites for one memrun invocation: the groups of the listings
/// belong to a backend of their own (a run named memrun-list-...), opened
/// at the first suite and closed with this object. Where none can be
/// opened (no root and no systemd manager that delegates memory), suites
/// are listed without a limit: the run itself then says why it cannot
/// enforce.
class SuiteLister {
 public:
  explicit SuiteLister(cgroup::OpenOptions options) : options_(std::move(options)) {}
  ~SuiteLister();
  SuiteLister(const SuiteLister&) = delete;
  SuiteLister& operator=(const SuiteLister&) = delete;
  /// discover(), under the suite's limit where memrun can set one.
  std::vector<Case> operator()(const SuiteSource& source);

 private:
  cgroup::OpenOptions options_;
  bool opened_ = false;
  std::unique_ptr<cgroup::Backend> backend_;
};

/// A case named by `--gtest_list_tests`.
struct GtestName {
  std::string name;       ///< "Suite.Case", "Inst/Suite.Case/3"
  bool disabled = false;  ///< DISABLED_ in its suite's or its own name: GoogleTest does not run it
};

/// Reads `--gtest_list_tests` output one line at a time (feed), handing
/// each case's full name to `found` in order (a name may come twice:
/// GoogleTest lists what it was given). Keeps nothing but the suite line
/// it is under.
class GtestListParser {
 public:
  explicit GtestListParser(std::function<void(GtestName)> found) : found_(std::move(found)) {}
  void feed(std::string line);

 private:
  std::function<void(GtestName)> found_;
  std::string suite_;
  bool suite_disabled_ = false;
};

/// Parses a whole `--gtest_list_tests` output (GtestListParser). The seam
/// for tests.
std::vector<GtestName> parse_gtest_list(const std::string& text);

/// Parses `ctest --show-only=json-v1` output into cases, with ctest's rules
/// for judging them (DISABLED ones disabled; one whose executable ctest
/// cannot find not runnable). Throws Error when it is not that JSON.
std::vector<Case> parse_ctest_json(const std::string& text);

/// `name` with every byte that is not UTF-8 text, and every control
/// character, as \xNN: the name a case runs under when its tool's name
/// cannot be written as it is (a report, JUnit, a terminal).
std::string usable_name(const std::string& name);

/// The pytest plugin memrun ships (runner/suites/pytest_driver.py), embedded.
const std::string& pytest_plugin();

}  // namespace memrun

// Stage 1b: the cases of existing suites (GoogleTest binaries, pytest,
// CTest build trees), listed by the suites' own tools, once per memrun
// invocation. Each case becomes a test of its own (spec/parser.cc applies the
// suite's limits and rules to it).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cgroup/cgroup.h"
#include "runner/spec/order.h"

namespace memrun {

/// Where a suite's cases come from, as its spec entry says.
struct SuiteSource {
  enum Kind { gtest, pytest, ctest } kind = gtest;
  std::string suite;              ///< the suite's name, for messages
  std::string path;               ///< gtest: the binary; ctest: the build tree (absolute)
  std::vector<std::string> args;  ///< pytest: its own arguments (paths, -m, -k ...)
  std::string python = "python3"; ///< pytest: the interpreter that has pytest
  std::string cwd;                ///< where the tool runs (absolute)
  std::vector<std::string> exclude;  ///< globs over case names: cases not run at all
  std::map<std::string, std::string> env;  ///< on top of memrun's environment
  std::chrono::milliseconds timeout{std::chrono::minutes(2)};  ///< for listing
  uint64_t memory = 0;            ///< the suite's memory limit; the listing runs under it
  bool service_manager = false;   ///< the listing may reach the service managers (shield.h)
  /// Which cases to keep, by their test's name ("SUITE/CASE"), as they are
  /// read (--filter): a listing of a million cases costs memrun only those
  /// it keeps. Empty: every one.
  std::function<bool(const std::string& test_name)> keep;
};

/// How a suite's own tool judges how a case ended, memory aside; memrun's
/// verdict follows it (verdict/decide.cc). Empty for a test written in `tests:`.
struct ToolRules {
  /// An exit with this code is a skip (ctest's SKIP_RETURN_CODE).
  std::optional<int> skip_exit_code;
  /// ctest's PASS_, FAIL_ and SKIP_REGULAR_EXPRESSION, matched against the
  /// case's output (stdout then stderr).
  std::vector<std::string> pass_regex, fail_regex, skip_regex;
  /// ctest's WILL_FAIL: an exit that ctest calls failed passes and the
  /// other way round (a signal still fails: ctest's "Exception").
  bool will_fail = false;
  /// pytest: the case's outcome is what memrun's plugin wrote to the file
  /// $MEMRUN_PYTEST_OUTCOME names once pytest's session ended ("passed",
  /// "failed", "skipped", "none"); no word there (os._exit, a crash of the
  /// interpreter) is a failure, whatever the exit code.
  bool outcome_file = false;
  /// GoogleTest: the case's outcome is what the program's own results say
  /// of it (GTEST_OUTPUT=xml:..., written once every case ran), never lines
  /// a test can print; no results (exit() mid-case, results sent
  /// elsewhere) is a failure, whatever the exit code; a case listed as run
  /// but never started (a global environment's SetUp) is no pass.
  bool gtest_results = false;
  std::string tool;  ///< "ctest", "pytest", "GoogleTest" for reasons; empty: none
  bool any() const { return !tool.empty(); }
  bool reads_output() const { return !pass_regex.empty() || !fail_regex.empty() || !skip_regex.empty(); }
};

/// One case, ready to run as a test.
struct Case {
  std::string name;               ///< as the tool names it ("Suite.Case/1", a node id)
  std::vector<std::string> argv;  ///< one process that runs exactly this case
  std::string command;            ///< what outputs show for it
  std::string cwd;                ///< empty: the suite's
  std::map<std::string, std::string> env;  ///< on top of the suite's (ctest's ENVIRONMENT)
  /// Keys of the spec's test fields, from the case itself: pytest's
  /// @pytest.mark.memrun(memory=..., expect=...), ctest's WILL_FAIL
  /// (expect: fail).
  std::map<std::string, std::string> marks;
  ToolRules rules;                ///< how its tool judges its end
  /// Why it cannot run, when it cannot (ctest: its executable does not
  /// exist): reported as not run, alone; the others run.
  std::string not_runnable;
  /// Its tool does not run it (GoogleTest's DISABLED_, ctest's DISABLED):
  /// counted and shown, never run.
  bool disabled = false;
  /// Its tool skipped it as it listed it (pytest: a module that
  /// importorskip or a module-level skip ended), and why: a skip, never run.
  std::string skipped;
  /// ctest: when it runs, and beside what (spec/order.h).
  CtestOrder order;
  /// ctest's LABELS: the test's tags too (`--tag LABEL`, as `ctest -L`).
  std::vector<std::string> labels;
};

/// Lists the cases of `source` by running its tool once, in a group of
/// `backend` under the suite's memory limit (none without a backend).
/// Throws Error(bad_input) saying what went wrong (the tool is
/// missing, timed out, was OOM-killed, failed, or found no case) and what
/// to do.
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

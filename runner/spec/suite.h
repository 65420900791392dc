// A suite of a spec (`suites:`) as the spec sees it: where its cases come
// from, how its tool judges a case, and a case as its tool lists it. The
// listing itself is suites/discover.h's; the spec stage only needs these
// types, and a Discoverer to call.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runner/spec/order.h"

namespace memrun {

struct Case;

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
  /// Where each kept case goes as soon as it is read (the spec makes it a
  /// test there and then): set, the Discoverer hands over every case
  /// through it and returns none, and memrun never holds a listing's cases
  /// at once. Empty: the Discoverer returns them (ctest's, whose order is
  /// resolved over them all).
  std::function<void(Case)> found;
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
  bool operator==(const ToolRules&) const = default;
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

/// Lists a suite's cases: discover() for real, a fixed list in tests.
using Discoverer = std::function<std::vector<Case>(const SuiteSource&)>;

}  // namespace memrun

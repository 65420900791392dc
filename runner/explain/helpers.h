// The parts of explain's rooms (memray.cc, heaptrack.cc,
// process_sampler.cc, profiled_run.cc) share: how a profiled run runs its
// program, and the helpers (a profile's reader, a version probe) that run
// as tests do, each in a group of its own under a limit.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "runner/base/units.h"
#include "runner/plan/plan.h"
#include "runner/run/run.h"
#include "runner/verdict/explanation.h"

namespace memrun::explain {

constexpr size_t kMaxSites = 10;

/// A plan of `test` alone, in `run_dir`: run once, first, with nothing to
/// wait for (what it waited for in its own plan ran already).
Plan plan_of_one(PlannedTest test, const std::string& run_dir);

// A profile's reader holds a description of each allocation live at the
// peak and the symbols of the libraries they came from (memray's
// symbolizer reads their debug information): room is given for that, at
// least the profiled run's limit, and a time bound.
constexpr uint64_t kReaderMemory = 512 * MiB;
constexpr std::chrono::seconds kReaderBound{300};
// `python -c "import memray"`, `heaptrack --version`.
constexpr uint64_t kProbeMemory = 256 * MiB;

// What a helper (a profile's reader, a probe) did.
struct Ran {
  bool ok = false;         // it ran and exited 0
  bool exited = false;     // it ended by exiting (0 or not), not by memrun's or the kernel's hand
  std::string out, err;    // what it wrote (at most kHelperOutput of each)
  std::string failure;     // when not ok: what happened, in words
  int interrupted_by = 0;  // the signal that interrupted memrun while it ran, or 0
};

// A helper's output is a few sites' stacks: more is no reader's.
constexpr uint64_t kHelperOutput = 16 * MiB;

// How the profiled run runs the test: the profiler that fits its program
// and the wrapped argv, or why none does.
struct Profiling {
  std::string profiler;  // "memray" or "heaptrack"
  std::string python;    // memray's interpreter
  std::vector<std::string> argv;
  std::string why_not;   // what to install or change, when nothing fits
};

// At most `cap` bytes of the file at `path` ("" when there is none); sets
// *more when the file holds more.
std::string read_at_most(const std::string& path, uint64_t cap, bool* more);

/// memrun's environment with the test's `env` over it: what a helper runs with.
std::vector<std::string> helper_env(const TestSpec& t);

// A command line as the explanation keeps it: a pytest case's is memrun's
// whole plugin (python -c), which says nothing.
std::string shortened(const std::string& command);

// The frame a site is shown by: the first in the test's own code. With
// Python frames, a Python one (the interpreter's C frames are no test's
// code); else the first native frame of the program's own module.
size_t where_of(const std::vector<StackFrame>& stack, const std::vector<bool>& library_module);

/// A Python source file's name (".py").
bool python_file(const std::string& file);

// Catches the profiled run's record.
struct Catch : RunObserver {
  std::optional<TestRecord> record;
  void test_done(size_t, const TestRecord& r) override { record = r; }
};

// The helpers of one explanation (memray's reader, heaptrack_print, a
// version probe) run as tests do: each in a group of memrun's own backend,
// under a hard limit and a timeout, in memrun's folder for the test (never
// where the test could have left a module for them to import), with the
// test's environment. A capture too large to read ends its reader,
// never memrun or the machine; a signal to memrun stops it as it stops a
// test, and its group is removed.
class Helpers {
 public:
  Helpers(const PlannedTest& planned, cgroup::Backend& backend, const RunOptions& options, std::string run_dir,
          std::string dir)
      : planned_(planned), backend_(backend), options_(options), run_dir_(std::move(run_dir)), dir_(std::move(dir)) {
    options_.fail_fast = false;
    options_.jobs = 1;
    options_.tick = std::chrono::milliseconds(0);
    options_.budget.reset();
    options_.echo_stdout = options_.echo_stderr = -1;  // memrun exec's echo is the test's output, not a reader's
    options_.max_log = kHelperOutput;
  }

  /// Runs `argv` as the helper `what` ("read", "version": a word for its
  /// group and logs) under `limit` for at most `bound`.
  Ran run(const std::string& what, const std::vector<std::string>& argv, uint64_t limit, std::chrono::seconds bound);

 private:
  const PlannedTest& planned_;
  cgroup::Backend& backend_;
  RunOptions options_;
  std::string run_dir_, dir_;
  int count_ = 0;
};

}  // namespace memrun::explain

// Stage 3: the run. Each planned test runs in a fresh cgroup; its figures
// are read from the kernel before the group is removed, and its verdict is
// decided here.
#pragma once

#include <signal.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cgroup/cgroup.h"
#include "runner/base/units.h"
#include "runner/plan/budget.h"
#include "runner/plan/plan.h"
#include "runner/verdict/record.h"

namespace memrun {

class Clock;
class KernelLog;
class Launcher;

/// Options of a run.
struct RunOptions {
  bool fail_fast = false;  ///< start no test after one that did not pass
  /// Tests in a pid namespace of their own where memrun can make one (see
  /// Command::pid_namespace); off with --host-cgroups.
  bool pid_namespace = true;
  /// How often memory.current is sampled while a test runs; 0: never (no
  /// timeline, no working-set estimate, the kernel peak only).
  std::chrono::milliseconds sample_interval{20};
  int jobs = 1;  ///< tests running at once, at most
  /// With a budget, the sum of the limits of running tests stays within it
  /// (see budget.h); without, only `jobs` bounds them.
  std::optional<Budget> budget;
  bool allow_oversubscribe = false;  ///< run over-budget tests alone instead of refusing them
  /// Seconds per test name from a previous report: with several jobs the
  /// longest start first.
  std::map<std::string, double> timings;
  uint64_t max_log = 64 * MiB;  ///< bytes kept per log; 0: all
  /// On SIGINT/SIGTERM/SIGHUP, how long running tests get between SIGTERM
  /// and SIGKILL; a second signal cuts it short.
  std::chrono::milliseconds grace{5000};
  /// How often RunObserver::tick is called; 0: never.
  std::chrono::milliseconds tick{0};
  /// What prepare_runner_process() (process_setup.h) gave: the tests'
  /// oom_score_adj ("": memrun's own) and RLIMIT_NOFILE ({0, 0}: memrun's
  /// own).
  std::string oom_score_adj;
  rlimit open_files{0, 0};
  /// Seams for unit tests: the loop's clock (null: the steady clock), the
  /// kernel log it reads OOM kills from (null: /dev/kmsg) and what starts
  /// and reaps the tests' processes (null: a RealLauncher, which forks).
  Clock* clock = nullptr;
  KernelLog* kernel_log = nullptr;
  Launcher* launcher = nullptr;
  /// Where the tests' stdout and stderr are also shown as they come (the
  /// logs keep them all the same); -1: nowhere. `memrun exec` sets them.
  int echo_stdout = -1, echo_stderr = -1;
};

/// While it lives, every signal whose default action would end memrun (and
/// that a process may catch) arrives on a signalfd instead, so that running
/// tests are stopped and their groups removed before memrun exits with
/// 128+N: Ctrl-C, Ctrl-\, kill, a lost terminal, timers and resource limits
/// alike. (SIGPIPE is ignored; SIGKILL cannot be caught: what a SIGKILLed
/// run leaves, the next run's gc removes.) Guards nest: the inner one's
/// signalfd takes what comes while both live. Threads started while one
/// lives inherit the block.
class SignalGuard {
 public:
  SignalGuard();
  ~SignalGuard();
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;
  int fd() const { return fd_; }
  /// The next pending signal, or 0.
  int take() const;

 private:
  sigset_t set_, old_;
  int fd_ = -1;
};

/// Everything a run produced, beyond what its observer was told.
struct RunResults {
  std::vector<SetupRecord> setups;
  int interrupted_by = 0;  ///< the signal that stopped the run, or 0
};

/// A running test, as a live view shows it.
struct Progress {
  const PlannedTest* planned = nullptr;
  double elapsed_s = 0;
  uint64_t current = 0;  ///< its usage: the latest sample, or read now when sampling is off
};

/// Told about a run as it goes. Every call comes from the run's loop,
/// between two waits: an observer that blocks holds up every test's
/// sampling and timeout.
class RunObserver {
 public:
  virtual ~RunObserver() = default;
  virtual void setup_done(const SetupRecord&) {}
  /// The record of the plan's `index`-th test, complete: the only moment
  /// its timeline and memory.stat are held (run_plan keeps none of it).
  virtual void test_done(size_t /*index*/, const TestRecord&) {}
  /// Every RunOptions::tick while tests run, with those running.
  virtual void tick(const std::vector<Progress>&) {}
};

/// Runs each spec's setup (unless up to date) one at a time, then the plan's
/// tests, as many at once as `options` admit, in `backend`; one event loop
/// waits on all of them (see run/loop.cc). `observer` hears of each record as
/// soon as it is made, not-run tests included (--fail-fast's never
/// started aside); the results keep no test's: a run of a million tests
/// holds none of theirs.
RunResults run_plan(const Plan& plan, cgroup::Backend& backend, const RunOptions& options,
                    RunObserver& observer);

}  // namespace memrun

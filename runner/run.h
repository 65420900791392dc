// Stage 3: the run. Each planned test runs in a fresh cgroup; its figures
// are read from the kernel before the group is removed, and its verdict is
// decided here.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cgroup/cgroup.h"
#include "runner/budget.h"
#include "runner/kmsg.h"
#include "runner/plan.h"
#include "runner/units.h"

namespace memrun {

/// Memory over time, sampled while a test runs. Bounded: past kMaxPoints it
/// keeps every other point and records half as often, so that memrun's own
/// memory stays flat however long a test runs.
struct Timeline {
  static constexpr size_t kMaxPoints = 2048;
  double interval_s = 0;             ///< time between recorded points
  std::vector<double> t_s;           ///< seconds since the test started
  std::vector<uint64_t> current, anon, file;
  int stride = 1, skipped = 0;       ///< record every stride-th sample
  double peak_t_s = 0;               ///< when the highest sample was taken
  /// Adds a sample (or skips it, per the stride).
  void add(double t, uint64_t cur, uint64_t a, uint64_t f);
};

/// How a test ended.
enum class Outcome {
  pass,         ///< exited 0
  fail,         ///< exited non-zero or was killed by a signal, no OOM kill
  oom,          ///< the kernel OOM-killed a process of its group
  timeout,      ///< memrun killed it at its timeout
  error,        ///< could not start (no cgroup, no executable)
  interrupted,  ///< memrun was interrupted by a signal before it finished
};

/// "pass", "fail", "oom", "timeout", "error", "interrupted".
const char* to_string(Outcome outcome);

/// Everything known about one finished test.
struct Result {
  const PlannedTest* planned = nullptr;
  Outcome outcome = Outcome::error;
  bool passed = false;
  std::string reason;   ///< why it did not pass, or what went wrong
  int exit_code = -1;   ///< when it exited
  int signal = 0;       ///< when a signal ended it
  cgroup::Final kernel; ///< the kernel's figures
  uint64_t limit = 0;   ///< the effective hard limit (spec's or an ancestor's)
  uint64_t peak = 0;    ///< kernel peak, or the sampled one (peak_sampled)
  bool peak_sampled = false;
  /// How many times usage was sampled while the test ran, and the highest
  /// usage a sample saw.
  int samples = 0;
  uint64_t sampled_peak = 0;
  /// Reclaimable page cache at the sample with the highest usage.
  uint64_t reclaimable_at_sampled_peak = 0;
  /// Where the memory was at the highest sample: what an OOM report shows.
  /// Without samples (a test shorter than one interval), the final figures.
  cgroup::Breakdown at_peak;
  /// memory.current and its anon/file split over time.
  Timeline timeline;
  /// The processes the OOM killer chose (from the kernel log, when readable).
  std::vector<OomKill> oom_victims;
  /// What the test could not have given back: the larger of the highest
  /// sampled usage net of reclaimable cache and the kernel peak net of the
  /// cache seen at the highest sample. An estimate, <= peak.
  uint64_t working_set_peak = 0;
  /// Page cache still charged at the end (reclaimable, not a requirement).
  uint64_t page_cache = 0;
  /// "peak" when headroom is limit - peak; "working_set" (an estimate) when
  /// the peak reached the limit but the samples near it were mostly page
  /// cache, which the kernel reclaims instead of killing.
  std::string headroom_basis = "peak";
  int64_t headroom = 0;  ///< bytes; negative when over
  double headroom_pct = 0;
  std::string placement;  ///< "clone3" or "join" (see launch.h)
  /// What memrun could not clean up after the test (its cgroup could not be
  /// removed, say); empty when all went. Never in place of the verdict.
  std::string cleanup_error;
  /// What the test wrote to stdout and stderr, and what the log cap
  /// (RunOptions::max_log) discarded of it.
  uint64_t stdout_bytes = 0, stderr_bytes = 0, log_discarded_bytes = 0;
  double duration_s = 0, cpu_user_s = 0, cpu_system_s = 0;
  std::chrono::system_clock::time_point started, ended;
};

/// Options of a run.
struct RunOptions {
  bool fail_fast = false;  ///< start no test after one that did not pass
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
};

/// What a setup did.
struct SetupResult {
  const PlannedTest* planned = nullptr;
  bool ran = false;     ///< false: its outputs were up to date
  Result result;        ///< when it ran
};

/// Everything a run produced.
struct RunResults {
  std::vector<SetupResult> setups;
  std::vector<Result> tests;  ///< never-started tests are absent (fail-fast)
                              ///< or `interrupted`/`error` with the reason
  int interrupted_by = 0;     ///< the signal that stopped the run, or 0
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
  virtual void setup_done(const SetupResult&) {}
  /// A test's result, complete: the last moment its timeline and
  /// memory.stat are held (run_plan then drops them).
  virtual void test_done(const Result&) {}
  /// Every RunOptions::tick while tests run, with those running.
  virtual void tick(const std::vector<Progress>&) {}
};

/// Runs each spec's setup (unless up to date) one at a time, then the plan's
/// tests, as many at once as `options` admit, in `backend`; one event loop
/// waits on all of them (see run.cc). `observer` hears of each result as
/// soon as it is known, not-run tests included; after that, results keep
/// their figures but not their timeline, memory.stat, events, pressure or
/// OOM victims (see RunObserver). The results are in the plan's order
/// whatever the order they ended in.
RunResults run_plan(const Plan& plan, cgroup::Backend& backend, const RunOptions& options,
                    RunObserver& observer);

/// How many tests can run at once within memrun's open-files limit (each
/// holds up to ten descriptors), once memrun has raised its soft limit to
/// the hard one.
int jobs_within_open_files();

/// True when the setup declares outputs, all exist, and none is older than
/// any of its inputs.
bool setup_up_to_date(const Setup& setup);

/// Decides outcome, verdict and headroom from the raw figures of `r`.
void decide(Result& r, const TestSpec& test);

}  // namespace memrun

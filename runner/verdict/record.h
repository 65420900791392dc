// The record of one test: what its spec asked, what the run observed, and
// the verdict, which is a pure function of the other two. Every output
// works from records: the console, the JSON report, JUnit, Markdown, HTML,
// annotations, `merge`. runner/report/json.cc alone maps them to and from
// the report's JSON.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cgroup/cgroup.h"
#include "runner/base/kernel_log.h"
#include "runner/verdict/explanation.h"

namespace memrun {

struct PlannedTest;
struct TestSpec;

/// Memory over time, sampled while a test runs. Bounded: past kMaxPoints it
/// keeps every other point and records half as often, so that memrun's own
/// memory stays flat however long a test runs.
struct Timeline {
  static constexpr size_t kMaxPoints = 2048;
  double interval_s = 0;             ///< time between samples (before striding)
  std::vector<double> t_s;           ///< seconds since the test started
  std::vector<uint64_t> current, anon, file;
  int stride = 1, skipped = 0;       ///< record every stride-th sample
  double peak_t_s = 0;               ///< when the highest sample was taken
  /// Adds a sample (or skips it, per the stride).
  void add(double t, uint64_t cur, uint64_t a, uint64_t f);
  bool operator==(const Timeline&) const = default;
};

/// A block of a test measured on its own: pytest_memrun's memrun_peak
/// blocks (`with memrun_peak(name=...) as p:`), as the case measured them
/// from its own cgroup's files and said through its tool (see
/// Observation::tool_said, which comes the same way).
struct BlockFigures {
  std::string name;
  /// The kernel's high-water mark over the block less the usage at its
  /// start; the usage after it less that baseline; the baseline.
  uint64_t peak = 0, retained = 0, baseline = 0;
  std::string source;  ///< how: "memory.peak", "memory.max_usage_in_bytes", "sampled every 1 ms"
  bool operator==(const BlockFigures&) const = default;
};

/// How a test ended, as the verdict names it.
enum class Outcome {
  pass,         ///< exited 0
  fail,         ///< exited non-zero or was killed by a signal, no OOM kill
  oom,          ///< the kernel OOM-killed a process of its group
  timeout,      ///< memrun killed it at its timeout
  thrash,       ///< memrun ended it: its working set did not fit, it only refaulted (see Observation)
  error,        ///< could not start (no cgroup, no executable)
  interrupted,  ///< memrun was interrupted by a signal before it finished
  skipped,      ///< the suite's own tool skipped it (pytest skip/xfail, GTEST_SKIP, CTest SKIP_*)
};

/// "pass", "fail", "oom", "timeout", "thrash", "error", "interrupted", "skipped".
const char* to_string(Outcome outcome);
/// The Outcome named `text`, or nullopt.
std::optional<Outcome> outcome_named(const std::string& text);

/// How memrun saw a test end, before any judgement.
enum class Ending {
  exited,        ///< its main process exited (or was killed) on its own
  timed_out,     ///< memrun killed it at its timeout
  thrashed,      ///< memrun killed it: it was thrashing at its limit
  interrupted,   ///< memrun was interrupted while it ran
  not_started,   ///< it could not start, or was refused (see start_error)
  not_run,       ///< memrun was interrupted before its turn came
};

/// What one run of a test observed: made by RunningTest (or by the loop for
/// a test that never started), complete before the verdict is decided, and
/// never changed after.
struct Observation {
  Ending ending = Ending::not_started;
  std::string start_error;  ///< why it did not start (Ending::not_started)
  int exit_code = -1;       ///< when it exited
  int signal = 0;           ///< when a signal ended it
  cgroup::Final kernel;     ///< the kernel's figures, read after the group emptied
  /// Samples of usage while the test ran: how many, the highest, the
  /// reclaimable page cache at that highest sample, and the highest usage
  /// net of reclaimable cache any sample saw.
  int samples = 0;
  uint64_t sampled_peak = 0, reclaimable_at_sampled_peak = 0, sampled_working_set = 0;
  uint64_t sampled_swap_peak = 0;  ///< the most swap a sample saw (Usage::swap)
  /// The highest hard limit a sample read back from the group memrun
  /// limited (Usage::limit); 0 when none was read. Above the limit memrun
  /// set, the test raised it while it ran.
  uint64_t sampled_limit = 0;
  /// The lowest hard limit a sample read back, the group's or a sealed
  /// test's leaf's (Usage::leaf_limit); UINT64_MAX when none was read.
  /// Below the limit memrun set, the test lowered it while it ran.
  uint64_t sampled_lowest_limit = UINT64_MAX;
  /// The cgroup the first process that left the test's group was found in
  /// while the test ran ("" when none did).
  std::string escaped_to;
  /// Where the memory was at the highest sample: what an OOM report shows.
  /// Without samples (a test shorter than one interval), the final figures.
  cgroup::Breakdown at_peak;
  Timeline timeline;                 ///< memory.current and its anon/file split over time
  std::vector<OomKill> oom_victims;  ///< from the kernel log, when readable
  std::string placement;             ///< "clone3" or "join" (see launch/child.h)
  /// Ending::thrashed: what the kernel read back in the window that ended
  /// it (bytes), and the window's length.
  uint64_t thrash_refaulted = 0;
  double thrash_window_s = 0;
  /// ... and how long all its tasks were stalled on memory in it (v2's
  /// memory.pressure `full`); 0 where the kernel keeps no pressure.
  double thrash_stalled_s = 0;
  /// What memrun could not clean up after the test (its cgroup could not be
  /// removed, say); empty when all went. Never in place of the verdict.
  std::string cleanup_error;
  std::string log_error;  ///< a log that could not be written
  /// What the test wrote to stdout and stderr, and what the log cap
  /// discarded of it.
  uint64_t stdout_bytes = 0, stderr_bytes = 0, log_discarded_bytes = 0;
  double duration_s = 0, cpu_user_s = 0, cpu_system_s = 0;
  /// To the millisecond, as the report keeps them.
  std::chrono::system_clock::time_point started, ended;
  /// A suite's case whose tool reads its output (ToolRules): which of the
  /// pass, fail and skip expressions matched it (stdout, then stderr).
  bool pass_matched = false, fail_matched = false, skip_matched = false;
  /// A case whose tool writes its outcome (ToolRules::outcome_file,
  /// gtest_results): what it said, "" when it wrote nothing.
  std::string tool_said;
  /// The blocks the case measured on its own (BlockFigures), as its tool
  /// said them; empty for most tests.
  std::vector<BlockFigures> blocks;
  /// The last lines of stderr, then of stdout, of a test that did not pass
  /// (so that outputs made elsewhere, `memrun merge`, can show them).
  std::string log_tail;
  bool operator==(const Observation&) const = default;
};

/// What a test's headroom is measured against (Verdict::headroom_basis).
enum class HeadroomBasis {
  peak,         ///< the peak: limit - peak
  working_set,  ///< the working-set estimate: the peak was mostly page cache
};
/// "peak", "working_set".
const char* to_string(HeadroomBasis basis);
/// The basis named `text`, or nullopt.
std::optional<HeadroomBasis> headroom_basis_named(const std::string& text);

/// "exited", "timed_out", "thrashed", "interrupted", "not_started", "not_run".
const char* to_string(Ending ending);
/// The Ending named `text`, or nullopt.
std::optional<Ending> ending_named(const std::string& text);

/// The judgement on one observation against its spec.
struct Verdict {
  Outcome outcome = Outcome::error;
  bool passed = false;
  std::string reason;  ///< why it did not pass, or what went wrong
  uint64_t limit = 0;  ///< the effective hard limit (the spec's, or an ancestor's if lower)
  uint64_t peak = 0;   ///< the kernel's peak, or the sampled one (peak_sampled)
  bool peak_sampled = false;
  /// What the test could not have given back: the larger of the highest
  /// sampled usage net of reclaimable cache and the kernel peak net of the
  /// cache seen at the highest sample. An estimate, <= peak.
  uint64_t working_set_peak = 0;
  uint64_t page_cache = 0;  ///< reclaimable page cache still charged at the end
  /// "peak" when headroom is limit - peak; "working_set" (an estimate) when
  /// the peak reached the limit but the samples near it were mostly page
  /// cache, which the kernel reclaims instead of killing.
  HeadroomBasis headroom_basis = HeadroomBasis::peak;
  /// Bytes over the test's allowance, negative when over: the limit less
  /// the peak (or working set); with `swap:` allowed, the limit and the
  /// swap allowed less memory and swap used.
  int64_t headroom = 0;
  double headroom_pct = 0;  ///< of the allowance (limit, plus swap when allowed)
  /// The most of the test's memory in swap at once (the kernel's mark where
  /// it keeps one, 6.5+, else the samples'), and at the end. Swap the spec
  /// did not allow is 0 unless the kernel cannot limit it (no swap
  /// accounting), where it is reported all the same.
  uint64_t swap_peak = 0, swap_at_end = 0;
  /// Skipped because its tool disables it (GoogleTest's DISABLED_, ctest's
  /// DISABLED): never started.
  bool disabled = false;
  /// False when the test got around its limit or was killed by a limit
  /// memrun did not set: its figures measure nothing, and no comparison
  /// takes them, whatever its outcome.
  bool figures_hold = true;
  bool operator==(const Verdict&) const = default;
};

/// What the spec asked of a test, as the outputs name it (a copy: a record
/// outlives the plan, and a merged report has no spec at hand).
struct TestIdentity {
  std::string name, spec;  ///< spec: the file's path as given
  int line = 0;            ///< the test's line in the spec
  std::string command;     ///< as written in the spec
  std::map<std::string, std::string> env;
  std::vector<std::string> tags;
  std::string expected;          ///< Expectation::describe()
  uint64_t requested_limit = 0;  ///< the spec's `memory` (after --scale/--set)
  uint64_t swap_limit = 0;       ///< the spec's `swap`: swap allowed on top
  std::optional<uint64_t> memory_high;
  std::string stdout_path, stderr_path;  ///< log files in the run folder
  /// The spec's `max_increase` (a comparison's threshold), when it has one.
  std::optional<std::pair<double, uint64_t>> max_increase;  ///< percent, bytes
  std::vector<std::string> inputs;  ///< the spec's `inputs` (evicted before each run)
  double timeout_s = 0;             ///< the spec's `timeout`
  /// What its figures are of: "process", the test's whole process tree
  /// from its start (a spec's test, `exec`, a suite's case); "forked_case",
  /// a case pytest forked (pytest --memrun): without the interpreter's
  /// start-up and what pytest had loaded before it forked. A comparison
  /// never takes one for the other.
  std::string measured = "process";
  bool operator==(const TestIdentity&) const = default;
};

/// The figures of one run of a test, as a comparison needs them (--repeat
/// runs a test several times; its record keeps every run's).
struct RunFigures {
  uint64_t peak = 0, working_set_peak = 0;
  Outcome outcome = Outcome::error;
  bool passed = false;
  double duration_s = 0;
  bool figures_hold = true;  ///< as Verdict::figures_hold, for this run
  std::vector<BlockFigures> blocks;  ///< as Observation::blocks, for this run
  bool operator==(const RunFigures&) const = default;
};

/// One test's record: identity, observation, verdict, and the figures of
/// each of its runs (one, unless --repeat).
struct TestRecord {
  TestIdentity test;
  Observation observed;
  Verdict verdict;
  std::vector<RunFigures> runs;
  /// Where its memory went, by a second run under a profiler (verdict/explanation.h).
  std::optional<Explanation> explanation;
  bool operator==(const TestRecord&) const = default;
};

/// The record of a test run several times (--repeat): the runs' figures
/// in order, and the observation and verdict of the run that matters most:
/// the first that did not pass, else the one with the highest peak. The
/// test passes when every run passed.
TestRecord combine_runs(std::vector<TestRecord> runs);

/// The identity of a planned test.
TestIdentity identity_of(const PlannedTest& planned);

/// What a suite's tool said of the case in the results it wrote
/// (ToolRules::gtest_results: GoogleTest's XML; ToolRules::outcome_file:
/// memrun's pytest plugin's one word): "passed", "failed", "skipped" or
/// "none" (listed as run, never started); "" when it said nothing memrun
/// can read (the program ended first). Observation::tool_said.
struct ToolRules;
std::string said_in_results(const ToolRules& rules, const std::string& results, const std::vector<std::string>& argv);

/// Whether `text`, the case's output (stdout, then stderr), matches its
/// tool's expressions (ToolRules::pass_regex...), as ctest matches a test's
/// output: Observation::pass_matched, fail_matched, skip_matched.
void match_output(const ToolRules& rules, const std::string& text, Observation& observed);

/// The record of `planned`'s run: its identity, `observed` and the verdict
/// decide() gives (a lost log is added to the reason: it changes no verdict).
TestRecord make_record(const PlannedTest& planned, Observation observed);

/// What a spec's setup did; `result` when it ran.
struct SetupRecord {
  std::string spec;
  bool ran = false;  ///< false: its outputs were up to date
  std::optional<TestRecord> result;
  bool operator==(const SetupRecord&) const = default;
};

/// Tests passed, failed and skipped among some records (a skipped test,
/// disabled ones among them, neither passed nor failed).
struct Tally {
  size_t total = 0, passed = 0, skipped = 0, disabled = 0;
  size_t failed() const { return total - passed - skipped; }
  void add(const Verdict& v) {
    ++total;
    bool skip = v.outcome == Outcome::skipped && v.passed;
    skipped += skip, disabled += skip && v.disabled, passed += v.passed && !skip;
  }
};

}  // namespace memrun

// Stage 2: the plan. Which tests run, in which order, under which cgroup
// and log names. Pure data: building a plan touches nothing on the host.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runner/spec/spec.h"

namespace re2 {
class RE2;
}

namespace memrun {

/// What the command line selects.
struct Selection {
  std::string filter;             ///< --filter: ECMAScript regex searched in names
  std::vector<std::string> tags;  ///< --tag: a test needs any one of them
  int shard_index = 0;            ///< --shard K/N: K (1-based); 0 without
  int shard_count = 0;            ///< N
  /// Seconds per test name from a previous report (--timings): shards are
  /// balanced by them, longest first.
  std::map<std::string, double> timings;
  /// --repeat: how many times each test runs, each run in a fresh cgroup.
  int repeat = 1;
};

/// The most shards a run may be split into (--shard K/N, a report's shard).
constexpr int kMaxShards = 10000;

/// Parses "K/N" (1 <= K <= N <= kMaxShards). Throws Error(usage) otherwise.
void parse_shard(const std::string& text, Selection* selection);

/// Which shard (0-based) each of `names` belongs to, out of `count`. Without
/// timings: the i-th name in sorted order goes to shard i mod count. With
/// timings: longest first, each to the least loaded shard (a test without a
/// timing counts as the mean of the known ones). Deterministic either way.
std::vector<int> assign_shards(const std::vector<std::string>& names, int count,
                               const std::map<std::string, double>& timings);

/// What --filter and --tag pick of a spec's tests, with what those bring
/// (ctest's fixtures, as ctest -R brings them); --shard aside.
class Selector {
 public:
  /// Throws Error(usage) on a bad --filter regex.
  explicit Selector(const Selection& selection);
  ~Selector();
  /// Whether each of `tests` is picked. `tests` are one spec's, or a batch
  /// of them that holds every test any of them brings (TestSink).
  std::vector<bool> pick(const std::vector<TestSpec>& tests) const;

 private:
  const Selection& selection_;
  std::unique_ptr<re2::RE2> filter_;
};

/// One test to run.
struct PlannedTest {
  const Spec* spec = nullptr;
  const TestSpec* test = nullptr;  ///< for a setup: its command
  std::string group;        ///< cgroup directory name, unique in the run
  std::string stdout_path;  ///< log files in the run folder
  std::string stderr_path;
  /// Which run of the test this is (1-based), of how many (--repeat), and
  /// the plan index of its first run: the runs make one record.
  int run = 1, runs = 1;
  size_t first = 0;
  /// ctest's order (TestSpec::order) as plan indices: the tests that end
  /// before this one starts, and those of them that must not fail.
  std::vector<size_t> after, needs;
};

/// Everything a run needs to know before it starts.
struct Plan {
  std::string run_dir;  ///< folder for logs (and reports by default)
  /// The setups of the specs that have selected tests, in spec order.
  std::vector<PlannedTest> setups;
  std::vector<PlannedTest> tests;
};

/// Selects and names the tests of `specs`. Throws Error(usage) on a bad
/// --filter regex.
Plan make_plan(const std::vector<Spec>& specs, const Selection& selection,
               const std::string& run_dir);

/// A run id: local time, then this process's pid and start time, which
/// identify the run's cgroups as this process's (see cgroup::run_id).
std::string new_run_id();

/// True when the setup declares outputs, all exist, and none is older than
/// any of its inputs: it need not run.
bool setup_up_to_date(const Setup& setup);

}  // namespace memrun

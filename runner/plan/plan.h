// Stage 2: the plan. Which tests run, in which order, under which cgroup
// and log names. Pure data: building a plan touches nothing on the host.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
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
std::vector<int> assign_shards(const std::vector<std::string_view>& names, int count,
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
  /// The same of a spec's tests held compactly.
  std::vector<bool> pick(const CompactTests& tests) const;

 private:
  template <typename Tests>
  std::vector<bool> pick_of(const Tests& tests) const;
  const Selection& selection_;
  std::unique_ptr<re2::RE2> filter_;
};

/// One test to run. A plan of a million holds a million: little each, its
/// test's name and its own names (group, logs) made only when it runs
/// (made_test).
struct PlannedTest {
  const Spec* spec = nullptr;
  /// Its test (for a setup: its command); for a test its spec holds as its
  /// name (CompactTests), that test's template: every field but the name,
  /// argv and command is the test's. made_test() makes it whole.
  const TestSpec* test = nullptr;
  static constexpr uint32_t kWhole = UINT32_MAX;
  /// The test's number in spec->cases when it is held as its name there;
  /// kWhole when `test` is the test.
  uint32_t plain = kWhole;
  /// Which run of the test this is (1-based), of how many (--repeat), and
  /// the plan index of its first run: the runs make one record.
  int run = 1, runs = 1;
  size_t first = 0;
  /// ctest's order (TestSpec::order) as plan indices: the tests that end
  /// before this one starts, and those of them that must not fail. Null
  /// when it waits for none, as almost every test: a plan of a million
  /// holds no empty vectors.
  struct Waits {
    std::vector<size_t> after, needs;
  };
  std::shared_ptr<const Waits> waits;
  /// What a running test, its record and explain read beyond the plan:
  /// its test made whole (when the spec holds it as its name) and its
  /// cgroup directory's name, unique in the run, and its log files.
  struct Made {
    std::optional<TestSpec> test;
    std::string group, stdout_path, stderr_path;
  };
  /// Null until made_test(), or named() (a setup's, explain's, bisect's).
  std::shared_ptr<const Made> made;

  /// The test's name.
  std::string_view name() const { return plain == kWhole ? std::string_view(test->name) : spec->cases.name(plain); }
  /// Names its group and logs; a test held as its name is made whole
  /// first (its argv and command are its own, not the template's).
  void named(std::string group, std::string stdout_path, std::string stderr_path);
  const std::string& group() const { return made->group; }
  const std::string& stdout_path() const { return made->stdout_path; }
  const std::string& stderr_path() const { return made->stderr_path; }
};

/// `p`, the plan's `index`-th test, made to run: its test made whole (the
/// spec's own making, spec/compact.cc) and its group and logs named after
/// its index and name, in `run_dir`. A test made already (or named) is
/// returned as it is. What it makes lives as long as the copy returned.
PlannedTest made_test(const PlannedTest& p, size_t index, const std::string& run_dir);

/// Everything a run needs to know before it starts.
struct Plan {
  std::string run_dir;  ///< folder for logs (and reports by default)
  /// The setups of the specs that have selected tests, in spec order.
  std::vector<PlannedTest> setups;
  std::vector<PlannedTest> tests;
};

/// Selects the tests of `specs`. Throws Error(usage) on a bad --filter
/// regex.
Plan make_plan(const std::vector<Spec>& specs, const Selection& selection,
               const std::string& run_dir);

/// A run id: local time, then this process's pid and start time, which
/// identify the run's cgroups as this process's (see cgroup::run_id).
std::string new_run_id();

/// True when the setup declares outputs, all exist, and none is older than
/// any of its inputs: it need not run.
bool setup_up_to_date(const Setup& setup);

}  // namespace memrun

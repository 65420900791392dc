// A cgroup backend without a kernel, the seam for testing the run's event
// loop (admission under a budget, timeouts, interrupts, verdicts, every
// step of a test's cleanup) in milliseconds, as ninja tests its build loop
// with a fake command runner and a virtual clock. With its launcher
// (RunOptions::launcher), no process runs: the tests' processes are
// FakeLauncher's (fake_launcher.h); limits are only
// recorded, the kernel's figures and how the kernel answers kills and
// removals are what a test scripts, and time is a fake clock (FakeClock)
// that the loop's waits advance. Never a stand-in for the real-kernel
// tests: it proves the loop's logic, not enforcement.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cgroup/cgroup.h"
#include "runner/base/clock.h"
#include "runner/base/kernel_log.h"
#include "fake_launcher.h"

namespace memrun::testing {

/// Time that moves only when the loop waits: a wait with no fd ready jumps
/// to the loop's next deadline, or to the next thing scripted to happen
/// (at()) if that comes first, at once.
class FakeClock : public Clock {
 public:
  time_point now() const override { return now_; }
  int wait(int epoll, int timer, epoll_event* events, int max, time_point until) override;
  void advance(std::chrono::nanoseconds by) { now_ += by; }
  /// `what` happens when the clock reaches `when` (a fake process exits).
  void at(time_point when, std::function<void()> what) { due_.emplace(when, std::move(what)); }

 private:
  time_point now_ = time_point(std::chrono::hours(1));
  std::multimap<time_point, std::function<void()>> due_;
};

/// A kernel log whose OOM kills are scripted, by test name: `victims` are
/// "logged" `delay` after the loop first asks for that test's.
class FakeKernelLog : public KernelLog {
 public:
  struct Kills {
    std::chrono::milliseconds delay{0};
    std::vector<OomKill> victims;
    std::optional<Clock::time_point> asked;
    bool taken = false;
  };
  explicit FakeKernelLog(const Clock& clock) : KernelLog(NoDevice{}), clock_(clock) {}
  std::vector<OomKill> oom_kills(const std::string& group_suffix, const std::set<int>& known,
                                 std::chrono::steady_clock::time_point since) override;
  bool readable() const override { return true; }
  std::map<std::string, Kills> kills;
  int asked = 0;  ///< calls, all tests together

 private:
  const Clock& clock_;
};

class FakeBackend : public cgroup::Backend {
 public:
  /// What the "kernel" reports for one test, by the test's name.
  struct Script {
    cgroup::Usage usage;  ///< every sample
    cgroup::Final final;  ///< at the end (effective_limit and limit_at_end
                          ///< default to the limit memrun set)
    /// Bytes read back per second since the test started, added to
    /// usage.refaulted; and the share of that time all its tasks were
    /// stalled on memory (stalled_us), none where the kernel keeps none.
    double refaulted_per_s = 0;
    std::optional<double> stalled_share;
    /// kill_step says the group is empty at its Nth call (a large process
    /// takes a while to exit).
    int kill_steps = 1;
    /// remove_step says EBUSY for this many calls, or until this long
    /// after its first call, whichever is later.
    int busy_tries = 0;
    std::chrono::milliseconds busy_for{0};
    /// Failures the "kernel" answers with: the group cannot be made, its
    /// limit cannot be written, the kill's write fails.
    bool fail_create = false, fail_limit = false, fail_kill = false;
  };
  /// What happened to one test's group, on the fake clock.
  struct Seen {
    std::vector<Clock::time_point> samples;  ///< each usage() read
    std::optional<Clock::time_point> made, started, first_kill, emptied, first_remove, removed;
    int kill_calls = 0, remove_calls = 0;
  };
  std::map<std::string, Script> scripts;
  std::map<std::string, Seen> seen;
  FakeClock clock;
  /// Every group made, in order: the test's name and its limits.
  std::vector<std::pair<std::string, cgroup::Limits>> created;
  int live_groups = 0;  ///< groups made and not yet removed
  /// Sum of memory_max of the groups holding a test's processes (from
  /// started() until kill_step() says they are gone), and how many: what
  /// the budget bounds. A group made ahead, or one whose processes are
  /// gone and that waits for its removal, can be charged nothing.
  uint64_t running_bytes = 0, most_running_bytes = 0;
  int running_groups = 0, most_running_groups = 0;
  /// The tests whose processes ran at the same time as each test's, by name.
  std::map<std::string, std::set<std::string>> beside;
  std::set<std::string> running_tests;
  /// The loop tests' launcher, which starts no process (bisect's tests,
  /// on the steady clock, start real ones).
  FakeLauncher launcher{clock};

  std::string name() const override { return "fake"; }
  const std::string& run_path() const override { return run_path_; }
  std::unique_ptr<cgroup::Group> create(const std::string& name, const cgroup::Limits& limits) override;
  uint64_t room() const override { return UINT64_MAX; }
  cgroup::Capabilities probe(uint64_t limit) override { return {limit, "", "", "", "", "", "", "", "", "", ""}; }
  void close() override {}

 private:
  std::string run_path_ = "/fake/memrun-run";
};

}  // namespace memrun::testing

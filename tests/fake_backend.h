// A cgroup backend without a kernel, the seam for testing the run's event
// loop (admission under a budget, timeouts, interrupts, verdicts) in
// milliseconds, as ninja tests its build loop with a fake command runner.
// Processes still run (the loop needs real children and pidfds), in the
// test binary's own cgroup; limits are only recorded, and the kernel's
// figures are what a test scripts. Never a stand-in for the real-kernel
// tests: it proves the loop's logic, not enforcement.
#pragma once

#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "cgroup/cgroup.h"

namespace memrun::testing {

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
  };
  std::map<std::string, Script> scripts;
  /// Every group made, in order: the test's name and its limits.
  std::vector<std::pair<std::string, cgroup::Limits>> created;
  int live_groups = 0;  ///< groups made and not yet removed
  /// Sum of memory_max of the groups holding a test's processes (from
  /// started() until kill_step() says they are gone), and how many: what
  /// the budget bounds. A group made ahead, or one whose processes are
  /// gone and that waits for its removal, can be charged nothing.
  uint64_t running_bytes = 0, most_running_bytes = 0;
  int running_groups = 0, most_running_groups = 0;

  std::string name() const override { return "fake"; }
  const std::string& run_path() const override { return run_path_; }
  std::unique_ptr<cgroup::Group> create(const std::string& name, const cgroup::Limits& limits) override;
  uint64_t room() const override { return UINT64_MAX; }
  cgroup::Capabilities probe(uint64_t limit) override { return {limit, "", "", "", "", "", "", "", "", ""}; }
  void close() override {}

 private:
  std::string run_path_ = "/fake/memrun-run";
};

}  // namespace memrun::testing

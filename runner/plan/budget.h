// How many tests may run at once: a job count and a memory budget. memrun
// knows every test's hard limit before it starts, so it can keep the sum of
// the limits of the running tests within what the host can give, and the
// kernel never has to pick a victim outside the tests' own groups.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runner/plan/plan.h"

namespace memrun {

/// The memory budget and where it came from.
struct Budget {
  uint64_t bytes = 0;
  std::string source;  ///< for the console: "--memory-budget", or how the default was found
};

/// The default budget: what memrun may still use (the host's MemAvailable,
/// or less when a cgroup above the run has a lower limit: `room`) minus a
/// reserve of 10% (at least 64 MiB) for the host itself. Pure; the seam for
/// tests.
Budget default_budget(uint64_t mem_available, uint64_t room);

/// MemAvailable from /proc/meminfo in bytes (the kernel's estimate of what
/// can be allocated without swapping, 3.14+); UINT64_MAX when unreadable.
uint64_t mem_available();

/// Which tests may start: at most `jobs` at once and, with a budget, the
/// sum of their limits within it. A test whose limit exceeds the budget is
/// refused, or with `oversubscribe` runs alone.
class Admission {
 public:
  Admission(int jobs, std::optional<Budget> budget, bool oversubscribe);
  /// Why a test of hard limit `limit` can never run here; "" when it can.
  std::string refusal(uint64_t limit) const;
  /// True when a test of `limit` that takes `slots` of -j's (ctest's
  /// PROCESSORS; all of them at most) may start now.
  bool may_start(uint64_t limit, int slots = 1) const;
  /// Every slot is taken: no test may start now.
  bool full() const { return alone_ || running_ >= jobs_; }
  /// Bookkeeping as tests start and end (a test ends here once its
  /// processes are gone, before its group is removed).
  void started(uint64_t limit, int slots = 1);
  void ended(uint64_t limit, int slots = 1);
  /// The sum of the limits of the running tests.
  uint64_t in_use() const { return in_use_; }
  /// How many tests may run at once (-j).
  int jobs() const { return jobs_; }

 private:
  bool oversized(uint64_t limit) const { return budget_ && limit > budget_->bytes; }
  int jobs_;
  std::optional<Budget> budget_;
  bool oversubscribe_;
  uint64_t in_use_ = 0;
  int running_ = 0;  // slots taken
  bool alone_ = false;  // an oversized test is running
};

/// The order in which tests are offered a start. One job: the plan's order.
/// Several: longest first by `timings` (a test without one counts as their
/// mean), then the largest limit first — the hardest to place goes first,
/// as in first-fit decreasing — then the plan's order. Deterministic.
std::vector<size_t> start_order(const std::vector<PlannedTest>& tests, int jobs,
                                const std::map<std::string, double>& timings);

}  // namespace memrun

// Whether a running test thrashes at its limit: it reads back from disk
// what the kernel has just evicted of its own memory, and does little
// else (see run/thrash_watch.cc).
#pragma once

#include <cstdint>
#include <optional>

#include "cgroup/cgroup.h"
#include "runner/base/clock.h"
#include "runner/verdict/record.h"

namespace memrun {

/// Fed each sample of one test. Never reads the group but for its stall.
class ThrashWatch {
 public:
  /// Adds what the sample `u` read back of the test's own memory.
  void count(const cgroup::Usage& u);
  /// After a sample `u` at `now`: true when the test has been thrashing
  /// under its `limit`, then its figures (and Ending::thrashed) are in `o`.
  bool thrashing(const cgroup::Usage& u, Clock::time_point now, uint64_t limit, const cgroup::Group& group,
                 Observation& o);

 private:
  std::optional<Clock::time_point> window_start_;  // of the thrash window, while at the limit
  uint64_t window_refaulted_ = 0;                  // working_refaulted_ when it started
  uint64_t working_refaulted_ = 0;                 // bytes of its own memory read back so far
  uint64_t last_refaulted_ = 0, last_refaulted_anon_ = 0;  // Usage::refaulted(_anon) at the last sample
  std::optional<uint64_t> window_stalled_;         // Group::stalled_us when it started
};

}  // namespace memrun

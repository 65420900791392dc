// A running test's samples of its group's usage: the timeline, the peak
// estimates, and when the next sample comes.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "cgroup/cgroup.h"
#include "runner/base/clock.h"
#include "runner/verdict/record.h"

namespace memrun {

/// Never reads the group itself: the test hands it each sample's usage.
class Sampler {
 public:
  /// Every `interval`; 0: never (the kernel's peak only).
  void set_interval(std::chrono::milliseconds interval) { interval_ = interval; }
  std::chrono::milliseconds interval() const { return interval_; }
  /// The test runs from `t0`: the first sample one interval later.
  void begin(Clock::time_point t0);
  /// No sample any more (the test ended), or none yet (it is starting).
  void stop() { next_ = Clock::time_point::max(); }
  /// A sample at `t` at the latest (a block measured by samples opened).
  void sooner(Clock::time_point t) { next_ = std::min(next_, t); }
  Clock::time_point next() const { return next_; }

  /// The figures of a sample `u`, taken `t` seconds into the test at
  /// `now`, into `o`: the timeline (at its cadence) and the peaks.
  void take(const cgroup::Usage& u, double t, Clock::time_point now, Observation& o);
  /// When the sample after the one at `now` comes: at the interval, but
  /// every 2 ms near the `limit` with page cache in the group, and at
  /// `at_most` while a block is sampled.
  void schedule(const cgroup::Usage& u, uint64_t limit, Clock::time_point now, std::chrono::microseconds at_most);
  /// memory.current as last sampled.
  uint64_t current() const { return current_; }

 private:
  std::chrono::milliseconds interval_{0};
  Clock::time_point next_;
  Clock::time_point next_point_;  // the timeline's next point (samples may come faster near the limit)
  uint64_t current_ = 0;
};

}  // namespace memrun

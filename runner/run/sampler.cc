#include "runner/run/sampler.h"

#include <algorithm>

namespace memrun {

void Sampler::begin(Clock::time_point t0) {
  // A test that ends before its first interval is never sampled: its cost
  // stays a clone, an exec and a wake-up.
  next_ = next_point_ = interval_.count() > 0 ? t0 + interval_ : Clock::time_point::max();
}

void Sampler::take(const cgroup::Usage& u, double t, Clock::time_point now, Observation& o) {
  ++o.samples;
  // The timeline keeps the regular cadence; the samples in between (near
  // the limit, below) only sharpen the peak estimates.
  if (now >= next_point_) {
    o.timeline.add(t, u.current, u.breakdown.anon, u.breakdown.file);
    next_point_ = now + interval_ / 2;
  }
  if (u.current >= o.sampled_peak) {
    o.at_peak = u.breakdown;
    o.reclaimable_at_sampled_peak = u.reclaimable_file;
    o.timeline.peak_t_s = t;
  }
  o.sampled_peak = std::max(o.sampled_peak, u.current);
  // What memrun saw itself: a test may put its limit back (and, on v1,
  // reset the kernel's high-water mark) before it ends; the verdict holds
  // it to these.
  if (u.limit) o.sampled_limit = std::max(o.sampled_limit, *u.limit);
  for (const auto& limit : {u.limit, u.leaf_limit})
    if (limit) o.sampled_lowest_limit = std::min(o.sampled_lowest_limit, *limit);
  o.sampled_swap_peak = std::max(o.sampled_swap_peak, u.swap);
  o.sampled_working_set = std::max(o.sampled_working_set, u.current - std::min(u.current, u.reclaimable_file));
  current_ = u.current;
}

void Sampler::schedule(const cgroup::Usage& u, uint64_t limit, Clock::time_point now,
                       std::chrono::microseconds at_most) {
  // Near the limit with page cache in the group, the kernel reclaims cache
  // to make room for anonymous memory and the usage stays flat at the
  // limit: a burst of anonymous memory then shows only in memory.stat, for
  // as long as it lasts. Samples come every 2 ms there, so that the working
  // set estimate does not miss a burst of a few tens of ms (touching 100 MiB
  // takes that long); elsewhere at the interval.
  bool near_limit = u.current >= limit / 10 * 9 && u.reclaimable_file >= limit / 20;
  auto interval = std::chrono::duration_cast<std::chrono::microseconds>(
      near_limit ? std::min(interval_, std::chrono::milliseconds(2)) : interval_);
  interval = std::min(interval, at_most);
  // Keep the cadence; after a stall (memrun busy elsewhere) start afresh
  // rather than firing a burst of catch-up samples.
  if (interval.count() == 0) {  // sampling is off (--sample-interval 0), and no block samples
    next_ = Clock::time_point::max();
    return;
  }
  next_ += interval;
  if (next_ <= now) next_ = now + interval;
}

}  // namespace memrun

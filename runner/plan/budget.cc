#include "runner/plan/budget.h"

#include <algorithm>
#include <numeric>
#include <sstream>

#include "runner/base/files.h"
#include "runner/base/units.h"

namespace memrun {

Budget default_budget(uint64_t mem_available, uint64_t room) {
  bool by_cgroup = room < mem_available;
  uint64_t may_use = std::min(mem_available, room);
  // The host keeps at least 64 MiB for itself. Below a limited cgroup the
  // reserve is a tenth of its room, whatever its size: memrun's own memory
  // is already charged there, and a fixed 64 MiB would leave nothing under
  // a small parent (48 MiB of room would allow no test at all).
  uint64_t reserve = by_cgroup ? may_use / 10 : std::max<uint64_t>(may_use / 10, 64 * MiB);
  Budget b;
  b.bytes = may_use > reserve ? may_use - reserve : 0;
  b.source = (by_cgroup ? "room below the nearest limited cgroup " : "MemAvailable ") + format_size(may_use) +
             " less a reserve of " + format_size(reserve);
  return b;
}

uint64_t mem_available() {
  std::istringstream in(read_proc("/proc/meminfo"));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    uint64_t kib = 0;
    if (fields >> kib) return kib * 1024;
  }
  return UINT64_MAX;
}

Admission::Admission(int jobs, std::optional<Budget> budget, bool oversubscribe)
    : jobs_(std::max(1, jobs)), budget_(std::move(budget)), oversubscribe_(oversubscribe) {}

std::string Admission::refusal(uint64_t limit) const {
  if (!oversized(limit) || oversubscribe_) return "";
  return "not run: its limit " + format_size(limit) + " exceeds the memory budget " + format_size(budget_->bytes) +
         " (" + budget_->source + "); raise --memory-budget, or pass --allow-oversubscribe to run it alone";
}

bool Admission::may_start(uint64_t limit, int slots) const {
  if (alone_ || running_ + std::min(slots, jobs_) > jobs_) return false;
  // An oversized test (with --allow-oversubscribe) runs only when nothing
  // else does, and nothing starts beside it.
  if (oversized(limit)) return running_ == 0;
  return !budget_ || in_use_ + limit <= budget_->bytes;
}

void Admission::started(uint64_t limit, int slots) {
  running_ += std::min(slots, jobs_);
  in_use_ += limit;
  if (oversized(limit)) alone_ = true;
}

void Admission::ended(uint64_t limit, int slots) {
  running_ -= std::min(slots, jobs_);
  in_use_ -= limit;
  if (oversized(limit)) alone_ = false;
}

std::vector<size_t> start_order(const std::vector<PlannedTest>& tests, int jobs,
                                const std::map<std::string, double>& timings) {
  std::vector<size_t> order(tests.size());
  std::iota(order.begin(), order.end(), 0);
  if (jobs <= 1) return order;
  double mean = 0;
  for (const auto& [name, s] : timings) mean += s / static_cast<double>(timings.size());
  // Each test's seconds, looked up once, not at every comparison of the sort.
  std::vector<double> each(tests.size(), mean);
  if (!timings.empty())
    for (size_t i = 0; i < tests.size(); ++i)
      if (auto it = timings.find(std::string(tests[i].name())); it != timings.end()) each[i] = it->second;
  auto seconds = [&](size_t i) { return each[i]; };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (seconds(a) != seconds(b)) return seconds(a) > seconds(b);
    return tests[a].test->memory > tests[b].test->memory;
  });
  return order;
}

}  // namespace memrun

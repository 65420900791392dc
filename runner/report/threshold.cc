// The comparison's rule and its threshold (threshold.h).
//
// Why the range, not the MAD: the default needs 3 runs a side, and of 3
// runs the median absolute deviation is the smaller of the two gaps: 0
// whenever two runs agree, which hides the third however far it lies. The
// range uses every run, as the rule's ordering (every run beyond every
// run) already does. More runs widen the range a little (the threshold
// grows, never shrinks), while the ordering itself gets far stricter
// (3 runs a side: 1 chance in 20 for equal code; 5: 1 in 252).
//
// Why 3 times it: for equal code with normal noise, 3 runs a side, every
// run of one side beyond every run of the other by more than k times the
// larger range happens in 0.76% of comparisons at k = 1, 0.15% at k = 2,
// 0.045% at k = 3 (simulated, 10^6 pairs): for a pull request of 100 such
// tests, a false alarm in 1 of 7 at k = 2, 1 of 22 at k = 3. A growth must
// then clear about 4 spreads: 5% shows where the runs agree within 1.2%.
// The floor, 2% and 1 MiB, covers noise that comes in steps (a huge page,
// an arena more or less), which a range of 3 runs can miss.
// bench/RESULTS.md measures the rule on the project's own workloads.
#include "runner/report/threshold.h"

#include <fmt/format.h>

#include <algorithm>

namespace memrun {

const char* to_string(ThresholdRule rule) {
  switch (rule) {
    case ThresholdRule::spread: return "spread";
    case ThresholdRule::fixed: return "fixed";
    case ThresholdRule::spec: return "max_increase";
    case ThresholdRule::flag: return "--max-increase";
  }
  return "fixed";
}

namespace {

// A size from a double, saturated: a report's figures reach 2^63 and a
// max_increase 1000%, whose product a uint64_t does not hold.
uint64_t saturated(double bytes) { return bytes >= 0x1p63 ? uint64_t{INT64_MAX} : static_cast<uint64_t>(bytes); }

// The increase `m` allows over a base of `base` bytes (MaxIncrease::for_base, saturated).
uint64_t allowed_by(const MaxIncrease& m, uint64_t base) {
  return std::max(m.bytes, saturated(static_cast<double>(base) * m.percent / 100));
}

uint64_t by_spread(uint64_t spread) { return saturated(kSpreadMultiple * static_cast<double>(spread)); }

uint64_t median(const std::vector<uint64_t>& sorted) {
  size_t n = sorted.size();
  return n % 2 ? sorted[n / 2] : sorted[n / 2 - 1] / 2 + sorted[n / 2] / 2;
}

// A percentage as people write it: "2", "0.2", "4.5", "0.03", "12".
std::string pct_text(double pct) {
  std::string s = fmt::format("{:.{}f}", pct, pct >= 10 ? 0 : pct >= 0.1 ? 1 : 2);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

double pct_of(uint64_t part, uint64_t whole) {
  return whole ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0;
}

// "10%, 1.00 MiB", "5%", "8.00 MiB".
std::string increase_text(const MaxIncrease& m) {
  std::string s = m.percent > 0 ? pct_text(m.percent) + "%" : "";
  if (m.bytes > 0 || s.empty()) s += (s.empty() ? "" : ", ") + format_size(m.bytes);
  return s;
}

std::string runs_text(size_t base, size_t head) {
  if (base == head) return fmt::format("{} run{} a side", base, base == 1 ? "" : "s");
  return fmt::format("{} run{} in base, {} in head", base, base == 1 ? "" : "s", head);
}

}  // namespace

namespace {

// Why `t` is what it is, for a base median of `base` bytes and the runs of each side.
std::string why(const Threshold& t, uint64_t base, size_t base_runs, size_t head_runs) {
  MaxIncrease m{t.percent, t.bytes};
  switch (t.rule) {
    case ThresholdRule::spread: {
      uint64_t spreads = by_spread(t.spread), share = allowed_by({t.percent, 0}, base);
      std::string s = fmt::format("spread {}%: threshold ", pct_text(pct_of(t.spread, base)));
      if (spreads > 0 && spreads >= share && spreads >= t.bytes)
        return s + fmt::format("{}%, {:g}x the spread ({})", pct_text(pct_of(t.allowed, base)), kSpreadMultiple,
                               format_size(t.allowed));
      if (t.bytes > share) return s + format_size(t.allowed);  // a small test: the size floor
      return s + fmt::format("{}% ({})", pct_text(pct_of(t.allowed, base)), format_size(t.allowed));
    }
    case ThresholdRule::fixed:
      return fmt::format("{} (the spread needs {} a side): threshold {} ({})", runs_text(base_runs, head_runs),
                         kSpreadRuns, increase_text(m), format_size(t.allowed));
    case ThresholdRule::spec:
      return fmt::format("the test's max_increase: {} ({})", increase_text(m), format_size(t.allowed));
    case ThresholdRule::flag:
      return fmt::format("--max-increase {} ({})", increase_text(m), format_size(t.allowed));
  }
  return "";
}

// `base` and `head` sorted.
Threshold threshold_for(const std::vector<uint64_t>& base, const std::vector<uint64_t>& head,
                        const std::optional<GivenThreshold>& given) {
  Threshold t;
  uint64_t mid = median(base);
  t.spread = std::max(base.back() - base.front(), head.back() - head.front());
  MaxIncrease m = kFixedDefault;
  if (given) {
    m = given->first, t.rule = given->second;
    t.allowed = allowed_by(m, mid);
  } else if (std::min(base.size(), head.size()) >= kSpreadRuns) {
    m = kFloor, t.rule = ThresholdRule::spread;
    t.allowed = std::max(allowed_by(kFloor, mid), by_spread(t.spread));
  } else {
    t.rule = ThresholdRule::fixed;
    t.allowed = allowed_by(kFixedDefault, mid);
  }
  t.percent = m.percent, t.bytes = m.bytes;
  t.why = why(t, mid, base.size(), head.size());
  return t;
}

}  // namespace

SeriesChange compare_series(std::vector<uint64_t> base, std::vector<uint64_t> head,
                            const std::optional<GivenThreshold>& given) {
  std::sort(base.begin(), base.end());
  std::sort(head.begin(), head.end());
  SeriesChange s;
  s.threshold = threshold_for(base, head, given);
  s.base_lo = base.front(), s.base = median(base), s.base_hi = base.back();
  s.head_lo = head.front(), s.head = median(head), s.head_hi = head.back();
  uint64_t allowed = s.threshold.allowed;
  if (s.head_lo > s.base_hi && s.head_lo - s.base_hi > allowed) s.change = Change::regressed;
  else if (s.base_lo > s.head_hi && s.base_lo - s.head_hi > allowed) s.change = Change::improved;
  else s.change = Change::unchanged;
  return s;
}

}  // namespace memrun

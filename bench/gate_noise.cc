// bench/run gate: how compare's rule judges reports of the same code, as
// measured and with a growth planted in the head (every run's figures of
// every test times 1 + P/100), under the default threshold and the flat
// 10%, 1 MiB. One line per test and judgement, tab-separated:
//   pair plant rule test change figure spread_pct threshold_pct plantable up_pct down_pct floor_pct
// up_pct: how far every head run is above every base run (negative: they
// overlap), down_pct the other way, floor_pct the default's floor (2% or
// 1 MiB), all in % of the base's median: what another multiple of the
// spread would have decided (bench/run's sweep).
// `plantable`: the test is expected to pass and its figure stayed below its
// limit on every run of both sides; a growth of the code would show there
// (a peak at the limit, page cache filling it, or an expected OOM, would
// not: a planted growth there is one the kernel cannot report).
//   gate-noise chain R0 ... RN   pairs Rk (base) with Rk+1 (head), plants 0 3 5 10 20
//   gate-noise all R0 ... Rn             every pair i < j, nothing planted
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "runner/report/compare.h"
#include "runner/report/json.h"
#include "runner/report/threshold.h"

namespace {

using namespace memrun;

ReportData planted(ReportData r, double pct) {
  auto grow = [&](uint64_t& v) { v = static_cast<uint64_t>(static_cast<double>(v) * (1 + pct / 100)); };
  for (auto& t : r.tests) {
    for (auto& run : t.runs) grow(run.peak), grow(run.working_set_peak);
    grow(t.verdict.peak), grow(t.verdict.working_set_peak);
  }
  return r;
}

// Below its limit on every run of the report: what a growth can show in.
bool below_limit(const ReportData& r, const TestChange& c) {
  for (const auto& t : r.tests)
    if (t.test.name == c.name && t.test.spec == c.spec) {
      if (!t.test.expected.empty() && t.test.expected != "pass") return false;
      uint64_t room = t.test.requested_limit / 100;  // within 1% of the limit: pinned there
      for (const auto& run : t.runs)
        if ((c.figure == "peak" ? run.peak : run.working_set_peak) + room >= t.test.requested_limit) return false;
      return true;
    }
  return false;
}

void judge(size_t pair, double plant, const ReportData& base, const ReportData& head) {
  ReportData grown = planted(head, plant);
  for (bool flat : {false, true}) {
    CompareOptions o;
    if (flat) o.threshold = MaxIncrease{10, MiB};
    Comparison c = compare_reports(base, grown, o);
    for (const auto& t : c.tests) {
      double spread = t.base ? 100.0 * static_cast<double>(t.threshold.spread) / static_cast<double>(t.base) : 0;
      auto pct = [&](double bytes) { return t.base ? 100.0 * bytes / static_cast<double>(t.base) : 0; };
      double up = static_cast<double>(t.head_lo) - static_cast<double>(t.base_hi);
      double down = static_cast<double>(t.base_lo) - static_cast<double>(t.head_hi);
      double floor = std::max(static_cast<double>(kFloor.bytes), static_cast<double>(t.base) * kFloor.percent / 100);
      std::printf("%zu\t%g\t%s\t%s\t%s\t%s\t%.3f\t%.3f\t%d\t%.3f\t%.3f\t%.3f\n", pair, plant,
                  flat ? "flat" : "default", t.name.c_str(), to_string(t.change), t.figure.c_str(), spread,
                  pct(static_cast<double>(t.threshold.allowed)), below_limit(base, t) && below_limit(head, t), pct(up),
                  pct(down), pct(floor));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || (std::strcmp(argv[1], "chain") != 0 && std::strcmp(argv[1], "all") != 0)) {
    std::fprintf(stderr, "usage: gate-noise chain|all REPORT REPORT...\n");
    return 2;
  }
  std::vector<ReportData> reports;
  for (int i = 2; i < argc; ++i) reports.push_back(read_report(argv[i]));
  if (std::strcmp(argv[1], "chain") == 0) {
    for (size_t k = 0; k + 1 < reports.size(); ++k)
      for (double plant : {0.0, 3.0, 5.0, 10.0, 20.0}) judge(k, plant, reports[k], reports[k + 1]);
  } else {
    size_t pair = 0;
    for (size_t i = 0; i < reports.size(); ++i)
      for (size_t j = i + 1; j < reports.size(); ++j) judge(pair++, 0, reports[i], reports[j]);
  }
  return 0;
}

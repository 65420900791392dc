#include "runner/report/merge.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "runner/base/error.h"
#include "runner/base/utf8.h"

namespace memrun {
namespace {

std::string shard_name(int k, int n) { return std::to_string(k) + "/" + std::to_string(n); }

// Shards: every index of 1..N exactly once, when the reports are shards.
void check_shards(const std::vector<ReportData>& reports, const std::vector<std::string>& paths) {
  int count = 0;
  std::map<int, std::string> seen;
  for (size_t i = 0; i < reports.size(); ++i) {
    const RunInfo& info = reports[i].info;
    if (info.shard_count == 0) continue;
    int k = info.shard_index, n = info.shard_count;
    if (count && n != count)
      throw Error(Category::bad_input, paths[i] + " is shard " + shard_name(k, n) + ", but other reports are of " +
                                           std::to_string(count) + " shards");
    count = n;
    if (auto [it, fresh] = seen.emplace(k, paths[i]); !fresh)
      throw Error(Category::bad_input, "shard " + shard_name(k, n) + " comes twice: " + it->second + " and " + paths[i]);
  }
  // Named up to ten: a report's count is bounded (kMaxShards), the message too.
  std::string missing;
  int absent = 0;
  for (int k = 1; k <= count; ++k)
    if (!seen.count(k) && ++absent <= 10) missing += (missing.empty() ? "" : ", ") + shard_name(k, count);
  if (absent > 10) missing += fmt::format(" and {} more", absent - 10);
  if (absent)
    throw Error(Category::bad_input, fmt::format("shard {} {} missing: merge the report of every shard", missing,
                                                 absent == 1 ? "is" : "are"));
}

}  // namespace

ReportData merge_reports(std::vector<ReportData> reports, const std::vector<std::string>& paths) {
  if (reports.empty()) throw Error(Category::bad_input, "memrun merge needs at least one report");
  check_shards(reports, paths);
  std::vector<size_t> order(reports.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return reports[a].info.shard_index < reports[b].info.shard_index; });

  ReportData merged;
  merged.info = reports[order[0]].info;
  merged.info.shard_index = merged.info.shard_count = 0;
  merged.info.merged_from.clear();
  std::map<std::string, std::string> where;  // spec:name -> report
  for (size_t i : order) {
    RunInfo& info = reports[i].info;
    merged.info.merged_from.push_back(paths[i]);
    merged.info.started = std::min(merged.info.started, info.started);
    merged.info.ended = std::max(merged.info.ended, info.ended);
    if (!info.interrupted_by.empty()) merged.info.interrupted_by = info.interrupted_by;
    for (auto& s : reports[i].setups) merged.setups.push_back(std::move(s));
    // Each shard compared its own tests with the baseline: the merged
    // report's comparison holds them all.
    if (info.comparison && i != order[0]) {
      if (!merged.info.comparison) {
        merged.info.comparison = std::move(info.comparison);
      } else {
        auto& into = *merged.info.comparison;
        for (auto& t : info.comparison->tests) into.tests.push_back(std::move(t));
        for (auto& w : info.comparison->warnings)
          if (std::find(into.warnings.begin(), into.warnings.end(), w) == into.warnings.end()) into.warnings.push_back(w);
      }
    }
    for (auto& t : reports[i].tests) {
      if (auto [it, fresh] = where.emplace(t.test.spec + ":" + t.test.name, paths[i]); !fresh)
        throw Error(Category::bad_input, "test '" + printable(t.test.name) + "' of " + printable(t.test.spec) + " appears twice: in " +
                                             it->second + " and " + paths[i]);
      merged.tests.push_back(std::move(t));
    }
  }
  return merged;
}

std::map<std::string, double> timings_from(const ReportData& report) {
  std::map<std::string, double> out;
  for (const auto& t : report.tests) out[t.test.name] = t.observed.duration_s;
  return out;
}

bool all_passed(const ReportData& report) {
  return std::all_of(report.tests.begin(), report.tests.end(), [](const TestRecord& t) { return t.verdict.passed; });
}

}  // namespace memrun

// Reports read back: `memrun merge` of shard reports, and the timings that
// balance shards (--timings). Reading and writing is report/json.h's.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "runner/report/json.h"

namespace memrun {

/// Merges shard reports into one report of the whole run: tests in shard
/// order, `shard` unset, `merged_from` the paths. Throws Error(bad_input)
/// naming the problem when a shard is missing, a shard comes twice, the
/// reports disagree on the shard count, or a test appears in two reports.
ReportData merge_reports(std::vector<ReportData> reports, const std::vector<std::string>& paths);

/// Seconds per test name from a report, for --timings.
std::map<std::string, double> timings_from(const ReportData& report);

/// Whether every test of the report passed.
bool all_passed(const ReportData& report);

}  // namespace memrun

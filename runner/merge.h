// Reading JSON reports back: `memrun merge` of shard reports, and the
// timings that balance shards (--timings).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace memrun {

/// Reads a memrun JSON report. Throws Error(kExitUsage) when the file is
/// missing, not JSON, or not a memrun-report/1.
nlohmann::ordered_json read_report(const std::string& path);

/// Merges shard reports into one report of the whole run: tests in shard
/// order, summary recomputed, `shard` null. Throws Error(kExitUsage) naming
/// the problem when a shard is missing, a shard comes twice, the reports
/// disagree on the shard count, or a test appears in two reports.
nlohmann::ordered_json merge_reports(const std::vector<nlohmann::ordered_json>& reports,
                                     const std::vector<std::string>& paths);

/// Seconds per test name from a report, for --timings.
std::map<std::string, double> timings_from(const nlohmann::ordered_json& report);

/// 0 when every test of the report passed, else 1.
int exit_code_of(const nlohmann::ordered_json& report);

}  // namespace memrun

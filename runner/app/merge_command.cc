// memrun merge: the reports of a sharded run's jobs as one, with its CI
// outputs.
#include <fmt/format.h>

#include "runner/app/commands.h"
#include "runner/base/files.h"
#include "runner/report/merge.h"

namespace memrun {

Result merge_command(const std::vector<std::string>& paths, const std::string& output, const CiOutputs& ci) {
  std::vector<ReportData> reports;
  for (const auto& p : paths) reports.push_back(read_report(p));
  ReportData merged = merge_reports(std::move(reports), paths);
  if (!output.empty()) write_atomically(output, report_text(merged));
  write_ci_outputs(merged.info, each_record(merged), ci);
  Tally tally;
  for (const auto& t : merged.tests) tally.add(t.verdict);
  fmt::print("merged {} reports: {} passed, {} failed\n", paths.size(), tally.passed, tally.failed());
  return all_passed(merged) ? Result::passed() : Result::failed();
}

}  // namespace memrun

// memrun merge: the reports of a sharded run's jobs as one, with its CI
// outputs.
#include <fmt/format.h>

#include "cgroup/error.h"
#include "runner/command.h"
#include "runner/files.h"
#include "runner/merge.h"

namespace memrun {

int merge_command(const std::vector<std::string>& paths, const std::string& output, const CiOutputs& ci) {
  std::vector<nlohmann::ordered_json> reports;
  for (const auto& p : paths) reports.push_back(read_report(p));
  auto merged = merge_reports(reports, paths);
  if (!output.empty()) write_atomically(output, merged.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  write_ci_outputs(merged, ci);
  const auto& s = merged["summary"];
  fmt::print("merged {} reports: {} passed, {} failed\n", paths.size(), s["passed"].get<int>(), s["failed"].get<int>());
  return exit_code_of(merged);
}

}  // namespace memrun

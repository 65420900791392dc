// memrun repro: the shell line that reruns one test of a report alone.
#include <fmt/format.h>

#include <re2/re2.h>

#include "runner/error.h"
#include "runner/command.h"
#include "runner/merge.h"

namespace memrun {
int repro_command(const std::string& report_path, const std::string& name, const std::string& spec) {
  ReportData report = read_report(report_path);
  std::vector<const TestIdentity*> found;
  for (const auto& t : report.tests)
    if (t.test.name == name && (spec.empty() || t.test.spec == spec)) found.push_back(&t.test);
  if (found.empty())
    throw Error(kExitUsage, report_path + " has no test named '" + name + "'" + (spec.empty() ? "" : " in " + spec));
  if (found.size() > 1) {
    std::string specs;
    for (const auto* t : found) specs += "\n  " + t->spec;
    throw Error(kExitUsage, "'" + name + "' names a test in several specs of " + report_path + ":" + specs +
                                "\nsay which with --spec SPEC");
  }
  const auto& t = *found[0];
  // Every word is quoted for the shell, and the filter matches the name
  // literally and whole: the line reruns exactly this test, whatever its
  // name, paths or environment hold.
  std::string env;
  for (const auto& [k, v] : t.env) env += shell_quote(k + "=" + v) + " ";
  const std::string& backend = report.info.backend.empty() ? "auto" : report.info.backend;
  fmt::print("cd {} && {}{}memrun {} --filter {} --set {} --backend {}\n", shell_quote(report.info.cwd),
             env.empty() ? "" : "env ", env, shell_quote(t.spec), shell_quote("^" + RE2::QuoteMeta(name) + "$"),
             shell_quote(name + ".memory=" + std::to_string(t.requested_limit)), shell_quote(backend));
  return kExitOk;
}

}  // namespace memrun

// memrun compare BASE HEAD, and the comparison at the end of a run with
// --baseline: the same rule and the same outputs.
#include <fmt/format.h>

#include "runner/command.h"
#include "runner/compare.h"
#include "runner/error.h"
#include "runner/files.h"

namespace memrun {
namespace {

CompareOptions options_of(const Comparing& c) {
  CompareOptions o;
  std::string why;
  auto threshold = parse_max_increase(c.max_increase, &why);
  if (!threshold) throw Error(kExitUsage, "--max-increase: " + why);
  o.threshold = *threshold;
  if (c.gate == "peak") o.gate = Gate::peak;
  else if (c.gate == "working-set") o.gate = Gate::working_set;
  else if (c.gate == "auto") o.gate = Gate::automatic;
  else throw Error(kExitUsage, "--gate '" + c.gate + "' must be auto, peak or working-set");
  return o;
}

// Every output asked for; under GitHub Actions also the annotations and
// the step summary.
int report(const Comparison& c, const Comparing& comparing) {
  fmt::print("{}", comparison_text(c));
  if (!comparing.json.empty()) write_atomically(comparing.json, comparison_json(c));
  if (!comparing.junit.empty()) write_atomically(comparing.junit, comparison_junit(c));
  if (!comparing.markdown.empty()) write_atomically(comparing.markdown, comparison_markdown(c));
  if (under_github_actions()) {
    fmt::print("{}", comparison_annotations(c));
    append_step_summary(comparison_markdown(c));
  }
  return exit_code_of(c);
}

}  // namespace

int compare_command(const std::string& base_path, const std::string& head_path, const Comparing& comparing) {
  CompareOptions o = options_of(comparing);
  Comparison c = compare_reports(read_report(base_path), read_report(head_path), o);
  c.base_name = base_path;
  c.head_name = head_path;
  return report(c, comparing);
}

void check_comparing(const Comparing& comparing) { options_of(comparing); }

Comparison compare_with_baseline(const ReportData& base, const std::string& base_path, const ReportData& head,
                                 const Comparing& comparing) {
  Comparison c = compare_reports(base, head, options_of(comparing));
  c.base_name = base_path;
  c.head_name = "this run";
  return c;
}

}  // namespace memrun

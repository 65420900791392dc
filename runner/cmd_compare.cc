// memrun compare BASE HEAD, and the comparison at the end of a run with
// --baseline: the same rule and the same outputs.
#include <fmt/format.h>

#include <fstream>

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

// Every output asked for, each on its own; under GitHub Actions also the
// annotations and the step summary.
int report(const Comparison& c, const Comparing& comparing, const std::string& markdown_path, bool append_markdown,
           std::FILE* console) {
  fmt::print(console, "\n{}", comparison_text(c));
  if (!comparing.json.empty()) write_atomically(comparing.json, comparison_json(c));
  if (!comparing.junit.empty()) write_atomically(comparing.junit, comparison_junit(c));
  if (!markdown_path.empty()) {
    if (!append_markdown) {
      write_atomically(markdown_path, comparison_markdown(c));
    } else {
      std::ofstream out(markdown_path, std::ios::app);
      out << "\n" << comparison_markdown(c);
      if (!out) throw Error(kExitUsage, "cannot append the comparison to " + markdown_path);
    }
  }
  if (under_github_actions()) {
    fmt::print("{}", comparison_annotations(c));
    append_step_summary("\n" + comparison_markdown(c));
  }
  return exit_code_of(c);
}

}  // namespace

int compare_command(const std::string& base_path, const std::string& head_path, const Comparing& comparing) {
  CompareOptions o = options_of(comparing);
  Comparison c = compare_reports(read_report(base_path), read_report(head_path), o);
  c.base_name = base_path;
  c.head_name = head_path;
  return report(c, comparing, comparing.markdown, false, stdout);
}

void check_comparing(const Comparing& comparing) { options_of(comparing); }

int compare_and_report(const ReportData& base, const std::string& base_path, const ReportData& head,
                       const Comparing& comparing, const std::string& markdown_path, std::FILE* console) {
  Comparison c = compare_reports(base, head, options_of(comparing));
  c.base_name = base_path;
  c.head_name = "this run";
  return report(c, comparing, markdown_path, true, console);
}

}  // namespace memrun

// memrun compare BASE HEAD, and the comparison at the end of a run with
// --baseline: the same rule and the same outputs.
#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>
#include <set>

#include "runner/app/commands.h"
#include "runner/base/error.h"
#include "runner/base/files.h"
#include "runner/report/compare.h"

namespace memrun {
namespace {

CompareOptions options_of(const Comparing& c) {
  CompareOptions o;
  // Not given: the default, which depends on each test's runs (threshold.h).
  if (!c.max_increase.empty()) {
    std::string why;
    auto threshold = parse_max_increase(c.max_increase, &why);
    if (!threshold) throw Error(Category::usage, "--max-increase: " + why);
    o.threshold = *threshold;
  }
  if (c.gate == "peak") o.gate = Gate::peak;
  else if (c.gate == "working-set") o.gate = Gate::working_set;
  else if (c.gate == "auto") o.gate = Gate::automatic;
  else throw Error(Category::usage, "--gate '" + c.gate + "' must be auto, peak or working-set");
  return o;
}

// Every output asked for; under GitHub Actions also the annotations and
// the step summary.
Result report(const Comparison& c, const Comparing& comparing) {
  fmt::print("{}", comparison_text(c));
  if (!comparing.json.empty()) write_atomically(comparing.json, comparison_json(c));
  if (!comparing.junit.empty()) write_atomically(comparing.junit, comparison_junit(c));
  if (!comparing.markdown.empty()) write_atomically(comparing.markdown, comparison_markdown(c));
  if (under_github_actions()) {
    fmt::print("{}", comparison_annotations(c));
    append_step_summary(comparison_markdown(c));
  }
  return gate_fails(c) ? Result::failed() : Result::passed();
}

}  // namespace

Result compare_command(const std::string& base_path, const std::string& head_path, const Comparing& comparing) {
  CompareOptions o = options_of(comparing);
  Comparison c = compare_reports(read_report(base_path), read_report(head_path), o);
  c.base_name = base_path;
  c.head_name = head_path;
  return report(c, comparing);
}

void check_comparing(const Comparing& comparing) { options_of(comparing); }

ReportData baseline_in_scope(const ReportData& base, const std::vector<Spec>& specs, const Plan& plan,
                             const Selection& selection) {
  auto key = [](const std::string& spec, const std::string& name) { return spec + '\n' + name; };
  std::set<std::string> planned, known, spec_paths;
  for (const auto& p : plan.tests) planned.insert(key(p.spec->path, std::string(p.name())));
  for (const auto& spec : specs) {
    spec_paths.insert(spec.path);
    for (const auto& t : spec.tests) known.insert(key(spec.path, t.name));
    for (size_t i = 0; i < spec.cases.size(); ++i) known.insert(key(spec.path, std::string(spec.cases.name(i))));
  }
  RE2::Options options;
  options.set_log_errors(false);
  RE2 filter(selection.filter, options);  // checked by make_plan
  auto selected = [&](const TestIdentity& t) {
    if (!selection.filter.empty() && !RE2::PartialMatch(t.name, filter)) return false;
    return selection.tags.empty() || std::any_of(selection.tags.begin(), selection.tags.end(), [&](const std::string& tag) {
             return std::find(t.tags.begin(), t.tags.end(), tag) != t.tags.end();
           });
  };
  ReportData scoped{base.info, base.setups, {}};
  for (const auto& r : base.tests) {
    std::string k = key(r.test.spec, r.test.name);
    // A test this run did not select (--filter, --tag, another shard), or
    // of a spec it did not load, is not gone: it was not asked for.
    if (planned.count(k)) scoped.tests.push_back(r);
    // A test no longer in its spec is gone if the selection would have
    // taken it; of shards, the first says so (it belongs to none).
    else if (!known.count(k) && spec_paths.count(r.test.spec) && selected(r.test) && selection.shard_index <= 1)
      scoped.tests.push_back(r);
  }
  return scoped;
}

Comparison compare_with_baseline(const ReportData& base, const std::string& base_path, const ReportData& head,
                                 const Comparing& comparing) {
  Comparison c = compare_reports(base, head, options_of(comparing));
  c.base_name = base_path;
  c.head_name = "this run";
  return c;
}

}  // namespace memrun

// Reports for CI systems, made from the JSON report (so that `memrun merge`
// produces them the same way as a single run): JUnit XML for test tabs, a
// Markdown table for step summaries, GitHub Actions annotations.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace memrun {

/// JUnit XML as Jenkins, GitLab and GitHub test reporters read it: a
/// testsuite per spec, a testcase per test with `failure` (a verdict that
/// did not pass) or `error` (could not start, interrupted), the log tail in
/// system-out, and limit, peak and headroom as properties.
std::string junit_xml(const nlohmann::ordered_json& report);

/// A Markdown table: verdict, name, peak, limit, headroom; and a summary line.
std::string markdown_table(const nlohmann::ordered_json& report);

/// One `::error file=SPEC,line=N,title=...::message` line per test that did
/// not pass, for GitHub Actions to show at the test's line in the spec.
std::string github_annotations(const nlohmann::ordered_json& report);

/// Where the CI outputs go; empty paths are not written.
struct CiOutputs {
  std::string junit;     ///< --junit PATH
  std::string markdown;  ///< --markdown PATH
  std::string html;      ///< --html PATH (runner/plot.h)
};

/// True when write_ci_outputs has anything to do: an output was asked for,
/// or memrun runs under GitHub Actions.
bool ci_outputs_wanted(const CiOutputs& outputs);

/// Writes the requested outputs atomically; under GitHub Actions
/// (GITHUB_ACTIONS=true) also prints the annotations to stdout and appends
/// the table to $GITHUB_STEP_SUMMARY.
void write_ci_outputs(const nlohmann::ordered_json& report, const CiOutputs& outputs);

}  // namespace memrun

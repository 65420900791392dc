// Reports for CI systems, made from records (a run's, or a merged report's:
// `memrun merge` produces them the same way as a single run): JUnit XML for
// test tabs, a Markdown table for step summaries, GitHub Actions annotations.
#pragma once

#include <functional>
#include <pugixml.hpp>
#include <string>

#include "runner/base/files.h"

#include "runner/report/compare.h"
#include "runner/report/json.h"

namespace memrun {

/// JUnit XML as Jenkins, GitLab and GitHub test reporters read it: a
/// testsuite per spec, a testcase per test with `failure` (a verdict that
/// did not pass) or `error` (could not start, interrupted), the log tail in
/// system-out, and limit, peak and headroom as properties.
/// Written to `sink` as it is made (what is held does not grow with the
/// tests); with `comparison` (--baseline), its testsuite after the specs'.
void junit_xml(const RunInfo& info, const EachRecord& records, const Sink& sink,
               const Comparison* comparison = nullptr);
std::string junit_xml(const RunInfo& info, const EachRecord& records);

/// A Markdown table: verdict, name, peak, limit, headroom; and a summary line.
/// Written to `sink` row by row.
void markdown_table(const RunInfo& info, const EachRecord& records, const Sink& sink);
std::string markdown_table(const RunInfo& info, const EachRecord& records);

/// One `::error file=SPEC,line=N,title=...::message` line per test that did
/// not pass, for GitHub Actions to show at the test's line in the spec.
std::string github_annotations(const EachRecord& records);
/// Where a test's annotation points: "file=PATH,line=N," with the spec's
/// path relative to GITHUB_WORKSPACE, or "" for a spec outside it.
std::string annotation_place(const std::string& spec, int line);

/// A JUnit document's declaration (UTF-8) and its <testsuites name=NAME> root.
pugi::xml_node junit_root(pugi::xml_document& doc, const char* name);

/// A JUnit document as text.
std::string xml_text(const pugi::xml_document& doc);

/// `text` shown literally in a Markdown table cell: ASCII punctuation as
/// numeric character references (never read as syntax), line breaks as
/// spaces.
std::string markdown_literal(const std::string& text);

/// GitHub's workflow command escaping, of a message and of a property
/// (file=, title=).
/// A test's explanation (verdict/explanation.h) as a collapsible Markdown section;
/// "" without one.
std::string explanation_markdown(const TestRecord& t);
std::string escape_data(const std::string& s);
std::string escape_property(const std::string& s);

/// True under GitHub Actions (GITHUB_ACTIONS=true).
bool under_github_actions();

/// Appends `markdown` to $GITHUB_STEP_SUMMARY, when it is set.
void append_step_summary(const std::string& markdown);
/// The same for what `produce` hands to its sink.
void append_step_summary(const std::function<void(const Sink&)>& produce);

/// Where the CI outputs go; empty paths are not written.
struct CiOutputs {
  std::string junit;     ///< --junit PATH
  std::string markdown;  ///< --markdown PATH
  std::string html;      ///< --html PATH (runner/report/plot.h)
};

/// True when write_ci_outputs has anything to do: an output was asked for,
/// or memrun runs under GitHub Actions.
bool ci_outputs_wanted(const CiOutputs& outputs);

/// Writes the requested outputs atomically; under GitHub Actions
/// (GITHUB_ACTIONS=true) also prints the annotations to stdout and appends
/// the table to $GITHUB_STEP_SUMMARY.
/// With `comparison` (--baseline), each output carries it too: the
/// Markdown table after the run's, a testsuite in the JUnit XML, its
/// annotations.
void write_ci_outputs(const RunInfo& info, const EachRecord& records, const CiOutputs& outputs,
                      const Comparison* comparison = nullptr);

}  // namespace memrun

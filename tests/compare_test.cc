// The comparison rule and its outputs, from reports built in memory; the
// real-kernel counterparts (a real 30% regression, reruns, page cache of a
// declared input) are in compare_run_test.cc.
#include "runner/compare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "runner/units.h"

namespace memrun {
namespace {

// A report of one backend whose tests ran with these peaks (MiB), one
// entry per run.
ReportData report(const std::vector<std::pair<std::string, std::vector<double>>>& tests, uint64_t limit = 256 * MiB) {
  ReportData r;
  r.info.backend = "v1";
  r.info.cgroup_mode = "hybrid";
  r.info.memrun_version = "0.1.0";
  r.info.kernel = "6.1";
  for (const auto& [name, peaks] : tests) {
    TestRecord t;
    t.test.name = name;
    t.test.spec = "specs/s.yaml";
    t.test.line = 4;
    t.test.requested_limit = limit;
    t.verdict.outcome = Outcome::pass;
    t.verdict.passed = true;
    for (double p : peaks) {
      uint64_t bytes = static_cast<uint64_t>(p * MiB);
      t.runs.push_back({bytes, bytes, Outcome::pass, true, 1.0});
      t.verdict.peak = std::max(t.verdict.peak, bytes);
    }
    r.tests.push_back(t);
  }
  return r;
}

const TestChange& named(const Comparison& c, const std::string& name) {
  for (const auto& t : c.tests)
    if (t.name == name) return t;
  throw std::runtime_error("no " + name);
}

TEST(Compare, ThirtyPercentMoreIsARegressionWithItsFigures) {
  auto c = compare_reports(report({{"t", {40}}}), report({{"t", {52}}}), {});
  const auto& t = named(c, "t");
  EXPECT_EQ(t.change, Change::regressed);
  EXPECT_EQ(t.base, 40 * MiB);
  EXPECT_EQ(t.head, 52 * MiB);
  EXPECT_EQ(t.delta(), static_cast<int64_t>(12 * MiB));
  EXPECT_DOUBLE_EQ(t.pct(), 30.0);
  EXPECT_EQ(t.allowed, 4 * MiB);  // 10% of 40 MiB beats 1 MiB
  EXPECT_EQ(exit_code_of(c), 1);
  EXPECT_EQ(c.summary(), "1 regression, 0 improvements, 0 unchanged");
}

TEST(Compare, AChangeWithinTheRunsSpreadIsUnchanged) {
  // Head's median is 12% up, but its lowest run is within the threshold of
  // base's highest: the runs overlap too much to call it.
  auto c = compare_reports(report({{"t", {40, 44, 48}}}), report({{"t", {50, 51, 52}}}), {});
  EXPECT_EQ(named(c, "t").change, Change::unchanged);
  EXPECT_EQ(named(c, "t").base_runs, 3u);
  // Clear of the spread by more than the threshold, it is a regression.
  c = compare_reports(report({{"t", {40, 41, 42}}}), report({{"t", {50, 51, 52}}}), {});
  EXPECT_EQ(named(c, "t").change, Change::regressed);
  c = compare_reports(report({{"t", {50, 51, 52}}}), report({{"t", {40, 41, 42}}}), {});
  EXPECT_EQ(named(c, "t").change, Change::improved);
  EXPECT_EQ(exit_code_of(c), 0);
}

TEST(Compare, TheLargerOfPercentAndSizeWins) {
  // 200 KiB more on a 1 MiB test is 20%, but within the 1 MiB floor.
  auto c = compare_reports(report({{"small", {1}}}), report({{"small", {1.2}}}), {});
  EXPECT_EQ(named(c, "small").change, Change::unchanged);
  CompareOptions strict;
  strict.threshold = {5, 0};
  c = compare_reports(report({{"small", {1}}}), report({{"small", {1.2}}}), strict);
  EXPECT_EQ(named(c, "small").change, Change::regressed);
  // A test's own max_increase wins over the command line's.
  ReportData head = report({{"small", {1.2}}});
  head.tests[0].test.max_increase = std::pair{50.0, uint64_t{0}};
  c = compare_reports(report({{"small", {1}}}), head, strict);
  EXPECT_EQ(named(c, "small").change, Change::unchanged);
}

TEST(Compare, NewGoneAndNotComparable) {
  ReportData base = report({{"kept", {10}}, {"gone", {10}}, {"limit", {10}}, {"broken", {10}}});
  ReportData head = report({{"kept", {10}}, {"new", {10}}, {"limit", {10}}, {"broken", {10}}});
  head.tests[2].test.requested_limit = 512 * MiB;
  head.tests[3].verdict.outcome = Outcome::error;
  auto c = compare_reports(base, head, {});
  EXPECT_EQ(named(c, "kept").change, Change::unchanged);
  EXPECT_EQ(named(c, "new").change, Change::added);
  EXPECT_EQ(named(c, "gone").change, Change::gone);
  EXPECT_EQ(named(c, "limit").change, Change::not_comparable);
  EXPECT_NE(named(c, "limit").note.find("limit changed"), std::string::npos);
  EXPECT_EQ(named(c, "broken").change, Change::not_comparable);
  EXPECT_EQ(exit_code_of(c), 0);
}

TEST(Compare, AnotherBackendIsNeverARegression) {
  ReportData head = report({{"t", {80}}});
  head.info.backend = "v2";
  head.info.cgroup_mode = "unified";
  auto c = compare_reports(report({{"t", {40}}}), head, {});
  EXPECT_EQ(named(c, "t").change, Change::not_comparable);
  EXPECT_NE(named(c, "t").note.find("another backend (v1 hybrid in base, v2 unified in head)"), std::string::npos)
      << named(c, "t").note;
  EXPECT_EQ(exit_code_of(c), 0);
}

TEST(Compare, AnotherMemrunVersionIsSaidInEveryOutput) {
  // Compared all the same, but never silently: the warning comes before
  // the verdicts in the console, the Markdown and the JSON.
  ReportData head = report({{"t", {80}}});
  head.info.memrun_version = "0.2.0";
  head.info.environment.thp = "always";
  auto c = compare_reports(report({{"t", {40}}}), head, {});
  EXPECT_EQ(named(c, "t").change, Change::regressed);
  ASSERT_GE(c.warnings.size(), 2u);
  EXPECT_NE(c.warnings[0].find("memrun version differs (0.1.0 in base, 0.2.0 in head)"), std::string::npos);
  std::string text = comparison_text(c), md = comparison_markdown(c);
  EXPECT_LT(text.find("warning: memrun version differs"), text.find("regressed")) << text;
  EXPECT_LT(md.find("memrun version differs"), md.find("| ❌ regressed")) << md;
  EXPECT_EQ(nlohmann::json::parse(comparison_json(c))["warnings"].size(), c.warnings.size());
}

// The cells of a Markdown table row ("| a | b |" -> 2), `|` inside a cell
// being written as a character reference.
size_t cells(const std::string& row) { return static_cast<size_t>(std::count(row.begin(), row.end(), '|')) - 1; }

TEST(Compare, MarkdownIsASummaryLineThenATableGithubRenders) {
  auto c = compare_reports(report({{"a|b `x`", {40}}, {"same", {10}}, {"old", {5}}}),
                           report({{"a|b `x`", {52}}, {"same", {10}}, {"fresh", {5}}}), {});
  c.base_name = "main.json";
  std::string md = comparison_markdown(c);
  std::vector<std::string> lines;
  for (size_t at = 0, end; at < md.size(); at = end + 1) {
    end = md.find('\n', at);
    if (end == std::string::npos) end = md.size();
    lines.push_back(md.substr(at, end - at));
  }
  // First the summary, as CodSpeed's comment starts.
  EXPECT_EQ(lines[0], "**memrun**: 1 regression, 0 improvements, 1 unchanged, 1 new, 1 gone");
  // A table: a header row, a delimiter row with as many cells, then one
  // row per test with as many cells again, regressions first; a blank line
  // before it, as GitHub needs.
  size_t header = 0;
  while (header < lines.size() && lines[header].rfind("| |", 0) != 0) ++header;
  ASSERT_LT(header + 1, lines.size()) << md;
  EXPECT_EQ(lines[header - 1], "");
  size_t n = cells(lines[header]);
  EXPECT_EQ(n, 7u);
  EXPECT_EQ(cells(lines[header + 1]), n);
  for (const auto& cell : {"---", "---:"}) EXPECT_NE(lines[header + 1].find(cell), std::string::npos);
  ASSERT_EQ(lines.size(), header + 2 + c.tests.size()) << md;  // the table ends the text
  for (size_t i = 0; i < c.tests.size(); ++i) EXPECT_EQ(cells(lines[header + 2 + i]), n) << lines[header + 2 + i];
  EXPECT_NE(lines[header + 2].find("❌ regressed"), std::string::npos) << lines[header + 2];
  EXPECT_NE(lines[header + 2].find("+12.0 MiB (+30.0%)"), std::string::npos) << lines[header + 2];
  EXPECT_EQ(lines[header + 2].find('`'), std::string::npos) << "a backtick of the name reached the table";
}

TEST(Compare, JunitFailsOnlyRegressionsAndAnnotationsPointAtTheSpecLine) {
  auto c = compare_reports(report({{"up", {40}}, {"same", {10}}}), report({{"up", {52}}, {"same", {10}}}), {});
  std::string xml = comparison_junit(c);
  EXPECT_NE(xml.find("failures=\"1\""), std::string::npos) << xml;
  EXPECT_EQ(comparison_annotations(c).rfind("::error file=specs/s.yaml,line=4,title=memrun%3A up regressed::", 0), 0u)
      << comparison_annotations(c);
}

}  // namespace
}  // namespace memrun

// The comparison rule and its outputs, from reports built in memory; the
// real-kernel counterparts (a real 30% regression, reruns, page cache of a
// declared input) are in compare_run_test.cc.
#include "runner/report/compare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>
#include <nlohmann/json.hpp>

#include "runner/base/units.h"
#include "runner/report/ci_outputs.h"
#include "runner/report/json.h"
#include "runner/report/threshold.h"

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
  EXPECT_EQ(t.threshold.allowed, 4 * MiB);  // 10% of 40 MiB beats 1 MiB
  EXPECT_TRUE(gate_fails(c));
  EXPECT_EQ(c.summary(), "1 regression, 0 improvements, 0 unchanged");
}

// An explained record's sites: {file:line of the test's code, bytes, made
// on a thread pool's thread}.
Explanation explained(const std::vector<std::tuple<std::string, int, double, bool>>& sites) {
  Explanation e;
  e.status = "explained";
  e.exit_code = 0;  // the profiled run ended by exiting
  for (const auto& [file, line, mib, pool] : sites) {
    AllocationSite s;
    s.bytes = static_cast<uint64_t>(mib * MiB);
    s.stack = {{"malloc", "", 0, true}, {"<module>", file, line, false}};
    s.where = 1;
    s.code = "df = pl.read_parquet(path, columns=[\"<c0>\"])";
    if (pool) s.served_from = 1;
    e.sites.push_back(s);
  }
  return e;
}

TEST(Compare, ExplainedRunsNameTheLineWhoseMemoryGrewWithBothSidesBytes) {
  // As the Polars regression: base's own 100 MiB and a pool's 20 MiB at one
  // line; head's pool 300 MiB at it. An installed package's line and a
  // change within max_increase are no test's line that grew.
  auto base = report({{"read", {40}}}), head = report({{"read", {270}}});
  base.tests[0].explanation =
      explained({{"t/read.py", 9, 100, false}, {"t/read.py", 9, 20, true}, {"/v/site-packages/pl/x.py", 1, 1, false},
                 {"t/read.py", 7, 1, false}});
  head.tests[0].explanation = explained({{"t/read.py", 9, 300, true}, {"t/read.py", 7, 2, false}});
  auto c = compare_reports(base, head, {});
  const auto& t = named(c, "read");
  ASSERT_EQ(t.change, Change::regressed);
  ASSERT_EQ(t.where.size(), 1u);
  EXPECT_EQ(t.where[0].base, 120 * MiB);
  EXPECT_EQ(t.where[0].head, 300 * MiB);
  EXPECT_EQ(t.where[0].where, "<module> (t/read.py:9): df = pl.read_parquet(path, columns=[\"<c0>\"])");
  EXPECT_NE(comparison_text(c).find("where (explained): 120.0 MiB -> 300.0 MiB  <module> (t/read.py:9): df = "),
            std::string::npos)
      << comparison_text(c);
  std::string md = comparison_markdown(c);
  EXPECT_NE(md.find("120.0 MiB → 300.0 MiB"), std::string::npos) << md;
  EXPECT_EQ(md.find("<c0>"), std::string::npos) << "the line's text is escaped in markup";
  // The comparison a report carries keeps it.
  auto back = comparison_from_json(nlohmann::ordered_json::parse(comparison_json(c)), "c.json");
  EXPECT_EQ(named(back, "read").where, t.where);
  // A profiled run killed (its profile cut short), a side that failed, a
  // side not explained: nothing to say where.
  head.tests[0].explanation->exit_code = -1;
  EXPECT_TRUE(named(compare_reports(base, head, {}), "read").where.empty());
  head.tests[0].explanation->exit_code = 0;
  head.tests[0].runs[0].outcome = Outcome::fail;
  head.tests[0].runs[0].passed = false;
  ASSERT_EQ(named(compare_reports(base, head, {}), "read").change, Change::failed_in_head);
  EXPECT_TRUE(named(compare_reports(base, head, {}), "read").where.empty());
  head.tests[0].explanation.reset();
  EXPECT_TRUE(named(compare_reports(base, head, {}), "read").where.empty());
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
  EXPECT_FALSE(gate_fails(c));
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
  ReportData base = report({{"kept", {10}}, {"gone", {10}}, {"limit", {10}}});
  ReportData head = report({{"kept", {10}}, {"new", {10}}, {"limit", {10}}});
  head.tests[2].test.requested_limit = 512 * MiB;
  auto c = compare_reports(base, head, {});
  EXPECT_EQ(named(c, "kept").change, Change::unchanged);
  EXPECT_EQ(named(c, "new").change, Change::added);
  EXPECT_EQ(named(c, "gone").change, Change::gone);
  EXPECT_EQ(named(c, "limit").change, Change::not_comparable);
  EXPECT_NE(named(c, "limit").note.find("limit changed"), std::string::npos);
  EXPECT_FALSE(gate_fails(c));
}

// Marks every run of test `i` of `r` as ending with `outcome`, at `peak` MiB
// (a crash's or a kill's peak is where it stopped).
void ended(ReportData& r, size_t i, Outcome outcome, double peak, const std::string& reason = "expected pass, got it") {
  TestRecord& t = r.tests[i];
  for (auto& run : t.runs) run = {static_cast<uint64_t>(peak * MiB), static_cast<uint64_t>(peak * MiB), outcome, false, 1};
  t.verdict.outcome = outcome;
  t.verdict.passed = false;
  t.verdict.reason = reason;
}

TEST(Compare, ACrashInHeadIsNeverAnImprovementAndFailsTheGate) {
  // The case: head's three runs all died of a panic early, at a
  // quarter of base's peak.
  ReportData base = report({{"sort", {600, 601, 602}}});
  ReportData head = report({{"sort", {125, 126, 127}}});
  ended(head, 0, Outcome::fail, 125, "expected pass, got fail (killed by signal 6)");
  auto c = compare_reports(base, head, {});
  const auto& t = named(c, "sort");
  EXPECT_EQ(t.change, Change::failed_in_head);
  EXPECT_EQ(t.head_outcomes, "fail 3/3");
  EXPECT_EQ(t.base_outcomes, "pass 3/3");
  EXPECT_EQ(t.reason, "expected pass, got fail (killed by signal 6)");
  EXPECT_TRUE(gate_fails(c));
  EXPECT_EQ(c.summary(), "1 failed in head, 0 regressions, 0 improvements, 0 unchanged");
  // Every output says so, and none calls it a change of figures.
  std::string text = comparison_text(c), md = comparison_markdown(c), junit = comparison_junit(c);
  EXPECT_EQ(text.find("improved"), std::string::npos) << text;
  EXPECT_NE(text.find("failed in head"), std::string::npos) << text;
  EXPECT_NE(text.find("fail 3/3"), std::string::npos) << text;
  EXPECT_NE(text.find("killed by signal 6"), std::string::npos) << text;
  EXPECT_NE(md.find("❌ failed in head"), std::string::npos) << md;
  EXPECT_NE(md.find("fail 3&#47;3"), std::string::npos) << md;
  EXPECT_EQ(md.find("-474"), std::string::npos) << md;
  EXPECT_NE(junit.find("failures=\"1\""), std::string::npos) << junit;
  EXPECT_NE(junit.find("type=\"failed in head\""), std::string::npos) << junit;
  EXPECT_EQ(comparison_annotations(c).rfind("::error file=specs/s.yaml,line=4,title=memrun%3A sort failed in head::", 0), 0u)
      << comparison_annotations(c);
  auto j = nlohmann::json::parse(comparison_json(c));
  EXPECT_EQ(j["tests"][0]["change"], "failed in head");
  EXPECT_EQ(j["tests"][0]["head_outcomes"], "fail 3/3");
  EXPECT_TRUE(j["tests"][0]["change_bytes"].is_null());
  EXPECT_TRUE(j["tests"][0]["head_bytes"].is_null());
  EXPECT_EQ(j["summary"]["failed_in_head"], 1);
}

TEST(Compare, AnOomInHeadIsFailedNotRegressedAndOneBadRunIsEnough) {
  ReportData base = report({{"join", {100, 100, 100}}, {"flaky", {50, 50, 50}}});
  ReportData head = report({{"join", {141, 141, 141}}, {"flaky", {50, 50, 50}}});
  ended(head, 0, Outcome::oom, 141, "expected pass, got oom at 256.0 MiB");
  head.tests[1].runs[2] = {60 * MiB, 60 * MiB, Outcome::timeout, false, 1};
  auto c = compare_reports(base, head, {});
  EXPECT_EQ(named(c, "join").change, Change::failed_in_head);
  EXPECT_EQ(named(c, "join").head_outcomes, "oom 3/3");
  EXPECT_EQ(named(c, "flaky").change, Change::failed_in_head);
  EXPECT_EQ(named(c, "flaky").head_outcomes, "pass 2/3, timeout 1/3");
  EXPECT_TRUE(gate_fails(c));
}

TEST(Compare, BothSidesFailingIsSaidAndFailsTheGate) {
  ReportData base = report({{"t", {64}}});
  ReportData head = report({{"t", {64}}});
  ended(base, 0, Outcome::oom, 64);
  ended(head, 0, Outcome::thrash, 64);
  auto c = compare_reports(base, head, {});
  const auto& t = named(c, "t");
  EXPECT_EQ(t.change, Change::failed_in_both);
  EXPECT_NE(t.note.find("thrash 1/1 in head, and oom 1/1 in base"), std::string::npos) << t.note;
  std::string text = comparison_text(c);
  EXPECT_EQ(text.find("unchanged  "), std::string::npos) << text;
  EXPECT_EQ(text.find("+0 B"), std::string::npos) << text;
  EXPECT_TRUE(gate_fails(c));
}

TEST(Compare, AFailedBaseIsNotAMeasurementEither) {
  // Base's runs panicked (a low peak); head is fine: not `unchanged +16%`.
  ReportData base = report({{"t", {100}}, {"broken", {10}}});
  ReportData head = report({{"t", {116}}, {"broken", {10}}});
  ended(base, 0, Outcome::fail, 100);
  head.tests[1].runs[0].outcome = head.tests[1].verdict.outcome = Outcome::error;
  head.tests[1].runs[0].passed = head.tests[1].verdict.passed = false;
  auto c = compare_reports(base, head, {});
  EXPECT_EQ(named(c, "t").change, Change::failed_in_base);
  EXPECT_EQ(named(c, "broken").change, Change::failed_in_head);
  EXPECT_EQ(named(c, "broken").head_outcomes, "error 1/1");
}

TEST(Compare, AnExpectedOomIsAMeasurementAndAPassIsNot) {
  // `expect: oom`: an OOM kill is what the test is for; a pass is the failure.
  ReportData base = report({{"t", {64}}, {"u", {64}}});
  ReportData head = report({{"t", {64}}, {"u", {40}}});
  for (auto* r : {&base, &head})
    for (auto& t : r->tests) {
      t.test.expected = "oom";
      for (auto& run : t.runs) run.outcome = Outcome::oom;
      t.verdict.outcome = Outcome::oom;
    }
  head.tests[1].runs[0].outcome = head.tests[1].verdict.outcome = Outcome::pass;
  head.tests[1].runs[0].passed = head.tests[1].verdict.passed = false;
  auto c = compare_reports(base, head, {});
  EXPECT_EQ(named(c, "t").change, Change::unchanged);
  EXPECT_EQ(named(c, "u").change, Change::failed_in_head);
  EXPECT_EQ(named(c, "u").head_outcomes, "pass 1/1");
}

TEST(Compare, ARunWhoseFiguresDoNotHoldIsNoMeasurementWhicheverRunTheRecordKeeps) {
  // --repeat 3: the record keeps the first run that did not pass (a
  // headroom failure, a measurement); the third got around its limit (its
  // peak a lie) and ended `pass`. Each run says whether its figures hold.
  ReportData base = report({{"t", {100, 100, 100}}, {"o", {64, 64, 64}}});
  ReportData head = report({{"t", {100, 100, 100}}, {"o", {64, 64, 64}}});
  TestRecord& t = head.tests[0];
  t.runs[0].passed = t.verdict.passed = false;
  t.verdict.reason = "headroom 10 MiB is below min_headroom 20 MiB";
  t.runs[2] = {2 * MiB, 2 * MiB, Outcome::pass, false, 1, false};
  // `expect: oom`, and one run killed far below its limit by one it lowered.
  for (auto* r : {&base, &head}) {
    TestRecord& o = r->tests[1];
    o.test.expected = "oom";
    for (auto& run : o.runs) run.outcome = Outcome::oom;
    o.verdict.outcome = Outcome::oom;
    o.observed.kernel.oom_kills = 1;
  }
  head.tests[1].runs[1] = {8 * MiB, 8 * MiB, Outcome::oom, false, 1, false};
  // The record's verdict is its first run that did not pass (combine_runs).
  head.tests[1].verdict.passed = false, head.tests[1].verdict.peak = 8 * MiB;
  auto c = compare_reports(base, head, {});
  EXPECT_EQ(named(c, "t").change, Change::failed_in_head);
  EXPECT_EQ(named(c, "o").change, Change::failed_in_head);
  EXPECT_TRUE(gate_fails(c));
  // The flag comes back from the report's JSON, run by run.
  auto again = parse_report(report_text(head), "head.json");
  EXPECT_FALSE(again.tests[0].runs[2].figures_hold);
  EXPECT_TRUE(again.tests[0].runs[0].figures_hold);
  EXPECT_EQ(named(compare_reports(base, again, {}), "t").change, Change::failed_in_head);
}

TEST(Compare, ARecordThatContradictsItsRunsIsNeverAMeasurement) {
  // A head record that says it was OOM-killed, whose one run says it
  // passed at 1 MiB: it was `improved`, exit 0. The record and its runs
  // are one thing; where they disagree, neither is a measurement.
  ReportData base = report({{"t", {40}}, {"u", {40, 40, 40}}, {"v", {40}}});
  ReportData head = report({{"t", {1}}, {"u", {1, 1, 1}}, {"v", {1}}});
  for (size_t i : {0, 1}) {
    TestRecord& r = head.tests[i];
    r.verdict.outcome = Outcome::oom;
    r.verdict.passed = false;
    r.verdict.reason = "expected pass, got oom";
    r.observed.kernel.oom_kills = 1;
  }
  // One whose figures do not hold, though its runs' do.
  head.tests[2].verdict.figures_hold = false;
  auto c = compare_reports(base, head, {});
  EXPECT_EQ(named(c, "t").change, Change::failed_in_head);
  EXPECT_EQ(named(c, "t").head_outcomes, "pass 1/1 (the record says oom)");
  EXPECT_EQ(named(c, "u").change, Change::failed_in_head);
  EXPECT_EQ(named(c, "v").change, Change::failed_in_head);
  EXPECT_EQ(c.count(Change::improved), 0u);
  EXPECT_TRUE(gate_fails(c));
  // The same in base: never a regression of head.
  c = compare_reports(head, base, {});
  EXPECT_EQ(named(c, "t").change, Change::failed_in_base);
  EXPECT_EQ(c.count(Change::regressed), 0u);
}

TEST(Compare, ALimitChangeSaysBothLimitsAsTheyDiffer) {
  // One byte apart: "32.0 MiB in base, 32.0 MiB in head" said nothing.
  auto c = compare_reports(report({{"t", {10}}}, 32 * MiB), report({{"t", {66.7}}}, 32 * MiB + 1), {});
  const auto& t = named(c, "t");
  EXPECT_EQ(t.change, Change::not_comparable);
  EXPECT_NE(t.note.find("its limit changed (32.0 MiB (33554432 bytes) in base, 32.0 MiB (33554433 bytes) in head)"),
            std::string::npos) << t.note;
  EXPECT_EQ(comparison_text(c).find("32.0 MiB in base, 32.0 MiB in head"), std::string::npos) << comparison_text(c);
  c = compare_reports(report({{"t", {10}}}, 32 * MiB), report({{"t", {10}}}, 48 * MiB), {});
  EXPECT_NE(named(c, "t").note.find("its limit changed (32.0 MiB in base, 48.0 MiB in head)"), std::string::npos)
      << named(c, "t").note;
}

TEST(Compare, AChangedExpectationIsNotComparable) {
  // An expected OOM's peak is its limit: against a pass's peak it measures
  // nothing of the code.
  ReportData base = report({{"t", {64}}, {"old", {10}}}), head = report({{"t", {20}}, {"old", {10}}});
  base.tests[0].test.expected = "oom";
  base.tests[0].runs[0].outcome = base.tests[0].verdict.outcome = Outcome::oom;
  head.tests[0].test.expected = "pass";
  base.tests[1].test.expected = "";  // a report older than the field expected a pass
  head.tests[1].test.expected = "pass";
  auto c = compare_reports(base, head, {});
  EXPECT_EQ(named(c, "t").change, Change::not_comparable);
  EXPECT_NE(named(c, "t").note.find("its expectation changed (expect oom in base, pass in head)"), std::string::npos)
      << named(c, "t").note;
  EXPECT_EQ(named(c, "old").change, Change::unchanged);
}

TEST(Compare, ASkippedSideIsSkippedNeverRegressed) {
  // pytest skipped the case in base (a tiny peak); head ran it.
  ReportData base = report({{"t", {1}}, {"new-skip", {1}}});
  ReportData head = report({{"t", {3.65}}, {"new-skip", {1}}, {"fresh", {1}}});
  base.tests[0].runs[0].outcome = base.tests[0].verdict.outcome = Outcome::skipped;
  head.tests[1].runs[0].outcome = head.tests[1].verdict.outcome = Outcome::skipped;
  head.tests[2].runs[0].outcome = head.tests[2].verdict.outcome = Outcome::skipped;
  auto c = compare_reports(base, head, {});
  EXPECT_EQ(named(c, "t").change, Change::skipped);
  EXPECT_NE(named(c, "t").note.find("skipped 1/1 in base"), std::string::npos) << named(c, "t").note;
  EXPECT_EQ(named(c, "new-skip").change, Change::skipped);
  EXPECT_EQ(named(c, "fresh").change, Change::skipped);
  EXPECT_FALSE(gate_fails(c));
  EXPECT_NE(comparison_junit(c).find("<skipped"), std::string::npos) << comparison_junit(c);
  EXPECT_EQ(comparison_text(c).find("regressed"), std::string::npos) << comparison_text(c);
}

TEST(Compare, ANewTestThatFailsFailsTheGate) {
  ReportData head = report({{"kept", {10}}, {"new", {10}}});
  ended(head, 1, Outcome::oom, 10);
  auto c = compare_reports(report({{"kept", {10}}}), head, {});
  EXPECT_EQ(named(c, "new").change, Change::failed_in_head);
  EXPECT_NE(named(c, "new").note.find("new"), std::string::npos);
  EXPECT_TRUE(gate_fails(c));
}

TEST(Compare, AFailureOnAnotherBackendIsStillAFailure) {
  ReportData head = report({{"t", {80}}});
  head.info.backend = "v2";
  ended(head, 0, Outcome::oom, 80);
  auto c = compare_reports(report({{"t", {40}}}), head, {});
  EXPECT_EQ(named(c, "t").change, Change::failed_in_head);
  EXPECT_TRUE(gate_fails(c));
}

TEST(Compare, AnotherBackendIsNeverARegression) {
  ReportData head = report({{"t", {80}}});
  head.info.backend = "v2";
  head.info.cgroup_mode = "unified";
  auto c = compare_reports(report({{"t", {40}}}), head, {});
  EXPECT_EQ(named(c, "t").change, Change::not_comparable);
  EXPECT_NE(named(c, "t").note.find("another backend (v1 hybrid in base, v2 unified in head)"), std::string::npos)
      << named(c, "t").note;
  EXPECT_FALSE(gate_fails(c));
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
  EXPECT_EQ(n, 8u);
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

// The threshold (issue 49): with 3 runs a side or more, from the runs'
// own spread; with fewer, 10%, 1 MiB; a test's max_increase, else
// --max-increase, over either.

TEST(Compare, ARealGrowthOfEightPercentWithATinySpreadIsARegressionAndSaysWhy) {
  // The case: a Polars query, 3 runs a side, 0.2% spread, +8.7%:
  // `unchanged` under a flat 10%.
  auto base = report({{"q", {879.9, 880.0, 880.1}}}), head = report({{"q", {956.2, 956.8, 957.8}}});
  auto c = compare_reports(base, head, {});
  const auto& t = named(c, "q");
  EXPECT_EQ(t.change, Change::regressed);
  EXPECT_EQ(t.threshold.rule, ThresholdRule::spread);
  EXPECT_EQ(t.threshold.spread, static_cast<uint64_t>(957.8 * MiB) - static_cast<uint64_t>(956.2 * MiB));
  EXPECT_EQ(t.threshold.allowed, static_cast<uint64_t>(880.0 * MiB * 0.02));  // the 2% floor beats 3 spreads
  EXPECT_EQ(t.threshold.why, "spread 0.2%: threshold 2% (17.6 MiB)");
  // The flat rule of one run a side, given explicitly, calls it unchanged.
  CompareOptions flat;
  flat.threshold = MaxIncrease{10, MiB};
  EXPECT_EQ(named(compare_reports(base, head, flat), "q").change, Change::unchanged);
}

TEST(Compare, FivePercentWithASpreadUnderOnePercentIsRegressedAndThreeWithFourIsNot) {
  // +5% where every side's runs lie within 0.9%: the spread's threshold
  // (3 x 0.95 MiB) and the floor (2 MiB) are both below the 4.1 MiB gap.
  auto c = compare_reports(report({{"t", {100, 100.5, 100.9}}}), report({{"t", {105, 105.5, 105.95}}}), {});
  EXPECT_EQ(named(c, "t").change, Change::regressed);
  EXPECT_EQ(named(c, "t").threshold.why, "spread 0.9%: threshold 2.8%, 3x the spread (2.85 MiB)");
  // +3% where the runs spread over 4%: unchanged, and it says at what.
  c = compare_reports(report({{"t", {100, 102, 104}}}), report({{"t", {103, 105, 107.1}}}), {});
  const auto& t = named(c, "t");
  EXPECT_EQ(t.change, Change::unchanged);
  EXPECT_EQ(t.threshold.why, "spread 4%: threshold 12%, 3x the spread (12.3 MiB)");
  // Clear of the runs but within 3 spreads: still unchanged.
  c = compare_reports(report({{"t", {100, 102, 104}}}), report({{"t", {110, 112, 114}}}), {});
  EXPECT_EQ(named(c, "t").change, Change::unchanged);
  c = compare_reports(report({{"t", {100, 102, 104}}}), report({{"t", {117, 119, 121}}}), {});
  EXPECT_EQ(named(c, "t").change, Change::regressed);
}

TEST(Compare, ImprovementsAreHeldToTheSameThreshold) {
  auto c = compare_reports(report({{"t", {105, 105.5, 105.95}}}), report({{"t", {100, 100.5, 100.9}}}), {});
  EXPECT_EQ(named(c, "t").change, Change::improved);
  EXPECT_EQ(named(c, "t").threshold.rule, ThresholdRule::spread);
  c = compare_reports(report({{"t", {103, 105, 107.1}}}), report({{"t", {100, 102, 104}}}), {});
  EXPECT_EQ(named(c, "t").change, Change::unchanged);
}

TEST(Compare, ASmallTestKeepsTheOneMebibyteFloor) {
  // +5% of 10 MiB is half a MiB: within the floor's 1 MiB.
  auto c = compare_reports(report({{"t", {10, 10.01, 10.02}}}), report({{"t", {10.5, 10.51, 10.52}}}), {});
  EXPECT_EQ(named(c, "t").change, Change::unchanged);
  EXPECT_EQ(named(c, "t").threshold.why, "spread 0.2%: threshold 1.00 MiB");
}

TEST(Compare, FewerThanThreeRunsASideKeepTenPercent) {
  // One run a side, as before the spread: 8.75% is unchanged, 11.25% is not.
  auto c = compare_reports(report({{"t", {40}}}), report({{"t", {43.5}}}), {});
  EXPECT_EQ(named(c, "t").change, Change::unchanged);
  EXPECT_EQ(named(c, "t").threshold.rule, ThresholdRule::fixed);
  EXPECT_EQ(named(c, "t").threshold.allowed, 4 * MiB);
  EXPECT_EQ(named(c, "t").threshold.why, "1 run a side (the spread needs 3 a side): threshold 10%, 1.00 MiB (4.00 MiB)");
  EXPECT_EQ(named(compare_reports(report({{"t", {40}}}), report({{"t", {44.5}}}), {}), "t").change, Change::regressed);
  // Three runs on one side only: still the fixed rule.
  c = compare_reports(report({{"t", {40, 40, 40}}}), report({{"t", {42, 42}}}), {});
  EXPECT_EQ(named(c, "t").change, Change::unchanged);
  EXPECT_EQ(named(c, "t").threshold.why,
            "3 runs in base, 2 in head (the spread needs 3 a side): threshold 10%, 1.00 MiB (4.00 MiB)");
}

TEST(Compare, AGivenMaxIncreaseWinsOverTheDefault) {
  auto base = report({{"q", {879.9, 880.0, 880.1}}}), head = report({{"q", {956.2, 956.8, 957.8}}});
  // --max-increase
  CompareOptions loose;
  loose.threshold = MaxIncrease{20, 0};
  auto c = compare_reports(base, head, loose);
  EXPECT_EQ(named(c, "q").change, Change::unchanged);
  EXPECT_EQ(named(c, "q").threshold.rule, ThresholdRule::flag);
  EXPECT_EQ(named(c, "q").threshold.why, "--max-increase 20% (176.0 MiB)");
  // The test's own (its spec, a rule or a pytest marker) over both.
  head.tests[0].test.max_increase = std::pair{5.0, 8 * MiB};
  c = compare_reports(base, head, loose);
  EXPECT_EQ(named(c, "q").change, Change::regressed);
  EXPECT_EQ(named(c, "q").threshold.rule, ThresholdRule::spec);
  EXPECT_EQ(named(c, "q").threshold.why, "the test's max_increase: 5%, 8.00 MiB (44.0 MiB)");
  // And with one run a side.
  c = compare_reports(report({{"t", {40}}}), report({{"t", {41.5}}}), {.threshold = MaxIncrease{1, 0}});
  EXPECT_EQ(named(c, "t").change, Change::regressed);
  EXPECT_EQ(named(c, "t").threshold.rule, ThresholdRule::flag);
}

TEST(Compare, AnySeriesGoesThroughTheSameRuleInAnyOrder) {
  // A block's peaks, say: unsorted as measured.
  std::vector<uint64_t> base = {101 * MiB, 100 * MiB, 100 * MiB + MiB / 2}, head = {106 * MiB, 105 * MiB, 105 * MiB + MiB / 2};
  SeriesChange s = compare_series(base, head, std::nullopt);
  EXPECT_EQ(s.change, Change::regressed);
  EXPECT_EQ(s.base_lo, 100 * MiB);
  EXPECT_EQ(s.base, 100 * MiB + MiB / 2);
  EXPECT_EQ(s.head_hi, 106 * MiB);
  EXPECT_EQ(s.threshold.allowed, 3 * MiB);  // 3 x 1 MiB beats 2% of 100.5 MiB
  EXPECT_EQ(compare_series(head, base, std::nullopt).change, Change::improved);
  // Figures near 2^63 saturate, never wrap.
  uint64_t huge = uint64_t{INT64_MAX};
  s = compare_series({0, huge / 2, huge}, {huge, huge, huge}, std::nullopt);
  EXPECT_EQ(s.threshold.allowed, huge);
  EXPECT_EQ(s.change, Change::unchanged);
  s = compare_series({huge}, {huge}, GivenThreshold{{1000, 0}, ThresholdRule::flag});
  EXPECT_EQ(s.threshold.allowed, huge);
}

TEST(Compare, EveryOutputSaysWhatDecidedEachTest) {
  auto c = compare_reports(report({{"up", {879.9, 880.0, 880.1}}, {"same", {100, 102, 104}}, {"one", {40}}}),
                           report({{"up", {956.2, 956.8, 957.8}}, {"same", {103, 105, 107.1}}, {"one", {41}}}), {});
  const char* up = "spread 0.2%: threshold 2% (17.6 MiB)";
  const char* same = "spread 4%: threshold 12%, 3x the spread (12.3 MiB)";
  const char* one = "1 run a side (the spread needs 3 a side): threshold 10%, 1.00 MiB (4.00 MiB)";
  std::string text = comparison_text(c), md = comparison_markdown(c), junit = comparison_junit(c);
  for (const char* why : {up, same, one}) EXPECT_NE(text.find(why), std::string::npos) << why << "\n" << text;
  EXPECT_NE(text.find("every run of head above every run of base by 76.1 MiB: more than the threshold"),
            std::string::npos) << text;
  // Markdown: a column of its own, escaped as the table's other text.
  EXPECT_NE(md.find("| threshold |"), std::string::npos) << md;
  EXPECT_NE(md.find(markdown_literal(same)), std::string::npos) << md;
  EXPECT_NE(md.find("3 runs a side the larger of 2%, 1 MiB and 3 times the larger side's spread"), std::string::npos) << md;
  // JUnit: a property per test, and the regression's message.
  EXPECT_NE(junit.find("<property name=\"threshold\" value=\"" + std::string(same) + "\""), std::string::npos) << junit;
  EXPECT_NE(junit.find("<property name=\"threshold_rule\" value=\"fixed\""), std::string::npos) << junit;
  EXPECT_NE(junit.find(std::string("more than the threshold: ") + up), std::string::npos) << junit;
  EXPECT_NE(comparison_annotations(c).find("threshold 2%25 (17.6 MiB)"), std::string::npos) << comparison_annotations(c);
  // JSON: the rule, what it applied, the spread and why; read back whole.
  auto j = nlohmann::json::parse(comparison_json(c));
  const auto& first = j["tests"][0];
  ASSERT_EQ(first["name"], "up");
  EXPECT_EQ(first["threshold"]["rule"], "spread");
  EXPECT_EQ(first["threshold"]["why"], up);
  EXPECT_EQ(first["threshold"]["max_increase"]["percent"], 2.0);
  EXPECT_EQ(first["threshold"]["max_increase"]["bytes"], MiB);
  EXPECT_EQ(first["allowed_increase_bytes"], named(c, "up").threshold.allowed);
  auto back = comparison_from_json(nlohmann::ordered_json::parse(comparison_json(c)), "c.json");
  for (const auto& t : c.tests) EXPECT_EQ(named(back, t.name).threshold, t.threshold) << t.name;
  EXPECT_EQ(comparison_text(back), comparison_text(c));
  // A comparison written before thresholds were said reads back without one.
  auto old = nlohmann::ordered_json::parse(comparison_json(c));
  for (auto& t : old["tests"]) t.erase("threshold");
  auto before = comparison_from_json(old, "c.json");
  EXPECT_EQ(named(before, "up").threshold.why, "");
  EXPECT_EQ(named(before, "up").threshold.allowed, named(c, "up").threshold.allowed);
}

TEST(Compare, AFailedOrIncomparableTestSaysNoThreshold) {
  ReportData base = report({{"t", {100, 100, 100}}, {"limit", {10, 10, 10}}});
  ReportData head = report({{"t", {50, 50, 50}}, {"limit", {10, 10, 10}}});
  ended(head, 0, Outcome::fail, 50);
  head.tests[1].test.requested_limit = 512 * MiB;
  auto c = compare_reports(base, head, {});
  std::string text = comparison_text(c);
  EXPECT_EQ(text.find("spread"), std::string::npos) << text;
  auto j = nlohmann::json::parse(comparison_json(c));
  for (const auto& t : j["tests"]) EXPECT_TRUE(t["threshold"].is_null()) << t.dump();
  EXPECT_EQ(comparison_junit(c).find("threshold"), std::string::npos) << comparison_junit(c);
}

}  // namespace
}  // namespace memrun

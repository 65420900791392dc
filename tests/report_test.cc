#include "runner/base/utf8.h"
#include "runner/report/report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>
#include <nlohmann/json.hpp>
#include <pugixml.hpp>
#include <regex>

#include "record_fixture.h"
#include "runner/base/bounded_json.h"
#include "runner/base/error.h"
#include "runner/base/shell.h"
#include "runner/plan/plan.h"
#include "runner/report/ci_outputs.h"
#include "runner/report/comparison.h"
#include "runner/report/json.h"
#include "runner/report/merge.h"
#include "runner/report/plot.h"
#include "runner/spec/spec.h"

namespace memrun {
namespace {

using fixture::Fixture;
using fixture::tmp;
// A report written through the spool, read back.
nlohmann::ordered_json written(Report& report, const RunInfo& info, std::string* text = nullptr) {
  std::string path = tmp() + "/memrun-report-test-" + std::to_string(::getpid()) + ".json";
  report.write(path, info);
  std::ifstream in(path);
  std::string got((std::istreambuf_iterator<char>(in)), {});
  std::filesystem::remove(path);
  if (text) *text = got;
  return nlohmann::ordered_json::parse(got);
}

TEST(Report, JsonHasTheDocumentedFields) {
  Fixture f;
  RunInfo info;
  info.backend = "v1";
  Report report(tmp());
  report.add_test(0, f.result(Outcome::oom, -1, 64ull << 20));
  auto j = written(report, info);
  EXPECT_EQ(j["schema"], "memrun-report/1");
  EXPECT_EQ(j["host"]["backend"], "v1");
  const auto& t = j["tests"][0];
  for (const char* k : {"name", "outcome", "expected", "passed", "limit_bytes", "peak_bytes", "headroom_bytes",
                        "headroom_pct", "oom_kills", "exit_code", "signal", "duration_s", "memory_stat",
                        "events", "stdout", "stderr", "started", "ended", "breakdown", "line", "swap_peak_bytes",
                        "swap_bytes", "swap_limit_bytes"})
    EXPECT_TRUE(t.contains(k)) << k;
  EXPECT_EQ(t["outcome"], "oom");
  EXPECT_TRUE(t["exit_code"].is_null());
  EXPECT_EQ(j["summary"]["failed"], 1);
}

TEST(Report, TestsComeInThePlansOrderAndReadLikeOneDump) {
  Fixture f;
  Report report(tmp());
  // Ended in another order than planned (-j), one never started.
  TestRecord second = f.result(Outcome::pass, 0, 1 << 20), first = f.result(Outcome::fail, 3, 2 << 20);
  report.add_test(2, second);
  report.add_test(0, first);
  std::string text;
  auto j = written(report, RunInfo{}, &text);
  ASSERT_EQ(j["tests"].size(), 2u);
  EXPECT_EQ(j["tests"][0]["exit_code"], 3);
  EXPECT_EQ(j["tests"][1]["exit_code"], 0);
  EXPECT_EQ(j["summary"]["total"], 2);
  EXPECT_EQ(j["summary"]["passed"], 1);
  EXPECT_EQ(j["setups"], nlohmann::ordered_json::array());
  // Assembled piece by piece, the text is what one dump(2) would print.
  EXPECT_EQ(text, j.dump(2) + "\n");
}

// An explanation with every field set (verdict/explanation.h), names that are markup.
Explanation an_explanation() {
  Explanation e;
  e.status = "explained";
  e.why = "oom";
  e.profiler = "memray 1.20.0";
  e.command = "python -m memray run x.py";
  e.explained_peak = 96 * MiB;
  e.explained_duration_s = 1.25;
  e.limit = 256 * MiB;
  e.outcome = "pass";
  e.exit_code = 0;
  e.kernel_peak = 170 * MiB;
  e.duration_s = 3.5;
  e.at_peak = {150 * MiB, MiB, 2 * MiB, 3 * MiB, 4096};
  e.profiled_peak = 125 * MiB;
  e.unseen = {45 * MiB, MiB, 2 * MiB + 4096, 3 * MiB, 5 * MiB, 20 * MiB};
  e.summary = "120 MiB by helper";
  AllocationSite s;
  s.bytes = 120 * MiB;
  s.allocations = 3;
  s.share = 120.0 / 170.0;
  s.process = "python x.py (pid 2)";
  s.stack = {{"default_malloc", "", 0, true},
             {"helper<script>|`x`", "/t/a|b.py", 5, false},
             {"test_it", "/t/a|b.py", 9, false}};
  s.where = 1;
  s.code = "x = helper(\"<b>|`y`\")";
  // A thread pool's allocation: its own native frames, then the Python
  // stack that ran at the peak.
  AllocationSite pool = s;
  pool.bytes = 30 * MiB;
  pool.share = 30.0 / 170.0;
  pool.stack = {{"start_thread", "./nptl/pthread_create.c", 442, true}, {"test_it", "/t/a|b.py", 9, false}};
  pool.where = 1;
  pool.served_from = 1;
  e.sites = {s, pool};
  e.processes = {{2, "python x.py", 125 * MiB, "memray"}, {7, "child <b>", 5 * MiB, ""}};
  return e;
}

TEST(Report, AProfiledRunThatWasItselfOomKilledSaysSoInEveryOutput) {
  // Its sites are what it held at the kill, not the program's peak: the
  // console (and pytest, JUnit), Markdown and HTML say the run was killed.
  TestRecord r;
  r.test.name = "t";
  r.verdict.outcome = Outcome::oom;
  r.explanation = an_explanation();
  r.explanation->outcome = "oom";
  const std::string said = "the profiled run was itself OOM-killed at its limit of 256.0 MiB";
  EXPECT_NE(explanation_lines(*r.explanation, 5)[0].find(said), std::string::npos);
  EXPECT_NE(explanation_markdown(r).find("the profiled run was itself OOM&#45;killed at its limit of 256&#46;0 MiB"),
            std::string::npos) << explanation_markdown(r);
  ReportData data;
  data.tests.push_back(r);
  std::string html;
  html_report(data.info, each_record(data), [&](const std::string& part) { html += part; });
  EXPECT_NE(html.find(said), std::string::npos) << html;
  r.explanation->outcome = "pass";  // a profiled run that ended on its own: no word of a kill
  EXPECT_EQ(explanation_lines(*r.explanation, 5)[0].find("OOM-killed"), std::string::npos);
}

TEST(Report, AnExplanationIsEscapedInMarkdownAndJUnitLikeEveryName) {
  TestRecord r;
  r.test.name = "t";
  r.explanation = an_explanation();
  std::string md = explanation_markdown(r);
  EXPECT_EQ(md.find("<script>"), std::string::npos) << md;
  EXPECT_EQ(md.find("a|b"), std::string::npos) << md;  // no cell separator from data
  EXPECT_NE(md.find("helper&#60;script&#62;&#124;&#96;x&#96;"), std::string::npos) << md;
  auto lines = explanation_lines(*r.explanation, 5);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_NE(lines[1].find("helper<script>|`x` (/t/a|b.py:5): x = helper(\"<b>|`y`\") <- test_it (/t/a|b.py:9)"),
            std::string::npos)
      << lines[1];
  EXPECT_EQ(md.find("<b>"), std::string::npos) << md;
  // A thread pool's allocation is shown at the test's line it served.
  EXPECT_NE(lines[2].find("test_it (/t/a|b.py:9): x = helper(\"<b>|`y`\") (on other threads, for this line's call)"), std::string::npos)
      << lines[2];
}

TEST(Report, AnExplanationWithHostileFramesKeepsMarkdownRowsAndTheHtmlWellFormed) {
  // Frame names, files and the summary are the test's data: markup, a cell
  // separator and a newline in them must not open an element or a row.
  TestRecord r;
  r.test.name = "t";
  r.verdict.outcome = Outcome::oom;
  r.verdict.passed = false;
  Explanation e = an_explanation();
  StackFrame& f = e.sites[0].stack[1];
  f.function = "<script>alert(1)</script>|x\n| injected | row |";
  f.file = "/t/</code></td>\n|.py";
  e.sites[0].stack[2].function = "caller</details>\n|";
  e.summary = "<img src=x onerror=alert(1)>\n| row |";
  e.sites.push_back(e.sites[0]);
  r.explanation = e;

  std::string md = explanation_markdown(r);
  for (const char* markup : {"<script", "<img", "</code></td>", "</details>\n|"})
    EXPECT_EQ(md.find(markup), std::string::npos) << markup << " in\n" << md;
  // The table: its header, its rule, then one line of four cells per site.
  std::istringstream lines(md);
  int rows = 0;
  bool in_table = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| bytes |", 0) == 0) in_table = true;
    if (!in_table) continue;
    if (line.empty() || line[0] != '|') break;
    EXPECT_EQ(std::count(line.begin(), line.end(), '|'), 5) << line;
    ++rows;
  }
  EXPECT_EQ(rows, 2 + 3) << md;

  std::string html;
  ReportData data;
  data.tests.push_back(r);
  html_report(data.info, each_record(data), [&](const std::string& part) { html += part; });
  for (const char* markup : {"<script>alert", "<img", "</code></td>\n", "caller</details>"})
    EXPECT_EQ(html.find(markup), std::string::npos) << markup;
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;|x"), std::string::npos);
  // The explanation's table, read as XML: well formed, one row per site,
  // and each frame's text exactly the data (escaped, never interpreted).
  auto from = html.find("<table class=\"explain\">"), to = html.find("</table>", from);
  ASSERT_NE(from, std::string::npos) << html;
  pugi::xml_document doc;
  ASSERT_TRUE(doc.load_string(html.substr(from, to + 8 - from).c_str())) << html.substr(from, to + 8 - from);
  auto table = doc.child("table");
  EXPECT_EQ(std::distance(table.children("tr").begin(), table.children("tr").end()), 4);
  auto row = table.child("tr").next_sibling("tr");
  EXPECT_EQ(std::string(row.child("td").next_sibling("td").next_sibling("td").child("code").text().get()),
            site_text(e.sites[0]));
  // The whole page under libxml2's HTML parser: no error but the HTML5 and
  // SVG elements its HTML 4 parser does not know.
  std::string path = ::testing::TempDir() + "/hostile-explanation.html";
  write_atomically(path, html);
  std::string check = "xmllint --html --noout " + shell_quote(path) + " 2>&1";
  std::FILE* p = ::popen(check.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string said;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) said.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << said;
  static const std::regex unknown_tag(R"(.*HTML parser error : Tag (section|header|main|footer|nav|details|summary|svg|rect|text|line|path|polyline|polygon|g|title|circle) invalid)");
  std::istringstream errors(said);
  for (std::string line; std::getline(errors, line);) {
    if (line.find("parser error") == std::string::npos) continue;
    EXPECT_TRUE(std::regex_match(line, unknown_tag)) << line;
  }
}

TEST(Report, ARecordReadBackIsTheRecordWritten) {
  // One serialization both ways: every field of a record the report
  // carries comes back with its type, so that merge, repro and the CI
  // outputs of a merged run see what the run saw.
  Fixture f;
  Observation o = Fixture::exited(-1, 64 * MiB);
  o.signal = 9;
  o.kernel.oom_kills = 1;
  o.kernel.limit_reached = true;
  o.kernel.oom_at_limit = true;
  o.sampled_limit = 64 * MiB;
  o.kernel.raw.events = {{"oom_kill", 1}, {"max", 7}};
  o.kernel.raw.stat = {{"anon", 5 * MiB}};
  o.kernel.breakdown.shmem = 3 * MiB;
  o.kernel.limit_at_end = 64 * MiB;
  o.samples = 2;
  o.sampled_peak = 60 * MiB;
  o.timeline.interval_s = 0.02;
  o.timeline.add(0.02, 10 * MiB, 9 * MiB, MiB);
  o.timeline.add(0.04, 60 * MiB, 59 * MiB, MiB);
  o.timeline.peak_t_s = 0.04;
  o.oom_victims = {{41, "big, \"quoted\"", 60 * MiB, MiB, 0, "/x/memrun-r/001-big"}};
  o.stdout_bytes = 12;
  o.started = std::chrono::system_clock::from_time_t(1796032800) + std::chrono::milliseconds(123);
  o.ended = o.started + std::chrono::seconds(2);
  o.duration_s = 2;
  o.cleanup_error = "cannot remove cgroup x: Device or resource busy";
  TestRecord written_record = make_record(f.planned, o);
  written_record.explanation = an_explanation();
  nlohmann::ordered_json j = to_json(written_record);
  TestRecord back = record_from_json(j, "t");
  EXPECT_EQ(to_json(back), j);
  // The explanation too (every field: EveryFieldOfARecordComesBackFromItsJson).
  ASSERT_TRUE(back.explanation);
  EXPECT_TRUE(*back.explanation == *written_record.explanation);
  EXPECT_EQ(back.verdict.outcome, Outcome::oom);
  EXPECT_EQ(back.observed.oom_victims.at(0).name, "big, \"quoted\"");
  EXPECT_EQ(back.observed.oom_victims.at(0).oom_memcg, "/x/memrun-r/001-big");
  EXPECT_EQ(back.observed.kernel.oom_at_limit, std::optional<bool>(true));
  EXPECT_EQ(back.observed.sampled_limit, 64 * MiB);
  EXPECT_EQ(back.observed.started, o.started);
  EXPECT_EQ(back.test.stdout_path, "/nonexistent/o");
  // A field of the wrong type is the input's fault, said with where.
  j["peak_bytes"] = "lots";
  try {
    record_from_json(j, "r.json: tests[0]");
    ADD_FAILURE() << "a string peak was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), Category::bad_input);
    EXPECT_NE(std::string(e.what()).find("r.json: tests[0] 'big': field 'peak_bytes'"), std::string::npos) << e.what();
  }
}

// A record with every field set to something other than its default: what
// the round trip must keep.
TestRecord every_field_set() {
  TestRecord r;
  TestIdentity& t = r.test;
  t.name = "every";
  t.spec = "specs/all.yaml";
  t.line = 7;
  t.command = "./work --all";
  t.env = {{"A", "1"}};
  t.tags = {"slow", "io"};
  t.expected = "oom";
  t.requested_limit = 64 * MiB;
  t.swap_limit = 8 * MiB;
  t.memory_high = 60 * MiB;
  t.stdout_path = "/run/o";
  t.stderr_path = "/run/e";
  t.max_increase = std::pair{5.5, 2 * MiB};
  t.inputs = {"data/in.parquet"};
  t.timeout_s = 30.5;
  t.measured = "forked_case";
  Observation& o = r.observed;
  o.ending = Ending::thrashed;
  o.start_error = "not started: why";
  o.exit_code = 3;
  o.signal = 9;
  cgroup::Final& k = o.kernel;
  k.peak = 63 * MiB;
  k.oom_kills = 2;
  k.oom_group_kills = 1;
  k.limit_reached = true;
  k.oom_at_limit = false;
  k.raw.events = {{"oom_kill", 2}, {"max", 7}};
  k.raw.stat = {{"anon", 5 * MiB}};
  k.breakdown = {1, 2, 3, 4, 5};
  k.reclaimable_file = 6 * MiB;
  k.raw.pressure_us = {{"some", 11}, {"full", 12}};
  k.refused_forks = 13;
  k.refused_huge_pages = 14;
  k.high_events = 15;
  k.effective_limit = 62 * MiB;
  k.limit_at_end = 64 * MiB;
  k.swap_peak = 3 * MiB;
  k.memory_and_swap_peak = 66 * MiB;
  k.swap_at_end = MiB;
  k.escaped = 1;
  k.limit_written = true;
  k.peak_reset = true;
  k.uncharged_sub_group = "/sub";
  o.samples = 9;
  o.sampled_peak = 61 * MiB;
  o.reclaimable_at_sampled_peak = 4 * MiB;
  o.sampled_working_set = 57 * MiB;
  o.sampled_swap_peak = 2 * MiB;
  o.sampled_limit = 64 * MiB;
  o.sampled_lowest_limit = 62 * MiB;
  o.escaped_to = "0::/elsewhere";
  o.at_peak = {6, 7, 8, 9, 10};
  o.timeline.interval_s = 0.02;
  o.timeline.t_s = {0.04, 0.08};
  o.timeline.current = {10 * MiB, 60 * MiB};
  o.timeline.anon = {9 * MiB, 59 * MiB};
  o.timeline.file = {MiB, MiB};
  o.timeline.stride = 2;
  o.timeline.skipped = 1;
  o.timeline.peak_t_s = 0.08;
  o.oom_victims = {{41, "big", 60 * MiB, MiB, 2, "/x/memrun-r/001-every", 64 * MiB}};
  o.placement = "clone3";
  o.thrash_refaulted = 640 * MiB;
  o.thrash_window_s = 5.25;
  o.thrash_stalled_s = 4.5;
  o.cleanup_error = "cannot remove cgroup x: Device or resource busy";
  o.log_error = "cannot write /run/o: No space left on device";
  o.stdout_bytes = 12;
  o.stderr_bytes = 13;
  o.log_discarded_bytes = 14;
  o.duration_s = 6.125;
  o.cpu_user_s = 1.5;
  o.cpu_system_s = 0.25;
  o.started = std::chrono::system_clock::from_time_t(1796032800) + std::chrono::milliseconds(123);
  o.ended = o.started + std::chrono::milliseconds(6125);
  o.pass_matched = o.fail_matched = o.skip_matched = true;
  o.log_tail = "last line\n";
  o.tool_said = "passed";
  o.blocks = {{"load", 5 * MiB, MiB, 2 * MiB, "memory.peak"}};
  Verdict& v = r.verdict;
  // Passed, as its runs did: a record whose head says otherwise is refused.
  v.outcome = Outcome::pass;
  v.passed = true;
  v.reason = "thrashing";
  v.limit = 62 * MiB;
  v.peak = 61 * MiB;
  v.peak_sampled = true;
  v.working_set_peak = 57 * MiB;
  v.page_cache = 6 * MiB;
  v.headroom_basis = HeadroomBasis::working_set;
  v.headroom = -3 * static_cast<int64_t>(MiB);
  v.headroom_pct = -4.29;
  v.swap_peak = 3 * MiB;
  v.swap_at_end = MiB;
  v.disabled = true;
  v.figures_hold = false;
  r.runs = {{61 * MiB, 57 * MiB, Outcome::pass, true, 6.125, false, o.blocks}, {60 * MiB, 56 * MiB, Outcome::pass, true, 5.5}};
  r.explanation = an_explanation();
  r.explanation->message = "a second run";
  return r;
}

TEST(Report, EveryFieldOfARecordComesBackFromItsJson) {
  // The CI outputs and --baseline work from records read back from the
  // spool: a record read back must be the record written, field by field.
  TestRecord r = every_field_set();
  // Every field, the explanation's too, set to something other than its
  // default: a field the codec dropped would come back as its default.
  EXPECT_EQ(fixture::unset_fields(r), std::vector<std::string>{});
  TestRecord back = record_from_json(to_json(r), "t");
  EXPECT_TRUE(back.test == r.test);
  EXPECT_TRUE(back.verdict == r.verdict);
  EXPECT_TRUE(back.runs == r.runs);
  EXPECT_TRUE(back.observed.kernel == r.observed.kernel);
  EXPECT_TRUE(back.observed.timeline == r.observed.timeline);
  EXPECT_TRUE(back.observed == r.observed);
  EXPECT_TRUE(back == r) << to_json(back).dump(1) << "\n" << to_json(r).dump(1);
  // And a record with every optional field unset, and one that never started.
  // (Every record has its runs: make_record gives it one.)
  TestRecord bare;
  bare.test.name = "bare";
  bare.test.spec = "s.yaml";
  bare.runs = {RunFigures{}};
  EXPECT_TRUE(record_from_json(to_json(bare), "t") == bare) << to_json(record_from_json(to_json(bare), "t")).dump(1);
  TestRecord refused = bare;
  refused.observed.ending = Ending::not_run;
  refused.verdict.outcome = Outcome::interrupted;
  refused.runs = {{0, 0, Outcome::interrupted, false, 0, true}};  // its run is its record
  EXPECT_TRUE(record_from_json(to_json(refused), "t") == refused);
}

// A comparison with every field set (report/comparison.h), a test of it
// with one line that moved.
Comparison every_comparison_field_set() {
  Comparison c;
  c.base_name = "base.json";
  c.head_name = "this run";
  c.warnings = {"another kernel: 6.1 in base, 6.8 in head"};
  TestChange t;
  t.name = "every";
  t.spec = "specs/all.yaml";
  t.block = "load";
  t.line = 7;
  t.change = Change::regressed;
  t.figure = "peak";
  t.base_lo = 10, t.base = 11, t.base_hi = 12, t.head_lo = 20, t.head = 21, t.head_hi = 22;
  t.base_runs = 3, t.head_runs = 2;
  t.threshold = {ThresholdRule::spread, 2.5, MiB, 5, 7, "spread 10%: threshold 7 B"};
  t.note = "noted";
  t.base_outcomes = "pass 3/3";
  t.head_outcomes = "pass 2/2";
  t.reason = "its peak grew";
  t.where = {{"helper (x.py:5): y = f()", 4, 9}};
  c.tests = {t};
  return c;
}

TEST(Report, EveryFieldOfAReportComesBackFromItsText) {
  // The whole of memrun-report/1 (head, setups, tests, comparison), every
  // field set: what merge, repro and compare read is what the run wrote.
  ReportData d;
  RunInfo& i = d.info;
  i.memrun_version = "0.1.0";
  i.memrun_path = "/opt/memrun/bin/memrun";
  i.host_cgroups = true;
  i.spec_environment = {{"POLARS_VERSION", "0.20.15"}, {"UNSET", std::nullopt}};
  i.run_id = "20261201-1";
  i.run_dir = "/run/memrun-1";
  i.cwd = "/src";
  i.backend = "v2";
  i.cgroup_mode = "unified";
  i.cgroup_path = "/sys/fs/cgroup/memrun";
  i.kernel = "6.18.0";
  i.started = std::chrono::system_clock::from_time_t(1796032800) + std::chrono::milliseconds(5);
  i.ended = i.started + std::chrono::seconds(3);
  i.interrupted_by = "SIGINT";
  i.shard_index = 2, i.shard_count = 3;
  i.jobs = 4;
  i.budget = 8 * GiB;
  i.memrun_max_rss = 12 * MiB;
  i.cleanup_error = "cannot remove cgroup x: Device or resource busy";
  i.merged_from = {"a.json", "b.json"};
  i.environment = {"madvise", 2 * GiB, 24 * GiB, 2, {{"MALLOC_ARENA_MAX", "2"}}};
  i.comparison = every_comparison_field_set();
  d.setups = {{"specs/all.yaml", true, every_field_set()}};
  d.tests = {every_field_set()};
  EXPECT_EQ(fixture::unset_fields(d), std::vector<std::string>{});
  EXPECT_EQ(fixture::unset_fields(*i.comparison), std::vector<std::string>{});
  ReportData back = parse_report(report_text(d), "r.json");
  EXPECT_TRUE(back.info.environment == d.info.environment);
  EXPECT_TRUE(back.info.comparison == d.info.comparison) << comparison_json(*back.info.comparison);
  EXPECT_TRUE(back.info == d.info) << report_text(back);
  EXPECT_TRUE(back.setups == d.setups);
  EXPECT_TRUE(back == d) << report_text(back);
}

// The count of fields the codec's lists are held to (codec_fields.h), on
// the kinds of field the report's types have: an optional (which its own
// constructor builds), an aggregate within, lists, maps, a time.
struct Plain {
  int a = 0;
};
struct Mixed {
  std::optional<uint64_t> maybe;
  Plain inner;
  cgroup::Breakdown breakdown;
  std::vector<Plain> list;
  std::map<std::string, uint64_t> map;
  std::optional<std::pair<double, uint64_t>> pair;
  std::chrono::system_clock::time_point when;
  Outcome outcome = Outcome::pass;
  std::optional<Explanation> explanation;
};
static_assert(codec::arity<Plain>() == 1);
static_assert(codec::arity<Mixed>() == 9);
static_assert(codec::arity<cgroup::Breakdown>() == 5);

TEST(Report, TheSpoolGivesBackTheRecordsWritten) {
  std::string dir = (std::filesystem::temp_directory_path() / ("memrun-spool-" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(dir);
  TestRecord r = every_field_set();
  {
    Report report(dir);
    report.add_test(0, r);
    std::vector<TestRecord> back;
    report.records()([&](const TestRecord& t) { back.push_back(t); });
    ASSERT_EQ(back.size(), 1u);
    EXPECT_TRUE(back[0] == r) << to_json(back[0]).dump(1);
  }
  std::filesystem::remove_all(dir);
}

// What the console prints of `r`, without colour.
std::string console_text(const TestRecord& r) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* out = open_memstream(&buf, &len);
  Console(out, false, 4).test(r);
  std::fclose(out);
  std::string text(buf, len);
  free(buf);
  return text;
}

TEST(Report, ConsoleLineIsPlainWithoutColor) {
  Fixture f;
  TestRecord r = f.result(Outcome::pass, 0, 40ull << 20);
  std::string line = console_text(r);
  EXPECT_EQ(line.find('\033'), std::string::npos);
  EXPECT_NE(line.find("PASS  big"), std::string::npos) << line;
  EXPECT_NE(line.find("peak 40.0 MiB / 64.0 MiB"), std::string::npos) << line;
  EXPECT_NE(line.find("headroom 24.0 MiB (38%)"), std::string::npos) << line;
}

TEST(Report, AtomicWriteKeepsThePreviousFileOnFailure) {
  std::string dir = tmp() + "/memrun-report-test-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::string path = dir + "/r.json";
  write_atomically(path, "first");
  write_atomically(path, "second");
  std::ifstream in(path);
  std::string got((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(got, "second");
  EXPECT_THROW(write_atomically(dir + "/missing/r.json", "x"), Error);
  std::filesystem::remove_all(dir);
}

TEST(Report, LogTail) {
  std::string path = tmp() + "/memrun-tail-" + std::to_string(::getpid());
  std::ofstream(path) << "1\n2\n3\n4\n";
  EXPECT_EQ(log_tail(path, 2), "3\n4");
  EXPECT_EQ(log_tail(path, 10), "1\n2\n3\n4");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace memrun

namespace memrun {
namespace {

TEST(Report, AnOomWithoutSampleShowsTheKernelsFiguresNotZeros) {
  Fixture f;
  f.spec.tests[0].min_headroom.reset();
  Observation o = Fixture::exited(-1, 4 << 20);
  o.signal = 9;
  o.kernel.oom_kills = 1;
  o.kernel.oom_at_limit = true;  // at the limit memrun set
  o.samples = 0;
  o.duration_s = 0.01;
  o.oom_victims = {{123, "eater", 3977 << 10, 1 << 20, 0, ""}};
  TestRecord r = make_record(f.planned, o);
  EXPECT_EQ(r.observed.at_peak.anon, 3977u << 10) << "the victims' figures, not the emptied group's";
  std::string text = console_text(r);
  EXPECT_EQ(text.find("anon 0 B"), std::string::npos) << text;
  EXPECT_NE(text.find("no sample"), std::string::npos) << text;
  EXPECT_NE(text.find("anon-rss 3.88 MiB"), std::string::npos) << text;
}

TEST(Report, ControlsInAVictimsNameAndTheLogAreWrittenAsNamesAre) {
  // A process name the kernel logs is the test's to choose (prctl
  // PR_SET_NAME): an ESC, a CR or a broken byte in it reaches the console
  // as the visible \xNN the one rule writes, never raw and never a '?'
  // that hides which byte it was.
  Fixture f;
  Observation o = Fixture::exited(-1, 4 << 20);
  o.signal = 9;
  o.kernel.oom_kills = 1;
  o.kernel.oom_at_limit = true;
  o.oom_victims = {{123, "ea\x1b[2Jt\rer\xff", 1 << 20, 1 << 20, 0, ""}};
  TestRecord r = make_record(f.planned, o);
  std::string text = console_text(r);
  EXPECT_NE(text.find("the kernel killed ea\\x1b[2Jt\\x0der\\xff (pid 123)"), std::string::npos) << text;
  for (char c : std::string("\x1b\r\xff")) EXPECT_EQ(text.find(c), std::string::npos) << text;
  EXPECT_EQ(printable("a\tb\nc\rd\x07"), "a\tb\nc\\x0dd\\x07");
  EXPECT_EQ(one_line("a\tb\nc\rd"), "a\\tb\\nc\\x0dd");
}

// Every character of the display rule (runner/base/utf8.h) found raw in
// `text`, as U+XXXX: C0 (but a newline), DEL, C1, bidi controls,
// zero-width characters and separators.
std::string raw_of_the_rule(const std::string& text) {
  std::string found;
  for (size_t i = 0; i < text.size();) {
    size_t len = utf8_length(text, i);
    char hex[16];
    if (len == 0) {
      std::snprintf(hex, sizeof hex, " byte %02x", static_cast<unsigned char>(text[i]));
      found += hex;
      ++i;
      continue;
    }
    uint32_t c = code_point(text, i, len);
    if ((c < 0x20 && c != '\n') || c == 0x7f || shows_as_other(c)) {
      std::snprintf(hex, sizeof hex, " U+%04X", static_cast<unsigned>(c));
      found += hex;
    }
    i += len;
  }
  return found;
}

TEST(Report, TheConsoleShowsNoCharacterOfTheDisplayRuleRaw) {
  // A name (a suite's case may hold C0), a victim's name, the log's last
  // lines and explain's frames, each holding one of every class: the
  // console shows each escaped, as the other outputs do.
  const std::string every = "\x01\x1b[31m\x07\r\x7f\xc2\x9b\xe2\x80\xae\xe2\x81\xa6\xe2\x80\x8e\xe2\x80\x8b\xe2\x81\xa0"
                            "\xef\xbb\xbf\xe2\x80\xa8\xe2\x80\xa9";
  const std::string shown = "\\x01\\x1b[31m\\x07\\x0d\\x7f\\u009b\\u202e\\u2066\\u200e\\u200b\\u2060\\ufeff\\u2028\\u2029";
  Fixture f;
  Observation o = Fixture::exited(-1, 4 << 20);
  o.signal = 9;
  o.kernel.oom_kills = 1;
  o.kernel.oom_at_limit = true;
  o.oom_victims = {{123, "victim" + every, 1 << 20, 1 << 20, 0, ""}};
  std::string log = tmp() + "/memrun-rule-log-" + std::to_string(::getpid());
  std::ofstream(log) << "line" << every << "\n";
  TestRecord r = make_record(f.planned, o);
  r.test.name = "case" + every;
  r.test.stderr_path = log;
  r.explanation = an_explanation();
  for (auto& site : r.explanation->sites) site.stack[site.where].function = "frame" + every;
  r.explanation->summary = "summary" + every;
  char* buf = nullptr;
  size_t len = 0;
  FILE* out = open_memstream(&buf, &len);
  Console console(out, false, 4);
  console.test(r);
  console.explanation(r);
  std::fclose(out);
  std::string text(buf, len);
  free(buf);
  std::remove(log.c_str());
  EXPECT_EQ(raw_of_the_rule(text), "") << text;
  for (const char* what : {"case", "victim", "line", "frame", "summary"})
    EXPECT_NE(text.find(what + shown), std::string::npos) << what << " is not shown as " << shown << ":\n" << text;
}

TEST(Report, CharactersThatShowAsOthersAreEscapedWhereShownAndKeptWhereStored) {
  // C1 (U+009B, a terminal's CSI), bidi (U+202E: "ok\u202etset-deliaf"
  // shows as "okfailed-test"), zero-width and separators: escaped by the
  // one rule every output uses; what a record keeps (storable) holds them.
  std::string name = "ok\xe2\x80\xaetset\xc2\x9b[2J\xe2\x80\x8b\xe2\x81\xa6\xef\xbb\xbf\xe2\x80\xa8\x1b";
  EXPECT_EQ(escape_controls(name), "ok\\u202etset\\u009b[2J\\u200b\\u2066\\ufeff\\u2028\\x1b");
  EXPECT_EQ(storable(name), "ok\xe2\x80\xaetset\xc2\x9b[2J\xe2\x80\x8b\xe2\x81\xa6\xef\xbb\xbf\xe2\x80\xa8\\x1b");
  EXPECT_EQ(one_line("a\xe2\x80\xa9" "b\n"), "a\\u2029b\\n");
  EXPECT_EQ(escape_controls("caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x90\x8d"), "caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x90\x8d")
      << "printable characters stay";
  // A table's cell: at most its width, the rest in the JSON.
  EXPECT_EQ(cell("abcdef", 4), "abc\xe2\x80\xa6");
  EXPECT_EQ(cell("abcd", 4), "abcd");
  EXPECT_EQ(cell(std::string(64 << 20, 'n')).size(), 119u + 3u);
  EXPECT_EQ(cell("\xe2\x80\xae" "abc", 3), "\\u\xe2\x80\xa6") << "an escape counts as it shows";
}

// A report as memrun writes it, of one test named "big", as JSON to edit.
nlohmann::ordered_json valid_report() {
  Fixture f;
  ReportData r;
  r.info.memrun_version = "0.1.0";
  r.info.run_id = "20261201-1";
  r.info.backend = "v1";
  r.info.cgroup_mode = "hybrid";
  r.info.started = std::chrono::system_clock::from_time_t(1796032800);
  r.info.ended = r.info.started + std::chrono::seconds(3);
  TestRecord t = f.result(Outcome::pass, 0, 20ull << 20);
  t.observed.timeline.add(0.02, 1 << 20, 1 << 20, 0);
  r.tests.push_back(t);
  return nlohmann::ordered_json::parse(report_text(r));
}

// The message parse_report refuses `j` with (exit 2), or "" if it reads it.
std::string refusal(const nlohmann::ordered_json& j) {
  try {
    parse_report(j.dump(), "r.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), Category::bad_input) << e.what();
    return e.what();
  }
  return "";
}

TEST(Report, AValidReportReadsBackAndItsRunInfoToo) {
  auto j = valid_report();
  j["memrun_path"] = "/opt/memrun/bin/memrun";
  j["host_cgroups"] = true;
  j["spec_environment"] = {{"POLARS_VERSION", "0.20.15"}, {"UNSET", nullptr}};
  EXPECT_EQ(refusal(j), "");
  ReportData r = parse_report(j.dump(), "r.json");
  EXPECT_EQ(r.info.memrun_path, "/opt/memrun/bin/memrun");
  EXPECT_TRUE(r.info.host_cgroups);
  EXPECT_EQ(r.info.spec_environment.at("POLARS_VERSION"), "0.20.15");
  EXPECT_FALSE(r.info.spec_environment.at("UNSET").has_value());
  // And it writes them as it read them.
  auto again = nlohmann::ordered_json::parse(report_text(r));
  EXPECT_EQ(again["spec_environment"], j["spec_environment"]);
  EXPECT_EQ(again["memrun_path"], j["memrun_path"]);
}

TEST(Report, AComparisonIsReadBackAndMergeKeepsIt) {
  // A run with --baseline carries its comparison; a report read back has
  // it as data, and merge of shards keeps every shard's.
  Comparison c;
  c.base_name = "base.json";
  c.head_name = "this run";
  c.warnings = {"another kernel: 6.1 in base, 6.8 in head"};
  TestChange up;
  up.name = "big";
  up.spec = "s.yaml";
  up.line = 4;
  up.change = Change::regressed;
  up.figure = "peak";
  up.base_lo = 10, up.base = 11, up.base_hi = 12, up.head_lo = 20, up.head = 21, up.head_hi = 22;
  up.base_runs = up.head_runs = 3;
  up.threshold = {ThresholdRule::spread, 2, MiB, 1, 5, "spread 10%: threshold 5 B"};
  up.base_outcomes = up.head_outcomes = "pass 3/3";
  up.note = "noted";
  TestChange failed = up;
  failed.name = "other";
  failed.change = Change::failed_in_head;
  failed.base = failed.head = failed.base_lo = failed.base_hi = failed.head_lo = failed.head_hi = 0;  // not measured
  failed.reason = "oom";
  c.tests = {up, failed};
  ReportData shard = parse_report(valid_report().dump(), "r.json");
  shard.info.comparison = c;
  ReportData back = parse_report(report_text(shard), "r.json");
  ASSERT_TRUE(back.info.comparison);
  EXPECT_EQ(comparison_json(*back.info.comparison), comparison_json(c));
  ReportData merged = merge_reports({back}, {"r.json"});
  ASSERT_TRUE(merged.info.comparison) << "merge dropped the comparison";
  EXPECT_EQ(comparison_json(*merged.info.comparison), comparison_json(c));
  EXPECT_EQ(nlohmann::ordered_json::parse(report_text(merged))["comparison"]["tests"].size(), 2u);
  // A comparison that is not one is refused, naming it.
  auto j = nlohmann::ordered_json::parse(report_text(shard));
  j["comparison"]["tests"][0]["change"] = "worse";
  EXPECT_NE(refusal(j).find("r.json: comparison: test 'big' has the change"), std::string::npos) << refusal(j);
  // Read by the report's rules, as every field of it: a negative size is
  // not 16 EiB, a range is two sizes.
  j = nlohmann::ordered_json::parse(report_text(shard));
  j["comparison"]["tests"][0]["base_bytes"] = -1;
  EXPECT_NE(refusal(j).find("r.json: comparison.tests[0]: field 'base_bytes' is -1"), std::string::npos) << refusal(j);
  j = nlohmann::ordered_json::parse(report_text(shard));
  j["comparison"]["tests"][0]["where"] = {{{"where", "x.py:1"}, {"base_bytes", 1}, {"head_bytes", -2}}};
  EXPECT_NE(refusal(j).find("comparison.tests[0].where[0]: field 'head_bytes' is -2"), std::string::npos) << refusal(j);
  j = nlohmann::ordered_json::parse(report_text(shard));
  j["comparison"]["tests"][0]["base_range_bytes"] = {1, 2, 3};
  EXPECT_NE(refusal(j).find("field 'base_range_bytes' should be [lowest, highest]"), std::string::npos) << refusal(j);
}

TEST(Report, EveryNumberIsRangeCheckedNamingTheFieldAndTheTest) {
  // A negative size must not read as 16 EiB, nor 1e300 as 0.
  struct Case {
    const char* field;
    nlohmann::ordered_json value;
  };
  for (const auto& [field, value] : std::vector<Case>{{"peak_bytes", -1},
                                                      {"peak_bytes", 1e300},
                                                      {"peak_bytes", 1.5},
                                                      {"peak_bytes", 18446744073709551615ull},
                                                      {"limit_bytes", -67108864},
                                                      {"duration_s", -1},
                                                      {"duration_s", 1e300},
                                                      {"line", -3},
                                                      {"exit_code", 300},
                                                      {"signal", -9},
                                                      {"samples", 4294967296ll},
                                                      {"headroom_pct", 1e308},
                                                      {"headroom_bytes", 18446744073709551615ull},
                                                      {"oom_kills", -1}}) {
    SCOPED_TRACE(std::string(field) + " = " + value.dump());
    auto j = valid_report();
    j["tests"][0][field] = value;
    std::string why = refusal(j);
    EXPECT_NE(why.find("r.json: tests[0] 'big': field '" + std::string(field) + "'"), std::string::npos) << why;
  }
  auto j = valid_report();
  j["tests"][0]["runs"][0]["peak_bytes"] = -5;
  EXPECT_NE(refusal(j).find("tests[0] 'big'.runs[0]: field 'peak_bytes'"), std::string::npos) << refusal(j);
  j = valid_report();
  j["tests"][0]["timeline"]["t_s"][0] = -1;
  EXPECT_NE(refusal(j).find("field 't_s'"), std::string::npos) << refusal(j);
  j = valid_report();
  j["tests"][0]["memory_stat"]["anon"] = -1;
  EXPECT_NE(refusal(j).find("field 'memory_stat'"), std::string::npos) << refusal(j);
  j = valid_report();
  j["environment"]["cpus"] = -2;
  EXPECT_NE(refusal(j).find("r.json.environment: field 'cpus'"), std::string::npos) << refusal(j);
  j = valid_report();
  j["started"] = "2300-01-01T00:00:00.000Z";  // past what system_clock holds
  EXPECT_NE(refusal(j).find("field 'started'"), std::string::npos) << refusal(j);
}

TEST(Report, AnExplanationIsReadByTheReportsRulesNamingItsField) {
  // The explanation is read as every other field is: a negative size is
  // not 16 EiB, a frame index past its stack is refused, each naming where.
  auto j = nlohmann::ordered_json::parse(report_text(ReportData{RunInfo{}, {}, {every_field_set()}}));
  j["memrun_version"] = "0.1.0", j["run_id"] = "r", j["host"]["backend"] = "v1", j["host"]["cgroup_mode"] = "v1";
  j["started"] = j["ended"] = "2026-12-01T10:00:00.000Z";
  ASSERT_EQ(refusal(j), "");
  auto with = [&](const char* pointer, const nlohmann::ordered_json& value) {
    auto k = j;
    k[nlohmann::ordered_json::json_pointer(pointer)] = value;
    return refusal(k);
  };
  EXPECT_NE(with("/tests/0/explanation/sites/0/bytes", -1).find("r.json: tests[0] 'every'.explanation.sites[0]: field 'bytes' is -1"),
            std::string::npos) << with("/tests/0/explanation/sites/0/bytes", -1);
  EXPECT_NE(with("/tests/0/explanation/sites/0/where", 3).find(".explanation.sites[0]: field 'where' is 3"), std::string::npos);
  EXPECT_NE(with("/tests/0/explanation/sites/1/served_from", 2).find("field 'served_from' is 2"), std::string::npos);
  EXPECT_NE(with("/tests/0/explanation/profiled_run/at_peak/anon", 1e300).find(".explanation.profiled_run.at_peak: field 'anon'"),
            std::string::npos);
  EXPECT_NE(with("/tests/0/explanation/processes/0/pid", "x").find(".explanation.processes[0]: field 'pid'"), std::string::npos);
  EXPECT_NE(with("/tests/0/explanation/unseen", nullptr).find(".explanation: field 'unseen' is missing"), std::string::npos);
  EXPECT_NE(with("/tests/0/explanation", 3).find("'every'.explanation: should be a JSON object"), std::string::npos);
}

TEST(Report, ARecordThatContradictsItsRunsIsRefusedNamingTheFields) {
  // A record is one thing: a head that says oom, not passed, one kill,
  // while its run says it passed at 1 MiB, would compare as "improved".
  auto j = valid_report();
  auto& t = j["tests"][0];
  t["outcome"] = "oom", t["passed"] = false, t["oom_kills"] = 1;
  t["runs"][0]["outcome"] = "pass", t["runs"][0]["passed"] = true, t["runs"][0]["peak_bytes"] = 1 << 20;
  std::string why = refusal(j);
  EXPECT_NE(why.find("r.json: tests[0] 'big': the record contradicts itself"), std::string::npos) << why;
  for (const char* field : {"'passed'", "'outcome' is oom while runs[0] says pass", "'peak_bytes'"})
    EXPECT_NE(why.find(field), std::string::npos) << field << ": " << why;
  // An oom that counts no kill.
  j = valid_report();
  j["tests"][0]["outcome"] = "oom", j["tests"][0]["runs"][0]["outcome"] = "oom";
  EXPECT_NE(refusal(j).find("'outcome' is oom while 'oom_kills' and 'oom_group_kills' count no kill"),
            std::string::npos)
      << refusal(j);
  // Without runs (a report from before them) the record is its own run.
  j = valid_report();
  j["tests"][0]["runs"] = nlohmann::ordered_json::array();
  EXPECT_EQ(refusal(j), "");
  // Figures that hold beside what decide() fails as a defeated limit, and a
  // pass that never started: no record memrun writes.
  const std::vector<std::pair<std::string, nlohmann::ordered_json>> defeated = {
      {"escaped_processes", 2}, {"limit_written", true}, {"peak_reset", true},
      {"sampled_peak_bytes", uint64_t{1} << 40}, {"ending", "not_started"}};
  for (const auto& [field, value] : defeated) {
    SCOPED_TRACE(field);
    j = valid_report();
    j["tests"][0][field] = value;
    EXPECT_NE(refusal(j).find("the record contradicts itself: "), std::string::npos) << refusal(j);
    EXPECT_NE(refusal(j).find("'" + field + "'"), std::string::npos) << refusal(j);
  }
}

TEST(Report, NestingStringsAndListsAreBoundedWithAClearError) {
  // A million levels deep in a field memrun reads as a map: once a
  // segmentation fault (nlohmann's conversions recurse), now a message.
  std::string text = valid_report().dump();
  std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  std::string why;
  try {
    parse_report(text.substr(0, text.find("\"env\"")) + "\"env\": " + deep + "," + text.substr(text.find("\"env\"")),
                 "r.json");
  } catch (const Error& e) {
    why = e.what();
    EXPECT_EQ(e.category(), Category::bad_input);
  }
  EXPECT_NE(why.find("r.json: holds lists and objects nested more than 64 deep"), std::string::npos) << why.substr(0, 300);
  auto j = valid_report();
  j["tests"][0]["command"] = std::string((1 << 20) + 1, 'x');
  EXPECT_NE(refusal(j).find("holds a string longer than 1.00 MiB"), std::string::npos) << refusal(j).substr(0, 300);
  JsonLimits small;
  small.elements = 3;
  try {
    parse_json("[1,2,3,4]", "x.json", small);
    ADD_FAILURE() << "a list past its length was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x.json: holds a list or object of more than 3 members"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(parse_json("{\"a\":[1,2,3],\"b\":{\"c\":1,\"d\":2}}", "x.json", small).dump(), "{\"a\":[1,2,3],\"b\":{\"c\":1,\"d\":2}}");
}

TEST(Report, RequiredFieldsAreRequired) {
  // Only `schema` and `tests`: not a report of any run, nor a base.
  EXPECT_NE(refusal({{"schema", "memrun-report/1"}, {"tests", nlohmann::ordered_json::array()}})
                .find("field 'memrun_version' is missing"),
            std::string::npos);
  for (const char* field : {"run_id", "started", "host"}) {
    auto j = valid_report();
    j.erase(field);
    EXPECT_NE(refusal(j).find("field '" + std::string(field) + "' is missing"), std::string::npos) << field;
  }
  for (const char* field : {"name", "spec", "outcome", "passed", "peak_bytes", "limit_bytes", "requested_limit_bytes"}) {
    auto j = valid_report();
    j["tests"][0].erase(field);
    EXPECT_NE(refusal(j).find("field '" + std::string(field) + "' is missing"), std::string::npos) << field;
  }
}

TEST(Report, ATestListedTwiceIsRefused) {
  auto j = valid_report();
  j["tests"].push_back(j["tests"][0]);
  EXPECT_NE(refusal(j).find("tests[0] and tests[1] are both test 'big' of s.yaml"), std::string::npos) << refusal(j);
}

TEST(Report, ShardCountsAreBounded) {
  auto j = valid_report();
  j["shard"] = {{"index", 1}, {"count", 100000000}};
  EXPECT_NE(refusal(j).find("field 'count'"), std::string::npos) << refusal(j);
  j["shard"] = {{"index", 2}, {"count", kMaxShards}};
  EXPECT_EQ(refusal(j), "");
  // Merging it alone names what is missing without listing 10000 shards.
  try {
    merge_reports({parse_report(j.dump(), "r.json")}, {"r.json"});
    ADD_FAILURE() << "a lone shard merged";
  } catch (const Error& e) {
    EXPECT_LT(std::string(e.what()).size(), 200u) << e.what();
    EXPECT_NE(std::string(e.what()).find("and 9989 more"), std::string::npos) << e.what();
  }
}

TEST(Report, RaggedTimelinesAreRefused) {
  auto j = valid_report();
  j["tests"][0]["timeline"]["anon"] = nlohmann::ordered_json::array();
  EXPECT_NE(refusal(j).find("t_s, current, anon and file should be as long as each other"), std::string::npos)
      << refusal(j);
}

}  // namespace
}  // namespace memrun

// Sharding, merging and the CI formats, from reports built in memory; the
// real-run counterparts are in ci_test.cc.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <set>

#include "runner/base/error.h"
#include "runner/base/files.h"
#include "runner/base/shell.h"
#include "runner/plan/plan.h"
#include "runner/report/ci_outputs.h"
#include "runner/report/merge.h"
#include "runner/report/plot.h"

namespace memrun {
namespace {

TEST(CiReport, EveryTestInExactlyOneShardAndStableByName) {
  std::vector<std::string> names;
  for (int i = 0; i < 10; ++i) names.push_back("t" + std::to_string(i));
  auto a = assign_shards({names.begin(), names.end()}, 3, {});
  std::vector<std::string_view> reversed(names.rbegin(), names.rend());
  auto b = assign_shards(reversed, 3, {});
  std::map<int, int> sizes;
  for (size_t i = 0; i < names.size(); ++i) {
    ASSERT_GE(a[i], 0);
    ASSERT_LT(a[i], 3);
    ++sizes[a[i]];
    EXPECT_EQ(a[i], b[names.size() - 1 - i]) << "the order of the spec must not matter";
  }
  EXPECT_EQ(sizes, (std::map<int, int>{{0, 4}, {1, 3}, {2, 3}}));
}

TEST(CiReport, FilterMatchesInLinearTimeAndRefusesBadSyntaxWithExit2) {
  // (a*)*b over 99 a's (names are at most 100 characters) backtracks for ever in a backtracking
  // engine (std::regex: 11 s at 30 characters, doubling with each one);
  // here it must simply not match, at once (ctest's timeout is the bound).
  Spec spec = parse_spec("tests:\n  - {name: " + std::string(99, 'a') + "c, run: 'true', memory: 1MiB}\n"
                         "  - {name: ab, run: 'true', memory: 1MiB}\n",
                         "/nonexistent/spec.yaml", "/nonexistent");
  Selection s;
  s.filter = "(a*)*b";
  auto plan = make_plan({spec}, s, "/nonexistent/run");
  ASSERT_EQ(plan.tests.size(), 1u);
  EXPECT_EQ(plan.tests[0].test->name, "ab");
  s.filter = "c++ (fast";
  try {
    make_plan({spec}, s, "/nonexistent/run");
    ADD_FAILURE() << "a filter that is no regex was taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), Category::usage);
    EXPECT_NE(std::string(e.what()).find("--filter"), std::string::npos) << e.what();
  }
}

TEST(CiReport, ShardTimingsBalanceLongestFirst) {
  std::vector<std::string_view> names{"a", "b", "c", "d", "e"};
  std::map<std::string, double> t{{"a", 10}, {"b", 6}, {"c", 5}, {"d", 4}, {"e", 1}};
  auto s = assign_shards(names, 2, t);
  double load[2] = {0, 0};
  for (size_t i = 0; i < names.size(); ++i) load[s[i]] += t[std::string(names[i])];
  EXPECT_EQ(s[0], 0);                    // the longest goes first, to shard 1
  EXPECT_LE(std::abs(load[0] - load[1]), 4.0);  // 13 vs 13 for LPT here
}

TEST(CiReport, ABadShardIsRefused) {
  Selection s;
  parse_shard("2/3", &s);
  EXPECT_EQ(s.shard_index, 2);
  EXPECT_EQ(s.shard_count, 3);
  for (const char* bad : {"0/3", "4/3", "3", "a/b", "1/0", "1/2x"}) EXPECT_THROW(parse_shard(bad, &s), Error) << bad;
}

// A shard's report, typed: tests that passed, or were OOM-killed at 64 MiB.
ReportData report(int k, int n, std::vector<std::pair<std::string, bool>> tests) {
  ReportData r;
  r.info.started = std::chrono::system_clock::from_time_t(1796032800 + k);  // 2026-11-30T10:00:0K
  r.info.ended = r.info.started + std::chrono::minutes(1);
  r.info.backend = "v1";
  r.info.kernel = "6.1";
  r.info.shard_index = k;
  r.info.shard_count = n;
  for (auto& [name, passed] : tests) {
    TestRecord t;
    t.test.name = name;
    t.test.spec = "s.yaml";
    t.test.line = 3;
    t.verdict.passed = passed;
    t.verdict.outcome = passed ? Outcome::pass : Outcome::oom;
    t.verdict.limit = t.verdict.peak = 64 << 20;
    t.verdict.reason = passed ? "" : "expected pass, got oom";
    t.observed.duration_s = 1.5;
    r.tests.push_back(t);
  }
  return r;
}

std::string merge_error(const std::vector<ReportData>& rs) {
  std::vector<std::string> paths;
  for (size_t i = 0; i < rs.size(); ++i) paths.push_back("r" + std::to_string(i + 1) + ".json");
  try {
    merge_reports(rs, paths);
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), Category::bad_input);
    return e.what();
  }
  return "";
}

TEST(CiReport, MergeCombinesShardsIntoTheWholeRun) {
  ReportData m = merge_reports({report(2, 2, {{"b", false}}), report(1, 2, {{"a", true}})}, {"x", "y"});
  auto j = nlohmann::ordered_json::parse(report_text(m));
  EXPECT_EQ(j["summary"]["total"], 2);
  EXPECT_EQ(j["summary"]["failed"], 1);
  EXPECT_EQ(j["tests"][0]["name"], "a");  // shard order
  EXPECT_TRUE(j["shard"].is_null());
  EXPECT_EQ(j["started"], "2026-11-30T10:00:01.000Z");
  EXPECT_EQ(j["ended"], "2026-11-30T10:01:02.000Z");
  EXPECT_EQ(j["merged_from"], nlohmann::ordered_json({"y", "x"}));
  EXPECT_FALSE(all_passed(m));
}

TEST(CiReport, MergeSaysWhatIsWrong) {
  EXPECT_NE(merge_error({report(1, 3, {{"a", true}}), report(3, 3, {{"c", true}})}).find("shard 2/3 is missing"),
            std::string::npos);
  EXPECT_NE(merge_error({report(1, 2, {{"a", true}}), report(2, 2, {{"a", true}})}).find("'a' of s.yaml appears twice"),
            std::string::npos);
  EXPECT_NE(merge_error({report(1, 2, {{"a", true}}), report(1, 2, {{"b", true}})}).find("shard 1/2 comes twice"),
            std::string::npos);
  EXPECT_NE(merge_error({report(1, 2, {{"a", true}}), report(2, 3, {{"b", true}})}).find("of 2 shards"),
            std::string::npos);
}

TEST(CiReport, GithubAnnotationPointsAtTheSpecLineAndEscapes) {
  auto r = report(1, 1, {{"a, b: c", false}, {"ok", true}});
  r.tests[0].test.line = 12;
  std::string out = github_annotations(each_record(r));
  EXPECT_EQ(out,
            "::error file=s.yaml,line=12,title=memrun%3A a%2C b%3A c — oom::expected pass, got oom "
            "(peak 64.0 MiB of 64.0 MiB, headroom 0 B (0%25))\n");
}

TEST(CiReport, AnAnnotationPointsAtAFileGithubCanMap) {
  // GitHub maps an annotation's file against the checkout (GITHUB_WORKSPACE)
  // only: a spec given by absolute path inside it is named relative to it;
  // one outside it gets no file (the annotation shows on the job), never a
  // path GitHub cannot map.
  const char* was = std::getenv("GITHUB_WORKSPACE");
  std::string saved = was ? was : "";
  ::setenv("GITHUB_WORKSPACE", "/home/runner/work/repo/repo/", 1);
  auto r = report(1, 1, {{"inside", false}, {"outside", false}, {"relative", false}});
  r.tests[0].test.spec = "/home/runner/work/repo/repo/specs/./mem.yaml";
  r.tests[1].test.spec = "/home/runner/work/repo/repo-other/mem.yaml";
  r.tests[2].test.spec = "specs/mem.yaml";
  std::string out = github_annotations(each_record(r));
  EXPECT_NE(out.find("::error file=specs/mem.yaml,line=3,title=memrun%3A inside"), std::string::npos) << out;
  EXPECT_NE(out.find("::error title=memrun%3A outside"), std::string::npos) << out;
  EXPECT_NE(out.find("::error file=specs/mem.yaml,line=3,title=memrun%3A relative"), std::string::npos) << out;
  ::unsetenv("GITHUB_WORKSPACE");
  EXPECT_EQ(annotation_place("/abs/spec.yaml", 3), "") << "no checkout: no file GitHub could map";
  if (was) ::setenv("GITHUB_WORKSPACE", saved.c_str(), 1);
}

TEST(CiReport, AFailedTestNeverReadsAsAPassInAnyOutput) {
  // min_headroom missed: the outcome is pass, the verdict FAIL. Every
  // output says FAIL with the reason, and never "pass" alone beside it.
  auto r = report(1, 1, {{"tight", false}});
  TestRecord& t = r.tests[0];
  t.verdict.outcome = Outcome::pass;
  t.test.expected = "pass";
  t.verdict.peak = 40 << 20;
  t.verdict.headroom = 24 << 20;
  t.verdict.headroom_pct = 37.5;
  t.verdict.reason = "headroom 24.0 MiB is below min_headroom 32.0 MiB (peak 40.0 MiB of 64.0 MiB)";
  auto each = each_record(r);
  std::string md = markdown_table(r.info, each);
  EXPECT_NE(md.find("| ❌ FAIL | <code>tight</code> | pass: below min_headroom | 40.0 MiB | 64.0 MiB | 24.0 MiB (38%) | "
                    "headroom 24&#46;0 MiB is below min&#95;headroom"),
            std::string::npos) << md;
  std::string html;
  html_report(r.info, each, [&](const std::string& part) { html += part; });
  EXPECT_NE(html.find("tight — FAIL, pass: below min_headroom</text>"), std::string::npos) << html;
  EXPECT_NE(html.find("<td>headroom 24.0 MiB is below min_headroom"), std::string::npos) << html;
  std::string notes = github_annotations(each);
  EXPECT_NE(notes.find("title=memrun%3A tight — pass%3A below min_headroom::headroom 24.0 MiB is below"),
            std::string::npos) << notes;
  std::string xml = junit_xml(r.info, each);
  EXPECT_NE(xml.find("<failure message=\"headroom 24.0 MiB is below min_headroom"), std::string::npos) << xml;
}

TEST(CiReport, HeadroomOfTheWorkingSetSaysSoWhereverItIsShown) {
  // The kernel's peak was page cache: headroom is of the working set, and
  // 98% beside peak = limit must say why, as the console does.
  auto r = report(1, 1, {{"cat", true}});
  r.tests[0].verdict.headroom_basis = HeadroomBasis::working_set;
  r.tests[0].verdict.headroom = 62 << 20;
  r.tests[0].verdict.headroom_pct = 97;
  auto each = each_record(r);
  EXPECT_NE(markdown_table(r.info, each).find("| 62.0 MiB (97%) excl. page cache |"), std::string::npos);
  std::string html;
  html_report(r.info, each, [&](const std::string& part) { html += part; });
  EXPECT_NE(html.find(">62.0 MiB (97%) excl. page cache</td>"), std::string::npos) << html;
}

TEST(CiReport, MarkdownTable) {
  ReportData m = merge_reports({report(1, 1, {{"a", true}, {"b", false}})}, {"x"});
  std::string md = markdown_table(m.info, each_record(m));
  EXPECT_NE(md.find("| ✅ pass | <code>a</code> | pass | 64.0 MiB | 64.0 MiB | 0 B (0%) |  |"), std::string::npos) << md;
  // A failed test's reason beside its outcome, as every output says it.
  EXPECT_NE(md.find("| ❌ FAIL | <code>b</code> | oom | 64.0 MiB | 64.0 MiB | 0 B (0%) | expected pass&#44; got oom |"),
            std::string::npos) << md;
  EXPECT_NE(md.find("1 passed, 1 failed"), std::string::npos) << md;
}

TEST(CiReport, MarkdownShowsAHostileNameLiterally) {
  // Backticks to leave a code span, a cell separator, raw HTML, a link, an
  // entity and emphasis: none may reach the page as markup.
  const std::string name = "a` | <img src=x onerror=alert(1)> [x](http://e) &amp; **b** \\|";
  ReportData m = merge_reports({report(1, 1, {{name, false}})}, {"x"});
  std::string md = markdown_table(m.info, each_record(m));
  std::string row = md.substr(md.find("| ❌ FAIL"));
  row = row.substr(0, row.find('\n'));
  // Eight cell borders, as every row has: the name split no cell.
  EXPECT_EQ(std::count(row.begin(), row.end(), '|'), 8) << row;
  for (const char* markup : {"`", "<img", "](", "&amp;", "**", "\\"})
    EXPECT_EQ(row.find(markup), std::string::npos) << markup << " reached the table: " << row;
  // What remains is the name, spelled with character references.
  std::string decoded = row.substr(row.find("<code>") + 6);
  decoded = decoded.substr(0, decoded.find("</code>"));
  std::string plain;
  for (size_t i = 0; i < decoded.size(); ++i) {
    if (decoded.compare(i, 2, "&#") == 0) {
      size_t end = decoded.find(';', i);
      plain += static_cast<char>(std::stoi(decoded.substr(i + 2, end - i - 2)));
      i = end;
    } else {
      plain += decoded[i];
    }
  }
  EXPECT_EQ(plain, name);
}

TEST(CiReport, ControlCharactersInNamesAndHostFieldsReachNoOutputRaw) {
  // ESC, BEL, CR, DEL and a broken UTF-8 byte in a name (as a gtest or CTest
  // case may have), a kernel string with a line break, HTML and a workflow
  // command (as a merged report's host.kernel may have).
  // U+FFFF: valid UTF-8, and no XML character.
  const std::string name = "Case\x1b[31mRed\x07\rX\x7f\xff" "\xef\xbf\xbf";
  ReportData r = report(1, 1, {{name, false}});
  r.info.kernel = "6.1\n::error::owned <img src=x>";
  auto each = each_record(r);
  std::string xml = junit_xml(r.info, each);
  std::string path = ::testing::TempDir() + "/hostile-junit.xml";
  write_atomically(path, xml);
  std::string check = "xmllint --noout --schema " + shell_quote(std::string(SOURCE_DIR) + "/tests/junit.xsd") + " " +
                      shell_quote(path) + " 2>&1";
  EXPECT_EQ(std::system(check.c_str()), 0) << xml;
  EXPECT_NE(xml.find("Case\\x1b[31mRed\\x07"), std::string::npos) << xml;
  std::string md = markdown_table(r.info, each);
  std::string notes = github_annotations(each);
  for (const std::string* out : {&xml, &md, &notes})
    for (char c : std::string("\x1b\x07\x7f\xff"))
      EXPECT_EQ(out->find(c), std::string::npos) << "byte " << int(static_cast<unsigned char>(c)) << " in " << *out;
  EXPECT_EQ(notes.find('\r'), std::string::npos) << notes;
  EXPECT_EQ(md.find("\n::error"), std::string::npos) << md;
  EXPECT_EQ(md.find("<img"), std::string::npos) << md;
  std::remove(path.c_str());
}

// The CI templates the README points to, for a user's repository: valid
// YAML; they use the published action (never memrun's source: no
// ./setup.sh, no build/), shard, keep each report and merge them.
std::string scripts_of(const YAML::Node& steps) {
  std::string all;
  for (const auto& step : steps)
    if (step["run"]) all += step["run"].as<std::string>() + "\n";
  return all;
}

TEST(CiReport, ExampleGithubActionsWorkflow) {
  YAML::Node w = YAML::LoadFile(std::string(SOURCE_DIR) + "/docs/ci/github-actions.yml");
  auto matrix = w["jobs"]["memory"]["strategy"]["matrix"]["shard"];
  ASSERT_TRUE(matrix.IsSequence());
  std::string n = std::to_string(matrix.size());
  const std::regex action("OWNER/memrun/docs/ci/action@v[0-9.]+");
  // The shards run the published action, each its share of the user's specs.
  bool sharded = false;
  for (const auto& step : w["jobs"]["memory"]["steps"])
    if (step["uses"] && std::regex_match(step["uses"].as<std::string>(), action)) {
      EXPECT_EQ(step["with"]["shard"].as<std::string>(), "${{ matrix.shard }}/" + n);
      EXPECT_EQ(step["with"]["artifact"].as<std::string>(), "memrun-shard");
      EXPECT_EQ(step["with"]["specs"].as<std::string>(), "${{ env.MEMRUN_SPECS }}");
      sharded = true;
    }
  EXPECT_TRUE(sharded);
  EXPECT_FALSE(w["env"]["MEMRUN_SPECS"].as<std::string>().empty());
  EXPECT_EQ(w["jobs"]["merge"]["needs"].as<std::string>(), "memory");
  // The merge and compare jobs install memrun with the action (no specs)
  // and take every shard's report, named as the action names them.
  for (const char* job : {"merge", "compare"}) {
    bool installs = false;
    for (const auto& step : w["jobs"][job]["steps"])
      if (step["uses"] && std::regex_match(step["uses"].as<std::string>(), action) && !step["with"]) installs = true;
    EXPECT_TRUE(installs) << job;
  }
  EXPECT_NE(scripts_of(w["jobs"]["merge"]["steps"]).find("memrun merge memrun-shard-*.json -o memrun.json"),
            std::string::npos);
  for (const auto& job : w["jobs"]) {
    std::string name = job.first.as<std::string>(), runs = scripts_of(job.second["steps"]);
    EXPECT_EQ(runs.find("setup.sh"), std::string::npos) << name << ": memrun's source in:\n" << runs;
    EXPECT_EQ(runs.find("build/"), std::string::npos) << name << ": memrun's build in:\n" << runs;
  }
}

// The action (docs/ci/action): composite; installs the released binary (or
// one given), never builds; runs the specs with --json and --junit, the
// shard when given, and uploads both; without specs only installs. Its
// inputs reach the shell only through env, never spliced into a script (a
// spec path or flag with $(...) runs nothing).
TEST(CiReport, GithubActionRunsSpecsAndUploadsTheReports) {
  YAML::Node a = YAML::LoadFile(std::string(SOURCE_DIR) + "/docs/ci/action/action.yml");
  EXPECT_EQ(a["runs"]["using"].as<std::string>(), "composite");
  for (const char* input : {"specs", "version", "binary", "shard", "jobs", "args", "artifact"})
    EXPECT_TRUE(a["inputs"][input]) << input;
  EXPECT_EQ(a["inputs"]["specs"]["default"].as<std::string>(), "");
  bool installs = false, runs = false, uploads = false;
  for (const auto& step : a["runs"]["steps"]) {
    if (step["run"]) {
      std::string run = step["run"].as<std::string>();
      EXPECT_EQ(run.find("${{"), std::string::npos) << "an expression spliced into a script:\n" << run;
      EXPECT_EQ(step["shell"].as<std::string>(), "bash");
      EXPECT_EQ(run.find("setup.sh"), std::string::npos) << "the action builds memrun:\n" << run;
      // The release's portable binary, checked against its SHA256SUMS
      // before it is installed.
      if (run.find("file=memrun-$VERSION-linux-x86_64") != std::string::npos &&
          run.find("/releases/download}/v$VERSION") != std::string::npos &&
          run.find("sha256sum --quiet -c sum") != std::string::npos &&
          run.find("install -m 0755 -o root -g root \"$BINARY\" /usr/local/bin/memrun") != std::string::npos)
        installs = true;
      if (run.find("memrun)\" \"${specs[@]}\" \"${shard[@]}\"") != std::string::npos &&
          run.find("--json \"$out.json\" --junit \"$out.xml\"") != std::string::npos &&
          run.find("shard=(--shard \"$SHARD\")") != std::string::npos) {
        EXPECT_EQ(step["if"].as<std::string>(), "inputs.specs != ''");
        runs = true;
      }
    }
    if (step["uses"] && step["uses"].as<std::string>().rfind("actions/upload-artifact", 0) == 0) {
      EXPECT_NE(step["if"].as<std::string>().find("always()"), std::string::npos);
      std::string path = step["with"]["path"].as<std::string>();
      uploads = path.find("steps.run.outputs.json") != std::string::npos &&
                path.find("steps.run.outputs.junit") != std::string::npos;
    }
  }
  EXPECT_TRUE(installs);
  EXPECT_TRUE(runs);
  EXPECT_TRUE(uploads);
}

TEST(CiReport, GithubActionsComparesAPullRequestWithTheBaseBranch) {
  YAML::Node w = YAML::LoadFile(std::string(SOURCE_DIR) + "/docs/ci/github-actions.yml");
  // Runs that give the comparison a noise bound, merged, kept as an artifact.
  bool repeated = false;
  for (const auto& step : w["jobs"]["memory"]["steps"])
    if (step["with"] && step["with"]["args"] &&
        step["with"]["args"].as<std::string>().find("--repeat ") != std::string::npos)
      repeated = true;
  EXPECT_TRUE(repeated);
  auto compare = w["jobs"]["compare"];
  ASSERT_TRUE(compare.IsMap());
  EXPECT_EQ(compare["needs"].as<std::string>(), "merge");
  EXPECT_NE(compare["if"].as<std::string>().find("pull_request"), std::string::npos);
  bool this_run = false;
  for (const auto& step : compare["steps"])
    if (step["uses"] && step["uses"].as<std::string>().rfind("actions/download-artifact", 0) == 0 &&
        step["with"]["name"].as<std::string>() == "memrun-report")
      this_run = true;
  EXPECT_TRUE(this_run);
  std::string runs = scripts_of(compare["steps"]);
  // A base branch without a successful run yet (a first pull request)
  // gives no run id: nothing is downloaded, and the comparison says so.
  EXPECT_NE(runs.find("--jq '.[0].databaseId // empty'"), std::string::npos) << runs;
  // Only the base branch's own runs: a fork's pull request from a branch of
  // the same name never becomes the base.
  EXPECT_NE(runs.find("gh run list --branch \"$BASE_REF\" --event push"), std::string::npos) << runs;
  EXPECT_NE(runs.find("if [ -n \"$run_id\" ]; then\n  gh run download \"$run_id\" --name memrun-report --dir base"),
            std::string::npos)
      << runs;
  EXPECT_NE(runs.find("if [ ! -f base/memrun.json ]; then"), std::string::npos) << runs;
  EXPECT_NE(runs.find("memrun compare base/memrun.json memrun.json --markdown"), std::string::npos) << runs;
  // The report the compare job takes as the base is the one merge uploads.
  bool uploaded = false;
  for (const auto& step : w["jobs"]["merge"]["steps"])
    if (step["with"] && step["with"]["name"] && step["with"]["name"].as<std::string>() == "memrun-report" &&
        step["with"]["path"].as<std::string>() == "memrun.*")
      uploaded = true;
  EXPECT_TRUE(uploaded);
}

TEST(CiReport, ExampleGitlabCi) {
  YAML::Node g = YAML::LoadFile(std::string(SOURCE_DIR) + "/docs/ci/gitlab-ci.yml");
  EXPECT_EQ(g["memory"]["parallel"].as<int>(), 3);
  std::string script, install;
  for (const auto& line : g["memory"]["script"]) script += line.as<std::string>();
  for (const auto& line : g[".memrun"]["before_script"]) install += line.as<std::string>() + "\n";
  EXPECT_NE(script.find("--shard \"$CI_NODE_INDEX/$CI_NODE_TOTAL\""), std::string::npos) << script;
  EXPECT_NE(install.find("\"$MEMRUN_RELEASES/v$MEMRUN_VERSION/memrun-$MEMRUN_VERSION-linux-x86_64\""),
            std::string::npos)
      << install;
  EXPECT_NE(install.find("SHA256SUMS | sha256sum -c -"), std::string::npos) << install;
  for (const char* job : {"memory", "memory-merge"}) EXPECT_EQ(g[job]["extends"].as<std::string>(), ".memrun");
  EXPECT_EQ(g["memory"]["artifacts"]["reports"]["junit"].as<std::string>(), "memrun-*.xml");
  EXPECT_EQ(g["memory-merge"]["needs"][0].as<std::string>(), "memory");
  EXPECT_EQ((script + install).find("setup.sh"), std::string::npos);
}

}  // namespace
}  // namespace memrun

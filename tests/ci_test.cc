// memrun in CI matrix jobs, with the real binary: JUnit checked by a real
// XML schema validator (xmllint), shards that add up to the full run, merged
// reports, GitHub annotations.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <regex>
#include <yaml-cpp/yaml.h>

#include "harness.h"
#include "lanes.h"

namespace memrun::testing {
namespace {

const char* kMixed = R"(tests:
  - {name: passes, run: 'true', memory: 16MiB}
  - {name: ooms, run: [{W}, --touch, 100MiB], memory: 32MiB}
  - {name: times-out, run: 'sleep 5', memory: 16MiB, timeout: 300ms}
  - {name: cannot-start, run: [no-such-program-anywhere], memory: 16MiB}
  - {name: fails, run: 'echo "<broken & bad>" >&2; exit 2', memory: 16MiB}
)";

// The whole file ("" when absent).
std::string slurp(const std::string& path) { return read_text(path); }

class Ci : public MemrunTest {};

// CI outputs are memrun's own, whatever the backend: on the host only.
MEMRUN_LANES(Ci, "*", kHostLane);

TEST_F(Ci, JunitValidatesAgainstTheSchema) {
  std::string xml = dir.path() + "/junit.xml";
  auto run = run_spec(dir, kMixed, {"--junit", xml});
  EXPECT_EQ(run.exit_code, 1);
  auto check = run_program({"xmllint", "--noout", "--schema", std::string(SOURCE_DIR) + "/tests/junit.xsd", xml});
  EXPECT_EQ(check.exit_code, 0) << check.err;
  std::string text = slurp(xml);
  EXPECT_NE(text.find("tests=\"5\" failures=\"3\" errors=\"1\""), std::string::npos) << text;
  EXPECT_NE(text.find("<failure message=\"expected pass, got oom at 32.0 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("type=\"timeout\""), std::string::npos);
  EXPECT_NE(text.find("<error message=\"command not found"), std::string::npos);
  EXPECT_NE(text.find("&lt;broken &amp; bad&gt;"), std::string::npos) << "the log tail, escaped";
  EXPECT_NE(text.find("<property name=\"limit_bytes\" value=\"33554432\""), std::string::npos);
}

// name -> passed, from a report's tests
std::map<std::string, bool> verdicts(const nlohmann::json& report) {
  std::map<std::string, bool> out;
  for (const auto& t : report["tests"]) out[t["name"]] = t["passed"];
  return out;
}

TEST_F(Ci, HtmlReportHasATableAndAPlotPerTest) {
  std::string html = dir.path() + "/report.html";
  auto run = run_spec(dir, kMixed, {"--html", html});
  std::string text = slurp(html);
  EXPECT_EQ(run_program({"xmllint", "--html", "--noout", html}).exit_code, 0);
  size_t svgs = 0, rows = 0;
  for (size_t at = 0; (at = text.find("<svg", at)) != std::string::npos; ++at) ++svgs;
  for (size_t at = 0; (at = text.find("<tr><td", at)) != std::string::npos; ++at) ++rows;
  EXPECT_EQ(svgs, 5u);
  EXPECT_EQ(rows, 5u);
  // Each plot is well-formed SVG with labelled axes and the limit.
  size_t start = text.find("<svg"), end = text.find("</svg>", start) + 6;
  std::string svg = dir.write("one.svg", text.substr(start, end - start));
  EXPECT_EQ(run_program({"xmllint", "--noout", svg}).exit_code, 0);
  for (const char* s : {">MiB</text>", ">seconds</text>", "limit 16.0 MiB", "kernel peak"})
    EXPECT_NE(slurp(svg).find(s), std::string::npos) << s;
  EXPECT_NE(text.find(">OOM kill</text>"), std::string::npos);
  EXPECT_NE(text.find("id=\"t-ooms\""), std::string::npos);
  // And the JSON timeline has the kernel's peak as a point of its own.
  const auto& tl = test_named(run, "times-out")["timeline"];
  // How many samples fit in 300 ms depends on the machine's load: what
  // always holds is that the timeline has some, and no point that was not a
  // sample (it keeps the interval's cadence: a sample that comes late, or a
  // denser one near the limit, is not a point of its own).
  EXPECT_GE(tl["t_s"].size(), 1u);
  EXPECT_LE(tl["t_s"].size(), test_named(run, "times-out")["samples"]);
  EXPECT_EQ(tl["kernel_peak"]["bytes"], test_named(run, "times-out")["peak_bytes"]);
}

TEST_F(Ci, ShardsAddUpToTheFullRunAndMergeToItsVerdicts) {
  std::string yaml = "tests:\n";
  for (int i = 1; i <= 7; ++i) yaml += "  - {name: t" + std::to_string(i) + ", run: 'true', memory: 16MiB}\n";
  yaml += "  - {name: big, run: [{W}, --touch, 64MiB], memory: 32MiB}\n";
  auto full = run_spec(dir, yaml);
  ASSERT_EQ(full.report["tests"].size(), 8u);
  std::vector<std::string> reports;
  std::multiset<std::string> seen;
  for (int k = 1; k <= 3; ++k) {
    std::string path = dir.path() + "/shard" + std::to_string(k) + ".json";
    auto shard = run_spec(dir, yaml, {"--shard", std::to_string(k) + "/3"});
    ASSERT_TRUE(shard.report.contains("tests")) << shard.out << shard.err;
    EXPECT_EQ(shard.report["shard"]["index"], k);
    for (const auto& t : shard.report["tests"]) seen.insert(t["name"]);
    std::ofstream(path) << shard.report.dump();
    reports.push_back(path);
    // `memrun list --shard` shows the same partition.
    auto list = run_memrun({"list", dir.path() + "/spec.yaml", "--shard", std::to_string(k) + "/3"});
    for (const auto& t : shard.report["tests"])
      EXPECT_NE(list.out.find("  " + t["name"].get<std::string>() + "  "), std::string::npos) << list.out;
  }
  EXPECT_EQ(seen.size(), 8u);
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()).size(), 8u) << "a test ran in two shards";
  std::string merged = dir.path() + "/merged.json";
  std::vector<std::string> args{"merge"};
  args.insert(args.end(), reports.begin(), reports.end());
  for (const auto& a : {std::string("-o"), merged}) args.push_back(a);
  auto m = run_memrun(args);
  EXPECT_EQ(m.exit_code, full.exit_code) << m.out << m.err;
  auto merged_report = nlohmann::json::parse(slurp(merged));
  EXPECT_EQ(verdicts(merged_report), verdicts(full.report));
  // And a missing shard is named.
  auto partial = run_memrun({"merge", reports[0], reports[2], "-o", dir.path() + "/partial.json"});
  EXPECT_EQ(partial.exit_code, 2);
  EXPECT_NE(partial.err.find("shard 2/3 is missing"), std::string::npos) << partial.err;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/partial.json"));
}

TEST_F(Ci, GithubActionsAnnotationPointsAtTheTestsLine) {
  std::string summary = dir.path() + "/summary.md";
  std::ofstream(summary) << "earlier step output\n";
  // The spec is given by absolute path: the annotation names it relative to
  // the checkout (GITHUB_WORKSPACE), the only root GitHub maps a file against.
  auto run = run_spec_with(dir, kMixed,
                           {"env", "GITHUB_ACTIONS=true", "GITHUB_STEP_SUMMARY=" + summary,
                            "GITHUB_WORKSPACE=" + dir.path(), memrun_bin()});
  EXPECT_NE(run.out.find("::error file=spec.yaml,line=3,title=memrun%3A ooms — oom (expected pass)::expected pass, got "
                         "oom at 32.0 MiB"),
            std::string::npos)
      << run.out;
  EXPECT_EQ(run.out.find("title=memrun%3A passes"), std::string::npos);
  std::string md = slurp(summary);
  EXPECT_EQ(md.rfind("earlier step output\n", 0), 0u) << "the summary is appended to";
  EXPECT_NE(md.find("| ❌ FAIL | <code>ooms</code> | oom (expected pass) |"), std::string::npos) << md;
}

// Characters that show as others or as nothing, as UTF-8: C1 controls
// (U+0085, U+009B), bidi controls, zero-width ones, separators.
const std::vector<std::string> kShowAsOthers = {
    "\xc2\x85", "\xc2\x9b", "\xe2\x80\x8e", "\xe2\x80\x8f", "\xe2\x80\xaa", "\xe2\x80\xae", "\xe2\x81\xa6",
    "\xe2\x81\xa9", "\xe2\x80\x8b", "\xe2\x80\x8d", "\xe2\x81\xa0", "\xef\xbb\xbf", "\xe2\x80\xa8", "\xe2\x80\xa9"};

TEST_F(Ci, NoNameOrOutputShowsAsAnotherInAnyOutput) {
  // Tests named with each class (one that reads "okfailed-test" on a
  // screen but is another name), failing with such characters in their
  // output: every output memrun shows writes them as visible escapes; the
  // JSON report keeps each name as it is.
  const char* spec = R"(tests:
  - {name: "ok\u202etset-deliaf", run: 'exit 1', memory: 16MiB}
  - {name: "c1\x9b[2J\x85x", run: 'exit 1', memory: 16MiB}
  - {name: "zero\u200bwidth\u200d\u2060\ufeff", run: 'exit 1', memory: 16MiB}
  - {name: "sep\u2028line\u2029", run: 'exit 1', memory: 16MiB}
  - {name: "iso\u2066late\u2069\u200e\u200f\u202a", run: "printf 'out\\342\\200\\256put\\302\\233\\n'; exit 1", memory: 16MiB}
)";
  std::string xml = dir.path() + "/junit.xml", md = dir.path() + "/summary.md", html = dir.path() + "/report.html",
              summary = dir.path() + "/step.md";
  auto run = run_spec_with(dir, spec, {"env", "GITHUB_ACTIONS=true", "GITHUB_STEP_SUMMARY=" + summary, memrun_bin()},
                           {"--junit", xml, "--markdown", md, "--html", html});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  ASSERT_EQ(run.report["tests"].size(), 5u) << run.out << run.err;
  EXPECT_EQ(run.report["tests"][0]["name"], "ok\xe2\x80\xaetset-deliaf") << "the JSON keeps the name as it is";
  EXPECT_NE(run.out.find("ok\\u202etset-deliaf"), std::string::npos) << run.out;
  EXPECT_EQ(run_program({"xmllint", "--noout", "--schema", std::string(SOURCE_DIR) + "/tests/junit.xsd", xml}).exit_code, 0);
  EXPECT_EQ(run_program({"xmllint", "--html", "--noout", html}).exit_code, 0);
  std::map<std::string, std::string> outputs = {{"console and annotations", run.out}, {"stderr", run.err},
                                                {"JUnit", slurp(xml)},         {"Markdown", slurp(md)},
                                                {"HTML", slurp(html)},         {"step summary", slurp(summary)}};
  for (const auto& [what, text] : outputs) {
    if (what != "stderr") {
      EXPECT_FALSE(text.empty()) << what;
    }
    for (const auto& raw : kShowAsOthers) EXPECT_EQ(text.find(raw), std::string::npos) << what << " shows one raw:\n" << text;
  }
  auto listed = run_memrun({"list", dir.path() + "/spec.yaml"});
  for (const auto& raw : kShowAsOthers) EXPECT_EQ(listed.out.find(raw), std::string::npos) << listed.out;
  auto compared = run_memrun({"compare", dir.path() + "/report.json", dir.path() + "/report.json"});
  for (const auto& raw : kShowAsOthers) EXPECT_EQ(compared.out.find(raw), std::string::npos) << compared.out;
}

TEST_F(Ci, AReportThatContradictsItselfOrNestsAMillionDeepIsRefusedWithExit2) {
  auto run = run_spec(dir, "tests:\n  - {name: small, run: 'true', memory: 16MiB}\n");
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  std::string base = dir.path() + "/report.json";
  // A head that says oom, not passed, one kill, while its run says pass at
  // 1 MiB: once "improved", exit 0.
  auto head = run.report;
  auto& t = head["tests"][0];
  t["outcome"] = "oom", t["passed"] = false, t["oom_kills"] = 1;
  t["runs"][0]["outcome"] = "pass", t["runs"][0]["passed"] = true, t["runs"][0]["peak_bytes"] = 1 << 20;
  std::string forged = dir.write("forged.json", head.dump());
  auto compared = run_memrun({"compare", base, forged});
  EXPECT_EQ(compared.exit_code, 2) << compared.out << compared.err;
  EXPECT_NE(compared.err.find("tests[0] 'small': the record contradicts itself"), std::string::npos) << compared.err;
  // An `env` a million lists deep: once a segmentation fault (exit 139).
  std::string text = run.report.dump();
  size_t env = text.find("\"env\":");
  std::string deep = dir.write("deep.json", text.substr(0, env) + "\"env\":" + std::string(1000000, '[') +
                                                std::string(1000000, ']') + ",\"was_env\":" + text.substr(env + 6));
  for (const auto& args : std::vector<std::vector<std::string>>{{"compare", base, deep}, {"merge", deep}}) {
    auto refused = run_memrun(args);
    EXPECT_EQ(refused.exit_code, 2) << args[0] << ": " << refused.err.substr(0, 500);
    EXPECT_NE(refused.err.find("nested more than 64 deep"), std::string::npos) << refused.err.substr(0, 500);
  }
}

// Every `run:`/`script:` text of a CI file, wherever it is in the YAML.
void scripts_of(const YAML::Node& node, std::vector<std::string>& out) {
  if (node.IsMap()) {
    for (const auto& kv : node) {
      std::string key = kv.first.as<std::string>();
      if ((key == "run" || key == "script") && kv.second.IsScalar()) out.push_back(kv.second.as<std::string>());
      else if (key == "script" && kv.second.IsSequence())
        for (const auto& line : kv.second) out.push_back(line.as<std::string>());
      else scripts_of(kv.second, out);
      // The action's `args:` are memrun flags too.
      if (key == "with" && kv.second["args"]) out.push_back("memrun " + kv.second["args"].as<std::string>());
    }
  } else if (node.IsSequence()) {
    for (const auto& n : node) scripts_of(n, out);
  }
}

// The CI examples and the action name only flags memrun has: each memrun
// command line in them (a shell command whose program is memrun), split
// into its words, and every --flag checked against `memrun [SUBCOMMAND]
// --help`.
TEST_F(Ci, TheCiExamplesAndTheActionPassOnlyFlagsMemrunHas) {
  std::map<std::string, std::string> help;
  auto help_of = [&](const std::string& sub) -> const std::string& {
    if (!help.count(sub)) {
      auto r = sub.empty() ? run_memrun({"--help"}) : run_memrun({sub, "--help"});
      EXPECT_EQ(r.exit_code, 0) << sub << r.err;
      help[sub] = r.out;
    }
    return help[sub];
  };
  const std::set<std::string> subcommands = {"exec", "list", "bisect", "compare", "merge", "repro", "gc", "doctor"};
  int checked = 0;
  for (const char* file : {"docs/ci/github-actions.yml", "docs/ci/gitlab-ci.yml", "docs/ci/action/action.yml"}) {
    std::vector<std::string> scripts;
    scripts_of(YAML::LoadFile(std::string(SOURCE_DIR) + "/" + file), scripts);
    for (std::string text : scripts) {
      text = std::regex_replace(text, std::regex("\\\\\n"), " ");  // backslash-newline continues a line
      std::stringstream commands(std::regex_replace(text, std::regex("&&|\\|\\||;|\\|"), "\n"));
      for (std::string command; std::getline(commands, command);) {
        std::istringstream in(command);
        std::vector<std::string> words;
        for (std::string w; in >> w;) words.push_back(w);
        size_t at = 0;
        while (at < words.size() && words[at].find("memrun") == std::string::npos) ++at;
        // The program itself is memrun (build/memrun, "$(command -v memrun)"),
        // not a word that mentions it (memrun-1.json, a step's name).
        if (at == words.size() || !std::regex_search(words[at], std::regex("(^|/|v )memrun\\)?\"?$"))) continue;
        std::string sub = at + 1 < words.size() && subcommands.count(words[at + 1]) ? words[at + 1] : "";
        for (size_t i = at + 1; i < words.size(); ++i) {
          std::smatch m;
          if (!std::regex_match(words[i], m, std::regex("(--[a-z][a-z-]*)(=.*)?"))) continue;
          ++checked;
          EXPECT_NE(help_of(sub).find(m[1].str()), std::string::npos)
              << file << ": memrun " << sub << " has no flag " << m[1] << "\n  in: " << command;
        }
      }
    }
  }
  EXPECT_GE(checked, 10) << "the memrun command lines were not found";
}

}  // namespace
}  // namespace memrun::testing

// Making a test's record: its identity from the plan, its verdict from its
// observation (verdict/decide.cc), the tail of its logs when it did not pass.
#include "runner/verdict/record.h"

#include <pugixml.hpp>
#include <re2/re2.h>


#include "runner/base/files.h"
#include "runner/base/utf8.h"
#include "runner/plan/plan.h"
#include "runner/spec/spec.h"
#include "runner/verdict/decide.h"

namespace memrun {

void Timeline::add(double t, uint64_t cur, uint64_t a, uint64_t f) {
  if (++skipped < stride) return;
  skipped = 0;
  if (t_s.size() >= kMaxPoints) {
    // Keep every other point; from now on record half as often.
    for (size_t i = 0; 2 * i < t_s.size(); ++i) {
      t_s[i] = t_s[2 * i];
      current[i] = current[2 * i];
      anon[i] = anon[2 * i];
      file[i] = file[2 * i];
    }
    size_t n = (t_s.size() + 1) / 2;
    t_s.resize(n), current.resize(n), anon.resize(n), file.resize(n);
    stride *= 2;
  }
  t_s.push_back(t), current.push_back(cur), anon.push_back(a), file.push_back(f);
}

TestIdentity identity_of(const PlannedTest& p) {
  const TestSpec& t = *p.test;
  TestIdentity id;
  id.name = t.name;
  id.spec = p.spec->path;
  id.line = t.line;
  id.command = t.command;
  id.env = t.env;
  id.tags = t.tags;
  id.expected = t.expect.describe();
  id.requested_limit = t.memory;
  id.swap_limit = t.swap;
  id.memory_high = t.memory_high;
  id.stdout_path = p.stdout_path();
  id.stderr_path = p.stderr_path();
  id.inputs = t.inputs;
  id.timeout_s = static_cast<double>(t.timeout.count()) / 1e3;
  if (t.max_increase) id.max_increase = std::pair{t.max_increase->percent, t.max_increase->bytes};
  return id;
}

namespace {

// What GoogleTest's XML results (a file it writes once its cases ran) say
// of the case its command selects (--gtest_filter=Suite.Case/1): "failed"
// (a <failure>), "skipped", "passed", "none" (listed as run, but never
// started: its start time is the epoch, as when a global environment's
// SetUp skipped or failed, 1.10+); empty when the file or the case is not
// there (the program ended before it wrote them). Only the case that ran
// and is named so counts (the filter leaves the others "notrun"; another
// process of the test, a helper that runs the program again, may have
// written results of other cases), its name as GoogleTest writes it: the
// control bytes XML cannot hold dropped (all below 0x20 but tab, CR, LF).
std::string gtest_said(const std::string& xml, const std::vector<std::string>& argv) {
  std::string name;
  for (const auto& a : argv)
    if (a.rfind("--gtest_filter=", 0) == 0) name = a.substr(15);
  std::erase_if(name, [](char c) { return static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r'; });
  pugi::xml_document doc;
  if (!doc.load_buffer(xml.data(), xml.size())) return "";
  pugi::xml_node t;
  for (auto c : doc.child("testsuites").children("testsuite"))
    for (auto k : c.children("testcase"))
      if (std::string(k.attribute("status").as_string()) == "run" &&
          std::string(k.attribute("classname").as_string()) + "." + k.attribute("name").as_string() == name)
        t = k;
  if (!t) return "";
  if (t.child("failure")) return "failed";
  if (t.child("skipped") || std::string(t.attribute("result").as_string()) == "skipped") return "skipped";
  std::string started = t.attribute("timestamp").as_string();  // local time: the epoch is 1969 west of UTC
  if (started.rfind("1970-01-01T", 0) == 0 || started.rfind("1969-12-31T", 0) == 0) return "none";
  return "passed";
}

}  // namespace

std::string said_in_results(const ToolRules& rules, const std::string& results, const std::vector<std::string>& argv) {
  if (rules.gtest_results) return gtest_said(results, argv);
  if (rules.outcome_file)
    for (const char* word : {"passed", "failed", "skipped", "none"})
      if (results == word) return word;
  return "";
}

// RE2: linear in the output, never a stall; an expression RE2 cannot take
// matches nothing. Byte by byte (Latin-1), as ctest's own expressions
// match: output and names need not be UTF-8.
void match_output(const ToolRules& rules, const std::string& text, Observation& o) {
  if (!rules.reads_output() || o.ending != Ending::exited) return;
  RE2::Options options;
  options.set_log_errors(false);
  options.set_encoding(RE2::Options::EncodingLatin1);
  auto any = [&](const std::vector<std::string>& list) {
    for (const auto& e : list) {
      RE2 re(e, options);
      if (re.ok() && RE2::PartialMatch(text, re)) return true;
    }
    return false;
  };
  o.pass_matched = any(rules.pass_regex);
  o.fail_matched = any(rules.fail_regex);
  o.skip_matched = any(rules.skip_regex);
}

TestRecord make_record(const PlannedTest& p, Observation observed) {
  // An OOM kill within one sample interval: the group's figures, read after
  // the kill, no longer hold the victim's memory; the kernel's figures at
  // the kill (its log) do.
  if (observed.samples == 0 && !observed.oom_victims.empty()) {
    cgroup::Breakdown& b = observed.at_peak;
    b.anon = b.file = b.shmem = 0;
    for (const auto& k : observed.oom_victims) b.anon += k.anon_rss, b.file += k.file_rss, b.shmem += k.shmem_rss;
  }
  TestRecord r{identity_of(p), {}, decide(*p.test, observed), {}};
  // A lost log does not change the verdict, but the report says so.
  if (!observed.log_error.empty())
    r.verdict.reason += (r.verdict.reason.empty() ? "" : "; ") + observed.log_error;
  if (!r.verdict.passed && observed.ending != Ending::not_started && observed.ending != Ending::not_run) {
    for (const auto& path : {p.stderr_path(), p.stdout_path()}) {
      std::string tail = log_tail(path, 10);
      if (!tail.empty()) observed.log_tail += (observed.log_tail.empty() ? "" : "\n") + tail;
    }
    observed.log_tail = storable(observed.log_tail, true);
  }
  r.observed = std::move(observed);
  const Verdict& v = r.verdict;
  r.runs = {{v.peak, v.working_set_peak, v.outcome, v.passed, r.observed.duration_s, v.figures_hold, r.observed.blocks}};
  return r;
}

TestRecord combine_runs(std::vector<TestRecord> runs) {
  size_t chosen = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const Verdict& v = runs[i].verdict;
    const Verdict& best = runs[chosen].verdict;
    if (!v.passed && best.passed) chosen = i;
    else if (v.passed == best.passed && best.passed && v.peak > best.peak) chosen = i;
  }
  std::vector<RunFigures> figures;
  for (const auto& r : runs) figures.insert(figures.end(), r.runs.begin(), r.runs.end());
  TestRecord out = std::move(runs[chosen]);
  out.runs = std::move(figures);
  return out;
}

}  // namespace memrun

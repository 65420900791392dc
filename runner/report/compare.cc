// Comparing two reports: the rule (every run beyond every run, by more than
// the threshold) and its outputs.
#include "runner/report/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <pugixml.hpp>

#include "runner/base/units.h"
#include "runner/base/utf8.h"
#include "runner/report/ci_outputs.h"
#include "runner/report/threshold.h"

namespace memrun {

const char* to_string(Change change) {
  switch (change) {
    case Change::regressed: return "regressed";
    case Change::improved: return "improved";
    case Change::unchanged: return "unchanged";
    case Change::added: return "new";
    case Change::gone: return "gone";
    case Change::not_comparable: return "not comparable";
    case Change::failed_in_head: return "failed in head";
    case Change::failed_in_base: return "failed in base";
    case Change::failed_in_both: return "failed in both";
    case Change::skipped: return "skipped";
  }
  return "not comparable";
}

bool compared(Change c) { return c == Change::regressed || c == Change::improved || c == Change::unchanged; }

bool outcome_change(Change c) {
  return c == Change::failed_in_head || c == Change::failed_in_base || c == Change::failed_in_both ||
         c == Change::skipped;
}

namespace {

std::string key(const TestRecord& r) { return r.test.spec + '\n' + r.test.name; }

// Whether one run ended the way the test's spec expects (`expected` as
// Expectation::describe() writes it; a report older than the field
// expected a pass). Only such a run is a measurement of the test.
bool as_expected(const RunFigures& run, const std::string& expected) {
  if (expected == "oom") return run.outcome == Outcome::oom || run.outcome == Outcome::thrash;
  if (expected == "fail") return run.outcome == Outcome::fail;
  // A run's figures do not keep its exit code: its verdict judged it.
  if (expected.rfind("exit ", 0) == 0) return run.passed;
  return run.outcome == Outcome::pass;
}

// How one side's runs of a test ended.
struct Side {
  bool failed = false;   ///< a run did not end as expected (nor was skipped)
  bool skipped = false;  ///< a run was skipped by its suite's tool
  std::string outcomes;  ///< "oom 3/3", "pass 2/3, fail 1/3"
};

Side side_of(const TestRecord& r) {
  std::vector<RunFigures> runs = r.runs;
  RunFigures verdict{r.verdict.peak, r.verdict.working_set_peak, r.verdict.outcome, r.verdict.passed, 0,
                     r.verdict.figures_hold};
  if (runs.empty()) runs.push_back(verdict);
  Side s;
  std::map<Outcome, size_t> counts;
  for (const auto& run : runs) {
    ++counts[run.outcome];
    if (run.outcome == Outcome::skipped) s.skipped = true;
    // A run that got around its limit can end as expected, but its figures
    // do not hold (verdict/decide.cc): not a measurement either.
    else if (!as_expected(run, r.test.expected) || !run.figures_hold) s.failed = true;
  }
  for (const auto& [outcome, n] : counts)
    s.outcomes += fmt::format("{}{} {}/{}", s.outcomes.empty() ? "" : ", ", to_string(outcome), n, runs.size());
  // The record's own verdict is one of its runs' (combine_runs): one that
  // says otherwise (an oom whose runs say pass) makes a record that
  // contradicts itself, and such a side is no measurement either.
  if (!counts.count(r.verdict.outcome)) s.outcomes += fmt::format(" (the record says {})", to_string(r.verdict.outcome));
  if (r.verdict.outcome == Outcome::skipped) s.skipped = true;
  else if (!as_expected(verdict, r.test.expected) || !verdict.figures_hold) s.failed = true;
  return s;
}

// The gated figure of each run, sorted.
std::vector<uint64_t> figures(const TestRecord& r, bool working_set) {
  std::vector<uint64_t> out;
  for (const auto& run : r.runs) out.push_back(working_set ? run.working_set_peak : run.peak);
  if (out.empty()) out.push_back(working_set ? r.verdict.working_set_peak : r.verdict.peak);
  std::sort(out.begin(), out.end());
  return out;
}

uint64_t median(const std::vector<uint64_t>& sorted) {
  size_t n = sorted.size();
  return n % 2 ? sorted[n / 2] : sorted[n / 2 - 1] / 2 + sorted[n / 2] / 2;
}

// What differs between the machines (or memrun builds) of two reports.
// Sets `incomparable` when the difference changes what is measured.
std::vector<std::string> environment_warnings(const RunInfo& b, const RunInfo& h, std::string* incomparable) {
  std::vector<std::string> w;
  if (b.backend != h.backend || b.cgroup_mode != h.cgroup_mode)
    *incomparable = fmt::format("measured on another backend ({} {} in base, {} {} in head): a cgroup's figures "
                                "differ between backends; compare reports of the same backend",
                                b.backend, b.cgroup_mode, h.backend, h.cgroup_mode);
  auto differs = [&](const char* what, const std::string& x, const std::string& y, const char* why) {
    if (x != y) w.push_back(fmt::format("{} differs ({} in base, {} in head): {}", what, x.empty() ? "?" : x,
                                        y.empty() ? "?" : y, why));
  };
  differs("memrun version", b.memrun_version, h.memrun_version,
          "figures may differ for that reason alone; rerun the base with the same memrun");
  differs("kernel", b.kernel, h.kernel, "the kernel's accounting of memory changes between versions");
  differs("transparent huge pages", b.environment.thp, h.environment.thp, "THP changes how much a touched range costs");
  auto env_text = [](const std::map<std::string, std::string>& env) {
    std::string out;
    for (const auto& [k, v] : env) out += (out.empty() ? "" : " ") + k + "=" + v;
    return out.empty() ? std::string("none") : out;
  };
  differs("allocator settings", env_text(b.environment.allocator_env), env_text(h.environment.allocator_env),
          "malloc's arenas and caches change a program's footprint");
  differs("swap", format_size(b.environment.swap_bytes), format_size(h.environment.swap_bytes),
          "memory in swap is not in the peak");
  differs("CPUs", std::to_string(b.environment.cpus), std::to_string(h.environment.cpus),
          "per-thread arenas and caches grow with CPUs");
  return w;
}

// What a test expects (a report older than the field expected a pass).
// What a record's figures are of (TestIdentity::measured), as a note says it.
std::string measured_text(const std::string& measured) {
  return measured == "forked_case" ? "a forked case (pytest --memrun)" : "a whole process";
}

std::string expectation(const TestRecord& r) { return r.test.expected.empty() ? "pass" : r.test.expected; }

// "32.0 MiB in base, 48.0 MiB in head"; where the two round alike, exact:
// "32.0 MiB (33554432 bytes) in base, 32.0 MiB (33554433 bytes) in head".
std::string two_sizes(uint64_t base, uint64_t head) {
  std::string b = format_size(base), h = format_size(head);
  if (b == h && base != head) b += fmt::format(" ({} bytes)", base), h += fmt::format(" ({} bytes)", head);
  return b + " in base, " + h + " in head";
}

// Of two explained runs of a test, the lines of the test's own code whose
// bytes at the profiler's peak changed by more than `allowed`, most first.
// Sites of one line (a thread pool's beside the line's own) add up; a line
// among one side's top sites only counts 0 on the other.
std::vector<WhereChange> where_changes(const TestRecord& b, const TestRecord& h, uint64_t allowed) {
  // A profiled run killed (by its limit, its time bound) left a profile
  // cut short: no measurement either.
  auto explained = [](const TestRecord& r) {
    return r.explanation && r.explanation->status == "explained" && r.explanation->exit_code >= 0;
  };
  if (!explained(b) || !explained(h)) return {};
  std::map<std::string, WhereChange> by_line;
  for (const auto* side : {&b, &h})
    for (const auto& s : side->explanation->sites) {
      if (s.stack.empty() || library_file(s.stack[s.where].file)) continue;
      WhereChange& w = by_line[frame_text(s.stack[s.where])];
      (side == &b ? w.base : w.head) += s.bytes;
      w.where = line_text(s);
    }
  std::vector<WhereChange> out;
  for (auto& [line, w] : by_line)
    if ((w.head > w.base ? w.head - w.base : w.base - w.head) > allowed) out.push_back(std::move(w));
  auto size = [](const WhereChange& w) { return w.head > w.base ? w.head - w.base : w.base - w.head; };
  std::stable_sort(out.begin(), out.end(), [&](const auto& x, const auto& y) { return size(x) > size(y); });
  if (out.size() > 3) out.resize(3);
  return out;
}

TestChange judge(const TestRecord& b, const TestRecord& h, const CompareOptions& o) {
  TestChange c;
  c.name = h.test.name;
  c.spec = h.test.spec;
  c.line = h.test.line;
  // The working set is an estimate from samples (verdict/decide.cc): it moves with
  // where the samples fell. It is compared only where both sides had to
  // subtract page cache and no input's cache was made reproducible by
  // eviction (then the kernel's exact peak is the same cold every run).
  bool working_set = o.gate == Gate::working_set ||
                     (o.gate == Gate::automatic && b.test.inputs.empty() && h.test.inputs.empty() &&
                      b.verdict.headroom_basis == HeadroomBasis::working_set && h.verdict.headroom_basis == HeadroomBasis::working_set);
  c.figure = working_set ? "working set" : "peak";
  // The test's own max_increase wins over --max-increase, either over the default.
  std::optional<GivenThreshold> given;
  if (h.test.max_increase) given = GivenThreshold{{h.test.max_increase->first, h.test.max_increase->second}, ThresholdRule::spec};
  else if (o.threshold) given = GivenThreshold{*o.threshold, ThresholdRule::flag};
  auto bf = figures(b, working_set), hf = figures(h, working_set);
  SeriesChange s = compare_series(bf, hf, given);
  c.base_lo = s.base_lo, c.base = s.base, c.base_hi = s.base_hi, c.base_runs = bf.size();
  c.head_lo = s.head_lo, c.head = s.head, c.head_hi = s.head_hi, c.head_runs = hf.size();
  c.threshold = s.threshold;
  Side bs = side_of(b), hs = side_of(h);
  c.base_outcomes = bs.outcomes, c.head_outcomes = hs.outcomes;
  // A run that crashed, timed out or was killed measured nothing: its peak
  // is where it died, not what the code needs.
  if (hs.failed || bs.failed) {
    c.change = hs.failed ? (bs.failed ? Change::failed_in_both : Change::failed_in_head) : Change::failed_in_base;
    c.reason = hs.failed ? h.verdict.reason : b.verdict.reason;
    c.note = hs.failed ? fmt::format("{} in head{}", hs.outcomes,
                                     bs.failed ? ", and " + bs.outcomes + " in base: it fails on both sides"
                                               : " (" + bs.outcomes + " in base)")
                       : fmt::format("{} in base, {} in head: it ends as expected again", bs.outcomes, hs.outcomes);
  } else if (hs.skipped || bs.skipped) {
    c.change = Change::skipped;
    c.note = fmt::format("{} in base, {} in head: a skipped run measured nothing", bs.outcomes, hs.outcomes);
  } else if (b.test.requested_limit != h.test.requested_limit) {
    c.change = Change::not_comparable;
    c.note = fmt::format("its limit changed ({}): a limit changes what the kernel reclaims",
                         two_sizes(b.test.requested_limit, h.test.requested_limit));
  } else if (b.test.measured != h.test.measured) {
    // pytest --memrun measures a case's fork; a spec's suites: pytest, its
    // whole process (the interpreter's start-up, its imports).
    c.change = Change::not_comparable;
    c.note = fmt::format("one side measured {}, the other {}: their figures differ by what pytest had loaded",
                         measured_text(b.test.measured), measured_text(h.test.measured));
  } else if (expectation(b) != expectation(h)) {
    // An expected OOM's peak is its limit, not what the code needs.
    c.change = Change::not_comparable;
    c.note = fmt::format("its expectation changed (expect {} in base, {} in head): the figures measure different "
                         "endings", expectation(b), expectation(h));
  } else {
    c.change = s.change;
  }
  return c;
}

// The peaks of block `name` (a memrun_peak block: record.h BlockFigures)
// over a record's runs that measured it, sorted.
std::vector<uint64_t> block_figures(const TestRecord& r, const std::string& name) {
  std::vector<uint64_t> out;
  auto add = [&](const std::vector<BlockFigures>& blocks) {
    for (const auto& b : blocks)
      if (b.name == name) out.push_back(b.peak);
  };
  for (const auto& run : r.runs) add(run.blocks);
  if (r.runs.empty()) add(r.observed.blocks);
  std::sort(out.begin(), out.end());
  return out;
}

// Each block both sides measured, compared as the test's peak is (the
// same rule and threshold): only where the test's own runs are
// measurements on both sides (`test` compared figures).
std::vector<TestChange> block_changes(const TestRecord& b, const TestRecord& h, const TestChange& test,
                                      const CompareOptions& o) {
  std::vector<TestChange> out;
  if (!compared(test.change)) return out;
  std::optional<GivenThreshold> given;
  if (h.test.max_increase) given = GivenThreshold{{h.test.max_increase->first, h.test.max_increase->second}, ThresholdRule::spec};
  else if (o.threshold) given = GivenThreshold{*o.threshold, ThresholdRule::flag};
  std::vector<std::string> names;
  for (const auto& blk : (h.runs.empty() ? h.observed.blocks : h.runs.front().blocks)) names.push_back(blk.name);
  for (const auto& name : names) {
    auto bf = block_figures(b, name), hf = block_figures(h, name);
    if (bf.empty() || hf.empty()) continue;
    SeriesChange s = compare_series(bf, hf, given);
    TestChange c;
    c.name = h.test.name, c.spec = h.test.spec, c.line = h.test.line;
    c.block = name;
    c.figure = "block " + name;
    c.change = s.change;
    c.base_lo = s.base_lo, c.base = s.base, c.base_hi = s.base_hi, c.base_runs = bf.size();
    c.head_lo = s.head_lo, c.head = s.head, c.head_hi = s.head_hi, c.head_runs = hf.size();
    c.threshold = s.threshold;
    c.base_outcomes = test.base_outcomes, c.head_outcomes = test.head_outcomes;
    out.push_back(std::move(c));
  }
  return out;
}

// A test found on one side only: new in head, or gone from it.
TestChange one_side(const TestRecord& r, Change change) {
  TestChange t;
  t.name = r.test.name, t.spec = r.test.spec, t.line = r.test.line, t.change = change, t.figure = "peak";
  auto f = figures(r, false);
  bool head = change == Change::added;
  (head ? t.head_lo : t.base_lo) = f.front();
  (head ? t.head : t.base) = median(f);
  (head ? t.head_hi : t.base_hi) = f.back();
  (head ? t.head_runs : t.base_runs) = f.size();
  Side s = side_of(r);
  (head ? t.head_outcomes : t.base_outcomes) = s.outcomes;
  // A new test that fails in head fails the gate like any other.
  if (head && s.failed) {
    t.change = Change::failed_in_head;
    t.reason = r.verdict.reason;
    t.note = s.outcomes + " in head; it is new (not in base)";
  } else if (head && s.skipped) {
    t.change = Change::skipped;
    t.note = s.outcomes + " in head; it is new (not in base)";
  }
  return t;
}

int rank(Change c) {
  switch (c) {
    case Change::failed_in_head: return 0;
    case Change::failed_in_both: return 1;
    case Change::regressed: return 2;
    case Change::improved: return 3;
    case Change::failed_in_base: return 4;
    case Change::not_comparable: return 5;
    case Change::skipped: return 6;
    case Change::added: return 7;
    case Change::gone: return 8;
    case Change::unchanged: return 9;
  }
  return 9;
}

std::string plural(size_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

std::string change_text(const TestChange& t) {
  if (t.change == Change::added || t.change == Change::gone || outcome_change(t.change)) return "-";
  return fmt::format("{}{} ({:+.1f}%)", t.delta() >= 0 ? "+" : "-", format_size(static_cast<uint64_t>(std::llabs(t.delta()))),
                     t.pct());
}

std::string side_text(uint64_t median_value, uint64_t lo, uint64_t hi, size_t runs) {
  if (runs == 0) return "-";
  if (runs == 1) return format_size(median_value);
  return fmt::format("{} ({}–{})", format_size(median_value), format_size(lo), format_size(hi));
}

const char* icon(Change c) {
  switch (c) {
    case Change::regressed: return "❌";
    case Change::improved: return "✅";
    case Change::unchanged: return "➖";
    case Change::added: return "🆕";
    case Change::gone: return "🗑️";
    case Change::not_comparable: return "⚠️";
    case Change::failed_in_head: return "❌";
    case Change::failed_in_both: return "❌";
    case Change::failed_in_base: return "⚠️";
    case Change::skipped: return "⏭️";
  }
  return "";
}

// A side as the outputs show it: its figures when they are a measurement,
// else how its runs ended ("oom 3/3").
std::string base_text(const TestChange& t) {
  return outcome_change(t.change) ? (t.base_outcomes.empty() ? "-" : t.base_outcomes)
                                  : side_text(t.base, t.base_lo, t.base_hi, t.base_runs);
}
std::string head_text(const TestChange& t) {
  return outcome_change(t.change) ? (t.head_outcomes.empty() ? "-" : t.head_outcomes)
                                  : side_text(t.head, t.head_lo, t.head_hi, t.head_runs);
}

// Whether a change compared figures (and a threshold decided it).

// What decided a compared test, after `sep`: "spread 0.2%: threshold 2% (17.6 MiB)";
// "" for the rest (and for a comparison written before thresholds were said).
std::string threshold_text(const TestChange& t, const char* sep) {
  return compared(t.change) && !t.threshold.why.empty() ? sep + t.threshold.why : "";
}

// By how much every run of one side cleared every run of the other (0: they overlap).
uint64_t gap(const TestChange& t) {
  if (t.head_lo > t.base_hi) return t.head_lo - t.base_hi;
  return t.base_lo > t.head_hi ? t.base_lo - t.head_hi : 0;
}

bool fails_gate(Change c) {
  return c == Change::regressed || c == Change::failed_in_head || c == Change::failed_in_both;
}

}  // namespace

void explain_changes(Comparison& c, const ReportData& base, const ReportData& head) {
  std::map<std::string, const TestRecord*> in_base, in_head;
  for (const auto& t : base.tests) in_base[key(t)] = &t;
  for (const auto& t : head.tests) in_head[key(t)] = &t;
  for (auto& t : c.tests) {
    t.where.clear();
    auto b = in_base.find(t.spec + '\n' + t.name), h = in_head.find(t.spec + '\n' + t.name);
    // Only where figures were compared: a failed, skipped or incomparable
    // side measured nothing.
    if (compared(t.change) && b != in_base.end() && h != in_head.end())
      t.where = where_changes(*b->second, *h->second, t.threshold.allowed);
  }
}


size_t Comparison::count(Change c) const {
  return static_cast<size_t>(std::count_if(tests.begin(), tests.end(), [&](const TestChange& t) { return t.change == c; }));
}

std::string Comparison::summary() const {
  std::string s;
  if (size_t n = count(Change::failed_in_head)) s += fmt::format("{} failed in head, ", n);
  if (size_t n = count(Change::failed_in_both)) s += fmt::format("{} failed in both, ", n);
  s += plural(count(Change::regressed), "regression", "regressions") + ", " +
                  plural(count(Change::improved), "improvement", "improvements") + ", " +
                  fmt::format("{} unchanged", count(Change::unchanged));
  if (size_t n = count(Change::added)) s += fmt::format(", {} new", n);
  if (size_t n = count(Change::gone)) s += fmt::format(", {} gone", n);
  if (size_t n = count(Change::not_comparable)) s += fmt::format(", {} not comparable", n);
  if (size_t n = count(Change::failed_in_base)) s += fmt::format(", {} failed in base", n);
  if (size_t n = count(Change::skipped)) s += fmt::format(", {} skipped", n);
  return s;
}

Comparison compare_reports(const ReportData& base, const ReportData& head, const CompareOptions& o) {
  Comparison c;
  std::string incomparable;
  c.warnings = environment_warnings(base.info, head.info, &incomparable);
  std::map<std::string, const TestRecord*> in_base;
  for (const auto& t : base.tests) in_base[key(t)] = &t;
  for (const auto& h : head.tests) {
    auto it = in_base.find(key(h));
    if (it == in_base.end()) {
      c.tests.push_back(one_side(h, Change::added));
      continue;
    }
    TestChange t = judge(*it->second, h, o);
    // A failure is one on any backend; figures of two backends are not.
    if (!incomparable.empty() && !outcome_change(t.change)) {
      t.change = Change::not_comparable;
      t.note = incomparable;
    }
    for (auto& block : block_changes(*it->second, h, t, o)) c.tests.push_back(std::move(block));
    c.tests.push_back(t);
    in_base.erase(it);
  }
  for (const auto& b : base.tests) {
    if (in_base.count(key(b))) c.tests.push_back(one_side(b, Change::gone));
  }
  explain_changes(c, base, head);
  std::stable_sort(c.tests.begin(), c.tests.end(), [](const TestChange& a, const TestChange& b) {
    return rank(a.change) != rank(b.change) ? rank(a.change) < rank(b.change) : a.name < b.name;
  });
  return c;
}

std::string comparison_text(const Comparison& c) {
  std::string out = fmt::format("memrun compare: {} (base {}, head {})\n", c.summary(), one_line(c.base_name),
                                one_line(c.head_name));
  for (const auto& w : c.warnings) out += "warning: " + one_line(w) + "\n";
  size_t width = 4;
  for (const auto& t : c.tests) width = std::max(width, cell(t.name).size());
  for (const auto& t : c.tests) {
    out += fmt::format("{:<15} {:<{}}  {:<12} {:>28} -> {:<28} {:>20}  runs {}/{}{}\n", to_string(t.change),
                       cell(t.name), width, outcome_change(t.change) ? "outcomes" : t.figure, base_text(t),
                       head_text(t), change_text(t), t.base_runs, t.head_runs, threshold_text(t, "  "));
    if (t.change == Change::regressed || t.change == Change::improved)
      out += fmt::format("      every run of {} above every run of {} by {}: more than the threshold\n",
                         t.change == Change::regressed ? "head" : "base", t.change == Change::regressed ? "base" : "head",
                         format_size(gap(t)));
    if (!t.note.empty()) out += "      " + one_line(t.note) + "\n";
    if (!t.reason.empty()) out += "      " + one_line(t.reason) + "\n";
    // Where explains a change; the JSON keeps it for every test.
    for (const auto& w : t.change == Change::regressed || t.change == Change::improved ? t.where : std::vector<WhereChange>{})
      out += fmt::format("      where (explained): {} -> {}  {}\n", format_size(w.base), format_size(w.head),
                         one_line(w.where));
  }
  return out;
}

std::string comparison_markdown(const Comparison& c) {
  std::string out = fmt::format("**memrun**: {}\n\n", c.summary());
  for (const auto& w : c.warnings) out += "> ⚠️ " + markdown_literal(w) + "\n>\n";
  out += fmt::format("Compared with {} (base) at the gated figure: the kernel peak, or the working set where page "
                     "cache was subtracted. A change counts when every run of one side is beyond every run of the "
                     "other by more than the threshold: the test's `max_increase`, else `--max-increase`, else with "
                     "3 runs a side the larger of 2%, 1 MiB and 3 times the larger side's spread (the range of its "
                     "runs), with fewer 10%, 1 MiB.\n\n",
                     markdown_literal(c.base_name));
  out += "| | test | figure | base | head | change | runs | threshold |\n|---|---|---|---:|---:|---:|---:|---|\n";
  for (const auto& t : c.tests)
    out += fmt::format("| {} {} | <code>{}</code> | {} | {} | {} | {} | {} / {} | {} |\n", icon(t.change), to_string(t.change),
                       markdown_literal(cell(t.name)), outcome_change(t.change) ? "outcomes" : t.figure,
                       // Sizes are memrun's own text; outcomes and reasons quote the reports.
                       outcome_change(t.change) ? markdown_literal(base_text(t)) : base_text(t),
                       outcome_change(t.change) ? markdown_literal(head_text(t)) : head_text(t),
                       t.reason.empty() ? change_text(t) : markdown_literal(t.reason), t.base_runs, t.head_runs,
                       markdown_literal(threshold_text(t, "")));
  bool where = false;
  for (const auto& t : c.tests)
    for (const auto& w : t.change == Change::regressed || t.change == Change::improved ? t.where : std::vector<WhereChange>{}) {
      if (!where) out += "\nWhere the memory went, by the line of the test's code (both runs explained):\n\n";
      where = true;
      out += fmt::format("- <code>{}</code>: {} → {} at <code>{}</code>\n", markdown_literal(t.name),
                         format_size(w.base), format_size(w.head), markdown_literal(w.where));
    }
  return out;
}


std::string comparison_junit(const Comparison& c) {
  pugi::xml_document doc;
  auto suites = junit_root(doc, "memrun compare");
  auto suite = suites.append_child("testsuite");
  for (auto node : {suites, suite}) {
    if (node == suite) node.append_attribute("name") = "memrun compare";
    node.append_attribute("tests") = c.tests.size();
    node.append_attribute("failures") =
        c.count(Change::regressed) + c.count(Change::failed_in_head) + c.count(Change::failed_in_both);
    node.append_attribute("errors") = 0;
    if (node == suite) node.append_attribute("skipped") = c.count(Change::skipped);
    node.append_attribute("time") = "0.000";
  }
  for (const auto& t : c.tests) {
    auto tc = suite.append_child("testcase");
    tc.append_attribute("name") = t.name.c_str();
    tc.append_attribute("classname") = t.spec.c_str();
    tc.append_attribute("file") = t.spec.c_str();
    tc.append_attribute("line") = t.line;
    tc.append_attribute("time") = "0.000";
    if (compared(t.change) && !t.threshold.why.empty()) {
      auto props = tc.append_child("properties");
      for (const auto& [name, value] : {std::pair{"threshold", t.threshold.why},
                                        std::pair{"threshold_rule", std::string(to_string(t.threshold.rule))}}) {
        auto p = props.append_child("property");
        p.append_attribute("name") = name;
        p.append_attribute("value") = printable(value).c_str();
      }
    }
    if (t.change == Change::regressed) {
      auto f = tc.append_child("failure");
      f.append_attribute("type") = "regressed";
      f.append_attribute("message") = printable(fmt::format("{} {} -> {} ({}), every run above every run of base by "
                                                            "more than the threshold: {}", t.figure,
                                                            format_size(t.base), format_size(t.head), change_text(t),
                                                            t.threshold.why)).c_str();
    } else if (t.change == Change::failed_in_head || t.change == Change::failed_in_both) {
      auto f = tc.append_child("failure");
      f.append_attribute("type") = to_string(t.change);
      f.append_attribute("message") = printable(t.note + (t.reason.empty() ? "" : ": " + t.reason)).c_str();
    } else if (t.change == Change::skipped) {
      tc.append_child("skipped").append_attribute("message") = printable(t.note).c_str();
    } else if (t.change != Change::unchanged && t.change != Change::improved) {
      tc.append_child("system-out").text() = (std::string(to_string(t.change)) + (t.note.empty() ? "" : ": " + t.note)).c_str();
    }
  }
  return xml_text(doc);
}

std::string comparison_annotations(const Comparison& c) {
  std::string out;
  for (const auto& t : c.tests) {
    if (t.change == Change::failed_in_head || t.change == Change::failed_in_both)
      out += fmt::format("::error {}title={}::{}\n", annotation_place(t.spec, t.line),
                         escape_property("memrun: " + t.name + " " + to_string(t.change)),
                         escape_data(t.note + (t.reason.empty() ? "" : ": " + t.reason)));
    if (t.change != Change::regressed) continue;
    out += fmt::format("::error {}title={}::{}\n", annotation_place(t.spec, t.line),
                       escape_property("memrun: " + t.name + " regressed"),
                       escape_data(fmt::format("{} {} in base, {} here ({}); {}", t.figure, format_size(t.base),
                                               format_size(t.head), change_text(t), t.threshold.why)));
  }
  return out;
}

bool gate_fails(const Comparison& c) {
  return std::any_of(c.tests.begin(), c.tests.end(), [](const TestChange& t) { return fails_gate(t.change); });
}

}  // namespace memrun

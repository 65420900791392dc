// A comparison of two reports, as data: what `memrun compare` and a run's
// `--baseline` decide (compare.h), and what a report carries as its
// "comparison" and `merge` keeps.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace memrun {

/// A test's verdict on the change. Only runs that ended the way the spec
/// expects are measurements: a side with a run that crashed, timed out,
/// could not start or was OOM-killed or ended for thrashing unexpectedly
/// makes the test failed on that side, one with a skipped run (and no
/// failed one) skipped; neither is ever regressed, improved or unchanged.
enum class Change {
  regressed, improved, unchanged, added, gone, not_comparable,
  failed_in_head,  ///< it ended as expected in base (or is new), not in head
  failed_in_base,  ///< it did not end as expected in base, did in head
  failed_in_both,  ///< on neither side did every run end as expected
  skipped,         ///< skipped on a side (by its suite's tool), failed on none
};

/// "regressed", "improved", "unchanged", "new", "gone", "not comparable",
/// "failed in head", "failed in base", "failed in both", "skipped".
const char* to_string(Change change);

/// True for the changes that compared no figures because a side failed or
/// was skipped.
bool outcome_change(Change change);
/// Whether a test's figures were compared (neither side failed nor was
/// skipped): regressed, improved, unchanged.
bool compared(Change change);

/// Which rule set a change's threshold (threshold.h).
enum class ThresholdRule {
  spread,  ///< the default with 3 runs a side or more: from the runs' own spread
  fixed,   ///< the default with fewer runs: 10%, 1 MiB
  spec,    ///< the test's own max_increase (its spec, a rule, a pytest marker)
  flag,    ///< --max-increase
};

/// "spread", "fixed", "max_increase", "--max-increase".
const char* to_string(ThresholdRule rule);

/// What a change of figures was held to, and why (compare_series decides it).
struct Threshold {
  ThresholdRule rule = ThresholdRule::fixed;
  /// The max_increase applied (for `spread`, its floor): a share of the
  /// base's median and a size, the larger wins.
  double percent = 0;
  uint64_t bytes = 0;
  uint64_t spread = 0;   ///< the larger side's spread: the range of its runs
  uint64_t allowed = 0;  ///< the increase allowed, bytes: a change must be larger
  std::string why;       ///< "spread 0.2%: threshold 2% (17.6 MiB)"; "" in a comparison from before
  bool operator==(const Threshold&) const = default;
};

/// Where a test's memory went on each side, by the line of its code that
/// allocated it (or whose call a thread pool served): when both sides'
/// records were explained (explain).
struct WhereChange {
  std::string where;  ///< the line: its frame and source text (line_text())
  uint64_t base = 0, head = 0;  ///< bytes held from it at each profiler's peak
  bool operator==(const WhereChange&) const = default;
};

/// One test, base against head.
struct TestChange {
  std::string name, spec;
  /// A memrun_peak block of the test (record.h BlockFigures), compared as
  /// its own figure ("block NAME"); empty for the test's own peak.
  std::string block;
  int line = 0;  ///< in the head's spec (the base's for a gone test)
  Change change = Change::unchanged;
  std::string figure;  ///< "peak" or "working set"
  /// The figure over each side's runs: lowest, median, highest.
  uint64_t base_lo = 0, base = 0, base_hi = 0, head_lo = 0, head = 0, head_hi = 0;
  size_t base_runs = 0, head_runs = 0;
  /// What the change was held to: set where figures were compared
  /// (regressed, improved, unchanged).
  Threshold threshold;
  std::string note;      ///< why it is not comparable, or what else to know
  /// How each side's runs ended, counted ("oom 3/3", "pass 2/3, fail 1/3");
  /// empty for a side the test is not in.
  std::string base_outcomes, head_outcomes;
  /// For a test failed on a side: that side's verdict (head's when both).
  std::string reason;
  /// The lines whose bytes changed most, largest change first (at most 3).
  std::vector<WhereChange> where;
  bool operator==(const TestChange&) const = default;
  int64_t delta() const { return static_cast<int64_t>(head) - static_cast<int64_t>(base); }
  double pct() const { return base ? 100.0 * static_cast<double>(delta()) / static_cast<double>(base) : 0; }
};

/// Every test of both reports, and what differs between their machines.
struct Comparison {
  std::string base_name, head_name;  ///< how the outputs name the two reports
  std::vector<TestChange> tests;     ///< regressions first, then by name
  /// Differences of environment a reader must know of: another kernel,
  /// memrun version, THP mode, allocator settings, machine size.
  std::vector<std::string> warnings;
  bool operator==(const Comparison&) const = default;
  size_t count(Change c) const;
  /// "2 regressions, 1 improvement, 24 unchanged" (then new, gone, not comparable).
  std::string summary() const;
};

/// The comparison as JSON (schema memrun-compare/1), as `memrun compare
/// --json` writes it and the report carries it; both ways in
/// runner/report/json.cc, the report's codec.
std::string comparison_json(const Comparison& c);
/// The comparison comparison_json wrote, typed (figures of a side that was
/// not measured, null there, read as 0). Throws Error(bad_input) naming
/// `where` when it is not one.
Comparison comparison_from_json(const nlohmann::ordered_json& j, const std::string& where);

}  // namespace memrun

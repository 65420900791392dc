// What a change did to memory: two reports (a base branch's and a pull
// request's, say), test by test, with a verdict that respects noise. Used
// by `memrun compare BASE HEAD` and by a run's `--baseline BASE`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runner/report_json.h"
#include "runner/spec.h"

namespace memrun {

/// Which figure a comparison gates on.
enum class Gate {
  automatic,    ///< the working set where both reports subtracted page cache (and no inputs are declared), else the peak
  peak,         ///< the kernel's peak
  working_set,  ///< the peak less reclaimable page cache (an estimate)
};

struct CompareOptions {
  MaxIncrease threshold;  ///< unless a test's spec sets its own max_increase
  Gate gate = Gate::automatic;
};

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

/// One test, base against head.
struct TestChange {
  std::string name, spec;
  int line = 0;  ///< in the head's spec (the base's for a gone test)
  Change change = Change::unchanged;
  std::string figure;  ///< "peak" or "working set"
  /// The figure over each side's runs: lowest, median, highest.
  uint64_t base_lo = 0, base = 0, base_hi = 0, head_lo = 0, head = 0, head_hi = 0;
  size_t base_runs = 0, head_runs = 0;
  uint64_t allowed = 0;  ///< the increase the threshold allows, in bytes
  std::string note;      ///< why it is not comparable, or what else to know
  /// How each side's runs ended, counted ("oom 3/3", "pass 2/3, fail 1/3");
  /// empty for a side the test is not in.
  std::string base_outcomes, head_outcomes;
  /// For a test failed on a side: that side's verdict (head's when both).
  std::string reason;
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
  size_t count(Change c) const;
  /// "2 regressions, 1 improvement, 24 unchanged" (then new, gone, not comparable).
  std::string summary() const;
};

/// Compares `head` against `base`. A test that did not end as its spec
/// expects on a side is failed there, with each side's outcomes counted;
/// one skipped on a side is skipped. Otherwise: a test has regressed when every run of
/// head is above every run of base by more than the threshold (a share of
/// base's median, or a size, the larger); improved the other way round;
/// anything in between is unchanged: a change within the runs' own spread
/// proves nothing. Tests measured on another backend or cgroup mode, under
/// another limit, or that did not run on one side, are not comparable.
Comparison compare_reports(const ReportData& base, const ReportData& head, const CompareOptions& options);

/// The comparison as the console shows it.
std::string comparison_text(const Comparison& c);
/// A Markdown summary line, then the table (for a pull-request comment or
/// $GITHUB_STEP_SUMMARY).
std::string comparison_markdown(const Comparison& c);
/// The comparison as JSON (schema memrun-compare/1).
std::string comparison_json(const Comparison& c);
/// JUnit XML: a testcase per test, a failure per regression and per test
/// failed in head, `skipped` per skipped test.
std::string comparison_junit(const Comparison& c);
/// GitHub annotations: an error at the spec line of each regression and of
/// each test failed in head.
std::string comparison_annotations(const Comparison& c);

/// 1 when a test regressed or failed in head, else 0.
int exit_code_of(const Comparison& c);

}  // namespace memrun

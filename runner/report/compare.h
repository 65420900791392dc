// What a change did to memory: two reports (a base branch's and a pull
// request's, say), test by test, with a verdict that respects noise. Used
// by `memrun compare BASE HEAD` and by a run's `--baseline BASE`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runner/report/comparison.h"
#include "runner/report/json.h"
#include "runner/spec/spec.h"

namespace memrun {

/// Which figure a comparison gates on.
enum class Gate {
  automatic,    ///< the working set where both reports subtracted page cache (and no inputs are declared), else the peak
  peak,         ///< the kernel's peak
  working_set,  ///< the peak less reclaimable page cache (an estimate)
};

struct CompareOptions {
  /// --max-increase: unless a test's spec sets its own max_increase;
  /// nullopt: the default (threshold.h: from the runs' spread with 3 runs
  /// a side, else 10%, 1 MiB).
  std::optional<MaxIncrease> threshold;
  Gate gate = Gate::automatic;
};

/// Compares `head` against `base`. A test that did not end as its spec
/// expects on a side is failed there, with each side's outcomes counted;
/// one skipped on a side is skipped. Otherwise the figures of its runs go
/// through compare_series (threshold.h): regressed, improved or unchanged,
/// with the threshold that decided. Tests measured on another backend or
/// cgroup mode, under another limit or expectation, are not comparable;
/// one on one side only is new or gone.
Comparison compare_reports(const ReportData& base, const ReportData& head, const CompareOptions& options);

/// Sets `where` of each change that compared figures from both sides'
/// explanations (explain), where both profiled runs ended by exiting:
/// compare_reports does; a run with --baseline again once it explained.
void explain_changes(Comparison& c, const ReportData& base, const ReportData& head);

/// The comparison as the console shows it.
std::string comparison_text(const Comparison& c);
/// A Markdown summary line, then the table (for a pull-request comment or
/// $GITHUB_STEP_SUMMARY).
std::string comparison_markdown(const Comparison& c);
/// JUnit XML: a testcase per test, a failure per regression and per test
/// failed in head, `skipped` per skipped test.
std::string comparison_junit(const Comparison& c);
/// GitHub annotations: an error at the spec line of each regression and of
/// each test failed in head.
std::string comparison_annotations(const Comparison& c);

/// Whether the gate fails: a test regressed or failed in head.
bool gate_fails(const Comparison& c);

}  // namespace memrun

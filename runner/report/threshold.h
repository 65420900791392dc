// The rule that calls a measured series changed, and the threshold it
// holds the change to: given (a test's max_increase, --max-increase), or
// by default from the runs' own spread. Every series of figures measured
// by runs that ended as expected goes through compare_series: a test's
// peaks (compare.cc), and a block's peaks once records carry them.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "runner/base/units.h"
#include "runner/report/comparison.h"
#include "runner/spec/spec.h"

namespace memrun {

/// The default, from the runs: with at least kSpreadRuns runs a side, a
/// change must clear the larger of kFloor (2%, 1 MiB) and kSpreadMultiple
/// times the larger side's spread (the range of its runs).
inline constexpr size_t kSpreadRuns = 3;
inline constexpr double kSpreadMultiple = 3;
inline constexpr MaxIncrease kFloor{2, MiB};
/// The default with fewer runs: the spread of one or two runs says little.
inline constexpr MaxIncrease kFixedDefault{10, MiB};

/// A threshold given: a test's max_increase (ThresholdRule::spec) or
/// --max-increase (ThresholdRule::flag).
using GivenThreshold = std::pair<MaxIncrease, ThresholdRule>;

/// One series, base against head: the change and what decided it.
struct SeriesChange {
  Change change = Change::unchanged;  ///< regressed, improved or unchanged
  Threshold threshold;
  uint64_t base_lo = 0, base = 0, base_hi = 0;  ///< lowest, median, highest
  uint64_t head_lo = 0, head = 0, head_hi = 0;
};

/// The rule: regressed when every head figure is above every base figure
/// by more than the threshold, improved the other way round, else
/// unchanged (a change within the runs' own spread proves nothing). The
/// threshold is `given` when there is one, else the default. Each side
/// needs one figure at least, each of a run that ended as expected.
SeriesChange compare_series(std::vector<uint64_t> base, std::vector<uint64_t> head,
                            const std::optional<GivenThreshold>& given);

}  // namespace memrun

// `memrun bisect`: the smallest memory limit at which a test still passes —
// its true requirement, which the page cache makes lower than its kernel
// peak.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "cgroup/cgroup.h"
#include "runner/spec/spec.h"

namespace memrun {

/// How to bisect.
struct BisectOptions {
  uint64_t low = 0;           ///< --memory-range LO (0: from the first run)
  uint64_t high = 0;          ///< --memory-range HI (0: 4x the spec's limit, at least 1 GiB)
  uint64_t tolerance = 0;     ///< --tolerance in bytes (0: use tolerance_pct)
  double tolerance_pct = 1;   ///< --tolerance N% of the result
  int trials = 1;             ///< --trials: a probe passes when all its trials do
  std::string run_dir;        ///< logs of every probe
};

/// What bisecting found: a limit, or why there is none.
struct BisectResult {
  uint64_t minimum = 0;      ///< smallest passing limit found (0: none)
  uint64_t failing = 0;      ///< largest failing limit found (0: none)
  uint64_t first_peak = 0;   ///< kernel peak of the unconstrained run
  int runs = 0;              ///< test runs it took
  /// Why no limit was found ("" when one was): the test does not pass at
  /// the top of the range, failed on its own, or escaped its limit.
  std::string no_limit;
  int interrupted_by = 0;    ///< the signal that stopped it (0: none)
};

/// Bisects `test` in `backend`, printing each probe (limit -> outcome, peak)
/// to `out`.
BisectResult bisect(const TestSpec& test, const Spec& spec, cgroup::Backend& backend,
                    const BisectOptions& options, std::FILE* out);

/// Parses "LO:HI" sizes. Throws Error(usage).
void parse_memory_range(const std::string& text, BisectOptions* options);

/// Parses "1MiB" or "1%". Throws Error(usage).
void parse_tolerance(const std::string& text, BisectOptions* options);

}  // namespace memrun

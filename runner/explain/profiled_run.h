// The profiled run behind an explanation (verdict/explanation.h): which profiler fits
// a test's command, the second run in a cgroup of the run's backend, and
// the profile read back.
#pragma once

#include <string>

#include "runner/plan/plan.h"
#include "runner/run/run.h"
#include "runner/verdict/explanation.h"
#include "runner/verdict/record.h"

namespace memrun {

/// Why `r` is to be explained under `mode` ("oom", "thrash", "headroom",
/// "always"), or "" when it is not: `on-failure` takes a test that failed
/// on memory (OOM-killed, thrashing, headroom below min_headroom). A peak
/// above --baseline's threshold ("regressed") is known only once the run
/// is compared: see explain_regressed.
std::string explain_why(ExplainMode mode, const TestRecord& r);

/// Whether a test `--baseline` found regressed is to be explained under
/// `mode`: on-failure and always take it (a peak above the threshold is a
/// failure on memory), never does not.
bool explain_regressed(ExplainMode mode);

/// Runs `planned` once more under a profiler in `backend`, after the run
/// (never while tests run: the profiled run has the machine to itself), and
/// returns what it found; the profile's reader runs in a group of `backend`
/// too, under a limit. Its files go below `run_dir`/explain. Never throws
/// for what the profiler, its reader or the test did: the explanation says
/// it. A signal to memrun stops what runs (its group removed), sets
/// `interrupted_by` and the explanation's status "interrupted".
Explanation explain_test(const PlannedTest& planned, const TestRecord& r, const std::string& why,
                         cgroup::Backend& backend, const RunOptions& options, const std::string& run_dir,
                         int& interrupted_by);

}  // namespace memrun

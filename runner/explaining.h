// The profiled run behind an explanation (explain.h): which profiler fits
// a test's command, the second run in a cgroup of the run's backend, and
// the profile read back.
#pragma once

#include <string>

#include "runner/explain.h"
#include "runner/plan.h"
#include "runner/record.h"
#include "runner/run.h"

namespace memrun {

/// Why `r` is to be explained under `mode` ("oom", "thrash", "headroom",
/// "always"), or "" when it is not: `on-failure` takes a test that failed
/// on memory (OOM-killed, thrashing, headroom below min_headroom).
std::string explain_why(ExplainMode mode, const TestRecord& r);

/// Runs `planned` once more under a profiler in `backend`, after the run
/// (never while tests run: the profiled run has the machine to itself), and
/// returns what it found. Its files go below `run_dir`/explain. Never
/// throws for what the profiler or the test did: the explanation says it.
Explanation explain_test(const PlannedTest& planned, const TestRecord& r, const std::string& why,
                         cgroup::Backend& backend, const RunOptions& options, const std::string& run_dir);

}  // namespace memrun

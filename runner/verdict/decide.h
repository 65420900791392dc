// The verdict: from the kernel's figures to an outcome, the headroom and
// pass/fail against what the spec expects.
#pragma once

#include "runner/spec/spec.h"
#include "runner/verdict/record.h"

namespace memrun {

/// Decides outcome, verdict and headroom for `observed` against `test`. A
/// pure function.
Verdict decide(const TestSpec& test, const Observation& observed);

/// Whether `bytes` is above `limit` by more than the kernel grants past a
/// limit (decide() fails a test so: its figures do not hold).
bool above_limit(uint64_t bytes, uint64_t limit);

}  // namespace memrun

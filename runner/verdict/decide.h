// The verdict: from the kernel's figures to an outcome, the headroom and
// pass/fail against what the spec expects.
#pragma once

#include "runner/spec/spec.h"
#include "runner/verdict/record.h"

namespace memrun {

/// Decides outcome, verdict and headroom for `observed` against `test`. A
/// pure function.
Verdict decide(const TestSpec& test, const Observation& observed);

}  // namespace memrun

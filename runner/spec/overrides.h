// The overrides that change limits for a run (--scale, --set): they change
// loaded specs, which then pass the spec's checks again.
#pragma once

#include <string>
#include <vector>

#include "runner/spec/spec.h"

namespace memrun {

/// Applies --scale F (every limit times F) and --set NAME.memory=SIZE (one
/// test's limit) to loaded specs. Throws Error(usage) for a bad value or
/// a name no spec has.
void apply_overrides(std::vector<Spec>& specs, double scale, const std::vector<std::string>& sets);

}  // namespace memrun

// `memrun doctor`: what the host offers, whether memrun can enforce memory
// limits here, and the exact fix when it cannot.
#pragma once

#include <cstdio>

#include "cgroup/cgroup.h"
#include "runner/app/result.h"

namespace memrun {

/// Prints the findings to `out`; proves enforcement by making a real group
/// with a limit and reading it back. Returns passed, or stopped by
/// cannot_enforce with the reason printed; a cgroup::Failure of another
/// kind ends it as it ends a run.
Result doctor(const cgroup::OpenOptions& options, std::FILE* out);

}  // namespace memrun

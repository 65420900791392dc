// What memrun tells its user of what the cgroup library found: the
// library says what is wrong (cgroup::Problem, typed), memrun says what to
// do about it in its own terms (its options, its commands).
#pragma once

#include <string>

#include "cgroup/error.h"

namespace memrun {

/// What to do about `problem` here, in memrun's options and commands: only
/// fixes that apply on this host, never the backend just tried; one per
/// line, the lines after the first indented to follow "  fix: ".
std::string advice(const cgroup::Problem& problem);

/// A Failure as the user reads it: the library's sentence and, where memory
/// limits cannot be enforced, memrun's advice.
std::string failure_text(const cgroup::Failure& failure);

/// Whether tests are sealed in their groups, as `memrun doctor` says it.
std::string sealed_sentence(bool sealing);

/// Whether libsystemd can be loaded, as `memrun doctor` says it.
std::string libsystemd_sentence();

}  // namespace memrun

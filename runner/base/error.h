// One error policy for all of memrun: anything that cannot go on throws
// memrun::Error, carrying the message the user reads and what kind of
// failure it is; the cgroup library throws its own cgroup::Failure
// (cgroup/error.h). Only main() catches them, and its one table
// (exit_code, runner/app/main.cc) turns the category into the exit code. A
// failure that belongs to one test (its command cannot start, its cgroup
// cannot be made) is caught by the runner and becomes that test's `error`
// outcome instead.
#pragma once

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace memrun {

/// What kind of failure an Error is; main.cc's table gives each its exit code.
enum class Category {
  usage,           ///< the command line: a flag's value, a missing or extra argument
  bad_input,       ///< a file given to memrun: a spec, a report, a suite's listing
  output,          ///< an output (a report, the run folder) cannot be written where asked
  cannot_enforce,  ///< memory limits cannot be enforced on this host
  system,          ///< a system call memrun needs failed (errno says why)
  internal,        ///< memrun's own mistake
};

/// A failure the user must act on: `what()` says what happened and what to do.
class Error : public std::runtime_error {
 public:
  Error(Category category, const std::string& message) : std::runtime_error(message), category_(category) {}
  Category category() const { return category_; }

 private:
  Category category_;
};

/// Throws Error(category, "<what>: <strerror(errno)>") for the current errno.
[[noreturn]] inline void throw_errno(Category category, const std::string& what) {
  throw Error(category, what + ": " + std::strerror(errno));
}

}  // namespace memrun

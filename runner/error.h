// One error policy for all of memrun: anything that cannot go on throws
// memrun::Error, carrying the message the user reads and the exit code the
// process ends with; the cgroup library throws its own cgroup::Failure
// (cgroup/error.h), which exit_code_of() (runner/main.cc) maps. Only
// main() catches them. A failure that belongs to one test (its command
// cannot start, its cgroup cannot be made) is caught by the runner and
// becomes that test's `error` outcome instead.
#pragma once

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace memrun {

/// Exit codes, as documented in the README.
enum ExitCode : int {
  kExitOk = 0,          ///< every selected test passed
  kExitTestFailed = 1,  ///< at least one test did not pass
  kExitUsage = 2,       ///< bad spec, bad flag, unreadable input
  kExitNoEnforce = 3,   ///< memory limits cannot be enforced on this host
  /// With --unenforceable skip, in place of kExitNoEnforce: automake's and
  /// meson's skip code, which the CMake functions give CTest as
  /// SKIP_RETURN_CODE.
  kExitSkipped = 77,
};

/// A failure the user must act on: `what()` says what happened and what to do.
class Error : public std::runtime_error {
 public:
  Error(int exit_code, const std::string& message)
      : std::runtime_error(message), exit_code_(exit_code) {}
  /// The process exit code this error ends memrun with.
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

/// Throws Error(exit_code, "<what>: <strerror(errno)>") for the current errno.
[[noreturn]] inline void throw_errno(int exit_code, const std::string& what) {
  throw Error(exit_code, what + ": " + std::strerror(errno));
}

}  // namespace memrun

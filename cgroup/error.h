// How the cgroup library fails: one typed error, carrying what it tried,
// on which path, the errno, and, where memory limits cannot be enforced,
// the typed Problem. The library never decides how a program ends nor what
// its user should type: memrun maps a Failure's kind to an exit code in one table (runner/app/main.cc),
// and a Problem to advice in its own terms.
#pragma once

#include <stdexcept>
#include <string>

#include "cgroup/problem.h"

namespace memrun::cgroup {

class Failure : public std::runtime_error {
 public:
  enum class Kind {
    system,          ///< a cgroupfs or bus call failed (errno says why)
    cannot_enforce,  ///< memory limits cannot be enforced here (no backend works)
    unsupported,     ///< the backend lacks what was asked (memory_high on v1)
  };
  /// `message` is the sentence the user reads: what failed and why.
  Failure(Kind kind, const std::string& message, int err = 0, std::string path = "", Problem problem = {})
      : std::runtime_error(message), kind_(kind), errno_(err), path_(std::move(path)), problem_(std::move(problem)) {}
  Kind kind() const { return kind_; }
  int error() const { return errno_; }              ///< errno, 0 when none
  const std::string& path() const { return path_; }  ///< the file or group, when one
  /// What cannot be enforced, typed; kind none for other failures.
  const Problem& problem() const { return problem_; }

 private:
  Kind kind_;
  int errno_;
  std::string path_;
  Problem problem_;
};

/// Throws Failure(kind, "<what>: <strerror(errno)>") for the current errno
/// and `path`.
[[noreturn]] void fail_errno(Failure::Kind kind, const std::string& what, const std::string& path);

}  // namespace memrun::cgroup

// Why memory limits cannot be enforced here, typed: the library states
// what is wrong and the facts around it; what to do about it, in a
// program's own terms (its options, its commands), is the caller's to say.
#pragma once

#include <string>
#include <vector>

#include "cgroup/host.h"

namespace memrun::cgroup {

/// Which backend: for options, and for what a Problem says works instead.
enum class Kind { automatic, v2, v1, systemd };

/// Why memory limits cannot be enforced: what is wrong, and the facts a
/// caller needs to say it and to suggest what would work.
struct Problem {
  enum class Kind {
    none,                     ///< nothing: limits can be enforced
    v2_not_mounted,           ///< cgroup2 is not mounted
    no_v2_group,              ///< `path` is no cgroup v2 directory
    no_memory_controller,     ///< the memory controller is not available in `path`
    no_permission,            ///< this user cannot make groups in `path`
    no_v1_memory,             ///< no cgroup v1 memory hierarchy is mounted
    no_v1_group,              ///< `path` is no directory of the v1 memory hierarchy
    not_unified,              ///< the systemd backend needs cgroup v2 alone; `mode` is what is mounted
    no_libsystemd,            ///< libsystemd cannot be loaded: `detail` says why
    no_manager,               ///< the systemd manager cannot be reached: `detail` says why
    memory_not_delegated,     ///< the manager's cgroup has no memory controller; `detail`: what it has
    scope_without_memory,     ///< the scope `path` came without memory; `detail`: what it has
    controllers_not_enabled,  ///< cgroup.subtree_control of `path` refused `detail` (errno: Failure::error)
    cannot_create_group,      ///< mkdir of the group `path` was refused (errno: `error`)
    scope_refused,            ///< the manager refused to start the scope `path`; `detail`: its answer
    scope_not_started,        ///< the manager's job for the scope `path` did not finish; `detail`: how it ended
    no_move_watch,            ///< the kernel's record of tasks' moves (tracefs at `path`) cannot be read; `detail`: why
  };
  Kind kind = Kind::none;
  std::string backend;  ///< "v2", "v1" or "systemd": the backend that cannot enforce
  std::string path;     ///< the group or directory concerned, when one
  std::string detail;   ///< see each kind
  int error = 0;        ///< errno, where a system call refused
  Mode mode = Mode::none;  ///< how this host mounts cgroups
  bool root = false;       ///< this process is root (the system manager, not the user's)
  unsigned uid = 0;        ///< its user id
  /// Where enforcement failed, what would work here: the backends, other
  /// than the one tried, whose check succeeds.
  std::vector<cgroup::Kind> would_work;
  bool systemd_pid1 = false;  ///< PID 1 is systemd
  /// Auto would use the systemd backend: systemd owns the unified tree and
  /// no parent was given.
  bool systemd_owns = false;
  bool in_container = false;  ///< Docker's or Podman's marks are present
  bool operator==(const Problem&) const = default;
};

/// A problem of `kind` with the backend, the path and the detail it
/// concerns; check() and unenforceable() add the facts around it.
inline Problem make_problem(Problem::Kind kind, std::string backend, std::string path = "", std::string detail = "") {
  Problem p;
  p.kind = kind;
  p.backend = std::move(backend);
  p.path = std::move(path);
  p.detail = std::move(detail);
  return p;
}

/// Throws Failure(cannot_enforce) carrying `problem`, with this host's
/// facts added (mode, root, uid, systemd, container), its message
/// describe(problem).
[[noreturn]] void unenforceable(Problem problem);

/// The problem as a sentence of what is wrong (no advice): "cgroup2 is not
/// mounted", "no permission to create cgroups in /sys/fs/cgroup/x".
std::string describe(const Problem& problem);

}  // namespace memrun::cgroup

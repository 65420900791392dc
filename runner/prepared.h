// pytest cases forked from one pytest process prepared for their suite.
// Started afresh, a case pays pytest's whole start-up (the interpreter,
// pytest, plugins, conftests, the collection of its module): 14x to 120x
// the time of plain pytest on real suites. Prepared, pytest collects the
// suite once (memrun_pytest.py's `serve`), and each case is a fork of it,
// inside the sealed test memrun starts for it as for any other: its groups
// and limit, its pid, mount and cgroup namespaces, its init. The init
// starts no command of its own (Command::vessel_fd); the fork enters the
// init's namespaces through its pidfd (setns, 5.8+), forks the case (a pid
// namespace takes only children), which joins its groups and roots a cgroup
// namespace there, and hands the init the case's wait status when it ends.
// Truth stays the kernel's: the case's group, limit, peak and OOM kills are
// its own; what the prepared process imported is shared copy-on-write, and
// charged to the case only for the pages the case writes.
//
// `prepared: on`, where the seal is (root, a pid namespace, no user
// namespace); a suite whose pytest cannot be prepared (it ends or says
// nothing within kReadyWithin, runs threads, ...) runs each case afresh,
// as `prepared: off` does.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "cgroup/cgroup.h"
#include "runner/launch.h"

namespace memrun {

/// The prepared process's `serve` command for a case's `run` command
/// (memrun_pytest.py), or empty when `argv` is not one.
std::vector<std::string> serve_argv(const std::vector<std::string>& argv);

/// One suite's prepared pytest process. Used on the launcher's thread only;
/// its destructor never waits: the process reads EOF and ends, and it dies
/// with that thread anyway (PR_SET_PDEATHSIG).
class PreparedPytest {
 public:
  /// How long its collection may take before its suite's cases start afresh.
  static constexpr std::chrono::seconds kReadyWithin{300};
  /// The largest request a case is sent with (see start()).
  static constexpr size_t kLargestRequest = 200 * 1024;

  /// `serve`: the process's command (its env without a case's own
  /// variables); its output goes to `log`.
  PreparedPytest(Command serve, std::string log);
  ~PreparedPytest();
  PreparedPytest(const PreparedPytest&) = delete;
  PreparedPytest& operator=(const PreparedPytest&) = delete;

  /// Starts case `cmd` (its `run` command) in `placement`: forked from the
  /// prepared process where it is ready (started and waited for on the
  /// first call), else launched afresh. Throws as launch() does.
  Child start(Command cmd, const cgroup::Placement& placement);

 private:
  bool ready();
  void gone(const std::string& why);

  Command serve_;
  std::string log_;
  enum class State { unstarted, ready, gone } state_ = State::unstarted;
  int socket_ = -1;
  Child process_;
};

/// The prepared processes of a run, one per suite (its command, folder and
/// environment), made on first use.
class PreparedSet {
 public:
  /// `log_dir`: the run's folder, for each process's log.
  Child start(Command cmd, const cgroup::Placement& placement, const std::string& log_dir);

 private:
  std::map<std::string, std::unique_ptr<PreparedPytest>> by_suite_;
};

}  // namespace memrun

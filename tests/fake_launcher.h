// A launcher that starts no process, the seam under the run's loop in its
// unit tests, as ninja's FakeCommandRunner is under its build loop. A
// "process" is a pid no real process can have (above the kernel's
// PID_MAX_LIMIT, so /proc knows nothing of it) and an eventfd that stands
// for its pidfd; what it does is scripted by its test's name, and its
// exits come on the fake clock: after its scripted run time, or at the
// instant a signal reaches it (FakeGroup::signal_all, its group's kill).
// So a loop test's times depend on nothing but the loop's own decisions:
// no scheduler, no load.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runner/launch/launcher.h"

namespace memrun::testing {

class FakeClock;

class FakeLauncher : public Launcher {
 public:
  /// What a test's process does, by the test's name (MEMRUN_TEST in its
  /// environment). The spec's `run:` is never run.
  struct Process {
    /// It exits on its own this long after its start, with `exit_code`;
    /// nullopt: it runs until a signal ends it.
    std::optional<std::chrono::milliseconds> runs_for = std::chrono::milliseconds(0);
    int exit_code = 0;
    /// As it starts it sends this signal to memrun (0: none), as a test's
    /// `kill -TERM $PPID` would.
    int signals_runner = 0;
  };

  explicit FakeLauncher(FakeClock& clock);
  ~FakeLauncher() override;
  FakeLauncher(const FakeLauncher&) = delete;
  FakeLauncher& operator=(const FakeLauncher&) = delete;

  int fd() const override { return ready_; }
  void post(uint64_t serial, Command cmd, cgroup::Placement placement) override;
  std::vector<Started> take() override;
  Child start_now(const Command& cmd, const cgroup::Placement& placement) override;
  std::vector<Ended> reap(const std::vector<int>* only) override;
  /// Nothing to shield, and no probe: a fake process has no namespaces.
  void keep_from_service_managers(Command&) const override {}
  bool pid_namespaces_work() const override { return false; }

  /// Signal `sig` reaches the fake process `pid`: any but 0 ends it now,
  /// killed by it. False when `pid` is none of the fake's.
  bool signal(int pid, int sig);

  std::map<std::string, Process> processes;
  int starts = 0;  ///< fake processes started

 private:
  struct Running {
    std::string test;
    int exit_fd = -1;     // the eventfd the test's pidfd is a copy of
    int test_pidfd = -1;  // that copy's number, as the loop holds it
    int out = -1, err = -1;  // the log pipes' write ends, held until the exit
    bool ended = false;
  };
  void end(int pid, int status);
  FakeClock& clock_;
  int ready_ = -1;  // readable while starts wait for take()
  int next_pid_ = 1 << 23;
  std::map<int, Running> running_;
  std::vector<Started> started_;
  std::vector<Ended> ended_;
};

}  // namespace memrun::testing

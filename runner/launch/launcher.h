// How the run's loop starts tests' processes and learns of their ends: the
// seam between the loop and the processes, as ninja's CommandRunner is
// between its build loop and the commands. RealLauncher forks and execs
// (launch()) on a thread of its own and reaps with wait4; the loop's unit
// tests script starts, exits and statuses instead, with no process at all
// (tests/fake_launcher.h).
//
// RealLauncher's thread: a start suspends the thread that makes it until
// the child execs (launch() clones as vfork does), and a sealed test's
// steps before that exec (it joins its v1 groups, makes its namespaces,
// mounts and /proc) take about a millisecond (bench/RESULTS.md): on this
// thread, the loop meanwhile reads, removes and records the tests before,
// and samples the others.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>
#include <exception>
#include <vector>

#include "cgroup/cgroup.h"
#include "runner/base/worker.h"
#include "runner/launch/child.h"

namespace memrun {

/// Starts processes and collects their ends. Never waits, but for
/// start_now().
class Launcher {
 public:
  /// A start done: its child, or what launch() threw.
  struct Started {
    uint64_t serial;
    Child child;
    std::exception_ptr error;
  };
  /// A child of memrun's that ended: its wait status and resource usage.
  struct Ended {
    pid_t pid;
    int status;
    rusage usage;
  };
  virtual ~Launcher() = default;

  /// Readable when a start is done (then call take()).
  virtual int fd() const = 0;
  /// Starts `cmd` in the group `placement` describes, off the caller's
  /// thread; the group whose fds `placement` holds must stay open until
  /// take() returns the start.
  virtual void post(uint64_t serial, Command cmd, cgroup::Placement placement) = 0;
  /// The starts done since the last call.
  virtual std::vector<Started> take() = 0;
  /// Starts `cmd` now, on the caller's thread (see launch()).
  virtual Child start_now(const Command& cmd, const cgroup::Placement& placement) = 0;
  /// The children that ended since the last call, never waiting. With
  /// `only` (pidfds), those processes alone: a start under way on
  /// post()'s thread has a child whose pid nobody knows yet, which a
  /// wait for any child would take. Else every child, a test's orphans
  /// too (memrun is their subreaper).
  virtual std::vector<Ended> reap(const std::vector<int>* only) = 0;

  /// What this machine allows a start, asked once a process (each probe
  /// forks a short-lived child): see keep_from_service_managers() and
  /// pid_namespaces_work() (shield.h, child.h).
  virtual void keep_from_service_managers(Command& cmd) const = 0;
  virtual bool pid_namespaces_work() const = 0;
};

/// Forks and execs through launch(), on a thread of its own.
class RealLauncher final : public Launcher {
 public:
  /// Makes the init program ready first (see prepare_init_program): its
  /// probe's child must not be reaped by the loop. The thread lives as
  /// long as the RealLauncher: a child's PR_SET_PDEATHSIG fires when the
  /// thread that started it ends.
  explicit RealLauncher(bool init_program);

  int fd() const override { return worker_.fd(); }
  void post(uint64_t serial, Command cmd, cgroup::Placement placement) override {
    worker_.post({serial, std::move(cmd), std::move(placement)});
  }
  std::vector<Started> take() override { return worker_.take(); }
  Child start_now(const Command& cmd, const cgroup::Placement& placement) override { return launch(cmd, placement); }
  std::vector<Ended> reap(const std::vector<int>* only) override;
  void keep_from_service_managers(Command& cmd) const override;
  bool pid_namespaces_work() const override { return memrun::pid_namespaces_work(); }

 private:
  struct Job {
    uint64_t serial;
    Command cmd;
    cgroup::Placement placement;
  };
  static Started start(Job& job);
  Worker<Job, Started> worker_;
};

}  // namespace memrun

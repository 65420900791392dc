// Starts tests' processes on a thread of its own, for the run's loop. A
// start suspends the thread that makes it until the child execs (launch()
// clones as vfork does), and a sealed test's steps before that exec (it
// joins its v1 groups, makes its namespaces, mounts and /proc) take about
// a millisecond (bench/RESULTS.md): on this thread, the loop meanwhile
// reads, removes and records the tests before, and samples the others.
#pragma once

#include <cstdint>
#include <exception>
#include <vector>

#include "cgroup/cgroup.h"
#include "runner/base/worker.h"
#include "runner/launch/child.h"

namespace memrun {

class Launcher {
 public:
  /// A start done: its child, or what launch() threw.
  struct Started {
    uint64_t serial;
    Child child;
    std::exception_ptr error;
  };
  /// Makes the init program ready first (see prepare_init_program): its
  /// probe's child must not be reaped by the loop. The thread lives as
  /// long as the Launcher: a child's PR_SET_PDEATHSIG fires when the
  /// thread that started it ends.
  explicit Launcher(bool init_program);

  /// Readable when a start is done (an eventfd).
  int fd() const { return worker_.fd(); }
  /// launch(cmd, placement) on the thread; the group whose fds
  /// `placement` holds must stay open until take() returns the start.
  void post(uint64_t serial, Command cmd, cgroup::Placement placement) {
    worker_.post({serial, std::move(cmd), std::move(placement)});
  }
  /// The starts done since the last call.
  std::vector<Started> take() { return worker_.take(); }

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

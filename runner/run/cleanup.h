// What follows a test's end, step by step on the loop's timer: the kill of
// what it left running, its logs drained and the kernel's figures read,
// its group removed, an OOM kill's victims named.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cgroup/cgroup.h"
#include "runner/base/clock.h"
#include "runner/base/kernel_log.h"
#include "runner/plan/plan.h"
#include "runner/run/escape_walk.h"
#include "runner/run/log_relay.h"
#include "runner/run/tool_results.h"
#include "runner/verdict/record.h"

namespace memrun {

struct RunContext;

/// Group::kill_step; a Failure is the test's cleanup_error in `o`, and
/// the group counts as not empty yet.
bool kill_step(cgroup::Group& group, Observation& o);

/// One test's cleanup, from the end of its main process until its record
/// can be made. Never waits: each step() does what it can now and says
/// when to come back (next()).
class Cleanup {
 public:
  /// The test's parts it works on, which outlive it.
  struct Parts {
    const PlannedTest& planned;
    const RunContext& context;
    std::unique_ptr<cgroup::Group>& group;
    Observation& observed;
    EscapeWalk& escapes;
    ToolResults& results;
    std::unique_ptr<LogRelay>& out;
    std::unique_ptr<LogRelay>& err;
    bool vessel;
    Clock::time_point t0;  ///< when the test started (the kernel log's kills since)
  };
  /// Begins now, with the kill.
  explicit Cleanup(const Parts& parts);

  /// One step; in order: kill what the test left running until its group
  /// is empty (bounded by 2 s), drain the logs and read the kernel's
  /// figures, remove the group (retried while the kernel says EBUSY, for
  /// up to 2 s), and give the kernel log up to 200 ms to name an OOM
  /// kill's victims. True when all is done.
  bool step(KernelLog& kernel_log);
  /// When step() has something to do.
  Clock::time_point next() const { return next_; }
  /// Until what the test left running is gone.
  bool killing() const { return step_ == Step::killing; }
  /// The processes are gone but a private /dev/shm still holds memory on
  /// its way out (see read_once_drained).
  bool draining_shm() const { return shm_draining_; }

 private:
  enum class Step { killing, reading, removing, awaiting_victims, done };
  /// The kernel's figures, once a private /dev/shm had its time to go;
  /// then the removal.
  void read_once_drained(KernelLog& kernel_log, Clock::time_point now);
  /// The logs' figures, and the kernel's `final` (Group::finish()).
  void read_figures(KernelLog& kernel_log, cgroup::Final final);
  /// Sets Final::oom_at_limit from the victims' `oom_memcg=` where the
  /// kernel's counters left it open.
  void oom_at_limit();
  void remove_group();
  void after(std::chrono::microseconds delay);  // next_, backing off

  Parts parts_;
  Step step_ = Step::killing;
  Clock::time_point next_, give_up_;
  std::chrono::microseconds backoff_{0};
  std::optional<Clock::time_point> shm_drain_until_;  ///< see read_once_drained()
  bool shm_draining_ = false;                         ///< shmem was left when the processes were gone
  std::string log_name_;  // the group, as the kernel's log names it
  std::vector<std::string> limit_paths_;  // Group::limit_paths, for the kills logged late
};

}  // namespace memrun

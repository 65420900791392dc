// The tests running at once, as the run's event loop (run/loop.cc) holds them:
// their timers, their exits, their orphans and the cleanup after them.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "runner/base/clock.h"
#include "runner/base/kernel_log.h"
#include "runner/plan/budget.h"
#include "runner/run/run.h"
#include "runner/run/escape_watch.h"
#include "runner/run/running_test.h"
#include "runner/run/start_queue.h"

namespace memrun {

/// Each running test with the serial its epoll events carry (never reused,
/// so that nothing is mistaken for a later test's fd). Nothing here waits.
class RunningSet {
 public:
  void add(uint64_t serial, size_t index, std::unique_ptr<RunningTest> test);
  bool empty() const { return slots_.empty(); }
  /// The test whose events carry `serial`, or null.
  RunningTest* find(uint64_t serial);
  /// Every move out of its groups the kernel recorded for a running test
  /// (`watch`: null when none is watched), handed to the test.
  void take_moves(EscapeWatch* watch);
  /// Takes the test out (one that could not start), with its `index`.
  std::unique_ptr<RunningTest> remove(uint64_t serial, size_t* index);
  /// Whether a test is starting (see RunningTest::starting).
  bool starting() const;
  /// The nearest of `next` and every test's deadline, sample, cleanup step
  /// and end of grace.
  Clock::time_point next_deadline(Clock::time_point next) const;
  /// Times out, kills after grace and samples the tests due at `now`.
  void on_timers(Clock::time_point now);
  /// A signal: the first stops each test politely (SIGTERM, then SIGKILL
  /// after `grace`); another one kills at once.
  void interrupt(bool first, std::chrono::milliseconds grace);
  std::vector<Progress> progress() const;

  /// Collects the exits (Launcher::reap), then takes every exited test one step further in
  /// its cleanup (see RunningTest::settle): a test whose group is gone
  /// hands its limit back to `admission`; one whose record is made is
  /// reported through `done`. Returns true when fail-fast says to start no
  /// more.
  bool finish_exited(const Clock& clock, KernelLog& kernel_log, Launcher& launcher, Admission& admission,
                     bool fail_fast, const Done& done);

  /// The run failed: each test is killed and its group left to the
  /// Leftovers (see RunningTest::abandon).
  void abandon();
  /// Drops every test at once (see ~RunningTest).
  void clear() { slots_.clear(); }

 private:
  void reap(Launcher& launcher);
  void find_orphans_outside();

  struct Slot {
    uint64_t serial;
    size_t index;    // in the list being run
    bool released;   // its limit handed back to admission
    std::unique_ptr<RunningTest> test;
  };
  std::vector<Slot> slots_;
};

}  // namespace memrun

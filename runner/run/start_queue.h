// Which test starts when: the admission side of the run's event loop
// (run/loop.cc), apart from the loop's waiting and its running tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cgroup/cgroup.h"
#include "runner/plan/budget.h"
#include "runner/plan/plan.h"
#include "runner/run/running_test.h"
#include "runner/spec/inputs.h"
#include "runner/verdict/record.h"

namespace memrun {

/// How the loop hands over a test's record: its index in the list being
/// run, and the record.
using Done = std::function<void(size_t, TestRecord)>;

/// The record of a test that never started: refused (`reason`), or not run
/// because memrun was interrupted (Ending::not_run). `p` is made to run
/// (made_test).
TestRecord unstarted(const PlannedTest& p, Ending ending, const std::string& reason = "");

/// The tests not started yet, in the order offered; Admission (jobs, the
/// memory budget) says which fit now. A test with inputs is admitted first
/// and starts once the evictor has dropped their page cache: each run then
/// reads them from disk and pays for their cache in its own group, the
/// same every time. (Reading them in outside the group instead would leave
/// the test's figures to whichever pages the kernel reclaimed meanwhile: a
/// page is charged to whoever faults it in.) The eviction runs on the
/// evictor's thread, so the loop keeps sampling. Never waits.
class StartQueue {
 public:
  /// Readable when the evictor finished a job: then call take_evicted().
  int evictor_fd() const { return evictor_.fd(); }

  /// A new list to run, offered in `order`: a test that can never fit is
  /// reported through `done` at once, not after the rest; so is a suite's
  /// case its tool would not run (disabled), skipped as it listed it, or
  /// cannot run (not runnable). The tests are the plan's, or made to run
  /// already; `run_dir` is where made_test() puts the plan's logs.
  void offer(const std::vector<const PlannedTest*>& tests, const std::vector<size_t>& order, Admission& admission,
             const Done& done, const std::string& run_dir);

  /// Admits the queued tests that fit now, in the offered order, and calls
  /// `start(index)` for each ready to start (inputs evicted, or none): a
  /// test that cannot fit lets smaller ones behind it start (they only use
  /// what is free). ctest's order holds (spec/order.h): a test waits for
  /// the tests it comes after, is not run when a fixture's setup failed,
  /// never runs beside a holder of one of its locks, takes its PROCESSORS
  /// of the -j slots; a serial test runs alone, and none behind it starts
  /// before it. Stops, returning true, when `start` does (fail-fast).
  bool start_what_fits(const std::function<bool(size_t)>& start);

  /// The test `index` of the list ended (ran, or was reported without
  /// running) and whether it failed: what waits on it may start.
  void ended(size_t index, bool failed);

  /// The evictor's finished jobs: their tests may start, or are reported
  /// as not started. Returns false when one failed.
  bool take_evicted();

  /// Tests admitted that wait for, or got, their inputs' eviction.
  bool cooling() const { return !evicting_.empty() || !cold_.empty(); }

  /// While tests run, the group of the next test in the queue is made
  /// (mkdir and limit writes: most of memrun's own work per test on v1),
  /// so that it starts as soon as it may.
  void make_ahead(const RunContext& context);
  /// The group made ahead for the test `index`, or null.
  std::unique_ptr<cgroup::Group> take_ahead(size_t index);
  /// The group made ahead and never used, for the loop to remove.
  std::unique_ptr<cgroup::Group> unused_group() { return std::move(ahead_.group); }
  /// The group made ahead for a test that ended without it (not run), or
  /// null: for the loop to remove, so that the next can be made ahead.
  std::unique_ptr<cgroup::Group> stale_group();

  /// The list ends: admitted tests that never started hand their limit
  /// back. When `interrupted`, they and the queue are reported not run;
  /// otherwise (fail-fast) they are not reported, like the queue. The list
  /// given to offer() is not used after.
  void stop(bool interrupted);

 private:
  const std::vector<const PlannedTest*>* tests_ = nullptr;
  std::string run_dir_;
  // The record of the test `index` of the list, which never started.
  TestRecord unstarted_at(size_t index, Ending ending, const std::string& reason = "") const {
    return unstarted(made_test(*(*tests_)[index], index, run_dir_), ending, reason);
  }
  Admission* admission_ = nullptr;
  Done done_;
  std::deque<size_t> queue_;
  Evictor evictor_;
  std::set<size_t> evicting_;  // admitted tests whose inputs the evictor has
  std::deque<size_t> cold_;    // ... and those it is done with, to start
  struct {
    size_t index = SIZE_MAX;  // in the list being run
    std::unique_ptr<cgroup::Group> group;
  } ahead_;
  // ctest's order: where each test of the list is, and what the admitted
  // ones hold.
  enum class State : char { queued, admitted, ended, failed };
  std::vector<State> state_;
  size_t admitted_ = 0;
  uint64_t ended_count_ = 0;    // tests ended so far: a pass that ends one is followed by another
  std::multiset<std::string> locks_;
  bool serial_ = false;  // a serial test is admitted: nothing else starts
  void admit(size_t index);
  // One pass over the queue (start_what_fits).
  bool start_pass(const std::function<bool(size_t)>& start);
  // Whether `index` may start now as far as ctest's order goes: now, later,
  // alone (once the running tests end) or never (`why_not_run`: a setup
  // it needs failed).
  enum class Turn { now, later, alone, never };
  /// `once_free`: its turn once the running tests have ended (for make_ahead).
  Turn turn_of(size_t index, std::string* why_not_run, bool once_free = false) const;
};

}  // namespace memrun

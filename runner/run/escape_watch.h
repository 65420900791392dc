// Which test a move out of its groups belongs to, from the kernel's record
// of every move and every new task (cgroup::MoveWatch): a task of a test
// that enters a group outside the test's own has left its limit, whatever
// it did there and however soon it came back. The escape walk
// (RunningTest::find_escapes) sees a task only where it is at the walk.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "cgroup/moves.h"

namespace memrun {

class EscapeWatch {
 public:
  /// `left(serial, task, where)`: see read().
  using Left = std::function<void(uint64_t, int, const std::string&)>;

  /// Watches in a tracefs instance of this process's own (memrun-PID-N).
  /// Throws cgroup::Failure (Problem::no_move_watch) where the kernel's
  /// record cannot be read.
  EscapeWatch();
  /// A watch with no record of its own (null), fed by judge(): for tests.
  explicit EscapeWatch(std::unique_ptr<cgroup::MoveWatch> moves);
  /// The watch of a run whose tests are not sealed (their tasks may reach
  /// the host's groups): required as root, where a run without it would
  /// pass a test that left its limit for a moment (throws
  /// cgroup::Failure). Without root tracefs is out of reach, and a test
  /// can move its tasks only among the groups its user may write: the walk
  /// alone judges it, the run says so on stderr, and this returns null.
  static std::unique_ptr<EscapeWatch> for_unsealed_run();
  /// The watch of a sealed run with tests that may reach the service
  /// managers (`service_manager: true`): `systemd-run --scope` has the
  /// manager move the test's process out of its group. Where the record
  /// cannot be read, the walk alone judges them: a note, and null (such a
  /// test ran so before).
  static std::unique_ptr<EscapeWatch> for_service_manager_tests();

  /// The test `serial`, whose first process `root` memrun started (a
  /// task made by one of memrun's own threads): every task descending
  /// from it is the test's, and its groups are `group` (as the kernel
  /// names it, below the hierarchy's root) and those below.
  void follow(uint64_t serial, int root, const std::string& group);
  /// The tests for which `running(serial)` is false ended: their tasks
  /// are no longer followed.
  void forget_ended(const std::function<bool(uint64_t)>& running);

  /// Reads what the kernel recorded, never waiting; `left(serial, task,
  /// where)` for each move of a followed test's task out of its groups,
  /// `where` the group it entered (or, where it is not known, task 0 or
  /// the task, and why).
  void read(const Left& left);
  /// What read() does with the events the kernel recorded (`whole`: none
  /// was lost).
  void judge(const std::vector<cgroup::MoveWatch::Event>& events, bool whole, const Left& left);
  /// Removes the kernel's record (waits for an RCU grace period: once, at
  /// the run's end). Not called, the instance stays for `memrun gc` or the
  /// next run (remove_stale); the destructor never waits.
  void close();

  /// The instances of watchers that are gone (a memrun killed before it
  /// could remove its own), removed: for `memrun gc`.
  static std::vector<std::string> remove_stale();

 private:
  void fork(int task, int parent);
  void moved(int root, int task, const std::string& path, const Left& left);
  void judge_unjudged(const Left& left);

  std::unique_ptr<cgroup::MoveWatch> moves_;
  std::set<int> own_;                         ///< memrun's own threads
  std::unordered_map<int, int> root_of_;      ///< a task made by a task memrun made: its root
  struct Followed {
    uint64_t serial;
    std::string group;
  };
  std::map<int, Followed> followed_;          ///< by root
  /// Moves of tasks whose root is not followed yet (the loop learns a
  /// test's pid after its first tasks may have moved), by root: a few
  /// kept, the others counted (a count > 0 fails the test once followed).
  /// An entry stays until its test ends (a root never followed, to the
  /// run's end: one small entry a process memrun made, never evicted).
  struct Unjudged {
    std::vector<std::pair<int, std::string>> moves;
    uint64_t dropped = 0;
  };
  std::map<int, Unjudged> unjudged_;
  size_t kept_ = 0;  ///< moves kept in unjudged_, all roots together
  std::vector<cgroup::MoveWatch::Event> events_;
};

}  // namespace memrun

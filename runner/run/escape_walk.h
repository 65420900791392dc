// The walk that finds a test's processes outside its group: each one
// counts as escaped (the test fails) and is killed with the rest, through
// a pidfd taken when it was found.
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cgroup/cgroup.h"

namespace memrun {

/// One test's escapes, and the processes of it memrun has seen. Never
/// waits; its destructor kills what it found, and closes their pidfds.
class EscapeWalk {
 public:
  EscapeWalk() = default;
  ~EscapeWalk();
  EscapeWalk(const EscapeWalk&) = delete;
  EscapeWalk& operator=(const EscapeWalk&) = delete;

  /// Walks the process trees from `roots` (pid, its parent), each thread
  /// of each process checked against `group` (null: the walk only adds to
  /// seen()).
  void walk(const cgroup::Group* group, const std::vector<std::pair<int, int>>& roots);
  /// A process of the test, the child of `parent`: when it or one of its
  /// `threads` (empty: read now) is outside `group` (and not on its way
  /// out), counted as escaped and held through a pidfd taken now (once the
  /// pidfd is open, the process is checked to be still `parent`'s child:
  /// never a process that reused the pid).
  void check(const cgroup::Group& group, int pid, int parent, std::vector<int> threads = {});
  /// The kernel saw task `task` of the test enter `where`, a group outside
  /// the test's (EscapeWatch): an escape, whatever it did there and however
  /// soon it came back.
  void moved_out(int task, const std::string& where) {
    if (moved_out_.size() < 4096) moved_out_.insert(task);
    if (first_place_.empty()) first_place_ = where;
  }
  /// SIGKILL to every process found, through its pidfd.
  void kill() const;

  /// How many were found (a task the walk found outside was seen leaving
  /// too: counted once), and where the first one was ("": none).
  size_t count() const { return std::max(escaped_.size(), moved_out_.size()); }
  const std::string& first_place() const { return first_place_; }
  /// The test's processes memrun has seen (its main process, what the
  /// walks found): who an OOM kill hit when the kernel's log leaves out
  /// the group (see KernelLog::oom_kills).
  const std::set<int>& seen() const { return seen_; }
  void saw(int pid) { seen_.insert(pid); }

 private:
  std::map<int, int> escaped_;  // pid: pidfd
  std::set<int> moved_out_;     // tasks the kernel saw leave (moved_out), bounded
  std::string first_place_;
  std::set<int> seen_;
};

}  // namespace memrun

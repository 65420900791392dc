#include "runner/run/escape_walk.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runner/base/files.h"

namespace memrun {

EscapeWalk::~EscapeWalk() {
  kill();
  for (const auto& [pid, fd] : escaped_) ::close(fd);
}

// A test's processes stay in its group: one found elsewhere left its limit
// behind (a service manager it reached moved it into a scope of its own,
// systemd-run --scope; or it wrote itself into another cgroup.procs). A
// move between cgroups leaves the process tree as it was, so the walk
// follows the test's tree (/proc/PID/task/TID/children) every fifth
// sample. Each thread is a task of its own to the kernel: one thread can
// write its id alone to another group's `tasks` (v1) or threaded
// cgroup.threads (v2), and what it allocates there (pipe buffers, its
// stack's pages) is charged there while its process stays in the test's
// group. So the walk reads every thread's cgroups
// (/proc/PID/task/TID/cgroup), and a thread found outside is an escape of
// its process, whatever it did while it was out: the kernel's figures of
// where it was are not the test's. What it finds is counted as escaped
// (the test fails) and killed with the rest through a pidfd: memrun
// signals only processes it proved were the test's. (A unit the manager
// starts itself, a service, is no descendant: not found here.)
// The tree is walked first, then the group's own lists of its tasks read
// (one read a group): a thread they name is inside; each other one is
// asked where it is (one read a thread, where 1,000 threads took two).
void EscapeWalk::walk(const cgroup::Group* group, const std::vector<std::pair<int, int>>& roots) {
  struct Walked {
    int pid, parent;
    std::vector<int> threads;
  };
  std::vector<Walked> walked;
  std::vector<std::pair<int, int>> todo = roots;  // (pid, its parent)
  while (!todo.empty() && walked.size() < 4096) {
    auto [pid, parent] = todo.back();
    todo.pop_back();
    walked.push_back({pid, parent, {}});
    for (int c : child_processes(pid, &walked.back().threads)) todo.push_back({c, pid});
    if (seen_.size() < 4096) seen_.insert(pid);
  }
  if (!group) return;
  std::set<int> inside = group->tasks_inside();
  for (auto& w : walked) {
    std::erase_if(w.threads, [&](int tid) { return inside.count(tid) > 0; });
    if (!w.threads.empty()) check(*group, w.pid, w.parent, std::move(w.threads));
  }
}

void EscapeWalk::check(const cgroup::Group& group, int pid, int parent, std::vector<int> threads) {
  if (escaped_.count(pid)) return;
  if (threads.empty()) child_processes(pid, &threads);
  // The first thread found outside stands for its process.
  std::string where;
  int thread = pid;
  for (int tid : threads)
    if (!(where = group.outside(tid)).empty()) {
      thread = tid;
      break;
    }
  if (where.empty()) return;
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  // The pidfd holds the process now: it is the one found if it is still
  // the child of the same parent, and its thread still outside.
  if (fd < 0 || parent_process(pid) != parent || group.outside(thread).empty()) {
    if (fd >= 0) ::close(fd);
    return;
  }
  escaped_[pid] = fd;
  if (first_place_.empty()) first_place_ = where;
}

void EscapeWalk::kill() const {
  for (const auto& [pid, fd] : escaped_) ::syscall(SYS_pidfd_send_signal, fd, SIGKILL, nullptr, 0);
}

}  // namespace memrun

#include "runner/run/escape_watch.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>

#include "cgroup/error.h"
#include "runner/base/files.h"

namespace memrun {
namespace {

constexpr const char* kPrefix = "memrun-";

bool own_thread(int tid) {
  std::error_code ec;
  return std::filesystem::exists("/proc/self/task/" + std::to_string(tid), ec);
}

int next_instance() {
  static std::atomic<int> n{0};
  return n++;
}

bool within(const std::string& path, const std::string& group) {
  return path == group || (path.size() > group.size() && path.compare(0, group.size(), group) == 0 &&
                           (group == "/" || path[group.size()] == '/'));
}

}  // namespace

std::unique_ptr<EscapeWatch> EscapeWatch::for_unsealed_run() {
  try {
    return std::make_unique<EscapeWatch>();
  } catch (const cgroup::Failure& e) {
    if (::geteuid() == 0) throw;
    std::fprintf(stderr,
                 "memrun: note: without root, the tests' moves between cgroups are seen only where the escape walk "
                 "finds them (%s)\n",
                 e.what());
    return nullptr;
  }
}

std::unique_ptr<EscapeWatch> EscapeWatch::for_service_manager_tests() {
  try {
    return std::make_unique<EscapeWatch>();
  } catch (const cgroup::Failure& e) {
    std::fprintf(stderr,
                 "memrun: note: a test with 'service_manager: true' that the manager moves into a scope is seen only "
                 "where the escape walk finds it (%s)\n",
                 e.what());
    return nullptr;
  }
}

EscapeWatch::EscapeWatch() : EscapeWatch(cgroup::MoveWatch::open(kPrefix + std::to_string(::getpid()) + "-" +
                                                                    std::to_string(next_instance()))) {}

EscapeWatch::EscapeWatch(std::unique_ptr<cgroup::MoveWatch> moves) : moves_(std::move(moves)) {
  // memrun's threads now; those it makes later are known by their fork.
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task", ec))
    own_.insert(std::atoi(e.path().filename().c_str()));
}

void EscapeWatch::close() {
  if (moves_) moves_->close();
}

void EscapeWatch::follow(uint64_t serial, int root, const std::string& group) {
  if (root > 0) followed_[root] = {serial, group};
}

void EscapeWatch::forget_ended(const std::function<bool(uint64_t)>& running) {
  for (auto it = followed_.begin(); it != followed_.end();) {
    if (running(it->second.serial)) {
      ++it;
      continue;
    }
    int root = it->first;
    std::erase_if(root_of_, [&](const auto& e) { return e.second == root; });
    if (auto u = unjudged_.find(root); u != unjudged_.end()) {
      kept_ -= u->second.moves.size();
      unjudged_.erase(u);
    }
    it = followed_.erase(it);
  }
}

// A task made by one of memrun's threads is a root (a test's first
// process, or one memrun runs for itself); a task made by a task with a
// root has the same root. A new task under a reused id is known again by
// its fork: whatever that id was before is forgotten, the moves kept for a
// root of that id included (a helper of memrun's, never followed, whose id
// a test's first process now has: its moves are not the test's).
void EscapeWatch::fork(int task, int parent) {
  root_of_.erase(task);
  own_.erase(task);
  if (own_.count(parent)) {
    if (own_thread(task)) {
      own_.insert(task);
    } else {
      root_of_[task] = task;
      if (auto u = unjudged_.find(task); u != unjudged_.end()) {
        kept_ -= u->second.moves.size();
        unjudged_.erase(u);
      }
    }
    return;
  }
  if (auto it = root_of_.find(parent); it != root_of_.end()) root_of_[task] = it->second;
}

void EscapeWatch::moved(int root, int task, const std::string& path, const Left& left) {
  auto test = followed_.find(root);
  if (test != followed_.end()) {
    if (!within(path, test->second.group)) left(test->second.serial, task, path);
    return;
  }
  // Its root is not followed yet (or is memrun's own helper): judged when
  // it is. Bounded: what is not kept is counted, and fails the test.
  auto& u = unjudged_[root];
  if (u.moves.size() < 16 && kept_ < 4096) {
    u.moves.push_back({task, path});
    ++kept_;
  } else {
    ++u.dropped;
  }
}

// The moves of roots followed since the last read.
void EscapeWatch::judge_unjudged(const Left& left) {
  for (auto it = unjudged_.begin(); it != unjudged_.end();) {
    auto test = followed_.find(it->first);
    if (test == followed_.end()) {
      ++it;
      continue;
    }
    for (const auto& [task, path] : it->second.moves)
      if (!within(path, test->second.group)) left(test->second.serial, task, path);
    if (it->second.dropped > 0)
      left(test->second.serial, 0,
           "(unknown: its tasks moved between cgroups " + std::to_string(it->second.dropped + it->second.moves.size()) +
               " times before memrun knew the test, more than memrun keeps)");
    kept_ -= it->second.moves.size();
    it = unjudged_.erase(it);
  }
}

void EscapeWatch::read(const Left& left) {
  events_.clear();
  bool whole = !moves_ || moves_->read(events_);
  judge(events_, whole, left);
}

void EscapeWatch::judge(const std::vector<cgroup::MoveWatch::Event>& events, bool whole, const Left& left) {
  using Kind = cgroup::MoveWatch::Event::Kind;
  for (const auto& e : events) {
    if (e.kind == Kind::fork) {
      fork(e.task, e.parent);
      continue;
    }
    // A move is the moved task's root's; a birth (before its fork) the
    // cloning thread's. A birthplace memrun could not read may be a group
    // of the test's or the host's root: no verdict rests on a guess.
    auto root = root_of_.find(e.kind == Kind::born ? e.parent : e.task);
    if (root == root_of_.end()) continue;  // no task of a test
    moved(root->second, e.task,
          e.kind == Kind::attach || !e.path.empty()
              ? e.path
              : "(unknown: born with clone3's CLONE_INTO_CGROUP into a group that had tasks, and gone before "
                "memrun could read which)",
          left);
  }
  // The moves kept of roots followed since: after this read's forks, which
  // forget what a reused id's root kept.
  judge_unjudged(left);
  // The kernel's buffer lost events, or its controls were written: a move
  // may be among what is not there.
  if (!whole)
    for (const auto& [root, test] : followed_)
      left(test.serial, 0,
           "(unknown: the kernel's record of moves between cgroups lost events, was written to or was read by "
           "another, while the test ran)");
}

std::vector<std::string> EscapeWatch::remove_stale() { return cgroup::MoveWatch::remove_stale(kPrefix, "memrun"); }

}  // namespace memrun

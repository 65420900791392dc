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

EscapeWatch::EscapeWatch() {
  static std::atomic<int> n{0};
  moves_ = cgroup::MoveWatch::open(kPrefix + std::to_string(::getpid()) + "-" + std::to_string(n++));
  // memrun's threads now; those it makes later are known by their fork.
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task", ec))
    own_.insert(std::atoi(e.path().filename().c_str()));
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
    unjudged_.erase(root);
    it = followed_.erase(it);
  }
}

// A task made by one of memrun's threads is a root (a test's first
// process, or one memrun runs for itself); a task made by a task with a
// root has the same root. A new task under a reused id is known again by
// its fork: whatever that id was before is forgotten.
void EscapeWatch::fork(int task, int parent) {
  root_of_.erase(task);
  own_.erase(task);
  if (own_.count(parent)) {
    if (own_thread(task)) own_.insert(task);
    else root_of_[task] = task;
    return;
  }
  if (auto it = root_of_.find(parent); it != root_of_.end()) root_of_[task] = it->second;
}

void EscapeWatch::attach(int task, const std::string& path,
                         const std::function<void(uint64_t, int, const std::string&)>& left) {
  auto root = root_of_.find(task);
  if (root == root_of_.end()) return;  // no task of a test
  auto test = followed_.find(root->second);
  if (test != followed_.end()) {
    if (!within(path, test->second.group)) left(test->second.serial, task, path);
    return;
  }
  // Its root is not followed yet (or is memrun's own helper): judged when
  // it is. Bounded: a root memrun never follows keeps a few.
  if (unjudged_.size() >= 256 && !unjudged_.count(root->second)) unjudged_.erase(unjudged_.begin());
  auto& moves = unjudged_[root->second];
  if (moves.size() < 16) moves.push_back({task, path});
}

void EscapeWatch::read(const std::function<void(uint64_t, int, const std::string&)>& left) {
  for (auto it = unjudged_.begin(); it != unjudged_.end();) {
    auto test = followed_.find(it->first);
    if (test == followed_.end()) {
      ++it;
      continue;
    }
    for (const auto& [task, path] : it->second)
      if (!within(path, test->second.group)) left(test->second.serial, task, path);
    it = unjudged_.erase(it);
  }
  events_.clear();
  bool whole = moves_->read(events_);
  for (const auto& e : events_) {
    if (e.kind == cgroup::MoveWatch::Event::Kind::fork) fork(e.task, e.parent);
    else attach(e.task, e.path, left);
  }
  // The kernel's buffer lost events, or its controls were written: a move
  // may be among what is not there.
  if (!whole)
    for (const auto& [root, test] : followed_)
      left(test.serial, 0,
           "(unknown: the kernel's record of moves between cgroups lost events, or was written to, while the test "
           "ran)");
}

std::vector<std::string> EscapeWatch::remove_stale() { return cgroup::MoveWatch::remove_stale(kPrefix, "memrun"); }

}  // namespace memrun

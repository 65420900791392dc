#include "fake_backend.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <stdexcept>

#include "cgroup/error.h"

namespace memrun::testing {

int FakeClock::wait(int epoll, int, epoll_event* events, int max, time_point until) {
  for (;;) {
    int n = ::epoll_wait(epoll, events, max, 0);
    if (n != 0) return n;
    time_point next = due_.empty() ? until : std::min(until, due_.begin()->first);
    if (next == time_point::max()) {
      // No deadline and nothing scripted: only a thread of memrun's own (the
      // evictor) can still make an fd ready. A loop that waits for nothing
      // would hang: the test fails instead.
      n = ::epoll_wait(epoll, events, max, 10000);
      if (n == 0) throw std::runtime_error("the loop waits on the fake clock with nothing to wait for");
      return n;
    }
    now_ = std::max(now_, next);
    bool happened = false;
    while (!due_.empty() && due_.begin()->first <= now_) {
      auto what = std::move(due_.begin()->second);
      due_.erase(due_.begin());
      what();
      happened = true;
    }
    if (!happened) return 0;
  }
}

std::vector<OomKill> FakeKernelLog::oom_kills(const std::string& group_suffix, const std::set<int>&,
                                              std::chrono::steady_clock::time_point) {
  ++asked;
  for (auto& [name, k] : kills) {
    const std::string tail = "/" + name;
    if (group_suffix.size() < tail.size() || group_suffix.compare(group_suffix.size() - tail.size(), tail.size(), tail))
      continue;
    if (!k.asked) k.asked = clock_.now();
    if (k.taken || clock_.now() < *k.asked + k.delay) return {};
    k.taken = true;
    return k.victims;
  }
  return {};
}

// A group is a name and its limits. Its processes are the fake launcher's
// one (the loop's tests), or a real test's process group (the launched
// child calls setsid(), so its pid is its group's id: bisect's tests).
class FakeGroup : public cgroup::Group {
 public:
  FakeGroup(FakeBackend& backend, std::string test, const cgroup::Limits& limits)
      : backend_(backend), test_(std::move(test)), limits_(limits), path_(backend.run_path() + "/" + test_) {}
  ~FakeGroup() override { last_attempt(); }

  const std::string& path() const override { return path_; }
  std::string kernel_path() const override { return path_; }
  cgroup::Placement placement() const override { return {}; }
  std::string outside(int) const override { return ""; }
  cgroup::Usage usage() const override {
    backend_.seen[test_].samples.push_back(backend_.clock.now());
    cgroup::Usage u = script().usage;
    u.refaulted += static_cast<uint64_t>(script().refaulted_per_s * elapsed_s());
    return u;
  }
  std::optional<uint64_t> stalled_us() const override {
    if (!script().stalled_share) return std::nullopt;
    return static_cast<uint64_t>(*script().stalled_share * elapsed_s() * 1e6);
  }
  cgroup::Final finish() const override {
    cgroup::Final f = script().final;
    if (!f.peak) f.peak = f.breakdown.anon;
    if (f.effective_limit == 0) f.effective_limit = limits_.memory_max;
    if (f.limit_at_end == UINT64_MAX) f.limit_at_end = limits_.memory_max;
    return f;
  }
  std::unique_ptr<cgroup::Block> open_block(int, bool) override {
    throw cgroup::Failure(cgroup::Failure::Kind::system, "the fake backend measures no blocks");
  }
  void started(int pid) override {
    pid_ = pid;
    start_ = backend_.clock.now();
    backend_.seen[test_].started = start_;
    backend_.running_bytes += limits_.memory_max;
    backend_.most_running_bytes = std::max(backend_.most_running_bytes, backend_.running_bytes);
    backend_.most_running_groups = std::max(backend_.most_running_groups, ++backend_.running_groups);
    for (const auto& other : backend_.running_tests) {
      backend_.beside[test_].insert(other);
      backend_.beside[other].insert(test_);
    }
    backend_.running_tests.insert(test_);
  }
  void signal_all(int sig) override {
    if (pid_ > 0 && !backend_.launcher.signal(pid_, sig)) ::kill(-pid_, sig);
  }
  bool kill_step() override {
    auto& seen = backend_.seen[test_];
    if (!seen.first_kill) seen.first_kill = backend_.clock.now();
    if (script().fail_kill) {
      errno = EACCES;
      cgroup::fail_errno(cgroup::Failure::Kind::system, "cannot write " + path_ + "/cgroup.kill", path_);
    }
    signal_all(SIGKILL);
    if (++seen.kill_calls < script().kill_steps) return false;
    if (pid_ > 0 && !gone_) {
      // The test's process group was its only process, and memrun reaped it.
      gone_ = true;
      seen.emptied = backend_.clock.now();
      backend_.running_bytes -= limits_.memory_max;
      --backend_.running_groups;
      backend_.running_tests.erase(test_);
    }
    return true;
  }
  bool remove_step() override {
    if (removed_) return true;
    auto& seen = backend_.seen[test_];
    auto now = backend_.clock.now();
    if (!seen.first_remove) seen.first_remove = now;
    if (++seen.remove_calls <= script().busy_tries || now < *seen.first_remove + script().busy_for) return false;
    removed_ = true;
    seen.removed = now;
    --backend_.live_groups;
    return true;
  }

 private:
  double elapsed_s() const { return std::chrono::duration<double>(backend_.clock.now() - start_).count(); }
  const FakeBackend::Script& script() const {
    static const FakeBackend::Script none;
    auto it = backend_.scripts.find(test_);
    return it == backend_.scripts.end() ? none : it->second;
  }
  FakeBackend& backend_;
  std::string test_;
  cgroup::Limits limits_;
  std::string path_;
  int pid_ = -1;
  Clock::time_point start_ = backend_.clock.now();
  bool removed_ = false, gone_ = false;
};

std::unique_ptr<cgroup::Group> FakeBackend::create(const std::string& name, const cgroup::Limits& limits) {
  // Groups are named NNN-<test>: the scripts go by the test's name.
  std::string test = name.substr(name.find('-') + 1);
  const Script& s = scripts[test];
  if (s.fail_create) {
    errno = ENOSPC;
    cgroup::fail_errno(cgroup::Failure::Kind::system, "cannot create cgroup " + run_path_ + "/" + name, run_path_);
  }
  if (s.fail_limit) {
    errno = EINVAL;
    cgroup::fail_errno(cgroup::Failure::Kind::system, "cannot write " + run_path_ + "/" + name + "/memory.max",
                       run_path_);
  }
  created.push_back({test, limits});
  seen[test].made = clock.now();
  ++live_groups;
  return std::make_unique<FakeGroup>(*this, test, limits);
}

}  // namespace memrun::testing

#include "fake_backend.h"

#include <signal.h>

#include <algorithm>
#include <chrono>

namespace memrun::testing {

// A group is a name and its limits. Its processes are the test's process
// group: the launched child calls setsid(), so its pid is its group's id.
class FakeGroup : public cgroup::Group {
 public:
  FakeGroup(FakeBackend& backend, std::string test, const cgroup::Limits& limits)
      : backend_(backend), test_(std::move(test)), limits_(limits), path_(backend.run_path() + "/" + test_) {}
  ~FakeGroup() override { destroy_quietly(); }

  const std::string& path() const override { return path_; }
  std::string kernel_path() const override { return path_; }
  cgroup::Placement placement() const override { return {}; }
  std::string outside(int) const override { return ""; }
  cgroup::Usage usage() const override {
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
  void started(int pid) override {
    pid_ = pid;
    start_ = std::chrono::steady_clock::now();
    backend_.running_bytes += limits_.memory_max;
    backend_.most_running_bytes = std::max(backend_.most_running_bytes, backend_.running_bytes);
    backend_.most_running_groups = std::max(backend_.most_running_groups, ++backend_.running_groups);
  }
  void signal_all(int sig) override {
    if (pid_ > 0) ::kill(-pid_, sig);
  }
  bool kill_step() override {
    signal_all(SIGKILL);
    if (pid_ > 0 && !gone_) {
      // The test's process group was its only process, and memrun reaped it.
      gone_ = true;
      backend_.running_bytes -= limits_.memory_max;
      --backend_.running_groups;
    }
    return true;
  }
  bool remove_step() override {
    if (removed_) return true;
    removed_ = true;
    --backend_.live_groups;
    return true;
  }

 private:
  double elapsed_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
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
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  bool removed_ = false, gone_ = false;
};

std::unique_ptr<cgroup::Group> FakeBackend::create(const std::string& name, const cgroup::Limits& limits) {
  // Groups are named NNN-<test>: the scripts go by the test's name.
  std::string test = name.substr(name.find('-') + 1);
  created.push_back({test, limits});
  ++live_groups;
  return std::make_unique<FakeGroup>(*this, test, limits);
}

}  // namespace memrun::testing

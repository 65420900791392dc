// The processes of an explanation's profiled run, sampled from /proc
// while it runs (process_sampler.cc).
#pragma once

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runner/verdict/explanation.h"

namespace memrun::explain {

// The processes of the profiled run's cgroup, sampled from /proc while it
// runs: each one's largest private memory (anonymous and shmem), so that
// memory in a process no profiler followed is named. A thread of its own:
// run_plan's loop is not to be slowed by a scan of /proc.
class ProcessSampler {
 public:
  /// `dir`: the profiled run's group (the backend's run_path()/group).
  explicit ProcessSampler(std::string dir)
      : dir_(std::move(dir)), self_(std::filesystem::read_symlink("/proc/self/exe", ec_)), thread_([this] { loop(); }) {}
  ~ProcessSampler() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::vector<ProcessSeen> seen() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<ProcessSeen> out;
    for (const auto& [pid, p] : seen_) out.push_back(p);
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.peak_private > b.peak_private; });
    return out;
  }

 private:
  void loop();
  void scan();

  std::string dir_;
  std::error_code ec_;
  std::filesystem::path self_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::map<int, ProcessSeen> seen_;
  std::thread thread_;
};

}  // namespace memrun::explain

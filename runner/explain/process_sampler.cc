// The processes of the profiled run's cgroup, sampled (process_sampler.h).
#include "runner/explain/process_sampler.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <sstream>

#include "cgroup/cgroup.h"
#include "runner/base/files.h"
#include "runner/explain/helpers.h"

namespace memrun::explain {

namespace fs = std::filesystem;

void ProcessSampler::loop() {
  // Signals are memrun's loop's (a signalfd): never this thread's, whose
  // default action would end memrun without its report.
  sigset_t all;
  sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, nullptr);
  while (!stop_) {
    scan();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}
void ProcessSampler::scan() {
  // The group's own list, not a match of names in /proc/PID/cgroup:
  // another run's group of the same name is no test's of this run.
  for (pid_t listed : cgroup::processes_below(dir_)) {
    if (listed <= 0) continue;  // in a pid namespace memrun cannot see
    std::string pid = std::to_string(listed);
    std::istringstream status(read_proc("/proc/" + pid + "/status"));
    uint64_t priv = 0;
    int ns_pid = 0;
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("RssAnon:", 0) == 0 || line.rfind("RssShmem:", 0) == 0)
        priv += std::strtoull(line.c_str() + line.find(':') + 1, nullptr, 10) * 1024;
      if (line.rfind("NSpid:", 0) == 0) {
        // The innermost namespace's number is the last: what the test and
        // its profiler know the process by.
        std::istringstream ids(line.substr(6));
        for (int id; ids >> id;) ns_pid = id;
      }
    }
    // memrun's own (a sealed test's pid 1 is memrun's stub) is no test's.
    std::error_code ec;
    if (fs::read_symlink("/proc/" + pid + "/exe", ec) == self_) continue;
    std::string cmdline = read_proc("/proc/" + pid + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    while (!cmdline.empty() && cmdline.back() == ' ') cmdline.pop_back();
    if (cmdline.empty()) continue;  // gone, or a zombie
    std::lock_guard<std::mutex> lock(mu_);
    auto& p = seen_[listed];
    // A process that execs keeps its pid: the last command is the one
    // that held the memory, as a rule.
    if (priv >= p.peak_private || p.command.empty()) p.command = shortened(cmdline);
    p.pid = ns_pid;
    p.peak_private = std::max(p.peak_private, priv);
  }
}

}  // namespace memrun::explain

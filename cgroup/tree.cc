// Helpers shared by the backends for walking and emptying a cgroup tree.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <sstream>
#include <thread>

#include "cgroup/cgroup.h"
#include "cgroup/error.h"
#include "cgroup/fs.h"

namespace memrun::cgroup {

uint64_t effective_limit(const std::string& dir, const std::string& top,
                         const std::string& limit_file) {
  uint64_t lowest = UINT64_MAX;
  std::string d = dir;
  for (;;) {
    if (auto v = fs::read_u64(d + "/" + limit_file)) lowest = std::min(lowest, *v);
    if (d.size() <= top.size()) break;
    auto slash = d.rfind('/');
    if (slash == std::string::npos || slash == 0) break;
    d = d.substr(0, slash);
  }
  return lowest;
}

bool kill_listed(const std::string& procs_file, int timeout_ms) {
  // Without cgroup.kill (v1, v2 before 5.14) a process may fork between our
  // read of cgroup.procs and its SIGKILL; its child then shows up on the next
  // read. Loop until the list stays empty; pids.max bounds a fork bomb.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    auto text = fs::read_file(procs_file);
    if (!text) return true;  // the group is gone
    std::istringstream in(*text);
    pid_t pid;
    bool any = false;
    while (in >> pid) {
      any = true;
      ::kill(pid, SIGKILL);
    }
    if (!any) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
}

void remove_dir(const std::string& dir, int timeout_ms,
                const std::function<void()>& kill) {
  // rmdir fails with EBUSY while a process is still in the group: a killed
  // process leaves it only once it has fully exited. Retry, killing again in
  // between, as crun does.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return;
    if (errno != EBUSY || std::chrono::steady_clock::now() > deadline)
      throw_errno(1, "cannot remove cgroup " + dir);
    if (kill) kill();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace memrun::cgroup

// Helpers shared by the backends for walking and emptying a cgroup tree.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <sstream>
#include <vector>
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

uint64_t room_below(const std::string& dir, const std::string& top,
                    const std::string& limit_file, const std::string& usage_file) {
  uint64_t room = UINT64_MAX;
  std::string d = dir;
  for (;;) {
    // v1 writes "unlimited" as a huge page-aligned number (LONG_MAX rounded
    // down to a page); anything past 2^60 bytes is no limit in practice.
    auto limit = fs::read_u64(d + "/" + limit_file);
    if (limit && *limit < (uint64_t{1} << 60)) {
      uint64_t used = fs::read_u64(d + "/" + usage_file).value_or(0);
      room = std::min(room, *limit - std::min(*limit, used));
    }
    if (d.size() <= top.size()) break;
    auto slash = d.rfind('/');
    if (slash == std::string::npos || slash == 0) break;
    d = d.substr(0, slash);
  }
  return room;
}

void signal_tree(const std::string& dir, int sig) {
  std::istringstream in(fs::read_file(dir + "/cgroup.procs").value_or(""));
  for (pid_t pid; in >> pid;) ::kill(pid, sig);
  if (DIR* d = ::opendir(dir.c_str())) {
    std::vector<std::string> children;
    while (dirent* e = ::readdir(d))
      if (e->d_type == DT_DIR && e->d_name[0] != '.') children.push_back(dir + "/" + e->d_name);
    ::closedir(d);
    for (const auto& c : children) signal_tree(c, sig);
  }
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

uint64_t process_start_time(int pid) {
  auto stat = fs::read_file("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return 0;
  // The command name (field 2) may hold spaces and parentheses: count the
  // fields after its closing parenthesis. starttime is field 22.
  auto close = stat->rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream in(stat->substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && in >> field; ++i)
    if (i == 22) return fs::parse_u64(field).value_or(0);
  return 0;
}

std::string run_identity() {
  int pid = ::getpid();
  return std::to_string(pid) + "-" + std::to_string(process_start_time(pid));
}

std::vector<std::string> dead_runs(const std::string& parent) {
  std::vector<std::string> dead;
  DIR* d = ::opendir(parent.c_str());
  if (!d) return dead;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind("memrun-", 0) != 0 || e->d_type != DT_DIR) continue;
    // ...-<pid>-<start>: the last two dash-separated numbers.
    auto b = name.rfind('-');
    auto a = b == std::string::npos || b == 0 ? std::string::npos : name.rfind('-', b - 1);
    if (a == std::string::npos) continue;
    auto pid = fs::parse_u64(name.substr(a + 1, b - a - 1));
    auto start = fs::parse_u64(name.substr(b + 1));
    if (!pid || !start || *pid == 0 || *pid > 4194304) continue;
    if (process_start_time(static_cast<int>(*pid)) == *start) continue;  // alive
    dead.push_back(parent + "/" + name);
  }
  ::closedir(d);
  return dead;
}

void remove_tree(const std::string& dir) {
  if (DIR* d = ::opendir(dir.c_str())) {
    std::vector<std::string> children;
    while (dirent* e = ::readdir(d))
      if (e->d_type == DT_DIR && std::string(e->d_name) != "." && std::string(e->d_name) != "..")
        children.push_back(dir + "/" + e->d_name);
    ::closedir(d);
    for (const auto& c : children) remove_tree(c);
  }
  if (fs::try_write_file(dir + "/cgroup.kill", "1") != 0) kill_listed(dir + "/cgroup.procs", 2000);
  remove_dir(dir, 2000, [&] { kill_listed(dir + "/cgroup.procs", 100); });
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

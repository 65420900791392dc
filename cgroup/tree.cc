// Helpers shared by the backends for walking and emptying a cgroup tree.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <optional>
#include <thread>
#include <vector>

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

std::string limit_writes_sentence(const std::string& file, uint64_t limit) {
  int error = fs::writes_seen(file, std::to_string(limit));
  if (error == 0) return "seen (inotify): a test that writes its limit fails";
  if (error < 0)
    return "not seen (no inotify instance or watch: fs.inotify.max_user_instances or max_user_watches): a limit "
           "lowered or raised between two samples goes unseen";
  return "not proven: the probe could not write its limit again (" + std::string(std::strerror(error)) + ")";
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

std::vector<std::string> children_of(const std::string& dir) {
  std::vector<std::string> children;
  // A directory's link count is 2 + its sub-directories (kernfs keeps it so
  // for cgroups): one stat(2) says whether there is anything to list, which
  // on the per-test path is almost never.
  int fd = fs::open_path(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return children;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_nlink == 2) {
    ::close(fd);
    return children;
  }
  if (DIR* d = ::fdopendir(fd)) {
    while (dirent* e = ::readdir(d))
      if (e->d_type == DT_DIR && e->d_name[0] != '.') children.push_back(dir + "/" + e->d_name);
    ::closedir(d);
  } else {
    ::close(fd);
  }
  return children;
}

namespace {

void add_subtree(const std::string& dir, std::vector<std::string>& out) {
  for (const auto& c : children_of(dir)) add_subtree(c, out);
  out.push_back(dir);
}

// What a group lists. A threaded sub-group (cgroup.type "threaded", which
// a test may make in its own group) refuses reads of cgroup.procs with
// EOPNOTSUPP: its cgroup.threads lists the same tasks by thread id, and
// kill(2) of any thread id signals its whole process. A group whose files
// cannot be read lists nothing: it is reported when it cannot be removed.
std::vector<pid_t> listed(const std::string& dir) {
  std::vector<pid_t> pids;
  for (const char* file : {"/cgroup.procs", "/cgroup.threads"}) {
    try {
      auto text = fs::read_file(dir + file);
      if (!text) return pids;  // the group is gone
      std::istringstream in(*text);
      for (pid_t pid; in >> pid;) pids.push_back(pid);
      return pids;
    } catch (const Failure&) {
      continue;  // EOPNOTSUPP and the like: try the threads, then give up
    }
  }
  return pids;
}

// Sends `sig` to what `dir`'s group lists. Pid 0 stands for a process in a
// pid namespace this one cannot see (cgroup.procs shows such processes as
// 0): kill(0, ...) would signal memrun's own process group, so it is never
// sent. Returns whether the group listed anything, pid 0 included.
bool signal_listed(const std::string& dir, int sig) {
  auto pids = listed(dir);
  for (pid_t pid : pids)
    if (pid > 0) ::kill(pid, sig);
  return !pids.empty();
}

}  // namespace

std::vector<std::string> subtree(const std::string& dir) {
  std::vector<std::string> groups;
  add_subtree(dir, groups);
  return groups;
}

std::vector<pid_t> processes_below(const std::string& dir) {
  std::vector<pid_t> pids;
  for (const auto& g : subtree(dir)) {
    auto more = listed(g);
    pids.insert(pids.end(), more.begin(), more.end());
  }
  return pids;
}

void signal_tree(const std::string& dir, int sig) {
  for (const auto& g : subtree(dir)) signal_listed(g, sig);
}

bool kill_tree_step(const std::string& dir, std::vector<std::string>* walked) {
  // Without cgroup.kill (v1, v2 before 5.14) a process may fork between our
  // read of cgroup.procs and its SIGKILL; its child then shows up on the next
  // read, so the caller steps until every group of the subtree lists
  // nothing; pids.max bounds a fork bomb. A process it cannot see (pid 0)
  // keeps the subtree non-empty: it is never signalled, and the caller
  // learns that the group is not empty.
  bool any = false;
  auto groups = subtree(dir);
  for (const auto& g : groups) any = signal_listed(g, SIGKILL) || any;
  if (walked) *walked = std::move(groups);
  return !any;
}

bool remove_tree_step(const std::string& dir) { return remove_groups_step(subtree(dir)); }

bool remove_groups_step(const std::vector<std::string>& groups) {
  // rmdir fails with EBUSY while a process is still in the group: a killed
  // process leaves it only once it has fully exited. Kill again and let the
  // caller retry, as crun does. Deepest first: a group with children is
  // busy too.
  for (const auto& g : groups) {
    if (fs::remove_dir_path(g) == 0 || errno == ENOENT) continue;
    if (errno != EBUSY) fail_errno(Failure::Kind::system, "cannot remove cgroup " + g, g);
    signal_listed(g, SIGKILL);
    return false;
  }
  return true;
}

bool Group::kill_all_blocking(int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!kill_step()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  return true;
}

void Group::destroy_blocking() {
  if (destroyed_) return;
  kill_all_blocking(2000);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!remove_step()) {
    if (std::chrono::steady_clock::now() > deadline) {
      errno = EBUSY;
      fail_errno(Failure::Kind::system, "cannot remove cgroup " + path(), path());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  destroyed_ = true;
}

void Group::last_attempt() noexcept {
  if (destroyed_) return;
  try {
    // remove_step first: a group the run's loop removed says so at once.
    destroyed_ = remove_step() || (kill_step(), remove_step());
  } catch (...) {
  }
}

uint64_t page_size() {
  static const uint64_t size = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

namespace {

// Fields 3 to `last` of /proc/PID/stat (index 0 is field 3, the state);
// empty when the process is gone. The command name (field 2) may hold
// spaces and parentheses: fields are counted after its closing one.
std::vector<std::string> stat_fields(int pid, int last) {
  std::vector<std::string> fields;
  auto stat = fs::read_file("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat ? stat->rfind(')') : std::string::npos;
  if (close == std::string::npos) return fields;
  std::istringstream in(stat->substr(close + 1));
  for (std::string f; static_cast<int>(fields.size()) < last - 2 && in >> f;) fields.push_back(f);
  return fields;
}

// True when `pid` is on its way out (PF_EXITING, or a zombie): an exiting
// task leaves its memory cgroup for the root (v1) before it leaves the pids
// group's list (cgroup_exit(), as seen on 6.x), which is no escape.
bool exiting(int pid) {
  auto f = stat_fields(pid, 9);  // state is field 3, flags field 9
  if (f.size() < 7) return true;  // gone
  constexpr unsigned long kPfExiting = 0x4;  // include/linux/sched.h
  return f[0] == "Z" || f[0] == "X" || (std::strtoul(f[6].c_str(), nullptr, 10) & kPfExiting) != 0;
}

}  // namespace

uint64_t process_start_time(int pid) {
  auto f = stat_fields(pid, 22);  // starttime is field 22
  return f.size() == 20 ? fs::parse_u64(f[19]).value_or(0) : 0;
}

uint64_t pid_namespace() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

std::string run_identity() {
  int pid = ::getpid();
  return std::to_string(pid) + "-" + std::to_string(process_start_time(pid)) + "-" + std::to_string(pid_namespace());
}

std::string run_id(const std::string& label) { return label + "-" + run_identity(); }

std::string run_name(const std::string& id) { return kRunPrefix + id; }

std::string run_id_of(const std::string& path) {
  const std::string mark = std::string("/") + kRunPrefix;
  auto at = ("/" + path).rfind(mark);
  if (at == std::string::npos) return "";
  // ("/" + path) is one longer than path: `at` is where the mark's '/' is in
  // path's terms, plus one.
  std::string id = path.substr(at + mark.size() - 1);
  id = id.substr(0, id.find('/'));
  if (id.size() > 6 && id.compare(id.size() - 6, 6, ".scope") == 0) id.resize(id.size() - 6);
  return id;
}

std::vector<std::string> dead_runs(const std::string& parent) {
  std::vector<std::string> dead;
  // A run is dead only when memrun can prove it: the run's memrun lived in
  // this pid namespace (its inode is in the name) and no process there has
  // its pid and start time. A run of another namespace (a container, an
  // `unshare --pid`) is invisible from here, never dead: its pids mean
  // nothing in this namespace.
  uint64_t own_ns = pid_namespace();
  if (own_ns == 0) return dead;
  DIR* d = ::opendir(parent.c_str());
  if (!d) return dead;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind(kRunPrefix, 0) != 0 || e->d_type != DT_DIR) continue;
    // A systemd scope's directory is the run's name and ".scope".
    if (name.size() > 6 && name.compare(name.size() - 6, 6, ".scope") == 0) name.resize(name.size() - 6);
    // ...-<pid>-<start>-<pid namespace>: the last three dash-separated numbers.
    std::vector<std::optional<uint64_t>> last;
    for (size_t end = name.size(); last.size() < 3;) {
      auto dash = name.rfind('-', end - 1);
      if (dash == std::string::npos || dash == 0) break;
      last.push_back(fs::parse_u64(name.substr(dash + 1, end - dash - 1)));
      end = dash;
    }
    if (last.size() < 3 || !last[0] || !last[1] || !last[2]) continue;
    uint64_t ns = *last[0], start = *last[1], pid = *last[2];
    if (ns != own_ns || pid == 0 || pid > 4194304 || start == 0) continue;
    if (process_start_time(static_cast<int>(pid)) == start) continue;  // alive
    dead.push_back(parent + "/" + e->d_name);
  }
  ::closedir(d);
  return dead;
}

void remove_tree(const std::string& dir) {
  // cgroup.kill (5.14+) kills the whole subtree at once; the pid loop is
  // for older kernels and v1.
  bool killed = fs::try_write_file(dir + "/cgroup.kill", "1") == 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!(killed || kill_tree_step(dir)) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  while (!remove_tree_step(dir)) {
    if (std::chrono::steady_clock::now() > deadline) {
      errno = EBUSY;
      fail_errno(Failure::Kind::system, "cannot remove cgroup " + dir, dir);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void remove_dir(const std::string& dir) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (;;) {
    if (fs::remove_dir_path(dir) == 0 || errno == ENOENT) return;
    if (errno != EBUSY || std::chrono::steady_clock::now() > deadline)
      fail_errno(Failure::Kind::system, "cannot remove cgroup " + dir, dir);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::set<int> listed_tasks(const std::vector<std::string>& groups, const std::string& list) {
  std::set<int> ids;
  for (const auto& g : groups) {
    std::istringstream in(fs::read_file(g + "/" + list).value_or(""));
    for (int id; in >> id;) ids.insert(id);
  }
  return ids;
}

std::string outside_group(int pid, const std::string& kernel_path, const std::string& controller) {
  // Lines are "ID:CONTROLLERS:PATH"; v2's is "0::PATH", a v1 hierarchy's
  // lists its controllers ("memory", "cpu,cpuacct").
  auto text = fs::read_file("/proc/" + std::to_string(pid) + "/cgroup");
  if (!text) return "";
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    std::string controllers = line.substr(first + 1, second - first - 1);
    bool ours = controller.empty() ? controllers.empty()
                                   : ("," + controllers + ",").find("," + controller + ",") != std::string::npos;
    if (!ours) continue;
    std::string path = line.substr(second + 1);
    bool inside = path == kernel_path || path.rfind(kernel_path + "/", 0) == 0;
    return inside || exiting(pid) ? "" : path;
  }
  return "";
}

}  // namespace memrun::cgroup

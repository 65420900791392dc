// Where a sealed test's start-up cost goes: each level adds one of the
// seal's kernel steps (runner/launch/child.cc, cgroup/seal.cc), in memrun's
// order, to the level before, and is timed as N starts of /bin/true. The
// first step is the cgroups every test gets, sealed or not: a group and
// its leaf in each hierarchy the seal mounts, made, limited, joined and
// removed as memrun does, with none of memrun's reads. The
// levels take turns within a round, so that a load on the machine falls on
// all of them alike. As root (the steps need CAP_SYS_ADMIN); every mount is
// made in a namespace that dies with its iteration.
//   seal-steps N ROUNDS   prints "ROUND LEVEL SECONDS_PER_START" lines
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

enum Level { kBare, kGroups, kPidNamespace, kMountNamespace, kCgroupNamespace, kShm, kProc, kLevels };

// The hierarchies the seal mounts again: v1's memory and pids, else cgroup2.
// `own`: this process's group in it, under which each start's groups go.
struct Hierarchy {
  std::string point, fstype, options, own;
};

[[noreturn]] void fail(const char* step) {
  std::perror(step);
  _exit(3);
}

std::vector<Hierarchy> sealed_hierarchies() {
  std::vector<Hierarchy> v1, v2;
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    size_t dash = 0;
    while (dash < w.size() && w[dash] != "-") ++dash;
    if (w.size() < 5 || dash + 3 >= w.size()) continue;
    const std::string& fstype = w[dash + 1];
    const std::string& super = w[dash + 3];
    if (fstype == "cgroup2") v2.push_back({w[4], fstype, "", ""});
    for (const char* c : {"memory", "pids"})
      if (fstype == "cgroup" && ("," + super + ",").find(std::string(",") + c + ",") != std::string::npos)
        v1.push_back({w[4], fstype, c, ""});
  }
  auto& found = v1.empty() ? v2 : v1;
  std::ifstream self("/proc/self/cgroup");
  for (std::string line; std::getline(self, line);) {
    // "ID:CONTROLLERS:PATH"; cgroup2's has no controllers.
    size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string controllers = "," + line.substr(a + 1, b - a - 1) + ",";
    for (auto& h : found)
      if (h.fstype == "cgroup2" ? controllers == ",," : controllers.find("," + h.options + ",") != std::string::npos)
        h.own = h.point + line.substr(b + 1);
  }
  return found;
}

void write_file(const std::string& path, const char* text) {
  std::ofstream f(path);
  f << text;
  if (!f.flush()) {
    std::perror(path.c_str());
    _exit(3);
  }
}

// One start's groups: a group and a leaf in each hierarchy, the memory
// limit on both (memrun sets it on the group and the sealed leaf), the
// leaves' cgroup.procs held open for the child to join by.
struct Groups {
  std::vector<std::string> dirs;  // made, in order
  std::vector<int> procs;
};

Groups make_groups(const std::vector<Hierarchy>& hierarchies, int serial) {
  Groups g;
  for (const auto& h : hierarchies) {
    std::string group = h.own + "/seal-steps-" + std::to_string(getpid()) + "-" + std::to_string(serial);
    for (const std::string& dir : {group, group + "/test"}) {
      if (mkdir(dir.c_str(), 0755) != 0) fail("mkdir(cgroup)");
      g.dirs.push_back(dir);
      // v2: memory.max exists only where the parent enables +memory for its
      // children, which a group holding processes (this one's) cannot do.
      std::string limit = dir + (h.fstype == "cgroup2" ? "/memory.max" : "/memory.limit_in_bytes");
      if (h.options == "memory" || (h.fstype == "cgroup2" && access(limit.c_str(), W_OK) == 0))
        write_file(limit, "67108864");
    }
    int fd = open((group + "/test/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) fail("open(cgroup.procs)");
    g.procs.push_back(fd);
  }
  return g;
}

void remove_groups(Groups& g) {
  for (int fd : g.procs) close(fd);
  for (size_t i = g.dirs.size(); i-- > 0;)
    if (rmdir(g.dirs[i].c_str()) != 0) fail("rmdir(cgroup)");
}

// The child joins its leaves as memrun's does: "0" moves the writer.
void join(const Groups& g) {
  for (int fd : g.procs)
    if (write(fd, "0", 1) != 1) fail("join");
}

// The init of a sealed test, up to `level`: then it starts the command and
// exits with its status.
[[noreturn]] void init(int level, const std::vector<Hierarchy>& hierarchies) {
  if (level >= kMountNamespace) {
    if (unshare(CLONE_NEWNS) != 0) fail("unshare(CLONE_NEWNS)");
    if (mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) fail("mount(MS_SLAVE)");
  }
  if (level >= kCgroupNamespace) {
    if (unshare(CLONE_NEWCGROUP) != 0) fail("unshare(CLONE_NEWCGROUP)");
    for (size_t i = hierarchies.size(); i-- > 0;)
      if (umount2(hierarchies[i].point.c_str(), MNT_DETACH) != 0) fail("umount2(cgroup)");
    for (const auto& h : hierarchies)
      if (mount(h.fstype.c_str(), h.point.c_str(), h.fstype.c_str(), 0,
                h.options.empty() ? nullptr : h.options.c_str()) != 0)
        fail("mount(cgroup)");
  }
  if (level >= kShm && mount("bench-shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0)
    fail("mount(tmpfs)");
  if (level >= kProc) {
    if (umount2("/proc", MNT_DETACH) != 0) fail("umount2(/proc)");
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) fail("mount(proc)");
  }
  pid_t command = vfork();
  if (command == 0) {
    execl("/bin/true", "true", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (command < 0 || waitpid(command, &status, 0) != command) _exit(4);
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 5);
}

bool start_once(int level, const std::vector<Hierarchy>& hierarchies, int serial) {
  pid_t pid;
  Groups groups;
  if (level >= kGroups) groups = make_groups(hierarchies, serial);
  if (level <= kGroups) {
    pid = fork();
    if (pid == 0) {
      join(groups);
      execl("/bin/true", "true", static_cast<char*>(nullptr));
      _exit(127);
    }
  } else {
    // clone(2) without a stack: a fork that also makes the pid namespace.
    pid = static_cast<pid_t>(syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, nullptr, nullptr, nullptr, nullptr));
    if (pid == 0) join(groups), init(level, hierarchies);
  }
  int status = 0;
  bool ok = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  remove_groups(groups);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: seal-steps N ROUNDS\n");
    return 2;
  }
  int n = std::atoi(argv[1]), rounds = std::atoi(argv[2]);
  auto hierarchies = sealed_hierarchies();
  if (hierarchies.empty()) {
    std::fprintf(stderr, "seal-steps: no cgroup hierarchy mounted\n");
    return 2;
  }
  for (int round = 0; round < rounds; ++round)
    for (int level = 0; level < kLevels; ++level) {
      auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < n; ++i)
        if (!start_once(level, hierarchies, i)) {
          std::fprintf(stderr, "seal-steps: level %d failed (as root?)\n", level);
          return 1;
        }
      std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      std::printf("%d %d %.9f\n", round, level, took.count() / n);
    }
  return 0;
}

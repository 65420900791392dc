// Where a sealed test's start-up cost goes: each level adds one of the
// seal's kernel steps (runner/launch.cc, cgroup/seal.cc), in memrun's
// order, to the level before, and is timed as N starts of /bin/true. The
// levels take turns within a round, so that a load on the machine falls on
// all of them alike. As root (the steps need CAP_SYS_ADMIN); every mount is
// made in a namespace that dies with its iteration.
//   seal-steps N ROUNDS   prints "ROUND LEVEL SECONDS_PER_START" lines
#include <sched.h>
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

enum Level { kBare, kPidNamespace, kMountNamespace, kCgroupNamespace, kShm, kProc, kLevels };

// The hierarchies the seal mounts again: v1's memory and pids, else cgroup2.
struct Hierarchy {
  std::string point, fstype, options;
};

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
    if (fstype == "cgroup2") v2.push_back({w[4], fstype, ""});
    for (const char* c : {"memory", "pids"})
      if (fstype == "cgroup" && ("," + super + ",").find(std::string(",") + c + ",") != std::string::npos)
        v1.push_back({w[4], fstype, c});
  }
  return v1.empty() ? v2 : v1;
}

[[noreturn]] void fail(const char* step) {
  std::perror(step);
  _exit(3);
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

bool start_once(int level, const std::vector<Hierarchy>& hierarchies) {
  pid_t pid;
  if (level == kBare) {
    pid = fork();
    if (pid == 0) {
      execl("/bin/true", "true", static_cast<char*>(nullptr));
      _exit(127);
    }
  } else {
    // clone(2) without a stack: a fork that also makes the pid namespace.
    pid = static_cast<pid_t>(syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, nullptr, nullptr, nullptr, nullptr));
    if (pid == 0) init(level, hierarchies);
  }
  int status = 0;
  return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
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
        if (!start_once(level, hierarchies)) {
          std::fprintf(stderr, "seal-steps: level %d failed (as root?)\n", level);
          return 1;
        }
      std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      std::printf("%d %d %.9f\n", round, level, took.count() / n);
    }
  return 0;
}

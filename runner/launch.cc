#include "runner/launch.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "runner/error.h"

namespace memrun {
namespace {

// What the child reports through the error pipe when it cannot exec.
struct ChildFailure {
  int stage;  // index into kStages
  int err;
};
const char* const kStages[] = {"join its cgroup", "set up stdio", "change to its cwd", "exec",
                               "be sealed in its cgroup (its own cgroup namespace and cgroup mounts)"};
constexpr int kExecStage = 3, kSealStage = 4;

[[noreturn]] void die(int report_fd, int stage) {
  ChildFailure f{stage, errno};
  (void)!::write(report_fd, &f, sizeof f);
  ::_exit(127);
}

// Runs in the child between clone and exec: system calls only, no
// allocation and no libc state, because in the CLONE_VM case it shares
// memrun's memory while memrun waits.
[[noreturn]] void child(const Command& cmd, const cgroup::Placement& placement,
                        char* const* argv, char* const* envp, int report_fd, pid_t parent) {
  // Writing "0" to cgroup.procs moves the writer itself (v1 and v2).
  for (int fd : placement.procs_fds)
    if (::write(fd, "0", 1) != 1) die(report_fd, 0);
  ::setsid();
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // memrun died before prctl
  int devnull = ::open("/dev/null", O_RDONLY);
  if (devnull < 0 || ::dup2(devnull, 0) < 0 || ::dup2(cmd.stdout_fd, 1) < 0 ||
      ::dup2(cmd.stderr_fd, 2) < 0)
    die(report_fd, 1);
  if (::chdir(cmd.cwd.c_str()) != 0) die(report_fd, 2);
  if (!cmd.oom_score_adj.empty()) {
    // Best effort: a test that keeps memrun's lowered score is still run.
    int fd = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
      (void)!::write(fd, cmd.oom_score_adj.data(), cmd.oom_score_adj.size());
      ::close(fd);
    }
  }
  if (cmd.open_files.rlim_cur) ::setrlimit(RLIMIT_NOFILE, &cmd.open_files);
  // A mount namespace of its own, for the seal and /dev/shm. Mounts made
  // here must not propagate back to the host (MS_SLAVE: the host's still
  // reach us).
  bool own_mounts = (cmd.private_shm || placement.seal) && ::unshare(CLONE_NEWNS) == 0 &&
                    ::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) == 0;
  // A test memrun was asked to seal never runs unsealed: it would see the
  // host's hierarchies, which as root it could write.
  if (placement.seal && (!own_mounts || cgroup::seal(*placement.seal) != 0)) die(report_fd, kSealStage);
  // A fresh tmpfs over /dev/shm: its pages are charged to the test's cgroup
  // like any shmem, and it is unmounted when the namespace dies with the
  // test's last process.
  if (cmd.private_shm && own_mounts)
    ::mount("memrun-shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
  // memrun blocks the signals it handles and ignores SIGPIPE; a test starts
  // with the defaults, as from a shell.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::signal(SIGPIPE, SIG_DFL);
  ::execve(cmd.path.c_str(), argv, envp);
  die(report_fd, kExecStage);
}

std::vector<char*> c_strings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// clone3 with CLONE_INTO_CGROUP: the child is born in the group, so not even
// the code between fork and exec runs outside it. Returns -1 with errno set
// when the kernel lacks it (ENOSYS before 5.3, E2BIG/EINVAL before 5.7).
pid_t clone_into(int dir_fd, int* pidfd) {
  struct clone_args args;
  std::memset(&args, 0, sizeof args);
  args.flags = CLONE_INTO_CGROUP | CLONE_PIDFD;
  args.pidfd = reinterpret_cast<uint64_t>(pidfd);
  args.exit_signal = SIGCHLD;
  args.cgroup = static_cast<uint64_t>(dir_fd);
  return static_cast<pid_t>(::syscall(SYS_clone3, &args, sizeof args));
}

struct ChildArgs {
  const Command* cmd;
  const cgroup::Placement* placement;
  char* const* argv;
  char* const* envp;
  int report_fd;
  pid_t parent;
};

int child_entry(void* p) {
  auto* a = static_cast<ChildArgs*>(p);
  child(*a->cmd, *a->placement, a->argv, a->envp, a->report_fd, a->parent);
}

// clone(CLONE_VM | CLONE_VFORK), as posix_spawn does: the child borrows
// memrun's address space until it execs, so no page table is copied; this is
// most of what a fork of memrun would cost per test. memrun is suspended
// meanwhile, so the child's small stack below is never used twice at once.
pid_t spawn_vfork(ChildArgs& args) {
  alignas(16) static char stack[64 * 1024];
  return ::clone(child_entry, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &args);
}

}  // namespace

std::string find_executable(const std::string& name, const std::vector<std::string>& env) {
  if (name.find('/') != std::string::npos) return name;
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  for (const auto& e : env)
    if (e.rfind("PATH=", 0) == 0) path = e.substr(5);
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

Child launch(const Command& cmd, const cgroup::Placement& placement) {
  auto argv = c_strings(cmd.argv);
  auto envp = c_strings(cmd.env);
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) throw_errno(1, "pipe");
  pid_t parent = ::getpid();
  Child c;
  c.pid = -1;
  if (placement.dir_fd >= 0) {
    c.pid = clone_into(placement.dir_fd, &c.pidfd);
    if (c.pid > 0) c.placement = "clone3";
    if (c.pid == 0) {
      cgroup::Placement inside;  // born in the group: nothing to join, but
      inside.seal = placement.seal;  // still to be sealed there
      child(cmd, inside, argv.data(), envp.data(), report[1], parent);
    }
  }
  if (c.pid < 0) {
    ChildArgs args{&cmd, &placement, argv.data(), envp.data(), report[1], parent};
    c.pid = spawn_vfork(args);
    if (c.pid > 0) c.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, c.pid, 0));
  }
  int saved = errno;
  ::close(report[1]);
  if (c.pid < 0) {
    ::close(report[0]);
    errno = saved;
    throw_errno(1, "cannot start a process");
  }
  // The pipe closes on exec (O_CLOEXEC): EOF means the command runs.
  ChildFailure f;
  ssize_t n;
  do {
    n = ::read(report[0], &f, sizeof f);
  } while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n == sizeof f) {
    int status;
    ::waitpid(c.pid, &status, 0);
    if (c.pidfd >= 0) ::close(c.pidfd);
    std::string what = std::string("the test could not ") + kStages[f.stage] + ": " + std::strerror(f.err);
    if (f.stage == kExecStage) what = "cannot run '" + cmd.path + "': " + std::strerror(f.err);
    if (f.stage == kSealStage)
      what += "; to run tests with the host's cgroup hierarchies in view (and writable, as root), "
              "use --host-cgroups";
    throw Error(1, what);
  }
  if (c.pidfd < 0) {
    saved = errno;
    ::kill(c.pid, SIGKILL);
    ::waitpid(c.pid, nullptr, 0);
    errno = saved;
    throw_errno(1, "pidfd_open (Linux 5.3 or later is required)");
  }
  return c;
}

}  // namespace memrun

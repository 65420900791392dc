// A test's side of its start, between fork and exec: its descriptors, the
// seal's namespaces and mounts, seccomp, its group, its limits.
// Long room: every step runs in the one child before exec, in the order the
// kernel's rules set; split, the order would be spread over files.
#include "runner/launch/child.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include "runner/base/error.h"
#include "runner/launch/init.h"
#include "runner/launch/init_embedded.h"

namespace memrun {
namespace {

using init::ChildFailure;  // what the child reports through the error pipe when it cannot exec
// By init::Stage.
const char* const kStages[] = {"join its cgroup", "set up stdio", "change to its cwd", "exec",
                               "be sealed in its cgroup (its own cgroup namespace and cgroup mounts)",
                               "be kept from the service manager (a mount namespace of its own, the "
                               "manager's sockets covered)",
                               "get a /proc of its own (a pid namespace of its own, /proc mounted for it)",
                               "be started by its init", "exec its init"};
using init::kExecStage, init::kSealStage, init::kShieldStage, init::kProcStage, init::kInitProgramStage;

// Everything the child needs, made before the clone: the child allocates
// nothing (see child()).
struct ChildArgs {
  const Command* cmd;
  const cgroup::Placement* placement;
  char* const* argv;
  char* const* envp;
  char* const* hidden;      // Command::hidden_sockets
  const char* uid_map;      // "UID UID 1": the user namespace's maps
  const char* gid_map;
  int report_fd;
  pid_t parent;
  int status_fd = -1;       // with Command::pid_namespace: InitReport's pipe
  int memrun_pidfd = -1;    // memrun's own pidfd: whether it is still there
  bool born_in_namespaces = false;  // the user and mount namespaces came with the clone
  // The seal's cgroup mounts, four strings each (init::seal).
  const char* const* seal = nullptr;
  int seal_count = 0;
  // With Command::pid_namespace: the init, exec'ed from `init_fd` (the init
  // program) with `init_argv`; or, with init_fd -1, run in this copy of
  // memrun as `init`.
  int init_fd = -1;
  char* const* init_argv = nullptr;
  const init::InitArgs* init = nullptr;
};

[[noreturn]] void die(int report_fd, int stage) {
  ChildFailure f{stage, errno};
  (void)!::write(report_fd, &f, sizeof f);
  ::_exit(127);
}

int write_self(const char* path, const char* text) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t length = static_cast<ssize_t>(std::strlen(text));
  bool ok = ::write(fd, text, static_cast<size_t>(length)) == length;
  ::close(fd);
  return ok ? 0 : -1;
}

// Gives the calling process a mount namespace of its own, a slave of the
// host's (MS_SLAVE: mounts made in it never reach the host; the host's
// still reach it). With maps, inside a user namespace of its own.
// Kernel rules (user_namespaces(7)):
// - unshare(CLONE_NEWUSER) needs no privilege (3.8+) and gives every
//   capability in the new namespace, which owns a mount namespace made in
//   the same call; its maps may be written once, by the process itself,
//   mapping only its own effective ids, the gid map only after setgroups is
//   denied (3.19+). The uid stays what it was, so nothing else changes for
//   the test (its files, its signals, memrun's /proc reads), and
//   PR_SET_PDEATHSIG survives (the new credentials are a subset of the old).
// - The exec that follows drops those capabilities (the uid is not 0 in
//   the namespace): the test cannot undo the mounts made here, and a
//   namespace it makes itself copies them locked (MNT_LOCKED).
// - Set-user-ID programs (sudo) gain nothing in it: root is not mapped.
// `made`: the clone already made both namespaces (see launch()).
// Returns 0; -1 when nothing changed; -2 when a namespace was made but not
// set up, after which the caller must not run the test (unmapped, it would
// run as nobody; with shared propagation, its mounts would reach the host).
int own_mount_namespace(const ChildArgs& a, bool made = false) {
  if (!a.cmd->user_namespace) {
    if (!made && ::unshare(CLONE_NEWNS) != 0) return -1;
  } else {
    if (!made && ::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return -1;
    if (write_self("/proc/self/setgroups", "deny") != 0 || write_self("/proc/self/uid_map", a.uid_map) != 0 ||
        write_self("/proc/self/gid_map", a.gid_map) != 0)
      return -2;
  }
  return ::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) == 0 ? 0 : -2;
}

// A /proc for the pid namespace the caller is PID 1 of (proc(5): a proc
// filesystem shows the pid namespace of the process that mounted it). As
// root the host's is detached first, with what is mounted below it, so that
// a root test cannot unmount the new one to find the old (the seal's
// cgroup mounts are replaced the same way). In a user namespace the
// inherited mounts are locked together (MNT_LOCKED) and cannot be detached;
// the new one goes on top, and the test, without capabilities there after
// its exec, cannot take it off.
int own_proc(bool root) {
  if (root && ::umount2("/proc", MNT_DETACH) != 0 && errno != EINVAL) return -1;
  return ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
}

// memrun blocks the signals it handles and ignores SIGPIPE; a test starts
// with the defaults, as from a shell.
void default_signals() {
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::signal(SIGPIPE, SIG_DFL);
}

void write_oom_score_adj(const char* text, size_t length) {
  int fd = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (fd >= 0) {
    (void)!::write(fd, text, length);
    ::close(fd);
  }
}

// Refuses the test AF_PACKET sockets (EAFNOSUPPORT): a packet socket's
// ring buffer (PACKET_RX_RING) is kernel memory no cgroup is charged for
// (alloc_pg_vec() allocates without __GFP_ACCOUNT), which a test can map
// and use as plain memory, 160 MiB under a 16 MiB limit. A seccomp filter
// (3.5+) is inherited across fork, exec and new namespaces and cannot be
// removed. Installing one needs CAP_SYS_ADMIN in the caller's user
// namespace or no_new_privs (which would break a test's setuid programs):
// as root, or in the test's own user namespace; else the test runs
// without it. Only the native ABI's socket(2) is filtered: i386's and
// x32's system calls, SOCK_PACKET and io_uring's socket op pass.
// System calls only.
void refuse_packet_sockets() {
#if defined(__x86_64__)
  constexpr uint32_t kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
  constexpr uint32_t kArch = AUDIT_ARCH_AARCH64;
#else
  return;
#endif
#if defined(__x86_64__) || defined(__aarch64__)
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 0, 5),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_socket, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_PACKET, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EAFNOSUPPORT),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  // SPEC_ALLOW (4.17+): before 5.16 a filter also forced speculative-store
  // bypass mitigations on the task (spec_store_bypass_disable=seccomp),
  // slowing every test down.
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_SPEC_ALLOW, &program) != 0)
    ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program, 0, 0);
#endif
}

// The number this process has in the host's pid namespace, read from the
// host's /proc (a proc filesystem numbers processes as the namespace that
// mounted it does); 0 when it cannot be read. System calls only.
int host_pid() {
  char link[32];
  ssize_t n = ::readlink("/proc/self", link, sizeof link);
  int pid = 0;
  for (ssize_t i = 0; i < n && link[i] >= '0' && link[i] <= '9'; ++i) pid = pid * 10 + (link[i] - '0');
  return pid;
}

// PID 1 of the test's pid namespace becomes its init (launch/init.h): the
// init program, exec'ed with the pipes and the leaf's file kept open; or,
// where it cannot be, this copy of memrun runs the same code.
[[noreturn]] void become_init(const ChildArgs& a, int host) {
  init::next_pid_after(host);
  if (a.init_fd < 0) init::run(*a.init);
  for (int fd : {a.status_fd, a.report_fd, a.placement->init_procs_fd, a.cmd->results_fd})
    if (fd >= 0) ::fcntl(fd, F_SETFD, 0);
  ::syscall(SYS_execveat, a.init_fd, "", a.init_argv, a.envp, AT_EMPTY_PATH);
  die(a.report_fd, kInitProgramStage);
}

// The child's first steps: into its group, a session of its own, and
// killed with memrun (or gone at once if memrun died before the tie held).
void join_and_tie(const ChildArgs& a) {
  // Writing "0" to cgroup.procs moves the writer itself (v1 and v2).
  for (int fd : a.placement->procs_fds)
    if (::write(fd, "0", 1) != 1) die(a.report_fd, init::kJoinStage);
  ::setsid();
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (a.cmd->pid_namespace) {
    // getppid() is 0 in a new pid namespace: memrun's pidfd, readable once
    // memrun has exited, says whether it died before prctl.
    pollfd gone{a.memrun_pidfd, POLLIN, 0};
    if (a.memrun_pidfd < 0 || ::poll(&gone, 1, 0) != 0) ::_exit(127);
  } else if (::getppid() != a.parent) {
    ::_exit(127);  // memrun died before prctl
  }
}

// Runs in the child between clone and exec: system calls only, no
// allocation and no libc state, because in the CLONE_VM case it shares
// memrun's memory while memrun waits. With Command::pid_namespace it is
// PID 1 of its namespace and becomes the test's init (become_init).
[[noreturn]] void child(const ChildArgs& a) {
  const Command& cmd = *a.cmd;
  const cgroup::Placement& placement = *a.placement;
  int report_fd = a.report_fd;
  join_and_tie(a);
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // dup2 clears it on 0
  // (No output fds: /dev/null, as for a vessel's init, which writes none.)
  if (devnull < 0 || ::dup2(devnull, 0) < 0 || ::dup2(cmd.stdout_fd >= 0 ? cmd.stdout_fd : devnull, 1) < 0 ||
      ::dup2(cmd.stderr_fd >= 0 ? cmd.stderr_fd : devnull, 2) < 0)
    die(report_fd, init::kStdioStage);
  if (::chdir(cmd.cwd.c_str()) != 0) die(report_fd, init::kCwdStage);
  if (!cmd.oom_score_adj.empty() && !cmd.pid_namespace)
    // Best effort: a test that keeps memrun's lowered score is still run.
    write_oom_score_adj(cmd.oom_score_adj.data(), cmd.oom_score_adj.size());
  if (cmd.open_files.rlim_cur) ::setrlimit(RLIMIT_NOFILE, &cmd.open_files);
  if (cmd.hugepages_off) ::prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
  // A mount namespace of its own, for the seal, /dev/shm, the sockets and /proc.
  bool hiding = a.hidden[0] != nullptr;
  int mounts = cmd.private_shm || placement.seal || hiding || cmd.pid_namespace
                   ? own_mount_namespace(a, a.born_in_namespaces)
                   : -1;
  if (mounts == -2) die(report_fd, kShieldStage);
  // A test memrun was asked to seal never runs unsealed: it would see the
  // host's hierarchies, which as root it could write.
  // By the command (init::run), where the init leaves the test's group
  // for a leaf of its own; a vessel's init stays, and seals itself here.
  bool seal_later = cmd.pid_namespace && placement.init_procs_fd >= 0 && !cmd.vessel;
  if (placement.seal && mounts != 0) die(report_fd, kSealStage);
  if (placement.seal && !seal_later)
    if (long r = init::seal(a.seal, a.seal_count); r < 0) errno = static_cast<int>(-r), die(report_fd, kSealStage);
  // A fresh tmpfs over /dev/shm: its pages are charged to the test's cgroup
  // like any shmem, and it is unmounted when the namespace dies with the
  // test's last process.
  if (cmd.private_shm && mounts == 0)
    ::mount("memrun-shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
  // connect(2) to a path that is not a socket is refused (ECONNREFUSED):
  // /dev/null bound over the socket closes the route without touching it.
  // A socket gone since memrun looked (ENOENT) needs no cover.
  for (char* const* s = a.hidden; *s; ++s)
    if (mounts != 0 || (::mount("/dev/null", *s, nullptr, MS_BIND, nullptr) != 0 && errno != ENOENT))
      die(report_fd, kShieldStage);
  refuse_packet_sockets();
  if (cmd.pid_namespace) {
    int host = host_pid();  // before the host's /proc is replaced
    if (mounts != 0 || own_proc(!cmd.user_namespace) != 0) die(report_fd, kProcStage);
    become_init(a, host);
  }
  default_signals();
  ::execve(cmd.path.c_str(), a.argv, a.envp);
  die(report_fd, kExecStage);
}

std::string id_map(unsigned id) { return std::to_string(id) + " " + std::to_string(id) + " 1"; }

std::vector<char*> c_strings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  for (const auto& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// clone3 with CLONE_INTO_CGROUP: the child is born in the group, so not even
// the code between fork and exec runs outside it. Returns -1 with errno set
// when the kernel lacks it (ENOSYS before 5.3, E2BIG/EINVAL before 5.7).
// `flags`: namespaces the child is born in (see launch()); `dir_fd` -1:
// born in memrun's group (it joins its own before exec).
pid_t clone_into(int dir_fd, int* pidfd, uint64_t flags = 0) {
  struct clone_args args;
  std::memset(&args, 0, sizeof args);
  args.flags = flags | CLONE_PIDFD | (dir_fd >= 0 ? CLONE_INTO_CGROUP : 0);
  args.pidfd = reinterpret_cast<uint64_t>(pidfd);
  args.exit_signal = SIGCHLD;
  if (dir_fd >= 0) args.cgroup = static_cast<uint64_t>(dir_fd);
  return static_cast<pid_t>(::syscall(SYS_clone3, &args, sizeof args));
}

// memrun's own pidfd, opened once (close-on-exec, as every pidfd): an init
// polls it to learn whether memrun died before it set PR_SET_PDEATHSIG.
int own_pidfd() {
  static const int fd = static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0));
  return fd;
}

int child_entry(void* p) { child(*static_cast<ChildArgs*>(p)); }

// clone(CLONE_VM | CLONE_VFORK), as posix_spawn does: the child borrows
// memrun's address space until it execs, so no page table is copied; this is
// most of what a fork of memrun would cost per test. The calling thread is
// suspended meanwhile, so its small stack below is never used twice at once.
// `flags`: namespaces it is born in; with `pidfd`, CLONE_PIDFD.
pid_t spawn_vfork(ChildArgs& args, int flags = 0, int* pidfd = nullptr) {
  alignas(16) static thread_local char stack[64 * 1024];
  if (pidfd) flags |= CLONE_PIDFD;
  return ::clone(child_entry, stack + sizeof stack, flags | CLONE_VM | CLONE_VFORK | SIGCHLD, &args, pidfd);
}

// What the child reported through the error pipe (read until EOF, which
// comes with the exec): throws its failure, after reaping the child; where
// the init program could not be exec'ed and `program_refused` is given,
// puts its errno there instead.
void await_exec(const Command& cmd, Child& c, int report_fd, int* program_refused = nullptr) {
  ChildFailure f;
  ssize_t n;
  do {
    n = ::read(report_fd, &f, sizeof f);
  } while (n < 0 && errno == EINTR);
  ::close(report_fd);
  if (n != sizeof f) return;
  // Reaped through its pidfd (P_PIDFD, 5.4+): a reaper on another thread
  // may have taken it already (ECHILD), and its pid may name another
  // process by then.
  siginfo_t info;
  if (c.pidfd >= 0) ::waitid(static_cast<idtype_t>(kWaitPidfd), static_cast<id_t>(c.pidfd), &info, WEXITED);
  if (c.pidfd >= 0) ::close(c.pidfd);
  if (c.status_fd >= 0) ::close(c.status_fd);
  c = Child{};
  if (f.stage == kInitProgramStage && program_refused) {
    *program_refused = f.err;
    return;
  }
  // What the pipe said comes from the child, or from whatever wrote to it
  // (a test without a pid namespace can reach memrun's descriptors).
  if (f.stage < 0 || f.stage >= static_cast<int>(std::size(kStages)))
    throw Error(Category::system, "the test's process reported no stage memrun knows (" + std::to_string(f.stage) +
                                      ") before its exec: something else wrote to the pipe memrun gave it");
  std::string what = std::string("the test could not ") + kStages[f.stage] + ": " + std::strerror(f.err);
  if (f.stage == kExecStage) what = "cannot run '" + cmd.path + "': " + std::strerror(f.err);
  if (f.stage == kSealStage)
    what += "; to run tests with the host's cgroup hierarchies in view (and writable, as root), "
            "use --host-cgroups";
  if (f.stage == kShieldStage)
    what += "; a test that must reach the service manager (systemd-run, systemctl) says so with "
            "'service_manager: true' in its spec";
  if (f.stage == kProcStage) what += "; --host-cgroups runs tests without a pid namespace";
  throw Error(Category::system, what);
}

// The init program as a sealed memory file (memfd_create, 3.17+), made
// once; -1 where it was not built or cannot be exec'ed here (checked once
// with its "probe": vm.memfd_noexec=2, 6.3+, or a security module may
// forbid it). Then a copy of memrun runs the init.
int init_program_fd() {
  static const int fd = [] {
    std::string_view bytes = init_program();
    if (bytes.empty()) return -1;
    constexpr unsigned kExec = 0x10;  // MFD_EXEC (6.3+): asked for, as the kernel wants it said
    int m = static_cast<int>(::syscall(SYS_memfd_create, "memrun-init", MFD_CLOEXEC | MFD_ALLOW_SEALING | kExec));
    if (m < 0 && errno == EINVAL) m = static_cast<int>(::syscall(SYS_memfd_create, "memrun-init", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (m < 0) return -1;
    // Sealed: no test can change it through /proc/1/exe, its contents nor
    // (F_SEAL_EXEC, 6.3+) its mode.
    constexpr int kSeals = F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE, kSealExec = 0x20;
    bool written = ::write(m, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()) &&
                   (::fcntl(m, F_ADD_SEALS, kSeals | kSealExec) == 0 || ::fcntl(m, F_ADD_SEALS, kSeals) == 0);
    pid_t pid = written ? ::fork() : -1;
    if (pid == 0) {
      char probe[] = "probe";
      char* argv[] = {probe, probe, nullptr};
      char* none[] = {nullptr};
      ::syscall(SYS_execveat, m, "", argv, none, AT_EMPTY_PATH);
      ::_exit(127);
    }
    int status = -1;
    while (pid > 0 && ::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) return m;
    ::close(m);
    return -1;
  }();
  return fd;
}

// The init program's argv (init::main_of) for `init`; the numbers' text
// is kept in `numbers`.
std::vector<char*> program_argv(const init::InitArgs& init, std::vector<std::string>& numbers) {
  numbers = {std::to_string(init.status_fd), std::to_string(init.report_fd), std::to_string(init.procs_fd),
             std::to_string(init.results_fd), std::to_string(init.seal_count)};
  std::vector<char*> argv = {const_cast<char*>("memrun-init"), numbers[0].data(), numbers[1].data(),
                             numbers[2].data(), numbers[3].data(), const_cast<char*>(init.oom_score_adj),
                             numbers[4].data()};
  for (int i = 0; i < 4 * init.seal_count; ++i) argv.push_back(const_cast<char*>(init.seal[i]));
  argv.push_back(const_cast<char*>(init.path));
  for (char* const* a = init.argv; *a; ++a) argv.push_back(*a);
  argv.push_back(nullptr);
  return argv;
}

// Starts the child that becomes the test's init (child(), become_init()),
// in the namespaces of `flags`; -1 in c.pid and errno when none could be.
// It is memrun's child, born in a new pid namespace (and, without root, in
// the user and mount namespaces that allow it: made in one clone, the pid
// namespace is owned by the new user namespace, where the child has
// CAP_SYS_ADMIN). It lives as long as the test, so it cannot go on in
// memrun's memory: it execs the init program, a process of a few pages,
// and so is born as vfork's children are (no page table copied, memrun
// waiting). Born in its group (clone3's CLONE_INTO_CGROUP, v2), it is a
// copy of memrun until that exec (no C library wrapper of clone3 runs a
// function on a stack of its own); where the program cannot run, it stays
// a copy of memrun (copy-on-write) and runs the same init.
void clone_init(const cgroup::Placement& placement, ChildArgs& args, uint64_t flags, Child& c) {
  cgroup::Placement inside;  // born in the group: nothing to join, but
  inside.seal = placement.seal;  // still to be sealed there
  inside.init_procs_fd = placement.init_procs_fd;
  if (placement.dir_fd >= 0) {
    c.pid = clone_into(placement.dir_fd, &c.pidfd, flags);
    if (c.pid > 0) c.placement = "clone3";
    if (c.pid == 0) {
      args.placement = &inside;
      child(args);
    }
  }
  if (c.pid < 0 && args.init_fd >= 0) c.pid = spawn_vfork(args, static_cast<int>(flags), &c.pidfd);
  if (c.pid < 0) {
    c.pid = clone_into(-1, &c.pidfd, flags);
    if (c.pid == 0) child(args);
  }
  if (c.pid < 0 && (errno == ENOSYS || errno == EPERM)) {
    // clone3 refused (before 5.3, or a seccomp filter such as Docker's
    // default, which answers it ENOSYS): clone(2) with the same namespaces,
    // fork-like (no new stack), with its pidfd (CLONE_PIDFD, 5.2+).
    c.pid = static_cast<pid_t>(::syscall(SYS_clone, static_cast<unsigned long>(flags) | CLONE_PIDFD | SIGCHLD,
                                         nullptr, &c.pidfd, nullptr, nullptr));
    if (c.pid == 0) child(args);
  }
}

// What the init is given, made before the clone (the child allocates
// nothing); its pipes come later.
init::InitArgs init_args(const Command& cmd, const cgroup::Placement& placement, const ChildArgs& args) {
  init::InitArgs init;
  init.procs_fd = cmd.vessel ? -1 : placement.init_procs_fd;
  init.results_fd = cmd.results_fd;
  init.vessel = cmd.vessel;
  init.oom_score_adj = cmd.oom_score_adj.c_str();
  init.seal = args.seal;
  init.seal_count = args.seal_count;
  init.path = cmd.path.c_str();
  init.argv = args.argv;
  init.envp = args.envp;
  return init;
}

Child launch_init(const Command& cmd, const cgroup::Placement& placement, ChildArgs& args, int report[2]) {
  args.memrun_pidfd = own_pidfd();
  uint64_t flags = CLONE_NEWPID;
  if (cmd.user_namespace) {
    flags |= CLONE_NEWUSER | CLONE_NEWNS;
    args.born_in_namespaces = true;
  }
  // As InitArgs, and as the init program's argv.
  init::InitArgs init = init_args(cmd, placement, args);
  args.init = &init;
  args.init_fd = init_program_fd();
  for (;;) {
    int status[2];
    if (::pipe2(status, O_CLOEXEC) != 0) {
      int saved = errno;
      ::close(report[0]);
      ::close(report[1]);
      errno = saved;
      throw_errno(Category::system, "pipe");
    }
    args.status_fd = init.status_fd = status[1];
    args.report_fd = init.report_fd = report[1];
    std::vector<std::string> numbers;
    std::vector<char*> argv = program_argv(init, numbers);
    args.init_argv = argv.data();
    Child c;
    clone_init(placement, args, flags, c);
    int saved = errno;
    ::close(report[1]);
    ::close(status[1]);
    if (c.pid < 0) {
      ::close(report[0]);
      ::close(status[0]);
      errno = saved;
      throw_errno(Category::system, "cannot start a process in a pid namespace of its own");
    }
    c.status_fd = status[0];
    ::fcntl(c.status_fd, F_SETFL, O_NONBLOCK);
    int refused = 0;
    await_exec(cmd, c, report[0], args.init_fd >= 0 ? &refused : nullptr);
    if (!refused) return c;
    // The program could not be exec'ed for this test: its argv and env at
    // exec's limit (ARG_MAX, with the init's own arguments), or its mode
    // changed by an earlier test (through /proc/1/exe, before 6.3's
    // F_SEAL_EXEC; memrun, its owner, gives the later tests their mode
    // back). Nothing of the test ran: started again, with a copy of memrun
    // as its init.
    if (refused == EACCES) ::fchmod(args.init_fd, 0500);
    args.init_fd = -1;
    if (::pipe2(report, O_CLOEXEC) != 0) throw_errno(Category::system, "pipe");
  }
}

}  // namespace

bool user_namespaces_work() {
  static const bool works = [] {
    Command probe;
    probe.user_namespace = true;
    const std::string uid_map = id_map(::geteuid()), gid_map = id_map(::getegid());
    char* none[] = {nullptr};
    ChildArgs args{&probe, nullptr, none, none, none, uid_map.c_str(), gid_map.c_str(), -1, ::getpid()};
    pid_t pid = ::fork();
    if (pid == 0) ::_exit(own_mount_namespace(args) == 0 ? 0 : 1);
    int status = 0;
    while (pid > 0 && ::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }();
  return works;
}

bool pid_namespaces_work() {
  static const bool works = [] {
    if (!user_namespaces_work()) return false;
    Command probe;
    probe.user_namespace = true;
    const std::string uid_map = id_map(::geteuid()), gid_map = id_map(::getegid());
    char* none[] = {nullptr};
    ChildArgs args{&probe, nullptr, none, none, none, uid_map.c_str(), gid_map.c_str(), -1, ::getpid()};
    int pidfd = -1;
    pid_t pid = clone_into(-1, &pidfd, CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID);
    if (pid == 0) ::_exit(own_mount_namespace(args, true) == 0 && own_proc(false) == 0 ? 0 : 1);
    int status = 0;
    while (pid > 0 && ::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (pidfd >= 0) ::close(pidfd);
    return pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }();
  return works;
}

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

void prepare_init_program() { (void)init_program_fd(); }

Child launch(const Command& cmd, const cgroup::Placement& placement) {
  // A vessel's init is told so by an empty path (init::main_of). (Named:
  // the pointers below point into it until the exec.)
  static const std::vector<std::string> vessel_argv{""};
  auto argv = c_strings(cmd.vessel ? vessel_argv : cmd.argv);
  auto envp = c_strings(cmd.env);
  auto hidden = c_strings(cmd.hidden_sockets);
  const std::string uid_map = id_map(::geteuid()), gid_map = id_map(::getegid());
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) throw_errno(Category::system, "pipe");
  ChildArgs args{&cmd, &placement, argv.data(), envp.data(), hidden.data(),
                 uid_map.c_str(), gid_map.c_str(), report[1], ::getpid()};
  // The seal's mounts as init::seal takes them.
  std::vector<std::string> flags;
  std::vector<const char*> seal;
  if (placement.seal) {
    for (const auto& m : *placement.seal) flags.push_back(std::to_string(m.flags));
    for (size_t i = 0; i < placement.seal->size(); ++i) {
      const auto& m = (*placement.seal)[i];
      seal.insert(seal.end(), {m.point.c_str(), m.fstype.c_str(), flags[i].c_str(), m.options.c_str()});
    }
    args.seal = seal.data();
    args.seal_count = static_cast<int>(placement.seal->size());
  }
  Child c;
  c.pid = -1;
  if (cmd.pid_namespace) return launch_init(cmd, placement, args, report);
  if (placement.dir_fd >= 0) {
    c.pid = clone_into(placement.dir_fd, &c.pidfd);
    if (c.pid > 0) c.placement = "clone3";
    if (c.pid == 0) {
      cgroup::Placement inside;  // born in the group: nothing to join, but
      inside.seal = placement.seal;  // still to be sealed there
      args.placement = &inside;
      child(args);
    }
  }
  // With its pidfd from the clone (CLONE_PIDFD, 5.2+): the loop reaps on
  // another thread (wait4(-1)), and a child that ended at once may be
  // gone before a pidfd_open(pid) could name it.
  if (c.pid < 0) c.pid = spawn_vfork(args, 0, &c.pidfd);
  int saved = errno;
  ::close(report[1]);
  if (c.pid < 0) {
    ::close(report[0]);
    errno = saved;
    throw_errno(Category::system, "cannot start a process");
  }
  // The pipe closes on exec (O_CLOEXEC): EOF means the command runs.
  await_exec(cmd, c, report[0]);
  return c;
}

}  // namespace memrun

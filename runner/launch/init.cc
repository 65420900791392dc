// The init of a sealed test's pid namespace (see launch/init.h). Built twice:
// into memrun, and with MEMRUN_FREESTANDING_INIT into the init program,
// which has no C library (its start-up alone, cpuid and relocations, would
// cost half a millisecond a test; x86_64 only so far): system calls
// through `sys` only, no allocation, no errno.
#include "runner/launch/init.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

namespace memrun::init {
namespace {

#if MEMRUN_FREESTANDING_INIT
// A system call: the result, or -errno.
long sys(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0, long f = 0) {
  long r;
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  register long r9 __asm__("r9") = f;
  __asm__ volatile("syscall"
                   : "=a"(r)
                   : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return r;
}

// clone(CLONE_VM | CLONE_VFORK) onto `stack_top`, where the child calls
// fn(arg) and never returns (launch/init_start.cc).
extern "C" long memrun_init_spawn(unsigned long flags, void* stack_top, int (*fn)(void*), void* arg);
long spawn(int (*fn)(void*), void* arg, void* stack_top) {
  return memrun_init_spawn(CLONE_VM | CLONE_VFORK | SIGCHLD, stack_top, fn, arg);
}
#else
long sys(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0, long f = 0) {
  long r = ::syscall(n, a, b, c, d, e, f);
  return r == -1 ? -errno : r;
}

long spawn(int (*fn)(void*), void* arg, void* stack_top) {
  long r = ::clone(fn, stack_top, CLONE_VM | CLONE_VFORK | SIGCHLD, arg);
  return r == -1 ? -errno : r;
}
#endif

long length(const char* s) {
  long n = 0;
  while (s[n]) ++n;
  return n;
}

long number(const char* s) {
  long sign = *s == '-' ? (++s, -1) : 1, v = 0;
  while (*s >= '0' && *s <= '9') v = v * 10 + (*s++ - '0');
  return sign * v;
}

long write_file(const char* path, const char* text) {
  long fd = sys(SYS_openat, AT_FDCWD, reinterpret_cast<long>(path), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return fd;
  long n = length(text), r = sys(SYS_write, fd, reinterpret_cast<long>(text), n);
  sys(SYS_close, fd);
  return r == n ? 0 : (r < 0 ? r : -EIO);
}

[[noreturn]] void exit_now(int code) {
  for (;;) sys(SYS_exit_group, code);
}

[[noreturn]] void fail(int report_fd, int stage, long err) {
  ChildFailure f{stage, static_cast<int>(-err)};
  sys(SYS_write, report_fd, reinterpret_cast<long>(&f), sizeof f);
  exit_now(127);
}

// memrun blocks the signals it handles and ignores SIGPIPE, which exec
// keeps: the test starts with the defaults, as from a shell.
void default_signals() {
  unsigned long none = 0;
  sys(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&none), 0, sizeof none);
  struct {
    void* handler;
    unsigned long flags;
    void* restorer;
    unsigned long mask;
  } action{};  // SIG_DFL; the kernel's struct sigaction (x86_64, arm64)
  sys(SYS_rt_sigaction, SIGPIPE, reinterpret_cast<long>(&action), 0, sizeof action.mask);
}

// Closes every descriptor but those of `keep` (-1 for none; close_range,
// 5.9+; before it, one by one up to the open-files limit).
void close_others(int keep[4]) {
  auto close_between = [](int lo, int hi) {
    if (lo > hi || sys(SYS_close_range, lo, hi, 0) == 0) return;
    struct {
      unsigned long cur, max;
    } files{1024, 1024};
    sys(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, reinterpret_cast<long>(&files));
    unsigned long last = files.cur < static_cast<unsigned long>(hi) ? files.cur : static_cast<unsigned long>(hi);
    if (last > (1u << 20)) last = 1u << 20;
    for (unsigned long fd = static_cast<unsigned long>(lo); fd <= last; ++fd) sys(SYS_close, static_cast<long>(fd));
  };
  for (int i = 0; i < 4; ++i)  // sorted, in place
    for (int j = i + 1; j < 4; ++j)
      if (keep[j] < keep[i]) {
        int t = keep[i];
        keep[i] = keep[j];
        keep[j] = t;
      }
  int from = 3;
  for (int i = 0; i < 4; ++i) {
    if (keep[i] < from) continue;  // -1, below 3, or a repeat
    close_between(from, keep[i] - 1);
    from = keep[i] + 1;
  }
  close_between(from, 0x7fffffff);
}

// Points `a`'s path and argv at a copy of theirs (an anonymous mapping),
// and clears the originals. False when no memory could be had.
bool copy_command(InitArgs& a) {
  long count = 0, bytes = length(a.path) + 1;
  for (; a.argv[count]; ++count) bytes += length(a.argv[count]) + 1;
  long table = (count + 1) * static_cast<long>(sizeof(char*));
  long mapped = sys(SYS_mmap, 0, table + bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped < 0 && mapped > -4096) return false;
  char** argv = reinterpret_cast<char**>(mapped);
  char* to = reinterpret_cast<char*>(mapped) + table;
  auto copy = [&to](char* from) {
    char* start = to;
    for (long i = 0, n = length(from); i <= n; ++i) *to++ = from[i];
    for (long i = 0, n = length(from); i < n; ++i) from[i] = '\0';
    return start;
  };
  const char* path = copy(const_cast<char*>(a.path));
  for (long i = 0; i < count; ++i) argv[i] = copy(a.argv[i]);
  argv[count] = nullptr;
  a.path = path;
  a.argv = argv;
  return true;
}

struct CommandStart {
  const InitArgs* a;
  volatile bool failed;
};

// The init's command, in a vfork-style child of the init.
int command_entry(void* p) {
  auto* c = static_cast<CommandStart*>(p);
  const InitArgs& a = *c->a;
  // The test's main process leads its own session and process group, as
  // it would without the init.
  sys(SYS_setsid);
  // Sealed here, not in the init, when the init leaves for a leaf of its
  // own (see run): a cgroup namespace is rooted where its maker is.
  if (a.procs_fd >= 0) {
    if (long r = seal(a.seal, a.seal_count); r < 0) {
      c->failed = true;
      fail(a.report_fd, kSealStage, r);
    }
  }
  if (*a.oom_score_adj) write_file("/proc/self/oom_score_adj", a.oom_score_adj);
  long r = sys(SYS_execve, reinterpret_cast<long>(a.path), reinterpret_cast<long>(a.argv), reinterpret_cast<long>(a.envp));
  c->failed = true;
  fail(a.report_fd, kExecStage, r);
}

// A vessel's init (Command::vessel): no command of its own. A process of
// another's is entered into its namespaces (runner/app/serve.h); what that
// process leaves when its parent dies is reparented here and reaped.
// SIGCHLD stays blocked and is taken with rt_sigtimedwait between reaps:
// a child that ends while the init reaps leaves the signal pending, so
// none is missed. The init never exits on its own (ECHILD is only "none
// yet"): memrun's kill of the group ends it, and the kernel then the rest
// of its namespace.
[[noreturn]] void be_vessel(const InitArgs& a) {
  int keep[4] = {a.report_fd, -1, -1, -1};
  close_others(keep);
  for (char* p = a.wipe_from; p && p < a.wipe_to; ++p) *p = '\0';
  unsigned long child = 1ul << (SIGCHLD - 1);
  sys(SYS_rt_sigprocmask, SIG_BLOCK, reinterpret_cast<long>(&child), 0, sizeof child);
  sys(SYS_close, a.report_fd);  // memrun reads EOF: the vessel is ready
  for (;;) {
    int status = 0;
    while (sys(SYS_wait4, -1, reinterpret_cast<long>(&status), WNOHANG, 0) > 0) {
    }
    sys(SYS_rt_sigtimedwait, reinterpret_cast<long>(&child), 0, 0, sizeof child);
  }
}

}  // namespace

void next_pid_after(int after) {
  if (after <= 0) return;
  char text[16], digits[16];
  int length = 0, d = 0;
  for (int v = after; v > 0 && d < 15; v /= 10) digits[d++] = static_cast<char>('0' + v % 10);
  while (d > 0) text[length++] = digits[--d];
  text[length] = '\0';
  write_file("/proc/sys/kernel/ns_last_pid", text);
}

long seal(const char* const* mounts, int count) {
  if (long r = sys(SYS_unshare, CLONE_NEWCGROUP); r < 0) return r;
  // Deepest first (mountinfo lists parents before children). EINVAL: not a
  // mount point any more, as when a parent's detach took it along.
  for (int i = count; i-- > 0;)
    if (long r = sys(SYS_umount2, reinterpret_cast<long>(mounts[4 * i]), MNT_DETACH); r < 0 && r != -EINVAL) return r;
  for (int i = 0; i < count; ++i) {
    const char* const* m = mounts + 4 * i;
    const char* options = *m[3] ? m[3] : nullptr;
    if (long r = sys(SYS_mount, reinterpret_cast<long>(m[1]), reinterpret_cast<long>(m[0]), reinterpret_cast<long>(m[1]),
                     number(m[2]), reinterpret_cast<long>(options));
        r < 0)
      return r;
  }
  return 0;
}

// PID 1 of the test's pid namespace. It starts the command, reaps what is
// reparented to it and, when the command ends, hands memrun its exact wait
// status through `status_fd` (an init cannot die of a signal sent from its
// own namespace, nor re-raise the command's). It then stays, reaping, until
// nothing else is left: memrun counts and kills what the test left behind
// (its group's kill takes the init too), and when an init dies the kernel
// kills everything left in its namespace, so nothing of the test outlives
// it, whatever cgroup it moved to (pid_namespaces(7)).
// Kernel rules it relies on: signals other than SIGKILL and SIGSTOP reach
// an init only when it has a handler (none here): memrun signals every
// process of the group itself (signal_all), so the command gets SIGTERM
// once, and the init stays; SIGKILL from memrun's namespace always kills
// it. It holds none of memrun's descriptors (a root test could reopen them
// through /proc/1/fd): only the status pipe, whose worst misuse is to
// report a status the test could have exited with itself, and the test's
// own results file.
void run(const InitArgs& a) {
  sys(SYS_prctl, PR_SET_NAME, reinterpret_cast<long>("memrun-init"));
  // The kernel's OOM killer must pick the test, never its init: -1000
  // exempts it (root only: lowering needs CAP_SYS_RESOURCE in the initial
  // user namespace). Without root the init keeps memrun's score and the
  // command gets its own, 500 higher (see protect_memrun in process_setup.cc).
  write_file("/proc/self/oom_score_adj", "-1000");
  default_signals();
  if (a.vessel) be_vessel(a);
  int keep[4] = {a.status_fd, a.report_fd, a.procs_fd, a.results_fd};
  close_others(keep);
  // The pipes, the leaf's file and the results file stay the init's: the
  // command's exec closes them.
  for (int fd : keep)
    if (fd >= 0) sys(SYS_fcntl, fd, F_SETFD, FD_CLOEXEC);
  // The command's path and argv are the last of the init's own argv, which
  // /proc/1/cmdline shows: copied out and cleared before the command
  // starts, so that no `pgrep -f` of it, however soon, finds the init.
  InitArgs own = a;
  if (a.wipe_from && !copy_command(own)) fail(a.report_fd, kInitStage, -ENOMEM);
  CommandStart c{&own, false};
  alignas(16) char stack[32 * 1024];
  long command = spawn(command_entry, &c, stack + sizeof stack);
  if (command < 0) fail(a.report_fd, kInitStage, command);
  if (c.failed) exit_now(127);
  for (char* p = a.wipe_from; p && p < a.wipe_to; ++p) *p = '\0';
  // v2, sealed: the init leaves the test's group for its own leaf beside
  // it, under the same limited parent, so that the test may enable
  // controllers for groups of its own. Then a cgroup namespace of its own
  // rooted there: a root test that entered the init's namespaces
  // (setns through /proc/1/ns) must find no wider view than its own.
  // (A failure here is said as the init's: memrun still waits for the
  // pipe's EOF, and the command dies with its init.)
  if (a.procs_fd >= 0) {
    long r = sys(SYS_write, a.procs_fd, reinterpret_cast<long>("0"), 1);
    if (r == 1) r = sys(SYS_unshare, CLONE_NEWCGROUP);
    if (r < 0) fail(a.report_fd, kInitStage, r);
    sys(SYS_close, a.procs_fd);
  }
  sys(SYS_close, a.report_fd);  // memrun reads EOF: the command runs
  int status_fd = a.status_fd;
  for (;;) {
    int status = 0;
    rusage usage{};
    long pid = sys(SYS_wait4, -1, reinterpret_cast<long>(&status), 0, reinterpret_cast<long>(&usage));
    if (pid == -EINTR) continue;
    if (pid < 0) exit_now(0);  // ECHILD: nothing of the test is left
    if (pid == command && status_fd >= 0) {
      InitReport report{status, usage};
      sys(SYS_write, status_fd, reinterpret_cast<long>(&report), sizeof report);
      sys(SYS_close, status_fd);
      status_fd = -1;
    }
  }
}

#if MEMRUN_FREESTANDING_INIT
void main_of(int argc, char** argv, char** envp) {
  if (argc == 2 && argv[1][0] == 'p') exit_now(0);  // "probe"
  if (argc < 3) exit_now(127);
  InitArgs a;
  a.status_fd = static_cast<int>(number(argv[1]));
  a.report_fd = static_cast<int>(number(argv[2]));
  if (argc < 9) fail(a.report_fd, kInitStage, -EINVAL);
  a.procs_fd = static_cast<int>(number(argv[3]));
  a.results_fd = static_cast<int>(number(argv[4]));
  a.oom_score_adj = argv[5];
  a.seal_count = static_cast<int>(number(argv[6]));
  if (a.seal_count < 0 || 8 + 4 * a.seal_count >= argc) fail(a.report_fd, kInitStage, -EINVAL);
  a.seal = argv + 7;
  a.path = argv[7 + 4 * a.seal_count];
  a.argv = argv + 8 + 4 * a.seal_count;
  a.vessel = a.path[0] == '\0';
  a.envp = envp;
  a.wipe_from = argv[1];
  a.wipe_to = argv[argc - 1] + length(argv[argc - 1]);
  run(a);
}
#endif

}  // namespace memrun::init

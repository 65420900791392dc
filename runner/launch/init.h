// The init of a sealed test's pid namespace: PID 1 there, it starts the
// test's command, reaps what is reparented to it and hands memrun the
// command's wait status. System calls only, so that the same code serves
// as a program of its own (runner/launch/init_start.cc, built without the C
// library and exec'ed from memory: a fresh process, nothing of memrun's
// in it) and, where that program cannot be exec'ed, in a copy of memrun.
#pragma once

#include <sys/resource.h>

namespace memrun::init {

/// What the init of a pid namespace hands memrun when the command ends: its
/// exact wait status and resource usage, as wait4 gave them to the init
/// (the init of a pid namespace cannot die of the command's signal).
struct InitReport {
  int status = 0;
  rusage usage{};
};

/// What a test's process reports through its error pipe when it cannot
/// exec: the stage (below) and errno.
struct ChildFailure {
  int stage;
  int err;
};
enum Stage {
  kJoinStage, kStdioStage, kCwdStage, kExecStage, kSealStage, kShieldStage, kProcStage, kInitStage,
  kInitProgramStage,  ///< the init program could not be exec'ed: memrun starts the test again without it
};

/// Everything the init needs, as text where it came through exec.
struct InitArgs {
  int status_fd = -1;  ///< InitReport's pipe
  int report_fd = -1;  ///< ChildFailure's pipe; its EOF says the command runs
  /// v2, sealed: cgroup.procs of the init's own leaf, beside the test's, or -1.
  int procs_fd = -1;
  /// A descriptor the init keeps open for the test (Command::results_fd),
  /// or -1.
  int results_fd = -1;
  const char* oom_score_adj = "";   ///< for the command; "" leaves it
  /// With procs_fd: the cgroup mounts the command seals itself with, four
  /// strings each (point, fstype, flags in decimal, options) (seal()).
  const char* const* seal = nullptr;
  int seal_count = 0;
  const char* path = nullptr;       ///< the command
  /// Start no command (Command::vessel): reap until killed. The program
  /// is told so by an empty path.
  bool vessel = false;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  /// The init program's own argv strings past its name, cleared once the
  /// command runs: /proc/1/cmdline then says `memrun-init` alone, and a
  /// test's `pgrep -f` of its command finds the command, not its init.
  char* wipe_from = nullptr;
  char* wipe_to = nullptr;
};

/// Runs as the init; never returns.
[[noreturn]] void run(const InitArgs& a);

/// Makes the next pid of the caller's pid namespace `after` + 1, for its
/// init to start the command with: every test's command would be pid 2,
/// and /tmp is shared, so files named after a pid (`/tmp/x.$$`, heaptrack's
/// FIFO) would clash between tests run at once; the init's host pid + 1 is
/// a number no other live test's namespace starts from. ns_last_pid (3.3+)
/// needs CAP_SYS_ADMIN over the namespace: written before the init's exec,
/// which drops it in a user namespace. Best effort.
void next_pid_after(int after);

/// Replaces the caller's cgroup mounts (`count` of them, four strings each,
/// as InitArgs::seal) with fresh ones in a cgroup namespace of its own,
/// rooted at its cgroup. 0, or -errno.
long seal(const char* const* mounts, int count);

/// The init program's (MEMRUN_FREESTANDING_INIT): its argv is argv[0],
/// then status_fd, report_fd, procs_fd, results_fd, oom_score_adj, the number of seal
/// mounts, their strings, and the command's path and argv; "probe" alone
/// exits 0 (whether the program can be exec'ed here).
[[noreturn]] void main_of(int argc, char** argv, char** envp);

}  // namespace memrun::init

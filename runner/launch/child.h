// Starting a test's process inside its cgroup, so that the limit applies
// from its first instruction.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "cgroup/cgroup.h"
#include "runner/launch/init.h"

namespace memrun {

/// What to start.
struct Command {
  std::string path;               ///< resolved executable
  std::vector<std::string> argv;
  std::vector<std::string> env;   ///< NAME=value, complete
  std::string cwd;
  int stdout_fd = -1, stderr_fd = -1;
  /// With pid_namespace: a descriptor the test's init keeps open (not the
  /// command: close-on-exec) under its own number N, for the test to open
  /// as /proc/1/fd/N: where its tool writes how the case ended
  /// (RunningTest::ask_for_outcome). -1: none.
  int results_fd = -1;
  /// Written to the child's /proc/self/oom_score_adj before exec, when not
  /// empty (see protect_memrun in process_setup.cc).
  std::string oom_score_adj;
  /// The open-files limit the child gets back before exec, when memrun
  /// raised its own (see raise_open_files in process_setup.cc); rlim_cur 0: none.
  rlimit open_files{0, 0};
  /// Give the child a /dev/shm of its own (a fresh tmpfs in a mount
  /// namespace of its own), gone with the test's last process: what a test
  /// leaves there cannot outlive it, uncharged, beside the next test. Best
  /// effort: without CAP_SYS_ADMIN and without `user_namespace` the child
  /// keeps the shared one, and the report says what it left there.
  bool private_shm = false;
  /// Sockets to cover in the child's mount namespace, a bind mount of
  /// /dev/null over each (connect() is then refused): the service managers'
  /// (see shield.h). Not empty: the child never runs with them in reach.
  std::vector<std::string> hidden_sockets;
  /// Make that mount namespace inside a user namespace of the child's own,
  /// its uid and gid mapped to themselves: how a process without
  /// CAP_SYS_ADMIN gets one (only where user_namespaces_work()).
  bool user_namespace = false;
  /// No transparent huge pages for the child and what it starts
  /// (PR_SET_THP_DISABLE, 3.15+: inherited by fork, kept across exec), so
  /// that its figures do not depend on the host's THP policy: with
  /// "always" (Debian's default) a runtime's heap is backed by 2 MiB pages
  /// and its anonymous memory grows by a third (DuckDB under Node.js,
  /// specs/parquet.yaml); with "madvise" (Ubuntu's) only what asks.
  bool hugepages_off = false;
  /// Run the command under a small init of memrun's own, PID 1 of a pid
  /// namespace of its own, with /proc mounted afresh for it: from inside,
  /// no process outside the test exists (not memrun, not another test),
  /// so none is reachable through /proc/PID (root, fd, mem) or kill(2).
  /// Needs a mount namespace (a seal, or `user_namespace` where
  /// pid_namespaces_work()). Child::status_fd then gives the command's
  /// wait status.
  bool pid_namespace = false;
  /// With pid_namespace: the init starts no command. A process of another's
  /// (a case pytest forks, runner/app/serve.h) is entered into the test's
  /// namespaces and groups instead; the init reaps what is reparented to
  /// it until memrun kills it, and never reports a status. It stays in the
  /// test's group (on v2 too: the namespaces the case enters are rooted
  /// there), and `path` and `argv` are unused.
  bool vessel = false;
};

/// waitid(2)'s idtype for a pidfd (P_PIDFD, 5.4+): a child is reaped
/// through its pidfd, never by a pid another process may have by then.
constexpr int kWaitPidfd = 3;

/// What the init of a pid namespace hands memrun when the command ends.
using InitReport = init::InitReport;

/// A started process.
struct Child {
  pid_t pid = -1;
  int pidfd = -1;  ///< readable once the process has exited
  /// How it got into its group: "clone3" (born there) or "join" (moved
  /// itself before exec).
  const char* placement = "join";
  /// With Command::pid_namespace: `pid` and `pidfd` are the init's, and
  /// this non-blocking pipe gives one InitReport when the command has
  /// ended (EOF without one: the init was killed first; its own status
  /// stands then). -1 otherwise.
  int status_fd = -1;
};

/// Starts `cmd` inside the group described by `placement`: with
/// clone3(CLONE_INTO_CGROUP) where the backend offers a directory fd and the
/// kernel supports it (5.7+), else a vfork-style clone whose child moves
/// itself into the group before exec. The child gets its own session, stdin from /dev/null, default signal
/// handling, and dies with memrun (PR_SET_PDEATHSIG). Throws memrun::Error
/// with the reason when the command cannot start (exec failed, cgroup refused
/// the process); no process is left behind then.
Child launch(const Command& cmd, const cgroup::Placement& placement);

/// Makes the init program of sealed tests' pid namespaces ready (written
/// to a sealed memory file and probed once: a fork memrun waits for), as
/// launch() would on its first sealed start: for a caller that starts
/// tests on another thread than the one that reaps (Launcher).
void prepare_init_program();

/// Whether a process without CAP_SYS_ADMIN may make a user namespace and a
/// mount namespace of its own here, as Command::user_namespace asks: tried
/// once, in a short-lived child (Debian's kernel.unprivileged_userns_clone
/// and Ubuntu's AppArmor restriction can forbid it).
bool user_namespaces_work();

/// Whether, inside such a user namespace, a pid namespace of its own and a
/// /proc mounted for it are allowed (the kernel refuses a fresh /proc in a
/// user namespace where the existing one is partly covered, as in many
/// containers): tried once, like user_namespaces_work(). As root the seal
/// needs no such probe.
bool pid_namespaces_work();

/// Finds `name` in the PATH of `env` the way execvp would; names with a
/// slash are taken as they are. Returns "" when nothing executable is found.
std::string find_executable(const std::string& name, const std::vector<std::string>& env);

}  // namespace memrun

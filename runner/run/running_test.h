// One test between its start and its result: its cgroup, its process, its
// two log relays, and the rooms that do the rest, each of one job: its
// samples (Sampler), the thrash window (ThrashWatch), the walk for what
// left its group (EscapeWalk), its tool's results file (ToolResults) and
// the steps after its end (Cleanup). The run's event loop (run/loop.cc)
// owns several at once and calls them when their file descriptors or
// timers fire.
#pragma once

#include <sys/resource.h>

#include <chrono>
#include <exception>
#include <memory>
#include <map>
#include <optional>
#include <string>

#include "cgroup/cgroup.h"
#include "runner/base/clock.h"
#include "runner/base/kernel_log.h"
#include "runner/launch/child.h"
#include "runner/launch/launcher.h"
#include "runner/run/cleanup.h"
#include "runner/run/escape_walk.h"
#include "runner/run/log_relay.h"
#include "runner/run/run.h"
#include "runner/run/sampler.h"
#include "runner/run/thrash_watch.h"
#include "runner/run/tool_results.h"

namespace memrun {

/// Groups whose removal the kernel still refuses (EBUSY: a process has not
/// finished exiting) once their test's record is made, or that a test left
/// when it could not start: the loop retries each on its timer, and drains
/// them, bounded, when it closes (Loop::close). Never waits.
class Leftovers {
 public:
  explicit Leftovers(const Clock& clock) : clock_(clock) {}
  void add(std::unique_ptr<cgroup::Group> group);
  /// A kill and a removal attempt for each group whose retry is due.
  void retry(Clock::time_point now);
  /// When retry() has something to do; time_point::max() when empty.
  Clock::time_point next() const;
  bool empty() const { return groups_.empty(); }

 private:
  static constexpr auto kRetry = std::chrono::milliseconds(20);
  const Clock& clock_;
  std::vector<std::pair<Clock::time_point, std::unique_ptr<cgroup::Group>>> groups_;
};

/// What every test of a run shares.
struct RunContext {
  cgroup::Backend* backend = nullptr;
  const Clock* clock = nullptr;
  Leftovers* leftovers = nullptr;
  std::string oom_score_adj;  ///< for the tests' /proc/self/oom_score_adj
  rlimit open_files{0, 0};    ///< the tests' RLIMIT_NOFILE, when memrun raised its own
  std::chrono::milliseconds sample_interval{0};
  uint64_t max_log = 0;       ///< per stream; 0: no cap
  bool pid_namespace = true;  ///< see RunOptions::pid_namespace
  /// Starts the tests' processes off the loop's thread (Launcher::post), or
  /// on it with `start_now` (fail-fast). Never null.
  Launcher* launcher = nullptr;
  bool start_now = false;
  /// The loop's epoll set, which forgets a test's descriptors before they
  /// are closed (see LogRelay::close_reader); -1: none.
  int epoll = -1;
  int echo_stdout = -1, echo_stderr = -1;  ///< see RunOptions::echo_stdout
  /// The run's folder, where a planned test's logs go (made_test).
  std::string run_dir;
};

class RunningTest {
 public:
  using clock = Clock;

  /// `planned` made to run (made_test): the test holds it until it ends.
  explicit RunningTest(PlannedTest planned);
  ~RunningTest();
  RunningTest(const RunningTest&) = delete;
  RunningTest& operator=(const RunningTest&) = delete;

  /// Creates the group (or takes `ahead`, made by make_group while other
  /// tests ran) and starts the command in it. False when it could not
  /// start: not_started() then gives the record (outcome `error`), and
  /// nothing is left behind. Throws Error only for run-level failures (a
  /// log that cannot be written).
  /// Unless `context.start_now`, the process is started on the launcher's
  /// thread: the test is starting() until the loop hands launched() what
  /// the launcher did with the start tagged `serial`.
  bool start(const RunContext& context, std::unique_ptr<cgroup::Group> ahead = nullptr, uint64_t serial = 0);
  /// The start of a starting() test is done: `child` runs, or `error` says
  /// why it could not start (false: not_started() gives the record).
  bool launched(const Child& child, std::exception_ptr error);

  /// A test whose process is another's (pytest --memrun, runner/app/serve.h):
  /// start() makes its group and an init that starts no command
  /// (Command::vessel) and leaves it waiting(); adopt() then places the
  /// case, a process memrun did not start, in the test's groups, and the
  /// test runs from then on; case_ended() says how the case ended, as its
  /// parent reaped it. Call before start().
  void as_vessel() { vessel_ = true; }
  bool waiting() const { return phase_ == Phase::waiting; }
  /// With a sealed vessel (its init in a pid namespace, the seal made):
  /// the init's pid, for the namespaces (/proc/PID/ns) a case enters; -1
  /// otherwise.
  int vessel_pid() const { return vessel_ && init_ ? child_.pid : -1; }
  /// Moves process `pid` into the test's groups (the cgroup.procs of its
  /// placement), and the test runs: its timeout and samples count from
  /// now. `pidfd` (memrun's, kept until the test ends) holds the process;
  /// `parent` is its parent's pid, which the escape walk checks. Throws
  /// Error when the kernel refuses the move.
  void adopt(int pidfd, int pid, int parent);
  /// The adopted case's pidfd (readable once it has exited), or -1.
  int case_pidfd() const { return case_pidfd_; }
  /// The adopted case ended with `status` and `usage`, as its parent's
  /// wait gave them; `tool_said` is its tool's word and `blocks` what it
  /// measured on its own (see Observation).
  void case_ended(int status, const rusage& usage, const std::string& tool_said);
  /// The adopted case opens a block named `name` (pytest_memrun's
  /// memrun_peak): measured by the kernel from now on (Group::open_block),
  /// of the case's process and what it starts. Returns how it is measured
  /// and its baseline. Throws cgroup::Failure, or Error when the case is
  /// not running or the block is open already.
  std::pair<std::string, uint64_t> open_block(const std::string& name);
  /// Closes it: its figures, kept in the record (Observation::blocks).
  BlockFigures close_block(const std::string& name);
  bool starting() const { return phase_ == Phase::starting; }
  /// The group `planned` runs in, with its limits written. Throws
  /// cgroup::Failure when it cannot be made.
  static std::unique_ptr<cgroup::Group> make_group(const PlannedTest& planned, const RunContext& context);
  /// After start() returned false: the record, outcome `error`.
  TestRecord not_started();

  const PlannedTest& planned() const { return planned_; }
  pid_t pid() const { return child_.pid; }
  int pidfd() const { return child_.pidfd; }
  /// With a pid namespace: the pipe that gives the command's wait status
  /// (see InitReport); -1 otherwise, or once it was read.
  int status_fd() const { return child_.status_fd; }
  LogRelay& out() { return *out_; }
  LogRelay& err() { return *err_; }

  /// When memrun must act next: the timeout, the next sample, the end of a
  /// stop's grace period, the next step of the cleanup.
  clock::time_point deadline() const { return deadline_; }
  clock::time_point next_sample() const { return sampler_.next(); }
  std::optional<clock::time_point> grace_end() const { return grace_end_; }
  clock::time_point next_settle() const { return cleanup_ ? cleanup_->next() : clock::time_point::max(); }
  /// memory.current as last sampled; read now when sampling is off.
  uint64_t current() const;
  double elapsed_s() const { return std::chrono::duration<double>(context_->clock->now() - t0_).count(); }

  /// Samples usage into the timeline and the peak estimates.
  void sample();
  /// The timeout passed: kills the group.
  void time_out();
  /// memrun was interrupted: SIGTERM to every process of the group, and
  /// SIGKILL at `grace_end` (or now, with a zero grace).
  void interrupt(std::chrono::milliseconds grace);
  /// The grace is over, or a second signal came: SIGKILL.
  void kill_now();

  /// The wait status and resource usage of the test's main process, from
  /// the run's reaper (wait4(-1)); the test has exited then.
  void reaped(int status, const rusage& usage);
  /// Process `pid`, memrun's child, exited with `status`: the test's main
  /// process (reaped()), or, with a pid namespace, the test's init, whose
  /// own status stands only when it died before it reported the command's.
  void child_exited(int status, const rusage& usage);
  /// With a pid namespace: reads the init's report, if one came, and ends
  /// the test with the command's status. Never waits.
  void poll_status();
  bool exited() const { return phase_ == Phase::ended; }
  /// After exited(), until what the test left running is gone.
  bool killing() const { return cleanup_ && cleanup_->killing(); }
  /// Whether what the test leaves running becomes memrun's child when its
  /// parent dies: memrun is the subreaper of a test without a pid
  /// namespace; in one, the test's init is (and its end kills the rest).
  bool orphans_reach_memrun() const { return !init_; }
  /// A process of the test, the child of `parent`: when it or one of its
  /// `threads` (empty: read now) is outside the test's group (and not on
  /// its way out), counted as escaped (the test fails) and killed with the
  /// rest, through a pidfd taken now (once the pidfd is open, the process
  /// is checked to be still `parent`'s child: never a process that reused
  /// the pid).
  void check_escaped(int pid, int parent, std::vector<int> threads = {});
  /// The kernel saw task `task` of the test enter `where`, a group outside
  /// the test's (EscapeWatch): an escape, whatever it did there and however
  /// soon it came back. Task 0: the moves are not known.
  void moved_out(int task, const std::string& where);
  /// Its group as the kernel names it (Group::kernel_path); "" before it has one.
  std::string kernel_path() const { return group_ ? group_->kernel_path() : ""; }

  /// After exited(): one step of the cleanup (Cleanup::step), never
  /// waiting, so that the loop keeps every other test's sampling and
  /// timeouts on time. Returns true when all is done: record() is then
  /// ready. Call again at next_settle() otherwise.
  bool settle(KernelLog& kernel_log);
  /// True once no process of the test is left: what the test's limit
  /// reserved is free again (its anonymous memory went with its processes;
  /// page cache left in the empty group is reclaimable and moves to the
  /// parent when it is removed), unless its private /dev/shm still holds
  /// memory on its way out (see Cleanup::draining_shm). Another test may start
  /// while this one's figures are read, its group removed and its record
  /// made.
  bool released() const { return exited() && !killing() && !cleanup_->draining_shm(); }
  /// After settle() returned true: the test's record, its verdict decided.
  TestRecord record();
  /// The run stops before this test's cleanup is done (memrun failed):
  /// kills what runs, once, and hands the group to the leftovers.
  void abandon();

 private:
  enum class Phase { starting, waiting, running, ended };
  /// start() could not start the test, for `why`: nothing is left behind.
  bool start_failed(const std::string& why);
  /// Starts `cmd` through the context's launcher: true when posted to its
  /// thread (the test is starting()), else `child` is the process started.
  bool begin(const RunContext& context, uint64_t serial, Command cmd, const cgroup::Placement& placement, Child& child);
  bool start_vessel(const RunContext& context, Command cmd, std::unique_ptr<cgroup::Group> ahead, uint64_t serial);
  void open_relays(const RunContext& context);
  void find_escapes();
  void close_watched(int& fd);  // out of the loop's epoll set, then closed

  PlannedTest planned_;
  const RunContext* context_ = nullptr;
  Observation observed_;
  ToolResults results_;  // the case's results file
  Phase phase_ = Phase::running;
  clock::time_point t0_, deadline_;
  Sampler sampler_;
  ThrashWatch thrash_;
  std::optional<clock::time_point> grace_end_;
  std::optional<std::chrono::milliseconds> interrupt_pending_;  // a signal's grace, while starting
  std::unique_ptr<cgroup::Group> group_;
  std::unique_ptr<LogRelay> out_, err_;
  EscapeWalk escapes_;  // what left the group, and the processes seen
  Child child_;
  bool vessel_ = false;  // see as_vessel()
  std::map<std::string, std::unique_ptr<cgroup::Block>> blocks_;  // open, by name (open_block())
  int case_pid_ = -1, case_parent_ = -1, case_pidfd_ = -1;  // the adopted case (adopt())
  bool init_ = false;  // child_ is the init of the test's pid namespace
  bool init_gone_ = false;
  int init_status_ = 0;
  rusage init_usage_{};
  std::optional<InitReport> init_report_;
  int status_ = 0;
  rusage usage_{};
  std::optional<Cleanup> cleanup_;  // once the test's main process ended
};

}  // namespace memrun

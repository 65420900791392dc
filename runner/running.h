// One test between its start and its result: its cgroup, its process, its
// two log relays, its samples. The run's event loop (run.cc) owns several
// at once and calls them when their file descriptors or timers fire.
#pragma once

#include <sys/resource.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "cgroup/cgroup.h"
#include "runner/kmsg.h"
#include "runner/launch.h"
#include "runner/relay.h"
#include "runner/run.h"

namespace memrun {

/// What every test of a run shares.
struct RunContext {
  cgroup::Backend* backend = nullptr;
  std::string oom_score_adj;  ///< for the tests' /proc/self/oom_score_adj
  rlimit open_files{0, 0};    ///< the tests' RLIMIT_NOFILE, when memrun raised its own
  std::chrono::milliseconds sample_interval{0};
  uint64_t max_log = 0;       ///< per stream; 0: no cap
};

class RunningTest {
 public:
  using clock = std::chrono::steady_clock;

  explicit RunningTest(const PlannedTest& planned);
  ~RunningTest();
  RunningTest(const RunningTest&) = delete;
  RunningTest& operator=(const RunningTest&) = delete;

  /// Creates the group and starts the command in it. False when it could
  /// not start: the result is then final (outcome `error`, the reason) and
  /// nothing is left behind. Throws Error only for run-level failures (a
  /// log that cannot be written).
  bool start(const RunContext& context);
  /// After start() returned false: the result, outcome `error`.
  Result not_started();

  const PlannedTest& planned() const { return *result_.planned; }
  pid_t pid() const { return child_.pid; }
  int pidfd() const { return child_.pidfd; }
  LogRelay& out() { return *out_; }
  LogRelay& err() { return *err_; }

  /// When memrun must act next: the timeout, the next sample, the end of a
  /// stop's grace period.
  clock::time_point deadline() const { return deadline_; }
  clock::time_point next_sample() const { return next_sample_; }
  std::optional<clock::time_point> grace_end() const { return grace_end_; }
  /// memory.current as last sampled; read now when sampling is off.
  uint64_t current() const;
  double elapsed_s() const { return std::chrono::duration<double>(clock::now() - t0_).count(); }

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
  bool exited() const { return exited_; }
  /// After exited(): kills what the test left running, drains the logs,
  /// reads the kernel's figures, removes the group and decides the verdict.
  Result finish(KernelLog& kernel_log);
  /// After finish(): how the kernel's log names the test's group, for a
  /// later look for OOM victims the log did not hold yet.
  const std::string& log_name() const { return log_name_; }

 private:
  Result done();  // decides and timestamps the result

  Result result_;
  clock::time_point t0_, deadline_, next_sample_;
  std::optional<clock::time_point> grace_end_;
  std::chrono::milliseconds interval_{0};
  std::unique_ptr<cgroup::Group> group_;
  std::unique_ptr<LogRelay> out_, err_;
  Child child_;
  bool exited_ = false;
  int status_ = 0;
  rusage usage_{};
  uint64_t current_ = 0;
  std::string log_error_;  // a log file that could not be written
  std::string log_name_;   // the group, as the kernel's log names it
};

}  // namespace memrun

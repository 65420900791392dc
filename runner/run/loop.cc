// Stage 3: the run. One event loop waits on every running test at once:
// epoll over each test's pidfd (its exit) and log pipes, a signalfd (Ctrl-C
// and friends) and one timerfd armed for the nearest timeout, sample or
// grace period. No thread per test: memrun's cost stays flat with -j.
#include "runner/run/run.h"

#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "runner/base/clock.h"
#include "runner/base/error.h"
#include "runner/launch/launcher.h"
#include "runner/run/escape_watch.h"
#include "runner/run/running_set.h"
#include "runner/run/running_test.h"
#include "runner/run/start_queue.h"

namespace memrun {

SignalGuard::SignalGuard() {
  sigemptyset(&set_);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGXCPU, SIGXFSZ,
                SIGIO, SIGPWR})
    sigaddset(&set_, s);
  ::sigprocmask(SIG_BLOCK, &set_, &old_);
  fd_ = ::signalfd(-1, &set_, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd_ < 0) throw_errno(Category::system, "signalfd");
}

SignalGuard::~SignalGuard() {
  ::close(fd_);
  ::sigprocmask(SIG_SETMASK, &old_, nullptr);
}

int SignalGuard::take() const {
  signalfd_siginfo info;
  return ::read(fd_, &info, sizeof info) == sizeof info ? static_cast<int>(info.ssi_signo) : 0;
}

namespace {

// What an epoll event is about: a test (by its serial, see RunningSet) and
// which of its fds, or one of the loop's own fds.
enum Source : uint64_t { kEnded = 0, kStdout = 1, kStderr = 2, kLoop = 3 };
constexpr uint64_t kSignalSerial = 0, kTimerSerial = 1, kEvictorSerial = 2, kLauncherSerial = 3;
uint64_t tag(uint64_t serial, Source source) { return serial << 2 | source; }

// The reactor: waits on every running test's fds, the signals and one
// timer armed for the nearest deadline, and hands each event to its owner:
// Who watches the tests' moves between cgroups (escape_watch.h): an
// unsealed run's tests can reach the host's groups; a sealed test with
// `service_manager: true` can ask the manager for a scope, which moves it
// out of its group (the walk sees that only while it lasts). Else none is
// needed: a sealed test's groups are all it can write.
std::unique_ptr<EscapeWatch> escape_watch_for(const Plan& plan, const RunOptions& options) {
  if (!options.pid_namespace) return EscapeWatch::for_unsealed_run();
  for (const auto& p : plan.tests)
    if (p.test->service_manager) return EscapeWatch::for_service_manager_tests();
  return nullptr;
}

// StartQueue says which test starts when, RunningSet keeps those running.
class Loop {
 public:
  Loop(cgroup::Backend& backend, const RunOptions& options, RunObserver& observer, const Plan& plan)
      : options_(options),
        observer_(observer),
        clock_(options.clock ? *options.clock : steady_clock()),
        leftovers_(clock_) {
    kernel_log_ = options.kernel_log ? options.kernel_log : (own_log_ = std::make_unique<KernelLog>()).get();
    context_.backend = &backend;
    context_.run_dir = plan.run_dir;
    context_.clock = &clock_;
    context_.leftovers = &leftovers_;
    context_.oom_score_adj = options.oom_score_adj;
    context_.open_files = options.open_files;
    context_.sample_interval = options.sample_interval;
    context_.max_log = options.max_log;
    context_.pid_namespace = options.pid_namespace;
    context_.echo_stdout = options.echo_stdout;
    context_.echo_stderr = options.echo_stderr;
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    timer_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (epoll_ < 0 || timer_ < 0) throw_errno(Category::system, "epoll/timerfd");
    context_.epoll = epoll_;
    watch(signals_.fd(), tag(kSignalSerial, kLoop));
    watch(timer_, tag(kTimerSerial, kLoop));
    watch(starts_.evictor_fd(), tag(kEvictorSerial, kLoop));
    watch(launcher_.fd(), tag(kLauncherSerial, kLoop));
    EscapeWatch::remove_stale();  // what a run killed by SIGKILL left, as gc does
    escapes_ = escape_watch_for(plan, options);
  }
  // Never waits: close() drained the groups left to remove; what a failing
  // run left goes with one attempt each (see ~RunningTest).
  ~Loop() {
    running_.clear();
    starts_.unused_group().reset();
    ::close(timer_);
    ::close(epoll_);
  }

  /// The end of the run: kills what is still running (a run that failed),
  /// then retries the groups left to remove on the loop's timer for up to
  /// kDrain. What is still busy then stays for `memrun gc` (the backend's
  /// close() says so). Other tests need no sampling any more: this is the
  /// only wait of the loop not bounded by a test's next deadline.
  void close() {
    static constexpr auto kDrain = std::chrono::seconds(2);
    auto bound = clock_.now() + kDrain;
    // No test is judged any more; removing the record waits (see EscapeWatch::close).
    if (auto escapes = std::move(escapes_)) escapes->close();
    // A start under way uses its test's descriptors (its pipes, its
    // group's) until its exec: the test is abandoned once it has started.
    while (running_.starting() && clock_.now() < bound) {
      epoll_event events[8];
      int n = clock_.wait(epoll_, timer_, events, 8, bound);
      if (n < 0 && errno != EINTR) throw_errno(Category::system, "epoll_wait");
      for (const auto& started : launcher_.take())
        if (RunningTest* test = running_.find(started.serial)) test->launched(started.child, started.error);
        else kill_started(started.child);
    }
    running_.abandon();
    if (auto group = starts_.unused_group()) leftovers_.add(std::move(group));
    while (!leftovers_.empty() && clock_.now() < bound) {
      epoll_event events[8];
      int n = clock_.wait(epoll_, timer_, events, 8, std::min(bound, leftovers_.next()));
      if (n < 0 && errno != EINTR) throw_errno(Category::system, "epoll_wait");
      bool signalled = false;
      for (int i = 0; i < n; ++i) {
        uint64_t expirations;
        if (events[i].data.u64 == tag(kTimerSerial, kLoop)) (void)!::read(timer_, &expirations, sizeof expirations);
        if (events[i].data.u64 == tag(kSignalSerial, kLoop)) signalled = signals_.take() != 0;
      }
      if (signalled) break;  // the user wants out: what is left is gc's
      leftovers_.retry(clock_.now());
    }
  }

  int interrupted_by() const { return interrupted_by_; }

  /// Runs `tests` offered in `order` under `admission`; `reported(i, result)`
  /// is called for every test i that ran, was refused or was cut off by a
  /// signal. With `fail_fast`, no test starts after one did not pass; those
  /// never started are not reported.
  void run(const std::vector<const PlannedTest*>& tests, const std::vector<size_t>& order, Admission& admission,
           bool fail_fast, const Done& reported) {
    // What waits for a test (ctest's order) learns that it ended.
    Done done = [&](size_t i, TestRecord r) {
      starts_.ended(i, !r.verdict.passed && r.verdict.outcome != Outcome::skipped);
      reported(i, std::move(r));
    };
    starts_.offer(tests, order, admission, done, context_.run_dir);
    auto start = [&](size_t index) { return start_test(*tests[index], index, admission, fail_fast, done); };
    bool stop_starting = false;
    auto next_tick = clock_.now() + options_.tick;
    // With fail-fast, a test that cannot start stops the tests after it
    // from starting: tests start on the loop's thread, one at a time.
    context_.launcher = &launcher_;
    context_.start_now = fail_fast;
    for (;;) {
      if (!stop_starting && !interrupted_by_) stop_starting = starts_.start_what_fits(start);
      bool cooling = !stop_starting && !interrupted_by_ && starts_.cooling();
      if (running_.empty() && !cooling) break;
      if (auto group = starts_.stale_group()) leftovers_.add(std::move(group));
      if (!stop_starting && !interrupted_by_) starts_.make_ahead(context_);
      wait(next_tick);
      if (std::exchange(evicted_, false) && !starts_.take_evicted() && fail_fast) stop_starting = true;
      if (std::exchange(launched_, false))
        for (const auto& started : launcher_.take())
          if (on_launched(started, admission, fail_fast, done)) stop_starting = true;
      auto now = clock_.now();
      leftovers_.retry(now);
      running_.on_timers(now);
      if (options_.tick.count() > 0 && next_tick <= now) {
        observer_.tick(running_.progress());
        next_tick = now + options_.tick;
      }
      // Every move the kernel recorded before a test ended is its own
      // before its figures are read.
      running_.take_moves(escapes_.get());
      if (running_.finish_exited(clock_, *kernel_log_, launcher_, admission, fail_fast, done)) stop_starting = true;
      if (escapes_) escapes_->forget_ended([&](uint64_t serial) { return running_.find(serial) != nullptr; });
    }
    starts_.stop(interrupted_by_ != 0);
  }

 private:
  // Starts an admitted test. Returns true when fail-fast says to start no
  // more.
  bool start_test(const PlannedTest& p, size_t index, Admission& admission, bool fail_fast, const Done& done) {
    // Made whole now, dropped with the running test once its record is
    // written: a run holds whole only the tests it runs.
    auto test = std::make_unique<RunningTest>(made_test(p, index, context_.run_dir));
    uint64_t serial = next_serial_++;
    if (!test->start(context_, starts_.take_ahead(index), serial)) {
      admission.ended(p.test->memory, p.test->order.slots);
      TestRecord r = test->not_started();
      bool stop = fail_fast && !r.verdict.passed;
      done(index, std::move(r));
      return stop;
    }
    if (!test->starting()) watch_exit(serial, *test);
    watch(test->out().reader(), tag(serial, kStdout));
    watch(test->err().reader(), tag(serial, kStderr));
    running_.add(serial, index, std::move(test));
    return false;
  }

  // A start the launcher finished: the test runs, or its record says why it
  // could not start. Returns true when fail-fast says to start no more.
  bool on_launched(const Launcher::Started& started, Admission& admission, bool fail_fast, const Done& done) {
    RunningTest* test = running_.find(started.serial);
    if (!test) return kill_started(started.child), false;  // (never: its test is running until launched)
    if (test->launched(started.child, started.error)) {
      watch_exit(started.serial, *test);
      return false;
    }
    size_t index = 0;
    auto failed = running_.remove(started.serial, &index);
    admission.ended(failed->planned().test->memory, failed->planned().test->order.slots);
    TestRecord r = failed->not_started();
    bool stop = fail_fast && !r.verdict.passed;
    done(index, std::move(r));
    return stop;
  }

  // The process of a start no test waits for (never: a test is starting
  // until launched()), through its pidfd.
  static void kill_started(const Child& child) {
    if (child.pidfd >= 0) ::syscall(SYS_pidfd_send_signal, child.pidfd, SIGKILL, nullptr, 0);
    for (int fd : {child.pidfd, child.status_fd})
      if (fd >= 0) ::close(fd);
  }

  void watch_exit(uint64_t serial, RunningTest& test) {
    if (escapes_) escapes_->follow(serial, test.pid(), test.kernel_path());
    watch(test.pidfd(), tag(serial, kEnded));
    if (test.status_fd() >= 0) watch(test.status_fd(), tag(serial, kEnded));
  }

  void watch(int fd, uint64_t data) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = data;
    if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) != 0) throw_errno(Category::system, "epoll_ctl");
  }

  // One wait: until an fd is ready or the nearest deadline, then handles
  // the fds (signals, logs). Deadlines are checked by the caller.
  void wait(Clock::time_point next_tick) {
    auto next = options_.tick.count() > 0 ? next_tick : Clock::time_point::max();
    next = running_.next_deadline(std::min(next, leftovers_.next()));
    // The kernel's record of moves is read at least this often, before its
    // buffer (1 MiB a CPU, every fork of the host) fills.
    if (escapes_) next = std::min(next, clock_.now() + std::chrono::milliseconds(100));
    epoll_event events[32];
    int n = clock_.wait(epoll_, timer_, events, 32, next);
    if (n < 0 && errno != EINTR) throw_errno(Category::system, "epoll_wait");
    for (int i = 0; i < n; ++i) {
      uint64_t serial = events[i].data.u64 >> 2;
      auto source = static_cast<Source>(events[i].data.u64 & 3);
      if (source == kLoop) {
        if (serial == kSignalSerial) on_signals();
        if (serial == kEvictorSerial) evicted_ = true;
        if (serial == kLauncherSerial) launched_ = true;
        uint64_t expirations;
        if (serial == kTimerSerial) (void)!::read(timer_, &expirations, sizeof expirations);
        continue;
      }
      // A pipe that ended is closed by its relay, which removes it from
      // the epoll set. An exit is collected by RunningSet::finish_exited.
      RunningTest* test = running_.find(serial);
      if (test && source == kStdout) test->out().pump();
      if (test && source == kStderr) test->err().pump();
    }
  }

  void on_signals() {
    while (int sig = signals_.take()) {
      bool first = interrupted_by_ == 0;
      if (first) interrupted_by_ = sig;
      running_.interrupt(first, options_.grace);
    }
  }

  const RunOptions& options_;
  RunObserver& observer_;
  Clock& clock_;
  Leftovers leftovers_;
  SignalGuard signals_;
  std::unique_ptr<KernelLog> own_log_;
  KernelLog* kernel_log_ = nullptr;
  RunContext context_;
  int epoll_ = -1, timer_ = -1;
  uint64_t next_serial_ = 4;  // 0 to 3 are the loop's own
  // Unsealed tests see the host's groups: the kernel's record of their
  // moves (see EscapeWatch); null when sealed, or where it cannot be read.
  std::unique_ptr<EscapeWatch> escapes_;
  StartQueue starts_;
  bool evicted_ = false;  // the evictor said it finished a job
  // Before the tests: its thread ends after them (their PR_SET_PDEATHSIG).
  std::unique_ptr<RealLauncher> own_launcher_ =
      options_.launcher ? nullptr : std::make_unique<RealLauncher>(options_.pid_namespace);
  Launcher& launcher_ = options_.launcher ? *options_.launcher : *own_launcher_;
  bool launched_ = false;  // the launcher said it finished a start
  RunningSet running_;
  int interrupted_by_ = 0;
};

}  // namespace

namespace {
RunResults run_with(Loop& loop, const Plan& plan, const RunOptions& options, RunObserver& observer);
}  // namespace

RunResults run_plan(const Plan& plan, cgroup::Backend& backend, const RunOptions& options,
                    RunObserver& observer) {
  Loop loop(backend, options, observer, plan);
  try {
    RunResults out = run_with(loop, plan, options, observer);
    loop.close();
    return out;
  } catch (...) {
    loop.close();
    throw;
  }
}

namespace {

RunResults run_with(Loop& loop, const Plan& plan, const RunOptions& options, RunObserver& observer) {
  RunResults out;
  // Setups, one at a time and in spec order: a test may need the outputs
  // of its spec's setup, and setups are not bound by the budget.
  std::string setup_failed;
  for (const auto& p : plan.setups) {
    SetupRecord s{p.spec->path, false, std::nullopt};
    if (!setup_up_to_date(*p.spec->setup)) {
      s.ran = true;
      Admission alone(1, std::nullopt, false);
      loop.run({&p}, {0}, alone, false, [&](size_t, TestRecord r) { s.result = std::move(r); });
      if (s.result && !s.result->verdict.passed)
        setup_failed = "not run: the setup of " + p.spec->path + " failed (" + s.result->verdict.reason + ")";
    }
    out.setups.push_back(std::move(s));
    observer.setup_done(out.setups.back());
    if (loop.interrupted_by() || !setup_failed.empty()) break;
  }

  // The observer has the whole record (the report, say); the run keeps
  // none of it, so that memrun's memory does not grow with every test.
  auto done = [&](size_t i, TestRecord r) { observer.test_done(i, r); };
  if (loop.interrupted_by() || !setup_failed.empty()) {
    for (size_t i = 0; i < plan.tests.size(); ++i)
      done(i, loop.interrupted_by() ? unstarted(made_test(plan.tests[i], i, plan.run_dir), Ending::not_run)
                                    : unstarted(made_test(plan.tests[i], i, plan.run_dir), Ending::not_started, setup_failed));
  } else {
    std::vector<const PlannedTest*> tests;
    for (const auto& p : plan.tests) tests.push_back(&p);
    Admission admission(options.jobs, options.budget, options.allow_oversubscribe);
    loop.run(tests, start_order(plan.tests, options.jobs, options.timings), admission, options.fail_fast, done);
  }
  out.interrupted_by = loop.interrupted_by();
  return out;
}

}  // namespace

}  // namespace memrun

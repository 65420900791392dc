// Stage 3: the run. One event loop waits on every running test at once:
// epoll over each test's pidfd (its exit) and log pipes, a signalfd (Ctrl-C
// and friends) and one timerfd armed for the nearest timeout, sample or
// grace period. No thread per test: memrun's cost stays flat with -j.
#include "runner/run.h"

#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <deque>
#include <set>
#include <utility>

#include "cgroup/error.h"
#include "runner/error.h"
#include "runner/files.h"
#include "runner/inputs.h"
#include "runner/clock.h"
#include "runner/running.h"

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

// Under global memory pressure the kernel's OOM killer should pick a test,
// never the runner that reports on it. Lowering one's oom_score_adj needs
// CAP_SYS_RESOURCE (root); then tests get back the value memrun started
// with. Without it, raising is always allowed: tests get memrun's value
// + 500 instead. Returns what tests get.
std::string protect_memrun() {
  const std::string path = "/proc/self/oom_score_adj";
  int own = std::atoi(read_proc(path).c_str());
  if (own > -500 && write_proc(path, "-500") == 0) return std::to_string(own);
  return std::to_string(std::min(1000, own + 500));
}

// Each running test holds up to kFilesPerTest descriptors (run.h), so -j 128
// would pass the usual soft limit of 1024. memrun raises its own soft limit to the hard
// one; tests get the original back before exec (programs using select(2)
// break above 1024). Returns the original, or {0, 0} when nothing was
// raised; the same on every call.
constexpr int kFilesOfMemrun = 32;
rlimit raise_open_files() {
  static const rlimit original = [] {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return rlimit{0, 0};
    rlimit raised = limit;
    raised.rlim_cur = raised.rlim_max;
    return ::setrlimit(RLIMIT_NOFILE, &raised) == 0 ? limit : rlimit{0, 0};
  }();
  return original;
}

// What an epoll event is about: a test (by a serial never reused, so that
// nothing is mistaken for a later test's fd) and which of its fds, or one
// of the loop's own fds.
enum Source : uint64_t { kEnded = 0, kStdout = 1, kStderr = 2, kLoop = 3 };
constexpr uint64_t kSignalSerial = 0, kTimerSerial = 1, kEvictorSerial = 2;
uint64_t tag(uint64_t serial, Source source) { return serial << 2 | source; }

// The record of a test that never started: refused (`reason`), or not run
// because memrun was interrupted (Ending::not_run).
TestRecord unstarted(const PlannedTest& p, Ending ending, const std::string& reason = "") {
  Observation o;
  o.ending = ending;
  o.start_error = reason;
  return make_record(p, std::move(o));
}

using Done = std::function<void(size_t, TestRecord)>;

class Loop {
 public:
  Loop(cgroup::Backend& backend, const RunOptions& options, RunObserver& observer)
      : options_(options),
        observer_(observer),
        clock_(options.clock ? *options.clock : steady_clock()),
        leftovers_(clock_) {
    if (options.kernel_log) {
      kernel_log_ = options.kernel_log;
    } else {
      own_log_ = std::make_unique<KernelLog>();
      kernel_log_ = own_log_.get();
    }
    context_.backend = &backend;
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
    watch(signals_.fd(), tag(kSignalSerial, kLoop));
    watch(timer_, tag(kTimerSerial, kLoop));
    watch(evictor_.fd(), tag(kEvictorSerial, kLoop));
  }
  // Never waits: close() drained the groups left to remove; what a failing
  // run left goes with one attempt each (see ~RunningTest).
  ~Loop() {
    slots_.clear();
    ahead_.group.reset();
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
    for (auto& s : slots_) s.test->abandon();
    slots_.clear();
    if (ahead_.group) leftovers_.add(std::move(ahead_.group));
    auto bound = clock_.now() + kDrain;
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

  /// Runs `tests` offered in `order` under `admission`; `done(i, result)`
  /// is called for every test i that ran, was refused or was cut off by a
  /// signal. With `fail_fast`, no test starts after one did not pass; those
  /// never started are not reported.
  void run(const std::vector<const PlannedTest*>& tests, const std::vector<size_t>& order, Admission& admission,
           bool fail_fast, const Done& done) {
    std::deque<size_t> queue;
    for (size_t i : order) {
      // A test that can never fit is reported at once, not after the rest;
      // so is a suite's case its tool would not run (disabled) or cannot
      // (not runnable).
      const TestSpec& spec = *tests[i]->test;
      std::string refusal = spec.disabled || !spec.not_runnable.empty() ? spec.not_runnable
                                                                        : admission.refusal(spec.memory);
      if (spec.disabled) {
        done(i, unstarted(*tests[i], Ending::not_started));
        continue;
      }
      if (refusal.empty()) queue.push_back(i);
      else done(i, unstarted(*tests[i], Ending::not_started, refusal));
    }
    bool stop_starting = false;
    auto next_tick = clock_.now() + options_.tick;
    for (;;) {
      if (!stop_starting && !interrupted_by_) stop_starting = start_what_fits(tests, queue, admission, fail_fast, done);
      bool cooling = !stop_starting && !interrupted_by_ && (!evicting_.empty() || !cold_.empty());
      if (slots_.empty() && !cooling) break;
      if (!stop_starting && !interrupted_by_) make_ahead(tests, queue);
      wait(next_tick);
      if (std::exchange(evicted_, false) && !take_evicted(tests, done, admission) && fail_fast) stop_starting = true;
      auto now = clock_.now();
      leftovers_.retry(now);
      for (auto& s : slots_) {
        RunningTest& t = *s.test;
        if (t.exited()) continue;
        if (t.deadline() <= now) t.time_out();
        if (t.grace_end() && *t.grace_end() <= now) t.kill_now();
        if (t.next_sample() <= now) t.sample();
      }
      if (options_.tick.count() > 0 && next_tick <= now) {
        std::vector<Progress> progress;
        for (const auto& s : slots_) progress.push_back({&s.test->planned(), s.test->elapsed_s(), s.test->current()});
        observer_.tick(progress);
        next_tick = now + options_.tick;
      }
      if (finish_exited(admission, fail_fast, done)) stop_starting = true;
    }
    // Tests whose inputs were being evicted when the run stopped never
    // started: with fail-fast they are not reported, like the queue's.
    std::vector<size_t> admitted(evicting_.begin(), evicting_.end());
    admitted.insert(admitted.end(), cold_.begin(), cold_.end());
    for (size_t i : admitted) admission.ended(tests[i]->test->memory);
    evicting_.clear();
    cold_.clear();
    if (!interrupted_by_) return;
    for (size_t i : admitted) done(i, unstarted(*tests[i], Ending::not_run));
    for (size_t i : queue) done(i, unstarted(*tests[i], Ending::not_run));
  }

 private:
  struct Slot {
    uint64_t serial;
    size_t index;    // in the list being run
    bool released;   // its limit handed back to admission
    std::unique_ptr<RunningTest> test;
  };

  // Starts the queued tests that fit now, in the offered order: a test that
  // cannot fit lets smaller ones behind it start (they only use what is
  // free). Returns true when fail-fast says to start no more.
  //
  // A test with inputs is admitted first, and starts once the evictor has
  // dropped their page cache (see take_evicted): each run then reads them
  // from disk and pays for their cache in its own group, the same every
  // time. (Reading them in outside the group instead would leave the test's
  // figures to whichever pages the kernel reclaimed meanwhile: a page is
  // charged to whoever faults it in.) The eviction (a write-back, a walk of
  // a folder) runs on the evictor's thread: the loop keeps sampling.
  bool start_what_fits(const std::vector<const PlannedTest*>& tests, std::deque<size_t>& queue,
                       Admission& admission, bool fail_fast, const Done& done) {
    while (!cold_.empty()) {
      size_t index = cold_.front();
      cold_.pop_front();
      if (start(*tests[index], index, admission, fail_fast, done)) return true;
    }
    for (auto it = queue.begin(); it != queue.end();) {
      const PlannedTest& p = *tests[*it];
      if (!admission.may_start(p.test->memory)) {
        ++it;
        continue;
      }
      size_t index = *it;
      it = queue.erase(it);
      admission.started(p.test->memory);
      if (!p.test->inputs.empty()) {
        evicting_.insert(index);
        evictor_.post(index, p.test->inputs);
        continue;
      }
      if (start(p, index, admission, fail_fast, done)) return true;
    }
    return false;
  }

  // The evictor's finished jobs: their tests may start, or fail to.
  // Returns false when one failed.
  bool take_evicted(const std::vector<const PlannedTest*>& tests, const Done& done, Admission& admission) {
    bool all = true;
    for (auto& d : evictor_.take()) {
      if (!evicting_.erase(d.id)) continue;
      if (d.error.empty()) {
        cold_.push_back(d.id);
        continue;
      }
      const TestSpec& t = *tests[d.id]->test;
      admission.ended(t.memory);
      done(d.id, unstarted(*tests[d.id], Ending::not_started,
                           tests[d.id]->spec->path + ":" + std::to_string(t.line) + ":" + std::to_string(t.column) +
                               ": " + d.error));
      all = false;
    }
    return all;
  }

  // Starts an admitted test. Returns true when fail-fast says to start no
  // more.
  bool start(const PlannedTest& p, size_t index, Admission& admission, bool fail_fast, const Done& done) {
    auto test = std::make_unique<RunningTest>(p);
    if (!test->start(context_, ahead_.index == index ? std::move(ahead_.group) : nullptr)) {
      admission.ended(p.test->memory);
      TestRecord r = test->not_started();
      bool stop = fail_fast && !r.verdict.passed;
      done(index, std::move(r));
      return stop;
    }
    uint64_t serial = next_serial_++;
    watch(test->pidfd(), tag(serial, kEnded));
    if (test->status_fd() >= 0) watch(test->status_fd(), tag(serial, kEnded));
    watch(test->out().reader(), tag(serial, kStdout));
    watch(test->err().reader(), tag(serial, kStderr));
    slots_.push_back({serial, index, false, std::move(test)});
    return false;
  }

  // While tests run, the group of the next test in the queue is made
  // (mkdir and limit writes: most of memrun's own work per test on v1), so
  // that it starts as soon as it may. One unused is removed with the loop.
  void make_ahead(const std::vector<const PlannedTest*>& tests, const std::deque<size_t>& queue) {
    if (queue.empty() || ahead_.group) return;
    try {
      ahead_ = {queue.front(), RunningTest::make_group(*tests[queue.front()], context_)};
    } catch (const cgroup::Failure&) {  // made again at its start, where a failure is the test's
    } catch (const Error&) {
    }
  }

  // Collects the exits, then takes every exited test one step further in
  // its cleanup (see RunningTest::settle): a test whose group is gone hands
  // its limit back; one whose record is made is reported. Nothing here
  // waits. Returns true when fail-fast says to start no more.
  bool finish_exited(Admission& admission, bool fail_fast, const Done& done) {
    bool stop = false;
    reap();
    find_orphans_outside();  // before a test's figures are read
    auto now = clock_.now();
    for (auto it = slots_.begin(); it != slots_.end();) {
      RunningTest& t = *it->test;
      bool settled = t.exited() && t.next_settle() <= now && t.settle(*kernel_log_);
      // With fail-fast, the next test waits for this one's verdict.
      if (t.released() && !it->released && (settled || !fail_fast)) {
        admission.ended(t.planned().test->memory);
        it->released = true;
      }
      if (!settled) {
        ++it;
        continue;
      }
      TestRecord r = t.record();
      stop = stop || (fail_fast && !r.verdict.passed);
      done(it->index, std::move(r));
      it = slots_.erase(it);
    }
    reap();  // what the cleanup killed: the tests' orphans
    return stop;
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
    next = std::min(next, leftovers_.next());
    for (const auto& s : slots_) {
      next = std::min({next, s.test->deadline(), s.test->next_sample(), s.test->next_settle()});
      if (s.test->grace_end()) next = std::min(next, *s.test->grace_end());
    }
    epoll_event events[32];
    int n = clock_.wait(epoll_, timer_, events, 32, next);
    if (n < 0 && errno != EINTR) throw_errno(Category::system, "epoll_wait");
    for (int i = 0; i < n; ++i) {
      uint64_t serial = events[i].data.u64 >> 2;
      auto source = static_cast<Source>(events[i].data.u64 & 3);
      if (source == kLoop) {
        if (serial == kSignalSerial) on_signals();
        if (serial == kEvictorSerial) evicted_ = true;
        uint64_t expirations;
        if (serial == kTimerSerial) (void)!::read(timer_, &expirations, sizeof expirations);
        continue;
      }
      for (auto& s : slots_) {
        if (s.serial != serial) continue;
        // A pipe that ended is closed by its relay, which removes it from
        // the epoll set. An exit is collected by reap().
        if (source == kStdout) s.test->out().pump();
        if (source == kStderr) s.test->err().pump();
      }
    }
  }

  void on_signals() {
    while (int sig = signals_.take()) {
      // The first signal stops the run politely (SIGTERM, then SIGKILL
      // after the grace period); another one kills at once.
      bool first = interrupted_by_ == 0;
      if (first) interrupted_by_ = sig;
      for (auto& s : slots_) {
        if (s.test->exited()) continue;
        if (first) s.test->interrupt(options_.grace);
        else s.test->kill_now();
      }
    }
  }

  // Collects every child that exited: the tests' main processes (their
  // status goes to their test) and the orphans they left (memrun is their
  // subreaper), so that no zombie outlives its test.
  void reap() {
    int status;
    rusage usage;
    pid_t pid;
    while ((pid = ::wait4(-1, &status, WNOHANG, &usage)) > 0)
      for (auto& s : slots_)
        if (s.test->pid() == pid) s.test->child_exited(status, usage);
    // A test in a pid namespace: its init's report of the command's end.
    for (auto& s : slots_) s.test->poll_status();
  }

  // A process a test left outside its group (moved by a service manager it
  // reached) outlives the test's main process, and the group's kill does
  // not reach it; its parent gone, it is memrun's child (memrun is the
  // subreaper). So while tests are being cleaned up, a child of memrun in
  // the session of a test's main process (each test starts one, setsid) is
  // that test's: check_escaped counts it when it is outside the group, and
  // kills it. memrun's other children (what its own caller left it: a
  // shell's background job before `exec memrun`) are never touched.
  void find_orphans_outside() {
    bool ending = false;
    for (const auto& s : slots_) ending = ending || s.test->killing();
    if (!ending) return;
    for (int pid : child_processes(::getpid())) {
      int session = session_of(pid);
      for (auto& s : slots_)
        if (s.test->killing() && s.test->pid() == session && pid != session)
          s.test->check_escaped(pid, ::getpid());
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
  uint64_t next_serial_ = 3;  // 0 to 2 are the loop's own
  Evictor evictor_;
  std::set<size_t> evicting_;  // admitted tests whose inputs the evictor has
  std::deque<size_t> cold_;    // ... and those it is done with, to start
  bool evicted_ = false;       // the evictor said it finished a job
  std::vector<Slot> slots_;
  struct {
    size_t index = SIZE_MAX;  // in the list being run
    std::unique_ptr<cgroup::Group> group;
  } ahead_;  // see make_ahead
  int interrupted_by_ = 0;
};

}  // namespace

int SteadyClock::wait(int epoll, int timer, epoll_event* events, int max, time_point until) {
  itimerspec spec{};  // zero: disarmed
  if (until != time_point::max()) {
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(until.time_since_epoch()).count();
    ns = std::max<int64_t>(ns, 1);  // steady_clock is CLOCK_MONOTONIC; a zero time would disarm the timer
    spec.it_value.tv_sec = ns / 1000000000;
    spec.it_value.tv_nsec = ns % 1000000000;
  }
  ::timerfd_settime(timer, TFD_TIMER_ABSTIME, &spec, nullptr);
  return ::epoll_wait(epoll, events, max, -1);
}

Clock& steady_clock() {
  static SteadyClock clock;
  return clock;
}

void prepare_runner_process(RunOptions& options) {
  // Daemons a test leaves behind are reparented to memrun, not to PID 1,
  // so that they can be reaped once their group is killed.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  // Once per process: a second protect_memrun() would read back memrun's
  // own lowered value, not the one tests must get.
  static const std::string tests_oom_score_adj = protect_memrun();
  options.oom_score_adj = tests_oom_score_adj;
  options.open_files = raise_open_files();
}

int jobs_within_open_files() {
  raise_open_files();
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return INT_MAX;
  auto fit = (static_cast<int64_t>(limit.rlim_cur) - kFilesOfMemrun) / kFilesPerTest;
  return static_cast<int>(std::clamp<int64_t>(fit, 1, INT_MAX));
}

namespace {
RunResults run_with(Loop& loop, const Plan& plan, const RunOptions& options, RunObserver& observer);
}  // namespace

RunResults run_plan(const Plan& plan, cgroup::Backend& backend, const RunOptions& options,
                    RunObserver& observer) {
  Loop loop(backend, options, observer);
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
  // only the verdict, so that memrun's memory does not grow with every
  // test's timeline and memory.stat.
  out.tests.resize(plan.tests.size());
  auto done = [&](size_t i, TestRecord r) {
    observer.test_done(i, r);
    out.tests[i] = std::move(r.verdict);
  };
  if (loop.interrupted_by() || !setup_failed.empty()) {
    for (size_t i = 0; i < plan.tests.size(); ++i)
      done(i, loop.interrupted_by() ? unstarted(plan.tests[i], Ending::not_run)
                                    : unstarted(plan.tests[i], Ending::not_started, setup_failed));
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

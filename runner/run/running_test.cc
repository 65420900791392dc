#include "runner/run/running_test.h"

#include <signal.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "cgroup/error.h"
#include "runner/base/error.h"
#include "runner/base/files.h"
#include "runner/launch/shield.h"
#include "runner/run/enforce.h"

extern char** environ;

namespace memrun {
namespace {

std::vector<std::string> environment(const TestSpec& t) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    // memrun's own variables are set below, once: a nested run's outer
    // values must not come first (getenv takes the first). The user's bus
    // is no test's unless its spec says so (shield.h).
    if (t.env.count(key) || key == "MEMRUN_TEST" || key == "MEMRUN_MEMORY_LIMIT" || key == "MEMRUN_PYTEST_OUTCOME" ||
        key == "MEMRUN_SUB_GROUPS")
      continue;
    if (!t.service_manager && names_the_users_bus(key)) continue;
    env.push_back(kv);
  }
  for (const auto& [k, v] : t.env) env.push_back(k + "=" + v);
  // Tests may size themselves to their limit.
  env.push_back("MEMRUN_TEST=" + t.name);
  env.push_back("MEMRUN_MEMORY_LIMIT=" + std::to_string(t.memory));
  // pytest_memrun.peak() makes a v1 group of its own for a block only where
  // the test may make sub-groups (sub_groups: true); else it samples.
  if (t.sub_groups) env.push_back("MEMRUN_SUB_GROUPS=1");
  return env;
}

double seconds(const timeval& tv) { return static_cast<double>(tv.tv_sec) + tv.tv_usec / 1e6; }

// What launch() runs for test `t`, but for its path and its output pipes.
Command command_of(const TestSpec& t, const RunContext& context) {
  Command cmd;
  cmd.env = environment(t);
  cmd.argv = t.argv;
  cmd.cwd = t.cwd;
  cmd.oom_score_adj = context.oom_score_adj;
  cmd.open_files = context.open_files;
  cmd.private_shm = true;
  cmd.hugepages_off = t.hugepages_off;
  if (!t.service_manager) context.launcher->keep_from_service_managers(cmd);
  return cmd;
}

}  // namespace

RunningTest::RunningTest(PlannedTest planned) : planned_(std::move(planned)) {}

RunningTest::~RunningTest() {
  // Never waits: the loop has the group by now (abandon(), remove_group()),
  // unless memrun failed before its close; then the group's own destructor
  // makes one attempt, and what is left is the next run's gc's.
  close_watched(child_.pidfd);
  close_watched(child_.status_fd);
  close_watched(case_pidfd_);
}

void RunningTest::abandon() {
  escapes_.kill();
  if (!group_) return;
  try {
    group_->kill_step();
  } catch (const cgroup::Failure&) {  // the leftovers kill again
  }
  context_->leftovers->add(std::move(group_));
}

void Leftovers::add(std::unique_ptr<cgroup::Group> group) {
  if (group) groups_.emplace_back(clock_.now(), std::move(group));
}

void Leftovers::retry(Clock::time_point now) {
  for (auto it = groups_.begin(); it != groups_.end();) {
    if (it->first > now) {
      ++it;
      continue;
    }
    bool gone = true;
    try {
      it->second->kill_step();
      gone = it->second->remove_step();
    } catch (const cgroup::Failure&) {
      // Another error than EBUSY will not pass by retrying: the group stays
      // for gc, and the backend's close() says the run's folder is not empty.
    }
    if (gone) {
      it = groups_.erase(it);
      continue;
    }
    it->first = now + kRetry;
    ++it;
  }
}

Clock::time_point Leftovers::next() const {
  auto next = Clock::time_point::max();
  for (const auto& [when, group] : groups_) next = std::min(next, when);
  return next;
}

std::unique_ptr<cgroup::Group> RunningTest::make_group(const PlannedTest& p, const RunContext& context) {
  const TestSpec& t = *p.test;
  return context.backend->create(p.group(), {t.memory, t.memory_high, t.swap, t.pids});
}

// Its process never started or was killed by launch(): the group goes now
// or, if the kernel still says EBUSY, on the loop's timer.
bool RunningTest::start_failed(const std::string& why) {
  observed_.start_error = why;
  if (group_) {
    try {
      group_->kill_step();
      if (group_->remove_step()) group_.reset();
    } catch (const cgroup::Failure&) {
    }
    context_->leftovers->add(std::move(group_));
  }
  if (out_) out_->finish();
  if (err_) err_->finish();
  return false;
}

// The relays of the test's stdout and stderr into its logs.
void RunningTest::open_relays(const RunContext& context) {
  const PlannedTest& p = planned();
  out_ = std::make_unique<LogRelay>(p.stdout_path(), context.max_log);
  err_ = std::make_unique<LogRelay>(p.stderr_path(), context.max_log);
  out_->echo_to(context.echo_stdout);
  err_->echo_to(context.echo_stderr);
  if (p.test->rules.reads_output()) {
    // What the verdict reads: memrun's copy, not the files, which another
    // test could rewrite. As much as the log keeps (64 MiB by default),
    // and never more than that without a cap: memrun's memory stays flat.
    constexpr uint64_t kMaxMatched = 64u << 20;
    size_t limit = static_cast<size_t>(context.max_log ? std::min(context.max_log, kMaxMatched) : kMaxMatched);
    out_->copy_up_to(limit);
    err_->copy_up_to(limit);
  }
  out_->watched_by(context.epoll);
  err_->watched_by(context.epoll);
}

bool RunningTest::start(const RunContext& context, std::unique_ptr<cgroup::Group> ahead, uint64_t serial) {
  const PlannedTest& p = planned();
  const TestSpec& t = *p.test;
  context_ = &context;
  observed_.started = std::chrono::floor<std::chrono::milliseconds>(std::chrono::system_clock::now());
  t0_ = context_->clock->now();
  sampler_.set_interval(context.sample_interval);
  observed_.timeline.interval_s = context.sample_interval.count() / 1e3;

  Command cmd = command_of(t, context);
  if (vessel_) return start_vessel(context, std::move(cmd), std::move(ahead), serial);
  cmd.path = find_executable(t.argv[0], cmd.env);
  if (cmd.path.empty()) {
    observed_.start_error = "command not found: '" + t.argv[0] + "' is not in the test's PATH";
    return false;
  }
  open_relays(context);
  cmd.stdout_fd = out_->writer();
  cmd.stderr_fd = err_->writer();
  Child child;
  try {
    group_ = ahead ? std::move(ahead) : make_group(p, context);
    const cgroup::Placement placement = group_->placement();
    // A pid namespace where the test is sealed (root) or shielded in a user
    // namespace that allows one. Not for a test that talks to a service
    // manager: it names processes by their pids (systemd-run --scope sends
    // its own), which mean nothing outside the namespace.
    cmd.pid_namespace = context.pid_namespace && !t.service_manager &&
                        (placement.seal || (cmd.user_namespace && context.launcher->pid_namespaces_work()));
    if (t.rules.outcome_file || t.rules.gtest_results) results_.ask(cmd, t.rules.gtest_results);
    if (begin(context, serial, std::move(cmd), placement, child)) return true;
  } catch (const cgroup::Failure& e) {
    return start_failed(failure_text(e));
  } catch (const Error& e) {
    return start_failed(e.what());
  }
  return launched(child, nullptr);
}

// A start handed to the launcher's thread: nothing is sampled or timed
// until it says how it went (launched(), or adopt() for a vessel).
bool RunningTest::begin(const RunContext& context, uint64_t serial, Command cmd, const cgroup::Placement& placement,
                        Child& child) {
  if (context.start_now) {
    child = context.launcher->start_now(cmd, placement);
    return false;
  }
  context.launcher->post(serial, std::move(cmd), placement);
  phase_ = Phase::starting;
  deadline_ = clock::time_point::max();
  sampler_.stop();
  return true;
}

// The vessel's init (Command::vessel), started on the loop's thread: its
// case's parent waits for it. Its output goes nowhere (it writes none; the
// case's is its parent's), and no results file is asked for: the case's
// parent says how it ended (case_ended()).
bool RunningTest::start_vessel(const RunContext& context, Command cmd, std::unique_ptr<cgroup::Group> ahead,
                               uint64_t serial) {
  const TestSpec& t = *planned().test;
  cmd.vessel = true;
  cmd.env.clear();  // the init's own: it runs nothing that reads it
  Child child;
  try {
    group_ = ahead ? std::move(ahead) : make_group(planned(), context);
    const cgroup::Placement placement = group_->placement();
    // Sealed (root): an init in a pid namespace of its own, in the seal,
    // whose namespaces the case enters. Otherwise (memrun's caller is not
    // root, or --host-cgroups) there is nothing for the case to enter: it
    // is only moved into the group, and no process waits there for it.
    if (context.pid_namespace && !t.service_manager && placement.seal) {
      cmd.pid_namespace = true;
      // Its seal's steps, on the launcher's thread.
      if (begin(context, serial, std::move(cmd), placement, child)) return true;
    }
  } catch (const cgroup::Failure& e) {
    return start_failed(failure_text(e));
  } catch (const Error& e) {
    return start_failed(e.what());
  }
  return launched(child, nullptr);
}

void RunningTest::adopt(int pidfd, int pid, int parent) {
  // Writing a pid to cgroup.procs moves that process, all its threads
  // (v1 and v2); the kernel checks the writer's rights, not the process's.
  std::string text = std::to_string(pid);
  for (int fd : group_->placement().procs_fds)
    if (::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
      ::close(pidfd);
      throw_errno(Category::system, "cannot move the case (pid " + text + ") into its cgroup");
    }
  case_pidfd_ = pidfd, case_pid_ = pid, case_parent_ = parent;
  escapes_.saw(pid);
  phase_ = Phase::running;
  t0_ = context_->clock->now();
  observed_.started = std::chrono::floor<std::chrono::milliseconds>(std::chrono::system_clock::now());
  observed_.ending = Ending::exited;  // unless a timeout or a signal comes first
  deadline_ = t0_ + planned().test->timeout;
  sampler_.begin(t0_);
  if (auto grace = std::exchange(interrupt_pending_, std::nullopt)) interrupt(*grace);
}

void RunningTest::case_ended(int status, const rusage& usage, const std::string& tool_said) {
  if (phase_ != Phase::running) return;  // (a second word, or one after memrun ended it)
  observed_.tool_said = tool_said;
  blocks_.clear();  // a block the case never closed measures nothing
  reaped(status, usage);
  // Its init (and what the case left) dies now, while the loop turns.
  kill_step(*group_, observed_);
}

std::pair<std::string, uint64_t> RunningTest::open_block(const std::string& name) {
  if (phase_ != Phase::running || case_pid_ <= 0) throw Error(Category::usage, "the case is not running");
  if (blocks_.count(name)) throw Error(Category::usage, "a block named '" + name + "' is open already");
  auto block = group_->open_block(case_pid_, blocks_.empty());
  std::pair<std::string, uint64_t> said{block->source(), block->baseline()};
  if (block->sampled()) sampler_.sooner(context_->clock->now());
  blocks_[name] = std::move(block);
  return said;
}

BlockFigures RunningTest::close_block(const std::string& name) {
  auto it = blocks_.find(name);
  if (it == blocks_.end()) throw Error(Category::usage, "no block named '" + name + "' is open");
  auto block = std::move(it->second);
  blocks_.erase(it);
  auto f = block->close();
  BlockFigures b{name, f.high - std::min(f.high, block->baseline()), f.now - std::min(f.now, block->baseline()),
                 block->baseline(), block->source()};
  observed_.blocks.push_back(b);
  return b;
}

bool RunningTest::launched(const Child& child, std::exception_ptr error) {
  const TestSpec& t = *planned().test;
  phase_ = Phase::running;
  try {
    if (error) std::rethrow_exception(error);
    child_ = child;
    init_ = child_.status_fd >= 0;
    if (child_.pid > 0) {  // (none for an unsealed vessel)
      escapes_.saw(child_.pid);
      // The command, as memrun's namespace numbers it (the kernel's log does).
      if (init_)
        for (int c : child_processes(child_.pid)) escapes_.saw(c);
      group_->started(child_.pid);
    }
  } catch (const cgroup::Failure& e) {
    return start_failed(failure_text(e));
  } catch (const Error& e) {
    return start_failed(e.what());
  }
  observed_.placement = child_.placement;
  if (vessel_) {
    // Its init never reports a status: the case's parent does.
    close_watched(child_.status_fd);
    observed_.placement = "adopted";
    phase_ = Phase::waiting;
    deadline_ = clock::time_point::max();
    sampler_.stop();  // until adopt()
    return true;
  }
  // Only the test holds the write ends now: the pipes end with its processes.
  out_->close_writer();
  err_->close_writer();
  observed_.ending = Ending::exited;  // unless a timeout or a signal comes first
  deadline_ = t0_ + t.timeout;
  sampler_.begin(t0_);
  // A signal that came while it started (see interrupt()).
  if (auto grace = std::exchange(interrupt_pending_, std::nullopt)) interrupt(*grace);
  return true;
}

void RunningTest::sample() {
  auto u = group_->usage();
  auto now = context_->clock->now();
  sampler_.take(u, elapsed_s(), now, observed_);
  if (observed_.samples % 5 == 1) find_escapes();
  uint64_t limit = planned().test->memory;
  thrash_.count(u);
  if (planned().test->thrash && thrash_.thrashing(u, now, limit, *group_, observed_)) {
    deadline_ = clock::time_point::max();
    sampler_.stop();
    kill_step(*group_, observed_);
    return;
  }
  // A block measured by samples (Group::open_block) is sampled every
  // millisecond while it is open.
  auto at_most = std::chrono::microseconds::max();
  for (auto& [name, block] : blocks_)
    if (block->sampled()) {
      block->sample();
      at_most = std::min(at_most, std::chrono::microseconds(cgroup::Block::kSampleEveryUs));
    }
  sampler_.schedule(u, limit, now, at_most);
}

uint64_t RunningTest::current() const {
  if (sampler_.interval().count() > 0 || !group_) return sampler_.current();
  return group_->usage().current;
}

void RunningTest::time_out() {
  // With a pid namespace, what left the group dies with the init, before
  // the exit's walk could count it: counted now.
  if (init_) find_escapes();
  observed_.ending = Ending::timed_out;
  deadline_ = clock::time_point::max();
  sampler_.stop();
  // The main process dies with the rest; its exit starts the cleanup,
  // which kills again until the group is empty.
  kill_step(*group_, observed_);
}

void RunningTest::interrupt(std::chrono::milliseconds grace) {
  // Its process is not there yet to be stopped: once it is (launched()).
  if (phase_ == Phase::starting || phase_ == Phase::waiting) {
    interrupt_pending_ = std::min(grace, interrupt_pending_.value_or(grace));
    return;
  }
  if (observed_.ending == Ending::exited) observed_.ending = Ending::interrupted;
  deadline_ = clock::time_point::max();
  if (grace.count() <= 0) return kill_now();
  // SIGTERM first, as a shell's Ctrl-C or `docker stop` would: a test may
  // remove its temporary files before it goes.
  group_->signal_all(SIGTERM);
  grace_end_ = context_->clock->now() + grace;
}

void RunningTest::kill_now() {
  if (phase_ == Phase::starting || phase_ == Phase::waiting) {
    interrupt_pending_ = std::chrono::milliseconds(0);
    return;
  }
  grace_end_.reset();
  kill_step(*group_, observed_);
}

// Every fifth sample, and as the test ends: from its main process (or
// init) and, for an adopted case, its own tree (its parent is pytest).
void RunningTest::find_escapes() {
  std::vector<std::pair<int, int>> roots;  // (pid, its parent)
  if (child_.pid > 0) roots.push_back({child_.pid, ::getpid()});
  if (case_pid_ > 0 && phase_ == Phase::running) roots.push_back({case_pid_, case_parent_});
  escapes_.walk(group_.get(), roots);
}

void RunningTest::check_escaped(int pid, int parent, std::vector<int> threads) {
  if (group_) escapes_.check(*group_, pid, parent, std::move(threads));
}

void RunningTest::moved_out(int task, const std::string& where) { escapes_.moved_out(task, where); }

void RunningTest::child_exited(int status, const rusage& usage) {
  if (!init_) return reaped(status, usage);
  init_gone_ = true;
  init_status_ = status;
  init_usage_ = usage;
  poll_status();
}

void RunningTest::poll_status() {
  // A vessel's case ends when its parent says so (case_ended()); an init
  // gone before that took the case with it, and the parent says that too.
  if (!init_ || vessel_ || phase_ != Phase::running) return;
  if (child_.status_fd >= 0) {
    InitReport report;
    ssize_t n = ::read(child_.status_fd, &report, sizeof report);
    if (n == sizeof report) init_report_ = report;
    if (n >= 0 || (errno != EAGAIN && errno != EINTR)) {
      close_watched(child_.status_fd);  // the report, or EOF: the init died first
    }
  }
  if (init_report_) return reaped(init_report_->status, init_report_->usage);
  if (child_.status_fd < 0 && init_gone_) reaped(init_status_, init_usage_);
}

void RunningTest::reaped(int status, const rusage& usage) {
  // With a pid namespace, the init still holds what the test left (its
  // orphans are the init's children now, wherever they moved): walked
  // before the group's kill takes the init and the kernel the rest.
  if (init_ && !init_gone_) find_escapes();
  close_watched(child_.status_fd);
  phase_ = Phase::ended;
  status_ = status;
  usage_ = usage;
  deadline_ = clock::time_point::max();
  sampler_.stop();
  grace_end_.reset();
  cleanup_.emplace(Cleanup::Parts{planned(), *context_, group_, observed_, escapes_, results_, out_, err_, vessel_, t0_});
  close_watched(child_.pidfd);
  Observation& o = observed_;
  if (WIFEXITED(status_)) o.exit_code = WEXITSTATUS(status_);
  if (WIFSIGNALED(status_)) o.signal = WTERMSIG(status_);
  o.cpu_user_s = seconds(usage_.ru_utime);
  o.cpu_system_s = seconds(usage_.ru_stime);
  o.ended = std::chrono::floor<std::chrono::milliseconds>(std::chrono::system_clock::now());
  o.duration_s = elapsed_s();
}

// See LogRelay::close_reader: a test starting meanwhile holds a copy.
void RunningTest::close_watched(int& fd) {
  if (fd < 0) return;
  if (context_ && context_->epoll >= 0) ::epoll_ctl(context_->epoll, EPOLL_CTL_DEL, fd, nullptr);
  ::close(fd);
  fd = -1;
}

bool RunningTest::settle(KernelLog& kernel_log) { return cleanup_ && cleanup_->step(kernel_log); }

TestRecord RunningTest::record() {
  results_.read(*planned().test, observed_);
  if (out_ && err_) match_output(planned().test->rules, out_->copy() + err_->copy(), observed_);
  return make_record(planned(), std::move(observed_));
}

TestRecord RunningTest::not_started() {
  observed_.ending = Ending::not_started;
  observed_.ended = std::chrono::floor<std::chrono::milliseconds>(std::chrono::system_clock::now());
  observed_.duration_s = elapsed_s();
  return make_record(planned(), std::move(observed_));
}

}  // namespace memrun

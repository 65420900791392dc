#include "runner/running.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup/error.h"

extern char** environ;

namespace memrun {
namespace {

std::vector<std::string> environment(const TestSpec& t) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    // memrun's own variables are set below, once: a nested run's outer
    // values must not come first (getenv takes the first). The user's
    // service-manager bus is no test's unless its spec passes it on: a
    // test that reached it could start units outside its cgroup
    // (systemd-run --user) and so outside its limit.
    if (t.env.count(key) || key == "MEMRUN_TEST" || key == "MEMRUN_MEMORY_LIMIT") continue;
    if (key == "DBUS_SESSION_BUS_ADDRESS" || key == "XDG_RUNTIME_DIR") continue;
    env.push_back(kv);
  }
  for (const auto& [k, v] : t.env) env.push_back(k + "=" + v);
  // Tests may size themselves to their limit.
  env.push_back("MEMRUN_TEST=" + t.name);
  env.push_back("MEMRUN_MEMORY_LIMIT=" + std::to_string(t.memory));
  return env;
}

double seconds(const timeval& tv) { return static_cast<double>(tv.tv_sec) + tv.tv_usec / 1e6; }

}  // namespace

void Timeline::add(double t, uint64_t cur, uint64_t a, uint64_t f) {
  if (++skipped < stride) return;
  skipped = 0;
  if (t_s.size() >= kMaxPoints) {
    // Keep every other point; from now on record half as often.
    for (size_t i = 0; 2 * i < t_s.size(); ++i) {
      t_s[i] = t_s[2 * i];
      current[i] = current[2 * i];
      anon[i] = anon[2 * i];
      file[i] = file[2 * i];
    }
    size_t n = (t_s.size() + 1) / 2;
    t_s.resize(n), current.resize(n), anon.resize(n), file.resize(n);
    stride *= 2;
  }
  t_s.push_back(t), current.push_back(cur), anon.push_back(a), file.push_back(f);
}

RunningTest::RunningTest(const PlannedTest& planned) { result_.planned = &planned; }

RunningTest::~RunningTest() {
  // Only reached early when memrun itself fails mid-run: never leave the
  // process or the group behind.
  if (child_.pidfd >= 0) ::close(child_.pidfd);
  if (group_) {
    try {
      group_->destroy();
    } catch (...) {
    }
  }
}

bool RunningTest::start(const RunContext& context) {
  const PlannedTest& p = planned();
  const TestSpec& t = *p.test;
  result_.started = std::chrono::system_clock::now();
  t0_ = clock::now();
  interval_ = context.sample_interval;
  result_.timeline.interval_s = interval_.count() / 1e3;

  Command cmd;
  cmd.env = environment(t);
  cmd.argv = t.argv;
  cmd.cwd = t.cwd;
  cmd.oom_score_adj = context.oom_score_adj;
  cmd.open_files = context.open_files;
  cmd.path = find_executable(t.argv[0], cmd.env);
  if (cmd.path.empty()) {
    result_.reason = "command not found: '" + t.argv[0] + "' is not in the test's PATH";
    return false;
  }
  out_ = std::make_unique<LogRelay>(p.stdout_path, context.max_log);
  err_ = std::make_unique<LogRelay>(p.stderr_path, context.max_log);
  cmd.stdout_fd = out_->writer();
  cmd.stderr_fd = err_->writer();
  try {
    group_ = context.backend->create(p.group, {t.memory, t.memory_high, t.swap, t.pids});
    child_ = launch(cmd, group_->placement());
    group_->started(child_.pid);
  } catch (const Error& e) {
    result_.reason = e.what();
    if (group_) group_->destroy();
    group_.reset();
    out_->finish();
    err_->finish();
    return false;
  }
  // Only the test holds the write ends now: the pipes end with its processes.
  out_->close_writer();
  err_->close_writer();
  result_.placement = child_.placement;
  result_.outcome = Outcome::pass;  // refined by decide()
  deadline_ = t0_ + t.timeout;
  // A test that ends before its first interval is never sampled: its cost
  // stays a clone, an exec and a wake-up.
  next_sample_ = interval_.count() > 0 ? t0_ + interval_ : clock::time_point::max();
  return true;
}

void RunningTest::sample() {
  auto u = group_->usage();
  Result& r = result_;
  ++r.samples;
  double t = elapsed_s();
  r.timeline.add(t, u.current, u.breakdown.anon, u.breakdown.file);
  if (u.current >= r.sampled_peak) {
    r.at_peak = u.breakdown;
    r.reclaimable_at_sampled_peak = u.reclaimable_file;
    r.timeline.peak_t_s = t;
  }
  r.sampled_peak = std::max(r.sampled_peak, u.current);
  r.working_set_peak = std::max(r.working_set_peak, u.current - std::min(u.current, u.reclaimable_file));
  current_ = u.current;
  // Keep the cadence; after a stall (memrun busy elsewhere) start afresh
  // rather than firing a burst of catch-up samples.
  auto now = clock::now();
  next_sample_ += interval_;
  if (next_sample_ <= now) next_sample_ = now + interval_;
}

uint64_t RunningTest::current() const {
  if (interval_.count() > 0 || !group_) return current_;
  return group_->usage().current;
}

void RunningTest::time_out() {
  result_.outcome = Outcome::timeout;
  deadline_ = clock::time_point::max();
  next_sample_ = clock::time_point::max();
  group_->kill_all();
}

void RunningTest::interrupt(std::chrono::milliseconds grace) {
  if (result_.outcome == Outcome::pass) result_.outcome = Outcome::interrupted;
  deadline_ = clock::time_point::max();
  if (grace.count() <= 0) return kill_now();
  // SIGTERM first, as a shell's Ctrl-C or `docker stop` would: a test may
  // remove its temporary files before it goes.
  group_->signal_all(SIGTERM);
  grace_end_ = clock::now() + grace;
}

void RunningTest::kill_now() {
  grace_end_.reset();
  group_->kill_all();
}

void RunningTest::reaped(int status, const rusage& usage) {
  exited_ = true;
  status_ = status;
  usage_ = usage;
}

Result RunningTest::finish(KernelLog& kernel_log) {
  Result& r = result_;
  // Whatever the test left running (daemons, setsid'd grandchildren) dies
  // with it; the run's reaper collects them (memrun is their subreaper).
  group_->kill_all();
  out_->finish();
  err_->finish();
  r.stdout_bytes = out_->bytes();
  r.stderr_bytes = err_->bytes();
  r.log_discarded_bytes = out_->discarded() + err_->discarded();
  for (const LogRelay* relay : {out_.get(), err_.get()})
    if (!relay->error().empty()) log_error_ += (log_error_.empty() ? "" : "; ") + relay->error();
  ::close(child_.pidfd);
  child_.pidfd = -1;
  if (WIFEXITED(status_)) r.exit_code = WEXITSTATUS(status_);
  if (WIFSIGNALED(status_)) r.signal = WTERMSIG(status_);
  r.cpu_user_s = seconds(usage_.ru_utime);
  r.cpu_system_s = seconds(usage_.ru_stime);
  r.kernel = group_->finish();
  if (r.kernel.oom_kills > 0) {
    log_name_ = group_->kernel_path();
    r.oom_victims = kernel_log.oom_kills(log_name_);
  }
  if (r.samples == 0) r.at_peak = r.kernel.breakdown;
  if (!r.kernel.peak) {
    r.peak = r.sampled_peak;
    r.peak_sampled = true;
  }
  try {
    group_->destroy();
  } catch (const Error& e) {
    r.cleanup_error = e.what();
  }
  group_.reset();
  return done();
}

Result RunningTest::done() {
  result_.ended = std::chrono::system_clock::now();
  result_.duration_s = elapsed_s();
  decide(result_, *result_.planned->test);
  // A lost log does not change the verdict, but the report says so.
  if (!log_error_.empty()) result_.reason += (result_.reason.empty() ? "" : "; ") + log_error_;
  return std::move(result_);
}

Result RunningTest::not_started() { return done(); }

}  // namespace memrun

#include "runner/run.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "cgroup/error.h"
#include "cgroup/fs.h"
#include "runner/launch.h"
#include "runner/units.h"

extern char** environ;

namespace memrun {

const char* to_string(Outcome outcome) {
  switch (outcome) {
    case Outcome::pass: return "pass";
    case Outcome::fail: return "fail";
    case Outcome::oom: return "oom";
    case Outcome::timeout: return "timeout";
    case Outcome::error: return "error";
    case Outcome::interrupted: return "interrupted";
  }
  return "error";
}

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

namespace {

// While memrun runs tests, SIGINT/SIGTERM/SIGHUP arrive on a signalfd so that
// the running test is killed and its cgroup removed before memrun exits.
class SignalGuard {
 public:
  SignalGuard() {
    sigemptyset(&set_);
    for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set_, s);
    ::sigprocmask(SIG_BLOCK, &set_, &old_);
    fd_ = ::signalfd(-1, &set_, SFD_CLOEXEC | SFD_NONBLOCK);
  }
  ~SignalGuard() {
    if (fd_ >= 0) ::close(fd_);
    ::sigprocmask(SIG_SETMASK, &old_, nullptr);
  }
  int fd() const { return fd_; }
  /// The pending signal, or 0.
  int take() const {
    signalfd_siginfo info;
    return ::read(fd_, &info, sizeof info) == sizeof info ? static_cast<int>(info.ssi_signo) : 0;
  }

 private:
  sigset_t set_, old_;
  int fd_ = -1;
};

std::vector<std::string> environment(const TestSpec& t) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (!t.env.count(kv.substr(0, kv.find('=')))) env.push_back(kv);
  }
  for (const auto& [k, v] : t.env) env.push_back(k + "=" + v);
  // Tests may size themselves to their limit.
  env.push_back("MEMRUN_TEST=" + t.name);
  env.push_back("MEMRUN_MEMORY_LIMIT=" + std::to_string(t.memory));
  return env;
}

int open_log(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_errno(kExitUsage, "cannot write the log " + path);
  return fd;
}

double seconds(const timeval& tv) { return static_cast<double>(tv.tv_sec) + tv.tv_usec / 1e6; }

// Under global memory pressure the kernel's OOM killer should pick a test,
// never the runner that reports on it. Lowering one's oom_score_adj needs
// CAP_SYS_RESOURCE (root); then tests get back the value memrun started
// with. Without it, raising is always allowed: tests get memrun's value
// + 500 instead. Returns what tests get.
std::string protect_memrun() {
  const std::string path = "/proc/self/oom_score_adj";
  int own = std::atoi(fs::trim(fs::read_file(path).value_or("0")).c_str());
  if (own > -500 && fs::try_write_file(path, "-500") == 0) return std::to_string(own);
  return std::to_string(std::min(1000, own + 500));
}

Result run_one(const PlannedTest& p, cgroup::Backend& backend, const RunOptions& options,
               const SignalGuard& signals, int* interrupted_by, const std::string& oom_score_adj,
               KernelLog& kernel_log) {
  using clock = std::chrono::steady_clock;
  const TestSpec& t = *p.test;
  Result r;
  r.planned = &p;
  r.started = std::chrono::system_clock::now();
  auto t0 = clock::now();
  auto finish = [&] {
    r.ended = std::chrono::system_clock::now();
    r.duration_s = std::chrono::duration<double>(clock::now() - t0).count();
    decide(r, t);
    return r;
  };

  Command cmd;
  cmd.env = environment(t);
  cmd.argv = t.argv;
  cmd.cwd = t.cwd;
  cmd.oom_score_adj = oom_score_adj;
  cmd.path = find_executable(t.argv[0], cmd.env);
  if (cmd.path.empty()) {
    r.reason = "command not found: '" + t.argv[0] + "' is not in the test's PATH";
    return finish();
  }
  r.timeline.interval_s = options.sample_interval.count() / 1e3;
  cmd.stdout_fd = open_log(p.stdout_path);
  cmd.stderr_fd = open_log(p.stderr_path);

  std::unique_ptr<cgroup::Group> group;
  Child child;
  try {
    group = backend.create(p.group, {t.memory, t.memory_high, t.swap, t.pids});
    child = launch(cmd, group->placement());
  } catch (const Error& e) {
    ::close(cmd.stdout_fd);
    ::close(cmd.stderr_fd);
    r.reason = e.what();
    if (group) group->destroy();
    return finish();
  }
  ::close(cmd.stdout_fd);
  ::close(cmd.stderr_fd);
  r.placement = child.placement;

  // Wait for the exit, the timeout or a signal, sampling usage meanwhile.
  // A test that ends before the first interval is never sampled: its cost
  // stays a fork, an exec and a poll.
  auto deadline = t0 + t.timeout;
  r.outcome = Outcome::pass;  // refined by decide()
  pollfd fds[2] = {{child.pidfd, POLLIN, 0}, {signals.fd(), POLLIN, 0}};
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    if (left.count() <= 0) {
      r.outcome = Outcome::timeout;
      break;
    }
    bool sampling = options.sample_interval.count() > 0;
    auto wait = std::min<std::chrono::milliseconds>(left, std::chrono::hours(1));
    int n = ::poll(fds, 2, static_cast<int>((sampling ? std::min(wait, options.sample_interval) : wait).count()));
    if (n < 0 && errno != EINTR) throw_errno(1, "poll");
    if (n > 0 && fds[0].revents) break;
    if (n > 0 && fds[1].revents) {
      if (int sig = signals.take()) {
        *interrupted_by = sig;
        r.outcome = Outcome::interrupted;
        break;
      }
    }
    if (!sampling) continue;
    auto u = group->usage();
    ++r.samples;
    double t = std::chrono::duration<double>(clock::now() - t0).count();
    r.timeline.add(t, u.current, u.breakdown.anon, u.breakdown.file);
    if (u.current >= r.sampled_peak) {
      r.at_peak = u.breakdown;
      r.reclaimable_at_sampled_peak = u.reclaimable_file;
      r.timeline.peak_t_s = t;
    }
    r.sampled_peak = std::max(r.sampled_peak, u.current);
    r.working_set_peak = std::max(r.working_set_peak, u.current - std::min(u.current, u.reclaimable_file));
  }
  if (r.outcome != Outcome::pass) group->kill_all();
  int status = 0;
  rusage ru{};
  while (::wait4(child.pid, &status, 0, &ru) < 0 && errno == EINTR) {}
  ::close(child.pidfd);
  // Whatever the test left running (daemons, setsid'd grandchildren) dies
  // with it. memrun is their subreaper, so reap them too.
  group->kill_all();
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {}
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  r.cpu_user_s = seconds(ru.ru_utime);
  r.cpu_system_s = seconds(ru.ru_stime);
  r.kernel = group->finish();
  if (r.kernel.oom_kills > 0) {
    // The group's last two path components name it in the kernel's log.
    const std::string& path = group->path();
    auto slash = path.rfind('/', path.rfind('/') - 1);
    r.oom_victims = kernel_log.oom_kills(path.substr(slash + 1));
  }
  if (r.samples == 0) r.at_peak = r.kernel.breakdown;
  if (!r.kernel.peak) {
    r.peak = r.sampled_peak;
    r.peak_sampled = true;
  }
  try {
    group->destroy();
  } catch (const Error& e) {
    r.reason = e.what();
  }
  return finish();
}

}  // namespace

void decide(Result& r, const TestSpec& t) {
  r.limit = std::min(t.memory, r.kernel.effective_limit ? r.kernel.effective_limit : t.memory);
  if (r.kernel.peak) r.peak = *r.kernel.peak;
  r.page_cache = r.kernel.reclaimable_file;
  if (r.outcome == Outcome::pass) {
    // Only a kernel OOM kill in the test's own group is an OOM: SIGKILL can
    // come from anywhere.
    if (r.kernel.oom_kills > 0 || r.kernel.oom_group_kills > 0) r.outcome = Outcome::oom;
    else if (r.exit_code != 0) r.outcome = Outcome::fail;
  }
  // Page cache grows until the limit and is then reclaimed instead of
  // anything being killed, so a streaming test's kernel peak is the limit by
  // construction. When the peak came near the limit, headroom rests on what
  // could not be reclaimed: the kernel peak less the cache the highest sample
  // saw (never less than any sample's own working set). A spike the samples
  // missed still counts in full, so the estimate never flatters the test.
  if (r.samples > 0) {
    uint64_t net_peak = r.peak - std::min(r.peak, r.reclaimable_at_sampled_peak);
    r.working_set_peak = std::min(r.peak, std::max(r.working_set_peak, net_peak));
  } else {
    r.working_set_peak = r.peak;
  }
  bool near_limit = r.kernel.limit_reached || r.peak >= r.limit / 10 * 9;
  // An OOM kill means the limit was really needed: no estimate then.
  bool oom = r.outcome == Outcome::oom;
  // And a few pages of cache are no reason for an estimate: it takes 5% of
  // the limit.
  bool much_cache = r.peak - r.working_set_peak >= r.limit / 20;
  r.headroom_basis = near_limit && !oom && much_cache ? "working_set" : "peak";
  uint64_t basis = r.headroom_basis == "peak" ? r.peak : r.working_set_peak;
  r.headroom = static_cast<int64_t>(r.limit) - static_cast<int64_t>(basis);
  r.headroom_pct = r.limit ? 100.0 * static_cast<double>(r.headroom) / static_cast<double>(r.limit) : 0;

  const Expectation& e = t.expect;
  switch (e.kind) {
    case Expectation::pass: r.passed = r.outcome == Outcome::pass; break;
    case Expectation::oom: r.passed = r.outcome == Outcome::oom; break;
    case Expectation::fail: r.passed = r.outcome == Outcome::fail; break;
    case Expectation::exit_code:
      r.passed = (r.outcome == Outcome::pass || r.outcome == Outcome::fail) && r.exit_code == e.code;
      break;
  }
  if (!r.passed && r.reason.empty()) {
    std::string got = to_string(r.outcome);
    if (r.outcome == Outcome::oom) got += " at " + format_size(r.limit);
    if (r.outcome == Outcome::fail)
      got += r.signal ? " (killed by signal " + std::to_string(r.signal) + ")"
                      : " (exit " + std::to_string(r.exit_code) + ")";
    if (r.outcome == Outcome::timeout) got += " after " + format_duration(t.timeout.count() / 1e3);
    r.reason = "expected " + e.describe() + ", got " + got;
  }
  bool headroom_applies = e.kind == Expectation::pass || e.kind == Expectation::exit_code;
  if (r.passed && headroom_applies && t.min_headroom) {
    uint64_t need = t.min_headroom->for_limit(r.limit);
    if (r.headroom < static_cast<int64_t>(need)) {
      r.passed = false;
      r.reason = "headroom " + format_signed_size(r.headroom) + " is below min_headroom " +
                 format_size(need) + " (peak " + format_size(r.peak) + " of " + format_size(r.limit) + ")";
    }
  }
}

bool setup_up_to_date(const Setup& setup) {
  namespace fs = std::filesystem;
  if (setup.outputs.empty()) return false;
  std::error_code ec;
  fs::file_time_type newest_input = fs::file_time_type::min();
  for (const auto& in : setup.inputs) {
    auto t = fs::last_write_time(in, ec);
    if (ec) return false;  // a missing input: let the setup say what is wrong
    newest_input = std::max(newest_input, t);
  }
  for (const auto& out : setup.outputs) {
    auto t = fs::last_write_time(out, ec);
    if (ec || t < newest_input) return false;
  }
  return true;
}

RunResults run_plan(const Plan& plan, cgroup::Backend& backend, const RunOptions& options,
                    const std::function<void(const SetupResult&)>& on_setup,
                    const std::function<void(const Result&)>& on_done) {
  // Daemons a test leaves behind are reparented to memrun, not to PID 1, so
  // they can be reaped once their cgroup is killed.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  SignalGuard signals;
  const std::string oom_score_adj = protect_memrun();
  KernelLog kernel_log;
  RunResults out;
  auto not_run = [&](const PlannedTest& p, Outcome outcome, const std::string& reason) {
    Result r;
    r.planned = &p;
    r.outcome = outcome;
    r.reason = reason;
    r.limit = p.test->memory;
    out.tests.push_back(r);
  };
  std::string setup_failed;
  for (const auto& p : plan.setups) {
    SetupResult s;
    s.planned = &p;
    if (!setup_up_to_date(*p.spec->setup)) {
      s.ran = true;
      s.result = run_one(p, backend, options, signals, &out.interrupted_by, oom_score_adj, kernel_log);
      if (!s.result.passed)
        setup_failed = "not run: the setup of " + p.spec->path + " failed (" + s.result.reason + ")";
    }
    out.setups.push_back(s);
    on_setup(out.setups.back());
    if (out.interrupted_by || !setup_failed.empty()) break;
  }
  for (const auto& p : plan.tests) {
    if (out.interrupted_by) {
      not_run(p, Outcome::interrupted, "not run: memrun was interrupted");
    } else if (!setup_failed.empty()) {
      not_run(p, Outcome::error, setup_failed);
    } else {
      out.tests.push_back(run_one(p, backend, options, signals, &out.interrupted_by, oom_score_adj, kernel_log));
      on_done(out.tests.back());
      if (options.fail_fast && !out.tests.back().passed) break;
    }
  }
  return out;
}

}  // namespace memrun

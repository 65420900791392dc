#include "runner/run/running_test.h"

#include <signal.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

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
  if (!t.service_manager) keep_from_service_managers(cmd);
  return cmd;
}

}  // namespace

RunningTest::RunningTest(const PlannedTest& planned) : planned_(&planned) {}

RunningTest::~RunningTest() {
  // Never waits: the loop has the group by now (abandon(), remove_group()),
  // unless memrun failed before its close; then the group's own destructor
  // makes one attempt, and what is left is the next run's gc's.
  close_watched(child_.pidfd);
  close_watched(child_.status_fd);
  close_watched(case_pidfd_);
  if (results_fd_ >= 0) ::close(results_fd_);
  kill_escaped();
  for (const auto& [pid, fd] : escaped_) ::close(fd);
}

void RunningTest::abandon() {
  kill_escaped();
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
  return context.backend->create(p.group, {t.memory, t.memory_high, t.swap, t.pids});
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

// Where the tool writes how the case ended (pytest's plugin, GoogleTest's
// XML results): a memory file of the test's own (memfd, 3.17+), no path
// of the run's folder, which another test (at -j N, or a root test that
// mounts the disk again) could write. Named through a process that keeps
// it open while anything of the test runs: the test's init, /proc/1/fd/N
// (a test in a pid namespace sees no other /proc), else memrun. Never the
// test's own descriptors: GoogleTest opens the name at its end, when the
// case may have closed them, or opened another file under that number.
void RunningTest::ask_for_outcome(Command& cmd) {
  // Never executable (MFD_NOEXEC_SEAL, 6.3+, where a memory file without
  // MFD_EXEC or it draws a warning in the kernel's log).
  constexpr unsigned kNoExecSeal = 0x8;
  results_fd_ = static_cast<int>(::syscall(SYS_memfd_create, "memrun-results", MFD_CLOEXEC | kNoExecSeal));
  if (results_fd_ < 0 && errno == EINVAL)
    results_fd_ = static_cast<int>(::syscall(SYS_memfd_create, "memrun-results", MFD_CLOEXEC));
  if (results_fd_ < 0) throw_errno(Category::system, "memfd_create (the file a case writes how it ended to)");
  // GoogleTest takes GTEST_OUTPUT as it takes --gtest_output, and a wrapper
  // script passes the environment on where it may not pass an argument.
  // Once (getenv takes the first): the caller's or the suite's goes.
  bool gtest = planned().test->rules.gtest_results;
  std::string key = gtest ? "GTEST_OUTPUT=" : "MEMRUN_PYTEST_OUTCOME=";
  std::erase_if(cmd.env, [&](const std::string& kv) { return kv.rfind(key, 0) == 0; });
  if (cmd.pid_namespace) cmd.results_fd = results_fd_;
  std::string name = "/proc/" + (cmd.pid_namespace ? std::string("1") : std::to_string(::getpid())) + "/fd/" +
                     std::to_string(results_fd_);
  cmd.env.push_back(key + (gtest ? "xml:" : "") + name);
}

// What the case's tool wrote to its results file, once nothing of the test
// runs (a file past 64 MiB, a case's own messages, is no answer).
void RunningTest::read_results() {
  if (results_fd_ < 0) return;
  struct stat st {};
  if (::fstat(results_fd_, &st) == 0) results_bytes_ = static_cast<uint64_t>(st.st_blocks) * 512;
  std::string text;
  if (observed_.ending == Ending::exited) {
    constexpr size_t kMax = 64u << 20;
    char chunk[65536];
    ssize_t n;
    while (static_cast<uint64_t>(st.st_size) <= kMax && text.size() <= kMax &&
           (n = ::pread(results_fd_, chunk, sizeof chunk, static_cast<off_t>(text.size()))) > 0)
      text.append(chunk, static_cast<size_t>(n));
    if (static_cast<uint64_t>(st.st_size) <= kMax && text.size() <= kMax)
      observed_.tool_said = said_in_results(planned().test->rules, text, planned().test->argv);
  }
  ::close(results_fd_);
  results_fd_ = -1;
}

// Shmem the group is still charged with that is no file of the results':
// its pages were the test's until memrun closed it, and a v1 group's
// memory.stat says so a while later (its counters are flushed lazily).
uint64_t RunningTest::shmem_left(uint64_t shmem) const { return shmem > results_bytes_ ? shmem - results_bytes_ : 0; }

// The relays of the test's stdout and stderr into its logs.
void RunningTest::open_relays(const RunContext& context) {
  const PlannedTest& p = planned();
  out_ = std::make_unique<LogRelay>(p.stdout_path, context.max_log);
  err_ = std::make_unique<LogRelay>(p.stderr_path, context.max_log);
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
  interval_ = context.sample_interval;
  observed_.timeline.interval_s = interval_.count() / 1e3;

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
                        (placement.seal || (cmd.user_namespace && pid_namespaces_work()));
    if (t.rules.outcome_file || t.rules.gtest_results) ask_for_outcome(cmd);
    if (context.launcher) return post_start(*context.launcher, serial, std::move(cmd), placement);
    child = launch(cmd, placement);
  } catch (const cgroup::Failure& e) {
    return start_failed(failure_text(e));
  } catch (const Error& e) {
    return start_failed(e.what());
  }
  return launched(child, nullptr);
}

// The start handed to the launcher's thread: nothing is sampled or timed
// until it says how it went (launched(), or adopt() for a vessel).
bool RunningTest::post_start(Launcher& launcher, uint64_t serial, Command cmd, const cgroup::Placement& placement) {
  launcher.post(serial, std::move(cmd), placement);
  phase_ = Phase::starting;
  deadline_ = next_sample_ = clock::time_point::max();
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
      if (context.launcher) return post_start(*context.launcher, serial, std::move(cmd), placement);
      child = launch(cmd, placement);
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
  seen_.insert(pid);
  phase_ = Phase::running;
  t0_ = context_->clock->now();
  observed_.started = std::chrono::floor<std::chrono::milliseconds>(std::chrono::system_clock::now());
  observed_.ending = Ending::exited;  // unless a timeout or a signal comes first
  deadline_ = t0_ + planned().test->timeout;
  next_sample_ = next_point_ = interval_.count() > 0 ? t0_ + interval_ : clock::time_point::max();
  if (auto grace = std::exchange(interrupt_pending_, std::nullopt)) interrupt(*grace);
}

void RunningTest::case_ended(int status, const rusage& usage, const std::string& tool_said) {
  if (phase_ != Phase::running) return;  // (a second word, or one after memrun ended it)
  observed_.tool_said = tool_said;
  blocks_.clear();  // a block the case never closed measures nothing
  reaped(status, usage);
  // Its init (and what the case left) dies now, while the loop turns.
  kill_step();
}

std::pair<std::string, uint64_t> RunningTest::open_block(const std::string& name) {
  if (phase_ != Phase::running || case_pid_ <= 0) throw Error(Category::usage, "the case is not running");
  if (blocks_.count(name)) throw Error(Category::usage, "a block named '" + name + "' is open already");
  auto block = group_->open_block(case_pid_, blocks_.empty());
  std::pair<std::string, uint64_t> said{block->source(), block->baseline()};
  if (block->sampled()) next_sample_ = std::min(next_sample_, context_->clock->now());
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
      seen_.insert(child_.pid);
      // The command, as memrun's namespace numbers it (the kernel's log does).
      if (init_)
        for (int c : child_processes(child_.pid)) seen_.insert(c);
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
    deadline_ = next_sample_ = clock::time_point::max();  // until adopt()
    return true;
  }
  // Only the test holds the write ends now: the pipes end with its processes.
  out_->close_writer();
  err_->close_writer();
  observed_.ending = Ending::exited;  // unless a timeout or a signal comes first
  deadline_ = t0_ + t.timeout;
  // A test that ends before its first interval is never sampled: its cost
  // stays a clone, an exec and a wake-up.
  next_sample_ = interval_.count() > 0 ? t0_ + interval_ : clock::time_point::max();
  // A signal that came while it started (see interrupt()).
  if (auto grace = std::exchange(interrupt_pending_, std::nullopt)) interrupt(*grace);
  return true;
}

void RunningTest::sample() {
  auto u = group_->usage();
  Observation& o = observed_;
  ++o.samples;
  double t = elapsed_s();
  auto now = context_->clock->now();
  // The timeline keeps the regular cadence; the samples in between (near
  // the limit, below) only sharpen the peak estimates.
  if (now >= next_point_) {
    o.timeline.add(t, u.current, u.breakdown.anon, u.breakdown.file);
    next_point_ = now + interval_ / 2;
  }
  if (u.current >= o.sampled_peak) {
    o.at_peak = u.breakdown;
    o.reclaimable_at_sampled_peak = u.reclaimable_file;
    o.timeline.peak_t_s = t;
  }
  o.sampled_peak = std::max(o.sampled_peak, u.current);
  // What memrun saw itself: a test may put its limit back (and, on v1,
  // reset the kernel's high-water mark) before it ends; the verdict holds
  // it to these.
  if (u.limit) o.sampled_limit = std::max(o.sampled_limit, *u.limit);
  for (const auto& limit : {u.limit, u.leaf_limit})
    if (limit) o.sampled_lowest_limit = std::min(o.sampled_lowest_limit, *limit);
  o.sampled_swap_peak = std::max(o.sampled_swap_peak, u.swap);
  o.sampled_working_set = std::max(o.sampled_working_set, u.current - std::min(u.current, u.reclaimable_file));
  current_ = u.current;
  if (o.samples % 5 == 1) find_escapes();
  // Near the limit with page cache in the group, the kernel reclaims cache
  // to make room for anonymous memory and the usage stays flat at the
  // limit: a burst of anonymous memory then shows only in memory.stat, for
  // as long as it lasts. Samples come every 2 ms there, so that the working
  // set estimate does not miss a burst of a few tens of ms (touching 100 MiB
  // takes that long); elsewhere at the interval.
  uint64_t limit = planned().test->memory;
  count_refaults(u);
  if (planned().test->thrash && thrashing(u, now, limit)) return;
  bool near_limit = u.current >= limit / 10 * 9 && u.reclaimable_file >= limit / 20;
  auto interval = std::chrono::duration_cast<std::chrono::microseconds>(
      near_limit ? std::min(interval_, std::chrono::milliseconds(2)) : interval_);
  // A block measured by samples (Group::open_block) is sampled every
  // millisecond while it is open.
  for (auto& [name, block] : blocks_)
    if (block->sampled()) {
      block->sample();
      interval = std::min(interval, std::chrono::microseconds(cgroup::Block::kSampleEveryUs));
    }
  // Keep the cadence; after a stall (memrun busy elsewhere) start afresh
  // rather than firing a burst of catch-up samples.
  if (interval.count() == 0) {  // sampling is off (--sample-interval 0), and no block samples
    next_sample_ = clock::time_point::max();
    return;
  }
  next_sample_ += interval;
  if (next_sample_ <= now) next_sample_ = now + interval;
}

void RunningTest::count_refaults(const cgroup::Usage& u) {
  // What a test reads back is thrashing only when it is the test's own
  // memory: its code and the files it maps (needed again as soon as they
  // are evicted: each access waits on the disk) or its anonymous memory
  // back from swap. A file re-read with read() streams through the page
  // cache instead: every pass over a file larger than the limit reads back
  // pages evicted a pass ago, as many as the file has, while the program
  // itself needs a few buffers (150 passes over 128 MB under 64 MiB read
  // back 200 MB/s, and are no thrash). The kernel counts refaults per type
  // only (anon/file; v1 has no activations, and a refault it activates is
  // only one read back within the size of the active list): the file
  // refaults of a sample count in the share of the page cache that is
  // mapped at that sample.
  uint64_t all = u.refaulted - std::min(u.refaulted, last_refaulted_);
  uint64_t anon = std::min(all, u.refaulted_anon - std::min(u.refaulted_anon, last_refaulted_anon_));
  uint64_t file = all - anon;
  uint64_t cache = std::max(u.breakdown.file, u.reclaimable_file);
  if (cache > 0) file = static_cast<uint64_t>(static_cast<double>(file) * std::min(1.0, static_cast<double>(u.file_mapped) / cache));
  else file = 0;
  working_refaulted_ += anon + file;
  last_refaulted_ = u.refaulted;
  last_refaulted_anon_ = u.refaulted_anon;
}

bool RunningTest::thrashing(const cgroup::Usage& u, clock::time_point now, uint64_t limit) {
  // A test whose working set does not fit its limit can go on for as long
  // as its timeout allows, reading back from disk what the kernel has just
  // evicted (a program's own code included) and doing little else: python3
  // started cold under 6 MiB read back 5 GiB in 10 s and never printed. It
  // is ended here with its own verdict, once within a window it has read
  // back more than kThrashFactor times its limit of its own memory (see
  // count_refaults), or (where the kernel keeps per-group pressure: v2,
  // 4.20+) read back at least its limit while all its tasks were stalled
  // on memory for half the window or more: a large limit over a slow disk
  // refaults less than ten times its size in a window, yet the test does
  // nothing else. A single pass over a file larger than the limit reads
  // nothing back (evicted pages are refaults only when read again), and
  // re-reading files with read() is no thrash (count_refaults); measured:
  // the spilling sort of specs/parquet.yaml reads back 0.45 times its
  // limit in 10 s, the streaming aggregate 0.75 times in 1 s.
  constexpr auto kWindow = std::chrono::seconds(5);
  constexpr uint64_t kThrashFactor = 10;
  if (!window_start_) {
    window_start_ = now;
    window_refaulted_ = working_refaulted_;
    window_stalled_ = group_->stalled_us();
    return false;
  }
  if (now - *window_start_ < kWindow) return false;
  uint64_t read_back = working_refaulted_ - window_refaulted_;
  auto window_us = std::chrono::duration_cast<std::chrono::microseconds>(now - *window_start_).count();
  auto stalled_now = group_->stalled_us();
  std::optional<uint64_t> stalled;
  if (stalled_now && window_stalled_) stalled = *stalled_now - std::min(*stalled_now, *window_stalled_);
  bool refaulting = read_back >= kThrashFactor * limit;
  bool stalling = stalled && *stalled * 2 >= static_cast<uint64_t>(window_us) && read_back >= limit;
  // (Usage flickers below the limit as reclaim frees a batch; a group that
  // read its limit back ten times over has been at it.)
  if ((!refaulting && !stalling) || u.current < limit / 2) {
    window_start_ = now;  // the next window
    window_refaulted_ = working_refaulted_;
    window_stalled_ = stalled_now;
    return false;
  }
  observed_.thrash_stalled_s = stalled ? *stalled / 1e6 : 0;
  observed_.ending = Ending::thrashed;
  observed_.thrash_refaulted = read_back;
  observed_.thrash_window_s = std::chrono::duration<double>(now - *window_start_).count();
  deadline_ = next_sample_ = clock::time_point::max();
  kill_step();
  return true;
}

uint64_t RunningTest::current() const {
  if (interval_.count() > 0 || !group_) return current_;
  return group_->usage().current;
}

void RunningTest::time_out() {
  // With a pid namespace, what left the group dies with the init, before
  // the exit's walk could count it: counted now.
  if (init_) find_escapes();
  observed_.ending = Ending::timed_out;
  deadline_ = clock::time_point::max();
  next_sample_ = clock::time_point::max();
  // The main process dies with the rest; its exit starts the cleanup,
  // which kills again until the group is empty.
  kill_step();
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
  kill_step();
}

bool RunningTest::kill_step() {
  try {
    return group_->kill_step();
  } catch (const cgroup::Failure& e) {
    // Tried again on the loop's timer, up to the cleanup's bound; then the
    // removal says what is left. Never the test's verdict.
    if (observed_.cleanup_error.empty()) observed_.cleanup_error = e.what();
    return false;
  }
}

// A test's processes stay in its group: one found elsewhere left its limit
// behind (a service manager it reached moved it into a scope of its own,
// systemd-run --scope; or it wrote itself into another cgroup.procs). A
// move between cgroups leaves the process tree as it was, so the walk
// follows the test's tree (/proc/PID/task/TID/children) every fifth
// sample. Each thread is a task of its own to the kernel: one thread can
// write its id alone to another group's `tasks` (v1) or threaded
// cgroup.threads (v2), and what it allocates there (pipe buffers, its
// stack's pages) is charged there while its process stays in the test's
// group. So the walk reads every thread's cgroups
// (/proc/PID/task/TID/cgroup), and a thread found outside is an escape of
// its process, whatever it did while it was out: the kernel's figures of
// where it was are not the test's. What it finds is counted as escaped
// (the test fails) and killed with the rest through a pidfd: memrun
// signals only processes it proved were the test's. (A unit the manager
// starts itself, a service, is no descendant: not found here.)
// The tree is walked first, then the group's own lists of its tasks read
// (one read a group): a thread they name is inside; each other one is
// asked where it is (one read a thread, where 1,000 threads took two).
void RunningTest::find_escapes() {
  struct Walked {
    int pid, parent;
    std::vector<int> threads;
  };
  std::vector<Walked> walked;
  std::vector<std::pair<int, int>> todo;  // (pid, its parent)
  if (child_.pid > 0) todo.push_back({child_.pid, ::getpid()});
  // An adopted case is no child of the init (its parent is pytest): its
  // own tree is walked too.
  if (case_pid_ > 0 && phase_ == Phase::running) todo.push_back({case_pid_, case_parent_});
  while (!todo.empty() && walked.size() < 4096) {
    auto [pid, parent] = todo.back();
    todo.pop_back();
    walked.push_back({pid, parent, {}});
    for (int c : child_processes(pid, &walked.back().threads)) todo.push_back({c, pid});
    if (seen_.size() < 4096) seen_.insert(pid);
  }
  if (!group_) return;
  std::set<int> inside = group_->tasks_inside();
  for (auto& w : walked) {
    std::erase_if(w.threads, [&](int tid) { return inside.count(tid) > 0; });
    if (!w.threads.empty()) check_escaped(w.pid, w.parent, std::move(w.threads));
  }
}

void RunningTest::check_escaped(int pid, int parent, std::vector<int> threads) {
  if (!group_ || escaped_.count(pid)) return;
  if (threads.empty()) child_processes(pid, &threads);
  // The first thread found outside stands for its process.
  std::string where;
  int thread = pid;
  for (int tid : threads)
    if (!(where = group_->outside(tid)).empty()) {
      thread = tid;
      break;
    }
  if (where.empty()) return;
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  // The pidfd holds the process now: it is the one found if it is still
  // the child of the same parent, and its thread still outside.
  if (fd < 0 || parent_process(pid) != parent || group_->outside(thread).empty()) {
    if (fd >= 0) ::close(fd);
    return;
  }
  escaped_[pid] = fd;
  if (observed_.escaped_to.empty()) observed_.escaped_to = where;
}

void RunningTest::moved_out(int task, const std::string& where) {
  if (moved_out_.size() < 4096) moved_out_.insert(task);
  if (observed_.escaped_to.empty()) observed_.escaped_to = where;
}

void RunningTest::kill_escaped() {
  for (const auto& [pid, fd] : escaped_) ::syscall(SYS_pidfd_send_signal, fd, SIGKILL, nullptr, 0);
}

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
  phase_ = Phase::killing;
  status_ = status;
  usage_ = usage;
  deadline_ = next_sample_ = clock::time_point::max();
  grace_end_.reset();
  give_up_ = context_->clock->now() + std::chrono::seconds(2);
  next_settle_ = context_->clock->now();
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

void RunningTest::after(std::chrono::microseconds delay) {
  // Backing off from 0.5 ms to 16 ms: an exiting process is usually gone
  // within a millisecond, a large one may take tens of them.
  backoff_ = backoff_.count() == 0 ? delay : std::min(backoff_ * 2, std::chrono::microseconds(16000));
  next_settle_ = context_->clock->now() + backoff_;
}

bool RunningTest::settle(KernelLog& kernel_log) {
  auto now = context_->clock->now();
  switch (phase_) {
    case Phase::starting:
    case Phase::waiting:
    case Phase::running: return false;
    case Phase::killing:
      // Whatever the test left running (daemons, setsid'd grandchildren)
      // dies with it; the run's reaper collects them (memrun is their
      // subreaper). Past the bound, what remains is reported by the removal.
      kill_escaped();
      if (!kill_step() && now < give_up_) {
        after(std::chrono::microseconds(500));
        return false;
      }
      // Nothing of the test runs any more: its figures come on the next
      // turn, after the loop may have started the next test (released()
      // says it can, unless shmem is still charged), so that they are read
      // while that one starts and runs. Its results file goes first.
      read_results();
      shm_draining_ = shmem_left(group_->usage().breakdown.shmem) > 0;
      phase_ = Phase::reading;
      next_settle_ = now;
      return false;
    case Phase::reading:
      read_once_drained(kernel_log, now);
      return false;
    case Phase::removing:
      remove_group();
      if (phase_ == Phase::removing) return false;
      [[fallthrough]];
    case Phase::awaiting_victims:
      // An OOM kill the kernel has not logged yet: the record waits (never
      // the loop) for its victims, for up to 200 ms; without them the kill
      // is still counted.
      if (phase_ == Phase::awaiting_victims && kernel_log.readable()) {
        observed_.oom_victims = kernel_log.oom_kills(log_name_, seen_, t0_);
        oom_at_limit();
        if (observed_.oom_victims.empty() && now < give_up_) {
          next_settle_ = now + std::chrono::milliseconds(10);
          return false;
        }
      }
      phase_ = Phase::done;
      next_settle_ = clock::time_point::max();
      return true;
    case Phase::done: return true;
  }
  return true;
}

void RunningTest::read_once_drained(KernelLog& kernel_log, clock::time_point now) {
  // The test's private /dev/shm goes with its mount namespace, which the
  // kernel releases after the last process has left the group (mounts are
  // put asynchronously on exit): shmem still charged now may be on its way
  // out. It gets up to 100 ms before it is reported as left in a shared
  // tmpfs.
  cgroup::Final final = group_->finish();
  final.breakdown.shmem = shmem_left(final.breakdown.shmem);
  if (final.breakdown.shmem > 0) {
    if (!shm_drain_until_) shm_drain_until_ = now + std::chrono::milliseconds(100);
    if (now < *shm_drain_until_) {
      next_settle_ = now + std::chrono::milliseconds(2);
      return;
    }
  }
  shm_draining_ = false;
  read_figures(kernel_log, std::move(final));
  phase_ = Phase::removing;
  backoff_ = {};
  give_up_ = now + std::chrono::seconds(2);
  // The removal comes on the next turn too: rmdir and the record run
  // while the next test does, not before it.
  next_settle_ = now;
  // A vessel's case waits for its verdict in pytest, and the next case
  // after it: its group goes to the leftovers, removed on the loop's timer
  // (what cannot be is said when the run closes, as for any leftover).
  if (vessel_) {
    context_->leftovers->add(std::move(group_));
    bool wait_for_victims = observed_.kernel.oom_kills > 0 && observed_.oom_victims.empty();
    phase_ = wait_for_victims ? Phase::awaiting_victims : Phase::done;
    give_up_ = now + std::chrono::milliseconds(200);
  }
}

void RunningTest::read_figures(KernelLog& kernel_log, cgroup::Final final) {
  Observation& o = observed_;
  if (out_ && err_) {
    out_->finish();
    err_->finish();
    o.stdout_bytes = out_->bytes();
    o.stderr_bytes = err_->bytes();
    o.log_discarded_bytes = out_->discarded() + err_->discarded();
    for (const LogRelay* relay : {out_.get(), err_.get()})
      if (!relay->error().empty()) o.log_error += (o.log_error.empty() ? "" : "; ") + relay->error();
  }
  o.kernel = std::move(final);
  // A task the walk found outside was seen leaving too: counted once.
  o.kernel.escaped += std::max(escaped_.size(), moved_out_.size());
  // Where the kernel does not count a kill in a sub-group in the group
  // itself (v1), the test may remove the sub-group and its count with it:
  // there the log is read for every test, and the kills it names count.
  // (The log is read once for all tests: each call reads only what is new,
  // one read(2) when nothing is.)
  if (o.kernel.oom_kills > 0 || !group_->counts_kills_below()) {
    log_name_ = group_->kernel_path();
    limit_paths_ = group_->limit_paths();
    o.oom_victims = kernel_log.oom_kills(log_name_, seen_, t0_);
    if (o.oom_victims.size() > o.kernel.oom_kills) o.kernel.oom_kills = o.oom_victims.size();
  }
  oom_at_limit();
  if (o.samples == 0) o.at_peak = o.kernel.breakdown;
}

// Whether the kills came at the limit memrun set, where the kernel's
// counters cannot tell (v1): the log's `oom_memcg=` names the group whose
// limit was hit. One below the test's group that holds no limit of
// memrun's is the test's own; the group, its leaf or an ancestor (a lower
// limit above: the effective limit) are memrun's. The root ("/", the log's
// global_oom) is neither: the machine ran out of memory, and no limit was
// reached, so `expect: oom` is not met by it.
// A kill in the group or its leaf under a limit lower than memrun's (the
// report's `limit`) came after a sealed test lowered its leaf's limit for
// a moment, between two samples: the test's own too.
// The log decides only where it named every kill's (its report is
// rate-limited); else the kernel's counters stand (Final::oom_at_limit).
void RunningTest::oom_at_limit() {
  const auto& victims = observed_.oom_victims;
  if (victims.empty()) return;
  bool at_limit = false;
  for (const auto& kill : victims) {
    if (kill.oom_memcg.empty()) return;
    bool memruns = std::find(limit_paths_.begin(), limit_paths_.end(), kill.oom_memcg) != limit_paths_.end();
    bool below = kill.oom_memcg.rfind(log_name_ + "/", 0) == 0 && !memruns;
    bool global = kill.oom_memcg == "/";
    bool lowered = memruns && kill.limit_bytes != 0 && kill.limit_bytes + 4096 < planned().test->memory;
    at_limit = at_limit || (!below && !global && !lowered);
  }
  observed_.kernel.oom_at_limit = at_limit;
}

void RunningTest::remove_group() {
  bool gone = false;
  try {
    gone = group_->remove_step();
    if (!gone && context_->clock->now() >= give_up_) {
      errno = EBUSY;
      cgroup::fail_errno(cgroup::Failure::Kind::system, "cannot remove cgroup " + group_->path(), group_->path());
    }
  } catch (const cgroup::Failure& e) {
    // Given up on: said in the report, never in place of it. The loop keeps
    // trying to remove it on its timer until the run ends (Leftovers).
    observed_.cleanup_error += (observed_.cleanup_error.empty() ? "" : "; ") + std::string(e.what());
    context_->leftovers->add(std::move(group_));
    gone = true;
  }
  if (!gone) {
    after(std::chrono::microseconds(1000));
    return;
  }
  group_.reset();
  bool wait_for_victims = observed_.kernel.oom_kills > 0 && observed_.oom_victims.empty();
  phase_ = wait_for_victims ? Phase::awaiting_victims : Phase::done;
  give_up_ = context_->clock->now() + std::chrono::milliseconds(200);
}

TestRecord RunningTest::record() {
  read_results();
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

#include "fake_launcher.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "fake_backend.h"

namespace memrun::testing {

FakeLauncher::FakeLauncher(FakeClock& clock) : clock_(clock) {
  ready_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

FakeLauncher::~FakeLauncher() {
  for (auto& [pid, r] : running_)
    for (int fd : {r.exit_fd, r.out, r.err})
      if (fd >= 0) ::close(fd);
  ::close(ready_);
}

void FakeLauncher::post(uint64_t serial, Command cmd, cgroup::Placement placement) {
  started_.push_back({serial, start_now(cmd, placement), nullptr});
  uint64_t one = 1;
  (void)!::write(ready_, &one, sizeof one);
}

std::vector<Launcher::Started> FakeLauncher::take() {
  uint64_t count;
  (void)!::read(ready_, &count, sizeof count);
  return std::exchange(started_, {});
}

Child FakeLauncher::start_now(const Command& cmd, const cgroup::Placement&) {
  std::string test;
  for (const auto& kv : cmd.env)
    if (kv.rfind("MEMRUN_TEST=", 0) == 0) test = kv.substr(12);
  const Process script = processes[test];
  int pid = next_pid_++;
  Running& r = running_[pid];
  r.test = test;
  r.exit_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  r.test_pidfd = ::fcntl(r.exit_fd, F_DUPFD_CLOEXEC, 0);
  // Its output pipes end when it does, as a real test's.
  if (cmd.stdout_fd >= 0) r.out = ::fcntl(cmd.stdout_fd, F_DUPFD_CLOEXEC, 0);
  if (cmd.stderr_fd >= 0) r.err = ::fcntl(cmd.stderr_fd, F_DUPFD_CLOEXEC, 0);
  ++starts;
  // On the loop's thread, which takes it from its signalfd.
  if (script.signals_runner) ::pthread_kill(::pthread_self(), script.signals_runner);
  if (script.runs_for) clock_.at(clock_.now() + *script.runs_for, [this, pid, code = script.exit_code] { end(pid, code << 8); });
  Child child;
  child.pid = pid;
  child.pidfd = r.test_pidfd;
  return child;
}

bool FakeLauncher::signal(int pid, int sig) {
  if (!running_.count(pid)) return false;
  if (sig != 0) end(pid, sig);
  return true;
}

void FakeLauncher::end(int pid, int status) {
  Running& r = running_.at(pid);
  if (r.ended) return;
  r.ended = true;
  for (int* fd : {&r.out, &r.err})
    if (*fd >= 0) ::close(std::exchange(*fd, -1));
  uint64_t one = 1;
  (void)!::write(r.exit_fd, &one, sizeof one);
  ended_.push_back({pid, status, {}});
}

std::vector<Launcher::Ended> FakeLauncher::reap(const std::vector<int>* only) {
  std::vector<Ended> reaped, left;
  for (const auto& e : ended_) {
    bool asked = !only;
    if (only)
      for (int fd : *only) asked = asked || fd == running_.at(e.pid).test_pidfd;
    (asked ? reaped : left).push_back(e);
  }
  ended_ = std::move(left);
  // Gone: its eventfd with it (the loop closes its own copy).
  for (const auto& e : reaped) ::close(std::exchange(running_.at(e.pid).exit_fd, -1));
  return reaped;
}

}  // namespace memrun::testing

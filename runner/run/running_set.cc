// The tests running at once (see running_set.h).
#include "runner/run/running_set.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>

#include "runner/base/files.h"

namespace memrun {

void RunningSet::add(uint64_t serial, size_t index, std::unique_ptr<RunningTest> test) {
  slots_.push_back({serial, index, false, std::move(test)});
}

std::unique_ptr<RunningTest> RunningSet::remove(uint64_t serial, size_t* index) {
  for (auto it = slots_.begin(); it != slots_.end(); ++it) {
    if (it->serial != serial) continue;
    auto test = std::move(it->test);
    *index = it->index;
    slots_.erase(it);
    return test;
  }
  return nullptr;
}

bool RunningSet::starting() const {
  for (const auto& s : slots_)
    if (s.test->starting()) return true;
  return false;
}

RunningTest* RunningSet::find(uint64_t serial) {
  for (auto& s : slots_)
    if (s.serial == serial) return s.test.get();
  return nullptr;
}

void RunningSet::take_moves(EscapeWatch* watch) {
  if (!watch) return;
  watch->read([&](uint64_t serial, int task, const std::string& where) {
    if (RunningTest* test = find(serial)) test->moved_out(task, where);
  });
}

Clock::time_point RunningSet::next_deadline(Clock::time_point next) const {
  for (const auto& s : slots_) {
    next = std::min({next, s.test->deadline(), s.test->next_sample(), s.test->next_settle()});
    if (s.test->grace_end()) next = std::min(next, *s.test->grace_end());
  }
  return next;
}

void RunningSet::on_timers(Clock::time_point now) {
  for (auto& s : slots_) {
    RunningTest& t = *s.test;
    if (t.exited() || t.starting()) continue;
    if (t.deadline() <= now) t.time_out();
    if (t.grace_end() && *t.grace_end() <= now) t.kill_now();
    if (t.next_sample() <= now) t.sample();
  }
}

void RunningSet::interrupt(bool first, std::chrono::milliseconds grace) {
  for (auto& s : slots_) {
    if (s.test->exited()) continue;
    if (first) s.test->interrupt(grace);
    else s.test->kill_now();
  }
}

std::vector<Progress> RunningSet::progress() const {
  std::vector<Progress> progress;
  for (const auto& s : slots_) progress.push_back({&s.test->planned(), s.test->elapsed_s(), s.test->current()});
  return progress;
}

bool RunningSet::finish_exited(const Clock& clock, KernelLog& kernel_log, Launcher& launcher, Admission& admission,
                               bool fail_fast, const Done& done) {
  bool stop = false;
  reap(launcher);
  find_orphans_outside();  // before a test's figures are read
  auto now = clock.now();
  for (auto it = slots_.begin(); it != slots_.end();) {
    RunningTest& t = *it->test;
    bool settled = t.exited() && t.next_settle() <= now && t.settle(kernel_log);
    // With fail-fast, the next test waits for this one's verdict.
    if (t.released() && !it->released && (settled || !fail_fast)) {
      admission.ended(t.planned().test->memory, t.planned().test->order.slots);
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
  reap(launcher);  // what the cleanup killed: the tests' orphans
  return stop;
}

void RunningSet::abandon() {
  for (auto& s : slots_) s.test->abandon();
  slots_.clear();
}

// Collects every child that exited: the tests' main processes (their
// status goes to their test) and the orphans they left (memrun is their
// subreaper), so that no zombie outlives the run (the last turn's reap
// comes when nothing starts).
void RunningSet::reap(Launcher& launcher) {
  // While a test starts on the launcher's thread, its process (whose pid
  // the loop does not know yet) must not be taken by wait4(-1): each known
  // test's process is reaped through its pidfd, and the rest (orphans)
  // wait for a turn with no start. Otherwise one wait4(-1) per turn.
  std::vector<int> pidfds;
  for (auto& s : slots_)
    if (s.test->pidfd() >= 0) pidfds.push_back(s.test->pidfd());
  for (const auto& ended : launcher.reap(starting() ? &pidfds : nullptr))
    for (auto& s : slots_)
      if (s.test->pid() == ended.pid) s.test->child_exited(ended.status, ended.usage);
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
void RunningSet::find_orphans_outside() {
  bool ending = false;
  for (const auto& s : slots_) ending = ending || (s.test->killing() && s.test->orphans_reach_memrun());
  if (!ending) return;
  for (int pid : child_processes(::getpid())) {
    int session = session_of(pid);
    for (auto& s : slots_)
      if (s.test->killing() && s.test->orphans_reach_memrun() && s.test->pid() == session && pid != session)
        s.test->check_escaped(pid, ::getpid());
  }
}

}  // namespace memrun

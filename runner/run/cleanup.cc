#include "runner/run/cleanup.h"

#include <errno.h>

#include <algorithm>

#include "cgroup/error.h"
#include "runner/run/running_test.h"

namespace memrun {

bool kill_step(cgroup::Group& group, Observation& o) {
  try {
    return group.kill_step();
  } catch (const cgroup::Failure& e) {
    // Tried again on the loop's timer, up to the cleanup's bound; then the
    // removal says what is left. Never the test's verdict.
    if (o.cleanup_error.empty()) o.cleanup_error = e.what();
    return false;
  }
}

Cleanup::Cleanup(const Parts& parts) : parts_(parts) {
  auto now = parts_.context.clock->now();
  give_up_ = now + std::chrono::seconds(2);
  next_ = now;
}

void Cleanup::after(std::chrono::microseconds delay) {
  // Backing off from 0.5 ms to 16 ms: an exiting process is usually gone
  // within a millisecond, a large one may take tens of them.
  backoff_ = backoff_.count() == 0 ? delay : std::min(backoff_ * 2, std::chrono::microseconds(16000));
  next_ = parts_.context.clock->now() + backoff_;
}

bool Cleanup::step(KernelLog& kernel_log) {
  auto now = parts_.context.clock->now();
  switch (step_) {
    case Step::killing:
      // Whatever the test left running (daemons, setsid'd grandchildren)
      // dies with it; the run's reaper collects them (memrun is their
      // subreaper). Past the bound, what remains is reported by the removal.
      parts_.escapes.kill();
      if (!kill_step(*parts_.group, parts_.observed) && now < give_up_) {
        after(std::chrono::microseconds(500));
        return false;
      }
      // Nothing of the test runs any more: its figures come on the next
      // turn, after the loop may have started the next test (released()
      // says it can, unless shmem is still charged), so that they are read
      // while that one starts and runs. Its results file goes first.
      parts_.results.read(*parts_.planned.test, parts_.observed);
      shm_draining_ = parts_.results.shmem_left(parts_.group->usage().breakdown.shmem) > 0;
      step_ = Step::reading;
      next_ = now;
      return false;
    case Step::reading:
      read_once_drained(kernel_log, now);
      return false;
    case Step::removing:
      remove_group();
      if (step_ == Step::removing) return false;
      [[fallthrough]];
    case Step::awaiting_victims:
      // An OOM kill the kernel has not logged yet: the record waits (never
      // the loop) for its victims, for up to 200 ms; without them the kill
      // is still counted.
      if (step_ == Step::awaiting_victims && kernel_log.readable()) {
        parts_.observed.oom_victims = kernel_log.oom_kills(log_name_, parts_.escapes.seen(), parts_.t0);
        oom_at_limit();
        if (parts_.observed.oom_victims.empty() && now < give_up_) {
          next_ = now + std::chrono::milliseconds(10);
          return false;
        }
      }
      step_ = Step::done;
      next_ = Clock::time_point::max();
      return true;
    case Step::done: return true;
  }
  return true;
}

void Cleanup::read_once_drained(KernelLog& kernel_log, Clock::time_point now) {
  // The test's private /dev/shm goes with its mount namespace, which the
  // kernel releases after the last process has left the group (mounts are
  // put asynchronously on exit): shmem still charged now may be on its way
  // out. It gets up to 100 ms before it is reported as left in a shared
  // tmpfs.
  cgroup::Final final = parts_.group->finish();
  final.breakdown.shmem = parts_.results.shmem_left(final.breakdown.shmem);
  if (final.breakdown.shmem > 0) {
    if (!shm_drain_until_) shm_drain_until_ = now + std::chrono::milliseconds(100);
    if (now < *shm_drain_until_) {
      next_ = now + std::chrono::milliseconds(2);
      return;
    }
  }
  shm_draining_ = false;
  read_figures(kernel_log, std::move(final));
  step_ = Step::removing;
  backoff_ = {};
  give_up_ = now + std::chrono::seconds(2);
  // The removal comes on the next turn too: rmdir and the record run
  // while the next test does, not before it.
  next_ = now;
  // A vessel's case waits for its verdict in pytest, and the next case
  // after it: its group goes to the leftovers, removed on the loop's timer
  // (what cannot be is said when the run closes, as for any leftover).
  if (parts_.vessel) {
    parts_.context.leftovers->add(std::move(parts_.group));
    bool wait_for_victims = parts_.observed.kernel.oom_kills > 0 && parts_.observed.oom_victims.empty();
    step_ = wait_for_victims ? Step::awaiting_victims : Step::done;
    give_up_ = now + std::chrono::milliseconds(200);
  }
}

void Cleanup::read_figures(KernelLog& kernel_log, cgroup::Final final) {
  Observation& o = parts_.observed;
  if (parts_.out && parts_.err) {
    parts_.out->finish();
    parts_.err->finish();
    o.stdout_bytes = parts_.out->bytes();
    o.stderr_bytes = parts_.err->bytes();
    o.log_discarded_bytes = parts_.out->discarded() + parts_.err->discarded();
    for (const LogRelay* relay : {parts_.out.get(), parts_.err.get()})
      if (!relay->error().empty()) o.log_error += (o.log_error.empty() ? "" : "; ") + relay->error();
  }
  o.kernel = std::move(final);
  o.kernel.escaped += parts_.escapes.count();
  if (o.escaped_to.empty()) o.escaped_to = parts_.escapes.first_place();
  // Where the kernel does not count a kill in a sub-group in the group
  // itself (v1), the test may remove the sub-group and its count with it:
  // there the log is read for every test, and the kills it names count.
  // (The log is read once for all tests: each call reads only what is new,
  // one read(2) when nothing is.)
  if (o.kernel.oom_kills > 0 || !parts_.group->counts_kills_below()) {
    log_name_ = parts_.group->kernel_path();
    limit_paths_ = parts_.group->limit_paths();
    o.oom_victims = kernel_log.oom_kills(log_name_, parts_.escapes.seen(), parts_.t0);
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
void Cleanup::oom_at_limit() {
  const auto& victims = parts_.observed.oom_victims;
  if (victims.empty()) return;
  bool at_limit = false;
  for (const auto& kill : victims) {
    if (kill.oom_memcg.empty()) return;
    bool memruns = std::find(limit_paths_.begin(), limit_paths_.end(), kill.oom_memcg) != limit_paths_.end();
    bool below = kill.oom_memcg.rfind(log_name_ + "/", 0) == 0 && !memruns;
    bool global = kill.oom_memcg == "/";
    bool lowered = memruns && kill.limit_bytes != 0 && kill.limit_bytes + 4096 < parts_.planned.test->memory;
    at_limit = at_limit || (!below && !global && !lowered);
  }
  parts_.observed.kernel.oom_at_limit = at_limit;
}

void Cleanup::remove_group() {
  bool gone = false;
  try {
    gone = parts_.group->remove_step();
    if (!gone && parts_.context.clock->now() >= give_up_) {
      errno = EBUSY;
      cgroup::fail_errno(cgroup::Failure::Kind::system, "cannot remove cgroup " + parts_.group->path(), parts_.group->path());
    }
  } catch (const cgroup::Failure& e) {
    // Given up on: said in the report, never in place of it. The loop keeps
    // trying to remove it on its timer until the run ends (Leftovers).
    parts_.observed.cleanup_error += (parts_.observed.cleanup_error.empty() ? "" : "; ") + std::string(e.what());
    parts_.context.leftovers->add(std::move(parts_.group));
    gone = true;
  }
  if (!gone) {
    after(std::chrono::microseconds(1000));
    return;
  }
  parts_.group.reset();
  bool wait_for_victims = parts_.observed.kernel.oom_kills > 0 && parts_.observed.oom_victims.empty();
  step_ = wait_for_victims ? Step::awaiting_victims : Step::done;
  give_up_ = parts_.context.clock->now() + std::chrono::milliseconds(200);
}

}  // namespace memrun

// Which test starts when (see start_queue.h).
#include "runner/run/start_queue.h"

#include <algorithm>
#include <utility>

#include "cgroup/error.h"
#include "runner/base/error.h"

namespace memrun {

TestRecord unstarted(const PlannedTest& p, Ending ending, const std::string& reason) {
  Observation o;
  o.ending = ending;
  o.start_error = reason;
  return make_record(p, std::move(o));
}

void StartQueue::offer(const std::vector<const PlannedTest*>& tests, const std::vector<size_t>& order,
                       Admission& admission, const Done& done, const std::string& run_dir) {
  tests_ = &tests;
  run_dir_ = run_dir;
  admission_ = &admission;
  done_ = done;
  queue_.clear();
  state_.assign(tests.size(), State::queued);
  admitted_ = 0;
  locks_.clear();
  serial_ = false;
  for (size_t i : order) {
    const TestSpec& spec = *tests[i]->test;
    if (spec.disabled || !spec.skipped.empty()) {
      done(i, unstarted_at(i, Ending::not_started));
      continue;
    }
    std::string refusal = !spec.not_runnable.empty() ? spec.not_runnable : admission.refusal(spec.memory);
    if (refusal.empty()) queue_.push_back(i);
    else done(i, unstarted_at(i, Ending::not_started, refusal));
  }
}

bool StartQueue::start_what_fits(const std::function<bool(size_t)>& start) {
  while (!cold_.empty()) {
    size_t index = cold_.front();
    cold_.pop_front();
    if (start(index)) return true;
  }
  // Again while a pass ended a test without running it (a setup's users
  // not run, a start that failed): what waited for it may start now.
  for (uint64_t before = ~ended_count_; before != ended_count_;) {
    before = ended_count_;
    if (start_pass(start)) return true;
  }
  // Nothing admitted, yet what is queued may not start: it waits for tests
  // that will never end. The spec refuses such cycles; should one pass,
  // its tests are reported, never left out of the report.
  if (admitted_ == 0)
    while (!queue_.empty()) {
      size_t index = queue_.front();
      queue_.pop_front();
      done_(index, unstarted_at(index, Ending::not_started,
                                "not run: it waits for tests that wait for it (ctest's DEPENDS or fixtures)"));
    }
  return false;
}

bool StartQueue::start_pass(const std::function<bool(size_t)>& start) {
  // Every slot of -j taken: no test can start. (Checked before each step of
  // the walk, which would otherwise read the whole queue on every turn of
  // the loop: quadratic in a suite's size at -j 1.)
  for (auto it = queue_.begin(); it != queue_.end() && !serial_ && !admission_->full();) {
    const PlannedTest& p = *(*tests_)[*it];
    std::string why_not_run;
    Turn turn = turn_of(*it, &why_not_run);
    // A serial test waits for the running ones to end; none behind it
    // starts meanwhile, or it might wait for ever.
    if (turn == Turn::alone) break;
    if (turn == Turn::later) {
      ++it;
      continue;
    }
    if (turn == Turn::never) {
      size_t index = *it;
      it = queue_.erase(it);
      done_(index, unstarted_at(index, Ending::not_started, why_not_run));
      continue;
    }
    if (!admission_->may_start(p.test->memory, p.test->order.slots)) {
      ++it;
      continue;
    }
    size_t index = *it;
    it = queue_.erase(it);
    admission_->started(p.test->memory, p.test->order.slots);
    admit(index);
    if (!p.test->inputs.empty()) {
      evicting_.insert(index);
      evictor_.post(index, p.test->inputs);
      continue;
    }
    if (start(index)) return true;
  }
  return false;
}

StartQueue::Turn StartQueue::turn_of(size_t index, std::string* why_not_run, bool once_free) const {
  const PlannedTest& p = *(*tests_)[index];
  if (p.waits) {
    for (size_t a : p.waits->after)
      if (state_[a] == State::queued || state_[a] == State::admitted) return Turn::later;
    for (size_t n : p.waits->needs)
      if (state_[n] == State::failed) {
        *why_not_run = "not run: the fixture setup test '" + std::string((*tests_)[n]->name()) +
                       "' failed; ctest reports it Not Run (Failed test dependencies)";
        return Turn::never;
      }
  }
  if (once_free) return Turn::now;
  const Order& o = p.test->order;
  if (o.serial && admitted_ > 0) return Turn::alone;
  for (const auto& lock : o.locks)
    if (locks_.count(lock)) return Turn::later;
  return Turn::now;
}

void StartQueue::admit(size_t index) {
  const Order& o = (*tests_)[index]->test->order;
  state_[index] = State::admitted;
  ++admitted_;
  locks_.insert(o.locks.begin(), o.locks.end());
  serial_ = o.serial;
}

void StartQueue::ended(size_t index, bool failed) {
  ++ended_count_;
  if (state_[index] == State::admitted) {
    --admitted_;
    for (const auto& lock : (*tests_)[index]->test->order.locks) locks_.erase(locks_.find(lock));
    if ((*tests_)[index]->test->order.serial) serial_ = false;
  }
  state_[index] = failed ? State::failed : State::ended;
}

bool StartQueue::take_evicted() {
  bool all = true;
  for (auto& d : evictor_.take()) {
    if (!evicting_.erase(d.id)) continue;
    if (d.error.empty()) {
      cold_.push_back(d.id);
      continue;
    }
    const PlannedTest& p = *(*tests_)[d.id];
    const TestSpec& t = *p.test;
    admission_->ended(t.memory, t.order.slots);
    done_(d.id, unstarted_at(d.id, Ending::not_started,
                          p.spec->path + ":" + std::to_string(t.line) + ":" + std::to_string(t.column) + ": " +
                              d.error));
    all = false;
  }
  return all;
}

void StartQueue::make_ahead(const RunContext& context) {
  if (ahead_.group) return;
  // The next test whose turn it is (ctest's order; at -j 1, once the
  // running test ends, as no test's turn is now while one runs): one that
  // waits for others would keep its group unused.
  std::string never;
  bool once_free = admission_->jobs() == 1;
  auto next = std::find_if(queue_.begin(), queue_.end(), [&](size_t i) { return turn_of(i, &never, once_free) == Turn::now; });
  if (next == queue_.end()) return;
  try {
    ahead_ = {*next, RunningTest::make_group(made_test(*(*tests_)[*next], *next, run_dir_), context)};
  } catch (const cgroup::Failure&) {  // made again at its start, where a failure is the test's
  } catch (const Error&) {
  }
}

std::unique_ptr<cgroup::Group> StartQueue::stale_group() {
  if (!ahead_.group || state_[ahead_.index] == State::queued || state_[ahead_.index] == State::admitted) return nullptr;
  return std::move(ahead_.group);
}

std::unique_ptr<cgroup::Group> StartQueue::take_ahead(size_t index) {
  return ahead_.index == index ? std::move(ahead_.group) : nullptr;
}

void StartQueue::stop(bool interrupted) {
  std::vector<size_t> admitted(evicting_.begin(), evicting_.end());
  admitted.insert(admitted.end(), cold_.begin(), cold_.end());
  for (size_t i : admitted) admission_->ended((*tests_)[i]->test->memory, (*tests_)[i]->test->order.slots);
  evicting_.clear();
  cold_.clear();
  if (interrupted) {
    for (size_t i : admitted) done_(i, unstarted_at(i, Ending::not_run));
    for (size_t i : queue_) done_(i, unstarted_at(i, Ending::not_run));
  }
  // The list and its admission were the caller's for this run only.
  queue_.clear();
  tests_ = nullptr;
  admission_ = nullptr;
  done_ = nullptr;
}

}  // namespace memrun

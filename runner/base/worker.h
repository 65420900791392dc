// A thread of its own that does one job at a time, in order, for the run's
// loop: post() queues a job, fd() (an eventfd) becomes readable when one is
// done, take() returns what was done. The loop never waits on it, and its
// destructor never waits either: a job under way ends on the thread, which
// holds the state and then ends too. Signals are the loop's (its
// signalfd): none is delivered on the thread.
#pragma once

#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "runner/base/error.h"

namespace memrun {

template <typename Job, typename Done>
class Worker {
 public:
  explicit Worker(std::function<Done(Job&)> work) : state_(std::make_shared<State>()) {
    state_->fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (state_->fd < 0) throw_errno(Category::system, "eventfd");
    std::thread([state = state_, work = std::move(work)] {
      sigset_t all;
      ::sigfillset(&all);
      ::pthread_sigmask(SIG_BLOCK, &all, nullptr);
      std::unique_lock<std::mutex> lock(state->mutex);
      for (;;) {
        state->wake.wait(lock, [&] { return state->stop || !state->jobs.empty(); });
        if (state->stop) return;
        Job job = std::move(state->jobs.front());
        state->jobs.pop_front();
        lock.unlock();
        Done done = work(job);
        lock.lock();
        state->done.push_back(std::move(done));
        uint64_t one = 1;
        (void)!::write(state->fd, &one, sizeof one);
      }
    }).detach();
  }
  ~Worker() {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stop = true;
    state_->wake.notify_all();
  }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  int fd() const { return state_->fd; }
  void post(Job job) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->jobs.push_back(std::move(job));
    state_->wake.notify_all();
  }
  std::vector<Done> take() {
    uint64_t count;
    (void)!::read(state_->fd, &count, sizeof count);
    std::lock_guard<std::mutex> lock(state_->mutex);
    return std::exchange(state_->done, {});
  }

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable wake;
    std::deque<Job> jobs;
    std::vector<Done> done;
    bool stop = false;
    int fd = -1;
    ~State() {
      if (fd >= 0) ::close(fd);
    }
  };
  std::shared_ptr<State> state_;
};

}  // namespace memrun

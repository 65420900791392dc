// The run loop's time, as a seam: the steady clock, or a fake one that unit
// tests advance (tests/fake_backend.h), so that timeouts, thrash windows
// and cleanup bounds of seconds are tested in milliseconds.
#pragma once

#include <sys/epoll.h>

#include <chrono>

namespace memrun {

class Clock {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  virtual ~Clock() = default;
  virtual time_point now() const = 0;
  /// One wait of the loop: epoll_wait on `epoll` until one of its fds is
  /// ready or `until` comes (time_point::max(): no bound). `timer` is a
  /// timerfd in that set, for the steady clock to arm. Returns what
  /// epoll_wait returns.
  virtual int wait(int epoll, int timer, epoll_event* events, int max, time_point until) = 0;
};

/// CLOCK_MONOTONIC, and a timerfd armed for the nearest deadline.
class SteadyClock final : public Clock {
 public:
  time_point now() const override { return std::chrono::steady_clock::now(); }
  int wait(int epoll, int timer, epoll_event* events, int max, time_point until) override;
};

/// The process's steady clock.
Clock& steady_clock();

}  // namespace memrun

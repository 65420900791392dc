#include "runner/base/clock.h"

#include <sys/timerfd.h>

#include <algorithm>
#include <cstdint>

namespace memrun {

int SteadyClock::wait(int epoll, int timer, epoll_event* events, int max, time_point until) {
  itimerspec spec{};  // zero: disarmed
  if (until != time_point::max()) {
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(until.time_since_epoch()).count();
    ns = std::max<int64_t>(ns, 1);  // steady_clock is CLOCK_MONOTONIC; a zero time would disarm the timer
    spec.it_value.tv_sec = ns / 1000000000;
    spec.it_value.tv_nsec = ns % 1000000000;
  }
  ::timerfd_settime(timer, TFD_TIMER_ABSTIME, &spec, nullptr);
  return ::epoll_wait(epoll, events, max, -1);
}

Clock& steady_clock() {
  static SteadyClock clock;
  return clock;
}

}  // namespace memrun

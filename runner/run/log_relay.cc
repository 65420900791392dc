#include "runner/run/log_relay.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include <cerrno>
#include <cstring>

#include "runner/base/error.h"
#include "runner/base/units.h"

namespace memrun {
namespace {
constexpr size_t kEchoQueue = 8 << 20;  // see LogRelay::echo_to
}  // namespace

LogRelay::LogRelay(const std::string& path, uint64_t cap) : path_(path), cap_(cap) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw_errno(Category::system, "pipe");
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  // Only memrun's end is non-blocking: the test writes as to any pipe.
  ::fcntl(read_fd_, F_SETFL, O_NONBLOCK);
}

LogRelay::~LogRelay() {
  close_reader();
  for (int fd : {write_fd_, file_fd_, null_fd_})
    if (fd >= 0) ::close(fd);
}

// A closed descriptor leaves an epoll set only once no other descriptor
// shares its file, and a test's child holds a copy of memrun's until its
// exec: still watched, the ended pipe would wake the loop on every turn
// until then. So the set forgets it first.
void LogRelay::close_reader() {
  if (read_fd_ < 0) return;
  if (epoll_ >= 0) ::epoll_ctl(epoll_, EPOLL_CTL_DEL, read_fd_, nullptr);
  ::close(read_fd_);
  read_fd_ = -1;
}

void LogRelay::close_writer() {
  if (write_fd_ >= 0) ::close(write_fd_);
  write_fd_ = -1;
}

int LogRelay::sink() {
  bool keep = error_.empty() && (cap_ == 0 || kept_ < cap_);
  if (keep && file_fd_ < 0) {
    file_fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (file_fd_ >= 0) return file_fd_;
    fail();
    keep = false;
  }
  if (keep) return file_fd_;
  if (null_fd_ < 0) null_fd_ = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  return null_fd_;
}

void LogRelay::fail() {
  // A run folder that cannot take the log (a full disk) costs the log, not
  // the run: the test goes on writing into /dev/null, and the verdict is the
  // kernel's either way.
  error_ = std::string("cannot write the log ") + path_ + ": " + std::strerror(errno) + "; its output was discarded";
}

void LogRelay::keep(const char* data, size_t n) {
  int to = sink();
  uint64_t keep = to != file_fd_ ? 0 : cap_ ? std::min<uint64_t>(n, cap_ - kept_) : static_cast<uint64_t>(n);
  if (keep && ::write(to, data, keep) != static_cast<ssize_t>(keep)) {
    fail();
    keep = 0;
  }
  kept_ += keep;
  discarded_ += static_cast<uint64_t>(n) - keep;
}

void LogRelay::echo(const char* data, size_t n) {
  if (echo_fd_ < 0) return;
  size_t room = kEchoQueue > echo_pending_.size() ? kEchoQueue - echo_pending_.size() : 0;
  echo_pending_.append(data, std::min(n, room));
  echo_dropped_ += n - std::min(n, room);
  flush_echo(0);
}

void LogRelay::flush_echo(int wait_ms) {
  // One deadline for the whole flush, however slowly the reader takes it.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  while (echo_fd_ >= 0 && !echo_pending_.empty()) {
    // Only what the terminal or pipe takes now: a write after POLLOUT of
    // at most PIPE_BUF bytes does not block on a pipe.
    pollfd p{echo_fd_, POLLOUT, 0};
    int ready;
    do {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      ready = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
    } while (ready < 0 && errno == EINTR);
    if (ready <= 0) return;
    if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) {
      echo_fd_ = -1;  // the reader is gone (memrun | head): nothing more to show
      return;
    }
    ssize_t n = ::write(echo_fd_, echo_pending_.data(), std::min<size_t>(echo_pending_.size(), PIPE_BUF));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) {
      echo_fd_ = -1;
      return;
    }
    echo_pending_.erase(0, static_cast<size_t>(n));
  }
}

bool LogRelay::pump() {
  if (read_fd_ < 0) return false;
  if (echo_fd_ >= 0 || copy_limit_) {
    // Shown or copied, and kept: read once, written twice (splice would
    // take the bytes from the pipe for the file alone).
    for (;;) {
      char buffer[65536];
      ssize_t n = ::read(read_fd_, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return true;
      if (n <= 0) return end();
      keep(buffer, static_cast<size_t>(n));
      echo(buffer, static_cast<size_t>(n));
      copy_.append(buffer, std::min(static_cast<size_t>(n), copy_limit_ - copy_.size()));
    }
  }
  if (file_fd_ < 0 && null_fd_ < 0) {
    // The first bytes decide whether a file is needed at all: a quiet test
    // costs none (creating a file is most of a test's cost on some disks).
    char first[4096];
    ssize_t n;
    do {
      n = ::read(read_fd_, first, sizeof first);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && errno == EAGAIN) return true;
    if (n <= 0) return end();
    keep(first, static_cast<size_t>(n));
  }
  for (;;) {
    // splice(2) moves the pipe's pages into the file (or /dev/null) without
    // copying them through memrun: its memory stays flat whatever the test
    // writes.
    int to = sink();
    bool keep = to == file_fd_;
    size_t room = keep && cap_ ? static_cast<size_t>(cap_ - kept_) : size_t{1} << 20;
    ssize_t n = ::splice(read_fd_, nullptr, to, nullptr, std::min(room, size_t{1} << 20),
                         SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
    if (n > 0) {
      (keep ? kept_ : discarded_) += static_cast<uint64_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    if (n < 0 && keep) {
      fail();  // from now on into /dev/null
      continue;
    }
    return end();  // 0: every writer closed the pipe
  }
}

bool LogRelay::end() {
  close_reader();
  return false;
}

void LogRelay::finish() {
  close_writer();
  pump();
  // A writer outside the test's group (it moved itself out) keeps the
  // pipe open; memrun does not wait for it.
  close_reader();
  // The test is over: what is left to show may wait for the reader a while.
  flush_echo(2000);
  if (echo_fd_ >= 0 && (echo_dropped_ || !echo_pending_.empty())) {
    std::string note = "\n[memrun: " + format_size(echo_dropped_ + echo_pending_.size()) +
                       " of this output were not shown (the reader did not take them in time); the log " + path_ +
                       " has it all]\n";
    (void)!::write(echo_fd_, note.data(), note.size());
  }
  echo_pending_.clear();
  if (discarded_ > 0 && error_.empty()) {
    std::string note = "\n[memrun: this log was capped at " + format_size(cap_) + "; the test wrote " +
                       format_size(kept_ + discarded_) + ", the last " + format_size(discarded_) +
                       " were discarded (raise the cap with --max-log)]\n";
    (void)!::write(file_fd_, note.data(), note.size());
  }
  for (int* fd : {&file_fd_, &null_fd_}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

}  // namespace memrun

#include "runner/relay.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "cgroup/error.h"
#include "runner/units.h"

namespace memrun {

LogRelay::LogRelay(const std::string& path, uint64_t cap) : path_(path), cap_(cap) {
  file_fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (file_fd_ < 0) throw_errno(kExitUsage, "cannot write the log " + path);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    ::close(file_fd_);
    throw_errno(1, "pipe");
  }
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  // Only memrun's end is non-blocking: the test writes as to any pipe.
  ::fcntl(read_fd_, F_SETFL, O_NONBLOCK);
}

LogRelay::~LogRelay() {
  for (int fd : {read_fd_, write_fd_, file_fd_, null_fd_})
    if (fd >= 0) ::close(fd);
}

void LogRelay::close_writer() {
  if (write_fd_ >= 0) ::close(write_fd_);
  write_fd_ = -1;
}

bool LogRelay::pump() {
  if (read_fd_ < 0) return false;
  for (;;) {
    // splice(2) moves the pipe's pages into the file (or /dev/null) without
    // copying them through memrun: its memory stays flat whatever the test
    // writes.
    bool keep = cap_ == 0 || kept_ < cap_;
    if (!keep && null_fd_ < 0) null_fd_ = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    size_t room = keep && cap_ ? static_cast<size_t>(cap_ - kept_) : size_t{1} << 20;
    ssize_t n = ::splice(read_fd_, nullptr, keep ? file_fd_ : null_fd_, nullptr, std::min(room, size_t{1} << 20),
                         SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
    if (n > 0) {
      (keep ? kept_ : discarded_) += static_cast<uint64_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    // 0: every writer closed the pipe. Any other error (a full disk for the
    // log): stop relaying; the test then gets EPIPE/SIGPIPE like any
    // program whose reader went away.
    ::close(read_fd_);
    read_fd_ = -1;
    return false;
  }
}

void LogRelay::finish() {
  close_writer();
  pump();
  if (read_fd_ >= 0) {
    // A writer outside the test's group (it moved itself out) keeps the
    // pipe open; memrun does not wait for it.
    ::close(read_fd_);
    read_fd_ = -1;
  }
  if (discarded_ > 0) {
    std::string note = "\n[memrun: this log was capped at " + format_size(cap_) + "; the test wrote " +
                       format_size(kept_ + discarded_) + ", the last " + format_size(discarded_) +
                       " were discarded (raise the cap with --max-log)]\n";
    (void)!::write(file_fd_, note.data(), note.size());
  }
  ::close(file_fd_);
  file_fd_ = -1;
  if (null_fd_ >= 0) ::close(null_fd_);
  null_fd_ = -1;
}

}  // namespace memrun

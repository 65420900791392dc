// A test's stdout or stderr, relayed from a pipe into its log file up to a
// cap. With the file itself as the test's stdout, a test writing without end
// would fill the disk; through a pipe memrun decides what is kept, and the
// test is only slowed when memrun is busy (the pipe's 64 KiB buffer).
#pragma once

#include <cstdint>
#include <string>

namespace memrun {

class LogRelay {
 public:
  /// Creates the pipe; the log file at `path` is made (truncated) when the
  /// first byte comes, so that a quiet test costs no file. `cap`: bytes kept
  /// in the file, 0 for no cap.
  LogRelay(const std::string& path, uint64_t cap);
  ~LogRelay();
  LogRelay(const LogRelay&) = delete;
  LogRelay& operator=(const LogRelay&) = delete;

  /// The end the test writes to; close it (close_writer) once the test has
  /// been started, so that the pipe ends when the test's processes are gone.
  int writer() const { return write_fd_; }
  void close_writer();
  /// The end memrun watches (non-blocking); -1 once the pipe has ended.
  int reader() const { return read_fd_; }

  /// Moves what the pipe holds into the file (or, past the cap, discards
  /// it), without blocking. Returns false when the pipe has ended: every
  /// writer closed it.
  bool pump();
  /// After the test's processes are gone: pumps until the pipe is empty,
  /// closes it and notes in the file what the cap discarded.
  void finish();

  /// Also shows what the test writes on `fd` (memrun's own stdout or
  /// stderr: `memrun exec` passes its command's output through as it
  /// runs). Never blocks the run: what `fd` cannot take at once waits in
  /// memory (up to 8 MiB, past which it is not shown; the log has it all).
  void echo_to(int fd) { echo_fd_ = fd; }
  /// Also keeps the first `limit` bytes in memory (copy()): what a verdict
  /// is read from (a tool's expressions over the output), where no other
  /// test can rewrite it as it could the file. The bytes then pass through
  /// memrun (read, not spliced).
  void copy_up_to(size_t limit) { copy_limit_ = limit; }
  const std::string& copy() const { return copy_; }
  /// The epoll set that watches reader(): it forgets the pipe before the
  /// relay closes it (see close_reader).
  void watched_by(int epoll) { epoll_ = epoll; }

  uint64_t bytes() const { return kept_ + discarded_; }  ///< what the test wrote
  uint64_t discarded() const { return discarded_; }      ///< what the cap dropped
  /// Why the log file could not be written (its output was then discarded);
  /// empty when it could.
  const std::string& error() const { return error_; }

 private:
  int sink();  // the file, made on first use; /dev/null past the cap or on error
  void fail();  // records why the file cannot be written (errno)
  bool end();   // the pipe ended: closes it, returns false
  void close_reader();
  void keep(const char* data, size_t n);  // into the file, up to the cap
  void echo(const char* data, size_t n);  // queued for echo_fd_
  void flush_echo(int wait_ms);           // what echo_fd_ takes, waiting up to wait_ms per chunk

  std::string error_;
  std::string path_;
  uint64_t cap_, kept_ = 0, discarded_ = 0;
  int read_fd_ = -1, write_fd_ = -1, file_fd_ = -1, null_fd_ = -1;
  int echo_fd_ = -1;
  int epoll_ = -1;
  std::string echo_pending_;
  uint64_t echo_dropped_ = 0;
  size_t copy_limit_ = 0;
  std::string copy_;
};

}  // namespace memrun

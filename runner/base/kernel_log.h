// Which process the kernel's OOM killer chose, from the kernel log
// (/dev/kmsg): memory.events counts kills but does not say who died.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <set>
#include <string>
#include <vector>

namespace memrun {

/// One OOM kill, as the kernel logged it.
struct OomKill {
  int pid = 0;
  std::string name;  ///< the task's comm
  uint64_t anon_rss = 0, file_rss = 0, shmem_rss = 0;  ///< bytes, at the kill
  /// The group whose limit was hit (`oom_memcg=`, below its hierarchy's
  /// root; "/" when the machine ran out, `global_oom`), or "" when the
  /// kernel left that line out (rate-limited).
  std::string oom_memcg;
  /// That group's limit at the kill (the lower of its `memory:` and
  /// `memory+swap:` limits in the same report), or 0 where the report was
  /// left out: a limit the test lowered for a moment shows here.
  uint64_t limit_bytes = 0;
  bool operator==(const OomKill&) const = default;
};

/// The kernel log from the moment it is opened. Reading /dev/kmsg needs
/// root where kernel.dmesg_restrict=1 (Debian's default); without it, no
/// kill is ever found and reports only count them.
class KernelLog {
 public:
  KernelLog();
  virtual ~KernelLog();
  KernelLog(const KernelLog&) = delete;
  KernelLog& operator=(const KernelLog&) = delete;
  /// The OOM kills logged since the log was opened in the cgroup (or one of
  /// its sub-groups) whose path is `group_suffix` (below its hierarchy's
  /// root, as Group::kernel_path gives it) or, without a leading '/', ends
  /// with it (e.g. "memrun-RUN/001-test"); each reported once. `known`: pids
  /// memrun saw in that group, and `since`, when the group's test started:
  /// a kill of a known pid logged since then is the test's even without
  /// the line that names the group, which the kernel leaves out past ten
  /// reports in five seconds (its OOM report is rate-limited: "oom_kill_process:
  /// N callbacks suppressed"; the "Killed process" line always comes).
  /// Reads what is there and returns at once: the kernel may log a kill a
  /// moment after the victim's exit was seen, so a caller that found none
  /// asks again later (the run's loop does, for up to 200 ms).
  virtual std::vector<OomKill> oom_kills(const std::string& group_suffix, const std::set<int>& known = {},
                                         std::chrono::steady_clock::time_point since = {});
  /// False when the log cannot be read (no root where dmesg is restricted):
  /// no kill will ever be found, so there is nothing to wait for.
  virtual bool readable() const { return fd_ >= 0; }

 protected:
  /// For a fake log (tests/fake_backend.h): opens nothing.
  struct NoDevice {};
  explicit KernelLog(NoDevice) {}

 private:
  static constexpr size_t kMaxPending = 4096;
  int fd_ = -1;
  struct Line {
    int64_t usec;  // when the kernel logged it (its clock, since boot)
    std::string message;
  };
  std::deque<Line> pending_;  // kill lines not yet claimed by a test
};

/// Parses kernel log messages (one per line, without the "prio,seq,..;"
/// prefix) into the kills of `group_suffix`, or, when no line names that
/// group, of the `known` pids that no line names as another group's (see
/// KernelLog::oom_kills); the seam for tests.
std::vector<OomKill> parse_oom_kills(const std::vector<std::string>& messages, const std::string& group_suffix,
                                     const std::set<int>& known = {});

}  // namespace memrun

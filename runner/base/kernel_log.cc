#include "runner/base/kernel_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <map>
#include <set>

namespace memrun {

KernelLog::KernelLog() {
  fd_ = ::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ >= 0) ::lseek(fd_, 0, SEEK_END);  // only what happens from now on
}

KernelLog::~KernelLog() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<OomKill> KernelLog::oom_kills(const std::string& group_suffix, const std::set<int>& known,
                                          std::chrono::steady_clock::time_point since) {
  if (fd_ < 0) return {};
  // One pass over what the kernel logged so far, never a wait: the run's
  // loop asks again a little later when a kill is not logged yet.
  char record[8192];
  for (;;) {
    // One read, one record: "prio,seq,usec,flags;message\n".
    ssize_t n = ::read(fd_, record, sizeof record - 1);
    if (n < 0 && errno == EPIPE) continue;  // overwritten records: go on
    if (n <= 0) break;
    std::string r(record, static_cast<size_t>(n));
    auto semi = r.find(';');
    if (semi == std::string::npos) continue;
    // The kernel's own records have facility 0 (LOG_KERN). A record
    // written to /dev/kmsg gets LOG_USER unless its "<N>" prefix names
    // another facility, never 0 (devkmsg_write(), 3.5+): a test that
    // writes a kill's lines there (a root test may) is not believed.
    unsigned prio = 0;
    long long usec = 0;
    if (std::sscanf(r.c_str(), "%u,%*u,%lld", &prio, &usec) != 2 || (prio >> 3) != 0) continue;
    auto end = r.find('\n', semi);
    std::string m = r.substr(semi + 1, end == std::string::npos ? std::string::npos : end - semi - 1);
    // Only the lines a kill is made of are kept (the two below, and the
    // limited group's counters before them), for whichever test asks:
    // tests running at once read one log.
    if (m.rfind("oom-kill:", 0) == 0 || m.find("Killed process ") != std::string::npos ||
        m.rfind("memory: usage ", 0) == 0 || m.rfind("memory+swap: usage ", 0) == 0)
      pending_.push_back({usec, m});
  }
  while (pending_.size() > kMaxPending) pending_.pop_front();
  // The kernel stamps records with its local clock, which keeps within a
  // fraction of a second of CLOCK_MONOTONIC (steady_clock): a second of
  // margin, so that a pid reused since an older test's kill is not taken.
  const int64_t from =
      std::chrono::duration_cast<std::chrono::microseconds>(since.time_since_epoch()).count() - 1000000;
  std::vector<std::string> messages;
  for (const auto& l : pending_)
    if (l.usec >= from) messages.push_back(l.message);
  auto kills = parse_oom_kills(messages, group_suffix, known);
  // Claimed: drop this group's lines so that the log kept stays small.
  if (!kills.empty())
    std::erase_if(pending_, [&](const Line& l) {
      if (l.message.find(group_suffix) != std::string::npos) return true;
      for (const auto& k : kills)
        if (l.message.find("Killed process " + std::to_string(k.pid) + " ") != std::string::npos) return true;
      return false;
    });
  return kills;
}

// Long: the kernel's two lines per kill read in two passes, each beside the
// format and the rate limit it depends on.
std::vector<OomKill> parse_oom_kills(const std::vector<std::string>& messages, const std::string& group_suffix,
                                     const std::set<int>& known) {
  // The kernel logs, per kill (mm/oom_kill.c, 5.0+):
  //   oom-kill:constraint=...,oom_memcg=PATH,task_memcg=PATH,task=NAME,pid=N,uid=U
  //   Memory cgroup out of memory: Killed process N (NAME) total-vm:..kB,
  //     anon-rss:..kB, file-rss:..kB, shmem-rss:..kB, ...
  // The first line is part of the report dump_header() writes, rate-limited
  // to ten in five seconds; the second always comes. Before the first, the
  // same report gives the limited group's counters (mem_cgroup_print_oom_meminfo):
  //   memory: usage 8192kB, limit 8192kB, failcnt 24
  //   memory+swap: usage 8192kB, limit 9007199254740988kB, failcnt 0
  // (reports are written one at a time, under oom_lock).
  std::set<int> ours, others, reported;
  std::map<int, std::string> limit_group;  // pid -> oom_memcg=
  std::map<int, uint64_t> limit_at_kill;   // pid -> that group's limit
  uint64_t limit = 0;                      // of the report being read
  std::vector<OomKill> kills;
  for (const auto& m : messages) {
    unsigned long long kb = 0;
    if (std::sscanf(m.c_str(), "memory: usage %*ukB, limit %llukB", &kb) == 1 ||
        std::sscanf(m.c_str(), "memory+swap: usage %*ukB, limit %llukB", &kb) == 1) {
      if (m.rfind("memory: ", 0) == 0 || kb * 1024 < limit) limit = kb * 1024;
      continue;
    }
    if (m.rfind("oom-kill:", 0) == 0) {
      // The group's name may hold a comma (a test's name does): look for
      // the whole path (or its end) right before ",task=", not for the
      // next comma. The victim may sit in a sub-group (a sealed test's
      // leaf, one the test made): the path followed by "/" is ours too.
      auto memcg = m.find("task_memcg="), pid = m.rfind(",pid=");
      if (memcg == std::string::npos || pid == std::string::npos) continue;
      std::string needle = (group_suffix.front() == '/' ? "task_memcg=" : "/") + group_suffix;
      bool mine = m.find(needle + ",task=", memcg) != std::string::npos || m.find(needle + "/", memcg) != std::string::npos;
      int victim = std::atoi(m.c_str() + pid + 5);
      (mine ? ours : others).insert(victim);
      if (mine && limit) limit_at_kill[victim] = limit;
      limit = 0;
      // oom_memcg= comes right before ,task_memcg= (and may hold commas).
      // Without it, the machine's memory ran out (",global_oom,"): the
      // root's limit, as it were.
      auto oom = m.find("oom_memcg=");
      if (mine && oom != std::string::npos && oom < memcg && m.compare(memcg - 1, 1, ",") == 0)
        limit_group[victim] = m.substr(oom + 10, memcg - 1 - (oom + 10));
      else if (mine && m.find(",global_oom,") < memcg)
        limit_group[victim] = "/";
    }
  }
  // Without a line that names the group (rate-limited), the pids memrun
  // knows stand in. Not otherwise: with memory.oom.group the kernel logs
  // every member it kills with the group, and the one it chose is the kill.
  if (ours.empty())
    for (int pid : known)
      if (!others.count(pid)) ours.insert(pid);
  for (const auto& m : messages) {
    auto killed = m.find("Killed process ");
    if (killed == std::string::npos) continue;
    OomKill k;
    char name[256] = {0};
    unsigned long long anon = 0, file = 0, shmem = 0;
    if (std::sscanf(m.c_str() + killed, "Killed process %d (%255[^)]) total-vm:%*ukB, anon-rss:%llukB, "
                                          "file-rss:%llukB, shmem-rss:%llukB",
                    &k.pid, name, &anon, &file, &shmem) < 2 || !ours.count(k.pid))
      continue;
    // With memory.oom.group the kernel kills the whole group and logs the
    // first victim twice: once chosen, once with its group.
    if (!reported.insert(k.pid).second) continue;
    k.name = name;
    if (auto g = limit_group.find(k.pid); g != limit_group.end()) k.oom_memcg = g->second;
    if (auto l = limit_at_kill.find(k.pid); l != limit_at_kill.end()) k.limit_bytes = l->second;
    k.anon_rss = anon * 1024, k.file_rss = file * 1024, k.shmem_rss = shmem * 1024;
    kills.push_back(k);
  }
  return kills;
}

}  // namespace memrun

// The kernel log's OOM reports read for one test's group: victims, the
// group whose limit was hit, sub-groups, the rate limit's lost lines.
#include <gtest/gtest.h>

#include "runner/base/kernel_log.h"

namespace memrun {
namespace {

TEST(KernelLog, FindsTheVictimsOfOneGroup) {
  std::vector<std::string> log = {
      "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/x/memrun-r/001-a,"
      "task_memcg=/x/memrun-r/001-a,task=big,pid=41,uid=0",
      "Memory cgroup out of memory: Killed process 41 (big) total-vm:128904kB, anon-rss:101888kB, file-rss:3224kB, "
      "shmem-rss:8kB, UID:0 pgtables:248kB oom_score_adj:0",
      "oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/x/memrun-r/002-b,task_memcg=/x/memrun-r/002-b,task=other,pid=42,uid=0",
      "Memory cgroup out of memory: Killed process 42 (other) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB, UID:0",
  };
  auto kills = parse_oom_kills(log, "memrun-r/001-a");
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].pid, 41);
  EXPECT_EQ(kills[0].name, "big");
  EXPECT_EQ(kills[0].anon_rss, 101888u * 1024);
  EXPECT_EQ(kills[0].shmem_rss, 8u * 1024);
}

TEST(KernelLog, AGroupNameWithACommaIsStillFound) {
  std::vector<std::string> log = {
      "oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/x/memrun-r/001-a,b,task_memcg=/x/memrun-r/001-a,b,task=big,"
      "pid=41,uid=0",
      "Memory cgroup out of memory: Killed process 41 (big) total-vm:1kB, anon-rss:4kB, file-rss:0kB, shmem-rss:0kB",
  };
  auto kills = parse_oom_kills(log, "memrun-r/001-a,b");
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].pid, 41);
  EXPECT_TRUE(parse_oom_kills(log, "memrun-r/001-a").empty()) << "a prefix of another group's name matched";
  // A whole path (Group::kernel_path) matches exactly, never as a suffix.
  EXPECT_EQ(parse_oom_kills(log, "/x/memrun-r/001-a,b").size(), 1u);
  EXPECT_TRUE(parse_oom_kills(log, "/memrun-r/001-a,b").empty());
}

TEST(KernelLog, AVictimInASubGroupIsTheTests) {
  // A sealed test runs in its group's leaf "test", and a test may make
  // sub-groups of its own: the kernel names the victim's group.
  std::vector<std::string> log = {
      "oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/x/memrun-r/001-a/test,task_memcg=/x/memrun-r/001-a/test/sub,"
      "task=big,pid=41,uid=0",
      "Memory cgroup out of memory: Killed process 41 (big) total-vm:1kB, anon-rss:4kB, file-rss:0kB, shmem-rss:0kB",
  };
  EXPECT_EQ(parse_oom_kills(log, "/x/memrun-r/001-a").size(), 1u);
  EXPECT_EQ(parse_oom_kills(log, "memrun-r/001-a").size(), 1u);
  EXPECT_TRUE(parse_oom_kills(log, "/x/memrun-r/001-").empty()) << "a prefix of the group's name matched";
  EXPECT_TRUE(parse_oom_kills(log, "/x/memrun-r/001-a/test/s").empty());
}

TEST(KernelLog, AKillNamesTheGroupWhoseLimitWasHit) {
  // oom_memcg= is the group over its limit, task_memcg= the victim's: a
  // limit the test set on a sub-group of its own is not memrun's.
  std::vector<std::string> log = {
      "oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/x/memrun-r/001-a,b/sub,task_memcg=/x/memrun-r/001-a,b/sub,"
      "task=big,pid=41,uid=0",
      "Memory cgroup out of memory: Killed process 41 (big) total-vm:1kB, anon-rss:4kB, file-rss:0kB, shmem-rss:0kB",
      "Memory cgroup out of memory: Killed process 43 (quiet) total-vm:1kB, anon-rss:4kB, file-rss:0kB, shmem-rss:0kB",
  };
  auto kills = parse_oom_kills(log, "/x/memrun-r/001-a,b", {43});
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].oom_memcg, "/x/memrun-r/001-a,b/sub");
  // A kill known only by its pid (the line that names groups rate-limited)
  // says nothing of the limit.
  log.erase(log.begin());
  kills = parse_oom_kills(log, "/x/memrun-r/001-a,b", {41});
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].oom_memcg, "");
  // The machine's memory ran out: no group's limit, the root's as it were.
  log = {"oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,"
         "task_memcg=/x/memrun-r/001-a,b,task=big,pid=41,uid=0",
         "Out of memory: Killed process 41 (big) total-vm:1kB, anon-rss:4kB, file-rss:0kB, shmem-rss:0kB"};
  kills = parse_oom_kills(log, "/x/memrun-r/001-a,b");
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].oom_memcg, "/");
}

TEST(KernelLog, AKillSaysTheLimitItCameAtTheLowerOfMemoryAndSwap) {
  // Each report's counters come before its oom-kill line; a report left
  // out (rate-limited) gives its kill no limit, not the one before.
  std::vector<std::string> log = {
      "memory: usage 8192kB, limit 8192kB, failcnt 24",
      "memory+swap: usage 8192kB, limit 9007199254740988kB, failcnt 0",
      "oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/x/memrun-r/001-a/test,task_memcg=/x/memrun-r/001-a/test,"
      "task=big,pid=41,uid=0",
      "Memory cgroup out of memory: Killed process 41 (big) total-vm:1kB, anon-rss:4kB, file-rss:0kB, shmem-rss:0kB",
      "memory: usage 65536kB, limit 98304kB, failcnt 3",
      "memory+swap: usage 65536kB, limit 65536kB, failcnt 1",
      "oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/x/memrun-r/001-a,task_memcg=/x/memrun-r/001-a/test,"
      "task=big,pid=42,uid=0",
      "Memory cgroup out of memory: Killed process 42 (big) total-vm:1kB, anon-rss:4kB, file-rss:0kB, shmem-rss:0kB",
  };
  auto kills = parse_oom_kills(log, "memrun-r/001-a");
  ASSERT_EQ(kills.size(), 2u);
  EXPECT_EQ(kills[0].limit_bytes, 8u << 20);
  EXPECT_EQ(kills[1].limit_bytes, 64u << 20) << "memory+swap's limit was the lower";
  std::vector<std::string> limited = {
      "memory: usage 8192kB, limit 8192kB, failcnt 24",
      "Memory cgroup out of memory: Killed process 43 (big) total-vm:1kB, anon-rss:4kB, file-rss:0kB, shmem-rss:0kB"};
  auto left_out = parse_oom_kills(limited, "memrun-r/001-a", {43});
  ASSERT_EQ(left_out.size(), 1u);
  EXPECT_EQ(left_out[0].limit_bytes, 0u);
}

TEST(KernelLog, ARateLimitedReportStillNamesAKnownVictim) {
  // Past ten OOM reports in five seconds the kernel leaves out the line
  // that names the group ("oom_kill_process: 6 callbacks suppressed"); the
  // "Killed process" line always comes. A pid memrun saw in the group
  // stands in, unless a line names it as another group's.
  std::vector<std::string> log = {
      "Memory cgroup out of memory: Killed process 41 (big) total-vm:1kB, anon-rss:4kB, file-rss:0kB, shmem-rss:0kB",
      "oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/x/memrun-r/002-b,task_memcg=/x/memrun-r/002-b,task=other,pid=42,uid=0",
      "Memory cgroup out of memory: Killed process 42 (other) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB",
      "Memory cgroup out of memory: Killed process 43 (third) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB",
  };
  EXPECT_TRUE(parse_oom_kills(log, "memrun-r/001-a").empty()) << "a kill taken without anything naming it ours";
  auto kills = parse_oom_kills(log, "memrun-r/001-a", {41, 42});
  ASSERT_EQ(kills.size(), 1u) << "42 is another group's, by its own line";
  EXPECT_EQ(kills[0].pid, 41);
  EXPECT_EQ(kills[0].name, "big");
  // With a line naming the group, that is the kill: with memory.oom.group
  // the kernel logs every member it kills with it, and those are not it.
  log.insert(log.begin(), "oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/x/memrun-r/001-a,"
                          "task_memcg=/x/memrun-r/001-a,task=third,pid=43,uid=0");
  kills = parse_oom_kills(log, "memrun-r/001-a", {41, 43});
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].pid, 43);
}

}  // namespace
}  // namespace memrun

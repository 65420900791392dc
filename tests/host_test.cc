// Parsing of /proc/self/mountinfo and /proc/self/cgroup into a layout. This
// proves the parsing only; the integration tests prove enforcement.
#include <gtest/gtest.h>

#include "cgroup/host.h"

namespace memrun::cgroup {
namespace {

TEST(Host, Hybrid) {
  Host h = parse_host(
      "30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw\n"
      "33 25 0:29 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n"
      "34 25 0:30 / /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids\n"
      "35 25 0:31 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd\n",
      "9:name=systemd:/\n8:pids:/\n4:memory:/ci/job1\n0::/\n", "/nonexistent");
  EXPECT_EQ(h.mode, Mode::hybrid);
  EXPECT_EQ(h.v1_self.at("memory"), "/nonexistent/sys/fs/cgroup/memory/ci/job1");
  EXPECT_EQ(h.v1_mount.at("memory"), "/nonexistent/sys/fs/cgroup/memory");
  EXPECT_EQ(h.v1_self.at("pids"), "/nonexistent/sys/fs/cgroup/pids");
  EXPECT_EQ(h.v2_self, "/nonexistent/sys/fs/cgroup/unified");
  EXPECT_FALSE(h.v1_self.count("name=systemd"));
}

TEST(Host, UnifiedInsideAContainerShowsItsSubtree) {
  Host h = parse_host("40 30 0:27 /ctr /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n",
                      "0::/ctr/system.slice/x.service\n", "/nonexistent");
  EXPECT_EQ(h.mode, Mode::unified);
  EXPECT_EQ(h.v2_self, "/nonexistent/sys/fs/cgroup/system.slice/x.service");
}

TEST(Host, Legacy) {
  Host h = parse_host("33 25 0:29 / /cg/mem rw - cgroup cgroup rw,memory\n", "4:memory:/\n", "/nonexistent");
  EXPECT_EQ(h.mode, Mode::legacy);
  EXPECT_EQ(h.v1_self.at("memory"), "/nonexistent/cg/mem");
}

TEST(Host, None) { EXPECT_EQ(parse_host("", "").mode, Mode::none); }

}  // namespace
}  // namespace memrun::cgroup

// Parsing of /proc/self/mountinfo and /proc/self/cgroup into a layout, and
// the reading of a group tree's lists. This proves the parsing only; the
// integration tests prove enforcement.
#include <gtest/gtest.h>

#include <stdlib.h>
#include <sys/mount.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>

#include "cgroup/cgroup.h"
#include "cgroup/error.h"
#include "cgroup/host.h"
#include "runner/run/enforce.h"

namespace memrun::cgroup {
namespace {

TEST(Cgroup, HybridLayout) {
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
  // What a sealed test mounts again: the hierarchies limits live in
  // (not name=systemd), parents first, with their options and own flags.
  ASSERT_EQ(h.mounts.size(), 3u);
  EXPECT_EQ(h.mounts[0].fstype, "cgroup2");
  EXPECT_EQ(h.mounts[0].options, "");
  EXPECT_EQ(h.mounts[1].point, "/nonexistent/sys/fs/cgroup/memory");
  EXPECT_EQ(h.mounts[1].options, "memory");
  EXPECT_EQ(h.mounts[1].flags, static_cast<unsigned long>(MS_NOSUID));
  EXPECT_EQ(h.mounts[2].options, "pids");
}

TEST(Cgroup, MountPointsAreUnescapedAndReleaseAgentsDropped) {
  Host h = parse_host("33 25 0:29 / /cg/my\\040mem ro,nodev,noexec - cgroup cgroup rw,memory,pids,release_agent=/x\n"
                      "34 25 0:30 / /cg/cpu rw - cgroup cgroup rw,cpu,cpuacct\n",
                      "4:memory,pids:/\n", "");
  ASSERT_EQ(h.mounts.size(), 1u);
  EXPECT_EQ(h.mounts[0].point, "/cg/my mem");
  EXPECT_EQ(h.mounts[0].options, "memory,pids");
  EXPECT_EQ(h.mounts[0].flags, static_cast<unsigned long>(MS_RDONLY | MS_NODEV | MS_NOEXEC));
}

TEST(Cgroup, UnifiedInsideAContainerShowsItsSubtree) {
  Host h = parse_host("40 30 0:27 /ctr /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n",
                      "0::/ctr/system.slice/x.service\n", "/nonexistent");
  EXPECT_EQ(h.mode, Mode::unified);
  EXPECT_EQ(h.v2_self, "/nonexistent/sys/fs/cgroup/system.slice/x.service");
}

TEST(Cgroup, LegacyLayout) {
  Host h = parse_host("33 25 0:29 / /cg/mem rw - cgroup cgroup rw,memory\n", "4:memory:/\n", "/nonexistent");
  EXPECT_EQ(h.mode, Mode::legacy);
  EXPECT_EQ(h.v1_self.at("memory"), "/nonexistent/cg/mem");
}

TEST(Cgroup, NoLayout) { EXPECT_EQ(parse_host("", "").mode, Mode::none); }

// A group the kernel refused to make, a scope the manager refused or never
// started: typed like every other reason limits cannot be enforced, each
// with its fix.
TEST(Cgroup, ARefusedGroupOrScopeIsAProblemWithItsFix) {
  Problem group = make_problem(Problem::Kind::cannot_create_group, "v1", "/sys/fs/cgroup/memory/memrun-x");
  group.error = EROFS;
  group.root = true;
  EXPECT_EQ(describe(group), "cannot create cgroup /sys/fs/cgroup/memory/memrun-x: Read-only file system");
  EXPECT_EQ(memrun::advice(group), "a read-only cgroup mount or a reached cgroup.max.descendants refuses new groups; "
                                   "memrun doctor shows what this host allows");
  Problem scope = make_problem(Problem::Kind::scope_not_started, "systemd", "memrun-x.scope", "its job failed");
  scope.uid = 1000;
  EXPECT_EQ(describe(scope), "systemd did not start the scope memrun-x.scope: its job failed");
  // (then, for a user, the fixes every problem has: root, a cgroup of one's own)
  EXPECT_EQ(memrun::advice(scope).find("journalctl --user -u memrun-x.scope says why the manager did not start it\n"),
            0u);
  Problem refused = make_problem(Problem::Kind::scope_refused, "systemd", "memrun-x.scope", "Access denied");
  refused.root = true;
  EXPECT_EQ(describe(refused), "systemd refused the scope memrun-x.scope: Access denied");
  EXPECT_EQ(memrun::advice(refused), "journalctl -u memrun-x.scope says why the manager did not start it");
}

}  // namespace
}  // namespace memrun::cgroup

namespace memrun::cgroup {
namespace {

// processes_below reads the group's own lists, so a group is never taken
// for another whose name contains its own (t1 and t10, t1y, another run's t1).
TEST(Cgroup, TheProcessesBelowAGroupAreItsOwnAndItsSubGroupsNeverANamesakes) {
  char tmpl[] = "/tmp/memrun-tree-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string root = tmpl;
  auto group = [&](const std::string& path, const std::string& procs) {
    std::filesystem::create_directories(root + "/" + path);
    std::ofstream(root + "/" + path + "/cgroup.procs") << procs;
  };
  group("run", "");
  group("run/t1", "11\n12\n");
  group("run/t1/sub", "13\n");
  group("run/t10", "21\n");
  group("run/x/t1y", "31\n");
  group("run/x/t1", "41\n");
  group("other-run/t1", "51\n");
  auto pids = processes_below(root + "/run/t1");
  std::sort(pids.begin(), pids.end());
  EXPECT_EQ(pids, (std::vector<pid_t>{11, 12, 13}));
  EXPECT_EQ(processes_below(root + "/run/t10"), std::vector<pid_t>{21});
  EXPECT_TRUE(processes_below(root + "/run/gone").empty()) << "a group not (or no longer) there lists nothing";
  std::filesystem::remove_all(root);
}


// The run-naming contract gc relies on: a run's directory is the prefix
// and its id, the id ends with this process's identity, and any group below
// a run (a v1 hierarchy's, a systemd scope's) names it.
TEST(Cgroup, AnIdComesBackFromEveryPathBelowItsRun) {
  std::string id = run_id("20260102-030405");
  EXPECT_EQ(id, "20260102-030405-" + run_identity());
  EXPECT_EQ(run_name(id), "memrun-" + id);
  EXPECT_EQ(run_id_of("/sys/fs/cgroup/memory/user/" + run_name(id)), id);
  EXPECT_EQ(run_id_of("/sys/fs/cgroup/user/" + run_name(id) + "/0001-a/test"), id);
  EXPECT_EQ(run_id_of("/sys/fs/cgroup/app.slice/" + run_name(id) + ".scope/" + run_name(id) + "/0001-a"), id);
  EXPECT_EQ(run_id_of("/sys/fs/cgroup/app.slice/" + run_name(id) + ".scope"), id);
  EXPECT_EQ(run_id_of("/sys/fs/cgroup/user.slice/other-memrun-x"), "");
  EXPECT_EQ(run_id_of(run_name(id)), id);
}

// The library says what is wrong, typed; memrun says what to do, in its
// options: the sentences users read are the runner's.
TEST(Cgroup, TheRunnerSaysWhatToDoInItsOwnOptions) {
  Problem p = make_problem(Problem::Kind::no_v2_group, "v2", "/sys/fs/cgroup/nowhere");
  p.root = true;
  p.mode = Mode::unified;
  p.would_work = {Kind::v1};
  EXPECT_EQ(describe(p), "no cgroup directory at /sys/fs/cgroup/nowhere");
  EXPECT_EQ(memrun::advice(p), "pass an existing cgroup v2 directory to --cgroup-parent\n"
                               "       use --backend v1 (it works here)");
  Failure f(Failure::Kind::cannot_enforce, "memory limits cannot be enforced", 0, p.path, p);
  EXPECT_EQ(memrun::failure_text(f), "memory limits cannot be enforced (backend v2): no cgroup directory at "
                                     "/sys/fs/cgroup/nowhere.\n  fix: pass an existing cgroup v2 directory to "
                                     "--cgroup-parent\n       use --backend v1 (it works here)");
  // A fix that is another backend, or root, comes only where it applies.
  Problem hybrid = make_problem(Problem::Kind::no_memory_controller, "v2", "/sys/fs/cgroup");
  hybrid.mode = Mode::hybrid;
  hybrid.uid = 1000;
  EXPECT_EQ(memrun::advice(hybrid), "run memrun as root (sudo memrun ...)\n"
                                    "       pass a cgroup you own with the memory controller to --cgroup-parent");
  // Not a problem of enforcement: the library's sentence as it is.
  EXPECT_EQ(memrun::failure_text(Failure(Failure::Kind::system, "cannot remove cgroup /x: Device or resource busy")),
            "cannot remove cgroup /x: Device or resource busy");
}

}  // namespace
}  // namespace memrun::cgroup

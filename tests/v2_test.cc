// What only cgroup v2 has. These run in the v2 and systemd VMs (see
// tests/vm/); on a host without v2 memory control they skip, unless
// MEMRUN_REQUIRE_V2=1 (as the VM suites set) makes that a failure.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "cgroup/cgroup.h"
#include "harness.h"
#include "lanes.h"
#include "runner/base/units.h"

namespace memrun::testing {
namespace {


class V2 : public MemrunTest {
 protected:
  void SetUp() override {
    if (cgroup::check({}).backend == "v2") return;
    const char* require = std::getenv("MEMRUN_REQUIRE_V2");
    if (require && std::string(require) == "1") FAIL() << "cgroup v2 memory control is required here";
    GTEST_SKIP() << "no cgroup v2 memory controller on this host (the VM suites run these)";
  }
};

// The v2 backend's own: in the v2 VM only.
MEMRUN_LANES(V2, "*", kV2Lane);

TEST_F(V2, KernelFiguresComeFromV2Files) {
  auto run = run_spec(dir, "tests:\n  - {name: t, run: [{W}, --touch, 64MiB], memory: 128MiB}\n");
  const auto& t = test_named(run, "t");
  EXPECT_EQ(run.report["host"]["backend"], "v2");
  EXPECT_EQ(t["peak_source"], "kernel");  // memory.peak, 5.19+
  EXPECT_GE(t["peak_bytes"], 64 * MiB);
  EXPECT_TRUE(t["memory_stat"].contains("anon"));          // v2 memory.stat names
  EXPECT_TRUE(t["events"].contains("oom_group_kill"));     // v2 memory.events
  EXPECT_TRUE(t["pressure_us"].contains("some"));          // PSI
  EXPECT_EQ(t["placement"], "clone3");                     // CLONE_INTO_CGROUP, 5.7+
}

TEST_F(V2, TheTestIsBornInItsOwnGroup) {
  // Unsealed, the test sees where it is; sealed (root), its group is its
  // cgroup namespace's root.
  for (bool sealed : {false, true}) {
    auto run = run_spec(dir, "tests:\n  - {name: where, run: [cat, /proc/self/cgroup], memory: 16MiB}\n",
                        sealed ? std::vector<std::string>{} : std::vector<std::string>{"--host-cgroups"});
    const auto& t = test_named(run, "where");
    std::ifstream in(t["stdout"].get<std::string>());
    std::string line;
    std::getline(in, line);
    if (sealed && ::geteuid() == 0) {
      EXPECT_EQ(line, "0::/");
    } else {
      EXPECT_NE(line.find("/memrun-"), std::string::npos) << line;
      EXPECT_NE(line.find("/001-where"), std::string::npos) << line;
    }
  }
}

TEST_F(V2, OomGroupKillsTheWholeTest) {
  // A shell waits for a sleeper while a hog hits the limit. memory.oom.group
  // makes the kernel kill every process of the group, so the test ends at
  // once instead of at its timeout.
  // (Without the group kill, the sleeper would hold the test until its
  // timeout: a long one, so that a slow machine still OOMs well before.)
  auto run = run_spec(dir, "tests:\n  - {name: t, run: 'sleep 600 & {W} --touch 200MiB; wait', memory: 64MiB, timeout: 2m}\n");
  const auto& t = test_named(run, "t");
  EXPECT_EQ(t["outcome"], "oom") << run.out;
  EXPECT_GE(t["oom_group_kills"], 1);
  // Had the sleeper survived, the test would have run into its timeout and
  // its outcome would be `timeout`: the outcome proves it, not a clock.
}

TEST_F(V2, SwapLimitIsWrittenZeroByDefault) {
  auto run = run_spec(dir, R"(
tests:
  - {name: none, run: 'cat /sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup)/memory.swap.max', memory: 16MiB}
  - {name: some, run: 'cat /sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup)/memory.swap.max', memory: 16MiB, swap: 8MiB}
)");
  auto first_line = [](const nlohmann::json& t) {
    std::ifstream in(t["stdout"].get<std::string>());
    std::string s;
    std::getline(in, s);
    return s;
  };
  EXPECT_EQ(first_line(test_named(run, "none")), "0");
  EXPECT_EQ(first_line(test_named(run, "some")), std::to_string(8 * MiB));
}

// 256 MiB of swap on the VM's zram device (tests/vm/run loads the module)
// for as long as it lives; never on a host, whose swap is not a test's to
// change. Empty when it is on, else why not.
class ZramSwap {
 public:
  ZramSwap() {
    if (!std::filesystem::exists("/sys/block/zram0")) {
      why_ = "no zram device (the test VMs have one)";
      return;
    }
    std::string swaps = read_text("/proc/swaps");
    if (swaps.find('\n') + 1 < swaps.size()) {
      why_ = "swap is already on: " + swaps;
      return;
    }
    std::ofstream("/sys/block/zram0/disksize") << "256M";
    auto made = run_program({"mkswap", "/dev/zram0"});
    auto on = run_program({"swapon", "/dev/zram0"});
    if (on.exit_code != 0) why_ = "swapon /dev/zram0: " + made.err + on.err;
    on_ = on.exit_code == 0;
  }
  ~ZramSwap() {
    if (on_) run_program({"swapoff", "/dev/zram0"});
    std::ofstream("/sys/block/zram0/reset") << "1";
  }
  const std::string& why_not() const { return why_; }

 private:
  std::string why_;
  bool on_ = false;
};

// With swap on, a test allowed 64 MiB of swap on top of 64 MiB touches 100
// MiB: it passes, what it had in swap is reported, and headroom is what is
// left of the 128 MiB it was allowed (the old report: "peak 64.0 MiB,
// headroom 0 B", the swap nowhere). Without swap allowed, the same test is
// OOM-killed: swap: 0 means none.
TEST_F(V2, SwapIsReportedAndCountsInTheHeadroom) {
  ZramSwap swap;
  if (!swap.why_not().empty()) GTEST_SKIP() << swap.why_not();
  auto run = run_spec(dir, R"(
tests:
  - {name: swaps, run: [{W}, --touch, 100MiB, --hold, 500ms], memory: 64MiB, swap: 64MiB, min_headroom: 5%}
  - {name: no-swap, run: [{W}, --touch, 100MiB], memory: 64MiB, expect: oom}
)");
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  const auto& t = test_named(run, "swaps");
  EXPECT_EQ(t["outcome"], "pass") << run.out;
  uint64_t swapped = t["swap_peak_bytes"].get<uint64_t>(), peak = t["peak_bytes"].get<uint64_t>();
  // 100 MiB touched, at most 64 MiB of it in memory: the rest was in swap.
  EXPECT_GE(peak + swapped, 100 * MiB) << run.out;
  EXPECT_GE(swapped, 30 * MiB) << run.out;
  EXPECT_EQ(t["swap_limit_bytes"].get<uint64_t>(), 64 * MiB);
  EXPECT_EQ(t["headroom_bytes"].get<int64_t>(), static_cast<int64_t>(128 * MiB) - static_cast<int64_t>(peak + swapped));
  EXPECT_NE(run.out.find("+ swap "), std::string::npos) << run.out;
  EXPECT_EQ(test_named(run, "no-swap")["swap_peak_bytes"].get<uint64_t>(), 0u);
}

TEST_F(V2, ATestHeldAtMemoryHighUntilItsTimeoutSaysSo) {
  // Anonymous memory without swap above memory.high can only be throttled:
  // the test runs into its timeout, and the reason names the cause.
  auto run = run_spec(dir, "tests:\n  - {name: t, run: [{W}, --touch, 64MiB], memory: 256MiB, memory_high: 16MiB, "
                           "timeout: 3s}\n");
  const auto& t = test_named(run, "t");
  EXPECT_EQ(t["outcome"], "timeout") << run.out;
  EXPECT_NE(t["reason"].get<std::string>().find("memory_high 16.0 MiB throttled it"), std::string::npos) << t["reason"];
}

TEST_F(V2, HugePagesAreLimitedLikeMemory) {
  // A host that reserved huge pages (a database's, say): MAP_HUGETLB pages
  // are not charged to memory.max, so without a hugetlb limit of its own a
  // test under 16 MiB could map 100 MiB of them and pass.
  if (!cgroup::host().v2_controllers.count("hugetlb")) {
    // Where memrun's parent offers no hugetlb controller (a systemd
    // service's cgroup), it cannot limit huge pages, and says so.
    auto doctor = run_memrun({"doctor"});
    EXPECT_NE(doctor.out.find("huge pages         not limited"), std::string::npos) << doctor.out;
    return;
  }
  const std::string nr = "/proc/sys/vm/nr_hugepages";
  std::string before = trimmed(read_text(nr, "0"));
  ASSERT_EQ(write_text(nr, "64"), 0);
  int reserved = std::atoi(trimmed(read_text(nr, "0")).c_str());
  auto run = run_spec(dir, "tests:\n  - {name: huge, run: [{W}, --hugetlb, 100MiB], memory: 16MiB}\n"
                           "  - {name: fits, run: [{W}, --hugetlb, 8MiB], memory: 16MiB}\n");
  EXPECT_EQ(write_text(nr, before), 0);
  ASSERT_GE(reserved, 50) << "the VM could not reserve huge pages";
  const auto& huge = test_named(run, "huge");
  EXPECT_FALSE(huge["passed"]) << run.out;
  EXPECT_NE(huge["reason"].get<std::string>().find("huge pages"), std::string::npos) << huge["reason"];
  EXPECT_TRUE(test_named(run, "fits")["passed"]) << run.out;
}

TEST_F(V2, MemoryHighThrottlesWithoutAKill) {
  // Reading a 96 MiB file under memory.high = 16 MiB: above high the kernel
  // throttles the reader and reclaims its page cache instead of killing it.
  // (Anonymous memory without swap could only be throttled, for ever.)
  std::string file = dir.path() + "/data";
  {
    std::ofstream out(file, std::ios::binary);
    std::string block(1 << 20, 'x');
    for (int i = 0; i < 96; ++i) out << block;
  }
  ASSERT_EQ(run_program({"sync"}).exit_code, 0);  // clean pages can be dropped
  int fd = ::open(file.c_str(), O_RDONLY);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  auto run = run_spec(dir, "tests:\n  - {name: t, run: 'cat " + file +
                               " > /dev/null', memory: 256MiB, memory_high: 16MiB, timeout: 5m}\n");
  const auto& t = test_named(run, "t");
  EXPECT_EQ(t["outcome"], "pass") << run.out;
  EXPECT_EQ(t["oom_kills"], 0);
  EXPECT_GT(t["events"]["high"], 0) << "memory.high was never crossed";
  EXPECT_LT(t["peak_bytes"], 64 * MiB) << "the cache was not held near memory.high";
}

TEST_F(V2, RunsInsideACgroupThatHasOtherProcesses) {
  // memrun is started inside a non-root cgroup next to another process, as
  // from a service's shell. cgroup v2 lets a cgroup enable controllers only
  // without processes of its own: memrun must move both into a leaf first.
  std::string root = cgroup::check({}).parent;
  std::string outer = root + "/memrun-test-outer-" + std::to_string(::getpid());
  ASSERT_EQ(write_text(root + "/cgroup.subtree_control", "+memory +pids"), 0);
  ASSERT_EQ(::mkdir(outer.c_str(), 0755), 0);
  std::string sleeper = dir.path() + "/sleeper.pid";
  auto run = run_spec_with(dir, "tests:\n  - {name: t, run: [{W}, --touch, 100MiB], memory: 64MiB, expect: oom}\n",
                           {"sh", "-c", "echo $$ > \"$0/cgroup.procs\" || exit 99; sleep 30 & echo $! > " + sleeper +
                                            "; exec \"$@\"",
                            outer, memrun_bin()});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_TRUE(test_named(run, "t")["passed"]);
  EXPECT_EQ(run.report["host"]["cgroup_path"].get<std::string>().rfind(outer + "/memrun-", 0), 0u);
  int pid = 0;
  std::ifstream(sleeper) >> pid;
  ASSERT_GT(pid, 0);
  auto leaf_procs = read_text(outer + "/memrun.leaf/cgroup.procs");
  EXPECT_NE(leaf_procs.find(std::to_string(pid)), std::string::npos) << "the sibling was not moved to the leaf";
  ::kill(pid, SIGKILL);
  for (int i = 0; i < 1000 && ::rmdir((outer + "/memrun.leaf").c_str()) != 0; ++i) ::usleep(1000);
  EXPECT_EQ(::rmdir(outer.c_str()), 0);
}

}  // namespace
}  // namespace memrun::testing

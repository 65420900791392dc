// Integration tests: the real memrun binary runs real workloads under real
// limits on this machine's kernel (cgroup v1 on the project's hybrid hosts,
// cgroup v2 inside the test VMs), and every figure is the kernel's.
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "cgroup/cgroup.h"
#include "harness.h"
#include "lanes.h"
#include "runner/base/units.h"

namespace memrun::testing {
namespace {


class Host : public MemrunTest {};

// Enforcement, OOM kills, kills and clean-up: proven on every backend (exceptions are labelled at their tests).
MEMRUN_LANES(Host, "*", kHostLane | kV2Lane | kSystemdLane);

TEST_F(Host, OverTheLimitIsAnOomKill) {
  auto run = run_spec(dir, "tests:\n  - {name: t, run: [{W}, --touch, 100MiB], memory: 64MiB}\n");
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  const auto& t = test_named(run, "t");
  EXPECT_EQ(t["outcome"], "oom");
  EXPECT_FALSE(t["passed"]);
  EXPECT_GE(t["oom_kills"], 1);
  EXPECT_EQ(t["limit_bytes"], 64 * MiB);
  EXPECT_LE(t["peak_bytes"], 64 * MiB);
  EXPECT_NE(run.out.find("expected pass, got oom at 64.0 MiB"), std::string::npos) << run.out;
  // Who was killed, from the kernel's log (readable by root).
  if (::access("/dev/kmsg", R_OK) == 0) {
    ASSERT_EQ(t["oom_victims"].size(), 1u) << run.out;
    EXPECT_EQ(t["oom_victims"][0]["name"], "memrun-workload");
    EXPECT_GT(t["oom_victims"][0]["anon_rss_bytes"], 32 * MiB);
    EXPECT_NE(run.out.find("the kernel killed memrun-workload"), std::string::npos) << run.out;
  }
}

// The OOM report's rate limit is the kernel log's, whatever the backend (fifteen kills, slow under TCG).
MEMRUN_LANES(Host, "EveryOomKillNamesItsVictimWhenTheKernelRateLimitsItsReports", kHostLane);
TEST_F(Host, EveryOomKillNamesItsVictimWhenTheKernelRateLimitsItsReports) {
  // The kernel's OOM report (with the line that names the group) is
  // rate-limited to ten in five seconds; fifteen kills in a row pass that
  // for certain. Each test still names its victim.
  if (::access("/dev/kmsg", R_OK) != 0) GTEST_SKIP() << "the kernel log is not readable here";
  std::string yaml = "tests:\n";
  for (int i = 1; i <= 15; ++i)
    yaml += "  - {name: t" + std::to_string(i) + ", run: [{W}, --touch, 100MiB], memory: 64MiB, expect: oom}\n";
  auto run = run_spec(dir, yaml);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  ASSERT_EQ(run.report["tests"].size(), 15u) << run.out;
  for (const auto& t : run.report["tests"]) {
    ASSERT_EQ(t["oom_victims"].size(), 1u) << t["name"] << "\n" << run.out;
    EXPECT_EQ(t["oom_victims"][0]["name"], "memrun-workload") << t["name"];
    EXPECT_GT(t["oom_victims"][0]["anon_rss_bytes"], 32 * MiB) << t["name"];
  }
}

TEST_F(Host, UnderTheLimitThePeakIsWhatWasTouched) {
  // The process's own baseline (binary, libraries, stack) first.
  auto base = run_spec(dir, "tests:\n  - {name: t, run: [{W}], memory: 256MiB}\n");
  uint64_t baseline = test_named(base, "t")["peak_bytes"];
  auto run = run_spec(dir, "tests:\n  - {name: t, run: [{W}, --touch, 100MiB], memory: 256MiB}\n");
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  const auto& t = test_named(run, "t");
  EXPECT_EQ(t["outcome"], "pass");
  EXPECT_EQ(t["peak_source"], "kernel");
  double expected = 100.0 * MiB + baseline;
  EXPECT_NEAR(t["peak_bytes"].get<double>(), expected, 0.05 * expected);
  EXPECT_EQ(t["headroom_bytes"].get<int64_t>(), 256ll * MiB - t["peak_bytes"].get<int64_t>());
  EXPECT_EQ(t["oom_kills"], 0);
}

TEST_F(Host, ExpectOomTurnsTheKillIntoAPass) {
  auto run = run_spec(dir, "tests:\n  - {name: t, run: [{W}, --touch, 100MiB], memory: 64MiB, expect: oom}\n");
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(test_named(run, "t")["outcome"], "oom");
  EXPECT_TRUE(test_named(run, "t")["passed"]);
}

TEST_F(Host, TheWholeTreeCountsNotTheLargestProcess) {
  // 4 x 40 MiB: each child alone fits in 128 MiB, together they do not.
  // Each child waits at a barrier once it has touched its 40 MiB, so that
  // the four certainly hold their memory at once, however slow the machine.
  std::filesystem::create_directories(dir.path() + "/b1");
  std::filesystem::create_directories(dir.path() + "/b2");
  auto run = run_spec(dir, "tests:\n  - {name: t, run: [{W}, --children, '4', --touch, 40MiB, --arrive, " + dir.path() +
                               "/b1, --await, '4'], memory: 128MiB}\n");
  EXPECT_EQ(test_named(run, "t")["outcome"], "oom") << run.out;
  // And under a limit that fits the tree, it passes with the tree's peak.
  auto fits = run_spec(dir, "tests:\n  - {name: t, run: [{W}, --children, '4', --touch, 40MiB, --arrive, " + dir.path() +
                                "/b2, --await, '4'], memory: 256MiB}\n");
  EXPECT_EQ(test_named(fits, "t")["outcome"], "pass") << fits.out;
  EXPECT_GE(test_named(fits, "t")["peak_bytes"], 160 * MiB);
}

TEST_F(Host, TimeoutKillsADaemonizedGrandchild) {
  // The timeout must come after the daemon started (it writes its pid):
  // on a slow machine 500 ms may not be enough, so a longer one is tried
  // then, never a different assertion.
  std::string pidfile = dir.path() + "/daemon.pid";
  int pid = 0;
  for (const char* timeout : {"500ms", "5s", "60s"}) {
    std::filesystem::remove(pidfile);
    auto run = run_spec(dir, "tests:\n  - {name: t, run: [{W}, --daemon, " + pidfile + ", --hold, 1h], memory: 64MiB, "
                                 "timeout: " + timeout + "}\n");
    EXPECT_EQ(run.exit_code, 1);
    EXPECT_EQ(test_named(run, "t")["outcome"], "timeout");
    pid = pid_in_file(pidfile);
    if (pid >= 0) break;
  }
  ASSERT_GE(pid, 0) << "the daemon never started";
  EXPECT_FALSE(process_alive(pid)) << "the setsid'd grandchild " << pid << " outlived the run";
}

TEST_F(Host, ADaemonLeftByAPassingTestDiesWithIt) {
  std::string pidfile = dir.path() + "/daemon.pid";
  auto run = run_spec(dir, "tests:\n  - {name: t, run: [{W}, --daemon, " + pidfile + "], memory: 64MiB}\n");
  EXPECT_EQ(test_named(run, "t")["outcome"], "pass");
  int pid = pid_in_file(pidfile);
  ASSERT_GE(pid, 0);
  EXPECT_FALSE(process_alive(pid));
}

TEST_F(Host, ExitCodesAndExpectations) {
  auto run = run_spec(dir, R"(
tests:
  - {name: fails, run: 'echo broken >&2; exit 3', memory: 8MiB}
  - {name: exits-3, run: 'exit 3', memory: 8MiB, expect: 3}
  - {name: expected-fail, run: 'exit 1', memory: 8MiB, expect: fail}
  - {name: missing, run: [no-such-command-here], memory: 8MiB}
)");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(test_named(run, "fails")["outcome"], "fail");
  EXPECT_EQ(test_named(run, "fails")["exit_code"], 3);
  EXPECT_NE(run.out.find("| broken"), std::string::npos) << "the log tail is shown:\n" << run.out;
  EXPECT_TRUE(test_named(run, "exits-3")["passed"]);
  EXPECT_TRUE(test_named(run, "expected-fail")["passed"]);
  EXPECT_EQ(test_named(run, "missing")["outcome"], "error");
  EXPECT_NE(test_named(run, "missing")["reason"].get<std::string>().find("command not found"), std::string::npos);
}

TEST_F(Host, MinHeadroomFailsATestThatCameTooClose) {
  auto run = run_spec(dir, "tests:\n  - {name: t, run: [{W}, --touch, 100MiB], memory: 110MiB, min_headroom: 20%}\n");
  EXPECT_EQ(run.exit_code, 1);
  const auto& t = test_named(run, "t");
  EXPECT_EQ(t["outcome"], "pass");
  EXPECT_FALSE(t["passed"]);
  EXPECT_NE(t["reason"].get<std::string>().find("below min_headroom"), std::string::npos);
}

// Page cache reads the same v2 files whichever backend made the group: the v2 VM proves it.
MEMRUN_LANES(Host, "PageCache*", kHostLane | kV2Lane);
TEST_F(Host, PageCacheIsNotCountedAgainstHeadroom) {
  // 1 GiB read through `cat` under 64 MiB: the page cache fills the limit
  // and is reclaimed; the test passes and is not said to need 64 MiB.
  // (MEMRUN_TEST_PAGE_CACHE_MIB shrinks the file where writing 1 GiB is slow,
  // as over the VMs' 9p share; it stays 4x the limit.)
  const char* mib_env = std::getenv("MEMRUN_TEST_PAGE_CACHE_MIB");
  int mib = mib_env ? std::max(256, std::atoi(mib_env)) : 1024;
  std::string big = dir.path() + "/big";
  struct statfs fs;
  ASSERT_EQ(::statfs(dir.path().c_str(), &fs), 0);
  ASSERT_NE(fs.f_type, TMPFS_MAGIC) << dir.path() << " is tmpfs, whose pages are not reclaimable page "
                                       "cache: point TMPDIR at a disk-backed folder";
  {
    int fd = ::open(big.c_str(), O_WRONLY | O_CREAT, 0644);
    std::string block(1 << 20, 'x');
    for (int i = 0; i < mib; ++i) ASSERT_EQ(::write(fd, block.data(), block.size()), (ssize_t)block.size());
    ::fsync(fd);
    ::close(fd);
    // Out of the cache, so the test's reads are charged to the test.
    fd = ::open(big.c_str(), O_RDONLY);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
  auto run = run_spec(dir, "tests:\n  - {name: t, run: 'cat " + big + " > /dev/null', memory: 64MiB, min_headroom: 25%}\n");
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  const auto& t = test_named(run, "t");
  EXPECT_EQ(t["outcome"], "pass");
  EXPECT_GE(t["peak_bytes"], 48 * MiB) << "the cache should have filled the limit";
  EXPECT_EQ(t["headroom_basis"], "working_set");
  EXPECT_LT(t["working_set_peak_bytes"], 16 * MiB);
  EXPECT_NE(run.out.find("page cache"), std::string::npos) << run.out;
}

TEST_F(Host, AParentWithALowerLimitGivesTheEffectiveLimit) {
  auto parent = limited_parent(48 * MiB);
  auto run = run_spec(dir, "tests:\n  - {name: t, run: [{W}, --touch, 100MiB], memory: 256MiB}\n",
                      {"--cgroup-parent", parent->run_path()});
  const auto& t = test_named(run, "t");
  EXPECT_EQ(t["requested_limit_bytes"], 256 * MiB);
  EXPECT_EQ(t["limit_bytes"], 48 * MiB);
  EXPECT_EQ(t["outcome"], "oom");
  EXPECT_NE(run.out.find("effective limit 48.0 MiB"), std::string::npos) << run.out;
  EXPECT_NO_THROW(parent->close()) << "memrun left something in " << parent->run_path();
}

TEST_F(Host, PidsLimitStopsAForkBomb) {
  auto run = run_spec(dir, "tests:\n  - {name: t, run: [{W}, --children, '50', --hold, 1s], memory: 256MiB, pids: 10}\n");
  const auto& t = test_named(run, "t");
  EXPECT_EQ(t["outcome"], "fail") << run.out;
}

// Spec checks are memrun's, whatever the backend.
MEMRUN_LANES(Host, "AnInvalidSpecRunsNothing", kHostLane | kV2Lane);
TEST_F(Host, AnInvalidSpecRunsNothing) {
  auto run = run_spec(dir, "tests:\n  - {name: ok, run: 'touch ran', memory: 8MiB}\n  - {name: t, run: x, memroy: 8MiB}\n");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("spec.yaml:3:23: unknown key 'memroy' in a test; did you mean 'memory'?"), std::string::npos)
      << run.err;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/ran"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/runs"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/report.json"));
}

// Set-up steps are memrun's, whatever the backend.
MEMRUN_LANES(Host, "*Setup*", kHostLane | kV2Lane);
TEST_F(Host, SetupRunsOnceUnderItsLimitAndOnlyWhenOutdated) {
  dir.write("input", "");
  std::string yaml = R"(
setup:
  run: echo ran >> count; {W} --touch 20MiB && touch out
  memory: 64MiB
  inputs: [input]
  outputs: [out]
tests:
  - {name: t, run: 'test -f out', memory: 8MiB}
)";
  auto lines = [&] {
    std::ifstream in(dir.path() + "/count");
    int n = 0;
    for (std::string l; std::getline(in, l);) ++n;
    return n;
  };
  auto first = run_spec(dir, yaml);
  EXPECT_EQ(first.exit_code, 0) << first.out << first.err;
  ASSERT_EQ(first.report["setups"].size(), 1u);
  EXPECT_TRUE(first.report["setups"][0]["ran"]);
  EXPECT_GE(first.report["setups"][0]["result"]["peak_bytes"], 20 * MiB);  // measured like a test
  EXPECT_EQ(lines(), 1);
  auto second = run_spec(dir, yaml);
  EXPECT_FALSE(second.report["setups"][0]["ran"]);
  EXPECT_NE(second.out.find("outputs up to date"), std::string::npos) << second.out;
  EXPECT_EQ(lines(), 1);
  // A newer input makes it run again.
  std::filesystem::last_write_time(dir.path() + "/input",
                                   std::filesystem::file_time_type::clock::now() + std::chrono::seconds(5));
  auto third = run_spec(dir, yaml);
  EXPECT_TRUE(third.report["setups"][0]["ran"]);
  EXPECT_EQ(lines(), 2);
}

// memrun's own, whatever the backend: on the host only.
MEMRUN_LANES(Host, "AFailingSetupStopsTheRunClearly", kHostLane);
TEST_F(Host, AFailingSetupStopsTheRunClearly) {
  auto run = run_spec(dir, R"(
setup: {run: 'echo cannot make fixtures >&2; exit 4', memory: 16MiB}
tests:
  - {name: t, run: 'touch ran', memory: 8MiB}
)");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.out.find("FAIL  setup of"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("| cannot make fixtures"), std::string::npos) << run.out;
  EXPECT_EQ(test_named(run, "t")["outcome"], "error");
  EXPECT_NE(test_named(run, "t")["reason"].get<std::string>().find("the setup of"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/ran"));
}

// Logs are memrun's, whatever the backend.
MEMRUN_LANES(Host, "LogsAreFilesNotMemory", kHostLane | kV2Lane);
TEST_F(Host, LogsAreFilesNotMemory) {
  auto run = run_spec(dir, "tests:\n  - {name: t, run: 'echo out; echo err >&2', memory: 8MiB}\n");
  const auto& t = test_named(run, "t");
  std::ifstream o(t["stdout"].get<std::string>()), e(t["stderr"].get<std::string>());
  std::string out, err;
  o >> out;
  e >> err;
  EXPECT_EQ(out, "out");
  EXPECT_EQ(err, "err");
}

// Which inputs a spec may name and their eviction (thousands of files: minutes under TCG) are memrun's.
MEMRUN_LANES(Host, "InputsAreFilesOrFoldersAndTheirEvictionNeverHoldsTheRun", kHostLane);
TEST_F(Host, InputsAreFilesOrFoldersAndTheirEvictionNeverHoldsTheRun) {
  // A FIFO would block memrun in open() (it once did, SIGTERM ignored): it
  // is refused at its place in the spec, as a system folder is.
  // Below /tmp: the VMs' scratch folder (TMPDIR) is 9p, where qemu
  // refuses FIFOs; their /tmp is the overlay's.
  char fifo_dir[] = "/tmp/memrun-fifo-XXXXXX";
  ASSERT_NE(::mkdtemp(fifo_dir), nullptr);
  std::string fifo_path = std::string(fifo_dir) + "/fifo";
  ASSERT_EQ(::mkfifo(fifo_path.c_str(), 0600), 0);
  auto fifo = run_spec(dir, "tests:\n  - {name: a, run: 'true', memory: 16MiB, inputs: [" + fifo_path + "]}\n");
  ::unlink(fifo_path.c_str());
  ::rmdir(fifo_dir);
  EXPECT_EQ(fifo.exit_code, 2) << fifo.out << fifo.err;
  EXPECT_NE(fifo.err.find("spec.yaml:2:"), std::string::npos) << fifo.err;
  EXPECT_NE(fifo.err.find("is a FIFO"), std::string::npos) << fifo.err;
  auto system = run_spec(dir, "tests:\n  - {name: a, run: 'true', memory: 16MiB, inputs: [/usr/share]}\n");
  EXPECT_EQ(system.exit_code, 2) << system.out << system.err;
  EXPECT_NE(system.err.find("is a system path"), std::string::npos) << system.err;
  // An input the setup was to make and did not: the test cannot start.
  auto unmade = run_spec(dir, "setup: {run: 'true', memory: 16MiB, outputs: [made]}\n"
                              "tests:\n  - {name: a, run: 'true', memory: 16MiB, inputs: [made/x]}\n");
  EXPECT_EQ(unmade.exit_code, 1) << unmade.out << unmade.err;
  EXPECT_EQ(test_named(unmade, "a")["outcome"], "error");
  EXPECT_NE(test_named(unmade, "a")["reason"].get<std::string>().find("spec.yaml:3:5: the input " + dir.path() +
                                                                     "/made/x does not exist"),
            std::string::npos)
      << test_named(unmade, "a")["reason"];
  // A folder of many files is evicted beside a running test, which is
  // sampled and timed out meanwhile (the walk runs off the event loop).
  std::filesystem::create_directory(dir.path() + "/tree");
  for (int i = 0; i < 5000; ++i) dir.write("tree/" + std::to_string(i), "x");
  auto run = run_spec(dir, "tests:\n  - {name: reads, run: 'cat tree/1', memory: 16MiB, inputs: [tree]}\n"
                           "  - {name: beside, run: 'sleep 30', memory: 16MiB, timeout: 1s}\n",
                      {"-j", "2"});
  EXPECT_EQ(test_named(run, "reads")["outcome"], "pass") << run.out << run.err;
  EXPECT_EQ(test_named(run, "beside")["outcome"], "timeout") << run.out;
  EXPECT_GT(test_named(run, "beside")["samples"].get<int>(), 0) << run.out;
}

TEST_F(Host, ReportsTheBackendAndCgroupMode) {
  auto run = run_spec(dir, "tests:\n  - {name: t, run: 'true', memory: 8MiB}\n");
  std::string backend = run.report["host"]["backend"];
  // Where systemd is PID 1 on cgroup v2, the cgroup tree is its: auto asks it
  // for a scope, as root too, rather than rearranging the caller's cgroup.
  const auto& h = cgroup::host();
  if (h.systemd_pid1 && h.mode == cgroup::Mode::unified)
    EXPECT_EQ(backend, "systemd");
  else
    EXPECT_TRUE(backend == "v1" || backend == "v2") << backend;
  EXPECT_NE(run.out.find("on " + backend + " backend"), std::string::npos);
  std::printf("memrun used backend %s, cgroup mode %s\n", backend.c_str(),
              run.report["host"]["cgroup_mode"].get<std::string>().c_str());
}

TEST_F(Host, DoctorProvesEnforcement) {
  auto run = run_memrun({"doctor"});
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("memory limits can be enforced here"), std::string::npos) << run.out;
  // Proven by a write to the probe group's limit, on every backend.
  EXPECT_NE(run.out.find("limit writes       seen (inotify)"), std::string::npos) << run.out;
  if (cgroup::host().mode == cgroup::Mode::hybrid) {
    EXPECT_NE(run.out.find("hybrid"), std::string::npos);
  }
}

TEST_F(Host, AskingForABackendThatCannotEnforceExits3WithTheFix) {
  // On a hybrid host v2 has no memory controller; on a unified one v1 is absent.
  std::string other = cgroup::check({}).backend == "v1" ? "v2" : "v1";
  auto run = run_memrun({"doctor", "--backend", other});
  cgroup::OpenOptions o{other == "v2" ? cgroup::Kind::v2 : cgroup::Kind::v1, "", ""};
  if (cgroup::check(o).ok())
    GTEST_SKIP() << "both backends work here";
  EXPECT_EQ(run.exit_code, 3);
  EXPECT_NE(run.out.find("fix:"), std::string::npos) << run.out;
  auto spec = dir.write("s.yaml", "tests:\n  - {name: t, run: 'true', memory: 8MiB}\n");
  auto r = run_memrun({spec, "--backend", other, "--run-dir", dir.path() + "/runs"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("memory limits cannot be enforced"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace memrun::testing

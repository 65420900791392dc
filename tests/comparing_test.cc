// `memrun compare` and `--baseline` on real runs under real limits: a real
// regression is called with its figures, an unchanged test is unchanged
// however often it reruns, and a declared input's page cache costs the same
// cold or warm. The rule itself is unit-tested in compare_test.cc.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cgroup/fs.h"
#include "harness.h"
#include "runner/units.h"

namespace memrun::testing {
namespace {

constexpr double kMiB = static_cast<double>(MiB);

class Comparing : public MemrunTest {
 protected:
  /// Runs `yaml` (written to the same spec.yaml every time, so that base
  /// and head name their tests alike) and keeps its report as `report`.
  RunOutput run_as(const std::string& yaml, const std::string& report, std::vector<std::string> extra = {}) {
    std::string text = yaml;
    for (size_t at; (at = text.find("{W}")) != std::string::npos;) text.replace(at, 3, workload());
    std::string spec = dir.write("spec.yaml", text);
    std::vector<std::string> args = {spec, "--json", dir.path() + "/" + report, "--run-dir", dir.path() + "/runs"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_memrun(args);
  }
  /// `memrun compare` of two kept reports, with its JSON output.
  RunOutput compare(const std::string& base, const std::string& head) {
    std::string out = dir.path() + "/compare.json";
    std::filesystem::remove(out);
    RunOutput r = run_memrun({"compare", dir.path() + "/" + base, dir.path() + "/" + head, "--json", out});
    r.report = nlohmann::json::parse(fs::read_file(out).value_or("{}"));
    return r;
  }
};

TEST_F(Comparing, ThirtyPercentMoreIsARegressionWithTheRightFigures) {
  ASSERT_EQ(run_as("tests:\n  - {name: grows, run: [{W}, --touch, 40MiB], memory: 128MiB}\n", "base.json").exit_code, 0);
  ASSERT_EQ(run_as("tests:\n  - {name: grows, run: [{W}, --touch, 52MiB], memory: 128MiB}\n", "head.json").exit_code, 0);
  auto c = compare("base.json", "head.json");
  EXPECT_EQ(c.exit_code, 1) << c.out << c.err;
  ASSERT_EQ(c.report["tests"].size(), 1u) << c.out;
  const auto& t = c.report["tests"][0];
  EXPECT_EQ(t["change"], "regressed") << c.out;
  EXPECT_EQ(t["figure"], "peak");
  // The kernel's peaks: what was touched, plus the workload's own pages.
  double base = t["base_bytes"].get<double>() / kMiB, head = t["head_bytes"].get<double>() / kMiB;
  EXPECT_GE(base, 40.0);
  EXPECT_LE(base, 42.0);
  EXPECT_GE(head, 52.0);
  EXPECT_LE(head, 54.0);
  EXPECT_NEAR(t["change_bytes"].get<double>() / kMiB, 12.0, 1.0);
  EXPECT_NEAR(t["change_pct"].get<double>(), 29.0, 2.0);
  EXPECT_NE(c.out.find("1 regression, 0 improvements, 0 unchanged"), std::string::npos) << c.out;
}

TEST_F(Comparing, AnUnchangedTestRerunFiveTimesIsUnchangedEveryTime) {
  const char* spec = "tests:\n  - {name: steady, run: [{W}, --touch, 30MiB], memory: 128MiB}\n";
  auto base = run_as(spec, "base.json", {"--repeat", "3"});
  ASSERT_EQ(base.exit_code, 0) << base.out << base.err;
  for (int i = 0; i < 5; ++i) {
    // Through --baseline this time: the comparison at the end of the run,
    // in the run's own outputs too.
    std::string junit = dir.path() + "/head.xml";
    auto head = run_as(spec, "head.json", {"--baseline", dir.path() + "/base.json", "--junit", junit});
    EXPECT_EQ(head.exit_code, 0) << head.out << head.err;
    EXPECT_NE(head.out.find("0 regressions, 0 improvements, 1 unchanged"), std::string::npos) << head.out;
    auto report = nlohmann::json::parse(fs::read_file(dir.path() + "/head.json").value_or("{}"));
    EXPECT_EQ(report["comparison"]["summary"]["unchanged"], 1) << report["comparison"].dump();
    EXPECT_EQ(report["comparison"]["tests"][0]["change"], "unchanged");
    EXPECT_NE(fs::read_file(junit).value_or("").find("<testsuite name=\"memrun compare\" tests=\"1\" failures=\"0\""),
              std::string::npos)
        << fs::read_file(junit).value_or("");
    if (i == 0) {
      auto check = run_program({"xmllint", "--noout", "--schema", std::string(SOURCE_DIR) + "/tests/junit.xsd", junit});
      EXPECT_EQ(check.exit_code, 0) << check.err;
    }
  }
  // The base kept each of its three runs.
  auto report = nlohmann::json::parse(fs::read_file(dir.path() + "/base.json").value_or("{}"));
  EXPECT_EQ(report["tests"][0]["runs"].size(), 3u);
}

// Writes `mib` MiB to `path` and reads it back: all of it in the page cache
// of this process's cgroup.
void write_and_cache(const std::string& path, int mib) {
  write_mib(path, mib);
  std::ifstream in(path, std::ios::binary);
  std::string block(MiB, '\0');
  while (in.read(block.data(), static_cast<std::streamsize>(block.size()))) {
  }
}

TEST_F(Comparing, PageCacheOfADeclaredInputIsTheSameColdOrWarm) {
  if (on_tmpfs(dir.path()))
    GTEST_SKIP() << dir.path() << " is on tmpfs: its pages are shmem, there is no page cache to evict (the host "
                                  "suite, on a disk, proves this)";
  std::string input = dir.path() + "/input.bin";
  const char* spec = "tests:\n  - {name: reads, run: 'cat input.bin > /dev/null', memory: 256MiB, inputs: [input.bin]}\n";
  // Cold: nobody has the file cached (memrun evicts it in any case).
  write_and_cache(input, 64);
  int fd = ::open(input.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  auto cold = run_as(spec, "cold.json");
  ASSERT_EQ(cold.exit_code, 0) << cold.out << cold.err;
  // Warm: this process has just read all of it. Without `inputs`, the test
  // would find it cached, charged to this process's cgroup, and pay nothing.
  write_and_cache(input, 64);
  auto warm = run_as(spec, "warm.json");
  ASSERT_EQ(warm.exit_code, 0) << warm.out << warm.err;
  for (const auto* run : {&cold, &warm}) {
    auto report = nlohmann::json::parse(fs::read_file(dir.path() + (run == &cold ? "/cold.json" : "/warm.json")).value_or("{}"));
    EXPECT_GE(report["tests"][0]["peak_bytes"].get<double>() / kMiB, 60.0)
        << "the run did not pay for reading its input: " << report["tests"][0].dump();
  }
  auto c = compare("cold.json", "warm.json");
  EXPECT_EQ(c.exit_code, 0) << c.out;
  EXPECT_EQ(c.report["tests"][0]["change"], "unchanged") << c.out;
}

TEST_F(Comparing, ReportsOfAnotherBackendAreNotComparedSilently) {
  ASSERT_EQ(run_as("tests:\n  - {name: t, run: [{W}, --touch, 8MiB], memory: 64MiB}\n", "base.json").exit_code, 0);
  ASSERT_EQ(run_as("tests:\n  - {name: t, run: [{W}, --touch, 40MiB], memory: 64MiB}\n", "head.json").exit_code, 0);
  // The same head as if measured elsewhere, with another memrun.
  auto head = nlohmann::json::parse(fs::read_file(dir.path() + "/head.json").value_or("{}"));
  head["host"]["backend"] = head["host"]["backend"] == "v1" ? "v2" : "v1";
  head["memrun_version"] = "9.9.9";
  dir.write("other.json", head.dump());
  auto c = compare("base.json", "other.json");
  EXPECT_EQ(c.exit_code, 0) << c.out;
  EXPECT_EQ(c.report["tests"][0]["change"], "not comparable") << c.out;
  EXPECT_NE(c.out.find("warning: memrun version differs"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("measured on another backend"), std::string::npos) << c.out;
}

}  // namespace
}  // namespace memrun::testing

// memrun bisect, --scale, --set and repro with the real binary and kernel.
#include <gtest/gtest.h>

#include <filesystem>

#include <regex>

#include "harness.h"
#include "lanes.h"
#include "runner/base/units.h"

namespace memrun::testing {
namespace {

class Bisect : public MemrunTest {};

// Bisect is the same on every backend and slow under TCG: on the host only.
MEMRUN_LANES(Bisect, "*", kHostLane);

TEST_F(Bisect, FindsTheMinimumOfAWorkloadWithin2PercentIn10Runs) {
  auto run = run_memrun({"bisect", "--memory-range", "64MiB:1GiB", "--tolerance", "1%", "--run-dir",
                         dir.path() + "/runs", "--", workload(), "--touch", "200MiB"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(run.out, m, std::regex(R"(smallest passing limit: .* \((\d+) bytes\).* (\d+) runs)")))
      << run.out;
  double minimum = std::stod(m[1]);
  int runs = std::stoi(m[2]);
  // 200 MiB of anonymous memory cannot be reclaimed: the true minimum is
  // 200 MiB plus the process's own pages, a MiB or so.
  EXPECT_GE(minimum, 200 * MiB);
  EXPECT_LE(minimum, 200 * MiB * 1.02 + 2 * MiB);
  EXPECT_LE(runs, 10);
  // The suggestion is the minimum rounded up to a whole MiB (201 or 202:
  // the process's own pages vary by a few KiB from run to run).
  auto suggested = "memory: " + std::to_string(static_cast<uint64_t>((minimum + MiB - 1) / MiB)) + "MiB";
  EXPECT_NE(run.out.find(suggested), std::string::npos) << suggested << "\n" << run.out;
}

// --help promises a default range: a command alone is bisected.
TEST_F(Bisect, ACommandNeedsNoRange) {
  auto run = run_memrun({"bisect", "--run-dir", dir.path() + "/runs", "--", workload(), "--touch", "100MiB"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  // The program is called by its name, as exec calls it, not "command".
  EXPECT_NE(run.out.find("bisecting the memory limit of 'memrun-workload'"), std::string::npos) << run.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(run.out, m, std::regex(R"(smallest passing limit: .* \((\d+) bytes\))"))) << run.out;
  EXPECT_GE(std::stod(m[1]), 100 * MiB);
}

// The limit bisect suggests keeps the test's own min_headroom: the spec run
// with it passes.
TEST_F(Bisect, TheSuggestedLimitKeepsTheTestsMinHeadroom) {
  std::string spec = dir.write("spec.yaml", "tests:\n  - {name: t, run: [" + workload() +
                                                ", --touch, 60MiB], memory: 256MiB, min_headroom: 25%}\n");
  auto run = run_memrun({"bisect", spec, "--test", "t", "--run-dir", dir.path() + "/runs"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(run.out, m, std::regex(R"(min_headroom 25% above .*\n    memory: (\d+)MiB)")))
      << run.out;
  auto with = run_memrun({spec, "--set", "t.memory=" + m[1].str() + "MiB", "--run-dir", dir.path() + "/runs"});
  EXPECT_EQ(with.exit_code, 0) << run.out << with.out;
}

TEST_F(Bisect, AFailureThatIsNotMemorysIsNeverTakenForALimit) {
  // Fails below 100 MB without using any memory: a flaky or broken test,
  // whose failures say nothing about its limit.
  auto flaky = run_memrun({"bisect", "--memory-range", "16MiB:256MiB", "--run-dir", dir.path() + "/runs", "--", "sh",
                           "-c", "[ $MEMRUN_MEMORY_LIMIT -gt 100000000 ] || exit 1"});
  EXPECT_EQ(flaky.exit_code, 1) << flaky.out << flaky.err;
  EXPECT_NE(flaky.err.find("without reaching the limit"), std::string::npos) << flaky.err;
  EXPECT_NE(flaky.err.find("--trials"), std::string::npos) << flaky.err;
  EXPECT_EQ(flaky.out.find("smallest passing limit"), std::string::npos) << flaky.out;
  auto broken = run_memrun({"bisect", "--memory-range", "16MiB:64MiB", "--run-dir", dir.path() + "/runs", "--", "sh",
                            "-c", "exit 3"});
  EXPECT_EQ(broken.exit_code, 1);
  EXPECT_NE(broken.err.find("for another reason than memory"), std::string::npos) << broken.err;
  EXPECT_EQ(broken.err.find("raise --memory-range"), std::string::npos) << broken.err;
}

TEST_F(Bisect, PageCacheMakesTheMinimumLowerThanThePeak) {
  auto run = run_memrun({"bisect", std::string(SOURCE_DIR) + "/specs/shell.yaml", "--test", "sort-spills-to-disk",
                         "--tolerance", "5%", "--run-dir", dir.path() + "/runs"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(run.out, m, std::regex(R"(\((\d+) bytes\).*peak without pressure ([0-9.]+) MiB)")))
      << run.out;
  EXPECT_LT(std::stod(m[1]) / MiB, std::stod(m[2]) * 0.8) << run.out;
}

TEST_F(Bisect, ScaleAndSetTightenLimits) {
  std::string yaml = "tests:\n  - {name: a, run: [{W}, --touch, 40MiB], memory: 64MiB}\n"
                     "  - {name: b, run: [{W}, --touch, 40MiB], memory: 64MiB}\n";
  auto scaled = run_spec(dir, yaml, {"--scale", "0.5"});
  EXPECT_EQ(test_named(scaled, "a")["limit_bytes"], 32 * MiB);
  EXPECT_EQ(test_named(scaled, "a")["outcome"], "oom");
  auto set = run_spec(dir, yaml, {"--set", "b.memory=48MiB"});
  EXPECT_EQ(test_named(set, "a")["limit_bytes"], 64 * MiB);
  EXPECT_EQ(test_named(set, "b")["limit_bytes"], 48 * MiB);
  auto bad = run_spec(dir, yaml, {"--set", "nope.memory=1GiB"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("no test named 'nope'"), std::string::npos);
}

// A limit --scale or --set lowers passes the spec's checks again: below
// the test's memory_high it is a bad spec (exit 2, at the test's place),
// and nothing runs.
TEST_F(Bisect, AScaledLimitBelowMemoryHighIsABadSpec) {
  std::string yaml = "tests:\n  - {name: a, run: [{W}, --touch, 1MiB], memory: 64MiB, memory_high: 48MiB}\n";
  auto scaled = run_spec(dir, yaml, {"--scale", "0.5"});
  EXPECT_EQ(scaled.exit_code, 2) << scaled.out << scaled.err;
  EXPECT_NE(scaled.err.find(dir.path() + "/spec.yaml:2:5: test 'a': memory_high must be below memory (32.0 MiB) once "
                                         "--scale 0.5 applies; give a larger --scale"),
            std::string::npos)
      << scaled.err;
  EXPECT_TRUE(scaled.report.is_null()) << scaled.report;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/runs"));
  auto set = run_spec(dir, yaml, {"--set", "a.memory=40MiB"});
  EXPECT_EQ(set.exit_code, 2) << set.out << set.err;
  EXPECT_NE(set.err.find("once --set a.memory=40MiB applies; set a larger memory"), std::string::npos) << set.err;
  // Above it, the spec runs (a verdict of its own: v1 has no memory_high).
  auto above = run_spec(dir, yaml, {"--scale", "0.9"});
  EXPECT_NE(above.exit_code, 2) << above.err;
  EXPECT_TRUE(test_named(above, "a").contains("outcome")) << above.out;
}

TEST_F(Bisect, ReproPrintsTheCommandThatRerunsOneTest) {
  auto run = run_spec(dir, "env: {K: v}\ntests:\n  - {name: t, run: [{W}, --touch, 100MiB], memory: 64MiB}\n");
  std::string report = dir.path() + "/report.json";
  auto repro = run_memrun({"repro", report, "t"});
  EXPECT_EQ(repro.exit_code, 0) << repro.err;
  // The memrun that made the report, by its absolute path: the one on
  // PATH may be another.
  std::string self = std::filesystem::canonical(memrun_bin()).string();
  // Words of plain characters stay bare; the rest are quoted.
  EXPECT_NE(repro.out.find("env 'K=v' '" + self + "' " + dir.path() + "/spec.yaml --filter '^t$' --set t.memory=64MiB"),
            std::string::npos)
      << repro.out;
  // And the printed command does rerun it: the same OOM.
  std::string command = repro.out.substr(0, repro.out.find('\n'));
  auto again = run_program({"sh", "-c", command + " --run-dir " + dir.path() + "/again"});
  EXPECT_EQ(again.exit_code, 1) << again.out << again.err;
  EXPECT_NE(again.out.find("got oom at 64.0 MiB"), std::string::npos) << again.out;
}

}  // namespace
}  // namespace memrun::testing

// memrun exec: one command under one limit, against the real kernel, with
// the verdicts, figures and exit codes of a spec run.
#include <gtest/gtest.h>

#include <filesystem>

#include "cgroup/fs.h"
#include "harness.h"
#include "runner/units.h"

namespace memrun::testing {
namespace {

class Exec : public MemrunTest {
 protected:
  RunOutput exec(const std::vector<std::string>& flags, const std::vector<std::string>& command) {
    std::string report = dir.path() + "/exec.json";
    std::filesystem::remove(report);
    std::vector<std::string> args = {"exec", "--json", report, "--run-dir", dir.path() + "/runs"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    RunOutput r = run_memrun(args);
    if (std::filesystem::exists(report)) r.report = nlohmann::json::parse(fs::read_file(report).value_or("{}"));
    return r;
  }
};

TEST_F(Exec, AnOomKillIsTheVerdictAndExpectOomAcceptsIt) {
  auto killed = exec({"--memory", "64MiB"}, {workload(), "--touch", "100MiB"});
  EXPECT_EQ(killed.exit_code, 1) << killed.out << killed.err;
  ASSERT_EQ(killed.report["tests"].size(), 1u) << killed.out;
  const auto& t = killed.report["tests"][0];
  EXPECT_EQ(t["outcome"], "oom");
  EXPECT_EQ(t["name"], "memrun-workload");
  EXPECT_GE(t["oom_kills"].get<int>(), 1);
  EXPECT_NE(killed.out.find("FAIL  memrun-workload  oom"), std::string::npos) << killed.out;
  // A GoogleTest case's name, as memrun_discover_tests passes it: kept
  // whole in every output, '/' included.
  auto expected = exec({"--memory", "64MiB", "--expect", "oom", "--name", "Inst/Big.Loads/3"},
                       {workload(), "--touch", "100MiB"});
  EXPECT_EQ(expected.exit_code, 0) << expected.out;
  EXPECT_EQ(expected.report["tests"][0]["name"], "Inst/Big.Loads/3");
  EXPECT_NE(expected.out.find("PASS  Inst/Big.Loads/3  oom (expected)"), std::string::npos) << expected.out;
}

TEST_F(Exec, TheSameFiguresAsTheSameCommandInASpec) {
  auto one = exec({"--memory", "128MiB", "--min-headroom", "20%"}, {workload(), "--touch", "40MiB"});
  ASSERT_EQ(one.exit_code, 0) << one.out << one.err;
  auto spec = run_spec(dir, "tests:\n  - {name: t, run: [{W}, --touch, 40MiB], memory: 128MiB, min_headroom: 20%}\n");
  ASSERT_EQ(spec.exit_code, 0) << spec.out;
  double a = one.report["tests"][0]["peak_bytes"].get<double>(), b = test_named(spec, "t")["peak_bytes"].get<double>();
  // The program's and its libraries' page cache (~9 MiB of files here) is
  // charged to whichever run faults it in after the host evicted it, as it
  // may under load (a VM beside the tests): a 2 MiB bound failed once so.
  EXPECT_NEAR(a, b, 10.0 * MiB);
  EXPECT_GE(a, 40.0 * MiB);
  // Headroom is held to --min-headroom as to a spec's.
  auto tight = exec({"--memory", "48MiB", "--min-headroom", "20%"}, {workload(), "--touch", "40MiB"});
  EXPECT_EQ(tight.exit_code, 1) << tight.out;
  EXPECT_NE(tight.out.find("below min_headroom"), std::string::npos) << tight.out;
}

TEST_F(Exec, BadFlagsSayWhatToWriteAndRunNothing) {
  auto small = exec({"--memory", "64"}, {"true"});
  EXPECT_EQ(small.exit_code, 2);
  EXPECT_NE(small.err.find("did you mean 64MiB?"), std::string::npos) << small.err;
  auto expect = exec({"--memory", "64MiB", "--expect", "crash"}, {"true"});
  EXPECT_EQ(expect.exit_code, 2);
  EXPECT_NE(expect.err.find("must be pass, oom, fail or an exit code"), std::string::npos) << expect.err;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/exec.json"));
  auto none = run_memrun({"exec", "--memory", "64MiB"});
  EXPECT_EQ(none.exit_code, 2);
}

}  // namespace
}  // namespace memrun::testing

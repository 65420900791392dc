// `memrun compare` and `--baseline` on real runs under real limits: a real
// regression is called with its figures, an unchanged test is unchanged
// however often it reruns, and a declared input's page cache costs the same
// cold or warm. The rule itself is unit-tested in compare_test.cc.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "harness.h"
#include "lanes.h"
#include "runner/base/units.h"

namespace memrun::testing {
namespace {

constexpr double kMiB = static_cast<double>(MiB);

class CompareCommand : public MemrunTest {
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
    r.report = nlohmann::json::parse(read_text(out, "{}"));
    return r;
  }
};

// compare is memrun's own, whatever the backend: on the host only (exceptions labelled at their tests).
MEMRUN_LANES(CompareCommand, "*", kHostLane);

TEST_F(CompareCommand, ThirtyPercentMoreIsARegressionWithTheRightFigures) {
  // The workload's binary read once outside both runs: its page cache,
  // cold, would be charged to whichever test faults it in first.
  ASSERT_EQ(run_program({workload(), "--touch", "1MiB"}).exit_code, 0);
  auto base_run = run_as("tests:\n  - {name: grows, run: [{W}, --touch, 40MiB], memory: 128MiB}\n", "base.json");
  auto head_run = run_as("tests:\n  - {name: grows, run: [{W}, --touch, 52MiB], memory: 128MiB}\n", "head.json");
  ASSERT_EQ(base_run.exit_code, 0) << base_run.out;
  ASSERT_EQ(head_run.exit_code, 0) << head_run.out;
  auto c = compare("base.json", "head.json");
  EXPECT_EQ(c.exit_code, 1) << c.out << c.err;
  ASSERT_EQ(c.report["tests"].size(), 1u) << c.out;
  const auto& t = c.report["tests"][0];
  EXPECT_EQ(t["change"], "regressed") << c.out;
  EXPECT_EQ(t["figure"], "peak");
  // The figures are the reports' peaks (the kernel's: what was touched,
  // plus the workload's own pages, and page cache a cold start charges
  // to whichever test runs first: never compared to a fixed figure), and
  // the change is theirs.
  auto peak = [&](const char* report) {
    return nlohmann::json::parse(read_text(dir.path() + "/" + report, "{}"))["tests"][0]["peak_bytes"].get<double>();
  };
  double base = t["base_bytes"].get<double>(), head = t["head_bytes"].get<double>();
  EXPECT_EQ(base, peak("base.json"));
  EXPECT_EQ(head, peak("head.json"));
  EXPECT_GE(base, 40 * kMiB);
  EXPECT_GE(head, 52 * kMiB);
  EXPECT_EQ(t["change_bytes"].get<double>(), head - base);
  EXPECT_NEAR(t["change_pct"].get<double>(), (head - base) / base * 100, 0.01);
  EXPECT_NE(c.out.find("1 regression, 0 improvements, 0 unchanged"), std::string::npos) << c.out;
}

TEST_F(CompareCommand, AnUnchangedTestRerunFiveTimesIsUnchangedEveryTime) {
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
    auto report = nlohmann::json::parse(read_text(dir.path() + "/head.json", "{}"));
    EXPECT_EQ(report["comparison"]["summary"]["unchanged"], 1) << report["comparison"].dump();
    EXPECT_EQ(report["comparison"]["tests"][0]["change"], "unchanged");
    EXPECT_NE(read_text(junit).find("<testsuite name=\"memrun compare\" tests=\"1\" failures=\"0\""),
              std::string::npos)
        << read_text(junit);
    if (i == 0) {
      auto check = run_program({"xmllint", "--noout", "--schema", std::string(SOURCE_DIR) + "/tests/junit.xsd", junit});
      EXPECT_EQ(check.exit_code, 0) << check.err;
    }
  }
  // The base kept each of its three runs.
  auto report = nlohmann::json::parse(read_text(dir.path() + "/base.json", "{}"));
  EXPECT_EQ(report["tests"][0]["runs"].size(), 3u);
}

TEST_F(CompareCommand, ThreeRunsASideAreHeldToTheirOwnSpreadAndSaySo) {
  // The workload's binary read once outside both runs (see above).
  ASSERT_EQ(run_program({workload(), "--touch", "1MiB"}).exit_code, 0);
  const char* steady = "tests:\n  - {name: t, run: [{W}, --touch, 40MiB], memory: 128MiB}\n";
  ASSERT_EQ(run_as(steady, "base.json", {"--repeat", "3"}).exit_code, 0);
  ASSERT_EQ(run_as(steady, "same.json", {"--repeat", "3"}).exit_code, 0);
  ASSERT_EQ(run_as("tests:\n  - {name: t, run: [{W}, --touch, 50MiB], memory: 128MiB}\n", "grown.json",
                   {"--repeat", "3"}).exit_code, 0);
  // Equal code: unchanged, held to its spread's threshold (its runs agree
  // within a few pages: the 1 MiB floor), and every output says so.
  auto c = compare("base.json", "same.json");
  EXPECT_EQ(c.exit_code, 0) << c.out;
  const auto& t = c.report["tests"][0];
  EXPECT_EQ(t["change"], "unchanged") << c.out;
  EXPECT_EQ(t["threshold"]["rule"], "spread") << t.dump();
  std::string why = t["threshold"]["why"];
  EXPECT_EQ(why.rfind("spread ", 0), 0u) << why;
  EXPECT_NE(c.out.find(why), std::string::npos) << c.out;
  // A quarter more: regressed, with the same kind of threshold.
  c = compare("base.json", "grown.json");
  EXPECT_EQ(c.exit_code, 1) << c.out;
  EXPECT_EQ(c.report["tests"][0]["change"], "regressed") << c.out;
  EXPECT_EQ(c.report["tests"][0]["threshold"]["rule"], "spread") << c.out;
  EXPECT_NE(c.out.find("more than the threshold"), std::string::npos) << c.out;
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

// Page cache, cold and warm: the kernel's, proven in the v2 VM too.
MEMRUN_LANES(CompareCommand, "PageCacheOfADeclaredInputIsTheSameColdOrWarm", kHostLane | kV2Lane);
TEST_F(CompareCommand, PageCacheOfADeclaredInputIsTheSameColdOrWarm) {
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
    auto report = nlohmann::json::parse(read_text(dir.path() + (run == &cold ? "/cold.json" : "/warm.json"), "{}"));
    EXPECT_GE(report["tests"][0]["peak_bytes"].get<double>() / kMiB, 60.0)
        << "the run did not pay for reading its input: " << report["tests"][0].dump();
  }
  auto c = compare("cold.json", "warm.json");
  EXPECT_EQ(c.exit_code, 0) << c.out;
  EXPECT_EQ(c.report["tests"][0]["change"], "unchanged") << c.out;
}

// Reports made on each backend: proven in the v2 VM too.
MEMRUN_LANES(CompareCommand, "ReportsOfAnotherBackendAreNotComparedSilently", kHostLane | kV2Lane);
TEST_F(CompareCommand, ReportsOfAnotherBackendAreNotComparedSilently) {
  ASSERT_EQ(run_as("tests:\n  - {name: t, run: [{W}, --touch, 8MiB], memory: 64MiB}\n", "base.json").exit_code, 0);
  ASSERT_EQ(run_as("tests:\n  - {name: t, run: [{W}, --touch, 40MiB], memory: 64MiB}\n", "head.json").exit_code, 0);
  // The same head as if measured elsewhere, with another memrun.
  auto head = nlohmann::json::parse(read_text(dir.path() + "/head.json", "{}"));
  head["host"]["backend"] = head["host"]["backend"] == "v1" ? "v2" : "v1";
  head["memrun_version"] = "9.9.9";
  dir.write("other.json", head.dump());
  auto c = compare("base.json", "other.json");
  EXPECT_EQ(c.exit_code, 0) << c.out;
  EXPECT_EQ(c.report["tests"][0]["change"], "not comparable") << c.out;
  EXPECT_NE(c.out.find("warning: memrun version differs"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("measured on another backend"), std::string::npos) << c.out;
}

// A base of two tests that pass with their peaks (40 and 8 MiB).
constexpr const char* kPassing =
    "tests:\n  - {name: sorts, run: [{W}, --touch, 40MiB], memory: 64MiB}\n"
    "  - {name: small, run: [{W}, --touch, 8MiB], memory: 64MiB}\n";

TEST_F(CompareCommand, ACrashInHeadFailsTheGateAndIsNeverAnImprovement) {
  ASSERT_EQ(run_as(kPassing, "base.json", {"--repeat", "2"}).exit_code, 0);
  // Head's `sorts` dies of a signal at once, far below base's peak: before,
  // this was `improved -37 MiB`.
  auto head = run_as("tests:\n  - {name: sorts, run: 'kill -SEGV $$', memory: 64MiB}\n"
                     "  - {name: small, run: [{W}, --touch, 8MiB], memory: 64MiB}\n",
                     "head.json", {"--repeat", "2"});
  ASSERT_EQ(head.exit_code, 1) << head.out << head.err;
  auto c = compare("base.json", "head.json");
  EXPECT_EQ(c.exit_code, 1) << c.out << c.err;
  ASSERT_EQ(c.report["tests"].size(), 2u) << c.out;
  const auto& t = c.report["tests"][0];
  EXPECT_EQ(t["name"], "sorts");
  EXPECT_EQ(t["change"], "failed in head") << c.out;
  EXPECT_EQ(t["head_outcomes"], "fail 2/2");
  EXPECT_EQ(t["base_outcomes"], "pass 2/2");
  EXPECT_NE(t["reason"].get<std::string>().find("killed by signal 11"), std::string::npos) << t.dump();
  EXPECT_TRUE(t["change_bytes"].is_null());
  EXPECT_EQ(c.report["tests"][1]["change"], "unchanged");
  EXPECT_EQ(c.out.find("improved"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("1 failed in head"), std::string::npos) << c.out;
  // Through --baseline, the run's own outputs say it too.
  std::string md = dir.path() + "/summary.md";
  auto again = run_as("tests:\n  - {name: sorts, run: 'kill -SEGV $$', memory: 64MiB}\n", "again.json",
                      {"--baseline", dir.path() + "/base.json", "--markdown", md});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(read_text(md).find("❌ failed in head"), std::string::npos) << read_text(md);
}

TEST_F(CompareCommand, AnOomInHeadFailsTheGateAndOomOnBothSidesIsSaid) {
  ASSERT_EQ(run_as(kPassing, "base.json").exit_code, 0);
  const char* killed = "tests:\n  - {name: sorts, run: [{W}, --touch, 100MiB], memory: 64MiB}\n"
                       "  - {name: small, run: [{W}, --touch, 8MiB], memory: 64MiB}\n";
  ASSERT_EQ(run_as(killed, "head.json").exit_code, 1);
  auto c = compare("base.json", "head.json");
  EXPECT_EQ(c.exit_code, 1) << c.out;
  EXPECT_EQ(c.report["tests"][0]["change"], "failed in head") << c.out;
  EXPECT_EQ(c.report["tests"][0]["head_outcomes"], "oom 1/1") << c.out;
  EXPECT_NE(c.out.find("oom 1/1"), std::string::npos) << c.out;
  // Killed on both sides: not `unchanged +0 B`, and the gate fails.
  ASSERT_EQ(run_as(killed, "head2.json").exit_code, 1);
  c = compare("head.json", "head2.json");
  EXPECT_EQ(c.exit_code, 1) << c.out;
  EXPECT_EQ(c.report["tests"][0]["change"], "failed in both") << c.out;
  std::istringstream lines(c.out);
  for (std::string line; std::getline(lines, line);)
    if (line.find(" sorts ") != std::string::npos) {
      EXPECT_EQ(line.find("+0 B"), std::string::npos) << c.out;
    }
  // Fixed in head: said, and the gate passes.
  c = compare("head.json", "base.json");
  EXPECT_EQ(c.exit_code, 0) << c.out;
  EXPECT_EQ(c.report["tests"][0]["change"], "failed in base") << c.out;
}

TEST_F(CompareCommand, TestsLeftOutByFilterTagOrShardAreNotGone) {
  const char* spec = "tests:\n  - {name: a, run: [{W}, --touch, 8MiB], memory: 64MiB, tags: [fast]}\n"
                     "  - {name: b, run: [{W}, --touch, 8MiB], memory: 64MiB}\n"
                     "  - {name: c, run: [{W}, --touch, 8MiB], memory: 64MiB}\n";
  ASSERT_EQ(run_as(spec, "base.json").exit_code, 0);
  std::string base = dir.path() + "/base.json";
  for (const auto& selection : std::vector<std::vector<std::string>>{
           {"--filter", "^a$"}, {"--tag", "fast"}, {"--shard", "1/3"}, {"--shard", "3/3"}}) {
    SCOPED_TRACE(selection[0] + " " + selection[1]);
    std::vector<std::string> args = selection;
    args.insert(args.end(), {"--baseline", base});
    auto head = run_as(spec, "head.json", args);
    EXPECT_EQ(head.exit_code, 0) << head.out << head.err;
    EXPECT_NE(head.out.find("0 regressions, 0 improvements, 1 unchanged (base"), std::string::npos) << head.out;
    EXPECT_EQ(head.out.find("gone"), std::string::npos) << head.out;
  }
  // A test really gone from the spec still is, where the selection would
  // have taken it.
  auto head = run_as("tests:\n  - {name: a, run: [{W}, --touch, 8MiB], memory: 64MiB}\n", "head.json",
                     {"--baseline", base, "--filter", "^[ab]$"});
  EXPECT_NE(head.out.find("1 unchanged, 1 gone"), std::string::npos) << head.out;
}

TEST_F(CompareCommand, AReportThatIsNotAWholeReportIsRefusedAsABase) {
  ASSERT_EQ(run_as(kPassing, "head.json").exit_code, 0);
  dir.write("bare.json", "{\"schema\": \"memrun-report/1\", \"tests\": []}");
  auto c = compare("bare.json", "head.json");
  EXPECT_EQ(c.exit_code, 2) << c.out;
  EXPECT_NE(c.err.find("field 'memrun_version' is missing"), std::string::npos) << c.err;
  // A negative peak is not 16 EiB.
  auto head = nlohmann::json::parse(read_text(dir.path() + "/head.json", "{}"));
  head["tests"][1]["peak_bytes"] = -1;
  dir.write("negative.json", head.dump());
  c = compare("negative.json", "head.json");
  EXPECT_EQ(c.exit_code, 2) << c.out;
  EXPECT_NE(c.err.find("tests[1] 'small': field 'peak_bytes' is -1"), std::string::npos) << c.err;
  auto run = run_as(kPassing, "again.json", {"--baseline", dir.path() + "/negative.json"});
  EXPECT_EQ(run.exit_code, 2) << run.out;
  EXPECT_EQ(run.out.find("PASS"), std::string::npos) << "tests ran before the base was read: " << run.out;
}

TEST_F(CompareCommand, ReproRerunsTheSameWayWithTheVariablesTheSpecRead) {
  // The spec builds the test's environment from memrun's own (a `python:`
  // built from POLARS_VERSION, in the issue): the rerun must see the same.
  const char* spec = "env: {WANT: \"${MEMRUN_TEST_VERSION}\"}\n"
                     "tests:\n  - {name: versioned, run: 'test \"$WANT\" = 0.20.15', memory: 16MiB}\n";
  std::string text = spec;
  std::string path = dir.write("spec.yaml", text);
  auto first = run_program({"env", "MEMRUN_TEST_VERSION=0.20.15", memrun_bin(), path, "--json",
                            dir.path() + "/r.json", "--run-dir", dir.path() + "/runs", "--host-cgroups"},
                           dir.path());
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  auto repro = run_memrun({"repro", dir.path() + "/r.json", "versioned"});
  ASSERT_EQ(repro.exit_code, 0) << repro.err;
  EXPECT_NE(repro.out.find("'MEMRUN_TEST_VERSION=0.20.15'"), std::string::npos) << repro.out;
  EXPECT_NE(repro.out.find(" --host-cgroups"), std::string::npos) << repro.out;
  EXPECT_NE(repro.out.find("'" + std::filesystem::canonical(memrun_bin()).string() + "'"), std::string::npos)
      << repro.out;
  // From a shell without the variable, and without memrun on PATH.
  std::string line = repro.out.substr(0, repro.out.find('\n'));
  auto rerun = run_program({"env", "-u", "MEMRUN_TEST_VERSION", "PATH=/usr/bin:/bin", "sh", "-c",
                            line + " --run-dir " + dir.path() + "/again"});
  EXPECT_EQ(rerun.exit_code, 0) << line << "\n" << rerun.out << rerun.err;
  EXPECT_NE(rerun.out.find(": 1 test on"), std::string::npos) << rerun.out;
}

TEST_F(CompareCommand, ReproOfAnExecReportRerunsTheCommand) {
  std::string report = dir.path() + "/exec.json";
  auto first = run_memrun({"exec", "--memory", "32MiB", "--name", "quote's", "--json", report, "--run-dir",
                           dir.path() + "/runs", "--", "sh", "-c", "echo \"it's $0\"; exit 3", "a b"});
  // memrun exec hands on the command's status where memory held.
  ASSERT_EQ(first.exit_code, 3) << first.out << first.err;
  auto repro = run_memrun({"repro", report, "quote's"});
  ASSERT_EQ(repro.exit_code, 0) << repro.err;
  EXPECT_EQ(repro.out.find("'memrun exec'"), std::string::npos) << repro.out;
  std::string line = repro.out.substr(0, repro.out.find('\n'));
  // Its limit and timeout as a person writes them (the line runs as printed).
  EXPECT_NE(line.find(" exec --memory 32MiB "), std::string::npos) << line;
  EXPECT_NE(line.find(" --timeout 10m "), std::string::npos) << line;
  ASSERT_NE(line.find(" exec "), std::string::npos) << line;
  line.replace(line.find(" exec "), 6, " exec --run-dir " + dir.path() + "/again ");
  auto rerun = run_program({"sh", "-c", line});
  // The same command, the same way: it exits 3 again, where pass was expected.
  EXPECT_EQ(rerun.exit_code, 3) << line << "\n" << rerun.out << rerun.err;
  EXPECT_NE(rerun.out.find("exit 3"), std::string::npos) << line << "\n" << rerun.out;
  EXPECT_NE(rerun.out.find("quote's"), std::string::npos) << rerun.out;
}

}  // namespace
}  // namespace memrun::testing

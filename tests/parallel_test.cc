// Parallel runs (-j) within a memory budget, against the real kernel: the
// sum of the limits of running tests never exceeds the budget, verdicts and
// peaks do not depend on -j, and the live view draws in a real terminal.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "cgroup/cgroup.h"
#include "harness.h"
#include "lanes.h"
#include "runner/base/shell.h"
#include "runner/base/units.h"
#include "runner/run/process_setup.h"
#include "runner/run/run.h"

namespace memrun::testing {
namespace {


class Parallel : public MemrunTest {};

TEST_F(Parallel, EightTestsOf200MiBWithin400MiBRunTwoAtATimeAndAllPass) {
  // Each test notes its own start and end (the tests' clock, not memrun's)
  // and touches 150 MiB: the kernel must see real memory, at once. The
  // first two wait for each other at a barrier, so that two at once is
  // certain (a runner that ran one at a time fails them there); the later
  // ones find the barrier passed.
  std::string events = dir.path() + "/events", barrier = dir.path() + "/barrier";
  std::filesystem::create_directory(barrier);
  std::string yaml = "tests:\n";
  for (int i = 1; i <= 8; ++i)
    yaml += "  - name: t" + std::to_string(i) + "\n    memory: 200MiB\n    run: 'echo \"$(date +%s%3N) 1\" >> " + events +
            "; {W} --arrive " + barrier + " --touch 150MiB --hold 700ms; echo \"$(date +%s%3N) -1\" >> " + events +
            "; echo $MEMRUN_TEST'\n";
  auto run = run_spec(dir, yaml, {"-j", "8", "--memory-budget", "400MiB"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const auto& tests = run.report["tests"];
  ASSERT_EQ(tests.size(), 8u);
  EXPECT_EQ(run.report["jobs"], 8);
  EXPECT_EQ(run.report["memory_budget_bytes"], 400 * MiB);
  for (int i = 1; i <= 8; ++i) {
    const auto& t = tests[i - 1];
    EXPECT_EQ(t["name"], "t" + std::to_string(i)) << "the report keeps the spec's order";
    EXPECT_TRUE(t["passed"]) << t.dump();
    EXPECT_GE(t["peak_bytes"], 150 * MiB);
    // Each test's output stays its own.
    EXPECT_EQ(trimmed(read_text(t["stdout"].get<std::string>())), t["name"]);
  }
  // By memrun's report: never more than two (the budget), and two at the
  // barrier; the promised memory never above the budget.
  EXPECT_LE(most_at_once(tests), 2) << times_of(tests);
  EXPECT_GE(most_at_once(tests), 2) << times_of(tests);
  EXPECT_LE(most_promised(tests), 400 * MiB) << times_of(tests);
  // By the tests' own clocks: never more than two either.
  std::vector<std::pair<int64_t, int64_t>> seen;
  std::istringstream in(read_text(events));
  for (int64_t t; in >> t;) {
    int64_t delta;
    in >> delta;
    seen.push_back({t, delta});
  }
  ASSERT_EQ(seen.size(), 16u);
  EXPECT_LE(peak_sum(seen), 2) << read_text(events);
}

TEST_F(Parallel, VerdictsAndPeaksAreTheSameWhateverJ) {
  const std::string yaml =
      "tests:\n"
      "  - {name: passes, run: [{W}, --touch, 60MiB, --hold, 200ms], memory: 128MiB}\n"
      "  - {name: ooms, run: [{W}, --touch, 100MiB], memory: 64MiB}\n"
      "  - {name: expected-oom, run: [{W}, --touch, 100MiB], memory: 48MiB, expect: oom}\n"
      "  - {name: fails, run: '{W} --arrive \"$BARRIER\" --exit 3', memory: 16MiB}\n"
      "  - {name: exit-4, run: '{W} --arrive \"$BARRIER\" --exit 4', memory: 16MiB, expect: 4}\n"
      "  - {name: times-out, run: 'sleep 10', memory: 16MiB, timeout: 300ms}\n"
      "  - {name: tree, run: [{W}, --children, 3, --touch, 20MiB, --hold, 200ms], memory: 128MiB}\n"
      "  - {name: headroom, run: [{W}, --touch, 50MiB], memory: 64MiB, min_headroom: 32MiB}\n";
  // With -j 4, two tests meet at a barrier (BARRIER names its folder; with
  // -j 1 it is empty and they do not wait): that it ran tests side by side
  // is certain, not likely.
  auto one = run_spec(dir, yaml, {"-j", "1"});
  std::string barrier = dir.path() + "/barrier";
  std::filesystem::create_directory(barrier);
  auto many = run_spec_with(dir, yaml, {"env", "BARRIER=" + barrier, memrun_bin()}, {"-j", "4", "--memory-budget", "512MiB"});
  ASSERT_EQ(one.report["tests"].size(), 8u) << one.out << one.err;
  ASSERT_EQ(many.report["tests"].size(), 8u) << many.out << many.err;
  EXPECT_EQ(one.exit_code, many.exit_code);
  EXPECT_EQ(one.report["summary"], many.report["summary"]);
  EXPECT_GE(most_at_once(many.report["tests"]), 2) << "-j 4 ran one at a time: " << times_of(many.report["tests"]);
  EXPECT_LE(most_at_once(many.report["tests"]), 4) << times_of(many.report["tests"]);
  for (size_t i = 0; i < 8; ++i) {
    const auto &a = one.report["tests"][i], &b = many.report["tests"][i];
    SCOPED_TRACE(a["name"].get<std::string>());
    for (const char* key : {"name", "outcome", "passed", "exit_code", "signal", "limit_bytes", "oom_kills", "expected"})
      EXPECT_EQ(a[key], b[key]) << key;
    // The reason, but for the figures a min_headroom failure quotes.
    auto reason = [](const nlohmann::json& t) {
      std::string r = t["reason"];
      if (r.rfind("headroom ", 0) != 0) return r;
      auto from = r.find(" is below");
      return r.substr(from, r.find(" (peak") - from);
    };
    EXPECT_EQ(reason(a), reason(b));
    // Peaks: within 2 MiB. Shared pages of the workload's binary and
    // libraries are charged to whichever group touches them first, which
    // differs between runs whatever -j is. Not the tree's: how far its
    // children's 20 MiB overlap is the scheduler's.
    if (a["name"] != "tree") {
      EXPECT_NEAR(a["peak_bytes"].get<double>(), b["peak_bytes"].get<double>(), 2.0 * MiB);
    }
  }
}

// memrun's own, whatever the backend: on the host only.
MEMRUN_LANES(Parallel, "ATestOverTheBudgetIsRefusedUnlessOversubscribingAndThenRunsAlone", kHostLane);
TEST_F(Parallel, ATestOverTheBudgetIsRefusedUnlessOversubscribingAndThenRunsAlone) {
  const std::string yaml =
      "tests:\n"
      "  - {name: small-1, run: '{W} --arrive \"$BARRIER\" --await 3 --touch 20MiB --hold 300ms', memory: 100MiB}\n"
      "  - {name: huge, run: [{W}, --touch, 20MiB, --hold, 300ms], memory: 500MiB}\n"
      "  - {name: small-2, run: '{W} --arrive \"$BARRIER\" --await 3 --touch 20MiB --hold 300ms', memory: 100MiB}\n"
      "  - {name: small-3, run: '{W} --arrive \"$BARRIER\" --await 3 --touch 20MiB --hold 300ms', memory: 100MiB}\n";
  // The three small tests fit the budget together: they meet at a barrier,
  // so that they ran at once is certain.
  std::string barrier = dir.path() + "/barrier";
  std::filesystem::create_directory(barrier);
  auto refused = run_spec_with(dir, yaml, {"env", "BARRIER=" + barrier, memrun_bin()}, {"-j", "4", "--memory-budget", "300MiB"});
  EXPECT_EQ(refused.exit_code, 1) << refused.out << refused.err;
  const auto& huge = test_named(refused, "huge");
  EXPECT_EQ(huge["outcome"], "error");
  EXPECT_TRUE(huge["started"].is_null());
  EXPECT_NE(huge["reason"].get<std::string>().find("exceeds the memory budget 300.0 MiB"), std::string::npos)
      << huge["reason"];
  EXPECT_NE(refused.out.find("--allow-oversubscribe"), std::string::npos) << refused.out;
  for (const char* name : {"small-1", "small-2", "small-3"}) EXPECT_TRUE(test_named(refused, name)["passed"]);
  EXPECT_EQ(most_at_once(refused.report["tests"]), 3) << times_of(refused.report["tests"]);

  auto alone = run_spec(dir, yaml, {"-j", "4", "--memory-budget", "300MiB", "--allow-oversubscribe"});
  EXPECT_EQ(alone.exit_code, 0) << alone.out << alone.err;
  const auto& h = test_named(alone, "huge");
  ASSERT_FALSE(h["started"].is_null());
  int64_t from = epoch_ms(h["started"]), to = epoch_ms(h["ended"]);
  for (const auto& t : alone.report["tests"]) {
    if (t["name"] == "huge") continue;
    bool apart = epoch_ms(t["ended"]) <= from || epoch_ms(t["started"]) >= to;
    EXPECT_TRUE(apart) << t["name"] << " ran beside the oversubscribed test";
  }
}

// memrun's own limit of open files; under TCG forty processes take minutes to start.
MEMRUN_LANES(Parallel, "ManyAtOnceOutgrowASmallOpenFilesLimitButTestsKeepIt", kHostLane);
TEST_F(Parallel, ManyAtOnceOutgrowASmallOpenFilesLimitButTestsKeepIt) {
  // 40 tests at once hold ~200-400 descriptors: over a soft limit of 128,
  // which memrun raises for itself and gives back to each test.
  // With BARRIER set, all 40 wait for each other: that they ran at once is
  // certain. Without it (the capped run below) each sleeps NAP seconds.
  std::string wait = "[ -z \"$BARRIER\" ] || exec {W} --arrive \"$BARRIER\" --await 40; sleep ${NAP:-1}";
  std::string yaml = "tests:\n  - {name: limit, run: 'ulimit -n; " + wait + "', memory: 16MiB}\n";
  for (int i = 0; i < 39; ++i) yaml += "  - {name: t" + std::to_string(i) + ", run: '" + wait + "', memory: 16MiB}\n";
  std::string barrier = dir.path() + "/barrier";
  std::filesystem::create_directory(barrier);
  auto raised = run_spec_with(dir, yaml, {"env", "BARRIER=" + barrier, "sh", "-c", "ulimit -Sn 128 && exec \"$@\"", "sh", memrun_bin()},
                              {"-j", "40"});
  ASSERT_EQ(raised.exit_code, 0) << raised.out << raised.err;
  EXPECT_EQ(raised.report["jobs"], 40) << raised.out;
  EXPECT_EQ(most_at_once(raised.report["tests"]), 40) << times_of(raised.report["tests"]);
  EXPECT_EQ(trimmed(read_text(test_named(raised, "limit")["stdout"].get<std::string>())), "128");
  // A hard limit it cannot raise: fewer at once, said, and still all clean.
  auto capped = run_spec_with(dir, yaml, {"env", "NAP=0.2", "sh", "-c", "ulimit -n 128 && exec \"$@\"", "sh", memrun_bin()},
                              {"-j", "40"});
  ASSERT_EQ(capped.exit_code, 0) << capped.out << capped.err;
  // (128 less memrun's own, in slots of kFilesPerSlot each.)
  int fit = (128 - kFilesOfMemrun) / kFilesPerSlot;
  EXPECT_NE(capped.out.find("-j 40: the open-files limit allows " + std::to_string(fit) + " tests at once"),
            std::string::npos)
      << capped.out;
  EXPECT_EQ(capped.report["jobs"], fit);
  EXPECT_LE(most_at_once(capped.report["tests"]), fit) << times_of(capped.report["tests"]);
}

// Hundreds of quick tests: memrun's loop and launcher thread, whatever the backend.
MEMRUN_LANES(Parallel, "EveryQuickTestGetsItsOwnExitStatus", kHostLane);
TEST_F(Parallel, EveryQuickTestGetsItsOwnExitStatus) {
  // Tests start on the launcher's thread and are reaped on the loop's,
  // each through its pidfd; what else ends is reaped only while no test
  // starts (RunningSet::reap). Many tests end before the loop learns their
  // pid: each status is its test's own, exit 0, 1 and 3 in turn, at -j 1
  // and -j 2, sealed and not.
  std::string yaml = "tests:\n";
  for (int i = 0; i < 150; ++i) {
    std::string run = i % 3 == 0 ? "[/bin/true]" : i % 3 == 1 ? "[/bin/false]" : "[/bin/sh, -c, 'exit 3']";
    yaml += "  - {name: t" + std::to_string(i) + ", run: " + run + ", memory: 16MiB}\n";
  }
  for (std::vector<std::string> flags : {std::vector<std::string>{"-j", "1"}, {"-j", "2"}, {"-j", "2", "--host-cgroups"}}) {
    auto run = run_spec(dir, yaml, flags);
    ASSERT_EQ(run.exit_code, 1) << run.out << run.err;
    const auto& tests = run.report["tests"];
    ASSERT_EQ(tests.size(), 150u) << flags.back();
    for (int i = 0; i < 150; ++i) {
      const auto& t = tests[i];
      EXPECT_EQ(t["exit_code"], i % 3 == 0 ? 0 : i % 3 == 1 ? 1 : 3) << flags.back() << " " << t.dump();
      EXPECT_EQ(t["passed"], i % 3 == 0) << flags.back() << " " << t.dump();
    }
  }
}

// memrun's own, whatever the backend: on the host only.
MEMRUN_LANES(Parallel, "BadFlagsAreRefusedBeforeAnythingRuns", kHostLane);
TEST_F(Parallel, BadFlagsAreRefusedBeforeAnythingRuns) {
  std::string spec = dir.write("spec.yaml", "tests:\n  - {name: t, run: 'true', memory: 16MiB}\n");
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"-j", "0"}, {"--memory-budget", "lots"}, {"--max-log", "big"}, {"--grace", "soon"}}) {
    auto run = run_memrun({spec, flag, value, "--run-dir", dir.path() + "/runs"});
    EXPECT_EQ(run.exit_code, 2) << flag << " " << value << ": " << run.out << run.err;
    EXPECT_NE(run.err.find(flag), std::string::npos) << run.err;
    EXPECT_FALSE(std::filesystem::exists(dir.path() + "/runs")) << flag << " made a run folder";
  }
}

TEST_F(Parallel, TheDefaultBudgetIsWhatTheHostCanGiveAndIsReported) {
  auto run = run_spec(dir, "tests:\n  - {name: t, run: 'true', memory: 16MiB}\n", {"-j", "2"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  uint64_t budget = run.report["memory_budget_bytes"];
  // Below MemAvailable (memrun keeps a reserve), and not absurdly small.
  std::istringstream meminfo(read_text("/proc/meminfo"));
  uint64_t available = 0;
  for (std::string key; meminfo >> key;) {
    uint64_t kib;
    meminfo >> kib;
    if (key == "MemAvailable:") available = kib * 1024;
    meminfo.ignore(64, '\n');
  }
  EXPECT_LT(budget, available);
  EXPECT_GT(budget, available / 2);
  EXPECT_NE(run.out.find("within a memory budget of"), std::string::npos) << run.out;
}

TEST_F(Parallel, TheDefaultBudgetStaysWithinALimitedParentCgroup) {
  auto parent = limited_parent(512 * MiB);
  auto run = run_spec(dir,
                      "tests:\n  - {name: fits, run: 'true', memory: 256MiB}\n"
                      "  - {name: too-big, run: 'true', memory: 500MiB}\n",
                      {"-j", "2", "--cgroup-parent", parent->run_path()});
  uint64_t budget = run.report["memory_budget_bytes"];
  // 512 MiB less what the parent already holds, less a tenth of that.
  EXPECT_LE(budget, 512 * MiB / 10 * 9);
  EXPECT_GT(budget, 440 * MiB);
  EXPECT_NE(run.out.find("room below the nearest limited cgroup"), std::string::npos) << run.out;
  EXPECT_TRUE(test_named(run, "fits")["passed"]);
  EXPECT_EQ(test_named(run, "too-big")["outcome"], "error");
  EXPECT_NO_THROW(parent->close()) << "memrun left something in " << parent->run_path();
}

// The live view, drawn in a real terminal: tmux runs memrun in a pty, and
// capture-pane shows the screen as a user would see it.
class Terminal : public Parallel {
 protected:
  void SetUp() override {
    if (::system("command -v tmux >/dev/null") != 0) FAIL() << "tmux is needed (./setup.sh test installs it)";
    // In the scratch folder, so that it goes with it (tmux leaves it).
    socket_ = dir.path() + "/tmux.sock";
  }
  void TearDown() override {
    tmux({"kill-server"});
    MemrunTest::TearDown();
  }
  std::string tmux(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"tmux", "-S", socket_};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_program(argv).out;
  }
  /// The screen once `shows` holds for it, or after `seconds` as it is then.
  std::string screen_when(const std::function<bool(const std::string&)>& shows, int seconds) {
    std::string shown;
    wait_until([&] { return shows(shown = tmux({"capture-pane", "-p", "-t", "view"})); }, seconds);
    return shown;
  }
  std::string socket_;
};

// The live view tests a terminal (tmux), not the kernel: on the host only.
MEMRUN_LANES(Terminal, "*", kHostLane);

TEST_F(Terminal, TheLiveViewShowsRunningTestsWithBarsThenCleansUp) {
  // The tests hold their 50 MiB until `release` exists: the screen is
  // read while two certainly run, then they are let go.
  std::string release = dir.path() + "/release";
  std::string yaml = "tests:\n";
  for (const char* name : {"alpha", "beta", "gamma"})
    yaml += std::string("  - {name: ") + name + ", run: [" + workload() + ", --touch, 50MiB, --until, " + release +
            "], memory: 100MiB}\n";
  std::string spec = dir.write("spec.yaml", yaml);
  std::string command = shell_quote(memrun_bin()) + " " + spec + " -j 2 --memory-budget 200MiB --run-dir " + dir.path() +
                        "/runs; echo MEMRUN-EXIT=$?; sleep 60";
  tmux({"new-session", "-d", "-s", "view", "-x", "140", "-y", "40", command});
  // While two tests run: a status line and a line per test with a bar
  // half full (50 of 100 MiB).
  auto has = [](const std::string& screen, const char* text) { return screen.find(text) != std::string::npos; };
  std::string during = screen_when(
      [&](const std::string& s) { return has(s, "  alpha  [##########") && has(s, "  beta   [##########"); }, 60);
  EXPECT_NE(during.find("0/3 done  2 running"), std::string::npos) << during;
  EXPECT_NE(during.find("of 200.0 MiB"), std::string::npos) << during;
  EXPECT_NE(during.find("  alpha  [##########"), std::string::npos) << during;
  EXPECT_NE(during.find("  beta   [##########"), std::string::npos) << during;
  EXPECT_NE(during.find("/ 100.0 MiB"), std::string::npos) << during;
  EXPECT_EQ(during.find("gamma  ["), std::string::npos) << "a third test ran beyond the budget:\n" << during;
  std::ofstream(release) << "go";
  // At the end: the finished lines and the summary; the view is gone.
  std::string after = screen_when([&](const std::string& s) { return has(s, "MEMRUN-EXIT="); }, 60);
  EXPECT_NE(after.find("MEMRUN-EXIT=0"), std::string::npos) << after;
  EXPECT_NE(after.find("3 passed, 0 failed"), std::string::npos) << after;
  for (const char* name : {"alpha", "beta", "gamma"})
    EXPECT_NE(after.find(std::string("PASS  ") + name), std::string::npos) << after;
  EXPECT_EQ(after.find("running"), std::string::npos) << "the live view was left on screen:\n" << after;
  EXPECT_EQ(after.find("[#"), std::string::npos) << after;
}

// memrun's own, whatever the backend: on the host only.
MEMRUN_LANES(Parallel, "WithoutATerminalEachFinishedTestIsOnePlainLine", kHostLane);
TEST_F(Parallel, WithoutATerminalEachFinishedTestIsOnePlainLine) {
  auto run = run_spec(dir,
                      "tests:\n  - {name: a, run: 'printf \"\\033[2J\\033[31mred\\n\"; exit 1', memory: 16MiB}\n"
                      "  - {name: b, run: 'true', memory: 16MiB}\n",
                      {"-j", "2"});
  EXPECT_EQ(run.exit_code, 1);
  for (char c : run.out) EXPECT_TRUE(c == '\n' || static_cast<unsigned char>(c) >= 0x20) << int(c) << run.out;
  EXPECT_NE(run.out.find("PASS  b"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("FAIL  a"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace memrun::testing

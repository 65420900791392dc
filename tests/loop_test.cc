// The run's event loop against a fake backend (tests/fake_backend.h): what
// it decides (who starts when, timeouts, signals, verdicts from the
// kernel's figures) in milliseconds, without a kernel. Enforcement itself is
// proven by the real-kernel tests (host.*, vm.*).
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <filesystem>

#include "fake_backend.h"
#include "runner/plan.h"
#include "runner/run.h"
#include "runner/spec.h"
#include "runner/units.h"

namespace memrun::testing {
namespace {


class Collector : public RunObserver {
 public:
  void test_done(size_t, const TestRecord& r) override { done.push_back(r.test.name); }
  std::vector<std::string> done;
};

class Loop : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "memrun-loop-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  /// Runs `yaml` on the fake backend; the results in the spec's order.
  RunResults run(const std::string& yaml, RunOptions options = {}) {
    specs_ = {parse_spec(yaml, dir_ + "/spec.yaml", dir_)};
    plan_ = make_plan(specs_, Selection{}, dir_ + "/run");
    std::filesystem::create_directories(plan_.run_dir);
    options.sample_interval = std::chrono::milliseconds(5);
    return run_plan(plan_, backend, options, collector);
  }
  /// The verdict of the test `name` (the plan is in the spec's order).
  const Verdict& named(const RunResults& r, const std::string& name) {
    for (size_t i = 0; i < plan_.tests.size(); ++i)
      if (plan_.tests[i].test->name == name && r.tests.at(i)) return *r.tests[i];
    throw std::runtime_error("no result for " + name);
  }

  FakeBackend backend;
  Collector collector;

 private:
  std::string dir_;
  std::vector<Spec> specs_;
  Plan plan_;
};

TEST_F(Loop, RunningLimitsNeverExceedTheBudget) {
  std::string yaml = "tests:\n";
  for (int i = 0; i < 8; ++i) yaml += "  - {name: t" + std::to_string(i) + ", run: 'sleep 0.02', memory: 100MiB}\n";
  RunOptions o;
  o.jobs = 8;
  o.budget = Budget{250 * MiB, "test"};
  auto r = run(yaml, o);
  ASSERT_EQ(r.tests.size(), 8u);
  for (const auto& t : r.tests) {
    ASSERT_TRUE(t);
    EXPECT_TRUE(t->passed) << t->reason;
  }
  EXPECT_LE(backend.most_running_bytes, 250 * MiB);
  EXPECT_LE(backend.most_running_groups, 2);
  EXPECT_EQ(backend.live_groups, 0) << "a group was not destroyed";
}

TEST_F(Loop, WithSeveralJobsTheLargestLimitsStartFirst) {
  RunOptions o;
  o.jobs = 2;
  o.budget = Budget{1024 * MiB, "test"};
  run("tests:\n  - {name: small, run: 'true', memory: 16MiB}\n  - {name: big, run: 'true', memory: 300MiB}\n"
      "  - {name: mid, run: 'true', memory: 64MiB}\n",
      o);
  ASSERT_EQ(backend.created.size(), 3u);
  EXPECT_EQ(backend.created[0].first, "big");
  EXPECT_EQ(backend.created[1].first, "mid");
  EXPECT_EQ(backend.created[2].first, "small");
  EXPECT_EQ(backend.created[0].second.memory_max, 300 * MiB) << "the limit written is the spec's";
}

TEST_F(Loop, ATestOverTheBudgetIsRefusedWithoutAGroup) {
  RunOptions o;
  o.jobs = 2;
  o.budget = Budget{100 * MiB, "test"};
  auto r = run("tests:\n  - {name: huge, run: 'true', memory: 200MiB}\n  - {name: fits, run: 'true', memory: 50MiB}\n", o);
  EXPECT_EQ(named(r, "huge").outcome, Outcome::error);
  EXPECT_NE(named(r, "huge").reason.find("exceeds the memory budget"), std::string::npos);
  EXPECT_TRUE(named(r, "fits").passed);
  ASSERT_EQ(backend.created.size(), 1u);
}

TEST_F(Loop, ATimeoutEndsATestWithItsOwnOutcome) {
  auto r = run("tests:\n  - {name: slow, run: 'sleep 30', memory: 16MiB, timeout: 50ms}\n");
  EXPECT_EQ(named(r, "slow").outcome, Outcome::timeout);
  EXPECT_FALSE(named(r, "slow").passed);
}

TEST_F(Loop, VerdictsComeFromTheKernelsFigures) {
  for (const char* name : {"ooms", "expected"}) {
    backend.scripts[name].final.oom_kills = 1;
    backend.scripts[name].final.limit_reached = true;
    backend.scripts[name].final.peak = 64 * MiB;  // a kill at the limit: usage was there
  }
  backend.scripts["over"].final.peak = 200 * MiB;
  backend.scripts["fits"].final.peak = 10 * MiB;
  auto r = run("tests:\n  - {name: ooms, run: 'true', memory: 64MiB}\n"
               "  - {name: expected, run: 'true', memory: 64MiB, expect: oom}\n"
               "  - {name: over, run: 'true', memory: 64MiB}\n"
               "  - {name: fits, run: 'true', memory: 64MiB}\n");
  EXPECT_EQ(named(r, "ooms").outcome, Outcome::oom);
  EXPECT_FALSE(named(r, "ooms").passed);
  EXPECT_TRUE(named(r, "expected").passed);
  EXPECT_FALSE(named(r, "over").passed) << "a peak above the limit passed";
  EXPECT_TRUE(named(r, "fits").passed);
  EXPECT_EQ(named(r, "fits").headroom, static_cast<int64_t>(54 * MiB));
}

TEST_F(Loop, AStalledTestThatReadsBackItsLimitIsEndedAsThrashing) {
  // Each reads back twice its limit per 5 s window, of page cache it maps
  // (its code, its mmap()s): too little for the refault rule alone (ten
  // times), as over a slow disk. Where the kernel keeps pressure and all
  // tasks were stalled for most of the window, that is thrashing; stalled
  // without reading back, or reading back without pressure figures (v1),
  // it is not, and the test runs to its end.
  for (const char* name : {"stalled", "stalled-no-refaults", "no-pressure"}) {
    auto& script = backend.scripts[name];
    script.usage.current = 60 * MiB;
    script.usage.breakdown.file = script.usage.file_mapped = 40 * MiB;
    script.refaulted_per_s = std::string(name) == "stalled-no-refaults" ? 0 : 2 * 64 * MiB / 5.0;
    if (std::string(name) != "no-pressure") script.stalled_share = 0.9;
  }
  RunOptions options;
  options.jobs = 3;
  auto r = run("tests:\n  - {name: stalled, run: 'sleep 60', memory: 64MiB}\n"
               "  - {name: stalled-no-refaults, run: 'sleep 6', memory: 64MiB}\n"
               "  - {name: no-pressure, run: 'sleep 6', memory: 64MiB}\n",
               options);
  EXPECT_EQ(named(r, "stalled").outcome, Outcome::thrash) << named(r, "stalled").reason;
  EXPECT_NE(named(r, "stalled").reason.find("stalled on memory for"), std::string::npos) << named(r, "stalled").reason;
  EXPECT_EQ(named(r, "stalled-no-refaults").outcome, Outcome::pass) << named(r, "stalled-no-refaults").reason;
  EXPECT_EQ(named(r, "no-pressure").outcome, Outcome::pass) << named(r, "no-pressure").reason;
}

TEST_F(Loop, ReReadingAFileIsNoThrashingAndThrashOffTurnsTheCheckOff) {
  // All read back 20 times their limit per 5 s window, stalled for most of
  // it. `maps` maps what it reads back (its page cache is all mapped):
  // thrashing. `rereads` reads a file with read() (none of its page cache
  // is mapped): the pages come back a pass later, a stream, no thrash.
  // `off` maps it too, but its spec turns the check off.
  for (const char* name : {"maps", "rereads", "off"}) {
    auto& script = backend.scripts[name];
    script.usage.current = 60 * MiB;
    script.usage.breakdown.file = 40 * MiB;
    script.usage.file_mapped = std::string(name) == "rereads" ? 0 : 40 * MiB;
    script.refaulted_per_s = 20 * 64 * MiB / 5.0;
    script.stalled_share = 0.9;
  }
  RunOptions options;
  options.jobs = 3;
  auto r = run("tests:\n  - {name: maps, run: 'sleep 60', memory: 64MiB}\n"
               "  - {name: rereads, run: 'sleep 6', memory: 64MiB}\n"
               "  - {name: 'off', run: 'sleep 6', memory: 64MiB, thrash: off}\n",
               options);
  EXPECT_EQ(named(r, "maps").outcome, Outcome::thrash) << named(r, "maps").reason;
  EXPECT_EQ(named(r, "rereads").outcome, Outcome::pass) << named(r, "rereads").reason;
  EXPECT_EQ(named(r, "off").outcome, Outcome::pass) << named(r, "off").reason;
}

TEST_F(Loop, ASignalStopsTheRunAndEveryTestIsAccountedFor) {
  // The test signals its runner (its parent: this process) itself.
  RunOptions o;
  o.grace = std::chrono::milliseconds(20);
  auto r = run("tests:\n  - {name: signals, run: 'kill -TERM $PPID; sleep 30', memory: 16MiB}\n"
               "  - {name: never, run: 'true', memory: 16MiB}\n",
               o);
  EXPECT_EQ(r.interrupted_by, SIGTERM);
  ASSERT_EQ(r.tests.size(), 2u);
  EXPECT_EQ(named(r, "signals").outcome, Outcome::interrupted);
  EXPECT_EQ(named(r, "never").outcome, Outcome::interrupted);
  EXPECT_EQ(backend.live_groups, 0);
}

}  // namespace
}  // namespace memrun::testing

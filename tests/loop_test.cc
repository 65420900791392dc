// The run's event loop against a fake backend, a fake clock and a fake
// launcher (tests/fake_backend.h, tests/fake_launcher.h): what it decides
// (who starts when, timeouts, signals, thrash, every step of a test's
// cleanup, verdicts from the kernel's figures) in milliseconds of real
// time, without a kernel and without a process: a test's `run: fake` is
// never run, what its process does is scripted in `process(name)`. Times
// are asserted on the fake clock, which nothing but the loop moves.
// Enforcement itself is proven by the real-kernel tests (host.*, vm.*).
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "fake_backend.h"
#include "runner/base/units.h"
#include "runner/plan/plan.h"
#include "runner/run/run.h"
#include "runner/spec/spec.h"

namespace memrun::testing {
namespace {


class Collector : public RunObserver {
 public:
  explicit Collector(const Clock& clock) : clock_(clock) {}
  void test_done(size_t index, const TestRecord& r) override {
    alive_at_done.push_back(std::count_if(made.begin(), made.end(), [](const auto& m) { return !m.second.expired(); }));
    verdicts.emplace(index, r.verdict);
    done.push_back(r.test.name);
    records.emplace(r.test.name, r);
    at.emplace(r.test.name, clock_.now());
  }
  std::vector<std::string> done;
  std::map<size_t, Verdict> verdicts;  ///< by plan index
  std::map<std::string, TestRecord> records;
  std::map<std::string, Clock::time_point> at;  ///< when each record came, on the fake clock
  void tick(const std::vector<Progress>& running) override {
    for (const auto& p : running) {
      made.emplace(std::string(p.planned->name()), p.planned->made);
      if (!p.planned->made || p.planned->plain != PlannedTest::kWhole || p.planned->test->argv.empty() ||
          p.planned->test->argv.back() != "--gtest_filter=" + p.planned->test->name.substr(2))
        unmade.push_back(std::string(p.planned->name()));
    }
  }
  /// What each running test was made of (made_test), as a tick saw it.
  std::map<std::string, std::weak_ptr<const PlannedTest::Made>> made;
  /// How many of those were alive as each record came.
  std::vector<long> alive_at_done;
  /// Tests a tick saw running not made whole with their own name.
  std::vector<std::string> unmade;

 private:
  const Clock& clock_;
};

/// A run's results, and each test's verdict in the plan's order (nullopt:
/// never started, --fail-fast), as its observer heard them.
struct Ran : RunResults {
  std::vector<std::optional<Verdict>> tests;
};

class Loop : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "memrun-loop-XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  /// Runs `yaml` on the fake backend; the results in the spec's order.
  Ran run(const std::string& yaml, RunOptions options = {}, std::map<std::string, Order> orders = {}) {
    specs_ = {parse_spec(yaml, dir_ + "/spec.yaml", dir_, suite, false, nullptr, bool(suite))};
    for (auto& t : specs_[0].tests)  // ctest's order, as a suite's listing gives it
      if (auto it = orders.find(t.name); it != orders.end()) t.order = it->second;
    plan_ = make_plan(specs_, Selection{}, dir_ + "/run");
    std::filesystem::create_directories(plan_.run_dir);
    if (options.sample_interval == RunOptions{}.sample_interval) options.sample_interval = std::chrono::milliseconds(5);
    options.clock = &backend.clock;
    options.kernel_log = &kernel_log;
    options.launcher = &backend.launcher;
    Ran ran;
    collector.verdicts.clear();
    static_cast<RunResults&>(ran) = run_plan(plan_, backend, options, collector);
    ran.tests.resize(plan_.tests.size());
    for (const auto& [i, v] : collector.verdicts) ran.tests[i] = v;
    return ran;
  }
  /// What the process of test `name` does (by default: exits 0 at once).
  FakeLauncher::Process& process(const std::string& name) { return backend.launcher.processes[name]; }
  /// The verdict of the test `name` (the plan is in the spec's order).
  const Verdict& named(const Ran& r, const std::string& name) {
    for (size_t i = 0; i < plan_.tests.size(); ++i)
      if (plan_.tests[i].test->name == name && r.tests.at(i)) return *r.tests[i];
    throw std::runtime_error("no result for " + name);
  }

  /// The cases of the spec's suite, held as a run holds them (compact).
  Discoverer suite;
  const Plan& plan() const { return plan_; }
  FakeBackend backend;
  FakeKernelLog kernel_log{backend.clock};
  Collector collector{backend.clock};

 private:
  std::string dir_;
  std::vector<Spec> specs_;
  Plan plan_;
};

TEST_F(Loop, RunningLimitsNeverExceedTheBudget) {
  for (int i = 0; i < 8; ++i) process("t" + std::to_string(i)).runs_for = std::chrono::milliseconds(20);
  std::string yaml = "tests:\n";
  for (int i = 0; i < 8; ++i) yaml += "  - {name: t" + std::to_string(i) + ", run: fake, memory: 100MiB}\n";
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

// A suite's cases, held as their names (CompactTests), are made whole as
// each starts, with its own name in its argv, and dropped once its record
// is written: the plan holds none, and no more than -j are whole at once.
TEST_F(Loop, ASuitesCaseIsMadeAsItStartsAndDroppedOnceItsRecordIsWritten) {
  std::vector<Case> cases;
  for (int i = 0; i < 40; ++i) {
    Case c;
    c.name = "S.c" + std::to_string(i);
    c.argv = {"/bin/t", "--gtest_filter=" + c.name};
    c.command = "/bin/t --gtest_filter=" + c.name;
    process("g/" + c.name).runs_for = std::chrono::milliseconds(10);
    cases.push_back(c);
  }
  suite = [&](const SuiteSource&) { return cases; };
  RunOptions o;
  o.jobs = 3;
  o.tick = std::chrono::milliseconds(1);
  auto r = run("suites:\n  - {name: g, gtest: /bin/t, memory: 64MiB}\n", o);
  ASSERT_EQ(r.tests.size(), 40u);
  for (const auto& p : plan().tests) {
    EXPECT_NE(p.plain, PlannedTest::kWhole) << p.name() << " is held whole in the plan";
    EXPECT_FALSE(p.made) << p.name() << " was made in the plan";
  }
  EXPECT_EQ(collector.made.size(), 40u) << "a tick saw every test running, made";
  EXPECT_TRUE(collector.unmade.empty()) << collector.unmade.front() << " ran as its template";
  for (const auto& [name, made] : collector.made) EXPECT_TRUE(made.expired()) << name << " outlived its record";
  ASSERT_EQ(collector.alive_at_done.size(), 40u);
  for (long alive : collector.alive_at_done) EXPECT_LE(alive, 3);
}

TEST_F(Loop, WithSeveralJobsTheLargestLimitsStartFirst) {
  RunOptions o;
  o.jobs = 2;
  o.budget = Budget{1024 * MiB, "test"};
  run("tests:\n  - {name: small, run: fake, memory: 16MiB}\n  - {name: big, run: fake, memory: 300MiB}\n"
      "  - {name: mid, run: fake, memory: 64MiB}\n",
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
  auto r = run("tests:\n  - {name: huge, run: fake, memory: 200MiB}\n  - {name: fits, run: fake, memory: 50MiB}\n", o);
  EXPECT_EQ(named(r, "huge").outcome, Outcome::error);
  EXPECT_NE(named(r, "huge").reason.find("exceeds the memory budget"), std::string::npos);
  EXPECT_TRUE(named(r, "fits").passed);
  ASSERT_EQ(backend.created.size(), 1u);
}

TEST_F(Loop, ATimeoutEndsATestWithItsOwnOutcome) {
  process("slow").runs_for = std::nullopt;
  auto r = run("tests:\n  - {name: slow, run: fake, memory: 16MiB, timeout: 50ms}\n");
  EXPECT_EQ(named(r, "slow").outcome, Outcome::timeout);
  EXPECT_FALSE(named(r, "slow").passed);
  EXPECT_EQ(backend.seen["slow"].first_kill, *backend.seen["slow"].started + std::chrono::milliseconds(50))
      << "killed at its timeout on the loop's clock";
}

TEST_F(Loop, VerdictsComeFromTheKernelsFigures) {
  for (const char* name : {"ooms", "expected"}) {
    backend.scripts[name].final.oom_kills = 1;
    backend.scripts[name].final.limit_reached = true;
    backend.scripts[name].final.peak = 64 * MiB;  // a kill at the limit: usage was there
  }
  backend.scripts["over"].final.peak = 200 * MiB;
  backend.scripts["fits"].final.peak = 10 * MiB;
  auto r = run("tests:\n  - {name: ooms, run: fake, memory: 64MiB}\n"
               "  - {name: expected, run: fake, memory: 64MiB, expect: oom}\n"
               "  - {name: over, run: fake, memory: 64MiB}\n"
               "  - {name: fits, run: fake, memory: 64MiB}\n");
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
  // it is not, and the test runs to its timeout.
  for (const char* name : {"stalled", "stalled-no-refaults", "no-pressure"}) {
    auto& script = backend.scripts[name];
    process(name).runs_for = std::nullopt;
    script.usage.current = 60 * MiB;
    script.usage.breakdown.file = script.usage.file_mapped = 40 * MiB;
    script.refaulted_per_s = std::string(name) == "stalled-no-refaults" ? 0 : 2 * 64 * MiB / 5.0;
    if (std::string(name) != "no-pressure") script.stalled_share = 0.9;
  }
  RunOptions options;
  options.jobs = 3;
  auto r = run("tests:\n  - {name: stalled, run: fake, memory: 64MiB}\n"
               "  - {name: stalled-no-refaults, run: fake, memory: 64MiB, timeout: 11s}\n"
               "  - {name: no-pressure, run: fake, memory: 64MiB, timeout: 11s}\n",
               options);
  EXPECT_EQ(named(r, "stalled").outcome, Outcome::thrash) << named(r, "stalled").reason;
  EXPECT_NE(named(r, "stalled").reason.find("stalled on memory for"), std::string::npos) << named(r, "stalled").reason;
  EXPECT_EQ(named(r, "stalled-no-refaults").outcome, Outcome::timeout) << named(r, "stalled-no-refaults").reason;
  EXPECT_EQ(named(r, "no-pressure").outcome, Outcome::timeout) << named(r, "no-pressure").reason;
  // Two windows of 5 s each passed without a verdict of thrash.
  EXPECT_GE(collector.records.at("no-pressure").observed.duration_s, 11.0);
}

TEST_F(Loop, ReReadingAFileIsNoThrashingAndThrashOffTurnsTheCheckOff) {
  // All read back 20 times their limit per 5 s window, stalled for most of
  // it. `maps` maps what it reads back (its page cache is all mapped):
  // thrashing. `rereads` reads a file with read() (none of its page cache
  // is mapped): the pages come back a pass later, a stream, no thrash.
  // `off` maps it too, but its spec turns the check off.
  for (const char* name : {"maps", "rereads", "off"}) {
    auto& script = backend.scripts[name];
    process(name).runs_for = std::nullopt;
    script.usage.current = 60 * MiB;
    script.usage.breakdown.file = 40 * MiB;
    script.usage.file_mapped = std::string(name) == "rereads" ? 0 : 40 * MiB;
    script.refaulted_per_s = 20 * 64 * MiB / 5.0;
    script.stalled_share = 0.9;
  }
  RunOptions options;
  options.jobs = 3;
  auto r = run("tests:\n  - {name: maps, run: fake, memory: 64MiB}\n"
               "  - {name: rereads, run: fake, memory: 64MiB, timeout: 11s}\n"
               "  - {name: 'off', run: fake, memory: 64MiB, thrash: off, timeout: 11s}\n",
               options);
  EXPECT_EQ(named(r, "maps").outcome, Outcome::thrash) << named(r, "maps").reason;
  EXPECT_EQ(named(r, "rereads").outcome, Outcome::timeout) << named(r, "rereads").reason;
  EXPECT_EQ(named(r, "off").outcome, Outcome::timeout) << named(r, "off").reason;
}

TEST_F(Loop, ASignalStopsTheRunAndEveryTestIsAccountedFor) {
  // The test signals its runner itself (memrun: this process).
  process("signals").runs_for = std::nullopt;
  process("signals").signals_runner = SIGTERM;
  RunOptions o;
  o.grace = std::chrono::milliseconds(20);
  auto r = run("tests:\n  - {name: signals, run: fake, memory: 16MiB}\n"
               "  - {name: never, run: fake, memory: 16MiB}\n",
               o);
  EXPECT_EQ(r.interrupted_by, SIGTERM);
  ASSERT_EQ(r.tests.size(), 2u);
  EXPECT_EQ(named(r, "signals").outcome, Outcome::interrupted);
  EXPECT_EQ(named(r, "never").outcome, Outcome::interrupted);
  EXPECT_EQ(backend.live_groups, 0);
}

// ctest's order: a cleanup queued before the user of a fixture whose
// setup failed runs once the setup ended, in the same pass that leaves the
// user not run, never reported as waiting for ever; the first run's
// groups are all used or removed.
TEST_F(Loop, ATestFreedByATestThatEndedUnrunStartsInItsTurn) {
  process("up").exit_code = 1;
  Order use, down;
  use.after = use.needs = {"up"};
  down.after = {"up", "use"};
  auto r = run("tests:\n  - {name: up, run: fake, memory: 16MiB}\n"
               "  - {name: down, run: fake, memory: 16MiB}\n"
               "  - {name: use, run: fake, memory: 16MiB}\n",
               {}, {{"use", use}, {"down", down}});
  EXPECT_EQ(named(r, "up").outcome, Outcome::fail);
  EXPECT_EQ(named(r, "use").outcome, Outcome::error);
  EXPECT_NE(named(r, "use").reason.find("the fixture setup test 'up' failed"), std::string::npos) << named(r, "use").reason;
  EXPECT_EQ(named(r, "down").outcome, Outcome::pass) << named(r, "down").reason;
  EXPECT_EQ(collector.done, (std::vector<std::string>{"up", "use", "down"}));
  EXPECT_EQ(backend.live_groups, 0);
}

// Locks, a serial test and PROCESSORS at -j 3: no two holders of a lock,
// nothing beside the serial or the wide test; every test runs.
TEST_F(Loop, LocksSerialAndWideTestsNeverRunBesideWhatTheyMustNot) {
  Order lock, serial, wide;
  lock.locks = {"port"};
  serial.serial = true;
  wide.slots = 5;  // more than -j: all of them
  RunOptions o;
  o.jobs = 3;
  std::string yaml = "tests:\n";
  std::map<std::string, Order> orders;
  for (int i = 0; i < 3; ++i) {
    yaml += "  - {name: lock" + std::to_string(i) + ", run: fake, memory: 16MiB}\n";
    orders["lock" + std::to_string(i)] = lock;
    yaml += "  - {name: free" + std::to_string(i) + ", run: fake, memory: 16MiB}\n";
  }
  yaml += "  - {name: serial, run: fake, memory: 16MiB}\n  - {name: wide, run: fake, memory: 16MiB}\n";
  orders["serial"] = serial;
  orders["wide"] = wide;
  for (const char* name : {"lock0", "lock1", "lock2", "free0", "free1", "free2", "serial", "wide"})
    process(name).runs_for = std::chrono::milliseconds(20);
  auto r = run(yaml, o, orders);
  for (const auto& t : r.tests) ASSERT_TRUE(t && t->outcome == Outcome::pass);
  for (int i = 0; i < 3; ++i)
    for (const auto& other : backend.beside["lock" + std::to_string(i)])
      EXPECT_NE(other.rfind("lock", 0), 0u) << "lock" << i << " ran beside " << other;
  EXPECT_EQ(backend.beside["serial"], std::set<std::string>{});
  EXPECT_EQ(backend.beside["wide"], std::set<std::string>{});
  EXPECT_GT(backend.most_running_groups, 1) << "the others ran side by side";
}

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST_F(Loop, OneAtATimeTheNextTestsGroupIsMadeWhileTheTestBeforeItRuns) {
  process("a").runs_for = process("b").runs_for = milliseconds(50);
  // The per-test cost: mkdir and the limits' writes happen while the test
  // before runs, not between the two (-j 1, the default).
  run("tests:\n  - {name: a, run: fake, memory: 16MiB}\n  - {name: b, run: fake, memory: 16MiB}\n"
      "  - {name: c, run: fake, memory: 16MiB}\n");
  for (auto [before, next] : {std::pair{"a", "b"}, std::pair{"b", "c"}}) {
    const auto &was = backend.seen[before], &is = backend.seen[next];
    ASSERT_TRUE(was.started && was.emptied && is.made && is.started);
    EXPECT_LT(*is.made, *was.emptied) << next << "'s group was made after " << before << " ended";
    EXPECT_GE(*is.started, *was.emptied) << next << " ran beside " << before;
  }
}

TEST_F(Loop, AStuckCleanupHoldsUpNoOtherTest) {
  process("stuck").runs_for = process("other").runs_for = std::nullopt;
  // `stuck` times out; its processes take five kills to go, and the kernel
  // refuses to remove its group for 3 s. Meanwhile `other` is sampled at
  // its interval, never later; `stuck` is reported after the 2 s the
  // removal is given, with a cleanup_error and its own verdict; its group
  // is removed by the loop's retries once the kernel lets it.
  backend.scripts["stuck"].kill_steps = 5;
  backend.scripts["stuck"].busy_for = seconds(3);
  RunOptions o;
  o.jobs = 2;
  o.sample_interval = milliseconds(20);
  auto r = run("tests:\n  - {name: stuck, run: fake, memory: 16MiB, timeout: 1s}\n"
               "  - {name: other, run: fake, memory: 16MiB, timeout: 8s}\n",
               o);
  const auto& stuck = backend.seen["stuck"];
  EXPECT_EQ(named(r, "stuck").outcome, Outcome::timeout);
  const TestRecord& record = collector.records.at("stuck");
  EXPECT_NE(record.observed.cleanup_error.find("cannot remove cgroup"), std::string::npos)
      << record.observed.cleanup_error;
  ASSERT_TRUE(stuck.first_kill && stuck.emptied && stuck.first_remove && stuck.removed);
  EXPECT_GE(stuck.kill_calls, 5);
  EXPECT_GT(*stuck.emptied, *stuck.first_kill) << "the kill took steps on the loop's timer";
  EXPECT_GE(collector.at.at("stuck") - *stuck.first_remove, seconds(2));
  EXPECT_LT(collector.at.at("stuck"), *stuck.removed) << "the record waited for the group";
  EXPECT_GE(*stuck.removed - *stuck.first_remove, seconds(3));
  EXPECT_EQ(backend.live_groups, 0) << "the loop's retries removed it";
  EXPECT_EQ(named(r, "other").outcome, Outcome::timeout);
  // `other` ran through all of it, sampled every 20 ms on the clock.
  const auto& samples = backend.seen["other"].samples;
  ASSERT_GE(samples.size(), 2u);
  EXPECT_LE(samples.front(), *stuck.first_kill);
  EXPECT_GE(samples.back(), *stuck.removed);
  for (size_t i = 1; i < samples.size(); ++i)
    ASSERT_LE(samples[i] - samples[i - 1], milliseconds(20)) << "a gap in other's samples at sample " << i;
}

TEST_F(Loop, ACleanupThatNeverEndsIsGivenUpOnAndTheGroupLeftForGc) {
  // The kill never empties the group and the kernel never lets it go: the
  // kill is given 2 s, the removal 2 s, the loop's close 2 s more; then the
  // run ends, the group left to gc, the verdict the test's own.
  backend.scripts["forever"].kill_steps = 1 << 30;
  backend.scripts["forever"].busy_for = std::chrono::hours(1);
  auto r = run("tests:\n  - {name: forever, run: fake, memory: 16MiB}\n");
  const auto& seen = backend.seen["forever"];
  EXPECT_EQ(named(r, "forever").outcome, Outcome::pass) << named(r, "forever").reason;
  EXPECT_NE(collector.records.at("forever").observed.cleanup_error.find("cannot remove cgroup"), std::string::npos);
  ASSERT_TRUE(seen.first_kill && seen.first_remove);
  EXPECT_FALSE(seen.emptied);
  EXPECT_GE(*seen.first_remove - *seen.first_kill, seconds(2)) << "the kill's bound";
  EXPECT_GE(collector.at.at("forever") - *seen.first_remove, seconds(2)) << "the removal's bound";
  EXPECT_GT(seen.remove_calls, 20) << "retried on the loop's timer";
  EXPECT_EQ(backend.live_groups, 1);
}

TEST_F(Loop, AFailedKillIsTheTestsCleanupErrorNeverItsVerdict) {
  backend.scripts["unkillable"].fail_kill = true;
  auto r = run("tests:\n  - {name: unkillable, run: fake, memory: 16MiB}\n"
               "  - {name: next, run: fake, memory: 16MiB}\n");
  EXPECT_TRUE(named(r, "unkillable").passed) << named(r, "unkillable").reason;
  EXPECT_NE(collector.records.at("unkillable").observed.cleanup_error.find("cgroup.kill"), std::string::npos)
      << collector.records.at("unkillable").observed.cleanup_error;
  EXPECT_TRUE(named(r, "next").passed);
  EXPECT_EQ(backend.live_groups, 0);
}

TEST_F(Loop, AGroupThatCannotBeMadeOrLimitedIsThatTestsError) {
  backend.scripts["no-group"].fail_create = true;
  backend.scripts["no-limit"].fail_limit = true;
  auto r = run("tests:\n  - {name: no-group, run: fake, memory: 16MiB}\n"
               "  - {name: no-limit, run: fake, memory: 16MiB}\n"
               "  - {name: fine, run: fake, memory: 16MiB}\n");
  EXPECT_EQ(named(r, "no-group").outcome, Outcome::error);
  EXPECT_NE(named(r, "no-group").reason.find("cannot create cgroup"), std::string::npos) << named(r, "no-group").reason;
  EXPECT_EQ(named(r, "no-limit").outcome, Outcome::error);
  EXPECT_NE(named(r, "no-limit").reason.find("memory.max"), std::string::npos) << named(r, "no-limit").reason;
  EXPECT_TRUE(named(r, "fine").passed);
  EXPECT_EQ(backend.live_groups, 0);
}

TEST_F(Loop, TheRecordWaitsUpTo200msForTheKernelLogToNameAnOomKillsVictims) {
  for (const char* name : {"logged-late", "never-logged"}) {
    backend.scripts[name].final.oom_kills = 1;
    backend.scripts[name].final.limit_reached = true;
  }
  OomKill victim;
  victim.pid = 4242;
  victim.name = "workload";
  kernel_log.kills["logged-late"] = {milliseconds(50), {victim}, std::nullopt, false};
  auto r = run("tests:\n  - {name: logged-late, run: fake, memory: 16MiB}\n"
               "  - {name: never-logged, run: fake, memory: 16MiB}\n");
  EXPECT_EQ(named(r, "logged-late").outcome, Outcome::oom);
  EXPECT_EQ(named(r, "never-logged").outcome, Outcome::oom) << "the kill counts without its victims";
  const auto& late = collector.records.at("logged-late").observed.oom_victims;
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].pid, 4242);
  EXPECT_TRUE(collector.records.at("never-logged").observed.oom_victims.empty());
  auto waited = [&](const char* name) { return collector.at.at(name) - *backend.seen[name].removed; };
  EXPECT_GE(waited("logged-late"), milliseconds(40));
  EXPECT_LT(waited("logged-late"), milliseconds(200));
  EXPECT_GE(waited("never-logged"), milliseconds(200));
}

}  // namespace
}  // namespace memrun::testing

// decide(): a test's verdict from what was observed, pure, on records
// made in memory (record_fixture.h): outcomes, headroom, page cache, the
// ways around a limit, the suites' tools' own rules.
#include <gtest/gtest.h>

#include "record_fixture.h"
#include "runner/base/error.h"
#include "runner/verdict/decide.h"

namespace memrun {
namespace {

using fixture::Fixture;
using fixture::tmp;

TEST(Decide, PassWithHeadroom) {
  Fixture f;
  Verdict r = f.result(Outcome::pass, 0, 40ull << 20).verdict;
  EXPECT_TRUE(r.passed);
  EXPECT_EQ(r.headroom, 24ll << 20);
  EXPECT_DOUBLE_EQ(r.headroom_pct, 37.5);
}

TEST(Decide, HeadroomBelowMinimumFails) {
  Fixture f;
  Verdict r = f.result(Outcome::pass, 0, 60ull << 20).verdict;
  EXPECT_FALSE(r.passed);
  EXPECT_NE(r.reason.find("below min_headroom 8.00 MiB"), std::string::npos) << r.reason;
}

// Swap the spec allows is part of the allowance; what the test had in swap
// is memory it used, allowed or not.
TEST(Decide, SwapCountsInTheHeadroomAndIsReported) {
  Spec spec = parse_spec("tests:\n  - {name: s, run: x, memory: 64MiB, swap: 64MiB, min_headroom: 20%}\n", "s.yaml", tmp());
  PlannedTest p{&spec, &spec.tests[0]};
  p.named("001-s", "/nonexistent/o", "/nonexistent/e");
  // v2: at the limit, 36 MiB in swap (the samples saw 30, the kernel's mark 36).
  Observation o = Fixture::exited(0, 64ull << 20);
  o.kernel.swap_peak = 36ull << 20;
  o.kernel.swap_at_end = 0;
  o.samples = 3;
  o.sampled_peak = 64ull << 20;
  o.sampled_swap_peak = 30ull << 20;
  Verdict v = make_record(p, o).verdict;
  EXPECT_EQ(v.swap_peak, 36ull << 20);
  EXPECT_EQ(v.headroom, 28ll << 20);  // 64 + 64 - (64 + 36)
  EXPECT_DOUBLE_EQ(v.headroom_pct, 21.875);
  EXPECT_TRUE(v.passed) << v.reason;
  // v1: the kernel's joint mark of memory and swap is exact.
  o.kernel.swap_peak.reset();
  o.kernel.memory_and_swap_peak = 90ull << 20;
  v = make_record(p, o).verdict;
  EXPECT_EQ(v.swap_peak, 30ull << 20);
  EXPECT_EQ(v.headroom, 38ll << 20);
  // More than a fifth of the allowance used: min_headroom fails it.
  o.kernel.memory_and_swap_peak = 110ull << 20;
  v = make_record(p, o).verdict;
  EXPECT_FALSE(v.passed);
  // Swap the spec did not allow (the kernel could not limit it: no swap
  // accounting) is used memory too.
  Observation unlimited = Fixture::exited(0, 40ull << 20);
  unlimited.kernel.swap_at_end = 30ull << 20;
  Fixture f;
  (void)f;
  Verdict u = make_record(f.planned, unlimited).verdict;
  EXPECT_EQ(u.swap_peak, 30ull << 20);
  EXPECT_EQ(u.headroom, -(6ll << 20));  // 64 - (40 + 30)
  EXPECT_FALSE(u.passed);
}

TEST(Decide, OomNeedsAKernelOomKillNotJustSigkill) {
  Fixture f;
  Observation killed = Fixture::exited(-1, 64 * MiB);
  killed.signal = 9;
  Verdict r = decide(f.spec.tests[0], killed);
  EXPECT_EQ(r.outcome, Outcome::fail);
  EXPECT_EQ(r.reason, "expected pass, got fail (killed by signal 9)");
  killed.kernel.oom_kills = 1;
  killed.kernel.limit_reached = true;
  r = decide(f.spec.tests[0], killed);
  EXPECT_EQ(r.outcome, Outcome::oom);
  EXPECT_EQ(r.reason, "expected pass, got oom at 64.0 MiB");
}

TEST(Decide, AKillUnderALimitTheTestSetItselfIsNotItsOom) {
  // A nested memrun's test (or a container) OOM-killed under its own lower
  // limit: the outer test went on, exited 0 and never reached its limit.
  Fixture f;
  Observation o = Fixture::exited(0, 30 * MiB);
  o.kernel.oom_kills = 1;
  Verdict r = decide(f.spec.tests[0], o);
  EXPECT_EQ(r.outcome, Outcome::pass) << r.reason;
  // At its own limit, a child's kill is the test's OOM even when it exits 0
  // (its usage was at the limit then).
  o.kernel.limit_reached = true;
  o.kernel.peak = 64 * MiB;
  EXPECT_EQ(decide(f.spec.tests[0], o).outcome, Outcome::oom);
  // A kill that took it down under a limit it set itself is a failure,
  // never an OOM `expect: oom` accepts.
  o.kernel.limit_reached = false;
  o.exit_code = 1;
  Spec spec = parse_spec("tests:\n  - {name: big, run: x, memory: 256MiB, expect: oom}\n", "s.yaml", tmp());
  Verdict below = decide(spec.tests[0], o);
  EXPECT_EQ(below.outcome, Outcome::fail);
  EXPECT_FALSE(below.passed);
  EXPECT_NE(below.reason.find("OOM-killed 1 of its processes under a limit the test set itself, below the 256.0 MiB "
                              "memrun set"),
            std::string::npos)
      << below.reason;
  // Where the kernel says which limit was hit (v2 memory.events.local, the
  // kernel log's oom_memcg=), that decides, whatever else was reached.
  o.kernel.limit_reached = true;
  o.kernel.oom_at_limit = false;
  EXPECT_EQ(decide(spec.tests[0], o).outcome, Outcome::fail);
  o.kernel.limit_reached = false;
  o.kernel.oom_at_limit = true;
  o.kernel.peak = 256 * MiB;
  EXPECT_EQ(decide(spec.tests[0], o).outcome, Outcome::oom);
  EXPECT_TRUE(decide(spec.tests[0], o).passed);
  // The machine's OOM killer (the log's global_oom, oom_memcg "/") reached
  // no limit: `expect: oom` is not met, and the reason says what happened.
  o.kernel.oom_at_limit = false;
  o.oom_victims = {{77, "eater", 1 << 20, 0, 0, "/"}};
  Verdict global = decide(spec.tests[0], o);
  EXPECT_EQ(global.outcome, Outcome::fail);
  EXPECT_NE(global.reason.find("the machine ran out of memory"), std::string::npos) << global.reason;
}

TEST(Decide, WhatTheSamplesSawCountsWhateverTheFiguresSayAtTheEnd) {
  Fixture f;
  // v1: the test raised its limit, used 200 MiB, put the limit back and
  // reset memory.max_usage_in_bytes: the kernel's figures at the end say
  // 1.5 MiB of 64.
  Observation reset = Fixture::exited(0, MiB);
  reset.samples = 50;
  reset.sampled_peak = 200 * MiB;
  Verdict r = decide(f.spec.tests[0], reset);
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.peak, 200 * MiB) << "the peak is below the highest sample";
  EXPECT_TRUE(r.peak_sampled);
  EXPECT_NE(r.reason.find("defeated its memory limit: memrun's samples saw 200.0 MiB in use while it ran, above its "
                          "limit 64.0 MiB"),
            std::string::npos)
      << r.reason;
  // The limit read back higher at a sample than memrun set, whatever the
  // usage (a raise to "max" reads as UINT64_MAX on v2).
  Observation raised = Fixture::exited(0, MiB);
  raised.samples = 3;
  raised.sampled_peak = MiB;
  raised.sampled_limit = UINT64_MAX;
  r = decide(f.spec.tests[0], raised);
  EXPECT_FALSE(r.passed);
  EXPECT_NE(r.reason.find("its cgroup's limit read no limit while it ran, not the 64.0 MiB memrun set"),
            std::string::npos)
      << r.reason;
  raised.sampled_limit = GiB;
  EXPECT_NE(decide(f.spec.tests[0], raised).reason.find("limit read 1.00 GiB while it ran"), std::string::npos);
  // The limit as the kernel reads it back (page-aligned, never above what
  // was written) is no raise.
  raised.sampled_limit = 64 * MiB;
  EXPECT_TRUE(decide(f.spec.tests[0], raised).passed) << decide(f.spec.tests[0], raised).reason;
  // What the kernel forces past a limit by itself (a few pages of
  // __GFP_NOFAIL or socket minimums) fails no honest test: within
  // max(1 MiB, 1/64 of the limit).
  Spec spec = parse_spec("tests:\n  - {name: big, run: x, memory: 64MiB, expect: oom}\n", "s.yaml", tmp());
  Observation forced = Fixture::exited(-1, 64 * MiB + 512 * 1024);
  forced.signal = 9;
  forced.kernel.oom_kills = 1;
  forced.kernel.limit_reached = true;
  forced.samples = 10;
  forced.sampled_peak = 64 * MiB + 256 * 1024;
  EXPECT_TRUE(decide(spec.tests[0], forced).passed) << decide(spec.tests[0], forced).reason;
  forced.sampled_peak = 66 * MiB;
  EXPECT_FALSE(decide(spec.tests[0], forced).passed);
  EXPECT_EQ(decide(spec.tests[0], forced).peak, 66 * MiB);
}

TEST(Decide, ThePlaceholderOfAnUnstartedTestIsNoVerdict) {
  // A test that never started is an error with its reason, and a test cut
  // off before its turn is interrupted: neither passes, whatever it expected.
  Fixture f;
  Observation refused;
  refused.ending = Ending::not_started;
  refused.start_error = "over budget";
  Verdict r = decide(f.spec.tests[0], refused);
  EXPECT_EQ(r.outcome, Outcome::error);
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.reason, "over budget");
  Observation cut;
  cut.ending = Ending::not_run;
  r = decide(f.spec.tests[0], cut);
  EXPECT_EQ(r.outcome, Outcome::interrupted);
  EXPECT_FALSE(r.passed);
}

TEST(Decide, AnOomUnderALimitTheTestLoweredIsNeverMemrunsOom) {
  Spec spec = parse_spec("tests:\n  - {name: big, run: x, memory: 64MiB, expect: oom}\n", "s.yaml", tmp());
  Observation o = Fixture::exited(-1, 64 * MiB);
  o.signal = 9;
  o.kernel.oom_kills = 1;
  o.kernel.oom_at_limit = true;
  EXPECT_TRUE(decide(spec.tests[0], o).passed) << "a kill at the limit: its peak is there";
  // A huge page's charge failed 2 MiB short of the limit: still memrun's.
  o.kernel.peak = 62 * MiB;
  EXPECT_TRUE(decide(spec.tests[0], o).passed);
  // The test lowered its (sealed leaf's) limit to 8 MiB and left it there.
  o.kernel.peak = 8 * MiB;
  o.kernel.limit_at_end = 8 * MiB;
  Verdict lowered = decide(spec.tests[0], o);
  EXPECT_FALSE(lowered.passed);
  EXPECT_NE(lowered.reason.find("limit was 8.00 MiB at the end, not the 64.0 MiB memrun set: the test lowered it"),
            std::string::npos)
      << lowered.reason;
  // ... or put it back before its end: the kernel's peak stayed far below.
  o.kernel.limit_at_end = 64 * MiB;
  Verdict put_back = decide(spec.tests[0], o);
  EXPECT_FALSE(put_back.passed);
  EXPECT_NE(put_back.reason.find("OOM-killed with the kernel's peak at 8.00 MiB, far below its limit 64.0 MiB: the "
                                 "limit that killed was not the one memrun set"),
            std::string::npos)
      << put_back.reason;
  // ... after touching near its limit first (the kernel's peak is there):
  // a sample read the lowered limit.
  Observation touched = o;
  touched.kernel.peak = 63 * MiB;
  touched.sampled_lowest_limit = 8 * MiB;
  Verdict seen = decide(spec.tests[0], touched);
  EXPECT_FALSE(seen.passed);
  EXPECT_FALSE(seen.figures_hold);
  EXPECT_NE(seen.reason.find("limit read 8.00 MiB while it ran, not the 64.0 MiB memrun set: the test lowered it"),
            std::string::npos)
      << seen.reason;
  touched.sampled_lowest_limit = 64 * MiB;
  EXPECT_TRUE(decide(spec.tests[0], touched).passed) << decide(spec.tests[0], touched).reason;
  // Genuine kills at a limit below the peak's reach: an ancestor's lower
  // limit that other processes share (a container's), and v1's memory and
  // swap counter full while the host swapped the test's pages out.
  Observation ancestor = o;
  ancestor.kernel.limit_at_end = 64 * MiB;
  ancestor.kernel.effective_limit = 32 * MiB;
  EXPECT_TRUE(decide(spec.tests[0], ancestor).passed) << decide(spec.tests[0], ancestor).reason;
  Observation swapped = o;
  swapped.kernel.limit_at_end = 64 * MiB;
  swapped.kernel.memory_and_swap_peak = 64 * MiB;
  EXPECT_TRUE(decide(spec.tests[0], swapped).passed) << decide(spec.tests[0], swapped).reason;
  // The kernel keeps whole pages of a limit that is not a multiple of one.
  Spec odd = parse_spec("tests:\n  - {name: t, run: x, memory: 10000000B}\n", "s.yaml", tmp());
  Observation ok = Fixture::exited(0, MiB / 2);
  ok.kernel.limit_at_end = 10000000 / 4096 * 4096;
  EXPECT_TRUE(decide(odd.tests[0], ok).passed) << decide(odd.tests[0], ok).reason;
}

// A test that exited 0 with a 1 MiB kernel peak, before its verdict.
Observation exited_ok() { return Fixture::exited(0, MiB); }

TEST(Decide, ATestThatDefeatedItsLimitNeverPasses) {
  Fixture f;
  // Raised: the kernel saw 200 MiB under a 64 MiB limit.
  Verdict over = f.result(Outcome::pass, 0, 200 * MiB).verdict;
  EXPECT_FALSE(over.passed);
  EXPECT_NE(over.reason.find("defeated its memory limit: its peak 200.0 MiB is above its limit 64.0 MiB"),
            std::string::npos)
      << over.reason;
  // The limit file said more at the end than memrun wrote, whatever the peak.
  Observation raised_test = exited_ok();
  raised_test.kernel.limit_at_end = GiB;
  Verdict raised = decide(f.spec.tests[0], raised_test);
  EXPECT_FALSE(raised.passed);
  EXPECT_NE(raised.reason.find("limit was 1.00 GiB at the end, not the 64.0 MiB memrun set"), std::string::npos)
      << raised.reason;
  // A process moved out of the group, even with an expected OOM.
  Observation escaped_test = exited_ok();
  escaped_test.kernel.oom_kills = 1;
  escaped_test.kernel.escaped = 1;
  Spec spec = parse_spec("tests:\n  - {name: big, run: x, memory: 64MiB, expect: oom}\n", "s.yaml", tmp());
  Verdict escaped = decide(spec.tests[0], escaped_test);
  EXPECT_FALSE(escaped.passed);
  EXPECT_NE(escaped.reason.find("1 of its processes had moved out of its memory cgroup"), std::string::npos)
      << escaped.reason;
}

// The reason names what the kernel counted, from Final's named fields:
// huge pages refused at the hugetlb limit, throttling at memory_high.
TEST(Decide, TheReasonNamesRefusedHugePagesAndMemoryHighThrottling) {
  Fixture f;
  Observation huge = Fixture::exited(1, 40 * MiB);
  huge.kernel.refused_huge_pages = 7;
  Verdict failed = decide(f.spec.tests[0], huge);
  EXPECT_FALSE(failed.passed);
  EXPECT_NE(failed.reason.find("refused it huge pages 7 times at its hugetlb limit"), std::string::npos)
      << failed.reason;
  Spec spec = parse_spec("tests:\n  - {name: slow, run: x, memory: 64MiB, memory_high: 32MiB, timeout: 1s}\n", "s.yaml",
                         tmp());
  Observation held = Fixture::exited(-1, 40 * MiB);
  held.ending = Ending::timed_out;
  held.signal = 9;
  held.kernel.high_events = 12;
  Verdict slow = decide(spec.tests[0], held);
  EXPECT_EQ(slow.outcome, Outcome::timeout);
  EXPECT_NE(slow.reason.find("memory_high 32.0 MiB throttled it 12 times"), std::string::npos) << slow.reason;
}

TEST(Decide, RefusedForksAreAFailureThatExpectFailAccepts) {
  Fixture f;
  Observation bomb = exited_ok();
  bomb.kernel.refused_forks = 2026;
  Verdict r = decide(f.spec.tests[0], bomb);
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.outcome, Outcome::fail);
  EXPECT_NE(r.reason.find("refused 2026 forks at pids.max 4096"), std::string::npos) << r.reason;
  Spec spec = parse_spec("tests:\n  - {name: bomb, run: x, memory: 64MiB, pids: 64, expect: fail}\n", "s.yaml", tmp());
  Observation accepted_test = exited_ok();
  accepted_test.kernel.refused_forks = 3;
  Verdict accepted = decide(spec.tests[0], accepted_test);
  EXPECT_TRUE(accepted.passed) << accepted.reason;
}

TEST(Decide, PageCacheDoesNotEatHeadroom) {
  // The limit, reached: cache filled it.
  Fixture f;
  Verdict r = f.sampled(64, 10, 63, 61, 2, true).verdict;
  EXPECT_TRUE(r.passed);
  EXPECT_EQ(r.headroom_basis, HeadroomBasis::working_set);
  EXPECT_EQ(r.headroom, 61ll << 20);
}

TEST(Decide, AMissedSpikeKeepsTheKernelPeak) {
  // An anonymous spike between two samples.
  Fixture f;
  Verdict r = f.sampled(62, 3, 5, 1, 4).verdict;
  EXPECT_EQ(r.working_set_peak, 61ull << 20);  // only the cache seen is taken off
  EXPECT_EQ(r.headroom_basis, HeadroomBasis::peak);         // 1 MiB of cache is no reason to estimate
  EXPECT_EQ(r.headroom, 2ll << 20);
}

TEST(Decide, CacheOfAnInputReadFirstDoesNotEatHeadroom) {
  // Far from the limit, but 20 MiB of the 60 MiB peak is the page cache of
  // an input nobody had cached before: run after another reader, the same
  // test would not pay for it.
  Fixture f;
  Verdict r = f.sampled(60, 50, 59, 20, 39).verdict;
  EXPECT_EQ(r.headroom_basis, HeadroomBasis::working_set);
  EXPECT_EQ(r.working_set_peak, 40ull << 20);
  EXPECT_EQ(r.headroom, 24ll << 20);
  EXPECT_TRUE(r.passed) << r.reason;
}

TEST(Decide, CacheIsNotSubtractedWhenTheSamplesMissedThePeak) {
  // A spike the samples missed while 20 MiB of cache was around.
  Fixture f;
  Verdict r = f.sampled(62, 10, 30, 20, 10).verdict;
  EXPECT_EQ(r.headroom_basis, HeadroomBasis::peak);
  EXPECT_EQ(r.headroom, 2ll << 20);
  EXPECT_FALSE(r.passed);
}

// A suite's case exited with `code` (or `signal`), its output matching as
// given, under `rules`: the outcome memrun decides.
Outcome tool_says(const ToolRules& rules, int code, int signal = 0, bool pass = false, bool fail = false,
                  bool skip = false) {
  Fixture f;
  f.spec.tests[0].rules = rules;
  f.spec.tests[0].min_headroom.reset();
  Observation o = Fixture::exited(code, 1 << 20);
  o.signal = signal;
  o.pass_matched = pass, o.fail_matched = fail, o.skip_matched = skip;
  return decide(f.spec.tests[0], o).outcome;
}

TEST(Decide, CtestRulesDecideAsCtestDoes) {
  ToolRules ctest;
  ctest.tool = "ctest";
  EXPECT_EQ(tool_says(ctest, 0), Outcome::pass);
  EXPECT_EQ(tool_says(ctest, 2), Outcome::fail);
  ToolRules will_fail = ctest;
  will_fail.will_fail = true;
  EXPECT_EQ(tool_says(will_fail, 1), Outcome::pass);
  EXPECT_EQ(tool_says(will_fail, 0), Outcome::fail);
  EXPECT_EQ(tool_says(will_fail, -1, 11), Outcome::fail) << "a signal is ctest's Exception";
  ToolRules skip = ctest;
  skip.skip_exit_code = 77;
  EXPECT_EQ(tool_says(skip, 77), Outcome::skipped);
  EXPECT_EQ(tool_says(skip, 3), Outcome::fail);
  ToolRules required = ctest;
  required.pass_regex = {"ok"};
  required.fail_regex = {"bad"};
  EXPECT_EQ(tool_says(required, 1, 0, true), Outcome::pass) << "the exit code aside";
  EXPECT_EQ(tool_says(required, 0, 0, false), Outcome::fail);
  EXPECT_EQ(tool_says(required, 0, 0, true, true), Outcome::fail);
  EXPECT_EQ(tool_says(ctest, 1, 0, false, false, true), Outcome::skipped) << "a skip expression wins";
  EXPECT_EQ(tool_says(ctest, -1, 15, false, false, true), Outcome::fail) << "but not over a signal";
}

TEST(Decide, OutputPastTheLogCapIsNeverTakenAsMatched) {
  // ctest matches the whole output; memrun matches what --max-log kept.
  ToolRules ctest;
  ctest.tool = "ctest";
  ctest.fail_regex = {"FATAL"};
  Fixture f;
  f.spec.tests[0].rules = ctest;
  f.spec.tests[0].min_headroom.reset();
  Observation o = Fixture::exited(0, 1 << 20);
  o.log_discarded_bytes = 70u << 20;
  Verdict v = decide(f.spec.tests[0], o);
  EXPECT_EQ(v.outcome, Outcome::fail);
  EXPECT_NE(v.reason.find("went past --max-log"), std::string::npos) << v.reason;
  o.fail_matched = true;  // found in what was kept: that decides
  EXPECT_NE(decide(f.spec.tests[0], o).reason.find("the fail expression is in its output"), std::string::npos);
  o.fail_matched = false;
  o.log_discarded_bytes = 0;
  EXPECT_EQ(decide(f.spec.tests[0], o).outcome, Outcome::pass);
}

TEST(Decide, APytestCaseIsWhatPytestSaidNeverItsExitCodeAlone) {
  ToolRules pytest;
  pytest.tool = "pytest";
  pytest.outcome_file = true;
  auto says = [&](const std::string& said, int code) {
    Fixture f;
    f.spec.tests[0].rules = pytest;
    Observation o = Fixture::exited(code, 1 << 20);
    o.tool_said = said;
    return decide(f.spec.tests[0], o);
  };
  EXPECT_EQ(says("passed", 0).outcome, Outcome::pass);
  EXPECT_EQ(says("skipped", 77).outcome, Outcome::skipped);
  EXPECT_EQ(says("failed", 1).outcome, Outcome::fail);
  // os._exit(77) or os._exit(0) in a test: pytest never got to say.
  for (int code : {0, 77}) {
    Verdict v = says("", code);
    EXPECT_EQ(v.outcome, Outcome::fail) << code;
    EXPECT_NE(v.reason.find("pytest never said how the case ended"), std::string::npos) << v.reason;
  }
  EXPECT_EQ(says("none", 0).outcome, Outcome::fail) << "pytest.exit() before the case's end";
  EXPECT_EQ(says("passed", 3).outcome, Outcome::fail) << "an exit code that disagrees";
}

TEST(Decide, ASkippedOrDisabledCaseIsNeitherPassedNorFailed) {
  Fixture f;
  f.spec.tests[0].rules.tool = "pytest";
  f.spec.tests[0].rules.outcome_file = true;
  Observation skipped = Fixture::exited(77, 60 << 20);
  skipped.tool_said = "skipped";
  Verdict v = decide(f.spec.tests[0], skipped);
  EXPECT_EQ(v.outcome, Outcome::skipped);
  EXPECT_TRUE(v.passed) << "min_headroom does not apply to what did not run: " << v.reason;
  f.spec.tests[0].disabled = true;
  Verdict d = decide(f.spec.tests[0], Observation{});
  EXPECT_TRUE(d.disabled && d.passed && d.outcome == Outcome::skipped);
  Tally t;
  t.add(v), t.add(d);
  EXPECT_EQ(t.passed, 0u);
  EXPECT_EQ(t.failed(), 0u);
  EXPECT_EQ(t.skipped, 2u);
  EXPECT_EQ(t.disabled, 1u);
  EXPECT_EQ(outcome_named("skipped"), Outcome::skipped);
}


}  // namespace
}  // namespace memrun

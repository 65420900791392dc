#include "runner/report.h"
#include "runner/utf8.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>
#include <nlohmann/json.hpp>
#include <pugixml.hpp>
#include <regex>

#include "runner/comparison.h"
#include "runner/ci_report.h"
#include "runner/error.h"
#include "runner/merge.h"
#include "runner/plan.h"
#include "runner/plot.h"
#include "runner/report_json.h"
#include "runner/spec.h"

namespace memrun {
namespace {

// Where the tests' files go: $TMPDIR, else /tmp.
std::string tmp() { return std::filesystem::temp_directory_path().string(); }

struct Fixture {
  Spec spec;
  PlannedTest planned;
  Fixture() {
    spec = parse_spec("tests:\n  - {name: big, run: x, memory: 64MiB, min_headroom: 8MiB}\n", "s.yaml", tmp());
    planned = {&spec, &spec.tests[0], "001-big", "/nonexistent/o", "/nonexistent/e"};
  }
  /// The record of a test that exited with `exit_code` (an OOM kill: the
  /// kernel killed it, signal 9) with this kernel peak.
  TestRecord result(Outcome outcome, int exit_code, uint64_t peak) {
    Observation o = exited(exit_code, peak);
    if (outcome == Outcome::oom) {
      o.exit_code = -1;
      o.signal = 9;
      o.kernel.oom_kills = 1;
      o.kernel.limit_reached = true;
    }
    return make_record(planned, o);
  }
  /// A test that exited 0 with this kernel peak and these samples (MiB).
  TestRecord sampled(uint64_t peak, int samples, uint64_t sampled_peak, uint64_t cache_at_sampled_peak,
                     uint64_t sampled_working_set, bool limit_reached = false) {
    Observation o = exited(0, peak << 20);
    o.kernel.limit_reached = limit_reached;
    o.samples = samples;
    o.sampled_peak = sampled_peak << 20;
    o.reclaimable_at_sampled_peak = cache_at_sampled_peak << 20;
    o.sampled_working_set = sampled_working_set << 20;
    return make_record(planned, o);
  }
  static Observation exited(int exit_code, uint64_t peak) {
    Observation o;
    o.ending = Ending::exited;
    o.exit_code = exit_code;
    o.kernel.peak = peak;
    o.kernel.effective_limit = UINT64_MAX;
    return o;
  }
};

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
  PlannedTest p{&spec, &spec.tests[0], "001-s", "/nonexistent/o", "/nonexistent/e"};
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

// A report written through the spool, read back.
nlohmann::ordered_json written(Report& report, const RunInfo& info, std::string* text = nullptr) {
  std::string path = tmp() + "/memrun-report-test-" + std::to_string(::getpid()) + ".json";
  report.write(path, info);
  std::ifstream in(path);
  std::string got((std::istreambuf_iterator<char>(in)), {});
  std::filesystem::remove(path);
  if (text) *text = got;
  return nlohmann::ordered_json::parse(got);
}

TEST(Report, JsonHasTheDocumentedFields) {
  Fixture f;
  RunInfo info;
  info.backend = "v1";
  Report report(tmp());
  report.add_test(0, f.result(Outcome::oom, -1, 64ull << 20));
  auto j = written(report, info);
  EXPECT_EQ(j["schema"], "memrun-report/1");
  EXPECT_EQ(j["host"]["backend"], "v1");
  const auto& t = j["tests"][0];
  for (const char* k : {"name", "outcome", "expected", "passed", "limit_bytes", "peak_bytes", "headroom_bytes",
                        "headroom_pct", "oom_kills", "exit_code", "signal", "duration_s", "memory_stat",
                        "events", "stdout", "stderr", "started", "ended", "breakdown", "line", "swap_peak_bytes",
                        "swap_bytes", "swap_limit_bytes"})
    EXPECT_TRUE(t.contains(k)) << k;
  EXPECT_EQ(t["outcome"], "oom");
  EXPECT_TRUE(t["exit_code"].is_null());
  EXPECT_EQ(j["summary"]["failed"], 1);
}

TEST(Report, TestsComeInThePlansOrderAndReadLikeOneDump) {
  Fixture f;
  Report report(tmp());
  // Ended in another order than planned (-j), one never started.
  TestRecord second = f.result(Outcome::pass, 0, 1 << 20), first = f.result(Outcome::fail, 3, 2 << 20);
  report.add_test(2, second);
  report.add_test(0, first);
  std::string text;
  auto j = written(report, RunInfo{}, &text);
  ASSERT_EQ(j["tests"].size(), 2u);
  EXPECT_EQ(j["tests"][0]["exit_code"], 3);
  EXPECT_EQ(j["tests"][1]["exit_code"], 0);
  EXPECT_EQ(j["summary"]["total"], 2);
  EXPECT_EQ(j["summary"]["passed"], 1);
  EXPECT_EQ(j["setups"], nlohmann::ordered_json::array());
  // Assembled piece by piece, the text is what one dump(2) would print.
  EXPECT_EQ(text, j.dump(2) + "\n");
}

// An explanation with every field set (explain.h), names that are markup.
Explanation an_explanation() {
  Explanation e;
  e.status = "explained";
  e.why = "oom";
  e.profiler = "memray 1.20.0";
  e.command = "python -m memray run x.py";
  e.explained_peak = 96 * MiB;
  e.explained_duration_s = 1.25;
  e.limit = 256 * MiB;
  e.outcome = "pass";
  e.exit_code = 0;
  e.kernel_peak = 170 * MiB;
  e.duration_s = 3.5;
  e.at_peak = {150 * MiB, MiB, 2 * MiB, 3 * MiB, 4096};
  e.profiled_peak = 125 * MiB;
  e.unseen = {45 * MiB, MiB, 2 * MiB + 4096, 3 * MiB, 5 * MiB, 20 * MiB};
  e.summary = "120 MiB by helper";
  AllocationSite s;
  s.bytes = 120 * MiB;
  s.allocations = 3;
  s.share = 120.0 / 170.0;
  s.process = "python x.py (pid 2)";
  s.stack = {{"default_malloc", "", 0, true},
             {"helper<script>|`x`", "/t/a|b.py", 5, false},
             {"test_it", "/t/a|b.py", 9, false}};
  s.where = 1;
  s.code = "x = helper(\"<b>|`y`\")";
  // A thread pool's allocation: its own native frames, then the Python
  // stack that ran at the peak.
  AllocationSite pool = s;
  pool.bytes = 30 * MiB;
  pool.share = 30.0 / 170.0;
  pool.stack = {{"start_thread", "./nptl/pthread_create.c", 442, true}, {"test_it", "/t/a|b.py", 9, false}};
  pool.where = 1;
  pool.served_from = 1;
  e.sites = {s, pool};
  e.processes = {{2, "python x.py", 125 * MiB, "memray"}, {7, "child <b>", 5 * MiB, ""}};
  return e;
}

TEST(Report, AnExplanationIsEscapedInMarkdownAndJUnitLikeEveryName) {
  TestRecord r;
  r.test.name = "t";
  r.explanation = an_explanation();
  std::string md = explanation_markdown(r);
  EXPECT_EQ(md.find("<script>"), std::string::npos) << md;
  EXPECT_EQ(md.find("a|b"), std::string::npos) << md;  // no cell separator from data
  EXPECT_NE(md.find("helper&#60;script&#62;&#124;&#96;x&#96;"), std::string::npos) << md;
  auto lines = explanation_lines(*r.explanation, 5);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_NE(lines[1].find("helper<script>|`x` (/t/a|b.py:5): x = helper(\"<b>|`y`\") <- test_it (/t/a|b.py:9)"),
            std::string::npos)
      << lines[1];
  EXPECT_EQ(md.find("<b>"), std::string::npos) << md;
  // A thread pool's allocation is shown at the test's line it served.
  EXPECT_NE(lines[2].find("test_it (/t/a|b.py:9): x = helper(\"<b>|`y`\") (on other threads, while this line ran)"), std::string::npos)
      << lines[2];
}

TEST(Report, AnExplanationWithHostileFramesKeepsMarkdownRowsAndTheHtmlWellFormed) {
  // Frame names, files and the summary are the test's data: markup, a cell
  // separator and a newline in them must not open an element or a row.
  TestRecord r;
  r.test.name = "t";
  r.verdict.outcome = Outcome::oom;
  r.verdict.passed = false;
  Explanation e = an_explanation();
  StackFrame& f = e.sites[0].stack[1];
  f.function = "<script>alert(1)</script>|x\n| injected | row |";
  f.file = "/t/</code></td>\n|.py";
  e.sites[0].stack[2].function = "caller</details>\n|";
  e.summary = "<img src=x onerror=alert(1)>\n| row |";
  e.sites.push_back(e.sites[0]);
  r.explanation = e;

  std::string md = explanation_markdown(r);
  for (const char* markup : {"<script", "<img", "</code></td>", "</details>\n|"})
    EXPECT_EQ(md.find(markup), std::string::npos) << markup << " in\n" << md;
  // The table: its header, its rule, then one line of four cells per site.
  std::istringstream lines(md);
  int rows = 0;
  bool in_table = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| bytes |", 0) == 0) in_table = true;
    if (!in_table) continue;
    if (line.empty() || line[0] != '|') break;
    EXPECT_EQ(std::count(line.begin(), line.end(), '|'), 5) << line;
    ++rows;
  }
  EXPECT_EQ(rows, 2 + 3) << md;

  std::string html;
  ReportData data;
  data.tests.push_back(r);
  html_report(data.info, each_record(data), [&](const std::string& part) { html += part; });
  for (const char* markup : {"<script>alert", "<img", "</code></td>\n", "caller</details>"})
    EXPECT_EQ(html.find(markup), std::string::npos) << markup;
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;|x"), std::string::npos);
  // The explanation's table, read as XML: well formed, one row per site,
  // and each frame's text exactly the data (escaped, never interpreted).
  auto from = html.find("<table class=\"explain\">"), to = html.find("</table>", from);
  ASSERT_NE(from, std::string::npos) << html;
  pugi::xml_document doc;
  ASSERT_TRUE(doc.load_string(html.substr(from, to + 8 - from).c_str())) << html.substr(from, to + 8 - from);
  auto table = doc.child("table");
  EXPECT_EQ(std::distance(table.children("tr").begin(), table.children("tr").end()), 4);
  auto row = table.child("tr").next_sibling("tr");
  EXPECT_EQ(std::string(row.child("td").next_sibling("td").next_sibling("td").child("code").text().get()),
            site_text(e.sites[0]));
  // The whole page under libxml2's HTML parser: no error but the HTML5 and
  // SVG elements its HTML 4 parser does not know.
  std::string path = ::testing::TempDir() + "/hostile-explanation.html";
  write_atomically(path, html);
  std::string check = "xmllint --html --noout " + path + " 2>&1";
  std::FILE* p = ::popen(check.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string said;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) said.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << said;
  static const std::regex unknown_tag(R"(.*HTML parser error : Tag (section|header|main|footer|nav|details|summary|svg|rect|text|line|path|polyline|polygon|g|title|circle) invalid)");
  std::istringstream errors(said);
  for (std::string line; std::getline(errors, line);) {
    if (line.find("parser error") == std::string::npos) continue;
    EXPECT_TRUE(std::regex_match(line, unknown_tag)) << line;
  }
}

TEST(Report, ARecordReadBackIsTheRecordWritten) {
  // One serialization both ways: every field of a record the report
  // carries comes back with its type, so that merge, repro and the CI
  // outputs of a merged run see what the run saw.
  Fixture f;
  Observation o = Fixture::exited(-1, 64 * MiB);
  o.signal = 9;
  o.kernel.oom_kills = 1;
  o.kernel.limit_reached = true;
  o.kernel.oom_at_limit = true;
  o.sampled_limit = 64 * MiB;
  o.kernel.raw.events = {{"oom_kill", 1}, {"max", 7}};
  o.kernel.raw.stat = {{"anon", 5 * MiB}};
  o.kernel.breakdown.shmem = 3 * MiB;
  o.kernel.limit_at_end = 64 * MiB;
  o.samples = 2;
  o.sampled_peak = 60 * MiB;
  o.timeline.interval_s = 0.02;
  o.timeline.add(0.02, 10 * MiB, 9 * MiB, MiB);
  o.timeline.add(0.04, 60 * MiB, 59 * MiB, MiB);
  o.timeline.peak_t_s = 0.04;
  o.oom_victims = {{41, "big, \"quoted\"", 60 * MiB, MiB, 0, "/x/memrun-r/001-big"}};
  o.stdout_bytes = 12;
  o.started = std::chrono::system_clock::from_time_t(1796032800) + std::chrono::milliseconds(123);
  o.ended = o.started + std::chrono::seconds(2);
  o.duration_s = 2;
  o.cleanup_error = "cannot remove cgroup x: Device or resource busy";
  TestRecord written_record = make_record(f.planned, o);
  written_record.explanation = an_explanation();
  nlohmann::ordered_json j = to_json(written_record);
  TestRecord back = record_from_json(j, "t");
  EXPECT_EQ(to_json(back), j);
  // The explanation too, field by field (explain.h).
  ASSERT_TRUE(back.explanation);
  const Explanation &a = *written_record.explanation, &b = *back.explanation;
  EXPECT_EQ(b.sites, a.sites);
  EXPECT_EQ(b.processes, a.processes);
  EXPECT_EQ(b.unseen, a.unseen);
  EXPECT_EQ(std::tie(b.status, b.message, b.why, b.profiler, b.command, b.summary, b.outcome),
            std::tie(a.status, a.message, a.why, a.profiler, a.command, a.summary, a.outcome));
  EXPECT_EQ(std::tie(b.explained_peak, b.explained_duration_s, b.limit, b.exit_code, b.kernel_peak, b.duration_s,
                     b.profiled_peak),
            std::tie(a.explained_peak, a.explained_duration_s, a.limit, a.exit_code, a.kernel_peak, a.duration_s,
                     a.profiled_peak));
  EXPECT_EQ(std::tie(b.at_peak.anon, b.at_peak.file, b.at_peak.kernel, b.at_peak.shmem, b.at_peak.sock),
            std::tie(a.at_peak.anon, a.at_peak.file, a.at_peak.kernel, a.at_peak.shmem, a.at_peak.sock));
  EXPECT_EQ(back.verdict.outcome, Outcome::oom);
  EXPECT_EQ(back.observed.oom_victims.at(0).name, "big, \"quoted\"");
  EXPECT_EQ(back.observed.oom_victims.at(0).oom_memcg, "/x/memrun-r/001-big");
  EXPECT_EQ(back.observed.kernel.oom_at_limit, std::optional<bool>(true));
  EXPECT_EQ(back.observed.sampled_limit, 64 * MiB);
  EXPECT_EQ(back.observed.started, o.started);
  EXPECT_EQ(back.test.stdout_path, "/nonexistent/o");
  // A field of the wrong type is the input's fault, said with where.
  j["peak_bytes"] = "lots";
  try {
    record_from_json(j, "r.json: tests[0]");
    ADD_FAILURE() << "a string peak was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), Category::bad_input);
    EXPECT_NE(std::string(e.what()).find("r.json: tests[0] 'big': field 'peak_bytes'"), std::string::npos) << e.what();
  }
}

// A record with every field set to something other than its default: what
// the round trip must keep.
TestRecord every_field_set() {
  TestRecord r;
  TestIdentity& t = r.test;
  t.name = "every";
  t.spec = "specs/all.yaml";
  t.line = 7;
  t.command = "./work --all";
  t.env = {{"A", "1"}};
  t.tags = {"slow", "io"};
  t.expected = "oom";
  t.requested_limit = 64 * MiB;
  t.swap_limit = 8 * MiB;
  t.memory_high = 60 * MiB;
  t.stdout_path = "/run/o";
  t.stderr_path = "/run/e";
  t.max_increase = std::pair{5.5, 2 * MiB};
  t.inputs = {"data/in.parquet"};
  t.timeout_s = 30.5;
  Observation& o = r.observed;
  o.ending = Ending::thrashed;
  o.start_error = "not started: why";
  o.exit_code = 3;
  o.signal = 9;
  cgroup::Final& k = o.kernel;
  k.peak = 63 * MiB;
  k.oom_kills = 2;
  k.oom_group_kills = 1;
  k.limit_reached = true;
  k.oom_at_limit = false;
  k.raw.events = {{"oom_kill", 2}, {"max", 7}};
  k.raw.stat = {{"anon", 5 * MiB}};
  k.breakdown = {1, 2, 3, 4, 5};
  k.reclaimable_file = 6 * MiB;
  k.raw.pressure_us = {{"some", 11}, {"full", 12}};
  k.refused_forks = 13;
  k.refused_huge_pages = 14;
  k.high_events = 15;
  k.effective_limit = 62 * MiB;
  k.limit_at_end = 64 * MiB;
  k.swap_peak = 3 * MiB;
  k.memory_and_swap_peak = 66 * MiB;
  k.swap_at_end = MiB;
  k.escaped = 1;
  o.samples = 9;
  o.sampled_peak = 61 * MiB;
  o.reclaimable_at_sampled_peak = 4 * MiB;
  o.sampled_working_set = 57 * MiB;
  o.sampled_swap_peak = 2 * MiB;
  o.sampled_limit = 64 * MiB;
  o.sampled_lowest_limit = 62 * MiB;
  o.escaped_to = "0::/elsewhere";
  o.at_peak = {6, 7, 8, 9, 10};
  o.timeline.interval_s = 0.02;
  o.timeline.t_s = {0.04, 0.08};
  o.timeline.current = {10 * MiB, 60 * MiB};
  o.timeline.anon = {9 * MiB, 59 * MiB};
  o.timeline.file = {MiB, MiB};
  o.timeline.stride = 2;
  o.timeline.skipped = 1;
  o.timeline.peak_t_s = 0.08;
  o.oom_victims = {{41, "big", 60 * MiB, MiB, 2, "/x/memrun-r/001-every"}};
  o.placement = "clone3";
  o.thrash_refaulted = 640 * MiB;
  o.thrash_window_s = 5.25;
  o.thrash_stalled_s = 4.5;
  o.cleanup_error = "cannot remove cgroup x: Device or resource busy";
  o.log_error = "cannot write /run/o: No space left on device";
  o.stdout_bytes = 12;
  o.stderr_bytes = 13;
  o.log_discarded_bytes = 14;
  o.duration_s = 6.125;
  o.cpu_user_s = 1.5;
  o.cpu_system_s = 0.25;
  o.started = std::chrono::system_clock::from_time_t(1796032800) + std::chrono::milliseconds(123);
  o.ended = o.started + std::chrono::milliseconds(6125);
  o.pass_matched = o.fail_matched = o.skip_matched = true;
  o.log_tail = "last line\n";
  Verdict& v = r.verdict;
  v.outcome = Outcome::thrash;
  v.passed = false;
  v.reason = "thrashing";
  v.limit = 62 * MiB;
  v.peak = 61 * MiB;
  v.peak_sampled = true;
  v.working_set_peak = 57 * MiB;
  v.page_cache = 6 * MiB;
  v.headroom_basis = HeadroomBasis::working_set;
  v.headroom = -3 * static_cast<int64_t>(MiB);
  v.headroom_pct = -4.29;
  v.swap_peak = 3 * MiB;
  v.swap_at_end = MiB;
  v.disabled = true;
  v.figures_hold = false;
  r.runs = {{61 * MiB, 57 * MiB, Outcome::thrash, false, 6.125, false}, {60 * MiB, 56 * MiB, Outcome::pass, true, 5.5}};
  return r;
}

TEST(Report, EveryFieldOfARecordComesBackFromItsJson) {
  // The CI outputs and --baseline work from records read back from the
  // spool: a record read back must be the record written, field by field.
  TestRecord r = every_field_set();
  TestRecord back = record_from_json(to_json(r), "t");
  EXPECT_TRUE(back.test == r.test);
  EXPECT_TRUE(back.verdict == r.verdict);
  EXPECT_TRUE(back.runs == r.runs);
  EXPECT_TRUE(back.observed.kernel == r.observed.kernel);
  EXPECT_TRUE(back.observed.timeline == r.observed.timeline);
  EXPECT_TRUE(back.observed == r.observed);
  EXPECT_TRUE(back == r) << to_json(back).dump(1) << "\n" << to_json(r).dump(1);
  // And a record with every optional field unset, and one that never started.
  // (Every record has its runs: make_record gives it one.)
  TestRecord bare;
  bare.test.name = "bare";
  bare.test.spec = "s.yaml";
  bare.runs = {RunFigures{}};
  EXPECT_TRUE(record_from_json(to_json(bare), "t") == bare) << to_json(record_from_json(to_json(bare), "t")).dump(1);
  TestRecord refused = bare;
  refused.observed.ending = Ending::not_run;
  refused.verdict.outcome = Outcome::interrupted;
  EXPECT_TRUE(record_from_json(to_json(refused), "t") == refused);
}

TEST(Report, TheSpoolGivesBackTheRecordsWritten) {
  std::string dir = (std::filesystem::temp_directory_path() / ("memrun-spool-" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(dir);
  TestRecord r = every_field_set();
  {
    Report report(dir);
    report.add_test(0, r);
    std::vector<TestRecord> back;
    report.records()([&](const TestRecord& t) { back.push_back(t); });
    ASSERT_EQ(back.size(), 1u);
    EXPECT_TRUE(back[0] == r) << to_json(back[0]).dump(1);
  }
  std::filesystem::remove_all(dir);
}

// What the console prints of `r`, without colour.
std::string console_text(const TestRecord& r) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* out = open_memstream(&buf, &len);
  Console(out, false, 4).test(r);
  std::fclose(out);
  std::string text(buf, len);
  free(buf);
  return text;
}

TEST(Report, ConsoleLineIsPlainWithoutColor) {
  Fixture f;
  TestRecord r = f.result(Outcome::pass, 0, 40ull << 20);
  std::string line = console_text(r);
  EXPECT_EQ(line.find('\033'), std::string::npos);
  EXPECT_NE(line.find("PASS  big"), std::string::npos) << line;
  EXPECT_NE(line.find("peak 40.0 MiB / 64.0 MiB"), std::string::npos) << line;
  EXPECT_NE(line.find("headroom 24.0 MiB (38%)"), std::string::npos) << line;
}

TEST(Report, AtomicWriteKeepsThePreviousFileOnFailure) {
  std::string dir = tmp() + "/memrun-report-test-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::string path = dir + "/r.json";
  write_atomically(path, "first");
  write_atomically(path, "second");
  std::ifstream in(path);
  std::string got((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(got, "second");
  EXPECT_THROW(write_atomically(dir + "/missing/r.json", "x"), Error);
  std::filesystem::remove_all(dir);
}

TEST(KernelLog, FindsTheVictimsOfOneGroup) {
  std::vector<std::string> log = {
      "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/x/memrun-r/001-a,"
      "task_memcg=/x/memrun-r/001-a,task=big,pid=41,uid=0",
      "Memory cgroup out of memory: Killed process 41 (big) total-vm:128904kB, anon-rss:101888kB, file-rss:3224kB, "
      "shmem-rss:8kB, UID:0 pgtables:248kB oom_score_adj:0",
      "oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/x/memrun-r/002-b,task_memcg=/x/memrun-r/002-b,task=other,pid=42,uid=0",
      "Memory cgroup out of memory: Killed process 42 (other) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB, UID:0",
  };
  auto kills = parse_oom_kills(log, "memrun-r/001-a");
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].pid, 41);
  EXPECT_EQ(kills[0].name, "big");
  EXPECT_EQ(kills[0].anon_rss, 101888u * 1024);
  EXPECT_EQ(kills[0].shmem_rss, 8u * 1024);
}

TEST(KernelLog, AGroupNameWithACommaIsStillFound) {
  std::vector<std::string> log = {
      "oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/x/memrun-r/001-a,b,task_memcg=/x/memrun-r/001-a,b,task=big,"
      "pid=41,uid=0",
      "Memory cgroup out of memory: Killed process 41 (big) total-vm:1kB, anon-rss:4kB, file-rss:0kB, shmem-rss:0kB",
  };
  auto kills = parse_oom_kills(log, "memrun-r/001-a,b");
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].pid, 41);
  EXPECT_TRUE(parse_oom_kills(log, "memrun-r/001-a").empty()) << "a prefix of another group's name matched";
  // A whole path (Group::kernel_path) matches exactly, never as a suffix.
  EXPECT_EQ(parse_oom_kills(log, "/x/memrun-r/001-a,b").size(), 1u);
  EXPECT_TRUE(parse_oom_kills(log, "/memrun-r/001-a,b").empty());
}

TEST(KernelLog, AVictimInASubGroupIsTheTests) {
  // A sealed test runs in its group's leaf "test", and a test may make
  // sub-groups of its own: the kernel names the victim's group.
  std::vector<std::string> log = {
      "oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/x/memrun-r/001-a/test,task_memcg=/x/memrun-r/001-a/test/sub,"
      "task=big,pid=41,uid=0",
      "Memory cgroup out of memory: Killed process 41 (big) total-vm:1kB, anon-rss:4kB, file-rss:0kB, shmem-rss:0kB",
  };
  EXPECT_EQ(parse_oom_kills(log, "/x/memrun-r/001-a").size(), 1u);
  EXPECT_EQ(parse_oom_kills(log, "memrun-r/001-a").size(), 1u);
  EXPECT_TRUE(parse_oom_kills(log, "/x/memrun-r/001-").empty()) << "a prefix of the group's name matched";
  EXPECT_TRUE(parse_oom_kills(log, "/x/memrun-r/001-a/test/s").empty());
}

TEST(KernelLog, AKillNamesTheGroupWhoseLimitWasHit) {
  // oom_memcg= is the group over its limit, task_memcg= the victim's: a
  // limit the test set on a sub-group of its own is not memrun's.
  std::vector<std::string> log = {
      "oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/x/memrun-r/001-a,b/sub,task_memcg=/x/memrun-r/001-a,b/sub,"
      "task=big,pid=41,uid=0",
      "Memory cgroup out of memory: Killed process 41 (big) total-vm:1kB, anon-rss:4kB, file-rss:0kB, shmem-rss:0kB",
      "Memory cgroup out of memory: Killed process 43 (quiet) total-vm:1kB, anon-rss:4kB, file-rss:0kB, shmem-rss:0kB",
  };
  auto kills = parse_oom_kills(log, "/x/memrun-r/001-a,b", {43});
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].oom_memcg, "/x/memrun-r/001-a,b/sub");
  // A kill known only by its pid (the line that names groups rate-limited)
  // says nothing of the limit.
  log.erase(log.begin());
  kills = parse_oom_kills(log, "/x/memrun-r/001-a,b", {41});
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].oom_memcg, "");
  // The machine's memory ran out: no group's limit, the root's as it were.
  log = {"oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,"
         "task_memcg=/x/memrun-r/001-a,b,task=big,pid=41,uid=0",
         "Out of memory: Killed process 41 (big) total-vm:1kB, anon-rss:4kB, file-rss:0kB, shmem-rss:0kB"};
  kills = parse_oom_kills(log, "/x/memrun-r/001-a,b");
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].oom_memcg, "/");
}

TEST(KernelLog, ARateLimitedReportStillNamesAKnownVictim) {
  // Past ten OOM reports in five seconds the kernel leaves out the line
  // that names the group ("oom_kill_process: 6 callbacks suppressed"); the
  // "Killed process" line always comes. A pid memrun saw in the group
  // stands in, unless a line names it as another group's.
  std::vector<std::string> log = {
      "Memory cgroup out of memory: Killed process 41 (big) total-vm:1kB, anon-rss:4kB, file-rss:0kB, shmem-rss:0kB",
      "oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/x/memrun-r/002-b,task_memcg=/x/memrun-r/002-b,task=other,pid=42,uid=0",
      "Memory cgroup out of memory: Killed process 42 (other) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB",
      "Memory cgroup out of memory: Killed process 43 (third) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB",
  };
  EXPECT_TRUE(parse_oom_kills(log, "memrun-r/001-a").empty()) << "a kill taken without anything naming it ours";
  auto kills = parse_oom_kills(log, "memrun-r/001-a", {41, 42});
  ASSERT_EQ(kills.size(), 1u) << "42 is another group's, by its own line";
  EXPECT_EQ(kills[0].pid, 41);
  EXPECT_EQ(kills[0].name, "big");
  // With a line naming the group, that is the kill: with memory.oom.group
  // the kernel logs every member it kills with it, and those are not it.
  log.insert(log.begin(), "oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/x/memrun-r/001-a,"
                          "task_memcg=/x/memrun-r/001-a,task=third,pid=43,uid=0");
  kills = parse_oom_kills(log, "memrun-r/001-a", {41, 43});
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].pid, 43);
}

TEST(Report, LogTail) {
  std::string path = tmp() + "/memrun-tail-" + std::to_string(::getpid());
  std::ofstream(path) << "1\n2\n3\n4\n";
  EXPECT_EQ(log_tail(path, 2), "3\n4");
  EXPECT_EQ(log_tail(path, 10), "1\n2\n3\n4");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace memrun

namespace memrun {
namespace {

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

TEST(Decide, ASkippedOrDisabledCaseIsNeitherPassedNorFailed) {
  Fixture f;
  f.spec.tests[0].rules.tool = "pytest";
  f.spec.tests[0].rules.skip_exit_code = kPytestSkipped;
  Verdict v = decide(f.spec.tests[0], Fixture::exited(kPytestSkipped, 60 << 20));
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

TEST(Report, AnOomWithoutSampleShowsTheKernelsFiguresNotZeros) {
  Fixture f;
  f.spec.tests[0].min_headroom.reset();
  Observation o = Fixture::exited(-1, 4 << 20);
  o.signal = 9;
  o.kernel.oom_kills = 1;
  o.kernel.oom_at_limit = true;  // at the limit memrun set
  o.samples = 0;
  o.duration_s = 0.01;
  o.oom_victims = {{123, "eater", 3977 << 10, 1 << 20, 0, ""}};
  TestRecord r = make_record(f.planned, o);
  EXPECT_EQ(r.observed.at_peak.anon, 3977u << 10) << "the victims' figures, not the emptied group's";
  std::string text = console_text(r);
  EXPECT_EQ(text.find("anon 0 B"), std::string::npos) << text;
  EXPECT_NE(text.find("no sample"), std::string::npos) << text;
  EXPECT_NE(text.find("anon-rss 3.88 MiB"), std::string::npos) << text;
}

TEST(Report, ControlsInAVictimsNameAndTheLogAreWrittenAsNamesAre) {
  // A process name the kernel logs is the test's to choose (prctl
  // PR_SET_NAME): an ESC, a CR or a broken byte in it reaches the console
  // as the visible \xNN the one rule writes, never raw and never a '?'
  // that hides which byte it was.
  Fixture f;
  Observation o = Fixture::exited(-1, 4 << 20);
  o.signal = 9;
  o.kernel.oom_kills = 1;
  o.kernel.oom_at_limit = true;
  o.oom_victims = {{123, "ea\x1b[2Jt\rer\xff", 1 << 20, 1 << 20, 0, ""}};
  TestRecord r = make_record(f.planned, o);
  std::string text = console_text(r);
  EXPECT_NE(text.find("the kernel killed ea\\x1b[2Jt\\x0der\\xff (pid 123)"), std::string::npos) << text;
  for (char c : std::string("\x1b\r\xff")) EXPECT_EQ(text.find(c), std::string::npos) << text;
  EXPECT_EQ(printable("a\tb\nc\rd\x07"), "a\tb\nc\\x0dd\\x07");
  EXPECT_EQ(one_line("a\tb\nc\rd"), "a\\tb\\nc\\x0dd");
}

// A report as memrun writes it, of one test named "big", as JSON to edit.
nlohmann::ordered_json valid_report() {
  Fixture f;
  ReportData r;
  r.info.memrun_version = "0.1.0";
  r.info.run_id = "20261201-1";
  r.info.backend = "v1";
  r.info.cgroup_mode = "hybrid";
  r.info.started = std::chrono::system_clock::from_time_t(1796032800);
  r.info.ended = r.info.started + std::chrono::seconds(3);
  TestRecord t = f.result(Outcome::pass, 0, 20ull << 20);
  t.observed.timeline.add(0.02, 1 << 20, 1 << 20, 0);
  r.tests.push_back(t);
  return nlohmann::ordered_json::parse(report_text(r));
}

// The message parse_report refuses `j` with (exit 2), or "" if it reads it.
std::string refusal(const nlohmann::ordered_json& j) {
  try {
    parse_report(j.dump(), "r.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), Category::bad_input) << e.what();
    return e.what();
  }
  return "";
}

TEST(ReportReader, AValidReportReadsBackAndItsRunInfoToo) {
  auto j = valid_report();
  j["memrun_path"] = "/opt/memrun/bin/memrun";
  j["host_cgroups"] = true;
  j["spec_environment"] = {{"POLARS_VERSION", "0.20.15"}, {"UNSET", nullptr}};
  EXPECT_EQ(refusal(j), "");
  ReportData r = parse_report(j.dump(), "r.json");
  EXPECT_EQ(r.info.memrun_path, "/opt/memrun/bin/memrun");
  EXPECT_TRUE(r.info.host_cgroups);
  EXPECT_EQ(r.info.spec_environment.at("POLARS_VERSION"), "0.20.15");
  EXPECT_FALSE(r.info.spec_environment.at("UNSET").has_value());
  // And it writes them as it read them.
  auto again = nlohmann::ordered_json::parse(report_text(r));
  EXPECT_EQ(again["spec_environment"], j["spec_environment"]);
  EXPECT_EQ(again["memrun_path"], j["memrun_path"]);
}

TEST(ReportReader, AComparisonIsReadBackAndMergeKeepsIt) {
  // A run with --baseline carries its comparison; a report read back has
  // it as data, and merge of shards keeps every shard's.
  Comparison c;
  c.base_name = "base.json";
  c.head_name = "this run";
  c.warnings = {"another kernel: 6.1 in base, 6.8 in head"};
  TestChange up;
  up.name = "big";
  up.spec = "s.yaml";
  up.line = 4;
  up.change = Change::regressed;
  up.figure = "peak";
  up.base_lo = 10, up.base = 11, up.base_hi = 12, up.head_lo = 20, up.head = 21, up.head_hi = 22;
  up.base_runs = up.head_runs = 3;
  up.allowed = 5;
  up.base_outcomes = up.head_outcomes = "pass 3/3";
  up.note = "noted";
  TestChange failed = up;
  failed.name = "other";
  failed.change = Change::failed_in_head;
  failed.base = failed.head = failed.base_lo = failed.base_hi = failed.head_lo = failed.head_hi = 0;  // not measured
  failed.reason = "oom";
  c.tests = {up, failed};
  ReportData shard = parse_report(valid_report().dump(), "r.json");
  shard.info.comparison = c;
  ReportData back = parse_report(report_text(shard), "r.json");
  ASSERT_TRUE(back.info.comparison);
  EXPECT_EQ(comparison_json(*back.info.comparison), comparison_json(c));
  ReportData merged = merge_reports({back}, {"r.json"});
  ASSERT_TRUE(merged.info.comparison) << "merge dropped the comparison";
  EXPECT_EQ(comparison_json(*merged.info.comparison), comparison_json(c));
  EXPECT_EQ(nlohmann::ordered_json::parse(report_text(merged))["comparison"]["tests"].size(), 2u);
  // A comparison that is not one is refused, naming it.
  auto j = nlohmann::ordered_json::parse(report_text(shard));
  j["comparison"]["tests"][0]["change"] = "worse";
  EXPECT_NE(refusal(j).find("r.json: comparison: test 'big' has the change"), std::string::npos) << refusal(j);
}

TEST(ReportReader, EveryNumberIsRangeCheckedNamingTheFieldAndTheTest) {
  // A negative size must not read as 16 EiB, nor 1e300 as 0.
  struct Case {
    const char* field;
    nlohmann::ordered_json value;
  };
  for (const auto& [field, value] : std::vector<Case>{{"peak_bytes", -1},
                                                      {"peak_bytes", 1e300},
                                                      {"peak_bytes", 1.5},
                                                      {"peak_bytes", 18446744073709551615ull},
                                                      {"limit_bytes", -67108864},
                                                      {"duration_s", -1},
                                                      {"duration_s", 1e300},
                                                      {"line", -3},
                                                      {"exit_code", 300},
                                                      {"signal", -9},
                                                      {"samples", 4294967296ll},
                                                      {"headroom_pct", 1e308},
                                                      {"headroom_bytes", 18446744073709551615ull},
                                                      {"oom_kills", -1}}) {
    SCOPED_TRACE(std::string(field) + " = " + value.dump());
    auto j = valid_report();
    j["tests"][0][field] = value;
    std::string why = refusal(j);
    EXPECT_NE(why.find("r.json: tests[0] 'big': field '" + std::string(field) + "'"), std::string::npos) << why;
  }
  auto j = valid_report();
  j["tests"][0]["runs"][0]["peak_bytes"] = -5;
  EXPECT_NE(refusal(j).find("tests[0] 'big'.runs[0]: field 'peak_bytes'"), std::string::npos) << refusal(j);
  j = valid_report();
  j["tests"][0]["timeline"]["t_s"][0] = -1;
  EXPECT_NE(refusal(j).find("field 't_s'"), std::string::npos) << refusal(j);
  j = valid_report();
  j["tests"][0]["memory_stat"]["anon"] = -1;
  EXPECT_NE(refusal(j).find("field 'memory_stat'"), std::string::npos) << refusal(j);
  j = valid_report();
  j["environment"]["cpus"] = -2;
  EXPECT_NE(refusal(j).find("r.json.environment: field 'cpus'"), std::string::npos) << refusal(j);
  j = valid_report();
  j["started"] = "2300-01-01T00:00:00.000Z";  // past what system_clock holds
  EXPECT_NE(refusal(j).find("field 'started'"), std::string::npos) << refusal(j);
}

TEST(ReportReader, RequiredFieldsAreRequired) {
  // Only `schema` and `tests`: not a report of any run, nor a base.
  EXPECT_NE(refusal({{"schema", "memrun-report/1"}, {"tests", nlohmann::ordered_json::array()}})
                .find("field 'memrun_version' is missing"),
            std::string::npos);
  for (const char* field : {"run_id", "started", "host"}) {
    auto j = valid_report();
    j.erase(field);
    EXPECT_NE(refusal(j).find("field '" + std::string(field) + "' is missing"), std::string::npos) << field;
  }
  for (const char* field : {"name", "spec", "outcome", "passed", "peak_bytes", "limit_bytes", "requested_limit_bytes"}) {
    auto j = valid_report();
    j["tests"][0].erase(field);
    EXPECT_NE(refusal(j).find("field '" + std::string(field) + "' is missing"), std::string::npos) << field;
  }
}

TEST(ReportReader, ATestListedTwiceIsRefused) {
  auto j = valid_report();
  j["tests"].push_back(j["tests"][0]);
  EXPECT_NE(refusal(j).find("tests[0] and tests[1] are both test 'big' of s.yaml"), std::string::npos) << refusal(j);
}

TEST(ReportReader, ShardCountsAreBounded) {
  auto j = valid_report();
  j["shard"] = {{"index", 1}, {"count", 100000000}};
  EXPECT_NE(refusal(j).find("field 'count'"), std::string::npos) << refusal(j);
  j["shard"] = {{"index", 2}, {"count", kMaxShards}};
  EXPECT_EQ(refusal(j), "");
  // Merging it alone names what is missing without listing 10000 shards.
  try {
    merge_reports({parse_report(j.dump(), "r.json")}, {"r.json"});
    ADD_FAILURE() << "a lone shard merged";
  } catch (const Error& e) {
    EXPECT_LT(std::string(e.what()).size(), 200u) << e.what();
    EXPECT_NE(std::string(e.what()).find("and 9989 more"), std::string::npos) << e.what();
  }
}

TEST(ReportReader, RaggedTimelinesAreRefused) {
  auto j = valid_report();
  j["tests"][0]["timeline"]["anon"] = nlohmann::ordered_json::array();
  EXPECT_NE(refusal(j).find("t_s, current, anon and file should be as long as each other"), std::string::npos)
      << refusal(j);
}

}  // namespace
}  // namespace memrun

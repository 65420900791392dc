// The scheduler's rules without a kernel: the default budget, admission
// under a budget, the start order, and the live view's text.
#include "runner/plan/budget.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "runner/base/units.h"
#include "runner/report/live_view.h"

namespace memrun {
namespace {


TEST(Budget, DefaultIsWhatMemrunMayUseLessTenPercent) {
  auto host = default_budget(20 * GiB, UINT64_MAX);
  EXPECT_EQ(host.bytes, 18 * GiB);
  EXPECT_NE(host.source.find("MemAvailable 20.0 GiB"), std::string::npos) << host.source;
  // A limited ancestor cgroup with less room wins, and says so.
  auto cgroup = default_budget(20 * GiB, 4 * GiB);
  EXPECT_NEAR(static_cast<double>(cgroup.bytes), 3.6 * GiB, 1.0 * MiB);
  EXPECT_NE(cgroup.source.find("cgroup"), std::string::npos) << cgroup.source;
  // The reserve is at least 64 MiB; nothing left is a zero budget.
  EXPECT_EQ(default_budget(100 * MiB, UINT64_MAX).bytes, 36 * MiB);
  EXPECT_EQ(default_budget(50 * MiB, UINT64_MAX).bytes, 0u);
  // Below a small limited cgroup the reserve is a tenth of its room: a
  // 32 MiB test fits under 48 MiB.
  EXPECT_GE(default_budget(20 * GiB, 47 * MiB).bytes, 42 * MiB);
}

TEST(Budget, AdmissionKeepsTheSumOfLimitsWithinTheBudget) {
  Admission a(8, Budget{400 * MiB, "test"}, false);
  EXPECT_TRUE(a.may_start(200 * MiB));
  a.started(200 * MiB);
  EXPECT_TRUE(a.may_start(200 * MiB));
  a.started(200 * MiB);
  EXPECT_FALSE(a.may_start(200 * MiB));
  EXPECT_FALSE(a.may_start(1));
  EXPECT_EQ(a.in_use(), 400 * MiB);
  a.ended(200 * MiB);
  EXPECT_TRUE(a.may_start(150 * MiB));
  EXPECT_FALSE(a.may_start(250 * MiB));
}

TEST(Budget, JobsBoundTestsWithOrWithoutABudget) {
  Admission a(2, std::nullopt, false);
  a.started(GiB);
  a.started(GiB);
  EXPECT_FALSE(a.may_start(1));
  EXPECT_EQ(a.refusal(100 * GiB), "") << "without a budget nothing is too big";
  a.ended(GiB);
  EXPECT_TRUE(a.may_start(100 * GiB));
}

TEST(Budget, OverBudgetIsRefusedOrRunsAlone) {
  Admission strict(4, Budget{300 * MiB, "--memory-budget"}, false);
  std::string why = strict.refusal(500 * MiB);
  EXPECT_NE(why.find("500.0 MiB exceeds the memory budget 300.0 MiB"), std::string::npos) << why;
  EXPECT_NE(why.find("--allow-oversubscribe"), std::string::npos) << why;
  EXPECT_EQ(strict.refusal(300 * MiB), "");

  Admission loose(4, Budget{300 * MiB, "--memory-budget"}, true);
  EXPECT_EQ(loose.refusal(500 * MiB), "");
  loose.started(100 * MiB);
  EXPECT_FALSE(loose.may_start(500 * MiB)) << "an oversized test waits until nothing runs";
  loose.ended(100 * MiB);
  EXPECT_TRUE(loose.may_start(500 * MiB));
  loose.started(500 * MiB);
  EXPECT_FALSE(loose.may_start(1)) << "and nothing starts beside it";
  loose.ended(500 * MiB);
  EXPECT_TRUE(loose.may_start(1));
}

struct Tests {
  Spec spec;
  std::vector<PlannedTest> planned;
  explicit Tests(const std::string& yaml) {
    spec = parse_spec(yaml, "s.yaml", std::filesystem::temp_directory_path().string());
    for (const auto& t : spec.tests) planned.push_back({&spec, &t, t.name, "/o", "/e"});
  }
};

TEST(Budget, StartOrder) {
  Tests t("tests:\n  - {name: a, run: x, memory: 10MiB}\n  - {name: b, run: x, memory: 30MiB}\n"
          "  - {name: c, run: x, memory: 20MiB}\n  - {name: d, run: x, memory: 30MiB}\n");
  // One job: the spec's order.
  EXPECT_EQ(start_order(t.planned, 1, {}), (std::vector<size_t>{0, 1, 2, 3}));
  // Several: the largest limit first (ties in spec order).
  EXPECT_EQ(start_order(t.planned, 4, {}), (std::vector<size_t>{1, 3, 2, 0}));
  // With timings: the longest first; a test without one counts as the mean.
  EXPECT_EQ(start_order(t.planned, 4, {{"a", 9.0}, {"c", 1.0}}), (std::vector<size_t>{0, 1, 3, 2}));
}

TEST(LiveView, RendersAStatusLineAndABarPerRunningTest) {
  Tests t("tests:\n  - {name: alpha, run: x, memory: 100MiB}\n  - {name: a-rather-long-test-name, run: x, memory: 200MiB}\n"
          "  - {name: gamma, run: x, memory: 100MiB}\n");
  LiveView view(stdout, 4, 2, 400 * MiB, {});
  std::vector<Progress> running = {{&t.planned[0], 1.5, 50 * MiB}, {&t.planned[1], 0.5, 200 * MiB}};
  auto lines = view.render(running, 100);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].rfind("0/4 done  2 running", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find("ETA -"), std::string::npos) << "no estimate before a test finished: " << lines[0];
  EXPECT_NE(lines[0].find("limits 300.0 MiB of 400.0 MiB"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("alpha"), std::string::npos);
  EXPECT_NE(lines[1].find("[##########..........]"), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find("50.0 MiB / 100.0 MiB"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("[####################]"), std::string::npos) << lines[2];
  for (const auto& line : lines) {
    EXPECT_LE(line.size(), 100u);
    for (char c : line) EXPECT_GE(static_cast<unsigned char>(c), 0x20) << line;
  }
  // Narrow terminals shorten names, never wrap.
  for (const auto& line : view.render(running, 60)) EXPECT_LE(line.size(), 60u) << line;

  // With one test finished in 2 s: 0.5 s left of alpha's, 1.5 s of the
  // other's and 2 s of the one queued, over two jobs.
  TestRecord done;
  done.observed.duration_s = 2.0;
  view.finished(done);
  lines = view.render(running, 100);
  EXPECT_NE(lines[0].find("1/4 done"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("ETA 2.00s"), std::string::npos) << lines[0];
}

TEST(LiveView, Bar) {
  EXPECT_EQ(bar(0, 4), "....");
  EXPECT_EQ(bar(0.5, 4), "##..");
  EXPECT_EQ(bar(2.0, 4), "####");  // over the limit (page cache) stays full
}

}  // namespace
}  // namespace memrun

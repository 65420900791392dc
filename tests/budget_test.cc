// The scheduler's rules without a kernel: the default budget, admission
// under a budget, and the start order.
#include "runner/plan/budget.h"

#include <gtest/gtest.h>

#include "runner/base/units.h"
#include "planned_tests.h"

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

TEST(Budget, StartOrder) {
  testing::PlannedTests t("tests:\n  - {name: a, run: x, memory: 10MiB}\n  - {name: b, run: x, memory: 30MiB}\n"
          "  - {name: c, run: x, memory: 20MiB}\n  - {name: d, run: x, memory: 30MiB}\n");
  // One job: the spec's order.
  EXPECT_EQ(start_order(t.planned, 1, {}), (std::vector<size_t>{0, 1, 2, 3}));
  // Several: the largest limit first (ties in spec order).
  EXPECT_EQ(start_order(t.planned, 4, {}), (std::vector<size_t>{1, 3, 2, 0}));
  // With timings: the longest first; a test without one counts as the mean.
  EXPECT_EQ(start_order(t.planned, 4, {{"a", 9.0}, {"c", 1.0}}), (std::vector<size_t>{0, 1, 3, 2}));
}

}  // namespace
}  // namespace memrun

// The live view's text, without a terminal (the host suite's
// Terminal.TheLiveViewShowsRunningTestsWithBarsThenCleansUp draws it in one).
#include "runner/report/live_view.h"

#include <gtest/gtest.h>

#include "runner/base/units.h"
#include "planned_tests.h"

namespace memrun {
namespace {

TEST(LiveView, RendersAStatusLineAndABarPerRunningTest) {
  testing::PlannedTests t("tests:\n  - {name: alpha, run: x, memory: 100MiB}\n  - {name: a-rather-long-test-name, run: x, memory: 200MiB}\n"
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

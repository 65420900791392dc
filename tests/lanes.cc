// The integration binary's main: picks the tests of its lane (MEMRUN_TEST_LANE:
// host, v2 or systemd; host when unset) by narrowing --gtest_filter, so that
// listing (ctest's discovery) and running see the same tests. See lanes.h.
#include "lanes.h"

#include <fnmatch.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace memrun::testing {
namespace {

struct Label {
  std::string suite, test;
  unsigned lanes;
  std::string where;
  int matched = 0;
};

std::vector<Label>& labels() {
  static std::vector<Label> all;
  return all;
}

// A parametrized suite is listed as "Instance/Suite": its label names Suite.
bool suite_is(const std::string& listed, const std::string& suite) {
  return listed == suite || (listed.size() > suite.size() && listed.compare(listed.size() - suite.size(), std::string::npos, suite) == 0 &&
                             listed[listed.size() - suite.size() - 1] == '/');
}

unsigned lanes_of(const ::testing::TestInfo& info) {
  unsigned lanes = kHostLane | kV2Lane;
  bool own = false;
  for (auto& label : labels()) {
    if (!suite_is(info.test_suite_name(), label.suite)) continue;
    bool whole = label.test == "*";
    if (::fnmatch(label.test.c_str(), info.name(), 0) != 0) continue;
    ++label.matched;
    if (whole && own) continue;
    lanes = label.lanes, own = own || !whole;
  }
  return lanes;
}

unsigned lane_from_env() {
  const char* name = std::getenv("MEMRUN_TEST_LANE");
  std::string lane = name ? name : "host";
  if (lane == "host") return kHostLane;
  if (lane == "v2") return kV2Lane;
  if (lane == "systemd") return kSystemdLane;
  std::fprintf(stderr, "MEMRUN_TEST_LANE=%s: no such lane (host, v2 or systemd)\n", lane.c_str());
  std::exit(2);
}

// --gtest_filter is POSITIVE[-NEGATIVE]: the tests outside the lane join
// the negative patterns.
std::string narrowed(const std::string& filter, const std::vector<std::string>& outside) {
  if (outside.empty()) return filter;
  auto dash = filter.find('-');
  std::string positive = dash == std::string::npos ? filter : filter.substr(0, dash);
  std::string negative = dash == std::string::npos ? "" : filter.substr(dash + 1);
  if (positive.empty()) positive = "*";
  for (const auto& name : outside) negative += (negative.empty() ? "" : ":") + name;
  return positive + "-" + negative;
}

}  // namespace

LaneLabel::LaneLabel(const char* suite, const char* test, unsigned lanes, const char* file, int line) {
  labels().push_back({suite, test, lanes, std::string(file) + ":" + std::to_string(line)});
}

}  // namespace memrun::testing

int main(int argc, char** argv) {
  using namespace memrun::testing;
  ::testing::InitGoogleTest(&argc, argv);
  unsigned lane = lane_from_env();
  // The check's own test (shape.lanes.stale-label) plants a label as SUITE.GLOB.
  if (const char* planted = std::getenv("MEMRUN_TEST_PLANTED_LABEL")) {
    std::string label = planted;
    auto dot = label.find('.');
    if (dot != std::string::npos)
      LaneLabel(label.substr(0, dot).c_str(), label.substr(dot + 1).c_str(), kHostLane, "(MEMRUN_TEST_PLANTED_LABEL)", 0);
  }
  std::vector<std::string> outside;
  auto* unit = ::testing::UnitTest::GetInstance();
  for (int i = 0; i < unit->total_test_suite_count(); ++i) {
    const auto* suite = unit->GetTestSuite(i);
    for (int j = 0; j < suite->total_test_count(); ++j) {
      const auto* info = suite->GetTestInfo(j);
      if (!(lanes_of(*info) & lane)) outside.push_back(std::string(info->test_suite_name()) + "." + info->name());
    }
  }
  bool stale = false;
  for (const auto& label : labels())
    if (label.matched == 0) {
      std::fprintf(stderr, "%s: MEMRUN_LANES(%s, \"%s\") names no test: was it renamed? Rename its label with it.\n",
                   label.where.c_str(), label.suite.c_str(), label.test.c_str());
      stale = true;
    }
  if (stale) return 2;
  GTEST_FLAG_SET(filter, narrowed(GTEST_FLAG_GET(filter), outside));
  return RUN_ALL_TESTS();
}

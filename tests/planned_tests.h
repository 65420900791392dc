// A spec's tests, planned as the run plans them, for the unit tests of what
// reads a plan (admission and start order, the live view).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "runner/plan/plan.h"

namespace memrun::testing {

struct PlannedTests {
  Spec spec;
  std::vector<PlannedTest> planned;
  explicit PlannedTests(const std::string& yaml) {
    spec = parse_spec(yaml, "s.yaml", std::filesystem::temp_directory_path().string());
    for (const auto& t : spec.tests) {
      planned.push_back({&spec, &t});
      planned.back().named(t.name, "/o", "/e");
    }
  }
};

}  // namespace memrun::testing

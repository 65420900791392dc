#include "runner/plan.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <regex>

#include "cgroup/error.h"

namespace memrun {

Plan make_plan(const std::vector<Spec>& specs, const Selection& selection,
               const std::string& run_id, const std::string& run_dir) {
  std::regex filter;
  try {
    filter = std::regex(selection.filter.empty() ? "" : selection.filter, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw Error(kExitUsage, "--filter '" + selection.filter + "' is not a valid regular expression: " + e.what());
  }
  Plan plan{run_id, run_dir, {}};
  for (const auto& spec : specs) {
    size_t before = plan.tests.size();
    for (const auto& test : spec.tests) {
      if (!selection.filter.empty() && !std::regex_search(test.name, filter)) continue;
      if (!selection.tags.empty() &&
          std::none_of(selection.tags.begin(), selection.tags.end(), [&](const std::string& t) {
            return std::find(test.tags.begin(), test.tags.end(), t) != test.tags.end();
          }))
        continue;
      // The sequence number keeps names unique across specs and keeps a
      // test named like a control file ("memory.max") from colliding.
      std::string group = fmt::format("{:03}-{}", plan.tests.size() + 1, test.name);
      std::string base = run_dir + "/" + group;
      plan.tests.push_back({&spec, &test, group, base + ".stdout", base + ".stderr"});
    }
    if (spec.setup && plan.tests.size() > before) {
      std::string group = fmt::format("setup-{}", plan.setups.size() + 1);
      std::string base = run_dir + "/" + group;
      plan.setups.push_back({&spec, &spec.setup->command, group, base + ".stdout", base + ".stderr"});
    }
  }
  return plan;
}

std::string new_run_id() {
  std::time_t now = std::time(nullptr);
  return fmt::format("{:%Y%m%d-%H%M%S}-{}", fmt::localtime(now), ::getpid());
}

}  // namespace memrun

// memrun gc: removes the cgroups (and kills the processes) that runs
// killed with SIGKILL left; every run does the same as it starts.
#include <fmt/format.h>

#include "runner/app/commands.h"

namespace memrun {

Result gc_command(const Options& o) {
  auto garbage = cgroup::collect_garbage(open_options(o, ""));
  for (const auto& dir : garbage.removed) fmt::print("removed {}\n", dir);
  for (const auto& problem : garbage.problems) fmt::print("could not remove: {}\n", problem);
  size_t runs = garbage.runs.size();
  fmt::print("{} dead run{} cleaned up\n", runs, runs == 1 ? "" : "s");
  return Result::passed();
}

}  // namespace memrun

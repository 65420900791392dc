// memrun gc: removes the cgroups (and kills the processes) that runs
// killed with SIGKILL left; every run does the same as it starts.
#include <fmt/format.h>

#include "runner/app/commands.h"
#include "runner/run/escape_watch.h"

namespace memrun {

Result gc_command(const Options& o) {
  auto garbage = cgroup::collect_garbage(open_options(o, ""));
  for (const auto& dir : garbage.removed) fmt::print("removed {}\n", dir);
  for (const auto& problem : garbage.problems) fmt::print("could not remove: {}\n", problem);
  // The tracefs instances of runs that watched their tests' moves.
  for (const auto& dir : EscapeWatch::remove_stale()) fmt::print("removed {}\n", dir);
  size_t runs = garbage.runs.size();
  fmt::print("{} dead run{} cleaned up\n", runs, runs == 1 ? "" : "s");
  return Result::passed();
}

}  // namespace memrun

// memrun gc: removes the cgroups (and kills the processes) that runs
// killed with SIGKILL left; every run does the same as it starts.
#include <fmt/format.h>

#include <set>

#include "runner/command.h"

namespace memrun {

Result gc_command(const Options& o) {
  auto garbage = cgroup::collect_garbage(open_options(o, ""));
  // On v1 a run has a directory per hierarchy, under systemd several in
  // its scope: a run is the last memrun-<id> of the path.
  std::set<std::string> runs;
  for (const auto& dir : garbage.removed) {
    fmt::print("removed {}\n", dir);
    auto at = dir.rfind("/memrun-");
    std::string run = dir.substr(at + 1, dir.find('/', at + 1) - at - 1);
    if (run.size() > 6 && run.compare(run.size() - 6, 6, ".scope") == 0) run.resize(run.size() - 6);
    runs.insert(run);
  }
  for (const auto& problem : garbage.problems) fmt::print("could not remove: {}\n", problem);
  fmt::print("{} dead run{} cleaned up\n", runs.size(), runs.size() == 1 ? "" : "s");
  return Result::passed();
}

}  // namespace memrun

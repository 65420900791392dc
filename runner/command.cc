// What several commands share: the backend flag, loading specs, sharding.
#include "runner/command.h"

#include "runner/merge.h"

namespace memrun {

cgroup::Kind kind_of(const std::string& name) {
  if (name == "v2") return cgroup::Kind::v2;
  if (name == "v1") return cgroup::Kind::v1;
  if (name == "systemd") return cgroup::Kind::systemd;
  return cgroup::Kind::automatic;
}

cgroup::OpenOptions open_options(const Options& o, const std::string& run_name) {
  return {kind_of(o.backend), o.cgroup_parent, run_name, !o.host_cgroups};
}

std::vector<Spec> load_all(const std::vector<std::string>& paths, const Options& o) {
  SuiteLister lister(open_options(o, ""));
  std::vector<Spec> specs;
  for (const auto& p : paths) specs.push_back(load_spec(p, [&](const SuiteSource& s) { return lister(s); }));
  return specs;
}

void shard_selection(const Options& o, Selection* selection) {
  if (!o.timings.empty()) selection->timings = timings_from(read_report(o.timings));
  if (!o.shard.empty()) parse_shard(o.shard, selection);
}

std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace memrun

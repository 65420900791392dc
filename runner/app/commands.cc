// What several commands share: the backend flag, loading specs, sharding.
#include "runner/app/commands.h"

#include <re2/re2.h>

#include <filesystem>

#include "runner/report/merge.h"
#include "runner/suites/discover.h"

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

std::vector<Spec> load_all(const std::vector<std::string>& paths, const Options& o, const SpecSink& sink,
                           bool compact) {
  SuiteLister lister(open_options(o, ""));
  // --filter applies as a suite's cases are read: those it does not select
  // are never made into tests (a listing of a million cases, one of them
  // selected, costs one). An invalid one is make_plan's to refuse.
  RE2::Options options;
  options.set_log_errors(false);
  RE2 filter(o.selection.filter, options);
  bool filtered = !o.selection.filter.empty() && filter.ok();
  std::vector<Spec> specs;
  for (const auto& p : paths) {
    TestSink tests;
    if (sink) tests = [&](std::vector<TestSpec>&& made) { sink(p, std::move(made)); };
    specs.push_back(load_spec(
        p,
        [&](const SuiteSource& s) {
          if (!filtered) return lister(s);
          SuiteSource selected = s;
          selected.keep = [&](const std::string& name) { return RE2::PartialMatch(name, filter); };
          return lister(selected);
        },
        tests, compact));
  }
  return specs;
}

// It may hold '/' (a GoogleTest case's "Inst/Suite.Case/3", from
// memrun_discover_tests): the plan derives its cgroup's and logs' file
// names safely, and every output keeps it as given. Control characters
// never reach a console.
std::string program_test_name(const std::string& given, const std::vector<std::string>& argv) {
  std::string name = !given.empty() ? given : argv.empty() ? "" : std::filesystem::path(argv[0]).filename().string();
  if (name.empty() || name == "." || name == "..") name = "program";
  for (char& c : name)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '_';
  return name.substr(0, 1024);
}

void shard_selection(const Options& o, Selection* selection) {
  if (!o.timings.empty()) selection->timings = timings_from(read_report(o.timings));
  if (!o.shard.empty()) parse_shard(o.shard, selection);
}

}  // namespace memrun

// memrun bisect: the smallest memory limit at which a test still passes.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>

#include "runner/error.h"
#include "runner/bisect.h"
#include "runner/command.h"
#include "runner/units.h"

namespace memrun {

int bisect_command(const std::vector<std::string>& words, const std::string& test_name, const std::string& range,
                   const std::string& tolerance, int trials, const Options& o) {
  BisectOptions bo;
  if (!range.empty()) parse_memory_range(range, &bo);
  if (!tolerance.empty()) parse_tolerance(tolerance, &bo);
  if (trials < 1) throw Error(kExitUsage, "--trials must be at least 1");
  bo.trials = trials;
  std::vector<Spec> specs;
  const TestSpec* test = nullptr;
  if (!test_name.empty()) {
    if (words.size() != 1) throw Error(kExitUsage, "memrun bisect SPEC --test NAME: give one spec");
    specs = load_all(words, o);
    for (const auto& t : specs[0].tests)
      if (t.name == test_name) test = &t;
    if (!test) throw Error(kExitUsage, words[0] + " has no test named '" + test_name + "' (memrun list shows them)");
  } else {
    // memrun bisect --memory-range LO:HI -- COMMAND...
    if (words.empty() || range.empty())
      throw Error(kExitUsage, "give a spec and --test NAME, or --memory-range LO:HI -- COMMAND...");
    TestSpec t;
    t.name = "command";
    t.argv = words;
    t.command = fmt::format("{}", fmt::join(words, " "));
    t.memory = bo.high;
    t.timeout = kDefaultTimeout;
    t.cwd = std::filesystem::current_path().string();
    t.pids = kDefaultPids;
    specs.push_back({"(command line)", std::nullopt, {t}});
    test = &specs[0].tests[0];
  }
  std::string run_id = new_run_id();
  bo.run_dir = o.run_dir + "/" + run_id;
  std::filesystem::create_directories(bo.run_dir);
  auto backend = cgroup::open(open_options(o, "memrun-" + run_id));
  fmt::print("bisecting the memory limit of '{}' on the {} backend; logs in {}\n", test->name, backend->name(),
             bo.run_dir);
  auto r = bisect(*test, specs[0], *backend, bo, stdout);
  backend->close();
  fmt::print("\nsmallest passing limit: {} ({} bytes){}; kernel peak without pressure {}; {} runs\n",
             format_size(r.minimum), r.minimum,
             r.failing ? ", fails at " + format_size(r.failing) : "", format_size(r.first_peak), r.runs);
  uint64_t mib = (r.minimum + MiB - 1) / MiB;
  fmt::print("for the spec (the minimum, rounded up; add the headroom you want on top):\n    memory: {}MiB\n", mib);
  return kExitOk;
}

}  // namespace memrun

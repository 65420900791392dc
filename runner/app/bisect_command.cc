// memrun bisect: the smallest memory limit at which a test still passes.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>

#include "runner/app/commands.h"
#include "runner/base/error.h"
#include "runner/base/units.h"
#include "runner/bisect/bisect.h"
#include "runner/spec/keys.h"

namespace memrun {

namespace {

// `bisect -- COMMAND...`: a test of the program, named as exec names it,
// read and checked as a spec's, with --memory-range HI as its `memory`.
TestSpec command_test(const std::vector<std::string>& words, const BisectOptions& bo) {
  spec::Source src;
  src.form = spec::Source::bisect;
  spec::Fields f;
  f.name = program_test_name("", words);
  f.argv = words;
  f.command = fmt::format("{}", fmt::join(words, " "));
  // Without a range, the first run's limit is bisect()'s default top
  // (1 GiB for a limit of 256 MiB or less).
  f.memory = bo.high ? bo.high : 256 * MiB;
  TestSpec t = spec::test_of(f, std::filesystem::current_path().string());
  if (auto problem = spec::check_test(src, t)) src.fail(YAML::Mark::null_mark(), problem.what);
  return t;
}

}  // namespace

// Long: the command top-down: its flags, the test (a spec's or a
// command's), the bisection, the limit to write (with the test's headroom).
Result bisect_command(const std::vector<std::string>& words, const std::string& test_name, const std::string& range,
                   const std::string& tolerance, int trials, const Options& o) {
  BisectOptions bo;
  if (!range.empty()) parse_memory_range(range, &bo);
  if (!tolerance.empty()) parse_tolerance(tolerance, &bo);
  if (trials < 1) throw Error(Category::usage, "--trials must be at least 1");
  bo.trials = trials;
  std::vector<Spec> specs;
  const TestSpec* test = nullptr;
  if (!test_name.empty()) {
    if (words.size() != 1) throw Error(Category::usage, "memrun bisect SPEC --test NAME: give one spec");
    specs = load_all(words, o);
    for (const auto& t : specs[0].tests)
      if (t.name == test_name) test = &t;
    if (!test)
      throw Error(Category::usage, words[0] + " has no test named '" + test_name + "' (memrun list shows them)");
  } else {
    // memrun bisect [--memory-range LO:HI] -- COMMAND...
    if (words.empty())
      throw Error(Category::usage, "give a spec and --test NAME, or a program to run: memrun bisect [--memory-range "
                                   "LO:HI] -- COMMAND [ARGS...]");
    specs.push_back({"memrun bisect", std::nullopt, {command_test(words, bo)}});
    test = &specs[0].tests[0];
  }
  std::string run_id = new_run_id();
  bo.run_dir = o.run_dir + "/" + run_id;
  std::filesystem::create_directories(bo.run_dir);
  auto backend = cgroup::open(open_options(o, cgroup::run_name(run_id)));
  fmt::print("bisecting the memory limit of '{}' on the {} backend; logs in {}\n", test->name, backend->name(),
             bo.run_dir);
  auto r = bisect(*test, specs[0], *backend, bo, stdout);
  backend->close();
  if (r.interrupted_by) {
    fmt::print(stderr, "memrun: bisect interrupted\n");
    return Result::interrupted(r.interrupted_by);
  }
  if (!r.no_limit.empty()) {
    fmt::print(stderr, "memrun: {}\n", r.no_limit);
    return Result::failed();
  }
  fmt::print("\nsmallest passing limit: {} ({} bytes){}; kernel peak without pressure {}; {} runs\n",
             format_size(r.minimum), r.minimum,
             r.failing ? ", fails at " + format_size(r.failing) : "", format_size(r.first_peak), r.runs);
  uint64_t mib = (r.minimum + MiB - 1) / MiB;
  if (!test->min_headroom) {
    fmt::print("for the spec (the minimum, rounded up; add the headroom you want on top):\n    memory: {}MiB\n", mib);
    return Result::passed();
  }
  // The test asks for headroom: the limit must leave it free above the
  // peak it reached with room to spare (the first run's, the highest any
  // run reaches), as the verdict measures it, and above the next run's
  // peak, which the kernel's own memory moves by a fraction of a percent
  // (60.5 MiB, then 60.8 MiB): 2% more.
  const MinHeadroom& h = *test->min_headroom;
  double peak = static_cast<double>(r.first_peak) * 1.02;
  uint64_t need = h.is_percent ? static_cast<uint64_t>(peak / (1 - h.percent / 100)) + 1
                               : static_cast<uint64_t>(peak) + h.bytes + 1;
  uint64_t with_headroom = std::max(mib, (need + MiB - 1) / MiB);
  fmt::print("for the spec (rounded up, keeping its min_headroom {} above the peak of {}, and 2% for the next "
             "run's):\n    memory: {}MiB\n",
             h.is_percent ? fmt::format("{:g}%", h.percent) : format_size(h.bytes), format_size(r.first_peak),
             with_headroom);
  return Result::passed();
}

}  // namespace memrun

// memrun list: the tests a selection picks, without running them.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "runner/app/commands.h"
#include "runner/base/units.h"
#include "runner/base/utf8.h"

namespace memrun {

namespace {

// One test's line.
void print(const std::string& spec_path, const TestSpec& t) {
  // A suite's case says where its limit came from (suite, rules, marker).
  fmt::print("{}:{}  {}  memory {}  expect {}{}{}\n", spec_path, t.line, escape_controls(t.name), format_size(t.memory),
             t.expect.describe(), t.tags.empty() ? "" : "  tags " + fmt::format("{}", fmt::join(t.tags, ",")),
             t.origin.empty() ? "" : "  from " + t.origin);
}

}  // namespace

Result list_command(const std::vector<std::string>& paths, const Options& o) {
  Selection selection = o.selection;
  shard_selection(o, &selection);
  if (selection.shard_count == 0) {
    // Each test printed as it is made, and dropped: memrun's memory stays
    // flat however many cases a suite lists (the plan's selection, batch
    // by batch: a test brings only tests of its own batch).
    Selector selector(selection);
    load_all(paths, o, [&](const std::string& path, std::vector<TestSpec>&& tests) {
      auto picked = selector.pick(tests);
      for (size_t i = 0; i < tests.size(); ++i)
        if (picked[i])
          for (int run = 1; run <= std::max(1, selection.repeat); ++run) print(path, tests[i]);  // as the plan's runs
    });
    return Result::passed();
  }
  // A shard is cut from every selected test's name (assign_shards).
  auto specs = load_all(paths, o);
  Plan plan = make_plan(specs, selection, "");
  for (const auto& p : plan.tests) print(p.spec->path, *p.test);
  return Result::passed();
}

}  // namespace memrun

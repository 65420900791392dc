// memrun list: the tests a selection picks, without running them.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runner/app/commands.h"
#include "runner/base/units.h"
#include "runner/base/utf8.h"

namespace memrun {

Result list_command(const std::vector<std::string>& paths, const Options& o) {
  auto specs = load_all(paths, o);
  Selection selection = o.selection;
  shard_selection(o, &selection);
  Plan plan = make_plan(specs, selection, "");
  for (const auto& p : plan.tests) {
    const TestSpec& t = *p.test;
    // A suite's case says where its limit came from (suite, rules, marker).
    fmt::print("{}:{}  {}  memory {}  expect {}{}{}\n", p.spec->path, t.line, escape_controls(t.name), format_size(t.memory),
               t.expect.describe(), t.tags.empty() ? "" : "  tags " + fmt::format("{}", fmt::join(t.tags, ",")),
               t.origin.empty() ? "" : "  from " + t.origin);
  }
  return Result::passed();
}

}  // namespace memrun

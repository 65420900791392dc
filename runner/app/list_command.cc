// memrun list: the tests a selection picks, without running them.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runner/app/commands.h"
#include "runner/base/units.h"
#include "runner/base/utf8.h"

namespace memrun {
namespace {

// How wide `text` shows: a character a column (memrun's names are
// escaped of controls first; wide scripts are rare in test names).
size_t columns(const std::string& text) {
  size_t n = 0;
  for (size_t i = 0; i < text.size(); ++n) {
    size_t len = utf8_length(text, i);
    i += len ? len : 1;
  }
  return n;
}

}  // namespace

std::string list_table(const Plan& plan) {
  std::vector<std::vector<std::string>> rows = {{"SPEC:LINE", "TEST", "MEMORY", "EXPECT", "TAGS", "LIMIT FROM"}};
  bool tags = false, origin = false;
  for (const auto& p : plan.tests) {
    const TestSpec& t = *p.test;
    // A suite's case says where its limit came from (suite, rules, marker).
    rows.push_back({escape_controls(p.spec->path) + ":" + std::to_string(t.line), escape_controls(t.name),
                    format_limit(t.memory), t.expect.describe(), escape_controls(fmt::format("{}", fmt::join(t.tags, ","))),
                    escape_controls(t.origin)});
    tags |= !t.tags.empty();
    origin |= !t.origin.empty();
  }
  // Columns no test fills are left out.
  for (auto& row : rows) {
    if (!origin) row.pop_back();
    if (!tags) row.erase(row.begin() + 4);
  }
  std::vector<size_t> width(rows[0].size());
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], columns(row[c]));
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c)
      line += row[c] + (c + 1 < row.size() ? std::string(width[c] - columns(row[c]) + 2, ' ') : "");
    out += line.substr(0, line.find_last_not_of(' ') + 1) + "\n";
  }
  return out;
}

Result list_command(const std::vector<std::string>& paths, const Options& o) {
  auto specs = load_all(paths, o);
  Selection selection = o.selection;
  shard_selection(o, &selection);
  fmt::print("{}", list_table(make_plan(specs, selection, "")));
  return Result::passed();
}

}  // namespace memrun

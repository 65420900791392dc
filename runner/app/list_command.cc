// memrun list: the tests a selection picks, without running them.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>

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

// The table's rows, aligned: the first kRowsHeld are held to measure the
// columns (and to leave out those no test fills); past them, each row is
// written as it comes, in the columns measured so far, so that memrun's
// memory stays flat however many cases a suite lists.
class ListTable {
 public:
  static constexpr size_t kRowsHeld = 10000;
  explicit ListTable(std::function<void(const std::string&)> write) : write_(std::move(write)) {
    rows_.push_back({"SPEC:LINE", "TEST", "MEMORY", "EXPECT", "TAGS", "LIMIT FROM"});
  }

  void add(const std::string& spec_path, const TestSpec& t) {
    // A suite's case says where its limit came from (suite, rules, marker).
    std::vector<std::string> row = {escape_controls(spec_path) + ":" + std::to_string(t.line), escape_controls(t.name),
                                    format_limit(t.memory), t.expect.describe(),
                                    escape_controls(fmt::format("{}", fmt::join(t.tags, ","))), escape_controls(t.origin)};
    tags_ |= !t.tags.empty();
    origin_ |= !t.origin.empty();
    if (streaming_) return write_row(row);
    rows_.push_back(std::move(row));
    if (rows_.size() > kRowsHeld) flush(/*all_columns=*/true);
  }

  void finish() {
    if (!streaming_) flush(/*all_columns=*/false);
  }

 private:
  // Columns no test fills are left out, where every row was seen.
  void flush(bool all_columns) {
    keep_ = {true, true, true, true, all_columns || tags_, all_columns || origin_};
    width_.assign(keep_.size(), 0);
    for (const auto& row : rows_)
      for (size_t c = 0; c < row.size(); ++c) width_[c] = std::max(width_[c], columns(row[c]));
    for (const auto& row : rows_) write_row(row);
    rows_.clear();
    streaming_ = true;
  }

  void write_row(const std::vector<std::string>& row) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      if (!keep_[c]) continue;
      size_t pad = width_[c] > columns(row[c]) ? width_[c] - columns(row[c]) : 0;
      line += row[c] + std::string(pad + 2, ' ');
    }
    write_(line.substr(0, line.find_last_not_of(' ') + 1) + "\n");
  }

  std::function<void(const std::string&)> write_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<bool> keep_;
  std::vector<size_t> width_;
  bool tags_ = false, origin_ = false, streaming_ = false;
};

}  // namespace

std::string list_table(const Plan& plan) {
  std::string out;
  ListTable table([&](const std::string& line) { out += line; });
  for (const auto& p : plan.tests) table.add(p.spec->path, *p.test);
  table.finish();
  return out;
}

Result list_command(const std::vector<std::string>& paths, const Options& o) {
  Selection selection = o.selection;
  shard_selection(o, &selection);
  ListTable table([](const std::string& line) { fmt::print("{}", line); });
  if (selection.shard_count == 0) {
    // Each test is put in the table as it is made, and dropped: memrun's
    // memory stays flat however many cases a suite lists (the plan's
    // selection, batch by batch: a test brings only tests of its own batch).
    Selector selector(selection);
    load_all(paths, o, [&](const std::string& path, std::vector<TestSpec>&& tests) {
      auto picked = selector.pick(tests);
      for (size_t i = 0; i < tests.size(); ++i)
        if (picked[i])
          for (int run = 1; run <= std::max(1, selection.repeat); ++run) table.add(path, tests[i]);  // as the plan's runs
    });
  } else {
    // A shard is cut from every selected test's name (assign_shards).
    auto specs = load_all(paths, o);
    Plan plan = make_plan(specs, selection, "");
    for (const auto& p : plan.tests) table.add(p.spec->path, *p.test);
  }
  table.finish();
  return Result::passed();
}

}  // namespace memrun

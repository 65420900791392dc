#include "runner/plan/plan.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <re2/re2.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <type_traits>

#include "cgroup/cgroup.h"
#include "runner/base/error.h"
#include "runner/base/utf8.h"

namespace memrun {
namespace {

// A test's name as part of a cgroup's and its logs' file names: a suite's
// case may hold '/' ("Inst/Suite.Case/3", "tests/test_io.py::test[a/b]")
// and be long; a directory name may not hold '/' and has at most 255
// bytes (NAME_MAX). Outputs keep the real name.
std::string file_name_part(const std::string& name) {
  std::string out;
  // Shown in log paths (the console, reports): a character that shows as
  // another is written as the names' one rule writes it.
  for (char c : escape_controls(name)) out += c == '/' ? '_' : c;
  if (out.size() > 160) {
    out.resize(160);
    while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();  // no half a UTF-8 character
    if (!out.empty() && (static_cast<unsigned char>(out.back()) & 0x80)) out.pop_back();
  }
  return out;
}

// A test the selection picked: its spec's test, or the template of one
// its spec holds as its name (PlannedTest::plain).
struct Picked {
  const Spec* spec;
  const TestSpec* test;
  uint32_t plain;
  /// A view of the spec's own name (its test's, or its cases'): a shard of a
  /// million cases holds no copy of one.
  std::string_view name() const {
    return plain == PlannedTest::kWhole ? std::string_view(test->name) : spec->cases.name(plain);
  }
};

// The tests of shard K of N. A fixture's setup and cleanup tests and
// those that require it are one unit, never split (its setup and cleanup
// also when no user of it is selected): each shard runs on a
// machine of its own, where a fixture set up in another shard does not
// exist.
std::vector<Picked> shard_of(const std::vector<Picked>& selected, const Selection& selection) {
  std::vector<size_t> unit(selected.size());
  for (size_t i = 0; i < selected.size(); ++i) unit[i] = i;
  std::function<size_t(size_t)> root = [&](size_t i) { return unit[i] == i ? i : unit[i] = root(unit[i]); };
  // The selected by spec and name, to find what a test brings: the first
  // of equal ones first (stable), as a map's emplace kept it.
  std::vector<size_t> by_name(selected.size());
  for (size_t i = 0; i < by_name.size(); ++i) by_name[i] = i;
  auto key = [&](size_t i) { return std::pair{selected[i].spec, selected[i].name()}; };
  std::stable_sort(by_name.begin(), by_name.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
  auto find = [&](const Spec* spec, std::string_view name) -> std::optional<size_t> {
    auto it = std::lower_bound(by_name.begin(), by_name.end(), std::pair{spec, name},
                               [&](size_t i, const auto& k) { return key(i) < k; });
    if (it == by_name.end() || key(*it) != std::pair{spec, name}) return std::nullopt;
    return *it;
  };
  for (size_t i = 0; i < selected.size(); ++i)
    for (const auto* names : {&selected[i].test->order.brings, &selected[i].test->order.fixture})
      for (const auto& name : *names)
        if (auto j = find(selected[i].spec, name))
          unit[std::max(root(i), root(*j))] = std::min(root(i), root(*j));
  // A unit is named by its first test and costs what its tests cost.
  constexpr size_t kNone = SIZE_MAX;
  std::vector<std::string_view> names;
  std::vector<size_t> unit_number(selected.size(), kNone);
  std::map<std::string, double> timings;
  for (size_t i = 0; i < selected.size(); ++i) {
    size_t r = root(i);
    if (unit_number[r] == kNone) unit_number[r] = names.size(), names.push_back(selected[r].name());
    if (selection.timings.empty()) continue;
    if (auto t = selection.timings.find(std::string(selected[i].name())); t != selection.timings.end())
      timings[std::string(names[unit_number[r]])] += t->second;
  }
  auto shard = assign_shards(names, selection.shard_count, timings.empty() ? selection.timings : timings);
  std::vector<Picked> mine;
  for (size_t i = 0; i < selected.size(); ++i)
    if (shard[unit_number[root(i)]] == selection.shard_index - 1) mine.push_back(selected[i]);
  return mine;
}

// The plan indices each test of one spec (plan.tests from `first` on)
// waits for and needs, from its order's names; a name not in the plan
// (not selected, another shard's) is no wait, as in ctest.
void link_order(std::vector<PlannedTest>& tests, size_t first) {
  // (Most specs have none: their names are not gathered.)
  if (std::all_of(tests.begin() + static_cast<std::ptrdiff_t>(first), tests.end(), [](const PlannedTest& p) {
        return p.test->order.after.empty() && p.test->order.needs.empty();
      }))
    return;
  std::map<std::string, std::vector<size_t>> runs;  // a name's runs (--repeat)
  for (size_t i = first; i < tests.size(); ++i) runs[std::string(tests[i].name())].push_back(i);
  auto indices = [&](const std::vector<std::string>& names) {
    std::vector<size_t> out;
    for (const auto& n : names)
      if (auto it = runs.find(n); it != runs.end()) out.insert(out.end(), it->second.begin(), it->second.end());
    return out;
  };
  for (size_t i = first; i < tests.size(); ++i) {
    PlannedTest::Waits w{indices(tests[i].test->order.after), indices(tests[i].test->order.needs)};
    if (!w.after.empty() || !w.needs.empty()) tests[i].waits = std::make_shared<const PlannedTest::Waits>(std::move(w));
  }
}

}  // namespace

Selector::Selector(const Selection& selection) : selection_(selection) {
  // RE2 matches in time linear in the name (no backtracking): a filter
  // such as (a*)*b cannot stall a run, as std::regex's did (11 s on a
  // 30-character name).
  RE2::Options options;
  options.set_log_errors(false);
  filter_ = std::make_unique<RE2>(selection.filter, options);
  if (!filter_->ok())
    throw Error(Category::usage, "--filter '" + selection.filter + "' is not a valid regular expression: " +
                                     filter_->error() + " (RE2 syntax: https://github.com/google/re2/wiki/Syntax)");
}

Selector::~Selector() = default;

// `tests` are a vector of TestSpec or CompactTests: their names and, for
// the tags and what a test brings, each test or its template.
template <typename Tests>
std::vector<bool> Selector::pick_of(const Tests& tests) const {
  auto name = [&](size_t i) -> std::string_view {
    if constexpr (std::is_same_v<Tests, CompactTests>) return tests.name(i);
    else return tests[i].name;
  };
  auto test = [&](size_t i) -> const TestSpec& {
    if constexpr (std::is_same_v<Tests, CompactTests>) return tests.shared(i);
    else return tests[i];
  };
  std::vector<bool> picked(tests.size());
  std::set<std::string, std::less<>> brought;
  for (size_t i = 0; i < tests.size(); ++i) {
    const std::vector<std::string>& tags = test(i).tags;
    if (!selection_.filter.empty() && !RE2::PartialMatch(name(i), *filter_)) continue;
    if (!selection_.tags.empty() && std::none_of(selection_.tags.begin(), selection_.tags.end(), [&](const std::string& t) {
          return std::find(tags.begin(), tags.end(), t) != tags.end();
        }))
      continue;
    picked[i] = true;
    brought.insert(test(i).order.brings.begin(), test(i).order.brings.end());  // as ctest -R adds fixtures
  }
  if (!brought.empty())
    for (size_t i = 0; i < tests.size(); ++i)
      if (brought.count(name(i))) picked[i] = true;
  return picked;
}

std::vector<bool> Selector::pick(const std::vector<TestSpec>& tests) const { return pick_of(tests); }
std::vector<bool> Selector::pick(const CompactTests& tests) const { return pick_of(tests); }

void PlannedTest::named(std::string group, std::string stdout_path, std::string stderr_path) {
  std::optional<TestSpec> whole;
  if (plain != kWhole) whole = spec->cases.made(plain);
  made = std::make_shared<const Made>(Made{std::move(whole), std::move(group), std::move(stdout_path), std::move(stderr_path)});
  if (made->test) test = &*made->test, plain = kWhole;
}

PlannedTest made_test(const PlannedTest& p, size_t index, const std::string& run_dir) {
  if (p.made) return p;
  PlannedTest::Made m;
  if (p.plain != PlannedTest::kWhole) m.test = p.spec->cases.made(p.plain);
  // The sequence number keeps names unique across specs and runs, and
  // keeps a test named like a control file ("memory.max") from colliding.
  m.group = fmt::format("{:03}-{}", index + 1, file_name_part(std::string(p.name())));
  m.stdout_path = run_dir + "/" + m.group + ".stdout";
  m.stderr_path = run_dir + "/" + m.group + ".stderr";
  PlannedTest out = p;
  out.made = std::make_shared<const PlannedTest::Made>(std::move(m));
  if (out.made->test) out.test = &*out.made->test, out.plain = PlannedTest::kWhole;
  return out;
}

namespace {

// Every test `selected` of `specs`, in spec order, as planned tests: each
// run of it (--repeat), then the spec's setup when it has a test.
void plan_tests(const std::vector<Spec>& specs, const std::vector<Picked>& selected, const Selection& selection,
                Plan& plan) {
  int runs = std::max(1, selection.repeat);
  plan.tests.reserve(selected.size() * static_cast<size_t>(runs));  // no room to spare: a million tests
  for (const auto& spec : specs) {
    size_t before = plan.tests.size();
    for (const auto& picked : selected) {
      if (picked.spec != &spec) continue;
      size_t first = plan.tests.size();
      for (int run = 1; run <= runs; ++run) plan.tests.push_back({&spec, picked.test, picked.plain, run, runs, first});
    }
    link_order(plan.tests, before);
    if (spec.setup && plan.tests.size() > before) {
      std::string group = fmt::format("setup-{}", plan.setups.size() + 1);
      std::string base = plan.run_dir + "/" + group;
      PlannedTest setup{&spec, &spec.setup->command};
      setup.named(group, base + ".stdout", base + ".stderr");
      plan.setups.push_back(std::move(setup));
    }
  }
}

}  // namespace

Plan make_plan(const std::vector<Spec>& specs, const Selection& selection,
               const std::string& run_dir) {
  Selector selector(selection);
  // Selection first, over all specs; the shard is cut from the selected.
  std::vector<Picked> selected;
  for (const auto& spec : specs) {
    auto picked = selector.pick(spec.tests);
    for (size_t i = 0; i < spec.tests.size(); ++i)
      if (picked[i]) selected.push_back({&spec, &spec.tests[i], PlannedTest::kWhole});
    picked = selector.pick(spec.cases);
    for (size_t i = 0; i < spec.cases.size(); ++i)
      if (picked[i])
        selected.push_back({&spec, &spec.cases.shared(i),
                            spec.cases.whole(i) ? PlannedTest::kWhole : static_cast<uint32_t>(i)});
  }
  if (selection.shard_count > 0) selected = shard_of(selected, selection);
  Plan plan{run_dir, {}, {}};
  plan_tests(specs, selected, selection, plan);
  return plan;
}

void parse_shard(const std::string& text, Selection* selection) {
  int k = 0, n = 0;
  char extra;
  if (std::sscanf(text.c_str(), "%d/%d%c", &k, &n, &extra) != 2 || n < 1 || k < 1 || k > n || n > kMaxShards)
    throw Error(Category::usage, "--shard '" + text + "' must be K/N with 1 <= K <= N <= " + std::to_string(kMaxShards) +
                                     ", e.g. --shard 2/3");
  selection->shard_index = k;
  selection->shard_count = n;
}

std::vector<int> assign_shards(const std::vector<std::string_view>& names, int count,
                               const std::map<std::string, double>& timings) {
  std::vector<size_t> order(names.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::vector<int> shard(names.size(), 0);
  if (timings.empty()) {
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return names[a] < names[b]; });
    for (size_t i = 0; i < order.size(); ++i) shard[order[i]] = static_cast<int>(i % count);
    return shard;
  }
  double known = 0;
  for (const auto& [name, s] : timings) known += s;
  double fallback = known / static_cast<double>(timings.size());
  std::vector<double> costs(names.size(), fallback);
  for (size_t i = 0; i < names.size(); ++i)
    if (auto it = timings.find(std::string(names[i])); it != timings.end()) costs[i] = it->second;
  auto cost = [&](size_t i) { return costs[i]; };
  // Longest processing time first: near-optimal and stable under ties.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return cost(a) != cost(b) ? cost(a) > cost(b) : names[a] < names[b];
  });
  std::vector<double> load(count, 0);
  for (size_t i : order) {
    int least = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    shard[i] = least;
    load[least] += cost(i);
  }
  return shard;
}

std::string new_run_id() {
  std::time_t now = std::time(nullptr);
  // The library's run id (its process's identity last: what gc tells live
  // runs from dead by), labelled with the time.
  return cgroup::run_id(fmt::format("{:%Y%m%d-%H%M%S}", fmt::localtime(now)));
}

bool setup_up_to_date(const Setup& setup) {
  namespace fs = std::filesystem;
  if (setup.outputs.empty()) return false;
  std::error_code ec;
  fs::file_time_type newest_input = fs::file_time_type::min();
  for (const auto& in : setup.inputs) {
    auto t = fs::last_write_time(in, ec);
    if (ec) return false;  // a missing input: let the setup say what is wrong
    newest_input = std::max(newest_input, t);
  }
  for (const auto& out : setup.outputs) {
    auto t = fs::last_write_time(out, ec);
    if (ec || t < newest_input) return false;
  }
  return true;
}

}  // namespace memrun

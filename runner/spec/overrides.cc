#include "runner/spec/overrides.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "runner/base/error.h"
#include "runner/base/units.h"

namespace memrun {
namespace {

constexpr uint64_t kPage = 4096;

uint64_t round_up(uint64_t bytes) { return (bytes + kPage - 1) / kPage * kPage; }

}  // namespace

void apply_overrides(std::vector<Spec>& specs, double scale, const std::vector<std::string>& sets) {
  // Written so that NaN fails too: every comparison with NaN is false.
  if (!(scale > 0 && scale <= 1000)) throw Error(Category::usage, "--scale must be a positive factor up to 1000, such as 0.8");
  // What last set each test's limit, and what to do if it breaks a check.
  std::map<const TestSpec*, std::pair<std::string, std::string>> changed_by;
  // A template's limit is its cases' (CompactTests): scaled once, for all.
  auto held = [](Spec& spec) {
    auto all = spec.cases.held();
    for (auto& t : spec.tests) all.push_back(&t);
    return all;
  };
  for (auto& spec : specs)
    for (TestSpec* each : held(spec)) {
      TestSpec& t = *each;
      double scaled = static_cast<double>(t.memory) * scale;
      if (scaled >= 0x1p62)
        throw Error(Category::usage, "--scale " + std::to_string(scale) + " makes the limit of '" + t.name +
                                         "' larger than any machine's memory; choose a smaller factor");
      t.memory = std::max<uint64_t>(kMinMemory, round_up(static_cast<uint64_t>(scaled)));
      if (scale != 1) changed_by[&t] = {fmt::format("--scale {:g}", scale), "give a larger --scale"};
    }
  for (const auto& set : sets) {
    auto dot = set.rfind(".memory=");
    if (dot == std::string::npos)
      throw Error(Category::usage, "--set '" + set + "' must be NAME.memory=SIZE, e.g. --set big-join.memory=3GiB");
    std::string name = set.substr(0, dot);
    uint64_t bytes = size_of_flag(set.substr(dot + 8), "--set");
    bool found = false;
    auto change = [&](TestSpec& t) { t.memory = bytes, found = true, changed_by[&t] = {"--set " + set, "set a larger memory"}; };
    for (auto& spec : specs) {
      for (auto& t : spec.tests)
        if (t.name == name) change(t);
      for (size_t i = 0; i < spec.cases.size(); ++i)
        if (spec.cases.name(i) == name) change(spec.cases.own(i));
    }
    if (!found) throw Error(Category::usage, "--set: no test named '" + name + "' in the specs");
  }
  // A limit changed here passes the spec's checks again: a memory_high or
  // min_headroom at or above the new memory would make no test at all.
  for (auto& spec : specs)
    for (const TestSpec* t : held(spec))
      if (auto by = changed_by.find(t); by != changed_by.end())
        recheck_test(spec, *t, by->second.first, by->second.second);
}

}  // namespace memrun

// ctest's order and exclusion properties (see spec/order.h).
#include "runner/spec/order.h"

#include <algorithm>
#include <map>

namespace memrun {
namespace {

// Fixture name -> the cases that set it up and those that clean it up.
struct Fixtures {
  std::map<std::string, std::vector<size_t>> setups, cleanups;
  Fixtures(const std::vector<CtestOrder>& cases, const std::vector<bool>& disabled) {
    for (size_t i = 0; i < cases.size(); ++i) {
      if (disabled[i]) continue;
      for (const auto& f : cases[i].fixtures_setup) setups[f].push_back(i);
      for (const auto& f : cases[i].fixtures_cleanup) cleanups[f].push_back(i);
    }
  }
  static const std::vector<size_t>& of(const std::map<std::string, std::vector<size_t>>& m, const std::string& f) {
    static const std::vector<size_t> none;
    auto it = m.find(f);
    return it == m.end() ? none : it->second;
  }
  // The setups and cleanups case `i` brings along, theirs in turn.
  std::vector<size_t> brought_by(const std::vector<CtestOrder>& cases, const std::vector<bool>& disabled,
                                 size_t i) const {
    if (cases[i].fixtures_required.empty()) return {};
    std::vector<bool> seen(cases.size(), false);
    std::vector<size_t> todo{i}, out;
    while (!todo.empty()) {
      size_t c = todo.back();
      todo.pop_back();
      if (disabled[c]) continue;
      for (const auto& f : cases[c].fixtures_required)
        for (const auto* list : {&of(setups, f), &of(cleanups, f)})
          for (size_t j : *list)
            if (j != i && !seen[j]) {
              seen[j] = true;
              out.push_back(j);
              todo.push_back(j);
            }
    }
    return out;
  }
};

void add(std::vector<std::string>& to, const std::string& name) {
  if (std::find(to.begin(), to.end(), name) == to.end()) to.push_back(name);
}

}  // namespace

std::vector<Order> resolve(const std::vector<std::string>& names, const std::vector<std::string>& full,
                           const std::vector<CtestOrder>& cases, const std::vector<bool>& disabled) {
  std::map<std::string, std::vector<size_t>> named;
  for (size_t i = 0; i < names.size(); ++i) named[names[i]].push_back(i);
  Fixtures fixtures(cases, disabled);
  std::vector<Order> out(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const CtestOrder& c = cases[i];
    Order& o = out[i];
    o.locks = c.resource_locks;
    o.serial = c.run_serial;
    o.slots = std::max(1, c.processors);
    // A test waiting on itself stays in `after`: cycle() finds it, as
    // ctest refuses it. A disabled test's DEPENDS too; it takes no part
    // in fixtures.
    for (const auto& d : c.depends)
      if (auto it = named.find(d); it != named.end())
        for (size_t j : it->second) add(o.after, full[j]);
    if (disabled[i]) continue;
    for (const auto& f : c.fixtures_required)
      for (size_t j : Fixtures::of(fixtures.setups, f)) {
        add(o.after, full[j]);
        add(o.needs, full[j]);
      }
    // A cleanup ends the fixture: after its setups and every test using it.
    for (const auto& f : c.fixtures_cleanup) {
      for (size_t j : Fixtures::of(fixtures.setups, f)) add(o.after, full[j]);
      for (size_t j = 0; j < cases.size(); ++j)
        if (!disabled[j] && std::count(cases[j].fixtures_required.begin(), cases[j].fixtures_required.end(), f))
          add(o.after, full[j]);
    }
    for (size_t j : fixtures.brought_by(cases, disabled, i)) add(o.brings, full[j]);
    for (const auto* mine : {&c.fixtures_setup, &c.fixtures_cleanup})
      for (const auto& f : *mine)
        for (const auto* list : {&Fixtures::of(fixtures.setups, f), &Fixtures::of(fixtures.cleanups, f)})
          for (size_t j : *list)
            if (j != i) add(o.fixture, full[j]);
  }
  return out;
}

std::vector<std::string> cycle(const std::vector<std::string>& full, const std::vector<Order>& orders) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < full.size(); ++i) index.emplace(full[i], i);
  // Depth first, without recursion (a chain may be thousands long).
  enum : char { unseen, open, closed };
  std::vector<char> state(full.size(), unseen);
  for (size_t root = 0; root < full.size(); ++root) {
    if (state[root] != unseen) continue;
    std::vector<std::pair<size_t, size_t>> path{{root, 0}};  // (test, next edge)
    state[root] = open;
    while (!path.empty()) {
      auto& [at, edge] = path.back();
      const auto& after = orders[at].after;
      if (edge == after.size()) {
        state[at] = closed;
        path.pop_back();
        continue;
      }
      auto it = index.find(after[edge++]);
      if (it == index.end()) continue;
      size_t next = it->second;
      if (state[next] == open) {
        std::vector<std::string> names;
        auto from = std::find_if(path.begin(), path.end(), [&](const auto& p) { return p.first == next; });
        for (auto p = from; p != path.end(); ++p) names.push_back(full[p->first]);
        names.push_back(full[next]);
        return names;
      }
      if (state[next] == unseen) {
        state[next] = open;
        path.push_back({next, 0});
      }
    }
  }
  return {};
}

}  // namespace memrun

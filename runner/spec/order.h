// ctest's order and exclusion properties (DEPENDS, FIXTURES_SETUP,
// FIXTURES_CLEANUP, FIXTURES_REQUIRED, RESOURCE_LOCK, RUN_SERIAL): read
// from ctest's listing (discover.cc), put in the spec's test names
// (spec/suite_cases.cc), obeyed by the plan (what a selection or a shard keeps
// together) and the start queue (what starts when).
#pragma once

#include <string>
#include <vector>

namespace memrun {

/// One ctest test's properties, in ctest's names.
struct CtestOrder {
  /// Tests to end first, whatever their outcome. ctest's listing adds the
  /// fixture edges itself (the setups to a test that requires a fixture,
  /// its users to a cleanup); resolve() adds them again for listings that
  /// do not.
  std::vector<std::string> depends;
  std::vector<std::string> fixtures_setup, fixtures_cleanup, fixtures_required;
  std::vector<std::string> resource_locks;
  bool run_serial = false;
  int processors = 1;  ///< PROCESSORS: the -j slots it takes
};

/// A test's order, in the names of its spec's tests. Empty for a test of
/// `tests:` and for a case of any tool but ctest.
struct Order {
  std::vector<std::string> after;   ///< end before it starts, whatever their outcome
  /// The setup tests of the fixtures it requires: when one fails, it is
  /// not run (ctest: "Not Run", "Failed test dependencies"); a skipped
  /// setup is no failure.
  std::vector<std::string> needs;
  /// The setup and cleanup tests of those fixtures, and theirs in turn: a
  /// selection that keeps it keeps them (as ctest -R does), a shard runs
  /// them together.
  std::vector<std::string> brings;
  /// The other setup and cleanup tests of its fixtures, for a setup or
  /// cleanup test: a shard runs them together, users or not.
  std::vector<std::string> fixture;
  std::vector<std::string> locks;   ///< never runs beside a test that holds one of these
  bool serial = false;              ///< runs alone
  int slots = 1;                    ///< how many -j slots it takes (capped at -j)
  bool operator==(const Order&) const = default;
};

/// The cases' orders in their tests' names: case i is called names[i] by
/// ctest and full[i] in the spec (two cases may share a ctest name: each
/// is meant). A name no case has is ignored, as ctest ignores it.
std::vector<Order> resolve(const std::vector<std::string>& names, const std::vector<std::string>& full,
                           const std::vector<CtestOrder>& cases, const std::vector<bool>& disabled);

/// Tests that wait on each other through `after` (full[i]'s order is
/// orders[i]), a test that waits on itself included: the names along one
/// such cycle, its first name again at the end; empty when there is none.
/// ctest refuses them all, a disabled test's DEPENDS too.
std::vector<std::string> cycle(const std::vector<std::string>& full, const std::vector<Order>& orders);

}  // namespace memrun

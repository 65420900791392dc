// The table of spec keys: the places each key is allowed, and the flags of
// `exec` and `bisect` read and checked through the same readers and checks
// as a spec; and the checks again after --scale and --set.
#include "runner/spec/keys.h"

#include <gtest/gtest.h>

#include "runner/base/error.h"
#include "runner/base/units.h"
#include "runner/spec/overrides.h"

namespace memrun {
namespace {

using Names = std::vector<std::string>;

// The message of what `f` throws, or "accepted".
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_TRUE(e.category() == Category::bad_input || e.category() == Category::usage);
    return e.what();
  }
  return "accepted";
}

TEST(SpecKeys, EachPlaceTakesItsKeysInTheOrderMessagesListThem) {
  EXPECT_EQ(spec::names_at(spec::kTest),
            (Names{"name", "run", "memory", "memory_high", "swap", "timeout", "env", "cwd", "expect", "min_headroom",
                   "tags", "pids", "max_increase", "inputs", "service_manager", "transparent_hugepages", "thrash",
                   "explain", "sub_groups"}));
  // defaults: a test's keys; read_fields refuses name, run and inputs with their reason.
  EXPECT_EQ(spec::names_at(spec::kDefaults), spec::names_at(spec::kTest));
  EXPECT_EQ(spec::names_at(spec::kSuite),
            (Names{"name", "gtest", "pytest", "python", "ctest", "cases", "exclude", "memory", "memory_high", "swap",
                   "timeout", "env", "cwd", "expect", "min_headroom", "tags", "pids", "max_increase", "inputs",
                   "service_manager", "transparent_hugepages", "thrash", "explain", "sub_groups"}));
  EXPECT_EQ(spec::names_at(spec::kRule),
            (Names{"match", "memory", "memory_high", "swap", "timeout", "env", "expect", "min_headroom", "tags", "pids",
                   "max_increase", "inputs", "service_manager", "transparent_hugepages", "thrash", "explain", "sub_groups"}));
  EXPECT_EQ(spec::names_at(spec::kSetup),
            (Names{"run", "memory", "memory_high", "swap", "timeout", "env", "cwd", "pids", "inputs", "outputs",
                   "service_manager", "transparent_hugepages"}));
  for (const auto& k : spec::keys()) EXPECT_EQ(spec::key_named(k.name), &k);
  EXPECT_EQ(spec::key_named("memroy"), nullptr);
}

// exec's flags say what a spec's keys say, naming the flag.
TEST(SpecKeys, ExecFlagsAreReadAndCheckedAsTheSpecsKeys) {
  spec::Source exec;
  exec.form = spec::Source::exec;
  spec::Fields f;
  auto read = [&](const char* key, const char* value) { return error_of([&] { spec::read_flag(exec, key, value, f); }); };
  EXPECT_EQ(read("memory", "64").rfind("--memory: '64' has no unit, and a bare number is ambiguous; write 64MiB", 0), 0u);
  EXPECT_EQ(read("min_headroom", "20").rfind("--min-headroom: '20' has no unit", 0), 0u);
  EXPECT_EQ(read("expect", "crash"), "--expect must be pass, oom, fail or an exit code 0-255, not 'crash'");
  EXPECT_EQ(read("timeout", "soon").rfind("--timeout: ", 0), 0u);
  EXPECT_EQ(read("memory", "1GB"), "accepted");
  EXPECT_EQ(read("min_headroom", "1GB"), "accepted");
  f.name = "t";
  f.argv = Names{"true"};
  TestSpec t = spec::test_of(f, "/");
  EXPECT_EQ(t.memory, 1000000000u);
  EXPECT_EQ(t.timeout, kDefaultTimeout);
  EXPECT_EQ(t.pids, kDefaultPids);
  auto problem = spec::check_test(exec, t);
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem.what, "--min-headroom must be below --memory (" + format_limit(t.memory) + ")");
  t.memory = 512 * KiB;
  EXPECT_EQ(spec::check_test(exec, t).what, "--memory " + format_size(512 * KiB) +
                                                " is below 1 MiB, too small to run any program");
  // The spec names the same rules by their keys.
  spec::Source file;
  file.path = "s.yaml";
  EXPECT_EQ(spec::check_test(file, t).what.rfind("memory " + format_size(512 * KiB) + " is below 1 MiB", 0), 0u);
}

// bisect's command test: --memory-range HI is its memory.
TEST(SpecKeys, BisectsCommandIsCheckedAsATest) {
  spec::Source bisect;
  bisect.form = spec::Source::bisect;
  spec::Fields f;
  f.name = "command";
  f.argv = Names{"true"};
  f.memory = 2 * KiB;
  auto t = spec::test_of(f, "/");
  EXPECT_EQ(spec::check_test(bisect, t).what,
            "--memory-range HI " + format_size(2 * KiB) + " is below 1 MiB, too small to run any program");
  t.memory = 64 * MiB;
  EXPECT_FALSE(spec::check_test(bisect, t));
}

std::vector<Spec> specs_of(const std::string& yaml) { return {parse_spec(yaml, "spec.yaml", "/project/specs")}; }

// --scale and --set change limits after the spec was read: the spec's
// checks run again, at the test's place, saying what to do.
TEST(SpecKeys, ALimitBelowWhatTheTestNeedsIsABadSpec) {
  const std::string yaml = "tests:\n  - {name: t, run: x, memory: 64MiB, memory_high: 48MiB}\n"
                           "  - {name: u, run: x, memory: 64MiB, min_headroom: 16MiB}\n"
                           "  - {name: v, run: x, memory: 64MiB, min_headroom: 20%}\n";
  auto specs = specs_of(yaml);
  EXPECT_EQ(error_of([&] { apply_overrides(specs, 0.5, {}); }),
            "spec.yaml:2:5: test 't': memory_high must be below memory (" + format_size(32 * MiB) +
                ") once --scale 0.5 applies; give a larger --scale, or lower the test's memory_high in the spec");
  specs = specs_of(yaml);
  EXPECT_EQ(error_of([&] { apply_overrides(specs, 1, {"u.memory=16MiB"}); }),
            "spec.yaml:3:5: test 'u': min_headroom must be below memory (" + format_size(16 * MiB) +
                ") once --set u.memory=16MiB applies; set a larger memory, or lower the test's min_headroom in the "
                "spec");
  specs = specs_of(yaml);
  EXPECT_EQ(error_of([&] { apply_overrides(specs, 1, {"v.memory=512KiB"}); }),
            "spec.yaml:4:5: test 'v': memory " + format_size(512 * KiB) +
                " is below 1 MiB, too small to run any program once --set v.memory=512KiB applies; give at least 1MiB");
  // A --set after --scale is the limit the check sees; a share of the
  // limit as headroom never breaks.
  specs = specs_of(yaml);
  EXPECT_EQ(error_of([&] { apply_overrides(specs, 0.5, {"t.memory=64MiB"}); }), "accepted");
  EXPECT_EQ(specs[0].tests[0].memory, 64 * MiB);
  EXPECT_EQ(specs[0].tests[1].memory, 32 * MiB);
  EXPECT_EQ(specs[0].tests[2].memory, 32 * MiB);
  specs = specs_of(yaml);
  EXPECT_EQ(error_of([&] { apply_overrides(specs, 2, {}); }), "accepted");
}

}  // namespace
}  // namespace memrun

#include "runner/spec/spec.h"

#include <gtest/gtest.h>

#include "runner/base/error.h"
#include "runner/plan/plan.h"
#include "runner/spec/inputs.h"
#include "runner/spec/names.h"
#include "runner/spec/overrides.h"
#include "runner/suites/discover.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

namespace memrun {
namespace {

Spec parse(const std::string& yaml) { return parse_spec(yaml, "spec.yaml", "/project/specs"); }

// The message of the error a spec gives; fails when it parses.
std::string error_of(const std::string& yaml) {
  try {
    parse(yaml);
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), Category::bad_input);
    return e.what();
  }
  ADD_FAILURE() << "spec was accepted:\n" << yaml;
  return "";
}

TEST(Spec, MinimalTestAndDefaults) {
  Spec s = parse(R"(
defaults:
  memory: 256MiB
  timeout: 30s
  env: {A: "1", B: "2"}
tests:
  - name: one
    run: echo hi
  - name: two
    run: [prog, --flag]
    memory: 64MiB
    env: {B: "3"}
    expect: oom
    min_headroom: 10%
    tags: [slow]
    pids: max
)");
  ASSERT_EQ(s.tests.size(), 2u);
  const auto& a = s.tests[0];
  EXPECT_EQ(a.argv, (std::vector<std::string>{"/bin/sh", "-c", "echo hi"}));
  EXPECT_EQ(a.memory, 256ull << 20);
  EXPECT_EQ(a.timeout.count(), 30000);
  EXPECT_EQ(a.swap, 0u);
  EXPECT_EQ(a.pids, kDefaultPids);
  EXPECT_EQ(a.cwd, "/project/specs");
  EXPECT_EQ(a.line, 7);
  const auto& b = s.tests[1];
  EXPECT_EQ(b.argv, (std::vector<std::string>{"prog", "--flag"}));
  EXPECT_EQ(b.memory, 64ull << 20);
  EXPECT_EQ(b.env.at("A"), "1");
  EXPECT_EQ(b.env.at("B"), "3");
  EXPECT_EQ(b.expect.kind, Expectation::oom);
  ASSERT_TRUE(b.min_headroom);
  EXPECT_EQ(b.min_headroom->for_limit(100 << 20), 10u << 20);
  EXPECT_EQ(b.tags, std::vector<std::string>{"slow"});
  EXPECT_FALSE(b.pids);
}

TEST(Spec, SpecLevelEnvAndSetup) {
  ::setenv("MEMRUN_SPEC_TEST_SCALE", "0.5", 1);
  Spec s = parse(R"(
env:
  SCALE: "${MEMRUN_SPEC_TEST_SCALE:-1}"
  OTHER: "${MEMRUN_SPEC_TEST_UNSET:-fallback}"
setup:
  run: make-fixture
  memory: 1GiB
  inputs: [gen.py]
  outputs: ["cache/f-${SCALE}.bin"]
defaults:
  env: {OTHER: from-defaults}
tests:
  - {name: t, run: x, memory: 8MiB}
)");
  ::unsetenv("MEMRUN_SPEC_TEST_SCALE");
  ASSERT_TRUE(s.setup);
  EXPECT_EQ(s.setup->command.name, "setup");
  EXPECT_EQ(s.setup->command.memory, 1ull << 30);
  EXPECT_EQ(s.setup->command.env.at("SCALE"), "0.5");
  EXPECT_EQ(s.setup->inputs, std::vector<std::string>{"/project/specs/gen.py"});
  EXPECT_EQ(s.setup->outputs, std::vector<std::string>{"/project/specs/cache/f-0.5.bin"});
  EXPECT_EQ(s.tests[0].env.at("SCALE"), "0.5");
  EXPECT_EQ(s.tests[0].env.at("OTHER"), "from-defaults");  // defaults win over spec env
}

TEST(Spec, MaxIncreaseAndInputs) {
  Spec s = parse(R"(
defaults:
  memory: 64MiB
  max_increase: 5%
tests:
  - {name: a, run: x}
  - {name: b, run: x, max_increase: "20%, 8MiB", inputs: [data/in.parquet, "${HOME_DIR:-/d}/x"]}
  - name: c
    run: x
    max_increase: [2MiB, 1%]
)");
  EXPECT_DOUBLE_EQ(s.tests[0].max_increase->percent, 5);
  EXPECT_EQ(s.tests[0].max_increase->bytes, 0u);
  EXPECT_DOUBLE_EQ(s.tests[1].max_increase->percent, 20);
  EXPECT_EQ(s.tests[1].max_increase->bytes, 8 * MiB);
  EXPECT_EQ(s.tests[1].max_increase->for_base(100 * MiB), 20 * MiB);
  EXPECT_EQ(s.tests[1].max_increase->for_base(10 * MiB), 8 * MiB);  // the larger wins
  EXPECT_EQ(s.tests[1].inputs, (std::vector<std::string>{"/project/specs/data/in.parquet", "/d/x"}));
  EXPECT_EQ(s.tests[2].max_increase->bytes, 2 * MiB);
  EXPECT_NE(error_of("tests:\n  - {name: a, run: x, memory: 64MiB, max_increase: lots}\n").find("spec.yaml:2:"),
            std::string::npos);
  EXPECT_NE(error_of("tests:\n  - {name: a, run: x, memory: 64MiB, max_increase: \"5%, 6%\"}\n")
                .find("must be a percentage (10%), a size (8MiB) or both"),
            std::string::npos);
  EXPECT_NE(error_of("defaults: {inputs: [a]}\ntests:\n  - {name: a, run: x, memory: 64MiB}\n")
                .find("'inputs' belongs to each test"),
            std::string::npos);
}

TEST(Spec, ExpandVars) {
  EXPECT_EQ(expand_vars("a-${X}-b", {{"X", "1"}}), "a-1-b");
  EXPECT_EQ(expand_vars("${NOPE_NOT_SET:-d}", {}), "d");
  EXPECT_EQ(expand_vars("${NOPE_NOT_SET}", {}), "");
  EXPECT_EQ(expand_vars("$HOME and $${X}", {}), "$HOME and ${X}");
  for (const char* bad : {"$HOME and ${", "${X-d}", "${X:=d}", "${}", "${1X}"})
    EXPECT_THROW(expand_vars(bad, {}), std::invalid_argument) << bad;
}

TEST(Spec, ExitCodeExpectation) {
  Spec s = parse("tests:\n  - {name: t, run: 'exit 3', memory: 8MiB, expect: 3}\n");
  EXPECT_EQ(s.tests[0].expect.kind, Expectation::exit_code);
  EXPECT_EQ(s.tests[0].expect.code, 3);
}

struct BadSpec {
  const char* yaml;
  const char* message;  // the error must contain this, location first
};

class SpecErrors : public ::testing::TestWithParam<BadSpec> {};

TEST_P(SpecErrors, SaysWhereAndWhat) {
  std::string msg = error_of(GetParam().yaml);
  EXPECT_NE(msg.find(GetParam().message), std::string::npos) << "got: " << msg;
}

INSTANTIATE_TEST_SUITE_P(
    All, SpecErrors,
    ::testing::Values(
        BadSpec{"", "spec.yaml: the spec is empty"},
        BadSpec{"tests: [", "spec.yaml:1:"},
        BadSpec{"- a\n- b\n", "spec.yaml:1:1: the spec must be a mapping"},
        BadSpec{"tests: []\n", "spec.yaml:1:8: 'tests' must be a non-empty list"},
        BadSpec{"tests:\n  - name: t\n    run: x\n    memroy: 1GiB\n",
                "spec.yaml:4:5: unknown key 'memroy' in a test; did you mean 'memory'?"},
        BadSpec{"tset: []\n", "did you mean 'tests'?"},
        BadSpec{"tests:\n  - name: t\n    run: x\n", "spec.yaml:2:5: test 't' has no 'memory' limit"},
        BadSpec{"tests:\n  - name: t\n    memory: 1GiB\n", "has no 'run' command"},
        BadSpec{"tests:\n  - run: x\n    memory: 1GiB\n", "this test has no 'name'"},
        BadSpec{"tests:\n  - {name: t, run: x, memory: [1]}\n", "'memory' must be a size such as 512MiB, not a list"},
        BadSpec{"tests:\n  - {name: t, run: x, memory: 0}\n", "'memory': '0' is zero"},
        BadSpec{"tests:\n  - {name: t, run: x, memory: -1GiB}\n", "must be positive"},
        BadSpec{"tests:\n  - {name: t, run: x, memory: 99999999TiB}\n", "too large"},
        BadSpec{"tests:\n  - {name: t, run: x, memory: 64}\n",
                "spec.yaml:2:31: 'memory': '64' has no unit, and a bare number is ambiguous; write 64MiB (64 x 2^20 "
                "bytes), 64MB (64 x 10^6 bytes) or 64B (bytes)"},
        BadSpec{"tests:\n  - {name: t, run: x, memory: 64MiB, min_headroom: 20}\n",
                "spec.yaml:2:52: 'min_headroom': '20' has no unit, and a bare number is ambiguous; write 20% (of the "
                "limit), 20MiB (20 x 2^20 bytes) or 20B (bytes)"},
        BadSpec{"tests:\n  - {name: t, run: x, memory: 64MiB, memory_high: 100000}\n",
                "spec.yaml:2:51: 'memory_high': '100000' has no unit"},
        BadSpec{"tests:\n  - {name: t, run: x, memory: 64mb}\n", "unknown unit 'mb'"},
        BadSpec{"tests:\n  - {name: a/b, run: x, memory: 8MiB}\n", "must not contain '/'"},
        BadSpec{"tests:\n  - {name: '..', run: x, memory: 8MiB}\n", "must not contain '..'"},
        BadSpec{"tests:\n  - {name: \"a\\tb\", run: x, memory: 8MiB}\n", "control characters"},
        BadSpec{"tests:\n  - {name: t, run: x, memory: 8MiB}\n  - {name: t, run: y, memory: 8MiB}\n",
                "spec.yaml:3:12: duplicate test name 't' (first at line 2)"},
        BadSpec{"tests:\n  - {name: t, run: x, memory: 8MiB, timeout: 30}\n", "has no unit"},
        BadSpec{"tests:\n  - {name: t, run: x, memory: 8MiB, expect: crash}\n", "'expect' must be pass, oom, fail or an exit code"},
        BadSpec{"tests:\n  - {name: t, run: x, memory: 8MiB, expect: 300}\n", "exit code 0-255"},
        BadSpec{"tests:\n  - {name: t, run: x, memory: 8MiB, min_headroom: 150%}\n", "percentage"},
        BadSpec{"tests:\n  - {name: t, run: x, memory: 8MiB, min_headroom: 8MiB}\n", "min_headroom must be below memory"},
        BadSpec{"tests:\n  - {name: t, run: x, memory: 8MiB, memory_high: 9MiB}\n", "memory_high must be below memory"},
        BadSpec{"tests:\n  - {name: t, run: x, memory: 8MiB, env: {1X: a}}\n", "not a valid environment variable name"},
        BadSpec{"tests:\n  - {name: t, run: x, memory: 8MiB, env: [a]}\n", "'env' must be a mapping"},
        BadSpec{"tests:\n  - {name: t, run: x, memory: 8MiB, cwd: no/such/dir}\n", "is not a directory"},
        BadSpec{"tests:\n  - {name: t, run: x, memory: 8MiB, pids: 1.5}\n", "'pids' must be a whole number"},
        BadSpec{"tests:\n  - {name: t, run: [], memory: 8MiB}\n", "'run' must be a shell command"},
        BadSpec{"tests:\n  - {name: t, run: '', memory: 8MiB}\n", "'run' is empty"},
        BadSpec{"defaults: {name: x}\ntests:\n  - {name: t, run: y, memory: 8MiB}\n", "belongs to each test, not to defaults"},
        BadSpec{"tests:\n  - {name: t, run: x, memory: 8MiB, memory: 9MiB}\n", "'memory' is given twice"},
        BadSpec{"setup: {run: x, memory: 8MiB, output: [a]}\ntests:\n  - {name: t, run: x, memory: 8MiB}\n",
                "spec.yaml:1:31: unknown key 'output' in setup; did you mean 'outputs'?"},
        BadSpec{"setup: {run: x}\ntests:\n  - {name: t, run: x, memory: 8MiB}\n", "spec.yaml:1:8: the setup has no 'memory' limit"},
        BadSpec{"setup: {run: x, memory: 8MiB, outputs: a}\ntests:\n  - {name: t, run: x, memory: 8MiB}\n",
                "'outputs' must be a list of paths"},
        BadSpec{"env: [a]\ntests:\n  - {name: t, run: x, memory: 8MiB}\n", "'env' must be a mapping"},
        // Tests after a second document would never run.
        BadSpec{"tests:\n  - {name: t, run: x, memory: 8MiB}\n---\ntests:\n  - {name: u, run: x, memory: 8MiB}\n",
                "spec.yaml:3:1: a second YAML document starts here"},
        BadSpec{"tests:\n  - {name: t, run: x, memory: 8MiB}\n...\ntests: []\n", "spec.yaml:4:1: a second YAML document"},
        BadSpec{"tests:\n  - {name: t, run: x, memory: 8MiB, env: {MEMRUN_TEST: a}}\n", "MEMRUN_TEST is set by memrun"},
        BadSpec{"tests:\n  - {name: t, run: ['', x], memory: 8MiB}\n", "'run' starts with an empty program name"},
        BadSpec{"tests:\n  - {name: t, run: x, memory: 8MiB, min_headroom: 0%}\n", "above 0% and below 100%"},
        BadSpec{"tests:\n  - {name: t, run: x, memory: 0.5MiB}\n", "is below 1 MiB, too small to run any program"},
        BadSpec{"env: {A: '${X-d}'}\ntests:\n  - {name: t, run: x, memory: 8MiB}\n",
                "spec.yaml:1:10: '${X-d}' is not ${NAME} or ${NAME:-default}"},
        BadSpec{"tests:\n  - &c {name: t, run: x, memory: 8MiB}\n  - {<<: *c, name: u}\n", "spec.yaml:3:6: merge keys (<<: *anchor) are not supported"}));

TEST(Spec, OneDocumentMayStartWithMarkersAndHoldThemInScalars) {
  for (const char* yaml : {"---\ntests:\n  - {name: t, run: x, memory: 8MiB}\n",
                           "# a comment\n--- # the spec\ntests:\n  - {name: t, run: x, memory: 8MiB}\n...\n",
                           "tests:\n  - name: t\n    memory: 8MiB\n    run: |\n      echo ---\n      echo '...'\n"})
    EXPECT_EQ(parse(yaml).tests.size(), 1u) << yaml;
}

TEST(Spec, OnlyAPlainNumberIsTakenForAForgottenUnit) {
  EXPECT_EQ(error_of("tests:\n  - {name: t, run: x, memory: 0.5MiB}\n").find("did you mean"), std::string::npos);
  EXPECT_NE(error_of("tests:\n  - {name: t, run: x, memory: 64}\n").find("write 64MiB"), std::string::npos);
}


TEST(Spec, GtestListingGivesFullNamesAndMarksDisabledOnes) {
  // --gtest_list_tests of GoogleTest 1.12, as memrun-example-gtest prints it,
  // after two failures a program printed before its listing (googletest's
  // own output test does): they are no suite.
  auto names = parse_gtest_list(
      "/src/x.cc:344: Failure\nValue of: false\n  Actual: false\nExpected equality of these values:\n  2\n"
      "Small.\n  Fits\n  DISABLED_NeverRuns\nBig.\n  LoadsEverything\n"
      "Typed/0.  # TypeParam = int\n  Works\n"
      "Sizes/Touch.\n  Mib/0  # GetParam() = 4\n  Mib/1  # GetParam() = 16\n"
      "DISABLED_Off.\n  Anything\nInst/DISABLED_P.\n  Case/0  # GetParam() = 1\nSmall.\n  Fits\n");
  std::vector<std::string> got, off;
  for (const auto& n : names) (n.disabled ? off : got).push_back(n.name);
  EXPECT_EQ(got, (std::vector<std::string>{"Small.Fits", "Big.LoadsEverything", "Typed/0.Works", "Sizes/Touch.Mib/0",
                                           "Sizes/Touch.Mib/1", "Small.Fits"}));
  EXPECT_EQ(off, (std::vector<std::string>{"Small.DISABLED_NeverRuns", "DISABLED_Off.Anything", "Inst/DISABLED_P.Case/0"}));
}

TEST(Spec, CtestJsonGivesCommandsDirectoriesEnvironmentsAndRules) {
  auto cases = parse_ctest_json(R"({"kind":"ctestInfo","version":{"major":1,"minor":0},"tests":[
    {"name":"a","command":["/b/t","--gtest_filter=A.B"],"properties":[{"name":"WORKING_DIRECTORY","value":"/w"}]},
    {"name":"e","command":["sh","-c","x y"],"properties":[{"name":"ENVIRONMENT","value":["K=v=w","L="]},
                                                       {"name":"WILL_FAIL","value":true}]},
    {"name":"off","command":["false"],"properties":[{"name":"DISABLED","value":true}]},
    {"name":"r","command":["t"],"properties":[{"name":"PASS_REGULAR_EXPRESSION","value":["hel+o","z"]},
      {"name":"FAIL_REGULAR_EXPRESSION","value":["bad"]},{"name":"SKIP_REGULAR_EXPRESSION","value":["skp"]},
      {"name":"SKIP_RETURN_CODE","value":77},{"name":"TIMEOUT","value":1.5}]},
    {"name":"unbuilt","properties":[{"name":"WORKING_DIRECTORY","value":"/w"}]}]})");
  ASSERT_EQ(cases.size(), 5u);
  EXPECT_EQ(cases[0].argv, (std::vector<std::string>{"/b/t", "--gtest_filter=A.B"}));
  EXPECT_EQ(cases[0].cwd, "/w");
  EXPECT_EQ(cases[1].env, (std::map<std::string, std::string>{{"K", "v=w"}, {"L", ""}}));
  EXPECT_TRUE(cases[1].rules.will_fail);
  EXPECT_EQ(cases[1].command, "sh -c 'x y'");
  EXPECT_TRUE(cases[2].disabled);
  EXPECT_EQ(cases[3].rules.pass_regex, (std::vector<std::string>{"hel+o", "z"}));
  EXPECT_EQ(cases[3].rules.fail_regex, (std::vector<std::string>{"bad"}));
  EXPECT_EQ(cases[3].rules.skip_regex, (std::vector<std::string>{"skp"}));
  EXPECT_EQ(cases[3].rules.skip_exit_code, 77);
  EXPECT_EQ(cases[3].marks.at("timeout"), "1500ms");
  EXPECT_NE(cases[4].not_runnable.find("not run"), std::string::npos);
  EXPECT_THROW(parse_ctest_json("not json"), Error);
  // ENVIRONMENT_MODIFICATION on top of ENVIRONMENT (whatever the order they
  // are listed in); a missing REQUIRED_FILES is ctest's Not Run.
  ::setenv("MEMRUN_TEST_PATHS", "/a", 1);
  auto more = parse_ctest_json(R"({"tests":[
    {"name":"m","command":["t"],"properties":[
      {"name":"ENVIRONMENT_MODIFICATION","value":["A=set:1","A=string_append:2","MEMRUN_TEST_PATHS=path_list_prepend:/b",
        "B=cmake_list_append:x","B=cmake_list_append:y","C=reset:","E=unset:"]},
      {"name":"ENVIRONMENT","value":["C=kept"]}]},
    {"name":"r","command":["t"],"properties":[{"name":"REQUIRED_FILES","value":["/no/such/file"]}]}]})");
  ::unsetenv("MEMRUN_TEST_PATHS");
  EXPECT_EQ(more[0].env, (std::map<std::string, std::string>{
                             {"A", "12"}, {"B", "x;y"}, {"C", "kept"}, {"E", ""}, {"MEMRUN_TEST_PATHS", "/b:/a"}}));
  EXPECT_NE(more[1].not_runnable.find("REQUIRED_FILES /no/such/file is missing"), std::string::npos);
}

TEST(Spec, ANameThatIsNoTextIsEscaped) {
  EXPECT_EQ(usable_name("Suite.Case/1"), "Suite.Case/1");
  EXPECT_EQ(usable_name("tests/t.py::test[\xc3\xa9 x]"), "tests/t.py::test[\xc3\xa9 x]");
  EXPECT_EQ(usable_name("A.B\033[31m\xff\r"), "A.B\\x1b[31m\\xff\\x0d");
}

TEST(Spec, AGoogleTestListingIsFilteredAsItIsRead) {
  // A program that lists 20,000 cases, one of them twice (two fixtures of
  // one name): --filter keeps what it selects as the listing is read, the
  // twice-listed name still runs each as itself (#2), and a suite none of
  // whose cases are selected is no error.
  std::string dir = (std::filesystem::temp_directory_path() / ("memrun-list-" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(dir);
  std::string program = dir + "/list.sh";
  std::ofstream(program) << "#!/bin/sh\necho 'S.'\ni=0; while [ $i -lt 20000 ]; do echo \"  c$i\"; i=$((i+1)); done\n"
                            "echo 'T.'\necho '  twice'\necho 'T.'\necho '  twice'\n";
  std::filesystem::permissions(program, std::filesystem::perms::owner_all);
  SuiteSource s;
  s.suite = "g";
  s.path = program;
  s.cwd = dir;
  s.keep = [](const std::string& name) { return name == "g/S.c17" || name.rfind("g/T.twice", 0) == 0; };
  auto cases = discover(s, nullptr);
  ASSERT_EQ(cases.size(), 3u);
  EXPECT_EQ(cases[0].name, "S.c17");
  EXPECT_EQ(cases[1].name, "T.twice");
  EXPECT_EQ(cases[2].name, "T.twice#2");
  EXPECT_EQ(cases[2].env.at("GTEST_SHARD_INDEX"), "1");
  EXPECT_EQ(cases[2].env.at("GTEST_TOTAL_SHARDS"), "2");
  s.keep = [](const std::string&) { return false; };
  EXPECT_TRUE(discover(s, nullptr).empty());
  std::filesystem::remove_all(dir);
}

// A spec with one suite whose tool "lists" `cases`.
Spec with_cases(const std::string& yaml, std::vector<Case> cases) {
  return parse_spec(yaml, "spec.yaml", "/project/specs", [&](const SuiteSource& s) {
    EXPECT_EQ(s.path, "/project/build/t");
    return cases;
  });
}

// A run holds a suite's plain cases as their names (CompactTests), each
// made again exactly as the spec made it: a case a rule or its marker sets
// apart is the template of those after it. Its plan holds a case in a few
// dozen bytes, and names it as before once made to run.
TEST(Spec, ARunHoldsASuitesPlainCasesAsTheirNames) {
  std::vector<Case> cases;
  for (int i = 0; i < 10000; ++i) {
    Case c;
    c.name = "S" + std::to_string(i / 100) + ".c" + std::to_string(i % 100);
    c.argv = {"/project/build/t", "--gtest_filter=" + c.name};
    c.command = "GTEST_COLOR=no /project/build/t --gtest_filter=" + c.name;
    c.env = {{"GTEST_COLOR", "no"}};
    c.rules.gtest_results = true;
    c.rules.tool = "GoogleTest";
    cases.push_back(c);
  }
  cases[5].marks = {{"memory", "\"96MiB\""}};
  std::string yaml = "tests:\n  - {name: t, run: x, memory: 8MiB}\nsuites:\n  - name: g\n    gtest: /project/build/t\n"
                     "    memory: 64MiB\n    cases:\n      - {match: \"S3.c7\", memory: 128MiB}\n";
  auto lister = [&](const SuiteSource&) { return cases; };
  Spec whole = with_cases(yaml, cases);
  std::vector<Spec> specs;
  specs.push_back(parse_spec(yaml, "spec.yaml", "/project/specs", lister, false, nullptr, true));
  const CompactTests& held = specs[0].cases;
  ASSERT_TRUE(specs[0].tests.empty());
  ASSERT_EQ(held.size(), 10001u);
  ASSERT_EQ(whole.tests.size(), 10001u);
  EXPECT_EQ(whole.tests[6].memory, 96 * MiB);
  EXPECT_EQ(whole.tests[308].memory, 128 * MiB);
  std::vector<std::string> held_whole;
  for (size_t i = 0; i < whole.tests.size(); ++i) {
    EXPECT_EQ(held.name(i), whole.tests[i].name);
    EXPECT_TRUE(held.made(i) == whole.tests[i]) << whole.tests[i].name << " is not made as the spec made it";
    if (held.whole(i)) held_whole.push_back(whole.tests[i].name);
  }
  EXPECT_EQ(held_whole, (std::vector<std::string>{"t"}));
  EXPECT_LE(held.bytes() / held.size(), 48u);

  Plan plan = make_plan(specs, {}, "/run");
  ASSERT_EQ(plan.tests.size(), 10001u);
  EXPECT_LE(sizeof(PlannedTest), 72u) << "a plan of a million cases holds a million of these (--repeat 2: two million)";
  EXPECT_FALSE(plan.tests[12].made);
  EXPECT_EQ(plan.tests[12].name(), "g/S0.c11");
  PlannedTest made = made_test(plan.tests[12], 12, "/run");
  EXPECT_TRUE(*made.test == whole.tests[12]);
  EXPECT_EQ(made.group(), "013-g_S0.c11");
  EXPECT_EQ(made.stdout_path(), "/run/013-g_S0.c11.stdout");
  EXPECT_EQ(made.stderr_path(), "/run/013-g_S0.c11.stderr");
  PlannedTest probe = plan.tests[12];  // as bisect names its probes
  probe.named("probe-1", "/run/probe-1.stdout", "/run/probe-1.stderr");
  EXPECT_TRUE(*probe.test == whole.tests[12]) << "named() left a case held as its name with its template's argv";
  EXPECT_EQ(probe.name(), "g/S0.c11");
  Selection one;
  one.filter = "S3[.]c7$";
  plan = make_plan(specs, one, "/run");
  ASSERT_EQ(plan.tests.size(), 1u);
  EXPECT_EQ(made_test(plan.tests[0], 0, "/run").test->memory, 128 * MiB);

  // --set's checks go in file order, as over tests held whole: the first
  // case a limit breaks is named, whichever --set came first.
  std::string high = "suites:\n  - {name: g, gtest: /project/build/t, memory: 64MiB, memory_high: 32MiB}\n";
  specs.clear();
  specs.push_back(parse_spec(high, "spec.yaml", "/project/specs", lister, false, nullptr, true));
  try {
    apply_overrides(specs, 1, {"g/S0.c9.memory=16MiB", "g/S0.c3.memory=16MiB"});
    ADD_FAILURE() << "a limit below memory_high was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("test 'g/S0.c3'"), std::string::npos) << e.what();
  }
}

// ctest's order, from a listing to the plan: in the spec's names, a
// fixture's setup and cleanup kept with a selected user and in its shard,
// a name no test has ignored, and a cycle refused where the suite is.
TEST(Spec, CtestsOrderIsInTheSpecsNamesKeptTogetherAndNeverACycle) {
  auto ctest_case = [](const std::string& name, CtestOrder order) {
    Case c;
    c.name = name;
    c.argv = {"/bin/true"};
    c.order = std::move(order);
    return c;
  };
  CtestOrder up, use, down, other;
  up.fixtures_setup = {"db"};
  use.fixtures_required = {"db"};
  use.depends = {"no-such-test"};
  use.resource_locks = {"port"};
  down.fixtures_cleanup = {"db"};
  other.run_serial = true;
  std::vector<Case> cases = {ctest_case("up", up), ctest_case("use", use), ctest_case("down", down),
                             ctest_case("other", other)};
  std::string yaml = "suites:\n  - {name: e, ctest: ../build/t, memory: 1GiB}\n";
  Spec spec = with_cases(yaml, cases);
  ASSERT_EQ(spec.tests.size(), 4u);
  const Order& u = spec.tests[1].order;
  EXPECT_EQ(u.after, (std::vector<std::string>{"e/up"}));
  EXPECT_EQ(u.needs, (std::vector<std::string>{"e/up"}));
  EXPECT_EQ(u.brings, (std::vector<std::string>{"e/up", "e/down"}));
  EXPECT_EQ(u.locks, (std::vector<std::string>{"port"}));
  EXPECT_EQ(spec.tests[2].order.after, (std::vector<std::string>{"e/up", "e/use"}));
  EXPECT_TRUE(spec.tests[3].order.serial);

  std::vector<Spec> specs = {spec};
  Selection one;
  one.filter = "e/use";
  Plan plan = make_plan(specs, one, "/run");
  ASSERT_EQ(plan.tests.size(), 3u) << "the fixture's setup and cleanup come with its user";
  EXPECT_FALSE(plan.tests[0].waits) << "a test that waits for none holds nothing";
  ASSERT_TRUE(plan.tests[1].waits && plan.tests[2].waits);
  EXPECT_EQ(plan.tests[1].waits->after, (std::vector<size_t>{0}));
  EXPECT_EQ(plan.tests[1].waits->needs, (std::vector<size_t>{0}));
  EXPECT_EQ(plan.tests[2].waits->after, (std::vector<size_t>{0, 1}));
  for (int k = 1; k <= 2; ++k) {
    Selection shard;
    shard.shard_index = k;
    shard.shard_count = 2;
    auto part = make_plan(specs, shard, "/run");
    EXPECT_EQ(part.tests.size(), part.tests[0].test->name == "e/other" ? 1u : 3u) << "shard " << k;
  }

  cases[0].order.depends = {"down"};  // up after down, which is after up
  try {
    with_cases(yaml, cases);
    ADD_FAILURE() << "a cycle was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("spec.yaml:2:5: suite 'e': its tests wait for each other"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("'e/up' waits for 'e/down' waits for 'e/up'"), std::string::npos) << e.what();
  }
  cases[0].order.depends = {"up"};  // on itself: ctest refuses that too
  try {
    with_cases(yaml, cases);
    ADD_FAILURE() << "a test waiting for itself was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'e/up' waits for 'e/up'"), std::string::npos) << e.what();
  }
}

// A fixture's setup and cleanup share a shard when no user of it is
// selected too: the cleanup undoes what the setup did, on one machine.
TEST(Spec, AFixturesSetupAndCleanupShareAShardWithoutAUser) {
  Case up, down;
  up.name = "up", down.name = "down";
  up.argv = down.argv = {"/bin/true"};
  up.order.fixtures_setup = {"db"};
  down.order.fixtures_cleanup = {"db"};
  std::vector<Case> cases = {up, down};
  for (int i = 0; i < 6; ++i) {  // enough names that a split would show
    Case c;
    c.name = "free" + std::to_string(i);
    c.argv = {"/bin/true"};
    cases.push_back(c);
  }
  std::vector<Spec> specs = {with_cases("suites:\n  - {name: e, ctest: ../build/t, memory: 1GiB}\n", cases)};
  for (int k = 1; k <= 4; ++k) {
    Selection shard;
    shard.shard_index = k;
    shard.shard_count = 4;
    std::set<std::string> names;
    for (const auto& p : make_plan(specs, shard, "/run").tests) names.insert(p.test->name);
    EXPECT_EQ(names.count("e/up"), names.count("e/down")) << "shard " << k;
  }
}

TEST(Spec, RulesApplyInOrderAndAMarkerWinsOverThem) {
  Spec spec = with_cases(
      "suites:\n  - name: engine\n    gtest: ../build/t\n    memory: 256MiB\n    timeout: 1m\n    inputs: [data.bin]\n    cases:\n"
      "      - {match: 'Parquet.*', memory: 64MiB, min_headroom: 20%}\n"
      "      - {match: '*.LoadsEverything', expect: oom}\n",
      {{"Parquet.OneColumn", {"/project/build/t", "--gtest_filter=Parquet.OneColumn"}, "t1", "", {}, {}},
       {"Parquet.LoadsEverything", {"/project/build/t"}, "t2", "", {}, {}},
       {"Other.Case/1", {"/project/build/t"}, "t3", "/w", {{"K", "v"}}, {{"memory", "32MiB"}, {"expect", "fail"}}}});
  ASSERT_EQ(spec.tests.size(), 3u);
  const auto& one = spec.tests[0];
  EXPECT_EQ(one.name, "engine/Parquet.OneColumn");
  EXPECT_EQ(one.memory, 64 * MiB);
  EXPECT_EQ(one.timeout, std::chrono::minutes(1));
  EXPECT_TRUE(one.min_headroom && one.min_headroom->is_percent);
  EXPECT_EQ(one.origin, "suite engine (line 2); rule 'Parquet.*' (line 8)");
  // The suite's inputs are every case's, relative to the case's cwd.
  EXPECT_EQ(one.inputs, (std::vector<std::string>{"/project/specs/data.bin"}));
  const auto& all = spec.tests[1];
  EXPECT_EQ(all.memory, 64 * MiB);
  EXPECT_EQ(all.expect.kind, Expectation::oom);
  EXPECT_EQ(all.origin, "suite engine (line 2); rule 'Parquet.*' (line 8); rule '*.LoadsEverything' (line 9)");
  const auto& other = spec.tests[2];
  EXPECT_EQ(other.memory, 32 * MiB);
  EXPECT_EQ(other.expect.kind, Expectation::fail);
  EXPECT_EQ(other.cwd, "/w");
  EXPECT_EQ(other.env.at("K"), "v");
  EXPECT_EQ(other.origin, "suite engine (line 2); marker");
  EXPECT_EQ(other.inputs, (std::vector<std::string>{"/w/data.bin"}));
}

TEST(Spec, BadSuitesAndMarkersSayWhere) {
  auto error = [](const std::string& yaml, std::vector<Case> cases) {
    try {
      with_cases(yaml, cases);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  std::vector<Case> one = {{"A.b", {"/project/build/t"}, "t", "", {}, {}}};
  EXPECT_NE(error("suites:\n  - {name: e, gtest: ../build/t}\n", one).find("spec.yaml:2:5: suite 'e' has no 'memory'"),
            std::string::npos);
  EXPECT_NE(error("suites:\n  - {name: e, gtest: ../build/t, memory: 1GiB, run: x}\n", one)
                .find("unknown key 'run' in a suite"),
            std::string::npos);
  std::vector<Case> marked = {{"A.b", {"/project/build/t"}, "t", "", {}, {{"memory", "lots"}}}};
  EXPECT_NE(error("suites:\n  - {name: e, gtest: ../build/t, memory: 1GiB}\n", marked)
                .find("spec.yaml:2:5: suite 'e': case A.b: its marker: 'memory'"),
            std::string::npos)
      << error("suites:\n  - {name: e, gtest: ../build/t, memory: 1GiB}\n", marked);
  EXPECT_NE(error("suites:\n  - {name: e, gtest: ../build/t, memory: 1GiB}\n  - {name: e, gtest: ../build/t, memory: 1GiB}\n",
                  one)
                .find("named like another test"),
            std::string::npos);
  // Without a discoverer (parse_spec alone) nothing is run.
  EXPECT_NE(error_of("suites:\n  - {name: e, gtest: t, memory: 1GiB}\n").find("suites are listed only when"),
            std::string::npos);
}

// Inputs as load_spec checks them: real paths, each at its place.
std::string input_error(const std::string& dir, const std::string& yaml) {
  try {
    parse_spec(yaml, "spec.yaml", dir, nullptr, true);
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), Category::bad_input);
    return e.what();
  }
  return "";
}

TEST(Spec, OnlyFilesAndFoldersThatExistOutsideSystemFolders) {
  char tmpl[] = "/tmp/memrun-inputs-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0600), 0);
  std::filesystem::create_directory(dir + "/tree");
  std::ofstream(dir + "/tree/a.bin") << "a";
  std::ofstream(dir + "/file.bin") << "f";
  int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s/sock", dir.c_str());
  ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  auto test = [](const std::string& inputs) {
    return "tests:\n  - name: a\n    run: x\n    memory: 64MiB\n    inputs: " + inputs + "\n";
  };
  EXPECT_EQ(input_error(dir, test("[file.bin, tree]")), "");
  // Each refusal names the entry's place: line 5, column of the path.
  EXPECT_NE(input_error(dir, test("[file.bin, fifo]")).find("spec.yaml:5:24: the input " + dir + "/fifo is a FIFO"),
            std::string::npos)
      << input_error(dir, test("[file.bin, fifo]"));
  EXPECT_NE(input_error(dir, test("[sock]")).find("is a socket"), std::string::npos);
  EXPECT_NE(input_error(dir, test("[/dev/null]")).find("is a system path"), std::string::npos);
  EXPECT_NE(input_error(dir, test("[/proc/self/status]")).find("is a system path"), std::string::npos);
  EXPECT_NE(input_error(dir, test("[/usr/share]")).find("is a system path"), std::string::npos);
  EXPECT_NE(input_error(dir, test("[/]")).find("is a system path"), std::string::npos);
  EXPECT_NE(input_error(dir, test("[missing.bin]")).find("spec.yaml:5:14: the input " + dir + "/missing.bin does not exist"),
            std::string::npos)
      << input_error(dir, test("[missing.bin]"));
  // What the setup makes need not exist yet (its start checks it again).
  EXPECT_EQ(input_error(dir, "setup: {run: x, memory: 64MiB, outputs: [made]}\n" + test("[made/data.bin]")), "");
  // A folder of more than kMaxInputFiles files is no input.
  std::filesystem::create_directory(dir + "/big");
  for (size_t i = 0; i <= kMaxInputFiles; ++i) std::ofstream(dir + "/big/" + std::to_string(i));
  EXPECT_NE(input_error(dir, test("[big]")).find("holds more than 10000 files"), std::string::npos);
  ::close(sock);
  std::filesystem::remove_all(dir);
}

TEST(Spec, ThrashOffInATestARuleOrDefaults) {
  auto s = parse("defaults: {thrash: off}\ntests:\n  - {name: a, run: x, memory: 64MiB}\n"
                 "  - {name: b, run: x, memory: 64MiB, thrash: on}\n");
  EXPECT_FALSE(s.tests[0].thrash);
  EXPECT_TRUE(s.tests[1].thrash);
  EXPECT_TRUE(parse("tests:\n  - {name: a, run: x, memory: 64MiB}\n").tests[0].thrash);
  EXPECT_NE(error_of("tests:\n  - {name: a, run: x, memory: 64MiB, thrash: sometimes}\n")
                .find("spec.yaml:2:46: 'thrash' must be on"),
            std::string::npos);
  EXPECT_NE(error_of("tests:\n  - {name: a, run: x, memory: 64MiB, thrahs: off}\n").find("did you mean 'thrash'?"),
            std::string::npos);
}

TEST(Spec, RulesAndMarkersTakeInputsThrashAndMaxIncrease) {
  Spec spec = with_cases(
      "suites:\n  - name: engine\n    gtest: ../build/t\n    memory: 256MiB\n    cases:\n"
      "      - {match: 'Parquet.*', inputs: [data/a.parquet], thrash: off, max_increase: 5%}\n",
      {{"Parquet.Reads", {"/project/build/t"}, "t1", "", {}, {}},
       {"Other.Marked", {"/project/build/t"}, "t2", "/w", {},
        {{"inputs", "[\"in.csv\", \"/d/b.csv\"]"}, {"thrash", "off"}, {"max_increase", "10%"}}}});
  ASSERT_EQ(spec.tests.size(), 2u);
  EXPECT_EQ(spec.tests[0].inputs, (std::vector<std::string>{"/project/specs/data/a.parquet"}));
  EXPECT_FALSE(spec.tests[0].thrash);
  ASSERT_TRUE(spec.tests[0].max_increase);
  EXPECT_EQ(spec.tests[1].inputs, (std::vector<std::string>{"/w/in.csv", "/d/b.csv"}));
  EXPECT_FALSE(spec.tests[1].thrash);
  ASSERT_TRUE(spec.tests[1].max_increase);
}

// Many names in little memory (a suite's million cases): each found by its
// text, the first of equal ones, at some 16 bytes a name beyond its own.
TEST(Spec, FindsEveryNameAndTheFirstOfEqualOnes) {
  Names names;
  EXPECT_EQ(names.find("Suite0.Case0"), Names::npos);
  auto name = [](int i) { return "Suite" + std::to_string(i / 1000) + ".Case" + std::to_string(i % 1000); };
  for (int i = 0; i < 100000; ++i) ASSERT_EQ(names.add(name(i)), static_cast<size_t>(i));
  EXPECT_EQ(names.add("Suite3.Case7"), 100000u);
  EXPECT_EQ(names.add(""), 100001u);
  EXPECT_EQ(names.size(), 100002u);
  for (int i = 0; i < 100000; i += 7) ASSERT_EQ(names.find(name(i)), static_cast<size_t>(i)) << name(i);
  EXPECT_EQ(names.find("Suite3.Case7"), 3007u) << "the first of equal names";
  EXPECT_EQ(names[100000], "Suite3.Case7");
  EXPECT_EQ(names.find(""), 100001u);
  EXPECT_EQ(names.find("Suite100.Case0"), Names::npos);
  EXPECT_EQ(names.find("Suite3.Case"), Names::npos);
  size_t text = 0;
  for (size_t i = 0; i < names.size(); ++i) text += names[i].size();
  EXPECT_LT(names.bytes(), 2 * text + 40 * names.size());
}

// A spec's tests handed on as they are made (TestSink: `memrun list`) are
// the tests Spec::tests holds without a sink, in the same order: `tests:`
// at once, a case at a time while its tool lists it, a ctest suite at once
// (its order resolved over all its cases); the selection picks in a batch
// what it picks in the spec.
TEST(Spec, TestsHandedOnAsTheyAreMadeAreThoseASpecHolds) {
  std::string yaml =
      "tests:\n  - {name: plain, run: /bin/true, memory: 8MiB}\n"
      "suites:\n  - name: g\n    gtest: ../build/t\n    memory: 256MiB\n    env: {A: b}\n    cases:\n"
      "      - {match: 'P.*', memory: 64MiB}\n"
      "  - {name: c, ctest: ../build/c, memory: 1GiB}\n";
  std::vector<Case> gtest = {{"P.one", {"/project/build/t", "--gtest_filter=P.one"}, "t1", "", {{"GTEST_COLOR", "no"}}, {}},
                             {"P.one", {"/project/build/t", "--gtest_filter=P.one"}, "t1", "", {}, {}},
                             {"Q.two", {"/project/build/t"}, "t2", "/w", {}, {{"expect", "fail"}}}};
  Case up, use;
  up.name = "up", use.name = "use";
  up.argv = use.argv = {"/bin/true"};
  up.order.fixtures_setup = {"db"};
  use.order.fixtures_required = {"db"};
  std::vector<Case> ctest = {up, use};
  Spec held = parse_spec(yaml, "spec.yaml", "/project/specs",
                         [&](const SuiteSource& s) { return s.kind == SuiteSource::ctest ? ctest : gtest; });
  std::vector<std::vector<TestSpec>> batches;
  auto streamed = parse_spec(
      yaml, "spec.yaml", "/project/specs",
      [&](const SuiteSource& s) -> std::vector<Case> {
        if (s.kind == SuiteSource::ctest) {
          EXPECT_FALSE(s.found);
          return ctest;
        }
        EXPECT_TRUE(s.found);
        for (const auto& c : gtest) {
          size_t before = batches.size();
          s.found(c);
          EXPECT_EQ(batches.size(), before + 1) << "handed on while its tool lists";
        }
        return {};
      },
      false, [&](std::vector<TestSpec>&& made) { batches.push_back(std::move(made)); });
  EXPECT_TRUE(streamed.tests.empty());
  std::vector<size_t> sizes;
  std::vector<TestSpec> all;
  for (auto& b : batches) {
    sizes.push_back(b.size());
    for (auto& t : b) all.push_back(t);
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{1, 1, 1, 1, 2}));
  ASSERT_EQ(all.size(), held.tests.size());
  for (size_t i = 0; i < all.size(); ++i) {
    const TestSpec &a = all[i], &b = held.tests[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.line, b.line);
    EXPECT_EQ(a.argv, b.argv);
    EXPECT_EQ(a.command, b.command);
    EXPECT_EQ(a.memory, b.memory);
    EXPECT_EQ(a.timeout, b.timeout);
    EXPECT_EQ(a.env, b.env);
    EXPECT_EQ(a.cwd, b.cwd);
    EXPECT_EQ(a.expect.describe(), b.expect.describe());
    EXPECT_EQ(a.origin, b.origin);
    EXPECT_EQ(a.order.brings, b.order.brings);
    EXPECT_EQ(a.order.after, b.order.after);
  }
  std::vector<std::string> names;
  for (const auto& t : all) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"plain", "g/P.one", "g/P.one#2", "g/Q.two", "c/up", "c/use"}));
  EXPECT_EQ(all[1].memory, 64 * MiB);
  EXPECT_EQ(all[1].env.at("A"), "b");
  EXPECT_EQ(all[1].env.at("GTEST_COLOR"), "no");
  EXPECT_EQ(all[3].expect.kind, Expectation::fail);

  // The selection over a batch is the plan's over the spec: a user brings
  // its fixture's setup.
  Selection only_use;
  only_use.filter = "c/use";
  EXPECT_EQ(Selector(only_use).pick(batches.back()), (std::vector<bool>{true, true}));
  std::vector<Spec> specs = {held};
  auto plan = make_plan(specs, only_use, "/run");
  ASSERT_EQ(plan.tests.size(), 2u);
  EXPECT_EQ(plan.tests[0].test->name, "c/up");

  // A case named like another test, found while its tool lists: the
  // spec's error, said once, where the suite is.
  try {
    parse_spec("suites:\n  - {name: g, gtest: ../build/t, memory: 1GiB}\n  - {name: g, gtest: ../build/t, memory: 1GiB}\n",
               "spec.yaml", "/project/specs",
               [&](const SuiteSource& s) -> std::vector<Case> {
                 s.found(gtest[0]);
                 return {};
               },
               false, [](std::vector<TestSpec>&&) {});
    ADD_FAILURE() << "a case named like a test was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "spec.yaml:3:5: the case 'g/P.one' is named like another test (line 2): rename the suite");
  }
}

}  // namespace
}  // namespace memrun

// Existing suites run case by case, each case in its own cgroup under its own
// limit, against the real kernel (host v1, and the v2 and systemd VMs): a
// GoogleTest binary, a pytest folder and a CTest build tree
// (tests/suites/).
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdlib>
#include <map>
#include <set>

#include "harness.h"
#include "runner/units.h"

namespace memrun::testing {
namespace {

class Suites : public MemrunTest {};

const std::string kExample = EXAMPLE_GTEST;
const std::string kPytestDir = std::string(SOURCE_DIR) + "/tests/suites/pytest";

std::map<std::string, std::string> outcomes(const RunOutput& run) {
  std::map<std::string, std::string> out;
  for (const auto& t : run.report["tests"]) out[t["name"]] = t["outcome"];
  return out;
}

// Debian's python3 and python3-pytest, which ./setup.sh test installs: the
// python3 on PATH may be another (pyenv) without pytest.
const std::string kPython = "/usr/bin/python3";
// pytest's output capture writes to an unlinked temporary file, which the
// VMs' scratch folders (9p, where TMPDIR points there) cannot truncate: its
// runs here get TMPDIR=/tmp.
//
// Empty when kPython has pytest; else what it said.
std::string pytest_missing() {
  auto r = run_program({"env", "TMPDIR=/tmp", kPython, "-m", "pytest", "--version"});
  return r.exit_code == 0 ? "" : "exit " + std::to_string(r.exit_code) + ": " + r.out + r.err;
}

TEST_F(Suites, GoogleTestCasesRunOneByOneUnderTheirOwnLimitsAtAnyJ) {
  std::string yaml = "suites:\n  - name: engine\n    gtest: " + kExample +
                     "\n    memory: 128MiB\n    cases:\n"
                     "      - {match: 'Big.*', memory: 64MiB, expect: oom}\n"
                     "      - {match: 'Sizes/*', memory: 48MiB}\n";
  std::map<std::string, std::string> first;
  for (const char* jobs : {"1", "4"}) {
    SCOPED_TRACE(std::string("-j ") + jobs);
    auto run = run_spec(dir, yaml, {"-j", jobs});
    EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
    auto got = outcomes(run);
    // Every case the binary lists, typed and parameterized ones under
    // their real names; the DISABLED_ one skipped as GoogleTest skips it.
    std::set<std::string> names;
    for (const auto& [name, outcome] : got) names.insert(name);
    EXPECT_EQ(names, (std::set<std::string>{"engine/Small.Fits", "engine/Big.LoadsEverything",
                                            "engine/Child.HoldsMemoryInAChild", "engine/Sizes/Touch.Mib/0",
                                            "engine/Sizes/Touch.Mib/1", "engine/Typed/0.Works",
                                            "engine/Typed/1.Works"}))
        << run.out;
    // The OOM-killed case is named exactly, and nobody else was touched.
    const auto& big = test_named(run, "engine/Big.LoadsEverything");
    EXPECT_EQ(big["outcome"], "oom") << big;
    EXPECT_TRUE(big["passed"]) << big;
    EXPECT_EQ(big["oom_kills"], 1) << big;
    EXPECT_EQ(big["limit_bytes"], 64u << 20);
    for (const auto& [name, outcome] : got) {
      if (name == "engine/Big.LoadsEverything") continue;
      EXPECT_EQ(outcome, "pass") << name << "\n" << run.out;
    }
    EXPECT_EQ(test_named(run, "engine/Sizes/Touch.Mib/1")["limit_bytes"], 48u << 20);
    EXPECT_EQ(test_named(run, "engine/Small.Fits")["limit_bytes"], 128u << 20);
    // The child's 40 MiB are the case's.
    EXPECT_GE(test_named(run, "engine/Child.HoldsMemoryInAChild")["peak_bytes"].get<uint64_t>(), 40u << 20);
    if (first.empty()) {
      first = got;
    } else {
      EXPECT_EQ(got, first) << "verdicts depend on -j";
    }
  }
}

TEST_F(Suites, ACaseIsTheSameTestAsItsCommandWrittenByHand) {
  auto run = run_spec(dir, "tests:\n"
                           "  - {name: hand-child, run: [" + kExample + ", --gtest_filter=Child.HoldsMemoryInAChild], memory: 128MiB}\n"
                           "  - {name: hand-big, run: [" + kExample + ", --gtest_filter=Big.LoadsEverything], memory: 64MiB, expect: oom}\n"
                           "suites:\n  - name: engine\n    gtest: " + kExample + "\n    memory: 128MiB\n"
                           "    cases: [{match: 'Big.*', memory: 64MiB, expect: oom}]\n");
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  for (auto [hand, suite] : {std::pair{"hand-child", "engine/Child.HoldsMemoryInAChild"},
                             std::pair{"hand-big", "engine/Big.LoadsEverything"}}) {
    const auto& h = test_named(run, hand);
    const auto& s = test_named(run, suite);
    EXPECT_EQ(h["outcome"], s["outcome"]) << hand;
    EXPECT_EQ(h["passed"], s["passed"]) << hand;
    EXPECT_EQ(h["oom_kills"], s["oom_kills"]) << hand;
    auto hp = h["peak_bytes"].get<int64_t>(), sp = s["peak_bytes"].get<int64_t>();
    EXPECT_LE(std::abs(hp - sp), int64_t{2} << 20) << hand << ": " << hp << " vs " << sp;
  }
}

TEST_F(Suites, PytestCasesTakeTheirLimitsFromRulesAndMarkers) {
  if (auto why = pytest_missing(); !why.empty())
    GTEST_SKIP() << kPython << " has no pytest (./setup.sh test installs python3-pytest): " << why;
  std::string spec = "suites:\n  - name: py\n    pytest: [" + kPytestDir + "]\n    cwd: " + kPytestDir +
                     "\n    python: " + kPython + "\n    env: {TMPDIR: /tmp}\n    memory: 256MiB\n    cases:\n"
                     "      - {match: '*test_loads_everything', memory: 512MiB}\n"
                     "      - {match: '*test_param*', min_headroom: 10%}\n";
  auto run = run_spec(dir, spec, {"-j", "2"});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  std::set<std::string> names;
  for (const auto& [name, outcome] : outcomes(run)) names.insert(name);
  EXPECT_EQ(names, (std::set<std::string>{"py/test_memory.py::test_small", "py/test_memory.py::test_loads_everything",
                                          "py/test_memory.py::test_param[4]", "py/test_memory.py::test_param[16]",
                                          "py/test_memory.py::test_child_holds_memory"}))
      << run.out;
  // The marker (64MiB, expect oom) wins over the rule's 512MiB.
  const auto& big = test_named(run, "py/test_memory.py::test_loads_everything");
  EXPECT_EQ(big["limit_bytes"], 64u << 20) << big;
  EXPECT_EQ(big["outcome"], "oom") << big;
  EXPECT_TRUE(big["passed"]) << big;
  EXPECT_GE(test_named(run, "py/test_memory.py::test_child_holds_memory")["peak_bytes"].get<uint64_t>(), 40u << 20);
  EXPECT_EQ(test_named(run, "py/test_memory.py::test_small")["outcome"], "pass");
  // `memrun list` says where each limit came from.
  auto list = run_memrun({"list", dir.path() + "/spec.yaml"});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("test_loads_everything  memory 64.0 MiB  expect oom  from suite py (line 2); rule "
                          "'*test_loads_everything' (line 9); marker"),
            std::string::npos)
      << list.out;
  // A collection that finds nothing is a clear error naming the suite.
  auto none = run_spec(dir, "suites:\n  - name: py\n    pytest: [" + kPytestDir + ", -k, nothing_matches]\n    cwd: " +
                                kPytestDir + "\n    python: " + kPython + "\n    env: {TMPDIR: /tmp}\n    memory: 64MiB\n");
  EXPECT_EQ(none.exit_code, 2) << none.out << none.err;
  EXPECT_NE(none.err.find("spec.yaml:2:5: suite 'py': pytest collected no tests"), std::string::npos) << none.err;
}

TEST_F(Suites, CtestTestsRunWithTheirEnvironmentDirectoryAndWillFail) {
  std::string build = dir.path() + "/ctest-build";
  auto configured = run_program({"cmake", "-S", std::string(SOURCE_DIR) + "/tests/suites/ctest", "-B", build,
                                 "-DEXAMPLE=" + kExample});
  ASSERT_EQ(configured.exit_code, 0) << configured.out << configured.err;
  auto run = run_spec(dir, "suites:\n  - name: cm\n    ctest: " + build +
                               "\n    memory: 128MiB\n    cases: [{match: big, memory: 64MiB, expect: oom}]\n");
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(outcomes(run), (std::map<std::string, std::string>{
                               {"cm/small", "pass"}, {"cm/big", "oom"}, {"cm/env", "pass"}, {"cm/fails-on-purpose", "fail"}}))
      << run.out;
  EXPECT_TRUE(test_named(run, "cm/fails-on-purpose")["passed"]) << "WILL_FAIL is expect: fail";
}

TEST_F(Suites, ABadSuiteIsAClearErrorBeforeAnythingRuns) {
  struct Case {
    std::string yaml, message;
  };
  for (const auto& c : std::vector<Case>{
           {"suites:\n  - {name: x, gtest: no-such-binary, memory: 64MiB}\n",
            "spec.yaml:2:5: suite 'x': gtest: " + dir.path() + "/no-such-binary is not an executable file"},
           {"suites:\n  - {name: x, gtest: " + kExample + ", ctest: ., memory: 64MiB}\n",
            "spec.yaml:2:5: suite 'x' must name exactly one source"},
           {"suites:\n  - {name: x, gtest: " + kExample + ", memory: 64MiB, cases: [{match: '*', memroy: 1GiB}]}\n",
            "unknown key 'memroy' in a rule of 'cases'; did you mean 'memory'?"},
           {"suites:\n  - {name: x, gtest: " + kExample + ", memory: 64MiB, cases: [{memory: 1GiB}]}\n",
            "this rule has no 'match'"},
           {"suites:\n  - {name: x, gtest: /bin/false, memory: 64MiB}\n",
            "suite 'x': /bin/false --gtest_list_tests exited with 1; is it a GoogleTest binary?"},
       }) {
    auto run = run_spec(dir, c.yaml);
    EXPECT_EQ(run.exit_code, 2) << c.yaml << run.out << run.err;
    EXPECT_NE(run.err.find(c.message), std::string::npos) << c.message << "\n" << run.err;
    EXPECT_TRUE(run.report.is_null() || run.report["tests"].empty()) << "a test ran";
  }
}

TEST_F(Suites, AListingThatBlowsUpIsOomKilledUnderTheSuitesLimit) {
  // A "GoogleTest binary" whose listing touches 200 MiB, as a collection
  // that imports a library which loads everything would: the kernel kills
  // it under the suite's 64 MiB, and memrun says so before any case runs.
  std::string lister = dir.write("lister.sh", "#!/bin/sh\nexec " + workload() + " --touch 200MiB --hold 60s\n");
  ASSERT_EQ(::chmod(lister.c_str(), 0755), 0);
  auto run = run_spec(dir, "suites:\n  - {name: big, gtest: lister.sh, memory: 64MiB}\n");
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_NE(run.err.find("spec.yaml:2:5: suite 'big': listing its cases with " + lister +
                         " was OOM-killed by the kernel under the suite's memory limit (64.0 MiB)"),
            std::string::npos)
      << run.err;
  EXPECT_TRUE(run.report.is_null() || run.report["tests"].empty()) << "a test ran";
  EXPECT_EQ(leftover_cgroups(), std::vector<std::string>{});
}

TEST_F(Suites, AListingThatFloodsItsOutputIsCutAndFailsWithExit2) {
  // A "GoogleTest binary" that prints 200 MB when asked for its list: memrun
  // reads none of it (it once took memrun to 1.1 GiB) and says so.
  std::string lister = dir.write("lister.sh", "#!/bin/sh\nhead -c 200000000 /dev/zero | tr '\\0' a\n");
  ASSERT_EQ(::chmod(lister.c_str(), 0755), 0);
  auto run = run_memrun({"list", dir.write("spec.yaml", "suites:\n  - {name: flood, gtest: lister.sh, memory: 512MiB}\n")});
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_NE(run.err.find("suite 'flood': listing its cases with " + lister + " printed 190.7 MiB, more than the 8.00 MiB"),
            std::string::npos)
      << run.err.substr(0, 2000);
  EXPECT_LT(run.err.size(), 8192u);
  EXPECT_EQ(leftover_cgroups(), std::vector<std::string>{});
}

}  // namespace
}  // namespace memrun::testing

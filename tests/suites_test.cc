// Existing suites run case by case, each case in its own cgroup under its own
// limit, against the real kernel (host v1, and the v2 and systemd VMs): a
// GoogleTest binary, a pytest folder and a CTest build tree
// (tests/suites/).
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <map>
#include <regex>
#include <set>

#include <pugixml.hpp>

#include "harness.h"
#include "lanes.h"
#include "runner/base/units.h"

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

// Discovery and the tools' verdicts are memrun's own: on the host only (what the kernel decides is labelled at its tests).
MEMRUN_LANES(Suites, "*", kHostLane);

// Each case under its own limit: proven in the v2 VM too.
MEMRUN_LANES(Suites, "GoogleTestCasesRunOneByOneUnderTheirOwnLimitsAtAnyJ", kHostLane | kV2Lane);
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
    // their real names; the DISABLED_ one never run, counted as disabled.
    std::set<std::string> names;
    for (const auto& [name, outcome] : got) names.insert(name);
    EXPECT_EQ(names, (std::set<std::string>{"engine/Small.Fits", "engine/Big.LoadsEverything",
                                            "engine/Child.HoldsMemoryInAChild", "engine/Sizes/Touch.Mib/0",
                                            "engine/Sizes/Touch.Mib/1", "engine/Typed/0.Works",
                                            "engine/Typed/1.Works", "engine/Small.DISABLED_NeverRuns"}))
        << run.out;
    EXPECT_TRUE(test_named(run, "engine/Small.DISABLED_NeverRuns")["disabled"]);
    EXPECT_EQ(run.report["summary"]["disabled"], 1);
    // The OOM-killed case is named exactly, and nobody else was touched.
    const auto& big = test_named(run, "engine/Big.LoadsEverything");
    EXPECT_EQ(big["outcome"], "oom") << big;
    EXPECT_TRUE(big["passed"]) << big;
    EXPECT_EQ(big["oom_kills"], 1) << big;
    EXPECT_EQ(big["limit_bytes"], 64u << 20);
    for (const auto& [name, outcome] : got) {
      if (name == "engine/Big.LoadsEverything" || name == "engine/Small.DISABLED_NeverRuns") continue;
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
  EXPECT_TRUE(std::regex_search(list.out, std::regex("test_loads_everything  +64\\.0 MiB  +oom  +suite py \\(line "
                                                      "2\\); rule '\\*test_loads_everything' \\(line 9\\); marker")))
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
                               {"cm/small", "pass"}, {"cm/big", "oom"}, {"cm/env", "pass"}, {"cm/fails-on-purpose", "pass"},
                               {"cm/off", "skipped"}}))
      << run.out;
  // WILL_FAIL: ctest passes a test that exits non-zero; DISABLED: never run.
  EXPECT_TRUE(test_named(run, "cm/fails-on-purpose")["passed"]);
  EXPECT_TRUE(test_named(run, "cm/off")["disabled"]);
}

// What a tool said of each case: "pass", "fail", "skipped" or "disabled".
using Verdicts = std::map<std::string, std::string>;

// memrun's verdicts in the tool's words, names without the suite's prefix.
Verdicts memrun_verdicts(const RunOutput& run, const std::string& suite) {
  Verdicts out;
  for (const auto& t : run.report["tests"]) {
    std::string name = t["name"];
    if (name.rfind(suite + "/", 0) != 0) continue;
    std::string v = t["outcome"] == "skipped" ? (t["disabled"].get<bool>() ? "disabled" : "skipped")
                                              : t["passed"].get<bool>() ? "pass" : "fail";
    out[name.substr(suite.size() + 1)] = v;
  }
  return out;
}

// Where two tools' verdicts differ, one line each.
std::string differences(const Verdicts& tool, const Verdicts& memrun) {
  std::string out;
  for (const auto& [name, v] : tool) {
    auto it = memrun.find(name);
    std::string m = it == memrun.end() ? "(absent)" : it->second;
    if (m != v) out += "  " + name + ": the tool " + v + ", memrun " + m + "\n";
  }
  for (const auto& [name, v] : memrun)
    if (!tool.count(name)) out += "  " + name + ": memrun " + v + ", unknown to the tool\n";
  return out;
}

const std::string kProject = std::string(SOURCE_DIR) + "/tests/suites/pytest-project";

// pytest's own verdict on each case of a run of pytest alone: a plugin that
// logs each report (a failed phase fails the case, pytest's "error" too; a
// skip, xfail included, skips it).
Verdicts pytest_alone(const Scratch& dir, const std::vector<std::string>& args, const std::string& cwd) {
  dir.write("outcome_log.py",
            "import json, os\n"
            "seen = {}\n"
            "def pytest_runtest_logreport(report):\n"
            "    v = 'fail' if report.failed else 'skipped' if report.skipped else 'pass'\n"
            "    if seen.get(report.nodeid) in (None, 'pass') or v == 'fail':\n"
            "        seen[report.nodeid] = v\n"
            "def pytest_collectreport(report):\n"  // a module skipped as pytest collected it
            "    if report.skipped and report.nodeid:\n"
            "        seen[report.nodeid] = 'skipped'\n"
            "def pytest_unconfigure(config):\n"
            "    json.dump(seen, open(os.environ['OUTCOME_LOG'], 'w'))\n");
  std::vector<std::string> argv = {"env", "TMPDIR=/tmp", "PYTHONPATH=" + dir.path(), "OUTCOME_LOG=" + dir.path() + "/alone.json",
                                   kPython, "-m", "pytest", "-p", "outcome_log", "-p", "no:cacheprovider"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = run_program(argv, cwd);
  EXPECT_EQ(r.exit_code, 1) << "pytest alone fails some cases on purpose\n" << r.out << r.err;
  std::ifstream in(dir.path() + "/alone.json");
  auto j = nlohmann::json::parse(in, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out << r.err;
  return j.is_discarded() ? Verdicts{} : j.get<Verdicts>();
}

std::string yaml_list(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) out += (out.empty() ? "" : ", ") + nlohmann::json(a).dump();
  return "[" + out + "]";
}

// pytest alone fails a run where every module is skipped as it is
// collected (an optional engine missing): "no tests collected", exit 5.
// So does memrun, saying so, never a run of nothing that passes.
TEST_F(Suites, ASuiteWhoseEveryModulePytestSkipsAsItCollectsItIsNoPass) {
  if (auto why = pytest_missing(); !why.empty())
    GTEST_SKIP() << kPython << " has no pytest (./setup.sh test installs python3-pytest): " << why;
  std::filesystem::create_directories(dir.path() + "/tests");
  dir.write("tests/test_engine.py", "import pytest\npytest.importorskip('no_such_engine')\ndef test_x():\n    pass\n");
  auto run = run_spec(dir, "suites:\n  - name: py\n    pytest: [tests]\n    cwd: " + dir.path() + "\n    python: " +
                               kPython + "\n    env: {TMPDIR: /tmp}\n    memory: 256MiB\n");
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_NE(run.err.find("pytest collected no tests"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("pytest skipped every one as it collected it"), std::string::npos) << run.err;
  auto alone = run_program({"env", "TMPDIR=/tmp", kPython, "-m", "pytest", "-p", "no:cacheprovider", "tests"}, dir.path());
  EXPECT_EQ(alone.exit_code, 5) << alone.out << alone.err;
}

// A GoogleTest case writes its results to the run's folder from inside its
// test, whose /dev/shm is its own: a run folder there is refused at once
// (exit 2), never a run of cases that all "fail" for want of results.
TEST_F(Suites, NoTestCanSayHowAnotherCaseEnded) {
  if (auto why = pytest_missing(); !why.empty())
    GTEST_SKIP() << kPython << " has no pytest (./setup.sh test installs python3-pytest): " << why;
  // Beside the cases (-j 2, listed first), a test rewrites every file it
  // can find in the run's folder (pytest's word, GoogleTest's XML without
  // its failures, the logs ctest's expressions read) and every descriptor
  // named memrun-results in /proc, until the last case has ended: no
  // case's verdict may change.
  std::string runs = dir.path() + "/runs";  // run_spec's
  std::string build = dir.path() + "/rules-build";
  auto configured = run_program({"cmake", "-S", std::string(SOURCE_DIR) + "/tests/suites/ctest-rules", "-B", build});
  ASSERT_EQ(configured.exit_code, 0) << configured.out << configured.err;
  std::string mark = dir.path() + "/last-case-ended";
  dir.write("forge.py",
            "import glob, os, re, time\n"
            "mark, runs, forged, start = os.environ['MARK'], os.environ['RUNS'], 0, time.time()\n"
            "def forge(path):\n"
            "    global forged\n"
            "    try:\n"
            "        with open(path) as f: text = f.read()\n"
            "        if '<' in text: text = re.sub(r'<failure.*?</failure>|<failure[^>]*/>', '', text, flags=re.S)\n"
            "        else: text = 'passed' if path.endswith('.outcome') else 'good\\n'\n"
            "        with open(path, 'w') as f: f.write(text)\n"
            "        forged += 1\n"
            "    except OSError:\n"
            "        pass\n"
            "ended = None\n"
            "while time.time() - start < 60 and (ended is None or time.time() - ended < 2):\n"
            "    if ended is None and os.path.exists(mark): ended = time.time()\n"
            "    for path in glob.glob(runs + '/**/*', recursive=True):\n"
            "        if 'forger' not in path and not path.endswith('.json') and os.path.isfile(path): forge(path)\n"
            "    for fd in glob.glob('/proc/[0-9]*/fd/*'):\n"
            "        try:\n"
            "            if 'memrun-results' in os.readlink(fd): forge(fd)\n"
            "        except OSError:\n"
            "            pass\n"
            "print('forged', forged, 'ended', ended is not None)\n");
  dir.write("test_victim.py",
            "import os, time\n"
            "def test_fails():\n    time.sleep(0.5)\n    assert False\n"
            "def test_last():\n    open(os.environ['MARK'], 'w').close()\n");
  auto run = run_spec(dir,
                      "tests:\n  - name: forger\n    run: [" + kPython + ", forge.py]\n    memory: 128MiB\n"
                      "    env: {MARK: " + mark + ", RUNS: " + runs + "}\n"
                      "suites:\n  - {name: p, gtest: " + std::string(PRINTING_GTEST) + ", memory: 64MiB}\n"
                      "  - {name: cm, ctest: " + build + ", memory: 64MiB}\n"
                      "  - name: py\n    pytest: [test_victim.py]\n    python: " + kPython + "\n"
                      "    env: {TMPDIR: /tmp, MARK: " + mark + "}\n    memory: 256MiB\n",
                      {"-j", "2"});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  const auto& forger = test_named(run, "forger");
  std::string said = read_text(forger["stdout"].get<std::string>());
  EXPECT_EQ(forger["outcome"], "pass") << forger;
  EXPECT_NE(said.find("ended True"), std::string::npos) << said;  // it was there until the last case ended
  EXPECT_EQ(test_named(run, "p/Printing.SaysOkThenExits")["outcome"], "fail") << run.out;
  EXPECT_EQ(test_named(run, "p/Printing.SaysSkippedThenFails")["outcome"], "fail") << run.out;
  EXPECT_EQ(test_named(run, "p/Printing.SaysFailedThenPasses")["outcome"], "pass") << run.out;
  EXPECT_EQ(test_named(run, "py/test_victim.py::test_fails")["outcome"], "fail") << run.out;
  for (const char* name : {"cm/pass-re-missing", "cm/fail-re-stdout", "cm/fail-re-stderr"})
    EXPECT_EQ(test_named(run, name)["outcome"], "fail") << name << "\n" << run.out;
  EXPECT_EQ(test_named(run, "py/test_victim.py::test_last")["outcome"], "pass") << run.out;
  // What a case writes there is no memory it left behind.
  EXPECT_EQ(run.out.find("in files of a shared tmpfs"), std::string::npos) << run.out;
  // Nor are they files of the run's folder: one under /dev/shm, which each
  // test has its own of, serves as well.
  std::string shm = "/dev/shm/memrun-suites-test-" + std::to_string(::getpid());
  auto in_shm = run_memrun({dir.path() + "/spec.yaml", "--run-dir", shm, "--filter", "SaysFailedThenPasses|test_fails"});
  std::filesystem::remove_all(shm);
  EXPECT_EQ(in_shm.exit_code, 1) << in_shm.out << in_shm.err;
  EXPECT_NE(in_shm.out.find("1 passed, 1 failed"), std::string::npos) << in_shm.out;
}

TEST_F(Suites, APytestCaseThatEndsItsProcessBeforePytestSaysIsNeverAPassOrASkip) {
  if (auto why = pytest_missing(); !why.empty())
    GTEST_SKIP() << kPython << " has no pytest (./setup.sh test installs python3-pytest): " << why;
  dir.write("test_ends.py",
            "import os, pytest\n"
            "def test_exits_77():\n    os._exit(77)\n"
            "def test_exits_0_after_a_failure():\n    try:\n        assert 1 == 2\n    finally:\n        os._exit(0)\n"
            "def test_pytest_exit_0():\n    pytest.exit('bye', returncode=0)\n"
            "def test_passes():\n    pass\n"
            "def test_skips():\n    pytest.skip('not here')\n");
  auto run = run_spec(dir, "suites:\n  - name: py\n    pytest: [test_ends.py]\n    python: " + kPython +
                               "\n    env: {TMPDIR: /tmp}\n    memory: 256MiB\n");
  ASSERT_EQ(run.exit_code, 1) << run.out << run.err;
  auto verdicts = memrun_verdicts(run, "py");
  EXPECT_EQ(verdicts["test_ends.py::test_exits_77"], "fail") << run.out;
  EXPECT_EQ(verdicts["test_ends.py::test_exits_0_after_a_failure"], "fail") << run.out;
  EXPECT_EQ(verdicts["test_ends.py::test_pytest_exit_0"], "fail") << run.out;
  EXPECT_EQ(verdicts["test_ends.py::test_passes"], "pass") << run.out;
  EXPECT_EQ(verdicts["test_ends.py::test_skips"], "skipped") << run.out;
  const auto& ended = test_named(run, "py/test_ends.py::test_exits_77");
  EXPECT_NE(ended["reason"].get<std::string>().find("pytest never said how the case ended"), std::string::npos)
      << ended["reason"];
  EXPECT_TRUE(ended["tool_said"].is_null()) << ended;
  EXPECT_EQ(test_named(run, "py/test_ends.py::test_passes")["tool_said"], "passed");
  // A relative --run-dir (the default, .memrun) and a suite in a folder of
  // its own: the case, run from that folder, still finds where to write.
  std::filesystem::create_directory(dir.path() + "/sub");
  dir.write("sub/test_one.py", "def test_one():\n    pass\n");
  std::string spec = dir.write("rel.yaml", "suites:\n  - name: rel\n    pytest: [test_one.py]\n    cwd: sub\n    python: " +
                                               kPython + "\n    env: {TMPDIR: /tmp}\n    memory: 256MiB\n");
  auto rel = run_memrun({spec, "--run-dir", "rel-runs"}, dir.path());
  EXPECT_EQ(rel.exit_code, 0) << rel.out << rel.err;
}

TEST_F(Suites, PytestCasesGetPytestsOwnVerdictsWithEveryArgumentOfTheSuite) {
  if (auto why = pytest_missing(); !why.empty())
    GTEST_SKIP() << kPython << " has no pytest (./setup.sh test installs python3-pytest): " << why;
  // Below the rootdir (pytest.ini is one folder up), with a -p plugin, -W
  // error, an -o ini value and doctests; and beside it, with --runxfail,
  // -c, --rootdir and --import-mode.
  std::string below = kProject + "/tests", beside = std::string(SOURCE_DIR) + "/tests/suites/pytest";
  std::vector<std::string> args = {"-p", "project_plugin", "-W", "error", "-o", "python_files=test_*.py check_*.py",
                                   "--doctest-modules", "../pkg", "."};
  std::vector<std::string> runxfail = {"--runxfail", "-o", "python_files=test_*.py check_*.py",
                                       "-c", "../pytest-project/pytest.ini", "--rootdir", "../pytest-project",
                                       "--import-mode=importlib", "../pytest-project/tests"};
  auto suite = [&](const std::string& name, const std::vector<std::string>& a, const std::string& cwd) {
    return "  - name: " + name + "\n    pytest: " + yaml_list(a) + "\n    cwd: " + cwd + "\n    python: " + kPython +
           "\n    env: {TMPDIR: /tmp}\n    memory: 256MiB\n";
  };
  auto run = run_spec(dir, "suites:\n" + suite("py", args, below) + suite("rx", runxfail, beside),
                      {"-j", "2", "--junit", dir.path() + "/junit.xml"});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  // Node ids are the rootdir's, as pytest names them.
  auto alone = pytest_alone(dir, args, below);
  auto py = memrun_verdicts(run, "py");
  EXPECT_EQ(differences(alone, py), "") << run.out;
  auto alone_rx = pytest_alone(dir, runxfail, beside);
  EXPECT_EQ(differences(alone_rx, memrun_verdicts(run, "rx")), "") << run.out;
  // What each argument decides, said outright: not only "the same as".
  Verdicts want = {{"pkg/numbers.py::pkg.numbers.double", "pass"},       // --doctest-modules
                   {"pkg/numbers.py::pkg.numbers.skipped", "skipped"},   // a doctest's +SKIP
                   {"pkg/numbers.py::pkg.numbers.wrong", "fail"},
                   {"tests/test_outcomes.py::test_warns", "fail"},       // -W error
                   {"tests/test_outcomes.py::test_plugin_fixture", "pass"},  // -p
                   {"tests/test_outcomes.py::test_ini_option", "pass"},  // -o
                   {"tests/test_outcomes.py::test_skips", "skipped"},
                   {"tests/test_outcomes.py::test_xfails", "skipped"},
                   {"tests/test_outcomes.py::test_xpasses", "pass"},
                   {"tests/test_outcomes.py::test_xpasses_strict", "fail"},
                   {"tests/test_outcomes.py::test_error", "fail"},       // a fixture's error
                   {"tests/test_needs_a_missing_module.py", "skipped"},  // importorskip as pytest collects it
                   {"tests/test_outcomes.py::test_awkward_ids[it's]", "pass"}};
  for (const auto& [name, v] : want) EXPECT_EQ(py[name], v) << name;
  EXPECT_EQ(memrun_verdicts(run, "rx")["tests/test_outcomes.py::test_xfails"], "fail") << "--runxfail";
  EXPECT_EQ(test_named(run, "py/tests/test_outcomes.py::test_skips")["outcome"], "skipped");
  EXPECT_NE(test_named(run, "py/tests/test_needs_a_missing_module.py")["reason"].get<std::string>().find(
                "pytest skipped it as it collected it: could not import 'no_such_engine_for_memrun'"),
            std::string::npos)
      << run.out;
  // Skipped in every output: the summary, the console, JUnit.
  size_t skipped = 0;
  for (const auto& [name, v] : py) skipped += v == "skipped";
  for (const auto& [name, v] : memrun_verdicts(run, "rx")) skipped += v == "skipped";
  EXPECT_EQ(run.report["summary"]["skipped"], skipped);
  EXPECT_NE(run.out.find("SKIP  py/tests/test_outcomes.py::test_skips"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find(std::to_string(skipped) + " skipped"), std::string::npos) << run.out;
  std::ifstream in(dir.path() + "/junit.xml");
  std::string xml((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(xml.find("skipped=\"" + std::to_string(skipped) + "\""), std::string::npos) << xml.substr(0, 400);
  // Each case's command, given to a shell in the suite's folder, reruns
  // that case alone with the same verdict.
  for (const std::string name : {"tests/test_outcomes.py::test_awkward_ids[it's]", "pkg/numbers.py::pkg.numbers.wrong",
                                 "tests/test_outcomes.py::test_warns", "tests/test_outcomes.py::test_skips"}) {
    std::string command = test_named(run, "py/" + name)["command"];
    auto again = run_program({"env", "TMPDIR=/tmp", "sh", "-c", command}, below);
    EXPECT_EQ(again.exit_code, py[name] == "fail" ? 1 : 0) << command << "\n" << again.out << again.err;
    EXPECT_NE(again.out.find(py[name] == "fail" ? "1 failed" : py[name] == "pass" ? "1 passed" : "1 skipped"),
              std::string::npos)
        << command << "\n" << again.out;
  }
}

TEST_F(Suites, AMissingModuleIsNamed) {
  if (auto why = pytest_missing(); !why.empty())
    GTEST_SKIP() << kPython << " has no pytest: " << why;
  auto run = run_spec(dir, "suites:\n  - name: py\n    pytest: [-p, no_such_plugin_module, " + kProject +
                               "/tests]\n    python: " + kPython + "\n    env: {TMPDIR: /tmp}\n    memory: 256MiB\n");
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_NE(run.err.find("cannot import the module 'no_such_plugin_module'"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("is pytest installed"), std::string::npos) << run.err;
}

// ctest's own verdicts, from its console: "Passed", "***Skipped",
// "***Not Run (Disabled)"; anything else (Failed, Exception, Timeout, Not
// Run) fails.
Verdicts ctest_alone(const std::string& build) {
  auto r = run_program({"ctest", "--test-dir", build, "-j", "2"});
  EXPECT_NE(r.exit_code, 0) << "some tests fail on purpose\n" << r.out;
  Verdicts out;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    auto at = line.find(": ");
    if (line.find("Test ") == std::string::npos || line.find(" Test ") == std::string::npos || at == std::string::npos)
      continue;
    std::string rest = line.substr(at + 2);
    std::string name = rest.substr(0, rest.find(' '));
    out[name] = rest.find(" Passed ") != std::string::npos                ? "pass"
                : rest.find("Not Run (Disabled)") != std::string::npos   ? "disabled"
                : rest.find("***Skipped") != std::string::npos           ? "skipped"
                                                                         : "fail";
  }
  return out;
}

TEST_F(Suites, CtestTestsGetCtestsOwnVerdictsAndAnUnbuiltOneIsNotRunAlone) {
  std::string build = dir.path() + "/rules-build";
  auto configured = run_program({"cmake", "-S", std::string(SOURCE_DIR) + "/tests/suites/ctest-rules", "-B", build});
  ASSERT_EQ(configured.exit_code, 0) << configured.out << configured.err;
  auto alone = ctest_alone(build);
  ASSERT_EQ(alone.size(), 23u) << "every test of the tree";
  auto run = run_spec(dir, "suites:\n  - {name: cm, ctest: " + build + ", memory: 64MiB}\n", {"-j", "2"});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_EQ(differences(alone, memrun_verdicts(run, "cm")), "") << run.out;
  // Said outright, each property's verdict.
  Verdicts want = {{"will-fail-exits-1", "pass"}, {"will-fail-signal", "fail"}, {"skip-code", "skipped"},
                   {"pass-re-found", "pass"},     {"pass-re-missing", "fail"},  {"fail-re-stderr", "fail"},
                   {"skip-re", "skipped"},        {"timeout", "fail"},          {"in-time", "pass"},
                   {"env", "pass"},               {"workdir", "pass"},          {"disabled", "disabled"},
                   {"not-built", "fail"}};
  auto got = memrun_verdicts(run, "cm");
  for (const auto& [name, v] : want) EXPECT_EQ(got[name], v) << name;
  // The unbuilt test is not run, and said so; the others ran.
  const auto& unbuilt = test_named(run, "cm/not-built");
  EXPECT_EQ(unbuilt["outcome"], "error");
  EXPECT_NE(unbuilt["reason"].get<std::string>().find("not run: ctest finds no executable"), std::string::npos);
  EXPECT_EQ(test_named(run, "cm/timeout")["outcome"], "timeout");
  EXPECT_EQ(run.report["summary"]["disabled"], 1);
  EXPECT_NE(run.out.find("1 disabled"), std::string::npos) << run.out;
}

// The order of tests/suites/ctest-order's tests holds as ctest keeps it,
// at -j 2: each of its tests passes only in its turn (a fixture's setup
// first, its cleanup last; DEPENDS; one holder of a lock at a time; a
// serial test alone), and a fixture whose setup failed is not used.
TEST_F(Suites, CtestsOrderHoldsFixturesDependsLocksAndSerialTestsAsInCtest) {
  std::string build = dir.path() + "/order-build", state = build + "/state";
  auto configured = run_program({"cmake", "-S", std::string(SOURCE_DIR) + "/tests/suites/ctest-order", "-B", build});
  ASSERT_EQ(configured.exit_code, 0) << configured.out << configured.err;
  auto fresh = [&] {  // what a run of the tree left (a DEPENDS' mark)
    std::filesystem::remove_all(state);
    std::filesystem::create_directories(state);
  };
  auto alone = ctest_alone(build);
  ASSERT_EQ(alone.size(), 19u) << "every test of the tree";
  fresh();
  std::string spec = "suites:\n  - {name: ord, ctest: " + build + ", memory: 64MiB}\n";
  auto run = run_spec(dir, spec, {"-j", "2"});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_EQ(differences(alone, memrun_verdicts(run, "ord")), "") << run.out;
  auto got = memrun_verdicts(run, "ord");
  for (const char* name : {"db-up", "db-use-1", "db-use-2", "db-down", "broken-down", "skipped-use", "second", "lock-a",
                           "lock-b", "lock-c", "alone", "wide"})
    EXPECT_EQ(got[name], "pass") << name << "\n" << run.out;
  EXPECT_EQ(got["broken-use"], "fail");
  EXPECT_NE(test_named(run, "ord/broken-use")["reason"].get<std::string>().find(
                "not run: the fixture setup test 'ord/broken-up' failed"),
            std::string::npos)
      << run.out;

  // A selection keeps a fixture's setup and cleanup, as ctest -R does.
  fresh();
  auto one = run_spec(dir, spec, {"--filter", "db-use-1"});
  EXPECT_EQ(one.exit_code, 0) << one.out << one.err;
  EXPECT_EQ(memrun_verdicts(one, "ord"), (Verdicts{{"db-up", "pass"}, {"db-use-1", "pass"}, {"db-down", "pass"}}))
      << one.out;

  // ctest's LABELS are tags: --tag LABEL runs what ctest -L LABEL runs.
  fresh();
  auto labelled = run_spec(dir, spec, {"-j", "2", "--tag", "locks"});
  EXPECT_EQ(labelled.exit_code, 0) << labelled.out << labelled.err;
  EXPECT_EQ(memrun_verdicts(labelled, "ord"), (Verdicts{{"lock-a", "pass"}, {"lock-b", "pass"}, {"lock-c", "pass"}}))
      << labelled.out;

  // Shards: every test in exactly one, a fixture's tests in the same one.
  Verdicts all;
  std::map<std::string, int> shard_of;
  for (int k = 1; k <= 2; ++k) {
    fresh();
    auto part = run_spec(dir, spec, {"-j", "2", "--shard", std::to_string(k) + "/2"});
    for (const auto& [name, v] : memrun_verdicts(part, "ord")) {
      EXPECT_TRUE(all.emplace(name, v).second) << name << " ran in two shards";
      shard_of[name] = k;
    }
  }
  EXPECT_EQ(all.size(), alone.size());
  for (const char* name : {"db-use-1", "db-use-2", "db-down"}) EXPECT_EQ(shard_of[name], shard_of["db-up"]) << name;
  for (const char* name : {"db-up", "db-use-1", "db-use-2", "db-down"}) EXPECT_EQ(all[name], "pass") << name;
}

// A googletest test program of googletest's own, built by tests/CMakeLists.txt.
std::string googletest_program(const std::string& name) { return std::string(GOOGLETEST_PROGRAMS) + "/" + name; }

// The program's own verdict on each case of one run of it, from its XML
// output (its JSON is not valid JSON after a failure outside every test);
// a name listed twice is NAME, then NAME#2, as memrun names them. The
// pseudo-case googletest adds for failures outside every test is no case.
Verdicts gtest_alone(const Scratch& dir, const std::string& program, size_t* disabled) {
  std::string xml = dir.path() + "/" + std::filesystem::path(program).filename().string() + ".xml";
  run_program({program, "--gtest_output=xml:" + xml});
  pugi::xml_document doc;
  EXPECT_TRUE(doc.load_file(xml.c_str())) << program;
  *disabled = doc.child("testsuites").attribute("disabled").as_ullong();
  Verdicts out;
  std::map<std::string, int> seen;
  for (auto t : doc.select_nodes("//testcase")) {
    auto c = t.node();
    std::string suite = c.attribute("classname").as_string();
    if (suite.empty() || suite == "NonTestSuiteFailure") continue;
    std::string name = suite + "." + c.attribute("name").as_string();
    if (int n = ++seen[name]; n > 1) name += "#" + std::to_string(n);
    out[name] = std::string(c.attribute("status").as_string()) == "notrun" ? "disabled"
                : c.child("failure")                                     ? "fail"
                : std::string(c.attribute("result").as_string()) == "skipped" ? "skipped"
                                                                              : "pass";
  }
  return out;
}

TEST_F(Suites, AGoogleTestCaseIsJudgedByTheProgramsResultsNotByLinesItPrints) {
  // Each case prints one of GoogleTest's result lines about itself: "OK"
  // then exit(1) (GoogleTest never finished it), "SKIPPED" then a failure,
  // "FAILED" then a pass.
  auto run = run_spec(dir, "suites:\n  - {name: p, gtest: " + std::string(PRINTING_GTEST) + ", memory: 64MiB}\n");
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  const auto& exits = test_named(run, "p/Printing.SaysOkThenExits");
  EXPECT_EQ(exits["outcome"], "fail") << exits;
  EXPECT_NE(exits["reason"].get<std::string>().find("GoogleTest never said how the case ended"), std::string::npos) << exits;
  EXPECT_EQ(test_named(run, "p/Printing.SaysSkippedThenFails")["outcome"], "fail") << run.out;
  EXPECT_EQ(test_named(run, "p/Printing.SaysFailedThenPasses")["outcome"], "pass") << run.out;
  EXPECT_EQ(test_named(run, "p/Printing.GrößePasst")["outcome"], "pass") << run.out;
  // Results another process of the case wrote of another case are not its.
  EXPECT_EQ(test_named(run, "p/Printing.RunsAnotherCaseThenExits")["outcome"], "fail") << run.out;
  // Its results reach memrun though the case closed its descriptors and
  // opened a file read-only where they were, which stays as it was.
  std::string data = dir.write("data.txt", "the user's data\n");
  auto closes = run_spec(dir, "suites:\n  - {name: p, gtest: " + std::string(PRINTING_GTEST) +
                                  ", memory: 64MiB, env: {MEMRUN_READ_ONLY: " + data + "}}\n",
                         {"--filter", "ClosesItsDescriptors"});
  EXPECT_EQ(closes.exit_code, 0) << closes.out << closes.err;
  EXPECT_EQ(test_named(closes, "p/Printing.ClosesItsDescriptorsThenPasses")["outcome"], "pass") << closes.out;
  EXPECT_EQ(read_text(data), "the user's data\n");
  auto unsealed = run_spec(dir, "suites:\n  - {name: p, gtest: " + std::string(PRINTING_GTEST) +
                                    ", memory: 64MiB, env: {MEMRUN_READ_ONLY: " + data + "}}\n",
                           {"--filter", "ClosesItsDescriptors", "--host-cgroups"});
  EXPECT_EQ(unsealed.exit_code, 0) << unsealed.out << unsealed.err;
  EXPECT_EQ(read_text(data), "the user's data\n");
  // A global environment that skips the program: GoogleTest says PASSED
  // and lists the case as run, never started (its start time the epoch).
  auto skipped = run_spec(dir, "suites:\n  - {name: p, gtest: " + std::string(PRINTING_GTEST) +
                                   ", memory: 64MiB, env: {MEMRUN_SKIP_EVERYTHING: '1'}}\n",
                          {"--filter", "SaysFailedThenPasses"});
  const auto& never = test_named(skipped, "p/Printing.SaysFailedThenPasses");
  EXPECT_EQ(never["outcome"], "skipped") << never;
  EXPECT_NE(never["reason"].get<std::string>().find("GoogleTest never started it"), std::string::npos) << never;
}

TEST_F(Suites, GoogletestsOwnProgramsGetTheirOwnVerdictsCaseByCase) {
  std::vector<std::string> programs = {"googletest-output-test_", "googletest-filter-unittest_", "gtest_skip_test"};
  for (const auto& p : programs)
    ASSERT_EQ(::access(googletest_program(p).c_str(), X_OK), 0)
        << googletest_program(p) << ": not built (libgtest-dev ships googletest's source in /usr/src/googletest)";
  std::string yaml = "suites:\n";
  for (const auto& p : programs) yaml += "  - {name: " + p + ", gtest: " + googletest_program(p) + ", memory: 64MiB}\n";
  auto run = run_spec(dir, yaml, {"-j", "2", "--junit", dir.path() + "/junit.xml"});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  size_t disabled_total = 0;
  for (const auto& p : programs) {
    SCOPED_TRACE(p);
    size_t disabled = 0;
    auto alone = gtest_alone(dir, googletest_program(p), &disabled);
    disabled_total += disabled;
    EXPECT_GT(alone.size(), 1u);
    EXPECT_EQ(differences(alone, memrun_verdicts(run, p)), "") << run.out;
  }
  // The name listed twice: both run, each alone; the second fails as
  // googletest fails it (two fixtures of one name).
  auto out = memrun_verdicts(run, "googletest-output-test_");
  EXPECT_EQ(out["MixedUpTestSuiteWithSameTestNameTest.TheSecondTestWithThisNameShouldFail"], "pass");
  EXPECT_EQ(out["MixedUpTestSuiteWithSameTestNameTest.TheSecondTestWithThisNameShouldFail#2"], "fail");
  EXPECT_EQ(memrun_verdicts(run, "gtest_skip_test")["SkipTest.DoesSkip"], "skipped");
  // Disabled cases counted: the report, the console, JUnit.
  EXPECT_GT(disabled_total, 0u);
  EXPECT_EQ(run.report["summary"]["disabled"], disabled_total);
  EXPECT_NE(run.out.find(std::to_string(disabled_total) + " disabled"), std::string::npos) << run.out;
  std::ifstream in(dir.path() + "/junit.xml");
  std::string xml((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(xml.find("disabled=\"" + std::to_string(disabled_total) + "\""), std::string::npos) << xml.substr(0, 400);
  EXPECT_EQ(run_program({"xmllint", "--noout", "--schema", std::string(SOURCE_DIR) + "/tests/junit.xsd",
                         dir.path() + "/junit.xml"}).exit_code, 0);

  // A --filter aimed elsewhere runs, the name listed twice notwithstanding;
  // `exclude:` leaves cases out.
  auto skip_only = run_spec(dir, yaml, {"--filter", "^gtest_skip_test/"});
  EXPECT_EQ(skip_only.exit_code, 0) << skip_only.out << skip_only.err;
  EXPECT_EQ(skip_only.report["summary"]["skipped"], skip_only.report["summary"]["total"]);
  auto excluded = run_spec(dir, "suites:\n  - {name: out, gtest: " + googletest_program("googletest-output-test_") +
                                    ", memory: 64MiB, exclude: ['MixedUp*', '*Failure*', '*Death*']}\n",
                           {"--filter", "PassingTest"});
  EXPECT_EQ(excluded.exit_code, 0) << excluded.out << excluded.err;
  for (const auto& t : excluded.report["tests"]) EXPECT_EQ(t["name"].get<std::string>().find("MixedUp"), std::string::npos);
}

TEST_F(Suites, ANameThatIsNoTextRunsUnderAnEscapedName) {
  // A "GoogleTest binary" listing names with an ESC and a byte that is no
  // UTF-8: each case runs (under its real name) and is reported as
  // NAME\xNN; the report and JUnit stay readable. Its results name the one
  // case that ran as XML can hold it (googletest drops what XML cannot).
  std::string lister = dir.write("odd.sh",
                                 "#!/bin/sh\ncase \"$1\" in\n"
                                 "--gtest_list_tests) printf 'Odd.\\n  Esc\\033Name\\n  Bad\\377Byte\\n  Fine\\n';;\n"
                                 "--gtest_filter=*) n=$(printf '%s' \"${1#--gtest_filter=Odd.}\" | tr -d '\\1-\\10\\13\\14\\16-\\37')\n"
                                 "  printf '<testsuites><testsuite name=\"Odd\"><testcase "
                                 "classname=\"Odd\" name=\"%s\" status=\"run\"/></testsuite></testsuites>' \"$n\" "
                                 "> \"${GTEST_OUTPUT#xml:}\";;\n"
                                 "esac\n");
  ASSERT_EQ(::chmod(lister.c_str(), 0755), 0);
  auto run = run_spec(dir, "suites:\n  - {name: odd, gtest: odd.sh, memory: 64MiB}\n",
                      {"--junit", dir.path() + "/junit.xml"});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(memrun_verdicts(run, "odd"), (Verdicts{{"Odd.Esc\\x1bName", "pass"}, {"Odd.Bad\\xffByte", "pass"},
                                                  {"Odd.Fine", "pass"}}))
      << run.out;
  EXPECT_EQ(run.out.find('\033'), std::string::npos);
  EXPECT_EQ(run_program({"xmllint", "--noout", dir.path() + "/junit.xml"}).exit_code, 0);
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

// A listing's OOM kill under the suite's limit: proven in the v2 VM too.
MEMRUN_LANES(Suites, "AListingThatBlowsUpIsOomKilledUnderTheSuitesLimit", kHostLane | kV2Lane);
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
  EXPECT_NE(run.err.find("suite 'flood': listing its cases with " + lister + " printed 190.7 MiB, more than the 128.0 MiB"),
            std::string::npos)
      << run.err.substr(0, 2000);
  EXPECT_LT(run.err.size(), 8192u);
  EXPECT_EQ(leftover_cgroups(), std::vector<std::string>{});
}

}  // namespace
}  // namespace memrun::testing

// explain: a test that failed on memory runs once more under an allocation
// profiler (memray for Python, heaptrack for native programs), and its
// record names where the memory went. Real kernel, real profilers; each
// assertion is one the allocations guarantee (names, lines, bytes the test
// allocated), never a figure page cache can move.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "harness.h"

namespace memrun::testing {
namespace {

using Explain = MemrunTest;
using nlohmann::json;

constexpr uint64_t kMiB = 1 << 20;

// The Python of specs/python/engines.lock (numpy, pytest and memray, pinned),
// which ./setup.sh test makes.
const std::string kPython = std::string(SOURCE_DIR) + "/.venv/engines/bin/python";

bool have_memray(std::string* why) {
  if (::access(kPython.c_str(), X_OK) != 0) {
    *why = kPython + " is missing (./setup.sh test makes it)";
    return false;
  }
  auto r = run_program({kPython, "-c", "import memray, numpy, pytest"});
  if (r.exit_code != 0) *why = kPython + " lacks memray, numpy or pytest: " + r.err;
  return r.exit_code == 0;
}

bool have_heaptrack() {
  return ::access("/usr/bin/heaptrack", X_OK) == 0 && ::access("/usr/bin/heaptrack_print", X_OK) == 0;
}

// The frame a site is shown by, and the caller the outputs show with it.
const json& where_of(const json& site) { return site["stack"][site["where"].get<size_t>()]; }

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The explanation's site whose shown frame is `function` in a file ending
// in `file`; null when none is.
const json* site_at(const json& e, const std::string& function, const std::string& file) {
  for (const auto& s : e["sites"]) {
    const json& f = where_of(s);
    if (f["function"] == function && ends_with(f["file"].get<std::string>(), file)) return &s;
  }
  return nullptr;
}

TEST_F(Explain, APytestCaseKilledByItsLimitNamesTheHelpersLineAndTheTestLineThatCalledIt) {
  std::string why;
  if (!have_memray(&why)) GTEST_SKIP() << why;
  dir.write("test_alloc.py",
            "import numpy as np\n"
            "\n"
            "\n"
            "def helper():\n"
            "    return np.ones(40 * 1024 * 1024 // 8)\n"  // line 5
            "\n"
            "\n"
            "def test_three_blocks():\n"
            "    blocks = [helper(), helper(), helper()]\n"  // line 9
            "    assert len(blocks) == 3\n");
  auto run = run_spec(dir,
                      "suites:\n  - name: py\n    pytest: [test_alloc.py]\n    cwd: " + dir.path() +
                          "\n    python: " + kPython + "\n    env: {TMPDIR: /tmp}\n    memory: 96MiB\n"
                          "    explain: on-failure\n",
                      {"--markdown", dir.path() + "/r.md", "--junit", dir.path() + "/r.xml"});
  ASSERT_EQ(run.exit_code, 1) << run.out << run.err;
  const json& t = test_named(run, "py/test_alloc.py::test_three_blocks");
  // The verdict is the first run's: explaining it changed nothing.
  EXPECT_EQ(t["outcome"], "oom");
  EXPECT_FALSE(t["passed"].get<bool>());
  const json& e = t["explanation"];
  ASSERT_EQ(e["status"], "explained") << e.dump(2);
  EXPECT_EQ(e["why"], "oom");
  EXPECT_TRUE(e["second_run"].get<bool>());
  EXPECT_EQ(e["profiler"].get<std::string>().rfind("memray ", 0), 0u) << e["profiler"];
  // Three blocks of 40 MiB held at once at the profiler's peak: the run
  // explained is killed at 96 MiB, the profiled one has room for them.
  const json* s = site_at(e, "helper", "test_alloc.py");
  ASSERT_NE(s, nullptr) << e.dump(2);
  EXPECT_EQ(where_of(*s)["line"], 5);
  EXPECT_GE((*s)["bytes"].get<uint64_t>(), 80 * kMiB);
  EXPECT_LE((*s)["bytes"].get<uint64_t>(), 125 * kMiB);
  EXPECT_EQ(e["sites"][0], *s) << "the largest site is the helper's";
  // The test's line that called it is on the stack, outside the helper.
  bool caller = false;
  for (const auto& f : (*s)["stack"])
    caller = caller || (ends_with(f["file"].get<std::string>(), "test_alloc.py") && f["line"] == 9);
  EXPECT_TRUE(caller) << (*s)["stack"].dump(2);
  // Every output says it.
  EXPECT_NE(run.out.find("helper (" + dir.path() + "/test_alloc.py:5)"), std::string::npos) << run.out;
  std::ifstream md(dir.path() + "/r.md"), xml(dir.path() + "/r.xml");
  std::string markdown((std::istreambuf_iterator<char>(md)), {}), junit((std::istreambuf_iterator<char>(xml)), {});
  EXPECT_NE(markdown.find("<details><summary>where the memory of"), std::string::npos) << markdown;
  EXPECT_NE(markdown.find("test&#95;alloc&#46;py&#58;5"), std::string::npos) << markdown;
  EXPECT_NE(junit.find("test_alloc.py:5"), std::string::npos) << junit;
}

TEST_F(Explain, ANativeProgramKilledByItsLimitNamesTheFunctionThatAllocatedMostWithItsBytes) {
  if (!have_heaptrack()) GTEST_SKIP() << "heaptrack is not installed (./setup.sh test installs it)";
  auto run = run_spec(dir,
                      "tests:\n  - name: two-sites\n    run: [" + workload() +
                          ", --heap, \"10MiB,200MiB\"]\n    memory: 128MiB\n    explain: on-failure\n");
  ASSERT_EQ(run.exit_code, 1) << run.out << run.err;
  const json& t = test_named(run, "two-sites");
  EXPECT_EQ(t["outcome"], "oom");
  const json& e = t["explanation"];
  ASSERT_EQ(e["status"], "explained") << e.dump(2);
  EXPECT_EQ(e["profiler"].get<std::string>().rfind("heaptrack", 0), 0u) << e["profiler"];
  const json& top = e["sites"][0];
  EXPECT_EQ(where_of(top)["function"], "heap_big_site") << e.dump(2);
  EXPECT_TRUE(ends_with(where_of(top)["file"].get<std::string>(), "workload.cc")) << top.dump(2);
  // heaptrack_print rounds to 10 kB: 200 MiB is 209.72M.
  EXPECT_GE(top["bytes"].get<uint64_t>(), 199 * kMiB);
  EXPECT_LE(top["bytes"].get<uint64_t>(), 201 * kMiB);
  const json* small = site_at(e, "heap_small_site", "workload.cc");
  ASSERT_NE(small, nullptr) << e.dump(2);
  EXPECT_GE((*small)["bytes"].get<uint64_t>(), 9 * kMiB);
  EXPECT_LE((*small)["bytes"].get<uint64_t>(), 11 * kMiB);
  EXPECT_NE(run.out.find("heap_big_site"), std::string::npos) << run.out;
}

TEST_F(Explain, MemoryHeldByAChildProcessIsSaidToBeInTheChildAndTheChildIsNamed) {
  std::string why;
  if (!have_memray(&why)) GTEST_SKIP() << why;
  // The child holds its memory until the test has seen it: the parent
  // waits for it, and it exits only after a second of holding (the
  // sampler reads /proc every 10 ms).
  dir.write("child.py", "import subprocess, sys\n"
                        "subprocess.run([sys.argv[1], '--touch', '100MiB', '--hold', '2s'], check=True)\n");
  auto run = run_spec(dir, "tests:\n  - name: child\n    run: [" + kPython + ", " + dir.path() + "/child.py, " +
                               workload() + "]\n    memory: 160MiB\n    explain: always\n");
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const json& t = test_named(run, "child");
  EXPECT_EQ(t["outcome"], "pass");
  EXPECT_TRUE(t["passed"].get<bool>());
  const json& e = t["explanation"];
  ASSERT_EQ(e["status"], "explained") << e.dump(2);
  EXPECT_EQ(e["why"], "always");
  EXPECT_NE(e["summary"].get<std::string>().find("child process"), std::string::npos) << e["summary"];
  EXPECT_NE(e["summary"].get<std::string>().find("memrun-workload"), std::string::npos) << e["summary"];
  const json* child = nullptr;
  for (const auto& p : e["processes"])
    if (p["command"].get<std::string>().find("memrun-workload --touch 100MiB") != std::string::npos) child = &p;
  ASSERT_NE(child, nullptr) << e.dump(2);
  EXPECT_EQ((*child)["profiled_by"], "");
  EXPECT_GE((*child)["peak_private_bytes"].get<uint64_t>(), 100 * kMiB);
  EXPECT_GE(e["unseen"]["other_processes_bytes"].get<uint64_t>(), 100 * kMiB);
  // memray saw the Python parent, which holds little.
  EXPECT_LT(e["profiled_peak_bytes"].get<uint64_t>(), 50 * kMiB);
}

TEST_F(Explain, ATestWhosePeakIsPageCacheIsSaidToHaveBeenSeenLittleWithItsFilePages) {
  std::string why;
  if (!have_memray(&why)) GTEST_SKIP() << why;
  if (on_tmpfs(dir.path())) GTEST_SKIP() << dir.path() << " is on tmpfs: reading it charges no page cache";
  write_mib(dir.path() + "/big.bin", 200);
  dir.write("read.py", "import sys\nwith open(sys.argv[1], 'rb') as f:\n    while f.read(1 << 20):\n        pass\n");
  // `inputs`: the file's cache is evicted before each run (the profiled
  // one too), so that reading it charges the test's group.
  auto run = run_spec(dir, "tests:\n  - name: cache\n    run: [" + kPython + ", " + dir.path() + "/read.py, " +
                               dir.path() + "/big.bin]\n    inputs: [" + dir.path() +
                               "/big.bin]\n    memory: 64MiB\n    explain: always\n");
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const json& e = test_named(run, "cache")["explanation"];
  ASSERT_EQ(e["status"], "explained") << e.dump(2);
  // Nothing is invented: the profiler saw the 1 MiB buffer and the
  // interpreter's own, nothing like the file.
  EXPECT_LT(e["profiled_peak_bytes"].get<uint64_t>(), 32 * kMiB) << e.dump(2);
  EXPECT_NE(e["summary"].get<std::string>().find("the profiler saw little"), std::string::npos) << e["summary"];
  EXPECT_NE(e["summary"].get<std::string>().find("page cache held"), std::string::npos) << e["summary"];
  EXPECT_GT(e["unseen"]["file_bytes"].get<uint64_t>(), 0u) << e.dump(2);
  EXPECT_EQ(e["unseen"]["file_bytes"], e["profiled_run"]["at_peak"]["file"]);
}

TEST_F(Explain, WithoutTheProfilerExplainSaysWhatToInstallAndTheVerdictStands) {
  // A PATH without heaptrack: the explanation says what to install; the
  // run ends as it would have.
  auto run = run_spec(dir, "tests:\n  - name: native\n    run: [" + workload() +
                               ", --touch, 100MiB]\n    memory: 64MiB\n    env: {PATH: /nonexistent}\n");
  ASSERT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_FALSE(test_named(run, "native").contains("explanation")) << "explain is off unless asked";
  auto asked = run_spec(dir,
                        "tests:\n  - name: native\n    run: [" + workload() +
                            ", --touch, 100MiB]\n    memory: 64MiB\n    env: {PATH: /nonexistent}\n",
                        {"--explain"});
  ASSERT_EQ(asked.exit_code, 1) << asked.out << asked.err;
  const json& t = test_named(asked, "native");
  EXPECT_EQ(t["outcome"], "oom");
  const json& e = t["explanation"];
  EXPECT_EQ(e["status"], "unavailable") << e.dump(2);
  EXPECT_NE(e["message"].get<std::string>().find("apt-get install heaptrack"), std::string::npos) << e["message"];
  EXPECT_NE(asked.out.find("apt-get install heaptrack"), std::string::npos) << asked.out;
}

TEST_F(Explain, MemrunExplainRerunsATestOfAnEarlierReportUnderTheProfiler) {
  if (!have_heaptrack()) GTEST_SKIP() << "heaptrack is not installed (./setup.sh test installs it)";
  auto run = run_spec(dir, "tests:\n  - name: two-sites\n    run: [" + workload() +
                               ", --heap, \"10MiB,200MiB\"]\n    memory: 128MiB\n");
  ASSERT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_FALSE(test_named(run, "two-sites").contains("explanation"));
  auto again = run_memrun({"explain", dir.path() + "/report.json", "two-sites"}, dir.path());
  // The rerun's verdict and exit code are its own run's, as repro's line.
  EXPECT_EQ(again.exit_code, 1) << again.out << again.err;
  EXPECT_NE(again.out.find("heap_big_site ("), std::string::npos) << again.out << again.err;
  EXPECT_NE(again.out.find("a second run under heaptrack"), std::string::npos) << again.out;
}

TEST_F(Explain, ABadExplainValueIsRefusedWithItsPlace) {
  auto run = run_spec(dir, "tests:\n  - name: t\n    run: [true]\n    memory: 64MiB\n    explain: sometimes\n");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("spec.yaml:5:14: 'explain' must be on-failure"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace memrun::testing

// explain: a test that failed on memory runs once more under an allocation
// profiler (memray for Python, heaptrack for native programs), and its
// record names where the memory went. Real kernel, real profilers; each
// assertion is one the allocations guarantee (names, lines, bytes the test
// allocated), never a figure page cache can move.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "harness.h"
#include "lanes.h"

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

// explain's profilers (memray, heaptrack) take a minute a case under TCG; what they show is the profiler's, whatever the backend.
MEMRUN_LANES(Explain, "*", kHostLane);

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

TEST_F(Explain, ARunLineOfOneCommandIsExpandedAndMoreShellIsRefusedNeverRun) {
  // `"$W" --touch 100MiB`: quotes and a variable of the test's env, one
  // command: explained (the native workload, under heaptrack or with what
  // to install). A command substitution in the line runs once, in the test
  // (its shell); explain refuses the line and never runs it again.
  std::string count = dir.path() + "/ran";
  auto run = run_spec(dir,
                      "tests:\n  - name: one\n    run: '\"$W\" --touch 100MiB'\n    memory: 64MiB\n    env: {W: " +
                          workload() + "}\n  - name: more\n    run: '\"$W\" --touch 100MiB $(echo x >> " + count +
                          ")'\n    memory: 64MiB\n    env: {W: " + workload() + "}\n",
                      {"--explain"});
  ASSERT_EQ(run.exit_code, 1) << run.out << run.err;
  const json& one = test_named(run, "one")["explanation"];
  EXPECT_NE(one["status"], "failed") << one.dump(2);
  EXPECT_EQ(one["message"].get<std::string>().find("shell code"), std::string::npos) << one.dump(2);
  const json& more = test_named(run, "more")["explanation"];
  EXPECT_NE(more["message"].get<std::string>().find("more shell code than one command"), std::string::npos)
      << more.dump(2);
  std::ifstream in(count);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all, "x\n") << "the substitution ran once, in the test's own run";
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

TEST_F(Explain, MemrunExplainRerunsWhereTheReportsRunWasConfinedOrWhereItIsTold) {
  // The report's run was made below a cgroup of its own (--cgroup-parent)
  // and a run folder of its own: explain's rerun is made there too, or
  // where its own flags say, never below memrun's own cgroup.
  auto parent = limited_parent(512ull << 20);
  std::string runs = dir.path() + "/runs";  // run_spec's --run-dir
  auto run = run_spec(dir, "tests:\n  - {name: quick, run: 'true', memory: 16MiB}\n",
                      {"--cgroup-parent", parent->run_path()});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  auto again = run_memrun({"explain", dir.path() + "/report.json", "quick"}, dir.path());
  EXPECT_NE(again.err.find("'--cgroup-parent' '" + parent->run_path() + "'"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("'--run-dir' '" + runs + "'"), std::string::npos) << again.err;
  std::string other = dir.path() + "/other-runs";
  std::filesystem::create_directories(other);
  auto told = run_memrun({"explain", dir.path() + "/report.json", "quick", "--run-dir", other, "--cgroup-parent",
                          parent->run_path()},
                         dir.path());
  EXPECT_NE(told.err.find("'--run-dir' '" + other + "'"), std::string::npos) << told.err;
  EXPECT_TRUE(std::filesystem::exists(other)) << told.err;
}

TEST_F(Explain, ARegressionAgainstTheBaselineIsExplainedInTheSameRunNamingTheFunctionThatGrew) {
  if (!have_heaptrack()) GTEST_SKIP() << "heaptrack is not installed (./setup.sh test installs it)";
  // The base allocates 40 MiB in heap_big_site, the head 150 MiB: both
  // pass under 512 MiB; the head's peak is far above the base's + 10%.
  auto spec = [](const char* big) {
    return "tests:\n  - name: grows\n    run: [{W}, --heap, \"10MiB," + std::string(big) +
           "\"]\n    memory: 512MiB\n    explain: on-failure\n";
  };
  auto base = run_spec(dir, spec("40MiB"));
  ASSERT_EQ(base.exit_code, 0) << base.out << base.err;
  EXPECT_FALSE(test_named(base, "grows").contains("explanation")) << "a pass is no failure on memory";
  std::filesystem::rename(dir.path() + "/report.json", dir.path() + "/base.json");
  auto head = run_spec(dir, spec("150MiB"), {"--baseline", dir.path() + "/base.json"});
  // The regression is the run's failure; the test's own verdict is a pass.
  ASSERT_EQ(head.exit_code, 1) << head.out << head.err;
  const json& t = test_named(head, "grows");
  EXPECT_TRUE(t["passed"].get<bool>());
  EXPECT_EQ(t["outcome"], "pass");
  ASSERT_EQ(head.report["comparison"]["tests"][0]["change"], "regressed") << head.report["comparison"].dump(2);
  ASSERT_TRUE(t.contains("explanation")) << head.out;
  const json& e = t["explanation"];
  ASSERT_EQ(e["status"], "explained") << e.dump(2);
  EXPECT_EQ(e["why"], "regressed");
  const json& top = e["sites"][0];
  EXPECT_EQ(where_of(top)["function"], "heap_big_site") << e.dump(2);
  EXPECT_GE(top["bytes"].get<uint64_t>(), 149 * kMiB);
  EXPECT_LE(top["bytes"].get<uint64_t>(), 151 * kMiB);
  EXPECT_NE(head.out.find("explain (regressed, a second run under heaptrack"), std::string::npos) << head.out;
  EXPECT_NE(head.out.find("heap_big_site ("), std::string::npos) << head.out;
  // explain: never leaves a regression unexplained.
  std::string never = spec("150MiB");
  never.replace(never.find("on-failure"), 10, "never");
  auto quiet = run_spec(dir, never, {"--baseline", dir.path() + "/base.json"});
  EXPECT_EQ(quiet.exit_code, 1) << quiet.out << quiet.err;
  EXPECT_FALSE(test_named(quiet, "grows").contains("explanation"));
}

// Stand-ins for heaptrack in `bin` of `at` (default `dir`): heaptrack runs the program
// (and leaves an empty capture where heaptrack would leave its own), and
// heaptrack_print is `reader`, a shell script's body.
std::string fake_heaptrack(const Scratch& dir, const std::string& reader, std::string at = "") {
  if (at.empty()) at = dir.path();
  std::filesystem::create_directories(at + "/bin");
  auto write = [&](const std::string& name, const std::string& text) { std::ofstream(at + "/" + name) << text; };
  write("bin/heaptrack", "#!/bin/sh\n"
                             "[ \"$1\" = --version ] && { echo 'heaptrack 0.0 (a stand-in)'; exit 0; }\n"
                             "out=$2; shift 2\n"
                             ": > \"$out.1.zst\"\n"
                             "exec \"$@\"\n");
  write("bin/heaptrack_print", "#!/bin/sh\n" + reader + "\n");
  for (const char* f : {"/bin/heaptrack", "/bin/heaptrack_print"})
    std::filesystem::permissions(at + f, std::filesystem::perms::owner_all);
  return at + "/bin:/usr/bin:/bin";
}

TEST_F(Explain, AProfileReaderRunsUnderALimitInAGroupOfMemrunsAndItsFailureIsSaid) {
  // A reader that would take 2 GiB: OOM-killed at its limit in a group of
  // memrun's, the explanation says so, memrun and the verdict stand.
  std::string path = fake_heaptrack(dir, "exec " + workload() + " --touch 2GiB");
  auto run = run_spec(dir, "tests:\n  - name: native\n    run: [{W}, --touch, 100MiB]\n    memory: 64MiB\n"
                           "    env: {PATH: \"" + path + "\"}\n    explain: on-failure\n");
  ASSERT_EQ(run.exit_code, 1) << run.out << run.err;
  const json& t = test_named(run, "native");
  EXPECT_EQ(t["outcome"], "oom");
  const json& e = t["explanation"];
  EXPECT_EQ(e["status"], "failed") << e.dump(2);
  EXPECT_EQ(e["profiled_run"]["outcome"], "pass") << e.dump(2);
  std::string message = e["message"].get<std::string>();
  // 512 MiB, or less on a host with less than that available.
  EXPECT_NE(message.find("heaptrack_print was OOM-killed at its memory limit of "), std::string::npos) << message;
  EXPECT_NE(run.out.find("OOM-killed at its memory limit"), std::string::npos) << run.out;
  EXPECT_TRUE(leftover_cgroups().empty());

  // A reader that fails: its exit code and what it said.
  path = fake_heaptrack(dir, "echo 'this capture is not one' >&2; exit 3");
  run = run_spec(dir, "tests:\n  - name: native\n    run: [{W}, --touch, 100MiB]\n    memory: 64MiB\n"
                      "    env: {PATH: \"" + path + "\"}\n    explain: on-failure\n");
  ASSERT_EQ(run.exit_code, 1) << run.out << run.err;
  const json& failed = test_named(run, "native")["explanation"];
  EXPECT_EQ(failed["status"], "failed") << failed.dump(2);
  EXPECT_NE(failed["message"].get<std::string>().find("heaptrack_print exited with 3: this capture is not one"),
            std::string::npos)
      << failed.dump(2);
}

// SIGINT or SIGTERM to memrun while explain's second run (or its reader)
// runs: what runs is stopped, its group removed, the report written with
// the verdict of the first run and an explanation that says it was
// interrupted; memrun exits 128+N as an interrupted run does.
void interrupt_explain(const Scratch& scratch, int sig, bool in_reader) {
  SCOPED_TRACE(std::string(strsignal(sig)) + (in_reader ? " during the reader" : " during the profiled run"));
  std::string sub = scratch.path() + "/" + std::to_string(sig) + (in_reader ? "-reader" : "-run");
  std::filesystem::create_directories(sub);
  std::string pidfile = sub + "/running.pid", report = sub + "/report.json";
  // The first run is OOM-killed; the profiled one, with room, goes on to
  // write its pid and wait (as the reader does, in the reader's case).
  std::string wait = "echo $$ " + std::string(kPidNs) + " > " + pidfile + "; exec sleep 3600";
  std::string script = sub + "/test.sh";
  {
    std::ofstream(script) << workload() << " --touch 100MiB || exit 1\n" << (in_reader ? "" : wait) << "\n";
  }
  std::string path = fake_heaptrack(scratch, in_reader ? wait : "exit 3", sub);
  std::string spec = sub + "/spec.yaml";
  {
    std::ofstream(spec) << "tests:\n  - name: native\n    run: [sh, " << script
                        << "]\n    memory: 64MiB\n    env: {PATH: \"" << path << "\"}\n    explain: on-failure\n";
  }
  auto started = start_program({memrun_bin(), spec, "--json", report, "--run-dir", sub + "/runs"});
  ASSERT_TRUE(wait_for_file(pidfile)) << "the profiled run never started";
  int pid = pid_in_file(pidfile);
  ASSERT_GT(pid, 0);
  ::kill(started.pid, sig);
  auto run = finish_program(started);
  EXPECT_EQ(run.exit_code, 128 + sig) << run.out << run.err;
  EXPECT_FALSE(process_alive(pid)) << "what the explanation ran outlived memrun";
  auto j = json::parse(read_text(report, "{}"));
  ASSERT_EQ(j["tests"].size(), 1u) << run.out << run.err;
  const json& t = j["tests"][0];
  EXPECT_EQ(t["outcome"], "oom") << "the verdict is the first run's";
  const json& e = t["explanation"];
  EXPECT_EQ(e["status"], "interrupted") << e.dump(2);
  EXPECT_NE(e["message"].get<std::string>().find(in_reader ? "during the reading of its profile"
                                                           : "during the profiled run"),
            std::string::npos)
      << e.dump(2);
  EXPECT_EQ(j["interrupted_by"], strsignal(sig));
  EXPECT_NE(run.out.find("memrun was interrupted"), std::string::npos) << run.out;
  EXPECT_TRUE(leftover_cgroups().empty());
}

// SIGINT or SIGTERM to memrun while explain's second run or its profile's
// reader runs: what runs is stopped, its group removed, the report written
// with the first run's verdict and an explanation that says it was
// interrupted; memrun exits 128+N as an interrupted run does.
TEST_F(Explain, ASignalDuringTheProfiledRunStopsItWritesTheReportAndExits128PlusN) {
  for (int sig : {SIGINT, SIGTERM}) interrupt_explain(dir, sig, false);
}

TEST_F(Explain, ASignalDuringTheProfilesReaderStopsItWritesTheReportAndExits128PlusN) {
  for (int sig : {SIGINT, SIGTERM}) interrupt_explain(dir, sig, true);
}

TEST_F(Explain, ABadExplainValueIsRefusedWithItsPlace) {
  auto run = run_spec(dir, "tests:\n  - name: t\n    run: [true]\n    memory: 64MiB\n    explain: sometimes\n");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("spec.yaml:5:14: 'explain' must be on-failure"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace memrun::testing

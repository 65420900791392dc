// memrun exec: one command under one limit, against the real kernel, with
// the verdicts, figures and exit codes of a spec run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <regex>

#include "harness.h"
#include "lanes.h"
#include "runner/base/units.h"

namespace memrun::testing {
namespace {

class Exec : public MemrunTest {
 protected:
  RunOutput exec(const std::vector<std::string>& flags, const std::vector<std::string>& command) {
    std::string report = dir.path() + "/exec.json";
    std::filesystem::remove(report);
    std::vector<std::string> args = {"exec", "--json", report, "--run-dir", dir.path() + "/runs"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    RunOutput r = run_memrun(args);
    if (std::filesystem::exists(report)) r.report = nlohmann::json::parse(read_text(report, "{}"));
    return r;
  }
};

// exec's command line is memrun's own: on the host only (what the kernel decides is labelled at its tests).
MEMRUN_LANES(Exec, "*", kHostLane);

// An OOM kill under exec: proven in the v2 VM too.
MEMRUN_LANES(Exec, "AnOomKillIsTheVerdictAndExpectOomAcceptsIt", kHostLane | kV2Lane);
TEST_F(Exec, AnOomKillIsTheVerdictAndExpectOomAcceptsIt) {
  auto killed = exec({"--memory", "64MiB"}, {workload(), "--touch", "100MiB"});
  EXPECT_EQ(killed.exit_code, 1) << killed.out << killed.err;
  ASSERT_EQ(killed.report["tests"].size(), 1u) << killed.out;
  const auto& t = killed.report["tests"][0];
  EXPECT_EQ(t["outcome"], "oom");
  EXPECT_EQ(t["name"], "memrun-workload");
  EXPECT_GE(t["oom_kills"].get<int>(), 1);
  EXPECT_NE(killed.out.find("FAIL  memrun-workload  oom"), std::string::npos) << killed.out;
  // A GoogleTest case's name, as memrun_discover_tests passes it: kept
  // whole in every output, '/' included.
  auto expected = exec({"--memory", "64MiB", "--expect", "oom", "--name", "Inst/Big.Loads/3"},
                       {workload(), "--touch", "100MiB"});
  EXPECT_EQ(expected.exit_code, 0) << expected.out;
  EXPECT_EQ(expected.report["tests"][0]["name"], "Inst/Big.Loads/3");
  EXPECT_NE(expected.out.find("PASS  Inst/Big.Loads/3  oom (expected)"), std::string::npos) << expected.out;
}

// The kernel's figures under exec: proven in the v2 VM too.
MEMRUN_LANES(Exec, "TheSameFiguresAsTheSameCommandInASpec", kHostLane | kV2Lane);
TEST_F(Exec, TheSameFiguresAsTheSameCommandInASpec) {
  auto one = exec({"--memory", "128MiB", "--min-headroom", "20%"}, {workload(), "--touch", "40MiB"});
  ASSERT_EQ(one.exit_code, 0) << one.out << one.err;
  auto spec = run_spec(dir, "tests:\n  - {name: t, run: [{W}, --touch, 40MiB], memory: 128MiB, min_headroom: 20%}\n");
  ASSERT_EQ(spec.exit_code, 0) << spec.out;
  double a = one.report["tests"][0]["peak_bytes"].get<double>(), b = test_named(spec, "t")["peak_bytes"].get<double>();
  // The program's and its libraries' page cache (~9 MiB of files here) is
  // charged to whichever run faults it in after the host evicted it, as it
  // may under load (a VM beside the tests): a 2 MiB bound failed once so.
  EXPECT_NEAR(a, b, 10.0 * MiB);
  EXPECT_GE(a, 40.0 * MiB);
  // Headroom is held to --min-headroom as to a spec's.
  auto tight = exec({"--memory", "48MiB", "--min-headroom", "20%"}, {workload(), "--touch", "40MiB"});
  EXPECT_EQ(tight.exit_code, 1) << tight.out;
  EXPECT_NE(tight.out.find("below min_headroom"), std::string::npos) << tight.out;
}

TEST_F(Exec, BadFlagsSayWhatToWriteAndRunNothing) {
  auto small = exec({"--memory", "64"}, {"true"});
  EXPECT_EQ(small.exit_code, 2);
  EXPECT_NE(small.err.find("'64' has no unit, and a bare number is ambiguous; write 64MiB"), std::string::npos)
      << small.err;
  auto headroom = exec({"--memory", "64MiB", "--min-headroom", "20"}, {"true"});
  EXPECT_EQ(headroom.exit_code, 2);
  EXPECT_NE(headroom.err.find("write 20% (of the limit), 20MiB"), std::string::npos) << headroom.err;
  auto expect = exec({"--memory", "64MiB", "--expect", "crash"}, {"true"});
  EXPECT_EQ(expect.exit_code, 2);
  EXPECT_NE(expect.err.find("must be pass, oom, fail or an exit code"), std::string::npos) << expect.err;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/exec.json"));
  auto none = run_memrun({"exec", "--memory", "64MiB"});
  EXPECT_EQ(none.exit_code, 2);
  // An empty program name is no program (PATH's search made it the first
  // folder on PATH: "cannot run '/usr/local/go/bin/': Permission denied").
  auto empty = run_memrun({"exec", "--memory", "64MiB", "--", ""});
  EXPECT_EQ(empty.exit_code, 2) << empty.out << empty.err;
  EXPECT_NE(empty.err.find("the command's name is empty ('')"), std::string::npos) << empty.err;
}

// What memrun says of a command line it cannot run: a flag without its
// value named with an example, `list` without a spec as bare `memrun`, and
// --version with the commit and the build.
TEST_F(Exec, AMissingValueOrSpecIsSaidAsAPersonWouldSayIt) {
  auto jobs = run_memrun({"-j"});
  EXPECT_EQ(jobs.exit_code, 2);
  EXPECT_EQ(jobs.err, "memrun: -j needs a value (N), e.g. -j 4 (memrun --help lists the flags)\n");
  auto memory = run_memrun({"exec", "--memory"});
  EXPECT_EQ(memory.exit_code, 2);
  EXPECT_EQ(memory.err, "memrun: exec: --memory needs a value (SIZE), e.g. --memory 64MiB (memrun exec --help lists "
                        "the flags)\n");
  auto list = run_memrun({"list"});
  EXPECT_EQ(list.exit_code, 2);
  EXPECT_EQ(list.err, "memrun: no SPEC given. Usage: memrun list [FLAGS] SPEC... (see memrun list --help)\n");
  // CLI11's RequiredError and a value a flag's check refuses, reworded in main.
  auto compare = run_memrun({"compare"});
  EXPECT_EQ(compare.exit_code, 2);
  EXPECT_EQ(compare.err, "memrun: no BASE or HEAD given. Usage: memrun compare [FLAGS] BASE HEAD (see memrun compare "
                         "--help)\n");
  auto live = run_memrun({"--live", "sometimes"});
  EXPECT_EQ(live.exit_code, 2);
  EXPECT_EQ(live.err, "memrun: --live takes auto, on or off, not 'sometimes'; e.g. --live on (memrun --help lists the "
                      "flags)\n");
  auto extra = run_memrun({"doctor", "now"});
  EXPECT_EQ(extra.exit_code, 2);
  EXPECT_EQ(extra.err, "memrun: doctor: more arguments than it takes: 'now'. Usage: memrun doctor [FLAGS] (see memrun "
                       "doctor --help)\n");
  auto bare = run_memrun({});
  EXPECT_EQ(bare.exit_code, 2);
  EXPECT_EQ(bare.err, "memrun: no SPEC given. Usage: memrun [FLAGS] SPEC... (see memrun --help)\n");
  auto version = run_memrun({"--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_TRUE(std::regex_match(version.out, std::regex("memrun [0-9.]+ \\(commit [0-9a-f]+(-dirty)?, (\\w+ build|no build "
                                                       "type)\\)\n")))
      << version.out;
}

// Every word from the first that is not a flag of exec's is the command's:
// its own flags (--version, --json) are never memrun's.
TEST_F(Exec, TheCommandStartsAtItsFirstWordWithoutDoubleDash) {
  std::string runs = dir.path() + "/runs";
  auto sort = run_memrun({"exec", "--memory", "64MiB", "--run-dir", runs, "sort", "--version"}, dir.path());
  EXPECT_EQ(sort.exit_code, 0) << sort.out << sort.err;
  EXPECT_NE(sort.out.find("sort (GNU coreutils)"), std::string::npos) << sort.out;
  EXPECT_NE(sort.out.find("PASS  sort"), std::string::npos) << sort.out;
  auto echo = run_memrun({"exec", "--memory", "64MiB", "--run-dir", runs, "echo", "--json", "x.json", "--"},
                         dir.path());
  EXPECT_EQ(echo.exit_code, 0) << echo.out << echo.err;
  EXPECT_NE(echo.out.find("--json x.json --\n"), std::string::npos) << echo.out;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/x.json"));
}

// A decimal size is what it says, and shown as what it is.
TEST_F(Exec, DecimalAndBinarySizesAreShownAsWritten) {
  auto gb = exec({"--memory", "1GB"}, {"true"});
  ASSERT_EQ(gb.exit_code, 0) << gb.out << gb.err;
  // The kernel rounds a limit up to its page.
  EXPECT_NEAR(gb.report["tests"][0]["requested_limit_bytes"].get<double>(), 1e9, 4096) << gb.out;
  EXPECT_NE(gb.out.find(" / 1 GB (953.7 MiB) "), std::string::npos) << gb.out;
  auto gib = exec({"--memory", "1GiB"}, {"true"});
  ASSERT_EQ(gib.exit_code, 0) << gib.out << gib.err;
  EXPECT_EQ(gib.report["tests"][0]["requested_limit_bytes"], 1073741824) << gib.out;
  EXPECT_NE(gib.out.find(" / 1.00 GiB "), std::string::npos) << gib.out;
}

// The command's output passes through as it runs, before the verdict, and
// the logs keep it all the same.
TEST_F(Exec, TheCommandsOutputPassesThroughAndIsLogged) {
  auto r = exec({"--memory", "64MiB"}, {"sh", "-c", "echo to-stdout; echo to-stderr >&2"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto shown = r.out.find("to-stdout\n"), verdict = r.out.find("PASS  sh");
  ASSERT_NE(shown, std::string::npos) << r.out;
  EXPECT_LT(shown, verdict) << r.out;
  EXPECT_NE(r.err.find("to-stderr\n"), std::string::npos) << r.err;
  const auto& t = r.report["tests"][0];
  EXPECT_EQ(read_text(t["stdout"].get<std::string>()), "to-stdout\n");
  EXPECT_EQ(read_text(t["stderr"].get<std::string>()), "to-stderr\n");
  // More than a pipe holds, all of it shown and kept, in order.
  auto big = exec({"--memory", "64MiB"}, {"seq", "200000"});
  ASSERT_EQ(big.exit_code, 0) << big.err;
  EXPECT_NE(big.out.find("\n1\n2\n3\n"), std::string::npos);
  EXPECT_NE(big.out.find("\n199999\n200000\n"), std::string::npos);
  EXPECT_EQ(std::filesystem::file_size(big.report["tests"][0]["stdout"].get<std::string>()), 1288895u);
}

// --output after (the CMake functions'): the verdict line first, no header,
// then the command's whole output, once (no log tail under the verdict:
// ctest --output-on-failure showed a failed case's output twice).
TEST_F(Exec, OutputAfterPutsTheVerdictFirst) {
  auto r = exec({"--memory", "64MiB", "--output", "after"}, {"sh", "-c", "echo first-line; seq 3; exit 1"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(r.out.rfind("FAIL  sh", 0), 0u) << r.out;
  auto whole = r.out.find("--- stdout of sh (");
  ASSERT_NE(whole, std::string::npos) << r.out;
  EXPECT_NE(r.out.find("first-line\n1\n2\n3\n", whole), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("first-line"), r.out.rfind("first-line")) << r.out;
  EXPECT_EQ(r.out.find("passed, "), std::string::npos) << r.out;
}

// Memory held: the command's own status. Memory did not hold: 1, whatever
// the command said. A signal: 128+N, as a shell says it.
// Enforcement under exec: proven in the v2 VM too.
MEMRUN_LANES(Exec, "ExitsWithTheCommandsStatusWhenMemoryHeld", kHostLane | kV2Lane);
TEST_F(Exec, ExitsWithTheCommandsStatusWhenMemoryHeld) {
  EXPECT_EQ(exec({"--memory", "64MiB"}, {"sh", "-c", "exit 7"}).exit_code, 7);
  EXPECT_EQ(exec({"--memory", "64MiB"}, {"sh", "-c", "kill -TERM $$"}).exit_code, 128 + 15);
  EXPECT_EQ(exec({"--memory", "64MiB"}, {"true"}).exit_code, 0);
  auto tight = exec({"--memory", "48MiB", "--min-headroom", "20%"},
                    {"sh", "-c", workload() + " --touch 40MiB; exit 4"});
  EXPECT_EQ(tight.exit_code, 1) << tight.out;
  EXPECT_LT(tight.report["tests"][0]["headroom_bytes"].get<double>(), 0.2 * 48 * MiB) << tight.out;
  EXPECT_EQ(exec({"--memory", "64MiB"}, {workload(), "--touch", "100MiB", "--exit", "5"}).exit_code, 1);
  // An expectation other than pass is memrun's verdict alone.
  EXPECT_EQ(exec({"--memory", "64MiB", "--expect", "fail"}, {"sh", "-c", "exit 7"}).exit_code, 0);
  EXPECT_EQ(exec({"--memory", "64MiB", "--expect", "3"}, {"sh", "-c", "exit 7"}).exit_code, 1);
}

// A flag or command memrun does not know is named, with the nearest one it
// does, before anything runs.
TEST_F(Exec, UnknownFlagsAndCommandsAreNamedWithTheNearest) {
  std::string runs = dir.path() + "/runs";
  auto memroy = run_memrun({"exec", "--run-dir", runs, "--memroy", "64MiB", "--", "true"});
  EXPECT_EQ(memroy.exit_code, 2);
  EXPECT_NE(memroy.err.find("unknown flag --memroy; did you mean --memory?"), std::string::npos) << memroy.err;
  EXPECT_FALSE(std::filesystem::exists(runs));
  std::string spec = dir.write("s.yaml", "tests:\n  - {name: t, run: [true], memory: 64MiB}\n");
  auto jsn = run_memrun({"--jsn", dir.path() + "/out.json", spec, "--run-dir", runs});
  EXPECT_EQ(jsn.exit_code, 2);
  EXPECT_NE(jsn.err.find("unknown flag --jsn; did you mean --json?"), std::string::npos) << jsn.err;
  auto compre = run_memrun({"compre", "a.json", "b.json"}, dir.path());
  EXPECT_EQ(compre.exit_code, 2);
  EXPECT_NE(compre.err.find("unknown command 'compre'; did you mean 'compare'?"), std::string::npos) << compre.err;
  EXPECT_FALSE(std::filesystem::exists(runs));
}

// As a user who cannot make cgroups here: the message names fixes that
// work on this host, never the one just tried; --unenforceable skip turns
// the failure into a skip (77), which the CMake functions hand to CTest.
// Without root the kernel's delegation decides: proven in the v2 VM too.
MEMRUN_LANES(Exec, "WithoutRootTheFixWorksHereAndSkipIsOptIn", kHostLane | kV2Lane);
TEST_F(Exec, WithoutRootTheFixWorksHereAndSkipIsOptIn) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to become another user";
  std::vector<std::string> user = {"setpriv", "--reuid", "1600", "--regid", "1600", "--clear-groups", memrun_bin()};
  auto as_user = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = user;
    argv.insert(argv.end(), args.begin(), args.end());
    return run_program(argv, "/");
  };
  auto plain = as_user({"exec", "--memory", "64MiB", "--run-dir", "/nonexistent", "true"});
  if (plain.exit_code == 0) GTEST_SKIP() << "a plain user can enforce limits here";
  EXPECT_EQ(plain.exit_code, 3) << plain.err;
  EXPECT_NE(plain.err.find("run memrun as root (sudo memrun ...)"), std::string::npos) << plain.err;
  EXPECT_NE(plain.err.find("--unenforceable skip"), std::string::npos) << plain.err;
  // auto tried v2 and v1: neither is suggested.
  EXPECT_EQ(plain.err.find("--backend v1"), std::string::npos) << plain.err;
  EXPECT_EQ(plain.err.find("--backend v2"), std::string::npos) << plain.err;
  EXPECT_EQ(plain.err.find("(or auto)"), std::string::npos) << plain.err;
  // Asked for v2 on a host whose v2 has no memory controller: the same.
  auto v2 = as_user({"--backend", "v2", "exec", "--memory", "64MiB", "true"});
  EXPECT_EQ(v2.exit_code, 3) << v2.err;
  EXPECT_EQ(v2.err.find("--backend v1"), std::string::npos) << v2.err;
  auto skip = as_user({"exec", "--unenforceable", "skip", "--memory", "64MiB", "true"});
  EXPECT_EQ(skip.exit_code, 77) << skip.err;
  EXPECT_NE(skip.err.find("SKIP (--unenforceable skip): memory limits cannot be enforced"), std::string::npos)
      << skip.err;
  std::string spec = dir.write("s.yaml", "tests:\n  - {name: t, run: [true], memory: 64MiB}\n");
  std::filesystem::permissions(dir.path(), std::filesystem::perms::others_read | std::filesystem::perms::others_exec,
                               std::filesystem::perm_options::add);
  auto spec_skip = as_user({spec, "--unenforceable", "skip"});
  EXPECT_EQ(spec_skip.exit_code, 77) << spec_skip.err;
}

}  // namespace
}  // namespace memrun::testing

// A sealed test in a pid namespace of its own, tried as a hostile root test
// would: no route through another process's /proc entry (memrun's root,
// its descriptors, its pid) reaches the host's cgroups, memrun's report or
// another test. Each case asserts what must always hold (the test does not
// pass, the other test's verdict stands, memrun survives and reports),
// whatever else decides the hostile test's own verdict.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "harness.h"
#include "lanes.h"

namespace memrun::testing {
namespace {

class Seal : public MemrunTest {};

bool sealing() { return run_memrun({"doctor"}).out.find("sealed             yes") != std::string::npos; }

std::string yaml_quoted(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return "'" + out + "'";
}

// Live processes (of any pid namespace below this one) whose environment
// holds `entry` (NAME=value).
std::vector<int> processes_with(const std::string& entry) {
  std::vector<int> out;
  DIR* proc = ::opendir("/proc");
  if (!proc) return out;
  while (dirent* e = ::readdir(proc)) {
    int pid = std::atoi(e->d_name);
    if (pid <= 0 || !process_alive(pid)) continue;
    std::ifstream in("/proc/" + std::to_string(pid) + "/environ");  // unreadable: not ours
    for (std::string kv; std::getline(in, kv, '\0');)
      if (kv == entry) out.push_back(pid);
  }
  ::closedir(proc);
  return out;
}

// Every cgroup mount a test could reach through another process's root:
// /proc/PID/root/sys/fs/cgroup/... for each PID the test can see.
const std::string kEveryRoot =
    "for b in /proc/[0-9]*/root/sys/fs/cgroup/memory /proc/[0-9]*/root/sys/fs/cgroup/pids "
    "/proc/[0-9]*/root/sys/fs/cgroup/unified /proc/[0-9]*/root/sys/fs/cgroup; do ";

// The seal: proven on every backend.
MEMRUN_LANES(Seal, "*", kHostLane | kV2Lane | kSystemdLane);

TEST_F(Seal, AGrandchildThatWritesItselfIntoTheHostsRootThroughParentRootNeverPassesNorSurvives) {
  if (!sealing()) GTEST_SKIP() << "memrun does not seal tests here (doctor: sealed no)";
  // A setsid'd, double-forked grandchild writes itself into every root
  // cgroup.procs it can reach through /proc/PID/root (the door:
  // memrun's root is the host's), then touches 200 MiB under 32.
  std::string pidfile = dir.path() + "/grandchild";
  std::string grandchild = "echo $$ > " + pidfile + "; " + kEveryRoot +
                           "[ -w $b/cgroup.procs ] && echo $$ > $b/cgroup.procs; done 2>/dev/null; "
                           "exec {W} --touch 200MiB --until " + dir.path() + "/never";
  std::string script = "( setsid sh -c '" + grandchild + "' </dev/null >/dev/null 2>&1 & ); "
                       "while [ ! -s " + pidfile + " ]; do sleep 0.05; done; p=$(cat " + pidfile + "); "
                       // Until it has touched it all, or died trying.
                       "while kill -0 $p 2>/dev/null && "
                       "[ $(awk '/^VmRSS/ {print $2}' /proc/$p/status 2>/dev/null || echo 0) -lt 204800 ]; "
                       "do sleep 0.05; done; exit 0";
  std::string mark = "MEMRUN_DOOR_MARK=" + dir.path();
  auto run = run_spec(dir, "env: {MEMRUN_DOOR_MARK: " + yaml_quoted(dir.path()) +
                               "}\ntests:\n  - {name: leaves-by-the-door, memory: 32MiB, timeout: 2m, run: " +
                               yaml_quoted(script) + "}\n");
  const auto& t = test_named(run, "leaves-by-the-door");
  EXPECT_FALSE(t["passed"]) << run.out << run.err;
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_TRUE(wait_until([&] { return processes_with(mark).empty(); }, 10))
      << "a process of the test outlived memrun: " << processes_with(mark).size();
}

TEST_F(Seal, LimitsRaisedThroughParentRootAndPutBackNeverPass) {
  if (!sealing()) GTEST_SKIP() << "memrun does not seal tests here (doctor: sealed no)";
  // No process leaves: the test finds its own group in every hierarchy it
  // can reach, raises its limit and its parent's to 1G, touches 200 MiB,
  // puts both back and resets the kernel's peak.
  std::string find = kEveryRoot +
                     "[ -d $b ] || continue; f=$(grep -rlx $$ --include=cgroup.procs $b 2>/dev/null | head -1); "
                     "[ -n \"$f\" ] && echo ${f%/cgroup.procs}; done > groups; ";
  std::string set = [](const std::string& value, bool raise) {
    std::string order = raise ? "memory.memsw.limit_in_bytes memory.limit_in_bytes memory.max"
                              : "memory.max memory.limit_in_bytes memory.memsw.limit_in_bytes";
    return "while read D; do for x in $D/.. $D; do for n in " + order + "; do [ -e $x/$n ] && echo " + value +
           " > $x/$n; done; done; done < groups 2>/dev/null; ";
  }("1G", true);
  std::string put_back = [](const std::string& value) {
    return "while read D; do for x in $D $D/..; do for n in memory.max memory.limit_in_bytes "
           "memory.memsw.limit_in_bytes; do [ -e $x/$n ] && echo " + value + " > $x/$n; done; "
           "echo 0 > $x/memory.max_usage_in_bytes; echo reset > $x/memory.peak; done; done < groups 2>/dev/null; ";
  }("32M");
  std::string script = "cd " + dir.path() + "; " + find + set + "{W} --touch 200MiB; " + put_back + "exit 0";
  auto run = run_spec(dir, "tests:\n  - {name: raises-and-lowers, memory: 32MiB, run: " + yaml_quoted(script) + "}\n");
  const auto& t = test_named(run, "raises-and-lowers");
  EXPECT_FALSE(t["passed"]) << run.out << run.err;
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
}

TEST_F(Seal, ATestCannotLowerAnotherTestsLimitThroughParentRoot) {
  if (!sealing()) GTEST_SKIP() << "memrun does not seal tests here (doctor: sealed no)";
  // Under -j 2 one test writes 8M into every limit it can find of the other
  // (named uniquely: no other run's test is ever touched), which then
  // touches 32 MiB of the 64 it asked for.
  std::string victim = "victim-" + std::filesystem::path(dir.path()).filename().string();
  std::string ready = dir.path() + "/ready", attacked = dir.path() + "/attacked";
  std::string attack = "n=0; while [ ! -e " + ready + " ] && [ $n -lt 1200 ]; do sleep 0.05; n=$((n+1)); done; " +
                       kEveryRoot + "[ -d $b ] && find $b -path '*" + victim +
                       "*' \\( -name memory.limit_in_bytes -o -name memory.max \\) 2>/dev/null | "
                       "while read f; do echo 8M > $f; done; done 2>/dev/null; touch " + attacked;
  std::string wait = "touch " + ready + "; while [ ! -e " + attacked + " ]; do sleep 0.05; done; exec {W} --touch 32MiB";
  auto run = run_spec(dir,
                      "defaults: {timeout: 2m}\ntests:\n  - {name: attacker, memory: 64MiB, run: " +
                          yaml_quoted(attack) + "}\n  - {name: " + victim + ", memory: 64MiB, run: " +
                          yaml_quoted(wait) + "}\n",
                      {"-j", "2"});
  const auto& t = test_named(run, victim);
  EXPECT_TRUE(t["passed"]) << run.out << run.err;
  EXPECT_EQ(t["outcome"], "pass") << t;
  EXPECT_EQ(t["limit_at_end_bytes"], 64u << 20) << t;
}

TEST_F(Seal, TestsNeverShareAPidInTheSharedTmp) {
  if (!sealing()) GTEST_SKIP() << "memrun does not seal tests here (doctor: sealed no)";
  // Every test's command is first of its namespace; /tmp is the host's. A
  // file named after a pid (`x.$$`, as heaptrack names its FIFO) made with
  // noclobber fails if another test, at once or before, had the same pid.
  std::string make = "set -C; : > " + dir.path() + "/pid.$$ && [ $$ != 2 ]";
  std::string spec = "tests:\n";
  for (int i = 0; i < 4; ++i)
    spec += "  - {name: t" + std::to_string(i) + ", memory: 32MiB, run: " + yaml_quoted(make) + "}\n";
  auto run = run_spec(dir, spec, {"-j", "2"});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    files += e.path().filename().string().rfind("pid.", 0) == 0;
  EXPECT_EQ(files, 4u) << run.out;
}

TEST_F(Seal, NoTestStopsTheTestsAfterItFromStartingThroughItsInit) {
  if (!sealing()) GTEST_SKIP() << "memrun does not seal tests here (doctor: sealed no)";
  // Every sealed test's init is one program of the run's (/proc/1/exe): a
  // root test that takes its mode away (refused since 6.3; before, the
  // next test's init cannot be exec'ed) leaves the tests after it to start
  // as they would. And the init's command line is its own: `pgrep -f` of
  // the test's command finds the command alone.
  std::string spec = "tests:\n"
                     "  - {name: unmake, memory: 32MiB, run: 'chmod 0 /proc/1/exe; chmod 0644 /proc/1/exe; true'}\n"
                     "  - {name: after, memory: 32MiB, run: 'test -x /bin/sh'}\n"
                     "  - {name: alone, memory: 32MiB, run: ['sh', '-c', '[ \"$(pgrep -f -c marker-4711)\" = 1 ]', 'marker-4711']}\n";
  for (const char* jobs : {"1", "2"}) {
    auto run = run_spec(dir, spec, {"-j", jobs});
    for (const char* name : {"after", "alone"}) {
      const auto& t = test_named(run, name);
      EXPECT_EQ(t["outcome"], "pass") << "-j " << jobs << ": " << t;
    }
  }
}

TEST_F(Seal, ALaterTestCannotRewriteTheReportThroughAnotherProcesssDescriptors) {
  if (!sealing()) GTEST_SKIP() << "memrun does not seal tests here (doctor: sealed no)";
  // The first test is OOM-killed; the second rewrites every open file it can
  // reach through /proc/PID/fd that holds a record (memrun's spool, as the
  // issue found it), so that the first one reads as passed. The rewrite
  // keeps every length, so a spool it reached would still parse.
  std::string rewrite =
      "for f in /proc/[0-9]*/fd/*; do [ -f \"$f\" ] || continue; grep -q '\"outcome\"' \"$f\" 2>/dev/null || continue; "
      "c=$(cat \"$f\"); printf '%s' \"$c\" | sed -e 's/\"outcome\": \"oom\"/\"outcome\":\"pass\"/g' "
      "-e 's/\"passed\": false/\"passed\": true /g' | dd of=\"$f\" conv=notrunc status=none; done; exit 0";
  std::string xml = dir.path() + "/junit.xml", md = dir.path() + "/summary.md";
  auto run = run_spec(dir,
                      "tests:\n  - {name: killed, memory: 16MiB, run: '{W} --touch 64MiB'}\n"
                      "  - {name: rewriter, memory: 64MiB, run: " + yaml_quoted(rewrite) + "}\n",
                      {"-j", "1", "--junit", xml, "--markdown", md});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  const auto& t = test_named(run, "killed");
  EXPECT_FALSE(t["passed"]) << t;
  EXPECT_EQ(t["outcome"], "oom") << t;
  std::string junit = read_text(xml);
  EXPECT_NE(junit.find("<testsuites name=\"memrun\" tests=\"2\" failures=\"1\""), std::string::npos) << junit;
  std::string markdown = read_text(md);
  EXPECT_NE(markdown.find("1 passed, 1 failed"), std::string::npos) << markdown;

  // Unsealed, the rewriter reaches memrun's descriptors: memrun must then
  // refuse to make any output from what it reads back, never one that says
  // the killed test passed.
  Scratch unsealed;
  std::string xml2 = unsealed.path() + "/junit.xml";
  auto open = run_spec(unsealed,
                       "tests:\n  - {name: killed, memory: 16MiB, run: '{W} --touch 64MiB'}\n"
                       "  - {name: rewriter, memory: 64MiB, run: " + yaml_quoted(rewrite) + "}\n",
                       {"-j", "1", "--junit", xml2, "--host-cgroups"});
  EXPECT_NE(open.exit_code, 0) << open.out << open.err;
  if (!open.report.is_null() && open.report.contains("tests"))
    for (const auto& entry : open.report["tests"])
      if (entry["name"] == "killed") {
        EXPECT_FALSE(entry["passed"]) << entry;
      }
  // (The killed test's record, if the rewriter reached it, is an error.)
  EXPECT_EQ(read_text(xml2).find("failures=\"0\" errors=\"0\""), std::string::npos);
}

TEST_F(Seal, ARewrittenSpoolCostsOnlyTheRecordsTheTestReached) {
  // Unsealed (--host-cgroups), a test reaches memrun's descriptors (its
  // parent's: memrun's) and rewrites the record of the OOM-killed test
  // before it to say it passed. That record is reported as an error; the
  // one it did not change (a pass before it) and its own (written after it
  // ended) are reported as they were, and the run fails.
  // The killed test's record may reach the spool after the next test
  // started (its group is cleaned up beside it): the rewriter waits for it.
  std::string rewrite =
      "for i in $(seq 400); do for f in /proc/$PPID/fd/*; do [ -f \"$f\" ] && grep -q '\"outcome\": \"oom\"' \"$f\" "
      "2>/dev/null && break 2; done; sleep 0.025; done; "
      "for f in /proc/$PPID/fd/*; do [ -f \"$f\" ] || continue; grep -q '\"outcome\"' \"$f\" 2>/dev/null || continue; "
      "c=$(cat \"$f\"); printf '%s' \"$c\" | sed -e 's/\"outcome\": \"oom\"/\"outcome\":\"pass\"/g' "
      "-e 's/\"passed\": false/\"passed\": true /g' | dd of=\"$f\" conv=notrunc status=none; done; exit 0";
  std::string xml = dir.path() + "/junit.xml";
  // The run folder (where the spool is) on a tmpfs: on the VMs' 9p share a
  // deleted file cannot be opened again through /proc/PID/fd, so there the
  // rewriter would reach nothing and this test would prove nothing.
  char shm[] = "/dev/shm/memrun-spool-XXXXXX";
  ASSERT_NE(mkdtemp(shm), nullptr);
  std::string spec = dir.write("spec.yaml", "tests:\n  - {name: before, memory: 16MiB, run: 'true'}\n"
                                            "  - {name: killed, memory: 16MiB, run: '" + workload() +
                                            " --touch 64MiB'}\n"
                                            "  - {name: rewriter, memory: 256MiB, run: " + yaml_quoted(rewrite) +
                                            "}\n");
  std::string report = dir.path() + "/report.json";
  RunOutput run = run_memrun({spec, "--json", report, "--run-dir", shm, "-j", "1", "--junit", xml, "--host-cgroups"});
  std::filesystem::remove_all(shm);
  if (std::filesystem::exists(report)) run.report = nlohmann::json::parse(read_text(report));
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  ASSERT_TRUE(run.report.contains("tests")) << run.out << run.err;
  EXPECT_TRUE(test_named(run, "before")["passed"]) << run.report.dump();
  EXPECT_TRUE(test_named(run, "rewriter")["passed"]) << run.report.dump();
  const auto& t = test_named(run, "killed");
  EXPECT_FALSE(t["passed"]) << t;
  EXPECT_NE(t["outcome"], "pass") << t;
  EXPECT_NE(run.err.find("the record of test 'killed' was changed"), std::string::npos) << run.err;
  std::string junit = read_text(xml);
  EXPECT_NE(junit.find("tests=\"3\" failures=\"0\" errors=\"1\""), std::string::npos) << junit;
}

TEST_F(Seal, ASealedTestSeesAndKillsOnlyItsOwnProcessesAndMemrunReports) {
  if (!sealing()) GTEST_SKIP() << "memrun does not seal tests here (doctor: sealed no)";
  // Beside a bystander test, a root test lists the processes it can see,
  // then SIGKILLs its parent, every pid in its /proc and every process it
  // may (kill -9 -1). memrun and the bystander must go on and report.
  std::string ready = dir.path() + "/ready", done = dir.path() + "/done", seen = dir.path() + "/seen";
  std::string killer = "n=0; while [ ! -e " + ready + " ] && [ $n -lt 1200 ]; do sleep 0.05; n=$((n+1)); done; "
                       "{ echo ppid $PPID; for p in /proc/[0-9]*; do echo comm $(cat $p/comm); done; ps -e -o comm=; } > " +
                       seen + " 2>&1; kill -9 $PPID; for p in /proc/[0-9]*; do [ ${p#/proc/} = $$ ] || kill -9 ${p#/proc/}; done; "
                       "kill -9 -1; touch " + done + "; exit 0";
  std::string bystander = "touch " + ready + "; exec {W} --touch 1MiB --until " + done;
  auto run = run_spec(dir,
                      "defaults: {timeout: 2m}\ntests:\n  - {name: killer, memory: 64MiB, run: " + yaml_quoted(killer) +
                          "}\n  - {name: bystander, memory: 64MiB, run: " + yaml_quoted(bystander) + "}\n",
                      {"-j", "2"});
  ASSERT_EQ(run.report["tests"].size(), 2u) << "memrun wrote no report: " << run.exit_code << run.out << run.err;
  EXPECT_TRUE(test_named(run, "bystander")["passed"]) << run.out;
  EXPECT_EQ(test_named(run, "killer")["outcome"], "pass") << run.out;
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  std::string text = read_text(seen);
  // Its parent is its init, and nothing outside the test is in view: not
  // memrun, not the bystander (memrun-workload), not the host's PID 1.
  EXPECT_NE(text.find("ppid 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("comm memrun-init\n"), std::string::npos) << text;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::string comm = line.rfind("comm ", 0) == 0 ? line.substr(5) : line;
    EXPECT_NE(comm, "memrun") << text;
    EXPECT_NE(comm, "memrun-workload") << text;
    EXPECT_NE(comm, "integration_tes") << text;
    EXPECT_NE(comm, "systemd") << text;
  }
}

TEST_F(Seal, NothingOfASealedTestOutlivesASigkilledRun) {
  if (!sealing()) GTEST_SKIP() << "memrun does not seal tests here (doctor: sealed no)";
  // memrun cannot clean up after a SIGKILL, but its tests' inits die with
  // it (PR_SET_PDEATHSIG), and with an init its whole pid namespace: a
  // setsid'd daemon included. (The groups stay, for gc.)
  std::string pidfile = dir.path() + "/daemon.pid";
  std::string spec = dir.write("spec.yaml", "tests:\n  - {name: t, run: [" + workload() + ", --daemon, " + pidfile +
                                                ", --hold, 1h], memory: 64MiB}\n");
  auto started = start_program({memrun_bin(), spec, "--run-dir", dir.path() + "/runs"});
  ASSERT_TRUE(wait_for_file(pidfile)) << "the test never started";
  int daemon = pid_in_file(pidfile);
  EXPECT_TRUE(process_alive(daemon)) << "the daemon was gone before memrun: the test proves nothing";
  ::kill(started.pid, SIGKILL);
  finish_program(started);
  EXPECT_TRUE(wait_until([&] { return !process_alive(daemon); }, 10)) << "a sealed test's daemon outlived memrun";
  EXPECT_EQ(run_memrun({"gc"}).exit_code, 0);
}

TEST_F(Seal, TheTestsExitStatusSignalAndOrphansAreAsWithoutTheNamespace) {
  // Its exit code and the signal that ended it come through its init
  // unchanged; what it leaves running is killed with it.
  std::string pidfile = dir.path() + "/daemon";
  auto run = run_spec(dir,
                      "tests:\n  - {name: exits-3, memory: 32MiB, run: 'exit 3'}\n"
                      "  - {name: terminated, memory: 32MiB, run: 'kill -TERM $$'}\n"
                      "  - {name: oom-killed, memory: 16MiB, run: 'exec {W} --touch 64MiB'}\n"
                      "  - {name: leaves-a-daemon, memory: 32MiB, run: '{W} --daemon " + pidfile + "'}\n");
  EXPECT_EQ(test_named(run, "exits-3")["exit_code"], 3) << run.out;
  EXPECT_EQ(test_named(run, "terminated")["signal"], 15) << run.out;
  EXPECT_EQ(test_named(run, "oom-killed")["signal"], 9) << run.out;
  EXPECT_EQ(test_named(run, "oom-killed")["outcome"], "oom") << run.out;
  EXPECT_TRUE(test_named(run, "leaves-a-daemon")["passed"]) << run.out;
}

}  // namespace
}  // namespace memrun::testing

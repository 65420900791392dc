// memrun under faults: signals, a SIGKILL'd memrun, hostile input. Nothing
// may be lost (the report of what finished) or left behind (processes,
// cgroups).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "cgroup/cgroup.h"
#include "harness.h"
#include "lanes.h"

namespace memrun::testing {
namespace {

class Faults : public MemrunTest {};

int read_pid(const std::string& path) { return pid_in_file(path); }

// A spec whose second test daemonizes and hangs; `pidfile` says when it runs.
std::string hanging_spec(const Scratch& dir, const std::string& pidfile) {
  return dir.write("spec.yaml", "tests:\n  - {name: first, run: 'true', memory: 16MiB}\n"
                                "  - {name: hangs, run: [" + workload() + ", --daemon, " + pidfile +
                                    ", --hold, 1h], memory: 64MiB}\n  - {name: never, run: 'true', memory: 16MiB}\n");
}

class Signals : public Faults, public ::testing::WithParamInterface<int> {};

// memrun's end on a signal, with the backend's clean-up: proven on every backend.
MEMRUN_LANES(Signals, "*", kHostLane | kV2Lane | kSystemdLane);

TEST_P(Signals, KillTheRunningTestWriteTheReportAndExit128PlusN) {
  int sig = GetParam();
  std::string pidfile = dir.path() + "/daemon.pid", report = dir.path() + "/report.json";
  auto started = start_program({memrun_bin(), hanging_spec(dir, pidfile), "--json", report, "--run-dir",
                                dir.path() + "/runs"});
  ASSERT_TRUE(wait_for_file(pidfile)) << "the hanging test never started";
  ::kill(started.pid, sig);
  auto run = finish_program(started);
  EXPECT_EQ(run.exit_code, 128 + sig) << run.out << run.err;
  EXPECT_FALSE(process_alive(read_pid(pidfile))) << "the test's daemon outlived memrun";
  auto j = nlohmann::json::parse(read_text(report, "{}"));
  ASSERT_EQ(j["tests"].size(), 3u) << run.out;
  EXPECT_EQ(j["tests"][0]["outcome"], "pass");
  EXPECT_EQ(j["tests"][1]["outcome"], "interrupted");
  EXPECT_EQ(j["tests"][2]["outcome"], "interrupted");
  EXPECT_EQ(j["interrupted_by"], strsignal(sig));
}

// Every signal that would end memrun and can be caught: Ctrl-C, kill, a
// lost terminal, Ctrl-\, and two that nobody sends by hand.
INSTANTIATE_TEST_SUITE_P(Catchable, Signals, ::testing::Values(SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGALRM));

// memrun's own, whatever the backend: on the host only.
MEMRUN_LANES(Faults, "ClosedStdioIsNoCrashAndNoCorruptReport", kHostLane);
TEST_F(Faults, ClosedStdioIsNoCrashAndNoCorruptReport) {
  // Started with stdin, stdout and stderr closed (a daemon's children, a
  // careless CI step): memrun runs, its report is whole and the test's
  // output goes to its log, not into a file memrun opened in their place.
  std::string spec = dir.write("spec.yaml", "tests:\n  - {name: a, run: 'echo to-the-log', memory: 16MiB}\n");
  std::string report = dir.path() + "/report.json";
  auto run = run_program({"sh", "-c", "exec \"$0\" \"$@\" <&- >&- 2>&-", memrun_bin(), spec, "--json", report,
                          "--run-dir", dir.path() + "/runs"});
  EXPECT_EQ(run.exit_code, 0);
  auto json = nlohmann::json::parse(read_text(report));
  EXPECT_EQ(json["tests"][0]["outcome"], "pass") << json.dump();
  EXPECT_EQ(read_text(json["tests"][0]["stdout"].get<std::string>()), "to-the-log\n");
}

// memrun's own, whatever the backend: on the host only.
MEMRUN_LANES(Faults, "MemrunsOwnFailureEndsWithACodeNoTestEndsWith", kHostLane);
TEST_F(Faults, MemrunsOwnFailureEndsWithACodeNoTestEndsWith) {
  // Where memrun cannot hold a closed descriptor's place (/dev/null, bound
  // read-only in a mount namespace of its own, refuses to open for
  // writing, root or not), it fails itself: exit 4 with the reason, never
  // 1 (a test did not pass) nor 2 (bad input).
  std::string file = dir.write("null", "");
  auto run = run_program({"unshare", "-m", "sh", "-c",
                          "mount --bind \"$1\" /dev/null && mount -o remount,bind,ro /dev/null && "
                          "exec \"$0\" --version <&-",
                          memrun_bin(), file});
  EXPECT_EQ(run.exit_code, 4) << run.out << run.err;
  EXPECT_NE(run.err.find("cannot open /dev/null in place of closed descriptor 0"), std::string::npos) << run.err;
}

TEST_F(Faults, TheFirstSignalAsksTestsToStopASecondKillsAtOnce) {
  // Two tests at once: one cleans up on SIGTERM, one ignores it.
  std::string cleaned = dir.path() + "/cleaned", polite = dir.path() + "/polite.pid",
              stubborn = dir.path() + "/stubborn.pid", report = dir.path() + "/report.json";
  std::string spec = dir.write(
      "spec.yaml", "tests:\n"
                   "  - {name: polite, memory: 32MiB, run: 'trap \"echo bye > " + cleaned + "; exit 0\" TERM; echo $$ " + kPidNs + " > " +
                       polite + "; while :; do sleep 0.1; done'}\n"
                   "  - {name: stubborn, memory: 32MiB, run: 'trap \"\" TERM; echo $$ " + kPidNs + " > " + stubborn +
                       "; exec sleep 3600'}\n");
  auto started = start_program({memrun_bin(), spec, "-j", "2", "--grace", "60s", "--json", report, "--run-dir",
                                dir.path() + "/runs"});
  ASSERT_TRUE(wait_for_file(polite) && wait_for_file(stubborn)) << "the tests never started";
  ::kill(started.pid, SIGINT);
  // The polite test got SIGTERM and cleaned up; memrun waits out the grace
  // period for the stubborn one.
  EXPECT_TRUE(wait_for_file(cleaned)) << "the polite test never saw SIGTERM";
  // Not a wait for an event but a window in which nothing may happen: with
  // 60 s of grace, memrun must still be there a second later.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_TRUE(process_alive(started.pid)) << "memrun did not give the tests their grace period";
  EXPECT_TRUE(process_alive(read_pid(stubborn)));
  // A second Ctrl-C does not wait.
  auto second = std::chrono::steady_clock::now();
  ::kill(started.pid, SIGINT);
  auto run = finish_program(started);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - second).count();
  EXPECT_EQ(run.exit_code, 130) << run.out << run.err;
  EXPECT_LT(took, 20.0) << "the second signal did not cut the 60 s grace period short";
  EXPECT_FALSE(process_alive(read_pid(stubborn)));
  auto j = nlohmann::json::parse(read_text(report, "{}"));
  ASSERT_EQ(j["tests"].size(), 2u) << run.out;
  EXPECT_EQ(j["tests"][0]["outcome"], "interrupted");
  EXPECT_EQ(j["tests"][1]["outcome"], "interrupted");
}

// memrun's relay of a GiB of output (minutes under TCG), whatever the backend.
MEMRUN_LANES(Faults, "AGibibyteToStdoutIsCappedWithANoteWhileMemrunStaysFlat", kHostLane);
TEST_F(Faults, AGibibyteToStdoutIsCappedWithANoteWhileMemrunStaysFlat) {
  auto run = run_spec(dir, "tests:\n  - {name: flood, run: 'head -c 1073741824 /dev/zero', memory: 64MiB}\n",
                      {"--max-log", "1MiB"});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  const auto& t = test_named(run, "flood");
  EXPECT_EQ(t["stdout_bytes"], 1u << 30);
  EXPECT_EQ(t["log_discarded_bytes"], (1u << 30) - (1u << 20));
  std::string log = read_text(t["stdout"].get<std::string>());
  EXPECT_LT(log.size(), (1u << 20) + 1024);
  EXPECT_GE(log.size(), 1u << 20);
  EXPECT_NE(log.find("[memrun: this log was capped at 1.00 MiB; the test wrote 1.00 GiB"), std::string::npos);
  EXPECT_LT(run.report["memrun_max_rss_bytes"], 16u << 20);
  // The default cap: 64 MiB per stream.
  auto capped = run_spec(dir, "tests:\n  - {name: flood, run: 'head -c 80000000 /dev/zero >&2', memory: 64MiB}\n");
  const auto& c = test_named(capped, "flood");
  EXPECT_EQ(c["stderr_bytes"], 80000000u);
  EXPECT_EQ(c["log_discarded_bytes"], 80000000u - (64u << 20));
}

// The tracefs instances memrun's watches of moves made (memrun-PID-N), of
// process `pid` or of every memrun.
std::vector<std::string> move_watches(int pid = 0) {
  std::vector<std::string> found;
  std::error_code ec;
  std::string prefix = "memrun-" + (pid ? std::to_string(pid) + "-" : "");
  for (const auto& e : std::filesystem::directory_iterator("/sys/kernel/tracing/instances", ec))
    if (e.path().filename().string().rfind(prefix, 0) == 0) found.push_back(e.path().string());
  return found;
}

TEST_F(Faults, WhatASigkilledRunLeftIsCleanedUpButALiveRunIsNeverTouched) {
  // A run killed by SIGKILL can clean nothing: its cgroups and its test's
  // daemon stay. (Unsealed: a sealed test's daemon dies with its pid
  // namespace, whose init dies with memrun.)
  int killed_pid = 0;
  auto kill_a_run = [&](const Scratch& where) {
    std::string pidfile = where.path() + "/daemon.pid";
    auto killed = start_program(
        {memrun_bin(), hanging_spec(where, pidfile), "--run-dir", where.path() + "/runs", "--host-cgroups"});
    EXPECT_TRUE(wait_for_file(pidfile));
    ::kill(killed.pid, SIGKILL);
    finish_program(killed);
    int daemon = read_pid(pidfile);
    EXPECT_TRUE(process_alive(daemon)) << "nothing left to clean up: the test proves nothing";
    // Its watch of the tests' moves (a tracefs instance), where it could make one.
    killed_pid = killed.pid;
    if (::geteuid() == 0) EXPECT_FALSE(move_watches(killed.pid).empty());
    EXPECT_FALSE(leftover_cgroups().empty());
    return daemon;
  };
  // `memrun gc` removes it...
  int daemon = kill_a_run(dir);
  auto gc = run_memrun({"gc"});
  EXPECT_EQ(gc.exit_code, 0) << gc.err;
  EXPECT_NE(gc.out.find("1 dead run cleaned up"), std::string::npos) << gc.out;
  EXPECT_FALSE(process_alive(daemon)) << "gc left the dead run's process";
  EXPECT_EQ(leftover_cgroups(), std::vector<std::string>{});
  EXPECT_EQ(move_watches(killed_pid), std::vector<std::string>{}) << "gc left the dead run's tracefs instance";

  // ...and so does every run as it starts, while a live run is left alone.
  Scratch live_dir, dead_dir;
  std::string live_pid = live_dir.path() + "/daemon.pid";
  auto live = start_program(
      {memrun_bin(), hanging_spec(live_dir, live_pid), "--run-dir", live_dir.path() + "/runs", "--host-cgroups"});
  ASSERT_TRUE(wait_for_file(live_pid));
  int dead_daemon = kill_a_run(dead_dir);
  auto next = run_spec(dir, "tests:\n  - {name: t, run: 'true', memory: 16MiB}\n");
  EXPECT_EQ(next.exit_code, 0) << next.out << next.err;
  EXPECT_FALSE(process_alive(dead_daemon));
  EXPECT_EQ(move_watches(killed_pid), std::vector<std::string>{}) << "a starting run left a dead run's tracefs instance";
  EXPECT_TRUE(process_alive(read_pid(live_pid))) << "a starting run touched a live run";
  auto idle = run_memrun({"gc"});
  EXPECT_NE(idle.out.find("0 dead runs cleaned up"), std::string::npos) << idle.out;
  EXPECT_TRUE(process_alive(read_pid(live_pid))) << "gc touched a live run";
  if (::geteuid() == 0) EXPECT_FALSE(move_watches(live.pid).empty()) << "gc removed a live run's watch";
  ::kill(live.pid, SIGTERM);
  EXPECT_EQ(finish_program(live).exit_code, 143);
}

// v1's own layout: the host's.
MEMRUN_LANES(Faults, "GcStaysInsideTheCgroupParentOnV1*", kHostLane);
TEST_F(Faults, GcStaysInsideTheCgroupParentOnV1ItsPidsPlaceToo) {
  const auto& h = cgroup::host();
  if (h.v1_mount.count("memory") == 0 || h.v1_mount.count("pids") == 0 || h.v1_self.count("memory") == 0)
    GTEST_SKIP() << "needs the v1 memory and pids hierarchies (the host suite has them)";
  // A parent of our own in the memory hierarchy, its matching place in the
  // pids hierarchy, and a dead run in each (this process, with another start
  // time: provably not alive). A dead run at memrun's own pids place (the
  // pids root here) is outside the parent: gc with --cgroup-parent never
  // touches it.
  std::string tag = "memrun-gc-parent-test-" + std::to_string(::getpid());
  std::string rel = h.v1_self.at("memory").substr(h.v1_mount.at("memory").size()) + "/" + tag;
  std::string mem = h.v1_mount.at("memory") + rel, pids = h.v1_mount.at("pids") + rel;
  std::string run = "memrun-gc-" + std::to_string(::getpid()) + "-" +
                    std::to_string(cgroup::process_start_time(::getpid()) + 1) + "-" +
                    std::to_string(cgroup::pid_namespace());
  std::string outside = h.v1_self.count("pids") ? h.v1_self.at("pids") + "/" + run : "";
  std::filesystem::create_directories(mem + "/" + run);
  std::vector<std::string> made;  // the pids groups this test made, deepest last
  for (auto p = std::filesystem::path(pids); p.string().size() > h.v1_mount.at("pids").size(); p = p.parent_path())
    if (!std::filesystem::exists(p)) made.insert(made.begin(), p.string());
  for (const auto& d : made) std::filesystem::create_directory(d);
  std::filesystem::create_directories(pids + "/" + run);
  if (!outside.empty()) std::filesystem::create_directories(outside);
  auto gc = run_memrun({"gc", "--backend", "v1", "--cgroup-parent", mem});
  EXPECT_EQ(gc.exit_code, 0) << gc.err;
  EXPECT_FALSE(std::filesystem::exists(mem + "/" + run)) << gc.out;
  EXPECT_FALSE(std::filesystem::exists(pids + "/" + run)) << gc.out;
  std::istringstream lines(gc.out);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("removed ", 0) == 0) {
      EXPECT_TRUE(line.find(mem + "/") == 8 || line.find(pids + "/") == 8) << "outside the parent: " << line;
    }
  // (Another run on this host may collect it meanwhile; never this gc.)
  if (!outside.empty()) ::rmdir(outside.c_str());
  for (auto d = made.rbegin(); d != made.rend(); ++d) ::rmdir(d->c_str());
  ::rmdir(mem.c_str());
  // memrun list takes --backend and --cgroup-parent (suites are listed in
  // a group there).
  std::string spec = dir.write("spec.yaml", "tests:\n  - {name: a, run: 'true', memory: 16MiB}\n");
  auto list = run_memrun({"list", "--backend", "v1", "--cgroup-parent", h.v1_self.at("memory"), spec});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_TRUE(std::regex_search(list.out, std::regex("yaml:2  +a  +16\\.0 MiB  +pass\n"))) << list.out;
}

// memrun kills what its tests leave, in their groups or (moved out) in
// their sessions; a process its caller left it (a shell's background job
// before `exec memrun`: memrun's child from the start, outside every test's
// group) is not a test's and lives on.
// Kills and clean-up of a scope: proven under systemd too.
MEMRUN_LANES(Faults, "ACallersBackgroundJob*", kHostLane | kV2Lane | kSystemdLane);
TEST_F(Faults, ACallersBackgroundJobIsNeverTouched) {
  std::string pidfile = dir.path() + "/job.pid";
  auto run = run_spec_with(dir,
                           "tests:\n  - {name: ooms, run: [{W}, --touch, 100MiB], memory: 32MiB, expect: oom}\n"
                           "  - {name: daemon, run: 'sleep 60 & exit 0', memory: 16MiB}\n",
                           {"sh", "-c", "sleep 60 & echo $! > \"$0\"; exec \"$@\"", pidfile, memrun_bin()});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  for (const auto& t : run.report["tests"]) EXPECT_EQ(t["escaped_processes"], 0) << t["name"];
  int pid = 0;
  std::ifstream(pidfile) >> pid;
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(process_alive(pid)) << "memrun killed its caller's background job";
  ::kill(pid, SIGKILL);
}

// Global pressure beside a scope: proven under systemd too.
MEMRUN_LANES(Faults, "UnderGlobalPressure*", kHostLane | kV2Lane | kSystemdLane);
TEST_F(Faults, UnderGlobalPressureTheKernelPicksTestsBeforeMemrun) {
  // --host-cgroups: $PPID is memrun itself, not a sealed test's init (PID 1
  // of its pid namespace, at -1000: the kernel never picks it either).
  auto run = run_spec(dir, "tests:\n  - {name: t, run: 'cat /proc/self/oom_score_adj /proc/$PPID/oom_score_adj', memory: 16MiB}\n",
                      {"--host-cgroups"});
  std::istringstream lines(read_text(test_named(run, "t")["stdout"].get<std::string>()));
  int test_score = 0, memrun_score = 0;
  ASSERT_TRUE(lines >> test_score >> memrun_score);
  EXPECT_GE(test_score - memrun_score, 500) << "test " << test_score << ", memrun " << memrun_score;
  // With CAP_SYS_RESOURCE memrun lowers its own score and the test keeps the
  // one memrun started with; without, the test's is raised.
  int mine = std::atoi(trimmed(read_text("/proc/self/oom_score_adj", "0")).c_str());
  if (memrun_score == -500) EXPECT_EQ(test_score, mine);
  else EXPECT_EQ(test_score, std::min(1000, mine + 500));
}

// Every malformed spec of tests/bad-specs/ gives exit 2 and its message,
// with the file named; never a crash.
// memrun's own, whatever the backend: on the host only.
MEMRUN_LANES(Faults, "BadSpecsGiveAClearErrorNeverACrash", kHostLane);
TEST_F(Faults, BadSpecsGiveAClearErrorNeverACrash) {
  std::string corpus = std::string(SOURCE_DIR) + "/tests/bad-specs";
  std::ifstream expected(corpus + "/expected.txt");
  int checked = 0;
  for (std::string line; std::getline(expected, line);) {
    auto tab = line.find('\t');
    std::string file = corpus + "/" + line.substr(0, tab), message = line.substr(tab + 1);
    auto run = run_memrun({file, "--run-dir", dir.path() + "/runs"});
    EXPECT_EQ(run.exit_code, 2) << file << ": " << run.err;
    EXPECT_EQ(run.err.rfind("memrun: " + file, 0), 0u) << run.err;
    EXPECT_NE(run.err.find(message), std::string::npos) << file << ": " << run.err;
    ++checked;
  }
  EXPECT_GE(checked, 15);
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/runs")) << "an invalid spec ran something";
  auto directory = run_memrun({corpus});
  EXPECT_EQ(directory.exit_code, 2);
  EXPECT_NE(directory.err.find("is a directory"), std::string::npos) << directory.err;
  auto missing = run_memrun({dir.path() + "/no-such.yaml"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("no-such.yaml"), std::string::npos) << missing.err;
}

// A backend's pids limit and kills: proven under systemd too.
MEMRUN_LANES(Faults, "AForkBomb*", kHostLane | kV2Lane | kSystemdLane);
TEST_F(Faults, AForkBombIsBoundedAndReported) {
  // The bomb outgrows 64 pids in well under the timeout; the timeout ends it.
  auto run = run_spec(dir, "tests:\n  - {name: bomb, run: 'b() { b | b & }; b; sleep 600', memory: 256MiB, pids: 64, timeout: 10s}\n");
  const auto& t = test_named(run, "bomb");
  EXPECT_EQ(t["outcome"], "timeout") << run.out;
  EXPECT_GT(t["kernel"]["refused_forks"], 0) << "pids.max never refused a fork";
}

TEST_F(Faults, FillingDevShmIsChargedToTheTest) {
  auto run = run_spec(dir, "tests:\n  - {name: shm, run: [{W}, --shm, 200MiB, --hold, 1s], memory: 64MiB}\n");
  const auto& t = test_named(run, "shm");
  EXPECT_EQ(t["outcome"], "oom") << run.out;
  EXPECT_GT(t["breakdown_at_peak"]["shmem"], 8u << 20) << "tmpfs pages were not charged as shmem";
}

TEST_F(Faults, ALimitTooSmallToEvenStartGivesAClearVerdict) {
  auto run = run_spec(dir, "tests:\n  - {name: tiny, run: [{W}, --touch, 4MiB], memory: 1MiB}\n");
  const auto& t = test_named(run, "tiny");
  EXPECT_TRUE(t["outcome"] == "oom" || t["outcome"] == "fail" || t["outcome"] == "thrash") << run.out;
  EXPECT_EQ(run.exit_code, 1);
}

// memrun's own, whatever the backend: on the host only.
MEMRUN_LANES(Faults, "AFullDisk*", kHostLane);
TEST_F(Faults, AFullDiskKeepsThePreviousReportAndSaysSo) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root";
  std::string disk = dir.path() + "/disk";
  std::filesystem::create_directories(disk);
  ASSERT_EQ(run_program({"mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", disk}).exit_code, 0);
  std::string report = disk + "/report.json";
  std::ofstream(report) << "{\"previous\": true}";
  // Fill the rest of the filesystem.
  run_program({"sh", "-c", "head -c 1M /dev/zero > " + disk + "/filler"});
  std::string spec = dir.write("spec.yaml", "tests:\n  - {name: t, run: 'true', memory: 16MiB}\n");
  auto run = run_memrun({spec, "--json", report, "--run-dir", dir.path() + "/runs"});
  std::string previous = read_text(report);
  auto files = run_program({"ls", "-A", disk}).out;
  run_program({"umount", disk});
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_NE(run.err.find("cannot write the report " + report), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("No space left on device"), std::string::npos) << run.err;
  EXPECT_EQ(previous, "{\"previous\": true}") << "the previous report was damaged";
  EXPECT_EQ(files, "filler\nreport.json\n") << "a temporary file was left behind";
}

TEST_F(Faults, AFullDiskCostsALogNotTheRun) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root";
  std::string disk = dir.path() + "/disk";
  std::filesystem::create_directories(disk);
  ASSERT_EQ(run_program({"mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", disk}).exit_code, 0);
  std::string spec = dir.write("spec.yaml", "tests:\n  - {name: chatty, run: 'head -c 10000000 /dev/zero; exit 0', memory: 64MiB}\n"
                                            "  - {name: quiet, run: 'true', memory: 16MiB}\n");
  std::string report = dir.path() + "/report.json";
  auto run = run_memrun({spec, "--json", report, "--run-dir", disk + "/runs"});
  run_program({"umount", disk});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  auto j = nlohmann::json::parse(read_text(report, "{}"));
  ASSERT_EQ(j["tests"].size(), 2u) << run.out << run.err;
  const auto& chatty = j["tests"][0];
  EXPECT_TRUE(chatty["passed"]) << "a lost log changed the verdict";
  EXPECT_EQ(chatty["stdout_bytes"], 10000000u) << "the test did not write on (SIGPIPE?)";
  EXPECT_NE(chatty["reason"].get<std::string>().find("No space left on device; its output was discarded"),
            std::string::npos) << chatty["reason"];
  EXPECT_TRUE(j["tests"][1]["stdout"].is_null()) << "a quiet test made a log file";
}

// memrun's own, whatever the backend: on the host only.
MEMRUN_LANES(Faults, "BinaryOutputStillGivesValidReports", kHostLane);
TEST_F(Faults, BinaryOutputStillGivesValidReports) {
  std::string xml = dir.path() + "/junit.xml";
  auto run = run_spec(dir, "tests:\n  - {name: t, run: 'head -c 3000 /dev/urandom >&2; exit 1', memory: 16MiB}\n",
                      {"--junit", xml});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_FALSE(run.report.is_null()) << "the JSON report must parse: " << run.err;
  auto check = run_program({"xmllint", "--noout", xml});
  EXPECT_EQ(check.exit_code, 0) << check.err;
}

}  // namespace
}  // namespace memrun::testing

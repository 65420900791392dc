// What memrun promises most firmly, tried as a hostile test would, against
// the real kernel (the host's v1, and the v2 and systemd VMs): it touches no
// process it cannot prove its own, a test cannot lose the report or pass
// after defeating its limit, and no test data becomes a command or markup.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "harness.h"
#include "lanes.h"
#include "runner/base/shell.h"
#include "runner/base/units.h"

namespace memrun::testing {
namespace {

class Trust : public MemrunTest {};

// Shell lines that find the test's own memory cgroup: $G its directory, $L
// its hard-limit file (v1's memory line of /proc/self/cgroup, else v2's).
const std::string kFindGroup =
    "G=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print \"/sys/fs/cgroup/memory\" $3}' /proc/self/cgroup); "
    "[ -n \"$G\" ] || G=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup); "
    "if [ -e $G/memory.max ]; then L=memory.max; else L=memory.limit_in_bytes; fi; ";

// The root of the hierarchy that holds memory (v1's memory, or v2's): a
// group outside every test's, which takes processes on v2 too.
const std::string kRoot = "R=/sys/fs/cgroup/memory; [ -d $R ] || R=/sys/fs/cgroup; ";

std::string yaml_quoted(const std::string& text) {
  // For a single-quoted YAML scalar: ' is written ''.
  std::string out;
  for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return "'" + out + "'";
}

// True when memrun seals tests here (root, cgroup namespaces), as doctor says.
bool sealing() {
  return run_memrun({"doctor"}).out.find("sealed             yes") != std::string::npos;
}

// What a test can do against its limit: proven on every backend (exceptions are labelled at their tests).
MEMRUN_LANES(Trust, "*", kHostLane | kV2Lane | kSystemdLane);

TEST_F(Trust, ATestThatRaisesItsLimitNeverPasses) {
  // As root a test can write its group's files: it raises its limit, then
  // touches three times what memrun allowed. Sealed, the limit it can reach
  // is its own leaf's and the kernel still holds it to 64 MiB (with
  // nsdelegate the write is even refused); with --host-cgroups it raises
  // the real one, and memrun finds that at the end.
  std::string raise = kFindGroup +
                      "[ -e $G/memory.memsw.limit_in_bytes ] && echo 1G > $G/memory.memsw.limit_in_bytes; "
                      "echo 1G > $G/$L || [ -z \"$MUST_RAISE\" ] || exit 99; exec {W} --touch 200MiB";
  std::string spec = "tests:\n  - {name: raiser, run: " + yaml_quoted(raise) + ", memory: 64MiB}\n";
  if (sealing()) {
    SCOPED_TRACE("sealed");
    auto run = run_spec(dir, spec);
    EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
    const auto& t = test_named(run, "raiser");
    EXPECT_FALSE(t["passed"]) << t;
    EXPECT_EQ(t["limit_at_end_bytes"], 64u << 20) << "the limit memrun set was changed: " << t;
    EXPECT_LE(t["peak_bytes"].get<uint64_t>(), 64u << 20) << t;
  }
  SCOPED_TRACE("--host-cgroups");
  auto run = run_spec(dir, "env: {MUST_RAISE: 1}\n" + spec, {"--host-cgroups"});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  const auto& t = test_named(run, "raiser");
  EXPECT_FALSE(t["passed"]);
  EXPECT_NE(t["reason"].get<std::string>().find("the test defeated its memory limit"), std::string::npos) << t;
  EXPECT_EQ(t["limit_at_end_bytes"], 1u << 30) << t;
}

TEST_F(Trust, AnOomUnderALimitTheTestLoweredNeverMeetsExpectOom) {
  // As root a test can lower the limit it reaches (sealed: its leaf's; else
  // its group's) and be OOM-killed under it: `expect: oom` is never met by
  // a limit the test chose, whether it left the limit lowered or put it
  // back after a child was killed under it.
  std::string lower = "lower() { if [ -e $1/memory.max ]; then echo $2 > $1/memory.max; "
                      "else echo $2 > $1/memory.limit_in_bytes; fi; }; ";
  std::string left = kFindGroup + lower + "lower $G 8M || exit 99; exec {W} --touch 32MiB";
  std::string back = kFindGroup + lower + "lower $G 8M || exit 99; {W} --touch 32MiB; lower $G 64M || exit 98; exit 0";
  // Touching near the limit first puts the kernel's peak there: only a
  // sample of the lowered limit (held 2 s; a sample every 20 ms) tells.
  // (On v2 memrun's leaf kills as a group: the test turns that off, else
  // its shell dies with the child and the limit stays lowered.)
  std::string near = kFindGroup + lower + "echo 0 > $G/memory.oom.group 2>/dev/null; {W} --touch 60MiB; " +
                     "lower $G 8M || exit 99; {W} --touch 32MiB; sleep 2; lower $G 64M || exit 98; exit 0";
  auto run = run_spec(dir, "tests:\n  - {name: left, run: " + yaml_quoted(left) + ", memory: 64MiB, expect: oom}\n"
                           "  - {name: back, run: " + yaml_quoted(back) + ", memory: 64MiB, expect: oom}\n"
                           "  - {name: near, run: " + yaml_quoted(near) + ", memory: 64MiB, expect: oom}\n");
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  for (const char* name : {"left", "back", "near"}) {
    const auto& t = test_named(run, name);
    EXPECT_FALSE(t["passed"]) << t.dump();
    // Where the kernel refuses the write (a systemd scope's leaf: exit 99)
    // there was nothing to lower; else the reason says whose limit it was.
    if (t["exit_code"] != 99) {
      EXPECT_NE(t["reason"].get<std::string>().find("memrun set"), std::string::npos) << t.dump();
    }
  }
  // Put back before the end, after a peak near the limit: only the samples
  // saw the lowered limit.
  const auto& near_record = test_named(run, "near");
  if (near_record["exit_code"] == 0) {
    EXPECT_NE(near_record["reason"].get<std::string>().find("while it ran, not the 64.0 MiB memrun set: the test lowered"),
              std::string::npos)
        << near_record.dump();
  }
}

TEST_F(Trust, AnOomUnderALimitLoweredForAMomentBetweenSamplesNeverMeetsExpectOom) {
  // The limit is lowered only while one child is killed under it, then put
  // back; no sample sees it (one every 10 s). The kernel's OOM report says
  // the limit the kill came at. Its reports are rate-limited (ten in five
  // seconds, machine-wide): a run whose kill the log did not name is tried
  // again once the window has passed.
  std::string blink = kFindGroup +
                      "lower() { if [ -e $1/memory.max ]; then echo $2 > $1/memory.max; "
                      "else echo $2 > $1/memory.limit_in_bytes; fi; }; "
                      "echo 0 > $G/memory.oom.group 2>/dev/null; {W} --touch 60MiB; "
                      "lower $G 8M || exit 99; {W} --touch 32MiB; lower $G 64M || exit 98; exit 0";
  std::string spec = "tests:\n  - {name: blink, run: " + yaml_quoted(blink) + ", memory: 64MiB, expect: oom}\n";
  auto run = run_spec(dir, spec, {"--sample-interval", "10s"});
  auto unnamed = [&] {
    const auto& v = test_named(run, "blink")["oom_victims"];
    return test_named(run, "blink")["oom_kills"] > 0 && (v.empty() || v[0]["oom_memcg"].is_null());
  };
  for (int tries = 0; tries < 2 && unnamed(); ++tries) {
    std::this_thread::sleep_for(std::chrono::seconds(6));
    run = run_spec(dir, spec, {"--sample-interval", "10s"});
  }
  const auto& t = test_named(run, "blink");
  EXPECT_FALSE(t["passed"]) << t.dump();
  // Where the kernel refuses the write (a systemd scope's leaf: exit 99)
  // there was nothing to lower, and no kill.
  if (t["exit_code"] == 99) return;
  EXPECT_NE(t["reason"].get<std::string>().find("memory limit was written while it ran"), std::string::npos)
      << t.dump();
  // Where the kernel's report named the kill (root, not rate-limited), it
  // says the limit the kill came at, and the kill is not memrun's.
  if (!t["oom_victims"].empty() && !t["oom_victims"][0]["limit_bytes"].is_null()) {
    EXPECT_EQ(t["oom_victims"][0]["limit_bytes"], 8u << 20) << t.dump();
    EXPECT_EQ(t["oom_at_limit"], false) << t.dump();
  }
}

// Shell lines that raise the limit of the group in $1 (and its swap limit,
// which v1 keeps at or above it) to 1G, or put both back to 32M.
const std::string kRaiseAndLower =
    "raise() { [ -e $1/memory.memsw.limit_in_bytes ] && echo 1G > $1/memory.memsw.limit_in_bytes; "
    "if [ -e $1/memory.max ]; then echo 1G > $1/memory.max; else echo 1G > $1/memory.limit_in_bytes; fi; }; "
    "lower() { if [ -e $1/memory.max ]; then echo 32M > $1/memory.max; else echo 32M > $1/memory.limit_in_bytes; fi; "
    "[ -e $1/memory.memsw.limit_in_bytes ] && echo 32M > $1/memory.memsw.limit_in_bytes; "
    "[ -e $1/memory.max_usage_in_bytes ] && echo 0 > $1/memory.max_usage_in_bytes; true; }; ";

// What must hold of a test that raised its limit, used 200 MiB, put the
// limit back and reset the kernel's high-water mark: it does not pass, and
// the peak reported is never below what memrun's own samples saw.
void expect_not_passed_and_peak_at_least_the_samples(const RunOutput& run, const std::string& name) {
  const auto& t = test_named(run, name);
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_FALSE(t["passed"]) << t.dump();
  uint64_t highest = 0;
  for (const auto& c : t["timeline"]["current"]) highest = std::max(highest, c.get<uint64_t>());
  EXPECT_GE(t["peak_bytes"].get<uint64_t>(), highest) << "the peak reported is below a sample: " << t.dump();
  EXPECT_GE(t["peak_bytes"].get<uint64_t>(), t["sampled_peak_bytes"].get<uint64_t>()) << t.dump();
}

TEST_F(Trust, ALimitRaisedWhileTheTestRanAndPutBackFailsIt) {
  // --host-cgroups: the test can write its group's files. It raises its
  // limit, touches 200 MiB for a while (memrun samples every 20 ms), puts
  // the limit back and, on v1, resets memory.max_usage_in_bytes: every
  // figure at the end says 1.5 MiB of 32. memrun's samples saw the rest.
  std::string name = "raise-use-lower-reset-" + std::to_string(::getpid());
  std::string script = kFindGroup + kRaiseAndLower + "raise $G || exit 99; {W} --touch 200MiB --hold 2s || exit 98; lower $G";
  auto run = run_spec(dir, "tests:\n  - {name: " + name + ", run: " + yaml_quoted(script) + ", memory: 32MiB}\n",
                      {"--host-cgroups"});
  expect_not_passed_and_peak_at_least_the_samples(run, name);
  const auto& t = test_named(run, name);
  EXPECT_EQ(t["limit_at_end_bytes"], 32u << 20) << "the test did not put its limit back: " << t.dump();
  EXPECT_NE(t["reason"].get<std::string>().find("the test defeated its memory limit"), std::string::npos) << t.dump();
}

TEST_F(Trust, APeakResetByTheTestNeverPasses) {
  // --host-cgroups, no samples: the test touches 56 MiB of its 64, frees
  // them and writes its group's high-water mark. On v1 a write of 0 resets
  // it for every reader (the peak would read under 1 MiB, the headroom
  // asked for met); v2's memory.peak resets only for the descriptor written.
  std::string name = "spike-then-reset-" + std::to_string(::getpid());
  std::string script = kFindGroup +
                       "{W} --touch 56MiB || exit 99; if [ -e $G/memory.max_usage_in_bytes ]; then "
                       "echo 0 > $G/memory.max_usage_in_bytes || exit 98; "
                       "[ -e $G/memory.memsw.max_usage_in_bytes ] && echo 0 > $G/memory.memsw.max_usage_in_bytes; "
                       "else echo reset > $G/memory.peak 2> /dev/null; fi; true";  // (6.12+)
  auto run = run_spec(dir,
                      "tests:\n  - {name: " + name + ", run: " + yaml_quoted(script) +
                          ", memory: 64MiB, min_headroom: 50%}\n",
                      {"--host-cgroups", "--sample-interval", "0"});
  const auto& t = test_named(run, name);
  EXPECT_EQ(t["exit_code"], 0) << t.dump();
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_FALSE(t["passed"]) << t.dump();
  if (t["peak_reset"] == true) {
    EXPECT_NE(t["reason"].get<std::string>().find("the test defeated its memory limit: its cgroup's peak"),
              std::string::npos) << t.dump();
  } else {
    // Nothing reset memrun's peak: the headroom asked for is missed.
    EXPECT_GE(t["peak_bytes"].get<uint64_t>(), 56u << 20) << t.dump();
  }
}

// The kernel log is read for every test on v1 only (the host's layout).
MEMRUN_LANES(Trust, "KillLinesATestWritesToTheKernelLogAreNotBelieved", kHostLane);
TEST_F(Trust, KillLinesATestWritesToTheKernelLogAreNotBelieved) {
  if (::geteuid() != 0) GTEST_SKIP() << "/dev/kmsg is root's to write";
  // On v1 (host only, tests/CMakeLists.txt), where memrun reads the kernel
  // log for every test.
  // A root test gets a child OOM-killed under a sub-limit of its own, then
  // writes to /dev/kmsg the lines of a kill at memrun's limit (its group,
  // the same victim): `expect: oom` must still not be met. The kernel's
  // own records have facility 0; what a process writes there never has.
  // The kill's own line names the group (task_memcg=GROUP/sub): the forged
  // one names GROUP itself, at its 64 MiB. Then the test fills its group
  // near the limit, as a kill there would have.
  std::string forger = dir.write("forge.py", R"py(import os, re, subprocess, sys
g = sys.argv[1]
log = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
os.lseek(log, 0, os.SEEK_END)
subprocess.run(["sh", "-c", "echo $$ > %s/sub/cgroup.procs && exec %s --touch 64MiB" % (g, sys.argv[2])])
real = None
for _ in range(200):
    try:
        record = os.read(log, 8192).decode(errors="replace")
    except BlockingIOError:
        if real: break
        subprocess.run(["sleep", "0.01"]); continue
    if "oom-kill:" in record: real = record.split(";", 1)[1]
m = re.search(r"task_memcg=(.*)/sub,task=([^,]*),pid=(\d+)", real or "")
if not m: sys.exit("no kill seen: %r" % real)
group, task, pid = m.groups()
out = os.open("/dev/kmsg", os.O_WRONLY)
for line in ["<6>memory: usage 65536kB, limit 65536kB, failcnt 1",
             "<6>oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=%s,"
             "task_memcg=%s,task=%s,pid=%s,uid=0" % (group, group, task, pid),
             "<3>Memory cgroup out of memory: Killed process %s (%s) total-vm:99999kB, anon-rss:60000kB, "
             "file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:0kB oom_score_adj:0" % (pid, task)]:
    os.write(out, (line + "\n").encode())
)py");
  std::string forge = kFindGroup +
                      "mkdir $G/sub || exit 99; "
                      "if [ $L = memory.max ]; then echo +memory > $G/cgroup.subtree_control || exit 98; fi; "
                      "echo 4M > $G/sub/$L || exit 97; python3 " + forger + " $G {W} || exit 96; exec {W} --touch 60MiB";
  auto run = run_spec(dir, "tests:\n  - {name: forges, run: " + yaml_quoted(forge) +
                               ", memory: 64MiB, expect: oom}\n");
  const auto& t = test_named(run, "forges");
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_FALSE(t["passed"]) << t.dump();
  EXPECT_NE(t["reason"].get<std::string>().find("under a limit the test set itself"), std::string::npos) << t.dump();
}

TEST_F(Trust, ASealedTestThatReachesItsHiddenGroupDoesNotPass) {
  if (!sealing()) GTEST_SKIP() << "memrun does not seal tests here (doctor: sealed no)";
  // The same through the host's hierarchy as memrun's root shows it
  // (/proc/$PPID/root), where the test's hidden group and its leaf are.
  // Where no such door is open (a pid namespace of its own) the test finds
  // nothing to raise and is OOM-killed: it does not pass either way.
  std::string name = "reach-raise-reset-" + std::to_string(::getpid());
  std::string script = kRaiseAndLower +
                       "R=/proc/$PPID/root/sys/fs/cgroup; L=; for M in $R/memory $R; do [ -d $M ] && "
                       "L=$(find $M -maxdepth 9 -type d -path \"*-$MEMRUN_TEST/test\" 2>/dev/null | head -n 1); "
                       "[ -n \"$L\" ] && break; done; echo \"leaf: $L\"; "
                       "if [ -n \"$L\" ]; then raise $L/..; raise $L; fi; {W} --touch 200MiB --hold 2s; "
                       "if [ -n \"$L\" ]; then lower $L; lower $L/..; fi; true";
  auto run = run_spec(dir, "tests:\n  - {name: " + name + ", run: " + yaml_quoted(script) + ", memory: 32MiB}\n");
  expect_not_passed_and_peak_at_least_the_samples(run, name);
  const auto& t = test_named(run, name);
  std::string reason = t["reason"].get<std::string>();
  bool defeated = reason.find("the test defeated its memory limit") != std::string::npos;
  EXPECT_TRUE(defeated || t["outcome"] == "oom") << t.dump();
}

TEST_F(Trust, AnOomKillInASubGroupTheTestRemovedIsStillFound) {
  // A child OOM-killed at the test's own limit inside a sub-group the test
  // made, which it then removes: v1 counts the kill only in that sub-group
  // (gone), the kernel log still names it. The test exits 0.
  std::string script = kFindGroup +
                       "mkdir $G/sub || exit 99; sh -c \"echo \\$\\$ > $G/sub/cgroup.procs && exec {W} --touch 200MiB\"; "
                       "rmdir $G/sub || exit 98; exit 0";
  auto run = run_spec(dir, "tests:\n  - {name: hides, run: " + yaml_quoted(script) + ", memory: 32MiB}\n");
  const auto& t = test_named(run, "hides");
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_FALSE(t["passed"]) << t.dump();
  EXPECT_EQ(t["outcome"], "oom") << t.dump();
  EXPECT_GE(t["oom_kills"].get<uint64_t>(), 1u) << t.dump();
}

TEST_F(Trust, SocketBuffersAreChargedAndLimited) {
  // TCP buffers on 127.0.0.1 that nobody reads: v2 charges them with the
  // rest; v1 only once memory.kmem.tcp.limit_in_bytes was written. 256 MiB
  // of them under 32 MiB must not pass; 48 MiB under 256 MiB does (the
  // workload can queue that much here). v1 limits them on a counter of
  // their own: 40 MiB of memory beside 40 MiB of them is 80 MiB, which
  // must not pass under 64 MiB (each alone is under it).
  auto run = run_spec(dir, "tests:\n  - {name: fits, run: '{W} --tcp-queue 48MiB', memory: 256MiB}\n"
                           "  - {name: queues, run: '{W} --tcp-queue 256MiB', memory: 32MiB, timeout: 60s}\n"
                           "  - {name: both, run: '{W} --touch 40MiB --tcp-queue 40MiB', memory: 64MiB, timeout: 60s}\n");
  EXPECT_TRUE(test_named(run, "fits")["passed"]) << run.out << run.err;
  for (const char* name : {"queues", "both"}) {
    const auto& t = test_named(run, name);
    EXPECT_FALSE(t["passed"]) << t.dump();
  }
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
}

TEST_F(Trust, AThreadThatLeavesItsGroupAloneNeverPasses) {
  // One thread of the test writes itself alone into the group memrun runs
  // in (v1's `tasks`), fills 256 pipes of 1 MiB there, where the kernel
  // charges them, and comes back: its process never left the test's group,
  // whose peak stays far below the limit. Unsealed it can (v2 refuses a
  // lone thread outside its process's threaded subtree: exit 3); sealed, no
  // group outside the test's is within its reach.
  std::string away = kFindGroup + "exec {W} --thread-away $G/../.. --pipes 256 --away 3s";
  std::string spec = "tests:\n  - {name: away, run: " + yaml_quoted(away) + ", memory: 64MiB}\n";
  for (bool host : {true, false}) {
    if (!host && !sealing()) continue;
    SCOPED_TRACE(host ? "--host-cgroups" : "sealed");
    auto run = run_spec(dir, spec, host ? std::vector<std::string>{"--host-cgroups"} : std::vector<std::string>{});
    const auto& t = test_named(run, "away");
    EXPECT_FALSE(t["passed"]) << t.dump();
    EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  }
}

TEST_F(Trust, ATaskThatLeavesItsGroupAndReturnsBetweenTwoWalksNeverPasses) {
  // One thread, then the whole process, leaves for the hierarchy's root
  // (which takes processes on v2 too, where a slice above a scope does
  // not: EBUSY), fills 256 pipes of 1 MiB there and comes back at once, before the
  // first walk (samples every 500 ms, a walk every fifth), then lingers
  // past it: every walk finds it home. The kernel's record of the move
  // (memrun's watch) fails it, however short the trip. (v2 refuses a lone
  // thread outside its process's threaded subtree: exit 3, a failure too.)
  for (const char* whole : {"", " --whole"}) {
    std::string away = kFindGroup + kRoot + "exec {W} --thread-away $R" + whole + " --pipes 256 --away 1ms --hold 1200ms";
    std::string spec = "tests:\n  - {name: away, run: " + yaml_quoted(away) + ", memory: 64MiB}\n";
    SCOPED_TRACE(*whole ? "the whole process" : "one thread");
    auto run = run_spec(dir, spec, {"--host-cgroups", "--sample-interval", "500ms"});
    const auto& t = test_named(run, "away");
    EXPECT_FALSE(t["passed"]) << t.dump();
    EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
    if (*whole) EXPECT_NE(t["reason"].get<std::string>().find("moved out of its memory cgroup"), std::string::npos) << t.dump();
  }
}

TEST_F(Trust, ATestThatSilencesMemrunsRecordOfMovesBeforeLeavingNeverPasses) {
  // The same trip, after the test turned off its own memrun's record of
  // moves (the tracefs instance memrun-PPID-N, which a root test reaches
  // unsealed): tracing, then the event itself. A record whose controls
  // were written is no record: the test fails.
  for (const char* control : {"tracing_on", "events/cgroup/cgroup_attach_task/enable"}) {
    std::string away = "for f in /sys/kernel/tracing/instances/memrun-$PPID-*/" + std::string(control) +
                       "; do echo 0 > $f; done; " + kRoot + "exec {W} --thread-away $R --whole --pipes 64 "
                       "--away 1ms --hold 1200ms";
    SCOPED_TRACE(control);
    auto run = run_spec(dir, "tests:\n  - {name: silences, run: " + yaml_quoted(away) + ", memory: 64MiB}\n",
                        {"--host-cgroups", "--sample-interval", "500ms"});
    const auto& t = test_named(run, "silences");
    EXPECT_FALSE(t["passed"]) << t.dump() << run.err;
    EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  }
}

TEST_F(Trust, ATestThatTakesMemrunsRecordOfMovesNeverPasses) {
  // The same trip, while the test itself reads memrun's record (a root
  // test reaches the instance unsealed): a pipe hands each event to one
  // reader, so what the test takes memrun never sees. The kernel counts
  // the events read; more than memrun took is a record that lies.
  std::string away = "for p in /sys/kernel/tracing/instances/memrun-$PPID-*/per_cpu/cpu*/trace_pipe_raw; do "
                     "cat $p > /dev/null & done; " + kRoot + "{W} --thread-away $R --whole --pipes 64 --away 1ms "
                     "--hold 1200ms; s=$?; kill $(jobs -p); exit $s";
  auto run = run_spec(dir, "tests:\n  - {name: takes, run: " + yaml_quoted(away) + ", memory: 64MiB}\n",
                      {"--host-cgroups", "--sample-interval", "500ms"});
  const auto& t = test_named(run, "takes");
  EXPECT_FALSE(t["passed"]) << t.dump() << run.err;
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
}

TEST_F(Trust, AChildBornInAnotherGroupNeverPasses) {
  // clone3 with CLONE_INTO_CGROUP (v2, 5.7+): a child born outside the
  // test's group, never moved, touches 200 MiB there (charged there, not
  // to the test) and exits at once; its parent lingers past the first
  // walk, which finds only it, at home. Born in the hierarchy's root (which
  // has tasks: memrun reads where the child is while it lives), then in a
  // group it made empty (the kernel names the group the birth populated).
  // (v1 refuses a v1 group: exit 3.)
  for (const char* where : {"$R", "$R/memrun-born-$$"}) {
    std::string born = kRoot + "mkdir -p " + where + " && {W} --born-in " + where +
                       " --born-touch 200MiB --hold 1200ms; s=$?; [ " + where + " = $R ] || rmdir " + where + "; exit $s";
    SCOPED_TRACE(where);
    auto run = run_spec(dir, "tests:\n  - {name: born, run: " + yaml_quoted(born) + ", memory: 64MiB}\n",
                        {"--host-cgroups", "--sample-interval", "500ms"});
    const auto& t = test_named(run, "born");
    EXPECT_FALSE(t["passed"]) << t.dump() << run.err;
    EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
    if (run.report["host"]["backend"] != "v1") {
      EXPECT_NE(t["reason"].get<std::string>().find("moved out of its memory cgroup"), std::string::npos) << t.dump();
    }
  }
}

// A birth in a group of the test's own is a birth at home: v2 only (v1's
// groups take no clone3 birth).
MEMRUN_LANES(Trust, "AChildBornInAGroupOfItsOwnPasses", kV2Lane | kSystemdLane);

TEST_F(Trust, AChildBornInAGroupOfItsOwnPasses) {
  // The child exits at once, gone long before memrun reads the kernel's
  // record (every 100 ms here): the sub-group its birth populated says
  // where it was.
  std::string born = kFindGroup + "mkdir $G/sub && exec {W} --born-in $G/sub --hold 300ms";
  auto run = run_spec(dir, "tests:\n  - {name: born, run: " + yaml_quoted(born) + ", memory: 64MiB}\n",
                      {"--host-cgroups", "--sample-interval", "500ms"});
  const auto& t = test_named(run, "born");
  EXPECT_TRUE(t["passed"]) << t.dump() << run.err;
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
}

TEST_F(Trust, ATaskThatMovesWithinItsOwnSubGroupsPasses) {
  // With sub_groups, a test may move its tasks into groups below its own
  // and back: no move leaves its limit, and the watch says nothing.
  std::string script = kFindGroup + "mkdir $G/sub && exec {W} --thread-away $G/sub --whole --pipes 4 --away 1ms --hold 300ms";
  auto run = run_spec(dir, "tests:\n  - {name: inside, run: " + yaml_quoted(script) + ", memory: 64MiB, sub_groups: true}\n",
                      {"--host-cgroups"});
  const auto& t = test_named(run, "inside");
  EXPECT_TRUE(t["passed"]) << t.dump() << run.err;
  EXPECT_EQ(t["escaped_processes"], 0) << t.dump();
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
}

TEST_F(Trust, SocketBuffersQueuedFromASubGroupTheTestMadeNeverPass) {
  // The test makes a memory sub-group of its own, moves a child there and
  // queues 256 MiB in TCP buffers under 32 MiB. v2 charges sockets in every
  // group: the queue fails. v1 charges none in a group whose TCP limit was
  // not written before the socket was made, which memrun cannot make sure
  // of (the child may enter the moment the group exists): a test that
  // makes a memory sub-group fails there, unless its spec allows it.
  std::string script = kFindGroup + "mkdir $G/sub || exit 99; "
                                    "sh -c \"echo \\$\\$ > $G/sub/cgroup.procs && exec {W} --tcp-queue 256MiB\"";
  for (bool host : {false, true}) {
    if (!host && !sealing()) continue;
    SCOPED_TRACE(host ? "--host-cgroups" : "sealed");
    auto run = run_spec(dir, "tests:\n  - {name: queues, run: " + yaml_quoted(script) + ", memory: 32MiB, timeout: 60s}\n",
                        host ? std::vector<std::string>{"--host-cgroups"} : std::vector<std::string>{});
    const auto& t = test_named(run, "queues");
    EXPECT_FALSE(t["passed"]) << t.dump();
    EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
    if (run.report["host"]["backend"] == "v1") {
      EXPECT_NE(t["reason"].get<std::string>().find("made a memory sub-group (/sub)"), std::string::npos) << t.dump();
    }
  }
  // A sub-group made and removed again before the end is seen as well.
  auto removed = run_spec(dir, "tests:\n  - {name: removes, run: " + yaml_quoted(kFindGroup + "mkdir $G/sub && rmdir $G/sub") +
                                   ", memory: 32MiB}\n");
  const auto& r = test_named(removed, "removes");
  if (removed.report["host"]["backend"] == "v1") {
    EXPECT_NE(r["reason"].get<std::string>().find("made a memory sub-group (one it removed again)"), std::string::npos)
        << r.dump();
  }
}

TEST_F(Trust, ASealedTestSeesItsOwnGroupAsTheRootWithItsLimitAndCannotLeaveIt) {
  if (!sealing()) GTEST_SKIP() << "memrun does not seal tests here (doctor: sealed no)";
  // It looks for a way up: its cgroups as /proc says, the limit it reads as
  // its own (runtimes size their heaps from it), the root's cgroup.procs,
  // the mounts' parent. Then it touches 200 MiB under 64.
  std::string seen = dir.path() + "/seen";
  std::string look = kFindGroup + "{ cat /proc/self/cgroup; echo limit $(cat $G/$L); } > " + seen +
                     "; echo $$ > $G/cgroup.procs; echo $$ > $G/../cgroup.procs; "
                     "for f in /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/*/cgroup.procs; do "
                     "[ -e $f ] && echo $$ > $f; done; "
                     "grep -v ':/$' /proc/self/cgroup >> " + seen + "; exec {W} --touch 200MiB";
  auto run = run_spec(dir, "tests:\n  - {name: looker, run: " + yaml_quoted(look) + ", memory: 64MiB}\n");
  const auto& t = test_named(run, "looker");
  EXPECT_EQ(t["outcome"], "oom") << run.out << run.err;
  EXPECT_EQ(t["oom_kills"], 1) << t;
  EXPECT_EQ(t["escaped_processes"], 0) << t;
  std::string text = read_text(seen);
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("limit ", 0) == 0)
      EXPECT_EQ(line, "limit " + std::to_string(64u << 20)) << "the limit the test sees as its own";
    else
      EXPECT_EQ(line.substr(line.size() - 2), ":/") << "a cgroup the test sees above its own: " << text;
  }
  EXPECT_NE(text.find("limit "), std::string::npos) << text;
}

TEST_F(Trust, ANestedMemrunGetsASubtreeOfItsOwnInsideASealedTest) {
  if (!sealing()) GTEST_SKIP() << "memrun does not seal tests here (doctor: sealed no)";
  // Tests that use cgroups themselves (memrun, a container runtime) get
  // their own group to delegate into: a memrun inside a test runs its own
  // tests under their own limits, below the outer one.
  std::string inner = dir.write("inner.yaml", "tests:\n  - {name: fits, memory: 32MiB, run: '" + workload() +
                                                  " --touch 8MiB'}\n  - {name: too-big, memory: 32MiB, expect: oom, "
                                                  "run: '" + workload() + " --touch 64MiB'}\n");
  std::string nested = shell_quote(memrun_bin()) + " " + inner + " --json " + dir.path() + "/inner.json --run-dir " + dir.path() +
                       "/inner-runs";
  // sub_groups: on v1 the inner run's groups are sub-groups of the outer
  // test's, where the kernel charges sockets only if their TCP limit is
  // written first (the inner memrun writes it; the outer cannot know).
  auto run = run_spec(dir, "tests:\n  - {name: outer, memory: 256MiB, sub_groups: true, run: " + yaml_quoted(nested) + "}\n");
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_TRUE(test_named(run, "outer")["passed"]) << run.out;
  auto report = nlohmann::json::parse(read_text(dir.path() + "/inner.json", "{}"));
  ASSERT_EQ(report["tests"].size(), 2u) << report.dump();
  EXPECT_EQ(report["tests"][0]["outcome"], "pass") << report.dump();
  EXPECT_EQ(report["tests"][1]["outcome"], "oom") << report.dump();
  // (At least one: a nested sealed run on v2 has counted the victim twice.)
  EXPECT_GE(report["tests"][1]["oom_kills"], 1) << report.dump();
}

TEST_F(Trust, SubGroupsATestMakesAreKilledCountedAndRemovedAndTheReportIsWritten) {
  // One test leaves a sleeper in a sub-group of its own group; another, of
  // 256 MiB, OOMs inside a sub-group with a 4 MiB limit of its own (v1
  // counts that OOM only in the sub-group): a kill under a limit the test
  // set is counted, but is no `oom` that `expect: oom` accepts.
  std::string sleeper = dir.path() + "/sleeper.pid";
  std::string leave = kFindGroup + "mkdir $G/sub && { sleep 300 & echo $! " + kPidNs + " > " + sleeper +
                      "; echo $! > $G/sub/cgroup.procs; }";
  std::string oom_below = kFindGroup +
                          "mkdir $G/sub && echo $$ > $G/sub/cgroup.procs || exit 99; "
                          "if [ $L = memory.max ]; then echo +memory > $G/cgroup.subtree_control || exit 98; fi; "
                          "echo 4M > $G/sub/$L || exit 97; exec {W} --touch 64MiB";
  std::string xml = dir.path() + "/junit.xml";
  auto run = run_spec(dir,
                      "tests:\n  - {name: leaves-a-sub-group, run: " + yaml_quoted(leave) + ", memory: 64MiB, sub_groups: true}\n" +
                          "  - {name: ooms-below, run: " + yaml_quoted(oom_below) + ", memory: 256MiB, expect: oom}\n",
                      {"--junit", xml});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  ASSERT_EQ(run.report["tests"].size(), 2u) << run.out << run.err;
  EXPECT_TRUE(test_named(run, "leaves-a-sub-group")["passed"]) << run.out;
  EXPECT_TRUE(test_named(run, "leaves-a-sub-group")["cleanup_error"].is_null()) << run.out;
  const auto& below = test_named(run, "ooms-below");
  EXPECT_EQ(below["outcome"], "fail") << below.dump();
  EXPECT_FALSE(below["passed"]) << below.dump();
  EXPECT_NE(below["reason"].get<std::string>().find("under a limit the test set itself"), std::string::npos) << below;
  EXPECT_EQ(below["oom_kills"], 1) << below;
  EXPECT_TRUE(std::filesystem::exists(xml));
  int pid = pid_in_file(sleeper);
  EXPECT_GE(pid, 0);
  EXPECT_FALSE(process_alive(pid)) << "a process in a sub-group outlived the run";
}

TEST_F(Trust, GroupsNestedPastPathMaxAreWalkedKilledAndRemoved) {
  // 25 groups of 200-byte names below the test's own: their paths pass
  // PATH_MAX (4096), which open(2) and rmdir(2) refuse. A sleeper in the
  // deepest is killed, every group removed, the report written.
  std::string sleeper = dir.path() + "/sleeper.pid";
  std::string deep = kFindGroup +
                     "N=$(printf 'x%.0s' $(seq 200)); cd $G || exit 99; "
                     "for i in $(seq 25); do mkdir $N && cd $N || exit 98; done; "
                     "sleep 300 & echo $! > cgroup.procs || exit 97; echo $! " + kPidNs + " > " + sleeper;
  // bash: dash's cd refuses a folder whose path is longer than PATH_MAX.
  std::string script = dir.write("deep.sh", deep);
  auto run = run_spec(dir, "tests:\n  - {name: deep, run: 'bash " + script + "', memory: 64MiB}\n");
  ASSERT_TRUE(run.exit_code == 0 || run.exit_code == 1) << run.out << run.err;
  const auto& t = test_named(run, "deep");
  EXPECT_EQ(t["exit_code"], 0) << t;
  EXPECT_TRUE(t["cleanup_error"].is_null()) << t;
  int pid = pid_in_file(sleeper);
  EXPECT_GE(pid, 0);
  EXPECT_FALSE(process_alive(pid)) << "a process in a deep sub-group outlived the run";
}

TEST_F(Trust, GcFromAnotherPidNamespaceNeverTouchesALiveRun) {
  if (::geteuid() != 0) GTEST_SKIP() << "unshare --pid needs root";
  if (::system("command -v unshare >/dev/null") != 0) GTEST_SKIP() << "unshare is missing";
  // Each run's test holds until the gc of the other namespace is done; it
  // passes only if that gc left it alone.
  std::string started = dir.path() + "/started", released = dir.path() + "/gc-done";
  std::string spec = dir.write("live.yaml", "tests:\n  - {name: live, memory: 32MiB, timeout: 2m, run: 'touch " + started +
                                                "; until [ -e " + released + " ]; do sleep 0.05; done'}\n");
  auto in_namespace = std::vector<std::string>{"unshare", "--pid", "--fork", "--mount-proc"};
  // Under systemd on v2 (the systemd VM) a run inside the namespace takes
  // the v2 backend below its own unit, whose other processes (this test's)
  // must move to a leaf before the unit may enable controllers; from inside
  // it cannot see them (cgroup.procs lists them as 0) and stops with EBUSY.
  // A v2 run from outside moves them first, as this suite's earlier tests
  // otherwise would: this test must not depend on them.
  if (read_text("/proc/1/comm", "").rfind("systemd", 0) == 0 && std::filesystem::exists("/sys/fs/cgroup/cgroup.controllers")) {
    auto ready = run_memrun({"--backend", "v2", "exec", "--memory", "16MiB", "true"});
    ASSERT_EQ(ready.exit_code, 0) << ready.out << ready.err;
  }
  for (bool run_inside : {false, true}) {
    SCOPED_TRACE(run_inside ? "a run in a new pid namespace, gc outside" : "a run outside, gc in a new pid namespace");
    std::filesystem::remove(started);
    std::filesystem::remove(released);
    std::vector<std::string> argv = run_inside ? in_namespace : std::vector<std::string>{};
    for (const auto& a : {memrun_bin(), spec, std::string("--json"), dir.path() + "/report.json", std::string("--run-dir"),
                          dir.path() + "/runs"})
      argv.push_back(a);
    auto live = start_program(argv);
    if (!wait_until([&] { return std::filesystem::exists(started); })) {
      ::kill(live.pid, SIGKILL);
      auto out = finish_program(live);
      FAIL() << "the live test never started: " << out.out << out.err;
    }
    std::vector<std::string> gc = run_inside ? std::vector<std::string>{} : in_namespace;
    gc.push_back(memrun_bin());
    gc.push_back("gc");
    auto collected = run_program(gc);
    EXPECT_EQ(collected.exit_code, 0) << collected.out << collected.err << "(the gc was killed?)";
    EXPECT_NE(collected.out.find("0 dead runs cleaned up"), std::string::npos) << collected.out;
    std::ofstream(released) << "done";
    auto run = finish_program(live);
    EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
    auto report = nlohmann::json::parse(read_text(dir.path() + "/report.json", "{}"));
    EXPECT_EQ(report["tests"][0]["outcome"], "pass") << report.dump();
  }
}

// memrun's own, whatever the backend: on the host only.
MEMRUN_LANES(Trust, "TheReproLineIsQuotedAndRerunsExactlyThatTest", kHostLane);
TEST_F(Trust, TheReproLineIsQuotedAndRerunsExactlyThatTest) {
  // A name that is shell code, a name that is a regex matching another
  // test, and an environment value with a quote.
  std::string hostile = "x';touch${IFS}PWNED;echo '";
  std::string yaml = "tests:\n  - {name: " + yaml_quoted(hostile) + ", run: 'echo ran-hostile', memory: 16MiB, env: {Q: \"it's\"}}\n"
                     "  - {name: a.b, run: 'echo ran-a.b', memory: 16MiB}\n"
                     "  - {name: axb, run: 'echo ran-axb', memory: 16MiB}\n";
  auto first = run_spec(dir, yaml);
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  for (const std::string& name : {hostile, std::string("a.b")}) {
    SCOPED_TRACE(name);
    auto repro = run_memrun({"repro", dir.path() + "/report.json", name});
    ASSERT_EQ(repro.exit_code, 0) << repro.err;
    // The line names the memrun that made the report; PATH leads to the
    // same one all the same.
    std::string path = std::filesystem::path(memrun_bin()).parent_path().string() + ":" + std::getenv("PATH");
    auto rerun = run_program({"env", "PATH=" + path, "sh", "-c", repro.out}, dir.path());
    EXPECT_EQ(rerun.exit_code, 0) << repro.out << rerun.out << rerun.err;
    EXPECT_NE(rerun.out.find(": 1 test on"), std::string::npos) << "not exactly one test: " << rerun.out;
    EXPECT_FALSE(std::filesystem::exists(dir.path() + "/PWNED")) << "the repro line ran the name: " << repro.out;
  }
}

// memrun's own, whatever the backend: on the host only.
MEMRUN_LANES(Trust, "OutputPathsAreCheckedBeforeAnyTestRunsAndCiOutputsNeedNoRunFolder", kHostLane);
TEST_F(Trust, OutputPathsAreCheckedBeforeAnyTestRunsAndCiOutputsNeedNoRunFolder) {
  std::string ran = dir.path() + "/ran";
  std::string spec = dir.write("spec.yaml", "tests:\n  - {name: t, run: 'touch " + ran + "', memory: 16MiB}\n");
  auto bad = run_memrun({spec, "--json", dir.path() + "/no/such/report.json", "--run-dir", dir.path() + "/runs"});
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("the folder " + dir.path() + "/no/such does not exist"), std::string::npos) << bad.err;
  EXPECT_FALSE(std::filesystem::exists(ran)) << "a test ran although the report could not be written";
  // A test that removes the run folder (git clean -fdx) costs no output.
  std::string xml = dir.path() + "/junit.xml", md = dir.path() + "/table.md";
  std::string cleaner = dir.write("clean.yaml", "tests:\n  - {name: cleaner, run: 'rm -rf " + dir.path() +
                                                    "/runs; exit 3', memory: 16MiB}\n");
  auto run = run_memrun({cleaner, "--junit", xml, "--markdown", md, "--run-dir", dir.path() + "/runs"});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_NE(read_text(xml).find("name=\"cleaner\""), std::string::npos) << run.err;
  EXPECT_NE(read_text(md).find("<code>cleaner</code>"), std::string::npos) << run.err;
}

TEST_F(Trust, AFifoOrALinkATestPlantsAtAReportsPathNeitherHangsMemrunNorTakesTheReport) {
  // The tests run where the reports go (a repository's folder): one turns
  // the JSON's path into a FIFO (memrun would wait for a reader forever),
  // the JUnit's into a link to another file, the Markdown's into a link to
  // /dev/null. Whether a path is written directly was settled before.
  std::string d = dir.path();
  std::string victim = dir.write("victim.txt", "keep\n");
  std::string plant = "rm -f " + d + "/report.json; mkfifo " + d + "/report.json; ln -s " + victim + " " + d +
                      "/junit.xml; ln -s /dev/null " + d + "/table.md";
  auto run = run_spec_with(dir, "tests:\n  - {name: planter, run: " + yaml_quoted(plant) + ", memory: 16MiB}\n",
                           {"timeout", "60", memrun_bin()}, {"--junit", d + "/junit.xml", "--markdown", d + "/table.md"});
  ASSERT_EQ(run.exit_code, 0) << "124: memrun hung on the FIFO\n" << run.out << run.err;
  EXPECT_TRUE(test_named(run, "planter")["passed"]);
  for (const char* name : {"/report.json", "/junit.xml", "/table.md"})
    EXPECT_TRUE(std::filesystem::is_regular_file(std::filesystem::symlink_status(d + name))) << name;
  EXPECT_NE(read_text(d + "/junit.xml").find("name=\"planter\""), std::string::npos);
  EXPECT_NE(read_text(d + "/table.md").find("<code>planter</code>"), std::string::npos);
  EXPECT_EQ(read_text(victim), "keep\n");
}

TEST_F(Trust, ATestGetsNoPacketSocketWhoseRingNoLimitCharges) {
  // A packet socket's ring is kernel memory charged to no cgroup: a test
  // could map 160 MiB of it under 16 MiB. Refused, sealed or not (as root,
  // where the socket needs CAP_NET_RAW).
  if (::geteuid() != 0) GTEST_SKIP() << "a packet socket needs CAP_NET_RAW: as root";
  std::string open_one = "exec python3 -c 'import socket; socket.socket(socket.AF_PACKET, socket.SOCK_RAW)'";
  for (bool host_cgroups : {false, true}) {
    SCOPED_TRACE(host_cgroups ? "--host-cgroups" : "sealed");
    std::vector<std::string> extra;
    if (host_cgroups) extra.push_back("--host-cgroups");
    auto run = run_spec(dir, "tests:\n  - {name: packet, run: " + yaml_quoted(open_one) + ", memory: 64MiB}\n", extra);
    const auto& t = test_named(run, "packet");
    EXPECT_FALSE(t["passed"]) << t.dump();
    EXPECT_NE(t["log_tail"].get<std::string>().find("Address family not supported"), std::string::npos) << t.dump();
  }
}

// memrun's own, whatever the backend: on the host only.
MEMRUN_LANES(Trust, "NoTestDataStartsAConsoleLineOrAWorkflowCommand", kHostLane);
TEST_F(Trust, NoTestDataStartsAConsoleLineOrAWorkflowCommand) {
  // A program name with a line break: the reason quotes it.
  std::string yaml = "tests:\n  - {name: t, run: [\"no-such\\n::warning::injected\"], memory: 16MiB}\n";
  std::string summary = dir.path() + "/summary.md";
  auto run = run_spec_with(dir, yaml, {"env", "GITHUB_ACTIONS=true", "GITHUB_STEP_SUMMARY=" + summary, memrun_bin()});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  std::istringstream lines(run.out + run.err);
  int commands = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("::", 0) != 0) continue;
    ++commands;
    EXPECT_EQ(line.rfind("::error title=memrun%3A t ", 0), 0u) << "a line memrun did not mean as a command: " << line;
  }
  EXPECT_EQ(commands, 1) << run.out;  // memrun's own annotation of the failure
}

TEST_F(Trust, DevShmIsTheTestsOwnAndGoesWithIt) {
  // What a test writes to /dev/shm is charged to it while it runs, and
  // gone with it: nothing outlives the test uncharged, nothing of another
  // test (or of the host) is there to see.
  std::string name = "memrun-trust-" + std::to_string(::getpid());
  std::string seen = dir.path() + "/seen";
  auto run = run_spec(dir, "tests:\n  - {name: shm, run: 'ls -A /dev/shm | wc -l > " + seen +
                               "; head -c 40000000 /dev/zero > /dev/shm/" + name + "', memory: 64MiB}\n");
  const auto& t = test_named(run, "shm");
  EXPECT_TRUE(t["passed"]) << run.out;
  EXPECT_GE(t["peak_bytes"].get<uint64_t>(), 40000000u) << "the test's shmem was not charged to it";
  EXPECT_FALSE(std::filesystem::exists("/dev/shm/" + name)) << "the test's /dev/shm file outlived it";
  EXPECT_EQ(t["tmpfs_left_bytes"], 0u) << run.out;
  EXPECT_EQ(trimmed(read_text(seen)), "0") << "the test saw the host's /dev/shm";
}

TEST_F(Trust, MemoryLeftInASharedTmpfsIsReported) {
  // A tmpfs the test can reach but memrun does not replace (here one the
  // harness mounts): what the test leaves there outlives it, and no limit
  // covers it; the report says how much.
  std::string shared = dir.path() + "/tmpfs";
  std::filesystem::create_directories(shared);
  ASSERT_EQ(::mount("memrun-test", shared.c_str(), "tmpfs", 0, "size=64m"), 0) << std::strerror(errno);
  auto run = run_spec(dir, "tests:\n  - {name: leaves, run: 'head -c 40000000 /dev/zero > " + shared + "/left', memory: 64MiB}\n");
  ::umount2(shared.c_str(), MNT_DETACH);
  EXPECT_GE(test_named(run, "leaves")["tmpfs_left_bytes"], 40000000u) << run.out;
  EXPECT_NE(run.out.find("in files of a shared tmpfs"),
            std::string::npos)
      << run.out;
}

// Page cache reads the same v2 files whichever backend made the group.
MEMRUN_LANES(Trust, "AShortBurstBesidePageCache*", kHostLane | kV2Lane);
TEST_F(Trust, AShortBurstBesidePageCacheNeverPassesOnTheEstimate) {
  // Reading a file larger than the limit (cold: declared as an input) keeps
  // usage at the limit with page cache; a burst of 110 MiB of anonymous
  // memory, freed at once, then only makes the kernel reclaim cache, and
  // more reading refills it. The test needs 110 MiB of its 128 MiB (a bisect
  // finds it): headroom excluding page cache must say so, not 40%. (Sampled
  // every 20 ms, the estimate missed most of the burst: 23 to 46 MiB.)
  if (on_tmpfs(dir.path()))
    GTEST_SKIP() << dir.path() << " is on tmpfs: reading a file there charges no page cache to the reader (the "
                                  "host suite, on a disk, proves this)";
  std::string big = dir.path() + "/big.bin";
  write_mib(big, 384);
  auto run = run_spec(dir, "tests:\n  - {name: burst, run: 'cat " + big + " > /dev/null; {W} --touch 110MiB --hold 1ms; cat " +
                               big + " > /dev/null', memory: 128MiB, min_headroom: 40%, inputs: [" + big + "]}\n");
  const auto& t = test_named(run, "burst");
  EXPECT_FALSE(t["passed"]) << run.out;
  EXPECT_EQ(run.exit_code, 1) << run.out;
  // 110 MiB touched, the workload's own pages, and what a 2 ms sample can
  // miss of the touching (a few MiB).
  EXPECT_LE(t["headroom_bytes"].get<int64_t>(), int64_t{30} << 20) << t.dump();
}

// Thrash reads the same v2 files whichever backend made the group.
MEMRUN_LANES(Trust, "AThrashingTest*", kHostLane | kV2Lane);
TEST_F(Trust, AThrashingTestEndsWithItsOwnVerdictNotAtTheTimeout) {
  // A working set of 64 MiB (a file mapped and read over and over, cold:
  // declared as an input) under a 16 MiB limit: every pass reads back from
  // disk what the last one had, and the program needs every page of it. No
  // OOM kill comes (page cache is reclaimed, never killed for); without
  // memrun the test would run until its timeout.
  if (on_tmpfs(dir.path()))
    GTEST_SKIP() << dir.path() << " is on tmpfs: its pages are never evicted and read back (the host suite, on a "
                                  "disk, proves this)";
  std::string data = dir.path() + "/data.bin";
  write_mib(data, 64);
  // The kernel may end such a test with an OOM kill instead, when reclaim
  // makes no progress in time (seen on a loaded host, one run in six): a
  // verdict as true, but not the one this test proves. Up to three runs
  // then, each held to "never passes"; thrash must be seen in one of them.
  RunOutput run;
  for (int tries = 0; tries < 3; ++tries) {
    run = run_spec(dir, "tests:\n  - {name: maps, run: '{W} --map " + data +
                            "', memory: 16MiB, timeout: 120s, inputs: [" + data + "]}\n"
                            "  - {name: expected, run: '{W} --map " + data +
                            "', memory: 16MiB, timeout: 120s, inputs: [" + data + "], expect: oom}\n");
    const auto& t = test_named(run, "maps");
    EXPECT_FALSE(t["passed"]) << run.out;
    EXPECT_TRUE(t["outcome"] == "thrash" || t["outcome"] == "oom") << run.out;
    EXPECT_LT(t["duration_s"].get<double>(), 60.0) << "it ran toward its timeout";
    // A test that must not fit its limit passes by thrashing, as by an OOM kill.
    const auto& expected = test_named(run, "expected");
    EXPECT_TRUE(expected["outcome"] == "thrash" || expected["outcome"] == "oom") << run.out;
    EXPECT_TRUE(expected["passed"]) << run.out;
    if (t["outcome"] == "thrash") break;
  }
  const auto& t = test_named(run, "maps");
  ASSERT_EQ(t["outcome"], "thrash") << "three runs, each ended by an OOM kill: " << run.out;
  EXPECT_NE(t["reason"].get<std::string>().find("its working set does not fit in 16.0 MiB"), std::string::npos)
      << t["reason"];
}

// Page cache reads the same v2 files whichever backend made the group.
MEMRUN_LANES(Trust, "ReReading*", kHostLane | kV2Lane);
TEST_F(Trust, ReReadingAFileLargerThanTheLimitIsNoThrashing) {
  // 20 sequential passes over a 128 MiB file under 64 MiB, with read(): each
  // pass reads back what the one before had (ten times the limit and more
  // in 5 s on a fast disk), yet the program needs a buffer of it. It is a
  // stream, not a working set that does not fit: the test passes.
  if (on_tmpfs(dir.path()))
    GTEST_SKIP() << dir.path() << " is on tmpfs: its pages are never evicted and read back (the host suite, on a "
                                  "disk, proves this)";
  std::string data = dir.path() + "/data.bin";
  write_mib(data, 128);
  auto run = run_spec(dir, "tests:\n  - {name: rereads, run: 'for i in $(seq 20); do cat " + data +
                               " > /dev/null; done', memory: 64MiB, timeout: 300s, inputs: [" + data + "]}\n"
                               "  - {name: 'off', run: '{W} --map " + data +
                               " & sleep 6; kill $!', memory: 16MiB, timeout: 300s, thrash: off, inputs: [" + data +
                               "]}\n");
  const auto& t = test_named(run, "rereads");
  EXPECT_EQ(t["outcome"], "pass") << t["reason"] << run.out;
  // With `thrash: off`, even a working set that does not fit runs on:
  // memrun never ends it for thrashing. The kernel may still OOM-kill it
  // when reclaim of its mapped pages keeps failing (seen once in a loaded
  // full run): that is the kernel's verdict, with its kill counted.
  const auto& off = test_named(run, "off");
  EXPECT_NE(off["outcome"], "thrash") << off["reason"] << run.out;
  EXPECT_TRUE(off["outcome"] == "pass" || (off["outcome"] == "oom" && off["oom_kills"].get<int>() > 0))
      << off["reason"] << run.out;
}

// memrun's own, whatever the backend: on the host only.
MEMRUN_LANES(Trust, "TestsSeeMemrunsVariablesOnceWhateverTheCallerSet", kHostLane);
TEST_F(Trust, TestsSeeMemrunsVariablesOnceWhateverTheCallerSet) {
  auto run = run_spec_with(dir, "tests:\n  - {name: inner, run: 'env | grep -E \"^MEMRUN_(TEST|MEMORY_LIMIT)=\"', memory: 16MiB}\n",
                           {"env", "MEMRUN_TEST=outer", "MEMRUN_MEMORY_LIMIT=1", memrun_bin()});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  std::string out = read_text(test_named(run, "inner")["stdout"].get<std::string>());
  EXPECT_EQ(out, "MEMRUN_TEST=inner\nMEMRUN_MEMORY_LIMIT=16777216\n");
}

}  // namespace
}  // namespace memrun::testing

// The systemd backend against a real systemd 252 as PID 1: as root (system
// manager) and as an unprivileged user with a lingering user manager. These
// run in the systemd VM (tests/vm/); elsewhere they skip, unless
// MEMRUN_REQUIRE_SYSTEMD=1 (as that VM suite sets) makes that a failure.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cgroup/cgroup.h"
#include "harness.h"
#include "lanes.h"

namespace memrun::testing {
namespace {

const char* kSpec = R"(tests:
  - {name: fits, run: [{W}, --touch, 48MiB], memory: 96MiB}
  - {name: ooms, run: [{W}, --touch, 200MiB], memory: 64MiB, expect: oom}
)";

// Runs a shell command as root for the test's set-up; fails the test if it fails.
void sh(const std::string& command) {
  auto r = run_program({"sh", "-c", command});
  ASSERT_EQ(r.exit_code, 0) << command << "\n" << r.out << r.err;
}

// A user with a lingering user manager; optionally without the memory
// controller, taken away as an administrator would: systemd 252 makes
// memory available to user@UID.service whenever a sibling accounts memory,
// whatever its Delegate= says, so it is disabled on the user's slice.
void ensure_user(const std::string& name, int uid, bool without_memory = false) {
  std::string u = std::to_string(uid);
  if (without_memory)
    sh("mkdir -p /etc/systemd/system/user-" + u + ".slice.d && printf '[Slice]\\nDisableControllers=memory\\n' > "
       "/etc/systemd/system/user-" + u + ".slice.d/memory.conf && systemctl daemon-reload");
  sh("id " + name + " >/dev/null 2>&1 || useradd -m -u " + u + " " + name);
  sh("loginctl enable-linger " + name + " && for i in $(seq 300); do [ -S /run/user/" + u +
     "/systemd/private ] && exit 0; sleep 0.1; done; exit 1");  // bounded at 30 s
}

std::vector<std::string> as_user(const std::string& name, int uid) {
  return {"runuser", "-u", name, "--", "env", "XDG_RUNTIME_DIR=/run/user/" + std::to_string(uid), memrun_bin()};
}

// memrun's units (memrun-<run id>.scope, memrun-doctor-<pid>.scope) and
// cgroups, anywhere: none may outlive a run. (memrun-vm.* is the VM's own
// unit.) systemd ends an empty scope asynchronously: wait a little.
std::string leftovers(const std::string& user = "", int uid = 0) {
  const std::string units = " list-units --all --no-legend 'memrun-[0-9]*' 'memrun-doctor-*'";
  std::string list = user.empty() ? "systemctl" + units
                                  : "runuser -u " + user + " -- env XDG_RUNTIME_DIR=/run/user/" +
                                        std::to_string(uid) + " systemctl --user" + units;
  std::string found;
  wait_until([&] {
    auto units = run_program({"sh", "-c", list});
    auto dirs = run_program({"sh", "-c", "find /sys/fs/cgroup -type d -name 'memrun-[0-9]*' -o -type d -name 'memrun-doctor-*'"});
    found = units.out + dirs.out;
    return found.empty();
  }, 30);
  return found;
}

class Systemd : public MemrunTest {
 protected:
  void SetUp() override {
    if (cgroup::host().systemd_pid1 && cgroup::host().mode == cgroup::Mode::unified) {
      ::chmod(dir.path().c_str(), 0777);  // the unprivileged user writes its report there
      return;
    }
    const char* require = std::getenv("MEMRUN_REQUIRE_SYSTEMD");
    if (require && std::string(require) == "1") FAIL() << "systemd as PID 1 with cgroup v2 is required here";
    GTEST_SKIP() << "PID 1 is not systemd on cgroup v2 here (the systemd VM suite runs these)";
  }
};

// The systemd backend's own: in the systemd VM only.
MEMRUN_LANES(Systemd, "*", kSystemdLane);

TEST_F(Systemd, AsRootAScopeFromTheSystemManagerSurvivesATestsOom) {
  auto run = run_spec(dir, kSpec, {"--backend", "systemd"});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(run.report["host"]["backend"], "systemd");
  EXPECT_NE(run.report["host"]["cgroup_path"].get<std::string>().find("/system.slice/memrun-"), std::string::npos);
  EXPECT_EQ(test_named(run, "ooms")["outcome"], "oom");
  EXPECT_GE(test_named(run, "fits")["peak_bytes"], 48u << 20);
  EXPECT_EQ(leftovers(), "");
}

TEST_F(Systemd, AnUnprivilegedUserGetsADelegatedScope) {
  ensure_user("memrun-user", 1500);
  auto run = run_spec_with(dir, kSpec, as_user("memrun-user", 1500));
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(run.report["host"]["backend"], "systemd");  // auto, without root
  EXPECT_NE(run.report["host"]["cgroup_path"].get<std::string>().find("/user@1500.service/"), std::string::npos);
  const auto& ooms = test_named(run, "ooms");
  EXPECT_EQ(ooms["outcome"], "oom");  // the limit held, and memrun lived to say so
  EXPECT_GE(ooms["oom_kills"], 1);
  EXPECT_EQ(test_named(run, "fits")["outcome"], "pass");
  EXPECT_GE(test_named(run, "fits")["peak_bytes"], 48u << 20);
  EXPECT_EQ(leftovers("memrun-user", 1500), "");

  auto doctor = run_program({"runuser", "-u", "memrun-user", "--", "env", "XDG_RUNTIME_DIR=/run/user/1500",
                             memrun_bin(), "doctor"});
  EXPECT_EQ(doctor.exit_code, 0) << doctor.out;
  EXPECT_NE(doctor.out.find("systemd (auto)"), std::string::npos) << doctor.out;
  EXPECT_NE(doctor.out.find("delegated          cpu memory pids"), std::string::npos) << doctor.out;
}

TEST_F(Systemd, AUsersScopeRunsTestsInParallelWithinTheBudget) {
  ensure_user("memrun-user", 1500);
  // The first two meet at a barrier (a folder the user may write), so that
  // two ran at once is certain; the budget allows no more than two.
  std::string barrier = dir.path() + "/barrier";
  std::filesystem::create_directory(barrier);
  ::chmod(barrier.c_str(), 0777);
  std::string yaml = "tests:\n";
  for (int i = 1; i <= 4; ++i)
    yaml += "  - {name: t" + std::to_string(i) + ", run: [{W}, --arrive, " + barrier +
            ", --touch, 30MiB, --hold, 500ms], memory: 64MiB}\n";
  auto run = run_spec_with(dir, yaml, as_user("memrun-user", 1500), {"-j", "4", "--memory-budget", "128MiB"});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(run.report["host"]["backend"], "systemd");
  for (const auto& t : run.report["tests"]) EXPECT_GE(t["peak_bytes"], 30u << 20) << t["name"];
  EXPECT_LE(most_at_once(run.report["tests"]), 2) << times_of(run.report["tests"]);
  EXPECT_GE(most_at_once(run.report["tests"]), 2) << times_of(run.report["tests"]);
  EXPECT_EQ(leftovers("memrun-user", 1500), "");
}

TEST_F(Systemd, WithoutMemoryDelegatedItRefusesWithTheFix) {
  ensure_user("memrun-nodeleg", 1501, true);
  auto doctor = run_program({"runuser", "-u", "memrun-nodeleg", "--", "env", "XDG_RUNTIME_DIR=/run/user/1501",
                             memrun_bin(), "doctor"});
  EXPECT_EQ(doctor.exit_code, 3) << doctor.out;
  EXPECT_NE(doctor.out.find("the memory controller is not delegated to the user manager"), std::string::npos)
      << doctor.out;
  EXPECT_NE(doctor.out.find("Delegate=pids memory"), std::string::npos) << doctor.out;
  auto run = run_spec_with(dir, kSpec, as_user("memrun-nodeleg", 1501));
  EXPECT_EQ(run.exit_code, 3) << run.out << run.err;
  EXPECT_NE(run.err.find("fix:"), std::string::npos) << run.err;
  EXPECT_EQ(leftovers("memrun-nodeleg", 1501), "");
}

TEST_F(Systemd, SigtermToMemrunCleansUpTheScope) {
  ensure_user("memrun-user", 1500);
  std::string pidfile = dir.path() + "/daemon.pid";
  std::string spec = dir.write("spec.yaml", "tests:\n  - {name: long, run: [" + workload() + ", --daemon, " +
                                                pidfile + ", --hold, 1h], memory: 64MiB}\n");
  auto argv = as_user("memrun-user", 1500);
  for (const auto& a : {spec, std::string("--json"), dir.path() + "/report.json", std::string("--run-dir"), dir.path() + "/runs"})
    argv.push_back(a);
  auto started = start_program(argv);
  if (!wait_for_file(pidfile)) {
    ::kill(started.pid, SIGKILL);
    auto r = finish_program(started);
    FAIL() << "the test never started:\n" << r.out << r.err;
  }
  // runuser forwards SIGTERM to memrun.
  ::kill(started.pid, SIGTERM);
  auto run = finish_program(started);
  EXPECT_EQ(run.exit_code, 143) << run.out << run.err;
  EXPECT_FALSE(process_alive(pid_in_file(pidfile)));
  EXPECT_NE(read_text(dir.path() + "/report.json").find("\"interrupted\""), std::string::npos);
  EXPECT_EQ(leftovers("memrun-user", 1500), "");
}

TEST_F(Systemd, ATestCannotEscapeThroughTheUsersServiceManager) {
  // A manager starts a scope or a service of its own, outside the test's
  // group and limit; a service is not even the test's descendant. Tests get
  // no route to a manager: not by the variables (not inherited), not by the
  // well-known paths (covered in the test's mount namespace; as a user, in
  // a user namespace of its own), as the user and as root.
  ensure_user("memrun-user", 1500);
  const std::string bus =
      "XDG_RUNTIME_DIR=/run/user/$(id -u) DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/$(id -u)/bus";
  const std::string user_yaml =
      "tests:\n"
      "  - {name: scope, memory: 64MiB, run: 'systemd-run --user --scope -q {W} --touch 200MiB'}\n"
      "  - {name: service, memory: 64MiB, run: 'systemd-run --user --unit=escaped-$$ sleep 600'}\n"
      "  - {name: rebuilt-scope, memory: 64MiB, run: '" + bus + " systemd-run --user --scope -q {W} --touch 200MiB'}\n"
      "  - {name: rebuilt-service, memory: 64MiB, run: '" + bus + " systemd-run --user --unit=escaped-r$$ sleep 600'}\n"
      "  - {name: manager, memory: 64MiB, run: 'XDG_RUNTIME_DIR=/run/user/$(id -u) systemctl --user show -p Version'}\n"
      // Around the cover: unmounted from a namespace of the test's own
      // (the kernel copies it there locked), or seen through another
      // process's root (refused across user namespaces).
      "  - {name: unmounted, memory: 64MiB, run: 'u=$(id -u); unshare -Urm sh -c \"umount /run/user/$u/bus; "
      "umount /run/user/$u/systemd/private; XDG_RUNTIME_DIR=/run/user/$u systemctl --user show -p Version\"'}\n"
      "  - {name: through-proc, memory: 64MiB, run: 'for p in /proc/[0-9]*; do [ -S $p/root/run/user/$(id -u)/bus ] "
      "&& exit 0; done; exit 1'}\n"
      "  - {name: allowed, memory: 64MiB, service_manager: true, run: 'systemctl --user show -p Version'}\n";
  const std::string root_yaml =
      "tests:\n"
      "  - {name: scope, memory: 64MiB, run: 'systemd-run --scope -q {W} --touch 200MiB'}\n"
      "  - {name: service, memory: 64MiB, run: 'systemd-run --unit=escaped-$$ sleep 600'}\n"
      "  - {name: manager, memory: 64MiB, run: 'systemctl show -p Version'}\n"
      "  - {name: allowed, memory: 64MiB, service_manager: true, run: 'systemctl show -p Version'}\n";
  for (bool as_root : {false, true}) {
    SCOPED_TRACE(as_root ? "root" : "user");
    auto run = as_root ? run_spec(dir, root_yaml) : run_spec_with(dir, user_yaml, as_user("memrun-user", 1500));
    EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
    EXPECT_EQ(run.report["tests"].size(), as_root ? 4u : 8u) << run.out << run.err;
    // The route is there (the spec asked for it): what the others show is
    // its absence, not a manager that was never up.
    EXPECT_TRUE(test_named(run, "allowed")["passed"]) << run.out;
    for (const auto& t : run.report["tests"]) {
      if (t["name"] == "allowed") continue;
      EXPECT_FALSE(t["passed"]) << t["name"] << run.out;
      // Refused at the door: the manager was never reached, so nothing
      // was moved or started (an escape found later would say so).
      EXPECT_EQ(t["escaped_processes"], 0) << t["name"] << run.out;
    }
    std::string systemctl = as_root ? "systemctl" : "runuser -u memrun-user -- env XDG_RUNTIME_DIR=/run/user/1500 systemctl --user";
    auto units = run_program({"sh", "-c", systemctl + " list-units --all --no-legend 'escaped-*' 'run-*.scope'"});
    EXPECT_EQ(units.out, "") << "a test had the manager start a unit outside its group";
  }
  EXPECT_EQ(run_program({"pgrep", "-f", "memrun-workload --touch 200MiB"}).exit_code, 1);
}

// Without root, the mount namespace that keeps a test from the manager is
// also where it gets a /dev/shm of its own: what it writes there is charged
// to it and goes with it, and the host's is out of its sight.
TEST_F(Systemd, AUsersTestGetsADevShmOfItsOwn) {
  ensure_user("memrun-user", 1500);
  const std::string marker = "/dev/shm/memrun-host-" + std::to_string(::getpid());
  sh("touch " + marker);
  const std::string name = "memrun-user-" + std::to_string(::getpid());
  auto run = run_spec_with(dir,
                           "tests:\n  - {name: shm, memory: 64MiB, run: '[ ! -e " + marker +
                               " ] && head -c 40000000 /dev/zero > /dev/shm/" + name + "'}\n",
                           as_user("memrun-user", 1500));
  std::filesystem::remove(marker);
  const auto& t = test_named(run, "shm");
  EXPECT_TRUE(t["passed"]) << "the test saw the host's /dev/shm, or could not write its own:\n" << run.out << run.err;
  EXPECT_GE(t["peak_bytes"].get<uint64_t>(), 40000000u) << "the test's shmem was not charged to it";
  EXPECT_FALSE(std::filesystem::exists("/dev/shm/" + name)) << "the test's /dev/shm file outlived it";
  EXPECT_EQ(t["tmpfs_left_bytes"], 0u) << run.out;
}

// A test allowed to reach the manager (service_manager: true) that gets it
// to move it into a scope of its own, outside its limit: memrun finds it
// outside its group while it runs, fails the test, and kills it with the
// rest. As root, the system's manager does the same for `systemd-run --scope`.
TEST_F(Systemd, ATestTheServiceManagerMovedOutOfItsGroupDoesNotPass) {
  ensure_user("memrun-user", 1500);
  const std::string bus =
      "XDG_RUNTIME_DIR=/run/user/$(id -u) DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/$(id -u)/bus";
  const std::string moved = "{name: moved, memory: 64MiB, service_manager: true, run: '" + bus +
                            " systemd-run --user --scope -q {W} --touch 200MiB --hold 3s'}";
  // The same, left running in its scope while the test exits at once.
  const std::string left = "{name: left, memory: 64MiB, service_manager: true, run: '" + bus +
                           " systemd-run --user --scope -q {W} --touch 200MiB --hold 60s & "
                           "for i in $(seq 200); do grep -q /run- /proc/$!/cgroup && break; sleep 0.05; done; exit 0'}";
  struct Case {
    std::string who, yaml;
    std::vector<std::string> prefix;
    size_t tests;
  };
  for (const auto& c : std::vector<Case>{
           {"user", "tests:\n  - " + moved + "\n  - " + left + "\n", as_user("memrun-user", 1500), 2},
           {"root", "tests:\n  - {name: moved, memory: 64MiB, service_manager: true, run: 'systemd-run --scope -q {W} "
                    "--touch 200MiB --hold 3s'}\n",
            {memrun_bin()}, 1},
       }) {
    SCOPED_TRACE(c.who);
    auto run = run_spec_with(dir, c.yaml, c.prefix);
    EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
    EXPECT_EQ(run.report["tests"].size(), c.tests) << run.out;
    for (const auto& t : run.report["tests"]) {
      EXPECT_FALSE(t["passed"]) << t["name"] << run.out;
      EXPECT_GE(t["escaped_processes"].get<int>(), 1) << t["name"] << run.out;
      EXPECT_NE(t["reason"].get<std::string>().find("moved out of its memory cgroup (into /"), std::string::npos)
          << t["name"] << ": " << t["reason"];
    }
    // Killed with the rest, though outside the group.
    EXPECT_TRUE(wait_until([] { return run_program({"pgrep", "-f", "memrun-workload --touch 200MiB"}).exit_code == 1; },
                           10))
        << "the moved process outlived the run";
  }
}

TEST_F(Systemd, ARootTestTheManagerMovesIntoAScopeBetweenTwoWalksDoesNotPass) {
  // The same trip, short: the scope touches 80 MiB outside the test's
  // 64 MiB and ends, and the test ends 2 s later, before the first walk
  // (every fifth sample: 25 s), which would find nothing outside. The
  // kernel's record of the move the manager made (memrun's watch, on for a
  // sealed run as root with such a test) fails it.
  auto run = run_spec_with(dir,
                           "tests:\n  - {name: trip, memory: 64MiB, service_manager: true, run: 'systemd-run --scope "
                           "-q {W} --touch 80MiB && sleep 2'}\n",
                           {memrun_bin()}, {"--sample-interval", "5s"});
  ASSERT_EQ(run.report["tests"].size(), 1u) << run.out << run.err;
  const auto& t = run.report["tests"][0];
  EXPECT_FALSE(t["passed"]) << t.dump();
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_NE(t["reason"].get<std::string>().find("moved out of its memory cgroup (into /"), std::string::npos) << t.dump();
}

TEST_F(Systemd, WhatASigkilledRunLeftInItsScopeIsCollectedByGc) {
  // A scope ends only with its last process: SIGKILL leaves it running
  // with the test's daemon. gc (as the user, then as root) must end it.
  ensure_user("memrun-user", 1500);
  for (bool as_root : {false, true}) {
    SCOPED_TRACE(as_root ? "root" : "user");
    std::string pidfile = dir.path() + (as_root ? "/root.pid" : "/user.pid");
    std::string spec = dir.write("spec.yaml", "tests:\n  - {name: long, run: [" + workload() + ", --daemon, " +
                                                  pidfile + ", --hold, 1h], memory: 64MiB}\n");
    auto memrun = as_root ? std::vector<std::string>{memrun_bin(), "--backend", "systemd"} : as_user("memrun-user", 1500);
    auto argv = memrun;
    // Unsealed: a sealed test's daemon dies with its pid namespace, whose
    // init dies with memrun; nothing would be left to collect.
    for (const auto& a : {spec, std::string("--run-dir"), dir.path() + "/runs", std::string("--host-cgroups")})
      argv.push_back(a);
    auto started = start_program(argv);
    ASSERT_TRUE(wait_for_file(pidfile)) << "the test never started";
    // runuser would forward a SIGKILL no more than any process can: kill
    // memrun itself, the youngest memrun process.
    sh("pkill -KILL -n -x memrun");
    finish_program(started);
    int daemon = pid_in_file(pidfile);
    ASSERT_TRUE(process_alive(daemon)) << "nothing was left to collect: the test proves nothing";
    auto gc = memrun;
    gc.push_back("gc");
    auto collected = run_program(gc);
    EXPECT_EQ(collected.exit_code, 0) << collected.out << collected.err;
    EXPECT_NE(collected.out.find("1 dead run cleaned up"), std::string::npos) << collected.out << collected.err;
    EXPECT_TRUE(wait_until([&] { return !process_alive(daemon); })) << "gc left the dead run's daemon";
    EXPECT_EQ(as_root ? leftovers() : leftovers("memrun-user", 1500), "");
  }
}

}  // namespace
}  // namespace memrun::testing

// The systemd backend: for users without root, and for hosts where systemd
// owns the cgroup tree. memrun asks the service manager (the user manager
// when not root, the system manager when root) over D-Bus for one
// transient scope per run, `memrun-<run>.scope`, with itself in it and
// Delegate=yes; below the scope it manages the per-test groups with the v2
// code. One round trip per run, none per test.
//
// systemd rules this file obeys (systemd.scope(5), systemd.resource-control(5),
// "Control Group APIs and Delegation" in systemd's docs):
// - A process may only be moved between cgroups of a delegated subtree it
//   owns; the scope is that subtree. Its controllers are what the manager
//   delegates: the user manager passes on only those listed in
//   user@.service's Delegate= (Debian 12: cpu memory pids).
// - OOMPolicy= (scopes since 252) decides whether an OOM kill inside the
//   scope stops it. A test's OOM must not stop the scope, which holds
//   memrun: OOMPolicy=continue (the default with Delegate=yes, set anyway).
// - A scope ends when its last process exits, and CollectMode=
//   inactive-or-failed has systemd forget it even when it failed: memrun
//   leaves no unit behind, whether it exits or is killed.
// - JobRemoved may arrive before the reply to StartTransientUnit, so every
//   removed job is recorded and the one of our job looked up after.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <sstream>

#include "cgroup/cgroup.h"
#include "cgroup/error.h"
#include "cgroup/fs.h"
#include "cgroup/libsystemd.h"

namespace memrun::cgroup {
namespace {

bool root() { return ::geteuid() == 0; }

// libsystemd's functions; called only after connect_manager found them.
const SdBus& sd() { return *sd_bus_library(nullptr); }

std::string runtime_dir() {
  const char* x = std::getenv("XDG_RUNTIME_DIR");
  return x && *x ? x : "/run/user/" + std::to_string(::getuid());
}

/// The manager's own cgroup directory: the user manager's user@UID.service,
/// or the root for the system manager. Its cgroup.controllers are what a
/// scope of ours can get.
std::string manager_cgroup() {
  const Host& h = host();
  if (root()) return h.v2_mount;
  std::string uid = std::to_string(::getuid());
  return h.v2_mount + "/user.slice/user-" + uid + ".slice/user@" + uid + ".service";
}


// Connects to the manager: the bus first, then its private socket (which
// works without a D-Bus daemon, as systemctl does).
sd_bus* connect_manager(std::string* why) {
  if (!sd_bus_library(why)) return nullptr;
  sd_bus* bus = nullptr;
  int r = root() ? sd().open_system(&bus) : sd().open_user(&bus);
  if (r >= 0) return bus;
  std::string address = "unix:path=" + (root() ? std::string("/run/systemd") : runtime_dir() + "/systemd") + "/private";
  if (sd().new_bus(&bus) >= 0 && sd().set_address(bus, address.c_str()) >= 0 && sd().start(bus) >= 0) return bus;
  sd().unref(bus);
  *why = std::string("cannot reach the systemd ") + (root() ? "system" : "user") + " manager (" +
         std::strerror(-r) + ")";
  // The usual cause without root is the environment, not lingering.
  if (!root()) {
    std::string own = "/run/user/" + std::to_string(::getuid());
    const char* xdg = std::getenv("XDG_RUNTIME_DIR");
    if (xdg && *xdg && own != xdg && !fs::exists(std::string(xdg) + "/systemd/private"))
      *why += "; XDG_RUNTIME_DIR is " + std::string(xdg) + ", which holds no user manager: yours is " + own;
  }
  return nullptr;
}

// A D-Bus error, with what usually causes it.
std::string bus_error(const sd_bus_error& error, int r) {
  std::string msg = error.message ? error.message : std::strerror(-r);
  const char* address = std::getenv("DBUS_SESSION_BUS_ADDRESS");
  if (!root() && error.name && std::string(error.name) == "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired")
    msg += std::string(" (this was the system manager, not your user manager") +
           (address && *address ? ": DBUS_SESSION_BUS_ADDRESS=" + std::string(address) +
                                      " points elsewhere; unset it or use unix:path=/run/user/" +
                                      std::to_string(::getuid()) + "/bus"
                                : "") +
           ")";
  return msg;
}

struct Jobs {
  std::map<std::string, std::string> removed;  // job path -> result
};

int on_job_removed(sd_bus_message* m, void* userdata, sd_bus_error*) {
  uint32_t id;
  const char *path, *unit, *result;
  if (sd().message_read(m, "uoss", &id, &path, &unit, &result) >= 0)
    static_cast<Jobs*>(userdata)->removed[path] = result;
  return 0;
}

class SystemdBackend : public Backend {
 public:
  SystemdBackend(const std::string& run_name, bool seal) {
    std::string why;
    bus_ = connect_manager(&why);
    if (!bus_) unenforceable(make_problem(Problem::Kind::no_manager, "systemd", "", why));
    unit_ = run_name + ".scope";
    start_scope(run_name);
    // memrun is now in the scope; the host layout read earlier is stale.
    std::string self;
    std::istringstream lines(fs::read_file("/proc/self/cgroup").value_or(""));
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("0::", 0) == 0) self = line.substr(3);
    scope_dir_ = host().v2_mount + self;
    auto controllers = fs::trim(fs::read_file(scope_dir_ + "/cgroup.controllers").value_or(""));
    if (controllers.find("memory") == std::string::npos)
      unenforceable(make_problem(Problem::Kind::scope_without_memory, "systemd", unit_, controllers));
    v2_ = open_v2(scope_dir_, run_name, seal);
  }

  // Asks the manager for a transient scope holding memrun (Delegate=yes: the
  // tree below is memrun's) and waits for the start job to finish.
  void start_scope(const std::string& run_name) {
    // Subscribe before starting, so that the job's end cannot be missed.
    Jobs jobs;
    sd_bus_slot* slot = nullptr;
    sd_bus_error error = SD_BUS_ERROR_NULL;
    sd().match_signal(bus_, &slot, nullptr, "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
                        "JobRemoved", on_job_removed, &jobs);
    sd().call_method(bus_, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                       "org.freedesktop.systemd1.Manager", "Subscribe", &error, nullptr, "");
    sd().error_free(&error);

    sd_bus_message *m = nullptr, *reply = nullptr;
    int r = sd().message_new_method_call(bus_, &m, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                           "org.freedesktop.systemd1.Manager", "StartTransientUnit");
    std::string description = "run " + run_name;
    if (r >= 0) r = sd().message_append(m, "ss", unit_.c_str(), "fail");
    if (r >= 0) r = sd().message_open_container(m, 'a', "(sv)");
    if (r >= 0) r = sd().message_append(m, "(sv)", "Description", "s", description.c_str());
    if (r >= 0) r = sd().message_append(m, "(sv)", "PIDs", "au", 1, static_cast<uint32_t>(::getpid()));
    if (r >= 0) r = sd().message_append(m, "(sv)", "Delegate", "b", 1);
    if (r >= 0) r = sd().message_append(m, "(sv)", "OOMPolicy", "s", "continue");
    if (r >= 0) r = sd().message_append(m, "(sv)", "CollectMode", "s", "inactive-or-failed");
    if (r >= 0) r = sd().message_close_container(m);
    if (r >= 0) r = sd().message_append(m, "a(sa(sv))", 0);
    if (r >= 0) r = sd().call(bus_, m, 0, &error, &reply);
    sd().message_unref(m);
    if (r < 0) {
      std::string msg = bus_error(error, r);
      sd().error_free(&error);
      sd().slot_unref(slot);
      unenforceable(make_problem(Problem::Kind::scope_refused, "systemd", unit_, msg));
    }
    const char* job = nullptr;
    sd().message_read(reply, "o", &job);
    std::string job_path = job ? job : "";
    sd().message_unref(reply);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!jobs.removed.count(job_path) && std::chrono::steady_clock::now() < deadline) {
      if (sd().process(bus_, nullptr) > 0) continue;
      sd().wait(bus_, 100000);
    }
    sd().slot_unref(slot);
    auto it = jobs.removed.find(job_path);
    if (it == jobs.removed.end() || it->second != "done")
      unenforceable(make_problem(Problem::Kind::scope_not_started, "systemd", unit_,
                                 it == jobs.removed.end() ? "no answer within 30s" : "its job " + it->second));
  }

  ~SystemdBackend() override {
    v2_.reset();
    if (bus_) sd().flush_close_unref(bus_);
  }

  std::string name() const override { return "systemd"; }
  const std::string& run_path() const override { return v2_->run_path(); }
  std::unique_ptr<Group> create(const std::string& name, const Limits& limits) override {
    return v2_->create(name, limits);
  }
  uint64_t room() const override { return v2_->room(); }
  Capabilities probe(uint64_t limit) override { return v2_->probe(limit); }
  // The scope itself ends with memrun, its last process (see the top). A
  // SIGKILLed memrun's scope lives on with its tests: the next run's gc
  // (collect_garbage) empties it, and systemd then ends it.
  void close() override { v2_->close(); }

 private:
  sd_bus* bus_ = nullptr;
  std::string unit_, scope_dir_;
  std::unique_ptr<Backend> v2_;
};

}  // namespace

Verdict check_systemd() {
  Verdict v{"systemd", std::string(root() ? "system" : "user") + " manager, a scope " + kRunPrefix + "<run>.scope", {}};
  v.problem.root = root();
  const Host& h = host();
  if (h.mode != Mode::unified) {
    v.problem.kind = Problem::Kind::not_unified;
    return v;
  }
  std::string why;
  if (!sd_bus_library(&why)) {
    v.problem.kind = Problem::Kind::no_libsystemd;
    v.problem.detail = why;
    return v;
  }
  sd_bus* bus = connect_manager(&why);
  if (!bus) {
    v.problem.kind = Problem::Kind::no_manager;
    v.problem.detail = why;
    return v;
  }
  sd().flush_close_unref(bus);
  auto delegated = fs::read_file(manager_cgroup() + "/cgroup.controllers");
  if (delegated && delegated->find("memory") == std::string::npos) {
    v.problem.kind = Problem::Kind::memory_not_delegated;
    v.problem.path = manager_cgroup();
    v.problem.detail = fs::trim(*delegated);
  }
  return v;
}

std::string delegated_controllers() {
  return fs::trim(fs::read_file(manager_cgroup() + "/cgroup.controllers").value_or("(unknown)"));
}

std::vector<std::string> dead_scopes() {
  // Transient scopes land in a slice of the manager (system.slice,
  // app.slice, ...): a few levels below its cgroup, never deep.
  std::vector<std::string> found, level = {manager_cgroup()};
  for (int depth = 0; depth < 3 && !level.empty(); ++depth) {
    std::vector<std::string> next;
    for (const auto& dir : level) {
      for (const auto& dead : dead_runs(dir))
        if (dead.size() > 6 && dead.compare(dead.size() - 6, 6, ".scope") == 0) found.push_back(dead);
      for (const auto& child : children_of(dir))
        if (child.find(std::string("/") + kRunPrefix) == std::string::npos) next.push_back(child);
    }
    level = std::move(next);
  }
  return found;
}

std::unique_ptr<Backend> open_systemd(const std::string& run_name, bool seal) {
  return std::make_unique<SystemdBackend>(run_name, seal);
}

}  // namespace memrun::cgroup
